"""What the readers of PEtab tables share: the error naming file, row and column, where a
cell is, whether a cell is empty, and the petab library (imported on first use)."""
from __future__ import annotations

import math

from ..errors import PbsensError


class PetabError(PbsensError):
    """A PEtab problem is invalid; the message names the file, row and column."""


def _petab():
    try:
        import petab.v1 as petab_v1
    except ImportError:  # pragma: no cover - the extra is not installed
        raise PbsensError("PEtab problems need the 'petab' package: pip install 'pbsens[petab]'") from None
    return petab_v1


def table_place(table, row=None, column=None):
    """Where an error is, for its message: ``table``, then ``row`` (text) and the column where given."""
    s = table
    if row is not None:
        s += f", {row}"
    if column is not None:
        s += f", column {column!r}"
    return s


def _where(files, table, row=None, column=None):
    name = files.get(table) or f"the {table} table"
    return table_place(f"{table} file {name!r}", None if row is None else f"row {row + 1} (line {row + 2})",
                       column)


def _is_empty(v):
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    return isinstance(v, str) and not v.strip()
