"""The exp and exp2 marches with sparse Jacobians (METHOD.md section 12).

Per grid interval the step is the action :func:`pbsens.kernels.expmv.expmv_forced_into`
of the augmented exponential on ``S_k``: no ``n x n`` exponential, no dense ``n x n``
product. ``A = df/dx`` and ``B = df/dp`` arrive as CSR values on fixed patterns
(``A``: ``Ap, Ai``; ``B``: ``Bp, Bi``), either from the model's compiled
``jac_x_data_into`` / ``jac_p_data_into`` (``gather = 0``) or gathered from its dense
``jacs_into`` (``gather = 1``; the adapter for models without sparse functions, which
also checks that nothing lies outside the pattern).

=========  ==========================================================================
method     per interval ``[t_k, t_k+1]``, ``h = t_k+1 - t_k``
=========  ==========================================================================
exp        ``S_k+1 = exp(h A_k) S_k + h phi1(h A_k) B_k``
exp2       ``S_k+1 = exp(h Abar) S_k + h phi1(h Abar) B_k + h phi2(h Abar) (B_k+1 - B_k)``,
           ``Abar = (A_k + A_k+1)/2``
=========  ==========================================================================

Per interval the cheaper of two evaluations runs (``stats[STAT_DENSE]`` counts the dense ones): the
sparse action, about ``m s (nnz(A) + 2 nx) np`` multiply-adds for its plan's ``(m, s)``, or,
when ``dense_max >= nx``, the dense step of :mod:`pbsens.kernels.march` on the scattered
matrices, about ``(7 + 3 s_d) nx^3 + 3 nx^2 np`` with ``s_d`` doublings. The action's cost
grows like ``h ||A||`` (a polynomial method), the dense step's like ``log(h ||A||)``: on
long stiff intervals the dense step wins even when ``A`` is sparse.

exp2 intervals marked in ``mid_index`` (long solver gaps, :func:`pbsens.solvers.refine.midpoint_plan`)
take one more Jacobian evaluation, at the gap's midpoint, and are corrected: the dense step with
the midpoint correction of :mod:`pbsens.kernels.midpoint` (its three products with ``D`` on the
CSR pattern), the action step as two half steps extrapolated with the whole step.

Work arrays are allocated once per call, nothing per step.
"""
import numpy as np
from numba import njit, types

import math

from . import expmv, linalg, steps
from .dense import norm1_rowwise
from .lapack import F_INT_nptype, inverse_inplace, pivot_vec
from .midpoint import exp2_correct_sparse_into, exp2_correct_sparse_solved_into
from .phi import exp_phi12_into, exp_phi123_into
from .reduced import P_SLICES, R_SLICES, positions, reduced_exp2_into
from .codes import BRANCH_EXP, BRANCH_EXP2, METHOD_EXP2
from .march import _copy_cols
from .signatures import f8, i8vec, ivec, jacs_fn, mat, njit_quiet, tens, vec, vector_fn

i8 = types.int64

__all__ = ["sparse_march", "choose_step", "STATUS_OK"]

#: Relative cost of one multiply-add of the sparse action against one of the dense tiled products.
SPARSE_WEIGHT = 2.0
#: ``||Z||_1`` up to which the dense phi kernels need no doubling (``phi._PHI_THETA[-1]``).
_DENSE_THETA = 1.7420152406697095

#: The midpoint correction takes ``F3 c`` from a solve with ``X = (Abar + L^T L)^-1`` when
#: ``||X||_1 <= SOLVE_MAX h``, i.e. when the solve's rounding, about ``8 u ||X||_1 / h`` of the
#: bump's term, is at most 1e-5 of it (METHOD.md section 14, "Without F3"); otherwise
#: ``[E | F1 | F2 | F3]``. The bump's term is itself a correction, below the plain step's error.
SOLVE_MAX = 1e-5 / (8.0 * 2.0 ** -53)
#: Every plan of the action has ``m s >= MS_PER_RHO h rho`` (``rho``: the spectral radius of the
#: shifted ``A``): the smallest ``m / theta_m`` of :data:`expmv.THETA` (55 / 9.9).
MS_PER_RHO = float(np.min(expmv.THETA_M / expmv.THETA))
#: ``|L b| <= LAW_TOL ||b||`` for every column ``b`` of ``A`` and ``B``: the laws hold at a point.
LAW_TOL = 1e-9

