"""Inference layer: Fisher information (1.3), output sensitivities, Gaussian likelihood
gradients, priors/posterior and the SMMALA sampler (METHOD.md section 8)."""
import sys

import numpy as np
import pytest

import pbsens
from pbsens import PbsensError, SolverError
from pbsens.sensitivity.forward import forward_sensitivities
from pbsens.inference import (GaussianLikelihood, LogPosterior, MCMCResult, NormalPrior,
                              fisher_information, output_sensitivities, smmala)

from conftest import make_model

TS = np.linspace(0.5, 6.0, 12)
# LSODA: fast on these tiny non-stiff problems, and tight enough for 1e-5 finite differences
FS_TIGHT = dict(rtol=1e-11, atol=1e-13, method="LSODA")        # forward_sensitivities(...)
LIK_FS = dict(method="fs", solver="LSODA", rtol=1e-11, atol=1e-13)  # GaussianLikelihood(...)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """Two-state nonlinear model with outputs that depend on states and parameters."""
    return make_model(
        tmp_path_factory.mktemp("inf"), "InfSmall",
        states={"x1": 1.0, "x2": 0.1},
        params={"k1": 1.2, "k2": 0.5, "k3": 0.3, "s": 2.0, "Km": 0.4},
        odes={"x1": "-k1*x1*x2 + k3", "x2": "k1*x1*x2 - k2*x2"},
        outputs=[("y1", "x1 + s*x2"), ("y2", "x2**2/(Km + x2)")])


@pytest.fixture(scope="module")
def small_states(tmp_path_factory):
    """The same dynamics without outputs (the states are observed)."""
    return make_model(
        tmp_path_factory.mktemp("inf2"), "InfSmallStates",
        states={"x1": 1.0, "x2": 0.1},
        params={"k1": 1.2, "k2": 0.5, "k3": 0.3},
        odes={"x1": "-k1*x1*x2 + k3", "x2": "k1*x1*x2 - k2*x2"})


def _data(lik_model, theta_true, params, rng, rel=0.05, missing=True):
    lik = GaussianLikelihood(lik_model, TS, np.ones((TS.size, 2)), 1.0, params=params, **LIK_FS)
    y = lik.predict(theta_true)
    sigma = rel * np.abs(y) + 0.01
    data = y * (1 + rel * rng.standard_normal(y.shape))
    if missing:
        data[1, 0] = data[4, 1] = data[7, 0] = np.nan
    return data, sigma


# ----------------------------------------------------------------------------- Fisher (1.3)
def test_fisher_information_equals_hand_built_gram(small_states):
    r = forward_sensitivities(small_states, (0, 6), t_eval=TS, **FS_TIGHT)
    K, nx, np_ = r.S.shape
    rng = np.random.default_rng(1)
    for sigma in (0.3, rng.uniform(0.1, 1.0, nx), rng.uniform(0.1, 1.0, (K, nx))):
        F = fisher_information(r, sigma)
        J = r.S.reshape(K * nx, np_)                       # rows: (time, state)
        w = 1.0 / np.broadcast_to(sigma, (K, nx)).reshape(-1) ** 2
        F_hand = J.T @ np.diag(w) @ J
        assert F.shape == (np_, np_)
        np.testing.assert_allclose(F, F_hand, rtol=1e-12, atol=1e-14 * np.abs(F_hand).max())
        np.testing.assert_array_equal(F, F.T)
        assert np.linalg.eigvalsh(F).min() >= -1e-12 * np.abs(F).max()


def test_fisher_information_rejects_bad_sigma(small_states):
    r = forward_sensitivities(small_states, (0, 6), t_eval=TS, **FS_TIGHT)
    for bad, word in ((0.0, "positive"), (-1.0, "positive"), (np.nan, "NaN"),
                      (np.ones(5), "shape"), (np.ones((3, 2)), "shape")):
        with pytest.raises(PbsensError, match="sigma") as exc:
            fisher_information(r, bad)
        assert word in str(exc.value)
    with pytest.raises(PbsensError, match="'r'"):
        fisher_information("not a result", 1.0)


