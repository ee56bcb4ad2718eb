"""The ``pbsens`` command line. It parses arguments and calls the public API, nothing else.

Subcommands: ``models``, ``simulate``, ``run``, ``compare``, ``reproduce``,
``petab``, ``sample``, ``cache`` (``pbsens COMMAND --help`` for each). Exit
status: 0 on success, 1 when the computation or an input file is rejected (the
message names the argument), 2 for malformed command lines (argparse), 141 when
stdout's reader went away (``| head``; quietly).

Layout
------
``main.py``
    The dispatcher: top-level parser, :func:`main`, and the registry ``COMMANDS``.
``common.py``
    Shared argument types (``positive_float``, ...), the option table every
    command takes its shared options from (``add_solver_options``: ``--solver``
    from :data:`pbsens.solvers.SOLVERS`, ``--rtol``, ``--atol``; ``add_quiet``,
    ``add_force``, ``add_out``; defaults read from the API's signatures by
    ``api_default``), the model/time/parameter arguments, output-path checks made
    before any computation (``check_path``, ``check_out_dir``), ``plural`` and
    result writing (:func:`write_result`).
``models.py``, ``simulate.py``, ``run.py``, ``compare.py``, ``reproduce.py``,
``petab.py``, ``sample.py``, ``cache.py``
    One module per command.

Adding a command (e.g. ``petab``, ``sample``, ``cache``)
--------------------------------------------------------
Write ``pbsens/cli/NAME.py`` with two functions::

    def add_parser(subparsers):      # argparse's object from add_subparsers()
        sp = subparsers.add_parser("NAME", help=..., description=...)
        ...                          # options; shared ones from .common (the option table:
                                     # same names, types and API defaults on every command)
        return sp

    def run(args):                   # the parsed namespace
        ...                          # call the public API; raise PbsensError on bad input
        return 0                     # exit status

and add the module to ``COMMANDS`` in ``main.py`` (one line). The dispatcher
sets ``func`` and turns a :class:`~pbsens.errors.PbsensError` into exit status 1
with ``pbsens NAME: error: ...`` (pbsens's warnings print as ``pbsens NAME:
warning: ...``); load models with ``common._model(name)``. Check every output
path before computing and create outputs only when writing them.
"""
from __future__ import annotations

from .common import SOLVERS, result_columns, write_result
from .compare import compare_methods
from .main import COMMANDS, build_parser, main
from .run import RUN_METHODS, compute_run

__all__ = ["main", "build_parser", "COMMANDS", "compute_run", "compare_methods", "write_result",
           "result_columns", "RUN_METHODS", "SOLVERS"]
