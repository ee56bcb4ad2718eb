"""State-triggered events (pbsens.simulation.state_events) against analytic solutions and central
finite differences: the event time, the states and the sensitivities before and after the jump."""
import os

import numpy as np
import pytest
import sympy as sp

import pbsens
from pbsens.errors import ModelError, SolverError, UnsupportedModelError
from pbsens.model.spec import ModelSpec
from pbsens.simulation.segments import simulate
from petab_files import write_problem_yaml  # noqa: E402

HERE = os.path.dirname(__file__)
SBML = os.path.join(HERE, "data", "sbml")
TIGHT = {"rtol": 1e-11, "atol": 1e-13}


def _model(d):
    return pbsens.load_model(ModelSpec.from_dict(d), backend="tape")   # no per-model compilation


# ---------------------------------------------------------------- a sawtooth: x' = -k x, x := r when x < c
_SAW = {"name": "saw", "states": [{"name": "x", "initial": "x0"}],
        "parameters": [{"name": "k", "value": 1.0}, {"name": "x0", "value": 2.0}, {"name": "c", "value": 0.5},
                       {"name": "r", "value": 1.5}],
        "odes": {"x": "-k*x"},
        "events": [{"name": "reset", "trigger": "x < c", "assignments": {"x": "r"}}]}
_k, _x0, _c, _r, _t = sp.symbols("k x0 c r t", positive=True)
_SAW_SYMS = (_k, _x0, _c, _r)
_T1 = sp.log(_x0 / _c) / _k           # first crossing of x = c
_PERIOD = sp.log(_r / _c) / _k        # then every ln(r/c)/k


def _saw_exact(p, ts):
    """x(t) and dx/dp of the sawtooth (outputs after an event at its time), with the event times."""
    sub = dict(zip(_SAW_SYMS, p))
    t1, per = float(_T1.subs(sub)), float(_PERIOD.subs(sub))
    X, S = [], []
    for tv in ts:
        n = 0 if tv < t1 else 1 + int(np.floor((tv - t1) / per))
        e = _x0 * sp.exp(-_k * _t) if n == 0 else _r * sp.exp(-_k * (_t - _T1 - (n - 1) * _PERIOD))
        X.append(float(e.subs(sub).subs(_t, tv)))
        S.append([float(sp.diff(e, s).subs(sub).subs(_t, tv)) for s in _SAW_SYMS])
    return np.array(X), np.array(S), t1, per


_TS = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 2.7, 3.2, 4.0])


@pytest.fixture(scope="module")
def saw():
    return _model(_SAW)


def test_sawtooth_event_times_and_states(saw):
    r = simulate(saw, _TS, sensitivities=False, **TIGHT)
    X, _, t1, per = _saw_exact(saw.p, _TS)
    assert [n for n, _ in r.events] == ["reset"] * 3
    assert np.allclose([t for _, t in r.events], [t1, t1 + per, t1 + 2 * per], rtol=1e-9)
    assert np.allclose(r.x[:, 0], X, rtol=1e-8)


@pytest.mark.parametrize("method, solver", [("fs", None), ("exp", None), ("exp2", None), ("pbsr", None),
                                            ("exp2", "rodas5p"), ("exp2", "Radau")])
def test_sawtooth_sensitivities_match_analytic(saw, method, solver):
    X, S, _, _ = _saw_exact(saw.p, _TS)
    r = simulate(saw, _TS, method=method, solver=solver, **TIGHT)
    assert np.allclose(r.x[:, 0], X, rtol=1e-7)
    err = np.abs(r.S[:, 0, :] - S) / (np.abs(S) + 1e-3)
    # columns x0, c, r: the march is exact for this linear ODE, so the jumps alone decide; column k also
    # carries the post-hoc march's own error (before any event ~1e-4 relative for exp2, ~1e-2 for the
    # first-order exp), which the jumps pass on
    # (pbsr, a truncated series, has its own error in every column)
    assert err[:, 1:].max() < (3e-3 if method == "pbsr" else 1e-6), (method, err[:, 1:].max())
    assert err[:, 0].max() < {"fs": 1e-6, "exp": 5e-2}.get(method, 3e-3), (method, err[:, 0].max())
    # the time term of the jump matters: without it dx/dc after the first event would be 0
    assert np.abs(S[-1, 2]) > 0.1


