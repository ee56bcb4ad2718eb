"""AMICI's forward sensitivities (CVODES) on Lang_PLOSComputBiol2024, the peer of pbsens's large-model pass.

Condition ``wt`` (the problem's only one), nominal parameters, 124 states, the 600 output times.
The problem is set up as ``benchmarks/bench_sparse_lang.py`` sets it up: the estimated log-scale
parameters with nominal value <= 0 are fixed (the nominal model is unchanged), leaving 291
estimated parameters, all of them model parameters of pbsens's model (the 124 ``ic_wt_*`` among
them). AMICI runs in its own Python through ``benchmarks/amici_bridge.py`` (mode ``petab-fs`` of
``benchmarks/amici_side.py``): the PEtab problem imported without conservation laws (all 124 states
integrated), the condition's parameters from AMICI's own PEtab mapping, on linear scale.

Per linear solver (AMICI's default for this model is KLU; dense is run too) and per rtol (atol =
``--atol-factor`` * rtol), it measures, medians over ``--repeats`` after one warm-up (a warm-up over
60 s is the one timed run):

* the state solve alone;
* forward sensitivities w.r.t. the 16 reference parameters (the columns of ``--reference``);
* forward sensitivities w.r.t. all 291 estimated parameters (pbsens's comparison is on 291 columns),
  with the linear solvers of ``--all-columns-with`` only (default KLU: with dense, one 16-column run
  takes minutes);

each as wall time and process CPU time of AMICI's ``run_simulation`` call, with CVODES's step count,
and ``E_k = ||S_k - S_ref,k||_F / ||S_ref,k||_F`` over the 16 reference columns at the 600 output
times (median and max over k >= 1; for the 291-column run, on its 16 reference columns). It also
checks that AMICI's parameters and initial state equal pbsens's ``p`` and ``x0`` of the condition,
and compares AMICI's states at the output times with a tight pbsens state solve (Rodas5P, rtol
``--x-rtol``). With ``--lock FILE`` every AMICI call and the pbsens state solve hold an exclusive
``flock`` on FILE (the same lock as ``flock FILE command``), only while they run.

    PBSENS_AMICI_PYTHON=/path/to/amici-venv/bin/python python -m benchmarks.amici_lang \\
        --reference REF.npz (bench_sparse_lang --reference) [--lock LOCKFILE] \\
        [--rtol 1e-4 1e-5 1e-6 1e-7 1e-8] [--linear-solver klu dense] [--repeats 3] \\
        [--out benchmarks/results/amici_lang.txt]
"""
import argparse
import contextlib
import fcntl
import json
import os
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from amici_bridge import add_amici_argument, reorder, run_amici  # noqa: E402

import pbsens  # noqa: E402
from pbsens.problems import conditions  # noqa: E402
from pbsens.problems.petab import read_problem  # noqa: E402
from pbsens.problems.problem import Problem  # noqa: E402

DEFAULT = "../shared/petab/Lang_PLOSComputBiol2024/Lang_PLOSComputBiol2024.yaml"
RESULTS = Path(__file__).resolve().parent / "results" / "amici_lang.txt"
# sundials' linear solver enum as AMICI reports it (Solver.get_linear_solver)
LINEAR_SOLVERS = {1: "dense", 2: "band", 3: "LAPACKDense", 4: "LAPACKBand", 5: "diag", 6: "SPGMR", 7: "SPBCG",
                  8: "SPTFQMR", 9: "KLU", 10: "SuperLUMT"}

# the AMICI side's output fields that are the same in every call
SETUP_FIELDS = ("t_eval", "state_ids", "amici_state_ids", "free_parameters", "fixed_parameters", "petab_targets")


@contextlib.contextmanager
def _locked(path):
    """An exclusive ``flock`` on ``path`` (none when ``path`` is empty) for the ``with`` block."""
    if not path:
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _errors(S, S_ref):
    """Median and max over k >= 1 of ||S_k - S_ref,k||_F / ||S_ref,k||_F."""
    D = S - S_ref
    E = np.sqrt((D ** 2).sum(axis=(1, 2)) / np.maximum((S_ref ** 2).sum(axis=(1, 2)), 1e-300))
    return float(np.median(E[1:])), float(E[1:].max())


