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
from typing import NamedTuple

import numpy as np

from ..errors import ModelError, PbsensError
from .measurement_rows import check_rows, noise_model, output_indices, placeholder_overrides
from .parameter_table import estimated_parameters, objective_priors, scaled_bounds
from .tables import PetabError, _is_empty, _petab, _where

__all__ = ["PetabError", "ParameterMap", "ConditionPlan", "build_plan", "read_problem"]

_REQUIRED = {
    "measurement": ("observableId", "simulationConditionId", "measurement", "time"),
    "observable": ("observableId", "observableFormula", "noiseFormula"),
    "condition": ("conditionId",),
    "parameter": ("parameterId", "parameterScale", "lowerBound", "upperBound", "nominalValue", "estimate"),
}

#: Largest PEtab table (or YAML) file read, in bytes (64 MiB).
MAX_TABLE_BYTES = 64 * 2**20
#: Most data rows in one PEtab table (measurement tables of the benchmark collection: up to ~10^5).
MAX_TABLE_ROWS = 200_000
#: Longest line in a PEtab table (or YAML) file, in bytes (1 MiB).
MAX_LINE_BYTES = 2**20
_PLACEHOLDER = re.compile(r"^(observable|noise)Parameter([0-9]+)_(.+)$")


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
    """``(petab.v1.Problem, files)`` read and linted; :class:`PetabError` on bad files. A PEtab 2.0
    YAML (``format_version: 2.x``) is read by ``petab.v2`` and converted (:mod:`.petab_v2`)."""
    petab_v1 = _petab()
    yaml_path = os.fspath(yaml_path)
    if not os.path.isfile(yaml_path):
        raise PetabError(f"PEtab problem file {yaml_path!r} does not exist")
    check_file_size(yaml_path, "PEtab problem file")
    try:
        cfg = petab_v1.yaml.load_yaml(yaml_path)
    except Exception as exc:
        raise PetabError(f"PEtab problem file {yaml_path!r} cannot be read: {exc}") from None
    from .petab_v2 import is_v2, read_v2
    if is_v2(cfg):           # PEtab 2.0: petab.v2 reads it, converted to the v1 tables in memory
        return read_v2(yaml_path, cfg, check_file_size)
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


def _check_constant_species(sbml, species, files):
    """Refuse condition overrides of species that are not constants: set by an assignment rule,
    an initial assignment or an event (a condition value could not say which value wins)."""
    setters = {r.getVariable(): "an assignment rule" for r in sbml.getListOfRules() if r.isAssignment()}
    setters.update({ia.getSymbol(): "an initial assignment" for ia in sbml.getListOfInitialAssignments()})
    for ev in sbml.getListOfEvents():
        setters.update({ea.getVariable(): f"event {ev.getId()!r}" for ea in ev.getListOfEventAssignments()})
    for sid in species:
        if sid in setters:
            raise PetabError(f"{_where(files, 'condition', column=sid)}: species {sid!r} is set by "
                             f"{setters[sid]}; overriding its value in a condition is not supported")


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

    # a parameter the parameter or condition table sets whose SBML initial assignment is a number
    # (petab reads that number as its value; Liu_IFACPapersOnLine2025's u_2 = 1 * 1e9, which the
    # conditions set to 1e9 or 0): the table's value wins, as in AMICI, so the assignment is
    # replaced by the parameter's value; a non-numeric one stays refused by the reader
    numeric_ia = {pid: v for pid, v in free.items() if sbml.getInitialAssignmentBySymbol(pid) is not None
                  and isinstance(v, numbers.Number) and math.isfinite(v)}
    # SBML -> spec (the reader needs a file: write the document the problem holds)
    sbml_path = files.get("sbml")
    tmp = None
    if sbml_path is None or not os.path.isfile(sbml_path) or numeric_ia:
        doc = sbml.getSBMLDocument()
        if numeric_ia:
            doc = doc.clone()
            for pid, v in numeric_ia.items():
                doc.getModel().removeInitialAssignment(pid)
                doc.getModel().getParameter(pid).setValue(float(v))
        fd, tmp = tempfile.mkstemp(suffix=".xml")
        os.close(fd)
        libsbml.writeSBMLToFile(doc, tmp)
        sbml_path = tmp
    try:
        try:
            base = read_sbml(sbml_path, parameters=list(free) + comp_cols)
            # species that no reaction or rule changes, overridden by a condition: per-condition
            # constants, i.e. model parameters set by each condition like a compartment's size
            states = {base.meta.get("sbml_names", {}).get(c, c) for c in species_cols} & set(base.state_names)
            const_species = [c for c in species_cols if base.meta.get("sbml_names", {}).get(c, c) not in states]
            if const_species:
                _check_constant_species(sbml, const_species, files)
                comp_cols = comp_cols + const_species
                species_cols = [c for c in species_cols if c not in const_species]
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
                     title=base.title, meta=dict(base.meta), events=tuple(base.events))
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


