"""Reading a PEtab v1 problem into one compiled model and a parameter map per condition.

The ``petab`` library (its ``petab.v1`` API) reads the tables and provides the
mappings; this module turns the problem into:

* **one model** (compiled once; the on-disk cache keeps it): the SBML model's
  equations, with as parameters the SBML parameters PEtab may map, the
  compartments a condition overrides, every parameter of the parameter table
  that the SBML model lacks, every ``observableParameter{n}_{id}`` /
  ``noiseParameter{n}_{id}`` placeholder, and one parameter per species
  initial value a condition overrides (``petab_init__<species>``, and
  ``petab_preinit__<species>`` for preequilibration conditions). Its outputs
  are each observable's formula (``petab_y__<id>``) and noise formula
  (``petab_sigma__<id>``). A condition then only changes the parameter vector,
  as in AMICI, where condition-specific values are parameters too.
* per simulation condition: for every model parameter either a fixed number
  or the index of an estimated parameter (:class:`ParameterMap`), the species
  initial values it overrides, its output times, and per measurement row the
  placeholder overrides.

Validation: :func:`petab.v1.lint.lint_problem` plus the checks below, which name
the file, the row (data rows counted from 1; the file line is one more) and the
column.

Size limits, checked before a table is parsed (a bound on the time and memory of
loading; raise them by setting these module attributes): every table file (and the
YAML file) at most :data:`MAX_TABLE_BYTES` bytes, :data:`MAX_TABLE_ROWS` data rows and
:data:`MAX_LINE_BYTES` bytes in one line. Loading costs about 1-2 ms per measurement
row (pbsens's row checks plus petab's linter), so the row limit bounds a load to
minutes; a file of one enormous line is refused after a streaming pass over it.
"""
from __future__ import annotations

import io
import logging
import math
import numbers
import os
import re
import tempfile
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelError, PbsensError

__all__ = ["PetabError", "ParameterMap", "ConditionPlan", "build_plan", "read_problem"]

_REQUIRED = {
    "measurement": ("observableId", "simulationConditionId", "measurement", "time"),
    "observable": ("observableId", "observableFormula", "noiseFormula"),
    "condition": ("conditionId",),
    "parameter": ("parameterId", "parameterScale", "lowerBound", "upperBound", "nominalValue", "estimate"),
}
_SCALES = {"lin": 0, "log": 1, "log10": 2}

#: Largest PEtab table (or YAML) file read, in bytes (64 MiB).
MAX_TABLE_BYTES = 64 * 2**20
#: Most data rows in one PEtab table (measurement tables of the benchmark collection: up to ~10^5).
MAX_TABLE_ROWS = 200_000
#: Longest line in a PEtab table (or YAML) file, in bytes (1 MiB).
MAX_LINE_BYTES = 2**20
_PLACEHOLDER = re.compile(r"^(observable|noise)Parameter([0-9]+)_(.+)$")


class PetabError(PbsensError):
    """A PEtab problem is invalid; the message names the file, row and column."""


def _petab():
    try:
        import petab.v1 as petab_v1
    except ImportError:  # pragma: no cover - the extra is not installed
        raise PbsensError("PEtab problems need the 'petab' package: pip install 'pbsens[petab]'") from None
    return petab_v1


def table_place(table, row=None, column=None):
    """Where an error is, for its message: ``table``, then ``row`` (text) and the column where given."""
    s = table
    if row is not None:
        s += f", {row}"
    if column is not None:
        s += f", column {column!r}"
    return s


def _where(files, table, row=None, column=None):
    name = files.get(table) or f"the {table} table"
    return table_place(f"{table} file {name!r}", None if row is None else f"row {row + 1} (line {row + 2})",
                       column)


# ---------------------------------------------------------------- reading
def _table_files(yaml_path):
    """``{table: path}`` from the problem's YAML (first file of each kind)."""
    petab_v1 = _petab()
    cfg = petab_v1.yaml.load_yaml(yaml_path)
    base = os.path.dirname(os.path.abspath(yaml_path))
    files = {}
    if "parameter_file" in cfg:
        pf = cfg["parameter_file"]
        files["parameter"] = os.path.join(base, pf[0] if isinstance(pf, list) else pf)
    probs = cfg.get("problems") or [{}]
    for key, table in (("measurement_files", "measurement"), ("observable_files", "observable"),
                       ("condition_files", "condition"), ("sbml_files", "sbml")):
        lst = probs[0].get(key) or []
        if lst:
            files[table] = os.path.join(base, lst[0])
    return files


