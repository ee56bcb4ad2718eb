"""The opt-in cross-check of a PEtab problem (issue #39): llh by two state solvers, gradient by exp2 and
fs, per condition, against their error estimates (pbsens.problems.cross_check).

On a damped oscillator with an analytic solution (tests/oscillator_problem.py): three conditions, one
of them (``c_fast``) some hundred periods long, one (``c_pre``) after a preequilibration. References
are the analytic llh per condition and central differences of it, never values of the code under test.

* everything agrees at the defaults: no warning, and both sides match the analytic values;
* LSODA as the second solver misses its tolerance on ``c_fast`` (its llh there is 100x further from
  the analytic value than Rodas5P's): the check must name ``c_fast`` and only it;
* fs at rtol 1e-3 is wrong on ``c_fast`` beyond its tolerance: the gradient's entries must be named
  for ``c_fast`` and only there.
Without the comparison the last two would issue no warning and fail.
"""
from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

pytest.importorskip("petab")
pytest.importorskip("libsbml")

import pbsens                                   # noqa: E402
import pbsens.petab as pbpetab                  # noqa: E402
from pbsens.cli.main import main                # noqa: E402
from pbsens.cli.petab import CROSS_CHECK_DISAGREES  # noqa: E402
from pbsens.errors import CrossCheckWarning, PbsensError  # noqa: E402
import oscillator_problem as osc                # noqa: E402


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
    """``{fast: (problem, yaml)}``: with and without ``c_fast``, one compiled model (a module-wide cache)."""
    base = tmp_path_factory.mktemp("xcheck")
    old = os.environ.get("PBSENS_CACHE_DIR")
    os.environ["PBSENS_CACHE_DIR"] = str(base / "cache")
    try:
        out = {}
        for fast in (False, True):
            folder = base / f"fast_{fast}"
            folder.mkdir()
            yaml = osc.write(folder, fast=fast)
            out[fast] = (pbpetab.load(yaml, cache=False), yaml)
        yield out
    finally:
        if old is None:
            os.environ.pop("PBSENS_CACHE_DIR", None)
        else:
            os.environ["PBSENS_CACHE_DIR"] = old


def _analytic_gradient(theta, fast, h=1e-6):
    """Central differences of the analytic llh per condition: ``{condition: (d,)}``."""
    g = {}
    for j in range(len(theta)):
        e = np.zeros(len(theta))
        e[j] = h
        up, dn = osc.llh_by_condition(theta + e, fast), osc.llh_by_condition(theta - e, fast)
        for c in up:
            g.setdefault(c, np.zeros(len(theta)))[j] = (up[c] - dn[c]) / (2 * h)
    return g


def _check(problem, theta, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = problem.cross_check(theta, **options)
    return report, [w.message for w in caught if issubclass(w.category, CrossCheckWarning)]


def test_everything_agrees_at_the_defaults(problems):
    problem, _ = problems[False]
    theta = problem.x_nominal
    report, warned = _check(problem, theta)
    assert warned == []
    assert report.agree
    assert report.settings["solver"] == "rodas5p" and report.settings["reference_solver"] == "Radau"
    llh = osc.llh_by_condition(theta, fast=False)
    grad = _analytic_gradient(theta, fast=False)
    assert sorted(c.simulation_condition_id for c in report.conditions) == sorted(llh)
    for c in report.conditions:
        assert c.agrees and c.llh_agrees and bool(np.all(c.gradient_agrees))
        # the per-condition contributions themselves are right (independent reference)
        assert c.llh == pytest.approx(llh[c.simulation_condition_id], abs=1e-6)
        assert c.llh_reference == pytest.approx(llh[c.simulation_condition_id], abs=1e-6)
        np.testing.assert_allclose(c.gradient, grad[c.simulation_condition_id], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c.gradient_fs, grad[c.simulation_condition_id], rtol=1e-5, atol=1e-6)
        assert c.llh_ratio < 1 and np.all(c.gradient_ratio < 1)
    pre = report["c_pre"]
    assert pre.preequilibration_id == "pre" and pre.condition == "pre:c_pre"
    assert "preequilibrationConditionId 'pre'" in pre.describe()
    # the conditions' contributions add up to the evaluation's llh and gradient
    res = problem.evaluate(theta)
    assert sum(c.llh for c in report.conditions) == pytest.approx(res.llh, abs=1e-9)
    np.testing.assert_allclose(sum(c.gradient for c in report.conditions), res.gradient, rtol=1e-9, atol=1e-9)
    assert json.loads(json.dumps(report.to_dict()))["agree"] is True
    assert "all conditions agree" in str(report)


def test_a_second_solver_that_misses_its_tolerance_is_named(problems):
    problem, _ = problems[True]
    theta = problem.x_nominal
    report, warned = _check(problem, theta, reference_solver="LSODA", gradient=False)
    assert len(warned) == 1, [str(w) for w in warned]
    w = warned[0]
    assert w.condition == "c_fast" and w.simulation_condition_id == "c_fast" and w.preequilibration_id is None
    assert w.quantities == ["llh"]
    msg = str(w)
    assert "'c_fast'" in msg and "llh rodas5p" in msg and "LSODA" in msg
    assert "c_slow" not in msg and "c_pre" not in msg
    assert not report.agree
    assert not report["c_fast"].llh_agrees and report["c_fast"].llh_ratio > 10
    assert report["c_slow"].agrees and report["c_pre"].agrees
    assert [(c.condition, q) for c, q, _ in report.disagreements()] == [("c_fast", "llh")]
    # the disagreement is real: LSODA's llh on c_fast is far from the analytic one, Rodas5P's is not
    exact = osc.llh_by_condition(theta)["c_fast"]
    c = report["c_fast"]
    assert abs(c.llh_reference - exact) > 10 * abs(c.llh - exact)
    assert abs(c.llh_reference - exact) > report.settings["factor"] * c.llh_allowance


def test_forward_sensitivities_at_a_loose_tolerance_are_named(problems):
    problem, _ = problems[True]
    theta = problem.x_nominal
    report, warned = _check(problem, theta, fs_options={"rtol": 1e-3})
    named = {w.condition: w for w in warned}
    assert set(named) == {"c_fast"}, [str(w) for w in warned]
    assert {"gradient[k]", "gradient[a0]"} <= set(named["c_fast"].quantities)
    assert "gradient of 'k' exp2" in str(named["c_fast"])
    assert report["c_slow"].agrees and report["c_pre"].agrees
    assert not np.any(report["c_fast"].gradient_agrees)
    # the disagreement is real: fs is off the central differences of the analytic llh, exp2 is not
    ref = _analytic_gradient(theta, fast=True)["c_fast"]
    c = report["c_fast"]
    assert np.all(np.abs(c.gradient_fs - ref) > 10 * np.abs(c.gradient - ref))


def test_evaluate_attaches_the_report(problems):
    problem, _ = problems[False]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CrossCheckWarning)
        res = problem.evaluate(problem.x_nominal, cross_check=True, sensitivities=False)
    assert res.cross_check is not None and res.cross_check.agree
    assert res.cross_check.settings["gradient"] is False
    assert all(c.gradient is None for c in res.cross_check.conditions)
    assert problem.evaluate(problem.x_nominal, sensitivities=False).cross_check is None


