"""Convergence diagnostics of sampling runs: ConvergenceWarning from pbsens.smmala and pbsens.sample.

Toy posteriors (a Gaussian restricted to a box that declares its support, one with a
metric blind to a flat direction) for :func:`pbsens.smmala`'s own checks: a start on
a bound, a chain that never moves (a step far too large, a step size that collapses),
a transform when the posterior declares its support, and no warning for a well-mixed
chain. Synthetic draws for :func:`pbsens.inference.chains.check_convergence` (the
rules :func:`pbsens.sample` warns with): chains that disagree (R-hat), a slowly mixing
AR(1) chain (bulk ESS), a chain stuck on a bound, independent draws (nothing).
"""
from __future__ import annotations

import inspect
import json
import warnings

import numpy as np
import pytest

import pbsens
from pbsens.errors import ConvergenceWarning, PbsensWarning

az = pytest.importorskip("arviz")

from pbsens.inference.chains import check_convergence  # noqa: E402


def _convergence(rec):
    return [w.message for w in rec if issubclass(w.category, ConvergenceWarning)]


def _run(*args, **kw):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        res = pbsens.smmala(*args, progress=False, **kw)
    return res, _convergence(rec)


class _BoxGauss:
    """N(m, diag(s^2)) restricted to [0, 10]^2 (log posterior -inf outside), exact metric."""

    dim = 2
    param_names = ["a", "b"]
    support = (np.zeros(2), np.full(2, 10.0))
    m = np.array([1.0, 5.0])
    s = np.array([0.5, 1.0])

    def evaluate(self, th):
        if np.any(th < 0) or np.any(th > 10):
            return -np.inf, np.zeros(2), np.eye(2)
        r = (th - self.m) / self.s
        return -0.5 * float(r @ r), -r / self.s, np.diag(1 / self.s ** 2)


class _Gauss:
    """N(0, I) without bounds."""

    dim = 3

    def evaluate(self, th):
        return -0.5 * float(th @ th), -th, np.eye(3)


class _BlindMetric(_BoxGauss):
    """b is flat on [0, 10] but the metric says its precision is 1e-10 (a Fisher information blind
    to a direction, as Boehm's): proposals in b are ~1e5 wide, nearly all land outside the box."""

    def evaluate(self, th):
        if np.any(th < 0) or np.any(th > 10):
            return -np.inf, np.zeros(2), np.eye(2)
        r = (th[0] - 1.0) / 0.5
        return -0.5 * r * r, np.array([-r / 0.5, 0.0]), np.diag([4.0, 1e-10])


def test_public_signatures_have_no_private_parameters():
    for fn in (pbsens.sample, pbsens.smmala):
        private = [p for p in inspect.signature(fn).parameters if p.startswith("_")]
        assert private == [], (fn.__name__, private)


def test_convergence_warning_is_a_pbsens_warning_with_its_subjects():
    w = ConvergenceWarning("x", kind="rhat", parameters=["k"], chains=[np.int64(2)])
    assert isinstance(w, PbsensWarning) and isinstance(w, UserWarning)
    assert (w.kind, w.parameters, w.chains) == ("rhat", ["k"], [2])
    import pickle
    w2 = pickle.loads(pickle.dumps(w))
    assert (str(w2), w2.kind, w2.parameters, w2.chains) == ("x", "rhat", ["k"], [2])


def test_well_mixed_gaussian_chain_does_not_warn():
    res, found = _run(_Gauss(), np.zeros(3), 1000, seed=4)
    assert found == [] and res.convergence_warnings == []
    assert res.transform == "none" and 0.3 < res.accept_rate < 0.95


def test_posterior_declaring_its_support_is_sampled_in_unbounded_coordinates():
    """Interior start: no warning, chain on the parameter scale inside the box, mean close to m."""
    res, found = _run(_BoxGauss(), np.array([2.0, 4.0]), 1000, seed=1)
    assert found == []
    assert res.transform == "logit" and res.unbounded["chain"].shape == res.chain.shape
    assert np.all((res.chain > 0) & (res.chain < 10))
    assert np.all(np.abs(res.chain.mean(axis=0) - _BoxGauss.m) < 0.25)
    # logp is log pi(theta) at the reported draws (not the density of the unbounded coordinates)
    assert res.logp[-1] == pytest.approx(_BoxGauss().evaluate(res.chain[-1])[0], rel=1e-10, abs=1e-10)


def test_own_transform_is_left_alone():
    """A posterior that is already an UnboundedPosterior: no second transform, same draws as the core."""
    from pbsens.inference.smmala import _run as core
    from pbsens.inference.transform import UnboundedPosterior
    post = UnboundedPosterior(_BoxGauss(), *_BoxGauss.support)
    z0 = post.transform.to_unbounded(np.array([2.0, 4.0]))
    res, found = _run(post, z0, 1000, seed=2)
    ref = core(post, z0, 1000, seed=2, progress=False)
    assert res.transform == "none" and found == []
    np.testing.assert_array_equal(res.chain, ref.chain)
    np.testing.assert_array_equal(res.logp, ref.logp)


