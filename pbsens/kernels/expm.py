"""``exp(A)`` by scaling and squaring with Pade approximants of degree 3, 5, 7, 9 or 13.

Higham (2005) with the refinements of Al-Mohy and Higham (2009) that
``scipy.linalg.expm`` also uses: degree selection by ``||A^k||^(1/k)`` instead of
``||A||`` and the extra-scaling term ``ell``. References in :mod:`pbsens.kernels.linalg`.
"""
import math

import numpy as np
from numba import njit, types

from .lu import solve_inplace as _lu_solve_inplace
from .signatures import f8, mat, tens, vec
from .dense import _check_ws, _fill, _norm1, _scale, _set_identity, copy_into, i8, matmul_into, workspace

# --------------------------------------------------------------------------
# expm: scaling and squaring with Pade approximants
# --------------------------------------------------------------------------

# theta_m of Higham (2005), Table 2.3: largest ||2^-s A|| for which the [m/m]
# Pade approximant has backward error <= u. For m = 13, Al-Mohy and Higham
# (2009) and scipy.linalg.expm use 4.25 instead of Higham's 5.37 (more
# accurate in their experiments, at most one more squaring); we follow scipy.
_THETA3 = 1.495585217958292e-2
_THETA5 = 2.539398330063230e-1
_THETA7 = 9.504178996162932e-1
_THETA9 = 2.097847961257068e0
_THETA13 = 4.25

# Pade coefficients b_0..b_m (numerator p(x) = sum b_j x^j, denominator p(-x)).
_B3 = np.array([120.0, 60.0, 12.0, 1.0])
_B5 = np.array([30240.0, 15120.0, 3360.0, 420.0, 30.0, 1.0])
_B7 = np.array([17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0,
                56.0, 1.0])
_B9 = np.array([17643225600.0, 8821612800.0, 2075673600.0, 302702400.0,
                30270240.0, 2162160.0, 110880.0, 3960.0, 90.0, 1.0])
_B13 = np.array([64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
                 1187353796428800.0, 129060195264000.0, 10559470521600.0,
                 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0,
                 960960.0, 16380.0, 182.0, 1.0])

# u / |c_{2m+1}| for m = 3, 5, 7, 9, 13, where c_{2m+1} = (m!)^2/((2m)!(2m+1)!)
# is the leading coefficient of the backward error series of the [m/m] Pade
# approximant (Al-Mohy and Higham 2009, eq. (5.1)); the same numbers as scipy.
_ELL_COEF = np.array([1.1191048088221578e-11, 1.1167770708198077e-06,
                      4.9826124310493469e-01, 6.5662862500000000e+05,
                      1.2573361865339437e+19])


@njit(types.void(mat, f8, vec, vec), cache=True, _nrt=False)
def _abs_vecmat(A, scale, v, w):
    # w = v |scale * A|   (row vector times |A|)
    n = A.shape[0]
    for j in range(n):
        w[j] = 0.0
    for i in range(n):
        vi = v[i] * scale
        for j in range(n):
            w[j] += vi * abs(A[i, j])


@njit(i8(mat, f8, i8, i8, vec, vec), cache=True, _nrt=False)
def _spin(A, scale, done, target, v, w):
    """Advance ``v = 1^T |scale A|^done`` to ``|scale A|^target``; return target.

    ``v`` and ``w`` are length-n vectors; the result is in ``v``.
    The 1-norm of the nonnegative matrix ``|A|^k`` is the largest entry of
    ``1^T |A|^k``, so these vector products give it exactly (no estimator).
    """
    n = A.shape[0]
    while done < target:
        _abs_vecmat(A, scale, v, w)
        for j in range(n):
            v[j] = w[j]
        done += 1
    return done


@njit(i8(vec, f8, i8, f8), cache=True, _nrt=False)
def _ell(v, norm_a, m2p1, coef):
    """Extra squarings ``ell(A, m)`` of Al-Mohy and Higham (2009), eq. (5.3).

    ``v`` holds ``1^T |A|^(2m+1)`` (of the possibly scaled ``A``), ``norm_a`` is
    ``||A||_1``, ``coef = u/|c_{2m+1}|``.
    """
    big = 0.0
    for j in range(v.shape[0]):
        if v[j] > big:
            big = v[j]
    if big == 0.0 or norm_a == 0.0:
        return 0
    val = math.log2(big / norm_a / coef) / (m2p1 - 1)
    if not (val > 0.0):
        return 0
    if not math.isfinite(val):
        # |A|^(2m+1) overflowed (huge, strongly nonnormal A): a conservative
        # fallback that rejects a degree m < 13, or adds one squaring for 13.
        return 1
    return int(math.ceil(val))


@njit(types.UniTuple(i8, 2)(mat, f8, i8, i8, vec, vec), cache=True, _nrt=False)
def _degree_if_no_squaring(A, norm_a, j, spun, v, w):
    """Try the Pade degree ``m = 3, 5, 7, 9`` (``j = 0..3``) whose ``theta_m`` the
    norm bounds passed: ``(m, spun)`` if ``ell(A, m)`` asks for no extra squaring,
    else ``(0, spun)``; ``spun`` and ``v``, ``w`` as for :func:`_spin`, which is
    advanced to ``2m + 1`` first."""
    m2p1 = 4 * j + 7
    spun = _spin(A, 1.0, spun, m2p1, v, w)
    if _ell(v, norm_a, m2p1, _ELL_COEF[j]) == 0:
        return 2 * j + 3, spun
    return 0, spun


