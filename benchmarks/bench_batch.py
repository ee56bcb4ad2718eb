"""Batches of llh + gradient on Boehm: 1 vs 2 workers, local processes and dask.

``Problem.evaluate_many`` over 64 parameter vectors (nominal + N(0, 0.05^2) on
the parameter scale), ``exp2``, llh + gradient + FIM. Timed, each as the median
of ``--repeats`` runs after one warm-up run (workers started, problem loaded):

* ``serial``: one by one in this process (``n_workers=1``);
* ``processes-1`` / ``processes-2``: a pool of 1 / 2 spawned worker processes;
* ``dask-1`` / ``dask-2``: a ``distributed.LocalCluster`` of 1 / 2 single-threaded
  worker processes.

The speed-up is ``serial / processes-2`` and ``dask-1 / dask-2`` (same run).
Also measured once: a worker's first-call time (start, import, load the
problem with its compiled model from pbsens's on-disk cache, first evaluation)
against the same in a fresh process with an empty cache directory
(``PBSENS_CACHE_DIR``), where the model is generated and compiled again.

Run from the repository root::

    python -m benchmarks.bench_batch [--repeats 5] [--n 64] [--chunk-size K]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BOEHM = ROOT / "tests" / "data" / "petab" / "Boehm_JProteomeRes2014" / "Boehm_JProteomeRes2014.yaml"

_FIRST_CALL = """
import time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import pbsens.petab as pp
pr = pp.load({path!r}, lint=False)
t1 = time.perf_counter()
pr.evaluate()
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def first_call(cache_dir=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if cache_dir is not None:
        env["PBSENS_CACHE_DIR"] = cache_dir
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _FIRST_CALL.format(path=str(BOEHM))], env=env, cwd=str(ROOT),
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1]), time.perf_counter() - t


def _timed_item(context, theta):
    """A worker task: one evaluation, with its wall and CPU seconds and the worker's pid.

    Tells apart where a speed-up below 2 comes from: the task seconds summed over
    workers against ``workers x wall`` is the share lost to scheduling, transfer and
    idle workers (chunking, warm-up); CPU / wall seconds inside the task is the share
    of a core the worker got (below 1 on a loaded machine).
    """
    from pbsens import parallel
    t, c = time.perf_counter(), time.process_time()
    r = parallel._evaluate_item(context, theta)
    return r.llh, time.perf_counter() - t, time.process_time() - c, os.getpid(), \
        parallel.worker_load_time("problem", context[0])


def _empty_item(context, theta):
    """A worker task that does nothing: times dask's scheduling and transfer alone."""
    return None


