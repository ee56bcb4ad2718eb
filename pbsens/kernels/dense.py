"""Dense helpers shared by the matrix-function kernels: norms, products, elementwise
loops and the workspace (see :mod:`pbsens.kernels.linalg` for the overview).

Elementwise loops over column blocks index with unsigned integers: a signed
index that does not start at 0 keeps numba's negative-index wraparound test in
the loop and LLVM does not vectorise it (4x slower for 21 x 21 blocks).
"""
import math

import numpy as np
from numba import njit, types

from .blas import gemm
from .signatures import f8, mat, tens, vec
from .views import flat

i8 = types.int64
# Module-level numpy arrays are frozen into the compiled code as read-only.
rvec = types.Array(types.float64, 1, "C", readonly=True)

#: Matrix norm codes accepted by :func:`matrix_norm`.
NORM_1 = 0
NORM_INF = 1
NORM_FRO = 2
#: Norm names used in the user-facing API, mapped to the codes above.
NORM_CODES = {"1": NORM_1, "inf": NORM_INF, "fro": NORM_FRO}

#: Number of ``n x n`` slices in :func:`workspace`. Usage per kernel:
#: ``expm_into`` all 7 (0: scaled A, 1-3: A^2, A^4, A^6, 4: A^8 or a
#: temporary, 5-6: temporaries whose first rows also serve as the vectors of
#: ``ell``); ``exp_phi1_into`` and ``exp_phi12_into`` all 7 (0-3: ``Z .. Z^4``
#: for Paterson-Stockmeyer, 4: the Taylor sum, 5-6: Horner temporaries; then
#: 5-6 (phi1) or 4-6 (phi12), contiguous, as the ``n x 2n`` or ``n x 3n``
#: partner of the output in the doublings); 7-8 the phi kernels' deflation of isolated
#: fast states (:mod:`pbsens.kernels.phi_deflate`: the deflated matrix, and vectors in the
#: rows of 8). The kernels need 7 (:data:`NWS_MIN`); with 7 they do not deflate.
NWS = 9
#: Slices the kernels cannot do without.
NWS_MIN = 7

_U = 2.0 ** -53  # unit roundoff of IEEE double precision



# --------------------------------------------------------------------------
# Norms and products
# --------------------------------------------------------------------------

@njit(inline="always")
def _max_abs_row_sum(A):
    """``max_i sum_j |A[i, j]|``; NaN propagates."""
    best = 0.0
    for i in range(A.shape[0]):
        s = 0.0
        for j in range(A.shape[1]):
            s += abs(A[i, j])
        if s > best or s != s:
            best = s
    return best


@njit(f8(mat, i8), cache=True, _nrt=False)
def matrix_norm(A, kind):
    """Matrix norm of a (possibly rectangular) matrix.

    Parameters
    ----------
    A : ndarray, shape (n, m), float64, C-contiguous
    kind : int
        ``NORM_1`` (0): maximum absolute column sum; ``NORM_INF`` (1): maximum
        absolute row sum; ``NORM_FRO`` (2): Frobenius norm (computed with
        scaling, so it neither overflows nor underflows needlessly).

    Returns
    -------
    float
        The norm; NaN propagates.
    """
    n, m = A.shape
    if kind == NORM_1:
        return _max_abs_row_sum(A.T)     # the column sums of A (a view, no copy)
    elif kind == NORM_INF:
        return _max_abs_row_sum(A)
    elif kind == NORM_FRO:
        big = 0.0
        for i in range(n):
            for j in range(m):
                a = abs(A[i, j])
                if a > big or a != a:
                    big = a
        if big == 0.0 or not math.isfinite(big):
            return big
        s = 0.0
        for i in range(n):
            for j in range(m):
                a = A[i, j] / big
                s += a * a
        return big * math.sqrt(s)
    raise ValueError("matrix_norm: kind must be 0 (1-norm), 1 (inf-norm) or 2 (Frobenius)")


@njit(types.void(mat, mat, mat), cache=True, _nrt=False)
def matmul_into(A, B, out):
    """``out = A @ B`` without allocation.

    Parameters
    ----------
    A : ndarray, shape (n, m)
    B : ndarray, shape (m, k)
    out : ndarray, shape (n, k)
        Must not share memory with ``A`` or ``B``.

    Notes
    -----
    :func:`pbsens.kernels.blas.gemm`: register tiles (BLAS ``dgemm`` for inner
    dimensions above ``blas.TILES_MAX_K``), without numba's reference counting.
    The PBS and exponential steps call ``blas.gemm`` directly, which numba inlines.
    """
    n, m = A.shape
    k = B.shape[1]
    if B.shape[0] != m or out.shape[0] != n or out.shape[1] != k:
        raise ValueError("matmul_into: shapes do not match")
    gemm(A, B, out, 1.0, 0.0)


# --------------------------------------------------------------------------
# Elementwise helpers (no allocation)
# --------------------------------------------------------------------------

@njit(types.void(mat), cache=True, _nrt=False)
def _set_identity(X):
    n = X.shape[0]
    for i in range(n):
        for j in range(n):
            X[i, j] = 0.0
        X[i, i] = 1.0


@njit(types.void(mat, f8), cache=True, _nrt=False)
def _fill(X, v):
    n, m = X.shape
    for i in range(n):
        for j in range(m):
            X[i, j] = v


