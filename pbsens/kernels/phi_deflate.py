"""Isolated fast modes taken out before scaling and squaring (the phi kernels of :mod:`pbsens.kernels.phi`).

A Jacobian with a few states that decay much faster than everything else (fast linear
reactions: Lang_PLOSComputBiol2024 has ``A_ii = -2.4e7`` and ``-3.8e5`` with the rest of the
spectrum below 500) makes scaling and squaring pay ``log2(h |lambda_fast|)`` doublings
(26-32 there) for a mode whose exponential is 0 to machine precision. With ``B`` the
balanced matrix (``D^-1 A D``, LAPACK's ``gebal`` scaling, powers of 2), a fast state ``p``
whose diagonal dominates the rest, ``|B_pp| >= RATIO ||B_rest||`` in the 1- and inf-norms, is
deflated exactly:

1. its eigenvector ``v`` (``v_p = 1``) and eigenvalue ``lambda`` by the fixed point
   ``v_r <- (B_rr v_r + B_rp) / lambda``, ``lambda <- B_pp + B_pr v_r`` (converges at the rate
   ``||B_rest|| / |lambda| <= 1/RATIO``; ``O(n^2)`` per sweep);
2. the Householder reflector ``H`` with ``H v ~ e_p``: ``H B H = [[lambda, w], [0, B2]]``
   (state ``p`` first), and ``M = H B H`` with row ``p`` set to zero, which leaves ``B2``
   (and the 1x1 block 0) for the plain kernel;
3. after it, for every function ``f`` (``exp``, ``h phi1``, ``h^2 phi2``, ``h^3 phi3`` of ``h .``):
   ``f(H B H)`` is ``f(M)`` with row ``p`` replaced by ``f(lambda)`` on the diagonal and the
   row ``x`` that solves ``x (lambda I - B2) = f(lambda) w - w f(B2)`` (the Sylvester
   relation of a block-triangular ``f``; the same fixed point, on row vectors); then
   ``f(B) = H f(H B H) H`` and ``f(A) = D f(B) D^-1``.

Up to :data:`MAX_FAST` states, fastest first, each on the matrix the previous left; the
plain kernel then needs ``log2(h ||B2||)`` doublings instead of ``log2(h |lambda|)``. A
fixed point that does not converge, or a reflected column that is not ``lambda e_p`` to
rounding, abandons the deflation (the plain kernel on ``A``, as before). Cost per deflated
state: ``O(n^2)`` (about a quarter of one doubling's ``n x n`` by ``n x 3n`` product).

Workspace: slices ``ws[7]`` (the deflated matrix) and ``ws[8]`` (its rows: the scaling, the
reflectors, the rows ``w``, temporaries and the scalars) of :func:`pbsens.kernels.dense.workspace`;
used only for ``n >= MIN_N``.

A study at 9 points of Lang's grid (NumPy prototype, 320-bit reference): relative error
4.5e-14 ... 1.7e-12 against 3e-9 ... 9e-8 for scaling and squaring on ``A`` itself, with
11-16 doublings instead of 27-32 (docs/PERFORMANCE.md, "Lang: where the exp2 pass goes").
"""
import math

import numpy as np
from numba import njit, types

from .signatures import f8, mat, tens

i8 = types.int64

__all__ = ["deflate_prepare", "deflate_finish", "MAX_FAST", "MIN_N", "RATIO", "WS_SLICES"]

#: Most fast states deflated per matrix.
MAX_FAST = 4
#: Smallest matrix that is looked at (the vectors live in the rows of one ``n x n`` slice).
MIN_N = 16
#: A state is deflated when ``|B_pp| >= RATIO`` times the rest's 1- and inf-norms.
RATIO = 8.0
#: Workspace slices the deflation needs (``ws.shape[0]``).
WS_SLICES = 9
#: Fixed-point sweeps at most.
_MAXIT = 60          # 8^-19 < 1e-17: a contraction by <= 1/RATIO converges in ~20 sweeps
#: Floating-point flags of the compiled functions: sums may be reassociated, so that the O(n^2)
#: dot products and norms vectorise instead of waiting on one accumulator (no flag that changes
#: what NaN or Inf do: the kernels' non-finite checks keep working).
_SUMS = {"reassoc", "contract"}
# ws[8] rows
_R_D = 0            # the balancing scale d (B = D^-1 A D)
_R_U = 1            # rows 1 .. MAX_FAST: the reflectors u_j
_R_W = 1 + MAX_FAST     # the rows w_j
_R_T = 1 + 2 * MAX_FAST     # three temporaries
_R_S = 4 + 2 * MAX_FAST     # scalars: p_j, lambda_j, beta_j (3 MAX_FAST entries)


