"""The compiled :class:`Model`: names, default values and numba callables."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..errors import ModelError, PbsensError

__all__ = ["Model", "CompiledFunctions", "check_model"]

_FN_NAMES = ("rhs_into", "jac_x_into", "jac_p_into", "jacs_into", "x0_into", "dx0_dp_into",
             "out_into", "out_jac_x_into", "out_jac_p_into", "jac_x_data_into", "jac_p_data_into")


class CompiledFunctions(SimpleNamespace):
    """The ``*_into`` numba functions of a model (signatures in ``kernels.signatures``)."""

    @classmethod
    def from_module(cls, module):
        return cls(**{n: getattr(module, n) for n in _FN_NAMES})


class Model:
    """An ODE model ``x' = f(t, x, p)`` with compiled right-hand side and Jacobians.

    Do not construct directly: use :func:`pbsens.load_model` or
    :func:`pbsens.random_linear_model`.

    Attributes
    ----------
    name : str
    state_names, param_names, output_names : list of str
    n_states, n_params, n_outputs : int
    x0, p : ndarray
        Default initial state and parameters (fresh copies on every access).
    rhs, jac_x, jac_p : numba dispatchers
        ``f(t, x, p)``, ``A = df/dx`` and ``B = df/dp``, from symbolic differentiation;
        callable from Python and from ``@njit`` code.
    fns : CompiledFunctions
        The non-allocating ``*_into(t, x, p, c, out)`` forms used by the kernels.
    constants : ndarray
        The ``c`` argument of ``fns`` (empty for models compiled by numba; the programs
        of a ``backend="tape"`` model).
    backend : str
        ``"numba"`` (generated, compiled per model), ``"tape"`` (programs in
        ``constants`` run by a generic interpreter) or ``"generic"`` (random linear).
    jac_x_pattern, jac_p_pattern : (indptr, indices) of int64 arrays
        CSR structure (rows = states) of the structural non-zeros of ``A`` and ``B``;
        ``fns.jac_x_data_into(t, x, p, c, data)`` / ``fns.jac_p_data_into`` fill their
        values in that order.
    spec : ModelSpec or None
        The plain-data description the model was compiled from.
    meta : dict
        Extra information from the model file (experiments, tolerances, notes).
    """

    def __init__(self, name, state_names, param_names, p, fns, *, constants=None, output_names=(),
                 spec=None, title="", meta=None, user_fns=None, patterns=None, backend="numba"):
        self.name = name
        self.title = title
        self.state_names = list(state_names)
        self.param_names = list(param_names)
        self.output_names = list(output_names)
        self.spec = spec
        self.meta = dict(meta or {})
        self.fns = fns
        self.constants = np.ascontiguousarray(constants if constants is not None else np.empty(0),
                                              dtype=np.float64)
        self._p = np.array(p, dtype=np.float64)
        self.backend = backend
        if patterns is None:   # dense: every entry is a structural non-zero
            patterns = (_dense_pattern(len(self.state_names), len(self.state_names)),
                        _dense_pattern(len(self.state_names), len(self.param_names)))
        self.jac_x_pattern, self.jac_p_pattern = (
            tuple(np.ascontiguousarray(a, dtype=np.int64) for a in pat) for pat in patterns)
        self._user_fns = user_fns  # (rhs, jac_x, jac_p) dispatchers, or None: built on demand
        self._x0 = self.initial_state(self._p)
        if not np.all(np.isfinite(self._x0)):
            bad = [self.state_names[i] for i in np.flatnonzero(~np.isfinite(self._x0))]
            raise ModelError(f"model {name!r}: the initial value of state(s) {', '.join(map(repr, bad))} is not "
                             "finite at the default parameters")
        if self.events:
            self.discontinuities   # noqa: B018 - an event the solver cannot execute fails at load, not mid-solve

    # ----------------------------------------------------------------- sizes
    @property
    def n_states(self) -> int:
        return len(self.state_names)

    @property
    def n_params(self) -> int:
        return len(self.param_names)

    @property
    def n_outputs(self) -> int:
        return len(self.output_names)

    @property
    def x0(self) -> np.ndarray:
        """Default initial state (a copy)."""
        return self._x0.copy()

    @property
    def p(self) -> np.ndarray:
        """Default parameter values (a copy)."""
        return self._p.copy()

    # ----------------------------------------------------- user-facing callables
    def _dispatchers(self):
        if self._user_fns is None:
            self._user_fns = _bind_allocating(self.fns, self.constants, self.n_states, self.n_params)
        checked = self.__dict__.get("_checked_fns")
        if checked is None:
            checked = self.__dict__["_checked_fns"] = _bind_checked(self._user_fns, self.n_states,
                                                                    self.n_params, self.name)
        return checked

    @property
    def raw(self):
        """The unchecked ``(rhs, jac_x, jac_p)`` dispatchers, for ``@njit`` code that has checked its arrays.

        They index ``x`` and ``p`` without bounds checks: arrays of the wrong length
        read past their end. :attr:`rhs`, :attr:`jac_x` and :attr:`jac_p` check the
        lengths first (also inside ``@njit`` code) and raise :class:`PbsensError`.
        """
        self._dispatchers()
        return tuple(self._user_fns)

    @property
    def rhs(self):
        """``f(t, x, p) -> (nx,)``, a numba dispatcher."""
        return self._dispatchers()[0]

    @property
    def jac_x(self):
        """``A(t, x, p) = df/dx -> (nx, nx)``, a numba dispatcher."""
        return self._dispatchers()[1]

    @property
    def jac_p(self):
        """``B(t, x, p) = df/dp -> (nx, np)``, a numba dispatcher."""
        return self._dispatchers()[2]

    # ------------------------------------------------- discontinuities in time
    @property
    def events(self) -> tuple:
        """The model's events, time- and state-triggered (:class:`pbsens.model.spec.Event`, plain data)."""
        return tuple(getattr(self.spec, "events", ()) or ())

    @property
    def discontinuities(self):
        """Breakpoints and events as callables (:mod:`pbsens.model.discontinuities`), built on first use.

        Derived with sympy once per model and cached on disk next to the compiled
        model; a warm process imports the cached module.
        """
        d = self.__dict__.get("_discontinuities")
        if d is None:
            from . import discontinuities
            d = self.__dict__["_discontinuities"] = discontinuities.load(self.spec)
        return d

    def breakpoints(self, p=None) -> np.ndarray:
        """Times where a ``piecewise`` input of the right-hand side switches, for parameters ``p``.

        Sorted, without repeats: the roots in ``t`` of the time comparisons inside
        ``piecewise``/``heaviside`` (see :mod:`pbsens.model.discontinuities`). A
        solver must stop at these times, never step across them.
        """
        p = self.check_p(p)
        tau, _ = self.discontinuities.breakpoints(p)
        return np.unique(tau)

    def event_times(self, p=None) -> np.ndarray:
        """Times of the model's time-triggered events for parameters ``p`` (in the order of :attr:`events`;
        state-triggered events have no time known before a solve and are left out)."""
        p = self.check_p(p)
        return self.discontinuities.event_times(p)[0]

    # ------------------------------------------------------------- helpers
    def initial_state(self, p=None) -> np.ndarray:
        """``x0(p)``: the model's initial state for parameters ``p`` (default: model values)."""
        p = self.check_p(p)
        out = np.empty(self.n_states)
        self.fns.x0_into(p, self.constants, out)
        return out

    def initial_sensitivity(self, p=None) -> np.ndarray:
        """``dx0/dp`` (nx, np): zero unless initial values are expressions of parameters."""
        p = self.check_p(p)
        out = np.empty((self.n_states, self.n_params))
        self.fns.dx0_dp_into(p, self.constants, out)
        return out

    def outputs(self, t, x, p=None) -> np.ndarray:
        """Observables ``y = h(t, x, p)`` for one state ``x`` (states if the model has no outputs)."""
        p = self.check_p(p)
        x = self.check_x(x, "x")
        if not self.n_outputs:
            return x.copy()
        y = np.empty(self.n_outputs)
        self.fns.out_into(float(t), x, p, self.constants, y)
        return y

    def check_p(self, p, name="p") -> np.ndarray:
        """Validate a parameter vector (length, finiteness); ``None`` means the defaults."""
        if p is None:
            return self._p.copy()
        return _check_vector(p, self.n_params, name, f"model {self.name!r} has {self.n_params} parameters")

    def check_x(self, x, name="x0") -> np.ndarray:
        """Validate a state vector (length, finiteness)."""
        return _check_vector(x, self.n_states, name, f"model {self.name!r} has {self.n_states} states")

    def check_S(self, S, name="S0", n_cols=None) -> np.ndarray:
        """Validate a sensitivity matrix: shape ``(n_states, n_cols)`` (default all
        parameters), numbers, finite. Returns a new float64 array."""
        n_cols = self.n_params if n_cols is None else n_cols
        try:
            S = np.array(S, dtype=np.float64)
        except (TypeError, ValueError):
            raise PbsensError(f"{name!r} must be a numeric array of shape (n_states, n_params)") from None
        if S.shape != (self.n_states, n_cols):
            raise PbsensError(f"{name!r} must have shape (n_states, n_params) = ({self.n_states}, {n_cols}), "
                              f"got {S.shape}")
        if not np.all(np.isfinite(S)):
            raise PbsensError(f"{name!r} contains NaN or inf")
        return S

    def param_index(self, names) -> np.ndarray:
        """Indices of parameters given by name (or already by index)."""
        idx = []
        for n in names:
            if isinstance(n, (int, np.integer)):
                if not 0 <= n < self.n_params:
                    raise PbsensError(f"parameter index {n} is out of range 0..{self.n_params - 1}")
                idx.append(int(n))
            elif n in self.param_names:
                idx.append(self.param_names.index(n))
            else:
                raise PbsensError(f"model {self.name!r} has no parameter {n!r}")
        return np.array(idx, dtype=np.int64)

    def __repr__(self):
        return (f"<pbsens.Model {self.name!r}: {self.n_states} states, {self.n_params} parameters"
                + (f", {self.n_outputs} outputs" if self.n_outputs else "") + ">")


