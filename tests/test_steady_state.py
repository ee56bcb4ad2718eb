"""Steady states and their sensitivities (pbsens.simulation.steady_state) against analytic
solutions and against forward sensitivities integrated to a long time."""
import numpy as np
import pytest

import pbsens
from pbsens.model.spec import ModelSpec
from pbsens.simulation.segments import simulate
from pbsens.simulation.steady_state import conservation_laws, steady_state


def _model(d):
    return pbsens.load_model(ModelSpec.from_dict(d))


@pytest.fixture(scope="module")
def prod_deg():
    # x' = a - b x,  y' = c x - d y:  x* = a/b, y* = c a / (b d)
    return _model({"name": "ss_prod_deg", "states": [{"name": "x", "initial": 0.0}, {"name": "y", "initial": 1.0}],
                   "parameters": [{"name": n, "value": v} for n, v in
                                  (("a", 2.0), ("b", 0.5), ("c", 1.5), ("d", 0.8))],
                   "odes": {"x": "a - b*x", "y": "c*x - d*y"}})


@pytest.fixture(scope="module")
def isomerisation():
    # A <=> B, k1, k2; total T = A0 + B0 conserved (A0 a parameter through the initial value)
    return _model({"name": "ss_isomerisation",
                   "states": [{"name": "A", "initial": "A0"}, {"name": "B", "initial": 0.5}],
                   "parameters": [{"name": n, "value": v} for n, v in (("k1", 2.0), ("k2", 0.7), ("A0", 3.0))],
                   "odes": {"A": "-k1*A + k2*B", "B": "k1*A - k2*B"}})


def _prod_deg_exact(p):
    a, b, c, d = p
    x, y = a / b, c * a / (b * d)
    S = np.array([[1 / b, -a / b**2, 0, 0],
                  [c / (b * d), -c * a / (b**2 * d), a / (b * d), -c * a / (b * d**2)]])
    return np.array([x, y]), S


def _isomerisation_exact(p, B0=0.5):
    k1, k2, A0 = p
    T = A0 + B0
    x = np.array([k2 * T / (k1 + k2), k1 * T / (k1 + k2)])
    dA_dk1 = -k2 * T / (k1 + k2) ** 2
    dA_dk2 = k1 * T / (k1 + k2) ** 2
    S = np.array([[dA_dk1, dA_dk2, k2 / (k1 + k2)],
                  [-dA_dk1, -dA_dk2, k1 / (k1 + k2)]])
    return x, S


@pytest.mark.parametrize("strategy", ["simulate", "newton"])
def test_production_degradation_matches_analytic(prod_deg, strategy):
    x, S, info = steady_state(prod_deg, strategy=strategy, return_info=True)
    xe, Se = _prod_deg_exact(prod_deg.p)
    assert np.allclose(x, xe, rtol=1e-9, atol=0)
    assert np.allclose(S, Se, rtol=1e-9, atol=1e-12)
    assert info["conservation_laws"] == 0
    assert info["strategy"] == strategy


@pytest.mark.parametrize("strategy", ["simulate", "newton"])
def test_conservation_law_matches_analytic(isomerisation, strategy):
    p = np.array([2.0, 0.7, 3.0])
    x, S, info = steady_state(isomerisation, p, strategy=strategy, return_info=True)
    xe, Se = _isomerisation_exact(p)
    assert info["conservation_laws"] == 1
    assert np.allclose(x, xe, rtol=1e-9, atol=0)
    assert np.allclose(S, Se, rtol=1e-8, atol=1e-12)
    # the total is that of the initial state, whatever the approach
    assert x.sum() == pytest.approx(3.5, rel=1e-12)


