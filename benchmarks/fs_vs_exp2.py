"""Forward sensitivities against the default post-hoc gradient at the same tolerances.

For each PEtab problem, ``Problem.evaluate(theta, method=m)`` for ``m`` in ``exp2`` and ``fs`` at
the evaluation's default tolerances (rtol 1e-8, atol 1e-10) and ``theta = x_nominal + 0.1`` on the
parameter scale (a non-finite entry, a nominal 0 on a log scale, set to 0 there): one warm-up call
per method, then the median CPU time of ``--repeats`` calls, and the ratio fs / exp2. The two
gradients' errors are not measured here (fs's is 1-3 decades smaller at the same rtol:
``work_precision_petab.py``, docs/COVERAGE.md's gradient columns); this answers "is fs dearer at the
same settings", which decides whether ``method="auto"`` may take it without a tolerance of its own.

    OPENBLAS_NUM_THREADS=1 python benchmarks/fs_vs_exp2.py --collection PATH/Benchmark-Models \\
        [--problems Boehm_JProteomeRes2014 ...] [--repeats 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_adjoint import median_time  # noqa: E402
from collection_files import find_yaml  # noqa: E402

#: The collection's problems with at most ~70 estimated parameters and a cheap gradient.
PROBLEMS = ["Armistead_CellDeathDis2024", "Bertozzi_PNAS2020", "Blasi_CellSystems2016", "Boehm_JProteomeRes2014",
            "Borghans_BiophysChem1997", "Brannmark_JBC2010", "Bruno_JExpBot2016", "Crauste_CellSystems2017",
            "Elowitz_Nature2000", "Fiedler_BMCSystBiol2016", "Fujita_SciSignal2010", "Giordano_Nature2020",
            "Liu_IFACPapersOnLine2025", "Okuonghae_ChaosSolitonsFractals2020", "Oliveira_NatCommun2021",
            "Perelson_Science1996", "Rahman_MBS2016", "Raia_CancerResearch2011", "Schwen_PONE2014",
            "Sneyd_PNAS2002", "Weber_BMC2015", "Zhao_QuantBiol2020", "Zheng_PNAS2012", "Beer_MolBioSystems2014",
            "Laske_PLOSComputBiol2019"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collection", default=os.environ.get("PBSENS_PETAB_COLLECTION"), required=False)
    ap.add_argument("--problems", nargs="+", default=PROBLEMS)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    if not args.collection:
        ap.error("--collection (the collection's Benchmark-Models folder) is required")
    import pbsens.petab
    ratios = []
    for name in args.problems:
        try:
            problem = pbsens.petab.load(find_yaml(Path(args.collection) / name))
            theta = np.asarray(problem.x_nominal, dtype=float) + 0.1
            theta = np.where(np.isfinite(theta), theta, 0.0)
            t = {m: median_time(lambda m=m: problem.evaluate(theta, method=m), args.repeats)[1] for m in ("exp2", "fs")}
        except Exception as exc:          # a problem that does not load or solve is reported, not fatal
            print(f"{name} failed {type(exc).__name__} {str(exc)[:100]}", flush=True)
            continue
        ratios.append(t["fs"] / t["exp2"])
        print(f"{name:36s} dim {problem.dim:4d} nx {problem.model.n_states:4d}  exp2 {1e3 * t['exp2']:9.2f} ms  "
              f"fs {1e3 * t['fs']:9.2f} ms  fs/exp2 {ratios[-1]:.2f}", flush=True)
    if ratios:
        print(f"\nfs / exp2 over {len(ratios)} problems: median {statistics.median(ratios):.2f}, "
              f"min {min(ratios):.2f}, max {max(ratios):.2f}; fs cheaper on {sum(r < 1 for r in ratios)}")


if __name__ == "__main__":
    main()
