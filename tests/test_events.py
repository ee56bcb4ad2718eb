"""Time-triggered events and piecewise-in-time breakpoints: pbsens.simulation.segments against
analytic solutions (sensitivities by sympy differentiation of the closed-form solution)."""
import os

import numpy as np
import pytest
import sympy as sp

import pbsens
from pbsens.model.spec import ModelSpec
from pbsens.simulation.segments import simulate

HERE = os.path.dirname(__file__)
SBML = os.path.join(HERE, "data", "sbml")
PETAB = os.path.join(HERE, "data", "petab")   # models of the PEtab benchmark collection (BSD, see LICENSE)


def _model(d):
    return pbsens.load_model(ModelSpec.from_dict(d))


# ----------------------------------------------------------------- SBML events
@pytest.fixture(scope="module")
def dose_model():
    return pbsens.load_model(os.path.join(SBML, "event_dose.xml"))


_k, _D, _td, _x0, _h, _th, _t = sp.symbols("k D td x0 h th t")
_SYMS = (_k, _D, _td, _x0, _h, _th)
_PRE = _x0 * sp.exp(-_k * _t)
_MID = (_x0 * sp.exp(-_k * _td) + _D) * sp.exp(-_k * (_t - _td))
_POST = _h * _MID + sp.exp(-_k * (_t - _th))


def _dose_exact(p, ts):
    """x(t) and dx/dp of x' = -k x with x += D at td and x := h x + 1 at th (td < th), outputs after events."""
    sub = dict(zip(_SYMS, p))
    X, S = [], []
    for tv in ts:
        e = _PRE if tv < p[2] else (_MID if tv < p[5] else _POST)
        X.append(float(e.subs(sub).subs(_t, tv)))
        S.append([float(sp.diff(e, s).subs(sub).subs(_t, tv)) for s in _SYMS])
    return np.array(X), np.array(S)


_TS = np.array([0.0, 0.5, 1.5, 2.0, 2.0, 3.0, 4.0, 5.5, 8.0])


def test_sbml_events_are_read(dose_model):
    ev = dose_model.spec.events
    assert [e.name for e in ev] == ["dose", "rescale"]
    assert ev[0].time == "td" and ev[0].assignments == {"x": "x + D"}
    assert ev[1].time == "td_half" and ev[1].assignments == {"x": "h*x + 1"}
    assert np.array_equal(dose_model.event_times(), [2.0, 4.0])


@pytest.mark.parametrize("method, tol", [("fs", 1e-6), ("exp2", 1e-3), ("pbsr", 1e-3)])
def test_event_sensitivities_match_analytic(dose_model, method, tol):
    p = dose_model.p
    X, S = _dose_exact(p, _TS)
    r = simulate(dose_model, _TS, method=method)
    assert r.S.shape == (_TS.size, 1, 6)
    assert [n for n, _ in r.events] == ["dose", "rescale"]
    assert np.allclose(r.x[:, 0], X, rtol=1e-6, atol=1e-9)
    scale = np.abs(S).max()
    err = np.abs(r.S[:, 0, :] - S).max(axis=0) / scale
    assert err.max() <= tol, dict(zip(dose_model.param_names, err))
    # the trigger-time columns are not zero: the jump's time term is exercised
    assert np.abs(S[:, 2]).max() > 0.1 and np.abs(S[:, 5]).max() > 0.1


@pytest.mark.parametrize("method, tol", [("fs", 1e-6), ("exp2", 1e-3)])
def test_only_the_wanted_columns_are_computed_across_events(dose_model, method, tol):
    # Problem.evaluate asks simulate() for the columns its likelihood reads (Bachmann: 113 of 165);
    # those must be the exact ones, across both events' jumps (k; the event times td and th), and
    # the columns not computed must be zero, not stale values
    p = dose_model.p
    _, S = _dose_exact(p, _TS)
    cols = np.array([0, 2, 5])
    r = simulate(dose_model, _TS, method=method, columns=cols, estimate_error=(method == "exp2"))
    assert r.S.shape == (_TS.size, 1, 6)
    err = np.abs(r.S[:, 0, cols] - S[:, cols]).max() / np.abs(S).max()
    assert err <= tol
    rest = np.setdiff1d(np.arange(6), cols)
    assert np.all(r.S[:, :, rest] == 0.0)
    if method == "exp2":
        assert r.error_estimate is not None and np.all(np.isfinite(r.error_estimate))
        full = simulate(dose_model, _TS, method=method)
        np.testing.assert_allclose(r.S[:, :, cols], full.S[:, :, cols], rtol=1e-10, atol=1e-12)


