"""Linear conservation laws found numerically: the left null space that every ``A = df/dx`` and
``B = df/dp`` of a model share.

A mass-action network ``x' = N v(x, p)`` has ``L f = 0`` for every row ``l`` of ``L`` with
``l N = 0`` (conserved totals), hence ``L A = 0`` and ``L B = 0`` at every state and parameter
vector, and ``A`` is singular. The exp2 midpoint correction uses ``L`` to replace the matrix
function ``F3`` by a linear solve with the non-singular ``Abar + L^T L`` (METHOD.md section 14,
"Without F3"), and the sparse march takes its dense steps in the coordinates the laws leave
(:func:`dependent_states`, :mod:`pbsens.kernels.reduced`); the march checks ``L A = 0`` and
``L B = 0`` at every grid point it uses them at, so a row that is not a law of the model only
costs the faster path, never a wrong result.
"""
from __future__ import annotations

import numpy as np

from ..system.threads import blas_single_thread

__all__ = ["shared_left_null_space", "dependent_states", "MAX_STATES", "MAX_COND"]

#: Models with more states are not searched (the search is an SVD of ``nx x samples (nx + np)``).
MAX_STATES = 300
#: A singular value of the column-normalised samples below this (relative to the largest) is a law;
#: the next one up must be at least ``_GAP`` times larger, else no law is reported.
_NULL = 1e-12
_GAP = 1e3
#: :func:`dependent_states` gives up when the laws' block on the chosen states is worse conditioned.
MAX_COND = 1e6


def shared_left_null_space(model, p=None, samples=4, seed=0):
    """Orthonormal rows ``L`` (``k x nx``, ``k`` possibly 0) with ``L A = 0`` and ``L B = 0`` at
    ``samples`` random positive states (``x_i = (1 + |x0_i|) e^u``, ``u`` uniform in [-1, 1]).

    Columns are normalised before the SVD: that leaves the left null space unchanged and keeps
    a small but genuine direction (a slow reaction) apart from the exact zeros. Non-finite
    Jacobians at a sample, an unclear gap in the singular values, or a model with more than
    :data:`MAX_STATES` states give no laws.
    """
    nx = model.n_states
    if nx == 0 or nx > MAX_STATES:
        return np.zeros((0, nx))
    p = model.check_p(p)
    x0 = np.abs(model.initial_state(p))
    rng = np.random.default_rng(seed)
    blocks = []
    jacs = model.fns.jacs_into             # compiled and cached (model.jac_x would compile a dispatcher)
    c = model.constants
    for _ in range(samples):
        x = (1.0 + x0) * np.exp(rng.uniform(-1.0, 1.0, nx))
        A = np.empty((nx, nx))
        B = np.empty((nx, p.size))
        jacs(0.0, x, p, c, A, B)
        if not (np.all(np.isfinite(A)) and np.all(np.isfinite(B))):
            return np.zeros((0, nx))
        blocks += [A, B]
    M = np.hstack(blocks)
    norms = np.sqrt((M * M).sum(axis=0))
    M = M[:, norms > 0] / norms[norms > 0]
    if M.shape[1] == 0:
        return np.zeros((0, nx))
    with blas_single_thread():       # OpenBLAS's threads made this 20x slower on 2 busy cores
        if M.shape[1] > nx:
            M = np.linalg.qr(M.T, mode="r").T    # M = R^T Q^T: the same left singular vectors
        U, sv, _ = np.linalg.svd(M, full_matrices=True)
    sv = np.concatenate([sv, np.zeros(nx - sv.size)])
    rank = int(np.sum(sv > _NULL * sv[0]))
    if rank == nx:
        return np.zeros((0, nx))
    if rank > 0 and sv[rank - 1] < _GAP * max(sv[rank], _NULL * sv[0]):
        return np.zeros((0, nx))
    return np.ascontiguousarray(U[:, rank:].T)


def dependent_states(L, rate=None):
    """The states the laws ``L`` (``k x nx``, orthonormal rows) eliminate, and how: for every ``v``
    with ``L v = 0``, ``v[dep] = -K v[ind]`` (``K = L[:, dep]^-1 L[:, ind]``, ``k x (nx - k)``).

    ``dep`` is chosen by column-pivoted QR of ``L`` with column ``j`` weighted by
    ``1 / (1 + rate_j / median(rate))``: a well-conditioned ``L[:, dep]`` that avoids the
    fastest states (``rate``: e.g. ``max |A_jj|`` along the trajectory), so that they stay
    coordinates of the reduced matrix, where the phi kernels deflate them
    (:mod:`pbsens.kernels.phi_deflate`). Returns ``(dep, ind, K, L[:, dep]^-1)`` (``dep``, ``ind``
    sorted ``int64`` index arrays), or empty ones when there are no laws or
    ``cond(L[:, dep]) > MAX_COND``.
    """
    import scipy.linalg as sla
    L = np.asarray(L, dtype=np.float64)
    k, nx = L.shape
    none = (np.zeros(0, np.int64), np.arange(nx, dtype=np.int64), np.zeros((0, nx)), np.zeros((0, 0)))
    if k == 0 or k >= nx:
        return none
    w = np.ones(nx)
    if rate is not None:
        rate = np.abs(np.asarray(rate, dtype=np.float64))
        pos = rate[np.isfinite(rate) & (rate > 0)]
        if pos.size:
            w = 1.0 / (1.0 + np.where(np.isfinite(rate), rate, np.inf) / np.median(pos))
    _, _, piv = sla.qr(L * w, mode="economic", pivoting=True)
    dep = np.sort(piv[:k]).astype(np.int64)
    ind = np.setdiff1d(np.arange(nx), dep).astype(np.int64)
    LD = L[:, dep]
    if not np.linalg.cond(LD) <= MAX_COND:
        return none
    return dep, ind, np.ascontiguousarray(np.linalg.solve(LD, L[:, ind])), np.ascontiguousarray(np.linalg.inv(LD))


def eliminated_on_grid(model, L, t, x, p, points=5):
    """``(dep, K, L[:, dep]^-1)`` of :func:`dependent_states` for the laws ``L`` along a trajectory: the
    fastest states (largest ``|A_jj|`` at ``points`` grid points of ``(t, x)``) avoided; empty arrays
    without laws or grid."""
    nx = model.n_states
    if L.shape[0] == 0 or len(t) == 0:
        return np.zeros(0, np.int64), np.zeros((0, max(nx - L.shape[0], 0))), np.zeros((0, 0))
    rate = np.zeros(nx)
    A = np.empty((nx, nx))
    B = np.empty((nx, model.n_params))
    for k in np.unique(np.linspace(0, len(t) - 1, points).astype(np.int64)):
        model.fns.jacs_into(float(t[k]), np.ascontiguousarray(x[k]), p, model.constants, A, B)
        rate = np.maximum(rate, np.abs(np.diag(A)))
    dep, _, K, LDinv = dependent_states(L, rate)
    return dep, K, LDinv
