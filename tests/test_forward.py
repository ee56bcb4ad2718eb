"""Forward sensitivities (FS): analytic references, finite differences, options and errors."""
import numpy as np
import pytest
from scipy.linalg import expm

import pbsens
from conftest import make_model
from pbsens.sensitivity.forward import _bound_functions, forward_sensitivities


def _max_rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


# ----------------------------------------------------------------- analytic references

@pytest.fixture(scope="module")
def lti(tmp_path_factory):
    """x1' = -a x1 + b x2 + u,  x2' = a x1 - (b + k) x2,  x(0) = (1, 0)."""
    return make_model(tmp_path_factory.mktemp("lti"), "lti2", {"x1": 1.0, "x2": 0.0},
                      {"a": 0.7, "b": 0.3, "k": 0.2, "u": 0.5},
                      {"x1": "-a*x1 + b*x2 + u", "x2": "a*x1 - (b + k)*x2"})


def _lti_reference(p, x0, ts):
    """States and sensitivities of the LTI model from one matrix exponential.

    w = (x, S[:, a], S[:, b], S[:, k], S[:, u], 1) solves w' = W w exactly (2.3):
    S_j' = A S_j + dA/dp_j x + dc/dp_j with x' = A x + c.
    """
    a, b, k, u = p
    A = np.array([[-a, b], [a, -(b + k)]])
    c = np.array([u, 0.0])
    dA = [np.array([[-1, 0], [1, 0]]), np.array([[0, 1], [0, -1]]), np.array([[0, 0], [0, -1]]),
          np.zeros((2, 2))]
    dc = [np.zeros(2), np.zeros(2), np.zeros(2), np.array([1.0, 0.0])]
    n = 2 * 5 + 1
    W = np.zeros((n, n))
    W[0:2, 0:2] = A
    W[0:2, -1] = c
    for j in range(4):
        r = slice(2 * (j + 1), 2 * (j + 2))
        W[r, 0:2] = dA[j]
        W[r, r] = A
        W[r, -1] = dc[j]
    w0 = np.concatenate([x0, np.zeros(8), [1.0]])
    Wt = np.array([expm(t * W) @ w0 for t in ts])
    return Wt[:, :2], Wt[:, 2:10].reshape(-1, 4, 2).transpose(0, 2, 1)


@pytest.mark.parametrize("method", ["BDF", "Radau", "LSODA", "DOP853"])
def test_linear_time_invariant_matches_expm(lti, method):
    ts = np.linspace(0, 8, 17)
    r = forward_sensitivities(lti, (0, 8), t_eval=ts, method=method, rtol=1e-10, atol=1e-12)
    x_ref, S_ref = _lti_reference(lti.p, lti.x0, ts)
    assert r.S.shape == (17, 2, 4) and r.x.shape == (17, 2)
    assert np.array_equal(r.t, ts)
    assert _max_rel(r.x, x_ref) < 1e-7
    assert _max_rel(r.S, S_ref) < 1e-7
    assert np.all(r.S[0] == 0.0)


def test_linear_time_varying_closed_form(tmp_path):
    # x' = -k (1 + t) x + 0 * q  ->  x = x0 exp(-k (t + t^2/2)),  dx/dk = -(t + t^2/2) x,  dx/dq = 0
    m = make_model(tmp_path, "ltv", {"x": 2.0}, {"k": 0.4, "q": 1.5}, {"x": "-k*(1 + t)*x + 0*q"})
    ts = np.linspace(0, 3, 31)
    r = forward_sensitivities(m, (0, 3), t_eval=ts, rtol=1e-10, atol=1e-12)
    x = 2.0 * np.exp(-0.4 * (ts + ts ** 2 / 2))
    assert _max_rel(r.x[:, 0], x) < 1e-7
    assert _max_rel(r.S[:, 0, 0], -(ts + ts ** 2 / 2) * x) < 1e-7
    assert np.all(r.S[:, 0, 1] == 0.0)


# ----------------------------------------------------------------- finite differences on PKA

