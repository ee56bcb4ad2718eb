"""Discontinuities of a model: breakpoints of piecewise inputs, time-triggered and state-triggered events.

Two things make a right-hand side ``f(t, x, p)`` or a trajectory jump at a
time known before the solve:

* **breakpoints**: a ``piecewise(...)`` (or ``heaviside``) whose condition
  compares the time with an expression of parameters, e.g.
  ``piecewise(0, t < t_on, dose)``; ``f`` switches branch at ``t = t_on(p)``;
* **events** (:class:`pbsens.model.spec.Event`): at ``t = tau(p)`` the states
  named by the event are set to ``g(t, x, p)``.

A solver must stop exactly there (never step across) and the sensitivities
jump there (see :func:`pbsens.simulation.segments.simulate`), which needs
``tau(p)``, ``d tau/dp`` and, for events, ``g``, ``dg/dx``, ``dg/dp``,
``dg/dt``. This module finds them symbolically and writes them as a plain
Python module (no numba: they run a few times per solve) into the same disk
cache as the compiled model (:func:`pbsens.model.codegen.cache_dir`), named by
:meth:`ModelSpec.discontinuities_key`; a warm process imports it without sympy.

A **state-triggered event** (``Event.trigger``) fires where its condition
changes from false to true, at a time found during the solve
(:mod:`pbsens.simulation.state_events`). Its trigger is split into
*components*: each comparison ``a > b``, ``a >= b``, ``a < b``, ``a <= b`` becomes
a continuous function ``h`` (``a - b`` or ``b - a``) that is positive (or
non-negative, for ``>=``/``<=``) exactly where the comparison holds; ``and``,
``or`` and ``not`` combine the components' truth values. The module holds ``h``
of every component vectorised over a time grid (numpy), its gradients ``h_x``,
``h_p``, ``h_t`` at a point, and each trigger as a function of the components'
truth values. Equalities (``==``, ``!=``) and constant triggers cannot be
located in time and raise :class:`UnsupportedModelError` (``"event trigger"``).

Breakpoints are the roots in ``t`` of every comparison inside a ``piecewise``
condition or ``heaviside`` argument of the right-hand side (definitions
substituted) that involves the time and no state and is linear in the time.
A comparison with the time that is not linear in it (``sin(t) > 0``) cannot be
located: it is listed in ``unresolved`` and :func:`load` warns. Comparisons of
states are not breakpoints (their switching time is not known in advance).
"""
from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import warnings
from dataclasses import dataclass

import numpy as np

from .._version import __version__
from ..errors import UnsupportedModelError

__all__ = ["Discontinuities", "load", "NONE"]

#: Bump when the generated source changes shape.
DISCONTINUITIES_VERSION = "4"

_SWITCH_WORDS = re.compile(r"\b(piecewise|heaviside)\b")