def test_event_at_other_parameters(dose_model):
    # an estimated trigger time moves the event; repeated output times get equal rows
    p = dose_model.p
    p[2], p[5], p[1] = 1.3, 6.1, 0.7
    ts = np.array([0.0, 1.3, 1.3, 2.0, 6.0, 6.1, 7.0])
    X, S = _dose_exact(p, ts)
    r = simulate(dose_model, ts, p, method="fs")
    assert np.allclose(r.x[:, 0], X, rtol=1e-7)
    assert np.abs(r.S[:, 0, :] - S).max() <= 1e-6 * np.abs(S).max()
    assert np.array_equal(r.x[1], r.x[2]) and np.array_equal(r.S[1], r.S[2])


def test_states_only(dose_model):
    X, _ = _dose_exact(dose_model.p, _TS)
    r = simulate(dose_model, _TS, sensitivities=False)
    assert r.S is None
    assert np.allclose(r.x[:, 0], X, rtol=1e-6)


def test_event_after_last_output_does_not_fire(dose_model):
    r = simulate(dose_model, [0.0, 1.0, 3.0], method="fs")
    assert [n for n, _ in r.events] == ["dose"]


def test_sbml_round_trip_keeps_events(dose_model, tmp_path):
    path = pbsens.to_sbml(dose_model, tmp_path / "rt.xml")
    m2 = pbsens.load_model(path)
    assert [(e.name, e.time, e.assignments) for e in m2.spec.events] == \
        [("dose", "td", {"x": "x + D"}), ("rescale", "td_half", {"x": "h*x + 1"})]
    r1 = simulate(dose_model, _TS, sensitivities=False)
    r2 = simulate(m2, _TS, sensitivities=False)
    assert np.allclose(r1.x, r2.x, rtol=1e-9)


def test_equality_triggered_sbml_event_is_named():
    with pytest.raises(pbsens.UnsupportedModelError) as info:
        pbsens.load_model(os.path.join(SBML, "unsupported_event.xml"))
    assert ("event trigger", "ev_pulse") in info.value.unsupported
    assert "ev_pulse" in str(info.value)


def test_state_dependent_event_time_is_named():
    d = {"name": "ev_state", "states": [{"name": "x", "initial": 1.0}],
         "parameters": [{"name": "k", "value": 1.0}], "odes": {"x": "-k*x"},
         "events": [{"name": "refill", "time": "2*x", "assignments": {"x": "1"}}]}
    with pytest.raises(pbsens.UnsupportedModelError, match="'refill'") as info:
        _model(d)
    assert ("event time", "refill") in info.value.unsupported


def test_event_with_delay_runs_and_refuses_its_sensitivities(tmp_path):
    text = open(os.path.join(SBML, "event_dose.xml")).read().replace(
        '<event id="dose" useValuesFromTriggerTime="true">',
        '<event id="dose" useValuesFromTriggerTime="true"><delay><math xmlns="http://www.w3.org/1998/Math/MathML">'
        '<cn> 1 </cn></math></delay>')
    path = tmp_path / "delayed.xml"
    path.write_text(text)
    model = pbsens.load_model(path)           # delays are read (issue #39), their sensitivities refused
    x0, k, D, td = (model.p[model.param_names.index(n)] for n in ("x0", "k", "D", "td"))
    r = simulate(model, np.array([td + 0.5, td + 1.5]), method="exp2", sensitivities=False)
    # x := x + D with useValuesFromTriggerTime: x(td) + D, assigned at td + 1 (not at td), then decaying
    want = [x0 * np.exp(-k * (td + 0.5)), (x0 * np.exp(-k * td) + D) * np.exp(-k * 0.5)]
    np.testing.assert_allclose(r.x[:, 0], want, rtol=1e-6)
    with pytest.raises(pbsens.UnsupportedModelError) as info:
        simulate(model, np.array([td + 0.5, td + 1.5]), method="exp2")
    assert ("event delay sensitivities", "dose") in info.value.unsupported


