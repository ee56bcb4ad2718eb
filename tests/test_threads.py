"""BLAS is limited to one thread inside pbsens's calls and restored outside (checked with
threadpoolctl's own report, not with timings)."""
import threading

import numpy as np
import pytest

import pbsens
import importlib
from pbsens.system.threads import blas_single_thread, limit_blas_threads

sens_module = importlib.import_module("pbsens.sensitivity.posthoc")   # the module, not the function


from blas_threads import blas_counts as _blas_counts, two_blas_threads  # noqa: E402,F401 - fixture


def test_context_limits_inside_and_restores_outside(two_blas_threads):
    with blas_single_thread():
        assert set(_blas_counts()) == {1}
        with blas_single_thread():          # nested: still limited
            assert set(_blas_counts()) == {1}
        assert set(_blas_counts()) == {1}   # the inner exit does not restore early
    assert set(_blas_counts()) == {2}


def test_restores_after_an_exception(two_blas_threads):
    @limit_blas_threads
    def fails():
        assert set(_blas_counts()) == {1}
        raise pbsens.PbsensError("boom")

    with pytest.raises(pbsens.PbsensError, match="boom"):
        fails()
    assert set(_blas_counts()) == {2}


def test_limit_shared_by_threads_and_restored_by_the_last(two_blas_threads):
    inside = []
    gate = threading.Barrier(4)

    def work():
        with blas_single_thread():
            gate.wait(timeout=30)           # all four inside at once
            inside.append(tuple(_blas_counts()))
            gate.wait(timeout=30)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(inside) == 4 and all(set(c) == {1} for c in inside)
    assert set(_blas_counts()) == {2}       # restored although the main thread never entered


def test_sensitivities_runs_with_one_blas_thread(two_blas_threads, monkeypatch, chua):
    seen = []
    original = sens_module._bound

    def spy(model):
        seen.append(tuple(_blas_counts()))
        return original(model)

    monkeypatch.setattr(sens_module, "_bound", spy)
    traj = pbsens.solve_states(chua, (0.0, 1.0))
    r = pbsens.sensitivities(chua, traj, method="exp2")
    assert seen and all(set(c) == {1} for c in seen)
    assert set(_blas_counts()) == {2}
    assert np.all(np.isfinite(r.S))
    # the user's own numpy code outside the call is untouched
    a = np.random.default_rng(0).standard_normal((50, 50))
    assert np.allclose(a @ np.linalg.inv(a), np.eye(50), atol=1e-8)
