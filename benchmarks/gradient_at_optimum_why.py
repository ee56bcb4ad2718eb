"""Why the post-hoc gradient misses at the published optimum (issue #41; docs/PERFORMANCE.md,
"The default gradient at the published optimum").

Per problem, against ``method="fs"`` at rtol 1e-12, atol 1e-14 (or the ``gradient_ref`` of a
``benchmarks/gradient_at_optimum.py`` JSON given with ``--ref-json``):

* ``--grid``: the adjoint's relative 2-norm error at the optimum with more sub-steps (16, 32:
  converged march on the same states?) and with states solved tighter (rtol 1e-9, 1e-10; with 16
  sub-steps), and fs at the defaults and at rtol 1e-9;
* the spread ``a = sum_rows |dllh/dy| dy/dtheta`` (from the forward exp2 evaluation's ``dy``):
  ``||a|| / ||g||`` and exp2's error against ``||a||``, at ``x_nominal`` and ``x_nominal + 0.1``.

    nice -n 19 env OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/gradient_at_optimum_why.py \\
        --problems Bruno_JExpBot2016 Brannmark_JBC2010 [--grid] [--ref-json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

GRID = [("adjoint, defaults", {}), ("adjoint, substeps 16", dict(substeps=16)),
        ("adjoint, substeps 32", dict(substeps=32)), ("adjoint, rtol 1e-9", dict(rtol=1e-9, atol=1e-11)),
        ("adjoint, rtol 1e-10", dict(rtol=1e-10, atol=1e-12)),
        ("adjoint, rtol 1e-10, substeps 16", dict(rtol=1e-10, atol=1e-12, substeps=16)),
        ("fs, defaults", dict(method="fs")), ("fs, rtol 1e-9", dict(method="fs", rtol=1e-9, atol=1e-11))]


def _rel(g, ref):
    return float(np.linalg.norm(np.asarray(g) - ref) / np.linalg.norm(ref))


def spread_of(problem, theta):
    """``(gradient, spread)`` of the forward exp2 evaluation at ``theta`` (its ``dy``, ``dsigma`` rows)."""
    cap = {}
    terms, to_theta = problem._noise.terms, problem._to_theta

    def grab_terms(y, sig):
        out = terms(y, sig)
        cap["gy"], cap["gs"] = out[2], out[3]
        return out

    def grab_jac(d, dpdth):
        J = to_theta(d, dpdth)
        cap.setdefault("J", []).append(J)
        return J

    problem._noise.terms, problem._to_theta = grab_terms, grab_jac
    try:
        g = problem.evaluate(theta, method="exp2").gradient
    finally:
        del problem._noise.terms, problem._to_theta
    Jy, Js = cap["J"][-2], cap["J"][-1]
    return g, np.abs(cap["gy"]) @ Jy + np.abs(cap["gs"]) @ Js


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--collection", default=os.environ.get("PBSENS_PETAB_COLLECTION",
                                                           "/work/collection/Benchmark-Models"))
    ap.add_argument("--problems", nargs="+", default=["Bruno_JExpBot2016", "Brannmark_JBC2010"])
    ap.add_argument("--grid", action="store_true")
    ap.add_argument("--ref-json", default=None)
    args = ap.parse_args(argv)
    import pbsens.petab as pbpetab
    warnings.simplefilter("ignore")
    for name in args.problems:
        problem = pbpetab.load(Path(args.collection) / name / f"{name}.yaml")
        th0 = problem.x_nominal
        stored = json.loads(Path(args.ref_json).read_text()).get(name, {}) if args.ref_json else {}
        for shift in (0.0, 0.1):
            th = th0 + shift
            if shift == 0.0 and "gradient_ref" in stored:
                ref = np.array(stored["gradient_ref"])
            else:
                ref = problem.evaluate(th, method="fs", rtol=1e-12, atol=1e-14).gradient
            g, a = spread_of(problem, th)
            err = np.linalg.norm(g - ref)
            print(f"{name} x_nominal+{shift}: ||g_ref|| {np.linalg.norm(ref):.3e}, ||a|| / ||g|| "
                  f"{np.linalg.norm(a) / np.linalg.norm(ref):.2e}, exp2 error / ||g|| {err / np.linalg.norm(ref):.2e}, "
                  f"/ ||a|| {err / np.linalg.norm(a):.2e}", flush=True)
            if args.grid and shift == 0.0:
                for label, kw in GRID:
                    kw = dict(kw)
                    method = kw.pop("method", "exp2-adjoint")
                    print(f"  {label:34s} {_rel(problem.evaluate(th, method=method, **kw).gradient, ref):.2e}",
                          flush=True)


if __name__ == "__main__":
    main()
