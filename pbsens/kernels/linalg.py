"""Small dense linear algebra kernels: norms, products, ``expm`` and phi functions.

All kernels are numba ``nopython`` functions compiled eagerly for C-contiguous
float64 arrays and cached on disk. Functions whose name ends in ``_into`` never
allocate: they write into output arrays and use a preallocated workspace from
:func:`workspace`. Outputs must not alias inputs or each other unless a
docstring says otherwise.

Matrix functions
----------------
``expm_into``
    ``exp(A)`` by scaling and squaring with Pade approximants of degree 3, 5, 7,
    9 or 13 (Higham 2005, with the refinements of Al-Mohy and Higham 2009 that
    ``scipy.linalg.expm`` also uses: degree selection by
    ``||A^k||^(1/k)`` instead of ``||A||`` and the extra-scaling term
    ``ell``).
``exp_phi1_into``
    ``[E | F]`` with ``E = exp(hA)``, ``F = integral_0^h exp(sA) ds = h phi1(hA)``.
``exp_phi12_into``
    ``[E | F1 | F2]``, additionally ``F2 = integral_0^h exp((h - s)A) s ds = h^2 phi2(hA)``.

The phi functions ``phi1(Z) = sum_k Z^k/(k+1)!``, ``phi2(Z) = sum_k Z^k/(k+2)!``
are entire, so they need no inverse of ``A`` and are exact (to rounding) for
singular ``A``. They are evaluated by a truncated Taylor series (Paterson-Stockmeyer)
of ``Z = hA / 2^s`` and the scaling is undone with exact doubling identities
(see :func:`exp_phi1_into`). This costs about as much as ``expm`` of an
``n x n`` matrix instead of ``expm`` of the ``2n x 2n`` block matrix
``[[hA, hI], [0, 0]]`` (one ``2n`` product costs eight ``n`` products).
The outputs are side by side, as the steps use them, so that a doubling is one
product ``E [E | F]`` (:func:`pbsens.kernels.blas.gemm_into` on row-major views).

Elementwise loops over column blocks index with unsigned integers: a signed
index that does not start at 0 keeps numba's negative-index wraparound test in
the loop and LLVM does not vectorise it (4x slower for 21 x 21 blocks).

References
----------
N. J. Higham, "The scaling and squaring method for the matrix exponential
revisited", SIAM J. Matrix Anal. Appl. 26(4):1179-1193, 2005.
A. H. Al-Mohy and N. J. Higham, "A new scaling and squaring algorithm for the
matrix exponential", SIAM J. Matrix Anal. Appl. 31(3):970-989, 2009.
M. S. Paterson and L. J. Stockmeyer, "On the number of nonscalar
multiplications necessary to evaluate polynomials", SIAM J. Comput. 2(1), 1973.
"""
import math

import numpy as np
from numba import njit, types

from .blas import gemm, gemm_into
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
#: partner of the output in the doublings).
NWS = 7

_U = 2.0 ** -53  # unit roundoff of IEEE double precision



# --------------------------------------------------------------------------
# Norms and products
# --------------------------------------------------------------------------

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
        best = 0.0
        for j in range(m):
            s = 0.0
            for i in range(n):
                s += abs(A[i, j])
            if s > best or s != s:
                best = s
        return best
    elif kind == NORM_INF:
        best = 0.0
        for i in range(n):
            s = 0.0
            for j in range(m):
                s += abs(A[i, j])
            if s > best or s != s:
                best = s
        return best
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
# Linear solve (LU with partial pivoting, in place)
# --------------------------------------------------------------------------

