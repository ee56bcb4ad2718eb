"""Lang_PLOSComputBiol2024 at its nominal point: forward exp2 against the post-hoc adjoint gradient on the
sparse path (issue #40). Not a test.

    python benchmarks/bench_lang_adjoint.py [--yaml PATH] [--repeats R] [--all-estimated] [--json OUT]

Rounds: one warm-up round, then ``R`` timed rounds (default 2); each round calls
``Problem.evaluate(theta, method="exp2")`` and ``method="exp2-adjoint"`` once, interleaved, in this process.
Printed per call (and written to ``--json`` after every round, with the gradient difference): process
CPU seconds, of them the CPU seconds inside the sparse forward march
(``SparseRunner.__call__``) or the sparse adjoint march (``SparseRunner.adjoint``) (the rest: state solve,
grid set-up, outputs), and the branch counts of both marches (``stats``, ``adjoint_stats``). At the end:
median CPU per method over the timed rounds, their ratio, the max-norm relative difference of the two
gradients, and the CPU of one dense ``[E | F1 | F2 | F3]`` (``exp_phi123_into``, 124 states) on a stiff
interval of the grid (median of 5), which is what the adjoint evaluates on a dense-step interval with the
midpoint correction.

Parameters: by default the three estimated log-scale parameters with nominal value 0 are fixed as
``bench_adjoint.load_problem`` does (291 estimated); ``--all-estimated``: all 294 (nominal 0 on a log
scale is the value 0, gradient entry 0).
"""
import argparse
import json
import os
import statistics
import sys
import time
from types import SimpleNamespace

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_adjoint import load_problem  # noqa: E402

from pbsens.sensitivity import sparse as sparse_path  # noqa: E402

DEFAULT = "/work/collection/Benchmark-Models/Lang_PLOSComputBiol2024/Lang_PLOSComputBiol2024.yaml"

_march_cpu = {"forward": 0.0, "adjoint": 0.0}
_last = {}


def _timed(name, fn):
    def wrapper(self, *args, **kw):
        c0 = time.process_time()
        try:
            return fn(self, *args, **kw)
        finally:
            _march_cpu[name] += time.process_time() - c0
            if name == "adjoint":
                _last["args"] = (self, args, kw)
    return wrapper


sparse_path.SparseRunner.__call__ = _timed("forward", sparse_path.SparseRunner.__call__)
sparse_path.SparseRunner.adjoint = _timed("adjoint", sparse_path.SparseRunner.adjoint)


