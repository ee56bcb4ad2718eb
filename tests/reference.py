"""Slow, literal NumPy/SciPy reference implementations (no numba).

They follow ``shared/docs/METHOD.md`` (sections 3-5) line by line and serve as
the oracle for the compiled kernels in :mod:`pbsens.kernels`. Equation numbers
are those of Eriksson et al., arXiv:2109.00067.
"""
import math

import numpy as np
import scipy.linalg

_NORM_ORD = {"1": 1, "inf": np.inf, "fro": "fro"}


def ref_norm(M, norm="1"):
    """Matrix norm by name (``"1"``, ``"inf"``, ``"fro"``) via numpy."""
    return float(np.linalg.norm(np.asarray(M, dtype=float), _NORM_ORD[norm]))


def ref_expm(A):
    """``exp(A)`` by :func:`scipy.linalg.expm`."""
    return scipy.linalg.expm(np.asarray(A, dtype=float))


def ref_phi1(A, h):
    """``(E, F) = (exp(hA), integral_0^h exp(sA) ds)`` from one block exponential.

    ``exp([[M, N], [0, 0]]) = [[exp(M), phi1(M) N], [0, I]]``; with ``M = hA``,
    ``N = hI`` the upper right block is ``h phi1(hA) = F``.
    """
    A = np.asarray(A, dtype=float)
    n = A.shape[0]
    K = np.zeros((2 * n, 2 * n))
    K[:n, :n] = h * A
    K[:n, n:] = h * np.eye(n)
    X = scipy.linalg.expm(K)
    return X[:n, :n].copy(), X[:n, n:].copy()


def ref_phi12(A, h):
    """``(E, F1, F2)`` with ``F1 = h phi1(hA)``, ``F2 = h^2 phi2(hA)``.

    ``K = h [[A, I, 0], [0, 0, I], [0, 0, 0]]``: the upper right part of
    ``exp(K)`` is ``integral_0^1 exp((1-s)hA) [hI, s h^2 I] ds = [F1, F2]``
    (the block ``C exp(sJ)`` with ``J = [[0, hI], [0, 0]]``, ``C = [hI, 0]``),
    so ``exp(K)[:n] = [E, F1, F2]``.
    """
    A = np.asarray(A, dtype=float)
    n = A.shape[0]
    K = np.zeros((3 * n, 3 * n))
    K[:n, :n] = h * A
    K[:n, n:2 * n] = h * np.eye(n)
    K[n:2 * n, 2 * n:] = h * np.eye(n)
    X = scipy.linalg.expm(K)
    return X[:n, :n].copy(), X[:n, n:2 * n].copy(), X[:n, 2 * n:].copy()


def ref_phi123(A, h):
    """``(E, F1, F2, F3)``, ``F3 = h^3 phi3(hA)``: the first block row of the exponential of
    ``h [[A, I, 0, 0], [0, 0, I, 0], [0, 0, 0, I], [0, 0, 0, 0]]`` (as :func:`ref_phi12`)."""
    A = np.asarray(A, dtype=float)
    n = A.shape[0]
    K = np.zeros((4 * n, 4 * n))
    K[:n, :n] = h * A
    for b in range(3):
        K[b * n:(b + 1) * n, (b + 1) * n:(b + 2) * n] = h * np.eye(n)
    X = scipy.linalg.expm(K)
    return tuple(X[:n, b * n:(b + 1) * n].copy() for b in range(4))


def ref_pbs_step(Ak, Ak1, Bk, Bk1, h, S):
    """PBS step (4.6): returns ``S_k+1``."""
    n = Ak.shape[0]
    eye = np.eye(n)
    I1 = (h / 2) * (Ak + Ak1)
    I2 = (h / 2) * Ak1 @ I1
    Pf = eye + I1 + I2
    Pb = eye - I1 + I2
    return Pf @ (S + (h / 2) * (Bk + Pb @ Bk1))


def ref_exp_step(Ak, Bk, h, S):
    """Exponential step (3.10): ``exp(h A_k) S + (integral_0^h exp(s A_k) ds) B_k``."""
    E, F = ref_phi1(Ak, h)
    return E @ S + F @ Bk


def ref_exp2_step(Ak, Ak1, Bk, Bk1, h, S):
    """Exponential-midpoint step: exact for ``A = (A_k + A_k+1)/2`` and linear ``B``.

    ``E S + F1 B_k + (F2/h)(B_k+1 - B_k)`` with ``(E, F1, F2)`` of ``Abar``.
    """
    Abar = 0.5 * (Ak + Ak1)
    E, F1, F2 = ref_phi12(Abar, h)
    return E @ S + F1 @ Bk + (F2 / h) @ (Bk1 - Bk)


METHODS = ("exp", "pbs", "pbsr", "exp2", "pbsr2")


