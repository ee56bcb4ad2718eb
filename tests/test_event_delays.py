"""SBML events with delays and priorities (pbsens.simulation.event_queue) on small models whose
solutions are worked out by hand below each model.

Every model has a rate-ruled parameter ``x`` with ``x' = 1`` (so ``x(t) = t`` until an event sets it)
and parameters that only events set. The expected values are written as numbers (or as simple
functions of the time), not computed by pbsens.
"""
import numpy as np
import pytest

libsbml = pytest.importorskip("libsbml")

from pbsens.errors import UnsupportedModelError
from pbsens.model.library import model_from_spec
from pbsens.model.sbml import read_sbml
from pbsens.simulation.segments import simulate

TIGHT = {"rtol": 1e-10, "atol": 1e-12}


# ----------------------------------------------------------------- building models
def _doc(**params):
    """A Level 3 Version 2 model with ``x' = 1`` (x(0) = 0) and the non-constant parameters ``params``."""
    doc = libsbml.SBMLDocument(3, 2)
    m = doc.createModel()
    m.setId("delays")
    for pid, value in {"x": 0.0, **params}.items():
        q = m.createParameter()
        q.setId(pid)
        q.setValue(value)
        q.setConstant(False)
    r = m.createRateRule()
    r.setVariable("x")
    r.setMath(libsbml.parseL3Formula("1"))
    return doc, m


def _event(m, eid, trigger, assignments, *, delay=None, priority=None, from_trigger=True, persistent=True,
           initial=True):
    ev = m.createEvent()
    ev.setId(eid)
    ev.setUseValuesFromTriggerTime(from_trigger)
    tr = ev.createTrigger()
    tr.setMath(libsbml.parseL3Formula(trigger))
    tr.setPersistent(persistent)
    tr.setInitialValue(initial)
    if delay is not None:
        ev.createDelay().setMath(libsbml.parseL3Formula(delay))
    if priority is not None:
        ev.createPriority().setMath(libsbml.parseL3Formula(priority))
    for var, formula in assignments.items():
        ea = ev.createEventAssignment()
        ea.setVariable(var)
        ea.setMath(libsbml.parseL3Formula(formula))
    return ev


def _run(doc, tmp_path, t, **options):
    path = tmp_path / "model.xml"
    assert libsbml.writeSBMLToFile(doc, str(path))
    model = model_from_spec(read_sbml(path), "tape")
    sim = simulate(model, t, sensitivities=False, **TIGHT, **options)
    return model, sim


def _col(model, sim, name):
    return sim.x[:, model.state_names.index(name)]


# ----------------------------------------------------------------- a delayed time-triggered event
T1 = np.array([0.0, 1.0, 2.0, 2.9, 3.0, 3.5, 5.0])


@pytest.mark.parametrize("from_trigger, value", [(True, 1.0), (False, 3.0)])
def test_delay_with_values_from_trigger_or_execution_time(tmp_path, from_trigger, value):
    """Trigger ``time >= 1``, delay 2, ``y := x``: executed at t = 3 with x(1) = 1 (values from the
    trigger time) or x(3) = 3 (values from the execution time); x itself is never set."""
    doc, m = _doc(y=0.0)
    _event(m, "E", "time >= 1", {"y": "x"}, delay="2", from_trigger=from_trigger)
    model, sim = _run(doc, tmp_path, T1)
    assert sim.events == [("E", pytest.approx(3.0))]
    assert np.allclose(_col(model, sim, "x"), T1, atol=1e-8)
    want = np.where(T1 >= 3.0, value, 0.0)      # an output at the execution time reports the state after it
    assert np.allclose(_col(model, sim, "y"), want, atol=1e-8)


# ----------------------------------------------------------------- a state trigger, a delay of the state
def test_state_trigger_delay_evaluated_at_the_trigger_time(tmp_path):
    """Trigger ``x > 2``, delay ``x / 2`` (= 1 at the trigger, though x is 3 at the execution),
    ``x := 0``: x rises to 2 at t = 2, the reset comes at t = 3; x reaches 2 again at t = 5 and is reset
    at t = 6: x(t) = t on [0, 3), t - 3 on [3, 6), t - 6 on [6, 9)."""
    t = np.array([1.0, 2.5, 2.99, 3.5, 5.5, 6.5, 8.0])
    doc, m = _doc()
    _event(m, "reset", "x > 2", {"x": "0"}, delay="x / 2")
    model, sim = _run(doc, tmp_path, t)
    assert [n for n, _ in sim.events] == ["reset", "reset"]
    assert np.allclose([s for _, s in sim.events], [3.0, 6.0], atol=1e-7)
    want = np.array([1.0, 2.5, 2.99, 0.5, 2.5, 0.5, 2.0])
    assert np.allclose(_col(model, sim, "x"), want, atol=1e-6)


