"""Lang_PLOSComputBiol2024, first condition, nominal parameters: the exp2 pass on several grids and
parameter sets, dense against sparse, and its error against tight forward sensitivities.

    python -m benchmarks.bench_sparse_lang [PETAB_YAML] [--rtol 1e-5] [--atol 1e-6] [--points K]
        [--grid lsoda,rodas5p,outputs] [--params all,estimated] [--linalg sparse,dense]
        [--reference FILE.npz] [--fs-params 16] [--fs-rtol 1e-9] [--kernel K] [--repeats N]

The problem's parameter table has estimated log-scale parameters with nominal value 0; they are
fixed (not estimated) here, which leaves the model and its nominal parameter vector unchanged.

Grids: ``march``: the one-call pipeline ``sensitivities(t_span=..., solver="rodas5p")`` (the
library's march: the exp2 midpoint correction on long steps; timed with the state solve);
``lsoda``: LSODA's grid (rtol, atol) with the output times merged; ``rodas5p``: the
compiled Rodas5P's accepted steps with the output times merged (``substeps=1``); ``outputs``:
the 600 output times only, states from Rodas5P's dense output. Parameters: ``all`` (722 model
parameters) or ``estimated`` (the PEtab problem's estimated ones that are model parameters,
``sensitivities(..., params=...)``); with ``--reference`` also ``reference`` (the reference's columns;
grid ``march`` only). For every (grid, params, linalg) one timed exp2 pass
(compiled on three points first). ``--reference``: forward sensitivities (Rodas5P, rtol
``--fs-rtol``, atol 1e-2 of it) on ``--fs-params`` parameters drawn from the estimated ones with
a non-zero column of ``B`` (seed 1), computed once and stored in FILE.npz (reused when it
exists); each pass's ``E_k = ||S_k - S_ref,k||_F / ||S_ref,k||_F`` over those columns at the
600 output times (median and max) is printed.
"""
import argparse
import os
import time
import warnings

import numpy as np

import pbsens
from pbsens.problems import conditions
from pbsens.problems.petab import read_problem
from pbsens.problems.problem import Problem
from pbsens.sensitivity.sparse import runner

DEFAULT = "../shared/petab/Lang_PLOSComputBiol2024/Lang_PLOSComputBiol2024.yaml"


