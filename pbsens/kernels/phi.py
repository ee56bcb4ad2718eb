"""phi functions ``[E | F]`` and ``[E | F1 | F2]`` by truncated Taylor series and doubling.

``phi1(Z) = sum_k Z^k/(k+1)!``, ``phi2(Z) = sum_k Z^k/(k+2)!`` of ``Z = hA / 2^s``
(Paterson-Stockmeyer), the scaling undone with exact doubling identities; see
:mod:`pbsens.kernels.linalg` for the overview and references. The public kernels first
deflate isolated fast states of ``A`` (:mod:`pbsens.kernels.phi_deflate`, METHOD.md section
15); the ``_plain`` ones are scaling and squaring alone.
"""
import math

import numpy as np
from numba import njit, types

from .blas import gemm_into
from .dense import (_add_cols_into, _check_ws, _double_f12_into, _fill, _scale, _set_cols_scaled,
                    copy_into, i8, matmul_into, norm1_rowwise, rvec)
from .phi_deflate import deflate_finish, deflate_prepare
from .signatures import f8, mat, tens, vec

# --------------------------------------------------------------------------
# phi functions: truncated Taylor series + doubling
# --------------------------------------------------------------------------

# Candidate Taylor degrees m (the largest degrees evaluable with a given number
# of products by Paterson-Stockmeyer), the number q of stored powers Z..Z^q,
# the products the evaluation costs, and theta_m: the largest ||Z||_1 with
# sum_{k>m} ||Z||^k/(k+1)! <= u = 2^-53 (truncation error of phi1 below unit
# roundoff; phi1(Z) has norm of order 1 there). Computed with mpmath at 60
# digits by bisection. The phi2 series sum_k Z^k/(k+2)! has a smaller tail, so
# the same table is valid for it. The table stops at m = 20 (theta = 1.74,
# 7 products): the next degree, 25 (theta = 2.90, 8 products), saves at most
# one doubling (2-3 products) while the rounding error of the Taylor sum grows
# with the cancellation factor phi1(||Z||)/||phi1(-||Z||)|| (6 at 1.74, 18 at
# 2.90), e.g. for stiff Jacobians with eigenvalues near -||Z||.
_PHI_M = np.array([1, 2, 4, 6, 9, 12, 16, 20])
_PHI_Q = np.array([1, 2, 2, 3, 3, 4, 4, 4])
_PHI_COST = np.array([0, 1, 2, 3, 4, 5, 6, 7])
_PHI_THETA = np.array([2.5809568196251122e-8, 1.3863517100417094e-5,
                       0.0024016999007714843, 0.023907788662525782,
                       0.14592367096950602, 0.41055209407982327,
                       0.97708974286008794, 1.7420152406697095])
_PHI_MAXM = 20


def _taylor_coefficients(offset, count):
    c = np.empty(count)
    for k in range(count):
        c[k] = 1.0 / math.factorial(k + offset)
    return c


_C_PHI1 = _taylor_coefficients(1, _PHI_MAXM + 1)  # 1/(k+1)!
_C_PHI2 = _taylor_coefficients(2, _PHI_MAXM + 1)  # 1/(k+2)!
_C_PHI3 = _taylor_coefficients(3, _PHI_MAXM + 1)  # 1/(k+3)!


@njit(types.UniTuple(i8, 3)(f8, i8, i8), cache=True, _nrt=False)
def _phi_select(norm_z, per_doubling, lo):
    """Choose (table index >= lo, Taylor degree, s) minimising products.

    ``norm_z`` bounds the growth of the powers of ``Z`` (``||Z||_1`` or the
    sharper ``alpha_p``); cost = Paterson-Stockmeyer products +
    ``per_doubling * s``; ties go to the larger degree (fewer doublings).
    """
    best_i = -1
    best_cost = 1 << 60
    best_s = 0
    for i in range(lo, _PHI_M.shape[0]):
        th = _PHI_THETA[i]
        s = 0
        if norm_z > th:
            s = int(math.ceil(math.log2(norm_z / th)))
            # guard against log2 rounding: ensure norm_z 2^-s <= theta
            while norm_z * 2.0 ** (-s) > th:
                s += 1
        cost = _PHI_COST[i] + per_doubling * s
        if cost <= best_cost:
            best_cost = cost
            best_i = i
            best_s = s
    return best_i, _PHI_M[best_i], best_s


