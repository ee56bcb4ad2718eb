"""Post-hoc adjoint gradient against the forward march (issue #40). Not a test.

Medians of ``--repeats`` wall-clock timings, all in the same run:

* Boehm (PEtab, nominal point): ``Problem.evaluate`` with ``method="exp2"`` (the default:
  midpoint correction), ``"fs"``, ``"exp2"`` on the adjoint's grid (``substeps=4``,
  ``midpoint=False``, ``freeze=0``) and ``"exp2-adjoint"`` with 4 and 64 sub-steps; the
  gradient's max relative error against ``fs`` at rtol 1e-10.
* models with many parameters: a random mass-action network (``pbsens.model.networks``) and the
  random linear system: one Rodas5P trajectory (rtol 1e-8) and, on it, the forward
  ``sensitivities(method, substeps=4, midpoint=False, freeze=0)`` contracted with ``dJ/dx`` at
  20 output times against ``adjoint_gradient`` (same grid; their difference is printed too).

Run: ``nice -n 10 python benchmarks/bench_adjoint.py [--repeats 7]``.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pbsens  # noqa: E402
from pbsens.sensitivity.adjoint import adjoint_gradient  # noqa: E402

BOEHM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "petab",
                     "Boehm_JProteomeRes2014", "Boehm_JProteomeRes2014.yaml")


def median_time(fn, repeats):
    fn()                                    # warm: compilation, caches
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def boehm(repeats):
    pr = pbsens.petab.load(BOEHM)
    th = pr.x_nominal
    ref = pr.evaluate(th, method="fs", rtol=1e-10, atol=1e-12).gradient
    cases = [("exp2 (default, midpoint)", dict(method="exp2")),
             ("fs", dict(method="fs")),
             ("exp2, substeps=4, no midpoint", dict(method="exp2", substeps=4, midpoint=False, freeze=0.0)),
             ("exp2-adjoint, substeps=4", dict(method="exp2-adjoint", substeps=4)),
             ("exp2-adjoint, substeps=64", dict(method="exp2-adjoint", substeps=64))]
    print(f"Boehm_JProteomeRes2014 (nx {pr.model.n_states}, model params {pr.model.n_params}, theta {pr.dim})")
    for label, kw in cases:
        g = pr.evaluate(th, **kw).gradient
        err = np.max(np.abs(g - ref)) / np.max(np.abs(ref))
        t = median_time(lambda kw=kw: pr.evaluate(th, **kw), repeats)
        print(f"  {label:32s} {1e3 * t:9.2f} ms   gradient error vs fs(1e-10) {err:.2e}")


def many_parameters(model, t_end, repeats, method="exp2"):
    t_out = np.linspace(t_end / 20, t_end, 20)
    tr = pbsens.solve_states(model, (0.0, t_end), t_eval=t_out, method="rodas5p", rtol=1e-8, atol=1e-10,
                             dense_output=True)
    dJdx = np.random.default_rng(0).normal(size=(t_out.size, model.n_states))
    kw = dict(midpoint=False, freeze=0.0) if method == "exp2" else {}

    def forward():
        r = pbsens.sensitivities(model, tr, method=method, t_eval=t_out, substeps=4, linalg="dense", **kw)
        return np.einsum("ki,kij->j", dJdx, r.S)

    def adjoint():
        return adjoint_gradient(model, tr, None, t_out, dJdx, method=method, substeps=4)

    gf, ga = forward(), adjoint()
    diff = np.max(np.abs(gf - ga)) / np.max(np.abs(gf))
    tf, ta = median_time(forward, repeats), median_time(adjoint, repeats)
    print(f"  {model.name:18s} nx {model.n_states:4d} np {model.n_params:4d} grid {tr.t.size:5d} x4   "
          f"forward {1e3 * tf:9.2f} ms   adjoint {1e3 * ta:9.2f} ms   ratio {tf / ta:5.2f}   "
          f"|g_fwd - g_adj|/|g| {diff:.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    boehm(args.repeats)
    from pbsens.model.library import model_from_spec
    from pbsens.model.networks import random_mass_action
    print("many parameters (exp2, Rodas5P rtol 1e-8, 20 outputs, substeps 4, dense linear algebra)")
    for n in (20, 40):
        many_parameters(model_from_spec(random_mass_action(n, seed=0)), 10.0, args.repeats)
    for n in (20, 50):
        many_parameters(pbsens.random_linear_model(n), 10.0, args.repeats)


if __name__ == "__main__":
    main()
