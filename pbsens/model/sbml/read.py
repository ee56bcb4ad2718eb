"""Read an SBML document into a :class:`~pbsens.model.spec.ModelSpec`: the orchestration.

:func:`read_sbml` loads the file with libsbml, lets :class:`SbmlReader` list
every unsupported construct (raised together, after libsbml's own validation),
then builds the spec step by step; each step's rules live in their own module:
names (:mod:`.names`), math (:mod:`.mathml`), rules and initial values
(:mod:`.rules`), compartments (:mod:`.compartments`), reactions
(:mod:`.reactions`), events (:mod:`.events`) and the pbsens annotation
(:mod:`.annotation`). How SBML maps onto a spec is described in
:mod:`pbsens.model.sbml`.

The reader is the context (``ctx``) those modules' functions receive. What they
use of it: ``src`` (the file, for messages), ``m`` (the libsbml ``Model``),
``comps``/``species``/``params``/``reactions``/``srefs`` (id -> libsbml
element), ``assign``/``rate``/``ia`` (id -> math of assignment rules, rate
rules, initial assignments), ``names`` (SBML id -> spec name), ``local``
(promoted local parameters), ``selected`` (spec names of the sensitivity
parameters), ``time`` (the spec's time name), ``walker`` (the
:class:`~.mathml.MathToDialect`), ``numeric_mode``; and the methods
:meth:`~SbmlReader.add_unsupported`, :meth:`~SbmlReader.scan_math`,
:meth:`~SbmlReader.convert` and :meth:`~SbmlReader.initial`.
"""
from __future__ import annotations

import os
import warnings

from ...errors import ModelError, UnsupportedModelError
from ..dialect import eval_numeric, fresh_name, names_in
from ..spec import Definition, ModelSpec, Quantity
from .annotation import read_annotation
from .compartments import amount_initial, amount_states, compartment_sizes
from .document import check_consistency, element_id, load_libsbml, raise_on_errors
from .events import event_targets, read_events, scan_events
from .mathml import P_ATOM, P_OR, MathToDialect, read_function_definitions
from .names import choose_time_name, promote_local_parameters, spec_names
from .rates import rate_of
from .reactions import reaction_participants, scan_reactions, species_rhs, stoichiometry
from .rules import (
    collect_rules,
    constant_value,
    initial_math,
    initial_value,
    scan_rules,
    toposort,
)

__all__ = ["read_sbml"]


def read_sbml(path, parameters=None) -> ModelSpec:
    """Read an SBML file into a validated :class:`~pbsens.model.spec.ModelSpec`.

    See :mod:`pbsens.model.sbml` for how SBML elements map onto the spec.

    Parameters
    ----------
    path : str or os.PathLike
        The SBML file (any level/version libsbml reads).
    parameters : list of str, optional
        The sensitivity parameters, by spec name (e.g. ``"R1__k"`` for a local
        parameter ``k`` of reaction ``R1``) or SBML id. Any constant quantity may
        be named: global or local parameters, compartments, and species that no
        reaction or rule changes. Constants not named become fixed numeric
        definitions. Default: all global parameters not set by rules or initial
        assignments, and all local parameters.

    Returns
    -------
    ModelSpec
        Validated; ``meta["sbml"]`` records the file, its level and version, and the model id.

    Raises
    ------
    ModelError
        Unreadable or invalid SBML (libsbml's errors are quoted), missing
        values, algebraic loops, or a bad ``parameters`` entry.
    UnsupportedModelError
        The model uses constructs pbsens cannot represent; ``.unsupported``
        lists every one as ``(kind, id)``.
    """
    L = load_libsbml()
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ModelError(f"SBML file {path!r} does not exist")
    doc = L.readSBMLFromFile(path)
    source = f"SBML file {path!r}"
    raise_on_errors(L, doc, source, "cannot be read")
    if doc.getModel() is None:
        raise ModelError(f"{source} contains no <model>")
    reader = SbmlReader(L, doc, source, path)
    reader.scan()
    check_consistency(L, doc, source, "is not valid SBML", reader.ignored)
    reader.raise_unsupported()
    return reader.build(parameters)