# ----------------------------------------------------------------- pending executions across later triggers
@pytest.mark.parametrize("from_trigger, want", [(True, [0, 0, 1, 1, 2, 2]), (False, [0, 0, 1, 2, 3, 3])])
def test_pending_executions_kept_across_later_triggers(tmp_path, from_trigger, want):
    """``reset`` (no delay) sets x := 0 when x > 1: x is a sawtooth of period 1 (resets at t = 1, 2, 3, ...).
    ``count`` (trigger x > 0.5, delay 1.2, ``n := n + 1``) triggers at t = 0.5, 1.5, 2.5, 3.5 and executes at
    1.7, 2.7, 3.7 (4.7 after the end); each execution is still pending when the next trigger comes.
    Values from the trigger time: n := (n at 0.5) + 1 = 1, (n at 1.5) + 1 = 1, (n at 2.5) + 1 = 2.
    Values from the execution time: n = 1, 2, 3."""
    t = np.array([1.0, 1.69, 1.71, 2.71, 3.71, 4.5])
    doc, m = _doc(n=0.0)
    _event(m, "reset", "x > 1", {"x": "0"})
    _event(m, "count", "x > 0.5", {"n": "n + 1"}, delay="1.2", from_trigger=from_trigger)
    model, sim = _run(doc, tmp_path, t)
    counts = [s for name, s in sim.events if name == "count"]
    assert np.allclose(counts, [1.7, 2.7, 3.7], atol=1e-7)
    assert np.allclose(_col(model, sim, "n"), want, atol=1e-9)


# ----------------------------------------------------------------- persistent = false
@pytest.mark.parametrize("persistent, want_y", [(False, 0.0), (True, 5.0)])
def test_non_persistent_event_cancelled_when_its_trigger_turns_false(tmp_path, persistent, want_y):
    """Trigger ``x > 1 && x < 2`` holds on (1, 2); with delay 1.5 its execution would be at t = 2.5.
    Non-persistent: the trigger is false from t = 2 on, the execution is cancelled (y stays 0);
    persistent: y := 5 at t = 2.5."""
    t = np.array([1.5, 2.4, 2.6, 4.0])
    doc, m = _doc(y=0.0)
    _event(m, "E", "(x > 1) && (x < 2)", {"y": "5"}, delay="1.5", persistent=persistent)
    model, sim = _run(doc, tmp_path, t)
    assert np.allclose(_col(model, sim, "y"), [0.0, 0.0, want_y, want_y], atol=1e-12)
    assert len(sim.events) == (0 if not persistent else 1)


# ----------------------------------------------------------------- priorities
@pytest.mark.parametrize("p_double, p_add, want", [("10", "5", 5.0), ("5", "10", 8.0), ("2", "y", 5.0),
                                                   ("0.5", "y", 8.0)])
def test_priorities_order_simultaneous_executions(tmp_path, p_double, p_add, want):
    """Two events at t = 1 (y(0) = 1), assignments from the execution time: ``double`` (y := 2 y) then
    ``add`` (y := y + 3) gives 5; ``add`` first gives 8. The higher priority runs first; a priority
    ``y`` is evaluated at the execution (y = 1 then)."""
    t = np.array([0.5, 1.0, 2.0])
    doc, m = _doc(y=1.0)
    _event(m, "double", "time >= 1", {"y": "2 * y"}, priority=p_double, from_trigger=False)
    _event(m, "add", "time >= 1", {"y": "y + 3"}, priority=p_add, from_trigger=False)
    model, sim = _run(doc, tmp_path, t)
    assert np.allclose(_col(model, sim, "y"), [1.0, want, want], atol=1e-12)
    first = "double" if want == 5.0 else "add"
    assert sim.events[0][0] == first


