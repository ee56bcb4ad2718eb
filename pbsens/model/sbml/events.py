"""SBML events: where ``<event>`` elements enter the reader. Today none is supported.

The reader calls this module twice:

1. :func:`scan_events` from :meth:`SbmlReader.scan`, before anything is
   translated, so that unsupported events are listed in the one
   :class:`UnsupportedModelError` that names every unsupported construct
   (``("event", id)``). It asks :func:`event_unsupported` about each event.
2. :func:`read_events` from :meth:`SbmlReader.build`, once spec names, the
   time name and the sensitivity parameters are known (``ctx.convert(math,
   where)`` then gives any math as dialect text in spec names), and before the
   spec is assembled. It returns one entry per event, in document order,
   from :func:`read_event`.

Today :func:`event_unsupported` reports every event, so :func:`read_events`
is never reached with an event; :func:`read_event` raises for any event all the
same, so nothing is ever dropped silently. Supporting a kind of event means:
:func:`event_unsupported` returns None for it, :func:`read_event` translates
it, and the reader puts the returned entries into the spec.
"""
from __future__ import annotations

from ...errors import UnsupportedModelError
from .document import element_id


def event_unsupported(event, index, ctx):
    """Why ``event`` cannot be represented (an ``unsupported`` kind), or None when it can.

    Today: ``"event"`` for every event.
    """
    return "event"


def scan_events(model, ctx):
    """Report every unsupported event of ``model`` with ``ctx.add_unsupported(kind, id)``."""
    for i in range(model.getNumEvents()):
        ev = model.getEvent(i)
        kind = event_unsupported(ev, i, ctx)
        if kind:
            ctx.add_unsupported(kind, element_id(ev, "event", i))


def read_event(event, index, ctx):
    """One SBML event in spec terms. Today: raises :class:`UnsupportedModelError` naming it."""
    eid = element_id(event, "event", index)
    raise UnsupportedModelError(f"{ctx.src}: event {eid!r} cannot be represented: pbsens does not "
                                f"support SBML events yet", [("event", eid)])


def read_events(model, ctx) -> tuple:
    """Every event of ``model`` in spec terms, in document order (``()`` when there is none)."""
    return tuple(read_event(model.getEvent(i), i, ctx) for i in range(model.getNumEvents()))
