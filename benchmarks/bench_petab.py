"""PEtab benchmark problems: time of llh and llh + gradient, and the gradient's error.

For Boehm, Fujita and Brannmark (tests/data/petab): the median wall time of
``Problem.evaluate(sensitivities=False)`` (llh alone) and of ``evaluate()``
(llh + gradient + FIM) with ``exp2``, ``pbsr`` and ``fs`` at the Problem's
default solver options (printed beside each row: solver, rtol, atol, sub-steps
of the march), and the gradient's error against central finite differences of
the llh (step 1e-4 on the parameter scale, Rodas5P at rtol 1e-12, atol 1e-14),
relative in max-norm, at the nominal parameters shifted by +-0.1 on their scale
(at the optimum the gradient is a sum of cancelling terms). A ``baseline`` row
per problem repeats exp2 with the earlier default (scipy's LSODA, rtol 1e-8,
atol 1e-10, the march on LSODA's own grid), so that
the speed-up is a ratio within one run; ``--no-baseline`` leaves it out.

When AMICI is set up (its own Python >= 3.12 environment, given by
``--amici-python PATH`` or ``$PBSENS_AMICI_PYTHON``; docs/PERFORMANCE.md), its llh
and llh + gradient with forward and with adjoint sensitivities on the same
problem are timed in the same run (:func:`amici_times`, through
``benchmarks/amici_bridge.py``), at AMICI's defaults (CVODES BDF, rtol 1e-8,
atol 1e-16), with the solver time AMICI reports and its gradient's error against
the same finite differences. ``--amici-out DIR`` keeps AMICI's raw JSON.

Run from the repository root::

    python -m benchmarks.bench_petab [--repeats 10] [--problems Boehm_JProteomeRes2014 ...] \
        [--amici-python PATH] [--amici-out benchmarks/results]

The machine's load average is printed at the start and the end: on a shared
machine the times are noisy; compare rows of one run.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

try:  # run as a script: the script's folder is on sys.path
    from amici_bridge import add_amici_argument
except ImportError:  # python -m benchmarks.bench_petab
    from benchmarks.amici_bridge import add_amici_argument

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "petab"
PROBLEMS = ["Boehm_JProteomeRes2014", "Fujita_SciSignal2010", "Brannmark_JBC2010"]
#: (label, method, options beyond the Problem's defaults)
METHODS = [("exp2", "exp2", {}), ("pbsr", "pbsr", {}), ("fs", "fs", {})]
BASELINE = ("exp2 (LSODA, before)", "exp2", dict(solver="LSODA", rtol=1e-8, atol=1e-10))
FD = dict(solver="rodas5p", rtol=1e-12, atol=1e-14)
STEP = 1e-4


def _median_time(fn, repeats, cpu=False):
    """Median wall time of ``fn()`` over ``repeats`` runs after one warm-up; with ``cpu=True`` also the
    median CPU time of this process (less sensitive to other processes on a shared machine)."""
    fn()  # warm-up (compilation, caches)
    ts, cs = [], []
    for _ in range(repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
    return (statistics.median(ts), statistics.median(cs)) if cpu else statistics.median(ts)


def fd_gradient(problem, theta):
    g = np.empty(problem.dim)
    for i in range(problem.dim):
        e = np.zeros(problem.dim)
        e[i] = STEP
        g[i] = (problem.llh(theta + e, **FD) - problem.llh(theta - e, **FD)) / (2 * STEP)
    return g


#: Python of an environment with AMICI (``--amici-python`` / $PBSENS_AMICI_PYTHON), set by main()
AMICI_PYTHON = None
#: folder for AMICI's raw JSON per problem (``--amici-out``), or None
AMICI_OUT = None


def amici_times(yaml_path, repeats, theta=None, g_fd=None):
    """AMICI's numbers for one problem, or ``None`` when AMICI is not installed.

    The seam for the optional comparison: AMICI is not a dependency of pbsens, and
    AMICI 1.x needs Python >= 3.12, so it runs in its own environment through
    ``benchmarks/amici_bridge.py`` / ``benchmarks/amici_side.py`` (docs/PERFORMANCE.md).
    Returns seconds ``{"llh", "llh+grad" (forward), "llh+grad adjoint"}``, the solver
    CPU times AMICI reports (``"cpu"``, seconds per mode), ``"llh_value"``,
    ``"status"`` per mode, the gradient errors against ``g_fd`` at ``theta`` (a dict
    id -> value on scale; ``"grad_err"`` per mode) and the whole parsed result (``"raw"``).
    """
    import json
    import tempfile

    try:
        from amici_bridge import run_amici
    except ImportError:
        from benchmarks.amici_bridge import run_amici
    args = ["petab", str(yaml_path), "--repeats", str(repeats)]
    with tempfile.TemporaryDirectory() as tmp:
        if theta is not None:
            tf = Path(tmp) / "theta.json"
            tf.write_text(json.dumps({k: float(v) for k, v in theta.items()}))
            args += ["--theta-file", str(tf)]
        raw_out = None if AMICI_OUT is None else Path(AMICI_OUT) / f"amici_petab_{Path(yaml_path).stem}.json"
        res = run_amici(args, AMICI_PYTHON, raw_out=raw_out)
    if res is None:
        return None
    runs = res["runs"]
    keys = {"llh": "llh", "llh+grad": "llh+grad forward", "llh+grad adjoint": "llh+grad adjoint"}
    out = {"raw": res, "status": {}, "cpu": {}, "grad_err": {}, "wall_petab": {}, "proc": {}}
    for key, mode in keys.items():
        r = runs.get(mode, {})
        out["status"][key] = r.get("status", "missing")
        if r.get("failures"):
            f = r["failures"]
            n_cond = res.get("n_conditions", "?")
            out["status"][key] = (f"{f[0].get('status_text', f[0].get('status'))} in "
                                  f"{len({x.get('condition') for x in f})} of {n_cond} conditions")
        elif r.get("error"):
            out["status"][key] = r["error"][:80]
        ok = r.get("status") == "ok"
        out[key] = r["wall_ms"] / 1e3 if ok and r.get("wall_ms") is not None else None
        out["wall_petab"][key] = r["wall_petab_ms"] / 1e3 if ok and r.get("wall_petab_ms") is not None else None
        out["cpu"][key] = r["cpu_ms"] / 1e3 if ok and r.get("cpu_ms") is not None else None
        out["proc"][key] = r["process_cpu_ms"] / 1e3 if ok and r.get("process_cpu_ms") is not None else None
        at = r.get("at_theta") or {}
        if g_fd is not None and at.get("gradient") is not None:
            g = np.asarray(at["gradient"], dtype=float)
            out["grad_err"][key] = float(np.max(np.abs(g - g_fd)) / np.max(np.abs(g_fd)))
    out["llh_value"] = runs.get("llh", {}).get("llh")
    solver = runs.get("llh", {}).get("solver", {})
    out["rtol"], out["atol"] = solver.get("rtol"), solver.get("atol")
    return out


def _effective_options(method, options):
    """The solver options evaluate() uses for ``method`` (the Problem's defaults updated by ``options``)."""
    from pbsens.problems.problem import evaluation_options
    from pbsens.sensitivity.posthoc import DEFAULT_SUBSTEPS
    opts = evaluation_options(method, True, options)
    if method != "fs":
        opts.setdefault("substeps", DEFAULT_SUBSTEPS.get(opts["solver"], 1))
    return opts


def bench(name, repeats, baseline=True):
    import pbsens.petab as pbpetab
    yaml_path = DATA / name / f"{name}.yaml"
    problem = pbpetab.load(yaml_path)
    theta = problem.x_nominal + 0.1 * np.where(np.arange(problem.dim) % 2, 1.0, -1.0)
    t0 = time.perf_counter()
    g_fd = fd_gradient(problem, theta)
    t_fd = time.perf_counter() - t0
    rows = []
    for label, method, tol in METHODS + ([BASELINE] if baseline else []):
        t_llh, c_llh = _median_time(lambda: problem.evaluate(method=method, sensitivities=False, **tol), repeats,
                                    cpu=True)
        t_grad, c_grad = _median_time(lambda: problem.evaluate(method=method, **tol), repeats, cpu=True)
        res0 = problem.evaluate(method=method, **tol)
        g = problem.evaluate(theta, method=method, **tol).gradient
        err = float(np.max(np.abs(g - g_fd)) / np.max(np.abs(g_fd)))
        eff = _effective_options(method, tol)
        rows.append(dict(problem=name, method=label, solver=eff["solver"], rtol=eff["rtol"], atol=eff["atol"],
                         substeps=eff.get("substeps"), llh=res0.llh, t_llh=t_llh, t_grad=t_grad, c_llh=c_llh, c_grad=c_grad,
                         grad_err=err))
    am = amici_times(yaml_path, repeats, theta=dict(zip(problem.parameter_ids, theta)), g_fd=g_fd)
    return rows, am, t_fd


def amici_rows(name, am):
    """Table rows of AMICI's numbers: wall time (compiled simulations; simulate_petab in brackets) and
    the solver CPU time AMICI reports, per mode; a failed mode says so."""
    def ms(key):
        if am[key] is None:
            return f"failed ({am['status'][key]})"
        proc = "" if am["proc"].get(key) is None else f"process {1e3 * am['proc'][key]:.1f}, "
        return (f"{1e3 * am[key]:.1f} [{1e3 * am['wall_petab'][key]:.1f}] "
                f"({proc}solver {1e3 * am['cpu'][key]:.1f})")

    def err(key):
        e = am["grad_err"].get(key)
        return "" if e is None else f"{e:.1e}"
    tol = f"{am['rtol']:.0e}, {am['atol']:.0e}" if am.get("rtol") is not None else "AMICI defaults"
    llh = am["llh_value"]
    llh = f"{llh:.6f}" if isinstance(llh, float) else str(llh)
    def cpu(*keys):
        return ", ".join("" if am["proc"].get(k) is None else f"{1e3 * am['proc'][k]:.1f}" for k in keys)
    return [f"| {name} | AMICI (forward) | {tol} | {llh} | {ms('llh')} | {ms('llh+grad')} | "
            f"{cpu('llh', 'llh+grad')} | {err('llh+grad')} |",
            f"| {name} | AMICI (adjoint) | {tol} | | | {ms('llh+grad adjoint')} | {cpu('llh+grad adjoint')} | "
            f"{err('llh+grad adjoint')} |"]


def main(argv=None):
    import os
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--problems", nargs="*", default=PROBLEMS)
    ap.add_argument("--no-baseline", action="store_true", help="leave out the LSODA exp2 row")
    add_amici_argument(ap)
    ap.add_argument("--amici-out", default=None, help="save AMICI's raw JSON per problem in this folder")
    args = ap.parse_args(argv)
    global AMICI_PYTHON, AMICI_OUT
    AMICI_PYTHON, AMICI_OUT = args.amici_python, args.amici_out
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs\n")
    print("| problem | method | solver, rtol, atol, sub-steps | llh at nominal | llh [ms] | "
          "llh + gradient [ms] | CPU llh, llh + gradient [ms] | gradient error vs FD (max-norm rel.) |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.problems:
        rows, am, t_fd = bench(name, args.repeats, baseline=not args.no_baseline)
        for r in rows:
            sub = "" if r["substeps"] is None else f", {r['substeps']}"
            print(f"| {r['problem']} | {r['method']} | {r['solver']}, {r['rtol']:.0e}, {r['atol']:.0e}{sub} | "
                  f"{r['llh']:.6f} | {1e3 * r['t_llh']:.1f} | {1e3 * r['t_grad']:.1f} | "
                  f"{1e3 * r['c_llh']:.1f}, {1e3 * r['c_grad']:.1f} | {r['grad_err']:.1e} |",
                  flush=True)
        if am is None:
            print(f"| {name} | AMICI | not installed | | | | | |", flush=True)
        else:
            for line in amici_rows(name, am):
                print(line, flush=True)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"\nmedians of {args.repeats} runs after one warm-up (wall clock; CPU: this process's time); "
          f"load average at the end "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; FD reference: central differences, step {STEP} on the "
          f"parameter scale, {FD['solver']} at rtol {FD['rtol']}, atol {FD['atol']}")
    print("AMICI: wall time of its compiled simulations of all conditions (run_simulations on prepared ExpData), "
          "[in brackets: the public simulate_petab call, parameter mapping included], "
          "(process: process CPU time of the run_simulations call; "
          "solver: CPU time AMICI reports, cpu_time_total summed over conditions); benchmarks/amici_side.py")


if __name__ == "__main__":
    main()
