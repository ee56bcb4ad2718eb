"""Can the post-hoc march skip the output times? S at the outputs by Hermite interpolation (a negative result).

The exp2 march steps through every output time (docs/PERFORMANCE.md, "Work-precision with AMICI and
pbsens fs on PKA, CaMKII, Chua": on PKA 224 intervals for 201 outputs, where Rodas5P took 52 steps).
This measures the alternative: solve the states on Rodas5P's own steps (no outputs), march exp2 on
that grid (`S` at every grid point), and take `S` at the outputs by cubic Hermite interpolation with
`S' = A S + B` at the interval ends. Per rtol (atol = rtol/10): the grid, the march's CPU ms (one
call after a warm-up), and the median / max relative error of `S` at the outputs against scipy's
Radau forward sensitivities (rtol 1e-10), beside the default call's.

    PYTHONPATH=. python benchmarks/exp2_output_interpolation.py [--model PKA] [--rtols 1e-4 1e-5 1e-6 1e-8]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pbsens  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_error_estimate import SPANS  # noqa: E402



def hermite(t, S, dS, ts):
    """Cubic Hermite interpolation of ``S`` (K, n, m) with derivatives ``dS`` on the grid ``t`` at ``ts``."""
    idx = np.clip(np.searchsorted(t, ts, side="right") - 1, 0, t.size - 2)
    h = t[idx + 1] - t[idx]
    s = ((ts - t[idx]) / h)[:, None, None]
    hh = h[:, None, None]
    return ((2 * s ** 3 - 3 * s ** 2 + 1) * S[idx] + (s ** 3 - 2 * s ** 2 + s) * hh * dS[idx]
            + (-2 * s ** 3 + 3 * s ** 2) * S[idx + 1] + (s ** 3 - s ** 2) * hh * dS[idx + 1])


def relative(S, ref):
    """``E_k = ||S_k - ref_k||_F / ||ref_k||_F`` per output (k >= 1)."""
    d = np.linalg.norm((S - ref).reshape(len(S), -1), axis=1)
    return d[1:] / np.linalg.norm(ref.reshape(len(ref), -1), axis=1)[1:]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="PKA", choices=list(SPANS))
    ap.add_argument("--rtols", nargs="+", type=float, default=[1e-4, 1e-5, 1e-6, 1e-8])
    ap.add_argument("--outputs", type=int, default=201)
    args = ap.parse_args(argv)
    m = pbsens.load_model(args.model)
    T = SPANS[args.model]
    ts = np.linspace(0.0, T, args.outputs)
    ref = pbsens.forward_sensitivities(m, (0.0, T), t_eval=ts, method="Radau", rtol=1e-10, atol=1e-12)
    print("| rtol | solver grid | march ms | Hermite median E | max E | default: grid | median E | max E |")
    print("|---|---|---|---|---|---|---|---|")
    for rtol in args.rtols:
        atol = rtol / 10
        tr = pbsens.solve_states(m, (0.0, T), method="rodas5p", rtol=rtol, atol=atol, dense_output=True)
        pbsens.sensitivities(m, tr, t_eval=tr.t)               # warm-up
        t0 = time.process_time()
        r = pbsens.sensitivities(m, tr, t_eval=tr.t)           # S at every point of the solver's grid
        ms = 1e3 * (time.process_time() - t0)
        dS = np.stack([m.jac_x(tk, xk, m.p) @ Sk + m.jac_p(tk, xk, m.p) for tk, xk, Sk in zip(r.t, r.x, r.S)])
        E = relative(hermite(r.t, r.S, dS, ts), ref.S)
        d = pbsens.sensitivities(m, t_span=(0.0, T), t_eval=ts, rtol=rtol, atol=atol)
        Ed = relative(d.S, ref.S)
        print(f"| {rtol:.0e} | {tr.t.size} | {ms:.2f} | {np.median(E):.2e} | {E.max():.2e} | {len(d.grid)} "
              f"| {np.median(Ed):.2e} | {Ed.max():.2e} |", flush=True)


if __name__ == "__main__":
    main()
