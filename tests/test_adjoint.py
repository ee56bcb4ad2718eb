"""The post-hoc adjoint gradient (issue #40): ``pbsens.sensitivity.adjoint.adjoint_gradient``.

* a linear model ``x' = A(p) x`` with ``x0`` depending on ``p``, exact states on uniform grids:
  against the analytic gradient (Van Loan's block exponential for ``dx/dp``); exp2 converges
  with order 2, exp with order 1;
* the adjoint march is the transpose of the forward march: its gradient equals the forward
  exp / exp2 march's ``sum_i c_i^T S(t_i) + explicit`` on the same grid to ~1e-10 (PKA, with
  output times merged from the dense output, a user ``S0``, sub-steps);
* a nonlinear (Michaelis-Menten) model against central finite differences of ``J``;
* bad input raises PbsensError naming the argument.
"""
import numpy as np
import pytest
import scipy.linalg

import pbsens
from pbsens.errors import PbsensError
from pbsens.sensitivity.adjoint import adjoint_gradient
from conftest import make_model

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


def test_linear_against_analytic_gradient(linear):
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
            g = adjoint_gradient(linear, (t, x), p, t_out, dJdx, method=method)
            errs[method].append(np.max(np.abs(g - g_exact)) / np.max(np.abs(g_exact)))
    e1, e2 = np.array(errs["exp"]), np.array(errs["exp2"])
    order1 = np.log2(e1[:-1] / e1[1:])
    order2 = np.log2(e2[:-1] / e2[1:])
    assert np.all((order1 > 0.8) & (order1 < 1.3)), (order1, e1)
    assert np.all((order2 > 1.8) & (order2 < 2.3)), (order2, e2)
    assert e2[-1] < 1e-4, e2


def test_linear_constant_forcing_is_exact(tmp_path):
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
        g = adjoint_gradient(m, tr, None, t_out, dJdx, method=method)
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


@pytest.mark.parametrize("method", ["exp", "exp2"])
@pytest.mark.parametrize("substeps", [1, 3])
def test_equals_forward_march(pka_case, method, substeps):
    m, tr, t_out, dJdx = pka_case
    rng = np.random.default_rng(7)
    S0 = rng.normal(size=(m.n_states, m.n_params))
    explicit = rng.normal(size=m.n_params)
    kw = dict(midpoint=False, freeze=0.0) if method == "exp2" else {}
    r = pbsens.sensitivities(m, tr, method=method, t_eval=t_out, S0=S0, substeps=substeps, **kw)
    g_fwd = np.einsum("ki,kij->j", dJdx, r.S) + explicit
    g = adjoint_gradient(m, tr, None, t_out, dJdx, explicit, method=method, x0_sens=S0, substeps=substeps)
    assert np.max(np.abs(g_fwd)) > 1.0
    np.testing.assert_allclose(g, g_fwd, rtol=1e-10, atol=1e-10 * np.max(np.abs(g_fwd)))
    # and it is a gradient of this functional only: another dJdx gives another one
    g2 = adjoint_gradient(m, tr, None, t_out, dJdx[::-1].copy(), explicit, method=method, x0_sens=S0,
                          substeps=substeps)
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
def test_michaelis_menten_against_finite_differences(tmp_path):
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
    g = adjoint_gradient(m, tr, None, t_out, dJdx, method="exp2", substeps=8)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7 * np.max(np.abs(fd)))
    g1 = adjoint_gradient(m, tr, None, t_out, dJdx, method="exp")     # first order: visibly worse
    assert np.max(np.abs(g1 - fd)) > 3 * np.max(np.abs(g - fd))


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


def test_problem_adjoint_is_the_transpose_of_exp2(boehm):
    """On the same grid (4 sub-steps, no midpoint correction, nothing frozen) the adjoint gradient
    is the forward exp2 gradient to rounding, through the PEtab maps, scales and noise models."""
    pr, th, ref = boehm
    f = pr.evaluate(th, method="exp2", substeps=4, midpoint=False, freeze=0.0)
    a = pr.evaluate(th, method="exp2-adjoint", substeps=4)
    assert a.llh == pytest.approx(f.llh, rel=1e-12)
    assert _rel(a.gradient, f.gradient) < 1e-10
    assert _rel(a.gradient, ref.gradient) > 1e-4          # the comparison above is not against fs


def test_problem_adjoint_reaches_exp2_error_level(boehm):
    """Against fs at rtol 1e-10: the default exp2 (midpoint correction, whose transpose is not
    implemented) and the adjoint on a grid of 64 sub-steps per Rodas5P step (order 2 in the
    sub-step: 3.4e-2, 2.1e-3, 5.3e-4, 1.3e-4 at 4, 16, 32, 64 at the nominal point)."""
    pr, th, ref = boehm
    e_fwd = _rel(pr.evaluate(th, method="exp2").gradient, ref.gradient)
    e4 = _rel(pr.evaluate(th, method="exp2-adjoint").gradient, ref.gradient)
    e64 = _rel(pr.evaluate(th, method="exp2-adjoint", substeps=64).gradient, ref.gradient)
    assert e64 < 2 * e_fwd, (e64, e_fwd)
    assert e64 < e4 / 50, (e4, e64)


def test_problem_adjoint_limits(boehm):
    pr, th, _ = boehm
    r = pr.evaluate(th, method="exp2-adjoint")
    for field in ("fim", "residual_jacobian", "sigma_jacobian"):
        with pytest.raises(PbsensError, match="use method='exp2'"):
            getattr(r, field)
    assert np.isfinite(r.llh) and r.gradient.shape == (pr.dim,)
    assert pr.evaluate(th, method="exp2-adjoint", sensitivities=False).gradient is None
    with pytest.raises(PbsensError, match="not supported"):
        pr.evaluate(th, method="exp2-adjoint", midpoint=True)
    plan = pr._plans[0]
    saved = plan.has_inf
    try:
        plan.has_inf = True
        with pytest.raises(PbsensError, match="steady-state"):
            pr.evaluate(th, method="exp2-adjoint")
    finally:
        plan.has_inf = saved
    saved = plan.pre
    try:
        plan.pre = plan.sim
        with pytest.raises(PbsensError, match="preequilibration"):
            pr.evaluate(th, method="exp2-adjoint")
    finally:
        plan.pre = saved
