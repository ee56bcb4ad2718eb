"""Rodas5P's ``stop_at_outputs``: output times as step ends, the steps' free sizes (``sol.h_free``),
and what they do to the grid refinement and to post-hoc sensitivities near an equilibrium.

Independent references: scipy Radau at rtol 1e-10 for the states; tight forward sensitivities
(scipy Radau, rtol 1e-10) for S."""
import functools

import numpy as np
import pytest

import pbsens
from pbsens.errors import PbsensError
from pbsens.solvers.refine import refine_grid

TS = np.linspace(0.0, 600.0, 201)


@functools.lru_cache(maxsize=None)
def _camkii_reference():
    m = pbsens.load_model("CaMKII")
    ref = pbsens.forward_sensitivities(m, (0.0, 600.0), t_eval=TS, method="Radau", rtol=1e-10, atol=1e-12)
    return m, ref


def _inside(te, steps):
    """Per step, the number of times of ``te`` strictly inside it."""
    return np.searchsorted(te, steps[1:], side="left") - np.searchsorted(te, steps[:-1], side="right")


def _solve(m, stop, **kw):
    return pbsens.solve_states(m, (0.0, 600.0), t_eval=TS, method="rodas5p", rtol=1e-5, atol=1e-6,
                               stop_at_outputs=stop, **kw)


@pytest.mark.parametrize("stop", [True, 1, 8, 33])
def test_every_kth_output_is_a_step_end(pka, stop):
    k = 1 if stop is True else stop
    tr = _solve(pka, stop)
    steps = set(tr.sol.ts)
    inner = TS[(TS > 0) & (TS < 600)]
    stopped = TS[k - 1::k]
    assert set(stopped[(stopped > 0) & (stopped < 600)]) <= steps
    # no step holds k or more output times inside it
    assert np.all(_inside(inner, tr.sol.ts) <= k - 1)
    assert np.array_equal(tr.t[tr.eval_index], TS)


def test_without_stops_long_steps_cross_many_outputs(pka):
    tr = _solve(pka, False)
    inner = TS[(TS > 0) & (TS < 600)]
    assert _inside(inner, tr.sol.ts).max() > 20             # PKA's late steps are long
    assert tr.stats["n_steps"] < _solve(pka, 8).stats["n_steps"]


def test_h_free_is_the_size_before_a_stop(pka):
    tr = _solve(pka, 8)
    h = np.diff(tr.sol.ts)
    hf = tr.sol.h_free
    assert hf.shape == h.shape and np.all(hf >= h)
    # steps that end at a stop (an output time or the end) may have been shortened; every
    # other step keeps its own size exactly
    at_stop = np.isin(tr.sol.ts[1:], np.append(TS[7::8], 600.0))
    np.testing.assert_allclose(hf[~at_stop], h[~at_stop], rtol=1e-12, atol=0)
    assert np.any(hf[at_stop] > 1.5 * h[at_stop])   # late steps were cut short by the stops
    # without stops only the last step can be shortened
    tr0 = _solve(pka, False)
    h0 = np.diff(tr0.sol.ts)
    np.testing.assert_allclose(tr0.sol.h_free[:-1], h0[:-1], rtol=1e-12, atol=0)
    assert tr0.sol.h_free[-1] >= h0[-1]


def test_refinement_measures_shortened_steps_by_their_free_size(camkii):
    """With every output a stop, the late steps (cut to the output spacing from a free size many
    times larger) are not split; measured by their own length they would all be."""
    tr = _solve(camkii, 1)
    rt = refine_grid(tr, 4)
    late = tr.t > 100.0
    assert np.sum(rt.t > 100.0) == np.sum(late)            # nothing added where the solution is slow
    assert rt.t.size > tr.t.size                           # the transient is still refined
    # the same trajectory with h_free forgotten: every late interval split in 4
    tr.sol.h_free = np.diff(tr.sol.ts)
    rt_len = refine_grid(tr, 4)
    assert np.sum(rt_len.t > 100.0) >= 3 * np.sum(late)


@pytest.mark.parametrize("bad", [0, -2, 1.5, "all", None])
def test_bad_stop_at_outputs(pka, bad):
    with pytest.raises(PbsensError, match="'stop_at_outputs'"):
        _solve(pka, bad)


def test_states_inside_a_long_step_are_less_accurate_than_at_stops():
    """The cause of CaMKII's former error floor: near its equilibrium Rodas5P takes one step over
    [91, 493]; the dense output inside it is ~100x less accurate than the steps' own ends."""
    m, _ = _camkii_reference()
    ref = pbsens.solve_states(m, (0.0, 600.0), t_eval=TS, method="Radau", rtol=1e-10, atol=1e-12)
    xr = ref.x[ref.eval_index]
    late = (TS > 100.0) & (TS < 490.0)

    def err(tr):
        x = tr.x[tr.eval_index]
        return np.median(np.abs(x - xr).max(axis=1)[late] / np.abs(xr[late]).max(axis=1))

    e_dense, e_stop = err(_solve(m, False)), err(_solve(m, 1))
    assert e_dense > 1e-12                 # within the tolerance, but ...
    assert e_stop < 0.1 * e_dense          # ... the method's own steps are far more accurate


def test_camkii_sensitivities_no_longer_limited_by_interpolated_states():
    """Median relative error of S (201 outputs, rtol 1e-5): 2.5e-7 on interpolated outputs,
    ~4e-12 with the default stops (LSODA + exp2 at the same tolerance: 3.4e-10)."""
    m, ref = _camkii_reference()
    e_dense = np.median(pbsens.relative_error(pbsens.sensitivities(m, _solve(m, False), method="exp2"), ref))
    r = pbsens.sensitivities(m, t_span=(0.0, 600.0), t_eval=TS, method="exp2", solver="rodas5p",
                             rtol=1e-5, atol=1e-6)
    e_default = np.median(pbsens.relative_error(r, ref))
    assert e_dense > 1e-8
    assert e_default < 1e-10
