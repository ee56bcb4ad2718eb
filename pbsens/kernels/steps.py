"""Single steps of the sensitivity march ``S' = A(t) S + B(t)`` on one interval.

Equation numbers refer to Eriksson, Kramer, Milinanni, Nyquist, "Sensitivity
Approximation by the Peano-Baker Series" (arXiv:2109.00067); see
``shared/docs/METHOD.md`` sections 3 and 4. The PBS steps update ``S`` (shape
``nx x np``) in place, the exponential steps write ``S_k+1`` into a separate
output; none allocates (work arrays are arguments) and all require C-contiguous
float64 arrays. Work arrays must not share memory with
each other or with the inputs.
"""
import numpy as np
from numba import njit, types

from .blas import gemm
from .signatures import f8, mat
from .views import flat


@njit(inline="always")
def pbs_apply(Pf, PbB, Bk, h, S, T2):
    """:func:`pbs_apply_into`, inlined into the compiled caller (the march)."""
    hh = 0.5 * h
    # T2 = S + (h/2)(B_k + Pb B_k+1), over flat views (vectorises; see views.flat)
    s, b, pbb, t2 = flat(S), flat(Bk), flat(PbB), flat(T2)
    for i in range(s.shape[0]):
        t2[i] = s[i] + hh * (b[i] + pbb[i])
    # S = Pf T2                                                (product 3)
    gemm(Pf, T2, S, 1.0, 0.0)


@njit(types.void(mat, mat, mat, f8, mat, mat), cache=True, _nrt=False)
def pbs_apply_into(Pf, PbB, Bk, h, S, T2):
    """The last part of the PBS step (4.6): ``S <- Pf (S + (h/2)(B_k + PbB))``, in place.

    ``Pf`` and ``PbB = Pb B_k+1`` are what :func:`pbs_step_into` leaves in ``W3``
    and ``T1``. They depend only on ``A_k``, ``A_k+1``, ``B_k+1`` and ``h``, so on
    consecutive sub-steps with the same Jacobians (a linear time-invariant
    system, or a state that no longer moves) the march calls only this: one
    matrix product instead of three, with bitwise the same result.

    Parameters
    ----------
    Pf : ndarray, shape (nx, nx)
    PbB, Bk : ndarray, shape (nx, np)
    h : float
    S : ndarray, shape (nx, np)
        ``S_k`` on entry, ``S_k+1`` on exit.
    T2 : ndarray, shape (nx, np)
        Work array.
    """
    pbs_apply(Pf, PbB, Bk, h, S, T2)


@njit(inline="always")
def pbs_step(Ak, Ak1, Bk, Bk1, h, S, W1, W2, W3, T1, T2):
    """:func:`pbs_step_into`, inlined into the compiled caller (the march: no call
    with eleven array arguments per sub-step)."""
    nx = S.shape[0]
    hh = 0.5 * h
    a0, a1, w1, w2, w3 = flat(Ak), flat(Ak1), flat(W1), flat(W2), flat(W3)
    # I1 = (h/2)(A_k + A_k+1)
    for i in range(a0.shape[0]):
        w1[i] = hh * (a0[i] + a1[i])
    # I2 = (h/2) A_k+1 I1                                     (product 1)
    gemm(Ak1, W1, W2, hh, 0.0)
    # Pb = I - I1 + I2 (into W2, over I2), Pf = I + I1 + I2 (into W3), one pass
    for i in range(w1.shape[0]):
        i1 = w1[i]
        i2 = w2[i]
        w2[i] = i2 - i1
        w3[i] = i2 + i1
    for i in range(nx):
        W2[i, i] += 1.0
        W3[i, i] += 1.0
    # T1 = Pb B_k+1                                            (product 2)
    gemm(W2, Bk1, T1, 1.0, 0.0)
    pbs_apply(W3, T1, Bk, h, S, T2)


@njit(types.void(mat, mat, mat, mat, f8, mat, mat, mat, mat, mat, mat), cache=True, _nrt=False)
def pbs_step_into(Ak, Ak1, Bk, Bk1, h, S, W1, W2, W3, T1, T2):
    """One Peano-Baker series step (4.6) on ``[t_k, t_k + h]``, in place.

    The Peano-Baker series of the transition matrix truncated after two terms,
    with the trapezoid rule for the integrals::

        I1 = (h/2)(A_k + A_k+1)
        I2 = (h/2) A_k+1 I1
        Pf = I + I1 + I2            # ~ Phi(t_k+1; t_k)
        Pb = I - I1 + I2            # ~ Phi(t_k; t_k+1)
        S <- Pf (S + (h/2)(B_k + Pb B_k+1))

    Local error O(h^3), global O(h_max^2) (Theorem 6.1); stable only while
    ``h ||A||`` is small (the march refines to ``h ||A|| <= 0.1``).
    Exactly three matrix products: ``A_k+1 I1``, ``Pb B_k+1``, ``Pf (...)``.

    Parameters
    ----------
    Ak, Ak1 : ndarray, shape (nx, nx)
        ``A = df/dx`` at ``t_k`` and ``t_k+1``.
    Bk, Bk1 : ndarray, shape (nx, np)
        ``B = df/dp`` at ``t_k`` and ``t_k+1``.
    h : float
        Step ``t_k+1 - t_k``.
    S : ndarray, shape (nx, np)
        ``S_k`` on entry, ``S_k+1`` on exit.
    W1, W2, W3 : ndarray, shape (nx, nx)
        Work arrays (``I1``; ``I2`` then ``Pb``; ``Pf``); ``Pf`` is left in ``W3``.
    T1, T2 : ndarray, shape (nx, np)
        Work arrays (``Pb B_k+1``, left in ``T1``, and the bracket).
    """
    pbs_step(Ak, Ak1, Bk, Bk1, h, S, W1, W2, W3, T1, T2)


