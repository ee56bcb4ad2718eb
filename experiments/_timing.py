"""Timing of the methods: one run (state solve included), interleaved repeats, summary statistics."""
from __future__ import annotations

import gc
import time

import numpy as np

import _common as C
from _results_io import bar


def timed(fn, *args, **kwargs):
    """``(fn(*args, **kwargs), seconds)``."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def post_hoc(m, span, method, t_eval=None):
    """State solve (paper tolerances) + post-hoc sensitivities: what Table 2 times."""
    tr = C.pbsens.solve_states(m, span, t_eval=t_eval, **C.STATE)
    return C.pbsens.sensitivities(m, tr, method=method)


def fs_loose(m, span, t_eval=None):
    """Forward sensitivities at the paper's tolerances (:data:`_common.FS_LOOSE`)."""
    return C.forward_sensitivities(m, span, t_eval=t_eval, **C.FS_LOOSE)


def run_once(m, span, method):
    """One timed run of ``method`` (``"fs"`` or a post-hoc method) including its state solve: ``(result, seconds)``."""
    return timed(fs_loose, m, span) if method == "fs" else timed(post_hoc, m, span, method)


def run_method(m, span, method):
    """One timed run of ``method`` including its state solve; returns ``(seconds, sens_seconds)``."""
    r, sec = run_once(m, span, method)
    return sec, r.timings.get("sensitivities", sec if method == "fs" else float("nan"))


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
