"""PEtab benchmark problems: time of llh and llh + gradient, and the gradient's error.

For Boehm, Fujita and Brannmark (tests/data/petab): the median wall time of
``Problem.evaluate(sensitivities=False)`` (llh alone) and of ``evaluate()``
(llh + gradient + FIM) with ``exp2``, ``pbsr`` and ``fs`` at the Problem's
default solver options (printed beside each row: solver, rtol, atol, sub-steps
of the march), and the gradient's error against central finite differences of
the llh (step 1e-4 on the parameter scale, Rodas5P at rtol 1e-12, atol 1e-14),
relative in max-norm, at the nominal parameters shifted by +-0.1 on their scale
(at the optimum the gradient is a sum of cancelling terms). A ``baseline`` row
per problem repeats exp2 with the earlier default (scipy's LSODA, rtol 1e-8,
atol 1e-10, the march on LSODA's own grid), so that
the speed-up is a ratio within one run; ``--no-baseline`` leaves it out.

When AMICI is set up (its own Python >= 3.12 environment, given by
``--amici-python PATH`` or ``$PBSENS_AMICI_PYTHON``; docs/PERFORMANCE.md), its llh
and llh + gradient with forward and with adjoint sensitivities on the same
problem are timed in the same run (:func:`amici_times`, through
``benchmarks/amici_bridge.py``), at its best: the settings AMICI's own benchmark
tests time the collection with (``amici_side.py petab --settings benchmark``: CVODES
BDF, rtol 1e-8, atol 1e-8, steady-state sensitivities by integration for Brannmark,
ReturnData reduced to llh and gradient as pyPESTO's objective asks), ``run_simulations``
on ExpData filled once (``plist``: the estimated parameters), with the solver time
AMICI reports and its gradient's error against the same finite differences.
``--amici-defaults`` also times AMICI's forward gradient at its Solver defaults
(atol 1e-16: twice the steps on Boehm, CVODES failures on Fujita; the earlier
comparison). Then AMICI's forward gradient at matched accuracy
(:func:`amici_matched`): at rtol = atol in :data:`MATCHED_TOLS`, the fastest point
whose gradient error is at most pbsens exp2's. The summary table ("Against AMICI")
gives the ratios on process CPU time (on a loaded, shared machine the wall time also
counts the waits for a core). ``--amici-out DIR`` keeps AMICI's raw JSON.

Run from the repository root::

    python -m benchmarks.bench_petab [--repeats 10] [--problems Boehm_JProteomeRes2014 ...] \
        [--amici-python PATH] [--amici-out benchmarks/results]

The machine's load average is printed at the start and the end: on a shared
machine the times are noisy; compare rows of one run.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

try:  # run as a script: the script's folder is on sys.path
    from amici_bridge import add_amici_argument
except ImportError:  # python -m benchmarks.bench_petab
    from benchmarks.amici_bridge import add_amici_argument

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "petab"
PROBLEMS = ["Boehm_JProteomeRes2014", "Fujita_SciSignal2010", "Brannmark_JBC2010"]
#: (label, method, options beyond the Problem's defaults)
METHODS = [("exp2", "exp2", {}), ("pbsr", "pbsr", {}), ("fs", "fs", {})]
BASELINE = ("exp2 (LSODA, before)", "exp2", dict(solver="LSODA", rtol=1e-8, atol=1e-10))
FD = dict(solver="rodas5p", rtol=1e-12, atol=1e-14)
STEP = 1e-4


def _median_time(fn, repeats, cpu=False):
    """Median wall time of ``fn()`` over ``repeats`` runs after one warm-up; with ``cpu=True`` also the
    median CPU time of this process (less sensitive to other processes on a shared machine)."""
    fn()  # warm-up (compilation, caches)
    ts, cs = [], []
    for _ in range(repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
    return (statistics.median(ts), statistics.median(cs)) if cpu else statistics.median(ts)


def fd_gradient(problem, theta):
    g = np.empty(problem.dim)
    for i in range(problem.dim):
        e = np.zeros(problem.dim)
        e[i] = STEP
        g[i] = (problem.llh(theta + e, **FD) - problem.llh(theta - e, **FD)) / (2 * STEP)
    return g


#: Python of an environment with AMICI (``--amici-python`` / $PBSENS_AMICI_PYTHON), set by main()
AMICI_PYTHON = None
#: folder for AMICI's raw JSON per problem (``--amici-out``), or None
AMICI_OUT = None
#: also time AMICI at its Solver defaults (``--amici-defaults``)
AMICI_DEFAULTS = False


#: rtol = atol of AMICI's forward gradient at matched accuracy (:func:`amici_matched`)
MATCHED_TOLS = (1e-7, 1e-6, 1e-5, 1e-4, 1e-3)


def pick_matched(points, target):
    """The fastest of ``points`` whose gradient error is at most ``target``, or ``None``.

    ``points``: dicts with ``tol``, ``seconds`` (None: failed) and ``grad_err`` (None: unknown).
    The error need not fall with the tolerance (CVODES's step choice), so every point is looked at,
    not only the loosest one that passes. A NaN ``target`` or error never matches.
    """
    ok = [p for p in points if p.get("seconds") is not None and p.get("grad_err") is not None
          and p["grad_err"] <= target]
    return min(ok, key=lambda p: (p["seconds"], -p["tol"])) if ok else None


def amici_times(yaml_path, repeats, theta=None, g_fd=None, extra=(), modes=None):
    """AMICI's numbers for one problem, or ``None`` when AMICI is not installed.

    The seam for the optional comparison: AMICI is not a dependency of pbsens, and
    AMICI 1.x needs Python >= 3.12, so it runs in its own environment through
    ``benchmarks/amici_bridge.py`` / ``benchmarks/amici_side.py`` (docs/PERFORMANCE.md).
    Returns seconds ``{"llh", "llh+grad" (forward), "llh+grad adjoint"}``, the solver
    CPU times AMICI reports (``"cpu"``, seconds per mode), ``"llh_value"``,
    ``"status"`` per mode, the gradient errors against ``g_fd`` at ``theta`` (a dict
    id -> value on scale; ``"grad_err"`` per mode) and the whole parsed result (``"raw"``).
    """
    import json
    import tempfile

    try:
        from amici_bridge import run_amici
    except ImportError:
        from benchmarks.amici_bridge import run_amici
    args = ["petab", str(yaml_path), "--repeats", str(repeats), *extra]
    if modes:
        args += ["--modes", *modes]
    with tempfile.TemporaryDirectory() as tmp:
        if theta is not None:
            tf = Path(tmp) / "theta.json"
            tf.write_text(json.dumps({k: float(v) for k, v in theta.items()}))
            args += ["--theta-file", str(tf)]
        opts = dict(zip(extra[::2], extra[1::2]))
        tag = "_".join(f"{k.lstrip('-')}_{opts[k]}" for k in ("--settings", "--rtol", "--atol") if k in opts)
        raw_out = None if AMICI_OUT is None else \
            Path(AMICI_OUT) / f"amici_petab_{Path(yaml_path).stem}{'_' + tag if tag else ''}.json"
        res = run_amici(args, AMICI_PYTHON, raw_out=raw_out)
    if res is None:
        return None
    runs = res["runs"]
    keys = {"llh": "llh", "llh+grad": "llh+grad forward", "llh+grad adjoint": "llh+grad adjoint"}
    out = {"raw": res, "status": {}, "cpu": {}, "grad_err": {}, "wall_petab": {}, "proc": {}}
    for key, mode in keys.items():
        r = runs.get(mode, {})
        out["status"][key] = r.get("status", "missing")
        if r.get("failures"):
            f = r["failures"]
            n_cond = res.get("n_conditions", "?")
            out["status"][key] = (f"{f[0].get('status_text', f[0].get('status'))} in "
                                  f"{len({x.get('condition') for x in f})} of {n_cond} conditions")
        elif r.get("error"):
            out["status"][key] = r["error"][:80]
        ok = r.get("status") == "ok"
        out[key] = r["wall_ms"] / 1e3 if ok and r.get("wall_ms") is not None else None
        at = r.get("at_theta") or {}
        out["wall_petab"][key] = r["wall_petab_ms"] / 1e3 if ok and r.get("wall_petab_ms") is not None else None
        if ok and at.get("status") not in (None, "ok"):     # ran at the nominal parameters, failed at theta
            out["status"][key] = f"failed at theta: {at.get('error') or at.get('status')}"[:80]
        out["cpu"][key] = r["cpu_ms"] / 1e3 if ok and r.get("cpu_ms") is not None else None
        out["proc"][key] = r["process_cpu_ms"] / 1e3 if ok and r.get("process_cpu_ms") is not None else None
        if g_fd is not None and at.get("gradient") is not None:
            g = np.asarray(at["gradient"], dtype=float)
            out["grad_err"][key] = float(np.max(np.abs(g - g_fd)) / np.max(np.abs(g_fd)))
    out["llh_value"] = runs.get("llh", {}).get("llh")
    first = next(iter(runs.values()), {})
    solver = runs.get("llh", first).get("solver", {})
    out["rtol"], out["atol"] = solver.get("rtol"), solver.get("atol")
    out["settings"] = res.get("settings")
    return out


def amici_matched(yaml_path, repeats, theta, g_fd, target, base=None):
    """AMICI's forward llh + gradient at matched accuracy: every rtol = atol of :data:`MATCHED_TOLS`
    (settings otherwise as ``--settings benchmark``), and the fastest point (process CPU time) whose
    gradient error against ``g_fd`` at ``theta`` is at most ``target`` (:func:`pick_matched`);
    ``base``: the :func:`amici_times` result at the benchmark settings, a candidate too.
    Returns ``{"points": [...], "best": point or None}``, or ``None`` without AMICI."""
    points = []
    if base is not None and base.get("rtol") is not None and base.get("rtol") == base.get("atol"):
        points.append({"tol": base["rtol"], "seconds": base["proc"].get("llh+grad"),
                       "solver_seconds": base["cpu"].get("llh+grad"), "wall": base.get("llh+grad"),
                       "grad_err": base["grad_err"].get("llh+grad"), "status": base["status"].get("llh+grad")})
    for tol in MATCHED_TOLS:
        am = amici_times(yaml_path, repeats, theta=theta, g_fd=g_fd, modes=["forward"],
                         extra=["--rtol", repr(tol), "--atol", repr(tol), "--petab-repeats", "0"])
        if am is None:
            return None
        points.append({"tol": tol, "seconds": am["proc"].get("llh+grad"), "solver_seconds": am["cpu"].get("llh+grad"),
                       "wall": am.get("llh+grad"), "grad_err": am["grad_err"].get("llh+grad"),
                       "status": am["status"].get("llh+grad")})
    return {"points": points, "best": pick_matched(points, target)}


def _effective_options(method, options):
    """The solver options evaluate() uses for ``method`` (the Problem's defaults updated by ``options``)."""
    from pbsens.problems.problem import evaluation_options
    from pbsens.sensitivity.posthoc import DEFAULT_SUBSTEPS
    opts = evaluation_options(method, True, options)
    if method != "fs":
        opts.setdefault("substeps", DEFAULT_SUBSTEPS.get(opts["solver"], 1))
    return opts


def bench(name, repeats, baseline=True):
    import pbsens.petab as pbpetab
    yaml_path = DATA / name / f"{name}.yaml"
    problem = pbpetab.load(yaml_path)
    theta = problem.x_nominal + 0.1 * np.where(np.arange(problem.dim) % 2, 1.0, -1.0)
    t0 = time.perf_counter()
    g_fd = fd_gradient(problem, theta)
    t_fd = time.perf_counter() - t0
    rows = []
    for label, method, tol in METHODS + ([BASELINE] if baseline else []):
        t_llh, c_llh = _median_time(lambda: problem.evaluate(method=method, sensitivities=False, **tol), repeats,
                                    cpu=True)
        t_grad, c_grad = _median_time(lambda: problem.evaluate(method=method, **tol), repeats, cpu=True)
        res0 = problem.evaluate(method=method, **tol)
        g = problem.evaluate(theta, method=method, **tol).gradient
        err = float(np.max(np.abs(g - g_fd)) / np.max(np.abs(g_fd)))
        eff = _effective_options(method, tol)
        rows.append(dict(problem=name, method=label, solver=eff["solver"], rtol=eff["rtol"], atol=eff["atol"],
                         substeps=eff.get("substeps"), llh=res0.llh, t_llh=t_llh, t_grad=t_grad, c_llh=c_llh, c_grad=c_grad,
                         grad_err=err))
    th = dict(zip(problem.parameter_ids, theta))
    am = amici_times(yaml_path, repeats, theta=th, g_fd=g_fd)
    if am is not None:
        am["defaults"] = (amici_times(yaml_path, repeats, theta=th, g_fd=g_fd, modes=["forward"],
                                      extra=["--settings", "defaults", "--petab-repeats", "0"])
                          if AMICI_DEFAULTS else None)
        exp2 = next(r for r in rows if r["method"] == "exp2")
        am["matched"] = amici_matched(yaml_path, repeats, th, g_fd, exp2["grad_err"], base=am)
    return rows, am, t_fd


def amici_rows(name, am):
    """Table rows of AMICI's numbers: wall time (compiled simulations; simulate_petab in brackets) and
    the solver CPU time AMICI reports, per mode; a failed mode says so."""
    def ms(key, am=am):
        if am[key] is None:
            return f"failed ({am['status'][key]})"
        proc = "" if am["proc"].get(key) is None else f"process {1e3 * am['proc'][key]:.1f}, "
        petab = "" if am["wall_petab"].get(key) is None else f" [{1e3 * am['wall_petab'][key]:.1f}]"
        return f"{1e3 * am[key]:.1f}{petab} ({proc}solver {1e3 * am['cpu'][key]:.1f})"

    def err(key, am=am):
        e = am["grad_err"].get(key)
        return "" if e is None else f"{e:.1e}"

    def tol(am):
        return f"{am['rtol']:.0e}, {am['atol']:.0e}" if am.get("rtol") is not None else "AMICI defaults"
    llh = am["llh_value"]
    llh = f"{llh:.6f}" if isinstance(llh, float) else str(llh)

    def cpu(*keys, am=am):
        return ", ".join("" if am["proc"].get(k) is None else f"{1e3 * am['proc'][k]:.1f}" for k in keys)
    out = [f"| {name} | AMICI (forward) | {tol(am)} | {llh} | {ms('llh')} | {ms('llh+grad')} | "
           f"{cpu('llh', 'llh+grad')} | {err('llh+grad')} |",
           f"| {name} | AMICI (adjoint) | {tol(am)} | | | {ms('llh+grad adjoint')} | {cpu('llh+grad adjoint')} | "
           f"{err('llh+grad adjoint')} |"]
    d = am.get("defaults")
    if d is not None:
        out.append(f"| {name} | AMICI (forward, Solver defaults) | {tol(d)} | | | {ms('llh+grad', d)} | "
                   f"{cpu('llh+grad', am=d)} | {err('llh+grad', d)} |")
    best = (am.get("matched") or {}).get("best")
    if best is not None:
        out.append(f"| {name} | AMICI (forward, matched accuracy) | {best['tol']:.0e}, {best['tol']:.0e} | | | "
                   f"{1e3 * best['wall']:.1f} (process {1e3 * best['seconds']:.1f}, solver "
                   f"{1e3 * best['solver_seconds']:.1f}) | {1e3 * best['seconds']:.1f} | {best['grad_err']:.1e} |")
    return out


def against_rows(name, rows, am):
    """The "Against AMICI" summary row: pbsens exp2 against AMICI's forward gradient at its benchmark
    settings, at matched accuracy, and its adjoint, on process CPU time (ms), ratios AMICI / exp2."""
    exp2 = next(r for r in rows if r["method"] == "exp2")
    c = exp2["c_grad"]

    def cell(seconds, err, what=""):
        if seconds is None:
            return "failed", ""
        return f"{what}{1e3 * seconds:.1f} ms (error {err:.1e})" if err is not None else \
            f"{what}{1e3 * seconds:.1f} ms", f"**{seconds / c:.1f}x**"
    fwd, rf = cell(am["proc"].get("llh+grad"), am["grad_err"].get("llh+grad"))
    if am["proc"].get("llh+grad") is None:
        fwd = f"failed ({am['status'].get('llh+grad')})"
    best = (am.get("matched") or {}).get("best")
    if best is None:
        mt, rm = "none of the tolerances reached the error", ""
    else:
        mt, rm = cell(best["seconds"], best["grad_err"], f"rtol = atol {best['tol']:.0e}: ")
    adj, ra = cell(am["proc"].get("llh+grad adjoint"), am["grad_err"].get("llh+grad adjoint"))
    return (f"| {name} | {1e3 * c:.1f} ms (error {exp2['grad_err']:.1e}) | {fwd} | {rf} | {mt} | {rm} | "
            f"{adj} | {ra} |")


def main(argv=None):
    import os
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--problems", nargs="*", default=PROBLEMS)
    ap.add_argument("--no-baseline", action="store_true", help="leave out the LSODA exp2 row")
    add_amici_argument(ap)
    ap.add_argument("--amici-out", default=None, help="save AMICI's raw JSON per problem in this folder")
    ap.add_argument("--amici-defaults", action="store_true",
                    help="also time AMICI's forward gradient at its Solver defaults (rtol 1e-8, atol 1e-16)")
    args = ap.parse_args(argv)
    global AMICI_PYTHON, AMICI_OUT, AMICI_DEFAULTS
    AMICI_PYTHON, AMICI_OUT, AMICI_DEFAULTS = args.amici_python, args.amici_out, args.amici_defaults
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs\n")
    print("| problem | method | solver, rtol, atol, sub-steps | llh at nominal | llh [ms] | "
          "llh + gradient [ms] | CPU llh, llh + gradient [ms] | gradient error vs FD (max-norm rel.) |")
    print("|---|---|---|---|---|---|---|---|")
    against = []
    for name in args.problems:
        rows, am, t_fd = bench(name, args.repeats, baseline=not args.no_baseline)
        if am is not None:
            against.append(against_rows(name, rows, am))
        for r in rows:
            sub = "" if r["substeps"] is None else f", {r['substeps']}"
            print(f"| {r['problem']} | {r['method']} | {r['solver']}, {r['rtol']:.0e}, {r['atol']:.0e}{sub} | "
                  f"{r['llh']:.6f} | {1e3 * r['t_llh']:.1f} | {1e3 * r['t_grad']:.1f} | "
                  f"{1e3 * r['c_llh']:.1f}, {1e3 * r['c_grad']:.1f} | {r['grad_err']:.1e} |",
                  flush=True)
        if am is None:
            print(f"| {name} | AMICI | not installed | | | | | |", flush=True)
        else:
            for line in amici_rows(name, am):
                print(line, flush=True)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"\nmedians of {args.repeats} runs after one warm-up (wall clock; CPU: this process's time); "
          f"load average at the end "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; FD reference: central differences, step {STEP} on the "
          f"parameter scale, {FD['solver']} at rtol {FD['rtol']}, atol {FD['atol']}")
    print("AMICI: wall time of its compiled simulations of all conditions (run_simulations on ExpData filled once, "
          "plist the estimated parameters), [in brackets: the public simulate_petab call, parameter mapping "
          "included], (process: process CPU time of the run_simulations call; "
          "solver: CPU time AMICI reports, cpu_time_total summed over conditions); settings of AMICI's benchmark "
          "tests (amici_side.py petab --settings benchmark); benchmarks/amici_side.py")
    if against:
        print("\nAgainst AMICI (process CPU time, medians; ratio = AMICI / pbsens exp2; matched accuracy: the "
              f"fastest AMICI forward run at rtol = atol in {list(MATCHED_TOLS)} whose gradient error is at most "
              "exp2's):\n")
        print("| problem | pbsens exp2 llh + gradient | AMICI forward (rtol 1e-8, atol 1e-8) | ratio | "
              "AMICI forward at matched accuracy | ratio | AMICI adjoint (rtol 1e-8, atol 1e-8) | ratio |")
        print("|---|---|---|---|---|---|---|---|")
        for line in against:
            print(line)


if __name__ == "__main__":
    main()
