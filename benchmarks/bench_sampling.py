"""SMMALA on Boehm with exp2-, pbsr- and fs-based sensitivities: R-hat, ESS per second, agreement.

For each method, ``pbsens.sample`` runs ``--chains`` chains of ``--draws`` draws
(burn-in ``--burn-in``, default draws/2) from dispersed starts (``pbsens.sample``) with the same
root seed plus the method's index, in local processes (``--workers``) or on a dask scheduler
(``--scheduler``). Reported per method: the largest R-hat over the estimated
parameters, the smallest bulk / tail ESS, ESS per second (smallest bulk ESS
divided by the chains' summed sampling seconds, so independent of how many
chains ran at once) and the mean acceptance. Then the ESS/s ratios exp2 / fs
and pbsr / fs, and whether every posterior mean of exp2 (and pbsr) agrees with
fs within 2 Monte Carlo standard errors (``|m_a - m_b| <= 2 sqrt(mcse_a^2 +
mcse_b^2)``, arviz's ``mcse_mean``).

At the end: one markdown table (per method: max R-hat, min bulk / tail ESS, ESS/s
over summed chain seconds and over wall seconds, summed chain and wall seconds,
acceptance) and, when exp2 and fs both ran, the exp2 and fs posterior means with
their MCSE per parameter. ``--metric`` is the SMMALA metric (default
``fisher+cov``: Fisher information plus the inverse burn-in covariance, see
``pbsens.smmala``). Run from the repository root (docs/PERFORMANCE.md)::

    python -m benchmarks.bench_sampling --chains 4 --draws 2000 --burn-in 1000 --methods exp2 pbsr fs \
        --workers 2 [--metric fisher+cov] [--out DIR]

Methods: any of ``pbsens.sample``'s, and ``exp2-grid`` (see ``VARIANTS``).
"""
from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
#: Methods that are a sensitivity method with options: ``exp2-grid`` is exp2 marched on the state solver's own
#: grid (no sub-steps, no midpoint correction): about 1.4x cheaper than the default march, gradient error
#: ~1e-3 on Boehm (docs/PERFORMANCE.md, PEtab work-precision). SMMALA stays exact with it (the
#: Metropolis-Hastings correction uses the log-likelihood, which is the same state solve; the gradient and
#: the metric only shape the proposal); what it changes is the proposal's efficiency.
VARIANTS = {"exp2-grid": ("exp2", {"substeps": 1, "midpoint": False})}
BOEHM = ROOT / "tests" / "data" / "petab" / "Boehm_JProteomeRes2014" / "Boehm_JProteomeRes2014.yaml"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problem", default=str(BOEHM))
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--burn-in", type=int, default=None)
    ap.add_argument("--methods", nargs="+", default=["exp2", "pbsr", "fs"])
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--metric", default="fisher+cov", help="SMMALA metric (pbsens.smmala): fisher, fisher+cov, cov")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--scheduler", default=None)
    ap.add_argument("--out", default=None, help="write each method's outputs into OUT/<method>")
    ap.add_argument("--checkpoints", metavar="DIR", default=None,
                    help="only analyse the chain checkpoints (chain_<k>.npz) a running or stopped sample() left in "
                         "its scratch folder DIR: the draws after --burn-in, cut to the shortest chain")
    ap.add_argument("--cost", type=int, default=0, metavar="N",
                    help="with --checkpoints: also time one posterior evaluation (llh, gradient, FIM) of each method "
                         "at N draws from the checkpoints, methods interleaved, medians")
    ap.add_argument("--step-cost", type=int, default=0, metavar="N",
                    help="only time SMMALA steps: N steps per method (interleaved blocks), CPU and wall ms per "
                         "step, broken down by layer (kernels, Problem.evaluate, posterior, transform, sampler)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.step_cost:
        step_cost(args.problem, args.methods, args.step_cost)
        return
    if args.checkpoints:
        X = analyse_checkpoints(args.checkpoints, args.burn_in or 0, args.problem)
        if args.cost and X is not None:
            evaluation_cost(args.problem, X.reshape(-1, X.shape[-1]), args.cost, args.methods)
        return
    import pbsens
    import pbsens.petab as pp
    from pbsens.inference.sample_output import summary, write_sample_output
    problem = pp.load(args.problem)
    print(f"{problem}: {args.chains} chains x {args.draws} draws, burn-in "
          f"{args.burn_in if args.burn_in is not None else args.draws // 2}, seeds {args.seed} + method index, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    tables = {}
    rows = []
    for i, m in enumerate(args.methods):
        # a different root seed per method: chains of two methods with one seed would be coupled (nearly
        # the same draws), which makes the agreement of their means a weak check
        offset = {"exp2": 0, "pbsr": 1, "fs": 2, "exp2-grid": 3}.get(m, 4 + i)   # the same seeds whether methods
        base, options = VARIANTS.get(m, (m, None))                              # run together or not
        idata = pbsens.sample(problem, chains=args.chains, draws=args.draws, burn_in=args.burn_in, method=base,
                              seed=args.seed + offset, client=args.scheduler, n_workers=args.workers, progress=True,
                              metric=args.metric, solver_options=options)
        df = summary(idata)
        tables[m] = df
        att = idata.posterior.attrs
        secs = att["sampling_seconds"]
        rows.append((m, df["r_hat"].max(), df["ess_bulk"].min(), df["ess_tail"].min(),
                     df["ess_bulk"].min() / secs, df["ess_bulk"].min() / att["wall_time"], secs, att["wall_time"],
                     float(idata.sample_stats.accepted.mean())))
        print(f"{m:5s}  max R-hat {df['r_hat'].max():.3f}  min ESS bulk {df['ess_bulk'].min():.0f}  "
              f"tail {df['ess_tail'].min():.0f}  ESS/s {df['ess_bulk'].min() / secs:.3f}  "
              f"acceptance {float(idata.sample_stats.accepted.mean()):.2f}  "
              f"{secs:.0f} s summed over chains ({att['wall_time']:.0f} s wall)", flush=True)
        if args.out:
            write_sample_output(idata, os.path.join(args.out, m), force=True)
    print("\n| method | max R-hat | min bulk ESS | min tail ESS | ESS/s (summed chain s) | ESS/s (wall) "
          "| summed chain s | wall s | acceptance |\n|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.3f} | {r[2]:.0f} | {r[3]:.0f} | {r[4]:.3f} | {r[5]:.3f} | {r[6]:.0f} | {r[7]:.0f} "
              f"| {r[8]:.2f} |")
    if "fs" in tables and "exp2" in tables:
        a, b = tables["exp2"], tables["fs"]
        tol = 2 * np.sqrt(a["mcse_mean"] ** 2 + b["mcse_mean"] ** 2)
        print("\n| parameter | exp2 mean | MCSE | fs mean | MCSE | |diff| / (2 sqrt(MCSE_a^2 + MCSE_b^2)) |"
              "\n|---|---|---|---|---|---|")
        for pid in a.index:
            print(f"| {pid} | {a.loc[pid, 'mean']:.4g} | {a.loc[pid, 'mcse_mean']:.2g} | {b.loc[pid, 'mean']:.4g} "
                  f"| {b.loc[pid, 'mcse_mean']:.2g} | {abs(a.loc[pid, 'mean'] - b.loc[pid, 'mean']) / tol[pid]:.2f} |")
    if "fs" in tables:
        ref = tables["fs"]
        for m in (x for x in args.methods if x != "fs"):
            df = tables[m]
            tol = 2 * np.sqrt(df["mcse_mean"] ** 2 + ref["mcse_mean"] ** 2)
            diff = (df["mean"] - ref["mean"]).abs()
            ok = bool((diff <= tol).all())
            r = (df["ess_bulk_per_s"].min()) / (ref["ess_bulk_per_s"].min())
            print(f"{m} vs fs: ESS/s ratio (smallest over parameters) {r:.2f}x; means within 2 MC standard "
                  f"errors: {ok} (largest |diff| / tol = {float((diff / tol).max()):.2f})")


def analyse_checkpoints(folder, burn_in, problem_path):
    """R-hat, ESS and means from the checkpoints of chains that have not finished (partial draws)."""
    import glob

    import arviz as az
    import pbsens.petab as pp
    ids = pp.load(problem_path).parameter_ids
    files = sorted(glob.glob(os.path.join(folder, "chain_*.npz")))
    chains = [np.load(f)["chain"] for f in files]
    print(f"{len(files)} chains, iterations done {[len(c) for c in chains]}, burn-in {burn_in}")
    n = min(len(c) for c in chains) - burn_in
    if n < 4:
        print("too few draws after burn-in")
        return None
    X = np.stack([c[burn_in:burn_in + n] for c in chains])
    ds = az.convert_to_dataset({p: X[:, :, j] for j, p in enumerate(ids)})
    df = az.summary(ds, kind="diagnostics").join(az.summary(ds, kind="stats")[["mean", "sd"]])
    print(f"{n} draws per chain after burn-in; max R-hat {df['r_hat'].max():.3f}, min bulk ESS "
          f"{df['ess_bulk'].min():.0f}, min tail ESS {df['ess_tail'].min():.0f}")
    print(df.to_string())
    return X


def step_cost(problem_path, methods, n, blocks=5):
    """Milliseconds per SMMALA step on ``problem_path`` per method, by layer.

    The chain is the one :func:`pbsens.sample` runs (the problem's posterior in the
    unbounded coordinates, ``fisher+cov`` metric not needed here: ``fisher``, a fixed
    step size, no burn-in). ``blocks`` blocks of ``n / blocks`` steps per method,
    methods interleaved; medians over blocks of CPU (``time.process_time``) and wall
    ms per step. Then, at the chain's states, medians of: ``Problem.evaluate``,
    the problem's log-posterior (priors added), the unbounded posterior (transform
    added), so that ``step - unbounded`` is the sampler's own cost per step; and
    the numba kernels' share (state solver and sensitivity march, timed by wrapping
    them) of ``Problem.evaluate``.
    """
    import time

    import pbsens.petab as pp
    from pbsens.problems.priors import support
    from pbsens.inference.smmala import smmala
    from pbsens.inference.transform import UnboundedPosterior
    pr = pp.load(problem_path)
    lo, hi = support(pr.priors)
    posts = {m: UnboundedPosterior(pr.log_posterior(method=m), lo, hi, ridge=0.1) for m in methods}
    z0 = posts[methods[0]].transform.to_unbounded(pr.x_nominal, margin=1e-6)
    for m in methods:
        posts[m].evaluate(z0)                       # compile / warm up
    per = max(1, n // blocks)
    step = {m: [] for m in methods}
    states = {m: [] for m in methods}
    z = {m: z0.copy() for m in methods}
    for b in range(blocks):
        for m in methods:
            rng = np.random.default_rng(100 * b + len(m))
            t, c = time.perf_counter(), time.process_time()
            res = smmala(posts[m], z[m], per, burn_in=0, step_size=0.5, seed=rng, progress=False)
            step[m].append(((time.process_time() - c) / per, (time.perf_counter() - t) / per))
            z[m] = res.chain[-1]
            states[m] += list(res.chain[:: max(1, per // 10)])
    # the kernels' share: wrap the state solver, the sensitivity march and the forward-sensitivity
    # solver (module attributes the problem code calls through) with CPU timers
    import pbsens.kernels.march as km
    import pbsens.kernels.rosenbrock as kr
    spent = [0.0]

    def timed(fn):
        def w(*a, **k):
            c = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spent[0] += time.process_time() - c
        return w
    print(f"{pr}: SMMALA step cost, {blocks} blocks x {per} steps per method, medians [ms]; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'method':6s} {'step CPU':>9s} {'step wall':>9s} {'unbounded':>9s} {'posterior':>9s} "
          f"{'evaluate':>9s} {'kernels':>8s}  sampler = step - unbounded, python = evaluate - kernels")
    out = {}
    for m in methods:
        xs = states[m]
        cost = {}
        for name, f in (("unbounded", posts[m].evaluate),
                        ("posterior", lambda zz, m=m: posts[m].posterior.evaluate(posts[m].transform.to_bounded(zz))),
                        ("evaluate", lambda zz, m=m: pr.evaluate(posts[m].transform.to_bounded(zz), method=m))):
            ts = []
            for x in xs:
                c = time.process_time()
                f(x + 1e-12)
                ts.append(time.process_time() - c)
            cost[name] = float(np.median(ts))
        saved = (km.march, kr.rodas5p_solve, kr.rodas5p_solve_sensitivities)
        ks = []
        try:
            km.march, kr.rodas5p_solve, kr.rodas5p_solve_sensitivities = (timed(f) for f in saved)
            for x in xs:
                spent[0] = 0.0
                pr.evaluate(posts[m].transform.to_bounded(x), method=m)
                ks.append(spent[0])
        finally:
            km.march, kr.rodas5p_solve, kr.rodas5p_solve_sensitivities = saved
        cost["kernels"] = float(np.median(ks))
        sc = float(np.median([v[0] for v in step[m]]))
        sw = float(np.median([v[1] for v in step[m]]))
        out[m] = sc
        print(f"{m:6s} {1e3 * sc:9.2f} {1e3 * sw:9.2f} {1e3 * cost['unbounded']:9.2f} {1e3 * cost['posterior']:9.2f} "
              f"{1e3 * cost['evaluate']:9.2f} {1e3 * cost['kernels']:8.2f}  sampler {1e3 * (sc - cost['unbounded']):.2f}, "
              f"python {1e3 * (cost['evaluate'] - cost['kernels']):.2f}")
    if "fs" in out:
        print("step CPU ratio fs / method: " + ", ".join(f"{m} {out['fs'] / v:.2f}x" for m, v in out.items()
                                                          if m != "fs"))


def evaluation_cost(problem_path, draws, n, methods):
    """Median seconds of one posterior evaluation per method at ``n`` draws (interleaved, same points)."""
    import time

    import pbsens.petab as pp
    pr = pp.load(problem_path)
    pts = draws[np.linspace(0, len(draws) - 1, n).astype(int)]
    posts = {m: pr.log_posterior(method=m) for m in methods}
    for m in methods:
        posts[m].evaluate(pts[0] + 1e-9)         # compile / warm up
    secs = {m: [] for m in methods}
    for x in pts:
        for m in methods:
            t = time.perf_counter()
            posts[m].evaluate(x)
            secs[m].append(time.perf_counter() - t)
    med = {m: float(np.median(secs[m])) for m in methods}
    print(f"one posterior evaluation at {n} draws, median [s]: " + ", ".join(f"{m} {v:.3f}" for m, v in med.items()))
    if "fs" in med:
        print("cost ratio fs / method (= ESS/s ratio method / fs when ESS per draw is the same): " +
              ", ".join(f"{m} {med['fs'] / v:.2f}x" for m, v in med.items() if m != "fs"))


if __name__ == "__main__":
    main()
