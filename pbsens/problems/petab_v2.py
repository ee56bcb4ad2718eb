"""PEtab 2.0 problems, read by the ``petab`` library's ``petab.v2`` and turned into the v1 tables in memory.

pbsens builds its estimation problems from ``petab.v1.Problem`` tables (:mod:`.petab`). A v2 YAML
(``format_version: 2.x``) is read by ``petab.v2.Problem.from_yaml`` and converted here, table by
table, to an equivalent ``petab.v1.Problem`` (the library has a v1 -> v2 converter only):

* **experiments -> conditions.** An experiment is at most one preequilibration period
  (``time = -inf``) and one period starting at ``time = 0``; each becomes one v1 condition
  (the conditions a period applies, merged; none: an empty condition), and the measurement rows
  of the experiment get them as ``preequilibrationConditionId`` / ``simulationConditionId``.
  Experiments with more periods, or a period starting elsewhere, are refused (:class:`PetabError`
  naming the experiment file and row).
* **conditions**: the long ``conditionId, targetId, targetValue`` rows become the wide v1 table.
* **observables**: ``noiseDistribution`` ``log-normal`` / ``log-laplace`` becomes
  ``observableTransformation = log`` with ``normal`` / ``laplace``; the placeholders listed in
  ``observablePlaceholders`` / ``noisePlaceholders`` are renamed to v1's
  ``observableParameter{n}_{id}`` / ``noiseParameter{n}_{id}`` in the formulas.
* **parameters**: v2 has no ``parameterScale``: every parameter is estimated on its linear
  scale (``lin``); ``estimate`` true/false -> 1/0; ``priorDistribution`` ``normal``, ``laplace``,
  ``uniform``, ``log-normal``, ``log-laplace`` -> v1's prior types (others: :class:`PetabError`).
* A mapping table that renames entities is refused (not supported yet).

Error messages name the v2 files; row numbers of the measurement, observable and parameter
tables are those of the v2 files (same rows), those of the condition table refer to its
experiments.
"""
from __future__ import annotations

import math
import os
import re

from .tables import PetabError

__all__ = ["is_v2", "read_v2"]

_PRIORS = {"normal": "normal", "laplace": "laplace", "uniform": "uniform", "log-normal": "logNormal",
           "log-laplace": "logLaplace"}
_NOISE = {"normal": ("lin", "normal"), "laplace": ("lin", "laplace"), "log-normal": ("log", "normal"),
          "log-laplace": ("log", "laplace")}
#: Condition ids pbsens makes up (empty periods, merged conditions) start with this.
_EMPTY = "pbsens_no_condition"


def is_v2(cfg) -> bool:
    """Whether a loaded PEtab YAML (a dict) declares format version 2.x."""
    v = cfg.get("format_version") if isinstance(cfg, dict) else None
    return str(v).strip().split(".")[0] == "2"


def _files(yaml_path, cfg):
    base = os.path.dirname(os.path.abspath(yaml_path))
    files = {"yaml": yaml_path}
    for key, table in (("parameter_files", "parameter"), ("measurement_files", "measurement"),
                       ("observable_files", "observable"), ("condition_files", "condition"),
                       ("experiment_files", "experiment"), ("mapping_files", "mapping")):
        lst = cfg.get(key) or []
        lst = [lst] if isinstance(lst, str) else lst
        if len(lst) > 1:
            raise PetabError(f"PEtab problem file {yaml_path!r}, {key!r}: pbsens reads one file per table, "
                             f"the problem lists {len(lst)}")
        if lst:
            files[table] = os.path.join(base, lst[0])
    models = cfg.get("model_files") or {}
    if len(models) != 1:
        raise PetabError(f"PEtab problem file {yaml_path!r}, 'model_files': pbsens needs exactly one model, "
                         f"the problem lists {len(models)}")
    (mid, m), = models.items()
    if not isinstance(m, dict) or str(m.get("language", "")).lower() != "sbml":
        raise PetabError(f"PEtab problem file {yaml_path!r}, 'model_files', model {mid!r}: pbsens reads SBML "
                         f"models only, got language {m.get('language') if isinstance(m, dict) else m!r}")
    files["sbml"] = os.path.join(base, str(m.get("location")))
    return files