# Slots of the march's work arrays (numba folds these module constants into the compiled code).
#: ``Ad``, ``Bd``, ``Bf`` (the Jacobians' CSR values) and ``lawok``: grid points ``k`` and ``k+1``
#: alternate in slots 0 and 1 (``g = k % 2`` and ``1 - g``); the midpoint of a corrected interval
#: is in slot ``MID``.
MID = 2
#: ``SS`` (``nx x np`` matrices): ``S_k`` and ``S_k+1`` alternate in ``SS_S0``, ``SS_S1``; ``SS_T``,
#: ``SS_T2``: the action's work; with midpoints, ``SS_HALF`` holds ``S`` between the two half steps
#: of the action branch and ``SS_WHOLE`` the whole step.
SS_S0, SS_S1, SS_T, SS_T2, SS_HALF, SS_WHOLE = 0, 1, 2, 3, 4, 5
#: ``TT`` (the action's ``NV`` work vectors): the row that is free before the action's plan, the
#: column sums of the dense step's norm.
TT_COLSUM = 0
#: ``stats`` of :func:`sparse_march`: Taylor terms summed (products with ``A``), scaling steps,
#: dense-step intervals, intervals with the midpoint, those corrected without ``F3``, and the
#: dense-step intervals taken in reduced coordinates. ``N_STATS`` entries.
STAT_TERMS, STAT_SCALINGS, STAT_DENSE, STAT_MID, STAT_SOLVED, STAT_REDUCED = 0, 1, 2, 3, 4, 5
N_STATS = 6

#: Return value of :func:`sparse_march` on success; ``k >= 0``: S not finite after interval k;
#: ``-2 - k``: the dense Jacobians at grid point ``k`` have a non-zero outside the pattern.
STATUS_OK = -1


@njit(types.boolean(mat, ivec, ivec, vec), cache=True, _nrt=False)
def gather_csr(M, indptr, indices, data):
    """CSR values of the dense ``M`` on the pattern ``(indptr, indices)``; ``M``'s pattern
    entries are zeroed on the way. Returns whether every entry outside the pattern is zero."""
    ok = True
    for i in range(M.shape[0]):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            data[k] = M[i, j]
            M[i, j] = 0.0
        for j in range(M.shape[1]):
            if M[i, j] != 0.0:
                ok = False
    return ok


@njit_quiet(types.boolean(jacs_fn, vector_fn, vector_fn, i8, f8, vec, vec, vec, ivec, ivec, ivec, ivec, vec, vec,
                    mat, mat), cache=True, _nrt=False)
def _eval(jacs, jxd, jpd, gather, t, x, p, c, Ap, Ai, Bp, Bi, Ad, Bd, Adense, Bdense):
    if gather == 0:
        jxd(t, x, p, c, Ad)
        jpd(t, x, p, c, Bd)
        return True
    jacs(t, x, p, c, Adense, Bdense)
    ok_a = gather_csr(Adense, Ap, Ai, Ad)
    ok_b = gather_csr(Bdense, Bp, Bi, Bd)
    return ok_a and ok_b


@njit(types.boolean(mat, mat), cache=True, _nrt=False)
def _finite_copy(X, Y):
    bad = 0
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            v = X[i, j]
            Y[i, j] = v
            bad |= (v - v) != 0.0
    return bad == 0


@njit(types.boolean(mat, mat, ivec), cache=True, _nrt=False)
def _store(X, Y, cols):
    """``Y[:, cols] = X`` and zero in ``Y``'s other columns (``cols`` covering all of them: a
    plain copy); returns whether ``X`` is finite."""
    if cols.shape[0] == Y.shape[1]:
        return _finite_copy(X, Y)
    bad = 0
    for i in range(X.shape[0]):
        row = Y[i]
        for j in range(row.shape[0]):
            row[j] = 0.0
        for j in range(X.shape[1]):
            v = X[i, j]
            row[cols[j]] = v
            bad |= (v - v) != 0.0
    return bad == 0


@njit(types.void(ivec, ivec, vec, mat), cache=True, _nrt=False)
def _scatter(indptr, indices, data, M):
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            M[i, j] = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            M[i, indices[k]] = data[k]


@njit(ivec(ivec, ivec), cache=True)
def _transpose_positions(indptr, indices):
    """Per entry ``(i, j)`` of the CSR pattern, the position of ``(j, i)`` (-1: not in the pattern)."""
    tpos = np.full(indices.shape[0], -1, dtype=np.int64)
    for i in range(indptr.shape[0] - 1):
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            for f in range(indptr[j], indptr[j + 1]):
                if indices[f] == i:
                    tpos[e] = f
                    break
    return tpos


