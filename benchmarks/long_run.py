"""Resident memory over many consecutive ``sensitivities`` calls (a sampler's life).

Loads a model, solves its states once, warms up (compilation, caches), then makes
``--calls`` calls cycling through the post-hoc methods and prints the resident set size
(RSS) after the warm-up and at intervals, and the growth per 1000 calls. A leak of one
small array per call would show as tens of MB over 10^4 calls.

    python benchmarks/long_run.py [--model Chua] [--calls 10000] [--t1 5]
"""
import argparse
import gc
import time

import numpy as np
import psutil

import pbsens


def rss_mb():
    gc.collect()
    return psutil.Process().memory_info().rss / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="Chua")
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--t1", type=float, default=5.0)
    ap.add_argument("--with-solve", action="store_true",
                    help="solve the states inside every call (t_span=...) instead of reusing one trajectory")
    args = ap.parse_args()
    m = pbsens.load_model(args.model)
    traj = pbsens.solve_states(m, (0.0, args.t1))
    methods = ("pbsr", "exp", "exp2", "pbsr2")

    def call(i):
        if args.with_solve:
            return pbsens.sensitivities(m, t_span=(0.0, args.t1), method=methods[i % 4])
        return pbsens.sensitivities(m, traj, method=methods[i % 4])

    for i in range(200):
        call(i)
    start = rss_mb()
    print(f"{args.model} on [0, {args.t1:g}], grid of {len(traj.t)} points, methods {', '.join(methods)} in turn"
          f"{', state solve in every call' if args.with_solve else ''}")
    print(f"RSS after 200 warm-up calls: {start:.1f} MB")
    step = max(args.calls // 10, 1)
    t0 = time.perf_counter()
    for i in range(args.calls):
        r = call(i)
        if (i + 1) % step == 0:
            print(f"  after {i + 1:>6} calls: RSS {rss_mb():8.1f} MB ({rss_mb() - start:+.2f} MB), "
                  f"{(time.perf_counter() - t0) / (i + 1) * 1e3:.3f} ms per call")
    assert np.all(np.isfinite(r.S))
    end = rss_mb()
    print(f"growth over {args.calls} calls: {end - start:+.2f} MB ({(end - start) / args.calls * 1e3:+.3f} MB "
          "per 1000 calls)")


if __name__ == "__main__":
    main()