class SbmlReader:
    """One SBML model on its way to a ModelSpec (see :func:`read_sbml`)."""

    def __init__(self, L, doc, source, path):
        self.L = L
        self.doc = doc
        self.m = doc.getModel()
        self.src = source
        self.path = path
        self.unsupported: list = []
        self.ignored: list = []
        self.time_names: set = set()
        empty = []
        self.fdefs = read_function_definitions(L, self.m, source, empty)
        self.ignored.extend(("function definition without math", f) for f in empty)
        self.walker = MathToDialect(L, self.fdefs, "t")
        self.walker.rate_of = lambda ident: rate_of(self, ident, initial=False)
        self.amounts = {}         # species id -> spec name of its amount state (non-constant compartments)
        self.placeholder = None   # the state of a model without ODE states
        self.rate_busy = []       # rateOf(x) being written (.rates.rate_of), to catch loops
        self.rid = None           # the reaction whose kinetic law is being converted (its local parameters)
        self.events = ()          # filled by build() through .events.read_events
        # initial values (.rules.initial_value): memo, the symbols being computed, and
        # whether selected parameters stay symbolic (False) or are replaced by numbers (True)
        self.init_cache, self.init_busy, self.numeric_mode = {}, [], True

    # ------------------------------------------------------------ scanning
    def add_unsupported(self, kind, ident):
        """Record an unsupported construct ``(kind, id)`` (raised later, all at once)."""
        if (kind, ident) not in self.unsupported:
            self.unsupported.append((kind, ident))

    def scan_math(self, node, owner):
        """Record unsupported math under ``node`` (owned by element ``owner``) and
        the names of ``time`` csymbols."""
        if node is None:
            return
        kind = self.walker.unsupported_kind(node)
        if kind:
            self.add_unsupported(kind, owner)

        if node.getType() == self.L.AST_NAME_TIME:
            self.time_names.add(node.getName() or "")
        for i in range(node.getNumChildren()):
            self.scan_math(node.getChild(i), owner)

    def scan(self):
        """Collect every unsupported construct (raised later, all at once)."""
        m, doc = self.m, self.doc
        # SBML packages exist from Level 3 on (libsbml attaches layout/render plugins to
        # Level 2 documents by itself: those are annotations there)
        for i in range(doc.getNumPlugins() if doc.getLevel() >= 3 else 0):
            pkg = doc.getPlugin(i).getPackageName()
            if pkg == "l3v2extendedmath":     # libsbml's internal name for L3V2 core math
                continue
            if pkg == "comp" and not self._comp_content():
                # comp:required="true" with nothing of comp in the model (no submodel, external
                # model definition or port; sbmlutils writes such files, e.g. the benchmark
                # collection's Armistead_CellDeathDis2024): the model is already flat
                self.ignored.append(("package", "comp (declared, nothing to compose)"))
                continue
            if doc.getPackageRequired(pkg):
                self.add_unsupported("package", pkg)
            else:
                self.ignored.append(("package", pkg))
        for i in range(doc.getNumUnknownPackages()):
            uri = doc.getUnknownPackageURI(i)
            prefix = doc.getUnknownPackagePrefix(i)
            if doc.getPackageRequired(uri):
                self.add_unsupported("package", prefix or uri)
            else:
                self.ignored.append(("package", prefix or uri))
        self._scan_comp()
        scan_events(m, self)
        for i in range(m.getNumConstraints()):
            self.ignored.append(("constraint", element_id(m.getConstraint(i), "constraint", i)))
        scan_reactions(self)
        scan_rules(self)
        self._scan_varying_compartments()
        for fid, (_, body) in self.fdefs.items():
            self.scan_math(body, fid)

    def _scan_varying_compartments(self):
        """An event that sets a concentration species in a compartment a rule changes: its
        amount is the state there (see :mod:`.compartments`), which events do not convert."""
        m = self.m
        varying = {r.getVariable() for r in (m.getRule(i) for i in range(m.getNumRules()))
                   if not r.isAlgebraic() and r.getMath() is not None}
        varying &= {m.getCompartment(i).getId() for i in range(m.getNumCompartments())}
        if not varying:
            return
        for i in range(m.getNumEvents()):
            ev = m.getEvent(i)
            for j in range(ev.getNumEventAssignments()):
                sp = m.getSpecies(ev.getEventAssignment(j).getVariable())
                if (sp is not None and sp.getCompartment() in varying and not sp.getHasOnlySubstanceUnits()
                        and m.getRule(sp.getId()) is None):
                    self.add_unsupported("event assignment to a species in a non-constant compartment",
                                         element_id(ev, "event", i))

    def _comp_content(self):
        """Whether the document uses the ``comp`` package beyond declaring it: submodels, model or
        external model definitions, ports, deletions (replacements need a submodel to point to)."""
        doc_plugin, model_plugin = self.doc.getPlugin("comp"), self.m.getPlugin("comp")
        counts = [getattr(doc_plugin, f, lambda: 0)() for f in
                  ("getNumModelDefinitions", "getNumExternalModelDefinitions")] if doc_plugin is not None else [1]
        counts += [getattr(model_plugin, f, lambda: 0)() for f in
                   ("getNumSubmodels", "getNumPorts")] if model_plugin is not None else []
        return any(counts)

    def _scan_comp(self):
        """Name what hierarchical model composition (the ``comp`` package) would add: each
        submodel and external model definition (read flat, their contents would be lost)."""
        plugin = self.m.getPlugin("comp") if self.doc.getLevel() >= 3 else None
        if plugin is not None and hasattr(plugin, "getNumSubmodels"):
            for i in range(plugin.getNumSubmodels()):
                self.add_unsupported("comp submodel", element_id(plugin.getSubmodel(i), "submodel", i))
        plugin = self.doc.getPlugin("comp") if self.doc.getLevel() >= 3 else None
        if plugin is not None and hasattr(plugin, "getNumExternalModelDefinitions"):
            for i in range(plugin.getNumExternalModelDefinitions()):
                self.add_unsupported("comp external model definition",
                                     element_id(plugin.getExternalModelDefinition(i), "external model definition", i))

    def raise_unsupported(self):
        if self.unsupported:
            listing = ", ".join(f"{k} {i!r}" for k, i in self.unsupported)
            raise UnsupportedModelError(
                f"{self.src} uses SBML constructs pbsens cannot represent: {listing}", self.unsupported)

    # ------------------------------------------------------------ building
    def build(self, parameters):
        if self.ignored:
            warnings.warn(f"{self.src}: ignored (no effect on the equations): "
                          + ", ".join(f"{k} {i!r}" for k, i in self.ignored), stacklevel=3)
        annotation, participants = self._collect_elements()
        states, changed = self._roles(participants)
        self.changed, self.participants = changed, participants
        renamed, local_meta = self._choose_names(annotation)
        states = amount_states(self, states, changed)     # species in non-constant compartments
        self.state_ids = state_set = set(states)
        self.placeholder = None if states else fresh_name("no_ode_state", self.taken)
        candidates = self._candidates(state_set)
        selected = self._select(parameters, candidates, state_set)
        spec_params = self._spec_parameters(selected, candidates)
        spec_states = self._spec_states(states)
        defs, fixed_meta, sizeless = self._definitions(candidates, state_set)
        odes = self._right_hand_sides(states, changed, participants)
        # ---- events (time-triggered; scan() has reported every other kind already)
        self.events = read_events(self.m, self)
        outputs, defs, used = self._outputs(annotation, odes, defs, spec_states)
        definitions, compartments_meta = self._used_definitions(defs, used, sizeless, fixed_meta, candidates)
        meta = self._meta(annotation, renamed, local_meta, fixed_meta, compartments_meta)
        return self._spec(annotation, spec_states, spec_params, odes, definitions, outputs, meta)

    def _collect_elements(self):
        """The model's elements by id (``comps``, ``species``, ``params``, ``reactions``,
        ``srefs``) and its rules (``assign``, ``rate``, ``ia``), set on the reader; returns
        ``(annotation, participants)``: the pbsens annotation and each reaction's species."""
        m = self.m
        self.comps = {c.getId(): c for c in (m.getCompartment(i) for i in range(m.getNumCompartments()))}
        self.species = {s.getId(): s for s in (m.getSpecies(i) for i in range(m.getNumSpecies()))}
        self.params = {p.getId(): p for p in (m.getParameter(i) for i in range(m.getNumParameters()))}
        self.reactions = {r.getId(): r for r in (m.getReaction(i) for i in range(m.getNumReactions()))}
        self.assign, self.rate, self.ia = collect_rules(m)
        annotation = read_annotation(m)
        self.srefs, participants = reaction_participants(self.reactions)
        return annotation, participants

    def _roles(self, participants):
        """``(states, changed)``: the SBML ids that become states, in spec order, and the
        species reactions change."""
        species, params, rate = self.species, self.params, self.rate
        changed = set()   # species changed by reactions
        for rid, parts in participants.items():
            for sid, _, _ in parts:
                sp = species.get(sid)
                if sp is None:
                    raise ModelError(f"{self.src}: reaction {rid!r} uses unknown species {sid!r}")
                if not sp.getBoundaryCondition() and not sp.getConstant():
                    changed.add(sid)
        states = [s for s in species if s in rate or (s in changed and s not in self.assign)]
        states += [p for p in params if p in rate]
        states += [c for c in self.comps if c in rate]          # non-constant compartments
        states += [r for r in self.srefs if r in rate]          # variable stoichiometry
        # symbols that events set are states too (right-hand side 0 unless something else changes them)
        states += [x for x in event_targets(self.m) if x not in states and (x in species or x in params)]
        return states, changed

    def _choose_names(self, annotation):
        """Spec names of time and of every element (``time``, ``names``, ``local`` set on the
        reader); returns ``(renamed, local_meta)`` for the spec's meta."""
        m = self.m
        time_name = choose_time_name(m, annotation, self.time_names)
        self.time = time_name
        self.walker.time = time_name
        variable_srefs = [r for r in self.srefs if r in self.assign or r in self.rate]
        names, renamed, taken = spec_names(list(self.comps) + list(self.species) + list(self.params)
                                           + list(self.reactions) + variable_srefs, time_name)
        local, local_meta = promote_local_parameters(self.reactions, m.getLevel(), names, taken, self.src)
        self.names = names
        self.local = local
        self.taken = taken
        return renamed, local_meta

    def _candidates(self, state_set):
        """The constants that may be sensitivity parameters: spec name -> ``(sbml id or
        (rid, lid), kind)``."""
        names, assign, ia = self.names, self.assign, self.ia
        candidates = {}       # spec name -> (sbml id or (rid, lid), kind)
        for cid in self.comps:
            if cid not in ia and cid not in state_set and cid not in assign:
                candidates[names[cid]] = (cid, "compartment")
        for sid in self.species:
            if sid not in state_set and sid not in assign and sid not in ia:
                candidates[names[sid]] = (sid, "species")
        for pid in self.params:
            if pid not in state_set and pid not in assign and pid not in ia:
                candidates[names[pid]] = (pid, "parameter")
        for key, (nm, _) in self.local.items():
            candidates[nm] = (key, "local parameter")
        return candidates

    def _select(self, parameters, candidates, state_set):
        """The sensitivity parameters' spec names, in order, from the ``parameters`` argument
        of :func:`read_sbml` (``selected`` and ``candidates`` set on the reader)."""
        by_sbml_id = {v[0]: k for k, v in candidates.items() if isinstance(v[0], str)}
        if parameters is None:
            selected = [n for n, (_, kind) in candidates.items() if kind in ("parameter", "local parameter")]
        else:
            if isinstance(parameters, str):
                parameters = [parameters]
            selected = []
            for p in parameters:
                nm = p if p in candidates else by_sbml_id.get(p)
                if nm is None:
                    why = self._why_not_candidate(p, state_set)
                    raise ModelError(f"{self.src}: parameters= names {p!r}, which {why}; constants that can be "
                                     f"sensitivity parameters: {', '.join(candidates) or 'none'}")
                if nm not in selected:
                    selected.append(nm)
        self.selected = set(selected)
        self.candidates = candidates
        return selected

    def _spec_parameters(self, selected, candidates):
        """The spec's parameters: each selected constant with its numeric value (species:
        from the initial values)."""
        self.init_cache, self.init_busy = {}, []
        self.numeric_mode = True
        values = {nm: constant_value(self, *candidates[nm]) for nm in selected}
        spec_params = []
        for nm in selected:
            v = values[nm]
            if v is None:
                key, kind = candidates[nm]
                raise ModelError(f"{self.src}: {kind} {key!r} cannot be a sensitivity parameter: its value "
                                 f"is not a number")
            spec_params.append(Quantity(nm, float(v)))
        return spec_params

    def _spec_states(self, states):
        """The spec's states, initial values in terms of the selected parameters."""
        self.init_cache, self.init_busy = {}, []
        self.numeric_mode = False
        spec_states = []
        for sid in states:
            expr = amount_initial(self, sid) if sid in self.amounts else self.initial(sid)
            v = eval_numeric(expr)
            spec_states.append(Quantity(self.amounts.get(sid, self.names.get(sid)), v if v is not None else expr))
        if self.placeholder:
            spec_states.append(Quantity(self.placeholder, 0.0))
        return spec_states

    def _definitions(self, candidates, state_set):
        """``(defs, fixed_meta, sizeless)``: definitions ``(name, expression, sbml id)`` in natural
        order (unselected constants, initial assignments, assignment rules, kinetic laws), the
        numeric values of the fixed constants, and the compartments without a size."""
        m, src, names = self.m, self.src, self.names
        defs = []        # (name, expression, sbml id)
        fixed_meta = {}
        sizeless = []
        for nm, (key, kind) in candidates.items():
            if nm in self.selected:
                continue
            if kind == "compartment" and constant_value(self, key, kind) is None:
                sizeless.append(nm)      # an error only if an expression uses it (checked below)
                continue
            expr = self.initial(key)       # a number unless it depends on sensitivity parameters
            v = eval_numeric(expr)
            if v is not None:
                fixed_meta[nm] = v
            defs.append((nm, expr, key))
        for ident in list(self.comps) + list(self.params):
            if ident in self.ia and ident not in state_set:
                defs.append((names[ident], self.initial(ident), ident))
        for sid in self.species:
            if sid in self.ia and sid not in state_set and sid not in self.assign:
                defs.append((names[sid], self.initial(sid), sid))
        for sid, amount in self.amounts.items():     # the concentration of an amount state
            defs.append((names[sid], f"{amount}/{names[self.species[sid].getCompartment()]}", sid))
        for i in range(m.getNumRules()):
            rule = m.getRule(i)
            if rule.isAssignment() and rule.getMath() is not None:
                var = rule.getVariable()
                if var not in names:
                    raise ModelError(f"{src}: assignment rule for unknown symbol {var!r}")
                defs.append((names[var], self.convert(rule.getMath(), f"assignment rule for {var!r}"), var))
        for rid, r in self.reactions.items():
            defs.append((names[rid], self.convert(r.getKineticLaw().getMath(), f"kinetic law of reaction "
                                                  f"{rid!r}", rid), rid))
        return defs, fixed_meta, sizeless

    def _right_hand_sides(self, states, changed, participants):
        """The spec's ODEs: spec name of each state -> its right-hand side."""
        names, rate = self.names, self.rate
        odes = {}
        for ident in states:
            name = self.amounts.get(ident, names.get(ident))
            if ident in rate:
                odes[name] = self.convert(rate[ident], f"rate rule for {ident!r}")
            elif ident not in changed:      # set only by events, or an amount nothing changes
                odes[name] = "0"
            else:
                odes[name] = species_rhs(self, ident, participants)
        if self.placeholder:
            odes[self.placeholder] = "0"
        return odes

    def _outputs(self, annotation, odes, defs, spec_states):
        """``(outputs, defs, used)``: the outputs (assignment rules marked by to_sbml's
        annotation that no equation uses), the other definitions, and the names the
        equations, definitions and outputs use."""
        out_names = set(annotation.get("outputs", ()))
        used = set()
        for e in list(odes.values()) + [d[1] for d in defs] + [s.value for s in spec_states
                                                                   if isinstance(s.value, str)]:
            used |= names_in(e)
        outputs = []
        if out_names:
            keep = []
            for d in defs:
                if d[0] in out_names and d[2] in self.assign and d[0] not in used:
                    outputs.append(Definition(d[0], d[1]))
                else:
                    keep.append(d)
            defs = keep
            used = set()
            for e in list(odes.values()) + [d[1] for d in defs] + [o.expression for o in outputs]:
                used |= names_in(e)
        return outputs, defs, used

    def _used_definitions(self, defs, used, sizeless, fixed_meta, candidates):
        """``(definitions, compartments_meta)``: the definitions without unused compartments,
        sorted topologically, and the compartment sizes; drops from ``fixed_meta`` what is no
        longer defined. A compartment without a size that is used is an error."""
        for nm in sizeless:
            if nm in used:
                raise ModelError(f"{self.src}: compartment {candidates[nm][0]!r} has no size, but an expression "
                                 f"or a species concentration needs it")
        comps = self.comps
        compartments_meta = compartment_sizes(comps, self.names)
        defs = [d for d in defs if not (d[2] in comps and d[2] not in self.assign and d[0] not in used
                                        and d[0] not in self.selected)]
        for nm in list(fixed_meta):
            if nm not in {d[0] for d in defs}:
                del fixed_meta[nm]
        return toposort(defs, self.src), compartments_meta

    def _meta(self, annotation, renamed, local_meta, fixed_meta, compartments_meta):
        """The spec's ``meta``: the annotation's, the file's SBML facts and the non-empty entries."""
        meta = dict(annotation.get("meta", {}))
        meta["sbml"] = {"file": self.path, "level": self.doc.getLevel(), "version": self.doc.getVersion(),
                        "model_id": self.m.getId()}
        meta.update((key, value) for key, value in (
            ("sbml_amount_states", {self.names[s]: a for s, a in self.amounts.items()}),
            ("sbml_placeholder_state", self.placeholder),
            ("sbml_names", renamed), ("local_parameters", local_meta), ("fixed", fixed_meta),
            ("compartments", compartments_meta), ("sbml_ignored", [list(x) for x in self.ignored])) if value)
        return meta

    def _spec(self, annotation, spec_states, spec_params, odes, definitions, outputs, meta):
        """The validated :class:`~pbsens.model.spec.ModelSpec`, named and titled."""
        m = self.m
        name = annotation.get("name") or m.getId() or m.getName() or os.path.splitext(os.path.basename(self.path))[0]
        title = annotation.get("title", m.getName() if m.isSetName() else "")
        spec = ModelSpec(name=name, states=spec_states, parameters=spec_params, odes=odes,
                         definitions=definitions, outputs=outputs, time=self.time, title=title, meta=meta,
                         events=self.events)
        return spec.validate()

    # ----------------------------------------------------------- helpers
    def _why_not_candidate(self, p, state_set):
        ids = {nm: i for i, nm in self.names.items()}
        ident = ids.get(p, p)
        if ident in state_set:
            return "is a state (changed by reactions or a rate rule)"
        if ident in self.assign:
            return "is set by an assignment rule"
        if ident in self.ia:
            return "is set by an initial assignment"
        if ident in self.reactions:
            return "is a reaction"
        return "is not in the model"

    def _resolver(self, rid=None):
        """resolve(id) -> (text, prec) for rhs/definitions (names)."""
        names, srefs, local = self.names, self.srefs, self.local

        def resolve(ident):
            if rid is not None and (rid, ident) in local:
                return local[(rid, ident)][0], P_ATOM
            if ident in names:
                return names[ident], P_ATOM
            if ident in srefs:
                text = stoichiometry(self, srefs[ident])
                return text, (P_ATOM if eval_numeric(text) is not None and not text.startswith("-") else P_OR)
            raise ModelError(f"{self.src}: unknown symbol {ident!r}")

        return resolve

    def convert(self, node, where, rid=None):
        """Dialect text, in spec names, of the math ``node`` (``rid``: the reaction whose
        local parameters it may use); ``where`` names the element for errors."""
        saved, self.rid = self.rid, rid
        try:
            return self.walker.convert(node, self._resolver(rid), f"{self.src}: {where}")
        finally:
            self.rid = saved

    def initial(self, ident):
        """Initial value of an SBML symbol as dialect text (see :func:`.rules.initial_value`)."""
        return initial_value(self, ident)

    def initial_math(self, node, where, rid=None):
        """Dialect text of math ``node`` at the initial time (see :func:`.rules.initial_math`)."""
        return initial_math(self, node, where, rid)