@njit(f8(ivec, ivec, vec, ivec), cache=True, _nrt=False)
def rho_lower_bound(indptr, indices, data, tpos):
    """A lower bound of the spectral radius of ``A`` and of ``A - (tr A / n) I`` (the action's
    shift): ``sqrt(|tr M^2| / n)`` of each, the smaller (``|sum lambda^2| <= n rho^2``);
    ``tr A^2 = sum_ij A_ij A_ji`` from the transposed positions ``tpos``. NaN for NaN input."""
    n = indptr.shape[0] - 1
    tr = 0.0
    tr2 = 0.0
    for i in range(n):
        for e in range(indptr[i], indptr[i + 1]):
            f = tpos[e]
            if f >= 0:
                tr2 += data[e] * data[f]
            if indices[e] == i:
                tr += data[e]
    if n == 0:
        return 0.0
    return math.sqrt(min(abs(tr2), abs(tr2 - tr * tr / n)) / n)


@njit(f8(ivec, ivec, vec, vec), cache=True, _nrt=False)
def _csr_norm1(indptr, indices, data, colsum):
    return expmv.csr_norm1_shifted(indptr, indices, data, 0.0, colsum)


@njit(types.void(vec, ivec, vec), cache=True, _nrt=False)
def _compact(full, sel, out):
    for q in range(sel.shape[0]):
        out[q] = full[sel[q]]


@njit(types.boolean(mat, ivec, ivec, vec, mat), cache=True, _nrt=False)
def _laws_hold(LmT, P, I, V, W):
    """Whether ``|l b| <= LAW_TOL ||b||`` for every law ``l`` (the columns of ``LmT``, ``nx x k``) and
    column ``b`` of the CSR matrix ``(P, I, V)`` (``W``: work, its column count x ``k + 1``)."""
    k = LmT.shape[1]
    uk = np.uint64(k)                # unsigned: the loops over the laws vectorise
    for j in range(W.shape[0]):
        for q in range(k + 1):
            W[j, q] = 0.0
    for i in range(P.shape[0] - 1):
        li = LmT[i]
        for e in range(P[i], P[i + 1]):
            v = V[e]
            wj = W[I[e]]
            wj[k] += v * v
            for q in range(uk):
                wj[q] += v * li[q]
    tol2 = LAW_TOL * LAW_TOL
    for j in range(W.shape[0]):
        wj = W[j]
        lim = tol2 * wj[k]
        for q in range(k):
            if wj[q] * wj[q] > lim:
                return False
    return True


@njit(types.boolean(mat, mat, mat, pivot_vec, f8, vec), cache=True, _nrt=False)
def _bordered_inverse(Adn, LL, Xinv, ipiv, h, colsum):
    """``Xinv = (Adn + LL)^-1`` (``LL = L^T L``); whether it exists, is finite and
    ``||Xinv||_1 <= SOLVE_MAX |h|`` (``colsum``: work, length ``n``)."""
    n = Adn.shape[0]
    for i in range(n):
        for j in range(n):
            Xinv[i, j] = Adn[i, j] + LL[i, j]
    if inverse_inplace(Xinv, ipiv) != 0:
        return False
    return norm1_rowwise(Xinv, colsum) <= SOLVE_MAX * abs(h)       # False for NaN


@njit(i8(ivec, ivec, vec, vec, vec, ivec, ivec, vec, vec, vec, f8, mat, mat, mat, mat, mat, vec),
      cache=True, _nrt=False)
def _half_step(Ap, Ai, Aa, Ae, Abar, Rp, Ri, Ba, Be, Dd, h, Sa, Se, T, T2, TT, dwork):
    """One exp2 step of the action branch from ``(Aa, Ba, Sa)`` to ``(Ae, Be)`` over ``h`` into ``Se``
    (``Abar``, ``Dd``: work). Returns the Taylor terms summed; ``Se`` is NaN where no plan exists."""
    for q in range(Abar.shape[0]):
        Abar[q] = 0.5 * (Aa[q] + Ae[q])
    for q in range(Dd.shape[0]):
        Dd[q] = Be[q] - Ba[q]
    return expmv.expmv_forced_into(Ap, Ai, Abar, Rp, Ri, Ba, Dd, True, h, Sa, Se, T, T2, TT, dwork)[0]


@njit(types.Tuple((types.boolean, f8, f8, i8, i8))(ivec, ivec, vec, ivec, ivec, vec, vec, types.boolean, f8, i8, i8,
                                                    ivec, mat, vec), cache=True, _nrt=False)
