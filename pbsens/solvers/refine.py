"""Refining a trajectory's grid from its dense output: :func:`refine_grid`.

A high-order state solver (Rodas5P, :mod:`pbsens.solvers.rosenbrock`) meets
its tolerance with few, long steps. The post-hoc sensitivity methods are of
order 1 or 2 in the step (METHOD.md section 2), so on such a grid their error
is set by the step length, not by the state tolerance. :func:`refine_grid`
splits the grid so that no interval is longer than ``1/m`` of the accepted step
it lies in, and takes the states at the new points from the solver's dense
output: the sensitivity march then sees a finer grid at the cost of at most
``m - 1`` dense-output evaluations per step, never a second state solve.
"""
from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from ..errors import PbsensError
from ..kernels.codes import BRANCH_PBS
from .trajectory import Trajectory

__all__ = ["refine_grid", "midpoint_plan", "bent_intervals", "gap_ends", "child_plan"]

#: Sub-points closer than this fraction of their sub-interval to an existing grid point are dropped
#: (an output time that falls next to one would otherwise leave a sliver interval).
_MIN_GAP = 1e-3

#: An interval is marched with the exp2 midpoint correction where a state leaves the chord between
#: the interval's ends by more than this fraction of the solver's error weight (:func:`bent_intervals`).
CHORD_TOL = 1e-3


def refine_grid(trajectory: Trajectory, m: int, split: str = "gaps", only=None) -> Trajectory:
    """The trajectory on a finer grid: no interval longer than ``1/m`` of its accepted step.

    Parameters
    ----------
    trajectory : Trajectory
        A solve with dense output (``trajectory.sol`` not None). The accepted
        steps are the segments of ``sol.ts`` when the dense output has them
        (Rodas5P's, scipy's ``OdeSolution``), else the intervals of ``trajectory.t``.
    m : int
        Sub-intervals per accepted step; 1 returns the trajectory unchanged.
    split : {"gaps", "steps"}
        ``"gaps"`` (default): every interval of ``trajectory.t`` (accepted steps
        with the output times merged in) longer than ``H/m``, ``H`` the length of
        the accepted step it lies in (for a step shortened to end at a stop, the
        size the step control chose, ``sol.h_free``, when the dense output has it:
        the stop does not change the solution's time scale), is split into ``ceil(m L / H)`` equal parts
        (``L`` its length); shorter intervals stay as they are. Where output
        times are denser than ``H/m`` (a long step near an equilibrium, crossing
        many output times) nothing is added, and the output spacing, often
        uniform, is kept (equal intervals let the exponential steps reuse their
        matrix functions). ``"steps"``: the ``m - 1`` interior points of every
        accepted step, whatever the output times inside it (an interior point
        within 1/1000 of its sub-interval of an existing grid point is left out).
    only : array_like of bool (len(trajectory.t) - 1,), optional
        Refine only the intervals of ``trajectory.t`` marked True (the others keep
        their two ends and nothing in between). Default: every interval.

    Returns
    -------
    Trajectory
        A copy whose ``t`` contains the original grid (output times and stop
        times included) and the new points, with ``x`` there from
        ``trajectory.sol``; the original grid points keep their states bit for
        bit. ``eval_index`` points at ``t_eval`` in the new grid;
        ``stats["refine"]`` is ``m``.

    Raises
    ------
    PbsensError
        ``m`` not a positive integer, ``split`` unknown, or a trajectory without dense output.
    """
    if isinstance(m, bool) or not isinstance(m, numbers.Integral) or m < 1:
        raise PbsensError(f"'substeps' must be a positive integer, got {m!r}")
    if split not in ("gaps", "steps"):
        raise PbsensError(f"'split' must be 'gaps' or 'steps', got {split!r}")
    m = int(m)
    if not isinstance(trajectory, Trajectory):
        raise PbsensError("'trajectory' must be a Trajectory (from solve_states) to refine its grid")
    if m == 1:
        return trajectory
    sol = trajectory.sol
    if sol is None:
        raise PbsensError("'trajectory' has no dense output to refine its grid from "
                          "(solve_states(..., dense_output=True))")
    t = np.asarray(trajectory.t, dtype=np.float64)
    steps, H = _accepted_steps(t, sol)
    if split == "gaps":
        t_sub = _gap_points(t, steps, m, H)
    else:
        t_sub = _step_points(t, steps, m)
    if only is not None:
        only = np.asarray(only)
        if only.dtype != bool or only.shape != (t.size - 1,):
            raise PbsensError(f"'only' must be a boolean array with one entry per grid interval "
                              f"({t.size - 1}), got dtype {only.dtype} and shape {only.shape}")
        t_sub = t_sub[only[np.searchsorted(t, t_sub) - 1]]
    K = t.size + t_sub.size
    t_new = np.empty(K)
    x_new = np.empty((K, trajectory.x.shape[1]))
    pos_old = np.searchsorted(t_sub, t) + np.arange(t.size)   # where each old point lands
    is_old = np.zeros(K, dtype=bool)
    is_old[pos_old] = True
    t_new[pos_old] = t
    x_new[pos_old] = trajectory.x
    t_new[~is_old] = t_sub
    if t_sub.size:
        x_new[~is_old] = np.asarray(sol(t_sub)).T
    eval_index = None if trajectory.eval_index is None else pos_old[np.asarray(trajectory.eval_index)]
    stats = dict(trajectory.stats)
    stats["refine"] = m
    return dataclasses.replace(trajectory, t=t_new, x=x_new, eval_index=eval_index, stats=stats)


