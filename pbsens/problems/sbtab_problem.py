"""SBtab estimation problems (UQSA layout) as PEtab problems, loaded into the same :class:`Problem`.

A folder in the layout of UQSA's examples (AKAR4, AKAP79) holds the model
tables (:func:`pbsens.model.sbtab.read_sbtab`), an ``Experiments`` table and one
data table per experiment. :func:`sbtab_to_petab` converts it into PEtab v1
tables plus the SBML model written by :func:`pbsens.to_sbml`, and
:func:`load_sbtab` builds the :class:`Problem` with
:meth:`Problem.from_petab`, so everything that works on PEtab problems
(``pbsens petab``, ``pbsens sample``, ``Problem.evaluate``) works on them.

The conversion
--------------
* **Estimated parameters**: the rows of the Parameter table, on the row's
  ``!Scale`` (``log10``, ``log``/``ln``/``natural logarithm``, else ``lin``),
  nominal value ``!DefaultValue``/``!Value`` (on that scale). Bounds: ``!Min``
  and ``!Max`` (``!Lower``/``!Upper``; on the scale) when present, else the
  value +- 4 ``!Std``, else +- 3 on log scales and ``[v/1000, 1000 v]`` on the
  linear scale. Prior: a column ``!Std`` (``stdv``, ``sd``) gives a normal prior
  on the parameter scale, ``parameterScaleNormal(value, std)``, unless a
  ``prior distribution`` column says ``uniform`` (then uniform on the bounds).
* **Conditions**: one per row of the Experiments table: its input values
  (``>u``) and compound initial values (``>A``) are the condition's overrides.
  Free-text columns (``!Comment``, ``comment``, ``!Name``) are ignored.
* **Measurements**: the data table of experiment ``E`` is the file whose
  ``!!SBtab`` line says ``TableName='E'``, or the file ``E.tsv``. Its time
  column is ``!Time`` (``time``, ``t``); for each output ``Y`` a column ``>Y``
  (or ``Y``) holds the values and ``~Y`` the standard deviations (or the value
  cell is ``value;std``, as in UQSA's simplified tables). Empty, ``NA`` and
  ``NaN`` values are skipped. Every value needs a positive standard deviation.
* **Observables**: one per Output (``observableFormula`` the output's formula, normal
  noise with ``noiseFormula = noiseParameter1_<Y>``, given per row as the
  measured standard deviation).
* Experiments must start at ``t0 = 0`` (``!T0``), as PEtab v1 does.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import tempfile

import numpy as np

from ..errors import PbsensError
from ..model.sbtab import number_cell, read_sbtab_rows
from .tables import PetabError, table_place

__all__ = ["load_sbtab", "sbtab_to_petab", "is_sbtab_folder"]

_SCALES = {"log10": "log10", "base-10logarithm": "log10", "log": "log", "ln": "log", "naturallogarithm": "log",
           "lin": "lin", "linear": "lin", "": "lin"}


def _norm(col):
    return re.sub(r"[\s_]", "", str(col).strip().lstrip("!>~").lower())


def is_sbtab_folder(path) -> bool:
    """True for a directory holding ``.tsv`` tables (and no PEtab YAML)."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        return False
    names = os.listdir(path)
    return any(n.lower().endswith((".tsv", ".tab")) for n in names) and \
        not any(n.lower().endswith((".yaml", ".yml")) for n in names)


def _read(path):
    """``(attrs, header, rows)`` of one TSV table; rows are ``(line, cells)``."""
    attrs, lines = read_sbtab_rows(path)
    attrs = attrs or {}
    if not lines:
        return attrs, [], []
    return attrs, lines[0][1], lines[1:]


def _where(path, line=None, column=None):
    return table_place(f"SBtab table {os.path.basename(path)!r}", None if line is None else f"line {line}", column)


def _col(header, *names):
    idx = {_norm(h): i for i, h in reversed(list(enumerate(header)))}
    for n in names:
        if n in idx:
            return idx[n]
    return None


def _float(text, path, line, column):
    return number_cell(text, lambda why: PetabError(f"{_where(path, line, column)}: {why}"))


