"""The post-hoc adjoint gradient (issue #40): ``pbsens.sensitivity.adjoint.adjoint_gradient``.

* a linear model ``x' = A(p) x`` with ``x0`` depending on ``p``, exact states on uniform grids:
  against the analytic gradient (Van Loan's block exponential for ``dx/dp``); exp2 converges
  with order 2, exp with order 1;
* the adjoint march is the transpose of the forward march: its gradient equals the forward
  exp / exp2 march's ``sum_i c_i^T S(t_i) + explicit`` on the same grid to ~1e-10 (PKA, with
  output times merged from the dense output, a user ``S0``, sub-steps, exp2's midpoint
  correction); on Boehm through ``Problem.evaluate(method="exp2-adjoint")``;
* a nonlinear (Michaelis-Menten) model against central finite differences of ``J``;
* the analytic, constant-forcing and finite-difference tests for the dense kernel and for the
  sparse one (``linalg="sparse"``; also with every interval through the transposed action);
* bad input raises PbsensError naming the argument.
"""
import numpy as np
import pytest
import scipy.linalg
from conftest import make_model

import pbsens
from pbsens.errors import PbsensError
from pbsens.sensitivity.adjoint import adjoint_gradient

# ------------------------------------------------------------------ linear model, analytic gradient
PAR = {"a": 0.8, "b": 0.3, "c": 0.5, "x10": 1.5}


def _A(p):
    a, b, c, _ = p
    return np.array([[-a, b], [a, -(b + c)]])


_DA = [np.array([[-1.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 1.0], [0.0, -1.0]]),
       np.array([[0.0, 0.0], [0.0, -1.0]]), np.zeros((2, 2))]
_DX0 = np.array([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])


@pytest.fixture(scope="module")
def linear(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("adj"), "adjlin", {"x1": "x10", "x2": 0.0}, PAR,
                      {"x1": "-a*x1 + b*x2", "x2": "a*x1 - (b + c)*x2"})


def _exact(p, t):
    """States and sensitivities of ``x' = A(p) x`` at ``t``: ``dx/dp_j = X12_j x0 + e^{tA} dx0/dp_j``,
    ``X12_j`` the upper right block of ``exp(t [[A, dA/dp_j], [0, A]])`` (Van Loan)."""
    A = _A(p)
    x0 = np.array([p[3], 0.0])
    xs, Ss = [], []
    for tk in t:
        E = scipy.linalg.expm(tk * A)
        S = np.empty((2, 4))
        for j in range(4):
            M = scipy.linalg.expm(tk * np.block([[A, _DA[j]], [np.zeros((2, 2)), A]]))
            S[:, j] = M[:2, 2:] @ x0 + E @ _DX0[:, j]
        xs.append(E @ x0)
        Ss.append(S)
    return np.array(xs), np.array(Ss)


def _quadratic(x_out, data, W):
    """``J = sum_i 1/2 (x_i - d_i)^T W (x_i - d_i)`` and ``dJ/dx_i = W (x_i - d_i)``."""
    r = x_out - data
    return 0.5 * np.einsum("ki,ij,kj->", r, W, r), r @ W


@pytest.fixture(params=["dense", "sparse", "sparse-action"])
def linalg(request, monkeypatch):
    """The dense adjoint kernel; the sparse one (its dense-step and action intervals as the forward's
    choice makes them); the sparse one with every interval through the transposed action."""
    if request.param == "sparse-action":
        from pbsens.sensitivity import sparse as sparse_path
        monkeypatch.setattr(sparse_path, "DENSE_STEP_MAX_STATES", 0)
        return "sparse"
    return request.param


