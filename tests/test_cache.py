"""The compiled-model cache survives damaged, truncated and foreign files, concurrent cold
loads from several processes, an unwritable location; cache_info/cache_clear and the size
bound do what they say.

Models here are tiny (one or two states) so that each compiles in a second or two; each
test builds its own model (a unique equation, hence a unique cache key) in its own
cache directory.
"""
import json
import os
import stat
import subprocess
import sys
import textwrap
import time

from pathlib import Path

import numpy as np
import pytest

from pbsens.kernels import numba_cache_dir
from pbsens.model import cache, codegen
from pbsens.model.cache import CacheWarning
from pbsens.model.spec import ModelSpec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _spec(tag, k=0.5):
    """x' = -k x + c with c unique per test; y' = x * y (so the Jacobians are not trivial)."""
    c = sum(map(ord, tag)) % 97 + 1
    return ModelSpec.from_dict({
        "name": f"cache_{tag}",
        "states": [{"name": "x", "initial": 1.0}, {"name": "y", "initial": 2.0}],
        "parameters": [{"name": "k", "value": k}],
        "odes": [{"state": "x", "rhs": f"-k*x + {c}"}, {"state": "y", "rhs": "x*y"}],
    }), c


@pytest.fixture
def cache_in(tmp_path, monkeypatch):
    """Point the cache at a fresh directory; forget modules loaded from it afterwards."""
    d = tmp_path / "cache"
    monkeypatch.setenv("PBSENS_CACHE_DIR", str(d))
    monkeypatch.setattr(cache, "_resolved", {})
    before = set(sys.modules)
    yield d
    for name in set(sys.modules) - before:
        if name.startswith(cache.MODULE_PREFIX):
            del sys.modules[name]


def _load_fresh(spec):
    """compile_spec as a new process would see it: not from this process's sys.modules."""
    sys.modules.pop(cache.MODULE_PREFIX + codegen.module_key(spec), None)
    return codegen.compile_spec(spec)


def _check_module(module, c, k=0.5):
    """The generated functions compute x' = -k x + c, y' = x y and A, B correctly."""
    x, p = np.array([1.5, -2.0]), np.array([k])
    f = np.empty(2)
    module.rhs_into(0.0, x, p, np.empty(0), f)
    np.testing.assert_allclose(f, [-k * 1.5 + c, 1.5 * -2.0], rtol=1e-15)
    A, B = np.empty((2, 2)), np.empty((2, 1))
    module.jacs_into(0.0, x, p, np.empty(0), A, B)
    np.testing.assert_allclose(A, [[-k, 0.0], [-2.0, 1.5]], rtol=1e-15)
    np.testing.assert_allclose(B, [[-1.5], [0.0]], rtol=1e-15)


def _model_files(d, spec):
    """The entry's files: beside it, in its __pycache__ and numba's (under $NUMBA_CACHE_DIR
    when that is set)."""
    key = codegen.module_key(spec)
    pattern = f"{cache.MODULE_PREFIX}{key}*"
    files = {p for p in d.rglob(pattern) if p.is_file()}
    files |= {p for p in Path(numba_cache_dir(str(d))).glob(pattern) if p.is_file()}
    return sorted(files)


def _all_files(d):
    """Every file the cache in ``d`` holds, numba's under $NUMBA_CACHE_DIR included."""
    numba_dir = Path(numba_cache_dir(str(d)))
    files = {p for p in d.rglob("*") if p.is_file()}
    if numba_dir.exists():
        files |= {p for p in numba_dir.iterdir() if p.is_file()}
    return sorted(files)


def test_warm_load_gives_no_warning_and_same_module(cache_in):
    spec, c = _spec("warm")
    _check_module(_load_fresh(spec), c)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check_module(_load_fresh(spec), c)
    header = cache.read_header(cache.entry_path(str(cache_in), codegen.module_key(spec)))
    assert header["model"] == "cache_warm" and header["key"] == codegen.module_key(spec)


def test_garbage_in_every_file_of_a_model_recovers(cache_in):
    spec, c = _spec("garbage")
    _check_module(_load_fresh(spec), c)
    files = _model_files(cache_in, spec)
    kinds = {p.suffix for p in files}
    assert {".py", ".nbi", ".nbc"} <= kinds, kinds   # the test covers numba's files too
    rng = np.random.default_rng(1)
    for p in files:
        p.write_bytes(rng.integers(0, 256, size=200, dtype=np.uint8).tobytes())
    with pytest.warns(CacheWarning, match="damaged"):
        module = _load_fresh(spec)
    _check_module(module, c)
    assert cache.read_entry(str(cache_in), codegen.module_key(spec))[0] == "ok"


