"""The backward (adjoint) march of the sparse exp and exp2 marches: one vector, CSR Jacobians.

The transpose of :mod:`pbsens.kernels.sparse_march` (docs/METHOD.md sections 12 and 16). Per interval
``[t_k, t_k+1]`` (backward) the forward march's own choice (:func:`.sparse_march.choose_step`, with the
forward march's number of columns ``np_fwd``) says which step the forward march took there, and the
transpose of that step is applied to ``lambda``:

==========================  =================================================================================
forward step                transpose (``lambda = lambda_k+1``)
==========================  =================================================================================
action, plain               the transposed action ``z = P(h W^T) [lambda; 0; 0]`` with the forward plan's
                            polynomial ``P`` (:func:`taction`): ``lambda_k = z_y = E^T lambda``,
                            ``B_k^T (F1^T lambda - F2^T lambda / h) + B_k+1^T (F2^T lambda / h)``
action, midpoint            two half steps and the whole step, ``S_k+1 = (4 S_half - S_whole)/3``,
                            transposed: ``4 lambda / 3`` back through the half steps (their plans for
                            one vector), ``-lambda / 3`` through the whole step
dense, plain                ``[E | G1 | G2]^T lambda``
dense, midpoint             the transpose of the midpoint correction (:func:`.adjoint._corrected_transpose`'s
                            formulas, with ``D = A_k+1 - A_k`` and ``Dm = A_m - Abar`` as CSR products)
==========================  =================================================================================

On a dense-step interval the vectors ``[E | G1 | G2 (| F3)]^T lambda`` are evaluated the cheaper way for
one vector: the dense matrix functions (``(7 + 3 s) nx^3``, ``s`` doublings) or the transposed action with a
plan of its own (``~ m s nnz(A)``; on long stiff intervals the dense one). Both are the same
numbers to rounding (the action's plan bounds the backward error of ``P`` in the 1-norm of ``W``; the
transposed polynomial has the same bound in the inf-norm of ``W^T``).

The transposed action carries ``y`` and the chain ``a, b, c`` (``n``-vectors) instead of the
forward's ``p``-column blocks: the identity blocks of ``W = [[A, B/g, D/g], [0, 0, 0], [0, I/h, 0]]``
become, transposed, vectors that ``B^T`` and ``D^T`` map once per interval at the end
(``P(hW^T)``'s ``u``-block is ``(B^T a + D^T b)/g``, and the start block ``[S; g I; 0]`` of the
forward turns it into ``B^T a + D^T b``). Per Taylor term: one product with the CSR ``A^T``
(``nnz(A)``) and ``O(nx)``; per grid point one ``B_k^T w_k`` (``nnz(B)``). Nothing grows with the
number of parameters but the evaluation of ``B`` and these products.

Not transposed exactly: where the forward's dense step takes its conservation-law variants (the
correction's ``F3 c`` from a solve, the step in reduced coordinates; :mod:`.sparse_march`), this
march transposes the plain dense step with ``F3``: the same step to the solve's ``1e-5`` of the
correction term and to rounding (reduced coordinates).

Several vectors (``dJdx`` of shape ``(nv, n_out, nx)``: the gradient's and ``"auto"``'s spread) are
marched together: each interval's Jacobians, step choice, plans and dense matrix functions are formed
once, and each vector takes its own products (METHOD.md section 16, "Several vectors in one march").

No allocation in the loop.
"""
import math

import numpy as np
from numba import njit, types

from . import expmv, linalg
from .dense import vecmat_into as _vecmat_into
from .phi import exp_phi123_into
from .codes import METHOD_EXP2
from .reduced import positions
from .reduced_adjoint import REDUCED_WORK, reduced_vectors
from .signatures import f8, ivec, jacs_fn, mat, njit_quiet, tens, vec, vector_fn
from .sparse_march import (_DENSE_THETA, MID, MS_PER_RHO, SPARSE_WEIGHT, _compact, _eval, _laws_hold, _scatter,
                           _transpose_positions, choose_step, rho_lower_bound)

__all__ = ["sparse_adjoint_march", "taction", "STATUS_OK", "N_ASTATS"]

i8 = types.int64
_U = 2.0 ** -53

STATUS_OK = -1
#: ``stats``: intervals by the forward step transposed (action plain, action with midpoint, dense plain,
#: dense with midpoint), the dense-step intervals evaluated with dense matrix functions, the
#: transposed Taylor terms summed, and the dense evaluations in the coordinates the laws leave.
AS_ACTION, AS_ACTION_MID, AS_DENSE, AS_DENSE_MID, AS_DENSE_EVAL, AS_TERMS, AS_REDUCED = 0, 1, 2, 3, 4, 5, 6
N_ASTATS = 7
#: Rows of the vector work ``VV``: the four results (``y``, ``a``, ``b``, ``c``), the four terms and
#: their next values, then the interval's vectors (``V_LAM``, ``V_WNEXT``: unused since ``lambda`` and
#: ``w`` of the next point live per vector in the march's ``(nv, nx)`` arrays).
V_FY, V_FA, V_FB, V_FC, V_TY, V_TA, V_TB, V_TC, V_NY, V_NA, V_NB, V_NC = range(12)
V_LAM, V_WLO, V_WHI, V_WMID, V_WNEXT, V_X1, V_X2, V_X3, V_X4, V_X5 = range(12, 22)
N_VV = 22