@njit(types.void(mat, mat), cache=True, _nrt=False, fastmath={"contract"})
def _lu_solve_inplace(Q, X):
    """Overwrite ``X`` with ``Q^-1 X``; ``Q`` (square) is destroyed.

    Gaussian elimination with partial pivoting applied to ``Q`` and the
    right-hand sides together, so no pivot vector is stored. Row operations run
    over contiguous rows. For n = 21 this measured ~5.6 us, faster than LAPACK
    ``dgesv`` called from numba (~10 us) and ``np.linalg.solve`` (~13 us, which
    also allocates). A zero pivot gives inf/NaN, as LAPACK would report a
    singular matrix; Pade denominators are far from singular by construction.
    """
    n = Q.shape[0]
    k = X.shape[1]
    for c in range(n):
        p = c
        big = abs(Q[c, c])
        for i in range(c + 1, n):
            v = abs(Q[i, c])
            if v > big:
                big = v
                p = i
        if p != c:
            for j in range(c, n):
                t = Q[c, j]
                Q[c, j] = Q[p, j]
                Q[p, j] = t
            for j in range(k):
                t = X[c, j]
                X[c, j] = X[p, j]
                X[p, j] = t
        inv = 1.0 / Q[c, c]
        for i in range(c + 1, n):
            l = Q[i, c] * inv
            if l != 0.0:
                for j in range(c + 1, n):
                    Q[i, j] -= l * Q[c, j]
                for j in range(k):
                    X[i, j] -= l * X[c, j]
    for i in range(n - 1, -1, -1):
        for jj in range(i + 1, n):
            q = Q[i, jj]
            for j in range(k):
                X[i, j] -= q * X[jj, j]
        inv = 1.0 / Q[i, i]
        for j in range(k):
            X[i, j] *= inv


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
        ``NWS = 7`` slices (per-kernel usage documented at ``NWS``). One
        workspace serves any sequence of calls to ``expm_into``,
        ``exp_phi1_into`` and ``exp_phi12_into`` (not concurrent ones); its
        contents on entry do not matter.
    """
    return np.zeros((NWS, n, n))


@njit(types.void(tens, i8), cache=True, _nrt=False)
def _check_ws(ws, n):
    if ws.shape[0] < NWS or ws.shape[1] != n or ws.shape[2] != n:
        raise ValueError("workspace has the wrong shape: use workspace(n)")


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
        spun = _spin(A, 1.0, spun, 7, v, w)
        if _ell(v, norm_a, 7, _ELL_COEF[0]) == 0:
            m = 3
    if m == 0:
        matmul_into(A2, A2, A4)
        n4 = _norm1(A4)
        d4 = n4 ** 0.25
        d6 = min(math.sqrt(n2), (n4 * n2) ** (1.0 / 6.0))
        eta = max(d4, d6)
        if eta <= _THETA5:
            spun = _spin(A, 1.0, spun, 11, v, w)
            if _ell(v, norm_a, 11, _ELL_COEF[1]) == 0:
                m = 5
    if m == 0:
        matmul_into(A4, A2, A6)
        n6 = _norm1(A6)
        d6 = n6 ** (1.0 / 6.0)
        d8 = min(d4, (n6 * n2) ** 0.125)  # ||A^8|| <= ||A^4||^2, ||A^6|| ||A^2||
        eta3 = max(d6, d8)
        if eta3 <= _THETA7:
            spun = _spin(A, 1.0, spun, 15, v, w)
            if _ell(v, norm_a, 15, _ELL_COEF[2]) == 0:
                m = 7
        if m == 0 and eta3 <= _THETA9:
            spun = _spin(A, 1.0, spun, 19, v, w)
            if _ell(v, norm_a, 19, _ELL_COEF[3]) == 0:
                m = 9

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
    b = _B13
    # U = A [A6 (b13 A6 + b11 A4 + b9 A2) + b7 A6 + b5 A4 + b3 A2 + b1 I]
    _lincomb4(A8, A2, A4, A6, A2, b[9], b[11], b[13], 0.0, 0.0)
    matmul_into(A6, A8, T5)
    for i in range(n):
        for j in range(n):
            T5[i, j] += b[7] * A6[i, j] + b[5] * A4[i, j] + b[3] * A2[i, j]
        T5[i, i] += b[1]
    matmul_into(As, T5, A8)  # U in A8
    # V = A6 (b12 A6 + b10 A4 + b8 A2) + b6 A6 + b4 A4 + b2 A2 + b0 I
    _lincomb4(T5, A2, A4, A6, A2, b[8], b[10], b[12], 0.0, 0.0)
    matmul_into(A6, T5, T6)
    for i in range(n):
        for j in range(n):
            T6[i, j] += b[6] * A6[i, j] + b[4] * A4[i, j] + b[2] * A2[i, j]
        T6[i, i] += b[0]
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


@njit(types.void(mat, f8, mat, tens), cache=True, _nrt=False)
def exp_phi1_into(A, h, EF, ws):
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
    if A.shape[1] != n or EF.shape[0] != n or EF.shape[1] != 2 * n:
        raise ValueError("exp_phi1_into: A must be n x n and EF n x 2n")
    _check_ws(ws, n)
    if n == 0:
        return
    m, q, s = _phi_prepare(A, h, ws, 2)
    if m < 0:
        _fill(EF, np.nan)
        return
    Z = ws[0]
    P = ws[4]
    _paterson_stockmeyer_into(ws, q, _C_PHI1, m, P, ws[5], ws[6])  # P = phi1(Z)
    E = EF[:, :n]
    gemm_into(Z, P, E, 1.0, 0.0)
    for i in range(n):
        E[i, i] += 1.0                   # E = I + Z phi1(Z) = exp(Z)
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
def exp_phi12_into(A, h, EFF, ws):
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
    if A.shape[1] != n or EFF.shape[0] != n or EFF.shape[1] != 3 * n:
        raise ValueError("exp_phi12_into: A must be n x n and EFF n x 3n")
    _check_ws(ws, n)
    if n == 0:
        return
    m, q, s = _phi_prepare(A, h, ws, 3)
    if m < 0:
        _fill(EFF, np.nan)
        return
    Z = ws[0]
    P = ws[4]
    _paterson_stockmeyer_into(ws, q, _C_PHI2, m, P, ws[5], ws[6])  # P = phi2(Z)
    Q = ws[5]
    gemm_into(Z, P, Q, 1.0, 0.0)
    for i in range(n):
        Q[i, i] += 1.0                   # Q = phi1(Z) = I + Z phi2(Z)
    E = EFF[:, :n]
    gemm_into(Z, Q, E, 1.0, 0.0)
    for i in range(n):
        E[i, i] += 1.0                   # E = exp(Z) = I + Z phi1(Z)
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
