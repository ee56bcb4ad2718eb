"""The spans of a simulation between its stops: one state solve (and the sensitivities) per span.

Used by :func:`pbsens.simulation.segments.simulate` and by the event queue of
delayed and prioritized events (:mod:`pbsens.simulation.event_queue`): a span
``[a, b]`` is an ordinary state solve (:func:`pbsens.solve_states`) followed by
post-hoc sensitivities (:func:`pbsens.sensitivities`, starting from the ``S``
at ``a``), or one forward-sensitivity solve for ``method="fs"``; a span with
state-triggered events is first scanned for a trigger turning true
(:func:`_scan_segment`). ``_SHIFT`` is the relative gap left on either side of
a stop where the right-hand side may switch (see :mod:`.segments`).
"""
from __future__ import annotations

import time

import numpy as np

from ..sensitivity.methods import FORWARD

_SHIFT = 64 * np.finfo(float).eps


def _state_solver(method, sens, solver, checked):
    """The state solve (``solve_states`` or, after an earlier call checked the arguments, the compiled
    Rodas5P directly) and the solver name it uses for this method."""
    from ..solvers import solve_states
    if method == FORWARD and sens:
        return solve_states, solver or "BDF"
    if checked and solver == "rodas5p":
        return _solve_rodas5p, solver
    return solve_states, solver or "LSODA"


def _scan_segment(model, watch, a, b, outs, x, p, method, sens, solver, rtol, atol, solver_opts, checked):
    """Solve the states on ``[a, b]`` (with dense output) and look for a state event in it:
    ``(hit, tr)``, ``hit`` as :meth:`TriggerWatch.scan` returns it (None: no event)."""
    solve, name = _state_solver(method, sens, solver, checked)
    times = np.unique(np.concatenate([np.clip(outs, a, b), [b]]))
    tr = solve(model, (a, b), t_eval=times, p=p, x0=x, method=name, rtol=rtol, atol=atol, dense_output=True,
               **solver_opts)
    return watch.scan(tr), tr


def _segment(model, a, b, outs, x, S, p, method, sens, solver, rtol, atol, sens_opts, fs_opts, solver_opts,
             checked=False, carried=None, tr=None, columns=None):
    """Integrate ``[a, b]``; return (x at outs (n, nx), S at outs or None, x(b), S(b)), and with
    ``carried`` (the estimated error of ``S`` at ``a``, signed) the estimated error of S at outs and at b.
    ``tr``: the state trajectory on ``[a, b]`` with these outputs, when already solved (post-hoc methods).
    ``columns``: the only columns of ``S`` computed (:func:`pbsens.simulation.segments.simulate`); the
    others are zero."""
    from ..sensitivity.forward import forward_sensitivities
    from ..sensitivity.posthoc import sensitivities
    times = np.unique(np.concatenate([np.clip(outs, a, b), [b]]))
    solve_states, _ = _state_solver(method, sens, solver, checked)
    cols = columns if sens and columns is not None and 0 < columns.size < model.n_params else None
    zero_cols = None
    if method == FORWARD and sens:
        sel = {} if cols is None else {"params": cols}
        S_in = S if cols is None else np.ascontiguousarray(S[:, cols])
        r = forward_sensitivities(model, (a, b), t_eval=times, p=p, x0=x, S0=S_in, method=solver or "BDF",
                                  rtol=rtol, atol=atol, **sel, **fs_opts, **solver_opts)
        X, SS = r.x, _all_columns(r.S, cols, model.n_params)
    else:
        # the post-hoc march carries every column, from the full S of the previous span: exp2's sub-step
        # march decides per solver gap whether to freeze its matrix from ||S|| over the columns carried
        # (METHOD.md section 13), so a march of the wanted columns only (or from an S whose other columns
        # were zeroed) freezes other gaps than the full march, and moved Boehm's gradient by 1.1e-3
        # (tests/test_columns_posthoc.py); the columns not wanted are zeroed at the outputs only
        zero_cols = cols
        from ..sensitivity.posthoc import DEFAULT_SUBSTEPS
        solver = solver or "LSODA"
        interp = sens_opts.get("interpolation", "linear")
        substeps = sens_opts.get("substeps") or DEFAULT_SUBSTEPS.get(solver, 1)
        # dense output only when the march needs it (interpolated outputs, or a refined grid, e.g. rodas5p's)
        dense = interp == "dense" or (sens and substeps > 1)
        if tr is None:
            tr = solve_states(model, (a, b), t_eval=times, p=p, x0=x, method=solver, rtol=rtol, atol=atol,
                              dense_output=dense, **solver_opts)
        elif not dense:
            tr.sol = None
        X = tr.x[tr.eval_index]
        SS = None
        if sens:
            r = sensitivities(model, tr, method=method, S0=S, estimate_error=carried is not None, **sens_opts)
            SS = r.S
            if carried is not None:
                err = r.error_matrix
                if np.any(carried != 0):
                    # the error at a, carried by the march itself: it is linear in S0 on a fixed grid,
                    # so the march from S0 + e minus the one from S0 is the discrete transition times e
                    err = err + (sensitivities(model, tr, method=method, S0=S + carried, **sens_opts).S - SS)
    idx = np.searchsorted(times, np.clip(outs, a, b))
    out = (X[idx], (SS[idx] if SS is not None else None), X[-1].copy(), (SS[-1].copy() if SS is not None else None))
    if carried is not None:
        out += (err[idx], err[-1].copy())
    return _zero_other_columns(out, zero_cols)


