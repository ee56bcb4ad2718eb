"""The compiled Rodas5P state solver (pbsens.solvers.rosenbrock) against independent references.

References: the order conditions of Rosenbrock methods (Hairer & Wanner, Solving
ODEs II, Table IV.7.1) evaluated on the published coefficients; the matrix
exponential (scipy.linalg.expm) for linear systems; closed-form solutions;
published reference values of Robertson's problem and of Van der Pol's
equation (Mazzia & Magherini, Test Set for IVP Solvers, release 2.4, problems
ROBER and VDPOL); scipy's DOP853/Radau at tight tolerances.
"""
import json

import numpy as np
import pytest
import scipy.linalg
from scipy.integrate import solve_ivp

import pbsens
from pbsens.errors import PbsensError, SolverError
from pbsens.kernels import rosenbrock as K
from pbsens.solvers.rosenbrock import _bound, is_autonomous, solve_rosenbrock


def model(tmp_path, name, states, params, odes, definitions=()):
    d = {"name": name, "time": "t",
         "states": [{"name": k, "initial": v} for k, v in states.items()],
         "parameters": [{"name": k, "value": v} for k, v in params.items()],
         "definitions": [{"name": k, "expression": v} for k, v in definitions],
         "odes": [{"state": k, "rhs": v} for k, v in odes.items()]}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(d))
    return pbsens.load_model(path)


@pytest.fixture(scope="module")
def lotka(tmp_path_factory):
    return model(tmp_path_factory.mktemp("m"), "lotka", {"x": 1.0, "y": 0.5}, {"a": 1.5, "b": 1.0, "c": 3.0, "d": 1.0},
                 {"x": "a*x - b*x*y", "y": "-c*y + d*x*y"})


def lotka_exact(m, x0, t):
    a, b, c, d = m.p
    f = lambda _, z: [a * z[0] - b * z[0] * z[1], -c * z[1] + d * z[0] * z[1]]  # noqa: E731
    return solve_ivp(f, (0, t), x0, method="DOP853", rtol=1e-13, atol=1e-15).y[:, -1]


# ----------------------------------------------------------------------------- coefficients

def classical_form():
    """(alpha, Gamma, b, b_hat) from the transformed coefficients (Hairer & Wanner IV.7, (7.25))."""
    Ginv = np.eye(K.S) / K.GAMMA - K.C
    G = np.linalg.inv(Ginv)
    alpha = K.A @ G
    m = K.A[-1].copy()
    m[-1] = 1.0                    # x_new = u_8 + k_8
    m_hat = K.A[-1]                # embedded: u_8
    return alpha, G, m @ G, m_hat @ G


def order_condition_residuals(alpha, G, b):
    g = K.GAMMA
    al = np.tril(alpha, -1)
    be = np.tril(alpha + G, -1)
    a = al.sum(1)
    bp = be.sum(1)
    return np.array([
        b.sum() - 1,
        b @ bp - (0.5 - g),
        b @ a ** 2 - 1 / 3,
        b @ (be @ bp) - (1 / 6 - g + g * g),
        b @ a ** 3 - 1 / 4,
        b @ (a * (al @ bp)) - (1 / 8 - g / 3),
        b @ (be @ a ** 2) - (1 / 12 - g / 3),
        b @ (be @ (be @ bp)) - (1 / 24 - g / 2 + 1.5 * g * g - g ** 3),
    ])


def test_coefficients_satisfy_order_conditions_to_order_4():
    alpha, G, b, b_hat = classical_form()
    assert np.allclose(np.diag(G), K.GAMMA, rtol=1e-13)
    assert np.allclose(alpha.sum(1), K.C_NODES, atol=1e-13)   # c_i = sum_j alpha_ij
    assert np.allclose(G.sum(1), K.D, atol=1e-13)             # d_i = gamma_i = sum_j gamma_ij
    assert np.abs(order_condition_residuals(alpha, G, b)).max() < 1e-13
    assert np.abs(order_condition_residuals(alpha, G, b_hat)).max() < 1e-13
    # a wrong coefficient is detected (the check can fail)
    A_bad = K.A.copy()
    A_bad[3, 1] *= 1.001
    assert np.abs(order_condition_residuals(A_bad @ G, G, b)).max() > 1e-6