class _Maps(NamedTuple):
    """What the parameter maps of the conditions are made of (see :func:`build_plan`)."""

    problem: object
    files: dict
    model: object
    info: dict         # from build_model
    pindex: dict       # model parameter name -> index
    est_index: dict    # estimated parameter id -> index
    resolve: object    # from _resolver


def _assign(pm, j, res):
    """Model parameter ``j`` of ``pm`` from a resolved value ``('fixed', value)`` or ``('est', k)``."""
    pm.fixed[j], pm.est[j] = (res[1], -1) if res[0] == "fixed" else (np.nan, res[1])


def _petab_mapping(maps, cid, is_preeq):
    """petab's parameter mapping of condition ``cid`` (model parameter id -> value or parameter id)."""
    petab_v1 = _petab()
    problem, cond_df = maps.problem, maps.problem.condition_df
    try:
        mapping, _ = petab_v1.get_parameter_mapping_for_condition(
            condition_id=cid, is_preeq=is_preeq, cur_measurement_df=None, model=problem.model,
            condition_df=cond_df, parameter_df=problem.parameter_df, warn_unmapped=False,
            scaled_parameters=False, fill_fixed_parameters=True)
    except PbsensError:
        raise
    except Exception as exc:
        raise PetabError(f"{_where(maps.files, 'condition', list(cond_df.index).index(cid))} (condition "
                         f"{cid!r}): petab cannot map its parameters: {exc}") from None
    return mapping


def _condition_map(maps, cid, is_preeq):
    """``(ParameterMap, inits)`` of condition ``cid`` (as preequilibration if ``is_preeq``);
    ``inits``: ``[(state index, model parameter index)]`` of the species start values it sets."""
    mapping = _petab_mapping(maps, cid, is_preeq)
    files, model, info, pindex, resolve = maps.files, maps.model, maps.info, maps.pindex, maps.resolve
    cond_df, par_df = maps.problem.condition_df, maps.problem.parameter_df
    spec_name, free = info["spec_name"], info["free"]
    pm = ParameterMap(np.array(model.p, dtype=np.float64), np.full(model.n_params, -1, dtype=np.int64))
    crow = list(cond_df.index).index(cid)
    for pid, v in mapping.items():
        j = pindex.get(spec_name.get(pid, pid))
        if j is None:
            continue
        res = resolve(v, f"{_where(files, 'condition', crow)} (condition {cid!r}), parameter {pid!r}")
        if res is None:
            res = ("fixed", float(free.get(pid, model.p[j])))
        _assign(pm, j, res)
    # parameter-table-only parameters and placeholders default to the parameter table
    for pid, nm in spec_name.items():
        if pid in mapping:
            continue
        j = pindex[nm]
        if pid in maps.est_index:
            pm.fixed[j], pm.est[j] = np.nan, maps.est_index[pid]
        elif pid in par_df.index:
            pm.fixed[j] = float(par_df.loc[pid, "nominalValue"])
    for cid_col in info["comp_cols"]:
        j = pindex[spec_name[cid_col]]
        res = resolve(cond_df.loc[cid, cid_col], _where(files, "condition", crow, cid_col))
        if res is not None:
            _assign(pm, j, res)
    inits = []
    table = info["preinit_param"] if is_preeq else info["init_param"]
    for sid in info["species_cols"]:
        res = resolve(cond_df.loc[cid, sid], _where(files, "condition", crow, sid))
        if res is None:
            continue
        j = pindex[table[sid]]
        _assign(pm, j, res)
        inits.append((info["state_of"][sid], j))
    return pm, inits


