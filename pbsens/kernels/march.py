"""The march over the state solver's grid: Algorithms 1-3 of the paper (METHOD.md section 5).

One kernel, :func:`march`, does every method. Per grid interval ``[t_k, t_k+1]`` it
evaluates ``A``, ``B`` at the new grid point (once: the left end was evaluated by
the previous interval), decides the branch, and advances ``S`` in place:

=========  ====================================================================
method     per interval
=========  ====================================================================
exp        exponential step (3.10) with ``A_k``, ``B_k``           (Algorithm 3)
exp2       exponential-midpoint step with ``(A_k + A_k+1)/2``     (second order)
pbs        ``n_int = ceil(n_factor h ||A_k||)`` PBS steps (4.6)   (Algorithm 1)
pbsr       PBS refinement, or the exponential step when ``n_int > n_max``
           ("exp-stiff") or the Jacobians are constant ("exp-equilibrium")
                                                                  (Algorithm 2)
pbsr2      as pbsr, with the exp2 step in place of the exponential step
=========  ====================================================================

States at refinement points come from linear interpolation (the paper), cubic
Hermite interpolation with ``f(x_k)``, ``f(x_k+1)`` (third order, two extra
right-hand-side evaluations per refined interval), or precomputed states (the
solver's dense output, planned by :func:`plan`).

All work arrays are allocated once per call; nothing is allocated per step.
The model's ``jacs_into``/``rhs_into`` arrive as first-class functions, so the
kernel is compiled once per machine (``cache=True``), not once per model.
"""
import math

import numpy as np
from numba import njit, types
from numba.core.typing.typeof import typeof_impl

from . import linalg, steps
from .midpoint import exp2_correct_into
from .phi import exp_phi123_into
from .blas import gemm_into
from .codes import (BRANCH_EQUILIBRIUM, BRANCH_EXP, BRANCH_EXP2, BRANCH_PBS, BRANCH_STIFF,  # noqa: F401
                    INTERP_CODES, INTERP_DENSE, INTERP_HERMITE, METHOD_CODES, METHOD_EXP, METHOD_EXP2,
                    METHOD_PBS, METHOD_PBSR2, NORM_SCALED)
from .signatures import f8, i8vec, ivec, jacs_fn, jacs_fn_sig, mat, njit_quiet, tens, vec, vector_fn, vector_fn_sig
from .views import flat
from ..errors import PbsensError, SolverError

#: Default bound on the total number of PBS sub-steps of one march (``max_substeps``).
MAX_SUBSTEPS = 10_000_000


