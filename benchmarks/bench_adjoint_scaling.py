"""The gradient's cost against the number of parameters at a fixed number of states (issue #40). Not a test.

Generated networks (:func:`pbsens.model.mass_action.random_mass_action_model`, ``n`` species, ``2n``
reactions, seed 0) with ``n_classes = np`` rate-constant classes, all rate constants at 1: the
reactions (species, weights) are the same for every ``np`` (checked), so the ODE and its
trajectory are the same and only the parameterisation changes (``B`` has the same number of
non-zeros, spread over ``np`` columns). On one Rodas5P trajectory (rtol 1e-8, atol 1e-10, dense
output) and a fixed ``dJ/dx`` (seeded normal) at ``--outputs`` output times: the forward
``sensitivities(method="exp2")`` contracted with ``dJ/dx`` against ``adjoint_gradient(method="exp2",
substeps=None)`` (the same grid; ``linalg="auto"``: the sparse march and its transpose for
``n >= 60``), CPU medians of ``--repeats`` after one warm-up, in the same process; the fitted
exponent of CPU against ``np`` (least squares in log-log) for each, and for the adjoint with the
state solve.

Run: ``python benchmarks/bench_adjoint_scaling.py [--n 500] [--nps 10,30,100,300,1000] [--repeats 3]
[--json FILE]``.
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pbsens
from pbsens.model.mass_action import H, RS, random_mass_action_model
from pbsens.sensitivity import sparse as sparse_path
from pbsens.sensitivity.adjoint import adjoint_gradient
from pbsens.sensitivity.posthoc import sensitivities


def cpu_median(fn, repeats):
    """``(median process CPU s, median wall s, last result)`` of ``fn()`` after one warm-up call."""
    out = fn()
    cpu, wall = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
    return statistics.median(cpu), statistics.median(wall), out


def reactions(m):
    """The reaction records of the network's constants without their class (the same network?)."""
    c = m.constants
    n, R = int(c[0]), int(c[1])
    rec = c[H + 2 * n:H + 2 * n + RS * R].reshape(R, RS).copy()
    rec[:, 2] = 0.0                      # the class
    rec[:, 20:] = 0.0                    # B's positions (depend on the classes)
    return np.concatenate([c[H:H + 2 * n], rec.ravel()])


def exponent(x, y):
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--nps", default="10,30,100,300,1000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--t-end", type=float, default=10.0)
    ap.add_argument("--outputs", type=int, default=20)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    nps = [int(v) for v in a.nps.split(",")]
    t_out = np.linspace(a.t_end / a.outputs, a.t_end, a.outputs)
    out = dict(command="python benchmarks/bench_adjoint_scaling.py " + " ".join(sys.argv[1:]),
               date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), loadavg_start=os.getloadavg()[0], rows=[])
    print(f"n = {a.n}, t_end = {a.t_end:g}, {a.outputs} outputs; load average {os.getloadavg()}", flush=True)
    base = None
    for np_ in nps:
        m = random_mass_action_model(a.n, n_classes=np_, seed=0)
        sig = reactions(m)
        if base is None:
            base = sig
        same = bool(np.array_equal(sig, base))
        p = np.ones(np_)
        c_s, _, tr = cpu_median(lambda: pbsens.solve_states(m, (0.0, a.t_end), t_eval=t_out, p=p, method="rodas5p",
                                                            rtol=1e-8, atol=1e-10, dense_output=True), a.repeats)
        dJdx = np.random.default_rng(0).normal(size=(t_out.size, m.n_states))

        def forward():
            r = sensitivities(m, tr, method="exp2", t_eval=t_out)
            return np.einsum("ki,kij->j", dJdx, r.S), r.options["linalg"]

        def adjoint():
            return adjoint_gradient(m, tr, None, t_out, dJdx, method="exp2", substeps=None)

        c_f, w_f, (g_f, linalg) = cpu_median(forward, a.repeats)
        fstats = sparse_path.runner(m).stats.tolist() if linalg == "sparse" else None
        c_a, w_a, g_a = cpu_median(adjoint, a.repeats)
        astats = getattr(sparse_path.runner(m), "adjoint_stats", None)
        diff = float(np.max(np.abs(g_f - g_a)) / np.max(np.abs(g_f)))
        nnz_b = int(sparse_path.runner(m).sj.Bi.size)
        row = dict(np=np_, n=a.n, same_network=same, grid=int(tr.t.size), nnz_B=nnz_b, linalg=linalg,
                   states_cpu_s=c_s, forward_cpu_s=c_f, forward_wall_s=w_f, adjoint_cpu_s=c_a, adjoint_wall_s=w_a,
                   adjoint_vs_forward=diff, forward_stats=fstats,
                   adjoint_stats=None if astats is None else astats.tolist())
        out["rows"].append(row)
        print(f"np {np_:5d} (same network: {same}; grid {tr.t.size}, nnz(B) {nnz_b}, linalg {linalg})  states "
              f"{c_s:7.3f} s   forward exp2 {c_f:8.3f} s   adjoint {c_a:7.3f} s CPU   forward/adjoint "
              f"{c_f / c_a:6.1f}   |g_adj - g_fwd|/|g_fwd| {diff:.1e}   fwd stats {fstats}   adj stats "
              f"{row['adjoint_stats']}", flush=True)
    x = [r["np"] for r in out["rows"]]
    if len(x) > 1:
        fit = dict(adjoint=exponent(x, [r["adjoint_cpu_s"] for r in out["rows"]]),
                   forward=exponent(x, [r["forward_cpu_s"] for r in out["rows"]]),
                   adjoint_with_states=exponent(x, [r["adjoint_cpu_s"] + r["states_cpu_s"] for r in out["rows"]]))
        out["fitted_exponent"] = fit
        print(f"fitted exponent of CPU time vs np: adjoint {fit['adjoint']:.3f}, forward exp2 {fit['forward']:.3f}, "
              f"adjoint + state solve {fit['adjoint_with_states']:.3f}", flush=True)
    out["loadavg_end"] = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
