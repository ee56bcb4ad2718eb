"""Parallel chains and batches: pbsens.sample, pbsens.parallel, the ``pbsens sample`` command.

Short chains on Boehm (tests/data/petab) in local spawned processes and on a dask
LocalCluster: the InferenceData's structure, ``lp`` against the problem's own
log-likelihood + log-prior at the draws, reproducibility from the seed across
backends, and a chain whose worker process dies (or raises) mid-run being
reported with its seed while the other chain is kept. Batches against one-by-one
evaluation in this process.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("petab.v1")
az = pytest.importorskip("arviz")

import pbsens  # noqa: E402
import pbsens.errors  # noqa: E402
import pbsens.petab as pbpetab  # noqa: E402
from pbsens import batches, parallel  # noqa: E402
from pbsens.inference import chains  # noqa: E402
from pbsens.errors import PbsensError  # noqa: E402

BOEHM = Path(__file__).parent / "data" / "petab" / "Boehm_JProteomeRes2014" / "Boehm_JProteomeRes2014.yaml"
KW = dict(chains=2, draws=16, burn_in=12, seed=20261123, progress=False)


@pytest.fixture(scope="module")
def boehm():
    return pbpetab.load(BOEHM)


@pytest.fixture(scope="module")
def in_process(boehm):
    return pbsens.sample(boehm, n_workers=1, **KW)


@pytest.fixture(scope="module")
def killed(boehm):
    """Two chains in two worker processes; chain 1's process exits at iteration 25."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(chains, "_FAULT", dict(chain=1, at=25, mode="exit"))
        with pytest.warns(RuntimeWarning, match=r"chain 1 \(seed 20261123") as rec:
            idata = pbsens.sample(boehm, n_workers=2, **{**KW, "draws": 30})
    return idata, [str(w.message) for w in rec]


def test_inference_data_structure(boehm, in_process):
    idata = in_process
    assert set(idata.groups()) == {"posterior", "sample_stats", "observed_data"}
    post = idata.posterior
    assert list(post.data_vars) == boehm.parameter_ids
    assert dict(post.sizes) == {"chain": 2, "draw": 16}
    st = idata.sample_stats
    for v in ("lp", "accepted", "acceptance_rate", "step_size", "solver_failed"):
        assert st[v].dims == ("chain", "draw"), v
    assert np.all((st.acceptance_rate >= 0) & (st.acceptance_rate <= 1))
    assert np.all(st.step_size > 0)
    m = boehm.petab_problem.measurement_df
    np.testing.assert_array_equal(idata.observed_data.measurement.values, m["measurement"].to_numpy(float))
    assert post.attrs["seed"] == KW["seed"] and post.attrs["method"] == "exp2"
    assert json.loads(post.attrs["failed_chains"]) == []
    # the two chains are different streams
    assert not np.array_equal(post.k_phos.sel(chain=0), post.k_phos.sel(chain=1))


def test_lp_is_the_log_posterior_at_the_draws(boehm, in_process):
    post, st = in_process.posterior, in_process.sample_stats
    for c, d in ((0, 0), (1, 15), (0, 9)):
        theta = np.array([float(post[p].sel(chain=c, draw=d)) for p in boehm.parameter_ids])
        ref = boehm.llh(theta) + boehm.log_prior(theta)
        assert abs(float(st.lp.sel(chain=c, draw=d)) - ref) < 1e-6 * max(1.0, abs(ref))
        assert np.all(theta >= boehm.bounds[:, 0]) and np.all(theta <= boehm.bounds[:, 1])


def test_same_seed_same_chains_in_processes_and_killed_chain_reported(in_process, killed):
    idata, messages = killed
    post = idata.posterior
    assert list(post.chain.values) == [0]
    # chain 0 ran in a worker process with 30 draws; its first 12 + 16 iterations follow the same
    # random stream as in this process (burn-in adaptation is identical up to then)
    ref = in_process.posterior
    a = np.array([post[p].sel(chain=0).values[:16] for p in post.data_vars])
    b = np.array([ref[p].sel(chain=0).values for p in ref.data_vars])
    np.testing.assert_array_equal(a, b)
    assert any("exited with code 17" in m and "partial_chain_1" in m for m in messages)
    failed = json.loads(post.attrs["failed_chains"])
    assert [f["chain"] for f in failed] == [1] and failed[0]["seed"] == KW["seed"]
    part = idata["partial_chain_1"]
    assert part.sizes["iteration"] == 25 and np.all(np.isfinite(part.lp.values))


