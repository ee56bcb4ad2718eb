"""Property-based tests (hypothesis) of the numerics against independent references.

- the PBS, exponential and exponential-midpoint steps (``kernels.steps``) against the
  literal NumPy/SciPy references of ``tests/reference.py``, on random stable, unstable,
  singular and rank-deficient ``A``, random ``B``, and steps from 1e-8 to 1e3;
- ``kernels.linalg.expm`` against ``scipy.linalg.expm``;
- the Fisher information is symmetric positive semi-definite and equals the plain sum;
- the likelihood gradient against central finite differences on random linear models;
- ``sensitivities`` on random (also hostile) input answers with finite ``S`` or a
  named :class:`pbsens.PbsensError`, never NaN and never another exception.

Example counts are kept small (the whole file runs in well under a minute here);
``deadline=None`` because the first examples include numba's cache loading.
"""
import numpy as np
import pytest
import scipy.linalg
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import pbsens
from pbsens.kernels import linalg as L
from pbsens.kernels import steps as St

import reference as R

EPS = np.finfo(float).eps
TINY = 1e-300   # absolute floor: inputs may be subnormal, and so may the exact result
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=False)


def n1(X):
    return float(np.linalg.norm(np.atleast_2d(X), 1))


# ----------------------------------------------------------------------------- strategies
_unit = st.floats(-1.0, 1.0, allow_nan=False, allow_infinity=False)


@st.composite
def matrices_A(draw, max_n=5, max_norm_h=None):
    """``(A, h, kind)``: A of a given kind, scaled by 10^(-3..2), h = 10^(-8..3).

    Unstable and indefinite matrices are limited to ``||hA||_1 <= 60`` so that
    ``exp(hA)`` stays finite (e^60 ~ 1e26); stable ones are not limited.
    """
    n = draw(st.integers(1, max_n))
    M = draw(arrays(np.float64, (n, n), elements=_unit))
    kind = draw(st.sampled_from(["general", "stable", "unstable", "singular", "rank1", "zero", "nilpotent"]))
    if kind == "stable":    # shift the spectrum into the left half plane
        M = M - (np.max(np.real(np.linalg.eigvals(M))) + draw(st.floats(1e-3, 2.0))) * np.eye(n)
    elif kind == "unstable":
        M = M - (np.min(np.real(np.linalg.eigvals(M))) - draw(st.floats(1e-3, 2.0))) * np.eye(n)
    elif kind == "singular":
        M[:, draw(st.integers(0, n - 1))] = 0.0
    elif kind == "rank1":
        M = np.outer(M[:, 0], M[0, :])
    elif kind == "zero":
        M = np.zeros((n, n))
    elif kind == "nilpotent":
        M = np.triu(M, 1)
    A = np.ascontiguousarray(M * 10.0 ** draw(st.floats(-3.0, 2.0)))
    h = 10.0 ** draw(st.floats(-8.0, 3.0))
    limit = max_norm_h if max_norm_h is not None else (np.inf if kind in ("stable", "zero") else 60.0)
    if h * n1(A) > limit:
        h = limit / n1(A)
    return A, float(h), kind


@st.composite
def step_inputs(draw):
    A, h, kind = draw(matrices_A())
    n = A.shape[0]
    npar = draw(st.integers(1, 3))
    # A_k+1 near A_k (the Jacobian moves little over a step), same kind of spectrum
    dA = draw(arrays(np.float64, (n, n), elements=_unit)) * 0.1 * max(n1(A), 1e-300) / n
    A1 = np.ascontiguousarray(A + (dA if kind not in ("zero",) else 0.0))
    Bs = [np.ascontiguousarray(draw(arrays(np.float64, (n, npar), elements=_unit)) * 10.0 ** draw(st.floats(-3, 3)))
          for _ in range(3)]
    return A, A1, Bs[0], Bs[1], h, Bs[2], kind


