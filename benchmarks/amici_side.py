"""AMICI's side of the pbsens benchmarks: a stand-alone script run in AMICI's own Python.

AMICI (https://github.com/AMICI-dev/AMICI; Froehlich et al., Bioinformatics 2021)
1.x needs Python >= 3.12 and a C++ tool chain, so it lives in its own virtual
environment (docs/PERFORMANCE.md, "AMICI side by side"). This script, the mode
of ``amici_side_fs.py`` it dispatches to and the helpers both share
(``amici_common.py``) import only AMICI, petab, numpy and the standard library
(never pbsens); the pbsens benchmarks start it as a subprocess through
``benchmarks/amici_bridge.py`` and read the JSON it writes.

Modes
-----
``petab YAML --repeats N --out JSON``
    Import the PEtab (v1) problem with ``amici.importers.petab.v1`` (the model
    is compiled once into ``--cache-dir``, default ``benchmarks/.amici_cache/``,
    and reused while the SBML and tables are unchanged), then time, at the
    problem's nominal parameters: the llh alone, llh + gradient with forward
    sensitivities and llh + gradient with adjoint sensitivities. Each is timed
    two ways, medians over ``N`` repeats after one warm-up:

    * ``wall_ms``: ``amici.sim.sundials.run_simulations`` on ExpData objects
      filled once with the nominal parameters (as pyPESTO's objective does:
      ``plist`` holds only the model parameters behind estimated ones; the
      lengths are ``plist_lengths``), i.e. the compiled simulations of all
      conditions with per-condition llh and its gradient, no PEtab bookkeeping,
      the repeats back to back, one thread;
    * ``wall_petab_ms``: the public one-call entry
      ``amici.sim.sundials.petab.v1.simulate_petab`` with those ExpData objects
      (it rebuilds the parameter mapping and maps the gradient to the PEtab
      parameters on their scale in Python on every call), timed apart, over
      ``--petab-repeats`` (default ``--repeats``; 0: not timed, null);
    * ``process_cpu_ms``: the CPU time of this process over that same
      ``run_simulations`` call (``time.process_time``: AMICI is single-threaded
      here, so this is what the wall time would be on an idle machine; on a
      loaded, shared machine the wall time also counts the waits for a core);
    * ``cpu_ms``: the solver CPU time AMICI reports itself, summed over
      conditions (``cpu_time_total`` of each ReturnData; the parts
      ``cpu_time`` forward, ``cpu_time_b`` backward, ``preeq_cpu_time`` and
      ``preeq_cpu_time_b`` preequilibration are reported too).

    ``--theta-file F.json`` (``{parameter id: value on its scale}``) also
    reports llh and gradient at those parameters (``at_theta`` of each gradient
    run), so that the caller can check AMICI's gradient against its own finite
    differences away from the optimum.

    Solver (``--settings``, recorded in ``settings``): ``benchmark`` (default),
    AMICI at its best as its own benchmark tests time the PEtab benchmark
    collection (tests/benchmark_models/test_petab_benchmark.py) and as pyPESTO
    runs it: CVODES BDF with AMICI's default KLU linear solver, rtol 1e-8, atol
    1e-8, steady-state sensitivities by integration for Brannmark_JBC2010 and
    Isensee_JCB2018 (AMICI 1.1's model default already), ReturnData reduced to llh and gradient
    (``RDataReporting.likelihood``); ``defaults``: AMICI's Solver defaults (rtol
    1e-8, atol 1e-16, full ReturnData). ``--rtol``/``--atol`` override either.
    AMICI's atol 1e-16 doubles the CVODES steps on Boehm_JProteomeRes2014 (1.7-2x
    the forward-gradient time at the same gradient error) and makes its forward
    sensitivities fail on Fujita_SciSignal2010 (``amici_common.BENCHMARK_TOLERANCES``).
    A failed simulation (a CVODES error) is recorded in ``status``/``failures``
    and the run goes on.

``sbml FILE --t-eval T0 T1 ... --rtol R [R ...] --atol A [A ...] --repeats N --out JSON``
    Forward sensitivities ``S[k, i, j] = dx_i(t_k)/dp_j`` of every state with
    respect to every (free, constant) SBML parameter at the output times, one
    run per (rtol, atol) pair, timing the median wall time of
    ``run_simulation``, the process CPU time of that call (``process_cpu_ms``)
    and the solver CPU time AMICI reports (``cpu_time``: the forward integration;
    ``cpu_time_total``: all of AMICI's simulation call);
    ``states_only`` times the state solve alone (no sensitivities) at the same
    tolerances.
    ``S`` is written in state and parameter order of AMICI's model, with the
    SBML ids (``state_ids``, ``parameter_ids``; AMICI's own renaming of ids that
    clash with its reserved symbols, ``k`` -> ``amici_k``, undone; AMICI's ids are
    ``amici_state_ids``, ``amici_parameter_ids``): the caller maps them by id. It is
    stored exactly, as base64 of little-endian float64 bytes
    (``{"shape", "dtype", "base64"}``). Initial values given by SBML initial
    assignments that depend on parameters are handled by AMICI (``S`` at
    ``t0`` is ``dx0/dp``). ``--t-eval-file`` reads the output times from a
    text file instead (one number per line).

``petab-fs YAML --params LABEL=FILE ... --t-eval-file TS --rtol ... --atol ... --out JSON``
    Forward sensitivities of all states of one PEtab condition w.r.t. chosen sets of PEtab
    parameters, on linear scale, per linear solver and tolerance pair, with the state solve alone
    (``amici_side_fs.py``, which has the details; ``benchmarks/amici_lang.py`` uses it).

Run (from the repository root, with AMICI's Python)::

    AMICI_PY=/path/to/amici-venv/bin/python
    $AMICI_PY benchmarks/amici_side.py petab PROBLEM.yaml --repeats 10 --out amici_boehm.json
    $AMICI_PY benchmarks/amici_side.py sbml model.xml --t-eval-file ts.txt --rtol 1e-6 --atol 1e-7 \\
        --repeats 10 --out amici_pka.json
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

try:  # run as a script (how AMICI's Python runs it): the script's folder is on sys.path
    import amici_side_fs
    from amici_common import (DEFAULT_CACHE, SETTINGS, _amici, petab_settings, _digest, _encode, _environment, _floats, _import_petab,
                              _median, _messages, _module_name, _num, _pairs, _quiet_amici_logs, _shown_path,
                              _solver_settings, _status_text, _timed_runs, _to_sbml_ids, _write)
except ImportError:  # import benchmarks.amici_side
    from benchmarks import amici_side_fs
    from benchmarks.amici_common import (DEFAULT_CACHE, SETTINGS, _amici, petab_settings, _digest, _encode, _environment, _floats,
                                         _import_petab, _median, _messages, _module_name, _num, _pairs,
                                         _quiet_amici_logs, _shown_path, _solver_settings, _status_text,
                                         _timed_runs, _to_sbml_ids, _write)


# --------------------------------------------------------------------------- petab mode

def _petab_rdatas_summary(sundials, rdatas):
    """Sums over conditions of llh and the CPU times AMICI reports, and failed conditions."""
    tot = {k: 0.0 for k in ("cpu_time", "cpu_time_b", "preeq_cpu_time", "preeq_cpu_time_b", "cpu_time_total")}
    fails = []
    llh = 0.0
    for rd in rdatas:
        for k in tot:
            tot[k] += float(getattr(rd, k, 0.0) or 0.0)
        st = int(rd.status)
        if st != sundials.AMICI_SUCCESS:
            fails.append({"condition": str(getattr(rd, "id", "") or ""), "status": st,
                          "status_text": _status_text(sundials, st), "messages": _messages(rd)})
        llh += float(rd.llh)
    return llh, tot, fails


def _petab_at_theta(sundials, simulate_petab, problem, model, solver, edatas, theta, x_ids):
    """llh and gradient (on scale) at the parameters ``theta`` (on scale; others nominal), one call."""
    try:
        res = simulate_petab(problem, amici_model=model, solver=solver, edatas=edatas, problem_parameters=theta,
                             scaled_parameters=True, scaled_gradients=True, failfast=False)
    except Exception as exc:
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    _, _, fails = _petab_rdatas_summary(sundials, res["rdatas"])
    out = {"theta": theta, "llh": _num(res["llh"]), "status": "ok" if not fails else "failed",
           "failures": fails[:20]}
    if res.get("sllh") is not None and not fails:
        out["gradient"] = _floats([res["sllh"].get(i, float("nan")) for i in x_ids])
    return out


def _fill_nominal(problem, model, conditions, edatas):
    """Fill the nominal parameters (on their scale) into ``edatas`` once, as pyPESTO's objective does:
    the parameter mapping of ``simulate_petab`` (fixed parameters filled in), so each ExpData's
    ``plist`` holds only the model parameters that estimated PEtab parameters map to. Returns the
    ``plist`` lengths."""
    from amici.sim.sundials.petab.v1 import fill_in_parameters
    from amici.sim.sundials.petab.v1._parameter_mapping import create_parameter_mapping  # as pyPESTO imports it
    mapping = create_parameter_mapping(petab_problem=problem, simulation_conditions=conditions,
                                       scaled_parameters=True, amici_model=model)
    nominal = {k: v for k, v in zip(problem.x_ids, problem.get_x_nominal(scaled=True)) if k in mapping.free_symbols}
    fill_in_parameters(edatas=edatas, problem_parameters=nominal, scaled_parameters=True,
                       parameter_mapping=mapping, amici_model=model)
    return [len(e.plist) for e in edatas]


def run_petab(args):
    amici, sundials = _amici()
    import petab.v1 as petab_v1
    from amici.sim.sundials.petab.v1 import create_edatas, simulate_petab

    problem, model, name, compiled, t_import = _import_petab(petab_v1, args.yaml, args.cache_dir)
    _quiet_amici_logs()
    conf = petab_settings(args.settings, Path(args.yaml).stem, args.rtol, args.atol, args.steady_state_sensitivity)
    if conf["steady_state_integration"]:
        model.set_steady_state_sensitivity_mode(sundials.SteadyStateSensitivityMode.integrationOnly)
    conditions = problem.get_simulation_conditions_from_measurement_df()
    edatas = create_edatas(amici_model=model, petab_problem=problem, simulation_conditions=conditions)
    plist_lengths = _fill_nominal(problem, model, conditions, edatas)
    x_ids = list(problem.x_free_ids)
    theta = None
    if args.theta_file:
        theta = {str(k): float(v) for k, v in json.loads(Path(args.theta_file).read_text()).items()}
        unknown = sorted(set(theta) - set(x_ids))
        if unknown:
            sys.exit(f"amici_side.py: --theta-file {args.theta_file}: {unknown} are not estimated parameters")
    reporting = (sundials.RDataReporting.likelihood if conf["reporting"] == "likelihood"
                 else sundials.RDataReporting.full)

    def make_solver(order, method):
        solver = model.create_solver()
        if conf["rtol"] is not None:
            solver.set_relative_tolerance(conf["rtol"])
        if conf["atol"] is not None:
            solver.set_absolute_tolerance(conf["atol"])
        if args.max_steps:
            solver.set_max_steps(args.max_steps)
        solver.set_sensitivity_order(order)
        if method is not None:
            solver.set_sensitivity_method(method)
        solver.set_return_data_reporting_mode(reporting)
        return solver

    modes = {"llh": (sundials.SensitivityOrder.none, None),
             "llh+grad forward": (sundials.SensitivityOrder.first, sundials.SensitivityMethod.forward),
             "llh+grad adjoint": (sundials.SensitivityOrder.first, sundials.SensitivityMethod.adjoint)}
    wanted = {"llh": "llh", "forward": "llh+grad forward", "adjoint": "llh+grad adjoint"}
    modes = {label: v for label, v in modes.items() if label in {wanted[m] for m in args.modes}}
    run_simulations = sundials.run_simulations
    runs = {}
    for label, (order, method) in modes.items():
        solver = make_solver(order, method)
        entry = {"sensitivity_order": str(order), "sensitivity_method": None if method is None else str(method),
                 "solver": _solver_settings(solver)}
        try:
            # the public one-call entry, once: llh and the gradient w.r.t. the estimated PEtab
            # parameters on their scale (the gradient reported and checked by the caller)
            res = simulate_petab(problem, amici_model=model, solver=solver, edatas=edatas,
                                 scaled_gradients=True, failfast=False)
        except Exception as exc:          # record, never crash: the other modes still run
            entry.update(status="error", error=f"{type(exc).__name__}: {exc}")
            runs[label] = entry
            continue
        _, _, fails = _petab_rdatas_summary(sundials, res["rdatas"])
        entry["llh"] = _num(res["llh"])
        sllh = res.get("sllh")
        if sllh is not None and not fails:
            entry["gradient_ids"] = x_ids
            entry["gradient"] = _floats([sllh.get(i, float("nan")) for i in x_ids])
        # the timed call: the compiled simulations of all conditions on the ExpData filled once,
        # back to back (nothing else runs between two timed calls); the first call is the warm-up
        wall, proc, cpu, failures = [], [], {}, []
        for rep in range(args.repeats + 1):
            c0, t0 = time.process_time(), time.perf_counter()
            rdatas = run_simulations(model, solver, edatas, failfast=False)
            t1, c1 = time.perf_counter(), time.process_time()
            _, tot, fails_r = _petab_rdatas_summary(sundials, rdatas)
            if rep == 0:
                continue
            wall.append(1e3 * (t1 - t0))
            proc.append(1e3 * (c1 - c0))
            for k, v in tot.items():
                cpu.setdefault(k, []).append(v)
            failures.extend(fails_r)
        # the public simulate_petab call (parameter mapping rebuilt per call), timed apart
        wall_petab = []
        n_petab = args.repeats if args.petab_repeats is None else args.petab_repeats
        for rep in range(n_petab + 1 if n_petab > 0 else 0):
            t0 = time.perf_counter()
            simulate_petab(problem, amici_model=model, solver=solver, edatas=edatas, scaled_gradients=True,
                           failfast=False)
            if rep:
                wall_petab.append(1e3 * (time.perf_counter() - t0))
        entry.update(
            status="ok" if not fails and not failures else "failed",
            failures=(fails or failures)[:20],
            n_failed_runs=sum(1 for _ in failures),
            wall_ms=_median(wall), process_cpu_ms=_median(proc), wall_petab_ms=_median(wall_petab),
            cpu_ms=_median(cpu.get("cpu_time_total", [])),
            cpu_parts_ms={k: _median(v) for k, v in cpu.items()},
            wall_ms_all=[round(w, 4) for w in wall], process_cpu_ms_all=[round(c, 4) for c in proc])
        if theta is not None and order != sundials.SensitivityOrder.none:
            entry["at_theta"] = _petab_at_theta(sundials, simulate_petab, problem, model, solver, edatas, theta,
                                                x_ids)
        runs[label] = entry
    payload = {
        "mode": "petab", "problem": _shown_path(args.yaml), "model_name": name,
        "model_compiled_now": compiled, "import_seconds": t_import,
        "n_conditions": len(edatas), "n_measurements": int(len(problem.measurement_df)),
        "n_states": int(model.nx_rdata), "n_model_parameters": int(model.np()),
        "estimated_parameter_ids": x_ids,
        "nominal_scaled": _floats(problem.get_x_nominal(free=True, fixed=False, scaled=True)),
        "repeats": args.repeats,
        "settings": conf,
        "steady_state_sensitivity_mode": str(model.get_steady_state_sensitivity_mode()),
        "plist_lengths": plist_lengths, "n_threads": 1,
        "timing": "medians over repeats after one warm-up; wall_ms: run_simulations on the ExpData filled "
                  "once with the nominal parameters (plist: the estimated parameters), the repeats back to "
                  "back, one thread (process_cpu_ms: process CPU time of that call); "
                  "wall_petab_ms: simulate_petab (mapping rebuilt per call), timed apart; cpu_ms: sum over "
                  "conditions of ReturnData.cpu_time_total as AMICI reports it",
        "gradient_scale": "d llh / d theta with theta on the PEtab parameterScale",
        "runs": runs,
        "environment": _environment(amici),
    }
    _write(args.out, payload)
    return payload


# --------------------------------------------------------------------------- sbml mode

def _import_sbml(path, cache_dir):
    amici, _ = _amici()
    from amici.importers.sbml import SbmlImporter
    name = _module_name("sbml_" + Path(path).stem, _digest([path], getattr(amici, "__version__", "")))
    out_dir = Path(cache_dir) / name
    compiled = False
    t0 = time.perf_counter()
    try:
        module = amici.import_model_module(name, out_dir)
    except Exception:
        if out_dir.exists():
            shutil.rmtree(out_dir)
        SbmlImporter(str(path)).sbml2amici(name, out_dir, observation_model=[])
        module = amici.import_model_module(name, out_dir)
        compiled = True
    return module.get_model(), name, compiled, time.perf_counter() - t0


def run_sbml(args):
    amici, sundials = _amici()
    import numpy as np
    if args.t_eval_file:
        ts = [float(v) for v in Path(args.t_eval_file).read_text().split()]
    else:
        ts = list(args.t_eval or [])
    if not ts or any(b <= a for a, b in zip(ts, ts[1:])):
        sys.exit("amici_side.py: --t-eval must give at least one time, strictly increasing")
    model, name, compiled, t_import = _import_sbml(args.file, args.cache_dir)
    _quiet_amici_logs()
    model.set_t0(ts[0] if args.t0 is None else args.t0)
    model.set_timepoints(ts)
    model.set_parameter_scale(sundials.ParameterScaling.none)
    model.require_sensitivities_for_all_parameters()
    amici_state_ids = [str(s) for s in model.get_state_ids()]
    amici_par_ids = [str(s) for s in model.get_free_parameter_ids()]
    state_ids = _to_sbml_ids(amici_state_ids, args.file)
    par_ids = _to_sbml_ids(amici_par_ids, args.file)
    runs = []
    for rtol, atol in _pairs(args.rtol, args.atol):
        solver = model.create_solver()
        solver.set_sensitivity_order(sundials.SensitivityOrder.first)
        solver.set_sensitivity_method(sundials.SensitivityMethod.forward)
        solver.set_relative_tolerance(rtol)
        solver.set_absolute_tolerance(atol)
        if args.max_steps:
            solver.set_max_steps(args.max_steps)
        entry = {"rtol": rtol, "atol": atol, "solver": _solver_settings(solver)}
        tr = _timed_runs(sundials, model, solver, args.repeats)
        wall, proc, cpu, cpu_total, statuses, rdata = (tr[k] for k in ("wall", "proc", "cpu", "cpu_total",
                                                                       "statuses", "rdata"))
        # the state solve alone at the same tolerances (no sensitivities), for the state-solver comparison
        solver0 = model.create_solver()
        solver0.set_sensitivity_order(sundials.SensitivityOrder.none)
        solver0.set_relative_tolerance(rtol)
        solver0.set_absolute_tolerance(atol)
        if args.max_steps:
            solver0.set_max_steps(args.max_steps)
        tr0 = _timed_runs(sundials, model, solver0, args.repeats)
        wall0, proc0, cpu0, cput0, st0, rd0 = (tr0[k] for k in ("wall", "proc", "cpu", "cpu_total",
                                                                "statuses", "rdata"))
        entry["states_only"] = {"status": "ok" if all(v == sundials.AMICI_SUCCESS for v in st0) else "failed",
                                "wall_ms": _median(wall0), "process_cpu_ms": _median(proc0),
                                "cpu_ms": _median(cpu0), "cpu_total_ms": _median(cput0),
                                "numsteps": int(np.asarray(rd0.numsteps)[-1])}
        bad = [s for s in statuses if s != sundials.AMICI_SUCCESS]
        if bad:
            entry["messages"] = _messages(rdata)
        entry.update(status="ok" if not bad else "failed",
                     status_text=_status_text(sundials, bad[0] if bad else statuses[-1]),
                     n_failed_runs=len(bad), wall_ms=_median(wall), process_cpu_ms=_median(proc),
                     cpu_ms=_median(cpu),
                     cpu_total_ms=_median(cpu_total), wall_ms_all=[round(w, 4) for w in wall],
                     numsteps=int(np.asarray(rdata.numsteps)[-1]) if rdata is not None else None)
        if not bad:
            sx = np.asarray(rdata.sx, dtype=float)          # (n_t, n_p, n_x) in AMICI
            entry["x"] = _encode(np.asarray(rdata.x, dtype=float))
            entry["S"] = _encode(np.transpose(sx, (0, 2, 1)))   # (n_t, n_x, n_p) as pbsens
        runs.append(entry)
    payload = {
        "mode": "sbml", "file": _shown_path(args.file), "model_name": name, "model_compiled_now": compiled,
        "import_seconds": t_import, "t_eval": ts, "state_ids": state_ids, "parameter_ids": par_ids,
        "amici_state_ids": amici_state_ids, "amici_parameter_ids": amici_par_ids,
        "parameter_values": _floats(model.get_free_parameters()),
        "n_states_solver": int(model.nx_solver), "repeats": args.repeats,
        "timing": "medians over repeats after one warm-up; wall_ms: run_simulation (process_cpu_ms: process "
                  "CPU time of that call); cpu_ms: "
                  "ReturnData.cpu_time (forward solve with sensitivities) as AMICI reports it",
        "S_layout": "S[k, i, j] = d x_i(t_k) / d p_j, states state_ids, parameters parameter_ids (linear scale)",
        "runs": runs, "environment": _environment(amici),
    }
    _write(args.out, payload)
    return payload


# --------------------------------------------------------------------------- command line

def build_parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="mode", required=True)
    pp = sub.add_parser("petab", help="llh, llh + gradient (forward, adjoint) of a PEtab problem")
    pp.add_argument("yaml")
    pp.add_argument("--settings", choices=SETTINGS, default="benchmark",
                    help="benchmark (default): AMICI as its own benchmark tests and pyPESTO run it (rtol 1e-8, "
                         "atol 1e-8, steady-state sensitivities by integration for Brannmark and Isensee, "
                         "ReturnData reduced to llh and gradient); defaults: AMICI's Solver defaults "
                         "(rtol 1e-8, atol 1e-16, full ReturnData)")
    pp.add_argument("--rtol", type=float, default=None, help="overrides --settings")
    pp.add_argument("--atol", type=float, default=None, help="overrides --settings")
    pp.add_argument("--steady-state-sensitivity", choices=("auto", "integration", "default"), default="auto",
                    help="auto: by integration for the problems AMICI's benchmark tests name (--settings "
                         "benchmark only); integration; default: the model's (integration only in AMICI 1.1)")
    pp.add_argument("--modes", nargs="+", choices=["llh", "forward", "adjoint"],
                    default=["llh", "forward", "adjoint"],
                    help="which runs to make (default all three; benchmarks/collection.py needs only llh)")
    pp.add_argument("--max-steps", type=int, default=None,
                    help="CVODES's step limit per output interval (default: AMICI's, 10000)")
    pp.add_argument("--petab-repeats", type=int, default=None,
                    help="repeats of the simulate_petab timing (default --repeats; 0: not timed, "
                         "wall_petab_ms is null)")
    pp.add_argument("--theta-file", default=None,
                    help="JSON {parameter id: value on its scale}: also report llh and gradient there "
                         "(parameters not given stay nominal)")
    sp = sub.add_parser("sbml", help="forward sensitivities of all states w.r.t. all parameters")
    sp.add_argument("file")
    sp.add_argument("--t-eval", type=float, nargs="+")
    sp.add_argument("--t-eval-file")
    sp.add_argument("--t0", type=float, default=None, help="start time (default: the first output time)")
    sp.add_argument("--rtol", type=float, nargs="+", required=True)
    sp.add_argument("--atol", type=float, nargs="+", required=True)
    sp.add_argument("--max-steps", type=int, default=None, help="default: AMICI's")
    fp = amici_side_fs.add_parser(sub)
    for p in (pp, sp, fp):
        p.add_argument("--repeats", type=int, default=10)
        p.add_argument("--out", default="-", help="JSON file (default: stdout)")
        p.add_argument("--cache-dir", default=str(DEFAULT_CACHE),
                       help="compiled AMICI models (default: benchmarks/.amici_cache)")
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.repeats < 1:
        sys.exit("amici_side.py: --repeats must be >= 1")
    if args.mode == "petab-fs":
        return amici_side_fs.run_petab_fs(args)
    return run_petab(args) if args.mode == "petab" else run_sbml(args)


if __name__ == "__main__":
    main()
