"""Figure 5 of the paper: kappa_bar(t) of PBSR, Exp and FS on CaMKII, t in [0, 600].

As Figure 4 (see fig4_pka_kappa.py) on the CaMKII model: N = 100 perturbations
(seed 0), the same for all methods (pbsr2 and exp2 too, dashed: not in the
paper); shaded where PBSR used the exponential step.

Paper: after the initial transient the three methods have similar kappa_bar.
"After the transient" is t >= 1 here (fixed before looking at kappa_bar: CaMKII's
states change fastest in t < 1 and are settled by t ~ 30; the solver then takes
one step to t = 600). Time is on a log axis, since almost all grid points lie in
t < 30.

Usage: ``python3 experiments/fig5_camkii_kappa.py [--quick] [--out DIR]``.
"""
try:
    from . import _common as C
except ImportError:
    import _common as C

NAME = "fig5_camkii_kappa"
DESCRIPTION = "Fig 5: kappa_bar(t) of PBSR, Exp, FS on CaMKII [0, 600], N = 100"


@C.experiment(NAME)
def run(quick=False, out_dir=None, progress=None, n_samples=None):
    """Run the experiment; returns the JSON-ready dict (also written to ``out_dir``)."""
    out = C.kappa_experiment("CaMKII", (0.0, 600.0), quick=quick, out_dir=out_dir, progress=progress, name=NAME,
                             title="Fig 5: CaMKII, t in [0, 600]: perturbation error kappa_bar",
                             n_samples=n_samples, logx=True, late_from=1.0,
                             methods=("pbsr", "exp", "fs", "pbsr2", "exp2"))
    out["paper"] = {"figure": "Fig 5", "claim": "after the transient, PBSR, Exp and FS have similar kappa_bar"}
    return out


if __name__ == "__main__":
    C.main(run, __doc__)
