"""``Problem.evaluate(theta, method="exp2-adjoint")``: llh and its gradient by the post-hoc adjoint.

Per condition the states are solved (Rodas5P by default, as for every method) and the
outputs evaluated at the measurement times; after all conditions the measurement models give
``dllh/dy`` and ``dllh/dsigma`` per row, and per condition one backward march
(:func:`pbsens.sensitivity.adjoint.adjoint_gradient`, method ``exp2``) gives the gradient
through the states from

    dJ/dx(t_i) = sum_{rows at t_i} dllh/dy dh_y/dx + dllh/dsigma dh_sigma/dx,

while ``dllh/dy dh/dp`` (the outputs' explicit dependence, mapped to ``theta`` with each row's
own parameter map) is added directly. The march runs on the grid of ``substeps`` (default 4
for Rodas5P, as the forward exp2) without the midpoint correction, whose transpose is not
implemented yet. First slice (issue #40): no events, breakpoints, preequilibration or
steady-state (``inf``) outputs; no Fisher information or residual Jacobians (they need the
forward columns ``S``: use ``method="exp2"``).
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import PbsensError, SolverError
from .priors import dunscale, unscale

__all__ = ["ADJOINT_METHOD", "evaluate_adjoint", "Unavailable"]

#: The name of the adjoint method in ``Problem.evaluate(method=...)``.
ADJOINT_METHOD = "exp2-adjoint"
#: Options ``method="exp2-adjoint"`` accepts (the state solve's and the march's grid).
_OPTIONS = ("solver", "rtol", "atol", "substeps", "reuse_tol", "max_steps")


class Unavailable:
    """A result field the adjoint evaluation does not compute: reading it raises :class:`PbsensError`
    (``EvaluationResult`` checks for this marker)."""

    __slots__ = ("message",)

    def __init__(self, message):
        self.message = message

    def __repr__(self):
        return "<not computed>"


def _unavailable(what):
    return Unavailable(f"method={ADJOINT_METHOD!r} computes the log-likelihood and its gradient only; {what} "
                       "needs the forward sensitivity columns S: use method='exp2'")


def _check_supported(problem, p_lin, opts):
    """Raise a :class:`PbsensError` naming what the first slice of the adjoint does not support."""
    bad = sorted(k for k in opts if k not in _OPTIONS)
    if bad:
        raise PbsensError(f"method={ADJOINT_METHOD!r}: options {bad} are not supported (accepted: "
                          f"{', '.join(_OPTIONS)})")
    model = problem.model
    disc = model.discontinuities
    for plan, name in zip(problem._plans, problem.conditions):
        p = plan.sim.values(p_lin)
        if disc.breakpoints(p)[0].size or disc.event_times(p)[0].size or disc.n_state_events:
            raise PbsensError(f"method={ADJOINT_METHOD!r} does not support models with events or breakpoints "
                              f"yet (model {model.name!r}); use method='exp2'")
        if plan.pre is not None:
            raise PbsensError(f"method={ADJOINT_METHOD!r} does not support preequilibration yet (condition "
                              f"{name!r}); use method='exp2'")
        if plan.has_inf:
            raise PbsensError(f"method={ADJOINT_METHOD!r} does not support steady-state (t = inf) measurements "
                              f"yet (condition {name!r}); use method='exp2'")


def _solve(model, plan, p, x0, opts, substeps):
    """The condition's trajectory on ``[0, last time]`` (None when every time is 0) and the states at its times."""
    from ..solvers import solve_states
    times = plan.times
    if times[-1] <= 0.0:
        return None, np.repeat(x0[None, :], times.size, axis=0)
    kw = {k: opts[k] for k in ("max_steps",) if k in opts}
    tr = solve_states(model, (0.0, float(times[-1])), t_eval=times, p=p, x0=x0, method=opts["solver"],
                      rtol=opts["rtol"], atol=opts["atol"], dense_output=substeps > 1, **kw)
    return tr, tr.x[tr.eval_index]


def _state_gradient(model, tr, p, times, dJdx, S0, substeps, reuse_tol):
    """``dJ/dp`` through the states of one condition (all model parameters)."""
    from ..sensitivity.adjoint import adjoint_gradient
    if tr is None:                       # outputs at t = 0 only: dJ/dp = S0^T sum_i c_i
        return S0.T @ dJdx.sum(axis=0)
    return adjoint_gradient(model, tr, p, times, dJdx, method="exp2", x0_sens=S0, substeps=substeps,
                            reuse_tol=reuse_tol)


