"""Regenerate the example figures in ``docs/img/`` (one of each plot of :mod:`pbsens.report.plot`).

Run from the repository root::

    python docs/make_figures.py            # about a minute on 2 cores

Writes ``docs/img/sensitivities.png`` (PKA, normalised sensitivities of the most
influential parameters), ``docs/img/relative_error.png`` (PKA on [0, 600]: E_k of
PBSR and Exp against FS, markers where PBSR took the exponential step, like the
paper's Figure 2) and ``docs/img/kappa_bar.png`` (PKA on [0, 600]: kappa_bar of
PBSR, Exp and FS with the PBSR branches shaded, like Figures 4-5), and prints a
parameter ranking and an identifiability report.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's pbsens, installed or not
import pbsens  # noqa: E402
from pbsens.report.analysis import identifiability, rank_parameters  # noqa: E402
from pbsens.sensitivity.forward import forward_sensitivities  # noqa: E402
from pbsens.sensitivity.metrics import kappa_bar, relative_error  # noqa: E402
from pbsens.report.plot import plot_kappa_bar, plot_relative_error, plot_sensitivities  # noqa: E402

OUT = Path(__file__).resolve().parent / "img"
SAMPLES = 20   # the paper uses 100


def main():
    OUT.mkdir(exist_ok=True)
    m = pbsens.load_model("PKA")
    span = (0.0, 600.0)
    tr = pbsens.solve_states(m, span)                         # LSODA, rtol 1e-5, atol 1e-6
    r = pbsens.sensitivities(m, tr, method="pbsr")
    r_exp = pbsens.sensitivities(m, tr, method="exp")
    print(r, r.branch_counts())

    plot_sensitivities(r, states=["C", "AKAR4p", "RiiP_C", "Rii_C_cAMP"], top=4, normalized=True,
                       logx=True, path=OUT / "sensitivities.png", figsize=(10, 6), dpi=100)

    ref = forward_sensitivities(m, span, t_eval=r.t, rtol=1e-10, atol=1e-12)
    r_fs = forward_sensitivities(m, span, t_eval=r.t)
    E = {"PBSR": relative_error(r, ref), "Exp": relative_error(r_exp, ref)}
    plot_relative_error(r, E, logx=True, path=OUT / "relative_error.png", figsize=(8, 4), dpi=100,
                        title="PKA: relative error E_k against FS (rtol 1e-10)")

    kb = {name: kappa_bar(m, res, n_samples=SAMPLES, seed=0)
          for name, res in (("PBSR", r), ("Exp", r_exp), ("FS", r_fs))}
    plot_kappa_bar(r, kb, logx=True, path=OUT / "kappa_bar.png", figsize=(8, 4), dpi=100,
                   title=f"PKA: perturbation error kappa_bar ({SAMPLES} samples), PBSR exp steps shaded")

    print("most influential parameters on AKAR4p:", rank_parameters(r, state="AKAR4p")[:5])
    print(identifiability(r, sigma=0.1))
    for name, v in E.items():
        print(f"{name}: median E_k {np.median(v):.3g}, median kappa_bar {np.median(kb[name]):.3g}")
    print(f"wrote {', '.join(str(p.relative_to(OUT.parent.parent)) for p in sorted(OUT.glob('*.png')))}")


if __name__ == "__main__":
    main()
