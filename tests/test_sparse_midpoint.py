"""The exp2 midpoint correction on the sparse path (``linalg="sparse"``, METHOD.md sections 12, 14).

* the CSR kernel against the dense kernel (itself tested against the formula in
  test_exp2_midpoint.py) on random sparse matrices;
* intervals that take the action of the exponential: two exp2 half steps through the
  midpoint extrapolated with the whole step, against a NumPy transcription (scipy's expm);
* intervals that take the dense step: the same numbers as the dense path's corrected march;
* against tight forward sensitivities on a stiff network: much more accurate than the plain
  march on the solver's grid, no less accurate than the sub-steps it replaces.
"""
import numpy as np
import pytest
import scipy.sparse as sp

import pbsens
from pbsens.sensitivity import sparse as sparse_path
from pbsens.kernels.midpoint import exp2_correct_into, exp2_correct_sparse_into
from pbsens.model.mass_action import random_mass_action_model
from pbsens.sensitivity.posthoc import sensitivities
from pbsens.solvers.refine import lone_points, midpoint_plan
from reference import ref_exp2_step, ref_phi123, rel_max


@pytest.mark.parametrize("nx, np_, density", [(1, 1, 1.0), (6, 3, 0.4), (25, 7, 0.1)])
def test_sparse_kernel_equals_dense_kernel(nx, np_, density):
    rng = np.random.default_rng(nx)
    pattern = sp.random(nx, nx, density=density, random_state=nx, format="csr")
    pattern.setdiag(1.0)
    pattern = pattern.tocsr()
    pattern.sort_indices()
    Ap, Ai = pattern.indptr.astype(np.int64), pattern.indices.astype(np.int64)
    vals = [rng.normal(size=Ai.size) for _ in range(3)]
    dense = [sp.csr_matrix((v, Ai, Ap), shape=(nx, nx)).toarray() for v in vals]
    A0, A1, Am = dense
    Abar_v = 0.5 * (vals[0] + vals[1])
    B0, B1, Bm = (rng.normal(size=(nx, np_)) for _ in range(3))
    Sa = rng.normal(size=(nx, np_))
    h = 0.6
    E, F1, F2, F3 = ref_phi123(0.5 * (A0 + A1), h)
    EG = np.ascontiguousarray(np.hstack([E, F1 - F2 / h, F2 / h]))
    EF3 = np.ascontiguousarray(np.hstack([E, F1, F2, F3]))
    Se = E @ Sa + EG[:, nx:2 * nx] @ B0 + EG[:, 2 * nx:] @ B1
    want = Se.copy()
    exp2_correct_into(EG, EF3, h, A0, A1, Am, 0.5 * (A0 + A1), B0, B1, Bm, Sa, want, np.empty((nx, nx)),
                      np.empty((nx, nx)), np.empty((2 * nx, np_)), np.empty((nx, np_)), np.empty((nx, np_)))
    got = Se.copy()
    exp2_correct_sparse_into(EG, EF3, h, Ap, Ai, vals[0], vals[1], vals[2], Abar_v, B0, B1, Bm, Sa, got,
                             np.empty(Ai.size), np.empty((2 * nx, np_)), np.empty((nx, np_)), np.empty((nx, np_)))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    assert not np.allclose(got, Se)


@pytest.fixture(scope="module")
def stiff():
    """A 30-species network on a long span, solved loosely by the compiled Rodas5P (long steps)."""
    m = random_mass_action_model(30, n_classes=3, seed=2)
    ts = np.linspace(0.0, 200.0, 21)
    tr = pbsens.solve_states(m, (0.0, 200.0), t_eval=ts, method="rodas5p", rtol=1e-5, atol=1e-8)
    return m, ts, tr


