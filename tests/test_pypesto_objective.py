"""``pbsens.petab.pypesto_objective`` / ``pypesto_problem``: a PEtab problem as a pyPESTO objective.

On Boehm (tests/data/petab): fval, grad and hess equal ``-llh``, ``-gradient`` and the FIM of
``Problem.evaluate`` at two parameter vectors; a failed simulation gives ``fval = inf`` and NaN
derivatives (pyPESTO's convention for a failed AMICI simulation), never an exception; a short
multistart with fides (FIM as Hessian) runs end to end within the bounds.
"""
from __future__ import annotations

import copy
import pickle
from pathlib import Path

import numpy as np
import pytest

pypesto = pytest.importorskip("pypesto")
from pypesto.C import FVAL, GRAD, HESS, MODE_FUN, MODE_RES, RES, SRES  # noqa: E402

import pbsens.petab as pbpetab  # noqa: E402
from pbsens.errors import PbsensError, SolverError  # noqa: E402

BOEHM = Path(__file__).parent / "data" / "petab" / "Boehm_JProteomeRes2014" / "Boehm_JProteomeRes2014.yaml"


@pytest.fixture(scope="module")
def boehm():
    return pbpetab.load(BOEHM)


def _points(problem):
    shift = 0.1 * np.where(np.arange(problem.dim) % 2, 1.0, -1.0)
    return [problem.x_nominal.copy(), np.clip(problem.x_nominal + shift, *problem.bounds.T)]


def test_values_match_evaluate(boehm):
    obj = pbpetab.pypesto_objective(boehm)
    assert obj.x_names == boehm.parameter_ids
    assert obj.has_fun and obj.has_grad and obj.has_hess
    for x in _points(boehm):
        r = boehm.evaluate(x, method="exp2")
        fval, grad, hess = obj(x, sensi_orders=(0, 1, 2))
        assert fval == pytest.approx(-r.llh, rel=1e-12)
        np.testing.assert_allclose(grad, -r.gradient, rtol=1e-12, atol=0)
        np.testing.assert_allclose(hess, r.fim, rtol=1e-12, atol=0)
        # order 0 alone (no sensitivities computed) gives the same value
        assert obj(x) == pytest.approx(-r.llh, rel=1e-12)
        d = obj(x, sensi_orders=(0, 1), return_dict=True)
        assert set(d) >= {FVAL, GRAD} and HESS not in d


def test_adjoint_objective_is_gradient_only(boehm):
    """``method="exp2-adjoint"``: fval and grad equal the forward exp2 objective's (the adjoint is its
    transpose), and pyPESTO is told that no Hessian (FIM) and no residuals exist."""
    obj = pbpetab.pypesto_objective(boehm, method="exp2-adjoint")
    ref = pbpetab.pypesto_objective(boehm, method="exp2")
    for x in _points(boehm):
        fval, grad = obj(x, sensi_orders=(0, 1))
        f_ref, g_ref = ref(x, sensi_orders=(0, 1))
        assert fval == pytest.approx(f_ref, rel=1e-12)
        np.testing.assert_allclose(grad, g_ref, rtol=0, atol=1e-10 * np.max(np.abs(g_ref)))
    assert obj.check_sensi_orders((0, 1), MODE_FUN)
    assert not obj.check_sensi_orders((0, 1, 2), MODE_FUN)
    assert not obj.check_mode(MODE_RES)
    with pytest.raises(ValueError):                  # pyPESTO refuses the order before evaluating
        obj(boehm.x_nominal, sensi_orders=(0, 1, 2))


def test_solver_options_and_prior_pass_through(boehm):
    x = _points(boehm)[1]
    obj = pbpetab.pypesto_objective(boehm, "fs", rtol=1e-9, atol=1e-11, prior=True)
    r = boehm.evaluate(x, method="fs", rtol=1e-9, atol=1e-11)
    lp, glp = boehm.priors.logpdf_and_grad(x)
    fval, grad = obj(x, sensi_orders=(0, 1))
    assert fval == pytest.approx(-(r.llh + lp), rel=1e-12)
    np.testing.assert_allclose(grad, -(r.gradient + glp), rtol=1e-12)
    assert obj.get_config()["method"] == "fs"


def test_residual_mode_follows_the_result_fields(boehm):
    obj = pbpetab.pypesto_objective(boehm)
    from pbsens.problems.pypesto_objective import _has_residual_jacobian
    assert obj.check_mode(MODE_RES) == _has_residual_jacobian()
    assert not obj.check_sensi_orders((2,), MODE_RES)
    if not _has_residual_jacobian():
        pytest.skip("EvaluationResult has no residual_jacobian in this pbsens")
    x = _points(boehm)[1]
    r = boehm.evaluate(x)
    d = obj(x, sensi_orders=(0, 1), mode=MODE_RES, return_dict=True)
    np.testing.assert_allclose(d[RES], r.residuals, rtol=1e-12)
    np.testing.assert_allclose(d[SRES], r.residual_jacobian, rtol=1e-12)


