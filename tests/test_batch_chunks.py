"""How batches are cut and put back together (``pbsens.parallel.map_tasks``).

Chunk sizes (contiguous, covering every item once; guided chunks shrinking to their
floor), results in input order on local processes and on dask resident actors for
a 2-D array of items (one vector, fewer vectors than workers, more), a worker killed
while its next chunk waits queued behind the running one (only the running chunk is
reported killed; the queued one runs elsewhere and its results are right), an item
that raises kept apart, and results that only cloudpickle can carry.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from pbsens import parallel
from pbsens.parallel import executor, tasks


def _row_value(context, row):
    """A row's own value, computed independently of its position: ``context * sum(row)``."""
    return float(context * np.sum(row)), row.copy()


def _exit_on(context, row):
    if row[0] == context:
        os._exit(7)
    return float(row[0]) * 2.0


def _raise_on(context, row):
    if row[0] == context:
        raise ValueError(f"no {context}")
    return float(row[0]) * 2.0


def _sleep_pid(context, seconds):
    import time
    time.sleep(seconds)
    return os.getpid()


def _closure_result(context, item):
    return lambda: item + context      # pickle cannot carry it, cloudpickle can


@pytest.mark.parametrize("n_items, n_workers", [(1, 1), (1, 2), (2, 2), (3, 2), (7, 3), (64, 2), (1000, 4)])
def test_guided_chunks_cover_items_once_and_shrink(n_items, n_workers):
    sizes = executor._guided_sizes(n_items, n_workers)
    assert sum(sizes) == n_items and all(s >= 1 for s in sizes)
    floor = max(1, -(-n_items // (16 * n_workers)))
    assert all(a >= b for a, b in zip(sizes, sizes[1:]))        # non-increasing
    assert all(s >= floor for s in sizes[:-1])                   # only the last may be under the floor
    assert sizes[0] == max(floor, -(-n_items // (2 * n_workers)))
    # few chunks: far fewer than items once there are many items per worker
    if n_items >= 64 * n_workers:
        assert len(sizes) <= 16 * n_workers


@pytest.mark.parametrize("n_items, n_chunks, expected", [(64, 2, [32, 32]), (5, 2, [3, 2]), (1, 2, [1]),
                                                          (2, 3, [1, 1]), (10, 4, [3, 3, 2, 2])])
def test_even_chunks(n_items, n_chunks, expected):
    assert executor._even_sizes(n_items, n_chunks) == expected


@pytest.mark.parametrize("n_items, n_workers, cpus", [(64, 2, 2), (64, 2, 1), (64, 2, 4), (5, 4, 4), (1000, 3, 8)])
def test_local_chunks_even_when_workers_fill_the_cpus(n_items, n_workers, cpus):
    sizes = executor._local_sizes(n_items, n_workers, cpus)
    if n_workers >= cpus:
        assert sizes == executor._even_sizes(n_items, n_workers)
    else:
        assert sizes == executor._guided_sizes(n_items, n_workers)
        assert len(sizes) > n_workers


def test_processes_one_chunk_per_worker_on_as_many_cpus(monkeypatch):
    # with the workers filling the CPUs, each worker runs one contiguous half of the batch
    monkeypatch.setattr(executor, "_usable_cpus", lambda: 2)
    pids = parallel.map_tasks(_sleep_pid, None, [0.05] * 8, n_workers=2, processes=True)
    assert len(set(pids[:4])) == 1 and len(set(pids[4:])) == 1 and pids[0] != pids[4]


@pytest.mark.parametrize("n_items", [1, 2, 5, 64])
def test_processes_results_in_input_order_for_an_array(n_items):
    rng = np.random.default_rng(n_items)
    rows = rng.standard_normal((n_items, 3))
    out = parallel.map_tasks(_row_value, 2.0, rows, n_workers=2, processes=True)
    assert len(out) == n_items
    for row, (v, back) in zip(rows, out):
        np.testing.assert_array_equal(back, row)
        assert v == 2.0 * float(np.sum(row))


def test_processes_worker_killed_with_a_chunk_queued_behind():
    rows = np.arange(40.0).reshape(20, 2)            # row k starts with 2k
    # chunks of 2: [0, 1], [2, 3], ... ; row 9 (value 18) kills its worker while the
    # worker's next chunk is already queued in its pipe
    out = parallel.map_tasks(_exit_on, 18.0, rows, n_workers=2, processes=True, chunk_size=2)
    dead = [r for r in out if isinstance(r, parallel.TaskFailure)]
    assert sorted(r.index for r in dead) == [8, 9]
    assert all(r.killed and "exited with code 7" in r.error for r in dead)
    for r in dead:
        np.testing.assert_array_equal(r.item, rows[r.index])
    assert [out[k] for k in range(20) if k not in (8, 9)] == [4.0 * k for k in range(20) if k not in (8, 9)]
    again = parallel.map_tasks(_exit_on, -1.0, rows, n_workers=2, processes=True)   # pool replaced its worker
    assert again == [4.0 * k for k in range(20)]


def test_processes_long_chunks_are_not_queued_behind_a_busy_worker():
    # chunks that take longer than PIPELINE_SECONDS go to whichever worker is free: the
    # worker that takes the long item (2) must not get item 3 queued behind it
    assert executor.PIPELINE_SECONDS < 0.7
    pids = parallel.map_tasks(_sleep_pid, None, [0.7, 0.7, 2.5, 0.7, 0.7], n_workers=2, processes=True,
                              chunk_size=1)
    assert pids[3] == pids[4] != pids[2]


def test_processes_raising_item_kept_apart():
    rows = np.arange(12.0).reshape(6, 2)
    out = parallel.map_tasks(_raise_on, 6.0, rows, n_workers=2, processes=True)
    assert isinstance(out[3], parallel.TaskFailure) and out[3].index == 3 and not out[3].killed
    assert "ValueError: no 6.0" in out[3].error and "_raise_on" in out[3].traceback
    assert [out[k] for k in (0, 1, 2, 4, 5)] == [0.0, 4.0, 8.0, 16.0, 20.0]


def test_list_items_still_work_and_empty_batch():
    assert parallel.map_tasks(divmod, 7, [1, 2, 3], n_workers=2, processes=True) == [(7, 0), (3, 1), (2, 1)]
    assert parallel.map_tasks(divmod, 7, np.zeros((0, 3)), n_workers=2, processes=True) == []


distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def two_workers():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.mark.parametrize("n_items, chunk_size", [(1, None), (1, 1), (2, None), (3, None), (9, 2), (64, None)])
def test_resident_results_in_input_order_for_an_array(two_workers, n_items, chunk_size):
    rng = np.random.default_rng(100 + n_items)
    rows = rng.standard_normal((n_items, 4))
    out = parallel.map_tasks(_row_value, 3.0, rows, client=two_workers, chunk_size=chunk_size,
                             dispatch="resident")
    assert len(out) == n_items
    for row, (v, back) in zip(rows, out):
        np.testing.assert_array_equal(back, row)
        assert v == 3.0 * float(np.sum(row))


def test_resident_raising_item_and_closure_results(two_workers):
    rows = np.arange(10.0).reshape(5, 2)
    out = parallel.map_tasks(_raise_on, 4.0, rows, client=two_workers, dispatch="resident")
    assert isinstance(out[2], parallel.TaskFailure) and out[2].index == 2 and not out[2].killed
    np.testing.assert_array_equal(out[2].item, rows[2])
    assert [out[k] for k in (0, 1, 3, 4)] == [0.0, 4.0, 12.0, 16.0]
    fns = parallel.map_tasks(_closure_result, 10, [1, 2, 3], client=two_workers, dispatch="resident")
    assert [f() for f in fns] == [11, 12, 13]


def _evaluation(k, with_gradient=True):
    from pbsens.problems.problem import EvaluationResult
    rng = np.random.default_rng(k)
    return EvaluationResult(llh=-float(k), chi2=2.0 * k, gradient=rng.standard_normal(3) if with_gradient else None,
                            fim=rng.standard_normal((3, 3)) if with_gradient else None, simulations=None,
                            timing={"c1": 0.1 * k, "total": 0.2 * k}, theta=rng.standard_normal(3),
                            residuals=rng.standard_normal(5), sigmas=np.full(5, 1.0 + k))


@pytest.mark.parametrize("gradients", [(True, True, True), (True, False, True)])
def test_chunk_results_pickle_compactly_and_come_back_equal(gradients):
    import pickle
    chunk = tasks._Results([("ok", _evaluation(k, g)) for k, g in enumerate(gradients)])
    chunk.insert(1, ("err", "ValueError: bad", "Traceback ..."))
    back = pickle.loads(pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL))
    assert len(back) == 4 and back[1] == ("err", "ValueError: bad", "Traceback ...")
    for k, g in enumerate(gradients):
        ref, got = _evaluation(k, g), back[k + (k >= 1)][1]
        assert back[k + (k >= 1)][0] == "ok" and type(got) is type(ref)
        assert got.llh == ref.llh and got.chi2 == ref.chi2 and got.timing == ref.timing
        assert got.simulations is None
        for name in ("gradient", "fim", "theta", "residuals", "sigmas"):
            a, b = getattr(ref, name), getattr(got, name)
            if a is None:
                assert b is None
            else:
                np.testing.assert_array_equal(b, a)
    other = tasks._Results([("ok", {"a": np.ones(2)}), ("ok", {"a": np.zeros(2)})])
    again = pickle.loads(pickle.dumps(other))
    assert [x[0] for x in again] == ["ok", "ok"]
    assert [x[1]["a"].tolist() for x in again] == [[1.0, 1.0], [0.0, 0.0]]