# ------------------------------------------------------------ JSON events, initial values
def _json_event_model(initial_value, name):
    return _model({"name": name, "states": [{"name": "x", "initial": 1.0}],
                   "parameters": [{"name": "k", "value": 0.3}, {"name": "D", "value": 2.0},
                                  {"name": "t_on", "value": 0.0}],
                   "odes": {"x": "-k*x"},
                   "events": [{"name": "bolus", "time": "t_on", "assignments": {"x": "x + D"},
                               "initial_value": initial_value}]})


def test_event_at_start_fires_only_when_trigger_starts_false():
    ts = [0.0, 1.0]
    fires = simulate(_json_event_model(False, "ev_start_false"), ts, method="fs")
    silent = simulate(_json_event_model(True, "ev_start_true"), ts, method="fs")
    k = 0.3
    assert np.allclose(fires.x[:, 0], [3.0, 3.0 * np.exp(-k)], rtol=1e-8)
    assert np.allclose(silent.x[:, 0], [1.0, np.exp(-k)], rtol=1e-8)
    assert np.allclose(fires.S[1, 0], [-3.0 * np.exp(-k), np.exp(-k), 0.0], rtol=1e-6, atol=1e-9)


def test_json_events_round_trip():
    m = _json_event_model(False, "ev_json_rt")
    d = m.spec.to_dict()
    assert d["events"] == [{"name": "bolus", "time": "t_on", "assignments": {"x": "x + D"}, "initial_value": False}]
    assert ModelSpec.from_dict(d).events == m.spec.events
    with pytest.raises(pbsens.ModelError, match="not a state"):
        ModelSpec.from_dict({**d, "events": [{"name": "e", "time": "1", "assignments": {"k": "1"}}]})


# ------------------------------------------------------------------- breakpoints
@pytest.fixture(scope="module")
def switch_model():
    # x' = u - k x, u = a for t >= c (0 before): a step input switching at an estimated time c
    return _model({"name": "bp_switch", "states": [{"name": "x", "initial": 1.0}],
                   "parameters": [{"name": "k", "value": 0.8}, {"name": "a", "value": 3.0},
                                  {"name": "c", "value": 1.7}],
                   "definitions": [{"name": "u", "expression": "piecewise(0, t < c, a)"}],
                   "odes": {"x": "u - k*x"}})


def _switch_exact(p, ts):
    k, a, c, t = sp.symbols("k a c t")
    pre = sp.exp(-k * t)
    post = sp.exp(-k * t) + a / k * (1 - sp.exp(-k * (t - c)))
    sub = dict(zip((k, a, c), p))
    X, S = [], []
    for tv in ts:
        e = pre if tv < p[2] else post
        X.append(float(e.subs(sub).subs(t, tv)))
        S.append([float(sp.diff(e, s).subs(sub).subs(t, tv)) for s in (k, a, c)])
    return np.array(X), np.array(S)


def test_breakpoints_found(switch_model):
    assert np.array_equal(switch_model.breakpoints(), [1.7])
    assert np.array_equal(switch_model.breakpoints([0.8, 3.0, 2.5]), [2.5])


