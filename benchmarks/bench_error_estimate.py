"""Quality and cost of ``r.error_estimate`` and of ``sens_rtol`` (issue: trustworthy sensitivities).

Per model and post-hoc method, on the LSODA grid (rtol 1e-5, atol 1e-6) against
forward sensitivities solved tightly (Radau, rtol 1e-10, atol 1e-12) at the same
times:

* true median / max ``E_k`` (output times after ``t0``);
* estimate quality over the output times with ``E_k > 1e-10``: the fraction where
  ``error_estimate`` is within a factor 10 of ``E_k``, and the worst underestimate
  ``max E_k / estimate``;
* cost (median seconds over repeats, round-robin in one run) of the march alone
  (``estimate_error=False``), with the estimate (the default), and with
  ``sens_rtol=1e-4``; and the true median / max ``E`` with ``sens_rtol=1e-4``;
* the relative state difference to the reference's states (post-hoc accuracy
  cannot beat it).

``--petab DIR ...`` adds PEtab problems, every simulation condition at the
nominal parameters, set up as :class:`pbsens.problems.Problem` does
(:func:`pbsens.problems.conditions.problem_conditions`: parameter maps, initial
states, preequilibration), output times the condition's measurement times;
conditions with breakpoints inside the span are marched segment by segment with
the jump of ``S`` (:func:`segmented`). A summary per model (conditions pooled) and
method ends the output.

Large problems (Alkan: 73 conditions): ``--ref-method rodas5p`` (the compiled
Rosenbrock reference, 3-5x faster than Radau there; ``--ref-check N`` compares it
with Radau on every N-th condition), ``--jobs 2`` (conditions in processes),
``--jsonl FILE`` (rows appended per condition; ``--first-condition`` resumes),
``--tol-every 4 --tol-every-methods pbsr`` (pbsr's ``sens_rtol`` on every fourth
condition); ``--summarize FILES`` pools saved rows.

    PYTHONPATH=. python benchmarks/bench_error_estimate.py [--repeats 5] [--models PKA CaMKII Chua]
        [--methods exp exp2 pbsr pbsr2] [--petab /path/to/petab/Problem ...] [--conditions N]
"""
import argparse
import re
import gc
import os
import statistics
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pbsens  # noqa: E402
from pbsens.problems.conditions import problem_conditions  # noqa: E402
from pbsens.errors import AccuracyWarning  # noqa: E402

SPANS = {"PKA": 600.0, "CaMKII": 600.0, "Chua": 10.0}


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        finally:
            gc.enable()
    return statistics.median(times)


def quality(E, est, floor=1e-10):
    """(fraction of ``est`` within 10x of ``E``, worst ``E / est``, count) over ``E > floor``."""
    sel = E > floor
    if not np.any(sel):
        return float("nan"), float("nan"), 0
    q = est[sel] / E[sel]
    return (float(np.mean((q >= 0.1) & (q <= 10))), float(np.max(1.0 / np.maximum(q, 1e-300))),
            int(sel.sum()))


