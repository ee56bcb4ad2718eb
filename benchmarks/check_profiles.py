"""Boehm's likelihood profiles against a brute-force check: every profile point re-optimised
(the profiled parameter fixed) from several random starts and from the profile's own point; the
profile's llh must be within 0.1 of the best of those (issue #38).

    python benchmarks/check_profiles.py [--problem PATH.yaml] [--fit DIR] [--starts 4] [--method fs]

Without ``--fit`` a 20-start fit gives the optimum. Writes ``benchmarks/results/profiles_check_<id>.json``
and ``docs/img/profiles_<id>.png``; prints the largest shortfall ``best brute force - profile``.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BOEHM = ROOT / "tests" / "data" / "petab" / "Boehm_JProteomeRes2014" / "Boehm_JProteomeRes2014.yaml"


def main(argv=None):
    import pbsens
    import pbsens.petab
    from pbsens.calibration import FitResult
    from pbsens.calibration.objective import Objective
    from pbsens.calibration.profiles import _optimise_fixed
    from pbsens.report.fit_plots import plot_profiles
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", default=str(BOEHM))
    ap.add_argument("--fit", default=None)
    ap.add_argument("--starts", type=int, default=4, help="random starts per profile point")
    ap.add_argument("--method", default="fs")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    problem = pbsens.petab.load(args.problem)
    fit = FitResult.load(args.fit) if args.fit else pbsens.fit(problem, 20, seed=0, n_workers=args.workers)
    t0 = time.perf_counter()
    prof = pbsens.profile(problem, fit, method=args.method, n_workers=args.workers)
    t_prof = time.perf_counter() - t0
    lb, ub = problem.bounds[:, 0], problem.bounds[:, 1]
    rng = np.random.default_rng(0)
    obj = Objective(problem, method=args.method)
    rows, worst = [], -math.inf
    for pid, p in prof.profiles.items():
        i = p.index
        for t, llh, x in zip(p.theta, p.llh, p.x):
            best = -math.inf
            for z0 in [np.asarray(x)] + [lb + rng.random(lb.size) * (ub - lb) for _ in range(args.starts)]:
                _, f, _ = _optimise_fixed(obj, i, t, z0, lb, ub, "fides", {})
                best = max(best, -f)
            rows.append({"parameter": pid, "theta": t, "profile_llh": llh, "brute_llh": best})
            worst = max(worst, best - llh)
        print(f"{pid:30s} {len(p.theta):3d} points, interval [{p.interval[0]:.4g}, {p.interval[1]:.4g}], "
              f"largest shortfall {max(r['brute_llh'] - r['profile_llh'] for r in rows if r['parameter'] == pid):.2e}",
              flush=True)
    print(f"largest shortfall of the profile below brute force: {worst:.3e} (target <= 0.1); "
          f"profiles took {t_prof:.1f} s wall")
    name = problem.model_id
    out = ROOT / "benchmarks" / "results" / f"profiles_check_{name}.json"
    out.write_text(json.dumps({"problem": name, "best_llh": prof.best_llh, "largest_shortfall": worst,
                               "profile_wall_s": t_prof, "random_starts": args.starts, "method": args.method,
                               "intervals": prof.intervals(), "points": rows}, indent=1, default=float))
    plot_profiles(prof, path=ROOT / "docs" / "img" / f"profiles_{name}.png")
    return 0 if worst <= 0.1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
