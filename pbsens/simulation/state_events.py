"""Event execution: the jump of states and sensitivities, and the triggers of state-triggered events.

:func:`apply_event` executes one event at time ``tau`` (time- or
state-triggered): ``x_+ = g(t, x_-, p)`` and::

    S_+ = G_x S_- + G_p + (G_x f_- - f_+ + G_t) dtau/dp,

``G_x = dg/dx``, ``G_p = dg/dp``, ``G_t = dg/dt``, ``f_-`` the right-hand
side before the event and ``f_+`` after it.

:class:`TriggerWatch` follows the triggers of the state-triggered events
through a simulation (:func:`pbsens.simulation.segments.simulate`). SBML
semantics: an event fires when its trigger changes from false to true; before
the start its trigger has the value ``initial_value``, so an event whose
trigger holds at ``t0`` fires there when ``initial_value`` is false.

Finding the time of an event
----------------------------
After each solved segment the trigger components ``h`` (see
:mod:`pbsens.model.discontinuities`) are evaluated at every point of the
solver's grid (one vectorised call); the first step in which a trigger turns
from false to true holds the event. Its time ``t*`` is the root of the
component that switched, found by Brent's method on the solver's dense
output within that step. The segment is then solved again from its start to
``t*`` exactly (same solver and options, so the same steps up to the last),
its sensitivities computed on that trajectory, the event applied at ``t*``
and the solve continued from there. A trigger that becomes true and false
again inside one solver step is missed (as in every solver that locates
events from sign changes on its step grid); bound the step (``max_step``) if
a trigger can be that brief.

The sensitivity of the event time
---------------------------------
``t*(p)`` is defined by ``h(t*, x(t*; p), p) = 0`` for the component ``h``
that crossed; differentiating::

    dt*/dp = -(h_x S_- + h_p) / (h_x f_- + h_t),

with ``S_-``, ``f_-`` the sensitivities and right-hand side just before the
event. This ``dtau/dp`` enters the jump above. A crossing with ``h_x f_- +
h_t = 0`` (the trajectory touches the switching surface without crossing it,
"grazing") has no such derivative: :class:`~pbsens.errors.SolverError` names
the event when ``|h_x f_- + h_t| <= 1e-8 (|h_x| |f_-| + |h_t|)``.

A solve restarted at ``t*`` sees the switching component at about 0 (the
re-solved state differs from the dense output by the solver's error): until
that component has moved more than ``100 (atol + rtol |x|)`` (through ``h_x``)
away from 0, its truth value stays the one it crossed to, so the event does
not fire twice on rounding noise.

Several events at one instant
-----------------------------
An event's jump may make another trigger true at the same time (a cascade):
it fires right after, with the same ``dt*/dp``, and so on (at most
:data:`MAX_CASCADE` in a row). Two state-triggered events whose triggers
become true at the same instant would need SBML's priorities (or its
unspecified order) and ``useValuesFromTriggerTime`` to be ordered:
:class:`~pbsens.errors.UnsupportedModelError` (``"simultaneous events"``)
names them.
"""
from __future__ import annotations

import numpy as np

from ..errors import PbsensError, SolverError, UnsupportedModelError

__all__ = ["GRAZING_TOL", "MAX_CASCADE", "MAX_EVENTS", "TriggerWatch", "apply_event"]

#: Events set off by one another at one instant before the simulation gives up.
MAX_CASCADE = 100
#: Events in one simulation before it gives up (a trigger switching without end).
MAX_EVENTS = 100_000
#: Relative size of ``h_x f + h_t`` below which a crossing counts as grazing.
GRAZING_TOL = 1e-8
_LATCH_FACTOR = 100.0


