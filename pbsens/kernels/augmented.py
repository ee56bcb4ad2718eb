"""The system the Rodas5P step loop integrates: the model's states, or states and forward sensitivities.

:mod:`pbsens.kernels.rosenbrock` runs one step loop for two systems; these
kernels are where they differ (right-hand side, Jacobian, linear solve), the
variant chosen by the length of ``idx``:

* plain (``idx`` empty): ``x' = f(t, x)``, Jacobian ``J = df/dx`` (nx, nx), and
  ``(I/(h gamma) - J) k = r`` solved with the LU of ``W = I/(h gamma) - J``;
* forward sensitivities (``idx`` the model parameter indices of the ``ns``
  sensitivity columns, METHOD.md section 6): ``z = (x, S[:, 0], ...,
  S[:, ns-1])``, ``z' = (f, A S_j + B[:, idx_j])`` with ``A = df/dx``,
  ``B = df/dp``. Its Jacobian is block lower triangular,
  ``[[A, 0, ...], [C_0, A, ...], [C_1, 0, A, ...], ...]``,
  ``C_j = d(A S_j + B[:, idx_j])/dx``; ``J`` stores the first block column
  ``(A; C_0; ...; C_{ns-1})`` ((ns+1) nx, nx), ``W`` is the LU of the
  diagonal block ``I/(h gamma) - A`` only (one nx x nx factorisation per
  step), and :func:`block_solve` does block forward substitution; the
  ``nx (ns+1)`` square is never formed.

The compiled Rodas5P path (:mod:`pbsens.kernels.rosenbrock`) uses the variants below the
``compressed couplings`` line instead: ``S`` stored row-major, the couplings as their nonzero
entries, all columns solved as one matrix right-hand side (:func:`coupling_columns`,
:func:`coupled_rhs`, :func:`coupled_solve`); scipy's methods use the kernels above.

``WA`` (2, nx, nx) and ``WB`` (2, nx, np) are scratch for the model's
``jacs_into`` (unused, possibly empty, in the plain case). All kernels are
``nopython``, cached, free of reference counting and allocation. The model
Jacobians are sparse; the products with ``A`` and its differences skip zeros.
"""
from numba import njit, types

from .lu import lu_solve_mat, lu_solve_vec
from .signatures import f8, ivec, jacs_fn, mat, matrix_fn, njit_quiet, tens, vec, vector_fn

__all__ = ["system_rhs", "system_jac", "block_solve", "coupling_columns", "coupled_solve", "coupled_rhs"]


@njit_quiet(types.void(vector_fn, jacs_fn, ivec, tens, tens, f8, vec, vec, vec, vec),
      cache=True, _nrt=False, error_model="numpy")
def system_rhs(rhs, jacs, idx, WA, WB, t, z, p, c, out):
    """``out = f(t, z)`` (plain) or ``(f, A S_j + B[:, idx_j])`` (forward sensitivities)."""
    ns = idx.shape[0]
    if ns == 0:
        rhs(t, z, p, c, out)
        return
    nx = WA.shape[1]
    x = z[:nx]
    rhs(t, x, p, c, out[:nx])
    Am = WA[0]
    Bm = WB[0]
    jacs(t, x, p, c, Am, Bm)
    for j in range(ns):
        off = nx * (j + 1)
        col = idx[j]
        for i in range(nx):
            out[off + i] = Bm[i, col]
    # A S_j for all j at once, skipping the zeros of A (model Jacobians are sparse)
    for i in range(nx):
        for q in range(nx):
            a = Am[i, q]
            if a != 0.0:
                for j in range(ns):
                    off = nx * (j + 1)
                    out[off + i] += a * z[off + q]


@njit_quiet(types.void(matrix_fn, jacs_fn, ivec, tens, tens, f8, vec, vec, vec, mat),
      cache=True, _nrt=False, error_model="numpy")
