"""Numba kernels: matrix functions, single steps, and the march over a grid.

Kernels know nothing of models' names or files: they receive compiled model
functions as first-class function arguments (see :mod:`pbsens.kernels.signatures`).

numba's on-disk cache of a kernel checks only the kernel's own source file, while the
machine code it keeps contains the kernels it calls (a march that calls
``exp_phi12_into`` kept the old one after ``phi.py`` changed). So on import, when the
sources of this package (and ``pbsens/forward.py``, whose cached kernels call these)
differ from those the cache was written for, :func:`drop_stale_cache` deletes numba's
files of both folders once, and everything recompiles.
"""
import contextlib
import glob
import hashlib
import os
import tempfile

_STAMP = "pbsens-kernels.sha256"


def _numba_cache_dir(source_dir):
    """Where numba caches the functions of the files in ``source_dir``: ``$NUMBA_CACHE_DIR``
    mirroring the source path when set, else the folder's ``__pycache__``."""
    root = os.environ.get("NUMBA_CACHE_DIR")
    if root:
        tail = os.path.splitdrive(os.path.abspath(source_dir))[1].lstrip(os.sep)
        return os.path.join(root, tail)
    return os.path.join(source_dir, "__pycache__")


def drop_stale_cache(sources, cache_dirs):
    """Delete numba's cached machine code (``*.nbi``, ``*.nbc``) in ``cache_dirs`` unless the
    stamp in the first of them records the SHA-256 of ``sources`` (file paths) as they are now;
    then write the stamp. Returns the number of files deleted. Never raises on I/O errors (a
    read-only installation keeps its cache)."""
    h = hashlib.sha256()
    for path in sorted(sources):
        try:
            with open(path, "rb") as fh:
                h.update(os.path.basename(path).encode() + b"\0" + hashlib.sha256(fh.read()).digest())
        except OSError:
            return 0
    digest = h.hexdigest()
    stamp = os.path.join(cache_dirs[0], _STAMP)
    try:
        with open(stamp) as fh:
            if fh.read().strip() == digest:
                return 0
    except OSError:
        pass
    removed = 0
    for d in cache_dirs:
        for path in glob.glob(os.path.join(glob.escape(d), "*.nbi")) + glob.glob(os.path.join(glob.escape(d), "*.nbc")):
            with contextlib.suppress(OSError):
                os.remove(path)
                removed += 1
    with contextlib.suppress(OSError):
        os.makedirs(cache_dirs[0], exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dirs[0], prefix=".pbsens-kernels-", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(digest + "\n")
        os.replace(tmp, stamp)
    return removed


def _check_cache():
    here = os.path.dirname(os.path.abspath(__file__))
    parent = os.path.dirname(here)
    sources = glob.glob(os.path.join(glob.escape(here), "*.py")) + [os.path.join(parent, "forward.py")]
    drop_stale_cache(sources, [_numba_cache_dir(here), _numba_cache_dir(parent)])


_check_cache()