# ----------------------------------------------------------------------------- kernels
@settings(max_examples=60, **SETTINGS)
@given(step_inputs())
def test_pbs_step_matches_reference(inp):
    """PBS step (4.6) against the NumPy formula, within the rounding bound of its products."""
    Ak, Ak1, Bk, Bk1, h, S0, _ = inp
    n, npar = S0.shape
    expected = R.ref_pbs_step(Ak, Ak1, Bk, Bk1, h, S0)
    # elementwise magnitude of every term: rounding error <= c n eps (|Pf| (|S| + h/2 (|Bk| + |Pb| |Bk1|)))
    aI1 = (h / 2) * (np.abs(Ak) + np.abs(Ak1))
    aP = np.eye(n) + aI1 + (h / 2) * np.abs(Ak1) @ aI1
    bound = aP @ (np.abs(S0) + (h / 2) * (np.abs(Bk) + aP @ np.abs(Bk1)))
    S = S0.copy()
    W = [np.full((n, n), np.nan) for _ in range(3)]
    T = [np.full((n, npar), np.nan) for _ in range(2)]
    St.pbs_step_into(Ak, Ak1, Bk, Bk1, h, S, *W, *T)
    assert np.all(np.isfinite(S))
    assert np.all(np.abs(S - expected) <= 50 * (n + 2) * EPS * bound + TINY)


def _phi1(A, h):
    n = A.shape[0]
    EF = np.full((n, 2 * n), np.nan)
    L.exp_phi1_into(A, h, EF, L.workspace(n))
    return EF


def _phi12(A, h):
    n = A.shape[0]
    EFF = np.full((n, 3 * n), np.nan)
    L.exp_phi12_into(A, h, EFF, L.workspace(n))
    return EFF


def _exp_tol(A, h):
    """Relative tolerance for exponential-type results: rounding grows with ||hA|| (the
    scaling-and-squaring doublings), in pbsens and in the SciPy reference alike."""
    return 1e-12 * max(1.0, h * n1(A))


@settings(max_examples=60, **SETTINGS)
@given(step_inputs())
def test_exp_step_matches_reference(inp):
    """Exponential step (3.10) ``E S + F B_k`` against SciPy's expm of the block matrix."""
    Ak, _, Bk, _, h, S0, _ = inp
    n, npar = S0.shape
    expected = R.ref_exp_step(Ak, Bk, h, S0)
    EF = _phi1(Ak, h)
    out = np.full((n, npar), np.nan)
    St.exp_step_stacked_into(EF, np.ascontiguousarray(np.vstack([S0, Bk])), out)
    assert np.all(np.isfinite(out))
    E, F = R.ref_phi1(Ak, h)
    scale = n1(E) * n1(S0) + n1(F) * n1(Bk)
    assert n1(out - expected) <= _exp_tol(Ak, h) * scale + TINY


@settings(max_examples=60, **SETTINGS)
@given(step_inputs())
def test_exp2_step_matches_reference(inp):
    """Exponential-midpoint step against ``E S + F1 B_k + (F2/h)(B_k+1 - B_k)`` by SciPy."""
    Ak, Ak1, Bk, Bk1, h, S0, _ = inp
    n, npar = S0.shape
    Abar = 0.5 * (Ak + Ak1)
    expected = R.ref_exp2_step(Ak, Ak1, Bk, Bk1, h, S0)
    EFF = _phi12(np.ascontiguousarray(Abar), h)
    St.exp2_prepare_inplace(EFF, h)
    out = np.full((n, npar), np.nan)
    St.exp2_step_stacked_into(EFF, np.ascontiguousarray(np.vstack([S0, Bk])), Bk1, out)
    assert np.all(np.isfinite(out))
    E, F1, F2 = R.ref_phi12(Abar, h)
    scale = n1(E) * n1(S0) + n1(F1) * n1(Bk) + n1(F2 / h) * (n1(Bk) + n1(Bk1))
    assert n1(out - expected) <= _exp_tol(Abar, h) * scale + TINY


@settings(max_examples=80, **SETTINGS)
@given(matrices_A(max_n=6))
def test_expm_matches_scipy(inp):
    A, h, _ = inp
    X = np.ascontiguousarray(h * A)
    got = L.expm(X)
    want = scipy.linalg.expm(X)
    assert np.all(np.isfinite(got))
    assert n1(got - want) <= _exp_tol(X, 1.0) * n1(want)


@settings(max_examples=30, **SETTINGS)
@given(matrices_A(max_n=4))
def test_phi1_of_singular_and_regular_A_satisfies_its_definition(inp):
    """``F = int_0^h exp(sA) ds`` solves ``A F = E - I`` (any A, singular too) and
    commutes with ``A``; checked without any reference implementation."""
    A, h, _ = inp
    n = A.shape[0]
    EF = _phi1(A, h)
    E, F = EF[:, :n], EF[:, n:]
    scale = max(n1(E) + 1.0, n1(A) * n1(F))
    tol = _exp_tol(A, h) * 10
    assert n1(A @ F - (E - np.eye(n))) <= tol * scale
    assert n1(A @ F - F @ A) <= tol * n1(A) * n1(F) + TINY


