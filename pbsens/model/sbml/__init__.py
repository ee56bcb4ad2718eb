"""Read SBML models into a :class:`~pbsens.model.spec.ModelSpec` and write them back.

:func:`read_sbml` turns an SBML document (Level 2 or 3, read with libsbml) into
the plain-data model of :mod:`pbsens.model.spec`; :func:`to_sbml` writes a spec
(or a compiled model) as an SBML Level 3 Version 2 document with the same
equations. Both directions convert math through small, explicit walkers, so the
expression dialect of :mod:`pbsens.model.spec` is produced and consumed exactly.

Where each part lives
---------------------
=====================  ==========================================================
``read``               :func:`read_sbml` and the reader that orchestrates the steps
``mathml``             MathML -> dialect, function definitions, piecewise
``to_mathml``          dialect -> MathML (for writing)
``rules``              assignment/rate rules, initial assignments and values, order
``compartments``       compartments, species amounts vs concentrations, conversion,
                       non-constant compartments
``reactions``          participants, stoichiometry (also variable), species right-hand sides
``rates``              the ``rateOf`` csymbol
``names``              SBML ids -> spec names, time name, local parameters
``events``             time-triggered SBML events -> spec events
``annotation``         the pbsens annotation (name, time, outputs, meta)
``document``           libsbml import, status codes, error logs
``write``              :func:`to_sbml`
=====================  ==========================================================

How SBML maps onto a spec
-------------------------
* **States** are the species changed by reactions (not ``boundaryCondition``, not
  ``constant``), species with a rate rule, parameters, compartments and species
  references with a rate rule, in document order (species first). A species state is the quantity its SBML
  symbol denotes: the *concentration* for ``hasOnlySubstanceUnits="false"``
  species, the *amount* for ``hasOnlySubstanceUnits="true"`` species (and, in
  Level 1-2 models only, for species in 0-dimensional compartments; Level 3
  treats a 0-dimensional compartment like any other). Kinetic laws are in amount/time, so
  for a concentration species in compartment ``V``::

      d[S]/dt = conversionFactor * (sum_r stoich_r * flux_r) / V

  and for an amount species ``dS/dt = conversionFactor * sum_r stoich_r * flux_r``.
  The conversion factor (species' or model's) is omitted when unset.
* **Non-constant compartments** (a rate rule or an assignment rule sets the size):
  the concentration species in them keep their *amount* as the state (named
  ``<species>_amount``, listed in ``meta["sbml_amount_states"]``), and the species'
  name is the definition ``amount/size``, so ``d[S]/dt = (rates)/V - [S] V'/V``
  follows (see :mod:`.compartments`). Such a species keeps its amount when nothing
  else changes it, even a ``constant`` one (the SBML Test Suite's reading).
* **No ODE state** (a model of parameters, assignment rules and events only): one
  placeholder state ``no_ode_state`` (``meta["sbml_placeholder_state"]``) with
  value 0 and right-hand side 0 is added, so that the model can be simulated;
  its sensitivities are 0.
* **Reaction fluxes** become definitions named after the reactions' ids, using
  the kinetic law verbatim.
* **Local parameters** (``<localParameter>``, or ``<parameter>`` in a Level 2
  kinetic law) are promoted to global names ``<reactionid>__<paramid>`` (with a
  trailing ``_`` added while the name is taken); ``meta["local_parameters"]``
  maps each promoted name to ``[reaction id, local id]``.
* **Constants** are the global parameters, local parameters, compartments and
  species whose value never changes (no rule, no initial assignment; species
  that are constant, boundary species without a rule, and species no reaction
  changes). The *sensitivity parameters* (``spec.parameters``) are, by
  default, the global parameters of that kind (whether or not ``constant`` is
  set: without rules and events their value cannot change) and all local
  parameters. ``parameters=`` picks any constants instead (by spec name or SBML
  id). Every constant not picked becomes a *fixed numeric definition*
  ``name = value``; their values are also listed in ``meta["fixed"]``.
* **Compartments** are constants of that kind: by default a compartment is a
  fixed numeric definition (so it is not a sensitivity parameter unless you
  name it in ``parameters=``). A fixed compartment that no expression uses is
  left out of the definitions; ``meta["compartments"]`` lists every
  compartment's size.
* **Assignment rules** become definitions; **rate rules** are right-hand sides;
  definitions are ordered so that each uses only earlier ones (an algebraic
  loop raises :class:`ModelError`).
* **Initial assignments** give states their initial value as an expression of
  the sensitivity parameters (everything else is substituted by its initial
  value; SBML's initial time is 0). An initial assignment to a parameter or a
  compartment makes it a definition whose expression is that initial value.
  An initial assignment to a species reference (a constant stoichiometry
  computed once) is substituted into the stoichiometry. A species reference an
  assignment rule or a rate rule changes (variable stoichiometry) is a
  definition or a state under its id, and ``stoichiometryMath`` (Level 2) is
  written into the species' right-hand sides.
* **rateOf** (Level 3 Version 2) is the right-hand side of the symbol's state, 0
  for a symbol nothing changes continuously (see :mod:`.rates`).
* Rules and initial assignments **without math** (allowed by Level 3 Version 2)
  have no effect (listed in ``meta["sbml_ignored"]``).
* **Function definitions** are inlined (lambda bodies substituted); the
  ``time`` csymbol is ``spec.time`` (the csymbol's own name when it is a usable
  identifier, else ``t``); ``avogadro`` is the number SBML Level 3 defines, 6.02214179e23 (not the
  2019 SI value 6.02214076e23).
* **Names** that are Python keywords, functions of the expression dialect or
  ``pi`` get a trailing ``_``; ``meta["sbml_names"]`` maps SBML id -> spec name
  for every renamed element.

* **Events** triggered by the time (``time >= c``, ``c`` an expression of
  parameters) or by states (comparisons combined with and/or/xor/not), with
  their delays, priorities, ``persistent`` and ``useValuesFromTriggerTime``,
  become the spec's events (:class:`~pbsens.model.spec.Event`); the species
  and parameters they set become states (see :mod:`.events`).

Unsupported constructs raise one :class:`UnsupportedModelError` listing every
occurrence as ``(kind, id)``: event triggers that cannot be located in time
(equalities, constants), algebraic rules, ``delay``,
fast reactions, events that set a concentration species in a non-constant
compartment, reactions without a kinetic law, math without a dialect
equivalent (``factorial``, ``quotient``, ``rem``, non-finite numbers, package
math) and required SBML packages (for hierarchical model composition, ``comp``,
each submodel and external model definition is named too: read flat, their
contents would be lost; a document that declares ``comp`` required but has no submodel,
model definition or port is already flat and is read as it is). Ignored (they do not affect the equations,
and are listed in ``meta["sbml_ignored"]`` with a warning): constraints and
optional (``required="false"``) packages. Units, notes and annotations are not
used (except the pbsens annotation written by :func:`to_sbml`).
"""
from __future__ import annotations

from ..dialect import DIALECT_FUNCTIONS as _DIALECT_FUNCTIONS  # noqa: F401 - former private names
from ..dialect import eval_numeric as _eval_numeric  # noqa: F401
from ..dialect import names_in as _names_in  # noqa: F401
from ..dialect import number_text as _num  # noqa: F401
from .annotation import PBSENS_NS
from .mathml import sbml_math_to_expression
from .to_mathml import expression_to_sbml_math
from .read import read_sbml
from .rules import toposort as _toposort  # noqa: F401
from .write import to_sbml

__all__ = ["read_sbml", "to_sbml", "sbml_math_to_expression", "expression_to_sbml_math", "PBSENS_NS"]