def _ref_extrapolated_march(m, t, X, p, S, x_mid, mid_index):
    """NumPy reference: exp2 steps; on the corrected intervals two half steps through the midpoint,
    extrapolated with the whole step, ``S_half + (S_half - S_whole)/3``."""
    out = [S]
    for k in range(t.size - 1):
        h = t[k + 1] - t[k]
        Aa, Ae = m.jac_x(t[k], X[k], p), m.jac_x(t[k + 1], X[k + 1], p)
        Ba, Be = m.jac_p(t[k], X[k], p), m.jac_p(t[k + 1], X[k + 1], p)
        whole = ref_exp2_step(Aa, Ae, Ba, Be, h, S)
        if mid_index[k] >= 0:
            tm, xm = 0.5 * (t[k] + t[k + 1]), x_mid[mid_index[k]]
            Am, Bm = m.jac_x(tm, xm, p), m.jac_p(tm, xm, p)
            half = ref_exp2_step(Am, Ae, Bm, Be, h / 2, ref_exp2_step(Aa, Am, Ba, Bm, h / 2, S))
            S = half + (half - whole) / 3.0
        else:
            S = whole
        out.append(S)
    return np.array(out)


def test_action_intervals_are_extrapolated_half_steps(stiff, monkeypatch):
    """Without the dense step every corrected interval is two exp2 half steps through the midpoint
    (state from the dense output), extrapolated with the whole step."""
    monkeypatch.setattr(sparse_path, "DENSE_STEP_MAX_STATES", 0)
    m, ts, tr = stiff
    r = sensitivities(m, tr, method="exp2", linalg="sparse", t_eval=ts)
    st = sparse_path.runner(m).stats
    assert r.options["midpoint"] is True and st[2] == 0 and st[3] > 0
    # the march's grid: the solver's, less the points alone between two outputs (tested in test_refine)
    oi = np.full(tr.t.size, -1)
    oi[np.searchsorted(tr.t, ts)] = np.arange(ts.size)
    keep = ~lone_points(tr.t, oi, tr.sol.ts)
    t, X = tr.t[keep], tr.x[keep]
    assert np.array_equal(r.grid, t) and t.size < tr.t.size
    x_mid, mid_index = midpoint_plan(t, tr.sol, 4, X, (tr.rtol, tr.atol))   # the long and the bent intervals
    assert st[3] == (mid_index >= 0).sum()
    S_ref = _ref_extrapolated_march(m, t, X, tr.p, m.initial_sensitivity(tr.p), x_mid, mid_index)
    want = S_ref[np.searchsorted(t, ts)]
    assert rel_max(r.S, want) < 1e-10
    plain = sensitivities(m, tr, method="exp2", linalg="sparse", t_eval=ts, substeps=1)
    assert rel_max(plain.S, want) > 1e-6          # the extrapolation changed something


def test_dense_step_intervals_match_the_dense_path(stiff):
    m, ts, tr = stiff
    rs = sensitivities(m, tr, method="exp2", linalg="sparse", t_eval=ts)
    st = sparse_path.runner(m).stats.copy()
    rd = sensitivities(m, tr, method="exp2", linalg="dense", t_eval=ts)
    assert rs.options["midpoint"] is True and rd.options["midpoint"] is True
    assert st[2] > 0 and st[3] > 0
    if st[2] == tr.t.size - 1:          # every interval took the dense step: the same arithmetic
        assert rel_max(rs.S, rd.S) < 1e-10
    else:                               # some took the extrapolated half steps: close, not equal
        assert rel_max(rs.S, rd.S) < 1e-3


def test_accuracy_against_tight_forward_sensitivities(stiff):
    """The corrected sparse march on the solver's own grid against FS (Radau, rtol 1e-10): at least
    2x below the plain march's median error and no worse than the 4 sub-steps it replaces."""
    m, ts, tr = stiff
    ref = pbsens.forward_sensitivities(m, (0.0, 200.0), t_eval=ts, method="Radau", rtol=1e-10, atol=1e-13)
    mid = sensitivities(m, tr, method="exp2", linalg="sparse", t_eval=ts)
    plain = sensitivities(m, tr, method="exp2", linalg="sparse", t_eval=ts, substeps=1)
    split = sensitivities(m, tr, method="exp2", linalg="sparse", t_eval=ts, midpoint=False)
    assert mid.options["midpoint"] is True and split.options["midpoint"] is False
    E_mid, E_plain, E_split = (pbsens.relative_error(r, ref)[1:] for r in (mid, plain, split))
    assert np.median(E_mid) <= np.median(E_plain) / 2, (np.median(E_mid), np.median(E_plain))
    assert np.median(E_mid) <= 1.5 * np.median(E_split), (np.median(E_mid), np.median(E_split))
