"""State solve: scipy's LSODA (``pbsens.solve_states``) against the compiled Rodas5P (issue 19).

PKA and CaMKII on [0, 600], rtol 1e-5, atol 1e-6, 201 output times: median wall
time over repeats after warm-up, timed round-robin (one call of each per
repeat, so drift in the load of this shared machine affects both alike) with
garbage collection off (see :func:`interleaved_medians`); the ratio LSODA / Rodas5P from the
same run; and the accuracy of each against a tight reference (scipy's Radau
at rtol 1e-11, atol 1e-13): the largest relative state error at the output
times, ``max |x - x_ref| / (atol/rtol + |x_ref|)`` (relative where states are
above atol/rtol = 0.1, absolute/0.1 below), and the largest error in units of
the tolerance, ``max |x - x_ref| / (atol + rtol |x_ref|)``. Also the steps and
evaluations each solver used, and Rodas5P's Python-side overhead (front
function minus the compiled kernel alone, from the same run).

    python benchmarks/bench_state_solvers.py [--repeats 40]

(from a worktree whose pbsens is not the installed one: ``PYTHONPATH=. python ...``)
"""
import argparse
import gc
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pbsens  # noqa: E402
from pbsens.solvers import rosenbrock as rb  # noqa: E402

CASES = [("PKA", 600.0), ("CaMKII", 600.0)]
RTOL, ATOL = 1e-5, 1e-6


def interleaved_medians(fns, repeats, collect_each=False):
    """Median seconds of each callable, timed round-robin, garbage collection off.

    ``collect_each``: run ``gc.collect()`` before every call (as
    ``bench_sensitivities.py`` does). That is not what a caller's loop sees: a
    full collection leaves the next Python-level calls cold (measured here:
    ``check_t_span`` 5 us warm, 160 us right after ``gc.collect()``), which
    charges ~0.3 ms to any function with a Python front. By default the
    collector is off for the whole timing loop instead (one collection before it).
    """
    for fn in fns.values():
        fn()  # warm-up (compilation, caches)
    times = {name: [] for name in fns}
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            for name, fn in fns.items():
                if collect_each:
                    gc.collect()
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    finally:
        gc.enable()
    return {name: statistics.median(v) for name, v in times.items()}


def errors(tr, xr):
    x = tr.x[tr.eval_index]
    d = np.abs(x - xr)
    return (d / (ATOL / RTOL + np.abs(xr))).max(), (d / (ATOL + RTOL * np.abs(xr))).max()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--collect-each", action="store_true", help="gc.collect() before every timed call")
    args = ap.parse_args()
    print(f"rtol {RTOL:g}, atol {ATOL:g}, 201 output times; median of {args.repeats} interleaved runs; ms; "
          f"gc off{', collected before each call' if args.collect_each else ''}")
    print(f"{'model':<7} {'LSODA':>8} {'Rodas5P':>8} {'ratio':>6} {'kernel':>7} {'front':>6}   "
          f"{'rel.err LSODA':>13} {'Rodas5P':>8}   {'err/tol LSODA':>13} {'Rodas5P':>8}   steps / nfev / njev")
    for name, t_end in CASES:
        m = pbsens.load_model(name)
        te = np.linspace(0, t_end, 201)
        ref = pbsens.solve_states(m, (0, t_end), t_eval=te, method="Radau", rtol=1e-11, atol=1e-13)
        xr = ref.x[ref.eval_index]

        def lsoda():
            return pbsens.solve_states(m, (0, t_end), t_eval=te, rtol=RTOL, atol=ATOL)

        def rodas():
            return rb.solve_rosenbrock(m, (0, t_end), t_eval=te, rtol=RTOL, atol=ATOL)

        # the compiled kernel alone, with the arguments the front function prepares
        k = rb._kernels()
        addr, autonomous = rb._bound(m)
        x0, p, c = m.x0, m.p, m.constants
        rv, av, stops = np.full(m.n_states, RTOL), np.full(m.n_states, ATOL), np.array([t_end])
        counts, info = np.zeros(6, dtype=np.int64), np.zeros(3)

        def kernel():
            return k.rodas5p_solve(addr, 0.0, x0, p, c, rv, av, stops, 0.0, np.inf, 100_000, autonomous,
                                   rb._INITIAL_CAPACITY, counts, info)

        med = interleaved_medians({"lsoda": lsoda, "rodas": rodas, "kernel": kernel}, args.repeats,
                                  args.collect_each)
        tl, tr_ = lsoda(), rodas()
        el, er = errors(tl, xr), errors(tr_, xr)
        sl, sr = tl.stats, tr_.stats
        print(f"{name:<7} {med['lsoda'] * 1e3:8.3f} {med['rodas'] * 1e3:8.3f} {med['lsoda'] / med['rodas']:5.1f}x "
              f"{med['kernel'] * 1e3:7.3f} {(med['rodas'] - med['kernel']) * 1e3:6.3f}   "
              f"{el[0]:13.2e} {er[0]:8.2e}   {el[1]:13.2f} {er[1]:8.2f}   "
              f"LSODA {sl['n_steps']}/{sl['nfev']}/{sl['njev']}, "
              f"Rodas5P {sr['n_steps']}/{sr['nfev']}/{sr['njev']} ({sr['n_rejected']} rejected)")


if __name__ == "__main__":
    main()
