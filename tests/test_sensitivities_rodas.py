"""sensitivities(..., solver="rodas5p") end to end (states from the compiled Rodas5P, the grid refined
from its dense output, the march) against tight forward sensitivities (scipy Radau, rtol 1e-10).

Tolerances (rtol 1e-5, atol 1e-6, 201 outputs; docs/PERFORMANCE.md): the median and max relative
error E_k of S measured on this branch, times about 3 for headroom:
PKA exp2/pbsr2 median 5.9e-6 / 6.5e-6, max 3.6e-4 / 4.4e-4; CaMKII median 2.5e-7, max 1.1e-2;
Chua median 7.7e-4, max 1.2e-3."""
import functools

import numpy as np
import pytest

import pbsens

CASES = {   # model: (t_end, median bound, max bound)
    "PKA": (600.0, 2e-5, 1.5e-3),
    "CaMKII": (600.0, 1e-6, 4e-2),
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


def test_rodas5p_tighter_states_lower_the_error_floor():
    """Where the median E is set by the states (CaMKII near its equilibrium), states at rtol/100
    lower it; the march alone (substeps) does not."""
    name, m, ts, ref = _case("CaMKII")
    kw = dict(t_span=(0.0, ts[-1]), t_eval=ts, method="exp2", solver="rodas5p")
    e4 = np.median(pbsens.relative_error(pbsens.sensitivities(m, rtol=1e-5, atol=1e-6, **kw), ref))
    e8 = np.median(pbsens.relative_error(pbsens.sensitivities(m, rtol=1e-5, atol=1e-6, substeps=8, **kw), ref))
    e_tight = np.median(pbsens.relative_error(pbsens.sensitivities(m, rtol=1e-7, atol=1e-8, substeps=1, **kw), ref))
    assert e8 > 0.5 * e4                 # finer march, same floor
    assert e_tight < 0.05 * e4           # more accurate states, lower floor
