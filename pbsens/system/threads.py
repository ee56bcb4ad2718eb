"""BLAS threads: pbsens's hot paths run with BLAS limited to one thread, scoped to the call.

pbsens's kernels work on many small matrices; a multithreaded BLAS (OpenBLAS starts one
thread per core) wakes and synchronises its threads for each small product or solve,
which on a busy machine makes them slower, not faster (up to 50x on 2 shared cores, in
the state solver's and the forward reference's LU solves). The public entry points
therefore run inside :func:`blas_single_thread` (a context manager and decorator):
the first entry sets every loaded BLAS library to one thread and the last exit restores
the previous counts, so the user's own numpy code outside pbsens keeps its threads.

Cost. ``threadpoolctl.threadpool_limits`` inspects every loaded library on each entry
(about 10 ms here); ``ThreadpoolController.limit`` about 0.1 ms. This module finds the
BLAS libraries once per process (a cached ``ThreadpoolController``), then only reads
and sets thread counts: a few microseconds per library on entry and exit, nothing
when BLAS already runs one thread (``OPENBLAS_NUM_THREADS=1``), and nothing for
nested calls (a process-wide depth count: calls from several Python threads share one
limit, set by the first to enter and restored by the last to leave). While any thread
is inside pbsens, BLAS is limited for the whole process: the OpenBLAS thread count is
process-wide. (If some other thread holds a ``threadpoolctl`` limit at that moment,
threadpoolctl lets only that thread set OpenBLAS's count, and pbsens leaves it as is.)

``PBSENS_BLAS_THREADS`` (read once) changes the limit: e.g. ``4`` for very large models
whose products go to BLAS, ``0`` to leave BLAS alone.
"""
from __future__ import annotations

import functools
import os
import threading

__all__ = ["blas_single_thread", "limit_blas_threads", "blas_thread_counts", "refresh_blas_libraries"]

_lock = threading.Lock()
_depth = 0
_saved: list = []      # (library controller, previous thread count) to restore at the last exit
_libs = None           # BLAS library controllers, found once per process
_limit = None


def _target() -> int:
    global _limit
    if _limit is None:
        raw = os.environ.get("PBSENS_BLAS_THREADS", "").strip()
        try:
            _limit = max(int(raw), 0) if raw else 1
        except ValueError:
            _limit = 1
    return _limit


def _blas_libs() -> list:
    global _libs
    if _libs is None:
        try:
            from threadpoolctl import ThreadpoolController
            _libs = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
        except Exception:  # pragma: no cover - no threadpoolctl or an unknown library: no limit
            _libs = []
    return _libs


def refresh_blas_libraries() -> None:
    """Look for loaded BLAS libraries again (after importing one pbsens did not see yet)."""
    global _libs
    with _lock:
        _libs = None


def blas_thread_counts() -> list:
    """Current thread count of each BLAS library pbsens limits (for tests and diagnostics)."""
    return [lib.get_num_threads() for lib in _blas_libs()]


def _release_control(lib) -> None:
    # threadpoolctl lets only one Python thread at a time set OpenBLAS's (process-wide)
    # count; give control back so that whichever thread leaves last can restore it.
    release = getattr(lib, "clear_controlling_thread", None)
    if release is not None:
        release()


def _enter() -> None:
    global _depth, _saved
    with _lock:
        _depth += 1
        if _depth > 1:
            return
        limit = _target()
        if not limit:
            return
        saved = []
        for lib in _blas_libs():
            n = lib.get_num_threads()
            if n is not None and n != limit:
                lib.set_num_threads(limit)
                _release_control(lib)
                saved.append((lib, n))
        _saved = saved


def _exit() -> None:
    global _depth, _saved
    with _lock:
        _depth -= 1
        if _depth > 0:
            return
        for lib, n in _saved:
            lib.set_num_threads(n)
            _release_control(lib)
        _saved = []


class _BlasSingleThread:
    __slots__ = ()

    def __enter__(self):
        _enter()
        return self

    def __exit__(self, *exc):
        _exit()
        return False


_CONTEXT = _BlasSingleThread()


def blas_single_thread() -> _BlasSingleThread:
    """Context manager: BLAS limited to one thread inside (see the module docstring).

    ``with blas_single_thread(): ...``; re-entrant and usable from several threads.
    """
    return _CONTEXT


def limit_blas_threads(func=None, *, unless=None):
    """Decorator form of :func:`blas_single_thread` for public entry points.

    ``@limit_blas_threads`` or ``@limit_blas_threads(unless=pred)``: ``pred(args, kwargs)``,
    the call's arguments, true for a call that runs no BLAS routine, which then skips the
    limit. The wrapper keeps the function's name, docstring and (through ``__wrapped__``)
    its signature for ``help()`` and ``inspect.signature``.
    """
    if func is None:
        return functools.partial(limit_blas_threads, unless=unless)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if unless is not None and unless(args, kwargs):
            return func(*args, **kwargs)
        _enter()
        try:
            return func(*args, **kwargs)
        finally:
            _exit()
    return wrapper


def _after_fork_in_child() -> None:  # the lock may have been held by another thread at fork
    global _lock, _depth, _saved
    _lock = threading.Lock()
    _depth = 0
    _saved = []


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