@njit(types.void(mat, mat, types.float64[::1], types.float64[::1], types.float64[::1]), cache=True, _nrt=False,
      fastmath=_SUMS)
def balance_into(A, B, d, C2, R2):
    """``B = D^-1 A D`` with ``d = diag(D)`` powers of 2, LAPACK ``dgebal``'s scaling (no
    permutation; 2-norms of the whole row and column, the diagonal included, as LAPACK 3.5+).

    The squared column and row norms are kept in ``C2`` and ``R2`` (work, length ``n``): summed
    row by row at the start of each sweep (contiguous, vectorised) and updated by each scaling,
    instead of a strided column sum per state. The max-norms that LAPACK's under/overflow
    guards also use are bounded below by ``norm / sqrt(n)`` and summed only where that bound is
    within ``2^-900`` of underflow, which leaves every decision as LAPACK's but for rounding.
    """
    n = A.shape[0]
    un = np.uint64(n)
    for i in range(n):
        d[i] = 1.0
        for j in range(n):
            B[i, j] = A[i, j]
    sfmin1 = 2.2250738585072014e-308 / 2.220446049250313e-16
    sfmax1 = 1.0 / sfmin1
    sfmin2 = sfmin1 * 2.0
    sfmax2 = 1.0 / sfmin2
    tiny = 2.0 ** -900
    rn = 1.0 / math.sqrt(max(n, 1))
    noconv = True
    sweeps = 0
    while noconv and sweeps < 100:
        noconv = False
        sweeps += 1
        for j in range(un):
            C2[j] = 0.0
        for i in range(n):
            row = B[i]
            r = 0.0
            for j in range(un):
                v = row[j]
                r += v * v
                C2[j] += v * v
            R2[i] = r
        for i in range(n):
            c = math.sqrt(max(C2[i], 0.0))
            r = math.sqrt(max(R2[i], 0.0))
            if c == 0.0 or r == 0.0:
                continue
            ca = c * rn                  # lower bounds of the max-norms (exact only near underflow)
            ra = r * rn
            if ca <= tiny or ra <= tiny:
                ca = 0.0
                ra = 0.0
                for k in range(n):
                    ca = max(ca, abs(B[k, i]))
                    ra = max(ra, abs(B[i, k]))
            g = r / 2.0
            f = 1.0
            s = c + r
            while c < g and max(f, max(c, ca)) < sfmax2 and min(r, min(g, ra)) > sfmin2:
                f *= 2.0
                c *= 2.0
                ca *= 2.0
                r /= 2.0
                g /= 2.0
                ra /= 2.0
            g = c / 2.0
            while g >= r and max(r, ra) < sfmax2 and min(min(f, c), min(g, ca)) > sfmin2:
                f /= 2.0
                c /= 2.0
                g /= 2.0
                ca /= 2.0
                r *= 2.0
                ra *= 2.0
            if c + r >= 0.95 * s:
                continue
            if f < 1.0 and d[i] < 1.0 and f * d[i] <= sfmin1:
                continue
            if f > 1.0 and d[i] > 1.0 and d[i] >= sfmax1 / f:
                continue
            d[i] *= f
            noconv = True
            bii = B[i, i]
            up = f * f - 1.0             # column i times f: the rows' squared norms grow by b^2 (f^2 - 1)
            down = 1.0 / (f * f) - 1.0   # row i over f: the columns' shrink by b^2 (1 - 1/f^2)
            row = B[i]
            for k in range(un):
                v = row[k]
                C2[k] += v * v * down
                row[k] = v / f
            for k in range(n):
                v = B[k, i]
                R2[k] += v * v * up
                B[k, i] = v * f
            B[i, i] = bii                # (state i's own norms are not read again this sweep)