@njit(types.void(vec, mat, rvec, i8, i8, i8, i8), cache=True, _nrt=False)
def _chunk_into(d, P, c, i0, nterms, accumulate, n):
    """``D (+)= sum_{j<nterms} c[i0+j] Z^j`` with ``Z^0 = I``, ``Z^j = P[j-1]``.

    ``d`` is ``D`` flattened (length n*n) and ``P`` the powers flattened to rows
    (``P[j-1]`` is ``Z^j``), so each case is one contiguous, vectorisable sweep
    with all the terms of the chunk (``nterms <= 4``: the callers use q <= 4).
    Rows of ``P`` beyond ``nterms - 1`` are not read (they may hold anything).
    """
    nn = d.shape[0]
    c1 = c[i0 + 1] if nterms > 1 else 0.0
    c2 = c[i0 + 2] if nterms > 2 else 0.0
    c3 = c[i0 + 3] if nterms > 3 else 0.0
    if nterms == 1:
        if not accumulate:
            for i in range(nn):
                d[i] = 0.0
    elif nterms == 2:
        p1 = P[0]
        if accumulate:
            for i in range(nn):
                d[i] += c1 * p1[i]
        else:
            for i in range(nn):
                d[i] = c1 * p1[i]
    elif nterms == 3:
        p1 = P[0]
        p2 = P[1]
        if accumulate:
            for i in range(nn):
                d[i] += c1 * p1[i] + c2 * p2[i]
        else:
            for i in range(nn):
                d[i] = c1 * p1[i] + c2 * p2[i]
    else:
        p1 = P[0]
        p2 = P[1]
        p3 = P[2]
        if accumulate:
            for i in range(nn):
                d[i] += c1 * p1[i] + c2 * p2[i] + c3 * p3[i]
        else:
            for i in range(nn):
                d[i] = c1 * p1[i] + c2 * p2[i] + c3 * p3[i]
    c0 = c[i0]
    for i in range(n):
        d[i * (n + 1)] += c0


@njit(types.void(tens, i8, rvec, i8, mat, mat, mat), cache=True, _nrt=False)
def _paterson_stockmeyer_into(P, q, c, m, out, acc, tmp):
    """``out = sum_{k=0}^m c[k] Z^k`` given ``P[j-1] = Z^j`` for j = 1..q (q <= 4).

    Write the polynomial as ``sum_i (Z^q)^i C_i(Z)`` with chunks ``C_i`` of
    degree < q and evaluate it by Horner's rule in ``Z^q``: ``r = m // q``
    chunks above ``C_0``. If ``q`` divides ``m`` the top chunk is the scalar
    ``c[m]`` and folds into the next one as ``c[m] Z^q`` (no product). Products:
    ``r - 1`` if ``q | m`` else ``r`` (plus ``q - 1`` to form the powers).
    Each Horner step ``C_i + Z^q X`` is one accumulating product (the chunk is
    written first, ``gemm_into`` with ``beta = 1`` adds ``Z^q X``); ``acc`` and
    ``tmp`` alternate, so nothing is copied.
    """
    n = out.shape[0]
    nn = n * n
    # flat views, taken once (each reshape is a helper call)
    Pf = P.reshape(P.shape[0], nn)
    outf = out.reshape(nn)
    r = m // q
    zq = P[q - 1]
    zqf = Pf[q - 1]
    if m % q == 0 and r >= 1:
        top = r - 1
        top_terms = q
        extra = c[m]
    else:
        top = r
        top_terms = m - r * q + 1
        extra = 0.0
    if top == 0:
        _chunk_into(outf, Pf, c, 0, top_terms, 0, n)
        if extra != 0.0:
            for i in range(nn):
                outf[i] += extra * zqf[i]
        return
    cur, nxt = acc, tmp
    curf, nxtf = acc.reshape(nn), tmp.reshape(nn)
    _chunk_into(curf, Pf, c, top * q, top_terms, 0, n)
    if extra != 0.0:
        for i in range(nn):
            curf[i] += extra * zqf[i]
    for lev in range(top - 1, 0, -1):
        _chunk_into(nxtf, Pf, c, lev * q, q, 0, n)
        gemm_into(zq, cur, nxt, 1.0, 1.0)
        cur, nxt = nxt, cur
        curf, nxtf = nxtf, curf
    _chunk_into(outf, Pf, c, 0, q, 0, n)
    gemm_into(zq, cur, out, 1.0, 1.0)


