"""Figure 4 of the paper: kappa_bar(t) of PBSR, Exp and FS on PKA, t in [0, 60000].

kappa_bar (8.5)-(8.6): mean over N = 100 random perturbations d = h (.) p,
h_j ~ U(1e-5, 1e-4), of ||x(p+d) - x(p-d) - 2 S d|| / ||x(p+d) - x(p-d)||, with
tightly solved perturbed trajectories (pbsens.metrics.kappa_bar). The same
perturbations (seed 0) are used for all methods (pbsr2 and exp2 too, dashed: not
in the paper). PBSR and Exp march over the
LSODA grid (rtol 1e-5, atol 1e-6); FS is BDF at the same tolerances, output at
that grid. Shaded: intervals where PBSR used the exponential step.

Paper: after the initial transient the three methods have similar kappa_bar.
"After the transient" is t >= 10 here (fixed before looking at kappa_bar: PKA's
fast initial transient is over by t ~ 3); time is on a log axis.

Usage: ``python3 experiments/fig4_pka_kappa.py [--quick] [--out DIR]``.
"""
try:
    from . import _common as C
except ImportError:
    import _common as C

NAME = "fig4_pka_kappa"
DESCRIPTION = "Fig 4: kappa_bar(t) of PBSR, Exp, FS on PKA [0, 60000], N = 100"


@C.experiment(NAME)
def run(quick=False, out_dir=None, progress=None, n_samples=None):
    """Run the experiment; returns the JSON-ready dict (also written to ``out_dir``)."""
    out = C.kappa_experiment("PKA", (0.0, 60000.0), quick=quick, out_dir=out_dir, progress=progress, name=NAME,
                             title="Fig 4: PKA, t in [0, 60000]: perturbation error kappa_bar",
                             n_samples=n_samples, logx=True, late_from=10.0,
                             methods=("pbsr", "exp", "fs", "pbsr2", "exp2"))
    out["paper"] = {"figure": "Fig 4", "claim": "after the transient, PBSR, Exp and FS have similar kappa_bar"}
    return out


if __name__ == "__main__":
    C.main(run, __doc__)