@njit(inline="always")
def _rest_norm(M, p):
    """``max(||M_rest||_1, ||M_rest||_inf)`` of ``M`` without row and column ``p``."""
    n = M.shape[0]
    best = 0.0
    for i in range(n):
        if i == p:
            continue
        rs = 0.0
        cs = 0.0
        for j in range(n):
            if j != p:
                rs += abs(M[i, j])
                cs += abs(M[j, i])
        best = max(best, max(rs, cs))
    return best


@njit(inline="always")
def _reflect_block(F, c0, u, beta, t1, t2):
    """``F[:, c0:c0+n] = H F[:, c0:c0+n] H`` with ``H = I - beta u u^T`` (``c0 = 0`` on an
    ``n x n`` matrix: ``F = H F H``)."""
    n = u.shape[0]
    un = np.uint64(n)                    # unsigned column indices: no wraparound test, the loops vectorise
    uc = np.uint64(c0)
    for j in range(un):
        t1[j] = 0.0
    for i in range(n):
        ui = u[i]
        if ui != 0.0:
            row = F[i]
            for j in range(un):
                t1[j] += ui * row[uc + j]
    for i in range(n):
        bu = beta * u[i]
        row = F[i]
        if bu != 0.0:
            for j in range(un):
                row[uc + j] -= bu * t1[j]
        s = 0.0
        for j in range(un):
            s += row[uc + j] * u[j]
        bt = beta * s
        for j in range(un):
            row[uc + j] -= bt * u[j]


@njit(i8(mat, f8, tens), cache=True, _nrt=False, fastmath=_SUMS)
def deflate_prepare(A, h, ws):
    """Balance ``A`` and deflate its isolated fast states into ``ws[7]`` (see the module
    docstring); returns how many were deflated (0: use the plain kernel on ``A``)."""
    n = A.shape[0]
    if (n < MIN_N or A.shape[1] != n or ws.shape[0] < WS_SLICES or ws.shape[1] != n or ws.shape[2] != n
            or not h > 0.0 or not math.isfinite(h)):
        return 0                         # (a wrong shape is the plain kernel's error to raise)
    # a fast state must exist at all before anything O(n^2) is done
    big = 0.0
    for i in range(n):
        big = max(big, -A[i, i])
    if not h * big >= 64.0:
        return 0
    M = ws[7]
    V = ws[8]
    d = V[_R_D]
    balance_into(A, M, d, V[_R_T], V[_R_T + 1])
    t1 = V[_R_T]
    t2 = V[_R_T + 1]
    v = V[_R_T + 2]
    sc = V[_R_S]
    k = 0
    while k < MAX_FAST:
        # the most negative diagonal entry not yet deflated (deflated rows and columns are zero)
        p = -1
        lam = 0.0
        for i in range(n):
            if M[i, i] < lam:
                lam = M[i, i]
                p = i
        if p < 0 or not h * (-lam) >= 64.0:
            break
        rest = _rest_norm(M, p)
        if not -lam >= RATIO * rest:
            break
        # eigenvector v (v_p = 1) and eigenvalue by the fixed point
        for i in range(n):
            v[i] = 0.0
        v[p] = 1.0
        ok = False
        for _ in range(_MAXIT):
            dv = 0.0
            vmax = 1.0
            for i in range(n):
                if i == p:
                    continue
                s = M[i, p]
                for j in range(n):
                    if j != p:
                        s += M[i, j] * v[j]
                t1[i] = s / lam
            for i in range(n):
                if i != p:
                    dv = max(dv, abs(t1[i] - v[i]))
                    v[i] = t1[i]
                    vmax = max(vmax, abs(v[i]))
            s = M[p, p]
            for j in range(n):
                if j != p:
                    s += M[p, j] * v[j]
            lam = s
            if dv <= 1e-17 * vmax:
                ok = True
                break
        if not ok or not lam < 0.0:
            return 0
        # reflector u with H v = alpha e_p
        nv = 0.0
        for i in range(n):
            nv += v[i] * v[i]
        nv = math.sqrt(nv)
        alpha = -nv                      # v_p = 1 > 0
        u = V[_R_U + k]
        for i in range(n):
            u[i] = v[i]
        u[p] -= alpha
        uu = 0.0
        for i in range(n):
            uu += u[i] * u[i]
        beta = 2.0 / uu
        _reflect_block(M, 0, u, beta, t1, t2)
        # column p must be lambda e_p to rounding
        scale = abs(lam)
        for i in range(n):
            if i != p and not abs(M[i, p]) <= 1e-12 * scale:
                return 0
        w = V[_R_W + k]
        for j in range(n):
            w[j] = M[p, j]
            M[j, p] = 0.0
            M[p, j] = 0.0
        w[p] = 0.0
        sc[3 * k] = p
        sc[3 * k + 1] = lam
        sc[3 * k + 2] = beta
        k += 1
    return k


