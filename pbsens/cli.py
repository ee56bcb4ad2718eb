"""The ``pbsens`` command line. It parses arguments and calls the public API, nothing else."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from .errors import PbsensError

__all__ = ["main"]


# ----------------------------------------------------------------- helpers
def _model(name):
    from . import load_model
    return load_model(name)


def _t_span(args):
    if args.t_span is not None:
        return tuple(args.t_span)
    return (0.0, args.t_end)


def _t_eval(spec, t_span):
    """``FILE`` (one time per line / .npy) or ``a:b:n`` (n points from a to b)."""
    if spec is None:
        return None
    if ":" in spec and not os.path.exists(spec):
        try:
            a, b, n = spec.split(":")
            return np.linspace(float(a), float(b), int(n))
        except ValueError:
            raise PbsensError(f"'--t-eval' must be FILE or a:b:n, got {spec!r}") from None
    if not os.path.exists(spec):
        raise PbsensError(f"'--t-eval': file {spec!r} does not exist")
    return np.load(spec) if spec.endswith(".npy") else np.loadtxt(spec, ndmin=1)


def _params(model, items):
    p = model.p
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise PbsensError(f"'--param' takes NAME=VALUE, got {item!r}")
        if name not in model.param_names:
            raise PbsensError(f"'--param': model {model.name!r} has no parameter {name!r}")
        try:
            p[model.param_names.index(name)] = float(value)
        except ValueError:
            raise PbsensError(f"'--param': value of {name!r} is not a number: {value!r}") from None
    return p


def _check_out(path, force):
    if path is None:
        return
    if os.path.exists(path) and not force:
        raise PbsensError(f"'--out': {path!r} exists; use --force to overwrite it")
    if not (path.endswith(".npz") or path.endswith(".csv")):
        raise PbsensError(f"'--out' must end in .npz or .csv, got {path!r}")


def _write_states(path, t, x, state_names):
    if path.endswith(".npz"):
        np.savez(path, t=t, x=x, state_names=np.array(state_names))
    else:
        header = ",".join(["t"] + list(state_names))
        np.savetxt(path, np.column_stack([t, x]), delimiter=",", header=header, comments="")


def _write_result(path, r):
    if path.endswith(".npz"):
        np.savez(path, t=r.t, x=r.x, S=r.S, state_names=np.array(r.state_names),
                 param_names=np.array(r.param_names), p=r.p, method=r.method,
                 branch=r.branch if r.branch is not None else np.array([], dtype=str),
                 n_int=r.n_int if r.n_int is not None else np.array([], dtype=np.int64))
    else:
        cols = ["t"] + list(r.state_names) + [f"d{s}/d{q}" for s in r.state_names for q in r.param_names]
        data = np.column_stack([r.t, r.x, r.S.reshape(r.S.shape[0], -1)])
        np.savetxt(path, data, delimiter=",", header=",".join(cols), comments="")


# ----------------------------------------------------------------- commands
def cmd_models(args):
    from .model.library import builtin_models
    from .model.spec import read_json_model
    rows = []
    for name, path in builtin_models().items():
        spec = read_json_model(path)
        rows.append((name, len(spec.states), len(spec.parameters), spec.title))
    print(f"{'model':<10} {'states':>6} {'params':>6}  title")
    for name, nx, np_, title in rows:
        print(f"{name:<10} {nx:>6} {np_:>6}  {title}")
    print("random linear: pbsens.random_linear_model(n, seed) (n states, n parameters)")
    return 0


def cmd_simulate(args):
    from . import solve_states
    _check_out(args.out, args.force)
    m = _model(args.model)
    span = _t_span(args)
    te = _t_eval(args.t_eval, span)
    t0 = time.perf_counter()
    tr = solve_states(m, span, t_eval=te, p=_params(m, args.param), method=args.solver,
                      rtol=args.rtol, atol=args.atol)
    dt = time.perf_counter() - t0
    t, x = (tr.t_eval, tr.x[tr.eval_index]) if te is not None else (tr.t, tr.x)
    if not args.quiet:
        print(f"{m.name}: {tr.stats['n_steps']} solver steps on [{span[0]:g}, {span[1]:g}] "
              f"({args.solver}, rtol {args.rtol:g}, atol {args.atol:g}) in {dt * 1e3:.1f} ms")
    if args.out:
        _write_states(args.out, t, x, m.state_names)
        if not args.quiet:
            print(f"wrote {args.out}: {len(t)} times x {m.n_states} states")
    return 0


# ----------------------------------------------------------------- parser
def _add_common(sp, t_end_default=None):
    sp.add_argument("model", help="built-in model name (see 'pbsens models') or a model file/folder")
    g = sp.add_mutually_exclusive_group(required=t_end_default is None)
    g.add_argument("--t-end", type=float, default=t_end_default, help="integrate over [0, T]")
    g.add_argument("--t-span", type=float, nargs=2, metavar=("A", "B"), help="integrate over [A, B]")
    sp.add_argument("--t-eval", metavar="FILE|a:b:n",
                    help="output times: a file (one per line, or .npy) or n points from a to b")
    sp.add_argument("--param", action="append", metavar="NAME=VALUE", help="set a parameter (repeatable)")
    sp.add_argument("--solver", default="LSODA", help="scipy solve_ivp method for the states (default LSODA)")
    sp.add_argument("--rtol", type=float, default=1e-5, help="state solver rtol (default 1e-5)")
    sp.add_argument("--atol", type=float, default=1e-6, help="state solver atol (default 1e-6)")
    sp.add_argument("--out", help="output file (.npz or .csv)")
    sp.add_argument("--force", action="store_true", help="overwrite an existing output file")
    sp.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")


def build_parser():
    from . import __version__
    parser = argparse.ArgumentParser(
        prog="pbsens",
        description="Post-hoc parameter sensitivities of ODE models (Peano-Baker series and "
                    "exponential methods).")
    parser.add_argument("--version", action="version", version=f"pbsens {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sp = sub.add_parser("models", help="list the built-in models with their sizes")
    sp.set_defaults(func=cmd_models)
    sp = sub.add_parser("simulate", help="solve the state equations and write t, x")
    _add_common(sp)
    sp.set_defaults(func=cmd_simulate)
    for extend in _EXTENSIONS:
        extend(sub)
    return parser


#: Functions ``f(subparsers)`` adding further subcommands (run, compare, reproduce, ...).
_EXTENSIONS = []


def main(argv=None):
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
