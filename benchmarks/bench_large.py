"""Large models: import (cold and warm), state-solve time and the exp2 sensitivity pass.

Usage (from the repository root)::

    python benchmarks/bench_large.py [--models salazar,lang,net50,...,net2000] [--repeats 3]
                                     [--backend auto] [--out benchmarks/results/bench_large.json]
                                     [--plot docs/img/large_import.png]

Models: ``salazar`` and ``lang`` (PEtab problems SalazarCavazos_MBoC2020 and
Lang_PLOSComputBiol2024, compiled through pbsens's PEtab loading,
:func:`pbsens.problems.petab.build_model`) and ``net<n>``: random sparse mass-action
networks of ``n`` species (:func:`pbsens.model.networks.random_mass_action`, seed 0).

For every model and repeat, one fresh process with an empty ``PBSENS_CACHE_DIR``
(cold: the model is derived and its tape or code generated) and one fresh process on
the filled cache (warm). Each process reports, wall clock and CPU time of the
process (the CPU time is robust to other load on a shared machine):

* ``read``: reading the PEtab tables (petab library) or generating the network;
* ``build``: building the model (SBML -> spec, derivation, tape/code, load);
* ``solve``: a state solve (LSODA, rtol 1e-6, atol 1e-9) over ``[0, t_end]`` (warm
  process only), and the number of right-hand side calls it made.

For the PEtab problems also the whole user-facing load, ``import pbsens.petab;
pbsens.petab.load(yaml)`` (tables, checks, linter, parameter maps, model) in a fresh process
on an empty cache (cold) and then on the filled one (warm: the problem cache, without the
petab library).

Then :func:`time_sensitivity_pass` times one exp2 sensitivity pass (``linalg="auto"``:
the sparse march from 60 states) on that trajectory's grid, in CPU seconds, for all
parameters and for a fixed subset of ``SUBSET`` = 10 (the generated networks have ``2n``
parameters, so the all-parameter pass grows at least as ``n^2``). Medians over ``--repeats``; a table, the fitted exponent of
cold build CPU time against the number of species of the networks, and a log-log
plot. Printed, not asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PETAB = os.path.join(os.path.dirname(ROOT), "shared", "petab")
PETAB_MODELS = {
    "salazar": os.path.join(PETAB, "SalazarCavazos_MBoC2020", "SalazarCavazos_MBoC2020.yaml"),
    "lang": os.path.join(PETAB, "Lang_PLOSComputBiol2024", "Lang_PLOSComputBiol2024.yaml"),
}
DEFAULT_MODELS = "salazar,lang,net50,net100,net200,net500,net1000,net2000"


SUBSET = 10   # parameters in the fixed-subset pass (the first ones of the model)


def time_sensitivity_pass(model, trajectory, params=None):
    """CPU seconds of one exp2 sensitivity pass (``linalg="auto"``) along the state solver's grid.

    ``params``: None (every parameter: ``S`` is ``n x p`` with ``p = 2n`` on the generated
    networks, so the pass is at least ``n^2`` per step) or a list of parameter indices (a
    fixed subset: the cost of the kernels themselves in ``n``). The kernels are compiled (and
    the model's sparse runner built) on the first three grid points first, outside the
    timing. CPU time of this process, robust to other load on a shared machine.
    """
    import time

    import pbsens
    t, x = trajectory.t, trajectory.x
    pbsens.sensitivities(model, (t[:3], x[:3]), method="exp2", p=trajectory.p, params=params)
    c0 = time.process_time()
    pbsens.sensitivities(model, (t, x), method="exp2", p=trajectory.p, t_eval=t[-1:], params=params)
    return time.process_time() - c0


_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, os.environ["BENCH_ROOT"])
w0, c0 = time.perf_counter(), time.process_time()
import numpy as np
name, backend, do_solve = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
backend = None if backend == "auto" else backend
out = {}
if name.startswith("net"):
    from pbsens.model.networks import random_mass_action
    from pbsens.model.library import model_from_spec
    spec = random_mass_action(int(name[3:]), seed=0)
    t_end = 10.0
    out["read_wall"], out["read_cpu"] = time.perf_counter() - w0, time.process_time() - c0
    w1, c1 = time.perf_counter(), time.process_time()
    model = model_from_spec(spec, backend=backend)
else:
    if backend:
        os.environ["PBSENS_MODEL_BACKEND"] = backend
    from pbsens.problems.petab import build_model, read_problem
    problem, files = read_problem(sys.argv[4])
    t_end = float(np.nanmax(problem.measurement_df["time"].to_numpy(dtype=float)))
    out["read_wall"], out["read_cpu"] = time.perf_counter() - w0, time.process_time() - c0
    w1, c1 = time.perf_counter(), time.process_time()
    model, _ = build_model(problem, files)
out["build_wall"], out["build_cpu"] = time.perf_counter() - w1, time.process_time() - c1
out["backend"], out["n_states"], out["n_params"] = model.backend, model.n_states, model.n_params
out["nnz_A"], out["nnz_B"] = int(len(model.jac_x_pattern[1])), int(len(model.jac_p_pattern[1]))
out["tape_kB"] = model.constants.nbytes / 1e3
out["process_wall"] = time.perf_counter() - w0
if do_solve:
    import pbsens
    sys.path.insert(0, os.path.join(os.environ["BENCH_ROOT"], "benchmarks"))
    from bench_large import SUBSET, time_sensitivity_pass
    w2, c2 = time.perf_counter(), time.process_time()
    try:
        tr = pbsens.solve_states(model, (0.0, t_end), rtol=1e-6, atol=1e-9)
        out["solve_wall"], out["solve_cpu"] = time.perf_counter() - w2, time.process_time() - c2
        out["t_end"], out["nfev"] = t_end, int(tr.stats.get("nfev", -1))
        out["grid"] = int(len(tr.t))
        out["sens_cpu"] = time_sensitivity_pass(model, tr)
        out["sens_subset_cpu"] = time_sensitivity_pass(model, tr, list(range(min(SUBSET, model.n_params))))
    except Exception as exc:   # reported, not fatal: the import timing stands on its own
        out["solve_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
print("BENCH " + json.dumps(out))
"""


_LOAD_CHILD = r"""
import json, sys, time, warnings
w0 = time.perf_counter()
import pbsens.petab
warnings.simplefilter("ignore")
problem = pbsens.petab.load(sys.argv[1])
print("BENCH " + json.dumps({"wall": time.perf_counter() - w0, "hit": problem._cache_key is not None,
                             "petab_imported": "petab" in sys.modules}))
"""


def _run_load(yaml, cache):
    """A fresh process's ``import pbsens.petab; pbsens.petab.load(yaml)``: wall seconds, problem-cache hit."""
    env = dict(os.environ, PBSENS_CACHE_DIR=cache, PYTHONWARNINGS="ignore")
    env.pop("PBSENS_MODEL_BACKEND", None)
    r = subprocess.run([sys.executable, "-c", _LOAD_CHILD, yaml], env=env, capture_output=True, text=True,
                       cwd=ROOT)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("BENCH ")]
    if r.returncode or not lines:
        raise RuntimeError(f"{yaml}: {r.stderr[-3000:]}")
    return json.loads(lines[-1][6:])