def _phase_maps(maps, sid, pid):
    """``(sim, reinit, pre, pre_init)``: the maps of simulation condition ``sid`` and of
    preequilibration condition ``pid`` (``None, []`` when ``pid`` is None)."""
    sim, reinit = _condition_map(maps, sid, False)
    pre, pre_init = (None, [])
    if pid is not None:
        pre, pre_init = _condition_map(maps, pid, True)
        # the start values of each phase are parameters of that phase only
        info, pindex = maps.info, maps.pindex
        for sp_ in info["species_cols"]:
            j_pre, j_sim = pindex[info["preinit_param"][sp_]], pindex[info["init_param"][sp_]]
            sim.fixed[j_pre], sim.est[j_pre] = pre.fixed[j_pre], pre.est[j_pre]
            pre.fixed[j_sim], pre.est[j_sim] = sim.fixed[j_sim], sim.est[j_sim]
    return sim, reinit, pre, pre_init


def _condition_rows(meas_df, sid, pid):
    """``(rows, times, has_inf, row_k)`` of the simulation ``(pid, sid)``: its measurement rows,
    their finite times sorted, whether one is at t = inf, and each row's output-time index."""
    mask = meas_df["simulationConditionId"].to_numpy() == sid
    if "preequilibrationConditionId" in meas_df.columns:
        pre_vals = meas_df["preequilibrationConditionId"].to_numpy()
        pre_ok = np.array([(_is_empty(v) and pid is None) or v == pid for v in pre_vals])
        mask &= pre_ok
    rows = np.arange(len(meas_df))[mask]
    t = meas_df["time"].to_numpy(dtype=np.float64)[rows]
    times = np.unique(t[np.isfinite(t)])
    row_k = np.where(np.isfinite(t), np.searchsorted(times, t), times.size)
    return rows, times, bool(np.any(np.isinf(t))), row_k.astype(np.int64)


def _condition_plans(maps):
    """One :class:`ConditionPlan` per simulation condition (petab's list: unique
    (preequilibration, simulation) pairs)."""
    meas_df = maps.problem.measurement_df
    preeq_col = "preequilibrationConditionId" in meas_df.columns
    plans = []
    for _, sc in _petab().get_simulation_conditions(meas_df).iterrows():
        sid = sc["simulationConditionId"]
        pid = sc.get("preequilibrationConditionId", None) if preeq_col else None
        pid = None if _is_empty(pid) else pid
        sim, reinit, pre, pre_init = _phase_maps(maps, sid, pid)
        rows, times, has_inf, row_k = _condition_rows(meas_df, sid, pid)
        plans.append(ConditionPlan(pid, sid, sim, pre, reinit, pre_init, times, has_inf, rows, row_k))
    return plans


def build_plan(problem, files, model, info):
    """Estimated parameters and one :class:`ConditionPlan` per simulation condition.

    Returns ``(estimated, plans, rows)``: ``estimated`` a dict of arrays (ids,
    scales, bounds, nominal values, priors), ``rows`` a dict of per-row arrays
    of the measurement table.
    """
    par_df, meas_df = problem.parameter_df, problem.measurement_df
    pindex = {nm: j for j, nm in enumerate(model.param_names)}
    est_ids, est_index, scales = estimated_parameters(par_df, files)
    resolve = _resolver(problem, files, est_index, info["free"])
    check_rows(problem, files)
    meas, trafo, dist = noise_model(problem, files)
    plans = _condition_plans(_Maps(problem, files, model, info, pindex, est_index, resolve))
    placeholders = placeholder_overrides(problem, files, resolve, pindex, info["spec_name"])
    out_y, out_s = output_indices(meas_df, info["out_index"])
    lower, upper, nominal, no_nominal = scaled_bounds(par_df, files, est_ids, scales)
    if no_nominal:
        import warnings

        from ..errors import PbsensWarning
        warnings.warn("estimated parameter(s) without a finite nominal value on their scale; the problem loads, "
                      "but evaluations and samplers need an explicit theta: " + "; ".join(no_nominal),
                      PbsensWarning, stacklevel=2)
    ptypes, pparams = objective_priors(par_df, files, est_ids)
    estimated = dict(ids=est_ids, scales=scales, lower=lower, upper=upper, nominal=nominal,
                     prior_types=ptypes, prior_params=pparams)
    rows = dict(measurement=meas, trafo=trafo, dist=dist, placeholders=placeholders,
                out_y=out_y, out_sigma=out_s, time=meas_df["time"].to_numpy(dtype=np.float64),
                obs_row={o: i for i, o in enumerate(problem.observable_df.index)},
                observable=meas_df["observableId"].to_numpy())
    rows.update(row_parameter_maps(plans, len(meas_df), model.n_params, placeholders))
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
