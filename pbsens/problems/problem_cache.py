"""The on-disk cache of loaded PEtab problems: a warm load without reading the tables again.

Loading a PEtab problem costs far more than loading its compiled model: the ``petab``
library's import (1.5 s), its reading and linting of the tables, pbsens's checks and
parameter maps and the SBML -> spec conversion (Lang_PLOSComputBiol2024: 3.5 s in all,
against 0.3 s for the compiled model). All of it depends only on the files. After a
successful :func:`pbsens.petab.load` (of a PEtab YAML file or an SBtab folder), :func:`store` keeps what the
:class:`~pbsens.problems.Problem` is made of (the model spec, the estimated parameters,
the condition plans, the per-row arrays, the warnings the load issued) in the
``problems/`` folder of the model cache (:func:`pbsens.model.cache.cache_dir`); the next
load of the same files (:func:`lookup`) rebuilds the problem from it and its model from the
model cache, without importing ``petab``. The ``petab.v1.Problem`` is then read only when
:attr:`Problem.petab_problem <pbsens.problems.Problem.petab_problem>` is first used.

An entry is one file, ``<key>.entry``, written atomically: a header line (the key, the
SHA-256 of the rest and the length of the JSON part), the structure as JSON, and the arrays as
an ``.npz`` archive (read with ``allow_pickle=False``): data only, nothing in it runs code; a
damaged or foreign entry is a miss. The key is the SHA-256 of the YAML file's path and bytes and the bytes of every file it
names (of an SBtab folder, UQSA layout: its path and every file in it), pbsens's source files and the versions of petab, pandas and python-libsbml: an edited
table, another pbsens or another petab is a miss. An entry made without the linter serves
``lint=False`` loads only. At most :data:`MAX_ENTRIES` entries are kept (least recently used
go first); ``pbsens cache clear`` removes them with the models. ``PBSENS_PROBLEM_CACHE=0``
turns the cache off.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import hashlib
import json
import io
import os
import warnings

import numpy as np

from ..model.cache import write_atomic
from .petab import MAX_TABLE_BYTES, ConditionPlan, ParameterMap

__all__ = ["MAX_ENTRIES", "FORMAT", "problem_key", "lookup", "store", "entries_dir", "count", "clear",
           "recording_warnings"]

#: Entries kept (least recently used removed first).
MAX_ENTRIES = 64
#: Version of the entry layout (part of the key).
FORMAT = 1
_HEADER = "# pbsens-problem "


class _Unstorable(Exception):
    """A value the entry format does not hold (then the problem is simply not cached)."""


def enabled() -> bool:
    return os.environ.get("PBSENS_PROBLEM_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


def entries_dir() -> str:
    from ..model.cache import cache_dir
    return os.path.join(cache_dir(), "problems")


# ------------------------------------------------------------------ key
@functools.lru_cache(maxsize=1)
def _code_and_versions() -> bytes:
    """pbsens's own sources and the versions of the libraries that read the tables."""
    from importlib import metadata
    h = hashlib.sha256()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for path in sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True)):
        h.update(os.path.relpath(path, root).encode())
        with open(path, "rb") as fh:
            h.update(hashlib.sha256(fh.read()).digest())
    for dist in ("petab", "pandas", "python-libsbml"):
        try:
            h.update(f"{dist}={metadata.version(dist)};".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist}=none;".encode())
    return h.digest()


def _named_files(cfg) -> list:
    """The file names a PEtab YAML mentions (keys ``*_file`` / ``*_files``, top level and per problem; v2's
    ``model_files`` entries by their ``location``)."""
    names = []

    def take(d):
        for k, v in d.items():
            if not isinstance(k, str) or not (k.endswith("_file") or k.endswith("_files")):
                continue
            for x in (v if isinstance(v, list) else list(v.values()) if isinstance(v, dict) else [v]):
                if isinstance(x, str):
                    names.append(x)
                elif isinstance(x, dict) and isinstance(x.get("location"), str):   # PEtab 2.0 model_files
                    names.append(x["location"])
    take(cfg)
    for prob in cfg.get("problems") or []:
        if isinstance(prob, dict):
            take(prob)
    return names


def _hash_file(h, name, path, limit):
    """Add ``name`` and the SHA-256 of the file's bytes to ``h``; False if it is larger than ``limit``."""
    if os.path.getsize(path) > limit:
        return False
    with open(path, "rb") as fh:
        h.update(name.encode() + b"\0" + hashlib.sha256(fh.read()).digest())
    return True


