"""Dense output of the compiled Rodas5P: a step's interpolant, states at query times, output
times merged into the grid, and outputs taken as the steps go (buffers emptied when full).

A step ``n`` from ``(T[n], X[n])`` to ``(T[n+1], X[n+1])`` stores three coefficient rows
``Dn[n]`` (see :func:`pbsens.kernels.rosenbrock._dense_coefficients`); :func:`_interp` is the
interpolant, exact at both ends.
"""
from numba import njit, types

from .signatures import f8, ivec, mat, tens, vec

i8 = types.int64

__all__ = ["dense_eval", "merge_outputs", "outputs_upto"]


@njit(types.void(f8, vec, vec, mat, vec), cache=True, _nrt=False)
def _interp(theta, x0, x1, Dk, out):
    """Dense output of one step at ``theta`` in [0, 1] (exact ``x0``, ``x1`` at the ends)."""
    th1 = 1.0 - theta
    e1, e2, e3 = Dk[0], Dk[1], Dk[2]
    for i in range(out.shape[0]):
        out[i] = th1 * x0[i] + theta * (x1[i] + th1 * (e1[i] + theta * (e2[i] + theta * e3[i])))


@njit(types.void(vec, mat, tens, vec, mat), cache=True, _nrt=False, error_model="numpy")
def dense_eval(T, X, Dn, tq, out):
    """States at times ``tq`` (any order) from the dense output: ``out[q] = x(tq[q])``.

    ``tq`` must lie in ``[T[0], T[-1]]`` (the caller checks); at grid points the
    stored states are returned exactly.
    """
    K = T.shape[0]
    for q in range(tq.shape[0]):
        v = tq[q]
        lo = 0
        hi = K - 1          # find k with T[k] <= v < T[k + 1] (k = K - 2 at the end)
        while hi - lo > 1:
            mid = (lo + hi) >> 1
            if T[mid] <= v:
                lo = mid
            else:
                hi = mid
        if v == T[lo]:
            for i in range(out.shape[1]):
                out[q, i] = X[lo, i]
            continue
        theta = (v - T[lo]) / (T[lo + 1] - T[lo])
        _interp(theta, X[lo], X[lo + 1], Dn[lo], out[q])


@njit(i8(vec, mat, tens, vec, vec, mat, ivec), cache=True, _nrt=False, error_model="numpy")
def merge_outputs(T, X, Dn, te, t_out, x_out, eval_index):
    """Merge output times ``te`` into the grid ``T`` exactly; states there from the dense output.

    ``te`` strictly increasing inside ``[T[0], T[-1]]``. Fills ``t_out``,
    ``x_out`` (room for ``len(T) + len(te)`` rows) and ``eval_index``
    (``t_out[eval_index] == te``); returns the merged length.
    """
    N = T.shape[0]
    M = te.shape[0]
    i = 0
    j = 0
    k = 0
    while i < N or j < M:
        if j >= M or (i < N and T[i] < te[j]):
            t_out[k] = T[i]
            for r in range(X.shape[1]):
                x_out[k, r] = X[i, r]
            i += 1
        elif i < N and T[i] == te[j]:
            t_out[k] = T[i]
            for r in range(X.shape[1]):
                x_out[k, r] = X[i, r]
            eval_index[j] = k
            i += 1
            j += 1
        else:
            v = te[j]
            s = i - 1 if i > 0 else 0
            if s > N - 2:
                s = N - 2
            t_out[k] = v
            theta = (v - T[s]) / (T[s + 1] - T[s])
            _interp(theta, X[s], X[s + 1], Dn[s], x_out[k])
            eval_index[j] = k
            j += 1
        k += 1
    return k


@njit(i8(vec, mat, tens, i8, vec, i8, mat), cache=True, _nrt=False, error_model="numpy")
def outputs_upto(T, X, Dn, n, te, k, out):
    """``out[k], out[k+1], ...`` for the output times ``te[k] <= T[n]`` from the ``n`` steps
    held (as :func:`merge_outputs`: the stored state at a grid point, else the dense output of
    the step around it); returns the index of the first output time not reached."""
    s = 0
    while k < te.shape[0] and te[k] <= T[n]:
        v = te[k]
        while s < n and T[s + 1] <= v:
            s += 1
        if v == T[s]:
            for i in range(out.shape[1]):
                out[k, i] = X[s, i]
        else:
            theta = (v - T[s]) / (T[s + 1] - T[s])
            _interp(theta, X[s], X[s + 1], Dn[s], out[k])
        k += 1
    return k
