"""The action of the matrix exponential on a block of vectors, for a sparse (CSR) matrix.

``expmv_forced_into`` computes the top block of ``exp(h W) [S; g I; 0]`` for the
block upper-triangular augmented matrix (METHOD.md section 12)::

    W = [[A, B/g, D/g],        A: n x n CSR, B, D: n x p CSR (same pattern)
         [0, 0,   0  ],
         [0, I/h, 0  ]]

that is, the solution at ``h`` of ``Y' = A Y + B + (s/h) D``, ``Y(0) = S``: the
exponential step ``E S + F1 B`` (``D`` absent) and the exponential-midpoint step
``E S + F1 B + (F2/h) D`` without forming ``E``, ``F1`` or ``F2``. The two identity
blocks stay multiples of ``I`` in every Taylor term, so they are carried as two
scalars; a term costs one sparse-times-dense product ``A T`` (``nnz(A) p``
multiply-adds) plus a scatter of ``B``, ``D``.

The algorithm is Al-Mohy and Higham's truncated Taylor series with scaling
(``exp(hW) v = (T_m(hW/s))^s v``), shift and early termination:

* shift ``mu = trace(A)/n`` (taken when it lowers ``||W||_1``): ``exp(hW) =
  e^(h mu) exp(h(W - mu I))``;
* ``(m, s)`` from their Code Fragment 3.1: the ``theta_m`` of their Table 3.1
  (double precision, ``m <= 55``), ``p_max = 8``, and ``d_p`` estimates of
  ``||(hW)^p||_1^(1/p)`` when ``||hW||_1`` is beyond their bound (3.13);
* each of the ``s`` sub-steps stops summing once two consecutive terms are below
  ``u ||F||_inf`` (their Algorithm 3.2).

``||(hW)^p||_1`` is bounded through the block form ``W = [[P, Q], [0, N]]``:
``||W^p||_1 <= max(||P^p||_1, sum_i ||P^i||_1 ||Q||_1 ||N||_1^(p-1-i) + ||N^p||_1)``, with
``||P^i||_1`` from Hager's 1-norm estimator (Higham's refinement, one column) on the
sparse ``A`` alone (``n``-vectors, a few hundred flops per ``nnz``), and ``||Q||_1``,
``||N^k||_1`` exact. The forcing columns are scaled by a power of two ``g`` so that
``||Q||_1`` is at most ``max(||A - mu I||_1, 1/h)`` (their section 2: a large ``B``
would otherwise inflate ``||W||`` and the number of terms).

No allocation inside: the caller passes every work array.

References
----------
A. H. Al-Mohy and N. J. Higham, "Computing the action of the matrix exponential, with
an application to exponential integrators", SIAM J. Sci. Comput. 33(2):488-511, 2011
(Table 3.1, Code Fragment 3.1, Algorithm 3.2).
W. W. Hager, "Condition estimates", SIAM J. Sci. Stat. Comput. 5(2):311-316, 1984;
N. J. Higham, "FORTRAN codes for estimating the one-norm of a real or complex matrix",
ACM TOMS 14(4):381-396, 1988.
"""
import math

import numpy as np
from numba import njit, types

from .signatures import f8, ivec, mat, vec

i8 = types.int64
rvec = types.Array(types.float64, 1, "C", readonly=True)
rivec = types.Array(types.int64, 1, "C", readonly=True)

_U = 2.0 ** -53
#: Taylor degrees m and theta_m of Al-Mohy and Higham (2011), Table 3.1 (double precision):
#: the largest ||hW||_1 / s for which the backward error of T_m stays below 2^-53.
THETA_M = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
                    24, 25, 26, 27, 28, 29, 30, 35, 40, 45, 50, 55], dtype=np.int64)