def problem_key(yaml_path) -> str | None:
    """The entry key of a PEtab YAML file or an SBtab folder (every regular file in it), see
    the module docstring; None when a file cannot be read or is larger than the table limit
    (then the full load reports it)."""
    import yaml

    path = os.path.abspath(os.fspath(yaml_path))
    h = hashlib.sha256()
    h.update(f"pbsens-problem-{FORMAT};".encode())
    h.update(_code_and_versions())
    if os.path.isdir(path):                                      # an SBtab folder
        try:
            h.update(b"sbtab\0" + path.encode() + b"\0")
            for name in sorted(os.listdir(path)):
                f = os.path.join(path, name)
                if os.path.isfile(f) and not _hash_file(h, name, f, MAX_TABLE_BYTES):
                    return None
        except OSError:
            return None
        return h.hexdigest()
    try:
        if os.path.getsize(path) > MAX_TABLE_BYTES:
            return None
        with open(path, "rb") as fh:
            raw = fh.read()
        cfg = yaml.safe_load(raw)
        if not isinstance(cfg, dict):
            return None
        h.update(path.encode() + b"\0" + hashlib.sha256(raw).digest())
        base = os.path.dirname(path)
        for name in _named_files(cfg):
            if not _hash_file(h, name, os.path.join(base, name), MAX_TABLE_BYTES):
                return None
    except (OSError, ValueError, yaml.YAMLError):
        return None
    return h.hexdigest()


# ------------------------------------------------------------------ encoding
def _encode(v, arrays):
    if isinstance(v, np.ndarray):
        name = f"a{len(arrays)}"
        if v.dtype == object:
            if not all(isinstance(s, str) for s in v.flat):
                raise _Unstorable("an object array that is not all text")
            arrays[name] = np.array(v.tolist(), dtype=str).reshape(v.shape)
            return {"$a": name, "object": True}
        if v.dtype.hasobject or v.dtype.kind not in "biufU":
            raise _Unstorable(f"an array of dtype {v.dtype}")
        arrays[name] = v
        return {"$a": name}
    if isinstance(v, (ParameterMap, ConditionPlan)):
        return {"$" + type(v).__name__: {f.name: _encode(getattr(v, f.name), arrays)
                                         for f in dataclasses.fields(v)}}
    if isinstance(v, dict):
        return {"$d": [[_encode(k, arrays), _encode(x, arrays)] for k, x in v.items()]}
    if isinstance(v, tuple):
        return {"$t": [_encode(x, arrays) for x in v]}
    if isinstance(v, list):
        return [_encode(x, arrays) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if v is None or isinstance(v, str):
        return v
    raise _Unstorable(f"a value of type {type(v).__name__}")


def _decode(v, arrays):
    if isinstance(v, list):
        return [_decode(x, arrays) for x in v]
    if not isinstance(v, dict):
        return v
    if "$a" in v:
        a = arrays[v["$a"]]
        return a.astype(object) if v.get("object") else a
    if "$d" in v:
        return {_decode(k, arrays): _decode(x, arrays) for k, x in v["$d"]}
    if "$t" in v:
        return tuple(_decode(x, arrays) for x in v["$t"])
    for cls in (ParameterMap, ConditionPlan):
        if "$" + cls.__name__ in v:
            return cls(**{k: _decode(x, arrays) for k, x in v["$" + cls.__name__].items()})
    raise ValueError(f"unknown entry value {sorted(v)}")


# ------------------------------------------------------------------ entries
_SUFFIX = ".entry"


def _path(key):
    return os.path.join(entries_dir(), key + _SUFFIX)


def store(key, problem, *, linted, issued=()) -> bool:
    """Keep ``problem`` (just loaded from files with key ``key``) in the cache; ``issued``:
    the warnings its load gave, ``(category name, message)``. Returns whether it was stored
    (a problem holding a value the format does not know, or a cache that cannot be written,
    is simply not cached)."""
    if key is None or not enabled():
        return False
    arrays = {}
    rows = {k: v for k, v in problem._rows.items() if k not in ("fixed", "est", "cond", "ph")}
    try:
        body = {
            "spec": problem.model.spec.to_dict(),
            "files": _encode(dict(problem.files), arrays),
            "info": _encode(problem._info, arrays),
            "estimated": _encode(problem._estimated, arrays),
            "plans": _encode(list(problem._plans), arrays),
            "rows": _encode(rows, arrays),
            "model_id": problem.model_id,
            "extra": _encode({k: getattr(problem, k) for k in ("source", "sbtab_info") if hasattr(problem, k)},
                             arrays),
            "linted": bool(linted),
            "warnings": [[str(c), str(m)] for c, m in issued],
        }
        text = json.dumps(body, allow_nan=True).encode()
    except (_Unstorable, TypeError, ValueError):
        return False
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    rest = text + buf.getvalue()
    head = dict(key=key, sha256=hashlib.sha256(rest).hexdigest(), json_bytes=len(text))
    path = _path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, (_HEADER + json.dumps(head, sort_keys=True) + "\n").encode() + rest, "pbsens_problem-")
        _bound(os.path.dirname(path))
    except OSError:
        return False
    return True