@njit(inline="always")
def _scalar_f(z, h, b):
    """Block ``b`` of the kernels at the scalar ``z = h lambda`` (``z <= -64``): ``exp(z)``,
    ``h phi1(z)``, ``h^2 phi2(z)``, ``h^3 phi3(z)``."""
    e = math.exp(z)
    if b == 0:
        return e
    p1 = (e - 1.0) / z
    if b == 1:
        return h * p1
    p2 = (p1 - 1.0) / z
    if b == 2:
        return h * h * p2
    return h * h * h * (p2 - 0.5) / z


@njit(types.void(mat, f8, tens, i8, i8), cache=True, _nrt=False, fastmath=_SUMS)
def deflate_finish(out, h, ws, k, blocks):
    """Undo :func:`deflate_prepare` on ``out = [f_0(M) | ... | f_(blocks-1)(M)]`` (the plain
    kernel's result on ``ws[7]``): the rows of the fast states, the reflections and the
    balancing, in place; ``ws[7]`` goes back to the balanced matrix."""
    n = out.shape[0]
    M = ws[7]
    V = ws[8]
    d = V[_R_D]
    t1 = V[_R_T]
    t2 = V[_R_T + 1]
    x = V[_R_T + 2]
    sc = V[_R_S]
    un = np.uint64(n)                    # unsigned column indices: no wraparound test, the loops vectorise
    for jj in range(k - 1, -1, -1):
        p = int(sc[3 * jj])
        lam = sc[3 * jj + 1]
        beta = sc[3 * jj + 2]
        u = V[_R_U + jj]
        w = V[_R_W + jj]
        for b in range(blocks):
            c0 = b * n
            uc = np.uint64(c0)
            fl = _scalar_f(h * lam, h, b)
            # rhs = f(lambda) w - w f(M); x (lambda I - M) = rhs by x <- (rhs + x M) / lambda
            for j in range(un):
                t2[j] = fl * w[j]
            for i in range(n):
                wi = w[i]
                if wi != 0.0:
                    row = out[i]
                    for j in range(un):
                        t2[j] -= wi * row[uc + j]
            t2[p] = 0.0
            for j in range(un):
                x[j] = t2[j] / lam
            for _ in range(_MAXIT):
                for j in range(un):
                    t1[j] = t2[j]
                for i in range(n):
                    xi = x[i]
                    if xi != 0.0:
                        row = M[i]
                        for j in range(un):
                            t1[j] += xi * row[j]
                dx = 0.0
                xmax = 0.0
                for j in range(n):
                    nxt = t1[j] / lam if j != p else 0.0
                    dx = max(dx, abs(nxt - x[j]))
                    x[j] = nxt
                    xmax = max(xmax, abs(nxt))
                if dx <= 1e-17 * xmax:
                    break
            for j in range(n):
                out[p, c0 + j] = x[j]
            out[p, c0 + p] = fl
            _reflect_block(out, c0, u, beta, t1, t2)
        # M back to the matrix before this deflation: row p = (lambda at p, w), then H M H
        for j in range(n):
            M[p, j] = w[j]
        M[p, p] = lam
        _reflect_block(M, 0, u, beta, t1, t2)
    for j in range(un):
        t1[j] = 1.0 / d[j]               # powers of 2: exact
    for b in range(blocks):
        uc = np.uint64(b * n)
        for i in range(n):
            di = d[i]
            row = out[i]
            for j in range(un):
                row[uc + j] *= di * t1[j]