def check_max_substeps(v):
    """Validate the ``max_substeps`` option (a positive integer)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise PbsensError(f"'max_substeps' must be a positive integer, got {v!r}")
    return int(min(v, 2 ** 62))

__all__ = ["METHOD_CODES", "INTERP_CODES", "BRANCH_PBS", "BRANCH_EQUILIBRIUM", "BRANCH_STIFF",
           "BRANCH_EXP", "BRANCH_EXP2", "march", "plan", "bind"]

i8 = types.int64

# Slots of the work arrays of _march_loop (allocated by march; numba folds these module constants
# into the compiled code). Grid points k and k+1 alternate in slots 0 and 1 of Ag and SB
# (g = k % 2 and 1 - g).
#: ``SB``: ``[S; B]`` stacked, ``2 nx x np``: slots 0 and 1 alternate, ``SB_CQ`` is work of the
#: midpoint correction. ``N_SB`` slots.
SB_CQ = 2
N_SB = 3
#: ``Wn``, ``nx x nx`` work matrices. ``WN_AS0``, ``WN_AS1``: the Jacobians ``A`` at refinement
#: points (two alternating slots); ``WN_PBS0``, ``WN_PBS1``: work of a PBS sub-step; ``WN_PF``:
#: ``Pf`` of the last PBS sub-step; ``WN_ABAR``: ``(A_k + A_k+1)/2``; ``WN_AC``: the matrix the
#: cached ``E``, ``F`` (``F2``, ``F3``) belong to; ``WN_AE``: ``A`` at the end of a refined gap
#: (freezing, exp2); ``WN_AGAP``: ``(A_a + A_e)/2`` of a frozen gap; ``WN_AM``: ``A`` at the
#: midpoint (midpoint correction); ``WN_DW``, ``WN_DMW``: the correction's work.
WN_AS0, WN_AS1, WN_PBS0, WN_PBS1, WN_PF, WN_ABAR, WN_AC, WN_AE, WN_AGAP, WN_AM, WN_DW, WN_DMW = range(12)
N_WN = 12
#: ``Wp``, ``nx x np`` work matrices. ``WP_BS0``, ``WP_BS1``: ``B`` at refinement points;
#: ``WP_PBB``: ``Pb B_k+1`` of the last PBS sub-step; ``WP_PBS``: work of a PBS sub-step;
#: ``WP_BE``: ``B`` at the end of a refined gap; ``WP_FC``: ``G1 B_k + G2 B_k+1`` of the cached
#: matrix functions (exp2) for ``B_k``, ``B_k+1`` in ``WP_BC0``, ``WP_BC1``; ``WP_BM``: ``B`` at
#: the midpoint; ``WP_RW``, ``WP_MW``: the correction's work.
WP_BS0, WP_BS1, WP_PBB, WP_PBS, WP_BE, WP_FC, WP_BC0, WP_BC1, WP_BM, WP_RW, WP_MW = range(11)
N_WP = 11
#: ``V``, vectors of length ``nx``: the state at a refinement point, column sums of the reuse
#: test's 1-norm, ``f(x_k)`` and ``f(x_k+1)`` (Hermite interpolation).
V_XS, V_COLSUM, V_FK, V_FK1 = range(4)
N_V = 4


@njit(f8(mat, mat, i8, vec), cache=True, _nrt=False)
def _norm_diff(X, Y, kind, colsum):
    """``||X - Y||`` in the norm ``kind`` (see :func:`linalg.matrix_norm`) without a temporary.

    ``colsum`` (length ``>= X.shape[1]``) is work space for the 1-norm, whose
    column sums are accumulated row by row (contiguous, unlike a column walk).
    """
    n, m = X.shape
    if kind == 2:
        x, y = flat(X), flat(Y)
        s = 0.0
        for i in range(x.shape[0]):
            d = x[i] - y[i]
            s += d * d
        return math.sqrt(s)
    best = 0.0
    if kind == 0:
        for j in range(m):
            colsum[j] = 0.0
        for i in range(n):
            for j in range(m):
                colsum[j] += abs(X[i, j] - Y[i, j])
        for j in range(m):
            best = max(best, colsum[j])
    else:
        for i in range(n):
            s = 0.0
            for j in range(m):
                s += abs(X[i, j] - Y[i, j])
            best = max(best, s)
    return best


@njit(f8(mat, i8, vec), cache=True, _nrt=False)
def _norm(X, kind, colsum):
    """``||X||`` in the norm ``kind``; the 1-norm row by row in ``colsum`` (``linalg.norm1_rowwise``)."""
    if kind == 0:
        return linalg.norm1_rowwise(X, colsum)
    return linalg.matrix_norm(X, kind)


@njit(types.boolean(mat, mat), cache=True, _nrt=False)
def _finite_copy(X, Y):
    """Copy ``X`` into ``Y``; return whether every entry is finite.

    ``x - x`` is 0 for finite ``x`` and NaN otherwise; the flag is an integer OR
    without an early exit, so the loop vectorises (an early ``return`` on the
    first non-finite entry does not).
    """
    x, y = flat(X), flat(Y)
    bad = 0
    for i in range(x.shape[0]):
        v = x[i]
        y[i] = v
        bad |= (v - v) != 0.0
    return bad == 0


@njit(types.boolean(mat, mat), cache=True, _nrt=False)
def _same(X, Y):
    """Whether ``X`` and ``Y`` are equal entry by entry (stops at the first difference)."""
    x, y = flat(X), flat(Y)
    for i in range(x.shape[0]):
        if x[i] != y[i]:
            return False
    return True


@njit(types.boolean(mat, f8, mat, f8, f8, f8), cache=True, _nrt=False)
def _reusable(X, h, Xc, hc, norm_c, tol):
    """Whether ``(X, h)`` is within ``tol`` (relative) of the cached ``(Xc, hc)``.

    Sufficient test for ``||X - Xc||_1 <= tol ||Xc||_1`` (``norm_c``) and
    ``|h - hc| <= tol |hc|``: every entry differs by at most ``tol ||Xc||_1 / n``
    (stops at the first entry that does not). ``tol = 0`` asks for equality.
    """
    if not abs(h - hc) <= tol * abs(hc):     # written so that NaN is "not reusable"
        return False
    thr = tol * norm_c / X.shape[0]
    x, xc = flat(X), flat(Xc)
    for i in range(x.shape[0]):
        if not abs(x[i] - xc[i]) <= thr:
            return False
    return True


@njit(f8(mat, vec, f8, vec), cache=True, _nrt=False)
def _norm_scaled(A, x, atol, colsum):
    """``||D^-1 A D||_1`` with ``D = diag(|x| + atol)``, row by row (no temporary).

    Invariant under rescaling a state (unit conversions), unlike ``||A||_1``.
    """
    n, m = A.shape
    for j in range(m):
        colsum[j] = 0.0
    for i in range(n):
        w = 1.0 / (abs(x[i]) + atol)
        for j in range(m):
            colsum[j] += abs(A[i, j]) * w
    best = 0.0
    for j in range(m):
        best = max(best, colsum[j] * (abs(x[j]) + atol))
    return best


@njit(types.boolean(mat, mat, f8), cache=True, _nrt=False)
def _close(X, Xc, thr):
    """Whether every entry of ``X`` is within ``thr`` of ``Xc`` (NaN: not); no early exit, so it vectorises."""
    x, xc = flat(X), flat(Xc)
    bad = 0
    for i in range(x.shape[0]):
        bad |= not abs(x[i] - xc[i]) <= thr
    return bad == 0


@njit(f8(mat), cache=True, _nrt=False)
def _max_abs(X):
    x = flat(X)
    m = 0.0
    for i in range(x.shape[0]):
        m = max(m, abs(x[i]))
    return m


@njit(types.void(mat, mat, mat, mat), cache=True, _nrt=False)
def _exp2_forcing_into(EG, Bk, Bk1, Fc):
    """``Fc = G1 B_k + G2 B_k+1`` of ``EG = [E | G1 | G2]``: the exp2 step's forcing term."""
    nx = Bk.shape[0]
    gemm_into(EG[:, nx:2 * nx], Bk, Fc, 1.0, 0.0)
    gemm_into(EG[:, 2 * nx:], Bk1, Fc, 1.0, 1.0)


