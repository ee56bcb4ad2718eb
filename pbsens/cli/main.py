"""The dispatcher of the ``pbsens`` command: the top-level parser and :func:`main`.

It knows the commands only through :data:`COMMANDS`; each command module adds its
own subparser (``add_parser``) and runs it (``run``).
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

from ..errors import PbsensError, PbsensWarning
from . import cache, compare, fit, models, petab, profile, reproduce, run, sample, simulate

#: The subcommands, in the order ``pbsens --help`` lists them. A new command is one
#: module with ``add_parser(subparsers) -> parser`` and ``run(args) -> int`` plus one
#: entry here.
COMMANDS = (models, simulate, run, compare, reproduce, petab, fit, profile, sample, cache)


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
        command line, 3 ``pbsens petab --cross-check`` found a disagreement (the report and
        the warnings name the conditions), 130 interrupted, 141 (as a process ended by SIGPIPE) when
        the reader of stdout went away (``pbsens cache info | head -1``): quietly,
        without a traceback.
    """
    try:
        return _main(argv)
    except BrokenPipeError:
        _silence_stdout()
        return BROKEN_PIPE


def _main(argv):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit:                   # --help, --version, usage errors: their text is out before exiting
        sys.stdout.flush()
        raise
    if not getattr(args, "func", None):
        parser.print_help()
        sys.stdout.flush()
        return 2
    try:
        with warnings.catch_warnings():  # restores showwarning afterwards (main may run in-process)
            warnings.showwarning = _warning_printer(args.command, warnings.showwarning)
            status = args.func(args) or 0
    except PbsensError as exc:
        sys.stdout.flush()               # what was printed before the error comes first
        print(f"pbsens {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"pbsens {args.command}: interrupted", file=sys.stderr)
        return 130
    sys.stdout.flush()                   # a closed pipe shows here, not at the interpreter's exit
    return status


def _warning_printer(command, default):
    """pbsens's own warnings as ``pbsens COMMAND: warning: ...`` (not as the source line that
    issued them, which means nothing to a user of the command); other warnings as Python prints them."""
    def show(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, PbsensWarning):
            return default(message, category, filename, lineno, file, line)
        try:
            (file or sys.stderr).write(f"pbsens {command}: warning: {message}\n")
        except OSError:
            pass
    return show


#: Exit status when stdout's reader has gone (128 + SIGPIPE, as the shell reports a process killed by it).
BROKEN_PIPE = 141


def _silence_stdout():
    """After a broken pipe: point stdout's descriptor at devnull, so that Python's final flush
    at exit does not fail again (the recipe of the Python docs, 'Note on SIGPIPE')."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):   # stdout without a descriptor (captured in tests)
        pass
