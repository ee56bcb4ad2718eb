"""sensitivities(..., solver="rodas5p") end to end (states from the compiled Rodas5P, the grid refined
from its dense output, the march) against tight forward sensitivities (scipy Radau, rtol 1e-10).

Tolerances (rtol 1e-5, atol 1e-6, 201 outputs; docs/PERFORMANCE.md): the median and max relative
error E_k of S measured on this branch, times about 3 for headroom:
PKA exp2/pbsr2 median 5.8e-6 / 6.4e-6, max 3.6e-4 / 4.4e-4; CaMKII median 3.9e-12 (2.5e-7 before
the states at the outputs came from steps instead of the dense output of long steps; bound 1e-10,
below LSODA's 3.4e-10), max 1.1e-2; Chua median 4.9e-4, max 1.0e-3."""
import functools

import numpy as np
import pytest

import pbsens

CASES = {   # model: (t_end, median bound, max bound)
    "PKA": (600.0, 2e-5, 1.5e-3),
    "CaMKII": (600.0, 1e-10, 4e-2),
    "Chua": (10.0, 3e-3, 5e-3),
}


@functools.lru_cache(maxsize=None)
def _case(name):
    t_end = CASES[name][0]
    m = pbsens.load_model(name)
    ts = np.linspace(0.0, t_end, 201)
    ref = pbsens.forward_sensitivities(m, (0.0, t_end), t_eval=ts, method="Radau", rtol=1e-10, atol=1e-12)
    return name, m, ts, ref


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    return _case(request.param)


@pytest.mark.parametrize("method", ["exp2", "pbsr2"])
def test_rodas5p_sensitivities_against_forward_reference(case, method):
    name, m, ts, ref = case
    _, med_bound, max_bound = CASES[name]
    r = pbsens.sensitivities(m, t_span=(0.0, ts[-1]), t_eval=ts, method=method, solver="rodas5p",
                             rtol=1e-5, atol=1e-6)
    assert np.array_equal(r.t, ts) and r.S.shape == ref.S.shape
    E = pbsens.relative_error(r, ref)
    assert np.median(E) <= med_bound, (name, method, np.median(E))
    assert np.max(E) <= max_bound, (name, method, np.max(E))


def test_rodas5p_median_error_no_worse_than_lsoda():
    """Issue 19's accuracy condition on the paper's models: at the same tolerance, 201 outputs,
    exp2 on Rodas5P's (refined) grid is no less accurate by the median E than exp2 on LSODA's."""
    for name in ("PKA", "CaMKII"):
        _, m, ts, ref = _case(name)
        kw = dict(t_span=(0.0, ts[-1]), t_eval=ts, method="exp2", rtol=1e-5, atol=1e-6)
        e_rodas = np.median(pbsens.relative_error(pbsens.sensitivities(m, solver="rodas5p", **kw), ref))
        e_lsoda = np.median(pbsens.relative_error(pbsens.sensitivities(m, solver="LSODA", **kw), ref))
        assert e_rodas <= e_lsoda, (name, e_rodas, e_lsoda)
