"""The dispatcher of the ``pbsens`` command: the top-level parser and :func:`main`.

It knows the commands only through :data:`COMMANDS`; each command module adds its
own subparser (``add_parser``) and runs it (``run``).
"""
from __future__ import annotations

import argparse
import sys

from ..errors import PbsensError
from . import cache, compare, models, petab, reproduce, run, sample, simulate

#: The subcommands, in the order ``pbsens --help`` lists them. A new command is one
#: module with ``add_parser(subparsers) -> parser`` and ``run(args) -> int`` plus one
#: entry here.
COMMANDS = (models, simulate, run, compare, reproduce, petab, sample, cache)


def build_parser():
    """The ``pbsens`` argument parser with every subcommand of :data:`COMMANDS`.

    Returns
    -------
    argparse.ArgumentParser
    """
    from .. import __version__
    parser = argparse.ArgumentParser(
        prog="pbsens",
        description="Post-hoc parameter sensitivities of ODE models (Peano-Baker series and "
                    "exponential methods).",
        epilog="Run 'pbsens COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"pbsens {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub).set_defaults(func=command.run)
    return parser


def main(argv=None):
    """Entry point of the ``pbsens`` command.

    Parameters
    ----------
    argv : list of str, optional
        Arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0 success, 1 rejected input or failed computation, 2 bad
        command line.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except PbsensError as exc:
        print(f"pbsens {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"pbsens {args.command}: interrupted", file=sys.stderr)
        return 130
