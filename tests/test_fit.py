"""Multi-start fits (pbsens.fit), their results, resume after a kill, and ``pbsens fit``.

The accuracy reference is a linear-Gaussian problem (tests/fit_problems.py) whose maximum-
likelihood estimate is the ordinary least-squares solution, computed here with numpy.
"""
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import pbsens
import pbsens.petab
from pbsens.calibration import FitError, FitResult, draw_starts
from pbsens.errors import SolverError

sys.path.insert(0, str(Path(__file__).parent))
from fit_problems import BOEHM, linear_gaussian, linear_problem  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def linear(tmp_path_factory):
    return linear_problem(tmp_path_factory.mktemp("linear"))


@pytest.mark.parametrize("optimizer", ["fides", "least_squares", "L-BFGS-B"])
def test_linear_gaussian_mle_from_every_start(linear, optimizer):
    problem, theta_hat, _ = linear
    res = pbsens.fit(problem, 8, optimizer=optimizer, method="exp2", seed=3, n_workers=1, progress=False)
    assert len(res) == 8 and res.n_failed == 0
    for s in res.starts:
        np.testing.assert_allclose(s.x, theta_hat, atol=1e-6, rtol=0)
    assert res.n_converged() == 8
    np.testing.assert_allclose(res.x, theta_hat, atol=1e-6)
    # the llh reported is the problem's llh at the end point
    assert res.best.llh == pytest.approx(problem.llh(res.best.x), abs=1e-9)


def test_exp2_fs_policy_ends_with_fs(linear):
    problem, theta_hat, _ = linear
    res = pbsens.fit(problem, 2, method="exp2+fs", seed=1, n_workers=1, progress=False)
    assert res.info["method"] == "exp2+fs" and res.info["refine"] is None     # fs already ends every start
    for s in res.starts:
        assert [p["method"] for p in s.phases] == ["exp2", "fs"] and not s.refined
        np.testing.assert_allclose(s.x, theta_hat, atol=1e-6)


def test_default_refines_the_best_starts_with_fs(linear):
    """The default: every start with exp2, then the best five again from their end points with fs,
    their records holding both phases and the summed counts."""
    problem, theta_hat, _ = linear
    res = pbsens.fit(problem, 8, seed=1, n_workers=1, progress=False)
    assert (res.info["method"], res.info["refine"]) == ("exp2", "fs")
    refined = [s for s in res.starts if s.refined]
    assert len(refined) == 5
    plain = pbsens.fit(problem, 8, seed=1, n_workers=1, progress=False, refine=None)
    before = {s.index: s for s in plain.starts}
    assert {s.index for s in refined} == {s.index for s in sorted(plain.starts, key=lambda s: (s.fval, s.index))[:5]}
    for s in refined:
        assert [(p["method"], p["refine"]) for p in s.phases] == [("exp2", False), ("fs", True)]
        assert s.n_iter == before[s.index].n_iter + s.phases[-1]["n_iter"]
        assert s.fval <= before[s.index].fval
        np.testing.assert_allclose(s.x, theta_hat, atol=1e-6)
    assert all(not s.refined and [p["method"] for p in s.phases] == ["exp2"] for s in res.starts if s not in refined)


def test_refine_candidates_use_the_objective_before_refinement():
    from pbsens.calibration.multistart import refine_candidates
    from pbsens.calibration.result import StartResult

    def rec(k, fval, refined_to=None):
        phases = [{"method": "exp2", "fval": fval, "refine": False}]
        if refined_to is not None:
            phases.append({"method": "fs", "fval": refined_to, "refine": True})
        end = fval if refined_to is None else refined_to
        return StartResult(index=k, x0=[0.0], x=[0.0], llh=-end, fval=end, n_iter=1, n_eval=1, n_grad=1,
                           n_failed=0, cpu=0.0, wall=0.0, status=1, message="", phases=phases,
                           refined=refined_to is not None)

    recs = [rec(0, 10.0), rec(1, 10.4), rec(2, 10.9), rec(3, 12.0), rec(4, math.inf), rec(5, 10.2)]
    assert refine_candidates(recs, 5, 1.0) == [0, 5, 1, 2]
    assert refine_candidates(recs, 2, 1.0) == [0, 5]
    assert refine_candidates(recs, 5, 0.0) == [0]
    assert refine_candidates(recs, 0, 1.0) == []
    # start 2 refined to 3.0 in a first run: the choice on resume is the same as before it
    recs[2] = rec(2, 10.9, refined_to=3.0)
    assert refine_candidates(recs, 5, 1.0) == [0, 5, 1, 2]


