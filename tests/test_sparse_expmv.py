"""The action of the exponential on CSR matrices (pbsens.kernels.expmv) against scipy's
expm_multiply and the dense exponential of the augmented block matrix (METHOD.md section 12)."""
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st
from scipy.linalg import expm
from scipy.sparse.linalg import expm_multiply

from pbsens.kernels import expmv as E


def _i8(a):
    return np.ascontiguousarray(a, dtype=np.int64)


def stable_sparse(n, density, rng):
    """A random sparse matrix with a strictly dominant negative diagonal (stable, ||A||_1 ~ 1)."""
    M = sp.random(n, n, density=density, random_state=rng, format="csr")
    M.data = rng.uniform(-1.0, 1.0, M.nnz)
    M = M - sp.diags(np.asarray(abs(M).sum(axis=0)).ravel() + rng.uniform(0.1, 1.0, n))
    M = sp.csr_matrix(M)
    M.sort_indices()
    return M


def action(A, B, D, h, S):
    n, p = S.shape
    out, T, T2 = np.empty((n, p)), np.empty((n, p)), np.empty((n, p))
    V = np.empty((E.NV, max(n, p)))
    dw = np.empty(2 * (E.P_MAX + 2))
    Dd = np.zeros(B.nnz) if D is None else np.ascontiguousarray(D.data)
    terms, s = E.expmv_forced_into(_i8(A.indptr), _i8(A.indices), np.ascontiguousarray(A.data, dtype=float),
                                   _i8(B.indptr), _i8(B.indices), np.ascontiguousarray(B.data, dtype=float),
                                   Dd, D is not None, h, np.ascontiguousarray(S), out, T, T2, V, dw)
    return out, terms, s


def augmented(A, B, D, h):
    """The block matrix and start block whose exponential action the kernel computes."""
    n, p = B.shape
    if D is None:
        W = sp.bmat([[A, B], [None, sp.csr_matrix((p, p))]]).tocsc()
        return W, lambda S: np.vstack([S, np.eye(p)])
    W = sp.bmat([[A, B, D], [None, sp.csr_matrix((p, p)), None],
                 [None, sp.eye(p) / h, sp.csr_matrix((p, p))]]).tocsc()
    return W, lambda S: np.vstack([S, np.eye(p), np.zeros((p, p))])


def _system(n, p, scale, seed):
    rng = np.random.default_rng(seed)
    A = stable_sparse(n, 0.15, rng) * scale
    A = sp.csr_matrix(A)
    A.sort_indices()
    B = sp.random(n, p, density=0.3, random_state=rng, format="csr")
    B.data = rng.uniform(-1, 1, B.nnz)
    B.sort_indices()
    D = sp.csr_matrix((rng.uniform(-1, 1, B.nnz), B.indices.copy(), B.indptr.copy()), shape=B.shape)
    S = rng.standard_normal((n, p))
    return A, B, D, S


@pytest.mark.parametrize("norm", [1e-8, 1e-4, 1e-1, 1.0, 10.0, 1e2, 1e3, 1e4])
@pytest.mark.parametrize("second", [False, True])
def test_against_scipy_expm_multiply(norm, second):
    A, B, D, S = _system(25, 6, 1.0, 1)
    h = norm / sp.linalg.norm(A, 1)
    Dm = D if second else None
    got = action(A, B, Dm, h, S)[0]
    W, start = augmented(A, B, Dm, h)
    ref = expm_multiply(h * W, start(S))[:25]
    assert np.abs(got - ref).max() <= 1e-11 * max(np.abs(ref).max(), 1.0)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 30), p=st.integers(1, 8), log_scale=st.floats(-8, 3), seed=st.integers(0, 2**31),
       second=st.booleans())
def test_random_sparse_systems_against_dense_augmented_expm(n, p, log_scale, seed, second):
    A, B, D, S = _system(n, p, 10.0 ** log_scale, seed)
    h = 0.7
    Dm = D if second else None
    got = action(A, B, Dm, h, S)[0]
    W, start = augmented(A, B, Dm, h)
    ref = (expm(h * W.toarray()) @ start(S))[:n]      # independent: dense Pade of the block matrix
    assert np.abs(got - ref).max() <= 1e-10 * max(np.abs(ref).max(), 1.0)


