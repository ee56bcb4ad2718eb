"""Assignment rules, rate rules, initial assignments, initial values, definition order.

* Assignment rules become definitions and rate rules right-hand sides (the
  reader does that with :func:`collect_rules`), also for compartments (see
  :mod:`.compartments`) and species references (variable stoichiometry, see
  :mod:`.reactions`); algebraic rules are reported as unsupported by :func:`scan_rules`.
  A rule or initial assignment without math (SBML Level 3 Version 2 makes it optional)
  has no effect: it is left out, listed in ``meta["sbml_ignored"]`` (SBML Test Suite
  cases 01234-01236 expect the element's own value).
* :func:`initial_value` gives any SBML symbol's value at the initial time (0) as
  dialect text in the selected sensitivity parameters: an initial assignment,
  else an assignment rule, else the element's own value; or, in numeric mode
  (``ctx.numeric_mode``), only numbers. Loops among initial values raise
  :class:`ModelError`.
* :func:`toposort` orders definitions so that each uses only earlier ones (the
  SBtab reader uses it too).

Functions take the reader (``ctx``, see :class:`pbsens.model.sbml.read.SbmlReader`).
"""
from __future__ import annotations

import heapq
import math
import re

from ...errors import ModelError, UnsupportedModelError
from ..dialect import eval_numeric, names_in, number_text
from ..spec import Definition
from .compartments import compartment_size, species_initial
from .document import element_id
from .mathml import P_ATOM, P_OR, number_item
from .rates import rate_of
from .reactions import stoichiometry


def collect_rules(model):
    """``(assign, rate, initial)``: variable -> math of the assignment rules, of the
    rate rules and of the initial assignments."""
    assign, rate = {}, {}
    for i in range(model.getNumRules()):
        rule = model.getRule(i)
        if rule.getMath() is not None and not rule.isAlgebraic():   # SBML L3V2: math is optional
            (assign if rule.isAssignment() else rate)[rule.getVariable()] = rule.getMath()
    initial = {}
    for i in range(model.getNumInitialAssignments()):
        x = model.getInitialAssignment(i)
        if x.getMath() is not None:
            initial[x.getSymbol()] = x.getMath()
    return assign, rate, initial


def scan_rules(ctx):
    """Report algebraic rules and unsupported math in rules and initial assignments."""
    m = ctx.m
    for i in range(m.getNumRules()):
        rule = m.getRule(i)
        if rule.isAlgebraic():
            ctx.add_unsupported("algebraic rule", element_id(rule, "algebraic rule", i))
            continue
        var = rule.getVariable()
        if rule.getMath() is None:
            ctx.ignored.append(("rule without math", var))
        ctx.scan_math(rule.getMath(), var)
    for i in range(m.getNumInitialAssignments()):
        ia = m.getInitialAssignment(i)
        if ia.getMath() is None:
            ctx.ignored.append(("initial assignment without math", ia.getSymbol()))
        ctx.scan_math(ia.getMath(), ia.getSymbol())


def constant_value(ctx, key, kind):
    """Numeric value of a constant (a candidate sensitivity parameter), or None."""
    if kind == "local parameter":
        return ctx.local[key][1]
    if kind == "parameter":
        p = ctx.params[key]
        v = p.getValue()
        if p.isSetValue() and not math.isfinite(v):       # INF, -INF, NaN (test-suite case 00951)
            where = f"{ctx.src}: parameter {key!r}"
            raise UnsupportedModelError(f"{where}: non-finite number {v}", [("non-finite number", where)])
        if not p.isSetValue():
            raise ModelError(f"{ctx.src}: parameter {key!r} has no value (and no rule or initial "
                             f"assignment sets it)")
        return float(v)
    if kind == "compartment":
        return compartment_size(ctx.comps[key])   # None: an error only if some expression needs it
    return eval_numeric(initial_value(ctx, key))   # species


def initial_value(ctx, ident):
    """Initial value of an SBML symbol as dialect text in the selected parameters
    (or, in numeric mode, only numbers)."""
    cache_key = (ident, ctx.numeric_mode)
    if cache_key in ctx.init_cache:
        return ctx.init_cache[cache_key]
    if ident in ctx.init_busy:
        cycle = ctx.init_busy[ctx.init_busy.index(ident):] + [ident]
        raise ModelError(f"{ctx.src}: initial values depend on each other in a loop: "
                         + " -> ".join(map(str, cycle)))
    ctx.init_busy.append(ident)
    try:
        text = _initial_uncached(ctx, ident)
    finally:
        ctx.init_busy.pop()
    v = eval_numeric(text)
    if v is not None:
        text = number_text(v)
    ctx.init_cache[cache_key] = text
    return text