def _one_step(m, x0, h):
    addr, aut = _bound(m)
    xn, err, Dk = np.empty(m.n_states), np.empty(m.n_states), np.empty((3, m.n_states))
    assert K.rodas5p_step(addr, 0.0, np.asarray(x0, float), m.p, m.constants, h, aut, xn, err, Dk)
    return xn, err, Dk


def slopes(hs, errs):
    return np.diff(np.log(errs)) / np.diff(np.log(hs))


def test_observed_orders_of_step_error_estimate_and_dense_output(lotka):
    """One step: local error O(h^6) (order 5), estimate O(h^5), dense output O(h^5) (order 4)."""
    x0 = np.array([1.0, 0.5])
    hs = np.array([0.2, 0.1, 0.05, 0.025])
    loc, est, est_gap, dense = [], [], [], []
    for h in hs:
        xn, err, Dk = _one_step(lotka, x0, h)
        exact = lotka_exact(lotka, x0, h)
        loc.append(np.abs(xn - exact).max())
        est.append(np.abs(err).max())
        emb = xn - err                               # the embedded order-4 solution
        est_gap.append(np.abs((exact - emb) - err).max() / np.abs(err).max())
        out = np.empty((1, 2))
        K.dense_eval(np.array([0.0, h]), np.array([x0, xn]), Dk[None], np.array([0.5 * h]), out)
        dense.append(np.abs(out[0] - lotka_exact(lotka, x0, 0.5 * h)).max())
    assert np.all((slopes(hs, loc) > 5.6) & (slopes(hs, loc) < 6.8)), slopes(hs, loc)
    assert np.all((slopes(hs, est) > 4.6) & (slopes(hs, est) < 5.6)), slopes(hs, est)
    assert np.all((slopes(hs, dense) > 4.5) & (slopes(hs, dense) < 5.8)), slopes(hs, dense)
    # the estimate is the embedded solution's error to leading order
    assert est_gap[-1] < 0.1 and est_gap[-1] < est_gap[0]


@pytest.mark.parametrize("nonautonomous", [False, True])
def test_observed_global_order_5(tmp_path, lotka, nonautonomous):
    if nonautonomous:   # x' = -x^2 + cos(t) x ... with df/dt from the finite difference
        m = model(tmp_path, "forced", {"x": 1.0, "y": 0.0}, {"w": 2.0},
                  {"x": "y", "y": "-x - 0.1*x**3 + cos(w*t)"})
        f = lambda t, z: [z[1], -z[0] - 0.1 * z[0] ** 3 + np.cos(2.0 * t)]  # noqa: E731
        ref = solve_ivp(f, (0, 4), [1.0, 0.0], method="DOP853", rtol=1e-13, atol=1e-15).y[:, -1]
        assert not is_autonomous(m)
        Ns = [10, 20, 40]
    else:
        m = lotka
        ref = lotka_exact(m, [1.0, 0.5], 4.0)
        assert is_autonomous(m)
        Ns = [40, 80, 160]
    errs = []
    for N in Ns:
        h = 4.0 / N
        tr = solve_rosenbrock(m, (0, 4), rtol=1e3, atol=1e3, first_step=h, max_step=h)
        assert tr.stats["n_steps"] == N and tr.stats["n_rejected"] == 0
        errs.append(np.abs(tr.x[-1] - ref).max())
    s = slopes(4.0 / np.array(Ns), errs)
    assert np.all((s > 4.5) & (s < 5.8)), (s, errs)


# ----------------------------------------------------------------------------- accuracy

