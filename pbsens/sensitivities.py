"""The front door: :func:`sensitivities` (post-hoc PBSR, PBS, Exp and their second-order variants).

Data flow: a :class:`~pbsens.solvers.Trajectory` (or any solver's ``(t, x)``) ->
validated grid and options -> the march kernel (:mod:`pbsens.kernels.march`) ->
:class:`~pbsens.result.SensitivityResult`. This module knows nothing of numba.
"""
from __future__ import annotations

import functools
import inspect
import time

import numpy as np

from . import error_estimate, memory
from .errors import AccuracyWarning, PbsensError, SolverError
from .kernels import codes
from .model.model import check_model
from .result import BRANCH_NAMES, SensitivityResult
from .solvers import Trajectory, check_t_eval, merge_grid, solve_states
from .solvers.refine import child_plan, gap_ends, midpoint_plan, refine_grid, without_lone_points
from .threads import limit_blas_threads

__all__ = ["sensitivities", "METHODS", "DEFAULT_SUBSTEPS"]

_SWITCH_METHODS = ("pbsr", "pbsr2")

#: Sub-intervals per accepted step of the post-hoc grid when the states come from Rodas5P
#: (``substeps=None``); chosen from benchmarks/work_precision.py (docs/PERFORMANCE.md).
DEFAULT_SUBSTEPS = {"rodas5p": 4}

#: ``method="exp2"``: the midpoint correction on the intervals ``substeps`` defines as long,
#: instead of sub-steps (``midpoint=None``); chosen from benchmarks/work_precision.py.
DEFAULT_MIDPOINT = True

#: Post-hoc methods accepted by :func:`sensitivities`.
METHODS = tuple(codes.METHOD_CODES)
_BRANCH_ARRAY = np.array(BRANCH_NAMES)   # fixed-width strings, indexed by the kernels' branch codes


def _bound(model):
    """The model's bound kernels, compiled once per model and process."""
    cache = model.__dict__.setdefault("_kernels", {})
    if "march" not in cache:
        from .kernels import march  # numba kernels load on first use, not at import
        cache["march"] = march.bind(model.fns)
    return cache["march"]


def _check_grid(model, t, x):
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
    from .kernels import checks  # numba kernels load on first use, not at import
    status = checks.grid_status(t, x)
    if status == checks.GRID_NOT_FINITE:
        raise PbsensError("'trajectory' contains NaN or inf in t or x")
    if status == checks.GRID_NOT_INCREASING:
        raise PbsensError("'trajectory': the grid t must be strictly increasing")
    return t, x


def _positive(v, name, integer=False):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not np.isfinite(v) \
            or v <= 0 or (integer and int(v) != v):
        raise PbsensError(f"{name!r} must be a positive {'integer' if integer else 'number'}, got {v!r}")
    return int(v) if integer else float(v)


def _nonnegative(v, name):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not np.isfinite(v) \
            or v < 0:
        raise PbsensError(f"{name!r} must be a non-negative number, got {v!r}")
    return float(v)


def _scale_atol(atol):
    """The absolute term of the scaled norm's ``D = diag(|x| + atol)``: the smallest state ``atol``."""
    a = np.asarray(atol, dtype=np.float64)
    return float(np.min(a)) if a.size and np.all(np.isfinite(a)) and np.min(a) > 0 else 1e-6


def _switch_plan(model, trajectory, method_code, n_factor, n_max, eq_tol, norm_kind):
    """PBSR's switch (branch, n_int) on the trajectory's own grid, before it is refined.

    Returns ``(t, branch, n_int)``. With a refined grid the switch would see intervals
    ``m`` times shorter, move many from the exponential step (one matrix function) to PBS
    (up to ``n_max`` sub-steps each), and so pay up to 100x more on them (PKA, Rodas5P, rtol
    1e-5: 294 PBS sub-steps on the solver's grid, 1673 on the 4x refined one).
    """
    p = model.check_p(trajectory.p, "trajectory.p")
    t, x = _check_grid(model, trajectory.t, trajectory.x)
    branch = np.empty(t.size - 1, dtype=np.int8)
    n_int = np.empty(t.size - 1, dtype=np.int64)
    _bound(model)[1](t, x, p, model.constants, method_code, n_factor, n_max, eq_tol, norm_kind, branch, n_int,
                     _scale_atol(trajectory.atol))
    return t, branch, n_int


