"""Lang_PLOSComputBiol2024: per interval, the branch the sparse forward exp2 march takes and what the sparse
adjoint decides there (issue #40, the slow adjoint). Not a test, not a timing.

    python benchmarks/lang_adjoint_branches.py

Runs ``Problem.evaluate(x_nominal, method="exp2-adjoint")`` (291 estimated: the three log-scale nominals
0 fixed, ``bench_adjoint.load_problem``) up to the sparse adjoint march, which is replaced by this
analysis: the Jacobians at every grid point (and midpoint) from the model's dense ``jacs_into``, then per
interval ``choose_step`` for the forward's marched columns (dense step or action, its plan's ``m s``),
the adjoint's "sure for the action" test (``_ms_upper``), the plan for one vector and ``_vectors``'
choice on dense-step intervals, and the half steps' plans on action intervals with the midpoint.
Prints the counts (``sure & fwd dense`` must be 0: the adjoint then takes the forward's branch) and
``h ||Abar||_1``'s quantiles. The per-interval rows go to /tmp/lang_adjoint_branches.pkl.
"""
import math
import os
import pickle
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_adjoint import load_problem  # noqa: E402

from pbsens.kernels import expmv  # noqa: E402
from pbsens.kernels import sparse_adjoint as sa  # noqa: E402
from pbsens.kernels import sparse_march as sm  # noqa: E402
from pbsens.model.sparsity import _dense_jacs  # noqa: E402
from pbsens.sensitivity import sparse as sp  # noqa: E402

Y = "/work/collection/Benchmark-Models/Lang_PLOSComputBiol2024/Lang_PLOSComputBiol2024.yaml"
class Stop(Exception): pass
def gath(model, sj, t, x, p):
    A, B = _dense_jacs(model, t, x, p)
    ra = np.repeat(np.arange(sj.Ap.size - 1), np.diff(sj.Ap)); rb = np.repeat(np.arange(sj.Bp.size - 1), np.diff(sj.Bp))
    return np.ascontiguousarray(A[ra, sj.Ai]), np.ascontiguousarray(B[rb, sj.Bi])
