"""How long ``import pbsens`` takes beyond its dependencies, in fresh processes.

Each repeat starts a new interpreter, imports numpy, scipy (the parts pbsens uses), numba,
threadpoolctl and tqdm first, then ``pbsens``, and reports both times; medians over the
repeats. The cached numba kernels must exist (run anything once first). Also lists any heavy
library (pandas, petab, dask, sympy, matplotlib) that ``import pbsens`` loaded: there should be
none.

    python benchmarks/bench_import.py [--repeats 15]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = """
import json, sys, time
t0 = time.perf_counter()
import numpy, scipy, scipy.integrate, scipy.linalg, scipy.sparse, numba, threadpoolctl, tqdm
t1 = time.perf_counter()
import pbsens
t2 = time.perf_counter()
heavy = {'pandas', 'petab', 'dask', 'distributed', 'sympy', 'matplotlib'}
print(json.dumps({"deps": t1 - t0, "pbsens": t2 - t1,
                  "heavy": sorted(heavy & {m.split('.')[0] for m in sys.modules})}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    env = dict(os.environ, PBSENS_QUIET="1")
    runs = [json.loads(subprocess.run([sys.executable, "-c", CHILD], env=env, check=True, capture_output=True,
                                      text=True).stdout) for _ in range(args.repeats)]
    deps = statistics.median(r["deps"] for r in runs)
    own = statistics.median(r["pbsens"] for r in runs)
    print(f"import of the dependencies: median {deps:.3f} s; import pbsens after them: median {own:.3f} s "
          f"(min {min(r['pbsens'] for r in runs):.3f}, max {max(r['pbsens'] for r in runs):.3f}; "
          f"{args.repeats} fresh processes; load average {os.getloadavg()[0]:.2f})")
    print("heavy libraries loaded by import pbsens:", sorted({h for r in runs for h in r["heavy"]}) or "none")


if __name__ == "__main__":
    main()
