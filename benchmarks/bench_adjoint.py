"""Post-hoc adjoint gradient against the forward march (issue #40). Not a test.

Two parts, medians of ``--repeats`` timings after one warm-up call, all in the same run (wall
and process CPU time: the machine is shared, so the CPU time is the one to compare):

* PEtab problems at their nominal point: ``--problems YAML ...`` (default Boehm) and/or
  ``--collection DIR`` (the benchmark collection's ``Benchmark-Models`` folder: every problem
  with at least ``--min-params`` estimated parameters in its parameter table, default 50, fewest
  first; ``--only NAME ...`` picks and orders them). Each problem runs in its own process
  (``--timeout`` s wall; a cold load longer than ``--load-limit`` s is given up). Estimated
  log-scale parameters whose nominal value is not positive (Lang's) are fixed at it, as in
  bench_sparse_lang. ``Problem.evaluate`` with ``method="exp2"`` (the default: midpoint
  correction) and ``"exp2-adjoint"`` (the same grids, transposed); their difference; each
  gradient's max-norm relative error against the reference ``method="fs"`` at rtol 1e-10, atol
  1e-12, computed in a child process capped at ``--ref-cpu-limit`` CPU seconds (default 1200:
  20 min; beyond it, ``fs`` at the defaults rtol 1e-8, atol 1e-10 under the same cap, and the
  record says so); the ratio of the adjoint's error to forward exp2's (issue #40: within 3x).
  A problem that fails prints its error and the run goes on. ``--json FILE``: the records,
  rewritten after every problem; ``--table FILE ...``: their markdown table (PERFORMANCE.md).
* ``--many``: models with many parameters: a random mass-action network
  (``pbsens.model.networks``) and the random linear system, one Rodas5P trajectory (rtol 1e-8)
  and, on it, the forward ``sensitivities(method="exp2")`` (default grid: midpoint correction)
  contracted with ``dJ/dx`` at 20 output times against ``adjoint_gradient`` (the same grid;
  their difference is printed too): the crossover in ``np``.

Run: ``python benchmarks/bench_adjoint.py [--repeats 5] [--problems A.yaml B.yaml] [--many]``;
the collection: ``python benchmarks/bench_adjoint.py --collection /path/Benchmark-Models --repeats 3
--json benchmarks/results/adjoint_collection.json``.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

# after PYTHONPATH (a tree chosen by the caller, e.g. before_after.py's "before" checkout), not before it
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pbsens
from pbsens.sensitivity.adjoint import adjoint_gradient

#: The PEtab benchmark collection's commit the ``--collection`` numbers were measured on.
COLLECTION_COMMIT = "4d2085084b289f6215a95475b1ee639fd7d42283"
BOEHM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "petab",
                     "Boehm_JProteomeRes2014", "Boehm_JProteomeRes2014.yaml")


def median_time(fn, repeats, warm=True):
    """``(median wall s, median process CPU s)`` of ``fn()`` after one warm-up call (``warm=False``:
    the caller made it)."""
    if warm:
        fn()                                # warm: compilation, caches
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def load_problem(yaml):
    """``pbsens.petab.load(yaml)``, with the estimated parameters whose nominal value is not finite on
    their scale (a PEtab nominal of 0 on a log scale: Lang's) fixed at it, as bench_sparse_lang does
    (the nominal model is unchanged). Returns ``(problem, names of the parameters fixed)``."""
    import pandas as pd

    from pbsens.problems.petab import read_problem
    from pbsens.problems.problem import Problem
    petab_problem, files = read_problem(yaml)
    df = petab_problem.parameter_df
    nominal = pd.to_numeric(df["nominalValue"], errors="coerce")
    bad = (df["estimate"] == 1) & (df["parameterScale"].astype(str) != "lin") & ~(nominal > 0)
    fixed = list(df.index[bad])
    if fixed:
        df.loc[df.index[bad], "estimate"] = 0
    return Problem.from_petab(petab_problem, lint=False, files=files), fixed


def estimated_count(yaml):
    """The number of estimated parameters in the problem's parameter table (no model import)."""
    import pandas as pd
    import yaml as _yaml
    with open(yaml) as fh:
        spec = _yaml.safe_load(fh)
    pf = spec.get("parameter_file")
    pf = pf[0] if isinstance(pf, list) else pf
    df = pd.read_csv(os.path.join(os.path.dirname(yaml), pf), sep="\t")
    return int((df["estimate"] == 1).sum())


def collection_problems(folder, min_params):
    """``(yaml, n estimated)`` of the collection's problems with at least ``min_params`` estimated
    parameters, fewest first; problems without a YAML (missing from the snapshot) are skipped."""
    found = []
    for d in sorted(os.listdir(folder)):
        y = os.path.join(folder, d, d + ".yaml")
        if not os.path.isfile(y):
            continue
        try:
            k = estimated_count(y)
        except Exception as exc:       # noqa: BLE001
            print(f"{d}: parameter table unreadable ({type(exc).__name__}: {exc})", flush=True)
            continue
        if k >= min_params:
            found.append((y, k))
    return sorted(found, key=lambda yk: yk[1])


def reference_gradient(yaml, out, rtol, atol, cpu_limit):
    """Child process: ``fs`` at ``rtol``, ``atol`` at the nominal point, written to ``out`` (.npz with
    the gradient and its process CPU time); the CPU time is capped at ``cpu_limit`` s (RLIMIT_CPU)."""
    import resource
    if cpu_limit:
        resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_limit), int(cpu_limit) + 5))
    pr, _ = load_problem(yaml)
    c0 = time.process_time()
    g = pr.evaluate(pr.x_nominal, method="fs", rtol=rtol, atol=atol).gradient
    np.savez(out, gradient=g, cpu=time.process_time() - c0)


