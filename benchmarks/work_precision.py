"""Work-precision of the whole sensitivity call, per state solver (issue 19 item 5).

For PKA and CaMKII on [0, 600] and Chua on [0, 10], 201 output times, and
rtol in {1e-3, ..., 1e-9} (atol = rtol / 10): the median wall time of one whole
call (state solve included) against the median and max relative error
``E_k = ||S_k - S_ref_k||_F / ||S_ref_k||_F`` (METHOD.md section 7) at the
output times, for

    LSODA + exp2      sensitivities(m, t_span=..., t_eval=ts, method="exp2", solver="LSODA")
    LSODA + exp       (for the pbsr2 / exp ratio)
    LSODA + pbsr2
    rodas5p + exp2    sensitivities(..., solver="rodas5p"), the default: the solver's own grid, the
                      intervals longer than 1/DEFAULT_SUBSTEPS of their accepted step marched in one
                      exp2 step with the midpoint correction (midpoint=None, METHOD.md section 14);
                      the solve ends a step at every 8th output time (stop_at_outputs default)
    rodas5p + exp2 split  those intervals split into sub-steps instead (midpoint=False; the
                      default before: states from the dense output, the exponentiated matrix frozen
                      per solver gap where B drives the change, freeze=1, METHOD.md section 13)
    rodas5p + exp2 m1 the solver's own grid, no correction (substeps=1)
    rodas5p + exp
    rodas5p + pbsr2
    rodas5p/100 + exp2 m1  states at rtol/100, atol/100, solver's own grid (a point of the
                      Pareto front: more accurate states, no refinement)
    rodas5p + exp2 all  every interval marched with the midpoint correction (substeps=1e6: every
                      interval counts as long), not only the long ones
    FS BDF            forward_sensitivities(m, t_span, t_eval=ts, method="BDF", rtol, atol)
    rodas5p FS        pbsens's own forward sensitivities, forward_sensitivities(..., method="rodas5p")
                      (the augmented Rodas5P solve, error control on S as on the states)
    AMICI FS          AMICI's forward sensitivities (CVODES BDF) of the model exported with
                      pbsens.to_sbml, when AMICI is set up (--amici-python PATH or
                      $PBSENS_AMICI_PYTHON; docs/PERFORMANCE.md): two curves, the wall time of
                      its run_simulation call and the solver time AMICI reports (benchmarks/_amici_wp.py)

The reference is ``forward_sensitivities(method="Radau", rtol=1e-10,
atol=1e-12)`` (``--ref-rtol``: another rtol, atol = rtol/100), computed once per model.
``--configs NAME ...`` runs only those configurations; ``--json FILE`` writes every row;
``--summarize FILE ...`` prints, from saved rows, per model and error level (1e-3 ... 1e-8, of the median
and of the max E) the cheapest post-hoc configuration reaching it against the cheapest pbsens fs and
AMICI FS (its solver time) reaching it (issue #41's question). Timing: one warm-up call each, then
``--repeats`` rounds in which every configuration is called once (interleaved,
so load drift on a shared machine hits all alike), garbage collection off.
Writes one log-log plot per model to ``docs/img/wp_<model>.png`` and prints a
markdown table (``--table FILE`` appends it).

    PYTHONPATH=. python benchmarks/work_precision.py [--repeats 10] [--models PKA CaMKII Chua]
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import pbsens  # noqa: E402
from pbsens.sensitivity.posthoc import DEFAULT_SUBSTEPS  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _amici_wp import STYLES as AMICI_STYLES, amici_work_precision  # noqa: E402  (AMICI FS curve, optional)
from amici_bridge import add_amici_argument  # noqa: E402

CASES = {"PKA": 600.0, "CaMKII": 600.0, "Chua": 10.0}
RTOLS = [1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10]


def configs(m, t_end, ts, rtol):
    atol = rtol / 10

    def post(solver, method, substeps=None, factor=1.0, **kw):
        return lambda: pbsens.sensitivities(m, t_span=(0.0, t_end), t_eval=ts, method=method, solver=solver,
                                            rtol=rtol * factor, atol=atol * factor, substeps=substeps, **kw)
    return {
        "LSODA + exp2": post("LSODA", "exp2"),
        "LSODA + exp": post("LSODA", "exp"),
        "LSODA + pbsr2": post("LSODA", "pbsr2"),
        "rodas5p + exp2": post("rodas5p", "exp2"),
        "rodas5p + exp2 split": post("rodas5p", "exp2", midpoint=False),
        "rodas5p + exp2 m1": post("rodas5p", "exp2", 1),
        "rodas5p + exp": post("rodas5p", "exp"),
        "rodas5p + pbsr2": post("rodas5p", "pbsr2"),
        "rodas5p/100 + exp2 m1": post("rodas5p", "exp2", 1, 0.01),
        "rodas5p + exp2 all": post("rodas5p", "exp2", 1_000_000),
        "FS BDF": lambda: pbsens.forward_sensitivities(m, (0.0, t_end), t_eval=ts, method="BDF",
                                                       rtol=rtol, atol=atol),
        "rodas5p FS": lambda: pbsens.forward_sensitivities(m, (0.0, t_end), t_eval=ts, method="rodas5p",
                                                           rtol=rtol, atol=atol),
    }


#: The post-hoc configurations; "best post-hoc" at an error is the cheapest of them that reaches it.
POST_HOC = ("rodas5p + exp2", "rodas5p + exp2 all", "rodas5p + exp2 split", "rodas5p + exp2 m1", "rodas5p + exp",
            "rodas5p + pbsr2", "rodas5p/100 + exp2 m1", "LSODA + exp2", "LSODA + exp", "LSODA + pbsr2")
#: The peers of issue #41's question: pbsens's own forward sensitivities and AMICI's (its own solver time).
PEERS = {"pbsens fs": ("rodas5p FS",), "AMICI FS": ("AMICI FS (solver)",)}
LEVELS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)


def cheapest(rows, configs, key, level):
    """``(time, error, config, rtol)`` of the cheapest row of ``configs`` with ``row[key] <= level``, or None."""
    ok = [(r["time"], r[key], r["config"], r["rtol"]) for r in rows
          if r["config"] in configs and r.get("time") is not None and r.get(key) is not None and r[key] <= level]
    return min(ok) if ok else None


def matched_error_table(rows, key="E_med"):
    """Markdown rows: per model and error level, the best post-hoc time against each peer's cheapest time
    at that error or below (``key``: ``"E_med"`` or ``"E_max"``), and their ratios (peer / post-hoc:
    above 1, post-hoc is cheaper)."""
    out = [f"| model | {key} <= | best post-hoc ms (config, rtol) | pbsens fs ms | AMICI FS (solver) ms "
           "| fs / post-hoc | AMICI / post-hoc |", "|---|---|---|---|---|---|---|"]

    def fmt(c):
        return "-" if c is None else f"{c[0] * 1e3:.2f} ({c[2]}, {c[3]:.0e})"
    for model in dict.fromkeys(r["model"] for r in rows):
        mrows = [r for r in rows if r["model"] == model]
        for level in LEVELS:
            post = cheapest(mrows, POST_HOC, key, level)
            peers = [cheapest(mrows, cfgs, key, level) for cfgs in PEERS.values()]
            ratios = ["-" if post is None or c is None else f"{c[0] / post[0]:.2f}" for c in peers]
            out.append(f"| {model} | {level:.0e} | {fmt(post)} | {fmt(peers[0])} | {fmt(peers[1])} | "
                       f"{ratios[0]} | {ratios[1]} |")
    return out


def ratio_line(model, rtol, med):
    """The same-run ratios of issue 19 (LSODA/rodas5p exp2, pbsr2/exp), those whose configurations ran."""
    parts = []
    for label, a, b in (("LSODA/rodas5p exp2 time", "LSODA + exp2", "rodas5p + exp2"),
                        ("split", "LSODA + exp2", "rodas5p + exp2 split"),
                        ("pbsr2/exp rodas5p", "rodas5p + pbsr2", "rodas5p + exp"),
                        ("LSODA", "LSODA + pbsr2", "LSODA + exp")):
        if a in med and b in med:
            parts.append(f"{label} {med[a] / med[b]:.2f}x")
    return f"  {model} rtol {rtol:.0e}: " + ("; ".join(parts) if parts else "(no ratio: configurations not run)")


def interleaved_medians(fns, repeats, clock=time.perf_counter):
    """Median seconds per callable, round-robin after one warm-up call each, gc off.

    ``clock``: ``time.perf_counter`` (wall) or ``time.process_time`` (this process's CPU
    time: on a machine shared with other jobs the wall time also counts the time the
    process waits for a core; every path here runs on one thread, BLAS limited to one).
    """
    results = {name: fn() for name, fn in fns.items()}   # warm-up; keep one result each for the errors
    times = {name: [] for name in fns}
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            for name, fn in fns.items():
                t0 = clock()
                fn()
                times[name].append(clock() - t0)
    finally:
        gc.enable()
    return {name: statistics.median(v) for name, v in times.items()}, results


def plot(model, rows, path, clock="wall"):
    """Time against the median (left) and the largest (right) relative error of S."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), sharey=True)
    styles = {"LSODA + exp2": "o-", "rodas5p + exp2": "s-", "rodas5p + exp2 split": "v-.",
              "rodas5p + exp2 m1": "s:",
              "rodas5p + pbsr2": "^-", "rodas5p + exp2 all": "P-", "FS BDF": "d--", "rodas5p FS": "X--",
              **AMICI_STYLES}
    for ax, key, what in ((axes[0], "E_med", "median"), (axes[1], "E_max", "largest")):
        for name, style in styles.items():
            pts = [(r[key], r["time"]) for r in rows if r["config"] == name and r["time"] is not None]
            if pts:
                e, t = zip(*pts)
                ax.loglog(e, np.array(t) * 1e3, style, label=name if name != "rodas5p + exp2 m1"
                          else "rodas5p + exp2, no refinement")
        ax.set_xlabel(f"{what} relative error of S over the outputs (vs Radau FS)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel(f"{'CPU' if clock == 'cpu' else 'wall'} time per call [ms]")
    rt = sorted({r["rtol"] for r in rows if "rtol" in r})
    span = f"rtol {rt[-1]:.0e} ... {rt[0]:.0e}" if rt else "rtol"
    fig.suptitle(f"{model}: work-precision, {span} (atol = rtol/10)")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--models", nargs="+", default=list(CASES))
    ap.add_argument("--rtols", nargs="+", type=float, default=RTOLS)
    ap.add_argument("--img-dir", default="docs/img")
    ap.add_argument("--table", help="append the markdown table to this file")
    add_amici_argument(ap)
    ap.add_argument("--amici-out", default=None, help="save AMICI's raw JSON (S left out) per model in this folder")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time per call: wall clock, or this process's CPU time (steadier on a loaded machine)")
    ap.add_argument("--configs", nargs="+", default=None, help="only these configurations (names as in the table)")
    ap.add_argument("--ref-rtol", type=float, default=1e-10, help="the Radau reference's rtol (atol = rtol/100)")
    ap.add_argument("--json", default=None, help="write every row (config, rtol, time, E_med, E_max) to this file")
    ap.add_argument("--summarize", nargs="+", default=None, metavar="JSON",
                    help="print the matched-error tables of saved --json files (no run)")
    args = ap.parse_args()
    if args.summarize:
        rows = []
        for path in args.summarize:
            with open(path) as f:
                rows += json.load(f)
        for key in ("E_med", "E_max"):
            print("\n".join(matched_error_table(rows, key)) + "\n")
        return
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    lines = [f"Median of {args.repeats} interleaved calls after warm-up ({args.clock} time), gc off; 201 output times; "
             f"atol = rtol/10; rodas5p + exp2 (default) marches the intervals longer than 1/{DEFAULT_SUBSTEPS['rodas5p']} "
             "of their accepted step in one exp2 step with the midpoint correction, split = those intervals "
             "refined into sub-steps instead (midpoint=False; freeze default), m1 = neither. "
             f"E: relative error of S vs Radau FS (rtol {args.ref_rtol:.0e}).", "",
             "| model | rtol | config | time [ms] | median E | max E | grid |",
             "|---|---|---|---:|---:|---:|---:|"]
    all_rows = []
    for model in args.models:
        t_end = CASES[model]
        m = pbsens.load_model(model)
        ts = np.linspace(0.0, t_end, 201)
        ref = pbsens.forward_sensitivities(m, (0.0, t_end), t_eval=ts, method="Radau", rtol=args.ref_rtol,
                                           atol=args.ref_rtol / 100)
        rows = []
        for rtol in args.rtols:
            fns = configs(m, t_end, ts, rtol)
            if args.configs:
                unknown = sorted(set(args.configs) - set(fns))
                if unknown:
                    ap.error(f"unknown configurations {unknown}; known: {sorted(fns)}")
                fns = {k: v for k, v in fns.items() if k in args.configs}
            med, results = interleaved_medians(fns, args.repeats, clock)
            for name, r in results.items():
                E = pbsens.relative_error(r, ref)
                grid = len(r.grid) if getattr(r, "grid", None) is not None else ""
                rows.append({"config": name, "rtol": rtol, "time": med[name], "E_med": float(np.median(E)),
                             "E_max": float(E.max()), "grid": grid})
                lines.append(f"| {model} | {rtol:.0e} | {name} | {med[name] * 1e3:.2f} | {np.median(E):.2e} "
                             f"| {E.max():.2e} | {grid} |")
                print(lines[-1], flush=True)
            print(ratio_line(model, rtol, med), flush=True)
        rows += amici_work_precision(model, m, ts, ref, args.rtols, args.repeats, args.amici_python, lines=lines,
                                     raw_out=None if args.amici_out is None
                                     else os.path.join(args.amici_out, f"amici_sbml_{model}.json"))
        for r in rows:
            r.setdefault("model", model)
        all_rows += rows
        os.makedirs(args.img_dir, exist_ok=True)
        plot(model, rows, os.path.join(args.img_dir, f"wp_{model}.png"), args.clock)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(all_rows, f, indent=1, default=float)
    table = "\n".join(lines) + "\n"
    if args.table:
        with open(args.table, "a") as f:
            f.write(table)
    else:
        sys.stdout.write("\n" + table)


if __name__ == "__main__":
    main()
