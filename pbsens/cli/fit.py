"""``pbsens fit PROBLEM``: multi-start fit of a PEtab problem, with its table, plots and the best
parameters as a PEtab parameter table.

One entry of :data:`pbsens.cli.main.COMMANDS`: :func:`add_parser` and :func:`run`.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..errors import PbsensError
from .common import (add_quiet, add_solver_options, api_default, evaluate_default_text, fmt_time, pos_int, say,
                     show_progress, solver_options)

__all__ = ["add_parser", "run", "write_parameter_table", "FIT_FILES"]

#: what ``pbsens fit`` writes into --out (besides run.json and starts/, the records of the starts)
FIT_FILES = ("fit.json", "fit.csv", "waterfall.png", "data_fit.png", "best_parameters.tsv")


def _fit():
    from ..calibration import fit
    return fit


def add_parser(subparsers):
    """Add the ``fit`` subcommand to an ``argparse`` subparsers object."""
    from ..calibration import METHOD_POLICIES, OPTIMIZERS
    from ..sensitivity.posthoc import METHODS
    fit = _fit()
    d = {k: api_default(fit, k) for k in ("n_starts", "optimizer", "method", "sampling", "refine", "refine_starts")}
    sp = subparsers.add_parser(
        "fit", help="multi-start fit of a PEtab problem (fides, least squares or L-BFGS-B)",
        description="Draw start points within the PEtab bounds, run a local optimiser from each (in local "
                    "processes or on a dask cluster) and write into --out: fit.json and fit.csv (every start, "
                    "best first), waterfall.png, data_fit.png (measured vs simulated at the best fit), "
                    "best_parameters.tsv (the parameter table with the best values as nominalValue) and each "
                    "start's record in starts/ as it ends, so that a killed run continues with --resume.")
    sp.add_argument("problem", metavar="PROBLEM", help="a PEtab YAML file (or an SBtab folder)")
    sp.add_argument("--starts", type=pos_int, default=d["n_starts"], help=f"number of starts (default {d['n_starts']})")
    sp.add_argument("--optimizer", default=d["optimizer"], choices=tuple(OPTIMIZERS),
                    help=f"local optimiser (default {d['optimizer']})")
    choices = tuple(METHOD_POLICIES) + ("fs",) + METHODS
    sp.add_argument("--method", default=d["method"], choices=choices, metavar="METHOD",
                    help=f"sensitivities of the gradient in every start: {', '.join(choices)} (default "
                         f"{d['method']}; exp2+fs: exp2 until the optimiser stops, then at most 50 iterations with fs)")
    sp.add_argument("--refine", default=d["refine"], choices=("fs",) + METHODS + ("none",), metavar="METHOD",
                    help=f"once every start has ended, run the best --refine-starts again from their end points "
                         f"with this method's gradients (default {d['refine']}; 'none': no refinement)")
    sp.add_argument("--refine-starts", type=int, default=d["refine_starts"], metavar="N",
                    help=f"how many of the best starts are refined (default {d['refine_starts']})")
    sp.add_argument("--sampling", default=d["sampling"], choices=("uniform", "lhs"),
                    help=f"start points: uniform in the bounds or a Latin hypercube (default {d['sampling']})")
    sp.add_argument("--seed", type=int, default=None, help="seed of the start points (default: fresh, recorded)")
    add_solver_options(sp, what="solver (of the states; for fs of states and sensitivities together)",
                       default_text=evaluate_default_text())
    sp.add_argument("--workers", type=pos_int, default=None, help="local worker processes (default: the CPUs)")
    sp.add_argument("--scheduler", metavar="ADDRESS|local", default=None,
                    help="run on a dask.distributed scheduler at ADDRESS, or 'local' to start a LocalCluster")
    sp.add_argument("--out", metavar="DIR", default="pbsens-fit", help="output folder (default pbsens-fit)")
    sp.add_argument("--resume", action="store_true",
                    help="continue the fit in --out (same arguments): recorded starts are not rerun")
    sp.add_argument("--no-plots", action="store_true", help="skip waterfall.png and data_fit.png")
    add_quiet(sp, "print nothing but errors (no progress bar)")
    sp.set_defaults(func=run)
    return sp


def write_parameter_table(problem, theta, path):
    """The problem's parameter table with ``nominalValue`` of the estimated parameters set to
    ``theta`` (given on the parameter scale; PEtab's nominal values are linear)."""
    from ..problems.priors import unscale
    df = problem.petab_problem.parameter_df.copy()
    lin = unscale(np.asarray(theta, float), np.asarray([("lin", "log", "log10").index(s) for s in problem.scales]))
    for pid, v in zip(problem.parameter_ids, lin):
        df.loc[pid, "nominalValue"] = float(v)
    df.to_csv(path, sep="\t")
    return path


def run(args):
    """``pbsens fit``: fit, write the outputs, print the best starts."""
    from ..calibration import FitResult  # noqa: F401 - the type fit returns
    from ..problems import load
    if not os.path.exists(args.problem):
        raise PbsensError(f"PROBLEM {args.problem!r} does not exist")
    if os.path.isfile(args.out):
        raise PbsensError(f"'--out': {args.out!r} is a file, not a folder")
    problem = load(args.problem)
    res = _fit()(problem, args.starts, optimizer=args.optimizer, method=args.method, seed=args.seed,
                 refine=None if args.refine == "none" else args.refine, refine_starts=args.refine_starts,
                 sampling=args.sampling, n_workers=args.workers, client=args.scheduler, out=args.out,
                 resume=args.resume, progress=show_progress(args), solver_options=solver_options(args))
    res.to_dataframe().to_csv(os.path.join(args.out, "fit.csv"), index=False)
    best = res.best
    if best is not None:
        write_parameter_table(problem, best.x, os.path.join(args.out, "best_parameters.tsv"))
    if not args.no_plots:
        from ..report.fit_plots import plot_data, plot_waterfall
        plot_waterfall(res, path=os.path.join(args.out, "waterfall.png"), title=f"{problem.model_id}: waterfall")
        if best is not None:
            r = problem.evaluate(best.x, sensitivities=False, **solver_options(args))
            plot_data(problem, r, path=os.path.join(args.out, "data_fit.png"))
    say(args, f"problem    {args.problem} ({problem.dim} estimated parameters)")
    refined = (f"{sum(s.refined for s in res.starts)} refined by {res.info['refine']}" if res.info.get("refine")
               else "no refinement")
    say(args, f"starts     {len(res)} ({res.info.get('resumed', 0)} read back), {res.n_failed} failed; "
              f"optimizer {args.optimizer}, method {args.method}, {refined}, seed {res.info['seed']}")
    if best is None:
        say(args, "no start ended with a finite objective")
        return 1
    say(args, f"best llh   {best.llh:.10g} (start {best.index}); {res.n_converged()} of {len(res)} starts within "
              f"0.5 of it; CPU {fmt_time(res.cpu)} in all, wall {fmt_time(res.info['wall'])}")
    say(args, f"{'rank':>4} {'start':>5} {'llh':>16} {'iter':>5} {'grad':>5} {'cpu':>9}  message")
    for k, s in enumerate(res.starts[:10]):
        llh = f"{s.llh:16.10g}" if math.isfinite(s.llh) else f"{'failed':>16}"
        say(args, f"{k:4d} {s.index:5d} {llh} {s.n_iter:5d} {s.n_grad:5d} {fmt_time(s.cpu):>9}  "
                  f"{'(refined) ' if s.refined else ''}{s.message}")
    say(args, f"wrote      {', '.join(f for f in FIT_FILES if os.path.exists(os.path.join(args.out, f)))} in {args.out}")
    return 0
