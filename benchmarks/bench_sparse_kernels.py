"""Dense against sparse sensitivity passes (exp2) against n: random sparse linear systems and
mass-action networks (pbsens.model.mass_action), the fitted cost exponent and the crossover.

    python -m benchmarks.bench_sparse_kernels [--ns 50,100,200,500,1000,2000] [--dense-max 400]
                                              [--repeats 3] [--kind mass-action|linear|both]

Per n: one network (seed 0, 20 rate-constant parameters), states by scipy's BDF with the
sparse state Jacobian (rtol 1e-6, atol 1e-9, t in [0, 10]); then the median over
``--repeats`` of one exp2 march with ``linalg="sparse"`` and (n <= --dense-max) with
``linalg="dense"``, their largest relative difference, and the Taylor terms per step of the
sparse action. The exponent b of ``time = a n^b`` is fitted by least squares on log-log.
Prints a Markdown table (docs/PERFORMANCE.md, "Large models: kernels").
"""
import argparse
import time

import numpy as np

import pbsens
from pbsens.model.mass_action import random_mass_action_model
from pbsens.solvers.scipy_steppers import solve_scipy
from pbsens.sensitivity.sparse import runner, state_jacobian


def _median_time(fn, repeats):
    ts = []
    out = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), out


def measure(n, kind, repeats, dense_max, method="exp2"):
    m = random_mass_action_model(n, seed=0, linear=(kind == "linear"))
    t0 = time.perf_counter()
    tr = solve_scipy(m, (0.0, 10.0), rtol=1e-6, atol=1e-9, method="BDF", jac=state_jacobian(m))
    t_state = time.perf_counter() - t0
    pbsens.sensitivities(m, tr, method=method, linalg="sparse")          # compile / warm
    t_sp, rs = _median_time(lambda: pbsens.sensitivities(m, tr, method=method, linalg="sparse"), repeats)
    terms = runner(m).stats[0] / (tr.t.size - 1)
    row = dict(n=n, kind=kind, K=tr.t.size, nnzA=m.jac_x_pattern[1].size, state=t_state, sparse=t_sp,
               terms=terms, dense=np.nan, diff=np.nan)
    if n <= dense_max:
        t_de, rd = _median_time(lambda: pbsens.sensitivities(m, tr, method=method, linalg="dense"),
                                max(1, repeats if n <= 200 else 1))
        row.update(dense=t_de, diff=float(np.max(np.abs(rs.S - rd.S)) / np.max(np.abs(rd.S))))
    return row


def fit(ns, ts):
    ns, ts = np.asarray(ns, float), np.asarray(ts, float)
    ok = np.isfinite(ts)
    b, loga = np.polyfit(np.log(ns[ok]), np.log(ts[ok]), 1)
    return b


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", default="50,100,200,500,1000,2000")
    ap.add_argument("--dense-max", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kind", default="both", choices=("mass-action", "linear", "both"))
    a = ap.parse_args(argv)
    ns = [int(v) for v in a.ns.split(",")]
    kinds = ("linear", "mass-action") if a.kind == "both" else (a.kind,)
    pbsens.sensitivities(random_mass_action_model(10), t_span=(0, 1), method="exp2", solver="LSODA", linalg="sparse")
    print("| network | n | grid points | nnz(A) | state solve (BDF, sparse LU) s | exp2 sparse s | "
          "terms/step | exp2 dense s | dense/sparse | max rel. diff |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind in kinds:
        rows = []
        for n in ns:
            r = measure(n, kind, a.repeats, a.dense_max)
            rows.append(r)
            print(f"| {kind} | {n} | {r['K']} | {r['nnzA']} | {r['state']:.3f} | {r['sparse']:.4f} | "
                  f"{r['terms']:.1f} | {r['dense']:.4f} | {r['dense'] / r['sparse']:.2f} | {r['diff']:.1e} |",
                  flush=True)
        bs = fit([r["n"] for r in rows], [r["sparse"] for r in rows])
        dn = [r for r in rows if np.isfinite(r["dense"])]
        bd = fit([r["n"] for r in dn], [r["dense"] for r in dn]) if len(dn) >= 2 else np.nan
        bk = fit([r["n"] for r in rows], [r["sparse"] / r["K"] for r in rows])
        print(f"\n{kind}: fitted exponent b of time = a n^b: sparse pass {bs:.2f} (per grid step {bk:.2f}), "
              f"dense pass {bd:.2f} (n <= {a.dense_max})\n", flush=True)


if __name__ == "__main__":
    main()