# ------------------------------------------------------------------ output sensitivities
def test_output_sensitivities_match_central_differences(small):
    p = small.p
    r = forward_sensitivities(small, (0, 6), t_eval=TS, p=p, **FS_TIGHT)
    y, Sy = output_sensitivities(small, r)
    assert y.shape == (TS.size, 2) and Sy.shape == (TS.size, 2, small.n_params)
    for k in (0, 5, TS.size - 1):
        np.testing.assert_allclose(y[k], small.outputs(TS[k], r.x[k], p), rtol=1e-14)
    for j in range(small.n_params):
        h = 1e-5 * p[j]
        ys = []
        for sgn in (1, -1):
            pp = p.copy()
            pp[j] += sgn * h
            rr = forward_sensitivities(small, (0, 6), t_eval=TS, p=pp, params=[0], **FS_TIGHT)
            ys.append(np.array([small.outputs(t, x, pp) for t, x in zip(rr.t, rr.x)]))
        fd = (ys[0] - ys[1]) / (2 * h)
        np.testing.assert_allclose(Sy[:, :, j], fd, rtol=1e-5, atol=1e-6 * np.abs(Sy).max())
    # a subset of parameters (FS with params=...) gives the matching columns
    r2 = forward_sensitivities(small, (0, 6), t_eval=TS, p=p, params=["Km", "k1"], **FS_TIGHT)
    _, Sy2 = output_sensitivities(small, r2)
    np.testing.assert_allclose(Sy2, Sy[:, :, [4, 0]], rtol=1e-6, atol=1e-10)


def test_output_sensitivities_without_outputs_are_states(small_states):
    r = pbsens.sensitivities(small_states, t_span=(0, 6), t_eval=TS)
    y, Sy = output_sensitivities(small_states, r)
    np.testing.assert_array_equal(y, r.x)
    np.testing.assert_array_equal(Sy, r.S)


# ------------------------------------------------------------------ likelihood gradient
def _fd_grad(f, theta, h=1e-4):
    g = np.empty(theta.size)
    for j in range(theta.size):
        e = np.zeros(theta.size)
        e[j] = h
        g[j] = (f(theta + e) - f(theta - e)) / (2 * h)
    return g


@pytest.mark.parametrize("missing", [False, True])
def test_loglik_gradient_matches_central_differences(small, missing):
    rng = np.random.default_rng(3)
    params = ["k1", "k2", "s", "Km"]
    theta_true = np.log(small.p[small.param_index(params)])
    data, sigma = _data(small, theta_true, params, rng, missing=missing)
    lik = GaussianLikelihood(small, TS, data, sigma, params=params, **LIK_FS)
    theta = theta_true + np.array([0.1, -0.15, 0.05, 0.2])
    ll, g, F = lik.evaluate(theta)
    assert lik.n_solves == 1
    fresh = GaussianLikelihood(small, TS, data, sigma, params=params, **LIK_FS)
    fd = _fd_grad(fresh.loglik, theta)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7 * np.abs(g).max())
    # the three methods share the cached solve
    assert lik.loglik(theta) == ll and np.array_equal(lik.grad(theta), g)
    np.testing.assert_array_equal(lik.fisher(theta), F)
    assert lik.n_solves == 1
    # explicit Gaussian log-density over the observed points only
    y = lik.predict(theta)
    m = ~np.isnan(data)
    assert m.sum() == data.size - (3 if missing else 0)
    ll_hand = np.sum(-0.5 * ((data[m] - y[m]) / sigma[m]) ** 2 - np.log(np.sqrt(2 * np.pi) * sigma[m]))
    assert ll == pytest.approx(ll_hand, rel=1e-12)
    assert np.all(np.isfinite(g))


def test_log_transform_chain_rule(small):
    rng = np.random.default_rng(4)
    params = ["k1", "k3", "s"]
    theta = np.log(small.p[small.param_index(params)]) + 0.1
    data, sigma = _data(small, theta, params, rng)
    lik_log = GaussianLikelihood(small, TS, data, sigma, params=params, log=True, **LIK_FS)
    lik_lin = GaussianLikelihood(small, TS, data, sigma, params=params, log=False, **LIK_FS)
    p = np.exp(theta)
    ll1, g1, F1 = lik_log.evaluate(theta)
    ll2, g2, F2 = lik_lin.evaluate(p)
    assert ll1 == pytest.approx(ll2, rel=1e-12)
    np.testing.assert_allclose(g1, g2 * p, rtol=1e-10)
    np.testing.assert_allclose(F1, np.diag(p) @ F2 @ np.diag(p), rtol=1e-10)


