"""The adjoint of one simulation across breakpoints, time events and steady states (issue #40).

:func:`forward_states` integrates the states exactly as :func:`pbsens.simulation.segments.simulate`
does for a post-hoc method (the same segments, each ending just short of a stop and the next
starting just after it, the same jumps of ``x`` at events) and keeps what the backward pass
needs: each segment's trajectory, and the states around every jump. :func:`backward` then marches
``lambda = (dJ/dx)^T`` backward through the segments (:func:`pbsens.sensitivity.adjoint.march_backward`,
the exact transpose of each segment's forward march) and across every jump by the transpose of the
forward jump of ``S`` (docs/METHOD.md sections 10 and 16):

=============  ==============================================  ==================================================
stop           forward                                           backward (``lambda+`` after the stop)
=============  ==============================================  ==================================================
breakpoint     ``S+ = S- + (f- - f+) dtau/dp``                   ``lambda- = lambda+``,
                                                                 ``grad += dtau/dp (lambda+ . (f- - f+))``
event          ``S+ = G_x S- + G_p + (G_x f- - f+ + G_t)``       ``lambda- = G_x^T lambda+``, ``grad += G_p^T lambda+``
               ``dtau/dp``                                       ``+ dtau/dp (lambda+ . (G_x f- - f+ + G_t))``
steady state   ``[A; L^T] S_ss = [-B; L^T S-]``                  ``nu = (M^T)^+ lambda_ss``, ``M = [A; L^T]``;
(``t = inf``)                                                    ``grad -= B^T nu_A``, ``lambda- += L nu_L``
=============  ==============================================  ==================================================

:func:`steady_state_adjoint` is the last row alone: the transpose of
:func:`pbsens.simulation.steady_state.steady_state_sensitivity` (one ``n x n`` solve instead of
``np`` right-hand sides), for preequilibrations. Where that Newton form is not defined, a
preequilibration takes the forward code's integrated ``S_ss`` instead (its cost is the forward
one), and an ``inf`` output after the simulation raises :class:`PbsensError`: its integrated
sensitivity needs the forward ``S``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PbsensError, SolverError, UnsupportedModelError
from ..sensitivity.adjoint import march_backward, march_plan
from .segments import _SHIFT, _breakpoint_shift, _stops
from .steady_state import _newton_form_defect, conservation_laws, steady_state

__all__ = ["StateTape", "backward", "backward_sets", "check_adjoint_supported", "forward_states", "steady_state_adjoint"]


@dataclass
class StateTape:
    """The forward pass of one simulation (states only), for :func:`backward`.

    ``x``: the states at the output times (``inf`` rows: the steady state); ``items``: in
    forward order, ``("segment", trajectory, times, rows, idx)`` (output rows ``rows`` at
    ``times[idx]``), ``("still", rows)`` (outputs where no time passes), ``("breakpoint", x,
    shift, t_before, t_after)``, ``("event", k, tau, x_before, dtau, t_after)``, ``("steady",
    t_ss, x_ss, rows, columns, why)`` (``why``: None, or why the Newton form is not defined).
    """

    x: np.ndarray
    p: np.ndarray
    items: list = field(default_factory=list)
    options: dict = field(default_factory=dict)


def check_adjoint_supported(model):
    """Raise (:class:`PbsensError`, naming the construct) unless the adjoint gradient applies to ``model``."""
    _check_events(model)


def _check_events(model):
    if getattr(model.discontinuities, "state_events", None):     # their times move with x: not transposed here
        raise PbsensError(f"the adjoint gradient does not support state-triggered events (model {model.name!r}); "
                          "use a forward method")
    if getattr(model.discontinuities, "queued", False):          # executions apart from triggers: see event_queue
        names = [n for k, n in enumerate(model.discontinuities.event_names)
                 if model.discontinuities.event_delayed[k] or model.discontinuities.event_prioritized[k]]
        raise UnsupportedModelError(f"the adjoint gradient does not support delayed or prioritized events (model "
                                    f"{model.name!r}: {', '.join(map(repr, names))})",
                                    [("event delay sensitivities", n) for n in names])


def forward_states(model, te, p, x, *, t0=0.0, solver="rodas5p", rtol=1e-8, atol=1e-10, substeps=None,
                   midpoint=None, reuse_tol=1e-12, columns=None, steady_state_options=None,
                   solver_options=None, linalg="auto") -> StateTape:
    """The states of ``model`` at the sorted output times ``te`` (may end with ``inf``) from ``x`` at
    ``t0``, as :func:`pbsens.simulation.segments.simulate` with a post-hoc method computes them, with
    the tape of :func:`backward`. ``substeps``, ``midpoint``, ``reuse_tol``: the march's options
    (:func:`pbsens.sensitivity.adjoint.march_plan`); ``columns``, ``linalg``: as ``simulate``'s."""
    from ..sensitivity.options import DEFAULT_SUBSTEPS
    from ..solvers import solve_states
    _check_events(model)
    solver_options = dict(solver_options or {})
    m = substeps or DEFAULT_SUBSTEPS.get(solver, 1)
    finite = te[np.isfinite(te)]
    t_last = float(finite[-1]) if finite.size else t0
    stops, at_start, start_shift = _stops(model, p, t0, t_last)
    x = np.array(x, dtype=np.float64)
    X_out = np.empty((te.size, model.n_states))
    tape = StateTape(x=X_out, p=p, options=dict(substeps=substeps, midpoint=midpoint, reuse_tol=reuse_tol,
                                                linalg=linalg,
                                                columns=None if columns is None else _columns(model, columns)))
    items = tape.items
    for k in at_start:
        xn = _event(model, k, t0, x, p)
        items.append(("event", k, t0, x, None, t0))
        x = xn
    cur, cur_is_stop = t0, start_shift
    bounds = list(stops)
    if not bounds or bounds[-1][0] <= t_last:
        bounds.append((t_last, None, None))
    for tau, tb, ev in bounds:
        final = tb is None
        a = cur + _SHIFT * max(1.0, abs(cur)) if cur_is_stop else cur
        if final:
            b = tau
            sel = np.flatnonzero((finite >= cur) & (finite <= tau))
        else:
            b = tau - _SHIFT * max(1.0, abs(tau))
            sel = np.flatnonzero((finite >= cur) & (finite < tau))
        if b > a:
            times = np.unique(np.concatenate([np.clip(finite[sel], a, b), [b]]))
            tr = solve_states(model, (a, b), t_eval=times, p=p, x0=x, method=solver, rtol=rtol, atol=atol,
                              dense_output=m > 1, **solver_options)
            X = tr.x[tr.eval_index]
            idx = np.searchsorted(times, np.clip(finite[sel], a, b))
            X_out[sel] = X[idx]
            items.append(("segment", tr, times, sel, idx))
            x = X[-1].copy()
        else:
            X_out[sel] = x
            items.append(("still", sel))
        if final:
            break
        t_before = tau - _SHIFT * max(1.0, abs(tau))
        t_after = tau + _SHIFT * max(1.0, abs(tau))
        if tb:
            shift = _breakpoint_shift(model, tau, tb, columns)
            if shift is not None:
                items.append(("breakpoint", x.copy(), shift, t_before, t_after))
        for k, dtau in ev or ():
            xn = _event(model, k, tau, x, p)
            items.append(("event", k, tau, x, dtau, t_after))
            x = xn
        cur, cur_is_stop = tau, True
    inf_rows = np.flatnonzero(~np.isfinite(te))
    if inf_rows.size:
        ss = dict(steady_state_options or {})
        if isinstance(solver, str):
            ss.setdefault("solver", solver)
        if columns is not None:
            ss.setdefault("columns", columns)
        cols = _columns(model, ss.pop("columns", None))
        ss.pop("return_info", None)
        x_ss, _, info = steady_state(model, p, x, None, sensitivities=False, t=t_last, return_info=True, **ss)
        why = "sensitivity_mode='integrate'" if ss.get("sensitivity_mode") == "integrate" else \
            _newton_form_defect(model, t_last, info["time"], x, x_ss, p, cols)
        X_out[inf_rows] = x_ss
        items.append(("steady", info["time"], np.asarray(x_ss), inf_rows, cols, why))
    return tape