def test_dask_local_cluster_same_draws_and_raising_chain_kept_apart(boehm, in_process, monkeypatch):
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(chains, "_FAULT", dict(chain=1, at=14, mode="raise"))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        with pytest.warns(RuntimeWarning, match="test fault in chain 1"):
            idata = pbsens.sample(boehm, client=client, **KW)
    post = idata.posterior
    assert list(post.chain.values) == [0]
    for p in boehm.parameter_ids:
        np.testing.assert_array_equal(post[p].sel(chain=0).values, in_process.posterior[p].sel(chain=0).values)
    part = idata["partial_chain_1"]
    assert part.sizes["iteration"] == 14
    # its last two iterations (after 12 of burn-in) are the in-process chain 1's first two draws
    for p in boehm.parameter_ids:
        np.testing.assert_array_equal(part[p].values[12:14], in_process.posterior[p].sel(chain=1).values[:2])


def test_convergence_findings_recorded_in_attrs(in_process):
    """2 chains x 16 draws cannot reach a bulk ESS of 200: the finding is kept with the run."""
    for ds in (in_process.posterior, in_process.sample_stats):
        msgs = json.loads(ds.attrs["convergence_warnings"])
        assert any(m.startswith("bulk ESS below 200") for m in msgs), msgs
    assert json.loads(in_process.posterior.attrs["support"]) == [[-5.0] * 9, [5.0] * 9]
    from pbsens.inference.chains import check_convergence
    assert [str(w) for w in check_convergence(in_process)] == msgs      # the same rules on the stored run


def test_chains_stuck_on_boehms_bound_warn(boehm):
    """Boehm from its nominal point (k_exp_hetero 3e-5 of the width above its lower bound), sampled as given
    with the bare Fisher metric: every proposal leaves the bounds, the chains never move."""
    with pytest.warns(pbsens.errors.ConvergenceWarning) as rec:
        idata = pbsens.sample(boehm, chains=2, draws=24, burn_in=12, seed=7, n_workers=1, progress=False,
                              transform=False, metric_floor=None, box_metric=False, metric="fisher")
    found = {w.message.kind: w.message for w in rec if isinstance(w.message, pbsens.errors.ConvergenceWarning)}
    assert found["stuck"].chains == [0, 1] and "acceptance 0.0%" in str(found["stuck"])
    assert "transform=True" in str(found["stuck"])
    assert found["bound"].parameters == ["k_exp_hetero"] and found["bound"].chains == [0, 1]
    assert "lower bound -5" in str(found["bound"])
    assert "rhat" not in found          # R-hat is undefined for chains that never move, not reported as a number
    assert len(json.loads(idata.posterior.attrs["convergence_warnings"])) == len(found)


