"""pbsens on every problem of the PEtab benchmark collection: load, llh, gradient, status.

The collection is github.com/Benchmarking-Initiative/Benchmark-Models-PEtab at commit
``COLLECTION_COMMIT``; ``--collection DIR`` (default ``$PBSENS_PETAB_COLLECTION``) is its
``Benchmark-Models`` folder. Every problem runs in its own subprocess with a timeout
(``--timeout``, default 600 s) and a fresh, empty ``PBSENS_CACHE_DIR``; the process records,
and writes to ``--out-dir`` (default ``benchmarks/results/collection/<problem>.json``) after
every stage, so that a timed-out problem keeps what it got:

* ``load``: ``pbsens.petab.load(yaml)`` cold (first load in the process, on the empty cache:
  tables, checks, model derivation and compilation; pbsens and petab already imported) and
  warm (a second load in the same process, from the filled cache), wall seconds;
* ``llh`` at the nominal parameters with ``evaluate(sensitivities=False)`` at the defaults
  (Rodas5P, rtol 1e-8, atol 1e-10) and at the finite-difference tolerances (``FD``: Rodas5P,
  rtol 1e-12, atol 1e-14), against three references where they exist: AMICI 1.1's llh on the
  same files in the same run (``benchmarks/amici_side.py petab --modes llh``, when
  ``--amici-python`` or ``$PBSENS_AMICI_PYTHON`` is set; at ``collection_amici.AMICI_TIGHT`` = rtol 1e-12, atol
  1e-16 as in AMICI's own benchmark tests, and at AMICI's defaults), the published reference values of
  AMICI's benchmark tests (``AMICI_REFERENCE``) and the llh of the collection's own simulation
  table (``simulatedData_*.tsv``, by ``petab.v1.calculate.calculate_llh``);
* the gradient with ``exp2`` and ``fs`` (default options) at ``theta = x_nominal + 0.1`` (on the
  parameter scale; at the optimum the gradient is a sum of cancelling terms; when a solver fails
  there or at its FD neighbours, e.g. a blow-up, at the next of ``--shifts``, default
  ``0.1 -0.1``, with each failure in ``gradient.failed_at``) against central
  finite differences of the llh (step ``STEP`` = 1e-4 on the parameter scale, ``FD`` options),
  relative error in max norm (when a method misses its tolerance, the differences are repeated at
  step ``STEP / 2`` and the reference is their Richardson extrapolation, which removes the O(h^2)
  truncation error of the first; ``error_vs_fd_step`` keeps the error against the first), and the
  median wall time of each gradient (``--repeats``, after the first call). ``fs`` runs with
  ``--fs-solver``, ``--fs-rtol``, ``--fs-atol``, ``--fs-max-steps`` when given (the record keeps them in ``gradient.fs.options`` and the
  status detail names them; Lang's forward sensitivities do not get through at the defaults).
  The gradient is skipped (and the record says why) when the llh already fails, when one llh evaluation takes more than
  ``--skip-gradient-above`` seconds (default 60), or when not even one coordinate's two FD
  evaluations fit in what is left of the timeout.
* a spot check (``gradient.spot_check``, :mod:`collection_fd`) when the ``2 d`` FD evaluations do
  not fit in what is left of the timeout (or ``--fd-coordinates K`` asks for one): central FD on
  ``K`` coordinates only (default up to ``AUTO_SPOT`` = 6, as many as fit), the ``ceil(K / 2)`` of
  largest ``|fs gradient|`` and the rest drawn by a seeded generator (``--fd-seed``, default 0);
  the errors are the max-norm relative errors on those coordinates; the record names them and keeps
  the FD values.

Status (:func:`classify`): ``pass`` (llh within ``max(1e-3, 1e-6 |ref|)`` of the reference,
gradient errors within 1e-2 (exp2) and 1e-4 (fs)); ``pass (gradient spot check)`` (the same, with
the gradient checked on ``K`` of the ``d`` coordinates; the detail says how many and why);
``pass (llh only)`` (gradient skipped);
``refused`` (a named :class:`pbsens.errors.PbsensError` other than a solver failure, with its
message); ``wrong`` (llh or gradient outside the tolerances, spot checks included); ``error`` (any
other exception, a solver failure at every shift, a crash; with ``--exp2-when-fs-fails``, fs's
solver failure at a shift where exp2 solved: exp2 is then checked alone, the spot check's
coordinates taken by largest ``|exp2 gradient|``, and the detail gives its error); ``timeout``; ``unavailable`` (files
missing from the snapshot).
The reference for the status is AMICI 1.1's llh at ``AMICI_TIGHT`` when AMICI ran, else the
published value, else the simulation table's; every reference that disagrees with pbsens is
listed with its number (:func:`published_disagreement`).

Run (from the repository root; one problem at a time)::

    nice -n 10 python -m benchmarks.collection --collection /path/Benchmark-Models \\
        [--problems Boehm_JProteomeRes2014 ...] [--timeout 600] [--skip-gradient-above 60] \\
        [--fd-coordinates K] [--fd-seed 0] [--shifts 0.1 -0.1] [--amici-python PATH] [--table docs/COVERAGE.md]

``--table`` rewrites docs/COVERAGE.md's collection section from all JSON files in
``--out-dir`` (``--table-only`` does only that).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

try:  # run as a script (the worker is): the script's folder is on sys.path
    from collection_fd import (AUTO_SPOT, SPOT_SEED, central_differences, fd_budget_ok, fd_plan, rel_err_max,
                               richardson, spot_coordinates)
    from collection_files import find_yaml, missing_files, problem_size, simulation_table_llh
    from collection_amici import amici_llh
except ImportError:  # python -m benchmarks.collection, or imported from the repository root
    from benchmarks.collection_fd import (AUTO_SPOT, SPOT_SEED, central_differences, fd_budget_ok, fd_plan,
                                          rel_err_max, richardson, spot_coordinates)
    from benchmarks.collection_files import find_yaml, missing_files, problem_size, simulation_table_llh
    from benchmarks.collection_amici import amici_llh

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COLLECTION_COMMIT = "4d2085084b289f6215a95475b1ee639fd7d42283"
OUT_DIR = HERE / "results" / "collection"
FD = dict(solver="rodas5p", rtol=1e-12, atol=1e-14)
STEP = 1e-4
SHIFT = 0.1
GRAD_TOL = {"exp2": 1e-2, "fs": 1e-4}
#: fs's evaluate() options a run may set (``--fs-<name>``)
FS_OPTIONS = ("solver", "rtol", "atol", "max_steps")
STATUSES = ("pass", "pass (gradient spot check)", "pass (llh only)", "refused", "wrong", "error", "timeout", "unavailable")

#: Reference llh at the nominal parameters from AMICI's benchmark tests:
#: github.com/AMICI-dev/AMICI, tests/benchmark_models/benchmark_models.yaml (read at commit
#: 3aebbe84d997026702c606c50da7942fd89cadb1; file last changed in 71da5627a8a3e6728121a0aa89e2a7d2182d2442).
#: The notes there say where the collection's older reference values differ (factor 1/2, log10 terms).
AMICI_REFERENCE = {
    "Bachmann_MSB2011": 418.40573341425295,
    "Beer_MolBioSystems2014": 58622.9145631413,
    "Boehm_JProteomeRes2014": -138.22199693517703,
    "Borghans_BiophysChem1997": 83.3237191357272,
    "Brannmark_JBC2010": -141.889113770537,
    "Bruno_JExpBot2016": 46.688176988431806,
    "Chen_MSB2009": -115700.1192629893,
    "Crauste_CellSystems2017": -190.96521897435176,
    "Elowitz_Nature2000": 63.20279991419332,
    "Fiedler_BMCSystBiol2016": 58.58390161681,
    "Fujita_SciSignal2010": 53.08377736998929,
    "Isensee_JCB2018": -3949.375966548649,
    "Lucarelli_CellSystems2018": -1681.6059879426584,
    "Schwen_PONE2014": -943.9992988598723,
    "Sneyd_PNAS2002": 319.79177818768756,
    "Smith_BMCSystBiol2013": -888198.436541014,
    "Weber_BMC2015": -296.2017922646865,
    "Zheng_PNAS2012": 278.33353271001477,
}
AMICI_REFERENCE_SOURCE = ("AMICI tests/benchmark_models/benchmark_models.yaml "
                          "(github.com/AMICI-dev/AMICI @ 3aebbe84d997026702c606c50da7942fd89cadb1)")


# --------------------------------------------------------------------------- pure functions

def llh_tolerance(ref):
    """Allowed ``|llh - ref|``: ``max(1e-3, 1e-6 |ref|)``."""
    return max(1e-3, 1e-6 * abs(float(ref)))


def llh_matches(llh, ref):
    """Whether ``llh`` agrees with ``ref`` within :func:`llh_tolerance` (both finite)."""
    if llh is None or ref is None or not (math.isfinite(llh) and math.isfinite(ref)):
        return False
    return abs(llh - ref) <= llh_tolerance(ref)






def choose_reference(refs):
    """``(label, value)`` of the reference the status uses: AMICI 1.1 (this run) at tight tolerances,
    else at its defaults, else the published value, else the collection's simulation table;
    ``(None, None)`` when there is none."""
    for label in ("amici", "amici_default_tolerances", "published", "simulation_table"):
        v = refs.get(label)
        if v is not None and math.isfinite(v):
            return label, float(v)
    return None, None


def classify(rec):
    """``(status, detail)`` of one problem's record (the dict the worker writes).

    Keys read: ``unavailable`` (str), ``timeout`` (seconds), ``exception`` ({"kind": "refused" |
    "error", "type", "message", "stage"}), ``llh`` ({"value"}), ``references``, ``gradient``
    ({"skipped": reason} or {"exp2": {"error"}, "fs": {"error"}}).
    """
    if rec.get("unavailable"):
        return "unavailable", rec["unavailable"]
    exc = rec.get("exception")
    if exc:
        what = f"{exc.get('type')} in {exc.get('stage')}: {exc.get('message', '')}"
        return ("refused" if exc.get("kind") == "refused" else "error"), what
    llh = (rec.get("llh") or {}).get("value")
    if rec.get("timeout") and llh is None:
        return "timeout", f"no llh within {rec['timeout']:g} s (stage {rec.get('stage', '?')})"
    label, ref = choose_reference(rec.get("references") or {})
    if llh is None or not math.isfinite(llh):
        return "wrong", f"llh is {llh}"
    if ref is not None and not llh_matches(llh, ref):
        return "wrong", f"llh {llh:.10g} vs {label} {ref:.10g} (|diff| {abs(llh - ref):.3g} > {llh_tolerance(ref):.3g})"
    note = "" if ref is not None else "no llh reference; "
    grad = rec.get("gradient") or {}
    if rec.get("timeout") and not any((grad.get(m) or {}).get("error") is not None for m in GRAD_TOL):
        # the gradients were computed (or started) but not checked against FD in time
        return "timeout", f"{note}llh ok; gradient not checked within {rec['timeout']:g} s (stage {rec.get('stage', '?')})"
    if grad.get("skipped") or not grad:
        return "pass (llh only)", note + "gradient skipped: " + str(grad.get("skipped", "not computed"))
    failed = [m for m in GRAD_TOL if (grad.get(m) or {}).get("failed")]
    bad = [f"{m} error {grad[m]['error']:.2e} > {tol:g}" for m, tol in GRAD_TOL.items()
           if m in grad and m not in failed and not (grad[m].get("error") is not None and grad[m]["error"] <= tol)]
    missing = [m for m in GRAD_TOL if m not in grad]
    if grad.get("shift") is not None and grad["shift"] != SHIFT:
        note += f"gradient at {grad.get('theta', grad['shift'])}; "
    if bad:
        return "wrong", note + "; ".join(bad)
    if failed:          # --exp2-when-fs-fails: fs failed where exp2 solved; exp2's check is reported first
        spot = grad.get("spot_check")
        ok = [f"{m} error {grad[m]['error']:.2e} <= {tol:g}" for m, tol in GRAD_TOL.items() if m not in failed]
        return "error", note + ", ".join(ok) + (f" on {spot['k']} of {spot['of']} coordinates" if spot else "") + \
            "; " + "; ".join(f"{m} failed: {grad[m]['failed']}" for m in failed)
    if missing:
        return "pass (llh only)", note + f"gradient of {', '.join(missing)} missing"
    for m in GRAD_TOL:
        if (grad.get(m) or {}).get("options") and not (grad.get(m) or {}).get("failed"):
            note += f"{m} at " + ", ".join(f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}"
                                           for k, v in grad[m]["options"].items()) + "; "
    spot = grad.get("spot_check")
    if spot:
        return "pass (gradient spot check)", note + (
            f"gradient checked on {spot['k']} of {spot['of']} coordinates ({len(spot['largest_abs_fs_gradient'])} "
            f"of largest |{spot.get('largest_abs_gradient_of', 'fs')} gradient|, {len(spot['random'])} seeded random): "
            f"{spot['reason']}")
    return "pass", note.rstrip("; ")


def published_disagreement(rec):
    """A sentence when a reference disagrees (beyond :func:`llh_tolerance`) with pbsens's llh, with
    every number, else ``None``. The reference the status uses is AMICI 1.1 at tight tolerances."""
    refs = rec.get("references") or {}
    llh = (rec.get("llh") or {}).get("value")
    if llh is None:
        return None
    names = (("amici", "AMICI 1.1 (rtol 1e-12)"), ("amici_default_tolerances", "AMICI 1.1 at its defaults (rtol 1e-8)"),
             ("published", "published (AMICI's test references)"), ("simulation_table", "collection simulation table"))
    off = [(lab, refs[k]) for k, lab in names if refs.get(k) is not None and not llh_matches(llh, refs[k])]
    if not off:
        return None
    agree = [lab for k, lab in names if refs.get(k) is not None and llh_matches(llh, refs[k])]
    tight = (rec.get("llh") or {}).get("value_fd_options")
    return (f"pbsens {llh:.10g}" + (f" (rtol 1e-12: {tight:.10g})" if tight is not None else "")
            + (f", agreeing with {', '.join(agree)}" if agree else "") + "; disagreeing: "
            + ", ".join(f"{lab} {v:.10g}" for lab, v in off))




def _fmt(v, spec=".4g", none=""):
    return none if v is None else format(v, spec)


def markdown_table(records):
    """The Markdown table of all records (sorted by problem id)."""
    head = ("| problem | status | load cold s | load warm s | llh pbsens | llh AMICI 1.1 | AMICI rtol 1e-8 | published llh "
            "| sim. table llh | llh s | exp2 grad err | fs grad err | exp2 grad s | fs grad s | detail |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for rec in sorted(records, key=lambda r: r["problem"]):
        status, detail = classify(rec)
        refs = rec.get("references") or {}
        load, llh, grad = rec.get("load") or {}, rec.get("llh") or {}, rec.get("gradient") or {}
        g = {m: grad.get(m) or {} for m in GRAD_TOL}
        detail = re.sub(r"'/[^']*/([^'/]+)'", r"'\1'", detail).replace("|", "/").replace("\n", " ")
        if len(detail) > 240:
            detail = detail[:237] + "..."
        lines.append("| " + " | ".join([
            rec["problem"], status, _fmt(load.get("cold_s"), ".2f"), _fmt(load.get("warm_s"), ".2f"),
            _fmt(llh.get("value"), ".10g"), _fmt(refs.get("amici"), ".10g"),
            _fmt(refs.get("amici_default_tolerances"), ".10g"), _fmt(refs.get("published"), ".10g"),
            _fmt(refs.get("simulation_table"), ".10g"), _fmt(llh.get("seconds"), ".3f"),
            _fmt(g["exp2"].get("error"), ".1e"), _fmt(g["fs"].get("error"), ".1e"),
            _fmt(g["exp2"].get("median_s"), ".3f"), _fmt(g["fs"].get("median_s"), ".3f"), detail]) + " |")
    return "\n".join(lines)


def summary_counts(records):
    """``{status: count}`` over the records, in the order of ``STATUSES``."""
    counts = {s: 0 for s in STATUSES}
    for rec in records:
        counts[classify(rec)[0]] += 1
    return {s: n for s, n in counts.items() if n}


# --------------------------------------------------------------------------- one problem (worker process)

def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return None if n == 0 else (xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2]))


def _write_json(path, rec):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(rec, indent=1, default=float) + "\n")
    tmp.replace(path)


def fs_options(a):
    """``evaluate()`` options of fs's gradient from ``--fs-solver/--fs-rtol/--fs-atol/--fs-max-steps`` (those given)."""
    return {k: v for k in FS_OPTIONS if (v := getattr(a, "fs_" + k)) is not None}


