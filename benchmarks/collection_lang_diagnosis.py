"""Run: nice -n 10 python benchmarks/collection_lang_diagnosis.py (from the repository root).

Why Lang_PLOSComputBiol2024's gradient check in ``benchmarks/collection.py`` runs at x_nominal + 0.01
with fs at rtol 1e-6 (``--shifts 0.01 --fs-rtol 1e-6 --fs-atol 1e-8``). Output: one block per question.

1. x_nominal -/+ 0.1: the state solve with Rodas5P (rtol 1e-8 and 1e-10) and scipy's BDF and LSODA
   (rtol 1e-8), max over states of max_t |x - x_Rodas5P| / max_t |x| at the 600 output times, and the
   largest |x|: the same bounded trajectories (no blow-up). 130 of the 294 estimated parameters are on
   a linear scale; the 8 observable scales ``s*`` have nominal values 6e-12 ... 2e-10: a uniform shift of
   -0.1 makes them (and ``noiseParameter1``, 0.0016) negative, and the noise formula of
   ``obs_cycA__nuc_median`` on the first row is recomputed here from those parameters and the states;
   +0.1 multiplies them by 5e8 to 1.6e10.
2. x_nominal: central FD at step 1e-4 cannot be taken in ``sCCNA`` (6.6e-11 - 1e-4 < 0: negative noise).
3. Forward sensitivities (Rodas5P, compiled) on 16 seeded ``ic_wt_*`` columns, at most 1500 steps:
   how far in time they get at rtol 1e-8 (atol 1e-10, evaluate()'s defaults) and at rtol 1e-6
   (atol 1e-8), at x_nominal and x_nominal + 0.01; the state solve alone for comparison. 3b: the
   problem's fs (``evaluate(method="fs")``, all 294 columns), at most 1000 steps, at x_nominal,
   + 0.01 and + 0.1 (rtol 1e-8) and at + 0.01 with rtol 1e-6.
4. The couplings ``C_j = d(A S_j + B_j)/dx`` of the forward-sensitivity Jacobian come from forward
   differences of the exact Jacobians with the increment ``sqrt(eps) max(|x_k|, 1e-3 max|x|, 1e-12)``
   (``pbsens/kernels/augmented.py``). Lang's rate laws are mass action (the Jacobians are affine in x),
   so a 1e4 times larger increment gives the same derivative up to rounding: the largest relative
   difference of dA/dx_k between the two increments, at t = 0. (A copy of pbsens with the larger
   increment, 1e-4 instead of sqrt(eps), in ``augmented.py`` stalls the same way: these
   differences are not the cause; ``collection_lang_fs_atol.py`` finds the cause.)
"""
import time

import numpy as np

import pbsens
import pbsens.petab as pbpetab
from pbsens.problems.priors import unscale

from collection_lang import LANG_YAML, reached

P = pbpetab.load(LANG_YAML)
plan = P._plans[0]                      # the problem's one condition, 'wt'
ids = list(P.parameter_ids)
x_nom = np.asarray(P.x_nominal, dtype=float)
lin = np.asarray(P._scales) == 0
times = np.asarray(plan.times, dtype=float)
model = P.model
print(f"{P.dim} estimated parameters, {int(lin.sum())} on a linear scale; {model.n_states} states, "
      f"t up to {times[-1]:g}", flush=True)




def start(theta, sens=False):
    return P._condition_start(plan, unscale(theta, P._scales), sens, {})


def states(theta, method, rtol):
    p, x0, _ = start(theta)
    kw = {} if method == "rodas5p" else {"max_nfev": 3_000_000}
    tr = pbsens.solve_states(model, (0.0, float(times[-1])), t_eval=times, p=p, x0=x0, method=method,
                             rtol=rtol, atol=rtol * 1e-2, **kw)
    return tr.x[tr.eval_index]


print("\n1. state solves at x_nominal -/+ 0.1", flush=True)
obs = ["_Nuc__CCNA_CDKN1A_B_", "_Nuc__CCNA_CDKN1A_B_1__CDKN1A_CCNE_A_B_1_Ser130u_",
       "_Nuc__CCNA_CDKN1A_B_1__CDKN1B_CCNE_A_1_Thr187u_", "_Nuc__CCNA_CDKN1A_B_1__CDKN1B_CCNE_A_1_Thr187p_"]
