"""Run: nice -n 10 python benchmarks/collection_lang_kinetic_spot.py [K] (from the repository root).

A supplement to ``benchmarks/collection.py``'s spot check of Lang_PLOSComputBiol2024 (exp2 at
x_nominal + 0.01): there the 3 coordinates of largest |gradient| are noise parameters, whose gradient
entries need no state sensitivities, and 2 of the 3 random ones are initial values of about 1e9 on a
linear scale, in whose direction a step of 1e-4 moves the llh by less than the FD noise. This checks
exp2 (evaluate() defaults) against central finite differences (step 1e-4, Rodas5P rtol 1e-10, atol
1e-12, as the collection run) on the K (default 4) log-scale estimated parameters (the rate constants)
of largest |exp2 gradient|: entries that exist only through the forward sensitivities of the 124 states.
Output: one line per coordinate and the max-norm relative error over them.
"""
import sys
import time

import numpy as np

import pbsens.petab as pbpetab

from collection_lang import LANG_YAML

FD = dict(solver="rodas5p", rtol=1e-10, atol=1e-12)
STEP = 1e-4
k = int(sys.argv[1]) if len(sys.argv) > 1 else 4
P = pbpetab.load(LANG_YAML)
ids = list(P.parameter_ids)
theta = np.asarray(P.x_nominal, dtype=float) + 0.01
t0 = time.perf_counter()
g = np.asarray(P.evaluate(theta, method="exp2").gradient, dtype=float)
print(f"exp2 gradient at x_nominal + 0.01: {time.perf_counter() - t0:.1f} s, max |g| {np.max(np.abs(g)):.4g}", flush=True)
logscale = np.flatnonzero((np.asarray(P._scales) == 1) & np.isfinite(theta))
pick = sorted(logscale[np.argsort(-np.abs(g[logscale]), kind="stable")[:k]].tolist())
fd = []
for i in pick:
    e = np.zeros(P.dim)
    e[i] = STEP
    t0 = time.perf_counter()
    d = (P.llh(theta + e, **FD) - P.llh(theta - e, **FD)) / (2 * STEP)
    fd.append(d)
    print(f"{ids[i]}: exp2 {g[i]:.10g}, FD {d:.10g}, relative difference {abs(g[i] - d) / abs(d):.2e} "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
fd = np.array(fd)
print(f"max-norm relative error of exp2 on these {len(pick)} coordinates: "
      f"{np.max(np.abs(g[pick] - fd)) / np.max(np.abs(fd)):.2e}", flush=True)
