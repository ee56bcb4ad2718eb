"""Post-hoc adjoint gradient against the forward march (issue #40). Not a test.

Two parts, medians of ``--repeats`` timings after one warm-up call, all in the same run (wall
and process CPU time: the machine is shared, so the CPU time is the one to compare):

* ``--problems YAML ...`` (default Boehm): PEtab problems at their nominal point.
  ``Problem.evaluate`` with ``method="exp2"`` (the default: midpoint correction), ``"fs"`` and
  ``"exp2-adjoint"`` (the same grids, transposed), each gradient's max-norm relative error
  against ``fs`` at rtol 1e-10, atol 1e-12 (the reference), and the ratio of the adjoint's error
  to forward exp2's (issue #40: within 3x). A problem that fails prints its error and the run
  goes on.
* ``--many``: models with many parameters: a random mass-action network
  (``pbsens.model.networks``) and the random linear system, one Rodas5P trajectory (rtol 1e-8)
  and, on it, the forward ``sensitivities(method="exp2")`` (default grid: midpoint correction)
  contracted with ``dJ/dx`` at 20 output times against ``adjoint_gradient`` (the same grid;
  their difference is printed too): the crossover in ``np``.

Run: ``python benchmarks/bench_adjoint.py [--repeats 5] [--problems A.yaml B.yaml] [--many]``.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pbsens
from pbsens.sensitivity.adjoint import adjoint_gradient

BOEHM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "petab",
                     "Boehm_JProteomeRes2014", "Boehm_JProteomeRes2014.yaml")


def median_time(fn, repeats):
    """``(median wall s, median process CPU s)`` of ``fn()`` after one warm-up call."""
    fn()                                    # warm: compilation, caches
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def problem(yaml, repeats):
    pr = pbsens.petab.load(yaml)
    th = pr.x_nominal
    ref = pr.evaluate(th, method="fs", rtol=1e-10, atol=1e-12).gradient
    scale = np.max(np.abs(ref))
    print(f"{os.path.basename(yaml)[:-5]} (nx {pr.model.n_states}, model params {pr.model.n_params}, theta {pr.dim}, "
          f"conditions {len(pr.conditions)}; |grad|max {scale:.3g})", flush=True)
    errs = {}
    for label, kw in (("exp2 (default, midpoint)", dict(method="exp2")), ("fs", dict(method="fs")),
                      ("exp2-adjoint", dict(method="exp2-adjoint"))):
        try:
            g = pr.evaluate(th, **kw).gradient
        except Exception as exc:       # noqa: BLE001  (a benchmark: report and go on)
            print(f"  {label:26s} failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            continue
        errs[label] = np.max(np.abs(g - ref)) / scale
        tw, tc = median_time(lambda kw=kw: pr.evaluate(th, **kw), repeats)
        print(f"  {label:26s} {1e3 * tw:9.2f} ms wall {1e3 * tc:9.2f} ms CPU   gradient error vs fs(1e-10) "
              f"{errs[label]:.2e}", flush=True)
    if "exp2-adjoint" in errs and "exp2 (default, midpoint)" in errs:
        e_f = errs["exp2 (default, midpoint)"]
        print(f"  adjoint error / forward exp2 error: {errs['exp2-adjoint'] / e_f if e_f > 0 else float('nan'):.3f}",
              flush=True)


def many_parameters(model, t_end, repeats):
    t_out = np.linspace(t_end / 20, t_end, 20)
    tr = pbsens.solve_states(model, (0.0, t_end), t_eval=t_out, method="rodas5p", rtol=1e-8, atol=1e-10,
                             dense_output=True)
    dJdx = np.random.default_rng(0).normal(size=(t_out.size, model.n_states))

    def forward():
        r = pbsens.sensitivities(model, tr, method="exp2", t_eval=t_out, linalg="dense")
        return np.einsum("ki,kij->j", dJdx, r.S)

    def adjoint():
        return adjoint_gradient(model, tr, None, t_out, dJdx, method="exp2", substeps=None)

    gf, ga = forward(), adjoint()
    diff = np.max(np.abs(gf - ga)) / np.max(np.abs(gf))
    (tf, cf), (ta, ca) = median_time(forward, repeats), median_time(adjoint, repeats)
    print(f"  {model.name:18s} nx {model.n_states:4d} np {model.n_params:4d} grid {tr.t.size:5d}   "
          f"forward {1e3 * tf:8.2f} ms ({1e3 * cf:8.2f} CPU)   adjoint {1e3 * ta:8.2f} ms ({1e3 * ca:8.2f} CPU)   "
          f"CPU ratio {cf / ca:5.2f}   |g_fwd - g_adj|/|g| {diff:.1e}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--problems", nargs="*", default=[BOEHM])
    ap.add_argument("--many", action="store_true")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    for y in args.problems:
        try:
            problem(y, args.repeats)
        except Exception as exc:       # noqa: BLE001
            print(f"{y}: failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
    if args.many:
        from pbsens.model.library import model_from_spec
        from pbsens.model.networks import random_mass_action
        print("many parameters (exp2 default grid, Rodas5P rtol 1e-8, 20 outputs, dense linear algebra)")
        for n in (10, 20, 40):
            many_parameters(model_from_spec(random_mass_action(n, seed=0)), 10.0, args.repeats)
        for n in (10, 20, 50):
            many_parameters(pbsens.random_linear_model(n), 10.0, args.repeats)
    print(f"load average at end: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