def _run(name, backend, cache, solve):
    env = dict(os.environ, PBSENS_CACHE_DIR=cache, BENCH_ROOT=ROOT, PYTHONWARNINGS="ignore")
    env.pop("PBSENS_MODEL_BACKEND", None)
    args = [sys.executable, "-c", _CHILD, name, backend, "1" if solve else "0", PETAB_MODELS.get(name, "")]
    r = subprocess.run(args, env=env, capture_output=True, text=True, cwd=ROOT)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("BENCH ")]
    if r.returncode or not lines:
        raise RuntimeError(f"{name}: {r.stderr[-3000:]}")
    return json.loads(lines[-1][6:])


def _median(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return float(np.median(vals)) if vals else None


def measure(name, backend, repeats):
    cold, warm = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="pbsens-bench-large-") as cache:
            cold.append(_run(name, backend, cache, solve=False))
            warm.append(_run(name, backend, cache, solve=True))
    row = {"model": name, **{k: cold[0][k] for k in ("backend", "n_states", "n_params", "nnz_A", "nnz_B",
                                                     "tape_kB")}}
    if name in PETAB_MODELS:     # the whole pbsens.petab.load, cold (empty cache) then warm, fresh processes
        loads = {"cold": [], "warm": []}
        for _ in range(repeats):
            with tempfile.TemporaryDirectory(prefix="pbsens-bench-load-") as cache:
                for tag in ("cold", "warm"):
                    loads[tag].append(_run_load(PETAB_MODELS[name], cache))
        for tag, runs in loads.items():
            row[f"{tag}_load_wall"] = _median(runs, "wall")
        row["warm_load_hit"] = all(r["hit"] and not r["petab_imported"] for r in loads["warm"])
    for tag, runs in (("cold", cold), ("warm", warm)):
        for k in ("read_wall", "read_cpu", "build_wall", "build_cpu", "process_wall"):
            row[f"{tag}_{k}"] = _median(runs, k)
    for k in ("solve_wall", "solve_cpu", "nfev", "t_end", "grid", "sens_cpu", "sens_subset_cpu"):
        row[k] = _median(warm, k)
    errs = [r["solve_error"] for r in warm if "solve_error" in r]
    if errs:
        row["solve_error"] = errs[0]
    return row


