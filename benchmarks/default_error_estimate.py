"""Issue #41's last "done when" item, measured with every default: the error estimate's quality and cost.

``pbsens.sensitivities(model, t_span=..., t_eval=ts)`` (exp2 on Rodas5P, rtol 1e-5, atol 1e-6, the
midpoint correction) against the same call with ``estimate_error=True``, on PKA, CaMKII (on [0, 600])
and Chua (on [0, 10]), 201 output times. Per model:

* CPU ms per call, median of ``--repeats`` interleaved calls after a warm-up (this process);
* the median and largest ``E_k`` of each result against scipy's Radau forward sensitivities at
  rtol 1e-10, atol 1e-12 (outputs after t0); the estimate's call returns the default call's ``S``
  (the estimate's marches keep the midpoint correction, METHOD.md section 11);
* the estimate's quality over the outputs with ``E_k > 1e-10``: the fraction where
  ``error_estimate`` is within 10x of ``E_k``, and the worst under-estimate ``max E_k / estimate``.

The item asks: within 10x on >= 90 % of output times, at most 1.3x the call without the estimate,
and a median E of at most 1e-6 on PKA and CaMKII.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/default_error_estimate.py --repeats 20
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pbsens  # noqa: E402
from pbsens.errors import AccuracyWarning  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_error_estimate import SPANS, quality  # noqa: E402
from work_precision import interleaved_medians  # noqa: E402



def measure(model, repeats, outputs=201):
    m = pbsens.load_model(model)
    T = SPANS[model]
    ts = np.linspace(0.0, T, outputs)
    ref = pbsens.forward_sensitivities(m, (0.0, T), t_eval=ts, method="Radau", rtol=1e-10, atol=1e-12)

    def call(est):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AccuracyWarning)
            return pbsens.sensitivities(m, t_span=(0.0, T), t_eval=ts, estimate_error=est)
    med, res = interleaved_medians({"plain": lambda: call(False), "estimate": lambda: call(True)}, repeats,
                                   time.process_time)
    E_plain = pbsens.relative_error(res["plain"], ref)[1:]
    E_est = pbsens.relative_error(res["estimate"], ref)[1:]
    within, worst, n = quality(E_est, np.asarray(res["estimate"].error_estimate)[1:])
    return dict(model=model, ms_plain=1e3 * med["plain"], ms_est=1e3 * med["estimate"],
                ratio=med["estimate"] / med["plain"], medE_plain=float(np.median(E_plain)),
                maxE_plain=float(E_plain.max()), medE_est=float(np.median(E_est)), maxE_est=float(E_est.max()),
                within=within, worst=worst, n=n)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(SPANS), choices=list(SPANS))
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    print("| model | default ms | with estimate ms | cost | default median / max E | estimate call's median / max E "
          "| estimate within 10x | worst E / estimate |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for model in args.models:
        r = measure(model, args.repeats)
        rows.append(r)
        print(f"| {model} | {r['ms_plain']:.2f} | {r['ms_est']:.2f} | {r['ratio']:.1f}x | {r['medE_plain']:.1e} / "
              f"{r['maxE_plain']:.1e} | {r['medE_est']:.1e} / {r['maxE_est']:.1e} | {100 * r['within']:.0f} % of "
              f"{r['n']} | {r['worst']:.2g} |", flush=True)
    return rows


if __name__ == "__main__":
    main()