@dataclass
class Discontinuities:
    """The breakpoints and events of one model, as callables of ``p``.

    Attributes
    ----------
    n_breakpoints : int
    breakpoint_texts : list of str
        The comparison each breakpoint comes from (for messages).
    event_names : list of str
        Every event (time- and state-triggered), in spec order.
    event_initial_values : list of bool
    unresolved : list of str
        Comparisons with the time that could not be turned into breakpoints.
    module : module or None
        The generated module (``None`` when the model has no discontinuities).
    time_events : list of int
        Indices (into ``event_names``) of the time-triggered events.
    state_events : list of int
        Indices of the state-triggered events.
    component_texts : list of str
        The comparison of each trigger component (for messages).
    component_strict : ndarray of bool
        Per component: true for ``>``/``<`` (holds where ``h > 0``), false for
        ``>=``/``<=`` (``h >= 0``).
    event_components : list of list of int
        Per state-triggered event (in the order of ``state_events``): its components.
    event_targets : list of list of int
        Per event: the indices of the states it sets.
    event_delayed, event_prioritized, event_persistent, event_trigger_values : list of bool
        Per event: whether it has a delay, a priority, is persistent, and evaluates its
        assignments at the trigger time (see :class:`~pbsens.model.spec.Event`).
    """

    n_breakpoints: int
    breakpoint_texts: list
    event_names: list
    event_initial_values: list
    unresolved: list
    module: object = None
    time_events: list = None
    state_events: list = None
    component_texts: list = None
    component_strict: np.ndarray = None
    event_components: list = None
    event_targets: list = None
    event_delayed: list = None
    event_prioritized: list = None
    event_persistent: list = None
    event_trigger_values: list = None

    def __post_init__(self):
        if self.time_events is None:           # a model with time-triggered events only
            self.time_events = list(range(len(self.event_names)))
        self.state_events = list(self.state_events or [])
        self.component_texts = list(self.component_texts or [])
        self.component_strict = np.asarray(self.component_strict if self.component_strict is not None else [],
                                           dtype=bool)
        self.event_components = [list(c) for c in (self.event_components or [])]
        self._event_flags()

    def _event_flags(self):
        n = len(self.event_names)
        self.event_targets = [list(c) for c in (getattr(self, "event_targets", None) or [[]] * n)]
        self.event_delayed = list(getattr(self, "event_delayed", None) or [False] * n)
        self.event_prioritized = list(getattr(self, "event_prioritized", None) or [False] * n)
        self.event_persistent = list(getattr(self, "event_persistent", None) or [True] * n)
        self.event_trigger_values = list(getattr(self, "event_trigger_values", None) or [True] * n)

    def __getstate__(self):
        # a module does not pickle: keep its file and import it again on the other side
        state = dict(self.__dict__)
        m = state.pop("module")
        state["_module_file"] = (m.__name__, m.__file__) if m is not None else None
        return state

    def __setstate__(self, state):
        ref = state.pop("_module_file")
        self.__dict__.update(state)
        self._event_flags()          # a state pickled before these fields existed: no delays, no priorities
        self.module = _import_file(ref[1], ref[0]) if ref is not None else None

    @property
    def n_events(self) -> int:
        return len(self.event_names)

    def breakpoints(self, p):
        """``(tau, dtau_dp)``: breakpoint times (nb,) and their gradients (nb, np), unsorted."""
        if not self.n_breakpoints:
            return np.empty(0), np.empty((0, len(p)))
        return self.module.breakpoints(p), self.module.breakpoints_dp(p)

    @property
    def n_state_events(self) -> int:
        return len(self.state_events)

    def event_times(self, p):
        """``(tau, dtau_dp)``: times (nt,) of the time-triggered events and their gradients (nt, np),
        in the order of :attr:`time_events`."""
        if not self.time_events:
            return np.empty(0), np.empty((0, len(p)))
        return self.module.event_times(p), self.module.event_times_dp(p)

    def trigger_values(self, t, X, p):
        """The trigger components ``h`` (K, nc) at the times ``t`` (K,) and states ``X`` (K, nx)."""
        t = np.asarray(t, dtype=np.float64).reshape(-1)
        X = np.asarray(X, dtype=np.float64).reshape(t.size, -1)
        return self.module.trigger_values(t, X, p)

    def trigger_truth(self, H):
        """Whether each component holds, from its values ``H`` (..., nc)."""
        return np.where(self.component_strict, H > 0.0, H >= 0.0)

    def triggers_active(self, truth):
        """The state-triggered events' trigger values (K, ns) from the components' truth (K, nc)."""
        return self.module.triggers_active(np.atleast_2d(truth))

    def trigger_gradient(self, c, t, x, p):
        """``(h_x (nx,), h_p (np,), h_t)`` of component ``c`` at ``(t, x)``."""
        return self.module.trigger_gradient(int(c), float(t), np.asarray(x, dtype=np.float64), p)

    def apply_event(self, k, t, x, p):
        """``(x_new, G_x, G_p, G_t)`` of event ``k`` at time ``t`` from the state ``x`` before it."""
        return self.module.event_assign(int(k), float(t), np.asarray(x, dtype=np.float64), p)

    @property
    def queued(self) -> bool:
        """Whether an event has a delay or a priority (:mod:`pbsens.simulation.event_queue`)."""
        return any(self.event_delayed) or any(self.event_prioritized)

    def event_delay(self, k, t, x, p):
        """``(delay, d_x (nx,), d_p (np,), d_t)`` of event ``k`` at ``(t, x)`` (0 without a delay)."""
        return self.module.event_delay(int(k), float(t), np.asarray(x, dtype=np.float64), p)

    def event_priority(self, k, t, x, p):
        """The priority of event ``k`` at ``(t, x)`` (None without one)."""
        if not self.event_prioritized[k]:
            return None
        return float(self.module.event_priority(int(k), float(t), np.asarray(x, dtype=np.float64), p))


