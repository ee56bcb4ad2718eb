"""``pbsens simulate``: solve the states and write ``t, x``."""
from __future__ import annotations

import time

from . import common
from .common import (SOLVERS, add_model_and_span, check_out, params_arg, positive_float, say,
                     t_eval_arg, t_span_arg, write_states)


def run(args):
    """``pbsens simulate``: solve the states and write ``t, x``."""
    from .. import solve_states
    check_out(args.out, args.force)
    m = common._model(args.model)
    span = t_span_arg(args)
    te = t_eval_arg(args.t_eval, span)
    t0 = time.perf_counter()
    tr = solve_states(m, span, t_eval=te, p=params_arg(m, args.param), method=args.solver,
                      rtol=args.rtol, atol=args.atol)
    dt = time.perf_counter() - t0
    t, x = (tr.t_eval, tr.x[tr.eval_index]) if te is not None else (tr.t, tr.x)
    say(args, f"{m.name}: {tr.stats['n_steps']} solver steps on [{span[0]:g}, {span[1]:g}] "
               f"({args.solver}, rtol {args.rtol:g}, atol {args.atol:g}) in {dt * 1e3:.1f} ms")
    if args.out:
        write_states(args.out, t, x, m.state_names)
        say(args, f"wrote {args.out}: {len(t)} times x {m.n_states} states")
    return 0


def add_parser(subparsers):
    """The ``simulate`` subcommand and its options."""
    sp = subparsers.add_parser("simulate", help="solve the state equations and write t, x",
                               description="Solve the state equations and optionally write t and the states "
                                           "(.npz or .csv with state names).")
    add_model_and_span(sp)
    sp.add_argument("--solver", default="LSODA", choices=SOLVERS,
                    help="state solver (scipy method name; default LSODA)")
    sp.add_argument("--rtol", type=positive_float, default=1e-5, help="state solver rtol (default 1e-5)")
    sp.add_argument("--atol", type=positive_float, default=1e-6, help="state solver atol (default 1e-6)")
    sp.add_argument("--out", help="output file (.npz or .csv)")
    sp.add_argument("--force", action="store_true", help="overwrite an existing output file")
    sp.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    return sp