THETA = np.array([2.29e-16, 2.58e-8, 1.39e-5, 3.40e-4, 2.40e-3, 9.07e-3, 2.38e-2, 5.00e-2, 8.96e-2,
                  1.44e-1, 2.14e-1, 3.00e-1, 4.00e-1, 5.14e-1, 6.41e-1, 7.81e-1, 9.31e-1, 1.09, 1.26,
                  1.44, 1.62, 1.82, 2.01, 2.22, 2.43, 2.64, 2.86, 3.08, 3.31, 3.54, 4.7, 6.0, 7.2, 8.5,
                  9.9])
M_MAX = 55
P_MAX = 8
#: Length of the vector work array of :func:`expmv_forced_into`: ``NV`` rows of ``n``.
NV = 4


# --------------------------------------------------------------------------
# CSR helpers
# --------------------------------------------------------------------------

@njit(f8(ivec, ivec, vec), cache=True, _nrt=False)
def csr_trace(indptr, indices, data):
    """Sum of the diagonal of a square CSR matrix."""
    s = 0.0
    for i in range(indptr.shape[0] - 1):
        for k in range(indptr[i], indptr[i + 1]):
            if indices[k] == i:
                s += data[k]
    return s


@njit(f8(ivec, ivec, vec, f8, vec), cache=True, _nrt=False)
def csr_norm1_shifted(indptr, indices, data, mu, colsum):
    """``||A - mu I||_1`` of a square CSR matrix (``colsum``: work, length n)."""
    n = indptr.shape[0] - 1
    for j in range(n):
        colsum[j] = 0.0
    for i in range(n):
        diag = False
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j == i:
                colsum[j] += abs(data[k] - mu)
                diag = True
            else:
                colsum[j] += abs(data[k])
        if not diag:
            colsum[i] += abs(mu)
    best = 0.0
    for j in range(n):
        if colsum[j] > best or colsum[j] != colsum[j]:
            best = colsum[j]
    return best


@njit(f8(ivec, ivec, vec, vec), cache=True, _nrt=False)
def csr_norm1_rect(indptr, indices, data, colsum):
    """``||B||_1`` (max column sum) of a CSR matrix with ``colsum.shape[0]`` columns."""
    for j in range(colsum.shape[0]):
        colsum[j] = 0.0
    for i in range(indptr.shape[0] - 1):
        for k in range(indptr[i], indptr[i + 1]):
            colsum[indices[k]] += abs(data[k])
    best = 0.0
    for j in range(colsum.shape[0]):
        if colsum[j] > best or colsum[j] != colsum[j]:
            best = colsum[j]
    return best


@njit(types.void(ivec, ivec, vec, mat, mat), cache=True, _nrt=False)
def csr_matmul_into(indptr, indices, data, X, Y):
    """``Y = A X`` for CSR ``A`` (n x n) and dense C-contiguous ``X``, ``Y`` (n x m); no aliasing."""
    n, m = Y.shape
    for i in range(n):
        for j in range(m):
            Y[i, j] = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            a = data[k]
            r = indices[k]
            for j in range(m):
                Y[i, j] += a * X[r, j]


@njit(inline="always")
def _matvec_shifted(indptr, indices, data, mu, x, y):
    """``y = (A - mu I) x`` (``x``, ``y`` may be longer than n; only their first n entries count)."""
    n = indptr.shape[0] - 1
    for i in range(n):
        s = -mu * x[i]
        for k in range(indptr[i], indptr[i + 1]):
            s += data[k] * x[indices[k]]
        y[i] = s


@njit(inline="always")
def _rmatvec_shifted(indptr, indices, data, mu, x, y):
    """``y = (A - mu I)^T x`` (first n entries, as in :func:`_matvec_shifted`)."""
    n = indptr.shape[0] - 1
    for i in range(n):
        y[i] = -mu * x[i]
    for i in range(n):
        xi = x[i]
        for k in range(indptr[i], indptr[i + 1]):
            y[indices[k]] += data[k] * xi


