"""Built-in models (``data/models/*.json``), :func:`load_model` and :func:`random_linear_model`."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import ModelError, PbsensError
from .model import CompiledFunctions, Model
from .spec import ModelSpec, read_json_model

__all__ = ["load_model", "model_from_spec", "random_linear_model", "builtin_models", "models_dir"]


def models_dir() -> Path:
    """Directory of the built-in model files (inside the installed package, or ``data/models``)."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "_models", here.parent / "data" / "models"):
        if candidate.is_dir():
            return candidate
    raise PbsensError("the built-in model files are missing from this installation of pbsens")


def builtin_models() -> dict:
    """``{name: path}`` of the built-in models that define equations (not RandomLinear)."""
    out = {}
    for path in sorted(models_dir().glob("*.json")):
        with open(path, encoding="utf-8") as fh:
            if "odes" in json.load(fh):
                out[path.stem] = path
    return out


def model_from_spec(spec: ModelSpec, backend=None) -> Model:
    """Compile a :class:`ModelSpec` (from the on-disk cache when possible).

    ``backend``: ``"numba"`` (generated code compiled per model: fastest per call),
    ``"tape"`` (programs run by an interpreter compiled once per machine: no per-model
    compilation, for large models), or ``"auto"``/``None`` (the default): the
    environment variable ``PBSENS_MODEL_BACKEND`` if set, else ``"tape"`` for models
    with at least :data:`pbsens.model.tape.TAPE_MIN_STATES` (40) states or
    :data:`pbsens.model.tape.TAPE_MIN_TEXT` (20000) characters of expressions.
    """
    from .tape import choose_backend
    common = dict(output_names=spec.output_names, spec=spec, title=spec.title, meta=spec.meta)
    params = [q.value for q in spec.parameters]
    if choose_backend(spec, backend) == "tape":
        from .tape import load_tape, tape_functions, tape_patterns
        tape = load_tape(spec)
        return Model(spec.name, spec.state_names, spec.param_names, params,
                     CompiledFunctions(**tape_functions()), constants=tape, patterns=tape_patterns(tape),
                     backend="tape", **common)
    from .codegen import compile_spec
    from .tape import csr_from_flat
    module = compile_spec(spec)
    nx = len(spec.states)
    patterns = (csr_from_flat(module.JAC_X_NZ, nx, nx), csr_from_flat(module.JAC_P_NZ, nx, len(spec.parameters)))
    return Model(spec.name, spec.state_names, spec.param_names, params, CompiledFunctions.from_module(module),
                 user_fns=(module.rhs, module.jac_x, module.jac_p), patterns=patterns, backend="numba",
                 **common)


def load_model(name_or_path, backend=None, **options) -> Model:
    """Load a built-in model by name, or a model file.

    Parameters
    ----------
    name_or_path : str or path-like
        ``"PKA"``, ``"CaMKII"``, ``"Chua"``; a ``.json`` model file (format in
        :mod:`pbsens.model.spec`); an SBML file (``.xml``/``.sbml``, needs the
        ``sbml`` extra); or a folder of SBtab ``.tsv`` tables.
    backend : {"auto", "numba", "tape"}, optional
        How the model is compiled (see :func:`model_from_spec`); default: automatic
        by model size, or ``$PBSENS_MODEL_BACKEND``.
    **options
        Passed to the importer: ``parameters=[...]`` (SBML: which parameters are
        sensitivity parameters), ``experiment="name"`` (SBtab: which condition).

    Returns
    -------
    Model
    """
    if isinstance(name_or_path, ModelSpec):
        return model_from_spec(name_or_path, backend)
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise PbsensError(f"'name_or_path' must be a model name or a path, got {type(name_or_path).__name__}")
    builtins = builtin_models()
    key = os.fspath(name_or_path)
    if key in builtins:
        spec = read_json_model(builtins[key])
        _no_options(options, key)
        return model_from_spec(spec, backend)
    path = Path(key)
    if not path.exists():
        raise ModelError(f"'name_or_path': {key!r} is neither a built-in model "
                         f"({', '.join(builtins)}) nor an existing file or folder")
    suffix = path.suffix.lower()
    if path.is_dir():
        from .sbtab import read_sbtab
        spec = read_sbtab(path, **options)
    elif suffix == ".json":
        _no_options(options, key)
        spec = read_json_model(path)
    elif suffix in (".xml", ".sbml"):
        from .sbml import read_sbml
        spec = read_sbml(path, **options)
    else:
        raise ModelError(f"'name_or_path': cannot tell the format of {key!r}; use .json, .xml/.sbml "
                         "or a folder of SBtab tables")
    return model_from_spec(spec, backend)


def _no_options(options, what):
    if options:
        raise PbsensError(f"options {sorted(options)} do not apply to the JSON model {what!r}")


def random_linear_model(n, seed=0) -> Model:
    """The paper's random linear system of dimension ``n`` (Section 8, Figure 6).

    ``x' = A x + p**2 + 1``, ``A = -B^T B`` with ``B`` (n x n) and ``p`` (n) uniform on
    [0, 1] drawn from ``numpy.random.default_rng(seed)``; ``x0 = ones(n)``. The
    Jacobians are ``A`` and ``2 diag(p)``.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise PbsensError(f"'n' must be a positive integer, got {n!r}")
    need = 4 * 8 * int(n) ** 2          # B, A, A's copy in the model, one n x n sensitivity
    avail = _available_memory()
    if need > avail:
        raise PbsensError(f"'n' = {n} is too large: a random linear model of that size needs about "
                          f"{need / 2**30:.3g} GiB of n x n matrices, and {avail / 2**30:.3g} GiB are available")
    from . import linear  # compiled functions load on first use, not at import
    A, p = linear.draw(int(n), seed)
    fns = CompiledFunctions.from_module(linear)
    m = Model(f"RandomLinear{n}", [f"x{i + 1}" for i in range(n)], [f"p{i + 1}" for i in range(n)], p, fns,
              constants=A.ravel(), title=f"Random linear system, n = {n}, seed = {seed}",
              meta={"seed": seed, "A": A}, patterns=linear.patterns(int(n)), backend="generic")
    return m


def _available_memory() -> int:
    """Bytes of memory available to allocate now (MemAvailable; physical memory if unknown)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2 ** 62
