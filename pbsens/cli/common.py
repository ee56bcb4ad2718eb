"""What the ``pbsens`` commands share: argument types, the option table, model/time/parameter
arguments, output-path checks and writing results.

The option table: every command that has the option takes it from here, with the same
name, type and meaning (``--solver``, ``--rtol``, ``--atol``: :func:`add_solver_options`;
``-q/--quiet``: :func:`add_quiet`; ``--force``: :func:`add_force`; ``--out``:
:func:`add_out`). Defaults are never repeated here: they are read from the Python API's
signatures (:func:`api_default`) or left ``None`` so that the API applies its own.
Outputs are checked before any computation (:func:`check_path`, :func:`check_out_dir`)
and created only when the results are written.

Nothing here parses a whole command line (that is :mod:`pbsens.cli.main`) or runs a
command (one module per command).
"""
from __future__ import annotations

import argparse
import inspect
import os
import sys

import numpy as np

from ..errors import PbsensError
from ..solvers import SOLVERS as _SOLVER_REGISTRY

#: State solvers accepted by ``--solver``: the names of the registry :data:`pbsens.solvers.SOLVERS`
#: (scipy's steppers and the compiled ``rodas5p``).
SOLVERS = tuple(_SOLVER_REGISTRY)
DATA_EXT = (".npz", ".csv")
PLOT_EXT = (".png", ".pdf", ".svg")
TABLE_EXT = (".csv", ".json")


def api_default(fn, name):
    """The default of parameter ``name`` of the API function ``fn``, read from its signature
    (the command line never repeats the API's literals)."""
    return inspect.signature(fn).parameters[name].default


def plural(n, word, many=None):
    """``"1 condition"``, ``"3 conditions"`` (``many``: the plural when it is not ``word + "s"``)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


# ----------------------------------------------------------------- argument types
def _finite_float(text, ok, requirement):
    """``float(text)`` if finite and ``ok(value)``, else argparse's type error saying ``requirement``."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (np.isfinite(v) and ok(v)):
        raise argparse.ArgumentTypeError(f"must be {requirement}, got {text!r}")
    return v


def positive_float(text):
    """argparse type: a positive finite number (argparse names the option on failure)."""
    return _finite_float(text, lambda v: v > 0, "a positive number")


def nonneg_float(text):
    """argparse type: a finite number >= 0."""
    return _finite_float(text, lambda v: v >= 0, "a number >= 0")


def nonneg_int(text):
    """argparse type: an integer >= 0."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return v


def pos_int(text):
    """argparse type: an integer >= 1."""
    v = nonneg_int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return v


def show_progress(args):
    """Progress bars only on a terminal and without ``--quiet``."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


def say(args, *a, **kw):
    """``print`` unless ``--quiet``."""
    if not getattr(args, "quiet", False):
        print(*a, **kw)


def _model(name):
    """The model named on the command line (every command loads it here; tests substitute it)."""
    from .. import load_model
    return load_model(name)


def t_span_arg(args):
    """``(t0, t1)`` from ``--t-end`` or ``--t-span``."""
    if args.t_span is not None:
        a, b = args.t_span
        if not (np.isfinite(a) and np.isfinite(b) and b > a):
            raise PbsensError(f"'--t-span' needs finite A < B, got {a:g} {b:g}")
        return (float(a), float(b))
    if not (np.isfinite(args.t_end) and args.t_end > 0):
        raise PbsensError(f"'--t-end' must be a positive number, got {args.t_end:g}")
    return (0.0, float(args.t_end))