def _columns(model, columns):
    return np.arange(model.n_params) if columns is None else np.asarray(columns, dtype=np.int64).reshape(-1)


def _event(model, k, tau, x, p):
    xn = model.discontinuities.apply_event(k, tau, x, p)[0]
    if not np.all(np.isfinite(xn)):
        raise PbsensError(f"model {model.name!r}: event {model.discontinuities.event_names[k]!r} at t = {tau:.6g} "
                          "sets a state to NaN or inf")
    return xn


def _start_masks(model, tape, S0):
    """Per tape item, which of the forward march's columns (``tape.options["columns"]``, default all) are
    non-zero where the item starts: ``S0``'s (None: none), then after a segment also every column with
    a structural non-zero of ``B``, after a jump the columns it writes. The sparse transpose repeats
    the forward sparse march's step choice, which depends on the columns marched (METHOD.md section 16)."""
    cols = tape.options.get("columns")
    cols = np.arange(model.n_params) if cols is None else cols
    mask = np.zeros(cols.size, bool) if S0 is None else np.any(np.asarray(S0)[:, cols] != 0.0, axis=0)
    has_b = None
    masks = []
    for item in tape.items:
        masks.append(mask.copy())
        kind = item[0]
        if kind == "segment":
            if has_b is None:
                from ..model.sparsity import sparse_jacobians
                has_b = np.zeros(model.n_params, bool)
                has_b[sparse_jacobians(model).Bi] = True
            mask |= has_b[cols]
        elif kind == "breakpoint":
            mask |= np.asarray(item[2])[cols] != 0.0
        elif kind == "event":
            mask[:] = True
    return cols, masks


