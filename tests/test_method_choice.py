"""``Problem.evaluate(method="auto")`` and ``Problem.gradient()``: forward exp2 or the post-hoc adjoint
by the rule of pbsens.problems.method_choice. The references are the two explicit methods (whose
own accuracy tests/test_adjoint*.py and tests/test_petab_rodas.py check against finite differences)."""
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import pbsens
import pbsens.petab as pbpetab
from pbsens.errors import PbsensError
from pbsens.model.spec import ModelSpec
from pbsens.problems import method_choice
from pbsens.problems.method_choice import AUTO_ADJOINT_MIN_PARAMS, choose_gradient_method

DATA = Path(__file__).parent / "data" / "petab"
NAME = "Boehm_JProteomeRes2014"


@pytest.fixture(scope="module")
def boehm_problem():
    problem = pbpetab.load(DATA / NAME / f"{NAME}.yaml")
    theta = problem.x_nominal + 0.1 * np.where(np.arange(problem.dim) % 2, 1.0, -1.0)
    return problem, theta


@pytest.fixture
def boehm(boehm_problem, monkeypatch):
    """Boehm (9 parameters) with the rule's threshold lowered, so that ``"auto"`` takes the adjoint."""
    monkeypatch.setattr(method_choice, "AUTO_ADJOINT_MIN_PARAMS", 3)
    return boehm_problem


def test_auto_keeps_forward_exp2_below_the_threshold(boehm_problem):
    problem, theta = boehm_problem
    assert problem.dim < AUTO_ADJOINT_MIN_PARAMS
    auto = problem.evaluate(theta, method="auto")
    fwd = problem.evaluate(theta, method="exp2")
    assert "exp2 (9 estimated parameters <" in auto.notes[0] and len(auto.notes) == 1
    assert np.array_equal(auto.gradient, fwd.gradient) and auto.computed("fim")


def test_auto_takes_the_adjoint_and_says_so(boehm):
    problem, theta = boehm
    auto = problem.evaluate(theta, method="auto")
    adj = problem.evaluate(theta, method="exp2-adjoint")
    fwd = problem.evaluate(theta, method="exp2")
    assert "exp2-adjoint" in auto.notes[0] and "auto" in auto.notes[0]
    assert np.array_equal(auto.gradient, adj.gradient)
    assert np.max(np.abs(auto.gradient - fwd.gradient)) <= 1e-9 * np.max(np.abs(fwd.gradient))
    assert auto.llh == adj.llh


def test_auto_computes_the_fim_on_first_read_by_the_forward_path(boehm):
    problem, theta = boehm
    auto = problem.evaluate(theta, method="auto")
    fwd = problem.evaluate(theta, method="exp2")
    assert not auto.computed("fim") and not auto.computed("residual_jacobian")
    assert np.array_equal(auto.fim, fwd.fim)
    assert auto.computed("fim")
    assert np.array_equal(auto.residual_jacobian, fwd.residual_jacobian)
    assert np.array_equal(auto.sigma_jacobian, fwd.sigma_jacobian)
    # the explicit adjoint still refuses the FIM by name
    with pytest.raises(PbsensError, match="Fisher information"):
        _ = problem.evaluate(theta, method="exp2-adjoint").fim


def test_gradient_defaults_to_auto(boehm):
    problem, theta = boehm
    assert np.array_equal(problem.gradient(theta), problem.evaluate(theta, method="exp2-adjoint").gradient)
    assert np.array_equal(problem.gradient(theta, method="exp2"), problem.evaluate(theta, method="exp2").gradient)


def test_auto_without_sensitivities_is_forward(boehm):
    problem, theta = boehm
    r = problem.evaluate(theta, method="auto", sensitivities=False)
    assert r.gradient is None and "exp2 (no gradient asked)" in r.notes[0]
    assert r.llh == problem.evaluate(theta, sensitivities=False).llh


def test_rule_keeps_forward_for_few_parameters_and_state_events():
    plain = pbsens.load_model(ModelSpec.from_dict({
        "name": "choice_plain", "states": [{"name": "x", "initial": 1.0}],
        "parameters": [{"name": "k", "value": 0.5}], "odes": {"x": "-k*x"}}), backend="tape")
    assert choose_gradient_method(SimpleNamespace(model=plain, dim=AUTO_ADJOINT_MIN_PARAMS))[0] == "exp2-adjoint"
    method, why = choose_gradient_method(SimpleNamespace(model=plain, dim=AUTO_ADJOINT_MIN_PARAMS - 1))
    assert method == "exp2" and "estimated parameters" in why
    evented = pbsens.load_model(ModelSpec.from_dict({
        "name": "choice_event", "states": [{"name": "x", "initial": 1.0}],
        "parameters": [{"name": "k", "value": 0.5}, {"name": "c", "value": 0.3}], "odes": {"x": "-k*x"},
        "events": [{"name": "reset", "trigger": "x < c", "assignments": {"x": "1"}}]}), backend="tape")
    method, why = choose_gradient_method(SimpleNamespace(model=evented, dim=50))
    assert method == "exp2" and "state-triggered" in why


def test_rule_on_the_sparse_path_is_the_dense_rule(monkeypatch):
    # since the spread's vector shares the gradient's march, a model on the sparse path takes the adjoint from
    # the same number of parameters (Lang: adjoint + spread 0.58x forward exp2), forward exp2 below it
    import pbsens.sensitivity.sparse as sparse_path
    plain = pbsens.load_model(ModelSpec.from_dict({
        "name": "choice_plain", "states": [{"name": "x", "initial": 1.0}],
        "parameters": [{"name": "k", "value": 0.5}], "odes": {"x": "-k*x"}}), backend="tape")
    monkeypatch.setattr(sparse_path, "SPARSE_MIN_STATES", 1)
    monkeypatch.setattr(sparse_path, "SPARSE_MAX_DENSITY", 1.0)
    assert sparse_path.choose(plain, "exp2", "auto")
    method, why = choose_gradient_method(SimpleNamespace(model=plain, dim=AUTO_ADJOINT_MIN_PARAMS))
    assert method == "exp2-adjoint" and "estimated parameters" in why
    method, why = choose_gradient_method(SimpleNamespace(model=plain, dim=AUTO_ADJOINT_MIN_PARAMS - 1))
    assert method == "exp2" and "estimated parameters" in why


def test_unknown_method_names_auto(boehm):
    problem, theta = boehm
    with pytest.raises(PbsensError, match="'auto'"):
        problem.evaluate(theta, method="automatic")
