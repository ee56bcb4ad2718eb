"""Forward sensitivities on pbsens's compiled Rodas5P (``forward_sensitivities(method="rodas5p")``).

References are independent of the code under test: closed forms (linear
models), a tight scipy Radau forward-sensitivity solve, central finite
differences of tightly solved states, and a dense linear solve.
"""
import numpy as np
import pytest
from scipy.linalg import expm

import pbsens
from conftest import make_model
from pbsens.sensitivity.forward import _AUGMENTED_SOLVERS, forward_sensitivities


def _max_rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def _col_rel(S, S_ref, p):
    """Largest error of each log-parameter sensitivity column ``p_j S[:, j]`` relative to that column's
    largest entry, over the columns within 1e-3 of the largest (smaller ones sit at the atol floor)."""
    L, L_ref = S * p, S_ref * p
    scale = np.abs(L_ref).max(axis=(0, 1))
    keep = scale > 1e-3 * scale.max()
    return (np.abs(L - L_ref).max(axis=(0, 1))[keep] / scale[keep]).max()


def test_registered():
    assert "rodas5p" in _AUGMENTED_SOLVERS


# ----------------------------------------------------------------- linear algebra of one stage

def _stage_system(A, C, fac, rng):
    """The stage system of the augmented solve as numpy sees it: ``M = fac I - J`` with ``J`` block lower
    triangular (``A`` on the diagonal blocks, ``C_j`` in the first block column), a right-hand side ``g``,
    and the kernels' ``W = fac I - A`` factorised in place (``piv``)."""
    from pbsens.kernels.lu import lu_factor
    nx, ns = A.shape[0], C.shape[0]
    full = np.zeros(((ns + 1) * nx, (ns + 1) * nx))
    for j in range(ns + 1):
        full[j * nx:(j + 1) * nx, j * nx:(j + 1) * nx] = A
        if j:
            full[j * nx:(j + 1) * nx, :nx] = C[j - 1]
    M = np.eye(full.shape[0]) * fac - full
    g = rng.normal(size=full.shape[0])
    W = np.ascontiguousarray(np.eye(nx) * fac - A)
    piv = np.empty(nx, dtype=np.int64)
    assert lu_factor(W, piv) == 0
    return M, g, W, piv


def test_block_solve_matches_dense_solve():
    from pbsens.kernels.augmented import block_solve
    rng = np.random.default_rng(3)
    nx, ns, fac = 5, 3, 7.0
    A = rng.normal(size=(nx, nx))
    C = rng.normal(size=(ns, nx, nx))
    J = np.ascontiguousarray(np.concatenate([A[None], C]).reshape((ns + 1) * nx, nx))
    M, g, W, piv = _stage_system(A, C, fac, rng)
    k = g.copy()
    block_solve(W, piv, J, k)
    assert np.allclose(k, np.linalg.solve(M, g), rtol=1e-12, atol=1e-12)


def _compressed(C, nx, ns):
    """``Cs``/``pat`` scratch of :func:`pbsens.kernels.augmented.coupled_solve` holding the nonzero ``(i, k)`` of ``C``."""
    Cs = np.full((nx * nx, ns), np.nan)                # untouched rows stay NaN: a read of them would show
    pat = np.zeros(1 + 2 * nx * nx, dtype=np.int64)
    e = 0
    for k in range(nx):
        for i in range(nx):
            if np.any(C[:, i, k] != 0.0):
                Cs[e] = C[:, i, k]
                pat[1 + 2 * e], pat[2 + 2 * e] = i, k
                e += 1
    pat[0] = e
    return Cs, pat


@pytest.mark.parametrize("ns", [1, 4])
def test_coupled_solve_matches_dense_solve(ns):
    """The stage solve with compressed couplings and a matrix right-hand side against numpy's dense
    solve of the whole ``nx (ns+1)`` block lower-triangular system, sparse ``A`` and ``C_j`` (the dense
    system in the column layout ``(x, S[:, 0], ...)``, the kernel's ``(x, S)`` with ``S`` row-major)."""
    from pbsens.kernels.augmented import coupled_solve
    rng = np.random.default_rng(5)
    nx, fac = 6, 3.0
    A = rng.normal(size=(nx, nx)) * (rng.random((nx, nx)) < 0.4)
    C = rng.normal(size=(ns, nx, nx)) * (rng.random((nx, nx)) < 0.3)   # one pattern, zero in places
    C[:, 1, 2] = 0.0
    C[-1, 1, 2] = 1.5                                  # an entry that is zero in the other columns
    M, g, W, piv = _stage_system(A, C, fac, rng)
    Cs, pat = _compressed(C, nx, ns)
    assert 0 < pat[0] < nx * nx
    perm = np.concatenate([np.arange(nx), nx + np.arange(nx * ns).reshape(ns, nx).T.ravel()])
    k = g[perm]
    coupled_solve(W, piv, Cs, pat, k)
    assert np.allclose(k, np.linalg.solve(M, g)[perm], rtol=1e-12, atol=1e-12)


