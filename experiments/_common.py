"""Shared machinery of the paper's experiments (Section 8; METHOD.md section 9).

Every script in this folder exposes ``run(quick=False, out_dir=None, progress=None, **overrides) -> dict``
and writes ``<name>.json`` (+ ``.csv`` where tabular, + PNGs) into ``out_dir``.
This module holds what they share: the solver settings of the paper, model
loading (memoised, so that a run of several experiments in one process compiles
each model's kernels once), timing, the E_k and kappa_bar workflows, JSON/CSV
writing and figure helpers. Nothing here is part of the ``pbsens`` API.

Settings (fixed for all experiments)
------------------------------------
* State solve: ``solve_states`` with LSODA, rtol 1e-5, atol 1e-6 (the paper: CVODE
  BDF at the same tolerances).
* Reference for E_k: ``forward_sensitivities`` (BDF, rtol 1e-8, atol 1e-10) at the
  state grid; a second reference (Radau, same tolerances) measures the
  reference's own error ("reference floor").
* FS for timing and kappa_bar: BDF at the state solver's tolerances, rtol 1e-5,
  atol 1e-6 (as the paper's CVODES runs).
* BLAS: one thread while an experiment runs (see :func:`blas_threads`). On a
  shared 2-core machine OpenBLAS's default threading made each 11 x 11
  ``lu_solve`` inside the FS Newton iteration ~50x slower (8 ms instead of
  0.15 ms) under load; single-threaded BLAS is the reproducible setting.
"""
from __future__ import annotations

import contextlib
import csv
import ctypes
import functools
import gc
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

try:
    import pbsens
except ImportError:  # running a script from a checkout without installation
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import pbsens

EXPERIMENTS_DIR = Path(__file__).resolve().parent
RESULTS_DIR = EXPERIMENTS_DIR / "results"

#: The paper's state solver tolerances (CVODE BDF there, LSODA here).
STATE = dict(method="LSODA", rtol=1e-5, atol=1e-6)
#: Tight forward sensitivities: the reference of E_k.
REFERENCE = dict(method="BDF", rtol=1e-8, atol=1e-10)
#: A second tight reference with another solver: its distance to REFERENCE is the reference's error.
REFERENCE_CHECK = dict(method="Radau", rtol=1e-8, atol=1e-10)
#: FS at the paper's tolerances (timings, kappa_bar).
FS_LOOSE = dict(method="BDF", rtol=1e-5, atol=1e-6)

LABELS = {"pbsr": "PBSR", "exp": "Exp", "pbs": "PBS", "pbsr2": "PBSR2", "exp2": "Exp2", "fs": "FS"}
COLORS = {"pbsr": "tab:blue", "exp": "tab:orange", "pbs": "tab:cyan", "pbsr2": "tab:green",
          "exp2": "tab:purple", "fs": "black"}
BRANCH_COLORS = {"exp-stiff": "tab:red", "exp-equilibrium": "tab:olive"}
BRANCH_LABELS = {"exp-stiff": "PBSR used exp: too stiff", "exp-equilibrium": "PBSR used exp: equilibrium"}
DPI = 100


# --------------------------------------------------------------------------- environment
def forward_sensitivities(*args, **kwargs):
    """:func:`pbsens.forward.forward_sensitivities` (imported late: it may not be exported yet)."""
    fn = getattr(pbsens, "forward_sensitivities", None)
    if fn is None:
        from pbsens.forward import forward_sensitivities as fn
    return fn(*args, **kwargs)


def metrics():
    """The module with ``relative_error`` and ``kappa_bar``."""
    from pbsens import metrics as mod
    return mod