def test_start_on_a_bound_warns_with_and_without_transform():
    res, found = _run(_BoxGauss(), np.array([0.0, 5.0]), 1000, seed=1)
    assert [w.kind for w in found] == ["start"]
    assert found[0].parameters == ["a"] and "logit" in str(found[0]) and "lower bound 0" in str(found[0])
    assert res.transform == "logit" and np.all(res.chain > 0)
    res, found = _run(_BoxGauss(), np.array([0.0, 5.0]), 300, seed=1, transform=False)
    assert found[0].kind == "start" and found[0].parameters == ["a"]
    assert "transform=True" in str(found[0]) and "UnboundedPosterior" in str(found[0])
    assert res.transform == "none"


def test_chain_that_never_moves_warns():
    """A fixed step far too large: nearly every proposal is rejected."""
    res, found = _run(_Gauss(), np.zeros(3), 200, step_size=50.0, adapt=False, seed=3)
    assert res.accept_rate < 0.05
    assert [w.kind for w in found] == ["stuck"]
    msg = str(found[0])
    assert "acceptance" in msg and "hardly moves" in msg and "start from" in msg


def test_tiny_step_warns():
    res, found = _run(_Gauss(), np.zeros(3), 200, step_size=1e-4, adapt=False, seed=3)
    assert res.accept_rate > 0.9          # accepted, but going nowhere
    assert [w.kind for w in found] == ["stuck"] and "larger step_size" in str(found[0])


def test_metric_blind_to_a_direction_start_on_bound_collapses_the_step_and_warns():
    """Sampled as given from a start on b's bound, Boehm's failure in miniature: proposals leave the box,
    the adaptation shrinks eps by orders of magnitude and the chain freezes. The transform avoids it."""
    res, found = _run(_BlindMetric(), np.array([1.0, 0.0]), 200, seed=5, transform=False)
    kinds = [w.kind for w in found]
    assert kinds[0] == "start" and found[0].parameters == ["b"]
    assert "stuck" in kinds and "bound" in kinds
    stuck = found[kinds.index("stuck")]
    assert "adapted from" in str(stuck) and "not finite" in str(stuck)
    assert res.step_size < 1e-2 * res.step_size_initial
    assert found[kinds.index("bound")].parameters == ["b"]
    res, found = _run(_BlindMetric(), np.array([1.0, 5.0]), 1500, seed=5)
    assert res.transform == "logit" and found == [] and res.accept_rate > 0.3


def test_transform_true_needs_a_support_and_theta0_inside_it():
    with pytest.raises(pbsens.PbsensError, match="'transform'=True needs"):
        pbsens.smmala(_Gauss(), np.zeros(3), 10, transform=True, progress=False)
    with pytest.raises(pbsens.PbsensError, match=r"'theta0'\[1\] \(b\) = 11.0 is outside"):
        pbsens.smmala(_BoxGauss(), np.array([1.0, 11.0]), 10, progress=False)
    with pytest.raises(pbsens.PbsensError, match="'transform'"):
        pbsens.smmala(_BoxGauss(), np.array([1.0, 1.0]), 10, transform="yes", progress=False)


class _HalfNormalLik:
    """log-likelihood of N(0.3, 1) in theta_0 and N(0, 1) in theta_1; theta_0 is meant to be >= 0."""

    dim = 2
    param_names = ["k", "c"]

    def evaluate(self, th):
        r = th - np.array([0.3, 0.0])
        return -0.5 * float(r @ r), -r, np.eye(2)


def test_log_posterior_with_support_is_sampled_inside_it():
    from pbsens.inference import LogPosterior
    post = LogPosterior(_HalfNormalLik(), support=([0.0, -np.inf], [np.inf, np.inf]))
    assert post.evaluate(np.array([-0.1, 0.0]))[0] == -np.inf
    res, found = _run(post, np.array([0.5, 0.0]), 1500, seed=6)
    assert res.transform == "logit" and found == []
    assert np.all(res.chain[:, 0] > 0) and res.param_names == ["k", "c"]
    # the truncated normal's mean: 0.3 + phi(0.3) / Phi(0.3), within a few Monte Carlo errors
    from scipy import stats
    m = 0.3 + stats.norm.pdf(0.3) / stats.norm.cdf(0.3)
    assert abs(res.chain[:, 0].mean() - m) < 0.15
    with pytest.raises(pbsens.PbsensError, match="'support'"):
        LogPosterior(_HalfNormalLik(), support=([0.0, 1.0], [1.0, 0.5]))