def test_posthoc_methods_agree_with_fs(small):
    rng = np.random.default_rng(5)
    params = ["k1", "k2", "Km"]
    theta = np.log(small.p[small.param_index(params)])
    data, sigma = _data(small, theta, params, rng)
    ref = GaussianLikelihood(small, TS, data, sigma, params=params, **LIK_FS).evaluate(theta)
    for method in ("pbsr", "exp"):
        lik = GaussianLikelihood(small, TS, data, sigma, params=params, method=method, rtol=1e-9, atol=1e-11)
        ll, g, F = lik.evaluate(theta)
        assert ll == pytest.approx(ref[0], rel=1e-5)
        np.testing.assert_allclose(g, ref[1], rtol=2e-2, atol=2e-2 * np.abs(ref[1]).max())
        np.testing.assert_allclose(F, ref[2], rtol=2e-2, atol=2e-2 * np.abs(ref[2]).max())


def test_posthoc_state_solver_default_is_lsoda(small, monkeypatch):
    """Without ``solver=`` the post-hoc methods solve the states with LSODA, as the docstring says,
    not with sensitivities()' own default (Rodas5P since issue #41); a solver given is passed on."""
    import pbsens.sensitivity.posthoc as posthoc
    real, seen = posthoc.sensitivities, []

    def spy(*a, **kw):
        seen.append(kw.get("solver"))
        return real(*a, **kw)
    monkeypatch.setattr(posthoc, "sensitivities", spy)
    params = ["k1", "k2"]
    theta = np.log(small.p[small.param_index(params)])
    y = np.ones((TS.size, 2))
    GaussianLikelihood(small, TS, y, 1.0, params=params, method="exp2").evaluate(theta)
    GaussianLikelihood(small, TS, y, 1.0, params=params, method="exp2", solver="rodas5p").evaluate(theta)
    assert seen == ["LSODA", "rodas5p"]


# ------------------------------------------------------------------ prior and posterior
def test_prior_and_posterior(small):
    prior = NormalPrior([0.0, 1.0], [1.0, 2.0])
    th = np.array([0.5, -1.0])
    from scipy.stats import norm
    assert prior.logpdf(th) == pytest.approx(norm.logpdf(0.5, 0, 1) + norm.logpdf(-1.0, 1.0, 2.0))
    np.testing.assert_allclose(prior.grad(th), [-0.5, 0.5])
    np.testing.assert_allclose(prior.precision(), np.diag([1.0, 0.25]))

    rng = np.random.default_rng(6)
    params = ["k1", "k2"]
    theta = np.log(small.p[small.param_index(params)])
    data, sigma = _data(small, theta, params, rng)
    lik = GaussianLikelihood(small, TS, data, sigma, params=params, method="pbsr")
    post = LogPosterior(lik, NormalPrior(theta, 1.0))
    lp, g, G = post.evaluate(theta + 0.1)
    ll, gl, F = lik.evaluate(theta + 0.1)
    assert lp == pytest.approx(ll + post.prior.logpdf(theta + 0.1))
    np.testing.assert_allclose(g, gl - 0.1)
    np.testing.assert_allclose(G, F + np.eye(2))
    n = lik.n_solves
    post.logp(theta + 0.1), post.grad(theta + 0.1), post.metric(theta + 0.1)
    assert lik.n_solves == n
    with pytest.raises(PbsensError, match="prior"):
        LogPosterior(lik, NormalPrior(np.zeros(3), 1.0))