def apply_event(model, k, tau, x, S, p, dtau, t_after, carried=None, dtau_carried=None):
    """Execute event ``k`` at ``tau``: ``(x_+, S_+)`` (and the carried error with ``carried``).

    ``dtau`` is ``dtau/dp`` (None when the time does not move with ``p``);
    ``t_after`` the time at which ``f_-`` and ``f_+`` are evaluated;
    ``dtau_carried`` the change of ``dtau`` that the carried error ``carried``
    of ``S_-`` causes (state-triggered events: their time depends on ``S_-``).
    """
    disc = model.discontinuities
    xn, Gx, Gp, Gt = disc.apply_event(k, tau, x, p)
    if not np.all(np.isfinite(xn)):
        raise PbsensError(f"model {model.name!r}: event {disc.event_names[k]!r} at t = {tau:.6g} sets a state to "
                          "NaN or inf")
    v = None
    if S is not None:
        Sn = Gx @ S + Gp
        if dtau is not None and np.any(dtau != 0) or dtau_carried is not None:
            f_minus = model.rhs(t_after, x, p)
            f_plus = model.rhs(t_after, xn, p)
            v = Gx @ f_minus - f_plus + Gt
            if dtau is not None:
                Sn += np.outer(v, dtau)
        if not np.all(np.isfinite(Sn)):
            raise PbsensError(f"model {model.name!r}: the sensitivities after event {disc.event_names[k]!r} at "
                              f"t = {tau:.6g} are NaN or inf")
        S = Sn
    if carried is not None:
        # an error e in S_- becomes G_x e (the other terms of the jump depend on x only), plus the
        # error of the jump's time term when the event time depends on S_-
        e = Gx @ carried
        if dtau_carried is not None and v is not None:
            e = e + np.outer(v, dtau_carried)
        return xn, S, e
    return xn, S


