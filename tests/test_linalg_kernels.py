"""Tests of pbsens.kernels.linalg and pbsens.kernels.steps against references.

References: scipy.linalg.expm (directly and on block matrices, see
tests/reference.py), closed forms (nilpotent and diagonal matrices, scalar
exponentials) and, for a few cases, mpmath at 40 digits, which is independent
of both scipy and our code. Errors are relative, in the 1-norm.
"""
import math
import os
import sys
import zlib

import numba
import numpy as np
import pytest
import scipy.linalg

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pbsens.kernels import linalg as L  # noqa: E402
from pbsens.kernels import steps as St  # noqa: E402
from pbsens.kernels.views import flat  # noqa: E402
import reference as R  # noqa: E402

U = 2.0 ** -53


def seed(*key):
    """Deterministic seed from a key (``hash`` of str is salted per process)."""
    return zlib.crc32(repr(key).encode())


def n1(X):
    return float(np.abs(X).sum(axis=0).max()) if X.size else 0.0


def rel(X, Y):
    """Relative 1-norm error of X against Y (absolute if Y = 0)."""
    d = n1(np.asarray(X) - np.asarray(Y))
    s = n1(np.asarray(Y))
    return d / s if s > 0 else d


def scaled(A, norm):
    return np.ascontiguousarray(A * (norm / n1(A)))


def random_matrix(rng, kind, n):
    """Test matrices of several structures (unit 1-norm is applied by callers)."""
    if kind == "gauss":
        return rng.standard_normal((n, n))
    if kind == "stable":  # Jacobian-like: diagonally dominant negative
        return rng.standard_normal((n, n)) - 2.0 * np.sqrt(n) * np.eye(n)
    if kind == "nonnormal":  # strong upper triangular part in a random basis
        T = 3.0 * np.triu(rng.standard_normal((n, n)), 1) - np.diag(rng.uniform(0, 1, n))
        Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        return Q @ T @ Q.T
    if kind == "singular":  # zero column and zero row (conservation / species at 0)
        A = rng.standard_normal((n, n))
        A[:, 0] = 0.0
        A[1, :] = 0.0
        return A
    if kind == "rankdef":  # rank 2
        return rng.standard_normal((n, 2)) @ rng.standard_normal((2, n))
    raise ValueError(kind)


def phi1(A, h):
    n = A.shape[0]
    EF = np.full((n, 2 * n), np.nan)
    L.exp_phi1_into(np.ascontiguousarray(A, dtype=float), float(h), EF, L.workspace(n))
    return EF[:, :n], EF[:, n:]


def phi12(A, h):
    n = A.shape[0]
    EFF = np.full((n, 3 * n), np.nan)
    L.exp_phi12_into(np.ascontiguousarray(A, dtype=float), float(h), EFF, L.workspace(n))
    return EFF[:, :n], EFF[:, n:2 * n], EFF[:, 2 * n:]


def mp_block_exp(A, h, blocks, dps=40):
    """mpmath exp of the (blocks*n)-square block matrix of ref_phi1/ref_phi12."""
    import mpmath as mp
    n = A.shape[0]
    K = np.zeros((blocks * n, blocks * n))
    K[:n, :n] = h * A
    for b in range(1, blocks):
        K[(b - 1) * n:b * n, b * n:(b + 1) * n] = h * np.eye(n)
    with mp.workdps(dps):
        X = mp.expm(mp.matrix(K.tolist()), method="taylor")
        X = np.array(X.tolist(), dtype=float)
    return [X[:n, b * n:(b + 1) * n] for b in range(blocks)]


def assert_matches(ours, scipy_ref, exact_fn, tol, info, W):
    """``rel(ours, scipy_ref) < tol``, or else arbitrated by mpmath (40 digits).

    scipy's expm is itself only accurate to about ``kappa u`` (``kappa`` the
    relative condition number of ``exp`` at ``W``, the scaled matrix), and
    sometimes worse: e.g. for a 2x2 rank-one matrix with eigenvalue 27 it is
    off by 2e-12 where our result is 5e-15 from exact. When the comparison
    with scipy fails, ``exact_fn()`` decides: our error against the exact
    result must be below ``tol``, or at most twice scipy's, or at most
    ``20 kappa u`` (for ill-conditioned nonnormal matrices both algorithms
    lose digits and scatter within a few ``kappa u``; e.g. nonnormal 3x3 with
    ||hA|| = 400: scipy 3e-11, ours 9e-11, kappa u = 2e-11, and other choices
    of the scaling s give 3e-11 .. 1.5e-10). An absolute ceiling of 1e-8
    always applies.
    """
    ours = ours if isinstance(ours, (list, tuple)) else [ours]
    scipy_ref = scipy_ref if isinstance(scipy_ref, (list, tuple)) else [scipy_ref]
    errs = [rel(X, Y) for X, Y in zip(ours, scipy_ref)]
    if max(errs) < tol:
        return
    exact = exact_fn()
    exact = exact if isinstance(exact, (list, tuple)) else [exact]
    ours_err = max(rel(X, Y) for X, Y in zip(ours, exact))
    scipy_err = max(rel(X, Y) for X, Y in zip(scipy_ref, exact))
    assert ours_err < 1e-8, (info, ours_err, scipy_err)
    if ours_err < tol or ours_err <= 2.0 * scipy_err:
        return
    kappa = scipy.linalg.expm_cond(W)
    assert ours_err <= 20.0 * kappa * U, (info, ours_err, scipy_err, kappa * U)


# ---------------------------------------------------------------------------
# norms, products, workspace
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (7, 2), (21, 21)])
def test_matrix_norm_matches_numpy(shape):
    rng = np.random.default_rng(1)
    A = rng.standard_normal(shape)
    assert L.matrix_norm(A, L.NORM_1) == pytest.approx(np.linalg.norm(A, 1), rel=1e-15)
    assert L.matrix_norm(A, L.NORM_INF) == pytest.approx(np.linalg.norm(A, np.inf), rel=1e-15)
    assert L.matrix_norm(A, L.NORM_FRO) == pytest.approx(np.linalg.norm(A, "fro"), rel=1e-14)
    for name, code in L.NORM_CODES.items():
        assert L.matrix_norm(A, code) == pytest.approx(R.ref_norm(A, name), rel=1e-14)


