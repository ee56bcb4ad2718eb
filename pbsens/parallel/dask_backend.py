"""The dask.distributed backend of :func:`pbsens.parallel.map_tasks`.

Two ways to run chunks on a dask cluster:

* **tasks** (``dispatch="tasks"``): one dask task per chunk, all submitted with one
  ``client.map`` and fetched with one ``gather``; dask schedules, balances and
  reports them. Each batch costs dask's task round trip (client to scheduler to
  worker, the worker's state messages back, then a ``gather`` round trip): 25-40 ms
  measured on 2 shared cores for an empty batch, whatever the work.
* **resident** (``dispatch="resident"``): one :class:`_Resident` actor per worker,
  created on the first call and kept for the client's lifetime; each chunk is one
  direct call to an actor (one request and its reply; through the scheduler's proxy
  unless the client was made with ``direct_to_workers=True``), with the result in
  the reply. No task enters the scheduler's graph. Chunks go to whichever actor is
  free, one call at a time per actor; by default a batch is one chunk per worker (one
  call each), since on a machine no larger than the cluster every call's CPU (client, scheduler, the worker's event loop) is taken
  from the evaluations: measured on 2 shared cores, an empty batch of 8 chunks cost
  about 50 ms of CPU, as much as dask tasks.

Both keep the problems and models that chunks build in the worker (the per-process,
per-thread cache of :mod:`pbsens.batches`).

What a resident batch costs, and why it is built as it is (measured on 2 shared cores,
LocalCluster of 2 workers, empty chunks; ``benchmarks/bench_batch.py`` prints it):

* a call's arguments and reply travel as **one pickled byte string** each. Passed as
  Python objects, dask serializes a list of numpy arrays array by array (a header and a
  frame each): a call with 32 parameter vectors took 6.1 ms against 1.45 ms with the
  same values as one (32, 9) array; the same holds for a reply of result objects
  holding arrays;
* the batch's items go as one array per chunk when they come as a 2-D array
  (:func:`pbsens.parallel.map_tasks` slices it, it does not split it into rows);
* the cluster's workers (asked from the scheduler, one round trip) are kept for
  :data:`WORKERS_TTL` seconds after a batch that succeeded, and asked again after a
  failure; the actors are kept for the client's lifetime;
* the batch runs in one ``client.sync`` (one hand-over to the client's event loop
  and back), and the caller's thread sleeps until the results are in;
* a call is one ``actor_execute`` request made here (:class:`_ActorRef`), not through
  dask's ``Actor`` proxy (which binds to the default client, see there);
* a call expected to be short runs in the worker's event-loop thread rather than its
  actor thread (:data:`INLINE_SECONDS`): fewer wake-ups of the worker during the chunk.
"""
from __future__ import annotations

import os
import pickle
import threading
import time

from ..errors import PbsensError
from .tasks import run_chunk

# dask's periodic work, idle, on 2 shared cores (LocalCluster, 2 single-threaded worker
# processes): with dask's defaults 54 ms of CPU per second in the client process
# (scheduler, nannies) + 43 per worker (statistical profiler every 10 ms, event-loop tick
# every 20 ms, memory monitor every 100 ms, system monitor). Each of those wakes a thread
# that, on a machine no larger than the cluster, takes a core from an evaluation (and the
# evaluation refills its caches afterwards). With these settings and the scheduler's checks
# slowed (:data:`QUIET_SCHEDULER_CHECKS`): 25 -> 11 wake-ups per second in the client process
# and 8 -> 4 per worker (what remains is mostly the workers' heartbeats, whose interval the
# scheduler sets).
QUIET_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",        # event-loop health check (warns after tick.limit, 3 s)
    "distributed.admin.tick.cycle": "5s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.scheduler.active-memory-manager.interval": "10s",
}

# seconds between the scheduler's idle and no-workers checks in a quiet local cluster
# (dask: 0.25 s, fixed; they only time out clusters and tasks after a configured timeout)
QUIET_SCHEDULER_CHECKS = 2.0