#: The discontinuities of a model that has none.
NONE = Discontinuities(0, [], [], [], [])


def load(spec):
    """The :class:`Discontinuities` of ``spec`` (from the disk cache when present).

    Raises
    ------
    UnsupportedModelError
        An event time depends on the states or on the time; a trigger that cannot
        be located in time (an equality, a constant).
    ModelError
        An event expression does not parse.
    """
    if spec is None:
        return NONE
    events = tuple(getattr(spec, "events", ()) or ())
    texts = list(spec.odes.values()) + [d.expression for d in spec.definitions]
    if not events and not any(_SWITCH_WORDS.search(e) for e in texts):
        return NONE
    from .codegen import load_generated
    key = hashlib.sha256("|".join([spec.discontinuities_key(), __version__, DISCONTINUITIES_VERSION])
                         .encode()).hexdigest()[:24]
    module = load_generated(spec, "discontinuities_" + key, generate_source)
    d = Discontinuities(module.NB, list(module.BREAKPOINT_TEXTS), list(module.EVENT_NAMES),
                        list(module.EVENT_INITIAL_VALUES), list(module.UNRESOLVED), module,
                        list(module.TIME_EVENTS), list(module.STATE_EVENTS), list(module.COMPONENT_TEXTS),
                        np.array(module.COMPONENT_STRICT, dtype=bool), [list(c) for c in module.EVENT_COMPONENTS],
                        [list(c) for c in module.EVENT_TARGETS], list(module.EVENT_DELAYED),
                        list(module.EVENT_PRIORITIZED), list(module.EVENT_PERSISTENT),
                        list(module.EVENT_TRIGGER_VALUES))
    if d.unresolved:
        warnings.warn(f"model {spec.name!r}: the time comparison(s) {', '.join(d.unresolved)} are not linear "
                      "in the time; their switching times are not known in advance and the solver may step "
                      "across them", stacklevel=3)
    return d


def _import_file(path, modname):
    """Import a stored module again after unpickling (in a worker process)."""
    if modname in sys.modules:
        return sys.modules[modname]
    ispec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(ispec)
    sys.modules[modname] = module
    try:
        ispec.loader.exec_module(module)
    except Exception:
        del sys.modules[modname]
        raise
    return module


# ------------------------------------------------------------------ derivation (sympy)
def find_breakpoints(f, t, xs):
    """``(taus, texts, unresolved)`` for the sympy expressions ``f`` (see the module docstring)."""
    import sympy as sp
    from sympy.core.relational import Relational

    xset = set(xs)
    rels = []
    for e in f:
        for pw in e.atoms(sp.Piecewise):
            for _, cond in pw.args:
                if isinstance(cond, Relational):
                    rels.append(cond)
                elif isinstance(cond, sp.logic.boolalg.Boolean):
                    rels.extend(cond.atoms(Relational))
        for hv in e.atoms(sp.Heaviside):
            rels.append(sp.Ge(hv.args[0], 0))
    taus, texts, unresolved = [], [], []
    for rel in rels:
        d = sp.expand(rel.lhs - rel.rhs)
        free = d.free_symbols
        if t not in free or free & xset:
            continue
        slope = sp.diff(d, t)
        if slope.has(t) or slope == 0:
            if str(rel) not in unresolved:
                unresolved.append(str(rel))
            continue
        tau = -d.subs(t, 0) / slope
        tau = sp.expand(tau) if slope.is_number else sp.cancel(tau)
        if any(sp.expand(tau - other) == 0 for other in taus):
            continue
        taus.append(tau)
        texts.append(str(rel))
    return taus, texts, unresolved


def _derivative_lines(expr, symbols, target, P):
    """Generated assignments ``target.format(j) = d expr / d symbols[j]`` of the non-zero partial derivatives."""
    import sympy as sp
    lines = []
    for j, s in enumerate(symbols):
        d = sp.diff(expr, s)
        if d != 0:
            lines.append(f"    {target.format(j)} = {P(d)}")
    return lines


