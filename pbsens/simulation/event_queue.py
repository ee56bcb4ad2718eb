"""Delayed and prioritized events (SBML): the queue between an event's trigger and its execution.

:func:`simulate_queued` simulates the states of a model whose events have a
``delay`` or a ``priority`` (:class:`~pbsens.model.spec.Event`);
:func:`pbsens.simulation.segments.simulate` hands such models to it. SBML
Level 3's semantics (section 4.11 of the specification):

* An event is **triggered** when its trigger changes from false to true: a
  time-triggered event at its time ``tau(p)``, a state-triggered one at the root
  ``t*`` found by :class:`~pbsens.simulation.state_events.TriggerWatch`; a
  trigger that holds at ``t0`` with ``initial_value`` false triggers at ``t0``.
* Its **delay** is evaluated then, from the state at the trigger time, and its
  **execution** is put in the queue at ``t_trigger + delay`` (0 without a
  delay). With ``use_values_from_trigger_time`` the assignments are evaluated at
  the trigger time too and stored with the execution; otherwise at the
  execution. An event triggered again before its execution gets a second entry
  (both execute).
* A **non-persistent** event (``persistent=False``) whose trigger turns false
  while its execution is pending is removed from the queue: along each solved
  span the trigger is evaluated on the solver's grid, and at an instant after
  each execution.
* At an instant, the executions due then run one at a time: the one of highest
  **priority** (evaluated at that moment, from the current state) first; ties,
  and events without a priority, in the order they were triggered (SBML leaves
  their order open; this one is deterministic), an event without a priority
  after those with one. After each execution the triggers are evaluated again:
  events whose trigger turned true are triggered (an execution due at once
  joins the instant), pending non-persistent events whose trigger turned false
  are removed.

Executions due within ``2 _SHIFT max(1, |t|)`` of one another belong to one
instant. The spans between the stops (breakpoints, trigger times, executions,
the last output time) are solved as in :func:`~pbsens.simulation.segments.simulate`,
outputs at an instant report the state after it. Sensitivities are not
computed here: :func:`~pbsens.simulation.segments.simulate` refuses them for
such models (``"event delay sensitivities"``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..errors import PbsensError, SolverError
from .spans import _SHIFT, _Outputs, _scan_segment
from .state_events import MAX_CASCADE, MAX_EVENTS, TriggerWatch

__all__ = ["simulate_queued", "EventQueue", "Pending"]


@dataclass
class Pending:
    """One pending execution: event ``k`` triggered at ``t_trigger``, due at ``t_exec``; ``values`` the
    assignments' values at the trigger time (None: evaluated at the execution); ``seq`` the trigger order."""

    k: int
    t_trigger: float
    t_exec: float
    values: np.ndarray | None
    seq: int


class _Watch(TriggerWatch):
    """A :class:`TriggerWatch` that reports every event whose trigger turns true at one instant (the queue
    orders their executions) instead of refusing simultaneous ones."""

    def _single(self, firing, t):
        return [self.disc.state_events[s] for s in firing]

    def truth_now(self, t, x):
        """The state events' trigger values (ns,) at ``(t, x)`` (latches released when left)."""
        return self._truth(np.array([t]), np.asarray(x, dtype=np.float64)[None, :])[2][0]


def _instant_tol(t):
    return 2.0 * _SHIFT * max(1.0, abs(t))


class EventQueue:
    """The pending executions of one simulation and the instants that run them."""

    def __init__(self, model, p, watch):
        self.model, self.disc, self.p, self.watch = model, model.discontinuities, p, watch
        self.pending = []
        self.fired = []
        self._seq = 0
        self._slot = {k: s for s, k in enumerate(self.disc.state_events)}

    # ------------------------------------------------------------------ queueing
    def next_time(self):
        return min((e.t_exec for e in self.pending), default=np.inf)

    def _values(self, k, t, x):
        xn = self.disc.apply_event(k, t, x, self.p)[0]
        v = xn[self.disc.event_targets[k]]
        if not np.all(np.isfinite(v)):
            raise PbsensError(f"model {self.model.name!r}: event {self.disc.event_names[k]!r} at t = {t:.6g} sets a "
                              "state to NaN or inf")
        return v

    def trigger(self, k, t, x):
        """Event ``k`` triggered at ``t`` with the state ``x``: its execution joins the queue."""
        d = self.disc
        delay = d.event_delay(k, t, x, self.p)[0] if d.event_delayed[k] else 0.0
        if not np.isfinite(delay) or delay < 0:
            raise PbsensError(f"model {self.model.name!r}: event {d.event_names[k]!r} triggered at t = {t:.6g} has "
                              f"the delay {delay!r} (SBML requires a finite delay >= 0)")
        values = self._values(k, t, x) if d.event_trigger_values[k] else None
        self.pending.append(Pending(int(k), float(t), float(t) + float(delay), values, self._seq))
        self._seq += 1

    def cancel(self, truth):
        """Remove the pending executions of non-persistent state events whose trigger is false in some
        row of ``truth`` (K, ns) (the trigger values along a span, or at an instant)."""
        truth = np.atleast_2d(truth)
        if not truth.size:
            return
        keep = []
        for e in self.pending:
            s = self._slot.get(e.k)
            if s is not None and not self.disc.event_persistent[e.k] and not truth[:, s].all():
                continue
            keep.append(e)
        self.pending = keep

    def _choose(self, ready, t, x):
        def key(e):
            q = self.disc.event_priority(e.k, t, x, self.p)
            if q is not None and np.isnan(q):
                raise PbsensError(f"model {self.model.name!r}: the priority of event "
                                  f"{self.disc.event_names[e.k]!r} at t = {t:.6g} is NaN")
            return (0, -q, e.seq) if q is not None else (1, 0.0, e.seq)
        return min(ready, key=key)

    # ------------------------------------------------------------------ an instant
    def instant(self, t, x, triggered=()):
        """Trigger the events ``triggered`` at ``t``, then run the executions due at ``t`` (see the module
        docstring); the state after them."""
        for k in triggered:
            self.trigger(k, t, x)
        tol = _instant_tol(t)
        for _ in range(MAX_CASCADE):
            if self.watch is not None:
                self.cancel(self.watch.truth_now(t, x))
            ready = [e for e in self.pending if e.t_exec <= t + tol]
            if not ready:
                return x
            e = self._choose(ready, t, x)
            self.pending.remove(e)
            values = e.values if e.values is not None else self._values(e.k, t, x)
            x = x.copy()
            x[self.disc.event_targets[e.k]] = values
            self.fired.append((self.disc.event_names[e.k], t))
            if len(self.fired) > MAX_EVENTS:
                raise SolverError(f"model {self.model.name!r}: more than {MAX_EVENTS} events by t = {t:.6g} "
                                  "(a trigger that switches without end?)")
            if self.watch is not None:
                w = self.watch
                now = w.truth_now(t, x)
                rising = np.flatnonzero(~w.prev & now)
                w.prev = now.copy()
                for s in rising:
                    self.trigger(self.disc.state_events[s], t, x)
        raise SolverError(f"model {self.model.name!r}: {MAX_CASCADE} event executions at t = {t:.6g} without end")