def _accepted_steps(t, sol):
    """The accepted steps' boundaries within ``[t[0], t[-1]]`` and, when the dense output has them,
    the sizes the step control chose (``sol.h_free``: a step shortened to end at a stop is measured
    against the step the control chose), else None."""
    steps = np.asarray(getattr(sol, "ts", t), dtype=np.float64)
    h_free = getattr(sol, "h_free", None)
    inside = (steps >= t[0]) & (steps <= t[-1])
    if h_free is not None and np.size(h_free) == steps.size - 1 and inside.all():
        H = np.maximum(np.asarray(h_free, dtype=np.float64), np.diff(steps))
    else:
        H = None
    steps = steps[inside]
    if steps.size < 2:
        steps = t[[0, -1]]
        H = None
    return steps, H


def _gap_parts(t, steps, m, H_step=None):
    """Per interval of ``t``: into how many equal parts ``split="gaps"`` cuts it (1: kept whole)."""
    L = np.diff(t)
    j = np.clip(np.searchsorted(steps, t[:-1], side="right") - 1, 0, steps.size - 2)
    H = steps[j + 1] - steps[j] if H_step is None else H_step[j]
    # parts per interval; the factor keeps an interval of exactly H/m (to rounding) whole
    return np.maximum(np.ceil(L * m / H * (1.0 - 1e-9)), 1.0).astype(np.int64)


def midpoint_plan(t, sol, m, x=None, tol=None):
    """The intervals of the grid ``t`` that :func:`refine_grid` (``split="gaps"``) would split,
    and, with ``x`` and ``tol``, those where the states bend (:func:`bent_intervals`), for the
    exp2 midpoint correction instead (METHOD.md section 14).

    Parameters
    ----------
    t : (K,) the grid (the solver's steps with the output times merged in).
    sol : the trajectory's dense output (callable; ``ts``/``h_free`` as in :func:`refine_grid`).
    m : int, the ``substeps`` that defines a long interval.
    x : (K, nx), optional: the states at ``t``.
    tol : ``(rtol, atol)`` of the solve, optional (a NaN ``rtol``, as on a hand-made
        Trajectory, or None: only the long intervals).

    Returns
    -------
    x_mid : (M, nx)
        The states at their midpoints, from ``sol``.
    mid_index : (K-1,) int64
        ``i >= 0`` for the ``i``-th such interval (its midpoint's row of ``x_mid``), -1 for the others.
    """
    t = np.asarray(t, dtype=np.float64)
    steps, H = _accepted_steps(t, sol)
    corrected = _gap_parts(t, steps, m, H) > 1
    if x is None or tol is None or not np.isfinite(tol[0]) or t.size < 2:
        return corrected_plan(t, sol, corrected)
    x_all = np.asarray(sol(0.5 * (t[:-1] + t[1:]))).T        # every midpoint: one dense-output call
    corrected |= bent_intervals(np.asarray(x, dtype=np.float64), x_all, *tol)
    return corrected_plan(t, sol, corrected, x_all)