def _fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def table(rows):
    head = ("| model | backend | states | params | nnz A | cold build s (CPU) | warm build s (CPU) | "
            "read s (wall) | cold process s (wall) | warm process s (wall) | solve s (CPU) | f calls | "
            "grid points | exp2 pass s (CPU), all params | same, 10 params |")
    lines = [head, "|---" * (head.count("|") - 1) + "|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['backend']} | {r['n_states']} | {r['n_params']} | {r['nnz_A']} | "
                     f"{_fmt(r['cold_build_wall'])} ({_fmt(r['cold_build_cpu'])}) | "
                     f"{_fmt(r['warm_build_wall'])} ({_fmt(r['warm_build_cpu'])}) | {_fmt(r['warm_read_wall'])} | "
                     f"{_fmt(r['cold_process_wall'])} | {_fmt(r['warm_process_wall'])} | "
                     f"{_fmt(r.get('solve_cpu'))} | {_fmt(r.get('nfev'), '.0f')} | {_fmt(r.get('grid'), '.0f')} | "
                     f"{_fmt(r.get('sens_cpu'), '.3f')} | {_fmt(r.get('sens_subset_cpu'), '.3f')} |")
    loads = [r for r in rows if r.get("warm_load_wall") is not None]
    if loads:
        lines += ["", "| problem | pbsens.petab.load, cold process s (wall) | warm process s (wall) | "
                      "warm: from the problem cache, petab not imported |", "|---|---|---|---|"]
        lines += [f"| {r['model']} | {_fmt(r['cold_load_wall'])} | {_fmt(r['warm_load_wall'])} | "
                  f"{'yes' if r['warm_load_hit'] else 'no'} |" for r in loads]
    return "\n".join(lines)


def exponent(rows, key="cold_build_cpu", per_step=False, n_min=0):
    """Least-squares slope of log(key) against log(n_states) over the networks.

    ``per_step``: divide by the number of grid intervals first (the cost of one step, apart
    from how many steps the state solver took on the larger networks). ``n_min``: only the
    networks with at least this many states (the sensitivity pass's exponents are fitted on
    the sparse path alone, ``pbsens.sensitivity.sparse.SPARSE_MIN_STATES``; below it the pass is
    the dense march)."""
    pts = [(r["n_states"], r[key] / (r["grid"] - 1 if per_step else 1)) for r in rows
           if r["model"].startswith("net") and r.get(key) and r["n_states"] >= n_min]
    if len(pts) < 2:
        return None
    n, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(n, y, 1)[0])


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    nets = [r for r in rows if r["model"].startswith("net")]
    n = [r["n_states"] for r in nets]
    for key, label, style in (("cold_build_cpu", "cold import (CPU s)", "o-"),
                              ("cold_build_wall", "cold import (wall s)", "o--"),
                              ("warm_build_wall", "warm load (wall s)", "s-"),
                              ("solve_cpu", "state solve (CPU s)", "^-"),
                              ("sens_cpu", "exp2 pass, all params (CPU s)", "v-"),
                              ("sens_subset_cpu", f"exp2 pass, {SUBSET} params (CPU s)", "v--")):
        y = [r.get(key) for r in nets]
        if any(v is not None for v in y):
            ax.loglog(n, y, style, label=label)
    for r in rows:
        if not r["model"].startswith("net"):
            ax.loglog([r["n_states"]], [r["cold_build_cpu"]], "k*", ms=10)
            ax.annotate(r["model"], (r["n_states"], r["cold_build_cpu"]), textcoords="offset points",
                        xytext=(5, 5), fontsize=8)
    k = exponent(rows)
    ax.set_xlabel("number of states (random mass-action networks; PEtab models starred)")
    ax.set_ylabel("seconds")
    ax.set_title(f"Large models, tape backend: cold import CPU ~ n^{k:.2f}" if k is not None else "Large models")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default="auto", choices=("auto", "numba", "tape"))
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "bench_large.json"))
    ap.add_argument("--plot", default=os.path.join(ROOT, "docs", "img", "large_import.png"))
    args = ap.parse_args(argv)
    rows = []
    for name in args.models.split(","):
        row = measure(name, args.backend, args.repeats)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(table(rows))
    k = exponent(rows)
    if k is not None:
        print(f"fitted exponent of cold build CPU time vs states (networks): {k:.2f}")
    from pbsens.sensitivity.sparse import SPARSE_MIN_STATES
    ks = {}
    for key, what in (("sens_cpu", "all parameters"), ("sens_subset_cpu", f"{SUBSET} parameters")):
        for per_step in (False, True):
            k_s = exponent(rows, key, per_step, n_min=SPARSE_MIN_STATES)
            if k_s is not None:
                ks[f"exponent_{key}{'_per_step' if per_step else ''}"] = k_s
                print(f"fitted exponent of the exp2 sensitivity pass (CPU), {what}"
                      f"{', per grid interval' if per_step else ''}, vs states (networks from "
                      f"{SPARSE_MIN_STATES} states, the sparse path): {k_s:.2f}")
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    with open(args.out, "w") as fh:
        json.dump({"rows": rows, "exponent_cold_build_cpu": k, **ks, "repeats": args.repeats, "loadavg": load}, fh,
                  indent=1)
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