def choose_step(Ap, Ai, Ause, Rp, Ri, B0, Dd, second, h, np_, dense_max, tpos, TT, dwork):
    """The step one interval takes: ``(use_dense, mu, g, m, s)``, the dense step or the action with the
    plan ``(mu, g, m, s)`` of :func:`pbsens.kernels.expmv.expmv_plan` (``s = 0``: no finite plan; with
    ``use_dense`` and no plan computed, ``m = 0``, ``s = 1``). The cheaper by the costs of the module
    docstring for ``np_`` columns; the sparse adjoint (:mod:`pbsens.kernels.sparse_adjoint`) calls it with
    the forward march's ``np_`` to take the same branch."""
    nx = Ap.shape[0] - 1
    use_dense = False
    planned = True
    mu, gsc, m, s = 0.0, 1.0, 0, 1
    cost_dense = 0.0
    if dense_max >= nx:
        nrm = h * _csr_norm1(Ap, Ai, Ause, TT[TT_COLSUM])
        sd = 0.0
        if nrm > _DENSE_THETA:
            sd = math.ceil(math.log2(nrm / _DENSE_THETA))
        cost_dense = (7.0 + 3.0 * sd) * nx ** 3 + 3.0 * nx * nx * np_
        # no plan (its norm estimates cost O(nnz np) per power) where even the cheapest
        # conceivable one, m s = MS_PER_RHO h rho, costs more than the dense step
        floor = (SPARSE_WEIGHT * MS_PER_RHO * h * rho_lower_bound(Ap, Ai, Ause, tpos)
                 * (Ai.shape[0] + 2.0 * nx) * np_)
        if nrm < np.inf and cost_dense < floor:
            use_dense = True
            planned = False
    if planned:
        mu, gsc, m, s = expmv.expmv_plan(Ap, Ai, Ause, Rp, Ri, B0, Dd, second, h, np_, TT, dwork)
        if dense_max >= nx and s > 0:
            cost_sparse = SPARSE_WEIGHT * float(m) * float(s) * (Ai.shape[0] + 2.0 * nx) * np_
            use_dense = cost_dense < cost_sparse
    return use_dense, mu, gsc, m, s


# The arguments of _loop after the scalars, grouped by role into tuples (unpacked once on entry;
# numba passes a tuple's members as separate machine arguments, so this costs nothing).
#: ``(Ap, Ai, Bp, Bi, Rp, Ri, Rsel, out_cols, tpos)``: the CSR patterns, the marched columns' pattern
#: and positions, the stored columns, the transposed positions of ``A``'s pattern.
_PATTERNS = types.UniTuple(ivec, 9)
#: ``(S_out, branch, n_int, stats)``: the outputs.
_OUTPUTS = types.Tuple((tens, i8vec, ivec, ivec))
#: ``(X_mid, mid_index)``: the midpoints of the corrected intervals.
_MIDPOINTS = types.Tuple((mat, ivec))
#: ``(Ad, Bd, Bf, Adense, Bdense, Abar, Dd)``: the Jacobians' values (slots: :data:`MID`), the dense
#: Jacobians of the gathering adapter, ``Abar`` and ``B_k+1 - B_k`` on their patterns.
_JAC_WORK = types.Tuple((mat, mat, mat, mat, mat, vec, vec))
#: ``(SS, TT, dwork)``: the marched ``S`` and the action's work (slots: ``SS_*``, ``TT_COLSUM``).
_ACTION_WORK = types.Tuple((tens, mat, vec))
#: ``(Adn, EF, EFF, ws, SBd, B1n, EF3, Bmn, CQ, RM, Dv)``: the dense step's work (empty unless
#: ``dense_max >= nx``; ``EF3`` to ``Dv`` empty without midpoints).
_DENSE_WORK = types.Tuple((mat, mat, mat, tens, mat, mat, mat, mat, mat, mat, vec))
#: ``(Lm, LmT, LL, Xinv, ipiv, lawok, lw, LW)``: the conservation laws, their check and the
#: correction without ``F3``.
_LAW_WORK = types.Tuple((mat, mat, mat, mat, pivot_vec, i8vec, vec, mat))
#: ``(ind, dep, rpos, dpos, Kd, LDinv, ZT, RW, RP, EFFr, wsr, ipivr)``: the reduced coordinates
#: (:mod:`pbsens.kernels.reduced`).
_REDUCED_WORK = types.Tuple((ivec, ivec, ivec, ivec, mat, mat, tens, tens, tens, mat, tens, pivot_vec))


@njit_quiet(i8(jacs_fn, vector_fn, vector_fn, i8, vec, mat, vec, vec, mat, ivec, i8, i8, _PATTERNS, _OUTPUTS,
         _MIDPOINTS, _JAC_WORK, _ACTION_WORK, _DENSE_WORK, _LAW_WORK, _REDUCED_WORK), cache=True, _nrt=False)
