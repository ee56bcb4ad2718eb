"""Compartments and what they do to species: amounts, concentrations, conversion factors.

A species state is the quantity its SBML symbol denotes: the concentration for
``hasOnlySubstanceUnits="false"`` species, the amount for
``hasOnlySubstanceUnits="true"`` species and, in SBML Level 2 only, for species in
0-dimensional compartments (Level 2 gives those no concentration; Level 3 dropped
the special case: a 0-dimensional compartment's size divides like any other, SBML
Test Suite case 01809). Kinetic laws are in amount/time, so a concentration species'
right-hand side is divided by its compartment's size, and an initial amount is
turned into a concentration (and back) with that size. The conversion factor
(species' or model's) multiplies the reaction terms. Units themselves are not
used: SBML's numbers are taken as they are written.

A compartment whose size a rate rule or an assignment rule changes (a non-constant
compartment) keeps its species' amounts as states instead (:func:`amount_states`):
``dn/dt = conversionFactor * sum_r stoich_r * flux_r``, and the species' symbol, its
concentration, is the definition ``n/V``. So ``d[S]/dt = (rates)/V - [S] V'/V`` holds
without ``V'`` appearing anywhere, whether a rate rule or an assignment rule sets ``V``.

Functions take the reader (``ctx``, see :class:`pbsens.model.sbml.read.SbmlReader`)
for its ``src``, ``m``, ``comps``, ``names`` and :meth:`initial`.
"""
from __future__ import annotations

import math
import re

from ...errors import ModelError
from ..dialect import fresh_name, number_text


def compartment_of(ctx, sp):
    """The libsbml ``Compartment`` of species ``sp``."""
    cid = sp.getCompartment()
    c = ctx.comps.get(cid)
    if c is None:
        raise ModelError(f"{ctx.src}: species {sp.getId()!r} is in unknown compartment {cid!r}")
    return c


def zero_dimensional_l2(ctx, c):
    """True for a 0-dimensional compartment ``c`` of a Level 1-2 model: its species are amounts.

    Level 3 (V1 and V2) has no such rule: the species' symbol is its concentration
    unless ``hasOnlySubstanceUnits``, whatever the compartment's dimensions, so there a
    0-dimensional compartment is like any other (SBML Test Suite case 01809, levels 3.1, 3.2).
    """
    return ctx.m.getLevel() < 3 and c.getSpatialDimensionsAsDouble() == 0


def amount_only(ctx, sp):
    """True when species ``sp``'s symbol is its amount (not its concentration)."""
    return sp.getHasOnlySubstanceUnits() or zero_dimensional_l2(ctx, compartment_of(ctx, sp))


def compartment_size(c):
    """A compartment's size: its ``size``, 1 when 0-dimensional without one, else None."""
    v = c.getSize()
    if not c.isSetSize() or not math.isfinite(v):
        if c.getSpatialDimensionsAsDouble() == 0:
            return 1.0
        return None
    return float(v)


def compartment_sizes(comps, names):
    """``{spec name: size or None}`` of every compartment (``meta["compartments"]``)."""
    out = {}
    for cid, c in comps.items():
        size = c.getSize()
        out[names[cid]] = float(size) if c.isSetSize() and math.isfinite(size) else None
    return out


def species_initial(ctx, sp):
    """Initial value of species ``sp`` (amount or concentration, as its symbol
    denotes) from its initial amount or concentration, as dialect text."""
    if sp.isSetInitialAmount():
        amount = number_text(sp.getInitialAmount())
        if amount_only(ctx, sp):
            return amount
        return f"{amount}/({ctx.initial(sp.getCompartment())})"
    if sp.isSetInitialConcentration():
        conc = number_text(sp.getInitialConcentration())
        if not amount_only(ctx, sp) or zero_dimensional_l2(ctx, compartment_of(ctx, sp)):
            return conc   # Level 2, 0-dimensional: the concentration is read as the amount
        return f"{conc}*({ctx.initial(sp.getCompartment())})"
    raise ModelError(f"{ctx.src}: species {sp.getId()!r} has no initial amount, concentration or "
                     f"initial assignment")


def varying_compartments(ctx):
    """Ids of the compartments whose size a rule changes (non-constant compartments)."""
    return {c for c in ctx.comps if c in ctx.rate or c in ctx.assign}


def amount_states(ctx, states, changed):
    """``states`` with the species whose amount becomes the state (set in ``ctx.amounts``,
    species id -> spec name of the amount).

    A concentration species (not ``hasOnlySubstanceUnits``) in a compartment a rule changes,
    unless a rule sets its symbol: reactions change its amount, and its concentration (its
    SBML symbol, a definition ``amount/size``) changes with the size too. The amount is a
    state even when nothing else changes it, also for a ``constant`` species: its amount
    stays constant while its concentration follows the size (SBML Test Suite cases 01117,
    01118)."""
    varying = varying_compartments(ctx)
    ctx.amounts = {}
    if not varying:
        return states
    out = list(states)
    for sid, sp in ctx.species.items():
        if (sp.getCompartment() in varying and not amount_only(ctx, sp)
                and sid not in ctx.rate and sid not in ctx.assign):
            name = fresh_name(f"{ctx.names[sid]}_amount", ctx.taken)
            ctx.taken.add(name)
            ctx.amounts[sid] = name
            if sid not in out:
                out.append(sid)
    return out


def amount_initial(ctx, sid):
    """Initial amount of species ``sid`` (a concentration species whose amount is a state)."""
    sp = ctx.species[sid]
    if sp.isSetInitialAmount() and sid not in ctx.ia:
        return number_text(sp.getInitialAmount())
    return f"({ctx.initial(sid)})*({ctx.initial(sp.getCompartment())})"


def conversion_factor(ctx, sp):
    """The spec name of species ``sp``'s conversion factor (its own or the model's), or ''."""
    cf = sp.getConversionFactor() if hasattr(sp, "isSetConversionFactor") and sp.isSetConversionFactor() \
        else (ctx.m.getConversionFactor() if ctx.m.getLevel() >= 3 and ctx.m.isSetConversionFactor() else "")
    if cf and cf not in ctx.names:
        raise ModelError(f"{ctx.src}: conversion factor {cf!r} of species {sp.getId()!r} is not a parameter")
    return cf


def species_rate(ctx, sp, total):
    """Rate of species ``sp``'s state from ``total``, the sum of stoichiometry times
    flux (amount/time): times the conversion factor, over the compartment's size
    for a concentration (not for an amount state, :func:`amount_states`)."""
    cf = conversion_factor(ctx, sp)
    if cf and total != "0":
        total = f"{ctx.names[cf]}*{total}" if re.fullmatch(r"\w+", total) else f"{ctx.names[cf]}*({total})"
    if not amount_only(ctx, sp) and sp.getId() not in ctx.amounts and total != "0":
        comp = ctx.names[sp.getCompartment()]
        total = f"{total}/{comp}" if re.fullmatch(r"\w+", total) else f"({total})/{comp}"
    return total