def generate_source(spec) -> str:
    """Python source of the discontinuities module of ``spec``."""
    import sympy as sp

    from .generate import _Printer
    from .symbolic import as_condition, environment, parse_expression
    t, xs, ps, env = environment(spec)
    model = f"model {spec.name!r}"
    f = [parse_expression(spec.odes[s], env, f"{model}: right-hand side of {s!r}") for s in spec.state_names]
    taus, texts, unresolved = find_breakpoints(f, t, xs)
    index = {n: i for i, n in enumerate(spec.state_names)}
    nx, np_ = len(xs), len(ps)
    xset = set(xs)

    readable = {t: sp.Symbol(spec.time), **{x: sp.Symbol(n) for x, n in zip(xs, spec.state_names)},
                **{q: sp.Symbol(n) for q, n in zip(ps, spec.param_names)}}
    ev_times, ev_assign, time_events, state_events, ev_delay, ev_priority = [], [], [], [], [], []
    queued = any(ev.queued for ev in spec.events)
    comps, comp_texts, comp_strict, ev_comps, ev_bool = [], [], [], [], []
    for k, ev in enumerate(spec.events):
        where = f"{model}: event {ev.name!r}"
        if ev.trigger is not None:
            cond = as_condition(parse_expression(ev.trigger, env, f"{where}: trigger"))
            mine = []
            ev_bool.append(_trigger_code(cond, comps, comp_texts, comp_strict, mine, where, ev.name, readable,
                                         share=queued))
            ev_comps.append(mine)
            state_events.append(k)
        else:
            tau = parse_expression(ev.time, env, f"{where}: time")
            free = tau.free_symbols
            if free & xset:
                used = sorted(spec.state_names[xs.index(s)] for s in free & xset)
                raise UnsupportedModelError(
                    f"{where}: its time depends on the state(s) {', '.join(used)}: give such an event a "
                    "'trigger' (a state-triggered event) instead of a 'time'", [("event time", ev.name)])
            if t in free:
                raise UnsupportedModelError(f"{where}: its trigger time {ev.time!r} depends on the time itself",
                                            [("event trigger", ev.name)])
            ev_times.append(tau)
            time_events.append(k)
        ev_assign.append([(index[target], parse_expression(expr, env, f"{where}: assignment to {target!r}"))
                          for target, expr in ev.assignments.items()])
        ev_delay.append(sp.Integer(0) if ev.delay is None else parse_expression(ev.delay, env, f"{where}: delay"))
        ev_priority.append(None if ev.priority is None else
                           parse_expression(ev.priority, env, f"{where}: priority"))

    pr = _Printer()
    P = pr.doprint
    unpack_p = [f"    p_{j} = p[{j}]" for j in range(np_)]
    unpack_x = [f"    x_{i} = x[{i}]" for i in range(nx)]
    out = [
        f"# Generated by pbsens {__version__} (discontinuities {DISCONTINUITIES_VERSION}) from {model}.",
        "# Do not edit: delete the file to regenerate it.",
        "import math",
        "import numpy",
        "import numpy as np",
        "",
        f"NX = {nx}",
        f"NP = {np_}",
        f"NB = {len(taus)}",
        f"BREAKPOINT_TEXTS = {texts!r}",
        f"UNRESOLVED = {unresolved!r}",
        f"EVENT_NAMES = {[e.name for e in spec.events]!r}",
        f"EVENT_INITIAL_VALUES = {[bool(e.initial_value) for e in spec.events]!r}",
        f"TIME_EVENTS = {time_events!r}",
        f"STATE_EVENTS = {state_events!r}",
        f"COMPONENT_TEXTS = {comp_texts!r}",
        f"COMPONENT_STRICT = {comp_strict!r}",
        f"EVENT_COMPONENTS = {ev_comps!r}",
        f"EVENT_TARGETS = {[[index[n] for n in e.assignments] for e in spec.events]!r}",
        f"EVENT_DELAYED = {[e.delay is not None for e in spec.events]!r}",
        f"EVENT_PRIORITIZED = {[e.priority is not None for e in spec.events]!r}",
        f"EVENT_PERSISTENT = {[bool(e.persistent) for e in spec.events]!r}",
        f"EVENT_TRIGGER_VALUES = {[bool(e.use_values_from_trigger_time) for e in spec.events]!r}",
        "",
    ]

    def vector_fn(name, exprs, doc):
        lines = [f"def {name}(p):", f'    """{doc}"""'] + unpack_p + [f"    out = np.zeros({len(exprs)})"]
        lines += [f"    out[{i}] = {P(e)}" for i, e in enumerate(exprs)]
        return lines + ["    return out", "", ""]

    def gradient_fn(name, exprs, doc):
        lines = [f"def {name}(p):", f'    """{doc}"""'] + unpack_p + [f"    out = np.zeros(({len(exprs)}, NP))"]
        for i, e in enumerate(exprs):
            lines += _derivative_lines(e, ps, f"out[{i}, {{}}]", P)
        return lines + ["    return out", "", ""]

    out += vector_fn("breakpoints", taus, "Breakpoint times tau(p) (NB,).")
    out += gradient_fn("breakpoints_dp", taus, "d tau / dp (NB, NP).")
    out += vector_fn("event_times", ev_times, "Event times (NE,), in the model's order.")
    out += gradient_fn("event_times_dp", ev_times, "d event time / dp (NE, NP).")
    for k, assigns in enumerate(ev_assign):
        lines = [f"def _event_{k}(t, x, p):", f'    """Event {spec.events[k].name!r}: (x_new, G_x, G_p, G_t)."""']
        lines += unpack_x + unpack_p
        lines += ["    xn = x.copy()", "    Gx = np.eye(NX)", "    Gp = np.zeros((NX, NP))", "    Gt = np.zeros(NX)"]
        for i, g in assigns:
            lines.append(f"    xn[{i}] = {P(g)}")
            lines.append(f"    Gx[{i}, :] = 0.0")
            lines += _derivative_lines(g, xs, f"Gx[{i}, {{}}]", P)
            lines += _derivative_lines(g, ps, f"Gp[{i}, {{}}]", P)
            d = sp.diff(g, t)
            if d != 0:
                lines.append(f"    Gt[{i}] = {P(d)}")
        out += lines + ["    return xn, Gx, Gp, Gt", "", ""]
    out += _trigger_source(comps, ev_bool, t, xs, ps, P)
    out += _delay_priority_source(ev_delay, ev_priority, t, xs, ps, P, unpack_x, unpack_p)
    out += [f"_EVENTS = ({''.join(f'_event_{k}, ' for k in range(len(ev_assign)))})", "", "",
            "def event_assign(k, t, x, p):",
            '    """(x_new, G_x, G_p, G_t) of event k at time t from the state x just before it."""',
            "    return _EVENTS[k](t, x, p)", ""]
    return "\n".join(out)