@njit(types.void(mat, mat, mat, mat), cache=True, _nrt=False)
def _exp2_step_with_forcing(EG, Sk, Fc, S_next):
    """``S_next = E S_k + Fc``: the exp2 step with its forcing term given."""
    nx = Sk.shape[0]
    linalg.copy_into(Fc, S_next)
    gemm_into(EG[:, :nx], Sk, S_next, 1.0, 1.0)


@njit(types.void(mat, mat), cache=True, _nrt=False)
def _copy_cols(src, dst):
    """``dst = src[:, :dst.shape[1]]``."""
    for i in range(dst.shape[0]):
        for j in range(dst.shape[1]):
            dst[i, j] = src[i, j]


@njit(f8(mat, f8, types.boolean, types.boolean, mat, mat, mat, tens, mat, vec), cache=True, _nrt=False)
def _matrix_functions(key, h, corrected, second_order, EF, EFF, EF3, ws, Ac, colsum):
    """The exponential step's matrix functions of ``key`` over ``h``, as the step uses them:
    ``[E | F1 | F2 | F3]`` into ``EF3`` and ``[E | G1 | G2]`` into ``EFF`` (``corrected``: the midpoint
    correction needs ``F3``), ``[E | G1 | G2]`` (``second_order``) or ``[E | F]`` into ``EF``; ``key`` is
    copied into ``Ac`` (what the functions belong to, for ``_reusable``). Returns ``||key||_1``
    (``colsum``: work). Shared by the forward march and its transpose (:mod:`.adjoint`)."""
    if corrected:
        exp_phi123_into(key, h, EF3, ws)
        _copy_cols(EF3, EFF)
        steps.exp2_prepare_inplace(EFF, h)
    elif second_order:
        linalg.exp_phi12_into(key, h, EFF, ws)
        steps.exp2_prepare_inplace(EFF, h)
    else:
        linalg.exp_phi1_into(key, h, EF, ws)
    linalg.copy_into(key, Ac)
    return linalg.norm1_rowwise(key, colsum)


