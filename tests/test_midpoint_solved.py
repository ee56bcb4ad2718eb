"""The exp2 midpoint correction without ``F3`` (METHOD.md section 14, "Without F3").

``F3 c = (Abar + L^T L)^-1 (F2 - (H^2/2) I) c`` for ``c`` in the range that every ``A`` and ``B``
share, with ``L`` the model's conservation laws. Checked: LAPACK's inverse against numpy's;
the laws found numerically against the null space of an enzyme network's stoichiometric
matrix (written out by hand); the solved correction against the one with ``F3`` from
``exp_phi123_into`` on a random singular network matrix; and the sparse march on the enzyme
network, with and without the laws, against each other and against tight forward sensitivities.
"""
import numpy as np
import pytest
import scipy.linalg as sla

import pbsens
from pbsens.sensitivity import sparse as sparse_path
from pbsens.kernels.lapack import inverse_inplace, pivots
from pbsens.kernels.midpoint import exp2_correct_sparse_into, exp2_correct_sparse_solved_into
from pbsens.kernels.phi import exp_phi123_into
from pbsens.kernels.dense import workspace
from pbsens.kernels.steps import exp2_prepare_inplace
from pbsens.model.conservation import shared_left_null_space
from conftest import make_model
from reference import rel_max


@pytest.mark.parametrize("n", [1, 7, 40])
def test_inverse_inplace_matches_numpy(n):
    A = np.random.default_rng(n).standard_normal((n, n)) + n * np.eye(n)
    X = A.copy()
    assert inverse_inplace(X, pivots(n)) == 0
    np.testing.assert_allclose(X, np.linalg.inv(A), rtol=1e-12, atol=1e-14)


def test_inverse_inplace_reports_a_zero_pivot_and_bad_shapes():
    assert inverse_inplace(np.zeros((3, 3)), pivots(3)) > 0
    assert inverse_inplace(np.zeros((3, 4)), pivots(3)) != 0             # not square
    with pytest.raises(TypeError):
        inverse_inplace(np.zeros((4, 8))[:, :4], pivots(4))                # not contiguous


# E + S <-> C -> E + P, and P -> S (closes the cycle): totals E + C and S + C + P are conserved
_STATES = {"E": 1.0, "S": 5.0, "C": 0.0, "P": 0.0}
_PARAMS = {"kf": 50.0, "kr": 20.0, "kc": 3.0, "kp": 0.4}
_ODES = {"E": "-kf*E*S + kr*C + kc*C", "S": "-kf*E*S + kr*C + kp*P", "C": "kf*E*S - kr*C - kc*C",
         "P": "kc*C - kp*P"}
# stoichiometric matrix (columns: binding, unbinding, catalysis, recycling), states E, S, C, P
_N = np.array([[-1, 1, 1, 0], [-1, 1, 0, 1], [1, -1, -1, 0], [0, 0, 1, -1]], dtype=float)


@pytest.fixture(scope="module")
def enzyme(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("enzyme"), "enzyme_cycle", _STATES, _PARAMS, _ODES)


def test_laws_of_the_enzyme_network(enzyme, tmp_path):
    L = shared_left_null_space(enzyme)
    Z = sla.null_space(_N.T)                       # the conservation laws, from the stoichiometry
    assert L.shape == (Z.shape[1], 4) == (2, 4)
    np.testing.assert_allclose(L.T @ L, Z @ Z.T, atol=1e-12)
    np.testing.assert_allclose(L @ L.T, np.eye(2), atol=1e-12)
    lone = make_model(tmp_path, "decay", {"x": 1.0}, {"a": 0.7, "b": 2.0}, {"x": "-a*x + b"})
    assert shared_left_null_space(lone).shape == (0, 1)


def _csr_of(M):
    P = np.zeros(M.shape[0] + 1, dtype=np.int64)
    I, V = [], []
    for i in range(M.shape[0]):
        cols = np.flatnonzero(M[i])
        I += cols.tolist()
        V += M[i, cols].tolist()
        P[i + 1] = len(I)
    return P, np.array(I, dtype=np.int64), np.array(V)