@njit(i8(ivec, ivec, vec, f8, f8, i8, i8, i8, vec, mat), cache=True, _nrt=False)
def taction(Ap, Ai, Ad, mu, h, m, s, chain, lam, VV):
    """The transposed action ``P(h W^T) [lam; 0; 0; 0]`` for the plan ``(mu, m, s)`` of ``W`` (the forcing
    scale ``g`` cancels): ``VV[V_FY] = E^T lam``, ``VV[V_FA] = F1^T lam``, ``VV[V_FB] = F2^T lam / h``
    (``chain >= 2``), ``VV[V_FC] = F3^T lam / h^2`` (``chain = 3``), with ``E = exp(hA)``,
    ``Fj = h^j phi_j(hA)`` (CSR ``A``; ``P`` the truncated, scaled, shifted Taylor polynomial of
    :func:`pbsens.kernels.expmv.expmv_apply`, terminated early the same way). Returns the terms summed.

    Per term, with ``coef = h / (s j)``: ``y <- coef (A^T - mu) y``, ``a <- coef (y - mu a)``,
    ``b <- coef (a/h - mu b)``, ``c <- coef (b/h - mu c)`` (old values on the right).
    """
    n = Ap.shape[0] - 1
    Fy, Fa, Fb, Fc = VV[V_FY], VV[V_FA], VV[V_FB], VV[V_FC]
    Ty, Ta, Tb, Tc = VV[V_TY], VV[V_TA], VV[V_TB], VV[V_TC]
    Ny, Na, Nb, Nc = VV[V_NY], VV[V_NA], VV[V_NB], VV[V_NC]
    for i in range(n):
        Fy[i] = lam[i]
        Fa[i] = 0.0
        Fb[i] = 0.0
        Fc[i] = 0.0
    if h == 0.0:
        return 0
    eta = math.exp(h * mu / s)
    hinv = 1.0 / h
    hs = h / s
    terms = 0
    for _ in range(s):
        c1 = 0.0
        for i in range(n):
            Ty[i] = Fy[i]
            Ta[i] = Fa[i]
            Tb[i] = Fb[i]
            Tc[i] = Fc[i]
            c1 = max(c1, abs(Fy[i]), abs(Fa[i]), abs(Fb[i]), abs(Fc[i]))
        for jt in range(1, m + 1):
            coef = hs / jt
            for i in range(n):
                Ny[i] = -mu * Ty[i]
            for i in range(n):
                yi = Ty[i]
                if yi != 0.0:
                    for k in range(Ap[i], Ap[i + 1]):
                        Ny[Ai[k]] += Ad[k] * yi
            c2 = 0.0
            fmax = 0.0
            for i in range(n):
                ny = coef * Ny[i]
                na = coef * (Ty[i] - mu * Ta[i])
                nb = 0.0
                nc = 0.0
                if chain >= 2:
                    nb = coef * (Ta[i] * hinv - mu * Tb[i])
                    if chain >= 3:
                        nc = coef * (Tb[i] * hinv - mu * Tc[i])
                Ny[i] = ny
                Na[i] = na
                Nb[i] = nb
                Nc[i] = nc
                fy = Fy[i] + ny
                fa = Fa[i] + na
                fb = Fb[i] + nb
                fc = Fc[i] + nc
                Fy[i] = fy
                Fa[i] = fa
                Fb[i] = fb
                Fc[i] = fc
                c2 = max(c2, abs(ny), abs(na), abs(nb), abs(nc))
                fmax = max(fmax, abs(fy), abs(fa), abs(fb), abs(fc))
            terms += 1
            for i in range(n):
                Ty[i] = Ny[i]
                Ta[i] = Na[i]
                Tb[i] = Nb[i]
                Tc[i] = Nc[i]
            if c1 + c2 <= _U * fmax:
                break
            c1 = c2
        for i in range(n):
            Fy[i] *= eta
            Fa[i] *= eta
            Fb[i] *= eta
            Fc[i] *= eta
    return terms


@njit(types.void(ivec, ivec, vec, vec, f8, vec), cache=True, _nrt=False)
def _tmatvec_add(Ap, Ai, Ad, x, alpha, y):
    """``y += alpha A^T x`` for CSR ``A`` (n x n)."""
    n = Ap.shape[0] - 1
    for i in range(n):
        xi = alpha * x[i]
        if xi != 0.0:
            for k in range(Ap[i], Ap[i + 1]):
                y[Ai[k]] += Ad[k] * xi


