"""Single steps of the sensitivity march ``S' = A(t) S + B(t)`` on one interval.

Equation numbers refer to Eriksson, Kramer, Milinanni, Nyquist, "Sensitivity
Approximation by the Peano-Baker Series" (arXiv:2109.00067); see
``shared/docs/METHOD.md`` sections 3 and 4. Every step updates ``S`` (shape
``nx x np``) in place, allocates nothing (work arrays are arguments) and
requires C-contiguous float64 arrays. Work arrays must not share memory with
each other or with the inputs.
"""
from numba import njit, types

from .linalg import matmul_into
from .signatures import f8, mat


@njit(types.void(mat, mat, mat, mat, f8, mat, mat, mat, mat, mat, mat), cache=True)
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
        Work arrays (``I1``, ``I2``, ``Pb`` then ``Pf``).
    T1, T2 : ndarray, shape (nx, np)
        Work arrays (``Pb B_k+1`` and the bracket).
    """
    nx = S.shape[0]
    npar = S.shape[1]
    hh = 0.5 * h
    # I1 = (h/2)(A_k + A_k+1)
    for i in range(nx):
        for j in range(nx):
            W1[i, j] = hh * (Ak[i, j] + Ak1[i, j])
    # I2 = (h/2) A_k+1 I1                                     (product 1)
    matmul_into(Ak1, W1, W2)
    for i in range(nx):
        for j in range(nx):
            W2[i, j] *= hh
    # Pb = I - I1 + I2
    for i in range(nx):
        for j in range(nx):
            W3[i, j] = W2[i, j] - W1[i, j]
        W3[i, i] += 1.0
    # T1 = Pb B_k+1                                            (product 2)
    matmul_into(W3, Bk1, T1)
    # T2 = S + (h/2)(B_k + Pb B_k+1)
    for i in range(nx):
        for j in range(npar):
            T2[i, j] = S[i, j] + hh * (Bk[i, j] + T1[i, j])
    # Pf = I + I1 + I2
    for i in range(nx):
        for j in range(nx):
            W3[i, j] = W1[i, j] + W2[i, j]
        W3[i, i] += 1.0
    # S = Pf T2                                                (product 3)
    matmul_into(W3, T2, S)


@njit(types.void(mat, mat, mat, mat, mat), cache=True)
def exp_step_into(E, F, Bk, S, T1):
    """Exponential step (3.10), in place: ``S <- E S + F B_k``.

    Exact solution of ``S' = A_k S + B_k`` (Jacobians frozen at ``t_k``) over
    one interval: ``E = exp(h A_k)``, ``F = integral_0^h exp(s A_k) ds``, both
    from ``exp_phi1_into(A_k, h, E, F, ws)``. Unconditionally stable, first
    order in general, exact at equilibrium. Two matrix products.

    Parameters
    ----------
    E, F : ndarray, shape (nx, nx)
    Bk : ndarray, shape (nx, np)
    S : ndarray, shape (nx, np)
        ``S_k`` on entry, ``S_k+1`` on exit.
    T1 : ndarray, shape (nx, np)
        Work array.
    """
    nx = S.shape[0]
    npar = S.shape[1]
    matmul_into(E, S, T1)
    matmul_into(F, Bk, S)
    for i in range(nx):
        for j in range(npar):
            S[i, j] += T1[i, j]


@njit(types.void(mat, mat, mat, f8, mat, mat, mat, mat, mat), cache=True)
def exp2_step_into(E, F1, F2, h, Bk, Bk1, S, T1, T2):
    """Second-order exponential (exponential-midpoint) step, in place.

    ``S <- E S + F1 B_k + (F2/h)(B_k+1 - B_k)`` with ``E = exp(h Abar)``,
    ``F1 = h phi1(h Abar)``, ``F2 = h^2 phi2(h Abar)`` from
    ``exp_phi12_into(Abar, h, E, F1, F2, ws)`` and ``Abar = (A_k + A_k+1)/2``.
    This is the exact solution over the interval of ``S' = Abar S + B(t)``
    with ``B`` interpolated linearly between ``B_k`` and ``B_k+1``
    (variation of constants: the linear part of ``B`` is weighted by
    ``integral_0^h exp((h-s)Abar) s ds / h = F2/h = h phi2(h Abar)``), the
    second-order extension of (3.10). Three matrix products. For ``h = 0`` the
    ``F2/h`` term (which tends to 0) is skipped.

    Parameters
    ----------
    E, F1, F2 : ndarray, shape (nx, nx)
    h : float
        Step ``t_k+1 - t_k``, the same ``h`` passed to ``exp_phi12_into``.
    Bk, Bk1 : ndarray, shape (nx, np)
    S : ndarray, shape (nx, np)
        ``S_k`` on entry, ``S_k+1`` on exit.
    T1, T2 : ndarray, shape (nx, np)
        Work arrays.
    """
    nx = S.shape[0]
    npar = S.shape[1]
    matmul_into(E, S, T1)                 # T1 = E S
    if h != 0.0:
        inv_h = 1.0 / h
        for i in range(nx):
            for j in range(npar):
                T2[i, j] = (Bk1[i, j] - Bk[i, j]) * inv_h
        matmul_into(F2, T2, S)            # S = (F2/h)(B_k+1 - B_k)
    else:
        for i in range(nx):
            for j in range(npar):
                S[i, j] = 0.0
    matmul_into(F1, Bk, T2)               # T2 = F1 B_k
    for i in range(nx):
        for j in range(npar):
            S[i, j] += T1[i, j] + T2[i, j]
