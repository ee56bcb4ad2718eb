"""The resident dispatch on dask (``dispatch="resident"``/``"auto"``): one actor per worker.

Results against one-by-one evaluation in this process (bitwise, input order, also when
chunks finish out of order), actors kept between calls, a failing item kept apart, a
worker killed mid-batch reported per item while the other chunks are kept and the next
batch runs on the restarted worker, and ``"auto"`` falling back to tasks on
multi-threaded workers.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
pytest.importorskip("petab.v1")

import pbsens.petab as pbpetab  # noqa: E402
from pbsens import batches, parallel  # noqa: E402
from pbsens.parallel import dask_backend  # noqa: E402
from pbsens.errors import PbsensError  # noqa: E402

BOEHM = Path(__file__).parent / "data" / "petab" / "Boehm_JProteomeRes2014" / "Boehm_JProteomeRes2014.yaml"


def _slow_divmod(context, item):
    """``divmod(context, item)`` after ``item`` ms: later items finish first."""
    time.sleep(item / 1000.0)
    return divmod(context, item)


def _die_on(context, item):
    if item == context:
        os._exit(3)
    return item * 2


@pytest.fixture(scope="module")
def boehm():
    return pbpetab.load(BOEHM)


@pytest.fixture(scope="module")
def threads_cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client


def test_resident_evaluate_many_equals_serial_in_input_order(boehm, threads_cluster):
    client = threads_cluster
    rng = np.random.default_rng(3)
    thetas = boehm.x_nominal + 0.03 * rng.standard_normal((9, boehm.dim))
    res = batches.evaluate_many(boehm, thetas, client=client, dispatch="resident", chunk_size=2)
    actors = dict(dask_backend._RESIDENT[client.id][1])
    assert sorted(actors) == sorted(client.scheduler_info()["workers"])
    auto = batches.evaluate_many(boehm, thetas[::-1], client=client)      # default "auto": resident here
    assert dask_backend._RESIDENT[client.id][1] == actors          # the same actors, kept
    assert len(res) == 9 and len(auto) == 9
    for t, r, a in zip(thetas, res, auto[::-1]):
        ref = boehm.evaluate(t)
        for x in (r, a):
            np.testing.assert_array_equal(x.theta, t)
            assert x.llh == ref.llh
            np.testing.assert_array_equal(x.gradient, ref.gradient)
            np.testing.assert_array_equal(x.fim, ref.fim)


def test_resident_order_failures_and_bad_dispatch(threads_cluster):
    client = threads_cluster
    for _ in range(2):      # workers in this process: never in their (the shared) event loop
        names = parallel.map_tasks(_thread_name, 0.0, [1, 2], client=client, dispatch="resident")
        assert all(n != threading.current_thread().name for n in names) and "MainThread" not in names
    items = [40, 0, 30, 1, 20, 2, 10, 3, 0]
    out = parallel.map_tasks(_slow_divmod, 100, items, client=client, chunk_size=1, dispatch="resident")
    for k, (it, r) in enumerate(zip(items, out)):
        if it == 0:
            assert isinstance(r, parallel.TaskFailure) and r.index == k and r.item == 0
            assert "ZeroDivisionError" in r.error and not r.killed
        else:
            assert r == divmod(100, it)
    with pytest.raises(PbsensError, match="'dispatch'"):
        parallel.map_tasks(divmod, 7, [1], client=client, dispatch="actors")


def test_resident_on_a_client_that_is_not_the_default_one():
    """Two clusters and clients in one process: the first client's actors stay its own (dask's
    Actor proxy bound them to the default client, the second, and the call never returned)."""
    kw = dict(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None)
    with distributed.LocalCluster(**kw) as ca, distributed.Client(ca) as a, \
            distributed.LocalCluster(**kw) as cb, distributed.Client(cb) as b:
        assert distributed.get_client() is b
        out = {}

        def run():
            for name, c in (("a", a), ("b", b), ("a2", a)):
                out[name] = parallel.map_tasks(divmod, 7, [1, 2, 3], client=c, dispatch="resident")
        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(120)
        assert not t.is_alive(), "a resident call did not return"
        assert out == {k: [(7, 0), (3, 1), (2, 1)] for k in ("a", "b", "a2")}


def test_auto_uses_tasks_on_multithreaded_workers():
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        out = parallel.map_tasks(divmod, 7, [1, 2, 3], client=client, dispatch="auto")
        assert out == [(7, 0), (3, 1), (2, 1)]
        assert client.id not in dask_backend._RESIDENT


def test_resident_worker_killed_mid_batch_is_reported_and_replaced():
    import cloudpickle
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, \
                distributed.Client(cluster, direct_to_workers=True) as client:
            items = list(range(8))
            out = parallel.map_tasks(_die_on, 5, items, client=client, chunk_size=2, dispatch="resident")
            dead = [r for r in out if isinstance(r, parallel.TaskFailure)]
            assert {r.index for r in dead} == {4, 5}        # the chunk [4, 5] whose worker died
            assert all(r.killed and r.item in (4, 5) for r in dead)
            assert [out[i] for i in (0, 1, 2, 3, 6, 7)] == [0, 2, 4, 6, 12, 14]
            client.wait_for_workers(2, timeout=120)     # the nanny restarts the worker
            again = parallel.map_tasks(_die_on, -1, items, client=client, dispatch="resident")
            assert again == [2 * i for i in items]
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _thread_name(context, item):
    time.sleep(context)
    return threading.current_thread().name


def _periodic_ms(dask_worker=None, dask_scheduler=None):
    server = dask_worker if dask_worker is not None else dask_scheduler
    return {k: float(pc.callback_time) for k, pc in server.periodic_callbacks.items()}


def test_local_cluster_quiet_settings_reach_scheduler_and_workers():
    with parallel.local_cluster(1) as cluster, distributed.Client(cluster, direct_to_workers=True) as client:
        sched = cluster.scheduler.periodic_callbacks
        assert sched["idle-timeout"].callback_time == sched["no-workers-timeout"].callback_time \
            == 1e3 * dask_backend.QUIET_SCHEDULER_CHECKS
        assert sched["tick"].callback_time == 1000.0
        (ms,) = client.run(_periodic_ms).values()          # the worker process got the config
        assert ms["tick"] == 1000.0 and "profile" not in ms
        assert client.run(lambda: __import__("dask").config.get("distributed.admin.tick.interval")) \
            == {a: "1s" for a in client.scheduler_info()["workers"]}
        # short calls of a function run in the worker's event-loop thread once a call of it there
        # was timed; the first call, and calls the last one says are long, in the actor thread
        import cloudpickle
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        try:
            old = dask_backend.INLINE_SECONDS
            dask_backend.INLINE_SECONDS = 0.001     # 2 items x 10 ms: long
            try:
                for _ in range(2):
                    slow = parallel.map_tasks(_thread_name, 0.01, [1, 2], client=client, dispatch="resident")
                    assert "MainThread" not in slow
            finally:
                dask_backend.INLINE_SECONDS = old
            fast = parallel.map_tasks(_thread_name, 0.0, [1, 2], client=client, dispatch="resident")
            assert fast == ["MainThread"] * 2
        finally:
            cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    import dask
    assert dask.config.get("distributed.admin.tick.interval") != "1s"   # the caller's config is untouched
    with parallel.local_cluster(1, quiet=False, processes=False) as cluster:
        sched = cluster.scheduler.periodic_callbacks
        assert sched["idle-timeout"].callback_time == 250
        assert sched["tick"].callback_time == 1e3 * dask.utils.parse_timedelta(
            dask.config.get("distributed.admin.tick.interval"))