def _exception_record(exc, stage):
    from pbsens.errors import PbsensError, SolverError
    kind = "refused" if isinstance(exc, PbsensError) and not isinstance(exc, SolverError) else "error"
    return {"kind": kind, "type": type(exc).__name__, "stage": stage, "message": str(exc)[:2000],
            "traceback": traceback.format_exc()[-3000:]}


def run_worker(a):
    """Measure one problem; write its record to ``a.json`` after every stage."""
    fd_options = dict(FD, rtol=a.fd_rtol, atol=a.fd_atol)
    t_start = time.perf_counter()
    rec = json.loads(Path(a.json).read_text()) if Path(a.json).is_file() else {}
    rec.update(problem=a.worker, stage="start", references=rec.get("references") or {})
    save = lambda: _write_json(a.json, rec)   # noqa: E731

    def table_reference():
        t0 = time.perf_counter()
        try:
            rec["references"]["simulation_table"] = simulation_table_llh(a.yaml)
        except Exception as exc:      # the reference is optional: note why it is missing
            rec["simulation_table_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        rec["simulation_table_s"] = time.perf_counter() - t0
        save()
    # petab's calculate_llh takes minutes on tens of thousands of rows (Beer's): when AMICI or a
    # published value is the reference, the table's llh comes last, outside the measured stages
    late = choose_reference(rec["references"])[0] is not None
    if not late:
        table_reference()
    else:
        save()
    import numpy as np
    import pbsens.petab as pbpetab

    def stage(name):
        rec["stage"] = name
        save()

    try:
        stage("load")
        t0 = time.perf_counter()
        problem = pbpetab.load(a.yaml)
        t1 = time.perf_counter()
        problem = pbpetab.load(a.yaml)
        rec["load"] = {"cold_s": t1 - t0, "warm_s": time.perf_counter() - t1}
        rec.update(dim=int(problem.dim), n_states=int(problem.model.n_states))
        stage("llh")
        t0 = time.perf_counter()
        r = problem.evaluate(sensitivities=False)
        t1 = time.perf_counter()
        r = problem.evaluate(sensitivities=False)
        t2 = time.perf_counter()
        rec["llh"] = {"value": float(r.llh), "first_s": t1 - t0, "seconds": t2 - t1,
                      "options": "evaluate() defaults (rodas5p, rtol 1e-8, atol 1e-10)"}
        save()
        t0 = time.perf_counter()
        rec["llh"]["value_fd_options"] = float(problem.llh(**fd_options))
        t_fd = time.perf_counter() - t0
        rec["llh"]["fd_options_s"] = t_fd
        label, ref = choose_reference(rec["references"])
        grad = rec["gradient"] = {}
        t_eval = max(t2 - t1, t_fd)
        if ref is not None and not llh_matches(r.llh, ref):
            grad["skipped"] = f"llh fails against the {label} reference"
        elif t_eval > a.skip_gradient_above:
            grad["skipped"] = f"one llh evaluation took {t_eval:.1f} s > --skip-gradient-above {a.skip_gradient_above:g} s"
        else:
            k, why = fd_plan(t_eval, problem.dim, time.perf_counter() - t_start, a.timeout, a.fd_coordinates)
            if k == 0:
                grad["skipped"] = why
        save()
        if grad.get("skipped"):
            return rec
        from pbsens.errors import SolverError
        shifts = list(a.shifts)
        # fs's state-and-sensitivity solve at --fs-rtol/--fs-atol when given (else evaluate()'s defaults)
        grad_options = {m: {} for m in GRAD_TOL}
        grad_options["fs"] = fs_options(a)
        for shift in shifts:
            # at x_nominal + 0.1 a model may have no solution over the whole time span (Crauste's
            # blows up at t = 8.07 for some FD neighbours, with every solver): then the check runs
            # at the next of --shifts, and the record keeps why (failed_at)
            theta = np.asarray(problem.x_nominal, dtype=float) + shift
            grad["theta"] = (f"x_nominal {'+' if shift >= 0 else '-'} {abs(shift):g} on the parameter scale"
                             + (f" (--shifts {' '.join(format(x, 'g') for x in shifts)})" if shifts != [SHIFT, -SHIFT] else ""))
            grad["shift"] = shift
            try:
                gs = {}
                for m in GRAD_TOL:
                    stage(f"gradient {m}")
                    t0 = time.perf_counter()
                    try:
                        gs[m] = np.asarray(problem.evaluate(theta, method=m, **grad_options[m]).gradient, dtype=float)
                    except SolverError as exc:
                        # --exp2-when-fs-fails: fs's failure is recorded (status error) and exp2 is still checked
                        if m != "fs" or "exp2" not in gs or not a.exp2_when_fs_fails:
                            raise
                        grad[m] = {"failed": f"x_nominal {'+' if shift >= 0 else '-'} {abs(shift):g}: {str(exc)[:500]}",
                                   "seconds": time.perf_counter() - t0}
                    else:
                        grad[m] = {"first_s": time.perf_counter() - t0}
                    if grad_options[m]:
                        grad[m]["options"] = dict(grad_options[m])
                    save()
                stage("finite differences")
                k, why = fd_plan(t_fd, problem.dim, time.perf_counter() - t_start, a.timeout, a.fd_coordinates)
                if k == 0:
                    grad["skipped"] = why
                    save()
                    return rec
                grad.pop("spot_check", None)
                if k < problem.dim:
                    by = "fs" if "fs" in gs else "exp2"      # exp2 when fs failed (--exp2-when-fs-fails)
                    top, rnd = spot_coordinates(gs[by], k, a.fd_seed)
                    idx = sorted(top + rnd)
                    ids = list(problem.parameter_ids)
                    grad["spot_check"] = {"k": len(idx), "of": int(problem.dim), "reason": why, "seed": a.fd_seed,
                                          "largest_abs_fs_gradient": [ids[i] for i in top],
                                          "random": [ids[i] for i in rnd], "indices": idx}
                    if by != "fs":
                        grad["spot_check"]["largest_abs_gradient_of"] = by
                else:
                    idx = list(range(problem.dim))
                save()
                t0 = time.perf_counter()
                g_fd = central_differences(lambda x: problem.llh(x, **fd_options), theta, idx, STEP)
                break
            except SolverError as exc:
                grad.setdefault("failed_at", []).append(
                    f"x_nominal {'+' if shift >= 0 else '-'} {abs(shift):g}, {rec['stage']}: {str(exc)[:500]}")
                if shift == SHIFT:      # the key of the records before --shifts
                    grad["failed_at_plus_shift"] = grad["failed_at"][-1]
                for m in GRAD_TOL:
                    grad.pop(m, None)
                if shift == shifts[-1]:
                    raise
        grad["fd"] = {"seconds": time.perf_counter() - t0, "step": STEP, "options": fd_options,
                      "max_abs": float(np.max(np.abs(g_fd))), "n_coordinates": len(idx)}
        if "spot_check" in grad:
            grad["fd"]["values"] = g_fd.tolist()
            for m in gs:
                grad[m]["on_spot"] = gs[m][idx].tolist()
            if "fs" in gs:
                grad["spot_check"]["max_abs_fs_gradient_all"] = float(np.max(np.abs(gs["fs"])))
                grad["spot_check"]["exp2_vs_fs_all"] = rel_err_max(gs["exp2"], gs["fs"])
        for m in gs:
            grad[m]["error"] = rel_err_max(gs[m][idx], g_fd)
        save()
        if any(grad[m]["error"] > GRAD_TOL[m] for m in gs):
            # a gradient off by more than its tolerance: is it the FD reference's own O(STEP^2)
            # truncation error (Borghans' oscillator: 1.5e-4)? Half the step and extrapolate
            ok, why = fd_budget_ok(t_fd, len(idx), time.perf_counter() - t_start, a.timeout, 1e300)
            if not ok:
                grad["fd_richardson_skipped"] = why
            else:
                stage("finite differences, half step")
                t0 = time.perf_counter()
                g_half = central_differences(lambda x: problem.llh(x, **fd_options), theta, idx, STEP / 2)
                g_rich = richardson(g_fd, g_half)
                grad["fd_richardson"] = {"seconds": time.perf_counter() - t0, "steps": [STEP, STEP / 2],
                                         "fd_step_error": rel_err_max(g_fd, g_rich)}
                for m in gs:
                    grad[m]["error_vs_fd_step"] = grad[m]["error"]
                    grad[m]["error"] = rel_err_max(gs[m][idx], g_rich)
                save()
        for m in gs:                 # timing: median of --repeats calls after the first
            stage(f"timing {m}")
            ts = []
            for _ in range(a.repeats):
                if grad[m]["first_s"] * 2 > a.timeout - (time.perf_counter() - t_start):
                    break
                t0 = time.perf_counter()
                problem.evaluate(theta, method=m, **grad_options[m])
                ts.append(time.perf_counter() - t0)
            grad[m].update(median_s=_median(ts) if ts else grad[m]["first_s"], n_timed=len(ts))
        stage("done")
    except Exception as exc:
        rec["exception"] = _exception_record(exc, rec["stage"])
        save()
    finally:
        if late:
            table_reference()
    return rec


# --------------------------------------------------------------------------- the driver

def _git_head():
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except Exception:
        return None


def run_problem(name, a):
    """Run one problem: AMICI's llh (when set up), then pbsens in a subprocess with a timeout."""
    out = Path(a.out_dir) / f"{name}.json"
    folder = Path(a.collection) / name
    rec = {"problem": name, "collection_commit": COLLECTION_COMMIT, "pbsens_commit": _git_head(),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join(shlex.quote(x) for x in sys.argv), "timeout_s": a.timeout,
           "skip_gradient_above_s": a.skip_gradient_above, "host": platform.node(),
           "loadavg_start": os.getloadavg()[0], "references": {"published": AMICI_REFERENCE.get(name)}}
    yaml_path = find_yaml(folder)
    if yaml_path is None:
        rec["unavailable"] = f"no problem YAML in {folder} (files missing from the snapshot)"
    else:
        rec["yaml"] = str(yaml_path)
        gone = missing_files(yaml_path)
        if gone:
            rec["unavailable"] = f"files missing from the snapshot: {', '.join(gone)}"
    if rec.get("unavailable"):
        rec["status"], rec["status_detail"] = classify(rec)
        _write_json(out, rec)
        return rec
    am = amici_llh(yaml_path, a.amici_python, a.amici_timeout or a.timeout, a.amici_max_steps)
    if am is not None:
        rec["amici"] = am
        rec["references"]["amici"] = am.get("llh")
        rec["references"]["amici_default_tolerances"] = am.get("llh_default")
    _write_json(out, rec)
    with tempfile.TemporaryDirectory(prefix="pbsens_collection_cache_") as cache:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--yaml", str(yaml_path),
               "--json", str(out), "--timeout", str(a.timeout), "--skip-gradient-above",
               str(a.skip_gradient_above), "--repeats", str(a.repeats), "--fd-seed", str(a.fd_seed),
               "--shifts", *[repr(x) for x in a.shifts], "--fd-rtol", repr(a.fd_rtol), "--fd-atol", repr(a.fd_atol)]
        for k, v in fs_options(a).items():      # to the worker as given
            cmd += ["--fs-" + k.replace("_", "-"), str(v)]
        if a.fd_coordinates is not None:
            cmd += ["--fd-coordinates", str(a.fd_coordinates)]
        if a.exp2_when_fs_fails:
            cmd += ["--exp2-when-fs-fails"]
        env = {**os.environ, "PBSENS_CACHE_DIR": cache}
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        try:
            log, _ = proc.communicate(timeout=a.timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)          # the worker and anything it started, by its group id
            log, _ = proc.communicate()
            timed_out = True
        wall = time.perf_counter() - t0
    rec = json.loads(out.read_text())
    rec["worker_wall_s"] = wall
    rec["loadavg_end"] = os.getloadavg()[0]
    if timed_out:
        rec["timeout"] = a.timeout
    elif proc.returncode != 0 and not rec.get("exception"):
        rec["exception"] = {"kind": "error", "type": f"exit {proc.returncode}", "stage": rec.get("stage"),
                            "message": "\n".join((log or "").strip().splitlines()[-5:])[-1000:]}
    if log and log.strip():
        rec["worker_output_tail"] = "\n".join(log.strip().splitlines()[-10:])[-2000:]
    rec["status"], rec["status_detail"] = classify(rec)
    _write_json(out, rec)
    return rec


