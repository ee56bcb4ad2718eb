"""The marches of :func:`pbsens.sensitivities` and their step-doubling estimate (METHOD.md section 11).

* :func:`march_with_estimate`: one march on the setup's grid (the midpoint correction or
  the frozen gaps where they apply) and, with ``estimate_error``, a second one on the grid
  bisected, their difference the estimate.
* :func:`refine_to_tolerance`: with ``sens_rtol``, marches on the grid and on the grid
  bisected (and, for a first-order march, bisected twice: the result is the extrapolation)
  until the estimate meets the tolerance at every grid point, splitting the intervals whose
  local error exceeds their share, within ``max_refine`` rounds and ``max_grid_factor``.

Both return a :class:`Marched`. The helpers of the estimate are in :mod:`pbsens.sensitivity.error`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from . import error as error_estimate
from ..system import memory
from ..solvers.refine import child_plan, corrected_plan, gap_ends, without_lone_points

__all__ = ["Marched", "march_with_estimate", "refine_to_tolerance"]

#: ``stacklevel`` of a warning issued here: the call of :func:`pbsens.sensitivities`
#: (warn_range, this module, sensitivities, its BLAS-scope wrapper, the caller).
_CALLER = 5


@dataclass(frozen=True)
class Marched:
    """A march's result on its final grid.

    ``t``, ``x``, ``out_index``: the grid marched (the setup's, less the lone points of the
    midpoint correction, or refined by ``sens_rtol``); ``S_out`` at the output times;
    ``branch``, ``n_int``, ``reused`` per grid interval. With an estimate: ``E_est``,
    ``E_par``, ``E_mat`` (overall, per parameter, signed matrix); ``S_plain``: the
    un-extrapolated march behind an extrapolated ``S_out``; ``n_split``: intervals split by
    ``sens_rtol``; ``gap_end``: the frozen gaps (``freeze``), None where none; ``mid_index``: the
    intervals marched with the midpoint correction (``solvers.refine.midpoint_plan``), None where none.
    """

    t: np.ndarray
    x: np.ndarray
    out_index: np.ndarray
    S_out: np.ndarray
    branch: np.ndarray
    n_int: np.ndarray
    reused: np.ndarray
    E_est: np.ndarray | None = None
    E_par: np.ndarray | None = None
    E_mat: np.ndarray | None = None
    S_plain: np.ndarray | None = None
    n_split: int = 0
    gap_end: np.ndarray | None = None
    mid_index: np.ndarray | None = None


def march_with_estimate(model, opts, setup, march, timings, t0) -> Marched:
    """The march on the setup's grid; with ``opts.estimate_error`` its step-doubling estimate.

    ``march``: the call's :class:`~pbsens.sensitivity.marcher.Marcher`; ``timings`` gains
    ``"sensitivities"`` (since ``t0``) and ``"error_estimate"``.
    """
    t, x, out_index, sol = setup.t, setup.x, setup.out_index, setup.sol
    gap_end = None
    if (opts.freeze > 0 and opts.info.freeze and setup.t_gaps is not None and setup.t_gaps.size < t.size
            and not opts.use_sparse):
        gap_end = gap_ends(t, setup.t_gaps)
    plan_in = None if setup.parent_plan is None else child_plan(setup.parent_plan, t)
    mid = None
    if setup.use_mid:      # an output interval holding one solver point is one corrected step
        t, x, out_index = without_lone_points(t, x, out_index, sol, getattr(setup.trajectory, "tstops", None))
        mid = setup.midpoint_plan(t, x)
    S_out, branch, n_int, reused = march(t, x, out_index, setup.t_out.size, plan_in=plan_in, gap_end=gap_end,
                                         mid=mid)
    timings["sensitivities"] = time.perf_counter() - t0
    mid_index = None if mid is None else mid[1]
    if not opts.estimate_error:
        return Marched(t, x, out_index, S_out, branch, n_int, reused, gap_end=gap_end, mid_index=mid_index)
    t1 = time.perf_counter()
    t2, x2, pos = error_estimate.midpoint_states(model, setup.p, t, x, setup.t, setup.x, sol)
    oi2 = np.full(t2.size, -1, dtype=np.int64)
    oi2[pos] = out_index
    mid2 = None if mid is None else halves_plan(mid[1], pos, t2, sol)
    S_fine = march(t2, x2, oi2, setup.t_out.size, mid=mid2)[0]
    order = error_estimate.method_order(opts.method, branch)
    E_est, E_par = error_estimate.relative_difference(S_out, S_fine, order)
    E_mat = (2.0 ** order / (2.0 ** order - 1.0)) * (S_out - S_fine)
    timings["error_estimate"] = time.perf_counter() - t1
    return Marched(t, x, out_index, S_out, branch, n_int, reused, E_est=E_est, E_par=E_par, E_mat=E_mat,
                   gap_end=gap_end, mid_index=mid_index)


def halves_plan(mid_index, pos, t2, sol):
    """The midpoint plan of the bisected grid ``t2`` (coarse point ``k`` at ``t2[pos[k]]``): both halves
    of every corrected coarse interval are corrected, the others not, so that the step doubling
    compares the same march on the two grids (METHOD.md section 11)."""
    return corrected_plan(t2, sol, np.repeat(np.asarray(mid_index) >= 0, np.diff(pos)))


@dataclass(frozen=True)
class _Round:
    """One round's marches at every grid point: the pair compared, its factor, the estimate."""

    pair: tuple
    c_pair: float
    order: int
    S_all: np.ndarray
    R_fine: np.ndarray | None
    branch: np.ndarray
    n_int: np.ndarray
    reused: np.ndarray


