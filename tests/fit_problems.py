"""Small PEtab problems written into a folder, for the calibration tests.

:func:`linear_gaussian`: ``x' = a`` (x(0) = 0, so ``x(t) = a t``), observable ``y = x + b``,
normal noise with a fixed sigma. The log-likelihood is quadratic in ``(a, b)`` and its maximum
is the least-squares solution of ``m = a t + b``, known in closed form (:func:`linear_mle`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from petab_files import write_problem_yaml  # noqa: E402

TIMES = np.arange(1.0, 11.0)
SIGMA = 0.5
TRUE = (1.5, -2.0)


def _sbml(path):
    import libsbml
    doc = libsbml.SBMLDocument(3, 1)
    m = doc.createModel()
    m.setId("linear")
    c = m.createCompartment()
    c.setId("cell")
    c.setSize(1.0)
    c.setConstant(True)
    s = m.createSpecies()
    s.setId("x")
    s.setCompartment("cell")
    s.setInitialConcentration(0.0)
    s.setBoundaryCondition(False)
    s.setHasOnlySubstanceUnits(False)
    s.setConstant(False)
    for pid, v in (("a", 1.0), ("b", 0.0)):
        p = m.createParameter()
        p.setId(pid)
        p.setValue(v)
        p.setConstant(True)
    r = m.createReaction()
    r.setId("production")
    r.setReversible(False)
    r.setFast(False)
    prod = r.createProduct()
    prod.setSpecies("x")
    prod.setStoichiometry(1.0)
    prod.setConstant(True)
    kl = r.createKineticLaw()
    kl.setMath(libsbml.parseL3Formula("a * cell"))
    libsbml.writeSBMLToFile(doc, str(path))


def linear_gaussian(folder, seed=0, lower=-10.0, upper=10.0):
    """Write the problem into ``folder``; returns the YAML path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _sbml(folder / "model.xml")
    rng = np.random.default_rng(seed)
    m = TRUE[0] * TIMES + TRUE[1] + SIGMA * rng.standard_normal(TIMES.size)
    (folder / "conditions.tsv").write_text("conditionId\tconditionName\nc0\tc0\n")
    (folder / "observables.tsv").write_text(
        "observableId\tobservableFormula\tnoiseFormula\tobservableTransformation\tnoiseDistribution\n"
        f"y\tx + b\t{SIGMA!r}\tlin\tnormal\n")
    rows = "".join(f"y\tc0\t{float(v)!r}\t{float(t)!r}\n" for t, v in zip(TIMES, m))
    (folder / "measurements.tsv").write_text("observableId\tsimulationConditionId\tmeasurement\ttime\n" + rows)
    (folder / "parameters.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
        f"a\tlin\t{lower!r}\t{upper!r}\t1.0\t1\n"
        f"b\tlin\t{lower!r}\t{upper!r}\t0.0\t1\n")
    return write_problem_yaml(folder, "linear.yaml")


def measurements(folder):
    import pandas as pd
    df = pd.read_csv(Path(folder) / "measurements.tsv", sep="\t")
    return df["time"].to_numpy(float), df["measurement"].to_numpy(float)


def linear_mle(folder):
    """``(theta_hat, covariance)`` of ``(a, b)``: ordinary least squares (the MLE for fixed sigma)."""
    t, m = measurements(folder)
    X = np.column_stack([t, np.ones_like(t)])
    theta, *_ = np.linalg.lstsq(X, m, rcond=None)
    cov = SIGMA ** 2 * np.linalg.inv(X.T @ X)
    return theta, cov


BOEHM = Path(__file__).resolve().parent / "data" / "petab" / "Boehm_JProteomeRes2014" / "Boehm_JProteomeRes2014.yaml"


def linear_problem(folder):
    """``(problem, theta_hat, folder)``: :func:`linear_gaussian` written into ``folder`` and loaded."""
    import pbsens.petab
    yaml = linear_gaussian(folder)
    return pbsens.petab.load(str(yaml)), linear_mle(folder)[0], Path(folder)
