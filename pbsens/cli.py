"""The ``pbsens`` command line. It parses arguments and calls the public API, nothing else.

Subcommands: ``models``, ``simulate``, ``run``, ``compare``, ``reproduce``
(``pbsens COMMAND --help`` for each). Exit status: 0 on success, 1 when the
computation or an input file is rejected (the message names the argument),
2 for malformed command lines (argparse).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from .errors import PbsensError

__all__ = ["main", "build_parser"]

#: Methods of ``pbsens run``: the post-hoc ones of :func:`pbsens.sensitivities` and ``fs``.
RUN_METHODS = ("pbsr", "exp", "pbs", "exp2", "pbsr2", "fs")
#: scipy ``solve_ivp`` methods accepted for the state solve / forward sensitivities.
SOLVERS = ("LSODA", "BDF", "Radau", "RK45", "RK23", "DOP853")
_DATA_EXT = (".npz", ".csv")
_PLOT_EXT = (".png", ".pdf", ".svg")
_TABLE_EXT = (".csv", ".json")


# ----------------------------------------------------------------- helpers
def _positive_float(text):
    """argparse type: a positive finite number (argparse names the option on failure)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (np.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return v


def _nonneg_int(text):
    """argparse type: an integer >= 0."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return v


def _pos_int(text):
    """argparse type: an integer >= 1."""
    v = _nonneg_int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return v


def _show_progress(args):
    """Progress bars only on a terminal and without ``--quiet``."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


def _say(args, *a, **kw):
    if not getattr(args, "quiet", False):
        print(*a, **kw)


def _model(name):
    from . import load_model
    return load_model(name)


def _t_span(args):
    if args.t_span is not None:
        a, b = args.t_span
        if not (np.isfinite(a) and np.isfinite(b) and b > a):
            raise PbsensError(f"'--t-span' needs finite A < B, got {a:g} {b:g}")
        return (float(a), float(b))
    if not (np.isfinite(args.t_end) and args.t_end > 0):
        raise PbsensError(f"'--t-end' must be a positive number, got {args.t_end:g}")
    return (0.0, float(args.t_end))


def _t_eval(spec, t_span):
    """``FILE`` (one time per line / .npy) or ``a:b:n`` (n points from a to b), checked against ``t_span``."""
    from .solve import check_t_eval
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


def _params(model, items):
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


def _check_path(path, force, option, extensions):
    """Refuse an output path before any computation: wrong extension, missing folder, existing file."""
    if path is None:
        return
    if not path.lower().endswith(extensions):
        raise PbsensError(f"'{option}' must end in {' or '.join(extensions)}, got {path!r}")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise PbsensError(f"'{option}': folder {parent!r} does not exist")
    if os.path.exists(path) and not force:
        raise PbsensError(f"'{option}': {path!r} exists; use --force to overwrite it")


def _check_out(path, force):
    _check_path(path, force, "--out", _DATA_EXT)


def _check_distinct(args, *options):
    paths = [(o, getattr(args, o.lstrip("-").replace("-", "_"))) for o in options]
    paths = [(o, os.path.abspath(p)) for o, p in paths if p]
    if len({p for _, p in paths}) < len(paths):
        raise PbsensError(f"{' and '.join(repr(o) for o, _ in paths)} name the same file")


def _fmt_time(sec):
    if sec is None:
        return "-"
    return f"{sec * 1e3:.1f} ms" if sec < 1 else f"{sec:.2f} s"


def _write_states(path, t, x, state_names):
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
    """Write a :class:`~pbsens.result.SensitivityResult` to ``.npz`` or ``.csv``, with names.

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


def _branch_summary(r):
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


def _warm_up(model, tr, method, interpolation):
    """Compile (or load) the march kernels on the first grid interval, so timings exclude compilation."""
    import dataclasses

    from . import sensitivities
    try:
        head = dataclasses.replace(tr, t=tr.t[:2], x=tr.x[:2], t_eval=None, eval_index=None)
        sensitivities(model, head, method=method, interpolation=interpolation)
    except PbsensError:
        pass


def _forward():
    try:
        from .forward import forward_sensitivities
    except ImportError as exc:  # pragma: no cover - module written by another part of the project
        raise PbsensError(f"forward sensitivities are not available (cannot import pbsens.forward: {exc})") \
            from None
    return forward_sensitivities


def _metrics():
    try:
        from .metrics import kappa_bar, relative_error
    except ImportError as exc:
        raise PbsensError(f"accuracy measures are not available (cannot import pbsens.metrics: {exc})") from None
    return relative_error, kappa_bar


# ----------------------------------------------------------------- commands
def cmd_models(args):
    """``pbsens models``: the built-in models with their sizes."""
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
    """``pbsens simulate``: solve the states and write ``t, x``."""
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
    _say(args, f"{m.name}: {tr.stats['n_steps']} solver steps on [{span[0]:g}, {span[1]:g}] "
               f"({args.solver}, rtol {args.rtol:g}, atol {args.atol:g}) in {dt * 1e3:.1f} ms")
    if args.out:
        _write_states(args.out, t, x, m.state_names)
        _say(args, f"wrote {args.out}: {len(t)} times x {m.n_states} states")
    return 0


def compute_run(model, method, t_span, t_eval=None, p=None, solver=None, rtol=None, atol=None,
                interpolation=None):
    """The computation behind ``pbsens run`` (also callable from Python).

    Post-hoc methods: :func:`pbsens.solve_states` then :func:`pbsens.sensitivities`
    on that trajectory, i.e. the same numbers as
    ``pbsens.sensitivities(model, t_span=t_span, t_eval=t_eval, p=p, method=method,
    solver=solver, rtol=rtol, atol=atol)``; the kernels are compiled first so that
    ``timings`` exclude compilation (``timings["setup"]``). ``fs``:
    :func:`pbsens.forward_sensitivities`.

    Parameters
    ----------
    model : Model
    method : {"pbsr", "exp", "pbs", "exp2", "pbsr2", "fs"}
    t_span : (float, float)
    t_eval : array_like, optional
    p : array_like, optional
    solver : str, optional
        State solver (default ``"LSODA"``), or the forward solver for ``fs``
        (default ``"BDF"``).
    rtol, atol : float, optional
        Default 1e-5 / 1e-6 (state solve), 1e-8 / 1e-10 for ``fs``.
    interpolation : {"linear", "hermite", "dense"}, optional
        Post-hoc methods only (default ``"linear"``).

    Returns
    -------
    SensitivityResult
    """
    from . import sensitivities, solve_states
    if method == "fs":
        if interpolation is not None:
            raise PbsensError("'--interpolation' applies to the post-hoc methods only, not to 'fs'")
        fs = _forward()
        return fs(model, t_span, t_eval=t_eval, p=p, method=solver or "BDF",
                  rtol=1e-8 if rtol is None else rtol, atol=1e-10 if atol is None else atol)
    interpolation = interpolation or "linear"
    rtol = 1e-5 if rtol is None else rtol
    atol = 1e-6 if atol is None else atol
    solver = solver or "LSODA"
    t0 = time.perf_counter()
    tr = solve_states(model, t_span, t_eval=t_eval, p=p, method=solver, rtol=rtol, atol=atol,
                      dense_output=interpolation == "dense")
    t1 = time.perf_counter()
    _warm_up(model, tr, method, interpolation)
    t2 = time.perf_counter()
    r = sensitivities(model, tr, method=method, interpolation=interpolation)
    r.timings["states"] = t1 - t0
    r.timings["setup"] = t2 - t1
    r.timings.setdefault("n_steps", tr.stats.get("n_steps"))
    return r


def cmd_run(args):
    """``pbsens run``: sensitivities of one model, summary, optional data file and plot."""
    _check_path(args.out, args.force, "--out", _DATA_EXT)
    _check_path(args.plot, args.force, "--plot", _PLOT_EXT)
    _check_distinct(args, "--out", "--plot")
    if args.method == "fs" and args.interpolation is not None:
        raise PbsensError("'--interpolation' applies to the post-hoc methods only, not to '--method fs'")
    m = _model(args.model)
    span = _t_span(args)
    te = _t_eval(args.t_eval, span)
    p = _params(m, args.param)
    r = compute_run(m, args.method, span, t_eval=te, p=p, solver=args.solver, rtol=args.rtol, atol=args.atol,
                    interpolation=args.interpolation)
    K, nx, np_ = r.S.shape
    _say(args, f"{m.name}: {args.method} sensitivities of {nx} states x {np_} parameters on "
               f"[{span[0]:g}, {span[1]:g}], output at {K} times")
    o = r.options
    if args.method == "fs":
        stats = o.get("stats", {})
        _say(args, f"  forward solve ({o.get('solver')}, rtol {o.get('rtol'):g}, atol {o.get('atol'):g}): "
                   f"{stats.get('nfev', '?')} rhs evaluations in {_fmt_time(r.timings.get('sensitivities'))} "
                   f"(setup and compilation {_fmt_time(r.timings.get('setup'))})")
    else:
        G = len(r.grid)
        _say(args, f"  states ({o.get('solver')}, rtol {o.get('rtol'):g}, atol {o.get('atol'):g}): grid of "
                   f"{G} points ({G - 1} intervals) in {_fmt_time(r.timings.get('states'))}")
        _say(args, f"  branches: {_branch_summary(r)}")
        _say(args, f"  sensitivities: {_fmt_time(r.timings.get('sensitivities'))} "
                   f"(interpolation {o.get('interpolation')}; compilation/loading before that "
                   f"{_fmt_time(r.timings.get('setup'))})")
    if args.out:
        write_result(args.out, r, t_span=span)
        _say(args, f"wrote {args.out}: t ({K},), x ({K}, {nx}), S ({K}, {nx}, {np_}) with state and "
                   "parameter names")
    if args.plot:
        from .plot import plot_sensitivities
        plot_sensitivities(r, top=args.top, normalized=args.normalized, path=args.plot)
        _say(args, f"wrote {args.plot}")
    return 0


def _median(a):
    a = np.asarray(a, dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(np.median(a)) if a.size else float("nan")


def _max(a):
    a = np.asarray(a, dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(np.max(a)) if a.size else float("nan")


def compare_methods(model, t_span, t_eval=None, p=None, solver="LSODA", rtol=1e-5, atol=1e-6,
                    fs_rtol=1e-8, fs_atol=1e-10, ref_rtol=1e-10, ref_atol=1e-12, samples=20, seed=0,
                    repeats=3, progress=False):
    """PBSR vs Exp vs FS on one model: accuracy and time (the computation behind ``pbsens compare``).

    PBSR and Exp run on the same state trajectory (``solver``, ``rtol``, ``atol``);
    FS at ``fs_rtol``/``fs_atol``. Every method is evaluated at PBSR's output
    times (``t_eval``, else the state grid) against FS at ``ref_rtol``/``ref_atol``.

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
    samples : int
        Perturbations for ``kappa_bar`` (0: skip it).
    seed : int
    repeats : int
        Timed runs per method (after one untimed warm-up); the median is reported.
    progress : bool
        Show progress bars.

    Returns
    -------
    dict
        ``rows`` (a list of dicts, one per method: ``method``, ``E_median``,
        ``E_max``, ``kappa_bar_median``, ``time_states``, ``time_sensitivities``,
        ``time_total`` in seconds), ``results`` (method -> SensitivityResult),
        ``E`` and ``kappa_bar`` (method -> (K,) array), ``reference`` and the settings.
    """
    from tqdm.auto import tqdm

    from . import sensitivities, solve_states
    relative_error, kappa_bar = _metrics()
    fs = _forward()
    tr = solve_states(model, t_span, t_eval=t_eval, p=p, method=solver, rtol=rtol, atol=atol)
    results = {m_: sensitivities(model, tr, method=m_) for m_ in ("pbsr", "exp")}
    t_out = results["pbsr"].t
    results["fs"] = fs(model, t_span, t_eval=t_out, p=tr.p, rtol=fs_rtol, atol=fs_atol)
    ref = fs(model, t_span, t_eval=t_out, p=tr.p, rtol=ref_rtol, atol=ref_atol)

    times = {m_: {"states": [], "sensitivities": []} for m_ in results}
    bar = tqdm(total=3 * repeats, desc="timing", disable=not progress, leave=False)
    for _ in range(repeats):
        for m_ in ("pbsr", "exp"):
            a = time.perf_counter()
            tr_i = solve_states(model, t_span, t_eval=t_eval, p=tr.p, method=solver, rtol=rtol, atol=atol,
                                dense_output=False)
            b = time.perf_counter()
            sensitivities(model, tr_i, method=m_)
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
            "grid_points": int(len(results["pbsr"].grid)),
            "solver": {"method": solver, "rtol": rtol, "atol": atol},
            "fs": {"method": "BDF", "rtol": fs_rtol, "atol": fs_atol},
            "reference": {"method": "fs", "solver": "BDF", "rtol": ref_rtol, "atol": ref_atol},
            "samples": int(samples), "seed": int(seed), "repeats": int(repeats),
            "branches": results["pbsr"].branch_counts(),
            "rows": rows, "results": results, "E": E, "kappa_bar": kb, "ref": ref}


_LABELS = {"pbsr": "PBSR", "exp": "Exp", "fs": "FS"}
_TABLE_FIELDS = ("method", "E_median", "E_max", "kappa_bar_median", "time_states", "time_sensitivities",
                 "time_total")


def _csv_cell(v):
    if isinstance(v, str):
        return v
    return "" if v is None or not np.isfinite(v) else repr(float(v))


def _fmt(v, spec):
    return "-" if v is None or (isinstance(v, float) and not np.isfinite(v)) else format(v, spec)


def cmd_compare(args):
    """``pbsens compare``: PBSR vs Exp vs FS, accuracy and time, as a table (and figure)."""
    _check_path(args.out, args.force, "--out", _TABLE_EXT)
    _check_path(args.plot, args.force, "--plot", _PLOT_EXT)
    _check_distinct(args, "--out", "--plot")
    _metrics()  # fail before computing when the accuracy measures are missing
    m = _model(args.model)
    span = _t_span(args)
    te = _t_eval(args.t_eval, span)
    p = _params(m, args.param)
    c = compare_methods(m, span, t_eval=te, p=p, solver=args.solver, rtol=args.rtol, atol=args.atol,
                        fs_rtol=args.fs_rtol, fs_atol=args.fs_atol, ref_rtol=args.ref_rtol,
                        ref_atol=args.ref_atol, samples=args.samples, seed=args.seed, repeats=args.repeats,
                        progress=_show_progress(args))
    ref = c["reference"]
    _say(args, f"{m.name} on [{span[0]:g}, {span[1]:g}]: {c['n_times']} output times "
               f"(state grid {c['grid_points']} points, {args.solver} rtol {args.rtol:g} atol {args.atol:g})")
    _say(args, f"E_k against FS (BDF, rtol {ref['rtol']:g}, atol {ref['atol']:g}); "
               + (f"kappa_bar over {args.samples} samples (seed {args.seed}); " if args.samples else "")
               + f"times: median of {args.repeats} runs")
    _say(args, f"{'method':<7} {'E_k median':>11} {'E_k max':>10} {'kappa_bar med':>14} "
               f"{'states':>10} {'sens.':>10} {'total':>10}")
    for row in c["rows"]:
        _say(args, f"{_LABELS[row['method']]:<7} {_fmt(row['E_median'], '.3e'):>11} "
                   f"{_fmt(row['E_max'], '.3e'):>10} {_fmt(row['kappa_bar_median'], '.3e'):>14} "
                   f"{_fmt_time(row['time_states']):>10} {_fmt_time(row['time_sensitivities']):>10} "
                   f"{_fmt_time(row['time_total']):>10}")
    _say(args, f"PBSR branches: {_branch_summary(c['results']['pbsr'])}")
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
        _say(args, f"wrote {args.out}")
    if args.plot:
        _compare_figure(c, args.plot)
        _say(args, f"wrote {args.plot}")
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

    from .plot import plot_kappa_bar, plot_relative_error
    r = c["results"]["pbsr"]
    panels = 2 if c["kappa_bar"] else 1
    fig = Figure(figsize=(7.0, 3.5 * panels), dpi=100, layout="constrained")
    axes = fig.subplots(panels, 1, squeeze=False, sharex=True)[:, 0]
    plot_relative_error(r, {_LABELS[k]: v for k, v in c["E"].items()}, ax=axes[0],
                        title=f"{c['model']}: E_k against FS (rtol {c['reference']['rtol']:g})")
    if c["kappa_bar"]:
        axes[0].set_xlabel("")
        plot_kappa_bar(r, {_LABELS[k]: v for k, v in c["kappa_bar"].items()}, ax=axes[1],
                       title=f"{c['model']}: kappa_bar ({c['samples']} samples); shaded: PBSR exp steps")
    fig.savefig(path, dpi=fig.dpi)
    return fig


def _reproduce_module():
    import importlib
    try:
        reproduce = importlib.import_module(f"{__package__}.reproduce")
    except ModuleNotFoundError as exc:
        if exc.name == f"{__package__}.reproduce":
            raise PbsensError("the paper's experiments are not available in this installation: "
                              "the module pbsens.reproduce is missing") from None
        raise PbsensError(f"cannot import pbsens.reproduce: {exc}") from None
    except ImportError as exc:
        raise PbsensError(f"cannot import pbsens.reproduce: {exc}") from None
    return reproduce


def cmd_reproduce(args):
    """``pbsens reproduce``: run the paper's experiments through :func:`pbsens.reproduce.run`."""
    mod = _reproduce_module()
    experiments = getattr(mod, "EXPERIMENTS", {})
    if args.list:
        for name, desc in experiments.items():
            print(f"{name:<12} {desc}")
        return 0
    names = list(args.names or [])
    if not names or "all" in names:
        if len(names) > 1:
            raise PbsensError("'NAME': 'all' cannot be combined with other experiment names")
        names = None
    else:
        unknown = [n for n in names if n not in experiments]
        if unknown:
            raise PbsensError(f"'NAME': unknown experiment(s) {', '.join(map(repr, unknown))}; "
                              f"choose from {', '.join(experiments) or '(none)'} or 'all'")
        names = list(dict.fromkeys(names))
    if args.out is not None and os.path.exists(args.out) and not os.path.isdir(args.out):
        raise PbsensError(f"'--out': {args.out!r} exists and is not a folder")
    t0 = time.perf_counter()
    out = mod.run(names=names, quick=args.quick, out_dir=args.out, progress=_show_progress(args))
    n = len(experiments) if names is None else len(names)
    _say(args, f"ran {n} experiment(s){' (quick)' if args.quick else ''} in {_fmt_time(time.perf_counter() - t0)}"
               + (f"; results in {args.out}" if args.out else ""))
    if isinstance(out, dict):
        for k, v in out.items():
            if isinstance(v, (str, os.PathLike)):
                _say(args, f"  {k}: {v}")
    return 0


# ----------------------------------------------------------------- parser
def _add_model_and_span(sp):
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


def _add_common(sp):
    """Options of ``simulate`` (kept for compatibility)."""
    _add_model_and_span(sp)
    sp.add_argument("--solver", default="LSODA", choices=SOLVERS,
                    help="scipy solve_ivp method for the states (default LSODA)")
    sp.add_argument("--rtol", type=_positive_float, default=1e-5, help="state solver rtol (default 1e-5)")
    sp.add_argument("--atol", type=_positive_float, default=1e-6, help="state solver atol (default 1e-6)")
    sp.add_argument("--out", help="output file (.npz or .csv)")
    sp.add_argument("--force", action="store_true", help="overwrite an existing output file")
    sp.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")


def _add_run(sub):
    sp = sub.add_parser(
        "run", help="compute sensitivities of one model and write them",
        description=_wrap("Compute the sensitivities S[k, i, j] = dx_i(t_k)/dp_j of a model: solve the states, "
                    "then march the sensitivity equation post hoc (pbsr, exp, pbs, exp2, pbsr2), or solve "
                    "states and sensitivities together (fs). Prints the grid size, the PBSR branches taken "
                    "and the timings; writes the result with state and parameter names."),
        epilog="examples:\n  pbsens run Chua --t-end 10 --out S.csv\n"
               "  pbsens run PKA --t-end 600 --t-eval 0:600:61 --method exp --out S.npz --plot S.png\n"
               "  pbsens run model.json --t-span 0 5 --param k1=0.3 --method fs",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_model_and_span(sp)
    sp.add_argument("--method", default="pbsr", choices=RUN_METHODS,
                    help="pbsr (Algorithm 2, default), exp (Algorithm 3), pbs (no switch), exp2/pbsr2 "
                         "(exponential-midpoint step), fs (forward sensitivities)")
    sp.add_argument("--solver", default=None, choices=SOLVERS,
                    help="scipy solve_ivp method: of the state solve (default LSODA), or of the joint "
                         "solve for fs (default BDF)")
    sp.add_argument("--rtol", type=_positive_float, default=None,
                    help="solver rtol (default 1e-5 for the states, 1e-8 for fs)")
    sp.add_argument("--atol", type=_positive_float, default=None,
                    help="solver atol (default 1e-6 for the states, 1e-10 for fs)")
    sp.add_argument("--interpolation", choices=("linear", "hermite", "dense"), default=None,
                    help="states at PBSR refinement points (post-hoc methods; default linear, as the paper)")
    sp.add_argument("--out", metavar="FILE",
                    help="write the result: .npz (arrays t, x, S, state_names, param_names, p, branch, ...) "
                         "or .csv (columns t, states, dX/dP)")
    sp.add_argument("--plot", metavar="FILE", help="plot the most influential sensitivities (.png, .pdf, .svg)")
    sp.add_argument("--top", type=_pos_int, default=5, help="parameters per state in the plot (default 5)")
    sp.add_argument("--normalized", action="store_true",
                    help="plot normalised sensitivities (p_j/x_i) dx_i/dp_j")
    sp.add_argument("--force", action="store_true", help="overwrite existing --out/--plot files")
    sp.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    sp.set_defaults(func=cmd_run)


def _add_compare(sub):
    sp = sub.add_parser(
        "compare", help="PBSR vs Exp vs FS on one model: accuracy and time",
        description=_wrap("Compare PBSR, Exp and forward sensitivities (FS) on one model. Accuracy: the relative "
                    "error E_k against FS at tight tolerances (median and max over the output times) and "
                    "the perturbation error kappa_bar (median over time, --samples perturbations). Time: "
                    "median over --repeats runs after a warm-up; PBSR and Exp include the state solve."),
        epilog="example:\n  pbsens compare Chua --t-end 10 --samples 20 --out table.csv --plot compare.png",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_model_and_span(sp)
    sp.add_argument("--solver", default="LSODA", choices=SOLVERS,
                    help="state solver of PBSR and Exp (default LSODA)")
    sp.add_argument("--rtol", type=_positive_float, default=1e-5, help="state solver rtol (default 1e-5)")
    sp.add_argument("--atol", type=_positive_float, default=1e-6, help="state solver atol (default 1e-6)")
    sp.add_argument("--fs-rtol", type=_positive_float, default=1e-8, help="rtol of the compared FS (default 1e-8)")
    sp.add_argument("--fs-atol", type=_positive_float, default=1e-10,
                    help="atol of the compared FS (default 1e-10)")
    sp.add_argument("--ref-rtol", type=_positive_float, default=1e-10,
                    help="rtol of the FS reference for E_k (default 1e-10)")
    sp.add_argument("--ref-atol", type=_positive_float, default=1e-12,
                    help="atol of the FS reference for E_k (default 1e-12)")
    sp.add_argument("--samples", type=_nonneg_int, default=20,
                    help="perturbations for kappa_bar (default 20; the paper uses 100; 0 skips it)")
    sp.add_argument("--seed", type=int, default=0, help="seed of the kappa_bar perturbations (default 0)")
    sp.add_argument("--repeats", type=_pos_int, default=3, help="timed runs per method (default 3)")
    sp.add_argument("--out", metavar="FILE", help="write the table (.csv or .json)")
    sp.add_argument("--plot", metavar="FILE", help="figure of E_k and kappa_bar over time (.png, .pdf, .svg)")
    sp.add_argument("--force", action="store_true", help="overwrite existing --out/--plot files")
    sp.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    sp.set_defaults(func=cmd_compare)


def _wrap(text):
    import textwrap
    return textwrap.fill(text, width=78)


def _experiments_epilog():
    import importlib
    try:
        EXPERIMENTS = importlib.import_module(f"{__package__}.reproduce").EXPERIMENTS
    except Exception:  # noqa: BLE001 - help must work even without the module
        return "experiments: (pbsens.reproduce is not available)"
    return "experiments:\n" + "\n".join(f"  {k:<12} {v}" for k, v in EXPERIMENTS.items())


def _add_reproduce(sub):
    sp = sub.add_parser(
        "reproduce", help="run the paper's experiments (figures and tables of Section 8)",
        description="Regenerate the paper's experiments with pbsens.reproduce.run: the named ones, or all.",
        epilog=_experiments_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("names", nargs="*", metavar="NAME", help="experiments to run, or 'all' (default all)")
    sp.add_argument("--quick", action="store_true", help="short spans and few samples: a smoke test")
    sp.add_argument("--out", metavar="DIR", help="folder for the results (default: the module's)")
    sp.add_argument("--list", action="store_true", help="list the experiments and exit")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress bars or summary")
    sp.set_defaults(func=cmd_reproduce)


def build_parser():
    """The ``pbsens`` argument parser with every subcommand.

    Returns
    -------
    argparse.ArgumentParser
    """
    from . import __version__
    parser = argparse.ArgumentParser(
        prog="pbsens",
        description="Post-hoc parameter sensitivities of ODE models (Peano-Baker series and "
                    "exponential methods).",
        epilog="Run 'pbsens COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"pbsens {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sp = sub.add_parser("models", help="list the built-in models with their sizes",
                        description="List the built-in models with their numbers of states and parameters.")
    sp.set_defaults(func=cmd_models)
    sp = sub.add_parser("simulate", help="solve the state equations and write t, x",
                        description="Solve the state equations and optionally write t and the states "
                                    "(.npz or .csv with state names).")
    _add_common(sp)
    sp.set_defaults(func=cmd_simulate)
    _add_run(sub)
    _add_compare(sub)
    _add_reproduce(sub)
    for extend in _EXTENSIONS:
        extend(sub)
    return parser


#: Functions ``f(subparsers)`` adding further subcommands.
_EXTENSIONS = []
from . import cli_petab  # noqa: E402  (moves into the cli package at merge)
_EXTENSIONS.append(cli_petab.add_parser)
from . import cli_sample  # noqa: E402  (moves into the cli package at merge)
_EXTENSIONS.append(cli_sample.add_parser)


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
