"""One map over workers: local processes or a dask.distributed cluster, results in input order.

:func:`map_tasks` runs ``fn(context, item)`` for every item, in chunks (so that
tiny evaluations are not dominated by scheduling), on

* **local processes** (default): a pool of worker processes started with the
  ``spawn`` context (numba and ``fork`` do not mix), kept alive between calls
  (one pool per worker count, closed at exit or by :func:`shutdown`);
* **dask.distributed** when ``client`` is given: a ``distributed.Client``, a
  scheduler address (``"tcp://host:8786"``), or ``"local"`` to start a
  ``LocalCluster`` with ``n_workers`` single-threaded worker processes for the
  call (:func:`local_cluster`). Chunks go as dask tasks or, for batches on
  single-threaded workers, as direct calls to one actor kept on each worker
  (``dispatch``; :mod:`pbsens.parallel.dask_backend`).

What the tasks are is the caller's business (:mod:`pbsens.batches` sends recipes of
problems and models to build in the workers); nothing here knows a pbsens type.

A task that raises, or whose worker process dies (killed, ``os._exit``, a
segmentation fault), becomes a :class:`TaskFailure` naming its item (e.g. the
chain's seed) in the result list; the other results are kept.
"""
from __future__ import annotations

import atexit
import math
import multiprocessing
import os
import threading
import time
from multiprocessing.connection import wait as _mp_wait

import numpy as np

from ..errors import PbsensError
from .tasks import TaskFailure, run_chunk

__all__ = ["map_tasks", "shutdown", "local_cluster"]


def _worker_main(conn):
    """Loop of a local worker process: receive ``(tag, fn, context, items)``, send back results."""
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)  # one BLAS thread per worker: the workers already fill the cores
    except ImportError:  # pragma: no cover
        pass
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        tag, fn, context, items = msg
        conn.send((tag, run_chunk(fn, context, items)))


# ------------------------------------------------------------------ local process pool
PIPELINE_BYTES = 16_384   # a second chunk is queued to a busy worker only when its message is
                          # this small: it then fits the pipe's buffer and sending never blocks
PIPELINE_SECONDS = 0.5    # ... and only after the worker answered a chunk within this time: long
                          # chunks (chains) go to whichever worker is free, not queued behind one


class _Worker:
    def __init__(self, ctx):
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.busy = []     # chunk numbers sent and not answered, in the order sent
        self.since = 0.0   # when its current chunk started (sent to it idle, or the previous answered)

    def stop(self):
        try:
            self.conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=2)
        self.conn.close()


class _LocalPool:
    """``n`` spawned worker processes; a worker that dies is replaced."""

    def __init__(self, n):
        self.ctx = multiprocessing.get_context("spawn")
        self.n = n
        self.workers = [_Worker(self.ctx) for _ in range(n)]
        self.lock = threading.Lock()

    def run(self, fn, context, chunks, poll=None, in_flight=2):
        """Results per chunk (a list per chunk, or ``("died", exitcode)``).

        Chunks go to whichever worker is free, in input order; a worker busy with one
        chunk gets its next one queued (up to ``in_flight``), so that it does not wait a
        round trip between chunks, once it has answered a chunk within
        :data:`PIPELINE_SECONDS` and if the message is at most :data:`PIPELINE_BYTES`.
        """
        from multiprocessing.reduction import ForkingPickler
        results = [None] * len(chunks)
        todo = list(range(len(chunks)))[::-1]
        msgs = {}

        def message(c):
            if c not in msgs:
                msgs[c] = bytes(ForkingPickler.dumps((c, fn, context, chunks[c])))
            return msgs[c]

        fast = set()     # workers (by id) whose last chunk came back within PIPELINE_SECONDS
        with self.lock:
            while todo or any(w.busy for w in self.workers):
                for w in self.workers:
                    while todo and (not w.busy or (id(w) in fast and len(w.busy) < in_flight
                                                   and len(message(todo[-1])) <= PIPELINE_BYTES)):
                        c = todo.pop()
                        if not w.busy:
                            w.since = time.perf_counter()
                        w.busy.append(c)
                        try:
                            w.conn.send_bytes(message(c))
                        except (BrokenPipeError, OSError):
                            break   # the worker died: its sentinel reports its chunks below
                        msgs.pop(c, None)
                busy = [w for w in self.workers if w.busy]
                ready = _mp_wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=0.2)
                if poll is not None:
                    poll()
                for i, w in enumerate(list(self.workers)):
                    if not w.busy:
                        continue
                    if w.conn in ready:
                        try:
                            tag, res = w.conn.recv()
                        except (EOFError, OSError):
                            tag, res = None, None
                        if res is not None:
                            results[tag] = res
                            w.busy.remove(tag)
                            now = time.perf_counter()
                            if now - w.since <= PIPELINE_SECONDS:
                                fast.add(id(w))
                            else:
                                fast.discard(id(w))
                            w.since = now
                            continue
                    if w.proc.sentinel in ready or not w.proc.is_alive():
                        w.proc.join(timeout=5)
                        while w.busy and w.conn.poll():      # it answered just before exiting
                            try:
                                tag, res = w.conn.recv()
                            except (EOFError, OSError):
                                break
                            results[tag] = res
                            w.busy.remove(tag)
                        if w.busy:      # the first was running; those queued behind it never started
                            results[w.busy[0]] = ("died", w.proc.exitcode)
                            todo.extend(reversed(w.busy[1:]))
                        w.busy = []
                        w.conn.close()
                        self.workers[i] = _Worker(self.ctx)
        return results

    def close(self):
        for w in self.workers:
            w.stop()
        self.workers = []