def _x_diff(x, x_ref):
    """max over t, i of |x - x_ref| / max_t |x_ref,i| (states with x_ref = 0 throughout left out)."""
    scale = np.abs(x_ref).max(axis=0)
    keep = scale > 0
    return float((np.abs(x - x_ref)[:, keep] / scale[keep]).max())


def setup(yaml):
    """pbsens's model, the condition's (name, times, p, x0), the estimated parameters' names and the
    ids fixed before the import, as ``bench_sparse_lang`` sets them."""
    problem, files = read_problem(yaml)
    df = problem.parameter_df
    fix = df.index[(df["estimate"] == 1) & (df["parameterScale"] != "lin") & (df["nominalValue"] <= 0)]
    df.loc[fix, "estimate"] = 0
    pr = Problem.from_petab(problem, lint=False, files=files)
    m = pr.model
    name, times, p, x0, _, _ = next(conditions.problem_conditions(pr))
    est = set(df.index[df["estimate"] == 1])
    estimated = [nm for nm in m.param_names if nm in est]
    return m, (name, times, p, x0), estimated, list(fix)


def check_inputs(m, p, x0, res):
    """Largest relative differences between AMICI's parameter values / initial states and pbsens's."""
    names = {nm: j for j, nm in enumerate(m.param_names)}
    states = {nm: i for i, nm in enumerate(m.state_names)}
    dp, dx0, n_p, n_x = 0.0, 0.0, 0, 0
    for pid, v in {**res["fixed_parameters"], **res["free_parameters"]}.items():
        if pid in names:
            ref = p[names[pid]]
            dp = max(dp, abs(v - ref) / max(abs(ref), 1e-300) if ref else abs(v))
            n_p += 1
        elif pid.startswith("initial_") and pid.endswith("_sim") and pid[8:-4] in states:
            ref = x0[states[pid[8:-4]]]
            dx0 = max(dx0, abs(v - ref) / max(abs(ref), 1e-300) if ref else abs(v))
            n_x += 1
    run = next((r for r in res["runs"] if "x0" in r["states_only"]), None)
    dx0_run = None
    if run is not None:       # the initial state AMICI simulated from (its initial assignments)
        xa = reorder(np.asarray(run["states_only"]["x0"], float), res["state_ids"], m.state_names, 0, "state")
        dx0_run = float(np.max(np.where(x0 != 0, np.abs(xa - x0) / np.where(x0 != 0, np.abs(x0), 1.0), np.abs(xa))))
    return {"parameters_compared": n_p, "max_rel_diff_p": dp, "initial_parameters_compared": n_x,
            "max_rel_diff_initial_parameters": dx0, "max_rel_diff_x0_simulated": dx0_run}


def summarize(m, res, S_ref, x_ref):
    """One row per (linear solver, rtol) of the AMICI side's runs."""
    rows = []
    for r in res["runs"]:
        st = r["states_only"]
        row = {"linear_solver": r["linear_solver"],
               "linear_solver_used": LINEAR_SOLVERS.get(st["solver"].get("linear_solver"), "?"),
               "rtol": r["rtol"], "atol": r["atol"],
               "states": {k: st.get(k) for k in ("status", "wall_ms", "process_cpu_ms", "cpu_ms", "numsteps",
                                                   "repeats")}}
        if "x" in st:
            xa = reorder(st["x"], res["state_ids"], m.state_names, 1, "state")
            row["x_rel_diff"] = _x_diff(xa, x_ref)
        for label, e in r["sets"].items():
            out = {k: e.get(k) for k in ("status", "wall_ms", "process_cpu_ms", "cpu_ms", "numsteps", "repeats",
                                         "n_params", "num_err_test_fails", "num_non_lin_solv_conv_fails")}
            if e["status"] != "ok":
                out["messages"] = e.get("messages", [])[:2]
            elif "S" in e:
                S = reorder(e["S"], res["state_ids"], m.state_names, 1, "state")
                S = reorder(S, e["returned_ids"], res["ref_ids"], 2, "parameter")
                out["E_median"], out["E_max"] = _errors(S, S_ref)
            row[label] = out
        rows.append(row)
    return rows