@pytest.mark.parametrize("method, tol", [("fs", 1e-6), ("exp2", 1e-3)])
def test_breakpoint_sensitivities_match_analytic(switch_model, method, tol):
    ts = np.array([0.0, 1.0, 1.7, 2.0, 4.0])
    X, S = _switch_exact(switch_model.p, ts)
    r = simulate(switch_model, ts, method=method)
    assert np.allclose(r.x[:, 0], X, rtol=1e-7, atol=1e-10)
    assert np.abs(r.S[:, 0, :] - S).max() <= tol * np.abs(S).max()
    # dx/dc after the switch is -a exp(-k (t - c)): only the jump (f- - f+) dc/dp gives it
    assert r.S[-1, 0, 2] == pytest.approx(S[-1, 2], rel=10 * tol)


def test_breakpoint_is_hit_exactly(switch_model):
    c = 1.7
    r = simulate(switch_model, [0.0, 3.0], sensitivities=False, solver="RK45", rtol=1e-3, atol=1e-6)
    assert np.array_equal(r.breakpoints, [c])
    (a0, b0), (a1, b1) = r.segments
    assert a0 == 0.0 and b1 == 3.0
    assert b0 < c < a1 and c - b0 < 1e-13 and a1 - c < 1e-13
    # with a loose explicit solver the state still matches: no step straddles the switch
    X, _ = _switch_exact(switch_model.p, [3.0])
    assert r.x[-1, 0] == pytest.approx(X[0], rel=1e-3)


def test_breakpoints_of_benchmark_models():
    fujita = pbsens.load_model(os.path.join(PETAB, "Fujita_SciSignal2010", "model_Fujita_SciSignal2010.xml"))
    p = fujita.p
    assert np.array_equal(fujita.breakpoints(p), [p[fujita.param_names.index("EGF_end")]])
    brannmark = pbsens.load_model(os.path.join(PETAB, "Brannmark_JBC2010", "model_Brannmark_JBC2010.xml"))
    p = brannmark.p
    i1, i2 = brannmark.param_names.index("insulin_time_1"), brannmark.param_names.index("insulin_time_2")
    p[i1], p[i2] = 0.5, 4.0
    assert np.array_equal(brannmark.breakpoints(p), [0.5, 4.0])


def test_bad_t_eval_is_named(switch_model):
    with pytest.raises(pbsens.PbsensError, match="'t_eval'"):
        simulate(switch_model, [1.0, 0.5])
    with pytest.raises(pbsens.PbsensError, match="'t_eval'"):
        simulate(switch_model, [-1.0, 0.5])
    with pytest.raises(pbsens.PbsensError, match="'S0'"):
        simulate(switch_model, [1.0], S0=np.zeros((2, 2)))


def test_model_with_events_pickles(dose_model):
    import pickle
    fresh = pbsens.load_model(os.path.join(SBML, "event_dose.xml"))   # (a used model holds bound kernels)
    m2 = pickle.loads(pickle.dumps(fresh))
    assert np.array_equal(m2.event_times(), dose_model.event_times())
    r1 = simulate(dose_model, _TS, sensitivities=False)
    r2 = simulate(m2, _TS, sensitivities=False)
    assert np.array_equal(r1.x, r2.x)


def test_time_dependent_assignment_and_time_term():
    # x' = -k x, x(0) = 1; at td: x := x + D t  ->  x(t > td) = (exp(-k td) + D td) exp(-k (t - td))
    m = _model({"name": "ev_time_assign", "states": [{"name": "x", "initial": 1.0}],
                "parameters": [{"name": "k", "value": 0.4}, {"name": "D", "value": 0.6},
                               {"name": "td", "value": 1.5}],
                "odes": {"x": "-k*x"},
                "events": [{"name": "ramp_dose", "time": "td", "assignments": {"x": "x + D*t"}}]})
    k, D, td, t = sp.symbols("k D td t")
    post = (sp.exp(-k * td) + D * td) * sp.exp(-k * (t - td))
    sub = {k: 0.4, D: 0.6, td: 1.5, t: 3.0}
    S_exact = np.array([float(sp.diff(post, s).subs(sub)) for s in (k, D, td)])
    r = simulate(m, [0.0, 3.0], method="fs")
    assert r.x[-1, 0] == pytest.approx(float(post.subs(sub)), rel=1e-8)
    assert np.allclose(r.S[-1, 0], S_exact, rtol=1e-6, atol=1e-9)