# Index of m = 9 in the table: the first degree with m + 1 >= 6, for which the
# alpha_3 bound below is valid.
_PHI_LO_ALPHA = 4


@njit(types.UniTuple(i8, 3)(mat, f8, tens, i8), cache=True, _nrt=False)
def _phi_prepare(A, h, ws, per_doubling):
    """Scale ``Z = (h/2^s) A`` into ``ws[0]``, powers ``Z^2..Z^q`` into ``ws[1..]``.

    Returns ``(m, q, s)``; ``m = -1`` means non-finite input.

    When scaling is needed, the degree and ``s`` are chosen with
    ``alpha = min(max(d2, d3), max(d3, d4))``, ``d_k = ||(hA)^k||_1^(1/k)``,
    instead of ``||hA||_1``: by Al-Mohy and Higham (2009), Theorem 4.2, a
    power series tail ``sum_{k>m} c_k Z^k`` with ``c_k >= 0`` is bounded by the
    same series at ``alpha_p = max(d_p, d_(p+1))`` whenever
    ``p (p - 1) <= m + 1``, i.e. p = 2, 3 for m >= 9. For nonnormal matrices
    ``alpha << ||hA||``, which saves doublings (fewer products, less rounding
    error amplification). The powers ``(hA)^2..(hA)^4`` are the ones
    Paterson-Stockmeyer needs anyway (every scaled choice has q = 4); they are
    computed before scaling and rescaled by ``2^(-ks)``.
    """
    n = A.shape[0]
    colsum = ws[6][0]                 # ws[5], ws[6] are free until Paterson-Stockmeyer
    norm_w = abs(h) * norm1_rowwise(A, colsum)
    if not math.isfinite(norm_w):
        return -1, 0, 0
    idx, m, s = _phi_select(norm_w, per_doubling, 0)
    Z = ws[0]
    for i in range(n):
        for j in range(n):
            Z[i, j] = h * A[i, j]
    if s > 0 and norm_w < 1e60:  # (hA)^4 must not overflow
        for j in range(2, 5):
            matmul_into(ws[j - 2], Z, ws[j - 1])
        d2 = norm1_rowwise(ws[1], colsum) ** 0.5
        d3 = norm1_rowwise(ws[2], colsum) ** (1.0 / 3.0)
        d4 = norm1_rowwise(ws[3], colsum) ** 0.25
        alpha = min(max(d2, d3), max(d3, d4))
        if alpha < norm_w:
            idx, m, s = _phi_select(alpha, per_doubling, _PHI_LO_ALPHA)
        q = _PHI_Q[idx]
        if s > 0:
            # Z^k <- 2^(-ks) Z^k, over the first q slices as one flat vector each
            wf = ws.reshape((ws.shape[0], n * n))
            sc = 2.0 ** (-s)
            f = 1.0
            for k in range(q):
                f *= sc
                row = wf[k]
                for i in range(n * n):
                    row[i] *= f
        return m, q, s
    q = _PHI_Q[idx]
    if s > 0:
        _scale(Z, 2.0 ** (-s))
    for j in range(2, q + 1):
        matmul_into(ws[j - 2], Z, ws[j - 1])
    return m, q, s


@njit(inline="always")
def _taylor_of_scaled_into(A, h, out, ws, blocks, c):
    """The start shared by the phi kernels, whose output ``out`` is ``n x (blocks n)``
    (``[E | F]``: 2, ``[E | F1 | F2]``: 3): check the shapes, scale ``Z = (h/2^s) A``
    into ``ws[0]`` (see :func:`_phi_prepare`) and form the Taylor sum
    ``sum_k c[k] Z^k`` in ``ws[4]``.

    Returns ``s``, or -1 when the kernel is done: ``n = 0``, or non-finite
    input (``out`` is then filled with NaN).
    """
    n = A.shape[0]
    if A.shape[1] != n or out.shape[0] != n or out.shape[1] != blocks * n:
        if blocks == 2:
            raise ValueError("exp_phi1_into: A must be n x n and EF n x 2n")
        if blocks == 3:
            raise ValueError("exp_phi12_into: A must be n x n and EFF n x 3n")
        raise ValueError("exp_phi123_into: A must be n x n and EF3 n x 4n")
    _check_ws(ws, n)
    if n == 0:
        return -1
    m, q, s = _phi_prepare(A, h, ws, blocks)
    if m < 0:
        _fill(out, np.nan)
        return -1
    _paterson_stockmeyer_into(ws, q, c, m, ws[4], ws[5], ws[6])
    return s