def check_model(model, name="model") -> "Model":
    """Raise :class:`PbsensError` unless ``model`` is a :class:`Model`."""
    if not isinstance(model, Model):
        hint = (f"; load it first: pbsens.load_model({model!r})" if isinstance(model, str) else "")
        raise PbsensError(f"{name!r} must be a pbsens Model (from load_model or random_linear_model), "
                          f"got {type(model).__name__}{hint}")
    return model


def _dense_pattern(nrows, ncols):
    return (np.arange(nrows + 1, dtype=np.int64) * ncols, np.tile(np.arange(ncols, dtype=np.int64), nrows))


def _check_vector(v, n, name, why):
    if np.iscomplexobj(v):
        raise PbsensError(f"{name!r} must be real, got complex values")
    try:
        a = np.array(v, dtype=np.float64).reshape(-1) if np.ndim(v) <= 1 else None
    except (TypeError, ValueError):
        raise PbsensError(f"{name!r} must be an array of numbers, got {v!r}") from None
    if a is None:
        raise PbsensError(f"{name!r} must be one-dimensional, got shape {np.shape(v)}")
    if a.shape[0] != n:
        raise PbsensError(f"{name!r} has length {a.shape[0]}, expected {n} ({why})")
    if not np.all(np.isfinite(a)):
        bad = np.flatnonzero(~np.isfinite(a)).tolist()
        raise PbsensError(f"{name!r} contains NaN or inf at index {bad}")
    return np.ascontiguousarray(a)