def _read(key):
    """The entry's decoded body, or None (missing, damaged, foreign)."""
    path = _path(key)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    first, sep, rest = data.partition(b"\n")
    if not sep or not first.startswith(_HEADER.encode()):
        return None
    try:
        head = json.loads(first[len(_HEADER):].decode())
        if head.get("key") != key or head.get("sha256") != hashlib.sha256(rest).hexdigest():
            return None
        n = int(head["json_bytes"])
        body = json.loads(rest[:n].decode())
        with np.load(io.BytesIO(rest[n:]), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        out = {k: (body[k] if k in ("spec", "model_id", "linted", "warnings") else _decode(body[k], arrays))
               for k in ("spec", "files", "info", "estimated", "plans", "rows", "model_id", "linted", "warnings",
                         "extra")}
    except (ValueError, KeyError, TypeError, OSError):
        return None
    with contextlib.suppress(OSError):
        os.utime(path)                  # last use, for the bound on the number of entries
    return out


def _entries(directory):
    return glob.glob(os.path.join(glob.escape(directory), "*" + _SUFFIX))


def _bound(directory):
    for path in sorted(_entries(directory), key=_mtime, reverse=True)[MAX_ENTRIES:]:
        with contextlib.suppress(OSError):
            os.remove(path)


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def count() -> int:
    """Number of entries."""
    return len(_entries(entries_dir()))


def clear() -> tuple:
    """Remove every entry (and temporary files a writer left); ``(entries removed, bytes freed)``."""
    d = entries_dir()
    n = freed = 0
    for path in glob.glob(os.path.join(glob.escape(d), "*")) + glob.glob(os.path.join(glob.escape(d), ".*.tmp")):
        with contextlib.suppress(OSError):
            size = os.stat(path).st_size
            os.remove(path)
            freed += size
            n += path.endswith(_SUFFIX)
    return n, freed


def lookup(yaml_path, *, lint=True, key=None):
    """The :class:`~pbsens.problems.Problem` of ``yaml_path`` from the cache, or None on a miss.

    ``key``: its :func:`problem_key`, if the caller has it. A hit re-issues the warnings of
    the original load and compiles (loads) the model through the model cache.
    """
    if not enabled():
        return None
    key = problem_key(yaml_path) if key is None else key
    if key is None:
        return None
    entry = _read(key)
    if entry is None or (lint and not entry["linted"]):
        return None
    from ..errors import ModelError
    from ..model.library import model_from_spec
    from ..model.spec import ModelSpec
    from .petab import row_parameter_maps
    from .problem import Problem
    try:
        spec = ModelSpec.from_dict(entry["spec"], source="cached PEtab problem")
    except ModelError:
        return None
    rows, files = entry["rows"], entry["files"]
    if "yaml" in files:
        files["yaml"] = os.fspath(yaml_path)   # as given now (the first load may have used another cwd)
    model = model_from_spec(spec)
    rows.update(row_parameter_maps(entry["plans"], rows["measurement"].size, model.n_params,
                                   rows["placeholders"]))
    for category, message in entry["warnings"]:
        warnings.warn(message, _category(category), stacklevel=3)
    where = files.get("yaml") or files["sbtab"]
    problem = Problem(None, files, model, entry["info"], entry["estimated"], entry["plans"], rows,
                      model_id=entry["model_id"], cache_key=key,
                      reread=functools.partial(reread_tables, where, "yaml" in files, key))
    for k, v in entry["extra"].items():     # an SBtab problem's source and sbtab_info
        setattr(problem, k, v)
    return problem


def reread_tables(where, is_yaml, key):
    """The ``petab.v1.Problem`` of the files at ``where`` (a PEtab YAML, or an SBtab folder when
    not ``is_yaml``), read now for a problem built from this cache under ``key``;
    :class:`PbsensError` if the files changed since."""
    from ..errors import PbsensError
    if problem_key(where) != key:
        raise PbsensError(f"the files of the estimation problem {where!r} changed after it was "
                          "loaded; load it again (pbsens.petab.load)")
    if is_yaml:
        from .petab import read_problem
        return read_problem(where)[0]
    from .sbtab_problem import sbtab_to_petab
    return sbtab_to_petab(where)[0]


def _category(name):
    """The warning class stored as ``module:qualname`` (pbsens's own modules only), else PbsensWarning."""
    import importlib

    from ..errors import PbsensWarning
    module, _, qualname = str(name).partition(":")
    cat = None
    if module == "pbsens" or module.startswith("pbsens."):
        with contextlib.suppress(ImportError):
            cat = getattr(importlib.import_module(module), qualname, None)
    return cat if isinstance(cat, type) and issubclass(cat, PbsensWarning) else PbsensWarning


@contextlib.contextmanager
def recording_warnings():
    """Issue the warnings of the block again when it ends (also when it raises), and collect the
    :class:`~pbsens.errors.PbsensWarning` ones (about the problem, as ``(category name,
    message)``) to be stored with the entry; other libraries' warnings (deprecations) are not
    repeated on a warm load."""
    issued, caught = [], []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield issued
    finally:
        from ..errors import PbsensWarning
        for w in caught:
            if issubclass(w.category, PbsensWarning):     # about the problem: issued again on a warm load
                issued.append((f"{w.category.__module__}:{w.category.__qualname__}", str(w.message)))
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
