"""Matrix products on row-major views: ``C = alpha A @ B + beta C``.

``np.dot(A, B, out)`` in numba takes C-contiguous matrices only, always
overwrites ``out`` and needs numba's reference counting. The kernels often need
a product of blocks of a larger matrix (``E`` is the left block of ``[E | F]``)
or an accumulating product (``S += G B``). :func:`gemm` (inlined into compiled
callers) and :func:`gemm_into` (callable from Python) do both, for any 2-D
float64 views whose rows are contiguous (``strides[1] == 8``) and whose row
stride is the leading dimension, with a ``beta`` for accumulation:

* inner dimension ``k <= TILES_MAX_K``: register tiles
  (:func:`pbsens.kernels.tiles.gemm_tiles`); with AVX-512 3-5x faster than
  OpenBLAS's dgemm for the march's 11 x 11 to 42 x 42 products and 1.6x at
  100 x 100, with AVX2 1.2-2.1x up to 42 x 42 (measurements in ``tiles``);
* longer inner dimensions: BLAS ``dgemm``, the routine ``np.dot`` calls
  (numba's ``numba_xxgemm`` helper, which dispatches to
  ``scipy.linalg.cython_blas.dgemm``), whose cache blocking pays off there.
"""
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload
import numba.np.linalg  # noqa: F401  (registers numba's BLAS helpers)

from .signatures import f8
from .tiles import LANES, gemm_tiles

#: 2-D float64 array of any layout (the kernels check that rows are contiguous).
amat = types.Array(types.float64, 2, "A")

#: Products whose inner dimension is at most this use register tiles, longer ones
#: BLAS: a tile streams a ``k x 16`` panel of ``B`` (32 KiB at ``k = 256``, an L1
#: cache) and keeps its accumulators in registers. Measured on an AVX-512 machine the
#: tiles were still 1.6x faster than OpenBLAS (its Haswell kernels) at 300 x 300 x 300;
#: without AVX-512 (4 lanes, :func:`pbsens.kernels.tiles.vector_lanes`) they are 0.9x of it
#: at 100 x 100 x 100 and 0.5x at 200, so 128 there: it keeps the dense march's products
#: of models up to 59 states (inner dimension ``2 nx``) BLAS-free (``sensitivity.posthoc``).
TILES_MAX_K = 256 if LANES == 8 else 128
_N = 110               # ord("n"): no transposition


@intrinsic
def _xxgemm(typingctx, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """Column-major ``C = alpha op(A) op(B) + beta C`` via numba's ``numba_xxgemm``.

    ``a``, ``b``, ``c`` are data addresses (integers); returns BLAS's status.
    """
    sig = types.int32(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

    def codegen(context, builder, signature, args):
        char = ir.IntType(8)
        intp = context.get_value_type(types.intp)
        vp = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [char, char, char, intp, intp, intp, vp, vp, intp,
                                                vp, intp, vp, vp, intp])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "numba_xxgemm")
        ta, tb, m_, n_, k_, al, a_, lda_, b_, ldb_, be, c_, ldc_ = args
        alpha_slot = cgutils.alloca_once_value(builder, al)
        beta_slot = cgutils.alloca_once_value(builder, be)
        return builder.call(fn, (ir.Constant(char, ord("d")),
                                 builder.trunc(ta, char), builder.trunc(tb, char),
                                 m_, n_, k_, builder.bitcast(alpha_slot, vp),
                                 builder.inttoptr(a_, vp), lda_, builder.inttoptr(b_, vp), ldb_,
                                 builder.bitcast(beta_slot, vp), builder.inttoptr(c_, vp), ldc_))
    return sig, codegen


def gemm(A, B, C, alpha, beta):
    """``C = alpha A @ B + beta C``, inlined into the compiled code that calls it.

    The same operation and checks as :func:`gemm_into`, for use inside kernels:
    numba inlines it at the call site, so a product costs no function call (the
    tiles are inlined too). Only callable from numba-compiled code.
    """
    raise TypeError("blas.gemm is inlined into compiled kernels; from Python call gemm_into")


@overload(gemm, inline="always")
def _gemm_overload(A, B, C, alpha, beta):
    if not all(isinstance(X, types.Array) and X.ndim == 2 and X.dtype == types.float64
               for X in (A, B, C)):
        return None

    def impl(A, B, C, alpha, beta):
        # one exit (no early return): numba's inliner prefers straight-line bodies
        m, k = A.shape
        n = B.shape[1]
        if B.shape[0] != k or C.shape[0] != m or C.shape[1] != n:
            raise ValueError("gemm_into: shapes do not match")
        # tiles and BLAS need contiguous rows; the leading dimension is the row stride
        lda = A.strides[0] // 8
        ldb = B.strides[0] // 8
        ldc = C.strides[0] // 8
        rows_ok = ((A.strides[1] == 8) & (B.strides[1] == 8) & (C.strides[1] == 8)
                   & (A.strides[0] % 8 == 0) & (B.strides[0] % 8 == 0) & (C.strides[0] % 8 == 0)
                   & (lda >= k) & (ldb >= n) & (ldc >= n))
        if not rows_ok:
            raise ValueError("gemm_into: every row must be contiguous (row-major views only)")
        elif m == 0 or n == 0:
            pass
        elif k <= TILES_MAX_K:
            gemm_tiles(A, B, C, alpha, beta)
        # Row-major C = A B is column-major C^T = B^T A^T: swap the operands.
        elif _xxgemm(_N, _N, n, m, k, alpha, B.ctypes.data, ldb, A.ctypes.data, lda, beta,
                     C.ctypes.data, ldc) != 0:
            raise RuntimeError("gemm_into: BLAS dgemm is not available (scipy.linalg.cython_blas)")
    return impl


@njit(types.void(amat, amat, amat, f8, f8), cache=True, _nrt=False)
def gemm_into(A, B, C, alpha, beta):
    """``C = alpha A @ B + beta C`` without allocation, for row-major views.

    Parameters
    ----------
    A : ndarray, shape (m, k), float64
    B : ndarray, shape (k, n), float64
    C : ndarray, shape (m, n), float64
        Output; must not share memory with ``A`` or ``B``. With ``beta == 0``
        its contents on entry are ignored (not multiplied: NaN does not leak).
    alpha, beta : float

    All three may be views into larger arrays (e.g. ``X[:, :n]``) as long as
    each row is contiguous: ``strides[1] == 8`` and ``strides[0]`` a positive
    multiple of 8 of at least ``8 * shape[1]``; otherwise ``ValueError``.
    Kernels call :func:`gemm`, the same code inlined.
    """
    gemm(A, B, C, alpha, beta)