def test_linear_system_against_matrix_exponential():
    m = pbsens.random_linear_model(6, seed=3)
    A = m.meta["A"]
    b = m.p ** 2 + 1
    te = np.linspace(0, 20, 41)
    tr = solve_rosenbrock(m, (0, 20), t_eval=te, rtol=1e-10, atol=1e-12)
    M = np.zeros((7, 7))
    M[:6, :6] = A
    M[:6, 6] = b
    z0 = np.append(m.x0, 1.0)
    exact = np.array([(scipy.linalg.expm(M * t) @ z0)[:6] for t in te])
    x = tr.x[tr.eval_index]
    assert np.abs(x - exact).max() < 1e-8 * np.abs(exact).max()
    # and at the solver's own grid points
    ex_grid = np.array([(scipy.linalg.expm(M * t) @ z0)[:6] for t in tr.t])
    assert np.abs(tr.x - ex_grid).max() < 1e-8 * np.abs(exact).max()


def test_robertson_against_published_reference(tmp_path):
    """ROBER of the Test Set for IVP Solvers (Mazzia & Magherini), reference at t = 1e11."""
    m = model(tmp_path, "rober", {"y1": 1.0, "y2": 0.0, "y3": 0.0}, {"k1": 0.04, "k2": 1e4, "k3": 3e7},
              {"y1": "-k1*y1 + k2*y2*y3", "y2": "k1*y1 - k2*y2*y3 - k3*y2**2", "y3": "k3*y2**2"})
    ref = np.array([0.2083340149701255e-7, 0.8333360770334713e-13, 0.9999999791665050])
    tr = solve_rosenbrock(m, (0, 1e11), rtol=1e-8, atol=[1e-10, 1e-16, 1e-10])
    rel = np.abs(tr.x[-1] - ref) / ref
    assert rel.max() < 1e-4, rel       # measured 1.6e-5 (the reference is given to 16 digits)
    assert tr.stats["n_steps"] < 2000


def test_van_der_pol_mu_1000_against_published_reference(tmp_path):
    """VDPOL of the Test Set (mu = 1000 in Lienard time, eps = 1/mu^2 = 1e-6), reference at t = 2."""
    m = model(tmp_path, "vdpol", {"y1": 2.0, "y2": 0.0}, {"eps": 1e-6},
              {"y1": "y2", "y2": "((1 - y1**2)*y2 - y1)/eps"})
    ref = np.array([0.1706167732170483e1, -0.8928097010247975e0])
    errs = []
    for rtol in (1e-6, 1e-9):
        tr = solve_rosenbrock(m, (0, 2), rtol=rtol, atol=rtol)
        errs.append(np.abs(tr.x[-1] - ref).max())
    assert errs[0] < 1e-5      # measured 5.6e-7
    assert errs[1] < 1e-8      # measured 1.0e-9
    assert errs[1] < errs[0]


def test_van_der_pol_dense_output_against_radau(tmp_path):
    """VDPOL (mu = 1000) at times inside steps (dense output) against scipy's Radau at rtol 1e-10.

    (In the original time scaling, y'' = mu ((1 - y^2) y' - y), scipy's Radau does
    not finish [0, 3000] at rtol 1e-12 within 10 minutes; the Lienard scaling is the
    same problem and well conditioned for it.)
    """
    eps = 1e-6
    m = model(tmp_path, "vdpol2", {"y1": 2.0, "y2": 0.0}, {"eps": eps},
              {"y1": "y2", "y2": "((1 - y1**2)*y2 - y1)/eps"})
    # away from the fast transitions (near t = 0.807 and 1.614), where a time shift of
    # the jump within the tolerance is a large state difference
    te = np.concatenate([np.linspace(0.02, 0.78, 20), np.linspace(0.84, 1.58, 20), np.linspace(1.65, 2.0, 8)])
    f = lambda t, y: [y[1], ((1 - y[0] ** 2) * y[1] - y[0]) / eps]  # noqa: E731
    jac = lambda t, y: [[0, 1], [(-2 * y[0] * y[1] - 1) / eps, (1 - y[0] ** 2) / eps]]  # noqa: E731
    ref = solve_ivp(f, (0, 2), [2.0, 0.0], method="Radau", jac=jac, rtol=1e-10, atol=1e-10, t_eval=te).y.T
    tr = solve_rosenbrock(m, (0, 2), t_eval=te, rtol=1e-7, atol=1e-7)
    x = tr.x[tr.eval_index]
    err = np.abs(x - ref) / (1e-3 + np.abs(ref))
    assert err.max() < 1e-4, err.max()
    inside = np.array([v not in set(tr.sol.ts) for v in te])
    assert inside.sum() > 40          # nearly all output times are interpolated, not stepped to


