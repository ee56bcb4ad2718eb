"""Time to a converged fit: pbsens's multi-start fits against pyPESTO + AMICI + fides, the same
start points for both.

For each problem: ``--starts`` start points drawn uniformly within the PEtab bounds on the
parameter scale (``pbsens.calibration.draw_starts``, ``--seed``), saved as ``starts.npy``; then

* pbsens: ``pbsens.fit(problem, starts=..., optimizer="fides", method=M)`` for each variant
  ``M`` of ``--variants`` (``exp2``: post-hoc gradients throughout; ``fs``: forward
  sensitivities throughout; ``exp2+fs``: exp2 until fides stops, then fs from there), fides
  with the Fisher information as Hessian and its default tolerances, pbsens's default solver
  (Rodas5P, rtol 1e-8, atol 1e-10); ``--workers`` local processes;
* pyPESTO + AMICI (``benchmarks/pypesto_side.py`` in AMICI's own Python, through
  ``amici_bridge.run_pypesto``): pyPESTO's ``AmiciObjective`` from its PEtab importer
  (sensitivities for the estimated parameters only, ``fim_for_hess``), fides with
  ``hessian_update=None`` (AMICI's Hessian in every iteration) and the same fides options,
  AMICI at the settings of its own PEtab benchmark tests (rtol = atol = 1e-8), one process.

Reported per tool and variant: best llh, converged starts (final llh within 0.5 of the best llh
found by any tool or variant on that problem: the usual waterfall criterion), failed starts, CPU
seconds of all starts (``time.process_time`` in the process that ran each start, summed: the
optimiser and the objective; model compilation excluded on both sides, the models come from the
tools' caches, and pbsens's workers are warmed up by two untimed short fits each), converged starts per CPU minute and its ratio to pyPESTO + AMICI's. One waterfall
plot per problem with every variant and AMICI (``docs/img/fit_waterfall_<problem>.png``); the
numbers in ``benchmarks/results/fit_<problem>.json``.

Run from the repository root (fits are resumable: a killed run continues where it was)::

    PBSENS_AMICI_PYTHON=/path/to/amici-venv/bin/python python benchmarks/bench_fit.py \\
        --starts 100 --seed 0 --workers 2 [--problems Boehm_JProteomeRes2014 ...] \\
        [--collection /path/to/Benchmark-Models-PEtab/Benchmark-Models] [--work DIR]

Problems are looked up in ``tests/data/petab`` and ``--collection`` (a checkout of the PEtab
benchmark collection, github.com/Benchmarking-Initiative/Benchmark-Models-PEtab, commit
``COLLECTION_COMMIT``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from amici_bridge import add_amici_argument, amici_python, run_pypesto  # noqa: E402

DATA = ROOT / "tests" / "data" / "petab"
SHARED = ROOT.parent / "shared" / "petab"
COLLECTION_COMMIT = "4d2085084b289f6215a95475b1ee639fd7d42283"
PROBLEMS = ["Boehm_JProteomeRes2014", "Fujita_SciSignal2010", "Brannmark_JBC2010",
            "Crauste_CellSystems2017", "Bruno_JExpBot2016", "Elowitz_Nature2000"]
VARIANTS = ["exp2>fs", "exp2+fs", "fs"]
TOL = 0.5


def find_problem(name, collection):
    for base in [DATA, SHARED] + ([Path(collection)] if collection else []):
        y = base / name / f"{name}.yaml"
        if y.is_file():
            return y
    raise SystemExit(f"bench_fit.py: problem {name} not found in {DATA}, {SHARED} or --collection")


def summarise(llh, cpu, best, n_failed):
    llh = np.asarray(llh, float)
    conv = int(np.sum(np.isfinite(llh) & (llh >= best - TOL)))
    return {"best_llh": float(np.max(llh[np.isfinite(llh)])) if np.isfinite(llh).any() else None,
            "converged": conv, "n": int(llh.size), "failed": int(n_failed), "cpu_s": float(cpu),
            "converged_per_cpu_min": conv / (cpu / 60.0) if cpu > 0 else None}


def split_variant(variant):
    """``"[OPTIMIZER:]METHOD[>REFINE]"`` -> (optimizer (default fides), method, refine or None):
    ``exp2>fs`` is pbsens.fit's default (exp2 in every start, the best five refined with fs)."""
    opt, _, rest = variant.rpartition(":")
    method, _, refine = rest.partition(">")
    return opt or "fides", method, refine or None


def variant_folder(variant):
    return "pbsens-" + variant.replace(":", "-").replace(">", "-refine-")