def run_reference(yaml, rtol, atol, cpu_limit, wall_limit):
    """``(gradient, CPU s, note)`` of the ``fs`` reference in its own process, or ``(None, None, why)``."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ref.npz")
        cmd = [sys.executable, os.path.abspath(__file__), "--reference-only", yaml, out, "--ref-rtol", repr(rtol),
               "--ref-atol", repr(atol), "--ref-cpu-limit", repr(cpu_limit)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=wall_limit, check=False)
        except subprocess.TimeoutExpired:
            return None, None, f"fs rtol {rtol:g} atol {atol:g}: more than {wall_limit:.0f} s wall"
        if r.returncode != 0 or not os.path.isfile(out):
            why = "CPU limit" if r.returncode in (-24, -9) else (r.stderr.strip().splitlines() or ["?"])[-1][:200]
            return None, None, f"fs rtol {rtol:g} atol {atol:g}: {why} (more than {cpu_limit:.0f} s CPU?)" \
                if r.returncode in (-24, -9) else f"fs rtol {rtol:g} atol {atol:g}: failed: {why}"
        z = np.load(out)
        return z["gradient"].copy(), float(z["cpu"]), None


def score(rec, ref, ref_cpu):
    """Each gradient's max-norm relative error against ``ref`` and the adjoint/forward ratio, into ``rec``
    (whose ``reference`` names the method and tolerances)."""
    results = rec["methods"]
    grads = {k: np.asarray(v["gradient"]) for k, v in results.items() if "gradient" in v}
    rec["reference"]["cpu_s"] = ref_cpu
    scale = float(np.max(np.abs(ref)))
    rec["reference"]["grad_max_abs"] = scale
    for label, g in grads.items():
        results[label]["error"] = float(np.max(np.abs(g - ref)) / scale)
    print(f"  reference fs rtol {rec['reference']['rtol']:g}: {ref_cpu:.1f} s CPU; |grad|max {scale:.3g}; "
          + "; ".join(f"{k} error {results[k]['error']:.2e}" for k in grads), flush=True)
    if len(grads) == 2:
        e_f, e_a = results["exp2"]["error"], results["exp2-adjoint"]["error"]
        rec["error_ratio"] = e_a / e_f if e_f > 0 else None
        print(f"  adjoint error / forward exp2 error: {rec['error_ratio']:.3f}", flush=True)


def rescore(path, name, npz, rtol, atol, note):
    """``--rescore``: score problem ``name``'s record in the ``--json`` file ``path`` against a reference
    gradient computed apart (``--reference-only``'s .npz), and rewrite the file."""
    import json
    with open(path) as fh:
        out = json.load(fh)
    z = np.load(npz)
    for rec in out["records"]:
        if rec["problem"] == name:
            rec["reference"] = dict(method="fs", rtol=rtol, atol=atol)
            rec["reference_note"] = note
            score(rec, z["gradient"], float(z["cpu"]))
    with open(path, "w") as fh:
        json.dump(out, fh, indent=1, default=float)


def problem(yaml, repeats, ref_cpu_limit=1200.0, ref_wall_limit=3600.0, load_limit=900.0, save=lambda rec: None,
            reference=True, methods=("exp2", "exp2-adjoint"), single_above=float("inf")):
    """One PEtab problem at its nominal point: the record of the JSON (and printed lines); ``save(rec)``
    after every stage, so that a run stopped by its timeout keeps what it got."""
    import signal
    name = os.path.basename(yaml)[:-5]
    rec = dict(problem=name, yaml=os.path.relpath(yaml), loadavg_start=os.getloadavg()[0])

    def _alarm(*_):
        raise TimeoutError(f"pbsens.petab.load took more than {load_limit:.0f} s")
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(load_limit))
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        pr, fixed = load_problem(yaml)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    rec.update(load_wall_s=time.perf_counter() - t0, load_cpu_s=time.process_time() - c0,
               n_states=pr.model.n_states, n_model_params=pr.model.n_params, n_theta=pr.dim,
               fixed_nonfinite_nominal=fixed, n_conditions=len(pr.conditions))
    th = pr.x_nominal
    print(f"{name} (nx {pr.model.n_states}, model params {pr.model.n_params}, theta {pr.dim}, "
          f"conditions {len(pr.conditions)}; load {rec['load_wall_s']:.1f} s"
          + (f"; {len(fixed)} non-finite log-scale nominals fixed" if fixed else "") + ")", flush=True)
    save(rec)
    grads, results = {}, {}
    for label in methods:
        kw = {"method": label}
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            g = pr.evaluate(th, **kw).gradient
            first, first_wall = time.process_time() - c0, time.perf_counter() - t0
            reps = repeats if first < 60 else max(1, min(repeats, 2))   # the slow ones: fewer repeats
            if first > single_above:       # --single-above: the first call is the timing (no warm-up)
                reps, tw, tc = 0, first_wall, first
            else:
                tw, tc = median_time(lambda kw=kw: pr.evaluate(th, **kw), reps, warm=False)
        except Exception as exc:       # noqa: BLE001  (a benchmark: report and go on)
            msg = f"{type(exc).__name__}: {str(exc)[:300]}"
            print(f"  {label:14s} failed: {msg}", flush=True)
            results[label] = dict(error=msg)
            continue
        grads[label] = g
        results[label] = dict(wall_s=tw, cpu_s=tc, first_cpu_s=first, repeats=reps, gradient=g.tolist())
        print(f"  {label:14s} {tw:9.3f} s wall {tc:9.3f} s CPU "
              + (f"(median of {reps} after a warm-up)" if reps else "(one call, no warm-up)"), flush=True)
        rec["methods"] = results
        save(rec)
    rec["methods"] = results
    if "exp2" in grads and "exp2-adjoint" in grads:
        d = np.max(np.abs(grads["exp2"] - grads["exp2-adjoint"])) / np.max(np.abs(grads["exp2"]))
        rec["adjoint_vs_exp2"] = d
        print(f"  |g_adjoint - g_exp2|/|g_exp2| (max norm) {d:.2e}", flush=True)
    if not reference:                  # --skip-reference: scored later (--rescore)
        rec["reference"] = None
        rec["reference_note"] = "not run here (--skip-reference)"
        rec["loadavg_end"] = os.getloadavg()[0]
        save(rec)
        return rec
    ref, ref_cpu, note = run_reference(yaml, 1e-10, 1e-12, ref_cpu_limit, ref_wall_limit)
    rec["reference"] = dict(method="fs", rtol=1e-10, atol=1e-12)
    if ref is None:
        print(f"  reference {note}; fs at the defaults instead", flush=True)
        rec["reference_note"] = note
        ref, ref_cpu, note2 = run_reference(yaml, 1e-8, 1e-10, ref_cpu_limit, ref_wall_limit)
        rec["reference"] = dict(method="fs", rtol=1e-8, atol=1e-10)
        if ref is None:
            print(f"  reference {note2}: no errors", flush=True)
            rec["reference"] = None
            rec["reference_note"] += "; " + note2
    if ref is not None:
        score(rec, ref, ref_cpu)
    if "exp2" in results and "exp2-adjoint" in results and "cpu_s" in results["exp2-adjoint"] \
            and "cpu_s" in results["exp2"]:
        rec["cpu_ratio_forward_over_adjoint"] = results["exp2"]["cpu_s"] / results["exp2-adjoint"]["cpu_s"]
    rec["loadavg_end"] = os.getloadavg()[0]
    save(rec)
    return rec