def _reference(m, times, p, x0, S0, cols, rtol, path):
    if path and os.path.exists(path):
        d = np.load(path)
        if list(d["cols"]) == list(cols):
            return d["S"]
    t0 = time.perf_counter()
    r = pbsens.forward_sensitivities(m, (0.0, float(times[-1])), t_eval=times, p=p, x0=x0, S0=S0[:, cols],
                                     method="rodas5p", rtol=rtol, atol=rtol * 1e-2, params=cols,
                                     max_steps=2_000_000)
    print(f"forward sensitivities (Rodas5P, rtol {rtol:g}) on {len(cols)} parameters: "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    if path:
        np.savez(path, S=r.S, cols=np.asarray(cols))
    return r.S


def _kernel_timing(m, times, p, x0, a):
    """``exp_phi12_into`` (deflating the isolated fast states) against the plain scaling and squaring,
    on Lang's Jacobians at ``a.kernel`` points of Rodas5P's grid with that grid's step there."""
    from pbsens.kernels import phi
    from pbsens.kernels import phi_deflate
    from pbsens.kernels.dense import workspace
    tr = pbsens.solve_states(m, (0.0, float(times[-1])), t_eval=times, p=p, x0=x0, method="rodas5p",
                             rtol=a.rtol, atol=a.atol)
    n = m.n_states
    ws, out, ref = workspace(n), np.empty((n, 3 * n)), np.empty((n, 3 * n))
    picks = np.linspace(1, tr.t.size - 2, a.kernel).astype(int)
    rows = []
    for k in picks:
        A = np.ascontiguousarray(m.jac_x(tr.t[k], tr.x[k], p))
        h = float(tr.t[k + 1] - tr.t[k])
        nd = phi_deflate.deflate_prepare(A, h, workspace(n))
        td, tp = [], []
        for _ in range(15):
            t0 = time.process_time()
            phi.exp_phi12_into(A, h, out, ws)
            t1 = time.process_time()
            phi._exp_phi12_plain_into(A, h, ref, ws)
            tp.append(time.process_time() - t1)
            td.append(t1 - t0)
        diff = max(np.linalg.norm(out[:, b * n:(b + 1) * n] - ref[:, b * n:(b + 1) * n])
                   / np.linalg.norm(out[:, b * n:(b + 1) * n]) for b in range(3))
        rows.append((np.median(td), np.median(tp)))
        print(f"t = {tr.t[k]:.6g}, h = {h:.3g}: {nd} fast state(s) deflated; {np.median(td) * 1e3:.2f} ms against "
              f"{np.median(tp) * 1e3:.2f} ms plain ({np.median(tp) / np.median(td):.2f}x); relative difference "
              f"{diff:.1e}", flush=True)
    d, q = np.array(rows).T
    print(f"median over the points: {np.median(d) * 1e3:.2f} ms against {np.median(q) * 1e3:.2f} ms "
          f"({np.median(q / d):.2f}x); load {os.getloadavg()[0]:.1f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("yaml", nargs="?", default=DEFAULT)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--atol", type=float, default=1e-6)
    ap.add_argument("--points", type=int, default=0, help="first K grid points only (lsoda grid)")
    ap.add_argument("--grid", default="lsoda")
    ap.add_argument("--params", default="all")
    ap.add_argument("--linalg", default="sparse,dense")
    ap.add_argument("--reference", default="")
    ap.add_argument("--repeats", type=int, default=1, help="grid march: the median wall time of this many passes")
    ap.add_argument("--fs-params", type=int, default=16)
    ap.add_argument("--fs-rtol", type=float, default=1e-9)
    ap.add_argument("--kernel", type=int, default=0, metavar="K",
                    help="only time exp_phi12_into with and without the fast-state deflation at K points of "
                         "Rodas5P's grid (interleaved, medians of 15), and their difference")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore", RuntimeWarning)
    problem, files = read_problem(a.yaml)
    df = problem.parameter_df
    df.loc[df.index[(df["estimate"] == 1) & (df["parameterScale"] != "lin") & (df["nominalValue"] <= 0)],
           "estimate"] = 0
    pr = Problem.from_petab(problem, lint=False, files=files)
    m = pr.model
    name, times, p, x0, S0, _ = next(conditions.problem_conditions(pr))
    est_names = set(problem.parameter_df.index[problem.parameter_df["estimate"] == 1])
    estimated = [j for j, nm in enumerate(m.param_names) if nm in est_names]
    print(f"{m.name}: condition {name}, n = {m.n_states}, np = {m.n_params} ({len(estimated)} estimated), "
          f"{times.size} output times; load {os.getloadavg()[0]:.1f}", flush=True)
    if a.kernel:
        _kernel_timing(m, times, p, x0, a)
        return
    cols = None
    S_ref = None
    if a.reference:
        from pbsens.model.sparsity import sparse_jacobians
        with_b = set(np.unique(sparse_jacobians(m).Bi).tolist())
        pool = [j for j in estimated if j in with_b]
        cols = sorted(np.random.default_rng(1).choice(pool, min(a.fs_params, len(pool)), replace=False).tolist())
        S_ref = _reference(m, times, p, x0, S0, cols, a.fs_rtol, a.reference)
    grids = {}
    for g in a.grid.split(","):
        if g == "march":
            continue
        t0 = time.perf_counter()
        if g == "lsoda":
            tr = pbsens.solve_states(m, (0.0, float(times[-1])), t_eval=times, p=p, x0=x0, rtol=a.rtol, atol=a.atol)
            K = a.points or tr.t.size
            tt, xx = tr.t[:K], tr.x[:K]
        else:
            tr = pbsens.solve_states(m, (0.0, float(times[-1])), t_eval=times, p=p, x0=x0, method="rodas5p",
                                     rtol=a.rtol, atol=a.atol)
            tt, xx = tr.t, tr.x
            if g == "outputs":
                keep = np.isin(tt, times)
                tt, xx = tt[keep], xx[keep]
        grids[g] = (tt, xx)
        print(f"grid {g}: {tt.size} points, state solve {time.perf_counter() - t0:.2f} s", flush=True)
    if "march" in a.grid.split(","):
        # the one-call pipeline: compiled Rodas5P and the library's march (exp2: the midpoint correction on
        # the solver's long steps; METHOD.md section 14), the output times as t_eval
        for ps in a.params.split(","):
            sel = None if ps == "all" else (cols if ps == "reference" else estimated)
            kw = dict(t_span=(0.0, float(times[-1])), solver="rodas5p", rtol=a.rtol, atol=a.atol, method="exp2",
                      p=p, x0=x0, S0=S0, params=sel)
            pbsens.sensitivities(m, t_eval=times[:3], **dict(kw, t_span=(0.0, float(times[2]))))
            walls = []
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                r = pbsens.sensitivities(m, t_eval=times, **kw)
                walls.append(time.perf_counter() - t0)
            dt = float(np.median(walls))
            extra = ""
            if S_ref is not None:
                idx = [r.param_names.index(m.param_names[j]) for j in cols]
                D = r.S[:, :, idx] - S_ref
                E = np.sqrt((D ** 2).sum(axis=(1, 2)) / np.maximum((S_ref ** 2).sum(axis=(1, 2)), 1e-300))
                extra = f"; E vs FS on {len(cols)} columns: median {np.median(E[1:]):.2e}, max {E[1:].max():.2e}"
            print(f"exp2, the library's march on Rodas5P (rtol {a.rtol:g}), params {ps} ({r.S.shape[2]}): "
                  f"{dt:.2f} s (states included; median of {a.repeats}: {', '.join(f'{w:.2f}' for w in walls)} in "
                  f"order){extra}; load {os.getloadavg()[0]:.1f}",
                  flush=True)
    for g, (tt, xx) in grids.items():
        te = tt[np.isin(tt, times)]
        for ps in a.params.split(","):
            sel = None if ps == "all" else estimated
            out = {}
            for la in a.linalg.split(","):
                pbsens.sensitivities(m, (tt[:3], xx[:3]), method="exp2", S0=S0, linalg=la, p=p, params=sel)
                t0 = time.perf_counter()
                r = pbsens.sensitivities(m, (tt, xx), method="exp2", S0=S0, linalg=la, p=p, t_eval=te, params=sel)
                dt = time.perf_counter() - t0
                out[la] = r
                extra = ""
                if la == "sparse":
                    st = runner(m).stats
                    extra = f", dense steps {st[2]} of {tt.size - 1}"
                if S_ref is not None and te.size == times.size:
                    idx = [r.param_names.index(m.param_names[j]) for j in cols]
                    D = r.S[:, :, idx] - S_ref
                    E = np.sqrt((D ** 2).sum(axis=(1, 2)) / np.maximum((S_ref ** 2).sum(axis=(1, 2)), 1e-300))
                    extra += f"; E vs FS on {len(cols)} columns: median {np.median(E[1:]):.2e}, max {E[1:].max():.2e}"
                print(f"exp2 {la}, grid {g} ({tt.size} points), params {ps} ({r.S.shape[2]}): {dt:.2f} s{extra}; "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
            if len(out) == 2:
                s, d = out["sparse"].S, out["dense"].S
                print(f"  max relative difference sparse/dense: {np.abs(s - d).max() / np.abs(d).max():.2e}")


if __name__ == "__main__":
    main()