def bent_intervals(x, x_mid, rtol, atol):
    """Per interval of a grid with states ``x`` (K, nx) and midpoint states ``x_mid`` (K-1, nx):
    True where some state leaves the chord between the interval's ends by more than
    ``CHORD_TOL`` of the solver's error weight ``atol + rtol |x|`` (METHOD.md section 14, "Where
    the states bend"). The plain exp2 step takes ``A`` and ``B`` linear in time over the interval,
    which such an interval, however short, is not."""
    w = np.asarray(atol, dtype=np.float64) + rtol * np.maximum(np.abs(x[:-1]), np.abs(x[1:]))
    return np.any(np.abs(x_mid - 0.5 * (x[:-1] + x[1:])) > CHORD_TOL * w, axis=1)


def corrected_plan(t, sol, corrected, x_mid_all=None):
    """:func:`midpoint_plan`'s ``(x_mid, mid_index)`` for the intervals of ``t`` where the boolean
    ``corrected`` (``K-1``) holds, the states at their midpoints from the dense output ``sol`` (or
    the rows of ``x_mid_all``, the states at every interval's midpoint, when given)."""
    t = np.asarray(t, dtype=np.float64)
    idx = np.flatnonzero(corrected)
    mid_index = np.full(t.size - 1, -1, dtype=np.int64)
    mid_index[idx] = np.arange(idx.size)
    if x_mid_all is not None:
        x_mid = np.ascontiguousarray(x_mid_all[idx], dtype=np.float64)
    elif idx.size:
        x_mid = np.ascontiguousarray(np.asarray(sol(0.5 * (t[idx] + t[idx + 1]))).T, dtype=np.float64)
    else:
        x_mid = np.empty((0, np.asarray(sol(t[:1])).shape[0]))
    return x_mid, mid_index


def lone_points(t, out_index, steps, keep=None):
    """Grid points the exp2 midpoint correction makes redundant (METHOD.md section 14, "Output
    intervals in one step"): a point that is not an output (``out_index < 0``), is the only grid
    point strictly between its two neighbouring outputs, and whose removal leaves an interval
    no longer than the longer of the two accepted solver steps that meet there.

    Parameters
    ----------
    t : (K,) the grid (the solver's steps with the output times merged in).
    out_index : (K,) int, ``>= 0`` at the output times; the first and last points are never lone.
    steps : (M,) the accepted steps' boundaries (increasing; ``sol.ts``).
    keep : (K,) bool, optional: points that must stay (stops where the solve restarted).

    Returns
    -------
    (K,) bool: True at the lone points.
    """
    t = np.asarray(t, dtype=np.float64)
    out_index = np.asarray(out_index)
    K = t.size
    anchor = out_index >= 0
    anchor[[0, K - 1]] = True
    if keep is not None:
        anchor |= np.asarray(keep, dtype=bool)
    seg = np.cumsum(anchor) - 1                      # the anchor at or before each point
    inner = np.bincount(seg[~anchor], minlength=int(seg[-1]) + 1)
    lone = ~anchor & (inner[seg] == 1)
    k = np.flatnonzero(lone)
    steps = np.asarray(steps, dtype=np.float64)
    if steps.size < 2:
        lone[:] = False
    elif k.size:
        # the step ending at or holding t[k], and the step starting there (the same one when t[k]
        # is inside a step)
        j = np.clip(np.searchsorted(steps, t[k]), 1, steps.size - 1)
        h_left = steps[j] - steps[j - 1]
        after = np.minimum(j + 1, steps.size - 1)
        h_right = np.where((steps[j] == t[k]) & (after > j), steps[after] - steps[j], h_left)
        lone[k] = (t[k + 1] - t[k - 1]) <= np.maximum(h_left, h_right) * (1.0 + 1e-12)
    return lone