def reference_march(jac_x, jac_p, t, X, p, S0, method, n_factor=10.0, n_max=100,
                    eq_tol=1e-4, norm="1"):
    """March ``S`` over the state solver's grid (Algorithms 1-3, METHOD.md section 5).

    Parameters
    ----------
    jac_x, jac_p : callable
        ``jac_x(t, x, p) -> (nx, nx)``, ``jac_p(t, x, p) -> (nx, np)``.
    t : array, shape (K,)
        Strictly increasing grid.
    X : array, shape (K, nx)
        States on the grid.
    p : array
        Parameters (passed through).
    S0 : array, shape (nx, np)
        ``S(t_0) = dx0/dp``.
    method : {"exp", "pbs", "pbsr", "exp2", "pbsr2"}
        ``"exp"``: exponential step (3.10) on every interval (Algorithm 3).
        ``"pbs"``: refined PBS steps on every interval, ``n_int`` without a cap
        (Algorithm 1 without the switch). ``"pbsr"``: Algorithm 2. ``"exp2"``:
        the exponential-midpoint step on every interval. ``"pbsr2"``: PBSR with
        the exponential-midpoint step wherever PBSR uses the exponential step.
    n_factor : float
        ``n_int = max(1, ceil(n_factor h ||A_k||))``.
    n_max : int
        PBSR uses the exponential step ("exp-stiff") when ``n_int > n_max``.
    eq_tol : float
        PBSR uses the exponential step ("exp-equilibrium") when
        ``||A_k+1 - A_k|| < eq_tol ||A_k||`` and
        ``||B_k+1 - B_k|| < eq_tol ||B_k||``.
    norm : {"1", "inf", "fro"}
        Matrix norm for ``n_int`` and the equilibrium test.

    Returns
    -------
    S : array, shape (K, nx, np)
        Sensitivities on every grid point (``S[0] = S0``).
    branch : list of str, length K - 1
        Per interval: ``"exp"`` / ``"exp2"`` (methods exp, exp2), ``"pbs"``,
        ``"exp-stiff"``, ``"exp-equilibrium"``.
    n_int : array of int, length K - 1
        Number of PBS sub-steps per interval; 1 for exponential branches.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if norm not in _NORM_ORD:
        raise ValueError(f"norm must be one of {tuple(_NORM_ORD)}, got {norm!r}")
    t = np.asarray(t, dtype=float)
    X = np.asarray(X, dtype=float)
    S = np.asarray(S0, dtype=float).copy()
    K = t.shape[0]
    out = np.empty((K,) + S.shape)
    out[0] = S
    branches = []
    n_ints = np.ones(K - 1, dtype=np.int64)
    for k in range(K - 1):
        h = t[k + 1] - t[k]
        Ak = np.asarray(jac_x(t[k], X[k], p), dtype=float)
        Ak1 = np.asarray(jac_x(t[k + 1], X[k + 1], p), dtype=float)
        Bk = np.asarray(jac_p(t[k], X[k], p), dtype=float)
        Bk1 = np.asarray(jac_p(t[k + 1], X[k + 1], p), dtype=float)
        if method == "exp":
            S = ref_exp_step(Ak, Bk, h, S)
            branches.append("exp")
        elif method == "exp2":
            S = ref_exp2_step(Ak, Ak1, Bk, Bk1, h, S)
            branches.append("exp2")
        else:
            n_int = max(1, math.ceil(n_factor * h * ref_norm(Ak, norm)))
            branch = "pbs"
            if method in ("pbsr", "pbsr2"):
                if n_int > n_max:
                    branch = "exp-stiff"
                elif (ref_norm(Ak1 - Ak, norm) < eq_tol * ref_norm(Ak, norm)
                      and ref_norm(Bk1 - Bk, norm) < eq_tol * ref_norm(Bk, norm)):
                    branch = "exp-equilibrium"
            if branch == "pbs":
                S = _refined_pbs(jac_x, jac_p, t[k], t[k + 1], X[k], X[k + 1], p,
                                 Ak, Ak1, Bk, Bk1, n_int, S)
                n_ints[k] = n_int
            elif method == "pbsr":
                S = ref_exp_step(Ak, Bk, h, S)
            else:
                S = ref_exp2_step(Ak, Ak1, Bk, Bk1, h, S)
            branches.append(branch)
        out[k + 1] = S
    return out, branches, n_ints


def _refined_pbs(jac_x, jac_p, ta, tb, xa, xb, p, Aa, Ab, Ba, Bb, n_int, S):
    """``n_int`` PBS steps on equal sub-intervals of ``[ta, tb]``.

    States at the sub-points by linear interpolation between ``xa`` and ``xb``;
    the end points reuse the Jacobians already evaluated there.
    """
    h = (tb - ta) / n_int
    A_prev, B_prev = Aa, Ba
    for j in range(1, n_int + 1):
        if j == n_int:
            A_next, B_next = Ab, Bb
        else:
            theta = j / n_int
            tj = ta + j * h
            xj = xa + theta * (xb - xa)
            A_next = np.asarray(jac_x(tj, xj, p), dtype=float)
            B_next = np.asarray(jac_p(tj, xj, p), dtype=float)
        S = ref_pbs_step(A_prev, A_next, B_prev, B_next, h, S)
        A_prev, B_prev = A_next, B_next
    return S


def rel_max(a, b):
    """Largest entry of ``|a - b|`` relative to the largest of ``|b|``."""
    return np.abs(a - b).max() / np.abs(b).max()


def mass_action_network():
    """A random 40-species mass-action network and its tight BDF trajectory on [0, 5]
    (the sparse-march tests' shared system)."""
    import pbsens
    from pbsens.model.mass_action import random_mass_action_model
    m = random_mass_action_model(40, n_classes=6, seed=3)
    return m, pbsens.solve_states(m, (0.0, 5.0), method="BDF", rtol=1e-7, atol=1e-10)
