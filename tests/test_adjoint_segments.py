"""The adjoint across breakpoints, time events and steady states (issue #40):
``pbsens.simulation.adjoint`` against the forward post-hoc march (the same segments and grids: equal
to rounding) and against tight forward sensitivities / central finite differences (the method's own
error), on small models whose stop times, jumps and steady states depend on the parameters.

The functional is linear in the states at the output times, ``J = sum_i c_i . x(t_i)``, so
``dJ/dp = sum_i c_i^T S(t_i)`` with any ``S`` from a forward method.
"""
import numpy as np
import pytest

import pbsens
from pbsens.model.spec import ModelSpec
from pbsens.simulation.adjoint import backward, forward_states, steady_state_adjoint
from pbsens.simulation.segments import simulate
from pbsens.simulation.steady_state import steady_state


def _model(d):
    return pbsens.load_model(ModelSpec.from_dict(d))


@pytest.fixture(scope="module")
def jumpy():
    """Two nonlinear states; a step input switching at ``c`` (a breakpoint), a bolus at ``td`` that
    rescales ``x`` with ``h`` and adds ``D t`` (G_x, G_p and G_t all non-trivial), a bolus at
    ``t = 0`` (fires at the start), and ``x0`` depending on ``p``."""
    return _model({"name": "adj_jumpy",
                   "states": [{"name": "x", "initial": "x0"}, {"name": "y", "initial": 0.2}],
                   "parameters": [{"name": "k", "value": 0.7}, {"name": "a", "value": 1.6},
                                  {"name": "c", "value": 1.3}, {"name": "h", "value": 0.6},
                                  {"name": "D", "value": 0.4}, {"name": "td", "value": 2.7},
                                  {"name": "x0", "value": 1.2}, {"name": "K", "value": 0.5},
                                  {"name": "t_on", "value": 0.0}],
                   "definitions": [{"name": "u", "expression": "piecewise(0, t < c, a)"}],
                   "odes": {"x": "u - k*x*y/(K + x)", "y": "k*x*y/(K + x) - 0.3*y + 0.1"},
                   "events": [{"name": "bolus", "time": "td", "assignments": {"x": "h*x + D*t", "y": "y + D"}},
                              {"name": "start", "time": "t_on", "assignments": {"y": "y + 0.5*D"},
                               "initial_value": False}]})


T_OUT = np.array([0.0, 0.5, 1.3, 2.0, 2.7, 2.7, 3.5, 5.0])     # outputs at both stops, a repeated time


def _c(model, n):
    return np.random.default_rng(3).normal(size=(n, model.n_states))


def _adjoint(model, te, p, c, **kw):
    tape = forward_states(model, te, p, model.initial_state(p), **kw)
    lam0, g = backward(model, tape, c)
    S0 = model.initial_sensitivity(p)
    return g + S0.T @ lam0, tape


def _forward(model, te, p, c, **kw):
    r = simulate(model, te, p, **kw)
    return np.einsum("ki,kij->j", c, r.S), r


@pytest.mark.parametrize("opts", [{}, {"substeps": 4, "midpoint": False}, {"substeps": 1}])
def test_jumps_are_the_transpose_of_the_forward_march(jumpy, opts):
    """Same segments, grids and jumps as ``simulate(method="exp2")``: equal to rounding."""
    p = jumpy.p
    c = _c(jumpy, T_OUT.size)
    g_fwd, r = _forward(jumpy, T_OUT, p, c, method="exp2", solver="rodas5p", rtol=1e-6, atol=1e-9,
                        **({"freeze": 0.0} if opts.get("midpoint") is False else {}), **opts)
    assert [n for n, _ in r.events] == ["start", "bolus"] and r.breakpoints.size == 1
    g_adj, tape = _adjoint(jumpy, T_OUT, p, c, solver="rodas5p", rtol=1e-6, atol=1e-9, **opts)
    np.testing.assert_array_equal(tape.x, r.x)
    np.testing.assert_allclose(g_adj, g_fwd, rtol=0, atol=1e-10 * np.abs(g_fwd).max())


