"""Per-interval cost of the dense adjoint's matrix functions on a PEtab problem's own grid (issue #40).

``Problem.evaluate(theta, method="exp2-adjoint")`` marches each condition backward over the forward
exp2 march's grid; on the corrected intervals (the midpoint correction, METHOD.md sections 14 and 16)
the dense kernel forms ``[E | F1 | F2 | F3]`` of ``Abar = (A_a + A_e)/2``. This collects every corrected
interval's ``Abar`` and ``h`` of one evaluation (theta = x_nominal + ``--shift``, rtol, atol = rtol/100)
and times, per interval (mean over all of them, after a warm-up pass), ``exp_phi123_into`` (what the
adjoint uses), ``exp_phi12_into`` (``[E | F1 | F2]`` alone) and the LU inverse of ``Abar + L^T L`` with the
model's conservation laws ``L`` (what "Without F3" would add), with the quantiles of ``h ||Abar||_1``.

    PYTHONPATH=. python benchmarks/adjoint_interval_kernels.py --problem Bachmann_MSB2011 \\
        --collection PATH/Benchmark-Models --rtol 1e-5
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pbsens.petab  # noqa: E402
import pbsens.simulation.adjoint as simulation_adjoint  # noqa: E402
from pbsens.kernels import linalg  # noqa: E402
from pbsens.kernels.lapack import inverse_inplace, pivots  # noqa: E402
from pbsens.kernels.phi import exp_phi123_into  # noqa: E402
from pbsens.model.conservation import shared_left_null_space  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collection import find_yaml  # noqa: E402


def corrected_intervals(problem, theta, rtol):
    """``[(Abar, h)]`` of every corrected interval of one adjoint evaluation (the march's own plans)."""
    found = []
    original = simulation_adjoint.march_backward

    def spy(model, setup, opts, mid, dJdx, **kw):
        t, x, p = setup.t, setup.x, setup.p
        if mid is not None:
            for k in np.flatnonzero(np.asarray(mid[1]) >= 0):
                Abar = 0.5 * (model.jac_x(t[k], x[k], p) + model.jac_x(t[k + 1], x[k + 1], p))
                found.append((np.ascontiguousarray(Abar), float(t[k + 1] - t[k])))
        return original(model, setup, opts, mid, dJdx, **kw)
    simulation_adjoint.march_backward = spy
    try:
        problem.evaluate(theta, method="exp2-adjoint", rtol=rtol, atol=rtol / 100)
    finally:
        simulation_adjoint.march_backward = original
    return found


def per_interval_us(fn, mats):
    for A, h in mats:                                    # warm-up (compiled kernels, caches)
        fn(A, h)
    t0 = time.perf_counter()
    for A, h in mats:
        fn(A, h)
    return 1e6 * (time.perf_counter() - t0) / len(mats)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", default="Bachmann_MSB2011")
    ap.add_argument("--collection", required=True)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--shift", type=float, default=0.1)
    args = ap.parse_args(argv)
    problem = pbsens.petab.load(find_yaml(os.path.join(args.collection, args.problem)))
    theta = np.asarray(problem.x_nominal) + args.shift
    mats = corrected_intervals(problem, theta, args.rtol)
    model = problem.model
    n = model.n_states
    L = shared_left_null_space(model)
    LL = L.T @ L
    ws = linalg.workspace(n)
    EF3, EFF, X, ipiv = np.empty((n, 4 * n)), np.empty((n, 3 * n)), np.empty((n, n)), pivots(n)

    def inverse(A, h):
        X[...] = A + LL
        inverse_inplace(X, ipiv)
    rows = [("exp_phi123_into ([E | F1 | F2 | F3], the adjoint's)", lambda A, h: exp_phi123_into(A, h, EF3, ws)),
            ("exp_phi12_into ([E | F1 | F2])", lambda A, h: linalg.exp_phi12_into(A, h, EFF, ws)),
            (f"inverse of Abar + L^T L ({L.shape[0]} laws)", inverse)]
    hn = np.array([h * np.abs(A).sum(axis=0).max() for A, h in mats])
    print(f"{args.problem}: {n} states, {len(mats)} corrected intervals at rtol {args.rtol:g}; "
          f"h ||Abar||_1 quantiles 10/50/90 %: " + ", ".join(f"{q:.3g}" for q in np.quantile(hn, [0.1, 0.5, 0.9])))
    for label, fn in rows:
        print(f"  {label}: {per_interval_us(fn, mats):.1f} us per interval", flush=True)


if __name__ == "__main__":
    main()