def test_conservation_law_uses_S0(isomerisation):
    # S0 says the initial state moves with k1 (as after a preequilibration): the total's derivative carries over
    p = isomerisation.p
    S0 = np.zeros((2, 3))
    S0[1, 0] = 2.0   # dB0/dk1
    _, S = steady_state(isomerisation, p, x0=[3.0, 0.5], S0=S0)
    k1, k2, _ = p
    _, Se = _isomerisation_exact(p)
    Se[:, 0] += 2.0 * np.array([k2, k1]) / (k1 + k2)
    Se[:, 2] = 0.0   # this S0 says the total does not depend on A0
    assert np.allclose(S, Se, rtol=1e-8, atol=1e-12)


def test_matches_long_forward_sensitivities(isomerisation, prod_deg):
    for m in (isomerisation, prod_deg):
        ref = pbsens.forward_sensitivities(m, (0.0, 200.0), t_eval=[200.0], rtol=1e-11, atol=1e-13)
        x, S = steady_state(m)
        assert np.allclose(x, ref.x[-1], rtol=1e-8, atol=1e-12)
        assert np.allclose(S, ref.S[-1], rtol=1e-6, atol=1e-9)


def test_nonlinear_with_conservation_matches_long_forward(tmp_path):
    # enzyme kinetics with two conserved totals (E + C and S + C + P + ...), P degraded back to S
    m = _model({"name": "ss_enzyme", "states": [{"name": n, "initial": v} for n, v in
                                               (("E", 1.0), ("Sb", 5.0), ("C", 0.0), ("P", 0.0))],
                "parameters": [{"name": n, "value": v} for n, v in
                               (("kf", 1.2), ("kr", 0.4), ("kc", 0.9), ("kd", 0.3))],
                "odes": {"E": "-kf*E*Sb + (kr + kc)*C", "Sb": "-kf*E*Sb + kr*C + kd*P",
                         "C": "kf*E*Sb - (kr + kc)*C", "P": "kc*C - kd*P"}})
    ref = pbsens.forward_sensitivities(m, (0.0, 400.0), t_eval=[400.0], rtol=1e-11, atol=1e-13)
    x, S, info = steady_state(m, return_info=True)
    assert info["conservation_laws"] == 2
    assert np.allclose(x, ref.x[-1], rtol=1e-8, atol=1e-11)
    assert np.allclose(S, ref.S[-1], rtol=1e-6, atol=1e-9)


def test_simulate_inf_output_is_the_steady_state(prod_deg):
    r = simulate(prod_deg, [0.0, 1.0, np.inf], method="fs")
    xe, Se = _prod_deg_exact(prod_deg.p)
    assert np.allclose(r.x[-1], xe, rtol=1e-9)
    assert np.allclose(r.S[-1], Se, rtol=1e-8, atol=1e-12)
    assert r.steady_state["conservation_laws"] == 0


def test_conservation_laws_detects_non_conservative_singularity():
    A = np.array([[0.0, 0.0], [1.0, -1.0]])     # x1 frozen, but df/dp moves it: not a conservation law
    B = np.array([[1.0], [0.0]])
    L, bad = conservation_laws(A, B)
    assert L.shape == (2, 1) and bad
    L, bad = conservation_laws(np.array([[-1.0, 1.0], [1.0, -1.0]]), np.array([[1.0], [-1.0]]))
    assert L.shape == (2, 1) and not bad


def test_unstable_model_raises_solver_error(tmp_path):
    m = _model({"name": "ss_growth", "states": [{"name": "x", "initial": 1.0}],
                "parameters": [{"name": "r", "value": 0.1}], "odes": {"x": "r*x"}})
    with pytest.raises(pbsens.SolverError, match="no steady state"):
        steady_state(m, max_time=1e3)


def test_bad_arguments_are_named(prod_deg):
    with pytest.raises(pbsens.PbsensError, match="'S0'"):
        steady_state(prod_deg, S0=np.zeros((3, 3)))
    with pytest.raises(pbsens.PbsensError, match="'strategy'"):
        steady_state(prod_deg, strategy="guess")
    with pytest.raises(pbsens.PbsensError, match="'x0'"):
        steady_state(prod_deg, x0=[1.0])


