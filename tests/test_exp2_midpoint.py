"""The exp2 midpoint correction (``sensitivities(..., midpoint=True)``, METHOD.md section 14).

* the kernel against a plain NumPy transcription of the formula (scipy's expm for the phi
  functions);
* for ``A = 0`` and ``B`` quadratic in t the corrected step is exact;
* on a forced linear model, PKA and CaMKII (Rodas5P, rtol 1e-5, atol 1e-6, 201 outputs), against
  tight forward sensitivities (scipy Radau, rtol 1e-10): the corrected march is much more accurate
  than the plain march on the solver's grid and its median error is no worse than LSODA + exp2's
  (the claim of docs/PERFORMANCE.md), on the solver's own grid (no sub-steps);
* where it applies (exp2, dense output, no error estimate) and bad values.
"""

import numpy as np
import pytest

import pbsens
from pbsens.errors import PbsensError
from pbsens.kernels.midpoint import exp2_correct_into
from conftest import make_model, tight_case
from reference import ref_phi123

CASES = {"PKA": 600.0, "CaMKII": 600.0}


def _ref_corrected(A0, A1, Am, B0, B1, Bm, Sa, h):
    """The corrected exp2 step written out (METHOD.md section 14): the residual's quadratic through
    the gap's ends and midpoint, integrated with ``G1 = F1 - F2/h``, ``G2 = F2/h`` (its linear part)
    and ``G3 = (4/h) F2 - (8/h^2) F3`` (the bump ``4 (s/h)(1 - s/h)``)."""
    Abar = 0.5 * (A0 + A1)
    E, F1, F2, F3 = ref_phi123(Abar, h)
    G1, G2, G3 = F1 - F2 / h, F2 / h, (4 / h) * F2 - (8 / h ** 2) * F3
    Se = E @ Sa + G1 @ B0 + G2 @ B1
    D = A1 - A0
    bump = (Bm - 0.5 * (B0 + B1)) + (Am - Abar) @ (0.5 * (Sa + Se)) - 0.25 * D @ (Se - Sa)
    return Se, Se + G3 @ bump - 0.5 * G1 @ (D @ Sa) + 0.5 * G2 @ (D @ Se)


@pytest.mark.parametrize("nx, np_", [(1, 1), (3, 2), (7, 5)])
def test_kernel_matches_the_formula(nx, np_):
    rng = np.random.default_rng(nx * 10 + np_)
    A0, A1, Am = (rng.normal(size=(nx, nx)) for _ in range(3))
    B0, B1, Bm = (rng.normal(size=(nx, np_)) for _ in range(3))
    Sa = rng.normal(size=(nx, np_))
    h = 0.37
    Se, want = _ref_corrected(A0, A1, Am, B0, B1, Bm, Sa, h)
    E, F1, F2, F3 = ref_phi123(0.5 * (A0 + A1), h)
    EG = np.ascontiguousarray(np.hstack([E, F1 - F2 / h, F2 / h]))
    EF3 = np.ascontiguousarray(np.hstack([E, F1, F2, F3]))
    got = Se.copy()
    work = [np.empty((nx, nx)), np.empty((nx, nx)), np.empty((2 * nx, np_)), np.empty((nx, np_)), np.empty((nx, np_))]
    exp2_correct_into(EG, EF3, h, A0, A1, Am, 0.5 * (A0 + A1), B0, B1, Bm, Sa, got, *work)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert not np.allclose(got, Se)          # the correction is not zero here


def test_exact_for_zero_jacobian_and_quadratic_forcing():
    """A = 0, B = (1, t, t^2) per column: S(t) = (t, t^2/2, t^3/3) from S(0) = 0. The plain exp2
    step (B linear between the ends) misses t^3/3 by h^3/6 on [0, h]; corrected, it is exact."""
    h = 0.8
    A = np.zeros((1, 1))
    B = [np.array([[1.0, t, t * t]]) for t in (0.0, h / 2, h)]
    Se, corrected = _ref_corrected(A, A, A, B[0], B[2], B[1], np.zeros((1, 3)), h)
    exact = np.array([[h, h * h / 2, h ** 3 / 3]])
    assert abs(Se[0, 2] - exact[0, 2]) > 0.1 * h ** 3          # the plain step is off
    np.testing.assert_allclose(corrected, exact, rtol=1e-13, atol=1e-15)
    EG = np.array([[1.0, h / 2, h / 2]])                   # E, G1, G2 of A = 0
    EF3 = np.array([[1.0, h, h * h / 2, h ** 3 / 6]])      # E, F1, F2, F3 of A = 0
    got = Se.copy()
    work = [np.empty((1, 1)), np.empty((1, 1)), np.empty((2, 3)), np.empty((1, 3)), np.empty((1, 3))]
    exp2_correct_into(EG, EF3, h, A, A, A, A, B[0], B[2], B[1], np.zeros((1, 3)), got, *work)
    np.testing.assert_allclose(got, exact, rtol=1e-13, atol=1e-15)