@njit(types.void(ivec, ivec, vec, vec, vec, vec, vec, vec, vec), cache=True, _nrt=False)
def _d_dm_transpose_add(Ap, Ai, A1, A0, Am, Abar, xd, xm, y):
    """``y += D^T xd + Dm^T xm / 2`` with ``D = A1 - A0``, ``Dm = Am - Abar`` (CSR values on one pattern):
    the corrected transpose's pass over ``D`` and ``Dm`` (:func:`.adjoint._lam_p_into`, dense)."""
    _tmatvec_add(Ap, Ai, A1, xd, 1.0, y)
    _tmatvec_add(Ap, Ai, A0, xd, -1.0, y)
    _tmatvec_add(Ap, Ai, Am, xm, 0.5, y)
    _tmatvec_add(Ap, Ai, Abar, xm, -0.5, y)


@njit(types.void(ivec, ivec, vec, vec, vec), cache=True, _nrt=False)
def _add_bt(Rp, Ri, Bd, w, grad):
    """``grad += B^T w`` for CSR ``B`` (values ``Bd``, n x np)."""
    for i in range(Rp.shape[0] - 1):
        wi = w[i]
        if wi != 0.0:
            for k in range(Rp[i], Rp[i + 1]):
                grad[Ri[k]] += Bd[k] * wi


@njit(types.void(mat, i8, f8, vec, mat, vec), cache=True, _nrt=False)
def _dense_vectors(M, chain, h, lam, VV, VL):
    """``VV[V_FY .. V_FC]`` (as :func:`taction`) from the dense ``M = [E | F1 (| F2 (| F3))]``."""
    n = lam.shape[0]
    _vecmat_into(lam, M, 0, (chain + 1) * n, VL, 0)
    hinv = 1.0 / h if h != 0.0 else 0.0
    for i in range(n):
        VV[V_FY, i] = VL[i]
        VV[V_FA, i] = VL[n + i]
        VV[V_FB, i] = VL[2 * n + i] * hinv if chain >= 2 else 0.0
        VV[V_FC, i] = VL[3 * n + i] * hinv * hinv if chain >= 3 else 0.0


@njit(f8(ivec, ivec, vec, ivec, ivec, vec, vec, types.boolean, f8, i8, vec), cache=True, _nrt=False)
def _ms_upper(Ap, Ai, Ause, Rp, Ri, B0, Dd, has_d, h, np_, colsum):
    """An upper bound of ``m s`` of :func:`pbsens.kernels.expmv.expmv_plan` for ``np_`` columns, without
    its norm estimates: every ``d_q`` there is at most ``||P|| + ||Q|| + ||N||`` of the shifted, scaled
    ``hW`` (each term of its bound is one of the multinomial expansion's), and so is ``||hW||_1``; the
    cheapest ``m ceil(alpha / theta_m)`` for that ``alpha`` bounds the plan's (inf: not finite)."""
    n = Ap.shape[0] - 1
    mu = expmv.csr_trace(Ap, Ai, Ause) / n
    nA0 = expmv.csr_norm1_shifted(Ap, Ai, Ause, 0.0, colsum)
    nA = expmv.csr_norm1_shifted(Ap, Ai, Ause, mu, colsum)
    if not nA < nA0:
        mu = 0.0
        nA = nA0
    nB = expmv.csr_norm1_rect(Rp, Ri, B0, colsum[:np_])
    nD = expmv.csr_norm1_rect(Rp, Ri, Dd, colsum[:np_]) if has_d else 0.0
    nF = max(nB, nD)
    target = max(nA, 1.0 / h)
    g = 1.0
    if nF > target:
        g = 2.0 ** math.ceil(math.log2(nF / target))
    total = 1.01 * (h * nA + h * nF / g + h * abs(mu) + (1.0 if has_d else 0.0))
    if not total < np.inf:
        return np.inf
    best = np.inf
    for i in range(expmv.THETA_M.shape[0]):
        # in floating point, as select_ms: math.ceil gives an int64 here, and m ceil(total / theta_1)
        # overflows it once total > ~2e3 (the product wrapped to -2^63, which made every stiff interval
        # "sure" for the action: Lang's adjoint took ~5 h rho Taylor terms where the forward's step was dense)
        best = min(best, float(expmv.THETA_M[i]) * np.ceil(total / expmv.THETA[i]))
    return best


