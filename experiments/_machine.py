"""The machine the experiments run on: BLAS threading, and the facts that matter for timings.

BLAS runs on one thread while an experiment runs (:func:`blas_threads`, through
``threadpoolctl``). On a shared 2-core machine OpenBLAS's default threading made
each 11 x 11 ``lu_solve`` inside the FS Newton iteration ~50x slower (8 ms instead
of 0.15 ms) under load; single-threaded BLAS is the reproducible setting.
"""
from __future__ import annotations

import contextlib
import os
import platform

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits


@contextlib.contextmanager
def blas_threads(n=1):
    """Limit every loaded BLAS (numpy's and scipy's OpenBLAS) to ``n`` threads inside the block."""
    import scipy.linalg  # noqa: F401  (load scipy's BLAS too, so that it is limited as well)
    with threadpool_limits(limits=n, user_api="blas"):
        yield


def openblas_kernels():
    """``{library file: kernel set}`` of every loaded OpenBLAS, e.g. ``"Haswell"`` (timings depend on it)."""
    import scipy.linalg  # noqa: F401  (load scipy's OpenBLAS too)
    return {os.path.basename(lib["filepath"]): lib.get("architecture") or "?"
            for lib in threadpool_info() if lib.get("internal_api") == "openblas"}


def cpu_model():
    """The CPU's model name from /proc/cpuinfo (Linux), else ``platform.processor()``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def environment():
    """Versions, CPU, load and BLAS kernels: recorded with every experiment's results."""
    import numba
    import scipy

    import pbsens
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "numba": numba.__version__, "pbsens": pbsens.__version__, "machine": platform.machine(),
            "cpu": cpu_model(), "cpu_count": os.cpu_count(), "load_average_at_start": list(load) if load else None,
            "blas_threads": 1, "openblas_kernels": openblas_kernels()}