def _parameters(folder, tables):
    """Rows of the parameter table: ``(id, scale, nominal, lower, upper, prior)``."""
    fname = tables.get("parameter")
    if fname is None:
        raise PetabError(f"SBtab folder {folder!r} has no Parameter table: nothing to estimate")
    path = os.path.join(folder, fname)
    _, header, rows = _read(path)
    if header and not header[0].startswith("!") and _norm(header[0]) not in ("id", "name", "identifier"):
        raise PetabError(f"{_where(path)}: the Parameter table needs a header row (!ID, !DefaultValue, ...) "
                         "to be estimated")
    c_id = _col(header, "id")
    c_val = _col(header, "defaultvalue", "value", "initialvalue")
    c_scale = _col(header, "scale")
    c_std = _col(header, "std", "stdv", "sd", "standarddeviation")
    c_lo = _col(header, "min", "lower", "lowerbound", "minimum")
    c_hi = _col(header, "max", "upper", "upperbound", "maximum")
    c_prior = _col(header, "priordistribution", "prior", "distribution")
    if c_id is None or c_val is None:
        raise PetabError(f"{_where(path)}: the Parameter table needs ID and DefaultValue (or Value) columns")
    out = []
    for n, cells in rows:
        def cell(c):
            return cells[c].strip() if c is not None and c < len(cells) else ""
        pid = cell(c_id)
        sc_text = _norm(cell(c_scale))
        if sc_text not in _SCALES:
            raise PetabError(f"{_where(path, n, header[c_scale])}: unknown scale {cell(c_scale)!r} "
                             "(log10, log/ln, linear)")
        scale = _SCALES[sc_text]
        v = _float(cell(c_val), path, n, header[c_val])
        std = _float(cell(c_std), path, n, header[c_std]) if cell(c_std) else None
        if std is not None and not std > 0:
            raise PetabError(f"{_where(path, n, header[c_std])}: the standard deviation must be positive, got {std}")
        if cell(c_lo) and cell(c_hi):
            lo = _float(cell(c_lo), path, n, header[c_lo])
            hi = _float(cell(c_hi), path, n, header[c_hi])
        elif std is not None:
            lo, hi = v - 4 * std, v + 4 * std
        elif scale == "lin":
            lo, hi = v / 1000.0, v * 1000.0
        else:
            lo, hi = v - 3.0, v + 3.0
        if scale == "lin" and v > 0 and std is not None and not (cell(c_lo) and cell(c_hi)):
            lo = max(lo, v / 1000.0)   # keep linear rate constants positive
        if not lo < hi or not lo <= v <= hi:
            raise PetabError(f"{_where(path, n)}: parameter {pid!r}: bounds [{lo}, {hi}] must contain the value {v}")
        uniform = "uniform" in cell(c_prior).lower()
        prior = None if (std is None or uniform) else ("parameterScaleNormal", f"{v!r};{std!r}")
        out.append((pid, scale, v, lo, hi, prior))
    return out


def _data_tables(folder, files):
    """``{TableName or file stem: path}`` of the tables the model reader did not use."""
    out = {}
    for f in files:
        path = os.path.join(folder, f)
        attrs, _, _ = _read(path)
        stem = os.path.splitext(f)[0]
        out.setdefault(stem, path)
        if attrs.get("tablename"):
            out[attrs["tablename"]] = path
    return out


def _measurements(eid, path, outputs):
    """Measurement rows ``(observableId, time, value, std)`` of one data table."""
    _, header, rows = _read(path)
    c_t = _col(header, "time", "t")
    if c_t is None:
        raise PetabError(f"{_where(path)}: the data table of experiment {eid!r} has no time column (!Time)")
    vals, sds = {}, {}
    for i, h in enumerate(header):
        raw = h.strip()
        bare = raw.lstrip("!>~").strip()
        if bare in outputs:
            (sds if raw.startswith("~") else vals)[bare] = i
    if not vals:
        raise PetabError(f"{_where(path)}: the data table of experiment {eid!r} has no output column "
                         f"(>Y for an output Y of the Output table: {', '.join(outputs)})")
    out = []
    for n, cells in rows:
        t = _float(cells[c_t] if c_t < len(cells) else "", path, n, header[c_t])
        for y, c in vals.items():
            text = cells[c].strip() if c < len(cells) else ""
            if text.lower() in ("", "na", "nan", "n/a"):
                continue
            if ";" in text and y not in sds:
                v_text, s_text = text.split(";", 1)
                v = _float(v_text, path, n, header[c])
                s = _float(s_text, path, n, header[c])
            else:
                v = _float(text, path, n, header[c])
                if y not in sds:
                    raise PetabError(f"{_where(path, n, header[c])}: no standard deviation for output {y!r} "
                                     f"(add a column '~{y}' or write cells as 'value;std')")
                cs = sds[y]
                s = _float(cells[cs] if cs < len(cells) else "", path, n, header[cs])
            if not s > 0:
                raise PetabError(f"{_where(path, n)}: the standard deviation of {y!r} must be positive, got {s}")
            if t < 0:
                raise PetabError(f"{_where(path, n, header[c_t])}: time {t} is before the experiment's start "
                                 "(t0 = 0)")
            out.append((y, t, v, s))
    return out