def _quiet_scheduler(cluster):
    """Slow the in-process scheduler's fixed 0.25 s checks to :data:`QUIET_SCHEDULER_CHECKS`
    (where this dask version has them; nothing otherwise)."""
    callbacks = getattr(getattr(cluster, "scheduler", None), "periodic_callbacks", None) or {}
    for name in ("idle-timeout", "no-workers-timeout"):
        pc = callbacks.get(name)
        if pc is not None and hasattr(pc, "callback_time"):
            pc.callback_time = max(float(pc.callback_time), 1e3 * QUIET_SCHEDULER_CHECKS)


def local_cluster(n_workers=2, *, quiet=True, **kwargs):
    """A ``distributed.LocalCluster`` of ``n_workers`` single-threaded worker processes.

    ``quiet=True`` starts it with :data:`QUIET_CONFIG` (no statistical profiler, slower
    event-loop ticks, monitors and scheduler checks), which leaves the workers' CPU to the
    work; the dashboard is off unless ``dashboard_address`` is given. Other keywords go to
    ``LocalCluster``. Use it with ``distributed.Client(cluster, direct_to_workers=True)``.
    """
    try:
        import dask
        import distributed
    except ImportError:
        raise PbsensError("local_cluster needs dask.distributed: pip install 'pbsens[dist]'") from None
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
        raise PbsensError(f"'n_workers' must be a positive integer, got {n_workers!r}")
    kw = dict(threads_per_worker=1, processes=True, dashboard_address=None)
    kw.update(kwargs)
    with dask.config.set(QUIET_CONFIG if quiet else {}):
        cluster = distributed.LocalCluster(n_workers=n_workers, **kw)
    if quiet:
        _quiet_scheduler(cluster)
    return cluster


def _resolve_client(client, n_workers):
    """``(client, close)``: a dask Client from a Client, an address or ``"local"``."""
    try:
        import distributed
    except ImportError:
        raise PbsensError("'client' needs dask.distributed: pip install 'pbsens[dist]'") from None
    if isinstance(client, distributed.Client):
        return client, (lambda: None)
    if isinstance(client, str):
        if client == "local":
            cluster = local_cluster(n_workers or 2)
            c = distributed.Client(cluster, direct_to_workers=True)   # resident calls skip the scheduler

            def close():
                import logging
                nanny = logging.getLogger("distributed.nanny")
                level = nanny.level
                nanny.setLevel(logging.ERROR)   # "still alive after 4 s, killing" on a busy machine
                try:
                    with _RESIDENT_LOCK:
                        _RESIDENT.pop(c.id, None)
                        _WORKERS.pop(c.id, None)
                    c.close()
                    cluster.close()
                finally:
                    nanny.setLevel(level)
            return c, close
        try:
            c = distributed.Client(client, timeout=30)
        except (OSError, TimeoutError) as exc:
            raise PbsensError(f"'client': cannot connect to the dask scheduler at {client!r}: {exc}") from None
        return c, c.close
    raise PbsensError(f"'client' must be a distributed.Client, a scheduler address or 'local', got {client!r}")


def _dask_workers(client):
    """Worker threads of a dask cluster (at least 1)."""
    try:
        return max(1, sum(_dask_worker_threads(client).values()))
    except Exception:  # noqa: BLE001 - an unanswered query only changes the chunking
        return 1


