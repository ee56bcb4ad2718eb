"""Run: nice -n 10 python benchmarks/collection_crauste_shifts.py (from the repository root).

Why Crauste_CellSystems2017's gradient check in ``benchmarks/collection.py`` runs at x_nominal - 0.5
(``--shifts 0.1 -0.1 -0.5``): for uniform shifts ``s`` of every parameter (parameter scale), whether
the llh at ``x_nominal + s`` and at its 24 central-FD neighbours (step 1e-4, Rodas5P rtol 1e-12, atol
1e-14, as collection.py) has a solution over the time span. The model's Pathogen grows as
``rho_P Pathogen^2`` (a finite-time blow-up unless the effectors hold it down); near x_nominal a
separatrix passes within 1e-4 of the point in several directions. Output: one line per shift."""
import os

import numpy as np

import pbsens.petab as pbpetab

FD = dict(solver="rodas5p", rtol=1e-12, atol=1e-14)
y = os.path.join(os.environ.get("PBSENS_PETAB_COLLECTION", "/work/collection/Benchmark-Models"),
                 "Crauste_CellSystems2017", "Crauste_CellSystems2017.yaml")
p = pbpetab.load(y)
x0 = np.asarray(p.x_nominal, float)
for sh in (-1, -0.5, -0.3, -0.2, -0.1, -0.05, -0.02, -0.01, -0.001, 0.0, 0.001, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3,
           0.5, 1):
    th = x0 + sh
    try:
        v = p.llh(th, **FD)
    except Exception as exc:
        print(f"shift {sh:+g}: no solution at theta ({str(exc)[:100]})", flush=True)
        continue
    bad = []
    for i in range(p.dim):
        for s in (1e-4, -1e-4):
            e = np.zeros(p.dim)
            e[i] = s
            try:
                p.llh(th + e, **FD)
            except Exception:
                bad.append(f"{p.parameter_ids[i]}{'+' if s > 0 else '-'}")
    print(f"shift {sh:+g}: llh {v:.10g}, {len(bad)} of {2 * p.dim} FD neighbours without a solution "
          f"{' '.join(bad)}", flush=True)
