"""Sympy -> Python source -> on-disk cache -> numba dispatchers.

The generated module is an ordinary ``.py`` file in the cache directory
(``$PBSENS_CACHE_DIR``, default ``$XDG_CACHE_HOME/pbsens`` or ``~/.cache/pbsens``),
named by a hash of the model's equations, the pbsens version and the code
generator's version. Its numba functions use ``cache=True``, so numba stores the
machine code next to it: a second process neither re-derives (sympy) nor
recompiles (LLVM); it imports the module and loads the machine code.

Generated functions (signatures in :mod:`pbsens.kernels.signatures`)::

    rhs_into(t, x, p, c, f)           jac_x_into(t, x, p, c, A)
    jac_p_into(t, x, p, c, B)         jacs_into(t, x, p, c, A, B)    # shared CSE
    x0_into(p, c, x0)                 dx0_dp_into(p, c, S0)
    out_into(t, x, p, c, y)           out_jac_x_into(t, x, p, c, Hx)   out_jac_p_into(t, x, p, c, Hp)
    rhs(t, x, p), jac_x(t, x, p), jac_p(t, x, p)    # allocating, for users
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading

from .. import __version__
from ..errors import ModelError
from .spec import ModelSpec

__all__ = ["cache_dir", "compile_spec", "module_key", "CODEGEN_VERSION"]

#: Bump when the generated source changes shape, to invalidate old caches.
CODEGEN_VERSION = "1"

_lock = threading.Lock()


def cache_dir() -> str:
    """Directory holding generated model modules (created on demand)."""
    path = os.environ.get("PBSENS_CACHE_DIR")
    if not path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "pbsens")
    return path


def module_key(spec: ModelSpec) -> str:
    text = "|".join([spec.equations_key(), __version__, CODEGEN_VERSION])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _import_file(path: str, modname: str):
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(spec)
    # numba rebuilds cached functions' environments by importing the module by name
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[modname]
        raise
    return module


def compile_spec(spec: ModelSpec):
    """Return the generated module for ``spec``, from the disk cache when present.

    Generated source is written atomically (temporary file + rename), so concurrent
    processes that compile the same model do not read half-written files.
    """
    key = module_key(spec)
    modname = f"pbsens_model_{key}"
    directory = cache_dir()
    path = os.path.join(directory, modname + ".py")
    with _lock:
        if not os.path.exists(path):
            from .generate import generate_source  # sympy is imported only on a cache miss
            source = generate_source(spec)
            try:
                os.makedirs(directory, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(source)
                os.replace(tmp, path)
            except OSError as exc:
                raise ModelError(f"cannot write the compiled model to the cache directory {directory!r} "
                                 f"({exc}); set PBSENS_CACHE_DIR to a writable directory") from None
        return _import_file(path, modname)