@njit(f8(ivec, ivec, vec, f8, i8, mat), cache=True, _nrt=False)
def norm1_power_estimate(indptr, indices, data, mu, power, V):
    """Estimate ``||(A - mu I)^power||_1`` (a lower bound, usually exact) by Hager's method.

    Higham's (1988) form with one column: start from ``x = 1/n``; ``y = M x``,
    ``z = M^T sign(y)``; stop when ``max |z| <= z^T x``, else restart from the unit
    vector at ``argmax |z|`` (at most 5 rounds, never the same unit vector twice).
    ``V``: work, at least 4 rows of length n.
    """
    n = indptr.shape[0] - 1
    x, y, w = V[0], V[1], V[2]
    for i in range(n):
        x[i] = 1.0 / n
    est = 0.0
    last_j = -1
    for it in range(5):
        # y = M^power x
        for i in range(n):
            y[i] = x[i]
        for q in range(power):
            _matvec_shifted(indptr, indices, data, mu, y, w)
            for i in range(n):
                y[i] = w[i]
        e = 0.0
        for i in range(n):
            e += abs(y[i])
        if e > est:
            est = e
        elif it > 0:
            break
        # z = (M^T)^power sign(y)
        for i in range(n):
            y[i] = 1.0 if y[i] >= 0.0 else -1.0
        for q in range(power):
            _rmatvec_shifted(indptr, indices, data, mu, y, w)
            for i in range(n):
                y[i] = w[i]
        zx = 0.0
        zmax = -1.0
        jmax = 0
        for i in range(n):
            zx += y[i] * x[i]
            if abs(y[i]) > zmax:
                zmax = abs(y[i])
                jmax = i
        if zmax <= zx or jmax == last_j:
            break
        last_j = jmax
        for i in range(n):
            x[i] = 0.0
        x[jmax] = 1.0
    return est


# --------------------------------------------------------------------------
# (m, s) selection: Al-Mohy and Higham (2011), Code Fragment 3.1
# --------------------------------------------------------------------------

@njit(types.UniTuple(i8, 2)(f8, vec), cache=True, _nrt=False)
def select_ms(norm1, d):
    """``(m, s)`` minimising ``m s`` for ``||hW||_1 = norm1``; ``d[p]`` the estimates of
    ``||(hW)^p||_1^(1/p)`` for ``p = 2 .. P_MAX + 1`` (``d[0] < 0``: none, use ``norm1``)."""
    if norm1 == 0.0:
        return 0, 1
    best_m = 0
    best_cost = np.inf                 # in floating point: ceil(norm/theta_1) overflows int64
    best_s = 1.0
    for p in range(2, P_MAX + 1) if d[0] >= 0.0 else range(1, 2):
        alpha = max(d[p], d[p + 1]) if d[0] >= 0.0 else norm1
        for i in range(THETA_M.shape[0]):
            m = THETA_M[i]
            if d[0] >= 0.0 and m < p * (p - 1) - 1:
                continue
            s = np.ceil(alpha / THETA[i])
            c = m * s
            if c < best_cost:
                best_cost, best_m, best_s = c, m, s
    if not best_s < 2.0 ** 62:
        best_s = 2.0 ** 62
    return best_m, max(int(best_s), 1)


@njit(types.boolean(f8, i8), cache=True, _nrt=False)
def _small_norm(norm1, n_cols):
    """Al-Mohy and Higham's bound (3.13) (with l = 2): below it ``||hW||_1`` alone chooses ``(m, s)``."""
    return norm1 <= 4.0 * P_MAX * (P_MAX + 3) * THETA[-1] / (max(n_cols, 1) * M_MAX)


# --------------------------------------------------------------------------
# the action
# --------------------------------------------------------------------------

@njit(types.Tuple((f8, f8, i8, i8))(ivec, ivec, vec, ivec, ivec, vec, vec, types.boolean, f8, i8, mat, vec),
      cache=True, _nrt=False)
