"""The state solve: :func:`solve_states` -> :class:`Trajectory`, with a registry of solvers.

The solver's accepted steps are kept as the grid (the sensitivity methods march
over it, METHOD.md section 2), the output times ``t_eval`` are merged into it
exactly, and the solve stops exactly at the times ``tstops`` (events, piecewise
inputs) and restarts there, so every stop is a grid point and no step crosses one.

Modules
-------
``trajectory.py``
    :class:`Trajectory` and the checks of ``t_span``, ``t_eval``, ``tstops`` and
    tolerances; :func:`merge_grid`.
``scipy_steppers.py``
    scipy's public stepper classes driven by pbsens's own loop (``integrate``:
    the guard against solves that make no progress, the stops, the dense output)
    and the state solve on top of it (``solve_scipy``).

Adding a solver
---------------
:data:`SOLVERS` maps a method name (what ``solve_states(method=...)`` and
``sensitivities(solver=...)`` take) to a function::

    def solve_NAME(model, t_span, t_eval=None, p=None, x0=None, rtol=..., atol=...,
                   tstops=None, dense_output=True, max_nfev=..., **options) -> Trajectory

A compiled solver is one new module here (e.g. ``rosenbrock.py`` with
``solve_rosenbrock``) and one line in this file::

    SOLVERS["rodas5p"] = solve_rosenbrock

The contract:

* :func:`solve_states` calls it with keyword arguments after validating them:
  ``t_span`` a pair of floats ``t0 < t1``; ``t_eval`` None or a strictly
  increasing float array inside ``t_span``; ``p`` and ``x0`` checked float
  arrays (never None); ``rtol``/``atol`` positive (``atol`` scalar or per
  state); ``tstops`` None or a sorted float array strictly inside
  ``(t0, t1)``.
* ``dense_output`` and ``max_nfev`` are passed only when the function's
  signature names them (or takes ``**options``): a solver without dense
  output may leave ``sol`` None; ``max_nfev`` set by the caller for a solver
  without it is an error. The caller's other ``**solver_options`` are passed
  as given; reject an option you do not know with
  :class:`~pbsens.errors.PbsensError` naming it.
* It returns a :class:`Trajectory` with ``t[0] = t0``, ``t[-1] = t1``, the
  accepted steps, every ``tstop`` and every ``t_eval`` in ``t`` exactly
  (``t[eval_index] == t_eval``; :func:`merge_grid` does this from a dense
  output), ``x`` the states there, ``sol`` a dense output callable (or None
  when ``dense_output`` is false), ``method`` the registry name, ``rtol``,
  ``atol``, ``tstops``, and ``stats`` with ``nfev``, ``njev``, ``nlu``,
  ``n_steps``.
* It raises :class:`~pbsens.errors.SolverError` naming the model
  (``model.name``) when the solve fails (step size underflow, NaN/inf,
  too many steps).
"""
from __future__ import annotations

import functools
import inspect
import numbers

from ..errors import PbsensError
from ..model.model import check_model
from ..system.threads import limit_blas_threads
from . import rosenbrock
from .scipy_steppers import STEPPERS, solve_scipy
from .trajectory import Trajectory, check_t_eval, check_t_span, check_time, check_tolerance, check_tstops, merge_grid

__all__ = ["check_solver_options", "solve_states", "Trajectory", "SOLVERS", "check_t_span", "check_t_eval", "check_tstops",
           "check_time", "merge_grid"]

#: Method name -> state solver (the contract is in this module's docstring).
SOLVERS = {name: functools.partial(solve_scipy, method=name) for name in STEPPERS}
SOLVERS[rosenbrock.METHOD] = rosenbrock.solve_rosenbrock   # compiled Rodas5P


def solver_option_names(method):
    """The extra keyword options the state solver ``method`` understands (``max_step``, ...); None: any."""
    if method in STEPPERS:
        import scipy.integrate
        fn = getattr(scipy.integrate, method).__init__
        skip = {"self", "fun", "t0", "y0", "t_bound", "rtol", "atol", "jac"}
    else:                            # the compiled Rodas5P or a solver plugged into SOLVERS
        fn = SOLVERS[method]
        skip = {"model", "t_span", "t_eval", "p", "x0", "rtol", "atol", "tstops", "dense_output", "max_nfev"}
    try:
        params = inspect.signature(getattr(fn, "__wrapped__", fn)).parameters
    except (TypeError, ValueError):
        return None
    if any(q.kind is inspect.Parameter.VAR_KEYWORD for q in params.values()) and method not in STEPPERS:
        return None                  # a plugged solver that takes **options checks them itself
    return sorted(k for k, q in params.items() if k not in skip and q.kind is not inspect.Parameter.VAR_KEYWORD
                  and q.kind is not inspect.Parameter.VAR_POSITIONAL)


