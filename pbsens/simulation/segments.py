"""Simulation of one experiment: states and sensitivities at output times, across events.

:func:`simulate` integrates a model from ``t0`` to the last output time and
stops exactly at every time where the model is discontinuous
(:mod:`pbsens.model.discontinuities`):

* at a **breakpoint** ``tau(p)`` of a piecewise input the state is continuous
  but the right-hand side switches from ``f_-`` to ``f_+``; when ``tau``
  depends on ``p`` the sensitivities jump by ``S_+ = S_- + (f_- - f_+) dtau/dp``;
* at an **event** ``tau(p)`` with assignments ``x_+ = g(t, x_-, p)``::

      S_+ = G_x S_- + G_p + (G_x f_- - f_+ + G_t) dtau/dp,

  ``G_x = dg/dx``, ``G_p = dg/dp``, ``G_t = dg/dt``, ``f_-`` the right-hand
  side before the event and ``f_+`` after it (the last term vanishes when the
  event time does not depend on ``p``).

The solve is split into segments between these stops; each segment is an
ordinary state solve (:func:`pbsens.solve_states`) followed by post-hoc
sensitivities (:func:`pbsens.sensitivities`, starting from the jumped ``S``),
or one forward-sensitivity solve (:func:`pbsens.forward_sensitivities`) for
``method="fs"``. A segment ends a few units in the last place short of its
stop and the next one starts just after it (``64 eps max(1, |tau|)``), so that
no solver and no Jacobian of the post-hoc march ever evaluates ``f`` on the
wrong side of a switch (at ``t = tau`` itself a ``t >= tau`` comparison
already takes the new branch). The shift changes states by ``|f| 1e-14 tau``.

Conventions
-----------
* ``t_eval`` is sorted ascending; repeated times are allowed (each gets its own
  row, with identical values). It may end with one or more ``inf``: the steady
  state reached from the state at the last finite time (or at ``t0``),
  computed by :func:`pbsens.simulation.steady_state.steady_state` (events and
  breakpoints after the last finite time are not applied on the way there).
* An output at the time of an event reports the state **after** the event
  (right-continuous, like ``t >= tau``); so does its sensitivity. An output at
  a breakpoint or event whose time depends on ``p`` is not differentiable in
  that parameter there: ``S`` is then the one-sided derivative with the jump
  applied (the limit of the outputs just after the stop).
* An event fires when the time reaches its trigger time ``tau`` with
  ``t0 < tau <= t_last``, ``t_last`` the last finite output time. An event
  with ``tau <= t0`` fires at ``t0`` only when its trigger's ``initial_value``
  is false (SBML: the trigger must change from false to true); its time then
  does not enter the sensitivities.
* Several events at the same time are executed one after the other in the
  model's order, each from the state the previous one left.
* **State-triggered events** (:mod:`pbsens.simulation.state_events`): each
  segment's state solve is scanned for a trigger turning true; at its time
  ``t*`` the segment is cut (solved again up to ``t*``, so a segment with an
  event costs one more state solve; for ``"fs"`` the scan is a state solve of
  its own), the event applied with ``dtau/dp = dt*/dp`` and the solve resumed
  at ``t*`` (no shift: the right-hand side does not switch there). An event
  whose trigger holds at ``t0`` fires there when its ``initial_value`` is
  false; a jump that makes a trigger true fires that event at once.
* **Delayed and prioritized events** (an ``Event`` with a ``delay`` or a
  ``priority``): the whole simulation goes through the execution queue of
  :mod:`pbsens.simulation.event_queue` (SBML's semantics: execution at the
  trigger time plus the delay, ``use_values_from_trigger_time``,
  ``persistent``, priorities at simultaneous executions); states only, the
  sensitivities raise :class:`~pbsens.errors.UnsupportedModelError`
  (``"event delay sensitivities"``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import PbsensError, SolverError, UnsupportedModelError
from ..sensitivity.methods import FORWARD
from ..solvers.trajectory import check_time
from .event_queue import simulate_queued
from .spans import _SHIFT, _Outputs, _scan_segment, span_bounds
from .state_events import MAX_EVENTS, TriggerWatch, apply_event
from .steady_state import steady_state

__all__ = ["simulate", "run_checked", "split_options", "Simulation", "SENSITIVITY_OPTIONS"]

#: Options of :func:`pbsens.sensitivities` that ``simulate(**options)`` passes on to it.
SENSITIVITY_OPTIONS = ("n_factor", "n_max", "eq_tol", "norm", "interpolation", "reuse_tol", "substeps", "midpoint",
                       "freeze")
#: Options of :func:`pbsens.forward_sensitivities` (beyond the solver's) for ``method="fs"``.
FORWARD_OPTIONS = ("jacobian",)


@dataclass
class Simulation:
    """States and sensitivities of one simulation at the output times.

    Attributes
    ----------
    t : ndarray (K,)
        The output times as requested (``inf`` for steady-state outputs).
    x : ndarray (K, nx)
    S : ndarray (K, nx, np) or None
        ``S[k, i, j] = dx_i(t_k)/dp_j`` over all model parameters; ``None``
        with ``sensitivities=False``.
    p : ndarray
        Parameters used.
    method : str
        Sensitivity method (``"fs"`` or a post-hoc method).
    events : list of (str, float)
        Events executed, with their times.
    breakpoints : ndarray
        Breakpoint times stopped at.
    steady_state : dict or None
        For ``inf`` outputs: what :func:`steady_state` reported (``strategy``,
        ``time``, ``wrms``, ``conservation_laws``).
    segments : list of (float, float)
        The spans integrated, in order (each ends just short of a stop and the
        next starts just after it).
    timings : dict
        Seconds: ``"segments"`` (all solves), ``"steady_state"``, ``"total"``.
    error_estimate : ndarray (K,) or None
        With ``estimate_error=True``: the estimated relative error
        ``||S_k - S_exact_k||_F / ||S_exact_k||_F`` per output time, the signed
        error of each segment (``SensitivityResult.error_matrix``) plus the error
        carried from the previous segments across the stops and through the
        segment by the march itself (:func:`simulate`). None otherwise.
    error_matrix : ndarray (K, nx, np) or None
        With ``estimate_error=True``: the signed estimate of ``S_k - S_exact_k`` behind
        ``error_estimate`` (e.g. to carry it into outputs or a gradient). None otherwise.
    """

    t: np.ndarray
    x: np.ndarray
    S: np.ndarray | None
    p: np.ndarray
    method: str
    events: list = field(default_factory=list)
    breakpoints: np.ndarray = field(default_factory=lambda: np.empty(0))
    steady_state: dict | None = None
    segments: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    error_estimate: np.ndarray | None = None
    error_matrix: np.ndarray | None = None

    def __repr__(self):
        K, nx = self.x.shape
        s = "" if self.S is None else f", S {self.S.shape}"
        return f"<Simulation {self.method!r}: {K} times, {nx} states{s}, {len(self.events)} events>"


def _check_t_eval(t_eval, t0):
    try:
        te = np.array(t_eval, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise PbsensError(f"'t_eval' must be an array of times, got {t_eval!r}") from None
    if te.size == 0:
        raise PbsensError("'t_eval' is empty")
    if np.any(np.isnan(te)) or np.any(te == -np.inf):
        raise PbsensError("'t_eval' contains NaN or -inf")
    if np.any(np.diff(te) < 0):
        raise PbsensError("'t_eval' must be sorted ascending (repeated times are allowed)")
    if te[0] < t0:
        raise PbsensError(f"'t_eval' starts at {te[0]}, before the start time t0 = {t0}")
    return te



def _stops(model, p, t0, t_last):
    """Sorted list of ``(time, breakpoints [(dtau)], events [(k, dtau)])`` after ``t0``; events at ``t0``;
    whether a breakpoint sits at ``t0``."""
    disc = model.discontinuities
    tb, dtb = disc.breakpoints(p)
    te, dte = disc.event_times(p)
    if not (np.all(np.isfinite(tb)) and np.all(np.isfinite(te))):
        raise PbsensError(f"model {model.name!r}: a breakpoint or event time is NaN or inf for these parameters")
    stops = {}
    at_start = []
    for b in range(tb.size):
        if t0 < tb[b] <= t_last:
            stops.setdefault(float(tb[b]), ([], []))[0].append(dtb[b])
    start_shift = bool(np.any(tb == t0))
    for i, k in enumerate(disc.time_events):
        if t0 < te[i] <= t_last:
            stops.setdefault(float(te[i]), ([], []))[1].append((k, dte[i]))
        elif te[i] <= t0 and not disc.event_initial_values[k]:
            at_start.append(k)
    return [(tau, *stops[tau]) for tau in sorted(stops)], at_start, start_shift


def simulate(model, t_eval, p=None, *, x0=None, S0=None, t0=0.0, method="exp2", sensitivities=True,
             solver=None, rtol=1e-8, atol=1e-10, steady_state_options=None, estimate_error=False,
             columns=None, **options) -> Simulation:
    """States (and sensitivities) of ``model`` at ``t_eval``, stopping at events and breakpoints.

    Parameters
    ----------
    model : Model
    t_eval : array_like (K,)
        Output times, sorted ascending, at or after ``t0``; repeats allowed; may
        end with ``inf`` (steady state). See the module docstring.
    p : array_like, optional
        Parameters (default: the model's).
    x0 : array_like, optional
        State at ``t0`` (default ``model.initial_state(p)``).
    S0 : array_like (nx, np), optional
        ``dx0/dp`` (default ``model.initial_sensitivity(p)``; pass it when
        ``x0`` comes from elsewhere, e.g. a preequilibration).
    t0 : float
        Start time.
    method : str
        ``"fs"`` (forward sensitivities) or a post-hoc method of
        :func:`pbsens.sensitivities` (``"exp2"``, ``"pbsr"``, ``"pbsr2"``,
        ``"exp"``, ``"pbs"``).
    sensitivities : bool
        Compute ``S`` (else ``Simulation.S`` is ``None``: states only).
    solver : str, optional
        The state solver (a name in ``pbsens.solvers.SOLVERS``): default ``"LSODA"`` for
        the state solves of the post-hoc methods, ``"BDF"`` for ``"fs"``.
    rtol, atol : float
        Solver tolerances (of the states; of states and sensitivities for ``"fs"``).
    steady_state_options : dict, optional
        Keyword arguments of :func:`~pbsens.simulation.steady_state.steady_state`
        for ``inf`` outputs (``strategy``, ``rtol``, ``atol``, ``max_time``, ...);
        its ``solver`` defaults to ``solver`` when that is given.
    estimate_error : bool
        Post-hoc methods, finite outputs: ``Simulation.error_estimate``. Each segment's
        march estimates its own error as a signed matrix (``SensitivityResult.error_matrix``,
        METHOD.md section 11); the error at a stop passes into the next segment as
        ``e_+ = e_-`` at a breakpoint (the jump of ``S`` depends on ``x`` only) and
        ``e_+ = G_x e_-`` at an event, and the march carries it through the segment
        (one more march from ``S0 + e``). Signed, so errors that cancel after a
        stop are not counted twice.
    columns : array_like of int, optional
        The parameters (indices) whose sensitivities are wanted (default all):
        the others are zero in ``S`` (forward sensitivities carry only the
        wanted ones, at a cost about proportional to their number; the post-hoc
        march carries all and zeroes the others). Breakpoints that
        coincide but move differently with a parameter make ``S`` undefined
        in its column (:class:`SolverError`); in a column not wanted, that
        jump is left out instead (e.g. a fixed dosing time shared by two
        inputs). The steady state of an ``inf`` output gets them as its ``columns``.
    **options
        ``n_factor``, ``n_max``, ``eq_tol``, ``norm``, ``interpolation``,
        ``reuse_tol``, ``substeps``, ``midpoint``, ``freeze`` go to :func:`pbsens.sensitivities`; ``jacobian`` to
        :func:`pbsens.forward_sensitivities`; anything else to the solver
        (``max_step``, ``first_step``, ...).

    Returns
    -------
    Simulation
        ``t`` (K,), ``x`` (K, nx), ``S`` (K, nx, np) or None, and what happened
        (events executed, breakpoints, steady-state information).

    Raises
    ------
    PbsensError
        Bad arguments (named); :class:`~pbsens.errors.SolverError` when a solve fails.
    UnsupportedModelError
        Two state-triggered events fire at the same instant (``"simultaneous events"``); sensitivities
        of a model with delayed or prioritized events (``"event delay sensitivities"``).
    """
    t_start = time.perf_counter()
    t0 = check_time(t0, "t0")
    te = _check_t_eval(t_eval, t0)
    p = model.check_p(p)
    x = model.initial_state(p) if x0 is None else model.check_x(x0, "x0").copy()
    sens = bool(sensitivities)
    S = None
    if sens:
        S = model.initial_sensitivity(p) if S0 is None else model.check_S(S0)
    if not isinstance(method, str):
        raise PbsensError(f"'method' must be a string, got {method!r}")
    if "params" in options:
        raise PbsensError("'params': simulate computes the sensitivities to every model parameter "
                          "(select columns of Simulation.S afterwards)")
    sens_opts = {k: v for k, v in options.items() if k in SENSITIVITY_OPTIONS}
    fs_opts = {k: v for k, v in options.items() if k in FORWARD_OPTIONS}
    solver_opts = {k: v for k, v in options.items() if k not in SENSITIVITY_OPTIONS and k not in FORWARD_OPTIONS}
    if method == FORWARD and sens_opts:
        raise PbsensError(f"options {sorted(sens_opts)} apply to the post-hoc methods, not to method='fs'")
    if method != FORWARD and fs_opts:
        raise PbsensError(f"options {sorted(fs_opts)} apply to method='fs' only")
    if estimate_error not in (True, False):
        raise PbsensError(f"'estimate_error' must be True or False, got {estimate_error!r}")
    if estimate_error and (method == FORWARD or not sens):
        raise PbsensError("'estimate_error' needs a post-hoc method and sensitivities=True "
                          f"(got method={method!r}, sensitivities={sensitivities!r})")
    if estimate_error and not np.all(np.isfinite(te)):
        raise PbsensError("'estimate_error' covers finite output times only; 't_eval' contains inf "
                          "(steady-state outputs)")
    if columns is not None:
        try:
            columns = np.asarray(columns, dtype=np.int64).reshape(-1)
        except (TypeError, ValueError):
            raise PbsensError(f"'columns' must be parameter indices, got {columns!r}") from None
        if columns.size and (columns.min() < 0 or columns.max() >= model.n_params):
            raise PbsensError(f"'columns' holds an index outside 0..{model.n_params - 1}")
    return run_checked(model, te, p, x, S, t0, method, sens, solver, rtol, atol, steady_state_options,
                       sens_opts, fs_opts, solver_opts, checked=False, t_start=t_start,
                       estimate_error=bool(estimate_error), columns=columns)


def _breakpoint_shift(model, tau, tb, columns):
    """``dtau/dp`` of the breakpoints ``tb`` at ``tau`` (None when none moves): coinciding ones must move
    alike (else :class:`SolverError`), except in the columns not wanted, which then get no jump."""
    D = np.array(tb, dtype=np.float64)
    differ = np.any(D != D[0], axis=0)
    if np.any(differ):
        wanted = np.ones(D.shape[1], dtype=bool) if columns is None else np.isin(np.arange(D.shape[1]), columns)
        if np.any(differ & wanted):
            j = int(np.flatnonzero(differ & wanted)[0])
            raise SolverError(f"model {model.name!r}: {len(tb)} breakpoints coincide at t = {tau:.6g} but "
                              f"move differently with the parameters (e.g. {model.param_names[j]!r}); the "
                              "sensitivities are not defined there (the solution is not differentiable in p)")
        D = D[:, ~differ]
        shift = np.zeros(differ.size)
        shift[~differ] = D[0]
        D = shift[None, :]
    return D[0] if np.any(D[0] != 0) else None


def split_options(options):
    """``(sensitivity options, forward-sensitivity options, solver options)`` of ``simulate(**options)``."""
    return ({k: v for k, v in options.items() if k in SENSITIVITY_OPTIONS},
            {k: v for k, v in options.items() if k in FORWARD_OPTIONS},
            {k: v for k, v in options.items() if k not in SENSITIVITY_OPTIONS and k not in FORWARD_OPTIONS})


def _run_queued(model, te, p, x, t0, method, sens, solver, rtol, atol, steady_state_options, solver_opts, checked,
                t_start):
    """:func:`run_checked` for a model with delayed or prioritized events (:mod:`.event_queue`): states only."""
    disc = model.discontinuities
    if sens:
        names = [n for k, n in enumerate(disc.event_names) if disc.event_delayed[k] or disc.event_prioritized[k]]
        raise UnsupportedModelError(
            f"model {model.name!r}: the sensitivities across delayed or prioritized events "
            f"({', '.join(map(repr, names))}) are not implemented; simulate(..., sensitivities=False) gives the "
            "states", 
            [("event delay sensitivities", n) for n in names])
    X, fired, spans, seg_time, x = simulate_queued(model, te, p, x, t0, solver, rtol, atol, solver_opts, checked,
                                                   t_start)
    X_out = np.empty((te.size, model.n_states))
    X_out[:X.shape[0]] = X
    finite = te[np.isfinite(te)]
    ss_info, t_ss = None, 0.0
    if finite.size < te.size:
        t1 = time.perf_counter()
        ss_opts = dict(steady_state_options or {})
        if isinstance(solver, str):
            ss_opts.setdefault("solver", solver)
        t_last = float(finite[-1]) if finite.size else t0
        x_ss, _, ss_info = steady_state(model, p, x, None, sensitivities=False, t=t_last, return_info=True,
                                        **ss_opts)
        t_ss = time.perf_counter() - t1
        X_out[finite.size:] = x_ss
    tb, _ = disc.breakpoints(p)
    t_last = float(finite[-1]) if finite.size else t0
    return Simulation(t=te, x=X_out, S=None, p=p, method=method, events=fired,
                      breakpoints=np.sort(tb[(tb > t0) & (tb <= t_last)]), steady_state=ss_info, segments=spans,
                      timings={"segments": seg_time, "steady_state": t_ss, "total": time.perf_counter() - t_start})


def run_checked(model, te, p, x, S, t0, method, sens, solver, rtol, atol, steady_state_options, sens_opts,
                fs_opts, solver_opts, checked=True, t_start=None, estimate_error=False,
                columns=None) -> Simulation:
    """:func:`simulate` on arguments it has already validated.

    For callers that simulate the same model with the same options many times
    (:meth:`pbsens.problems.Problem.evaluate` after its first evaluation): ``te``
    sorted float array, ``p`` and ``x`` finite float arrays of the model's sizes,
    ``S`` an (nx, np) array or None, the options split by :func:`split_options`
    and accepted once by :func:`simulate`. With ``checked=True`` the compiled
    Rodas5P solver is called without ``solve_states``'s argument checks.
    """
    if t_start is None:
        t_start = time.perf_counter()
    if model.discontinuities.queued:
        return _run_queued(model, te, p, x, t0, method, sens, solver, rtol, atol, steady_state_options,
                           solver_opts, checked, t_start)
    nx, np_ = model.n_states, model.n_params
    finite = te[np.isfinite(te)]
    t_last = float(finite[-1]) if finite.size else t0
    stops, at_start, start_shift = _stops(model, p, t0, t_last)
    disc = model.discontinuities
    fired = []
    carried = np.zeros((nx, np_)) if estimate_error else None
    out = _Outputs(te.size, nx, np_, sens, estimate_error)
    for k in at_start:
        x, S = apply_event(model, k, t0, x, S, p, None, t0)
        fired.append((disc.event_names[k], t0))
    watch = TriggerWatch(model, p, rtol, atol) if disc.n_state_events else None
    if watch is not None:
        x, S, carried, more = watch.cascade(t0, x, S, p, None, carried)
        fired += more

    seg_args = (method, sens, solver, rtol, atol, sens_opts, fs_opts, solver_opts, checked, columns)
    cur = t0
    cur_is_stop = start_shift
    bounds = [(tau, tb, ev) for tau, tb, ev in stops]
    if not bounds or bounds[-1][0] <= t_last:
        bounds.append((t_last, None, None))
    for tau, tb, ev in bounds:
        final = tb is None
        while True:
            a, b, sel = span_bounds(cur, cur_is_stop, tau, final, finite)
            hit, tr = None, None
            if watch is not None and b > a:
                t1 = time.perf_counter()
                hit, tr = _scan_segment(model, watch, a, b, finite[sel], x, p, method, sens, solver, rtol, atol,
                                        solver_opts, checked)
                out.seg_time += time.perf_counter() - t1
                if hit is not None:       # stop at the event: outputs before it now, the rest after it
                    b, tr = hit[0], None
                    sel = np.flatnonzero((finite >= cur) & (finite < b))
            x, S, carried = out.span(model, a, b, sel, finite, x, S, p, carried, tr, seg_args)
            if hit is None:
                break
            x, S, carried, more = watch.fire_root(*hit, x, S, p, carried)
            fired += more
            if len(fired) > MAX_EVENTS:
                raise SolverError(f"model {model.name!r}: more than {MAX_EVENTS} events by t = {hit[0]:.6g} "
                                  "(a trigger that switches without end?)")
            cur, cur_is_stop = hit[0], False
        if final:
            break
        # ---- jumps at tau: breakpoints, then events in the model's order
        t_before = tau - _SHIFT * max(1.0, abs(tau))
        t_after = tau + _SHIFT * max(1.0, abs(tau))
        if sens and tb:
            shift = _breakpoint_shift(model, tau, tb, columns)
            if shift is not None:
                S = S + np.outer(model.rhs(t_before, x, p) - model.rhs(t_after, x, p), shift)
        dtau_last = None
        for k, dtau in ev or ():
            if carried is not None:
                x, S, carried = apply_event(model, k, tau, x, S, p, dtau, t_after, carried)
            else:
                x, S = apply_event(model, k, tau, x, S, p, dtau, t_after)
            fired.append((disc.event_names[k], tau))
            dtau_last = dtau
        if watch is not None:     # a jump may make a trigger true: its event fires now, moving as the stop does
            x, S, carried, more = watch.cascade(tau, x, S, p, dtau_last if S is not None else None, carried)
            fired += more
        cur, cur_is_stop = tau, True
    X_out, S_out, E_out, seg_time, spans = out.X, out.S, out.E, out.seg_time, out.spans

    ss_info = None
    t_ss = 0.0
    n_inf = te.size - finite.size
    if n_inf:
        t1 = time.perf_counter()
        ss_opts = dict(steady_state_options or {})
        if isinstance(solver, str):
            ss_opts.setdefault("solver", solver)      # the caller's solver approaches the steady state too
        if columns is not None:
            ss_opts.setdefault("columns", columns)
        x_ss, S_ss, ss_info = steady_state(model, p, x, S if sens else None, sensitivities=sens, t=t_last,
                                           return_info=True, **ss_opts)
        t_ss = time.perf_counter() - t1
        X_out[finite.size:] = x_ss
        if sens:
            S_out[finite.size:] = S_ss
    E_rel = None
    if E_out is not None:
        num = np.sqrt(np.einsum("kij,kij->k", E_out, E_out))
        S_ex = S_out - E_out     # relative to the estimate of the exact S
        den = np.sqrt(np.einsum("kij,kij->k", S_ex, S_ex))
        E_rel = np.where(den > 0, num / np.where(den > 0, den, 1.0), num)
    return Simulation(t=te, x=X_out, S=S_out, p=p, method=method, events=fired, error_estimate=E_rel,
                      error_matrix=E_out,
                      breakpoints=np.array([s[0] for s in stops if s[1]]), steady_state=ss_info, segments=spans,
                      timings={"segments": seg_time, "steady_state": t_ss, "total": time.perf_counter() - t_start})