def read_v2(yaml_path, cfg, check_file_size):
    """``(petab.v1.Problem, files)`` of a PEtab 2.0 problem (module docstring); :class:`PetabError`
    on what cannot be read or converted. ``check_file_size(path, what)``: the table size limits of
    :mod:`.petab` (passed in: that module imports this one)."""
    import petab.v1 as petab_v1
    import petab.v2 as petab_v2
    files = _files(yaml_path, cfg)
    for table, path in files.items():
        if table != "yaml":
            if not os.path.isfile(path):
                raise PetabError(f"{table} file {path!r} of PEtab problem {yaml_path!r} does not exist")
            check_file_size(path, f"{table} file")
    _precheck(files)
    try:
        v2 = petab_v2.Problem.from_yaml(yaml_path)
    except Exception as exc:
        raise PetabError(f"PEtab problem {yaml_path!r} cannot be read by petab.v2: {type(exc).__name__}: "
                         f"{exc}") from None
    mp = v2.mapping_df
    if mp is not None and len(mp):
        ids = mp.reset_index()
        if any(str(a) != str(b) for a, b in zip(ids.iloc[:, 0], ids.iloc[:, 1])):
            raise PetabError(f"mapping file {files.get('mapping')!r}: pbsens does not support mapping tables "
                             "that rename model entities yet")
    cond_df, meas_df = _conditions_and_measurements(v2, files)
    problem = petab_v1.Problem(model=v2.model, condition_df=cond_df, measurement_df=meas_df,
                               parameter_df=_parameters(v2.parameter_df, files),
                               observable_df=_observables(v2.observable_df, files))
    return problem, files


def _precheck(files):
    """pbsens's own checks of the enumerated columns before petab.v2 parses them (its messages name no file)."""
    import pandas as pd
    for table, col, allowed in (("observable", "noiseDistribution", _NOISE),
                                ("parameter", "priorDistribution", _PRIORS)):
        path = files.get(table)
        if path is None:
            continue
        try:
            df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
        except Exception as exc:
            raise PetabError(f"{table} file {path!r} cannot be read: {exc}") from None
        if col not in df.columns:
            continue
        for r, v in enumerate(df[col]):
            if v.strip() and v.strip() not in allowed:
                raise PetabError(f"{_where(files, table, r, col)}: pbsens supports {', '.join(allowed)}, got {v!r}")


def _where(files, table, row, column):
    return f"{table} file {files.get(table, 'the ' + table + ' table')!r}, row {row + 2}, column {column!r}"


def _parameters(df, files):
    import pandas as pd
    df = df.reset_index().copy()
    out = pd.DataFrame({"parameterId": df["parameterId"].astype(str)})
    for c in ("parameterName", "lowerBound", "upperBound", "nominalValue"):
        if c in df.columns:
            out[c] = df[c]
    out["parameterScale"] = "lin"
    est = []
    for r, v in enumerate(df["estimate"]):
        s = str(v).strip().lower()
        if s not in ("true", "false", "1", "0", "1.0", "0.0"):
            raise PetabError(f"{_where(files, 'parameter', r, 'estimate')}: {v!r} is not true or false")
        est.append(1 if s in ("true", "1", "1.0") else 0)
    out["estimate"] = est
    if "priorDistribution" in df.columns:
        types = []
        for r, v in enumerate(df["priorDistribution"]):
            if v is None or (isinstance(v, float) and math.isnan(v)) or str(v).strip() == "":
                types.append(math.nan)
                continue
            s = getattr(v, "value", v)
            s = str(s).strip()
            if s not in _PRIORS:
                raise PetabError(f"{_where(files, 'parameter', r, 'priorDistribution')}: pbsens supports the "
                                 f"priors {', '.join(_PRIORS)}, got {s!r}")
            types.append(_PRIORS[s])
        out["objectivePriorType"] = types
        if "priorParameters" in df.columns:
            out["objectivePriorParameters"] = df["priorParameters"].values
    import petab.v1 as petab_v1
    return petab_v1.get_parameter_df(out)


def _rename_placeholders(formula, names, kind, oid):
    """``formula`` with the placeholders ``names`` (v2, in order) renamed to ``{kind}Parameter{n}_{oid}``."""
    f = str(formula)
    tmp = {}
    for n, name in enumerate(names, start=1):
        target = f"{kind}Parameter{n}_{oid}"
        if name != target:
            key = f"__pbsens_ph_{kind}_{n}__"
            f = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", key, f)
            tmp[key] = target
    for key, target in tmp.items():
        f = f.replace(key, target)
    return f


def _observables(df, files):
    import pandas as pd
    df = df.reset_index()
    rows = []
    for r, row in df.iterrows():
        oid = str(row["observableId"])
        dist = row.get("noiseDistribution")
        dist = "normal" if dist is None or (isinstance(dist, float) and math.isnan(dist)) or str(dist) == "" \
            else str(getattr(dist, "value", dist))
        if dist not in _NOISE:
            raise PetabError(f"{_where(files, 'observable', r, 'noiseDistribution')} (observable {oid!r}): pbsens "
                             f"supports {', '.join(_NOISE)}, got {dist!r}")
        trafo, noise = _NOISE[dist]
        out = {"observableId": oid, "observableTransformation": trafo, "noiseDistribution": noise}
        if "observableName" in df.columns and isinstance(row.get("observableName"), str):
            out["observableName"] = row["observableName"]
        for col, kind, ph in (("observableFormula", "observable", "observablePlaceholders"),
                              ("noiseFormula", "noise", "noisePlaceholders")):
            names = row.get(ph)
            if isinstance(names, str):
                names = [s.strip() for s in names.split(";") if s.strip()]
            elif names is None or (isinstance(names, float) and math.isnan(names)):
                names = []
            names = [str(s) for s in names]
            out[col] = _rename_placeholders(row[col], names, kind, oid)
        rows.append(out)
    import petab.v1 as petab_v1
    return petab_v1.get_observable_df(pd.DataFrame(rows))


