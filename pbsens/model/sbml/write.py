"""Write a model as an SBML Level 3 Version 2 document with the same equations."""
from __future__ import annotations

import os
import re

from ...errors import ModelError, PbsensError
from ..spec import ModelSpec
from .annotation import annotation_xml
from .document import check_consistency, check_status, load_libsbml
from .to_mathml import expression_to_sbml_math

__all__ = ["to_sbml"]


def to_sbml(model_or_spec, path):
    """Write a model as an SBML Level 3 Version 2 file with the same equations.

    The document has one compartment (``size=1``, unused by the equations);
    each state is a species (``hasOnlySubstanceUnits="true"``,
    ``boundaryCondition="false"``) driven by a rate rule; parameters are constant
    parameters; definitions and outputs are non-constant parameters set by
    assignment rules; a state whose initial value is an expression gets an
    initial assignment; each event is an SBML event triggered by
    ``time >= (its time)``. The model annotation (namespace :data:`~pbsens.model.sbml.annotation.PBSENS_NS`)
    records the time name, which assignment rules are outputs, the spec's name,
    title and ``meta``, so :func:`read_sbml` gives back the same spec (with
    extra ``meta`` entries).

    Parameters
    ----------
    model_or_spec : ModelSpec or object with a ``.spec`` attribute
        The model (e.g. a compiled :class:`pbsens.Model`).
    path : str or os.PathLike
        Output file.

    Returns
    -------
    str
        The path written.

    Raises
    ------
    ModelError
        The spec is invalid, a name is not a valid SBML id, an expression cannot
        be converted, or libsbml finds the document inconsistent.
    """
    L = load_libsbml()
    spec = model_or_spec if isinstance(model_or_spec, ModelSpec) else getattr(model_or_spec, "spec", None)
    if not isinstance(spec, ModelSpec):
        raise ModelError(f"to_sbml needs a ModelSpec or an object with a .spec, got "
                         f"{type(model_or_spec).__name__}")
    spec.validate()
    path = os.fspath(path)
    where = f"model {spec.name!r}"
    all_names = spec.state_names + spec.param_names + [d.name for d in spec.definitions] + spec.output_names
    for nm in all_names + [spec.time]:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", nm):
            raise ModelError(f"{where}: name {nm!r} is not a valid SBML id (ASCII letters, digits, _)")
    doc = L.SBMLDocument(3, 2)
    m = doc.createModel()
    mid = re.sub(r"\W", "_", spec.name, flags=re.ASCII) or "model"
    if not re.match(r"[A-Za-z_]", mid):
        mid = "m_" + mid
    while mid in all_names:            # the model id shares the SId namespace
        mid += "_model"
    check_status(m.setId(mid), L, f"{where}: model id {mid!r}")
    m.setName(spec.title or spec.name)
    comp = "compartment"
    while comp in all_names or comp == spec.time:
        comp += "_"
    c = m.createCompartment()
    c.setId(comp)
    c.setSize(1.0)
    c.setConstant(True)
    c.setSpatialDimensions(3)

    # symbols an expression may use; outputs may not be used by other expressions
    core = set(spec.state_names) | set(spec.param_names) | {d.name for d in spec.definitions}
    pnames = set(spec.param_names)

    def math_of(expr, what, symbols=core):
        return expression_to_sbml_math(expr, symbols, spec.time, f"{where}: {what}")

    for s in spec.states:
        sp = m.createSpecies()
        sp.setId(s.name)
        sp.setCompartment(comp)
        sp.setHasOnlySubstanceUnits(True)
        sp.setBoundaryCondition(False)
        sp.setConstant(False)
        if isinstance(s.value, str):
            a = m.createInitialAssignment()
            a.setSymbol(s.name)
            check_status(a.setMath(math_of(s.value, f"initial value of {s.name!r}", pnames)), L,
                   f"{where}: initial value of {s.name!r}")
        else:
            sp.setInitialAmount(float(s.value))
    for q in spec.parameters:
        p = m.createParameter()
        p.setId(q.name)
        p.setValue(float(q.value))
        p.setConstant(True)
    for d in list(spec.definitions) + list(spec.outputs):
        p = m.createParameter()
        p.setId(d.name)
        p.setConstant(False)
        r = m.createAssignmentRule()
        r.setVariable(d.name)
        kind = "output" if d in spec.outputs else "definition"
        check_status(r.setMath(math_of(d.expression, f"{kind} {d.name!r}")), L, f"{where}: {kind} {d.name!r}")
    for s in spec.states:
        r = m.createRateRule()
        r.setVariable(s.name)
        check_status(r.setMath(math_of(spec.odes[s.name], f"right-hand side of {s.name!r}")), L,
               f"{where}: right-hand side of {s.name!r}")

    taken = set(all_names) | {spec.time, comp, mid}
    for ev in spec.events:
        eid = re.sub(r"\W", "_", ev.name, flags=re.ASCII)
        if not re.match(r"[A-Za-z_]", eid):
            eid = "e_" + eid
        while eid in taken:
            eid += "_"
        taken.add(eid)
        e = m.createEvent()
        e.setId(eid)
        e.setUseValuesFromTriggerTime(True)
        trig = e.createTrigger()
        trig.setInitialValue(bool(ev.initial_value))
        trig.setPersistent(True)
        what = f"trigger of event {ev.name!r}"
        cond = ev.trigger if ev.trigger is not None else f"{spec.time} >= ({ev.time})"
        check_status(trig.setMath(math_of(cond, what)), L, f"{where}: {what}")
        for target, expr in ev.assignments.items():
            ea = e.createEventAssignment()
            ea.setVariable(target)
            what = f"assignment to {target!r} of event {ev.name!r}"
            check_status(ea.setMath(math_of(expr, what)), L, f"{where}: {what}")

    ann = L.XMLNode.convertStringToXMLNode(annotation_xml(spec))
    if ann is None or m.setAnnotation(ann) != L.LIBSBML_OPERATION_SUCCESS:
        raise ModelError(f"{where}: cannot build the pbsens annotation")
    check_consistency(L, doc, f"SBML written for {where}", "is inconsistent")
    if not L.writeSBMLToFile(doc, path):
        raise PbsensError(f"cannot write SBML file {path!r}")
    return path
