"""``pbsens petab PROBLEM.yaml``: log-likelihood, gradient and a data-vs-simulation plot.

One entry of :data:`pbsens.cli.main.COMMANDS`: :func:`add_parser` and :func:`run`.
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from ..errors import PbsensError
from ..sensitivity.methods import FORWARD
from .common import (PLOT_EXT, add_force, add_out, add_plot, add_quiet, add_solver_options, api_default,
                     check_distinct, check_path, evaluate_default_text, plural, say, solver_options)

__all__ = ["add_parser", "run", "read_theta", "plot_fit"]

#: Exit status of ``pbsens petab --cross-check`` when a condition disagrees (the report says which).
CROSS_CHECK_DISAGREES = 3


def add_parser(subparsers):
    """Add the ``petab`` subcommand to an ``argparse`` subparsers object."""
    from ..problems import Problem
    from ..sensitivity.posthoc import METHODS
    sp = subparsers.add_parser(
        "petab", help="evaluate a PEtab estimation problem (llh, chi2, gradient, plot)",
        description="Read a PEtab v1 problem, simulate every condition and print the log-likelihood, "
                    "chi2, the gradient's norm and the time per condition (of an evaluation after a first, "
                    "untimed one that compiles or loads the kernels: that and the loading are printed as "
                    "'load and compile').")
    sp.add_argument("problem", metavar="PROBLEM.yaml", help="the PEtab problem's YAML file (or an SBtab folder)")
    method = api_default(Problem.evaluate, "method")
    sp.add_argument("--method", default=method, choices=(FORWARD,) + METHODS, metavar="METHOD",
                    help=f"'fs' (forward sensitivities) or a post-hoc method: {', '.join(METHODS)} "
                         f"(default {method})")
    sp.add_argument("--theta", metavar="FILE",
                    help="estimated parameters on their scale: a JSON object {parameterId: value} or a "
                         "text file with one number per estimated parameter (default: nominal values)")
    sp.add_argument("--no-gradient", action="store_true", help="the log-likelihood only")
    add_solver_options(sp, what="solver (of the states; for fs of states and sensitivities together)",
                       default_text=evaluate_default_text())
    sp.add_argument("--estimate-error", action="store_true",
                    help="per condition, the largest estimated relative error of the post-hoc sensitivities "
                         "over its output times (one more solve and march per condition)")
    from ..problems.cross_check import DEFAULT_REFERENCE_SOLVER
    from ..solvers import SOLVERS
    sp.add_argument("--cross-check", action="store_true",
                    help="also cross-check every condition: its llh by the solver and by a second solver "
                         "(--reference-solver), its gradient by exp2 and by fs, each difference against the two "
                         "sides' error estimates (Problem.cross_check; several evaluations more); prints the "
                         "report, warns naming each condition that disagrees (with --no-gradient: the llh only) and "
                         f"then exits with status {CROSS_CHECK_DISAGREES} (after writing --out and --plot)")
    sp.add_argument("--reference-solver", default=DEFAULT_REFERENCE_SOLVER, choices=tuple(SOLVERS), metavar="S",
                    help=f"the second state solver of --cross-check (default {DEFAULT_REFERENCE_SOLVER})")
    add_out(sp, "write llh, chi2, gradient, FIM and timings as JSON", metavar="OUT", aliases=("--json",))
    add_plot(sp, "measured vs simulated, one panel per observable")
    add_force(sp, "existing --out/--plot files")
    add_quiet(sp)
    sp.set_defaults(func=run)
    return sp


def read_theta(path, problem):
    """``theta`` from a JSON object ``{id: value}`` or a text file of numbers (parameter scale)."""
    if not os.path.isfile(path):
        raise PbsensError(f"'--theta': file {path!r} does not exist")
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    if path.lower().endswith(".json"):
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PbsensError(f"'--theta': {path!r} is not valid JSON: {exc}") from None
        if not isinstance(d, dict):
            raise PbsensError(f"'--theta': {path!r} must hold an object {{parameterId: value}}")
        unknown = sorted(set(d) - set(problem.parameter_ids))
        if unknown:
            raise PbsensError(f"'--theta': {path!r} names {unknown}, which are not estimated parameters "
                              f"({', '.join(problem.parameter_ids)})")
        theta = problem.x_nominal.copy()
        for k, pid in enumerate(problem.parameter_ids):
            if pid in d:
                try:
                    theta[k] = float(d[pid])
                except (TypeError, ValueError):
                    raise PbsensError(f"'--theta': value of {pid!r} in {path!r} is not a number") from None
        return theta
    try:
        vals = [float(v) for v in text.split()]
    except ValueError:
        raise PbsensError(f"'--theta': {path!r} must contain numbers only (or be a .json file)") from None
    if len(vals) != problem.dim:
        raise PbsensError(f"'--theta': {path!r} has {len(vals)} numbers, the problem estimates {problem.dim}")
    return np.array(vals)


def plot_fit(problem, result, path):
    """Measured (markers) and simulated (lines) values per observable, one colour per condition
    (:func:`pbsens.report.fit_plots.plot_data`)."""
    from ..report.fit_plots import plot_data
    plot_data(problem, result, path=path, title=f"{problem.petab_problem.model.model_id}: llh = {result.llh:.6g}")


#: a first evaluation shorter than this is repeated, so that the per-condition times are
#: warm; a longer one (a large problem) is not, and its table says so
REEVALUATE_SECONDS = 10.0


def run(args):
    """``pbsens petab``: print llh, chi2, gradient norm and time per condition.

    Every argument and output path is checked before the problem is loaded; outputs are
    written at the end. The per-condition times are those of a second evaluation when the
    first one (which compiles or loads the model's kernels, printed with the loading as
    ``load and compile``) took at most :data:`REEVALUATE_SECONDS`; otherwise those of the
    first, labelled as such (a second evaluation of a large problem would double the wait).
    """
    from ..problems import load
    check_path(args.out, args.force, "--out")
    check_path(args.plot, args.force, "--plot", PLOT_EXT)
    check_distinct(args, "--out", "--plot")
    if not os.path.exists(args.problem):
        raise PbsensError(f"PROBLEM.yaml {args.problem!r} does not exist")
    if args.theta and not os.path.isfile(args.theta):
        raise PbsensError(f"'--theta': file {args.theta!r} does not exist")
    t0 = time.perf_counter()
    problem = load(args.problem)
    theta = read_theta(args.theta, problem) if args.theta else None
    opts = solver_options(args)
    t1 = time.perf_counter()
    res = problem.evaluate(theta, sensitivities=not args.no_gradient, method=args.method, **opts)   # compiles
    t2 = time.perf_counter()
    t_load, t_first = t1 - t0, t2 - t1
    warm = t_first <= REEVALUATE_SECONDS
    if warm:   # cheap: evaluate again so that the table times the conditions, not the compilation
        res = problem.evaluate(theta, sensitivities=not args.no_gradient, method=args.method, **opts)
    t_setup = t_load + t_first
    est = None
    if args.estimate_error and args.method != FORWARD:
        from ..problems.conditions import condition_estimates
        est = condition_estimates(problem, theta, method=args.method, **opts)
    check = None
    if args.cross_check:
        # the options are those of the exp2 side; with --method fs a --solver is fs's
        xo = dict(opts)
        if args.method == FORWARD and "solver" in xo:
            xo["fs_options"] = {"solver": xo.pop("solver")}
        check = problem.cross_check(theta, gradient=not args.no_gradient, reference_solver=args.reference_solver, **xo)
    say(args, f"problem     {args.problem}")
    say(args, f"parameters  {problem.dim} estimated, {plural(len(problem.conditions), 'condition')}, "
              f"{plural(len(res.simulations), 'measurement')}")
    say(args, f"method      {args.method}")
    say(args, f"llh         {res.llh:.10g}")
    say(args, f"chi2        {res.chi2:.10g}")
    if res.gradient is not None:
        say(args, f"|gradient|  {np.linalg.norm(res.gradient):.6g}  (d llh / d theta, parameter scale)")
    if args.estimate_error and est is None:
        say(args, "estimated error: not available for fs (its error is controlled by --rtol/--atol)")
    if warm:
        say(args, f"load and compile: {t_setup:.1f} s (reading the problem, compiling or loading the model and "
                  "kernels: a first evaluation)")
        which = "a second evaluation"
    else:
        say(args, f"load: {t_load:.1f} s; first evaluation {t_first:.1f} s (its first condition includes "
                  f"compiling; not repeated, as it took over {REEVALUATE_SECONDS:g} s)")
        which = "the first evaluation"
    if est is None:
        say(args, f"time per condition [ms] ({which})")
    else:
        say(args, f"time per condition [ms] ({which}), max estimated error E of S ({args.method}: "
                  "relative, ||dS||_F / ||S||_F, over the condition's output times)")
    for name in problem.conditions:
        e = "" if est is None else ("  E n/a (no output after t0)" if est[name] is None else f"  E {est[name]:.2g}")
        say(args, f"  {name:<40s} {1e3 * res.timing[name]:10.2f}{e}")
    say(args, f"  {'total':<40s} {1e3 * res.timing['total']:10.2f}")
    if check is not None:
        say(args, str(check))
    if args.out:
        out = {"problem": os.fspath(args.problem), "method": args.method, "llh": res.llh, "chi2": res.chi2,
               "parameter_ids": problem.parameter_ids, "theta": res.theta.tolist(),
               "gradient": None if res.gradient is None else res.gradient.tolist(),
               "fim": None if res.fim is None else res.fim.tolist(), "timing": res.timing,
               "load_and_compile_seconds": t_setup, "solver_options": opts}
        if est is not None:
            out["error_estimate"] = est
        if check is not None:
            out["cross_check"] = check.to_dict()
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)
        say(args, f"wrote {args.out}")
    if args.plot:
        plot_fit(problem, res, args.plot)
        say(args, f"wrote {args.plot}")
    sys.stdout.flush()
    return CROSS_CHECK_DISAGREES if check is not None and not check.agree else 0
