"""The midpoint correction of the exp2 step (METHOD.md section 14).

Over a solver gap ``[t_a, t_e]`` of length ``H`` the exp2 step (:mod:`.steps`)
freezes ``A`` at ``Abar = (A_a + A_e)/2`` and takes ``B`` linear between its ends:

    S_e = E S_a + G1 B_a + G2 B_e,   E = exp(H Abar), G1 = F1 - F2/H, G2 = F2/H.

Its local error is the integral ``int_0^H exp((H - s) Abar) r(s) ds`` of the
residual ``r(s) = B(s) - B_lin(s) + (A(s) - Abar) S(s)``. One more evaluation of
the Jacobians, at the gap's midpoint (state from the solver's dense output), gives
``r`` at three points:

    r(0) = -D S_a / 2,   r(H) = D S_e / 2,   D = A_e - A_a,
    r(H/2) = (B_m - (B_a + B_e)/2) + (A_m - Abar)(S_a + S_e)/2,

and the quadratic through them integrates, with the step's own matrix functions, to

    S_e += G1 (w c - D S_a / 2) + G2 (D S_e / 2),
    c = r(H/2) - (r(0) + r(H))/2 = (B_m - (B_a + B_e)/2) + (A_m - Abar)(S_a + S_e)/2 - D (S_e - S_a)/4.

The linear part of ``r`` is integrated exactly (``G1``, ``G2`` are the weights of a
linear function); the weight of the bump ``4 (s/H)(1 - s/H) c`` is
``G3 = (4/H) F2 - (8/H^2) F3`` (``F3 = H^3 phi3``), which equals ``(4/3) G1`` for
``Abar = 0`` and is replaced by it (``w = 4/3``): exact in the non-stiff limit, an
under-correction of modes with ``|H lambda| >> 1``, whose contribution to the error
is damped by ``1/(H lambda)^2``. Measured on the long Rodas5P gaps of CaMKII and PKA
(benchmarks/exp2_gap_error.py): the corrected step's error is 6-9 % (median) and at
most 18-30 % of the plain step's, about what 4 exp2 sub-steps reach, at the cost of
one Jacobian evaluation and five ``n x n x np`` products instead of three more steps
and up to three more matrix functions.
"""
from numba import njit, types

from .blas import gemm_into
from .expmv import csr_matmul_into
from .signatures import f8, ivec, mat, vec
from .views import flat


@njit(types.void(mat, mat, mat), cache=True, _nrt=False)
def _half_sum(Sa, Se, M):
    sa, se, mm = flat(Sa), flat(Se), flat(M)
    for i in range(mm.shape[0]):
        mm[i] = 0.5 * (sa[i] + se[i])


@njit(types.void(mat, mat, mat, mat, mat, mat, mat, mat), cache=True, _nrt=False)
def _linear_and_bump(EG, B0, B1, Bm, Se, CQ, R, M):
    """``Se += G1 (-D S_a/2) + G2 (D S_e/2 + 4 c)`` and ``M = c``, the bump (module docstring)."""
    nx = Se.shape[0]
    C = CQ[:nx]
    Q = CQ[nx:]
    mm = flat(M)
    c, q, r = flat(C), flat(Q), flat(R)
    b0, b1, bm = flat(B0), flat(B1), flat(Bm)
    for i in range(c.shape[0]):
        bump = c[i] + (bm[i] - 0.5 * (b0[i] + b1[i])) - 0.25 * (q[i] - r[i])
        mm[i] = bump
        c[i] = -0.5 * r[i]
        q[i] = 0.5 * q[i] + 4.0 * bump
    # S_e += G1 (-D S_a/2) + G2 (D S_e/2) + G3 bump,  G3 = 4 G2 - (8/h^2) F3 (the F3 term: the callers)
    gemm_into(EG[:, nx:], CQ, Se, 1.0, 1.0)


@njit(types.void(mat, mat, f8, mat, mat, mat, mat, mat, mat, mat), cache=True, _nrt=False)
def _finish(EG, EF3, h, B0, B1, Bm, Se, CQ, R, M):
    """The correction from ``R = D S_a``, ``CQ = [(A_m - Abar) M; D S_e]``, ``M = (S_a + S_e)/2``."""
    _linear_and_bump(EG, B0, B1, Bm, Se, CQ, R, M)
    gemm_into(EF3[:, 3 * Se.shape[0]:], M, Se, -8.0 / (h * h), 1.0)


@njit(types.void(mat, mat, f8, mat, mat, mat, mat, mat, mat, mat), cache=True, _nrt=False)
def _finish_solved(EG, X, h, B0, B1, Bm, Se, CQ, R, M):
    """:func:`_finish` with ``F3 c = X (F2 - (h^2/2) I) c``, ``X = (Abar + L^T L)^-1`` (METHOD.md
    section 14, "Without F3"); ``F2 = h G2``. ``R`` is work once the bump is formed."""
    _linear_and_bump(EG, B0, B1, Bm, Se, CQ, R, M)
    nx = Se.shape[0]
    gemm_into(EG[:, 2 * nx:], M, R, h, 0.0)             # R = F2 c
    r, mm = flat(R), flat(M)
    half_h2 = 0.5 * h * h
    for i in range(r.shape[0]):
        r[i] -= half_h2 * mm[i]
    gemm_into(X, R, Se, -8.0 / (h * h), 1.0)