def _dask_run(client, fn, context, chunks, poll=None):
    """Results per chunk on dask: one task per chunk, all submitted at once, one gather.

    ``context`` goes to the cluster once (``scatter``, broadcast to every worker) and the
    tasks refer to it, rather than pickling it into every task; results come back in a
    single ``gather`` (one round trip) instead of one ``result()`` call per future.
    """
    import distributed
    ctx = client.scatter(context, broadcast=True, hash=False) if _worth_scattering(context) else context
    futs = client.map(run_chunk, [fn] * len(chunks), [ctx] * len(chunks), chunks, pure=False)
    if poll is not None:
        timeouts = (TimeoutError, getattr(distributed, "TimeoutError", TimeoutError))
        pending = list(futs)
        while pending:
            try:
                distributed.wait(pending, timeout=0.2)
            except timeouts:
                pass
            pending = [f for f in pending if f.status not in ("finished", "error", "cancelled", "lost")]
            poll()
    res = client.gather(futs, errors="skip")
    done = {f.key for f in futs if f.status == "finished"}
    out = []
    it = iter(res)
    for f in futs:
        if f.key in done:
            out.append(next(it))
            continue
        try:
            exc = f.exception()
            msg = f"{type(exc).__name__}: {exc}"
        except Exception as e:  # noqa: BLE001 - cancelled/lost futures
            msg = f"{type(e).__name__}: {e}"
        out.append(("died", msg))
    return out


# ---- resident dispatch: one dask Actor per worker, called directly (no task graph)
_RESIDENT = {}          # client id -> (client, {worker address: _ActorRef})

# A resident call expected to take at most this many seconds (its items times the seconds
# per item of the actor's last call) runs in the worker's event-loop thread instead of its
# actor thread; 0 turns this off. A call in the actor thread costs the worker's event loop
# wake-ups while the chunk runs: the hand-over to the thread and back, and the GIL switches
# between the two threads (measured: about 4 voluntary context switches of the loop thread
# per call against 1 inline; a batch of 64 Boehm evaluations on 2 workers 1-2 ms faster of
# 48-53). A longer call stays in the thread: a blocked event loop delays the worker's
# heartbeats and dask warns about it after 3 s. The estimate is per function (a first call
# of a function on an actor runs in the thread). Never inline on a worker in the client's own
# process (``processes=False``), whose event loop the other workers and the client share. A
# function that itself waits on its worker's event loop (dask calls from inside the chunk)
# needs ``INLINE_SECONDS = 0``.
INLINE_SECONDS = 0.5
_RESIDENT_LOCK = threading.Lock()


def _dumps(obj):
    """One byte string (arrays in-band): dask sends it as a single frame."""
    try:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - lambdas, closures, classes pickled by value
        import cloudpickle
        return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _call_payload(fn, context, chunks):
    """A resident call's arguments as one byte string (cloudpickle: functions registered
    to be pickled by value, e.g. a test module's, travel as dask would send them)."""
    import cloudpickle
    return cloudpickle.dumps((fn, context, chunks), protocol=pickle.HIGHEST_PROTOCOL)


class _Resident:
    """A dask Actor living on one worker: runs chunks in that worker's actor thread, or in
    its event-loop thread when the client asks for it (short calls, see :data:`INLINE_SECONDS`).

    Calls to an actor go from the client to its worker (or through the scheduler's
    proxy when the client is not ``direct_to_workers``) as one RPC each: no task is
    added to the scheduler's graph, no worker-to-scheduler state messages, no second
    round trip to fetch the result. The problems and models that chunks build stay in
    this worker's cache (:func:`worker_problem`), keyed by the thread (the actor thread
    and the event-loop thread live as long as the worker). Arguments and results travel
    as one pickled byte string each (see the module's notes); the reply also carries the
    worker's process id and the seconds the call took.
    """

    def run(self, payload):
        t = time.perf_counter()
        fn, context, chunks = pickle.loads(payload)
        out = [run_chunk(fn, context, items) for items in chunks]
        return _dumps((os.getpid(), time.perf_counter() - t, out))


WORKERS_TTL = 1.0       # seconds a client's worker list is reused after a batch that succeeded
_WORKERS = {}           # client id -> (time.monotonic() of the query, {address: nthreads})