def _case(name):
    return tight_case(name, CASES[name])


def _exp2(m, ts, solver="rodas5p", **kw):
    return pbsens.sensitivities(m, t_span=(0.0, ts[-1]), t_eval=ts, method="exp2", solver=solver,
                                rtol=1e-5, atol=1e-6, **kw)


@pytest.mark.parametrize("name", list(CASES))
def test_models_corrected_on_the_solver_grid(name):
    m, ts, ref = _case(name)
    mid = _exp2(m, ts, midpoint=True)
    plain = _exp2(m, ts, substeps=1)
    split = _exp2(m, ts, midpoint=False)
    assert mid.options["midpoint"] is True and plain.options["midpoint"] is False
    # no sub-steps: the solver's grid, less the points that are alone between two outputs
    assert np.all(np.isin(mid.grid, plain.grid)) and np.all(np.isin(ts, mid.grid))
    assert split.grid.size > plain.grid.size
    E_mid, E_plain, E_split = (pbsens.relative_error(r, ref) for r in (mid, plain, split))
    assert np.median(E_mid) <= np.median(E_plain) / 2, (np.median(E_mid), np.median(E_plain))
    assert np.max(E_mid) <= np.max(E_plain) / 4, (np.max(E_mid), np.max(E_plain))
    assert np.median(E_mid) <= 1.5 * np.median(E_split), (np.median(E_mid), np.median(E_split))
    E_lsoda = pbsens.relative_error(_exp2(m, ts, solver="LSODA"), ref)
    assert np.median(E_mid) <= np.median(E_lsoda), (np.median(E_mid), np.median(E_lsoda))


def test_forced_linear_model_against_radau(tmp_path):
    """x' = -a x + b sin(t) + c t^2 on a loose Rodas5P solve (long steps): the corrected march is
    at least 5x more accurate than the plain one, at every output."""
    m = make_model(tmp_path, "lin_quad", {"x": 1.0}, {"a": 0.7, "b": 2.0, "c": 0.3},
                   {"x": "-a*x + b*sin(t) + c*t^2"})
    ts = np.linspace(0.0, 20.0, 11)
    kw = dict(t_span=(0.0, 20.0), t_eval=ts, method="exp2", solver="rodas5p", rtol=1e-6, atol=1e-8)
    ref = pbsens.forward_sensitivities(m, (0.0, 20.0), t_eval=ts, method="Radau", rtol=1e-11, atol=1e-13)
    mid = pbsens.sensitivities(m, midpoint=True, **kw)
    plain = pbsens.sensitivities(m, substeps=1, **kw)
    E_mid, E_plain = pbsens.relative_error(mid, ref)[1:], pbsens.relative_error(plain, ref)[1:]
    assert mid.options["midpoint"] is True
    assert np.all(E_mid <= E_plain / 5), np.c_[E_mid, E_plain]


def test_where_it_applies(pka):
    ts = np.linspace(0.0, 60.0, 31)
    kw = dict(t_span=(0.0, 60.0), t_eval=ts, solver="rodas5p", rtol=1e-5, atol=1e-6)
    assert pbsens.sensitivities(pka, method="exp2", midpoint=True, **kw).options["midpoint"] is True
    # other methods, sens_rtol or no long interval (substeps=1): the sub-step path as before
    for extra in (dict(method="exp"), dict(method="pbsr2"), dict(method="exp2", sens_rtol=1e-3)):
        assert pbsens.sensitivities(pka, midpoint=True, **kw, **extra).options["midpoint"] is False, extra
    # the error estimate keeps the correction: the same S as without it (its marches are corrected too)
    with_est = pbsens.sensitivities(pka, method="exp2", midpoint=True, estimate_error=True, **kw)
    assert with_est.options["midpoint"] is True
    assert np.array_equal(with_est.S, pbsens.sensitivities(pka, method="exp2", midpoint=True, **kw).S)
    a = pbsens.sensitivities(pka, method="exp2", midpoint=True, substeps=1, **kw)
    b = pbsens.sensitivities(pka, method="exp2", midpoint=False, substeps=1, **kw)
    assert a.options["midpoint"] is False and np.array_equal(a.S, b.S)
    # LSODA's trajectory has no accepted-step sizes to call a gap long unless substeps asks
    r = pbsens.sensitivities(pka, method="exp2", midpoint=True, **{**kw, "solver": "LSODA"})
    assert r.options["midpoint"] is False


@pytest.mark.parametrize("bad", ["yes", 1.5, [True]])
def test_bad_midpoint_names_the_argument(pka, bad):
    with pytest.raises(PbsensError, match="'midpoint'"):
        pbsens.sensitivities(pka, t_span=(0.0, 10.0), method="exp2", solver="rodas5p", midpoint=bad)