def _cell(e, key="wall_ms"):
    if e is None:
        return "not run"
    rep = "" if e["repeats"] >= 3 else f" (n={e['repeats']})"
    if e["status"] != "ok":
        at = re.search(r"failed at t = ([-+.0-9eE]+)", " ".join(e.get("messages", [])))
        return f"failed{' at t=' + at.group(1) if at else ''} after {e[key] / 1e3:.2f}{rep}"
    return f"{e[key] / 1e3:.2f} ({e['process_cpu_ms'] / 1e3:.2f}){rep}"


def table(rows):
    head = ("| linear solver | rtol | atol | 16 cols s (CPU) | 291 cols s (CPU) | states only s (CPU) | "
            "steps 16 / 291 / states | median E (16) | max E (16) | median / max E (291 run) | x rel diff |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        a, b, s = r.get("ref16"), r.get("est"), r["states"]

        def steps(e):
            return str(e["numsteps"]) if e and e["status"] == "ok" else "-"

        def err(e, k):
            return f"{e[k]:.2e}" if e and k in e else "-"
        lines.append(f"| {r['linear_solver_used']} | {r['rtol']:g} | {r['atol']:g} | {_cell(a)} | {_cell(b)} | "
                     f"{_cell(s)} | {steps(a)} / {steps(b)} / {steps(s)} | {err(a, 'E_median')} | "
                     f"{err(a, 'E_max')} | {err(b, 'E_median')} / {err(b, 'E_max')} | "
                     f"{r.get('x_rel_diff', float('nan')):.1e} |")
    return "\n".join(lines)


def report(m, results, raws, S_ref, x_ref, p, x0, a, argv, final):
    """The table and the input check of the runs so far, printed (when ``final``) and written to ``a.out``."""
    first = results[0]
    inputs = check_inputs(m, p, x0, first)
    rows = [row for res in results for row in summarize(m, res, S_ref, x_ref)]
    text = table(rows)
    info = (f"AMICI {first['environment']['amici_version']}, model {first['model_name']} "
            f"(conservation laws {'on' if first['conservation_laws'] else 'off'}: {first['n_states_solver']} of "
            f"{first['n_states']} states integrated), default linear solver "
            f"{LINEAR_SOLVERS.get(first.get('default_linear_solver'), '?')}, "
            f"import {first['import_seconds']:.1f} s (compiled now: {first['model_compiled_now']}); "
            f"times: wall (process CPU) of run_simulation, medians over {a.repeats} after a warm-up "
            f"unless n= says fewer; E against {a.reference} on its 16 columns")
    check = ("inputs: " + ", ".join(f"{k} {v:.1e}" if isinstance(v, float) else f"{k} {v}"
                                    for k, v in inputs.items()))
    if final:
        print("\n" + info + "\n" + check + "\n\n" + text)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as fh:
        fh.write(f"# python -m benchmarks.amici_lang {' '.join(argv)}\n")
        fh.write(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f}"
                 f"{'' if final else ' (incomplete: runs still going)'}\n")
        fh.write(info + "\n" + check + "\n\n" + text + "\n\n# rows\n")
        for r in rows:
            fh.write(json.dumps(r) + "\n")
        fh.write("# raw AMICI side output (arrays left out; the set-up fields only in the first line)\n")
        for i, raw in enumerate(raws):
            fh.write(json.dumps(raw if i == 0 else {k: v for k, v in raw.items() if k not in SETUP_FIELDS}) + "\n")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("yaml", nargs="?", default=DEFAULT)
    ap.add_argument("--reference", required=True, help=".npz with S (600, 124, 16) and cols (bench_sparse_lang)")
    ap.add_argument("--rtol", type=float, nargs="+", default=[1e-4, 1e-5, 1e-6, 1e-7, 1e-8])
    ap.add_argument("--atol-factor", type=float, default=1e-2, help="atol = this * rtol")
    ap.add_argument("--linear-solver", nargs="+", default=["klu", "dense"], choices=["default", "klu", "dense"])
    ap.add_argument("--all-columns-with", nargs="*", default=["klu"], metavar="LS",
                    help="linear solvers with which the 291-column runs are made (default klu: with dense, one "
                         "16-column run takes minutes)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-steps", type=int, default=1_000_000)
    ap.add_argument("--x-rtol", type=float, default=1e-9, help="rtol of pbsens's state solve for the x check")
    ap.add_argument("--lock", default="", help="flock this file around each timed command")
    ap.add_argument("--out", default=str(RESULTS))
    add_amici_argument(ap)
    a = ap.parse_args(argv)
    argv_shown = list(argv if argv is not None else sys.argv[1:])
    warnings.simplefilter("ignore", RuntimeWarning)
    m, (cond, times, p, x0), estimated, fix = setup(a.yaml)
    ref = np.load(a.reference)
    S_ref, cols = ref["S"], [int(j) for j in ref["cols"]]
    ref_ids = [m.param_names[j] for j in cols]
    print(f"{m.name}: condition {cond}, n = {m.n_states}, np = {m.n_params} ({len(estimated)} estimated), "
          f"{times.size} output times; fixed before the import: {fix}", flush=True)
    with _locked(a.lock):
        t0 = time.perf_counter()
        tr = pbsens.solve_states(m, (0.0, float(times[-1])), t_eval=times, p=p, x0=x0, method="rodas5p",
                                 rtol=a.x_rtol, atol=a.x_rtol * 1e-2)
        x_ref = tr.x[np.isin(tr.t, times)]
        print(f"pbsens state solve (Rodas5P, rtol {a.x_rtol:g}) for the x check: "
              f"{time.perf_counter() - t0:.2f} s", flush=True)
    results, raws = [], []
    with tempfile.TemporaryDirectory(prefix="amici_lang_") as tmp:
        files = {"ts": times, "ref16": ref_ids, "est": estimated}
        for k, v in files.items():
            (Path(tmp) / f"{k}.txt").write_text("\n".join(f"{x:.17g}" if k == "ts" else x for x in v) + "\n")
        for ls in a.linear_solver:
            for rtol in a.rtol:
                est = ["--params", f"est={tmp}/est.txt"] if ls in a.all_columns_with else []
                args = ["petab-fs", a.yaml, "--condition", cond, "--params", f"ref16={tmp}/ref16.txt",
                        *est, "--return-params", f"{tmp}/ref16.txt",
                        "--no-conservation-laws", "--fix", *fix, "--t-eval-file", f"{tmp}/ts.txt",
                        "--linear-solver", ls, "--rtol", repr(rtol), "--atol", repr(rtol * a.atol_factor),
                        "--max-steps", str(a.max_steps), "--repeats", str(a.repeats)]
                raw = Path(tmp) / "raw.json"
                with _locked(a.lock):
                    res = run_amici(args, a.amici_python, raw_out=raw)
                if res is None:
                    return 1
                res["ref_ids"] = ref_ids
                raws.append(json.loads(raw.read_text()))
                results.append(res)
                report(m, results, raws, S_ref, x_ref, p, x0, a, argv_shown, final=False)
                for r in summarize(m, res, S_ref, x_ref):
                    print(f"{r['linear_solver_used']} rtol {r['rtol']:g}: states {_cell(r['states'])} s, "
                          f"16 cols {_cell(r['ref16'])} s, 291 cols {_cell(r.get('est'))} s; "
                          f"E {r['ref16'].get('E_median', float('nan')):.2e}; load {os.getloadavg()[0]:.1f}",
                          flush=True)
    out = report(m, results, raws, S_ref, x_ref, p, x0, a, argv_shown, final=True)
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
