"""pbsens.system.memory.empty: numpy's array, advised off transparent huge pages when large (Linux)."""
import sys

import numpy as np
import pytest

from pbsens.system import memory


def _vm_flags(addr):
    """The VmFlags of the mapping of this process that holds ``addr`` (from /proc/self/smaps)."""
    flags, inside = None, False
    with open("/proc/self/smaps") as fh:
        for line in fh:
            head = line.split()[0]
            if "-" in head and all(c in "0123456789abcdef-" for c in head):
                lo, hi = (int(v, 16) for v in head.split("-"))
                inside = lo <= addr < hi
            elif inside and line.startswith("VmFlags:"):
                flags = line.split()[1:]
    return flags


def test_small_arrays_are_plain_numpy():
    a = memory.empty((10, 3))
    assert a.shape == (10, 3) and a.dtype == np.float64 and a.flags.owndata and a.flags.c_contiguous


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc/self/smaps are Linux's")
def test_large_arrays_are_advised_off_huge_pages():
    a = memory.empty((memory.MIN_BYTES // 8 + 4096,))
    assert a.flags.owndata and a.flags.writeable
    a[:] = 1.0                                           # usable as any array
    assert a.sum() == a.size
    page = 4096
    mid = (a.ctypes.data + a.nbytes // 2) // page * page
    assert "nh" in _vm_flags(mid)                        # the kernel's "no huge pages" flag
    b = np.empty_like(a)                                 # numpy's own: not so advised
    assert "nh" not in (_vm_flags((b.ctypes.data + b.nbytes // 2) // page * page) or [])
