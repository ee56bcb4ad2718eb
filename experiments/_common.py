"""What every experiment of the paper's Section 8 shares (METHOD.md section 9): settings, models, the runner.

Every script in this folder maps its experiment names to runs in ``RUNS``
(``{name: run}``; a script for a family of figures holds several), each
``run(quick=False, out_dir=None, progress=None, **overrides) -> dict``, which
writes ``<name>.json`` (+ ``.csv`` where tabular, + PNGs) into ``out_dir`` (required:
:func:`pbsens.reproduce.run` chooses it, never the committed ``results/``). This
module holds the solver settings of the paper, model loading (memoised, so that a
run of several experiments in one process compiles each model's kernels once),
the :func:`experiment` decorator and the scripts' command line. Beside it, by
concept: ``_machine`` (BLAS threads, environment record), ``_timing``,
``_results_io`` (folders, JSON, CSV) and ``_plotting``. Nothing here is part of
the ``pbsens`` API.

Settings (fixed for all experiments)
------------------------------------
* State solve: ``solve_states`` with LSODA, rtol 1e-5, atol 1e-6 (the paper: CVODE
  BDF at the same tolerances).
* Reference for E_k: ``forward_sensitivities`` (BDF, rtol 1e-8, atol 1e-10) at the
  state grid; a second reference (Radau, same tolerances) measures the
  reference's own error ("reference floor").
* FS for timing and kappa_bar: BDF at the state solver's tolerances, rtol 1e-5,
  atol 1e-6 (as the paper's CVODES runs).
* BLAS: one thread while an experiment runs (``_machine.blas_threads``).
"""
from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

import numpy as np

try:
    import pbsens
except ImportError:  # running a script from a checkout without installation
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import pbsens

import _machine
from _results_io import out_dir_for, strip_private, write_json

#: The paper's state solver tolerances (CVODE BDF there, LSODA here).
STATE = dict(method="LSODA", rtol=1e-5, atol=1e-6)
#: Tight forward sensitivities: the reference of E_k.
REFERENCE = dict(method="BDF", rtol=1e-8, atol=1e-10)
#: A second tight reference with another solver: its distance to REFERENCE is the reference's error.
REFERENCE_CHECK = dict(method="Radau", rtol=1e-8, atol=1e-10)
#: FS at the paper's tolerances (timings, kappa_bar).
FS_LOOSE = dict(method="BDF", rtol=1e-5, atol=1e-6)


def forward_sensitivities(*args, **kwargs):
    """:func:`pbsens.sensitivity.forward.forward_sensitivities` (imported late: it may not be exported yet)."""
    fn = getattr(pbsens, "forward_sensitivities", None)
    if fn is None:
        from pbsens.sensitivity.forward import forward_sensitivities as fn
    return fn(*args, **kwargs)


def metrics():
    """The module with ``relative_error`` and ``kappa_bar``."""
    from pbsens.sensitivity import metrics as mod
    return mod


# --------------------------------------------------------------------------- models
_MODELS = {}


def model(name):
    """A built-in model, loaded once per process (its kernels are then compiled once)."""
    if name not in _MODELS:
        _MODELS[name] = pbsens.load_model(name)
    return _MODELS[name]


def random_linear(n, seed):
    """``pbsens.random_linear_model(n, seed)``, sharing compiled closures between draws.

    All random linear models run the same compiled functions (they differ only in
    the constants ``c = A.ravel()`` and in ``p``), but the per-model closures that
    :func:`pbsens.sensitivities` and ``forward_sensitivities`` memoise on the model
    object would be recompiled (seconds each) for each of the 200 draws of
    Figure 6. They are therefore copied from the first draw. If the memo layout
    changes this only costs compilation time, never correctness.
    """
    m = pbsens.random_linear_model(n, seed)
    first = _MODELS.get("_random_linear_first")
    if first is None:
        _MODELS["_random_linear_first"] = m
    else:
        for key in ("_kernels", "_pbsens_memo"):
            if key in first.__dict__ and key not in m.__dict__:
                m.__dict__[key] = first.__dict__[key]
    return m


# --------------------------------------------------------------------------- statistics
def med(a):
    """Median of the finite values (NaN if there are none)."""
    a = np.asarray(a, dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(np.median(a)) if a.size else float("nan")


def ratio(a, b):
    """``a / b``, NaN unless both are finite and ``b`` is non-zero."""
    return float(a / b) if b and np.isfinite(a) and np.isfinite(b) and b != 0 else float("nan")


# --------------------------------------------------------------------------- running
def experiment(name, paper=None):
    """Decorator of an experiment's ``run``: one BLAS thread, output folder, wall time, JSON written.

    ``paper``: what the paper claims (``{"figure", "claim"}``), added to the results as ``"paper"``.
    """
    def wrap(fn):
        @functools.wraps(fn)
        def run(quick=False, out_dir=None, progress=None, **overrides):
            out = out_dir_for(out_dir, quick)
            t0 = time.perf_counter()
            env = _machine.environment()
            with _machine.blas_threads(1):
                res = fn(quick=bool(quick), out_dir=out, progress=progress, **overrides)
            if paper is not None:
                res = {**res, "paper": paper}
            res = {"name": name, "quick": bool(quick), **strip_private(res)}
            res["wall_time_s"] = time.perf_counter() - t0
            res["environment"] = env
            if overrides:
                res["overrides"] = {k: v for k, v in overrides.items()}
            res.setdefault("files", []).insert(0, f"{name}.json")
            write_json(out / f"{name}.json", res)
            return res
        return run
    return wrap


def main(runs, doc):
    """Command line of a script: ``[NAME ...] [--quick] [--out DIR] [--force] [--quiet]``.

    ``runs`` is the script's ``RUNS``; NAME (several figures in one script) picks
    among them, default all. Runs through :func:`pbsens.reproduce.run` (same output
    folder rules, progress and report as ``pbsens reproduce``).
    """
    import argparse

    from pbsens import PbsensError
    from pbsens import reproduce
    ap = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    if len(runs) > 1:
        ap.add_argument("names", nargs="*", metavar="NAME",
                        help=f"experiments to run: {', '.join(runs)} (default all)")
    ap.add_argument("--quick", action="store_true", help="fewer repeats/samples/dimensions")
    ap.add_argument("--out", default=None, help=f"output folder (default ./{reproduce.DEFAULT_OUT}, or a new "
                                                "temporary folder with --quick)")
    ap.add_argument("--force", action="store_true", help="write into an output folder that already holds files")
    ap.add_argument("-q", "--quiet", "--no-progress", dest="quiet", action="store_true", help="no progress output")
    args = ap.parse_args()
    unknown = [n for n in getattr(args, "names", []) if n not in runs]
    if unknown:
        ap.error(f"unknown experiment(s) {', '.join(unknown)}; choose from {', '.join(runs)}")
    try:
        out = reproduce.run(getattr(args, "names", None) or list(runs), quick=args.quick, out_dir=args.out,
                            force=args.force, progress=False if args.quiet else None)
    except PbsensError as exc:
        ap.exit(1, f"error: {exc}\n")
    for name, res in out["results"].items():
        print(f"{name}: {res['wall_time_s']:.1f} s; wrote {', '.join(res['files'])}")
    print(f"results and REPORT.md in {out['out_dir']}")
