"""Reference forward sensitivities (FS): states and sensitivities integrated together.

METHOD.md section 6. The sensitivity matrix ``S = dx/dp`` solves the linear
variational equation (2.3)::

    S' = A(t) S + B(t),   A = df/dx,  B = df/dp,   S(t0) = dx0/dp,

which is appended to the state equation ``x' = f(t, x, p)``. The augmented state
``z = (x, S[:, 0], S[:, 1], ..., S[:, ns-1])`` has dimension ``nx (ns + 1)``
(columns of ``S`` stored one after the other, as in CVODES) and is integrated
with :func:`scipy.integrate.solve_ivp`.

Implementation notes
--------------------
* The augmented right-hand side is one ``@njit(cache=True)`` kernel
  (:func:`_fs_rhs_kernel`) that receives the model's ``rhs_into`` and
  ``jacs_into`` as first-class function arguments, so it is compiled once per
  machine, not once per model. Calling such a kernel from Python with
  dispatcher arguments is slow (the dispatchers are unboxed on every call), so
  each model gets a small, non-cached ``@njit`` closure that calls the kernel
  with the model's functions bound as closure variables; it is built once per
  process and memoised on the model object (:func:`_bound_functions`).
* The implicit methods never see the dense ``nx (ns+1)`` square Jacobian
  (1260 x 1260 for CaMKII). By default (``jacobian="structured"``) BDF and
  Radau get the block lower-triangular Jacobian as an operator object, and
  their Newton matrices are factorised with one ``nx x nx`` LU and solved by
  block forward substitution (numba kernels). ``jacobian="sparse"`` gives them
  the same matrix as a CSC matrix (SuperLU), ``"block-diagonal"`` the
  simultaneous-corrector approximation ``diag(A, ..., A)``. The notes of
  :func:`forward_sensitivities` give the measurements behind the default.
"""
from __future__ import annotations

import numbers
import time

import numpy as np
from numba import njit, types
from scipy.integrate import BDF, Radau, solve_ivp
from scipy.sparse import csc_matrix, eye

from .errors import PbsensError, SolverError
from .kernels.signatures import f8, ivec, jacs_fn, mat, tens, vec, vector_fn
from .result import SensitivityResult
from .solvers import check_t_eval, check_t_span

__all__ = ["forward_sensitivities"]

_METHODS = ("BDF", "Radau", "LSODA", "RK45", "RK23", "DOP853")
#: Jacobian forms and the solvers that accept them.
_JACOBIANS = {"structured": ("BDF", "Radau"), "block-diagonal": ("BDF", "Radau"),
              "sparse": ("BDF", "Radau"), "dense": ("BDF", "Radau", "LSODA"), "none": _METHODS}
_DEFAULT_JACOBIAN = {"BDF": "structured", "Radau": "structured", "LSODA": "none"}

# --------------------------------------------------------------------------- kernels


@njit(types.void(f8, vec, vec, vec, ivec, vector_fn, jacs_fn, vec), cache=True)
def _fs_rhs_kernel(t, z, p, c, idx, rhs_into, jacs_into, out):
    """Right-hand side of the augmented system: ``out = (f, A S + B[:, idx])`` (2.3).

    ``z = (x, S[:, 0], ..., S[:, ns-1])`` with ``ns = idx.size``; ``idx`` holds the
    model parameter indices of the sensitivity columns.
    """
    ns = idx.shape[0]
    nx = z.shape[0] // (ns + 1)
    x = np.empty(nx)
    for i in range(nx):
        x[i] = z[i]
    f = np.empty(nx)
    A = np.empty((nx, nx))
    B = np.empty((nx, p.shape[0]))
    rhs_into(t, x, p, c, f)
    jacs_into(t, x, p, c, A, B)
    AT = A.T.copy()  # column k of A contiguous: the updates below are axpys (SIMD)
    for i in range(nx):
        out[i] = f[i]
    for j in range(ns):
        off = nx * (j + 1)
        col = idx[j]
        for i in range(nx):
            out[off + i] = B[i, col]
        for k in range(nx):
            zk = z[off + k]
            if zk != 0.0:
                for i in range(nx):
                    out[off + i] += zk * AT[k, i]


