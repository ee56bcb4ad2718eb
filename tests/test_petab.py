"""PEtab problems: the PEtab test suite, three benchmark problems' llh, bad problem files.

References: the ``petabtests`` package's solutions (llh, chi2, simulations and
their tolerances, cases v1.0.0/sbml 0001-0018), and AMICI's log-likelihoods of
the benchmark problems at their nominal parameters (tests/data/petab, copied
from the PEtab benchmark collection, BSD 3-clause).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import pandas as pd  # noqa: E402
import petab.v1 as petab_v1  # noqa: E402  (the "petab" extra; CI installs it)
import petabtests  # noqa: E402  (pip install --no-deps petabtests==0.0.1, as the README says)
import yaml  # noqa: E402

import pbsens  # noqa: E402
import pbsens.petab as pbpetab  # noqa: E402
from pbsens.errors import PbsensError  # noqa: E402

CASES_DIR = Path(petabtests.__file__).parent / "cases" / "v1.0.0" / "sbml"
CASES = [f"{i:04d}" for i in range(1, 19)]
DATA = Path(__file__).parent / "data" / "petab"

#: AMICI's log-likelihoods at the nominal parameters (tests/data/petab, README of the collection's copy)
REFERENCE_LLH = {
    "Boehm_JProteomeRes2014": -138.22199693517703,
    "Fujita_SciSignal2010": 53.08377736998929,
    "Brannmark_JBC2010": -141.889113770537,
}


def test_pbsens_petab_is_the_module_and_petab_library_is_not_shadowed():
    assert pbpetab.load is pbsens.problems.load
    import petab.v1
    # the petab library comes from its own installation, not from a file inside pbsens (a checkout's
    # path may itself contain "pbsens", so compare folders, not names)
    package_dir = Path(pbsens.__file__).resolve().parent
    assert hasattr(petab.v1, "Problem")
    assert package_dir not in Path(petab.v1.__file__).resolve().parents


@pytest.mark.parametrize("case", CASES)
def test_petab_test_suite_case(case):
    d = CASES_DIR / case
    solution = yaml.safe_load(open(d / f"_{case}_solution.yaml"))
    problem = pbpetab.load(d / f"_{case}.yaml")
    res = problem.evaluate(sensitivities=False)
    assert abs(res.llh - solution["llh"]) < solution["tol_llh"], (res.llh, solution["llh"])
    assert abs(res.chi2 - solution["chi2"]) < solution["tol_chi2"], (res.chi2, solution["chi2"])
    expected = pd.concat([pd.read_csv(d / f, sep="\t") for f in solution["simulation_files"]],
                         ignore_index=True)
    got = res.simulations
    assert list(got["observableId"]) == list(expected["observableId"])
    assert np.allclose(got["time"].to_numpy(float), expected["time"].to_numpy(float))
    err = np.max(np.abs(got["simulation"].to_numpy(float) - expected["simulation"].to_numpy(float)))
    assert err < solution["tol_simulations"], err
    # PEtab's simulation-table format: the measurement column is replaced by 'simulation'
    assert "measurement" not in got.columns and "simulation" in got.columns


@pytest.mark.parametrize("name", sorted(REFERENCE_LLH))
def test_benchmark_problem_llh_matches_amici(name):
    problem = pbpetab.load(DATA / name / f"{name}.yaml")
    for method in ("exp2", "fs"):
        res = problem.evaluate(method=method)
        assert abs(res.llh - REFERENCE_LLH[name]) < 1e-3, (method, res.llh)
        assert np.all(np.isfinite(res.gradient))
    assert abs(problem.llh() - REFERENCE_LLH[name]) < 1e-3


def test_problem_attributes_boehm():
    name = "Boehm_JProteomeRes2014"
    problem = pbpetab.load(DATA / name / f"{name}.yaml")
    par = pd.read_csv(DATA / name / f"parameters_{name}.tsv", sep="\t")
    est = par[par["estimate"] == 1]
    assert problem.parameter_ids == list(est["parameterId"])
    assert np.allclose(problem.x_nominal, np.log10(est["nominalValue"].to_numpy(float)))
    assert np.allclose(problem.bounds[:, 0], np.log10(est["lowerBound"].to_numpy(float)))
    res = problem.evaluate()
    assert set(res.timing) == {"model1_data1", "total"}
    # no priors in the table: flat inside the bounds, -inf outside
    assert problem.log_prior() == 0.0
    assert problem.log_prior(problem.bounds[:, 1] + 0.1) == -np.inf


# ------------------------------------------------------------------ bad files
def _copy_case(tmp_path, case="0001"):
    d = tmp_path / case
    shutil.copytree(CASES_DIR / case, d, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    return d, d / f"_{case}.yaml"


def _edit(path, fn):
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    df = fn(df)
    df.to_csv(path, sep="\t", index=False)


def test_missing_column_names_file_and_column(tmp_path):
    d, y = _copy_case(tmp_path)
    _edit(d / "_measurements.tsv", lambda df: df.drop(columns=["time"]))
    with pytest.raises(pbpetab.PetabError) as exc:
        pbpetab.load(y)
    msg = str(exc.value)
    assert "_measurements.tsv" in msg and "'time'" in msg


def test_unknown_observable_names_file_row_column(tmp_path):
    d, y = _copy_case(tmp_path)

    def bad(df):
        df.loc[1, "observableId"] = "no_such_observable"
        return df
    _edit(d / "_measurements.tsv", bad)
    with pytest.raises(pbpetab.PetabError) as exc:
        pbpetab.load(y)
    msg = str(exc.value)
    assert "_measurements.tsv" in msg and "row 2" in msg and "'observableId'" in msg
    assert "no_such_observable" in msg


def test_nonpositive_noise_formula_names_file_row_column(tmp_path):
    d, y = _copy_case(tmp_path)

    # a constant noise formula that evaluates to -1
    _edit(d / "_observables.tsv", lambda df: df.assign(noiseFormula="1 - 2"))
    problem = pbpetab.load(y, lint=False)
    with pytest.raises(pbpetab.PetabError) as exc:
        problem.evaluate()
    msg = str(exc.value)
    assert isinstance(exc.value, PbsensError)
    assert "_observables.tsv" in msg and "row 1" in msg and "'noiseFormula'" in msg and "-1" in msg
    assert "_measurements.tsv" in msg


def test_unknown_parameter_in_condition_value(tmp_path):
    d, y = _copy_case(tmp_path, "0002")

    def bad(df):
        df.loc[1, "a0"] = "no_such_parameter"
        return df
    _edit(d / "_conditions.tsv", bad)
    with pytest.raises(pbpetab.PetabError) as exc:
        pbpetab.load(y)
    msg = str(exc.value)
    assert "_conditions.tsv" in msg and "row 2" in msg and "'a0'" in msg and "no_such_parameter" in msg


def test_unknown_condition_column(tmp_path):
    d, y = _copy_case(tmp_path, "0002")
    _edit(d / "_conditions.tsv", lambda df: df.assign(not_in_model="1"))
    with pytest.raises(pbpetab.PetabError) as exc:
        pbpetab.load(y)
    msg = str(exc.value)
    assert "_conditions.tsv" in msg and "'not_in_model'" in msg


def test_bad_theta_and_method():
    problem = pbpetab.load(CASES_DIR / "0001" / "_0001.yaml")
    with pytest.raises(PbsensError, match="theta"):
        problem.evaluate(np.zeros(problem.dim + 1))
    with pytest.raises(PbsensError, match="method"):
        problem.evaluate(method="rk4")


def test_from_petab_problem_object_equals_load():
    case = CASES_DIR / "0013" / "_0013.yaml"
    by_path = pbpetab.load(case).evaluate()
    obj = pbpetab.Problem.from_petab(petab_v1.Problem.from_yaml(str(case)))
    res = obj.evaluate()
    assert res.llh == pytest.approx(by_path.llh, abs=1e-12)
    assert np.allclose(res.gradient, by_path.gradient, rtol=1e-12, atol=1e-14)


def _boehm_copy(tmp_path, nominal, estimate=1):
    """Boehm with ``k_exp_hetero``'s nominalValue (and estimate) changed, in ``tmp_path``."""
    name = "Boehm_JProteomeRes2014"
    d = tmp_path / f"{name}_{estimate}"
    shutil.copytree(DATA / name, d)
    pfile = d / f"parameters_{name}.tsv"
    par = pd.read_csv(pfile, sep="\t")
    par.loc[par["parameterId"] == "k_exp_hetero", ["nominalValue", "estimate"]] = [nominal, estimate]
    par.to_csv(pfile, sep="\t", index=False)
    return d / f"{name}.yaml"