# ------------------------------------------- an event that leaves its own trigger true: it must fire once
_SWITCH = {"name": "switch", "states": [{"name": "x", "initial": 2.0}, {"name": "y", "initial": 1.0}],
           "parameters": [{"name": "k", "value": 0.8}, {"name": "c", "value": 0.6}, {"name": "m", "value": 0.3},
                          {"name": "D", "value": 2.0}],
           "odes": {"x": "-k*x", "y": "-m*y"},
           "events": [{"name": "dose", "trigger": "x <= c", "assignments": {"y": "y + D"}}]}
_m, _D = sp.symbols("m D", positive=True)
_TSTAR = sp.log(2 / _c) / _k
_Y_POST = sp.exp(-_m * _t) + _D * sp.exp(-_m * (_t - _TSTAR))


def _switch_exact(p, ts):
    sub = dict(zip((_k, _c, _m, _D), p))
    tstar = float(_TSTAR.subs(sub))
    Y, S = [], []
    for tv in ts:
        e = sp.exp(-_m * _t) if tv < tstar else _Y_POST
        Y.append(float(e.subs(sub).subs(_t, tv)))
        S.append([float(sp.diff(e, s).subs(sub).subs(_t, tv)) for s in (_k, _c, _m, _D)])
    return np.array(Y), np.array(S), tstar


@pytest.mark.parametrize("method, solver", [("fs", None), ("exp2", None), ("pbsr", None), ("exp2", "rodas5p")])
def test_event_that_keeps_its_trigger_true_fires_once(method, solver):
    m = _model(_SWITCH)
    ts = np.linspace(0.0, 6.0, 13)
    r = simulate(m, ts, method=method, solver=solver, **TIGHT)
    Y, S, tstar = _switch_exact(m.p, ts)
    assert [n for n, _ in r.events] == ["dose"]
    assert abs(r.events[0][1] - tstar) < 1e-9
    assert np.allclose(r.x[:, 1], Y, rtol=1e-8)
    err = np.abs(r.S[:, 1, :] - S) / (np.abs(S) + 1e-3)
    assert err.max() < (1e-6 if method == "fs" else 3e-3), err.max()


# ------------------------------------------------- combined triggers, against central finite differences
def _fd(model, ts, p, h=1e-6, **kw):
    cols = []
    for j in range(p.size):
        dp = np.zeros_like(p)
        dp[j] = h * max(1.0, abs(p[j]))
        a = simulate(model, ts, p + dp, sensitivities=False, **kw).x
        b = simulate(model, ts, p - dp, sensitivities=False, **kw).x
        cols.append((a - b) / (2 * dp[j]))
    return np.stack(cols, axis=-1)


_COMBINED = {"name": "combined", "states": [{"name": "x", "initial": 1.0}, {"name": "z", "initial": 0.0}],
             "parameters": [{"name": "a", "value": 0.7}, {"name": "b", "value": 1.3}, {"name": "th", "value": 1.2},
                            {"name": "tmin", "value": 0.2}, {"name": "zr", "value": 1.2}],
             "odes": {"x": "a*x - b*x*z", "z": "0.5*x"},
             "events": [{"name": "knock", "trigger": "x > th and t > tmin", "assignments": {"x": "x/2", "z": "z + a"}},
                        {"name": "rescue", "trigger": "not (z < zr)", "assignments": {"x": "x + 1"}}]}


@pytest.mark.parametrize("method", ["fs", "exp2"])
def test_combined_triggers_match_finite_differences(method):
    m = _model(_COMBINED)
    ts = np.linspace(0.0, 6.0, 25)
    r = simulate(m, ts, method=method, **TIGHT)
    assert {n for n, _ in r.events} == {"knock", "rescue"}
    FD = _fd(m, ts, m.p, **TIGHT)
    # exp2's own error on this nonlinear model is ~4e-4 (absolute, |S| up to ~1); a wrong jump is O(0.1)
    atol = 1e-5 if method == "fs" else 1e-3
    assert np.allclose(r.S, FD, rtol=1e-4, atol=atol), np.abs(r.S - FD).max()


