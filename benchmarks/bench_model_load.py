"""Time to load a model in a fresh process, with an empty and with a warm cache.

An empty cache means sympy derivation + code generation + numba compilation;
a warm cache means importing the generated module and loading numba's machine
code from disk. Each measurement is a new Python process (median over repeats).

    python benchmarks/bench_model_load.py [--model CaMKII] [--repeats 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CODE = """
import time, json
t0 = time.perf_counter()
import pbsens
t1 = time.perf_counter()
m = pbsens.load_model({model!r})
import numpy as np
A = np.empty((m.n_states, m.n_states)); B = np.empty((m.n_states, m.n_params))
m.fns.jacs_into(0.0, m.x0, m.p, m.constants, A, B)
t2 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "load": t2 - t1}}))
"""


def run(model, cache):
    env = dict(os.environ, PBSENS_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", CODE.format(model=model)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="CaMKII")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    cold, warm = [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(run(args.model, cache))
            warm.append(run(args.model, cache))
    for label, rows in (("empty cache", cold), ("warm cache", warm)):
        print(f"{args.model} load, {label:<11}: {statistics.median(r['load'] for r in rows):7.3f} s "
              f"(+ import pbsens {statistics.median(r['import'] for r in rows):.3f} s), "
              f"median of {len(rows)} fresh processes")


if __name__ == "__main__":
    main()
