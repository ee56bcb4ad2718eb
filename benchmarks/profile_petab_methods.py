"""Where a PEtab gradient's time goes, per method: median CPU time and a cProfile of the kernels.

For each problem and method, ``Problem.evaluate(theta, method=..., rtol=..., atol=rtol/100)`` at
``theta = x_nominal + shift`` (default 0.1 on the parameter scale, as the work-precision runs):
one warm-up call, then ``--repeats`` timed calls (median CPU ms of this process), then the same
calls under cProfile, whose ``--top`` functions by own time are printed with their share of the
profiled total (cProfile's overhead inflates the Python parts; the compiled kernels' shares are
close to their true ones). The work-precision question "why is method X slower than Y at matched
error" is answered by the kernels' lines: e.g. the post-hoc march against the state solve.

    OPENBLAS_NUM_THREADS=1 python benchmarks/profile_petab_methods.py --problems Boehm_JProteomeRes2014 \\
        --collection PATH/Benchmark-Models --rtol 1e-6 --methods exp2 fs exp2-adjoint
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_adjoint import median_time  # noqa: E402
from work_precision_petab import problem_yaml  # noqa: E402


def profile(problem, theta, method, rtol, repeats, top):
    kw = dict(method=method, rtol=rtol, atol=rtol / 100)
    cpu = median_time(lambda: problem.evaluate(theta, **kw), repeats)[1]
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(repeats):
        problem.evaluate(theta, **kw)
    prof.disable()
    stats = pstats.Stats(prof)
    total = sum(v[2] for v in stats.stats.values())        # own times: they sum to the whole
    rows = sorted(((v[2], v[0], f"{Path(k[0]).name}:{k[1]}({k[2]})") for k, v in stats.stats.items()),
                  reverse=True)[:top]
    return cpu, total / repeats, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", nargs="+", required=True)
    ap.add_argument("--collection", default=os.environ.get("PBSENS_PETAB_COLLECTION"))
    ap.add_argument("--rtol", type=float, default=1e-6)
    ap.add_argument("--methods", nargs="+", default=["exp2", "fs", "exp2-adjoint"])
    ap.add_argument("--shift", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--top", type=int, default=6)
    args = ap.parse_args(argv)
    import pbsens.petab
    print(f"rtol {args.rtol:g}, atol {args.rtol / 100:g}; load average {os.getloadavg()[0]:.2f}")
    for name in args.problems:
        problem = pbsens.petab.load(problem_yaml(name, args.collection))
        theta = np.asarray(problem.x_nominal, dtype=float) + args.shift
        for method in args.methods:
            med, prof_total, rows = profile(problem, theta, method, args.rtol, args.repeats, args.top)
            print(f"\n{name} {method}: median {1e3 * med:.2f} ms CPU per evaluate "
                  f"(under cProfile {1e3 * prof_total:.2f} ms); own time, share of the profiled total:")
            for own, calls, where in rows:
                print(f"  {100 * own / (prof_total * args.repeats):5.1f} %  {1e3 * own / args.repeats:8.3f} ms  "
                      f"{calls // args.repeats:6d} calls  {where}")


if __name__ == "__main__":
    main()
