"""Cost of forward sensitivities (FS) against the state solve and the post-hoc methods.

PKA and CaMKII on [0, 600], rtol 1e-5, atol 1e-6, 201 output times (the paper's
Table 2 setting). Prints the median time (after one warm-up run) of

* the state solve alone (``solve_states``, LSODA),
* FS (``forward_sensitivities``, BDF with the sparse ("structured") Jacobian unless told otherwise),
* if ``pbsens.sensitivities`` exists: state solve + PBSR and state solve + Exp,

and the ratios FS / state, FS / (state + pbsr), FS / (state + exp), all measured
in the same run. Wall-clock and CPU medians are both shown (on a shared machine
the CPU time is the steadier number).

    python benchmarks/bench_forward.py [--repeats 10] [--fs-methods BDF Radau]
                                       [--jacobians structured sparse] [--profile]
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
from pbsens.forward import forward_sensitivities  # noqa: E402

CASES = [("PKA", 600.0), ("CaMKII", 600.0)]
RTOL, ATOL = 1e-5, 1e-6


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
    ap.add_argument("--fs-methods", nargs="+", default=["BDF"], help="scipy methods for FS")
    ap.add_argument("--jacobians", nargs="+", default=["structured"],
                    help="FS Jacobian forms (structured, sparse, block-diagonal, dense, none)")
    ap.add_argument("--profile", action="store_true", help="cProfile one FS run per model")
    args = ap.parse_args()
    repeats = max(5, args.repeats)
    have_posthoc = hasattr(pbsens, "sensitivities")

    print(f"rtol {RTOL:g}, atol {ATOL:g}, 201 output times; median of {repeats} runs after a warm-up; "
          "ms wall / ms CPU")
    if not have_posthoc:
        print("(pbsens.sensitivities not available yet: only FS and the state solve are timed)")
    for name, t_end in CASES:
        m = pbsens.load_model(name)
        ts = np.linspace(0.0, t_end, 201)
        print(f"\n{name}: {m.n_states} states, {m.n_params} parameters, "
              f"augmented FS system {m.n_states * (m.n_params + 1)}")
        rows = {}
        rows["state"] = medians(lambda: pbsens.solve_states(m, (0, t_end), t_eval=ts, rtol=RTOL, atol=ATOL,
                                                            dense_output=False), repeats)
        if have_posthoc:
            for meth in ("pbsr", "exp"):
                rows[f"state+{meth}"] = medians(
                    lambda meth=meth: pbsens.sensitivities(m, t_span=(0, t_end), t_eval=ts, method=meth,
                                                           rtol=RTOL, atol=ATOL), repeats)
        fs_keys = []
        for fs_method in args.fs_methods:
            for jac in args.jacobians:
                key = f"FS {fs_method}/{jac}"
                try:
                    r = forward_sensitivities(m, (0, t_end), t_eval=ts, method=fs_method, rtol=RTOL, atol=ATOL,
                                              jacobian=jac)
                except pbsens.PbsensError as exc:
                    print(f"  {key}: skipped ({exc})")
                    continue
                rows[key] = medians(lambda fs_method=fs_method, jac=jac: forward_sensitivities(
                    m, (0, t_end), t_eval=ts, method=fs_method, rtol=RTOL, atol=ATOL, jacobian=jac), repeats)
                st = r.options["stats"]
                rows[key] = rows[key] + (f"nfev {st['nfev']}, njev {st['njev']}, nlu {st['nlu']}",)
                fs_keys.append(key)
        print(f"  {'':<24} {'wall ms':>9} {'CPU ms':>9}")
        for key, val in rows.items():
            print(f"  {key:<24} {fmt(val)}" + (f"   ({val[2]})" if len(val) > 2 else ""))
        for key in fs_keys:
            fs = rows[key]
            ratios = [("state", rows["state"])]
            if have_posthoc:
                ratios += [("state+pbsr", rows["state+pbsr"]), ("state+exp", rows["state+exp"])]
            text = ", ".join(f"/ ({lbl}) = {fs[0] / v[0]:.1f} wall, {fs[1] / v[1]:.1f} CPU" for lbl, v in ratios)
            print(f"  {key} {text}")
        if args.profile:
            pr = cProfile.Profile()
            fs_method, jac = args.fs_methods[0], args.jacobians[0]
            pr.enable()
            forward_sensitivities(m, (0, t_end), t_eval=ts, method=fs_method, rtol=RTOL, atol=ATOL, jacobian=jac)
            pr.disable()
            out = io.StringIO()
            pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(12)
            print("\n".join(out.getvalue().splitlines()[:30]))


if __name__ == "__main__":
    main()
