"""Batches of llh + gradient on Boehm: 1 vs 2 workers, local processes and dask.

``Problem.evaluate_many`` over 64 parameter vectors (nominal + N(0, 0.05^2) on the
parameter scale), ``exp2``, llh + gradient + FIM, wall time of the whole batch. Modes:

* ``serial``: one by one in this process (``n_workers=1``);
* ``processes-1`` / ``processes-2``: a pool of 1 / 2 spawned worker processes;
* ``dask-1`` / ``dask-2``: a ``distributed.LocalCluster`` of 1 / 2 single-threaded worker
  processes (``pbsens.parallel.local_cluster``: dask's profiler off and its periodic
  callbacks slowed, unless ``--dask-defaults``), ``evaluate_many``'s default dispatch
  there (``"resident"``: one actor per worker, one direct call per worker and batch;
  the Client is made with ``direct_to_workers=True`` unless ``--proxy``);
* ``dask-tasks-1`` / ``dask-tasks-2`` (with ``--tasks``): the same clusters with
  ``dispatch="tasks"`` (one dask task per chunk, one gather).

Every pool and cluster is started, and the problem loaded in its workers, before
anything is timed (a user keeps them for many batches). The modes are then timed
**interleaved**: each repeat runs every mode once, in a rotating order, so that all
modes see the same machine (on a shared machine the speed of a core moves by a factor
1.5 within seconds; timed one after the other, the 1- and 2-worker rows saw different
machines). The idle clusters stay up meanwhile (with the quiet settings about 2 % of a
core each). A run is ``--repeats`` such rounds after one warm-up round; each run prints
its per-mode table (median wall, per evaluation, CPU seconds per batch of this process
-- client, and the dask schedulers and nannies of the LocalClusters -- and of each
worker) and its speed-ups ``processes-1 / processes-2``, ``serial / processes-2``,
``dask-1 / dask-2`` (medians of the same run). ``--runs N`` repeats that and ends with
each speed-up's median and range over the runs. Beside the wall-time speed-ups each run
prints the same ratios from CPU seconds (the wall time on 2 dedicated cores,
``max(largest worker CPU, all CPU / 2)``), which other users of a shared machine change
less than the wall times.

``--ceiling`` adds a control, ``ceiling-1`` / ``ceiling-2``: the same process pools
running 64 items that only burn as much CPU as one serial evaluation takes (a Python
loop, no pbsens, no numpy), interleaved with the other modes. Its ratio is what this
machine and the pool give two processes at this batch size (on the 2-vCPU VMs here
1.5-1.9x for an 80 ms batch, not 2x), and each run prints every 2-worker speed-up as a
share of it. ``--halves`` adds ``halves-1`` / ``halves-2``: the same evaluations in the
same pools, one chunk per worker, so nothing is scheduled during the batch: the ratio
this machine gives two concurrent evaluation loops (below the Python-loop control's: two
concurrent evaluations each take 4-38 % more CPU time than one alone on these VMs, while
the Python loop and a numba matrix-product loop take 0-4 %). ``--pin`` pins worker ``k``
of every pool and cluster to CPU ``k``.

Then, once: the fixed cost of a batch (the same chunks with tasks that do nothing;
wall median and CPU per batch), where the time of a 2-worker batch goes (task seconds
per worker, busy share = task seconds / (workers x wall)), and (unless
``--no-first-call``) a worker's first-call time (start, import, load the problem with
its compiled model from pbsens's on-disk cache, first evaluation) against the same
with an empty cache directory (``PBSENS_CACHE_DIR``). The load average is printed at
the start and the end of each run.

Run from the repository root::

    python -m benchmarks.bench_batch [--runs 3] [--repeats 7] [--n 64] [--tasks] [--no-first-call]
                                     [--ceiling] [--pin]
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
    from pbsens import batches
    t, c = time.perf_counter(), time.process_time()
    r = batches._evaluate_item(context, theta)
    return r.llh, time.perf_counter() - t, time.process_time() - c, os.getpid(), \
        batches.worker_load_time("problem", context[0])


def _spin_item(context, theta):
    """A worker task that only burns CPU for ``context`` seconds of this process's CPU time
    (no pbsens, no numpy): the control for what the machine itself gives 2 processes."""
    end = time.process_time() + context
    x = 0
    while time.process_time() < end:
        for i in range(200):
            x += i * i % 7
    return x


def _pin(pids):
    """Pin worker ``k`` of ``pids`` to CPU ``k`` (Linux ``sched_setaffinity``)."""
    ncpu = len(os.sched_getaffinity(0))
    for k, pid in enumerate(pids):
        os.sched_setaffinity(pid, {k % ncpu})


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


def _dedicated(cpu, n_workers, ncpu=2):
    """Wall seconds a batch would take on ``ncpu`` dedicated cores, from its CPU seconds
    (this process, then each worker): ``max(largest worker CPU, all CPU / ncpu)``."""
    workers = cpu[1:1 + n_workers] if n_workers else cpu[:1]
    return max(float(np.max(workers)), float(np.nansum(cpu)) / ncpu)


def _load():
    a = os.getloadavg()
    return f"{a[0]:.2f} {a[1]:.2f} {a[2]:.2f}"


RATIOS = (("processes-1", "processes-2"), ("serial", "processes-2"), ("dask-1", "dask-2"),
          ("serial", "dask-2"), ("dask-tasks-1", "dask-tasks-2"), ("ceiling-1", "ceiling-2"),
          ("halves-1", "halves-2"))


def _interleaved(modes, repeats, warmup=1):
    """``{mode: (walls, CPU per batch)}``: ``repeats`` rounds, each running every mode once
    (order rotated by one per round), after ``warmup`` untimed rounds."""
    names = list(modes)
    walls = {k: [] for k in names}
    cpu = {k: 0.0 for k in names}
    for r in range(warmup + repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for k in order:
            fn, pids = modes[k]
            c0 = _cpu(pids)
            t = time.perf_counter()
            fn()
            dt = time.perf_counter() - t
            if r >= warmup:
                walls[k].append(dt)
                cpu[k] = cpu[k] + (_cpu(pids) - c0)
    return {k: (walls[k], cpu[k] / repeats) for k in names}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1, help="timed runs (each prints its speed-ups)")
    ap.add_argument("--repeats", type=int, default=7, help="interleaved rounds per run")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--tasks", action="store_true", help="also time dispatch='tasks' on the dask clusters")
    ap.add_argument("--no-tasks", action="store_true", help=argparse.SUPPRESS)   # the default now
    ap.add_argument("--proxy", action="store_true", help="dask Client without direct_to_workers")
    ap.add_argument("--dask-defaults", action="store_true",
                    help="LocalCluster with dask's default configuration (profiler on, 20 ms ticks)")
    ap.add_argument("--no-first-call", action="store_true")
    ap.add_argument("--chunk-size", type=int, default=None, help="items per chunk (default: the library's)")
    ap.add_argument("--ceiling", action="store_true",
                    help="also time 'ceiling-1' / 'ceiling-2': the same pools running items that only burn "
                         "as much CPU as a serial evaluation takes (the machine's and the pool's own ratio)")
    ap.add_argument("--halves", action="store_true",
                    help="also time 'halves-1' / 'halves-2': the same evaluations in the same pools, one chunk "
                         "per worker (no scheduling during the batch: the machine's ratio for this work)")
    ap.add_argument("--pin", action="store_true", help="pin worker k of every pool and cluster to CPU k")
    args = ap.parse_args(argv)
    import contextlib
    import warnings
    warnings.simplefilter("ignore")
    import pbsens.petab as pp
    from pbsens import batches, parallel
    pr = pp.load(BOEHM)
    rng = np.random.default_rng(0)
    thetas = pr.x_nominal + 0.05 * rng.standard_normal((args.n, pr.dim))
    print(f"Boehm: {args.n} x llh + gradient + FIM (exp2) per batch; {args.runs} run(s) of {args.repeats} "
          f"interleaved rounds after a warm-up round; {os.cpu_count()} CPUs, load average {_load()}")
    ref = [r.llh for r in pr.evaluate_many(thetas, n_workers=1)]

    def check(res):
        assert [r.llh for r in res] == ref

    modes, nw = {}, {}
    modes["serial"], nw["serial"] = (lambda: check(pr.evaluate_many(thetas, n_workers=1)), []), 0
    recipe = (batches.problem_recipe(pr), {})
    for n in (1, 2):
        def run(n=n):
            check(parallel.map_tasks(batches._evaluate_item, recipe, thetas, n_workers=n, processes=True,
                                     chunk_size=args.chunk_size))
        run()       # starts the pool and loads the problem in its workers
        pids = [w.proc.pid for w in parallel.executor._local_pool(n).workers]
        if args.pin:
            _pin(pids)
        modes[f"processes-{n}"] = (run, pids)
        nw[f"processes-{n}"] = n
    if args.ceiling:
        c0 = time.process_time()
        for _ in range(3):
            pr.evaluate_many(thetas, n_workers=1)
        per_item = (time.process_time() - c0) / (3 * args.n)   # CPU seconds of one serial evaluation
        for n in (1, 2):
            def spin(n=n):
                parallel.map_tasks(_spin_item, per_item, thetas, n_workers=n, processes=True,
                                   chunk_size=args.chunk_size)
            modes[f"ceiling-{n}"], nw[f"ceiling-{n}"] = (spin, modes[f"processes-{n}"][1]), n
    if args.halves:
        for n in (1, 2):
            def halves(n=n):
                check(parallel.map_tasks(batches._evaluate_item, recipe, thetas, n_workers=n, processes=True,
                                         chunk_size=-(-args.n // n)))
            modes[f"halves-{n}"], nw[f"halves-{n}"] = (halves, modes[f"processes-{n}"][1]), n
    clients = {}
    with contextlib.ExitStack() as stack:
        if not args.no_dask:
            import distributed
            for n in (1, 2):
                cl = stack.enter_context(parallel.local_cluster(n, quiet=not args.dask_defaults))
                client = stack.enter_context(distributed.Client(cl, direct_to_workers=not args.proxy))
                clients[n] = client
                pids = sorted(client.run(os.getpid).values())
                if args.pin:
                    _pin(pids)
                for dispatch in ("resident", "tasks") if args.tasks else ("resident",):
                    name = f"dask-{n}" if dispatch == "resident" else f"dask-tasks-{n}"

                    def run(client=client, dispatch=dispatch):
                        check(pr.evaluate_many(thetas, client=client, chunk_size=args.chunk_size,
                                               dispatch=dispatch))
                    run()
                    modes[name], nw[name] = (run, pids), n
        per_run = []
        for r in range(args.runs):
            print(f"\nrun {r + 1} of {args.runs}: load average at the start {_load()}")
            out = _interleaved(modes, args.repeats)
            print(f"  {'mode':<14s} {'median [s]':>10s} {'per eval [ms]':>13s} {'CPU/batch: this proc':>21s} "
                  f"{'workers [s]':>12s}   walls [s]")
            for k, (walls, cpu) in out.items():
                n = nw[k]
                print(f"  {k:<14s} {statistics.median(walls):10.3f} {1e3 * statistics.median(walls) / args.n:13.2f} "
                      f"{cpu[0]:21.3f} {' '.join(f'{x:.3f}' for x in cpu[1:1 + n]) or '-':>12s}   "
                      f"{' '.join(f'{w:.3f}' for w in walls)}")
            ratios = {f"{a} / {b}": statistics.median(out[a][0]) / statistics.median(out[b][0])
                      for a, b in RATIOS if a in out and b in out}
            per_run.append(ratios)
            print("  speed-ups (wall, medians): " + "; ".join(f"{k} = {v:.2f}x" for k, v in ratios.items()))
            for control, what in (("ceiling", "the control's ratio (speed-up / (ceiling-1 / ceiling-2))"),
                                  ("halves", "the halves' ratio (the same work without scheduling)")):
                c = ratios.get(f"{control}-1 / {control}-2")
                if c is not None:
                    print(f"  share of {what}: " + "; ".join(
                        f"{k} = {v / c:.0%}" for k, v in ratios.items()
                        if k.endswith("-2") and not k.startswith(("ceiling", control))))
            print("  from CPU seconds (wall on 2 dedicated cores = max(largest worker CPU, all CPU / 2); what "
                  "the other users of the machine change least): " + "; ".join(
                      f"{a} / {b} = {_dedicated(out[a][1], nw[a]) / _dedicated(out[b][1], nw[b]):.2f}x"
                      for a, b in RATIOS if a in out and b in out))
            print(f"  load average at the end {_load()}")
        if args.runs > 1:
            print(f"\nspeed-ups over {args.runs} runs, median [min, max]:")
            for k in per_run[0]:
                v = [x[k] for x in per_run]
                print(f"  {k:<28s} {statistics.median(v):.2f}x  [{min(v):.2f}, {max(v):.2f}]   runs: "
                      + " ".join(f"{x:.2f}" for x in v))

        # the fixed cost of a batch: the same chunks, tasks doing nothing
        empty = {}
        for n in (1, 2):
            empty[f"processes-{n}"] = (lambda n=n: parallel.map_tasks(
                _empty_item, None, thetas, n_workers=n, processes=True, chunk_size=args.chunk_size),
                modes[f"processes-{n}"][1])
            for name, client in ((f"dask-{n}", clients.get(n)),):
                if client is not None:
                    empty[name] = (lambda client=client: parallel.map_tasks(
                        _empty_item, None, thetas, client=client, chunk_size=args.chunk_size,
                        dispatch="resident"), modes[name][1])
                    if args.tasks:
                        empty[f"dask-tasks-{n}"] = (lambda client=client: parallel.map_tasks(
                            _empty_item, None, thetas, client=client, chunk_size=args.chunk_size,
                            dispatch="tasks"), modes[name][1])
        eout = _interleaved(empty, 21)
        print("\nempty batch (the same chunks, tasks doing nothing; 21 interleaved rounds): wall median [ms], "
              "CPU per batch [ms] this process / workers")
        for k, (walls, cpu) in eout.items():
            print(f"  {k:<14s} {1e3 * statistics.median(walls):7.2f}   {1e3 * cpu[0]:6.2f} / "
                  f"{1e3 * np.nansum(cpu[1:]):6.2f}")

        print("\nwhere a 2-worker batch goes (one batch each; busy share = task seconds / (workers x wall)):")
        t = time.perf_counter()
        res = parallel.map_tasks(_timed_item, recipe, thetas, n_workers=2, processes=True,
                                 chunk_size=args.chunk_size)
        _report("processes-2", time.perf_counter() - t, res, 2)
        if 2 in clients:
            t = time.perf_counter()
            res = parallel.map_tasks(_timed_item, recipe, thetas, client=clients[2], chunk_size=args.chunk_size,
                                     dispatch="resident")
            _report("dask-2", time.perf_counter() - t, res, 2)
    parallel.shutdown()
    print(f"load average at the end {_load()}")
    if not args.no_first_call:
        warm = first_call()
        with tempfile.TemporaryDirectory() as d:
            cold = first_call(d)
        print("first call of a fresh process [s]: import+load, first evaluate, total")
        print(f"  compiled model from the disk cache  {warm[0]:7.2f} {warm[1]:7.2f} {warm[2]:7.2f}")
        print(f"  empty cache (generate + compile)    {cold[0]:7.2f} {cold[1]:7.2f} {cold[2]:7.2f}")


if __name__ == "__main__":
    main()