def test_matrix_norm_edge_cases():
    assert L.matrix_norm(np.zeros((3, 4)), L.NORM_FRO) == 0.0
    big = np.full((2, 2), 1e300)
    assert L.matrix_norm(big, L.NORM_FRO) == pytest.approx(2e300, rel=1e-15)  # no overflow
    assert math.isnan(L.matrix_norm(np.array([[1.0, np.nan]]), L.NORM_1))
    with pytest.raises(ValueError):
        L.matrix_norm(np.eye(2), 7)


@pytest.mark.parametrize("n,m,k", [(1, 1, 1), (2, 3, 4), (3, 3, 3), (5, 1, 6), (6, 6, 6),
                                   (7, 7, 7), (11, 11, 4), (21, 21, 21), (42, 17, 9),
                                   (100, 100, 100)])
def test_matmul_into(n, m, k):
    rng = np.random.default_rng(n * 100 + m * 10 + k)
    A = rng.standard_normal((n, m))
    B = rng.standard_normal((m, k))
    out = np.full((n, k), np.nan)
    L.matmul_into(A, B, out)
    assert np.allclose(out, A @ B, rtol=1e-13, atol=1e-13 * n1(A) * n1(B))


def test_matmul_into_shape_mismatch():
    with pytest.raises(ValueError):
        L.matmul_into(np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 3)))


def test_workspace():
    ws = L.workspace(5)
    assert ws.shape == (L.NWS, 5, 5) and ws.dtype == np.float64 and ws.flags.c_contiguous
    with pytest.raises(ValueError):
        L.expm_into(np.eye(5), np.empty((5, 5)), L.workspace(4))
    with pytest.raises(ValueError):
        L.exp_phi1_into(np.eye(5), 1.0, np.empty((5, 10)), L.workspace(6))
    with pytest.raises(ValueError):
        L.exp_phi1_into(np.eye(5), 1.0, np.empty((5, 5)), L.workspace(5))
    with pytest.raises(ValueError):
        L.exp_phi12_into(np.eye(5), 1.0, np.empty((5, 10)), L.workspace(5))


def test_phi_theta_table():
    """theta_m is the largest norm with Taylor tail of phi1 <= u (tight to 1%)."""
    def tail(th, m):
        return sum(th ** k / math.factorial(k + 1) for k in range(m + 1, m + 60))
    for m, th in zip(L._PHI_M, L._PHI_THETA):
        assert tail(th, int(m)) <= U * (1 + 1e-9)
        assert tail(1.01 * th, int(m)) > U
    # Paterson-Stockmeyer cost: (q - 1) powers + Horner products
    for m, q, cost in zip(L._PHI_M, L._PHI_Q, L._PHI_COST):
        r = m // q
        horner = r - 1 if m % q == 0 else r
        assert cost == (q - 1) + horner


# ---------------------------------------------------------------------------
# expm
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["gauss", "stable", "nonnormal", "singular", "rankdef"])
@pytest.mark.parametrize("n", [2, 5, 11, 21])
def test_expm_vs_scipy_moderate_norms(kind, n):
    """1-norms 1e-8 .. 1e2: every Pade degree (3, 5, 7, 9, 13) and up to ~5 squarings."""
    rng = np.random.default_rng(seed(kind, n))
    for norm in [1e-8, 1e-4, 1e-2, 0.1, 0.5, 1.5, 3.0, 10.0, 30.0, 100.0]:
        A = scaled(random_matrix(rng, kind, n), norm)
        assert_matches(L.expm(A), R.ref_expm(A), lambda: mp_block_exp(A, 1.0, 1)[0],
                       1e-12, (kind, n, norm), A)


def test_expm_vs_mpmath():
    """Accuracy against 40-digit arithmetic, independent of scipy."""
    rng = np.random.default_rng(7)
    for kind in ["gauss", "stable", "singular"]:
        for norm in [0.3, 4.0, 50.0]:
            A = scaled(random_matrix(rng, kind, 5), norm)
            (X,) = mp_block_exp(A, 1.0, 1)
            assert rel(L.expm(A), X) < 2e-14, (kind, norm)


def test_expm_large_norm_stiff():
    """1-norms 1e3 .. 1e4 for stiff, Jacobian-like matrices.

    With ||A|| = 1e4 the squaring phase (s ~ 12) amplifies rounding errors by
    up to the condition number ``kappa`` of exp at A, so agreement with scipy
    can only be expected to ``kappa u`` (both algorithms err by that much). The
    matrices have eigenvalues spread over -1e-2 .. -1e4 and a well-conditioned
    eigenvector basis; we check ``err <= 100 kappa u`` and that this bound is
    itself below 1e-9, so the test stays meaningful.
    """
    rng = np.random.default_rng(11)
    for n in [4, 8]:
        for top in [1e3, 1e4]:
            Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
            V = Q @ (np.eye(n) + 0.3 * np.triu(rng.standard_normal((n, n)), 1))
            D = -np.logspace(-2, np.log10(top), n)
            A = np.ascontiguousarray(V @ np.diag(D) @ np.linalg.inv(V))
            assert 0.9 * top < n1(A) < 30 * top
            kappa = scipy.linalg.expm_cond(A)
            bound = max(1e-12, 100.0 * kappa * U)
            assert bound < 1e-9, kappa
            assert rel(L.expm(A), R.ref_expm(A)) < bound, (n, top, kappa)