def _loop(jacs, jxd, jpd, gather, t, X, p, c, S, out_index, method, dense_max, patterns, outputs, midpoints,
          jac_work, action_work, dense_work, law_work, reduced_work):
    """The body of :func:`sparse_march`, given its work arrays (no allocation, no reference counting)."""
    Ap, Ai, Bp, Bi, Rp, Ri, Rsel, out_cols, tpos = patterns
    S_out, branch, n_int, stats = outputs
    X_mid, mid_index = midpoints
    Ad, Bd, Bf, Adense, Bdense, Abar, Dd = jac_work
    SS, TT, dwork = action_work
    Adn, EF, EFF, ws, SBd, B1n, EF3, Bmn, CQ, RM, Dv = dense_work
    Lm, LmT, LL, Xinv, ipiv, lawok, lw, LW = law_work
    ind, dep, rpos, dpos, Kd, LDinv, ZT, RW, RP, EFFr, wsr, ipivr = reduced_work
    # with mid_index[k] >= 0 (exp2) the interval gets the midpoint correction (METHOD.md section 14):
    # Ad[MID], Bf[MID], Bd[MID] hold A, B at its midpoint X_mid[mid_index[k]]; SS[SS_HALF] is the state
    # between the two half steps of the action branch (SS[SS_WHOLE]: the whole step), RM and Dv the
    # correction's work arrays
    # lawok[slot]: the conservation laws Lm hold at the point whose A is Ad[slot] (checked when Lm has rows)
    # B is evaluated on its full pattern (Bp, Bi) into Bf and compacted to the columns marched
    # (pattern Rp, Ri; Rsel: positions in Bf), which is all that the steps below see
    K = t.shape[0]
    second = method == METHOD_EXP2
    nx, np_ = S.shape
    S0, S1 = SS[SS_S0], SS[SS_S1]
    T, T2 = SS[SS_T], SS[SS_T2]
    for i in range(nx):
        for j in range(np_):
            S0[i, j] = S[i, j]
    if not _eval(jacs, jxd, jpd, gather, t[0], X[0], p, c, Ap, Ai, Bp, Bi, Ad[0], Bf[0], Adense, Bdense):
        return -2
    _compact(Bf[0], Rsel, Bd[0])
    check = Lm.shape[0] > 0 and EF3.shape[0] > 0
    if check:
        lawok[0] = _laws_hold(LmT, Ap, Ai, Ad[0], LW[:nx]) and _laws_hold(LmT, Rp, Ri, Bd[0], LW[:np_])
    if out_index[0] >= 0:
        _store(S0, S_out[out_index[0]], out_cols)
    for k in range(K - 1):
        g = k % 2
        A0, A1 = Ad[g], Ad[1 - g]
        B0, B1 = Bd[g], Bd[1 - g]
        if g == 0:
            Sk, Sk1 = S0, S1
        else:
            Sk, Sk1 = S1, S0
        if not _eval(jacs, jxd, jpd, gather, t[k + 1], X[k + 1], p, c, Ap, Ai, Bp, Bi, A1, Bf[1 - g], Adense,
                     Bdense):
            return -3 - k
        _compact(Bf[1 - g], Rsel, B1)
        if check:
            lawok[1 - g] = _laws_hold(LmT, Ap, Ai, A1, LW[:nx]) and _laws_hold(LmT, Rp, Ri, B1, LW[:np_])
        h = t[k + 1] - t[k]
        if second:
            for q in range(Abar.shape[0]):
                Abar[q] = 0.5 * (A0[q] + A1[q])
            for q in range(Dd.shape[0]):
                Dd[q] = B1[q] - B0[q]
            Ause = Abar
            branch[k] = BRANCH_EXP2
        else:
            Ause = A0
            branch[k] = BRANCH_EXP
        mid = second and mid_index[k] >= 0
        if mid:
            tm = 0.5 * (t[k] + t[k + 1])
            if not _eval(jacs, jxd, jpd, gather, tm, X_mid[mid_index[k]], p, c, Ap, Ai, Bp, Bi, Ad[MID],
                         Bf[MID], Adense, Bdense):
                return -3 - k
            _compact(Bf[MID], Rsel, Bd[MID])
            if check:
                lawok[MID] = (_laws_hold(LmT, Ap, Ai, Ad[MID], LW[:nx])
                              and _laws_hold(LmT, Rp, Ri, Bd[MID], LW[:np_]))
            stats[STAT_MID] += 1
        use_dense, mu, gsc, m, s = choose_step(Ap, Ai, Ause, Rp, Ri, B0, Dd, second, h, np_, dense_max, tpos, TT,
                                               dwork)
        if s == 0:
            for i in range(nx):
                for j in range(np_):
                    Sk1[i, j] = np.nan
        elif use_dense:
            # in the coordinates the conservation laws leave where they hold (pbsens.kernels.reduced)
            red = (second and dep.shape[0] > 0 and lawok[0] and lawok[1] and (lawok[MID] or not mid)
                   and reduced_exp2_into(h, mid, Ap, Ai, A0, A1, Ad[MID], Rp, Ri, B0, B1, Bd[MID], Sk, Sk1, ind,
                                         dep, rpos, dpos, Kd, Lm, LDinv, ZT, RW, RP, EFFr, wsr, ipivr, SOLVE_MAX,
                                         Abar, Dv))
            if red:
                stats[STAT_REDUCED] += 1
                if mid:
                    stats[STAT_SOLVED] += 1
            else:
                # the dense march's step on the scattered matrices (pbsens.kernels.march)
                _scatter(Ap, Ai, Ause, Adn)
                for i in range(nx):
                    for j in range(np_):
                        SBd[i, j] = Sk[i, j]
                _scatter(Rp, Ri, B0, SBd[nx:])
                if mid:
                    _scatter(Rp, Ri, B1, B1n)
                    _scatter(Rp, Ri, Bd[MID], Bmn)
                    # F3 from a solve with Abar + L^T L where the laws hold (METHOD.md section 14, "Without F3")
                    # (only with laws: without them a singular Abar, e.g. of a nonlinear conservation
                    # law, could pass the norm test with a meaningless inverse)
                    solved = (Lm.shape[0] > 0 and lawok[0] and lawok[1] and lawok[MID]
                              and _bordered_inverse(Adn, LL, Xinv, ipiv, h, lw[:nx]))
                    if solved:
                        exp_phi12_into(Adn, h, EFF, ws)
                    else:
                        exp_phi123_into(Adn, h, EF3, ws)
                        _copy_cols(EF3, EFF)
                    steps.exp2_prepare_inplace(EFF, h)
                    steps.exp2_step_stacked_into(EFF, SBd, B1n, Sk1)
                    if solved:
                        exp2_correct_sparse_solved_into(EFF, Xinv, h, Ap, Ai, A0, A1, Ad[MID], Abar, SBd[nx:], B1n,
                                                        Bmn, Sk, Sk1, Dv, CQ, RM[:nx], RM[nx:])
                        stats[STAT_SOLVED] += 1
                    else:
                        exp2_correct_sparse_into(EFF, EF3, h, Ap, Ai, A0, A1, Ad[MID], Abar, SBd[nx:], B1n, Bmn, Sk,
                                                 Sk1, Dv, CQ, RM[:nx], RM[nx:])
                elif second:
                    _scatter(Rp, Ri, B1, B1n)
                    linalg.exp_phi12_into(Adn, h, EFF, ws)
                    steps.exp2_prepare_inplace(EFF, h)
                    steps.exp2_step_stacked_into(EFF, SBd, B1n, Sk1)
                else:
                    linalg.exp_phi1_into(Adn, h, EF, ws)
                    steps.exp_step_stacked_into(EF, SBd, Sk1)
            stats[STAT_DENSE] += 1
        elif mid:
            # the action branch (a short or mildly stiff interval): two exp2 half steps through the
            # midpoint, extrapolated with the whole step (Richardson, the exp2 step's h^3 local error)
            terms, s = expmv.expmv_apply(Ap, Ai, Ause, Rp, Ri, B0, Dd, second, h, mu, gsc, m, s, Sk, SS[SS_WHOLE],
                                         T, T2)
            terms += _half_step(Ap, Ai, A0, Ad[MID], Abar, Rp, Ri, B0, Bd[MID], Dd, 0.5 * h, Sk, SS[SS_HALF], T,
                                T2, TT, dwork)
            terms += _half_step(Ap, Ai, Ad[MID], A1, Abar, Rp, Ri, Bd[MID], B1, Dd, 0.5 * h, SS[SS_HALF], Sk1,
                                T, T2, TT, dwork)
            for i in range(nx):
                for j in range(np_):
                    Sk1[i, j] += (Sk1[i, j] - SS[SS_WHOLE][i, j]) * (1.0 / 3.0)
            stats[STAT_TERMS] += terms
        else:
            terms, s = expmv.expmv_apply(Ap, Ai, Ause, Rp, Ri, B0, Dd, second, h, mu, gsc, m, s, Sk, Sk1, T, T2)
            stats[STAT_TERMS] += terms
            stats[STAT_SCALINGS] += s
        n_int[k] = 1
        if out_index[k + 1] >= 0:
            if not _store(Sk1, S_out[out_index[k + 1]], out_cols):
                for i in range(nx):
                    for j in range(np_):
                        S[i, j] = Sk1[i, j]
                return k
    last = S0 if (K - 1) % 2 == 0 else S1
    for i in range(nx):
        for j in range(np_):
            S[i, j] = last[i, j]
    return STATUS_OK