def sensitivities(model, trajectory=None, method="pbsr", p=None, x0=None, S0=None, t_eval=None, *,
                  t_span=None, solver="LSODA", rtol=1e-5, atol=1e-6, n_factor=10.0, n_max=100,
                  eq_tol=1e-4, norm="1", interpolation="linear", reuse_tol=1e-12,
                  substeps=None, estimate_error=False,
                  sens_rtol=None, sens_atol=None, state_error="auto", max_refine=12, max_split=64,
                  max_grid_factor=200, max_substeps=10_000_000, tighten_states=True,
                  linalg="auto", freeze=1.0, params=None, midpoint=None) -> SensitivityResult:
    """Post-hoc sensitivities ``S = dx/dp`` on a state trajectory's grid.

    Solves the sensitivity equation ``S' = A S + B`` (2.3) by marching over the
    state solver's grid with the Jacobians ``A = df/dx``, ``B = df/dp`` evaluated
    at the grid's states, never calling the state solver again (METHOD.md section 2).

    Parameters
    ----------
    model : Model
    trajectory : Trajectory or (t, x), optional
        The state solution: from :func:`solve_states`, or any solver's grid ``t``
        (K,) and states ``x`` (K, nx). If omitted, ``t_span`` is required and the
        states are solved here with ``solver``, ``rtol``, ``atol``.
    method : {"pbsr", "exp", "pbs", "exp2", "pbsr2"}
        ``"pbsr"``: Algorithm 2, PBS step (4.6) with refinement, switching to the
        exponential step (3.10) on stiff or equilibrium intervals. ``"exp"``:
        Algorithm 3, the exponential step on every interval. ``"pbs"``: the PBS
        step with refinement everywhere (no switch). ``"exp2"``/``"pbsr2"``: the
        second-order exponential-midpoint step, alone or as PBSR's fallback.
    p : array_like, optional
        Parameters; default the trajectory's (or the model's). Must equal the
        trajectory's parameters when a Trajectory is given.
    x0 : array_like, optional
        Initial state when solving states here.
    S0 : array_like (nx, np), optional
        Initial sensitivity ``dx0/dp``; default derived from the model (zero unless
        initial values depend on parameters).
    t_eval : array_like, optional
        Output times. They must be grid points; with a Trajectory that has dense
        output they are merged into its grid exactly. Default: the trajectory's
        ``t_eval`` if it has one, else the whole grid. Only ``len(t_eval)`` copies
        of ``S`` are stored.
    t_span : (t0, t1), optional
        Solve states on this span first (when no trajectory is given).
    solver, rtol, atol :
        State solver settings when solving states here (:func:`solve_states`).
    n_factor, n_max, eq_tol : float, int, float
        PBSR switch (Algorithm 2): ``n_int = ceil(n_factor h ||A_k||)`` sub-intervals
        (so that ``h ||A|| <= 1/n_factor`` per sub-step); the exponential step when
        ``n_int > n_max`` ("exp-stiff") or when ``||A_k+1 - A_k|| <= eq_tol ||A_k||``
        and ``||B_k+1 - B_k|| <= eq_tol ||B_k||`` ("exp-equilibrium"). Paper: 10, 100, 1e-4.
    norm : {"1", "inf", "fro", "scaled"}
        Matrix norm of the switch; default the 1-norm (max column sum). ``"scaled"``:
        ``n_int`` from the 1-norm of ``D^-1 A_k D``, ``D = diag(|x_k| + atol)`` (``atol``
        the state solver's; invariant under unit changes of a state), the equilibrium
        test in the 1-norm.
    interpolation : {"linear", "hermite", "dense"}
        States at refinement points: linear between grid states (the paper), cubic
        Hermite using ``f`` at both ends, or the solver's dense output (needs a
        Trajectory from :func:`solve_states`).
    reuse_tol : float
        An exponential step reuses the previous interval's ``exp(hA)`` and phi
        functions when ``h`` and the matrix (``A_k``; ``(A_k + A_k+1)/2`` for the
        second-order step) differ from theirs by at most ``reuse_tol`` relative
        (1-norm). The default, 1e-12, only catches changes near rounding level, as
        at an equilibrium where the state moves in its last digits; ``A_k`` is
        known only to the state solver's ``rtol`` anyway. Measured at rtol 1e-5
        against 1e-13 (the default before): CaMKII reuses 169 instead of 123 of
        LSODA's 423 intervals (180 instead of 133 of Rodas5P's) with the median
        and largest error of ``S`` unchanged to 3 digits (Rodas5P exp2 median
        5.4e-12 -> 5.8e-12); PKA and Chua unchanged. 0: reuse on equality
        only. An exp2 step that reuses them also reuses its forcing term
        ``G1 B_k + G2 B_k+1`` while ``B_k``, ``B_k+1`` stay within ``reuse_tol`` of
        the cached ones (relative to their largest entry): one product instead of three.
        (PBS sub-steps reuse their step matrices only when the Jacobians are
        exactly equal, which leaves the result unchanged.)
    substeps : int, optional
        Refine the grid so that no interval is longer than ``1/substeps`` of the
        state solver's accepted step it lies in (longer intervals are split into
        equal parts), states at the new points from the solver's dense output
        (:func:`pbsens.solvers.refine.refine_grid`; never a second state solve).
        A high-order solver such as ``"rodas5p"`` takes few long steps, on which
        the first/second-order post-hoc steps lose accuracy. With ``"pbsr"`` /
        ``"pbsr2"`` (and linear or Hermite interpolation) the switch is decided on
        the solver's grid and only the exponential intervals are refined; PBS
        intervals take their own ``n_int`` sub-steps. Default (None):
        ``DEFAULT_SUBSTEPS["rodas5p"]`` (4) for a Rodas5P trajectory, 1 (the
        solver's grid as is) for every other solver. Values above 1 need a
        Trajectory with dense output.
    estimate_error : bool
        Fill ``error_estimate`` (and ``error_estimate_params``): an estimate of
        ``E_k`` (METHOD.md sections 7 and 11) by step doubling on the same trajectory,
        one more march on the grid with every interval bisected (states there from
        the dense output, or cubic Hermite interpolation). Default False: the
        estimate costs two to three more marches (and, with ``state_error="auto"``,
        a second state solve), 3-20x the cost of the sensitivities themselves on the
        paper's models (METHOD.md section 11), too much to pay on every call inside
        an optimiser or sampler; ask for it where the answer matters.
    sens_rtol, sens_atol : float, optional
        Tolerance on ``S``: grid intervals whose estimated local error exceeds their
        share of ``sens_rtol ||S_k||_F + sens_atol`` (``sens_atol`` default 0) are
        subdivided, states from the trajectory's dense output (or Hermite
        interpolation; never a second state solve), until the estimate meets the
        tolerance at every grid point, or ``max_refine`` rounds, or a grid of
        ``max_grid_factor`` times the solver's points (then an ``AccuracyWarning``
        names the time range). ``r.subdivisions`` counts the intervals split.
        First-order marches (``exp``; ``pbsr`` with ``exp-stiff`` intervals) return the
        extrapolation of the marches on the grid bisected once and twice, and stop on
        that result's own estimate (METHOD.md section 11).
    state_error : {"auto", "resolve", None}
        ``"resolve"``: estimate the error of ``S`` caused by the state solve's own error:
        one more state solve at ``rtol/10``, ``atol/10`` (needs a Trajectory) and one
        more march on the same grid with those states; ``(10/9) ||S - S_tight|| /
        ||S_tight||`` is stored in ``state_error_estimate`` and added, as the signed
        matrix, to the discretization part in ``error_matrix`` (``error_estimate`` is
        its norm); an ``AccuracyWarning`` names the time range where it
        exceeds 1e-2. Post-hoc sensitivities cannot be more accurate than the states
        they are computed on. ``"auto"`` (default): ``"resolve"`` when ``trajectory``
        is a Trajectory (or states are solved here) and ``estimate_error`` is on or
        ``sens_rtol`` is given, else None.
    tighten_states : bool
        With ``sens_rtol`` and the state part estimated (``state_error`` resolving):
        where the state part exceeds ``sens_rtol``, return ``x`` and ``S`` on states
        solved tighter instead, at ``rtol/f`` and ``atol/f`` (``f = 10``: the solve
        the estimate made; else ``2 max E_state / sens_rtol`` rounded up to a power of
        ten, at most 1e4: one more state solve), the grid kept; the state part is
        then ``E_state / f`` (taken proportional to the tolerance) and
        ``options["state_tighten"] = f``. ``False``: keep the trajectory's states
        (the state part then bounds the accuracy).
    max_refine, max_split, max_grid_factor : int, int, float
        Limits of the ``sens_rtol`` refinement: rounds (12), parts per interval and
        round (64), grid size relative to the state solver's (200).
    max_substeps : int
        Bound on the work of one march: the total number of PBS sub-steps
        (``n_int`` summed over the refined intervals). Checked before an interval is
        refined; beyond it a :class:`SolverError` names the interval and the budget
        (``method="pbs"`` never switches to the exponential step, so on a stiff
        problem ``n_int`` grows without bound). Default 10^7.
    linalg : {"auto", "dense", "sparse"}
        Linear algebra of the march. ``"dense"``: dense ``n x n`` Jacobians and matrix
        functions (every method). ``"sparse"`` (``exp`` and ``exp2`` only): CSR Jacobians
        and the action of the exponential (Al-Mohy and Higham 2011) on ``S``, no dense
        ``n x n`` matrix (METHOD.md section 12); for large models with sparse Jacobians.
        ``"auto"`` (default): sparse for ``exp``/``exp2`` when the model has at least
        ``pbsens.sparse_path.SPARSE_MIN_STATES`` states and ``A``'s density is at most
        ``SPARSE_MAX_DENSITY`` (docs/PERFORMANCE.md), else dense.
    freeze : float
        ``method="exp2"`` on a grid refined with ``substeps`` (dense linear algebra, no
        ``sens_rtol``): over a gap ``[t_a, t_e]`` of the state solver's grid that the
        refinement split, exponentiate ``(A(t_a) + A(t_e))/2`` on every part (one matrix
        function per gap when the parts are equal; ``B`` still at every refined point) where
        ``||A(t_e) - A(t_a)||_F ||S(t_a)||_F <= freeze ||B(t_e) - B(t_a)||_F``: the change of
        the forcing ``A S + B`` over the gap is mostly ``B``'s, which the refinement resolves
        (METHOD.md section 13). Default 1 (measured on PKA, CaMKII, Chua: docs/PERFORMANCE.md);
        0 or False: every interval its own matrix; ``inf``: freeze every refined gap.
    params : sequence of str or int, optional
        Parameters (names or model indices) whose sensitivities are wanted, e.g. a PEtab
        problem's estimated ones; ``S`` then has ``len(params)`` columns in this order
        (exactly the corresponding columns of the full ``S``). ``S0``, if given, has either
        all ``n_params`` columns (model order) or ``len(params)`` (in the order of ``params``;
        when the two are equal, model order). Default: all. The sparse path
        marches only these columns (and of them only those that can be non-zero: a
        structural non-zero in their column of ``B`` or a non-zero ``S0`` column); the
        dense path marches all and returns the selection.
    midpoint : bool, optional
        ``method="exp2"`` on a Trajectory with dense output: the intervals that
        ``substeps`` would split are marched in one exp2 step with the midpoint
        correction instead (one more Jacobian evaluation, at the midpoint's state from the
        dense output; METHOD.md section 14), not in sub-steps. On the sparse path
        (``linalg``) the intervals that take the action of the exponential (short or mildly
        stiff ones) are two exp2 half steps through that midpoint, extrapolated with the
        whole step, instead. Default (None):
        True when ``DEFAULT_MIDPOINT`` (measured: docs/PERFORMANCE.md) and neither
        ``estimate_error``, ``sens_rtol`` nor ``state_error="resolve"`` is used (those keep
        the sub-steps); False: sub-steps.

    Returns
    -------
    SensitivityResult
        ``t``, ``x``, ``S`` at the output times; ``branch``, ``n_int`` per grid interval.

    Raises
    ------
    PbsensError
        Invalid input (the message names the argument), or non-finite sensitivities.
    """
    check_model(model)
    if t_eval is not None and (np.ndim(t_eval) > 1 or np.iscomplexobj(t_eval)):
        raise PbsensError(f"'t_eval' must be a one-dimensional array of real times, got shape {np.shape(t_eval)}")
    if S0 is not None and np.iscomplexobj(S0):
        raise PbsensError("'S0' must be real, got complex values")
    from .solvers import SOLVERS
    if not isinstance(solver, str) or solver not in SOLVERS:
        raise PbsensError(f"'solver' must be one of {sorted(SOLVERS)}, got {solver!r}")
    if not isinstance(method, str) or method not in codes.METHOD_CODES:
        raise PbsensError(f"'method' must be one of {', '.join(METHODS)} (or use forward_sensitivities "
                          f"for the forward reference), got {method!r}")
    if norm not in codes.NORM_CODES:
        raise PbsensError(f"'norm' must be one of {sorted(codes.NORM_CODES)}, got {norm!r}")
    if interpolation not in codes.INTERP_CODES:
        raise PbsensError(f"'interpolation' must be one of {sorted(codes.INTERP_CODES)}, got {interpolation!r}")
    n_factor = _positive(n_factor, "n_factor")
    n_max = _positive(n_max, "n_max", integer=True)
    eq_tol = _positive(eq_tol, "eq_tol")
    if isinstance(reuse_tol, bool) or not isinstance(reuse_tol, (int, float, np.integer, np.floating)) \
            or not 0 <= reuse_tol < 1:
        raise PbsensError(f"'reuse_tol' must be a number in [0, 1), got {reuse_tol!r}")
    reuse_tol = float(reuse_tol)
    if substeps is not None:
        substeps = _positive(substeps, "substeps", integer=True)
    if midpoint is not None and not isinstance(midpoint, (bool, np.bool_)):
        raise PbsensError(f"'midpoint' must be True, False or None, got {midpoint!r}")
    use_mid = False
    if not isinstance(estimate_error, (bool, np.bool_)):
        raise PbsensError(f"'estimate_error' must be True or False, got {estimate_error!r}")
    if not isinstance(freeze, (bool, np.bool_, int, float, np.integer, np.floating)) or not freeze >= 0:
        raise PbsensError(f"'freeze' must be a non-negative number (or inf), got {freeze!r}")
    freeze = float(freeze)
    if sens_rtol is not None:
        sens_rtol = _positive(sens_rtol, "sens_rtol")
        sens_atol = 0.0 if sens_atol is None else float(_nonnegative(sens_atol, "sens_atol"))
    elif sens_atol is not None:
        raise PbsensError("'sens_atol' needs 'sens_rtol' (give sens_rtol=... as well)")
    if state_error not in (None, "resolve", "auto"):
        raise PbsensError(f"'state_error' must be 'auto', 'resolve' or None, got {state_error!r}")
    max_refine = _positive(max_refine, "max_refine", integer=True)
    from .kernels.march import check_max_substeps
    check_max_substeps(max_substeps)
    max_split = _positive(max_split, "max_split", integer=True)
    max_grid_factor = _positive(max_grid_factor, "max_grid_factor")
    from . import sparse_path
    use_sparse = sparse_path.choose(model, method, linalg)
    timings = {}

    # ---- the state trajectory
    if trajectory is None:
        if t_span is None:
            raise PbsensError("give either 'trajectory' (a solve_states result or a (t, x) pair) or 't_span'")
        t0 = time.perf_counter()
        trajectory = solve_states(model, t_span, t_eval=t_eval, p=p, x0=x0, method=solver, rtol=rtol,
                                  atol=atol, dense_output=interpolation == "dense"
                                  or (substeps or DEFAULT_SUBSTEPS.get(solver, 1)) > 1)
        timings["states"] = time.perf_counter() - t0
    elif t_span is not None:
        raise PbsensError("give either 'trajectory' or 't_span', not both")
    elif x0 is not None:
        raise PbsensError("'x0' applies only when states are solved here (t_span=...); "
                          "the trajectory already fixes the initial state")

    sol = None
    solver_info = {}
    parent_plan = None
    t_gaps = None
    if isinstance(trajectory, Trajectory):
        if substeps is None:
            substeps = DEFAULT_SUBSTEPS.get(trajectory.method, 1) if trajectory.sol is not None else 1
        use_mid = (method == "exp2" and substeps != 1 and trajectory.sol is not None and sens_rtol is None
                   and not estimate_error and state_error != "resolve"
                   and (DEFAULT_MIDPOINT if midpoint is None else midpoint))
        if substeps != 1 and not use_mid:
            t0 = time.perf_counter()
            t_gaps = trajectory.t     # the solver's grid (outputs merged): the gaps the refinement splits
            only = None
            if method in _SWITCH_METHODS and interpolation != "dense" and sens_rtol is None:
                # the switch decided on the solver's grid; only the exponential intervals are
                # refined (PBS intervals take their own n_int sub-steps)
                parent_plan = _switch_plan(model, trajectory, codes.METHOD_CODES[method], n_factor, n_max,
                                           eq_tol, codes.NORM_CODES[norm])
                only = parent_plan[1] != codes.BRANCH_PBS
            trajectory = refine_grid(trajectory, substeps, only=only)
            timings["refine"] = time.perf_counter() - t0
        traj_p = model.check_p(trajectory.p, "trajectory.p")   # an edited or foreign Trajectory
        if p is not None and not np.array_equal(model.check_p(p), traj_p):
            raise PbsensError("'p' differs from the parameters the trajectory was solved with; "
                              "solve the states again with these parameters")
        p = traj_p
        t, x = _check_grid(model, trajectory.t, trajectory.x)
        sol = trajectory.sol
        if t_eval is None and trajectory.t_eval is not None:
            t_eval = trajectory.t_eval
        solver_info = {"solver": trajectory.method, "rtol": trajectory.rtol, "atol": trajectory.atol}
    else:
        if not isinstance(trajectory, (tuple, list)) or len(trajectory) != 2:
            raise PbsensError("'trajectory' must be a Trajectory or a pair (t, x)")
        if substeps not in (None, 1):
            raise PbsensError("'substeps' needs a Trajectory with dense output, not a (t, x) pair")
        p = model.check_p(p)
        t, x = _check_grid(model, *trajectory)

    # ---- output times: grid points, merged from dense output if needed
    if t_eval is not None:
        from .kernels import checks
        try:
            te = np.ascontiguousarray(t_eval, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            te = None
        out_index = np.empty(t.size, dtype=np.int64)
        n_missing = checks.locate_outputs(t, te, out_index) if te is not None and te.size else -1
        if n_missing < 0:
            check_t_eval(t_eval, (t[0], t[-1]))   # raises the message that names the argument
            raise PbsensError(f"'t_eval' is not valid for the grid [{t[0]}, {t[-1]}]")  # not reached
        if n_missing > 0:
            if sol is None:
                missing = ~np.isin(te, t)
                raise PbsensError(f"'t_eval': {n_missing} time(s) (first {te[missing][0]:.6g}) are not "
                                  "points of the trajectory's grid; pass them to solve_states(t_eval=...) or "
                                  "give a Trajectory with dense output")
            t, x, idx = merge_grid(t, x, te, sol)
            out_index = np.full(t.size, -1, dtype=np.int64)
            out_index[idx] = np.arange(te.size)
        t_out = te
    else:
        out_index = np.arange(t.size, dtype=np.int64)
        t_out = t

    if state_error == "resolve" and not isinstance(trajectory, Trajectory):
        raise PbsensError("'state_error': 'resolve' needs a Trajectory (from solve_states) to re-solve")
    if interpolation == "dense" and sol is None:
        raise PbsensError("'interpolation': 'dense' needs a Trajectory with dense output "
                          "(solve_states(..., dense_output=True))")

    # ---- initial sensitivity, for the selected parameters
    from .sensitivity_params import select_params
    sel, sel_names = select_params(model, params)
    all_params = params is None
    nx, np_ = model.n_states, sel.size
    if S0 is None:
        S_full = model.initial_sensitivity(p)
    elif not all_params and np.shape(S0) == (nx, np_) and np_ != model.n_params:
        S_full = np.zeros((nx, model.n_params))
        S_full[:, sel] = model.check_S(S0, n_cols=np_)
    else:
        S_full = model.check_S(S0)
    S_full = np.ascontiguousarray(S_full)
    S = S_full if all_params else np.ascontiguousarray(S_full[:, sel])
    S0_used = S.copy()

    # ---- march
    t0 = time.perf_counter()
    bound_march, bound_plan = _bound(model)
    code = codes.METHOD_CODES[method]
    norm_kind = codes.NORM_CODES[norm]
    interp = codes.INTERP_CODES[interpolation]
    scale_atol = _scale_atol(solver_info.get("atol", atol) if solver_info else atol)

    def run(tg, xg, oi, n_out, dense=None, plan_in=None, gap_end=None, mid=None):
        """March over the grid ``tg`` (states ``xg``), storing S where ``oi >= 0``; ``plan_in``:
        the switch's (branch, n_int) per interval, decided beforehand; ``gap_end``: per interval,
        the index of its solver gap's end (exp2 freezing), None: none frozen."""
        dense = sol if dense is None else dense
        K = tg.size
        if plan_in is None:
            branch = np.empty(K - 1, dtype=np.int8)
            n_int = np.empty(K - 1, dtype=np.int64)
        else:
            branch, n_int = plan_in
        reused = np.zeros(K - 1, dtype=np.int8)
        X_sub = np.empty((0, nx))
        sub_offset = np.zeros(K - 1, dtype=np.int64)
        planned = 0 if plan_in is None else 1
        if use_sparse:
            S_run = np.ascontiguousarray(S.copy())
            S_out = memory.empty((n_out, nx, np_))
            status = sparse_path.runner(model)(tg, xg, p, S_run, oi, S_out, branch, n_int, code, cols=sel, mid=mid)
            if status >= 0:
                raise PbsensError(f"sensitivities of model {model.name!r} became NaN/inf on the grid interval "
                                  f"[{tg[status]:.6g}, {tg[status + 1]:.6g}] (method {method!r}, linalg 'sparse'); "
                                  "the Jacobians may be non-finite there")
            return S_out, branch, n_int, reused
        if interp == codes.INTERP_DENSE:
            bound_plan(tg, xg, p, model.constants, code, n_factor, n_max, eq_tol, norm_kind, branch, n_int,
                       scale_atol)
            refined = (branch == codes.BRANCH_PBS) & (n_int > 1)
            counts = np.where(refined, n_int - 1, 0)
            if counts.sum() > max_substeps or np.any(counts > max_substeps):
                k = int(np.argmax(counts))
                raise SolverError(f"method {method!r} refinement: interval {k} [{tg[k]:.6g}, {tg[k + 1]:.6g}] "
                                  f"needs {int(n_int[k])} sub-steps; the march needs {int(counts.sum())}, "
                                  f"beyond the budget max_substeps={max_substeps} (raise max_substeps, "
                                  "lower n_factor, or use method='pbsr' or 'exp')")
            sub_offset = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
            if counts.sum():
                k_of = np.repeat(np.arange(K - 1), counts)
                i_of = np.arange(counts.sum()) - sub_offset[k_of] + 1
                t_sub = tg[k_of] + i_of * (tg[k_of + 1] - tg[k_of]) / n_int[k_of]
                X_sub = np.ascontiguousarray(dense(t_sub).T)
            planned = 1
        S_run = np.ascontiguousarray(S_full.copy())         # the dense march: every parameter
        S_out = memory.empty((n_out, nx, model.n_params))
        status = bound_march(tg, xg, p, model.constants, S_run, oi, code, n_factor, n_max, eq_tol, norm_kind,
                             interp, X_sub, sub_offset, planned, reuse_tol, S_out, branch, n_int, reused,
                             scale_atol, max_substeps=max_substeps, gap_end=gap_end,
                             freeze=freeze, mid=mid)
        if status >= 0:
            raise PbsensError(f"sensitivities of model {model.name!r} became NaN/inf on the grid interval "
                              f"[{tg[status]:.6g}, {tg[status + 1]:.6g}] (method {method!r}); the Jacobians may "
                              "be non-finite there, or the PBS step unstable (try method='pbsr' or a finer grid)")
        if not all_params:
            S_out = np.ascontiguousarray(S_out[:, :, sel])
        return S_out, branch, n_int, reused

    t_solver, x_solver = t, x            # the solver's grid (with t_eval merged): interpolation source
    n_split = 0
    E_est = E_par = None
    E_mat = None         # signed estimate of S - S_exact (K, nx, np): r.error_matrix
    S_plain = None       # with an extrapolated result: the un-extrapolated march, for the state part
    gap_end = None
    if (freeze > 0 and method == "exp2" and t_gaps is not None and t_gaps.size < t.size and not use_sparse
            and sens_rtol is None):
        gap_end = gap_ends(t, t_gaps)
    if sens_rtol is None:
        plan_in = None if parent_plan is None else child_plan(parent_plan, t)
        mid = None
        if use_mid:      # an output interval holding one solver point is one corrected step
            t, x, out_index = without_lone_points(t, x, out_index, sol, getattr(trajectory, "tstops", None))
            mid = midpoint_plan(t, sol, substeps)
        S_out, branch, n_int, reused = run(t, x, out_index, t_out.size, plan_in=plan_in, gap_end=gap_end, mid=mid)
        timings["sensitivities"] = time.perf_counter() - t0
        if estimate_error:
            t1 = time.perf_counter()
            t2, x2, pos = error_estimate.midpoint_states(model, p, t, x, t_solver, x_solver, sol)
            oi2 = np.full(t2.size, -1, dtype=np.int64)
            oi2[pos] = out_index
            S_fine = run(t2, x2, oi2, t_out.size)[0]
            order = error_estimate.method_order(method, branch)
            E_est, E_par = error_estimate.relative_difference(S_out, S_fine, order)
            E_mat = (2.0 ** order / (2.0 ** order - 1.0)) * (S_out - S_fine)
            timings["error_estimate"] = time.perf_counter() - t1
    else:
        # refine until the step-doubling estimate meets the tolerance at every grid point
        all_index = np.arange(t.size, dtype=np.int64)
        for round_ in range(max_refine + 1):
            S_all, branch, n_int, reused = run(t, x, all_index, t.size)
            t2, x2, pos = error_estimate.midpoint_states(model, p, t, x, t_solver, x_solver, sol)
            oi2 = np.full(t2.size, -1, dtype=np.int64)
            oi2[pos] = all_index
            S_fine = run(t2, x2, oi2, t.size)[0]
            order = error_estimate.method_order(method, branch)
            if order == 1:
                # first order: the result is the extrapolation of the finer pair (h/2, h/4); its error is
                # estimated from the two extrapolations (h, h/2) and (h/2, h/4), which differ by the
                # second-order remainder (a third march, on the grid bisected twice)
                t4, x4, pos4 = error_estimate.midpoint_states(model, p, t2, x2, t_solver, x_solver, sol)
                oi4 = np.full(t4.size, -1, dtype=np.int64)
                oi4[pos4[pos]] = all_index
                S_fine4 = run(t4, x4, oi4, t.size)[0]
                R_coarse = error_estimate.extrapolate(S_all, S_fine, 1)
                R_fine = error_estimate.extrapolate(S_fine, S_fine4, 1)
                pair, c_pair = (R_coarse, R_fine), error_estimate.EXTRAPOLATION_FACTOR
            else:
                pair, c_pair = (S_all, S_fine), 4.0 / 3.0
            E_all, Ep_all = error_estimate.relative_difference(*pair, 2, c=c_pair)
            nrm = np.sqrt(np.einsum("kij,kij->k", pair[1], pair[1]))
            D = pair[0] - pair[1]
            abs_err = c_pair * np.sqrt(np.einsum("kij,kij->k", D, D))
            ok = abs_err <= sens_rtol * nrm + sens_atol
            if np.all(ok) or round_ == max_refine:
                break
            counts = error_estimate.refine_counts(t, pair[0], pair[1], 2, sens_rtol, sens_atol, max_split, c=c_pair)
            if np.all(counts == 1):      # the per-interval shares are met; split where the total is not
                bad = ~ok
                counts[np.flatnonzero(bad[1:])] = 2
            room = int(max_grid_factor * t_solver.size) - t.size
            extra = int((counts - 1).sum())
            if extra > room:       # stated limit: scale the splits down to the grid budget, or keep this grid
                counts = 1 + ((counts - 1) * max(room, 0)) // extra
                if not np.any(counts > 1):
                    break
            t_new, x_new, pos_new = error_estimate.midpoint_states(model, p, t, x, t_solver, x_solver, sol, counts)
            n_split += int((counts > 1).sum())
            oi_new = np.full(t_new.size, -1, dtype=np.int64)
            oi_new[pos_new] = out_index
            t, x, out_index = t_new, x_new, oi_new
            all_index = np.arange(t.size, dtype=np.int64)
        keep = out_index >= 0
        S_out = memory.empty((t_out.size, nx, np_))
        S_out[out_index[keep]] = R_fine[keep] if order == 1 else S_all[keep]
        if order == 1:
            S_plain = np.empty_like(S_out)
            S_plain[out_index[keep]] = S_all[keep]
        E_est = np.empty(t_out.size)
        E_par = np.empty((t_out.size, np_))
        E_est[out_index[keep]] = E_all[keep]
        E_par[out_index[keep]] = Ep_all[keep]
        E_mat = np.empty((t_out.size, nx, np_))
        E_mat[out_index[keep]] = c_pair * (pair[0][keep] - pair[1][keep])
        if not np.all(ok):
            error_estimate.warn_range(t, ~ok, f"sens_rtol={sens_rtol:g}, sens_atol={sens_atol:g} not met within "
                                      f"the refinement limit ({max_refine} rounds, grid at most "
                                      f"{max_grid_factor}x the state solver's)")
        timings["sensitivities"] = time.perf_counter() - t0
    E_state = None
    if state_error == "auto":
        state_error = ("resolve" if isinstance(trajectory, Trajectory)
                       and (estimate_error or sens_rtol is not None) else None)
    x_t = None
    if state_error == "resolve":
        t1 = time.perf_counter()
        try:
            x_t, sol_t = error_estimate.tight_states(model, trajectory, t)
        except PbsensError as exc:
            x_t = None
            import warnings
            warnings.warn(f"the state solve's error could not be estimated (re-solve at rtol/10 failed: {exc}); "
                          "error_estimate covers the sensitivity march only", AccuracyWarning, stacklevel=2)
    state_factor = 1.0
    if x_t is not None:
        S_t = run(t, x_t, out_index, t_out.size, dense=sol_t, gap_end=gap_end)[0]   # the same march
        # the state part compares the same march on both states (an extrapolated S_out against the
        # plain march on tight states would count the discretization error as the states')
        S_base = S_out if S_plain is None else S_plain
        E_state = error_estimate.state_part(S_base, S_t)
        D_state = (10.0 / 9.0) * (S_base - S_t)    # signed, the same model as E_state
        if sens_rtol is not None and tighten_states:
            # the states limit S beyond sens_rtol: march on states solved tighter (an rtol/10 solve is in hand)
            state_factor = error_estimate.tighten_factor(E_state, sens_rtol)
            E_new = E_state / state_factor
            if state_factor > 10.0:
                try:
                    x_f, sol_f = error_estimate.tight_states(model, trajectory, t, factor=state_factor)
                    S_f = run(t, x_f, out_index, t_out.size, dense=sol_f, gap_end=gap_end)[0]
                except PbsensError:
                    state_factor = 10.0
                    E_new = E_state / state_factor
                else:
                    # the rtol/10 and rtol/f solves differ by (1/10 - 1/f) of the effect at rtol
                    E_new = (10.0 / (state_factor - 10.0)) * error_estimate.state_part(S_t, S_f) * 0.9
                    D_state = (10.0 / (state_factor - 10.0)) * (S_t - S_f)
                    S_t, x_t = S_f, x_f
            if state_factor > 1.0:
                # the state effect S_t - S_base added to the result (kept extrapolated where it was)
                S_out, x = (S_t if S_plain is None else S_out + (S_t - S_base)), x_t
                E_state = E_new
                if state_factor == 10.0:
                    D_state = D_state / 10.0
        timings["state_error"] = time.perf_counter() - t1
        error_estimate.warn_range(t_out, E_state > 1e-2, "the estimated error of S caused by the state solve "
                                  "exceeds 1e-2 (post-hoc sensitivities cannot be more accurate than the states "
                                  "they are computed on; solve the states with a smaller rtol)")
        if E_est is not None:
            # the two parts added signed (they may cancel in S too), the norm taken after
            E_mat = E_mat + D_state
            E_est, E_par = error_estimate.signed_estimate(E_mat, S_out - E_mat)
    options = dict(n_factor=n_factor, n_max=n_max, eq_tol=eq_tol, norm=norm, interpolation=interpolation,
                   reuse_tol=reuse_tol, substeps=substeps or 1, linalg="sparse" if use_sparse else "dense",
                   freeze=gap_end is not None, midpoint=use_mid)
    options.update(solver_info or {"solver": solver if "states" in timings else None,
                                   "rtol": rtol if "states" in timings else None,
                                   "atol": atol if "states" in timings else None})
    options.update(sens_rtol=sens_rtol, sens_atol=sens_atol, state_error=state_error, state_tighten=state_factor)
    return SensitivityResult(
        t=np.array(t_out), x=x[out_index >= 0], S=S_out, method=method, p=p.copy(),
        x0=x[0].copy(), S0=S0_used, grid=t, branch=_BRANCH_ARRAY[branch],
        n_int=n_int, model_name=model.name, state_names=list(model.state_names),
        param_names=list(sel_names), options=options, timings=timings, reused=reused.astype(bool),
        error_estimate=E_est, error_estimate_params=E_par, state_error_estimate=E_state, subdivisions=n_split,
        error_matrix=E_mat)


#: Models with at most this many states march without BLAS: the dense path (the sparse one,
#: from ``sparse_path.SPARSE_MIN_STATES``, inverts with LAPACK), whose products' inner
#: dimensions (``nx``, ``2 nx``) the register tiles do (``kernels.blas.TILES_MAX_K``).
_BLAS_FREE_STATES = 59


def _blas_free(model, args, kwargs):
    """Whether a call of :func:`sensitivities` runs no BLAS routine that could start threads.

    True for a small model (``_BLAS_FREE_STATES``, not forced sparse) with states from the
    compiled Rodas5P (here or a Rodas5P Trajectory: pbsens's own LU): the limit (~0.1 ms) is
    skipped. On the sparse path LAPACK's LU woke OpenBLAS's second thread, which then spun
    on the other core for the whole pass (Lang: 6.4 s of CPU for 3.3 s of wall time).
    """
    n = getattr(model, "n_states", None)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n > _BLAS_FREE_STATES:
        return False                     # not a model: the checks inside report it
    if kwargs.get("linalg", "auto") not in ("auto", "dense"):
        return False                     # forced sparse (or invalid: the checks inside report it)
    trajectory = args[0] if args else kwargs.get("trajectory")
    if trajectory is None:
        return kwargs.get("solver", _DEFAULT_SOLVER) == "rodas5p"
    return isinstance(trajectory, Trajectory) and trajectory.method == "rodas5p"


_sensitivities_unlimited = sensitivities
#: the body's own default, read from its signature so the two cannot drift apart
_DEFAULT_SOLVER = inspect.signature(_sensitivities_unlimited).parameters["solver"].default
_sensitivities_limited = limit_blas_threads(sensitivities)


@functools.wraps(_sensitivities_unlimited)
def sensitivities(model, *args, **kwargs):  # noqa: F811  (the public entry: BLAS scope, then the body above)
    if _blas_free(model, args, kwargs):
        return _sensitivities_unlimited(model, *args, **kwargs)
    return _sensitivities_limited(model, *args, **kwargs)
