"""sensitivities() on the compiled Rodas5P path skips the BLAS thread limit (no BLAS runs there);
every other path keeps it. Checked with threadpoolctl's own report, not with timings."""
import importlib

import numpy as np
import pytest

import pbsens
from pbsens.sensitivity import sparse as sparse_path
from pbsens.kernels.blas import TILES_MAX_K
from conftest import make_model

sens_module = importlib.import_module("pbsens.sensitivity.posthoc")


from blas_threads import blas_counts as _blas_counts, two_blas_threads  # noqa: E402,F401 - fixture


def _spy_on_blas_counts(monkeypatch):
    """The BLAS thread counts seen inside the call (at ``_bound``), appended to the list returned."""
    seen = []
    original = sens_module._bound

    def spy(model):
        seen.append(set(_blas_counts()))
        return original(model)

    monkeypatch.setattr(sens_module, "_bound", spy)
    return seen


def test_blas_free_bound_matches_the_tiles():
    # the stacked exponential step's inner dimension 2 nx must stay within the register tiles,
    # and the sparse path (LAPACK's LU for the midpoint correction) must keep the limit
    assert 2 * sens_module._BLAS_FREE_STATES <= TILES_MAX_K
    assert sens_module._BLAS_FREE_STATES < sparse_path.SPARSE_MIN_STATES


def test_blas_limit_on_the_sparse_path(two_blas_threads, monkeypatch, tmp_path):
    # a 4-state enzyme cycle with two conservation laws, forced onto the sparse path: its
    # midpoint correction inverts with LAPACK, whose threaded LU woke a spinning BLAS thread
    m = make_model(tmp_path, "enzyme_cycle", {"E": 1.0, "S": 5.0, "C": 0.0, "P": 0.0},
                   {"kf": 50.0, "kr": 20.0, "kc": 3.0, "kp": 0.4},
                   {"E": "-kf*E*S + kr*C + kc*C", "S": "-kf*E*S + kr*C + kp*P", "C": "kf*E*S - kr*C - kc*C",
                    "P": "kc*C - kp*P"})
    seen = _spy_on_blas_counts(monkeypatch)
    ts = np.linspace(0.0, 40.0, 9)
    for linalg, limited in (("sparse", True), ("auto", False)):
        seen.clear()
        r = pbsens.sensitivities(m, t_span=(0.0, 40.0), t_eval=ts, method="exp2", solver="rodas5p", linalg=linalg)
        assert seen and all(c == ({1} if limited else {2}) for c in seen), linalg
        assert np.all(np.isfinite(r.S))
    assert sparse_path.runner(m).stats[4] > 0           # the LAPACK inverse did run
    assert set(_blas_counts()) == {2}


@pytest.mark.parametrize("solver, limited", [("rodas5p", False), ("LSODA", True)])
def test_blas_limit_only_off_the_rodas5p_path(two_blas_threads, monkeypatch, solver, limited):
    m = pbsens.load_model("PKA")
    seen = _spy_on_blas_counts(monkeypatch)
    ts = np.linspace(0.0, 60.0, 31)
    r = pbsens.sensitivities(m, t_span=(0.0, 60.0), t_eval=ts, method="exp2", solver=solver)
    assert seen and all(c == ({1} if limited else {2}) for c in seen)
    assert set(_blas_counts()) == {2}
    assert np.all(np.isfinite(r.S))
    # a Rodas5P trajectory given is the same path
    seen.clear()
    tr = pbsens.solve_states(m, (0.0, 60.0), t_eval=ts, method=solver)
    pbsens.sensitivities(m, tr, method="exp2")
    assert seen and all(c == ({1} if limited else {2}) for c in seen)
