"""SBML semantics against the SBML Test Suite and small models with known solutions (issue #39).

The suite's cases are in ``tests/data/sbml_suite/`` (copied unchanged from
https://github.com/sbmlteam/sbml-test-suite at commit
7ab011efe471877987b5d6dcba8cc19a6ff71254, ``cases/semantic/NNNNN/``; LGPL 2.1 or later,
see that folder's README.md and LICENSE.txt). Each is simulated and compared with the
suite's ``-results.csv`` at the suite's own tolerances (``-settings.txt``): an entry passes
when ``|got - expected| <= absolute + relative * |expected|``.
"""
import os
import sys

import numpy as np
import pytest

libsbml = pytest.importorskip("libsbml")

from pbsens.errors import ModelError, SolverError, UnsupportedModelError
from pbsens.model.library import model_from_spec
from pbsens.model.sbml import read_sbml
from pbsens.model.spec import Definition, ModelSpec, Quantity
from pbsens.simulation.segments import simulate
from pbsens.solvers import solve_states

SUITE = os.path.join(os.path.dirname(__file__), "data", "sbml_suite")


# --------------------------------------------------------------------- harness
# the suite's case logic is shared with benchmarks/sbml_suite.py
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import sbml_suite_case as sc


def _check_case(case, tmp_path, backend, level="l3v2", method="LSODA"):
    path = sc.sbml_file(SUITE, case, level)
    st = sc.settings(SUITE, case)
    header, want = sc.expected(SUITE, case)
    spec = sc.suite_spec(path, header, set(sc.names_list(st.get("amount"))), read_sbml)
    model = model_from_spec(spec, backend)
    assert model.backend == backend
    atol, rtol = float(st["absolute"]), float(st["relative"])
    t = want[:, 0]
    sim = simulate(model, t, sensitivities=False, solver=method, rtol=1e-10, atol=1e-12)
    got = np.array([model.outputs(ti, xi, sim.p) for ti, xi in zip(t, sim.x)])
    bad = [(want[i, 0], header[j + 1], got[i, j], want[i, j + 1])
           for i, j in sc.mismatches(got, want[:, 1:], atol, rtol)]
    assert not bad, f"case {case} ({backend}): {len(bad)} entries off, first (t, name, got, want): {bad[:5]}"


# ------------------------------------------- 1. Level 3: 0-dimensional compartments
@pytest.mark.parametrize("level", ["l3v1", "l3v2"])
@pytest.mark.parametrize("backend", ["numba", "tape"])
def test_level3_concentration_in_zero_dimensional_compartment(tmp_path, backend, level):
    """Case 01809: S1's initial concentration 1 in a 0-D compartment of size 2 is an amount
    of 2 (Level 2's convention read it as the amount 1: off by 1.0 at every time)."""
    _check_case("01809", tmp_path, backend, level)


def test_level3_zero_dimensional_species_is_a_concentration(tmp_path):
    spec = read_sbml(os.path.join(SUITE, "01809", "01809-sbml-l3v2.xml"))
    assert spec.states == [Quantity("S1", 1.0)]
    assert spec.odes["S1"].replace(" ", "") in ("J/C", "(J)/C")


def _level2_zero_dimensional(path):
    doc = libsbml.SBMLDocument(2, 4)
    m = doc.createModel()
    m.setId("zero_d")
    c = m.createCompartment()
    c.setId("C")
    c.setSpatialDimensions(0)
    s = m.createSpecies()
    s.setId("S1")
    s.setCompartment("C")
    s.setInitialAmount(3.0)
    r = m.createReaction()
    r.setId("J")
    r.setReversible(False)
    r.createProduct().setSpecies("S1")
    r.createKineticLaw().setMath(libsbml.parseL3Formula("1.5"))
    libsbml.writeSBMLToFile(doc, str(path))


def test_level2_zero_dimensional_species_stays_an_amount(tmp_path):
    """Level 2 keeps its rule: a species in a 0-D compartment is an amount, never divided."""
    _level2_zero_dimensional(tmp_path / "l2.xml")
    spec = read_sbml(tmp_path / "l2.xml")
    assert spec.meta["sbml"]["level"] == 2
    assert spec.states == [Quantity("S1", 3.0)]
    assert spec.odes["S1"] == "J"


# --------------------------------------------------------------------- 2. avogadro
@pytest.mark.parametrize("case", ["00960", "00961"])
def test_avogadro_is_sbmls_value(tmp_path, case):
    """P5 = avogadro - 6.0221e23 is 4.179e18 with SBML's value (4.076e18 with the SI 2019 one)."""
    _check_case(case, tmp_path, "numba")


