"""Resident memory over many consecutive ``sensitivities`` calls (a sampler's life).

Loads a model, solves its states once, warms up (compilation, caches), then makes
``--calls`` calls cycling through the post-hoc methods and prints the resident set size
(RSS) after the warm-up and at intervals, and the growth per 1000 calls. A leak of one
small array per call would show as tens of MB over 10^4 calls.

With ``--petab YAML`` the calls are ``Problem.evaluate`` (log-likelihood, gradient and
Fisher information) of that PEtab problem instead, at parameter vectors that change from
call to call (nominal values plus small deterministic offsets, as a sampler's moves);
the issue's figure is 10^3 such calls.

    python benchmarks/long_run.py [--model Chua] [--calls 10000] [--t1 5]
    python benchmarks/long_run.py --calls 1000 \
        --petab tests/data/petab/Boehm_JProteomeRes2014/Boehm_JProteomeRes2014.yaml
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
    ap.add_argument("--petab", metavar="YAML", help="evaluate this PEtab problem instead (Problem.evaluate)")
    args = ap.parse_args()
    if args.petab:
        return petab_main(args)
    m = pbsens.load_model(args.model)
    traj = pbsens.solve_states(m, (0.0, args.t1))
    methods = ("pbsr", "exp", "exp2", "pbsr2")

    def call(i):
        if args.with_solve:
            return pbsens.sensitivities(m, t_span=(0.0, args.t1), method=methods[i % 4], solver="LSODA")  # as traj
        return pbsens.sensitivities(m, traj, method=methods[i % 4])

    print(f"{args.model} on [0, {args.t1:g}], grid of {len(traj.t)} points, methods {', '.join(methods)} in turn"
          f"{', state solve in every call' if args.with_solve else ''}")
    r = run(call, args.calls, warmup=200)
    assert np.all(np.isfinite(r.S))


def petab_main(args):
    import pbsens.petab
    problem = pbsens.petab.load(args.petab)
    offsets = np.linspace(-0.05, 0.05, 7)

    def call(i):
        theta = problem.x_nominal + offsets[(i + np.arange(problem.dim)) % offsets.size]
        return problem.evaluate(theta)

    print(f"PEtab problem {args.petab}: {problem.dim} estimated parameters, {len(problem.conditions)} "
          f"condition(s); evaluate() with gradient and FIM at moving theta")
    r = run(call, args.calls, warmup=20)
    assert np.isfinite(r.llh)


def run(call, calls, warmup):
    """``calls`` calls after ``warmup`` ones; prints RSS along the way; returns the last result."""
    for i in range(warmup):
        call(i)
    start = rss_mb()
    print(f"RSS after {warmup} warm-up calls: {start:.1f} MB")
    step = max(calls // 10, 1)
    t0 = time.perf_counter()
    for i in range(calls):
        r = call(i)
        if (i + 1) % step == 0:
            print(f"  after {i + 1:>6} calls: RSS {rss_mb():8.1f} MB ({rss_mb() - start:+.2f} MB), "
                  f"{(time.perf_counter() - t0) / (i + 1) * 1e3:.3f} ms per call")
    end = rss_mb()
    print(f"growth over {calls} calls: {end - start:+.2f} MB ({(end - start) / calls * 1e3:+.3f} MB "
          "per 1000 calls)")
    return r


if __name__ == "__main__":
    main()
