"""The exp2 midpoint correction on bent intervals (METHOD.md section 14, "Where the states bend").

Part 1, per interval (slow, Python): on the grid of the default call (Rodas5P rtol 1e-5, atol 1e-6,
201 outputs merged in), for every interval that ``substeps=4`` does not call long, the states'
largest deviation from their chord at the midpoint in units of the solver's error weight
``atol + rtol max(|x_a|, |x_e|)``, and the plain exp2 step's relative local error: one step from the
exact ``S(t_a)`` (Radau forward sensitivities, rtol 1e-10) against 16 exp2 sub-steps. Summarised for
the intervals above and below ``CHORD_TOL``.

Part 2, the same run before and after: the default ``pbsens.sensitivities`` call (ODE models: CPU
median of ``--repeats`` interleaved calls, median and max E against Radau FS at rtol 1e-10) and, with
``--petab``, ``Problem.evaluate`` (exp2 and exp2-adjoint at the defaults: CPU median, gradient error
relative to a forward-sensitivity gradient at rtol 1e-11), with ``CHORD_TOL`` set to infinity for
"before" (the length rule alone) and left at its value for "after".

Part 3 (``--shifted FOLDER ...``): exp2's gradient error before and after at ``x_nominal + shift``
for shifts 0, 0.1, -0.2 and rtol 1e-6, 1e-8, 1e-10 (atol rtol/100), against fs at rtol 1e-12.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/exp2_bent_intervals.py [--repeats 20] \\
        [--petab ../shared/petab/Boehm_JProteomeRes2014 ...] [--shifted FOLDER ...] [--skip-intervals]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pbsens  # noqa: E402
import pbsens.solvers.refine as refine  # noqa: E402
from pbsens.errors import AccuracyWarning  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_error_estimate import SPANS  # noqa: E402
from collection_files import find_yaml  # noqa: E402
from exp2_gap_error import exp2_steps, jacobians_and_states  # noqa: E402
from work_precision import interleaved_medians  # noqa: E402

RTOL, ATOL = 1e-5, 1e-6


def per_interval(name):
    """``(deviation, local error)`` arrays over the intervals ``substeps=4`` does not call long."""
    m = pbsens.load_model(name)
    T = SPANS[name]
    tr = pbsens.solve_states(m, (0.0, T), t_eval=np.linspace(0.0, T, 201), method="rodas5p", rtol=RTOL, atol=ATOL)
    ref = pbsens.forward_sensitivities(m, (0.0, T), t_eval=tr.t, method="Radau", rtol=1e-10, atol=1e-12)
    jac, x_at = jacobians_and_states(m, tr)

    t, x = tr.t, tr.x
    long = refine.midpoint_plan(t, tr.sol, 4)[1] >= 0
    x_mid = np.asarray(tr.sol(0.5 * (t[:-1] + t[1:]))).T
    w = ATOL + RTOL * np.maximum(np.abs(x[:-1]), np.abs(x[1:]))
    dev = np.max(np.abs(x_mid - 0.5 * (x[:-1] + x[1:])) / w, axis=1)
    err = np.empty(t.size - 1)
    for k in np.flatnonzero(~long):
        Sa = np.ascontiguousarray(ref.S[k])
        S16 = exp2_steps(jac, t[k], t[k + 1], x_at, Sa, 16)
        err[k] = np.linalg.norm(exp2_steps(jac, t[k], t[k + 1], x_at, Sa, 1) - S16) / max(np.linalg.norm(S16), 1e-300)
    return dev[~long], err[~long], int(long.sum())


def _range(a):
    return "-" if a.size == 0 else f"{a.min():.1e} / {np.median(a):.1e} / {a.max():.1e}"


def part1(models):
    print(f"Part 1: intervals not long at substeps=4 (Rodas5P rtol {RTOL:g}, atol {ATOL:g}, 201 outputs); "
          f"CHORD_TOL = {refine.CHORD_TOL:g}")
    print("| model | long | short, bent | their deviation min / median / max | their local error | "
          "short, straight | their deviation | their local error |")
    print("|---|---|---|---|---|---|---|---|")
    for name in models:
        dev, err, n_long = per_interval(name)
        bent = dev > refine.CHORD_TOL
        print(f"| {name} | {n_long} | {bent.sum()} | {_range(dev[bent])} | {_range(err[bent])} | {(~bent).sum()} | "
              f"{_range(dev[~bent])} | {_range(err[~bent])} |", flush=True)


def _with_chord_tol(value, fn):
    saved = refine.CHORD_TOL
    refine.CHORD_TOL = value
    try:
        return fn()
    finally:
        refine.CHORD_TOL = saved


def part2_ode(models, repeats):
    after = refine.CHORD_TOL
    print(f"\nPart 2: the default call before (length rule alone) and after (CHORD_TOL = {after:g}), "
          f"CPU median of {repeats} interleaved calls")
    print("| model | before ms | after ms | after / before | before median / max E | after median / max E |")
    print("|---|---|---|---|---|---|")
    for name in models:
        m = pbsens.load_model(name)
        T = SPANS[name]
        ts = np.linspace(0.0, T, 201)
        ref = pbsens.forward_sensitivities(m, (0.0, T), t_eval=ts, method="Radau", rtol=1e-10, atol=1e-12)

        def call():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", AccuracyWarning)
                return pbsens.sensitivities(m, t_span=(0.0, T), t_eval=ts)
        med, res = interleaved_medians({"before": lambda: _with_chord_tol(np.inf, call), "after": call},
                                       repeats, time.process_time)
        E = {k: pbsens.relative_error(res[k], ref)[1:] for k in res}
        print(f"| {name} | {1e3 * med['before']:.2f} | {1e3 * med['after']:.2f} | "
              f"{med['after'] / med['before']:.2f} | {np.median(E['before']):.1e} / {E['before'].max():.1e} | "
              f"{np.median(E['after']):.1e} / {E['after'].max():.1e} |", flush=True)


def part2_petab(folders, repeats):
    import pbsens.petab
    print(f"\nPEtab problems at evaluate()'s defaults, theta = x_nominal (non-finite entries 0), CPU median "
          f"of {repeats} interleaved calls; gradient error relative to fs at rtol 1e-11, atol 1e-13")
    print("| problem | method | before ms | after ms | before error | after error |")
    print("|---|---|---|---|---|---|")
    for folder in folders:
        folder = Path(folder)
        problem = pbsens.petab.load(find_yaml(folder))
        th = np.asarray(problem.x_nominal, dtype=float)
        th = np.where(np.isfinite(th), th, 0.0)
        ref = problem.evaluate(th, method="fs", rtol=1e-11, atol=1e-13).gradient
        for method in ("exp2", "exp2-adjoint"):
            def call(method=method):
                return problem.evaluate(th, method=method)
            med, res = interleaved_medians({"before": lambda: _with_chord_tol(np.inf, call), "after": call},
                                           repeats, time.process_time)
            err = {k: np.linalg.norm(res[k].gradient - ref) / np.linalg.norm(ref) for k in res}
            print(f"| {folder.name} | {method} | {1e3 * med['before']:.1f} | {1e3 * med['after']:.1f} | "
                  f"{err['before']:.1e} | {err['after']:.1e} |", flush=True)


def part3_shifted(folders):
    """exp2's gradient error before/after at the nominal point and away from it, at three tolerances."""
    import pbsens.petab
    print("\nPart 3: exp2's gradient error (relative 2-norm, against fs at rtol 1e-12, atol 1e-14) before -> after, "
          "at theta = x_nominal + shift, evaluate(rtol=R, atol=R/100)")
    print("| problem | shift | rtol 1e-6 | rtol 1e-8 | rtol 1e-10 |")
    print("|---|---|---|---|---|")
    for folder in folders:
        folder = Path(folder)
        problem = pbsens.petab.load(find_yaml(folder))
        for shift in (0.0, 0.1, -0.2):
            th = np.asarray(problem.x_nominal, dtype=float) + shift
            th = np.where(np.isfinite(th), th, 0.0)
            ref = problem.evaluate(th, method="fs", rtol=1e-12, atol=1e-14).gradient
            cells = []
            for rtol in (1e-6, 1e-8, 1e-10):
                def grad(rtol=rtol):
                    return problem.evaluate(th, method="exp2", rtol=rtol, atol=rtol * 1e-2).gradient
                e = [np.linalg.norm(g - ref) / np.linalg.norm(ref) for g in (_with_chord_tol(np.inf, grad), grad())]
                cells.append(f"{e[0]:.1e} -> {e[1]:.1e}")
            print(f"| {folder.name} | {shift:+g} | " + " | ".join(cells) + " |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(SPANS), choices=list(SPANS))
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--petab", nargs="*", default=[], help="PEtab problem folders (one YAML file each)")
    ap.add_argument("--skip-intervals", action="store_true", help="leave out part 1")
    ap.add_argument("--shifted", nargs="*", default=[], help="PEtab folders for part 3 (errors away from the optimum)")
    args = ap.parse_args(argv)
    if not args.skip_intervals:
        part1(args.models)
    part2_ode(args.models, args.repeats)
    if args.petab:
        part2_petab(args.petab, max(3, args.repeats // 4))
    if args.shifted:
        part3_shifted(args.shifted)


if __name__ == "__main__":
    main()
