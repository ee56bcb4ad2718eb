"""SBtab estimation problems (UQSA layout) loaded into the PEtab Problem.

References: the closed-form solution of the test model (A -> B at rate kf u A,
Y = sB B, so Y(t) = sB A0 (1 - exp(-kf u t))) with the Gaussian log-likelihood
written out here, and the same problem written by hand as PEtab
(tests/data/petab/uqsa_decay, SBML written by hand).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("petab.v1")

import pbsens.petab as pbpetab  # noqa: E402
from pbsens.errors import PbsensError  # noqa: E402
from pbsens.problems.sbtab_problem import sbtab_to_petab  # noqa: E402

DATA = Path(__file__).parent / "data"
SBTAB = DATA / "sbtab" / "uqsa_decay"
PETAB = DATA / "petab" / "uqsa_decay" / "decay.yaml"
# (u, A0, [(t, measured, sd)]) per experiment, as in the data tables
EXPERIMENTS = ((1.0, 1.0, [(0.5, 0.21, 0.05), (1, 0.37, 0.05), (2, 0.66, 0.08), (5, 1.18, 0.1)]),
               (2.5, 2.0, [(0.5, 0.95, 0.1), (1, 1.71, 0.1), (3, 3.12, 0.2)]))


def closed_form_llh(log10_kf, sB):
    kf = 10.0 ** log10_kf
    ll = 0.0
    for u, a0, rows in EXPERIMENTS:
        for t, m, s in rows:
            y = sB * a0 * (1.0 - np.exp(-kf * u * t))
            ll += -0.5 * np.log(2 * np.pi * s * s) - 0.5 * ((m - y) / s) ** 2
    return ll


@pytest.fixture(scope="module")
def sbtab_problem():
    return pbpetab.load(SBTAB)


@pytest.fixture(scope="module")
def petab_problem():
    return pbpetab.load(PETAB)


@pytest.mark.parametrize("theta", [None, [-0.7, 1.5], [-1.6, 2.8]])
def test_uqsa_folder_llh_matches_petab_version_and_closed_form(sbtab_problem, petab_problem, theta):
    a = sbtab_problem.evaluate(theta)
    b = petab_problem.evaluate(theta)
    th = sbtab_problem.x_nominal if theta is None else theta
    assert a.llh == pytest.approx(closed_form_llh(*th), rel=1e-7)
    assert a.llh == pytest.approx(b.llh, rel=1e-10)
    np.testing.assert_allclose(a.gradient, b.gradient, rtol=1e-7)
    assert sbtab_problem.log_prior(theta) == pytest.approx(petab_problem.log_prior(theta), rel=1e-12)


def test_uqsa_folder_parameters_priors_and_gradient(sbtab_problem):
    pr = sbtab_problem
    assert pr.parameter_ids == ["kf", "sB"] and pr.scales == ["log10", "lin"]
    np.testing.assert_allclose(pr.x_nominal, [-1.0, 2.0])
    np.testing.assert_allclose(pr.bounds, [[-3.0, 1.0], [0.1, 5.0]])
    # normal priors on the parameter scale from !Std: N(-1, 0.5) and N(2, 0.5)
    th = np.array([-0.8, 2.3])
    ref = sum(-0.5 * np.log(2 * np.pi * 0.25) - 0.5 * ((v - m) / 0.5) ** 2 for v, m in zip(th, (-1.0, 2.0)))
    assert pr.log_prior(th) == pytest.approx(ref, rel=1e-12)
    h = 1e-6
    fd = [(closed_form_llh(*(th + h * e)) - closed_form_llh(*(th - h * e))) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(pr.gradient(th, method="fs"), fd, rtol=1e-5)
    np.testing.assert_allclose(pr.gradient(th), fd, rtol=1e-3)   # exp2: post-hoc on the solver's grid


def _simplified(folder):
    """UQSA's simplified tables: plain headers, a 'comment' column, 'value;std' cells."""
    folder.mkdir()
    (folder / "Compound.tsv").write_text("id\tvalue\tunit\nA\t1.0\tuM\nB\t0\tuM\n")
    (folder / "Reaction.tsv").write_text("id\tkinetic law\tformula\nR1\tkf*u*A\tA <=> B\n")
    (folder / "Parameter.tsv").write_text("id\tvalue\tstdv\tmin\tmax\tscale\tunit\n"
                                          "kf\t-1\t0.5\t-3\t1\tlog10\t1/s\nsB\t2\t0.5\t0.1\t5\tlinear\t1\n")
    (folder / "Input.tsv").write_text("id\tvalue\nu\t1\n")
    (folder / "Output.tsv").write_text("id\tformula\nY\tsB*B\n")
    (folder / "Experiments.tsv").write_text("id\tu\tA\tcomment\nE1\t1\t1.0\tFigure 3 (dark blue)\n"
                                            "E2\t2.5\t2.0\tFigure 3 (gray)\n")
    (folder / "E1.tsv").write_text("id\ttime\tY\nE1T1\t0.5\t0.21;0.05\nE1T2\t1\t0.37;0.05\nE1T3\t2\t0.66;0.08\n"
                                   "E1T4\t5\t1.18;0.1\n")
    (folder / "E2.tsv").write_text("id\ttime\tY\nE2T1\t0.5\t0.95;0.1\nE2T2\t1\t1.71;0.1\nE2T3\t3\t3.12;0.2\n")
    return folder