def test_refinement_interrupted_resumes_to_the_uninterrupted_result(linear, tmp_path, monkeypatch):
    from pbsens.calibration import multistart
    problem = linear[0]
    reference = pbsens.fit(problem, 7, seed=5, n_workers=1, progress=False)

    def stop(*a, **k):
        raise KeyboardInterrupt

    out = tmp_path / "fit"
    monkeypatch.setattr(multistart, "_refine", stop)
    with pytest.raises(KeyboardInterrupt):
        pbsens.fit(problem, 7, seed=5, n_workers=1, progress=False, out=out)
    monkeypatch.undo()
    on_disk = [json.loads((out / "starts" / f).read_text()) for f in os.listdir(out / "starts")]
    assert len(on_disk) == 7 and not any(r["refined"] for r in on_disk)
    resumed = pbsens.fit(problem, 7, seed=5, n_workers=1, progress=False, out=out, resume=True)
    assert resumed.info["resumed"] == 7
    ref = {s.index: s for s in reference.starts}
    assert {s.index for s in resumed.starts if s.refined} == {s.index for s in reference.starts if s.refined}
    for s in resumed.starts:
        assert s.refined == ref[s.index].refined
        np.testing.assert_allclose(s.x, ref[s.index].x, rtol=0, atol=1e-12)
    disk = {json.loads((out / "starts" / f).read_text())["index"]: json.loads((out / "starts" / f).read_text())
            for f in os.listdir(out / "starts")}
    assert sum(r["refined"] for r in disk.values()) == 5           # the refined records replaced the files
    # a resumed fit that was refined already refines nothing again
    again = pbsens.fit(problem, 7, seed=5, n_workers=1, progress=False, out=out, resume=True)
    assert [s.n_iter for s in again.starts] == [s.n_iter for s in resumed.starts]


def test_starts_reproducible_by_seed_within_bounds(linear):
    problem = linear[0]
    for sampling in ("uniform", "lhs"):
        a = draw_starts(problem, 20, seed=7, sampling=sampling)
        b = draw_starts(problem, 20, seed=7, sampling=sampling)
        c = draw_starts(problem, 20, seed=8, sampling=sampling)
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)
        assert np.all(a >= problem.bounds[:, 0]) and np.all(a <= problem.bounds[:, 1])
    # a Latin hypercube has one point in each of the n slices of every parameter's range
    lhs = draw_starts(problem, 20, seed=1, sampling="lhs")
    lb, ub = problem.bounds[:, 0], problem.bounds[:, 1]
    slices = np.floor((lhs - lb) / (ub - lb) * 20).astype(int)
    for j in range(problem.dim):
        assert sorted(slices[:, j]) == list(range(20))


def test_same_seed_same_fit(linear):
    problem = linear[0]
    a = pbsens.fit(problem, 4, method="exp2", seed=11, n_workers=1, progress=False)
    b = pbsens.fit(problem, 4, method="exp2", seed=11, n_workers=1, progress=False)
    assert [s.x0 for s in a.starts] == [s.x0 for s in b.starts]
    assert [s.x for s in a.starts] == [s.x for s in b.starts]
    assert a.info["seed"] == 11