def check_file_size(path, what):
    """Refuse a file beyond :data:`MAX_TABLE_BYTES`, :data:`MAX_TABLE_ROWS` or
    :data:`MAX_LINE_BYTES` (``what``: "measurement file" etc., for the message), in one
    streaming pass of bounded memory, before anything parses it."""
    size = os.path.getsize(path)
    if size > MAX_TABLE_BYTES:
        raise PetabError(f"{what} {path!r} has {size} bytes, more than the limit of {MAX_TABLE_BYTES} "
                         "(pbsens.problems.petab.MAX_TABLE_BYTES)")
    lines, current, longest, at = 0, 0, 0, 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(2**20)
            if not chunk:
                break
            start = 0
            while True:
                nl = chunk.find(b"\n", start)
                if nl < 0:
                    current += len(chunk) - start
                    break
                current += nl - start
                lines += 1
                if current > longest:
                    longest, at = current, lines
                current, start = 0, nl + 1
            if current > MAX_LINE_BYTES:
                longest, at = current, lines + 1
                break
            if lines > MAX_TABLE_ROWS + 1:
                break
    if longest > MAX_LINE_BYTES:
        raise PetabError(f"{what} {path!r}, line {at}: the line is longer than the limit of {MAX_LINE_BYTES} "
                         "bytes (pbsens.problems.petab.MAX_LINE_BYTES)")
    rows = lines - 1 + (current > 0)      # data rows: lines after the header (a last line without newline counts)
    if rows > MAX_TABLE_ROWS:
        raise PetabError(f"{what} {path!r} has more than {MAX_TABLE_ROWS} data rows, the limit "
                         "(pbsens.problems.petab.MAX_TABLE_ROWS)")


def _check_columns(files):
    import pandas as pd
    for table, required in _REQUIRED.items():
        path = files.get(table)
        if path is None:
            raise PetabError(f"the problem has no {table} table")
        if not os.path.isfile(path):
            raise PetabError(f"{table} file {path!r} does not exist")
        check_file_size(path, f"{table} file")
        cols = list(pd.read_csv(path, sep="\t", nrows=0).columns)
        for c in required:
            if c not in cols:
                raise PetabError(f"{table} file {path!r}, header row (line 1), column {c!r}: the required "
                                 f"column is missing (the file has {', '.join(cols)})")


def read_problem(yaml_path):
    """``(petab.v1.Problem, files)`` read and linted; :class:`PetabError` on bad files."""
    petab_v1 = _petab()
    yaml_path = os.fspath(yaml_path)
    if not os.path.isfile(yaml_path):
        raise PetabError(f"PEtab problem file {yaml_path!r} does not exist")
    check_file_size(yaml_path, "PEtab problem file")
    try:
        files = _table_files(yaml_path)
    except Exception as exc:
        raise PetabError(f"PEtab problem file {yaml_path!r} cannot be read: {exc}") from None
    _check_columns(files)
    try:
        problem = petab_v1.Problem.from_yaml(yaml_path)
    except Exception as exc:
        raise PetabError(f"PEtab problem {yaml_path!r} cannot be read by petab: {type(exc).__name__}: "
                         f"{exc}") from None
    files["yaml"] = yaml_path
    return problem, files


def lint(problem, files):
    """Run the petab linter; raise :class:`PetabError` quoting its errors."""
    petab_v1 = _petab()
    log = logging.getLogger("petab")
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setLevel(logging.ERROR)
    log.addHandler(handler)
    try:
        bad = petab_v1.lint.lint_problem(problem)
    except Exception as exc:
        bad, buf = True, io.StringIO(f"{type(exc).__name__}: {exc}")
    finally:
        log.removeHandler(handler)
    if bad:
        raise PetabError(f"PEtab problem {files.get('yaml', '')!r} does not pass petab's linter: "
                         f"{buf.getvalue().strip()}")