def test_expm_large_norm_nonnormal_accuracy_limit():
    """Strongly nonnormal, ||A|| = 1e4: an accuracy limit shared with scipy.

    exp(A) ~ 1e-68 after a huge transient; scaling and squaring (ours and
    scipy's alike) loses about 1e-6 relative here, far more than
    ``kappa u`` ~ 2e-9: the method is not forward stable for such matrices.
    We assert what holds: against an 80-digit mpmath result our error is
    below 1e-5 and at most twice scipy's.
    """
    import mpmath as mp
    rng = np.random.default_rng(5)
    n = 6
    T = 30.0 * np.triu(rng.standard_normal((n, n)), 1) - np.diag(rng.uniform(1.0, 10.0, n))
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = np.ascontiguousarray(scaled(Q @ T @ Q.T, 1e4))
    with mp.workdps(80):
        X = np.array(mp.expm(mp.matrix(A.tolist()), method="taylor").tolist(), dtype=float)
    ours = rel(L.expm(A), X)
    theirs = rel(R.ref_expm(A), X)
    assert ours < 1e-5 and ours <= 2.0 * theirs, (ours, theirs)


def test_expm_closed_forms():
    # zero, 1x1, diagonal, nilpotent (exact finite series)
    assert np.array_equal(L.expm(np.zeros((4, 4))), np.eye(4))
    for a in [-700.0, -30.0, -1e-10, 0.3, 2.0, 40.0]:
        assert L.expm(np.array([[a]]))[0, 0] == pytest.approx(math.exp(a), rel=2e-14)
    d = np.array([-50.0, -1.0, 0.0, 0.5, 3.0])
    assert rel(L.expm(np.diag(d)), np.diag(np.exp(d))) < 1e-14
    N = np.triu(np.arange(1.0, 17.0).reshape(4, 4), 1)
    exact = np.eye(4) + N + N @ N / 2 + N @ N @ N / 6
    assert rel(L.expm(N), exact) < 1e-15
    assert L.expm(np.zeros((0, 0))).shape == (0, 0)


@pytest.mark.parametrize("b", [1.0, 1e2, 1e4, 1e8])
def test_expm_overscaling_example(b):
    """A = [[1, b], [0, -1]] (Al-Mohy and Higham 2009, Sec. 1): A^2 = I.

    ||A|| ~ b would call for ~log2(b) squarings; the eta-based selection
    avoids them. Exact: exp(A) = [[e, b sinh(1)], [0, 1/e]].
    """
    A = np.array([[1.0, b], [0.0, -1.0]])
    exact = np.array([[math.e, b * math.sinh(1.0)], [0.0, 1.0 / math.e]])
    X = L.expm(A)
    assert abs(X[0, 0] / exact[0, 0] - 1) < 1e-14
    assert abs(X[1, 1] / exact[1, 1] - 1) < 1e-14
    assert abs(X[0, 1] / exact[0, 1] - 1) < 1e-14
    E, F = phi1(A, 1.0)
    assert rel(E, exact) < 1e-14


def test_expm_nonfinite_input_gives_nan():
    A = np.eye(3)
    A[1, 2] = np.inf
    assert np.isnan(L.expm(A)).all()


def test_expm_into_reuses_workspace_and_leaves_input():
    rng = np.random.default_rng(3)
    ws = L.workspace(6)
    out = np.empty((6, 6))
    for norm in [0.01, 200.0, 1.0]:  # 13 with squaring, then small degrees
        A = scaled(rng.standard_normal((6, 6)), norm)
        A0 = A.copy()
        L.expm_into(A, out, ws)
        assert np.array_equal(A, A0)
        assert rel(out, R.ref_expm(A)) < 1e-12


# ---------------------------------------------------------------------------
# phi functions
# ---------------------------------------------------------------------------

KINDS = ["gauss", "stable", "nonnormal", "singular", "rankdef"]
H_NORMS = [1e-10, 1e-5, 1e-3, 0.05, 0.3, 1.0, 2.5, 10.0, 60.0, 400.0]


# n = 1 only for the kinds that exist in one dimension (a 1x1 matrix is normal, full rank)
@pytest.mark.parametrize("kind, n", [(k, n) for k in KINDS for n in (1, 3, 11, 21)
                                     if n > 1 or k in ("gauss", "stable")])
def test_exp_phi1_vs_block_expm(kind, n):
    rng = np.random.default_rng(seed(kind, n, 1))
    for hn in H_NORMS:
        A = random_matrix(rng, kind, n)
        h = 0.37
        A = scaled(A, hn / h)
        E, F = phi1(A, h)
        tol = 1e-12 if hn <= 100 else 1e-11
        assert_matches([E, F], list(R.ref_phi1(A, h)), lambda: mp_block_exp(A, h, 2), tol,
                       (kind, n, hn), h * A)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [3, 11, 21])
def test_exp_phi12_vs_block_expm(kind, n):
    rng = np.random.default_rng(seed(kind, n, 2))
    for hn in H_NORMS:
        h = 1.7
        A = scaled(random_matrix(rng, kind, n), hn / h)
        E, F1, F2 = phi12(A, h)
        tol = 1e-12 if hn <= 100 else 1e-11
        assert_matches([E, F1, F2], list(R.ref_phi12(A, h)), lambda: mp_block_exp(A, h, 3),
                       tol, (kind, n, hn), h * A)
        # consistency with exp_phi1_into (two different rounding paths)
        E1, F = phi1(A, h)
        d = max(rel(F1, F), rel(E, E1))
        if d >= tol:
            assert d < 40 * scipy.linalg.expm_cond(h * A) * U, (kind, n, hn, d)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [3, 11, 21])
