"""Accuracy measures: relative error E_k and the perturbation error kappa_bar (8.5)-(8.6)."""
import dataclasses

import numpy as np
import pytest

import pbsens
from conftest import make_model
from pbsens.sensitivity.forward import forward_sensitivities
from pbsens.sensitivity.metrics import kappa_bar, relative_error
from pbsens.sensitivity.result import SensitivityResult


def _result(t, S, **kw):
    t = np.asarray(t, dtype=float)
    S = np.asarray(S, dtype=float)
    kw.setdefault("x", np.zeros((t.size, S.shape[1])))
    kw.setdefault("p", np.ones(S.shape[2]))
    kw.setdefault("x0", np.zeros(S.shape[1]))
    return SensitivityResult(t=t, S=S, method="test", **kw)


def _synthetic(K=6, nx=3, np_=2, seed=0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 5, K)
    S = rng.normal(size=(K, nx, np_))
    S[0] = 0.0  # as at t0 with S0 = 0
    return t, S


# ----------------------------------------------------------------- relative error

def test_relative_error_identical_is_zero():
    t, S = _synthetic()
    E = relative_error(_result(t, S), _result(t, S.copy()))
    assert E.shape == (t.size,)
    assert np.all(E == 0.0)


def test_relative_error_known_perturbation():
    t, S = _synthetic()
    ref = _result(t, S)
    E = relative_error(_result(t, 1.03 * S), ref)
    assert E[0] == 0.0  # reference and approximation both zero at t0
    assert np.allclose(E[1:], 0.03, rtol=1e-12)
    # one perturbed entry: E_k = |delta| / ||S_ref_k||_F
    S2 = S.copy()
    S2[3, 1, 0] += 0.25
    E2 = relative_error(_result(t, S2), ref)
    assert np.isclose(E2[3], 0.25 / np.linalg.norm(S[3]))
    assert np.all(np.delete(E2, 3) == 0.0)


def test_relative_error_at_zero_reference_is_absolute():
    t, S = _synthetic()
    S_hat = S.copy()
    S_hat[0] = 1e-3  # reference is exactly zero at t0
    E = relative_error(_result(t, S_hat), _result(t, S))
    assert np.isclose(E[0], np.linalg.norm(S_hat[0]))
    assert np.all(np.isfinite(E))


def test_relative_error_interpolates_reference():
    # S linear in time: linear interpolation of the reference is exact
    t_ref = np.linspace(0, 10, 11)
    slope = np.arange(6.0).reshape(1, 3, 2) + 1.0
    S_ref = t_ref[:, None, None] * slope
    t = np.array([0.0, 0.25, 3.5, 7.123, 10.0])
    S = t[:, None, None] * slope
    E = relative_error(_result(t, S), _result(t_ref, S_ref))
    assert np.allclose(E, 0.0, atol=1e-14)
    E2 = relative_error(_result(t, 1.1 * S), _result(t_ref, S_ref))
    assert np.allclose(E2[1:], 0.1) and E2[0] == 0.0


def test_relative_error_selects_reference_columns():
    t, S = _synthetic(np_=3)
    ref = _result(t, S, param_names=["a", "b", "c"])
    r = _result(t, S[:, :, [2, 0]], param_names=["c", "a"])
    assert np.all(relative_error(r, ref) == 0.0)


def test_relative_error_bad_input():
    t, S = _synthetic()
    with pytest.raises(pbsens.PbsensError, match="'ref'"):
        relative_error(_result(t, S), _result(t, S[:, :2]))
    with pytest.raises(pbsens.PbsensError, match="'ref'"):
        relative_error(_result(t, S), _result(t[:-1], S[:-1]))  # r.t beyond the reference
    with pytest.raises(pbsens.PbsensError, match="'r'"):
        relative_error(_result(t, S[:, :, :1]), _result(t, S))
    bad = S.copy()
    bad[2, 0, 0] = np.nan
    with pytest.raises(pbsens.PbsensError, match="'r'.*NaN"):
        relative_error(_result(t, bad), _result(t, S))
    with pytest.raises(pbsens.PbsensError, match="'ref'"):
        relative_error(_result(t, S), "not a result")


def test_relative_error_of_fs_tolerances(chua):
    ts = np.linspace(0, 10, 51)
    ref = forward_sensitivities(chua, (0, 10), t_eval=ts, method="DOP853", rtol=1e-11, atol=1e-13)
    r = forward_sensitivities(chua, (0, 10), t_eval=ts, method="DOP853", rtol=1e-6, atol=1e-8)
    E = relative_error(r, ref)
    assert E[0] == 0.0
    assert 1e-10 < np.max(E) < 1e-3


# ----------------------------------------------------------------- kappa bar

@pytest.fixture(scope="module")
def chua_fs(chua):
    """Near-exact sensitivities of Chua's circuit on [0, 10] (FS at tight tolerance)."""
    ts = np.linspace(0, 10, 101)
    return forward_sensitivities(chua, (0, 10), t_eval=ts, method="DOP853", rtol=1e-12, atol=1e-14)


def test_kappa_bar_of_accurate_sensitivities_is_small(chua, chua_fs):
    kb, per = kappa_bar(chua, chua_fs, n_samples=10, seed=1, return_samples=True)
    assert kb.shape == (101,) and per.shape == (10, 101)
    assert np.allclose(kb, per.mean(axis=0))
    # at t0 both numerator and denominator vanish exactly (x0 does not depend on p): kappa = 0
    assert kb[0] == 0.0
    # at every later output time: far below the 1 % error tested next
    assert np.all(np.isfinite(kb)) and kb[1:].max() < 1e-4