@njit(inline="always")
def _identity_plus_product_into(Z, P, out):
    """``out = I + Z P``."""
    gemm_into(Z, P, out, 1.0, 0.0)
    for i in range(out.shape[0]):
        out[i, i] += 1.0


@njit(types.void(mat, f8, mat, tens), cache=True, _nrt=False)
def _exp_phi1_plain_into(A, h, EF, ws):
    """``EF = [E | F]`` with ``E = exp(hA)``, ``F = integral_0^h exp(sA) ds = h phi1(hA)``.

    These are the two matrices of the exponential step (3.10),
    ``S_k+1 = E S_k + F B_k = [E | F] [S_k; B_k]``, side by side as the step
    uses them. ``F`` is the upper right block of ``exp([[hA, hI], [0, 0]])``
    and equals ``(E - I) A^-1`` when ``A`` is invertible, but is computed
    without any inverse, so it is exact to rounding also for singular ``A``.

    Parameters
    ----------
    A : ndarray, shape (n, n), float64, C-contiguous
    h : float
        Step (any sign; ``h = 0`` gives ``E = I, F = 0``).
    EF : ndarray, shape (n, 2n)
        Output ``[E | F]``; must not share memory with ``A`` or ``ws``.
    ws : ndarray, shape (NWS, n, n)
        Workspace from :func:`workspace`.

    Notes
    -----
    With ``Z = hA/2^s`` and ``t = h/2^s``: ``phi1(Z)`` by the Taylor series
    of degree m (Paterson-Stockmeyer), ``E(t) = I + Z phi1(Z)``,
    ``F(t) = t phi1(Z)``; then s doublings

        [E(2t) | F(2t) - F(t)] = E(t) [E(t) | F(t)],

    i.e. ``E(2t) = E(t)^2`` and ``F(2t) = F(t) + E(t) F(t)``, which follow
    from splitting ``integral_0^2t`` at ``t``. Each doubling is one
    ``n x n`` by ``n x 2n`` product (cheaper than two ``n x n`` ones).
    ``(m, s)`` minimise the products subject to ``||Z||_1 <= theta_m``
    (truncation error below the unit roundoff), or to ``alpha(Z) <= theta_m``
    with the sharper ``alpha`` of ``_phi_prepare`` when scaling is needed.
    Cost: PS(m) + 1 products of ``n x n`` matrices (PS(m) <= 7) and s of
    ``n x n`` by ``n x 2n``. Non-finite input gives an all-NaN output.
    """
    n = A.shape[0]
    s = _taylor_of_scaled_into(A, h, EF, ws, 2, _C_PHI1)
    if s < 0:
        return
    P = ws[4]                            # phi1(Z)
    E = EF[:, :n]
    _identity_plus_product_into(ws[0], P, E)      # E = I + Z phi1(Z) = exp(Z)
    _set_cols_scaled(EF, n, P, h * 2.0 ** (-s))   # F = t phi1(Z), t = h/2^s
    cur = EF
    nxt = ws[5:7].reshape((n, 2 * n))   # P, ws[5], ws[6] are free from here on
    for _ in range(s):
        gemm_into(cur[:, :n], cur, nxt, 1.0, 0.0)   # [E^2 | E F]
        _add_cols_into(nxt, cur, n, 2 * n, 0.0, 0)   # F(2t) = F + E F
        cur, nxt = nxt, cur
    if s % 2 == 1:
        copy_into(cur, EF)