def cap(self, t, x, p, out_index, dJdx, method_code, lam_end=None, cols=None, nonzero_start=None, mid=None):
    sj = self.sj; model = self.model
    nx = model.n_states
    active, Rp, Ri, Rsel = sp._reduced_pattern(sj.Bp, sj.Bi, np.asarray(cols, np.int64), np.asarray(nonzero_start, bool))
    npf = active.size
    X_mid, mid_index = mid if mid is not None else (np.empty((0, nx)), np.full(t.size - 1, -1))
    print("K", t.size, "nx", nx, "nnzA", sj.Ai.size, "np_fwd", npf, "mid intervals", int((mid_index >= 0).sum()), flush=True)
    tpos = sm._transpose_positions(sj.Ap, sj.Ai)
    TT = np.empty((expmv.NV, max(nx, npf))); dwork = np.empty(2 * (expmv.P_MAX + 2))
    J = [gath(model, sj, t[k], x[k], p) for k in range(t.size)]
    rows = []
    nnz = sj.Ai.size
    for k in range(t.size - 1):
        h = t[k + 1] - t[k]
        A0, Bf0 = J[k]; A1, Bf1 = J[k + 1]
        B0 = np.ascontiguousarray(Bf0[Rsel]); B1 = np.ascontiguousarray(Bf1[Rsel])
        Abar = 0.5 * (A0 + A1); Dd = np.ascontiguousarray(B1 - B0)
        ud, mu, g, m, s = sm.choose_step(sj.Ap, sj.Ai, Abar, Rp, Ri, B0, Dd, True, h, npf, 1000, tpos, TT, dwork)
        nrm = h * expmv.csr_norm1_shifted(sj.Ap, sj.Ai, Abar, 0.0, TT[0])
        sd = math.ceil(math.log2(nrm / sm._DENSE_THETA)) if nrm > sm._DENSE_THETA else 0
        cost_dense = (7 + 3 * sd) * nx ** 3 + 3 * nx * nx * npf
        ub = sa._ms_upper(sj.Ap, sj.Ai, Abar, Rp, Ri, B0, Dd, True, h, npf, TT[0])
        sure = cost_dense >= sm.SPARSE_WEIGHT * ub * (nnz + 2 * nx) * npf
        mu1, g1, m1, s1 = expmv.expmv_plan(sj.Ap, sj.Ai, Abar, Rp, Ri, B0, Dd, True, h, 1, TT, dwork)
        rho = sm.rho_lower_bound(sj.Ap, sj.Ai, Abar, tpos)
        ismid = mid_index[k] >= 0
        n_act = 2 if ismid else 1
        rowcost = nnz + 5.0 * nx
        cost_d1 = (7 + 3 * sd) * nx ** 3 * (1.5 if ismid else 1.0)
        floor1 = sm.SPARSE_WEIGHT * sm.MS_PER_RHO * h * rho * rowcost * n_act
        if cost_d1 < floor1: vdm = True
        else: vdm = cost_d1 < sm.SPARSE_WEIGHT * m1 * s1 * rowcost * n_act
        half = []
        if ismid and not ud:
            Am, Bfm = gath(model, sj, 0.5 * (t[k] + t[k + 1]), X_mid[mid_index[k]], p); Bm = np.ascontiguousarray(Bfm[Rsel])
            for (Aa, Ae, Ba, Be) in ((A0, Am, B0, Bm), (Am, A1, Bm, B1)):
                r = expmv.expmv_plan(sj.Ap, sj.Ai, 0.5 * (Aa + Ae), Rp, Ri, Ba, np.ascontiguousarray(Be - Ba), True, 0.5 * h, 1, TT, dwork)
                rf = expmv.expmv_plan(sj.Ap, sj.Ai, 0.5 * (Aa + Ae), Rp, Ri, Ba, np.ascontiguousarray(Be - Ba), True, 0.5 * h, npf, TT, dwork)
                half.append((r[2] * r[3], rf[2] * rf[3]))
        rows.append((k, h, nrm, rho * h, ud, m * s, sure, ub, m1 * s1, vdm, ismid, half))
    pickle.dump(rows, open("/tmp/lang_adjoint_branches.pkl", "wb"))
    ud = np.array([r[4] for r in rows]); sure = np.array([r[6] for r in rows]); vdm = np.array([r[9] for r in rows]); ismid = np.array([r[10] for r in rows])
    print("forward dense", ud.sum(), "action", (~ud).sum(), "; adjoint sure(action)", sure.sum(), "sure&fwd dense (MISMATCH)", (sure & ud).sum())
    print("dense intervals: _vectors dense", (ud & vdm).sum(), " taction", (ud & ~vdm).sum())
    ms1 = np.array([r[8] for r in rows], float)
    sel = ud & ~vdm
    if sel.any():
        print("taction on dense intervals: m*s (1 vec) sum", ms1[sel].sum(), "max", ms1[sel].max(), "median", np.median(ms1[sel]))
    act = ~ud
    msf = np.array([r[5] for r in rows], float)
    print("action intervals: fwd m*s sum", msf[act].sum(), "max", msf[act].max() if act.any() else 0, "mid", (act & ismid).sum())
    hs = [x for r in rows for x in r[11]]
    if hs: print("half steps (1vec ms, fwd ms): sum", np.sum(hs, axis=0), "max", np.max(hs, axis=0))
    nr = np.array([r[2] for r in rows]); print("h||A|| quantiles", np.quantile(nr, [0, .1, .5, .9, 1]))
    raise Stop


def main():
    pr, _ = load_problem(sys.argv[1] if len(sys.argv) > 1 else Y)
    sp.SparseRunner.adjoint = cap
    try:
        pr.evaluate(pr.x_nominal, method="exp2-adjoint")
    except Stop:
        pass


if __name__ == "__main__":
    main()
