"""``simulate(columns=)`` with a post-hoc method: the wanted columns of ``S`` are those of the
march over every column, bit for bit, across breakpoints (the next span starts from the full ``S``).

Why this is a test: exp2's sub-step march decides per solver gap whether to freeze the
exponentiated matrix from ``||S||`` over the columns it carries (METHOD.md section 13), so a
march started from ``S`` with the unwanted columns zeroed freezes other gaps than the full
march; on Boehm that moved the gradient by 1.1e-3 (tests/test_petab_rodas.py). Forward
sensitivities carry only the wanted columns (their own error control), so they agree to their
tolerance, not bit for bit."""
import numpy as np
import pytest

import pbsens
from pbsens.simulation.segments import simulate
from pbsens.model.spec import ModelSpec


@pytest.fixture(scope="module")
def model():
    # a nonlinear pair with a step input switching at t = c: two spans, A varying within each
    return pbsens.load_model(ModelSpec.from_dict({
        "name": "cols_switch", "states": [{"name": "x", "initial": 1.0}, {"name": "y", "initial": 0.2}],
        "parameters": [{"name": "k1", "value": 1.3}, {"name": "k2", "value": 0.7}, {"name": "a", "value": 3.0},
                       {"name": "c", "value": 1.7}, {"name": "k3", "value": 0.4}],
        "definitions": [{"name": "u", "expression": "piecewise(0, t < c, a)"}],
        "odes": [{"state": "x", "rhs": "u - k1*x*y - 0.1*x"}, {"state": "y", "rhs": "k2*x*y - k3*y**2"}]}))


@pytest.mark.parametrize("midpoint", [False, True])
def test_posthoc_columns_are_the_full_march_columns(model, midpoint):
    t = np.linspace(0.0, 6.0, 25)
    cols = np.array([0, 3])
    opts = dict(method="exp2", solver="rodas5p", rtol=1e-5, atol=1e-7, midpoint=midpoint)
    full = simulate(model, t, **opts)
    part = simulate(model, t, columns=cols, **opts)
    assert np.array_equal(part.S[:, :, cols], full.S[:, :, cols])
    others = np.setdiff1d(np.arange(model.n_params), cols)
    assert np.all(part.S[:, :, others] == 0.0)
    assert np.max(np.abs(full.S[:, :, others])) > 1e-3       # the zeroed columns are not zero by nature


def test_forward_columns_agree_to_tolerance(model):
    t = np.linspace(0.0, 6.0, 25)
    cols = np.array([0, 3])
    full = simulate(model, t, method="fs", solver="rodas5p", rtol=1e-9, atol=1e-11)
    part = simulate(model, t, method="fs", solver="rodas5p", rtol=1e-9, atol=1e-11, columns=cols)
    assert np.max(np.abs(part.S[:, :, cols] - full.S[:, :, cols])) < 1e-6 * np.max(np.abs(full.S[:, :, cols]))
