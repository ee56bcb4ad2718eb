"""The tape backend: a model's programs from the disk cache, or emitted and stored.

A warm load reads one cache file (checked against its content hash, as the generated
modules of :mod:`pbsens.model.codegen` are) and decodes the tape: no sympy, no
numba compilation (the interpreter :mod:`pbsens.kernels.tape` is compiled once per
machine). A damaged file is rebuilt with a :class:`~pbsens.model.cache.CacheWarning`.

The stored file is a small Python module (``TAPE = "<base64 of the float64 tape>"``)
under the cache's usual header, so ``pbsens cache info/clear`` and the size bound
treat it like any compiled model.
"""
from __future__ import annotations

import base64
import hashlib
import threading
import warnings

import numpy as np

from .._version import __version__
from ..errors import ModelError
from . import cache
from ..kernels import tape_format as F
from .cache import CacheWarning, cache_dir
from .spec import ModelSpec

__all__ = ["TAPE_VERSION", "tape_key", "load_tape", "tape_functions", "tape_patterns", "BACKENDS",
           "choose_backend", "TAPE_MIN_TEXT", "TAPE_MIN_STATES"]

#: Bump when the emitted tape changes meaning (also see tape_format.FORMAT_VERSION).
TAPE_VERSION = "3"   # 3: negative integer powers as reciprocals (no ZeroDivisionError)
#: Under ``backend="auto"`` models with at least this many characters of expression text
#: (right-hand sides, definitions, outputs) or at least :data:`TAPE_MIN_STATES` states use
#: the tape: numba compiles generated code at about a millisecond per statement (a 50-species
#: mass-action network: ~55 s of CPU), the tape costs no compilation.
TAPE_MIN_TEXT = 20_000
TAPE_MIN_STATES = 40
BACKENDS = ("auto", "numba", "tape")

_lock = threading.Lock()
_loaded = {}


def choose_backend(spec: ModelSpec, backend=None) -> str:
    """``"numba"`` or ``"tape"`` for ``spec``: the argument, else ``$PBSENS_MODEL_BACKEND``, else by size."""
    import os
    where = "'backend'"
    if backend is None:
        backend = os.environ.get("PBSENS_MODEL_BACKEND", "").strip() or "auto"
        where = "PBSENS_MODEL_BACKEND"
    if backend not in BACKENDS:
        raise ModelError(f"{where} must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
    if backend != "auto":
        return backend
    large = len(spec.states) >= TAPE_MIN_STATES or expression_size(spec) >= TAPE_MIN_TEXT
    return "tape" if large else "numba"


def expression_size(spec: ModelSpec) -> int:
    """Characters of the model's expression text (right-hand sides, definitions, outputs)."""
    return (sum(len(v) for v in spec.odes.values()) + sum(len(d.expression) for d in spec.definitions)
            + sum(len(o.expression) for o in spec.outputs))


def tape_key(spec: ModelSpec) -> str:
    """The cache key of ``spec``'s tape: equations, pbsens version, tape version."""
    text = "|".join([spec.equations_key(), __version__, "tape", TAPE_VERSION, str(F.FORMAT_VERSION)])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _encode(tape: np.ndarray) -> str:
    b64 = base64.b64encode(np.ascontiguousarray(tape, dtype="<f8").tobytes()).decode("ascii")
    return f"# pbsens model tape (float64, little-endian, base64)\nTAPE = \"{b64}\"\n"


def _decode(data: bytes) -> np.ndarray:
    body = data.partition(b"\n")[2]
    start = body.index(b'TAPE = "') + 8
    stop = body.index(b'"', start)
    tape = np.frombuffer(base64.b64decode(body[start:stop], validate=True), dtype="<f8").astype(np.float64)
    if tape.size < F.HEADER or tape[0] != F.MAGIC or tape[1] != F.FORMAT_VERSION:
        raise ValueError("not a pbsens tape of this version")
    return tape


def _emit(spec):
    from .tape_emit import emit_tape   # sympy is imported only on a cache miss
    return emit_tape(spec)


def _load(spec, key, directory, emit):
    path = cache.entry_path(directory, key)
    built = False
    with cache.entry_lock(directory, key):
        status, data = cache.read_entry(directory, key)
        tape = None
        if status == "ok":
            try:
                tape = _decode(data)
            except (ValueError, TypeError) as exc:
                status, data = "bad", f"undecodable tape ({exc})"
        if status == "bad":
            warnings.warn(f"the model tape {spec.name!r} in the cache ({path}) is damaged: {data}; "
                          "rebuilding it", CacheWarning, stacklevel=4)
            cache.discard_entry(directory, key)
        if tape is None:
            tape = (emit or _emit)(spec)
            cache.write_entry(directory, key, _encode(tape), model=spec.name, backend="tape",
                              tape=TAPE_VERSION, pbsens=__version__)
            built = True
    if built:
        cache.enforce_size_bound(directory, keep={key})
    return tape


def load_tape(spec: ModelSpec, emit=None) -> np.ndarray:
    """The tape of ``spec`` (float64 array; shared by the models of this process: do not modify), from the disk cache when present."""
    key = tape_key(spec)
    with _lock:
        tape = _loaded.get(key)
        if tape is not None:
            return tape
        directory = cache_dir()
        try:
            tape = _load(spec, key, directory, emit)
        except OSError as exc:
            directory = cache.use_fallback(directory, exc.strerror or str(exc))
            try:
                tape = _load(spec, key, directory, emit)
            except OSError as exc2:
                raise ModelError(f"cannot store the tape of model {spec.name!r} in {directory!r} ({exc2}); "
                                 "set PBSENS_CACHE_DIR to a writable directory") from None
        _loaded[key] = tape
        return tape


def tape_functions():
    """The interpreter's functions under the model-function names (:class:`CompiledFunctions` fields)."""
    from ..kernels import tape as k
    return {"rhs_into": k.tape_rhs_into, "jac_x_into": k.tape_jac_x_into, "jac_p_into": k.tape_jac_p_into,
            "jacs_into": k.tape_jacs_into, "x0_into": k.tape_x0_into, "dx0_dp_into": k.tape_dx0_dp_into,
            "out_into": k.tape_out_into, "out_jac_x_into": k.tape_out_jac_x_into,
            "out_jac_p_into": k.tape_out_jac_p_into, "jac_x_data_into": k.tape_jac_x_data_into,
            "jac_p_data_into": k.tape_jac_p_data_into}


def tape_patterns(tape: np.ndarray):
    """CSR ``(indptr, indices)`` of ``A`` and of ``B`` (rows = states) from a tape."""
    nx, np_ = int(tape[2]), int(tape[3])

    def pattern(slot, ncols):
        h = F.HEADER + F.SLOT_WIDTH * slot
        start, n = int(tape[h + 2]), int(tape[h + 3])
        flat = tape[start:start + 2 * n:2].astype(np.int64)
        return csr_from_flat(flat, nx, ncols)

    return pattern(F.JX, nx), pattern(F.JP, np_)


def csr_from_flat(flat, nrows, ncols):
    """CSR ``(indptr, indices)`` of row-major sorted flat indices ``i * ncols + j``."""
    flat = np.asarray(flat, dtype=np.int64)
    rows = flat // max(ncols, 1)
    indptr = np.zeros(nrows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=nrows), out=indptr[1:])
    return indptr, (flat - rows * ncols).astype(np.int64)
