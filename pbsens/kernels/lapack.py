"""LAPACK's LU inverse (``dgetrf`` + ``dgetri``) on a row-major matrix, from compiled code.

numba's own ``np.linalg.inv`` allocates (it needs numba's reference counting, which the
kernels run without); this calls the same LAPACK routines through numba's helpers
(``numba_xxgetrf``, ``numba_ez_xxgetri``, which dispatch to ``scipy.linalg.cython_lapack``)
on the caller's arrays. A row-major ``M`` is the column-major ``M^T``; LAPACK inverts that
in place, ``(M^T)^-1``, which read row-major is ``M^-1``: no transposition is needed.
"""
import numpy as np
from numba import njit, types
from numba.np.linalg import F_INT_nbtype, F_INT_nptype, _LAPACK

from .signatures import mat

__all__ = ["inverse_inplace", "pivots", "pivot_vec", "F_INT_nptype"]

_getrf = _LAPACK().numba_xxgetrf(types.float64)
_getri = _LAPACK().numba_ez_xxgetri(types.float64)
_KIND = ord("d")
#: The pivot array's numba type (LAPACK's integer: int32, or int64 with an ILP64 LAPACK).
pivot_vec = types.Array(F_INT_nbtype, 1, "C")


def pivots(n):
    """The pivot array :func:`inverse_inplace` needs for an ``n x n`` matrix."""
    return np.empty(max(n, 1), dtype=F_INT_nptype)


@njit(types.int64(mat, pivot_vec), cache=True, _nrt=False)
def inverse_inplace(M, ipiv):
    """``M <- M^-1`` by LU with partial pivoting (LAPACK). Returns 0, or LAPACK's ``info``
    (``> 0``: an exact zero pivot, ``M`` is then not an inverse; ``< 0``: a bad argument)."""
    n = M.shape[0]
    if M.shape[1] != n or ipiv.shape[0] < n or M.strides[1] != 8 or M.strides[0] != 8 * n:
        return -99
    if n == 0:
        return 0
    r = _getrf(_KIND, n, n, M.ctypes, n, ipiv.ctypes)
    if r != 0:
        return r
    return _getri(_KIND, n, M.ctypes, n, ipiv.ctypes)