def simulate_queued(model, te, p, x, t0, solver, rtol, atol, solver_opts, checked=False, t_start=None):
    """States of ``model`` (with delayed or prioritized events) at the sorted output times ``te`` (finite,
    may end with ``inf``: handled by the caller) from ``x`` at ``t0``.

    Returns ``(X (K_finite, nx), fired [(name, t)], spans [(a, b)], seconds in the solves, x at the last
    finite output time)``."""
    if t_start is None:
        t_start = time.perf_counter()
    disc = model.discontinuities
    finite = te[np.isfinite(te)]
    t_last = float(finite[-1]) if finite.size else t0
    tb, _ = disc.breakpoints(p)
    tt, _ = disc.event_times(p)
    if not (np.all(np.isfinite(tb)) and np.all(np.isfinite(tt))):
        raise PbsensError(f"model {model.name!r}: a breakpoint or event time is NaN or inf for these parameters")
    bps = sorted({float(b) for b in tb if t0 < b <= t_last})
    tevents = sorted((float(tt[i]), k) for i, k in enumerate(disc.time_events) if t0 < tt[i] <= t_last)
    at_start = [k for i, k in enumerate(disc.time_events) if tt[i] <= t0 and not disc.event_initial_values[k]]
    watch = _Watch(model, p, rtol, atol) if disc.n_state_events else None
    queue = EventQueue(model, p, watch)
    out = _Outputs(te.size, model.n_states, model.n_params, False, False)
    seg_args = ("exp2", False, solver, rtol, atol, {}, {}, solver_opts, checked)

    if watch is not None:
        now = watch.truth_now(t0, x)
        at_start += [disc.state_events[s] for s in np.flatnonzero(~watch.prev & now)]
        watch.prev = now.copy()
    x = queue.instant(t0, x, sorted(at_start))
    cur, cur_shift = t0, bool(np.any(tb == t0))
    while True:
        nxt = min(bps[0] if bps else np.inf, tevents[0][0] if tevents else np.inf, queue.next_time(), t_last)
        tol = _instant_tol(nxt)
        stop_here = ((bps and bps[0] <= nxt + tol) or (tevents and tevents[0][0] <= nxt + tol)
                     or queue.next_time() <= nxt + tol)
        is_end = not stop_here
        a = cur + _SHIFT * max(1.0, abs(cur)) if cur_shift else cur
        b = nxt if is_end else nxt - _SHIFT * max(1.0, abs(nxt))
        sel = np.flatnonzero((finite >= cur) & ((finite <= nxt) if is_end else (finite < nxt)))
        hit, tr = None, None
        if watch is not None and b > a:
            t1 = time.perf_counter()
            hit, tr = _scan_segment(model, watch, a, b, finite[sel], x, p, "exp2", False, solver, rtol, atol,
                                    solver_opts, checked)
            out.seg_time += time.perf_counter() - t1
            end = hit[0] if hit is not None else b
            rows = tr.t <= end
            if queue.pending and rows.any():
                queue.cancel(watch._truth(tr.t[rows], tr.x[rows], release=False)[2])
            if hit is not None:
                b, tr = hit[0], None
                sel = np.flatnonzero((finite >= cur) & (finite < b))
        x, _, _ = out.span(model, a, b, sel, finite, x, None, p, None, tr, seg_args)
        if hit is not None:
            t_star, c, post, ks = hit
            watch._latch(c, t_star, x, post)
            x = queue.instant(t_star, x, sorted(ks))
            cur, cur_shift = t_star, False
            continue
        if is_end:
            break
        while bps and bps[0] <= nxt + tol:
            bps.pop(0)
        triggered = []
        while tevents and tevents[0][0] <= nxt + tol:
            triggered.append(tevents.pop(0)[1])
        x = queue.instant(nxt, x, triggered)
        cur, cur_shift = nxt, True
    return out.X[:finite.size], queue.fired, out.spans, out.seg_time, x