@njit(types.void(mat, mat), cache=True, _nrt=False)
def copy_into(src, dst):
    """``dst[...] = src`` for same-shape matrices, without allocation (nor a temporary)."""
    s, d = flat(src), flat(dst)
    for i in range(s.shape[0]):
        d[i] = s[i]


@njit(types.void(mat, f8), cache=True, _nrt=False)
def _scale(X, a):
    x = flat(X)
    for i in range(x.shape[0]):
        x[i] *= a


@njit(types.void(mat, mat, i8, i8, f8, i8), cache=True, _nrt=False)
def _add_cols_into(X, Y, c0, c1, a, shift):
    """Columns ``c0 <= j < c1``: ``X[:, j] += Y[:, j] + a Y[:, j - shift]`` (``a = 0``: no second term).

    The column indices are unsigned: with a signed index that does not start at
    0, numba keeps its negative-index wraparound test in the loop, which stops
    LLVM from vectorising it (measured 4x slower for a 21 x 21 block).
    """
    n = X.shape[0]
    w = np.uint64(c1 - c0)
    u0 = np.uint64(c0)
    us = np.uint64(shift)
    if a == 0.0:
        for i in range(n):
            for jj in range(w):
                j = u0 + jj
                X[i, j] += Y[i, j]
    else:
        for i in range(n):
            for jj in range(w):
                j = u0 + jj
                X[i, j] += Y[i, j] + a * Y[i, j - us]


@njit(types.void(mat, mat, f8), cache=True, _nrt=False)
def _double_f12_into(X, Y, t):
    """The sums of the phi1/phi2 doubling, for ``X = E [E | F1 | F2]``, ``Y = [E | F1 | F2]``:
    ``X[:, n:2n] += F1`` and ``X[:, 2n:] += F2 + t F1`` in one sweep per row.

    Flat views with unsigned offsets (see :func:`_add_cols_into`); the two
    blocks of a row share one loop (measured: two separate calls cost 0.11 us
    each on PKA's 11 x 33 blocks).
    """
    n = X.shape[0]
    x, y = flat(X), flat(Y)
    un = np.uint64(n)
    row = np.uint64(3 * n)
    for i in range(un):
        o1 = i * row + un
        o2 = o1 + un
        for j in range(un):
            f1 = y[o1 + j]
            x[o1 + j] += f1
            x[o2 + j] += y[o2 + j] + t * f1


@njit(types.void(mat, i8, mat, f8), cache=True, _nrt=False)
def _set_cols_scaled(X, c0, P, a):
    """``X[:, c0:c0+m] = a P`` for ``P`` of shape (n, m) (unsigned indices, see above)."""
    n, m = P.shape
    u0 = np.uint64(c0)
    for i in range(n):
        for j in range(np.uint64(m)):
            X[i, u0 + j] = a * P[i, j]


@njit(f8(mat, vec), cache=True, _nrt=False)
def norm1_rowwise(A, colsum):
    """``||A||_1`` (NaN propagates) summing rows into ``colsum`` (length ``A.shape[1]``).

    Row by row, so the inner loop is contiguous and vectorises; ``matrix_norm``
    walks columns with stride n (3x slower for n = 21).
    """
    n, m = A.shape
    for j in range(m):
        colsum[j] = 0.0
    for i in range(n):
        for j in range(m):
            colsum[j] += abs(A[i, j])
    best = 0.0
    for j in range(m):
        v = colsum[j]
        if v > best or v != v:
            best = v
    return best


@njit(f8(mat), cache=True, _nrt=False)
def _norm1(A):
    return matrix_norm(A, NORM_1)


# --------------------------------------------------------------------------
# Workspace
# --------------------------------------------------------------------------

@njit(tens(i8), cache=True)
def workspace(n):
    """Preallocated work array for the ``_into`` kernels of this module.

    Parameters
    ----------
    n : int
        Matrix dimension.

    Returns
    -------
    ndarray, shape (NWS, n, n), float64, C-contiguous
        ``NWS = 9`` slices (per-kernel usage documented at ``NWS``). One
        workspace serves any sequence of calls to ``expm_into``,
        ``exp_phi1_into`` and ``exp_phi12_into`` (not concurrent ones); its
        contents on entry do not matter.
    """
    return np.zeros((NWS, n, n))


@njit(types.void(tens, i8), cache=True, _nrt=False)
def _check_ws(ws, n):
    if ws.shape[0] < NWS_MIN or ws.shape[1] != n or ws.shape[2] != n:
        raise ValueError("workspace has the wrong shape: use workspace(n)")


@njit(types.void(vec, mat, i8, i8, vec, i8), cache=True, _nrt=False)
def vecmat_into(lam, M, j0, m, v, off):
    """``v[off:off + m] = M[:, j0:j0 + m]^T lam``, row by row over ``M`` (contiguous; vectorises)."""
    n = M.shape[0]
    um = np.uint64(m)
    uj0 = np.uint64(j0)
    uoff = np.uint64(off)
    for j in range(um):
        v[uoff + j] = 0.0
    for i in range(n):
        li = lam[i]
        if li != 0.0:
            for j in range(um):
                v[uoff + j] += li * M[i, uj0 + j]
