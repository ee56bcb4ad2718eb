"""Where Lang's evaluation goes: cProfile of ``Problem.evaluate`` per method (issue #40). Not a test.

    python benchmarks/profile_lang_adjoint.py METHODS [YAML]

``METHODS``: comma-separated (e.g. ``exp2,exp2-adjoint``). Lang_PLOSComputBiol2024 at its nominal point
with the non-finite log-scale nominals fixed (``bench_adjoint.load_problem``, as bench_sparse_lang).
Each method is called once to warm up (its process CPU seconds and ``timing`` printed), then once
under cProfile (CPU seconds and the 45 most expensive calls by cumulative time, which cProfile
measures in wall seconds).
"""
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_adjoint import load_problem  # noqa: E402

DEFAULT = "/work/collection/Benchmark-Models/Lang_PLOSComputBiol2024/Lang_PLOSComputBiol2024.yaml"


def main():
    methods = sys.argv[1].split(",")
    yaml = sys.argv[2] if len(sys.argv) > 2 else DEFAULT
    pr, fixed = load_problem(yaml)
    th = pr.x_nominal
    print("dim", pr.dim, "fixed", fixed, flush=True)
    for m in methods:
        c0 = time.process_time()
        r = pr.evaluate(th, method=m)
        print(m, "warm cpu", time.process_time() - c0, r.timing, flush=True)
    for m in methods:
        pf = cProfile.Profile()
        c0 = time.process_time()
        pf.enable()
        pr.evaluate(th, method=m)
        pf.disable()
        print("=====", m, "cpu", time.process_time() - c0, flush=True)
        pstats.Stats(pf).sort_stats("cumulative").print_stats(45)


if __name__ == "__main__":
    main()
