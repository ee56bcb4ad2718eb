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

and at an output time ``lambda_k += c_i``. An exp2 interval with the midpoint correction
(:mod:`.midpoint`) takes its exact transpose as well (:func:`_corrected_transpose`): the
step is linear in ``S_a``, ``B_a``, ``B_e``, ``B_m``, and its transpose costs three more
passes over ``n x n`` matrices and ``F3^T lambda``. The transposed products ``lambda^T [E | F]`` are one
pass over the rows of the forward step's own matrices (the same kernels compute them), so the
gradient equals the forward march's ``sum_i c_i^T S(t_i)`` to rounding. Per interval: one
Jacobian evaluation, one matrix function (reused, as in the forward march, when ``h`` and the
exponentiated matrix agree with the previous interval's to ``reuse_tol``), and ``O(nx^2 + nx np)``
instead of the forward step's ``nx x 2nx x np`` product. Several functionals (``dJdx`` of shape
``(nv, n_out, nx)``) are marched together, each interval's Jacobians and matrix functions formed once
for all (METHOD.md section 16, "Several vectors in one march"). Nothing is allocated in the loop.
"""
import numpy as np
from numba import njit, types

from ..errors import PbsensError, SolverError
from . import linalg
from .codes import METHOD_EXP, METHOD_EXP2
from .dense import vecmat_into as _vecmat_into
from .march import MAX_SUBSTEPS, _Compiled, _matrix_functions, _reusable  # noqa: F401
from .reduced import positions
from .reduced_adjoint import REDUCED_WORK, reduced_vectors
from .signatures import f8, ivec, jacs_fn, jacs_fn_sig, mat, njit_quiet, tens, vec
from .sparse_march import LAW_TOL
from .views import flat

__all__ = ["ADJOINT_METHODS", "adjoint_march", "bind", "vector_sets"]

i8 = types.int64

#: The methods with a backward march, and their kernel codes.
ADJOINT_METHODS = {"exp": METHOD_EXP, "exp2": METHOD_EXP2}


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


@njit(types.void(mat, mat, mat, mat, vec, vec, vec, vec), cache=True, _nrt=False)
def _lam_p_into(A0, A1, Am, Abar, lam, v, w, y):
    """The corrected transpose's pass over ``D = A1 - A0`` and ``Dm = Am - Abar`` (one over the rows):
    from ``w1 = w[nx:2nx]``, ``w2 = w[2nx:]`` and ``mu = y[:nx]``, ``w[:nx] = D^T w1``,
    ``y[nx:2nx] = D^T w2``, ``y[2nx:] = Dm^T mu / 2`` and ``v[:nx] = lam_P = lam + D^T w1 + Dm^T mu / 2``."""
    nx = lam.shape[0]
    for j in range(nx):
        w[j] = 0.0
        y[nx + j] = 0.0
        y[2 * nx + j] = 0.0
    for i in range(nx):
        a1 = w[nx + i]
        a2 = w[2 * nx + i]
        a3 = 0.5 * y[i]
        for j in range(nx):
            d = A1[i, j] - A0[i, j]
            w[j] += a1 * d
            y[nx + j] += a2 * d
            y[2 * nx + j] += a3 * (Am[i, j] - Abar[i, j])
    for j in range(nx):
        v[j] = lam[j] + w[j] + y[2 * nx + j]


@njit(types.void(mat, mat, mat, mat, mat, mat, mat, mat, mat, f8, vec, vec, vec, vec, vec), cache=True, _nrt=False)
def _corrected_transpose(EFF, EF3, A0, A1, Am, Abar, B0, B1, Bm, h, lam, v, w, y, grad):
    """The transpose of the corrected exp2 step (:func:`pbsens.kernels.midpoint.exp2_correct_into`).

    Forward, with ``P = E S_a + G1 B_a + G2 B_e`` (the plain step), ``D = A_e - A_a``,
    ``Dm = A_m - Abar``, ``G3 = 4 G2 - (8/h^2) F3``::

        S_e = P - G1 D S_a / 2 + G2 D P / 2 + G3 c,
        c   = (B_m - (B_a + B_e)/2) + Dm (S_a + P)/2 - D (P - S_a)/4.

    Backward, for ``lam`` = the cotangent of ``S_e`` (``u = [E | G1 | G2]^T lam``,
    ``mu = G3^T lam``, the cotangent of ``c``)::

        lam_P = lam + D^T (u_G2/2 - mu/4) + Dm^T mu / 2
        lam_a = E^T lam_P + D^T (mu/4 - u_G1/2) + Dm^T mu / 2
        grad += B_a^T (G1^T lam_P - mu/2) + B_e^T (G2^T lam_P - mu/2) + B_m^T mu.

    ``lam`` is overwritten by ``lam_a``; ``v`` (``3 nx``), ``w`` (``3 nx``), ``y`` (``3 nx``) work.
    """
    nx = lam.shape[0]
    _vecmat_into(lam, EFF, 0, 3 * nx, v, 0)              # v = [E^T; G1^T; G2^T] lam
    _vecmat_into(lam, EF3, 3 * nx, nx, w, 0)             # w[:nx] = F3^T lam
    c8 = 8.0 / (h * h) if h != 0.0 else 0.0
    for i in range(nx):
        mu = 4.0 * v[2 * nx + i] - c8 * w[i]
        y[i] = mu                                        # mu
        w[nx + i] = 0.5 * v[2 * nx + i] - 0.25 * mu      # D^T applied to these two
        w[2 * nx + i] = 0.25 * mu - 0.5 * v[nx + i]
    _lam_p_into(A0, A1, Am, Abar, lam, v, w, y)
    _vecmat_into(v, EFF, 0, 3 * nx, w, 0)                # w = [E^T; G1^T; G2^T] lam_P
    for i in range(nx):
        lam[i] = w[i] + y[nx + i] + y[2 * nx + i]
        half_mu = 0.5 * y[i]
        w[nx + i] -= half_mu
        w[2 * nx + i] -= half_mu
    _add_bt_w(B0, w, nx, grad)
    _add_bt_w(B1, w, 2 * nx, grad)
    _add_bt_w(Bm, y, 0, grad)


#: ``(Ap, Ai, LmT, LW, lawok, ind, dep, rpos, dpos, K, work, F)``: the full pattern of ``A`` as CSR (its
#: values are the dense array, flattened), the laws as columns, their check's work, whether they hold
#: (per slot of ``Ag``), the coordinates they leave (:mod:`.reduced_adjoint`; ``dep`` empty: none), that
#: module's work, and ``F`` (8, nx): its vectors ``fy, fa, fb, fc`` of ``lam`` and of ``lam_P``.
_LAWS = types.Tuple((ivec, ivec, mat, mat, types.int8[::1], ivec, ivec, ivec, ivec, mat, REDUCED_WORK, mat))


@njit(types.void(mat, mat, mat, mat, mat, vec, vec, vec, vec), cache=True, _nrt=False)
def _corrected_start_vectors(F, A0, A1, Am, Abar, lam, v, w, y):
    """The first half of :func:`_corrected_transpose` from the vectors of
    :func:`.reduced_adjoint.reduced_vectors` of ``lam``, ``F = (fy, fa, fb, fc)`` (``G1^T lam = fa - fb``,
    ``G2^T lam = fb``, ``(8/h^2) F3^T lam = 8 fc``): ``v[:nx] = lam_P``, and ``y`` holds ``mu``,
    ``D^T (mu/4 - G1^T lam/2)`` and ``Dm^T mu/2`` for :func:`_corrected_finish_vectors`."""
    nx = lam.shape[0]
    fa, fb, fc = F[1], F[2], F[3]
    for i in range(nx):
        mu = 4.0 * fb[i] - 8.0 * fc[i]
        y[i] = mu
        w[nx + i] = 0.5 * fb[i] - 0.25 * mu
        w[2 * nx + i] = 0.25 * mu - 0.5 * (fa[i] - fb[i])
    _lam_p_into(A0, A1, Am, Abar, lam, v, w, y)


@njit(types.void(mat, mat, mat, mat, vec, vec, vec), cache=True, _nrt=False)
def _corrected_finish_vectors(F2, B0, B1, Bm, lam, y, grad):
    """The second half: ``F2 = (fy, fa, fb)`` of ``lam_P``; ``lam`` becomes ``lam_a``, the gradient gains
    ``B_a^T (G1^T lam_P - mu/2) + B_e^T (G2^T lam_P - mu/2) + B_m^T mu``."""
    nx = lam.shape[0]
    fy, fa, fb = F2[0], F2[1], F2[2]
    for i in range(nx):
        lam[i] = fy[i] + y[nx + i] + y[2 * nx + i]
    um = np.uint64(B0.shape[1])
    for i in range(nx):
        mu = y[i]
        g1 = fa[i] - fb[i] - 0.5 * mu
        g2 = fb[i] - 0.5 * mu
        b0, b1, bm = B0[i], B1[i], Bm[i]
        for j in range(um):
            grad[j] += b0[j] * g1 + b1[j] * g2 + bm[j] * mu


@njit(types.boolean(mat, mat, mat), cache=True, _nrt=False)
def _laws_hold_dense(LmT, M, W):
    """Whether ``|l b| <= LAW_TOL ||b||`` for every law ``l`` (the columns of ``LmT``, ``nx x k``) and
    column ``b`` of the dense ``M`` (``W``: work, ``(k + 1) x`` at least ``M``'s columns): the test of
    :func:`.sparse_march._laws_hold`, summed row by row over ``M`` (contiguous; vectorises)."""
    k = LmT.shape[1]
    m = M.shape[1]
    um = np.uint64(m)
    for q in range(k + 1):
        wq = W[q]
        for j in range(um):
            wq[j] = 0.0
    nrm = W[k]
    for i in range(M.shape[0]):
        row = M[i]
        for j in range(um):
            nrm[j] += row[j] * row[j]
        li = LmT[i]
        for q in range(k):
            lq = li[q]
            if lq != 0.0:
                wq = W[q]
                for j in range(um):
                    wq[j] += lq * row[j]
    tol2 = LAW_TOL * LAW_TOL
    for q in range(k):
        wq = W[q]
        for j in range(m):
            if wq[j] * wq[j] > tol2 * nrm[j]:
                return False
    return True


@njit(types.boolean(_LAWS, mat, mat), cache=True, _nrt=False)
def _laws_at(laws, A, B):
    """Whether the conservation laws hold for ``A`` and ``B`` at a point (none: False)."""
    if laws[6].shape[0] == 0:
        return False
    LmT, LW = laws[2], laws[3]
    return _laws_hold_dense(LmT, A, LW) and _laws_hold_dense(LmT, B, LW)


@njit_quiet(i8(jacs_fn, vec, mat, vec, vec, ivec, tens, i8, f8, mat, ivec, mat, mat,
         tens, tens, mat, mat, mat, mat, mat, vec, vec, vec, tens, _LAWS), cache=True, _nrt=False)
def _adjoint_loop(jacs, t, X, p, c, out_index, dJdx, method, reuse_tol, X_mid, mid_index, lam, grad,
                  Ag, Bg, Abar, Ac, EF, EFF, EF3, v, w, y, ws, laws):
    """The body of :func:`adjoint_march`, given its work arrays (no allocation). ``lam[q]``, ``grad[q]``,
    ``dJdx[q]``: the ``q``-th vector, all marched through each interval's matrix functions, formed once.
    ``Ag[2]``, ``Bg[2]``: ``A``, ``B`` at the midpoint of a corrected interval; ``laws``: :data:`_LAWS`
    (where they hold at the interval's points, the matrix functions are those of :mod:`.reduced_adjoint`)."""
    Ap, Ai, lawok, ind, dep, rpos, dpos, Kd, rwork, F = (laws[0], laws[1], laws[4], laws[5], laws[6], laws[7],
                                                          laws[8], laws[9], laws[10], laws[11])
    K, nx = X.shape
    nv = lam.shape[0]
    np_ = p.shape[0]
    for q in range(nv):
        for j in range(np_):
            grad[q, j] = 0.0
    have_exp = False
    have_f3 = False
    held = 0                        # the reduced matrix functions held: their chain (0: the full ones, or none)
    hc = 0.0
    norm_c = 0.0
    colsum = v                      # work of norm1_rowwise (length >= nx)
    g = (K - 1) % 2
    jacs(t[K - 1], X[K - 1], p, c, Ag[g], Bg[g])
    lawok[g] = _laws_at(laws, Ag[g], Bg[g])
    if out_index[K - 1] >= 0:
        r = out_index[K - 1]
        for q in range(nv):
            for j in range(nx):
                lam[q, j] += dJdx[q, r, j]
    for k in range(K - 2, -1, -1):
        g = k % 2
        A0, B0 = Ag[g], Bg[g]
        A1, B1 = Ag[1 - g], Bg[1 - g]
        jacs(t[k], X[k], p, c, A0, B0)
        lawok[g] = _laws_at(laws, A0, B0)
        h = t[k + 1] - t[k]
        corrected = method == METHOD_EXP2 and mid_index[k] >= 0
        if method == METHOD_EXP2:
            a0, a1, ab = flat(A0), flat(A1), flat(Abar)
            for i in range(ab.shape[0]):
                ab[i] = 0.5 * (a0[i] + a1[i])
            key = Abar
        else:
            key = A0
        if corrected:
            jacs(0.5 * (t[k] + t[k + 1]), X_mid[mid_index[k]], p, c, Ag[2], Bg[2])
            lawok[2] = _laws_at(laws, Ag[2], Bg[2])
        red = lawok[g] == 1 and lawok[1 - g] == 1 and (not corrected or lawok[2] == 1)
        chain = 3 if corrected else (2 if method == METHOD_EXP2 else 1)
        fresh = False
        if red:
            fresh = not (have_exp and held == chain and _reusable(key, h, Ac, hc, norm_c, reuse_tol))
        elif not (have_exp and held == 0 and _reusable(key, h, Ac, hc, norm_c, reuse_tol)
                  and (have_f3 or not corrected)):
            have_f3 = corrected
            held = 0
            norm_c = _matrix_functions(key, h, corrected, method == METHOD_EXP2, EF, EFF, EF3, ws, Ac, colsum)
            hc = h
            have_exp = True
        r = out_index[k]
        for q in range(nv):
            lq, gq = lam[q], grad[q]
            if red:
                # the first vector forms the reduced matrix functions (when fresh), the others reuse them
                reduced_vectors(Ap, Ai, flat(key), rpos, dpos, ind, dep, Kd, h, chain, fresh and q == 0, lq,
                                F[0], F[1], F[2], F[3], rwork)
                if fresh and q == 0:
                    linalg.copy_into(key, Ac)
                    hc = h
                    norm_c = linalg.norm1_rowwise(key, colsum)
                    have_exp = True
                    held = chain
                if corrected:
                    _corrected_start_vectors(F[:4], A0, A1, Ag[2], key, lq, v, w, y)
                    reduced_vectors(Ap, Ai, flat(key), rpos, dpos, ind, dep, Kd, h, chain, False, v[:nx], F[4],
                                    F[5], F[6], F[7], rwork)
                    _corrected_finish_vectors(F[4:], B0, B1, Bg[2], lq, y, gq)
                    for j in range(nx):
                        v[j] = lq[j]
                else:
                    for j in range(nx):
                        v[j] = F[0, j]
                        w[nx + j] = F[1, j] - F[2, j] if chain == 2 else F[1, j]
                        w[2 * nx + j] = F[2, j]
                    _add_bt_w(B0, w, nx, gq)
                    if chain == 2:
                        _add_bt_w(B1, w, 2 * nx, gq)
            elif corrected:
                _corrected_transpose(EFF, EF3, A0, A1, Ag[2], key, B0, B1, Bg[2], h, lq, v, w, y, gq)
                for j in range(nx):
                    v[j] = lq[j]
            elif method == METHOD_EXP2:
                _vecmat_into(lq, EFF, 0, 3 * nx, v, 0)      # v = [E^T lam; G1^T lam; G2^T lam]
                _add_bt_w(B0, v, nx, gq)
                _add_bt_w(B1, v, 2 * nx, gq)
            else:
                _vecmat_into(lq, EF, 0, 2 * nx, v, 0)       # v = [E^T lam; F^T lam]
                _add_bt_w(B0, v, nx, gq)
            bad = 0
            for j in range(nx):
                lj = v[j]
                if r >= 0:
                    lj += dJdx[q, r, j]
                lq[j] = lj
                bad |= (lj - lj) != 0.0
            if bad:
                return k
    return -1


@njit_quiet(i8(jacs_fn, vec, mat, vec, vec, ivec, tens, i8, f8, mat, ivec, mat, mat, mat, ivec, mat), cache=True)
def adjoint_march(jacs, t, X, p, c, out_index, dJdx, method, reuse_tol, X_mid, mid_index, lam, grad, Lm, dep, Kd):
    """March ``lambda`` backward over the grid ``t`` with states ``X``; accumulate the gradient.

    Parameters
    ----------
    jacs : first-class function
        The model's ``jacs_into(t, x, p, c, A, B)``.
    t : (K,) increasing grid; X : (K, nx) states on it; p : (np,); c : model constants.
    out_index : (K,) int64
        ``out_index[k] >= 0``: ``t_k`` is an output time, ``dJdx[q, out_index[k]]`` is added to
        the ``q``-th ``lambda`` there.
    dJdx : (nv, n_out, nx)
        ``c_i = (dJ/dx(t_i))^T`` per output time, for each of ``nv`` functionals (marched together:
        each interval's Jacobians and matrix functions are formed once for all of them).
    method : int
        ``METHOD_EXP`` or ``METHOD_EXP2`` (:data:`ADJOINT_METHODS`).
    reuse_tol : float
        Reuse the previous interval's matrix functions when ``h`` and the exponentiated
        matrix agree to this (relative), as the forward march does.
    X_mid, mid_index : (M, nx), (K-1,) int64
        ``mid_index[k] >= 0``: interval ``k`` is an exp2 step with the midpoint correction
        (:mod:`pbsens.kernels.midpoint`), its midpoint state ``X_mid[mid_index[k]]`` (the forward
        march's plan: ``solvers.refine.midpoint_plan``); -1: a plain step.
    lam : (nv, nx)
        Per functional: on entry ``lambda`` at ``t[-1]`` from what follows the grid (zero, or the cotangent
        carried back across a jump), before ``dJdx`` at ``t[-1]`` is added; on exit
        ``lambda(t_0)`` (the output at ``t_0`` included).
    grad : (nv, np)
        Output, per functional: ``sum_k`` of the intervals' ``B^T`` terms (without ``lambda(t_0)^T S_0``).
    Lm, dep, Kd : (k, nx), (k,), (k, nx - k)
        The conservation laws (orthonormal rows) and the states they eliminate
        (:func:`pbsens.model.conservation.dependent_states`; ``k = 0``: none). Where they hold at an
        interval's points, its matrix functions are taken in the ``nx - k`` coordinates they leave
        (:mod:`.reduced_adjoint`): the same ``lambda`` and gradient to rounding, at about
        ``((nx - k)/nx)^3`` of the products.

    Returns
    -------
    int
        -1 on success; ``k >= 0``: ``lambda`` was not finite after interval ``k``.
    """
    nx = X.shape[1]
    np_ = p.shape[0]
    Ag = np.empty((3, nx, nx))         # A at grid points k (slot k % 2) and k+1; slot 2: a midpoint
    Bg = np.empty((3, nx, np_))
    Abar = np.empty((nx, nx))
    Ac = np.empty((nx, nx))            # the matrix the cached functions belong to
    EF = np.empty((nx, 2 * nx))        # [E | F]            (exp)
    EFF = np.empty((nx, 3 * nx))       # [E | G1 | G2]      (exp2)
    EF3 = np.empty((nx, 4 * nx))       # [E | F1 | F2 | F3] (exp2, corrected intervals)
    v = np.empty(3 * nx)
    w = np.empty(3 * nx)
    y = np.empty(3 * nx)
    ws = linalg.workspace(nx)
    nk = dep.shape[0] if (Lm.shape[0] > 0 and dep.shape[0] == Lm.shape[0]) else 0
    nr = nx - nk if nk else 0
    ind, rpos, dpos = positions(nx, dep, nk)
    # A as CSR with every entry in the pattern: its flattened dense array is the values
    na = nx if nk else 0
    Ap = np.empty(na + 1, dtype=np.int64)
    Ai = np.empty(na * nx, dtype=np.int64)
    for i in range(na + 1):
        Ap[i] = i * nx
    for i in range(na):
        for j in range(nx):
            Ai[i * nx + j] = j
    rwork = (np.empty((nr, nr)), np.empty((nr, 2 * nr)), np.empty((nr, 3 * nr)), np.empty((nr, 4 * nr)),
             linalg.workspace(nr), np.empty(nr), np.empty(4 * nr), np.empty(nk))
    laws = (Ap, Ai, np.ascontiguousarray(Lm[:nk].T), np.empty((nk + 1, max(nx, np_))),
            np.zeros(3, dtype=np.int8), ind, dep[:nk], rpos, dpos, Kd[:nk], rwork, np.empty((8, nx)))
    return _adjoint_loop(jacs, t, X, p, c, out_index, dJdx, method, reuse_tol, X_mid, mid_index, lam, grad,
                         Ag, Bg, Abar, Ac, EF, EFF, EF3, v, w, y, ws, laws)


def vector_sets(dJdx, lam_end, nx):
    """``(D, lam, single)`` for a backward march: ``dJdx`` as ``(nv, n_out, nx)`` (a ``(n_out, nx)`` one is one
    functional, ``single``), and a fresh ``lam`` ``(nv, nx)`` from ``lam_end`` (None: zeros). Used by both
    transposes' entry points (:func:`bind`, :meth:`pbsens.sensitivity.sparse.SparseRunner.adjoint`)."""
    dJdx = np.asarray(dJdx, dtype=np.float64)
    single = dJdx.ndim == 2
    D = np.ascontiguousarray(dJdx[None] if single else dJdx)
    nv = D.shape[0]
    lam = np.zeros((nv, nx)) if lam_end is None else np.array(lam_end, dtype=np.float64).reshape(nv, nx)
    return D, lam, single


def bind(fns):
    """The per-model entry point: ``march(t, X, p, c, out_index, dJdx, method, reuse_tol, lam_end=None,
    mid=None, laws=None)`` -> ``(lambda(t_0), grad)``; ``lam_end``: ``lambda`` carried into ``t[-1]``
    (default 0), ``mid``: ``(X_mid, mid_index)`` of the midpoint correction (default none), ``laws``:
    ``(Lm, dep, K)`` of :func:`adjoint_march` (default none). ``dJdx`` ``(n_out, nx)``: one functional,
    ``lam`` ``(nx,)`` and ``grad`` ``(np,)``; ``(nv, n_out, nx)``: ``nv`` functionals marched together,
    ``lam_end`` ``(nv, nx)`` (or None), ``lam`` ``(nv, nx)`` and ``grad`` ``(nv, np)``. Raises
    :class:`SolverError` if ``lambda`` is not finite."""
    jacs_into = _Compiled(fns.jacs_into, jacs_fn_sig)

    def bound_adjoint(t, X, p, c, out_index, dJdx, method, reuse_tol, lam_end=None, mid=None, laws=None):
        if method not in ADJOINT_METHODS.values():
            raise PbsensError(f"adjoint march: unknown method code {method!r}")
        nx = X.shape[1]
        D, lam, single = vector_sets(dJdx, lam_end, nx)
        if mid is None:
            mid = (np.empty((0, nx)), np.full(t.size - 1, -1, dtype=np.int64))
        grad = np.empty((D.shape[0], p.shape[0]))
        if laws is None:
            laws = (np.zeros((0, nx)), np.zeros(0, dtype=np.int64), np.zeros((0, nx)))
        status = adjoint_march(jacs_into, t, X, p, c, out_index, D, int(method), float(reuse_tol),
                               np.ascontiguousarray(mid[0], dtype=np.float64),
                               np.ascontiguousarray(mid[1], dtype=np.int64), lam, grad,
                               np.ascontiguousarray(laws[0], dtype=np.float64),
                               np.ascontiguousarray(laws[1], dtype=np.int64),
                               np.ascontiguousarray(laws[2], dtype=np.float64))
        if status >= 0:
            raise SolverError(f"adjoint march: lambda is NaN or inf after the interval [{t[status]:.6g}, "
                              f"{t[status + 1]:.6g}] (marching backward)")
        return (lam[0], grad[0]) if single else (lam, grad)

    return bound_adjoint
