"""Forward exp2 or the post-hoc adjoint: the measurements behind ``method="auto"``.

For each PEtab problem: ``Problem.evaluate(theta, method=...)`` (llh + gradient; forward exp2 also
builds the FIM, as ``method="exp2"`` always does) at the nominal parameters shifted by +-0.1 on
their scale, median CPU time of this process over ``--repeats`` interleaved rounds after one
warm-up each, and the relative max-norm difference of the two gradients (the adjoint is the
transpose of the forward march: rounding-level). The rule in pbsens/problems/method_choice.py
and the table in docs/PERFORMANCE.md ("Forward or adjoint: the choice rule") come from this.
``--spread``: also the adjoint with the spread's vector (what ``"auto"`` pays on its adjoint branch,
issue #41's check: ``problems.adjoint_evaluation.evaluate_adjoint(..., spread=True)``, under one BLAS
thread as ``Problem.evaluate``).

    OPENBLAS_NUM_THREADS=1 python benchmarks/method_crossover.py --collection PATH/Benchmark-Models \\
        --json benchmarks/results/method_crossover.json [--problems NAME ...] [--spread]
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

PROBLEMS = ["Perelson_Science1996", "Boehm_JProteomeRes2014", "Blasi_CellSystems2016", "Bruno_JExpBot2016",
            "Laske_PLOSComputBiol2019", "Sneyd_PNAS2002", "Fujita_SciSignal2010", "Elowitz_Nature2000",
            "Brannmark_JBC2010", "Schwen_PONE2014", "Weber_BMC2015", "Raia_CancerResearch2011",
            "Zheng_PNAS2012", "Bachmann_MSB2011"]
METHODS = ("exp2", "exp2-adjoint")


def measure(yaml_path, repeats, spread=False):
    import pbsens.petab as pbpetab
    problem = pbpetab.load(yaml_path)
    theta = np.asarray(problem.x_nominal + 0.1 * np.where(np.arange(problem.dim) % 2, 1.0, -1.0), float)
    calls = {m: (lambda m=m: problem.evaluate(theta, method=m).gradient) for m in METHODS}
    if spread:
        from pbsens.problems.adjoint_evaluation import evaluate_adjoint
        from pbsens.problems.evaluation_setup import _bound_outputs, evaluation_options
        from pbsens.system.threads import blas_single_thread

        def with_spread():
            with blas_single_thread():
                return evaluate_adjoint(problem, theta, True, evaluation_options("exp2-adjoint", True, {}),
                                        _bound_outputs(problem.model), spread=True)["gradient"]
        calls["adjoint + spread"] = with_spread
    grads, times = {}, {m: [] for m in calls}
    for m, fn in calls.items():
        grads[m] = fn()
    for _ in range(repeats):
        for m, fn in calls.items():
            c0 = time.process_time()
            fn()
            times[m].append(time.process_time() - c0)
    fwd, adj = (statistics.median(times[m]) for m in METHODS)
    g0 = grads["exp2"]
    out = dict(states=problem.model.n_states, estimated=problem.dim, conditions=len(problem.conditions),
               measurements=int(problem._rows["measurement"].size), exp2_cpu_s=fwd, adjoint_cpu_s=adj,
               adjoint_over_exp2=adj / fwd,
               gradient_difference=float(np.max(np.abs(grads["exp2-adjoint"] - g0)) / np.max(np.abs(g0))),
               load=os.getloadavg()[0])
    if spread:
        out["spread_cpu_s"] = statistics.median(times["adjoint + spread"])
        out["spread_over_exp2"] = out["spread_cpu_s"] / fwd
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--collection", default=os.environ.get("PBSENS_PETAB_COLLECTION"), required=False)
    ap.add_argument("--problems", nargs="+", default=PROBLEMS)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--spread", action="store_true", help="also the adjoint with the spread's vector")
    args = ap.parse_args(argv)
    if not args.collection:
        ap.error("--collection (or $PBSENS_PETAB_COLLECTION): the collection's Benchmark-Models folder")
    out = {}
    extra = " adjoint + spread ms | (adjoint + spread) / exp2 |" if args.spread else ""
    print("| problem | states | estimated | conditions | exp2 ms | adjoint ms | adjoint / exp2 | gradient diff |" + extra)
    print("|---" * (8 + 2 * args.spread) + "|")
    for name in args.problems:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                r = measure(Path(args.collection) / name / f"{name}.yaml", args.repeats, args.spread)
            except Exception as exc:  # noqa: BLE001 - a problem that fails is reported, the run goes on
                out[name] = dict(error=f"{type(exc).__name__}: {exc}"[:300])
                print(f"| {name} | error: {out[name]['error'][:80]} |", flush=True)
                continue
        out[name] = r
        print(f"| {name} | {r['states']} | {r['estimated']} | {r['conditions']} | {1e3 * r['exp2_cpu_s']:.1f} | "
              f"{1e3 * r['adjoint_cpu_s']:.1f} | {r['adjoint_over_exp2']:.2f} | {r['gradient_difference']:.1e} |"
              + (f" {1e3 * r['spread_cpu_s']:.1f} | {r['spread_over_exp2']:.2f} |" if args.spread else ""),
              flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
