"""The sparse march's dense exp2 step in the coordinates the conservation laws leave
(:mod:`pbsens.kernels.reduced`, METHOD.md section 14, "In the coordinates the laws leave").

Checked: the reduced matrices against their NumPy definition; the eliminated states against
the null space of the laws (and that they avoid the fast states); and the march on a network
of 16 enzyme cycles (64 states, 32 laws, the default sparse path) with and without the
reduction, against each other and against tight forward sensitivities, with an initial
sensitivity that the laws do not annihilate (``Z != 0``).
"""
import numpy as np
import pytest
import scipy.linalg as sla
from scipy.sparse import csr_matrix, random as sprandom

import pbsens
from pbsens.sensitivity import sparse as sparse_path
from pbsens.solvers import refine
from pbsens.kernels.reduced import reduce_b_into, reduce_into
from pbsens.model.conservation import dependent_states, shared_left_null_space
from conftest import make_model
from reference import rel_max


def _csr(M):
    C = csr_matrix(M)
    C.sort_indices()
    return (np.ascontiguousarray(C.indptr, dtype=np.int64), np.ascontiguousarray(C.indices, dtype=np.int64),
            np.ascontiguousarray(C.data, dtype=np.float64))


@pytest.mark.parametrize("seed", range(4))
def test_reduced_matrices_match_their_definition(seed):
    rng = np.random.default_rng(seed)
    n, k, p = 14, 4, 5
    A = sprandom(n, n, density=0.3, random_state=seed).toarray() + np.diag(rng.uniform(-5, -1, n))
    B = sprandom(n, p, density=0.3, random_state=seed + 10).toarray()
    dep = np.sort(rng.choice(n, k, replace=False)).astype(np.int64)
    ind = np.setdiff1d(np.arange(n), dep)
    K = rng.standard_normal((k, n - k))
    Z = rng.standard_normal((k, p))
    rpos = np.full(n, -1, np.int64)
    rpos[ind] = np.arange(ind.size)
    dpos = np.full(n, -1, np.int64)
    dpos[dep] = np.arange(k)
    Ap, Ai, Av = _csr(A)
    Bp, Bi, Bv = _csr(B)
    Ar = np.empty((n - k, n - k))
    reduce_into(Ap, Ai, Av, rpos, dpos, K, Ar)
    np.testing.assert_allclose(Ar, A[np.ix_(ind, ind)] - A[np.ix_(ind, dep)] @ K, rtol=1e-13, atol=1e-13)
    Br = np.empty((n - k, p))
    for has_z in (False, True):
        reduce_b_into(Bp, Bi, Bv, Ap, Ai, Av, rpos, dpos, Z, has_z, Br)
        want = B[ind] + (A[np.ix_(ind, dep)] @ Z if has_z else 0.0)
        np.testing.assert_allclose(Br, want, rtol=1e-13, atol=1e-13)


def test_dependent_states_eliminate_exactly_and_avoid_fast_states():
    rng = np.random.default_rng(3)
    N = rng.integers(-2, 3, size=(9, 5)).astype(float)      # 9 species, 5 reactions: >= 4 laws
    L = sla.null_space(N.T).T
    k = L.shape[0]
    rate = np.ones(9)
    rate[[0, 4]] = 1e9                                       # two fast states
    dep, ind, K, LDinv = dependent_states(L, rate)
    assert dep.size == k and np.intersect1d(dep, [0, 4]).size == 0
    np.testing.assert_allclose(LDinv @ L[:, dep], np.eye(k), atol=1e-10)
    v = sla.null_space(L) @ rng.standard_normal(9 - k)       # L v = 0
    np.testing.assert_allclose(v[dep], -K @ v[ind], atol=1e-12)
    assert np.union1d(dep, ind).tolist() == list(range(9))
    # no laws, or a block too ill-conditioned to eliminate with: nothing eliminated
    assert dependent_states(np.zeros((0, 9)))[0].size == 0
    eps = 1e-8
    bad = np.zeros((2, 6))
    bad[0, 0], bad[1, 1], bad[1, 2] = 1.0, eps, 1.0
    bad[1] /= np.linalg.norm(bad[1])
    assert dependent_states(bad)[0].tolist() == [0, 2]                # well conditioned: taken
    # states 0 and 2 fast: the weights push the choice to state 1 (and 0): L[:, [0, 1]] has cond 1e8
    assert dependent_states(bad, np.array([1e12, 1.0, 1e12, 1.0, 1.0, 1.0]))[0].size == 0


