"""The on-disk cache of compiled models: directory, entries, integrity, locking, size bound.

One entry per model: ``pbsens_model_<key>.py`` (the generated module) in the cache
directory, plus what Python and numba store beside it in ``__pycache__/`` (bytecode
``.pyc``, numba's index ``.nbi`` and machine code ``.nbc``, all named
``pbsens_model_<key>.*``; numba's files go under ``$NUMBA_CACHE_DIR`` when that is set,
:func:`pbsens.kernels.numba_cache_dir`) and a lock file ``pbsens_model_<key>.lock``.

Integrity. The first line of every generated file is a header holding the entry's key
and the SHA-256 of the rest of the file::

    # pbsens-cache {"key": "...", "sha256": "...", "model": "PKA", ...}

Files are written to a temporary file in the same directory and renamed into place
(atomic on POSIX and Windows), so a reader never sees half a file. :func:`read_entry`
checks the header before anything is executed: a truncated, corrupted, edited or
foreign file (another entry's file under this name) is reported and rebuilt.

Locking. :func:`entry_lock` takes an exclusive ``fcntl.flock`` on the entry's lock file
(no-op where ``fcntl`` does not exist), so that of several processes loading the same
cold model one derives and compiles it and the others wait and then load its result.
The lock file's modification time records the entry's last use (the ``.py`` file's own
time cannot serve: numba uses it to tell whether its machine code is fresh).

Directory. ``$PBSENS_CACHE_DIR``, else ``$XDG_CACHE_HOME/pbsens``, else
``~/.cache/pbsens``. If that location cannot be written, a private per-user directory
under the system temporary directory is used instead (mode 0700), with a
:class:`CacheWarning`.

Size bound. After a model is compiled, the least recently used entries are removed
until the directory (including numba's files of those entries) is below
``$PBSENS_CACHE_MAX_MB`` (default 1024 MB; 0 disables the bound). Entries that another
process is loading at that moment are skipped. Numba's cache of pbsens's own kernels
lives in the package's ``__pycache__`` (or ``$NUMBA_CACHE_DIR``); it holds one fixed
set of functions per pbsens and numba version and does not grow with use.
"""
from __future__ import annotations

import contextlib
import getpass
import glob
import hashlib
import json
import os
import stat
import tempfile
import time
import warnings

from ..kernels import numba_cache_dir

__all__ = ["CacheWarning", "cache_dir", "cache_info", "cache_clear", "entry_path", "entry_lock",
           "read_entry", "write_entry", "write_atomic", "discard_entry", "purge_artifacts",
           "enforce_size_bound", "MODULE_PREFIX", "format_cache_info"]

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: rename is still atomic; no lock
    fcntl = None

#: File-name prefix of every generated module (and of the module names in ``sys.modules``).
MODULE_PREFIX = "pbsens_model_"
_HEADER = "# pbsens-cache "
_DEFAULT_MAX_MB = 1024
_LOCK_TIMEOUT_S = 900.0
_STALE_TMP_S = 3600.0


class CacheWarning(RuntimeWarning):
    """The model cache was repaired (a bad file rebuilt) or moved to a temporary directory."""


# ------------------------------------------------------------------ the directory
_resolved: dict = {}   # configured path -> usable path (checked once per process)


def configured_dir() -> str:
    """The cache directory the environment asks for (it may not exist or be writable)."""
    path = os.environ.get("PBSENS_CACHE_DIR")
    if not path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "pbsens")
    return os.path.abspath(path)


def _writable(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".probe-")
        os.close(fd)
        os.remove(probe)
        return True
    except OSError:
        return False


