"""The march over the state solver's grid: Algorithms 1-3 of the paper (METHOD.md section 5).

One kernel, :func:`march`, does every method. Per grid interval ``[t_k, t_k+1]`` it
evaluates ``A``, ``B`` at the new grid point (once: the left end was evaluated by
the previous interval), decides the branch, and advances ``S`` in place:

=========  ====================================================================
method     per interval
=========  ====================================================================
exp        exponential step (3.10) with ``A_k``, ``B_k``           (Algorithm 3)
exp2       exponential-midpoint step with ``(A_k + A_k+1)/2``     (second order)
pbs        ``n_int = ceil(n_factor h ||A_k||)`` PBS steps (4.6)   (Algorithm 1)
pbsr       PBS refinement, or the exponential step when ``n_int > n_max``
           ("exp-stiff") or the Jacobians are constant ("exp-equilibrium")
                                                                  (Algorithm 2)
pbsr2      as pbsr, with the exp2 step in place of the exponential step
=========  ====================================================================

States at refinement points come from linear interpolation (the paper), cubic
Hermite interpolation with ``f(x_k)``, ``f(x_k+1)`` (third order, two extra
right-hand-side evaluations per refined interval), or precomputed states (the
solver's dense output, planned by :func:`plan`).

All work arrays are allocated once per call; nothing is allocated per step.
The model's ``jacs_into``/``rhs_into`` arrive as first-class functions, so the
kernel is compiled once per machine (``cache=True``), not once per model.
"""
import math

import numpy as np
from numba import njit, types

from . import linalg, steps
from .codes import (BRANCH_EQUILIBRIUM, BRANCH_EXP, BRANCH_EXP2, BRANCH_PBS, BRANCH_STIFF,  # noqa: F401
                    INTERP_CODES, INTERP_DENSE, INTERP_HERMITE, METHOD_CODES, METHOD_EXP, METHOD_EXP2,
                    METHOD_PBS, METHOD_PBSR2)
from .signatures import f8, i8vec, ivec, jacs_fn, mat, tens, vec, vector_fn

__all__ = ["METHOD_CODES", "INTERP_CODES", "BRANCH_PBS", "BRANCH_EQUILIBRIUM", "BRANCH_STIFF",
           "BRANCH_EXP", "BRANCH_EXP2", "march", "plan", "bind"]

i8 = types.int64


@njit(f8(mat, mat, i8), cache=True)
def _norm_diff(X, Y, kind):
    """``||X - Y||`` in the norm ``kind`` (see :func:`linalg.matrix_norm`) without a temporary."""
    n, m = X.shape
    if kind == 2:
        s = 0.0
        for i in range(n):
            for j in range(m):
                d = X[i, j] - Y[i, j]
                s += d * d
        return math.sqrt(s)
    best = 0.0
    if kind == 0:
        for j in range(m):
            s = 0.0
            for i in range(n):
                s += abs(X[i, j] - Y[i, j])
            best = max(best, s)
    else:
        for i in range(n):
            s = 0.0
            for j in range(m):
                s += abs(X[i, j] - Y[i, j])
            best = max(best, s)
    return best


@njit(types.UniTuple(i8, 2)(mat, mat, mat, mat, f8, i8, f8, i8, f8, i8), cache=True)
def _decide(A0, A1, B0, B1, h, method, n_factor, n_max, eq_tol, norm_kind):
    """Branch and number of sub-intervals for one grid interval (Algorithm 2's switch)."""
    if method == METHOD_EXP:
        return BRANCH_EXP, 1
    if method == METHOD_EXP2:
        return BRANCH_EXP2, 1
    nA = linalg.matrix_norm(A0, norm_kind)
    c = n_factor * h * nA
    n = 1
    if c > 1.0:
        n = int(math.ceil(c)) if c < 9.0e18 else 9 * 10 ** 18
    if method == METHOD_PBS:
        return BRANCH_PBS, n
    if n > n_max:
        return BRANCH_STIFF, 1
    if (_norm_diff(A1, A0, norm_kind) < eq_tol * nA
            and _norm_diff(B1, B0, norm_kind) < eq_tol * linalg.matrix_norm(B0, norm_kind)):
        return BRANCH_EQUILIBRIUM, 1
    return BRANCH_PBS, n