@njit(types.UniTuple(i8, 2)(mat, mat, mat, mat, f8, i8, f8, i8, f8, i8, vec, vec, f8), cache=True, _nrt=False)
def _decide(A0, A1, B0, B1, h, method, n_factor, n_max, eq_tol, norm_kind, colsum, x0, scale_atol):
    """Branch and number of sub-intervals for one grid interval (Algorithm 2's switch).

    ``colsum``: work vector of length ``>= max(nx, np)``. ``x0``, ``scale_atol``: the
    state at ``t_k`` and the absolute term of ``D`` for the scaled norm (``NORM_SCALED``,
    which sizes ``n_int``; the equilibrium test then uses the 1-norm).
    """
    if method == METHOD_EXP:
        return BRANCH_EXP, 1
    if method == METHOD_EXP2:
        return BRANCH_EXP2, 1
    if norm_kind == NORM_SCALED:
        c = n_factor * h * _norm_scaled(A0, x0, scale_atol, colsum)
        norm_kind = 0
        nA = _norm(A0, norm_kind, colsum)
    else:
        nA = _norm(A0, norm_kind, colsum)
        c = n_factor * h * nA
    n = 1
    if c > 1.0:
        n = int(math.ceil(c)) if c < 9.0e18 else 9 * 10 ** 18
    if method == METHOD_PBS:
        return BRANCH_PBS, n
    if n > n_max:
        return BRANCH_STIFF, 1
    if (_norm_diff(A1, A0, norm_kind, colsum) < eq_tol * nA
            and _norm_diff(B1, B0, norm_kind, colsum) < eq_tol * _norm(B0, norm_kind, colsum)):
        return BRANCH_EQUILIBRIUM, 1
    return BRANCH_PBS, n


@njit_quiet(types.void(jacs_fn, vec, types.Array(types.float64, 2, "C"), vec, vec, i8, f8, i8, f8, i8, i8vec, ivec, f8),
      cache=True)
def plan(jacs, t, X, p, c, method, n_factor, n_max, eq_tol, norm_kind, branch, n_int, scale_atol):
    """Fill ``branch`` and ``n_int`` per interval without marching (for dense-output refinement)."""
    K, nx = X.shape
    np_ = p.shape[0]
    Ag = np.empty((2, nx, nx))
    Bg = np.empty((2, nx, np_))
    colsum = np.empty(max(nx, np_))
    jacs(t[0], X[0], p, c, Ag[0], Bg[0])
    for k in range(K - 1):
        g = k % 2
        jacs(t[k + 1], X[k + 1], p, c, Ag[1 - g], Bg[1 - g])
        b, n = _decide(Ag[g], Ag[1 - g], Bg[g], Bg[1 - g], t[k + 1] - t[k], method, n_factor, n_max,
                       eq_tol, norm_kind, colsum, X[k], scale_atol)
        branch[k] = b
        n_int[k] = n


@njit_quiet(i8(jacs_fn, vector_fn, vec, mat, vec, vec, mat, ivec, i8, f8, i8, f8, i8, i8, mat, ivec, i8,
         f8, tens, i8vec, ivec, i8vec, tens, tens, tens, tens, mat, vec, mat, mat, mat, tens, f8, i8, ivec, f8, mat,
         ivec), cache=True, _nrt=False)