def test_avogadro_to_nine_digits(tmp_path):
    """Case 01323: 41 historical values of the constant over SBML's, at 1e-9."""
    _check_case("01323", tmp_path, "tape")


# -------------------------------------------------- 3. raw exceptions -> results or errors
@pytest.mark.parametrize("backend", ["numba", "tape"])
def test_guarded_piecewise_branches(tmp_path, backend):
    """Case 01488: piecewise(0, t <= 0 or t >= 1, arcsech(t)) and friends at t = 0 (the tape
    raised ZeroDivisionError from the branch not taken)."""
    _check_case("01488", tmp_path, backend)


def _spec(odes, states, parameters=(), outputs=()):
    return ModelSpec(name="semantics", states=[Quantity(k, v) for k, v in states.items()],
                     parameters=[Quantity(k, v) for k, v in parameters], odes=odes,
                     outputs=[Definition(k, v) for k, v in outputs]).validate()


@pytest.mark.parametrize("backend", ["numba", "tape"])
def test_negative_power_in_branch_not_taken(backend):
    spec = _spec({"x": "piecewise(0, t <= 0, (1/t)^2) + piecewise(0, t <= 0, t^-3)"}, {"x": 0.0},
                 outputs=[("y", "piecewise(0, t <= 0, (1/t)^2)")])
    m = model_from_spec(spec, backend)
    x = np.zeros(1)
    assert m.rhs(0.0, x, m.p)[0] == 0.0
    assert m.outputs(0.0, x, m.p)[0] == 0.0
    assert m.rhs(0.5, x, m.p)[0] == pytest.approx(4.0 + 8.0)
    assert m.outputs(2.0, x, m.p)[0] == pytest.approx(0.25)


@pytest.mark.parametrize("method", ["Radau", "BDF"])
def test_nonfinite_jacobian_is_a_solver_error(method):
    """Case 01395's failure in small: d(sqrt(x))/dx is inf at x = 0, so Radau's LU got NaN/inf
    and scipy's ValueError escaped; now a SolverError naming the method and the time."""
    m = model_from_spec(_spec({"x": "-sqrt(x) + 0*k", "y": "-k*y"}, {"x": 0.0, "y": 1.0},
                              parameters=[("k", 1.0)]), "tape")
    with pytest.raises(SolverError, match=rf"failed near t = 0 \(method {method}\).*Jacobian has NaN/inf"):
        solve_states(m, (0.0, 1.0), method=method)


@pytest.mark.parametrize("backend", ["numba", "tape"])
def test_floor_and_ceiling_of_states(backend):
    """x' = floor(x) from 1.5: x = 1.5 + t to t = 0.5, then 2 + 2 (t - 0.5) to t = 1;
    y' = ceiling(y) from 0.5: y = 0.5 + t to t = 0.5, then 1 + 2 (t - 0.5). Their
    derivatives are 0 (piecewise constant)."""
    spec = _spec({"x": "floor(x)", "y": "ceiling(y) + 0*k*x"}, {"x": 1.5, "y": 0.5}, parameters=[("k", 1.0)])
    m = model_from_spec(spec, backend)
    t = np.array([0.25, 0.5, 0.75, 0.95])
    traj = solve_states(m, (0.0, 0.95), t_eval=t, rtol=1e-10, atol=1e-12)
    x = traj.x[traj.eval_index]
    np.testing.assert_allclose(x[:, 0], [1.75, 2.0, 2.5, 2.9], rtol=1e-7)
    np.testing.assert_allclose(x[:, 1], [0.75, 1.0, 1.5, 1.9], rtol=1e-7)
    J = m.jac_x(0.1, np.array([1.6, 0.6]), m.p)
    np.testing.assert_array_equal(J, np.zeros((2, 2)))


# ------------------------------------------------------------ 4. booleans as numbers
@pytest.mark.parametrize("case, backend", [("01283", "numba"), ("01288", "numba"), ("01288", "tape"),
                                           ("01290", "tape")])
def test_booleans_as_numbers_suite(tmp_path, case, backend):
    """01283: true + 3, false / 5 - (2 * true)^2, piecewise(false, true, true); 01288: kinetic
    laws true and false; 01290: rate rules true and false."""
    _check_case(case, tmp_path, backend)


