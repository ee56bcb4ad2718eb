"""``pbsens run``: sensitivities of one model (:func:`compute_run`), summary, data file, plot."""
from __future__ import annotations

import time

import numpy as np

from ..errors import PbsensError
from ..sensitivity.methods import FORWARD
from . import common
from .common import (DATA_EXT, PLOT_EXT, add_command, add_force, add_model_and_span, add_out, add_plot, add_quiet,
                     add_solver_options, api_default, branch_summary, check_distinct, check_path, fmt_time,
                     forward_function, params_arg, plural, pos_int, positive_float, say, t_eval_arg, t_span_arg,
                     write_result)

#: Methods of ``pbsens run``: the post-hoc ones of :func:`pbsens.sensitivities` and ``fs``.
RUN_METHODS = ("pbsr", "exp", "pbs", "exp2", "pbsr2", FORWARD)


def _warm_up(model, t_span, p, method, solver, rtol, atol, interpolation):
    """Compile (or load) the state solver's and the march kernels on the first thousandth of
    ``t_span`` (the same call as the timed one, so the same code paths), so that timings exclude
    compilation."""
    from .. import sensitivities
    t0, t1 = map(float, t_span)
    try:
        sensitivities(model, t_span=(t0, t0 + 1e-3 * (t1 - t0)), p=p, method=method, solver=solver, rtol=rtol,
                      atol=atol, interpolation=interpolation)
    except PbsensError:
        pass


def _defaults(method):
    """``{"solver", "rtol", "atol"}`` of the API function behind ``method``: :func:`pbsens.sensitivities`
    (post-hoc methods) or :func:`pbsens.forward_sensitivities` (``fs``, whose solver is ``method=``)."""
    if method == FORWARD:
        fs = forward_function()
        return {"solver": api_default(fs, "method"), "rtol": api_default(fs, "rtol"), "atol": api_default(fs, "atol")}
    from .. import sensitivities
    return {k: api_default(sensitivities, k) for k in ("solver", "rtol", "atol")}


def compute_run(model, method, t_span, t_eval=None, p=None, solver=None, rtol=None, atol=None,
                interpolation=None, estimate_error=False, sens_rtol=None):
    """The computation behind ``pbsens run`` (also callable from Python).

    Post-hoc methods: the one call
    ``pbsens.sensitivities(model, t_span=t_span, t_eval=t_eval, p=p, method=method,
    solver=solver, rtol=rtol, atol=atol, interpolation=interpolation, ...)``, which solves the
    states itself (so the same numbers as that call: the dense output, sub-steps and midpoint
    states it asks of the solver); the kernels are compiled first, on a short head of
    ``t_span``, so that ``timings`` exclude compilation (``timings["setup"]``). ``fs``:
    :func:`pbsens.forward_sensitivities`.

    Parameters
    ----------
    model : Model
    method : {"exp2", "pbsr", "exp", "pbs", "pbsr2", "fs"}
    t_span : (float, float)
    t_eval : array_like, optional
    p : array_like, optional
    solver : str, optional
        State solver (a name in :data:`pbsens.solvers.SOLVERS`), or the forward solver
        for ``fs``; default: :func:`pbsens.sensitivities`' (``"rodas5p"``), for ``fs``
        :func:`pbsens.forward_sensitivities`' (``"BDF"``).
    rtol, atol : float, optional
        Default: those functions' (1e-5 / 1e-6 for the states, 1e-8 / 1e-10 for ``fs``).
    interpolation : {"linear", "hermite", "dense"}, optional
        Post-hoc methods only (default :func:`pbsens.sensitivities`', ``"linear"``).
    estimate_error : bool
        Post-hoc methods: fill ``r.error_estimate`` (see :func:`pbsens.sensitivities`).
    sens_rtol : float, optional
        Post-hoc methods: refine the grid until the estimated error meets it.

    Returns
    -------
    SensitivityResult
    """
    from .. import sensitivities
    d = _defaults(method)
    solver = d["solver"] if solver is None else solver
    rtol = d["rtol"] if rtol is None else rtol
    atol = d["atol"] if atol is None else atol
    if method == FORWARD:
        if interpolation is not None:
            raise PbsensError("'--interpolation' applies to the post-hoc methods only, not to 'fs'")
        if sens_rtol is not None:
            raise PbsensError("'--sens-rtol' applies to the post-hoc methods only, not to 'fs' (its error is "
                              "controlled by --rtol/--atol)")
        fs = forward_function()
        return fs(model, t_span, t_eval=t_eval, p=p, method=solver, rtol=rtol, atol=atol)
    interpolation = interpolation or api_default(sensitivities, "interpolation")
    t0 = time.perf_counter()
    _warm_up(model, t_span, p, method, solver, rtol, atol, interpolation)
    setup = time.perf_counter() - t0
    r = sensitivities(model, t_span=t_span, t_eval=t_eval, p=p, method=method, solver=solver, rtol=rtol,
                      atol=atol, interpolation=interpolation, estimate_error=estimate_error, sens_rtol=sens_rtol)
    r.timings["setup"] = setup
    return r


def error_lines(r):
    """Printed lines on ``r.error_estimate`` (none when it was not computed)."""
    E = getattr(r, "error_estimate", None)
    if E is None:
        return []
    k = int(np.argmax(E)) if E.size else 0
    lines = [f"  estimated error E (relative, ||dS||_F / ||S||_F): median {np.median(E):.2g}, max "
             f"{E[k]:.2g} at t = {r.t[k]:.6g}"]
    Es = getattr(r, "state_error_estimate", None)
    if Es is not None:
        lines.append(f"    of which from the state solve (re-solved at rtol/10): max {np.max(Es):.2g}")
    o = r.options
    if o.get("sens_rtol") is not None:
        lines.append(f"    sens_rtol {o['sens_rtol']:g}: {plural(r.subdivisions, 'grid interval')} subdivided")
    return lines


