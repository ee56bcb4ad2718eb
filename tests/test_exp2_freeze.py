"""exp2 on a refined Rodas5P grid with the exponentiated matrix frozen per solver gap
(``sensitivities(..., freeze=...)``), against tight forward sensitivities (scipy Radau, rtol 1e-10)
and, for a constant Jacobian, against the unfrozen march (the freeze must then change nothing).

Bounds (rtol 1e-5, atol 1e-6, 201 outputs; docs/PERFORMANCE.md): the frozen march's median E may
grow over the unfrozen one's by at most 3x and stays below LSODA + exp2's on PKA and CaMKII."""

import numpy as np
import pytest

import pbsens
from pbsens.errors import PbsensError
from conftest import make_model, tight_case

CASES = {"PKA": 600.0, "CaMKII": 600.0, "Chua": 10.0}


def _case(name):
    return tight_case(name, CASES[name])


def _exp2(m, ts, **kw):
    # the sub-step path (freezing applies there; the default marches long gaps with the midpoint
    # correction instead: tests/test_exp2_midpoint.py)
    return pbsens.sensitivities(m, t_span=(0.0, ts[-1]), t_eval=ts, method="exp2", solver="rodas5p",
                                rtol=1e-5, atol=1e-6, **{"midpoint": False, **kw})


@pytest.mark.parametrize("name", list(CASES))
def test_freezing_saves_matrix_functions_and_keeps_accuracy(name):
    m, ts, ref = _case(name)
    plain = _exp2(m, ts, freeze=0)
    frozen = _exp2(m, ts)                       # default freeze=1
    assert plain.options["freeze"] is False and frozen.options["freeze"] is True
    assert np.array_equal(plain.grid, frozen.grid)
    assert frozen.reused.sum() > plain.reused.sum()      # some gaps were frozen
    e_plain = np.median(pbsens.relative_error(plain, ref))
    e_frozen = np.median(pbsens.relative_error(frozen, ref))
    assert e_frozen <= 3 * e_plain, (name, e_frozen, e_plain)
    assert np.max(pbsens.relative_error(frozen, ref)) <= 2 * np.max(pbsens.relative_error(plain, ref))


@pytest.mark.parametrize("name", ["PKA", "CaMKII"])
def test_frozen_median_error_no_worse_than_lsoda(name):
    m, ts, ref = _case(name)
    e_frozen = np.median(pbsens.relative_error(_exp2(m, ts), ref))
    lsoda = pbsens.sensitivities(m, t_span=(0.0, ts[-1]), t_eval=ts, method="exp2", solver="LSODA",
                                 rtol=1e-5, atol=1e-6)
    assert e_frozen <= np.median(pbsens.relative_error(lsoda, ref)), name


def test_constant_jacobian_freezing_changes_nothing(tmp_path):
    """x' = -a x + b sin(t) + c t: A = -a is constant, B = (-x, sin t, t) is not. Frozen on every
    refined gap (freeze=inf) the march must equal the unfrozen one to rounding (the same matrix,
    B at every refined point, each part's own step) and both must match the analytic S."""
    m = make_model(tmp_path, "lin_forced", {"x": 1.0}, {"a": 0.7, "b": 2.0, "c": 0.3},
                   {"x": "-a*x + b*sin(t) + c*t"})
    ts = np.linspace(0.0, 20.0, 41)
    kw = dict(t_span=(0.0, 20.0), t_eval=ts, method="exp2", solver="rodas5p", rtol=1e-6, atol=1e-8,
              midpoint=False)
    plain = pbsens.sensitivities(m, freeze=0, **kw)
    frozen = pbsens.sensitivities(m, freeze=float("inf"), **kw)
    assert frozen.options["freeze"] is True and plain.grid.size > ts.size   # the grid was refined
    np.testing.assert_allclose(frozen.S, plain.S, rtol=1e-12, atol=1e-14)
    ref = pbsens.forward_sensitivities(m, (0.0, 20.0), t_eval=ts, method="Radau", rtol=1e-11, atol=1e-13)
    assert np.median(pbsens.relative_error(frozen, ref)) < 1e-4


def test_freeze_on_a_varying_jacobian_is_not_the_plain_march(camkii):
    """freeze=inf freezes every refined gap: on CaMKII (A varies) S differs from freeze=0, and
    freezing never applies to methods other than exp2 or to an unrefined grid."""
    m, ts, ref = _case("CaMKII")
    a = _exp2(m, ts, freeze=float("inf"))
    b = _exp2(m, ts, freeze=0)
    assert not np.allclose(a.S, b.S, rtol=1e-13, atol=0)
    assert _exp2(m, ts, substeps=1).options["freeze"] is False
    r = pbsens.sensitivities(m, t_span=(0.0, 600.0), t_eval=ts, method="exp", solver="rodas5p",
                             rtol=1e-5, atol=1e-6)
    assert r.options["freeze"] is False


@pytest.mark.parametrize("bad", [-1.0, float("nan"), "yes", None])
def test_freeze_bad_values_name_the_argument(pka, bad):
    with pytest.raises(PbsensError, match="'freeze'"):
        pbsens.sensitivities(pka, t_span=(0.0, 10.0), method="exp2", solver="rodas5p", freeze=bad)


def test_state_part_of_the_estimate_compares_frozen_with_frozen():
    """With estimate_error, the state part marches the tighter states with the same frozen gaps, so
    it measures the states' effect alone: equal to the unfrozen march's state part to 1e-2 (the
    freeze changes S by ~2.5e-7 relative on PKA, median, 8x the state part of ~3e-8, which a
    frozen-against-unfrozen comparison would report instead), and the whole estimate still
    covers half the true error at every output."""
    m, ts, ref = _case("PKA")
    kw = dict(estimate_error=True)
    plain, frozen = _exp2(m, ts, freeze=0, **kw), _exp2(m, ts, **kw)
    assert frozen.options["freeze"] is True
    np.testing.assert_allclose(frozen.state_error_estimate, plain.state_error_estimate, rtol=1e-2, atol=1e-15)
    E = pbsens.relative_error(frozen, ref)
    assert np.all(frozen.error_estimate >= 0.5 * E)