def warm_up(problem, starts, variant, workers):
    """Two short fits per worker, untimed: the workers import fides and load the kernels (a first call
    would otherwise count a worker's start-up in its first start's CPU time)."""
    import pbsens
    opt, method, refine = split_variant(variant)
    pbsens.fit(problem, starts=np.repeat(starts[:1], 2 * workers, axis=0), optimizer=opt, method=method,
               refine=refine, n_workers=workers, progress=False,
               options={"maxiter": 2} if opt != "least_squares" else {"max_nfev": 2})


def run_pbsens(problem, starts, variant, workers, work):
    import pbsens
    out = work / variant_folder(variant)
    warm_up(problem, starts, variant, workers)
    t0 = time.perf_counter()
    opt, method, refine = split_variant(variant)
    res = pbsens.fit(problem, starts=starts, optimizer=opt, method=method, refine=refine, n_workers=workers, out=out,
                     resume=out.exists(), progress=sys.stderr.isatty(), seed=0)
    by_index = sorted(res.starts, key=lambda s: s.index)
    row = {"llh": [s.llh for s in by_index], "cpu": [s.cpu for s in by_index], "x": [s.x for s in by_index],
           "n_iter": [s.n_iter for s in by_index], "n_grad": [s.n_grad for s in by_index],
           "refined": [s.refined for s in by_index],
           "status": [s.status for s in by_index], "failed": res.n_failed, "wall_s": time.perf_counter() - t0}
    return row, (before_refinement(by_index, res.n_failed) if refine else None)


def before_refinement(records, n_failed):
    """The same run as it stood before the refinement: every start's own phases (llh, end point, CPU)."""
    llh, cpu, x, n_iter = [], [], [], []
    for s in records:
        ref = [p for p in s.phases if p.get("refine")]
        llh.append(ref[0]["llh_before"] if ref else s.llh)
        cpu.append(s.cpu - sum(p["start_cpu"] for p in ref[:1]))
        n_iter.append(s.n_iter - sum(p["n_iter"] for p in ref))
        x.append(ref[0].get("x_before") if ref else s.x)
    return {"llh": llh, "cpu": cpu, "x": x, "n_iter": n_iter, "failed": n_failed}


def run_amici_fit(yaml, starts_path, work, amici_py):
    raw = work / "pypesto_amici.json"
    if raw.is_file():                     # an earlier run's, complete
        doc = json.loads(raw.read_text())
        if doc.get("n_starts") == len(doc.get("starts", [])) and doc.get("complete", True):
            from amici_bridge import parse_result
            return parse_result(raw.read_text())
    res = run_pypesto(["fit", str(yaml), "--starts", str(starts_path), "--optimizer", "fides", "--max-iter", "1000",
                       "-q"], amici_py, raw_out=raw)
    return res


