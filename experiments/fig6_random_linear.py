"""Figure 6 of the paper: runtime against dimension n for the random linear system.

``x' = A x + p**2 + 1`` on [0, 10], ``A = -B^T B``, ``B`` and ``p`` uniform on [0, 1]
(``pbsens.random_linear_model(n, seed)``, seeds 0..9), n = 5, 10, ..., 100, n
states and n parameters. Timed per draw, each including its own state solve:

* FS: ``forward_sensitivities`` (BDF, structured Newton matrix) at the state
  solver's tolerances rtol 1e-5, atol 1e-6;
* PBS: LSODA state solve (rtol 1e-5, atol 1e-6) + ``sensitivities(method="pbs")``
  (PBS with refinement ``n_int = ceil(10 h ||A||_1)``, no switch: the Jacobians are
  constant, so PBSR would take the exponential step everywhere);
* Exp: the same state solve + ``sensitivities(method="exp")``.

A line ``t = a n^b`` is fitted to the medians over the draws (least squares in
log-log). Paper: b = 4.2 (FS), 3.7 (PBS), 2.1 (Exp).

PBS cost: the refinement makes PBS do ``~ 10 T ||A||`` sub-steps with ``||A|| ~ n^2/4``
here, each with ``n x n`` products, i.e. ~n^5 work. The Jacobians of this system are
constant, so the march reuses each sub-step's ``Pf`` and ``Pb B`` (one product per
sub-step instead of three, bitwise the same result): about 22 s per draw at n = 100 on
this machine, ~20 minutes for all 10 draws at every n. ``pbs_draws_mid`` /
``pbs_draws_high`` can still cap the PBS draws for 40 < n <= 70 / n > 70 (default: all).

Usage: ``python3 experiments/fig6_random_linear.py [--quick] [--out DIR]``.
"""
import numpy as np

import _common as C
import _plotting as P
import _timing as T
from _results_io import bar, step, write_csv

NAME = "fig6_random_linear"
SPAN = (0.0, 10.0)
METHODS = ("fs", "pbs", "exp")
PAPER_B = {"fs": 4.2, "pbs": 3.7, "exp": 2.1}


def _one(m, method):
    """Seconds for one method on one draw, state solve included; plus a work count."""
    r, sec = T.run_once(m, SPAN, method)
    return sec, int(r.t.size - 1) if method == "fs" else int(np.sum(r.n_int))   # FS steps / march sub-steps


def fit(ns, ts):
    """Least-squares ``log t = log a + b log n``; returns ``{"a", "b", "n_range"}`` (None if < 2 points)."""
    ns, ts = np.asarray(ns, float), np.asarray(ts, float)
    ok = np.isfinite(ts) & (ts > 0)
    if ok.sum() < 2:
        return None
    b, loga = np.polyfit(np.log(ns[ok]), np.log(ts[ok]), 1)
    return {"a": float(np.exp(loga)), "b": float(b), "n_range": [int(ns[ok].min()), int(ns[ok].max())],
            "points": int(ok.sum())}


