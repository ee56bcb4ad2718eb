"""``r.error_estimate``, ``sens_rtol`` and the state-error checks, against tight forward
sensitivities (Radau, rtol 1e-10, atol 1e-12) as the independent reference."""
import warnings

import numpy as np
import pytest

import pbsens
from pbsens.errors import AccuracyWarning, PbsensError

SPANS = {"PKA": 600.0, "CaMKII": 600.0, "Chua": 10.0}
_CACHE = {}


def case(name):
    """(model, trajectory at rtol 1e-5, tight FS reference on its grid), computed once."""
    if name not in _CACHE:
        m = pbsens.load_model(name)
        span = (0.0, SPANS[name])
        tr = pbsens.solve_states(m, span, rtol=1e-5, atol=1e-6)
        ref = pbsens.forward_sensitivities(m, span, t_eval=tr.t, method="Radau", rtol=1e-10, atol=1e-12)
        _CACHE[name] = (m, tr, ref)
    return _CACHE[name]


@pytest.mark.parametrize("name", list(SPANS))
@pytest.mark.parametrize("method", ["exp", "exp2", "pbsr", "pbsr2"])
def test_estimate_tracks_true_error(name, method):
    m, tr, ref = case(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        r = pbsens.sensitivities(m, tr, method=method, estimate_error=True)
    E = pbsens.relative_error(r, ref)
    est = r.error_estimate
    assert est.shape == E.shape and np.all(np.isfinite(est)) and np.all(est >= 0)
    sel = E > 1e-10
    assert sel.sum() >= 10
    q = est[sel] / E[sel]
    assert np.mean((q >= 0.1) & (q <= 10)) >= 0.9, np.quantile(q, [0, 0.05, 0.5, 0.95, 1])
    assert np.min(q) >= 1 / 30, (np.min(q), r.t[sel][np.argmin(q)])
    # the per-parameter estimate is a finite, non-negative array of the right shape
    assert r.error_estimate_params.shape == (r.t.size, m.n_params)
    assert np.all(np.isfinite(r.error_estimate_params))


@pytest.mark.parametrize("name", list(SPANS))
def test_default_call_estimate_is_of_the_default_result(name):
    """With every default (exp2 on Rodas5P, the midpoint correction) the estimate keeps the correction:
    ``S`` is the default call's, and the estimate (both parts marched with the correction, METHOD.md
    section 11) tracks its true error against the Radau reference."""
    m, tr, ref = case(name)
    span = (0.0, SPANS[name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        plain = pbsens.sensitivities(m, t_span=span, t_eval=tr.t)
        r = pbsens.sensitivities(m, t_span=span, t_eval=tr.t, estimate_error=True)
    assert r.options["midpoint"] is True and plain.options["midpoint"] is True
    assert np.array_equal(r.S, plain.S)
    E = pbsens.relative_error(r, ref)
    sel = E > 1e-10
    assert sel.sum() >= 10
    q = r.error_estimate[sel] / E[sel]
    assert np.mean((q >= 0.1) & (q <= 10)) >= 0.9, np.quantile(q, [0, 0.05, 0.5, 0.95, 1])
    # under by more than 30x at no more than one output where the reference can tell, and by more
    # than 100x nowhere. CaMKII's first two outputs (t = 3e-9, 7e-9) have E = 4e-10, the Radau
    # reference's own level at rtol 1e-10, with or without the correction. Since the bent intervals
    # are corrected too (METHOD.md section 14), CaMKII's E on [3, 12] fell from 1e-3 to 1e-6..1e-4
    # and is set by the states' error, whose estimate changes sign: at t = 9.14 the estimate is 61x
    # under (E 5.7e-5), at t = 8.19 15x; everywhere else within 10x.
    firm = E[sel] > 1e-8
    assert np.sum(q[firm] < 1 / 30) <= 1, np.sort(q[firm])[:3]
    assert np.min(q[firm]) >= 1 / 100, (np.min(q[firm]), r.t[sel][firm][np.argmin(q[firm])])


def test_estimate_without_dense_output_uses_hermite():
    """A (t, x) pair has no dense output: midpoint states come from Hermite interpolation."""
    m, tr, ref = case("PKA")
    r = pbsens.sensitivities(m, (tr.t, tr.x), method="exp2", p=tr.p, estimate_error=True)
    assert r.state_error_estimate is None           # nothing to re-solve from a bare (t, x)
    E = pbsens.relative_error(r, ref)
    sel = E > 1e-10
    q = r.error_estimate[sel] / E[sel]
    assert np.mean((q >= 0.1) & (q <= 10)) >= 0.9


@pytest.mark.parametrize("name", ["PKA", "Chua"])
def test_sens_rtol_meets_tolerance(name):
    m, tr, ref = case(name)
    r0 = pbsens.sensitivities(m, tr, method="exp2", estimate_error=True)
    r = pbsens.sensitivities(m, tr, method="exp2", sens_rtol=1e-4)
    E0 = pbsens.relative_error(r0, ref)[1:]
    E = pbsens.relative_error(r, ref)[1:]
    assert np.mean(E0 > 1e-4) > 0.2                   # the tolerance has something to do
    assert np.median(E) <= 1e-4
    assert E.max() <= 1e-3
    assert np.mean(E > 1e-4) < np.mean(E0 > 1e-4)
    assert r.subdivisions > 0
    assert r.grid.size > tr.t.size
    np.testing.assert_array_equal(r.t, tr.t)           # outputs unchanged by the refinement


def test_sens_rtol_camkii_state_limited():
    """CaMKII at rtol 1e-5: the state solve limits S (max E 1.2e-2 on its states); with
    sens_rtol the states are solved tighter and max E meets 1e-3. Without the tightening,
    the estimate (with its state part) says so instead of claiming 1e-4."""
    m, tr, ref = case("CaMKII")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        r = pbsens.sensitivities(m, tr, method="exp2", sens_rtol=1e-4)
        r0 = pbsens.sensitivities(m, tr, method="exp2", sens_rtol=1e-4, tighten_states=False)
    E = pbsens.relative_error(r, ref)
    assert np.median(E[1:]) <= 1e-4 and E[1:].max() <= 1e-3, (np.median(E[1:]), E[1:].max())
    assert r.options["state_tighten"] > 1
    E0 = pbsens.relative_error(r0, ref)
    assert r0.options["state_tighten"] == 1 and E0.max() > 1e-3
    k = int(np.argmax(E0))
    assert r0.error_estimate[k] >= E0[k] / 30


def test_sens_rtol_first_order_keeps_extrapolation_with_state_part():
    """A first-order march (``exp``) with sens_rtol returns the extrapolated pair; the state
    part must compare the plain march on both states, not the extrapolated result with the
    plain march on tight states (that counted the discretization error as the states', solved
    tighter and returned the plain march: PKA median E 1.1e-4, 1.6x above its estimate)."""
    m, tr, ref = case("PKA")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        r = pbsens.sensitivities(m, tr, method="exp", sens_rtol=1e-4)
    E = pbsens.relative_error(r, ref)[1:]
    assert np.median(E) <= 1e-4 and E.max() <= 1e-3, (np.median(E), E.max())
    # the estimate is of the returned result (the bug left E 1.6x above it at every output time)
    big = E > 1e-6
    assert big.sum() >= 10
    assert np.median(E[big] / r.error_estimate[1:][big]) <= 1.3, np.quantile(E[big] / r.error_estimate[1:][big],
                                                                          [0, 0.5, 1])
    assert r.state_error_estimate[1:].max() < 1e-4      # PKA's states at rtol 1e-5 do not limit S there


def test_sens_rtol_never_solves_states_again(monkeypatch):
    m, tr, ref = case("Chua")
    import importlib
    front = importlib.import_module("pbsens.sensitivity.posthoc")
    from pbsens.sensitivity import error as error_estimate

    def forbidden(*a, **k):
        raise AssertionError("state solver called")
    monkeypatch.setattr(front, "solve_states", forbidden)
    monkeypatch.setattr(error_estimate, "tight_states", forbidden)
    r = pbsens.sensitivities(m, tr, method="exp2", sens_rtol=1e-4, state_error=None)
    assert r.subdivisions > 0
    with pytest.raises(AssertionError, match="state solver called"):   # the patch is effective
        pbsens.sensitivities(m, tr, method="exp2", state_error="resolve")
    E = pbsens.relative_error(r, ref)
    assert np.median(E[1:]) <= 1e-4


def test_sens_rtol_limit_warns_with_time_range():
    m, tr, ref = case("Chua")
    with pytest.warns(AccuracyWarning, match=r"t in \["):
        pbsens.sensitivities(m, tr, method="exp", sens_rtol=1e-8, max_refine=1, state_error=None)


def test_state_part_flags_a_loose_state_solve():
    """States at rtol 1e-2: the state solve's effect on S is large and warned about; the
    estimate stays within the factor-30 bound of the true error."""
    m = pbsens.load_model("Chua")
    _, _, ref = case("Chua")
    tr = pbsens.solve_states(m, (0.0, 10.0), t_eval=ref.t[::10], rtol=1e-2, atol=1e-4)
    with pytest.warns(AccuracyWarning, match="state solve"):
        r = pbsens.sensitivities(m, tr, method="exp2", estimate_error=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        E = pbsens.relative_error(r, ref)
    assert r.state_error_estimate.max() > 1e-2
    sel = E > 1e-10
    assert np.min(r.error_estimate[sel] / E[sel]) >= 1 / 30


def test_bad_tolerances_name_the_argument():
    m, tr, _ = case("Chua")
    with pytest.raises(PbsensError, match="sens_rtol"):
        pbsens.sensitivities(m, tr, sens_rtol=-1)
    with pytest.raises(PbsensError, match="sens_atol"):
        pbsens.sensitivities(m, tr, sens_atol=1e-6)
    with pytest.raises(PbsensError, match="sens_atol"):
        pbsens.sensitivities(m, tr, sens_rtol=1e-4, sens_atol=-1.0)
    with pytest.raises(PbsensError, match="state_error"):
        pbsens.sensitivities(m, tr, state_error="twice")
    with pytest.raises(PbsensError, match="state_error"):
        pbsens.sensitivities(m, (tr.t, tr.x), p=tr.p, state_error="resolve")


def test_relative_error_state_difference_and_log_scale():
    m, tr, ref = case("PKA")
    r = pbsens.sensitivities(m, tr, method="exp2", estimate_error=False)
    assert r.error_estimate is None
    E, dx = pbsens.relative_error(r, ref, return_state=True)
    expect_dx = np.linalg.norm(r.x - ref.x, axis=1)[1:] / np.linalg.norm(ref.x, axis=1)[1:]
    assert dx[0] == 0.0                                # both start at x0 = 0: absolute difference
    np.testing.assert_allclose(dx[1:], expect_dx, rtol=1e-12)
    # log-parameter scale: p_j S_ij, computed here independently
    El = pbsens.relative_error(r, ref, scale="log")
    A, B = r.S * r.p, ref.S * r.p
    num = np.sqrt(((A - B) ** 2).sum(axis=(1, 2)))
    den = np.sqrt((B ** 2).sum(axis=(1, 2)))
    np.testing.assert_allclose(El[1:], num[1:] / den[1:], rtol=1e-12)
    with pytest.raises(PbsensError, match="scale"):
        pbsens.relative_error(r, ref, scale="ln")
    # a result on a very different trajectory is flagged
    loose = pbsens.solve_states(m, (0.0, 600.0), t_eval=r.t[::20], rtol=1e-1, atol=1e-1)
    rl = pbsens.sensitivities(m, loose, method="exp2", estimate_error=False)
    with pytest.warns(AccuracyWarning, match="different trajectories"):
        pbsens.relative_error(rl, ref)


def test_scaled_switch_is_invariant_under_unit_change(tmp_path):
    """x2 in units 1000x smaller: ``||A||_1`` grows by ~1000 and sends pbsr to the
    exponential branch, the scaled norm ``||D^-1 A D||_1`` is unchanged (up to atol)."""
    from conftest import make_model
    a = make_model(tmp_path, "lin_a", {"x1": 1.0, "x2": 1.0}, {"k1": 0.5, "k2": 0.3},
                   {"x1": "-k1*x1 + k2*x2*(1 + 0.1*sin(t))", "x2": "k1*x1 - k2*x2"})
    b = make_model(tmp_path, "lin_b", {"x1": 1.0, "x2": 1000.0}, {"k1": 0.5, "k2": 0.3},
                   {"x1": "-k1*x1 + k2*(x2/1000)*(1 + 0.1*sin(t))", "x2": "1000*(k1*x1 - k2*x2/1000)"})
    ta = pbsens.solve_states(a, (0.0, 20.0), rtol=1e-6, atol=1e-9)
    tb = pbsens.solve_states(b, (0.0, 20.0), t_eval=ta.t, rtol=1e-6, atol=1e-9)
    xb = tb.x[tb.eval_index]
    ra = pbsens.sensitivities(a, ta, method="pbsr", norm="scaled", estimate_error=False)
    rb = pbsens.sensitivities(b, (ta.t, xb), p=tb.p, method="pbsr", norm="scaled", atol=1e-9,
                              estimate_error=False)
    rb1 = pbsens.sensitivities(b, (ta.t, xb), p=tb.p, method="pbsr", norm="1", estimate_error=False)
    assert np.mean(ra.branch == rb.branch) >= 0.95
    assert np.mean(rb1.branch == "pbs") < np.mean(rb.branch == "pbs")


PETAB = __import__("pathlib").Path(__file__).parent / "data" / "petab"


def petab_case():
    """Perelson (PEtab, one condition, nominal parameters): the setup the Problem builds, the
    trajectory at rtol 1e-5 and the tight FS reference at the condition's output times."""
    if "perelson" not in _CACHE:
        import pbsens.petab
        from pbsens.problems.conditions import problem_conditions
        problem = pbsens.petab.load(PETAB / "Perelson_Science1996" / "Perelson_Science1996.yaml")
        (name, times, p, x0, S0, has_stops), = list(problem_conditions(problem))
        assert not has_stops and times.size >= 10
        m = problem.model
        span = (0.0, float(times[-1]))
        tr = pbsens.solve_states(m, span, t_eval=times, p=p, x0=x0, rtol=1e-5, atol=1e-6)
        ref = pbsens.forward_sensitivities(m, span, t_eval=times, p=p, x0=x0, S0=S0, method="Radau",
                                           rtol=1e-10, atol=1e-12)
        _CACHE["perelson"] = (problem, m, tr, ref, times, S0)
    return _CACHE["perelson"]


@pytest.mark.parametrize("method", ["exp", "exp2", "pbsr"])
def test_petab_estimate_within_factor_10(method):
    """On a PEtab problem (its own parameters, initial states and output times) the estimate
    is within 10x of the true error at >= 90 % of the output times, never 30x below it."""
    problem, m, tr, ref, times, S0 = petab_case()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        r = pbsens.sensitivities(m, tr, method=method, t_eval=times, S0=S0, estimate_error=True)
    E = pbsens.relative_error(r, ref)[1:]
    est = r.error_estimate[1:]
    sel = E > 1e-10
    assert sel.sum() >= 10
    q = est[sel] / E[sel]
    assert np.mean((q >= 0.1) & (q <= 10)) >= 0.9, q
    assert np.min(q) >= 1 / 30, q


@pytest.mark.parametrize("method", ["exp2", "pbsr"])
def test_petab_sens_rtol_meets_1e_4(method):
    """sens_rtol=1e-4 on the PEtab problem: true median E <= 1e-4 and max <= 1e-3 (without it
    pbsr's median is above 1e-2 there)."""
    problem, m, tr, ref, times, S0 = petab_case()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        r = pbsens.sensitivities(m, tr, method=method, t_eval=times, S0=S0, sens_rtol=1e-4)
    E = pbsens.relative_error(r, ref)[1:]
    assert np.median(E) <= 1e-4 and E.max() <= 1e-3, (np.median(E), E.max())
    assert r.subdivisions > 0


def test_condition_estimates_of_a_problem():
    """``condition_estimates`` (what ``pbsens petab --estimate-error`` prints): per condition,
    the largest estimate at the Problem's own tolerances, within 10x of the true largest error."""
    from pbsens.problems.conditions import condition_estimates
    problem, m, tr, ref, times, S0 = petab_case()
    est = condition_estimates(problem, method="pbsr", solver="LSODA", rtol=1e-5, atol=1e-6)
    assert list(est) == problem.conditions
    E = pbsens.relative_error(pbsens.sensitivities(m, tr, method="pbsr", t_eval=times, S0=S0), ref)[1:]
    assert 0.1 <= est[problem.conditions[0]] / E.max() <= 10, (est, E.max())


def test_exp2_condition_estimate_is_of_the_corrected_march():
    """exp2's estimate keeps the midpoint correction, so it is of the march ``evaluate`` returns:
    on Perelson it was 1.0e-4 (of the sub-step march it used to take) where the corrected march's
    largest error is 2.7e-6; now within 3x of the latter."""
    from pbsens.problems.conditions import condition_estimates, problem_conditions
    from pbsens.simulation.segments import simulate
    problem, m, tr, ref, times, S0 = petab_case()
    est = condition_estimates(problem, method="exp2")
    (name, times, p, x0, S0, _), = list(problem_conditions(problem))
    sim = simulate(m, times, p, x0=x0, S0=S0, method="exp2", solver="rodas5p", rtol=1e-8, atol=1e-10)
    E = pbsens.relative_error(sim, ref)[1:]
    assert E.max() > 1e-7                      # well above the reference's own error
    assert 1 / 3 <= est[name] / E.max() <= 3, (est[name], E.max())


def test_condition_estimates_default_to_what_evaluate_computes():
    """Without solver options the estimate is of ``Problem.evaluate``'s own simulation (the
    compiled Rodas5P at rtol 1e-8, atol 1e-10; it was LSODA's, whatever evaluate ran), and
    within 10x of that simulation's true largest error."""
    from pbsens.problems.conditions import condition_estimates, problem_conditions
    from pbsens.simulation.segments import simulate
    problem, m, tr, ref, times, S0 = petab_case()
    est = condition_estimates(problem, method="pbsr")
    assert est == condition_estimates(problem, method="pbsr", solver="rodas5p", rtol=1e-8, atol=1e-10)
    assert est != condition_estimates(problem, method="pbsr", solver="LSODA", rtol=1e-8, atol=1e-10)
    (name, times, p, x0, S0, _), = list(problem_conditions(problem))
    sim = simulate(m, times, p, x0=x0, S0=S0, method="pbsr", solver="rodas5p", rtol=1e-8, atol=1e-10)
    E = pbsens.relative_error(sim, ref)[1:]
    assert 0.1 <= est[name] / E.max() <= 10, (est[name], E.max())


@pytest.mark.parametrize("name", ["PKA", "CaMKII"])
def test_default_call_median_error(name):
    """Issue #41: with every default and 201 output times, the median E of S against Radau forward
    sensitivities (rtol 1e-10) is at most 1e-6 on PKA and CaMKII. PKA's slow tail (outputs every 3
    inside Rodas5P steps of 30-100) reached it only once the bent output intervals took the midpoint
    correction (METHOD.md section 14, "Where the states bend"; before: median 5.5e-6)."""
    m = pbsens.load_model(name)
    T = SPANS[name]
    ts = np.linspace(0.0, T, 201)
    ref = pbsens.forward_sensitivities(m, (0.0, T), t_eval=ts, method="Radau", rtol=1e-10, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        r = pbsens.sensitivities(m, t_span=(0.0, T), t_eval=ts)
    E = pbsens.relative_error(r, ref)[1:]
    assert np.median(E) <= 1e-6, np.median(E)
