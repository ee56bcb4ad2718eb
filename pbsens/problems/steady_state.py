"""Steady states ``f(t, x, p) = 0`` and their parameter sensitivities.

:func:`steady_state` finds the state a trajectory settles to and
``S = dx_ss/dp``:

1. **State.** By default (``strategy="simulate"``) the states are integrated
   from ``x0`` over horizons growing tenfold (from ``t``, the time advancing as
   in a simulation) until the weighted norm of the right-hand side
   ``sqrt(mean((f_i / (atol + rtol |x_i|))^2))`` is below 1, and the result is
   polished by a few damped Newton steps. ``strategy="newton"`` tries damped
   Newton from ``x0`` first and falls back to the simulation when it does not
   converge (faster, but may find another steady state than the one reached
   from ``x0`` when there are several).
2. **Conservation laws.** Newton steps and sensitivities respect the model's
   linear conservation laws ``L^T x = const`` (e.g. total protein): ``L`` spans
   the left null space of ``A = df/dx`` at the steady state (numerically, from
   its singular value decomposition) and each of its columns must also satisfy
   ``L^T B = 0`` (``B = df/dp``), which every structural conservation law does.
3. **Sensitivities.** Differentiating ``f(x_ss(p), p) = 0`` gives
   ``A S = -B``. When ``A`` is regular, ``S = -A^{-1} B`` (independent of
   ``S0``). When ``A`` is singular because of conservation laws, the steady
   state depends on the conserved totals, which the initial state fixes:
   ``L^T S = L^T S0``. pbsens solves the stacked, consistent system
   ``[A; L^T] S = [-B; L^T S0]`` by least squares (the projection onto the
   conserved subspace, exactly what integrating ``S' = A S + B`` from ``S0``
   to infinity would give when the other eigenvalues of ``A`` are negative).
   A singular ``A`` whose null directions are not conservation laws
   (``L^T B != 0``) has no steady-state sensitivity: :class:`SolverError`.
"""
from __future__ import annotations

import numpy as np

from ..errors import PbsensError, SolverError
from ..solvers.trajectory import check_time

__all__ = ["steady_state", "conservation_laws"]

#: Relative size of a singular value of ``A`` counted as zero.
_RANK_TOL = 1e-11


def _wrms(f, x, rtol, atol):
    return float(np.sqrt(np.mean((f / (atol + rtol * np.abs(x))) ** 2))) if f.size else 0.0


def conservation_laws(A, B=None, tol=_RANK_TOL):
    """Left null vectors ``L`` (nx, m) of ``A`` that are conservation laws (``L^T B = 0``).

    Returns ``(L, inconsistent)``: the orthonormal basis of the left null space
    of ``A`` and a bool telling whether some null direction fails ``L^T B = 0``.
    """
    U, s, _ = np.linalg.svd(A)
    if s.size == 0 or s[0] == 0.0:
        L = U
    else:
        L = U[:, s <= tol * s[0]]
    inconsistent = False
    if B is not None and L.shape[1] and B.size:
        scale = max(np.abs(B).max(), 1e-300)
        inconsistent = bool(np.abs(L.T @ B).max() > 1e-7 * scale)
    return L, inconsistent


def _newton(model, t, x, p, rtol, atol, max_steps):
    """Damped Newton on ``f = 0`` keeping ``L^T x`` fixed; returns (x, wrms, converged)."""
    f = model.rhs(t, x, p)
    err = _wrms(f, x, rtol, atol)
    for _ in range(max_steps):
        if err < 1e-3:
            return x, err, True
        A = model.jac_x(t, x, p)
        L, _ = conservation_laws(A)
        M = np.vstack([A, L.T]) if L.shape[1] else A
        rhs = np.concatenate([-f, np.zeros(L.shape[1])])
        try:
            delta = np.linalg.lstsq(M, rhs, rcond=None)[0]
        except np.linalg.LinAlgError:
            return x, err, False
        lam, accepted = 1.0, False
        while lam > 1e-4:
            xn = x + lam * delta
            fn = model.rhs(t, xn, p)
            en = _wrms(fn, xn, rtol, atol)
            if np.all(np.isfinite(fn)) and en < err:
                x, f, err, accepted = xn, fn, en, True
                break
            lam *= 0.5
        if not accepted:
            break
    return x, err, err < 1.0


def _plausible(model, t, x0, x, p, atol):
    """A Newton result is kept only if it is stable (no eigenvalue of ``A`` with a positive real part)
    and keeps non-negative starting states non-negative; otherwise the simulation decides."""
    if np.all(x0 >= 0) and np.any(x < -10 * atol):
        return False
    A = model.jac_x(t, x, p)
    try:
        ev = np.linalg.eigvals(A)
    except np.linalg.LinAlgError:
        return False
    scale = max(np.abs(A).max(), 1e-300)
    return bool(np.all(ev.real <= 1e-8 * scale))


def _simulate_to_steady_state(model, t, x, p, rtol, atol, solver, max_time, sim_rtol, sim_atol):
    from .. import solve_states
    f = model.rhs(t, x, p)
    err = _wrms(f, x, rtol, atol)
    horizon, elapsed = 1.0, 0.0
    while err >= 1.0:
        if elapsed >= max_time:
            raise SolverError(f"steady state of model {model.name!r}: no steady state within time {max_time:.3g} "
                              f"of the start (weighted norm of f = {err:.3g}, needs < 1); raise 'max_time' or "
                              "check that the model has a stable steady state")
        tr = solve_states(model, (t + elapsed, t + elapsed + horizon), p=p, x0=x, method=solver, rtol=sim_rtol,
                          atol=sim_atol, dense_output=False)
        elapsed += horizon
        horizon *= 10.0
        x = tr.x[-1].copy()
        f = model.rhs(t + elapsed, x, p)
        err = _wrms(f, x, rtol, atol)
    return x, t + elapsed, err