@njit(types.void(f8, vec, vec, vec, ivec, jacs_fn, mat, tens), cache=True)
def _fs_jac_kernel(t, z, p, c, idx, jacs_into, A, C):
    """Blocks of the augmented Jacobian: ``A = df/dx`` and the couplings ``C[j]``.

    The Jacobian of the augmented system is block lower triangular with
    ``ns + 1`` block rows and columns of size ``nx``::

        [ A                ]
        [ C_0  A           ]      C_j = d(A S_j + B[:, idx_j]) / dx
        [ C_1      A       ]
        [ ...          ... ]

    ``A`` is exact (symbolic). The coupling blocks ``C_j`` need second
    derivatives of ``f``; they are forward differences of the analytic
    Jacobians in each state direction (one ``jacs_into`` call per state). They
    only steer the Newton iteration, never the solution.
    """
    ns = idx.shape[0]
    nx = A.shape[0]
    npar = p.shape[0]
    x = np.empty(nx)
    for i in range(nx):
        x[i] = z[i]
    B = np.empty((nx, npar))
    Ak = np.empty((nx, nx))
    Bk = np.empty((nx, npar))
    jacs_into(t, x, p, c, A, B)
    xmax = 0.0
    for i in range(nx):
        xmax = max(xmax, abs(x[i]))
    sqrt_eps = 1.4901161193847656e-08
    for k in range(nx):
        xk = x[k]
        h = sqrt_eps * max(abs(xk), 1e-3 * xmax, 1e-12)
        x[k] = xk + h
        h = x[k] - xk  # the step actually taken
        jacs_into(t, x, p, c, Ak, Bk)
        x[k] = xk
        inv_h = 1.0 / h
        for j in range(ns):
            off = nx * (j + 1)
            col = idx[j]
            for i in range(nx):
                s = Bk[i, col] - B[i, col]
                for q in range(nx):
                    s += (Ak[i, q] - A[i, q]) * z[off + q]
                C[j, i, k] = s * inv_h


def _jac_pattern(nx, ns):
    """CSC ``indices``/``indptr`` of the augmented Jacobian (data from :func:`_csc_data`)."""
    n = nx * (ns + 1)
    first = np.tile(np.arange(n, dtype=np.int32), nx)
    blocks = (nx * (np.arange(1, ns + 1)[:, None, None])
              + np.zeros((1, nx, 1), dtype=np.int64) + np.arange(nx)[None, None, :]).ravel()
    indices = np.concatenate([first, blocks.astype(np.int32)])
    lengths = np.concatenate([np.full(nx, n), np.full(ns * nx, nx)])
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return indices, indptr


def _csc_data(A, C):
    """CSC data of the augmented Jacobian for :func:`_jac_pattern` (vectorised, no block loop)."""
    first = np.concatenate([A[None], C]).transpose(2, 0, 1).ravel()  # column k: A[:, k], C_0[:, k], ...
    return np.concatenate([first, np.tile(A.T.ravel(), C.shape[0])])


class _AugmentedOperator:
    """``alpha I + beta J`` for the block lower-triangular augmented Jacobian ``J``.

    Supports exactly the arithmetic scipy's BDF (``I - c J``) and Radau
    (``(mu / h) I - J``, ``mu`` complex) perform on their Jacobian before
    factorising it; the factorisation and solves are :func:`_block_lu` and
    :func:`_block_solve`.
    """

    __array_ufunc__ = None  # make numpy scalars defer to __rmul__

    def __init__(self, A, C, n, alpha=0.0, beta=1.0):
        self.A, self.C, self.n, self.alpha, self.beta = A, C, n, alpha, beta

    @property
    def shape(self):
        return (self.n, self.n)

    def _combine(self, other, sign):
        if not isinstance(other, _AugmentedOperator):
            return NotImplemented
        if self.beta != 0 and other.beta != 0 and self.A is not other.A:
            return NotImplemented
        A, C = (self.A, self.C) if self.A is not None else (other.A, other.C)
        return _AugmentedOperator(A, C, self.n, self.alpha + sign * other.alpha, self.beta + sign * other.beta)

    def __add__(self, other):
        return self._combine(other, 1)

    def __sub__(self, other):
        return self._combine(other, -1)

    def __mul__(self, s):
        if not isinstance(s, (numbers.Number, np.number)):
            return NotImplemented
        return _AugmentedOperator(self.A, self.C, self.n, self.alpha * s, self.beta * s)

    __rmul__ = __mul__

    def __neg__(self):
        return self * -1.0


_c16 = types.complex128
_cvec = types.Array(_c16, 1, "C")
_cmat = types.Array(_c16, 2, "C")