@pytest.mark.parametrize("persistent, want_y", [(False, 0.0), (True, 1.0)])
def test_priority_and_cancellation_at_one_instant(tmp_path, persistent, want_y):
    """Both events trigger when x crosses 1 (t = 1). ``first`` (priority 10) sets z := 1, which makes the
    trigger of ``second`` (priority 1, x > 1 && z < 0.5) false before it executes: non-persistent it is
    cancelled (y stays 0), persistent it executes (y := 1)."""
    t = np.array([0.5, 1.5, 3.0])
    doc, m = _doc(y=0.0, z=0.0)
    _event(m, "first", "x > 1", {"z": "1"}, priority="10")
    _event(m, "second", "(x > 1) && (z < 0.5)", {"y": "1"}, priority="1", persistent=persistent)
    model, sim = _run(doc, tmp_path, t)
    assert np.allclose(_col(model, sim, "z"), [0.0, 1.0, 1.0], atol=1e-12)
    assert np.allclose(_col(model, sim, "y"), [0.0, want_y, want_y], atol=1e-12)


# ----------------------------------------------------------------- sensitivities are refused by name
def test_sensitivities_across_delayed_events_refused_by_name(tmp_path):
    doc, m = _doc(y=0.0)
    _event(m, "E", "time >= 1", {"y": "x"}, delay="2")
    path = tmp_path / "model.xml"
    assert libsbml.writeSBMLToFile(doc, str(path))
    model = model_from_spec(read_sbml(path), "tape")
    with pytest.raises(UnsupportedModelError) as info:
        simulate(model, T1, **TIGHT)
    assert ("event delay sensitivities", "E") in info.value.unsupported


# ----------------------------------------------------------------- a strict trigger exactly 0 on the solver's grid
@pytest.mark.parametrize("delay, want_y", [(None, 1.0), ("2.5", 3.5)])
def test_strict_trigger_zero_at_an_output_time(tmp_path, delay, want_y):
    """Trigger ``x > 1`` with an output at t = 1, where x = 1 exactly (the solver's grid holds that point,
    the comparison is false there and true just after): the event triggers at t = 1, not at the next grid
    point. ``y := time`` evaluated at the execution: 1 without a delay, 3.5 with delay 2.5 (the case
    01586 of the SBML Test Suite, whose trigger found one output step late gave 5.83 for 5.5)."""
    t = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    doc, m = _doc(y=0.0)
    _event(m, "E", "x > 1", {"y": "time"}, delay=delay, from_trigger=False)
    model, sim = _run(doc, tmp_path, t)
    assert np.allclose([s for _, s in sim.events], [want_y], atol=1e-9)
    assert np.allclose(_col(model, sim, "y"), np.where(t >= want_y, want_y, 0.0), atol=1e-9)


def test_equal_priorities_random_but_reproducible(tmp_path):
    """Equal priorities: SBML executes them in random order. Either order is a valid result (5 or 8, see
    above); two simulations of the same model give the same one (the generator is seeded)."""
    t = np.array([0.5, 2.0])
    doc, m = _doc(y=1.0)
    _event(m, "double", "time >= 1", {"y": "2 * y"}, priority="3", from_trigger=False)
    _event(m, "add", "time >= 1", {"y": "y + 3"}, priority="3", from_trigger=False)
    model, sim = _run(doc, tmp_path, t)
    y = _col(model, sim, "y")
    assert y[0] == 1.0 and y[1] in (5.0, 8.0)
    again = simulate(model, t, sensitivities=False, **TIGHT)
    assert np.array_equal(again.x, sim.x)


def test_json_model_keys_round_trip_and_simulate():
    """The JSON keys of a delayed event: read, written back unchanged, and simulated (x' = 1 from 0,
    trigger x > 1, delay 0.5, x := 10 evaluated at the execution time: x(1.5) = 10, x(2) = 10.5)."""
    import pbsens
    from pbsens.model.spec import ModelSpec
    d = {"name": "delayed_json", "states": [{"name": "x", "initial": "0"}], "parameters": [],
         "odes": {"x": "1"},
         "events": [{"name": "E", "trigger": "x > 1", "assignments": {"x": "10 + 0*x"}, "delay": "0.5",
                     "priority": "1", "persistent": False, "use_values_from_trigger_time": False}]}
    spec = ModelSpec.from_dict(d)
    assert spec.events[0].to_dict() == d["events"][0]
    model = pbsens.load_model(spec, backend="tape")
    sim = simulate(model, [1.0, 1.4, 1.5, 2.0], sensitivities=False, **TIGHT)
    assert np.allclose(sim.x[:, 0], [1.0, 1.4, 10.0, 10.5], atol=1e-8)