def test_singular_zero_matrix_is_exact():
    """A = 0 (all states conserved): S + h B (exp) and S + h B + (h/2) D (exp2), exactly."""
    n, p, h = 6, 3, 2.5
    A = sp.csr_matrix((n, n))
    rng = np.random.default_rng(3)
    B = sp.csr_matrix(rng.uniform(-1, 1, (n, p)))
    D = sp.csr_matrix(rng.uniform(-1, 1, (n, p)))
    S = rng.standard_normal((n, p))
    assert np.allclose(action(A, B, None, h, S)[0], S + h * B.toarray(), rtol=0, atol=1e-14)
    assert np.allclose(action(A, B, D, h, S)[0], S + h * B.toarray() + 0.5 * h * D.toarray(), rtol=0, atol=1e-14)


def test_zero_step_returns_S():
    A, B, D, S = _system(5, 2, 1.0, 4)
    assert np.array_equal(action(A, B, D, 0.0, S)[0], S)


def test_terms_grow_with_the_norm_and_stop_early():
    A, B, _, S = _system(20, 4, 1.0, 5)
    few = action(A, B, None, 1e-6, S)[1]
    many = action(A, B, None, 50.0, S)[1]
    assert few <= 6 < many


def test_csr_helpers_against_numpy():
    rng = np.random.default_rng(7)
    A = stable_sparse(15, 0.3, rng)
    X = rng.standard_normal((15, 4))
    Y = np.empty((15, 4))
    E.csr_matmul_into(_i8(A.indptr), _i8(A.indices), A.data, X, Y)
    assert np.allclose(Y, A @ X, rtol=1e-14, atol=1e-14)
    Ad = A.toarray()
    assert E.csr_trace(_i8(A.indptr), _i8(A.indices), A.data) == pytest.approx(np.trace(Ad), rel=1e-14)
    cs = np.empty(15)
    mu = 0.37
    assert E.csr_norm1_shifted(_i8(A.indptr), _i8(A.indices), A.data, mu, cs) == pytest.approx(
        np.abs(Ad - mu * np.eye(15)).sum(axis=0).max(), rel=1e-14)


@pytest.mark.parametrize("power", [1, 2, 3, 5, 9])
def test_norm1_power_estimate_is_a_tight_lower_bound(power):
    rng = np.random.default_rng(power)
    A = stable_sparse(30, 0.1, rng)
    exact = np.abs(np.linalg.matrix_power(A.toarray() - 0.2 * np.eye(30), power)).sum(axis=0).max()
    V = np.empty((E.NV, 30))
    est = E.norm1_power_estimate(_i8(A.indptr), _i8(A.indices), A.data, 0.2, power, V)
    assert est <= exact * (1 + 1e-12)
    assert est >= 0.5 * exact


def test_parameter_selection_matches_the_tables_theta():
    """With only ||A||_1: m s is minimal over the table, and ||A||/s <= theta_m."""
    d = np.full(2 * (E.P_MAX + 2), -1.0)
    for norm1 in (1e-3, 0.5, 3.0, 40.0, 1e3):
        m, s = E.select_ms(norm1, d)
        i = list(E.THETA_M).index(m)
        assert norm1 / s <= E.THETA[i] * (1 + 1e-12)
        best = min(mm * np.ceil(norm1 / th) for mm, th in zip(E.THETA_M, E.THETA))
        assert m * s == best


@pytest.mark.parametrize("second", [False, True])
def test_more_parameters_than_states(second):
    """p > n (CaMKII: 21 states, 59 parameters): the vector work rows are longer than n."""
    A, B, D, S = _system(5, 20, 30.0, 8)
    Dm = D if second else None
    got = action(A, B, Dm, 0.9, S)[0]
    W, start = augmented(A, B, Dm, 0.9)
    ref = (expm(0.9 * W.toarray()) @ start(S))[:5]
    assert np.abs(got - ref).max() <= 1e-10 * np.abs(ref).max()
