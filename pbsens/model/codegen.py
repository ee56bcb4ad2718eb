"""Compile a :class:`ModelSpec`: from the disk cache when present, else generate, store, load.

Imports flow one way::

    codegen (this module: orchestrates)
      -> cache     (directory, keys' files, atomic writes, content hash, locks, size bound)
      -> generate  (sympy -> Python source; imported only on a cache miss, so a warm
                    process never imports sympy)

The generated module is an ordinary ``.py`` file in the cache directory
(:func:`pbsens.model.cache.cache_dir`), named by a hash of the model's equations, the
pbsens version and :data:`CODEGEN_VERSION`. Its numba functions use ``cache=True``, so
numba stores the machine code next to it: a second process neither re-derives (sympy)
nor recompiles (LLVM); it imports the module and loads the machine code.

Failures of the cache are repaired, never fatal: a generated file whose content hash
does not match (truncated, corrupted, edited, foreign) is rebuilt, and numba's or
Python's files beside it that cannot be read are deleted and rebuilt, each with a
:class:`~pbsens.model.cache.CacheWarning`.

Generated functions (signatures in :mod:`pbsens.kernels.signatures`)::

    rhs_into(t, x, p, c, f)           jac_x_into(t, x, p, c, A)
    jac_p_into(t, x, p, c, B)         jacs_into(t, x, p, c, A, B)    # shared CSE
    x0_into(p, c, x0)                 dx0_dp_into(p, c, S0)
    out_into(t, x, p, c, y)           out_jac_x_into(t, x, p, c, Hx)   out_jac_p_into(t, x, p, c, Hp)
    jac_x_data_into(t, x, p, c, data) jac_p_data_into(t, x, p, c, data)  # CSR values (JAC_X_NZ, JAC_P_NZ)
    rhs(t, x, p), jac_x(t, x, p), jac_p(t, x, p)    # allocating, for users
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import sys
import threading
import warnings

from .._version import __version__
from ..errors import ModelError, PbsensError
from ..system.notices import notice
from . import cache
from .cache import CacheWarning, cache_dir
from .spec import ModelSpec

__all__ = ["cache_dir", "compile_spec", "module_key", "CODEGEN_VERSION"]

#: Bump when the generated source (:mod:`pbsens.model.generate`) changes shape, to
#: invalidate old caches.
CODEGEN_VERSION = "3"

_lock = threading.Lock()


def module_key(spec: ModelSpec) -> str:
    """The cache key of ``spec``: equations, pbsens version, code generator version."""
    text = "|".join([spec.equations_key(), __version__, CODEGEN_VERSION])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class _VerifiedSourceLoader(importlib.machinery.SourceFileLoader):
    """Loads the module from source bytes already checked against their hash.

    Python's bytecode cache (``__pycache__/*.pyc``) is still used when it is fresh.
    """

    def __init__(self, fullname, path, data):
        super().__init__(fullname, path)
        self._data = data

    def get_data(self, path):
        if path == self.path:
            return self._data
        return super().get_data(path)


def _exec_module(path: str, modname: str, data: bytes):
    loader = _VerifiedSourceLoader(modname, path, data)
    spec = importlib.util.spec_from_file_location(modname, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    # numba rebuilds cached functions' environments by importing the module by name
    sys.modules[modname] = module
    try:
        loader.exec_module(module)
    except BaseException:
        sys.modules.pop(modname, None)
        raise
    return module


def _generate(spec: ModelSpec) -> str:
    from .generate import generate_source  # sympy is imported only on a cache miss
    return generate_source(spec)


def _load(spec: ModelSpec, key: str, directory: str, generate=None):
    """Under the entry's lock: check or (re)build the generated file, then import it.

    ``generate(spec) -> source`` defaults to the model's compiled module; other generated
    modules of a model (its discontinuities) pass their own and share the cache's checks.
    """
    modname = cache.MODULE_PREFIX + key
    path = cache.entry_path(directory, key)
    compiled = False
    with cache.entry_lock(directory, key):
        status, data = cache.read_entry(directory, key)
        if status == "bad":
            warnings.warn(f"the compiled model {spec.name!r} in the cache ({path}) is damaged: {data}; "
                          "rebuilding it", CacheWarning, stacklevel=4)
            cache.discard_entry(directory, key)
        if status != "ok":
            notice(f"model:{key}", f"compiling model {spec.name!r} once (cached in {directory})")
            source = (generate or _generate)(spec)
            cache.purge_artifacts(directory, key)
            cache.write_entry(directory, key, source, model=spec.name, codegen=CODEGEN_VERSION,
                              pbsens=__version__)
            status, data = cache.read_entry(directory, key)
            if status != "ok":
                raise OSError(f"the file just written ({path}) reads back wrong: {data}")
            compiled = True
        try:
            module = _exec_module(path, modname, data)
        except PbsensError:
            raise
        except Exception as exc:
            # numba's machine code or Python's bytecode beside the file may be unreadable
            if not cache.purge_artifacts(directory, key):
                raise ModelError(f"compiling the model {spec.name!r} failed: {type(exc).__name__}: {exc}") \
                    from exc
            warnings.warn(f"the cached machine code of model {spec.name!r} ({directory}) could not be "
                          f"loaded ({type(exc).__name__}: {str(exc)[:200]}); recompiling it",
                          CacheWarning, stacklevel=4)
            try:
                module = _exec_module(path, modname, data)
            except PbsensError:
                raise
            except Exception as exc2:
                raise ModelError(f"compiling the model {spec.name!r} failed: {type(exc2).__name__}: "
                                 f"{exc2}") from exc2
    if compiled:
        cache.enforce_size_bound(directory, keep={key})
    return module


def compile_spec(spec: ModelSpec):
    """Return the generated module for ``spec``, from the disk cache when present.

    Several threads or processes loading the same cold model compile it once: the
    others wait on the entry's lock and then load the stored result.
    """
    return load_generated(spec, module_key(spec))


def load_generated(spec: ModelSpec, key: str, generate=None):
    """The generated module stored under ``key`` (built by ``generate(spec)`` on a miss).

    Every generated module goes through here: hashed, atomically written, locked per
    entry, repaired when damaged, with the fallback directory when the cache is not
    writable.
    """
    modname = cache.MODULE_PREFIX + key
    module = sys.modules.get(modname)
    if module is not None:
        return module
    with _lock:
        module = sys.modules.get(modname)
        if module is not None:
            return module
        directory = cache_dir()
        try:
            return _load(spec, key, directory, generate)
        except OSError as exc:   # e.g. the disk filled up, or the directory became read-only
            directory = cache.use_fallback(directory, exc.strerror or str(exc))
            try:
                return _load(spec, key, directory, generate)
            except OSError as exc2:
                raise ModelError(f"cannot store the compiled model {spec.name!r} in {directory!r} "
                                 f"({exc2}); set PBSENS_CACHE_DIR to a writable directory") from None
