"""The sparse march's dense exp2 step in the coordinates that the conservation laws leave.

With ``k`` linear conservation laws ``L`` (orthonormal rows, ``L A = 0`` and ``L B = 0``), ``L S``
is constant, so ``k`` states are functions of the others: with ``dep`` the eliminated states,
``ind`` the kept ones and ``K = L[:, dep]^-1 L[:, ind]``
(:func:`pbsens.model.conservation.dependent_states`),

    S[ind] = s,   S[dep] = Z - K s,   Z = L[:, dep]^-1 (L S)

and ``s`` (``r = nx - k`` rows) obeys ``s' = Ared s + Bred`` with

    Ared = A[ind, ind] - A[ind, dep] K,   Bred = B[ind] + A[ind, dep] Z.

The exp2 step and its midpoint correction are taken on this system (METHOD.md section 14, "In
the coordinates the laws leave"): for ``L S = 0`` (``Z = 0``) exactly the full step in other
coordinates; otherwise ``A[ind, dep] Z`` is forcing, linear over the step, where the full step
freezes it inside ``A`` (the two differ by the method's error). Their matrix functions cost ``r^3`` instead
of ``nx^3`` per product, and ``Ared`` is non-singular where ``A`` was singular only through the
laws, so ``F3`` comes from ``Ared^-1`` (as ``(Abar + L^T L)^-1`` in :mod:`pbsens.kernels.midpoint`).
The correction's products with ``Ared``'s differences run on ``A``'s CSR pattern, as there.
The fast states stay coordinates (``dep`` avoids them), so the phi kernels still deflate them.

Lang_PLOSComputBiol2024 (124 states, 21 laws): ``r = 103``, about ``(103/124)^3 = 0.57`` of the
products of ``exp_phi12_into``, which are most of its exp2 pass.
"""
import numpy as np
from numba import njit, types

from .blas import gemm_into
from .dense import _fill, norm1_rowwise
from .lapack import inverse_inplace, pivot_vec
from .midpoint import _finish_solved, _half_sum
from .phi import exp_phi12_into
from .signatures import f8, ivec, mat, tens, vec
from .steps import exp2_prepare_inplace, exp2_step_stacked_into

i8 = types.int64

__all__ = ["positions", "reduce_into", "reduce_b_into", "reduced_exp2_into", "R_SLICES", "P_SLICES"]

#: ``r x r`` work slices of :func:`reduced_exp2_into` (``RW``) and ``r x np`` ones (``RP``).
R_SLICES = 3
P_SLICES = 9


@njit(types.UniTuple(ivec, 3)(i8, ivec, i8), cache=True)
def positions(nx, dep, nk):
    """``(ind, rpos, dpos)`` for the first ``nk`` states of ``dep`` eliminated (``nk = 0``: none):
    the kept states in order, and per state its position in ``ind`` / ``dep`` (-1 if not there)."""
    rpos = np.full(nx, -1, dtype=np.int64)
    dpos = np.full(nx, -1, dtype=np.int64)
    for d in range(nk):
        dpos[dep[d]] = d
    nr = nx - nk if nk else 0
    ind = np.empty(nr, dtype=np.int64)
    q = 0
    for i in range(nx if nk else 0):
        if dpos[i] < 0:
            ind[q] = i
            rpos[i] = q
            q += 1
    return ind, rpos, dpos


@njit(types.void(ivec, ivec, vec, ivec, ivec, mat, mat), cache=True, _nrt=False)
def reduce_into(Ap, Ai, Av, rpos, dpos, K, Ar):
    """``Ar = A[ind, ind] - A[ind, dep] K`` from ``A``'s CSR values ``Av`` on ``(Ap, Ai)``;
    ``rpos[i]``: the position of state ``i`` in ``ind`` (-1 if eliminated), ``dpos[i]`` in ``dep``."""
    r = Ar.shape[0]
    _fill(Ar, 0.0)
    for i in range(Ap.shape[0] - 1):
        ri = rpos[i]
        if ri < 0:
            continue
        for e in range(Ap[i], Ap[i + 1]):
            j = Ai[e]
            v = Av[e]
            rj = rpos[j]
            if rj >= 0:
                Ar[ri, rj] += v
            else:
                kr = K[dpos[j]]
                for q in range(r):
                    Ar[ri, q] -= v * kr[q]


@njit(types.void(ivec, ivec, vec, ivec, ivec, vec, ivec, ivec, mat, types.boolean, mat), cache=True, _nrt=False)
def reduce_b_into(Rp, Ri, Bv, Ap, Ai, Av, rpos, dpos, Z, has_z, Br):
    """``Br = B[ind] + A[ind, dep] Z`` (the second term only with ``has_z``) from the CSR values
    ``Bv`` on ``(Rp, Ri)`` and ``Av`` on ``(Ap, Ai)``."""
    np_ = Br.shape[1]
    _fill(Br, 0.0)
    for i in range(Rp.shape[0] - 1):
        ri = rpos[i]
        if ri < 0:
            continue
        for e in range(Rp[i], Rp[i + 1]):
            Br[ri, Ri[e]] += Bv[e]
        if has_z:
            for e in range(Ap[i], Ap[i + 1]):
                dj = dpos[Ai[e]]
                if dj >= 0:
                    v = Av[e]
                    zr = Z[dj]
                    for q in range(np_):
                        Br[ri, q] += v * zr[q]