def test_simplified_layout_with_comment_column(tmp_path, sbtab_problem):
    pr = pbpetab.load(_simplified(tmp_path / "simple"))
    for th in (None, [-0.7, 1.5]):
        assert pr.llh(th) == pytest.approx(sbtab_problem.llh(th), rel=1e-10)


def test_converted_tables(tmp_path):
    problem, info = sbtab_to_petab(SBTAB, sbml_path=tmp_path / "m.xml")
    assert (tmp_path / "m.xml").stat().st_size > 0
    assert list(problem.condition_df.index) == ["E1", "E2"]
    assert "Comment" not in problem.condition_df.columns and "Name" not in problem.condition_df.columns
    assert info["data_tables"] == {"E1": "decay_E1.tsv", "E2": "decay_E2.tsv"}
    np.testing.assert_allclose(problem.measurement_df["noiseParameters"].astype(float),
                               [0.05, 0.05, 0.08, 0.1, 0.1, 0.1, 0.2])


def test_bad_uqsa_folders(tmp_path):
    bad = tmp_path / "nostd"
    shutil.copytree(SBTAB, bad)
    text = (bad / "decay_E2.tsv").read_text().replace("\t~Y", "\t!Note")
    (bad / "decay_E2.tsv").write_text(text)
    with pytest.raises(PbsensError, match=r"decay_E2.tsv', line 3, column '>Y'.*standard deviation"):
        pbpetab.load(bad)
    nodata = tmp_path / "nodata"
    shutil.copytree(SBTAB, nodata)
    (nodata / "decay_E2.tsv").unlink()
    with pytest.raises(PbsensError, match="no data table for experiment 'E2'"):
        pbpetab.load(nodata)
    neg = tmp_path / "negsd"
    shutil.copytree(SBTAB, neg)
    (neg / "decay_E1.tsv").write_text((neg / "decay_E1.tsv").read_text().replace("0.21\t0.05", "0.21\t-0.05"))
    with pytest.raises(PbsensError, match="decay_E1.tsv', line 3.*must be positive"):
        pbpetab.load(neg)


def test_cli_petab_on_sbtab_folder(capsys):
    from pbsens.cli import main
    assert main(["petab", str(SBTAB)]) == 0
    out = capsys.readouterr().out
    llh = float(next(line.split()[1] for line in out.splitlines() if line.startswith("llh")))
    assert llh == pytest.approx(closed_form_llh(-1.0, 2.0), rel=1e-7)


def test_sample_sbtab_problem_in_worker_processes(sbtab_problem):
    """Workers rebuild the SBtab problem from its folder; same draws as in this process."""
    pytest.importorskip("arviz")
    import warnings

    import pbsens
    kw = dict(chains=2, draws=10, burn_in=10, seed=11, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = pbsens.sample(sbtab_problem, n_workers=2, **kw)
        b = pbsens.sample(sbtab_problem, n_workers=1, **kw)
    assert list(a.posterior.data_vars) == ["kf", "sB"]
    for p in ("kf", "sB"):
        np.testing.assert_array_equal(a.posterior[p].values, b.posterior[p].values)
    # lp is the closed-form log-likelihood plus the normal priors at a draw
    th = np.array([float(a.posterior[p].sel(chain=1, draw=9)) for p in ("kf", "sB")])
    prior = sum(-0.5 * np.log(2 * np.pi * 0.25) - 0.5 * ((v - m) / 0.5) ** 2 for v, m in zip(th, (-1.0, 2.0)))
    assert float(a.sample_stats.lp.sel(chain=1, draw=9)) == pytest.approx(closed_form_llh(*th) + prior, rel=1e-6)


def test_sample_without_seed_records_one_that_reproduces_the_chains(sbtab_problem, tmp_path):
    import warnings

    import arviz as az

    import pbsens
    from pbsens.inference.sample_output import write_sample_output
    kw = dict(chains=2, draws=6, burn_in=4, n_workers=1, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = pbsens.sample(sbtab_problem, **kw)
        seed = a.posterior.attrs["seed"]
        b = pbsens.sample(sbtab_problem, seed=seed, **kw)
        write_sample_output(a, tmp_path / "o", plots=False)
    np.testing.assert_array_equal(a.posterior.kf.values, b.posterior.kf.values)
    assert az.from_netcdf(tmp_path / "o" / "posterior.nc").posterior.attrs["seed"] == seed
    with pytest.raises(PbsensError, match="'seed'"):
        pbsens.sample(sbtab_problem, seed=-1)