def test_linear_against_analytic_gradient(linear, linalg):
    p = np.array(list(PAR.values()))
    t_out = np.array([0.0, 0.7, 2.0, 3.5, 5.0])
    data = np.array([[1.4, 0.1], [1.0, 0.4], [0.5, 0.5], [0.3, 0.4], [0.2, 0.3]])
    W = np.diag([1.0, 2.0])
    x_out, S_out = _exact(p, t_out)
    _, dJdx = _quadratic(x_out, data, W)
    g_exact = np.einsum("ki,kij->j", dJdx, S_out)
    assert np.all(np.abs(g_exact) > 1e-3)          # every parameter matters here
    errs = {"exp": [], "exp2": []}
    for n in (50, 100, 200):
        t = np.unique(np.concatenate([np.linspace(0.0, 5.0, n + 1), t_out]))
        x, _ = _exact(p, t[:1])
        x = np.array([scipy.linalg.expm(tk * _A(p)) @ np.array([p[3], 0.0]) for tk in t])
        for method in errs:
            g = adjoint_gradient(linear, (t, x), p, t_out, dJdx, method=method, linalg=linalg)
            errs[method].append(np.max(np.abs(g - g_exact)) / np.max(np.abs(g_exact)))
    e1, e2 = np.array(errs["exp"]), np.array(errs["exp2"])
    order1 = np.log2(e1[:-1] / e1[1:])
    order2 = np.log2(e2[:-1] / e2[1:])
    assert np.all((order1 > 0.8) & (order1 < 1.3)), (order1, e1)
    assert np.all((order2 > 1.8) & (order2 < 2.3)), (order2, e2)
    assert e2[-1] < 1e-4, e2


def test_linear_constant_forcing_is_exact(tmp_path, linalg):
    """``x' = A x + u(p)`` with ``A`` fixed: ``A``, ``B`` constant, so the exponential step and its
    adjoint are exact on any grid; ``S`` analytic: ``S = int_0^t e^{sA} ds du/dp = t phi1(tA) du/dp``."""
    m = make_model(tmp_path, "adjforced", {"x1": 1.0, "x2": 0.5}, {"u1": 0.4, "u2": 0.9},
                   {"x1": "-1.2*x1 + 0.3*x2 + u1", "x2": "0.5*x1 - 0.7*x2 + 2*u2"})
    A = np.array([[-1.2, 0.3], [0.5, -0.7]])
    dudp = np.array([[1.0, 0.0], [0.0, 2.0]])
    t_out = np.array([0.5, 1.3, 4.0])
    tr = pbsens.solve_states(m, (0.0, 4.0), t_eval=t_out, rtol=1e-6, atol=1e-8)
    dJdx = np.array([[1.0, -2.0], [0.5, 0.3], [-1.0, 0.7]])
    want = np.zeros(2)
    for tk, c in zip(t_out, dJdx):
        M = scipy.linalg.expm(tk * np.block([[A, np.eye(2)], [np.zeros((2, 2)), np.zeros((2, 2))]]))
        want += c @ (M[:2, 2:] @ dudp)
    for method in ("exp", "exp2"):
        g = adjoint_gradient(m, tr, None, t_out, dJdx, method=method, linalg=linalg)
        np.testing.assert_allclose(g, want, rtol=1e-11, atol=0)


# ------------------------------------------------------------------ transpose of the forward march
@pytest.fixture(scope="module")
def pka_case():
    m = pbsens.load_model("PKA")
    tr = pbsens.solve_states(m, (0.0, 600.0), t_eval=[0.0, 600.0], rtol=1e-6, atol=1e-8, dense_output=True)
    rng = np.random.default_rng(40)
    t_out = np.sort(rng.uniform(1.0, 599.0, 12))       # not grid points: merged from the dense output
    t_out = np.concatenate([[0.0], t_out, [600.0]])
    dJdx = rng.normal(size=(t_out.size, m.n_states))
    return m, tr, t_out, dJdx


@pytest.mark.parametrize("method, substeps, midpoint", [("exp", 1, None), ("exp", 3, None), ("exp2", 1, None),
                                                       ("exp2", 3, False), ("exp2", 3, True), ("exp2", None, None)])
