"""Sparse exp/exp2 marches (linalg="sparse") against the dense kernels, the NumPy reference
march and tight forward sensitivities; the pattern adapter; the linalg choice."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pbsens
from pbsens.errors import PbsensError
from pbsens.sensitivity import sparse as sparse_path
from pbsens.model import sparsity
from pbsens.model.mass_action import random_mass_action_model
from pbsens.sensitivity.posthoc import sensitivities
from pbsens.sensitivity.sparse import SPARSE_MIN_STATES, state_jacobian
from reference import mass_action_network, reference_march, rel_max


@pytest.fixture(scope="module")
def network():
    return mass_action_network()


@pytest.fixture
def action_only(monkeypatch):
    """The sparse march without its dense step: every interval through the action of the exponential."""
    monkeypatch.setattr(sparse_path, "DENSE_STEP_MAX_STATES", 0)


@pytest.mark.parametrize("method", ["exp", "exp2"])
def test_sparse_equals_dense_and_numpy_reference(network, method, action_only):
    m, tr = network
    S0 = np.random.default_rng(1).normal(size=(m.n_states, m.n_params)) * 0.1
    rs = sensitivities(m, tr, method=method, S0=S0, linalg="sparse")
    st = sparse_path.runner(m).stats
    assert st[2] == 0 and st[0] > tr.t.size
    rd = sensitivities(m, tr, method=method, S0=S0, linalg="dense")
    S_ref = reference_march(m.jac_x, m.jac_p, tr.t, tr.x, tr.p, S0, method)[0]
    assert rs.options["linalg"] == "sparse" and rd.options["linalg"] == "dense"
    assert rel_max(rs.S, rd.S) < 1e-10
    assert rel_max(rs.S, S_ref) < 1e-10
    assert list(rs.branch) == list(rd.branch)


@settings(max_examples=6, deadline=None)
@given(n=st.integers(5, 30), seed=st.integers(0, 10_000), linear=st.booleans())
def test_random_networks_sparse_equals_dense(n, seed, linear):
    sparse_path.DENSE_STEP_MAX_STATES, keep = 0, sparse_path.DENSE_STEP_MAX_STATES
    try:
        _random_network_check(n, seed, linear)
    finally:
        sparse_path.DENSE_STEP_MAX_STATES = keep


def _random_network_check(n, seed, linear):
    m = random_mass_action_model(n, n_classes=4, seed=seed, linear=linear)
    tr = pbsens.solve_states(m, (0.0, 2.0), method="BDF", rtol=1e-6, atol=1e-9)
    rs = sensitivities(m, tr, method="exp2", linalg="sparse")
    rd = sensitivities(m, tr, method="exp2", linalg="dense")
    assert rel_max(rs.S, rd.S) < 1e-10


def test_dense_step_on_long_stiff_intervals():
    """Where h ||A|| is large the march takes the dense step (cheaper there), same numbers."""
    m = random_mass_action_model(30, n_classes=3, seed=2)
    tr = pbsens.solve_states(m, (0.0, 2000.0), method="BDF", rtol=1e-6, atol=1e-9)
    rs = sensitivities(m, tr, method="exp2", linalg="sparse")
    st = sparse_path.runner(m).stats
    rd = sensitivities(m, tr, method="exp2", linalg="dense")
    assert st[2] > 0 and st[0] > 0          # both kinds of step ran
    assert rel_max(rs.S, rd.S) < 1e-10


def test_native_jacobian_data_match_the_dense_jacobians(network):
    m, tr = network
    Ap, Ai = m.jac_x_pattern
    Bp, Bi = m.jac_p_pattern
    x, p = tr.x[5], tr.p
    a = np.empty(Ai.size)
    b = np.empty(Bi.size)
    m.fns.jac_x_data_into(0.0, x, p, m.constants, a)
    m.fns.jac_p_data_into(0.0, x, p, m.constants, b)
    import scipy.sparse as sp
    assert np.allclose(sp.csr_matrix((a, Ai, Ap), shape=(40, 40)).toarray(), m.jac_x(0.0, x, p), rtol=1e-14)
    assert np.allclose(sp.csr_matrix((b, Bi, Bp), shape=(40, m.n_params)).toarray(), m.jac_p(0.0, x, p),
                       rtol=1e-14)
    # and the state Jacobian handed to scipy's BDF
    assert np.allclose(state_jacobian(m, p)(0.0, x).toarray(), m.jac_x(0.0, x, p), rtol=1e-14)


def test_exp2_sparse_accuracy_against_tight_forward_sensitivities(network, action_only):
    """Same error as the dense march against an independent reference (FS at rtol 1e-10)."""
    m, tr = network
    fs = pbsens.forward_sensitivities(m, (0.0, 5.0), t_eval=tr.t[1:], rtol=1e-10, atol=1e-12)
    rs = sensitivities(m, tr, method="exp2", linalg="sparse", t_eval=tr.t[1:])
    rd = sensitivities(m, tr, method="exp2", linalg="dense", t_eval=tr.t[1:])
    e_s = rel_max(rs.S, fs.S)
    e_d = rel_max(rd.S, fs.S)
    assert e_s < 1e-3
    assert abs(e_s - e_d) <= 1e-9


@pytest.mark.parametrize("method", ["exp", "exp2"])
def test_adapter_on_a_model_without_sparse_jacobians(camkii, method):
    """A model without sparse Jacobians (patterns removed): the pattern is probed and the values gathered."""
    import copy

    from pbsens.model.sparsity import sparse_jacobians
    bare = copy.copy(camkii)
    bare.jac_x_pattern = bare.jac_p_pattern = None
    bare.__dict__["_kernels"] = {}   # a shallow copy would share the original's kernel cache
    assert sparse_jacobians(bare).gather and not sparse_jacobians(camkii).gather
    tr = pbsens.solve_states(camkii, (0.0, 10.0))
    rs = sensitivities(bare, tr, method=method, linalg="sparse")
    rd = sensitivities(camkii, tr, method=method, linalg="dense")
    assert rel_max(rs.S, rd.S) < 1e-10


def test_adapter_recovers_from_a_pattern_miss(pka):
    """An entry missing from the probed pattern is found along the march and added."""
    tr = pbsens.solve_states(pka, (0.0, 20.0))
    rd = sensitivities(pka, tr, method="exp2", linalg="dense")
    sj = sparsity.sparse_jacobians(pka)
    # drop the first entry of row 0 of A's pattern
    Ai = np.delete(sj.Ai, sj.Ap[0])
    Ap = sj.Ap.copy()
    Ap[1:] -= 1
    pka.__dict__["_kernels"].pop("sparse_runner", None)
    pka.__dict__["_kernels"]["sparse"] = sparsity.SparseJacobians(Ap, Ai, sj.Bp, sj.Bi, pka.n_params)
    rs = sensitivities(pka, tr, method="exp2", linalg="sparse")
    assert rel_max(rs.S, rd.S) < 1e-10
    assert sparsity.sparse_jacobians(pka).Ai.size == sj.Ai.size


def test_linalg_choice(pka):
    tr = pbsens.solve_states(pka, (0.0, 5.0))
    # small models keep the dense path, bit for bit
    assert pka.n_states < SPARSE_MIN_STATES
    r_auto = sensitivities(pka, tr, method="exp2")
    r_dense = sensitivities(pka, tr, method="exp2", linalg="dense")
    assert r_auto.options["linalg"] == "dense" and np.array_equal(r_auto.S, r_dense.S)
    big = random_mass_action_model(SPARSE_MIN_STATES + 10, n_classes=3, seed=0)
    trb = pbsens.solve_states(big, (0.0, 1.0), method="BDF")
    assert sensitivities(big, trb, method="exp2").options["linalg"] == "sparse"
    assert sensitivities(big, trb, method="pbsr").options["linalg"] == "dense"


@pytest.mark.parametrize("kwargs, message", [
    (dict(linalg="blas"), "'linalg'"),
    (dict(linalg=None), "'linalg'"),
    (dict(linalg="sparse", method="pbsr"), "'linalg'"),
])
def test_bad_linalg_is_named(pka, kwargs, message):
    tr = pbsens.solve_states(pka, (0.0, 1.0))
    with pytest.raises(PbsensError, match=message):
        sensitivities(pka, tr, **kwargs)


def test_nonfinite_jacobians_raise_on_the_sparse_path(tmp_path):
    from conftest import make_model
    m = make_model(tmp_path, "sq", {"x": 1.0}, {"k": 1.0}, {"x": "-k*sqrt(x - 0.5)"})
    t = np.linspace(0, 1, 5)
    x = np.array([[1.0], [0.9], [0.5], [0.45], [0.4]])
    with pytest.raises(PbsensError, match="NaN"):
        sensitivities(m, (t, x), method="exp2", linalg="sparse")


@pytest.mark.parametrize("seed", range(6))
def test_rho_lower_bound_is_below_the_spectral_radius(seed):
    # the march skips the action's plan where its cheapest conceivable cost, bounded below
    # through sqrt(|tr M^2| / n) <= rho(M), already exceeds the dense step's
    from scipy.sparse import csr_matrix
    from pbsens.kernels.sparse_march import _transpose_positions, rho_lower_bound
    rng = np.random.default_rng(seed)
    n = 30
    M = rng.standard_normal((n, n)) * (rng.random((n, n)) < 0.15)
    M[np.diag_indices(n)] = -np.abs(rng.standard_normal(n)) * 10.0 ** rng.integers(0, 6, n)
    if seed % 2:
        M -= M.T                                   # complex spectrum, tr M^2 of mixed signs
    C = csr_matrix(M)
    C.sort_indices()
    Ap, Ai, Ad = (np.ascontiguousarray(a, dtype=d) for a, d in ((C.indptr, np.int64), (C.indices, np.int64),
                                                                   (C.data, np.float64)))
    tpos = _transpose_positions(Ap, Ai)
    for e in range(Ai.size):                       # (i, j) -> (j, i), or -1
        i = np.searchsorted(Ap, e, side="right") - 1
        j = Ai[e]
        assert (tpos[e] < 0) == (M[j, i] == 0.0) and (tpos[e] < 0 or Ai[tpos[e]] == i)
    lb = rho_lower_bound(Ap, Ai, Ad, tpos)
    mu = np.trace(M) / n
    rho = min(np.abs(np.linalg.eigvals(M)).max(), np.abs(np.linalg.eigvals(M - mu * np.eye(n))).max())
    assert 0.0 < lb <= rho * (1 + 1e-12)
    assert np.isclose(lb, np.sqrt(min(abs(np.trace(M @ M)), abs(np.trace((M - mu * np.eye(n)) @ (M - mu * np.eye(n)))))
                                  / n), rtol=1e-12)
