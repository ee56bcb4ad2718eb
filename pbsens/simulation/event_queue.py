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
  among equal priorities at random (SBML's rule) from a generator seeded per
  simulation (:data:`TIE_SEED`, so that a simulation is reproducible); events
  without a priority (their order SBML leaves open) after those with one, in
  the order they were triggered. After each execution the triggers are evaluated again:
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
from .spans import _SHIFT, _Outputs, _scan_segment, span_bounds
from .state_events import MAX_CASCADE, MAX_EVENTS, TriggerWatch

__all__ = ["simulate_queued", "EventQueue", "Pending", "TIE_SEED"]

#: Seed of the random order of executions of equal priority (one generator per simulation).
TIE_SEED = 20260101


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
    orders their executions) instead of refusing simultaneous ones, finds a trigger that turns true and
    false again inside one solver step, and reads a component within rounding of 0 at an instant as 0."""

    def _single(self, firing, t):
        return [self.disc.state_events[s] for s in firing]

    def truth_now(self, t, x):
        """The state events' trigger values (ns,) at ``(t, x)`` (latches released when left). A component
        within its band of 0 (as :meth:`_latch` sets it) counts as exactly 0 and is held at that truth until
        it leaves the band: an assignment that sets a state to a trigger's threshold (up to the rounding
        of the values it was computed from) neither flips the trigger nor lets it flicker."""
        x = np.asarray(x, dtype=np.float64)
        H = self.disc.trigger_values(np.array([t]), x[None, :], self.p)[0]
        for c in np.flatnonzero(np.abs(H) <= _SNAP * (self.atol.max() + self.rtol * np.abs(x).max())):
            if int(c) in self.latch:
                continue
            hx, _, _ = self.disc.trigger_gradient(int(c), t, x, self.p)
            band = _SNAP * float(np.abs(hx) @ (self.atol + self.rtol * np.abs(x)))
            if abs(H[c]) <= band:
                self.latch[int(c)] = (not bool(self.disc.component_strict[c]), band)
        return self._truth(np.array([t]), x[None, :])[2][0]

    def scan(self, tr):
        """:meth:`TriggerWatch.scan` on the solver's grid refined where components change sign: in such a
        step the points between the roots of the components that changed are added (from the dense
        output), so that a trigger true only between two of those roots is seen."""
        if tr.sol is None or tr.t.size < 2:
            return self._scan_keep(tr)
        H = self.disc.trigger_values(tr.t, tr.x, self.p)
        T = self.disc.trigger_truth(H)
        steps = np.flatnonzero((T[:-1] != T[1:]).sum(axis=1) >= 2)
        if not steps.size:
            return self._scan_keep(tr)
        extra = []
        for j in steps:
            ta, tb = float(tr.t[j]), float(tr.t[j + 1])
            roots = sorted(self._root(tr, c, ta, tb, H[j, c], H[j + 1, c])
                           for c in np.flatnonzero(T[j] != T[j + 1]))
            cuts = [ta] + roots + [tb]
            extra += [0.5 * (u + v) for u, v in zip(cuts[:-1], cuts[1:]) if ta < 0.5 * (u + v) < tb]
        t = np.unique(np.concatenate([tr.t, extra]))
        fine = _Fine(t, np.array([tr.sol(s) for s in t]), tr.sol)
        fine.x[np.searchsorted(t, tr.t)] = tr.x        # the grid's own values where it has them
        return self._scan_keep(fine)

    def _scan_keep(self, tr):
        """:meth:`TriggerWatch.scan`, keeping the triggers' values along the span (``span_truth``: the
        times and (K, ns) values, the first row the values at its start) before the scan releases latches."""
        A = self._truth(tr.t, tr.x, release=False)[2]
        A[0] = self.prev
        self.span_truth = (np.asarray(tr.t), A)
        return super().scan(tr)


class _Fine:
    """A trajectory's grid with added points (``t``, ``x``) and its dense output (what ``scan`` reads)."""

    def __init__(self, t, x, sol):
        self.t, self.x, self.sol = t, x, sol


#: A component within this many (atol + rtol |x|) (through h_x) of 0 at an instant counts as 0.
_SNAP = 100.0


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
        self.rng = np.random.default_rng(TIE_SEED)

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
        """The execution to run first: highest priority; among equal priorities one drawn at random (SBML:
        equal priorities execute in random order; the generator is seeded per simulation, so a simulation
        is reproducible); events without a priority after, in trigger order."""
        keys = []
        for e in ready:
            q = self.disc.event_priority(e.k, t, x, self.p)
            if q is not None and np.isnan(q):
                raise PbsensError(f"model {self.model.name!r}: the priority of event "
                                  f"{self.disc.event_names[e.k]!r} at t = {t:.6g} is NaN")
            keys.append((0, -q, e.seq) if q is not None else (1, 0.0, e.seq))
        best = min(keys)
        if best[0] == 0:
            tied = [e for e, kk in zip(ready, keys) if kk[:2] == best[:2]]
            if len(tied) > 1:
                return tied[int(self.rng.integers(len(tied)))]
        return ready[keys.index(best)]

    # ------------------------------------------------------------------ an instant
    def instant(self, t, x, triggered=()):
        """Trigger the events ``triggered`` at ``t``, then run the executions due at ``t`` (see the module
        docstring); the state after them."""
        for k in triggered:
            self.trigger(k, t, x)
        tol = _instant_tol(t)
        for _ in range(MAX_CASCADE + 10 * self.disc.n_events):
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
    seg_args = ("exp2", False, solver, rtol, atol, {}, {}, solver_opts, checked, None)

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
        a, b, sel = span_bounds(cur, cur_shift, nxt, is_end, finite)
        hit, tr = None, None
        if watch is not None and b > a:
            t1 = time.perf_counter()
            hit, tr = _scan_segment(model, watch, a, b, finite[sel], x, p, "exp2", False, solver, rtol, atol,
                                    solver_opts, checked)
            out.seg_time += time.perf_counter() - t1
            end = hit[0] if hit is not None else b
            ts, A = watch.span_truth
            if queue.pending:      # the triggers along the span up to its end (before a root found in it)
                queue.cancel(A[ts < end] if hit is not None else A)
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
