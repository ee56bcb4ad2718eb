"""The adjoint's matrix functions in the coordinates the conservation laws leave, before and after
(``kernels.reduced_adjoint``; issue #40), side by side in alternating fresh processes
(:mod:`before_after`).

Per round and tree, for each ``--problems`` entry of the PEtab benchmark collection (default
Bachmann_MSB2011: 25 states, 3 laws, the dense transpose): ``evaluate(theta, method="exp2-adjoint")``
at each ``--rtols`` value (``atol = rtol / 100``; ``theta`` the nominal point shifted by +-0.1 in
alternate coordinates, as ``work_precision_petab.py``), the median CPU time of ``--calls`` calls
after a warm-up, and the gradient (the two trees' gradients are compared: the same numbers to
rounding). Lang (the sparse transpose, one call costs a minute) is measured by
``bench_lang_adjoint.py`` in each tree instead.

    OPENBLAS_NUM_THREADS=1 python benchmarks/adjoint_laws.py --before /tmp/before --rounds 3 \\
        --collection PATH/Benchmark-Models [--problems Bachmann_MSB2011 ...] [--rtols 1e-5 1e-6]
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
    warnings.simplefilter("ignore")
    res = {"pbsens": pbsens.__file__}
    for name in args.problems:
        pr = pbsens.petab.load(find_yaml(Path(args.collection) / name))
        th = pr.x_nominal + 0.1 * np.where(np.arange(pr.dim) % 2, 1.0, -1.0)
        for rtol in args.rtols:
            def call(rtol=rtol):
                return pr.evaluate(th, method="exp2-adjoint", rtol=rtol, atol=rtol / 100)
            res[f"{name} adjoint rtol {rtol:g} ms"] = 1e3 * median_time(call, args.calls)[1]
            res[f"{name} gradient rtol {rtol:g}"] = np.asarray(call().gradient).tolist()
    print(json.dumps(res))


def main(argv=None):
    ap = parser(__doc__, calls=7)
    ap.add_argument("--problems", nargs="+", default=["Bachmann_MSB2011"])
    ap.add_argument("--rtols", nargs="+", type=float, default=[1e-5, 1e-6])
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    if not args.before or not args.collection:
        ap.error("--before and --collection are required")
    extra = ["--calls", str(args.calls), "--collection", args.collection, "--problems", *args.problems,
             "--rtols", *map(str, args.rtols)]
    rows = alternate(__file__, args.before, extra, args.rounds)
    table(rows)
    import numpy as np
    for key in rows["after"][0]:
        if key.startswith(tuple(args.problems)) and " gradient " in key:
            a, b = np.asarray(rows["after"][0][key]), np.asarray(rows["before"][0][key])
            print(f"{key}: after vs before, max |difference| / max |g| = "
                  f"{np.max(np.abs(a - b)) / np.max(np.abs(b)):.2e}")


if __name__ == "__main__":
    main()
