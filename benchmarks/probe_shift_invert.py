"""Probe (issue #40, not a test, not part of the library): can a shift-and-invert Krylov method replace the
dense matrix functions on the stiff dense-step intervals of Lang's adjoint march?

On Lang the adjoint's march is ~8,100 dense evaluations of ``[E | F1 | F2 | F3]`` of ``Abar`` (124 states,
``h ||Abar||_1`` up to 8e9, ~33 doublings each). One vector's ``f(h Abar^T) lam`` (``f`` = exp, and the
``F_j``) from a rational Krylov space of ``(I - gamma h Abar^T)^-1`` would cost one LU and ``m`` solves
instead (van den Eshof and Hochbruck, SIAM J. Sci. Comput. 27 (2006)). This script takes the grid of one
``exp2-adjoint`` evaluation, samples intervals, and compares, for a random ``lam``, the Krylov
approximations at ``m`` = 8 ... 30 (projected matrix ``(I - H_m^-1) / gamma`` as in that paper, or the
Rayleigh quotient ``V^T Abar^T V``) with the dense kernel (:func:`pbsens.kernels.phi.exp_phi123_into`);
a second dense reference (scipy's ``expm`` of the augmented matrix) says how far the dense values
themselves can be trusted on these intervals.

    OPENBLAS_NUM_THREADS=1 python benchmarks/probe_shift_invert.py --yaml PATH/Lang_PLOSComputBiol2024.yaml \
        [--samples 60] [--gamma 0.1]
"""
import argparse
import os
import sys
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import scipy.linalg as sl  # noqa: E402

sys.path.append(os.path.dirname(os.path.abspath(__file__)))
from bench_adjoint import load_problem  # noqa: E402

from pbsens.kernels import linalg  # noqa: E402
from pbsens.kernels.phi import exp_phi123_into  # noqa: E402
from pbsens.model.sparsity import _dense_jacs  # noqa: E402
from pbsens.sensitivity import sparse as sparse_path  # noqa: E402

MS = (8, 12, 16, 20, 30)


def funcs_dense(A, h):
    """``[E | F1 | F2 | F3]`` of ``A`` for the step ``h`` (the march's kernel)."""
    n = A.shape[0]
    EF3 = np.empty((n, 4 * n))
    exp_phi123_into(np.ascontiguousarray(A), h, EF3, linalg.workspace(n))
    return EF3


def transposed_vectors(A, h, lam):
    n = A.shape[0]
    EF3 = funcs_dense(A, h)
    return [lam @ EF3[:, j * n:(j + 1) * n] for j in range(4)]


def augmented_reference(A, h, lam):
    """The same four vectors from one scipy ``expm`` of the augmented matrix (an independent evaluation)."""
    n = A.shape[0]
    W = np.zeros((n + 3, n + 3))
    W[:n, :n] = h * A.T
    W[:n, n] = lam
    W[n, n + 1] = 1.0
    W[n + 1, n + 2] = 1.0
    X = sl.expm(W)
    return [sl.expm(h * A.T) @ lam, h * X[:n, n], h ** 2 * X[:n, n + 1], h ** 3 * X[:n, n + 2]]


def shift_invert(A, h, lam, gamma, projection):
    """``{m: [E^T lam, F1^T lam, F2^T lam, F3^T lam]}`` from the Krylov space of ``(I - gamma h A^T)^-1``."""
    n = A.shape[0]
    M = A.T
    g = gamma * h
    lu = sl.lu_factor(np.eye(n) - g * M)
    beta = np.linalg.norm(lam)
    mmax = max(MS)
    V = np.zeros((n, mmax + 1))
    H = np.zeros((mmax + 1, mmax))
    V[:, 0] = lam / beta
    out = {}
    for j in range(mmax):
        w = sl.lu_solve(lu, V[:, j])
        for _ in range(2):                      # Gram-Schmidt twice
            for i in range(j + 1):
                c = V[:, i] @ w
                H[i, j] += c
                w -= c * V[:, i]
        H[j + 1, j] = np.linalg.norm(w)
        m = j + 1
        if m in MS:
            Vm = V[:, :m]
            if projection == "inverse":
                Ms = (np.eye(m) - np.linalg.inv(H[:m, :m])) / g
            else:
                Ms = Vm.T @ (M @ Vm)
            EF = np.empty((m, 4 * m))
            exp_phi123_into(np.ascontiguousarray(Ms), h, EF, linalg.workspace(m))
            out[m] = [beta * Vm @ EF[:, q * m] for q in range(4)]
        if not H[j + 1, j] > 1e-300:
            break
        V[:, j + 1] = w / H[j + 1, j]
    return out


def rel(a, b):
    return max(np.linalg.norm(a[q] - b[q]) / max(np.linalg.norm(b[q]), 1e-300) for q in range(4))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yaml", required=True)
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--gamma", type=float, default=0.1)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    grids = []
    original = sparse_path.SparseRunner.adjoint

    def capture(self, t, x, p, *a, **kw):
        grids.append((np.array(t), np.array(x), np.array(p)))
        return original(self, t, x, p, *a, **kw)
    sparse_path.SparseRunner.adjoint = capture
    pr, _ = load_problem(args.yaml)
    pr.evaluate(pr.x_nominal, method="exp2-adjoint")
    rng = np.random.default_rng(0)
    rows = []
    for t, x, p in grids:
        h = np.diff(t)
        ks = rng.choice(h.size, size=min(args.samples, h.size), replace=False)
        for k in ks:
            A = 0.5 * (_dense_jacs(pr.model, t[k], x[k], p)[0] + _dense_jacs(pr.model, t[k + 1], x[k + 1], p)[0])
            lam = rng.standard_normal(A.shape[0])
            ref = transposed_vectors(A, h[k], lam)
            row = dict(hnorm=h[k] * np.abs(A).sum(axis=0).max(), refs=rel(augmented_reference(A, h[k], lam), ref))
            for proj in ("inverse", "rayleigh"):
                out = shift_invert(A, h[k], lam, args.gamma, proj)
                errs = [rel(out[m], ref) for m in MS]
                row[proj] = errs
            rows.append(row)
    print(f"{len(rows)} intervals of {sum(g[0].size - 1 for g in grids)}, gamma = {args.gamma} h; error: max over "
          f"E^T lam, F1^T lam, F2^T lam, F3^T lam of the relative 2-norm error against the dense kernel")
    print("| h ||Abar||_1 | dense vs scipy augmented | " + " | ".join(
        f"{proj} m={m}" for proj in ("inverse", "rayleigh") for m in MS) + " |")
    print("|---" * (2 + 2 * len(MS)) + "|")
    for r in sorted(rows, key=lambda r: r["hnorm"]):
        print(f"| {r['hnorm']:.1e} | {r['refs']:.1e} | " + " | ".join(
            f"{e:.1e}" for proj in ("inverse", "rayleigh") for e in r[proj]) + " |")
    for proj in ("inverse", "rayleigh"):
        best = np.array([np.nanmin(r[proj]) if np.any(np.isfinite(r[proj])) else np.inf for r in rows])
        refs = np.array([r["refs"] for r in rows])
        print(f"{proj}: best over m below 1e-6 on {np.mean(best < 1e-6):.0%} of the intervals, within 100x of the "
              f"two dense references' difference on {np.mean(best < 100 * np.maximum(refs, 1e-14)):.0%}; "
              f"median best {np.median(best):.1e}, max {np.max(best):.1e}")


if __name__ == "__main__":
    main()