def _report(name, wall, out, n_workers):
    busy = sum(o[1] for o in out)
    cpu = sum(o[2] for o in out)
    per = {}
    for o in out:
        per[o[3]] = per.get(o[3], 0.0) + o[1]
    loads = sorted({round(o[4], 2) for o in out if o[4] is not None})
    print(f"  {name:<12s} wall {wall:7.3f} s, task seconds {busy:7.3f} (per worker "
          f"{', '.join(f'{v:.2f}' for v in per.values())}), busy share {busy / (n_workers * wall):5.1%}, "
          f"CPU share in tasks {cpu / busy:5.1%}, problem load per worker (once, untimed) {loads} s")
    return busy / (n_workers * wall)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--no-first-call", action="store_true")
    ap.add_argument("--chunk-size", type=int, default=None, help="items per task (default: the library's)")
    args = ap.parse_args(argv)
    import warnings
    warnings.simplefilter("ignore")
    import pbsens.petab as pp
    from pbsens import parallel
    pr = pp.load(BOEHM)
    rng = np.random.default_rng(0)
    thetas = pr.x_nominal + 0.05 * rng.standard_normal((args.n, pr.dim))
    print(f"Boehm: {args.n} x llh + gradient + FIM (exp2), median of {args.repeats} after a warm-up; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")

    def timed(fn):
        fn()
        ts = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return statistics.median(ts)

    ref = [r.llh for r in pr.evaluate_many(thetas, n_workers=1)]
    rows = {}
    rows["serial"] = timed(lambda: pr.evaluate_many(thetas, n_workers=1))
    for n in (1, 2):
        def run(n=n):
            res = parallel.map_tasks(parallel._evaluate_item, (parallel.problem_recipe(pr), {}), list(thetas),
                                     n_workers=n, processes=True, chunk_size=args.chunk_size)
            assert [r.llh for r in res] == ref
        rows[f"processes-{n}"] = timed(run)
    # where the time goes (one more run of each, after the timed ones: workers warm, problem loaded)
    print("breakdown (one run each; busy share = task seconds / (workers x wall), the rest is scheduling, "
          "transfer and idle workers):")
    busy = {}
    for n in (1, 2):
        t = time.perf_counter()
        out = parallel.map_tasks(_timed_item, (parallel.problem_recipe(pr), {}), list(thetas), n_workers=n,
                                 processes=True, chunk_size=args.chunk_size)
        busy[n] = _report(f"processes-{n}", time.perf_counter() - t, out, n)
    cs = args.chunk_size or max(1, -(-args.n // 8))
    print(f"  {-(-args.n // cs)} chunks of {cs} for 2 workers; what scheduling, transfer and idle workers "
          f"leave of the speed-up (2 x busy share of processes-2): {2 * busy[2]:.2f}x; a CPU share in tasks "
          f"below 100% means the machine is loaded and the measured speed-up says little")
    parallel.shutdown()
    if not args.no_dask:
        import distributed
        dask_info = {}
        for n in (1, 2):
            # the cluster is started (and the problem loaded on its workers by the warm-up run)
            # outside the timed region: a user keeps one Client for many batches
            with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                          dashboard_address=None) as cl, distributed.Client(cl) as client:
                def run(client=client):
                    res = pr.evaluate_many(thetas, client=client, chunk_size=args.chunk_size)
                    assert [r.llh for r in res] == ref
                rows[f"dask-{n}"] = timed(run)
                # the same chunks with an empty task: what dask costs per call without any work
                # (submission, scheduling, one gather), median of the repeats
                dask_info[n] = (timed(lambda client=client: parallel.map_tasks(
                    _empty_item, None, list(thetas), client=client, chunk_size=args.chunk_size)),)
                t = time.perf_counter()
                out = parallel.map_tasks(_timed_item, (parallel.problem_recipe(pr), {}), list(thetas),
                                         client=client, chunk_size=args.chunk_size)
                wall = time.perf_counter() - t
                dask_info[n] += (wall, _report(f"dask-{n}", wall, out, n))
        cs = args.chunk_size or max(1, -(-args.n // 4))
        print(f"  dask: {-(-args.n // cs)} chunks of {cs} for 2 workers (default: 2 per worker thread); empty "
              f"batch (scheduling + transfer only, no evaluation): dask-1 {dask_info[1][0]:.3f} s, "
              f"dask-2 {dask_info[2][0]:.3f} s")
    print(f"{'backend':<14s} {'seconds':>8s} {'per eval [ms]':>14s}")
    for k, v in rows.items():
        print(f"{k:<14s} {v:8.3f} {1e3 * v / args.n:14.2f}")
    print(f"speed-up processes: serial / processes-2 = {rows['serial'] / rows['processes-2']:.2f}x, "
          f"processes-1 / processes-2 = {rows['processes-1'] / rows['processes-2']:.2f}x")
    if "dask-2" in rows:
        print(f"speed-up dask: dask-1 / dask-2 = {rows['dask-1'] / rows['dask-2']:.2f}x, "
              f"serial / dask-2 = {rows['serial'] / rows['dask-2']:.2f}x; per-call dask overhead "
              f"(empty batch) dask-1 {dask_info[1][0]:.3f} s, dask-2 {dask_info[2][0]:.3f} s; "
              f"dask-1 - serial = {rows['dask-1'] - rows['serial']:+.3f} s")
    if not args.no_first_call:
        warm = first_call()
        with tempfile.TemporaryDirectory() as d:
            cold = first_call(d)
        print("first call of a fresh process [s]: import+load, first evaluate, total")
        print(f"  compiled model from the disk cache  {warm[0]:7.2f} {warm[1]:7.2f} {warm[2]:7.2f}")
        print(f"  empty cache (generate + compile)    {cold[0]:7.2f} {cold[1]:7.2f} {cold[2]:7.2f}")


if __name__ == "__main__":
    main()
