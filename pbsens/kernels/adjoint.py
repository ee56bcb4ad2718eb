"""The backward (adjoint) march of the exponential steps: one vector instead of ``np`` columns.

For a functional ``J = sum_i c_i^T x(t_i)`` (plus terms in ``p`` alone) the gradient through
the states is ``sum_i c_i^T S(t_i)``. The forward exponential march computes every ``S_k``;
its transpose needs one vector ``lambda`` (length ``nx``) marched backward over the same grid
with the same matrix functions (docs/METHOD.md section 16):

=========  =========================================================================
method     per interval ``[t_k, t_k+1]``, ``lambda = lambda_k+1`` (after its jump)
=========  =========================================================================
exp        ``[E | F] = [exp(h A_k) | h phi1(h A_k)]``;
           ``lambda_k = E^T lambda``, ``grad += B_k^T (F^T lambda)``
exp2       ``[E | G1 | G2]`` of ``Abar = (A_k + A_k+1)/2`` (``G1 = F1 - F2/h``, ``G2 = F2/h``);
           ``lambda_k = E^T lambda``, ``grad += B_k^T (G1^T lambda) + B_k+1^T (G2^T lambda)``
=========  =========================================================================

and at an output time ``lambda_k += c_i``. The transposed products ``lambda^T [E | F]`` are one
pass over the rows of the forward step's own matrices (the same kernels compute them), so the
gradient equals the forward march's ``sum_i c_i^T S(t_i)`` to rounding. Per interval: one
Jacobian evaluation, one matrix function (reused, as in the forward march, when ``h`` and the
exponentiated matrix agree with the previous interval's to ``reuse_tol``), and ``O(nx^2 + nx np)``
instead of the forward step's ``nx x 2nx x np`` product. Nothing is allocated in the loop.
"""
import numpy as np
from numba import njit, types

from . import linalg, steps
from .codes import METHOD_EXP, METHOD_EXP2
from .march import MAX_SUBSTEPS, _Compiled, _njit_quiet, _reusable  # noqa: F401
from .signatures import f8, ivec, jacs_fn, jacs_fn_sig, mat, tens, vec
from .views import flat
from ..errors import PbsensError, SolverError

__all__ = ["adjoint_march", "bind", "ADJOINT_METHODS"]

i8 = types.int64

#: The methods with a backward march, and their kernel codes.
ADJOINT_METHODS = {"exp": METHOD_EXP, "exp2": METHOD_EXP2}


@njit(types.void(vec, mat, vec), cache=True, _nrt=False)
def _vecmat_into(lam, M, v):
    """``v = M^T lam`` (``v[:M.shape[1]]``), row by row over ``M`` (contiguous; vectorises)."""
    n, m = M.shape
    um = np.uint64(m)
    for j in range(um):
        v[j] = 0.0
    for i in range(n):
        li = lam[i]
        if li != 0.0:
            for j in range(um):
                v[j] += li * M[i, j]


@njit(types.void(mat, vec, i8, vec), cache=True, _nrt=False)
def _add_bt_w(B, v, off, grad):
    """``grad += B^T v[off:off + nx]`` row by row (``B`` is ``nx x np``)."""
    n, m = B.shape
    um = np.uint64(m)
    for i in range(n):
        wi = v[off + i]
        if wi != 0.0:
            for j in range(um):
                grad[j] += B[i, j] * wi


@njit(i8(jacs_fn, vec, mat, vec, vec, ivec, mat, i8, f8, vec, vec,
         tens, tens, mat, mat, mat, mat, vec, tens), cache=True, _nrt=False)