@njit(types.void(mat, f8, mat, tens), cache=True, _nrt=False)
def _exp_phi12_plain_into(A, h, EFF, ws):
    """``EFF = [E | F1 | F2]``: ``exp(hA)``, ``h phi1(hA)`` and ``h^2 phi2(hA)``.

    ``F2 = integral_0^h exp((h - s)A) s ds`` weights the linear part of ``B``
    in the second-order exponential step (see ``steps.exp2_step_stacked_into``):
    ``S_k+1 = E S_k + F1 B_k + (F2/h)(B_k+1 - B_k)``. ``[F1, F2]`` is the upper
    right block row of ``exp(h [[A, I, 0], [0, 0, I], [0, 0, 0]])``.

    Parameters
    ----------
    A : ndarray, shape (n, n), float64, C-contiguous
    h : float
    EFF : ndarray, shape (n, 3n)
        Output; must not share memory with ``A`` or ``ws``.
    ws : ndarray, shape (NWS, n, n)
        Workspace from :func:`workspace`.

    Notes
    -----
    ``phi2(Z) = sum_k Z^k/(k+2)!`` by Paterson-Stockmeyer, then
    ``phi1(Z) = I + Z phi2(Z)`` and ``exp(Z) = I + Z phi1(Z)``. Doubling, with
    ``t = h/2^s`` doubled each time, as one product ``E(t) [E | F1 | F2]``:

        F2(2t) = (I + E(t)) F2(t) + t F1(t)
        F1(2t) = (I + E(t)) F1(t),   E(2t) = E(t)^2.

    The first follows from splitting ``integral_0^2t exp((2t-s)A) s ds`` at
    ``s = t``: the first half is ``E(t) F2(t)``; substituting ``s = t + r`` in
    the second gives ``integral_0^t exp((t-r)A) (t + r) dr = t F1(t) + F2(t)``.
    Cost: PS(m) + 2 products of ``n x n`` matrices and s of ``n x n`` by
    ``n x 3n``. Non-finite input gives an all-NaN output.
    """
    n = A.shape[0]
    s = _taylor_of_scaled_into(A, h, EFF, ws, 3, _C_PHI2)
    if s < 0:
        return
    Z = ws[0]
    P = ws[4]                            # phi2(Z)
    Q = ws[5]
    _identity_plus_product_into(Z, P, Q)   # Q = phi1(Z) = I + Z phi2(Z)
    E = EFF[:, :n]
    _identity_plus_product_into(Z, Q, E)   # E = exp(Z) = I + Z phi1(Z)
    t = h * 2.0 ** (-s)
    _set_cols_scaled(EFF, n, Q, t)       # F1 = t phi1(Z)
    _set_cols_scaled(EFF, 2 * n, P, t * t)   # F2 = t^2 phi2(Z)
    cur = EFF
    nxt = ws[4:7].reshape((n, 3 * n))   # P, ws[5], ws[6] are free from here on
    for _ in range(s):
        gemm_into(cur[:, :n], cur, nxt, 1.0, 0.0)   # [E^2 | E F1 | E F2]
        _double_f12_into(nxt, cur, t)   # F1(2t) = (I + E) F1, F2(2t) = (I + E) F2 + t F1
        cur, nxt = nxt, cur
        t *= 2.0
    if s % 2 == 1:
        copy_into(cur, EFF)



@njit(types.void(mat, mat, f8), cache=True, _nrt=False)
def _double_f123_into(nxt, cur, t):
    """``nxt = [E^2 | E F1 | E F2 | E F3]`` of ``cur = [E | F1 | F2 | F3]`` at ``t`` becomes the
    same at ``2t``: ``F1 += F1``, ``F2 += F2 + t F1``, ``F3 += F3 + t F2 + (t^2/2) F1``."""
    n = cur.shape[0]
    half_t2 = 0.5 * t * t
    for i in range(n):
        for j in range(n):
            f1 = cur[i, n + j]
            f2 = cur[i, 2 * n + j]
            nxt[i, n + j] += f1
            nxt[i, 2 * n + j] += f2 + t * f1
            nxt[i, 3 * n + j] += cur[i, 3 * n + j] + t * f2 + half_t2 * f1


