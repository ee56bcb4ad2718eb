"""The default PEtab gradient at the published optimum against a tight reference (issue #41).

Near an optimum the gradient is small while the post-hoc march's error is not, so the relative
error of a gradient is largest there. Per problem, at ``theta = problem.x_nominal`` (the parameter
table's nominal values; the llh is printed beside AMICI's reference from ``benchmarks/collection.py``
so that a nominal vector that is not the published optimum shows):

* the reference: ``method="fs"`` at ``--ref-rtol`` / ``--ref-atol`` (default 1e-12 / 1e-14), checked
  against a second tight evaluation (fs at 10x looser tolerances, ``ref_check_fs``) and a tight
  exp2 (rtol 1e-11, atol 1e-13, ``ref_check_exp2``): both relative differences are printed; the
  reference is trustworthy when they are far below 1e-3;
* ``problem.gradient(theta)`` (the default, ``method="auto"``) and ``evaluate(method=...)`` for
  ``exp2``, ``exp2-adjoint``, ``fs`` at default options: relative error against the reference in
  the 2-norm (``||g - g_ref||_2 / ||g_ref||_2``) and the max-norm (``max|g - g_ref| / max|g_ref|``),
  and the median CPU time of this process over ``--repeats`` calls after a warm-up;
* with ``--costs-only``, only that cost part (without fs) and nothing at the optimum;
* with ``--shifted``, at ``x_nominal + 0.1`` (away from the optimum) the median CPU of one
  ``evaluate`` by ``auto``, ``exp2-adjoint`` (what ``auto`` took before issue #41's check),
  ``exp2`` and ``fs``, in interleaved rounds after a warm-up each.

Run one problem at a time (Lucarelli is slow)::

    nice -n 19 env OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/gradient_at_optimum.py \\
        --collection /work/collection/Benchmark-Models --problems Bruno_JExpBot2016 --repeats 3 \\
        --json benchmarks/results/gradient_at_optimum_Bruno_JExpBot2016.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

PROBLEMS = ["Bruno_JExpBot2016", "Brannmark_JBC2010", "Lucarelli_CellSystems2018", "Boehm_JProteomeRes2014",
            "Fujita_SciSignal2010"]
METHODS = ("auto", "exp2", "exp2-adjoint", "fs")
TARGET = 1e-3


def rel_errors(g, ref):
    """``(2-norm, max-norm)`` relative error of ``g`` against ``ref``."""
    d = np.asarray(g, dtype=float) - ref
    return float(np.linalg.norm(d) / np.linalg.norm(ref)), float(np.max(np.abs(d)) / np.max(np.abs(ref)))


def _timed(fn, repeats):
    out = fn()                      # warm-up (compilation, caches); its result is the one compared
    times = []
    for _ in range(repeats):
        c0 = time.process_time()
        fn()
        times.append(time.process_time() - c0)
    return out, (statistics.median(times) if times else float("nan"))


def _note(problem, theta):
    """What the default evaluation says it did (``EvaluationResult.notes``)."""
    return [str(n) for n in (problem.evaluate(theta, method="auto").notes or [])]


def shifted_costs(problem, repeats, methods=("auto", "exp2-adjoint", "exp2", "fs")):
    """Median CPU of one ``evaluate`` per method at ``x_nominal + 0.1``: interleaved rounds, one warm-up each."""
    th1 = problem.x_nominal + 0.1
    for m in methods:
        problem.evaluate(th1, method=m)
    times = {m: [] for m in methods}
    for _ in range(repeats):
        for m in times:
            c0 = time.process_time()
            problem.evaluate(th1, method=m)
            times[m].append(time.process_time() - c0)
    return dict(shifted={m: statistics.median(v) for m, v in times.items()},
                shifted_auto_notes=[str(n) for n in problem.evaluate(th1, method="auto").notes])


def measure(yaml_path, repeats, ref_rtol, ref_atol, shifted, ref_check=True):
    import pbsens.petab as pbpetab
    from benchmarks.collection import AMICI_REFERENCE
    problem = pbpetab.load(yaml_path)
    name = Path(yaml_path).stem
    theta = problem.x_nominal
    rec = dict(problem=name, states=problem.model.n_states, estimated=problem.dim,
               conditions=len(problem.conditions), amici_llh=AMICI_REFERENCE.get(name))
    c0 = time.process_time()
    ref = problem.evaluate(theta, method="fs", rtol=ref_rtol, atol=ref_atol)
    rec["ref_cpu_s"] = time.process_time() - c0
    g_ref = np.asarray(ref.gradient, dtype=float)
    rec.update(llh=float(ref.llh), gradient_ref=g_ref.tolist(), gradient_ref_norm=float(np.linalg.norm(g_ref)),
               gradient_ref_max=float(np.max(np.abs(g_ref))))
    rec["ref_check_fs"] = rec["ref_check_exp2"] = (float("nan"), float("nan"))
    if ref_check:
        chk_fs = problem.evaluate(theta, method="fs", rtol=10 * ref_rtol, atol=10 * ref_atol).gradient
        chk_exp2 = problem.evaluate(theta, method="exp2", rtol=1e-11, atol=1e-13).gradient
        rec["ref_check_fs"] = rel_errors(chk_fs, g_ref)
        rec["ref_check_exp2"] = rel_errors(chk_exp2, g_ref)
    rec["methods"] = {}
    for m in METHODS:
        if m == "auto":
            g, cpu = _timed(lambda: problem.gradient(theta), repeats)
        else:
            g, cpu = _timed(lambda: problem.evaluate(theta, method=m).gradient, repeats)
        e2, emax = rel_errors(g, g_ref)
        rec["methods"][m] = dict(rel_err_2=e2, rel_err_max=emax, cpu_s=cpu, meets_target=bool(e2 <= TARGET))
    rec["auto_notes"] = _note(problem, theta)
    if shifted:
        rec.update(shifted_costs(problem, repeats))
    rec["load"] = os.getloadavg()[0]
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--collection", default=os.environ.get("PBSENS_PETAB_COLLECTION",
                                                           "/work/collection/Benchmark-Models"))
    ap.add_argument("--problems", nargs="+", default=PROBLEMS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ref-rtol", type=float, default=1e-12)
    ap.add_argument("--ref-atol", type=float, default=1e-14)
    ap.add_argument("--shifted", action="store_true", help="also time the default at x_nominal + 0.1")
    ap.add_argument("--no-ref-check", action="store_true",
                    help="skip the reference's checks (tight fs at 10x its tolerances, tight exp2)")
    ap.add_argument("--costs-only", action="store_true",
                    help="only the CPU of auto, exp2-adjoint, exp2 at x_nominal + 0.1 (no reference, no fs)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    out = {}
    for name in args.problems:
        if args.costs_only:
            import pbsens.petab as pbpetab
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                problem = pbpetab.load(Path(args.collection) / name / f"{name}.yaml")
                out[name] = r = dict(problem=name, estimated=problem.dim,
                                     **shifted_costs(problem, args.repeats, ("auto", "exp2-adjoint", "exp2")))
            print(f"{name} ({r['estimated']} parameters) at x_nominal+0.1 (CPU ms): "
                  + ", ".join(f"{m} {1e3 * v:.1f}" for m, v in r["shifted"].items())
                  + f"; auto/exp2-adjoint {r['shifted']['auto'] / r['shifted']['exp2-adjoint']:.2f}; "
                  f"{r['shifted_auto_notes'][0]}", flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(out, indent=1))
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = measure(Path(args.collection) / name / f"{name}.yaml", args.repeats, args.ref_rtol, args.ref_atol,
                        args.shifted, not args.no_ref_check)
        out[name] = r
        print(f"{name}: llh {r['llh']:.6f} (AMICI {r['amici_llh']}), |g_ref| {r['gradient_ref_norm']:.3e}, "
              f"ref check fs {r['ref_check_fs'][0]:.1e}, exp2 {r['ref_check_exp2'][0]:.1e}, "
              f"ref {r['ref_cpu_s']:.1f} s", flush=True)
        for m, v in r["methods"].items():
            print(f"  {m:13s} 2-norm {v['rel_err_2']:.2e}  max {v['rel_err_max']:.2e}  cpu {1e3 * v['cpu_s']:.1f} ms"
                  f"  {'ok' if v['meets_target'] else 'MISS'}", flush=True)
        if r.get("auto_notes"):
            print(f"  auto: {r['auto_notes']}")
        if "shifted" in r:
            print("  at x_nominal+0.1 (CPU ms): " + ", ".join(f"{m} {1e3 * v:.1f}" for m, v in r["shifted"].items())
                  + f"; auto/exp2-adjoint {r['shifted']['auto'] / r['shifted']['exp2-adjoint']:.2f}", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