def test_equals_forward_march(pka_case, method, substeps, midpoint):
    """``midpoint`` (default on for exp2 with sub-steps): the long intervals take the midpoint
    correction, whose transpose the adjoint takes too; False: 3 sub-steps, nothing frozen."""
    m, tr, t_out, dJdx = pka_case
    rng = np.random.default_rng(7)
    S0 = rng.normal(size=(m.n_states, m.n_params))
    explicit = rng.normal(size=m.n_params)
    kw = dict(midpoint=midpoint, freeze=0.0) if method == "exp2" else {}
    r = pbsens.sensitivities(m, tr, method=method, t_eval=t_out, S0=S0, substeps=substeps, linalg="dense", **kw)
    assert r.options["midpoint"] == (method == "exp2" and substeps not in (1, None) and midpoint is not False)
    g_fwd = np.einsum("ki,kij->j", dJdx, r.S) + explicit
    g = adjoint_gradient(m, tr, None, t_out, dJdx, explicit, method=method, x0_sens=S0, substeps=substeps,
                         midpoint=midpoint)
    assert np.max(np.abs(g_fwd)) > 1.0
    np.testing.assert_allclose(g, g_fwd, rtol=1e-10, atol=1e-10 * np.max(np.abs(g_fwd)))
    # and it is a gradient of this functional only: another dJdx gives another one
    g2 = adjoint_gradient(m, tr, None, t_out, dJdx[::-1].copy(), explicit, method=method, x0_sens=S0,
                          substeps=substeps, midpoint=midpoint)
    assert np.max(np.abs(g2 - g)) > 1e-3 * np.max(np.abs(g))


def test_lambda0_is_the_gradient_in_x0(pka_case):
    """``lambda(t0) = dJ/dx0``: with ``S0 = I`` columns the gradient in x0 is the forward ``c^T S``."""
    m, tr, t_out, dJdx = pka_case
    g, lam0 = adjoint_gradient(m, tr, None, t_out, dJdx, method="exp", return_lambda=True)
    S0 = np.zeros((m.n_states, m.n_params))
    S0[:, 0] = 1.0                                       # column 0: dx0 = all ones
    g1 = adjoint_gradient(m, tr, None, t_out, dJdx, method="exp", x0_sens=S0)
    S0[:, 0] = 0.0
    g0 = adjoint_gradient(m, tr, None, t_out, dJdx, method="exp", x0_sens=S0)
    assert abs((g1[0] - g0[0]) - lam0.sum()) <= 1e-10 * max(1.0, abs(lam0.sum()))
    assert np.isfinite(g).all()