def many_parameters(model, t_end, repeats):
    t_out = np.linspace(t_end / 20, t_end, 20)
    tr = pbsens.solve_states(model, (0.0, t_end), t_eval=t_out, method="rodas5p", rtol=1e-8, atol=1e-10,
                             dense_output=True)
    dJdx = np.random.default_rng(0).normal(size=(t_out.size, model.n_states))

    def forward():
        r = pbsens.sensitivities(model, tr, method="exp2", t_eval=t_out, linalg="dense")
        return np.einsum("ki,kij->j", dJdx, r.S)

    def adjoint():
        return adjoint_gradient(model, tr, None, t_out, dJdx, method="exp2", substeps=None)

    gf, ga = forward(), adjoint()
    diff = np.max(np.abs(gf - ga)) / np.max(np.abs(gf))
    (tf, cf), (ta, ca) = median_time(forward, repeats), median_time(adjoint, repeats)
    print(f"  {model.name:18s} nx {model.n_states:4d} np {model.n_params:4d} grid {tr.t.size:5d}   "
          f"forward {1e3 * tf:8.2f} ms ({1e3 * cf:8.2f} CPU)   adjoint {1e3 * ta:8.2f} ms ({1e3 * ca:8.2f} CPU)   "
          f"CPU ratio {cf / ca:5.2f}   |g_fwd - g_adj|/|g| {diff:.1e}", flush=True)