def _bind_allocating(fns, c, nx, np_):
    """Allocating ``rhs``, ``jac_x``, ``jac_p`` dispatchers closing over ``fns`` and ``c``."""
    from numba import njit

    c = c.copy()

    @njit
    def as_f64(a):
        return np.ascontiguousarray(np.asarray(a, dtype=np.float64))

    def allocating(fn_into, shape):
        @njit
        def fn(t, x, p):
            out = np.empty(shape)
            fn_into(float(t), as_f64(x), as_f64(p), c.copy(), out)
            return out
        return fn

    return (allocating(fns.rhs_into, (nx,)), allocating(fns.jac_x_into, (nx, nx)),
            allocating(fns.jac_p_into, (nx, np_)))


def _bind_checked(raw, nx, np_, name):
    """``rhs``, ``jac_x``, ``jac_p`` dispatchers that check the lengths of ``x`` and ``p`` first.

    The checks run inside the compiled function, so the dispatchers stay callable from
    ``@njit`` code; the messages are compile-time constants (numba raises them as given).
    """
    from numba import njit

    rhs_raw, jac_x_raw, jac_p_raw = raw
    bad_x = PbsensError(f"'x' must be a 1-D array of length {nx} (model {name!r} has {nx} states)")
    bad_p = PbsensError(f"'p' must be a 1-D array of length {np_} (model {name!r} has {np_} parameters)")
    msg_x, msg_p = str(bad_x), str(bad_p)

    @njit
    def _check(x, p):
        if x.ndim != 1 or x.shape[0] != nx:
            raise PbsensError(msg_x)
        if p.ndim != 1 or p.shape[0] != np_:
            raise PbsensError(msg_p)

    @njit
    def rhs(t, x, p):
        _check(x, p)
        return rhs_raw(t, x, p)

    @njit
    def jac_x(t, x, p):
        _check(x, p)
        return jac_x_raw(t, x, p)

    @njit
    def jac_p(t, x, p):
        _check(x, p)
        return jac_p_raw(t, x, p)

    return rhs, jac_x, jac_p
