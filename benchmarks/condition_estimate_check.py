"""exp2's per-condition error estimate against the true error of what ``Problem.evaluate`` returns.

For each PEtab problem folder and each simulation condition at the nominal parameters:
:func:`pbsens.problems.conditions.condition_estimates` (``pbsens petab --estimate-error``: the largest
estimate over the condition's output times) beside the true largest ``E_k`` of the simulation
``evaluate`` runs (exp2 on the compiled Rodas5P at evaluate's defaults, the midpoint correction on)
against forward sensitivities on Rodas5P at rtol 1e-12, atol 1e-14.

    PYTHONPATH=. python benchmarks/condition_estimate_check.py ../shared/petab/Perelson_Science1996 \\
        ../shared/petab/Boehm_JProteomeRes2014 ../shared/petab/Brannmark_JBC2010
"""
from __future__ import annotations

import argparse
import glob
import os
import warnings

import numpy as np

import pbsens.petab
from pbsens.errors import AccuracyWarning
from pbsens.problems.conditions import condition_estimates, evaluation_options, problem_conditions
from pbsens.simulation.segments import simulate


def check(folder):
    """``[(condition, estimate, true largest E)]`` of one PEtab problem folder."""
    yaml = sorted(glob.glob(os.path.join(folder, "*.yaml")))[0]
    problem = pbsens.petab.load(yaml)
    opts = evaluation_options("exp2", True, {})
    est = condition_estimates(problem)
    rows = []
    for name, times, p, x0, S0, _ in problem_conditions(problem, None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AccuracyWarning)
            sim = simulate(problem.model, times, p, x0=x0, S0=S0, method="exp2", **opts)
            ref = simulate(problem.model, times, p, x0=x0, S0=S0, method="fs", solver="rodas5p", rtol=1e-12,
                           atol=1e-14)
        E = [np.linalg.norm(sim.S[k] - ref.S[k]) / max(np.linalg.norm(ref.S[k]), 1e-300) for k in range(1, times.size)]
        rows.append((name, est[name], max(E)))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+")
    args = ap.parse_args(argv)
    print("| problem | condition | estimate | true largest E | estimate / E |")
    print("|---|---|---|---|---|")
    for folder in args.folders:
        for name, est, E in check(folder):
            print(f"| {os.path.basename(os.path.normpath(folder))} | {name} | {est:.2e} | {E:.2e} | {est / E:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
