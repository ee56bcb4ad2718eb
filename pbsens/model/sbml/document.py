"""libsbml itself: importing it, its status codes and error logs, element ids.

python-libsbml is optional (``pip install pbsens[sbml]``); :func:`load_libsbml`
imports it when an SBML file is read or written, and says how to install it
when it is missing.
"""
from __future__ import annotations

from ...errors import ModelError, PbsensError


def load_libsbml():
    """The ``libsbml`` module (raises :class:`PbsensError` when it is not installed)."""
    try:
        import libsbml  # noqa: PLC0415 - optional dependency, imported lazily
    except ImportError:
        raise PbsensError("reading or writing SBML needs python-libsbml: "
                          "pip install pbsens[sbml]") from None
    return libsbml


#: libsbml errors about units only (units do not enter pbsens's equations): reported as ignored.
#: 10313: a ``units`` attribute names no unit definition (test-suite case 00959's L3V2 file).
UNIT_ONLY_ERRORS = {10313: "dangling unit reference"}


def raise_on_errors(L, doc, source, what, ignored=None):
    """Raise :class:`ModelError` quoting libsbml's errors (severity error or worse) in ``doc``.

    With a list ``ignored``, the errors of :data:`UNIT_ONLY_ERRORS` are appended to it as
    ``(kind, line)`` instead."""
    errs = [doc.getError(i) for i in range(doc.getNumErrors())]
    errs = [e for e in errs if e.getSeverity() >= L.LIBSBML_SEV_ERROR]
    if ignored is not None:
        ignored.extend((UNIT_ONLY_ERRORS[e.getErrorId()], f"line {e.getLine()}") for e in errs
                       if e.getErrorId() in UNIT_ONLY_ERRORS)
        errs = [e for e in errs if e.getErrorId() not in UNIT_ONLY_ERRORS]
    if errs:
        lines = [f"line {e.getLine()}: {e.getShortMessage()}: {e.getMessage().strip()}" for e in errs[:10]]
        more = f"\n  ... and {len(errs) - 10} more" if len(errs) > 10 else ""
        raise ModelError(f"{source} {what} ({len(errs)} error(s)):\n  " + "\n  ".join(lines) + more)


def check_consistency(L, doc, source, what, ignored=None):
    """Run libsbml's consistency checks (units and modelling practice off) and raise on errors
    (``ignored``: as for :func:`raise_on_errors`)."""
    doc.setConsistencyChecks(L.LIBSBML_CAT_UNITS_CONSISTENCY, False)
    doc.setConsistencyChecks(L.LIBSBML_CAT_MODELING_PRACTICE, False)
    doc.checkConsistency()
    raise_on_errors(L, doc, source, what, ignored)


def check_status(status, L, what):
    """Raise :class:`ModelError` when a libsbml setter refused its value."""
    if status != L.LIBSBML_OPERATION_SUCCESS:
        raise ModelError(f"{what}: libsbml refused it ({L.OperationReturnValue_toString(status)})")


def element_id(el, kind, i):
    """An element's id, else its metaid, else '<kind> #i' (1-based)."""
    ident = el.getIdAttribute() if hasattr(el, "getIdAttribute") else el.getId()
    if ident:
        return ident
    if el.isSetMetaId() and el.getMetaId():
        return el.getMetaId()
    return f"{kind} #{i + 1}"