def _dask_worker_threads(client):
    """``{address: nthreads}`` of the cluster's workers: asked from the scheduler (one
    round trip), or the answer of at most :data:`WORKERS_TTL` seconds ago (kept only while
    batches succeed, see :func:`_forget_workers`)."""
    now = time.monotonic()
    with _RESIDENT_LOCK:
        hit = _WORKERS.get(client.id)
    if hit is not None and now - hit[0] <= WORKERS_TTL:
        return dict(hit[1])
    info = client.scheduler_info()
    threads = {a: int(w.get("nthreads", 1)) for a, w in info.get("workers", {}).items()}
    with _RESIDENT_LOCK:
        _WORKERS[client.id] = (now, threads)
    return dict(threads)


def _touch_workers(client):
    """A batch succeeded on the kept worker list: keep it for another :data:`WORKERS_TTL`."""
    with _RESIDENT_LOCK:
        hit = _WORKERS.get(client.id)
        if hit is not None:
            _WORKERS[client.id] = (time.monotonic(), hit[1])


def _forget_workers(client):
    """Ask the scheduler again on the next call (a call failed, or the client closes)."""
    with _RESIDENT_LOCK:
        _WORKERS.pop(client.id, None)


ACTOR_START_TIMEOUT = 120   # seconds for a worker to take its actor (it may be busy with a task)


class _ActorRef:
    """A :class:`_Resident` actor as one client holds it: the client's future of the actor
    (which keeps it on its worker) and direct calls to it.

    Not dask's ``Actor`` proxy: that binds itself to the process's *default* client when it
    is unpickled, so with two clients in one process (two clusters) the actor of the other
    one was held by the wrong client, released by its own, and the next call waited forever
    for a reply (the worker answered the call with ``KeyError``, which the proxy drops).
    Here a call is one ``actor_execute`` request to the worker (through the scheduler
    unless the client is ``direct_to_workers``) and any error it meets is raised.
    """

    __slots__ = ("client", "address", "future", "pid", "per_item")

    def __init__(self, client, address, future):
        self.client, self.address, self.future = client, address, future
        self.pid = None         # the worker's process id, from the first reply
        self.per_item = {}      # function -> seconds per item of its last call here

    def inline(self, fn, n_items):
        """Run a call of ``fn`` on ``n_items`` items in the worker's event-loop thread? Only on
        a worker in another process, and when the last call of ``fn`` here says it is short."""
        last = self.per_item.get(_fn_key(fn))
        return (last is not None and self.pid is not None and self.pid != os.getpid()
                and last * n_items <= INLINE_SECONDS)

    def learn(self, fn, pid, seconds, n_items):
        self.pid = pid
        self.per_item[_fn_key(fn)] = seconds / max(1, n_items)

    async def run(self, payload, separate_thread=True):
        from distributed.protocol import to_serialize
        if self.client.direct_to_workers:
            rpc = self.client.rpc(self.address)
        else:
            from distributed.actor import ProxyRPC
            rpc = ProxyRPC(self.client.scheduler, self.address)
        msg = await rpc.actor_execute(actor=self.future.key, function="run", args=[to_serialize(payload)],
                                      kwargs={"separate_thread": separate_thread})
        if msg.get("status") != "OK":
            raise msg.get("exception") or PbsensError(f"resident actor call failed: {msg!r}")
        return msg["result"]


def _fn_key(fn):
    return getattr(fn, "__module__", None), getattr(fn, "__qualname__", None) or repr(fn)


