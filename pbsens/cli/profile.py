"""``pbsens profile PROBLEM --fit DIR``: likelihood profiles through a fit's optimum, with
confidence intervals and a plot.

One entry of :data:`pbsens.cli.main.COMMANDS`: :func:`add_parser` and :func:`run`.
"""
from __future__ import annotations

import json
import os

from ..errors import PbsensError
from .common import add_force, add_quiet, add_solver_options, api_default, evaluate_default_text, pos_int, say, \
    solver_options

__all__ = ["add_parser", "run", "PROFILE_FILES"]

PROFILE_FILES = ("profiles.json", "profiles.csv", "intervals.tsv", "profiles.png")


def _profile():
    from ..calibration import profile
    return profile


def add_parser(subparsers):
    """Add the ``profile`` subcommand to an ``argparse`` subparsers object."""
    from ..calibration import OPTIMIZERS
    profile = _profile()
    d = {k: api_default(profile, k) for k in ("level", "optimizer", "method")}
    sp = subparsers.add_parser(
        "profile", help="likelihood profiles and confidence intervals through a fit's optimum",
        description="Profile each parameter by re-optimising the others along it, from the best start of a "
                    "'pbsens fit' run; write profiles.json, profiles.csv, intervals.tsv (the confidence "
                    "interval of every parameter) and profiles.png into --out.")
    sp.add_argument("problem", metavar="PROBLEM", help="the PEtab YAML file the fit was run on")
    sp.add_argument("--fit", required=True, metavar="DIR|FILE", help="a 'pbsens fit' folder or its fit.json")
    sp.add_argument("--parameters", metavar="ID,ID,...", default=None,
                    help="parameters to profile (default: all estimated)")
    sp.add_argument("--level", type=float, default=d["level"], help=f"confidence level (default {d['level']})")
    sp.add_argument("--optimizer", default=d["optimizer"], choices=tuple(OPTIMIZERS),
                    help=f"optimiser of the re-optimisations (default {d['optimizer']})")
    sp.add_argument("--method", default=d["method"], metavar="METHOD",
                    help=f"sensitivities of the re-optimisations (default {d['method']})")
    add_solver_options(sp, what="solver", default_text=evaluate_default_text())
    sp.add_argument("--workers", type=pos_int, default=None, help="parameters profiled in parallel (default 1)")
    sp.add_argument("--out", metavar="DIR", default="pbsens-profile", help="output folder (default pbsens-profile)")
    add_force(sp, "files in a non-empty --out")
    add_quiet(sp)
    sp.set_defaults(func=run)
    return sp


def run(args):
    """``pbsens profile``."""
    from ..calibration import FitResult
    from ..problems import load
    from .common import check_out_dir
    check_out_dir(args.out, args.force)
    if not os.path.exists(args.problem):
        raise PbsensError(f"PROBLEM {args.problem!r} does not exist")
    fit = FitResult.load(args.fit)
    problem = load(args.problem)
    if list(fit.parameter_ids) != list(problem.parameter_ids):
        raise PbsensError(f"'--fit': {args.fit!r} was fitted on other parameters than {args.problem!r} estimates")
    params = None if args.parameters is None else [p.strip() for p in args.parameters.split(",") if p.strip()]
    prof = _profile()(problem, fit, params, level=args.level, optimizer=args.optimizer, method=args.method,
                      n_workers=args.workers, solver_options=solver_options(args))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "profiles.json"), "w", encoding="utf-8") as fh:
        json.dump(prof.to_dict(), fh, indent=1)
    prof.to_dataframe().to_csv(os.path.join(args.out, "profiles.csv"), index=False)
    with open(os.path.join(args.out, "intervals.tsv"), "w", encoding="utf-8") as fh:
        fh.write("parameterId\tlower\tupper\tbest\n")
        for pid, (lo, hi) in prof.intervals().items():
            fh.write(f"{pid}\t{lo!r}\t{hi!r}\t{fit.x[problem.parameter_ids.index(pid)]!r}\n")
    from ..report.fit_plots import plot_profiles
    plot_profiles(prof, path=os.path.join(args.out, "profiles.png"))
    say(args, f"profiles of {len(prof.profiles)} parameters at level {args.level:g} (best llh {prof.best_llh:.10g})")
    for pid, (lo, hi) in prof.intervals().items():
        say(args, f"  {pid:30s} [{lo:.6g}, {hi:.6g}]")
    say(args, f"wrote {', '.join(PROFILE_FILES)} in {args.out}")
    return 0