def test_garbage_only_in_numba_files_recovers(cache_in):
    spec, c = _spec("numba")
    _check_module(_load_fresh(spec), c)
    numba_files = [p for p in _model_files(cache_in, spec) if p.suffix in (".nbi", ".nbc")]
    assert numba_files
    for p in numba_files:
        p.write_bytes(b"\x80\x04garbage" * 10)
    with pytest.warns(CacheWarning, match="machine code"):
        module = _load_fresh(spec)
    _check_module(module, c)


def test_truncated_file_recovers_without_syntax_error(cache_in):
    spec, c = _spec("truncated")
    _load_fresh(spec)
    path = cache_in / os.path.basename(cache.entry_path(str(cache_in), codegen.module_key(spec)))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])   # a crash or full disk in the middle of a write
    with pytest.warns(CacheWarning, match="does not match its hash"):
        module = _load_fresh(spec)
    _check_module(module, c)
    assert path.read_bytes() == data


def test_edited_file_is_rebuilt_not_used(cache_in):
    spec, c = _spec("edited")
    _load_fresh(spec)
    path = cache_in / os.path.basename(cache.entry_path(str(cache_in), codegen.module_key(spec)))
    text = path.read_text()
    assert f" + {c}" in text or f"{c}" in text
    path.write_text(text.replace("out[1] = ", "out[1] = 1000.0 + "))   # valid Python, wrong model
    with pytest.warns(CacheWarning, match="does not match its hash"):
        module = _load_fresh(spec)
    _check_module(module, c)


def test_foreign_file_is_rebuilt_not_used(cache_in):
    spec_a, c_a = _spec("foreign_a")
    spec_b, c_b = _spec("foreign_b_other")
    assert c_a != c_b
    _load_fresh(spec_a)
    _load_fresh(spec_b)
    pa = cache.entry_path(str(cache_in), codegen.module_key(spec_a))
    pb = cache.entry_path(str(cache_in), codegen.module_key(spec_b))
    with open(pb, "rb") as src, open(pa, "wb") as dst:   # B's intact file under A's name
        dst.write(src.read())
    with pytest.warns(CacheWarning, match="foreign"):
        module = _load_fresh(spec_a)
    _check_module(module, c_a)


_WORKER = textwrap.dedent("""
    import json, sys, time, warnings
    warnings.simplefilter("error")           # any cache repair would be a failure here
    import numpy as np
    from pbsens.model import codegen
    from pbsens.model.spec import ModelSpec
    spec = ModelSpec.from_dict(json.loads(sys.argv[1]))
    start = float(sys.argv[2])
    while time.time() < start:
        time.sleep(0.005)
    m = codegen.compile_spec(spec)
    f = np.empty(2)
    m.rhs_into(0.0, np.array([1.5, -2.0]), np.array([0.5]), np.empty(0), f)
    s = m.jacs_into.stats
    print(json.dumps({"sympy": "sympy" in sys.modules, "misses": sum(s.cache_misses.values()),
                      "hits": sum(s.cache_hits.values()), "f": f.tolist()}))
""")


def test_concurrent_cold_loads_compile_once(tmp_path):
    """Three processes load the same cold model at the same moment: one derives and
    compiles it, the others wait for it and load its files; none sees a half-written file."""
    spec, c = _spec("concurrent")
    env = dict(os.environ, PBSENS_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=ROOT)
    start = time.time() + 8.0   # after every process has imported pbsens
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, json.dumps(spec.to_dict()), str(start)],
                              env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    for r in results:
        np.testing.assert_allclose(r["f"], [-0.5 * 1.5 + c, -3.0], rtol=1e-15)
    # exactly one process generated the source (imported sympy) and compiled (numba misses)
    assert sum(r["sympy"] for r in results) == 1, results
    assert sum(r["misses"] > 0 for r in results) == 1, results
    assert sum(r["hits"] > 0 for r in results) == 2, results


