"""``pbsens sample PROBLEM``: parallel SMMALA chains on a PEtab or SBtab estimation problem.

Registered in :data:`pbsens.cli.main.COMMANDS`; :func:`add_parser` adds the parser, :func:`run` does the work.
"""
from __future__ import annotations

import json
import os
import shutil
import sys

from ..errors import PbsensError
from .common import (add_force, add_out, add_quiet, add_solver_options, api_default, check_out_dir,
                     evaluate_default_text, nonneg_float, nonneg_int, plural, pos_int, say, show_progress, solver_options)

__all__ = ["add_parser", "run"]


def _sample():
    from ..inference.chains import sample
    return sample


def add_parser(subparsers):
    """Add the ``sample`` subcommand to an ``argparse`` subparsers object."""
    from ..sensitivity.posthoc import METHODS
    sample = _sample()
    d = {k: api_default(sample, k) for k in ("chains", "draws", "method", "metric_floor")}
    sp = subparsers.add_parser(
        "sample", help="Bayesian sampling (SMMALA chains in parallel) of a PEtab or SBtab problem",
        description="Run SMMALA chains on the posterior (PEtab priors, bounds as uniform support when a "
                    "parameter has none, x likelihood, on the parameter scale) in local processes or on a "
                    "dask cluster; write posterior.nc (ArviZ InferenceData), summary.tsv (mean, sd, R-hat, "
                    "bulk/tail ESS, ESS per second) and trace, rank and pair plots into --out. Every argument "
                    "and --out are checked before sampling; --out is created when the results are written. "
                    "The chains are checkpointed (--checkpoint): a killed run continues with --resume.")
    sp.add_argument("problem", metavar="PROBLEM", help="a PEtab YAML file or an SBtab folder (UQSA layout)")
    sp.add_argument("--chains", type=pos_int, default=d["chains"], help=f"number of chains (default {d['chains']})")
    sp.add_argument("--draws", type=pos_int, default=d["draws"],
                    help=f"kept draws per chain (default {d['draws']})")
    sp.add_argument("--burn-in", type=nonneg_int, default=None,
                    help="iterations discarded per chain, step size adapted there only (default draws/2)")
    sp.add_argument("--method", default=d["method"], choices=("fs",) + METHODS, metavar="METHOD",
                    help=f"sensitivities: a post-hoc method ({', '.join(METHODS)}) or fs (forward); "
                         f"default {d['method']}")
    add_solver_options(sp, what="solver (of the states; for fs of states and sensitivities together)",
                       default_text=evaluate_default_text())
    sp.add_argument("--seed", type=int, default=None, help="root seed of the chains (default: fresh, recorded)")
    sp.add_argument("--init", metavar="FIT", default=None,
                    help="start the chains at the best fits of a 'pbsens fit' run (its folder or fit.json): "
                         "chain k at the k-th best end point (cycling when the fit has fewer finished starts "
                         "than chains); default: dispersed around the nominal values")
    sp.add_argument("--workers", type=pos_int, default=None,
                    help="local worker processes (default min(chains, CPUs))")
    sp.add_argument("--scheduler", metavar="ADDRESS|local", default=None,
                    help="run on a dask.distributed scheduler at ADDRESS, or 'local' to start a LocalCluster")
    floor = d["metric_floor"]
    sp.add_argument("--metric-floor", type=nonneg_float, default=floor,
                    help="eigenvalue floor of the metric relative to its largest eigenvalue (default "
                         f"{'none' if floor is None else format(floor, 'g')}; 0: none, jitter-or-reject)")
    add_out(sp, "output folder (default pbsens-sample); created when the results are written (its "
                "checkpoint subfolder when sampling starts)",
            metavar="DIR")
    sp.set_defaults(out="pbsens-sample")
    sp.add_argument("--checkpoint", metavar="DIR", default=None,
                    help="folder of the chains' checkpoints (default OUT/checkpoint): each chain's draws and "
                         "complete sampler state, rewritten at most every 2 s and when it ends, and the run's "
                         "arguments, so that a run killed part way can be continued with --resume. --force "
                         "without --resume discards an earlier run's OUT/checkpoint")
    sp.add_argument("--resume", action="store_true",
                    help="continue the run checkpointed in the checkpoint folder: finished chains are read "
                         "back, the others continue from their checkpoint, and the draws equal an "
                         "uninterrupted run's; needs the same arguments (--seed may be left out). --out may "
                         "then hold its checkpoint folder. Without a checkpoint there, the run starts afresh")
    add_force(sp, "a non-empty --out")
    sp.add_argument("--no-plots", action="store_true", help="skip the trace, rank and pair plots")
    add_quiet(sp, "print nothing but errors (no progress bars)")
    sp.set_defaults(func=run)
    return sp