def test_coupling_columns_match_central_differences(pka):
    """``C_j = d(A S_j + B[:, idx_j])/dx`` from :func:`pbsens.kernels.augmented.coupling_columns` against
    central differences (numpy, the model's exact Jacobians at x +- h e_k) of ``A S_j + B_j``, and the list
    of entries covers every nonzero of them."""
    from pbsens.kernels.augmented import coupling_columns
    m = pka
    nx, npar = m.n_states, m.n_params
    rng = np.random.default_rng(2)
    idx = np.array([0, npar // 2, npar - 1], dtype=np.int64)
    ns = idx.size
    p, c = m.p.copy(), m.constants
    x = m.initial_state(p) + rng.random(nx)            # away from zero: more entries of A are nonzero
    S = rng.normal(size=(nx, ns))
    z = np.concatenate([x, S.ravel()])                 # S row-major
    J = np.empty((nx, nx))
    Cs = np.empty((nx * nx, ns))
    pat = np.zeros(1 + 2 * nx * nx, dtype=np.int64)
    WA, WB = np.empty((2, nx, nx)), np.empty((2, nx, npar))
    z_in = z.copy()
    coupling_columns(m.fns.jacs_into, idx, WA, WB, 0.0, z, p, c, J, Cs, pat)
    assert np.array_equal(z, z_in)                     # perturbed and restored bit for bit

    def lin(xv):
        A_, B_ = np.empty((nx, nx)), np.empty((nx, npar))
        m.fns.jacs_into(0.0, xv, p, c, A_, B_)
        return A_, A_ @ S + B_[:, idx]

    A0, _ = lin(x)
    assert np.allclose(J, A0, rtol=0, atol=0)
    C_ref = np.empty((ns, nx, nx))
    for k in range(nx):
        h = 1e-5 * max(abs(x[k]), 1e-3)
        xp, xm = x.copy(), x.copy()
        xp[k] += h
        xm[k] -= h
        C_ref[:, :, k] = ((lin(xp)[1] - lin(xm)[1]) / (xp[k] - xm[k])).T
    C = np.zeros((ns, nx, nx))
    for e in range(pat[0]):
        C[:, pat[1 + 2 * e], pat[2 + 2 * e]] = Cs[e]
    assert np.abs(C_ref).max() > 0
    assert np.abs(C - C_ref).max() <= 1e-6 * np.abs(C_ref).max()
    assert not np.any((C_ref != 0.0) & (C == 0.0) & (np.abs(C_ref) > 1e-9 * np.abs(C_ref).max()))


def test_coupled_rhs_matches_numpy(pka):
    """``(f, A S_j + B[:, idx_j])`` from :func:`pbsens.kernels.augmented.coupled_rhs` against numpy products
    of the model's Jacobians; without columns it is the plain right-hand side."""
    from pbsens.kernels.augmented import coupled_rhs
    m = pka
    nx, npar = m.n_states, m.n_params
    rng = np.random.default_rng(4)
    idx = np.array([npar - 1, 0, 2], dtype=np.int64)
    p, c = m.p.copy(), m.constants
    x = m.initial_state(p) + rng.random(nx)
    S = rng.normal(size=(nx, idx.size))
    z = np.concatenate([x, S.ravel()])                 # S row-major
    out = np.empty(z.size)
    coupled_rhs(m.fns.rhs_into, m.fns.jacs_into, idx, np.empty((2, nx, nx)), np.empty((2, nx, npar)), 0.3, z, p, c,
                out)
    f, A, B = np.empty(nx), np.empty((nx, nx)), np.empty((nx, npar))
    m.fns.rhs_into(0.3, x, p, c, f)
    m.fns.jacs_into(0.3, x, p, c, A, B)
    ref = np.concatenate([f, (A @ S + B[:, idx]).ravel()])
    assert np.allclose(out, ref, rtol=1e-13, atol=1e-13 * np.abs(ref).max())
    plain = np.empty(nx)
    coupled_rhs(m.fns.rhs_into, m.fns.jacs_into, np.empty(0, dtype=np.int64), np.empty((2, 0, 0)),
                np.empty((2, 0, 0)), 0.3, x.copy(), p, c, plain)
    assert np.array_equal(plain, f)


# ----------------------------------------------------------------- analytic references

@pytest.mark.parametrize("rtol", [1e-6, 1e-9])
def test_random_linear_model_matches_closed_form(rtol):
    # x' = A x + p^2 + 1, S' = A S + 2 diag(p), S(0) = 0  ->  S(t) = A^-1 (e^{At} - I) 2 diag(p)
    m = pbsens.random_linear_model(6, seed=1)
    A, p = m.meta["A"], m.p
    ts = np.linspace(0, 5, 11)
    r = forward_sensitivities(m, (0, 5), t_eval=ts, method="rodas5p", rtol=rtol, atol=1e-3 * rtol)
    Ainv = np.linalg.inv(A)
    S_ref = np.array([Ainv @ (expm(t * A) - np.eye(6)) @ np.diag(2 * p) for t in ts])
    x_ref = np.array([expm(t * A) @ m.x0 + Ainv @ (expm(t * A) - np.eye(6)) @ (p ** 2 + 1) for t in ts])
    assert np.array_equal(r.t, ts) and r.S.shape == (11, 6, 6)
    assert _max_rel(r.x, x_ref) < 10 * rtol
    assert _max_rel(r.S, S_ref) < 10 * rtol
    assert r.options["solver"] == "rodas5p" and r.options["jacobian"] == "structured"
    st = r.options["stats"]
    assert st["n_steps"] > 0 and st["nlu"] >= st["n_steps"] and st["nfev"] >= 8 * st["n_steps"]


def test_time_varying_closed_form(tmp_path):
    # non-autonomous (the df/dt term): x' = -k (1 + t) x  ->  x = x0 exp(-k (t + t^2/2)), dx/dk = -(t + t^2/2) x
    m = make_model(tmp_path, "ltv", {"x": 2.0}, {"k": 0.4, "q": 1.5}, {"x": "-k*(1 + t)*x + 0*q"})
    ts = np.linspace(0, 3, 31)
    r = forward_sensitivities(m, (0, 3), t_eval=ts, method="rodas5p", rtol=1e-9, atol=1e-12)
    x = 2.0 * np.exp(-0.4 * (ts + ts ** 2 / 2))
    assert _max_rel(r.x[:, 0], x) < 1e-8
    assert _max_rel(r.S[:, 0, 0], -(ts + ts ** 2 / 2) * x) < 1e-8
    assert np.all(r.S[:, 0, 1] == 0.0)


# ----------------------------------------------------------------- against a tight Radau solve

_TS = np.linspace(0.0, 600.0, 31)


@pytest.fixture(scope="module")
def radau_refs(pka, camkii):
    return {name: forward_sensitivities(m, (0, 600), t_eval=_TS, method="Radau", rtol=1e-10, atol=1e-12)
            for name, m in (("PKA", pka), ("CaMKII", camkii))}


@pytest.mark.parametrize("name", ["PKA", "CaMKII"])
@pytest.mark.parametrize("rtol", [1e-6, 1e-8])
def test_matches_tight_radau(name, rtol, radau_refs, pka, camkii):
    m = pka if name == "PKA" else camkii
    ref = radau_refs[name]
    r = forward_sensitivities(m, (0, 600), t_eval=_TS, method="rodas5p", rtol=rtol, atol=0.1 * rtol)
    assert _max_rel(r.x, ref.x) < 10 * rtol
    assert _max_rel(r.S, ref.S) < 10 * rtol      # relative to the largest |S|
    assert _col_rel(r.S, ref.S, np.abs(m.p)) < 100 * rtol


# ----------------------------------------------------------------- finite differences on Chua

def test_chua_matches_central_finite_differences(chua):
    ts = np.array([0.5, 1.0, 2.0])
    r = forward_sensitivities(chua, (0, 2), t_eval=ts, method="rodas5p", rtol=1e-9, atol=1e-11)
    p = chua.p
    S_fd = np.empty_like(r.S)
    for j in range(chua.n_params):
        h = 1e-5 * max(abs(p[j]), 1e-3)
        pp, pm = p.copy(), p.copy()
        pp[j] += h
        pm[j] -= h
        xp = pbsens.solve_states(chua, (0, 2), t_eval=ts, p=pp, rtol=1e-12, atol=1e-14)
        xm = pbsens.solve_states(chua, (0, 2), t_eval=ts, p=pm, rtol=1e-12, atol=1e-14)
        S_fd[:, :, j] = (xp.x[xp.eval_index] - xm.x[xm.eval_index]) / (pp[j] - pm[j])
    assert np.abs(S_fd).max() > 1e-3
    assert _max_rel(r.S, S_fd) < 1e-6


# ----------------------------------------------------------------- grid, stops, options, errors

def test_default_grid_and_tstops(chua):
    r = forward_sensitivities(chua, (0, 2), method="rodas5p", rtol=1e-6, atol=1e-8, tstops=[0.3, 1.7])
    assert r.t[0] == 0.0 and r.t[-1] == 2.0 and np.all(np.diff(r.t) > 0)
    assert 0.3 in r.t and 1.7 in r.t
    r2 = forward_sensitivities(chua, (0, 2), method="rodas5p", rtol=1e-6, atol=1e-8, max_step=0.1)
    assert np.max(np.diff(r2.t)) <= 0.1 + 1e-12
    assert r2.S.shape == (r2.t.size, 3, 2)


def test_parameter_subset_matches_full(pka):
    ts = np.linspace(0, 600, 7)
    full = forward_sensitivities(pka, (0, 600), t_eval=ts, method="rodas5p", rtol=1e-8, atol=1e-10)
    sub = forward_sensitivities(pka, (0, 600), t_eval=ts, method="rodas5p", rtol=1e-8, atol=1e-10, params=[20, 3])
    assert sub.S.shape == (7, pka.n_states, 2)
    assert _max_rel(sub.S, full.S[:, :, [20, 3]]) < 1e-6


@pytest.mark.parametrize("kwargs, name", [
    (dict(bogus=1), "bogus"),
    (dict(rtol=1e-17), "rtol"),
    (dict(max_step=-1.0), "max_step"),
    (dict(first_step=0.0), "first_step"),
    (dict(max_steps=0), "max_steps"),
    (dict(tstops=[3.0, 1.0]), "tstops"),
    (dict(jacobian="sparse"), "jacobian"),
])
def test_bad_input_names_the_argument(chua, kwargs, name):
    with pytest.raises(pbsens.PbsensError, match=name):
        forward_sensitivities(chua, (0, 10), method="rodas5p", **kwargs)


def test_failures_raise_solver_error(tmp_path, chua):
    m = make_model(tmp_path, "blowup", {"x": 1.0}, {"k": 1.0}, {"x": "k*x**2"})
    with pytest.raises(pbsens.SolverError, match="blowup"):
        forward_sensitivities(m, (0, 2), method="rodas5p")
    with pytest.raises(pbsens.SolverError, match="max_steps"):
        forward_sensitivities(chua, (0, 10), method="rodas5p", max_steps=3)


@pytest.mark.parametrize("capacity", [1, 2, 7, 4096])
def test_outputs_as_the_steps_go_equal_the_merged_full_solve(pka, capacity):
    """rodas5p_sensitivities_at (buffers emptied when full) takes the same steps and gives, to the
    bit, the states the full solve's merge_outputs gives at the output times: grid points hit
    exactly, points inside steps, and the end."""
    from pbsens.sensitivity.forward import _rodas_addresses
    from pbsens.kernels import rosenbrock as k
    m = pka
    idx = np.array([3, 20], dtype=np.int64)
    p = m.p
    z0 = np.concatenate([m.x0, np.zeros(m.n_states * idx.size)])
    rtol = np.full(z0.size, 1e-7)
    atol = np.full(z0.size, 1e-9)
    stops = np.array([200.0, 600.0])
    addr, auto = _rodas_addresses(m)
    c1, i1 = np.zeros(6, dtype=np.int64), np.zeros(3)
    st, T, Z, Dn = k.rodas5p_solve_sensitivities(addr, 0.0, z0, p, m.constants, idx, rtol, atol, stops, 0.0,
                                                 np.inf, 100_000, auto, 256, c1, i1)
    assert st == k.STATUS_OK and T.size > 20
    te = np.unique(np.concatenate([[0.0], T[5:8], np.linspace(1.0, 599.0, 37), [200.0, 600.0]]))
    t_all = np.empty(T.size + te.size)
    z_all = np.empty((T.size + te.size, z0.size))
    where = np.empty(te.size, dtype=np.int64)
    k.merge_outputs(T, Z, Dn, te, t_all, z_all, where)
    c2, i2 = np.zeros(6, dtype=np.int64), np.zeros(3)
    st2, out = k.rodas5p_sensitivities_at(addr, 0.0, z0, p, m.constants, idx, rtol, atol, stops, 0.0, np.inf,
                                          100_000, auto, capacity, c2, i2, te)
    assert st2 == k.STATUS_OK
    np.testing.assert_array_equal(c1, c2)
    np.testing.assert_array_equal(out, z_all[where])
