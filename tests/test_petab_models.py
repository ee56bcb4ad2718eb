"""Measurement models, priors, the sampler interface and the command line of PEtab problems.

References: petab's own ``calculate_single_llh`` (the PEtab reference implementation)
for the noise models, closed-form densities (scipy.stats) for the priors, and
finite differences for their derivatives.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import pandas as pd  # noqa: E402
import petab.v1 as petab_v1  # noqa: E402  (the "petab" extra; CI installs it)
import petabtests  # noqa: E402  (pip install --no-deps petabtests==0.0.1, as the README says)
from scipy import stats  # noqa: E402

import pbsens  # noqa: E402
import pbsens.petab as pbpetab  # noqa: E402
from pbsens.cli import main  # noqa: E402
from pbsens.problems import noise  # noqa: E402
from pbsens.problems.priors import Priors, dunscale, unscale  # noqa: E402

CASES_DIR = Path(petabtests.__file__).parent / "cases" / "v1.0.0" / "sbml"

TRAFOS = ["lin", "log", "log10"]
DISTS = ["normal", "laplace"]


@pytest.mark.parametrize("trafo", TRAFOS)
@pytest.mark.parametrize("dist", DISTS)
def test_noise_terms_match_petab_reference_and_finite_differences(trafo, dist):
    from petab.v1.calculate import calculate_single_llh
    rng = np.random.default_rng(1)
    m = rng.uniform(0.5, 3.0, 7)
    y = rng.uniform(0.5, 3.0, 7)
    s = rng.uniform(0.2, 1.5, 7)
    t = np.full(7, noise.TRANSFORMATIONS[trafo])
    d = np.full(7, noise.DISTRIBUTIONS[dist])
    llh, chi2, gy, gs, wy, ws = noise.terms(m, y, s, t, d)
    ref = np.array([calculate_single_llh(mi, yi, trafo, dist, si) for yi, mi, si in zip(y, m, s)])
    assert np.allclose(llh, ref, rtol=1e-12, atol=1e-12)
    h = 1e-6
    fy = (noise.terms(m, y + h, s, t, d)[0] - noise.terms(m, y - h, s, t, d)[0]) / (2 * h)
    fs = (noise.terms(m, y, s + h, t, d)[0] - noise.terms(m, y, s - h, t, d)[0]) / (2 * h)
    assert np.allclose(gy, fy, rtol=1e-6, atol=1e-8)
    assert np.allclose(gs, fs, rtol=1e-6, atol=1e-8)
    # Fisher weights: the expected squared score of one measurement, by quadrature over m's density
    i = 0
    tf = noise.transform
    mu = tf(y[i:i + 1], t[:1])[0]
    grid = np.linspace(mu - 40 * s[i], mu + 40 * s[i], 400001)
    dens = stats.norm.pdf(grid, mu, s[i]) if dist == "normal" else stats.laplace.pdf(grid, mu, s[i])
    r = (grid - mu) / s[i]
    score_mu = r / s[i] if dist == "normal" else np.sign(r) / s[i]
    score_s = (r * r - 1) / s[i] if dist == "normal" else (np.abs(r) - 1) / s[i]
    dT = {"lin": 1.0, "log": 1.0 / y[i], "log10": 1.0 / (y[i] * np.log(10))}[trafo]
    assert np.isclose(np.trapezoid(dens * (score_mu * dT) ** 2, grid), wy[i], rtol=1e-4)
    assert np.isclose(np.trapezoid(dens * score_s ** 2, grid), ws[i], rtol=1e-4)


def test_priors_match_scipy_densities_and_finite_differences():
    types = ["normal", "laplace", "uniform", "logNormal", "logLaplace", "parameterScaleNormal",
             "parameterScaleLaplace", "parameterScaleUniform", None]
    params = [(1.0, 0.5), (1.2, 0.3), (0.1, 5.0), (0.2, 0.7), (0.1, 0.4), (0.3, 0.2), (-0.1, 0.5),
              (-1.0, 1.0), None]
    scales = np.array([0, 1, 2, 1, 2, 2, 1, 2, 0])
    lower = np.full(9, -2.0)
    upper = np.full(9, 2.0)
    pr = Priors(types, params, scales, lower, upper, [f"p{i}" for i in range(9)])
    th = np.array([0.8, 0.1, -0.2, 0.4, 0.3, 0.1, 0.2, 0.5, 1.0])
    p = unscale(th, scales)
    ref = (stats.norm.logpdf(p[0], 1.0, 0.5) + stats.laplace.logpdf(p[1], 1.2, 0.3)
           + stats.uniform.logpdf(p[2], 0.1, 4.9) + stats.lognorm.logpdf(p[3], 0.7, scale=np.exp(0.2))
           + stats.laplace.logpdf(np.log(p[4]), 0.1, 0.4) - np.log(p[4])
           + stats.norm.logpdf(th[5], 0.3, 0.2) + stats.laplace.logpdf(th[6], -0.1, 0.5)
           + stats.uniform.logpdf(th[7], -1.0, 2.0))
    lp, g = pr.logpdf_and_grad(th)
    assert np.isclose(lp, ref, rtol=1e-12)
    h = 1e-6
    fd = np.array([(pr.logpdf(th + h * e) - pr.logpdf(th - h * e)) / (2 * h) for e in np.eye(9)])
    assert np.allclose(g, fd, rtol=1e-6, atol=1e-8)
    assert pr.logpdf(np.where(np.arange(9) == 8, 2.5, th)) == -np.inf      # outside the bounds
    assert np.allclose(dunscale(th, scales), [(unscale(th + h * e, scales) - unscale(th - h * e, scales))[i] / (2 * h)
                                              for i, e in enumerate(np.eye(9))], rtol=1e-6)


def _case(tmp_path, case):
    d = tmp_path / case
    shutil.copytree(CASES_DIR / case, d, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    return d, d / f"_{case}.yaml"


def test_laplace_log_noise_and_priors_through_a_problem(tmp_path):
    """Case 0001 with laplace noise on log10, log-scaled parameters and a normal prior: llh equals
    petab's reference calculation on our simulations, gradient equals finite differences."""
    d, y = _case(tmp_path, "0001")
    obs = pd.read_csv(d / "_observables.tsv", sep="\t")
    obs["observableTransformation"] = "log10"
    obs["noiseDistribution"] = "laplace"
    obs.to_csv(d / "_observables.tsv", sep="\t", index=False)
    par = pd.read_csv(d / "_parameters.tsv", sep="\t")
    par.loc[par["parameterId"] == "b0", "nominalValue"] = 0.2
    par["parameterScale"] = "log"
    par["lowerBound"] = 1e-3
    par["objectivePriorType"] = ["normal", "", "parameterScaleNormal", ""]
    par["objectivePriorParameters"] = ["1;0.5", "", "-0.2;0.3", ""]
    par.to_csv(d / "_parameters.tsv", sep="\t", index=False)
    problem = pbpetab.load(y)
    assert problem.scales == ["log"] * 4
    res = problem.evaluate(method="fs", rtol=1e-11, atol=1e-13)
    pp = petab_v1.Problem.from_yaml(str(y))
    sim = res.simulations.copy()
    ref = petab_v1.calculate_llh(pp.measurement_df, sim, pp.observable_df, pp.parameter_df)
    assert np.isclose(res.llh, ref, rtol=1e-10)
    th = problem.x_nominal
    h = 1e-5
    fd = np.array([(problem.llh(th + h * e, rtol=1e-12, atol=1e-14)
                    - problem.llh(th - h * e, rtol=1e-12, atol=1e-14)) / (2 * h) for e in np.eye(problem.dim)])
    assert np.max(np.abs(res.gradient - fd)) < 1e-5 * np.max(np.abs(fd))
    # prior: normal on a0 = exp(theta0) (linear value), parameterScaleNormal on theta2
    p0 = np.exp(th[0])
    expected = stats.norm.logpdf(p0, 1.0, 0.5) + stats.norm.logpdf(th[2], -0.2, 0.3)
    assert np.isclose(problem.log_prior(th), expected, rtol=1e-12)