@pytest.mark.parametrize("kwargs, name", [({"factor": -1.0}, "factor"), ({"factor": True}, "factor"),
                                          ({"reference_solver": "rodas5p"}, "reference_solver"),
                                          ({"reference_solver": "banana"}, "reference_solver"),
                                          ({"gradient": "yes"}, "gradient"),
                                          ({"fs_options": 3}, "fs_options")])
def test_bad_arguments_name_the_argument(problems, kwargs, name):
    problem, _ = problems[False]
    with pytest.raises(PbsensError, match=f"'{name}'"):
        problem.cross_check(**kwargs)
    with pytest.raises(PbsensError, match="'cross_check'"):
        problem.evaluate(cross_check="yes")


def test_warning_is_exported_and_pickles():
    import pickle
    assert pbsens.CrossCheckWarning is CrossCheckWarning
    w = pickle.loads(pickle.dumps(CrossCheckWarning("m", "p:c", "c", "p", ["llh"])))
    assert (w.condition, w.simulation_condition_id, w.preequilibration_id, w.quantities) == ("p:c", "c", "p", ["llh"])


def test_cli_prints_the_report_and_writes_it(problems, tmp_path, capsys):
    _, yaml = problems[True]
    out = tmp_path / "r.json"
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        status = main(["petab", str(yaml), "--cross-check", "--reference-solver", "LSODA", "--no-gradient",
                       "--out", str(out)])
    finally:
        os.chdir(old)
    captured = capsys.readouterr()
    text = captured.out
    assert status == CROSS_CHECK_DISAGREES == 3
    assert "cross-check: llh by rodas5p vs LSODA" in text
    assert "DISAGREE" in text and "cross-check: DISAGREEMENT" in text
    line = {ln.split()[0]: ln for ln in text.splitlines() if ln.strip().startswith(("c_fast", "c_slow", "pre:c_pre"))}
    assert line["c_fast"].rstrip().endswith("DISAGREE") and line["c_slow"].rstrip().endswith("agree")
    warned = [ln for ln in captured.err.splitlines() if ln.startswith("pbsens petab: warning: pbsens cross-check")]
    assert len(warned) == 1 and "condition 'c_fast'" in warned[0], captured.err
    data = json.loads(out.read_text())["cross_check"]
    assert data["agree"] is False
    assert [d["condition"] for d in data["disagreements"]] == ["c_fast"]


def test_cli_exits_zero_when_every_condition_agrees(problems, capsys):
    _, yaml = problems[True]
    status = main(["petab", str(yaml), "--cross-check", "--no-gradient"])
    text = capsys.readouterr().out
    assert status == 0, text
    assert "all conditions agree" in text


def test_the_warning_names_the_preequilibration():
    """The message of a disagreeing condition after a preequilibration names both ids (a report built by
    hand: llh 1.0 vs 1.5 with an allowance of 0.01, gradient entries agreeing)."""
    from pbsens.problems.cross_check import ConditionCheck, CrossCheckReport, _warn
    c = ConditionCheck("pre:c1", "c1", "pre", 1.0, 1.5, 0.01, 0.0, 10.0, gradient=np.array([1.0, 2.0]),
                       gradient_fs=np.array([1.0, 2.0]), gradient_allowance=np.array([0.1, 0.1]),
                       gradient_floor=np.zeros(2))
    ok = ConditionCheck("c2", "c2", None, 1.0, 1.0, 0.01, 0.0, 10.0)
    settings = {"solver": "rodas5p", "reference_solver": "Radau", "rtol": 1e-8, "atol": 1e-10, "factor": 10.0,
                "gradient": True}
    report = CrossCheckReport(["k", "a0"], np.zeros(2), [c, ok], settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _warn(report)
    assert len(caught) == 1
    w = caught[0].message
    assert isinstance(w, CrossCheckWarning) and w.quantities == ["llh"]
    assert "condition 'pre:c1' (simulationConditionId 'c1', preequilibrationConditionId 'pre')" in str(w)
    assert "llh rodas5p 1 vs Radau 1.5: difference 0.5, 50 x" in str(w)
    assert "c2" not in str(w)
