"""Figure 3 of the paper: E_k per step of PBSR and Exp against FS on CaMKII, t in [0, 600].

E_k = ||S_hat_k - S_FS_k|| / ||S_FS_k|| (Frobenius) on the LSODA state grid
(rtol 1e-5, atol 1e-6), with the reference FS solved tightly (BDF, rtol 1e-8,
atol 1e-10) at the same grid points. Markers show where PBSR used the
exponential step (equilibrium / too stiff). The second-order variants pbsr2 and
exp2 (exponential-midpoint step, issue 5) are drawn next to PBSR and Exp, and
the cost of every method (state solve included) is measured.

Paper: PBSR is one to two orders of magnitude more accurate than Exp on the
intervals where the PBS formula ran.

Usage: ``python3 experiments/fig3_camkii_error.py [--quick] [--out DIR]``.
"""
try:
    from . import _common as C
except ImportError:
    import _common as C

NAME = "fig3_camkii_error"
DESCRIPTION = "Fig 3: E_k per step of PBSR, Exp (+ pbsr2, exp2) vs tight FS, CaMKII [0, 600]"


@C.experiment(NAME)
def run(quick=False, out_dir=None, progress=None, repeats=None):
    """Run the experiment; returns the JSON-ready dict (also written to ``out_dir``)."""
    out = C.error_experiment("CaMKII", (0.0, 600.0), quick=quick, out_dir=out_dir, progress=progress, name=NAME,
                             title="Fig 3: CaMKII, t in [0, 600]: relative error of the sensitivities per step",
                             repeats=repeats)
    out["paper"] = {"figure": "Fig 3", "claim": "PBSR is 1-2 orders of magnitude more accurate than Exp on the "
                    "intervals where the PBS formula ran (no numbers given in the text)"}
    return out


if __name__ == "__main__":
    C.main(run, __doc__)
