"""``pbsens reproduce``: run the paper's experiments through :func:`pbsens.reproduce.run` (not reimplemented here)."""
from __future__ import annotations

import argparse
import os
import time

from ..errors import PbsensError
from .common import say


def _reproduce_module():
    import importlib
    try:
        reproduce = importlib.import_module("pbsens.reproduce")
    except ModuleNotFoundError as exc:
        if exc.name == "pbsens.reproduce":
            raise PbsensError("the paper's experiments are not available in this installation: "
                              "the module pbsens.reproduce is missing") from None
        raise PbsensError(f"cannot import pbsens.reproduce: {exc}") from None
    except ImportError as exc:
        raise PbsensError(f"cannot import pbsens.reproduce: {exc}") from None
    return reproduce


def run(args):
    """``pbsens reproduce``: run the paper's experiments through :func:`pbsens.reproduce.run`."""
    mod = _reproduce_module()
    experiments = getattr(mod, "EXPERIMENTS", {})
    if args.list:
        for name, desc in experiments.items():
            print(f"{name:<12} {desc}")
        return 0
    names = list(args.names or [])
    if not names or "all" in names:
        if len(names) > 1:
            raise PbsensError("'NAME': 'all' cannot be combined with other experiment names")
        names = None
    else:
        unknown = [n for n in names if n not in experiments]
        if unknown:
            raise PbsensError(f"'NAME': unknown experiment(s) {', '.join(map(repr, unknown))}; "
                              f"choose from {', '.join(experiments) or '(none)'} or 'all'")
        names = list(dict.fromkeys(names))
    if args.out is not None and os.path.exists(args.out) and not os.path.isdir(args.out):
        raise PbsensError(f"'--out': {args.out!r} exists and is not a folder")
    t0 = time.perf_counter()
    # progress on stderr: bars on a terminal, lines otherwise (a log, CI), nothing with --quiet
    out = mod.run(names=names, quick=args.quick, out_dir=args.out, force=args.force,
                  progress=False if args.quiet else None)
    n = len(experiments) if names is None else len(names)
    dur = mod.format_duration
    say(args, f"ran {n} experiment(s){' (quick)' if args.quick else ''} in {dur(time.perf_counter() - t0)}")
    say(args, f"  results: {out['out_dir']}")
    say(args, f"  report:  {out['report']}")
    cmp = out.get("comparison")
    if cmp and cmp.get("rows"):
        same = sum(r["same_verdict"] for r in cmp["rows"])
        say(args, f"compared with the published reference (experiments/REPORT.md): the same verdict on {same} "
                  f"of {len(cmp['rows'])}" + (" (quick mode: differences expected)" if args.quick else ""))
        for r in cmp["rows"]:
            mark = "  " if r["same_verdict"] else "! "
            say(args, f"  {mark}{r['experiment']}: {r['verdict']} (reference: {r['reference_verdict']})")
        walls = [(w["run"], w["reference"]) for w in cmp.get("wall_time_s", {}).values()]
        if walls and all(a and b for a, b in walls):
            say(args, f"  wall time of these experiments: {dur(sum(a for a, _ in walls))} here, "
                      f"{dur(sum(b for _, b in walls))} in the reference run")
    return 0


def _experiments_epilog():
    import importlib
    try:
        EXPERIMENTS = importlib.import_module("pbsens.reproduce").EXPERIMENTS
    except Exception:  # noqa: BLE001 - help must work even without the module
        return "experiments: (pbsens.reproduce is not available)"
    return "experiments:\n" + "\n".join(f"  {k:<12} {v}" for k, v in EXPERIMENTS.items())


def add_parser(subparsers):
    """The ``reproduce`` subcommand and its options."""
    sp = subparsers.add_parser(
        "reproduce", help="run the paper's experiments (figures and tables of Section 8)",
        description="Regenerate the paper's experiments with pbsens.reproduce.run: the named ones, or all. "
                    "Results and their REPORT.md go into the output folder (--out); progress goes to stderr.",
        epilog=_experiments_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("names", nargs="*", metavar="NAME", help="experiments to run, or 'all' (default all)")
    sp.add_argument("--quick", action="store_true", help="short spans and few samples: a smoke test")
    sp.add_argument("--out", metavar="DIR",
                    help="folder for the results and REPORT.md (default ./pbsens-reproduce, or a new temporary "
                         "folder with --quick); the committed experiments/ files are never written")
    sp.add_argument("--force", action="store_true",
                    help="write into an output folder that already holds files (replacing those of the same names)")
    sp.add_argument("--list", action="store_true", help="list the experiments and exit")
    sp.add_argument("-q", "--quiet", action="store_true",
                    help="no progress (bars on a terminal, lines on stderr otherwise) and no summary")
    return sp
