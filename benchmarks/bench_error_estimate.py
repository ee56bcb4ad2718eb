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

If ``pbsens.petab`` and the PEtab problems are available, ``--petab DIR ...`` adds
those problems (every simulation condition).

    python benchmarks/bench_error_estimate.py [--repeats 5] [--models PKA CaMKII Chua]
        [--methods exp exp2 pbsr pbsr2] [--petab /path/to/petab/Problem ...]
"""
import argparse
import gc
import os
import statistics
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pbsens  # noqa: E402
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
    sel = E > floor
    if not np.any(sel):
        return float("nan"), float("nan")
    q = est[sel] / E[sel]
    return float(np.mean((q >= 0.1) & (q <= 10))), float(np.max(1.0 / np.maximum(q, 1e-300)))


def run_case(label, model, tr, ref, methods, repeats):
    rows = []
    span, p = (tr.t[0], tr.t[-1]), tr.p
    c_states = median_time(lambda: pbsens.solve_states(model, span, p=p, rtol=1e-5, atol=1e-6), repeats)
    print("%-28s state solve (rtol 1e-5): %.2f ms, %d grid points" % (label, c_states * 1e3, tr.t.size))
    for meth in methods:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AccuracyWarning)
            r = pbsens.sensitivities(model, tr, method=meth, estimate_error=True)
            rt = pbsens.sensitivities(model, tr, method=meth, sens_rtol=1e-4)
            E, dx = pbsens.relative_error(r, ref, return_state=True)
            Et = pbsens.relative_error(rt, ref)
        within, under = quality(E[1:], r.error_estimate[1:])
        c_plain = median_time(lambda: pbsens.sensitivities(model, tr, method=meth, estimate_error=False), repeats)
        c_est = median_time(lambda: pbsens.sensitivities(model, tr, method=meth, estimate_error=True), repeats)

        def tol_run():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", AccuracyWarning)
                pbsens.sensitivities(model, tr, method=meth, sens_rtol=1e-4)
        c_tol = median_time(tol_run, max(1, repeats // 2))
        rows.append((label, meth, np.median(E[1:]), E[1:].max(), within, under, c_plain * 1e3, c_est * 1e3,
                     c_tol * 1e3, np.median(Et[1:]), Et[1:].max(), rt.subdivisions, float(np.max(dx))))
        print("%-28s %-6s %8.1e %8.1e %6.2f %8.2g %8.2f %8.2f %9.2f %8.1e %8.1e %6d %8.1e" % rows[-1], flush=True)
    return rows


HEADER = ("%-28s %-6s %8s %8s %6s %8s %8s %8s %9s %8s %8s %6s %8s"
          % ("model", "method", "medE", "maxE", "in10x", "worst", "ms", "ms+est", "ms+tol", "medE_tol",
             "maxE_tol", "nsub", "dx_max"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--models", nargs="*", default=list(SPANS))
    ap.add_argument("--methods", nargs="*", default=["exp", "exp2", "pbsr", "pbsr2"])
    ap.add_argument("--petab", nargs="*", default=[], help="PEtab problem folders (needs pbsens.petab)")
    ap.add_argument("--sbml-petab", nargs="*", default=[],
                    help="PEtab folders run without the PEtab layer: the SBML model at the parameter "
                         "table's nominal values, span [0, last measurement time] (single-condition problems)")
    args = ap.parse_args()
    print(HEADER)
    for name in args.models:
        m = pbsens.load_model(name)
        span = (0.0, SPANS[name])
        tr = pbsens.solve_states(m, span, rtol=1e-5, atol=1e-6)
        ref = pbsens.forward_sensitivities(m, span, t_eval=tr.t, method="Radau", rtol=1e-10, atol=1e-12)
        run_case(name, m, tr, ref, args.methods, args.repeats)
    for folder in args.sbml_petab:
        m, span, p = sbml_problem(folder)
        tr = pbsens.solve_states(m, span, p=p, rtol=1e-5, atol=1e-6)
        ref = pbsens.forward_sensitivities(m, span, t_eval=tr.t, p=p, method="Radau", rtol=1e-10, atol=1e-12)
        run_case(os.path.basename(folder.rstrip("/")), m, tr, ref, args.methods, args.repeats)
    for folder in args.petab:
        try:
            from pbsens import petab as pp
        except ImportError:
            print(f"# pbsens.petab is not available: skipped {folder}")
            continue
        import glob
        yaml = sorted(glob.glob(os.path.join(folder, "*.yaml")))[0]
        problem = pp.load(yaml)
        for cond, (m, span, p) in problem_conditions(problem):
            tr = pbsens.solve_states(m, span, p=p, rtol=1e-5, atol=1e-6)
            ref = pbsens.forward_sensitivities(m, span, t_eval=tr.t, p=p, method="Radau", rtol=1e-10,
                                               atol=1e-12)
            run_case(f"{os.path.basename(folder)}:{cond}", m, tr, ref, args.methods, args.repeats)


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


def problem_conditions(problem):
    """(condition, (model, t_span, p)) per simulation condition of a loaded PEtab problem.

    Relies on the PEtab layer's ``conditions()`` iterator; adapt when its interface is merged.
    """
    return problem.conditions()


if __name__ == "__main__":
    main()