def check_solver_options(method, options, name="solver_options"):
    """Reject keyword options the solver ``method`` does not know (scipy would ignore them with a warning)."""
    if not options:                  # nothing to check (and no signature to read on every call)
        return
    names = solver_option_names(method)
    if names is None:
        return
    unknown = sorted(set(options) - set(names))
    if unknown:
        raise PbsensError(f"unknown solver option(s) {', '.join(map(repr, unknown))} for method {method!r}; "
                          f"it accepts: {', '.join(solver_option_names(method)) or 'none'}")


def _accepts(fn, name):
    """Whether ``fn`` takes the keyword ``name`` (by name or through ``**kwargs``); memoised per
    function (reading a signature costs tens of microseconds, on every solve)."""
    try:
        return _accepts_cached(fn, name)
    except TypeError:                # an unhashable callable
        return _accepts_uncached(fn, name)


@functools.lru_cache(maxsize=64)
def _accepts_cached(fn, name):
    return _accepts_uncached(fn, name)


def _accepts_uncached(fn, name):
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    return name in params or any(q.kind is inspect.Parameter.VAR_KEYWORD for q in params.values())


@limit_blas_threads
def solve_states(model, t_span, t_eval=None, p=None, x0=None, method="LSODA", rtol=1e-5, atol=1e-6,
                 dense_output=True, max_nfev=1_000_000, tstops=None, **solver_options):
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
        A key of :data:`SOLVERS`: scipy's ``"LSODA"`` (default), ``"BDF"``,
        ``"Radau"``, ``"RK45"``, ``"RK23"``, ``"DOP853"`` (the compiled
        Jacobian is passed to the implicit ones: BDF, Radau, LSODA); or
        ``"rodas5p"``, pbsens's compiled Rosenbrock method (whole solve in one
        compiled call, 10-40x faster than LSODA on the paper's models, but with
        5-7x fewer steps: see ``docs/PERFORMANCE.md`` before using its grid for
        post-hoc sensitivities).
    rtol, atol : float
        Solver tolerances (the paper: rtol 1e-5, atol 1e-6).
    dense_output : bool
        Keep the solver's interpolant in ``Trajectory.sol`` (needed for
        ``sensitivities(..., interpolation="dense")``).
    max_nfev : int
        Give up (``SolverError``) after this many right-hand-side evaluations:
        a solver stuck at a singularity would otherwise loop for ever.
    tstops : array_like, optional
        Times inside ``t_span`` where the solve stops exactly and restarts
        (events, discontinuities of piecewise inputs): each is a grid point and
        no step crosses one.
    **solver_options
        Passed on to the solver (scipy's: e.g. ``max_step``, ``first_step``).

    Returns
    -------
    Trajectory

    Raises
    ------
    PbsensError
        Bad arguments (each message names the argument); :class:`SolverError`
        when the solver fails or produces non-finite states.
    """
    check_model(model)
    t0, t1 = check_t_span(t_span)
    te = check_t_eval(t_eval, (t0, t1))
    stops = check_tstops(tstops, (t0, t1))
    p = model.check_p(p)
    x0 = model.initial_state(p) if x0 is None else model.check_x(x0, "x0")
    if not isinstance(method, str) or method not in SOLVERS:
        raise PbsensError(f"'method' must be one of {sorted(SOLVERS)}, got {method!r}")
    check_tolerance(rtol, "rtol", model.n_states)
    check_tolerance(atol, "atol", model.n_states)
    check_solver_options(method, solver_options)
    if (isinstance(max_nfev, bool) or not isinstance(max_nfev, numbers.Real) or not max_nfev >= 1
            or max_nfev != int(min(max_nfev, 2**62))):
        raise PbsensError(f"'max_nfev' must be a positive integer, got {max_nfev!r}")
    max_nfev = int(max_nfev)
    solve = SOLVERS[method]
    kwargs = dict(solver_options)
    if _accepts(solve, "dense_output"):
        kwargs["dense_output"] = dense_output
    if _accepts(solve, "max_nfev"):
        kwargs["max_nfev"] = max_nfev
    elif max_nfev != 1_000_000:
        raise PbsensError(f"'max_nfev' is not supported by the solver {method!r}")
    tr = solve(model, (t0, t1), t_eval=te, p=p, x0=x0, rtol=rtol, atol=atol, tstops=stops, **kwargs)
    if not dense_output:
        tr.sol = None
    return tr