@njit(types.void(mat, mat, mat, mat, mat, f8, f8, f8, f8, f8), cache=True, _nrt=False)
def _lincomb4(dst, A2, A4, A6, A8, c2, c4, c6, c8, c0):
    # dst = c8 A8 + c6 A6 + c4 A4 + c2 A2 + c0 I (terms with zero coefficient
    # may pass any matrix of the right shape)
    n = dst.shape[0]
    for i in range(n):
        for j in range(n):
            v = c2 * A2[i, j]
            if c4 != 0.0:
                v += c4 * A4[i, j]
            if c6 != 0.0:
                v += c6 * A6[i, j]
            if c8 != 0.0:
                v += c8 * A8[i, j]
            dst[i, j] = v
        dst[i, i] += c0


@njit(types.void(mat, mat, mat, i8, mat, mat), cache=True, _nrt=False)
def _pade13_sum(A2, A4, A6, k, tmp, out):
    """The degree-13 Pade sums with the coefficients ``b = _B13`` of parity ``k``:
    ``out = A6 (b[k+12] A6 + b[k+10] A4 + b[k+8] A2) + b[k+6] A6 + b[k+4] A4 + b[k+2] A2 + b[k] I``.

    ``k = 1``: ``U = A out``; ``k = 0``: ``out = V``. ``tmp`` is overwritten.
    """
    b = _B13
    _lincomb4(tmp, A2, A4, A6, A2, b[k + 8], b[k + 10], b[k + 12], 0.0, 0.0)
    matmul_into(A6, tmp, out)
    n = out.shape[0]
    for i in range(n):
        for j in range(n):
            out[i, j] += b[k + 6] * A6[i, j] + b[k + 4] * A4[i, j] + b[k + 2] * A2[i, j]
        out[i, i] += b[k]


@njit(types.void(mat, mat, mat), cache=True, _nrt=False)
def _pade_finish(U, V, out):
    # out = V + U (numerator p(A)), V = V - U (denominator q(A) = p(-A))
    n = U.shape[0]
    for i in range(n):
        for j in range(n):
            u = U[i, j]
            v = V[i, j]
            out[i, j] = v + u
            V[i, j] = v - u


