"""``pbsens simulate``: solve the states and write ``t, x``."""
from __future__ import annotations

import time

from . import common
from .common import (DATA_EXT, add_force, add_model_and_span, add_out, add_quiet, add_solver_options, api_default,
                     check_out, params_arg, plural, say, t_eval_arg, t_span_arg, write_states)


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
    say(args, f"{m.name}: {plural(tr.stats['n_steps'], 'solver step')} on [{span[0]:g}, {span[1]:g}] "
               f"({args.solver}, rtol {args.rtol:g}, atol {args.atol:g}) in {dt * 1e3:.1f} ms")
    if args.out:
        write_states(args.out, t, x, m.state_names)
        say(args, f"wrote {args.out}: {plural(len(t), 'time')} x {plural(m.n_states, 'state')}")
    return 0


def add_parser(subparsers):
    """The ``simulate`` subcommand and its options."""
    from .. import solve_states
    sp = subparsers.add_parser("simulate", help="solve the state equations and write t, x",
                               description="Solve the state equations and optionally write t and the states "
                                           "(.npz or .csv with state names).")
    add_model_and_span(sp)
    add_solver_options(sp, solver=api_default(solve_states, "method"), rtol=api_default(solve_states, "rtol"),
                       atol=api_default(solve_states, "atol"))
    add_out(sp, f"output file ({' or '.join(DATA_EXT)})")
    add_force(sp, "an existing --out file")
    add_quiet(sp)
    return sp