def _period_condition(ids, long_df, merged, files, exp_id):
    """One v1 condition id for the v2 conditions ``ids`` applied together (merged when several)."""
    ids = [str(i) for i in ids if isinstance(i, str) and i.strip()]
    if not ids:
        return _EMPTY
    if len(ids) == 1:
        return ids[0]
    cid = "__".join(ids)
    targets = long_df[long_df["conditionId"].isin(ids)]["targetId"]
    if targets.duplicated().any():
        raise PetabError(f"experiment file {files.get('experiment')!r}, experiment {exp_id!r}: conditions "
                         f"{', '.join(ids)} set {targets[targets.duplicated()].iloc[0]!r} twice in one period")
    merged[cid] = ids
    return cid


def _conditions_and_measurements(v2, files):
    import pandas as pd
    long_df = v2.condition_df
    long_df = (pd.DataFrame(columns=["conditionId", "targetId", "targetValue"]) if long_df is None
               else long_df.reset_index())
    long_df = long_df.astype({"conditionId": str, "targetId": str})
    exp_df = v2.experiment_df
    plans = {}
    merged = {}
    if exp_df is not None and len(exp_df):
        exp_df = exp_df.reset_index()
        for eid, grp in exp_df.groupby("experimentId", sort=False):
            pre, sim = None, None
            for r, row in grp.iterrows():
                t = float(row["time"])
                cid = row.get("conditionId")
                cids = cid if isinstance(cid, list) else [cid]
                if t == -math.inf:
                    pre = (pre or []) + cids
                elif t == 0.0:
                    sim = (sim or []) + cids
                else:
                    raise PetabError(f"{_where(files, 'experiment', int(r), 'time')} (experiment {eid!r}): pbsens "
                                     f"supports a preequilibration (-inf) and one period from time 0, got {t!r}")
            pre_id = None if pre is None else _period_condition(pre, long_df, merged, files, eid)
            plans[str(eid)] = (pre_id, _period_condition(sim or [], long_df, merged, files, eid))
    # the wide v1 condition table
    wide = long_df.pivot_table(index="conditionId", columns="targetId", values="targetValue", aggfunc="first") \
        if len(long_df) else pd.DataFrame(index=pd.Index([], name="conditionId"))
    wide = wide.astype(object)
    extra = {cid: wide.loc[[i for i in ids if i in wide.index]].bfill().iloc[0] if any(i in wide.index for i in ids)
             else pd.Series(dtype=object) for cid, ids in merged.items()}
    for cid, row in extra.items():
        wide.loc[cid] = row
    used = {c for p in plans.values() for c in p if c} | {_EMPTY}
    for cid in used - set(wide.index):
        wide.loc[cid] = math.nan
    wide.index.name = "conditionId"
    wide.columns.name = None
    meas = v2.measurement_df.reset_index(drop=True).copy()
    exp_col = meas["experimentId"] if "experimentId" in meas.columns else pd.Series([""] * len(meas))
    sim_ids, pre_ids = [], []
    for r, e in enumerate(exp_col):
        e = "" if e is None or (isinstance(e, float) and math.isnan(e)) else str(e)
        if e and e not in plans:
            raise PetabError(f"{_where(files, 'measurement', r, 'experimentId')}: experiment {e!r} is not in the "
                             f"experiment table {files.get('experiment')!r}")
        pre, sim = plans.get(e, (None, _EMPTY))
        sim_ids.append(sim)
        pre_ids.append(pre or "")
    meas = meas.drop(columns=["experimentId"], errors="ignore")
    meas.insert(0, "simulationConditionId", sim_ids)
    if any(pre_ids):
        meas.insert(0, "preequilibrationConditionId", pre_ids)
    for c in ("observableParameters", "noiseParameters"):
        if c in meas.columns:
            meas[c] = [";".join(map(str, v)) if isinstance(v, (list, tuple)) else v for v in meas[c]]
    import petab.v1 as petab_v1
    return petab_v1.get_condition_df(wide.reset_index()), petab_v1.get_measurement_df(meas)