def system_jac(jac, jacs, idx, WA, WB, t, z, p, c, J):
    """``J = df/dx`` (plain) or the first block column ``(A; C_0; ...)`` (forward sensitivities).

    ``A`` is the model's exact Jacobian. The couplings ``C_j`` need second
    derivatives of ``f``: forward differences of the exact Jacobians ``A``,
    ``B`` in each state direction (one ``jacs`` call per state), increment
    ``sqrt(eps) max(|x_k|, 1e-3 max|x|, 1e-12)``; scipy's methods in
    :mod:`pbsens.sensitivity.forward` use this same kernel. ``z[k]`` is perturbed in place and
    restored bit for bit.
    """
    ns = idx.shape[0]
    if ns == 0:
        jac(t, z, p, c, J)
        return
    nx = WA.shape[1]
    x = z[:nx]
    Am, Ak = WA[0], WA[1]
    Bm, Bk = WB[0], WB[1]
    jacs(t, x, p, c, Am, Bm)
    xmax = 0.0
    for i in range(nx):
        xmax = max(xmax, abs(x[i]))
        for q in range(nx):
            J[i, q] = Am[i, q]
    for k in range(nx):
        xk = x[k]
        dk = 1.4901161193847656e-08 * max(abs(xk), 1e-3 * xmax, 1e-12)
        x[k] = xk + dk
        dk = x[k] - xk            # the increment actually taken
        jacs(t, x, p, c, Ak, Bk)
        x[k] = xk
        inv = 1.0 / dk
        for j in range(ns):
            off = nx * (j + 1)
            col = idx[j]
            for i in range(nx):
                J[off + i, k] = (Bk[i, col] - Bm[i, col]) * inv
        # (dA/dx_k) S_j, skipping the entries of A that x_k does not change (most of them)
        for i in range(nx):
            for q in range(nx):
                d = (Ak[i, q] - Am[i, q]) * inv
                if d != 0.0:
                    for j in range(ns):
                        off = nx * (j + 1)
                        J[off + i, k] += d * z[off + q]


@njit(types.void(mat, ivec, mat, vec), cache=True, _nrt=False, error_model="numpy")
def block_solve(W, piv, J, g):
    """Solve ``(I/(h gamma) - J) k = g`` in place, ``W`` the LU of the diagonal block.

    Plain: one solve with ``W``. Forward sensitivities: block forward
    substitution, ``W k_0 = g_0`` then ``W k_j = g_j + C_j k_0``.
    """
    nx = W.shape[0]
    ns = g.shape[0] // nx - 1
    k0 = g[:nx]
    lu_solve_vec(W, piv, k0)
    for j in range(ns):
        off = nx * (j + 1)
        for i in range(nx):
            s = 0.0
            r = off + i
            for q in range(nx):
                s += J[r, q] * k0[q]
            g[r] += s
        lu_solve_vec(W, piv, g[off:off + nx])


# ------------------------------------------------------------------ compressed couplings (Rodas5P)
#
# The compiled Rodas5P path stores the sensitivities transposed, ``z = (x, S)`` with ``S`` (nx, ns)
# row-major (z[nx + i ns + j] = S[i, j]; the caller permutes in and out), so that the work on all
# ns columns is done as contiguous axpys over rows of S. It does not store the couplings C_j as
# dense nx x nx blocks: the entry (i, k) of C_j = d(A S_j + B[:, idx_j])/dx is the derivative of
# row i of A S_j + B_j in x_k, so it can only be nonzero where row i of A or of B changes with x_k.
# coupling_columns keeps those (i, k) (the same forward differences as system_jac, so the same
# values) as a list ``pat`` and one row of ``Cs`` per entry holding that entry for every column j;
# coupled_solve multiplies with that list and solves all ns columns with the one LU as a matrix
# right-hand side (nx, ns). Work per stage ~ (entries of the list + nonzeros of the LU) x ns, not
# 2 nx^2 ns. ``Cs`` (nx^2, ns): rows [0, npat) the entries; ``pat`` (1 + 2 nx^2,) int64:
# ``pat[0] = npat``, then (row, column) of each entry.


@njit_quiet(types.void(jacs_fn, ivec, tens, tens, f8, vec, vec, vec, mat, mat, ivec),
      cache=True, _nrt=False, error_model="numpy")
def coupling_columns(jacs, idx, WA, WB, t, z, p, c, J, Cs, pat):
    """``J = A`` (nx, nx) and the couplings ``C_j`` compressed into ``Cs``/``pat`` (see above).

    ``z = (x, S)`` with ``S`` (nx, ns) row-major. The values are those of :func:`system_jac` (same
    increments, same order of summation): ``C_j[i, k] = (B_k - B)[i, idx_j] / d_k + sum_q (A_k -
    A)[i, q] / d_k S[q, j]``; ``z[k]`` is perturbed in place and restored bit for bit.
    """
    ns = idx.shape[0]
    nx = WA.shape[1]
    x = z[:nx]
    St = z[nx:].reshape((nx, ns))
    Am, Ak = WA[0], WA[1]
    Bm, Bk = WB[0], WB[1]
    jacs(t, x, p, c, Am, Bm)
    xmax = 0.0
    for i in range(nx):
        xmax = max(xmax, abs(x[i]))
        for q in range(nx):
            J[i, q] = Am[i, q]
    npar = WB.shape[2]
    npat = 0
    for k in range(nx):
        xk = x[k]
        dk = 1.4901161193847656e-08 * max(abs(xk), 1e-3 * xmax, 1e-12)
        x[k] = xk + dk
        dk = x[k] - xk            # the increment actually taken
        jacs(t, x, p, c, Ak, Bk)
        x[k] = xk
        inv = 1.0 / dk
        for i in range(nx):
            # entry (i, k) only if row i of A or B changed (a whole-row test first: most rows do not)
            changed = False
            for q in range(nx):
                changed |= Ak[i, q] != Am[i, q]
            if not changed:
                for q in range(npar):
                    changed |= Bk[i, q] != Bm[i, q]
            if not changed:
                continue
            row = Cs[npat]
            for j in range(ns):
                col = idx[j]
                row[j] = (Bk[i, col] - Bm[i, col]) * inv
            for q in range(nx):
                d = (Ak[i, q] - Am[i, q]) * inv
                if d != 0.0:
                    sq = St[q]
                    for j in range(ns):
                        row[j] += d * sq[j]
            pat[1 + 2 * npat] = i
            pat[2 + 2 * npat] = k
            npat += 1
    pat[0] = npat