@njit([types.void(mat, ivec), types.void(_cmat, ivec)], cache=True)
def _lu_inplace(M, piv):
    """LU factorisation with partial pivoting in place (``P M = L U``, unit ``L``)."""
    n = M.shape[0]
    for k in range(n):
        p = k
        big = abs(M[k, k])
        for i in range(k + 1, n):
            v = abs(M[i, k])
            if v > big:
                big, p = v, i
        piv[k] = p
        if p != k:
            for j in range(n):
                tmp = M[k, j]
                M[k, j] = M[p, j]
                M[p, j] = tmp
        d = M[k, k]
        if d == 0:
            continue  # singular: the solve produces inf/nan and the solver rejects the step
        for i in range(k + 1, n):
            M[i, k] /= d
            f = M[i, k]
            if f != 0:
                for j in range(k + 1, n):
                    M[i, j] -= f * M[k, j]


@njit([types.void(mat, ivec, vec), types.void(_cmat, ivec, _cvec)], cache=True)
def _lu_solve_inplace(LU, piv, y):
    n = LU.shape[0]
    for k in range(n):
        p = piv[k]
        if p != k:
            tmp = y[k]
            y[k] = y[p]
            y[p] = tmp
    for i in range(n):
        s = y[i]
        for j in range(i):
            s -= LU[i, j] * y[j]
        y[i] = s
    for i in range(n - 1, -1, -1):
        s = y[i]
        for j in range(i + 1, n):
            s -= LU[i, j] * y[j]
        y[i] = s / LU[i, i]


@njit([types.void(mat, ivec, f8, tens, vec, vec), types.void(_cmat, ivec, _c16, tens, _cvec, _cvec)],
      cache=True)
def _block_solve_kernel(LU, piv, beta, C, b, y):
    """Solve ``(alpha I + beta J) y = b`` for the block lower-triangular ``J``.

    ``LU``/``piv`` factorise ``alpha I + beta A``; block forward substitution:
    ``y_0 = M_A^-1 b_0``, ``y_j = M_A^-1 (b_j - beta C_{j-1} y_0)``.
    """
    nx = LU.shape[0]
    ns = C.shape[0]
    y0 = b[:nx].copy()
    _lu_solve_inplace(LU, piv, y0)
    y[:nx] = y0
    # right-hand sides as columns of R (nx, ns): R[:, j] = b_j - beta C_j y0
    R = np.empty((nx, ns), dtype=y.dtype)
    for j in range(ns):
        off = nx * (j + 1)
        for i in range(nx):
            s = 0.0 * beta
            for k in range(nx):
                s += C[j, i, k] * y0[k]
            R[i, j] = b[off + i] - beta * s
    # all columns at once: row operations with contiguous inner loops
    for k in range(nx):
        p = piv[k]
        if p != k:
            for j in range(ns):
                tmp = R[k, j]
                R[k, j] = R[p, j]
                R[p, j] = tmp
    for i in range(nx):
        for k in range(i):
            lik = LU[i, k]
            if lik != 0:
                for j in range(ns):
                    R[i, j] -= lik * R[k, j]
    for i in range(nx - 1, -1, -1):
        for k in range(i + 1, nx):
            uik = LU[i, k]
            if uik != 0:
                for j in range(ns):
                    R[i, j] -= uik * R[k, j]
        d = 1.0 / LU[i, i]
        for j in range(ns):
            R[i, j] *= d
    for j in range(ns):
        off = nx * (j + 1)
        for i in range(nx):
            y[off + i] = R[i, j]


def _block_lu(M):
    """Factorise ``M = alpha I + beta J``: one ``nx x nx`` LU of ``alpha I + beta A``."""
    nx = M.A.shape[0]
    MA = M.beta * M.A + M.alpha * np.eye(nx)
    beta = M.beta
    if np.iscomplexobj(MA):
        MA = np.ascontiguousarray(MA, dtype=np.complex128)
        beta = complex(beta)
    else:
        MA = np.ascontiguousarray(MA)
        beta = float(beta)
    piv = np.empty(nx, dtype=np.int64)
    _lu_inplace(MA, piv)
    return MA, piv, beta, M.C


def _block_solve(LU, b):
    """Solve ``M y = b`` with ``M`` factorised by :func:`_block_lu`."""
    MA, piv, beta, C = LU
    b = np.ascontiguousarray(b, dtype=MA.dtype)
    y = np.empty_like(b)
    _block_solve_kernel(MA, piv, beta, C, b, y)
    return y