# ------------------------------------------------------------------ nonlinear model, finite differences
def test_michaelis_menten_against_finite_differences(tmp_path, linalg):
    m = make_model(tmp_path, "adjmm", {"s": "s0", "q": 0.0},
                   {"V": 1.3, "K": 0.6, "kin": 0.2, "d": 0.4, "s0": 2.0},
                   {"s": "-V*s/(K + s) + kin", "q": "V*s/(K + s) - d*q"})
    p = m.p.copy()
    t_out = np.array([0.5, 1.0, 2.0, 4.0, 8.0])
    data = np.array([[1.5, 0.4], [1.1, 0.7], [0.6, 1.0], [0.3, 1.0], [0.3, 0.7]])
    W = np.diag([1.0, 3.0])

    def J(pp):
        tr = pbsens.solve_states(m, (0.0, 8.0), t_eval=t_out, p=pp, x0=[pp[4], 0.0], method="Radau",
                                 rtol=1e-12, atol=1e-14)
        return _quadratic(tr.x[tr.eval_index], data, W)[0]

    fd = np.empty(p.size)
    for j in range(p.size):
        dp = 1e-4 * p[j]
        pp, pm = p.copy(), p.copy()
        pp[j] += dp
        pm[j] -= dp
        fd[j] = (J(pp) - J(pm)) / (2 * dp)
    tr = pbsens.solve_states(m, (0.0, 8.0), t_eval=t_out, method="rodas5p", rtol=1e-10, atol=1e-13,
                             dense_output=True)
    _, dJdx = _quadratic(tr.x[tr.eval_index], data, W)
    # exp2's own error on this grid: 7e-6 with 4 sub-steps, 1.7e-6 with 8 (order 2; against tight FS)
    g = adjoint_gradient(m, tr, None, t_out, dJdx, method="exp2", substeps=8, linalg=linalg)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7 * np.max(np.abs(fd)))
    g1 = adjoint_gradient(m, tr, None, t_out, dJdx, method="exp", linalg=linalg)     # first order: visibly worse
    assert np.max(np.abs(g1 - fd)) > 3 * np.max(np.abs(g - fd))
    # the midpoint correction's transpose (exp2's default grid for Rodas5P: substeps=None, midpoint on),
    # against Radau forward sensitivities: measured 3.3e-9, 4 sub-steps 1.1e-5, the solver's grid 1.7e-4
    ref = pbsens.forward_sensitivities(m, (0.0, 8.0), t_eval=t_out, method="Radau", rtol=1e-12, atol=1e-14)
    g_ref = np.einsum("ki,kij->j", dJdx, ref.S)
    err = {label: np.max(np.abs(adjoint_gradient(m, tr, None, t_out, dJdx, method="exp2", linalg=linalg, **kw)
                                - g_ref))
           / np.max(np.abs(g_ref))
           for label, kw in (("mid", dict(substeps=None)), ("sub4", dict(substeps=4, midpoint=False)))}
    assert err["mid"] < 1e-7 and err["mid"] < err["sub4"] / 100, err


# ------------------------------------------------------------------ bad input
def test_bad_input(pka_case):
    m, tr, t_out, dJdx = pka_case
    with pytest.raises(PbsensError, match="'method'"):
        adjoint_gradient(m, tr, None, t_out, dJdx, method="pbsr")
    with pytest.raises(PbsensError, match="'dJdx'"):
        adjoint_gradient(m, tr, None, t_out, dJdx[:, :-1])
    with pytest.raises(PbsensError, match="'dJdx'"):
        bad = dJdx.copy()
        bad[2, 1] = np.nan
        adjoint_gradient(m, tr, None, t_out, bad)
    with pytest.raises(PbsensError, match="'dJdp_explicit'"):
        adjoint_gradient(m, tr, None, t_out, dJdx, np.ones(m.n_params + 1))
    with pytest.raises(PbsensError, match="'t_out'"):
        adjoint_gradient(m, tr, None, t_out[::-1].copy(), dJdx)
    with pytest.raises(PbsensError, match="'t_out'"):
        adjoint_gradient(m, tr, None, [], dJdx)
    with pytest.raises(PbsensError, match="'trajectory'"):
        adjoint_gradient(m, None, None, t_out, dJdx)
    with pytest.raises(PbsensError, match="'p'"):
        adjoint_gradient(m, tr, 2 * m.p, t_out, dJdx)
    with pytest.raises(PbsensError, match="'S0'|'x0_sens'"):
        adjoint_gradient(m, tr, None, t_out, dJdx, x0_sens=np.ones((2, 2)))


# ------------------------------------------------------------------ PEtab: Problem.evaluate(method="exp2-adjoint")
BOEHM = "tests/data/petab/Boehm_JProteomeRes2014/Boehm_JProteomeRes2014.yaml"


@pytest.fixture(scope="module")
def boehm():
    import os
    pr = pbsens.petab.load(os.path.join(os.path.dirname(__file__), "..", BOEHM))
    th = pr.x_nominal      # near the optimum: a small gradient, relative errors show
    ref = pr.evaluate(th, method="fs", rtol=1e-10, atol=1e-12)
    return pr, th, ref


def _rel(g, ref):
    return np.max(np.abs(g - ref)) / np.max(np.abs(ref))


