"""SBML ids -> spec names: reserved words, the time variable, promoted local parameters.

A spec name must be a Python identifier the expression dialect reads as a
plain symbol, so an SBML id that is a Python keyword, a dialect function name,
``pi`` or the time name gets a trailing ``_`` (``meta["sbml_names"]`` records
it). Local parameters become global names ``<reactionid>__<paramid>``
(``meta["local_parameters"]``).
"""
from __future__ import annotations

import keyword
import math

from ...errors import ModelError
from ..dialect import DIALECT_FUNCTIONS, fresh_name

#: Names an SBML id may not keep: they would be read as something else.
RESERVED = DIALECT_FUNCTIONS | {"pi"}


def choose_time_name(model, annotation, time_names):
    """The spec's time name: the annotation's, else a ``time`` csymbol's own name,
    else ``t``/``time``/... whichever is a usable identifier no SBML id takes."""
    m = model
    ids = {m.getCompartment(i).getId() for i in range(m.getNumCompartments())}
    ids |= {m.getSpecies(i).getId() for i in range(m.getNumSpecies())}
    ids |= {m.getParameter(i).getId() for i in range(m.getNumParameters())}
    ids |= {m.getReaction(i).getId() for i in range(m.getNumReactions())}

    def ok(nm):
        return (isinstance(nm, str) and nm.isidentifier() and nm.isascii() and not keyword.iskeyword(nm)
                and nm not in RESERVED and nm not in ids)

    wanted = [annotation.get("time")] + sorted(n.strip() for n in time_names)
    for nm in wanted:
        if ok(nm):
            return nm
    for nm in ("t", "time", "t_", "time_"):
        if ok(nm):
            return nm
    nm = "time_"
    while not ok(nm):
        nm += "_"
    return nm


def spec_names(ids, time_name):
    """Spec names of SBML ids (in document order).

    Returns ``(names, renamed, taken)``: id -> spec name for every id, the
    renamed ones only, and the set of names in use (for later additions).
    """
    taken = set(ids) | {time_name}
    names, renamed = {}, {}
    for ident in ids:
        new = ident
        if new in RESERVED or keyword.iskeyword(new) or new == time_name:
            new = fresh_name(new, taken, RESERVED)     # taken holds time_name
            taken.add(new)
            renamed[ident] = new
        names[ident] = new
    return names, renamed, taken


def promote_local_parameters(reactions, level, names, taken, source):
    """Global names and values of the kinetic laws' local parameters.

    Returns ``(local, local_meta)``: ``{(reaction id, local id): (spec name, value)}``
    and ``{spec name: [reaction id, local id]}``; ``taken`` is extended.
    """
    local, local_meta = {}, {}
    for rid, r in reactions.items():
        kl = r.getKineticLaw()
        lst = kl.getListOfLocalParameters() if level >= 3 else kl.getListOfParameters()
        for j in range(lst.size()):
            lp = lst.get(j)
            new = fresh_name(f"{names[rid]}__{lp.getId()}", taken)
            taken.add(new)
            value = lp.getValue()
            if not lp.isSetValue() or not math.isfinite(value):
                raise ModelError(f"{source}: local parameter {lp.getId()!r} of reaction {rid!r} has no "
                                 f"finite value")
            local[(rid, lp.getId())] = (new, float(value))
            local_meta[new] = [rid, lp.getId()]
    return local, local_meta