@njit(types.void(mat, f8, mat, tens), cache=True, _nrt=False)
def _exp_phi123_plain_into(A, h, EF3, ws):
    """``EF3 = [E | F1 | F2 | F3]``: as :func:`exp_phi12_into`, and
    ``F3 = integral_0^h exp((h - s)A) s^2/2 ds = h^3 phi3(hA)`` (the weight of a quadratic
    forcing; the exp2 midpoint correction, :mod:`pbsens.kernels.midpoint`).

    ``phi3(Z) = sum_k Z^k/(k+3)!`` by Paterson-Stockmeyer (its tail is below ``phi1``'s, so the
    degree table holds), ``phi2 = I/2 + Z phi3``, ``phi1 = I + Z phi2``, ``exp = I + Z phi1``;
    doubling as one product ``E(t) [E | F1 | F2 | F3]`` and, splitting the integral at ``t``,

        F3(2t) = (I + E(t)) F3(t) + t F2(t) + (t^2/2) F1(t).

    Cost: that of :func:`exp_phi12_into` plus one ``n x n`` product and an ``n x n`` block more
    in every doubling. Non-finite input gives an all-NaN output.
    """
    n = A.shape[0]
    s = _taylor_of_scaled_into(A, h, EF3, ws, 4, _C_PHI3)
    if s < 0:
        return
    Z = ws[0]
    P3 = ws[4]                           # phi3(Z)
    P2 = ws[5]
    P1 = ws[6]
    gemm_into(Z, P3, P2, 1.0, 0.0)
    for i in range(n):
        P2[i, i] += 0.5                  # phi2(Z) = I/2 + Z phi3(Z)
    _identity_plus_product_into(Z, P2, P1)       # phi1(Z) = I + Z phi2(Z)
    _identity_plus_product_into(Z, P1, EF3[:, :n])  # exp(Z) = I + Z phi1(Z)
    t = h * 2.0 ** (-s)
    _set_cols_scaled(EF3, n, P1, t)
    _set_cols_scaled(EF3, 2 * n, P2, t * t)
    _set_cols_scaled(EF3, 3 * n, P3, t * t * t)
    cur = EF3
    nxt = ws[3:7].reshape((n, 4 * n))    # free from here on
    for _ in range(s):
        gemm_into(cur[:, :n], cur, nxt, 1.0, 0.0)   # [E^2 | E F1 | E F2 | E F3]
        _double_f123_into(nxt, cur, t)
        cur, nxt = nxt, cur
        t *= 2.0
    if s % 2 == 1:
        copy_into(cur, EF3)


# --------------------------------------------------------------------------
# the public kernels: isolated fast states deflated first where there are any
# --------------------------------------------------------------------------

@njit(types.void(mat, f8, mat, tens), cache=True, _nrt=False)
def exp_phi1_into(A, h, EF, ws):
    """``EF = [E | F]``, ``E = exp(hA)``, ``F = h phi1(hA)`` (see :func:`_exp_phi1_plain_into`);
    isolated fast states of ``A`` are deflated first (:mod:`pbsens.kernels.phi_deflate`) when
    the workspace has the slices for it."""
    k = deflate_prepare(A, h, ws)
    if k == 0:
        _exp_phi1_plain_into(A, h, EF, ws)
    else:
        _exp_phi1_plain_into(ws[7], h, EF, ws)
        deflate_finish(EF, h, ws, k, 2)


@njit(types.void(mat, f8, mat, tens), cache=True, _nrt=False)
def exp_phi12_into(A, h, EFF, ws):
    """``EFF = [E | F1 | F2]``: ``exp(hA)``, ``h phi1(hA)``, ``h^2 phi2(hA)`` (see
    :func:`_exp_phi12_plain_into`); isolated fast states deflated first, as :func:`exp_phi1_into`."""
    k = deflate_prepare(A, h, ws)
    if k == 0:
        _exp_phi12_plain_into(A, h, EFF, ws)
    else:
        _exp_phi12_plain_into(ws[7], h, EFF, ws)
        deflate_finish(EFF, h, ws, k, 3)


@njit(types.void(mat, f8, mat, tens), cache=True, _nrt=False)
def exp_phi123_into(A, h, EF3, ws):
    """``EF3 = [E | F1 | F2 | F3]`` (see :func:`_exp_phi123_plain_into`); isolated fast states
    deflated first, as :func:`exp_phi1_into`."""
    k = deflate_prepare(A, h, ws)
    if k == 0:
        _exp_phi123_plain_into(A, h, EF3, ws)
    else:
        _exp_phi123_plain_into(ws[7], h, EF3, ws)
        deflate_finish(EF3, h, ws, k, 4)
