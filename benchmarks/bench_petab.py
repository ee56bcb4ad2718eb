"""PEtab benchmark problems: time of llh and llh + gradient, and the gradient's error.

For Boehm, Fujita and Brannmark (tests/data/petab): the median wall time of
``Problem.evaluate(sensitivities=False)`` (llh alone) and of ``evaluate()``
(llh + gradient + FIM) with ``exp2``, ``pbsr`` and ``fs``, each at the solver
tolerances stated in the table, and the gradient's error against central finite
differences of the llh (step 1e-4 on the parameter scale, solver rtol 1e-12,
atol 1e-14), relative in max-norm, at the nominal parameters shifted by +-0.1
on their scale (at the optimum the gradient is a sum of cancelling terms).

When AMICI is importable (``pip install amici``; the optional ``bench`` seam
:func:`amici_times`), its llh and forward-sensitivity llh + gradient on the same
problem are timed in the same run, at AMICI's defaults (CVODES BDF, rtol 1e-8,
atol 1e-16).

Run from the repository root::

    python benchmarks/bench_petab.py [--repeats 5] [--problems Boehm_JProteomeRes2014 ...]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "petab"
PROBLEMS = ["Boehm_JProteomeRes2014", "Fujita_SciSignal2010", "Brannmark_JBC2010"]
METHODS = {"exp2": dict(rtol=1e-8, atol=1e-10), "pbsr": dict(rtol=1e-8, atol=1e-10),
           "fs": dict(rtol=1e-8, atol=1e-10)}
FD = dict(rtol=1e-12, atol=1e-14)
STEP = 1e-4


def _median_time(fn, repeats):
    fn()  # warm-up (compilation, caches)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


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


def bench(name, repeats):
    import pbsens.petab as pbpetab
    yaml_path = DATA / name / f"{name}.yaml"
    problem = pbpetab.load(yaml_path)
    theta = problem.x_nominal + 0.1 * np.where(np.arange(problem.dim) % 2, 1.0, -1.0)
    t0 = time.perf_counter()
    g_fd = fd_gradient(problem, theta)
    t_fd = time.perf_counter() - t0
    rows = []
    for method, tol in METHODS.items():
        t_llh = _median_time(lambda: problem.evaluate(method=method, sensitivities=False, **tol), repeats)
        t_grad = _median_time(lambda: problem.evaluate(method=method, **tol), repeats)
        res0 = problem.evaluate(method=method, **tol)
        g = problem.evaluate(theta, method=method, **tol).gradient
        err = float(np.max(np.abs(g - g_fd)) / np.max(np.abs(g_fd)))
        rows.append(dict(problem=name, method=method, rtol=tol["rtol"], atol=tol["atol"], llh=res0.llh,
                         t_llh=t_llh, t_grad=t_grad, grad_err=err))
    am = amici_times(yaml_path, repeats)
    return rows, am, t_fd


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--problems", nargs="*", default=PROBLEMS)
    args = ap.parse_args(argv)
    print("| problem | method | state/joint solver tol (rtol, atol) | llh at nominal | llh [ms] | "
          "llh + gradient [ms] | gradient error vs FD (max-norm rel.) |")
    print("|---|---|---|---|---|---|---|")
    for name in args.problems:
        rows, am, t_fd = bench(name, args.repeats)
        for r in rows:
            print(f"| {r['problem']} | {r['method']} | {r['rtol']:.0e}, {r['atol']:.0e} | {r['llh']:.6f} | "
                  f"{1e3 * r['t_llh']:.1f} | {1e3 * r['t_grad']:.1f} | {r['grad_err']:.1e} |", flush=True)
        if am is None:
            print(f"| {name} | AMICI | not installed | | | | |", flush=True)
        else:
            print(f"| {name} | AMICI (forward) | 1e-08, 1e-16 | {am['llh_value']:.6f} | {1e3 * am['llh']:.1f} | "
                  f"{1e3 * am['llh+grad']:.1f} | |", flush=True)
    print(f"\nmedians of {args.repeats} runs after one warm-up; FD reference: central differences, step "
          f"{STEP} on the parameter scale, rtol {FD['rtol']}, atol {FD['atol']}")


if __name__ == "__main__":
    main()
