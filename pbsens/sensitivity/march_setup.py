"""The march setup of :func:`pbsens.sensitivities`: states, grid, output times, initial sensitivity.

From the validated options (:mod:`pbsens.sensitivity.options`) and the call's data
arguments, :func:`setup_march` builds a :class:`MarchSetup`: the state trajectory (solved
here when only ``t_span`` is given), refined by ``substeps`` from its dense output (the PBSR
switch decided on the solver's grid first), its grid checked, the output times located in
it (merged in from the dense output where they are not grid points), and the initial
sensitivity for the selected parameters. No numba import here: the state solver and the
bound kernels are the front door's (``solve``, ``bind``), so that replacing them there
(a test that no state solve happens) reaches every use.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..errors import PbsensError
from ..kernels import codes
from .options import DEFAULT_MIDPOINT, DEFAULT_SUBSTEPS
from .params import select_params
from ..solvers import Trajectory, check_t_eval, merge_grid
from ..solvers.refine import midpoint_plan, refine_grid

__all__ = ["MarchSetup", "setup_march", "check_grid"]


@dataclass(frozen=True)
class MarchSetup:
    """What the marches of one call run on (before any ``sens_rtol`` refinement).

    Attributes
    ----------
    trajectory : Trajectory or (t, x)
        The states: given, or solved here; refined by ``substeps``.
    t, x : ndarray
        The grid (output times merged in) and its states: the solver's grid the
        refinements interpolate from.
    out_index : ndarray of int64 (len(t),)
        Per grid point, its row in the output (``-1``: not an output time).
    t_out : ndarray
        The output times.
    p : ndarray
        The parameters (the trajectory's).
    sol : callable or None
        The trajectory's dense output.
    substeps : int or None
        ``substeps`` resolved for this trajectory (None for a ``(t, x)`` pair given None).
    use_mid : bool
        exp2's midpoint correction on the long intervals instead of sub-steps.
    parent_plan : (t, branch, n_int) or None
        The switch decided on the solver's grid before ``substeps`` refined it.
    t_gaps : ndarray or None
        The solver's grid before that refinement (the gaps ``freeze`` applies to).
    solver_info : dict
        ``solver``, ``rtol``, ``atol`` of a Trajectory; empty for a ``(t, x)`` pair.
    scale_atol : float
        The absolute term of the scaled norm (``norm="scaled"``).
    sel, sel_names : ndarray of int64, list of str
        The selected parameters (``params``).
    all_params : bool
        Every parameter selected (``params=None``), in model order.
    S_full, S : ndarray
        The initial sensitivity for every parameter, and for the selected ones.
    S0_used : ndarray
        A copy of ``S`` (the result's ``S0``).
    timings : dict
        Seconds spent so far: ``"states"`` (solved here), ``"refine"``.
    """

    trajectory: object
    t: np.ndarray
    x: np.ndarray
    out_index: np.ndarray
    t_out: np.ndarray
    p: np.ndarray
    sol: object
    substeps: int | None
    use_mid: bool
    parent_plan: tuple | None
    t_gaps: np.ndarray | None
    solver_info: dict
    scale_atol: float
    sel: np.ndarray
    sel_names: list
    S_full: np.ndarray
    S: np.ndarray
    S0_used: np.ndarray
    all_params: bool
    timings: dict

    def midpoint_plan(self, t, x):
        """The exp2 midpoint correction's ``(x_mid, mid_index)`` on the grid ``t`` (states ``x``):
        the long intervals (``substeps``) and those where the states bend against the solve's
        tolerances (:func:`pbsens.solvers.refine.midpoint_plan`)."""
        info = self.solver_info or {}
        tol = (info["rtol"], info["atol"]) if "rtol" in info and "atol" in info else None
        return midpoint_plan(t, self.sol, self.substeps, x, tol)


def setup_march(model, opts, trajectory, *, p, x0, S0, t_eval, t_span, params, solve, bind) -> MarchSetup:
    """The :class:`MarchSetup` of a call (``opts``: its :class:`~pbsens.sensitivity.options.SensitivityOptions`).

    ``solve``: :func:`pbsens.solvers.solve_states`, called when only ``t_span`` is given;
    ``bind(model)``: the model's bound kernels ``(march, plan)``, called only when the switch
    is planned on the solver's grid. Raises :class:`PbsensError` naming the argument at fault.
    """
    timings = {}
    trajectory = _states(model, opts, trajectory, t_span, t_eval, p, x0, timings, solve)
    if isinstance(trajectory, Trajectory):
        trajectory, grid = _on_trajectory(model, opts, trajectory, p, timings, bind)
        t_eval = trajectory.t_eval if t_eval is None and trajectory.t_eval is not None else t_eval
    else:
        grid = _on_pair(model, opts, trajectory, p)
    t, x, out_index, t_out = _output_times(t_eval, grid["t"], grid["x"], grid["sol"])
    if opts.state_error == "resolve" and not isinstance(trajectory, Trajectory):
        raise PbsensError("'state_error': 'resolve' needs a Trajectory (from solve_states) to re-solve")
    if opts.interpolation == "dense" and grid["sol"] is None:
        raise PbsensError("'interpolation': 'dense' needs a Trajectory with dense output "
                          "(solve_states(..., dense_output=True))")
    sel, sel_names, S_full, S = _initial_sensitivity(model, grid["p"], S0, params)
    solver_info = grid["solver_info"]
    return MarchSetup(trajectory=trajectory, t=t, x=x, out_index=out_index, t_out=t_out, p=grid["p"],
                      sol=grid["sol"], substeps=grid["substeps"], use_mid=grid["use_mid"],
                      parent_plan=grid["parent_plan"], t_gaps=grid["t_gaps"], solver_info=solver_info,
                      scale_atol=_scale_atol(solver_info.get("atol", opts.atol) if solver_info else opts.atol),
                      sel=sel, sel_names=sel_names, S_full=S_full, S=S, S0_used=S.copy(), all_params=params is None,
                      timings=timings)


def _states(model, opts, trajectory, t_span, t_eval, p, x0, timings, solve):
    """The trajectory given, or the states solved here on ``t_span``."""
    if trajectory is None:
        if t_span is None:
            raise PbsensError("give either 'trajectory' (a solve_states result or a (t, x) pair) or 't_span'")
        t0 = time.perf_counter()
        trajectory = solve(model, t_span, t_eval=t_eval, p=p, x0=x0, method=opts.solver, rtol=opts.rtol,
                           atol=opts.atol, dense_output=opts.interpolation == "dense"
                           or (opts.substeps or DEFAULT_SUBSTEPS.get(opts.solver, 1)) > 1)
        timings["states"] = time.perf_counter() - t0
    elif t_span is not None:
        raise PbsensError("give either 'trajectory' or 't_span', not both")
    elif x0 is not None:
        raise PbsensError("'x0' applies only when states are solved here (t_span=...); "
                          "the trajectory already fixes the initial state")
    return trajectory


def _on_trajectory(model, opts, trajectory, p, timings, bind):
    """A Trajectory: ``substeps`` resolved and applied (or the midpoint correction chosen), its grid checked."""
    substeps = opts.substeps
    if substeps is None:
        substeps = DEFAULT_SUBSTEPS.get(trajectory.method, 1) if trajectory.sol is not None else 1
    use_mid = (opts.info.midpoint and substeps != 1 and trajectory.sol is not None and opts.sens_rtol is None
               and (DEFAULT_MIDPOINT if opts.midpoint is None else opts.midpoint))
    parent_plan = t_gaps = None
    if substeps != 1 and not use_mid:
        t0 = time.perf_counter()
        t_gaps = trajectory.t     # the solver's grid (outputs merged): the gaps the refinement splits
        only = None
        if opts.info.switches and opts.interpolation != "dense" and opts.sens_rtol is None:
            # the switch decided on the solver's grid; only the exponential intervals are
            # refined (PBS intervals take their own n_int sub-steps)
            parent_plan = _switch_plan(model, trajectory, opts, bind(model)[1])
            only = parent_plan[1] != codes.BRANCH_PBS
        trajectory = refine_grid(trajectory, substeps, only=only)
        timings["refine"] = time.perf_counter() - t0
    traj_p = model.check_p(trajectory.p, "trajectory.p")   # an edited or foreign Trajectory
    if p is not None and not np.array_equal(model.check_p(p), traj_p):
        raise PbsensError("'p' differs from the parameters the trajectory was solved with; "
                          "solve the states again with these parameters")
    t, x = check_grid(model, trajectory.t, trajectory.x)
    return trajectory, dict(t=t, x=x, p=traj_p, sol=trajectory.sol, substeps=substeps, use_mid=use_mid,
                            parent_plan=parent_plan, t_gaps=t_gaps,
                            solver_info={"solver": trajectory.method, "rtol": trajectory.rtol,
                                         "atol": trajectory.atol})


def _on_pair(model, opts, trajectory, p):
    """A ``(t, x)`` pair from any solver: no dense output, no refinement."""
    if not isinstance(trajectory, (tuple, list)) or len(trajectory) != 2:
        raise PbsensError("'trajectory' must be a Trajectory or a pair (t, x)")
    if opts.substeps not in (None, 1):
        raise PbsensError("'substeps' needs a Trajectory with dense output, not a (t, x) pair")
    p = model.check_p(p)
    t, x = check_grid(model, *trajectory)
    return dict(t=t, x=x, p=p, sol=None, substeps=opts.substeps, use_mid=False, parent_plan=None, t_gaps=None,
                solver_info={})


def _output_times(t_eval, t, x, sol):
    """``(t, x, out_index, t_out)``: the output times located in the grid, merged in from ``sol`` if needed."""
    if t_eval is None:
        return t, x, np.arange(t.size, dtype=np.int64), t
    from ..kernels import checks  # numba kernels load on first use, not at import
    try:
        te = np.ascontiguousarray(t_eval, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        te = None
    out_index = np.empty(t.size, dtype=np.int64)
    n_missing = checks.locate_outputs(t, te, out_index) if te is not None and te.size else -1
    if n_missing < 0:
        check_t_eval(t_eval, (t[0], t[-1]))   # raises for every negative code, naming the argument
    if n_missing > 0:
        if sol is None:
            missing = ~np.isin(te, t)
            raise PbsensError(f"'t_eval': {n_missing} time(s) (first {te[missing][0]:.6g}) are not "
                              "points of the trajectory's grid; pass them to solve_states(t_eval=...) or "
                              "give a Trajectory with dense output")
        t, x, idx = merge_grid(t, x, te, sol)
        out_index = np.full(t.size, -1, dtype=np.int64)
        out_index[idx] = np.arange(te.size)
    return t, x, out_index, te


def _initial_sensitivity(model, p, S0, params):
    """``(sel, sel_names, S_full, S)``: the selected parameters, ``S0`` for all of them and for the selection."""
    sel, sel_names = select_params(model, params)
    nx, np_ = model.n_states, sel.size
    if S0 is None:
        S_full = model.initial_sensitivity(p)
    elif params is not None and np.shape(S0) == (nx, np_) and np_ != model.n_params:
        S_full = np.zeros((nx, model.n_params))
        S_full[:, sel] = model.check_S(S0, n_cols=np_)
    else:
        S_full = model.check_S(S0)
    S_full = np.ascontiguousarray(S_full)
    S = S_full if params is None else np.ascontiguousarray(S_full[:, sel])
    return sel, sel_names, S_full, S


def check_grid(model, t, x):
    """``(t, x)`` as contiguous float64 arrays, checked: real, finite, ``x`` of shape
    ``(len(t), n_states)``, at least two points, ``t`` strictly increasing."""
    if np.iscomplexobj(t) or np.iscomplexobj(x):
        raise PbsensError("'trajectory': t and x must be real, got complex values")
    try:
        t = np.ascontiguousarray(t, dtype=np.float64).reshape(-1)
        x = np.ascontiguousarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise PbsensError("'trajectory' must be a Trajectory or a pair (t, x) of numeric arrays") from None
    if t.size < 2:
        raise PbsensError(f"'trajectory': the grid t needs at least two points, got {t.size}")
    if x.shape != (t.size, model.n_states):
        raise PbsensError(f"'trajectory': x must have shape (len(t), n_states) = ({t.size}, "
                          f"{model.n_states}), got {x.shape}")
    from ..kernels import checks  # numba kernels load on first use, not at import
    status = checks.grid_status(t, x)
    if status == checks.GRID_NOT_FINITE:
        raise PbsensError("'trajectory' contains NaN or inf in t or x")
    if status == checks.GRID_NOT_INCREASING:
        raise PbsensError("'trajectory': the grid t must be strictly increasing")
    return t, x


def _scale_atol(atol):
    """The absolute term of the scaled norm's ``D = diag(|x| + atol)``: the smallest state ``atol``."""
    a = np.asarray(atol, dtype=np.float64)
    return float(np.min(a)) if a.size and np.all(np.isfinite(a)) and np.min(a) > 0 else 1e-6


def _switch_plan(model, trajectory, opts, bound_plan):
    """PBSR's switch (branch, n_int) on the trajectory's own grid, before it is refined.

    Returns ``(t, branch, n_int)``. With a refined grid the switch would see intervals
    ``m`` times shorter, move many from the exponential step (one matrix function) to PBS
    (up to ``n_max`` sub-steps each), and so pay up to 100x more on them (PKA, Rodas5P, rtol
    1e-5: 294 PBS sub-steps on the solver's grid, 1673 on the 4x refined one).
    """
    p = model.check_p(trajectory.p, "trajectory.p")
    t, x = check_grid(model, trajectory.t, trajectory.x)
    branch = np.empty(t.size - 1, dtype=np.int8)
    n_int = np.empty(t.size - 1, dtype=np.int64)
    bound_plan(t, x, p, model.constants, opts.method_code, opts.n_factor, opts.n_max, opts.eq_tol, opts.norm_code,
               branch, n_int, _scale_atol(trajectory.atol))
    return t, branch, n_int
