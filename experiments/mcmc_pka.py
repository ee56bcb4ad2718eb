"""SMMALA on the PKA model with sensitivities from FS, PBSR and Exp (METHOD.md section 8).

Synthetic data: three observables of PKA (outputs added to a copy of the model
spec) at 20 times in [30, 600], 10 % relative Gaussian noise, fixed seed. Six
rate constants are sampled in ``theta = ln p`` under a normal prior centred on
the true values (sd 1 in ln). The same SMMALA run (same seed, same sizes, same
start) is repeated with the Fisher metric and gradient from

* ``"fs"``   forward sensitivities (the reference; ``forward_sensitivities``, BDF),
* ``"pbsr"`` post-hoc PBSR (Algorithm 2) on the LSODA state grid,
* ``"exp"``  post-hoc exponential method (Algorithm 3) on the same grid,

and acceptance, wall time, ESS (ArviZ) and ESS per second are compared.

Usage::

    python experiments/mcmc_pka.py            # full run (~5-8 min on 2 cores)
    python experiments/mcmc_pka.py --quick    # ~1 min

Outputs ``mcmc_pka.json``, ``mcmc_pka.md`` and ``mcmc_pka.png`` in ``--out-dir`` (default
``./pbsens-reproduce-mcmc``; the committed ``results/mcmc_pka.*`` are the reference).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

try:
    import pbsens
except ImportError:  # running from a checkout without installation
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import pbsens
from pbsens.inference import GaussianLikelihood, LogPosterior, NormalPrior, smmala
from pbsens.model.spec import Definition

METHODS = ("fs", "pbsr", "exp")
#: Sampled parameters: chosen greedily (largest Laplace posterior sd smallest, from the
#: Fisher information (1.3) + prior at the true values); the first five are well
#: identified by the data (posterior sd 0.02-0.2 in ln p), the sixth mostly by the prior.
#: Beyond six, every further rate constant of PKA is prior-dominated with these observables.
PARAMS = ["kb_RiiPxC__RiiP_C", "kf_cAMPxRii__Rii_cAMP", "kf_C_AKAR4", "kb_cAMPxRii__Rii_cAMP",
          "kf_RiixC__Rii_C", "kb_RiiP_cAMPxC__RiiP_C_cAMP"]
OUTPUTS = [("AKAR4p_pct", "100*AKAR4p/AKAR4_ConservedConst"),  # phosphorylated reporter, % of total
           ("C_free", "C"),
           ("RiiP_cAMP_obs", "RiiP_cAMP")]
TIMES = np.linspace(30.0, 600.0, 20)
REL_NOISE = 0.10
PRIOR_SD = 1.0
SEED = 2024
TOL = dict(rtol=1e-6, atol=1e-8)
#: State solver of the post-hoc methods, named: the paper's LSODA (a likelihood without ``solver=``
#: takes :func:`pbsens.sensitivities`' default, Rodas5P since issue #41). FS keeps its BDF default.
POSTHOC_SOLVER = "LSODA"
SIZES = {"full": dict(burn_in=400, n_samples=1600), "quick": dict(burn_in=100, n_samples=200)}


def build_model():
    """PKA with three outputs (a ModelSpec copy with an ``outputs`` list)."""
    base = pbsens.load_model("PKA")
    spec = copy.deepcopy(base.spec)
    spec.name = "PKA_obs"
    spec.outputs = [Definition(n, e) for n, e in OUTPUTS]
    return pbsens.load_model(spec.validate())


def make_data(model, seed=SEED):
    """Noise-free observables (by FS at tight tolerances), sigma and noisy data."""
    lik = GaussianLikelihood(model, TIMES, np.ones((TIMES.size, len(OUTPUTS))), 1.0, params=PARAMS,
                             method="fs", rtol=1e-10, atol=1e-12)
    theta_true = lik.to_theta()
    y = lik.predict(theta_true)
    sigma = REL_NOISE * np.abs(y)
    rng = np.random.default_rng(seed)
    data = y + sigma * rng.standard_normal(y.shape)
    return theta_true, y, sigma, data


def _likelihood(model, data, sigma, method):
    """The likelihood of one compared method: post-hoc ones on ``POSTHOC_SOLVER``'s grid, FS on its default."""
    return GaussianLikelihood(model, TIMES, data, sigma, params=PARAMS, method=method,
                              solver=None if method == "fs" else POSTHOC_SOLVER, **TOL)