class _StructuredMixin:
    """Make scipy's BDF/Radau factorise the augmented Newton matrix block by block.

    The solver's ``jac`` argument must return an :class:`_AugmentedOperator`.
    Relies on the solvers' ``_validate_jac``, ``J``, ``I``, ``lu`` and
    ``solve_lu`` members (stable since scipy 1.0; checked in the tests).
    """

    def _validate_jac(self, jac, sparsity):
        def wrapped(t, y, f=None):
            self.njev += 1
            return jac(t, y)

        self._J0 = wrapped(self.t, self.y)
        # a sparse placeholder keeps the solver from allocating a dense n x n identity
        return wrapped, eye(self.n, format="csc")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.J = self._J0
        del self._J0
        self.I = _AugmentedOperator(None, None, self.n, 1.0, 0.0)

        def lu(M):
            self.nlu += 1
            return _block_lu(M)

        self.lu = lu
        self.solve_lu = _block_solve


class _StructuredBDF(_StructuredMixin, BDF):
    pass


class _StructuredRadau(_StructuredMixin, Radau):
    pass


_STRUCTURED = {"BDF": _StructuredBDF, "Radau": _StructuredRadau}


def _bound_functions(model):
    """Per-model numba closures around the cached kernels, memoised on ``model``.

    Returns ``(rhs, jac_data)`` with ``rhs(t, z, p, c, idx) -> dz/dt`` and
    ``jac_data(t, z, p, c, A, data)`` (fills ``data`` in place).
    """
    memo = model.__dict__.setdefault("_pbsens_memo", {})
    key = ("fs", id(model.fns.rhs_into), id(model.fns.jacs_into))
    hit = memo.get(key)
    if hit is not None:
        return hit
    rhs_into, jacs_into = model.fns.rhs_into, model.fns.jacs_into
    rhs_kernel, jac_kernel = _fs_rhs_kernel, _fs_jac_kernel

    @njit(vec(f8, vec, vec, vec, ivec))
    def fs_rhs(t, z, p, c, idx):
        out = np.empty(z.shape[0])
        rhs_kernel(t, z, p, c, idx, rhs_into, jacs_into, out)
        return out

    @njit(types.void(f8, vec, vec, vec, ivec, mat, tens))
    def fs_jac_blocks(t, z, p, c, idx, A, C):
        jac_kernel(t, z, p, c, idx, jacs_into, A, C)

    memo[key] = (fs_rhs, fs_jac_blocks)
    return memo[key]


# --------------------------------------------------------------------------- driver

class _SolverStall(Exception):
    """Raised from a right-hand side that a solver keeps calling at one time (see :func:`guard_stall`)."""

    def __init__(self, t):
        super().__init__(t)
        self.t = t


def guard_stall(fun, n):
    """Wrap ``fun(t, y)`` to raise :class:`_SolverStall` when a solver stops advancing.

    scipy's LSODA wrapper can loop forever once the solution is about to
    overflow: it keeps calling ``fun`` at the same ``t`` with the same ``y``.
    The wrapper counts consecutive calls at one ``t``; the limit ``10 n + 1000``
    is far above what a step needs (Newton iterations, a finite-difference
    Jacobian with ``n`` calls).
    """
    limit = 10 * n + 1000
    state = [None, 0]

    def guarded(t, y):
        if t == state[0]:
            state[1] += 1
            if state[1] > limit:
                raise _SolverStall(float(t))
        else:
            state[0], state[1] = t, 0
        return fun(t, y)

    return guarded


def _check_params(model, params):
    """Indices and names of the sensitivity parameters (``None``: all)."""
    if params is None:
        idx = np.arange(model.n_params, dtype=np.int64)
    else:
        if isinstance(params, (str, int, np.integer)):
            params = [params]
        try:
            params = list(params)
        except TypeError:
            raise PbsensError(f"'params' must be a list of parameter names or indices, got {params!r}") from None
        if not params:
            raise PbsensError("'params' is empty: name at least one parameter (or pass None for all)")
        try:
            idx = model.param_index(params)
        except PbsensError as exc:
            raise PbsensError(f"'params': {exc}") from None
        if np.unique(idx).size != idx.size:
            raise PbsensError(f"'params' names a parameter twice: {params!r}")
    return np.ascontiguousarray(idx, dtype=np.int64), [model.param_names[i] for i in idx]