def test_exp_phi123_vs_block_expm(kind, n):
    """``[E | F1 | F2 | F3]`` against scipy's expm of the 4n block matrix (mpmath arbitrates), and its
    first three blocks against exp_phi12_into (a different Taylor start: phi3, not phi2)."""
    from pbsens.kernels.phi import exp_phi123_into
    rng = np.random.default_rng(seed(kind, n, 3))
    for hn in H_NORMS:
        h = 0.9
        A = scaled(random_matrix(rng, kind, n), hn / h)
        out = np.empty((n, 4 * n))
        exp_phi123_into(np.ascontiguousarray(A), h, out, L.workspace(n))
        ref = list(R.ref_phi123(A, h))
        ours = [out[:, b * n:(b + 1) * n] for b in range(4)]
        tol = 1e-12 if hn <= 100 else 1e-11
        assert_matches(ours, ref, lambda: mp_block_exp(A, h, 4), tol, (kind, n, hn), h * A)
        E, F1, F2 = phi12(A, h)
        d = max(rel(ours[0], E), rel(ours[1], F1), rel(ours[2], F2))
        if d >= tol:
            assert d < 40 * scipy.linalg.expm_cond(h * A) * U, (kind, n, hn, d)


def test_phi_vs_mpmath():
    """Independent of scipy: 40-digit exp of the 3n block matrix."""
    rng = np.random.default_rng(17)
    for kind in ["gauss", "stable", "singular", "nonnormal"]:
        for hn in [0.2, 3.0, 40.0]:
            A = scaled(random_matrix(rng, kind, 4), hn)
            Em, F1m, F2m = mp_block_exp(A, 1.0, 3)
            E, F = phi1(A, 1.0)
            E2, F1, F2 = phi12(A, 1.0)
            for X, Y in [(E, Em), (F, F1m), (E2, Em), (F1, F1m), (F2, F2m)]:
                assert rel(X, Y) < 5e-14, (kind, hn)


@pytest.mark.parametrize("h", [1.0, 1e-3, 25.0, -0.7])
def test_phi_nilpotent_exact(h):
    """Strictly triangular N: F1, F2 are finite series, exact to rounding."""
    N = np.triu(np.random.default_rng(2).standard_normal((5, 5)), 1) * 3.0
    P = [np.linalg.matrix_power(h * N, k) for k in range(6)]
    E_ex = sum(P[k] / math.factorial(k) for k in range(6))
    F1_ex = h * sum(P[k] / math.factorial(k + 1) for k in range(6))
    F2_ex = h * h * sum(P[k] / math.factorial(k + 2) for k in range(6))
    E, F1, F2 = phi12(N, h)
    assert rel(E, E_ex) < 1e-14 and rel(F1, F1_ex) < 1e-14 and rel(F2, F2_ex) < 1e-14
    E, F = phi1(N, h)
    assert rel(E, E_ex) < 1e-14 and rel(F, F1_ex) < 1e-14


def test_phi_nilpotent_index3_large_norm():
    """N^3 = 0 with ||hN|| = 1e3: d3 = d4 = 0, so alpha_3 = 0 although N^2 != 0.

    The alpha_3 bound is only valid for degrees m >= 5 (p(p-1) <= m+1): a
    selection that ignored this would truncate phi1 after the linear term.
    """
    N = np.array([[0.0, 40.0, -7.0], [0.0, 0.0, 25.0], [0.0, 0.0, 0.0]])
    for h in [1.0, 20.0]:
        E, F1, F2 = phi12(N, h)
        H = h * N
        H2 = H @ H
        eye = np.eye(3)
        assert rel(E, eye + H + H2 / 2) < 1e-15
        assert rel(F1, h * (eye + H / 2 + H2 / 6)) < 1e-15
        assert rel(F2, h * h * (eye / 2 + H / 6 + H2 / 24)) < 1e-15
        E1, F = phi1(N, h)
        assert rel(E1, E) < 1e-15 and rel(F, F1) < 1e-15


def test_lu_solve_needs_pivoting():
    """The in-place LU of the Pade quotient pivots (zero leading entry)."""
    Q = np.array([[0.0, 2.0, 1.0], [1.0, 1e-3, 0.0], [3.0, 1.0, 4.0]])
    X = np.arange(9.0).reshape(3, 3)
    expected = np.linalg.solve(Q, X)
    Qw = Q.copy()
    Xw = X.copy()
    L._lu_solve_inplace(Qw, Xw)
    assert rel(Xw, expected) < 1e-14
    # tiny pivot without exchange would lose accuracy catastrophically
    Q = np.array([[1e-18, 1.0], [1.0, 1.0]])
    X = np.array([[1.0, 0.0], [2.0, 1.0]])
    Xw = X.copy()
    L._lu_solve_inplace(Q.copy(), Xw)
    assert rel(Xw, np.linalg.solve(Q, X)) < 1e-14


def test_phi_singular_closed_forms():
    """Zero matrix, and block diag(a, 0): no A^-1, no shift."""
    E, F1, F2 = phi12(np.zeros((3, 3)), 2.0)
    assert np.array_equal(E, np.eye(3))
    assert rel(F1, 2.0 * np.eye(3)) < 1e-16 and rel(F2, 2.0 * np.eye(3)) < 1e-16
    for a, h in [(-3.0, 1.0), (-1e3, 0.5), (2.0, 0.1), (-1e-9, 1.0)]:
        A = np.diag([a, 0.0])
        E, F1, F2 = phi12(A, h)
        z = a * h
        # phi1(z) = expm1(z)/z, phi2(z) = (expm1(z) - z)/z^2, computed stably
        # with mpmath for tiny z
        import mpmath as mp
        with mp.workdps(40):
            ph1 = float(mp.expm1(z) / z)
            ph2 = float((mp.expm1(z) - z) / z ** 2)
        assert E[0, 0] == pytest.approx(math.exp(z), rel=1e-14)
        assert F1[0, 0] == pytest.approx(h * ph1, rel=1e-14)
        assert F2[0, 0] == pytest.approx(h * h * ph2, rel=1e-14)
        assert E[1, 1] == 1.0 and F1[1, 1] == pytest.approx(h, rel=1e-15)
        assert F2[1, 1] == pytest.approx(h * h / 2, rel=1e-15)
        assert F1[0, 1] == 0.0 and F1[1, 0] == 0.0


