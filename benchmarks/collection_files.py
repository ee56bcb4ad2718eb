"""The PEtab benchmark collection's files for ``benchmarks/collection.py``: a problem's YAML, the
files its snapshot lacks, its size, and the llh of its own simulation table."""
from __future__ import annotations

from pathlib import Path


def find_yaml(folder):
    """The problem's YAML in ``folder`` (``<folder name>.yaml``, else ``problem.yaml``, else the only
    one that is not a ``petab_test_*`` file), or ``None``."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    for cand in (folder / f"{folder.name}.yaml", folder / "problem.yaml"):
        if cand.is_file():
            return cand
    ys = sorted(p for p in folder.glob("*.yaml") if not p.name.startswith("petab_test"))
    return ys[0] if len(ys) == 1 else None


def problem_size(folder):
    """Bytes of the folder's files: the driver runs small problems first."""
    return sum(p.stat().st_size for p in Path(folder).glob("*") if p.is_file())


def missing_files(yaml_path):
    """Files the YAML names that are absent (a snapshot without its large blobs)."""
    import yaml as pyyaml
    spec = pyyaml.safe_load(Path(yaml_path).read_text())
    folder = Path(yaml_path).parent
    par = spec.get("parameter_file") or []
    names = [par] if isinstance(par, str) else list(par)
    for prob in spec.get("problems") or []:
        for key in ("sbml_files", "condition_files", "measurement_files", "observable_files", "model_files"):
            v = prob.get(key) or []
            if isinstance(v, dict):    # PEtab 2 model_files: {id: {location: ...}}
                v = [x.get("location") for x in v.values()]
            names += [v] if isinstance(v, str) else list(v)
    return [n for n in names if n and not (folder / n).is_file()]


def simulation_table_llh(yaml_path):
    """llh of the collection's ``simulatedData_*.tsv`` against the measurements (petab's own
    ``calculate_llh``, noise parameters at their nominal values), or ``None`` without such a table."""
    sims = sorted(Path(yaml_path).parent.glob("simulatedData_*.tsv"))
    if not sims:
        return None
    import pandas as pd
    import petab.v1 as petab_v1
    from petab.v1.calculate import calculate_llh
    prob = petab_v1.Problem.from_yaml(str(yaml_path))
    table = pd.read_csv(sims[0], sep="\t")
    meas = prob.measurement_df
    # the tables' other columns may differ (noise parameters filled in as numbers, row order): pair
    # rows on observable, conditions and time (the k-th replicate with the k-th), keep the
    # measurement table's columns
    def keyed(df):
        df = df.copy()
        df["_pre"] = df["preequilibrationConditionId"].fillna("").astype(str) \
            if "preequilibrationConditionId" in df else ""
        df["_t"] = df["time"].astype(float).round(9)
        df["_k"] = df.groupby(["observableId", "simulationConditionId", "_pre", "_t"]).cumcount()
        return df
    keys = ["observableId", "simulationConditionId", "_pre", "_t", "_k"]
    m, t = keyed(meas).reset_index(drop=True), keyed(table)
    sim = m.merge(t[keys + ["simulation"]], on=keys, how="left", validate="one_to_one")
    if len(sim) != len(m) or sim["simulation"].isna().any():
        raise ValueError(f"{sims[0].name}: {int(sim['simulation'].isna().sum())} of {len(m)} measurements "
                         "have no simulated value")
    sim = sim.drop(columns=["_pre", "_t", "_k"])
    sim = sim.drop(columns=["measurement"])
    return float(calculate_llh(measurement_dfs=prob.measurement_df, simulation_dfs=sim,
                               observable_dfs=prob.observable_df, parameter_dfs=prob.parameter_df))