def sbtab_to_petab(folder, sbml_path=None):
    """A ``petab.v1.Problem`` equivalent to the SBtab estimation problem in ``folder``.

    ``sbml_path``: where to write the SBML model (default: a temporary file,
    removed after reading). Returns ``(petab_problem, info)`` with ``info`` the
    spec's ``meta["sbtab"]`` plus ``"data_tables"`` (experiment -> file).
    """
    import pandas as pd
    import petab.v1 as petab_v1

    from ..model.sbml import to_sbml
    from ..model.sbtab import read_sbtab
    folder = os.fspath(folder)
    spec = read_sbtab(folder)
    meta = spec.meta
    experiments = meta.get("experiments") or {}
    if not experiments:
        raise PetabError(f"SBtab folder {folder!r} has no Experiments table (or it is empty): no data to fit")
    sb = meta["sbtab"]
    outputs = list(spec.output_names)
    if not outputs:
        raise PetabError(f"SBtab folder {folder!r} has no Output table: nothing to compare with data")
    params = _parameters(folder, sb["tables"])
    known = set(spec.param_names)
    for pid, *_ in params:
        if pid not in known:
            raise PetabError(f"SBtab folder {folder!r}: parameter {pid!r} is not a parameter of the model")
    data = _data_tables(folder, sb.get("other_tables", []))
    cond_rows, meas_rows = [], []
    for eid, e in experiments.items():
        if e.get("t0", 0.0) != 0.0:
            raise PetabError(f"SBtab folder {folder!r}: experiment {eid!r} starts at t0 = {e['t0']}; PEtab "
                             "problems start at 0 (shift the data's times)")
        path = data.get(eid)
        if path is None:
            raise PetabError(f"SBtab folder {folder!r}: no data table for experiment {eid!r} (a table with "
                             f"TableName='{eid}' or a file {eid}.tsv)")
        row = {"conditionId": eid}
        row.update({k: float(v) for k, v in e.get("inputs", {}).items()})
        row.update({k: float(v) for k, v in e.get("initial", {}).items()})
        cond_rows.append(row)
        for y, t, v, s in _measurements(eid, path, outputs):
            meas_rows.append({"observableId": y, "simulationConditionId": eid, "time": t, "measurement": v,
                              "noiseParameters": s})
    if not meas_rows:
        raise PetabError(f"SBtab folder {folder!r}: the data tables hold no measurements")
    cond_df = pd.DataFrame(cond_rows).set_index("conditionId")
    meas_df = pd.DataFrame(meas_rows)
    formulas = [str(o.expression) for o in spec.outputs]
    obs_df = pd.DataFrame({"observableId": outputs, "observableFormula": formulas,
                           "noiseFormula": [f"noiseParameter1_{y}" for y in outputs],
                           "noiseDistribution": "normal"}).set_index("observableId")
    par_df = pd.DataFrame([{"parameterId": pid, "parameterScale": sc, "lowerBound": lo, "upperBound": hi,
                            "nominalValue": _unscale(v, sc), "estimate": 1,
                            "objectivePriorType": prior[0] if prior else np.nan,
                            "objectivePriorParameters": prior[1] if prior else np.nan}
                           for pid, sc, v, lo, hi, prior in params])
    par_df["lowerBound"] = [_unscale(v, sc) for v, sc in zip(par_df["lowerBound"], par_df["parameterScale"])]
    par_df["upperBound"] = [_unscale(v, sc) for v, sc in zip(par_df["upperBound"], par_df["parameterScale"])]
    if par_df["objectivePriorType"].isna().all():
        par_df = par_df.drop(columns=["objectivePriorType", "objectivePriorParameters"])
    par_df = par_df.set_index("parameterId")
    tmp = None
    if sbml_path is None:
        fd, tmp = tempfile.mkstemp(suffix=".xml")
        os.close(fd)
        sbml_path = tmp
    try:
        # the outputs become PEtab observables (same ids), so the SBML model leaves them out
        to_sbml(dataclasses.replace(spec, outputs=[]), sbml_path)
        model = petab_v1.models.sbml_model.SbmlModel.from_file(sbml_path)
    finally:
        if tmp:
            os.unlink(tmp)
    problem = petab_v1.Problem(model=model, condition_df=cond_df, measurement_df=meas_df,
                               observable_df=obs_df, parameter_df=par_df)
    info = dict(sb)
    info["data_tables"] = {eid: os.path.basename(data[eid]) for eid in experiments}
    return problem, info


def _unscale(v, scale):
    return 10.0 ** v if scale == "log10" else (math.exp(v) if scale == "log" else v)


def load_sbtab(folder, *, lint=True):
    """The :class:`Problem` of an SBtab estimation problem (UQSA layout); see the module docstring."""
    from .problem import Problem
    folder = os.path.abspath(os.fspath(folder))
    if not os.path.isdir(folder):
        raise PbsensError(f"SBtab folder {folder!r} does not exist or is not a directory")
    petab_problem, info = sbtab_to_petab(folder)
    files = {"sbtab": folder}
    problem = Problem.from_petab(petab_problem, lint=lint, files=files)
    problem.source = ("sbtab", folder)    # how worker processes rebuild it (pbsens.parallel)
    problem.sbtab_info = info
    return problem