@pytest.mark.parametrize("h", [0.0, 1e-300, 1e-200, 1e-14, 1e-9])
def test_phi_tiny_h(h):
    rng = np.random.default_rng(4)
    A = rng.standard_normal((6, 6)) * 10.0
    A[:, 2] = 0.0
    E, F1, F2 = phi12(A, h)
    Ee, F = phi1(A, h)
    eye = np.eye(6)
    if h == 0.0:
        assert np.array_equal(E, eye) and np.array_equal(Ee, eye)
        assert not F1.any() and not F2.any() and not F.any()
        return
    # leading terms: F1 = h I + h^2 A/2 + O(h^3), F2 = h^2 I/2 + h^3 A/6 + O(h^4)
    assert rel(F1, h * eye + h * h * A / 2) < 1e-13
    assert rel(F, h * eye + h * h * A / 2) < 1e-13
    assert rel(F2, h * h * eye / 2 + h ** 3 * A / 6) < 1e-13
    assert rel(E, eye + h * A) < 1e-15
    Er, F1r, F2r = R.ref_phi12(A, h)
    assert rel(F1, F1r) < 1e-13 and rel(E, Er) < 1e-14


def test_phi_invertible_identity():
    """F = (E - I) A^-1 for well-conditioned invertible A (independent check)."""
    rng = np.random.default_rng(8)
    A = rng.standard_normal((7, 7)) - 4.0 * np.eye(7)
    assert np.linalg.cond(A) < 20
    for h in [0.01, 0.5, 3.0]:
        E, F = phi1(A, h)
        assert rel(F, np.linalg.solve(A.T, (E - np.eye(7)).T).T) < 1e-13


def test_phi_nonfinite_gives_nan():
    A = np.eye(3)
    A[0, 0] = np.nan
    E, F1, F2 = phi12(A, 1.0)
    assert np.isnan(E).all() and np.isnan(F1).all() and np.isnan(F2).all()
    E, F = phi1(A, 1.0)
    assert np.isnan(E).all() and np.isnan(F).all()


# ---------------------------------------------------------------------------
# steps
# ---------------------------------------------------------------------------

def _step_data(rng, nx, npar, hn):
    A0 = rng.standard_normal((nx, nx)) - np.sqrt(nx) * np.eye(nx)
    A0 /= n1(A0)
    Ak = A0
    Ak1 = A0 + 0.2 * rng.standard_normal((nx, nx)) / nx
    h = hn
    Bk = rng.standard_normal((nx, npar))
    Bk1 = Bk + 0.3 * rng.standard_normal((nx, npar))
    S = rng.standard_normal((nx, npar))
    c = np.ascontiguousarray
    return c(Ak), c(Ak1), c(Bk), c(Bk1), h, c(S)


@pytest.mark.parametrize("nx,npar", [(1, 1), (3, 2), (11, 19), (21, 30), (5, 1)])
@pytest.mark.parametrize("hn", [1e-6, 0.01, 0.1, 1.0])
def test_pbs_step(nx, npar, hn):
    rng = np.random.default_rng(nx * 1000 + npar)
    Ak, Ak1, Bk, Bk1, h, S = _step_data(rng, nx, npar, hn)
    expected = R.ref_pbs_step(Ak, Ak1, Bk, Bk1, h, S)
    W = [np.full((nx, nx), np.nan) for _ in range(3)]
    T = [np.full((nx, npar), np.nan) for _ in range(2)]
    inputs = [X.copy() for X in (Ak, Ak1, Bk, Bk1)]
    St.pbs_step_into(Ak, Ak1, Bk, Bk1, h, S, *W, *T)
    assert rel(S, expected) < 1e-12
    for X, X0 in zip((Ak, Ak1, Bk, Bk1), inputs):
        assert np.array_equal(X, X0)


def test_pbs_step_is_second_order_accurate():
    """Local error O(h^3) against the exact solution for constant A, B."""
    rng = np.random.default_rng(9)
    A = rng.standard_normal((4, 4))
    B = rng.standard_normal((4, 2))
    S0 = rng.standard_normal((4, 2))
    errs = []
    for h in [0.1, 0.05, 0.025]:
        E, F = R.ref_phi1(A, h)
        S = S0.copy()
        W = [np.empty((4, 4)) for _ in range(3)]
        T = [np.empty((4, 2)) for _ in range(2)]
        St.pbs_step_into(A, A, B, B, h, S, *W, *T)
        errs.append(n1(S - (E @ S0 + F @ B)))
    ratios = [errs[i] / errs[i + 1] for i in range(2)]
    assert all(7.0 < r < 9.0 for r in ratios), ratios


def _exp_step(E, F, Bk, S):
    """The march's exponential step (3.10): ``[E | F] [S; B_k]`` in one product."""
    nx, npar = S.shape
    EF = np.ascontiguousarray(np.hstack([E, F]))
    out = np.full((nx, npar), np.nan)
    St.exp_step_stacked_into(EF, np.ascontiguousarray(np.vstack([S, Bk])), out)
    return out


def _exp2_step(E, F1, F2, h, Bk, Bk1, S):
    """The march's exponential-midpoint step: ``[E | F1 - F2/h] [S; B_k] + (F2/h) B_k+1``."""
    nx, npar = S.shape
    EFF = np.ascontiguousarray(np.hstack([E, F1, F2]))
    St.exp2_prepare_inplace(EFF, h)
    out = np.full((nx, npar), np.nan)
    St.exp2_step_stacked_into(EFF, np.ascontiguousarray(np.vstack([S, Bk])), Bk1, out)
    return out


