"""SBML constructs added for issue #39 on small models with analytic solutions.

* a model without ODE state (parameters and assignment rules only),
* non-constant compartments (a rate rule, an assignment rule on the size), with species in
  concentration units,
* the ``rateOf`` csymbol (in an assignment rule, in an initial assignment, of a local
  parameter),
* variable stoichiometry (species references set by an assignment rule and a rate rule) and
  ``stoichiometryMath`` (SBML Level 2).

Each model is written with libsbml here, read with :func:`read_sbml`, simulated, and
compared with its closed-form solution; where the construct has parameters, the
sensitivities of ``method="fs"`` and ``method="exp2"`` are compared with the analytic
derivatives and with central finite differences of the simulated states and outputs.
"""
import numpy as np
import pytest

libsbml = pytest.importorskip("libsbml")

from pbsens.errors import UnsupportedModelError
from pbsens.inference.observables import output_sensitivities
from pbsens.model.library import model_from_spec
from pbsens.model.sbml import read_sbml
from pbsens.model.spec import Definition
from pbsens.simulation.segments import simulate

T = np.array([0.5, 1.0, 2.0, 3.0])


# ----------------------------------------------------------------- building models
def _doc(level=3, version=2):
    doc = libsbml.SBMLDocument(level, version)
    m = doc.createModel()
    m.setId("constructs")
    return doc, m


def _param(m, pid, value=None, constant=True):
    p = m.createParameter()
    p.setId(pid)
    if value is not None:
        p.setValue(value)
    p.setConstant(constant)
    return p


def _compartment(m, cid, size, constant=True):
    c = m.createCompartment()
    c.setId(cid)
    c.setSize(size)
    c.setSpatialDimensions(3)
    c.setConstant(constant)
    return c


def _species(m, sid, comp, *, conc=None, amount=None, only_substance=False, boundary=False):
    s = m.createSpecies()
    s.setId(sid)
    s.setCompartment(comp)
    if conc is not None:
        s.setInitialConcentration(conc)
    if amount is not None:
        s.setInitialAmount(amount)
    s.setHasOnlySubstanceUnits(only_substance)
    s.setBoundaryCondition(boundary)
    s.setConstant(False)
    return s


def _rule(m, kind, var, formula):
    r = m.createRateRule() if kind == "rate" else m.createAssignmentRule()
    r.setVariable(var)
    r.setMath(libsbml.parseL3Formula(formula))
    return r


def _initial_assignment(m, var, formula):
    ia = m.createInitialAssignment()
    ia.setSymbol(var)
    ia.setMath(libsbml.parseL3Formula(formula))


def _reaction(m, rid, law, reactants=(), products=()):
    r = m.createReaction()
    r.setId(rid)
    r.setReversible(False)
    if m.getLevel() < 3:
        r.setFast(False)
    srefs = []
    for lst, make in ((reactants, r.createReactant), (products, r.createProduct)):
        for sid in lst:
            sr = make()
            sr.setSpecies(sid)
            if m.getLevel() >= 3:
                sr.setConstant(False)
                sr.setStoichiometry(1.0)
            srefs.append(sr)
    r.createKineticLaw().setMath(libsbml.parseL3Formula(law))
    return r, srefs


def _read(doc, tmp_path, name="model.xml", parameters=None):
    path = tmp_path / name
    assert libsbml.writeSBMLToFile(doc, str(path))
    return read_sbml(path, parameters=parameters)


def _state(model, sim, name):
    return sim.x[:, model.state_names.index(name)]


def _sens(model, sim, state, param):
    return sim.S[:, model.state_names.index(state), model.param_names.index(param)]


#: options and relative tolerance of each method's sensitivities (exp2 is second order in the
#: state solver's steps: no grid interval longer than 1/8 of a step)
METHODS = {"fs": ({}, 1e-5), "exp2": ({"substeps": 8}, 1e-4)}