for shift in (-0.1, 0.1):
    th = x_nom + shift
    ref = states(th, "rodas5p", 1e-8)
    scale = np.maximum(np.max(np.abs(ref), axis=0), 1e-6)
    line = [f"shift {shift:+g}: Rodas5P rtol 1e-8: max|x| {np.max(np.abs(ref)):.3e}, min x {ref.min():.3g}"]
    for method, rtol in (("rodas5p", 1e-10), ("BDF", 1e-8), ("LSODA", 1e-8)):
        X = states(th, method, rtol)
        line.append(f"{method} rtol {rtol:g}: rel. diff {np.max(np.max(np.abs(X - ref), axis=0) / scale):.2e}")
    print("; ".join(line), flush=True)
    v = lambda name: th[ids.index(name)]          # noqa: E731 (all linear-scale parameters)
    total = sum(ref[0, model.state_names.index(s)] for s in obs)
    sigma = v("noiseParameter1") + v("noiseParameter2_cycA_nuc") * (v("oCCNA") + v("sCCNA") * total)
    print(f"  sCCNA {v('sCCNA'):.4g}, noiseParameter1 {v('noiseParameter1'):.4g}, the four states at t = 0 sum to "
          f"{total:.4g}: noise formula of obs_cycA__nuc_median, row 1 = {sigma:.10g}", flush=True)
small = [(ids[i], x_nom[i]) for i in np.flatnonzero(lin & (x_nom > 0) & (x_nom < 1e-4))]
print("  linear-scale estimated parameters in (0, 1e-4) at x_nominal: "
      + ", ".join(f"{n} {x:.3g}" for n, x in small), flush=True)

print("\n2. central FD at x_nominal, step 1e-4", flush=True)
th = x_nom.copy()
th[ids.index("sCCNA")] -= 1e-4
try:
    print(f"  llh at sCCNA - 1e-4: {P.llh(th):.10g}", flush=True)
except Exception as exc:
    msg = str(exc)
    print(f"  llh at sCCNA - 1e-4: {type(exc).__name__}: ...{msg[msg.find('the noise formula'):msg.find(' for measurement')]}",
          flush=True)

print("\n3. forward sensitivities on 16 ic_wt_* columns, at most 1500 Rodas5P steps", flush=True)
ic = sorted(j for _, j in plan.reinit)
cols = sorted(np.random.default_rng(1).choice(ic, 16, replace=False).tolist())
for shift in (0.0, 0.01):
    th = x_nom + shift
    p, x0, S0 = start(th, sens=True)
    t0 = time.perf_counter()
    tr = pbsens.solve_states(model, (0.0, float(times[-1])), t_eval=times, p=p, x0=x0, method="rodas5p",
                             rtol=1e-8, atol=1e-10)
    print(f"  shift {shift:+g}: states alone (rtol 1e-8): {tr.stats['n_steps']} steps to t = {times[-1]:g} "
          f"({int(np.sum(tr.t < 0.03))} grid points before t = 0.03), {time.perf_counter() - t0:.1f} s", flush=True)
    for rtol in (1e-8, 1e-6):
        got = reached(lambda: pbsens.forward_sensitivities(
            model, (0.0, float(times[-1])), t_eval=times, p=p, x0=x0, S0=S0[:, cols], method="rodas5p", rtol=rtol,
            atol=rtol * 1e-2, params=cols, max_steps=1500), times[-1])
        print(f"  shift {shift:+g}: fs rtol {rtol:g}: {got}", flush=True)

print("\n3b. fs through the problem (all 294 columns), at most 1000 Rodas5P steps", flush=True)
for shift, rtol in ((0.0, 1e-8), (0.01, 1e-8), (0.1, 1e-8), (0.01, 1e-6)):
    got = reached(lambda: P.evaluate(x_nom + shift, method="fs", rtol=rtol, atol=rtol * 1e-2, max_steps=1000),
                  times[-1])
    print(f"  shift {shift:+g}: fs rtol {rtol:g}: {got}", flush=True)

print("\n4. forward-difference couplings at t = 0 (x_nominal)", flush=True)
p, x0, _ = start(x_nom)
n, c = model.n_states, model.constants


def jac_a(x):
    A = np.zeros((n, n))
    B = np.zeros((n, model.n_params))
    model.fns.jacs_into(0.0, x, p, c, A, B)
    return A


A0 = jac_a(x0)
xmax = np.max(np.abs(x0))
worst, where, n_bad = 0.0, None, 0
for k in range(n):
    d = 1.4901161193847656e-08 * max(abs(x0[k]), 1e-3 * xmax, 1e-12)
    xs, xb = x0.copy(), x0.copy()
    xs[k] += d
    xb[k] += 1e4 * d
    ds = (jac_a(xs) - A0) / (xs[k] - x0[k])
    db = (jac_a(xb) - A0) / (xb[k] - x0[k])
    nz = db != 0.0
    if nz.any():
        e = np.abs(ds - db)[nz] / np.abs(db)[nz]
        n_bad += int(np.sum(e > 1e-6))
        if e.max() > worst:
            worst, where = float(e.max()), k
print(f"  largest relative difference of dA/dx_k (kernel increment vs 1e4 x it): {worst:.3g} "
      f"(x_k = {model.state_names[where]}, {x0[where]:.3g}; max|x| {xmax:.3g}); "
      f"{n_bad} entries differ by more than 1e-6", flush=True)