def evaluate_adjoint(problem, th, sensitivities, opts, outputs):
    """The fields of ``evaluate(th, method="exp2-adjoint")``'s :class:`~pbsens.problems.problem.EvaluationResult`
    (a dict; ``y``, the simulated observables, in place of the lazy simulation table). ``outputs``: the
    model's bound output kernel."""
    from ..sensitivity.options import DEFAULT_SUBSTEPS
    t_all = time.perf_counter()
    p_lin = unscale(th, problem._scales)
    dpdth = dunscale(th, problem._scales)
    _check_supported(problem, p_lin, opts)
    substeps = opts.get("substeps") or DEFAULT_SUBSTEPS.get(opts["solver"], 1)
    reuse_tol = opts.get("reuse_tol", 1e-12)
    model, rows = problem.model, problem._rows
    R = rows["measurement"].size
    y, sig = np.empty(R), np.empty(R)
    timing, kept = {}, []
    for ci, plan in enumerate(problem._plans):
        name = problem.conditions[ci]
        t0 = time.perf_counter()
        p = plan.sim.values(p_lin)
        x0, S0 = problem._initial(p, plan.reinit)
        try:
            tr, x = _solve(model, plan, p, x0, opts, substeps)
        except SolverError as exc:
            raise SolverError(f"condition {name!r}: {exc}") from None
        _, JX, JP = problem._condition_outputs(ci, x, p_lin, th.size, sensitivities, outputs, y, sig)
        kept.append((plan, tr, p, S0, JX, JP))
        timing[name] = time.perf_counter() - t0
    problem._check_outputs(y, sig)
    llh_i, chi2_i, g_y, g_s, _, _, resid = problem._noise.terms(y, sig)
    grad = None
    if sensitivities:
        grad = _gradient(problem, kept, g_y, g_s, dpdth, substeps, reuse_tol, timing)
    timing["total"] = time.perf_counter() - t_all
    return dict(llh=float(np.sum(llh_i)), chi2=float(np.sum(chi2_i)), gradient=grad,
                fim=_unavailable("the Fisher information") if sensitivities else None,
                y=y, timing=timing, theta=th, residuals=resid, sigmas=sig,
                residual_jacobian=_unavailable("the residual Jacobian") if sensitivities else None,
                sigma_jacobian=_unavailable("the noise Jacobian") if sensitivities else None)


def _gradient(problem, kept, g_y, g_s, dpdth, substeps, reuse_tol, timing):
    """``d llh / d theta``: per condition one adjoint march, plus the outputs' explicit terms."""
    model, rows = problem.model, problem._rows
    R, npar = g_y.size, model.n_params
    explicit = np.zeros((R, npar))              # dllh/dp at fixed states, per row (row's own map)
    grad = np.zeros(problem.dim)
    for ci, (plan, tr, p, S0, JX, JP) in enumerate(kept):
        name = problem.conditions[ci]
        t0 = time.perf_counter()
        mp = problem._maps[ci]
        rr, rg, oy, os_ = mp["rows"], mp["g"], mp["oy"], mp["os"]
        gy, gs = g_y[rr][:, None], g_s[rr][:, None]
        explicit[rr] = gy * JP[rg, oy] + gs * JP[rg, os_]
        dJdx = np.zeros((plan.times.size, model.n_states))
        np.add.at(dJdx, mp["k"][rg], gy * JX[rg, oy] + gs * JX[rg, os_])
        try:
            g_state = _state_gradient(model, tr, p, plan.times, dJdx, S0, substeps, reuse_tol)
        except SolverError as exc:
            raise SolverError(f"condition {name!r}: {exc}") from None
        est = plan.sim.est
        # a parameter the states depend on must map to the same estimated parameter in every row
        differ = np.any(rows["est"][rr] != est[None, :], axis=0) & (g_state != 0.0)
        if np.any(differ):
            j = int(np.flatnonzero(differ)[0])
            raise PbsensError(f"method={ADJOINT_METHOD!r}: in condition {name!r} model parameter "
                              f"{model.param_names[j]!r} changes the states but measurement rows map it to "
                              "different estimated parameters; use method='exp2'")
        on = est >= 0
        np.add.at(grad, est[on], g_state[on] * dpdth[est[on]])
        timing[name] += time.perf_counter() - t0
    return grad + problem._to_theta(explicit, dpdth).sum(axis=0)