SECTION_START = "<!-- collection.py: start of the generated section -->"
SECTION_END = "<!-- collection.py: end of the generated section -->"


def load_records(out_dir):
    return [json.loads(p.read_text()) for p in sorted(Path(out_dir).glob("*.json"))]


def coverage_section(records, command):
    counts = summary_counts(records)
    dates = sorted(r.get("date", "") for r in records if r.get("date"))
    n = len(records)
    lines = [SECTION_START, "## PEtab benchmark collection", "",
             f"{n} problem folders of github.com/Benchmarking-Initiative/Benchmark-Models-PEtab at commit "
             f"`{COLLECTION_COMMIT}`, measured by `benchmarks/collection.py` (its docstring defines every "
             f"column and status); records dated {dates[0] if dates else '?'} to {dates[-1] if dates else '?'} (UTC), "
             f"one JSON per problem in `benchmarks/results/collection/`. Command:", "",
             f"    {command}", "",
             "Status counts: " + ", ".join(f"{s}: {c}" for s, c in counts.items()) + f" (of {n}).", "",
             "llh at the nominal parameters (evaluate() defaults); references: AMICI 1.1 in the same run "
             "(`amici_side.py petab --modes llh`, CVODES at rtol 1e-12, atol 1e-16 as AMICI's benchmark "
             "tests; the status uses this one; at AMICI's defaults rtol 1e-8 too, in the JSON), published = "
             + AMICI_REFERENCE_SOURCE + ", sim. table = the llh of the collection's `simulatedData_*.tsv`. "
             "Gradient errors: max-norm relative error against central finite differences at "
             f"x_nominal + {SHIFT} (another shift where the model has no solution at + {SHIFT} or its FD "
             f"neighbours, or where + {SHIFT} is no small change; the detail and the JSON say which and why; fs "
             f"at evaluate()'s defaults unless the detail names its options) (step {STEP:g}, Rodas5P rtol 1e-12, "
             f"atol 1e-14 unless the JSON says otherwise; on every "
             f"coordinate, or for a spot check on the K named in the JSON; where a method misses its "
             f"tolerance, the Richardson extrapolation of steps {STEP:g} and {STEP / 2:g}); times are wall seconds "
             "on a shared 2-core machine (load averages in the JSON files).", "",
             markdown_table(records), ""]
    dis = [(r["problem"], published_disagreement(r)) for r in sorted(records, key=lambda r: r["problem"])]
    dis = [(p, d) for p, d in dis if d]
    lines += ["### Where a reference disagrees with pbsens", ""]
    lines += [f"* {p}: {d}" for p, d in dis] or ["* none"]
    lines += ["", SECTION_END]
    return "\n".join(lines)


