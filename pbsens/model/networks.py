"""Random sparse mass-action reaction networks, for tests and scaling benchmarks.

:func:`random_mass_action` draws ``n`` species and about ``reactions_per_species * n``
reactions ``A + B -> C``, ``A -> B`` or ``A -> 0`` (each reaction touches at most three
species), with one rate constant per reaction and a conserved total used in a
Michaelis-Menten-like inhibition term, written as a :class:`ModelSpec` in which the
fluxes are definitions (as SBML import writes them) and each right-hand side is a
stoichiometric sum of fluxes.
"""
from __future__ import annotations

import numpy as np

from ..errors import PbsensError
from .spec import Definition, ModelSpec, Quantity

__all__ = ["random_mass_action"]


def random_mass_action(n: int, reactions_per_species: float = 2.0, seed: int = 0) -> ModelSpec:
    """A random sparse mass-action network of ``n`` species (see the module docstring)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise PbsensError(f"'n' must be an integer >= 2, got {n!r}")
    rng = np.random.default_rng(seed)
    nr = max(1, int(round(reactions_per_species * n)))
    species = [f"s{i}" for i in range(n)]
    params, defs = [], []
    terms = {s: [] for s in species}
    total = " + ".join(species[: min(n, 5)])
    defs.append(Definition("total", total))
    for r in range(nr):
        kind = rng.integers(3)
        k = f"k{r}"
        params.append(Quantity(k, float(rng.uniform(0.1, 2.0))))
        a, b, c = (species[i] for i in rng.choice(n, size=3, replace=False))
        if kind == 0:
            flux, lhs, rhs = f"{k}*{a}*{b}", [a, b], [c]
        elif kind == 1:
            flux, lhs, rhs = f"{k}*{a}/(1 + 0.1*total)", [a], [b]
        else:
            flux, lhs, rhs = f"{k}*{a}", [a], []
        defs.append(Definition(f"v{r}", flux))
        for s in lhs:
            terms[s].append(f"-v{r}")
        for s in rhs:
            terms[s].append(f"+v{r}")
    odes = {s: (" ".join(terms[s]).lstrip("+ ") or "0") for s in species}
    states = [Quantity(s, float(rng.uniform(0.5, 1.5))) for s in species]
    return ModelSpec(name=f"MassAction{n}", states=states, parameters=params, odes=odes, definitions=defs,
                     title=f"Random mass-action network, n = {n}, seed = {seed}").validate()
