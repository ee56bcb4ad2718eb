"""State solve: exact t_eval merging, accuracy, and named errors on bad input."""
import numpy as np
import pytest

import pbsens
from conftest import make_model


def test_t_eval_points_are_in_grid_exactly(pka):
    te = np.linspace(0, 600, 201)[1:] - 0.123
    tr = pbsens.solve_states(pka, (0, 600), t_eval=te)
    assert np.all(np.diff(tr.t) > 0)
    assert np.array_equal(tr.t[tr.eval_index], te)
    assert set(te).issubset(set(tr.t))
    assert tr.x.shape == (tr.t.size, pka.n_states)
    # states at the merged points come from the dense output: compare to a tight solve
    tight = pbsens.solve_states(pka, (0, 600), t_eval=te, rtol=1e-10, atol=1e-12)
    err = np.abs(tr.x[tr.eval_index] - tight.x[tight.eval_index]).max()
    assert err < 1e-3 * np.abs(tight.x).max()


def test_analytic_solution(tmp_path):
    m = make_model(tmp_path, "decay", {"x": 2.0}, {"k": 0.7}, {"x": "-k*x"})
    te = np.linspace(0, 5, 11)
    for method in ("LSODA", "BDF", "Radau", "RK45"):
        tr = pbsens.solve_states(m, (0, 5), t_eval=te, method=method, rtol=1e-10, atol=1e-12)
        assert np.allclose(tr.x[tr.eval_index, 0], 2.0 * np.exp(-0.7 * te), rtol=1e-7)


@pytest.mark.parametrize("kwargs, name", [
    (dict(t_span=(5, 0)), "t_span"),
    (dict(t_span=(0, 0)), "t_span"),
    (dict(t_span=(0, np.nan)), "t_span"),
    (dict(t_span=(0, 10), x0=[0.0, 0.0]), "x0"),
    (dict(t_span=(0, 10), x0=[0.0, np.inf, 0.0]), "x0"),
    (dict(t_span=(0, 10), p=[1.0]), "'p'"),
    (dict(t_span=(0, 10), p=[np.nan, 1.0]), "'p'"),
    (dict(t_span=(0, 10), t_eval=[3.0, 1.0]), "t_eval"),
    (dict(t_span=(0, 10), t_eval=[1.0, 11.0]), "t_eval"),
    (dict(t_span=(0, 10), method="Euler"), "method"),
    (dict(t_span=(0, 10), rtol=-1.0), "rtol"),
])
def test_bad_input_names_the_argument(chua, kwargs, name):
    with pytest.raises(pbsens.PbsensError, match=name):
        pbsens.solve_states(chua, **kwargs)


def test_solver_failure_raises(tmp_path):
    m = make_model(tmp_path, "blowup", {"x": 1.0}, {"k": 1.0}, {"x": "k*x**2"})
    with pytest.raises(pbsens.SolverError, match="blowup"):
        pbsens.solve_states(m, (0, 2))
