"""Observables and their parameter sensitivities (METHOD.md section 8).

For a model with outputs ``y = h(t, x, p)`` the output sensitivities follow
from the state sensitivities ``S = dx/dp`` by the chain rule::

    S_y = dh/dx S + dh/dp

evaluated at each output time with the model's compiled ``out_jac_x_into`` and
``out_jac_p_into``. A model without outputs observes its states: ``y = x`` and
``S_y = S``.
"""
from __future__ import annotations

import numpy as np

from ..errors import PbsensError

__all__ = ["output_sensitivities", "n_observables", "observable_names", "check_result"]


def n_observables(model) -> int:
    """Number of observables: the model's outputs, or its states if it has none."""
    return model.n_outputs or model.n_states


def observable_names(model) -> list:
    """Names of the observables: ``model.output_names``, or the state names."""
    return list(model.output_names) if model.n_outputs else list(model.state_names)


def check_result(r, name="r"):
    """Validate a :class:`~pbsens.sensitivity.result.SensitivityResult`-like object; return ``(t, x, S)``."""
    try:
        t = np.asarray(r.t, dtype=np.float64)
        x = np.asarray(r.x, dtype=np.float64)
        S = np.asarray(r.S, dtype=np.float64)
    except AttributeError:
        raise PbsensError(f"{name!r} must be a SensitivityResult (with t, x, S), got {type(r).__name__}") from None
    except (TypeError, ValueError):
        raise PbsensError(f"{name!r}: t, x and S must be numeric arrays") from None
    if S.ndim != 3 or x.ndim != 2 or t.ndim != 1 or S.shape[:2] != x.shape or t.shape[0] != x.shape[0]:
        raise PbsensError(f"{name!r}: expected t (K,), x (K, nx), S (K, nx, np); got shapes "
                          f"{t.shape}, {x.shape}, {S.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(S))):
        raise PbsensError(f"{name!r} contains NaN or inf in x or S")
    return t, x, S


def output_sensitivities(model, r):
    """Observables and their sensitivities ``S_y = dh/dx S + dh/dp`` at the result's times.

    METHOD.md section 8. The columns of ``S_y`` are the columns of ``r.S``:
    all model parameters for the post-hoc methods, or the ``params`` subset of
    :func:`pbsens.sensitivity.forward.forward_sensitivities` (matched by ``r.param_names``).

    Parameters
    ----------
    model : Model
        The model ``r`` was computed for (its compiled outputs ``fns.out_into``,
        ``fns.out_jac_x_into``, ``fns.out_jac_p_into`` are used).
    r : SensitivityResult
        States ``r.x`` (K, nx), sensitivities ``r.S`` (K, nx, ns) and the
        parameters ``r.p`` (all model parameters) they were computed with.

    Returns
    -------
    y : ndarray (K, ny)
        Observables ``h(t_k, x_k, p)``; the states when the model has no outputs.
    S_y : ndarray (K, ny, ns)
        ``dy/dp`` for the parameters of ``r.S``'s columns; a copy of ``r.S`` when
        the model has no outputs.

    Raises
    ------
    PbsensError
        ``r`` does not fit the model (shapes, parameter names) or the outputs are
        NaN/inf.
    """
    t, x, S = check_result(r)
    if x.shape[1] != model.n_states:
        raise PbsensError(f"'r' has {x.shape[1]} states but model {model.name!r} has {model.n_states}")
    p = model.check_p(getattr(r, "p", None), "r.p")
    names = list(getattr(r, "param_names", None) or [])
    if names:
        if len(names) != S.shape[2]:
            raise PbsensError(f"'r': {len(names)} param_names for {S.shape[2]} columns of S")
        cols = model.param_index(names)
    elif S.shape[2] == model.n_params:
        cols = np.arange(model.n_params)
    else:
        raise PbsensError(f"'r': S has {S.shape[2]} parameter columns but no param_names to match them "
                          f"to the model's {model.n_params} parameters")
    if not model.n_outputs:
        return x.copy(), S.copy()
    ny, nx, np_ = model.n_outputs, model.n_states, model.n_params
    fns, c = model.fns, model.constants
    K = t.shape[0]
    y = np.empty((K, ny))
    Sy = np.empty((K, ny, S.shape[2]))
    yk = np.empty(ny)
    Hx = np.empty((ny, nx))
    Hp = np.empty((ny, np_))
    for k in range(K):
        xk = np.ascontiguousarray(x[k])
        tk = float(t[k])
        fns.out_into(tk, xk, p, c, yk)
        fns.out_jac_x_into(tk, xk, p, c, Hx)
        fns.out_jac_p_into(tk, xk, p, c, Hp)
        y[k] = yk
        Sy[k] = Hx @ S[k] + Hp[:, cols]
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(Sy))):
        k = int(np.argmax(~(np.all(np.isfinite(y), axis=1) & np.all(np.isfinite(Sy), axis=(1, 2)))))
        raise PbsensError(f"outputs of model {model.name!r} or their sensitivities are NaN/inf at "
                          f"t = {t[k]:.6g}")
    return y, Sy