# The arguments of the loop after the scalars, grouped into tuples (as sparse_march's _loop).
#: ``(Ap, Ai, Bp, Bi, Rp, Ri, Rsel, tpos)``: the CSR patterns (``R*``: ``B``'s marched columns).
_PATTERNS = types.UniTuple(ivec, 8)
#: ``(Ad, Bd, Bf, Adense, Bdense, Abar, Dd, Ah, Dh, Ah1)``: Jacobian values (slots 0, 1, MID), the gathering
#: adapter's dense Jacobians, ``Abar``, ``B_k+1 - B_k``, the second half step's ``Abar``, the half steps'
#: ``D`` and the first half step's ``Abar``.
_JAC_WORK = types.Tuple((mat, mat, mat, mat, mat, vec, vec, vec, vec, vec))
#: ``(VV, TT, dwork, VL, PL)``: the vectors (rows ``V_*``), the plan's work, the dense products' vector,
#: the own plan ``(mu, m, s)`` of :func:`_vectors`' last action.
_VEC_WORK = types.Tuple((mat, mat, vec, vec, vec))
#: ``(Adn, EF, EFF, EF3, ws)``: the dense evaluation (empty unless ``dense_max >= nx``).
_DENSE_WORK = types.Tuple((mat, mat, mat, mat, tens))
#: ``(ind, dep, rpos, dpos, K)``: the coordinates the conservation laws leave (:mod:`.reduced_adjoint`;
#: ``dep`` empty: none), and their work ``REDUCED_WORK``.
_REDUCED = types.Tuple((ivec, ivec, ivec, ivec, mat, REDUCED_WORK))


@njit(i8(ivec, ivec, vec, ivec, ivec, vec, vec, types.boolean, f8, i8, i8, ivec, i8, i8, i8, i8, vec,
         _VEC_WORK, _DENSE_WORK, ivec, types.boolean, _REDUCED), cache=True, _nrt=False)
def _vectors(Ap, Ai, Ause, Rp, Ri, B0, Dd, second, h, nx, dense_max, tpos, chain, n_act, have, gather_d, lam,
             vec_work, dense_work, stats, red, reduced):
    """``VV[V_FY .. V_FC]`` of ``lam`` on a dense-step interval, the cheaper way for one vector: the dense
    matrix functions of ``Ause`` (computed when ``have`` is 0, then kept in ``dense_work`` for a second
    vector of the same interval) or the transposed action with a plan of its own (kept in ``PL`` for
    a second vector). Returns 1 if the dense matrix functions are held after the call (2: those in the
    coordinates the laws leave, ``red``: the laws hold at the interval's points; :mod:`.reduced_adjoint`),
    0 if not, -1 if no finite plan or result exists.
    ``n_act``: vectors this interval needs (the choice's cost); ``gather_d``: whether the dense
    matrices must be formed (1) or the action may be taken (0: decide)."""
    VV, TT, dwork, VL, PL = vec_work
    Adn, EF, EFF, EF3, ws = dense_work
    ind, dep, rpos, dpos, Kd, rwork = reduced
    if have == 2:
        reduced_vectors(Ap, Ai, Ause, rpos, dpos, ind, dep, Kd, h, chain, False, lam, VV[V_FY], VV[V_FA],
                        VV[V_FB], VV[V_FC], rwork)
        return 2
    if have == 1:
        M = EF3 if chain == 3 else (EFF if chain == 2 else EF)
        _dense_vectors(M, chain, h, lam, VV, VL)
        return 1
    rowcost = Ai.shape[0] + 5.0 * nx
    use_dm = gather_d == 1
    mu, m, s = 0.0, 0, 0
    if not use_dm:
        nrm = h * expmv.csr_norm1_shifted(Ap, Ai, Ause, 0.0, TT[0])
        sd = 0.0
        if nrm > _DENSE_THETA:
            sd = math.ceil(math.log2(nrm / _DENSE_THETA))
        nd = nx - dep.shape[0] if red else nx
        cost_d = (7.0 + 3.0 * sd) * nd ** 3 * (1.5 if chain == 3 else 1.0)
        floor = SPARSE_WEIGHT * MS_PER_RHO * h * rho_lower_bound(Ap, Ai, Ause, tpos) * rowcost * n_act
        if nrm < np.inf and cost_d < floor and dense_max >= nx:
            use_dm = True
        else:
            mu, _, m, s = expmv.expmv_plan(Ap, Ai, Ause, Rp, Ri, B0, Dd, second, h, 1, TT, dwork)
            if s == 0:
                if dense_max < nx or not nrm < np.inf:
                    return -1
                use_dm = True
            elif dense_max >= nx:
                use_dm = cost_d < SPARSE_WEIGHT * float(m) * float(s) * rowcost * n_act
    if use_dm and red:
        reduced_vectors(Ap, Ai, Ause, rpos, dpos, ind, dep, Kd, h, chain, True, lam, VV[V_FY], VV[V_FA],
                        VV[V_FB], VV[V_FC], rwork)
        stats[AS_DENSE_EVAL] += 1
        stats[AS_REDUCED] += 1
        return 2
    if use_dm:
        _scatter(Ap, Ai, Ause, Adn)
        if chain == 3:
            exp_phi123_into(Adn, h, EF3, ws)
            M = EF3
        elif chain == 2:
            linalg.exp_phi12_into(Adn, h, EFF, ws)
            M = EFF
        else:
            linalg.exp_phi1_into(Adn, h, EF, ws)
            M = EF
        _dense_vectors(M, chain, h, lam, VV, VL)
        stats[AS_DENSE_EVAL] += 1
        return 1
    PL[0] = mu
    PL[1] = m
    PL[2] = s
    stats[AS_TERMS] += taction(Ap, Ai, Ause, mu, h, m, s, chain, lam, VV)
    return 0