def _trigger_code(cond, comps, texts, strict, mine, where, name, readable, share=False):
    """numpy code of the condition ``cond`` on the truth matrix ``T`` of the components; appends the
    comparisons it holds to ``comps`` (``h``), ``texts``, ``strict`` and their indices to ``mine``.
    With ``share`` (models with delayed or prioritized events, whose queue orders simultaneous
    triggers) a comparison already among ``comps`` reuses that component."""
    import sympy as sp
    from sympy.core import relational as rel

    def visit(c):
        if isinstance(c, sp.And):
            return "(" + " & ".join(visit(a) for a in c.args) + ")"
        if isinstance(c, sp.Or):
            return "(" + " | ".join(visit(a) for a in c.args) + ")"
        if isinstance(c, sp.Not):
            return "(~" + visit(c.args[0]) + ")"
        if isinstance(c, (rel.StrictGreaterThan, rel.GreaterThan, rel.StrictLessThan, rel.LessThan)):
            greater = isinstance(c, (rel.StrictGreaterThan, rel.GreaterThan))
            h = (c.lhs - c.rhs) if greater else (c.rhs - c.lhs)
            if not h.free_symbols - {s for s in h.free_symbols if s.name.startswith("p_")}:
                raise UnsupportedModelError(f"{where}: its trigger's comparison {c.xreplace(readable)} involves "
                                            "neither the time nor a state: it never changes during a solve",
                                            [("event trigger", name)])
            is_strict = isinstance(c, (rel.StrictGreaterThan, rel.StrictLessThan))
            for i, (h2, s2) in enumerate(zip(comps, strict)):
                if share and s2 == is_strict and h2 == h:    # one comparison shared by several triggers: one component,
                    if i not in mine:              # so that their events become true at one root together
                        mine.append(i)
                    return f"T[:, {i}]"
            comps.append(h)
            texts.append(str(c.xreplace(readable)))
            strict.append(is_strict)
            mine.append(len(comps) - 1)
            return f"T[:, {len(comps) - 1}]"
        kind = type(c).__name__
        raise UnsupportedModelError(f"{where}: its trigger uses {kind} ({c.xreplace(readable)}); a "
                                    "state-triggered event's trigger must combine comparisons <, <=, >, >= with "
                                    "and/or/not (an equality or a constant cannot be located in time)",
                                    [("event trigger", name)])

    return visit(cond)