def test_gauss_newton_hessian_is_jtj_of_the_residuals(boehm):
    from pbsens.problems.pypesto_objective import _has_residual_jacobian
    if not _has_residual_jacobian():
        with pytest.raises(PbsensError, match="gauss-newton"):
            pbpetab.pypesto_objective(boehm, hessian="gauss-newton")
        return
    x = _points(boehm)[1]
    r = boehm.evaluate(x)
    obj = pbpetab.pypesto_objective(boehm, hessian="gauss-newton")
    _, grad, hess = obj(x, sensi_orders=(0, 1, 2))
    J = r.residual_jacobian
    np.testing.assert_allclose(hess, J.T @ J, rtol=1e-12)
    np.testing.assert_allclose(grad, -r.gradient, rtol=1e-12)
    # Boehm estimates its noise parameters: J^T J is not the expected information there
    assert not np.allclose(hess, r.fim, rtol=1e-3)
    with pytest.raises(PbsensError, match="hessian"):
        pbpetab.pypesto_objective(boehm, hessian="bfgs")


def test_failed_simulation_gives_inf(boehm, monkeypatch):
    obj = pbpetab.pypesto_objective(boehm)
    x = boehm.x_nominal.copy()

    def fail(*args, **kwargs):
        raise SolverError("condition 'model1_data1': the solver failed (test)")

    monkeypatch.setattr(boehm, "evaluate", fail)
    fval, grad, hess = obj(x, sensi_orders=(0, 1, 2))
    assert fval == np.inf
    assert grad.shape == (boehm.dim,) and np.all(np.isnan(grad))
    assert hess.shape == (boehm.dim, boehm.dim) and np.all(np.isnan(hess))
    assert obj(x) == np.inf
    assert obj.n_failed == 2 and "test" in obj.last_error
    if obj.check_mode(MODE_RES):
        d = obj(x, sensi_orders=(0, 1), mode=MODE_RES, return_dict=True)
        assert np.all(np.isnan(d[RES])) and d[SRES].shape[1] == boehm.dim


def test_real_solver_failure_gives_inf(boehm):
    # a step budget far too small: the state solve fails for real; LSODA takes max_nfev
    obj = pbpetab.pypesto_objective(boehm, max_nfev=5)
    fval, grad = obj(boehm.x_nominal, sensi_orders=(0, 1))
    assert fval == np.inf and np.all(np.isnan(grad))


def test_bad_input_still_raises(boehm):
    obj = pbpetab.pypesto_objective(boehm)
    with pytest.raises(PbsensError):
        obj.call_unprocessed(np.zeros(boehm.dim + 1), (0,), MODE_FUN)
    with pytest.raises(PbsensError, match="method"):
        pbpetab.pypesto_objective(boehm, method="nope")


def test_problem_bounds_names_and_copies(boehm):
    prob = pbpetab.pypesto_problem(boehm, x_guesses=_points(boehm))
    np.testing.assert_array_equal(prob.lb, boehm.bounds[:, 0])
    np.testing.assert_array_equal(prob.ub, boehm.bounds[:, 1])
    assert list(prob.x_names) == boehm.parameter_ids
    assert prob.x_guesses.shape == (2, boehm.dim)
    # pyPESTO deep-copies the objective: the copy shares the compiled model and computes the same
    obj2 = copy.deepcopy(prob.objective)
    assert obj2.problem.model is boehm.model
    x = _points(boehm)[1]
    assert obj2(x) == prob.objective(x)
    # the class pickles by reference (multi-process engines)
    cls = type(prob.objective)
    assert pickle.loads(pickle.dumps(cls)) is cls
    with pytest.raises(PbsensError, match="x_guesses"):
        pbpetab.pypesto_problem(boehm, x_guesses=np.zeros((1, boehm.dim + 1)))


def test_missing_pypesto_names_the_extra(monkeypatch):
    import sys

    import pbsens.problems.pypesto_objective as po
    monkeypatch.setattr(po, "_CLASS", None)
    monkeypatch.setitem(sys.modules, "pypesto", None)
    with pytest.raises(po.PypestoMissingError, match=r"pbsens\[fit\]"):
        po.pypesto_objective(object())
    assert issubclass(po.PypestoMissingError, PbsensError)


def test_fides_multistart_runs(boehm):
    pytest.importorskip("fides")
    from pypesto.optimize import FidesOptimizer, OptimizeOptions, minimize
    starts = np.array(_points(boehm))
    prob = pbpetab.pypesto_problem(boehm, x_guesses=starts)
    optimizer = FidesOptimizer(hessian_update=None, options={"maxiter": 5}, verbose=0)
    result = minimize(prob, optimizer, n_starts=2, progress_bar=False,
                      options=OptimizeOptions(allow_failed_starts=False))
    runs = result.optimize_result.list
    assert len(runs) == 2
    by_id = {r.id: r for r in runs}
    for i, x0 in enumerate(starts):
        r = by_id[str(i)]
        np.testing.assert_array_equal(r.x0, x0)
        assert np.isfinite(r.fval) and r.fval <= r.fval0 + 1e-9
        assert np.all(r.x >= prob.lb - 1e-12) and np.all(r.x <= prob.ub + 1e-12)
        assert r.n_fval >= 1
