"""A sensitivities call with the default BLAS environment vs ``OPENBLAS_NUM_THREADS=1``.

pbsens limits BLAS to one thread inside its public calls (:mod:`pbsens.system.threads`), so a
call in the default environment (OpenBLAS: one thread per core) should cost the same as
with ``OPENBLAS_NUM_THREADS=1``. A third run turns pbsens's limit off
(``PBSENS_BLAS_THREADS=0``) to show what it buys. Each environment is a fresh process
(the variable must be set before numpy loads OpenBLAS); within it, one state solve, then
the median over repeated ``sensitivities`` calls per method. Also the helper's own cost
per entry/exit, against ``threadpoolctl.threadpool_limits``.

    python benchmarks/bench_threads.py [--model PKA] [--repeats 50] [--t1 300] [--rounds 3] [--forward CaMKII]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CODE = """
import json, statistics, sys, time
import pbsens
from pbsens.system.threads import blas_single_thread, blas_thread_counts
model, repeats, t1 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
m = pbsens.load_model(model)
traj = pbsens.solve_states(m, (0.0, t1), rtol=1e-6, atol=1e-8)
out = {"blas_threads": blas_thread_counts(), "grid": len(traj.t)}
calls = {"exp": lambda: pbsens.sensitivities(m, traj, method="exp"),
         "exp2": lambda: pbsens.sensitivities(m, traj, method="exp2"),
         "pbsr": lambda: pbsens.sensitivities(m, traj, method="pbsr"),
         # the state solve (LSODA) inside the call, hence inside the BLAS limit
         "pbsr+solve": lambda: pbsens.sensitivities(m, t_span=(0.0, t1), method="pbsr")}
for name, call in calls.items():
    call()   # compile / warm up
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        ts.append(time.perf_counter() - t0)
    out[name] = statistics.median(ts)
# in one process, interleaved (robust to the machine's drifting load): the exp call with the
# limit set and restored per call, with pbsens's limit off, and with the limit held around
# the whole loop (nested calls: no per-call cost)
import pbsens.system.threads as T
def block(call, n=max(repeats // 2, 10)):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); call(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts)
inproc = {"per call": [], "off": [], "held": []}
for _ in range(5):
    T._limit = 1; inproc["per call"].append(block(calls["exp"]))
    T._limit = 0; inproc["off"].append(block(calls["exp"]))
    T._limit = 1
    with blas_single_thread():
        inproc["held"].append(block(calls["exp"]))
T._limit = None
out["inproc"] = {k: statistics.median(v) for k, v in inproc.items()}
def per_call(f, n=2000):
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        ts.append((time.perf_counter() - t0) / n)
    return statistics.median(ts)
def helper():
    with blas_single_thread():
        pass
out["helper"] = per_call(helper)
from threadpoolctl import threadpool_limits
def tpl():
    with threadpool_limits(1, user_api="blas"):
        pass
out["threadpool_limits"] = per_call(tpl, 50)
if len(sys.argv) > 4:   # forward sensitivities (BDF: scipy's LU solves, i.e. BLAS/LAPACK), plain vs limited
    fwd_model = pbsens.load_model(sys.argv[4])
    fwd = lambda: pbsens.forward_sensitivities(fwd_model, (0.0, 100.0))
    fwd()
    a, b = [], []
    for _ in range(max(repeats // 10, 3)):
        t0 = time.perf_counter(); fwd(); a.append(time.perf_counter() - t0)
        with blas_single_thread():
            t0 = time.perf_counter(); fwd(); b.append(time.perf_counter() - t0)
    out["forward"], out["forward_limited"] = statistics.median(a), statistics.median(b)
print(json.dumps(out))
"""

ENVS = (("default environment", {}),
        ("OPENBLAS_NUM_THREADS=1", {"OPENBLAS_NUM_THREADS": "1"}),
        ("default, pbsens limit off", {"PBSENS_BLAS_THREADS": "0"}))


def run(extra, args):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PBSENS_BLAS_THREADS")}
    env.update(extra)
    extra_args = [args.forward] if args.forward else []
    out = subprocess.run([sys.executable, "-c", CODE, args.model, str(args.repeats), str(args.t1)] + extra_args,
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="PKA")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--t1", type=float, default=300.0)
    ap.add_argument("--rounds", type=int, default=3,
                    help="processes per environment, interleaved (the machine's load drifts)")
    ap.add_argument("--forward", metavar="MODEL", default="",
                    help="also time forward_sensitivities(MODEL, (0, 100)) (BDF) with and without the limit")
    args = ap.parse_args()
    runs = {label: [] for label, _ in ENVS}
    for _ in range(args.rounds):
        for label, extra in ENVS:
            runs[label].append(run(extra, args))
    rows = [(label, {k: (statistics.median(r[k] for r in rs) if isinstance(rs[0][k], float) else rs[0][k])
                     for k in rs[0]}) for label, rs in runs.items()]
    base = rows[1][1]
    print(f"{args.model} on [0, {args.t1:g}], grid of {rows[0][1]['grid']} points; median of {args.repeats} "
          f"calls per method in each process, median over {args.rounds} interleaved processes per "
          f"environment; {os.cpu_count()} cores")
    for label, r in rows:
        cells = "  ".join(f"{m} {r[m] * 1e3:7.3f} ms ({r[m] / base[m]:4.2f}x)" for m in ("exp", "exp2", "pbsr", "pbsr+solve"))
        print(f"  {label:<26} BLAS threads {r['blas_threads']}: {cells}")
    if args.forward:
        for label, r in rows:
            print(f"  {label:<26} forward_sensitivities({args.forward}, (0, 100)): {r['forward']:.3f} s, inside "
                  f"blas_single_thread {r['forward_limited']:.3f} s ({r['forward_limited'] / r['forward']:.2f}x)")
    for label, r in rows:
        ip = r["inproc"]
        print(f"  {label:<26} in one process, interleaved, exp: limit per call {ip['per call'] * 1e3:.3f} ms, "
              f"limit off {ip['off'] * 1e3:.3f} ms, limit held around the loop {ip['held'] * 1e3:.3f} ms")
    r = rows[0][1]
    print(f"helper entry+exit in the default environment: {r['helper'] * 1e6:.1f} us "
          f"(threadpoolctl.threadpool_limits: {r['threadpool_limits'] * 1e6:.0f} us); "
          f"with OPENBLAS_NUM_THREADS=1: {base['helper'] * 1e6:.1f} us")


if __name__ == "__main__":
    main()