def _check_tol(v, name, nx, pscale):
    """Tolerance of the augmented system from a scalar, per-state or full-length value.

    A scalar or per-state value ``a`` applies to ``x``; for the sensitivity
    column ``S[:, j]`` it is divided by ``pscale[j]`` (see :func:`forward_sensitivities`).
    """
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise PbsensError(f"{name!r} must be a positive number or array, got {v!r}") from None
    if a.ndim > 1 or a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise PbsensError(f"{name!r} must be positive and finite, got {v!r}")
    n_aug = nx * (pscale.size + 1)
    if a.ndim == 1 and a.size == n_aug:
        return a.copy()
    if a.ndim == 0 or a.size == nx:
        ax = np.broadcast_to(a, (nx,))
        return np.concatenate([ax, (ax[None, :] / pscale[:, None]).ravel()])
    raise PbsensError(f"{name!r} must be a scalar or have length {nx} (states) or {n_aug} "
                      f"(states and sensitivities), got length {a.size}")


def _check_jacobian(jacobian, method):
    """Resolve the ``jacobian`` argument for ``method`` (see :func:`forward_sensitivities`)."""
    if jacobian is None:
        return _DEFAULT_JACOBIAN.get(method, "none")
    if jacobian not in _JACOBIANS:
        raise PbsensError(f"'jacobian' must be one of {list(_JACOBIANS)} or None, got {jacobian!r}")
    allowed = _JACOBIANS[jacobian]
    if method not in allowed:
        raise PbsensError(f"'jacobian'={jacobian!r} is not available with method {method!r} "
                          f"(only with {', '.join(allowed)})")
    return jacobian


