"""Small matrix products: register tiles (``kernels.tiles``) against BLAS ``dgemm``.

Not a test. For the shapes the march multiplies (PKA: 11 x 11 and 11 x 35,
CaMKII: 21 x 21 and 21 x 59, the ``n x 2n`` blocks of the phi functions, the
random linear system up to n = 100), prints the median time per product in
microseconds of

* ``tiles``: :func:`pbsens.kernels.tiles.gemm_tiles`, what ``blas.gemm`` uses
  for inner dimensions up to ``blas.TILES_MAX_K``;
* ``dgemm``: the BLAS routine ``np.dot`` calls (numba's ``numba_xxgemm``, which
  dispatches to ``scipy.linalg.cython_blas.dgemm``), called the same way;

and their ratio. Both run inside a compiled loop (no interpreter overhead),
alternating between the two within every repeat, so that drift in the load of
this shared machine affects both alike. ``C = A @ B`` (beta = 0) throughout.

OpenBLAS is limited to one thread (``OPENBLAS_NUM_THREADS=1`` unless already
set). Which OpenBLAS kernels run depends on the CPU OpenBLAS detects; the
script prints what ``threadpoolctl`` reports when it is installed.

Run: ``python benchmarks/bench_products.py [--repeats 15]``.
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from pbsens.kernels.blas import _N, _xxgemm  # noqa: E402
from pbsens.kernels.tiles import gemm_tiles  # noqa: E402

SHAPES = [(3, 3, 2), (11, 11, 11), (11, 11, 22), (11, 11, 35), (11, 22, 35), (21, 21, 21), (21, 21, 42),
          (21, 21, 59), (21, 42, 59), (42, 42, 42), (100, 100, 100), (100, 100, 200)]


@njit
def _loop_tiles(A, B, C, reps):
    for _ in range(reps):
        gemm_tiles(A, B, C, 1.0, 0.0)


@njit
def _loop_dgemm(A, B, C, reps):
    m, k = A.shape
    n = B.shape[1]
    for _ in range(reps):
        # row-major C = A B is column-major C^T = B^T A^T
        _xxgemm(_N, _N, n, m, k, 1.0, B.ctypes.data, n, A.ctypes.data, k, 0.0, C.ctypes.data, n)


def _blas_info():
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"
    return "; ".join(f"{d.get('internal_api')} {d.get('version')} {d.get('architecture')} "
                     f"({os.path.basename(d.get('filepath', ''))})" for d in threadpool_info()
                     if d.get("user_api") == "blas") or "no BLAS found"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    print(f"BLAS: {_blas_info()}")
    print(f"median of {args.repeats} repeats, microseconds per product C = A @ B")
    print(f"{'m x k x n':>14} {'tiles':>9} {'dgemm':>9} {'dgemm/tiles':>12}")
    rng = np.random.default_rng(0)
    for m, k, n in SHAPES:
        A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
        C1, C2 = np.empty((m, n)), np.empty((m, n))
        _loop_tiles(A, B, C1, 1)
        _loop_dgemm(A, B, C2, 1)
        assert np.allclose(C1, A @ B, rtol=1e-12, atol=1e-12) and np.allclose(C2, A @ B, rtol=1e-12, atol=1e-12)
        reps = max(20, int(3e6 / (m * k * n)))
        times = {"tiles": [], "dgemm": []}
        for _ in range(args.repeats):
            for name, fn, C in (("tiles", _loop_tiles, C1), ("dgemm", _loop_dgemm, C2)):
                t0 = time.perf_counter()
                fn(A, B, C, reps)
                times[name].append((time.perf_counter() - t0) / reps * 1e6)
        t = {name: statistics.median(v) for name, v in times.items()}
        print(f"{f'{m}x{k}x{n}':>14} {t['tiles']:9.3f} {t['dgemm']:9.3f} {t['dgemm'] / t['tiles']:11.2f}x")


if __name__ == "__main__":
    main()
