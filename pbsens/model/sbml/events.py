"""SBML events: time- and state-triggered events with state assignments become :class:`~pbsens.model.spec.Event`.

Supported: an event (with or without ``<delay>`` and ``<priority>``) whose
trigger is either

* **time-triggered**: it compares the time with an expression ``c`` that uses
  neither the time nor anything the model changes (states, species,
  reactions, rate-ruled symbols): ``time >= c``, ``time > c``, ``c <= time``,
  ``c < time`` (MathML ``geq``/``gt``/``leq``/``lt``, also written
  ``geq(time, c)``). ``c`` may be a number, a parameter or an expression of
  parameters, so the event time may be estimated. The event fires when the
  time reaches ``c`` (for ``>`` as for ``>=``: the time at which the trigger
  becomes true is ``c`` either way), once, since the time never decreases
  again. It becomes an ``Event`` with a ``time``;
* **state-triggered**: any other combination of the comparisons ``lt``,
  ``leq``, ``gt``, ``geq`` (of expressions of the time, species, parameters,
  ...) with ``and``, ``or``, ``xor``, ``not``. It becomes an ``Event`` with a
  ``trigger`` and fires each time the trigger changes from false to true
  (located during the solve, :mod:`pbsens.simulation.state_events`).

The assignments set species or parameters; a species or parameter that an
event sets becomes a state (with right-hand side 0 when nothing else changes
it). ``initialValue`` (SBML Level 3; Level 2 behaves as ``true``) decides
whether an event whose trigger holds at the start fires there (see
:class:`~pbsens.model.spec.Event`). The delay and the priority (their math),
``persistent`` (Level 3; Level 2 events are persistent) and
``useValuesFromTriggerTime`` (Level 2 Version 4 and Level 3; ``true`` before)
are kept on the ``Event``; a model with a delay or a priority is simulated
through the execution queue of :mod:`pbsens.simulation.event_queue` (states
only: its sensitivities raise :class:`UnsupportedModelError`, ``"event delay
sensitivities"``). Without delays and priorities, two state-triggered events
firing at the same instant raise :class:`UnsupportedModelError` at run time
(``"simultaneous events"``).

Anything else raises :class:`UnsupportedModelError` naming the event and what
is unsupported: a trigger of another form, e.g. an equality ``eq``/``neq``
(whose time cannot be located) or a constant (``"event trigger"``), a
priority without math (``"event priority"``), an assignment to a compartment
or a species reference (``"event assignment"``).

The reader calls this module twice:

1. :func:`scan_events` from :meth:`SbmlReader.scan`, before anything is
   translated, so that unsupported events are listed in the one
   :class:`UnsupportedModelError` that names every unsupported construct.
2. :func:`read_events` from :meth:`SbmlReader.build`, once spec names, the
   time name and the sensitivity parameters are known; it returns one
   :class:`~pbsens.model.spec.Event` per event, in document order.
   :func:`event_targets` tells the reader beforehand which symbols events set
   (they must be states).
"""
from __future__ import annotations

from ...errors import UnsupportedModelError
from ..spec import Event
from .document import element_id

__all__ = ["event_unsupported", "scan_events", "read_event", "read_events", "event_targets"]


def _trigger_time_node(event, L):
    """The math node of ``c`` in a ``time >= c``-style trigger, or None when the trigger is not of that form."""
    trig = event.getTrigger()
    node = trig.getMath() if trig is not None else None
    if node is None or node.getNumChildren() != 2:
        return None
    a, b = node.getChild(0), node.getChild(1)
    t = node.getType()
    if t in (L.AST_RELATIONAL_GEQ, L.AST_RELATIONAL_GT) and a.getType() == L.AST_NAME_TIME:
        c = b
    elif t in (L.AST_RELATIONAL_LEQ, L.AST_RELATIONAL_LT) and b.getType() == L.AST_NAME_TIME:
        c = a
    else:
        return None
    return None if _uses_time(c, L) else c


