"""Run AMICI beside pbsens: find AMICI's Python, start ``amici_side.py`` in it, read its JSON.

AMICI 1.x needs Python >= 3.12 and a C++ tool chain, so the benchmarks do not
import it: they start ``benchmarks/amici_side.py`` with the Python of a separate
environment where AMICI is installed (docs/PERFORMANCE.md, "AMICI side by side").
That Python is ``--amici-python PATH`` or ``$PBSENS_AMICI_PYTHON``; with neither,
AMICI counts as not installed, a line says so, and the benchmark runs without it.

    from amici_bridge import add_amici_argument, run_amici, decode_array
    res = run_amici(["petab", "problem.yaml", "--repeats", "10"], amici_python=args.amici_python)
    if res is not None: ...
    fit = run_pypesto(["fit", "problem.yaml", "--starts", "starts.npy", "--max-iter", "1000"])  # pypesto_side.py
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SIDE_SCRIPT = HERE / "amici_side.py"
PYPESTO_SCRIPT = HERE / "pypesto_side.py"      # pyPESTO + AMICI fits (modes fit, evaluate)
ENV_VAR = "PBSENS_AMICI_PYTHON"

__all__ = ["ENV_VAR", "SIDE_SCRIPT", "PYPESTO_SCRIPT", "add_amici_argument", "amici_python", "decode_array",
           "parse_result", "run_amici", "run_pypesto", "strip_arrays"]

#: the ``mode`` a side script's JSON names
MODES = ("petab", "sbml", "petab-fs", "pypesto-fit", "pypesto-evaluate")


def add_amici_argument(parser):
    """Add ``--amici-python`` to a benchmark's argument parser."""
    parser.add_argument("--amici-python", default=None,
                        help=f"Python of an environment with AMICI installed (default: ${ENV_VAR}; "
                             "without either, the AMICI comparison is skipped)")
    return parser


def amici_python(explicit=None, environ=None):
    """The AMICI Python to use, or ``None`` (not configured: AMICI counts as not installed).

    ``explicit`` (the ``--amici-python`` option) wins over ``$PBSENS_AMICI_PYTHON``.
    A configured path that is not an executable file raises ``FileNotFoundError``
    naming it and where it came from: a typo should not silently drop the comparison.
    """
    environ = os.environ if environ is None else environ
    if explicit:
        path, where = explicit, "--amici-python"
    elif environ.get(ENV_VAR):
        path, where = environ[ENV_VAR], f"${ENV_VAR}"
    else:
        return None
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise FileNotFoundError(f"{where}: {path!r} is not an executable Python")
    return path


def decode_array(obj):
    """The numpy array of an ``{"shape", "dtype", "base64"}`` object from ``amici_side.py``."""
    try:
        shape, dtype, data = obj["shape"], obj["dtype"], obj["base64"]
    except (TypeError, KeyError):
        raise ValueError(f"not an encoded array (needs shape, dtype, base64): {str(obj)[:80]!r}") from None
    a = np.frombuffer(base64.b64decode(data), dtype=np.dtype(dtype))
    if a.size != int(np.prod(shape, dtype=np.int64)):
        raise ValueError(f"encoded array has {a.size} values, shape {shape} needs {int(np.prod(shape))}")
    return a.reshape(shape).astype(np.float64)