@pytest.mark.parametrize("nx,npar", [(1, 1), (3, 2), (11, 19), (21, 30)])
@pytest.mark.parametrize("hn", [0.0, 1e-6, 0.1, 1.0, 50.0])
def test_exp_step(nx, npar, hn):
    rng = np.random.default_rng(nx * 1000 + npar + 1)
    Ak, Ak1, Bk, Bk1, h, S = _step_data(rng, nx, npar, hn)
    expected = S.copy() if h == 0.0 else R.ref_exp_step(Ak, Bk, h, S)
    E, F = phi1(Ak, h)
    assert rel(_exp_step(E, F, Bk, S), expected) < 1e-12


@pytest.mark.parametrize("nx,npar", [(1, 1), (3, 2), (11, 19), (21, 30)])
@pytest.mark.parametrize("hn", [0.0, 1e-6, 0.1, 1.0, 50.0])
def test_exp2_step(nx, npar, hn):
    rng = np.random.default_rng(nx * 1000 + npar + 2)
    Ak, Ak1, Bk, Bk1, h, S = _step_data(rng, nx, npar, hn)
    expected = S.copy() if h == 0.0 else R.ref_exp2_step(Ak, Ak1, Bk, Bk1, h, S)
    Abar = np.ascontiguousarray(0.5 * (Ak + Ak1))
    E, F1, F2 = phi12(Abar, h)
    assert rel(_exp2_step(E, F1, F2, h, Bk, Bk1, S), expected) < 1e-12


def test_pbs_apply_reuses_step_matrices():
    """pbs_step_into leaves Pf and Pb B_k+1 behind; pbs_apply_into with them repeats the step exactly."""
    rng = np.random.default_rng(14)
    A = rng.standard_normal((5, 5))
    B = rng.standard_normal((5, 3))
    S0 = rng.standard_normal((5, 3))
    S1 = S0.copy()
    S2 = S0.copy()
    W = [np.empty((5, 5)) for _ in range(3)]
    T = [np.empty((5, 3)) for _ in range(2)]
    for _ in range(3):
        St.pbs_step_into(A, A, B, B, 0.01, S1, *W, *T)
    St.pbs_step_into(A, A, B, B, 0.01, S2, *W, *T)
    for _ in range(2):
        St.pbs_apply_into(W[2], T[0], B, 0.01, S2, T[1])
    assert np.array_equal(S1, S2)
    expected = S0
    for _ in range(3):
        expected = R.ref_pbs_step(A, A, B, B, 0.01, expected)
    assert rel(S2, expected) < 1e-12


def test_exp2_step_exact_for_linear_B():
    """For constant A and B linear in t, exp2 is exact (checked by fine PBS)."""
    rng = np.random.default_rng(12)
    A = rng.standard_normal((3, 3)) - 2 * np.eye(3)
    B0 = rng.standard_normal((3, 2))
    B1 = rng.standard_normal((3, 2))
    S0 = rng.standard_normal((3, 2))
    h = 0.8
    E, F1, F2 = phi12(A, h)
    S = _exp2_step(E, F1, F2, h, B0, B1, S0)
    # independent reference: DOP853 at tight tolerances on the ODE itself
    from scipy.integrate import solve_ivp

    def rhs(t, y):
        Bt = B0 + (t / h) * (B1 - B0)
        return (A @ y.reshape(3, 2) + Bt).ravel()
    sol = solve_ivp(rhs, (0.0, h), S0.ravel(), method="DOP853", rtol=1e-13, atol=1e-15)
    assert rel(S, sol.y[:, -1].reshape(3, 2)) < 1e-11


def test_exp2_step_h_zero():
    rng = np.random.default_rng(13)
    S0 = rng.standard_normal((3, 2))
    E, F1, F2 = phi12(rng.standard_normal((3, 3)), 0.0)
    B = rng.standard_normal((3, 2))
    assert np.array_equal(_exp2_step(E, F1, F2, 0.0, B, B + 1.0, S0), S0)


# ---------------------------------------------------------------------------
# no allocation in the _into kernels
# ---------------------------------------------------------------------------

def test_into_kernels_do_not_allocate():
    """NRT allocation count of a compiled loop must not grow with its length.

    (Calls from Python box their arguments, which the NRT counts, so the
    kernels are called from a jitted loop; the allocating ``expm`` wrapper is
    the positive control.)
    """
    from numba import njit
    from numba.core.runtime import _nrt_python, rtsys

    @njit
    def run_all(A, A1, B, B1, S, E, F, F2, W1, W2, W3, T1, T2, ws, EF, EFF, SB, reps):
        for _ in range(reps):
            L.expm_into(A, E, ws)
            L.exp_phi1_into(A, 0.5, EF, ws)
            L.exp_phi12_into(A, 0.5, EFF, ws)
            L.matmul_into(A, A1, W1)
            St.pbs_step_into(A, A1, B, B1, 0.01, S, W1, W2, W3, T1, T2)
            St.exp_step_stacked_into(EF, SB, S)
            St.exp2_prepare_inplace(EFF, 0.5)
            St.exp2_step_stacked_into(EFF, SB, B1, S)

    @njit
    def run_expm(A, reps):
        for _ in range(reps):
            L.expm(A)

    was_enabled = _nrt_python.memsys_stats_enabled()
    _nrt_python.memsys_enable_stats()
    try:
        rng = np.random.default_rng(30)
        nx, npar = 9, 4
        A = rng.standard_normal((nx, nx)) * 30.0  # scaling and squaring paths
        A1 = rng.standard_normal((nx, nx))
        B = rng.standard_normal((nx, npar))
        B1 = rng.standard_normal((nx, npar))
        S = np.zeros((nx, npar))
        mats = [np.empty((nx, nx)) for _ in range(6)]
        vecs = [np.empty((nx, npar)) for _ in range(2)]
        ws = L.workspace(nx)

        def allocs(f, *args):
            f(*args, 1)  # compile
            counts = []
            for reps in (1, 20):
                a0 = rtsys.get_allocation_stats().alloc
                f(*args, reps)
                counts.append(rtsys.get_allocation_stats().alloc - a0)
            return counts

        c = allocs(run_all, A, A1, B, B1, S, *mats, *vecs, ws, np.empty((nx, 2 * nx)), np.empty((nx, 3 * nx)),
                   np.zeros((2 * nx, npar)))
        assert c[0] == c[1], c
        c = allocs(run_expm, A)
        assert c[1] > c[0], c  # control: the wrapper allocates per call
    finally:
        if not was_enabled:
            _nrt_python.memsys_disable_stats()