def test_failed_starts_counted_not_fatal(linear, monkeypatch):
    problem, theta_hat, _ = linear
    real = type(problem).evaluate

    def flaky(self, theta=None, **kw):
        if theta is not None and np.asarray(theta)[0] > 5.0:     # the simulation "fails" there
            raise SolverError("test: integration failed")
        return real(self, theta, **kw)

    monkeypatch.setattr(type(problem), "evaluate", flaky)
    starts = np.array([[7.0, 0.0], [0.0, 0.0], [9.0, 1.0], [-3.0, 2.0]])
    res = pbsens.fit(problem, starts=starts, method="exp2", n_workers=1, progress=False)
    assert res.n_failed == 2
    failed = [s for s in res.starts if not math.isfinite(s.fval)]
    assert sorted(s.index for s in failed) == [0, 2]
    assert all("failed" in s.message for s in failed)
    ok = [s for s in res.starts if math.isfinite(s.fval)]
    for s in ok:
        np.testing.assert_allclose(s.x, theta_hat, atol=1e-6)
    assert res.best.index in (1, 3)
    assert "2 failed" in repr(res)


def test_overflowing_fisher_information_is_a_failed_evaluation_not_an_aborted_start(linear, monkeypatch):
    # Fujita, start 57 of 100: a finite llh and gradient with an infinite FIM (dy/dtheta ~ 1e200,
    # squared) made fides raise "non-finite ... hessian" and ended the start; the optimiser must
    # see a failed evaluation instead and step back to where the model is tame
    import dataclasses
    problem, theta_hat, _ = linear
    real = type(problem).evaluate

    calls = []

    def overflowing(self, theta=None, **kw):
        r = real(self, theta, **kw)
        if kw.get("sensitivities", True):
            calls.append(1)
            if len(calls) == 2:         # the first trial step of the start, whatever the point
                return dataclasses.replace(r, fim=np.full_like(r.fim, np.inf))
        return r

    monkeypatch.setattr(type(problem), "evaluate", overflowing)
    from pbsens.calibration.objective import Objective
    obj = Objective(problem, method="exp2")
    obj.fun_grad_hess(np.array([3.0, 0.0]))
    f, _, _ = obj.fun_grad_hess(np.array([3.0, 1.0]))
    assert f == math.inf and obj.n_failed == 1
    calls.clear()
    res = pbsens.fit(problem, starts=np.array([[7.0, 4.0]]), method="exp2", refine=None, n_workers=1,
                     progress=False)
    assert len(calls) > 2 and res.n_failed == 0
    for s in res.starts:
        np.testing.assert_allclose(s.x, theta_hat, atol=1e-6)


def test_result_table_save_load(linear, tmp_path):
    problem = linear[0]
    res = pbsens.fit(problem, 3, method="exp2", seed=2, n_workers=1, progress=False)
    df = res.to_dataframe()
    assert list(df["llh"]) == sorted(df["llh"], reverse=True)
    assert {"a", "b", "n_iter", "cpu", "status", "message"} <= set(df.columns)
    path = res.save(tmp_path / "fit.json")
    back = FitResult.load(path)
    assert [s.x for s in back.starts] == [s.x for s in res.starts]
    assert back.parameter_ids == ["a", "b"]
    with pytest.raises(FitError, match="exists"):
        res.save(path)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(FitError, match="not a pbsens fit"):
        FitResult.load(tmp_path / "bad.json")


def test_bad_refine_arguments(linear):
    problem = linear[0]
    for kw, word in [({"refine": "exp2+fs"}, "'refine'"), ({"refine": "nope"}, "'refine'"),
                     ({"refine_starts": -1}, "'refine_starts'"), ({"refine_starts": 2.5}, "'refine_starts'"),
                     ({"refine_within": float("nan")}, "'refine_within'"), ({"refine_within": -1}, "'refine_within'")]:
        with pytest.raises(FitError, match=word):
            pbsens.fit(problem, 2, seed=0, n_workers=1, progress=False, **kw)


