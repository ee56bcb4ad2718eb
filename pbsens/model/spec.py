"""The model file format and its validated in-memory form, :class:`ModelSpec`.

A model is plain data: names, numbers and expression strings. The JSON format
(``data/models/*.json``) is::

    {
      "name": "Chua",                       # required, str
      "title": "...", "source": "...",      # optional, free text
      "time": "t",                          # optional, name of the time variable (default "t")
      "states": [{"name": "x1", "initial": 0.0}, ...],
      "parameters": [{"name": "p1", "value": 7.0}, ...],
      "definitions": [{"name": "g", "expression": "-8/7*x1 + 4/63*x1**3"}, ...],
      "odes": [{"state": "x1", "rhs": "p1*(x2 - x1 - g)"}, ...],
      "outputs": [{"name": "y1", "expression": "x1 + x2"}, ...],   # optional observables
      "events": [{"name": "dose", "time": "t_dose",                 # optional, time-triggered
                  "assignments": {"x1": "x1 + D"}},
                 {"name": "reset", "trigger": "x1 < 0.1",            # or state-triggered
                  "assignments": {"x1": "1"}}, ...],
      ... any other keys (experiments, solver_tolerances, notes) are kept in ``meta``
    }

Rules, checked by :func:`ModelSpec.validate`:

* names are identifiers, unique across states, parameters, definitions, outputs
  and the time variable;
* a state's ``initial`` is a number or an expression of parameters (the initial
  state then depends on ``p`` and the initial sensitivity ``dx0/dp`` is derived);
* definitions are evaluated in order: each may use the time, states, parameters
  and *earlier* definitions;
* there is exactly one right-hand side per state;
* an event has either a ``time`` or a ``trigger``. A time-triggered event fires
  once, when the time reaches ``time`` (an expression of parameters, and of
  definitions that use only parameters); a state-triggered event fires whenever
  its ``trigger`` (comparisons ``<``, ``<=``, ``>``, ``>=`` of expressions of the
  time, states and parameters, combined with ``and``/``or``/``not``) changes
  from false to true. Either then sets each state it names to the value of its
  expression (of the time, the states and the parameters just before the
  event). ``initial_value`` (default true, as SBML's trigger attribute) says
  whether the trigger counts as already true before the start: an event whose
  trigger holds at the start (whose time is at or before the start time) fires
  at the start only when ``initial_value`` is false;
* expressions use ``+ - * / **`` (``^`` is read as power), parentheses, numbers,
  the functions listed in :data:`pbsens.model.symbolic.FUNCTIONS`, comparisons,
  ``and``/``or``/``not`` and ``piecewise(value1, condition1, ..., otherwise)``. As in
  SBML, a condition (or ``True``/``False``) used as a number is 1 where it holds and 0
  elsewhere, and a number used as a condition holds where it is not 0; ``floor`` and
  ``ceiling`` have derivative 0.
"""
from __future__ import annotations

import copy
import hashlib
import json
import keyword
import unicodedata
import math
import os
from dataclasses import dataclass, field
from numbers import Real

from ..errors import ModelError

__all__ = ["ModelSpec", "Quantity", "Definition", "Event", "read_json_model"]


@dataclass(frozen=True)
class Quantity:
    """A named value: a state with its initial value or a parameter with its value.

    ``value`` is a float, or (for states only) an expression string of parameters.
    """

    name: str
    value: float | str


@dataclass(frozen=True)
class Definition:
    """A named expression: a definition, a right-hand side or an output."""

    name: str
    expression: str