def test_solved_correction_matches_the_f3_correction():
    """A singular ``Abar = N K`` (n = 30, rank 24, stiff) and ``B``'s in the range of ``N``: the
    correction from the solve equals the one with ``F3`` to 1e-9."""
    rng = np.random.default_rng(3)
    n, r, p, h = 30, 24, 5, 2.0
    N = rng.standard_normal((n, r))
    L = np.ascontiguousarray(sla.null_space(N.T).T)

    def jac():
        return N @ (rng.standard_normal((r, n)) - 40.0 * rng.random() * np.eye(r, n))

    A0, A1, Am = jac(), jac(), jac()
    Abar = 0.5 * (A0 + A1)
    B0, B1, Bm = (N @ rng.standard_normal((r, p)) for _ in range(3))
    Sa = rng.standard_normal((n, p))
    EF3 = np.empty((n, 4 * n))
    exp_phi123_into(np.ascontiguousarray(Abar), h, EF3, workspace(n))
    EG = np.ascontiguousarray(EF3[:, :3 * n])
    exp2_prepare_inplace(EG, h)
    Se = rng.standard_normal((n, p))
    X = np.ascontiguousarray(Abar + L.T @ L)
    assert inverse_inplace(X, pivots(n)) == 0
    Ap, Ai, _ = _csr_of(np.ones((n, n)))
    flat = [np.ascontiguousarray(M.reshape(-1)) for M in (A0, A1, Am, Abar)]
    out = []
    for solved in (False, True):
        S = Se.copy()
        work = [np.empty(n * n), np.empty((2 * n, p)), np.empty((n, p)), np.empty((n, p))]
        if solved:
            exp2_correct_sparse_solved_into(EG, X, h, Ap, Ai, *flat, B0, B1, Bm, Sa, S, *work)
        else:
            exp2_correct_sparse_into(EG, EF3, h, Ap, Ai, *flat, B0, B1, Bm, Sa, S, *work)
        out.append(S)
    assert rel_max(out[0] - Se, out[1] - Se) < 1e-9          # the corrections themselves
    assert np.abs(out[0] - Se).max() > 1e-3 * np.abs(Se).max()    # and they are not negligible


def _march(m, tr, ts, laws):
    runner = sparse_path.runner(m)
    runner._laws = laws
    r = pbsens.sensitivities(m, tr, method="exp2", linalg="sparse", t_eval=ts)
    return r, runner.stats.copy()


def test_enzyme_march_with_the_laws_equals_the_march_with_f3(enzyme):
    ts = np.linspace(0.0, 40.0, 9)
    tr = pbsens.solve_states(enzyme, (0.0, 40.0), t_eval=ts, method="rodas5p", rtol=1e-4, atol=1e-8)
    with_laws, st = _march(enzyme, tr, ts, shared_left_null_space(enzyme))
    without, st0 = _march(enzyme, tr, ts, np.zeros((0, 4)))       # Abar singular: F3 everywhere
    assert st[3] > 0 and st[4] > 0 and st0[4] == 0 and st[2] == st0[2]
    assert rel_max(with_laws.S, without.S) < 1e-8
    ref = pbsens.forward_sensitivities(enzyme, (0.0, 40.0), t_eval=ts, method="Radau", rtol=1e-11,
                                       atol=1e-13)
    E_laws, E_f3 = (pbsens.relative_error(r, ref)[1:] for r in (with_laws, without))
    assert np.max(E_laws) <= 1.001 * np.max(E_f3) + 1e-12
    # a law that the model does not have is caught at the grid points: F3 everywhere, same result
    wrong = np.array([[1.0, 0.0, 0.0, 0.0]])
    r_wrong, st_w = _march(enzyme, tr, ts, wrong)
    assert st_w[4] == 0 and rel_max(r_wrong.S, without.S) < 1e-12
    sparse_path.runner(enzyme)._laws = None