def _march_loop(jacs, rhs, t, X, p, c, S, out_index, method, n_factor, n_max, eq_tol, norm_kind,
                interp, X_sub, sub_offset, planned, reuse_tol, S_out, branch, n_int, reused,
                Ag, SB, Wn, Wp, V, cs, EF, EFF, EF3, ws, scale_atol, max_substeps, gap_end, freeze, X_mid, mid_index):
    """The body of :func:`march`, given its work arrays (no allocation, no reference counting)."""
    K, nx = X.shape
    # views of the work slots (names: the WN_*, WP_*, V_* constants), taken once
    As0, As1 = Wn[WN_AS0], Wn[WN_AS1]
    Bs0, Bs1 = Wp[WP_BS0], Wp[WP_BS1]
    W0, W1 = Wn[WN_PBS0], Wn[WN_PBS1]
    W2 = Wn[WN_PF]                   # Pf of the last PBS sub-step
    T0 = Wp[WP_PBB]                  # Pb B_k+1 of the last PBS sub-step
    T1 = Wp[WP_PBS]
    Abar = Wn[WN_ABAR]
    Ac = Wn[WN_AC]                   # the matrix the cached E, F (F2) belong to ...
    Ae = Wn[WN_AE]                   # A at the end of the refined gap (freezing, exp2)
    Agap = Wn[WN_AGAP]               # (A_a + A_e)/2 of a frozen gap
    Be = Wp[WP_BE]                   # B at the end of the refined gap
    Fc = Wp[WP_FC]                   # G1 B_k + G2 B_k+1 of the cached matrix functions (exp2) ...
    Bc0, Bc1 = Wp[WP_BC0], Wp[WP_BC1]   # ... for these B_k, B_k+1
    Am, Dw, Dmw = Wn[WN_AM], Wn[WN_DW], Wn[WN_DMW]   # midpoint correction (exp2): A at the midpoint, work
    Bm, Rw, Mw = Wp[WP_BM], Wp[WP_RW], Wp[WP_MW]
    CQ = SB[SB_CQ]
    xs, colsum, fk, fk1 = V[V_XS], V[V_COLSUM], V[V_FK], V[V_FK1]
    # the state carried from interval to interval (besides S):
    # the cached matrix functions (E, F in EF; [E | G1 | G2] in EFF; F3 in EF3) ...
    have_exp = False                 # ... exist,
    hc = 0.0                         # ... belong to the step hc and the matrix Ac (1-norm norm_c),
    norm_c = 0.0
    have_f3 = False                  # ... include F3 (in EF3);
    have_fc = False                  # the forcing term Fc exists, for B_k, B_k+1 within thr0, thr1 of Bc0, Bc1;
    thr0 = 0.0
    thr1 = 0.0
    frozen = False                   # the matrix is frozen over the current refined gap (Agap)

    Ag0, Ag1 = Ag[0], Ag[1]
    SB0, SB1 = SB[0], SB[1]
    S_0, B_0 = SB0[:nx], SB0[nx:]    # views, taken once
    S_1, B_1 = SB1[:nx], SB1[nx:]
    total = np.int64(0)              # PBS sub-steps taken so far (bounded by max_substeps)
    linalg.copy_into(S, S_0)
    jacs(t[0], X[0], p, c, Ag0, B_0)
    if out_index[0] >= 0:
        linalg.copy_into(S, S_out[out_index[0]])
    for k in range(K - 1):
        g = k % 2
        if g == 0:
            A0, A1, SBk = Ag0, Ag1, SB0
            B0, B1, Sk, Sk1 = B_0, B_1, S_0, S_1
        else:
            A0, A1, SBk = Ag1, Ag0, SB1
            B0, B1, Sk, Sk1 = B_1, B_0, S_1, S_0
        jacs(t[k + 1], X[k + 1], p, c, A1, B1)
        h = t[k + 1] - t[k]
        if planned == 1:
            b = np.int64(branch[k])
            n = np.int64(n_int[k])
        else:
            b, n = _decide(A0, A1, B0, B1, h, method, n_factor, n_max, eq_tol, norm_kind, cs, X[k], scale_atol)
            branch[k] = b
            n_int[k] = n
        reused[k] = 0
        if b == BRANCH_PBS:
            if n > max_substeps - total:     # the work bound: checked before refining the interval
                return -2 - k
            total += n
            hs = h / n
            if interp == INTERP_HERMITE and n > 1:
                rhs(t[k], X[k], p, c, fk)
                rhs(t[k + 1], X[k + 1], p, c, fk1)
            Ap, Bp = A0, B0
            # W2 = Pf and T0 = Pb B of the last sub-step; valid for the next one
            # if both have equal Jacobians at their two ends (then all four agree).
            # Sub-steps are compared only when the interval's ends agree (cheap gate:
            # the comparisons cost ~0.3 us per sub-step on PKA, where they never match).
            const_prev = False
            check = _same(A0, A1) and _same(B0, B1)
            for i in range(1, n + 1):
                if i == n:                   # the last sub-step ends at the grid point
                    An, Bn = A1, B1
                else:
                    s = i / n
                    if interp == INTERP_DENSE:
                        r = sub_offset[k] + i - 1
                        for j in range(nx):
                            xs[j] = X_sub[r, j]
                    elif interp == INTERP_HERMITE:
                        s2 = s * s
                        s3 = s2 * s
                        h00 = 2.0 * s3 - 3.0 * s2 + 1.0
                        h10 = (s3 - 2.0 * s2 + s) * h
                        h01 = -2.0 * s3 + 3.0 * s2
                        h11 = (s3 - s2) * h
                        for j in range(nx):
                            xs[j] = h00 * X[k, j] + h10 * fk[j] + h01 * X[k + 1, j] + h11 * fk1[j]
                    else:
                        for j in range(nx):
                            xs[j] = X[k, j] + s * (X[k + 1, j] - X[k, j])
                    if i % 2 == 0:
                        An, Bn = As0, Bs0
                    else:
                        An, Bn = As1, Bs1
                    jacs(t[k] + i * hs, xs, p, c, An, Bn)
                const = check and _same(Ap, An) and _same(Bp, Bn)
                if const and const_prev:
                    steps.pbs_apply(W2, T0, Bp, hs, Sk, T1)
                    reused[k] = 1
                else:
                    steps.pbs_step(Ap, An, Bp, Bn, hs, Sk, W0, W1, W2, T0, T1)
                const_prev = const
                Ap, Bp = An, Bn
            linalg.copy_into(Sk, Sk1)
        else:
            # exponential step: (3.10) with A_k, or exp2 with (A_k + A_k+1)/2; the matrix
            # exponentiated is the key under which E, F (F2) are reused
            second_order = method == METHOD_EXP2 or method == METHOD_PBSR2
            e = gap_end[k]
            if method == METHOD_EXP2 and e != k + 1 and (k == 0 or gap_end[k - 1] != e):
                # first interval of a refined gap [t_k, t_e]: freeze the matrix over the gap where the
                # change of A S is at most the change of B (METHOD.md section 13)
                jacs(t[e], X[e], p, c, Ae, Be)
                dA = _norm_diff(Ae, A0, 2, cs)
                frozen = freeze == math.inf or dA * linalg.matrix_norm(Sk, 2) <= freeze * _norm_diff(Be, B0, 2, cs)
                if frozen:
                    a0, ae, ag = flat(A0), flat(Ae), flat(Agap)
                    for i in range(ag.shape[0]):
                        ag[i] = 0.5 * (a0[i] + ae[i])
            elif e == k + 1:
                frozen = False
            if second_order and frozen:
                key = Agap
            elif second_order:
                a0, a1, abar = flat(A0), flat(A1), flat(Abar)
                for i in range(abar.shape[0]):
                    abar[i] = 0.5 * (a0[i] + a1[i])
                key = Abar
            else:
                key = A0
            corrected = method == METHOD_EXP2 and mid_index[k] >= 0
            if have_exp and _reusable(key, h, Ac, hc, norm_c, reuse_tol) and (have_f3 or not corrected):
                reused[k] = 1
            else:
                have_fc = False
                have_f3 = corrected
                norm_c = _matrix_functions(key, h, corrected, second_order, EF, EFF, EF3, ws, Ac, colsum)
                hc = h
                have_exp = True
            if second_order and reused[k] == 1:
                # the matrix functions are reused: so is the forcing term G1 B_k + G2 B_k+1 while
                # B_k, B_k+1 stay within reuse_tol (of their largest entry) of the cached ones
                if not (have_fc and _close(B0, Bc0, thr0) and _close(B1, Bc1, thr1)):
                    _exp2_forcing_into(EFF, B0, B1, Fc)
                    linalg.copy_into(B0, Bc0)
                    linalg.copy_into(B1, Bc1)
                    thr0 = reuse_tol * _max_abs(B0)
                    thr1 = reuse_tol * _max_abs(B1)
                    have_fc = True
                _exp2_step_with_forcing(EFF, Sk, Fc, Sk1)
            elif second_order:
                steps.exp2_step_stacked_into(EFF, SBk, B1, Sk1)
            else:
                steps.exp_step_stacked_into(EF, SBk, Sk1)
            if corrected:
                # a long solver gap: the midpoint correction (METHOD.md section 14) instead of sub-steps
                jacs(0.5 * (t[k] + t[k + 1]), X_mid[mid_index[k]], p, c, Am, Bm)
                exp2_correct_into(EFF, EF3, h, A0, A1, Am, key, B0, B1, Bm, Sk, Sk1, Dw, Dmw, CQ, Rw, Mw)
        if out_index[k + 1] >= 0:
            if not _finite_copy(Sk1, S_out[out_index[k + 1]]):
                linalg.copy_into(Sk1, S)
                return k
    linalg.copy_into(S_0 if (K - 1) % 2 == 0 else S_1, S)
    return -1