def dense_phi_cpu(runner, t, x, p, repeats=5):
    """CPU of one exp_phi123_into on the scattered Abar of the grid's stiffest interval (median)."""
    from pbsens.kernels import linalg
    from pbsens.kernels.phi import exp_phi123_into
    from pbsens.model.sparsity import _dense_jacs
    h = np.diff(t)
    k = int(np.argmax(h))
    A0 = _dense_jacs(runner.model, t[k], x[k], p)[0]
    A1 = _dense_jacs(runner.model, t[k + 1], x[k + 1], p)[0]
    Abar = 0.5 * (A0 + A1)
    n = Abar.shape[0]
    EF3 = np.empty((n, 4 * n))
    ws = linalg.workspace(n)
    exp_phi123_into(Abar, h[k], EF3, ws)
    ts = []
    for _ in range(repeats):
        c0 = time.process_time()
        exp_phi123_into(Abar, h[k], EF3, ws)
        ts.append(time.process_time() - c0)
    return statistics.median(ts), float(h[k] * np.max(np.abs(Abar).sum(axis=0)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yaml", default=DEFAULT)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--all-estimated", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--spread", action="store_true",
                    help="also time the adjoint with the spread's second backward march (what method='auto' "
                         "would pay with the adjoint: pbsens.problems.method_choice)")
    args = ap.parse_args()
    if args.all_estimated:
        import pbsens
        pr, fixed = pbsens.petab.load(args.yaml), []
    else:
        pr, fixed = load_problem(args.yaml)
    th = pr.x_nominal
    print(f"theta {pr.dim} (fixed: {fixed}), states {pr.model.n_states}, load avg {os.getloadavg()[0]:.1f}",
          flush=True)
    methods = ("exp2", "exp2-adjoint") + (("exp2-adjoint+spread",) if args.spread else ())
    cpu = {m: [] for m in methods}
    march = {m: [] for m in methods}
    grads = {}
    rec = dict(theta=pr.dim, fixed=fixed, rounds=[])
    for r in range(args.repeats + 1):
        for m in methods:
            for key in _march_cpu:
                _march_cpu[key] = 0.0
            c0 = time.process_time()
            if m == "exp2-adjoint+spread":
                from pbsens.problems.adjoint_evaluation import evaluate_adjoint
                from pbsens.problems.evaluation_setup import _bound_outputs, evaluation_options
                from pbsens.system.threads import blas_single_thread
                with blas_single_thread():       # as Problem.evaluate does
                    res = SimpleNamespace(**evaluate_adjoint(pr, np.asarray(th, float), True,
                                                             evaluation_options("exp2-adjoint", True, {}),
                                                             _bound_outputs(pr.model), spread=True))
            else:
                res = pr.evaluate(th, method=m)
            c = time.process_time() - c0
            key = "adjoint" if "adjoint" in m else "forward"
            run = sparse_path.runner(pr.model)
            st = (run.adjoint_stats if key == "adjoint" else run.stats).tolist()
            grads[m] = np.asarray(res.gradient)
            print(f"round {r}{' (warm-up)' if r == 0 else ''} {m:13s} CPU {c:8.2f} s, march {_march_cpu[key]:8.2f} s, "
                  f"stats {st}, load {os.getloadavg()[0]:.1f}", flush=True)
            rec["rounds"].append(dict(round=r, method=m, cpu_s=c, march_cpu_s=_march_cpu[key], stats=st))
            if r > 0:
                cpu[m].append(c)
                march[m].append(_march_cpu[key])
        d = float(np.max(np.abs(grads["exp2"] - grads["exp2-adjoint"])) / np.max(np.abs(grads["exp2"])))
        print(f"round {r}: |g_adjoint - g_exp2|_max / |g_exp2|_max = {d:.2e}", flush=True)
        rec["rounds"][-1]["grad_rel_diff"] = d
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(dict(rec, gradient_exp2=grads["exp2"].tolist(),
                               gradient_adjoint=grads["exp2-adjoint"].tolist()), fh, indent=1)
    d = float(np.max(np.abs(grads["exp2"] - grads["exp2-adjoint"])) / np.max(np.abs(grads["exp2"])))
    med = {m: statistics.median(cpu[m]) for m in methods} if args.repeats else {m: float("nan") for m in methods}
    mm = {m: statistics.median(march[m]) for m in methods} if args.repeats else {m: float("nan") for m in methods}
    print(f"median CPU over {args.repeats} rounds: exp2 {med['exp2']:.2f} s (march {mm['exp2']:.2f}), "
          f"exp2-adjoint {med['exp2-adjoint']:.2f} s (march {mm['exp2-adjoint']:.2f}); "
          f"adjoint / forward {med['exp2-adjoint'] / med['exp2']:.3f}", flush=True)
    print(f"|g_adjoint - g_exp2|_max / |g_exp2|_max = {d:.2e}", flush=True)
    run, a, _ = _last["args"]
    phi, hnorm = dense_phi_cpu(run, a[0], a[1], a[2])
    print(f"one exp_phi123_into (124 states, the longest interval, h||Abar||_1 = {hnorm:.2e}): {phi * 1e3:.2f} ms CPU",
          flush=True)
    rec.update(median_cpu_s=med, median_march_cpu_s=mm, grad_rel_diff=d, phi123_cpu_s=phi, phi123_hnorm=hnorm,
               gradient_exp2=grads["exp2"].tolist(), gradient_adjoint=grads["exp2-adjoint"].tolist())
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rec, fh, indent=1)


if __name__ == "__main__":
    main()