@njit_quiet(types.void(vector_fn, jacs_fn, ivec, tens, tens, f8, vec, vec, vec, vec),
      cache=True, _nrt=False, error_model="numpy")
def coupled_rhs(rhs, jacs, idx, WA, WB, t, z, p, c, out):
    """``out = (f, A S + B[:, idx])`` for ``z = (x, S)``, ``S`` (nx, ns) row-major (rows of ``S`` as
    contiguous axpys; :func:`system_rhs`'s values in the other layout); plain ``rhs`` without columns."""
    ns = idx.shape[0]
    if ns == 0:
        rhs(t, z, p, c, out)
        return
    nx = WA.shape[1]
    x = z[:nx]
    rhs(t, x, p, c, out[:nx])
    Am = WA[0]
    Bm = WB[0]
    jacs(t, x, p, c, Am, Bm)
    St = z[nx:].reshape((nx, ns))
    Ot = out[nx:].reshape((nx, ns))
    for i in range(nx):
        oi = Ot[i]
        bi = Bm[i]
        for j in range(ns):
            oi[j] = bi[idx[j]]
        for q in range(nx):
            a = Am[i, q]
            if a != 0.0:
                sq = St[q]
                for j in range(ns):
                    oi[j] += a * sq[j]


@njit(types.void(mat, ivec, mat, ivec, vec), cache=True, _nrt=False, error_model="numpy")
def coupled_solve(W, piv, Cs, pat, g):
    """:func:`block_solve` with the compressed couplings of :func:`coupling_columns`, in place.

    ``g = (g_0, G)``, ``G`` (nx, ns) row-major: ``W k_0 = g_0``, then ``W K = G + (C_j k_0)_j`` with
    ``K`` (nx, ns) as one matrix right-hand side (:func:`pbsens.kernels.lu.lu_solve_mat`, which skips the
    zeros of the LU). With no sensitivity columns (``g`` of length nx) just the one solve.
    """
    nx = W.shape[0]
    ns = g.shape[0] // nx - 1
    k0 = g[:nx]
    lu_solve_vec(W, piv, k0)
    if ns == 0:
        return
    G = g[nx:].reshape((nx, ns))
    for e in range(pat[0]):
        v = k0[pat[2 + 2 * e]]
        if v != 0.0:
            gi = G[pat[1 + 2 * e]]
            row = Cs[e]
            for j in range(ns):
                gi[j] += v * row[j]
    lu_solve_mat(W, piv, G)


#: int32 index arrays (scipy.sparse's CSC indices)
ivec32 = types.Array(types.int32, 1, "C")


@njit(types.int64(mat, vec, ivec32, ivec32), cache=True)
def fill_csc(J, data, indices, indptr):
    """CSC form of the augmented Jacobian from its first block column ``J``, nonzeros only; returns nnz.

    ``J = (A; C_0; ...; C_{ns-1})`` ((ns+1) nx, nx). Column ``k`` of the ``x``
    block is ``J[:, k]`` (every block row); column ``k`` of block ``S_j`` is
    ``A[:, k]`` in the rows of block ``j + 1``. Exact zeros are left out: the
    methods form ``I - c J`` with sparse arithmetic, which drops them anyway,
    so the Newton matrix is the same, formed from half as many entries.
    ``data``/``indices`` need room for ``nx n + ns nx^2`` entries (:func:`pbsens.sensitivity.forward._csc_work`).
    """
    n, nx = J.shape
    ns = n // nx - 1
    pos = 0
    indptr[0] = 0
    for k in range(nx):
        for r in range(n):
            v = J[r, k]
            if v != 0.0:
                data[pos] = v
                indices[pos] = r
                pos += 1
        indptr[k + 1] = pos
    col = nx
    for j in range(ns):
        off = nx * (j + 1)
        for k in range(nx):
            for i in range(nx):
                v = J[i, k]
                if v != 0.0:
                    data[pos] = v
                    indices[pos] = off + i
                    pos += 1
            col += 1
            indptr[col] = pos
    return pos
