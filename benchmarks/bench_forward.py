"""Cost of forward sensitivities (FS) against the state solve and the post-hoc methods.

PKA and CaMKII on [0, 600], rtol 1e-5, atol 1e-6, 201 output times (the paper's
Table 2 setting). Prints the median time (after one warm-up run) of

* the state solve alone (``solve_states``, LSODA),
* FS (``forward_sensitivities``): scipy's BDF with the sparse ("structured") Jacobian and pbsens's
  compiled Rodas5P (``method="rodas5p"``, block forward substitution, one nx x nx LU per step),
* if ``pbsens.sensitivities`` exists: state solve + PBSR and state solve + Exp,

and the ratios FS / state, FS / (state + pbsr), FS / (state + exp) and each FS row / the first FS
row (BDF), all measured in the same run, for each rtol given (atol = rtol / 10). Wall-clock and CPU medians are both shown (on a shared machine
the CPU time is the steadier number).

    python benchmarks/bench_forward.py [--repeats 10] [--fs-methods BDF rodas5p]
                                       [--jacobians structured sparse] [--rtols 1e-5 1e-8]
                                       [--fs-only] [--profile] [--linalg]

``--linalg`` estimates what scipy's sparse linear algebra costs inside FS BDF/structured: the median
time of SuperLU's factorisation of the Newton matrix ``I - c J`` (the Jacobian at the middle output
time, ``c`` one average step) and of one solve with it, times the solve's ``nlu`` and its Newton
iterations (``nfev - 2``), next to the FS median. Since pbsens uses public scipy only, BDF and Radau
factorise the ``nx (ns+1)`` square with SuperLU (``scipy.sparse.linalg.splu``); this is the part a
block solve (one ``nx x nx`` LU, as ``method="rodas5p"`` does) would remove.
"""
import argparse
import cProfile
import io
import os
import pstats
import statistics
import time

# Small matrices: OpenBLAS threads only add synchronisation cost on a shared machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pbsens  # noqa: E402
from pbsens.sensitivity.forward import forward_sensitivities  # noqa: E402

CASES = [("PKA", 600.0), ("CaMKII", 600.0)]