def test_pka_matches_central_finite_differences(pka):
    ts = np.array([50.0, 200.0, 600.0])
    cols = np.arange(0, pka.n_params, 2)  # half of the parameters keeps the test fast
    r = forward_sensitivities(pka, (0, 600), t_eval=ts, rtol=1e-10, atol=1e-12, params=cols)
    p = pka.p
    S_fd = np.empty_like(r.S)
    for i, j in enumerate(cols):
        h = 1e-4 * max(abs(p[j]), 1e-3)
        pp, pm = p.copy(), p.copy()
        pp[j] += h
        pm[j] -= h
        xp = pbsens.solve_states(pka, (0, 600), t_eval=ts, p=pp, rtol=1e-12, atol=1e-14)
        xm = pbsens.solve_states(pka, (0, 600), t_eval=ts, p=pm, rtol=1e-12, atol=1e-14)
        S_fd[:, :, i] = (xp.x[xp.eval_index] - xm.x[xm.eval_index]) / (pp[j] - pm[j])
    # compare in the log-parameter scale p_j dx/dp_j (comparable units across columns):
    # column by column (relative) for the columns that are not negligible, and every
    # column relative to the largest one
    scale = np.where(p[cols] > 0, p[cols], 1.0)
    L, L_fd = r.S * scale, S_fd * scale
    norms = np.linalg.norm(L_fd, axis=(0, 1))
    errs = np.linalg.norm(L - L_fd, axis=(0, 1))
    big = norms > 1e-3 * norms.max()
    assert big.sum() >= 8
    assert np.max(errs[big] / norms[big]) < 1e-5
    assert np.max(errs) < 1e-7 * norms.max()


@pytest.mark.parametrize("method", ["BDF", "Radau"])
@pytest.mark.parametrize("jacobian", ["sparse", "block-diagonal"])
def test_jacobian_forms_agree(pka, method, jacobian):
    ts = np.linspace(0, 600, 11)
    ref = forward_sensitivities(pka, (0, 600), t_eval=ts, method=method, rtol=1e-9, atol=1e-11)
    assert ref.options["jacobian"] == "structured"
    r = forward_sensitivities(pka, (0, 600), t_eval=ts, method=method, rtol=1e-9, atol=1e-11, jacobian=jacobian)
    assert r.options["jacobian"] == jacobian
    assert _max_rel(r.S, ref.S) < 1e-5


@pytest.mark.parametrize("method, jacobian", [("BDF", "dense"), ("Radau", "dense"), ("LSODA", "dense"),
                                              ("BDF", "none"), ("Radau", "none")])
def test_dense_or_no_jacobian(lti, method, jacobian):
    ts = np.linspace(0, 8, 5)
    r = forward_sensitivities(lti, (0, 8), t_eval=ts, method=method, rtol=1e-10, atol=1e-12, jacobian=jacobian)
    assert _max_rel(r.S, _lti_reference(lti.p, lti.x0, ts)[1]) < 1e-7


def test_structured_jacobian_reaches_solver(pka, monkeypatch):
    """The augmented Jacobian (CSC, SuperLU) must really be used by BDF and Radau: one per njev."""
    import pbsens.sensitivity.forward as fwd
    calls = {"jac": 0}
    data = fwd._csc_data

    def counting_data(A, C):
        calls["jac"] += 1
        return data(A, C)

    monkeypatch.setattr(fwd, "_csc_data", counting_data)
    for method in ("BDF", "Radau"):
        calls.update(jac=0)
        r = forward_sensitivities(pka, (0, 600), t_eval=[600.0], method=method, rtol=1e-5, atol=1e-6)
        st = r.options["stats"]
        assert r.options["jacobian"] == "structured"
        assert calls["jac"] == st["njev"] >= 1 and st["nlu"] >= 1


def test_augmented_jacobian_blocks_match_finite_differences(pka):
    fs_rhs, fs_jac_blocks = _bound_functions(pka)
    assert _bound_functions(pka) is _bound_functions(pka)  # memoised on the model
    idx = np.array([0, 3, 7, 20], dtype=np.int64)
    nx, ns = pka.n_states, idx.size
    x = pbsens.solve_states(pka, (0, 100), t_eval=[100.0]).x[-1]
    z = np.concatenate([x, np.random.default_rng(0).normal(size=nx * ns)])
    p, c = pka.p, pka.constants
    A, C = np.empty((nx, nx)), np.empty((ns, nx, nx))
    fs_jac_blocks(1.0, z, p, c, idx, A, C)
    J = np.zeros((nx * (ns + 1),) * 2)
    for b in range(ns + 1):
        J[b * nx:(b + 1) * nx, b * nx:(b + 1) * nx] = A
    for j in range(ns):
        J[(j + 1) * nx:(j + 2) * nx, :nx] = C[j]
    J_fd = np.empty_like(J)
    for k in range(z.size):
        h = 1e-6 * max(abs(z[k]), 1e-2)
        zp, zm = z.copy(), z.copy()
        zp[k] += h
        zm[k] -= h
        J_fd[:, k] = (fs_rhs(1.0, zp, p, c, idx) - fs_rhs(1.0, zm, p, c, idx)) / (2 * h)
    # the coupling blocks are forward differences (step ~1e-8 relative): accurate to ~1e-5
    assert np.abs(J - J_fd).max() < 1e-4 * np.abs(J_fd).max()
    assert np.array_equal(J[:nx, :nx], pka.jac_x(1.0, x, p))


