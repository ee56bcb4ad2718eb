"""The phi kernels' deflation of isolated fast states (pbsens.kernels.phi_deflate), against
exact phi functions of matrices built as S diag(lambda) S^-1, and against the plain kernels."""
import numpy as np
import pytest

from pbsens.kernels import phi
from pbsens.kernels import phi_deflate as D
from pbsens.kernels.dense import NWS_MIN, workspace

KERNELS = [(phi.exp_phi1_into, phi._exp_phi1_plain_into, 2),
           (phi.exp_phi12_into, phi._exp_phi12_plain_into, 3),
           (phi.exp_phi123_into, phi._exp_phi123_plain_into, 4)]


def _diagonalisable(n, fast, seed=0, density=0.2, coupling=0.05):
    """A = S diag(lam) S^-1 with slow eigenvalues in [-5, -0.01] and the given fast ones at
    states 7, 19, ...; S = I + a sparse perturbation (well conditioned), so A's fast states
    are isolated diagonal entries, as in a model with fast linear reactions."""
    rng = np.random.default_rng(seed)
    lam = -rng.uniform(0.01, 5.0, n)
    for i, f in enumerate(fast):
        lam[7 + 12 * i] = f
    S = np.eye(n) + coupling * rng.normal(size=(n, n)) * (rng.random((n, n)) < density)
    Si = np.linalg.inv(S)
    return np.ascontiguousarray(S @ np.diag(lam) @ Si), S, Si, lam


def _exact(S, Si, lam, h, blocks):
    z = h * lam
    e = np.exp(z)
    p1 = np.expm1(z) / z
    p2 = (p1 - 1.0) / z
    p3 = (p2 - 0.5) / z
    fs = (e, h * p1, h * h * p2, h ** 3 * p3)[:blocks]
    return np.hstack([S @ np.diag(f) @ Si for f in fs])


def _block_err(out, ref, n, blocks):
    return max(np.abs(out[:, b * n:(b + 1) * n] - ref[:, b * n:(b + 1) * n]).max()
               / np.abs(ref[:, b * n:(b + 1) * n]).max() for b in range(blocks))


@pytest.mark.parametrize("kernel, plain, blocks", KERNELS)
@pytest.mark.parametrize("h", [0.5, 10.0, 300.0])
def test_fast_states_are_deflated_and_the_result_is_exact(kernel, plain, blocks, h):
    n = 40
    A, S, Si, lam = _diagonalisable(n, [-2.4e7, -3.8e5])
    assert D.deflate_prepare(A, h, workspace(n)) == 2
    ref = _exact(S, Si, lam, h, blocks)
    out = np.empty((n, blocks * n))
    kernel(A, h, out, workspace(n))
    err = _block_err(out, ref, n, blocks)
    assert err < 1e-10
    outp = np.empty((n, blocks * n))
    plain(A, h, outp, workspace(n))
    assert err < _block_err(outp, ref, n, blocks)       # scaling and squaring on A loses digits here


@pytest.mark.parametrize("kernel, plain, blocks", KERNELS)
def test_without_fast_states_the_kernels_are_the_plain_ones_to_the_bit(kernel, plain, blocks):
    n = 30
    A, S, Si, lam = _diagonalisable(n, [], seed=2)
    for h in (0.1, 50.0):
        assert D.deflate_prepare(A, h, workspace(n)) == 0
        a, b = np.empty((n, blocks * n)), np.empty((n, blocks * n))
        kernel(A, h, a, workspace(n))
        plain(A, h, b, workspace(n))
        np.testing.assert_array_equal(a, b)
        assert _block_err(a, _exact(S, Si, lam, h, blocks), n, blocks) < 1e-11


