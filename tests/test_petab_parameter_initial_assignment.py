"""A condition that sets a parameter whose SBML initial assignment is a number
(Liu_IFACPapersOnLine2025's ``u_2 = 1 * 1e9``, set to 1e9 or 0 by its conditions): the condition's
value wins (petab reads the number as the parameter's value; AMICI keeps the parameter fixed and
overrides it), and flows into the initial assignments that use the parameter.

Hand-written problem: ``u`` with no value and the initial assignment ``u = 2 * 3``; ``X(0) = u`` (an
initial assignment), ``dX/dt = k u``, so ``X(t) = u (1 + k t)``. Conditions set ``u`` to 1.5 and to
0.5; observable ``y = X``, sigma 0.5; the llh and its gradient in ``k`` are computed by hand.
A non-numeric initial assignment (``u = 2 * k``) is still refused by name (petab does not count ``u``
as a free parameter then).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("petab")
libsbml = pytest.importorskip("libsbml")

import pbsens.petab as pbpetab        # noqa: E402
from pbsens.problems.tables import PetabError  # noqa: E402
from petab_files import write_problem_yaml  # noqa: E402

K, SIGMA = 0.3, 0.5
#: (condition, u, measurements at t = 1, 2)
CONDS = [("c_a", 1.5, (2.0, 2.3)), ("c_b", 0.5, (0.6, 0.9))]


def _write(folder, u_formula="2 * 3"):
    doc = libsbml.SBMLDocument(3, 2)
    m = doc.createModel()
    m.setId("param_ia")
    c = m.createCompartment()
    c.setId("cell"); c.setSize(1.0); c.setConstant(True)                      # noqa: E702
    s = m.createSpecies()
    s.setId("X"); s.setCompartment("cell"); s.setHasOnlySubstanceUnits(True)  # noqa: E702
    s.setBoundaryCondition(False); s.setConstant(False)                      # noqa: E702
    for pid, val in (("k", K), ("u", None)):
        p = m.createParameter()
        p.setId(pid); p.setConstant(True)                                     # noqa: E702
        if val is not None:
            p.setValue(val)
    for sym, formula in (("X", "u"), ("u", u_formula)):
        ia = m.createInitialAssignment()
        ia.setSymbol(sym); ia.setMath(libsbml.parseL3Formula(formula))         # noqa: E702
    r = m.createReaction()
    r.setId("make_X"); r.setReversible(False)                                 # noqa: E702
    prod = r.createProduct()
    prod.setSpecies("X"); prod.setStoichiometry(1.0); prod.setConstant(True)  # noqa: E702
    r.createKineticLaw().setMath(libsbml.parseL3Formula("k * u"))
    libsbml.writeSBMLToFile(doc, str(folder / "model.xml"))
    (folder / "conditions.tsv").write_text("conditionId\tu\n" + "".join(f"{c}\t{u}\n" for c, u, _ in CONDS))
    (folder / "observables.tsv").write_text(f"observableId\tobservableFormula\tnoiseFormula\ny\tX\t{SIGMA}\n")
    (folder / "parameters.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
        f"k\tlin\t0\t10\t{K}\t1\n")
    rows = "".join(f"y\t{c}\t{m_}\t{t}\n" for c, _, ms in CONDS for t, m_ in zip((1.0, 2.0), ms))
    (folder / "measurements.tsv").write_text("observableId\tsimulationConditionId\tmeasurement\ttime\n" + rows)
    return write_problem_yaml(folder)


def _by_hand(k):
    llh, g = 0.0, 0.0
    for _, u, ms in CONDS:
        for t, m in zip((1.0, 2.0), ms):
            y = u * (1 + k * t)
            llh += -0.5 * math.log(2 * math.pi * SIGMA ** 2) - 0.5 * ((m - y) / SIGMA) ** 2
            g += (m - y) / SIGMA ** 2 * u * t
    return llh, np.array([g])


@pytest.mark.parametrize("method", ["exp2", "fs"])
def test_condition_overrides_a_numeric_initial_assignment_of_a_parameter(tmp_path, monkeypatch, method):
    monkeypatch.setenv("PBSENS_CACHE_DIR", str(tmp_path / "cache"))
    problem = pbpetab.load(_write(tmp_path))
    assert list(problem.parameter_ids) == ["k"]
    r0 = problem.evaluate(sensitivities=False, rtol=1e-12, atol=1e-14)
    assert r0.llh == pytest.approx(_by_hand(K)[0], rel=1e-9)
    r = problem.evaluate(np.array([0.7]), method=method, rtol=1e-12, atol=1e-14)
    llh, g = _by_hand(0.7)
    assert r.llh == pytest.approx(llh, rel=1e-9)
    np.testing.assert_allclose(r.gradient, g, rtol=1e-6, atol=1e-9)


def test_a_non_numeric_initial_assignment_of_a_condition_parameter_is_still_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PBSENS_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(PetabError, match=r"column 'u': 'u' is not a parameter"):
        pbpetab.load(_write(tmp_path, u_formula="2 * k"))
