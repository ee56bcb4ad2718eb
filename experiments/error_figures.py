"""Figures 2 and 3 of the paper: E_k per step of PBSR and Exp against FS on PKA and CaMKII, t in [0, 600].

E_k = ||S_hat_k - S_FS_k|| / ||S_FS_k|| (Frobenius) on the LSODA state grid
(rtol 1e-5, atol 1e-6), with the reference FS solved tightly (BDF, rtol 1e-8,
atol 1e-10) at the same grid points. Markers show where PBSR used the
exponential step (equilibrium / too stiff). The second-order variants pbsr2 and
exp2 (exponential-midpoint step, issue 5) are drawn next to PBSR and Exp, and
the cost of every method (state solve included) is measured.

One script for the family: :data:`FIGURES` holds what differs between the
figures (model, span), :func:`error_experiment` the workflow, which Figure 7
(``fig7_8_chua.py``) runs on Chua too.

Paper: PBSR is one to two orders of magnitude more accurate than Exp on the
intervals where the PBS formula ran.

Usage: ``python3 experiments/error_figures.py [fig2_pka_error] [fig3_camkii_error] [--quick] [--out DIR]``.
"""
import numpy as np

import _common as C
import _plotting as P
import _timing as T
from _results_io import step, write_csv

#: name -> (paper's figure, model, time span)
FIGURES = {"fig2_pka_error": ("Fig 2", "PKA", (0.0, 600.0)),
           "fig3_camkii_error": ("Fig 3", "CaMKII", (0.0, 600.0))}
CLAIM = ("PBSR is 1-2 orders of magnitude more accurate than Exp on the intervals where the PBS formula ran "
         "(no numbers given in the text)")
POST_HOC = ("pbsr", "exp", "pbsr2", "exp2")


def error_experiment(model_name, span, *, quick, out_dir, progress, name, title, repeats=None,
                     methods=POST_HOC):
    """E_k of the post-hoc methods against tight FS on the state grid, plus their cost.

    Returns the JSON-ready dict (and writes ``<name>.csv`` and ``<name>.png``).
    """
    step(progress, f"{name}: {model_name}: model, state solve and {', '.join(methods)}")
    m = C.model(model_name)
    repeats = (3 if quick else 100) if repeats is None else int(repeats)
    tr = C.pbsens.solve_states(m, span, **C.STATE)
    res = {meth: C.pbsens.sensitivities(m, tr, method=meth) for meth in methods}
    step(progress, f"{name}: reference forward sensitivities (BDF and Radau, rtol 1e-8)")
    ref, t_ref = T.timed(C.forward_sensitivities, m, span, t_eval=tr.t, **C.REFERENCE)
    ref2, t_ref2 = T.timed(C.forward_sensitivities, m, span, t_eval=tr.t, **C.REFERENCE_CHECK)
    rel = C.metrics().relative_error
    E = {meth: rel(r, ref) for meth, r in res.items()}
    E_floor = rel(ref2, ref)
    K = tr.t.size
    branch = np.asarray(res["pbsr"].branch)          # per interval k -> k+1
    b_at = np.concatenate([[""], branch])            # branch of the interval ending at point k
    pts = {"all": np.arange(1, K)}
    for kind in ("pbs", "exp-stiff", "exp-equilibrium"):
        pts[kind] = np.flatnonzero(b_at == kind)

    med = C.med
    stats = {}
    for meth in methods:
        e = E[meth]
        stats[meth] = {"median": med(e[1:]), "max": float(np.max(e[1:])), "final": float(e[-1]),
                       "median_by_branch": {k: med(e[idx]) if idx.size else None for k, idx in pts.items()}}
    stats["reference_floor"] = {"median": med(E_floor[1:]), "max": float(np.max(E_floor[1:]))}
    on_pbs = pts["pbs"]
    exp_over_pbsr = {
        "median_ratio_all": C.ratio(stats["exp"]["median"], stats["pbsr"]["median"]),
        "median_ratio_on_pbs_intervals": (C.ratio(med(E["exp"][on_pbs]), med(E["pbsr"][on_pbs]))
                                          if on_pbs.size else None),
        "median_pointwise_ratio_on_pbs_intervals": (med(E["exp"][on_pbs] / np.maximum(E["pbsr"][on_pbs], 1e-300))
                                                    if on_pbs.size else None),
    }
    # cost: each method including its state solve, interleaved repeats
    step(progress, f"{name}: timing, one warm-up round")
    timing = T.time_methods(m, span, list(methods), repeats, progress=progress,
                            desc=f"{name}: timing, rounds of {len(methods)} methods")
    cost = {meth: {"total": T.summary(v["total"]), "sensitivities": T.summary(v["sensitivities"])}
            for meth, v in timing.items()}
    issue5 = issue5_check(stats, cost)

    step(progress, f"{name}: CSV and figure")
    # CSV: one row per grid point
    header = ["k", "t"] + [f"E_{meth}" for meth in methods] + ["E_reference_floor", "pbsr_branch_of_interval_ending_here"]
    rows = [[k, tr.t[k]] + [E[meth][k] for meth in methods] + [E_floor[k], b_at[k]] for k in range(K)]
    write_csv(out_dir / f"{name}.csv", header, rows)

    # figure: E_k per step, markers where PBSR used the exponential step
    fig, ax = P.new_figure(figsize=(8.5, 4.4))
    ax = ax[0, 0]
    k = np.arange(1, K)
    for meth in methods:
        ax.semilogy(k, P.positive(E[meth][1:]), color=P.COLORS[meth], lw=1.2 if meth in ("pbsr", "exp") else 0.9,
                    ls="-" if meth in ("pbsr", "exp") else "--", label=P.LABELS[meth])
    ax.semilogy(k, P.positive(E_floor[1:], 1e-16), color="0.6", lw=0.8, ls=":",
                label="reference error (Radau vs BDF)")
    for kind, marker in (("exp-equilibrium", "o"), ("exp-stiff", "x")):
        idx = pts[kind]
        if idx.size:
            ax.plot(idx, P.positive(E["pbsr"][idx]), ls="none", marker=marker, ms=4, mew=1.0,
                    mfc="none" if marker == "o" else None, color=P.BRANCH_COLORS[kind],
                    label=P.BRANCH_LABELS[kind])
    ax.set_xlabel("step k (state solver grid, LSODA rtol 1e-5, atol 1e-6)")
    ax.set_ylabel(r"$E_k = \|\hat S_k - S^{FS}_k\| / \|S^{FS}_k\|$")
    P.finish_axes(ax, title, ncol=2)
    png = P.save_figure(fig, out_dir / f"{name}.png")

    return {
        "model": model_name, "t_span": list(span), "n_states": m.n_states, "n_params": m.n_params,
        "grid_points": int(K), "branch_counts": res["pbsr"].branch_counts(),
        "n_int_total_pbsr": int(np.sum(res["pbsr"].n_int)),
        "settings": {"state": C.STATE, "reference": C.REFERENCE, "reference_check": C.REFERENCE_CHECK,
                     "norm": "Frobenius (E_k); PBSR switch: 1-norm", "timing_repeats": repeats},
        "reference_seconds": {"BDF": t_ref, "Radau": t_ref2},
        "E": stats, "exp_over_pbsr": exp_over_pbsr, "cost_s": cost, "issue5": issue5,
        "files": [f"{name}.csv", png], "_ref": ref, "_tr": tr, "_E": E,
    }