def _adjoint_loop(jacs, t, X, p, c, out_index, dJdx, method, reuse_tol, lam, grad,
                  Ag, Bg, Abar, Ac, EF, EFF, v, ws):
    """The body of :func:`adjoint_march`, given its work arrays (no allocation)."""
    K, nx = X.shape
    np_ = p.shape[0]
    for j in range(nx):
        lam[j] = 0.0
    for j in range(np_):
        grad[j] = 0.0
    have_exp = False
    hc = 0.0
    norm_c = 0.0
    colsum = v                      # work of norm1_rowwise (length >= nx)
    g = (K - 1) % 2
    jacs(t[K - 1], X[K - 1], p, c, Ag[g], Bg[g])
    if out_index[K - 1] >= 0:
        r = out_index[K - 1]
        for j in range(nx):
            lam[j] += dJdx[r, j]
    for k in range(K - 2, -1, -1):
        g = k % 2
        A0, B0 = Ag[g], Bg[g]
        A1, B1 = Ag[1 - g], Bg[1 - g]
        jacs(t[k], X[k], p, c, A0, B0)
        h = t[k + 1] - t[k]
        if method == METHOD_EXP2:
            a0, a1, ab = flat(A0), flat(A1), flat(Abar)
            for i in range(ab.shape[0]):
                ab[i] = 0.5 * (a0[i] + a1[i])
            key = Abar
        else:
            key = A0
        if not (have_exp and _reusable(key, h, Ac, hc, norm_c, reuse_tol)):
            if method == METHOD_EXP2:
                linalg.exp_phi12_into(key, h, EFF, ws)
                steps.exp2_prepare_inplace(EFF, h)
            else:
                linalg.exp_phi1_into(key, h, EF, ws)
            linalg.copy_into(key, Ac)
            hc = h
            norm_c = linalg.norm1_rowwise(key, colsum)
            have_exp = True
        if method == METHOD_EXP2:
            _vecmat_into(lam, EFF, v)            # v = [E^T lam; G1^T lam; G2^T lam]
            _add_bt_w(B0, v, nx, grad)
            _add_bt_w(B1, v, 2 * nx, grad)
        else:
            _vecmat_into(lam, EF, v)             # v = [E^T lam; F^T lam]
            _add_bt_w(B0, v, nx, grad)
        bad = 0
        r = out_index[k]
        for j in range(nx):
            lj = v[j]
            if r >= 0:
                lj += dJdx[r, j]
            lam[j] = lj
            bad |= (lj - lj) != 0.0
        if bad:
            return k
    return -1


@_njit_quiet(i8(jacs_fn, vec, mat, vec, vec, ivec, mat, i8, f8, vec, vec), cache=True)
def adjoint_march(jacs, t, X, p, c, out_index, dJdx, method, reuse_tol, lam, grad):
    """March ``lambda`` backward over the grid ``t`` with states ``X``; accumulate the gradient.

    Parameters
    ----------
    jacs : first-class function
        The model's ``jacs_into(t, x, p, c, A, B)``.
    t : (K,) increasing grid; X : (K, nx) states on it; p : (np,); c : model constants.
    out_index : (K,) int64
        ``out_index[k] >= 0``: ``t_k`` is an output time, ``dJdx[out_index[k]]`` is added to
        ``lambda`` there.
    dJdx : (n_out, nx)
        ``c_i = (dJ/dx(t_i))^T`` per output time.
    method : int
        ``METHOD_EXP`` or ``METHOD_EXP2`` (:data:`ADJOINT_METHODS`).
    reuse_tol : float
        Reuse the previous interval's matrix functions when ``h`` and the exponentiated
        matrix agree to this (relative), as the forward march does.
    lam : (nx,)
        Output: ``lambda(t_0)`` (the jump at ``t_0`` included).
    grad : (np,)
        Output: ``sum_k`` of the intervals' ``B^T`` terms (without ``lambda(t_0)^T S_0``).

    Returns
    -------
    int
        -1 on success; ``k >= 0``: ``lambda`` was not finite after interval ``k``.
    """
    nx = X.shape[1]
    np_ = p.shape[0]
    Ag = np.empty((2, nx, nx))         # A at grid points k (slot k % 2) and k+1
    Bg = np.empty((2, nx, np_))
    Abar = np.empty((nx, nx))
    Ac = np.empty((nx, nx))            # the matrix the cached functions belong to
    EF = np.empty((nx, 2 * nx))        # [E | F]            (exp)
    EFF = np.empty((nx, 3 * nx))       # [E | G1 | G2]      (exp2)
    v = np.empty(3 * nx)
    ws = linalg.workspace(nx)
    return _adjoint_loop(jacs, t, X, p, c, out_index, dJdx, method, reuse_tol, lam, grad,
                         Ag, Bg, Abar, Ac, EF, EFF, v, ws)


def bind(fns):
    """The per-model entry point: ``march(t, X, p, c, out_index, dJdx, method, reuse_tol)``
    -> ``(lambda(t_0), grad)``; raises :class:`SolverError` if ``lambda`` is not finite."""
    jacs_into = _Compiled(fns.jacs_into, jacs_fn_sig)

    def bound_adjoint(t, X, p, c, out_index, dJdx, method, reuse_tol):
        if method not in ADJOINT_METHODS.values():
            raise PbsensError(f"adjoint march: unknown method code {method!r}")
        lam = np.empty(X.shape[1])
        grad = np.empty(p.shape[0])
        status = adjoint_march(jacs_into, t, X, p, c, out_index, dJdx, int(method), float(reuse_tol), lam, grad)
        if status >= 0:
            raise SolverError(f"adjoint march: lambda is NaN or inf after the interval [{t[status]:.6g}, "
                              f"{t[status + 1]:.6g}] (marching backward)")
        return lam, grad

    return bound_adjoint
