"""Does capping PBSR's sub-steps per interval (``n_max``) fix its accuracy per cost?

PBSR refines an interval into ``n_int = ceil(10 h ||A||)`` PBS sub-steps and takes the
first-order exponential step (``exp-stiff``) when ``n_int > n_max`` (the paper: 100).
On Alkan it spends most of its time in PBS sub-steps. This prints, per case, the true
median / max E (reference: forward sensitivities by Rodas5P at rtol 1e-10, atol 1e-12),
the median march time over repeats and the PBS sub-steps, for ``exp2``, ``pbsr`` at
``n_max`` 100 / 20 / 5, ``pbsr2`` at 100 / 5, and ``pbsr`` with the scaled switch norm.

    python benchmarks/bench_pbsr_nmax.py --petab FOLDER --conditions 0 1 5
    python benchmarks/bench_pbsr_nmax.py --models PKA CaMKII Chua
"""
import argparse
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import pbsens  # noqa: E402
from pbsens.problems.conditions import problem_conditions  # noqa: E402
from pbsens.errors import AccuracyWarning  # noqa: E402

VARIANTS = [("exp2", {}), ("pbsr", {}), ("pbsr", {"n_max": 20}), ("pbsr", {"n_max": 5}), ("pbsr2", {}),
            ("pbsr2", {"n_max": 5}), ("pbsr", {"norm": "scaled"})]
SPANS = {"PKA": 600.0, "CaMKII": 600.0, "Chua": 10.0}


def measure(label, m, tr, ref, variants, repeats, **kw):
    for meth, o in variants:
        def f():
            return pbsens.sensitivities(m, tr, method=meth, **kw, **o)
        r = f()
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        E = pbsens.relative_error(r, ref)[1:]
        print(f"{label:20s} {meth:6s} {str(o):18s} medE {np.median(E):.1e} maxE {E.max():.1e} "
              f"ms {1e3 * statistics.median(ts):8.2f} substeps {int(r.n_int[r.branch == 'pbs'].sum())}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--petab", default=None)
    ap.add_argument("--conditions", nargs="*", type=int, default=[0])
    ap.add_argument("--models", nargs="*", default=[])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    warnings.simplefilter("ignore", AccuracyWarning)
    for name in args.models:
        m = pbsens.load_model(name)
        span = (0.0, SPANS[name])
        tr = pbsens.solve_states(m, span, rtol=1e-5, atol=1e-6)
        ref = pbsens.forward_sensitivities(m, span, t_eval=tr.t, method="rodas5p", rtol=1e-10, atol=1e-12)
        measure(name, m, tr, ref, [v for v in VARIANTS if v[0] == "pbsr" and "norm" not in v[1]], args.repeats)
    if args.petab:
        from bench_error_estimate import load_petab
        pr = load_petab(args.petab)
        conds = list(problem_conditions(pr))
        for i in args.conditions:
            cond, times, p, x0, S0, _ = conds[i]
            span = (0.0, float(times[-1]))
            tr = pbsens.solve_states(pr.model, span, t_eval=times, p=p, x0=x0, rtol=1e-5, atol=1e-6)
            ref = pbsens.forward_sensitivities(pr.model, span, t_eval=times, p=p, x0=x0, S0=S0, method="rodas5p",
                                               rtol=1e-10, atol=1e-12)
            measure(cond, pr.model, tr, ref, VARIANTS, args.repeats, S0=S0, t_eval=times)


if __name__ == "__main__":
    main()