# ------------------------------------------------------------ expressions
def _formula_to_dialect(formula, rename, known, where):
    """PEtab math (``petab.v1.math.sympify_petab``) -> the model expression dialect."""
    import sympy as sp
    from sympy.printing.str import StrPrinter
    from petab.v1.math import sympify_petab

    try:
        expr = sympify_petab(formula)
    except Exception as exc:
        raise PetabError(f"{where}: cannot read the formula {formula!r}: {exc}") from None
    if isinstance(expr, sp.logic.boolalg.Boolean) and not isinstance(expr, sp.Expr):
        raise PetabError(f"{where}: the formula {formula!r} is not a number-valued expression")
    expr = sp.sympify(expr)
    unknown = sorted(str(s) for s in expr.free_symbols if str(s) not in known and str(s) not in rename)
    if unknown:
        raise PetabError(f"{where}: the formula {formula!r} uses {', '.join(map(repr, unknown))}, which "
                         "the model and the parameter table do not define")
    subs = {s: sp.Symbol(rename[str(s)]) for s in expr.free_symbols if str(s) in rename}
    expr = expr.xreplace(subs)

    class _Printer(StrPrinter):
        def _print_Abs(self, e):
            return f"abs({self._print(e.args[0])})"

        def _print_Piecewise(self, e):
            parts = []
            for val, cond in e.args[:-1]:
                parts += [self._print(val), self._print(cond)]
            last_val, last_cond = e.args[-1]
            parts += [self._print(last_val)] if last_cond is sp.true else \
                [self._print(last_val), self._print(last_cond), "nan"]
            return f"piecewise({', '.join(parts)})"

        def _print_And(self, e):
            return "(" + " and ".join(self._print(a) for a in e.args) + ")"

        def _print_Or(self, e):
            return "(" + " or ".join(self._print(a) for a in e.args) + ")"

    return _Printer({"full_prec": True}).doprint(expr)


# ------------------------------------------------------------ the model
def _is_nan(v):
    return isinstance(v, numbers.Number) and not isinstance(v, bool) and math.isnan(v)