@C.experiment(NAME)
def run(quick=False, out_dir=None, progress=None, ns=None, draws=None, pbs_max_n=None, pbs_draws_mid=None,
        pbs_draws_high=None):
    """Run the experiment; returns the JSON-ready dict (also written to ``out_dir``).

    Overrides: ``ns`` (dimensions), ``draws`` (per n), ``pbs_max_n`` (largest n for
    PBS), ``pbs_draws_mid`` / ``pbs_draws_high`` (PBS draws for 40 < n <= 70 / n > 70; default all).
    """
    ns = list(range(5, 45, 5) if quick else range(5, 105, 5)) if ns is None else [int(n) for n in ns]
    draws = (2 if quick else 10) if draws is None else int(draws)
    pbs_max_n = (40 if quick else 100) if pbs_max_n is None else int(pbs_max_n)

    def pbs_draws(n):
        cap = None if n <= 40 else (pbs_draws_mid if n <= 70 else pbs_draws_high)
        return draws if cap is None else min(draws, int(cap))

    # warm-up: compile every kernel once (shared by all draws), outside the timings
    step(progress, f"{NAME}: warm-up (compiles the kernels once)")
    m = C.random_linear(5, 12345)
    for meth in METHODS:
        _one(m, meth)

    rows, times, work = [], {k: {} for k in METHODS}, {k: {} for k in METHODS}
    jobs = [(n, d) for n in ns for d in range(draws)]
    for n, d in bar(jobs, progress, f"{NAME}: {len(ns)} dimensions n = {ns[0]}..{ns[-1]} x {draws} draws",
                    uniform=False):       # a draw's cost grows with n: no estimate of the time left
        m = C.random_linear(n, d)
        for meth in METHODS:
            if meth == "pbs" and (n > pbs_max_n or d >= pbs_draws(n)):
                continue
            sec, w = _one(m, meth)
            times[meth].setdefault(n, []).append(sec)
            work[meth].setdefault(n, []).append(w)
            rows.append([n, d, meth, sec, w])
    write_csv(out_dir / f"{NAME}.csv", ["n", "seed", "method", "seconds", "work"], rows)

    per_n = {meth: {str(n): {"median_s": float(np.median(v)), "mean_s": float(np.mean(v)), "runs": len(v),
                             "median_work": float(np.median(work[meth][n]))}
                    for n, v in sorted(times[meth].items())} for meth in METHODS}
    fits = {}
    pbs_ns = sorted(times["pbs"])
    for meth in METHODS:
        nn = sorted(times[meth])
        med_t = [np.median(times[meth][n]) for n in nn]
        mean_t = [np.mean(times[meth][n]) for n in nn]
        common = [i for i, n in enumerate(nn) if n in pbs_ns]
        large = [i for i, n in enumerate(nn) if n >= 50]
        fits[meth] = {
            "all_n_medians": fit(nn, med_t),
            "all_n_means": fit(nn, mean_t),
            "pbs_range_medians": fit([nn[i] for i in common], [med_t[i] for i in common]),
            "n_ge_50_medians": fit([nn[i] for i in large], [med_t[i] for i in large]) if len(large) >= 2 else None,
            "paper_b": PAPER_B[meth],
        }

    # figure
    fig, ax = P.new_figure(figsize=(7.5, 5.0))
    ax = ax[0, 0]
    for meth in METHODS:
        nn = sorted(times[meth])
        if not nn:
            continue
        for n in nn:
            ax.scatter([n] * len(times[meth][n]), times[meth][n], s=6, color=P.COLORS[meth], alpha=0.25, lw=0)
        med_t = [np.median(times[meth][n]) for n in nn]
        f = fits[meth]["all_n_medians"]
        lab = f"{P.LABELS[meth]}: b = {f['b']:.2f} (paper {PAPER_B[meth]})" if f else P.LABELS[meth]
        ax.plot(nn, med_t, "o", ms=4, color=P.COLORS[meth], label=lab)
        if f:
            x = np.array([nn[0], nn[-1]], float)
            ax.plot(x, f["a"] * x ** f["b"], "--", color=P.COLORS[meth], lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (states = parameters)")
    ax.set_ylabel("seconds per run (state solve included), median over draws")
    few = "" if all(pbs_draws(n) >= draws for n in ns if n <= pbs_max_n) else " (PBS: fewer for n > 40)"
    ax.set_title(f"Fig 6: random linear system, t in [0, 10], {draws} draws per n{few};\n"
                 f"dashed: least-squares fit a n^b to the medians", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="upper left")
    png = P.save_figure(fig, out_dir / f"{NAME}.png")

    return {
        "t_span": list(SPAN), "ns": ns, "draws": draws, "seeds": list(range(draws)),
        "pbs_max_n": pbs_max_n, "pbs_draws": {str(n): min(draws, pbs_draws(n)) for n in ns if n <= pbs_max_n},
        "settings": {"state": C.STATE, "fs": C.FS_LOOSE, "pbs": "sensitivities(method='pbs'), n_factor 10, 1-norm",
                     "timing": "one run per draw and method, state solve included, compilation excluded (warm-up)"},
        "per_n": per_n, "fits": fits,
        "paper": {"figure": "Fig 6", "claim": "runtime ~ a n^b with b = 4.2 (FS), 3.7 (PBS), 2.1 (Exp): the "
                  "advantage of the post-hoc methods over FS grows with the dimension", "b": PAPER_B},
        "files": [f"{NAME}.csv", png],
    }


RUNS = {NAME: run}


if __name__ == "__main__":
    C.main(RUNS, __doc__)