def _openblas_paths():
    """Paths of every OpenBLAS loaded in this process (numpy's, scipy's); empty if not Linux."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as fh:
            return sorted({line.split()[-1] for line in fh if "openblas" in line.lower() and "/" in line})
    except OSError:  # not Linux: leave BLAS alone
        return []


def _openblas_function(lib, name):
    """``lib``'s OpenBLAS function ``name`` under any of the symbol prefixes and suffixes in use, or None."""
    for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""), ("openblas", "64_"),
                           ("openblas", "")):
        fn = getattr(lib, f"{prefix}_{name}{suffix}", None)
        if fn is not None:
            return fn
    return None


def _openblas_libs():
    """``(get, set)`` ctypes functions of every OpenBLAS loaded in this process (numpy's, scipy's)."""
    out = []
    for path in _openblas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        get, set_ = _openblas_function(lib, "get_num_threads"), _openblas_function(lib, "set_num_threads")
        if get is not None and set_ is not None:
            get.restype = ctypes.c_int
            set_.argtypes = [ctypes.c_int]
            out.append((get, set_))
    return out


def _openblas_cores():
    """``{library file: kernel set}`` of every loaded OpenBLAS, e.g. ``"Haswell"`` (timings depend on it)."""
    import scipy.linalg  # noqa: F401  (load scipy's OpenBLAS too)
    out = {}
    for path in _openblas_paths():
        try:
            fn = _openblas_function(ctypes.CDLL(path), "get_corename")
        except OSError:
            continue
        if fn is not None:
            fn.restype = ctypes.c_char_p
            out[os.path.basename(path)] = fn().decode(errors="replace")
    return out


@contextlib.contextmanager
def blas_threads(n=1):
    """Limit every loaded OpenBLAS to ``n`` threads inside the block; restore afterwards."""
    import scipy.linalg  # noqa: F401  (load scipy's OpenBLAS too, so that it is limited as well)
    libs = _openblas_libs()
    before = [get() for get, _ in libs]
    for _, set_ in libs:
        set_(n)
    try:
        yield len(libs)
    finally:
        for (_, set_), k in zip(libs, before):
            set_(k)


def _cpu_model():
    """The CPU's model name from /proc/cpuinfo (Linux), else ``platform.processor()``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def environment():
    """Facts that matter for timings."""
    import numba
    import scipy
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "numba": numba.__version__, "pbsens": pbsens.__version__, "machine": platform.machine(),
            "cpu": _cpu_model(), "cpu_count": os.cpu_count(), "load_average_at_start": list(load) if load else None,
            "blas_threads": 1, "openblas_kernels": _openblas_cores()}


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


# --------------------------------------------------------------------------- running
def out_dir_for(out_dir, quick):
    """The output folder: ``out_dir``, else ``results/`` (full) or ``results/quick/`` (quick)."""
    if out_dir is None:
        out_dir = RESULTS_DIR / "quick" if quick else RESULTS_DIR
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


def show_progress(progress):
    if progress is None:
        return bool(getattr(sys.stderr, "isatty", lambda: False)())
    return bool(progress)


def bar(iterable, progress, desc, total=None):
    """A tqdm bar when ``progress`` (None: only on a terminal); the iterable itself otherwise."""
    if not show_progress(progress):
        return iterable
    from tqdm.auto import tqdm
    return tqdm(iterable, desc=desc, total=total, leave=False)


def experiment(name):
    """Decorator of a script's ``run``: one BLAS thread, output folder, wall time, JSON written."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(quick=False, out_dir=None, progress=None, **overrides):
            out = out_dir_for(out_dir, quick)
            t0 = time.perf_counter()
            env = environment()
            with blas_threads(1):
                res = fn(quick=bool(quick), out_dir=out, progress=progress, **overrides)
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


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def post_hoc(m, span, method, t_eval=None):
    """State solve (paper tolerances) + post-hoc sensitivities: what Table 2 times."""
    tr = pbsens.solve_states(m, span, t_eval=t_eval, **STATE)
    return pbsens.sensitivities(m, tr, method=method)


def fs_loose(m, span, t_eval=None):
    return forward_sensitivities(m, span, t_eval=t_eval, **FS_LOOSE)


