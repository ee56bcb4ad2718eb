"""Work-precision on PEtab problems: time of llh + gradient against the gradient's error.

The PEtab counterpart of ``work_precision.py`` (issue 19 item 5, Boehm and Fujita): for
each problem and rtol in {1e-3, ..., 1e-9} (atol = rtol / 100, the Problem's default
ratio), the median CPU time of ``Problem.evaluate(theta, method=..., solver=..., rtol=...,
atol=...)`` (every condition: state solve, sensitivities at the measurement times, llh,
gradient and FIM) against the gradient's error, for

    rodas5p + exp2    pbsens's compiled Rodas5P and the exp2 march on its grid, the intervals
                      longer than a quarter of their accepted step marched with the midpoint
                      correction (substeps=4, midpoint on: METHOD.md section 14)
    rodas5p + exp2 m1 the march on the solver's grid without the correction (substeps=1)
    LSODA + exp2      scipy's LSODA and the exp2 march on its grid
    rodas5p + pbsr2
    FS rodas5p        forward sensitivities on the compiled Rodas5P (augmented system)

    AMICI FS          AMICI's forward sensitivities (CVODES BDF) on the same PEtab problem at the
                      same rtol and atol, when AMICI is set up (``--amici-python PATH`` or
                      ``$PBSENS_AMICI_PYTHON``; docs/PERFORMANCE.md, "AMICI side by side"): two
                      curves, the solver CPU time AMICI reports (summed over conditions) and the
                      process CPU time of its ``run_simulations`` call. AMICI's times are taken at
                      the nominal parameters (``amici_side.py petab``, its ``--settings benchmark``
                      apart from the tolerances: likelihood-only ReturnData, steady-state
                      sensitivities by integration for Brannmark), its gradient at ``theta``.

The gradient is ``S`` at every measurement time of every condition contracted with the
residuals, so its error sums the error of ``S`` the way an optimiser or sampler sees it.
Error: ``max_i |g_i - g_ref_i| / max_i |g_ref_i|`` against forward sensitivities on
Rodas5P at rtol 1e-12, atol 1e-14; the reference is cross-checked by forward
sensitivities on scipy's Radau at the same tolerances (the difference is printed; it
bounds the smallest error this benchmark can resolve). Parameters: nominal shifted by
+-0.1 on the parameter scale (at the optimum the gradient is a sum of cancelling terms),
as in ``bench_petab.py``. Timing: one warm-up call per configuration, then ``--repeats``
rounds in which every configuration is called once (interleaved), CPU time of this
process. A configuration that fails at a tolerance is reported as failed, not dropped.

Writes one log-log plot per problem to ``docs/img/wp_<problem>.png`` (``--plot-dir``)
and prints a markdown table.

    python benchmarks/work_precision_petab.py [--repeats 5] [--problems Boehm_JProteomeRes2014 ...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import statistics
import time
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from amici_bridge import add_amici_argument, run_amici  # noqa: E402  (AMICI's curves, optional)

DATA = ROOT / "tests" / "data" / "petab"
PROBLEMS = ["Boehm_JProteomeRes2014", "Fujita_SciSignal2010"]
RTOLS = [1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9]
#: (label, method, options)
CONFIGS = [("rodas5p + exp2", "exp2", dict(solver="rodas5p", substeps=4)),
           ("rodas5p + exp2 m1", "exp2", dict(solver="rodas5p", substeps=1)),
           ("LSODA + exp2", "exp2", dict(solver="LSODA")),
           ("rodas5p + pbsr2", "pbsr2", dict(solver="rodas5p")),
           ("FS rodas5p", "fs", dict(solver="rodas5p")),
           ("rodas5p + exp2 adjoint", "exp2-adjoint", dict(solver="rodas5p"))]
REFERENCE = dict(method="fs", solver="rodas5p", rtol=1e-12, atol=1e-14)
CHECK = dict(method="fs", solver="Radau", rtol=1e-12, atol=1e-14)
CHECK_EXP2 = dict(method="exp2", solver="rodas5p", rtol=1e-11, atol=1e-13, substeps=8, midpoint=False)
STYLES = {"rodas5p + exp2": "s-", "rodas5p + exp2 m1": "s:", "LSODA + exp2": "o-", "rodas5p + pbsr2": "^-",
          "FS rodas5p": "d--", "rodas5p + exp2 adjoint": "v-", "AMICI FS (solver)": "x-",
          "AMICI FS (process CPU)": "x--", "AMICI ASA (solver)": "+-", "AMICI ASA (process CPU)": "+--"}
AMICI_FS = ("AMICI FS (solver)", "AMICI FS (process CPU)")
AMICI_ASA = ("AMICI ASA (solver)", "AMICI ASA (process CPU)")
AMICI_CONFIGS = AMICI_FS + AMICI_ASA


def amici_point(yaml_path, theta, rtol, repeats, amici_python, modes=("forward", "adjoint"), atol=None):
    """``{label: (seconds or None, gradient or None, message)}`` for AMICI's forward sensitivities
    (and adjoint, when in ``modes``) at one tolerance, or ``None`` when AMICI is not set up."""
    with tempfile.TemporaryDirectory() as tmp:
        tf = Path(tmp) / "theta.json"
        tf.write_text(json.dumps({k: float(v) for k, v in theta.items()}))
        res = run_amici(["petab", str(yaml_path), "--repeats", str(repeats), "--theta-file", str(tf),
                         "--rtol", repr(rtol), "--atol", repr(rtol / 100 if atol is None else atol),
                         "--modes", *modes], amici_python, quiet=True)
    if res is None:
        return None
    if list(res.get("estimated_parameter_ids", [])) != list(theta):
        raise RuntimeError(f"AMICI's estimated parameters {res.get('estimated_parameter_ids')} are not "
                           f"pbsens's {list(theta)} (gradient entries would not match)")
    out = {}
    for mode, labels in (("forward", AMICI_FS), ("adjoint", AMICI_ASA)):
        if mode not in modes:
            continue
        r = res["runs"].get(f"llh+grad {mode}", {})
        at = r.get("at_theta") or {}
        g = at.get("gradient")
        if r.get("status") != "ok" or g is None:
            bad, where = (r, "at the nominal parameters") if r.get("status") != "ok" else (at, "at theta")
            first = (bad.get("failures") or [{}])[0]
            msg = bad.get("error") or f"{first.get('status_text', bad.get('status'))} {where}"
            out.update({k: (None, None, msg[:80]) for k in labels})
            continue
        g = np.asarray(g, dtype=float)
        out.update({labels[0]: (r["cpu_ms"] / 1e3, g, ""), labels[1]: (r["process_cpu_ms"] / 1e3, g, "")})
    return out


def gradient_error(g, g_ref):
    """Max-norm error of ``g`` relative to the largest entry of ``g_ref``."""
    return float(np.max(np.abs(g - g_ref)) / np.max(np.abs(g_ref)))


def measure(problem, theta, rtol, repeats, configs=CONFIGS):
    """``{label: (median CPU seconds or None, gradient or None, message)}`` at one tolerance."""
    calls, out = {}, {}
    for label, method, options in configs:
        opts = dict(method=method, rtol=rtol, atol=rtol / 100, **options)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = problem.evaluate(theta, **opts)
            if not np.all(np.isfinite(r.gradient)):
                raise ValueError("non-finite gradient")
            calls[label] = (lambda opts=opts: problem.evaluate(theta, **opts), r.gradient)
        except Exception as exc:  # noqa: BLE001 - a failing configuration is a result of the benchmark
            out[label] = (None, None, f"{type(exc).__name__}: {str(exc)[:80]}")
    times = {k: [] for k in calls}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(repeats):
            for label, (fn, _) in calls.items():
                c0 = time.process_time()
                fn()
                times[label].append(time.process_time() - c0)
    for label, (_, g) in calls.items():
        out[label] = (statistics.median(times[label]), g, "")
    return out


def plot(name, rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.6, 4.6))
    for label, style in STYLES.items():
        pts = [(r["error"], r["cpu"]) for r in rows if r["config"] == label and r["cpu"] is not None]
        if pts:
            e, t = zip(*pts)
            ax.loglog(np.maximum(e, 1e-16), np.array(t) * 1e3, style, label=label)
    ax.set_xlabel("relative error of the llh gradient (vs the reference)")
    ax.set_ylabel("CPU time of llh + gradient [ms]")
    rt = [r["rtol"] for r in rows]
    ax.set_title(f"{name.split('_')[0]}: work-precision, rtol {max(rt):.0e} ... {min(rt):.0e} (atol = rtol/100)",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def problem_yaml(name, collection):
    """The YAML of ``name``: the copy in tests/data, else the collection's folder."""
    local = DATA / name / f"{name}.yaml"
    if local.exists() or not collection:
        return local
    return Path(collection) / name / f"{name}.yaml"


