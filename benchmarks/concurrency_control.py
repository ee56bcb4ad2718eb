"""Does this machine slow down one process's work when a second process runs beside it?

Two bare worker processes (no pbsens pool, no dask), each running a loop of the same
work; every round times the loop on one worker alone (``2 N`` items) and then on both
at once (``N`` items each), and reports per round the CPU seconds (``getrusage``: user,
system, minor page faults) and the wall times. The medians over ``--rounds`` give the
CPU *inflation* (CPU seconds of the concurrent pair / CPU seconds of the same items
alone: 1.0 on two independent cores) and the wall ratio (alone / both, 2.0 at best).

Work (``--work``):

* ``eval``: ``Problem.evaluate`` on Boehm (llh + gradient + FIM, exp2), the item of
  ``bench_batch.py``;
* ``matmul``: a numba loop of small dense matrix products (``--m`` x ``--m``);
* ``loop``: a pure-Python integer loop (what ``bench_batch.py --ceiling`` burns).

Run from the repository root::

    python benchmarks/concurrency_control.py --work eval --n 32
    python benchmarks/concurrency_control.py --work matmul --m 16 --n 2000
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import statistics
import time

BOEHM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "petab",
                     "Boehm_JProteomeRes2014", "Boehm_JProteomeRes2014.yaml")


def _make(work, m):
    """The work item ``f(k)`` of a worker."""
    import numpy as np
    if work == "eval":
        import warnings
        warnings.simplefilter("ignore")
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)
        import pbsens.petab as pp
        pr = pp.load(BOEHM, lint=False)
        th = pr.x_nominal + 0.05 * np.random.default_rng(0).standard_normal((64, pr.dim))
        return lambda k: pr.evaluate(th[k % 64])
    if work == "matmul":
        import numba

        @numba.njit
        def products(A):
            B = A.copy()
            C = np.empty_like(A)
            n = A.shape[0]
            for i in range(n):
                for j in range(n):
                    s = 0.0
                    for k in range(n):
                        s += B[i, k] * A[k, j]
                    C[i, j] = s
            return C[0, 0]
        A = 0.1 * np.random.default_rng(0).standard_normal((m, m))
        return lambda k: products(A)

    def loop(k):
        x = 0
        for i in range(20_000):
            x += i * i % 7
        return x
    return loop


def _worker(conn, work, m):
    f = _make(work, m)
    for k in range(3):
        f(k)
    while True:
        n = conn.recv()
        if n is None:
            return
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        for k in range(n):
            f(k)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        conn.send((r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", choices=("eval", "matmul", "loop"), default="eval")
    ap.add_argument("--n", type=int, default=32, help="items per worker when both run")
    ap.add_argument("--m", type=int, default=16, help="matrix size of --work matmul")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args(argv)
    ctx = mp.get_context("spawn")
    pipes, procs = [], []
    for _ in range(2):
        a, b = ctx.Pipe()
        p = ctx.Process(target=_worker, args=(b, args.work, args.m), daemon=True)
        p.start()
        pipes.append(a)
        procs.append(p)
    for a in pipes:
        a.send(1)
        a.recv()
    alone, both, w1, w2 = [], [], [], []
    for _ in range(args.rounds):
        t = time.perf_counter()
        pipes[0].send(2 * args.n)
        alone.append(pipes[0].recv())
        w1.append(time.perf_counter() - t)
        t = time.perf_counter()
        for a in pipes:
            a.send(args.n)
        r = [a.recv() for a in pipes]
        w2.append(time.perf_counter() - t)
        both.append(tuple(x + y for x, y in zip(*r)))
    for a in pipes:
        a.send(None)
    for p in procs:
        p.join(timeout=5)

    def med(rows, i):
        return statistics.median(x[i] for x in rows)
    print(f"work {args.work}{f' m={args.m}' if args.work == 'matmul' else ''}, {2 * args.n} items, "
          f"{args.rounds} rounds, load average {os.getloadavg()[0]:.2f}")
    print(f"  alone:        user {1e3 * med(alone, 0):8.1f} ms  system {1e3 * med(alone, 1):6.1f} ms  "
          f"minor faults {med(alone, 2):.0f}  wall {1e3 * statistics.median(w1):8.1f} ms")
    print(f"  2 concurrent: user {1e3 * med(both, 0):8.1f} ms  system {1e3 * med(both, 1):6.1f} ms  "
          f"minor faults {med(both, 2):.0f}  wall {1e3 * statistics.median(w2):8.1f} ms")
    print(f"  CPU inflation {(med(both, 0) + med(both, 1)) / (med(alone, 0) + med(alone, 1)):.2f}, "
          f"wall ratio alone / concurrent {statistics.median(w1) / statistics.median(w2):.2f}")


if __name__ == "__main__":
    main()