def run_method(m, span, method):
    """One timed run of ``method`` including its state solve; returns ``(seconds, sens_seconds)``."""
    if method == "fs":
        r, sec = timed(fs_loose, m, span)
        return sec, r.timings.get("sensitivities", sec)
    r, sec = timed(post_hoc, m, span, method)
    return sec, r.timings.get("sensitivities", float("nan"))


def time_methods(m, span, methods, repeats, progress=None, desc="timing", warmup=1):
    """Median-ready timings: ``repeats`` rounds, methods interleaved in each round (load drifts hit all alike).

    Garbage is collected before each run and the collector is off during it, as
    ``timeit`` does: otherwise a collection triggered by one method's allocations
    (LSODA's Python loop allocates) is charged to whichever run it falls in.

    Returns ``{method: {"total": [...], "sensitivities": [...]}}`` (seconds).
    """
    def one(meth):
        gc.collect()
        gc.disable()
        try:
            return run_method(m, span, meth)
        finally:
            gc.enable()

    for _ in range(warmup):
        for meth in methods:
            one(meth)
    out = {meth: {"total": [], "sensitivities": []} for meth in methods}
    for _ in bar(range(repeats), progress, desc):
        for meth in methods:
            tot, sens = one(meth)
            out[meth]["total"].append(tot)
            out[meth]["sensitivities"].append(sens)
    return out


def summary(values):
    """Median, mean, quartiles, min, max, n of a list of numbers."""
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return {"n": 0}
    return {"median": float(np.median(a)), "mean": float(np.mean(a)), "q25": float(np.percentile(a, 25)),
            "q75": float(np.percentile(a, 75)), "min": float(a.min()), "max": float(a.max()), "n": int(a.size)}


# --------------------------------------------------------------------------- output
def _clean(obj):
    """JSON-ready copy: numpy -> Python, non-finite floats -> None."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _clean(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(_clean(obj), fh, indent=1, allow_nan=False)
        fh.write("\n")


def write_csv(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for row in rows:
            w.writerow([f"{v:.10g}" if isinstance(v, (float, np.floating)) else v for v in row])


def new_figure(nrows=1, ncols=1, figsize=(8.0, 4.2), **kw):
    """A matplotlib Figure without pyplot (safe headless, no global state)."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def save_figure(fig, path):
    fig.savefig(path, dpi=DPI)
    return Path(path).name


def branch_runs(grid, branch, kinds=("exp-stiff", "exp-equilibrium")):
    """Merged ``(t_start, t_end, kind)`` runs of consecutive intervals whose branch is in ``kinds``."""
    runs, i, n = [], 0, len(branch)
    while i < n:
        j = i + 1
        while j < n and branch[j] == branch[i]:
            j += 1
        if branch[i] in kinds:
            runs.append((float(grid[i]), float(grid[j]), str(branch[i])))
        i = j
    return runs


def shade(ax, grid, branch, tmin=None):
    """Shade where PBSR used the exponential step; return legend handles."""
    from matplotlib.patches import Patch
    seen = set()
    for a, b, kind in branch_runs(grid, branch):
        if tmin is not None:
            if b <= tmin:
                continue
            a = max(a, tmin)
        ax.axvspan(a, b, color=BRANCH_COLORS[kind], alpha=0.18, lw=0)
        seen.add(kind)
    return [Patch(color=BRANCH_COLORS[k], alpha=0.35, label=BRANCH_LABELS[k]) for k in BRANCH_COLORS if k in seen]


def positive(a, floor=1e-300):
    """Values for a log axis (zeros raised to ``floor``)."""
    return np.maximum(np.asarray(a, dtype=np.float64), floor)