@njit(types.boolean(mat, ivec, ivec, vec, ivec, ivec, vec, mat), cache=True, _nrt=False)
def _laws_at(LmT, Ap, Ai, Av, Rp, Ri, Bv, LW):
    """Whether the laws (the columns of ``LmT``; none: False) hold for ``A`` and ``B`` at a point."""
    if LmT.shape[1] == 0:
        return False
    return (_laws_hold(LmT, Ap, Ai, Av, LW[:Ap.shape[0] - 1])
            and _laws_hold(LmT, Rp, Ri, Bv, LW[:LW.shape[0] - Ap.shape[0] + 1]))


@njit_quiet(i8(jacs_fn, vector_fn, vector_fn, i8, vec, mat, vec, vec, ivec, tens, i8, i8, i8, _PATTERNS,
         types.Tuple((mat, ivec)), _JAC_WORK, _VEC_WORK, _DENSE_WORK, mat, ivec,
         types.Tuple((mat, mat, types.int8[::1])), _REDUCED, mat, mat), cache=True, _nrt=False)
def _loop(jacs, jxd, jpd, gather, t, X, p, c, out_index, dJdx, method, dense_max, np_fwd, patterns, midpoints,
          jac_work, vec_work, dense_work, grad, stats, law_work, reduced, lams, wnexts):
    """The body of :func:`sparse_adjoint_march` (no allocation). ``lams[q]`` holds the ``q``-th
    ``lambda`` (in and out), ``wnexts[q]`` its ``w`` of the next grid point, ``grad[q]`` its gradient:
    every vector goes through each interval's Jacobians, step choice, plans and matrix functions,
    formed once. ``law_work``: ``(LmT, LW, lawok)``, the laws as columns, the check's work and, per slot
    of ``Ad``, whether they hold there."""
    LmT, LW, lawok = law_work
    Ap, Ai, Bp, Bi, Rp, Ri, Rsel, tpos = patterns
    X_mid, mid_index = midpoints
    Ad, Bd, Bf, Adense, Bdense, Abar, Dd, Ah, Dh, Ah1 = jac_work
    VV, TT, dwork, VL, PL = vec_work
    K, nx = X.shape
    nv = lams.shape[0]
    second = method == METHOD_EXP2
    wlo, whi, wmid = VV[V_WLO], VV[V_WHI], VV[V_WMID]
    x1, x2, x3, x4 = VV[V_X1], VV[V_X2], VV[V_X3], VV[V_X4]
    for q in range(nv):
        for j in range(grad.shape[1]):
            grad[q, j] = 0.0
        for i in range(nx):
            wnexts[q, i] = 0.0
    for q in range(stats.shape[0]):
        stats[q] = 0
    gK = (K - 1) % 2
    if not _eval(jacs, jxd, jpd, gather, t[K - 1], X[K - 1], p, c, Ap, Ai, Bp, Bi, Ad[gK], Bf[gK], Adense, Bdense):
        return -2 - (K - 1)
    _compact(Bf[gK], Rsel, Bd[gK])
    lawok[gK] = _laws_at(LmT, Ap, Ai, Ad[gK], Rp, Ri, Bd[gK], LW)
    if out_index[K - 1] >= 0:
        r = out_index[K - 1]
        for q in range(nv):
            for i in range(nx):
                lams[q, i] += dJdx[q, r, i]
    for k in range(K - 2, -1, -1):
        g = k % 2
        A0, A1 = Ad[g], Ad[1 - g]
        B0, B1 = Bd[g], Bd[1 - g]
        if not _eval(jacs, jxd, jpd, gather, t[k], X[k], p, c, Ap, Ai, Bp, Bi, A0, Bf[g], Adense, Bdense):
            return -2 - k
        _compact(Bf[g], Rsel, B0)
        lawok[g] = _laws_at(LmT, Ap, Ai, A0, Rp, Ri, B0, LW)
        h = t[k + 1] - t[k]
        if second:
            for q in range(Abar.shape[0]):
                Abar[q] = 0.5 * (A0[q] + A1[q])
            for q in range(Dd.shape[0]):
                Dd[q] = B1[q] - B0[q]
            Ause = Abar
        else:
            Ause = A0
        mid = second and mid_index[k] >= 0
        Am, Bm = Ad[MID], Bd[MID]
        if mid:
            tm = 0.5 * (t[k] + t[k + 1])
            if not _eval(jacs, jxd, jpd, gather, tm, X_mid[mid_index[k]], p, c, Ap, Ai, Bp, Bi, Am, Bf[MID],
                         Adense, Bdense):
                return -2 - k
            _compact(Bf[MID], Rsel, Bm)
            lawok[MID] = _laws_at(LmT, Ap, Ai, Am, Rp, Ri, Bm, LW)
        red = lawok[g] == 1 and lawok[1 - g] == 1 and (not mid or lawok[MID] == 1)
        # the forward's branch (choose_step), without its plan's norm estimates where the action is sure: the
        # dense step's cost is above the action's for an upper bound of its m s; the action's polynomial is
        # then one planned for one vector (estimates for np columns cost O(nnz(A)) per power; the same
        # numbers to rounding)
        sure = dense_max < nx
        if not sure:
            nrm = h * expmv.csr_norm1_shifted(Ap, Ai, Ause, 0.0, TT[0])
            sd = 0.0
            if nrm > _DENSE_THETA:
                sd = math.ceil(math.log2(nrm / _DENSE_THETA))
            cost_dense = (7.0 + 3.0 * sd) * nx ** 3 + 3.0 * nx * nx * np_fwd
            if nrm < np.inf:
                ub = _ms_upper(Ap, Ai, Ause, Rp, Ri, B0, Dd, second, h, np_fwd, TT[0])
                sure = cost_dense >= SPARSE_WEIGHT * ub * (Ai.shape[0] + 2.0 * nx) * np_fwd
        if sure:
            use_dense = False
            mu, gsc, m, s = expmv.expmv_plan(Ap, Ai, Ause, Rp, Ri, B0, Dd, second, h, 1, TT, dwork)
        else:
            use_dense, mu, gsc, m, s = choose_step(Ap, Ai, Ause, Rp, Ri, B0, Dd, second, h, np_fwd, dense_max,
                                                   tpos, TT, dwork)
        if s == 0:
            return k
        chain = 2 if second else 1
        mu1, m1, s1, mu2, m2, s2 = 0.0, 0, 0, 0.0, 0, 0
        if not use_dense and not mid:
            stats[AS_ACTION] += 1
        elif not use_dense:
            stats[AS_ACTION_MID] += 1
            # the half steps' plans for one vector (the forward's, for np columns, may estimate ||(hW)^p||
            # where one vector need not: O(nnz(A)) per power and estimate, more than the transposed action
            # itself; the same numbers to rounding); second half: (A_m, B_m) to (A_k+1, B_k+1) over h/2
            for q in range(Ah.shape[0]):
                Ah[q] = 0.5 * (Am[q] + A1[q])
            for q in range(Dh.shape[0]):
                Dh[q] = B1[q] - Bm[q]
            mu2, _, m2, s2 = expmv.expmv_plan(Ap, Ai, Ah, Rp, Ri, Bm, Dh, True, 0.5 * h, 1, TT, dwork)
            # first half: from (A_k, B_k) to (A_m, B_m)
            for q in range(Ah1.shape[0]):
                Ah1[q] = 0.5 * (A0[q] + Am[q])
            for q in range(Dh.shape[0]):
                Dh[q] = Bm[q] - B0[q]
            mu1, _, m1, s1 = expmv.expmv_plan(Ap, Ai, Ah1, Rp, Ri, B0, Dh, True, 0.5 * h, 1, TT, dwork)
            if s2 == 0 or s1 == 0:
                return k
        elif not mid:
            stats[AS_DENSE] += 1
        else:
            stats[AS_DENSE_MID] += 1
        have = 0                # what the first vector's _vectors left for the others (its return value)
        r = out_index[k]
        for qv in range(nv):
            lam = lams[qv]
            gq = grad[qv]
            wnext = wnexts[qv]
            for i in range(nx):
                wlo[i] = 0.0
                whi[i] = 0.0
                wmid[i] = 0.0
            if not use_dense and not mid:
                stats[AS_TERMS] += taction(Ap, Ai, Ause, mu, h, m, s, chain, lam, VV)
                for i in range(nx):
                    lam[i] = VV[V_FY, i]
                    wlo[i] = VV[V_FA, i] - VV[V_FB, i]
                    whi[i] = VV[V_FB, i]
            elif not use_dense:
                # S_k+1 = (4 S_half - S_whole)/3: -lam/3 through the whole step, 4 lam/3 through the halves
                for i in range(nx):
                    x1[i] = -lam[i] / 3.0
                    x2[i] = 4.0 * lam[i] / 3.0
                stats[AS_TERMS] += taction(Ap, Ai, Ause, mu, h, m, s, 2, x1, VV)
                for i in range(nx):
                    x3[i] = VV[V_FY, i]                       # lambda_k's part from the whole step
                    wlo[i] = VV[V_FA, i] - VV[V_FB, i]
                    whi[i] = VV[V_FB, i]
                stats[AS_TERMS] += taction(Ap, Ai, Ah, mu2, 0.5 * h, m2, s2, 2, x2, VV)
                for i in range(nx):
                    x2[i] = VV[V_FY, i]
                    wmid[i] = VV[V_FA, i] - VV[V_FB, i]
                    whi[i] += VV[V_FB, i]
                stats[AS_TERMS] += taction(Ap, Ai, Ah1, mu1, 0.5 * h, m1, s1, 2, x2, VV)
                for i in range(nx):
                    lam[i] = x3[i] + VV[V_FY, i]
                    wlo[i] += VV[V_FA, i] - VV[V_FB, i]
                    wmid[i] += VV[V_FB, i]
            elif not mid:
                if qv == 0:
                    have = _vectors(Ap, Ai, Ause, Rp, Ri, B0, Dd, second, h, nx, dense_max, tpos, chain, nv, 0, 0,
                                    lam, vec_work, dense_work, stats, red, reduced)
                    if have < 0:
                        return k
                elif have >= 1:
                    _vectors(Ap, Ai, Ause, Rp, Ri, B0, Dd, second, h, nx, dense_max, tpos, chain, nv, have, 1, lam,
                             vec_work, dense_work, stats, red, reduced)
                else:
                    stats[AS_TERMS] += taction(Ap, Ai, Ause, PL[0], h, int(PL[1]), int(PL[2]), chain, lam, VV)
                for i in range(nx):
                    lam[i] = VV[V_FY, i]
                    if second:
                        wlo[i] = VV[V_FA, i] - VV[V_FB, i]
                        whi[i] = VV[V_FB, i]
                    else:
                        wlo[i] = VV[V_FA, i]
            else:
                # the midpoint correction transposed (METHOD.md section 16; kernels.adjoint._corrected_transpose)
                if qv == 0:
                    have = _vectors(Ap, Ai, Ause, Rp, Ri, B0, Dd, True, h, nx, dense_max, tpos, 3, 2 * nv, 0, 0, lam,
                                    vec_work, dense_work, stats, red, reduced)
                    if have < 0:
                        return k
                elif have >= 1:
                    _vectors(Ap, Ai, Ause, Rp, Ri, B0, Dd, True, h, nx, dense_max, tpos, 3, 2 * nv, have, 1, lam,
                             vec_work, dense_work, stats, red, reduced)
                else:
                    stats[AS_TERMS] += taction(Ap, Ai, Ause, PL[0], h, int(PL[1]), int(PL[2]), 3, lam, VV)
                for i in range(nx):
                    muv = 4.0 * VV[V_FB, i] - 8.0 * VV[V_FC, i]            # G3^T lam
                    x1[i] = muv
                    x2[i] = 0.5 * VV[V_FB, i] - 0.25 * muv                 # D^T of this into lam_P
                    x3[i] = 0.25 * muv - 0.5 * (VV[V_FA, i] - VV[V_FB, i])  # D^T of this into lam_a
                    x4[i] = lam[i]                                         # lam_P
                    wmid[i] = muv
                _d_dm_transpose_add(Ap, Ai, A1, A0, Am, Ause, x2, x1, x4)
                for i in range(nx):
                    lam[i] = 0.0                                           # D^T x3 + Dm^T mu/2, then + E^T lam_P
                _d_dm_transpose_add(Ap, Ai, A1, A0, Am, Ause, x3, x1, lam)
                if have >= 1:
                    _vectors(Ap, Ai, Ause, Rp, Ri, B0, Dd, True, h, nx, dense_max, tpos, 3, 2 * nv, have, 1, x4,
                             vec_work, dense_work, stats, red, reduced)
                else:
                    stats[AS_TERMS] += taction(Ap, Ai, Ause, PL[0], h, int(PL[1]), int(PL[2]), 2, x4, VV)
                for i in range(nx):
                    lam[i] += VV[V_FY, i]
                    wlo[i] = VV[V_FA, i] - VV[V_FB, i] - 0.5 * x1[i]
                    whi[i] = VV[V_FB, i] - 0.5 * x1[i]
            if mid:
                _add_bt(Rp, Ri, Bm, wmid, gq)
            bad = 0
            for i in range(nx):
                wnext[i] += whi[i]
            _add_bt(Rp, Ri, B1, wnext, gq)
            for i in range(nx):
                wnext[i] = wlo[i]
                lj = lam[i]
                if r >= 0:
                    lj += dJdx[qv, r, i]
                lam[i] = lj
                bad |= (lj - lj) != 0.0
            if bad:
                return k
    for q in range(nv):
        _add_bt(Rp, Ri, Bd[0], wnexts[q], grad[q])
    return STATUS_OK