def _resident_actors(client, addresses):
    """``(addresses, actors)``: one :class:`_Resident` actor (an :class:`_ActorRef`) per worker
    address, created on first use and kept (per client) until its worker leaves the cluster or
    fails a call; a worker that does not take its actor in time is left out of this call."""
    with _RESIDENT_LOCK:
        for cid in [k for k, v in _RESIDENT.items() if v[0].status not in ("running", "connecting", "newly-created")]:
            del _RESIDENT[cid]      # closed clients
            _WORKERS.pop(cid, None)
        actors = _RESIDENT.setdefault(client.id, (client, {}))[1]
        for a in [a for a in actors if a not in addresses]:
            del actors[a]           # workers gone (a restarted worker has a new address)
    missing = [a for a in addresses if a not in actors]
    if missing:
        import distributed
        futs = [client.submit(_Resident, actor=True, workers=[a], allow_other_workers=False, pure=False)
                for a in missing]
        try:
            distributed.wait(futs, timeout=ACTOR_START_TIMEOUT)
        except Exception:  # noqa: BLE001 - timed out: keep the actors that were placed
            pass
        for a, f in zip(missing, futs):
            if f.status == "finished":
                actors[a] = _ActorRef(client, a, f)
            else:           # the worker left while its actor was being placed, or is busy
                f.cancel()
    ready = [a for a in addresses if a in actors]
    if not ready:
        raise PbsensError(f"'client': no dask worker of {addresses} took a resident actor within "
                          f"{ACTOR_START_TIMEOUT} s")
    return ready, [actors[a] for a in ready]


def _drop_actor(client, address):
    with _RESIDENT_LOCK:
        entry = _RESIDENT.get(client.id)
        if entry is not None:
            entry[1].pop(address, None)


async def _resident_async(actors, fn, context, chunks, in_flight, poll):
    """Chunks to actors as they free up (``in_flight`` calls at a time per actor); results
    per chunk, ``("died", why)`` for the chunks of an actor whose worker could not be
    reached or died."""
    import asyncio
    results = [None] * len(chunks)
    todo = list(range(len(chunks)))[::-1]
    running = {}                       # asyncio future -> (actor index, [chunk numbers], items)
    alive = set(range(len(actors)))

    def start(k):
        group = [todo.pop()]
        n = sum(len(chunks[c]) for c in group)
        fut = asyncio.ensure_future(actors[k].run(_call_payload(fn, context, [chunks[c] for c in group]),
                                                  separate_thread=not actors[k].inline(fn, n)))
        running[fut] = (k, group, n)

    for _ in range(in_flight):
        for k in range(len(actors)):
            if todo:
                start(k)
    while running:
        done, _ = await asyncio.wait(list(running), timeout=0.2 if poll is not None else None,
                                     return_when=asyncio.FIRST_COMPLETED)
        if poll is not None:
            poll()
        for fut in done:
            k, group, n = running.pop(fut)
            try:
                pid, seconds, res = pickle.loads(fut.result())
            except Exception as exc:  # noqa: BLE001 - the worker died or is unreachable
                alive.discard(k)
                for c in group:
                    results[c] = ("died", f"{type(exc).__name__}: {exc}")
                continue
            actors[k].learn(fn, pid, seconds, n)
            for c, r in zip(group, res):
                results[c] = r
            if todo and k in alive:
                start(k)
        if todo and not running:       # every actor failed: the rest cannot run
            while todo:
                results[todo.pop()] = ("died", "no dask worker left to run this chunk")
    return results, alive


def _resident_run(client, fn, context, chunks, addresses, poll=None, in_flight=1):
    """Results per chunk on dask through :class:`_Resident` actors (see :func:`map_tasks`).

    One call at a time per actor: with a second call queued, a worker that dies in its
    second chunk may take the first chunk's reply with it (the actor thread starts the
    next chunk while the event loop is still sending the reply), and both chunks would be
    reported killed. The default chunking is one chunk per worker, so nothing waits.
    """
    addresses, actors = _resident_actors(client, addresses)
    results, alive = client.sync(_resident_async, actors, fn, context, chunks, in_flight, poll)
    if len(alive) < len(actors):
        _forget_workers(client)
        for k, a in enumerate(addresses):
            if k not in alive:
                _drop_actor(client, a)
    else:
        _touch_workers(client)
    return results


def _worth_scattering(context):
    """Scatter a context only when it is large (a small one costs less inline than a round trip)."""
    import pickle
    try:
        return len(pickle.dumps(context, protocol=pickle.HIGHEST_PROTOCOL)) > 100_000
    except Exception:  # noqa: BLE001 - unpicklable here: let dask report it
        return False