def refine_to_tolerance(model, opts, setup, march, timings, t0) -> Marched:
    """Refine the grid until the step-doubling estimate meets ``sens_rtol``, ``sens_atol`` at every
    grid point (or a limit is reached: an ``AccuracyWarning`` names the time range)."""
    t, x, out_index = setup.t, setup.x, setup.out_index
    sens_rtol, sens_atol = opts.sens_rtol, opts.sens_atol
    n_split = 0
    for round_ in range(opts.max_refine + 1):
        r = _round(model, setup, march, opts.method, t, x)
        E_all, Ep_all = error_estimate.relative_difference(*r.pair, 2, c=r.c_pair)
        nrm = np.sqrt(np.einsum("kij,kij->k", r.pair[1], r.pair[1]))
        D = r.pair[0] - r.pair[1]
        abs_err = r.c_pair * np.sqrt(np.einsum("kij,kij->k", D, D))
        ok = abs_err <= sens_rtol * nrm + sens_atol
        if np.all(ok) or round_ == opts.max_refine:
            break
        counts = _split_counts(opts, t, r, ok, setup.t.size)
        if counts is None:
            break
        t_new, x_new, pos_new = error_estimate.midpoint_states(model, setup.p, t, x, setup.t, setup.x, setup.sol,
                                                               counts)
        n_split += int((counts > 1).sum())
        oi_new = np.full(t_new.size, -1, dtype=np.int64)
        oi_new[pos_new] = out_index
        t, x, out_index = t_new, x_new, oi_new
    out = _at_outputs(model, setup, t, x, out_index, r, E_all, Ep_all, n_split)
    if not np.all(ok):
        error_estimate.warn_range(t, ~ok, f"sens_rtol={sens_rtol:g}, sens_atol={sens_atol:g} not met within "
                                  f"the refinement limit ({opts.max_refine} rounds, grid at most "
                                  f"{opts.max_grid_factor}x the state solver's)", stacklevel=_CALLER)
    timings["sensitivities"] = time.perf_counter() - t0
    return out


def _round(model, setup, march, method, t, x) -> _Round:
    """The marches of one round on the grid ``t``, stored at every grid point, and the pair to compare."""
    p, sol = setup.p, setup.sol
    all_index = np.arange(t.size, dtype=np.int64)
    S_all, branch, n_int, reused = march(t, x, all_index, t.size)
    t2, x2, pos = error_estimate.midpoint_states(model, p, t, x, setup.t, setup.x, sol)
    oi2 = np.full(t2.size, -1, dtype=np.int64)
    oi2[pos] = all_index
    S_fine = march(t2, x2, oi2, t.size)[0]
    order = error_estimate.method_order(method, branch)
    R_fine = None
    if order == 1:
        # first order: the result is the extrapolation of the finer pair (h/2, h/4); its error is
        # estimated from the two extrapolations (h, h/2) and (h/2, h/4), which differ by the
        # second-order remainder (a third march, on the grid bisected twice)
        t4, x4, pos4 = error_estimate.midpoint_states(model, p, t2, x2, setup.t, setup.x, sol)
        oi4 = np.full(t4.size, -1, dtype=np.int64)
        oi4[pos4[pos]] = all_index
        S_fine4 = march(t4, x4, oi4, t.size)[0]
        R_coarse = error_estimate.extrapolate(S_all, S_fine, 1)
        R_fine = error_estimate.extrapolate(S_fine, S_fine4, 1)
        pair, c_pair = (R_coarse, R_fine), error_estimate.EXTRAPOLATION_FACTOR
    else:
        pair, c_pair = (S_all, S_fine), 4.0 / 3.0
    return _Round(pair, c_pair, order, S_all, R_fine, branch, n_int, reused)


def _split_counts(opts, t, r, ok, n_solver):
    """Parts per interval of ``t`` for the next round, scaled down to the grid budget
    (``max_grid_factor`` times the ``n_solver`` points of the solver's grid); None: stop here."""
    counts = error_estimate.refine_counts(t, r.pair[0], r.pair[1], 2, opts.sens_rtol, opts.sens_atol,
                                          opts.max_split, c=r.c_pair)
    if np.all(counts == 1):      # the per-interval shares are met; split where the total is not
        bad = ~ok
        counts[np.flatnonzero(bad[1:])] = 2
    room = int(opts.max_grid_factor * n_solver) - t.size
    extra = int((counts - 1).sum())
    if extra > room:       # stated limit: scale the splits down to the grid budget, or keep this grid
        counts = 1 + ((counts - 1) * max(room, 0)) // extra
        if not np.any(counts > 1):
            return None
    return counts


def _at_outputs(model, setup, t, x, out_index, r, E_all, Ep_all, n_split) -> Marched:
    """The last round's result and estimate at the output times."""
    nx, np_, n_out = model.n_states, setup.sel.size, setup.t_out.size
    keep = out_index >= 0
    S_out = memory.empty((n_out, nx, np_))
    S_out[out_index[keep]] = r.R_fine[keep] if r.order == 1 else r.S_all[keep]
    S_plain = None
    if r.order == 1:
        S_plain = np.empty_like(S_out)
        S_plain[out_index[keep]] = r.S_all[keep]
    E_est = np.empty(n_out)
    E_par = np.empty((n_out, np_))
    E_est[out_index[keep]] = E_all[keep]
    E_par[out_index[keep]] = Ep_all[keep]
    E_mat = np.empty((n_out, nx, np_))
    E_mat[out_index[keep]] = r.c_pair * (r.pair[0][keep] - r.pair[1][keep])
    return Marched(t, x, out_index, S_out, r.branch, r.n_int, r.reused, E_est=E_est, E_par=E_par, E_mat=E_mat,
                   S_plain=S_plain, n_split=n_split)