def bench_problem(name, args, amici_py):
    import pbsens.petab
    from pbsens.calibration import draw_starts
    yaml = find_problem(name, args.collection)
    problem = pbsens.petab.load(str(yaml))
    work = Path(args.work) / name
    work.mkdir(parents=True, exist_ok=True)
    starts_path = work / "starts.npy"
    starts = draw_starts(problem, args.starts, seed=args.seed)
    if starts_path.is_file() and not np.array_equal(np.load(starts_path), starts):
        raise SystemExit(f"{starts_path} holds other starts: use another --work folder")
    np.save(starts_path, starts)
    rows = {}
    for v in args.variants:
        print(f"  {name}: pbsens {v} ...", flush=True)
        rows[f"pbsens {v}"], before = run_pbsens(problem, starts, v, args.workers, work)
        if before is not None:
            rows[f"pbsens {v.partition('>')[0]} (the same run before refinement)"] = before
    if amici_py is not None:
        print(f"  {name}: pyPESTO + AMICI ...", flush=True)
        a = run_amici_fit(yaml, starts_path, work, amici_py)
        if a is not None:
            st = sorted(a["starts"], key=lambda s: s["index"])
            rows["pyPESTO+AMICI"] = {"llh": [s["llh"] if s["status"] == "ok" else -math.inf for s in st],
                                     "cpu": [s.get("cpu_time") or 0.0 for s in st], "x": [s.get("x") for s in st],
                                     "n_iter": [s.get("n_iter") for s in st], "n_grad": [s.get("n_grad") for s in st],
                                     "failed": int(a.get("n_failed", 0)), "versions": a.get("versions"),
                                     "solver": a.get("solver"), "optimizer": a.get("optimizer")}
    best = max(max((v for v in r["llh"] if math.isfinite(v)), default=-math.inf) for r in rows.values())
    summary = {k: summarise(r["llh"], sum(r["cpu"]), best, r["failed"]) for k, r in rows.items()}
    ref = summary.get("pyPESTO+AMICI", {}).get("converged_per_cpu_min")
    for k, s in summary.items():
        s["ratio_to_amici"] = (s["converged_per_cpu_min"] / ref) if ref and s["converged_per_cpu_min"] else None
        s["best_minus_overall"] = None if s["best_llh"] is None else s["best_llh"] - best
    tight_best_llh(problem, yaml, rows, summary, work, amici_py)
    doc = {"problem": name, "yaml": str(yaml.relative_to(yaml.parents[2])) if len(yaml.parents) > 2 else str(yaml),
           "n_starts": args.starts, "seed": args.seed, "tol": TOL, "best_llh": best, "summary": summary,
           "per_start": rows, "workers": args.workers, "load": os.getloadavg(),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    out = ROOT / "benchmarks" / "results" / f"fit_{name}.json"
    out.write_text(json.dumps(doc, indent=1, default=float))
    from pbsens.report.fit_plots import plot_waterfall
    img = ROOT / "docs" / "img" / f"fit_waterfall_{name}.png"
    plot_waterfall({k: np.array(r["llh"]) for k, r in rows.items()}, best_llh=best, path=img,
                   title=f"{name}: {args.starts} starts, fides")
    return doc


#: the tolerances of the re-evaluation of each tool's best end point (both tools' llh at their fitting
#: tolerances differ by up to 0.06 on Fujita's optimum: AMICI's rtol = atol = 1e-8 is the larger error)
TIGHT = {"rtol": 1e-12, "atol": 1e-14}


def tight_best_llh(problem, yaml, rows, summary, work, amici_py):
    """Each row's best end point re-evaluated at tight tolerances by pbsens (Rodas5P) and, when
    configured, by AMICI (CVODES rtol 1e-12, atol 1e-16): ``best_llh_tight`` and ``best_llh_tight_amici``."""
    for k, r in rows.items():
        ok = [i for i, v in enumerate(r["llh"]) if math.isfinite(v)]
        if not ok or not r.get("x"):
            continue
        i = max(ok, key=lambda i: r["llh"][i])
        if r["x"][i] is None:           # not recorded (a refined start of a run before x_before was kept)
            continue
        x = np.asarray(r["x"][i], float)
        summary[k]["best_llh_tight"] = float(problem.llh(x, **TIGHT))
        if amici_py is not None:
            path = work / ("best_" + "".join(c if c.isalnum() else "_" for c in k) + ".npy")
            np.save(path, x[None, :])
            a = run_pypesto(["evaluate", str(yaml), "--x", str(path), "--sensi-order", "0", "--rtol", "1e-12",
                             "--atol", "1e-16"], amici_py)
            if a is not None and a["points"][0]["status"] == "ok":
                summary[k]["best_llh_tight_amici"] = float(a["points"][0]["llh"])


def partial(name, args):
    """Summarise the starts both tools have finished so far (a run stopped part way: the same starts,
    the first ``k`` rows of starts.npy that every variant and AMICI completed), from the records in
    ``--work`` and AMICI's JSON (``--amici-json``, the side script's ``--out``, rewritten after every start)."""
    work = Path(args.work) / name
    rows = {}
    for v in args.variants:
        folder = work / variant_folder(v) / "starts"
        recs = {}
        for f in sorted(folder.glob("start_*.json")) if folder.is_dir() else []:
            d = json.loads(f.read_text())
            recs[d["index"]] = d
        rows[f"pbsens {v}"] = recs
    amici = {}
    if args.amici_json:
        for st in json.loads(Path(args.amici_json).read_text())["starts"]:
            amici[st["index"]] = st
        rows["pyPESTO+AMICI"] = amici
    common = sorted(set.intersection(*(set(r) for r in rows.values())))
    k = 0
    while k in common:
        k += 1                                           # the first k starts, no gaps
    idx = list(range(k))
    per = {}
    for tool, recs in rows.items():
        if tool == "pyPESTO+AMICI":
            st = [recs[i] for i in idx]
            per[tool] = {"llh": [float(s["llh"]) if s["status"] == "ok" else -math.inf for s in st],
                         "cpu": [s.get("cpu_time") or 0.0 for s in st], "n_iter": [s.get("n_iter") for s in st],
                         "failed": sum(1 for s in st if s["status"] != "ok")}
        else:
            st = [recs[i] for i in idx]
            per[tool] = {"llh": [s["llh"] for s in st], "cpu": [s["cpu"] for s in st],
                         "n_iter": [s["n_iter"] for s in st], "failed": sum(1 for s in st if not math.isfinite(s["fval"]))}
    best = max(max((v for v in r["llh"] if math.isfinite(v)), default=-math.inf) for r in per.values())
    summary = {t: summarise(r["llh"], sum(r["cpu"]), best, r["failed"]) for t, r in per.items()}
    ref = summary.get("pyPESTO+AMICI", {}).get("converged_per_cpu_min")
    for s in summary.values():
        s["ratio_to_amici"] = (s["converged_per_cpu_min"] / ref) if ref and s["converged_per_cpu_min"] else None
    doc = {"problem": name, "n_starts": k, "partial": True, "planned_starts": args.starts, "seed": args.seed,
           "tol": TOL, "best_llh": best, "summary": summary, "per_start": per,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    (ROOT / "benchmarks" / "results" / f"fit_{name}.json").write_text(json.dumps(doc, indent=1, default=float))
    from pbsens.report.fit_plots import plot_waterfall
    plot_waterfall({t: np.array(r["llh"]) for t, r in per.items()}, best_llh=best,
                   path=ROOT / "docs" / "img" / f"fit_waterfall_{name}.png",
                   title=f"{name}: the first {k} of {args.starts} starts (both tools), fides")
    return doc


def _tight(s):
    a, b = s.get("best_llh_tight"), s.get("best_llh_tight_amici")
    return ("" if a is None else f"{a:.4f}") + ("" if b is None else f" / {b:.4f}")


def print_table(doc):
    print(f"\n{doc['problem']}: best llh {doc['best_llh']:.6f} ({doc['n_starts']} starts)")
    print(f"  {'tool':50s} {'best llh':>12s} {'tight (pbsens / AMICI)':>24s} {'conv':>5s} {'fail':>5s} {'CPU s':>9s} "
          f"{'conv/CPU min':>13s} {'x AMICI':>8s}")
    for k, s in doc["summary"].items():
        r = s["ratio_to_amici"]
        print(f"  {k:50s} {s['best_llh']:12.5f} {_tight(s):>24s} {s['converged']:5d} {s['failed']:5d} "
              f"{s['cpu_s']:9.1f} {s['converged_per_cpu_min'] or 0:13.2f} {'' if r is None else f'{r:8.2f}'}")


def markdown_rows(doc):
    """Rows of the PERFORMANCE.md table for one problem's result document."""
    rows = []
    for k, s in doc["summary"].items():
        r = s["ratio_to_amici"]
        per = doc["per_start"][k]
        iters = sum(x for x in per["n_iter"] if x)
        ms_iter = 1e3 * s["cpu_s"] / iters if iters else float("nan")
        rows.append(f"| {doc['problem']} | {k} | {s['n']} | {s['best_llh']:.4f} | {_tight(s)} | {s['converged']} | "
                    f"{s['failed']} | {s['cpu_s']:.1f} | {ms_iter:.2f} | {s['converged_per_cpu_min'] or 0:.2f} | "
                    f"{'' if r is None else f'{r:.2f}'} |")
    return rows


def report(problems):
    """The markdown table of the stored results (``benchmarks/results/fit_<problem>.json``)."""
    print("| problem | tool | starts | best llh | best end point's llh, tight (pbsens / AMICI) | converged | failed | "
          "CPU s | CPU ms / iteration | converged / CPU min | x pyPESTO+AMICI |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in problems:
        path = ROOT / "benchmarks" / "results" / f"fit_{name}.json"
        if path.is_file():
            print("\n".join(markdown_rows(json.loads(path.read_text()))))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", nargs="+", default=PROBLEMS)
    ap.add_argument("--starts", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variants", nargs="+", default=VARIANTS)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--collection", default=os.environ.get("PBSENS_PETAB_COLLECTION"),
                    help="the Benchmark-Models folder of a checkout of the PEtab benchmark collection")
    ap.add_argument("--work", default=str(HERE / ".fit_work"), help="folder of the resumable fits")
    ap.add_argument("--report", action="store_true", help="print the markdown table of the stored results and stop")
    ap.add_argument("--partial", action="store_true",
                    help="summarise the starts finished so far by every variant and AMICI (--amici-json) and stop")
    ap.add_argument("--amici-json", default=None, help="with --partial: pypesto_side.py's output so far")
    add_amici_argument(ap)
    args = ap.parse_args(argv)
    if args.report:
        return report(args.problems)
    if args.partial:
        for name in args.problems:
            print_table(partial(name, args))
        return 0
    amici_py = amici_python(args.amici_python)
    if amici_py is None:
        print("AMICI: not configured (--amici-python or $PBSENS_AMICI_PYTHON): pbsens only")
    print(f"load average at start: {os.getloadavg()}")
    for name in args.problems:
        print_table(bench_problem(name, args, amici_py))
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