def backward(model, tape: StateTape, dJdx, method="exp2", S0=None):
    """``(lambda(t0), grad)`` of ``J`` with ``dJ/dx`` at the tape's output rows ``dJdx`` (n_rows, nx):
    ``dJ/dp = grad + S0^T lambda(t0)`` (plus ``J``'s explicit terms) with ``S0 = dx(t0)/dp``.
    ``S0`` (optional, ``nx x n_params``): only its pattern of non-zero columns is read, by the
    transpose of the sparse march (which columns the forward march marches)."""
    return backward_sets(model, tape, [dJdx], method, S0)[0]


def backward_sets(model, tape: StateTape, sets, method="exp2", S0=None):
    """:func:`backward` for several ``dJdx`` at once: ``[(lambda(t0), grad)]``, one per entry of ``sets``.
    Each segment's march plan (grid, states at the midpoints) is made once and every set marched in one
    backward march (each interval's Jacobians, step choice and matrix functions formed once for all)."""
    nx, p = model.n_states, tape.p
    lams = [np.zeros(nx) for _ in sets]
    grads = [np.zeros(model.n_params) for _ in sets]
    opts = tape.options
    masks = cols = None
    for pos, item in reversed(list(enumerate(tape.items))):
        kind = item[0]
        if kind == "segment":
            _, tr, times, rows, idx = item
            setup, mopts, mid = march_plan(model, tr, p, times, method, substeps=opts["substeps"],
                                           reuse_tol=opts["reuse_tol"], midpoint=opts["midpoint"],
                                           linalg=opts.get("linalg", "auto"))
            if mopts.use_sparse and masks is None:
                cols, masks = _start_masks(model, tape, S0)
            ds = np.zeros((len(sets), times.size, nx))
            for i, dJdx in enumerate(sets):
                np.add.at(ds[i], idx, dJdx[rows])
            # one backward march for every set: each interval's Jacobians and matrix functions formed once
            lam_all, g_all = march_backward(model, setup, mopts, mid, ds, lam_end=np.array(lams), cols=cols,
                                            nonzero_start=None if masks is None else masks[pos])
            for i in range(len(sets)):
                lams[i] = lam_all[i]
                grads[i] += g_all[i]
        elif kind == "still":
            for i, dJdx in enumerate(sets):
                lams[i] = lams[i] + dJdx[item[1]].sum(axis=0)
        elif kind == "breakpoint":
            _, x, shift, t_before, t_after = item
            jump = model.rhs(t_before, x, p) - model.rhs(t_after, x, p)
            for i in range(len(sets)):
                grads[i] += shift * float(lams[i] @ jump)
        elif kind == "event":
            _, k, tau, x, dtau, t_after = item
            xn, Gx, Gp, Gt = model.discontinuities.apply_event(k, tau, x, p)
            timed = dtau is not None and np.any(dtau != 0)
            jump = Gx @ model.rhs(t_after, x, p) - model.rhs(t_after, xn, p) + Gt if timed else None
            for i in range(len(sets)):
                grads[i] += Gp.T @ lams[i]
                if timed:
                    grads[i] += np.asarray(dtau) * float(lams[i] @ jump)
                lams[i] = Gx.T @ lams[i]
        else:                       # "steady": the t = inf rows, from the state at the last finite time
            _, t_ss, x_ss, rows, cols_ss, why = item
            if why is not None:
                raise PbsensError(f"the adjoint gradient of a steady-state (t = inf) output needs the Newton form "
                                  f"A S = -B, not defined here ({why}); use a forward method")
            for i, dJdx in enumerate(sets):
                lam_before, g = steady_state_adjoint(model, t_ss, x_ss, p, dJdx[rows].sum(axis=0), cols_ss)
                grads[i] += g
                lams[i] = lams[i] + lam_before
        if not all(np.all(np.isfinite(lam)) for lam in lams):
            raise SolverError(f"adjoint of model {model.name!r}: lambda is NaN or inf after a {kind} (backward)")
    return list(zip(lams, grads))


