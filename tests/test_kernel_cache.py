"""The kernels' numba cache is dropped when any kernel source changes (numba itself checks only
the file of the function it caches, not the kernels compiled into it)."""
import os

from pbsens.kernels import _STAMP, drop_stale_cache


def _setup(tmp_path):
    src = tmp_path / "src"
    cache = tmp_path / "src" / "__pycache__"
    other = tmp_path / "other"
    cache.mkdir(parents=True)
    other.mkdir()
    for name in ("a.py", "b.py"):
        (src / name).write_text(f"# {name}\n")
    return src, cache, other


def _plant(*dirs):
    for d in dirs:
        for name in ("k.f-10.py311.nbi", "k.f-10.py311.1.nbc"):
            (d / name).write_bytes(b"x")


def _nb(d):
    return sorted(p.name for p in d.iterdir() if p.suffix in (".nbi", ".nbc"))


def test_changed_sources_drop_the_cache_once(tmp_path):
    src, cache, other = _setup(tmp_path)
    sources = [str(src / "a.py"), str(src / "b.py")]
    _plant(cache, other)
    assert drop_stale_cache(sources, [str(cache), str(other)]) == 4      # no stamp yet: dropped
    assert _nb(cache) == [] and _nb(other) == [] and (cache / _STAMP).exists()
    _plant(cache, other)
    assert drop_stale_cache(sources, [str(cache), str(other)]) == 0      # unchanged: kept
    assert len(_nb(cache)) == 2 and len(_nb(other)) == 2
    (src / "b.py").write_text("# b.py, edited\n")
    assert drop_stale_cache(sources, [str(cache), str(other)]) == 4      # a callee changed: dropped
    assert _nb(cache) == [] and _nb(other) == []
    _plant(cache)
    assert drop_stale_cache(sources, [str(cache), str(other)]) == 0


def test_a_missing_source_or_unwritable_cache_does_nothing_harmful(tmp_path):
    src, cache, other = _setup(tmp_path)
    _plant(cache)
    assert drop_stale_cache([str(src / "nope.py")], [str(cache)]) == 0
    assert len(_nb(cache)) == 2
    os.chmod(cache, 0o500)
    try:
        drop_stale_cache([str(src / "a.py")], [str(cache)])           # no exception
    finally:
        os.chmod(cache, 0o700)


def test_numba_cache_dir_is_where_numba_writes(tmp_path):
    """numba_cache_dir names the folder the installed numba really writes a cached function's
    files to, with and without $NUMBA_CACHE_DIR (a fresh process each time: numba reads the
    variable once at import)."""
    import subprocess
    import sys
    src = tmp_path / "some dir" / "src"
    src.mkdir(parents=True)
    (src / "cached_mod.py").write_text("import numba\n\n@numba.njit(cache=True)\n"
                                       "def f(x):\n    return x + 1\n")
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import cached_mod; cached_mod.f(1)\n"
              "from pbsens.kernels import numba_cache_dir; print(numba_cache_dir(sys.argv[1]))")
    for numba_dir in (None, tmp_path / "numba cache"):
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
        if numba_dir is not None:
            env["NUMBA_CACHE_DIR"] = str(numba_dir)
        out = subprocess.run([sys.executable, "-c", script, str(src)], env=env, check=True,
                             capture_output=True, text=True).stdout.strip()
        written = {p.parent for p in tmp_path.rglob("cached_mod.f-*.nbi")}
        assert written == {__import__("pathlib").Path(out)}, (written, out)
        for p in tmp_path.rglob("cached_mod.f-*"):
            p.unlink()