# ---------------------------------------------------------------------------
# reference_march (the oracle for the march kernel)
# ---------------------------------------------------------------------------

def _const_system(rng, nx=4, npar=3):
    A = rng.standard_normal((nx, nx)) - 2 * np.eye(nx)
    B = rng.standard_normal((nx, npar))
    return A, B, (lambda t, x, p: A), (lambda t, x, p: B)


def test_reference_march_constant_system_exact():
    rng = np.random.default_rng(20)
    A, B, jx, jp = _const_system(rng)
    t = np.concatenate([[0.0], np.cumsum(rng.uniform(0.01, 0.5, 12))])
    X = np.zeros((t.size, 4))
    S0 = rng.standard_normal((4, 3))
    exact = np.array([R.ref_phi1(A, tk)[0] @ S0 + R.ref_phi1(A, tk)[1] @ B for tk in t])
    for method in ["exp", "exp2", "pbsr", "pbsr2"]:
        S, br, nint = R.reference_march(jx, jp, t, X, None, S0, method)
        assert rel(S[-1], exact[-1]) < 1e-12, method
        assert np.array_equal(S[0], S0)
        if method.startswith("pbsr"):
            assert br == ["exp-equilibrium"] * (t.size - 1)
            assert (nint == 1).all()
    S, br, nint = R.reference_march(jx, jp, t, X, None, S0, "pbs")
    assert br == ["pbs"] * (t.size - 1)
    expected_nint = [max(1, math.ceil(10 * h * np.linalg.norm(A, 1))) for h in np.diff(t)]
    assert list(nint) == expected_nint
    assert 1e-9 < rel(S[-1], exact[-1]) < 1e-3  # second order, not exact


def _time_varying():
    # x' = -p0 x1 x0 ..., here directly a linear time-varying Jacobian
    def jx(t, x, p):
        return np.array([[-1.0 - x[0], 0.5 * np.sin(t)], [0.3, -2.0 + x[1]]])

    def jp(t, x, p):
        return np.array([[x[0], 0.0], [np.cos(t), x[1]]])

    return jx, jp


def test_reference_march_convergence_orders():
    """Refining a fixed grid: pbs converges at order 2, exp at order 1."""
    jx, jp = _time_varying()
    S0 = np.zeros((2, 2))

    def run(method, K):
        t = np.linspace(0.0, 2.0, K)
        X = np.stack([0.5 * np.exp(-t), 0.2 * np.sin(t)], axis=1)
        return R.reference_march(jx, jp, t, X, None, S0, method, n_factor=1e-9)[0][-1]

    # reference: very fine pbs on the same interpolated states
    fine = run("pbs", 4097)
    e_pbs = [n1(run("pbs", K) - fine) for K in (33, 65)]
    e_exp = [n1(run("exp", K) - fine) for K in (33, 65)]
    e_exp2 = [n1(run("exp2", K) - fine) for K in (33, 65)]
    assert 3.5 < e_pbs[0] / e_pbs[1] < 4.5
    assert 1.7 < e_exp[0] / e_exp[1] < 2.3
    assert 3.5 < e_exp2[0] / e_exp2[1] < 4.5


def test_reference_march_branches():
    """exp-stiff when n_int > n_max, pbs with n_int otherwise, per interval."""
    def jx(t, x, p):
        return np.array([[-x[0], 0.0], [0.0, -1.0]])

    def jp(t, x, p):
        return np.array([[1.0], [t]])

    t = np.array([0.0, 0.125, 0.25, 1.25])  # binary fractions: exact products
    X = np.array([[1.0, 0.0], [50.0, 0.0], [500.0, 0.0], [20.0, 0.0]])
    S, br, nint = R.reference_march(jx, jp, t, X, None, np.zeros((2, 1)), "pbsr")
    # n_int = ceil(10 h ||A_k||_1) = ceil(1.25), ceil(62.5), 5000 -> pbs, pbs, exp-stiff
    assert br == ["pbs", "pbs", "exp-stiff"]
    assert list(nint) == [2, 63, 1]
    S2, br2, _ = R.reference_march(jx, jp, t, X, None, np.zeros((2, 1)), "pbsr2")
    assert br2 == br
    assert np.allclose(S2[:3], S[:3], rtol=0, atol=0)  # identical before the exp branch
    assert not np.allclose(S2[3], S[3], rtol=1e-6)  # exp2 differs from exp there
    with pytest.raises(ValueError):
        R.reference_march(jx, jp, t, X, None, np.zeros((2, 1)), "rk4")


# ---------------------------------------------------------------------------
# gemm_into: products of row-major views with accumulation
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (2, 3, 4), (6, 6, 6), (7, 11, 13), (21, 21, 42), (21, 42, 59)])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.0, 1.0), (0.3, -0.5)])
def test_gemm_into_views(m, k, n, alpha, beta):
    """Blocks of larger arrays (the march's [E | F] layout) against NumPy's product."""
    from pbsens.kernels.blas import gemm_into
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    A = rng.standard_normal((m + 2, 2 * k + 3))[1:m + 1, k:2 * k]
    B = rng.standard_normal((k, 2 * n))[:, n:]
    Cbig = rng.standard_normal((m, n + 5))
    C = Cbig[:, 2:n + 2]
    expected = alpha * (A @ B) + (beta * C if beta != 0.0 else 0.0)
    if beta == 0.0:
        C[...] = np.nan  # beta = 0 ignores the output's contents, NaN included
    before = Cbig.copy()
    gemm_into(A, B, C, alpha, beta)
    assert np.allclose(C, expected, rtol=1e-13, atol=1e-13)
    # columns outside the view are untouched
    assert np.array_equal(Cbig[:, :2], before[:, :2]) and np.array_equal(Cbig[:, n + 2:], before[:, n + 2:])