# --------------------------------------------------------------------------
# Exponential steps, in the stacked form the march uses: S_k and B_k share one
# 2nx x np array, so a step is one BLAS call instead of two plus a sum
# --------------------------------------------------------------------------

@njit(types.void(mat, mat, mat), cache=True, _nrt=False)
def exp_step_stacked_into(EF, SB, S_next):
    """Exponential step (3.10) as one product: ``S_next = [E | F] [S_k; B_k]``.

    ``S_k+1 = E S_k + F B_k`` is the exact solution of ``S' = A_k S + B_k``
    (Jacobians frozen at ``t_k``) over one interval: ``E = exp(h A_k)``,
    ``F = integral_0^h exp(s A_k) ds``, side by side from
    ``linalg.exp_phi1_into(A_k, h, EF, ws)``. Unconditionally stable, first
    order in general, exact at equilibrium. With ``S_k`` and ``B_k`` stacked
    in one ``2nx x np`` array (the march keeps them that way) it is one
    ``nx x 2nx x np`` product instead of two ``nx x nx x np`` products and a
    sum (measured 3.5 against 5.7 us for CaMKII's 21 x 59).

    Parameters
    ----------
    EF : ndarray, shape (nx, 2 nx)
        ``[E | F]``.
    SB : ndarray, shape (2 nx, np)
        ``[S_k; B_k]``.
    S_next : ndarray, shape (nx, np)
        Output ``S_k+1``; must not share memory with ``EF`` or ``SB``.
    """
    gemm(EF, SB, S_next, 1.0, 0.0)


@njit(types.void(mat, f8), cache=True, _nrt=False)
def exp2_prepare_inplace(EFF, h):
    """Turn ``[E | F1 | F2]`` into ``[E | F1 - F2/h | F2/h]`` for :func:`exp2_step_stacked_into`.

    For ``h = 0`` (then ``F1 = F2 = 0``) the ``F2/h`` terms, which tend to 0, are
    set to 0.
    """
    n = EFF.shape[0]
    inv_h = 1.0 / h if h != 0.0 else 0.0
    un = np.uint64(n)   # unsigned column indices: no wraparound test, so the loop vectorises
    for i in range(n):
        for j in range(un):
            g = EFF[i, 2 * un + j] * inv_h
            EFF[i, 2 * un + j] = g
            EFF[i, un + j] -= g


@njit(types.void(mat, mat, mat, mat), cache=True, _nrt=False)
def exp2_step_stacked_into(EG, SB, Bk1, S_next):
    """Second-order exponential step in two products:
    ``S_next = [E | F1 - F2/h] [S_k; B_k] + (F2/h) B_k+1``.

    ``S_k+1 = E S_k + F1 B_k + (F2/h)(B_k+1 - B_k)`` with ``E = exp(h Abar)``,
    ``F1 = h phi1(h Abar)``, ``F2 = h^2 phi2(h Abar)`` (``exp_phi12_into``) and
    ``Abar = (A_k + A_k+1)/2`` is the exact solution over the interval of
    ``S' = Abar S + B(t)`` with ``B`` linear between ``B_k`` and ``B_k+1``
    (variation of constants: the linear part of ``B`` is weighted by
    ``integral_0^h exp((h-s)Abar) s ds / h = F2/h``): second order, exact for
    constant Jacobians. Regrouped here so that ``S_k`` and ``B_k`` share one
    product; the second product accumulates into ``S_next``.

    Parameters
    ----------
    EG : ndarray, shape (nx, 3 nx)
        ``[E | F1 - F2/h | F2/h]`` from :func:`exp2_prepare_inplace`.
    SB : ndarray, shape (2 nx, np)
        ``[S_k; B_k]``.
    Bk1 : ndarray, shape (nx, np)
    S_next : ndarray, shape (nx, np)
        Output ``S_k+1``; must not share memory with the inputs.
    """
    nx = S_next.shape[0]
    gemm(EG[:, :2 * nx], SB, S_next, 1.0, 0.0)
    gemm(EG[:, 2 * nx:], Bk1, S_next, 1.0, 1.0)
