"""Forward sensitivities (``Problem.evaluate(method="fs")``, llh + gradient) before/after, and AMICI forward.

Issue #41 item 4: pbsens's ``fs`` gradient (compiled Rodas5P on states and sensitivities, the
Problem's default options: rtol 1e-8, atol 1e-10) against the same call on a baseline commit
(``--baseline REV``, exported with ``git archive`` into a temporary folder) and AMICI 1.1's forward
sensitivities (CVODES BDF at the settings of AMICI's own benchmark tests, ``amici_side.py petab
--settings benchmark``: rtol 1e-8, atol 1e-8, likelihood-only ReturnData, steady-state sensitivities
by integration for Brannmark; before 2026-11-28 AMICI's Solver defaults, atol 1e-16, which cost
AMICI 1.7x on Boehm and failed on Fujita; sensitivities only for the model parameters behind the
estimated ones: AMICI's PEtab mapping sets ``plist``), in one run.

Each pbsens version runs in its own subprocess (``PYTHONPATH`` = that tree), the versions of a
problem one after the other, then AMICI (``benchmarks/amici_bridge.py``, its own Python,
``--amici-python`` or ``$PBSENS_AMICI_PYTHON``; the compiled AMICI model is reused from
``benchmarks/.amici_cache``). Reported: median process CPU and wall seconds over ``--repeats``
(at least 21 when the warm-up took under 0.5 s CPU; AMICI gets as many) after one warm-up,
the Rodas5P steps summed over the conditions, the llh, and the gradient's
max-norm relative difference to the baseline's and to AMICI's gradient (the same tolerances on
both pbsens sides: "matched accuracy" is that difference). Run from the repository root::

    OPENBLAS_NUM_THREADS=1 nice -n 19 python benchmarks/bench_fs.py --baseline REV --repeats 3 \\
        [--problems Bachmann_MSB2011 Boehm_JProteomeRes2014 Fujita_SciSignal2010] \\
        [--collection /path/Benchmark-Models] [--amici-python PATH] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT / "tests" / "data" / "petab"
DEFAULT_PROBLEMS = ["Bachmann_MSB2011", "Boehm_JProteomeRes2014", "Fujita_SciSignal2010"]


def _yaml(name, collection):
    local = DATA / name / f"{name}.yaml"
    if local.exists():
        return local
    return Path(collection) / name / f"{name}.yaml"


def worker(yaml_path, repeats, out):
    """In the subprocess: time ``evaluate(method="fs")``; steps per evaluation from the solver statistics."""
    import pbsens.petab as pbpetab
    from pbsens.sensitivity import forward as F
    problem = pbpetab.load(yaml_path)
    stats = []
    solve = F._AUGMENTED_SOLVERS["rodas5p"]

    def counted(*args):
        t, Z, st = solve(*args)
        stats.append(st)
        return t, Z, st

    F._AUGMENTED_SOLVERS["rodas5p"] = counted
    c0 = time.process_time()
    res = problem.evaluate(method="fs")      # warm-up: compilation, caches
    if time.process_time() - c0 < 0.5:       # small problems: more repeats, the medians are cheap
        repeats = max(repeats, 21)
    steps = sum(s["n_steps"] for s in stats)
    rejected = sum(s["n_rejected"] for s in stats)
    n_solves = len(stats)
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        problem.evaluate(method="fs")
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    Path(out).write_text(json.dumps({
        "pbsens": sys.modules["pbsens"].__file__, "repeats": repeats, "cpu": cpu, "wall": wall, "steps": steps, "rejected": rejected,
        "solves": n_solves, "llh": float(res.llh),
        "gradient": [float(v) for v in res.gradient], "ids": list(problem.parameter_ids)}))


def run_version(tree, yaml_path, repeats):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        env = {**os.environ, "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1"}
        proc = subprocess.run([sys.executable, __file__, "--worker", str(yaml_path), str(repeats), str(out)],
                              env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-3000:])
        return json.loads(out.read_text())


def run_amici_forward(yaml_path, repeats, amici_python):
    sys.path.insert(0, str(HERE))
    from amici_bridge import run_amici
    res = run_amici(["petab", str(yaml_path), "--repeats", str(repeats), "--modes", "forward"], amici_python)
    if res is None:
        return None
    r = res["runs"]["llh+grad forward"]
    ok = r.get("status") == "ok"
    return {"status": r.get("status") if not r.get("failures") else
            f"{r['failures'][0].get('status_text')} in {len({f.get('condition') for f in r['failures']})} conditions",
            "cpu": r["process_cpu_ms"] / 1e3 if ok else None, "solver_cpu": r["cpu_ms"] / 1e3 if ok else None,
            "wall": r["wall_ms"] / 1e3 if ok else None, "llh": r.get("llh"),
            "gradient": list(np.asarray(r["gradient"], dtype=float)) if ok and r.get("gradient") is not None else None,
            "ids": r.get("gradient_ids")}


def _rel(g, ref):
    g, ref = np.asarray(g), np.asarray(ref)
    return float(np.max(np.abs(g - ref)) / np.max(np.abs(ref)))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default=None, help="git revision to compare with (default: none)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--problems", nargs="+", default=DEFAULT_PROBLEMS)
    ap.add_argument("--collection", default="/work/collection/Benchmark-Models")
    ap.add_argument("--amici-python", default=None)
    ap.add_argument("--no-amici", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    trees = []
    if args.baseline:
        rev = subprocess.run(["git", "rev-parse", "--short", args.baseline], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
        # a fixed folder per revision: numba's on-disk cache of the baseline's kernels is reused by later runs
        base = Path(tempfile.gettempdir()) / f"pbsens_baseline_{rev}"
        if not (base / "pbsens").exists():
            base.mkdir(parents=True, exist_ok=True)
            tar = subprocess.run(["git", "archive", args.baseline, "pbsens"], cwd=ROOT, capture_output=True,
                                 check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(base)], input=tar, check=True)
        trees.append((f"before ({rev})", base))
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "pbsens"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    trees.append((f"after ({head}{'+' if dirty else ''})", ROOT))
    results = {}
    for name in args.problems:
        yaml_path = _yaml(name, args.collection)
        results[name] = {}
        for label, tree in trees:
            r = run_version(tree, yaml_path, args.repeats)
            results[name][label] = r
            print(f"{name} {label}: CPU {statistics.median(r['cpu']):.3f} s, steps {r['steps']}", flush=True)
        if not args.no_amici:
            am = run_amici_forward(yaml_path, max(r["repeats"] for r in results[name].values()), args.amici_python)
            if am is not None:
                results[name]["AMICI forward"] = am
                print(f"{name} AMICI forward: {am['status']} CPU {am['cpu']}", flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    print()
    print("| problem | version | CPU s (median) | wall s | steps | llh | gradient vs first row | gradient vs AMICI |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rows in results.items():
        first = next(iter(rows.values()))
        am = rows.get("AMICI forward")
        for label, r in rows.items():
            if label == "AMICI forward":
                cpu = "" if r["cpu"] is None else f"{r['cpu']:.3f} (solver {r['solver_cpu']:.3f})"
                wall = "" if r["wall"] is None else f"{r['wall']:.3f}"
                print(f"| {name} | AMICI 1.1 forward ({r['status']}) | {cpu} | {wall} |  | {r['llh']} |  |  |")
                continue
            vs_am = ""
            if am is not None and am.get("gradient") is not None:
                ga = dict(zip(am["ids"], am["gradient"]))
                vs_am = f"{_rel(r['gradient'], [ga[i] for i in r['ids']]):.1e}"
            print(f"| {name} | {label} | {statistics.median(r['cpu']):.3f} | {statistics.median(r['wall']):.3f} | "
                  f"{r['steps']} | {r['llh']:.6f} | {_rel(r['gradient'], first['gradient']):.1e} | {vs_am} |")


if __name__ == "__main__":
    main()