def run_collection(yamls, args):
    """Each problem in its own process (``--one``) with a timeout; the records, as they come, to
    ``args.json``."""
    import json
    import subprocess
    import tempfile
    out = dict(command="python benchmarks/bench_adjoint.py " + " ".join(sys.argv[1:]),
               date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), host_cpus=os.cpu_count(),
               loadavg_start=os.getloadavg()[0], collection_commit=COLLECTION_COMMIT, records=[])
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False,
                            cwd=os.path.dirname(os.path.abspath(__file__)))
    out["pbsens_commit"] = commit.stdout.strip()

    def dump():
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(out, fh, indent=1, default=float)

    for y in yamls:
        with tempfile.TemporaryDirectory() as tmp:
            part = os.path.join(tmp, "rec.json")
            cmd = [sys.executable, os.path.abspath(__file__), "--one", y, part, "--repeats", str(args.repeats),
                   *(["--skip-reference"] if args.skip_reference else []), "--methods", *args.methods,
                   "--single-above", repr(args.single_above),
                   "--ref-cpu-limit", repr(args.ref_cpu_limit), "--ref-wall-limit", repr(args.ref_wall_limit),
                   "--load-limit", repr(args.load_limit)]
            t0 = time.perf_counter()
            try:
                r = subprocess.run(cmd, timeout=args.timeout, check=False)
                status = None if r.returncode == 0 else f"exit status {r.returncode}"
            except subprocess.TimeoutExpired:
                status = f"timeout: more than {args.timeout:.0f} s wall"
            rec = dict(problem=os.path.basename(y)[:-5])
            if os.path.isfile(part):
                with open(part) as fh:
                    rec = json.load(fh)
            if status:
                rec["stopped"] = status
                print(f"{rec['problem']}: {status}", flush=True)
            rec["wall_s"] = time.perf_counter() - t0
        out["records"].append(rec)
        dump()
    out["loadavg_end"] = os.getloadavg()[0]
    dump()


def _num(v, fmt):
    return format(v, fmt) if isinstance(v, (int, float)) else "-"


