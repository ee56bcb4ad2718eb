"""Probe (issue #41 item 1, not a test, not part of the library): does a fourth-order commutator-free
Magnus step on the states' own grid make the post-hoc S more accurate per interval than exp2?

The step (Blanes and Moan, Appl. Numer. Math. 56 (2006); Thalhammer, SIAM J. Numer. Anal. 44 (2006)),
on the augmented matrix ``W(t) = [[A, B], [0, 0]]`` with ``A``, ``B`` at the Gauss points
``t_k + (1/2 -+ sqrt(3)/6) h`` (states from the solver's dense output):

    S <- E_a S + F1_a (a1 B1 + a2 B2),   then   S <- E_b S + F1_b (a2 B1 + a1 B2),

``E_a, F1_a`` of ``a1 A1 + a2 A2``, ``E_b, F1_b`` of ``a2 A1 + a1 A2``, ``a1, a2 = 1/4 +- sqrt(3)/6``: two
``[E | F1]`` per interval and no commutator (``h^2 ||A||^2`` on stiff intervals). Marched here in NumPy
on Rodas5P's grid (output times merged in) at ``m`` equal sub-steps per interval, against
``pbsens.sensitivities(method="exp2")`` on the same trajectory (``substeps=1``: exp2 on the same grid; the
default: 4 sub-steps on long intervals, the midpoint correction); error ``E_k`` as in
benchmarks/work_precision.py against Radau forward sensitivities at rtol 1e-11.

    OPENBLAS_NUM_THREADS=1 python benchmarks/probe_cf4.py [--models PKA CaMKII] [--rtols 1e-4 1e-6 1e-8]
"""
import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pbsens  # noqa: E402
from pbsens.kernels import linalg  # noqa: E402

CASES = {"PKA": 600.0, "CaMKII": 600.0, "Chua": 10.0}
C1, C2 = 0.5 - np.sqrt(3) / 6, 0.5 + np.sqrt(3) / 6
A1W, A2W = 0.25 + np.sqrt(3) / 6, 0.25 - np.sqrt(3) / 6


def errors(S, Sref):
    K = Sref.shape[0]
    E = (np.linalg.norm((S - Sref).reshape(K, -1), axis=1)
         / np.maximum(np.linalg.norm(Sref.reshape(K, -1), axis=1), 1e-300))[1:]
    return float(np.median(E)), float(E.max())


def cf4_march(m, tr, ts, sub):
    """S at ``ts`` (which are grid points of ``tr.t``) by the CF4 step on every interval's ``sub`` parts."""
    n, p = m.n_states, m.p
    ws = linalg.workspace(n)
    EF = np.empty((n, 2 * n))

    def ef1(A, h):
        linalg.exp_phi1_into(np.ascontiguousarray(A), h, EF, ws)
        return EF[:, :n].copy(), EF[:, n:].copy()
    S = np.array(m.initial_sensitivity(p), float)
    out = {float(tr.t[0]): S.copy()}
    for k in range(tr.t.size - 1):
        pts = np.linspace(tr.t[k], tr.t[k + 1], sub + 1)
        for a, e in zip(pts[:-1], pts[1:]):
            h = e - a
            if h <= 0:
                continue
            g1, g2 = a + C1 * h, a + C2 * h
            x1, x2 = tr.sol(g1), tr.sol(g2)
            J1, B1 = m.jac_x(g1, x1, p), m.jac_p(g1, x1, p)
            J2, B2 = m.jac_x(g2, x2, p), m.jac_p(g2, x2, p)
            Ea, Fa = ef1(A1W * J1 + A2W * J2, h)
            Eb, Fb = ef1(A2W * J1 + A1W * J2, h)
            S = Ea @ S + Fa @ (A1W * B1 + A2W * B2)
            S = Eb @ S + Fb @ (A2W * B1 + A1W * B2)
        out[float(tr.t[k + 1])] = S.copy()
    keys = np.array(sorted(out))
    return np.array([out[float(keys[np.argmin(np.abs(keys - x))])] for x in ts])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=["PKA", "CaMKII"])
    ap.add_argument("--rtols", nargs="+", type=float, default=[1e-4, 1e-6, 1e-8])
    ap.add_argument("--subs", nargs="+", type=int, default=[1, 4, 16])
    args = ap.parse_args()
    print("| model | rtol | grid | exp2 default | exp2 substeps=1 | " + " | ".join(f"CF4 m={s}" for s in args.subs)
          + " |  (median / max E)")
    print("|---" * (5 + len(args.subs)) + "|")
    for name in args.models:
        T = CASES[name]
        m = pbsens.load_model(name)
        ts = np.linspace(0.0, T, 201)
        Sref = pbsens.forward_sensitivities(m, (0.0, T), t_eval=ts, method="Radau", rtol=1e-11, atol=1e-13).S
        for rtol in args.rtols:
            tr = pbsens.solve_states(m, (0.0, T), t_eval=ts, method="rodas5p", rtol=rtol, atol=rtol / 10)
            cells = [errors(pbsens.sensitivities(m, tr, t_eval=ts, method="exp2").S, Sref),
                     errors(pbsens.sensitivities(m, tr, t_eval=ts, method="exp2", substeps=1).S, Sref)]
            cells += [errors(cf4_march(m, tr, ts, s), Sref) for s in args.subs]
            print(f"| {name} | {rtol:.0e} | {tr.t.size} | " + " | ".join(f"{a:.1e} / {b:.1e}" for a, b in cells)
                  + " |", flush=True)


if __name__ == "__main__":
    main()
