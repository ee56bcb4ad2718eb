"""Cost of post-hoc sensitivities relative to the state solve (issues: approximators, exp2/pbsr2).

For PKA and CaMKII on [0, 600] and Chua on [0, 10], rtol 1e-5, atol 1e-6, 201
output times: median over repeats (after warm-up) of the state solve alone,
state + each method, and the ratios to the state solve; then the sensitivity
pass alone (on one stored trajectory) for each method, and pbsr2's cost over
exp both ways (issue 5's target: within 1.5x). All in the same run, timed
round-robin (one call of each per repeat), with garbage collection off during
each call.

    python benchmarks/bench_sensitivities.py [--repeats 40] [--methods pbsr exp exp2 pbsr2]
"""
import argparse
import gc
import os
import statistics
import time

# Small matrices: OpenBLAS threads only add synchronisation cost on a shared 2-core machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pbsens  # noqa: E402

CASES = [("PKA", 600.0), ("CaMKII", 600.0), ("Chua", 10.0)]


def interleaved_medians(fns, repeats):
    """Median seconds of each callable, timed round-robin so that drift in machine load
    (this machine is shared) affects all of them alike; garbage collection is off
    during each call, as in ``timeit``."""
    for fn in fns.values():
        fn()  # warm-up (compilation, caches)
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
            finally:
                gc.enable()
    return {name: statistics.median(v) for name, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--methods", nargs="+", default=["pbsr", "exp", "exp2", "pbsr2"])
    args = ap.parse_args()
    print(f"median over {args.repeats} runs; times in ms; ratio = (state + method) / state; "
          "'pass': the sensitivity pass alone")
    print(f"{'model':<8} {'grid':>5} {'state':>8} " + " ".join(f"{m:>16}" for m in args.methods))
    for name, t_end in CASES:
        m = pbsens.load_model(name)
        te = np.linspace(0, t_end, 201)

        def state():
            return pbsens.solve_states(m, (0, t_end), t_eval=te, rtol=1e-5, atol=1e-6, dense_output=False)

        tr = state()
        fns = {"state": state}
        for method in args.methods:
            fns[method] = lambda method=method: pbsens.sensitivities(m, state(), method=method)
        for method in args.methods:   # the sensitivity pass alone, on a stored trajectory
            fns[method + " pass"] = lambda method=method: pbsens.sensitivities(m, tr, method=method)
        med = interleaved_medians(fns, args.repeats)
        t_state = med["state"]
        cells = [f"{med[m_] * 1e3:8.2f} ({med[m_] / t_state:4.2f}x)" for m_ in args.methods]
        print(f"{name:<8} {len(tr.t):>5} {t_state * 1e3:8.2f} " + " ".join(f"{c:>16}" for c in cells))
        passes = [f"{med[m_ + ' pass'] * 1e3:.2f} ms" for m_ in args.methods]
        print(f"{'':<8} {'pass':>5} {'':>8} " + " ".join(f"{c:>16}" for c in passes)
              + (f"   (exp: {med['exp pass'] / (len(tr.t) - 1) * 1e6:.1f} us per interval)"
                 if "exp" in args.methods else ""))
        if "exp" in args.methods and "pbsr2" in args.methods:
            print(f"{'':<8} pbsr2 / exp: {med['pbsr2'] / med['exp']:.2f}x with the state solve, "
                  f"{med['pbsr2 pass'] / med['exp pass']:.2f}x the sensitivity pass alone")
        r = pbsens.sensitivities(m, tr, method="pbsr")
        print(f"{'':<8} pbsr branches: {r.branch_counts()}, mean n_int on pbs intervals "
              f"{r.n_int[r.branch == 'pbs'].mean() if np.any(r.branch == 'pbs') else 0:.1f}, "
              f"exp reused on {int(pbsens.sensitivities(m, tr, method='exp').reused.sum())} intervals")


if __name__ == "__main__":
    main()
