"""Discontinuities in time of a model: breakpoints of piecewise inputs and time-triggered events.

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
DISCONTINUITIES_VERSION = "1"

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
    event_initial_values : list of bool
    unresolved : list of str
        Comparisons with the time that could not be turned into breakpoints.
    module : module or None
        The generated module (``None`` when the model has no discontinuities).
    """

    n_breakpoints: int
    breakpoint_texts: list
    event_names: list
    event_initial_values: list
    unresolved: list
    module: object = None

    def __getstate__(self):
        # a module does not pickle: keep its file and import it again on the other side
        state = dict(self.__dict__)
        m = state.pop("module")
        state["_module_file"] = (m.__name__, m.__file__) if m is not None else None
        return state

    def __setstate__(self, state):
        ref = state.pop("_module_file")
        self.__dict__.update(state)
        self.module = _import_file(ref[1], ref[0]) if ref is not None else None

    @property
    def n_events(self) -> int:
        return len(self.event_names)

    def breakpoints(self, p):
        """``(tau, dtau_dp)``: breakpoint times (nb,) and their gradients (nb, np), unsorted."""
        if not self.n_breakpoints:
            return np.empty(0), np.empty((0, len(p)))
        return self.module.breakpoints(p), self.module.breakpoints_dp(p)

    def event_times(self, p):
        """``(tau, dtau_dp)``: event times (ne,) and their gradients (ne, np), in spec order."""
        if not self.n_events:
            return np.empty(0), np.empty((0, len(p)))
        return self.module.event_times(p), self.module.event_times_dp(p)

    def apply_event(self, k, t, x, p):
        """``(x_new, G_x, G_p, G_t)`` of event ``k`` at time ``t`` from the state ``x`` before it."""
        return self.module.event_assign(int(k), float(t), np.asarray(x, dtype=np.float64), p)


#: The discontinuities of a model that has none.
NONE = Discontinuities(0, [], [], [], [])


def load(spec):
    """The :class:`Discontinuities` of ``spec`` (from the disk cache when present).

    Raises
    ------
    UnsupportedModelError
        An event time depends on the states (a state-triggered event) or on the time.
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
                        list(module.EVENT_INITIAL_VALUES), list(module.UNRESOLVED), module)
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


def generate_source(spec) -> str:
    """Python source of the discontinuities module of ``spec``."""
    import sympy as sp

    from .generate import _Printer
    from .symbolic import environment, parse_expression
    t, xs, ps, env = environment(spec)
    model = f"model {spec.name!r}"
    f = [parse_expression(spec.odes[s], env, f"{model}: right-hand side of {s!r}") for s in spec.state_names]
    taus, texts, unresolved = find_breakpoints(f, t, xs)
    index = {n: i for i, n in enumerate(spec.state_names)}
    nx, np_ = len(xs), len(ps)
    xset = set(xs)

    ev_times, ev_assign = [], []
    for ev in spec.events:
        where = f"{model}: event {ev.name!r}"
        tau = parse_expression(ev.time, env, f"{where}: time")
        free = tau.free_symbols
        if free & xset:
            used = sorted(spec.state_names[xs.index(s)] for s in free & xset)
            raise UnsupportedModelError(
                f"{where} is triggered by the state(s) {', '.join(used)}: only events at times given by "
                "parameters are supported", [("state-triggered event", ev.name)])
        if t in free:
            raise UnsupportedModelError(f"{where}: its trigger time {ev.time!r} depends on the time itself",
                                        [("event trigger", ev.name)])
        ev_times.append(tau)
        ev_assign.append([(index[target], parse_expression(expr, env, f"{where}: assignment to {target!r}"))
                          for target, expr in ev.assignments.items()])

    pr = _Printer()
    P = pr.doprint
    unpack_p = [f"    p_{j} = p[{j}]" for j in range(np_)]
    unpack_x = [f"    x_{i} = x[{i}]" for i in range(nx)]
    out = [
        f"# Generated by pbsens {__version__} (discontinuities {DISCONTINUITIES_VERSION}) from {model}.",
        "# Do not edit: delete the file to regenerate it.",
        "import math",
        "import numpy as np",
        "",
        f"NX = {nx}",
        f"NP = {np_}",
        f"NB = {len(taus)}",
        f"BREAKPOINT_TEXTS = {texts!r}",
        f"UNRESOLVED = {unresolved!r}",
        f"EVENT_NAMES = {[e.name for e in spec.events]!r}",
        f"EVENT_INITIAL_VALUES = {[bool(e.initial_value) for e in spec.events]!r}",
        "",
    ]

    def vector_fn(name, exprs, doc):
        lines = [f"def {name}(p):", f'    """{doc}"""'] + unpack_p + [f"    out = np.zeros({len(exprs)})"]
        lines += [f"    out[{i}] = {P(e)}" for i, e in enumerate(exprs)]
        return lines + ["    return out", "", ""]

    def gradient_fn(name, exprs, doc):
        lines = [f"def {name}(p):", f'    """{doc}"""'] + unpack_p + [f"    out = np.zeros(({len(exprs)}, NP))"]
        for i, e in enumerate(exprs):
            for j, pj in enumerate(ps):
                d = sp.diff(e, pj)
                if d != 0:
                    lines.append(f"    out[{i}, {j}] = {P(d)}")
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
            for jx, xj in enumerate(xs):
                d = sp.diff(g, xj)
                if d != 0:
                    lines.append(f"    Gx[{i}, {jx}] = {P(d)}")
            for j, pj in enumerate(ps):
                d = sp.diff(g, pj)
                if d != 0:
                    lines.append(f"    Gp[{i}, {j}] = {P(d)}")
            d = sp.diff(g, t)
            if d != 0:
                lines.append(f"    Gt[{i}] = {P(d)}")
        out += lines + ["    return xn, Gx, Gp, Gt", "", ""]
    out += [f"_EVENTS = ({''.join(f'_event_{k}, ' for k in range(len(ev_assign)))})", "", "",
            "def event_assign(k, t, x, p):",
            '    """(x_new, G_x, G_p, G_t) of event k at time t from the state x just before it."""',
            "    return _EVENTS[k](t, x, p)", ""]
    return "\n".join(out)
