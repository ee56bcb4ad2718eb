"""pyPESTO + AMICI side of the fit benchmark: a stand-alone script run in AMICI's own Python.

Like ``amici_side.py`` (whose helpers in ``amici_common.py`` it uses) it imports AMICI,
pyPESTO, fides, petab, numpy and the standard library, never pbsens; the pbsens
benchmarks start it through ``benchmarks/amici_bridge.py`` (``run_pypesto``) and read
the JSON it writes.

Modes
-----
``fit YAML --starts STARTS.npy [--optimizer fides] [--max-iter 1000] [--hessian fim] [--n-threads 1] --out JSON``
    Multistart optimisation of the PEtab (v1) problem with pyPESTO and AMICI, from exactly
    the given start points: the rows of ``STARTS.npy`` (shape ``(n_starts, d)``), on the
    parameter scale, in the order of the PEtab parameter table's estimated parameters
    (``petab.v1.Problem.x_free_ids``; pbsens's ``Problem.parameter_ids``). The model is
    compiled once into ``--cache-dir`` (default ``benchmarks/.amici_cache/``, shared with
    ``amici_side.py``) and reused while the SBML and tables are unchanged. The objective
    is pyPESTO's ``AmiciObjective`` from its PEtab importer
    (``pypesto.petab.PetabImporter(...).create_objective_creator().create_objective``):
    AMICI computes sensitivities only for the model parameters the estimated PEtab
    parameters map to (the ``plist`` pyPESTO's parameter mapping sets), forward
    sensitivities, ``fim_for_hess=True`` (the FIM as the Hessian). PEtab objective
    priors, if the problem has any, are added as pyPESTO's importer does
    (``prior_included``). The starts are pyPESTO's multistart
    (``pypesto.optimize.minimize``), one start per call (the start as the problem's only
    ``x_guess``), so a start that fails is recorded (``status: "failed"``, ``error``)
    and the others still run; the JSON is rewritten after every start.

    Optimiser: ``pypesto.optimize.FidesOptimizer`` with ``hessian_update=None`` (``--hessian
    fim``, the default: fides uses the objective's Hessian, i.e. AMICI's FIM, in every
    iteration); ``--hessian hybrid`` is pyPESTO's default (``fides.HybridFixed``: FIM,
    then BFGS), ``--hessian bfgs`` plain BFGS. ``--max-iter`` is fides's ``maxiter``;
    the other fides options are its defaults (``--fides-option KEY=VALUE`` sets more).

    AMICI's "FIM" (pyPESTO's ``hess``) is ``J^T J`` of the weighted residuals ``(m - y) / sigma``
    (their Jacobian ``J`` including ``dsigma``): checked on Boehm against pbsens's
    ``residual_jacobian`` to 4e-7; it is not the expected Fisher information when noise
    parameters are estimated (pbsens: ``pypesto_objective(..., hessian="gauss-newton")``
    is the same matrix).

    AMICI settings, those of AMICI's own PEtab benchmark tests
    (``tests/benchmark_models/test_petab_benchmark.py``): ``rtol = atol = 1e-8``,
    ``max_steps = 10_000`` (``--rtol``, ``--atol``, ``--max-steps``), CVODES BDF with the
    dense direct linear solver, forward sensitivities; steady-state sensitivities by
    integration (``SteadyStateSensitivityMode.integrationOnly``) for Brannmark_JBC2010
    and Isensee_JCB2018 as there (``--steady-state-sensitivity``: ``auto``, ``integration``
    or ``default``). ``--n-threads`` is AMICI's OpenMP threads over conditions.

    Per start (``starts[i]``, in the order of the rows of STARTS.npy): ``index``, ``id``
    (pyPESTO's start id), ``status`` (``"ok"``/``"failed"``), ``x0``, ``x`` (both in the
    order of ``x_names``), ``fval`` (the negative log-likelihood, + the negative log-prior
    when ``prior_included``), ``llh = -fval``, ``fval0``, ``n_iter`` (fides's iterations),
    ``n_fval``, ``n_grad``, ``n_hess`` (pyPESTO's counts), ``cpu_time`` (seconds of process
    CPU time, ``time.process_time``, over the whole start: fides's ``minimize`` call,
    objective and optimiser), ``objective_cpu_time`` (the part inside the objective calls),
    ``wall_time`` (pyPESTO's ``time`` field: wall clock, ``time.time``, of the start),
    ``exitflag`` (fides's ``ExitFlag`` value), ``message``, ``error`` (when failed).
    Top level: ``mode: "pypesto-fit"``, ``x_names``, ``pypesto_x_names`` (pyPESTO's free
    parameter order; the script reorders between the two), ``lb``, ``ub``, ``optimizer``
    (name, hessian update, fides options), ``solver`` (read back from AMICI's solver),
    ``versions`` (amici, pypesto, fides, petab, numpy, python), ``best`` (index, fval,
    llh), ``n_failed``, ``prior_included``, ``compiled_now``, ``import_s``, ``total_wall_s``.
    NaN and inf are written as the strings ``"nan"``, ``"inf"`` (``amici_bridge`` reads them
    back as floats).

``evaluate YAML --x X.npy [--sensi-order 1] --out JSON``
    ``fval`` (and ``grad``, with ``--sensi-order 2`` also ``hess`` = the FIM) of the same
    objective at the rows of ``X.npy`` (``x_names`` order), for cross-checks with pbsens:
    ``points[i] = {x, fval, llh, grad, hess, wall_s, cpu_s}``; a failed simulation gives
    ``fval = "inf"`` as pyPESTO reports it.

Run (from the repository root, with AMICI's Python)::

    AMICI_PY=/root/amici-venv/bin/python
    $AMICI_PY benchmarks/pypesto_side.py fit PROBLEM.yaml --starts starts.npy --optimizer fides \\
        --max-iter 1000 --out fit_amici.json [--n-threads 1]
    $AMICI_PY benchmarks/pypesto_side.py evaluate PROBLEM.yaml --x points.npy --out f_amici.json
"""
from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
import traceback
from pathlib import Path

