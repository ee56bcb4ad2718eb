"""Mode ``petab-fs`` of ``amici_side.py``: AMICI's forward sensitivities of all states of one PEtab condition.

Part of the AMICI side: run in AMICI's own Python by ``amici_side.py``, it imports only AMICI,
petab, numpy, the standard library and the helpers of ``amici_common.py`` (never pbsens).

``petab-fs YAML --params LABEL=FILE [...] --t-eval-file TS --rtol R [R ...] --atol A [A ...] --out JSON``
    Import the PEtab (v1) problem (cached in ``--cache-dir`` like mode ``petab``; ``--fix ID ...``
    sets those parameters to ``estimate = 0`` first, ``--no-conservation-laws`` keeps every state in
    the integration), take the parameters of one condition (``--condition``, default the first; no
    preequilibration) from AMICI's own PEtab parameter mapping at the nominal values, set them on
    linear scale and the output times from ``--t-eval-file``, then per ``--linear-solver``
    (``default``, ``dense``, ``klu``) and (rtol, atol) pair time, medians over ``--repeats`` after one
    warm-up (a warm-up over ``--long`` seconds is the one timed run): the state solve alone, and
    forward sensitivities w.r.t. each ``--params`` set (PEtab parameter ids, one a line, each mapped
    to exactly one AMICI parameter: ``ic_*`` ids of the condition table map to AMICI's
    ``initial_<species>_sim``). Reported per run: wall, process CPU and AMICI's CPU times, CVODES's
    steps, error-test and convergence failures, the status and CVODES's message of a failure, the
    solver settings read back, the states ``x`` (n_t, n_x) of the state solve and
    ``S[k, i, j] = dx_i(t_k)/dtheta_j`` (n_t, n_x, n_p) for the ids of ``--return-params`` (default
    all); also the condition's parameter values by AMICI id (``free_parameters``,
    ``fixed_parameters``), the PEtab id behind each sensitivity parameter (``petab_targets``) and
    AMICI's default linear solver for the model.
"""
from __future__ import annotations

import sys
from pathlib import Path

try:  # amici_side.py run as a script: the scripts' folder is on sys.path
    from amici_common import (_amici, _encode, _environment, _floats, _import_petab, _median, _messages, _pairs,
                              _quiet_amici_logs, _shown_path, _solver_settings, _status_text, _timed_runs,
                              _to_sbml_ids, _write)
except ImportError:  # import benchmarks.amici_side_fs
    from benchmarks.amici_common import (_amici, _encode, _environment, _floats, _import_petab, _median, _messages,
                                         _pairs, _quiet_amici_logs, _shown_path, _solver_settings, _status_text,
                                         _timed_runs, _to_sbml_ids, _write)