def test_what_is_not_deflated():
    n = 40
    A, _, _, _ = _diagonalisable(n, [-2.4e7, -3.8e5])
    assert D.deflate_prepare(A, 1e-9, workspace(n)) == 0          # h |lambda| too small to matter
    assert D.deflate_prepare(A, -10.0, workspace(n)) == 0         # backwards steps
    assert D.deflate_prepare(A, 10.0, np.zeros((NWS_MIN, n, n))) == 0   # a workspace without the slices
    small, _, _, _ = _diagonalisable(12, [-1e6], seed=1)
    assert D.deflate_prepare(small, 10.0, workspace(12)) == 0     # below MIN_N
    # a fast diagonal entry whose coupling is not small: not isolated, left to the plain kernel
    B = A.copy()
    B[3, :] += 1e6
    assert D.deflate_prepare(B, 10.0, workspace(n)) < 2
    out, outp = np.empty((n, 3 * n)), np.empty((n, 3 * n))
    k = D.deflate_prepare(B, 10.0, workspace(n))
    phi.exp_phi12_into(B, 10.0, out, workspace(n))
    phi._exp_phi12_plain_into(B, 10.0, outp, workspace(n))
    if k == 0:
        np.testing.assert_array_equal(out, outp)
    else:
        assert np.abs(out - outp).max() <= 1e-6 * np.abs(outp).max()


def test_only_the_fast_states_ratio_allows_are_deflated():
    n = 40
    A, S, Si, lam = _diagonalisable(n, [-2.4e7, -30.0])    # the second is not 8x the rest: one deflated
    assert D.deflate_prepare(A, 10.0, workspace(n)) == 1
    out = np.empty((n, 3 * n))
    phi.exp_phi12_into(A, 10.0, out, workspace(n))
    assert _block_err(out, _exact(S, Si, lam, 10.0, 3), n, 3) < 1e-10


def test_balancing_is_a_power_of_two_similarity_that_shrinks_a_bad_column():
    rng = np.random.default_rng(4)
    n = 20
    A = rng.normal(size=(n, n))
    A[:, 5] *= 1e9          # a badly scaled column (a constant state's, as in Lang)
    A[5, :] *= 1e-3
    B, d = np.empty_like(A), np.empty(n)
    D.balance_into(A, B, d, np.empty(n), np.empty(n))
    assert np.all(np.log2(d) == np.round(np.log2(d)))
    np.testing.assert_allclose(B, (A / d[:, None]) * d[None, :], rtol=0, atol=0)
    assert np.abs(B).sum(axis=0).max() < 1e-3 * np.abs(A).sum(axis=0).max()


def test_non_finite_input_is_not_deflated_and_gives_nan():
    n = 40
    A, _, _, _ = _diagonalisable(n, [-2.4e7])
    A[3, 4] = np.nan
    assert D.deflate_prepare(A, 10.0, workspace(n)) == 0
    out = np.empty((n, 3 * n))
    phi.exp_phi12_into(A, 10.0, out, workspace(n))
    assert np.isnan(out).all()


def _gebal_reference(A):
    """LAPACK 3.5+ dgebal's scaling (no permutation), transcribed plainly: norms summed afresh."""
    B = A.copy()
    n = B.shape[0]
    d = np.ones(n)
    noconv = True
    while noconv:
        noconv = False
        for i in range(n):
            c, r = np.linalg.norm(B[:, i]), np.linalg.norm(B[i, :])
            if c == 0.0 or r == 0.0:
                continue
            f, s = 1.0, c + r
            while c < r / 2.0:
                f, c, r = 2.0 * f, 2.0 * c, r / 2.0
            while c / 2.0 >= r:
                f, c, r = f / 2.0, c / 2.0, 2.0 * r
            if c + r >= 0.95 * s:
                continue
            d[i] *= f
            noconv = True
            B[i, :] /= f
            B[:, i] *= f
    return B, d


@pytest.mark.parametrize("seed", range(5))
def test_balancing_matches_lapack_scaling(seed):
    # the kernel keeps the squared norms up to date instead of summing them afresh per state
    rng = np.random.default_rng(seed)
    n = 30
    A = rng.normal(size=(n, n)) * (rng.random((n, n)) < 0.3)
    A *= 2.0 ** rng.integers(-20, 20, size=(n, 1))             # badly scaled rows and columns
    A *= 2.0 ** rng.integers(-20, 20, size=(1, n))
    A[np.diag_indices(n)] -= 2.0 ** rng.integers(0, 30, n)
    B, d = np.empty_like(A), np.empty(n)
    D.balance_into(A, B, d, np.empty(n), np.empty(n))
    B_ref, d_ref = _gebal_reference(A)
    np.testing.assert_array_equal(d, d_ref)
    np.testing.assert_array_equal(B, B_ref)
