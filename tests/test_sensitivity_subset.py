"""``sensitivities(..., params=...)``: S for a parameter subset, on the dense and the sparse path
(where only the columns that can be non-zero are marched), against the full S, the NumPy
reference march and tight forward sensitivities."""
import numpy as np
import pytest

import pbsens
from pbsens.errors import PbsensError
from pbsens.sensitivity.posthoc import sensitivities
from pbsens.sensitivity.sparse import _reduced_pattern
from reference import mass_action_network, reference_march, rel_max


@pytest.fixture(scope="module")
def network():
    return mass_action_network()


@pytest.mark.parametrize("linalg", ["sparse", "dense"])
def test_subset_is_the_columns_of_the_full_march(network, linalg):
    m, tr = network
    S0 = np.random.default_rng(2).normal(size=(m.n_states, m.n_params)) * 0.1
    pick = [4, 0, m.n_params - 1, 2]
    full = sensitivities(m, tr, method="exp2", S0=S0, linalg="dense")
    ref = reference_march(m.jac_x, m.jac_p, tr.t, tr.x, tr.p, S0, "exp2")[0]
    r = sensitivities(m, tr, method="exp2", S0=S0, linalg=linalg, params=[m.param_names[j] for j in pick])
    assert r.S.shape == (tr.t.size, m.n_states, len(pick))
    assert r.param_names == [m.param_names[j] for j in pick]
    assert rel_max(r.S, full.S[:, :, pick]) < 1e-10
    assert rel_max(r.S, ref[:, :, pick]) < 1e-10
    assert np.array_equal(r.S0, S0[:, pick])
    # indices select the same columns; S0 may be given for the subset only
    r2 = sensitivities(m, tr, method="exp2", S0=S0[:, pick], linalg=linalg, params=pick)
    assert rel_max(r2.S, full.S[:, :, pick]) < 1e-10


def test_subset_against_tight_forward_sensitivities(network):
    m, tr = network
    pick = [1, 4, 3]
    tight = pbsens.solve_states(m, (0.0, 5.0), method="BDF", rtol=1e-10, atol=1e-13, t_eval=np.linspace(0, 5, 400))
    r = sensitivities(m, tight, method="exp2", linalg="sparse", params=pick, t_eval=[1.0, 2.5, 5.0])
    fs = pbsens.forward_sensitivities(m, (0.0, 5.0), t_eval=[1.0, 2.5, 5.0], method="Radau", rtol=1e-11,
                                      atol=1e-13, params=pick)
    assert rel_max(r.S, fs.S) < 1e-4


@pytest.fixture(scope="module")
def with_unused(tmp_path_factory):
    from conftest import make_model
    return make_model(tmp_path_factory.mktemp("subset"), "chain_unused", {"x1": 1.0, "x2": 0.0, "x3": 0.0},
                      {"k1": 0.7, "k2": 0.3, "u": 2.0, "k3": 0.1},
                      {"x1": "-k1*x1 + k3*x3", "x2": "k1*x1 - k2*x2", "x3": "k2*x2 - k3*x3"})


def test_columns_without_b_are_zero_or_propagated(with_unused):
    """``u`` is in no right-hand side: with S0 = 0 its column is exactly zero without a step;
    with a non-zero S0 column it is still marched (exp(tA) S0), equal to the dense path."""
    m = with_unused
    tr = pbsens.solve_states(m, (0.0, 20.0), method="BDF", rtol=1e-8, atol=1e-11)
    ju = m.param_names.index("u")
    r = sensitivities(m, tr, method="exp2", linalg="sparse", params=["u", "k1"])
    assert np.all(r.S[:, :, 0] == 0.0)
    rd = sensitivities(m, tr, method="exp2", linalg="dense")
    assert rel_max(r.S[:, :, 1], rd.S[:, :, m.param_names.index("k1")]) < 1e-10
    S0 = np.zeros((3, m.n_params))
    S0[0, ju] = 1.0                       # as if x1(0) were u / 2
    rs = sensitivities(m, tr, method="exp2", linalg="sparse", S0=S0, params=["u"])
    rd = sensitivities(m, tr, method="exp2", linalg="dense", S0=S0)
    assert np.abs(rs.S[-1, :, 0]).max() > 0.1
    assert rel_max(rs.S[:, :, 0], rd.S[:, :, ju]) < 1e-10
    # the column sums of exp(tA) S0 are conserved (x1 + x2 + x3 is)
    assert np.allclose(rs.S[:, :, 0].sum(axis=1), 1.0, rtol=0, atol=1e-10)


def test_reduced_pattern_selects_and_renumbers():
    # B (3 x 4): row 0 cols 0, 2; row 1 col 3; row 2 cols 1, 2
    Bp = np.array([0, 2, 3, 5])
    Bi = np.array([0, 2, 3, 1, 2])
    active, Rp, Ri, Rsel = _reduced_pattern(Bp, Bi, np.array([2, 3, 0]), np.array([False, False, False]))
    assert list(active) == [0, 1, 2]
    assert list(Rp) == [0, 2, 3, 4] and list(Ri) == [2, 0, 1, 0] and list(Rsel) == [0, 1, 2, 4]
    # column 1 of B is empty in a selection [1, 3] unless its initial value is non-zero
    active, Rp, Ri, Rsel = _reduced_pattern(np.array([0, 1, 1, 1]), np.array([3]), np.array([1, 3]),
                                            np.array([False, False]))
    assert list(active) == [1] and list(Ri) == [0] and list(Rsel) == [0]
    active, *_ = _reduced_pattern(np.array([0, 1, 1, 1]), np.array([3]), np.array([1, 3]),
                                  np.array([True, False]))
    assert list(active) == [0, 1]


@pytest.mark.parametrize("params, message", [(["nope"], "params"), ([0, 0], "twice"), ([], "empty")])
def test_bad_params_are_named(network, params, message):
    m, tr = network
    with pytest.raises(PbsensError, match=message):
        sensitivities(m, tr, method="exp2", params=params)


def test_bad_s0_shape_for_a_subset(network):
    m, tr = network
    with pytest.raises(PbsensError, match="S0"):
        sensitivities(m, tr, method="exp2", params=[0, 1], S0=np.zeros((m.n_states, 3)))