def test_csc_jacobian_handed_to_scipy_matches_finite_differences(pka):
    """The CSC Jacobian BDF/Radau factorise (numba fill, zeros left out) is the Jacobian of the rhs they step."""
    from scipy.sparse import issparse

    import pbsens.sensitivity.forward as fwd
    idx = np.array([0, 3, 7, 20], dtype=np.int64)
    nx, ns = pka.n_states, idx.size
    n = nx * (ns + 1)
    p = pka.p
    x = pbsens.solve_states(pka, (0, 100), t_eval=[100.0]).x[-1]
    z = np.concatenate([x, np.random.default_rng(1).normal(size=nx * ns)])
    fun, column = fwd._scipy_system(pka, p, idx)
    jac = fwd._scipy_jacobian("structured", column, nx, ns)
    z_before = z.copy()
    J = jac(2.0, z)
    assert issparse(J) and J.format == "csc" and J.shape == (n, n)
    assert np.array_equal(z, z_before)                      # the state differences restore z
    Jd = J.toarray()
    J_fd = np.empty((n, n))
    for k in range(n):
        h = 1e-6 * max(abs(z[k]), 1e-2)
        zp, zm = z.copy(), z.copy()
        zp[k] += h
        zm[k] -= h
        J_fd[:, k] = (fun(2.0, zp) - fun(2.0, zm)) / (2 * h)
    # couplings are forward differences of the exact Jacobians: ~1e-5 relative; everything else exact
    assert np.abs(Jd - J_fd).max() < 1e-4 * np.abs(J_fd).max()
    # block lower triangular: nothing above the first block column outside the diagonal blocks
    for b in range(ns + 1):
        for col_block in range(1, ns + 1):
            if col_block != b:
                assert not Jd[b * nx:(b + 1) * nx, col_block * nx:(col_block + 1) * nx].any()
        assert np.array_equal(Jd[b * nx:(b + 1) * nx, b * nx:(b + 1) * nx], pka.jac_x(2.0, x, p))
    # no stored zeros, sorted rows: the matrix scipy's sparse arithmetic would make of it
    assert np.all(J.data != 0) and J.has_sorted_indices
    assert np.array_equal(fwd._scipy_jacobian("dense", column, nx, ns)(2.0, z), Jd)


# ----------------------------------------------------------------- options

def test_initial_sensitivity_from_model_and_explicit(tmp_path):
    # x' = -k x, x(0) = a  ->  dx/da = exp(-k t), dx/dk = -a t exp(-k t)
    m = make_model(tmp_path, "decay_a", {"x": "a"}, {"k": 0.5, "a": 2.0}, {"x": "-k*x"})
    ts = np.linspace(0, 4, 9)
    r = forward_sensitivities(m, (0, 4), t_eval=ts, rtol=1e-10, atol=1e-12)
    e = np.exp(-0.5 * ts)
    assert np.allclose(r.S0, [[0.0, 1.0]])
    assert _max_rel(r.S[:, 0, 1], e) < 1e-7
    assert _max_rel(r.S[:, 0, 0], -2.0 * ts * e) < 1e-7
    # an explicit S0 replaces the model's: with S0 = 0, dx/da stays 0
    r2 = forward_sensitivities(m, (0, 4), t_eval=ts, S0=[[0.0, 0.0]], rtol=1e-10, atol=1e-12)
    assert np.all(r2.S[:, 0, 1] == 0.0)
    assert _max_rel(r2.S[:, 0, 0], -2.0 * ts * e) < 1e-7
    # a custom x0 with an explicit S0
    r3 = forward_sensitivities(m, (0, 4), t_eval=ts, x0=[3.0], S0=[[0.0, 1.0]], rtol=1e-10, atol=1e-12)
    assert _max_rel(r3.S[:, 0, 1], e) < 1e-7
    assert _max_rel(r3.S[:, 0, 0], -3.0 * ts * e) < 1e-7


def test_parameter_subset(pka):
    ts = np.linspace(0, 600, 7)
    names = [pka.param_names[20], pka.param_names[3]]
    r = forward_sensitivities(pka, (0, 600), t_eval=ts, params=[names[0], 3], rtol=1e-9, atol=1e-11)
    full = forward_sensitivities(pka, (0, 600), t_eval=ts, rtol=1e-9, atol=1e-11)
    assert r.S.shape == (7, pka.n_states, 2)
    assert r.param_names == names
    assert r.options["params"] == names
    assert r.S0.shape == (pka.n_states, 2)
    assert _max_rel(r.S, full.S[:, :, [20, 3]]) < 1e-5
    assert _max_rel(r.x, full.x) < 1e-7