def reference_gradient(problem, yaml_path, theta, kind, amici_python):
    """(g_ref, g_check, text): the reference gradient and an independent check of it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "fs":
            g_ref = problem.evaluate(theta, **REFERENCE).gradient
            g_chk = problem.evaluate(theta, **CHECK).gradient
            return g_ref, g_chk, "FS Rodas5P vs FS Radau (both rtol 1e-12)"
        am = amici_point(yaml_path, dict(zip(problem.parameter_ids, theta)), 1e-12, 1, amici_python,
                         modes=("forward",), atol=1e-16)
        if am is None or am[AMICI_FS[0]][1] is None:
            raise SystemExit(f"--reference amici: AMICI's tight forward gradient failed: {am}")
        g_ref = am[AMICI_FS[0]][1]
        g_chk = problem.evaluate(theta, **CHECK_EXP2).gradient
    return g_ref, g_chk, "AMICI FS (rtol 1e-12, atol 1e-16) vs pbsens exp2 (Rodas5P rtol 1e-11, 8 sub-steps)"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--problems", nargs="+", default=PROBLEMS)
    ap.add_argument("--collection", default=os.environ.get("PBSENS_PETAB_COLLECTION"),
                    help="the collection's Benchmark-Models folder, for problems not in tests/data")
    ap.add_argument("--rtols", nargs="+", type=float, default=RTOLS)
    ap.add_argument("--configs", nargs="+", default=None, metavar="LABEL",
                    help="pbsens configurations to run (labels as in the table; default all)")
    ap.add_argument("--amici-modes", nargs="+", choices=["forward", "adjoint"], default=["forward", "adjoint"])
    ap.add_argument("--amici-atol", type=float, default=None,
                    help="AMICI's atol at every rtol (default rtol/100, as pbsens's; AMICI's own default is 1e-16)")
    ap.add_argument("--reference", choices=["fs", "amici"], default="fs",
                    help="fs: pbsens FS Rodas5P at rtol 1e-12 (checked by FS Radau); amici: AMICI FS at rtol "
                         "1e-12, atol 1e-16 (checked by a tight exp2), for problems where the tight FS is too slow")
    ap.add_argument("--json", default=None, help="write every point here (one file; problems keyed by name)")
    ap.add_argument("--plot-dir", default=str(ROOT / "docs" / "img"), help="'' for no plots")
    add_amici_argument(ap)
    args = ap.parse_args(argv)
    import pbsens.petab as pbpetab
    configs = CONFIGS if args.configs is None else [c for c in CONFIGS if c[0] in args.configs]
    if args.configs is not None and len(configs) != len(args.configs):
        ap.error(f"--configs: unknown label(s); known: {[c[0] for c in CONFIGS]}")
    print(f"load average {os.getloadavg()[0]:.2f}; {args.repeats} interleaved rounds per tolerance, CPU time")
    from amici_bridge import amici_python
    am_labels = [k for m, ks in (("forward", AMICI_FS), ("adjoint", AMICI_ASA)) if m in args.amici_modes for k in ks]
    labels = [c[0] for c in configs] + (am_labels if amici_python(args.amici_python) else [])
    lines = ["| problem | rtol | " + " | ".join(f"{k}: ms, error" for k in labels) + " |",
             "|---" * (2 + len(labels)) + "|"]
    record = {}
    for name in args.problems:
        yaml_path = problem_yaml(name, args.collection)
        problem = pbpetab.load(yaml_path)
        theta = problem.x_nominal + 0.1 * np.where(np.arange(problem.dim) % 2, 1.0, -1.0)
        g_ref, g_chk, what = reference_gradient(problem, yaml_path, theta, args.reference, args.amici_python)
        print(f"\n{name}: {problem.dim} estimated parameters; reference {what}: "
              f"{gradient_error(g_chk, g_ref):.1e}", flush=True)
        rows = []
        record[name] = dict(reference=what, reference_check=gradient_error(g_chk, g_ref), rows=rows,
                            load_start=os.getloadavg()[0])
        for rtol in args.rtols:
            res = measure(problem, theta, rtol, args.repeats, configs)
            am = amici_point(yaml_path, dict(zip(problem.parameter_ids, theta)), rtol, args.repeats,
                             args.amici_python, modes=tuple(args.amici_modes), atol=args.amici_atol)
            if am is not None:
                res.update(am)
            cells = []
            for label in labels:
                cpu, g, msg = res[label]
                err = gradient_error(g, g_ref) if g is not None else None
                rows.append(dict(config=label, rtol=rtol, cpu=cpu, error=err, failed=msg))
                cells.append(f"{1e3 * cpu:.2f}, {err:.1e}" if cpu is not None else f"failed ({msg})")
            line = f"| {name.split('_')[0]} | {rtol:.0e} | " + " | ".join(cells) + " |"
            lines.append(line)
            print(line, flush=True)
            if args.json:
                record[name]["load_end"] = os.getloadavg()[0]
                Path(args.json).write_text(json.dumps(record, indent=1))
        if args.plot_dir:
            # a missing folder is made here: the measurements of the next problems must not be lost to it
            os.makedirs(args.plot_dir, exist_ok=True)
            plot(name, rows, os.path.join(args.plot_dir, f"wp_{name.split('_')[0]}.png"))
    print("\n" + "\n".join(lines))
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
