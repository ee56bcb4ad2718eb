"""The front door: :func:`sensitivities` (post-hoc PBSR, PBS, Exp and their second-order variants).

Data flow: a :class:`~pbsens.solvers.Trajectory` (or any solver's ``(t, x)``) ->
validated options (:mod:`pbsens.sensitivity.options`) -> the march setup: states, grid,
output times, initial sensitivity (:mod:`pbsens.sensitivity.march_setup`) -> the marches
(:mod:`pbsens.sensitivity.marcher`, the kernel :mod:`pbsens.kernels.march` or :mod:`pbsens.sensitivity.sparse`),
with the step-doubling estimate or the refinement to ``sens_rtol``
(:mod:`pbsens.sensitivity.step_doubling`) and the state part of the error (:mod:`pbsens.sensitivity.state_error`) ->
:class:`~pbsens.sensitivity.result.SensitivityResult`. The methods' properties are in
:mod:`pbsens.sensitivity.methods`. This module knows nothing of numba.
"""
from __future__ import annotations

import inspect
import time

import numpy as np

from .march_setup import setup_march
from .marcher import Marcher
from .methods import METHODS
from .result import BRANCH_NAMES, SensitivityResult
from .options import DEFAULT_MIDPOINT, DEFAULT_SUBSTEPS, check_options
from ..solvers import Trajectory, solve_states
from .state_error import state_error_part
from .step_doubling import march_with_estimate, refine_to_tolerance
from ..system.threads import limit_blas_threads

__all__ = ["sensitivities", "METHODS", "DEFAULT_SUBSTEPS", "DEFAULT_MIDPOINT"]

_BRANCH_ARRAY = np.array(BRANCH_NAMES)   # fixed-width strings, indexed by the kernels' branch codes

#: Models with at most this many states march without BLAS: the dense path (the sparse one,
#: from ``sparse_path.SPARSE_MIN_STATES``, inverts with LAPACK), whose products' inner
#: dimensions (``nx``, ``2 nx``) the register tiles do (``kernels.blas.TILES_MAX_K``).
_BLAS_FREE_STATES = 59


def _bound(model):
    """The model's bound kernels, compiled once per model and process."""
    cache = model.__dict__.setdefault("_kernels", {})
    if "march" not in cache:
        from ..kernels import march  # numba kernels load on first use, not at import
        cache["march"] = march.bind(model.fns)
    return cache["march"]


def _blas_free(args, kwargs):
    """Whether a call of :func:`sensitivities` runs no BLAS routine that could start threads.

    True for a small model (``_BLAS_FREE_STATES``, not forced sparse) with states from the
    compiled Rodas5P (here or a Rodas5P Trajectory: pbsens's own LU): the limit (~0.1 ms) is
    skipped. On the sparse path LAPACK's LU woke OpenBLAS's second thread, which then spun
    on the other core for the whole pass (Lang: 6.4 s of CPU for 3.3 s of wall time).
    """
    model = args[0] if args else kwargs.get("model")
    n = getattr(model, "n_states", None)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n > _BLAS_FREE_STATES:
        return False                     # not a model: the checks inside report it
    if kwargs.get("linalg", "auto") not in ("auto", "dense"):
        return False                     # forced sparse (or invalid: the checks inside report it)
    trajectory = args[1] if len(args) > 1 else kwargs.get("trajectory")
    if trajectory is None:
        return kwargs.get("solver", _DEFAULT_SOLVER) == "rodas5p"
    return isinstance(trajectory, Trajectory) and trajectory.method == "rodas5p"


