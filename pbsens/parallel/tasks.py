"""What a task of a batch returns and how failures are reported: :class:`TaskFailure`,
:class:`BatchError`, a chunk's results (pickled compactly) and the helpers that turn a
batch's results into a list or an error. Knows no pbsens type: it runs ``fn(context, item)``.
"""
from __future__ import annotations

import dataclasses
import traceback
import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import PbsensError

__all__ = ["TaskFailure", "BatchError", "run_chunk", "finish_batch", "map_here", "float_rows", "check_errors"]


@dataclass
class TaskFailure:
    """A task that raised or whose worker died; stands in its result's place.

    Attributes
    ----------
    index : int
        Position of the task's item in the input.
    item : object
        The item (parameter vector, chain specification with its seed, ...).
    error : str
        ``"ExceptionType: message"``, or how the worker process ended.
    traceback : str
        The worker-side traceback ('' when the worker died).
    killed : bool
        True when the worker process died (the task may not be at fault alone:
        the other items of the same chunk are reported too).
    """

    index: int
    item: object
    error: str
    traceback: str = ""
    killed: bool = False

    def __repr__(self):
        return f"<TaskFailure #{self.index}{' (worker died)' if self.killed else ''}: {self.error}>"


class BatchError(PbsensError):
    """Some tasks of a batch failed; ``failures`` lists them, ``results`` holds every result
    (a :class:`TaskFailure` in place of each failed one)."""

    def __init__(self, message, failures, results):
        super().__init__(message)
        self.failures = failures
        self.results = results


class _Results(list):
    """A chunk's ``[("ok", value) | ("err", message, traceback)]``, pickled compactly when every
    value is an instance of one dataclass (e.g. :class:`~pbsens.problems.EvaluationResult`):
    each attribute's arrays as one stacked array (pickling 32 results attribute by attribute,
    five small arrays each, cost 2 ms of CPU per chunk, sender and receiver together; stacked,
    0.3 ms). Nothing here knows the dataclass: its type travels by reference."""

    def __reduce__(self):
        oks = [i for i, r in enumerate(self) if r[0] == "ok"]
        vals = [self[i][1] for i in oks]
        kind = type(vals[0]) if vals else None
        if kind is None or not dataclasses.is_dataclass(kind) or any(type(v) is not kind for v in vals):
            return (_Results, (list(self),))
        dicts = [object.__getattribute__(v, "__dict__") for v in vals]
        names = list(dicts[0])
        if any(list(d) != names for d in dicts):
            return (_Results, (list(self),))
        cols = []
        for name in names:
            col = [d[name] for d in dicts]
            x0 = col[0]
            if isinstance(x0, np.ndarray) and all(isinstance(x, np.ndarray) and x.shape == x0.shape
                                                  and x.dtype == x0.dtype for x in col):
                cols.append(np.stack(col))
            else:
                cols.append(col)
        return (_unpack_results, (kind, len(self), oks, names, cols,
                                  [(i, r) for i, r in enumerate(self) if r[0] != "ok"]))


def _unpack_results(kind, n, oks, names, cols, others):
    out = [None] * n
    for k, i in enumerate(oks):
        r = kind.__new__(kind)
        r.__dict__.update(zip(names, (c[k] for c in cols)))
        out[i] = ("ok", r)
    for i, r in others:
        out[i] = r
    return _Results(out)


def run_chunk(fn, context, items):
    """Run ``fn(context, item)`` per item; ``[("ok", value) | ("err", message, traceback)]``."""
    out = _Results()
    for it in items:
        try:
            out.append(("ok", fn(context, it)))
        except BaseException as exc:  # noqa: BLE001 - reported to the caller with the item (sys.exit too)
            if isinstance(exc, KeyboardInterrupt):
                raise
            out.append(("err", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    return out


def finish_batch(results, errors, what):
    failures = [r for r in results if isinstance(r, TaskFailure)]
    if failures:
        first = failures[0]
        msg = (f"{len(failures)} of {len(results)} {what} failed; first: item {first.index} "
               f"({_short(first.item)}): {first.error}")
        if errors == "raise":
            raise BatchError(msg, failures, results)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
    return results


def _short(item):
    if isinstance(item, np.ndarray):
        return "theta = " + np.array2string(item, precision=4, max_line_width=200)
    return repr(item)[:200]


def float_rows(values, name, dim):
    """``values`` as an ``(n, dim)`` float array, one task a row."""
    try:
        a = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise PbsensError(f"{name!r} must be an (n, {dim}) array of numbers") from None
    if a.ndim != 2 or a.shape[1] != dim:
        raise PbsensError(f"{name!r} must have shape (n, {dim}), got {a.shape}")
    return a


def map_here(fn, rows, errors, what):
    """``fn(row)`` for each row in this process; a failure becomes a :class:`TaskFailure`
    (then handled by ``errors``, as for the results of :func:`map_tasks`)."""
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(fn(row))
        except PbsensError as exc:
            out.append(TaskFailure(i, row, f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    return finish_batch(out, errors, what)


def check_errors(errors):
    if errors not in ("raise", "keep"):
        raise PbsensError(f"'errors' must be 'raise' or 'keep', got {errors!r}")