@njit_quiet(i8(jacs_fn, vector_fn, vector_fn, i8, vec, mat, vec, vec, mat, ivec, i8, ivec, ivec, ivec, ivec,
                tens, i8vec, ivec, ivec, i8, ivec, ivec, ivec, mat, ivec, ivec, mat, ivec, mat, mat), cache=True)
def sparse_march(jacs, jxd, jpd, gather, t, X, p, c, S, out_index, method, Ap, Ai, Bp, Bi, S_out, branch,
                 n_int, stats, dense_max, Rp, Ri, Rsel, X_mid, mid_index, out_cols, Lm, dep, Kd, LDinv):
    """March ``S`` over the grid ``t`` (states ``X``) with the exp or exp2 step, sparse Jacobians.

    Parameters
    ----------
    jacs : the model's dense ``jacs_into`` (called only when ``gather == 1``).
    jxd, jpd : the model's ``jac_x_data_into``, ``jac_p_data_into`` (called when ``gather == 0``).
    t, X, p, c : grid, states (K, nx), parameters, model constants.
    S : (nx, np), the initial sensitivity on entry, ``S(t[-1])`` on exit.
    out_index : (K,), ``>= 0``: store ``S(t_k)`` in ``S_out[out_index[k]]``.
    method : ``METHOD_EXP`` or ``METHOD_EXP2``.
    Ap, Ai, Bp, Bi : CSR patterns of ``A`` (nx x nx) and ``B`` (nx x np).
    branch, n_int : (K-1,) outputs (the exponential branch, 1).
    stats : (N_STATS,) int64 output: Taylor terms summed (products with ``A``), scaling steps,
        intervals that took the dense step, intervals with the midpoint, those of them
        corrected without ``F3``, and the dense-step intervals taken in reduced coordinates
        (indices ``STAT_TERMS`` ... ``STAT_REDUCED``).
    dense_max : the dense step is considered on models with at most this many states (its
        ``O(nx^2)`` work arrays are allocated only then).
    Rp, Ri, Rsel : the columns of ``B`` that ``S``'s columns are for: CSR pattern (nx x
        ``S.shape[1]``) and, per entry, its position in the values on ``(Bp, Bi)``. All
        columns: ``Rp, Ri = Bp, Bi`` and ``Rsel = arange(len(Bi))``.
    X_mid, mid_index : (M, nx), (K-1,)
        ``mid_index[k] >= 0`` (exp2 only): interval ``k`` is a long solver gap, ``X_mid[mid_index[k]]``
        the state at its midpoint (:func:`pbsens.solvers.refine.midpoint_plan`). Its step gets the
        midpoint correction (METHOD.md section 14) where it takes the dense step. Where it takes
        the action (a short or mildly stiff interval) it is two exp2 half steps through the
        midpoint extrapolated with the whole step, ``S_half + (S_half - S_whole)/3`` (the exp2
        step's local error is ``O(h^3)``; a half step costs about half the step there).
        ``-1``: the plain step.

    Lm : (k, nx), orthonormal rows: the model's conservation laws (:func:`pbsens.model.conservation.
        shared_left_null_space`; ``k = 0``: none, and ``F3`` everywhere). On dense-step intervals with
        the midpoint where ``Lm A = 0`` and ``Lm B = 0`` hold at the three points, the correction takes ``F3 c`` from a
        solve with ``Abar + Lm^T Lm`` (METHOD.md section 14, "Without F3") and ``[E | F1 | F2]``
        instead of ``[E | F1 | F2 | F3]`` (``stats[STAT_SOLVED]`` counts them).
    dep, Kd, LDinv : the states the laws ``Lm`` eliminate, ``Kd = Lm[:, dep]^-1 Lm[:, ind]`` and
        ``LDinv = Lm[:, dep]^-1`` (:func:`pbsens.model.conservation.dependent_states`; ``dep``
        empty: none). Dense-step exp2
        intervals where the laws hold at their points take the step in the ``nx - len(dep)``
        coordinates that remain (:mod:`pbsens.kernels.reduced`; ``stats[STAT_REDUCED]`` counts them).
    out_cols : (S.shape[1],) the column of ``S_out`` each column of ``S`` is stored in; the other
        columns of ``S_out``'s stored rows are set to zero. All columns: ``arange(S.shape[1])``.

    Returns
    -------
    int : :data:`STATUS_OK`; ``k >= 0``: ``S`` not finite after interval ``k``; ``-2 - k``:
    with ``gather == 1``, a Jacobian entry outside the pattern at grid point ``k``.
    """
    nx, np_ = S.shape
    nA = Ai.shape[0]
    nB = Ri.shape[0]
    Ad = np.zeros((MID + 1, nA))
    Bf = np.zeros((MID + 1, Bi.shape[0]))
    Bd = np.zeros((MID + 1, nB))
    Abar = np.zeros(nA)
    Dd = np.zeros(nB)
    has_mid = method == METHOD_EXP2 and mid_index.shape[0] > 0 and mid_index.max() >= 0
    SS = np.empty((SS_WHOLE + 1 if has_mid else SS_T2 + 1, nx, np_))
    TT = np.empty((expmv.NV, max(nx, np_)))
    dwork = np.empty(2 * (expmv.P_MAX + 2))
    if gather == 1:
        Adense = np.empty((nx, nx))
        Bdense = np.empty((nx, p.shape[0]))
    else:
        Adense = np.empty((0, 0))
        Bdense = np.empty((0, 0))
    nd = nx if dense_max >= nx else 0
    Adn = np.empty((nd, nd))
    EF = np.empty((nd, 2 * nd))
    EFF = np.empty((nd, 3 * nd))
    ws = linalg.workspace(nd)
    SBd = np.empty((2 * nd, np_ if nd else 0))
    B1n = np.empty((nd, np_ if nd else 0))
    nm = nd if has_mid else 0
    EF3 = np.empty((nm, 4 * nm))
    Bmn = np.empty((nm, np_ if nm else 0))
    CQ = np.empty((2 * nm, np_ if nm else 0))
    RM = np.empty((2 * nm, np_ if nm else 0))
    Dv = np.empty(nA if nm else 0)
    # the correction without F3 (dense-step intervals with the midpoint): X, pivots, L^T L
    Xinv = np.empty((nm, nm))
    ipiv = np.empty(max(nm, 1), dtype=F_INT_nptype)
    nl = Lm.shape[0] if nm else 0
    LL = np.zeros((nm if nl else 0, nm if nl else 0))
    for l in range(nl):
        for i in range(nx):
            li = Lm[l, i]
            for j in range(nx):
                LL[i, j] += li * Lm[l, j]
    lawok = np.zeros(MID + 1, dtype=np.int8)
    lw = np.empty(2 * max(nx, np_))
    LmT = np.ascontiguousarray(Lm[:nl].T)            # the laws as columns, and the check's work
    LW = np.empty((max(nx, np_), nl + 1))
    for q in range(stats.shape[0]):
        stats[q] = 0
    tpos = _transpose_positions(Ap, Ai) if nd else np.empty(0, dtype=np.int64)
    # the reduced coordinates (pbsens.kernels.reduced): with the laws (exp2 with midpoints) and the dense step
    nk = dep.shape[0] if (nl > 0 and nd > 0) else 0
    nr = nx - nk if nk else 0
    ind, rpos, dpos = positions(nx, dep, nk)
    ipivr = np.empty(max(nr, 1), dtype=F_INT_nptype)
    ZT = np.empty((2, nk, np_))
    RW = np.empty((R_SLICES if nr else 0, nr, nr))
    RP = np.empty((P_SLICES if nr else 0, nr, np_))
    EFFr = np.empty((nr, 3 * nr))
    wsr = linalg.workspace(nr)
    return _loop(jacs, jxd, jpd, gather, t, X, p, c, S, out_index, method, dense_max,
                 (Ap, Ai, Bp, Bi, Rp, Ri, Rsel, out_cols, tpos),
                 (S_out, branch, n_int, stats),
                 (X_mid, mid_index),
                 (Ad, Bd, Bf, Adense, Bdense, Abar, Dd),
                 (SS, TT, dwork),
                 (Adn, EF, EFF, ws, SBd, B1n, EF3, Bmn, CQ, RM, Dv),
                 (Lm[:nl], LmT, LL, Xinv, ipiv, lawok, lw, LW),
                 (ind, dep[:nk], rpos, dpos, Kd[:nk], LDinv, ZT, RW, RP, EFFr, wsr, ipivr))