def test_zero_nominal_on_log_scale_is_the_value_zero(tmp_path):
    """Lang_PLOSComputBiol2024 has estimated log-scale parameters with nominalValue 0: -inf on
    their scale, evaluated as the value 0 with gradient entry 0 (as AMICI does); the reference is
    the same problem with the parameter not estimated (its table value 0 used as it is).
    Samplers' default starts still need finite values and name the parameter."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", pbsens.errors.PbsensWarning)
        problem = pbpetab.load(_boehm_copy(tmp_path, 0.0))
    fixed = pbpetab.load(_boehm_copy(tmp_path, 0.0, estimate=0))
    k = problem.parameter_ids.index("k_exp_hetero")
    assert problem.x_nominal[k] == -np.inf
    tight = dict(method="fs", rtol=1e-10, atol=1e-12)
    r = problem.evaluate(**tight)
    ref = fixed.evaluate(**tight)
    assert abs(r.llh - ref.llh) < 1e-9 * abs(ref.llh)
    assert r.gradient[k] == 0.0
    others = [i for i in range(problem.dim) if i != k]
    np.testing.assert_allclose(r.gradient[others], ref.gradient, rtol=0, atol=1e-7 * np.abs(ref.gradient).max())
    with pytest.raises(PbsensError, match="k_exp_hetero"):
        pbsens.sample(problem, chains=1, draws=2, burn_in=0)
