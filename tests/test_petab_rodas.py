"""The compiled Rodas5P path of PEtab problems (the Problem's default solver) on Boehm.

References independent of that path: the log-likelihood AMICI computes (the
benchmark folder's README), and central finite differences of the llh solved
with scipy's LSODA at tight tolerances (another solver, another code path).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pbsens.petab as pbpetab
from pbsens.errors import PbsensError

DATA = Path(__file__).parent / "data" / "petab"
NAME = "Boehm_JProteomeRes2014"
REFERENCE_LLH = -138.22199693517703
FD_OPTIONS = dict(solver="LSODA", rtol=1e-12, atol=1e-14)
STEP = 1e-4

_cache = {}


def _boehm():
    if "fd" not in _cache:
        problem = pbpetab.load(DATA / NAME / f"{NAME}.yaml")
        theta = problem.x_nominal + 0.1 * np.where(np.arange(problem.dim) % 2, 1.0, -1.0)
        fd = np.empty(problem.dim)
        for i in range(problem.dim):
            e = np.zeros(problem.dim)
            e[i] = STEP
            fd[i] = (problem.llh(theta + e, **FD_OPTIONS) - problem.llh(theta - e, **FD_OPTIONS)) / (2 * STEP)
        _cache.update(problem=problem, theta=theta, fd=fd)
    return _cache["problem"], _cache["theta"], _cache["fd"]


def _max_rel(a, ref):
    return np.max(np.abs(a - ref)) / np.max(np.abs(ref))


@pytest.mark.parametrize("method", ["exp2", "fs"])
def test_rodas5p_llh_matches_reference(method):
    problem, _, _ = _boehm()
    res = problem.evaluate(method=method, solver="rodas5p")
    assert abs(res.llh - REFERENCE_LLH) < 1e-3
    assert abs(problem.llh(solver="rodas5p") - REFERENCE_LLH) < 1e-3


def test_rodas5p_exp2_gradient_matches_lsoda_finite_differences():
    problem, theta, fd = _boehm()
    g = problem.evaluate(theta, method="exp2", solver="rodas5p").gradient
    # the default march: 4 sub-steps' worth of accuracy through the midpoint correction
    # (measured 4.9e-7 against tight forward sensitivities; the solver's own grid gave 1.1e-3)
    assert _max_rel(g, fd) < 1e-5
    # the default options are the same path
    assert _max_rel(problem.evaluate(theta).gradient, fd) < 1e-5


def test_exp2_march_options_pass_through_evaluate():
    """substeps=, midpoint= reach sensitivities(): the solver's own grid is the less accurate
    march (above 1e-4 against finite differences), the sub-step split (midpoint=False) is
    within 1e-4 and differs from the default correction."""
    problem, theta, fd = _boehm()
    g_default = problem.evaluate(theta).gradient
    g_m1 = problem.evaluate(theta, substeps=1).gradient
    g_split = problem.evaluate(theta, midpoint=False).gradient
    assert _max_rel(g_m1, fd) > 1e-4
    assert _max_rel(g_split, fd) < 1e-4
    assert not np.array_equal(g_split, g_default)
    with pytest.raises(PbsensError, match="midpoint"):
        problem.evaluate(theta, midpoint="yes")


def test_rodas5p_fs_gradient_matches_lsoda_finite_differences():
    problem, theta, fd = _boehm()
    g = problem.evaluate(theta, method="fs", solver="rodas5p").gradient
    assert _max_rel(g, fd) < 1e-5
    assert _max_rel(problem.evaluate(theta, method="fs").gradient, fd) < 1e-5


@pytest.mark.parametrize("method", ["exp2", "pbsr", "fs"])
def test_repeated_evaluations_skip_checks_but_give_the_first_result(method):
    """After the first evaluation, simulate's argument checks are skipped (run_checked): the numbers
    must be those of a fresh problem's first, fully checked evaluation, and bad input still raises."""
    problem, theta, _ = _boehm()
    fresh = pbpetab.load(DATA / NAME / f"{NAME}.yaml")
    first = fresh.evaluate(theta, method=method)
    again = [problem.evaluate(theta, method=method) for _ in range(2)][-1]
    assert again.llh == first.llh
    assert np.array_equal(again.gradient, first.gradient)
    assert np.array_equal(again.simulations["simulation"].to_numpy(), first.simulations["simulation"].to_numpy())
    with pytest.raises(PbsensError, match="rtol"):
        problem.evaluate(theta, method=method, rtol=-1.0)
