"""The transpose of the sparse march (``linalg="sparse"``; :mod:`pbsens.kernels.sparse_adjoint`, METHOD.md
section 16 "Sparse").

* the transposed action against the dense exponential of the transposed augmented matrix (scipy);
* the adjoint gradient equals the sparse forward march's contracted gradient to rounding on a stiff
  network whose grid has both kinds of step (action and dense), with and without the midpoint
  correction, with every interval through the action (the midpoint's half steps transposed),
  and for exp;
* the analytic, constant-forcing and finite-difference references of ``tests/test_adjoint.py`` run
  for the sparse kernel too (its ``linalg`` fixture).
"""
import numpy as np
import pytest
import scipy.linalg

import pbsens
from pbsens.kernels import expmv
from pbsens.kernels.sparse_adjoint import (AS_ACTION, AS_ACTION_MID, AS_DENSE, AS_DENSE_MID,
                                           N_VV, V_FA, V_FB, V_FC, V_FY, taction)
from pbsens.model.mass_action import random_mass_action_model
from pbsens.sensitivity import sparse as sparse_path
from pbsens.sensitivity.adjoint import adjoint_gradient
from pbsens.sensitivity.posthoc import sensitivities


def _csr(M):
    rows, cols = np.nonzero(M)
    indptr = np.zeros(M.shape[0] + 1, dtype=np.int64)
    np.add.at(indptr, rows + 1, 1)
    return np.cumsum(indptr).astype(np.int64), cols.astype(np.int64), np.ascontiguousarray(M[rows, cols])


@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0])
@pytest.mark.parametrize("chain", [1, 2, 3])
def test_transposed_action_against_the_dense_exponential(scale, chain):
    rng = np.random.default_rng(7)
    n, p = 12, 5
    A = rng.normal(size=(n, n)) * (rng.uniform(size=(n, n)) < 0.3) * scale - scale * np.eye(n)
    B = rng.normal(size=(n, p)) * (rng.uniform(size=(n, p)) < 0.4)
    D = B * rng.normal(size=B.shape)
    lam = rng.normal(size=n)
    h = 0.7
    Ap, Ai, Ad = _csr(A)
    Bp, Bi, Bd = _csr(B + D + 1e-300)       # one pattern for B and D
    Bd = np.ascontiguousarray(B[np.repeat(np.arange(n), np.diff(Bp)), Bi])
    Dd = np.ascontiguousarray(D[np.repeat(np.arange(n), np.diff(Bp)), Bi])
    V = np.empty((expmv.NV, max(n, p)))
    dwork = np.empty(2 * (expmv.P_MAX + 2))
    mu, _, m, s = expmv.expmv_plan(Ap, Ai, Ad, Bp, Bi, Bd, Dd, True, h, p, V, dwork)
    VV = np.zeros((N_VV, n))
    taction(Ap, Ai, Ad, mu, h, m, s, chain, lam, VV)
    # [E | F1 | F2 | F3] from the exponential of the block matrix [[hA, I, 0, 0], [0, 0, I, 0], ...]
    M = np.zeros((4 * n, 4 * n))
    M[:n, :n] = h * A
    for q in range(3):
        M[q * n:(q + 1) * n, (q + 1) * n:(q + 2) * n] = np.eye(n)
    X = scipy.linalg.expm(M)[:n]
    E, F1, F2, F3 = X[:, :n], h * X[:, n:2 * n], h ** 2 * X[:, 2 * n:3 * n], h ** 3 * X[:, 3 * n:]
    want = [E.T @ lam, F1.T @ lam, F2.T @ lam / h, F3.T @ lam / h ** 2]
    for q, row in enumerate((V_FY, V_FA, V_FB, V_FC)[:chain + 1]):
        np.testing.assert_allclose(VV[row], want[q], rtol=1e-11, atol=1e-13 * np.max(np.abs(want[q])))


@pytest.fixture(scope="module")
def stiff():
    """A 30-species network on a long span, solved loosely by Rodas5P (long steps): the sparse march
    takes the action on some intervals and the dense step on others (tests/test_sparse_midpoint.py)."""
    m = random_mass_action_model(30, n_classes=3, seed=2)
    ts = np.linspace(0.0, 200.0, 21)[1:]
    tr = pbsens.solve_states(m, (0.0, 200.0), t_eval=ts, method="rodas5p", rtol=1e-5, atol=1e-8,
                             dense_output=True)
    dJdx = np.random.default_rng(3).normal(size=(ts.size, m.n_states))
    return m, ts, tr, dJdx