def test_evaluate_many_matches_one_by_one(boehm):
    rng = np.random.default_rng(5)
    thetas = boehm.x_nominal + 0.02 * rng.standard_normal((6, boehm.dim))
    res = batches.evaluate_many(boehm, thetas, n_workers=2)
    assert len(res) == 6
    for t, r in zip(thetas, res):
        ref = boehm.evaluate(t)
        assert r.llh == pytest.approx(ref.llh, rel=1e-12, abs=1e-10)
        np.testing.assert_allclose(r.gradient, ref.gradient, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(r.fim, ref.fim, rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(r.theta, t)


def test_evaluate_many_on_dask_equals_serial_in_input_order(boehm):
    """dask (2 worker threads, several chunks, one gather) returns what evaluate gives here,
    row by row in input order; a failing item in a dask chunk is kept apart."""
    distributed = pytest.importorskip("distributed")
    rng = np.random.default_rng(11)
    thetas = boehm.x_nominal + 0.03 * rng.standard_normal((7, boehm.dim))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        res = batches.evaluate_many(boehm, thetas, client=client, chunk_size=2)
        default = batches.evaluate_many(boehm, thetas[::-1], client=client)
        out = parallel.map_tasks(divmod, 7, [1, 0, 2, 3, 5], client=client, chunk_size=2)
    assert len(res) == 7 and len(default) == 7
    for t, r, d in zip(thetas, res, default[::-1]):
        ref = boehm.evaluate(t)
        np.testing.assert_array_equal(r.theta, t)
        np.testing.assert_array_equal(d.theta, t)
        for x in (r, d):
            assert x.llh == ref.llh
            np.testing.assert_array_equal(x.gradient, ref.gradient)
            np.testing.assert_array_equal(x.fim, ref.fim)
    assert out[0] == (7, 0) and out[2] == (3, 1) and out[3] == (2, 1) and out[4] == (1, 2)
    assert isinstance(out[1], parallel.TaskFailure) and out[1].index == 1 and "ZeroDivisionError" in out[1].error


def test_map_reports_failed_items_and_keeps_the_others():
    out = parallel.map_tasks(divmod, 7, [1, 0, 2, 3], n_workers=2, chunk_size=2, processes=True)
    assert out[0] == (7, 0) and out[2] == (3, 1) and out[3] == (2, 1)
    f = out[1]
    assert isinstance(f, parallel.TaskFailure) and f.index == 1 and f.item == 0
    assert "ZeroDivisionError" in f.error and not f.killed


def test_evaluate_many_bad_input(boehm):
    with pytest.raises(PbsensError, match="'thetas' must have shape"):
        batches.evaluate_many(boehm, np.zeros((3, boehm.dim + 1)))
    with pytest.raises(PbsensError, match="'n_workers'"):
        batches.evaluate_many(boehm, np.tile(boehm.x_nominal, (2, 1)), n_workers=0)
    with pytest.raises(PbsensError, match="'errors'"):
        batches.evaluate_many(boehm, np.tile(boehm.x_nominal, (2, 1)), errors="ignore")


def test_sensitivities_many_matches_one_by_one():
    model = pbsens.load_model("PKA")
    rng = np.random.default_rng(1)
    ps = model.p * np.exp(0.1 * rng.standard_normal((3, model.n_params)))
    kw = dict(t_span=(0.0, 5.0), t_eval=np.linspace(0.5, 5.0, 4), method="exp2", rtol=1e-8, atol=1e-10)
    res = pbsens.sensitivities_many(model, ps, n_workers=2, **kw)
    for p, r in zip(ps, res):
        ref = pbsens.sensitivities(model, p=p, **kw)
        np.testing.assert_allclose(r.S, ref.S, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(r.p, p)


def test_sample_bad_arguments(boehm):
    with pytest.raises(PbsensError, match="'chains'"):
        pbsens.sample(boehm, chains=0)
    with pytest.raises(PbsensError, match="'method'"):
        pbsens.sample(boehm, method="rk4")
    with pytest.raises(PbsensError, match="'theta0'"):
        pbsens.sample(boehm, chains=2, theta0=np.zeros(3))
    with pytest.raises(PbsensError, match="'client'"):
        pbsens.sample(boehm, chains=1, draws=2, client=42)


def test_cli_sample_writes_outputs_and_refuses_to_overwrite(tmp_path, capsys):
    import json
    from pbsens.cli import main
    out = tmp_path / "run"
    args = ["sample", str(BOEHM), "--chains", "2", "--draws", "8", "--burn-in", "4", "--seed", "3",
            "--workers", "1", "--out", str(out)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(args) == 0
    for f in ("posterior.nc", "summary.tsv", "trace.png", "rank.png", "pair.png"):
        assert (out / f).stat().st_size > 0, f
    idata = az.from_netcdf(out / "posterior.nc")
    assert dict(idata.posterior.sizes) == {"chain": 2, "draw": 8}
    # 8 draws are no sample: the convergence checks are printed after the summary table
    checks = json.loads(idata.posterior.attrs["convergence_warnings"])
    printed = [line[len("CHECK     "):] for line in capsys.readouterr().out.splitlines() if line.startswith("CHECK")]
    assert checks and printed == checks
    header = (out / "summary.tsv").read_text().splitlines()[0].split("\t")
    for col in ("mean", "sd", "r_hat", "ess_bulk", "ess_tail", "ess_bulk_per_s"):
        assert col in header
    before = (out / "posterior.nc").stat().st_mtime_ns
    assert main(args) == 1     # non-empty --out without --force
    assert (out / "posterior.nc").stat().st_mtime_ns == before


class _Flaky:
    """A problem whose evaluation fails for theta[0] < 0 (as a failing solve would)."""

    dim = 2

    def evaluate(self, theta, **options):
        from pbsens.errors import SolverError
        if theta[0] < 0:
            raise SolverError(f"condition 'c1': step size too small at theta = {theta.tolist()}")
        return float(theta.sum())


def test_evaluate_many_failed_evaluation_raise_or_keep():
    thetas = np.array([[1.0, 2.0], [-1.0, 0.5], [3.0, 4.0]])
    with pytest.raises(parallel.BatchError, match=r"1 of 3 evaluations failed; first: item 1 \(theta = "
                                                  r"\[-1\. +0\.5\]\): SolverError") as exc:
        batches.evaluate_many(_Flaky(), thetas, n_workers=1)
    res = exc.value.results
    assert res[0] == 3.0 and res[2] == 7.0 and isinstance(res[1], parallel.TaskFailure)
    with pytest.warns(RuntimeWarning, match="1 of 3 evaluations failed"):
        kept = batches.evaluate_many(_Flaky(), thetas, n_workers=1, errors="keep")
    assert kept[1].index == 1 and np.array_equal(kept[1].item, thetas[1])


# ------------------------------------------------------------------ sampling in unbounded coordinates
from pbsens.inference.transform import BoundedTransform, UnboundedPosterior  # noqa: E402

LO = np.array([1.0, -0.5, 0.3, -np.inf, -np.inf])
HI = np.array([3.0, 2.0, np.inf, 1.5, np.inf])


class _Gauss:
    """A correlated Gaussian log-density in theta (no support restriction), analytic gradient."""

    dim = 5

    def __init__(self):
        A = np.random.default_rng(3).standard_normal((5, 5))
        self.P = A @ A.T + 5 * np.eye(5)
        self.m = np.array([1.7, 0.2, 1.0, 0.4, -0.3])

    def evaluate(self, th):
        r = th - self.m
        return -0.5 * float(r @ self.P @ r), -self.P @ r, self.P.copy()


def _fd(f, x, h=1e-6):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


def test_transform_round_trip_and_log_jacobian_against_numerical_derivative():
    tr = BoundedTransform(LO, HI)
    z = np.array([-1.3, 0.7, 0.4, -0.2, 2.5])
    th = tr.to_bounded(z)
    assert np.all(th > LO) and np.all(th < HI)
    np.testing.assert_allclose(tr.to_unbounded(th), z, rtol=1e-12, atol=1e-12)
    # log |dtheta_i / dz_i| against central differences of theta(z)
    J_num = np.diag(np.array([(tr.to_bounded(z + 1e-6 * e) - tr.to_bounded(z - 1e-6 * e)) / 2e-6
                              for e in np.eye(5)]).T)
    logj, dlogj, curv = tr.log_jacobian(z)
    assert logj == pytest.approx(float(np.sum(np.log(np.abs(J_num)))), abs=1e-7)
    np.testing.assert_allclose(tr.jacobian_diag(z), J_num, rtol=1e-7)
    np.testing.assert_allclose(dlogj, _fd(lambda v: tr.log_jacobian(v)[0], z), atol=1e-7)
    np.testing.assert_allclose(curv, -np.diag(np.array([_fd(lambda v: tr.log_jacobian(v)[1][i], z)
                                                        for i in range(5)])), atol=1e-6)
    with pytest.raises(PbsensError, match=r"'theta'\[0\]"):
        tr.to_unbounded(np.array([0.5, 0, 1, 0, 0]))


def test_transformed_density_integrates_like_the_original():
    """A change of variables keeps the mass: int pi_z dz = int_lb^ub pi dtheta (1-D, quadrature)."""
    from scipy.integrate import quad
    lo, hi = 1.0, 3.0
    tr_post = UnboundedPosterior(_Gauss1(), [lo], [hi], ridge=0.0)
    mass_z = quad(lambda z: np.exp(tr_post.evaluate(np.array([z]))[0]), -40, 40, limit=200)[0]
    mass_t = quad(lambda t: np.exp(_Gauss1().evaluate(np.array([t]))[0]), lo, hi)[0]
    assert mass_z == pytest.approx(mass_t, rel=1e-8)


class _Gauss1:
    dim = 1

    def evaluate(self, th):
        r = th[0] - 1.4
        return -0.5 * r * r / 0.36, np.array([-r / 0.36]), np.array([[1 / 0.36]])


def test_transformed_gradient_and_metric_chain_rule():
    post = UnboundedPosterior(_Gauss(), LO, HI, ridge=0.0)
    z = np.array([-0.4, 1.1, -0.8, 0.3, 0.6])
    lp, g, G = post.evaluate(z)
    np.testing.assert_allclose(g, _fd(lambda v: post.evaluate(v)[0], z), rtol=1e-6, atol=1e-6)
    # for a Gaussian in theta, minus the Hessian of log pi_z is J P J + diag(-d2 log J) - diag(grad_theta * d2theta)
    # (the last term, the second derivative of theta(z) times the theta-gradient, is not in the metric);
    # check the metric's definition: J P J + diag(2 s (1 - s)) for the doubly bounded parameters
    tr = post.transform
    J = tr.jacobian_diag(z)
    expect = J[:, None] * _Gauss().P * J[None, :] + np.diag(tr.log_jacobian(z)[2])
    np.testing.assert_allclose(G, expect, rtol=1e-12)
    assert post.log_posterior_theta(lp, z) == pytest.approx(_Gauss().evaluate(tr.to_bounded(z))[0], rel=1e-12)


class _Beta2:
    """theta_0 ~ Beta(2, 5) on [1, 3]; theta_1 ~ N(0, 1) truncated to [-0.5, 2]; exact negative Hessians."""

    dim = 2
    a, b = 2.0, 5.0

    def evaluate(self, th):
        x = (th[0] - 1.0) / 2.0
        if not (0 < x < 1) or not (-0.5 <= th[1] <= 2.0):
            return -np.inf, np.zeros(2), np.eye(2)
        lp = (self.a - 1) * np.log(x) + (self.b - 1) * np.log1p(-x) - 0.5 * th[1] ** 2
        g = np.array([((self.a - 1) / x - (self.b - 1) / (1 - x)) / 2.0, -th[1]])
        h = ((self.a - 1) / x ** 2 + (self.b - 1) / (1 - x) ** 2) / 4.0
        return lp, g, np.diag([h, 1.0])


def test_smmala_in_unbounded_coordinates_samples_bounded_targets():
    from scipy import stats
    post = UnboundedPosterior(_Beta2(), [1.0, -0.5], [3.0, 2.0])
    res = pbsens.smmala(post, post.transform.to_unbounded(np.array([1.5, 0.0])), 6000, burn_in=1000, seed=11,
                        progress=False)
    th = np.array([post.transform.to_bounded(z) for z in res.chain])
    beta = stats.beta(2, 5, loc=1.0, scale=2.0)
    tn = stats.truncnorm(-0.5, 2.0)
    ess = np.array([az.ess(np.ascontiguousarray(th[:, j])) for j in range(2)])
    assert np.all(ess > 500), ess
    for j, dist in enumerate((beta, tn)):
        mcse = np.sqrt(dist.var() / ess[j])
        assert abs(th[:, j].mean() - dist.mean()) < 4 * mcse, (j, th[:, j].mean(), dist.mean(), mcse)
        # variance: MC error of the sample variance ~ var * sqrt(2 / ess) (plus excess kurtosis; 5 sigma)
        assert abs(th[:, j].var() - dist.var()) < 5 * dist.var() * np.sqrt(2.0 / ess[j]), j
    assert 0.4 < res.accept_rate < 0.95


class _CorrelatedGaussian:
    """N(m, C) with rho = 0.95 and standard deviations 1 and 3, whose metric says nothing (0.01 I):
    the case of a Fisher information blind to a direction the posterior spreads along."""
    dim = 2
    m = np.array([1.0, -2.0])
    C = np.array([[1.0, 0.95 * 3.0], [0.95 * 3.0, 9.0]])

    def evaluate(self, th):
        r = th - self.m
        P = np.linalg.inv(self.C)
        return -0.5 * float(r @ P @ r), -P @ r, 0.01 * np.eye(2)


@pytest.mark.parametrize("metric", ["fisher+cov", "cov"])
def test_burn_in_covariance_metric_recovers_a_correlated_gaussian(metric):
    target = _CorrelatedGaussian()
    res = pbsens.smmala(target, np.array([0.0, 0.0]), 8000, burn_in=2000, seed=5, progress=False, metric=metric)
    X = res.chain
    ess = np.array([az.ess(np.ascontiguousarray(X[:, j])) for j in range(2)])
    assert np.all(ess > 400), ess
    sd = np.sqrt(np.diag(target.C))
    # mean: 4 MC standard errors; covariance entries: 5 x the MC error of a sample (co)variance
    # of n_eff Gaussian draws, sqrt((C_ij^2 + C_ii C_jj) / n_eff)
    assert np.all(np.abs(X.mean(axis=0) - target.m) < 4 * sd / np.sqrt(ess)), X.mean(axis=0)
    C_hat = np.cov(X, rowvar=False)
    n_eff = ess.min()
    tol = 5 * np.sqrt((target.C ** 2 + np.outer(np.diag(target.C), np.diag(target.C))) / n_eff)
    assert np.all(np.abs(C_hat - target.C) < tol), (C_hat, tol)
    assert 0.3 < res.accept_rate < 0.95


def test_metric_option_bad_values():
    with pytest.raises(PbsensError, match="'metric'"):
        pbsens.smmala(_CorrelatedGaussian(), np.zeros(2), 10, burn_in=10, metric="euclid", progress=False)
    with pytest.raises(PbsensError, match="'burn_in'"):
        pbsens.smmala(_CorrelatedGaussian(), np.zeros(2), 10, burn_in=2, metric="cov", progress=False)