def steady_state(model, p=None, x0=None, S0=None, *, sensitivities=True, t=0.0, strategy="simulate",
                 rtol=1e-8, atol=1e-10, solver="LSODA", max_time=1e12, newton_steps=20,
                 return_info=False):
    """Steady state ``x_ss`` reached from ``x0`` and its sensitivity ``S_ss = dx_ss/dp``.

    Parameters
    ----------
    model : Model
    p : array_like, optional
        Parameters (default: the model's).
    x0 : array_like, optional
        Starting state (default ``model.initial_state(p)``).
    S0 : array_like (nx, np), optional
        ``dx0/dp``; matters only when the model has conservation laws (the
        totals it fixes determine the steady state). Default:
        ``model.initial_sensitivity(p)``.
    sensitivities : bool
        Compute ``S_ss`` (else ``None`` is returned in its place).
    t : float
        Time at which the approach starts (the right-hand side may depend on
        the time; the states are integrated forward from ``t``).
    strategy : {"simulate", "newton"}
        ``"simulate"``: integrate until converged, then polish with Newton.
        ``"newton"``: Newton from ``x0`` first, the simulation if that fails.
    rtol, atol : float
        Convergence: ``sqrt(mean((f_i / (atol + rtol |x_i|))^2)) < 1``; the
        approach is integrated with ``rtol/10``, ``atol/10``.
    solver : str
        :func:`pbsens.solve_states` method of the approach.
    max_time : float
        Give up (:class:`SolverError`) after integrating this long.
    newton_steps : int
        Maximum number of Newton steps.
    return_info : bool
        Also return a dict: ``strategy`` used ("newton" or "simulate"),
        ``time`` reached, ``wrms`` (the weighted norm of ``f`` at ``x_ss``),
        ``conservation_laws`` (their number).

    Returns
    -------
    (x_ss, S_ss) : ndarray (nx,), ndarray (nx, np) or None
        (and ``info`` when ``return_info``)

    Raises
    ------
    PbsensError
        Bad arguments (named).
    SolverError
        No steady state within ``max_time``, non-finite values, or a singular
        Jacobian whose null space is not made of conservation laws.
    """
    p = model.check_p(p)
    if x0 is None:
        x = model.initial_state(p)
    else:
        x = model.check_x(x0, "x0").copy()
    if S0 is None:
        S0 = model.initial_sensitivity(p)
    else:
        S0 = model.check_S(S0)
    if strategy not in ("simulate", "newton"):
        raise PbsensError(f"'strategy' must be 'simulate' or 'newton', got {strategy!r}")
    for name, v in (("rtol", rtol), ("atol", atol), ("max_time", max_time)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or not np.isfinite(v) or v <= 0:
            raise PbsensError(f"{name!r} must be a positive finite number, got {v!r}")
    t = check_time(t, "t")

    used, t_ss, converged = strategy, t, False
    if strategy == "newton":
        xn, err, converged = _newton(model, t, x, p, rtol, atol, newton_steps)
        converged = converged and _plausible(model, t, x, xn, p, atol)
        if converged:
            x = xn
        else:
            used = "simulate"
    if not converged:
        x, t_ss, err = _simulate_to_steady_state(model, t, x, p, rtol, atol, solver, max_time,
                                                 rtol / 10.0, atol / 10.0)
        x, err, _ = _newton(model, t_ss, x, p, rtol, atol, newton_steps)
    if not np.all(np.isfinite(x)):
        raise SolverError(f"steady state of model {model.name!r} is NaN/inf")
    A = model.jac_x(t_ss, x, p)
    L, _ = conservation_laws(A)
    info = {"strategy": used, "time": t_ss, "wrms": err, "conservation_laws": int(L.shape[1])}
    S = None
    if sensitivities:
        S = steady_state_sensitivity(model, t_ss, x, p, S0)
    return (x, S, info) if return_info else (x, S)


def steady_state_sensitivity(model, t, x, p, S0):
    """``S`` with ``A S = -B`` and ``L^T S = L^T S0`` (see the module docstring)."""
    A = model.jac_x(t, x, p)
    B = model.jac_p(t, x, p)
    L, inconsistent = conservation_laws(A, B)
    if inconsistent:
        raise SolverError(f"steady state of model {model.name!r}: the Jacobian df/dx is singular but its null "
                          "directions are not conservation laws (L^T df/dp != 0); the steady-state "
                          "sensitivities are not defined there")
    if L.shape[1] == 0:
        try:
            S = -np.linalg.solve(A, B)
        except np.linalg.LinAlgError:
            raise SolverError(f"steady state of model {model.name!r}: df/dx is singular") from None
    else:
        M = np.vstack([A, L.T])
        R = np.vstack([-B, L.T @ S0])
        S = np.linalg.lstsq(M, R, rcond=None)[0]
    if not np.all(np.isfinite(S)):
        raise SolverError(f"steady-state sensitivities of model {model.name!r} are NaN/inf")
    return S