def run(args):
    """``pbsens run``: sensitivities of one model, summary, optional data file and plot."""
    check_path(args.out, args.force, "--out", DATA_EXT)
    check_path(args.plot, args.force, "--plot", PLOT_EXT)
    check_distinct(args, "--out", "--plot")
    if args.method == FORWARD and args.interpolation is not None:
        raise PbsensError("'--interpolation' applies to the post-hoc methods only, not to '--method fs'")
    m = common._model(args.model)
    span = t_span_arg(args)
    te = t_eval_arg(args.t_eval, span)
    p = params_arg(m, args.param)
    r = compute_run(m, args.method, span, t_eval=te, p=p, solver=args.solver, rtol=args.rtol, atol=args.atol,
                    interpolation=args.interpolation, estimate_error=args.estimate_error, sens_rtol=args.sens_rtol)
    K, nx, np_ = r.S.shape
    say(args, f"{m.name}: {args.method} sensitivities of {plural(nx, 'state')} x {plural(np_, 'parameter')} on "
               f"[{span[0]:g}, {span[1]:g}], output at {plural(K, 'time')}")
    o = r.options
    if args.method == FORWARD:
        stats = o.get("stats", {})
        say(args, f"  forward solve ({o.get('solver')}, rtol {o.get('rtol'):g}, atol {o.get('atol'):g}): "
                   f"{plural(stats.get('nfev', '?'), 'rhs evaluation')} in {fmt_time(r.timings.get('sensitivities'))} "
                   f"(setup and compilation {fmt_time(r.timings.get('setup'))})")
    else:
        G = len(r.grid)
        say(args, f"  states ({o.get('solver')}, rtol {o.get('rtol'):g}, atol {o.get('atol'):g}): grid of "
                   f"{plural(G, 'point')} ({plural(G - 1, 'interval')}) in {fmt_time(r.timings.get('states'))}")
        say(args, f"  branches: {branch_summary(r)}")
        say(args, f"  sensitivities: {fmt_time(r.timings.get('sensitivities'))} "
                   f"(interpolation {o.get('interpolation')}; compilation/loading before that "
                   f"{fmt_time(r.timings.get('setup'))})")
        for line in error_lines(r):
            say(args, line)
    if args.estimate_error and args.method == FORWARD:
        say(args, "  estimated error: not available for fs (its error is controlled by --rtol/--atol)")
    if args.out:
        write_result(args.out, r, t_span=span)
        say(args, f"wrote {args.out}: t ({K},), x ({K}, {nx}), S ({K}, {nx}, {np_}) with state and "
                   "parameter names")
    if args.plot:
        from ..report.plot import plot_sensitivities
        plot_sensitivities(r, top=args.top, normalized=args.normalized, path=args.plot)
        say(args, f"wrote {args.plot}")
    return 0


def add_parser(subparsers):
    """The ``run`` subcommand and its options."""
    sp = add_command(
        subparsers, "run", help="compute sensitivities of one model and write them",
        description="Compute the sensitivities S[k, i, j] = dx_i(t_k)/dp_j of a model: solve the states, "
                    "then march the sensitivity equation post hoc (pbsr, exp, pbs, exp2, pbsr2), or solve "
                    "states and sensitivities together (fs). Prints the grid size, the PBSR branches taken "
                    "and the timings; writes the result with state and parameter names.",
        epilog="examples:\n  pbsens run Chua --t-end 10 --out S.csv\n"
               "  pbsens run PKA --t-end 600 --t-eval 0:600:61 --method exp --out S.npz --plot S.png\n"
               "  pbsens run model.json --t-span 0 5 --param k1=0.3 --method fs\n"
               "  pbsens run Chua --t-end 10 --method exp2 --estimate-error --sens-rtol 1e-4")
    from .. import sensitivities
    add_model_and_span(sp)
    sp.add_argument("--method", default=api_default(sensitivities, "method"), choices=RUN_METHODS,
                    help="exp2 (exponential-midpoint step, default), pbsr (Algorithm 2), exp (Algorithm 3), "
                         "pbs (no switch), pbsr2 (PBSR with exp2 as fallback), fs (forward sensitivities)")
    post, fs = _defaults("pbsr"), _defaults(FORWARD)
    add_solver_options(sp, what="solver (of the states; for fs of states and sensitivities together)",
                       default_text={"solver": f"{post['solver']}, for fs {fs['solver']}",
                                     **{k: f"{post[k]:g} for the states, {fs[k]:g} for fs" for k in ("rtol", "atol")}})
    sp.add_argument("--interpolation", choices=("linear", "hermite", "dense"), default=None,
                    help="states at PBSR refinement points (post-hoc methods; default "
                         f"{api_default(sensitivities, 'interpolation')}, as the paper)")
    sp.add_argument("--estimate-error", action="store_true",
                    help="estimate the error of S (post-hoc methods; costs about 3-20x the march) and print it")
    sp.add_argument("--sens-rtol", type=positive_float, default=None, metavar="TOL",
                    help="refine the post-hoc grid until the estimated relative error of S meets TOL "
                         "(prints the estimate)")
    add_out(sp, "write the result: .npz (arrays t, x, S, state_names, param_names, p, branch, ...) "
                "or .csv (columns t, states, dX/dP)")
    add_plot(sp, "plot the most influential sensitivities")
    sp.add_argument("--top", type=pos_int, default=5, help="parameters per state in the plot (default 5)")
    sp.add_argument("--normalized", action="store_true",
                    help="plot normalised sensitivities (p_j/x_i) dx_i/dp_j")
    add_force(sp, "existing --out/--plot files")
    add_quiet(sp)
    return sp
