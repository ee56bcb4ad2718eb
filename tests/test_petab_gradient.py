"""Gradient and Fisher information of PEtab problems against finite differences.

On Boehm, Fujita and Brannmark (tests/data/petab), at a point away from the
optimum (nominal values shifted by +-0.1 on the parameter scale, so that the
gradient is not a sum of cancelling terms): ``evaluate().gradient`` against
central differences of ``llh`` (tight solver tolerances, step 1e-4 on the
parameter scale), and the FIM against ``J^T W J`` with ``J`` the central
differences of the simulated observables and noise parameters (all three
problems have normal noise on the linear scale: ``W = diag(1/sigma^2)`` for the
observables and ``2/sigma^2`` for the noise parameters).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pbsens.petab as pbpetab  # noqa: E402

DATA = Path(__file__).parent / "data" / "petab"
PROBLEMS = ["Boehm_JProteomeRes2014", "Fujita_SciSignal2010", "Brannmark_JBC2010"]
TIGHT = dict(rtol=1e-12, atol=1e-14)
STEP = 1e-4

_cache = {}


def _setup(name):
    if name not in _cache:
        problem = pbpetab.load(DATA / name / f"{name}.yaml")
        theta = problem.x_nominal + 0.1 * np.where(np.arange(problem.dim) % 2, 1.0, -1.0)
        fd = np.empty(problem.dim)
        jy, js = [], []
        for i in range(problem.dim):
            e = np.zeros(problem.dim)
            e[i] = STEP
            rp = problem.evaluate(theta + e, sensitivities=False, **TIGHT)
            rm = problem.evaluate(theta - e, sensitivities=False, **TIGHT)
            fd[i] = (rp.llh - rm.llh) / (2 * STEP)
            jy.append((rp.simulations["simulation"].to_numpy(float)
                       - rm.simulations["simulation"].to_numpy(float)) / (2 * STEP))
            js.append((rp.sigmas - rm.sigmas) / (2 * STEP))
        _cache[name] = problem, theta, fd, np.array(jy).T, np.array(js).T
    return _cache[name]


def _max_rel(a, ref):
    return np.max(np.abs(a - ref)) / np.max(np.abs(ref))


@pytest.mark.slow
@pytest.mark.parametrize("name", PROBLEMS)
def test_gradient_fs_matches_finite_differences(name):
    problem, theta, fd, _, _ = _setup(name)
    g = problem.evaluate(theta, method="fs", rtol=1e-10, atol=1e-12).gradient
    assert _max_rel(g, fd) < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("name", PROBLEMS)
def test_gradient_exp2_matches_finite_differences(name):
    problem, theta, fd, _, _ = _setup(name)
    g = problem.evaluate(theta, method="exp2").gradient
    assert _max_rel(g, fd) < 1e-2


@pytest.mark.slow
@pytest.mark.parametrize("name", PROBLEMS)
def test_fim_is_JtWJ_of_finite_difference_output_sensitivities(name):
    problem, theta, _, Jy, Js = _setup(name)
    res = problem.evaluate(theta, method="fs", rtol=1e-10, atol=1e-12)
    F = res.fim
    assert np.allclose(F, F.T, rtol=0, atol=1e-12 * np.max(np.abs(F)))
    assert np.min(np.linalg.eigvalsh(F)) > -1e-9 * np.max(np.abs(F))
    s = res.sigmas
    ref = Jy.T @ (Jy / s[:, None] ** 2) + Js.T @ (2.0 * Js / s[:, None] ** 2)
    assert _max_rel(F, ref) < 1e-4
    F2 = problem.evaluate(theta, method="exp2").fim
    assert _max_rel(F2, ref) < 2e-2
