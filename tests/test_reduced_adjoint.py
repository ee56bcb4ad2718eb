"""The sparse adjoint's dense-step vectors in the coordinates the conservation laws leave
(:mod:`pbsens.kernels.reduced_adjoint`, METHOD.md section 16, "In the coordinates the laws leave").

Checked: the kernel's vectors against the dense matrix functions of the full ``Abar`` (``E^T lam``
exactly, the stand-ins of ``F_j^T lam`` on every vector the laws annihilate), and the whole
adjoint gradient on a network of 16 enzyme cycles (64 states, the default sparse path) with and
without the reduction, against each other and against the forward march's gradient, with an
initial sensitivity that the laws do not annihilate.
"""
import numpy as np
import pytest
import scipy.linalg as sla
from scipy.sparse import csr_matrix

import pbsens
from pbsens.kernels import linalg
from pbsens.kernels.phi import exp_phi123_into
from pbsens.kernels.reduced_adjoint import reduced_vectors
from pbsens.kernels.sparse_adjoint import AS_DENSE_EVAL, AS_REDUCED
from pbsens.model.conservation import dependent_states
from pbsens.sensitivity import sparse as sparse_path
from pbsens.sensitivity.adjoint import adjoint_gradient
from test_reduced_march import _cycles


def _network_jacobian(rng, n, k):
    """A stiff ``n x n`` matrix with ``k`` exact laws ``L`` (orthonormal rows, ``L A = 0``)."""
    L = np.linalg.qr(rng.standard_normal((n, k)))[0].T
    P = np.eye(n) - L.T @ L
    A = P @ (rng.standard_normal((n, n)) - np.diag(10.0 ** rng.uniform(0, 3, n)))
    return A, L, P


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("chain", [1, 2, 3])
def test_vectors_against_the_full_matrix_functions(seed, chain):
    rng = np.random.default_rng(seed)
    n, k, h = 12, 3, 0.7
    A, L, P = _network_jacobian(rng, n, k)
    dep, ind, K, _ = dependent_states(L)
    assert dep.size == k
    C = csr_matrix(A)
    C.sort_indices()
    Ap, Ai, Av = (np.ascontiguousarray(C.indptr, np.int64), np.ascontiguousarray(C.indices, np.int64),
                  np.ascontiguousarray(C.data, np.float64))
    rpos = np.full(n, -1, np.int64)
    rpos[ind] = np.arange(ind.size)
    dpos = np.full(n, -1, np.int64)
    dpos[dep] = np.arange(k)
    r = n - k
    work = (np.empty((r, r)), np.empty((r, 2 * r)), np.empty((r, 3 * r)), np.empty((r, 4 * r)),
            linalg.workspace(r), np.empty(r), np.empty(4 * r), np.empty(k))
    lam = rng.standard_normal(n)
    fy, fa, fb, fc = (np.full(n, np.nan) for _ in range(4))
    reduced_vectors(Ap, Ai, Av, rpos, dpos, ind, dep, np.ascontiguousarray(K), h, chain, True, lam, fy, fa, fb,
                    fc, work)
    EF3 = np.empty((n, 4 * n))
    exp_phi123_into(np.ascontiguousarray(A), h, EF3, linalg.workspace(n))
    E, F1, F2, F3 = (EF3[:, j * n:(j + 1) * n] for j in range(4))
    np.testing.assert_allclose(fy, E.T @ lam, rtol=1e-10, atol=1e-12 * np.abs(E.T @ lam).max())
    V = P @ rng.standard_normal((n, 5))        # vectors the laws annihilate
    for got, F in [(fa, F1), (fb, F2 / h), (fc, F3 / h ** 2)][:chain]:
        want = lam @ F @ V
        np.testing.assert_allclose(got @ V, want, rtol=1e-10, atol=1e-12 * np.abs(want).max())
    # and not the full vectors themselves (they differ by the laws' rows): the stand-ins' claim is the above
    assert not np.allclose(fa, F1.T @ lam, rtol=1e-6)
    # a second vector with the matrix functions kept
    lam2 = rng.standard_normal(n)
    reduced_vectors(Ap, Ai, Av, rpos, dpos, ind, dep, np.ascontiguousarray(K), h, chain, False, lam2, fy, fa, fb,
                    fc, work)
    np.testing.assert_allclose(fy, E.T @ lam2, rtol=1e-10, atol=1e-12 * np.abs(E.T @ lam2).max())


