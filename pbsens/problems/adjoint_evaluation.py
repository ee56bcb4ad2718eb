"""``Problem.evaluate(theta, method="exp2-adjoint")``: llh and its gradient by the post-hoc adjoint.

Per condition the states are solved as the forward ``method="exp2"`` solves them (Rodas5P by
default; segments between breakpoints and time events, the preequilibration's steady state,
``inf`` outputs; :func:`pbsens.simulation.adjoint.forward_states`) and the outputs evaluated at
the measurement times; after all conditions the measurement models give ``dllh/dy`` and
``dllh/dsigma`` per row, and per condition one backward pass
(:func:`pbsens.simulation.adjoint.backward`: each segment's exp2 march transposed, midpoint
correction included, and the jumps at breakpoints and events) gives the gradient through the
states from

    dJ/dx(t_i) = sum_{rows at t_i} dllh/dy dh_y/dx + dllh/dsigma dh_sigma/dx,

while ``dllh/dy dh/dp`` (the outputs' explicit dependence, mapped to ``theta`` with each row's
own parameter map) is added directly. The gradient equals the forward exp2 gradient on the same
grids to rounding (docs/METHOD.md section 16). A preequilibration's ``lambda(0)`` (summed over the
conditions that share it) goes through the transposed steady-state solve
(:func:`pbsens.simulation.adjoint.steady_state_adjoint`), or, where the Newton form is not
defined, the forward code's integrated ``S_ss``. No Fisher information or residual Jacobians (they
need the forward columns ``S``: use ``method="exp2"``).
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import PbsensError, SolverError
from .priors import dunscale, unscale

__all__ = ["ADJOINT_METHOD", "Unavailable", "evaluate_adjoint"]

#: The name of the adjoint method in ``Problem.evaluate(method=...)``.
ADJOINT_METHOD = "exp2-adjoint"
#: The march's options ``method="exp2-adjoint"`` accepts; any option that is not a march or
#: forward-sensitivity option goes to the state solver, as for ``method="exp2"``.
_MARCH_OPTIONS = ("substeps", "midpoint", "reuse_tol")


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


def _split(opts):
    """``(solver, rtol, atol, march options, steady-state options, solver options)`` of the evaluation's
    options; a march option the adjoint does not transpose raises :class:`PbsensError` naming it."""
    from ..simulation.segments import FORWARD_OPTIONS, SENSITIVITY_OPTIONS
    rest = dict(opts)
    bad = sorted(k for k in rest if (k in SENSITIVITY_OPTIONS and k not in _MARCH_OPTIONS) or k in FORWARD_OPTIONS)
    if bad:
        raise PbsensError(f"method={ADJOINT_METHOD!r}: options {bad} are not supported (march options accepted: "
                          f"{', '.join(_MARCH_OPTIONS)}; the adjoint transposes exp2 with the midpoint correction "
                          "or on sub-steps, nothing frozen)")
    # the steady states' options as the forward evaluation's (problem.steady_state_options_of): its
    # tolerances and solver, then the caller's steady_state_options
    ss = {k: rest[k] for k in ("rtol", "atol") if k in rest}
    if isinstance(rest.get("solver"), str):
        ss["solver"] = rest["solver"]
    ss.update(rest.pop("steady_state_options", None) or {})
    march = {k: rest.pop(k) for k in _MARCH_OPTIONS if k in rest}
    solver, rtol, atol = rest.pop("solver"), rest.pop("rtol"), rest.pop("atol")
    return solver, rtol, atol, march, ss, rest


def _preequilibrate(problem, plan, p_lin, ss_opts, cache, notes, sens):
    """The preequilibration's steady state (states only), shared by the conditions with the same start:
    a dict with ``x_ss`` and what its adjoint needs; ``S_ss`` where the Newton form is not defined (the
    forward code integrates it then, and so does this one)."""
    from ..simulation.steady_state import _newton_form_defect, steady_state
    pp = plan.pre.values(p_lin)
    xp0, Sp0 = problem._initial(pp, plan.pre_init)
    cols = np.flatnonzero(plan.pre.est >= 0)
    key = (pp.tobytes(), xp0.tobytes(), cols.tobytes())
    if key in cache:
        return cache[key]
    model = problem.model
    ss = dict(ss_opts)
    ss.pop("columns", None)
    ss.pop("return_info", None)
    mode = ss.get("sensitivity_mode", "auto")
    x_ss, _, info = steady_state(model, pp, xp0, None, sensitivities=False, return_info=True, **ss)
    why = None if mode == "integrate" or not sens else _newton_form_defect(model, 0.0, info["time"], xp0, x_ss, pp, cols)
    S_ss = None
    if sens and (mode == "integrate" or why is not None):
        # as the forward code decides: S_ss integrated (or SolverError for sensitivity_mode="newton")
        _, S_ss, info_s = steady_state(model, pp, xp0, Sp0, sensitivities=True, return_info=True, columns=cols,
                                       **ss)
        if info_s.get("note"):
            notes.append(f"preequilibration {plan.preeq_id!r}: {info_s['note']}")
    entry = dict(p=pp, x_ss=np.asarray(x_ss), t_ss=info["time"], S0=Sp0, cols=cols, est=plan.pre.est, S_ss=S_ss,
                 lam=None)          # per gradient pass: set by _gradient
    cache[key] = entry
    return entry


def _start(problem, plan, p, p_lin, ss_opts, cache, notes, sens):
    """``(x0, S0 or None, preequilibration entry or None)`` of one condition."""
    if plan.pre is None:
        x0, S0 = problem._initial(p, plan.reinit)
        return x0, S0, None
    pre = _preequilibrate(problem, plan, p_lin, ss_opts, cache, notes, sens)
    x0 = np.array(pre["x_ss"], dtype=np.float64)
    for i, j in plan.reinit:
        x0[i] = p[j]
    return x0, None, pre


def evaluate_adjoint(problem, th, sensitivities, opts, outputs, spread=False):
    """The fields of ``evaluate(th, method="exp2-adjoint")``'s :class:`~pbsens.problems.problem.EvaluationResult`
    (a dict; ``y``, the simulated observables, in place of the lazy simulation table). ``outputs``: the
    model's bound output kernel. ``spread``: also ``"spread"``, the gradient with every row's
    ``dllh/dy``, ``dllh/dsigma`` replaced by its absolute value (a second backward march on the same
    march plans; what ``method="auto"`` compares the gradient with, :mod:`.method_choice`)."""
    from ..simulation.adjoint import forward_states
    t_all = time.perf_counter()
    p_lin = unscale(th, problem._scales)
    dpdth = dunscale(th, problem._scales)
    solver, rtol, atol, march, ss_opts, solver_opts = _split(opts)
    model = problem.model
    R = problem._rows["measurement"].size
    y, sig = np.empty(R), np.empty(R)
    timing, kept, cache, notes = {}, [], {}, []
    for ci, plan in enumerate(problem._plans):
        name = problem.conditions[ci]
        t0 = time.perf_counter()
        p = plan.sim.values(p_lin)
        te = np.concatenate([plan.times, [np.inf]]) if plan.has_inf else plan.times
        try:
            x0, S0, pre = _start(problem, plan, p, p_lin, ss_opts, cache, notes, sensitivities)
            tape = forward_states(model, te, p, x0, solver=solver, rtol=rtol, atol=atol,
                                  columns=np.flatnonzero(plan.sim.est >= 0), steady_state_options=ss_opts,
                                  solver_options=solver_opts, **march)
        except SolverError as exc:
            raise SolverError(f"condition {name!r}: {exc}") from None
        _, JX, JP = problem._condition_outputs(ci, tape.x, p_lin, th.size, sensitivities, outputs, y, sig)
        kept.append((plan, tape, S0, pre, JX, JP))
        timing[name] = time.perf_counter() - t0
    problem._check_outputs(y, sig)
    llh_i, chi2_i, g_y, g_s, _, _, resid = problem._noise.terms(y, sig)
    grad = spread_g = None
    if sensitivities:
        weights = [(g_y, g_s)] + ([(np.abs(g_y), np.abs(g_s))] if spread else [])
        grad, *rest = _gradient(problem, kept, cache, weights, dpdth, timing)
        spread_g = rest[0] if spread else None
    timing["total"] = time.perf_counter() - t_all
    extra = {} if spread_g is None else {"spread": spread_g}
    return dict(**extra, llh=float(np.sum(llh_i)), chi2=float(np.sum(chi2_i)), gradient=grad,
                fim=_unavailable("the Fisher information") if sensitivities else None,
                y=y, timing=timing, theta=th, residuals=resid, sigmas=sig,
                residual_jacobian=_unavailable("the residual Jacobian") if sensitivities else None,
                sigma_jacobian=_unavailable("the noise Jacobian") if sensitivities else None, notes=notes)


def _add_theta(grad, g_model, est, dpdth):
    """``grad += d/dtheta`` of the model-parameter gradient ``g_model`` through the map ``est``."""
    on = est >= 0
    np.add.at(grad, est[on], g_model[on] * dpdth[est[on]])


def _gradient(problem, kept, cache, weights, dpdth, timing):
    """``d llh / d theta`` for each ``(dllh/dy, dllh/dsigma)`` pair of ``weights`` (a list): per condition
    one backward pass (each segment's march plan shared by the pairs), per preequilibration one
    transposed steady-state solve per pair, plus the outputs' explicit terms."""
    from ..simulation.adjoint import backward_sets, steady_state_adjoint
    model, rows = problem.model, problem._rows
    npar, nw = model.n_params, len(weights)
    explicit = [np.zeros((g_y.size, npar)) for g_y, _ in weights]   # dllh/dp at fixed states, per row
    grads = [np.zeros(problem.dim) for _ in weights]
    for pre in cache.values():
        pre["lam"] = [np.zeros(model.n_states) for _ in weights]
    for ci, (plan, tape, S0, pre, JX, JP) in enumerate(kept):
        name = problem.conditions[ci]
        t0 = time.perf_counter()
        mp = problem._maps[ci]
        rr, rg, oy, os_ = mp["rows"], mp["g"], mp["oy"], mp["os"]
        sets = []
        for w, (g_y, g_s) in enumerate(weights):
            gy, gs = g_y[rr][:, None], g_s[rr][:, None]
            explicit[w][rr] = gy * JP[rg, oy] + gs * JP[rg, os_]
            dJdx = np.zeros((tape.x.shape[0], model.n_states))
            np.add.at(dJdx, mp["k"][rg], gy * JX[rg, oy] + gs * JX[rg, os_])
            sets.append(dJdx)
        try:
            passes = backward_sets(model, tape, sets, S0=S0)
        except SolverError as exc:
            raise SolverError(f"condition {name!r}: {exc}") from None
        est = plan.sim.est
        for w, (lam0, g_state) in enumerate(passes):
            if pre is None:
                g_state = g_state + S0.T @ lam0
            else:
                lam0 = lam0.copy()
                for i, j in plan.reinit:             # x0[i] = p[j] after the preequilibration
                    g_state[j] += lam0[i]
                    lam0[i] = 0.0
                pre["lam"][w] += lam0
            # a parameter the states depend on must map to the same estimated parameter in every row
            differ = np.any(rows["est"][rr] != est[None, :], axis=0) & (g_state != 0.0)
            if w == 0 and np.any(differ):       # (the spread pass is a scale: never refused for it)
                j = int(np.flatnonzero(differ)[0])
                raise PbsensError(f"method={ADJOINT_METHOD!r}: in condition {name!r} model parameter "
                                  f"{model.param_names[j]!r} changes the states but measurement rows map it to "
                                  "different estimated parameters; use method='exp2'")
            _add_theta(grads[w], g_state, est, dpdth)
        timing[name] += time.perf_counter() - t0
    for pre in cache.values():                  # each preequilibration once, lambda summed over its conditions
        mask = np.zeros(npar, dtype=bool)
        mask[pre["cols"]] = True
        for w in range(nw):
            if pre["S_ss"] is not None:         # integrated S_ss (Newton form not defined)
                g_pre = pre["S_ss"].T @ pre["lam"][w]
            else:
                lam_start, g_pre = steady_state_adjoint(model, pre["t_ss"], pre["x_ss"], pre["p"], pre["lam"][w],
                                                        pre["cols"])
                g_pre = g_pre + pre["S0"].T @ lam_start
            _add_theta(grads[w], np.where(mask, g_pre, 0.0), pre["est"], dpdth)
    return [grads[w] + problem._to_theta(explicit[w], dpdth).sum(axis=0) for w in range(nw)]