@njit_quiet(i8(jacs_fn, vector_fn, vec, mat, vec, vec, mat, ivec, i8, f8, i8, f8, i8, i8, mat, ivec, i8,
                f8, tens, i8vec, ivec, i8vec, f8, i8, ivec, f8, mat, ivec), cache=True)
def march(jacs, rhs, t, X, p, c, S, out_index, method, n_factor, n_max, eq_tol, norm_kind,
          interp, X_sub, sub_offset, planned, reuse_tol, S_out, branch, n_int, reused, scale_atol,
          max_substeps, gap_end, freeze, X_mid, mid_index):
    """March ``S`` over the grid ``t`` with states ``X`` (Algorithms 1-3).

    Parameters
    ----------
    jacs, rhs : first-class functions
        The model's ``jacs_into(t, x, p, c, A, B)`` and ``rhs_into(t, x, p, c, f)``.
    t : (K,) increasing grid; X : (K, nx) states on it; p : (np,); c : model constants.
    S : (nx, np)
        Initial sensitivity on entry; the sensitivity at ``t[-1]`` on exit.
    out_index : (K,)
        ``out_index[k] >= 0``: store ``S(t_k)`` in ``S_out[out_index[k]]``.
    method, interp, norm_kind : int codes (``METHOD_CODES``, ``INTERP_CODES``, ``linalg.NORM_*``).
    n_factor, n_max, eq_tol :
        Switch thresholds: ``n_int = ceil(n_factor h ||A_k||)``, exponential step when
        ``n_int > n_max`` or both Jacobians changed by at most ``eq_tol`` relative.
    X_sub, sub_offset :
        With ``interp == INTERP_DENSE``: states at the refinement points of interval
        ``k`` are ``X_sub[sub_offset[k] + i - 1]``, ``i = 1..n_int[k]-1``.
    planned : int
        1: ``branch``/``n_int`` are inputs (from :func:`plan`); 0: outputs.
    reuse_tol : float
        Exponential branches reuse the previous interval's matrix exponential and
        phi functions when the matrix they exponentiate (``A_k``, or
        ``(A_k + A_k+1)/2``) and ``h`` are within ``reuse_tol`` (relative, 1-norm)
        of those it was computed for; 0 reuses only on equality.
    S_out : (n_out, nx, np); branch, n_int : (K-1,) per interval.
    reused : (K-1,) int8
        Output: 1 where an exponential branch reused the previous exponential, or
        where PBS sub-steps reused their step matrices (equal Jacobians on
        consecutive sub-steps, bitwise the same result); else 0.
    scale_atol : float
        ``atol`` of ``D = diag(|x_k| + atol)`` when ``norm_kind`` is ``NORM_SCALED``.
    max_substeps : int
        Bound on the total number of PBS sub-steps of the march, checked before an
        interval is refined (a bound on work: ``n_factor h ||A||`` can be huge).
    gap_end : (K-1,) int64
        Per interval, the grid index of the end of the state solver's gap it lies in
        (``k + 1`` for an interval that is a whole gap). ``exp2`` freezes the
        exponentiated matrix over a gap ``[t_a, t_e]`` split into several intervals,
        ``(A(t_a) + A(t_e))/2`` on every one of them (one matrix function per gap when
        the parts are equal; ``B`` still at every grid point), where
        ``||A(t_e) - A(t_a)||_F ||S(t_a)||_F <= freeze ||B(t_e) - B(t_a)||_F``.
    freeze : float
        The factor of that test (0: never freeze; ``inf``: always, on refined gaps).
    X_mid, mid_index : (M, nx), (K-1,)
        ``mid_index[k] >= 0``: an ``exp2`` interval whose step gets the midpoint
        correction (:mod:`pbsens.kernels.midpoint`), with the state at its midpoint
        ``X_mid[mid_index[k]]``; -1: none.

    Returns
    -------
    int
        -1 on success; ``k >= 0``: the index of the first interval after which ``S``
        was not finite; ``-2 - k``: refining interval ``k`` would exceed
        ``max_substeps`` (the caller raises).
    """
    nx = X.shape[1]
    np_ = p.shape[0]
    # ---- work arrays, allocated once; the loop runs in _march_loop, compiled without
    # reference counting (every view taken or array rebound in a loop otherwise costs
    # an atomic increment and decrement).
    Ag = np.empty((2, nx, nx))       # Jacobians at grid points k (slot g) and k+1 (slot 1-g)
    # [S_k; B_k] stacked in slot g, so that an exponential step is one product into
    # the S rows of slot 1-g (whose B rows hold B_k+1). B_k is SB[g][nx:].
    SB = np.empty((N_SB, 2 * nx, np_))   # (slot SB_CQ: work of the midpoint correction)
    Wn = np.empty((N_WN, nx, nx))    # n x n work matrices (slots WN_*)
    Wp = np.empty((N_WP, nx, np_))   # n x np work matrices (slots WP_*)
    V = np.empty((N_V, nx))          # vectors (slots V_*)
    cs = np.empty(max(nx, np_))      # column sums of the switch's 1-norms
    EF = np.empty((nx, 2 * nx))      # [E | F] for the exp step
    EFF = np.empty((nx, 3 * nx))     # [E | F1 - F2/h | F2/h] for the exp2 step
    EF3 = np.empty((nx, 4 * nx))     # [E | F1 | F2 | F3] for the midpoint correction
    ws = linalg.workspace(nx)
    return _march_loop(jacs, rhs, t, X, p, c, S, out_index, method, n_factor, n_max, eq_tol, norm_kind,
                       interp, X_sub, sub_offset, planned, reuse_tol, S_out, branch, n_int, reused,
                       Ag, SB, Wn, Wp, V, cs, EF, EFF, EF3, ws, scale_atol, max_substeps, gap_end, freeze,
                       X_mid, mid_index)