def table(paths):
    """The markdown table of the ``--json`` files ``paths`` (docs/PERFORMANCE.md)."""
    import json
    rows = [("| problem | theta | states | conditions | exp2 error | adjoint error | ratio | adjoint vs exp2 | "
             "exp2 CPU s | adjoint CPU s | exp2/adjoint CPU | reference (its CPU s) | note |"),
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    recs = {}
    for path in paths:                 # a problem in several files: the last record with timings wins
        with open(path) as fh:
            for r in json.load(fh)["records"]:
                if r["problem"] not in recs or r.get("methods"):
                    recs[r["problem"]] = r
    for r in sorted(recs.values(), key=lambda r: r.get("n_theta", 0)):
        m = r.get("methods", {})
        f, a = m.get("exp2", {}), m.get("exp2-adjoint", {})
        ref = r.get("reference") or {}
        failed = [f"{k} failed: {v['error']}" for k, v in m.items() if isinstance(v.get("error"), str)]
        note = "; ".join(x for x in (r.get("stopped"), *failed, r.get("reference_note")) if x)
        cpu_ratio = f["cpu_s"] / a["cpu_s"] if "cpu_s" in f and "cpu_s" in a else None
        refs = f"fs {ref['rtol']:g} ({_num(ref.get('cpu_s'), '.3g')})" if ref else "-"
        rows.append(f"| {r['problem']} | {r.get('n_theta', '-')} | {r.get('n_states', '-')} | "
                    f"{r.get('n_conditions', '-')} | {_num(f.get('error'), '.2e')} | {_num(a.get('error'), '.2e')} | "
                    f"{_num(r.get('error_ratio'), '.3f')} | {_num(r.get('adjoint_vs_exp2'), '.1e')} | "
                    f"{_num(f.get('cpu_s'), '.3g')} | {_num(a.get('cpu_s'), '.3g')} | "
                    f"{_num(cpu_ratio, '.2f')} | {refs} | {note} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--problems", nargs="*", default=None)
    ap.add_argument("--collection", default=None, help="the collection's Benchmark-Models folder: every problem "
                    "with at least --min-params estimated parameters (fewest first), each in its own process")
    ap.add_argument("--min-params", type=int, default=50)
    ap.add_argument("--only", nargs="*", default=None, help="with --collection: these problems only (names), in this order")
    ap.add_argument("--json", default=None, help="write the records here (with --collection or --problems)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="wall seconds per problem (own process)")
    ap.add_argument("--load-limit", type=float, default=900.0, help="wall seconds for a problem's cold load")
    ap.add_argument("--ref-cpu-limit", type=float, default=1200.0,
                    help="CPU seconds of the fs reference at rtol 1e-10 (then: fs at the defaults, same limit)")
    ap.add_argument("--ref-wall-limit", type=float, default=3600.0)
    ap.add_argument("--many", action="store_true")
    ap.add_argument("--one", nargs=2, metavar=("YAML", "OUT_JSON"), help=argparse.SUPPRESS)
    ap.add_argument("--reference-only", nargs=2, metavar=("YAML", "OUT_NPZ"),
                    help="only the fs gradient at --ref-rtol, --ref-atol (nominal point) into OUT_NPZ")
    ap.add_argument("--ref-rtol", type=float, default=1e-10, help="with --reference-only or --rescore")
    ap.add_argument("--ref-atol", type=float, default=1e-12, help="with --reference-only or --rescore")
    ap.add_argument("--methods", nargs="+", default=["exp2", "exp2-adjoint"], help="in this order")
    ap.add_argument("--single-above", type=float, default=float("inf"),
                    help="a method whose first call takes more CPU seconds than this is timed by that call alone")
    ap.add_argument("--skip-reference", action="store_true", help="timings and gradients only (see --rescore)")
    ap.add_argument("--rescore", nargs=4, metavar=("JSON", "PROBLEM", "REF_NPZ", "NOTE"),
                    help="score PROBLEM's record in JSON against a --reference-only gradient (--ref-rtol, --ref-atol)")
    ap.add_argument("--table", nargs="+", metavar="JSON", help="print the markdown table of these --json files")
    args = ap.parse_args()
    if args.rescore:
        rescore(args.rescore[0], args.rescore[1], args.rescore[2], args.ref_rtol, args.ref_atol, args.rescore[3])
        return
    if args.table:
        print(table(args.table))
        return
    if args.reference_only:
        reference_gradient(*args.reference_only, args.ref_rtol, args.ref_atol, args.ref_cpu_limit)
        return
    if args.one:
        import json

        def save(rec):
            with open(args.one[1], "w") as fh:
                json.dump(rec, fh, indent=1, default=float)
        problem(args.one[0], args.repeats, args.ref_cpu_limit, args.ref_wall_limit, args.load_limit, save=save,
                reference=not args.skip_reference, methods=args.methods, single_above=args.single_above)
        return
    print(f"load average at start: {os.getloadavg()}", flush=True)
    yamls = list(args.problems or [])
    if args.collection:
        found = collection_problems(args.collection, args.min_params)
        listed = ", ".join(f"{os.path.basename(y)[:-5]} ({k})" for y, k in found)
        print(f"collection problems with >= {args.min_params} estimated parameters: {listed}", flush=True)
        if args.only:                  # in the order given
            by_name = {os.path.basename(y)[:-5]: y for y, _ in found}
            yamls += [by_name[n] for n in args.only if n in by_name]
        else:
            yamls += [y for y, _ in found]
    if not yamls and not args.many:
        yamls = [BOEHM]
    if yamls:
        run_collection(yamls, args)
    if args.many:
        from pbsens.model.library import model_from_spec
        from pbsens.model.networks import random_mass_action
        print("many parameters (exp2 default grid, Rodas5P rtol 1e-8, 20 outputs, dense linear algebra)")
        for n in (10, 20, 40):
            many_parameters(model_from_spec(random_mass_action(n, seed=0)), 10.0, args.repeats)
        for n in (10, 20, 50):
            many_parameters(pbsens.random_linear_model(n), 10.0, args.repeats)
    print(f"load average at end: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