def _check_sensitivities(model, analytic, outputs=None):
    """fs and exp2 sensitivities against ``analytic`` ({(state, param): array}) and against
    central finite differences of the states (and of the outputs ``outputs``, names)."""
    p0 = model.p.copy()
    fd = np.empty((len(T), model.n_states, model.n_params))
    fd_y = np.empty((len(T), model.n_outputs, model.n_params))
    for j in range(model.n_params):
        h = 1e-5 * max(1.0, abs(p0[j]))
        xs, ys = [], []
        for sign in (1, -1):
            p = p0.copy()
            p[j] += sign * h
            s = simulate(model, T, p, sensitivities=False, rtol=1e-12, atol=1e-14)
            xs.append(s.x)
            ys.append(np.array([model.outputs(t, x, p) for t, x in zip(T, s.x)]) if model.n_outputs
                      else np.empty((len(T), 0)))
        fd[:, :, j] = (xs[0] - xs[1]) / (2 * h)
        fd_y[:, :, j] = (ys[0] - ys[1]) / (2 * h)
    for method, (options, rel) in METHODS.items():
        sim = simulate(model, T, method=method, rtol=1e-10, atol=1e-12, **options)
        np.testing.assert_allclose(sim.S, fd, rtol=rel, atol=1e-6, err_msg=method)
        for (state, param), want in analytic.items():
            np.testing.assert_allclose(_sens(model, sim, state, param), want, rtol=rel, atol=1e-8,
                                       err_msg=f"{method}: d{state}/d{param}")
        if outputs:
            _, S_y = output_sensitivities(model, sim)
            idx = [model.output_names.index(o) for o in outputs]
            np.testing.assert_allclose(S_y[:, idx], fd_y[:, idx], rtol=rel, atol=1e-6, err_msg=f"{method} outputs")


# ------------------------------------------------------------------ no ODE state
def test_model_without_ode_state(tmp_path):
    """Only an assignment rule: p = k t^2 + c. The reader adds a placeholder state (0, rate 0)."""
    doc, m = _doc()
    _param(m, "k", 1.5)
    _param(m, "c", 0.25)
    _param(m, "p", constant=False)
    _rule(m, "assign", "p", "k * time^2 + c")
    spec = _read(doc, tmp_path)
    assert spec.state_names == ["no_ode_state"]
    assert spec.meta["sbml_placeholder_state"] == "no_ode_state"
    spec.outputs = [Definition("y", "p")]
    model = model_from_spec(spec.validate(), "tape")
    sim = simulate(model, T, sensitivities=False)
    got = np.array([model.outputs(t, x, sim.p)[0] for t, x in zip(T, sim.x)])
    np.testing.assert_allclose(got, 1.5 * T ** 2 + 0.25, rtol=1e-12)
    for method in ("fs", "exp2"):
        sim = simulate(model, T, method=method)
        assert np.all(sim.S == 0.0) and np.all(sim.x == 0.0)
        _, S_y = output_sensitivities(model, sim)
        np.testing.assert_allclose(S_y[:, 0, model.param_names.index("k")], T ** 2, rtol=1e-12)
        np.testing.assert_allclose(S_y[:, 0, model.param_names.index("c")], 1.0, rtol=1e-12)


def test_placeholder_name_avoids_model_ids(tmp_path):
    doc, m = _doc()
    _param(m, "no_ode_state", 2.0)
    _param(m, "p", constant=False)
    _rule(m, "assign", "p", "no_ode_state * time")
    spec = _read(doc, tmp_path)
    assert spec.state_names == ["no_ode_state_"]


# ----------------------------------------------------------- non-constant compartments
def _shrinking_compartment(tmp_path, size_rule):
    """V = 1 + a t (a rate rule V' = a, or the assignment rule itself); S in concentration
    units, 2 at t = 0, degraded by J = k S V (amount/time): n = 2 exp(-k t), [S] = n / V;
    r = rateOf(S) = -k [S] - [S] a / V; q = rateOf(S) at t = 0 = -2 k - 2 a."""
    doc, m = _doc()
    _compartment(m, "V", 1.0, constant=False)
    _species(m, "S", "V", conc=2.0)
    _param(m, "a", 0.5)
    _param(m, "k", 0.3)
    if size_rule == "rate":
        _param(m, "r", constant=False)
        _param(m, "q", constant=False)
        _rule(m, "rate", "V", "a")
        _rule(m, "assign", "r", "rateOf(S)")
        _initial_assignment(m, "q", "rateOf(S)")
    else:
        _rule(m, "assign", "V", "1 + a * time")
    _reaction(m, "J", "k * S * V", reactants=["S"])
    spec = _read(doc, tmp_path, f"{size_rule}.xml")
    spec.outputs = [Definition("conc", "S"), Definition("size", "V")] + ([Definition("r_out", "r"), Definition("q_out", "q")]
                                                           if size_rule == "rate" else [])
    return model_from_spec(spec.validate(), "tape"), spec