class _Compiled(types.WrapperAddressProtocol):
    """A compiled model function passed to the kernels by address.

    numba's wrapper-address protocol: the address of the function's C wrapper
    is looked up once here, instead of at every kernel call (passing the
    dispatcher itself makes numba resolve its compiled version on each call,
    0.3-0.4 ms per call for ``march``). Keeps the dispatcher, and so the
    compiled code, alive.
    """

    def __init__(self, dispatcher, sig):
        from numba.experimental.function_type import _get_wrapper_address
        self._dispatcher = dispatcher
        self._sig = sig
        self._addr = _get_wrapper_address(dispatcher, sig)
        self._type = types.FunctionType(sig)

    def __wrapper_address__(self):
        return self._addr

    def signature(self):
        return self._sig


@typeof_impl.register(_Compiled)
def _typeof_compiled(val, c):
    # numba's own rule for WrapperAddressProtocol builds a new FunctionType on
    # every kernel call (~0.1 ms for the two model functions); the type is fixed.
    return val._type


def bind(fns):
    """Per-model entry points: the cached kernels with the model's functions filled in.

    Measured trade-off: calling the cached kernel from Python with function
    arguments costs a few microseconds of unboxing when they are passed by address
    (:class:`_Compiled`; 0.3-0.4 ms as dispatchers), while a per-model ``@njit``
    closure that binds them would cost 5+ s to compile in every process (numba
    links and re-optimises the whole kernel library into it).
    """
    jacs_into = _Compiled(fns.jacs_into, jacs_fn_sig)
    rhs_into = _Compiled(fns.rhs_into, vector_fn_sig)

    def bound_march(*args, max_substeps=MAX_SUBSTEPS, gap_end=None, freeze=0.0, mid=None):
        if gap_end is None:     # every interval its own gap: nothing is frozen
            gap_end = np.arange(1, args[0].size, dtype=np.int64)
        if mid is None:         # no midpoint correction
            mid = (np.empty((0, args[1].shape[1])), np.full(args[0].size - 1, -1, dtype=np.int64))
        status = march(jacs_into, rhs_into, *args, check_max_substeps(max_substeps), gap_end, float(freeze), *mid)
        if status <= -2:
            k = -2 - status
            t, n_int = args[0], args[18]
            raise SolverError(f"method 'pbs' refinement: interval {k} [{t[k]:.6g}, {t[k + 1]:.6g}] needs "
                              f"{int(n_int[k])} sub-steps, beyond the budget max_substeps={max_substeps} of "
                              "PBS sub-steps per march (raise max_substeps, lower n_factor, or use "
                              "method='pbsr' or 'exp', which switch to the exponential step on stiff intervals)")
        return status

    def bound_plan(*args):
        plan(jacs_into, *args)

    return bound_march, bound_plan