@pytest.fixture(scope="module")
def cycles(tmp_path_factory):
    m = _cycles(tmp_path_factory.mktemp("cycles_adjoint"))
    ts = np.linspace(0.5, 20.0, 11)
    tr = pbsens.solve_states(m, (0.0, 20.0), t_eval=ts, method="rodas5p", rtol=1e-6, atol=1e-9,
                             dense_output=True)
    dJdx = np.random.default_rng(4).normal(size=(ts.size, m.n_states))
    return m, ts, tr, dJdx


def _gradient(m, tr, ts, dJdx, S0, reduce_laws):
    runner = sparse_path.runner(m)
    runner.reduce_laws = reduce_laws
    try:
        g = adjoint_gradient(m, tr, None, ts, dJdx, method="exp2", linalg="sparse", x0_sens=S0, substeps=None)
    finally:
        runner.reduce_laws = True
    return g, runner.adjoint_stats.copy()


@pytest.mark.parametrize("conserved_start", [False, True])
def test_reduced_adjoint_equals_the_full_one(cycles, conserved_start):
    m, ts, tr, dJdx = cycles
    S0 = np.zeros((m.n_states, m.n_params))
    if conserved_start:        # L S0 != 0: lambda's eliminated components enter the gradient through S0
        S0 = np.random.default_rng(1).standard_normal(S0.shape) * 0.1
    g_red, st = _gradient(m, tr, ts, dJdx, S0, True)
    g_full, st0 = _gradient(m, tr, ts, dJdx, S0, False)
    assert st[AS_REDUCED] > 0 and st0[AS_REDUCED] == 0
    assert st[AS_REDUCED] >= 0.9 * st[AS_DENSE_EVAL]
    assert np.max(np.abs(g_red - g_full)) < 1e-9 * np.max(np.abs(g_full))
    if not conserved_start:    # the forward march's reduced step is then the full step exactly
        r = pbsens.sensitivities(m, tr, method="exp2", t_eval=ts, linalg="sparse", S0=S0)
        g_fwd = np.einsum("ki,kij->j", dJdx, r.S)
        assert np.max(np.abs(g_red - g_fwd)) < 1e-9 * np.max(np.abs(g_fwd))


def test_the_laws_checked_at_each_point(cycles, monkeypatch):
    # a "law" that does not hold (a random row): no interval is reduced, and the gradient is the full one
    m, ts, tr, dJdx = cycles
    runner = sparse_path.runner(m)
    bogus = np.random.default_rng(5).standard_normal((1, m.n_states))
    bogus /= np.linalg.norm(bogus)
    monkeypatch.setattr(runner, "_laws", bogus)
    S0 = np.zeros((m.n_states, m.n_params))
    g, st = _gradient(m, tr, ts, dJdx, S0, True)
    monkeypatch.undo()
    g_full, _ = _gradient(m, tr, ts, dJdx, S0, False)
    assert st[AS_REDUCED] == 0 and st[AS_DENSE_EVAL] > 0
    assert np.max(np.abs(g - g_full)) < 1e-12 * np.max(np.abs(g_full))
    assert sla.norm(bogus @ np.eye(m.n_states)) > 0


def _dense_gradient(m, tr, ts, dJdx, S0, monkeypatch, reduce):
    from pbsens.sensitivity import adjoint as adjoint_module
    m.__dict__.get("_kernels", {}).pop("laws", None)
    monkeypatch.setattr(adjoint_module, "LAWS_MIN_STATES", 16 if reduce else 10 ** 9)
    return adjoint_gradient(m, tr, None, ts, dJdx, method="exp2", linalg="dense", x0_sens=S0, substeps=None)


@pytest.mark.parametrize("conserved_start", [False, True])
def test_dense_reduced_adjoint_equals_the_full_one(cycles, conserved_start, monkeypatch):
    m, ts, tr, dJdx = cycles
    S0 = np.zeros((m.n_states, m.n_params))
    if conserved_start:
        S0 = np.random.default_rng(1).standard_normal(S0.shape) * 0.1
    g_red = _dense_gradient(m, tr, ts, dJdx, S0, monkeypatch, True)
    laws = m.__dict__["_kernels"]["laws"]
    assert laws is not None and laws[1].size == laws[0].shape[0] >= 16
    g_full = _dense_gradient(m, tr, ts, dJdx, S0, monkeypatch, False)
    assert m.__dict__["_kernels"].get("laws", "absent") == "absent"
    assert np.max(np.abs(g_red - g_full)) < 1e-9 * np.max(np.abs(g_full))
    # and the dense forward march (which takes no reduced step) contracted: the same gradient
    r = pbsens.sensitivities(m, tr, method="exp2", t_eval=ts, linalg="dense", S0=S0)
    g_fwd = np.einsum("ki,kij->j", dJdx, r.S)
    assert np.max(np.abs(g_red - g_fwd)) < 1e-9 * np.max(np.abs(g_fwd))