def _initial_resolver(ctx, rid=None):
    def resolve(ident):
        if rid is not None and (rid, ident) in ctx.local:
            nm, v = ctx.local[(rid, ident)]
            if not ctx.numeric_mode and nm in ctx.selected:
                return nm, P_ATOM
            return number_item(v)
        text = initial_value(ctx, ident)
        return text, (P_ATOM if re.fullmatch(r"[A-Za-z_]\w*|\d+(\.\d*)?(e[-+]?\d+)?", text) else P_OR)

    return resolve


def initial_math(ctx, node, where, rid=None):
    """Dialect text of math ``node`` at the initial time (time 0, symbols replaced by their
    initial values, ``rateOf`` by the initial rate)."""
    saved = ctx.walker.time, ctx.walker.rate_of, ctx.rid
    ctx.walker.time = "0"
    ctx.walker.rate_of = lambda ident: rate_of(ctx, ident, initial=True)
    ctx.rid = rid
    try:
        return ctx.walker.convert(node, _initial_resolver(ctx, rid), f"{ctx.src}: {where}")
    finally:
        ctx.walker.time, ctx.walker.rate_of, ctx.rid = saved


def _initial_uncached(ctx, ident):
    if isinstance(ident, tuple):          # local parameter key
        nm, v = ctx.local[ident]
        return nm if (not ctx.numeric_mode and nm in ctx.selected) else number_text(v)
    nm = ctx.names.get(ident)
    if nm is not None and not ctx.numeric_mode and nm in ctx.selected:
        return nm
    if ident in ctx.ia:
        return initial_math(ctx, ctx.ia[ident], f"initial assignment for {ident!r}")
    if ident in ctx.assign:
        return initial_math(ctx, ctx.assign[ident], f"assignment rule for {ident!r} (at the initial time)")
    if ident in ctx.params:
        return number_text(constant_value(ctx, ident, "parameter"))
    if ident in ctx.comps:
        v = constant_value(ctx, ident, "compartment")
        if v is None:
            raise ModelError(f"{ctx.src}: compartment {ident!r} has no size, but a species "
                             f"concentration or an expression needs it")
        return number_text(v)
    if ident in ctx.species:
        return species_initial(ctx, ctx.species[ident])
    if ident in ctx.reactions:
        return initial_math(ctx, ctx.reactions[ident].getKineticLaw().getMath(),
                             f"kinetic law of reaction {ident!r} (at the initial time)", rid=ident)
    if ident in ctx.srefs:
        return stoichiometry(ctx, ctx.srefs[ident], dynamic=False)
    raise ModelError(f"{ctx.src}: unknown symbol {ident!r} in an initial value")


def toposort(defs, source):
    """Order ``[(name, expression, origin), ...]`` so each uses only earlier names.

    Ties keep the given order. Raises :class:`ModelError` naming the definitions of
    an algebraic loop (or a name defined twice).
    """
    order = {}
    for i, d in enumerate(defs):
        if d[0] in order:
            raise ModelError(f"{source}: {d[0]!r} is defined twice")
        order[d[0]] = i
    uses = {d[0]: names_in(d[1]) for d in defs}
    for d in defs:
        if d[0] in uses[d[0]]:
            raise ModelError(f"{source}: the value of {d[0]!r} depends on itself ({d[1]!r})")
    deps = {n: u & set(order) for n, u in uses.items()}
    users = {n: [] for n in order}
    for n, ds in deps.items():
        for x in ds:
            users[x].append(n)
    missing = {n: len(ds) for n, ds in deps.items()}
    heap = [order[n] for n, k in missing.items() if k == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        d = defs[heapq.heappop(heap)]
        out.append(Definition(d[0], d[1]))
        for u in users[d[0]]:
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(heap, order[u])
    if len(out) != len(defs):
        loop = sorted((n for n, k in missing.items() if k > 0), key=order.get)
        raise ModelError(f"{source}: definitions form an algebraic loop (each needs another to be "
                         f"computed first) among {', '.join(loop)}")
    return out
