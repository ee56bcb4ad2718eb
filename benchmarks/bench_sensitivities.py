"""Cost of post-hoc sensitivities relative to the state solve (issue: approximators).

For PKA and CaMKII on [0, 600] and Chua on [0, 10], rtol 1e-5, atol 1e-6, 201
output times: median over repeats (after warm-up) of the state solve alone,
state + each method, and the ratios to the state solve, all in the same run.

    python benchmarks/bench_sensitivities.py [--repeats 30] [--methods pbsr exp exp2 pbsr2]
"""
import argparse
import os
import statistics
import time

# Small matrices: OpenBLAS threads only add synchronisation cost on a shared 2-core machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pbsens  # noqa: E402

CASES = [("PKA", 600.0), ("CaMKII", 600.0), ("Chua", 10.0)]


def median_time(fn, repeats):
    fn()  # warm-up (compilation)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--methods", nargs="+", default=["pbsr", "exp", "exp2", "pbsr2"])
    args = ap.parse_args()
    print(f"median over {args.repeats} runs; times in ms; ratio = (state + method) / state")
    print(f"{'model':<8} {'grid':>5} {'state':>8} " + " ".join(f"{m:>16}" for m in args.methods)
          + "   per-step exp")
    for name, t_end in CASES:
        m = pbsens.load_model(name)
        te = np.linspace(0, t_end, 201)

        def state():
            return pbsens.solve_states(m, (0, t_end), t_eval=te, rtol=1e-5, atol=1e-6, dense_output=False)

        tr = state()
        t_state = median_time(state, args.repeats)
        cells = []
        for method in args.methods:
            t_m = median_time(lambda: pbsens.sensitivities(m, state(), method=method), args.repeats)
            cells.append(f"{t_m * 1e3:8.2f} ({t_m / t_state:4.2f}x)")
        # cost of the sensitivity pass alone per grid interval with the exponential step
        t_exp_only = median_time(lambda: pbsens.sensitivities(m, tr, method="exp"), args.repeats)
        print(f"{name:<8} {len(tr.t):>5} {t_state * 1e3:8.2f} " + " ".join(f"{c:>16}" for c in cells)
              + f"   {t_exp_only / (len(tr.t) - 1) * 1e6:6.1f} us")
        r = pbsens.sensitivities(m, tr, method="pbsr")
        print(f"{'':<8} pbsr branches: {r.branch_counts()}, mean n_int on pbs intervals "
              f"{r.n_int[r.branch == 'pbs'].mean() if np.any(r.branch == 'pbs') else 0:.1f}")


if __name__ == "__main__":
    main()