def _check_out(args):
    """Check --out and the checkpoint folder before sampling; returns the checkpoint folder.

    The default one is ``OUT/checkpoint``: with --resume, --out may hold it (other files need
    --force); without, a non-empty --out needs --force as before."""
    from ..inference.checkpoint import open_dir
    checkpoint = args.checkpoint or os.path.join(args.out, "checkpoint")
    in_out = args.checkpoint is None
    if args.resume and in_out and os.path.isdir(args.out):
        others = sorted(set(os.listdir(args.out)) - {"checkpoint"})
        if others and not args.force:
            raise PbsensError(f"'--out': {args.out!r} holds files besides its checkpoint folder ({', '.join(others)}); "
                              f"use --force to overwrite them")
        check_out_dir(args.out, True)
    else:
        try:
            check_out_dir(args.out, args.force)
        except PbsensError as exc:
            if in_out and os.path.isdir(checkpoint):
                raise PbsensError(f"{exc}, or --resume to continue the run checkpointed in {checkpoint!r}") from None
            raise
    if not (args.force and in_out):
        open_dir(checkpoint, args.resume)          # an earlier run's checkpoints need --resume
    return checkpoint


def _init_points(args, problem):
    """``theta0`` (chains, d) from ``--init FIT``: the best fits' end points; None without --init."""
    if args.init is None:
        return None
    import math

    import numpy as np

    from ..calibration import FitResult
    fit = FitResult.load(args.init)
    if list(fit.parameter_ids) != list(problem.parameter_ids):
        raise PbsensError(f"'--init': {args.init!r} was fitted on other parameters than {args.problem!r} estimates")
    ends = [s.x for s in fit.starts if math.isfinite(s.fval)]
    if not ends:
        raise PbsensError(f"'--init': no start of the fit in {args.init!r} ended with a finite objective")
    return np.array([ends[k % len(ends)] for k in range(args.chains)], dtype=np.float64)


def run(args):
    """``pbsens sample``: check the arguments and --out, sample, write the outputs, print the summary table."""
    from ..inference.sample_output import summary, write_sample_output
    from ..problems import load
    checkpoint = _check_out(args)      # fail before sampling, not after; --out created only when writing
    if not os.path.exists(args.problem):
        raise PbsensError(f"PROBLEM {args.problem!r} does not exist")
    problem = load(args.problem)
    floor = args.metric_floor if args.metric_floor is None or args.metric_floor > 0 else None
    if args.force and not args.resume and args.checkpoint is None and os.path.isdir(checkpoint):
        shutil.rmtree(checkpoint)      # an earlier run's, in --out: --force overwrites it
    idata = _sample()(problem, chains=args.chains, draws=args.draws, burn_in=args.burn_in, method=args.method,
                      seed=args.seed, client=args.scheduler, n_workers=args.workers, progress=show_progress(args),
                      metric_floor=floor, solver_options=solver_options(args), checkpoint_dir=checkpoint,
                      theta0=_init_points(args, problem),
                      resume=args.resume)
    paths = write_sample_output(idata, args.out, force=True, plots=not args.no_plots)   # --out checked above
    att = idata.posterior.attrs
    n_chains, n_draws = idata.posterior.sizes["chain"], idata.posterior.sizes["draw"]
    say(args, f"problem   {args.problem}")
    say(args, f"chains    {n_chains} of {args.chains} finished, {plural(n_draws, 'draw')} each, burn-in "
              f"{att['burn_in']}, method {args.method}, seed {att['seed']}")
    say(args, f"time      {att['wall_time']:.1f} s wall, {att['sampling_seconds']:.1f} s summed over chains")
    if not getattr(args, "quiet", False):
        df = summary(idata)
        cols = ["mean", "sd", "r_hat", "ess_bulk", "ess_tail", "ess_bulk_per_s"]
        print(df[cols].to_string(float_format=lambda v: f"{v:.4g}"))
    for f in json.loads(att["failed_chains"]):
        say(args, f"FAILED    chain {f['chain']} (seed {f['seed']}, spawn key {f['spawn_key']}): {f['error']}; "
                  f"{plural(f['iterations_kept'], 'iteration')} kept in group partial_chain_{f['chain']}")
    checks = json.loads(att.get("convergence_warnings", "[]"))
    for message in checks:          # after the table, where the eye lands (also warned on stderr)
        say(args, f"CHECK     {message}")
    for p in paths.values():
        say(args, f"wrote {p}")
    sys.stdout.flush()
    return 0
