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
(:func:`pbsens.error_estimate.problem_conditions`: parameter maps, initial
states, preequilibration), output times the condition's measurement times;
conditions with events or breakpoints inside the span are skipped and named. A
summary per model (conditions pooled) and method ends the output.

    python benchmarks/bench_error_estimate.py [--repeats 5] [--models PKA CaMKII Chua]
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
from pbsens.error_estimate import problem_conditions  # noqa: E402
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


def run_case(label, model, tr, ref, methods, repeats, S0=None, t_eval=None):
    """One row per method (dicts; the printed line as it goes)."""
    rows = []
    span, p = (tr.t[0], tr.t[-1]), tr.p
    kw = dict(S0=S0, t_eval=t_eval)
    c_states = median_time(lambda: pbsens.solve_states(model, span, t_eval=t_eval, p=p, x0=tr.x0, rtol=1e-5,
                                                       atol=1e-6), repeats)
    print("%-28s state solve (rtol 1e-5): %.2f ms, %d grid points, %d output times"
          % (label, c_states * 1e3, tr.t.size, ref.t.size))
    for meth in methods:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AccuracyWarning)
            r = pbsens.sensitivities(model, tr, method=meth, estimate_error=True, **kw)
            rt = pbsens.sensitivities(model, tr, method=meth, sens_rtol=1e-4, **kw)
            E, dx = pbsens.relative_error(r, ref, return_state=True)
            Et = pbsens.relative_error(rt, ref)
        sel = slice(1, None)                      # output times after t0
        within, under, n_sel = quality(E[sel], r.error_estimate[sel])

        def quiet(**o):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", AccuracyWarning)
                pbsens.sensitivities(model, tr, method=meth, **kw, **o)
        c_plain = median_time(lambda: quiet(estimate_error=False), repeats)
        c_est = median_time(lambda: quiet(estimate_error=True), repeats)
        c_tol = median_time(lambda: quiet(sens_rtol=1e-4), max(1, repeats // 2))
        row = dict(label=label, method=meth, medE=float(np.median(E[sel])), maxE=float(E[sel].max()),
                   within=within, worst=under, n_sel=n_sel, c_plain=c_plain * 1e3, c_est=c_est * 1e3,
                   c_tol=c_tol * 1e3, E=E[sel], E_tol=Et[sel], nsub=rt.subdivisions, dx=float(np.max(dx)))
        rows.append(row)
        print("%-28s %-6s %8.1e %8.1e %6.2f %8.2g %8.2f %8.2f %9.2f %8.1e %8.1e %6d %8.1e"
              % (label, meth, row["medE"], row["maxE"], within, under, row["c_plain"], row["c_est"],
                 row["c_tol"], np.median(Et[sel]), Et[sel].max(), rt.subdivisions, row["dx"]), flush=True)
    return rows


HEADER = ("%-28s %-6s %8s %8s %6s %8s %8s %8s %9s %8s %8s %6s %8s"
          % ("model", "method", "medE", "maxE", "in10x", "worst", "ms", "ms+est", "ms+tol", "medE_tol",
             "maxE_tol", "nsub", "dx_max"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--models", nargs="*", default=list(SPANS))
    ap.add_argument("--methods", nargs="*", default=["exp", "exp2", "pbsr", "pbsr2"])
    ap.add_argument("--petab", nargs="*", default=[], help="PEtab problem folders (every simulation condition)")
    ap.add_argument("--conditions", type=int, default=None, help="at most this many conditions per PEtab problem")
    ap.add_argument("--sbml-petab", nargs="*", default=[],
                    help="PEtab folders run without the PEtab layer: the SBML model at the parameter "
                         "table's nominal values, span [0, last measurement time] (single-condition problems)")
    args = ap.parse_args()
    print(HEADER)
    rows = []
    for name in args.models:
        m = pbsens.load_model(name)
        span = (0.0, SPANS[name])
        tr = pbsens.solve_states(m, span, rtol=1e-5, atol=1e-6)
        ref = pbsens.forward_sensitivities(m, span, t_eval=tr.t, method="Radau", rtol=1e-10, atol=1e-12)
        rows += run_case(name, m, tr, ref, args.methods, args.repeats)
    for folder in args.sbml_petab:
        m, span, p = sbml_problem(folder)
        tr = pbsens.solve_states(m, span, p=p, rtol=1e-5, atol=1e-6)
        ref = pbsens.forward_sensitivities(m, span, t_eval=tr.t, p=p, method="Radau", rtol=1e-10, atol=1e-12)
        rows += run_case(os.path.basename(folder.rstrip("/")), m, tr, ref, args.methods, args.repeats)
    for folder in args.petab:
        name = os.path.basename(folder.rstrip("/"))
        problem = load_petab(folder)
        m = problem.model
        for i, (cond, times, p, x0, S0, has_stops) in enumerate(problem_conditions(problem)):
            if args.conditions is not None and i >= args.conditions:
                break
            if has_stops:
                print(f"# {name}:{cond}: breakpoints or events inside the span, skipped")
                continue
            span = (0.0, float(times[-1]))
            tr = pbsens.solve_states(m, span, t_eval=times, p=p, x0=x0, rtol=1e-5, atol=1e-6)
            ref = pbsens.forward_sensitivities(m, span, t_eval=times, p=p, x0=x0, S0=S0, method="Radau",
                                               rtol=1e-10, atol=1e-12)
            rows += run_case(f"{name}:{cond}", m, tr, ref, args.methods, args.repeats, S0=S0, t_eval=times)
    summary(rows)


def summary(rows):
    """Per model (PEtab conditions pooled) and method: the figures of the issue's done-when list."""
    if not rows:
        return
    print("\nper model and method (PEtab conditions pooled): in10x = fraction of output times with "
          "E > 1e-10 where the estimate is within 10x; worst = largest E / estimate; medE_tol, maxE_tol: "
          "true E with sens_rtol=1e-4; cost_tol, cost_est: time with sens_rtol=1e-4 / with "
          "estimate_error=True over the march alone (sums over conditions)")
    print("%-24s %-6s %8s %8s %6s %8s %9s %9s %8s %8s" % ("model", "method", "medE", "maxE", "in10x", "worst",
                                                          "medE_tol", "maxE_tol", "cost_tol", "cost_est"))
    groups = {}
    for r in rows:
        groups.setdefault((r["label"].split(":")[0], r["method"]), []).append(r)
    for (name, meth), rs in groups.items():
        n = sum(r["n_sel"] for r in rs)
        within = sum(r["within"] * r["n_sel"] for r in rs if r["n_sel"]) / n if n else float("nan")
        worst = max((r["worst"] for r in rs if r["n_sel"]), default=float("nan"))
        E = np.concatenate([r["E"] for r in rs])
        Et = np.concatenate([r["E_tol"] for r in rs])
        plain = sum(r["c_plain"] for r in rs)
        print("%-24s %-6s %8.1e %8.1e %6.3f %8.3g %9.1e %9.1e %8.1f %8.1f"
              % (name, meth, np.median(E), E.max(), within, worst, np.median(Et), Et.max(),
                 sum(r["c_tol"] for r in rs) / plain, sum(r["c_est"] for r in rs) / plain), flush=True)


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