def test_kappa_bar_detects_one_percent_error(chua, chua_fs):
    wrong = dataclasses.replace(chua_fs, S=1.01 * chua_fs.S)
    kb = kappa_bar(chua, wrong, n_samples=10, seed=1)
    assert np.all(kb[1:] > 0.5e-2) and np.all(kb[1:] < 2e-2)
    assert abs(np.median(kb[1:]) - 1e-2) < 1e-4


def test_kappa_bar_reproducible_for_a_seed(chua, chua_fs):
    short = dataclasses.replace(chua_fs, t=chua_fs.t[:21], x=chua_fs.x[:21], S=chua_fs.S[:21])
    a = kappa_bar(chua, short, n_samples=3, seed=7, progress=False)
    b = kappa_bar(chua, short, n_samples=3, seed=7, progress=False)
    c = kappa_bar(chua, short, n_samples=3, seed=8, progress=False)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_kappa_bar_progress_bar(chua, chua_fs, capsys):
    short = dataclasses.replace(chua_fs, t=chua_fs.t[:6], x=chua_fs.x[:6], S=chua_fs.S[:6])
    kappa_bar(chua, short, n_samples=2, progress=False)
    assert capsys.readouterr().err == ""
    kappa_bar(chua, short, n_samples=2, progress=True)
    assert "kappa_bar" in capsys.readouterr().err


def test_kappa_bar_parameter_subset_and_output_grid(chua):
    ts = np.linspace(1, 5, 9)  # does not start at t0: solves start at t_span[0]
    r = forward_sensitivities(chua, (0, 5), t_eval=ts, params=["p2"], method="DOP853", rtol=1e-12, atol=1e-14)
    kb = kappa_bar(chua, r, n_samples=4)
    assert kb.shape == (9,) and kb.max() < 1e-4
    wrong = dataclasses.replace(r, S=1.02 * r.S)
    assert np.allclose(kappa_bar(chua, wrong, n_samples=4), 0.02, rtol=0.2)


def test_kappa_bar_parameter_dependent_initial_state(tmp_path):
    # x' = -k x, x(0) = a: the perturbed solves start from x0(p +- d) = a +- d_a
    m = make_model(tmp_path, "decay_a", {"x": "a"}, {"k": 0.5, "a": 2.0}, {"x": "-k*x"})
    ts = np.linspace(0, 4, 9)
    r = forward_sensitivities(m, (0, 4), t_eval=ts, rtol=1e-12, atol=1e-14)
    kb = kappa_bar(m, r, n_samples=4)
    assert kb.max() < 1e-6
    # with a custom x0 the perturbation is x0 +- S0 d; S0 = 0 for k is still consistent
    r2 = forward_sensitivities(m, (0, 4), t_eval=ts, x0=[3.0], S0=[[0.0, 0.0]], rtol=1e-12, atol=1e-14)
    assert kappa_bar(m, r2, n_samples=4).max() < 1e-6
    # dropping the initial sensitivity is detected (a large error for dx/da)
    r3 = forward_sensitivities(m, (0, 4), t_eval=ts, S0=[[0.0, 0.0]], rtol=1e-12, atol=1e-14)
    assert kappa_bar(m, r3, n_samples=4).min() > 0.1


def test_kappa_bar_eps_zero_never_nan(chua, chua_fs):
    short = dataclasses.replace(chua_fs, t=chua_fs.t[:6], x=chua_fs.x[:6], S=chua_fs.S[:6])
    kb = kappa_bar(chua, short, n_samples=2, eps=0.0)
    assert kb[0] == 0.0 and np.all(np.isfinite(kb))


@pytest.mark.parametrize("kwargs, name", [
    (dict(n_samples=0), "n_samples"),
    (dict(n_samples=2.5), "n_samples"),
    (dict(h_low=-1e-5), "h_low"),
    (dict(h_low=1e-3, h_high=1e-4), "h_high"),
    (dict(eps=-1.0), "eps"),
    (dict(eps=np.nan), "eps"),
    (dict(rtol=0.0), "rtol"),
    (dict(atol="x"), "atol"),
    (dict(method="Euler"), "method"),
    (dict(seed="abc"), "seed"),
])
def test_kappa_bar_bad_input(chua, chua_fs, kwargs, name):
    with pytest.raises(pbsens.PbsensError, match=name):
        kappa_bar(chua, chua_fs, **kwargs)


def test_kappa_bar_wrong_model_or_result(chua, pka, chua_fs):
    with pytest.raises(pbsens.PbsensError, match="r"):
        kappa_bar(pka, chua_fs, n_samples=1)
    bad = dataclasses.replace(chua_fs, S=np.where(chua_fs.S == 0, np.nan, chua_fs.S))
    with pytest.raises(pbsens.PbsensError, match="NaN"):
        kappa_bar(chua, bad, n_samples=1)


def test_kappa_bar_solver_failure(tmp_path):
    m = make_model(tmp_path, "blowup", {"x": 1.0}, {"k": 1.0}, {"x": "k*x**2"})
    r = forward_sensitivities(m, (0, 0.9), t_eval=[0.5, 0.9], rtol=1e-10, atol=1e-12)
    wrong_span = dataclasses.replace(r, t=np.array([0.5, 1.5]))  # the perturbed solves blow up at t = 1
    with pytest.raises(pbsens.SolverError, match="blowup"):
        kappa_bar(m, wrong_span, n_samples=1, h_low=0.1, h_high=0.2)