@njit_quiet(i8(jacs_fn, vector_fn, vector_fn, i8, vec, mat, vec, vec, ivec, tens, i8, i8, ivec, ivec, ivec, ivec,
                ivec, ivec, ivec, mat, ivec, mat, mat, ivec, mat, ivec, mat), cache=True)
def sparse_adjoint_march(jacs, jxd, jpd, gather, t, X, p, c, out_index, dJdx, method, dense_max, Ap, Ai, Bp, Bi,
                         Rp, Ri, Rsel, X_mid, mid_index, lam, grad, stats, Lm, dep, Kd):
    """March ``lambda`` backward over the grid ``t`` (states ``X``), the transpose of
    :func:`pbsens.kernels.sparse_march.sparse_march` with the same arguments.

    ``jacs, jxd, jpd, gather, t, X, p, c, method, dense_max, Ap, Ai, Bp, Bi, Rp, Ri, Rsel, X_mid,
    mid_index``: as there (``Rp, Ri, Rsel``: the forward march's columns, ``grad.shape[0]`` of them).
    ``Lm`` (``k x nx``, orthonormal rows), ``dep``, ``Kd``: the conservation laws and the states they
    eliminate (:func:`pbsens.model.conservation.dependent_states`; ``k = 0``: none): the dense-step
    intervals where the laws hold take their matrix functions in the ``nx - k`` coordinates left
    (:mod:`.reduced_adjoint`).
    ``out_index``, ``dJdx`` (``nv x n_out x nx``): ``dJdx[q, out_index[k]]`` is added to the ``q``-th
    ``lambda`` at ``t_k`` (``nv`` functionals marched together: each interval's Jacobians, step choice,
    plans and matrix functions are formed once for all). ``lam`` (``nv x nx``): on entry ``lambda``
    carried into ``t[-1]``; on exit ``lambda(t_0)``. ``grad`` (output, ``nv x`` the marched columns):
    ``sum_k B_k^T w_k`` (without ``S_0^T lambda_0``). ``stats`` (``N_ASTATS``): the counts ``AS_*``.

    Returns :data:`STATUS_OK`; ``k >= 0``: ``lambda`` not finite after interval ``k``; ``-2 - k``: with
    ``gather == 1``, a Jacobian entry outside the pattern at grid point ``k`` (or its interval's midpoint).
    """
    K, nx = X.shape
    np_fwd = grad.shape[1]
    nA = Ai.shape[0]
    nB = Ri.shape[0]
    Ad = np.zeros((MID + 1, nA))
    Bf = np.zeros((MID + 1, Bi.shape[0]))
    Bd = np.zeros((MID + 1, nB))
    Abar = np.zeros(nA)
    Dd = np.zeros(nB)
    Ah = np.zeros(nA)
    Ah1 = np.zeros(nA)
    Dh = np.zeros(nB)
    if gather == 1:
        Adense = np.empty((nx, nx))
        Bdense = np.empty((nx, p.shape[0]))
    else:
        Adense = np.empty((0, 0))
        Bdense = np.empty((0, 0))
    VV = np.zeros((N_VV, nx))
    wnexts = np.zeros((lam.shape[0], nx))
    TT = np.empty((expmv.NV, max(nx, np_fwd, 1)))
    dwork = np.empty(2 * (expmv.P_MAX + 2))
    VL = np.empty(4 * nx)
    PL = np.zeros(3)
    has_mid = method == METHOD_EXP2 and mid_index.shape[0] > 0 and mid_index.max() >= 0
    nd = nx if dense_max >= nx else 0
    nm = nd if has_mid else 0
    Adn = np.empty((nd, nd))
    EF = np.empty((nd, 2 * nd))
    EFF = np.empty((nd, 3 * nd))
    EF3 = np.empty((nm, 4 * nm))
    ws = linalg.workspace(nd)
    tpos = _transpose_positions(Ap, Ai) if nd else np.empty(0, dtype=np.int64)
    # the coordinates the laws leave: only where the dense step is taken
    nk = dep.shape[0] if (nd > 0 and Lm.shape[0] > 0 and dep.shape[0] == Lm.shape[0]) else 0
    LmT = np.ascontiguousarray(Lm[:nk].T)
    LW = np.empty((nx + max(np_fwd, 1), nk + 1))
    lawok = np.zeros(MID + 1, dtype=np.int8)
    nr = nx - nk if nk else 0
    ind, rpos, dpos = positions(nx, dep, nk)
    nrm = nr if has_mid else 0
    rwork = (np.empty((nr, nr)), np.empty((nr, 2 * nr)), np.empty((nr, 3 * nr)), np.empty((nrm, 4 * nrm)),
             linalg.workspace(nr), np.empty(nr), np.empty(4 * nr), np.empty(nk))
    status = _loop(jacs, jxd, jpd, gather, t, X, p, c, out_index, dJdx, method, dense_max, np_fwd,
                   (Ap, Ai, Bp, Bi, Rp, Ri, Rsel, tpos), (X_mid, mid_index),
                   (Ad, Bd, Bf, Adense, Bdense, Abar, Dd, Ah, Dh, Ah1), (VV, TT, dwork, VL, PL),
                   (Adn, EF, EFF, EF3, ws), grad, stats, (LmT, LW, lawok),
                   (ind, dep[:nk], rpos, dpos, Kd[:nk], rwork), lam, wnexts)
    return status