# ------------------------------------------------------------------ initial value, errors, JSON
def test_trigger_true_at_start_fires_only_with_initial_value_false():
    d = {**_SAW, "events": [{"name": "reset", "trigger": "x > 1", "assignments": {"x": "r"}}]}
    on = _model({**d, "events": [{**d["events"][0], "initial_value": False}]})
    off = _model(d)
    ts = [0.0, 1.0]
    r_on = simulate(on, ts, sensitivities=False, **TIGHT)
    r_off = simulate(off, ts, sensitivities=False, **TIGHT)
    assert r_on.events == [("reset", 0.0)] and r_off.events == []
    assert np.allclose(r_on.x[:, 0], 1.5 * np.exp(-np.array(ts)), rtol=1e-8)
    assert np.allclose(r_off.x[:, 0], 2.0 * np.exp(-np.array(ts)), rtol=1e-8)


def test_grazing_crossing_is_refused():
    """x' = 0, y' = 1 with the trigger x > c: at a point on x = c the flow runs along the switching
    surface (h_x f + h_t = 0), so the event time has no derivative."""
    from pbsens.simulation.state_events import TriggerWatch
    d = {"name": "graze", "states": [{"name": "x", "initial": 1.0}, {"name": "y", "initial": 0.0}],
         "parameters": [{"name": "c", "value": 1.0}], "odes": {"x": "0*c", "y": "1"},
         "events": [{"name": "touch", "trigger": "x > c", "assignments": {"y": "0"}}]}
    m = _model(d)
    w = TriggerWatch(m, m.p, 1e-8, 1e-10)
    with pytest.raises(SolverError, match="grazing"):
        w.event_time_gradient(0, 0.5, np.array([1.0, 0.5]), np.zeros((2, 1)), 0)
    # off the tangency (x' != 0) the same call gives dt*/dc = -(h_x S + h_c)/(h_x f) = 1/x'
    d2 = {**d, "odes": {"x": "2 + 0*c", "y": "1"}}
    m2 = _model(d2)
    dt, _ = TriggerWatch(m2, m2.p, 1e-8, 1e-10).event_time_gradient(0, 0.5, np.array([1.0, 0.5]),
                                                                    np.zeros((2, 1)), 0)
    assert dt == pytest.approx([0.5])


def test_simultaneous_state_events_are_refused():
    d = {**_SAW, "events": [{"name": "e1", "trigger": "x < c", "assignments": {"x": "r"}},
                            {"name": "e2", "trigger": "c > x", "assignments": {"x": "r + 1"}}]}
    with pytest.raises(UnsupportedModelError, match="same time") as info:
        simulate(_model(d), [0.0, 3.0])
    assert ("simultaneous events", "e1") in info.value.unsupported


@pytest.mark.parametrize("trigger", ["x == c", "x != c", "c > 1"])
def test_unlocatable_trigger_is_named(trigger):
    d = {**_SAW, "events": [{"name": "bad", "trigger": trigger, "assignments": {"x": "r"}}]}
    with pytest.raises(UnsupportedModelError) as info:
        _model(d)
    assert ("event trigger", "bad") in info.value.unsupported


def test_event_needs_time_or_trigger():
    d = {**_SAW, "events": [{"name": "both", "trigger": "x < c", "time": "1", "assignments": {"x": "r"}}]}
    with pytest.raises(ModelError, match="exactly one of 'time'"):
        ModelSpec.from_dict(d)


def test_json_round_trip_keeps_trigger(saw):
    again = ModelSpec.from_dict(saw.spec.to_dict())
    assert again.events[0].trigger == "x < c" and again.events[0].time is None