# ----------------------------------------------------------------------------- inference
@st.composite
def linear_problems(draw):
    n = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    t1 = 10.0 ** draw(st.floats(-1.0, 1.0))
    k = draw(st.integers(2, 6))
    return n, seed, t1, k


@settings(max_examples=15, **SETTINGS)
@given(linear_problems(), st.data())
def test_fisher_information_is_symmetric_psd_and_the_plain_sum(problem, data):
    n, seed, t1, k = problem
    m = pbsens.random_linear_model(n, seed=seed)
    t_eval = np.linspace(0.0, t1, k + 1)[1:]
    r = pbsens.sensitivities(m, t_span=(0.0, t1), t_eval=t_eval, method="exp")
    sigma = data.draw(arrays(np.float64, (k, n), elements=st.floats(1e-3, 1e3)))
    F = pbsens.fisher_information(r, sigma)
    assert F.shape == (n, n)
    assert np.array_equal(F, F.T)
    plain = np.einsum("kip,ki,kiq->pq", r.S, 1.0 / sigma**2, r.S)
    assert np.allclose(F, plain, rtol=1e-12, atol=1e-14 * np.abs(plain).max())
    w = np.linalg.eigvalsh(F)
    assert w.min() >= -1e-12 * max(w.max(), 0.0)


@settings(max_examples=10, **SETTINGS)
@given(linear_problems(), st.data())
def test_likelihood_gradient_matches_finite_differences(problem, data):
    """On ``x' = A x + p^2 + 1`` (constant Jacobians) the exponential method's S is exact
    up to the state solve, so the gradient must agree with central differences."""
    n, seed, t1, k = problem
    m = pbsens.random_linear_model(n, seed=seed)
    t = np.linspace(0.0, t1, k + 1)[1:]
    rng = np.random.default_rng(seed)
    traj = pbsens.solve_states(m, (0.0, t1), t_eval=t, rtol=1e-10, atol=1e-12)
    y = traj.x[np.isin(traj.t, t)]
    assert y.shape == (k, n)
    data_ = y + 0.1 * rng.standard_normal(y.shape)
    lik = pbsens.GaussianLikelihood(m, t, data_, 0.2, log=True, method="exp", rtol=1e-11, atol=1e-13)
    theta = np.log(m.p) + data.draw(arrays(np.float64, (n,), elements=st.floats(-0.5, 0.5)))
    ll, grad, _ = lik.evaluate(theta)
    fd = np.empty(n)
    for i in range(n):
        d = 1e-5 * max(1.0, abs(theta[i]))
        e = np.zeros(n)
        e[i] = d
        fd[i] = (lik.loglik(theta + e) - lik.loglik(theta - e)) / (2 * d)
    assert np.all(np.isfinite(grad))
    # the differences carry the state solver's error (rtol 1e-11) of the log-likelihood over d
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-6 * (1.0 + abs(ll)))


# ----------------------------------------------------------------------------- never NaN
_hostile = st.one_of(
    st.floats(-1e3, 1e3), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 1e300, -1e300, 5e-324]))