def test_log_posterior_drives_smmala_and_rejects_outside_bounds():
    problem = pbpetab.load(CASES_DIR / "0001" / "_0001.yaml")
    post = problem.log_posterior(method="exp2")
    th = problem.x_nominal.copy()
    th[1] = 0.05      # b0 = 0 is on the bound; start inside
    lp, g, G = post.evaluate(th)
    assert np.isclose(lp, problem.llh(th) + problem.log_prior(th))
    outside = th.copy()
    outside[0] = -1.0
    assert post.evaluate(outside)[0] == -np.inf
    chain = pbsens.smmala(post, th, 20, burn_in=10, seed=3, progress=False)
    assert chain.chain.shape == (20, problem.dim)
    assert np.all(chain.chain >= problem.bounds[:, 0]) and np.all(chain.chain <= problem.bounds[:, 1])


def test_cli_petab_prints_llh_and_writes_json_and_plot(tmp_path, capsys):
    case = CASES_DIR / "0002" / "_0002.yaml"
    out_json, out_png = tmp_path / "r.json", tmp_path / "fit.png"
    theta = tmp_path / "theta.json"
    theta.write_text(json.dumps({"k1": 0.7}))
    assert main(["petab", str(case), "--method", "fs", "--theta", str(theta), "--json", str(out_json),
                 "--plot", str(out_png)]) == 0
    text = capsys.readouterr().out
    problem = pbpetab.load(case)
    th = problem.x_nominal.copy()
    th[problem.parameter_ids.index("k1")] = 0.7
    expected = problem.evaluate(th, method="fs")
    data = json.loads(out_json.read_text())
    assert np.isclose(data["llh"], expected.llh, rtol=1e-6)
    assert f"{data['llh']:.10g}" in text and "c0" in text and "c1" in text
    assert out_png.stat().st_size > 5000
    assert main(["petab", str(tmp_path / "missing.yaml")]) == 1


