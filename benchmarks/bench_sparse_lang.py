"""Lang_PLOSComputBiol2024, first condition, nominal parameters: exp2 pass dense against sparse.

    python -m benchmarks.bench_sparse_lang [PETAB_YAML] [--rtol 1e-5] [--atol 1e-6] [--points K]

The problem's parameter table has estimated log-scale parameters with nominal value 0, which
``pbsens.petab.load`` refuses; they are fixed (not estimated) here, which leaves the model and
its nominal parameter vector unchanged. States by LSODA on the condition's output times; then
one exp2 pass with ``linalg="sparse"`` and one with ``linalg="dense"`` on the first K grid
points (default all), their times, the sparse march's Taylor terms per interval, and the largest
relative difference.
"""
import argparse
import time
import warnings

import numpy as np

import pbsens
from pbsens import error_estimate
from pbsens.problems.petab import read_problem
from pbsens.problems.problem import Problem
from pbsens.sparse_path import runner

DEFAULT = "../shared/petab/Lang_PLOSComputBiol2024/Lang_PLOSComputBiol2024.yaml"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("yaml", nargs="?", default=DEFAULT)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--atol", type=float, default=1e-6)
    ap.add_argument("--points", type=int, default=0)
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore", RuntimeWarning)
    problem, files = read_problem(a.yaml)
    df = problem.parameter_df
    df.loc[df.index[(df["estimate"] == 1) & (df["parameterScale"] != "lin") & (df["nominalValue"] <= 0)],
           "estimate"] = 0
    pr = Problem.from_petab(problem, lint=False, files=files)
    m = pr.model
    name, times, p, x0, S0, _ = next(error_estimate.problem_conditions(pr))
    t0 = time.perf_counter()
    tr = pbsens.solve_states(m, (0.0, float(times[-1])), t_eval=times, p=p, x0=x0, rtol=a.rtol, atol=a.atol)
    print(f"{m.name}: condition {name}, n = {m.n_states}, np = {m.n_params}; LSODA rtol {a.rtol:g}: "
          f"{time.perf_counter() - t0:.2f} s, {tr.t.size} grid points", flush=True)
    K = a.points or tr.t.size
    tt, xx = tr.t[:K], tr.x[:K]
    te = tt[np.isin(tt, times)]
    out = {}
    for la in ("sparse", "dense"):
        pbsens.sensitivities(m, (tt[:3], xx[:3]), method="exp2", S0=S0, linalg=la, p=p)   # compile
        t0 = time.perf_counter()
        out[la] = pbsens.sensitivities(m, (tt, xx), method="exp2", S0=S0, linalg=la, p=p, t_eval=te).S
        extra = ""
        if la == "sparse":
            st = runner(m).stats
            extra = f"; Taylor terms/interval {st[0] / (K - 1):.2f}, dense steps {st[2]} of {K - 1}"
        print(f"exp2 {la}: {time.perf_counter() - t0:.2f} s on {K} points{extra}", flush=True)
    d = np.abs(out["sparse"] - out["dense"]).max() / np.abs(out["dense"]).max()
    print(f"max relative difference sparse/dense: {d:.2e}")


if __name__ == "__main__":
    main()