@limit_blas_threads(unless=_blas_free)
def sensitivities(model, trajectory=None, method="exp2", p=None, x0=None, S0=None, t_eval=None, *,
                  t_span=None, solver="rodas5p", rtol=1e-5, atol=1e-6, n_factor=10.0, n_max=100,
                  eq_tol=1e-4, norm="1", interpolation="linear", reuse_tol=1e-12,
                  substeps=None, estimate_error=False,
                  sens_rtol=None, sens_atol=None, state_error="auto", max_refine=12, max_split=64,
                  max_grid_factor=200, max_substeps=10_000_000, tighten_states=True,
                  linalg="auto", freeze=1.0, params=None, midpoint=None) -> SensitivityResult:
    """Post-hoc sensitivities ``S = dx/dp`` on a state trajectory's grid.

    Solves the sensitivity equation ``S' = A S + B`` (2.3) by marching over the
    state solver's grid with the Jacobians ``A = df/dx``, ``B = df/dp`` evaluated
    at the grid's states, never calling the state solver again (METHOD.md section 2).
    Runs with BLAS limited to one thread (:mod:`pbsens.system.threads`), except on paths that
    run no BLAS routine. The options from ``solver`` on are described briefly here and in
    full in :class:`pbsens.sensitivity.options.SensitivityOptions`.

    Parameters
    ----------
    model : Model
    trajectory : Trajectory or (t, x), optional
        The state solution: from :func:`solve_states`, or any solver's grid ``t``
        (K,) and states ``x`` (K, nx). If omitted, ``t_span`` is required and the
        states are solved here with ``solver``, ``rtol``, ``atol``.
    method : {"exp2", "pbsr", "exp", "pbs", "pbsr2"}
        Default ``"exp2"``, on the Rodas5P solver's grid when the states are solved here: the
        measured best (docs/PERFORMANCE.md; the paper's setting is ``method="pbsr",
        solver="LSODA"``). ``"pbsr"``: Algorithm 2, PBS step (4.6) with refinement, switching to the
        exponential step (3.10) on stiff or equilibrium intervals. ``"exp"``:
        Algorithm 3, the exponential step on every interval. ``"pbs"``: the PBS
        step with refinement everywhere (no switch). ``"exp2"``/``"pbsr2"``: the
        second-order exponential-midpoint step, alone or as PBSR's fallback.
        Their properties: :data:`pbsens.sensitivity.methods.METHOD_INFO`.
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
    params : sequence of str or int, optional
        Parameters (names or model indices) whose sensitivities are wanted, e.g. a PEtab
        problem's estimated ones; ``S`` then has ``len(params)`` columns in this order
        (exactly the corresponding columns of the full ``S``). ``S0``, if given, has either
        all ``n_params`` columns (model order) or ``len(params)`` (in the order of ``params``;
        when the two are equal, model order). Default: all. The sparse path
        marches only these columns (and of them only those that can be non-zero: a
        structural non-zero in their column of ``B`` or a non-zero ``S0`` column); the
        dense path marches all and returns the selection. Given ``S0`` with ``len(params)``
        columns, the dense path starts the others from zero, and exp2's sub-step march
        (``midpoint=False``) may then freeze other gaps than from the full ``S0`` (the test reads
        ``||S||`` over every column carried, METHOD.md section 13): pass the full ``S0`` to get
        the full march's columns.
    solver, rtol, atol :
        State solver settings when solving states here (:func:`solve_states`); default
        ``"rodas5p"`` (compiled Rosenbrock, with dense output and midpoint states for exp2).
    n_factor, n_max, eq_tol : float, int, float
        PBSR switch (Algorithm 2): ``n_int = ceil(n_factor h ||A_k||)`` sub-intervals; the
        exponential step when ``n_int > n_max`` ("exp-stiff") or when ``A`` and ``B`` change
        by at most ``eq_tol`` relative over the interval ("exp-equilibrium"). Paper: 10, 100, 1e-4.
    norm : {"1", "inf", "fro", "scaled"}
        Matrix norm of the switch; ``"scaled"``: of ``D^-1 A_k D``, ``D = diag(|x_k| + atol)``.
    interpolation : {"linear", "hermite", "dense"}
        States at refinement points: linear (the paper), cubic Hermite, or the dense output.
    reuse_tol : float
        An exponential step reuses the previous interval's matrix functions when ``h`` and
        its matrix differ by at most this, relative (0: only when equal).
    substeps : int, optional
        No grid interval longer than ``1/substeps`` of its accepted state step (split from the
        dense output). Default: ``DEFAULT_SUBSTEPS`` (4 for Rodas5P), else 1.
    estimate_error : bool
        Fill ``error_estimate``, ``error_estimate_params``, ``error_matrix`` (step doubling,
        METHOD.md section 11; costs 3-20x the march). Default False.
    sens_rtol, sens_atol : float, optional
        Tolerance on ``S``: refine the grid until the estimate meets
        ``sens_rtol ||S_k||_F + sens_atol`` (``r.subdivisions``: intervals split).
    state_error : {"auto", "resolve", None}
        ``"resolve"``: estimate the part of the error caused by the states (a solve at
        ``rtol/10``; ``state_error_estimate``). ``"auto"``: when an estimate is asked of a Trajectory.
    tighten_states : bool
        With ``sens_rtol``: where the state part exceeds it, return ``x`` and ``S`` on states
        solved tighter (``options["state_tighten"]``).
    max_refine, max_split, max_grid_factor : int, int, float
        Limits of the ``sens_rtol`` refinement: rounds (12), parts per interval and
        round (64), grid size relative to the state solver's (200).
    max_substeps : int
        Bound on the total PBS sub-steps of one march (:class:`SolverError` beyond it).
    linalg : {"auto", "dense", "sparse"}
        Dense matrix functions, or CSR Jacobians and the action of the exponential
        (``exp``, ``exp2``; METHOD.md section 12). ``"auto"``: sparse for large sparse models.
    freeze : float
        ``exp2`` on a grid refined by ``substeps``: one exponentiated matrix per split solver
        gap where ``A`` changes little against ``B`` (METHOD.md section 13). Default 1; 0: never.
    midpoint : bool, optional
        ``exp2`` on a Trajectory with dense output: the long intervals in one step with the
        midpoint correction (METHOD.md section 14) instead of sub-steps. Default (None):
        ``DEFAULT_MIDPOINT`` unless ``sens_rtol`` (with ``estimate_error`` the estimate's marches are
        corrected too).

    Returns
    -------
    SensitivityResult
        ``t``, ``x``, ``S`` at the output times; ``branch``, ``n_int`` per grid interval.

    Raises
    ------
    PbsensError
        Invalid input (the message names the argument), or non-finite sensitivities.
    """
    opts = check_options(model, t_eval=t_eval, S0=S0, method=method, solver=solver, rtol=rtol, atol=atol,
                         n_factor=n_factor, n_max=n_max, eq_tol=eq_tol, norm=norm, interpolation=interpolation,
                         reuse_tol=reuse_tol, substeps=substeps, estimate_error=estimate_error,
                         sens_rtol=sens_rtol, sens_atol=sens_atol, state_error=state_error, max_refine=max_refine,
                         max_split=max_split, max_grid_factor=max_grid_factor, max_substeps=max_substeps,
                         tighten_states=tighten_states, linalg=linalg, freeze=freeze, midpoint=midpoint)
    setup = setup_march(model, opts, trajectory, p=p, x0=x0, S0=S0, t_eval=t_eval, t_span=t_span, params=params,
                        solve=solve_states, bind=_bound)
    timings = setup.timings
    t0 = time.perf_counter()
    march = Marcher(model, opts, setup, _bound(model))
    if opts.sens_rtol is None:
        marched = march_with_estimate(model, opts, setup, march, timings, t0)
    else:
        marched = refine_to_tolerance(model, opts, setup, march, timings, t0)
    return _result(model, opts, setup, state_error_part(model, opts, setup, march, marched, timings))


