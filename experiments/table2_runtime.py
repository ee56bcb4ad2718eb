"""Table 2 of the paper: runtime of FS, PBSR and Exp on PKA and CaMKII, t in [0, 600].

Each run includes its state solve, at the paper's tolerances (rtol 1e-5, atol 1e-6).
Rows (the key in the JSON/CSV, then what it times):

* ``fs_rodas5p``: FS as a pbsens user would run it,
  ``forward_sensitivities(..., method="rodas5p")`` (compiled Rosenbrock method on
  the augmented system). The FS baseline of the table.
* ``fs``: FS by scipy's public BDF, ``forward_sensitivities(..., method="BDF")``
  (block-diagonal Newton matrix): the paper's kind of setup (CVODES BDF there).
* ``pbsr``, ``exp``, ``pbsr2``, ``exp2``: ``solve_states`` by scipy's LSODA (as in
  the paper, whose state solver is CVODE) + ``sensitivities``.
* ``pbsr_rodas5p``, ``exp_rodas5p``, ``pbsr2_rodas5p``, ``exp2_rodas5p``:
  ``solve_states(..., method="rodas5p")`` (compiled) + ``sensitivities``.

``pbsr2``/``exp2`` are not in the paper. The JSON keeps ``methods`` (the
paper's rows, under the keys the report generator reads: FS = BDF, post-hoc on
LSODA) and lists every row in ``rows`` with its label. 100 rounds (quick: 5),
all rows interleaved within each round so that changes of the machine's load hit
all of them alike; one warm-up round first (compilation excluded). We report
medians (robust on a shared machine) and means (the paper's statistic), and the
ratios FS/post-hoc for both FS rows. No errors are computed here (Figs 2 and 3
give the accuracy of the same runs).

Paper (mean of 100 runs, CVODES and their implementation):
FS 0.056 / 1.518 s, PBSR 0.047 / 0.132 s, Exp 0.008 / 0.030 s (PKA / CaMKII), i.e.
FS/PBSR 1.2x / 11.5x and FS/Exp 7x / 50x.

Usage: ``python3 experiments/table2_runtime.py [--quick] [--out DIR]``.
"""
import gc

import numpy as np

import _common as C
import _plotting as P
import _timing as T
from _results_io import bar, step, write_csv

NAME = "table2_runtime"
SPAN = (0.0, 600.0)
#: The paper's rows, under the keys the report generator reads (FS = scipy BDF, post-hoc on LSODA).
METHODS = ("fs", "pbsr", "exp", "pbsr2", "exp2")
POST_HOC = ("pbsr", "exp", "pbsr2", "exp2")
#: Every row, in the table's order: key -> (label, forward method or post-hoc method, state solver).
ROWS = {
    "fs_rodas5p": ("FS (pbsens rodas5p)", "fs", "rodas5p"),
    "fs": ("FS (scipy BDF)", "fs", "BDF"),
    **{k: (f"{P.LABELS[k]} (LSODA states)", k, "LSODA") for k in POST_HOC},
    **{f"{k}_rodas5p": (f"{P.LABELS[k]} (rodas5p states)", k, "rodas5p") for k in POST_HOC},
}
FS_ROWS = ("fs_rodas5p", "fs")
PAPER = {"PKA": {"fs": 0.056, "pbsr": 0.047, "exp": 0.008},
         "CaMKII": {"fs": 1.518, "pbsr": 0.132, "exp": 0.030}}
PAPER_RATIOS = {"PKA": {"fs/pbsr": 1.2, "fs/exp": 7.0}, "CaMKII": {"fs/pbsr": 11.5, "fs/exp": 50.0}}


def run_row(m, key):
    """One run of row ``key`` including its state solve: ``(seconds, sensitivity-pass seconds)``."""
    _, meth, solver = ROWS[key]
    tol = dict(rtol=C.STATE["rtol"], atol=C.STATE["atol"])
    if meth == "fs":
        r, sec = T.timed(C.forward_sensitivities, m, SPAN, method=solver, **tol)
        return sec, r.timings.get("sensitivities", sec)
    def post_hoc():
        tr = C.pbsens.solve_states(m, SPAN, method=solver, **tol)
        return C.pbsens.sensitivities(m, tr, method=meth)
    r, sec = T.timed(post_hoc)
    return sec, r.timings.get("sensitivities", float("nan"))


def time_rows(m, keys, repeats, progress=None, desc="timing", warmup=1):
    """As :func:`_timing.time_methods`, for the rows of :data:`ROWS` (gc off during each run)."""
    def one(key):
        gc.collect()
        gc.disable()
        try:
            return run_row(m, key)
        finally:
            gc.enable()

    for _ in range(warmup):
        for key in keys:
            one(key)
    out = {key: {"total": [], "sensitivities": []} for key in keys}
    for _ in bar(range(repeats), progress, desc):
        for key in keys:
            tot, sens = one(key)
            out[key]["total"].append(tot)
            out[key]["sensitivities"].append(sens)
    return out