def build_model(problem, files):
    """The one compiled model of ``problem`` and the names it uses.

    Returns ``(model, info)``; ``info`` maps PEtab ids to spec names and lists
    the added parameters and outputs.
    """
    from ..model.library import model_from_spec
    from ..model.sbml import read_sbml
    from ..model.spec import Definition, ModelSpec, Quantity
    import libsbml

    sbml = problem.model.sbml_model
    obs_df, cond_df, par_df = problem.observable_df, problem.condition_df, problem.parameter_df
    species_ids = {s.getId() for s in sbml.getListOfSpecies()}
    comp_ids = {c.getId() for c in sbml.getListOfCompartments()}
    free = dict(problem.model.get_free_parameter_ids_with_values())
    cond_cols = [c for c in cond_df.columns if c != "conditionName"]
    species_cols = [c for c in cond_cols if c in species_ids]
    comp_cols = [c for c in cond_cols if c in comp_ids]
    rate_targets = {r.getVariable() for r in sbml.getListOfRules() if r.isRate()}
    species_cols += [c for c in cond_cols if c in rate_targets and c not in species_ids]
    for j, c in enumerate(cond_cols):
        if c not in species_ids and c not in comp_ids and c not in free and c not in rate_targets:
            raise PetabError(f"{_where(files, 'condition', column=c)}: {c!r} is not a parameter, species or "
                             "compartment of the model (or is set by an assignment rule)")
    for r, (cid, crow) in enumerate(cond_df.iterrows()):
        for c in cond_cols:
            v = _petab().core.to_float_if_float(crow[c])
            if isinstance(v, str) and v.strip() not in par_df.index and v.strip() not in free:
                raise PetabError(f"{_where(files, 'condition', r, c)} (condition {cid!r}): {v!r} is neither a "
                                 "number nor a parameter of the parameter table or the model")

    # SBML -> spec (the reader needs a file: write the document the problem holds)
    sbml_path = files.get("sbml")
    tmp = None
    if sbml_path is None or not os.path.isfile(sbml_path):
        fd, tmp = tempfile.mkstemp(suffix=".xml")
        os.close(fd)
        libsbml.writeSBMLToFile(sbml.getSBMLDocument(), tmp)
        sbml_path = tmp
    try:
        try:
            base = read_sbml(sbml_path, parameters=list(free) + comp_cols)
        except ModelError as exc:
            raise ModelError(f"PEtab problem {files.get('yaml', '')!r}: {exc}") from None
    finally:
        if tmp:
            os.unlink(tmp)
    renamed = dict(base.meta.get("sbml_names", {}))
    taken = set(base.state_names) | set(base.param_names) | {d.name for d in base.definitions} | {base.time}

    def fresh(name):
        while name in taken:
            name += "_"
        taken.add(name)
        return name

    params = list(base.parameters)
    spec_name = {pid: renamed.get(pid, pid) for pid in list(free) + comp_cols}
    # parameter-table-only parameters (used in formulas or as override targets) and placeholders
    placeholders = set()
    for oid, row in obs_df.iterrows():
        for kind, col in (("observable", "observableFormula"), ("noise", "noiseFormula")):
            placeholders |= set(_petab().observables.get_formula_placeholders(str(row[col]), oid, kind))
    extra = [pid for pid in par_df.index if pid not in spec_name and pid not in species_ids
             and pid not in comp_ids]
    for pid in list(extra) + sorted(placeholders - set(extra)):
        if pid in spec_name:
            continue
        nm = pid if pid not in taken else fresh(pid)
        taken.add(nm)
        spec_name[pid] = nm
        val = float(par_df.loc[pid, "nominalValue"]) if pid in par_df.index else 1.0
        params.append(Quantity(nm, val if math.isfinite(val) else 1.0))
    # one parameter per overridden species initial value (simulation and preequilibration)
    state_index = {}
    for i, s in enumerate(base.states):
        state_index[s.name] = i
    init_param, preinit_param = {}, {}
    for sid in species_cols:
        nm_s = renamed.get(sid, sid)
        if nm_s not in state_index:
            continue      # a constant species: an ordinary (fixed) quantity of the model
        init_param[sid] = fresh(f"petab_init__{nm_s}")
        preinit_param[sid] = fresh(f"petab_preinit__{nm_s}")
        params += [Quantity(init_param[sid], 0.0), Quantity(preinit_param[sid], 0.0)]
    # constant species overridden by a condition: make them parameters as well
    const_species = [sid for sid in species_cols if sid not in init_param]
    if const_species:
        raise PetabError(f"{_where(files, 'condition', column=const_species[0])}: species "
                         f"{const_species[0]!r} is not changed by any reaction or rule; overriding its "
                         "value in a condition is not supported")

    # outputs
    known = set(base.state_names) | set(base.param_names) | {d.name for d in base.definitions} \
        | set(spec_name.values()) | {base.time, "time"}
    rename = {k: v for k, v in spec_name.items() if k != v}
    rename.update(renamed)
    if base.time != "time":
        rename["time"] = base.time
    defs = list(base.definitions)
    def_names = {d.name for d in defs}
    comps_meta = base.meta.get("compartments", {})
    outputs, out_index = [], {}
    for r, (oid, row) in enumerate(obs_df.iterrows()):
        for kind, col in (("y", "observableFormula"), ("sigma", "noiseFormula")):
            f = row[col]
            if _is_nan(f) or str(f).strip() == "":
                raise PetabError(f"{_where(files, 'observable', r, col)}: the formula is empty")
            expr = _formula_to_dialect(str(f), rename, known | set(comps_meta),
                                       _where(files, "observable", r, col))
            # compartments that only the formula uses: add their size as a definition
            for nm in set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr)) & set(comps_meta):
                if nm not in def_names and nm not in {q.name for q in params}:
                    defs.append(Definition(nm, repr(float(comps_meta[nm]))))
                    def_names.add(nm)
            nm = fresh(f"petab_{kind}__{oid}")
            out_index[(oid, kind)] = len(outputs)
            outputs.append(Definition(nm, expr))
    spec = ModelSpec(name=f"petab_{base.name}", states=list(base.states), parameters=params,
                     odes=dict(base.odes), definitions=defs, outputs=outputs, time=base.time,
                     title=base.title, meta=dict(base.meta))
    try:
        spec.validate()
    except ModelError as exc:
        raise PetabError(f"PEtab problem {files.get('yaml', '')!r}: {exc}") from None
    model = model_from_spec(spec)
    info = dict(spec_name=spec_name, init_param=init_param, preinit_param=preinit_param,
                species_cols=[s for s in species_cols if s in init_param], comp_cols=comp_cols,
                state_of={sid: state_index[renamed.get(sid, sid)] for sid in init_param},
                out_index=out_index, free=free)
    return model, info