@pytest.mark.parametrize("size_rule", ["rate", "assign"])
def test_non_constant_compartment(tmp_path, size_rule):
    model, spec = _shrinking_compartment(tmp_path, size_rule)
    assert spec.meta["sbml_amount_states"] == {"S": "S_amount"}
    a, k = 0.5, 0.3
    n, V = 2 * np.exp(-k * T), 1 + a * T
    sim = simulate(model, T, sensitivities=False, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(_state(model, sim, "S_amount"), n, rtol=1e-8)
    y = np.array([model.outputs(t, x, sim.p) for t, x in zip(T, sim.x)])
    np.testing.assert_allclose(y[:, 0], n / V, rtol=1e-8)
    np.testing.assert_allclose(y[:, 1], V, rtol=1e-10)
    if size_rule == "rate":
        np.testing.assert_allclose(y[:, 2], -k * n / V - n / V * a / V, rtol=1e-8)
        np.testing.assert_allclose(y[:, 3], -2 * k - 2 * a, rtol=1e-12)
        _check_sensitivities(model, {("S_amount", "k"): -T * n, ("V", "a"): T, ("S_amount", "a"): 0 * T},
                             outputs=["conc", "r_out", "q_out"])
    else:
        _check_sensitivities(model, {("S_amount", "k"): -T * n}, outputs=["conc", "size"])


def test_non_constant_compartment_growth_and_amount_species(tmp_path):
    """V' = g V (V = exp(g t)); X in concentration units produced at rate p (amount/time):
    n = n0 + p t, [X] = n / V; Y (hasOnlySubstanceUnits) produced at rate p too: Y = p t
    (its amount does not care about V)."""
    doc, m = _doc()
    _compartment(m, "V", 1.0, constant=False)
    _species(m, "X", "V", conc=1.0)
    _species(m, "Y", "V", amount=0.0, only_substance=True)
    _param(m, "g", 0.2)
    _param(m, "p", 0.7)
    _rule(m, "rate", "V", "g * V")
    _reaction(m, "make", "p", products=["X", "Y"])
    spec = _read(doc, tmp_path)
    spec.outputs = [Definition("conc", "X")]
    model = model_from_spec(spec.validate(), "tape")
    sim = simulate(model, T, sensitivities=False, rtol=1e-11, atol=1e-13)
    n, V = 1.0 + 0.7 * T, np.exp(0.2 * T)
    np.testing.assert_allclose(_state(model, sim, "X_amount"), n, rtol=1e-8)
    np.testing.assert_allclose(_state(model, sim, "Y"), 0.7 * T, rtol=1e-8)
    y = np.array([model.outputs(t, x, sim.p)[0] for t, x in zip(T, sim.x)])
    np.testing.assert_allclose(y, n / V, rtol=1e-8)
    _check_sensitivities(model, {("V", "g"): T * V, ("X_amount", "p"): T, ("Y", "p"): T}, outputs=["conc"])


def test_event_setting_a_species_in_a_non_constant_compartment_is_refused(tmp_path):
    doc, m = _doc()
    _compartment(m, "V", 1.0, constant=False)
    _species(m, "S", "V", conc=2.0)
    _param(m, "a", 0.5)
    _rule(m, "rate", "V", "a")
    ev = m.createEvent()
    ev.setId("reset")
    ev.setUseValuesFromTriggerTime(True)
    trig = ev.createTrigger()
    trig.setMath(libsbml.parseL3Formula("time >= 1"))
    trig.setInitialValue(False)
    trig.setPersistent(True)
    ea = ev.createEventAssignment()
    ea.setVariable("S")
    ea.setMath(libsbml.parseL3Formula("1"))
    with pytest.raises(UnsupportedModelError, match="event assignment to a species in a non-constant "
                                                    "compartment 'reset'"):
        _read(doc, tmp_path)


# ------------------------------------------------------------------------- rateOf
def test_rate_of_rate_rule_parameter_and_local_parameter(tmp_path):
    """w' = b (w = 1 + b t); the flux of -> Z is rateOf(w) + rateOf(k), with k a local parameter
    (constant: rate 0, though a global k has a rate rule too): Z = b t (amount, V = 1)."""
    doc, m = _doc()
    _compartment(m, "C", 1.0)
    _species(m, "Z", "C", amount=0.0, only_substance=True)
    _param(m, "b", 0.8)
    _param(m, "w", 1.0, constant=False)
    _param(m, "k", 1.0, constant=False)
    _rule(m, "rate", "w", "b")
    _rule(m, "rate", "k", "5")
    r, _ = _reaction(m, "J", "rateOf(w) + rateOf(k)", products=["Z"])
    lp = r.getKineticLaw().createLocalParameter()
    lp.setId("k")
    lp.setValue(3.0)
    spec = _read(doc, tmp_path)
    model = model_from_spec(spec, "tape")
    sim = simulate(model, T, sensitivities=False, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(_state(model, sim, "Z"), 0.8 * T, rtol=1e-8)
    np.testing.assert_allclose(_state(model, sim, "k"), 1.0 + 5 * T, rtol=1e-8)
    _check_sensitivities(model, {("Z", "b"): T, ("w", "b"): T})


# ----------------------------------------------------------- variable stoichiometry
def test_variable_stoichiometry(tmp_path):
    """-> X at flux k with the product's stoichiometry nX = 1 + time (assignment rule):
    X = k (t + t^2/2); -> Y at flux k with nY' = c, nY(0) = 2 (rate rule): Y = k (2 t + c t^2/2)."""
    doc, m = _doc()
    _compartment(m, "C", 1.0)
    _species(m, "X", "C", amount=0.0, only_substance=True)
    _species(m, "Y", "C", amount=0.0, only_substance=True)
    _param(m, "k", 0.6)
    _param(m, "c", 0.4)
    _, (sx,) = _reaction(m, "RX", "k", products=["X"])
    sx.setId("nX")
    _, (sy,) = _reaction(m, "RY", "k", products=["Y"])
    sy.setId("nY")
    sy.setStoichiometry(2.0)
    _rule(m, "assign", "nX", "1 + time")
    _rule(m, "rate", "nY", "c")
    spec = _read(doc, tmp_path)
    assert "nY" in spec.state_names and "nX" in {d.name for d in spec.definitions}
    model = model_from_spec(spec, "tape")
    sim = simulate(model, T, sensitivities=False, rtol=1e-11, atol=1e-13)
    k, c = 0.6, 0.4
    np.testing.assert_allclose(_state(model, sim, "X"), k * (T + T ** 2 / 2), rtol=1e-8)
    np.testing.assert_allclose(_state(model, sim, "Y"), k * (2 * T + c * T ** 2 / 2), rtol=1e-8)
    _check_sensitivities(model, {("X", "k"): T + T ** 2 / 2, ("Y", "c"): k * T ** 2 / 2,
                                 ("Y", "k"): 2 * T + c * T ** 2 / 2})


def test_stoichiometry_math_level2(tmp_path):
    """SBML Level 2: -> Z at flux k with stoichiometryMath 2 s + time: Z = k (2 s t + t^2/2)."""
    doc, m = _doc(2, 4)
    _compartment(m, "C", 1.0)
    _species(m, "Z", "C", amount=0.0, only_substance=True)
    _param(m, "k", 0.9)
    _param(m, "s", 1.5)
    _, (sz,) = _reaction(m, "R", "k", products=["Z"])
    sz.createStoichiometryMath().setMath(libsbml.parseL3Formula("2 * s + time"))
    spec = _read(doc, tmp_path)
    model = model_from_spec(spec, "tape")
    sim = simulate(model, T, sensitivities=False, rtol=1e-11, atol=1e-13)
    k, s = 0.9, 1.5
    np.testing.assert_allclose(_state(model, sim, "Z"), k * (2 * s * T + T ** 2 / 2), rtol=1e-8)
    _check_sensitivities(model, {("Z", "s"): 2 * k * T, ("Z", "k"): 2 * s * T + T ** 2 / 2})


# ------------------------------------------------------------------ rules without math
def test_rules_without_math_have_no_effect(tmp_path):
    """SBML L3V2 makes math optional: a rate rule and an initial assignment without it leave
    the parameter at its value (SBML Test Suite 01234, 01236 expect that)."""
    doc, m = _doc()
    _param(m, "p", 3.0, constant=False)
    _param(m, "q", 4.0, constant=False)
    m.createRateRule().setVariable("p")
    m.createInitialAssignment().setSymbol("q")
    with pytest.warns(UserWarning, match="rule without math 'p'"):
        spec = _read(doc, tmp_path)
    assert ["rule without math", "p"] in spec.meta["sbml_ignored"]
    assert ["initial assignment without math", "q"] in spec.meta["sbml_ignored"]
    assert spec.state_names == ["no_ode_state"]
    assert {q.name: q.value for q in spec.parameters} == {"p": 3.0, "q": 4.0}


# ------------------------------------------------------------------ comp declared, nothing composed
COMP_FLAT = """<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core"
      xmlns:comp="http://www.sbml.org/sbml/level3/version1/comp/version1"
      level="3" version="2" comp:required="true">
  <model id="flat_decay">
    <listOfCompartments><compartment id="cell" size="1" constant="true"/></listOfCompartments>
    <listOfSpecies>
      <species id="A" compartment="cell" initialAmount="2" hasOnlySubstanceUnits="true"
               boundaryCondition="false" constant="false"/>
    </listOfSpecies>
    <listOfParameters><parameter id="k" value="0.7" constant="true"/></listOfParameters>
    <listOfReactions>
      <reaction id="decay" reversible="false">
        <listOfReactants><speciesReference species="A" stoichiometry="1" constant="true"/></listOfReactants>
        <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">
          <apply><times/><ci>k</ci><ci>A</ci></apply></math></kineticLaw>
      </reaction>
    </listOfReactions>
  </model>
</sbml>
"""


def test_comp_declared_without_composition_is_read_flat(tmp_path):
    """comp:required="true" on a model with no submodel, definition or port (as sbmlutils writes,
    the benchmark collection's Armistead_CellDeathDis2024): nothing to compose, read as it is.
    A' = -k A, A(0) = 2: A = 2 exp(-k t), dA/dk = -2 t exp(-k t)."""
    path = tmp_path / "comp_flat.xml"
    path.write_text(COMP_FLAT)
    with pytest.warns(UserWarning, match="comp"):
        spec = read_sbml(path)
    assert ["package", "comp (declared, nothing to compose)"] in spec.meta["sbml_ignored"]
    model = model_from_spec(spec.validate(), "tape")
    sim = simulate(model, T, sensitivities=False, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(_state(model, sim, "A"), 2 * np.exp(-0.7 * T), rtol=1e-8)
    _check_sensitivities(model, {("A", "k"): -2 * T * np.exp(-0.7 * T)})
    # with a submodel it is still refused by name (tests/test_bad_inputs.py: unsupported_comp.xml)
    with_sub = COMP_FLAT.replace(
        "</listOfReactions>\n", "</listOfReactions>\n    <comp:listOfSubmodels>"
        "<comp:submodel comp:id=\"sub1\" comp:modelRef=\"other\"/></comp:listOfSubmodels>\n").replace(
        "  </model>\n", "  </model>\n  <comp:listOfModelDefinitions><comp:modelDefinition id=\"other\"/>"
        "</comp:listOfModelDefinitions>\n")
    path.write_text(with_sub)
    with pytest.raises(UnsupportedModelError, match="package 'comp', comp submodel 'sub1'"):
        read_sbml(path)
