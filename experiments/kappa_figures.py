"""Figures 4 and 5 of the paper: kappa_bar(t) of PBSR, Exp and FS on PKA (t in [0, 60000]) and CaMKII ([0, 600]).

kappa_bar (8.5)-(8.6): mean over N = 100 random perturbations d = h (.) p,
h_j ~ U(1e-5, 1e-4), of ||x(p+d) - x(p-d) - 2 S d|| / ||x(p+d) - x(p-d)||, with
tightly solved perturbed trajectories (pbsens.sensitivity.metrics.kappa_bar). The same
perturbations (seed 0) are used for all methods (pbsr2 and exp2 too, dashed: not
in the paper). PBSR and Exp march over the LSODA grid (rtol 1e-5, atol 1e-6); FS
is BDF at the same tolerances, output at that grid. Shaded: intervals where PBSR
used the exponential step. Time is on a log axis.

Paper: after the initial transient the three methods have similar kappa_bar.
"After the transient" (fixed before looking at kappa_bar):

* PKA (Fig 4): t >= 10; PKA's fast initial transient is over by t ~ 3.
* CaMKII (Fig 5): t >= 1; CaMKII's states change fastest in t < 1 and are settled
  by t ~ 30 (the solver then takes one step to t = 600; almost all grid points lie
  in t < 30).

One script for the family: :data:`FIGURES` holds what differs between the
figures, :func:`kappa_experiment` the workflow, which Figure 8
(``fig7_8_chua.py``) runs on Chua too.

Usage: ``python3 experiments/kappa_figures.py [fig4_pka_kappa] [fig5_camkii_kappa] [--quick] [--out DIR]``.
"""
import time

import numpy as np

import _common as C
import _plotting as P
import _timing as T
from _results_io import bar, step, write_csv

#: name -> (paper's figure, model, time span, start of the window "after the transient")
FIGURES = {"fig4_pka_kappa": ("Fig 4", "PKA", (0.0, 60000.0), 10.0),
           "fig5_camkii_kappa": ("Fig 5", "CaMKII", (0.0, 600.0), 1.0)}
CLAIM = "after the transient, PBSR, Exp and FS have similar kappa_bar"
ALL_METHODS = ("pbsr", "exp", "fs", "pbsr2", "exp2")


def kappa_experiment(model_name, span, *, quick, out_dir, progress, name, title, n_samples=None,
                     methods=("pbsr", "exp", "fs"), logx=False, late_from=None, seed=0):
    """kappa_bar(t) (8.5)-(8.6) of several methods on the state grid, same perturbations for all.

    ``late_from``: start of the "after the transient" window (default: second half of the span).
    """
    step(progress, f"{name}: {model_name}: model, state solve and {', '.join(methods)}")
    m = C.model(model_name)
    n_samples = (10 if quick else 100) if n_samples is None else int(n_samples)
    tr = C.pbsens.solve_states(m, span, **C.STATE)
    res = {}
    for meth in methods:
        res[meth] = T.fs_loose(m, span, t_eval=tr.t) if meth == "fs" else C.pbsens.sensitivities(m, tr, method=meth)
    kb, secs = {}, {}
    for meth in bar(methods, progress, f"{name}: kappa_bar, N = {n_samples}"):
        t0 = time.perf_counter()
        kb[meth] = C.metrics().kappa_bar(m, res[meth], n_samples=n_samples, seed=seed, progress=False)
        secs[meth] = time.perf_counter() - t0
    t = tr.t
    late_from = 0.5 * (span[0] + span[1]) if late_from is None else float(late_from)
    late = t >= late_from
    early = (t > span[0]) & ~late
    med = C.med
    stats = {meth: {"median": med(kb[meth][1:]), "median_transient": med(kb[meth][early]),
                    "median_late": med(kb[meth][late]), "max": float(np.max(kb[meth])),
                    "final": float(kb[meth][-1])} for meth in methods}
    base = [meth for meth in methods if meth in ("pbsr", "exp", "fs")]
    late_meds = [stats[meth]["median_late"] for meth in base]
    spread = C.ratio(max(late_meds), min(late_meds)) if late_meds else float("nan")
    branch = np.asarray(res["pbsr"].branch) if "pbsr" in res else None
    frac_exp_time = None
    if branch is not None:
        h = np.diff(res["pbsr"].grid)
        frac_exp_time = float(np.sum(h[branch != "pbs"]) / (span[1] - span[0]))

    header = ["t"] + [f"kappa_bar_{meth}" for meth in methods] + ["pbsr_branch_of_interval_ending_here"]
    b_at = np.concatenate([[""], branch]) if branch is not None else np.full(t.size, "")
    rows = [[t[k]] + [kb[meth][k] for meth in methods] + [b_at[k]] for k in range(t.size)]
    write_csv(out_dir / f"{name}.csv", header, rows)

    fig, ax = P.new_figure(figsize=(8.5, 4.4))
    ax = ax[0, 0]
    patches = P.shade(ax, res["pbsr"].grid, branch, tmin=t[1] if logx else None) if branch is not None else []
    lines = []
    for meth in methods:
        (ln,) = ax.plot(t[1:], P.positive(kb[meth][1:], 1e-16), color=P.COLORS[meth],
                        lw=1.3 if meth in ("pbsr", "exp", "fs") else 0.9,
                        ls="-" if meth in ("pbsr", "exp", "fs") else "--", label=P.LABELS[meth])
        lines.append(ln)
    ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("t" + (" (log scale)" if logx else ""))
    ax.set_ylabel(r"$\bar\kappa(t)$" + f", N = {n_samples}")
    P.finish_axes(ax, title, handles=lines + patches)
    png = P.save_figure(fig, out_dir / f"{name}.png")

    return {
        "model": model_name, "t_span": list(span), "grid_points": int(t.size), "n_samples": n_samples,
        "seed": seed, "branch_counts": res["pbsr"].branch_counts() if "pbsr" in res else None,
        "fraction_of_time_pbsr_used_exp": frac_exp_time,
        "late_window": [late_from, span[1]],
        "settings": {"state": C.STATE, "fs": C.FS_LOOSE,
                     "perturbed_solves": "pbsens.sensitivity.metrics.kappa_bar defaults (LSODA, rtol 1e-12, atol 1e-14)",
                     "h": [1e-5, 1e-4]},
        "kappa_bar": stats, "late_spread_max_over_min": spread, "kappa_seconds": secs,
        "files": [f"{name}.csv", png], "_kb": kb, "_t": t, "_res": res, "_tr": tr,
    }


def _figure_run(name, figure, model_name, span, late_from):
    """The ``run`` of one figure of the family (overrides: ``n_samples``, perturbations N)."""
    @C.experiment(name, paper={"figure": figure, "claim": CLAIM})
    def run(quick=False, out_dir=None, progress=None, n_samples=None):
        """Run the experiment; returns the JSON-ready dict (also written to ``out_dir``)."""
        return kappa_experiment(model_name, span, quick=quick, out_dir=out_dir, progress=progress, name=name,
                                title=f"{figure}: {model_name}, t in [{span[0]:g}, {span[1]:g}]: perturbation "
                                      f"error kappa_bar", n_samples=n_samples, logx=True, late_from=late_from,
                                methods=ALL_METHODS)
    return run


RUNS = {name: _figure_run(name, *spec) for name, spec in FIGURES.items()}


if __name__ == "__main__":
    C.main(RUNS, __doc__)