def t_eval_arg(spec, t_span):
    """``FILE`` (one time per line / .npy) or ``a:b:n`` (n points from a to b), checked against ``t_span``."""
    from ..solvers import check_t_eval
    if spec is None:
        return None
    if ":" in spec and not os.path.exists(spec):
        try:
            a, b, n = spec.split(":")
            te = np.linspace(float(a), float(b), int(n))
        except ValueError:
            raise PbsensError(f"'--t-eval' must be FILE or a:b:n, got {spec!r}") from None
        if int(n) < 1:
            raise PbsensError(f"'--t-eval': the number of points n must be >= 1, got {spec!r}")
    else:
        if not os.path.exists(spec):
            raise PbsensError(f"'--t-eval': file {spec!r} does not exist")
        try:
            te = np.load(spec) if spec.endswith(".npy") else np.loadtxt(spec, ndmin=1)
        except (OSError, ValueError) as exc:
            raise PbsensError(f"'--t-eval': cannot read times from {spec!r}: {exc}") from None
    return check_t_eval(te, t_span, name="--t-eval")


def params_arg(model, items):
    """The model's parameters with ``--param NAME=VALUE`` applied."""
    p = model.p
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise PbsensError(f"'--param' takes NAME=VALUE, got {item!r}")
        if name not in model.param_names:
            raise PbsensError(f"'--param': model {model.name!r} has no parameter {name!r}")
        try:
            v = float(value)
        except ValueError:
            raise PbsensError(f"'--param': value of {name!r} is not a number: {value!r}") from None
        if not np.isfinite(v):
            raise PbsensError(f"'--param': value of {name!r} must be finite, got {value!r}")
        p[model.param_names.index(name)] = v
    return p


def check_path(path, force, option, extensions=None):
    """Refuse an output path before any computation: wrong extension (``extensions``: None
    accepts any), missing folder, a folder in its place, an existing file without ``force``."""
    if path is None:
        return
    path = os.fspath(path)
    if extensions is not None and not path.lower().endswith(extensions):
        raise PbsensError(f"'{option}' must end in {' or '.join(extensions)}, got {path!r}")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise PbsensError(f"'{option}': folder {parent!r} does not exist")
    if os.path.isdir(path):
        raise PbsensError(f"'{option}': {path!r} is a folder, not a file")
    if os.path.exists(path) and not force:
        raise PbsensError(f"'{option}': {path!r} exists; use --force to overwrite it")


def check_out_dir(path, force, option="--out"):
    """Refuse an output folder before any computation (nothing is created here): a file in its
    place, a non-empty folder without ``force``, a parent that cannot hold it. The folder is
    created when the results are written."""
    from ..inference.sample_output import check_out_dir as check
    check(path, force, option=option)


def check_out(path, force):
    """``--out`` of a data file (.npz/.csv)."""
    check_path(path, force, "--out", DATA_EXT)


def check_distinct(args, *options):
    """Refuse two output options naming the same file."""
    paths = [(o, getattr(args, o.lstrip("-").replace("-", "_"))) for o in options]
    paths = [(o, os.path.abspath(p)) for o, p in paths if p]
    if len({p for _, p in paths}) < len(paths):
        raise PbsensError(f"{' and '.join(repr(o) for o, _ in paths)} name the same file")


def fmt_time(sec):
    """Seconds as ``12.3 ms`` or ``1.23 s`` (``-`` for None)."""
    if sec is None:
        return "-"
    return f"{sec * 1e3:.1f} ms" if sec < 1 else f"{sec:.2f} s"


def write_states(path, t, x, state_names):
    """Write ``t, x`` with state names to ``.npz`` or ``.csv``."""
    if path.endswith(".npz"):
        np.savez(path, t=t, x=x, state_names=np.array(state_names))
    else:
        header = ",".join(["t"] + list(state_names))
        np.savetxt(path, np.column_stack([t, x]), delimiter=",", header=header, comments="")


def result_columns(r):
    """Column names of a result in CSV form: ``t``, the states, then ``dX/dP`` state-major.

    Parameters
    ----------
    r : SensitivityResult

    Returns
    -------
    list of str
        ``["t", x_1, ..., x_n, "dx_1/dp_1", "dx_1/dp_2", ...]``; the column for
        ``S[:, i, j]`` is ``1 + n_states + i * n_params + j``.
    """
    return (["t"] + list(r.state_names)
            + [f"d{s}/d{q}" for s in r.state_names for q in r.param_names])