# ------------------------------------------------------------ parameter maps
@dataclass
class ParameterMap:
    """Model parameter values of one condition: ``est[j] >= 0`` is the index of the
    estimated parameter giving ``p[j]`` (on the linear scale); otherwise ``fixed[j]``."""

    fixed: np.ndarray
    est: np.ndarray

    def values(self, p_lin):
        return np.where(self.est >= 0, p_lin[np.maximum(self.est, 0)] if p_lin.size else 0.0, self.fixed)

    def copy(self):
        return ParameterMap(self.fixed.copy(), self.est.copy())


@dataclass
class ConditionPlan:
    """One simulation: ``(preequilibration id or None, simulation id)``."""

    preeq_id: str | None
    sim_id: str
    sim: ParameterMap
    pre: ParameterMap | None
    reinit: list            # [(state index, model parameter index)] applied at t = 0 of the simulation
    pre_init: list          # the same for the preequilibration start
    times: np.ndarray       # finite output times, sorted
    has_inf: bool
    rows: np.ndarray        # measurement rows (positions) of this condition
    row_k: np.ndarray       # output-time index of each row (len(times) for t = inf)
    timing: dict = field(default_factory=dict)


def _resolver(problem, files, est_index, free):
    par_df = problem.parameter_df

    def resolve(v, where):
        """``('fixed', value)``, ``('est', k)`` or ``None`` (NaN: keep)."""
        v = _petab().core.to_float_if_float(v)
        if isinstance(v, numbers.Number) and not isinstance(v, bool):
            return None if math.isnan(v) else ("fixed", float(v))
        s = str(v).strip()
        if s in est_index:
            return ("est", est_index[s])
        if s in par_df.index:
            return ("fixed", float(par_df.loc[s, "nominalValue"]))
        if s in free:
            return ("fixed", float(free[s]))
        raise PetabError(f"{where}: {s!r} is neither a number nor a parameter of the parameter table "
                         "or the model")
    return resolve


