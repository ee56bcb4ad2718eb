"""Per-call cost of a model's functions: tape interpreter vs numba-compiled code.

Usage (from the repository root)::

    python benchmarks/bench_tape_calls.py [--models PKA,net50,lang] [--backends numba,tape]
                                          [--calls 2000] [--repeats 5]

For each model both backends are loaded (``backend="numba"`` compiles the model with
numba: minutes for Lang on a cold cache) and ``rhs_into``, ``jac_x_into``,
``jacs_into`` and ``jac_x_data_into`` are called in a compiled loop (through the
function addresses the kernels use). Prints the median time per call over
``--repeats`` loops and the tape / numba ratio. Printed, not asserted.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from numba import njit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pbsens.kernels.function_address import addresses, jacs_fn_at, matrix_fn_at, vector_fn_at  # noqa: E402
from pbsens.kernels.signatures import jacs_fn_sig, matrix_fn_sig, vector_fn_sig  # noqa: E402
from pbsens.model.library import load_model  # noqa: E402

LANG = os.path.join(os.path.dirname(ROOT), "shared", "petab", "Lang_PLOSComputBiol2024",
                    "model_Lang_PLOSComputBiol2024.xml")


@njit
def _loop_vec(ca, ja, n, t, x, p, c, out):
    f = vector_fn_at(ca, ja)
    for _ in range(n):
        f(t, x, p, c, out)


@njit
def _loop_mat(ca, ja, n, t, x, p, c, out):
    f = matrix_fn_at(ca, ja)
    for _ in range(n):
        f(t, x, p, c, out)


@njit
def _loop_jacs(ca, ja, n, t, x, p, c, A, B):
    f = jacs_fn_at(ca, ja)
    for _ in range(n):
        f(t, x, p, c, A, B)


def per_call(model, calls, repeats):
    """Median seconds per call of rhs_into, jac_x_into, jacs_into, jac_x_data_into."""
    fns, c = model.fns, model.constants
    nx, np_ = model.n_states, model.n_params
    x, p = model.x0 + 0.1, model.p
    out = {}
    f, A, B = np.empty(nx), np.empty((nx, nx)), np.empty((nx, np_))
    data = np.empty(len(model.jac_x_pattern[1]))
    cases = {
        "rhs": lambda n: _loop_vec(*addresses(fns.rhs_into, vector_fn_sig), n, 0.5, x, p, c, f),
        "jac_x": lambda n: _loop_mat(*addresses(fns.jac_x_into, matrix_fn_sig), n, 0.5, x, p, c, A),
        "jacs": lambda n: _loop_jacs(*addresses(fns.jacs_into, jacs_fn_sig), n, 0.5, x, p, c, A, B),
        "jac_x_data": lambda n: _loop_vec(*addresses(fns.jac_x_data_into, vector_fn_sig), n, 0.5, x, p, c, data),
    }
    for name, run in cases.items():
        run(1)
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            run(calls)
            ts.append((time.perf_counter() - t0) / calls)
        out[name] = float(np.median(ts))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="PKA,net50,lang")
    ap.add_argument("--backends", default="numba,tape")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    for name in args.models.split(","):
        if name.startswith("net"):
            from pbsens.model.networks import random_mass_action
            src = random_mass_action(int(name[3:]), seed=0)
        else:
            src = LANG if name == "lang" else name
        res = {b: per_call(load_model(src, backend=b), args.calls, args.repeats) for b in args.backends.split(",")}
        for fn in next(iter(res.values())):
            cells = "   ".join(f"{b} {res[b][fn] * 1e6:9.2f} us" for b in res)
            ratio = (f"   tape/numba {res['tape'][fn] / res['numba'][fn]:6.2f}" if len(res) == 2 else "")
            print(f"{name:8s} {fn:11s} {cells}{ratio}", flush=True)


if __name__ == "__main__":
    main()
