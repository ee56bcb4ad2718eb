"""refine_grid: a Rodas5P trajectory's grid split from its dense output, and its effect on post-hoc S."""
import numpy as np
import pytest

import pbsens
from pbsens.errors import PbsensError
from pbsens.solvers.refine import refine_grid


@pytest.fixture(scope="module")
def pka():
    return pbsens.load_model("PKA")


@pytest.fixture(scope="module")
def pka_traj(pka):
    ts = np.linspace(0.0, 600.0, 201)
    return pbsens.solve_states(pka, (0.0, 600.0), t_eval=ts, method="rodas5p", rtol=1e-5, atol=1e-6)


def test_refined_grid_contains_original_grid_and_t_eval_exactly(pka_traj):
    tr = pka_traj
    rt = refine_grid(tr, 4)
    assert np.all(np.diff(rt.t) > 0)
    assert np.all(np.isin(tr.t, rt.t))                         # every original point, bit for bit
    assert np.array_equal(rt.t[rt.eval_index], tr.t_eval)
    assert np.array_equal(rt.x[np.searchsorted(rt.t, tr.t)], tr.x)   # original states unchanged
    steps = tr.sol.ts
    # every accepted step holds 3 interior points (none of PKA's output times falls within 1/1000 of one)
    per_step = np.diff(np.searchsorted(rt.t, steps))
    n_eval_inside = np.diff(np.searchsorted(tr.t, steps))
    assert np.all(per_step - n_eval_inside == 3)


def test_interior_states_match_dense_output(pka_traj):
    tr = pka_traj
    rt = refine_grid(tr, 3)
    new = ~np.isin(rt.t, tr.t)
    assert new.sum() == 2 * (tr.sol.ts.size - 1)
    # midpoints of thirds: the dense output evaluated independently, one time at a time
    for k in np.flatnonzero(new)[::17]:
        np.testing.assert_allclose(rt.x[k], tr.sol(float(rt.t[k])), rtol=0, atol=0)
    # and the interior points are the equal splits of each accepted step
    h = np.diff(tr.sol.ts)
    expected = np.sort(np.concatenate([tr.sol.ts[:-1] + h / 3, tr.sol.ts[:-1] + 2 * h / 3]))
    np.testing.assert_allclose(rt.t[new], expected, rtol=0, atol=1e-12)


def test_m1_is_identity_and_bad_input_raises(pka_traj, pka):
    assert refine_grid(pka_traj, 1) is pka_traj
    for bad in (0, -2, 2.5, True, "4"):
        with pytest.raises(PbsensError, match="substeps"):
            refine_grid(pka_traj, bad)
    no_dense = pbsens.solve_states(pka, (0.0, 10.0), method="rodas5p", dense_output=False)
    with pytest.raises(PbsensError, match="dense output"):
        refine_grid(no_dense, 2)
    with pytest.raises(PbsensError, match="substeps"):
        pbsens.sensitivities(pka, t_span=(0.0, 10.0), method="exp2", solver="rodas5p", substeps=0)
    with pytest.raises(PbsensError, match="substeps"):
        pbsens.sensitivities(pka, (pka_traj.t, pka_traj.x), method="exp2", substeps=2)


def test_rodas5p_exp2_with_refinement_no_worse_than_lsoda(pka):
    """Issue 19: with refinement, rodas5p + exp2 median E on PKA at rtol 1e-5 <= LSODA + exp2's,
    both against a tight forward-sensitivity reference."""
    ts = np.linspace(0.0, 600.0, 201)
    ref = pbsens.forward_sensitivities(pka, (0.0, 600.0), t_eval=ts, method="Radau", rtol=1e-10, atol=1e-12)
    kw = dict(t_span=(0.0, 600.0), t_eval=ts, method="exp2", rtol=1e-5, atol=1e-6)
    e_lsoda = pbsens.relative_error(pbsens.sensitivities(pka, solver="LSODA", **kw), ref)
    r = pbsens.sensitivities(pka, solver="rodas5p", **kw)
    e_rodas = pbsens.relative_error(r, ref)
    assert r.options["substeps"] > 1
    assert np.array_equal(r.t, ts)
    assert np.median(e_rodas) <= np.median(e_lsoda)
    # the refinement is what does it: on the solver's own grid the error is larger
    e_raw = pbsens.relative_error(pbsens.sensitivities(pka, solver="rodas5p", substeps=1, **kw), ref)
    assert np.max(e_rodas) < np.max(e_raw)
