"""The spread's second backward vector marched with the gradient's (the dense transpose carries several
vectors through each interval's matrix functions, formed once), before and after, side by side in
alternating fresh processes (:mod:`before_after`).

``method="auto"`` on a problem with >= 100 estimated parameters (``problems.method_choice``) takes the
adjoint and forms the *spread* (the gradient without the residuals' signs) by a second backward
march, to decide whether the gradient cancels; before this change that march re-formed every
interval's Jacobians and matrix functions. Per round and tree, for each ``--problems`` entry of the
PEtab benchmark collection (default Bachmann_MSB2011, 113 parameters, the dense transpose), at
``theta`` = the nominal point shifted by +-0.1 in alternate coordinates (as ``work_precision_petab.py``)
and the defaults (Rodas5P, rtol 1e-8, atol 1e-10): the median CPU time of ``--calls`` calls after a
warm-up of forward ``exp2``, ``exp2-adjoint``, the adjoint with the spread (what ``auto`` pays before
it decides) and ``auto`` itself; the spread and the gradient are compared across the trees (the same
numbers to rounding).

    OPENBLAS_NUM_THREADS=1 python benchmarks/adjoint_spread.py --before /tmp/before --rounds 3 \\
        --collection PATH/Benchmark-Models [--problems Bachmann_MSB2011 Raimundez_PCB2020]
"""
from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from before_after import alternate, parser, table  # noqa: E402
from bench_adjoint import median_time  # noqa: E402
from collection_files import find_yaml  # noqa: E402


def child(args):
    import numpy as np

    import pbsens.petab
    from pbsens.problems.adjoint_evaluation import evaluate_adjoint
    from pbsens.problems.evaluation_setup import _bound_outputs, evaluation_options
    from pbsens.system.threads import blas_single_thread
    warnings.simplefilter("ignore")
    res = {"pbsens": pbsens.__file__}
    for name in args.problems:
        pr = pbsens.petab.load(find_yaml(Path(args.collection) / name))
        th = np.asarray(pr.x_nominal + 0.1 * np.where(np.arange(pr.dim) % 2, 1.0, -1.0), float)

        def spread():
            with blas_single_thread():        # as Problem.evaluate does
                return evaluate_adjoint(pr, th, True, evaluation_options("exp2-adjoint", True, {}),
                                        _bound_outputs(pr.model), spread=True)
        calls = {"exp2": lambda: pr.evaluate(th, method="exp2"),
                 "exp2-adjoint": lambda: pr.evaluate(th, method="exp2-adjoint"),
                 "adjoint + spread": spread,
                 "auto": lambda: pr.evaluate(th, method="auto")}
        for label, fn in calls.items():
            res[f"{name} {label} ms"] = 1e3 * median_time(fn, args.calls)[1]
        out = spread()
        res[f"{name} spread"] = np.asarray(out["spread"]).tolist()
        res[f"{name} gradient"] = np.asarray(out["gradient"]).tolist()
    print(json.dumps(res))


def main(argv=None):
    ap = parser(__doc__, calls=7)
    ap.add_argument("--problems", nargs="+", default=["Bachmann_MSB2011"])
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    if not (args.before and args.collection):
        ap.error("--before and --collection are needed")
    extra = ["--calls", str(args.calls), "--collection", args.collection, "--problems", *args.problems]
    rows = alternate(__file__, args.before, extra, args.rounds)
    import numpy as np
    for name in args.problems:
        for key in ("spread", "gradient"):
            a = np.asarray(rows["before"][-1][f"{name} {key}"])
            b = np.asarray(rows["after"][-1][f"{name} {key}"])
            print(f"{name} {key}: max |after - before| / max |before| = {np.max(np.abs(b - a)) / np.max(np.abs(a)):.2e}")
    table(rows)


if __name__ == "__main__":
    main()