def write_result(path, r, t_span=None):
    """Write a :class:`~pbsens.sensitivity.result.SensitivityResult` to ``.npz`` or ``.csv``, with names.

    Parameters
    ----------
    path : str
        ``.npz``: arrays ``t`` (K,), ``x`` (K, nx), ``S`` (K, nx, np),
        ``state_names``, ``param_names``, ``p``, ``x0``, ``method``, ``model``,
        ``t_span``, and for post-hoc methods ``grid``, ``branch``, ``n_int`` (empty
        for ``fs``); all plain (no pickles). ``.csv``: one row per output time,
        columns :func:`result_columns` in a header line.
    r : SensitivityResult
    t_span : (float, float), optional
        Stored in the ``.npz``.
    """
    if path.endswith(".npz"):
        empty_f, empty_i = np.array([], dtype=np.float64), np.array([], dtype=np.int64)
        np.savez(path, t=r.t, x=r.x, S=r.S, state_names=np.array(r.state_names, dtype=str),
                 param_names=np.array(r.param_names, dtype=str), p=r.p, x0=r.x0,
                 method=np.array(r.method), model=np.array(r.model_name),
                 t_span=np.array(t_span if t_span is not None else (np.nan, np.nan), dtype=np.float64),
                 grid=r.grid if r.grid is not None else empty_f,
                 branch=np.asarray(r.branch, dtype=str) if r.branch is not None else np.array([], dtype=str),
                 n_int=r.n_int if r.n_int is not None else empty_i)
    else:
        data = np.column_stack([r.t, r.x, r.S.reshape(r.S.shape[0], -1)])
        np.savetxt(path, data, delimiter=",", header=",".join(result_columns(r)), comments="", fmt="%.17g")


def branch_summary(r):
    """One line: the march branches taken, with counts (and PBS sub-steps)."""
    counts = r.branch_counts()
    if not counts:
        return "-"
    parts = []
    for name in ("pbs", "exp-equilibrium", "exp-stiff", "exp", "exp2"):
        if name in counts:
            parts.append(f"{name} {counts[name]}")
    parts += [f"{k} {v}" for k, v in counts.items() if k not in ("pbs", "exp-equilibrium", "exp-stiff",
                                                                   "exp", "exp2")]
    text = ", ".join(parts)
    if "pbs" in counts and r.n_int is not None:
        ni = np.asarray(r.n_int)[np.asarray(r.branch) == "pbs"]
        text += f" (PBS sub-steps: {int(ni.sum())} in all, at most {int(ni.max())} per interval)"
    return text


def forward_function():
    """:func:`pbsens.sensitivity.forward.forward_sensitivities`, or a PbsensError when it cannot be imported."""
    try:
        from ..sensitivity.forward import forward_sensitivities
    except ImportError as exc:  # pragma: no cover - module written by another part of the project
        raise PbsensError(f"forward sensitivities are not available (cannot import pbsens.sensitivity.forward: {exc})") \
            from None
    return forward_sensitivities


def metric_functions():
    """``(relative_error, kappa_bar)``, or a PbsensError when they cannot be imported."""
    try:
        from ..sensitivity.metrics import kappa_bar, relative_error
    except ImportError as exc:
        raise PbsensError(f"accuracy measures are not available (cannot import pbsens.sensitivity.metrics: {exc})") from None
    return relative_error, kappa_bar


def add_model_and_span(sp):
    """``MODEL``, ``--t-end``/``--t-span``, ``--t-eval`` and ``--param``: the options every solve needs."""
    sp.add_argument("model", metavar="MODEL",
                    help="built-in model name (see 'pbsens models') or a model file (.json, SBML .xml) or "
                         "SBtab folder")
    g = sp.add_mutually_exclusive_group(required=True)
    g.add_argument("--t-end", type=float, metavar="T", help="integrate over [0, T]")
    g.add_argument("--t-span", type=float, nargs=2, metavar=("A", "B"), help="integrate over [A, B]")
    sp.add_argument("--t-eval", metavar="FILE|a:b:n",
                    help="output times: a file (one time per line, or .npy) or n points from a to b "
                         "(default: the solver's grid)")
    sp.add_argument("--param", action="append", metavar="NAME=VALUE",
                    help="set a parameter (repeatable)")