def issue5_check(stats, cost):
    """Issue 5's targets for the second-order variant: E_k(pbsr)/E_k(pbsr2) >= 10, cost(pbsr2) <= 1.5 cost(exp)."""
    if "pbsr2" not in stats or "pbsr2" not in cost:
        return None
    acc = C.ratio(stats["pbsr"]["median"], stats["pbsr2"]["median"])
    c_sens = C.ratio(cost["pbsr2"]["sensitivities"]["median"], cost["exp"]["sensitivities"]["median"])
    c_tot = C.ratio(cost["pbsr2"]["total"]["median"], cost["exp"]["total"]["median"])
    out = {"accuracy_gain_pbsr_over_pbsr2": acc, "accuracy_target": 10.0, "accuracy_holds": bool(acc >= 10.0),
           "cost_ratio_pbsr2_over_exp_sensitivity_pass": c_sens,
           "cost_ratio_pbsr2_over_exp_with_state_solve": c_tot, "cost_target": 1.5,
           "cost_holds_sensitivity_pass": bool(c_sens <= 1.5), "cost_holds_with_state_solve": bool(c_tot <= 1.5)}
    if "exp2" in stats:
        out["accuracy_gain_exp_over_exp2"] = C.ratio(stats["exp"]["median"], stats["exp2"]["median"])
        out["accuracy_gain_pbsr_over_exp2"] = C.ratio(stats["pbsr"]["median"], stats["exp2"]["median"])
    return out


def _figure_run(name, figure, model_name, span):
    """The ``run`` of one figure of the family (overrides: ``repeats``, timing runs per method)."""
    @C.experiment(name, paper={"figure": figure, "claim": CLAIM})
    def run(quick=False, out_dir=None, progress=None, repeats=None):
        """Run the experiment; returns the JSON-ready dict (also written to ``out_dir``)."""
        return error_experiment(model_name, span, quick=quick, out_dir=out_dir, progress=progress, name=name,
                                title=f"{figure}: {model_name}, t in [{span[0]:g}, {span[1]:g}]: relative error "
                                      f"of the sensitivities per step", repeats=repeats)
    return run


RUNS = {name: _figure_run(name, *spec) for name, spec in FIGURES.items()}


if __name__ == "__main__":
    C.main(RUNS, __doc__)
