"""Where the default post-hoc call's time goes on the ODE models, beside pbsens's forward sensitivities.

Issue #41 asks why the post-hoc configurations are not below pbsens's own forward sensitivities
(``forward_sensitivities(method="rodas5p")``) in the work-precision runs of PKA, CaMKII and Chua
(``benchmarks/work_precision.py``). Per model and rtol (atol = rtol/10, as there), CPU ms per call
(median of ``--repeats`` after one warm-up, this process, BLAS on one thread; the timing of
``bench_adjoint.median_time``):

    states        the Rodas5P state solve as ``sensitivities()`` makes it (dense output, outputs)
    march         ``sensitivities(model, trajectory, t_eval=ts)``: the exp2 march alone on it
    default       the whole default call ``sensitivities(model, t_span=..., t_eval=ts)``
    fs            ``forward_sensitivities(model, t_span, t_eval=ts, method="rodas5p")``

with the counts that set them: the march's intervals (``len(r.grid) - 1``), the state solver's
steps and fs's steps (``r.options["stats"]``); and the march alone with ``--few`` output times
instead of ``--outputs`` (same span), which shows how much of the march the output times cost.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/profile_ode_methods.py --models PKA CaMKII Chua \\
        --rtols 1e-5 1e-7 --repeats 20
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pbsens  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_adjoint import median_time  # noqa: E402
from bench_error_estimate import SPANS  # noqa: E402



def cpu_ms(fn, repeats):
    """Median CPU milliseconds of ``fn()`` over ``repeats`` calls after one warm-up."""
    return 1e3 * median_time(fn, repeats)[1]


def profile(model, t_end, rtol, outputs, few, repeats):
    """One row: the timings and counts of the module docstring."""
    m = pbsens.load_model(model)
    atol = rtol / 10
    ts = np.linspace(0.0, t_end, outputs)
    ts_few = np.linspace(0.0, t_end, few)
    span = (0.0, t_end)

    def states(t_eval):
        return pbsens.solve_states(m, span, t_eval=t_eval, method="rodas5p", rtol=rtol, atol=atol, dense_output=True)

    tr, tr_few = states(ts), states(ts_few)
    r = pbsens.sensitivities(m, tr, t_eval=ts)
    r_few = pbsens.sensitivities(m, tr_few, t_eval=ts_few)
    fs = pbsens.forward_sensitivities(m, span, t_eval=ts, method="rodas5p", rtol=rtol, atol=atol)
    return dict(
        model=model, rtol=rtol, n=m.n_states, np=m.n_params,
        states=cpu_ms(lambda: states(ts), repeats),
        march=cpu_ms(lambda: pbsens.sensitivities(m, tr, t_eval=ts), repeats),
        default=cpu_ms(lambda: pbsens.sensitivities(m, t_span=span, t_eval=ts, rtol=rtol, atol=atol), repeats),
        fs=cpu_ms(lambda: pbsens.forward_sensitivities(m, span, t_eval=ts, method="rodas5p", rtol=rtol, atol=atol),
                  repeats),
        march_few=cpu_ms(lambda: pbsens.sensitivities(m, tr_few, t_eval=ts_few), repeats),
        intervals=len(r.grid) - 1, intervals_few=len(r_few.grid) - 1,
        state_steps=tr.stats["n_steps"], fs_steps=fs.options["stats"]["n_steps"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(SPANS), choices=list(SPANS))
    ap.add_argument("--rtols", nargs="+", type=float, default=[1e-5, 1e-7])
    ap.add_argument("--outputs", type=int, default=201)
    ap.add_argument("--few", type=int, default=21, help="the smaller number of output times (same span)")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    print(f"| model | n | np | rtol | states ms | march ms | default ms | fs ms | march intervals | state steps "
          f"| fs steps | march ms, {args.few} outputs | its intervals |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for model in args.models:
        for rtol in args.rtols:
            r = profile(model, SPANS[model], rtol, args.outputs, args.few, args.repeats)
            rows.append(r)
            print(f"| {model} | {r['n']} | {r['np']} | {rtol:.0e} | {r['states']:.2f} | {r['march']:.2f} "
                  f"| {r['default']:.2f} | {r['fs']:.2f} | {r['intervals']} | {r['state_steps']} | {r['fs_steps']} "
                  f"| {r['march_few']:.2f} | {r['intervals_few']} |", flush=True)
    return rows


if __name__ == "__main__":
    main()