def med(a):
    a = np.asarray(a, dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(np.median(a)) if a.size else float("nan")


def ratio(a, b):
    return float(a / b) if b and np.isfinite(a) and np.isfinite(b) and b != 0 else float("nan")


# --------------------------------------------------------------------------- E_k workflow (Figs 2, 3, 7)
POST_HOC = ("pbsr", "exp", "pbsr2", "exp2")


def error_experiment(model_name, span, *, quick, out_dir, progress, name, title, repeats=None,
                     methods=POST_HOC):
    """E_k of the post-hoc methods against tight FS on the state grid, plus their cost.

    Returns the JSON-ready dict (and writes ``<name>.csv`` and ``<name>.png``).
    """
    m = model(model_name)
    repeats = (3 if quick else 100) if repeats is None else int(repeats)
    tr = pbsens.solve_states(m, span, **STATE)
    res = {meth: pbsens.sensitivities(m, tr, method=meth) for meth in methods}
    ref, t_ref = timed(forward_sensitivities, m, span, t_eval=tr.t, **REFERENCE)
    ref2, t_ref2 = timed(forward_sensitivities, m, span, t_eval=tr.t, **REFERENCE_CHECK)
    rel = metrics().relative_error
    E = {meth: rel(r, ref) for meth, r in res.items()}
    E_floor = rel(ref2, ref)
    K = tr.t.size
    branch = np.asarray(res["pbsr"].branch)          # per interval k -> k+1
    b_at = np.concatenate([[""], branch])            # branch of the interval ending at point k
    pts = {"all": np.arange(1, K)}
    for kind in ("pbs", "exp-stiff", "exp-equilibrium"):
        pts[kind] = np.flatnonzero(b_at == kind)

    stats = {}
    for meth in methods:
        e = E[meth]
        stats[meth] = {"median": med(e[1:]), "max": float(np.max(e[1:])), "final": float(e[-1]),
                       "median_by_branch": {k: med(e[idx]) if idx.size else None for k, idx in pts.items()}}
    stats["reference_floor"] = {"median": med(E_floor[1:]), "max": float(np.max(E_floor[1:]))}
    on_pbs = pts["pbs"]
    exp_over_pbsr = {
        "median_ratio_all": ratio(stats["exp"]["median"], stats["pbsr"]["median"]),
        "median_ratio_on_pbs_intervals": (ratio(med(E["exp"][on_pbs]), med(E["pbsr"][on_pbs]))
                                          if on_pbs.size else None),
        "median_pointwise_ratio_on_pbs_intervals": (med(E["exp"][on_pbs] / np.maximum(E["pbsr"][on_pbs], 1e-300))
                                                    if on_pbs.size else None),
    }
    # cost: each method including its state solve, interleaved repeats
    timing = time_methods(m, span, list(methods), repeats, progress=progress, desc=f"{name} timing")
    cost = {meth: {"total": summary(v["total"]), "sensitivities": summary(v["sensitivities"])}
            for meth, v in timing.items()}
    issue5 = issue5_check(stats, cost)

    # CSV: one row per grid point
    header = ["k", "t"] + [f"E_{meth}" for meth in methods] + ["E_reference_floor", "pbsr_branch_of_interval_ending_here"]
    rows = [[k, tr.t[k]] + [E[meth][k] for meth in methods] + [E_floor[k], b_at[k]] for k in range(K)]
    write_csv(out_dir / f"{name}.csv", header, rows)

    # figure: E_k per step, markers where PBSR used the exponential step
    fig, ax = new_figure(figsize=(8.5, 4.4))
    ax = ax[0, 0]
    k = np.arange(1, K)
    for meth in methods:
        ax.semilogy(k, positive(E[meth][1:]), color=COLORS[meth], lw=1.2 if meth in ("pbsr", "exp") else 0.9,
                    ls="-" if meth in ("pbsr", "exp") else "--", label=LABELS[meth])
    ax.semilogy(k, positive(E_floor[1:], 1e-16), color="0.6", lw=0.8, ls=":",
                label="reference error (Radau vs BDF)")
    for kind, marker in (("exp-equilibrium", "o"), ("exp-stiff", "x")):
        idx = pts[kind]
        if idx.size:
            ax.plot(idx, positive(E["pbsr"][idx]), ls="none", marker=marker, ms=4, mew=1.0,
                    mfc="none" if marker == "o" else None, color=BRANCH_COLORS[kind], label=BRANCH_LABELS[kind])
    ax.set_xlabel("step k (state solver grid, LSODA rtol 1e-5, atol 1e-6)")
    ax.set_ylabel(r"$E_k = \|\hat S_k - S^{FS}_k\| / \|S^{FS}_k\|$")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="best")
    png = save_figure(fig, out_dir / f"{name}.png")

    return {
        "model": model_name, "t_span": list(span), "n_states": m.n_states, "n_params": m.n_params,
        "grid_points": int(K), "branch_counts": res["pbsr"].branch_counts(),
        "n_int_total_pbsr": int(np.sum(res["pbsr"].n_int)),
        "settings": {"state": STATE, "reference": REFERENCE, "reference_check": REFERENCE_CHECK,
                     "norm": "Frobenius (E_k); PBSR switch: 1-norm", "timing_repeats": repeats},
        "reference_seconds": {"BDF": t_ref, "Radau": t_ref2},
        "E": stats, "exp_over_pbsr": exp_over_pbsr, "cost_s": cost, "issue5": issue5,
        "files": [f"{name}.csv", png], "_ref": ref, "_tr": tr, "_E": E,
    }