def medians(fn, repeats):
    """``(wall, cpu)`` medians in seconds over ``repeats`` runs after a warm-up run."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(wall), statistics.median(cpu)


def fmt(wc):
    return f"{1e3 * wc[0]:9.1f} {1e3 * wc[1]:9.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=10, help="timed runs per case (>= 5)")
    ap.add_argument("--fs-methods", nargs="+", default=["BDF", "rodas5p"], help="FS methods (scipy's or rodas5p)")
    ap.add_argument("--rtols", nargs="+", type=float, default=[1e-5], help="relative tolerances (atol = rtol / 10)")
    ap.add_argument("--fs-only", action="store_true", help="skip the state-solve and post-hoc rows")
    ap.add_argument("--jacobians", nargs="+", default=["structured"],
                    help="FS Jacobian forms (structured, sparse, block-diagonal, dense, none)")
    ap.add_argument("--profile", action="store_true", help="cProfile one FS run per model")
    ap.add_argument("--linalg", action="store_true", help="estimate SuperLU's share of FS BDF (see above)")
    args = ap.parse_args()
    repeats = max(5, args.repeats)
    have_posthoc = hasattr(pbsens, "sensitivities") and not args.fs_only
    for rtol in args.rtols:
        run(args, repeats, have_posthoc, rtol, rtol / 10)


def run(args, repeats, have_posthoc, rtol, atol):
    print(f"\nrtol {rtol:g}, atol {atol:g}, 201 output times; median of {repeats} runs after a warm-up; "
          "ms wall / ms CPU")
    for name, t_end in CASES:
        m = pbsens.load_model(name)
        ts = np.linspace(0.0, t_end, 201)
        print(f"\n{name}: {m.n_states} states, {m.n_params} parameters, "
              f"augmented FS system {m.n_states * (m.n_params + 1)}")
        rows = {}
        if not args.fs_only:
            rows["state"] = medians(lambda: pbsens.solve_states(m, (0, t_end), t_eval=ts, rtol=rtol, atol=atol,
                                                                dense_output=False), repeats)
        if have_posthoc:
            for meth in ("pbsr", "exp"):
                rows[f"state+{meth}"] = medians(
                    lambda meth=meth: pbsens.sensitivities(m, t_span=(0, t_end), t_eval=ts, method=meth,
                                                           solver="LSODA", rtol=rtol, atol=atol), repeats)
        fs_keys = []
        for fs_method in args.fs_methods:
            for jac in args.jacobians:
                key = f"FS {fs_method}/{jac}"
                try:
                    r = forward_sensitivities(m, (0, t_end), t_eval=ts, method=fs_method, rtol=rtol, atol=atol,
                                              jacobian=jac)
                except pbsens.PbsensError as exc:
                    print(f"  {key}: skipped ({exc})")
                    continue
                rows[key] = medians(lambda fs_method=fs_method, jac=jac: forward_sensitivities(
                    m, (0, t_end), t_eval=ts, method=fs_method, rtol=rtol, atol=atol, jacobian=jac), repeats)
                st = r.options["stats"]
                rows[key] = rows[key] + (f"nfev {st['nfev']}, njev {st['njev']}, nlu {st['nlu']}",)
                fs_keys.append(key)
        print(f"  {'':<24} {'wall ms':>9} {'CPU ms':>9}")
        for key, val in rows.items():
            print(f"  {key:<24} {fmt(val)}" + (f"   ({val[2]})" if len(val) > 2 else ""))
        for key in fs_keys:
            fs = rows[key]
            ratios = [] if args.fs_only else [("state", rows["state"])]
            if key != fs_keys[0]:
                ratios.append((fs_keys[0], rows[fs_keys[0]]))
            if have_posthoc:
                ratios += [("state+pbsr", rows["state+pbsr"]), ("state+exp", rows["state+exp"])]
            text = ", ".join(f"/ ({lbl}) = {fs[0] / v[0]:.2f} wall, {fs[1] / v[1]:.2f} CPU" for lbl, v in ratios)
            if text:
                print(f"  {key} {text}")
        if args.linalg and "FS BDF/structured" in rows:
            linalg_share(m, ts, rtol, atol, rows["FS BDF/structured"], repeats)
        if args.profile:
            pr = cProfile.Profile()
            fs_method, jac = args.fs_methods[0], args.jacobians[0]
            pr.enable()
            forward_sensitivities(m, (0, t_end), t_eval=ts, method=fs_method, rtol=rtol, atol=atol, jacobian=jac)
            pr.disable()
            out = io.StringIO()
            pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(12)
            print("\n".join(out.getvalue().splitlines()[:30]))


def linalg_share(m, ts, rtol, atol, fs_row, repeats):
    """Print SuperLU factorisation/solve medians on the FS Newton matrix and their estimated share of FS BDF."""
    from scipy.sparse import identity
    from scipy.sparse.linalg import splu

    from pbsens.sensitivity import forward as fwd
    r = forward_sensitivities(m, (ts[0], ts[-1]), t_eval=ts, method="BDF", rtol=rtol, atol=atol)
    st = r.options["stats"]
    nx, ns = m.n_states, m.n_params
    idx = np.arange(ns, dtype=np.int64)
    k = ts.size // 2
    z = np.concatenate([r.x[k], r.S[k].T.ravel()])
    fun, column = fwd._scipy_system(m, m.p, idx)
    J = fwd._scipy_jacobian("structured", column, nx, ns)(ts[k], z)
    M = identity(J.shape[0], format="csc") - ((ts[-1] - ts[0]) / st["n_steps"]) * J
    lu = splu(M)
    b = fun(ts[k], z)
    t_lu = medians(lambda: splu(M), repeats)
    t_solve = medians(lambda: lu.solve(b), 5 * repeats)
    n_solve = st["nfev"] - 2
    est = (st["nlu"] * t_lu[1] + n_solve * t_solve[1])
    print(f"  SuperLU on the {J.shape[0]}-square Newton matrix (nnz {M.nnz}, L+U {lu.L.nnz + lu.U.nnz}): "
          f"factorise {1e3 * t_lu[1]:.2f} ms CPU, solve {1e6 * t_solve[1]:.0f} us CPU; "
          f"x {st['nlu']} LUs + {n_solve} solves = {1e3 * est:.1f} ms = {est / fs_row[1]:.0%} of FS BDF CPU")


if __name__ == "__main__":
    main()