@st.composite
def sensitivity_calls(draw):
    """A random linear model, a valid (t, x) grid and options, then zero to two
    corruptions (non-finite, unsorted or missized arrays, bad options): about half the
    calls are valid and must be answered, the others must raise a named error."""
    n = draw(st.integers(1, 3))
    K = draw(st.integers(2, 8))
    t = draw(st.floats(-10.0, 10.0)) + np.cumsum(10.0 ** draw(arrays(np.float64, (K,), elements=st.floats(-8, 2))))
    x = draw(arrays(np.float64, (K, n), elements=st.floats(-1e6, 1e6)))
    kwargs = {"method": draw(st.sampled_from(["pbsr", "exp", "pbs", "exp2", "pbsr2"]))}
    if draw(st.booleans()):
        kwargs["p"] = draw(arrays(np.float64, (n,), elements=st.floats(-1e3, 1e3)))
    if draw(st.booleans()):
        kwargs["S0"] = draw(arrays(np.float64, (n, n), elements=st.floats(-1e3, 1e3)))
    if draw(st.booleans()):
        kwargs["interpolation"] = draw(st.sampled_from(["linear", "hermite"]))
    if draw(st.booleans()):
        kwargs["t_eval"] = t[sorted(draw(st.sets(st.integers(0, K - 1), min_size=1)))]
    for fault in draw(st.lists(st.sampled_from(
            ["t", "x", "x_shape", "p", "p_len", "S0", "S0_shape", "n_factor", "method", "t_eval",
             "interpolation", "K"]), max_size=2)):
        bad = draw(_hostile)
        if fault == "t":
            t = t.copy()
            t[draw(st.integers(0, len(t) - 1))] = bad
        elif fault == "x":
            x = x.copy()
            if x.size:
                x[draw(st.integers(0, x.shape[0] - 1)), draw(st.integers(0, x.shape[1] - 1))] = bad
        elif fault == "x_shape":
            x = draw(arrays(np.float64, (len(t), draw(st.integers(0, 4))), elements=st.floats(-1, 1)))
        elif fault == "p":
            kwargs["p"] = np.full(n, bad)
        elif fault == "p_len":
            kwargs["p"] = np.ones(draw(st.integers(0, 4)))
        elif fault == "S0":
            kwargs["S0"] = np.full((n, n), bad)
        elif fault == "S0_shape":
            kwargs["S0"] = np.ones((draw(st.integers(0, 4)), draw(st.integers(0, 4))))
        elif fault == "n_factor":
            kwargs["n_factor"] = bad
            if kwargs["method"] == "pbs":
                # method="pbs" has no bound on total work: n_factor=1e300 means ~9e18 PBS
                # sub-steps per interval and the call never returns (reported; the bound
                # belongs in the march). Exercise the other methods' validation here.
                kwargs["method"] = "pbsr"
        elif fault == "method":
            kwargs["method"] = draw(st.sampled_from(["bogus", "", None, 3, "PBSR"]))
        elif fault == "t_eval":
            kwargs["t_eval"] = np.array([bad])
        elif fault == "interpolation":
            kwargs["interpolation"] = draw(st.sampled_from(["dense", "cubic", None]))
        elif fault == "K":
            t, x = t[:1], x[:1]
    return n, draw(st.integers(0, 3)), t, x, kwargs


@settings(max_examples=150, **SETTINGS)
@given(sensitivity_calls())
def test_sensitivities_answers_or_raises_a_named_error_never_nan(call):
    n, seed, t, x, kwargs = call
    m = pbsens.random_linear_model(n, seed=seed)
    try:
        r = pbsens.sensitivities(m, (t, x), **kwargs)
    except pbsens.PbsensError as exc:
        assert str(exc)   # a message that says what was wrong
        event(f"raised {type(exc).__name__}")
        return
    event("answered")
    assert np.all(np.isfinite(r.S)), "sensitivities returned NaN/inf without an error"
    assert r.S.shape[1:] == (n, n)


@settings(max_examples=40, **SETTINGS)
@given(st.integers(1, 3), st.integers(0, 3), st.sampled_from(["pbsr", "exp", "exp2", "pbsr2"]),
       st.floats(-5.0, 5.0), arrays(np.float64, (3,), elements=st.floats(-300.0, 300.0)))
def test_sensitivities_on_valid_grids_match_the_exact_linear_solution(n, seed, method, log_t1, log_p):
    """Valid but extreme inputs (p up to 1e300, spans 1e-5 .. 1e5) give finite S equal
    to the closed form S(t) = int_0^t exp(sA) ds 2 diag(p), or a named error."""
    m = pbsens.random_linear_model(n, seed=seed)
    p = 10.0 ** log_p[:n]
    t1 = 10.0 ** log_t1
    t = np.linspace(0.0, t1, 6)
    A = m.meta["A"]
    x = np.array([np.ones(n)] * 6)   # A and B do not depend on x: any grid states will do
    try:
        r = pbsens.sensitivities(m, (t, x), method=method, p=p)
    except pbsens.PbsensError as exc:
        assert "NaN/inf" in str(exc) or "overflow" in str(exc).lower(), exc
        # only acceptable when the true answer is not representable
        F = R.ref_phi1(A, t1)[1]
        with np.errstate(over="ignore", invalid="ignore"):
            exact = F @ (2.0 * np.diag(p))
        assert not np.all(np.isfinite(exact)) or np.abs(exact).max() > 1e300
        event("raised for a non-representable answer")
        return
    event("answered")
    assert np.all(np.isfinite(r.S))
    if method in ("exp", "exp2"):   # exact for constant Jacobians
        F = R.ref_phi1(A, t1)[1]
        exact = F @ (2.0 * np.diag(p))
        assert n1(r.S[-1] - exact) <= 1e-9 * max(1.0, t1 * n1(A)) * n1(F) * n1(2.0 * np.diag(p))