def _uses_time(node, L):
    if node.getType() == L.AST_NAME_TIME:
        return True
    return any(_uses_time(node.getChild(i), L) for i in range(node.getNumChildren()))


def _names(node, L, out):
    if node.getType() == L.AST_NAME:
        out.add(node.getName())
    for i in range(node.getNumChildren()):
        _names(node.getChild(i), L, out)
    return out


def _changing_symbols(model):
    """Ids whose value the model changes over time: species changed by reactions or rules, rate-ruled symbols,
    reactions, and whatever an assignment rule computes from those (transitively)."""
    changing = set()
    for i in range(model.getNumReactions()):
        r = model.getReaction(i)
        changing.add(r.getId())
        for lst in (r.getListOfReactants(), r.getListOfProducts()):
            for j in range(lst.size()):
                sp = model.getSpecies(lst.get(j).getSpecies())
                if sp is not None and not sp.getBoundaryCondition() and not sp.getConstant():
                    changing.add(sp.getId())
    rules = [model.getRule(i) for i in range(model.getNumRules())]
    for rule in rules:
        if rule.isRate():
            changing.add(rule.getVariable())
    for i in range(model.getNumEvents()):
        ev = model.getEvent(i)
        for j in range(ev.getNumEventAssignments()):
            changing.add(ev.getEventAssignment(j).getVariable())
    return changing, rules


def _depends_on_changing(node, L, model):
    """Names in ``node`` that change over time (following assignment rules)."""
    changing, rules = _changing_symbols(model)
    assign = {r.getVariable(): r.getMath() for r in rules if r.isAssignment() and r.getMath() is not None}
    seen, found = set(), []

    def visit(names):
        for n in sorted(names):
            if n in seen:
                continue
            seen.add(n)
            if n in changing:
                found.append(n)
            elif n in assign:
                visit(_names(assign[n], L, set()))

    visit(_names(node, L, set()))
    return found


def _is_condition_tree(node, L):
    """Whether ``node`` combines the comparisons lt/leq/gt/geq with and/or/xor/not (a locatable trigger)."""
    t = node.getType()
    if t in (L.AST_RELATIONAL_LT, L.AST_RELATIONAL_LEQ, L.AST_RELATIONAL_GT, L.AST_RELATIONAL_GEQ):
        return node.getNumChildren() >= 2
    if t in (L.AST_LOGICAL_AND, L.AST_LOGICAL_OR, L.AST_LOGICAL_XOR, L.AST_LOGICAL_NOT):
        n = node.getNumChildren()
        return n >= 1 and all(_is_condition_tree(node.getChild(i), L) for i in range(n))
    return False


def _time_triggered(event, L, m):
    """The ``c`` node of a time-triggered event (see the module docstring), or None."""
    c = _trigger_time_node(event, L)
    return c if c is not None and not _depends_on_changing(c, L, m) else None


def _delay_math(event):
    """The math of the event's ``<delay>``, or None (no delay, or one without math)."""
    if event.isSetDelay() and event.getDelay() is not None:
        return event.getDelay().getMath()
    return None


def _priority_math(event):
    """The math of the event's ``<priority>`` (SBML Level 3), or None when it has none."""
    if hasattr(event, "isSetPriority") and event.isSetPriority() and event.getPriority() is not None:
        return event.getPriority().getMath()
    return None


def event_unsupported(event, index, ctx):
    """Why ``event`` cannot be represented (an ``unsupported`` kind), or None when it can."""
    L, m = ctx.L, ctx.m
    if hasattr(event, "isSetPriority") and event.isSetPriority() and _priority_math(event) is None:
        return "event priority"          # a priority without math (SBML Level 3 Version 2): no order known
    trig = event.getTrigger()
    node = trig.getMath() if trig is not None else None
    if node is None:
        return "event trigger"
    if _time_triggered(event, L, m) is None and not _is_condition_tree(node, L):
        return "event trigger"
    comps = {m.getCompartment(i).getId() for i in range(m.getNumCompartments())}
    for j in range(event.getNumEventAssignments()):
        var = event.getEventAssignment(j).getVariable()
        if var in comps or (m.getSpecies(var) is None and m.getParameter(var) is None):
            return "event assignment"
    return None


