"""Numba kernels: matrix functions, single steps, and the march over a grid.

Kernels know nothing of models' names or files: they receive compiled model
functions as first-class function arguments (see :mod:`pbsens.kernels.signatures`).

numba's on-disk cache of a kernel checks only the kernel's own source file, while the
machine code it keeps contains the kernels it calls (a march that calls
``exp_phi12_into`` kept the old one after ``phi.py`` changed). So on import, when the
sources of this package differ from those the cache was written for,
:func:`drop_stale_cache` deletes numba's files once, and everything recompiles. Every
cached kernel of pbsens lives in this package (the rest of pbsens compiles only per-model
closures, which numba does not cache).
"""
import contextlib
import glob
import hashlib
import os
import tempfile

_STAMP = "pbsens-kernels.sha256"


def numba_cache_dir(source_dir):
    """Where numba caches the functions of the files in ``source_dir``.

    The folder's ``__pycache__``, or under ``$NUMBA_CACHE_DIR`` when that is set: there numba
    names the folder ``<last part of source_dir>_<SHA-1 of its absolute path>`` (numba's
    ``_UserProvidedCacheLocator``; ``tests/test_kernel_cache.py`` checks this rule against where
    the installed numba really writes)."""
    root = os.environ.get("NUMBA_CACHE_DIR")
    if root:
        path = os.path.abspath(source_dir)
        sub = os.path.basename(path) + "_" + hashlib.sha1(path.encode()).hexdigest()
        return os.path.join(root, sub)
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
    """Drop numba's files if the kernels' sources changed; when no machine code is left (a fresh
    installation, or after an edit of a kernel), say so once: the kernels compiled with explicit
    signatures compile at import, which then takes about a minute, and nothing else would tell
    why."""
    here = os.path.dirname(os.path.abspath(__file__))
    drop_stale_cache(glob.glob(os.path.join(glob.escape(here), "*.py")), [numba_cache_dir(here)])
    if not glob.glob(os.path.join(glob.escape(numba_cache_dir(here)), "*.nbi")):
        from ..system.notices import notice
        notice("kernels", "compiling the numerical kernels once for this machine (about a minute; "
                          "later runs load them from the cache)")


_check_cache()
