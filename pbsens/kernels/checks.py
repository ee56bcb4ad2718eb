"""Input checks over whole trajectories, compiled: one pass instead of several NumPy temporaries.

The front door validates every grid it is given (finite, strictly increasing).
With NumPy that is four array passes and temporaries, ~0.1-0.2 ms for a
424-point CaMKII grid (measured after a march, with cold caches), which is
1-2 % of the state solve the sensitivities are meant to cost about as much as.
"""
from numba import njit, types

from .signatures import ivec, mat, vec

#: Codes returned by :func:`grid_status`.
GRID_OK = 0
GRID_NOT_FINITE = 1
GRID_NOT_INCREASING = 2


@njit(types.boolean(vec), cache=True, _nrt=False)
def all_finite(v):
    # x - x is 0 for finite x and NaN otherwise; an integer OR without an early
    # exit keeps the loop vectorisable.
    bad = 0
    for k in range(v.shape[0]):
        a = v[k]
        bad |= (a - a) != 0.0
    return bad == 0


@njit(types.int64(vec, mat), cache=True, _nrt=False)
def grid_status(t, x):
    """``GRID_OK`` if ``t`` is strictly increasing and ``t``, ``x`` are finite.

    Otherwise ``GRID_NOT_FINITE`` (NaN or inf anywhere, checked first) or
    ``GRID_NOT_INCREASING``. ``x`` has one row per time; its shape is the
    caller's to check.
    """
    if not all_finite(t):
        return GRID_NOT_FINITE
    for i in range(x.shape[0]):
        if not all_finite(x[i]):
            return GRID_NOT_FINITE
    for k in range(t.shape[0] - 1):
        if not t[k + 1] > t[k]:
            return GRID_NOT_INCREASING
    return GRID_OK


#: Codes returned by :func:`locate_outputs` (non-negative values count missing times).
TIMES_NOT_FINITE = -1
TIMES_NOT_INCREASING = -2
TIMES_OUTSIDE = -3


@njit(types.int64(vec, vec, ivec), cache=True, _nrt=False)
def locate_outputs(t, te, out_index):
    """Check output times ``te`` against the grid ``t`` and mark them in ``out_index``.

    ``te`` must be finite, strictly increasing and inside ``[t[0], t[-1]]``
    (else ``TIMES_NOT_FINITE``, ``TIMES_NOT_INCREASING`` or ``TIMES_OUTSIDE``,
    checked in that order). Otherwise ``out_index[k] = j`` where
    ``t[k] == te[j]`` exactly and -1 elsewhere, and the return value is the
    number of times in ``te`` that are not grid points (0: all found). ``t``
    must be strictly increasing (see :func:`grid_status`). One merge pass over
    both arrays.
    """
    n = te.shape[0]
    if not all_finite(te):
        return TIMES_NOT_FINITE
    for j in range(n - 1):
        if not te[j + 1] > te[j]:
            return TIMES_NOT_INCREASING
    K = t.shape[0]
    if n > 0 and (te[0] < t[0] or te[n - 1] > t[K - 1]):
        return TIMES_OUTSIDE
    for k in range(K):
        out_index[k] = -1
    missing = 0
    k = 0
    for j in range(n):
        v = te[j]
        while k < K and t[k] < v:
            k += 1
        if k < K and t[k] == v:
            out_index[k] = j
        else:
            missing += 1
    return missing