def test_newton_rejects_an_unstable_steady_state():
    # x' = x (x - 1)(2 - x): from x0 = 1.2 Newton goes to the unstable root 1, the flow to the stable root 2
    m = _model({"name": "ss_bistable", "states": [{"name": "x", "initial": 1.2}],
                "parameters": [{"name": "r", "value": 1.0}], "odes": {"x": "r*x*(x - 1)*(2 - x)"}})
    x, _, info = steady_state(m, strategy="newton", return_info=True)
    assert info["strategy"] == "simulate"
    assert x[0] == pytest.approx(2.0, rel=1e-10)


def test_approach_uses_the_solver_asked_for(prod_deg, monkeypatch):
    """The approach is integrated by the solver the caller names (default the compiled Rodas5P, not
    LSODA), and ``info`` says which and how many evaluations it took."""
    import pbsens.solvers
    seen = []
    real = pbsens.solvers.solve_states

    def spy(*args, **kwargs):
        seen.append(kwargs["method"])
        return real(*args, **kwargs)

    monkeypatch.setattr(pbsens.solvers, "solve_states", spy)
    xe, _ = _prod_deg_exact(prod_deg.p)
    for solver, expected in ((None, "rodas5p"), ("BDF", "BDF"), ("LSODA", "LSODA")):
        seen.clear()
        kw = {} if solver is None else {"solver": solver}
        x, _, info = steady_state(prod_deg, return_info=True, **kw)
        assert seen and set(seen) == {expected}
        assert info["solver"] == expected and info["nfev"] > 0
        assert np.allclose(x, xe, rtol=1e-9, atol=0)


def test_budget_overrun_names_the_solver_and_the_options(prod_deg):
    """More than ``max_nfev`` evaluations in the approach: a SolverError naming the solver used and the
    options to change, whichever solver (Rodas5P counts steps, scipy's solvers evaluations)."""
    for solver in ("rodas5p", "LSODA", "BDF"):
        with pytest.raises(pbsens.SolverError) as exc:
            steady_state(prod_deg, solver=solver, max_nfev=5)
        msg = str(exc.value)
        assert f"solver {solver!r}" in msg and "max_nfev = 5" in msg, msg
        for option in ("'max_nfev'", "'solver'", "'rtol'/'atol'", "steady_state_options", "strategy='newton'"):
            assert option in msg, (option, msg)
    # the budget counts the evaluations of all horizons together: exactly enough passes, one fewer fails
    _, _, info = steady_state(prod_deg, solver="LSODA", return_info=True)
    n = info["nfev"]
    assert steady_state(prod_deg, solver="LSODA", max_nfev=n, return_info=True)[2]["nfev"] == n
    with pytest.raises(pbsens.SolverError, match=f"max_nfev = {n - 1} "):
        steady_state(prod_deg, solver="LSODA", max_nfev=n - 1)
    with pytest.raises(pbsens.PbsensError, match="'max_nfev'"):
        steady_state(prod_deg, max_nfev=0)
    with pytest.raises(pbsens.PbsensError, match="'solver'"):
        steady_state(prod_deg, solver=None)


def test_simulate_passes_its_solver_to_the_steady_state(prod_deg):
    """``simulate(solver=...)`` approaches an ``inf`` output with that solver unless
    ``steady_state_options`` names another; without a solver, steady_state's default (Rodas5P)."""
    xe, Se = _prod_deg_exact(prod_deg.p)
    r = simulate(prod_deg, [0.0, 1.0, np.inf], method="exp2", solver="BDF")
    assert r.steady_state["solver"] == "BDF"
    assert np.allclose(r.x[-1], xe, rtol=1e-9) and np.allclose(r.S[-1], Se, rtol=1e-8, atol=1e-12)
    r = simulate(prod_deg, [0.0, 1.0, np.inf], method="exp2", solver="BDF",
                 steady_state_options={"solver": "Radau"})
    assert r.steady_state["solver"] == "Radau"
    assert simulate(prod_deg, [0.0, np.inf], method="fs").steady_state["solver"] == "rodas5p"