@njit(types.void(mat, mat, f8, mat, mat, mat, mat, mat, mat, mat, mat, mat, mat, mat, mat, mat, mat),
      cache=True, _nrt=False)
def exp2_correct_into(EG, EF3, h, A0, A1, Am, Abar, B0, B1, Bm, Sa, Se, D, Dm, CQ, R, M):
    """Add the midpoint correction to the exp2 step's result ``Se`` in place.

    Parameters
    ----------
    EG : (nx, 3 nx)
        ``[E | G1 | G2]`` of the step (:func:`pbsens.kernels.steps.exp2_prepare_inplace`).
    EF3 : (nx, 4 nx)
        ``[E | F1 | F2 | F3]`` of the same ``h Abar`` (:func:`pbsens.kernels.phi.exp_phi123_into`);
        only ``F3`` is read.
    h : float
        The step.
    A0, A1, Am, Abar : (nx, nx)
        ``A`` at the gap's start, end and midpoint; the matrix the step exponentiated.
    B0, B1, Bm : (nx, np)
        ``B`` at the same three points.
    Sa, Se : (nx, np)
        ``S`` at the start; the step's result at the end (corrected in place).
    D, Dm : (nx, nx); CQ : (2 nx, np); R, M : (nx, np)
        Work arrays, not aliasing the inputs or each other.
    """
    d, a0, a1 = flat(D), flat(A0), flat(A1)
    dm, am, ab = flat(Dm), flat(Am), flat(Abar)
    for i in range(d.shape[0]):
        d[i] = a1[i] - a0[i]
        dm[i] = am[i] - ab[i]
    nx = Sa.shape[0]
    _half_sum(Sa, Se, M)
    gemm_into(D, Sa, R, 1.0, 0.0)          # R = D S_a
    gemm_into(D, Se, CQ[nx:], 1.0, 0.0)    # Q = D S_e
    gemm_into(Dm, M, CQ[:nx], 1.0, 0.0)    # C = (A_m - Abar)(S_a + S_e)/2
    _finish(EG, EF3, h, B0, B1, Bm, Se, CQ, R, M)


@njit(types.void(ivec, ivec, vec, vec, vec, vec, mat, mat, vec, mat, mat, mat), cache=True, _nrt=False)
def _sparse_products(Ap, Ai, A0, A1, Am, Abar, Sa, Se, Dv, CQ, R, M):
    """``M = (S_a + S_e)/2``, ``R = D S_a``, ``CQ = [(A_m - Abar) M; D S_e]`` on the CSR pattern."""
    nx = Sa.shape[0]
    _half_sum(Sa, Se, M)
    for k in range(Dv.shape[0]):
        Dv[k] = A1[k] - A0[k]
    csr_matmul_into(Ap, Ai, Dv, Sa, R)            # R = D S_a
    csr_matmul_into(Ap, Ai, Dv, Se, CQ[nx:])      # Q = D S_e
    for k in range(Dv.shape[0]):
        Dv[k] = Am[k] - Abar[k]
    csr_matmul_into(Ap, Ai, Dv, M, CQ[:nx])       # C = (A_m - Abar)(S_a + S_e)/2


@njit(types.void(mat, mat, f8, ivec, ivec, vec, vec, vec, vec, mat, mat, mat, mat, mat, vec, mat, mat, mat),
      cache=True, _nrt=False)
def exp2_correct_sparse_into(EG, EF3, h, Ap, Ai, A0, A1, Am, Abar, B0, B1, Bm, Sa, Se, Dv, CQ, R, M):
    """:func:`exp2_correct_into` with ``A_0, A_1, A_m, Abar`` as CSR values on one pattern
    ``(Ap, Ai)``: the three products with ``D = A_1 - A_0`` and ``A_m - Abar`` cost
    ``nnz(A) np`` each instead of ``nx^2 np``; ``B0, B1, Bm`` dense ``(nx, np)``; ``Dv``
    (``nnz(A)``) work."""
    _sparse_products(Ap, Ai, A0, A1, Am, Abar, Sa, Se, Dv, CQ, R, M)
    _finish(EG, EF3, h, B0, B1, Bm, Se, CQ, R, M)


@njit(types.void(mat, mat, f8, ivec, ivec, vec, vec, vec, vec, mat, mat, mat, mat, mat, vec, mat, mat, mat),
      cache=True, _nrt=False)
def exp2_correct_sparse_solved_into(EG, X, h, Ap, Ai, A0, A1, Am, Abar, B0, B1, Bm, Sa, Se, Dv, CQ, R, M):
    """:func:`exp2_correct_sparse_into` without ``F3``: ``X = (Abar + L^T L)^-1`` with ``L``'s
    orthonormal rows spanning the left null space that every ``A`` and ``B`` share (the
    model's conservation laws), see METHOD.md section 14, "Without F3"."""
    _sparse_products(Ap, Ai, A0, A1, Am, Abar, Sa, Se, Dv, CQ, R, M)
    _finish_solved(EG, X, h, B0, B1, Bm, Se, CQ, R, M)