def build_plan(problem, files, model, info):
    """Estimated parameters and one :class:`ConditionPlan` per simulation condition.

    Returns ``(estimated, plans, rows)``: ``estimated`` a dict of arrays (ids,
    scales, bounds, nominal values, priors), ``rows`` a dict of per-row arrays
    of the measurement table.
    """
    petab_v1 = _petab()
    par_df, meas_df, obs_df, cond_df = (problem.parameter_df, problem.measurement_df,
                                         problem.observable_df, problem.condition_df)
    npar = model.n_params
    pindex = {nm: j for j, nm in enumerate(model.param_names)}
    spec_name, free = info["spec_name"], info["free"]

    # ---- estimated parameters
    est_ids = [pid for pid in par_df.index if int(par_df.loc[pid, "estimate"]) == 1]
    est_index = {pid: k for k, pid in enumerate(est_ids)}
    scales = []
    for r, pid in enumerate(par_df.index):
        sc = par_df.loc[pid, "parameterScale"]
        if sc not in _SCALES:
            raise PetabError(f"{_where(files, 'parameter', r, 'parameterScale')}: {sc!r} is not one of "
                             "lin, log, log10")
        if pid in est_index:
            scales.append(_SCALES[sc])
    scales = np.array(scales, dtype=np.int64)
    resolve = _resolver(problem, files, est_index, free)

    # ---- measurement rows
    obs_ids = list(obs_df.index)
    cond_ids = set(cond_df.index)
    R = len(meas_df)
    preeq_col = "preequilibrationConditionId" in meas_df.columns
    for r in range(R):
        row = meas_df.iloc[r]
        if row["observableId"] not in obs_df.index:
            raise PetabError(f"{_where(files, 'measurement', r, 'observableId')}: unknown observable "
                             f"{row['observableId']!r} (the observable table has {', '.join(obs_ids)})")
        for col in ("simulationConditionId", "preequilibrationConditionId"):
            if col == "preequilibrationConditionId" and (not preeq_col or _is_empty(row[col])):
                continue
            if row[col] not in cond_ids:
                raise PetabError(f"{_where(files, 'measurement', r, col)}: unknown condition {row[col]!r}")
        for col in ("time", "measurement"):
            v = row[col]
            if not isinstance(v, numbers.Number) or math.isnan(v) or (col == "measurement" and math.isinf(v)):
                raise PetabError(f"{_where(files, 'measurement', r, col)}: {v!r} is not a number")
        if row["time"] < 0:
            raise PetabError(f"{_where(files, 'measurement', r, 'time')}: negative time {row['time']!r}")
    trafo = np.zeros(R, dtype=np.int64)
    dist = np.zeros(R, dtype=np.int64)
    from .noise import DISTRIBUTIONS, TRANSFORMATIONS
    obs_trafo, obs_dist = {}, {}
    for r, (oid, row) in enumerate(obs_df.iterrows()):
        t = row.get("observableTransformation", "lin")
        d = row.get("noiseDistribution", "normal")
        t = "lin" if _is_empty(t) else t
        d = "normal" if _is_empty(d) else d
        if t not in TRANSFORMATIONS:
            raise PetabError(f"{_where(files, 'observable', r, 'observableTransformation')}: {t!r} is not "
                             "one of lin, log, log10")
        if d not in DISTRIBUTIONS:
            raise PetabError(f"{_where(files, 'observable', r, 'noiseDistribution')}: {d!r} is not one of "
                             "normal, laplace")
        obs_trafo[oid], obs_dist[oid] = TRANSFORMATIONS[t], DISTRIBUTIONS[d]
    meas = meas_df["measurement"].to_numpy(dtype=np.float64)
    for r in range(R):
        oid = meas_df.iloc[r]["observableId"]
        trafo[r], dist[r] = obs_trafo[oid], obs_dist[oid]
        if trafo[r] and not meas[r] > 0:
            raise PetabError(f"{_where(files, 'measurement', r, 'measurement')}: {meas[r]!r} is not positive, "
                             f"but observable {oid!r} is log-transformed")

    # ---- condition maps
    species_cols = info["species_cols"]

    def condition_map(cid, is_preeq):
        try:
            mapping, _ = petab_v1.get_parameter_mapping_for_condition(
                condition_id=cid, is_preeq=is_preeq, cur_measurement_df=None, model=problem.model,
                condition_df=cond_df, parameter_df=par_df, warn_unmapped=False,
                scaled_parameters=False, fill_fixed_parameters=True)
        except PbsensError:
            raise
        except Exception as exc:
            raise PetabError(f"{_where(files, 'condition', list(cond_df.index).index(cid))} (condition "
                             f"{cid!r}): petab cannot map its parameters: {exc}") from None
        pm = ParameterMap(np.array(model.p, dtype=np.float64), np.full(npar, -1, dtype=np.int64))
        crow = list(cond_df.index).index(cid)
        for pid, v in mapping.items():
            j = pindex.get(spec_name.get(pid, pid))
            if j is None:
                continue
            res = resolve(v, f"{_where(files, 'condition', crow)} (condition {cid!r}), parameter {pid!r}")
            if res is None:
                res = ("fixed", float(free.get(pid, model.p[j])))
            pm.fixed[j], pm.est[j] = (res[1], -1) if res[0] == "fixed" else (np.nan, res[1])
        # parameter-table-only parameters and placeholders default to the parameter table
        for pid, nm in spec_name.items():
            if pid in mapping:
                continue
            j = pindex[nm]
            if pid in est_index:
                pm.fixed[j], pm.est[j] = np.nan, est_index[pid]
            elif pid in par_df.index:
                pm.fixed[j] = float(par_df.loc[pid, "nominalValue"])
        for cid_col in info["comp_cols"]:
            j = pindex[spec_name[cid_col]]
            res = resolve(cond_df.loc[cid, cid_col], _where(files, "condition", crow, cid_col))
            if res is not None:
                pm.fixed[j], pm.est[j] = (res[1], -1) if res[0] == "fixed" else (np.nan, res[1])
        inits = []
        table = info["preinit_param"] if is_preeq else info["init_param"]
        for sid in species_cols:
            res = resolve(cond_df.loc[cid, sid], _where(files, "condition", crow, sid))
            if res is None:
                continue
            j = pindex[table[sid]]
            pm.fixed[j], pm.est[j] = (res[1], -1) if res[0] == "fixed" else (np.nan, res[1])
            inits.append((info["state_of"][sid], j))
        return pm, inits

    # ---- simulation conditions (petab's list: unique (preequilibration, simulation) pairs)
    sim_conds = petab_v1.get_simulation_conditions(meas_df)
    plans = []
    row_pos = np.arange(R)
    for _, sc in sim_conds.iterrows():
        sid = sc["simulationConditionId"]
        pid = sc.get("preequilibrationConditionId", None) if preeq_col else None
        pid = None if _is_empty(pid) else pid
        sim, reinit = condition_map(sid, False)
        pre, pre_init = (None, [])
        if pid is not None:
            pre, pre_init = condition_map(pid, True)
            # the start values of each phase are parameters of that phase only
            for sp_ in species_cols:
                j_pre, j_sim = pindex[info["preinit_param"][sp_]], pindex[info["init_param"][sp_]]
                sim.fixed[j_pre], sim.est[j_pre] = pre.fixed[j_pre], pre.est[j_pre]
                pre.fixed[j_sim], pre.est[j_sim] = sim.fixed[j_sim], sim.est[j_sim]
        mask = meas_df["simulationConditionId"].to_numpy() == sid
        if preeq_col:
            pre_vals = meas_df["preequilibrationConditionId"].to_numpy()
            pre_ok = np.array([(_is_empty(v) and pid is None) or v == pid for v in pre_vals])
            mask &= pre_ok
        rows = row_pos[mask]
        t = meas_df["time"].to_numpy(dtype=np.float64)[rows]
        times = np.unique(t[np.isfinite(t)])
        row_k = np.where(np.isfinite(t), np.searchsorted(times, t), times.size)
        plans.append(ConditionPlan(pid, sid, sim, pre, reinit, pre_init, times, bool(np.any(np.isinf(t))),
                                   rows, row_k.astype(np.int64)))

    # ---- per-row parameter maps (placeholders filled from the measurement table)
    ph_r, ph_j, ph_fixed, ph_est = [], [], [], []     # the rows' own placeholders, as triplets
    for r in range(R):
        row = meas_df.iloc[r]
        oid = row["observableId"]
        orow = list(obs_df.index).index(oid)
        for kind, col, fcol in (("observable", "observableParameters", "observableFormula"),
                                ("noise", "noiseParameters", "noiseFormula")):
            names = petab_v1.observables.get_formula_placeholders(str(obs_df.loc[oid, fcol]), oid, kind)
            raw = row[col] if col in meas_df.columns else None
            try:
                vals = petab_v1.measurements.split_parameter_replacement_list(
                    None if raw is None or _is_empty(raw) else raw)
            except ValueError as exc:
                raise PetabError(f"{_where(files, 'measurement', r, col)}: {exc}") from None
            if len(vals) != len(names):
                raise PetabError(f"{_where(files, 'measurement', r, col)}: {len(vals)} value(s) given, but "
                                 f"the {fcol} of observable {oid!r} (observable file row {orow + 1}) has "
                                 f"{len(names)} placeholder(s) {names}")
            for nm, v in zip(names, vals):
                res = resolve(v, _where(files, "measurement", r, col))
                if res is None:
                    raise PetabError(f"{_where(files, 'measurement', r, col)}: NaN is not a valid override")
                ph_r.append(r)
                ph_j.append(pindex[spec_name[nm]])
                ph_fixed.append(res[1] if res[0] == "fixed" else np.nan)
                ph_est.append(-1 if res[0] == "fixed" else res[1])
    placeholders = dict(row=np.array(ph_r, dtype=np.int64), param=np.array(ph_j, dtype=np.int64),
                        fixed=np.array(ph_fixed, dtype=np.float64), est=np.array(ph_est, dtype=np.int64))
    out_y = np.array([info["out_index"][(o, "y")] for o in meas_df["observableId"]], dtype=np.int64)
    out_s = np.array([info["out_index"][(o, "sigma")] for o in meas_df["observableId"]], dtype=np.int64)

    # ---- estimated parameters: scales, bounds, nominal, priors
    def col(name, default=np.nan):
        return [par_df.loc[p, name] if name in par_df.columns else default for p in est_ids]

    from .priors import scale
    lower = scale(np.array(col("lowerBound"), dtype=np.float64), scales)
    upper = scale(np.array(col("upperBound"), dtype=np.float64), scales)
    nominal = scale(np.array(col("nominalValue"), dtype=np.float64), scales)
    no_nominal = []
    for k, pid in enumerate(est_ids):
        r = list(par_df.index).index(pid)
        for name, arr in (("nominalValue", nominal), ("lowerBound", lower), ("upperBound", upper)):
            if math.isfinite(arr[k]):
                continue
            if name == "nominalValue":   # e.g. 0 on a log scale (Lang_PLOSComputBiol2024): loadable,
                no_nominal.append(f"{_where(files, 'parameter', r, name)}: {pid!r} = {par_df.loc[pid, name]}")
                nominal[k] = np.nan      # but theta must then be given (Problem._theta says so)
                continue
            raise PetabError(f"{_where(files, 'parameter', r, name)}: parameter {pid!r} needs a finite "
                             f"value on its scale, got {par_df.loc[pid, name]!r}")
    if no_nominal:
        import warnings

        from ..errors import PbsensWarning
        warnings.warn("estimated parameter(s) without a finite nominal value on their scale; the problem loads, "
                      "but evaluations and samplers need an explicit theta: " + "; ".join(no_nominal),
                      PbsensWarning, stacklevel=2)
    ptypes, pparams = [], []
    for k, pid in enumerate(est_ids):
        t = par_df.loc[pid, "objectivePriorType"] if "objectivePriorType" in par_df.columns else None
        pp = par_df.loc[pid, "objectivePriorParameters"] if "objectivePriorParameters" in par_df.columns else None
        if _is_empty(t):
            ptypes.append(None)
            pparams.append(None)
            continue
        r = list(par_df.index).index(pid)
        try:
            vals = [float(x) for x in str(pp).split(";")]
        except ValueError:
            raise PetabError(f"{_where(files, 'parameter', r, 'objectivePriorParameters')}: {pp!r} is not "
                             "two numbers 'a;b'") from None
        ptypes.append(str(t))
        pparams.append(vals)
    estimated = dict(ids=est_ids, scales=scales, lower=lower, upper=upper, nominal=nominal,
                     prior_types=ptypes, prior_params=pparams)
    rows = dict(measurement=meas, trafo=trafo, dist=dist, placeholders=placeholders,
                out_y=out_y, out_sigma=out_s, time=meas_df["time"].to_numpy(dtype=np.float64),
                obs_row={o: i for i, o in enumerate(obs_df.index)},
                observable=meas_df["observableId"].to_numpy())
    rows.update(row_parameter_maps(plans, R, npar, placeholders))
    return estimated, plans, rows


def row_parameter_maps(plans, n_rows, n_params, placeholders):
    """Per measurement row: its condition's parameter map with the row's own placeholder
    overrides (``placeholders``: arrays ``row``, ``param``, ``fixed``, ``est``).

    Returns ``dict(fixed=(R, P) floats, est=(R, P) ints, cond=(R,) condition index of each
    row, ph=(R, P) bools: the row's own placeholders)``.
    """
    row_fixed = np.empty((n_rows, n_params))
    row_est = np.empty((n_rows, n_params), dtype=np.int64)
    row_cond = np.empty(n_rows, dtype=np.int64)
    row_ph = np.zeros((n_rows, n_params), dtype=bool)
    for ci, plan in enumerate(plans):
        row_fixed[plan.rows] = plan.sim.fixed
        row_est[plan.rows] = plan.sim.est
        row_cond[plan.rows] = ci
    r, j = placeholders["row"], placeholders["param"]
    row_ph[r, j] = True
    row_fixed[r, j] = placeholders["fixed"]
    row_est[r, j] = placeholders["est"]
    return dict(fixed=row_fixed, est=row_est, cond=row_cond, ph=row_ph)


def _is_empty(v):
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    return isinstance(v, str) and not v.strip()