_POOLS = {}


def _local_pool(n):
    pool = _POOLS.get(n)
    if pool is None:
        pool = _POOLS[n] = _LocalPool(n)
    return pool


def shutdown():
    """Stop the local worker processes kept between calls."""
    for n in list(_POOLS):
        _POOLS.pop(n).close()


atexit.register(shutdown)


def local_cluster(n_workers=2, *, quiet=True, **kwargs):
    """A dask ``LocalCluster`` of single-threaded worker processes with dask's periodic
    work turned down (:func:`pbsens.parallel.dask_backend.local_cluster`)."""
    from .dask_backend import local_cluster as make
    return make(n_workers, quiet=quiet, **kwargs)


# ------------------------------------------------------------------ the map
def _check_workers(n_workers):
    if n_workers is None:
        return max(1, min(os.cpu_count() or 1, 64))
    if isinstance(n_workers, bool) or not isinstance(n_workers, (int, np.integer)) or n_workers < 1:
        raise PbsensError(f"'n_workers' must be a positive integer, got {n_workers!r}")
    return int(n_workers)


_DISPATCH = ("auto", "tasks", "resident")


def _usable_cpus():
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _even_sizes(n_items, n_chunks):
    """Sizes of ``min(n_chunks, n_items)`` contiguous chunks covering ``n_items`` items, as
    even as they can be (the larger first): 64 items in 2 chunks are 32 + 32, 5 in 2 are 3 + 2."""
    k = max(1, min(int(n_chunks), n_items))
    q, r = divmod(n_items, k)
    return [q + 1] * r + [q] * (k - r)


def _local_sizes(n_items, n_workers, cpus):
    """Chunk sizes for local processes: one even chunk per worker when the workers fill the
    ``cpus`` usable CPUs, guided chunks (:func:`_guided_sizes`) when a core is left over."""
    return _even_sizes(n_items, n_workers) if n_workers >= cpus else _guided_sizes(n_items, n_workers)


def _guided_sizes(n_items, n_workers, floor=16):
    """Guided self-scheduling: each chunk is ``1 / (2 n_workers)`` of what remains, at least
    ``n_items / (16 n_workers)`` items: 64 items on 2 workers are
    16, 12, 9, 7, 5, 4, 3, 2, 2, 2, 2 (the last chunks even out the workers' finishing times)."""
    low = max(1, math.ceil(n_items / (floor * n_workers)))
    out, rest = [], n_items
    while rest > 0:
        k = min(rest, max(low, math.ceil(rest / (2 * n_workers))))
        out.append(k)
        rest -= k
    return out