@pytest.mark.parametrize("k", [0, 1, 5, 16, 257])   # 257 > TILES_MAX_K: BLAS
@pytest.mark.parametrize("beta", [0.0, 1.0, -0.5])
def test_gemm_into_every_tile_edge(k, beta):
    """Every number of leftover rows (1-4 per tile) and columns (masked lanes of
    either vector of an 8- or 16-wide tile), on views inside larger arrays: the product
    matches NumPy's and nothing outside C's view is written."""
    from pbsens.kernels.blas import TILES_MAX_K, gemm_into
    from pbsens.kernels.tiles import LANES, ROWS, VECTORS
    assert ROWS == 4 and LANES * VECTORS in (8, 16) and TILES_MAX_K < 257   # the edges below cover these
    rng = np.random.default_rng([k, int(4 * beta) + 2])
    for m in range(1, 10):
        for n in (1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 33, 35):
            A = rng.standard_normal((m + 1, k + 3))[1:, 2:k + 2]
            B = rng.standard_normal((k + 2, n + 4))[1:k + 1, 3:n + 3]
            big = rng.standard_normal((m + 2, n + 6))
            C = big[1:m + 1, 2:n + 2]
            expected = 0.7 * (A @ B) + (beta * C if beta != 0.0 else 0.0)
            if beta == 0.0:
                C[...] = np.nan
            outside = big.copy()
            outside[1:m + 1, 2:n + 2] = 0.0
            gemm_into(A, B, C, 0.7, beta)
            np.testing.assert_allclose(C, expected, rtol=1e-13, atol=1e-13, err_msg=f"m={m} k={k} n={n}")
            after = big.copy()
            after[1:m + 1, 2:n + 2] = 0.0
            np.testing.assert_array_equal(after, outside, err_msg=f"wrote outside C: m={m} k={k} n={n}")


def test_gemm_into_rejects_bad_input():
    from pbsens.kernels.blas import gemm_into
    with pytest.raises(ValueError, match="shapes"):
        gemm_into(np.ones((3, 4)), np.ones((5, 2)), np.ones((3, 2)), 1.0, 0.0)
    with pytest.raises(ValueError, match="contiguous"):
        gemm_into(np.ones((30, 30))[:, ::2], np.ones((15, 30)), np.ones((30, 30)), 1.0, 0.0)


@numba.njit
def _flat_roundtrip(A, k, value):
    v = flat(A)
    v[k] = value
    return v.shape[0], v.sum()


def test_flat_view_shares_memory_in_row_major_order():
    # 2-D and 3-D arrays, and a block of rows of a larger array (as the march uses)
    big = np.arange(60.0).reshape(2, 6, 5)
    for A in (np.arange(12.0).reshape(3, 4), np.arange(24.0).reshape(2, 3, 4), big[1][2:5]):
        expected = A.ravel().copy()
        expected[7] = -1.0
        size, total = _flat_roundtrip(A, 7, -1.0)
        assert size == A.size
        assert total == expected.sum()
        np.testing.assert_array_equal(A.ravel(), expected)   # the write went through
    assert big[1][3, 2] == -1.0 and np.count_nonzero(big == -1.0) == 1


def test_flat_view_refuses_non_contiguous_arrays():
    with pytest.raises(numba.core.errors.TypingError):
        _flat_roundtrip(np.ones((4, 4))[:, ::2], 0, 1.0)


def test_inlined_gemm_is_for_compiled_code_only():
    from pbsens.kernels.blas import gemm
    with pytest.raises(TypeError, match="gemm_into"):
        gemm(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), 1.0, 0.0)


@pytest.mark.parametrize("shape", [(11, 11), (11, 35), (3, 2), (1, 1)])
def test_switch_norms_match_numpy(shape):
    from pbsens.kernels import march as M
    rng = np.random.default_rng(sum(shape))
    X, Y = rng.standard_normal(shape), rng.standard_normal(shape)
    cs = np.full(max(shape), np.nan)      # work space: contents on entry must not matter
    for kind, order in ((L.NORM_1, 1), (L.NORM_INF, np.inf), (L.NORM_FRO, "fro")):
        np.testing.assert_allclose(M._norm_diff(X, Y, kind, cs), np.linalg.norm(X - Y, order), rtol=1e-14)
        np.testing.assert_allclose(M._norm(X, kind, cs), np.linalg.norm(X, order), rtol=1e-14)


def test_vector_lanes_follow_the_cpu():
    """Four doubles per vector without AVX-512 (the 8 accumulators then fit AVX2's 16 registers),
    eight with it; a target set by NUMBA_CPU_NAME is judged by NUMBA_CPU_FEATURES, not the host;
    the products' cut-over to BLAS follows (kernels.blas.TILES_MAX_K)."""
    from numba.core import config
    from pbsens.kernels.blas import TILES_MAX_K
    from pbsens.kernels.tiles import LANES, vector_lanes
    assert vector_lanes({"avx2": True, "avx512f": False}) == 4
    assert vector_lanes({"avx2": True, "avx512f": True}) == 8
    assert vector_lanes({}) == 4
    saved = config.CPU_FEATURES
    try:
        config.CPU_FEATURES = "+avx2,+avx512f"
        assert vector_lanes({}, cpu_name="skylake-avx512") == 8
        config.CPU_FEATURES = None
        assert vector_lanes({"avx512f": True}, cpu_name="generic") == 4
    finally:
        config.CPU_FEATURES = saved
    assert LANES == vector_lanes() and TILES_MAX_K == (256 if LANES == 8 else 128)