def timed(fn):
    """``(fn(), seconds)``."""
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def run_case(label, model, tr, ref, methods, repeats, S0=None, t_eval=None, march=None, tol_methods=None):
    """One row per method (dicts; the printed line as it goes).

    ``march(meth, **options)`` computes the post-hoc result (default: one
    :func:`pbsens.sensitivities` call on ``tr``; a PEtab condition with a
    breakpoint passes a segment-wise march). The runs whose accuracy is reported
    are also the first timed repeat (a warm-up call comes before them).
    ``tol_methods``: the methods whose ``sens_rtol=1e-4`` result is measured (default all).
    """
    rows = []
    span, p = (tr.t[0], tr.t[-1]), tr.p
    kw = dict(S0=S0, t_eval=t_eval)
    if march is None:
        def march(meth, **o):
            return pbsens.sensitivities(model, tr, method=meth, **kw, **o)
    c_states = median_time(lambda: pbsens.solve_states(model, span, t_eval=t_eval, p=p, x0=tr.x0, rtol=1e-5,
                                                       atol=1e-6, tstops=getattr(tr, "tstops", None)), repeats)
    print("%-28s state solve (rtol 1e-5): %.2f ms, %d grid points, %d output times"
          % (label, c_states * 1e3, tr.t.size, ref.t.size), flush=True)
    for meth in methods:
        def quiet(**o):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", AccuracyWarning)
                return march(meth, **o)
        quiet(estimate_error=False)                       # warm-up (compilation on the first case)
        c_plain = median_time(lambda: quiet(estimate_error=False), repeats)
        r, c_est = timed(lambda: quiet(estimate_error=True))
        with_tol = tol_methods is None or meth in tol_methods
        rt, c_tol = timed(lambda: quiet(sens_rtol=1e-4)) if with_tol else (None, float("nan"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AccuracyWarning)
            E, dx = pbsens.relative_error(r, ref, return_state=True)
            Et = pbsens.relative_error(rt, ref) if with_tol else np.full(E.shape, np.nan)
        sel = slice(1, None)                      # output times after t0
        within, under, n_sel = quality(E[sel], r.error_estimate[sel])
        if repeats > 1:
            c_est = statistics.median([c_est] + [timed(lambda: quiet(estimate_error=True))[1]
                                                 for _ in range(repeats - 1)])
        if repeats // 2 > 1 and with_tol:
            c_tol = statistics.median([c_tol] + [timed(lambda: quiet(sens_rtol=1e-4))[1]
                                                 for _ in range(repeats // 2 - 1)])
        row = dict(label=label, method=meth, medE=float(np.median(E[sel])), maxE=float(E[sel].max()),
                   within=within, worst=under, n_sel=n_sel, c_plain=c_plain * 1e3, c_est=c_est * 1e3,
                   c_tol=c_tol * 1e3, E=E[sel], est=np.asarray(r.error_estimate[sel]), E_tol=Et[sel],
                   nsub=rt.subdivisions if with_tol else -1, dx=float(np.max(dx)), grid=int(r.grid.size),
                   grid_tol=int(rt.grid.size) if with_tol else -1)
        rows.append(row)
        print("%-28s %-6s %8.1e %8.1e %6.2f %8.2g %8.2f %8.2f %9.2f %8.1e %8.1e %6d %8.1e"
              % (label, meth, row["medE"], row["maxE"], within, under, row["c_plain"], row["c_est"],
                 row["c_tol"], np.median(Et[sel]), Et[sel].max(), row["nsub"], row["dx"]), flush=True)
    return rows


HEADER = ("%-28s %-6s %8s %8s %6s %8s %8s %8s %9s %8s %8s %6s %8s"
          % ("model", "method", "medE", "maxE", "in10x", "worst", "ms", "ms+est", "ms+tol", "medE_tol",
             "maxE_tol", "nsub", "dx_max"))


def reference(model, span, times, p, x0, S0, method, tstops=None):
    """Forward sensitivities at rtol 1e-10, atol 1e-12 by ``method`` (segment-wise across breakpoints)."""
    if tstops is not None and len(tstops):
        from pbsens.simulation.segments import simulate
        sim = simulate(model, times, p, x0=x0, S0=S0, method="fs", solver=method, rtol=1e-10, atol=1e-12)
        return pbsens.SensitivityResult(t=sim.t, x=sim.x, S=sim.S, method="fs", p=p, x0=x0)
    return pbsens.forward_sensitivities(model, span, t_eval=times, p=p, x0=x0, S0=S0, method=method,
                                        rtol=1e-10, atol=1e-12)


_PETAB = {}     # folder -> (name, problem, conditions): loaded once per process (workers inherit it by fork)


def petab_case(job):
    """Rows of one PEtab condition: ``job = (folder, index, args)``."""
    folder, i, args = job
    name, problem, conds = _PETAB[folder]
    m = problem.model
    cond, times, p, x0, S0, has_stops = conds[i]
    span = (0.0, float(times[-1]))
    label = f"{name}:{cond}"
    march = None
    tstops = None
    if has_stops:
        tstops, march = segmented(m, times, p, x0, S0)
        print(f"# {label}: breakpoints at {tstops.tolist()} inside the span: marched segment by segment "
              "(S jumps by (f- - f+) dtau/dp there)", flush=True)
    tr = pbsens.solve_states(m, span, t_eval=times, p=p, x0=x0, rtol=1e-5, atol=1e-6,
                             tstops=tstops if tstops is not None and tstops.size else None)
    t0 = time.perf_counter()
    ref = reference(m, span, times, p, x0, S0, args.ref_method, tstops)
    c_ref = time.perf_counter() - t0
    if args.ref_check and i % args.ref_check == 0 and args.ref_method != "Radau":
        t0 = time.perf_counter()
        ref2 = reference(m, span, times, p, x0, S0, "Radau", tstops)
        d = pbsens.relative_error(ref, ref2)[1:]
        print(f"# {label}: reference {args.ref_method} ({c_ref:.1f} s) vs Radau ({time.perf_counter() - t0:.1f} s), "
              f"both rtol 1e-10: max relative difference of S {d.max():.1e}", flush=True)
    tol_methods = args.tol_methods if (args.tol_every <= 1 or i % args.tol_every == 0) else \
        [mm for mm in (args.tol_methods or args.methods) if mm not in args.tol_every_methods]
    rows = run_case(label, m, tr, ref, args.methods, args.repeats, S0=S0, t_eval=times, march=march,
                    tol_methods=tol_methods)
    for r in rows:
        r["c_ref"] = c_ref * 1e3
    if args.jsonl:
        import json
        with open(args.jsonl, "a") as fh:
            for r in rows:
                fh.write(json.dumps({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.items()})
                         + "\n")
    return rows


def segmented(model, times, p, x0, S0):
    """``(tstops, march)`` for a condition with breakpoints inside the span.

    ``march(method, **options)`` solves the states segment by segment (LSODA rtol
    1e-5 as elsewhere), marches :func:`pbsens.sensitivities` on each with the
    options, and applies the jump ``S += (f(tau-) - f(tau+)) dtau/dp^T`` between
    segments, as :func:`pbsens.simulation.segments.simulate` does. With
    ``estimate_error=True`` it is that library call (``simulate(...,
    estimate_error=True)``): each segment's signed error estimate plus the error
    carried across the jump (unchanged there: the jump depends on ``x`` only) and
    through the segment by the march itself.
    """
    from pbsens.simulation.segments import simulate
    disc = model.discontinuities
    tb, dtb = disc.breakpoints(p)
    inside = (tb > 0) & (tb < times[-1])
    taus, dtaus = np.asarray(tb)[inside], np.asarray(dtb)[inside]
    order = np.argsort(taus)
    taus, dtaus = taus[order], dtaus[order]
    shift = 64 * np.finfo(float).eps

    def march(meth, **o):
        if o.get("estimate_error") and "sens_rtol" not in o:
            sim = simulate(model, times, p, x0=x0, S0=S0, method=meth, solver="LSODA", rtol=1e-5, atol=1e-6,
                           estimate_error=True)
            return pbsens.SensitivityResult(t=times, x=sim.x, S=sim.S, method=meth, p=p, x0=x0,
                                            error_estimate=sim.error_estimate, grid=times)
        x, S = np.array(x0, dtype=float), np.array(S0, dtype=float)
        bounds = list(taus) + [float(times[-1])]
        cur, Xo, So, n_sub = 0.0, [], [], 0
        for j, tau in enumerate(bounds):
            last = j == len(bounds) - 1
            a = cur + shift * max(1.0, abs(cur)) if j else cur
            b = tau if last else tau - shift * max(1.0, abs(tau))
            sel = (times >= cur) & ((times <= tau) if last else (times < tau))
            outs = np.unique(np.concatenate([np.clip(times[sel], a, b), [a, b]]))
            tr = pbsens.solve_states(model, (a, b), t_eval=outs, p=p, x0=x, rtol=1e-5, atol=1e-6)
            r = pbsens.sensitivities(model, tr, method=meth, S0=S, t_eval=outs, **o)
            idx = np.searchsorted(outs, np.clip(times[sel], a, b))
            Xo.append(r.x[idx])
            So.append(r.S[idx])
            x, S = r.x[-1].copy(), r.S[-1].copy()
            n_sub += r.subdivisions
            if not last:
                S = S + np.outer(model.rhs(b, x, p) - model.rhs(tau + shift * max(1.0, abs(tau)), x, p), dtaus[j])
                cur = tau
        return pbsens.SensitivityResult(t=times, x=np.concatenate(Xo), S=np.concatenate(So), method=meth, p=p, x0=x0,
                                        subdivisions=n_sub, grid=times)
    return taus, march


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--models", nargs="*", default=list(SPANS))
    ap.add_argument("--methods", nargs="*", default=["exp", "exp2", "pbsr", "pbsr2"])
    ap.add_argument("--petab", nargs="*", default=[], help="PEtab problem folders (every simulation condition)")
    ap.add_argument("--conditions", type=int, default=None, help="at most this many conditions per PEtab problem")
    ap.add_argument("--first-condition", type=int, default=0, help="start at this condition (0-based)")
    ap.add_argument("--ref-method", default="Radau",
                    help="forward-sensitivity method of the reference (rtol 1e-10, atol 1e-12): 'Radau' "
                         "(default) or 'rodas5p' (compiled, 3-5x faster on Alkan)")
    ap.add_argument("--ref-check", type=int, default=0,
                    help="with --ref-method rodas5p: every N-th condition also solved by Radau, the "
                         "difference printed")
    ap.add_argument("--jobs", type=int, default=1, help="PEtab conditions in this many processes")
    ap.add_argument("--json", default=None, help="write every row (per condition and method) to this file")
    ap.add_argument("--jsonl", default=None, help="append each PEtab condition's rows to this file as it ends")
    ap.add_argument("--tol-methods", nargs="*", default=None,
                    help="measure sens_rtol=1e-4 for these methods only (default: all)")
    ap.add_argument("--tol-every", type=int, default=1,
                    help="sens_rtol for the methods of --tol-every-methods on every N-th condition only")
    ap.add_argument("--tol-every-methods", nargs="*", default=[])
    ap.add_argument("--every", type=int, default=1, help="every N-th PEtab condition only")
    ap.add_argument("--summarize", nargs="*", default=None,
                    help="print the per-model summary of rows saved by --json/--jsonl in these files (a "
                         "later file's row for the same condition and method replaces an earlier one) and exit")
    ap.add_argument("--sbml-petab", nargs="*", default=[],
                    help="PEtab folders run without the PEtab layer: the SBML model at the parameter "
                         "table's nominal values, span [0, last measurement time] (single-condition problems)")
    args = ap.parse_args()
    if args.summarize is not None:
        summary(load_rows(args.summarize))
        return
    print(HEADER, flush=True)
    rows = []
    for name in args.models:
        m = pbsens.load_model(name)
        span = (0.0, SPANS[name])
        tr = pbsens.solve_states(m, span, rtol=1e-5, atol=1e-6)
        ref = pbsens.forward_sensitivities(m, span, t_eval=tr.t, method=args.ref_method, rtol=1e-10, atol=1e-12)
        rows += run_case(name, m, tr, ref, args.methods, args.repeats)
    for folder in args.sbml_petab:
        m, span, p = sbml_problem(folder)
        tr = pbsens.solve_states(m, span, p=p, rtol=1e-5, atol=1e-6)
        ref = pbsens.forward_sensitivities(m, span, t_eval=tr.t, p=p, method=args.ref_method, rtol=1e-10,
                                           atol=1e-12)
        rows += run_case(os.path.basename(folder.rstrip("/")), m, tr, ref, args.methods, args.repeats)
    jobs = []
    for folder in args.petab:
        problem = load_petab(folder)
        conds = list(problem_conditions(problem))
        _PETAB[folder] = (os.path.basename(folder.rstrip("/")), problem, conds)
        stop = len(conds) if args.conditions is None else min(len(conds), args.first_condition + args.conditions)
        jobs += [(folder, i, args) for i in range(args.first_condition, stop, args.every)]
    if args.jobs > 1 and len(jobs) > 1:
        import multiprocessing
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            for rs in pool.imap(petab_case, jobs):
                rows += rs
    else:
        for job in jobs:
            rows += petab_case(job)
    if args.json:
        import json
        with open(args.json, "w") as fh:
            json.dump([{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.items()} for r in rows],
                      fh)
    summary(rows)


def load_rows(files):
    """Rows saved by ``--json`` (a list) or ``--jsonl`` (one row a line); later files win per (label, method)."""
    import json
    rows = {}
    for f in files:
        with open(f) as fh:
            text = fh.read()
        items = json.loads(text) if text.lstrip().startswith("[") else [json.loads(ln) for ln in text.splitlines()
                                                                         if ln.strip()]
        for r in items:
            for k in ("E", "est", "E_tol"):
                r[k] = np.array(r[k], dtype=float)
            rows[(r["label"], r["method"])] = r
    return list(rows.values())


def summary(rows):
    """Per model (PEtab conditions pooled) and method: the figures of the issue's done-when list."""
    if not rows:
        return
    print("\nper model and method (PEtab conditions pooled): in10x = fraction of output times with "
          "E > 1e-10 where the estimate is within 10x; worst = largest E / estimate; medE_tol, maxE_tol: "
          "true E with sens_rtol=1e-4; cost_tol, cost_est: time with sens_rtol=1e-4 / with "
          "estimate_error=True over the march alone (sums over the conditions measured); n, n_tol: conditions "
          "measured, of them with sens_rtol")
    print("%-24s %-6s %8s %8s %6s %8s %9s %9s %8s %8s %4s %5s" % ("model", "method", "medE", "maxE", "in10x", "worst",
                                                                  "medE_tol", "maxE_tol", "cost_tol", "cost_est",
                                                                  "n", "n_tol"))
    groups = {}
    for r in rows:
        groups.setdefault((r["label"].split(":")[0], r["method"]), []).append(r)
    for (name, meth), rs in groups.items():
        n = sum(r["n_sel"] for r in rs)
        within = sum(r["within"] * r["n_sel"] for r in rs if r["n_sel"]) / n if n else float("nan")
        worst = max((r["worst"] for r in rs if r["n_sel"]), default=float("nan"))
        E = np.concatenate([r["E"] for r in rs])
        Et = np.concatenate([r["E_tol"] for r in rs if r["nsub"] >= 0] or [np.full(1, np.nan)])
        n_tol = sum(1 for r in rs if r["nsub"] >= 0)
        plain = sum(r["c_plain"] for r in rs)
        plain_tol = sum(r["c_plain"] for r in rs if r["nsub"] >= 0)
        print("%-24s %-6s %8.1e %8.1e %6.3f %8.3g %9.1e %9.1e %8.1f %8.1f %4d %5d"
              % (name, meth, np.median(E), E.max(), within, worst, np.median(Et), Et.max(),
                 sum(r["c_tol"] for r in rs if r["nsub"] >= 0) / plain_tol if plain_tol else float("nan"),
                 sum(r["c_est"] for r in rs) / plain, len(rs), n_tol), flush=True)


def sbml_problem(folder):
    """(model, t_span, p) of a single-condition PEtab folder: SBML model, nominal parameters."""
    import glob

    import pandas as pd
    xml = sorted(glob.glob(os.path.join(folder, "model_*.xml")))[0]
    m = pbsens.load_model(xml)
    par = pd.read_csv(sorted(glob.glob(os.path.join(folder, "parameters_*.tsv")))[0], sep="\t")
    nominal = dict(zip(par["parameterId"], par["nominalValue"]))
    p = np.array([nominal.get(n, v) for n, v in zip(m.param_names, m.p)], dtype=float)
    meas = pd.read_csv(sorted(glob.glob(os.path.join(folder, "measurementData_*.tsv")))[0], sep="\t")
    return m, (0.0, float(meas["time"].max())), p


def load_petab(folder):
    """The PEtab problem of ``folder`` (its one YAML file).

    Piecewise expressions without an ``otherwise`` (valid SBML; in Alkan the two
    pieces cover every case) get ``otherwise 0`` in a temporary copy, because the
    model parser asks for one.
    """
    import glob
    import shutil
    import tempfile

    from pbsens import petab as pp
    yaml = sorted(glob.glob(os.path.join(folder, "*.yaml")))[0]
    xml = sorted(glob.glob(os.path.join(folder, "model_*.xml")))[0]
    with open(xml) as fh:
        text = fh.read()
    fixed = re.sub(r"</piece>(\s*)</piecewise>", r"</piece>\1<otherwise><cn> 0 </cn></otherwise></piecewise>", text)
    if fixed != text:
        tmp = tempfile.mkdtemp(prefix="bench_err_")
        for f in glob.glob(os.path.join(folder, "*")):
            if os.path.isfile(f):
                shutil.copy(f, tmp)
        with open(os.path.join(tmp, os.path.basename(xml)), "w") as fh:
            fh.write(fixed)
        yaml = os.path.join(tmp, os.path.basename(yaml))
    return pp.load(yaml)


if __name__ == "__main__":
    main()