@pytest.mark.parametrize("backend", ["numba", "tape"])
def test_booleans_as_numbers_in_rates(backend):
    """x' = -k x (t > 1): x = 1 to t = 1, then exp(-k (t - 1)); y' = True + (x > 2): y = t;
    z' = piecewise(t > 0.5, on, 0) with on = (t < 3): 1 on (0.5, 3)."""
    spec = ModelSpec(name="booleans", states=[Quantity("x", 1.0), Quantity("y", 0.0), Quantity("z", 0.0)],
                     parameters=[Quantity("k", 0.7)],
                     definitions=[Definition("on", "t < 3")],
                     odes={"x": "-k*x*(t > 1)", "y": "True + (x > 2) - -(False)", "z": "piecewise(t > 0.5, on, 0)"}
                     ).validate()
    m = model_from_spec(spec, backend)
    t = np.array([0.5, 1.0, 2.0, 4.0])
    traj = solve_states(m, (0.0, 4.0), t_eval=t, rtol=1e-10, atol=1e-12, tstops=[0.5, 1.0, 3.0])
    x = traj.x[traj.eval_index]
    np.testing.assert_allclose(x[:, 0], np.where(t > 1, np.exp(-0.7 * (t - 1)), 1.0), rtol=1e-7)
    np.testing.assert_allclose(x[:, 1], t, rtol=1e-9)
    np.testing.assert_allclose(x[:, 2], [0.0, 0.5, 1.5, 2.5], atol=1e-9)


@pytest.mark.parametrize("backend", ["numba", "tape"])
def test_numbers_as_conditions(tmp_path, backend):
    """Case 01282 (SBML L3V2): piecewise(0, 5, 1) is 0, true && (0 || 0.0) is 0; a number is
    true where it is not 0."""
    _check_case("01282", tmp_path, backend)
    spec = _spec({"x": "piecewise(2, k - 1, 3) + piecewise(1, not k, 0)"}, {"x": 0.0}, parameters=[("k", 1.0)])
    m = model_from_spec(spec, backend)
    assert m.rhs(0.0, np.zeros(1), np.array([1.0]))[0] == 3.0
    assert m.rhs(0.0, np.zeros(1), np.array([0.0]))[0] == 3.0
    assert m.rhs(0.0, np.zeros(1), np.array([2.0]))[0] == 2.0


# ------------------------------------------ 5. constructs added for issue #39 (items 2 and 3)
@pytest.mark.parametrize("case, level", [
    ("00009", "l3v2"),    # no ODE state: both species are boundary conditions
    ("00051", "l3v2"),    # a reaction in a compartment whose volume a rate rule changes
    ("01117", "l3v2"),    # a constant species keeps its amount in a growing compartment
    ("01462", "l3v2"),    # a species and its compartment under rate rules, rateOf
    ("01251", "l3v2"),    # rateOf(S1) of a reaction's species in an initial assignment
    ("01460", "l3v2"),    # rateOf of a local parameter (0) beside a rate-ruled global of that id
    ("01103", "l3v2"),    # a species reference's stoichiometry changed by a rate rule
    ("00068", "l2v5"),    # stoichiometryMath (SBML Level 2)
    ("01236", "l3v2"),    # a rate rule without math (no effect)
    ("01271", "l3v2"),    # an unused function definition without math (no effect)
    ("00959", "l3v2"),    # a dangling unit reference in the file (units do not enter the equations)
])
def test_issue39_constructs_suite(tmp_path, case, level):
    _check_case(case, tmp_path, "tape", level)


def test_non_finite_parameter_values_are_refused_by_name():
    """Case 00951: constant parameters INF, -INF and NaN; pbsens writes no non-finite number into
    a model, so the case is refused naming the parameter (not a generic error)."""
    with pytest.raises(UnsupportedModelError, match="parameter 'P': non-finite number inf") as err:
        read_sbml(sc.sbml_file(SUITE, "00951", "l3v2"))
    assert ("non-finite number" in {k for k, _ in err.value.unsupported})


def test_function_definition_without_math_is_reported_and_refused_when_called(tmp_path):
    """An empty function definition is ignored with a warning (case 01271); a call of one is a
    ModelError naming the function."""
    src = open(sc.sbml_file(SUITE, "01271", "l3v2")).read()
    with pytest.warns(UserWarning, match="function definition without math 'foo'"):
        read_sbml(sc.sbml_file(SUITE, "01271", "l3v2"))
    assert "<initialAssignment" not in src
    called = src.replace("</listOfParameters>", "</listOfParameters><listOfInitialAssignments>"
                         "<initialAssignment symbol=\"p1\"><math xmlns=\"http://www.w3.org/1998/Math/MathML\">"
                         "<apply><ci> foo </ci></apply></math></initialAssignment></listOfInitialAssignments>")
    path = tmp_path / "called.xml"
    path.write_text(called)
    with pytest.raises(ModelError, match="unknown function 'foo'"):
        read_sbml(str(path))