# ------------------------------------------------------------------ check_convergence (pbsens.sample's rules)
IDS = ["a", "k_phos", "b"]


def _idata(X, accepted=None, step=None, lower=None, upper=None, step0=1.0, burn_in=100):
    """InferenceData shaped like pbsens.sample's: X (chains, draws, d)."""
    C, N, d = X.shape
    attrs = {"parameter_ids": json.dumps(IDS[:d]), "step_size_initial": step0, "burn_in": burn_in}
    if lower is not None:
        attrs["support"] = json.dumps([list(lower), list(upper)])
    stats = {"accepted": np.ones((C, N), bool) if accepted is None else accepted,
             "step_size": np.full((C, N), 0.8) if step is None else step,
             "solver_failed": np.zeros((C, N), bool)}
    import xarray as xr
    coords = {"chain": np.arange(C), "draw": np.arange(N)}
    post = xr.Dataset({p: (("chain", "draw"), X[:, :, j]) for j, p in enumerate(IDS[:d])}, coords=coords,
                      attrs=attrs)
    return az.InferenceData(posterior=post, sample_stats=xr.Dataset(
        {k: (("chain", "draw"), v) for k, v in stats.items()}, coords=coords))


def test_independent_draws_pass_every_check():
    X = np.random.default_rng(0).standard_normal((4, 500, 3))
    assert check_convergence(_idata(X, lower=[-10] * 3, upper=[10] * 3)) == []


def test_disagreeing_chains_warn_with_rhat_naming_parameter_and_chain():
    X = np.random.default_rng(1).standard_normal((4, 500, 3))
    X[2, :, 1] += 1.0                       # chain 2 samples k_phos elsewhere
    found = check_convergence(_idata(X))
    kinds = [w.kind for w in found]
    assert kinds[0] == "rhat" and set(kinds) <= {"rhat", "ess"}
    assert all(w.parameters == ["k_phos"] for w in found)      # the rank-normalised bulk ESS drops too
    w = found[0]
    assert w.chains == [2]
    assert "k_phos" in str(w) and "chain 2 furthest" in str(w) and "1.01" in str(w)
    # R-hat as arviz computes it, rank-normalised split
    assert f"{float(az.rhat(X[:, :, 1])):.3g}" in str(w)


def test_single_chain_that_drifts_warns_with_its_bulk_ess_not_rhat():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((1, 600, 1)) + np.linspace(0, 6, 600)[None, :, None]
    found = check_convergence(_idata(X))
    assert [w.kind for w in found] == ["ess"]
    assert found[0].parameters == ["a"] and found[0].chains == [0] and "below 100" in str(found[0])


def test_slow_mixing_warns_on_bulk_ess_below_100_per_chain():
    rng = np.random.default_rng(3)
    X = np.empty((4, 400, 2))
    X[:, 0] = rng.standard_normal((4, 2))
    for i in range(1, 400):                 # AR(1), rho 0.97 in a, independent in k_phos
        X[:, i, 0] = 0.97 * X[:, i - 1, 0] + np.sqrt(1 - 0.97 ** 2) * rng.standard_normal(4)
        X[:, i, 1] = rng.standard_normal(4)
    found = check_convergence(_idata(X))
    ess = [w for w in found if w.kind == "ess"]
    assert len(ess) == 1 and ess[0].parameters == ["a"] and ess[0].chains == [0, 1, 2, 3]
    assert "below 400" in str(ess[0]) and "more draws" in str(ess[0])


def test_stuck_chain_on_a_bound_warns_naming_chain_and_parameter():
    rng = np.random.default_rng(4)
    X = rng.uniform(0.2, 0.8, size=(3, 200, 2))
    X[1] = [1e-7, 0.5]                      # chain 1 never left b's lower bound... as 'a'
    acc = np.ones((3, 200), bool)
    acc[1] = False
    step = np.full((3, 200), 0.9)
    step[1] = 3e-5                          # collapsed from 1.0
    found = check_convergence(_idata(X, accepted=acc, step=step, lower=[0, 0], upper=[1, 1]))
    kinds = {w.kind: w for w in found}
    assert kinds["stuck"].chains == [1] and "acceptance 0.0%" in str(kinds["stuck"])
    assert "adapted from 1 down to 3e-05" in str(kinds["stuck"])
    assert kinds["bound"].parameters == ["a"] and kinds["bound"].chains == [1]
    assert "lower bound 0 in chain 1 (100% of the draws)" in str(kinds["bound"])
    # the other chains are fine: only chain 1 is named anywhere but in R-hat/ESS
    assert all(w.chains == [1] for w in found if w.kind in ("stuck", "bound"))


def test_few_draws_skip_rhat_and_ess():
    X = np.random.default_rng(5).standard_normal((2, 3, 2))
    assert check_convergence(_idata(X)) == []