def write_coverage(path, records, command):
    path = Path(path)
    section = coverage_section(records, command)
    if path.is_file() and SECTION_START in (text := path.read_text()) and SECTION_END in text:
        pre, rest = text.split(SECTION_START, 1)
        post = rest.split(SECTION_END, 1)[1]
        path.write_text(pre + section + post)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# Coverage\n\nWhich problems pbsens runs, and how well. Every number below is measured;"
                        " the script named in each section reproduces it.\n\n" + section + "\n")


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--collection", default=os.environ.get("PBSENS_PETAB_COLLECTION"),
                    help="the Benchmark-Models folder of the collection (default: $PBSENS_PETAB_COLLECTION)")
    ap.add_argument("--problems", nargs="+", default=None, help="problem ids (default: every folder)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per problem (pbsens; AMICI apart)")
    ap.add_argument("--skip-gradient-above", type=float, default=60.0,
                    help="skip the gradient check when one llh evaluation takes longer (seconds)")
    ap.add_argument("--repeats", type=int, default=3, help="gradient timings after the first call")
    ap.add_argument("--fd-coordinates", type=int, default=None, metavar="K",
                    help="spot check: central FD on K coordinates only (half of largest |fs gradient|, half "
                         f"seeded random); default: every coordinate when that fits the timeout, else up to {AUTO_SPOT}")
    ap.add_argument("--fd-seed", type=int, default=SPOT_SEED, help="seed of the random coordinates of a spot check")
    ap.add_argument("--fd-rtol", type=float, default=FD["rtol"],
                    help=f"rtol of the llh evaluations of the FD reference (default {FD['rtol']:g}; Lang needs "
                         "more than 1e5 Rodas5P steps at 1e-12; the record keeps the options)")
    ap.add_argument("--fd-atol", type=float, default=FD["atol"], help=f"their atol (default {FD['atol']:g})")
    ap.add_argument("--fs-rtol", type=float, default=None,
                    help="rtol of fs's gradient (default: evaluate()'s, 1e-8; the record and the status detail "
                         "name it when given)")
    ap.add_argument("--fs-atol", type=float, default=None, help="its atol (default: evaluate()'s, 1e-10)")
    ap.add_argument("--fs-solver", default=None, help="its solver (default: evaluate()'s, rodas5p)")
    ap.add_argument("--fs-max-steps", type=int, default=None, help="its step limit (default: the solver's)")
    ap.add_argument("--exp2-when-fs-fails", action="store_true",
                    help="when fs fails (a solver failure) at a shift where exp2 solved, record the failure and "
                         "check exp2 alone there (status error, exp2's check in the detail) instead of moving on")
    ap.add_argument("--shifts", type=float, nargs="+", default=[SHIFT, -SHIFT],
                    help="gradient check at x_nominal + shift (parameter scale), the next shift when a solver "
                         "fails at one (default: 0.1 -0.1)")
    ap.add_argument("--out-dir", default=str(OUT_DIR))
    ap.add_argument("--table", default=str(ROOT / "docs" / "COVERAGE.md"),
                    help="Markdown file whose collection section is rewritten ('' for none)")
    ap.add_argument("--table-only", action="store_true", help="only rewrite --table from --out-dir")
    ap.add_argument("--table-command", default=None, help="command shown in the table (default: this one)")
    ap.add_argument("--amici-python", default=None,
                    help="Python of an environment with AMICI (default: $PBSENS_AMICI_PYTHON; else no AMICI)")
    ap.add_argument("--amici-timeout", type=float, default=None, help="seconds for AMICI (default --timeout)")
    ap.add_argument("--amici-max-steps", type=int, default=None,
                    help="CVODES's step limit for AMICI's llh (default AMICI's 10000; the record keeps it)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--yaml", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help=argparse.SUPPRESS)
    return ap


