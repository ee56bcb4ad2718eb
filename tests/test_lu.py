"""pbsens.kernels.lu against scipy.linalg.lu_factor / lu_solve (LAPACK getrf/getrs)."""
import numpy as np
import pytest
import scipy.linalg

from pbsens.kernels.lu import lu_factor, lu_solve_mat, lu_solve_vec


def _factor(A):
    LU = np.ascontiguousarray(A, dtype=np.float64).copy()
    piv = np.empty(A.shape[0], dtype=np.int64)
    info = lu_factor(LU, piv)
    return LU, piv, info


@pytest.mark.parametrize("n", [1, 2, 3, 7, 11, 21, 40])
def test_factors_match_lapack(n):
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    LU, piv, info = _factor(A)
    LUs, pivs = scipy.linalg.lu_factor(A)
    assert info == 0
    assert np.array_equal(piv, pivs)
    assert np.allclose(LU, LUs, rtol=0, atol=1e-12 * np.abs(LUs).max())


@pytest.mark.parametrize("n", [1, 5, 11, 21, 60])
def test_solves_match_scipy_and_residual(n):
    rng = np.random.default_rng(100 + n)
    A = rng.standard_normal((n, n)) + n * np.eye(n) * rng.uniform(0, 1)
    b = rng.standard_normal(n)
    B = rng.standard_normal((n, 4))
    LU, piv, info = _factor(A)
    assert info == 0
    fac = scipy.linalg.lu_factor(A)
    x = b.copy()
    lu_solve_vec(LU, piv, x)
    X = B.copy()
    lu_solve_mat(LU, piv, X)
    cond = np.linalg.cond(A)
    tol = 1e-13 * cond
    assert np.linalg.norm(x - scipy.linalg.lu_solve(fac, b)) <= tol * np.linalg.norm(x)
    assert np.linalg.norm(X - scipy.linalg.lu_solve(fac, B)) <= tol * np.linalg.norm(X)
    assert np.linalg.norm(A @ x - b) <= 1e-13 * np.linalg.norm(A, 1) * np.linalg.norm(x) * n
    # one column of the matrix solve is the vector solve (same operations up to order)
    x0 = B[:, 0].copy()
    lu_solve_vec(LU, piv, x0)
    assert np.allclose(X[:, 0], x0, rtol=1e-12, atol=0)


def test_pivoting_is_needed_and_done():
    # a zero in the (0, 0) position: without row interchanges the factorisation breaks down
    A = np.array([[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [3.0, 0.0, 1.0]])
    LU, piv, info = _factor(A)
    assert info == 0
    assert piv[0] == 2
    x = np.array([1.0, 2.0, 3.0])
    lu_solve_vec(LU, piv, x)
    assert np.allclose(A @ x, [1.0, 2.0, 3.0], rtol=1e-14)


def test_singular_matrix_reports_the_zero_pivot():
    # rank 2: the third row is the sum of the first two; exactly representable so U[2, 2] == 0
    A = np.array([[2.0, 1.0, 1.0], [4.0, 3.0, 3.0], [6.0, 4.0, 4.0]])
    LU, piv, info = _factor(A)
    assert info == 3  # 1 + index of the zero pivot, as LAPACK's getrf
    assert LU[2, 2] == 0.0
    # scipy (LAPACK) finds the same zero pivot (it warns instead of returning a status)
    with pytest.warns(scipy.linalg.LinAlgWarning):
        LUs, pivs = scipy.linalg.lu_factor(A)
    assert LUs[2, 2] == 0.0 and np.array_equal(piv, pivs)
    assert np.allclose(LU, LUs, rtol=0, atol=1e-14)
    # a solve divides by the zero pivot: inf/NaN, not an exception
    x = np.ones(3)
    lu_solve_vec(LU, piv, x)
    assert not np.all(np.isfinite(x))


def test_zero_column_first_pivot():
    A = np.zeros((3, 3))
    A[:, 1:] = np.arange(6.0).reshape(3, 2) + 1
    _, _, info = _factor(A)
    assert info == 1


def test_shapes_are_checked():
    with pytest.raises(ValueError):
        lu_factor(np.zeros((3, 3)), np.zeros(2, dtype=np.int64))
    LU, piv, _ = _factor(np.eye(3))
    with pytest.raises(ValueError):
        lu_solve_vec(LU, piv, np.zeros(2))
    with pytest.raises(ValueError):
        lu_solve_mat(LU, piv, np.zeros((2, 2)))