def test_solver_failure_names_the_condition_and_gives_minus_inf_to_samplers():
    problem = pbpetab.load(CASES_DIR / "0002" / "_0002.yaml")
    with pytest.raises(pbsens.SolverError, match="condition 'c0'"):
        problem.evaluate(max_nfev=3)          # the state solver gives up after 3 right-hand sides
    lp, g, G = problem.log_posterior(max_nfev=3).evaluate(problem.x_nominal)
    assert lp == -np.inf and np.all(g == 0)


def test_every_post_hoc_method_and_fs_give_the_gradient():
    from pbsens.sensitivity.posthoc import METHODS
    problem = pbpetab.load(CASES_DIR / "0002" / "_0002.yaml")
    th = problem.x_nominal + 0.05
    h = 1e-5
    fd = np.array([(problem.llh(th + h * e, rtol=1e-12, atol=1e-14)
                    - problem.llh(th - h * e, rtol=1e-12, atol=1e-14)) / (2 * h) for e in np.eye(problem.dim)])
    for method in list(METHODS) + ["fs"]:
        g = problem.evaluate(th, method=method).gradient
        assert np.max(np.abs(g - fd)) < 1e-2 * np.max(np.abs(fd)), method


def test_steady_state_measurement_at_t_inf_matches_analytic(tmp_path):
    """A <-> B (k1, k2), A(0) = a0, B(0) = b0: A(inf) = (a0 + b0) k2 / (k1 + k2)."""
    d, y = _case(tmp_path, "0001")
    meas = pd.read_csv(d / "_measurements.tsv", sep="\t")
    meas["time"] = meas["time"].astype(float)
    meas.loc[len(meas)] = ["obs_a", "c0", np.inf, 0.4]
    meas.to_csv(d / "_measurements.tsv", sep="\t", index=False)
    par = pd.read_csv(d / "_parameters.tsv", sep="\t")
    par.loc[par["parameterId"] == "b0", "nominalValue"] = 0.3
    par.to_csv(d / "_parameters.tsv", sep="\t", index=False)
    problem = pbpetab.load(y)
    a0, b0, k1, k2 = problem.x_nominal           # all on the linear scale here
    res = problem.evaluate(method="fs")
    sim = res.simulations["simulation"].to_numpy()
    assert np.isclose(sim[-1], (a0 + b0) * k2 / (k1 + k2), rtol=1e-7)
    # d llh / d theta of the steady-state row alone: -(y - m)/sigma^2 dy/dtheta
    yss, m, s = sim[-1], 0.4, 0.5
    dy = np.array([k2 / (k1 + k2), k2 / (k1 + k2), -(a0 + b0) * k2 / (k1 + k2) ** 2,
                   (a0 + b0) * k1 / (k1 + k2) ** 2])
    without = pbpetab.load(CASES_DIR / "0001" / "_0001.yaml")
    th = problem.x_nominal
    g_rest = without.evaluate(th, method="fs").gradient
    assert np.allclose(res.gradient - g_rest, (m - yss) / s ** 2 * dy, rtol=1e-6, atol=1e-9)
