"""Table 2 of the paper: runtime of FS, PBSR and Exp on PKA and CaMKII, t in [0, 600].

Each run includes its state solve: PBSR/Exp (and pbsr2/exp2, not in the paper)
= ``solve_states`` (LSODA, rtol 1e-5, atol 1e-6) + ``sensitivities``; FS =
``forward_sensitivities`` (BDF with the block-diagonal Newton matrix) at the same
tolerances. 100 rounds (quick: 5), the methods interleaved within each round so
that changes of the machine's load hit all of them alike; one warm-up round
first (compilation excluded). We report medians (robust on a shared machine)
and means (the paper's statistic), and the ratios FS/PBSR and FS/Exp.

Paper (mean of 100 runs, CVODES and their implementation):
FS 0.056 / 1.518 s, PBSR 0.047 / 0.132 s, Exp 0.008 / 0.030 s (PKA / CaMKII), i.e.
FS/PBSR 1.2x / 11.5x and FS/Exp 7x / 50x.

Usage: ``python3 experiments/table2_runtime.py [--quick] [--out DIR]``.
"""
import numpy as np

import _common as C
import _plotting as P
import _timing as T
from _results_io import step, write_csv

NAME = "table2_runtime"
SPAN = (0.0, 600.0)
METHODS = ("fs", "pbsr", "exp", "pbsr2", "exp2")
PAPER = {"PKA": {"fs": 0.056, "pbsr": 0.047, "exp": 0.008},
         "CaMKII": {"fs": 1.518, "pbsr": 0.132, "exp": 0.030}}
PAPER_RATIOS = {"PKA": {"fs/pbsr": 1.2, "fs/exp": 7.0}, "CaMKII": {"fs/pbsr": 11.5, "fs/exp": 50.0}}


@C.experiment(NAME)
def run(quick=False, out_dir=None, progress=None, repeats=None, models=("PKA", "CaMKII")):
    """Run the experiment; returns the JSON-ready dict (also written to ``out_dir``).

    Overrides: ``repeats`` (rounds per model), ``models``.
    """
    repeats = (5 if quick else 100) if repeats is None else int(repeats)
    models = list(models)
    table, rows = {}, []
    for name in models:
        step(progress, f"{NAME}: {name}: model and one warm-up round")
        m = C.model(name)
        tm = T.time_methods(m, SPAN, list(METHODS), repeats, progress=progress,
                            desc=f"{NAME}: {name}, rounds of {len(METHODS)} methods")
        for meth in METHODS:
            for i, (tot, sens) in enumerate(zip(tm[meth]["total"], tm[meth]["sensitivities"])):
                rows.append([name, meth, i, tot, sens])
        stats = {meth: T.summary(tm[meth]["total"]) for meth in METHODS}
        sens = {meth: T.summary(tm[meth]["sensitivities"]) for meth in METHODS}
        ratios = {}
        for stat in ("median", "mean"):
            for other in ("pbsr", "exp", "pbsr2", "exp2"):
                ratios[f"fs/{other} ({stat})"] = C.ratio(stats["fs"][stat], stats[other][stat])
        table[name] = {"n_states": m.n_states, "n_params": m.n_params, "seconds": stats,
                       "sensitivity_pass_seconds": sens, "ratios": ratios,
                       "paper_seconds": PAPER.get(name), "paper_ratios": PAPER_RATIOS.get(name)}
    write_csv(out_dir / f"{NAME}.csv", ["model", "method", "run", "seconds_total", "seconds_sensitivity_pass"],
                rows)

    # figure: medians (ours) next to the paper's means
    fig, axes = P.new_figure(1, len(models), figsize=(4.2 * len(models), 4.0))
    for ax, name in zip(axes[0], models):
        x = np.arange(len(METHODS))
        ours = [table[name]["seconds"][meth]["median"] for meth in METHODS]
        lo = [table[name]["seconds"][meth]["q25"] for meth in METHODS]
        hi = [table[name]["seconds"][meth]["q75"] for meth in METHODS]
        ax.bar(x - 0.2, ours, 0.4, color=[P.COLORS[k] for k in METHODS], alpha=0.85, label="ours (median)",
               yerr=[np.subtract(ours, lo), np.subtract(hi, ours)], capsize=2)
        paper = [PAPER.get(name, {}).get(meth, np.nan) for meth in METHODS]
        ax.bar(x + 0.2, paper, 0.4, color="0.75", edgecolor="0.3", hatch="//", label="paper (mean)")
        ax.set_xticks(x, [P.LABELS[k] for k in METHODS])
        ax.set_yscale("log")
        ax.set_ylabel("seconds per run (state solve included)")
        ax.set_title(f"{name}, t in [0, 600], {repeats} runs", fontsize=10)
        ax.grid(True, axis="y", which="both", alpha=0.25)
        ax.legend(fontsize=8, loc="upper right")
    fig.suptitle("Table 2: runtime (bars: interquartile range)", fontsize=10)
    png = P.save_figure(fig, out_dir / f"{NAME}.png")

    return {
        "t_span": list(SPAN), "repeats": repeats, "models": models, "methods": list(METHODS),
        "settings": {"state": C.STATE, "fs": C.FS_LOOSE, "timing": "methods interleaved per round; one warm-up "
                     "round; wall time of the whole call (state solve included)"},
        "table": table,
        "paper": {"table": "Table 2", "claim": "mean runtime over 100 runs: FS 0.056 / 1.518 s, PBSR 0.047 / "
                  "0.132 s, Exp 0.008 / 0.030 s (PKA / CaMKII); FS/PBSR 1.2x / 11.5x, FS/Exp 7x / 50x",
                  "seconds": PAPER, "ratios": PAPER_RATIOS},
        "files": [f"{NAME}.csv", png],
    }


RUNS = {NAME: run}


if __name__ == "__main__":
    C.main(RUNS, __doc__)
