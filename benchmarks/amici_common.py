"""Helpers shared by the AMICI side of the benchmarks: ``amici_side.py`` (modes ``petab``, ``sbml``)
and ``amici_side_fs.py`` (mode ``petab-fs``).

Run in AMICI's own Python, like those two: imports only AMICI, petab, numpy, libsbml, yaml and the
standard library (never pbsens), the third-party ones inside the functions that need them, so
that importing this module needs the standard library only. Error messages name
``amici_side.py``, the script the user runs.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CACHE = HERE / ".amici_cache"


#: the tolerances (rtol, atol) AMICI's own benchmark tests time the PEtab benchmark collection with
#: (AMICI's tests/benchmark_models/test_petab_benchmark.py, ``test_nominal_parameters_llh``;
#: ``pypesto_side.py`` uses them too). AMICI's Solver defaults are rtol 1e-8, atol 1e-16: the
#: absolute tolerance of 1e-16 makes CVODES resolve states near zero to 1e-8 relative accuracy,
#: which on Boehm_JProteomeRes2014 doubles the steps (888 vs 434) and costs 1.7-2.0x the time of
#: the forward-sensitivity gradient for the same gradient error against finite differences (4.9e-7
#: vs 4.5e-7), 3.2x on Bachmann_MSB2011, and makes the forward sensitivities fail on
#: Fujita_SciSignal2010 (docs/PERFORMANCE.md, "PEtab problems"; benchmarks/amici_paths.py).
BENCHMARK_TOLERANCES = (1e-8, 1e-8)
#: problems whose steady-state sensitivities AMICI's benchmark tests compute by integration only
INTEGRATION_ONLY = ("Brannmark_JBC2010", "Isensee_JCB2018")
#: ``--settings`` of ``amici_side.py petab``
SETTINGS = ("benchmark", "defaults")


def petab_settings(settings, problem_id, rtol=None, atol=None, steady_state="auto"):
    """The AMICI solver settings of one ``amici_side.py petab`` run, as a dict (pure Python).

    ``settings="benchmark"`` (the default of the timing runs): AMICI at its best as its own benchmark
    tests and pyPESTO run it: rtol and atol :data:`BENCHMARK_TOLERANCES`, steady-state sensitivities
    by integration for the problems in :data:`INTEGRATION_ONLY` (``steady_state="auto"``), and the
    ReturnData reduced to llh and gradient (``reporting="likelihood"``, pyPESTO's AmiciObjective
    for function values and gradients). ``settings="defaults"``: AMICI's Solver and Model defaults
    (rtol 1e-8, atol 1e-16, the model's steady-state sensitivity mode, full ReturnData; AMICI 1.1's
    model default is already integration only, so the mode differs only in older AMICI). An explicit
    ``rtol``/``atol`` wins over either; ``steady_state`` is ``"auto"``, ``"integration"`` or
    ``"default"``. Keys: ``rtol``, ``atol`` (None: AMICI's default), ``steady_state_integration``
    (bool), ``reporting`` (``"likelihood"`` or ``"full"``).
    """
    if settings not in SETTINGS:
        raise ValueError(f"settings must be one of {SETTINGS}, not {settings!r}")
    if steady_state not in ("auto", "integration", "default"):
        raise ValueError(f"steady_state must be 'auto', 'integration' or 'default', not {steady_state!r}")
    bench = settings == "benchmark"
    tol = BENCHMARK_TOLERANCES if bench else (None, None)
    ss = steady_state == "integration" or (
        steady_state == "auto" and bench and any(str(problem_id).startswith(p) for p in INTEGRATION_ONLY))
    return {"settings": settings, "rtol": tol[0] if rtol is None else float(rtol),
            "atol": tol[1] if atol is None else float(atol), "steady_state_integration": bool(ss),
            "reporting": "likelihood" if bench else "full"}


# --------------------------------------------------------------------------- helpers

def _amici():
    """The AMICI modules used here, or exit with a clear message."""
    # model compilation runs swig and cmake, which pip installs beside this interpreter; the
    # environment need not be activated, so put its bin folder first on PATH
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    try:
        import amici
        import amici.sim.sundials as sundials
    except ImportError as exc:
        sys.exit(f"amici_side.py: cannot import AMICI ({exc}); run this script with the Python "
                 f"of the environment AMICI is installed in (this is {sys.executable})")
    return amici, sundials


def _digest(paths, extra=""):
    h = hashlib.sha256(extra.encode())
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()[:10]


def _module_name(stem, digest):
    name = re.sub(r"\W", "_", stem, flags=re.ASCII)
    if not re.match(r"[A-Za-z]", name):
        name = "m_" + name
    return f"{name}_{digest}"


def _encode(arr):
    import numpy as np
    a = np.ascontiguousarray(arr, dtype="<f8")
    return {"shape": list(a.shape), "dtype": "<f8", "base64": base64.b64encode(a.tobytes()).decode("ascii")}


def _floats(values):
    """JSON-safe floats (NaN and inf as strings, which json cannot hold portably)."""
    out = []
    for v in values:
        v = float(v)
        out.append(v if v == v and abs(v) != float("inf") else repr(v))
    return out


def _num(v):
    v = float(v)
    return v if v == v and abs(v) != float("inf") else repr(v)


def _median(xs):
    return statistics.median(xs) if xs else None


def _status_text(sundials, status):
    try:
        return sundials.simulation_status_to_str(int(status))
    except Exception:  # older or newer AMICI without the helper: the number is enough
        return str(int(status))


def _messages(rdata, limit=6):
    """AMICI's log messages of one simulation (CVODES's error text among them), at most ``limit``."""
    out = []
    for m in list(getattr(rdata, "messages", None) or [])[:limit]:
        out.append(f"[{getattr(m, 'identifier', '')}] {getattr(m, 'message', m)}".strip())
    return out


def _solver_settings(solver):
    """The solver options that matter for the comparison, read back from the solver."""
    out = {}
    for key, getter in [("rtol", "get_relative_tolerance"), ("atol", "get_absolute_tolerance"),
                        ("rtol_fsa", "get_relative_tolerance_fsa"), ("atol_fsa", "get_absolute_tolerance_fsa"),
                        ("rtol_b", "get_relative_tolerance_b"), ("atol_b", "get_absolute_tolerance_b"),
                        ("max_steps", "get_max_steps"), ("sensi_error_control", "get_sens_err_con"),
                        ("linear_multistep_method", "get_linear_multistep_method"),
                        ("nonlinear_solver_iteration", "get_non_linear_solver_iteration"),
                        ("linear_solver", "get_linear_solver"), ("interpolation_type", "get_interpolation_type")]:
        fn = getattr(solver, getter, None)
        if fn is None:
            continue
        try:
            v = fn()
        except Exception:
            continue
        out[key] = _num(v) if isinstance(v, float) else (v if isinstance(v, (bool, int, str)) else str(v))
    return out


def _timed_runs(sundials, model, solver, repeats, long_s=None):
    """``run_simulation`` once as a warm-up, then ``repeats`` timed calls: lists of wall, process CPU
    and AMICI's CPU times (ms), the statuses of all calls, the last ReturnData. A warm-up of more
    than ``long_s`` seconds is the one timed call (warm-up effects are negligible at that length)."""
    out = {"wall": [], "proc": [], "cpu": [], "cpu_total": [], "statuses": [], "rdata": None}
    n, rep = repeats, 0
    while rep <= n:
        c0, t0 = time.process_time(), time.perf_counter()
        rdata = sundials.run_simulation(model, solver)
        t1, c1 = time.perf_counter(), time.process_time()
        out["statuses"].append(int(rdata.status))
        out["rdata"] = rdata
        if rep == 0 and long_s is not None and t1 - t0 > long_s:
            n, rep = 0, 1
        if rep:
            out["wall"].append(1e3 * (t1 - t0))
            out["proc"].append(1e3 * (c1 - c0))
            out["cpu"].append(float(rdata.cpu_time))
            out["cpu_total"].append(float(rdata.cpu_time_total))
        rep += 1
    return out


def _environment(amici):
    return {"amici_version": getattr(amici, "__version__", "?"), "python": platform.python_version(),
            "machine": platform.machine(), "cpu_count": os.cpu_count(),
            "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _shown_path(path):
    """``path`` relative to the working directory when inside it, else its file name only."""
    p = Path(path).resolve()
    try:
        return str(p.relative_to(Path.cwd().resolve()))
    except ValueError:
        return p.name


def _write(out, payload):
    text = json.dumps(payload, indent=1, allow_nan=False)
    if out == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n")


# --------------------------------------------------------------------------- models and ids

def _import_petab(petab_v1, yaml_path, cache_dir, fix=(), conservation_laws=True):
    """(petab problem, AMICI model, module name, compiled_now) with the compiled model cached on disk.

    ``fix``: parameter ids set to ``estimate = 0`` before the import (AMICI makes them constants);
    ``conservation_laws=False``: no conservation-law reduction (all states are integrated).
    Both are part of the cache key.
    """
    amici, _ = _amici()
    from amici.importers.petab.v1 import import_petab_problem
    problem = petab_v1.Problem.from_yaml(str(yaml_path))
    unknown = sorted(set(fix) - set(problem.parameter_df.index))
    if unknown:
        sys.exit(f"amici_side.py: --fix {unknown}: not in the parameter table")
    if fix:
        problem.parameter_df.loc[list(fix), "estimate"] = 0
    variant = ("|fix=" + ",".join(sorted(fix)) if fix else "") + ("" if conservation_laws else "|no-cl")
    # the compiled model depends on the SBML model and the observable/noise formulas;
    # nominal values and conditions are passed at run time
    base = Path(yaml_path).resolve().parent
    import yaml as _yaml
    spec = _yaml.safe_load(Path(yaml_path).read_text())
    files = []
    for prob in spec.get("problems", []):
        for key in ("sbml_files", "observable_files", "parameter_file", "condition_files"):
            v = prob.get(key, spec.get(key))
            for f in ([v] if isinstance(v, str) else (v or [])):
                files.append(base / f)
    if not files:
        files = [Path(yaml_path)]
    name = _module_name(problem.model.model_id or Path(yaml_path).stem,
                        _digest(files, getattr(amici, "__version__", "") + variant))
    kwargs = {} if conservation_laws else {"compute_conservation_laws": False}
    out_dir = Path(cache_dir) / name
    compiled = False
    t0 = time.perf_counter()
    try:
        model = import_petab_problem(problem, output_dir=out_dir, model_name=name, compile_=False, **kwargs)
    except Exception:
        if out_dir.exists():
            shutil.rmtree(out_dir)
        model = import_petab_problem(problem, output_dir=out_dir, model_name=name, compile_=True, **kwargs)
        compiled = True
    return problem, model, name, compiled, time.perf_counter() - t0


def _quiet_amici_logs():
    """AMICI's loggers at WARNING: model import can leave them at DEBUG, and formatting the debug
    messages of the parameter mapping on every simulate_petab call would be timed as AMICI's cost."""
    import logging
    for name in list(logging.root.manager.loggerDict):
        if name == "amici" or name.startswith("amici."):
            logging.getLogger(name).setLevel(logging.WARNING)