def test_only_steady_state_output(switch_model):
    r = simulate(switch_model, [np.inf], method="fs")
    k, a, c = switch_model.p
    assert r.x[0, 0] == pytest.approx(a / k, rel=1e-9)
    # x_ss = a/k: dx/dk = -a/k^2, dx/da = 1/k, dx/dc = 0
    assert np.allclose(r.S[0, 0], [-a / k**2, 1 / k, 0.0], rtol=1e-7, atol=1e-10)


def test_outputs_at_a_stop_that_is_the_last_time(dose_model, switch_model):
    r = simulate(dose_model, [0.0, 2.0], method="fs")
    X, S = _dose_exact(dose_model.p, [0.0, 2.0])
    assert np.allclose(r.x[:, 0], X, rtol=1e-7)
    assert np.abs(r.S[:, 0, :] - S).max() <= 1e-6 * np.abs(S).max()
    r = simulate(switch_model, [0.0, 1.7], method="fs")
    X, S = _switch_exact(switch_model.p, [0.0, 1.7])
    assert np.allclose(r.x[:, 0], X, rtol=1e-7)
    assert np.allclose(r.S[:, 0, :], S, rtol=1e-6, atol=1e-9)


def test_event_without_assignments_is_dropped(tmp_path):
    text = open(os.path.join(SBML, "event_dose.xml")).read()
    start = text.index('<event id="rescale"')
    end = text.index("</event>", start) + len("</event>")
    marker = ('<event id="marker" useValuesFromTriggerTime="true"><trigger initialValue="true" persistent="true">'
              '<math xmlns="http://www.w3.org/1998/Math/MathML"><apply><geq/><csymbol encoding="text" '
              'definitionURL="http://www.sbml.org/sbml/symbols/time"> time </csymbol><cn> 1 </cn></apply></math>'
              '</trigger></event>')
    path = tmp_path / "marker.xml"
    path.write_text(text[:start] + marker + text[end:])
    m = pbsens.load_model(path)
    assert [e.name for e in m.spec.events] == ["dose"]


def test_breakpoint_at_a_nonlinear_function_of_a_parameter():
    # the switch of bp_switch at tau = s^2 instead of c: dx/ds = dx/dtau * 2 s
    m = _model({"name": "bp_switch_sq", "states": [{"name": "x", "initial": 1.0}],
                "parameters": [{"name": "k", "value": 0.8}, {"name": "a", "value": 3.0},
                               {"name": "s", "value": 1.3}],
                "definitions": [{"name": "u", "expression": "piecewise(0, t - s**2 < 0, a)"}],
                "odes": {"x": "u - k*x"}})
    assert m.breakpoints() == pytest.approx([1.69], rel=1e-15)
    ts = np.array([0.0, 1.0, 2.0, 4.0])
    X, S = _switch_exact([0.8, 3.0, 1.69], ts)
    S[:, 2] *= 2 * 1.3
    r = simulate(m, ts, method="fs")
    assert np.allclose(r.x[:, 0], X, rtol=1e-7, atol=1e-10)
    assert np.abs(r.S[:, 0, :] - S).max() <= 1e-6 * np.abs(S).max()


