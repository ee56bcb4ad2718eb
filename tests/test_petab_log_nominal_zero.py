"""A log10-scale parameter whose PEtab nominal value is 0 (Lang_PLOSComputBiol2024 has three):
on its scale that is ``-inf``. ``evaluate()`` at the nominal vector reads it as the value 0 with
gradient entry 0 (``d llh / d log10 a = ln(10) a d llh / d a = 0``), as AMICI evaluates such a
nominal vector; ``-inf`` on a linear scale, ``+inf`` and NaN stay refused by name.

Hand-written problem: ``dX/dt = a + b``, ``X(0) = 0``, so ``X(t) = (a + b) t``; observable
``y = X``, sigma 0.5; ``a`` (log10, nominal 0) and ``b`` (log10, nominal 0.5) estimated, ``c``
(lin) estimated but unused. The llh and the gradient are computed by hand.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("petab")
pytest.importorskip("libsbml")

import pbsens.petab as pbpetab        # noqa: E402
from pbsens.errors import PbsensError  # noqa: E402
from petab_files import write_one_species_sbml, write_problem_yaml  # noqa: E402

SIGMA, B = 0.5, 0.5
DATA = ((1.0, 0.7), (2.0, 0.9), (3.0, 1.7))


def _write(folder):
    write_one_species_sbml(folder / "model.xml", "log_zero", {"a": 1.0, "b": 1.0, "c": 1.0}, "a + b")
    (folder / "conditions.tsv").write_text("conditionId\nc0\n")
    (folder / "observables.tsv").write_text(f"observableId\tobservableFormula\tnoiseFormula\ny\tX\t{SIGMA}\n")
    (folder / "parameters.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
        f"a\tlog10\t1e-5\t10\t0\t1\nb\tlog10\t1e-5\t10\t{B}\t1\nc\tlin\t-10\t10\t1\t1\n")
    rows = "".join(f"y\tc0\t{m_}\t{t}\n" for t, m_ in DATA)
    (folder / "measurements.tsv").write_text("observableId\tsimulationConditionId\tmeasurement\ttime\n" + rows)
    return write_problem_yaml(folder)


def _by_hand(a, b):
    llh, g_b = 0.0, 0.0
    for t, m in DATA:
        y = (a + b) * t
        llh += -0.5 * math.log(2 * math.pi * SIGMA ** 2) - 0.5 * ((m - y) / SIGMA) ** 2
        g_b += (m - y) / SIGMA ** 2 * t * b * math.log(10.0)
    return llh, np.array([0.0, g_b, 0.0])


@pytest.fixture
def problem(tmp_path, monkeypatch):
    monkeypatch.setenv("PBSENS_CACHE_DIR", str(tmp_path / "cache"))
    return pbpetab.load(_write(tmp_path))


@pytest.mark.parametrize("method", ["exp2", "fs", "exp2-adjoint"])
def test_log_scale_nominal_zero_is_the_value_zero_with_gradient_zero(problem, method):
    th = problem.nominal_theta()
    assert list(problem.parameter_ids) == ["a", "b", "c"]
    assert th[0] == -np.inf and th[1] == pytest.approx(math.log10(B))
    r = problem.evaluate(method=method, rtol=1e-10, atol=1e-12)
    llh, g = _by_hand(0.0, B)
    assert r.llh == pytest.approx(llh, rel=1e-8)
    np.testing.assert_allclose(r.gradient, g, rtol=1e-6, atol=1e-9)
    assert np.all(np.isfinite(r.gradient)) and r.gradient[0] == 0.0


def test_explicit_minus_inf_on_a_log_scale_equals_the_nominal(problem):
    th = np.array([-np.inf, math.log10(B), 1.0])
    assert problem.evaluate(th, sensitivities=False).llh == pytest.approx(_by_hand(0.0, B)[0], rel=1e-8)


@pytest.mark.parametrize("bad", [[0.0, 0.0, -np.inf], [np.inf, 0.0, 1.0], [np.nan, 0.0, 1.0]])
def test_other_non_finite_theta_is_refused_by_name(problem, bad):
    with pytest.raises(PbsensError, match="'theta' contains NaN or inf"):
        problem.evaluate(np.array(bad), sensitivities=False)