# ------------------------------------------------------------------ SBML
def test_sbml_state_event_matches_analytic():
    m = pbsens.load_model(os.path.join(SBML, "event_state.xml"), backend="tape")
    ev = m.spec.events[0]
    assert ev.trigger is not None and ev.time is None and not ev.initial_value
    ts = np.linspace(0.0, 5.0, 11)
    r = simulate(m, ts, method="exp2", **TIGHT)
    k = m.p[m.param_names.index("k")]
    per = np.log(2.0) / k                 # A: 1 -> 0.5 every ln 2 / k, then reset to 1
    assert len(r.events) == int(5.0 // per)
    assert np.allclose(r.x[:, 0], np.exp(-k * (ts - per * np.floor(ts / per + 1e-12))), rtol=1e-8)
    FD = _fd(m, ts, m.p, **TIGHT)
    assert np.allclose(r.S, FD, rtol=1e-4, atol=1e-6)


def test_sbml_round_trip_keeps_state_trigger(saw, tmp_path):
    path = pbsens.to_sbml(saw, tmp_path / "saw.xml")
    m2 = pbsens.load_model(path, backend="tape")
    assert m2.spec.events[0].trigger is not None
    r1 = simulate(saw, _TS, sensitivities=False, **TIGHT)
    r2 = simulate(m2, _TS, sensitivities=False, **TIGHT)
    assert np.allclose(r1.x, r2.x, rtol=1e-9)


# ------------------------------------------------------------------ SBML Test Suite (tests/data/sbml_suite)
@pytest.mark.parametrize("case", ["00026", "00041", "00349", "00351", "00374"])
def test_sbml_suite_state_events(tmp_path, case):
    """Cases with state-triggered events (EventNoDelay): S1 < 0.1 resets S1 (00026), two events
    (00041, 00349), a trigger comparing two species (00351), concentrations in a compartment of
    size 0.5 (00374); against the suite's results at its tolerances."""
    pytest.importorskip("libsbml")
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "benchmarks"))
    import sbml_suite_case as sc  # the suite's case logic, shared with benchmarks/sbml_suite.py

    from pbsens.model.library import model_from_spec
    from pbsens.model.sbml import read_sbml
    suite = os.path.join(HERE, "data", "sbml_suite")
    st = sc.settings(suite, case)
    header, want = sc.expected(suite, case)
    spec = sc.suite_spec(sc.sbml_file(suite, case, "l3v2"), header, set(sc.names_list(st.get("amount"))), read_sbml)
    model = model_from_spec(spec, "tape")
    atol, rtol = float(st["absolute"]), float(st["relative"])
    t = want[:, 0]
    r = simulate(model, t, sensitivities=False, rtol=1e-10, atol=1e-12)
    assert r.events, "no event fired"
    got = np.array([model.outputs(ti, xi, r.p) for ti, xi in zip(t, r.x)])
    bad = [(want[i, 0], header[j + 1], got[i, j], want[i, j + 1])
           for i, j in sc.mismatches(got, want[:, 1:], atol, rtol)]
    assert not bad, f"case {case}: {len(bad)} entries off, first (t, name, got, want): {bad[:5]}"


# ------------------------------------------------------------------ PEtab: the gradient across a state event
def _write_petab(folder):
    """A' = -k A, event A < c sets A := 1; y = A measured before and after the events; k and c estimated."""
    libsbml = pytest.importorskip("libsbml")
    with open(os.path.join(SBML, "event_state.xml")) as fh:
        text = fh.read()
    text = text.replace(
        "<cn> 0.5 </cn></apply>", "<ci> c </ci></apply>").replace(
        '<parameter id="k" value="0.5" constant="true"/>',
        '<parameter id="k" value="0.5" constant="true"/><parameter id="c" value="0.5" constant="true"/>')
    assert libsbml.readSBMLFromString(text).getNumErrors() == 0
    (folder / "model.xml").write_text(text)
    (folder / "conditions.tsv").write_text("conditionId\nc0\n")
    (folder / "observables.tsv").write_text("observableId\tobservableFormula\tnoiseFormula\ny\tA\t0.1\n")
    (folder / "parameters.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n"
        "k\tlog10\t0.01\t10\t0.5\t1\nc\tlin\t0.01\t0.9\t0.5\t1\n")
    rows = "".join(f"y\tc0\t{m}\t{t}\n" for t, m in ((0.5, 0.8), (1.0, 0.6), (2.0, 0.7), (3.5, 0.5), (5.0, 0.9)))
    (folder / "measurements.tsv").write_text("observableId\tsimulationConditionId\tmeasurement\ttime\n" + rows)
    return write_problem_yaml(folder)


@pytest.mark.parametrize("method", ["exp2", "fs"])
def test_petab_gradient_across_state_events(tmp_path, method):
    pytest.importorskip("petab")
    import pbsens.petab as pbpetab
    problem = pbpetab.load(_write_petab(tmp_path))
    theta = np.array([np.log10(0.45), 0.55])
    opts = {"rtol": 1e-11, "atol": 1e-13}
    r = problem.evaluate(theta, method=method, **opts)
    fd = []
    for j in range(2):
        d = np.zeros(2)
        d[j] = 1e-6
        fd.append((problem.evaluate(theta + d, sensitivities=False, **opts).llh
                   - problem.evaluate(theta - d, sensitivities=False, **opts).llh) / 2e-6)
    np.testing.assert_allclose(r.gradient, fd, rtol=1e-5)
    assert abs(r.gradient[1]) > 1.0      # c moves the event times: the dt*/dp term carries this column
