"""The state-solver package: pbsens's stepping loop against scipy's driver, stop times,
the guard against solves that make no progress, and the solver registry."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import pbsens
from conftest import make_model
from pbsens.solvers import SOLVERS, Trajectory


@pytest.fixture(scope="module")
def decay(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("decay"), "decay", {"x": 2.0}, {"k": 0.7}, {"x": "-k*x"})


@pytest.mark.parametrize("method", ["LSODA", "BDF", "RK45"])
def test_same_steps_as_scipy_driver(pka, method):
    """Without stops the loop takes exactly scipy's steps (solve_ivp is the independent driver)."""
    p, c, nx = pka.p, pka.constants, pka.n_states

    def fun(t, x):
        out = np.empty(nx)
        pka.fns.rhs_into(float(t), np.ascontiguousarray(x), p, c, out)
        return out

    def jac(t, x):
        out = np.empty((nx, nx))
        pka.fns.jac_x_into(float(t), np.ascontiguousarray(x), p, c, out)
        return out

    kw = {"jac": jac} if method != "RK45" else {}
    ref = solve_ivp(fun, (0.0, 600.0), pka.initial_state(p), method=method, rtol=1e-5, atol=1e-6, **kw)
    assert ref.status == 0
    tr = pbsens.solve_states(pka, (0, 600), method=method, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(tr.t, ref.t)
    np.testing.assert_allclose(tr.x, ref.y.T, rtol=1e-12, atol=1e-15)
    assert tr.stats["nfev"] == ref.nfev and tr.stats["nlu"] == ref.nlu
    # dense output between the steps agrees with scipy's too
    tm = 0.5 * (ref.t[1:] + ref.t[:-1])
    ref_dense = solve_ivp(fun, (0.0, 600.0), pka.initial_state(p), method=method, rtol=1e-5, atol=1e-6,
                          dense_output=True, **kw).sol
    np.testing.assert_allclose(tr.sol(tm), ref_dense(tm), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("method", ["LSODA", "BDF", "Radau", "RK45", "DOP853"])
def test_tstops_are_hit_exactly(decay, method):
    stops = [1.0 / 3.0, 2.5, np.pi]
    te = np.linspace(0, 5, 11)
    tr = pbsens.solve_states(decay, (0, 5), t_eval=te, method=method, rtol=1e-10, atol=1e-12,
                             tstops=[2.5, np.pi, 1.0 / 3.0, 2.5, 0.0, 5.0])  # unsorted, repeated, ends
    np.testing.assert_array_equal(tr.tstops, stops)
    assert np.all(np.diff(tr.t) > 0)
    for s in stops:
        assert s in tr.t  # bitwise: a step ended there
    np.testing.assert_array_equal(tr.t[tr.eval_index], te)
    np.testing.assert_allclose(tr.x[:, 0], 2.0 * np.exp(-0.7 * tr.t), rtol=1e-7)
    # the dense output is continuous across the stops and accurate on both sides
    around = np.concatenate([[s - 1e-3, s, s + 1e-3] for s in stops])
    np.testing.assert_allclose(tr.sol(around)[0], 2.0 * np.exp(-0.7 * around), rtol=1e-7)


def test_tstops_without_t_eval_are_step_ends(decay):
    free = pbsens.solve_states(decay, (0, 5), method="BDF")
    tr = pbsens.solve_states(decay, (0, 5), method="BDF", tstops=[1.2345])
    assert 1.2345 not in free.t and 1.2345 in tr.t
    assert tr.stats["n_steps"] == tr.t.size - 1


def test_tstop_makes_a_jump_in_the_input_exact(tmp_path):
    """x' = 1 for t < 1, 0 after (a step input): stopping at 1 gives x(2) = 1 to the tolerance."""
    m = make_model(tmp_path, "ramp", {"x": 0.0}, {"c": 1.0}, {"x": "c*(1 - heaviside(t - 1))"})
    tr = pbsens.solve_states(m, (0, 2), t_eval=[2.0], method="RK45", rtol=1e-10, atol=1e-12, tstops=[1.0])
    assert 1.0 in tr.t
    assert abs(tr.x[-1, 0] - 1.0) < 1e-9


@pytest.mark.parametrize("tstops", [[np.nan], [-1.0], [6.0], ["a"]])
def test_bad_tstops_name_the_argument(decay, tstops):
    with pytest.raises(pbsens.PbsensError, match="tstops"):
        pbsens.solve_states(decay, (0, 5), tstops=tstops)


def test_guard_max_nfev(pka):
    with pytest.raises(pbsens.SolverError, match="PKA.*max_nfev = 50"):
        pbsens.solve_states(pka, (0, 600), max_nfev=50)
    with pytest.raises(pbsens.PbsensError, match="max_nfev"):
        pbsens.solve_states(pka, (0, 600), max_nfev=0)


def test_guard_stalled_lsoda(tmp_path):
    """scipy's LSODA loops at one time when the solution is about to overflow; the guard stops it."""
    m = make_model(tmp_path, "blowup", {"x": 1.0}, {"k": 1.0}, {"x": "k*x**2"})
    with pytest.raises(pbsens.SolverError, match="blowup.*LSODA.*stopped advancing"):
        pbsens.solve_states(m, (0, 2), method="LSODA")


def test_bad_solver_option_is_a_pbsens_error(decay):
    with pytest.raises(pbsens.PbsensError, match="max_step"):
        pbsens.solve_states(decay, (0, 5), method="BDF", max_step=-1.0)


def test_registry_calls_a_plugged_solver(decay, monkeypatch):
    """A solver is one function in SOLVERS; solve_states validates before calling it."""
    seen = {}

    def solve_euler(model, t_span, t_eval=None, p=None, x0=None, rtol=1e-5, atol=1e-6, tstops=None, n=2000):
        seen.update(t_span=t_span, t_eval=t_eval, p=p, x0=x0, tstops=tstops, n=n)
        t = np.linspace(*t_span, n + 1)
        x = np.empty((t.size, x0.size))
        x[0] = x0
        for i in range(n):
            x[i + 1] = x[i] * (1 - p[0] * (t[i + 1] - t[i]))
        return Trajectory(t=t, x=x, p=p, x0=x0, method="euler", rtol=rtol, atol=atol,
                          stats={"nfev": n, "njev": 0, "nlu": 0, "n_steps": n})

    monkeypatch.setitem(SOLVERS, "euler", solve_euler)
    tr = pbsens.solve_states(decay, [0, 5], method="euler", tstops=[5.0, 2.0], n=1000)
    assert tr.method == "euler" and tr.t.size == 1001
    assert seen["t_span"] == (0.0, 5.0) and seen["n"] == 1000
    np.testing.assert_array_equal(seen["tstops"], [2.0])
    np.testing.assert_array_equal(seen["x0"], [2.0])
    assert abs(tr.x[-1, 0] - 2.0 * np.exp(-3.5)) < 1e-2
    with pytest.raises(pbsens.PbsensError, match="max_nfev.*euler"):
        pbsens.solve_states(decay, (0, 5), method="euler", max_nfev=10)
    # post-hoc sensitivities run on the plugged solver's grid
    r = pbsens.sensitivities(decay, t_span=(0, 5), t_eval=[5.0], solver="euler", method="exp")
    assert abs(r.S[-1, 0, 0] - (-5.0 * 2.0 * np.exp(-3.5))) < 2e-2