def steady_state_adjoint(model, t_ss, x_ss, p, lam, columns=None):
    """The transpose of :func:`pbsens.simulation.steady_state.steady_state_sensitivity`.

    For ``S = M^+ [-B; L^T S0]``, ``M = [A; L^T]`` (``A``, ``B`` at the steady state, ``L`` its
    conservation laws, none: ``S = -A^-1 B``) and a cotangent ``lam`` of ``x_ss``:
    ``lam^T S = -nu_A^T B + (L nu_L)^T S0`` with ``nu = (M^T)^+ lam`` (the minimum-norm solution
    of ``M^T nu = lam``; ``(M^+)^T = (M^T)^+`` for ``M`` of full column rank). Returns
    ``(L nu_L, grad)``: the cotangent of the state the approach started from (``S0``'s) and
    ``-B^T nu_A`` in ``columns`` (zero elsewhere). One ``n x n`` solve (or least squares), whatever
    the number of parameters.
    """
    cols = _columns(model, columns)
    A = model.jac_x(t_ss, x_ss, p)
    B = model.jac_p(t_ss, x_ss, p)[:, cols]
    L, inconsistent = conservation_laws(A, B)
    if inconsistent:
        raise SolverError(f"steady state of model {model.name!r}: the Jacobian df/dx is singular but its null "
                          "directions are not conservation laws (L^T df/dp != 0); the steady-state "
                          "sensitivities are not defined there")
    n = A.shape[0]
    if L.shape[1] == 0:
        try:
            nu = np.linalg.solve(A.T, lam)
        except np.linalg.LinAlgError:
            raise SolverError(f"steady state of model {model.name!r}: df/dx is singular") from None
        lam_start = np.zeros(n)
    else:
        M = np.vstack([A, L.T])
        nu = np.linalg.lstsq(M.T, lam, rcond=None)[0]
        lam_start = L @ nu[n:]
    grad = np.zeros(model.n_params)
    grad[cols] = -(B.T @ nu[:n])
    if not (np.all(np.isfinite(grad)) and np.all(np.isfinite(lam_start))):
        raise SolverError(f"steady-state adjoint of model {model.name!r} is NaN/inf")
    return lam_start, grad