def test_bad_arguments(linear, tmp_path):
    problem = linear[0]
    with pytest.raises(FitError, match="optimizer"):
        pbsens.fit(problem, 2, optimizer="nelder-mead")
    with pytest.raises(FitError, match="method"):
        pbsens.fit(problem, 2, method="euler")
    with pytest.raises(FitError, match="n_starts"):
        pbsens.fit(problem, 0)
    with pytest.raises(FitError, match="starts"):
        pbsens.fit(problem, starts=np.array([[100.0, 0.0]]))
    with pytest.raises(FitError, match="resume"):
        pbsens.fit(problem, 2, resume=True)
    (tmp_path / "x.txt").write_text("mine")
    with pytest.raises(FitError, match="not empty"):
        pbsens.fit(problem, 2, out=tmp_path, n_workers=1)
    assert (tmp_path / "x.txt").read_text() == "mine"


def test_out_folder_refused_without_resume_and_resume_checks_settings(linear, tmp_path):
    problem = linear[0]
    out = tmp_path / "fit"
    first = pbsens.fit(problem, 3, method="exp2", seed=5, n_workers=1, out=out, progress=False)
    assert sorted(os.listdir(out / "starts")) == [f"start_0000{k}.json" for k in range(3)]
    with pytest.raises(FitError, match="already holds a fit"):
        pbsens.fit(problem, 3, method="exp2", seed=5, n_workers=1, out=out)
    with pytest.raises(FitError, match="seed"):
        pbsens.fit(problem, 3, method="exp2", seed=6, n_workers=1, out=out, resume=True)
    again = pbsens.fit(problem, 3, method="exp2", seed=5, n_workers=1, out=out, resume=True, progress=False)
    assert again.info["resumed"] == 3
    assert [s.x for s in again.starts] == [s.x for s in first.starts]


def test_least_squares_refuses_laplace_noise(tmp_path):
    yaml = linear_gaussian(tmp_path)
    obs = (tmp_path / "observables.tsv").read_text().replace("normal", "laplace")
    (tmp_path / "observables.tsv").write_text(obs)
    problem = pbsens.petab.load(str(yaml))
    with pytest.raises(FitError, match="Laplace"):
        pbsens.fit(problem, 2, optimizer="least_squares", n_workers=1)


def test_least_squares_objective_is_minus_llh_with_estimated_sigma():
    """Boehm estimates its noise parameters: 1/2 |res|^2 (with the sigma residuals) differs from -llh by a
    constant, and the residual Jacobian is the derivative of the residuals (central differences)."""
    from pbsens.calibration import Objective
    problem = pbsens.petab.load(str(BOEHM))
    obj = Objective(problem, method="fs")
    x1 = problem.x_nominal.copy()
    x2 = x1 + 0.05
    res1, jac1 = obj.residuals(x1)
    res2, _ = obj.residuals(x2)
    assert res1.size > problem.petab_problem.measurement_df.shape[0]      # sigma residuals appended
    c1 = 0.5 * res1 @ res1 + problem.llh(x1)
    c2 = 0.5 * res2 @ res2 + problem.llh(x2)
    assert c1 == pytest.approx(c2, rel=1e-9, abs=1e-6)
    h = 1e-5
    for j in (0, problem.dim - 1):
        e = np.zeros(problem.dim)
        e[j] = h
        fd = (obj.residuals(x1 + e)[0] - obj.residuals(x1 - e)[0]) / (2 * h)
        np.testing.assert_allclose(jac1[:, j], fd, rtol=1e-4, atol=1e-5 * np.abs(fd).max())


_KILL_SCRIPT = """
import sys, pbsens, pbsens.petab
p = pbsens.petab.load(sys.argv[1])
pbsens.fit(p, 6, method="exp2", seed=4, n_workers=1, out=sys.argv[2], resume=True, progress=False)
"""