class TriggerWatch:
    """The trigger values of a model's state-triggered events along one simulation.

    Parameters
    ----------
    model : Model
    p : ndarray
    rtol, atol
        The state solver's tolerances (for the band around a root just crossed).
    """

    def __init__(self, model, p, rtol, atol):
        self.model = model
        self.disc = model.discontinuities
        self.p = p
        self.rtol = float(np.max(rtol))
        self.atol = np.broadcast_to(np.asarray(atol, dtype=np.float64), (model.n_states,)).copy()
        self.prev = np.array([self.disc.event_initial_values[k] for k in self.disc.state_events], dtype=bool)
        self.latch = {}          # component -> (truth it crossed to, band)

    # ---------------------------------------------------------------- evaluation
    def _truth(self, t, X, release=True):
        """``(H, truth, active)`` on the points ``(t, X)``, the latched components held until they leave
        their band (and released then, with ``release``)."""
        d = self.disc
        H = d.trigger_values(t, X, self.p)
        T = d.trigger_truth(H)
        for c, (post, band) in list(self.latch.items()):
            out = np.flatnonzero(np.abs(H[:, c]) > band)
            m = out[0] if out.size else H.shape[0]
            T[:m, c] = post
            if out.size and release:
                del self.latch[c]
        return H, T, d.triggers_active(T)

    def _latch(self, c, t, x, post):
        hx, _, _ = self.disc.trigger_gradient(c, t, x, self.p)
        band = _LATCH_FACTOR * float(np.abs(hx) @ (self.atol + self.rtol * np.abs(x)))
        self.latch[c] = (bool(post), band)

    # ---------------------------------------------------------------- scanning a segment
    def scan(self, tr):
        """The first state event in the solved trajectory ``tr``: ``(t*, c, post, [k])`` (its time, the
        component that crossed, that component's truth after the crossing, the event index), or None
        (then the trigger values at its end are kept)."""
        d = self.disc
        H, T, A = self._truth(tr.t, tr.x, release=False)
        A[0] = self.prev
        rises = ~A[:-1] & A[1:]
        steps = np.flatnonzero(rises.any(axis=1))
        if not steps.size:
            for c in list(self.latch):         # release the latches that left their band
                if np.any(np.abs(H[:, c]) > self.latch[c][1]):
                    del self.latch[c]
            self.prev = A[-1].copy()
            return None
        j = int(steps[0])
        ta, tb = float(tr.t[j]), float(tr.t[j + 1])
        cands = []
        for s in np.flatnonzero(rises[j]):
            for c in d.event_components[s]:
                if T[j, c] != T[j + 1, c]:
                    cands.append((self._root(tr, c, ta, tb, H[j, c], H[j + 1, c]), c))
        for r, c in sorted(cands):
            x = tr.sol(r) if tr.sol is not None else tr.x[j + 1]
            _, Tr, Ar = self._truth(np.array([r]), x[None, :], release=False)
            Tr[0, c] = T[j + 1, c]
            Ar = d.triggers_active(Tr)[0]
            firing = np.flatnonzero(~A[j] & Ar)
            if firing.size:
                ks = self._single(firing, r)
                self.prev = A[j] | Ar
                return r, c, bool(T[j + 1, c]), ks
        c = cands[0][1] if cands else d.event_components[int(np.flatnonzero(rises[j])[0])][0]
        ks = self._single(np.flatnonzero(rises[j]), tb)
        self.prev = A[j + 1].copy()
        return tb, c, bool(T[j + 1, c]), ks

    def _root(self, tr, c, ta, tb, ha, hb):
        """The time in ``[ta, tb]`` where component ``c`` crosses 0 (dense output; ``tb`` without one).
        A strict comparison at exactly 0 on the grid (``ha == 0``) turns true just after ``ta``: ``ta``."""
        if tr.sol is not None and ha == 0.0:
            return ta
        if tr.sol is None or not ha * hb < 0:
            return tb
        from scipy.optimize import brentq
        p, d = self.p, self.disc

        def h(s):
            return d.trigger_values(np.array([s]), tr.sol(s)[None, :], p)[0, c]

        fa, fb = h(ta), h(tb)
        if not fa * fb < 0:     # the dense output differs from the grid values by rounding near 0: the end
            return ta if fa == 0.0 or fa * hb > 0 else tb     # where it has crossed already
        return float(brentq(h, ta, tb, xtol=1e-14 * max(1.0, abs(tb)), rtol=4 * np.finfo(float).eps))

    def _single(self, firing, t):
        ks = [self.disc.state_events[s] for s in firing]
        if len(ks) > 1:
            names = [self.disc.event_names[k] for k in ks]
            raise UnsupportedModelError(
                f"model {self.model.name!r}: the state-triggered events {', '.join(map(repr, names))} fire at the "
                f"same time t = {t:.6g}; their order (SBML priorities, useValuesFromTriggerTime) is not supported",
                [("simultaneous events", n) for n in names])
        return ks

    # ---------------------------------------------------------------- firing
    def event_time_gradient(self, c, t, x, S, k):
        """``(dt*/dp, h_x / (h_x f + h_t))`` of a root of component ``c`` at ``(t, x)`` with ``S_- = S``."""
        hx, hp, ht = self.disc.trigger_gradient(c, t, x, self.p)
        f = self.model.rhs(t, x, self.p)
        den = float(hx @ f) + ht
        scale = float(np.abs(hx) @ np.abs(f)) + abs(ht)
        if den == 0.0 or abs(den) <= GRAZING_TOL * scale:
            raise SolverError(f"model {self.model.name!r}: event {self.disc.event_names[k]!r} at t = {t:.6g}: its "
                              f"trigger ({self.disc.component_texts[c]}) touches its switching value without "
                              "crossing it (grazing, h_x f + h_t = 0): the event time has no derivative")
        w = hx / den
        if S is None:
            return None, w
        return -(hx @ S + hp) / den, w

    def fire_root(self, t, c, post, ks, x, S, p, carried=None):
        """Execute the event found by :meth:`scan` at ``t`` (root of component ``c``, which crossed to
        truth ``post``) and whatever it sets off.

        Returns ``(x, S, carried, fired)`` with ``fired`` a list of ``(name, t)``."""
        k = ks[0]
        dtau, w = self.event_time_gradient(c, t, x, S, k)
        dcar = None if carried is None else -(w @ carried)
        before = self.disc.trigger_values(np.array([t]), x[None, :], p)[0, c]
        out = apply_event(self.model, k, t, x, S, p, dtau, t, carried, dcar)
        xn, Sn = out[0], out[1]
        carried = out[2] if carried is not None else None
        after = self.disc.trigger_values(np.array([t]), xn[None, :], p)[0, c]
        if after == before:            # the event left its own trigger where it was: hold the crossed side
            self._latch(c, t, xn, post)
        s = self.disc.state_events.index(k)
        self.prev[s] = True
        fired = [(self.disc.event_names[k], t)]
        x2, S2, carried, more = self.cascade(t, xn, Sn, p, dtau, carried, dcar)
        return x2, S2, carried, fired + more

    def cascade(self, t, x, S, p, dtau=None, carried=None, dcar=None):
        """Fire, one after the other, the state events whose trigger the state ``x`` at ``t`` makes true
        (from false): at the start, after a time event or after another state event.

        Returns ``(x, S, carried, fired)``."""
        fired = []
        if not self.disc.n_state_events:
            return x, S, carried, fired
        for _ in range(MAX_CASCADE):
            _, _, A = self._truth(np.array([t]), x[None, :])
            firing = np.flatnonzero(~self.prev & A[0])
            self.prev = A[0].copy()
            if not firing.size:
                return x, S, carried, fired
            k = self._single(firing, t)[0]
            out = apply_event(self.model, k, t, x, S, p, dtau, t, carried, dcar)
            x, S = out[0], out[1]
            carried = out[2] if carried is not None else None
            fired.append((self.disc.event_names[k], t))
        raise SolverError(f"model {self.model.name!r}: {MAX_CASCADE} events set one another off at t = {t:.6g} "
                          "without end")
