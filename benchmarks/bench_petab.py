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

When AMICI is importable (``pip install amici``; the optional ``bench`` seam
:func:`amici_times`), its llh and forward-sensitivity llh + gradient on the same
problem are timed in the same run, at AMICI's defaults (CVODES BDF, rtol 1e-8,
atol 1e-16).

Run from the repository root::

    python -m benchmarks.bench_petab [--repeats 10] [--problems Boehm_JProteomeRes2014 ...]

The machine's load average is printed at the start and the end: on a shared
machine the times are noisy; compare rows of one run.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

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


def amici_times(yaml_path, repeats):
    """``{"llh": s, "llh+grad": s, "llh_value": v}`` with AMICI, or ``None`` when it is not installed.

    The seam for the optional comparison: AMICI is not a dependency of pbsens.
    """
    try:
        import amici  # noqa: F401
        import amici.petab.petab_import as amici_import
        import amici.petab.simulations as amici_sim
        import petab.v1 as petab_v1
    except ImportError:
        return None
    problem = petab_v1.Problem.from_yaml(str(yaml_path))
    model = amici_import.import_petab_problem(problem)
    solver = model.getSolver()
    solver.setRelativeTolerance(1e-8)
    solver.setAbsoluteTolerance(1e-16)

    def run(order):
        solver.setSensitivityOrder(order)
        solver.setSensitivityMethod(amici.SensitivityMethod.forward)
        return amici_sim.simulate_petab(problem, model, solver=solver)

    out = {"llh": _median_time(lambda: run(amici.SensitivityOrder.none), repeats),
           "llh+grad": _median_time(lambda: run(amici.SensitivityOrder.first), repeats)}
    out["llh_value"] = float(run(amici.SensitivityOrder.none)["llh"])
    return out


def _effective_options(method, options):
    """The solver options evaluate() uses for ``method`` (the Problem's defaults updated by ``options``)."""
    from pbsens.problems.problem import _options
    from pbsens.sensitivities import DEFAULT_SUBSTEPS
    opts = _options(method, True, options)
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
    am = amici_times(yaml_path, repeats)
    return rows, am, t_fd


def main(argv=None):
    import os
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--problems", nargs="*", default=PROBLEMS)
    ap.add_argument("--no-baseline", action="store_true", help="leave out the LSODA exp2 row")
    args = ap.parse_args(argv)
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
            print(f"| {name} | AMICI (forward) | CVODES BDF, 1e-08, 1e-16 | {am['llh_value']:.6f} | "
                  f"{1e3 * am['llh']:.1f} | {1e3 * am['llh+grad']:.1f} | | |", flush=True)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"\nmedians of {args.repeats} runs after one warm-up (wall clock; CPU: this process's time); "
          f"load average at the end "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; FD reference: central differences, step {STEP} on the "
          f"parameter scale, {FD['solver']} at rtol {FD['rtol']}, atol {FD['atol']}")


if __name__ == "__main__":
    main()