def expmv_plan(Ap, Ai, Ad, Bp, Bi, Bd, Dd, has_d, h, n_cols, V, dwork):
    """Shift ``mu``, forcing scale ``g`` and ``(m, s)`` of :func:`expmv_forced_into` (arguments there).

    ``s = 0`` flags a non-finite norm (non-finite ``A``, ``B`` or ``D``). ``m s`` bounds the
    number of products with ``A`` (the march compares it with the dense step's cost).
    ``n_cols``: the number of vectors the plan is for (Al-Mohy and Higham's bound (3.13) depends
    on it); ``||B||_1``, ``||D||_1`` are over all of ``B``'s columns, for which ``V``'s rows must be
    long enough (``V``: ``(NV, max(n, columns of B))``).
    """
    n = Ap.shape[0] - 1
    p = n_cols
    colsum = V[0]
    # shift: take mu = trace/n if it lowers ||A - mu I||_1 (it adds |mu| to the forcing columns)
    mu = csr_trace(Ap, Ai, Ad) / n
    nA0 = csr_norm1_shifted(Ap, Ai, Ad, 0.0, colsum)
    nA = csr_norm1_shifted(Ap, Ai, Ad, mu, colsum)
    if not nA < nA0:
        mu = 0.0
        nA = nA0
    # over all of B's columns (colsum: the whole row, at least B's column count long), also when the
    # plan is for fewer vectors than B has columns (the sparse adjoint's one vector: n_cols = 1)
    nB = csr_norm1_rect(Bp, Bi, Bd, colsum)
    nD = csr_norm1_rect(Bp, Bi, Dd, colsum) if has_d else 0.0
    nF = max(nB, nD)
    target = max(nA, 1.0 / h)
    g = 1.0
    if nF > target:
        g = 2.0 ** math.ceil(math.log2(nF / target))
    ginv = 1.0 / g
    # ||hW'||_1 and the block norms of hW' = [[P, Q], [0, N]]
    hmu = h * abs(mu)
    nP = h * nA
    nQ = h * nF * ginv
    n_n = hmu + (1.0 if has_d else 0.0)          # ||N||_1
    norm1 = max(nP, nQ + n_n)
    n_cols = p
    d = dwork
    d[0] = -1.0
    if norm1 > 0.0 and not _small_norm(norm1, n_cols):
        d[0] = 0.0
        pe = dwork[P_MAX + 2:]             # pe[i] ~ ||P^i||_1, P = h (A - mu I)
        pe[0] = 1.0
        pe[1] = nP
        for i in range(2, P_MAX + 2):
            pe[i] = h ** i * norm1_power_estimate(Ap, Ai, Ad, mu, i, V)
        for q in range(2, P_MAX + 2):
            # ||(hW)^q||_1 <= max(||P^q||, sum_i ||P^i|| ||Q|| ||N^(q-1-i)|| + ||N^q||)
            acc = 0.0
            for i in range(q):
                k = q - 1 - i
                nk = hmu ** k + (k * hmu ** (k - 1) if (has_d and k >= 1) else 0.0)
                acc += pe[i] * nQ * nk
            nq = hmu ** q + (q * hmu ** (q - 1) if has_d else 0.0)
            d[q] = max(pe[q], acc + nq) ** (1.0 / q)
    bad = not norm1 < np.inf
    if d[0] >= 0.0:
        for q in range(2, P_MAX + 2):
            bad = bad or not d[q] < np.inf
    if bad:                                      # non-finite Jacobian or B
        return mu, g, 0, 0
    m, s = select_ms(norm1, d)
    return mu, g, m, s


@njit(types.UniTuple(i8, 2)(ivec, ivec, vec, ivec, ivec, vec, vec, types.boolean, f8, f8, f8, i8, i8, mat, mat,
                            mat, mat), cache=True, _nrt=False)