@dataclass(frozen=True)
class Event:
    """An event: at ``time`` (an expression of parameters), or whenever ``trigger`` becomes true, set states.

    Exactly one of ``time`` and ``trigger`` is given (the other is None).
    ``trigger`` is a condition on the time, the states and the parameters
    (comparisons ``<``, ``<=``, ``>``, ``>=`` combined with ``and``/``or``/``not``);
    the event fires each time it changes from false to true
    (:mod:`pbsens.simulation.state_events`). ``assignments`` maps state names to
    expressions of the time, the states and the parameters, all evaluated just
    before the event (SBML's delay-free event). ``initial_value`` is the
    trigger's value before the start (SBML's ``initialValue``): with ``True`` an
    event whose trigger holds at the start (whose time is at or before the start
    time) does not fire there; with ``False`` it fires at the start.

    SBML's delayed and ordered events (:mod:`pbsens.simulation.event_queue`):
    ``delay`` (an expression of the time, the states and the parameters,
    evaluated when the trigger becomes true) puts the execution that much
    later; ``use_values_from_trigger_time`` evaluates the assignments at the
    trigger time (else at the execution); ``persistent=False`` cancels a pending
    execution whose trigger turns false before it; ``priority`` (evaluated at
    the execution) orders executions due at the same instant, highest first.
    """

    name: str
    time: str | None
    assignments: dict
    initial_value: bool = True
    trigger: str | None = None
    delay: str | None = None
    priority: str | None = None
    persistent: bool = True
    use_values_from_trigger_time: bool = True

    @property
    def queued(self) -> bool:
        """Whether the event needs the execution queue (a delay or a priority)."""
        return self.delay is not None or self.priority is not None

    def to_dict(self) -> dict:
        d = {"name": self.name}
        if self.trigger is not None:
            d["trigger"] = self.trigger
        else:
            d["time"] = self.time
        d["assignments"] = dict(self.assignments)
        if not self.initial_value:
            d["initial_value"] = False
        # the keys below only when set, so that the keys of models without them do not change
        for key in ("delay", "priority"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        if not self.persistent:
            d["persistent"] = False
        if not self.use_values_from_trigger_time:
            d["use_values_from_trigger_time"] = False
        return d


@dataclass
class ModelSpec:
    """Validated plain-data description of an ODE model ``x' = f(t, x, p)``."""

    name: str
    states: list[Quantity]
    parameters: list[Quantity]
    odes: dict[str, str]
    definitions: list[Definition] = field(default_factory=list)
    outputs: list[Definition] = field(default_factory=list)
    time: str = "t"
    title: str = ""
    meta: dict = field(default_factory=dict)
    events: tuple = ()

    # ------------------------------------------------------------------ views
    @property
    def state_names(self) -> list[str]:
        return [s.name for s in self.states]

    @property
    def param_names(self) -> list[str]:
        return [q.name for q in self.parameters]

    @property
    def output_names(self) -> list[str]:
        return [o.name for o in self.outputs]

    # ------------------------------------------------------------- validation
    def validate(self) -> "ModelSpec":
        """Check names and structure; raise :class:`ModelError` naming the culprit."""
        where = f"model {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ModelError("model 'name' must be a non-empty string")
        if not self.states:
            raise ModelError(f"{where}: 'states' is empty; a model needs at least one state")
        seen: dict[str, str] = {}

        def claim(name, kind):
            if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
                raise ModelError(f"{where}: {kind} name {name!r} is not a valid identifier")
            if unicodedata.normalize("NFKC", name) != name:
                raise ModelError(f"{where}: {kind} name {name!r} changes under Unicode NFKC normalisation "
                                 f"(Python reads it as {unicodedata.normalize('NFKC', name)!r}); "
                                 "use the plain form")
            if name in seen:
                raise ModelError(f"{where}: name {name!r} is used twice (as {seen[name]} and as {kind})")
            seen[name] = kind

        claim(self.time, "time variable")
        for s in self.states:
            claim(s.name, "state")
            if isinstance(s.value, str):
                if not s.value.strip():
                    raise ModelError(f"{where}: initial value of state {s.name!r} is an empty string")
            elif not _finite_number(s.value):
                raise ModelError(f"{where}: initial value of state {s.name!r} must be a finite number "
                                 f"or an expression of parameters, got {s.value!r}")
        for q in self.parameters:
            claim(q.name, "parameter")
            if not _finite_number(q.value):
                raise ModelError(f"{where}: value of parameter {q.name!r} must be a finite number, got {q.value!r}")
        for d in self.definitions:
            claim(d.name, "definition")
            _check_expression(d.expression, f"{where}: definition {d.name!r}")
        for o in self.outputs:
            claim(o.name, "output")
            _check_expression(o.expression, f"{where}: output {o.name!r}")
        names = set(self.state_names)
        for state, rhs in self.odes.items():
            if state not in names:
                raise ModelError(f"{where}: 'odes' has a right-hand side for {state!r}, which is not a state")
            _check_expression(rhs, f"{where}: right-hand side of {state!r}")
        missing = [s for s in self.state_names if s not in self.odes]
        if missing:
            raise ModelError(f"{where}: no right-hand side ('odes') for state(s) {', '.join(missing)}")
        if not isinstance(self.events, tuple):
            self.events = tuple(self.events)
        event_names = set()
        for ev in self.events:
            if not isinstance(ev, Event):
                raise ModelError(f"{where}: every entry of 'events' must be an Event, got {ev!r}")
            if not isinstance(ev.name, str) or not ev.name:
                raise ModelError(f"{where}: an event has no name: {ev!r}")
            if ev.name in event_names:
                raise ModelError(f"{where}: event name {ev.name!r} is used twice")
            event_names.add(ev.name)
            if (ev.time is None) == (ev.trigger is None):
                raise ModelError(f"{where}: event {ev.name!r} needs exactly one of 'time' (a time-triggered "
                                 "event) and 'trigger' (a state-triggered event)")
            if ev.trigger is not None:
                _check_expression(ev.trigger, f"{where}: trigger of event {ev.name!r}")
            else:
                _check_expression(ev.time, f"{where}: time of event {ev.name!r}")
            if not isinstance(ev.assignments, dict) or not ev.assignments:
                raise ModelError(f"{where}: event {ev.name!r} needs a non-empty 'assignments' object "
                                 "{state: expression}")
            for target, expr in ev.assignments.items():
                if target not in names:
                    raise ModelError(f"{where}: event {ev.name!r} assigns {target!r}, which is not a state "
                                     "(events may only set states)")
                _check_expression(expr, f"{where}: assignment to {target!r} of event {ev.name!r}")
            for key in ("initial_value", "persistent", "use_values_from_trigger_time"):
                if not isinstance(getattr(ev, key), bool):
                    raise ModelError(f"{where}: {key!r} of event {ev.name!r} must be true or false, "
                                     f"got {getattr(ev, key)!r}")
            for key in ("delay", "priority"):
                if getattr(ev, key) is not None:
                    _check_expression(getattr(ev, key), f"{where}: {key} of event {ev.name!r}")
        return self

    # ------------------------------------------------------------ (de)serialise
    @classmethod
    def from_dict(cls, data: dict, source: str = "model") -> "ModelSpec":
        """Build and validate a spec from the JSON structure described above."""
        if not isinstance(data, dict):
            raise ModelError(f"{source}: a model must be a JSON object, got {type(data).__name__}")
        data = copy.deepcopy(data)
        for key in ("name", "states", "odes"):
            if key not in data:
                raise ModelError(f"{source}: required key {key!r} is missing")
        try:
            states = [Quantity(_req(s, "name", source, "states"), _req(s, "initial", source, "states"))
                      for s in _list(data.pop("states"), "states", source)]
            params = [Quantity(_req(q, "name", source, "parameters"), _req(q, "value", source, "parameters"))
                      for q in _list(data.pop("parameters", []), "parameters", source)]
            defs = [Definition(_req(d, "name", source, "definitions"), _req(d, "expression", source, "definitions"))
                    for d in _list(data.pop("definitions", []), "definitions", source)]
            outs = [Definition(_req(d, "name", source, "outputs"), _req(d, "expression", source, "outputs"))
                    for d in _list(data.pop("outputs", []), "outputs", source)]
            events = tuple(_event(e, source) for e in _list(data.pop("events", []), "events", source))
            odes_raw = data.pop("odes")
            if isinstance(odes_raw, dict):
                odes = dict(odes_raw)
            else:
                odes = {}
                for o in _list(odes_raw, "odes", source):
                    st = _req(o, "state", source, "odes")
                    if st in odes:
                        raise ModelError(f"{source}: 'odes' has two right-hand sides for state {st!r}")
                    odes[st] = _req(o, "rhs", source, "odes")
        except (TypeError, AttributeError) as exc:  # pragma: no cover - defensive
            raise ModelError(f"{source}: malformed model: {exc}") from None
        name = data.pop("name")
        spec = cls(name=name, states=states, parameters=params, odes=odes, definitions=defs,
                   outputs=outs, time=data.pop("time", "t"), title=data.pop("title", ""), meta=data,
                   events=events)
        return spec.validate()

    def to_dict(self) -> dict:
        """The JSON structure of this spec (inverse of :meth:`from_dict`)."""
        d = {"name": self.name}
        if self.title:
            d["title"] = self.title
        d["time"] = self.time
        d["states"] = [{"name": s.name, "initial": s.value} for s in self.states]
        d["parameters"] = [{"name": q.name, "value": q.value} for q in self.parameters]
        d["definitions"] = [{"name": x.name, "expression": x.expression} for x in self.definitions]
        d["odes"] = [{"state": s, "rhs": self.odes[s]} for s in self.state_names]
        if self.outputs:
            d["outputs"] = [{"name": x.name, "expression": x.expression} for x in self.outputs]
        if self.events:
            d["events"] = [e.to_dict() for e in self.events]
        d.update(copy.deepcopy(self.meta))
        return d

    def equations_key(self) -> str:
        """SHA-256 of everything that affects the compiled code (not names' metadata)."""
        payload = {
            "time": self.time,
            "states": [[s.name, s.value] for s in self.states],
            "parameters": [q.name for q in self.parameters],
            "definitions": [[x.name, x.expression] for x in self.definitions],
            "odes": [[s, self.odes[s]] for s in self.state_names],
            "outputs": [[x.name, x.expression] for x in self.outputs],
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def discontinuities_key(self) -> str:
        """SHA-256 of the equations and the events (the code of :mod:`pbsens.model.discontinuities`)."""
        payload = [self.equations_key(), [e.to_dict() for e in self.events]]
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def read_json_model(path) -> ModelSpec:
    """Read a JSON model file into a validated :class:`ModelSpec`."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh, object_pairs_hook=_no_duplicate_keys(path))
    except FileNotFoundError:
        raise ModelError(f"model file {path!r} does not exist") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"model file {path!r} is not valid JSON: {exc}") from None
    return ModelSpec.from_dict(data, source=f"model file {path!r}")


# ---------------------------------------------------------------- helpers
def _no_duplicate_keys(path):
    """A ``json`` object hook that rejects a key given twice (json keeps the last one silently)."""
    def hook(pairs):
        out = {}
        for k, v in pairs:
            if k in out:
                raise ModelError(f"model file {path!r}: key {k!r} appears twice in one object "
                                 f"(e.g. two right-hand sides for one state in 'odes')")
            out[k] = v
        return out
    return hook


def _finite_number(v) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(float(v))


def _list(v, key, source):
    if not isinstance(v, list):
        raise ModelError(f"{source}: {key!r} must be a list, got {type(v).__name__}")
    return v


def _req(entry, key, source, section):
    if not isinstance(entry, dict):
        raise ModelError(f"{source}: every entry of {section!r} must be an object, got {entry!r}")
    if key not in entry:
        raise ModelError(f"{source}: an entry of {section!r} lacks {key!r}: {entry!r}")
    return entry[key]


def _event(entry, source):
    name = _req(entry, "name", source, "events")
    allowed = ("name", "time", "trigger", "assignments", "initial_value", "delay", "priority", "persistent",
               "use_values_from_trigger_time")
    unknown = set(entry) - set(allowed)
    if unknown:
        raise ModelError(f"{source}: event {name!r} has unknown key(s) {sorted(unknown)}; allowed: "
                         + ", ".join(allowed))
    for key in ("initial_value", "persistent", "use_values_from_trigger_time"):
        if key in entry and not isinstance(entry[key], bool):
            raise ModelError(f"{source}: {key!r} of event {name!r} must be true or false, got {entry[key]!r}")
    if ("time" in entry) == ("trigger" in entry):
        raise ModelError(f"{source}: event {name!r} needs exactly one of 'time' (time-triggered) and 'trigger' "
                         "(state-triggered)")
    assignments = _req(entry, "assignments", source, "events")
    if not isinstance(assignments, dict):
        raise ModelError(f"{source}: 'assignments' of event {name!r} must be an object {{state: expression}}")
    return Event(name=name, time=entry.get("time"), assignments=dict(assignments),
                 initial_value=entry.get("initial_value", True), trigger=entry.get("trigger"),
                 delay=entry.get("delay"), priority=entry.get("priority"), persistent=entry.get("persistent", True),
                 use_values_from_trigger_time=entry.get("use_values_from_trigger_time", True))


def _check_expression(expr, where):
    if not isinstance(expr, str) or not expr.strip():
        raise ModelError(f"{where}: expression must be a non-empty string, got {expr!r}")
