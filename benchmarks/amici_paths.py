"""Where AMICI's PEtab gradient time goes: the ways of timing it, side by side in one process.

Run in AMICI's own Python (like ``amici_side.py``, whose helpers in ``amici_common.py`` it uses;
never imports pbsens). For one PEtab problem, at the nominal parameters, the process CPU time
(``time.process_time``) of one llh + gradient over all conditions, in interleaved rounds (every
variant once per round, so that a shared machine's load hits all of them alike), medians over
``--repeats`` rounds after one warm-up round:

    before        what ``amici_side.py petab`` timed until 2026-11-28: ``run_simulations`` on the
                  ExpData at AMICI's Solver defaults (KLU, rtol 1e-8, atol 1e-16, full ReturnData),
                  each call followed by a ``simulate_petab`` call (as its loop did)
    defaults      the same call back to back, nothing in between
    defaults+lik  and the ReturnData reduced to llh and gradient (``RDataReporting.likelihood``, what
                  pyPESTO's objective asks for)
    benchmark     rtol 1e-8, atol 1e-8 (the tolerances of AMICI's own benchmark tests,
                  tests/benchmark_models/test_petab_benchmark.py), likelihood ReturnData: what
                  ``amici_side.py petab --settings benchmark`` times now
    bench dense   the same with the dense linear solver instead of AMICI's default KLU
    plist all     benchmark, but sensitivities for every model parameter (plist = all), when the
                  model has parameters no estimated one maps to
    simulate_petab  the public one-call entry at the benchmark settings (parameter mapping rebuilt)
    adjoint defaults / adjoint benchmark
    llh defaults / llh benchmark (no sensitivities)

For each: AMICI's own solver CPU time (``cpu_time_total`` summed over conditions), the CVODES steps
(a full-ReturnData run at the same tolerances), and the gradient's error at the nominal
parameters shifted by +-0.1 on their scale (as ``bench_petab.py``) against central differences of
AMICI's llh (step 1e-4 on the scale, dense solver, rtol 1e-12, atol 1e-14). Ids of the gradient
are mapped through the PEtab parameter mapping of each condition.

    $AMICI_PY benchmarks/amici_paths.py tests/data/petab/Boehm_JProteomeRes2014/Boehm_JProteomeRes2014.yaml \\
        --repeats 15 [--out paths.json]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

try:  # run as a script (how AMICI's Python runs it)
    from amici_common import (DEFAULT_CACHE, INTEGRATION_ONLY, _amici, _environment, _import_petab,
                              _quiet_amici_logs, _write)
except ImportError:  # import benchmarks.amici_paths
    from benchmarks.amici_common import (DEFAULT_CACHE, INTEGRATION_ONLY, _amici, _environment, _import_petab,
                                         _quiet_amici_logs, _write)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("yaml")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--cache-dir", default=str(DEFAULT_CACHE))
    ap.add_argument("--out", default=None, help="also write the numbers as JSON")
    args = ap.parse_args(argv)
    amici, sd = _amici()
    import numpy as np
    import petab.v1 as petab_v1
    from amici.sim.sundials.petab.v1 import create_edatas, fill_in_parameters, simulate_petab
    from amici.sim.sundials.petab.v1._parameter_mapping import create_parameter_mapping

    problem, model, _, _, _ = _import_petab(petab_v1, args.yaml, args.cache_dir)
    _quiet_amici_logs()
    import logging
    for name in list(logging.root.manager.loggerDict):   # a failing variant logs every failure: keep it out
        if name == "amici" or name.startswith("amici."):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    pid = Path(args.yaml).stem
    if any(pid.startswith(p) for p in INTEGRATION_ONLY):
        model.set_steady_state_sensitivity_mode(sd.SteadyStateSensitivityMode.integrationOnly)
    conds = problem.get_simulation_conditions_from_measurement_df()
    pm = create_parameter_mapping(petab_problem=problem, simulation_conditions=conds, scaled_parameters=True,
                                  amici_model=model)
    xnom = dict(zip(problem.x_ids, problem.get_x_nominal(scaled=True)))
    nominal = {k: v for k, v in xnom.items() if k in pm.free_symbols}
    xf = list(problem.x_free_ids)
    theta = np.array([xnom[i] for i in xf]) + 0.1 * np.where(np.arange(len(xf)) % 2, 1.0, -1.0)
    par_ids = list(model.get_free_parameter_ids())

    def edatas_at(th=None):
        e = create_edatas(amici_model=model, petab_problem=problem, simulation_conditions=conds)
        p = dict(nominal) if th is None else nominal | dict(zip(xf, th))
        fill_in_parameters(edatas=e, problem_parameters=p, scaled_parameters=True, parameter_mapping=pm,
                           amici_model=model)
        return e

    E = edatas_at()
    E_all = edatas_at()
    for e in E_all:
        e.plist = list(range(model.np()))

    def solver(method="forward", atol=None, rtol=None, lin=None, lik=False):
        s = model.create_solver()
        if method:
            s.set_sensitivity_order(sd.SensitivityOrder.first)
            s.set_sensitivity_method(getattr(sd.SensitivityMethod, method))
        if atol is not None:
            s.set_absolute_tolerance(atol)
        if rtol is not None:
            s.set_relative_tolerance(rtol)
        if lin is not None:
            s.set_linear_solver(lin)
        if lik:
            s.set_return_data_reporting_mode(sd.RDataReporting.likelihood)
        return s

    def runner(s, edatas=E):
        return lambda: sd.run_simulations(model, s, edatas, failfast=False)

    s_def = solver()
    s_bench = solver(atol=1e-8, lik=True)

    def before():   # the old amici_side.py loop: the timed call, then simulate_petab (not timed)
        c0 = time.process_time()
        rds = sd.run_simulations(model, s_def, E, failfast=False)
        c = time.process_time() - c0
        simulate_petab(problem, amici_model=model, solver=s_def, edatas=E, scaled_gradients=True, failfast=False)
        return rds, c

    variants = {  # label: (call, solver for steps/gradient, edatas)
        "before (defaults, interleaved with simulate_petab)": (before, s_def, E),
        "defaults, back to back": (runner(s_def), s_def, E),
        "defaults + likelihood ReturnData": (runner(solver(lik=True)), s_def, E),
        "benchmark (atol 1e-8, likelihood ReturnData)": (runner(s_bench), s_bench, E),
        "benchmark, dense linear solver": (runner(solver(atol=1e-8, lik=True, lin=sd.LinearSolver.dense)),
                                           solver(atol=1e-8, lin=sd.LinearSolver.dense), E),
        "simulate_petab (benchmark settings)": (
            lambda: simulate_petab(problem, amici_model=model, solver=s_bench, edatas=E, scaled_gradients=True,
                                   failfast=False)["rdatas"], s_bench, E),
        "adjoint, defaults": (runner(solver("adjoint")), solver("adjoint"), E),
        "adjoint, benchmark": (runner(solver("adjoint", atol=1e-8, lik=True)), solver("adjoint", atol=1e-8), E),
        "llh only, defaults": (runner(solver(None)), None, E),
        "llh only, benchmark": (runner(solver(None, atol=1e-8, lik=True)), None, E),
    }
    n_plist = sorted({len(e.plist) for e in E})
    if max(n_plist) < model.np():
        variants["benchmark, plist = all model parameters"] = (runner(s_bench, E_all), s_bench, E_all)

    # gradient error at theta against central differences of the tight llh
    ref = solver(None, rtol=1e-12, atol=1e-14, lin=sd.LinearSolver.dense)
    ref.set_max_steps(10 ** 6)

    def llh_at(th):
        return sum(r.llh for r in sd.run_simulations(model, ref, edatas_at(th), failfast=False))
    h, eye = 1e-4, np.eye(len(xf))
    g_fd = np.array([(llh_at(theta + h * eye[i]) - llh_at(theta - h * eye[i])) / (2 * h) for i in range(len(xf))])
    E_theta, E_theta_all = edatas_at(theta), edatas_at(theta)
    for e in E_theta_all:
        e.plist = list(range(model.np()))

    def gradient(s, edatas):
        rds = sd.run_simulations(model, s, edatas, failfast=False)
        if any(int(r.status) != sd.AMICI_SUCCESS for r in rds):
            return None, rds
        g = np.zeros(len(xf))
        for k, (e, r) in enumerate(zip(edatas, rds)):
            mp = pm.parameter_mappings[k].map_sim_var
            for j, ip in enumerate(e.plist):
                target = mp[par_ids[ip]]
                if isinstance(target, str) and target in xf:
                    g[xf.index(target)] += r.sllh[j]
        return g, rds

    info = {}
    for label, (_, s, edatas) in variants.items():
        if s is None:
            info[label] = {"grad_err": None}
            continue
        g, _ = gradient(s, E_theta_all if edatas is E_all else E_theta)
        full = model.create_solver()   # the same settings with full ReturnData: the step counts
        full.set_sensitivity_order(s.get_sensitivity_order())
        full.set_sensitivity_method(s.get_sensitivity_method())
        full.set_relative_tolerance(s.get_relative_tolerance())
        full.set_absolute_tolerance(s.get_absolute_tolerance())
        full.set_linear_solver(s.get_linear_solver())
        rds = sd.run_simulations(model, full, edatas, failfast=False)
        steps = sum(int(np.atleast_1d(np.asarray(r.numsteps, dtype=float))[-1]) for r in rds
                    if r.numsteps is not None and np.size(r.numsteps))
        info[label] = {"grad_err": None if g is None else float(np.max(np.abs(g - g_fd)) / np.max(np.abs(g_fd))),
                       "steps_forward": steps, "failed_at_theta": g is None}

    times = {k: [] for k in variants}
    solver_cpu = {k: [] for k in variants}
    ok = {k: True for k in variants}
    for rnd in range(args.repeats + 1):
        for label, (call, _, _) in variants.items():
            c0 = time.process_time()
            out = call()
            c = time.process_time() - c0
            rds, c = out if isinstance(out, tuple) else (out, c)
            ok[label] &= all(int(r.status) == sd.AMICI_SUCCESS for r in rds)
            if rnd:
                times[label].append(1e3 * c)
                solver_cpu[label].append(sum(float(r.cpu_time_total) for r in rds))
    load = os.getloadavg()
    rows = []
    print(f"{pid}: {len(E)} conditions, {model.np()} model parameters, plist lengths {n_plist}, "
          f"{len(xf)} estimated; process CPU medians of {args.repeats} interleaved rounds; load {load[0]:.2f}")
    print("| variant | process CPU [ms] | AMICI solver CPU [ms] | CVODES steps | gradient error vs FD | ok |")
    print("|---|---|---|---|---|---|")
    for label in variants:
        r = {"variant": label, "process_cpu_ms": statistics.median(times[label]),
             "solver_cpu_ms": statistics.median(solver_cpu[label]), "ok": ok[label], **info[label]}
        rows.append(r)
        e = r.get("grad_err")
        err = "failed at theta" if r.get("failed_at_theta") else ("" if e is None else f"{e:.1e}")
        print(f"| {label} | {r['process_cpu_ms']:.2f} | {r['solver_cpu_ms']:.2f} | {r.get('steps_forward', '')} | "
              f"{err} | {'yes' if ok[label] else 'FAILED'} |", flush=True)
    if args.out:
        _write(args.out, {"mode": "paths", "problem": pid, "repeats": args.repeats, "plist_lengths": n_plist,
                          "n_model_parameters": int(model.np()), "estimated_parameter_ids": xf, "rows": rows,
                          "environment": _environment(amici)})


if __name__ == "__main__":
    sys.exit(main())