def main(argv=None):
    a = build_parser().parse_args(argv)
    if a.worker:
        run_worker(a)
        return 0
    command = a.table_command or "nice -n 10 python benchmarks/collection.py " + " ".join(
        shlex.quote(x) for x in (sys.argv[1:] if argv is None else argv))
    if not a.table_only:
        if not a.collection or not Path(a.collection).is_dir():
            raise SystemExit("collection.py: give --collection DIR (the collection's Benchmark-Models folder) "
                             "or set $PBSENS_PETAB_COLLECTION")
        names = a.problems or sorted((p.name for p in Path(a.collection).iterdir() if p.is_dir()),
                                     key=lambda n: (problem_size(Path(a.collection) / n), n))
        print(f"{len(names)} problems, timeout {a.timeout:g} s, load average {os.getloadavg()[0]:.2f}", flush=True)
        for name in names:
            rec = run_problem(name, a)
            llh = (rec.get("llh") or {}).get("value")
            print(f"{name}: {rec['status'] if 'status' in rec else classify(rec)[0]}  llh {llh}  "
                  f"ref {choose_reference(rec.get('references') or {})}  "
                  f"{(rec.get('status_detail') or '')[:200]}", flush=True)
    if a.table:
        records = load_records(a.out_dir)
        write_coverage(a.table, records, command)
        print(f"wrote {a.table}: " + ", ".join(f"{s} {n}" for s, n in summary_counts(records).items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