# ------------------------------------------------------------------ SMMALA
class GaussianTarget:
    """N(mu, Sigma) with a deliberately position-dependent metric ``c(theta) Sigma^-1``.

    Any positive definite metric leaves the target invariant when the MH ratio uses the
    reverse proposal density with the metric at theta*; with a position-dependent
    metric a wrong ratio biases the chain, so this target can catch that.
    """

    def __init__(self, mu, Sigma):
        self.mu = np.asarray(mu, float)
        self.Sigma = np.asarray(Sigma, float)
        self.P = np.linalg.inv(self.Sigma)
        self.dim = self.mu.size
        self.calls = 0

    def evaluate(self, theta):
        self.calls += 1
        d = theta - self.mu
        c = np.exp(1.5 * np.tanh(d[0] / np.sqrt(self.Sigma[0, 0])))
        return -0.5 * d @ self.P @ d, -self.P @ d, c * self.P


def _batch_se(x, n_batches=40):
    b = x[: x.size // n_batches * n_batches].reshape(n_batches, -1).mean(axis=1)
    return b.std(ddof=1) / np.sqrt(n_batches)


def test_smmala_samples_known_gaussian():
    mu = np.array([1.0, -2.0, 0.5])
    A = np.array([[1.0, 0.6, 0.0], [0.0, 0.5, 0.3], [0.2, 0.0, 2.0]])
    Sigma = A @ A.T
    target = GaussianTarget(mu, Sigma)
    res = smmala(target, mu + 3.0, 20000, burn_in=1000, seed=11, progress=False)
    assert isinstance(res, MCMCResult)
    assert res.chain.shape == (20000, 3) and res.logp.shape == (20000,)
    assert 0.4 < res.accept_rate < 0.85
    assert target.calls == 21001 == res.n_evaluations
    x = res.chain
    m = x.mean(axis=0)
    for i in range(3):
        se = _batch_se(x[:, i])
        assert abs(m[i] - mu[i]) < 4 * se, (i, m[i], mu[i], se)
    d = x - mu
    for i in range(3):
        for j in range(i, 3):
            prod = d[:, i] * d[:, j]
            se = _batch_se(prod)
            assert abs(prod.mean() - Sigma[i, j]) < 4 * se + 1e-3, (i, j, prod.mean(), Sigma[i, j], se)
    # same seed -> same chain
    res2 = smmala(GaussianTarget(mu, Sigma), mu + 3.0, 200, burn_in=50, seed=11, progress=False)
    res3 = smmala(GaussianTarget(mu, Sigma), mu + 3.0, 200, burn_in=50, seed=11, progress=False)
    np.testing.assert_array_equal(res2.chain, res3.chain)


def test_smmala_step_size_adaptation_reaches_target():
    target = GaussianTarget(np.zeros(2), np.eye(2))
    res = smmala(target, np.zeros(2), 3000, step_size=5.0, burn_in=1500, target_accept=0.6, seed=2,
                 progress=False)
    assert res.step_size < 5.0
    assert abs(res.accept_rate - 0.6) < 0.1
    assert res.step_size_trace.shape == (1500,)


class Failing:
    """Standard normal in 2-D; the 'solver' fails for theta[0] > 1, metric indefinite for theta[1] > 1."""

    dim = 2

    def evaluate(self, theta):
        if theta[0] > 1.0:
            raise SolverError("simulated solver failure")
        G = np.eye(2) if theta[1] <= 1.0 else np.diag([1.0, -1.0])
        return -0.5 * theta @ theta, -theta, G


def test_smmala_rejects_solver_failures_and_non_pd_metrics():
    res = smmala(Failing(), np.zeros(2), 2000, burn_in=200, seed=3, progress=False)
    assert res.n_failed > 0 and res.n_non_pd > 0
    assert np.all(res.chain[:, 0] <= 1.0) and np.all(res.chain[:, 1] <= 1.0)
    assert res.accept_rate > 0.2
    with pytest.raises(PbsensError, match="theta0"):
        smmala(Failing(), np.array([2.0, 0.0]), 10, progress=False)
    with pytest.raises(PbsensError, match="theta0"):
        smmala(Failing(), np.array([0.0, 2.0]), 10, progress=False)


def test_smmala_on_ode_posterior_end_to_end(small):
    rng = np.random.default_rng(7)
    params = ["k1", "k2", "s"]
    theta_true = np.log(small.p[small.param_index(params)])
    data, sigma = _data(small, theta_true, params, rng)
    lik = GaussianLikelihood(small, TS, data, sigma, params=params, method="pbsr")
    post = LogPosterior(lik, NormalPrior(theta_true, 1.0))
    res = smmala(post, theta_true, 60, burn_in=20, seed=0, progress=False)
    assert res.accept_rate > 0
    assert np.all(np.isfinite(res.chain)) and np.all(np.isfinite(res.logp))
    assert res.param_names == params
    assert lik.n_solves == res.n_evaluations


def test_ess_needs_arviz(monkeypatch):
    res = smmala(GaussianTarget(np.zeros(2), np.eye(2)), np.zeros(2), 200, seed=0, progress=False)
    monkeypatch.setitem(sys.modules, "arviz", None)
    with pytest.raises(PbsensError, match=r"pbsens\[mcmc\]"):
        res.ess()


def test_ess_with_arviz():
    """ArviZ is in the test extra: this must run, not skip."""
    res = smmala(GaussianTarget(np.zeros(2), np.eye(2)), np.zeros(2), 500, seed=0, progress=False)
    ess = res.ess()
    assert ess.shape == (2,) and np.all(ess > 10)


# ------------------------------------------------------------------ bad inputs
def test_likelihood_rejects_bad_inputs(small):
    good = dict(t=TS, data=np.ones((TS.size, 2)), sigma=0.1)

    def make(**kw):
        args = dict(good, **kw)
        return GaussianLikelihood(small, args.pop("t"), args.pop("data"), args.pop("sigma"), **args)

    cases = [
        (dict(sigma=0.0), "sigma"), (dict(sigma=-1.0), "sigma"), (dict(sigma=np.nan), "sigma"),
        (dict(sigma=np.full((TS.size, 2), np.nan)), "sigma"), (dict(sigma=np.ones(3)), "sigma"),
        (dict(data=np.ones((TS.size, 3))), "data"), (dict(data=np.ones(TS.size)), "data"),
        (dict(data=np.full((TS.size, 2), np.nan)), "data"), (dict(data=np.full((TS.size, 2), np.inf)), "data"),
        (dict(t=TS[::-1]), "'t'"), (dict(t=np.r_[TS[0], TS]), "'t'"), (dict(t=TS - 1.0), "'t'"),
        (dict(t=TS, t0=1.0), "'t'"), (dict(method="bogus"), "method"), (dict(params=["nope"]), "params"),
        (dict(params=["k1", "k1"]), "params"), (dict(params=[]), "params"), (dict(rtol=-1.0), "rtol"),
        (dict(options={"t_eval": TS}), "options"),
    ]
    for kw, name in cases:
        with pytest.raises(PbsensError, match=name):
            make(**kw)
    lik = make(params=["k1", "k2"])
    for bad in (np.zeros(3), [np.nan, 0.0], "x"):
        with pytest.raises(PbsensError, match="theta"):
            lik.evaluate(bad)
    # overflowing parameters are a solver failure (a sampler rejects them), not a crash
    with pytest.raises(SolverError):
        lik.evaluate(np.array([800.0, 0.0]))


def test_prior_and_sampler_reject_bad_inputs():
    for kw, name in ((dict(mean=[0, 1], sd=0.0), "sd"), (dict(mean=[0, 1], sd=[1, -1]), "sd"),
                     (dict(mean=[0, 1], sd=[1, 1, 1]), "sd"), (dict(mean=[np.nan], sd=1), "mean")):
        with pytest.raises(PbsensError, match=name):
            NormalPrior(**kw)
    target = GaussianTarget(np.zeros(2), np.eye(2))
    for kw, name in ((dict(n_samples=0), "n_samples"), (dict(burn_in=-1), "burn_in"),
                     (dict(step_size=0.0), "step_size"), (dict(target_accept=1.5), "target_accept"),
                     (dict(theta0=np.zeros(3)), "theta0"), (dict(theta0=[np.nan, 0]), "theta0")):
        args = dict(theta0=np.zeros(2), n_samples=10, progress=False)
        args.update(kw)
        with pytest.raises(PbsensError, match=name):
            smmala(target, **args)
    with pytest.raises(PbsensError, match="posterior"):
        smmala(object(), np.zeros(2), 10)