@C.experiment(NAME)
def run(quick=False, out_dir=None, progress=None, repeats=None, models=("PKA", "CaMKII")):
    """Run the experiment; returns the JSON-ready dict (also written to ``out_dir``).

    Overrides: ``repeats`` (rounds per model), ``models``.
    """
    repeats = (5 if quick else 100) if repeats is None else int(repeats)
    models = list(models)
    keys = list(ROWS)
    table, rows = {}, []
    for name in models:
        step(progress, f"{NAME}: {name}: model and one warm-up round")
        m = C.model(name)
        tm = time_rows(m, keys, repeats, progress=progress, desc=f"{NAME}: {name}, rounds of {len(keys)} rows")
        for key in keys:
            for i, (tot, sens) in enumerate(zip(tm[key]["total"], tm[key]["sensitivities"])):
                rows.append([name, key, ROWS[key][0], i, tot, sens])
        stats = {key: T.summary(tm[key]["total"]) for key in keys}
        sens = {key: T.summary(tm[key]["sensitivities"]) for key in keys}
        ratios = {}
        for stat in ("median", "mean"):
            for fs in FS_ROWS:
                for other in keys:
                    if other not in FS_ROWS:
                        ratios[f"{fs}/{other} ({stat})"] = C.ratio(stats[fs][stat], stats[other][stat])
            ratios[f"fs/fs_rodas5p ({stat})"] = C.ratio(stats["fs"][stat], stats["fs_rodas5p"][stat])
        table[name] = {"n_states": m.n_states, "n_params": m.n_params, "seconds": stats,
                       "sensitivity_pass_seconds": sens, "ratios": ratios,
                       "paper_seconds": PAPER.get(name), "paper_ratios": PAPER_RATIOS.get(name)}
    write_csv(out_dir / f"{NAME}.csv", ["model", "row", "label", "run", "seconds_total", "seconds_sensitivity_pass"],
                rows)

    # figure: medians (ours) next to the paper's means
    fig, axes = P.new_figure(1, len(models), figsize=(5.6 * len(models), 4.6))
    for ax, name in zip(axes[0], models):
        x = np.arange(len(keys))
        ours = [table[name]["seconds"][k]["median"] for k in keys]
        lo = [table[name]["seconds"][k]["q25"] for k in keys]
        hi = [table[name]["seconds"][k]["q75"] for k in keys]
        colors = [P.COLORS[ROWS[k][1]] for k in keys]
        bars = ax.bar(x - 0.2, ours, 0.4, color=colors, alpha=0.85, label="ours (median)",
                      yerr=[np.subtract(ours, lo), np.subtract(hi, ours)], capsize=2)
        for patch, k in zip(bars.patches, keys):
            if ROWS[k][2] == "rodas5p":
                patch.set_hatch("..")
        paper = [PAPER.get(name, {}).get(k, np.nan) for k in keys]   # the paper's FS (CVODES) beside BDF
        ax.bar(x + 0.2, paper, 0.4, color="0.75", edgecolor="0.3", hatch="//", label="paper (mean)")
        ax.set_xticks(x, [ROWS[k][0].replace(" (", "\n(") for k in keys], fontsize=6, rotation=60)
        ax.set_yscale("log")
        ax.set_ylabel("seconds per run (state solve included)")
        ax.set_title(f"{name}, t in [0, 600], {repeats} runs (dotted: rodas5p)", fontsize=10)
        ax.grid(True, axis="y", which="both", alpha=0.25)
        ax.legend(fontsize=8, loc="upper right")
    fig.suptitle("Table 2: runtime (bars: interquartile range)", fontsize=10)
    png = P.save_figure(fig, out_dir / f"{NAME}.png")

    return {
        "t_span": list(SPAN), "repeats": repeats, "models": models, "methods": list(METHODS),
        "rows": {k: {"label": lab, "method": meth, "solver": solver} for k, (lab, meth, solver) in ROWS.items()},
        "fs_baseline": "fs_rodas5p",
        "settings": {"state": C.STATE, "state_rodas5p": dict(C.STATE, method="rodas5p"), "fs": C.FS_LOOSE,
                     "fs_rodas5p": dict(C.FS_LOOSE, method="rodas5p"),
                     "timing": "all rows interleaved per round; one warm-up round; wall time of the whole call "
                     "(state solve included)"},
        "table": table,
        "paper": {"table": "Table 2", "claim": "mean runtime over 100 runs: FS 0.056 / 1.518 s, PBSR 0.047 / "
                  "0.132 s, Exp 0.008 / 0.030 s (PKA / CaMKII); FS/PBSR 1.2x / 11.5x, FS/Exp 7x / 50x",
                  "seconds": PAPER, "ratios": PAPER_RATIOS},
        "files": [f"{NAME}.csv", png],
    }


RUNS = {NAME: run}


if __name__ == "__main__":
    C.main(RUNS, __doc__)