def _ids_file(path):
    return [ln.strip() for ln in Path(path).read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def _condition_values(sundials, problem, model, condition):
    """The model's parameters of one PEtab condition at the nominal values, on linear scale:
    (condition row, {AMICI free parameter id: value}, {AMICI fixed parameter id: value},
    {AMICI free parameter id: the estimated PEtab parameter id mapped onto it})."""
    import math
    from amici.sim.sundials.petab.v1 import create_edatas, fill_in_parameters
    from amici.sim.sundials.petab.v1._parameter_mapping import create_parameter_mapping
    conditions = problem.get_simulation_conditions_from_measurement_df()
    ids = list(conditions["simulationConditionId"])
    ic = ids.index(condition) if condition else 0
    if condition and condition not in ids:
        sys.exit(f"amici_side.py: --condition {condition!r}: the problem has {ids}")
    if "preequilibrationConditionId" in conditions and str(conditions.iloc[ic].get(
            "preequilibrationConditionId") or "") not in ("", "nan"):
        sys.exit("amici_side.py: petab-fs does not handle preequilibration")
    cond = conditions.iloc[[ic]].reset_index(drop=True)
    mapping = create_parameter_mapping(problem, cond, scaled_parameters=False, amici_model=model)
    edata = create_edatas(model, problem, cond)[0]
    nominal = dict(zip(problem.x_free_ids, problem.get_x_nominal(free=True, fixed=False, scaled=False)))
    fill_in_parameters([edata], nominal, False, mapping, model)
    unscale = {int(sundials.ParameterScaling.none): lambda v: v, int(sundials.ParameterScaling.ln): math.exp,
               int(sundials.ParameterScaling.log10): lambda v: 10.0 ** v}
    free = {i: unscale[int(sc)](float(v)) for i, v, sc in zip(model.get_free_parameter_ids(),
                                                             edata.free_parameters, edata.pscale)}
    fixed = dict(zip(model.get_fixed_parameter_ids(), map(float, edata.fixed_parameters)))
    targets = {k: v for k, v in mapping[0].map_sim_var.items() if isinstance(v, str)}
    return ids[ic], free, fixed, targets


def run_petab_fs(args):
    amici, sundials = _amici()
    import numpy as np
    import petab.v1 as petab_v1
    ts = [float(v) for v in Path(args.t_eval_file).read_text().split()]
    if not ts or any(b <= a for a, b in zip(ts, ts[1:])):
        sys.exit("amici_side.py: --t-eval-file must give at least one time, strictly increasing")
    problem, model, name, compiled, t_import = _import_petab(petab_v1, args.yaml, args.cache_dir, args.fix or (),
                                                             conservation_laws=args.conservation_laws)
    _quiet_amici_logs()
    cond, free, fixed, targets = _condition_values(sundials, problem, model, args.condition)
    free_ids = list(model.get_free_parameter_ids())
    by_petab = {}
    for amici_id, petab_id in targets.items():
        by_petab.setdefault(petab_id, []).append(amici_id)
    sets = {}
    for spec_ in args.params:
        label, _, path = spec_.partition("=")
        want = _ids_file(path)
        bad = [i for i in want if len(by_petab.get(i, [])) != 1]
        if bad:
            sys.exit(f"amici_side.py: --params {label}: {bad[:5]} are not mapped to exactly one model parameter")
        sets[label] = (want, [free_ids.index(by_petab[i][0]) for i in want])
    ret = set(_ids_file(args.return_params)) if args.return_params else None
    model.set_parameter_scale(sundials.ParameterScaling.none)
    model.set_free_parameters([free[i] for i in free_ids])
    model.set_fixed_parameters([fixed[i] for i in model.get_fixed_parameter_ids()])
    model.set_t0(0.0 if args.t0 is None else args.t0)
    model.set_timepoints(ts)
    amici_state_ids = [str(s) for s in model.get_state_ids()]
    linear_solvers = {"dense": sundials.LinearSolver.dense, "klu": sundials.LinearSolver.KLU}

    def make_solver(order, rtol, atol, linear_solver):
        solver = model.create_solver()
        solver.set_sensitivity_order(order)
        if order != sundials.SensitivityOrder.none:
            solver.set_sensitivity_method(sundials.SensitivityMethod.forward)
        if linear_solver != "default":
            solver.set_linear_solver(linear_solvers[linear_solver])
        solver.set_relative_tolerance(rtol)
        solver.set_absolute_tolerance(atol)
        if args.max_steps:
            solver.set_max_steps(args.max_steps)
        return solver

    def timed(solver):
        tr = _timed_runs(sundials, model, solver, args.repeats, args.long)
        rd = tr["rdata"]
        bad = [v for v in tr["statuses"] if v != sundials.AMICI_SUCCESS]
        stats = {k: int(np.asarray(getattr(rd, k))[-1]) for k in
                 ("numsteps", "num_rhs_evals", "num_err_test_fails", "num_non_lin_solv_conv_fails")}
        out = {"status": "ok" if not bad else "failed", "n_failed_runs": len(bad), "repeats": len(tr["wall"]),
               "wall_ms": _median(tr["wall"]), "process_cpu_ms": _median(tr["proc"]),
               "cpu_ms": _median(tr["cpu"]), "cpu_total_ms": _median(tr["cpu_total"]),
               "wall_ms_all": [round(w, 3) for w in tr["wall"]], "solver": _solver_settings(solver), **stats}
        if bad:
            out["status_text"] = _status_text(sundials, bad[0])
            out["messages"] = _messages(rd)
        return out, (rd if not bad else None)

    runs = []
    for linear_solver in args.linear_solver:
        for rtol, atol in _pairs(args.rtol, args.atol):
            entry = {"linear_solver": linear_solver, "rtol": rtol, "atol": atol}
            st, rd = timed(make_solver(sundials.SensitivityOrder.none, rtol, atol, linear_solver))
            if rd is not None:
                st["x"] = _encode(np.asarray(rd.x, dtype=float))
                st["x0"] = _floats(rd.x0)
            entry["states_only"] = st
            entry["sets"] = {}
            for label, (want, plist) in sets.items():
                model.set_parameter_list(plist)
                res, rd = timed(make_solver(sundials.SensitivityOrder.first, rtol, atol, linear_solver))
                keep = [j for j, i in enumerate(want) if ret is None or i in ret]
                res.update(n_params=len(plist), returned_ids=[want[j] for j in keep])
                if rd is not None:
                    sx = np.asarray(rd.sx, dtype=float)[:, keep, :]      # (n_t, n_p, n_x) in AMICI
                    res["S"] = _encode(np.transpose(sx, (0, 2, 1)))       # (n_t, n_x, n_p) as pbsens
                entry["sets"][label] = res
            runs.append(entry)
    payload = {
        "mode": "petab-fs", "problem": _shown_path(args.yaml), "condition": cond, "model_name": name,
        "model_compiled_now": compiled, "import_seconds": t_import, "conservation_laws": args.conservation_laws,
        "fixed_before_import": list(args.fix or ()), "t_eval": ts,
        "n_states": int(model.nx_rdata), "n_states_solver": int(model.nx_solver),
        "default_linear_solver": int(model.create_solver().get_linear_solver()),
        "state_ids": _to_sbml_ids(amici_state_ids, problem.model.sbml_model), "amici_state_ids": amici_state_ids,
        "free_parameters": free, "fixed_parameters": fixed, "petab_targets": targets,
        "timing": "medians over repeats after one warm-up (one repeat when the warm-up took over --long s); "
                  "wall_ms: run_simulation (process_cpu_ms: process CPU time of that call); cpu_ms: "
                  "ReturnData.cpu_time (the forward solve) as AMICI reports it",
        "S_layout": "S[k, i, j] = d x_i(t_k) / d theta_j, states state_ids, parameters returned_ids "
                    "(PEtab ids, linear scale)",
        "runs": runs, "environment": _environment(amici),
    }
    _write(args.out, payload)
    return payload


def add_parser(sub):
    """The ``petab-fs`` subcommand of ``amici_side.py``'s parser (``--repeats``, ``--out``, ``--cache-dir``
    are added there)."""
    fp = sub.add_parser("petab-fs", help="forward sensitivities of all states of one PEtab condition")
    fp.add_argument("yaml")
    fp.add_argument("--condition", default=None, help="simulation condition id (default: the first)")
    fp.add_argument("--params", action="append", required=True, metavar="LABEL=FILE",
                    help="a set of PEtab parameter ids (one a line) to take sensitivities w.r.t.; repeatable")
    fp.add_argument("--return-params", default=None, metavar="FILE",
                    help="return S only for these ids (default: every id of each set)")
    fp.add_argument("--fix", nargs="*", default=None, help="parameter ids set to estimate = 0 before the import")
    fp.add_argument("--no-conservation-laws", dest="conservation_laws", action="store_false",
                    help="import without conservation-law reduction (all states integrated)")
    fp.add_argument("--linear-solver", nargs="+", default=["default"], choices=["default", "dense", "klu"])
    fp.add_argument("--t-eval-file", required=True)
    fp.add_argument("--t0", type=float, default=None, help="start time (default 0)")
    fp.add_argument("--rtol", type=float, nargs="+", required=True)
    fp.add_argument("--atol", type=float, nargs="+", required=True)
    fp.add_argument("--max-steps", type=int, default=None, help="default: AMICI's")
    fp.add_argument("--long", type=float, default=60.0,
                    help="a warm-up longer than this many seconds is the one timed run")
    return fp
