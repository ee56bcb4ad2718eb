"""The ``rateOf`` csymbol (SBML Level 3 Version 2): the time derivative of a model symbol.

``rateOf(x)`` is

* the right-hand side of ``x`` when ``x`` is a state: its rate rule, or the sum of
  stoichiometry times flux that reactions give a species (over its compartment's size for
  a concentration; a species whose amount is the state, in a compartment a rule changes,
  has ``d[S]/dt = (dn/dt)/V - [S] V'/V``);
* ``0`` for a symbol nothing changes continuously (constants, and symbols only events set:
  between events they stay put);
* not valid SBML (L3V2 section 3.4.6; libsbml's validation reports it, and this module
  raises :class:`ModelError` should it get that far) for a symbol an assignment rule sets
  and for a concentration species in a compartment an assignment rule sizes: either would
  need the time derivative of the rule's expression.

In equations the rate is written in the spec's names (:func:`rate_of` with
``initial=False``); in initial values (an initial assignment using ``rateOf``) it is the
rate at the initial time, in the initial values of everything it uses (``initial=True``).

Functions take the reader (``ctx``, see :class:`pbsens.model.sbml.read.SbmlReader`).
"""
from __future__ import annotations

from ...errors import ModelError
from ..dialect import eval_numeric
from .compartments import amount_only, conversion_factor
from .reactions import species_rhs, stoichiometry


def rate_of(ctx, ident, initial=False):
    """``d ident/dt`` as dialect text (in spec names; at the initial time with ``initial``)."""
    busy = ctx.rate_busy
    if ident in busy:
        raise ModelError(f"{ctx.src}: rateOf({ident}) depends on itself: " + " -> ".join(busy + [ident]))
    busy.append(ident)
    try:
        return _rate(ctx, ident, initial)
    finally:
        busy.pop()


def _rate(ctx, ident, initial):
    if (ctx.rid, ident) in ctx.local:      # a local parameter of the kinetic law: constant
        return "0"
    if ident in ctx.assign:        # SBML forbids it (L3V2 section 3.4.6); libsbml's validation says so first
        raise ModelError(f"{ctx.src}: rateOf({ident}): {ident!r} is set by an assignment rule")
    if ident in ctx.rate:
        node, where = ctx.rate[ident], f"rate rule for {ident!r}"
        return ctx.initial_math(node, where) if initial else ctx.convert(node, where)
    if ident not in ctx.species or (ident not in ctx.changed and ident not in ctx.amounts):
        return "0"
    sp = ctx.species[ident]
    if not initial:
        total = species_rhs(ctx, ident, ctx.participants) if ident in ctx.changed else "0"
        if ident not in ctx.amounts:
            return total
        comp = sp.getCompartment()
        if comp in ctx.assign:      # not valid SBML either (L3V2 section 3.4.6)
            raise ModelError(f"{ctx.src}: rateOf({ident}): the size of its compartment {comp!r} is set by an "
                             f"assignment rule")
        c_rate = rate_of(ctx, comp)
        name, size = ctx.names[ident], ctx.names[comp]
        return f"({total})/{size}" + ("" if c_rate == "0" else f" - {name}*({c_rate})/{size}")
    total = _initial_total(ctx, ident) if ident in ctx.changed else "0"
    cf = conversion_factor(ctx, sp)
    if cf and total != "0":
        total = f"({ctx.initial(cf)})*({total})"
    if amount_only(ctx, sp) or (total == "0" and ident not in ctx.amounts):
        return total
    comp = sp.getCompartment()
    size = ctx.initial(comp)
    out = f"({total})/({size})"
    if ident in ctx.amounts:
        if comp in ctx.assign:      # not valid SBML either (L3V2 section 3.4.6)
            raise ModelError(f"{ctx.src}: rateOf({ident}): the size of its compartment {comp!r} is set by an "
                             f"assignment rule")
        c_rate = rate_of(ctx, comp, initial=True)
        if eval_numeric(c_rate) != 0.0:
            out += f" - ({ctx.initial(ident)})*({c_rate})/({size})"
    return out


def _initial_total(ctx, sid):
    """``sum_r stoich_r * flux_r`` of species ``sid`` at the initial time."""
    terms = []
    for rid, parts in ctx.participants.items():
        for s2, sign, sr in parts:
            if s2 == sid:
                terms.append(f"{'-' if sign < 0 else '+'}({stoichiometry(ctx, sr, dynamic=False)})"
                             f"*({ctx.initial(rid)})")
    return "".join(terms).lstrip("+") or "0"

