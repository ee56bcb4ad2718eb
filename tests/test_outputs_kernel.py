"""pbsens.kernels.outputs: the model's outputs and output Jacobians at many times in one compiled
call (used by Problem.evaluate) equal the model's functions called one time at a time, for the
numba and the tape backend."""
import numpy as np
import pytest

from pbsens.kernels.outputs import bind_outputs
from pbsens.model.library import model_from_spec
from pbsens.model.spec import read_json_model
from conftest import make_model


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    d = tmp_path_factory.mktemp("outputs")
    make_model(d, "obs", {"x": 1.0, "z": 0.5}, {"a": 0.7, "b": 2.0, "s": 0.1},
               {"x": "-a*x + b*z", "z": "a*x - b*z*z"},
               outputs=[("y_x", "log(x + s*z)"), ("y_sum", "a*x*z + s*t"), ("sigma", "s*(1 + x^2)")])
    return read_json_model(d / "obs.json")


@pytest.mark.parametrize("backend", ["numba", "tape"])
@pytest.mark.parametrize("with_jacobians", [True, False])
def test_one_call_equals_per_time_calls(spec, backend, with_jacobians):
    m = model_from_spec(spec, backend=backend)
    assert m.backend == backend
    rng = np.random.default_rng(3)
    G, nx, np_, ny = 7, m.n_states, m.n_params, m.n_outputs
    t = np.sort(rng.uniform(0.0, 5.0, G))
    X = rng.uniform(0.2, 2.0, (G, nx))
    P = m.p * rng.uniform(0.5, 1.5, (G, np_))
    Y, JX, JP = np.full((G, ny), np.nan), np.full((G, ny, nx), np.nan), np.full((G, ny, np_), np.nan)
    bind_outputs(m.fns)(t, X, P, m.constants, Y, JX, JP, with_jacobians)
    for g in range(G):
        y, hx, hp = np.empty(ny), np.empty((ny, nx)), np.empty((ny, np_))
        m.fns.out_into(t[g], X[g], P[g], m.constants, y)
        m.fns.out_jac_x_into(t[g], X[g], P[g], m.constants, hx)
        m.fns.out_jac_p_into(t[g], X[g], P[g], m.constants, hp)
        np.testing.assert_array_equal(Y[g], y)
        if with_jacobians:
            np.testing.assert_array_equal(JX[g], hx)
            np.testing.assert_array_equal(JP[g], hp)
    if not with_jacobians:
        assert np.isnan(JX).all() and np.isnan(JP).all()     # not written
    # an independent check of one value: y_x = log(x + s z)
    s = P[:, m.param_names.index("s")]
    np.testing.assert_allclose(Y[:, 0], np.log(X[:, 0] + s * X[:, 1]), rtol=1e-14)
