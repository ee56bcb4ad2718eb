"""A solved state trajectory and the checks of the times that define one.

:class:`Trajectory` is what every state solver of :mod:`pbsens.solvers` returns
and what the sensitivity methods march over (METHOD.md section 2): the solver's
accepted steps as the grid, with the output times ``t_eval`` and the stop times
``tstops`` in it exactly.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PbsensError

__all__ = ["Trajectory", "check_time", "check_t_span", "check_t_eval", "check_tstops", "check_tolerance", "merge_grid"]


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
    sol : callable or None
        The solver's dense output (continuous interpolant), if kept:
        ``sol(t)`` is ``(nx,)`` for a scalar ``t`` and ``(nx, m)`` for ``m``
        times (a :class:`scipy.integrate.OdeSolution` for scipy's methods).
    method, rtol, atol : solver settings.
    stats : dict
        ``nfev``, ``njev``, ``nlu`` and the number of accepted steps.
    tstops : ndarray or None
        Times where the solve stopped exactly and restarted (all present in ``t``).
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
    tstops: np.ndarray | None = None

    def __len__(self):
        return len(self.t)


def check_time(t, name):
    """A single time (``t0``, ``t``, ...): a finite number, returned as a float."""
    try:
        t = float(t)
    except (TypeError, ValueError):
        raise PbsensError(f"{name!r} must be a number, got {t!r}") from None
    if not np.isfinite(t):
        raise PbsensError(f"{name!r} must be finite, got {t!r}")
    return t


def check_t_span(t_span):
    """Validate ``t_span = (t0, t1)``: two finite numbers, strictly increasing."""
    if np.iscomplexobj(t_span) or isinstance(t_span, (str, bytes)):
        raise PbsensError(f"'t_span' must be a pair of real numbers (t0, t1), got {t_span!r}")
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
    if np.iscomplexobj(t_eval) or isinstance(t_eval, (str, bytes)):
        raise PbsensError(f"{name!r} must be an array of times (real numbers), got {t_eval!r}")
    if np.ndim(t_eval) > 1:
        raise PbsensError(f"{name!r} must be one-dimensional, got shape {np.shape(t_eval)}")
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


def check_tstops(tstops, t_span):
    """Validate stop times: finite, inside ``t_span``; returns the sorted distinct
    times strictly inside ``(t0, t1)`` (the ends are stops anyway), or None."""
    if tstops is None:
        return None
    try:
        ts = np.array(tstops, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise PbsensError(f"'tstops' must be an array of times, got {tstops!r}") from None
    if not np.all(np.isfinite(ts)):
        raise PbsensError("'tstops' contains NaN or inf")
    if ts.size and (ts.min() < t_span[0] or ts.max() > t_span[1]):
        raise PbsensError(f"'tstops' must lie inside t_span {t_span}, got [{ts.min()}, {ts.max()}]")
    ts = np.unique(ts)
    ts = ts[(ts > t_span[0]) & (ts < t_span[1])]
    return ts if ts.size else None


def check_tolerance(v, name, n=None):
    """A positive finite tolerance (scalar or, with ``n`` given, one per state); returned unchanged."""
    if isinstance(v, (str, bytes)) or np.iscomplexobj(v):
        raise PbsensError(f"{name!r} must be a positive number or array, got {v!r}")
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise PbsensError(f"{name!r} must be a positive number or array, got {v!r}") from None
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise PbsensError(f"{name!r} must be positive and finite, got {v!r}")
    if n is not None and a.ndim > 0 and a.shape != (n,):
        raise PbsensError(f"{name!r} must be a number or have one entry per state ({n}), got shape {a.shape}")
    return v
