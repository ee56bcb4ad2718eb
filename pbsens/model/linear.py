"""The paper's random linear system (Section 8, Figure 6) as generic compiled code.

``x' = A x + p**2 + 1`` with ``A = -B^T B``; ``B`` and ``p`` uniform on [0, 1],
``x0 = ones(n)``. Its Jacobians are ``A`` and ``2 diag(p)`` (constant in time).
The functions below are compiled once per machine and read ``A`` from the model
constants ``c`` (``c = A.ravel()``), so drawing a new system costs no compilation:
Figure 6 uses 200 of them.
"""
import numpy as np
from numba import njit

from ..kernels.signatures import init_mat_sig, init_vec_sig, jacs_fn_sig, matrix_fn_sig, vector_fn_sig


@njit(vector_fn_sig, cache=True)
def rhs_into(t, x, p, c, out):
    n = x.shape[0]
    for i in range(n):
        s = p[i] * p[i] + 1.0
        for j in range(n):
            s += c[i * n + j] * x[j]
        out[i] = s


@njit(matrix_fn_sig, cache=True)
def jac_x_into(t, x, p, c, A):
    n = x.shape[0]
    for i in range(n):
        for j in range(n):
            A[i, j] = c[i * n + j]


@njit(matrix_fn_sig, cache=True)
def jac_p_into(t, x, p, c, B):
    B[:, :] = 0.0
    for i in range(x.shape[0]):
        B[i, i] = 2.0 * p[i]


@njit(jacs_fn_sig, cache=True)
def jacs_into(t, x, p, c, A, B):
    jac_x_into(t, x, p, c, A)
    jac_p_into(t, x, p, c, B)


@njit(init_vec_sig, cache=True)
def x0_into(p, c, out):
    out[:] = 1.0


@njit(init_mat_sig, cache=True)
def dx0_dp_into(p, c, S0):
    S0[:, :] = 0.0


@njit(vector_fn_sig, cache=True)
def out_into(t, x, p, c, out):
    return


@njit(matrix_fn_sig, cache=True)
def out_jac_x_into(t, x, p, c, H):
    return


@njit(matrix_fn_sig, cache=True)
def out_jac_p_into(t, x, p, c, H):
    return


@njit(vector_fn_sig, cache=True)
def jac_x_data_into(t, x, p, c, data):
    """``A`` in CSR order of its dense pattern (row-major)."""
    data[:] = c


@njit(vector_fn_sig, cache=True)
def jac_p_data_into(t, x, p, c, data):
    """``B = 2 diag(p)`` in CSR order of its diagonal pattern."""
    for i in range(x.shape[0]):
        data[i] = 2.0 * p[i]


def patterns(n):
    """CSR ``(indptr, indices)`` of ``A`` (dense) and ``B`` (diagonal)."""
    dense = (np.arange(n + 1, dtype=np.int64) * n, np.tile(np.arange(n, dtype=np.int64), n))
    diag = (np.arange(n + 1, dtype=np.int64), np.arange(n, dtype=np.int64))
    return dense, diag


def draw(n, seed):
    """Draw ``(A, p)`` of the random linear system of dimension ``n``."""
    rng = np.random.default_rng(seed)
    Bm = rng.uniform(0.0, 1.0, size=(n, n))
    p = rng.uniform(0.0, 1.0, size=n)
    return -Bm.T @ Bm, p
