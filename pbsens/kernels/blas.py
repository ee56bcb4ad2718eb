"""Matrix products on row-major views: ``C = alpha A @ B + beta C`` through BLAS ``dgemm``.

``np.dot(A, B, out)`` in numba takes C-contiguous matrices only and always
overwrites ``out``. The kernels often need a product of blocks of a larger
matrix (``E`` is the left block of ``[E | F]``) or an accumulating product
(``S += G B``). :func:`gemm_into` does both: any 2-D float64 views whose rows
are contiguous (``strides[1] == 8``) and whose row stride is the leading
dimension, and a ``beta`` for accumulation. It calls the same BLAS routine as
``np.dot`` (numba's ``numba_xxgemm`` helper, which dispatches to
``scipy.linalg.cython_blas.dgemm``), so it costs no more per call, saves the
copies and sums around it, and one product of ``n x 2n`` or ``n x 3n`` blocks
is cheaper than two or three ``n x n`` products (measured for n = 21 on this
machine: 1.25 us against 2 x 0.89 us).

Tiny products (``m*k*n <= SMALL_PRODUCT``) use loops (:func:`gemm_loops`, which
:func:`pbsens.kernels.linalg.matmul_into` calls too), because BLAS's call
overhead dominates there.
"""
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload
import numba.np.linalg  # noqa: F401  (registers numba's BLAS helpers)

from .signatures import f8, mat

#: 2-D float64 array of any layout (the kernels check that rows are contiguous).
amat = types.Array(types.float64, 2, "A")

# Products (n, m) @ (m, k) with n*m*k up to this use plain loops, larger ones
# BLAS dgemm. Measured on this machine (Xeon, AVX-512, OpenBLAS 0.3.31,
# numba 0.68), microseconds per n x n product, median of 7 runs:
#     n       3      11     21     42     100
#     loops   0.03   0.61   3.0    14     190     (best of several loop orders)
#     dgemm   0.14   0.25   0.65   3.0    33
# The crossover is between n = 6 (loops 0.12, dgemm 0.14) and n = 8 (0.22 vs
# 0.16): LLVM does not turn the loops into FMA kernels, so BLAS wins early.
SMALL_PRODUCT = 216
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


@njit([types.void(mat, mat, mat, f8, f8), types.void(amat, amat, amat, f8, f8)], cache=True, _nrt=False)
def gemm_loops(A, B, C, alpha, beta):
    """``C = alpha A @ B + beta C`` by loops, for tiny products (see ``SMALL_PRODUCT``).

    Two rows of ``C`` per sweep, accumulated in registers: the fastest of the
    loop orders tried. Compiled for C-contiguous arrays (no stride loads; what
    ``linalg.matmul_into`` calls) and for any layout (``gemm_into``'s views).
    With ``beta == 0`` the contents of ``C`` are ignored.
    """
    n, m = A.shape
    k = B.shape[1]
    i = 0
    while i + 1 < n:
        for j in range(k):
            s0 = 0.0
            s1 = 0.0
            for l in range(m):
                b = B[l, j]
                s0 += A[i, l] * b
                s1 += A[i + 1, l] * b
            if beta == 0.0:
                C[i, j] = alpha * s0
                C[i + 1, j] = alpha * s1
            else:
                C[i, j] = alpha * s0 + beta * C[i, j]
                C[i + 1, j] = alpha * s1 + beta * C[i + 1, j]
        i += 2
    if i < n:
        for j in range(k):
            s0 = 0.0
            for l in range(m):
                s0 += A[i, l] * B[l, j]
            C[i, j] = alpha * s0 if beta == 0.0 else alpha * s0 + beta * C[i, j]


def gemm(A, B, C, alpha, beta):
    """``C = alpha A @ B + beta C``, inlined into the compiled code that calls it.

    The same operation and checks as :func:`gemm_into`, for use inside kernels:
    numba inlines it at the call site, so a product costs BLAS's call and no
    further function calls (measured 0.2 us less per PBS step at 11 x 35, where
    three products take ~1 us). Only callable from numba-compiled code.
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
        # BLAS needs contiguous rows; the leading dimension is the row stride
        lda = A.strides[0] // 8
        ldb = B.strides[0] // 8
        ldc = C.strides[0] // 8
        rows_ok = ((A.strides[1] == 8) & (B.strides[1] == 8) & (C.strides[1] == 8)
                   & (A.strides[0] % 8 == 0) & (B.strides[0] % 8 == 0) & (C.strides[0] % 8 == 0)
                   & (lda >= k) & (ldb >= n) & (ldc >= n))
        if m == 0 or n == 0:
            pass
        elif k == 0 or m * k * n <= SMALL_PRODUCT:
            gemm_loops(A, B, C, alpha, beta)
        elif not rows_ok:
            raise ValueError("gemm_into: every row must be contiguous (row-major views only)")
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
    multiple of 8 of at least ``8 * shape[1]``; otherwise ``ValueError``
    (tiny products, computed by loops, accept any strides). Kernels call
    :func:`gemm`, the same code inlined.
    """
    gemm(A, B, C, alpha, beta)