def _to_sbml_ids(amici_ids, path):
    """AMICI's ids mapped back to the SBML ids they come from (``path``: an SBML file or a libsbml Model).

    AMICI renames SBML ids that clash with its own symbols (``k`` becomes ``amici_k``);
    the caller maps ``S`` by SBML id, so undo that renaming where it is unambiguous.
    """
    import libsbml
    m = path if isinstance(path, libsbml.Model) else libsbml.readSBMLFromFile(str(path)).getModel()
    sbml = {m.getSpecies(i).getId() for i in range(m.getNumSpecies())} | \
           {m.getParameter(i).getId() for i in range(m.getNumParameters())}
    out = []
    for i in amici_ids:
        if i not in sbml and i.startswith("amici_") and i[len("amici_"):] in sbml \
                and i[len("amici_"):] not in amici_ids:
            i = i[len("amici_"):]
        out.append(i)
    return out


def _pairs(rtols, atols):
    if len(atols) == 1:
        atols = atols * len(rtols)
    if len(rtols) == 1:
        rtols = rtols * len(atols)
    if len(rtols) != len(atols):
        sys.exit(f"amici_side.py: --rtol has {len(rtols)} values and --atol {len(atols)}; give one atol "
                 "or as many as rtols")
    return list(zip(rtols, atols))
