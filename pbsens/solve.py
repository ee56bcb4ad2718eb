"""The state solve: :func:`solve_states` -> :class:`Trajectory`.

A thin layer over :func:`scipy.integrate.solve_ivp` that keeps the solver's
accepted steps as the grid (the sensitivity methods march over it, METHOD.md
section 2) and merges the requested output times into it exactly.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.integrate import solve_ivp

from .errors import PbsensError, SolverError

__all__ = ["Trajectory", "solve_states", "check_t_span", "check_t_eval"]

class _Abort(Exception):
    """Raised inside the right-hand side to stop a failing solve."""


_METHODS_WITH_JAC = {"BDF", "Radau", "LSODA"}
_METHODS = {"RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA"}


@dataclass
class Trajectory:
    """A solved state trajectory on the solver's grid.

    Attributes
    ----------
    t : ndarray (K,)
        Increasing grid: the solver's accepted steps with ``t_eval`` merged in.
    x : ndarray (K, nx)
        States on the grid.
    p, x0 : ndarray
        Parameters and initial state used.
    t_eval : ndarray or None
        Requested output times (all present in ``t``).
    eval_index : ndarray of int or None
        ``t[eval_index] == t_eval``.
    sol : scipy OdeSolution or None
        The solver's dense output (continuous interpolant), if kept.
    method, rtol, atol : solver settings.
    stats : dict
        ``nfev``, ``njev``, ``nlu`` and the number of accepted steps.
    """

    t: np.ndarray
    x: np.ndarray
    p: np.ndarray
    x0: np.ndarray
    t_eval: np.ndarray | None = None
    eval_index: np.ndarray | None = None
    sol: object = None
    method: str = ""
    rtol: float = float("nan")
    atol: object = float("nan")
    stats: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.t)


def check_t_span(t_span):
    """Validate ``t_span = (t0, t1)``: two finite numbers, strictly increasing."""
    try:
        a = np.asarray(t_span, dtype=np.float64)
    except (TypeError, ValueError):
        raise PbsensError(f"'t_span' must be a pair of numbers (t0, t1), got {t_span!r}") from None
    if a.shape != (2,):
        raise PbsensError(f"'t_span' must be a pair (t0, t1), got {t_span!r}")
    if not np.all(np.isfinite(a)):
        raise PbsensError(f"'t_span' contains NaN or inf: {t_span!r}")
    if not a[1] > a[0]:
        raise PbsensError(f"'t_span' must be increasing (t0 < t1), got {t_span!r}")
    return float(a[0]), float(a[1])


def check_t_eval(t_eval, t_span, name="t_eval"):
    """Validate output times: finite, strictly increasing, inside ``t_span``."""
    if t_eval is None:
        return None
    try:
        te = np.array(t_eval, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise PbsensError(f"{name!r} must be an array of times, got {t_eval!r}") from None
    if te.size == 0:
        raise PbsensError(f"{name!r} is empty")
    if not np.all(np.isfinite(te)):
        raise PbsensError(f"{name!r} contains NaN or inf")
    if np.any(np.diff(te) <= 0):
        raise PbsensError(f"{name!r} must be strictly increasing")
    if te[0] < t_span[0] or te[-1] > t_span[1]:
        raise PbsensError(f"{name!r} must lie inside t_span {t_span}, got [{te[0]}, {te[-1]}]")
    return te


def _check_tol(v, name):
    a = np.asarray(v, dtype=np.float64)
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise PbsensError(f"{name!r} must be positive and finite, got {v!r}")
    return v


def merge_grid(t_grid, x_grid, t_eval, sol):
    """Merge ``t_eval`` into the solver grid exactly; states at new points from ``sol``.

    Returns ``(t, x, eval_index)`` with ``t[eval_index] == t_eval``.
    """
    t_all = np.union1d(t_grid, t_eval)
    x = np.empty((t_all.size, x_grid.shape[1]))
    pos_grid = np.searchsorted(t_all, t_grid)
    x[pos_grid] = x_grid
    new = np.ones(t_all.size, dtype=bool)
    new[pos_grid] = False
    if np.any(new):
        x[new] = sol(t_all[new]).T
    return t_all, x, np.searchsorted(t_all, t_eval)


def solve_states(model, t_span, t_eval=None, p=None, x0=None, method="LSODA",
                 rtol=1e-5, atol=1e-6, dense_output=True, max_nfev=1_000_000, **solver_options):
    """Solve the state ODE and keep the solver's adaptive grid.

    Parameters
    ----------
    model : Model
    t_span : (float, float)
        Integration interval, increasing.
    t_eval : array_like, optional
        Output (measurement) times; merged into the grid exactly, states there
        from the solver's dense output (METHOD.md section 2: measurement times
        must be grid points).
    p, x0 : array_like, optional
        Parameters and initial state (default: the model's; ``x0`` defaults to
        ``x0(p)`` when the model's initial values depend on parameters).
    method : str
        A :func:`scipy.integrate.solve_ivp` method; the compiled Jacobian is
        passed to the implicit ones (BDF, Radau, LSODA).
    rtol, atol : float
        Solver tolerances (the paper: rtol 1e-5, atol 1e-6).
    dense_output : bool
        Keep the solver's interpolant in ``Trajectory.sol`` (needed for
        ``sensitivities(..., interpolation="dense")``).
    max_nfev : int
        Give up (``SolverError``) after this many right-hand-side evaluations:
        a solver stuck at a singularity would otherwise loop for ever.
    **solver_options
        Passed on to ``solve_ivp`` (e.g. ``max_step``, ``first_step``).

    Returns
    -------
    Trajectory

    Raises
    ------
    PbsensError
        Bad arguments (each message names the argument); :class:`SolverError`
        when the solver fails or produces non-finite states.
    """
    t0, t1 = check_t_span(t_span)
    te = check_t_eval(t_eval, (t0, t1))
    p = model.check_p(p)
    x0 = model.initial_state(p) if x0 is None else model.check_x(x0, "x0")
    if method not in _METHODS:
        raise PbsensError(f"'method' must be one of {sorted(_METHODS)}, got {method!r}")
    _check_tol(rtol, "rtol")
    _check_tol(atol, "atol")
    fns, c = model.fns, model.constants
    nx = model.n_states
    rhs_into, jac_x_into = fns.rhs_into, fns.jac_x_into

    calls = [0]

    def fun(t, x):
        out = np.empty(nx)
        rhs_into(float(t), np.ascontiguousarray(x, dtype=np.float64), p, c, out)
        calls[0] += 1
        if calls[0] > max_nfev:
            raise _Abort(f"more than max_nfev = {max_nfev} right-hand-side evaluations "
                         f"(stuck near t = {t:.6g}; raise max_nfev if the problem is just long)")
        if not np.all(np.isfinite(out)):
            raise _Abort(f"the right-hand side is NaN/inf at t = {t:.6g}")
        return out

    def jac(t, x):
        out = np.empty((nx, nx))
        jac_x_into(float(t), np.ascontiguousarray(x, dtype=np.float64), p, c, out)
        return out

    kwargs = dict(solver_options)
    if method in _METHODS_WITH_JAC:
        kwargs.setdefault("jac", jac)
    try:
        with np.errstate(all="ignore"):
            res = solve_ivp(fun, (t0, t1), x0, method=method, rtol=rtol, atol=atol,
                            dense_output=True, **kwargs)
    except _Abort as exc:
        raise SolverError(f"state solve of model {model.name!r} failed (method {method}): {exc}") from None
    if res.status != 0:
        raise SolverError(f"state solve of model {model.name!r} failed at t = {res.t[-1]:.6g} "
                          f"(method {method}): {res.message}")
    xg = np.ascontiguousarray(res.y.T)
    if not np.all(np.isfinite(xg)):
        k = int(np.argmax(~np.all(np.isfinite(xg), axis=1)))
        raise SolverError(f"state solve of model {model.name!r} produced NaN/inf at t = {res.t[k]:.6g}")
    tg = res.t
    if te is not None:
        t, x, idx = merge_grid(tg, xg, te, res.sol)
    else:
        t, x, idx = tg, xg, None
    stats = {"nfev": int(res.nfev), "njev": int(res.njev), "nlu": int(res.nlu), "n_steps": int(tg.size - 1)}
    return Trajectory(t=np.ascontiguousarray(t), x=np.ascontiguousarray(x), p=p, x0=x0, t_eval=te,
                      eval_index=idx, sol=res.sol if dense_output else None, method=method,
                      rtol=rtol, atol=atol, stats=stats)
