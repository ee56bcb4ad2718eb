"""The register tiles' vector width, before and after (``kernels.tiles.vector_lanes``), side by side.

Runs the same measurement in two source trees, alternating between them: ``--before`` (a checkout
of the commit before the change, e.g. ``git worktree add /tmp/before 63530d7``, its kernels
compiled once by a first run) and this repository. Each round starts one fresh process per tree
(``python benchmarks/tile_lanes.py --child``, ``PYTHONPATH`` set to the tree, numba's cache warm)
that measures, after a warm-up call each:

* the default ``pbsens.sensitivities`` call on PKA, CaMKII (on [0, 600]) and Chua (on [0, 10]),
  201 outputs: the median CPU time of ``--calls`` calls;
* Bachmann_MSB2011 (25 states, 113 estimated parameters) at its nominal parameters:
  ``evaluate`` with ``exp2``, ``exp2-adjoint`` and ``fs``: the median CPU time of 3 calls;
* with ``--lang``: Lang_PLOSComputBiol2024, condition ``wt`` (124 states), the exp2 march with the
  midpoint correction on Rodas5P at rtol 1e-4 on 16 parameter columns: one call's CPU time;
* ``kernels.phi.exp_phi12_into`` on a random stable 124 x 124 matrix (h ||A|| ~ 1e3): median of 15.

Printed per figure: the median over rounds of each tree's value and after / before.

    OPENBLAS_NUM_THREADS=1 python benchmarks/tile_lanes.py --before /tmp/before --rounds 3 \\
        --collection /work/collection/Benchmark-Models [--lang ../shared/petab/Lang_PLOSComputBiol2024]
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
SPANS = {"PKA": 600.0, "CaMKII": 600.0, "Chua": 10.0}


def _cpu(fn, n):
    """Median process CPU seconds of ``n`` calls after a warm-up (:func:`bench_adjoint.median_time`)."""
    return median_time(fn, n)[1]


def child(args):
    import numpy as np

    import pbsens
    import pbsens.petab
    from pbsens.kernels import tiles
    warnings.simplefilter("ignore")
    res = {"lanes": tiles.LANES, "pbsens": pbsens.__file__}
    for name, T in SPANS.items():
        m = pbsens.load_model(name)
        ts = np.linspace(0.0, T, 201)
        res[f"{name} default call ms"] = 1e3 * _cpu(lambda: pbsens.sensitivities(m, t_span=(0.0, T), t_eval=ts),
                                                    args.calls)
    if args.collection:
        pr = pbsens.petab.load(Path(args.collection) / "Bachmann_MSB2011" / "Bachmann_MSB2011.yaml")
        th = np.asarray(pr.x_nominal, dtype=float)
        for method in ("exp2", "exp2-adjoint", "fs"):
            res[f"Bachmann {method} ms"] = 1e3 * _cpu(lambda: pr.evaluate(th, method=method), 3)
    if args.lang:
        from pbsens.problems import conditions
        from pbsens.problems.petab import read_problem
        from pbsens.problems.problem import Problem
        problem, files = read_problem(find_yaml(args.lang))
        df = problem.parameter_df
        df.loc[df.index[(df["estimate"] == 1) & (df["parameterScale"] != "lin") & (df["nominalValue"] <= 0)],
               "estimate"] = 0
        lang = Problem.from_petab(problem, lint=False, files=files)
        _, times, p, x0, S0, _ = next(conditions.problem_conditions(lang))
        cols = list(range(16))
        res["Lang 16 columns, rtol 1e-4, s"] = _cpu(lambda: pbsens.sensitivities(
            lang.model, t_span=(0.0, float(times[-1])), t_eval=times, p=p, x0=x0, S0=S0[:, cols], params=cols,
            solver="rodas5p", rtol=1e-4, atol=1e-6), 1)
    from pbsens.kernels.linalg import workspace
    from pbsens.kernels.phi import exp_phi12_into
    rng = np.random.default_rng(0)
    n = 124
    A = rng.standard_normal((n, n)) / np.sqrt(n) - 2.0 * np.eye(n)
    out = np.empty((n, 3 * n))
    ws = workspace(n)
    res["exp_phi12_into 124 ms"] = 1e3 * _cpu(lambda: exp_phi12_into(A, 300.0, out, ws), 15)
    print(json.dumps(res))


def main(argv=None):
    ap = parser(__doc__, calls=10)
    ap.add_argument("--lang", default=None, help="Lang_PLOSComputBiol2024's folder")
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    if not args.before:
        ap.error("--before is required")
    extra = ["--calls", str(args.calls)] + (["--collection", args.collection] if args.collection else []) \
        + (["--lang", args.lang] if args.lang else [])
    rows = alternate(__file__, args.before, extra, args.rounds)
    print(f"\nlanes: before {rows['before'][0]['lanes']}, after {rows['after'][0]['lanes']}")
    table(rows, skip=("lanes",))


if __name__ == "__main__":
    main()
