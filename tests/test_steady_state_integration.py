"""Steady-state sensitivities by integration where the Newton form A S = -B is not defined
(pbsens.simulation.steady_state, sensitivity_mode), and the columns a PEtab problem needs (Isensee_JCB2018:
parameters fixed at 0 switch reactions off, leaving null directions that are laws for the estimated ones)."""
from pathlib import Path

import numpy as np
import pytest

import pbsens
from pbsens.model.spec import ModelSpec
from pbsens.simulation.steady_state import steady_state

ISENSEE = Path(__file__).parent / "data" / "petab" / "Isensee_JCB2018" / "Isensee_JCB2018.yaml"


def _model(d):
    return pbsens.load_model(ModelSpec.from_dict(d))


@pytest.fixture(scope="module")
def param_law():
    # x' = -a x, z' = b x: A = [[-a, 0], [b, 0]] is singular with left null vector (b, a), a law
    # b x + a z = b x0 that depends on the parameters, so L^T S is not L^T S0: z_ss = b x0 / a
    return _model({"name": "ss_param_law", "states": [{"name": "x", "initial": "x0"}, {"name": "z", "initial": 0.0}],
                   "parameters": [{"name": n, "value": v} for n, v in (("a", 0.7), ("b", 1.3), ("x0", 2.0))],
                   "odes": {"x": "-a*x", "z": "b*x"}})


@pytest.fixture(scope="module")
def switched_off():
    # z' = -c x z with c = 0: z is frozen (a law for a, not for c: dS_c/dt -> -x_ss z, no limit)
    return _model({"name": "ss_switched_off", "states": [{"name": "x", "initial": 0.0}, {"name": "z", "initial": 1.0}],
                   "parameters": [{"name": n, "value": v} for n, v in (("a", 0.7), ("c", 0.0))],
                   "odes": {"x": "1 - a*x", "z": "-c*x*z"}})


def test_parameter_dependent_law_is_integrated(param_law):
    a, b, x0 = param_law.p
    exact = np.array([[0.0, 0.0, 0.0], [-b * x0 / a**2, x0 / a, b / a]])
    x, S, info = steady_state(param_law, return_info=True)
    assert np.allclose(x, [0.0, b * x0 / a], atol=1e-8)
    assert info["sensitivities"] == "integration" and "not conservation laws" in info["note"]
    assert info["sensitivity_time"] > 0 and info["sensitivity_nfev"] > 0
    assert np.abs(S - exact).max() <= 1e-6 * np.abs(exact).max()
    # the Newton form alone would keep L^T S = L^T S0 (wrong here): it refuses instead
    with pytest.raises(pbsens.SolverError, match="not defined by A S = -B"):
        steady_state(param_law, sensitivity_mode="newton")


def test_integrate_mode_matches_newton_where_both_apply():
    m = _model({"name": "ss_iso_int", "states": [{"name": "A", "initial": "A0"}, {"name": "B", "initial": 0.5}],
                "parameters": [{"name": n, "value": v} for n, v in (("k1", 2.0), ("k2", 0.7), ("A0", 3.0))],
                "odes": {"A": "-k1*A + k2*B", "B": "k1*A - k2*B"}})
    _, Sn, i1 = steady_state(m, return_info=True)
    _, Si, i2 = steady_state(m, return_info=True, sensitivity_mode="integrate")
    assert i1["sensitivities"] == "newton" and i2["sensitivities"] == "integration"
    assert np.abs(Si - Sn).max() <= 1e-6 * np.abs(Sn).max()


def test_columns_leave_out_parameters_that_switch_reactions_off(switched_off):
    a = switched_off.p[0]
    x, S, info = steady_state(switched_off, columns=[0], return_info=True)
    assert info["sensitivities"] == "newton"
    assert np.allclose(S, [[-1 / a**2, 0.0], [0.0, 0.0]], rtol=1e-8)
    x, S2 = steady_state(switched_off, columns=np.array([True, False]))
    assert np.array_equal(S, S2)
    # with c's column the limit does not exist (S_zc grows like t): S is that of the approach at the
    # horizon end T where the states settled, said in the note; analytic: x(T) = (1 - e^{-aT}) / a and
    # S_zc(T) = -int_0^T x dt = -(T/a - (1 - e^{-aT})/a^2), S_xa(T) = T e^{-aT}/a - (1 - e^{-aT})/a^2
    x, S, info = steady_state(switched_off, max_time=1e6, return_info=True)
    assert info["sensitivities"] == "finite-time"
    assert "parameter 'c'" in info["note"] and "finite-time simulation" in info["note"]
    T = info["sensitivity_time"]
    assert T >= info["time"]
    e = np.exp(-a * T)
    np.testing.assert_allclose(S[1, 1], -(T / a - (1 - e) / a**2), rtol=1e-6)
    np.testing.assert_allclose(S[0, 0], T * e / a - (1 - e) / a**2, rtol=1e-6)
    assert S[0, 1] == 0.0 and S[1, 0] == 0.0


def test_bad_columns_and_mode_are_named(switched_off):
    with pytest.raises(pbsens.PbsensError, match="'columns'"):
        steady_state(switched_off, columns=[5])
    with pytest.raises(pbsens.PbsensError, match="'columns'"):
        steady_state(switched_off, columns=np.array([True]))
    with pytest.raises(pbsens.PbsensError, match="'columns'"):
        steady_state(switched_off, columns=["a"])
    with pytest.raises(pbsens.PbsensError, match="'sensitivity_mode'"):
        steady_state(switched_off, sensitivity_mode="guess")


def test_isensee_files_are_small():
    size = sum(f.stat().st_size for f in ISENSEE.parent.iterdir())
    assert size < 1_000_000


@pytest.mark.slow
def test_isensee_gradient_against_finite_differences():
    """Isensee_JCB2018 (benchmark collection 4d20850, BSD-3): the preequilibration's Jacobian is singular
    in directions that fixed zero parameters (kp_AC, kf_PDE_Csub) leave free; the gradient (exp2, fs and
    exp2 with integrated steady-state sensitivities) against central differences of the llh at tight
    tolerances, at the nominal parameters shifted by 0.1, on a few parameters (all 46: see the report)."""
    pr = pbsens.petab.load(ISENSEE)
    th = pr.nominal_theta() + 0.1
    ids = ["KD_cAMP", "kf_RII_C_2__RII_2", "kdeg_cAMP_free", "ks_AC_cAMP", "s_pRII_global", "kf_cAMP"]
    ks = [pr.parameter_ids.index(i) for i in ids]
    tight = dict(solver="rodas5p", rtol=1e-12, atol=1e-14)
    h = 1e-4
    fd = np.array([(pr.llh(th + h * np.eye(pr.dim)[k], **tight) - pr.llh(th - h * np.eye(pr.dim)[k], **tight))
                   / (2 * h) for k in ks])
    for method, opts, tol in (("exp2", {}, 1e-2), ("fs", {}, 1e-4),
                              ("exp2", {"steady_state_options": {"sensitivity_mode": "integrate"}}, 1e-2)):
        r = pr.evaluate(th, method=method, **opts)
        err = np.abs(r.gradient[ks] - fd).max() / np.abs(fd).max()
        assert err <= tol, (method, opts, err)
        if opts:
            assert any("integrated" in n for n in r.notes)