@pytest.fixture(scope="module")
def tight_refs():
    out = {}
    for name in ("PKA", "CaMKII"):
        m = pbsens.load_model(name)
        te = np.linspace(0, 600, 201)
        r = pbsens.solve_states(m, (0, 600), t_eval=te, method="Radau", rtol=1e-10, atol=1e-12)
        out[name] = (m, te, r.x[r.eval_index])
    return out


@pytest.mark.parametrize("name", ["PKA", "CaMKII"])
def test_paper_models_within_tolerance_of_tight_reference(tight_refs, name):
    m, te, xr = tight_refs[name]
    tr = solve_rosenbrock(m, (0, 600), t_eval=te, rtol=1e-5, atol=1e-6)
    x = tr.x[tr.eval_index]
    scaled = np.abs(x - xr) / (1e-6 + 1e-5 * np.abs(xr))
    assert scaled.max() < 3.0, scaled.max()
    # the grid: accepted steps with t_eval merged in exactly
    assert np.array_equal(tr.t[tr.eval_index], te)
    assert np.all(np.diff(tr.t) > 0)
    assert set(tr.sol.ts).issubset(set(tr.t))
    # dense output at arbitrary times, scalar and vector
    tq = np.array([0.37, 123.456, 599.9])
    r = pbsens.solve_states(m, (0, 600), t_eval=tq, method="Radau", rtol=1e-10, atol=1e-12)
    xq = tr.sol(tq)
    assert xq.shape == (m.n_states, 3)
    assert np.all(np.abs(xq.T - r.x[r.eval_index]) / (1e-6 + 1e-5 * np.abs(r.x[r.eval_index])) < 3.0)
    assert np.array_equal(tr.sol(123.456), xq[:, 1])
    assert np.array_equal(tr.sol(tr.sol.ts[3]), tr.x[np.searchsorted(tr.t, tr.sol.ts[3])])


def test_counts_are_consistent(pka, camkii):
    for m, extra in ((pka, 0), (camkii, 1)):
        tr = solve_rosenbrock(m, (0, 600), rtol=1e-7, atol=1e-9)
        s = tr.stats
        attempts = s["n_steps"] + s["n_rejected"]
        assert is_autonomous(m) == (extra == 0)
        # Jacobian once per accepted state (kept on rejection), one LU and 8 solves per attempt
        assert s["njev"] == s["n_steps"]
        assert s["nlu"] == attempts
        assert s["n_solves"] == 8 * attempts
        # f at the start (+ df/dt difference) per Jacobian, 7 more per attempt, 1 for the initial step
        assert s["nfev"] == s["njev"] * (1 + extra) + 7 * attempts + 1
        assert tr.sol.ts.size == s["n_steps"] + 1


def test_buffer_growth_does_not_change_the_result(tmp_path, monkeypatch):
    from pbsens.solvers import rosenbrock as front
    m = model(tmp_path, "osc", {"x": 1.0, "y": 0.0}, {"w": 3.0}, {"x": "w*y", "y": "-w*x"})
    big = solve_rosenbrock(m, (0, 50), rtol=1e-9, atol=1e-12)
    assert big.stats["n_steps"] > 40
    monkeypatch.setattr(front, "_INITIAL_CAPACITY", 1)     # 1 -> 2 -> 4 ... doublings
    small = solve_rosenbrock(m, (0, 50), rtol=1e-9, atol=1e-12)
    assert np.array_equal(big.t, small.t) and np.array_equal(big.x, small.x)
    tt = np.linspace(0, 50, 7)
    assert np.abs(big.x[-1] - [np.cos(150.0), -np.sin(150.0)]).max() < 1e-6
    assert np.array_equal(big.sol(tt), small.sol(tt))


# ----------------------------------------------------------------------------- stops and tolerances

