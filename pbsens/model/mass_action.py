"""Random sparse mass-action networks as generic compiled code (benchmarks and tests of the
sparse kernels, METHOD.md section 12).

``n`` species, ``2n`` reactions: ``n`` unimolecular (``X_i -> X_j`` or degradation
``X_i -> 0``) and ``n`` bimolecular (``X_i + X_j -> X_k``), partners drawn uniformly, plus
a constant inflow into every species. Reaction ``r`` has rate ``p[cls_r] w_r x_i (x_j)``:
the ``n_classes`` parameters are rate constants shared by classes of reactions (fixed
weights ``w_r`` = 10^U(-1, 1)), so ``np`` does not grow with ``n``. The network is carried
in the model constants ``c`` (no compilation per network), and the model has sparse
Jacobians natively: ``jac_x_pattern``, ``jac_p_pattern`` and ``fns.jac_x_data_into``,
``fns.jac_p_data_into`` (as well as the dense ``jacs_into`` for the dense path).

Layout of ``c``: ``[n, R, nnzA, nnzB]``, ``x0`` (n), inflow (n), then per reaction a
record of :data:`RS` numbers: reactants ``r1, r2`` (-1: none), class, weight, four
affected species (-1: none), their stoichiometries, the CSR positions in ``A``'s values
of (affected species, reactant) (4 x 2) and in ``B``'s values of (affected species, class).
"""
import numpy as np
from numba import njit

from ..kernels.signatures import init_vec_sig, jacs_fn_sig, matrix_fn_sig, vector_fn_sig
# no outputs and x0 independent of p: the generic random linear system's functions serve as they are
from .linear import dx0_dp_into, out_into, out_jac_p_into, out_jac_x_into  # noqa: F401 (model functions)

__all__ = ["random_mass_action_model", "RS"]

H = 4
RS = 24


@njit(inline="always")
def _rate(x, p, c, b):
    """Rate of the reaction whose record starts at ``c[b]``; and its two partial derivatives."""
    r1 = int(c[b])
    r2 = int(c[b + 1])
    k = p[int(c[b + 2])] * c[b + 3]
    if r2 < 0:
        return k * x[r1], k, 0.0
    return k * x[r1] * x[r2], k * x[r2], k * x[r1]


@njit(vector_fn_sig, cache=True)
def rhs_into(t, x, p, c, out):
    n = int(c[0])
    R = int(c[1])
    for i in range(n):
        out[i] = c[H + n + i]
    base = H + 2 * n
    for r in range(R):
        b = base + r * RS
        v = _rate(x, p, c, b)[0]
        for q in range(4):
            a = int(c[b + 4 + q])
            if a >= 0:
                out[a] += c[b + 8 + q] * v


@njit(vector_fn_sig, cache=True)
def jac_x_data_into(t, x, p, c, data):
    n = int(c[0])
    R = int(c[1])
    data[:] = 0.0
    base = H + 2 * n
    for r in range(R):
        b = base + r * RS
        v, d1, d2 = _rate(x, p, c, b)
        for q in range(4):
            if c[b + 4 + q] >= 0:
                s = c[b + 8 + q]
                data[int(c[b + 12 + 2 * q])] += s * d1
                if c[b + 1] >= 0:
                    data[int(c[b + 13 + 2 * q])] += s * d2


@njit(vector_fn_sig, cache=True)
def jac_p_data_into(t, x, p, c, data):
    n = int(c[0])
    R = int(c[1])
    data[:] = 0.0
    base = H + 2 * n
    for r in range(R):
        b = base + r * RS
        r1 = int(c[b])
        r2 = int(c[b + 1])
        dv = c[b + 3] * x[r1] * (x[r2] if r2 >= 0 else 1.0)      # d rate / d p[class]
        for q in range(4):
            if c[b + 4 + q] >= 0:
                data[int(c[b + 20 + q])] += c[b + 8 + q] * dv


@njit(matrix_fn_sig, cache=True)
def jac_x_into(t, x, p, c, A):
    n = int(c[0])
    R = int(c[1])
    A[:, :] = 0.0
    base = H + 2 * n
    for r in range(R):
        b = base + r * RS
        v, d1, d2 = _rate(x, p, c, b)
        r1 = int(c[b])
        r2 = int(c[b + 1])
        for q in range(4):
            a = int(c[b + 4 + q])
            if a >= 0:
                A[a, r1] += c[b + 8 + q] * d1
                if r2 >= 0:
                    A[a, r2] += c[b + 8 + q] * d2