def without_lone_points(t, x, out_index, sol, tstops=None):
    """The grid ``t`` (states ``x``, ``out_index``) less its :func:`lone_points` (the accepted steps
    from ``sol.ts``, the stops ``tstops`` kept): METHOD.md section 14, "Output intervals in one step"."""
    keep = None if tstops is None else np.isin(t, tstops)
    lone = lone_points(t, out_index, getattr(sol, "ts", t), keep)
    if not lone.any():
        return t, x, out_index
    return t[~lone], x[~lone], out_index[~lone]


def gap_ends(t, t_gaps):
    """Per interval of the refined grid ``t``, the index in ``t`` of the end of the gap of
    ``t_gaps`` (a subset of ``t``) it lies in."""
    pos = np.searchsorted(t, t_gaps)                   # the gap points' indices in t
    j = np.searchsorted(t_gaps, t[:-1], side="right")  # the gap each interval ends in
    return np.ascontiguousarray(pos[np.minimum(j, t_gaps.size - 1)], dtype=np.int64)


def _gap_points(t, steps, m, H_step=None):
    """New points (sorted) that split each interval of ``t`` longer than ``1/m`` of its accepted step
    (its length, or ``H_step``: per step, the size the step control chose before a stop shortened it)."""
    L = np.diff(t)
    n = _gap_parts(t, steps, m, H_step)
    long = np.flatnonzero(n > 1)
    if long.size == 0:
        return np.empty(0)
    cnt = n[long] - 1
    owner = np.repeat(long, cnt)
    first = np.concatenate(([0], np.cumsum(cnt)[:-1]))
    i = np.arange(cnt.sum()) - np.repeat(first, cnt) + 1
    t_sub = t[owner] + L[owner] * (i / n[owner])
    # strictly inside their interval (rounding could put one on an end)
    keep = (t_sub > t[owner]) & (t_sub < t[owner + 1])
    return t_sub[keep]


def _step_points(t, steps, m):
    """The ``m - 1`` interior points of every accepted step, less those next to an existing point."""
    h = np.diff(steps)
    frac = np.arange(1, m) / m
    t_sub = (steps[:-1, None] + h[:, None] * frac[None, :]).reshape(-1)
    gap = np.repeat(h / m * _MIN_GAP, m - 1)
    pos = np.searchsorted(t, t_sub)                      # t[pos-1] < t_sub <= t[pos]
    near = np.minimum(np.abs(t[np.minimum(pos, t.size - 1)] - t_sub), np.abs(t_sub - t[np.maximum(pos - 1, 0)]))
    return t_sub[near > gap]


def child_plan(parent_plan, t):
    """The switch's plan for a refinement ``t`` of the planned grid: every sub-interval takes
    its parent's branch; PBS sub-intervals (only where output times were merged in) their
    share of the parent's sub-steps."""
    tp, bp, np_ = parent_plan
    j = np.clip(np.searchsorted(tp, t[:-1], side="right") - 1, 0, tp.size - 2)
    branch = np.ascontiguousarray(bp[j])
    share = np.diff(t) / (tp[j + 1] - tp[j])
    n_int = np.where(branch == BRANCH_PBS, np.maximum(np.ceil(np_[j] * share - 1e-9), 1), 1)
    return branch, np.ascontiguousarray(n_int, dtype=np.int64)