def _time_evaluations(model, data, sigma, theta, n_rep):
    """Median seconds of one likelihood evaluate (solve + sensitivities + Fisher) per method."""
    out = {}
    for method in METHODS:
        ts = []
        for i in range(n_rep + 1):  # first call: compilation / warm-up, not timed
            lik = _likelihood(model, data, sigma, method)
            t0 = time.perf_counter()
            lik.evaluate(theta)
            if i:
                ts.append(time.perf_counter() - t0)
        out[method] = float(np.median(ts))
    return out


def _ess(res):
    try:
        return res.ess()
    except pbsens.PbsensError:
        return None


def run(quick=False, out_dir=None, progress=None) -> dict:
    """Run the comparison; write JSON, markdown and PNG into ``out_dir`` (required); return the JSON dict."""
    if out_dir is None:
        raise ValueError("out_dir is required (the command line's default is ./pbsens-reproduce-mcmc)")
    t_all = time.perf_counter()
    sizes = SIZES["quick" if quick else "full"]
    model = build_model()
    theta_true, y_true, sigma, data = make_data(model)
    prior = NormalPrior(theta_true, PRIOR_SD)
    eval_time = _time_evaluations(model, data, sigma, theta_true, 2 if quick else 5)

    runs, results = {}, {}
    for method in METHODS:
        lik = _likelihood(model, data, sigma, method)
        post = LogPosterior(lik, prior)
        res = smmala(post, theta_true, sizes["n_samples"], burn_in=sizes["burn_in"], seed=SEED,
                     target_accept=0.6, progress=progress)
        runs[method] = res
        ess = _ess(res)
        results[method] = {
            "accept_rate": res.accept_rate,
            "accept_rate_burn_in": res.accept_rate_burn_in,
            "step_size": res.step_size,
            "wall_time_s": res.wall_time,
            "time_per_iteration_s": res.wall_time / res.n_evaluations,
            "n_failed": res.n_failed, "n_non_pd": res.n_non_pd, "n_jitter": res.n_jitter,
            "ess": None if ess is None else ess.tolist(),
            "ess_min": None if ess is None else float(ess.min()),
            "ess_median": None if ess is None else float(np.median(ess)),
            "ess_per_s_min": None if ess is None else float(ess.min() / res.wall_time),
            "ess_per_s_median": None if ess is None else float(np.median(ess) / res.wall_time),
            "posterior_mean": res.mean().tolist(),
            "posterior_sd": np.sqrt(np.diag(res.cov())).tolist(),
        }
        print(f"[{method}] acceptance {res.accept_rate:.2f}, eps {res.step_size:.3g}, "
              f"{res.wall_time:.1f} s" + ("" if ess is None else
                                          f", ESS min/median {ess.min():.0f}/{np.median(ess):.0f}, "
                                          f"ESS/s (min) {ess.min() / res.wall_time:.2f}"), flush=True)

    fs = results["fs"]
    ratios = {f"fs/{m}": {"wall_time": fs["wall_time_s"] / results[m]["wall_time_s"],
                          "single_evaluation": eval_time["fs"] / eval_time[m],
                          "ess_per_s_min": (None if fs["ess_per_s_min"] is None else
                                            results[m]["ess_per_s_min"] / fs["ess_per_s_min"])}
              for m in METHODS if m != "fs"}
    out = {
        "experiment": "SMMALA on PKA with FS / PBSR / Exp sensitivities (METHOD.md section 8)",
        "mode": "quick" if quick else "full",
        "model": model.name, "observables": [n for n, _ in OUTPUTS],
        "output_expressions": dict(OUTPUTS),
        "params": PARAMS, "theta_true": theta_true.tolist(), "p_true": np.exp(theta_true).tolist(),
        "times": TIMES.tolist(), "relative_noise": REL_NOISE, "prior_sd_ln": PRIOR_SD, "seed": SEED,
        "solver_tolerances": TOL, "fs_solver": "BDF (forward_sensitivities default)",
        "posthoc_state_solver": POSTHOC_SOLVER, **sizes,
        "single_evaluation_s": eval_time,
        "methods": results,
        "speed_ratios": ratios,
        "environment": {"python": platform.python_version(), "numpy": np.__version__,
                        "cpus": os.cpu_count(), "machine": platform.machine()},
    }
    out["total_time_s"] = time.perf_counter() - t_all
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "mcmc_pka.json", "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=1)
    (out_dir / "mcmc_pka.md").write_text(_markdown(out), encoding="utf-8")
    _plot(runs, theta_true, out_dir / "mcmc_pka.png")
    return out


def _fmt(v, f="{:.2f}"):
    return "n/a" if v is None else f.format(v)


