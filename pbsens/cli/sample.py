"""``pbsens sample PROBLEM``: parallel SMMALA chains on a PEtab or SBtab estimation problem.

Registered in :data:`pbsens.cli.main.COMMANDS`; :func:`add_parser` adds the parser, :func:`run` does the work.
"""
from __future__ import annotations

import os
import sys

from ..errors import PbsensError

__all__ = ["add_parser", "run"]


def add_parser(subparsers):
    """Add the ``sample`` subcommand to an ``argparse`` subparsers object."""
    sp = subparsers.add_parser(
        "sample", help="Bayesian sampling (SMMALA chains in parallel) of a PEtab or SBtab problem",
        description="Run SMMALA chains on the posterior (PEtab priors, bounds as uniform support when a "
                    "parameter has none, x likelihood, on the parameter scale) in local processes or on a "
                    "dask cluster; write posterior.nc (ArviZ InferenceData), summary.tsv (mean, sd, R-hat, "
                    "bulk/tail ESS, ESS per second) and trace, rank and pair plots into --out.")
    sp.add_argument("problem", metavar="PROBLEM", help="a PEtab YAML file or an SBtab folder (UQSA layout)")
    sp.add_argument("--chains", type=int, default=4, help="number of chains (default 4)")
    sp.add_argument("--draws", type=int, default=1000, help="kept draws per chain (default 1000)")
    sp.add_argument("--burn-in", type=int, default=None,
                    help="iterations discarded per chain, step size adapted there only (default draws/2)")
    sp.add_argument("--method", default="exp2",
                    help="sensitivities: exp2 (default), pbsr, pbsr2, exp, pbs, or fs (forward)")
    sp.add_argument("--seed", type=int, default=None, help="root seed of the chains (default: fresh, recorded)")
    sp.add_argument("--workers", type=int, default=None, help="local worker processes (default min(chains, CPUs))")
    sp.add_argument("--scheduler", metavar="ADDRESS|local", default=None,
                    help="run on a dask.distributed scheduler at ADDRESS, or 'local' to start a LocalCluster")
    sp.add_argument("--metric-floor", type=float, default=1e-6,
                    help="eigenvalue floor of the metric relative to its largest eigenvalue (default 1e-6)")
    sp.add_argument("--out", metavar="DIR", default="pbsens-sample", help="output folder (default pbsens-sample)")
    sp.add_argument("--force", action="store_true", help="overwrite a non-empty --out")
    sp.add_argument("--no-plots", action="store_true", help="skip the trace, rank and pair plots")
    sp.set_defaults(func=run)
    return sp


def run(args):
    """``pbsens sample``: sample, write the outputs, print the summary table."""
    from ..inference.chains import sample
    from ..inference.sample_output import prepare_out_dir, summary, write_sample_output
    from ..problems import load
    prepare_out_dir(args.out, args.force)     # fail before sampling, not after
    if not os.path.exists(args.problem):
        raise PbsensError(f"PROBLEM {args.problem!r} does not exist")
    problem = load(args.problem)
    idata = sample(problem, chains=args.chains, draws=args.draws, burn_in=args.burn_in, method=args.method,
                   seed=args.seed, client=args.scheduler, n_workers=args.workers, progress=True,
                   metric_floor=args.metric_floor if args.metric_floor > 0 else None)
    paths = write_sample_output(idata, args.out, force=True, plots=not args.no_plots)
    att = idata.posterior.attrs
    print(f"problem   {args.problem}")
    print(f"chains    {idata.posterior.sizes['chain']} of {args.chains} finished, {idata.posterior.sizes['draw']} "
          f"draws each, burn-in {att['burn_in']}, method {args.method}, seed {att['seed']}")
    print(f"time      {att['wall_time']:.1f} s wall, {att['sampling_seconds']:.1f} s summed over chains")
    df = summary(idata)
    cols = ["mean", "sd", "r_hat", "ess_bulk", "ess_tail", "ess_bulk_per_s"]
    print(df[cols].to_string(float_format=lambda v: f"{v:.4g}"))
    import json
    for f in json.loads(att["failed_chains"]):
        print(f"FAILED    chain {f['chain']} (seed {f['seed']}, spawn key {f['spawn_key']}): {f['error']}; "
              f"{f['iterations_kept']} iterations kept in group partial_chain_{f['chain']}")
    for name, p in paths.items():
        print(f"wrote {p}")
    sys.stdout.flush()
    return 0