def scan_events(model, ctx):
    """Report every unsupported event of ``model`` with ``ctx.add_unsupported(kind, id)``,
    and scan the math of the supported ones."""
    for i in range(model.getNumEvents()):
        ev = model.getEvent(i)
        eid = element_id(ev, "event", i)
        kind = event_unsupported(ev, i, ctx)
        if kind:
            ctx.add_unsupported(kind, eid)
            continue
        ctx.scan_math(ev.getTrigger().getMath(), eid)
        for node in (_delay_math(ev), _priority_math(ev)):
            if node is not None:
                ctx.scan_math(node, eid)
        for j in range(ev.getNumEventAssignments()):
            ctx.scan_math(ev.getEventAssignment(j).getMath(), eid)


def event_targets(model) -> list:
    """SBML ids that the events of ``model`` set, in document order, without repeats."""
    out = []
    for i in range(model.getNumEvents()):
        ev = model.getEvent(i)
        for j in range(ev.getNumEventAssignments()):
            var = ev.getEventAssignment(j).getVariable()
            if var not in out:
                out.append(var)
    return out


def read_event(event, index, ctx):
    """One SBML event as a :class:`~pbsens.model.spec.Event` (spec names, dialect math)."""
    eid = element_id(event, "event", index)
    kind = event_unsupported(event, index, ctx)
    if kind:       # scan() has reported it already; never drop an event silently
        raise UnsupportedModelError(f"{ctx.src}: event {eid!r} cannot be represented ({kind})", [(kind, eid)])
    c = _time_triggered(event, ctx.L, ctx.m)
    where = f"event {eid!r}"
    if c is not None:
        time_text, trigger = ctx.convert(c, f"trigger of {where}"), None
    else:
        time_text, trigger = None, ctx.convert(event.getTrigger().getMath(), f"trigger of {where}")
    assignments = {}
    for j in range(event.getNumEventAssignments()):
        ea = event.getEventAssignment(j)
        var = ea.getVariable()
        if ea.getMath() is None:
            raise UnsupportedModelError(f"{ctx.src}: {where} assigns {var!r} without math",
                                        [("event assignment", eid)])
        assignments[ctx.names[var]] = ctx.convert(ea.getMath(), f"assignment to {var!r} of {where}")
    trig = event.getTrigger()
    level3 = ctx.m.getLevel() >= 3
    initial = bool(trig.getInitialValue()) if level3 else True
    persistent = bool(trig.getPersistent()) if level3 and trig.isSetPersistent() else True
    from_trigger = True
    if level3 or (ctx.m.getLevel() == 2 and ctx.m.getVersion() >= 4):
        if not level3 or event.isSetUseValuesFromTriggerTime():
            from_trigger = bool(event.getUseValuesFromTriggerTime())
    delay = _delay_math(event)
    priority = _priority_math(event)
    return Event(name=eid, time=time_text, assignments=assignments, initial_value=initial, trigger=trigger,
                 delay=None if delay is None else ctx.convert(delay, f"delay of {where}"),
                 priority=None if priority is None else ctx.convert(priority, f"priority of {where}"),
                 persistent=persistent, use_values_from_trigger_time=from_trigger)


def read_events(model, ctx) -> tuple:
    """Every event of ``model`` in spec terms, in document order (``()`` when there is none)."""
    events = (read_event(model.getEvent(i), i, ctx) for i in range(model.getNumEvents())
              if model.getEvent(i).getNumEventAssignments())      # an event that sets nothing changes nothing
    return tuple(events)