def issue5_check(stats, cost):
    """Issue 5's targets for the second-order variant: E_k(pbsr)/E_k(pbsr2) >= 10, cost(pbsr2) <= 1.5 cost(exp)."""
    if "pbsr2" not in stats or "pbsr2" not in cost:
        return None
    acc = ratio(stats["pbsr"]["median"], stats["pbsr2"]["median"])
    c_sens = ratio(cost["pbsr2"]["sensitivities"]["median"], cost["exp"]["sensitivities"]["median"])
    c_tot = ratio(cost["pbsr2"]["total"]["median"], cost["exp"]["total"]["median"])
    out = {"accuracy_gain_pbsr_over_pbsr2": acc, "accuracy_target": 10.0, "accuracy_holds": bool(acc >= 10.0),
           "cost_ratio_pbsr2_over_exp_sensitivity_pass": c_sens,
           "cost_ratio_pbsr2_over_exp_with_state_solve": c_tot, "cost_target": 1.5,
           "cost_holds_sensitivity_pass": bool(c_sens <= 1.5), "cost_holds_with_state_solve": bool(c_tot <= 1.5)}
    if "exp2" in stats:
        out["accuracy_gain_exp_over_exp2"] = ratio(stats["exp"]["median"], stats["exp2"]["median"])
        out["accuracy_gain_pbsr_over_exp2"] = ratio(stats["pbsr"]["median"], stats["exp2"]["median"])
    return out