def map_tasks(fn, context, items, *, client=None, n_workers=None, chunk_size=None, poll=None,
              processes=None, dispatch="tasks"):
    """``[fn(context, item) for item in items]`` on workers, in input order.

    Parameters
    ----------
    fn : callable
        A module-level function ``fn(context, item)`` (workers import it by name).
    context : object
        Shared, picklable input sent with each chunk (a recipe, options).
    items : sequence or ndarray
        Picklable task inputs; a 2-D array's rows (each chunk then travels as one array).
    client : distributed.Client, str or None
        dask: a Client, a scheduler address, or ``"local"`` (a ``LocalCluster`` of
        ``n_workers`` processes, closed afterwards). ``None``: local processes.
    n_workers : int, optional
        Local worker processes (default: the number of CPUs). With ``n_workers=1``
        and no client the tasks run in this process unless ``processes=True``.
    chunk_size : int, optional
        Items per task (the last one takes the rest). Default: for local processes, guided
        chunks (each ``1 / (2 n_workers)`` of what remains, at least ``len(items) /
        (16 n_workers)``; a worker gets its next chunk queued while it runs one), or one
        chunk per worker when there are as many workers as usable CPUs; on dask,
        2 even chunks per worker thread (from the scheduler) with ``"tasks"``, one per
        worker with ``"resident"``. Chunks are contiguous; results come back in input order.
    poll : callable, optional
        Called about every 0.2 s while waiting (progress display).
    dispatch : {"tasks", "resident", "auto"}
        How chunks reach dask workers (ignored without ``client``). ``"tasks"``: one
        dask task per chunk (scheduled, load-balanced and retried by dask; right for
        long tasks such as chains). ``"resident"``: one actor per worker, kept between
        calls, each chunk one direct call to it (no task graph: a few ms per batch
        instead of tens; chunks go to whichever worker is free; one thread per worker,
        so meant for single-threaded workers). ``"auto"``: ``"resident"`` when every
        worker has one thread and ``context`` is small, else ``"tasks"``. Default
        chunking for ``"resident"``: one chunk per worker (the fewest calls; give
        ``chunk_size`` to balance items of uneven cost over the workers).

    Returns
    -------
    list
        One entry per item: its result, or a :class:`TaskFailure`.
    """
    if not (isinstance(items, np.ndarray) and items.ndim >= 1):
        items = list(items)     # a 2-D array stays one: each chunk travels as one block of rows
    n = _check_workers(n_workers)
    if len(items) == 0:
        return []
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer))
                                   or chunk_size < 1):
        raise PbsensError(f"'chunk_size' must be a positive integer, got {chunk_size!r}")
    if dispatch not in _DISPATCH:
        raise PbsensError(f"'dispatch' must be one of {_DISPATCH}, got {dispatch!r}")
    c = close = None
    resident = None
    if client is not None:
        from .dask_backend import _dask_run, _dask_worker_threads, _dask_workers, _forget_workers, \
            _resident_run, _resolve_client, _worth_scattering
        c, close = _resolve_client(client, n_workers)
        if dispatch == "tasks":
            n = _dask_workers(c)
        else:
            try:
                threads = _dask_worker_threads(c)
            except BaseException:
                close()
                raise
            n = max(1, sum(threads.values()))
            if dispatch == "resident" or (threads and all(t == 1 for t in threads.values())
                                          and not _worth_scattering(context)):
                resident = sorted(threads)
                n = max(1, len(resident))
    if chunk_size is not None:
        cs = int(chunk_size)
        sizes = [cs] * (len(items) // cs) + ([len(items) % cs] if len(items) % cs else [])
    elif c is None:
        # local processes: guided chunks (a chunk costs a pipe round trip, ~0.1 ms, and the
        # next chunk is queued while a worker runs one; the small ones at the end even out
        # workers that ran slower) while a core is left for this process. With as many
        # workers as cores, one chunk per worker: each answered chunk then wakes this
        # process on a busy worker's core, and the evaluation it interrupts pays more CPU
        # for refilling its caches than the wake-up costs (Boehm, 2 workers on 2 cores:
        # 11 guided chunks took 5 % more worker CPU than 1 worker, 2 chunks 0-2 %)
        sizes = _local_sizes(len(items), n, _usable_cpus())
    else:
        # dask tasks: 2 per worker thread, as each task costs milliseconds of scheduling;
        # resident dask actors: 1 per worker (each call costs ~1.5 ms of CPU on the client
        # and the worker that, on a machine as small as the cluster, the evaluations lose:
        # guided chunks, 9 calls for 64 items on 2 workers, cost 10 ms of CPU per batch)
        sizes = _even_sizes(len(items), (2 if resident is None else 1) * n)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist()
    chunks = [items[s:s + k] for s, k in zip(starts, sizes)]
    if c is not None:
        try:
            if resident is not None:
                if not resident:
                    _forget_workers(c)
                    raise PbsensError("'client': the dask cluster has no workers")
                try:
                    raw = _resident_run(c, fn, context, chunks, resident, poll)
                except BaseException:
                    _forget_workers(c)
                    raise
            else:
                raw = _dask_run(c, fn, context, chunks, poll)
        finally:
            close()
    elif n == 1 and not processes:
        raw = [run_chunk(fn, context, ch) for ch in chunks]
    else:
        pool = _local_pool(n)
        try:
            raw = pool.run(fn, context, chunks, poll)
        except BaseException:
            # interrupted (Ctrl-C) with chunks still running: drop the pool, so no later call
            # receives those chunks' results
            _POOLS.pop(n, None)
            pool.close()
            raise
    out = []
    for s, ch, res in zip(starts, chunks, raw):
        if isinstance(res, tuple) and res[0] == "died":
            why = res[1] if isinstance(res[1], str) else f"the worker process exited with code {res[1]}"
            out += [TaskFailure(s + k, it, why, "", True) for k, it in enumerate(ch)]
            continue
        for k, (it, r) in enumerate(zip(ch, res)):
            out.append(r[1] if r[0] == "ok" else TaskFailure(s + k, it, r[1], r[2]))
    return out
