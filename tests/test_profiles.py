"""Likelihood profiles (pbsens.profile): exact on a linear-Gaussian problem, and on Boehm each
profile point agrees with a brute-force re-optimisation from several starts."""
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chi2

import pbsens
import pbsens.petab
from pbsens.calibration import FitError

sys.path.insert(0, str(Path(__file__).parent))
from fit_problems import BOEHM, linear_gaussian, linear_mle, linear_problem  # noqa: E402


@pytest.fixture(scope="module")
def linear(tmp_path_factory):
    problem, _, folder = linear_problem(tmp_path_factory.mktemp("linear"))
    return problem, folder


def test_linear_gaussian_profile_is_the_analytic_parabola(linear):
    """For a linear model with known sigma the profile of a is llh* - (a - a*)^2 / (2 var(a*)), and the
    95 % interval is a* -+ sqrt(chi2_1(0.95) var(a*))."""
    problem, folder = linear
    theta_hat, cov = linear_mle(folder)
    llh_hat = problem.llh(theta_hat)
    prof = pbsens.profile(problem, theta_hat, ["a", "b"], method="exp2")
    half = math.sqrt(chi2.ppf(0.95, 1))
    for j, pid in enumerate(["a", "b"]):
        p = prof[pid]
        assert len(p.theta) >= 5
        expected = llh_hat - (np.asarray(p.theta) - theta_hat[j]) ** 2 / (2 * cov[j, j])
        np.testing.assert_allclose(p.llh, expected, atol=1e-6)
        lo, hi = p.interval
        w = half * math.sqrt(cov[j, j])
        # linear interpolation between profile points: exact to the parabola's curvature over one step
        assert lo == pytest.approx(theta_hat[j] - w, rel=0, abs=2e-3 * w)
        assert hi == pytest.approx(theta_hat[j] + w, rel=0, abs=2e-3 * w)
        # the other parameter is re-optimised: the conditional MLE of b given a
        k = 1 - j
        for t, x in zip(p.theta, p.x):
            cond = theta_hat[k] + cov[k, j] / cov[j, j] * (t - theta_hat[j])
            assert x[k] == pytest.approx(cond, abs=1e-6)
    assert set(prof.to_dataframe()["parameter"]) == {"a", "b"}


def test_profile_reaches_the_bound_as_an_open_interval(tmp_path):
    yaml = linear_gaussian(tmp_path, lower=-2.2, upper=10.0)     # b's lower end (-2.45) lies beyond the bound
    problem = pbsens.petab.load(str(yaml))
    theta_hat, _ = linear_mle(tmp_path)
    prof = pbsens.profile(problem, theta_hat, ["b"], method="exp2")
    assert prof["b"].interval[0] == -math.inf
    assert prof["b"].theta[0] == -2.2
    assert math.isfinite(prof["b"].interval[1])


def test_profile_bad_arguments(linear):
    problem, _ = linear
    with pytest.raises(FitError, match="parameters"):
        pbsens.profile(problem, np.zeros(2), ["c"])
    with pytest.raises(FitError, match="level"):
        pbsens.profile(problem, np.zeros(2), level=1.5)
    with pytest.raises(FitError, match="shape"):
        pbsens.profile(problem, np.zeros(3))


def test_boehm_profile_agrees_with_brute_force_reoptimisation():
    """Each profile point of Boehm's first parameter: the profile's llh is within 0.1 of the best of
    re-optimisations (theta_i fixed) from 4 random starts and the profile's own point."""
    from pbsens.calibration.objective import Objective
    from pbsens.calibration.profiles import _optimise_fixed
    problem = pbsens.petab.load(str(BOEHM))
    x_opt = np.array([-1.5691065914525186, -4.999999999999978, -2.209835738741343, -1.7858738740857256,
                      4.999999998654432, 4.197709839501711, 0.5856818014480578, 0.8188447688685815,
                      0.4985823166688698])           # Boehm's optimum (llh -138.22)
    prof = pbsens.profile(problem, x_opt, [0], method="fs", max_points=6)
    p = prof[problem.parameter_ids[0]]
    assert prof.best_llh == pytest.approx(-138.222, abs=2e-3)
    lb, ub = problem.bounds[:, 0], problem.bounds[:, 1]
    rng = np.random.default_rng(0)
    obj = Objective(problem, method="fs")
    idx = np.linspace(0, len(p.theta) - 1, 4).round().astype(int)
    for i in idx:
        t = p.theta[i]
        best = -math.inf
        for z0 in [np.asarray(p.x[i])] + [lb + rng.random(lb.size) * (ub - lb) for _ in range(4)]:
            _, f, _ = _optimise_fixed(obj, 0, t, z0, lb, ub, "fides", {})
            best = max(best, -f)
        assert p.llh[i] >= best - 0.1, (t, p.llh[i], best)
        assert p.llh[i] <= best + 1e-3


def test_profile_stopped_before_the_threshold_has_nan_ends(linear):
    problem, folder = linear
    theta_hat, _ = linear_mle(folder)
    prof = pbsens.profile(problem, theta_hat, ["a"], method="exp2", max_points=1, step_max=1e-3)
    lo, hi = prof["a"].interval
    assert math.isnan(lo) and math.isnan(hi)