def test_killed_fit_resumes_to_the_uninterrupted_result(tmp_path):
    """A fit SIGKILLed after some starts ended continues with resume=True and ends with the same
    records as an uninterrupted run with the same seed."""
    problem = pbsens.petab.load(str(BOEHM))
    reference = pbsens.fit(problem, 6, method="exp2", seed=4, n_workers=1, progress=False)
    out = tmp_path / "fit"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", _KILL_SCRIPT, str(BOEHM), str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    try:
        while time.time() < deadline:
            n = len(os.listdir(out / "starts")) if (out / "starts").is_dir() else 0
            if n >= 2 or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the fit ended before it could be killed: {proc.stderr.read()[-2000:]!r}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    done_before = {json.loads((out / "starts" / f).read_text())["index"] for f in os.listdir(out / "starts")
                   if f.endswith(".json")}
    assert 2 <= len(done_before) < 6
    resumed = pbsens.fit(problem, 6, method="exp2", seed=4, n_workers=1, out=out, resume=True, progress=False)
    assert resumed.info["resumed"] == len(done_before)
    ref = {s.index: s for s in reference.starts}
    for s in resumed.starts:
        assert s.x0 == ref[s.index].x0
        np.testing.assert_allclose(s.x, ref[s.index].x, rtol=0, atol=1e-12)
        assert s.llh == pytest.approx(ref[s.index].llh, abs=1e-10)
    assert FitResult.load(out).best.llh == pytest.approx(reference.best.llh, abs=1e-10)


def test_fit_in_worker_processes_equals_in_process(linear):
    problem = linear[0]
    a = pbsens.fit(problem, 4, method="exp2", seed=9, n_workers=1, progress=False)
    b = pbsens.fit(problem, 4, method="exp2", seed=9, n_workers=2, progress=False)
    assert [s.x for s in a.starts] == [s.x for s in b.starts]


def test_worker_death_is_a_failed_start_that_resume_reruns(linear, tmp_path, monkeypatch):
    from pbsens.calibration import multistart
    problem = linear[0]
    out = tmp_path / "fit"
    monkeypatch.setitem(multistart._FAULT, "at", 1)
    res = pbsens.fit(problem, 3, method="exp2", seed=2, n_workers=2, out=out, progress=False)
    bad = [s for s in res.starts if s.index == 1][0]
    assert bad.status == -98 and "worker" in bad.message and res.n_failed == 1
    monkeypatch.delitem(multistart._FAULT, "at")
    again = pbsens.fit(problem, 3, method="exp2", seed=2, n_workers=2, out=out, resume=True, progress=False)
    assert again.n_failed == 0 and again.info["resumed"] == 2


def test_cli_fit_writes_its_files(linear, tmp_path, capsys):
    from pbsens.cli import main
    _, theta_hat, folder = linear
    out = tmp_path / "fit"
    yaml = str(folder / "linear.yaml")
    rc = main(["fit", yaml, "--starts", "3", "--workers", "1", "--seed", "1", "--method", "exp2", "--out", str(out)])
    assert rc == 0
    for f in ("fit.json", "fit.csv", "waterfall.png", "data_fit.png", "best_parameters.tsv", "run.json"):
        assert (out / f).is_file(), f
    text = capsys.readouterr().out
    assert "best llh" in text and "3 of 3 starts within 0.5" in text and "3 refined by fs" in text
    import pandas as pd
    table = pd.read_csv(out / "best_parameters.tsv", sep="\t", index_col=0)
    np.testing.assert_allclose(table.loc[["a", "b"], "nominalValue"], theta_hat, atol=1e-6)
    assert main(["fit", yaml, "--starts", "3", "--workers", "1", "--seed", "1", "--method", "exp2",
                 "--out", str(out)]) == 1                     # refused: a fit is there
    assert "--resume" in capsys.readouterr().err
    assert main(["fit", yaml, "--starts", "3", "--workers", "1", "--seed", "1", "--method", "exp2",
                 "--out", str(out), "--resume", "-q"]) == 0
    assert main(["fit", yaml, "--starts", "3", "--workers", "1", "--seed", "1", "--method", "exp2",
                 "--refine", "none", "--out", str(out), "--resume", "-q"]) == 1       # other settings: refused
    assert "refine" in capsys.readouterr().err
    assert main(["fit", yaml, "--starts", "3", "--workers", "1", "--seed", "1", "--refine", "none", "-q",
                 "--out", str(tmp_path / "plain")]) == 0
    assert not any(s.refined for s in FitResult.load(tmp_path / "plain").starts)
    # profiles from that fit
    pout = tmp_path / "prof"
    assert main(["profile", yaml, "--fit", str(out), "--out", str(pout), "--method", "exp2"]) == 0
    for f in ("profiles.json", "profiles.csv", "intervals.tsv", "profiles.png"):
        assert (pout / f).is_file(), f