def _trigger_source(comps, ev_bool, t, xs, ps, P):
    """Source lines of ``trigger_values``, ``triggers_active`` and ``trigger_gradient``."""
    import sympy as sp
    from sympy.printing.numpy import NumPyPrinter

    npr = NumPyPrinter({"fully_qualified_modules": True})
    nc = len(comps)
    lines = ["def trigger_values(t, X, p):",
             '    """Trigger components h (K, NC) at times t (K,), states X (K, NX)."""']
    lines += [f"    x_{i} = X[:, {i}]" for i in range(len(xs))] + [f"    p_{j} = p[{j}]" for j in range(len(ps))]
    lines += [f"    H = np.empty((t.size, {nc}))"]
    lines += [f"    H[:, {c}] = {npr.doprint(h)}" for c, h in enumerate(comps)]
    lines += ["    return H", "", ""]
    doc = "Trigger values (K, NS) of the state-triggered events from the components' truth T (K, NC)."
    lines += ["def triggers_active(T):", f'    """{doc}"""',
              f"    out = np.empty((T.shape[0], {len(ev_bool)}), dtype=bool)"]
    lines += [f"    out[:, {j}] = {code}" for j, code in enumerate(ev_bool)]
    lines += ["    return out", "", ""]
    for c, h in enumerate(comps):
        lines += [f"def _gradient_{c}(t, x, p):"]
        lines += [f"    x_{i} = x[{i}]" for i in range(len(xs))] + [f"    p_{j} = p[{j}]" for j in range(len(ps))]
        lines += ["    hx = np.zeros(NX)", "    hp = np.zeros(NP)"]
        lines += _derivative_lines(h, xs, "hx[{}]", P) + _derivative_lines(h, ps, "hp[{}]", P)
        lines += [f"    return hx, hp, float({P(sp.diff(h, t))})", "", ""]
    lines += [f"_GRADIENTS = ({''.join(f'_gradient_{c}, ' for c in range(nc))})", "", "",
              "def trigger_gradient(c, t, x, p):",
              '    """(h_x, h_p, h_t) of trigger component c at (t, x)."""',
              "    return _GRADIENTS[c](t, x, p)", "", ""]
    return lines


def _delay_priority_source(delays, priorities, t, xs, ps, P, unpack_x, unpack_p):
    """Source lines of ``event_delay`` (value and gradients) and ``event_priority`` of every event."""
    import sympy as sp
    lines = []
    for k, d in enumerate(delays):
        lines += [f"def _delay_{k}(t, x, p):"] + unpack_x + unpack_p
        lines += ["    dx = np.zeros(NX)", "    dp = np.zeros(NP)"]
        lines += _derivative_lines(d, xs, "dx[{}]", P) + _derivative_lines(d, ps, "dp[{}]", P)
        lines += [f"    return float({P(d)}), dx, dp, float({P(sp.diff(d, t))})", "", ""]
    for k, q in enumerate(priorities):
        lines += [f"def _priority_{k}(t, x, p):"] + unpack_x + unpack_p
        lines += [f"    return float({P(q) if q is not None else 'math.nan'})", "", ""]
    n = len(delays)
    lines += [f"_DELAYS = ({''.join(f'_delay_{k}, ' for k in range(n))})",
              f"_PRIORITIES = ({''.join(f'_priority_{k}, ' for k in range(n))})", "", "",
              "def event_delay(k, t, x, p):",
              '    """(delay, d_x, d_p, d_t) of event k at (t, x): evaluated when its trigger turns true."""',
              "    return _DELAYS[k](t, x, p)", "", "",
              "def event_priority(k, t, x, p):",
              '    """The priority of event k at (t, x) (NaN without one): evaluated at its execution."""',
              "    return _PRIORITIES[k](t, x, p)", ""]
    return lines
