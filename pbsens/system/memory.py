"""Large result arrays without transparent huge pages.

numpy asks Linux for transparent huge pages (``madvise(MADV_HUGEPAGE)``) on every array of 4 MiB
or more. Where the kernel compacts memory synchronously for such regions (``defrag = madvise``,
the kernel's default), the first touch of a fresh large array can stall on compaction: Lang's
sensitivity result (600 x 124 x 291 doubles, 170 MB) took 0.28-0.42 s to fill for the first
and second time in a process, against 0.06 s on ordinary 4 KiB pages (and 0.012 s once freed
huge pages are at hand). :func:`empty` allocates with numpy and advises the kernel not to back
the array with huge pages, so a sensitivity pass costs the same in a fresh process as in a
long-running one (docs/PERFORMANCE.md, "Wave 13"). The advice is a hint: elsewhere than on
Linux, or if it fails, the array is numpy's as usual.
"""
from __future__ import annotations

import ctypes
import mmap
import sys

import numpy as np

__all__ = ["empty", "MIN_BYTES"]

#: Arrays smaller than this are left alone (numpy advises huge pages from 4 MiB).
MIN_BYTES = 32 << 20
_madvise = None


def _libc_madvise():
    global _madvise
    if _madvise is None:
        _madvise = False
        flag = getattr(mmap, "MADV_NOHUGEPAGE", None)
        if sys.platform.startswith("linux") and flag is not None:
            try:
                fn = ctypes.CDLL(None, use_errno=True).madvise
                fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
                fn.restype = ctypes.c_int
                _madvise = (fn, flag)
            except (OSError, AttributeError):   # pragma: no cover - no libc symbol
                _madvise = False
    return _madvise


def empty(shape, dtype=np.float64) -> np.ndarray:
    """``np.empty(shape, dtype)``, not backed by transparent huge pages when it is large
    (:data:`MIN_BYTES`) and the platform allows the advice (see the module docstring)."""
    a = np.empty(shape, dtype=dtype)
    if a.nbytes >= MIN_BYTES:
        advise = _libc_madvise()
        if advise:
            fn, flag = advise
            page = mmap.PAGESIZE
            start = (a.ctypes.data + page - 1) // page * page
            end = (a.ctypes.data + a.nbytes) // page * page
            if end > start:
                fn(start, end - start, flag)
    return a