try:  # run as a script (how AMICI's Python runs it): the script's folder is on sys.path
    from amici_common import (DEFAULT_CACHE, _amici, _environment, _floats, _import_petab, _num, _quiet_amici_logs,
                              _shown_path, _solver_settings, _write)
except ImportError:  # import benchmarks.pypesto_side
    from benchmarks.amici_common import (DEFAULT_CACHE, _amici, _environment, _floats, _import_petab, _num,
                                         _quiet_amici_logs, _shown_path, _solver_settings, _write)

SCRIPT = "pypesto_side.py"
#: problems whose steady-state sensitivities AMICI's benchmark tests compute by integration
INTEGRATION_ONLY = ("Brannmark_JBC2010", "Isensee_JCB2018")


# --------------------------------------------------------------------------- set-up

def _versions():
    import importlib.metadata as md
    out = {"python": platform.python_version()}
    for name in ("amici", "pypesto", "fides", "petab", "numpy"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def _quiet_logs():
    _quiet_amici_logs()
    for name in ("pypesto", "fides", "petab"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _setup(args):
    """(petab problem, pyPESTO problem, info): the model compiled (cached), the objective built."""
    _, sundials = _amici()
    try:
        import petab.v1 as petab_v1
        import pypesto.petab
    except ImportError as exc:
        sys.exit(f"{SCRIPT}: cannot import pyPESTO or petab ({exc}); install them beside AMICI: "
                 f"{sys.executable} -m pip install pypesto fides petab")
    problem, model, name, compiled, t_import = _import_petab(petab_v1, args.yaml, args.cache_dir)
    _quiet_logs()

    solver = model.create_solver()
    solver.set_relative_tolerance(args.rtol)
    solver.set_absolute_tolerance(args.atol)
    solver.set_max_steps(args.max_steps)
    solver.set_sensitivity_method(sundials.SensitivityMethod.forward)   # the FIM needs forward sensitivities
    ss = args.steady_state_sensitivity
    pid = Path(args.yaml).stem
    if ss == "integration" or (ss == "auto" and any(pid.startswith(p) for p in INTEGRATION_ONLY)):
        model.set_steady_state_sensitivity_mode(sundials.SteadyStateSensitivityMode.integrationOnly)
        ss_used = "integrationOnly"
    else:
        ss_used = str(model.get_steady_state_sensitivity_mode())

    importer = pypesto.petab.PetabImporter(problem, output_folder=str(Path(args.cache_dir) / name), model_name=name)
    objective = importer.create_objective_creator().create_objective(model=model, solver=solver,
                                                                      n_threads=args.n_threads)
    pproblem = importer.create_problem(objective=objective)
    _quiet_logs()          # the import may have reset log levels

    petab_ids = [str(i) for i in problem.x_free_ids]
    pyp_ids = [str(pproblem.x_names[i]) for i in pproblem.x_free_indices]
    if sorted(petab_ids) != sorted(pyp_ids):
        sys.exit(f"{SCRIPT}: pyPESTO's free parameters {pyp_ids} are not PEtab's estimated parameters {petab_ids}")
    to_pyp = [petab_ids.index(i) for i in pyp_ids]     # x_pypesto = x_petab[to_pyp]
    to_petab = [pyp_ids.index(i) for i in petab_ids]   # x_petab = x_pypesto[to_petab]
    info = {"model_name": name, "compiled_now": compiled, "import_s": t_import, "x_names": petab_ids,
            "pypesto_x_names": pyp_ids, "to_pyp": to_pyp, "to_petab": to_petab,
            "prior_included": importer.create_prior() is not None,
            "solver": {**_solver_settings(solver), "sensitivity_method": "forward",
                       "steady_state_sensitivity_mode": ss_used, "n_threads": args.n_threads,
                       "fim_for_hess": bool(getattr(objective, "fim_for_hess", True))}}
    return problem, pproblem, info


def _load_points(path, d, what):
    import numpy as np
    try:
        xs = np.load(path)
    except Exception as exc:
        sys.exit(f"{SCRIPT}: {what} {path}: cannot read ({type(exc).__name__}: {exc})")
    xs = np.atleast_2d(np.asarray(xs, dtype=np.float64))
    if xs.ndim != 2 or xs.shape[1] != d:
        sys.exit(f"{SCRIPT}: {what} {path}: shape {xs.shape}, needs (n, {d}) (the estimated parameters)")
    return xs


# --------------------------------------------------------------------------- fides with counters

class _FidesRecords:
    """Patches ``fides.Optimizer`` (pyPESTO's FidesOptimizer builds one per start) so that each run
    records its iterations, its process CPU time and the CPU time spent in the objective."""

    def __init__(self):
        self.runs = []

    def install(self):
        import fides
        records = self
        base = fides.Optimizer if not getattr(fides.Optimizer, "_recording", False) else fides.Optimizer.__base__

        class RecordingOptimizer(base):
            _recording = True

            def __init__(self, fun, *a, **k):
                self._obj_cpu = 0.0
                self._fval0 = None

                def timed(x, *aa, **kk):
                    c0 = time.process_time()
                    try:
                        out = fun(x, *aa, **kk)
                    finally:
                        self._obj_cpu += time.process_time() - c0
                    if self._fval0 is None:       # fides evaluates the start first
                        self._fval0 = float(out[0] if isinstance(out, tuple) else out)
                    return out
                super().__init__(timed, *a, **k)

            def minimize(self, x0, *a, **k):
                c0 = time.process_time()
                try:
                    return super().minimize(x0, *a, **k)
                finally:
                    records.runs.append({"n_iter": int(getattr(self, "iteration", -1)),
                                         "cpu_time": time.process_time() - c0,
                                         "objective_cpu_time": self._obj_cpu, "fval0": self._fval0})

        fides.Optimizer = RecordingOptimizer
        return self


def _optimizer(args):
    import fides
    from pypesto.optimize import FidesOptimizer
    hess = {"fim": None, "hybrid": "default", "bfgs": fides.BFGS()}[args.hessian]
    options = {"maxiter": int(args.max_iter)}
    for kv in args.fides_option or []:
        k, _, v = kv.partition("=")
        try:
            options[k] = int(v) if v.lstrip("-").isdigit() else float(v)
        except ValueError:
            sys.exit(f"{SCRIPT}: --fides-option {kv!r}: needs KEY=NUMBER")
    return FidesOptimizer(hessian_update=hess, options=options, verbose=logging.WARNING), options


def _one_start(pproblem, optimizer, x0_pyp, i, records):
    """pyPESTO's multistart with the one start ``x0_pyp`` (free parameters, pyPESTO's order)."""
    import numpy as np
    from pypesto.optimize import OptimizeOptions, minimize
    pproblem.set_x_guesses(pproblem.get_full_vector(x0_pyp, pproblem.x_fixed_vals)[None, :])
    n_before = len(records.runs)
    res = minimize(pproblem, optimizer, n_starts=1, ids=[str(i)], progress_bar=False,
                   options=OptimizeOptions(allow_failed_starts=True))
    r = res.optimize_result.list[0]
    rec = records.runs[-1] if len(records.runs) > n_before else {}
    free = np.asarray(pproblem.x_free_indices)

    def reduced(v):
        if v is None:
            return None
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        return v[free] if v.size == pproblem.dim_full else v
    return r, rec, reduced(r.x), reduced(r.x0)


def _resumed_starts(out, starts):
    """The finished starts of an earlier run's ``--out`` JSON, by index, checked against ``starts``."""
    import numpy as np
    doc = json.loads(Path(out).read_text())
    if doc.get("mode") != "pypesto-fit":
        sys.exit(f"{SCRIPT}: --resume: {out} is not the output of a fit")
    done = {}
    for e in doc.get("starts", []):
        i = int(e["index"])
        if i >= len(starts) or not np.allclose(np.asarray(e["x0"], dtype=float), starts[i], rtol=0, atol=1e-12):
            sys.exit(f"{SCRIPT}: --resume: start {i} of {out} is not row {i} of --starts; use another --out")
        done[i] = e
    return done


def run_fit(args):
    import numpy as np
    t_all = time.perf_counter()
    problem, pproblem, info = _setup(args)
    d = len(info["x_names"])
    starts = _load_points(args.starts, d, "--starts")
    if args.optimizer != "fides":
        sys.exit(f"{SCRIPT}: --optimizer {args.optimizer!r}: only 'fides'")
    optimizer, fides_options = _optimizer(args)
    records = _FidesRecords().install()
    to_pyp, to_petab = np.array(info["to_pyp"]), np.array(info["to_petab"])
    lb = np.asarray(pproblem.lb, dtype=np.float64)[to_petab]
    ub = np.asarray(pproblem.ub, dtype=np.float64)[to_petab]
    payload = {"mode": "pypesto-fit", "problem": _shown_path(args.yaml), "model_name": info["model_name"],
               "compiled_now": info["compiled_now"], "import_s": info["import_s"],
               "x_names": info["x_names"], "pypesto_x_names": info["pypesto_x_names"],
               "lb": _floats(lb), "ub": _floats(ub), "prior_included": info["prior_included"],
               "optimizer": {"name": "fides", "class": "pypesto.optimize.FidesOptimizer",
                             "hessian_update": {"fim": None, "hybrid": "HybridFixed", "bfgs": "BFGS"}[args.hessian],
                             "hessian": args.hessian, "options": fides_options,
                             "hess_is": "AMICI's FIM: J^T J of the weighted residuals (Gauss-Newton)"},
               "solver": info["solver"], "versions": _versions(), "environment": _environment(_amici()[0]),
               "n_starts": int(starts.shape[0]), "starts": [], "n_failed": 0, "best": None}
    outside = [i for i, x in enumerate(starts) if np.any(x < lb) or np.any(x > ub)]
    if outside:
        payload["starts_outside_bounds"] = outside
    best, done = None, {}
    if args.resume and args.out != "-" and Path(args.out).is_file():
        done = _resumed_starts(args.out, starts)
        payload["starts"] = [done[i] for i in sorted(done)]
        ok = [(e["index"], float(e["fval"])) for e in payload["starts"] if e["status"] == "ok"]
        best = min(ok, key=lambda b: b[1]) if ok else None
        payload["resumed_starts"] = len(done)
        t_all -= float(json.loads(Path(args.out).read_text()).get("total_wall_s") or 0.0)   # wall of all sessions
    for i, x0 in enumerate(starts):
        if i in done:
            continue
        entry = {"index": i, "id": str(i), "x0": _floats(x0)}
        try:
            r, rec, x_end, x_start = _one_start(pproblem, optimizer, x0[to_pyp], i, records)
            failed = r.fval is None or not np.isfinite(r.fval)
            fval = float("inf") if r.fval is None else float(r.fval)
            entry.update(status="failed" if failed else "ok",
                         x=None if x_end is None else _floats(x_end[to_petab]),
                         fval=_num(fval), llh=_num(-fval),
                         fval0=_num(r.fval0) if r.fval0 is not None else
                         (None if rec.get("fval0") is None else _num(rec["fval0"])),
                         n_iter=rec.get("n_iter"), n_fval=r.n_fval, n_grad=r.n_grad, n_hess=r.n_hess,
                         cpu_time=rec.get("cpu_time"), objective_cpu_time=rec.get("objective_cpu_time"),
                         wall_time=None if r.time is None else float(r.time),
                         exitflag=None if r.exitflag is None else int(r.exitflag), message=str(r.message or ""))
            if x_start is not None and not np.allclose(x_start[to_petab], x0, rtol=0, atol=1e-12):
                entry["x0_used"] = _floats(x_start[to_petab])      # pyPESTO moved the start (never expected)
            if failed:
                entry["error"] = str(r.message or "non-finite objective")
            elif best is None or fval < best[1]:
                best = (i, fval)
        except Exception as exc:            # record, never crash: the other starts still run
            entry.update(status="failed", fval="inf", llh="-inf", error=f"{type(exc).__name__}: {exc}",
                         traceback=traceback.format_exc(limit=6)[-2000:])
        payload["starts"].append(entry)
        payload["n_failed"] = sum(e["status"] != "ok" for e in payload["starts"])
        payload["best"] = None if best is None else {"index": best[0], "fval": best[1], "llh": -best[1]}
        payload["total_wall_s"] = time.perf_counter() - t_all
        if not args.quiet:
            print(f"{SCRIPT}: start {i + 1}/{len(starts)}: {entry['status']}, fval {entry.get('fval')}, "
                  f"{entry.get('n_iter')} iterations, {entry.get('cpu_time') or 0:.2f} s CPU", file=sys.stderr,
                  flush=True)
        _write(args.out, payload)
    if not len(starts):
        _write(args.out, payload)
    return payload


def run_evaluate(args):
    import numpy as np
    _, pproblem, info = _setup(args)
    xs = _load_points(args.x, len(info["x_names"]), "--x")
    to_pyp, to_petab = np.array(info["to_pyp"]), np.array(info["to_petab"])
    order = (0, 1, 2)[: args.sensi_order + 1]
    points = []
    for x in xs:
        entry = {"x": _floats(x)}
        c0, t0 = time.process_time(), time.perf_counter()
        try:
            out = pproblem.objective(x[to_pyp], sensi_orders=order)
            out = out if isinstance(out, tuple) else (out,)
            fval = float(out[0])
            entry.update(fval=_num(fval), llh=_num(-fval), status="ok" if np.isfinite(fval) else "failed")
            if len(out) > 1:
                entry["grad"] = _floats(np.asarray(out[1])[to_petab])
            if len(out) > 2:
                h = np.asarray(out[2])[np.ix_(to_petab, to_petab)]
                entry["hess"] = [_floats(row) for row in h]
        except Exception as exc:
            entry.update(status="failed", fval="inf", llh="-inf", error=f"{type(exc).__name__}: {exc}")
        entry.update(wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0)
        points.append(entry)
    payload = {"mode": "pypesto-evaluate", "problem": _shown_path(args.yaml), "model_name": info["model_name"],
               "x_names": info["x_names"], "pypesto_x_names": info["pypesto_x_names"],
               "prior_included": info["prior_included"], "sensi_order": args.sensi_order,
               "solver": info["solver"], "versions": _versions(), "points": points}
    _write(args.out, payload)
    return payload


# --------------------------------------------------------------------------- command line

def _common(p):
    p.add_argument("yaml", help="PEtab (v1) problem YAML")
    p.add_argument("--out", required=True, help="JSON result ('-': standard output)")
    p.add_argument("--cache-dir", default=str(DEFAULT_CACHE), help="compiled AMICI models (default %(default)s)")
    p.add_argument("--rtol", type=float, default=1e-8)
    p.add_argument("--atol", type=float, default=1e-8)
    p.add_argument("--max-steps", type=int, default=10_000)
    p.add_argument("--n-threads", type=int, default=1, help="AMICI's threads over conditions")
    p.add_argument("--steady-state-sensitivity", choices=("auto", "integration", "default"), default="auto")


def main(argv=None):
    ap = argparse.ArgumentParser(prog=SCRIPT, description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    f = sub.add_parser("fit", help="multistart fit from given start points")
    _common(f)
    f.add_argument("--starts", required=True, help=".npy (n_starts, d) on the parameter scale, PEtab order")
    f.add_argument("--optimizer", default="fides", choices=("fides",))
    f.add_argument("--max-iter", type=int, default=1000)
    f.add_argument("--hessian", choices=("fim", "hybrid", "bfgs"), default="fim",
                   help="fim: hessian_update=None (the FIM every iteration); hybrid: pyPESTO's default")
    f.add_argument("--fides-option", action="append", metavar="KEY=VALUE", help="more fides options")
    f.add_argument("--resume", action="store_true",
                   help="keep the starts already in --out (checked against --starts) and run only the others")
    f.add_argument("-q", "--quiet", action="store_true")
    e = sub.add_parser("evaluate", help="objective value and gradient at given points")
    _common(e)
    e.add_argument("--x", required=True, help=".npy (n, d) on the parameter scale, PEtab order")
    e.add_argument("--sensi-order", type=int, choices=(0, 1, 2), default=1)
    args = ap.parse_args(argv)
    return run_fit(args) if args.mode == "fit" else run_evaluate(args)


if __name__ == "__main__":
    main()
