"""The ``pbsens`` command line. It parses arguments and calls the public API, nothing else.

Subcommands: ``models``, ``simulate``, ``run``, ``compare``, ``reproduce``
(``pbsens COMMAND --help`` for each). Exit status: 0 on success, 1 when the
computation or an input file is rejected (the message names the argument),
2 for malformed command lines (argparse).

Layout
------
``main.py``
    The dispatcher: top-level parser, :func:`main`, and the registry ``COMMANDS``.
``common.py``
    Shared argument types (``positive_float``, ...), the model/time/parameter
    arguments, output-path checks and result writing (:func:`write_result`).
``models.py``, ``simulate.py``, ``run.py``, ``compare.py``, ``reproduce.py``
    One module per command.

Adding a command (e.g. ``petab``, ``sample``, ``cache``)
--------------------------------------------------------
Write ``pbsens/cli/NAME.py`` with two functions::

    def add_parser(subparsers):      # argparse's object from add_subparsers()
        sp = subparsers.add_parser("NAME", help=..., description=...)
        ...                          # options; shared ones from .common
        return sp

    def run(args):                   # the parsed namespace
        ...                          # call the public API; raise PbsensError on bad input
        return 0                     # exit status

and add the module to ``COMMANDS`` in ``main.py`` (one line). The dispatcher
sets ``func`` and turns a :class:`~pbsens.errors.PbsensError` into exit status 1
with ``pbsens NAME: error: ...``; load models with ``common._model(name)``.
"""
from __future__ import annotations

from .common import SOLVERS, result_columns, write_result
from .compare import compare_methods
from .main import COMMANDS, build_parser, main
from .run import RUN_METHODS, compute_run

__all__ = ["main", "build_parser", "COMMANDS", "compute_run", "compare_methods", "write_result",
           "result_columns", "RUN_METHODS", "SOLVERS"]
