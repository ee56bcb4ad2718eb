"""The cross-check (``Problem.cross_check``) at its defaults on PEtab benchmark problems: what the
ratios are where nothing is wrong (the ``factor`` of 10 must leave room), and what it costs.

Per problem, at the nominal parameters: the largest ratio ``|a - b| / (allowance_a + allowance_b)``
over the conditions of the llh (compiled Rodas5P vs scipy's Radau, rtol 1e-8, atol 1e-10) and of
the gradient (exp2 vs fs, per parameter), whether every condition agrees, and the median wall and
CPU time of ``cross_check`` and of one ``evaluate()`` (exp2, llh + gradient) over ``--repeats`` runs
after one warm-up, with their ratio (same run). Problems from the collection folder
(``--collection``, default /work/collection/Benchmark-Models) or tests/data/petab.

    python -m benchmarks.cross_check_collection [--repeats 3] [--problems Boehm_JProteomeRes2014 ...]
        [--json benchmarks/results/cross_check_collection.json] [--reference-solver LSODA]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

PROBLEMS = ["Boehm_JProteomeRes2014", "Fujita_SciSignal2010", "Brannmark_JBC2010", "Elowitz_Nature2000",
            "Zheng_PNAS2012", "Borghans_BiophysChem1997", "Bertozzi_PNAS2020", "Perelson_Science1996"]


def _yaml(collection, name):
    for folder in (Path(collection) / name, Path(__file__).resolve().parent.parent / "tests" / "data" / "petab" / name):
        ys = sorted(folder.glob("*.yaml"))
        if ys:
            return ys[0]
    raise SystemExit(f"no YAML for {name}")


def _timed(fn, repeats):
    fn()
    wall, cpu = [], []
    out = None
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--collection", default="/work/collection/Benchmark-Models")
    ap.add_argument("--problems", nargs="*", default=PROBLEMS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--reference-solver", default=None, help="cross_check's reference_solver (default its own)")
    args = ap.parse_args(argv)
    import pbsens.petab
    print(f"load average at start: {os.getloadavg()}", flush=True)
    rows = []
    ref = {"reference_solver": args.reference_solver} if args.reference_solver else {}
    for name in args.problems:
        try:
            problem = pbsens.petab.load(_yaml(args.collection, name))
            th = problem.x_nominal
            tw_e, tc_e, _ = _timed(lambda: problem.evaluate(th), args.repeats)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tw_x, tc_x, rep = _timed(lambda: problem.cross_check(th, warn=False, **ref), args.repeats)
        except Exception as exc:       # a problem the check cannot run: its message, the others go on
            print(f"{name}: {type(exc).__name__}: {exc}", flush=True)
            rows.append({"problem": name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        llh_r = max(c.llh_ratio for c in rep.conditions)
        g_r = max((float(np.max(c.gradient_ratio)) for c in rep.conditions if c.gradient_ratio.size), default=0.0)
        worst = max(rep.conditions, key=lambda c: max(c.llh_ratio, float(np.max(c.gradient_ratio, initial=0.0))))
        row = {"problem": name, "conditions": len(rep.conditions), "agree": rep.agree, "max_llh_ratio": llh_r,
               "max_gradient_ratio": g_r, "worst_condition": worst.condition,
               "evaluate_wall_s": tw_e, "evaluate_cpu_s": tc_e, "cross_check_wall_s": tw_x,
               "cross_check_cpu_s": tc_x, "cpu_ratio": tc_x / tc_e, "timing": rep.timing,
               "disagreements": [m for _, _, m in rep.disagreements()]}
        rows.append(row)
        print(f"{name:<28s} {len(rep.conditions):3d} cond  agree={rep.agree!s:5s} max llh ratio {llh_r:9.3g}  "
              f"max grad ratio {g_r:9.3g}  evaluate {tc_e:7.3f} s CPU  cross-check {tc_x:7.2f} s CPU "
              f"({tc_x / tc_e:6.1f}x)  parts {', '.join(f'{k} {v:.2f}' for k, v in rep.timing.items())}", flush=True)
        for m in row["disagreements"]:
            print(f"    {m}", flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"repeats": args.repeats, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