# ----------------------------------------------------------------- the option table
def add_solver_options(sp, solver=None, rtol=None, atol=None, what="state solver", default_text=None):
    """``--solver``, ``--rtol``, ``--atol``: the solver of the command's solves.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    solver, rtol, atol :
        The defaults: the Python API's for the command (:func:`api_default`), or None
        to pass nothing and let the API apply its own (then ``default_text`` says which).
    what : str
        What the solver solves, for the help texts.
    default_text : dict, optional
        ``{"solver": ..., "rtol": ..., "atol": ...}``: the help's "default ..." when the
        default is None (e.g. "LSODA; BDF for fs").
    """
    text = dict(default_text or {})
    for k, v in (("solver", solver), ("rtol", rtol), ("atol", atol)):
        if v is not None:
            text[k] = format(v, "g") if isinstance(v, float) else str(v)
    sp.add_argument("--solver", default=solver, choices=SOLVERS, metavar="SOLVER",
                    help=f"{what}: {', '.join(SOLVERS)}" + (f" (default {text['solver']})" if "solver" in text
                                                            else ""))
    sp.add_argument("--rtol", type=positive_float, default=rtol, metavar="RTOL",
                    help="relative tolerance of --solver" + (f" (default {text['rtol']})" if "rtol" in text
                                                             else ""))
    sp.add_argument("--atol", type=positive_float, default=atol, metavar="ATOL",
                    help="absolute tolerance of --solver" + (f" (default {text['atol']})" if "atol" in text
                                                             else ""))


def solver_options(args):
    """``{"solver", "rtol", "atol"}`` given on the command line (the ones left out: the API's defaults)."""
    return {k: getattr(args, k) for k in ("solver", "rtol", "atol") if getattr(args, k, None) is not None}


def evaluate_default_text():
    """``{"solver", "rtol", "atol"}`` -> text: :meth:`pbsens.problems.Problem.evaluate`'s defaults, for the
    help of ``petab`` and ``sample`` (which pass no solver option unless given, so that the API's apply)."""
    try:
        from ..problems.problem import evaluation_options
        post, fs = evaluation_options("exp2", True, {}), evaluation_options("fs", True, {})
    except (ImportError, AttributeError, TypeError):    # help must work whatever the problem module does
        return {k: "Problem.evaluate's" for k in ("solver", "rtol", "atol")}
    text = {}
    for k in ("solver", "rtol", "atol"):
        a, b = post.get(k), fs.get(k)
        f = (lambda v: f"{v:g}") if isinstance(a, float) else str
        text[k] = f(a) if a == b else f"{f(a)}, for fs {f(b)}"
    return text


def add_quiet(sp, what="print nothing but errors"):
    """``-q/--quiet``."""
    sp.add_argument("-q", "--quiet", action="store_true", help=what)


def add_force(sp, what="existing output files"):
    """``--force``: overwrite outputs that exist (without it, a command refuses before computing)."""
    sp.add_argument("--force", action="store_true", help=f"overwrite {what} (refused without it)")


def add_out(sp, help, metavar="FILE", aliases=()):
    """``--out`` (and older ``aliases`` of it): where the command writes its result."""
    sp.add_argument("--out", *aliases, dest="out", metavar=metavar, help=help)


def add_plot(sp, help):
    """``--plot FILE``: a figure (.png, .pdf, .svg)."""
    sp.add_argument("--plot", metavar="FILE", help=f"{help} ({', '.join(PLOT_EXT)})")


def add_command(subparsers, name, help, description, epilog):
    """The parser of subcommand ``name``: ``description`` filled to 78 columns,
    ``epilog`` (the examples) printed with its own line breaks."""
    return subparsers.add_parser(name, help=help, description=wrap(description), epilog=epilog,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)


def wrap(text):
    """A help text filled to 78 columns."""
    import textwrap
    return textwrap.fill(text, width=78)