@pytest.mark.parametrize("opts", [{}, {"substeps": 4, "midpoint": False}])
def test_problem_adjoint_is_the_transpose_of_exp2(boehm, opts):
    """On the same grid (the default: the midpoint correction; or 4 sub-steps, nothing frozen) the
    adjoint gradient is the forward exp2 gradient to rounding, through the PEtab maps, scales and
    noise models."""
    pr, th, ref = boehm
    f = pr.evaluate(th, method="exp2", **opts, **({"freeze": 0.0} if opts else {}))
    a = pr.evaluate(th, method="exp2-adjoint", **opts)
    assert a.llh == pytest.approx(f.llh, rel=1e-12)
    assert _rel(a.gradient, f.gradient) < 1e-10
    assert _rel(a.gradient, ref.gradient) > 1e-9          # the comparison above is not against fs


def test_problem_adjoint_reaches_exp2_error_level(boehm):
    """Against fs at rtol 1e-10: the adjoint's error is the default forward exp2's (the same
    discrete gradient), far below the 4 sub-steps' without the correction."""
    pr, th, ref = boehm
    e_fwd = _rel(pr.evaluate(th, method="exp2").gradient, ref.gradient)
    e_adj = _rel(pr.evaluate(th, method="exp2-adjoint").gradient, ref.gradient)
    e4 = _rel(pr.evaluate(th, method="exp2-adjoint", substeps=4, midpoint=False).gradient, ref.gradient)
    assert e_adj < 1.01 * e_fwd + 1e-12, (e_adj, e_fwd)
    assert e_adj < e4 / 20, (e_adj, e4)


def test_problem_adjoint_limits(boehm):
    pr, th, _ = boehm
    r = pr.evaluate(th, method="exp2-adjoint")
    for field in ("fim", "residual_jacobian", "sigma_jacobian"):
        with pytest.raises(PbsensError, match="use method='exp2'"):
            getattr(r, field)
    assert np.isfinite(r.llh) and r.gradient.shape == (pr.dim,)
    assert pr.evaluate(th, method="exp2-adjoint", sensitivities=False).gradient is None
    for bad in ({"freeze": 1.0}, {"n_factor": 5.0}, {"jacobian": "dense"}):
        with pytest.raises(PbsensError, match=f"{next(iter(bad))}.*not supported"):
            pr.evaluate(th, method="exp2-adjoint", **bad)


# ------------------------------------------------------------------ PEtab problems with stops and preequilibration
@pytest.mark.parametrize("name", ["Fujita_SciSignal2010", "Brannmark_JBC2010",
                                  pytest.param("Isensee_JCB2018", marks=pytest.mark.slow)])
def test_problem_adjoint_on_collection_problems(name):
    """Fujita (6 conditions, an input switched on at t = 0), Brannmark (8 preequilibrated conditions:
    the transposed steady-state solve) and Isensee (123 conditions, all preequilibrated, 46 theta):
    the adjoint gradient is the default forward exp2 gradient to rounding, and so within its error of
    the tight fs gradient, away from the nominal point too. (Jumps inside the time span:
    tests/test_adjoint_segments.py.)"""
    import os
    pr = pbsens.petab.load(os.path.join(os.path.dirname(__file__), "data", "petab", name, f"{name}.yaml"))
    th = pr.x_nominal + np.random.default_rng(1).uniform(-0.1, 0.1, pr.dim)
    f = pr.evaluate(th, method="exp2")
    a = pr.evaluate(th, method="exp2-adjoint")
    assert a.llh == pytest.approx(f.llh, rel=1e-12)
    assert _rel(a.gradient, f.gradient) < 1e-9
    ref = pr.evaluate(th, method="fs", rtol=1e-10, atol=1e-12).gradient
    assert _rel(a.gradient, ref) <= 1.01 * _rel(f.gradient, ref) + 1e-12
    assert _rel(a.gradient, ref) < 1e-3