# --------------------------------------------------------------------------- kappa_bar workflow (Figs 4, 5, 8)
def kappa_experiment(model_name, span, *, quick, out_dir, progress, name, title, n_samples=None,
                     methods=("pbsr", "exp", "fs"), logx=False, late_from=None, seed=0, png_name=None):
    """kappa_bar(t) (8.5)-(8.6) of several methods on the state grid, same perturbations for all.

    ``late_from``: start of the "after the transient" window (default: second half of the span).
    """
    m = model(model_name)
    n_samples = (10 if quick else 100) if n_samples is None else int(n_samples)
    tr = pbsens.solve_states(m, span, **STATE)
    res = {}
    for meth in methods:
        res[meth] = fs_loose(m, span, t_eval=tr.t) if meth == "fs" else pbsens.sensitivities(m, tr, method=meth)
    kb, secs = {}, {}
    for meth in bar(methods, progress, f"{name} kappa_bar"):
        t0 = time.perf_counter()
        kb[meth] = metrics().kappa_bar(m, res[meth], n_samples=n_samples, seed=seed, progress=False)
        secs[meth] = time.perf_counter() - t0
    t = tr.t
    late_from = 0.5 * (span[0] + span[1]) if late_from is None else float(late_from)
    late = t >= late_from
    early = (t > span[0]) & ~late
    stats = {meth: {"median": med(kb[meth][1:]), "median_transient": med(kb[meth][early]),
                    "median_late": med(kb[meth][late]), "max": float(np.max(kb[meth])),
                    "final": float(kb[meth][-1])} for meth in methods}
    base = [meth for meth in methods if meth in ("pbsr", "exp", "fs")]
    late_meds = [stats[meth]["median_late"] for meth in base]
    spread = ratio(max(late_meds), min(late_meds)) if late_meds else float("nan")
    branch = np.asarray(res["pbsr"].branch) if "pbsr" in res else None
    frac_exp_time = None
    if branch is not None:
        h = np.diff(res["pbsr"].grid)
        frac_exp_time = float(np.sum(h[branch != "pbs"]) / (span[1] - span[0]))

    header = ["t"] + [f"kappa_bar_{meth}" for meth in methods] + ["pbsr_branch_of_interval_ending_here"]
    b_at = np.concatenate([[""], branch]) if branch is not None else np.full(t.size, "")
    rows = [[t[k]] + [kb[meth][k] for meth in methods] + [b_at[k]] for k in range(t.size)]
    write_csv(out_dir / f"{name}.csv", header, rows)

    fig, ax = new_figure(figsize=(8.5, 4.4))
    ax = ax[0, 0]
    patches = shade(ax, res["pbsr"].grid, branch, tmin=t[1] if logx else None) if branch is not None else []
    lines = []
    for meth in methods:
        (ln,) = ax.plot(t[1:], positive(kb[meth][1:], 1e-16), color=COLORS[meth],
                        lw=1.3 if meth in ("pbsr", "exp", "fs") else 0.9,
                        ls="-" if meth in ("pbsr", "exp", "fs") else "--", label=LABELS[meth])
        lines.append(ln)
    ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("t" + (" (log scale)" if logx else ""))
    ax.set_ylabel(r"$\bar\kappa(t)$" + f", N = {n_samples}")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(handles=lines + patches, fontsize=7, loc="best")
    png = save_figure(fig, out_dir / f"{png_name or name}.png")

    return {
        "model": model_name, "t_span": list(span), "grid_points": int(t.size), "n_samples": n_samples,
        "seed": seed, "branch_counts": res["pbsr"].branch_counts() if "pbsr" in res else None,
        "fraction_of_time_pbsr_used_exp": frac_exp_time,
        "late_window": [late_from, span[1]],
        "settings": {"state": STATE, "fs": FS_LOOSE,
                     "perturbed_solves": "pbsens.metrics.kappa_bar defaults (LSODA, rtol 1e-12, atol 1e-14)",
                     "h": [1e-5, 1e-4]},
        "kappa_bar": stats, "late_spread_max_over_min": spread, "kappa_seconds": secs,
        "files": [f"{name}.csv", png], "_kb": kb, "_t": t, "_res": res, "_tr": tr,
    }


def strip_private(d):
    """Drop the in-memory helpers (keys starting with ``_``) before writing JSON."""
    return {k: v for k, v in d.items() if not k.startswith("_")}


def main(run, doc):
    """Command line of a script: ``[--quick] [--out DIR] [--no-progress]``."""
    import argparse
    ap = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats/samples/dimensions")
    ap.add_argument("--out", default=None, help="output folder (default results/ or results/quick/)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = ap.parse_args()
    res = run(quick=args.quick, out_dir=args.out, progress=False if args.no_progress else None)
    print(f"{res['name']}: {res['wall_time_s']:.1f} s; wrote {', '.join(res['files'])} to "
          f"{out_dir_for(args.out, args.quick)}")
