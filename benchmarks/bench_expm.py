"""Timings of the matrix-function kernels of :mod:`pbsens.kernels.linalg`.

Not a test. Prints, for n = 11 and 21 (the PKA and CaMKII models) and several
values of ``||hA||_1``, the median time per call in microseconds of

* one n x n matrix product (``matmul_into``),
* ``expm_into`` (n x n), ``exp_phi1_into``, ``exp_phi12_into``,
* ``expm_into`` of the 2n x 2n block ``[[hA, hI], [0, 0]]`` (the alternative
  way to get ``E`` and ``F``, same compiled code) and ``scipy.linalg.expm`` of
  that block (called from Python, so it includes scipy's Python overhead),

and each time divided by the product time ("costs X matrix products"), all
measured in the same run. The numba kernels are timed inside a compiled loop,
so no interpreter overhead is included. By default the clock is the process'
CPU time, which stays meaningful when other jobs share the cores.

OpenBLAS is limited to one thread (``OPENBLAS_NUM_THREADS=1`` unless already
set): with its default threading, small products from scipy were up to 50x
slower on the 2-core development machine (thread start-up and contention).

Run: ``python3 benchmarks/bench_expm.py [--repeats 15]``.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import scipy.linalg
from numba import njit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pbsens.kernels.linalg import (exp_phi12_into, exp_phi1_into, expm_into,  # noqa: E402
                                   matmul_into, workspace)


@njit
def _loop_matmul(A, B, out, reps):
    for _ in range(reps):
        matmul_into(A, B, out)


@njit
def _loop_expm(A, out, ws, reps):
    for _ in range(reps):
        expm_into(A, out, ws)


@njit
def _loop_phi1(A, h, EF, ws, reps):
    for _ in range(reps):
        exp_phi1_into(A, h, EF, ws)


@njit
def _loop_phi12(A, h, EFF, ws, reps):
    for _ in range(reps):
        exp_phi12_into(A, h, EFF, ws)


def _sample_us(fns, reps, repeats, clock):
    """Interleaved timing: each repeat runs every kernel once, in turn, so that
    load changes on a shared machine hit all kernels alike. Returns per kernel
    (median, min) in microseconds per call."""
    for fn, r in zip(fns, reps):
        fn(1)  # compile / warm up
    samples = [[] for _ in fns]
    for _ in range(repeats):
        for k, (fn, r) in enumerate(zip(fns, reps)):
            t0 = clock()
            fn(r)
            samples[k].append((clock() - t0) / r * 1e6)
    return [(float(np.median(x)), float(np.min(x))) for x in samples]


def _test_matrix(rng, n, norm):
    """Jacobian-like matrix: stable, non-normal, scaled to ||A||_1 = norm."""
    A = rng.standard_normal((n, n)) - 2.0 * np.sqrt(n) * np.eye(n)
    return np.ascontiguousarray(A * (norm / np.abs(A).sum(axis=0).max()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="cpu: CPU time of this process (robust on a loaded "
                         "machine, the code is single-threaded); wall: perf_counter")
    args = ap.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"clock: {args.clock}, repeats: {args.repeats}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    rng = np.random.default_rng(2024)
    h = 1.0
    names = ["matmul", "expm", "phi1", "phi12", "expm2n", "scipy2n"]
    rows = []
    for n in (11, 21):
        for norm in (0.1, 1.0, 10.0, 100.0, 1000.0):
            A = _test_matrix(rng, n, norm)
            B = rng.standard_normal((n, n))
            out = np.empty((n, n))
            EF = np.empty((n, 2 * n))
            EFF = np.empty((n, 3 * n))
            ws = workspace(n)
            M = np.zeros((2 * n, 2 * n))
            M[:n, :n] = h * A
            M[:n, n:] = h * np.eye(n)
            out2 = np.empty((2 * n, 2 * n))
            ws2 = workspace(2 * n)

            def scipy_block(r):
                for _ in range(r):
                    scipy.linalg.expm(M)

            fns = [lambda r: _loop_matmul(A, B, out, r),
                   lambda r: _loop_expm(A, out, ws, r),
                   lambda r: _loop_phi1(A, h, EF, ws, r),
                   lambda r: _loop_phi12(A, h, EFF, ws, r),
                   lambda r: _loop_expm(M, out2, ws2, r),
                   scipy_block]
            base = 400 if n <= 11 else 200
            reps = [base * 10, base, base, base, base // 4, max(base // 20, 10)]
            rows.append((n, norm, _sample_us(fns, reps, args.repeats, clock)))
    for which, label in ((0, "median"), (1, "min")):
        print(f"\n{label} us per call; ratios = time / one n x n product (same statistic)")
        print(f"{'n':>3} {'||hA||':>7} | " + " ".join(f"{x:>7}" for x in names)
              + " | ratios: " + " ".join(f"{x:>7}" for x in names[1:]) + " | expm2n/phi1")
        for n, norm, res in rows:
            t = [r[which] for r in res]
            print(f"{n:>3} {norm:>7g} | " + " ".join(f"{x:7.2f}" for x in t) + " | "
                  + " " * 8 + " ".join(f"{x / t[0]:7.1f}" for x in t[1:])
                  + f" | {t[4] / t[2]:7.1f}")


if __name__ == "__main__":
    main()