def test_brannmark_two_steps_against_finite_differences():
    # a real model with a second insulin step at an estimated time: fs against central differences
    m = pbsens.load_model(os.path.join(PETAB, "Brannmark_JBC2010", "model_Brannmark_JBC2010.xml"))
    p = m.p
    for n, v in (("insulin_time_1", 0.0), ("insulin_dose_1", 1.2), ("insulin_time_2", 4.0), ("insulin_dose_2", 8.8)):
        p[m.param_names.index(n)] = v
    ts = np.array([0.0, 1.0, 3.9, 4.3, 5.0, 6.0])
    S0 = np.zeros((m.n_states, m.n_params))
    r = simulate(m, ts, p, x0=m.x0, S0=S0, method="fs", rtol=1e-10, atol=1e-12)
    r2 = simulate(m, ts, p, x0=m.x0, S0=S0, method="exp2")
    h = 1e-5
    for name in ("insulin_time_2", "insulin_dose_2", "k1a"):
        j = m.param_names.index(name)
        pp, pm = p.copy(), p.copy()
        pp[j] *= 1 + h
        pm[j] *= 1 - h
        xp = simulate(m, ts, pp, x0=m.x0, sensitivities=False, rtol=1e-12, atol=1e-14).x
        xm = simulate(m, ts, pm, x0=m.x0, sensitivities=False, rtol=1e-12, atol=1e-14).x
        fd = (xp - xm) / (2 * h * p[j])
        scale = np.abs(fd).max()
        assert np.abs(r.S[:, :, j] - fd).max() <= 1e-5 * scale, name
        assert np.abs(r2.S[:, :, j] - fd).max() <= 1e-3 * scale, name


def test_heaviside_step_in_time_at_a_parameter():
    # the switch of bp_switch written as a * heaviside(t - c): same solution, and the model compiles although
    # d heaviside / dc is a Dirac delta (zero away from the step; the jump is the breakpoint's)
    m = _model({"name": "bp_heaviside", "states": [{"name": "x", "initial": 1.0}],
                "parameters": [{"name": "k", "value": 0.8}, {"name": "a", "value": 3.0},
                               {"name": "c", "value": 1.7}],
                "odes": {"x": "a*heaviside(t - c) - k*x"}})
    assert np.array_equal(m.breakpoints(), [1.7])
    ts = np.array([0.0, 1.0, 2.0, 4.0])
    X, S = _switch_exact(m.p, ts)
    r = simulate(m, ts, method="fs")
    assert np.allclose(r.x[:, 0], X, rtol=1e-7, atol=1e-10)
    assert np.abs(r.S[:, 0, :] - S).max() <= 1e-6 * np.abs(S).max()


def test_event_setting_a_parameter_makes_it_a_state(tmp_path):
    # at time >= T the rate constant k switches to k2: k becomes a state with k' = 0
    text = open(os.path.join(SBML, "event_dose.xml")).read()
    start = text.index("<listOfEvents>")
    end = text.index("</listOfEvents>") + len("</listOfEvents>")
    events = ('<listOfEvents><event id="switch_k" useValuesFromTriggerTime="true">'
              '<trigger initialValue="true" persistent="true"><math xmlns="http://www.w3.org/1998/Math/MathML">'
              '<apply><gt/><csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/time"> time '
              '</csymbol><ci> td </ci></apply></math></trigger><listOfEventAssignments>'
              '<eventAssignment variable="k"><math xmlns="http://www.w3.org/1998/Math/MathML"><ci> h </ci></math>'
              '</eventAssignment></listOfEventAssignments></event></listOfEvents>')
    path = tmp_path / "switch_k.xml"
    text = text[:start] + events + text[end:]
    path.write_text(text.replace('<parameter id="k" value="0.5" constant="true"/>',
                                 '<parameter id="k" value="0.5" constant="false"/>'))
    m = pbsens.load_model(path)
    assert m.state_names == ["x", "k"] and m.spec.odes["k"] == "0"
    assert "k" not in m.param_names
    ts = np.array([0.0, 1.0, 2.0, 3.0])
    r = simulate(m, ts, method="fs")
    x0, td, h = 1.5, 2.0, 0.4
    X = np.where(ts < td, x0 * np.exp(-0.5 * ts), x0 * np.exp(-0.5 * td) * np.exp(-h * (ts - td)))
    assert np.allclose(r.x[:, 0], X, rtol=1e-7)
    assert np.allclose(r.x[:, 1], [0.5, 0.5, h, h])
    # d x(3) / d h = -(t - td) x(3)
    assert r.S[-1, 0, m.param_names.index("h")] == pytest.approx(-(3.0 - td) * X[-1], rel=1e-6)
