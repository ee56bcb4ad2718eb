"""Per-gap error of the exp2 step on Rodas5P's grid: a local estimate, and what reaches the outputs.

Issue 19 asked whether ``sensitivities(..., method="exp2")`` could refine the Rodas5P grid
per solver gap, by a cheap indicator, instead of splitting every long gap into 4 parts
(``substeps``). This script measures the ingredients (METHOD.md section 14,
docs/PERFORMANCE.md "Wave 7"):

1. For every gap ``[t_a, t_e]`` that the default refinement splits: the local error of one
   exp2 step over the whole gap, ``|S1 - S16|`` (one step against 16 equal exp2 steps, both
   from the tight reference ``S(t_a)``, states from the dense output), the local estimate
   ``est`` of METHOD.md section 14 (the gap's own phi functions and ``A``, ``B`` at its
   midpoint), and their ratio.
2. The estimate carried to the next output time by the frozen-matrix propagator,
   ``||exp((t_out - t_e) Abar) est|| / ||S(t_out)||``: the part of the gap's error that the
   outputs can see.
3. Refinement masks: only the gaps whose local estimate (relative to ``||S(t_out)||``) or
   propagated contribution exceeds ``tau`` are split into 4 parts; median and largest
   error of S at the 201 outputs against Radau forward sensitivities (rtol 1e-10).

Slow (Python, scipy's expm of the 3n x 3n block matrix); not a timing benchmark.

    PYTHONPATH=. python benchmarks/exp2_gap_error.py [--models CaMKII PKA]
"""
import argparse

import numpy as np
import scipy.linalg

import pbsens
from pbsens.solvers.refine import refine_grid


def phi_blocks(Abar, h):
    """``E, G1 = F1 - F2/h, G2 = F2/h`` of ``h Abar`` from the block-matrix exponential."""
    n = Abar.shape[0]
    M = np.zeros((3 * n, 3 * n))
    M[:n, :n] = h * Abar
    M[:n, n:2 * n] = h * np.eye(n)
    M[n:2 * n, 2 * n:] = h * np.eye(n)
    X = scipy.linalg.expm(M)
    E, F1, F2 = X[:n, :n], X[:n, n:2 * n], X[:n, 2 * n:]
    return E, F1 - F2 / h, F2 / h


def exp2_step(jac, ta, te, xa, xe, S, parts, sol):
    """``parts`` equal exp2 steps over ``[ta, te]`` from ``S`` (interior states from ``sol``)."""
    tt = np.linspace(ta, te, parts + 1)
    xx = sol(tt).T
    xx[0], xx[-1] = xa, xe
    J = [jac(tt[i], xx[i]) for i in range(parts + 1)]
    h = (te - ta) / parts
    for i in range(parts):
        E, G1, G2 = phi_blocks(0.5 * (J[i][0] + J[i + 1][0]), h)
        S = E @ S + G1 @ J[i][1] + G2 @ J[i + 1][1]
    return S


def gap_estimate(jac, ta, te, xa, xe, xm, Sa):
    """Local error estimate of one exp2 step over ``[ta, te]`` (METHOD.md section 14)."""
    H = te - ta
    Aa, Ba = jac(ta, xa)
    Ae, Be = jac(te, xe)
    Am, Bm = jac(0.5 * (ta + te), xm)
    Abar = 0.5 * (Aa + Ae)
    E, G1, G2 = phi_blocks(Abar, H)
    Se = E @ Sa + G1 @ Ba + G2 @ Be
    dA = Ae - Aa
    bump = (Am - Abar) @ (0.5 * (Sa + Se)) + (Bm - 0.5 * (Ba + Be)) - 0.25 * dA @ (Se - Sa)
    return G1 @ (2.0 * bump - 0.5 * dA @ Sa) + 0.5 * G2 @ (dA @ Se), Abar


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["CaMKII", "PKA"])
    ap.add_argument("--rtol", type=float, default=1e-5)
    args = ap.parse_args()
    for name in args.models:
        m = pbsens.load_model(name)
        T = 600.0
        ts = np.linspace(0.0, T, 201)
        tr = pbsens.solve_states(m, (0.0, T), t_eval=ts, method="rodas5p", rtol=args.rtol, atol=args.rtol / 10)
        ref_out = pbsens.forward_sensitivities(m, (0.0, T), t_eval=ts, method="Radau", rtol=1e-10, atol=1e-12)
        ref = pbsens.forward_sensitivities(m, (0.0, T), t_eval=tr.t, method="Radau", rtol=1e-10, atol=1e-12)
        nx, n_p = m.n_states, m.n_params

        def jac(t, x):
            A, B = np.empty((nx, nx)), np.empty((nx, n_p))
            m.fns.jacs_into(t, x, tr.p, m.constants, A, B)
            return A, B

        t = tr.t
        split = np.diff(refine_grid(tr, 4).t.searchsorted(t)) > 1   # the gaps the default splits
        out_pos = np.flatnonzero(np.isin(t, ts))
        print(f"\n{name}: {split.sum()} of {t.size - 1} gaps split by the default (substeps=4)")
        print("     t_a        H   |S1-S16|      est  est/meas  reaching next output")
        rows = []
        for k in np.flatnonzero(split):
            ta, te = t[k], t[k + 1]
            S_a = ref.S[k]
            S1 = exp2_step(jac, ta, te, tr.x[k], tr.x[k + 1], S_a, 1, tr.sol)
            S16 = exp2_step(jac, ta, te, tr.x[k], tr.x[k + 1], S_a, 16, tr.sol)
            est, Abar = gap_estimate(jac, ta, te, tr.x[k], tr.x[k + 1], tr.sol(0.5 * (ta + te)), S_a)
            j = out_pos[np.searchsorted(out_pos, k + 1)]
            n_out = np.linalg.norm(ref.S[j])
            reach = np.linalg.norm(scipy.linalg.expm((t[j] - te) * Abar) @ est) / n_out
            meas = np.linalg.norm(S1 - S16) / n_out
            local = np.linalg.norm(est) / n_out
            rows.append((k, local, reach))
            print(f"{ta:9.4g} {te - ta:8.3g} {meas:10.2e} {local:8.2e} {local / meas:9.2f} {reach:12.2e}")
        rows = np.array(rows)
        for label, col in (("local", 1), ("reaching", 2)):
            for tau in (1e-2, 1e-3, 1e-4, 1e-5):
                only = np.zeros(t.size - 1, dtype=bool)
                only[rows[rows[:, col] > tau, 0].astype(int)] = True
                r = pbsens.sensitivities(m, refine_grid(tr, 4, only=only), method="exp2", t_eval=ts, substeps=1)
                E = pbsens.relative_error(r, ref_out)
                print(f"{name} refine where {label:8s} > {tau:.0e}: {int(only.sum()):3d} gaps split, grid {r.grid.size},"
                      f" median E {np.median(E):.2e}, max E {E.max():.2e}")
        for sub in (4, 1):
            r = pbsens.sensitivities(m, tr, method="exp2", t_eval=ts, substeps=sub)
            E = pbsens.relative_error(r, ref_out)
            print(f"{name} substeps={sub}: grid {r.grid.size}, median E {np.median(E):.2e}, max E {E.max():.2e}")


if __name__ == "__main__":
    main()