@pytest.mark.parametrize("rhs", ["piecewise(1, t < 2.5, -2)", "piecewise(-2, t >= 2.5, 1)"])
def test_tstops_are_hit_exactly_and_never_crossed(tmp_path, rhs):
    m = model(tmp_path, "ramp", {"x": 0.0}, {"k": 1.0}, {"x": f"k*({rhs})"})
    assert not is_autonomous(m)
    te = np.array([1.0, 2.5, 4.0, 5.0])
    exact = np.where(te < 2.5, te, 2.5 - 2 * (te - 2.5))
    tr = solve_rosenbrock(m, (0, 5), t_eval=te, tstops=[2.5])
    assert 2.5 in tr.sol.ts                      # a step ends exactly at the stop
    k = np.searchsorted(tr.sol.ts, 2.5)
    assert tr.sol.ts[k] == 2.5 and np.all((tr.sol.ts[:-1] >= 2.5) | (tr.sol.ts[1:] <= 2.5))
    # both sides are polynomials of degree 1: exact to rounding when no step sees the other side
    assert np.abs(tr.x[tr.eval_index, 0] - exact).max() < 1e-11
    assert tr.stats["n_rejected"] == 0
    # without the stop the solver steps across the jump: rejections or a larger error
    free = solve_rosenbrock(m, (0, 5), t_eval=te)
    assert free.stats["n_rejected"] > 0 or np.abs(free.x[free.eval_index, 0] - exact).max() > 1e-9


def test_several_tstops_with_an_input_pulse(tmp_path):
    m = model(tmp_path, "pulse", {"x": 0.0}, {"k": 1.0}, {"x": "-k*x + u"},
              definitions=[("u", "piecewise(1, t >= 1 and t < 2, 0)")])
    te = np.array([0.5, 1.0, 1.5, 2.0, 3.0, 4.0])
    e1 = 1 - np.exp(-1.0)
    exact = np.select([te <= 1, te <= 2], [0.0 * te, 1 - np.exp(-(te - 1))], e1 * np.exp(-(te - 2)))
    tr = solve_rosenbrock(m, (0, 4), t_eval=te, tstops=[1.0, 2.0], rtol=1e-10, atol=1e-12)
    assert {1.0, 2.0} <= set(tr.sol.ts)
    assert np.abs(tr.x[tr.eval_index, 0] - exact).max() < 1e-9


def test_per_state_atol_is_honoured(tmp_path):
    # a unit-size decay and a rotation of amplitude 1e-7, below a scalar atol of 1e-6
    m = model(tmp_path, "scales", {"z": 1.0, "y1": 1e-7, "y2": 0.0}, {"w": 1.0},
              {"z": "-0.1*z", "y1": "w*y2", "y2": "-w*y1"})
    t = np.linspace(0, 20, 21)
    exact = 1e-7 * np.array([np.cos(t), -np.sin(t)]).T

    def err(atol):
        tr = solve_rosenbrock(m, (0, 20), t_eval=t, rtol=1e-6, atol=atol)
        return np.abs(tr.x[tr.eval_index, 1:] - exact).max() / 1e-7, tr

    e_vec, tr_vec = err([1e-6, 1e-14, 1e-14])
    e_scalar, tr_scalar = err(1e-6)
    assert e_vec < 1e-5                      # the small states are resolved (measured 2.7e-7)
    assert e_scalar > 1e-2                   # with the scalar atol they are not (measured 0.46)
    assert tr_vec.stats["n_steps"] > tr_scalar.stats["n_steps"]
    # a per-state rtol works the same way
    tr = solve_rosenbrock(m, (0, 20), t_eval=t, rtol=[1e-6, 1e-9, 1e-9], atol=[1e-6, 1e-17, 1e-17])
    assert np.abs(tr.x[tr.eval_index, 1:] - exact).max() / 1e-7 < 1e-6


# ----------------------------------------------------------------------------- failures

def test_step_size_underflow_at_a_blow_up(tmp_path):
    m = model(tmp_path, "blowup", {"x": 1.0}, {"a": 1.0}, {"x": "a*x**2"})    # x = 1/(1 - t)
    with pytest.raises(SolverError, match=r"blowup.*failed at t = 1\.0.*step size .* below the resolution"):
        solve_rosenbrock(m, (0, 2))