def _result(model, opts, setup, state) -> SensitivityResult:
    """The :class:`SensitivityResult` of a call, with the options it ran with."""
    m, timings = state.marched, setup.timings
    options = dict(n_factor=opts.n_factor, n_max=opts.n_max, eq_tol=opts.eq_tol, norm=opts.norm,
                   interpolation=opts.interpolation, reuse_tol=opts.reuse_tol, substeps=setup.substeps or 1,
                   linalg="sparse" if opts.use_sparse else "dense", freeze=m.gap_end is not None,
                   midpoint=setup.use_mid)
    options.update(setup.solver_info or {"solver": opts.solver if "states" in timings else None,
                                         "rtol": opts.rtol if "states" in timings else None,
                                         "atol": opts.atol if "states" in timings else None})
    options.update(sens_rtol=opts.sens_rtol, sens_atol=opts.sens_atol, state_error=state.mode,
                   state_tighten=state.factor)
    return SensitivityResult(
        t=np.array(setup.t_out), x=m.x[m.out_index >= 0], S=m.S_out, method=opts.method, p=setup.p.copy(),
        x0=m.x[0].copy(), S0=setup.S0_used, grid=m.t, branch=_BRANCH_ARRAY[m.branch],
        n_int=m.n_int, model_name=model.name, state_names=list(model.state_names),
        param_names=list(setup.sel_names), options=options, timings=timings, reused=m.reused.astype(bool),
        error_estimate=m.E_est, error_estimate_params=m.E_par, state_error_estimate=state.E_state,
        subdivisions=m.n_split, error_matrix=m.E_mat)


#: the default state solver of :func:`sensitivities`, read from its signature so the two cannot drift apart
_DEFAULT_SOLVER = inspect.signature(sensitivities).parameters["solver"].default
