"""sensitivities() on the compiled Rodas5P path skips the BLAS thread limit (no BLAS runs there);
every other path keeps it. Checked with threadpoolctl's own report, not with timings."""
import importlib

import numpy as np
import pytest

import pbsens
from pbsens.kernels.blas import TILES_MAX_K

sens_module = importlib.import_module("pbsens.sensitivities")


from blas_threads import blas_counts as _blas_counts, two_blas_threads  # noqa: E402,F401 - fixture


def test_blas_free_bound_matches_the_tiles():
    # the stacked exponential step's inner dimension 2 nx must stay within the register tiles
    assert 2 * sens_module._BLAS_FREE_STATES == TILES_MAX_K


@pytest.mark.parametrize("solver, limited", [("rodas5p", False), ("LSODA", True)])
def test_blas_limit_only_off_the_rodas5p_path(two_blas_threads, monkeypatch, solver, limited):
    m = pbsens.load_model("PKA")
    seen = []
    original = sens_module._bound

    def spy(model):
        seen.append(set(_blas_counts()))
        return original(model)

    monkeypatch.setattr(sens_module, "_bound", spy)
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
