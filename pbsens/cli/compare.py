"""``pbsens compare``: the post-hoc methods (PBSR, Exp, Exp2, PBSR2) vs FS on one model, accuracy and
time (:func:`compare_methods`)."""
from __future__ import annotations

import json
import time

import numpy as np

from .. import sensitivities as _sensitivities
from ..sensitivity.forward import forward_sensitivities as _forward
from . import common
from .common import (PLOT_EXT, TABLE_EXT, add_command, add_force, add_model_and_span, add_out, add_plot, add_quiet,
                     add_solver_options, api_default, branch_summary, check_distinct, check_path, fmt_time,
                     forward_function, metric_functions, nonneg_int, params_arg, plural, pos_int, positive_float,
                     say, show_progress, t_eval_arg, t_span_arg)

#: The post-hoc methods compared (each against FS), in the table's order.
COMPARE_METHODS = ("pbsr", "exp", "exp2", "pbsr2")
#: Defaults of the API functions compared (never repeated as literals here).
_STATE = {k: api_default(_sensitivities, k) for k in ("solver", "rtol", "atol")}
_FS = {k: api_default(_forward, k) for k in ("method", "rtol", "atol")}


def _median(a):
    a = np.asarray(a, dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(np.median(a)) if a.size else float("nan")


def _max(a):
    a = np.asarray(a, dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(np.max(a)) if a.size else float("nan")


def compare_methods(model, t_span, t_eval=None, p=None, solver=_STATE["solver"], rtol=_STATE["rtol"],
                    atol=_STATE["atol"], fs_rtol=_FS["rtol"], fs_atol=_FS["atol"], ref_rtol=1e-10, ref_atol=1e-12,
                    samples=20, seed=0, repeats=3, progress=False, ref_method="Radau", ref_check="rodas5p",
                    methods=COMPARE_METHODS):
    """The post-hoc methods vs FS on one model: accuracy and time (the computation behind ``pbsens compare``).

    The post-hoc methods (``methods``: PBSR, Exp, Exp2, PBSR2) run on the same state
    trajectory (``solver``, ``rtol``, ``atol``; defaults :func:`pbsens.sensitivities`');
    FS (:func:`pbsens.forward_sensitivities`' default method) at ``fs_rtol``/``fs_atol``.
    Every method is evaluated at the same output times (``t_eval``, else the state solver's
    grid, without the points a method's sub-steps add, e.g. Rodas5P's) against FS at
    ``ref_rtol``/``ref_atol``. The timed runs solve the states with the dense output the
    sub-steps need, as :func:`pbsens.sensitivities` does when it solves them itself.

    Parameters
    ----------
    model : Model
    t_span : (float, float)
    t_eval : array_like, optional
    p : array_like, optional
    solver, rtol, atol :
        State solver of the post-hoc methods.
    fs_rtol, fs_atol : float
        Tolerances of the compared FS.
    ref_rtol, ref_atol : float
        Tolerances of the FS reference for ``E_k``.
    ref_method : {"Radau", "rodas5p", "BDF"}
        Integrator of the FS reference (default Radau). Not BDF by default: on a stiff
        model near finite-time blow-up scipy's BDF missed its tolerance by orders of
        magnitude (relative error of S 1.4e-2 at rtol 1e-8, Radau 8e-9 at 1e-10).
    ref_check : {"rodas5p", "Radau", "BDF"} or None
        A second reference by another integrator at the same tolerances; the relative
        difference of the two (``reference["check"]``: median and max over the output
        times) is how far ``E_k`` can be trusted. An ``AccuracyWarning`` when it exceeds
        1e-6. None: no check.
    samples : int
        Perturbations for ``kappa_bar`` (0: skip it).
    seed : int
    repeats : int
        Timed runs per method (after one untimed warm-up); the median is reported.
    progress : bool
        Show progress bars.
    methods : sequence of str
        Post-hoc methods of :func:`pbsens.sensitivities` to compare (default
        :data:`COMPARE_METHODS`); FS is always compared.

    Returns
    -------
    dict
        ``rows`` (a list of dicts, one per method and then ``fs``: ``method``, ``E_median``,
        ``E_max``, ``kappa_bar_median``, ``time_states``, ``time_sensitivities``,
        ``time_total`` in seconds), ``results`` (method -> SensitivityResult),
        ``E`` and ``kappa_bar`` (method -> (K,) array), ``reference`` and the settings.
    """
    from tqdm.auto import tqdm

    from .. import sensitivities
    from .. import solve_states
    relative_error, kappa_bar = metric_functions()
    fs = forward_function()
    methods = _check_methods(methods)
    from ..sensitivity.posthoc import DEFAULT_SUBSTEPS

    def posthoc(tr, m_):
        # output at t_eval (the trajectory's), else at the solver's grid: the same times for every method
        return sensitivities(model, tr, method=m_, t_eval=tr.t if t_eval is None else None)

    tr = solve_states(model, t_span, t_eval=t_eval, p=p, method=solver, rtol=rtol, atol=atol)
    results = {m_: posthoc(tr, m_) for m_ in methods}
    t_out = results[methods[0]].t
    results["fs"] = fs(model, t_span, t_eval=t_out, p=tr.p, rtol=fs_rtol, atol=fs_atol)
    ref_method, ref_check = _reference_methods(ref_method, ref_check)
    ref = fs(model, t_span, t_eval=t_out, p=tr.p, rtol=ref_rtol, atol=ref_atol, method=ref_method)
    check = None
    if ref_check is not None:
        ref2 = fs(model, t_span, t_eval=t_out, p=tr.p, rtol=ref_rtol, atol=ref_atol, method=ref_check)
        d = np.asarray(relative_error(ref2, ref, state_tol=1.0))
        check = {"solver": ref_check, "E_median": _median(d), "E_max": _max(d)}
        if not check["E_max"] <= REFERENCE_CHECK_WARN:
            import warnings
            from ..errors import AccuracyWarning
            warnings.warn(f"the FS references by {ref_method} and {ref_check} (rtol {ref_rtol:g}, atol "
                          f"{ref_atol:g}) differ by up to {check['E_max']:.2g} in relative S: E_k below that is "
                          "not resolved (tighten --ref-rtol/--ref-atol or change --ref-method)",
                          AccuracyWarning, stacklevel=2)

    times = {m_: {"states": [], "sensitivities": []} for m_ in results}
    bar = tqdm(total=(len(methods) + 1) * repeats, desc="timing", disable=not progress, leave=False)
    for _ in range(repeats):
        for m_ in methods:
            a = time.perf_counter()
            tr_i = solve_states(model, t_span, t_eval=t_eval, p=tr.p, method=solver, rtol=rtol, atol=atol,
                                dense_output=DEFAULT_SUBSTEPS.get(solver, 1) > 1)   # for the sub-steps
            b = time.perf_counter()
            posthoc(tr_i, m_)
            c = time.perf_counter()
            times[m_]["states"].append(b - a)
            times[m_]["sensitivities"].append(c - b)
            bar.update()
        a = time.perf_counter()
        fs(model, t_span, t_eval=t_out, p=tr.p, rtol=fs_rtol, atol=fs_atol)
        times["fs"]["sensitivities"].append(time.perf_counter() - a)
        bar.update()
    bar.close()

    E = {m_: np.asarray(relative_error(r, ref)) for m_, r in results.items()}
    kb = {}
    if samples > 0:
        for m_, r in results.items():
            kb[m_] = np.asarray(kappa_bar(model, r, n_samples=samples, seed=seed, progress=progress))
    rows = []
    for m_, r in results.items():
        ts = float(np.median(times[m_]["states"])) if times[m_]["states"] else None
        tsens = float(np.median(times[m_]["sensitivities"]))
        rows.append({"method": m_, "E_median": _median(E[m_]), "E_max": _max(E[m_]),
                     "kappa_bar_median": _median(kb[m_]) if m_ in kb else None,
                     "time_states": ts, "time_sensitivities": tsens,
                     "time_total": tsens + (ts or 0.0)})
    return {"model": model.name, "t_span": list(map(float, t_span)), "n_times": int(len(t_out)),
            "grid_points": int(len(results[methods[0]].grid)),
            "solver": {"method": solver, "rtol": rtol, "atol": atol},
            "fs": {"method": _FS["method"], "rtol": fs_rtol, "atol": fs_atol},
            "reference": {"method": "fs", "solver": ref_method, "rtol": ref_rtol, "atol": ref_atol,
                          "check": check},
            "samples": int(samples), "seed": int(seed), "repeats": int(repeats),
            "branches": results[_branch_method(methods)].branch_counts(),
            "rows": rows, "results": results, "E": E, "kappa_bar": kb, "ref": ref}


#: Above this relative difference of the two references, ``compare_methods`` warns.
REFERENCE_CHECK_WARN = 1e-6
_REF_METHODS = ("Radau", "rodas5p", "BDF")


def _check_methods(methods):
    """``methods`` as a tuple of distinct post-hoc method names (PbsensError naming it otherwise)."""
    from ..errors import PbsensError
    from ..sensitivity.posthoc import METHODS
    if isinstance(methods, str):
        methods = (methods,)
    methods = tuple(dict.fromkeys(methods))
    bad = [m_ for m_ in methods if m_ not in METHODS]
    if not methods or bad:
        raise PbsensError(f"'methods' must name post-hoc methods of {', '.join(METHODS)}; got {list(methods)!r}")
    return methods


def _branch_method(methods):
    """The method whose branches are reported (and shaded in the figure): PBSR when compared."""
    return next((m_ for m_ in ("pbsr", "pbsr2") if m_ in methods), methods[0])


def _reference_methods(ref_method, ref_check):
    """The reference's integrator and its check's (None: no check), validated."""
    from ..errors import PbsensError
    if ref_method not in _REF_METHODS:
        raise PbsensError(f"'ref_method' must be one of {', '.join(_REF_METHODS)}; got {ref_method!r}")
    if ref_check in (None, "none"):
        return ref_method, None
    if ref_check not in _REF_METHODS or ref_check == ref_method:
        raise PbsensError(f"'ref_check' must be None or one of {', '.join(_REF_METHODS)} other than "
                          f"ref_method ({ref_method!r}); got {ref_check!r}")
    return ref_method, ref_check


_LABELS = {"pbsr": "PBSR", "exp": "Exp", "pbs": "PBS", "exp2": "Exp2", "pbsr2": "PBSR2", "fs": "FS"}
_TABLE_FIELDS = ("method", "E_median", "E_max", "kappa_bar_median", "time_states", "time_sensitivities",
                 "time_total")


def _csv_cell(v):
    if isinstance(v, str):
        return v
    return "" if v is None or not np.isfinite(v) else repr(float(v))


def _fmt(v, spec):
    return "-" if v is None or (isinstance(v, float) and not np.isfinite(v)) else format(v, spec)


def run(args):
    """``pbsens compare``: the post-hoc methods vs FS, accuracy and time, as a table (and figure)."""
    check_path(args.out, args.force, "--out", TABLE_EXT)
    check_path(args.plot, args.force, "--plot", PLOT_EXT)
    check_distinct(args, "--out", "--plot")
    metric_functions()  # fail before computing when the accuracy measures are missing
    m = common._model(args.model)
    span = t_span_arg(args)
    te = t_eval_arg(args.t_eval, span)
    p = params_arg(m, args.param)
    c = compare_methods(m, span, t_eval=te, p=p, solver=args.solver, rtol=args.rtol, atol=args.atol,
                        fs_rtol=args.fs_rtol, fs_atol=args.fs_atol, ref_rtol=args.ref_rtol,
                        ref_atol=args.ref_atol, samples=args.samples, seed=args.seed, repeats=args.repeats,
                        progress=show_progress(args), ref_method=args.ref_method, ref_check=args.ref_check)
    ref = c["reference"]
    say(args, f"{m.name} on [{span[0]:g}, {span[1]:g}]: {plural(c['n_times'], 'output time')} "
               f"(state grid {plural(c['grid_points'], 'point')}, {args.solver} rtol {args.rtol:g} "
               f"atol {args.atol:g})")
    say(args, f"E_k against FS ({ref['solver']}, rtol {ref['rtol']:g}, atol {ref['atol']:g}"
               + (f"; {ref['check']['solver']} differs by {ref['check']['E_max']:.1e} at most" if ref["check"] else "")
               + "); "
               + (f"kappa_bar over {plural(args.samples, 'sample')} (seed {args.seed}); " if args.samples else "")
               + f"times: median of {plural(args.repeats, 'run')}")
    say(args, f"{'method':<7} {'E_k median':>11} {'E_k max':>10} {'kappa_bar med':>14} "
               f"{'states':>10} {'sens.':>10} {'total':>10}")
    for row in c["rows"]:
        say(args, f"{_LABELS[row['method']]:<7} {_fmt(row['E_median'], '.3e'):>11} "
                   f"{_fmt(row['E_max'], '.3e'):>10} {_fmt(row['kappa_bar_median'], '.3e'):>14} "
                   f"{fmt_time(row['time_states']):>10} {fmt_time(row['time_sensitivities']):>10} "
                   f"{fmt_time(row['time_total']):>10}")
    bm = _branch_method(tuple(k for k in c["results"] if k != "fs"))
    say(args, f"{_LABELS[bm]} branches: {branch_summary(c['results'][bm])}")
    if args.out:
        if args.out.lower().endswith(".json"):
            doc = _jsonable({k: v for k, v in c.items() if k not in ("results", "E", "kappa_bar", "ref")})
            with open(args.out, "w") as fh:
                json.dump(doc, fh, indent=2, allow_nan=False)
                fh.write("\n")
        else:
            with open(args.out, "w") as fh:
                fh.write(",".join(_TABLE_FIELDS) + "\n")
                for row in c["rows"]:
                    fh.write(",".join(_csv_cell(row[k]) for k in _TABLE_FIELDS) + "\n")
        say(args, f"wrote {args.out}")
    if args.plot:
        _compare_figure(c, args.plot)
        say(args, f"wrote {args.plot}")
    return 0


def _jsonable(v):
    """Plain JSON values: non-finite floats become null (JSON has no NaN)."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (float, np.floating)):
        return float(v) if np.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


def _compare_figure(c, path):
    from matplotlib.figure import Figure

    from ..report.plot import plot_kappa_bar, plot_relative_error
    r = c["results"][_branch_method(tuple(k for k in c["results"] if k != "fs"))]
    panels = 2 if c["kappa_bar"] else 1
    fig = Figure(figsize=(7.0, 3.5 * panels), dpi=100, layout="constrained")
    axes = fig.subplots(panels, 1, squeeze=False, sharex=True)[:, 0]
    plot_relative_error(r, {_LABELS[k]: v for k, v in c["E"].items()}, ax=axes[0],
                        title=f"{c['model']}: E_k against FS (rtol {c['reference']['rtol']:g})")
    if c["kappa_bar"]:
        axes[0].set_xlabel("")
        plot_kappa_bar(r, {_LABELS[k]: v for k, v in c["kappa_bar"].items()}, ax=axes[1],
                       title=f"{c['model']}: kappa_bar ({plural(c['samples'], 'sample')}); shaded: "
                             f"{_LABELS[r.method]} exp steps")
    fig.savefig(path, dpi=fig.dpi)
    return fig


def add_parser(subparsers):
    """The ``compare`` subcommand and its options."""
    sp = add_command(
        subparsers, "compare", help="PBSR, Exp, Exp2, PBSR2 vs FS on one model: accuracy and time",
        description="Compare the post-hoc methods PBSR, Exp, Exp2 and PBSR2 with forward sensitivities (FS) on "
                    "one model. Accuracy: the relative error E_k against FS at tight tolerances (median and "
                    "max over the output times) and the perturbation error kappa_bar (median over time, "
                    "--samples perturbations). Time: median over --repeats runs after a warm-up; the post-hoc "
                    "methods include the state solve.",
        epilog="example:\n  pbsens compare Chua --t-end 10 --samples 20 --out table.csv --plot compare.png")
    add_model_and_span(sp)
    add_solver_options(sp, solver=api_default(compare_methods, "solver"), rtol=api_default(compare_methods, "rtol"),
                       atol=api_default(compare_methods, "atol"), what="state solver of the post-hoc methods")
    sp.add_argument("--fs-rtol", type=positive_float, default=api_default(compare_methods, "fs_rtol"),
                    help=f"rtol of the compared FS (default {api_default(compare_methods, 'fs_rtol'):g})")
    sp.add_argument("--fs-atol", type=positive_float, default=api_default(compare_methods, "fs_atol"),
                    help=f"atol of the compared FS (default {api_default(compare_methods, 'fs_atol'):g})")
    sp.add_argument("--ref-rtol", type=positive_float, default=api_default(compare_methods, "ref_rtol"),
                    help=f"rtol of the FS reference for E_k (default {api_default(compare_methods, 'ref_rtol'):g})")
    sp.add_argument("--ref-atol", type=positive_float, default=api_default(compare_methods, "ref_atol"),
                    help=f"atol of the FS reference for E_k (default {api_default(compare_methods, 'ref_atol'):g})")
    sp.add_argument("--ref-method", default=api_default(compare_methods, "ref_method"), choices=_REF_METHODS,
                    help=f"integrator of the FS reference (default {api_default(compare_methods, 'ref_method')})")
    sp.add_argument("--ref-check", default=api_default(compare_methods, "ref_check"),
                    choices=_REF_METHODS + ("none",),
                    help="a second reference by this integrator, reported beside E (default "
                         f"{api_default(compare_methods, 'ref_check')}; none: skip)")
    sp.add_argument("--samples", type=nonneg_int, default=api_default(compare_methods, "samples"),
                    help=f"perturbations for kappa_bar (default {api_default(compare_methods, 'samples')}; the paper "
                         "uses 100; 0 skips it)")
    sp.add_argument("--seed", type=int, default=api_default(compare_methods, "seed"),
                    help=f"seed of the kappa_bar perturbations (default {api_default(compare_methods, 'seed')})")
    sp.add_argument("--repeats", type=pos_int, default=api_default(compare_methods, "repeats"),
                    help=f"timed runs per method (default {api_default(compare_methods, 'repeats')})")
    add_out(sp, "write the table (.csv or .json)")
    add_plot(sp, "figure of E_k and kappa_bar over time")
    add_force(sp, "existing --out/--plot files")
    add_quiet(sp)
    return sp