def expmv_apply(Ap, Ai, Ad, Bp, Bi, Bd, Dd, has_d, h, mu, g, m, s, S, out, T, T2):
    """The Taylor loop of :func:`expmv_forced_into` with the plan ``(mu, g, m, s)`` of :func:`expmv_plan`."""
    n, p = S.shape
    ginv = 1.0 / g
    eta = math.exp(h * mu / s)
    # F (= out) holds the running sum; the identity blocks are the scalars a (u), b (w)
    for i in range(n):
        for j in range(p):
            out[i, j] = S[i, j]
    a = g
    b = 0.0
    terms = 0
    hs = h / s
    for _ in range(s):
        for i in range(n):
            for j in range(p):
                T[i, j] = out[i, j]
        ta = a
        tb = b
        c1 = max(abs(ta), abs(tb))
        for i in range(n):
            for j in range(p):
                c1 = max(c1, abs(T[i, j]))
        for jt in range(1, m + 1):
            coef = hs / jt
            cf = coef * ginv
            fa = cf * ta
            fb = cf * tb
            c2 = 0.0
            fmax = 0.0
            for i in range(n):
                # T2[i] = coef ((A - mu I) T)[i] + coef (a B + b D)[i] / g
                for j in range(p):
                    T2[i, j] = -mu * T[i, j]
                for k in range(Ap[i], Ap[i + 1]):
                    av = Ad[k]
                    r = Ai[k]
                    for j in range(p):
                        T2[i, j] += av * T[r, j]
                for j in range(p):
                    T2[i, j] *= coef
                for k in range(Bp[i], Bp[i + 1]):
                    v = fa * Bd[k]
                    if has_d:
                        v += fb * Dd[k]
                    T2[i, Bi[k]] += v
                for j in range(p):
                    v = T2[i, j]
                    o = out[i, j] + v
                    out[i, j] = o
                    c2 = max(c2, abs(v))
                    fmax = max(fmax, abs(o))
            na = -coef * mu * ta
            nb = 0.0
            if has_d:
                # w' = u/h - mu w, times coef: coef (ta/h - mu tb)
                nb = coef * (ta / h - mu * tb)
            ta, tb = na, nb
            a += ta
            b += tb
            c2 = max(c2, abs(ta), abs(tb))
            fmax = max(fmax, abs(a), abs(b))
            terms += 1
            T, T2 = T2, T
            if c1 + c2 <= _U * fmax:
                break
            c1 = c2
        for i in range(n):
            for j in range(p):
                out[i, j] *= eta
        a *= eta
        b *= eta
    return terms, s


@njit(types.UniTuple(i8, 2)(ivec, ivec, vec, ivec, ivec, vec, vec, types.boolean, f8, mat, mat, mat, mat,
                            mat, vec), cache=True, _nrt=False)
def expmv_forced_into(Ap, Ai, Ad, Bp, Bi, Bd, Dd, has_d, h, S, out, T, T2, V, dwork):
    """``out = exp(hA) S + h phi1(hA) B (+ h phi2(hA) D)``: the top block of ``exp(hW) [S; gI; 0]``.

    Parameters
    ----------
    Ap, Ai, Ad : CSR ``A`` (n x n): row pointers, column indices, values.
    Bp, Bi, Bd : CSR ``B`` (n x p).
    Dd : values of ``D`` (n x p) on the pattern of ``B``; used if ``has_d``.
    h : float, the step (``h >= 0``).
    S : (n, p) dense; out : (n, p), the result (must not alias ``S``).
    T, T2 : (n, p) work; V : (NV, max(n, p)) work; dwork : (2 (P_MAX + 2),) work.

    Returns
    -------
    (terms, s) : the number of Taylor terms summed (sparse products with ``A``) and the
    number of scaling steps. A non-finite ``A``, ``B`` or ``D`` gives ``out = NaN``.
    """
    n, p = S.shape
    if h == 0.0:
        for i in range(n):
            for j in range(p):
                out[i, j] = S[i, j]
        return 0, 0
    mu, g, m, s = expmv_plan(Ap, Ai, Ad, Bp, Bi, Bd, Dd, has_d, h, p, V, dwork)
    if s == 0:
        for i in range(n):
            for j in range(p):
                out[i, j] = np.nan
        return 0, 0
    return expmv_apply(Ap, Ai, Ad, Bp, Bi, Bd, Dd, has_d, h, mu, g, m, s, S, out, T, T2)