@njit(matrix_fn_sig, cache=True)
def jac_p_into(t, x, p, c, B):
    n = int(c[0])
    R = int(c[1])
    B[:, :] = 0.0
    base = H + 2 * n
    for r in range(R):
        b = base + r * RS
        r1 = int(c[b])
        r2 = int(c[b + 1])
        dv = c[b + 3] * x[r1] * (x[r2] if r2 >= 0 else 1.0)
        for q in range(4):
            a = int(c[b + 4 + q])
            if a >= 0:
                B[a, int(c[b + 2])] += c[b + 8 + q] * dv


@njit(jacs_fn_sig, cache=True)
def jacs_into(t, x, p, c, A, B):
    jac_x_into(t, x, p, c, A)
    jac_p_into(t, x, p, c, B)


@njit(init_vec_sig, cache=True)
def x0_into(p, c, out):
    n = int(c[0])
    for i in range(n):
        out[i] = c[H + i]




def _csr(entries, n_rows):
    rows = np.array(sorted(entries))
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.add.at(indptr, rows[:, 0] + 1, 1)
    indptr = np.cumsum(indptr).astype(np.int64)
    pos = {(int(i), int(j)): k for k, (i, j) in enumerate(rows)}
    return indptr, np.ascontiguousarray(rows[:, 1], dtype=np.int64), pos


def draw(n, n_classes, seed, linear=False):
    """The network's constants ``c``, the CSR patterns of ``A`` and ``B``, and ``p``."""
    rng = np.random.default_rng(seed)
    recs = []
    for r in range(2 * n):
        if r < n or linear:                        # unimolecular: conversion or degradation
            i = int(rng.integers(n))
            reac = [i]
            if rng.uniform() < 0.8:
                j = int(rng.integers(n - 1))
                prods = [j + (j >= i)]
            else:
                prods = []
        else:                                      # bimolecular: X_i + X_j -> X_k
            i, j, k = (int(v) for v in rng.choice(n, size=3, replace=False))
            reac, prods = [i, j], [k]
        recs.append((reac, prods, int(rng.integers(n_classes)), 10.0 ** rng.uniform(-1.0, 1.0)))
    a_entries, b_entries = set(), set()
    for reac, prods, cls, _ in recs:
        for s in reac + prods:
            for rj in reac:
                a_entries.add((s, rj))
            b_entries.add((s, cls))
    Ap, Ai, posA = _csr(a_entries, n)
    Bp, Bi, posB = _csr(b_entries, n)
    c = np.full(H + 2 * n + RS * len(recs), -1.0)
    c[:H] = (n, len(recs), Ai.size, Bi.size)
    c[H:H + n] = rng.uniform(0.5, 1.5, n)          # x0
    c[H + n:H + 2 * n] = rng.uniform(0.0, 0.5, n)  # inflow
    for r, (reac, prods, cls, w) in enumerate(recs):
        b = H + 2 * n + r * RS
        c[b] = reac[0]
        c[b + 1] = reac[1] if len(reac) > 1 else -1
        c[b + 2] = cls
        c[b + 3] = w
        for q, (s, st) in enumerate([(s, -1.0) for s in reac] + [(s, 1.0) for s in prods]):
            c[b + 4 + q] = s
            c[b + 8 + q] = st
            c[b + 12 + 2 * q] = posA[(s, reac[0])]
            if len(reac) > 1:
                c[b + 13 + 2 * q] = posA[(s, reac[1])]
            c[b + 20 + q] = posB[(s, cls)]
    p = rng.uniform(0.5, 1.5, n_classes)
    return c, (Ap, Ai), (Bp, Bi), p


def random_mass_action_model(n, n_classes=20, seed=0, linear=False):
    """A random sparse mass-action network of ``n`` species (module docstring) as a Model;
    ``linear=True``: all ``2n`` reactions unimolecular (a sparse linear system ``x' = A(p) x + u``)."""
    from ..errors import PbsensError
    from .model import CompiledFunctions, Model
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 3:
        raise PbsensError(f"'n' must be an integer >= 3, got {n!r}")
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 1:
        raise PbsensError(f"'n_classes' must be a positive integer, got {n_classes!r}")
    import sys
    c, px, pp, p = draw(int(n), int(n_classes), seed, bool(linear))
    fns = CompiledFunctions.from_module(sys.modules[__name__])
    fns.jac_x_data_into = jac_x_data_into
    fns.jac_p_data_into = jac_p_data_into
    m = Model(f"{'SparseLinear' if linear else 'MassAction'}{n}", [f"x{i + 1}" for i in range(n)], [f"k{i + 1}" for i in range(n_classes)], p,
              fns, constants=c, title=f"Random mass-action network, n = {n}, seed = {seed}",
              meta={"seed": seed})
    m.jac_x_pattern = px
    m.jac_p_pattern = pp
    return m