def test_default_grid_and_metadata(chua):
    r = forward_sensitivities(chua, (0, 2), rtol=1e-6, atol=1e-8, max_step=0.1)
    assert r.t[0] == 0.0 and r.t[-1] == 2.0 and np.all(np.diff(r.t) > 0)
    assert np.max(np.diff(r.t)) <= 0.1 + 1e-12
    assert r.S.shape == (r.t.size, 3, 2) and r.x.shape == (r.t.size, 3)
    assert r.method == "fs" and r.model_name == "Chua"
    assert r.param_names == chua.param_names and r.state_names == chua.state_names
    o = r.options
    assert (o["solver"], o["rtol"], o["atol"], o["t_span"], o["params"]) == ("BDF", 1e-6, 1e-8, (0.0, 2.0), None)
    assert o["solver_options"] == {"max_step": 0.1}
    assert set(r.timings) >= {"setup", "sensitivities", "total"}
    assert np.array_equal(r.p, chua.p) and np.array_equal(r.x0, chua.x0)


def test_custom_p_and_x0(chua):
    p = chua.p * 1.1
    x0 = np.array([0.1, 0.0, -0.1])
    r = forward_sensitivities(chua, (0, 1), t_eval=[0.5, 1.0], p=p, x0=x0, rtol=1e-9, atol=1e-11)
    tr = pbsens.solve_states(chua, (0, 1), t_eval=[0.5, 1.0], p=p, x0=x0, rtol=1e-11, atol=1e-13)
    assert _max_rel(r.x, tr.x[tr.eval_index]) < 1e-7
    assert np.array_equal(r.p, p) and np.array_equal(r.x0, x0)


def test_atol_forms(lti):
    ts = [1.0, 2.0]
    a = forward_sensitivities(lti, (0, 2), t_eval=ts, atol=1e-10)
    b = forward_sensitivities(lti, (0, 2), t_eval=ts, atol=[1e-10, 1e-10])
    c = forward_sensitivities(lti, (0, 2), t_eval=ts, atol=np.full(10, 1e-10))
    assert _max_rel(a.S, b.S) < 1e-12
    assert _max_rel(a.S, c.S) < 1e-6


# ----------------------------------------------------------------- errors

@pytest.mark.parametrize("kwargs, name", [
    (dict(t_span=(5, 0)), "t_span"),
    (dict(t_span=(0, np.nan)), "t_span"),
    (dict(t_span=(0, 10), t_eval=[3.0, 1.0]), "t_eval"),
    (dict(t_span=(0, 10), t_eval=[1.0, 11.0]), "t_eval"),
    (dict(t_span=(0, 10), p=[1.0]), "'p'"),
    (dict(t_span=(0, 10), x0=[0.0, 0.0]), "x0"),
    (dict(t_span=(0, 10), x0=[0.0, np.inf, 0.0]), "x0"),
    (dict(t_span=(0, 10), S0=np.zeros((3, 3))), "S0"),
    (dict(t_span=(0, 10), S0=[[0, 0], [0, np.nan], [0, 0]]), "S0"),
    (dict(t_span=(0, 10), S0="zero"), "S0"),
    (dict(t_span=(0, 10), params=["p1"], S0=np.zeros((3, 2))), "S0"),
    (dict(t_span=(0, 10), method="Euler"), "method"),
    (dict(t_span=(0, 10), rtol=-1.0), "rtol"),
    (dict(t_span=(0, 10), rtol=[1e-6, 1e-6]), "rtol"),
    (dict(t_span=(0, 10), atol=0.0), "atol"),
    (dict(t_span=(0, 10), atol=[1e-6, 1e-6]), "atol"),
    (dict(t_span=(0, 10), params=["nope"]), "params"),
    (dict(t_span=(0, 10), params=[]), "params"),
    (dict(t_span=(0, 10), params=[0, "p1"]), "params"),
    (dict(t_span=(0, 10), params=[7]), "params"),
    (dict(t_span=(0, 10), jacobian="magic"), "jacobian"),
    (dict(t_span=(0, 10), method="RK45", jacobian="structured"), "jacobian"),
    (dict(t_span=(0, 10), jac=lambda t, y: None), "jac"),
])
def test_bad_input_names_the_argument(chua, kwargs, name):
    with pytest.raises(pbsens.PbsensError, match=name):
        forward_sensitivities(chua, **kwargs)


def test_solver_failure_raises(tmp_path):
    m = make_model(tmp_path, "blowup", {"x": 1.0}, {"k": 1.0}, {"x": "k*x**2"})
    for method in ("BDF", "LSODA", "RK45"):
        with pytest.raises(pbsens.SolverError, match="blowup"):
            forward_sensitivities(m, (0, 2), method=method)


def test_nonfinite_rhs_at_t0_raises(tmp_path):
    m = make_model(tmp_path, "blowup", {"x": 1.0}, {"k": 1.0}, {"x": "k*x**2"})
    with pytest.raises(pbsens.SolverError, match="blowup.*t0"):
        forward_sensitivities(m, (0, 1), x0=[1e200])
