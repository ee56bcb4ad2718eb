"""Figures 7 and 8 of the paper: E_k and kappa_bar on Chua's circuit (limit cycle), t in [0, 10].

Figure 7: E_k per step of PBSR and Exp (and pbsr2, exp2) against tight FS (BDF,
rtol 1e-8, atol 1e-10) on the LSODA grid (rtol 1e-5, atol 1e-6), as Figures 2-3 (``error_figures.py``).
Figure 8: kappa_bar(t) of PBSR, Exp, FS (and pbsr2, exp2), N = 100, as Figures 4-5 (``kappa_figures.py``).
Chua's Jacobians change along the whole limit cycle, so PBSR runs the PBS
formula on every interval.

Paper: PBSR is about two orders of magnitude more accurate than Exp, and close to FS.

Usage: ``python3 experiments/fig7_8_chua.py [--quick] [--out DIR]``.
"""
import _common as C
from _results_io import step, strip_private
from error_figures import error_experiment
from kappa_figures import ALL_METHODS, kappa_experiment

NAME = "fig7_8_chua"
SPAN = (0.0, 10.0)


@C.experiment(NAME)
def run(quick=False, out_dir=None, progress=None, n_samples=None, repeats=None):
    """Run the experiment; returns the JSON-ready dict (also written to ``out_dir``).

    Overrides: ``n_samples`` (kappa_bar samples), ``repeats`` (timing runs per method).
    """
    err = error_experiment("Chua", SPAN, quick=quick, out_dir=out_dir, progress=progress,
                           name="fig7_chua_error", repeats=repeats,
                           title="Fig 7: Chua, t in [0, 10]: relative error of the sensitivities per step")
    kap = kappa_experiment("Chua", SPAN, quick=quick, out_dir=out_dir, progress=progress,
                           name="fig8_chua_kappa", n_samples=n_samples, methods=ALL_METHODS,
                           title="Fig 8: Chua, t in [0, 10]: perturbation error kappa_bar", late_from=5.0)
    # why PBSR is not closer to FS here: states at the refinement points (side experiment, not in the paper)
    step(progress, f"{NAME}: PBSR with other state interpolations (side experiment)")
    rel = C.metrics().relative_error
    m, tr, ref = C.model("Chua"), err["_tr"], err["_ref"]
    interp = {}
    for how, n_factor in (("linear", 10.0), ("hermite", 10.0), ("dense", 10.0), ("dense", 100.0)):
        r = C.pbsens.sensitivities(m, tr, method="pbsr", interpolation=how, n_factor=n_factor,
                                   n_max=int(10 * n_factor))
        interp[f"{how}, n_factor {n_factor:g}"] = {"median_E": C.med(rel(r, ref)[1:]),
                                                   "sub_steps": int(r.n_int.sum())}
    err, kap = strip_private(err), strip_private(kap)
    kb = kap["kappa_bar"]
    files = err.pop("files") + kap.pop("files")
    return {
        "model": "Chua", "t_span": list(SPAN), "error": err, "kappa": kap,
        "pbsr_state_interpolation": interp,
        "headline": {
            "E_median_exp_over_pbsr": err["exp_over_pbsr"]["median_ratio_all"],
            "kappa_median_exp_over_pbsr": C.ratio(kb["exp"]["median"], kb["pbsr"]["median"]),
            "kappa_median_pbsr_over_fs": C.ratio(kb["pbsr"]["median"], kb["fs"]["median"]),
        },
        "paper": {"figure": "Figs 7, 8", "claim": "PBSR is about two orders of magnitude more accurate than Exp "
                  "(E_k and kappa_bar), and close to FS"},
        "files": files,
    }


RUNS = {NAME: run}


if __name__ == "__main__":
    C.main(RUNS, __doc__)