def test_jumps_against_tight_forward_sensitivities_and_finite_differences(jumpy):
    p = jumpy.p.copy()
    c = _c(jumpy, T_OUT.size)
    g_ref, _ = _forward(jumpy, T_OUT, p, c, method="fs", solver="rodas5p", rtol=1e-12, atol=1e-14)
    assert np.all(np.abs(g_ref[[2, 3, 4, 5, 6]]) > 1e-3)   # c, h, D, td, x0: the stops and jumps matter
    g_adj, _ = _adjoint(jumpy, T_OUT, p, c, solver="rodas5p", rtol=1e-10, atol=1e-12)
    g_exp2, _ = _forward(jumpy, T_OUT, p, c, method="exp2", solver="rodas5p", rtol=1e-10, atol=1e-12)
    e_adj = np.abs(g_adj - g_ref).max() / np.abs(g_ref).max()
    e_fwd = np.abs(g_exp2 - g_ref).max() / np.abs(g_ref).max()
    assert e_adj < 1e-5 and e_adj <= 1.01 * e_fwd + 1e-13, (e_adj, e_fwd)

    # finite differences: outputs away from the stops (an output at a stop time is not differentiable in
    # that time: the one-sided S, module docstring of pbsens.simulation.segments)
    t_fd = np.array([0.0, 0.5, 2.0, 3.5, 5.0])
    c = _c(jumpy, t_fd.size)
    g_adj, _ = _adjoint(jumpy, t_fd, p, c, solver="rodas5p", rtol=1e-10, atol=1e-12)

    def J(pp):
        r = simulate(jumpy, t_fd, pp, sensitivities=False, solver="rodas5p", rtol=1e-12, atol=1e-14)
        return float(np.sum(c * r.x))

    fd = np.empty(p.size)
    for j in range(p.size):
        d = 1e-5 * max(abs(p[j]), 1.0)
        pp, pm = p.copy(), p.copy()
        pp[j] += d
        pm[j] -= d
        fd[j] = (J(pp) - J(pm)) / (2 * d)
    # t_on = 0 <= t0: the start event's time does not enter (a one-sided case, as the forward code)
    keep = np.arange(p.size) != jumpy.param_names.index("t_on")
    np.testing.assert_allclose(g_adj[keep], fd[keep], rtol=0, atol=1e-5 * np.abs(fd).max())


# --------------------------------------------------------------------------- steady states
@pytest.fixture(scope="module")
def conserved():
    """``A <-> B`` with ``A + B = a0`` conserved (a singular Jacobian; the steady state depends on
    ``a0`` through the law) and a third state ``z`` driven by ``B``, no law."""
    return _model({"name": "adj_conserved",
                   "states": [{"name": "A", "initial": "a0"}, {"name": "B", "initial": 0.0},
                              {"name": "z", "initial": 0.3}],
                   "parameters": [{"name": "k1", "value": 0.9}, {"name": "k2", "value": 0.4},
                                  {"name": "a0", "value": 2.0}, {"name": "kz", "value": 1.5},
                                  {"name": "dz", "value": 0.7}],
                   "odes": {"A": "-k1*A + k2*B", "B": "k1*A - k2*B", "z": "kz*B/(1 + B) - dz*z"}})


def test_steady_state_adjoint_is_the_transpose_of_the_newton_form(conserved):
    m = conserved
    p = m.p
    x_ss, S_ss, info = steady_state(m, p, return_info=True)
    assert info["conservation_laws"] == 1 and info["sensitivities"] == "newton"
    lam = np.array([0.3, -1.1, 0.8])
    lam_start, g = steady_state_adjoint(m, info["time"], x_ss, p, lam)
    S0 = m.initial_sensitivity(p)
    np.testing.assert_allclose(g + S0.T @ lam_start, S_ss.T @ lam, rtol=1e-10, atol=1e-12)
    # the analytic steady state: A = k2 a0 / (k1 + k2), B = k1 a0 / (k1 + k2), z = kz B / ((1 + B) dz)
    eps = 1e-6

    def xss(q):
        k1, k2, a0, kz, dz = q
        B = k1 * a0 / (k1 + k2)
        return np.array([k2 * a0 / (k1 + k2), B, kz * B / ((1 + B) * dz)])

    fd = np.array([(lam @ xss(p + eps * e) - lam @ xss(p - eps * e)) / (2 * eps) for e in np.eye(p.size)])
    np.testing.assert_allclose(g + S0.T @ lam_start, fd, rtol=1e-7, atol=1e-9)


def test_inf_output_after_a_simulation(conserved):
    m = conserved
    p = m.p
    te = np.array([0.5, 2.0, np.inf])
    c = _c(m, te.size)
    g_fwd, r = _forward(m, te, p, c, method="exp2", solver="rodas5p", rtol=1e-8, atol=1e-10)
    g_adj, tape = _adjoint(m, te, p, c, solver="rodas5p", rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(tape.x, r.x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(g_adj, g_fwd, rtol=0, atol=1e-9 * np.abs(g_fwd).max())
    assert np.abs(g_fwd).max() > 0.1