@njit(types.void(jacs_fn, vec, types.Array(types.float64, 2, "C"), vec, vec, i8, f8, i8, f8, i8, i8vec, ivec),
      cache=True)
def plan(jacs, t, X, p, c, method, n_factor, n_max, eq_tol, norm_kind, branch, n_int):
    """Fill ``branch`` and ``n_int`` per interval without marching (for dense-output refinement)."""
    K, nx = X.shape
    np_ = p.shape[0]
    Ag = np.empty((2, nx, nx))
    Bg = np.empty((2, nx, np_))
    jacs(t[0], X[0], p, c, Ag[0], Bg[0])
    for k in range(K - 1):
        g = k % 2
        jacs(t[k + 1], X[k + 1], p, c, Ag[1 - g], Bg[1 - g])
        b, n = _decide(Ag[g], Ag[1 - g], Bg[g], Bg[1 - g], t[k + 1] - t[k], method, n_factor, n_max,
                       eq_tol, norm_kind)
        branch[k] = b
        n_int[k] = n


@njit(i8(jacs_fn, vector_fn, vec, mat, vec, vec, mat, ivec, i8, f8, i8, f8, i8, i8, mat, ivec, i8,
         tens, i8vec, ivec), cache=True)
def march(jacs, rhs, t, X, p, c, S, out_index, method, n_factor, n_max, eq_tol, norm_kind,
          interp, X_sub, sub_offset, planned, S_out, branch, n_int):
    """March ``S`` over the grid ``t`` with states ``X`` (Algorithms 1-3).

    Parameters
    ----------
    jacs, rhs : first-class functions
        The model's ``jacs_into(t, x, p, c, A, B)`` and ``rhs_into(t, x, p, c, f)``.
    t : (K,) increasing grid; X : (K, nx) states on it; p : (np,); c : model constants.
    S : (nx, np)
        Initial sensitivity on entry; the sensitivity at ``t[-1]`` on exit.
    out_index : (K,)
        ``out_index[k] >= 0``: store ``S(t_k)`` in ``S_out[out_index[k]]``.
    method, interp, norm_kind : int codes (``METHOD_CODES``, ``INTERP_CODES``, ``linalg.NORM_*``).
    n_factor, n_max, eq_tol :
        Switch thresholds: ``n_int = ceil(n_factor h ||A_k||)``, exponential step when
        ``n_int > n_max`` or both Jacobians changed by at most ``eq_tol`` relative.
    X_sub, sub_offset :
        With ``interp == INTERP_DENSE``: states at the refinement points of interval
        ``k`` are ``X_sub[sub_offset[k] + i - 1]``, ``i = 1..n_int[k]-1``.
    planned : int
        1: ``branch``/``n_int`` are inputs (from :func:`plan`); 0: outputs.
    S_out : (n_out, nx, np); branch, n_int : (K-1,) per interval.

    Returns
    -------
    int
        -1 on success; otherwise the index ``k`` of the first interval after which
        ``S`` was not finite (the caller raises).
    """
    K, nx = X.shape
    np_ = p.shape[0]
    # ---- work arrays, allocated once
    Ag = np.empty((2, nx, nx))       # Jacobians at grid points k (slot g) and k+1 (slot 1-g)
    Bg = np.empty((2, nx, np_))
    As = np.empty((2, nx, nx))       # Jacobians at refinement points
    Bs = np.empty((2, nx, np_))
    W = np.empty((3, nx, nx))
    T = np.empty((2, nx, np_))
    E = np.empty((nx, nx))
    F = np.empty((nx, nx))
    F2 = np.empty((nx, nx))
    Abar = np.empty((nx, nx))
    ws = linalg.workspace(nx)
    xs = np.empty(nx)
    fk = np.empty(nx)
    fk1 = np.empty(nx)

    jacs(t[0], X[0], p, c, Ag[0], Bg[0])
    if out_index[0] >= 0:
        S_out[out_index[0]] = S
    for k in range(K - 1):
        g = k % 2
        A0, B0 = Ag[g], Bg[g]
        A1, B1 = Ag[1 - g], Bg[1 - g]
        jacs(t[k + 1], X[k + 1], p, c, A1, B1)
        h = t[k + 1] - t[k]
        if planned == 1:
            b = np.int64(branch[k])
            n = np.int64(n_int[k])
        else:
            b, n = _decide(A0, A1, B0, B1, h, method, n_factor, n_max, eq_tol, norm_kind)
            branch[k] = b
            n_int[k] = n
        if b == BRANCH_PBS:
            hs = h / n
            if interp == INTERP_HERMITE and n > 1:
                rhs(t[k], X[k], p, c, fk)
                rhs(t[k + 1], X[k + 1], p, c, fk1)
            Ap, Bp = A0, B0
            for i in range(1, n):
                s = i / n
                if interp == INTERP_DENSE:
                    xs[:] = X_sub[sub_offset[k] + i - 1]
                elif interp == INTERP_HERMITE:
                    s2 = s * s
                    s3 = s2 * s
                    h00 = 2.0 * s3 - 3.0 * s2 + 1.0
                    h10 = (s3 - 2.0 * s2 + s) * h
                    h01 = -2.0 * s3 + 3.0 * s2
                    h11 = (s3 - s2) * h
                    for j in range(nx):
                        xs[j] = h00 * X[k, j] + h10 * fk[j] + h01 * X[k + 1, j] + h11 * fk1[j]
                else:
                    for j in range(nx):
                        xs[j] = X[k, j] + s * (X[k + 1, j] - X[k, j])
                An, Bn = As[i % 2], Bs[i % 2]
                jacs(t[k] + i * hs, xs, p, c, An, Bn)
                steps.pbs_step_into(Ap, An, Bp, Bn, hs, S, W[0], W[1], W[2], T[0], T[1])
                Ap, Bp = An, Bn
            steps.pbs_step_into(Ap, A1, Bp, B1, hs, S, W[0], W[1], W[2], T[0], T[1])
        elif method == METHOD_EXP2 or method == METHOD_PBSR2:
            for i in range(nx):
                for j in range(nx):
                    Abar[i, j] = 0.5 * (A0[i, j] + A1[i, j])
            linalg.exp_phi12_into(Abar, h, E, F, F2, ws)
            steps.exp2_step_into(E, F, F2, h, B0, B1, S, T[0], T[1])
        else:
            linalg.exp_phi1_into(A0, h, E, F, ws)
            steps.exp_step_into(E, F, B0, S, T[0])
        if out_index[k + 1] >= 0:
            for i in range(nx):
                for j in range(np_):
                    if not math.isfinite(S[i, j]):
                        return k
            S_out[out_index[k + 1]] = S
    return -1


def bind(fns):
    """Per-model entry points: the cached kernels with the model's functions filled in.

    Measured trade-off: calling the cached kernel from Python with function
    arguments costs 0.2-0.4 ms per call (numba unboxes the dispatchers), while a
    per-model ``@njit`` closure that binds them costs ~2 us per call but 5+ s to
    compile in every process (numba links and re-optimises the whole kernel
    library into it). A post-hoc solve takes tens of milliseconds, so the direct
    call wins below ~15,000 calls per process; it is what we use.
    """
    jacs_into, rhs_into = fns.jacs_into, fns.rhs_into

    def bound_march(*args):
        return march(jacs_into, rhs_into, *args)

    def bound_plan(*args):
        plan(jacs_into, *args)

    return bound_march, bound_plan