def forward_sensitivities(model, t_span, t_eval=None, p=None, x0=None, S0=None, method="BDF",
                          rtol=1e-8, atol=1e-10, params=None, jacobian=None, **solver_options):
    """Forward sensitivities: integrate states and sensitivities together (FS).

    The reference method of METHOD.md section 6: the state equation
    ``x' = f(t, x, p)`` and the variational equation (2.3)
    ``S' = A(t) S + B(t)``, ``S(t0) = S0``, are solved as one system of dimension
    ``nx (ns + 1)`` by :func:`scipy.integrate.solve_ivp`, with ``ns`` the number
    of sensitivity parameters.

    Parameters
    ----------
    model : Model
    t_span : (float, float)
        Integration interval, increasing.
    t_eval : array_like, optional
        Output times inside ``t_span``. States and sensitivities there come from
        the solver's dense output. Default: the solver's accepted steps
        (including ``t0``).
    p : array_like, optional
        Parameters (default: the model's).
    x0 : array_like, optional
        Initial state (default ``model.initial_state(p)``).
    S0 : array_like (nx, ns), optional
        Initial sensitivity ``dx(t0)/dp`` for the selected parameters. Default
        ``model.initial_sensitivity(p)`` restricted to ``params`` (zero unless the
        model's initial values are expressions of parameters). Pass it explicitly
        when ``x0`` is a custom vector with a different dependence on ``p``.
    method : str
        A :func:`~scipy.integrate.solve_ivp` method: ``"BDF"`` (default),
        ``"Radau"``, ``"LSODA"``, or an explicit one (``"RK45"``, ``"RK23"``,
        ``"DOP853"``).
    rtol : float
        Relative tolerance of the augmented system.
    atol : float or array_like
        Absolute tolerance. A scalar or one value per state applies to ``x``;
        for the column ``S[:, j]`` it is divided by ``|p_j|`` (by 1 when
        ``p_j = 0``), i.e. ``atol`` bounds the error of the log-parameter
        sensitivity ``p_j S[:, j]``. This is CVODES' default scaling of
        sensitivity tolerances; without it tight tolerances ask for absolute
        accuracy below the rounding error of large ``S`` entries, and the
        solver stalls. An array of length ``nx (ns + 1)`` is used as given.
    params : sequence of str or int, optional
        Parameters (names or indices) whose sensitivities are computed; ``S``
        then has ``len(params)`` columns in this order. Default: all.
    jacobian : {None, "structured", "block-diagonal", "sparse", "dense", "none"}
        How the implicit methods get the Jacobian of the augmented system (see
        Notes). ``None``: ``"structured"`` for BDF and Radau, ``"none"`` for
        LSODA and the explicit methods.
    **solver_options
        Passed on to ``solve_ivp`` (e.g. ``max_step``, ``first_step``).

    Returns
    -------
    SensitivityResult
        ``method="fs"``; ``t`` (K,), ``x`` (K, nx), ``S`` (K, nx, ns),
        ``param_names`` the selected parameters; ``options`` records the solver
        method, tolerances, ``params``, ``t_span`` and solver statistics;
        ``timings`` has ``"setup"`` (validation, binding, first-call
        compilation), ``"sensitivities"`` (the joint solve of states and
        sensitivities) and ``"total"`` seconds.

    Raises
    ------
    PbsensError
        Invalid input; the message names the argument.
    SolverError
        The solver failed or produced NaN/inf.

    Notes
    -----
    **Jacobian.** The Jacobian of the augmented system is block lower
    triangular: ``ns + 1`` diagonal blocks ``A = df/dx`` and, in the first block
    column, the couplings ``C_j = d(A S_j + B_j)/dx``, which involve second
    derivatives of ``f``. ``A`` comes from the model's symbolic Jacobian; the
    ``C_j`` are forward differences of the symbolic Jacobians (one evaluation
    of ``A`` and ``B`` per state). The Jacobian only steers the Newton
    iteration: the residual uses the exact right-hand side, so any of the
    forms below converges to the same solution, at different cost.

    * ``"structured"`` (default for BDF, Radau): the Newton matrix
      ``I - gamma J`` is factorised through one ``nx x nx`` LU of
      ``I - gamma A`` and solved by block forward substitution; the dense
      ``nx (ns+1)`` square is never formed (METHOD.md section 6). This hooks
      into the ``lu``/``solve_lu`` members of scipy's BDF and Radau.
    * ``"block-diagonal"``: ``C_j = 0``, the simultaneous-corrector
      approximation of CVODES. With scipy's Newton convergence test this
      stalls on stiff models with large sensitivities: on CaMKII over
      [0, 600] (rtol 1e-5, atol 1e-6) BDF needed 57 000 right-hand sides,
      20 000 LUs and 8 s, against 460 right-hand sides, 45 LUs and 0.07 s
      with the coupling blocks. Kept for comparison only.
    * ``"sparse"``: the same Jacobian as a CSC matrix (pattern built once),
      factorised by SuperLU; correct but 3-6 times slower than
      ``"structured"`` (the sparse LU of 1260 x 1260 takes ~2.5 ms).
    * ``"dense"``: the full square matrix; for debugging and for LSODA.
    * ``"none"``: the solver's own finite differences. LSODA (ODEPACK)
      accepts only dense or banded Jacobians and factorises a dense
      ``nx (ns+1)`` matrix in its stiff mode whatever it is given; its own
      finite differences were faster than passing the dense matrix (PKA,
      rtol 1e-5: 0.8 s vs 1.7 s CPU), so that is its default. Prefer BDF.
    """
    t_start = time.perf_counter()
    t0, t1 = check_t_span(t_span)
    te = check_t_eval(t_eval, (t0, t1))
    p = model.check_p(p)
    x0 = model.initial_state(p) if x0 is None else model.check_x(x0, "x0")
    idx, names = _check_params(model, params)
    nx, ns = model.n_states, idx.size
    n_aug = nx * (ns + 1)
    if not isinstance(method, str) or method not in _METHODS:
        raise PbsensError(f"'method' must be one of {list(_METHODS)}, got {method!r}")
    if (isinstance(rtol, bool) or not isinstance(rtol, (numbers.Real, np.floating))
            or not np.isfinite(rtol) or rtol <= 0):
        raise PbsensError(f"'rtol' must be a positive finite number, got {rtol!r}")
    rtol_v = float(rtol)
    pabs = np.abs(p[idx])
    atol_v = _check_tol(atol, "atol", nx, np.where(pabs > 0, pabs, 1.0))
    if S0 is None:
        S0 = model.initial_sensitivity(p)[:, idx]
    else:
        try:
            S0 = np.array(S0, dtype=np.float64)
        except (TypeError, ValueError):
            raise PbsensError(f"'S0' must be an array of numbers, got {S0!r}") from None
        if S0.shape != (nx, ns):
            raise PbsensError(f"'S0' has shape {S0.shape}, expected ({nx}, {ns}) "
                              f"(states x sensitivity parameters)")
        if not np.all(np.isfinite(S0)):
            raise PbsensError("'S0' contains NaN or inf")
    S0 = np.ascontiguousarray(S0)
    for key in ("fun", "jac", "t_eval", "dense_output", "args", "y0", "t_span"):
        if key in solver_options:
            raise PbsensError(f"solver option {key!r} is set by forward_sensitivities and cannot be passed")

    jacobian = _check_jacobian(jacobian, method)
    fs_rhs, fs_jac_blocks = _bound_functions(model)
    c = model.constants
    z0 = np.empty(n_aug)
    z0[:nx] = x0
    z0[nx:] = S0.T.ravel()  # column j of S at z[nx (j+1) : nx (j+2)]

    def fun(t, z):
        return fs_rhs(t, np.ascontiguousarray(z), p, c, idx)

    def blocks(t, z):
        A = np.empty((nx, nx))
        C = np.empty((ns, nx, nx))
        fs_jac_blocks(t, np.ascontiguousarray(z), p, c, idx, A, C)
        return A, C

    kwargs = dict(solver_options)
    solver = method
    if jacobian in ("structured", "block-diagonal"):
        solver = _STRUCTURED[method]
        coupled = jacobian == "structured"

        def jac(t, z):
            A, C = blocks(t, z)
            if not coupled:
                C[:] = 0.0
            return _AugmentedOperator(A, C, n_aug)

        kwargs["jac"] = jac
    elif jacobian == "sparse":
        indices, indptr = _jac_pattern(nx, ns)

        def jac(t, z):
            return csc_matrix((_csc_data(*blocks(t, z)), indices, indptr), shape=(n_aug, n_aug))

        kwargs["jac"] = jac
    elif jacobian == "dense":
        indices, indptr = _jac_pattern(nx, ns)

        def jac(t, z):
            return csc_matrix((_csc_data(*blocks(t, z)), indices, indptr), shape=(n_aug, n_aug)).toarray()

        kwargs["jac"] = jac
    if not np.all(np.isfinite(fun(t0, z0))):  # also compiles/loads everything before the timed solve
        raise SolverError(f"the right-hand side of model {model.name!r} is NaN or inf at t0 = {t0:.6g} "
                          "(check p and x0)")
    if method == "LSODA":
        fun = guard_stall(fun, n_aug)
    t_solve = time.perf_counter()
    with np.errstate(all="ignore"):
        try:
            res = solve_ivp(fun, (t0, t1), z0, method=solver, t_eval=te, rtol=rtol_v, atol=atol_v,
                            **kwargs)
        except (ValueError, TypeError) as exc:
            raise PbsensError(f"solver options rejected by solve_ivp ({method}): {exc}") from None
        except _SolverStall as exc:
            raise SolverError(f"forward sensitivities of model {model.name!r} failed at t = {exc.t:.6g} "
                              f"(method {method}): the solver stopped advancing (solution overflowing?)") from None
        except (RuntimeError, np.linalg.LinAlgError) as exc:  # e.g. SuperLU: matrix exactly singular
            raise SolverError(f"forward sensitivities of model {model.name!r} failed (method {method}): "
                              f"{exc}") from None
    t_end = time.perf_counter()
    if res.status != 0:
        raise SolverError(f"forward sensitivities of model {model.name!r} failed at t = {res.t[-1]:.6g} "
                          f"(method {method}): {res.message}")
    Z = res.y.T
    if not np.all(np.isfinite(Z)):
        k = int(np.argmax(~np.all(np.isfinite(Z), axis=1)))
        raise SolverError(f"forward sensitivities of model {model.name!r} produced NaN/inf "
                          f"at t = {res.t[k]:.6g} (method {method})")
    K = res.t.size
    x = np.ascontiguousarray(Z[:, :nx])
    S = np.ascontiguousarray(Z[:, nx:].reshape(K, ns, nx).transpose(0, 2, 1))
    options = {
        "solver": method, "rtol": rtol, "atol": atol, "t_span": (t0, t1),
        "params": None if params is None else list(names),
        "jacobian": jacobian,
        "solver_options": dict(solver_options),
        "stats": {"nfev": int(res.nfev), "njev": int(res.njev), "nlu": int(res.nlu)},
    }
    return SensitivityResult(
        t=np.ascontiguousarray(res.t, dtype=np.float64), x=x, S=S, method="fs", p=p, x0=x0, S0=S0,
        model_name=model.name, state_names=list(model.state_names), param_names=list(names),
        options=options,
        timings={"setup": t_solve - t_start, "sensitivities": t_end - t_solve, "total": t_end - t_start})
