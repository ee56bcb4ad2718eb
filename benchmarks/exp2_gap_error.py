"""Local error of exp2 on Rodas5P's long gaps: one plain step, one corrected step, four sub-steps.

For every gap ``[t_a, t_e]`` of the solver's grid (steps with the 201 output times merged in)
that ``substeps=4`` calls long (longer than 1/4 of its accepted step), starting from the exact
``S(t_a)`` (Radau forward sensitivities, rtol 1e-10) with states from the dense output:

* ``plain``: one exp2 step over the gap;
* ``corrected``: the same step with the midpoint correction of METHOD.md section 14, computed by
  pbsens's kernel (``kernels.midpoint.exp2_correct_into``);
* ``4 sub``: four equal exp2 sub-steps (section 13's refinement, unfrozen);

each against 32 equal exp2 sub-steps (the step's converged value), relative to the plain step's
error. Matrix functions: ``kernels.phi.exp_phi123_into`` (tested against scipy's and mpmath's
exponential of the block matrix in tests/test_linalg_kernels.py).
Slow (Python); not a timing benchmark (docs/PERFORMANCE.md, "Wave 8").

    PYTHONPATH=. python benchmarks/exp2_gap_error.py [--models CaMKII PKA] [--rtol 1e-5]
"""
import argparse

import numpy as np

import pbsens
from pbsens.kernels.linalg import workspace
from pbsens.kernels.midpoint import exp2_correct_into
from pbsens.kernels.phi import exp_phi123_into
from pbsens.solvers.refine import midpoint_plan


def matrix_functions(Abar, h):
    """``[E | F1 | F2 | F3]`` of ``h Abar``."""
    n = Abar.shape[0]
    out = np.empty((n, 4 * n))
    exp_phi123_into(np.ascontiguousarray(Abar), h, out, workspace(n))
    return out


def exp2_steps(jac, ta, te, x_at, S, parts):
    """``parts`` equal unfrozen exp2 steps over ``[ta, te]`` from ``S``."""
    tt = np.linspace(ta, te, parts + 1)
    J = [jac(tt[i], x_at(tt[i])) for i in range(parts + 1)]
    h = (te - ta) / parts
    n = S.shape[0]
    for i in range(parts):
        EF3 = matrix_functions(0.5 * (J[i][0] + J[i + 1][0]), h)
        E, F1, F2 = EF3[:, :n], EF3[:, n:2 * n], EF3[:, 2 * n:3 * n]
        S = E @ S + (F1 - F2 / h) @ J[i][1] + (F2 / h) @ J[i + 1][1]
    return S


def jacobians_and_states(m, tr):
    """``(jac, x_at)``: the model's ``(A, B)`` at ``(t, x)`` with the trajectory's parameters, and the
    trajectory's state at ``s`` (its grid value where ``s`` is a grid point, else the dense output)."""
    nx, n_p = m.n_states, m.n_params

    def jac(t, x):
        A, B = np.empty((nx, nx)), np.empty((nx, n_p))
        m.fns.jacs_into(t, np.ascontiguousarray(x), tr.p, m.constants, A, B)
        return A, B

    def x_at(s):
        hit = np.flatnonzero(tr.t == s)
        return tr.x[hit[0]] if hit.size else np.asarray(tr.sol(s)).reshape(-1)
    return jac, x_at


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
        ref = pbsens.forward_sensitivities(m, (0.0, T), t_eval=tr.t, method="Radau", rtol=1e-10, atol=1e-12)
        nx, n_p = m.n_states, m.n_params
        jac, x_at = jacobians_and_states(m, tr)
        t = tr.t
        _, mid_index = midpoint_plan(t, tr.sol, 4)
        long = np.flatnonzero(mid_index >= 0)
        print(f"\n{name}: {long.size} of {t.size - 1} gaps long at substeps=4 (rtol {args.rtol:g})")
        print("      t_a        H   plain err  corrected / plain   4 sub / plain")
        ratios = []
        for k in long:
            ta, te = t[k], t[k + 1]
            H = te - ta
            Sa = np.ascontiguousarray(ref.S[k])
            S_conv = exp2_steps(jac, ta, te, x_at, Sa, 32)
            S_plain = exp2_steps(jac, ta, te, x_at, Sa, 1)
            S_4 = exp2_steps(jac, ta, te, x_at, Sa, 4)
            (A0, B0), (A1, B1) = jac(ta, x_at(ta)), jac(te, x_at(te))
            Am, Bm = jac(0.5 * (ta + te), x_at(0.5 * (ta + te)))
            Abar = np.ascontiguousarray(0.5 * (A0 + A1))
            EF3 = matrix_functions(Abar, H)
            EG = np.ascontiguousarray(np.hstack([EF3[:, :nx], EF3[:, nx:2 * nx] - EF3[:, 2 * nx:3 * nx] / H,
                                                 EF3[:, 2 * nx:3 * nx] / H]))
            S_corr = np.ascontiguousarray(S_plain.copy())
            work = [np.empty((nx, nx)), np.empty((nx, nx)), np.empty((2 * nx, n_p)), np.empty((nx, n_p)),
                    np.empty((nx, n_p))]
            exp2_correct_into(EG, EF3, H, A0, A1, Am, Abar, B0, B1, Bm, Sa, S_corr, *work)
            e_plain = np.linalg.norm(S_plain - S_conv)
            r_corr = np.linalg.norm(S_corr - S_conv) / e_plain
            r_4 = np.linalg.norm(S_4 - S_conv) / e_plain
            ratios.append((r_corr, r_4))
            print(f"{ta:9.4g} {H:8.3g}   {e_plain:9.2e}  {r_corr:17.3f}  {r_4:14.3f}")
        r = np.array(ratios)
        print(f"{name}: corrected / plain median {np.median(r[:, 0]):.3f}, max {r[:, 0].max():.3f}; "
              f"4 sub-steps / plain median {np.median(r[:, 1]):.3f}, max {r[:, 1].max():.3f}")


if __name__ == "__main__":
    main()
