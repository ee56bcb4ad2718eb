"""Sparsity patterns of a model's Jacobians ``A = df/dx``, ``B = df/dp`` for the sparse kernels.

A model that carries them (compiled with sparse Jacobians) has ``jac_x_pattern`` and
``jac_p_pattern`` = ``(indptr, indices)`` (row-major CSR, rows = states, int64) and the
compiled ``jac_x_data_into(t, x, p, c, data)`` / ``jac_p_data_into(t, x, p, c, data)``
filling the CSR values in that order (as attributes of the model or of ``model.fns``).

For every other model this module is the adapter: the pattern is the union of the
non-zeros of the dense Jacobians at the model's default point and at a few random
positive states and perturbed parameters, and the sparse march gathers the values from
the dense ``jacs_into`` and checks that nothing falls outside the pattern (a miss adds
the entries and the march is repeated: :func:`extend`). Costs ``O(nx^2 + nx np)`` per
grid point for the dense evaluation, small against the dense march it replaces.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SparseJacobians", "sparse_jacobians", "extend", "density"]

#: Random points (besides the default one) whose dense Jacobians make the adapter's pattern.
N_PROBES = 3


@dataclass
class SparseJacobians:
    """CSR patterns of ``A`` and ``B`` and how their values are obtained."""
    Ap: np.ndarray
    Ai: np.ndarray
    Bp: np.ndarray
    Bi: np.ndarray
    n_params: int
    jxd: object = None          # compiled jac_x_data_into, or None (gather from the dense Jacobians)
    jpd: object = None

    @property
    def gather(self) -> bool:
        return self.jxd is None

    @property
    def nnz(self):
        return int(self.Ai.size), int(self.Bi.size)


def _csr(mask):
    rows, cols = np.nonzero(mask)          # row-major order: sorted by row, then column
    indptr = np.zeros(mask.shape[0] + 1, dtype=np.int64)
    np.add.at(indptr, rows + 1, 1)
    return np.cumsum(indptr).astype(np.int64), cols.astype(np.int64)


def _mask(Ap, Ai, shape):
    m = np.zeros(shape, dtype=bool)
    for i in range(shape[0]):
        m[i, Ai[Ap[i]:Ap[i + 1]]] = True
    return m


def _native(model):
    def get(name):
        v = getattr(model, name, None)
        return v if v is not None else getattr(getattr(model, "fns", None), name, None)
    px, pp = getattr(model, "jac_x_pattern", None), getattr(model, "jac_p_pattern", None)
    jxd, jpd = get("jac_x_data_into"), get("jac_p_data_into")
    if px is None or pp is None or jxd is None or jpd is None:
        return None
    as_i8 = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731
    return SparseJacobians(as_i8(px[0]), as_i8(px[1]), as_i8(pp[0]), as_i8(pp[1]), model.n_params, jxd, jpd)


def _dense_jacs(model, t, x, p):
    nx, np_ = model.n_states, model.n_params
    A = np.zeros((nx, nx))
    B = np.zeros((nx, np_))
    model.fns.jacs_into(float(t), np.ascontiguousarray(x, dtype=np.float64),
                        np.ascontiguousarray(p, dtype=np.float64), model.constants, A, B)
    return A, B


def sparse_jacobians(model) -> SparseJacobians:
    """The model's Jacobian patterns: its own, or (adapter) probed from dense evaluations; cached."""
    cache = model.__dict__.setdefault("_kernels", {})
    if "sparse" in cache:
        return cache["sparse"]
    sj = _native(model)
    if sj is None:
        rng = np.random.default_rng(12345)
        x0, p0 = model.x0, model.p
        mA = np.zeros((model.n_states, model.n_states), dtype=bool)
        mB = np.zeros((model.n_states, model.n_params), dtype=bool)
        points = [(x0, p0)]
        for _ in range(N_PROBES):
            x = np.abs(x0) * rng.uniform(0.5, 1.5, x0.size) + rng.uniform(0.1, 1.0, x0.size)
            points.append((x, p0 * rng.uniform(0.5, 2.0, p0.size)))
        with np.errstate(all="ignore"):
            for x, p in points:
                A, B = _dense_jacs(model, 0.0, x, p)
                mA |= (A != 0) & np.isfinite(A) | ~np.isfinite(A)
                mB |= (B != 0) & np.isfinite(B) | ~np.isfinite(B)
        Ap, Ai = _csr(mA)
        Bp, Bi = _csr(mB)
        sj = SparseJacobians(Ap, Ai, Bp, Bi, model.n_params)
    cache["sparse"] = sj
    return sj


def extend(model, sj: SparseJacobians, t, x, p) -> SparseJacobians:
    """Add the non-zeros of the dense Jacobians at ``(t, x, p)`` to the adapter's patterns."""
    A, B = _dense_jacs(model, t, x, p)
    mA = _mask(sj.Ap, sj.Ai, A.shape) | (A != 0)
    mB = _mask(sj.Bp, sj.Bi, B.shape) | (B != 0)
    Ap, Ai = _csr(mA)
    Bp, Bi = _csr(mB)
    new = SparseJacobians(Ap, Ai, Bp, Bi, model.n_params)
    model.__dict__.setdefault("_kernels", {})["sparse"] = new
    return new


def density(model) -> float:
    """Fraction of structural non-zeros of ``A = df/dx``."""
    sj = sparse_jacobians(model)
    return sj.Ai.size / max(model.n_states ** 2, 1)