def test_non_finite_right_hand_side_at_a_state(tmp_path):
    m = model(tmp_path, "nanstart", {"x": 1.0}, {"a": 2.0}, {"x": "log(x - a)"})
    with pytest.raises(SolverError, match=r"failed at t = 0 .*right-hand side or its Jacobian is NaN/inf"):
        solve_rosenbrock(m, (0, 1))


def test_non_finite_trial_steps(tmp_path):
    m = model(tmp_path, "sqrtneg", {"x": 1.0}, {"a": 1.0}, {"x": "-a*sqrt(x)"})   # x = (1 - t/2)^2, then NaN
    with pytest.raises(SolverError, match=r"failed at t = 1\.99.*every trial step produced NaN/inf"):
        solve_rosenbrock(m, (0, 4))


def test_max_steps(pka):
    with pytest.raises(SolverError, match=r"'max_steps' = 3 steps taken \(3 accepted, 0 rejected\)"):
        solve_rosenbrock(pka, (0, 600), max_steps=3)


def test_singular_iteration_matrix(tmp_path):
    # J = diag(2^k / (h gamma)), k = 0..5: W = I/(h gamma) - J is exactly singular at h, h/2, ..., h/32
    h = 0.01
    lam = 2.0 ** np.arange(6) * (1.0 / (h * K.GAMMA))
    m = model(tmp_path, "singular", {f"x{k}": 1.0 for k in range(6)}, {f"l{k}": lam[k] for k in range(6)},
              {f"x{k}": f"l{k}*x{k}" for k in range(6)})
    with pytest.raises(SolverError, match=r"iteration matrix I/\(h gamma\) - J is singular"):
        solve_rosenbrock(m, (0, 1), first_step=h)


@pytest.mark.parametrize("kwargs, name", [
    ({"t_span": (1, 0)}, "t_span"),
    ({"t_eval": [0, 700]}, "t_eval"),
    ({"rtol": -1.0}, "rtol"),
    ({"rtol": 1e-17}, "rtol"),
    ({"atol": [1e-6, 1e-6]}, "atol"),
    ({"atol": float("nan")}, "atol"),
    ({"tstops": [100, 50]}, "tstops"),
    ({"tstops": [700]}, "tstops"),
    ({"first_step": 0.0}, "first_step"),
    ({"first_step": 1000.0}, "first_step"),
    ({"max_step": 0}, "max_step"),
    ({"max_step": float("nan")}, "max_step"),
    ({"max_steps": 0}, "max_steps"),
    ({"max_steps": 2.5}, "max_steps"),
    ({"x0": [1.0, 2.0]}, "x0"),
    ({"p": [1.0]}, "p"),
])
def test_bad_arguments_name_the_argument(pka, kwargs, name):
    args = {"t_span": (0, 600)}
    args.update(kwargs)
    with pytest.raises(PbsensError, match=name):
        solve_rosenbrock(pka, **args)


def test_dense_output_rejects_times_outside(pka):
    tr = solve_rosenbrock(pka, (0, 10))
    with pytest.raises(PbsensError, match="'t' must lie in"):
        tr.sol(11.0)
    with pytest.raises(PbsensError, match="NaN"):
        tr.sol([1.0, float("nan")])
    assert solve_rosenbrock(pka, (0, 10), dense_output=False).sol is None


def test_trajectory_fields(pka):
    te = np.linspace(1, 9, 5)
    p = pka.p * 1.1
    tr = solve_rosenbrock(pka, (0, 10), t_eval=te, p=p, rtol=1e-6, atol=1e-8)
    assert tr.method == "rodas5p" and tr.rtol == 1e-6 and tr.atol == 1e-8
    assert np.array_equal(tr.p, p) and np.array_equal(tr.x0, pka.initial_state(p))
    assert np.array_equal(tr.t_eval, te) and tr.x.shape == (tr.t.size, pka.n_states)
    assert tr.t[0] == 0 and tr.t[-1] == 10
    # the result feeds the sensitivity methods like a scipy trajectory
    r = pbsens.sensitivities(pka, tr, method="exp2")
    assert np.all(np.isfinite(r.S))
