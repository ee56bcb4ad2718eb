"""Long-run behaviour: memory over many calls, calls from several threads, reproducibility
across processes (issue: reliability under long runs). The full-length memory run
(10^4 calls) is ``benchmarks/long_run.py``."""
import gc
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import psutil
import pytest

import pbsens

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rss():
    gc.collect()
    return psutil.Process().memory_info().rss


def test_500_calls_do_not_grow_resident_memory(chua):
    traj = pbsens.solve_states(chua, (0.0, 5.0))
    methods = ("pbsr", "exp", "exp2", "pbsr2")
    for m in methods * 10:   # warm up: compile, fill numba's and numpy's caches and pools
        pbsens.sensitivities(chua, traj, method=m)
    before = _rss()
    for i in range(500):
        r = pbsens.sensitivities(chua, traj, method=methods[i % 4])
    after = _rss()
    assert np.all(np.isfinite(r.S))
    growth = after - before
    assert growth < 4 * 2**20, f"resident memory grew by {growth / 2**20:.2f} MB over 500 calls"


def test_calls_from_four_threads_equal_serial_calls(pka):
    ps = [pka.p * (1.0 + 0.1 * k) for k in range(4)]
    methods = ("pbsr", "exp", "exp2", "pbsr2")
    trajs = [pbsens.solve_states(pka, (0.0, 100.0), p=p) for p in ps]
    serial = [pbsens.sensitivities(pka, tr, method=mt).S for tr, mt in zip(trajs, methods)]
    results = [None] * 4
    errors = []
    gate = threading.Barrier(4)

    def work(k):
        try:
            gate.wait(timeout=60)
            for _ in range(5):
                S = pbsens.sensitivities(pka, trajs[k], method=methods[k]).S
                if results[k] is not None and not np.array_equal(S, results[k]):
                    errors.append(f"thread {k}: repeated calls differ")
                results[k] = S
        except Exception as exc:  # reported below, with the thread
            errors.append(f"thread {k}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    for k in range(4):
        assert np.array_equal(results[k], serial[k]), f"thread {k} ({methods[k]}) differs from the serial call"
    # the four calls are different problems: equality is not trivially of identical arrays
    assert not np.array_equal(serial[0], serial[1])


_CHILD = textwrap.dedent("""
    import hashlib, json, sys
    import pbsens
    m = pbsens.load_model("PKA")
    out = {}
    for method in ("pbsr", "exp2"):
        r = pbsens.sensitivities(m, t_span=(0.0, 300.0), method=method)
        out[method] = [hashlib.sha256(r.x.tobytes()).hexdigest(), hashlib.sha256(r.S.tobytes()).hexdigest()]
    print(json.dumps(out))
""")


def test_same_inputs_give_bit_identical_S_in_two_processes(pka):
    env = dict(os.environ, PYTHONPATH=ROOT)
    runs = [json.loads(subprocess.run([sys.executable, "-c", _CHILD], env=env, cwd=ROOT, capture_output=True,
                                      text=True, check=True).stdout.strip().splitlines()[-1])
            for _ in range(2)]
    here = {}
    for method in ("pbsr", "exp2"):
        r = pbsens.sensitivities(pka, t_span=(0.0, 300.0), method=method)
        here[method] = [hashlib.sha256(r.x.tobytes()).hexdigest(), hashlib.sha256(r.S.tobytes()).hexdigest()]
    assert runs[0] == runs[1] == here
    assert here["pbsr"][1] != here["exp2"][1]


_COLD_FIRST_RUN = textwrap.dedent("""
    import numpy as np
    import pbsens
    r = pbsens.sensitivities(pbsens.load_model("Chua"), t_span=(0.0, 1.0))
    print("S finite:", bool(np.all(np.isfinite(r.S))))
""")


@pytest.mark.slow
def test_first_run_on_cold_caches_prints_no_numba_experimental_feature_warning(tmp_path):
    """A user's first call compiles the kernels; numba's NumbaExperimentalFeatureWarning about
    first-class function types (raised compiling ``march``) must not reach them. Every
    warning is shown in the child (``-W always``), so a global filter elsewhere cannot hide it."""
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               PBSENS_CACHE_DIR=str(tmp_path / "pbsens"))
    r = subprocess.run([sys.executable, "-W", "always", "-c", _COLD_FIRST_RUN], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "S finite: True" in r.stdout
    assert os.listdir(tmp_path / "numba"), "numba's cache stayed empty: the kernels were not compiled cold"
    assert "NumbaExperimentalFeatureWarning" not in r.stderr, r.stderr[-3000:]


def test_experimental_feature_warning_is_silenced_only_where_raised():
    """The march kernel silences the warning while it compiles; no global filter stays behind."""
    import warnings

    from numba.core.errors import NumbaExperimentalFeatureWarning

    import pbsens.kernels.march  # noqa: F401 - compiles or loads the kernel
    assert not [f for f in warnings.filters if f[2] is NumbaExperimentalFeatureWarning]
