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
    # outputs interpolated (no stops): the refinement is tested against steps that cross them
    return pbsens.solve_states(pka, (0.0, 600.0), t_eval=ts, method="rodas5p", rtol=1e-5, atol=1e-6,
                               stop_at_outputs=False)


def test_refined_grid_contains_original_grid_and_t_eval_exactly(pka_traj):
    tr = pka_traj
    rt = refine_grid(tr, 4, split="steps")
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
    rt = refine_grid(tr, 3, split="steps")
    new = ~np.isin(rt.t, tr.t)
    assert new.sum() == 2 * (tr.sol.ts.size - 1)
    # midpoints of thirds: the dense output evaluated independently, one time at a time
    for k in np.flatnonzero(new)[::17]:
        np.testing.assert_allclose(rt.x[k], tr.sol(float(rt.t[k])), rtol=0, atol=0)
    # and the interior points are the equal splits of each accepted step
    h = np.diff(tr.sol.ts)
    expected = np.sort(np.concatenate([tr.sol.ts[:-1] + h / 3, tr.sol.ts[:-1] + 2 * h / 3]))
    np.testing.assert_allclose(rt.t[new], expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("m", [2, 4, 7])
def test_gap_split_bounds_every_interval_by_its_step(pka_traj, m):
    """split="gaps": no interval longer than H/m (H its accepted step), intervals already that short
    untouched, each long one cut into ceil(m L / H) equal parts, states from the dense output."""
    tr = pka_traj
    rt = refine_grid(tr, m)
    steps = tr.sol.ts
    assert np.all(np.diff(rt.t) > 0)
    assert np.array_equal(rt.x[np.searchsorted(rt.t, tr.t)], tr.x)       # original points, bit for bit
    assert np.array_equal(rt.t[rt.eval_index], tr.t_eval)
    j_new = np.searchsorted(steps, rt.t[:-1], side="right") - 1
    H_new = steps[j_new + 1] - steps[j_new]
    assert np.all(np.diff(rt.t) <= H_new / m * (1 + 1e-9))
    # the number of new points, counted independently from the original grid
    L = np.diff(tr.t)
    j = np.searchsorted(steps, tr.t[:-1], side="right") - 1
    H = steps[j + 1] - steps[j]
    expected = sum(max(int(np.ceil(m * l / hh - 1e-9)), 1) - 1 for l, hh in zip(L, H))
    assert rt.t.size - tr.t.size == expected
    # fewer points than the per-step split wherever output times already cut a step finely
    assert rt.t.size <= refine_grid(tr, m, split="steps").t.size
    new = np.flatnonzero(~np.isin(rt.t, tr.t))
    for k in new[::13]:
        np.testing.assert_allclose(rt.x[k], tr.sol(float(rt.t[k])), rtol=0, atol=0)
        # equal parts: the new point sits at a multiple of its parent interval / parts
        i = np.searchsorted(tr.t, rt.t[k]) - 1
        n = int(np.ceil(m * L[i] / H[i] - 1e-9))
        frac = (rt.t[k] - tr.t[i]) / L[i] * n
        assert abs(frac - round(frac)) < 1e-6


def test_gap_split_adds_nothing_where_outputs_are_dense(pka):
    """A long step crossed by many output times (the equilibrium) gets no new points."""
    ts = np.linspace(300.0, 600.0, 301)        # spacing 1, PKA's late steps are far longer
    tr = pbsens.solve_states(pka, (300.0, 600.0), t_eval=ts, method="rodas5p", rtol=1e-5, atol=1e-6)
    H = np.diff(tr.sol.ts)
    assert H.max() > 4.0                       # the premise: steps longer than 4 output spacings
    rt = refine_grid(tr, 4)
    long_steps = np.flatnonzero(H >= 4.0 * (1 + 1e-9))
    for j in long_steps:
        a, b = tr.sol.ts[j], tr.sol.ts[j + 1]
        inside_old = np.count_nonzero((tr.t > a) & (tr.t < b))
        inside_new = np.count_nonzero((rt.t > a) & (rt.t < b))
        # every interval inside is at most one output spacing <= H/4 long: nothing to split
        assert inside_new == inside_old


def test_m1_is_identity_and_bad_input_raises(pka_traj, pka):
    assert refine_grid(pka_traj, 1) is pka_traj
    for bad in (0, -2, 2.5, True, "4"):
        with pytest.raises(PbsensError, match="substeps"):
            refine_grid(pka_traj, bad)
    with pytest.raises(PbsensError, match="split"):
        refine_grid(pka_traj, 2, split="uniform")
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


def test_only_mask_refines_marked_intervals_only(pka_traj):
    tr = pka_traj
    only = np.zeros(tr.t.size - 1, dtype=bool)
    only[::2] = True
    rt = refine_grid(tr, 4, only=only)
    full = refine_grid(tr, 4)
    new = rt.t[~np.isin(rt.t, tr.t)]
    parent = np.searchsorted(tr.t, new) - 1
    assert np.all(only[parent])                                 # nothing inside an unmarked interval
    full_new = full.t[~np.isin(full.t, tr.t)]
    assert np.array_equal(new, full_new[only[np.searchsorted(tr.t, full_new) - 1]])
    with pytest.raises(PbsensError, match="only"):
        refine_grid(tr, 4, only=np.ones(3, dtype=bool))


def test_pbsr2_on_rodas5p_refines_exponential_intervals_only(pka):
    """pbsr2 with Rodas5P: the switch is decided on the solver's grid, PBS intervals are not split
    (they take their own sub-steps), and S stays as accurate as LSODA + pbsr2 (median) against a
    tight forward-sensitivity reference."""
    ts = np.linspace(0.0, 600.0, 201)
    ref = pbsens.forward_sensitivities(pka, (0.0, 600.0), t_eval=ts, method="Radau", rtol=1e-10, atol=1e-12)
    kw = dict(t_span=(0.0, 600.0), t_eval=ts, method="pbsr2", rtol=1e-5, atol=1e-6)
    r = pbsens.sensitivities(pka, solver="rodas5p", **kw)
    tr = pbsens.solve_states(pka, (0.0, 600.0), t_eval=ts, method="rodas5p", rtol=1e-5, atol=1e-6)
    pbs = np.flatnonzero(r.branch == "pbs")
    assert pbs.size > 0
    # each PBS interval is an interval of the solver's grid (both ends adjacent there)
    i = np.searchsorted(tr.t, r.grid[pbs])
    assert np.array_equal(tr.t[i], r.grid[pbs]) and np.array_equal(tr.t[i + 1], r.grid[pbs + 1])
    assert r.grid.size > tr.t.size                              # the exponential intervals were refined
    e = pbsens.relative_error(r, ref)
    e_lsoda = pbsens.relative_error(pbsens.sensitivities(pka, solver="LSODA", **kw), ref)
    assert np.median(e) <= 1.2 * np.median(e_lsoda)
    assert np.max(e) < 1e-3


def test_lone_points_by_hand():
    """Steps 0 | 1.5 | 3 | 5 | 6, outputs 0, 2, 4, 6. 1.5 is alone between the outputs 0 and 2 but
    [0, 2] is longer than both steps meeting there (1.5): kept. 3 is alone in [2, 4], as long as
    the step [3, 5]: dropped. 5 is alone in [4, 6], as long as [3, 5]: dropped, unless it is a stop."""
    from pbsens.solvers.refine import lone_points
    t = np.array([0.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0])
    out_index = np.array([0, -1, 1, -1, 2, -1, 3])
    steps = np.array([0.0, 1.5, 3.0, 5.0, 6.0])
    assert lone_points(t, out_index, steps).tolist() == [False, False, False, True, False, True, False]
    keep = np.isin(t, [5.0])
    assert lone_points(t, out_index, steps, keep).tolist() == [False, False, False, True, False, False, False]
    # two points between two outputs: neither is alone
    t2 = np.array([0.0, 1.0, 1.5, 2.0])
    assert not lone_points(t2, np.array([0, -1, -1, 1]), np.array([0.0, 1.0, 1.5, 2.0])).any()
    # a point inside one long step (an output of an earlier merge) and the ends are never dropped
    assert lone_points(np.array([0.0, 0.5, 1.0]), np.array([0, -1, 1]), np.array([0.0, 1.0])).tolist() == \
        [False, True, False]


class _Parabola:
    """A dense output of x(t) = (t^2, 1) with one accepted step [0, 10] (``ts``)."""
    ts = np.array([0.0, 10.0])

    def __call__(self, t):
        t = np.atleast_1d(np.asarray(t, dtype=float))
        return np.vstack([t * t, np.ones_like(t)])


def test_bent_intervals_by_hand():
    """x = t^2 leaves its chord over [a, a + L] by L^2/4 at the midpoint: with rtol 0 and atol 1 the
    interval is bent exactly where L^2/4 > CHORD_TOL (and the straight second state never is)."""
    from pbsens.solvers.refine import CHORD_TOL, bent_intervals
    L_bent, L_straight = np.sqrt(8 * CHORD_TOL), np.sqrt(2 * CHORD_TOL)      # L^2/4 = 2 and 0.5 CHORD_TOL
    t = np.array([0.0, L_straight, L_straight + L_bent])
    sol = _Parabola()
    x, x_mid = sol(t).T, sol(0.5 * (t[:-1] + t[1:])).T
    assert bent_intervals(x, x_mid, 0.0, 1.0).tolist() == [False, True]
    # relative to the states: atol 0, rtol 1 and |x| = 1 at the ends of [1, 1 + L]: t^2 ~ 1
    t1 = np.array([1.0, 1.0 + L_straight / 2])
    assert bent_intervals(sol(t1).T, sol(t1.mean()).T, 1.0, 0.0).tolist() == [False]
    # zero weight and no deviation (the constant state with atol = rtol = 0): not bent, no warning
    with np.errstate(all="raise"):
        assert bent_intervals(np.ones((2, 1)), np.ones((1, 1)), 0.0, 0.0).tolist() == [False]


def test_midpoint_plan_takes_bent_intervals_with_tolerances():
    """The first two intervals are shorter than 1/4 of the one accepted step [0, 10], the last is
    longer, so ``substeps=4`` alone corrects the last only; with the solve's tolerances the bent
    second interval is corrected too, its midpoint state from the dense output."""
    from pbsens.solvers.refine import CHORD_TOL, midpoint_plan
    sol = _Parabola()
    L_bent, L_straight = np.sqrt(8 * CHORD_TOL), np.sqrt(2 * CHORD_TOL)
    t = np.array([0.0, L_straight, L_straight + L_bent, 10.0])
    x = sol(t).T
    x_mid, mid_index = midpoint_plan(t, sol, 4)
    assert mid_index.tolist() == [-1, -1, 0] and x_mid.shape == (1, 2)
    x_mid, mid_index = midpoint_plan(t, sol, 4, x, (0.0, 1.0))
    assert mid_index.tolist() == [-1, 0, 1]
    assert np.allclose(x_mid, sol(0.5 * (t[1:] + t[:-1]))[:, 1:].T)
    # a NaN rtol (a hand-made Trajectory) keeps the length rule only
    assert midpoint_plan(t, sol, 4, x, (float("nan"), 1.0))[1].tolist() == [-1, -1, 0]
