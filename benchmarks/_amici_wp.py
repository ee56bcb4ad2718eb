"""AMICI's forward sensitivities on a pbsens model: the work-precision curve (time vs error of S).

Used by ``benchmarks/work_precision.py`` (one AMICI curve per model beside the
pbsens curves) and runnable alone for AMICI's curve only::

    PYTHONPATH=. python benchmarks/_amici_wp.py --models PKA CaMKII \\
        --rtols 1e-4 1e-5 1e-6 1e-7 1e-8 1e-9 1e-10 --repeats 10 --amici-python PATH \\
        [--out-dir benchmarks/results]

The model is written as SBML with :func:`pbsens.to_sbml` and imported by AMICI
(``benchmarks/amici_side.py sbml``); AMICI's ``S`` is mapped to pbsens's state and
parameter order by id, its parameter values and ``S(t0)`` are checked against
the model's (``m.p``, ``m.initial_sensitivity(p)``), and its error
``E_k = ||S_k - S_ref_k||_F / ||S_ref_k||_F`` is taken against the same tight
reference as the pbsens curves (default ``forward_sensitivities(method="Radau",
rtol=1e-10, atol=1e-12)``). Three rows per tolerance: "AMICI FS (wall)", the
median wall time of AMICI's ``run_simulation`` call, "AMICI FS (process CPU)",
the process CPU time of that call (its wall time on an idle machine: AMICI runs
single-threaded here), and "AMICI FS (solver)", the solver CPU time AMICI reports
(``ReturnData.cpu_time``, the forward integration only).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from amici_bridge import add_amici_argument, reorder, run_amici  # noqa: E402

WALL, PROC, SOLVER = "AMICI FS (wall)", "AMICI FS (process CPU)", "AMICI FS (solver)"
STYLES = {WALL: "x--", PROC: "x:", SOLVER: "+-."}


def amici_work_precision(name, m, ts, ref, rtols, repeats, amici_python=None, atol_factor=0.1, raw_out=None,
                         lines=None):
    """Rows ``{"config", "rtol", "atol", "time", "E_med", "E_max", "grid", "status"}`` of AMICI's forward
    sensitivities of ``m`` at the output times ``ts`` (``atol = atol_factor * rtol``), or ``[]`` when AMICI
    is not installed. ``lines``: a list to append markdown table rows to (as work_precision.py prints)."""
    import pbsens
    rtols = [float(r) for r in rtols]
    with tempfile.TemporaryDirectory(prefix="pbsens_wp_") as tmp:
        sbml = Path(tmp) / f"{name}.xml"
        pbsens.to_sbml(m, sbml)
        tfile = Path(tmp) / "t_eval.txt"
        tfile.write_text("\n".join(repr(float(t)) for t in ts) + "\n")
        args = ["sbml", str(sbml), "--t-eval-file", str(tfile), "--repeats", str(repeats),
                "--rtol", *[repr(r) for r in rtols], "--atol", *[repr(atol_factor * r) for r in rtols]]
        res = run_amici(args, amici_python, raw_out=raw_out)
    if res is None:
        return []
    p_ids, x_ids = res["parameter_ids"], res["state_ids"]
    pv = dict(zip(p_ids, np.asarray(res["parameter_values"], dtype=float)))
    p_amici = np.array([pv.get(n, np.nan) for n in m.param_names])
    if not np.allclose(p_amici, m.p, rtol=1e-12, atol=0):
        bad = [n for n, a, b in zip(m.param_names, p_amici, m.p) if not np.isclose(a, b, rtol=1e-12, atol=0)]
        raise RuntimeError(f"{name}: AMICI's parameter values differ from the model's for {bad[:5]}")
    S0 = m.initial_sensitivity(m.p)
    rows = []
    for run in res["runs"]:
        rtol, atol = run["rtol"], run["atol"]
        if run.get("status") != "ok" or "S" not in run:
            for cfg in (WALL, PROC, SOLVER):
                rows.append({"config": cfg, "rtol": rtol, "atol": atol, "time": None, "E_med": None,
                             "E_max": None, "grid": "", "status": run.get("status_text", run.get("status"))})
            if lines is not None:
                lines.append(f"| {name} | {rtol:.0e} | AMICI FS | failed: {run.get('status_text')} | | | |")
            continue
        S = reorder(reorder(run["S"], x_ids, m.state_names, axis=1, what="state"),
                    p_ids, m.param_names, axis=2, what="parameter")
        x = reorder(run["x"], x_ids, m.state_names, axis=1, what="state")
        s0_err = float(np.max(np.abs(S[0] - S0))) if np.isclose(ts[0], 0.0) else None
        E = pbsens.relative_error(SimpleNamespace(t=np.asarray(ts, dtype=float), S=S, x=x), ref)
        common = {"rtol": rtol, "atol": atol, "E_med": float(np.median(E)), "E_max": float(E.max()),
                  "grid": run.get("numsteps", ""), "status": "ok", "S0_max_abs_err": s0_err,
                  "states_only": run.get("states_only")}
        rows.append({"config": WALL, "time": run["wall_ms"] / 1e3, **common})
        if run.get("process_cpu_ms") is not None:
            rows.append({"config": PROC, "time": run["process_cpu_ms"] / 1e3, **common})
        rows.append({"config": SOLVER, "time": run["cpu_ms"] / 1e3, **common})
        if lines is not None:
            for r in rows[-3 if run.get("process_cpu_ms") is not None else -2:]:
                lines.append(f"| {name} | {rtol:.0e} | {r['config']} | {r['time'] * 1e3:.2f} | {r['E_med']:.2e} "
                             f"| {r['E_max']:.2e} | {r['grid']} |")
                print(lines[-1], flush=True)
    return rows


def main(argv=None):
    import argparse
    import time

    import pbsens
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["PKA", "CaMKII"])
    ap.add_argument("--t-end", type=float, default=600.0)
    ap.add_argument("--n-out", type=int, default=201)
    ap.add_argument("--rtols", nargs="+", type=float, default=[1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--ref-method", default="Radau")
    ap.add_argument("--ref-rtol", type=float, default=1e-10)
    ap.add_argument("--ref-atol", type=float, default=1e-12)
    ap.add_argument("--out-dir", default=None, help="write amici_wp_<model>.json (rows + AMICI's raw output)")
    add_amici_argument(ap)
    args = ap.parse_args(argv)
    for name in args.models:
        m = pbsens.load_model(name)
        ts = np.linspace(0.0, args.t_end, args.n_out)
        t0 = time.perf_counter()
        ref = pbsens.forward_sensitivities(m, (0.0, args.t_end), t_eval=ts, method=args.ref_method,
                                           rtol=args.ref_rtol, atol=args.ref_atol)
        t_ref = time.perf_counter() - t0
        lines = []
        raw = None if args.out_dir is None else Path(args.out_dir) / f"amici_sbml_{name}.json"
        rows = amici_work_precision(name, m, ts, ref, args.rtols, args.repeats, args.amici_python,
                                    raw_out=raw, lines=lines)
        if not rows:
            return 1
        if args.out_dir is not None:
            out = Path(args.out_dir) / f"amici_wp_{name}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps({
                "model": name, "t_span": [0.0, args.t_end], "n_out": args.n_out, "atol": "rtol / 10",
                "reference": {"method": args.ref_method, "rtol": args.ref_rtol, "atol": args.ref_atol,
                              "seconds": t_ref},
                "E": "median / max over output times of ||S_k - S_ref_k||_F / ||S_ref_k||_F",
                "loadavg": list(os.getloadavg()), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
