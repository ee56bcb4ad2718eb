"""The conditions of a PEtab problem one by one, as :meth:`Problem.evaluate` simulates them:
their setup (:func:`problem_conditions`) and the error estimate of their post-hoc
sensitivities (:func:`condition_estimates`)."""
from __future__ import annotations

import warnings

import numpy as np

from ..errors import AccuracyWarning, SolverError
from .priors import unscale
from .problem import evaluation_options, steady_state_options_of
from ..simulation.segments import simulate
from ..simulation.steady_state import steady_state

__all__ = ["problem_conditions", "condition_estimates"]


def problem_conditions(problem, theta=None, steady_state_tol=(1e-10, 1e-12), steady_state_options=None):
    """The simulation setup of every condition of a PEtab :class:`~pbsens.problems.Problem`.

    Yields ``(name, times, p, x0, S0, has_stops)`` per simulation condition, as
    :meth:`Problem.evaluate` builds it at ``theta`` (default the nominal values):
    the condition's model parameters, its initial state and sensitivity (after
    the preequilibration, solved here by
    :func:`pbsens.simulation.steady_state.steady_state` at ``steady_state_tol``
    (``(rtol, atol)``) with its other defaults (the approach by the compiled
    Rodas5P), updated by ``steady_state_options`` (``solver``, ``rtol``, ``atol``,
    ``max_nfev``, ...), and the condition's state overrides), and its finite output
    times with ``t0 = 0`` first. Conditions sharing a preequilibration (same
    parameters and start) share its steady state. ``has_stops``: a breakpoint lies
    in ``(0, times[-1])``, an event in
    ``(0, times[-1]]`` or the model has state-triggered events (the plain post-hoc march does not apply across it;
    :func:`pbsens.simulation.segments.simulate` does). A breakpoint at the last
    output time changes nothing before it; there the march gives ``S`` without
    the jump ``(f_- - f_+) dtau/dp``.

    Raises
    ------
    SolverError
        A preequilibration failed; the message names the condition and the
        steady state's solver and options.
    """
    m = problem.model
    p_lin = unscale(problem._theta(theta), problem._scales)
    rtol, atol = steady_state_tol
    ss_opts = {"rtol": rtol, "atol": atol}
    ss_opts.update(steady_state_options or {})
    done = {}
    for name, plan in zip(problem.conditions, problem._plans):
        p = plan.sim.values(p_lin)
        times = np.unique(plan.times[plan.times >= 0])
        if times.size == 0 or times[0] > 0:
            times = np.concatenate(([0.0], times))
        disc = m.discontinuities
        tb, _ = disc.breakpoints(p)
        te, _ = disc.event_times(p)
        has_stops = bool(np.any((tb > 0) & (tb < times[-1])) or np.any((te > 0) & (te <= times[-1]))
                         or disc.n_state_events)
        if plan.pre is None:
            x0, S0 = problem._initial(p, plan.reinit)
        else:
            pre = plan.pre.values(p_lin)
            xp0, Sp0 = problem._initial(pre, plan.pre_init)
            cols = np.flatnonzero(plan.pre.est >= 0)     # S0 of the parameters estimated there (others 0)
            key = (pre.tobytes(), xp0.tobytes(), Sp0.tobytes(), cols.tobytes())
            if key not in done:
                try:
                    done[key] = steady_state(m, pre, xp0, Sp0, sensitivities=True, **{"columns": cols, **ss_opts})
                except SolverError as exc:
                    raise SolverError(f"condition {name!r} (preequilibration {plan.preeq_id!r}): {exc}") from None
            x0, S0 = done[key]
            x0, S0 = np.array(x0, dtype=np.float64), np.array(S0, dtype=np.float64)
            for i, j in plan.reinit:
                x0[i] = p[j]
                S0[i, :] = 0.0
                S0[i, j] = 1.0
        yield name, times, p, x0, S0, has_stops


def condition_estimates(problem, theta=None, method="exp2", solver=None, rtol=None, atol=None,
                        steady_state_options=None):
    """``{condition: max_k error_estimate}`` of a PEtab problem's post-hoc sensitivities.

    Per condition (:func:`problem_conditions`): the simulation :meth:`Problem.evaluate`
    runs, with ``estimate_error=True`` (:func:`pbsens.simulation.segments.simulate`: a
    condition with breakpoints or events inside its span is simulated segment by segment
    with the error carried across them); the largest estimate over the output times after
    ``t0``. ``solver``, ``rtol``, ``atol``: None takes ``Problem.evaluate``'s defaults
    (the compiled Rodas5P, 1e-8, 1e-10), so that the estimate is of the computation
    ``evaluate`` (and ``pbsens petab``) returns; as there, they also set the
    preequilibrations' steady states (their approach's solver and tolerances),
    updated by ``steady_state_options`` (e.g. ``{"max_nfev": ...}``). For exp2 the
    estimate keeps the midpoint correction (METHOD.md section 11), so it is of the
    corrected march ``evaluate`` returns (until 2026-11-28 it was of a sub-step march:
    Perelson at the defaults 1.0e-4 where the corrected march's largest error is 2.7e-6;
    now 2.8e-6).
    """
    given = {k: v for k, v in (("solver", solver), ("rtol", rtol), ("atol", atol)) if v is not None}
    opts = evaluation_options(method, True, given)
    ss = steady_state_options_of(opts)            # the preequilibration Problem.evaluate runs
    ss.update(steady_state_options or {})
    out = {}
    for name, times, p, x0, S0, _ in problem_conditions(problem, theta, steady_state_options=ss):
        if times[-1] <= 0:
            out[name] = None
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AccuracyWarning)
            sim = simulate(problem.model, times, p, x0=x0, S0=S0, method=method, estimate_error=True, **opts)
        out[name] = float(np.max(sim.error_estimate[1:])) if times.size > 1 else 0.0
    return out
