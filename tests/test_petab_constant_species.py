"""A condition that overrides a species no reaction or rule changes (Smith_BMCSystBiol2013's
``extracellular_ROS``): the species is a per-condition constant, like a compartment size.

Hand-written problem: ``dX/dt = k * E`` with ``E`` a boundary species (never changed), ``X(0) = 0``,
so ``X(t) = k E t``; conditions set ``E`` to a number, leave it at the model's value (empty
cell) or to an estimated parameter ``E_est``. Observable ``y = X``, sigma 0.5; the llh and its
gradient are computed by hand.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("petab")
libsbml = pytest.importorskip("libsbml")

import pbsens.petab as pbpetab                 # noqa: E402
from pbsens.problems.tables import PetabError  # noqa: E402
from petab_files import write_problem_yaml  # noqa: E402

K, E_MODEL, E_EST, SIGMA = 0.3, 1.0, 4.0, 0.5
#: (condition, E in the condition table ('' keeps the model's), measurements at t = 1, 2)
CONDS = [("c_two", "2", (0.5, 1.3)), ("c_model", "", (0.4, 0.5)), ("c_est", "E_est", (1.0, 2.6))]


def _write(folder, assignment_rule=False):
    doc = libsbml.SBMLDocument(3, 1)
    m = doc.createModel()
    m.setId("const_species")
    c = m.createCompartment()
    c.setId("cell"); c.setSize(1.0); c.setConstant(True)                    # noqa: E702
    for sid, boundary, init in (("X", False, 0.0), ("E", True, E_MODEL)):
        s = m.createSpecies()
        s.setId(sid); s.setCompartment("cell"); s.setInitialAmount(init)   # noqa: E702
        s.setHasOnlySubstanceUnits(True); s.setBoundaryCondition(boundary); s.setConstant(False)  # noqa: E702
    p = m.createParameter()
    p.setId("k"); p.setValue(K); p.setConstant(True)                        # noqa: E702
    r = m.createReaction()
    r.setId("make_X"); r.setReversible(False); r.setFast(False)             # noqa: E702
    prod = r.createProduct()
    prod.setSpecies("X"); prod.setStoichiometry(1.0); prod.setConstant(True)  # noqa: E702
    mod = r.createModifier()
    mod.setSpecies("E")
    r.createKineticLaw().setMath(libsbml.parseL3Formula("k * E"))
    if assignment_rule:
        rule = m.createAssignmentRule()
        rule.setVariable("E"); rule.setMath(libsbml.parseL3Formula("2 * k"))  # noqa: E702
    libsbml.writeSBMLToFile(doc, str(folder / "model.xml"))
    (folder / "conditions.tsv").write_text("conditionId\tE\n" + "".join(f"{c}\t{e}\n" for c, e, _ in CONDS))
    (folder / "observables.tsv").write_text(f"observableId\tobservableFormula\tnoiseFormula\ny\tX\t{SIGMA}\n")
    (folder / "parameters.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
        f"k\tlin\t0\t10\t{K}\t1\nE_est\tlin\t0\t100\t{E_EST}\t1\n")
    rows = "".join(f"y\t{c}\t{m_}\t{t}\n" for c, _, ms in CONDS for t, m_ in zip((1.0, 2.0), ms))
    (folder / "measurements.tsv").write_text("observableId\tsimulationConditionId\tmeasurement\ttime\n" + rows)
    return write_problem_yaml(folder)


def _by_hand(k, e_est):
    llh, g = 0.0, np.zeros(2)
    for _, e, ms in CONDS:
        E = {"": E_MODEL, "E_est": e_est}.get(e, None) or float(e)
        for t, m in zip((1.0, 2.0), ms):
            y = k * E * t
            llh += -0.5 * math.log(2 * math.pi * SIGMA ** 2) - 0.5 * ((m - y) / SIGMA) ** 2
            g[0] += (m - y) / SIGMA ** 2 * E * t                       # d/dk
            g[1] += (m - y) / SIGMA ** 2 * k * t * (e == "E_est")      # d/dE_est
    return llh, g


@pytest.mark.parametrize("method", ["exp2", "fs"])
def test_condition_sets_a_constant_species_per_condition(tmp_path, monkeypatch, method):
    monkeypatch.setenv("PBSENS_CACHE_DIR", str(tmp_path / "cache"))
    problem = pbpetab.load(_write(tmp_path))
    assert list(problem.parameter_ids) == ["k", "E_est"]
    llh, g = _by_hand(K, E_EST)
    theta = np.array([0.25, 3.0])
    r0 = problem.evaluate(sensitivities=False, rtol=1e-12, atol=1e-14)
    assert r0.llh == pytest.approx(llh, rel=1e-9)
    r = problem.evaluate(theta, method=method, rtol=1e-12, atol=1e-14)
    llh_t, g_t = _by_hand(*theta)
    assert r.llh == pytest.approx(llh_t, rel=1e-9)
    np.testing.assert_allclose(r.gradient, g_t, rtol=1e-6, atol=1e-9)


def test_a_species_set_by_an_assignment_rule_is_still_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("PBSENS_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(PetabError, match=r"species 'E' is set by an assignment rule"):
        pbpetab.load(_write(tmp_path, assignment_rule=True))