@njit(types.void(ivec, ivec, vec, ivec, ivec, mat, mat, mat, mat), cache=True, _nrt=False)
def _reduced_product_into(Ap, Ai, Dv, rpos, dpos, K, V, KV, Out):
    """``Out = Dred V`` for ``Dred = D[ind, ind] - D[ind, dep] K`` of the CSR values ``Dv``, without
    forming it: ``(D [V; -K V])[ind]`` (``KV``: work, ``k x np``)."""
    np_ = Out.shape[1]
    gemm_into(K, V, KV, 1.0, 0.0)
    _fill(Out, 0.0)
    for i in range(Ap.shape[0] - 1):
        ri = rpos[i]
        if ri < 0:
            continue
        o = Out[ri]
        for e in range(Ap[i], Ap[i + 1]):
            j = Ai[e]
            v = Dv[e]
            rj = rpos[j]
            if rj >= 0:
                w = V[rj]
                for q in range(np_):
                    o[q] += v * w[q]
            else:
                w = KV[dpos[j]]
                for q in range(np_):
                    o[q] -= v * w[q]


@njit(types.boolean(mat, mat, mat, mat, mat), cache=True, _nrt=False)
def _offset_into(Lm, LDinv, S, T, Z):
    """``Z = L[:, dep]^-1 (L S)`` (``T``: work); whether it has a non-zero."""
    gemm_into(Lm, S, T, 1.0, 0.0)
    gemm_into(LDinv, T, Z, 1.0, 0.0)
    for i in range(Z.shape[0]):
        for j in range(Z.shape[1]):
            if Z[i, j] != 0.0:
                return True
    return False


@njit(types.boolean(f8, types.boolean, ivec, ivec, vec, vec, vec, ivec, ivec, vec, vec, vec, mat, mat, ivec,
                    ivec, ivec, ivec, mat, mat, mat, tens, tens, tens, mat, tens, pivot_vec, f8, vec, vec),
      cache=True, _nrt=False)
def reduced_exp2_into(h, mid, Ap, Ai, A0, A1, Am, Rp, Ri, B0, B1, Bm, Sk, Sk1, ind, dep, rpos, dpos, K, Lm, LDinv,
                      ZT, RW, RP, EFF, ws, ipiv, solve_max, Abar, Dv):
    """One exp2 step ``Sk -> Sk1`` over ``h`` in the reduced coordinates (module docstring), with the
    midpoint correction (``mid``: ``A0, A1, Am``, ``B0, B1, Bm`` at the start, end and midpoint).

    ``A*`` (and ``Abar = (A0 + A1)/2``) are CSR values on ``(Ap, Ai)``, ``B*`` on the marched
    columns' pattern ``(Rp, Ri)``; ``Lm`` the laws (``k x nx``), ``LDinv = L[:, dep]^-1``; work:
    ``ZT (2, k, np)``,
    ``RW (R_SLICES, r, r)``, ``RP (P_SLICES, r, np)``, ``EFF (r, 3r)``, ``ws`` the phi kernels'
    workspace for ``r``, ``ipiv`` (``r``), ``Dv`` (``nnz(A)``). With ``mid``, ``Ared^-1`` must
    exist, be finite and have ``||Ared^-1||_1 <= solve_max |h|``; otherwise nothing is written
    and False returned (the caller takes the step in the full coordinates).
    """
    r = ind.shape[0]
    np_ = Sk.shape[1]
    Abr, X = RW[0], RW[1]
    reduce_into(Ap, Ai, Abar, rpos, dpos, K, Abr)
    if mid:
        for i in range(r):
            for j in range(r):
                X[i, j] = Abr[i, j]
        if inverse_inplace(X, ipiv) != 0 or not norm1_rowwise(X, RW[2][0]) <= solve_max * abs(h):
            return False
    Z = ZT[0]
    has_z = _offset_into(Lm, LDinv, Sk, ZT[1], Z)
    SB = RP[0:2].reshape((2 * r, np_))           # [s; Bred at the start]
    s = RP[0]
    for q in range(r):
        i = ind[q]
        for j in range(np_):
            s[q, j] = Sk[i, j]
    reduce_b_into(Rp, Ri, B0, Ap, Ai, A0, rpos, dpos, Z, has_z, RP[1])
    reduce_b_into(Rp, Ri, B1, Ap, Ai, A1, rpos, dpos, Z, has_z, RP[2])
    exp_phi12_into(Abr, h, EFF, ws)
    exp2_prepare_inplace(EFF, h)
    se = RP[3]
    exp2_step_stacked_into(EFF, SB, RP[2], se)
    if mid:
        reduce_b_into(Rp, Ri, Bm, Ap, Ai, Am, rpos, dpos, Z, has_z, RP[4])
        # the correction's products R = Dred s, [C; Q] = [(Am - Abar)red M; Dred se] on the CSR pattern
        # (pbsens.kernels.midpoint, _sparse_products), then its end without F3 (Ared^-1 = X)
        CQ = RP[5:7].reshape((2 * r, np_))
        R, M = RP[7], RP[8]
        _half_sum(s, se, M)
        for e in range(Dv.shape[0]):
            Dv[e] = A1[e] - A0[e]
        _reduced_product_into(Ap, Ai, Dv, rpos, dpos, K, s, ZT[1], R)
        _reduced_product_into(Ap, Ai, Dv, rpos, dpos, K, se, ZT[1], RP[6])
        for e in range(Dv.shape[0]):
            Dv[e] = Am[e] - Abar[e]
        _reduced_product_into(Ap, Ai, Dv, rpos, dpos, K, M, ZT[1], RP[5])
        _finish_solved(EFF, X, h, RP[1], RP[2], RP[4], se, CQ, R, M)
    # S[ind] = s, S[dep] = Z - K s
    T = ZT[1]
    gemm_into(K, se, T, 1.0, 0.0)
    for q in range(r):
        i = ind[q]
        for j in range(np_):
            Sk1[i, j] = se[q, j]
    for d in range(dep.shape[0]):
        i = dep[d]
        for j in range(np_):
            Sk1[i, j] = Z[d, j] - T[d, j]
    return True