def _decode_tree(v):
    if isinstance(v, dict):
        if set(v) == {"shape", "dtype", "base64"}:
            return decode_array(v)
        return {k: _decode_tree(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_decode_tree(x) for x in v]
    if isinstance(v, str) and v in ("nan", "inf", "-inf"):
        return float(v)
    return v


def parse_result(text):
    """The dict of an ``amici_side.py`` JSON text, encoded arrays decoded to numpy, NaN/inf to floats."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"AMICI side wrote no valid JSON: {exc}") from None
    if not isinstance(obj, dict) or obj.get("mode") not in MODES:
        raise ValueError(f"AMICI side JSON has no 'mode' of {', '.join(map(repr, MODES))}")
    return _decode_tree(obj)


def strip_arrays(obj):
    """A copy of a raw (undecoded) result without the encoded arrays: small enough to keep in git."""
    if isinstance(obj, dict):
        if set(obj) == {"shape", "dtype", "base64"}:
            return {"shape": obj["shape"], "dtype": obj["dtype"], "omitted": True}
        return {k: strip_arrays(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [strip_arrays(v) for v in obj]
    return obj


def run_amici(args, amici_python_path=None, *, timeout=3600, raw_out=None, quiet=False, script=None):
    """Run ``amici_side.py ARGS`` with AMICI's Python; its parsed JSON, or ``None`` if AMICI is not set up.

    Parameters
    ----------
    args : list of str
        Arguments of ``amici_side.py`` (mode and its options), without ``--out``.
    amici_python_path : str, optional
        The ``--amici-python`` option; default ``$PBSENS_AMICI_PYTHON``.
    raw_out : path, optional
        Also save the raw JSON there, encoded arrays left out (:func:`strip_arrays`).
    quiet : bool
        Do not print the "not installed" line.
    script : path, optional
        Another side script taking ``--out`` (default ``amici_side.py``; :func:`run_pypesto`).

    Returns
    -------
    dict or None
        ``None`` when no AMICI Python is configured (a line says so). A failing
        subprocess raises ``RuntimeError`` with the end of its error output.
    """
    py = amici_python(amici_python_path)
    if py is None:
        if not quiet:
            print(f"AMICI: not installed (no --amici-python and no ${ENV_VAR}); skipped", flush=True)
        return None
    with tempfile.TemporaryDirectory(prefix="pbsens_amici_") as tmp:
        out = Path(tmp) / "amici.json"
        cmd = [py, str(SIDE_SCRIPT if script is None else script), *[str(a) for a in args], "--out", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONNOUSERSITE": "1"})
        if proc.returncode != 0 or not out.exists():
            tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-15:])
            raise RuntimeError(f"AMICI side failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
        text = out.read_text()
    if raw_out is not None:
        Path(raw_out).parent.mkdir(parents=True, exist_ok=True)
        Path(raw_out).write_text(json.dumps(strip_arrays(json.loads(text)), indent=1) + "\n")
    return parse_result(text)


def run_pypesto(args, amici_python_path=None, *, timeout=24 * 3600, raw_out=None, quiet=False):
    """Run ``pypesto_side.py ARGS`` (``fit ...`` or ``evaluate ...``, without ``--out``) with AMICI's Python.

    The same as :func:`run_amici` for the pyPESTO side script: its parsed JSON (``"inf"``/``"nan"``
    strings back to floats), or ``None`` when no AMICI Python is configured.
    """
    return run_amici(args, amici_python_path, timeout=timeout, raw_out=raw_out, quiet=quiet, script=PYPESTO_SCRIPT)


def reorder(S, ids_from, ids_to, axis, what):
    """``S`` with its ``axis`` permuted from the order ``ids_from`` to ``ids_to`` (mapped by id)."""
    missing = [i for i in ids_to if i not in ids_from]
    if missing:
        raise ValueError(f"AMICI's model has no {what} {missing[:5]} (it has {list(ids_from)[:8]}...)")
    idx = [list(ids_from).index(i) for i in ids_to]
    return np.take(S, idx, axis=axis)


if __name__ == "__main__":      # a quick check of the set-up: python benchmarks/amici_bridge.py [--amici-python P]
    import argparse
    ap = add_amici_argument(argparse.ArgumentParser(description="check that the AMICI side runs"))
    a = ap.parse_args()
    py = amici_python(a.amici_python)
    if py is None:
        print(f"AMICI: not installed (no --amici-python and no ${ENV_VAR})")
        sys.exit(1)
    r = subprocess.run([py, "-c", "import amici; print(amici.__version__)"], capture_output=True, text=True)
    print(f"AMICI {r.stdout.strip() or 'not importable: ' + r.stderr.strip()[-200:]} in {py}")
    sys.exit(r.returncode)