def _cycles(tmp_path, n_cycles=16):
    """``n_cycles`` enzyme cycles E + S <-> C -> E + P, each P feeding the next cycle's S, with
    rates spread over 4 decades."""
    rng = np.random.default_rng(0)
    states, params, odes = {}, {}, {}
    for c in range(n_cycles):
        E, S, C, P = (f"{s}{c}" for s in "ESCP")
        states.update({E: 1.0 + c % 3, S: 5.0, C: 0.0, P: 0.0})
        kf, kr, kc, kp = (f"{s}{c}" for s in ("kf", "kr", "kc", "kp"))
        params.update({kf: float(10 ** rng.uniform(0, 3)), kr: 20.0, kc: float(10 ** rng.uniform(-1, 1)),
                       kp: 0.4})
        odes.update({E: f"-{kf}*{E}*{S} + {kr}*{C} + {kc}*{C}",
                     S: f"-{kf}*{E}*{S} + {kr}*{C} + {kp}*P{(c - 1) % n_cycles}",
                     C: f"{kf}*{E}*{S} - {kr}*{C} - {kc}*{C}",
                     P: f"{kc}*{C} - {kp}*{P}"})
    return make_model(tmp_path, "cycles", states, params, odes)


def _march(m, tr, ts, S0, reduce_laws):
    """The exp2 march with the midpoint correction on the long intervals alone (``CHORD_TOL`` off):
    on this network at rtol 1e-6 every interval bends (METHOD.md section 14), and a corrected
    short interval is declined by the reduced path's norm test on ``Ared^-1``, so only the
    length rule leaves plain dense-step intervals for the reduced step to take."""
    runner = sparse_path.runner(m)
    runner.reduce_laws = reduce_laws
    saved = refine.CHORD_TOL
    refine.CHORD_TOL = np.inf
    try:
        r = pbsens.sensitivities(m, tr, method="exp2", t_eval=ts, S0=S0)
    finally:
        runner.reduce_laws = True
        refine.CHORD_TOL = saved
    return r, runner.stats.copy()


@pytest.fixture(scope="module")
def cycles(tmp_path_factory):
    m = _cycles(tmp_path_factory.mktemp("cycles"))
    ts = np.linspace(0.0, 20.0, 11)
    tr = pbsens.solve_states(m, (0.0, 20.0), t_eval=ts, method="rodas5p", rtol=1e-6, atol=1e-9)
    return m, ts, tr


def test_reduced_march_equals_the_full_one(cycles):
    # S(0) = 0: L S = 0 throughout, and the two marches are the same step in two coordinate systems
    m, ts, tr = cycles
    assert m.n_states == 64 and m.n_states >= sparse_path.SPARSE_MIN_STATES
    assert shared_left_null_space(m).shape[0] >= 16          # (at least) an E + C total per cycle
    red, st = _march(m, tr, ts, None, True)
    full, st0 = _march(m, tr, ts, None, False)
    assert st[5] > 0 and st0[5] == 0 and st[2] == st0[2] and st[5] <= st[2]
    assert rel_max(red.S, full.S) < 1e-9


def test_reduced_march_with_conserved_initial_sensitivities(cycles):
    # L S(0) != 0: the offset Z enters the reduced forcing (A[ind, dep] Z, linear over the step
    # where the full step freezes it with A), so the two agree to the method's error, and both
    # to tight forward sensitivities
    m, ts, tr = cycles
    S0 = np.random.default_rng(1).standard_normal((m.n_states, m.n_params)) * 0.1
    red, st = _march(m, tr, ts, S0, True)
    full, _ = _march(m, tr, ts, S0, False)
    assert st[5] > 0
    ref = pbsens.forward_sensitivities(m, (0.0, 20.0), t_eval=ts, method="Radau", rtol=1e-11, atol=1e-13,
                                       S0=S0)
    E_red, E_full = (pbsens.relative_error(r, ref)[1:] for r in (red, full))
    assert np.max(E_red) <= 1.5 * np.max(E_full) + 1e-12
    assert np.max(E_red) < 1e-3
    # the conserved combinations stay what S(0) gave them
    L = shared_left_null_space(m)
    np.testing.assert_allclose(np.einsum("kn,tnp->tkp", L, red.S), np.broadcast_to(L @ S0, (ts.size,) + (L @ S0).shape),
                               atol=1e-9)