def _rel(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


@pytest.mark.parametrize("method, kw", [("exp2", {}), ("exp2", dict(substeps=1)), ("exp", dict(substeps=1)),
                                        ("exp2", dict(midpoint=False))])
@pytest.mark.parametrize("action_only", [False, True])
def test_equals_the_sparse_forward_march(stiff, method, kw, action_only, monkeypatch):
    m, ts, tr, dJdx = stiff
    if action_only:
        monkeypatch.setattr(sparse_path, "DENSE_STEP_MAX_STATES", 0)
    S0 = np.zeros((m.n_states, m.n_params))
    S0[3, 1] = 0.5                            # a non-zero start: lambda_0 enters the gradient
    r = sensitivities(m, tr, method=method, t_eval=ts, linalg="sparse", S0=S0, **kw)
    fwd = sparse_path.runner(m).stats.copy()
    g_fwd = np.einsum("ki,kij->j", dJdx, r.S)
    g = adjoint_gradient(m, tr, None, ts, dJdx, method=method, linalg="sparse", x0_sens=S0,
                         substeps=kw.get("substeps"), midpoint=kw.get("midpoint"))
    st = sparse_path.runner(m).adjoint_stats.copy()
    assert _rel(g, g_fwd) < 1e-10, (_rel(g, g_fwd), fwd, st)
    # the same branches as the forward march, interval by interval
    assert st[AS_DENSE] + st[AS_DENSE_MID] == fwd[2]
    assert st[AS_ACTION_MID] + st[AS_DENSE_MID] == fwd[3]
    if action_only:
        assert fwd[2] == 0 and st[AS_ACTION] + st[AS_ACTION_MID] > 0
        if method == "exp2" and not kw:
            assert st[AS_ACTION_MID] > 0                # the half steps transposed
    elif method == "exp2" and not kw:
        assert st[AS_DENSE_MID] > 0 and st[AS_ACTION_MID] + st[AS_ACTION] > 0


def test_auto_takes_the_sparse_transpose_for_a_large_sparse_model():
    m = random_mass_action_model(80, n_classes=6, seed=1)
    ts = np.linspace(0.5, 5.0, 10)
    tr = pbsens.solve_states(m, (0.0, 5.0), t_eval=ts, method="rodas5p", rtol=1e-8, atol=1e-10, dense_output=True)
    dJdx = np.random.default_rng(0).normal(size=(ts.size, m.n_states))
    r = sensitivities(m, tr, method="exp2", t_eval=ts)
    assert r.options["linalg"] == "sparse"
    g_fwd = np.einsum("ki,kij->j", dJdx, r.S)
    runner = sparse_path.runner(m)
    runner.adjoint_stats = None
    g = adjoint_gradient(m, tr, None, ts, dJdx, method="exp2", substeps=None)
    assert runner.adjoint_stats is not None          # the sparse transpose ran
    assert _rel(g, g_fwd) < 1e-10
    # and against tight forward sensitivities: exp2's own error, not more
    ref = pbsens.forward_sensitivities(m, (0.0, 5.0), t_eval=ts, method="Radau", rtol=1e-11, atol=1e-13)
    g_ref = np.einsum("ki,kij->j", dJdx, ref.S)
    assert _rel(g, g_ref) < 1e-5


def test_upper_bound_of_the_plan_on_stiff_intervals():
    """The adjoint decides "the forward took the action" from an upper bound of the forward plan's ``m s``
    (``_ms_upper``): it must bound the plan also where ``h ||W||_1`` is large (it overflowed int64 beyond
    ~2e3 and came out negative, so every stiff interval took the action)."""
    from pbsens.kernels.sparse_adjoint import _ms_upper
    rng = np.random.default_rng(5)
    n, p = 20, 6
    B = rng.normal(size=(n, p)) * (rng.uniform(size=(n, p)) < 0.5)
    Bp, Bi, Bd = _csr(B + 1e-300)
    Bd = np.ascontiguousarray(B[np.repeat(np.arange(n), np.diff(Bp)), Bi])
    Dd = np.ascontiguousarray(0.1 * Bd)
    V = np.empty((expmv.NV, max(n, p)))
    dwork = np.empty(2 * (expmv.P_MAX + 2))
    for scale in [1.0, 1e3, 1e6, 1e9]:
        A = (rng.normal(size=(n, n)) * (rng.uniform(size=(n, n)) < 0.3) - 3.0 * np.eye(n)) * scale
        Ap, Ai, Ad = _csr(A)
        for h in [1e-3, 1.0]:
            _, _, m, s = expmv.expmv_plan(Ap, Ai, Ad, Bp, Bi, Bd, Dd, True, h, p, V, dwork)
            ub = _ms_upper(Ap, Ai, Ad, Bp, Bi, Bd, Dd, True, h, p, V[0])
            assert m * s <= ub < np.inf, (scale, h, m, s, ub)


def test_one_vector_plan_sees_every_column_of_b():
    """The plan for one vector (the adjoint's) scales the forcing by all of ``B``'s columns, as the plan
    for ``p`` columns does (it read column 0 only: a smaller ``||B||``, a different ``g``)."""
    rng = np.random.default_rng(6)
    n, p = 15, 4
    A = rng.normal(size=(n, n)) * (rng.uniform(size=(n, n)) < 0.3) - np.eye(n)
    B = np.zeros((n, p))
    B[:, 0] = 1e-3
    B[:, 3] = 1e6 * rng.uniform(size=n)
    Ap, Ai, Ad = _csr(A)
    Bp, Bi, Bd = _csr(B)
    Dd = np.ascontiguousarray(0.5 * Bd)
    V = np.empty((expmv.NV, max(n, p)))
    dwork = np.empty(2 * (expmv.P_MAX + 2))
    g_all = expmv.expmv_plan(Ap, Ai, Ad, Bp, Bi, Bd, Dd, True, 0.3, p, V, dwork)[1]
    g_one = expmv.expmv_plan(Ap, Ai, Ad, Bp, Bi, Bd, Dd, True, 0.3, 1, V, dwork)[1]
    assert g_all > 1.0 and g_one == g_all


@pytest.mark.parametrize("span, fast", [(5000.0, 1.0), (200.0, 100.0)])
def test_same_branches_as_the_forward_march_on_long_stiff_intervals(span, fast):
    """Long stiff intervals (``h ||A||_1`` in the thousands and more, as on Lang's grid): the transpose takes
    the dense step wherever the forward march did, and its gradient is the forward march's."""
    m = random_mass_action_model(30, n_classes=3, seed=2)
    p = m.p * np.array([fast, 1.0, 1.0])
    ts = np.linspace(0.0, span, 21)[1:]
    tr = pbsens.solve_states(m, (0.0, span), p=p, t_eval=ts, method="rodas5p", rtol=1e-5, atol=1e-8,
                             dense_output=True)
    dJdx = np.random.default_rng(3).normal(size=(ts.size, m.n_states))
    r = sensitivities(m, tr, p=p, method="exp2", t_eval=ts, linalg="sparse")
    fwd = sparse_path.runner(m).stats.copy()
    g_fwd = np.einsum("ki,kij->j", dJdx, r.S)
    g = adjoint_gradient(m, tr, p, ts, dJdx, method="exp2", linalg="sparse", substeps=None)
    st = sparse_path.runner(m).adjoint_stats.copy()
    assert fwd[2] > 0
    assert st[AS_DENSE] + st[AS_DENSE_MID] == fwd[2], (fwd, st)
    assert st[AS_ACTION_MID] + st[AS_DENSE_MID] == fwd[3], (fwd, st)
    assert _rel(g, g_fwd) < 1e-10


def several_vectors_as_one(m, tr, ts, method, linalg, **kw):
    """Three functionals marched together (:func:`pbsens.sensitivity.adjoint.march_backward` with
    ``dJdx`` of shape ``(3, n_out, nx)``) against each marched alone; returns the three gradients and the
    together-march's adjoint stats (sparse) or None. The vectors differ and start non-zero at ``t[-1]``."""
    from pbsens.sensitivity.adjoint import march_backward, march_plan
    setup, opts, mid = march_plan(m, tr, None, ts, method=method, linalg=linalg, **kw)
    rng = np.random.default_rng(11)
    K = setup.t.size
    sets = np.zeros((3, K, m.n_states))
    rows = np.flatnonzero(setup.out_index >= 0)
    sets[:, setup.out_index[rows]] = rng.standard_normal((3, rows.size, m.n_states))
    sets[2] = np.abs(sets[2])
    ends = rng.standard_normal((3, m.n_states))
    lam, grad = march_backward(m, setup, opts, mid, sets, lam_end=ends)
    st = sparse_path.runner(m).adjoint_stats.copy() if opts.use_sparse else None
    assert lam.shape == (3, m.n_states) and grad.shape == (3, m.n_params)
    for q in range(3):
        lam_q, g_q = march_backward(m, setup, opts, mid, np.ascontiguousarray(sets[q]), lam_end=ends[q])
        assert _rel(grad[q], g_q) < 1e-10 and _rel(lam[q], lam_q) < 1e-10, (q, _rel(grad[q], g_q))
    assert _rel(grad[0], grad[1]) > 1e-3 and _rel(grad[1], grad[2]) > 1e-3
    return grad, st


@pytest.mark.parametrize("method, kw", [("exp2", {}), ("exp", dict(substeps=1)), ("exp2", dict(midpoint=False))])
@pytest.mark.parametrize("action_only", [False, True])
def test_several_vectors_in_one_march(stiff, method, kw, action_only, monkeypatch):
    # the spread's vector marched with the gradient's: each interval's Jacobians, choice, plans and matrix
    # functions once for all vectors, every branch (the action, its half steps, the dense step, corrected)
    m, ts, tr, _ = stiff
    if action_only:
        monkeypatch.setattr(sparse_path, "DENSE_STEP_MAX_STATES", 0)
    _, st = several_vectors_as_one(m, tr, ts, method, "sparse", **kw)
    if action_only and method == "exp2" and not kw:
        assert st[AS_ACTION_MID] > 0
    elif method == "exp2" and not kw:
        assert st[AS_DENSE_MID] > 0 and st[AS_ACTION_MID] + st[AS_ACTION] > 0
    elif not action_only:
        assert st[AS_DENSE] > 0
