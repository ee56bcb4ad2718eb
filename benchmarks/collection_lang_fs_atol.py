"""Run: nice -n 10 python benchmarks/collection_lang_fs_atol.py (from the repository root).

Why Lang_PLOSComputBiol2024's forward sensitivities (``evaluate(method="fs")``) stall near t = 3e-4
at evaluate()'s defaults (see ``collection_lang_diagnosis.py``): fs's absolute tolerance. The
sensitivity column of parameter ``p_j`` gets ``atol / |p_j|`` (``pbsens.sensitivity.forward``,
as CVODES scales it); Lang's states are molecule counts up to 7.5e11 and its 97 estimated initial values
(linear scale) have a median of 5.7e9, so at atol 1e-10 their columns are held to an absolute
error of ~1e-20. How far fs gets at rtol 1e-8 as atol grows: 16 seeded ``ic_wt_*`` columns (1500
steps, x_nominal) and the problem's fs on all 294 columns (1000 steps, x_nominal + 0.01).
"""

import numpy as np

import pbsens
import pbsens.petab as pbpetab
from pbsens.problems.priors import unscale

from collection_lang import LANG_YAML, reached

P = pbpetab.load(LANG_YAML)
plan = P._plans[0]
x_nom = np.asarray(P.x_nominal, dtype=float)
times = np.asarray(plan.times, dtype=float)
p, x0, S0 = P._condition_start(plan, unscale(x_nom, P._scales), True, {})
ic = sorted(j for _, j in plan.reinit)
cols = sorted(np.random.default_rng(1).choice(ic, 16, replace=False).tolist())
print(f"16 ic_wt_* columns, |p_j| from {np.min(np.abs(p[cols])):.3g} to {np.max(np.abs(p[cols])):.3g}", flush=True)




for atol in (1e-10, 1e-2):
    print(f"16 ic columns, rtol 1e-8, atol {atol:g}: " + reached(lambda: pbsens.forward_sensitivities(
        P.model, (0.0, float(times[-1])), t_eval=times, p=p, x0=x0, S0=S0[:, cols], method="rodas5p", rtol=1e-8,
        atol=atol, params=cols, max_steps=1500), times[-1]), flush=True)
for atol in (1e-10, 1e-2, 1.0, 100.0):
    print(f"problem fs at x_nominal + 0.01, rtol 1e-8, atol {atol:g}: " + reached(lambda: P.evaluate(
        x_nom + 0.01, method="fs", rtol=1e-8, atol=atol, max_steps=1000), times[-1]), flush=True)
