"""Reactions -> species right-hand sides: participants, stoichiometry, the sum of fluxes.

Each reaction's kinetic law becomes a definition named after the reaction (the
reader does that); here a species' right-hand side is assembled as
``sum_r stoich_r * flux_r`` (then scaled by :func:`species_rate`). A
stoichiometry is a number, or an expression of the sensitivity parameters when
an initial assignment sets the species reference. A species reference that a rate rule
or an assignment rule changes (variable stoichiometry) is a state or a definition under
its own id, and ``stoichiometryMath`` (SBML Level 2) is converted in place: either makes
the coefficient of the flux an expression.

Functions take the reader (``ctx``, see :class:`pbsens.model.sbml.read.SbmlReader`).
"""
from __future__ import annotations

import math
import re
import warnings

from ..dialect import eval_numeric, flux_sum, flux_term, number_text
from .compartments import species_rate


def scan_reactions(ctx):
    """Report fast reactions, reactions without a kinetic law, and unsupported math of kinetic
    laws and stoichiometry math; return the ids of the species references."""
    m = ctx.m
    sref_ids = set()
    for i in range(m.getNumReactions()):
        r = m.getReaction(i)
        rid = r.getId()
        if r.isSetFast() and r.getFast():
            ctx.add_unsupported("fast reaction", rid)
        if r.getKineticLaw() is None:
            ctx.add_unsupported("reaction without kinetic law", rid)
        else:
            ctx.scan_math(r.getKineticLaw().getMath(), rid)
        for lst in (r.getListOfReactants(), r.getListOfProducts()):
            for j in range(lst.size()):
                sr = lst.get(j)
                sid = sr.getId() if sr.isSetId() else ""
                if sid:
                    sref_ids.add(sid)
                if hasattr(sr, "isSetStoichiometryMath") and sr.isSetStoichiometryMath():
                    ctx.scan_math(sr.getStoichiometryMath().getMath(), sid or f"{rid}:{sr.getSpecies()}")
    return sref_ids


def reaction_participants(reactions):
    """``(srefs, participants)``: species reference id -> ``SpeciesReference``, and
    reaction id -> ``[(species id, sign, SpeciesReference), ...]`` (reactants -1)."""
    srefs = {}
    participants = {}
    for rid, r in reactions.items():
        parts = []
        for sign, lst in ((-1, r.getListOfReactants()), (1, r.getListOfProducts())):
            for j in range(lst.size()):
                sr = lst.get(j)
                if sr.isSetId() and sr.getId():
                    srefs[sr.getId()] = sr
                parts.append((sr.getSpecies(), sign, sr))
        participants[rid] = parts
    return srefs, participants


def stoichiometry(ctx, sr, dynamic=True):
    """Stoichiometry of a species reference as text.

    A number, or an expression of the sensitivity parameters (an initial assignment sets
    the species reference); with ``dynamic`` (in equations, not initial values) also the
    spec name of a species reference a rule changes, or the converted
    ``stoichiometryMath`` (SBML Level 2), either of which may change in time."""
    sref_id = sr.getId() if sr.isSetId() else ""
    if sref_id and dynamic and (sref_id in ctx.assign or sref_id in ctx.rate):
        return ctx.names[sref_id]
    if sref_id and sref_id in ctx.assign:
        return ctx.initial(sref_id)      # a rate rule's starts from the value below
    if hasattr(sr, "isSetStoichiometryMath") and sr.isSetStoichiometryMath():
        node = sr.getStoichiometryMath().getMath()
        rid = sr.getParentSBMLObject().getParentSBMLObject().getId()
        where = f"stoichiometryMath of {sr.getSpecies()!r} in reaction {rid!r}"
        return ctx.convert(node, where) if dynamic else ctx.initial_math(node, where)
    if sr.isSetId() and sr.getId() in ctx.ia:
        saved = ctx.numeric_mode
        ctx.numeric_mode = False
        try:
            return ctx.initial(sr.getId())
        finally:
            ctx.numeric_mode = saved
    v = sr.getStoichiometry()
    if ctx.m.getLevel() < 3 and hasattr(sr, "getDenominator"):
        v = v / sr.getDenominator()
    if not math.isfinite(v):
        warnings.warn(f"{ctx.src}: species reference to {sr.getSpecies()!r} in reaction "
                      f"{sr.getParentSBMLObject().getParentSBMLObject().getId()!r} has no stoichiometry; "
                      f"using 1", stacklevel=5)
        v = 1.0
    return number_text(v)


def species_rhs(ctx, sid, participants):
    """Right-hand side of species ``sid`` changed by the reactions in ``participants``."""
    terms = []
    for rid, parts in participants.items():
        coef_num, coef_expr = 0.0, []
        for s2, sign, sr in parts:
            if s2 != sid:
                continue
            st = stoichiometry(ctx, sr)
            v = eval_numeric(st)
            if v is not None:
                coef_num += sign * v
            else:
                coef_expr.append(("-" if sign < 0 else "+") + f"({st})")
        flux = ctx.names[rid]
        if coef_expr:
            coef = "".join(coef_expr) + (("+" if coef_num >= 0 else "") + number_text(coef_num) if coef_num else "")
            coef = coef.lstrip("+")
            terms.append(f"+{coef}*{flux}" if re.fullmatch(r"\([^()]*\)", coef) else f"+({coef})*{flux}")
        else:
            terms.append(flux_term(coef_num, flux))
    total = flux_sum(terms)
    return species_rate(ctx, ctx.species[sid], total)