def test_dense_kernel_takes_the_laws(cycles):
    # the dense kernel with the laws and a wrong elimination K gives another gradient: the reduced vectors ran
    from pbsens.sensitivity.adjoint import _bound, march_plan
    m, ts, tr, dJdx = cycles
    setup, opts, mid = march_plan(m, tr, None, ts, method="exp2", linalg="dense")
    from pbsens.model.conservation import eliminated_on_grid, shared_left_null_space
    L = shared_left_null_space(m)
    dep, K, _ = eliminated_on_grid(m, L, setup.t, setup.x, setup.p)
    out = setup.out_index
    dJ = np.zeros((ts.size, m.n_states))
    dJ[:] = dJdx
    run = _bound(m)
    from pbsens.kernels.codes import METHOD_EXP2
    args = (setup.t, setup.x, setup.p, m.constants, out, dJ, METHOD_EXP2, opts.reuse_tol, None, mid)
    lam0, g0 = run(*args)
    lam1, g1 = run(*args, (L, dep, K))
    _, g2 = run(*args, (L, dep, K * 1.5))
    assert np.max(np.abs(g1 - g0)) < 1e-9 * np.max(np.abs(g0))
    assert np.max(np.abs(lam1 - lam0)) < 1e-9 * np.max(np.abs(lam0))
    assert np.max(np.abs(g2 - g0)) > 1e-3 * np.max(np.abs(g0))


@pytest.mark.parametrize("with_laws", [False, True])
@pytest.mark.parametrize("method", ["exp2", "exp"])
def test_dense_kernel_marches_several_vectors_as_one(cycles, with_laws, method):
    # nv functionals in one march (each interval's matrix functions formed once) give each functional's own
    # march: the same operations per vector, so the same numbers; and a wrong start for one vector changes
    # that vector's result alone
    from pbsens.kernels.codes import METHOD_EXP, METHOD_EXP2
    from pbsens.model.conservation import eliminated_on_grid, shared_left_null_space
    from pbsens.sensitivity.adjoint import _bound, march_plan
    m, ts, tr, dJdx = cycles
    setup, opts, mid = march_plan(m, tr, None, ts, method=method, linalg="dense")
    laws = None
    if with_laws:
        L = shared_left_null_space(m)
        dep, K, _ = eliminated_on_grid(m, L, setup.t, setup.x, setup.p)
        laws = (L, dep, K)
    rng = np.random.default_rng(3)
    sets = np.stack([np.broadcast_to(dJdx, (ts.size, m.n_states)), rng.standard_normal((ts.size, m.n_states)),
                     np.abs(rng.standard_normal((ts.size, m.n_states)))])
    ends = rng.standard_normal((3, m.n_states))
    run = _bound(m)
    code = METHOD_EXP2 if method == "exp2" else METHOD_EXP
    common = (setup.t, setup.x, setup.p, m.constants, setup.out_index)
    lam, grad = run(*common, sets, code, opts.reuse_tol, ends, mid, laws)
    assert lam.shape == (3, m.n_states) and grad.shape == (3, m.n_params)
    for q in range(3):
        lam_q, g_q = run(*common, np.ascontiguousarray(sets[q]), code, opts.reuse_tol, ends[q], mid, laws)
        assert np.max(np.abs(grad[q] - g_q)) <= 1e-13 * np.max(np.abs(g_q))
        assert np.max(np.abs(lam[q] - lam_q)) <= 1e-13 * np.max(np.abs(lam_q))
    assert len({float(np.max(np.abs(g))) for g in grad}) == 3          # three different functionals
    ends2 = ends.copy()
    ends2[1] *= 2.0
    lam2, grad2 = run(*common, sets, code, opts.reuse_tol, ends2, mid, laws)
    assert np.array_equal(grad2[0], grad[0]) and np.array_equal(grad2[2], grad[2])
    assert not np.allclose(grad2[1], grad[1])


def test_sparse_kernel_marches_several_vectors_as_one(cycles):
    # with the laws: the first vector forms the reduced matrix functions, the others reuse them
    from test_sparse_adjoint import several_vectors_as_one
    m, ts, tr, _ = cycles
    _, st = several_vectors_as_one(m, tr, ts, "exp2", "sparse")
    assert st[AS_REDUCED] > 0