def _markdown(out) -> str:
    res = out["methods"]
    lines = [f"# SMMALA on PKA: FS vs PBSR vs Exp sensitivities ({out['mode']} mode)", "",
             f"{len(out['params'])} parameters in ln p, {len(out['times'])} times x "
             f"{len(out['observables'])} observables ({', '.join(out['observables'])}), "
             f"{int(out['relative_noise'] * 100)} % noise, prior sd {out['prior_sd_ln']} (ln); "
             f"burn-in {out['burn_in']}, {out['n_samples']} samples, seed {out['seed']}; "
             f"rtol {out['solver_tolerances']['rtol']}, atol {out['solver_tolerances']['atol']}.", "",
             "| method | acceptance | step | one evaluation (s) | wall time (s) | ESS min | ESS median "
             "| ESS/s min | ESS/s median |",
             "|---|---|---|---|---|---|---|---|---|"]
    for m, r in res.items():
        lines.append(f"| {m} | {r['accept_rate']:.2f} | {r['step_size']:.3g} | "
                     f"{out['single_evaluation_s'][m]:.4f} | {r['wall_time_s']:.1f} | "
                     f"{_fmt(r['ess_min'], '{:.0f}')} | {_fmt(r['ess_median'], '{:.0f}')} | "
                     f"{_fmt(r['ess_per_s_min'])} | {_fmt(r['ess_per_s_median'])} |")
    lines += ["", "Speed ratios (FS relative to the post-hoc method; > 1 means the post-hoc method is faster):", "",
              "| ratio | wall time | one evaluation | ESS/s (min) |", "|---|---|---|---|"]
    for k, v in out["speed_ratios"].items():
        lines.append(f"| {k} | {v['wall_time']:.2f} | {v['single_evaluation']:.2f} | "
                     f"{_fmt(v['ess_per_s_min'])} |")
    lines += ["", "Posterior means of ln p (sd in parentheses):", "",
              "| parameter | true | " + " | ".join(res) + " |", "|---|---|" + "---|" * len(res)]
    for i, name in enumerate(out["params"]):
        cells = [f"{res[m]['posterior_mean'][i]:.3f} ({res[m]['posterior_sd'][i]:.3f})" for m in res]
        lines.append(f"| {name} | {out['theta_true'][i]:.3f} | " + " | ".join(cells) + " |")
    lines += ["", f"Total script time: {out['total_time_s']:.0f} s on {out['environment']['cpus']} CPU(s).", ""]
    return "\n".join(lines)


def _plot(runs, theta_true, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = theta_true.size
    ncol = 3
    nrow = -(-d // ncol)
    fig = plt.figure(figsize=(4 * ncol, 3 * (nrow + 1)), constrained_layout=True)
    gs = fig.add_gridspec(nrow + 1, ncol)
    colors = {"fs": "k", "pbsr": "tab:blue", "exp": "tab:orange"}
    for i in range(d):
        ax = fig.add_subplot(gs[i // ncol, i % ncol])
        lo = min(r.chain[:, i].min() for r in runs.values())
        hi = max(r.chain[:, i].max() for r in runs.values())
        bins = np.linspace(lo, hi, 30)
        for m, r in runs.items():
            ax.hist(r.chain[:, i], bins=bins, density=True, histtype="step", color=colors[m], label=m)
        ax.axvline(theta_true[i], color="r", ls="--", lw=1)
        ax.set_title(PARAMS[i], fontsize=8)
        ax.set_xlabel("ln p", fontsize=8)
        if i == 0:
            ax.legend(fontsize=7)
    ax = fig.add_subplot(gs[nrow, :])
    for m, r in runs.items():
        ax.plot(np.r_[r.burn_in_logp, r.logp], color=colors[m], lw=0.6, label=m)
    b = next(iter(runs.values())).burn_in
    ax.axvline(b, color="gray", ls=":", lw=1)
    ax.set_xlabel("iteration (dotted: end of burn-in)")
    ax.set_ylabel("log posterior")
    ax.legend(fontsize=8)
    fig.suptitle("SMMALA on PKA: marginals of ln p (red: true) and log-posterior traces")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short chains (~1 minute)")
    ap.add_argument("--out-dir", default="pbsens-reproduce-mcmc",
                    help="output folder (default ./pbsens-reproduce-mcmc; never the committed results/)")
    ap.add_argument("--force", action="store_true", help="write into an output folder that already holds files")
    ap.add_argument("--progress", action="store_true", default=None, help="show progress bars")
    args = ap.parse_args(argv)
    from pbsens.reproduce import prepare_out_dir
    try:
        out_dir = prepare_out_dir(args.out_dir, force=args.force)
    except pbsens.PbsensError as exc:
        ap.exit(1, f"error: {exc}\n")
    out = run(quick=args.quick, out_dir=out_dir, progress=args.progress)
    print(_markdown(out))


if __name__ == "__main__":
    main()