def private_temp_dir(name: str = "pbsens-cache") -> str:
    """A per-user directory ``<tmp>/<name>-<user>`` with mode 0700, checked to be ours.

    If that path exists but is not a directory owned by this user and closed to others
    (someone else may have created it to read or plant files), a fresh ``mkdtemp``
    directory is returned instead.
    """
    try:
        user = str(os.getuid())
    except AttributeError:  # pragma: no cover - Windows
        user = getpass.getuser()
    path = os.path.join(tempfile.gettempdir(), f"{name}-{user}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
        ok = stat.S_ISDIR(st.st_mode) and (st.st_mode & 0o077) == 0 and \
            (not hasattr(os, "getuid") or st.st_uid == os.getuid())
    except OSError:
        ok = False
    return path if ok else tempfile.mkdtemp(prefix=f"{name}-")


def cache_dir() -> str:
    """The directory holding compiled models: created on demand, writable.

    If the configured directory (see the module docstring) cannot be written, a private
    temporary directory is used instead, with a :class:`CacheWarning` (once per process).
    """
    configured = configured_dir()
    path = _resolved.get(configured)
    if path is None:
        if _writable(configured):
            path = configured
        else:
            path = private_temp_dir()
            warnings.warn(f"the pbsens model cache {configured!r} is not writable; compiled models go to "
                          f"{path!r} for this process (set PBSENS_CACHE_DIR to a writable directory to "
                          "keep them)", CacheWarning, stacklevel=3)
        _resolved[configured] = path
    return path


def use_fallback(directory: str, why: str) -> str:
    """Switch this process to the temporary cache after ``directory`` failed (e.g. disk full)."""
    path = private_temp_dir()
    if os.path.abspath(path) == os.path.abspath(directory):
        path = tempfile.mkdtemp(prefix="pbsens-cache-")
    warnings.warn(f"cannot write to the pbsens model cache {directory!r} ({why}); compiled models go to "
                  f"{path!r} for this process", CacheWarning, stacklevel=3)
    _resolved[configured_dir()] = path
    return path


# ------------------------------------------------------------------ one entry
def entry_path(directory: str, key: str, suffix: str = ".py") -> str:
    return os.path.join(directory, f"{MODULE_PREFIX}{key}{suffix}")


def _artifact_dirs(directory: str) -> list:
    """Where Python's bytecode (``__pycache__``) and numba's files of the entries in
    ``directory`` go: numba's folder differs when ``$NUMBA_CACHE_DIR`` is set."""
    dirs = [os.path.join(directory, "__pycache__")]
    numba_dir = numba_cache_dir(directory)
    if os.path.abspath(numba_dir) != os.path.abspath(dirs[0]):
        dirs.append(numba_dir)
    return dirs


def _artifacts(directory: str, key: str) -> list:
    """Python's and numba's files of one entry."""
    return [p for d in _artifact_dirs(directory)
            for p in glob.glob(os.path.join(glob.escape(d), f"{MODULE_PREFIX}{key}.*"))]


def purge_artifacts(directory: str, key: str) -> int:
    """Delete the entry's bytecode and numba files; returns how many were deleted."""
    n = 0
    for path in _artifacts(directory, key):
        with contextlib.suppress(OSError):
            os.remove(path)
            n += 1
    return n


def discard_entry(directory: str, key: str) -> None:
    """Delete an entry's generated file and everything stored beside it (not its lock file)."""
    with contextlib.suppress(OSError):
        os.remove(entry_path(directory, key))
    purge_artifacts(directory, key)


def _header(key: str, body: bytes, meta: dict) -> bytes:
    head = dict(key=key, sha256=hashlib.sha256(body).hexdigest(), **meta)
    return (_HEADER + json.dumps(head, sort_keys=True) + "\n").encode("utf-8")


def write_atomic(path: str, data: bytes, prefix: str) -> None:
    """Write ``data`` to ``path`` through a temporary file (``.<prefix>...tmp`` in the same
    directory) renamed into place: a reader sees the old file or the whole new one."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=f".{prefix}", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def write_entry(directory: str, key: str, source: str, **meta) -> str:
    """Write the entry's module atomically (temporary file + rename), with its header."""
    body = source.encode("utf-8")
    path = entry_path(directory, key)
    write_atomic(path, _header(key, body, meta) + body, f"{MODULE_PREFIX}{key}-")
    return path


def read_header(path: str) -> dict | None:
    """The parsed header of a cache file, or None if it has none."""
    try:
        with open(path, "rb") as fh:
            line = fh.readline(4096)
        if not line.startswith(_HEADER.encode()):
            return None
        head = json.loads(line[len(_HEADER):].decode("utf-8"))
        return head if isinstance(head, dict) else None
    except (OSError, ValueError):
        return None


def read_entry(directory: str, key: str):
    """``(status, data)`` for an entry: ``("missing", None)``, ``("ok", bytes_of_whole_file)``
    or ``("bad", reason)`` when the file is truncated, corrupted, edited or foreign."""
    path = entry_path(directory, key)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return "missing", None
    except OSError as exc:
        return "bad", f"unreadable ({exc.strerror or exc})"
    first, sep, body = data.partition(b"\n")
    if not sep or not first.startswith(_HEADER.encode()):
        return "bad", "no pbsens header (not a file pbsens wrote, or its start is damaged)"
    try:
        head = json.loads(first[len(_HEADER):].decode("utf-8"))
        want_key, want_hash = head["key"], head["sha256"]
    except (ValueError, KeyError, TypeError):
        return "bad", "damaged header"
    if want_key != key:
        return "bad", f"foreign file (written for the entry {str(want_key)[:24]!r})"
    if hashlib.sha256(body).hexdigest() != want_hash:
        return "bad", "content does not match its hash (truncated, corrupted or edited)"
    return "ok", data


@contextlib.contextmanager
def entry_lock(directory: str, key: str, timeout: float = _LOCK_TIMEOUT_S):
    """Exclusive inter-process lock on one entry; also marks the entry as just used.

    Waits up to ``timeout`` seconds for another process (e.g. one compiling the same
    model), then goes on without the lock, with a :class:`CacheWarning`: files are
    renamed into place whole, so the worst case is compiling the model twice.
    """
    path = entry_path(directory, key, ".lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield False
        return
    locked = False
    try:
        with contextlib.suppress(OSError):
            os.utime(fd)
        if fcntl is not None:
            deadline = time.monotonic() + timeout
            delay = 0.005
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    locked = True
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        warnings.warn(f"waited {timeout:.0f} s for the cache lock {path!r}; going on "
                                      "without it", CacheWarning, stacklevel=3)
                        break
                    time.sleep(delay)
                    delay = min(delay * 2, 0.2)
                except OSError:  # e.g. a file system without locks
                    break
        yield locked
    finally:
        if locked:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _try_lock(path: str):
    """Non-blocking exclusive lock on an entry's lock file: an fd, or None if busy."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
    return fd


# ------------------------------------------------------------------ the whole cache
def _discard_unless_locked(directory: str, key: str) -> bool:
    """Remove an entry and its lock file unless another process holds its lock."""
    fd = _try_lock(entry_path(directory, key, ".lock"))
    if fd is None:
        return False
    try:
        discard_entry(directory, key)
        with contextlib.suppress(OSError):
            os.remove(entry_path(directory, key, ".lock"))
    finally:
        os.close(fd)
    return True


def _entries(directory: str) -> dict:
    """``{key: {"files": [...], "size_bytes": n, "last_used": t, "created": t}}``."""
    out = {}
    names = [p for d in [directory] + _artifact_dirs(directory)
             for p in glob.glob(os.path.join(glob.escape(d), MODULE_PREFIX + "*"))]
    for path in names:
        base = os.path.basename(path)[len(MODULE_PREFIX):]
        key = base.split(".", 1)[0]
        try:
            st = os.stat(path)
        except OSError:
            continue
        e = out.setdefault(key, {"files": [], "size_bytes": 0, "last_used": 0.0, "created": None})
        e["files"].append(path)
        e["size_bytes"] += st.st_size
        if base == key + ".py":
            e["created"] = st.st_mtime
            e["last_used"] = max(e["last_used"], st.st_mtime)
        elif base == key + ".lock":
            e["last_used"] = max(e["last_used"], st.st_mtime)
    return out


def _max_bytes() -> int:
    raw = os.environ.get("PBSENS_CACHE_MAX_MB", "")
    try:
        mb = float(raw) if raw.strip() else _DEFAULT_MAX_MB
    except ValueError:
        warnings.warn(f"PBSENS_CACHE_MAX_MB={raw!r} is not a number; using {_DEFAULT_MAX_MB}",
                      CacheWarning, stacklevel=3)
        mb = _DEFAULT_MAX_MB
    return max(int(mb * 2**20), 0)


def enforce_size_bound(directory: str, keep=()) -> list:
    """Remove least recently used entries until the cache is below ``$PBSENS_CACHE_MAX_MB``.

    Entries in ``keep`` and entries locked by another process are never removed. Stale
    temporary files (from a writer that died) older than an hour are removed too.
    Returns the removed keys.
    """
    now = time.time()
    for tmp in glob.glob(os.path.join(glob.escape(directory), f".{MODULE_PREFIX}*.tmp")):
        with contextlib.suppress(OSError):
            if now - os.stat(tmp).st_mtime > _STALE_TMP_S:
                os.remove(tmp)
    limit = _max_bytes()
    if limit <= 0:
        return []
    entries = _entries(directory)
    total = sum(e["size_bytes"] for e in entries.values())
    removed = []
    for key, e in sorted(entries.items(), key=lambda kv: kv[1]["last_used"]):
        if total <= limit:
            break
        if key in keep:
            continue
        if not _discard_unless_locked(directory, key):
            continue
        total -= e["size_bytes"]
        removed.append(key)
    return removed


def cache_info() -> dict:
    """What the compiled-model cache holds.

    Returns
    -------
    dict
        ``directory``; ``size_bytes`` (generated modules, Python's and numba's files);
        ``max_bytes`` (the size bound, 0 = none); ``n_models``; ``models``: one dict
        per entry with ``key``, ``model`` (name), ``size_bytes``, ``created`` and
        ``last_used`` (POSIX times), ``age_s`` (seconds since created), ``valid``
        (header present; the full content hash is checked when the model is loaded),
        most recently used first. ``size_bytes`` also counts files left without
        their module (removed by :func:`cache_clear` and the size bound).
    """
    directory = cache_dir()
    models = []
    now = time.time()
    entries = _entries(directory)
    for key, e in entries.items():
        if e["created"] is None:   # lock file or numba files left without their module
            continue
        head = read_header(entry_path(directory, key))
        models.append({
            "key": key, "model": (head or {}).get("model"), "size_bytes": e["size_bytes"],
            "created": e["created"], "last_used": e["last_used"],
            "age_s": max(now - e["created"], 0.0),
            "valid": bool(head and head.get("key") == key),
        })
    models.sort(key=lambda m: -m["last_used"])
    return {"directory": directory, "size_bytes": sum(e["size_bytes"] for e in entries.values()),
            "max_bytes": _max_bytes(), "n_models": len(models), "models": models}


def cache_clear() -> dict:
    """Delete every compiled model in the cache (they are rebuilt when next loaded).

    Models already loaded in a running process keep working. Entries that another
    process is loading at this moment are left alone.

    Returns
    -------
    dict
        ``directory``, ``removed`` (number of models), ``freed_bytes``, ``skipped``
        (number of entries in use elsewhere).
    """
    directory = cache_dir()
    removed = skipped = freed = 0
    for key, e in _entries(directory).items():
        if not _discard_unless_locked(directory, key):
            skipped += 1
            continue
        removed += e["created"] is not None
        freed += e["size_bytes"]
    for tmp in glob.glob(os.path.join(glob.escape(directory), f".{MODULE_PREFIX}*.tmp")):
        with contextlib.suppress(OSError):
            freed += os.stat(tmp).st_size
            os.remove(tmp)
    return {"directory": directory, "removed": removed, "freed_bytes": freed, "skipped": skipped}


def format_cache_info(info: dict | None = None) -> str:
    """:func:`cache_info` as text, one line per model (for ``pbsens cache info``)."""
    info = cache_info() if info is None else info
    mb = 2.0**20
    bound = f"{info['max_bytes'] / mb:.0f} MB" if info["max_bytes"] else "none"
    lines = [f"pbsens model cache: {info['directory']}",
             f"{info['n_models']} model(s), {info['size_bytes'] / mb:.1f} MB (size bound {bound})"]
    for m in info["models"]:
        age = _age(m["age_s"])
        state = "" if m["valid"] else "  (damaged: rebuilt on next load)"
        lines.append(f"  {m['model'] or '?':<24} {m['size_bytes'] / mb:7.2f} MB  built {age} ago  "
                     f"key {m['key']}{state}")
    return "\n".join(lines)


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"