@njit(types.void(mat, mat, tens), cache=True, _nrt=False)
def expm_into(A, out, ws):
    """Matrix exponential ``out = exp(A)`` by scaling and squaring.

    Parameters
    ----------
    A : ndarray, shape (n, n), float64, C-contiguous
        Not modified.
    out : ndarray, shape (n, n)
        Result; must not share memory with ``A`` or ``ws``.
    ws : ndarray, shape (NWS, n, n)
        Workspace from :func:`workspace`; all 7 slices are used.

    Notes
    -----
    Algorithm 5.1 of Al-Mohy and Higham (2009), the revision of Higham (2005)
    that ``scipy.linalg.expm`` implements: the [m/m] Pade approximant with
    m in {3, 5, 7, 9, 13} is chosen by comparing
    ``eta = max(||A^p||^(1/p), ||A^(p+1)||^(1/(p+1)))`` (never larger than
    ``||A||_1``) with ``theta_m``, plus ``ell(A, m)`` extra squarings that
    guard against overscaling-induced loss for nonnormal matrices. Where scipy
    forms extra powers only to measure them (``A^4, A^6`` for m = 3, 5 and
    ``A^8, A^10`` for m = 13) we use the submultiplicative bounds
    ``||A^(j+k)|| <= ||A^j|| ||A^k||`` instead, which is cheaper and still a
    rigorous upper bound (it can cost a squaring more than scipy for strongly
    nonnormal matrices). ``||abs(A)^(2m+1)||_1`` in ``ell`` is computed exactly
    by vector-matrix products. The Pade quotient is solved by LU with partial
    pivoting in place. Non-finite input gives an all-NaN result.
    Cost (products of n x n matrices): m = 3: 2, 5: 3, 7: 4, 9: 5,
    13: 6 + s, each plus one solve (~1.3 products in flops).
    """
    n = A.shape[0]
    if A.shape[1] != n or out.shape[0] != n or out.shape[1] != n:
        raise ValueError("expm_into: A and out must be n x n")
    _check_ws(ws, n)
    if n == 0:
        return
    norm_a = _norm1(A)
    if not math.isfinite(norm_a):
        _fill(out, np.nan)
        return
    if norm_a == 0.0:
        _set_identity(out)
        return

    As = ws[0]
    A2 = ws[1]
    A4 = ws[2]
    A6 = ws[3]
    A8 = ws[4]
    T5 = ws[5]
    T6 = ws[6]
    # Rows for the exact ||abs(A)^k||_1 "spins" (first rows of two
    # temporaries; free until U and V are formed). Start at 1^T |A|^0 = 1^T.
    v = T5[0]
    w = T6[0]
    for j in range(n):
        v[j] = 1.0
    spun = 0
    n4 = 0.0
    n6 = 0.0
    d8 = 0.0
    eta3 = 0.0

    matmul_into(A, A, A2)
    n2 = _norm1(A2)
    # d4, d6 <= ||A^2||^(1/2)  (bounds; exact values need A^4, A^6)
    d4 = math.sqrt(n2)
    d6 = d4
    eta = max(d4, d6)
    m = 0
    if eta <= _THETA3:
        m, spun = _degree_if_no_squaring(A, norm_a, 0, spun, v, w)
    if m == 0:
        matmul_into(A2, A2, A4)
        n4 = _norm1(A4)
        d4 = n4 ** 0.25
        d6 = min(math.sqrt(n2), (n4 * n2) ** (1.0 / 6.0))
        eta = max(d4, d6)
        if eta <= _THETA5:
            m, spun = _degree_if_no_squaring(A, norm_a, 1, spun, v, w)
    if m == 0:
        matmul_into(A4, A2, A6)
        n6 = _norm1(A6)
        d6 = n6 ** (1.0 / 6.0)
        d8 = min(d4, (n6 * n2) ** 0.125)  # ||A^8|| <= ||A^4||^2, ||A^6|| ||A^2||
        eta3 = max(d6, d8)
        if eta3 <= _THETA7:
            m, spun = _degree_if_no_squaring(A, norm_a, 2, spun, v, w)
        if m == 0 and eta3 <= _THETA9:
            m, spun = _degree_if_no_squaring(A, norm_a, 3, spun, v, w)

    s = 0
    if m == 0:
        m = 13
        # ||A^10|| <= ||A^4|| ||A^6||, ||A^2|| ||A^8||
        d10 = min((n4 * n6) ** 0.1, (n2 * d8 ** 8) ** 0.1)
        eta4 = max(d8, d10)
        eta5 = min(eta3, eta4)
        if eta5 > _THETA13:
            s = int(math.ceil(math.log2(eta5 / _THETA13)))
        # ell(2^-s A, 13): rescale the spins done so far, 1^T |A|^spun, to
        # 1^T |2^-s A|^spun and continue with the scaled matrix up to 27 (as
        # scipy does); restart from 1^T if the rescaling could underflow.
        sc = 2.0 ** (-s)
        if spun * s < 900:
            f = sc ** spun
            for j in range(n):
                v[j] *= f
        else:
            for j in range(n):
                v[j] = 1.0
            spun = 0
        _spin(A, sc, spun, 27, v, w)
        s += _ell(v, norm_a * sc, 27, _ELL_COEF[4])

    if m == 3 or m == 5 or m == 7 or m == 9:
        b = _B3
        if m == 5:
            b = _B5
        elif m == 7:
            b = _B7
        elif m == 9:
            b = _B9
        if m == 9:
            matmul_into(A4, A4, A8)
        # U = A (b_m A^(m-1) + ... + b_3 A^2 + b_1 I),  V = b_(m-1) A^(m-1) + ... + b_0 I
        c4 = b[5] if m >= 5 else 0.0
        c6 = b[7] if m >= 7 else 0.0
        c8 = b[9] if m >= 9 else 0.0
        _lincomb4(T5, A2, A4, A6, A8, b[3], c4, c6, c8, b[1])
        matmul_into(A, T5, T6)  # U in T6
        c4 = b[4] if m >= 5 else 0.0
        c6 = b[6] if m >= 7 else 0.0
        c8 = b[8] if m >= 9 else 0.0
        _lincomb4(T5, A2, A4, A6, A8, b[2], c4, c6, c8, b[0])  # V in T5
        _pade_finish(T6, T5, out)
        _lu_solve_inplace(T5, out)
        return

    # m = 13 with scaling: A <- 2^-s A, A^2k <- 2^-2ks A^2k
    sc = 2.0 ** (-s)
    for i in range(n):
        for j in range(n):
            As[i, j] = sc * A[i, j]
    if s > 0:
        _scale(A2, sc * sc)
        _scale(A4, sc ** 4)
        _scale(A6, sc ** 6)
    _pade13_sum(A2, A4, A6, 1, A8, T5)
    matmul_into(As, T5, A8)  # U in A8
    _pade13_sum(A2, A4, A6, 0, T5, T6)  # V in T6
    _pade_finish(A8, T6, out)
    _lu_solve_inplace(T6, out)
    # Squaring phase, ping-pong between out and T5.
    cur_in_out = True
    for _ in range(s):
        if cur_in_out:
            matmul_into(out, out, T5)
        else:
            matmul_into(T5, T5, out)
        cur_in_out = not cur_in_out
    if not cur_in_out:
        copy_into(T5, out)


@njit(mat(mat), cache=True)
def expm(A):
    """Allocating convenience wrapper: return ``exp(A)`` (see :func:`expm_into`)."""
    n = A.shape[0]
    out = np.empty((n, n))
    expm_into(A, out, workspace(n))
    return out