def test_cli_sample_init_starts_chains_at_the_best_fits(linear, tmp_path, monkeypatch):
    """``pbsens sample --init FIT``: chain k starts at the k-th best end point of the fit."""
    from pbsens.cli import main
    from pbsens.cli import sample as sample_cli
    problem, _, folder = linear
    yaml = str(folder / "linear.yaml")
    starts = np.array([[1.0, 1.0], [2.0, -1.0], [-9.0, 9.0]])
    fit = pbsens.fit(problem, starts=starts, method="exp2", n_workers=1, progress=False,
                     options={"maxiter": 1})     # one iteration: three different end points
    fit.save(tmp_path / "fit.json")
    seen = {}

    class Stop(Exception):
        pass

    import functools
    from pbsens.inference.chains import sample as real_sample

    @functools.wraps(real_sample)         # the parser reads the defaults from the signature
    def fake_sample(problem, **kw):
        seen.update(kw)
        raise Stop

    monkeypatch.setattr(sample_cli, "_sample", lambda: fake_sample)
    with pytest.raises(Stop):
        main(["sample", yaml, "--init", str(tmp_path / "fit.json"), "--chains", "4", "--out", str(tmp_path / "s")])
    ends = [s.x for s in fit.starts]
    np.testing.assert_array_equal(seen["theta0"], [ends[0], ends[1], ends[2], ends[0]])
    other = tmp_path / "other"
    linear_gaussian(other)
    (other / "parameters.tsv").write_text((other / "parameters.tsv").read_text().replace("\nb\t", "\nc\t")
                                          .replace("x + b", "x + c"))
    (other / "observables.tsv").write_text((other / "observables.tsv").read_text().replace("x + b", "x"))
    assert main(["sample", str(other / "linear.yaml"), "--init", str(tmp_path / "fit.json"),
                 "--out", str(tmp_path / "s2")]) == 1


def test_fit_on_dask_equals_in_process(linear, tmp_path):
    pytest.importorskip("distributed")
    problem = linear[0]
    a = pbsens.fit(problem, 3, method="exp2", seed=12, n_workers=1, progress=False)
    b = pbsens.fit(problem, 3, method="exp2", seed=12, client="local", n_workers=1, progress=False,
                   out=tmp_path / "dask")
    assert [s.x for s in a.starts] == [s.x for s in b.starts]
    assert len(os.listdir(tmp_path / "dask" / "starts")) == 3      # the dask workers wrote the records


def test_policy_phases_and_budget():
    """exp2+fs: exp2 with the caller's options, then fs capped at 50 iterations (fides, L-BFGS-B) or
    evaluations (least squares); a single method is one phase with the caller's options."""
    from pbsens.calibration.multistart import _phases
    ph = _phases("exp2+fs", {"rtol": 1e-9}, {"maxiter": 1000, "_optimizer": "fides"})
    assert [(m, so, o) for m, so, o in ph] == [("exp2", {"rtol": 1e-9}, {"maxiter": 1000}),
                                              ("fs", {"rtol": 1e-9}, {"maxiter": 50})]
    ph = _phases("exp2+fs", {}, {"_optimizer": "least_squares"})
    assert ph[1][2] == {"max_nfev": 50}
    assert _phases("fs", {}, {"maxiter": 7, "_optimizer": "fides"}) == [("fs", {}, {"maxiter": 7})]