def span_bounds(cur, cur_is_stop, end, final, finite):
    """``(a, b, sel)``: the span from ``cur`` (just past it when it is a stop) to ``end`` (just short of it
    unless it is the final end, where the right-hand side may switch) and the indices of the finite output
    times it owns (``end`` itself only when final)."""
    a = cur + _SHIFT * max(1.0, abs(cur)) if cur_is_stop else cur
    b = end if final else end - _SHIFT * max(1.0, abs(end))
    sel = np.flatnonzero((finite >= cur) & ((finite <= end) if final else (finite < end)))
    return a, b, sel


def _zero_other_columns(seg, cols):
    """``_segment``'s result with the columns of ``S`` (and its error) outside ``cols`` set to zero at the
    outputs; ``S`` and its error at the span's end keep every column (the next span starts from them)."""
    if cols is None:
        return seg
    seg = list(seg)
    for i in (1, 4):
        if i < len(seg) and seg[i] is not None:
            keep = np.zeros(seg[i].shape[-1], dtype=bool)
            keep[cols] = True
            seg[i] = np.where(keep, seg[i], 0.0)
    return tuple(seg)


def _all_columns(A, cols, n_params):
    """``A`` (..., nx, len(cols)) as (..., nx, n_params), zero outside ``cols`` (``A`` itself when ``cols`` is None)."""
    if cols is None or A is None:
        return A
    out = np.zeros(A.shape[:-1] + (n_params,))
    out[..., cols] = A
    return out


class _Outputs:
    """The outputs of one simulation as its spans fill them, with the time spent and the spans solved."""

    def __init__(self, K, nx, np_, sens, estimate_error):
        self.X = np.empty((K, nx))
        self.S = np.empty((K, nx, np_)) if sens else None
        self.E = np.empty((K, nx, np_)) if estimate_error else None
        self.seg_time = 0.0
        self.spans = []

    def span(self, model, a, b, sel, finite, x, S, p, carried, tr, seg_args):
        """Solve ``[a, b]`` (nothing when ``b <= a``), fill the outputs ``sel``; ``(x, S, carried)`` at ``b``."""
        method, sens, solver, rtol, atol, sens_opts, fs_opts, solver_opts, checked, columns = seg_args
        if b > a:
            t1 = time.perf_counter()
            seg = _segment(model, a, b, finite[sel], x, S, p, method, sens, solver, rtol, atol,
                           sens_opts, fs_opts, solver_opts, checked, carried=carried, tr=tr,
                           columns=columns)
            Xs, Ss, x, S_end = seg[:4]
            if carried is not None:
                self.E[sel], carried = seg[4], seg[5]
            self.seg_time += time.perf_counter() - t1
            self.spans.append((a, b))
            self.X[sel] = Xs
            if sens:
                self.S[sel] = Ss
                S = S_end
        else:
            self.X[sel] = x
            if sens:
                self.S[sel] = S
            if carried is not None:
                self.E[sel] = carried
        return x, S, carried


def _solve_rodas5p(model, t_span, *, method, **kwargs):
    from ..solvers.rosenbrock import solve_rosenbrock
    return solve_rosenbrock(model, t_span, **kwargs)