def test_unwritable_location_falls_back_to_private_temp_dir(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PBSENS_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(cache, "_resolved", {})
    spec, c = _spec("unwritable")
    with pytest.warns(CacheWarning, match="not writable"):
        module = _load_fresh(spec)
    _check_module(module, c)
    d = cache.cache_dir()
    assert not d.startswith(str(blocker))
    st = os.stat(d)
    assert stat.S_IMODE(st.st_mode) & 0o077 == 0           # private to this user
    assert os.path.exists(cache.entry_path(d, codegen.module_key(spec)))
    sys.modules.pop(cache.MODULE_PREFIX + codegen.module_key(spec), None)


def test_private_temp_dir_rejects_a_directory_others_can_write(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    planted = tmp_path / f"pbsens-cache-{os.getuid()}"
    planted.mkdir()
    os.chmod(planted, 0o777)
    d = cache.private_temp_dir()
    assert d != str(planted)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    planted.rmdir()
    d2 = cache.private_temp_dir()
    assert d2 == str(planted) and stat.S_IMODE(os.stat(d2).st_mode) == 0o700


def test_tests_use_a_private_cache_directory(tmp_path, monkeypatch):
    """The tests' own cache (used when the caller sets no PBSENS_CACHE_DIR) is private."""
    from conftest import _private_test_cache
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    d = _private_test_cache()
    st = os.stat(d)
    assert os.path.dirname(d) == str(tmp_path)
    assert st.st_uid == os.getuid()
    assert stat.S_IMODE(st.st_mode) & 0o077 == 0, oct(st.st_mode)   # nobody else can plant files
    os.chmod(d, 0o777)                                               # planted by someone else
    d2 = _private_test_cache()
    assert d2 != d and stat.S_IMODE(os.stat(d2).st_mode) & 0o077 == 0


def test_cache_info_and_clear(cache_in):
    spec_a, c_a = _spec("info_a")
    spec_b, _ = _spec("info_b_x")
    _load_fresh(spec_a)
    _load_fresh(spec_b)
    info = cache.cache_info()
    assert info["directory"] == str(cache_in)
    assert info["n_models"] == 2
    assert sorted(m["model"] for m in info["models"]) == ["cache_info_a", "cache_info_b_x"]
    on_disk = sum(p.stat().st_size for p in _all_files(cache_in))
    assert info["size_bytes"] == on_disk > 0
    assert all(m["valid"] and m["age_s"] >= 0 for m in info["models"])
    text = cache.format_cache_info(info)
    assert "2 model(s)" in text and "cache_info_a" in text and str(cache_in) in text
    out = cache.cache_clear()
    assert out["removed"] == 2 and out["freed_bytes"] == on_disk
    assert cache.cache_info()["n_models"] == 0
    assert not _all_files(cache_in)
    _check_module(_load_fresh(spec_a), c_a)   # rebuilt on the next load
    assert cache.cache_info()["n_models"] == 1


def test_size_bound_evicts_least_recently_used(cache_in, monkeypatch):
    spec_a, _ = _spec("lru_a")
    spec_b, _ = _spec("lru_b_x")
    spec_c, c_c = _spec("lru_c_xy")
    _load_fresh(spec_a)
    _load_fresh(spec_b)
    ka, kb, kc = (codegen.module_key(s) for s in (spec_a, spec_b, spec_c))
    past = time.time() - 1000
    os.utime(cache.entry_path(str(cache_in), kb, ".lock"), (past, past))   # b used long ago
    os.utime(cache.entry_path(str(cache_in), kb), (past, past))
    one = sum(p.stat().st_size for p in _model_files(cache_in, spec_a))
    monkeypatch.setenv("PBSENS_CACHE_MAX_MB", str(2.5 * one / 2**20))   # room for two models
    _check_module(_load_fresh(spec_c), c_c)
    keys = {m["key"] for m in cache.cache_info()["models"]}
    assert keys == {ka, kc}


def _imported_names(module_file):
    import ast
    tree = ast.parse(open(module_file, encoding="utf-8").read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[-1])
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
    return names


def test_imports_flow_one_way():
    """codegen -> cache and codegen -> generate; never back (the old codegen <-> generate cycle)."""
    model_dir = os.path.join(ROOT, "pbsens", "model")
    assert not _imported_names(os.path.join(model_dir, "generate.py")) & {"codegen", "cache"}
    assert not _imported_names(os.path.join(model_dir, "cache.py")) & {"codegen", "generate", "sympy"}
    assert {"cache", "generate"} <= _imported_names(os.path.join(model_dir, "codegen.py"))
