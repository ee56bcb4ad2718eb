"""Batches of llh + gradient on Boehm: 1 vs 2 workers, local processes and dask.

``Problem.evaluate_many`` over 64 parameter vectors (nominal + N(0, 0.05^2) on
the parameter scale), ``exp2``, llh + gradient + FIM. Timed, each as the median
of ``--repeats`` runs after one warm-up run (workers started, problem loaded):

* ``serial``: one by one in this process (``n_workers=1``);
* ``processes-1`` / ``processes-2``: a pool of 1 / 2 spawned worker processes;
* ``dask-1`` / ``dask-2``: a ``distributed.LocalCluster`` of 1 / 2 single-threaded
  worker processes (``pbsens.parallel.local_cluster``: dask's profiler off and its
  periodic callbacks slowed, unless ``--dask-defaults``), ``evaluate_many``'s default dispatch there (``"resident"``: one
  actor per worker, direct calls; the Client is made with ``direct_to_workers=True``
  unless ``--proxy``);
* ``dask-tasks-1`` / ``dask-tasks-2``: the same clusters with ``dispatch="tasks"``
  (one dask task per chunk, one gather), the wave-4 path.

The speed-up is ``serial / processes-2`` and ``dask-1 / dask-2`` (same run).
The machine is shared, so beside the wall times the script reports CPU seconds per
batch (mean over the repeats, psutil, 10 ms ticks): of this process (client, and the
dask scheduler and nannies of a LocalCluster) and of each worker process, and from
them the wall time the batch would take on 2 dedicated cores,
``max(largest worker CPU, all CPU / 2)``, and the speed-ups from that estimate (what
the other users of the machine do not change, except through caches and clock).
The load average is printed at the start and the end.

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


def _cpu(pids):
    """CPU seconds (user + system) so far of this process and of ``pids``."""
    import psutil
    me = os.times()
    out = [me.user + me.system]
    for p in pids:
        try:
            t = psutil.Process(p).cpu_times()
            out.append(t.user + t.system)
        except psutil.Error:
            out.append(float("nan"))
    return np.array(out)


def _dedicated(row, n_workers, ncpu=2):
    """Wall seconds on ``ncpu`` dedicated cores from a row's CPU seconds:
    ``max(largest worker CPU, all CPU / ncpu)``."""
    cpu = row["cpu"]
    workers = cpu[1:1 + n_workers] if n_workers else cpu[:1]
    return max(float(np.max(workers)), float(np.nansum(cpu)) / ncpu)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--no-tasks", action="store_true", help="skip the dask-tasks rows")
    ap.add_argument("--proxy", action="store_true", help="dask Client without direct_to_workers")
    ap.add_argument("--dask-defaults", action="store_true",
                    help="LocalCluster with dask's default configuration (profiler on, 20 ms ticks)")
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
    load0 = os.getloadavg()
    print(f"Boehm: {args.n} x llh + gradient + FIM (exp2), median of {args.repeats} after a warm-up; "
          f"{os.cpu_count()} CPUs, load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")

    def timed(fn, pids=()):
        fn()
        ts = []
        c0 = _cpu(pids)
        for _ in range(args.repeats):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return dict(wall=statistics.median(ts), walls=ts, cpu=(_cpu(pids) - c0) / args.repeats)

    ref = [r.llh for r in pr.evaluate_many(thetas, n_workers=1)]
    rows, nw = {}, {}
    rows["serial"], nw["serial"] = timed(lambda: pr.evaluate_many(thetas, n_workers=1)), 0
    for n in (1, 2):
        def run(n=n):
            res = parallel.map_tasks(parallel._evaluate_item, (parallel.problem_recipe(pr), {}), list(thetas),
                                     n_workers=n, processes=True, chunk_size=args.chunk_size)
            assert [r.llh for r in res] == ref
        run()
        pids = [w.proc.pid for w in parallel._local_pool(n).workers]
        rows[f"processes-{n}"], nw[f"processes-{n}"] = timed(run, pids), n
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
    empty = {}
    if not args.no_dask:
        import distributed
        dispatches = ("resident",) if args.no_tasks else ("resident", "tasks")
        for n in (1, 2):
            # the cluster is started (and the problem loaded on its workers by the warm-up run)
            # outside the timed region: a user keeps one Client for many batches
            with parallel.local_cluster(n, quiet=not args.dask_defaults) as cl, \
                    distributed.Client(cl, direct_to_workers=not args.proxy) as client:
                pids = sorted(client.run(os.getpid).values())   # the nannies and scheduler run here
                for dispatch in dispatches:
                    name = f"dask-{n}" if dispatch == "resident" else f"dask-tasks-{n}"

                    def run(client=client, dispatch=dispatch):
                        res = pr.evaluate_many(thetas, client=client, chunk_size=args.chunk_size,
                                               dispatch=dispatch)
                        assert [r.llh for r in res] == ref
                    rows[name], nw[name] = timed(run, pids), n
                    # the same chunks with an empty task: what dask costs per call without any work
                    empty[name] = timed(lambda client=client, dispatch=dispatch: parallel.map_tasks(
                        _empty_item, None, list(thetas), client=client, chunk_size=args.chunk_size,
                        dispatch=dispatch), pids)
                    t = time.perf_counter()
                    out = parallel.map_tasks(_timed_item, (parallel.problem_recipe(pr), {}), list(thetas),
                                             client=client, chunk_size=args.chunk_size, dispatch=dispatch)
                    _report(name, time.perf_counter() - t, out, n)
        print("  dask: empty batch (the same chunks, tasks doing nothing), wall median [ms] and CPU per batch "
              "[ms] (this process: client, scheduler, nannies / workers): " + "; ".join(
                  f"{k} {1e3 * v['wall']:.1f} ({1e3 * v['cpu'][0]:.0f} / {1e3 * np.nansum(v['cpu'][1:]):.0f})"
                  for k, v in empty.items()))
    print(f"{'backend':<14s} {'seconds':>8s} {'per eval [ms]':>14s} {'CPU: this proc':>15s} {'workers':>16s} "
          f"{'2-core est.':>11s}   walls")
    for k, v in rows.items():
        n = nw[k]
        cpu = v["cpu"]
        print(f"{k:<14s} {v['wall']:8.3f} {1e3 * v['wall'] / args.n:14.2f} {cpu[0]:15.3f} "
              f"{' '.join(f'{x:.3f}' for x in cpu[1:1 + n]) or '-':>16s} "
              f"{_dedicated(v, n):11.3f}   {' '.join(f'{w:.3f}' for w in v['walls'])}")

    def ratio(a, b):
        return (f"{a} / {b} = {rows[a]['wall'] / rows[b]['wall']:.2f}x wall, "
                f"{_dedicated(rows[a], nw[a]) / _dedicated(rows[b], nw[b]):.2f}x CPU-based (2 dedicated cores)")
    print("speed-up processes: " + ratio("serial", "processes-2") + "; " + ratio("processes-1", "processes-2"))
    for pre in ("dask", "dask-tasks"):
        if f"{pre}-2" in rows:
            print(f"speed-up {pre}: " + ratio(f"{pre}-1", f"{pre}-2") + "; " + ratio("serial", f"{pre}-2"))
    load1 = os.getloadavg()
    print(f"load average at the end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    if not args.no_first_call:
        warm = first_call()
        with tempfile.TemporaryDirectory() as d:
            cold = first_call(d)
        print("first call of a fresh process [s]: import+load, first evaluate, total")
        print(f"  compiled model from the disk cache  {warm[0]:7.2f} {warm[1]:7.2f} {warm[2]:7.2f}")
        print(f"  empty cache (generate + compile)    {cold[0]:7.2f} {cold[1]:7.2f} {cold[2]:7.2f}")


if __name__ == "__main__":
    main()
