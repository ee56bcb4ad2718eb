"""The sparse-Jacobian path of :func:`pbsens.sensitivities` (``linalg="sparse"``) and the
``linalg="auto"`` rule that chooses it.

The exp and exp2 marches then take CSR Jacobians and the action of the augmented
exponential (:mod:`pbsens.kernels.sparse_march`, METHOD.md section 12) instead of dense
``n x n`` matrix functions: ``O(nnz(A) np)`` per Taylor term instead of ``O(nx^3)``
per step. The rule (measured crossover, docs/PERFORMANCE.md "Large models: kernels"):
sparse when the method is exp or exp2, ``nx >= SPARSE_MIN_STATES`` and the Jacobian's
density is at most ``SPARSE_MAX_DENSITY``.
"""
from __future__ import annotations

import numpy as np

from ..errors import PbsensError
from .methods import METHOD_INFO, method_info, methods_with

__all__ = ["LINALG", "SPARSE_MIN_STATES", "SPARSE_MAX_DENSITY", "SPARSE_METHODS", "choose", "SparseRunner"]

#: Values of ``sensitivities(..., linalg=...)``.
LINALG = ("auto", "dense", "sparse")
#: Methods with a sparse march (``sparse`` in :data:`pbsens.sensitivity.methods.METHOD_INFO`).
SPARSE_METHODS = methods_with(sparse=True)
#: ``linalg="auto"``: smallest number of states for the sparse path (below it the dense
#: kernels, unchanged, are as fast or faster; docs/PERFORMANCE.md).
SPARSE_MIN_STATES = 60
#: ``linalg="auto"``: largest fraction of non-zeros of ``A = df/dx`` for the sparse path.
SPARSE_MAX_DENSITY = 0.1
#: The sparse march may take the dense step on an interval (where it is cheaper: long stiff
#: intervals) on models with at most this many states (it then holds O(nx^2) work arrays).
DENSE_STEP_MAX_STATES = 1000
#: Pattern extensions (adapter) before a miss is reported as an error.
_MAX_EXTEND = 8


def choose(model, method, linalg) -> bool:
    """Whether :func:`pbsens.sensitivities` takes the sparse path (validates ``linalg``)."""
    if not isinstance(linalg, str) or linalg not in LINALG:
        raise PbsensError(f"'linalg' must be one of {', '.join(map(repr, LINALG))}, got {linalg!r}")
    if linalg == "dense":
        return False
    if linalg == "sparse":
        if not _has_sparse_march(method):
            raise PbsensError(f"'linalg': 'sparse' is available for method {' and '.join(map(repr, SPARSE_METHODS))}, "
                              f"not {method!r} (use linalg='dense' or 'auto')")
        return True
    if not _has_sparse_march(method) or model.n_states < SPARSE_MIN_STATES:
        return False
    from ..model.sparsity import density
    return density(model) <= SPARSE_MAX_DENSITY


def _has_sparse_march(method) -> bool:
    info = METHOD_INFO.get(method) if isinstance(method, str) else None
    return info is not None and info.sparse


class SparseRunner:
    """The sparse march bound to one model (its compiled functions passed by address)."""

    def __init__(self, model):
        from ..kernels.march import _Compiled
        from ..kernels.signatures import jacs_fn_sig, vector_fn_sig
        from ..model.sparsity import sparse_jacobians
        self.model = model
        self.sj = sparse_jacobians(model)
        self._jacs = _Compiled(model.fns.jacs_into, jacs_fn_sig)
        if self.sj.gather:
            dummy = _Compiled(model.fns.rhs_into, vector_fn_sig)     # never called when gathering
            self._jxd = self._jpd = dummy
        else:
            self._jxd = _Compiled(self.sj.jxd, vector_fn_sig)
            self._jpd = _Compiled(self.sj.jpd, vector_fn_sig)
        self.stats = np.zeros(6, dtype=np.int64)
        self._laws = None                # conservation laws, found on the first call that can use them

    def __call__(self, t, x, p, S, out_index, S_out, branch, n_int, method_code, cols=None, mid=None):
        """March; returns the kernel's status (``-1``, or ``k >= 0``: not finite after interval k).

        ``mid``: ``(X_mid, mid_index)`` of :func:`pbsens.solvers.refine.midpoint_plan` (exp2: the
        midpoint on the long intervals), or None.

        ``cols``: the model parameter indices of ``S``'s columns (default all). Only the
        *active* ones are marched: a column whose ``B`` column has no structural non-zero
        and whose initial value is zero stays exactly zero (``S' = A S``, ``S(t0) = 0``), and
        is written as zeros without a step (METHOD.md section 12).
        """
        from ..kernels.sparse_march import sparse_march
        from ..model.sparsity import extend
        c = self.model.constants
        nx = self.model.n_states
        cols = np.arange(self.model.n_params, dtype=np.int64) if cols is None else np.asarray(cols, np.int64)
        S_in = S.copy()
        if mid is None:
            mid = (np.empty((0, nx)), np.full(max(t.size - 1, 0), -1, dtype=np.int64))
        X_mid, mid_index = np.ascontiguousarray(mid[0], dtype=np.float64), np.ascontiguousarray(mid[1], np.int64)
        nonzero_start = np.any(S_in != 0.0, axis=0)
        info = method_info(method_code)
        laws = self._found_laws(method_code, mid_index, p)
        dep, K, LDinv = self._eliminated(laws, t, x, p)
        for _ in range(_MAX_EXTEND + 1):
            sj = self.sj
            active, Rp, Ri, Rsel = _reduced_pattern(sj.Bp, sj.Bi, cols, nonzero_start)
            if active.size == 0:         # every column stays zero: nothing to march
                S_out[...] = 0.0
                S[...] = 0.0
                branch[:] = info.branch
                n_int[:] = 1
                return -1
            S_run = np.ascontiguousarray(S_in[:, active])
            # the kernel stores the marched columns into S_out's rows and zeros the others (no
            # intermediate copy: Lang's 600 outputs x 124 states x 291 columns are 170 MB)
            direct = S_out.flags.c_contiguous and S_out.dtype == np.float64
            S_out_run = S_out if direct else np.empty((S_out.shape[0], nx, cols.size))
            status = sparse_march(self._jacs, self._jxd, self._jpd, 1 if sj.gather else 0, t, x, p, c, S_run,
                                  out_index, method_code, sj.Ap, sj.Ai, sj.Bp, sj.Bi, S_out_run, branch, n_int,
                                  self.stats, DENSE_STEP_MAX_STATES, Rp, Ri, Rsel, X_mid, mid_index, active,
                                  laws, dep, K, LDinv)
            if status > -2:
                if not direct:
                    S_out[...] = S_out_run
                S[...] = 0.0
                S[:, active] = S_run
                return status
            k = -2 - status              # the adapter's pattern missed an entry at grid point k
            self.sj = extend(self.model, sj, t[k], x[k], p)
        raise PbsensError(f"model {self.model.name!r}: the Jacobians' sparsity pattern kept changing along the "
                          "trajectory; use linalg='dense'")


    def adjoint(self, t, x, p, out_index, dJdx, method_code, lam_end=None, cols=None, nonzero_start=None,
                mid=None):
        """The transpose of :meth:`__call__` (:mod:`pbsens.kernels.sparse_adjoint`): ``(lambda(t_0), grad)``
        with ``grad`` over the model parameters (zero outside ``cols``; without ``S_0^T lambda_0``).

        ``cols``, ``nonzero_start``: the forward march's columns and which of them start non-zero (its
        ``S``'s non-zero columns): they decide which columns it marches, hence its step choice, which
        the transpose repeats. ``lam_end``: ``lambda`` carried into ``t[-1]`` (default 0). ``dJdx``
        ``(n_out, nx)``: one functional; ``(nv, n_out, nx)``: ``nv`` marched together (``lam_end``
        ``(nv, nx)``; returns ``(nv, nx)`` and ``(nv, n_params)``).
        """
        from ..errors import SolverError
        from ..kernels.adjoint import vector_sets
        from ..kernels.sparse_adjoint import N_ASTATS, sparse_adjoint_march
        from ..model.sparsity import extend
        c = self.model.constants
        nx, npar = self.model.n_states, self.model.n_params
        cols = np.arange(npar, dtype=np.int64) if cols is None else np.asarray(cols, np.int64)
        start = np.zeros(cols.size, bool) if nonzero_start is None else np.asarray(nonzero_start, bool)
        if mid is None:
            mid = (np.empty((0, nx)), np.full(max(t.size - 1, 0), -1, dtype=np.int64))
        X_mid, mid_index = np.ascontiguousarray(mid[0], dtype=np.float64), np.ascontiguousarray(mid[1], np.int64)
        D, lam0, single = vector_sets(dJdx, lam_end, nx)
        nv = D.shape[0]
        self.adjoint_stats = np.zeros(N_ASTATS, dtype=np.int64)
        laws, dep, K = self._adjoint_laws(t, x, p, method_code, mid_index)
        for _ in range(_MAX_EXTEND + 1):
            sj = self.sj
            active, Rp, Ri, Rsel = _reduced_pattern(sj.Bp, sj.Bi, cols, start)
            lam = lam0.copy()
            grad_c = np.zeros((nv, active.size))
            status = sparse_adjoint_march(self._jacs, self._jxd, self._jpd, 1 if sj.gather else 0, t, x, p, c,
                                          np.ascontiguousarray(out_index, np.int64), D,
                                          int(method_code), DENSE_STEP_MAX_STATES, sj.Ap, sj.Ai, sj.Bp, sj.Bi, Rp, Ri,
                                          Rsel, X_mid, mid_index, lam, grad_c, self.adjoint_stats, laws, dep, K)
            if status > -2:
                if status >= 0:
                    raise SolverError(f"adjoint march (sparse): lambda is NaN or inf after the interval "
                                      f"[{t[status]:.6g}, {t[status + 1]:.6g}] (marching backward)")
                grad = np.zeros((nv, npar))
                grad[:, cols[active]] = grad_c
                return (lam[0], grad[0]) if single else (lam, grad)
            k = -2 - status
            self.sj = extend(self.model, sj, t[k], x[k], p)
        raise PbsensError(f"model {self.model.name!r}: the Jacobians' sparsity pattern kept changing along the "
                          "trajectory; use linalg='dense'")

    #: Take the dense exp2 steps in the coordinates the conservation laws leave (pbsens.kernels.reduced),
    #: and their transposes in the adjoint (pbsens.kernels.reduced_adjoint).
    reduce_laws = True

    def _adjoint_laws(self, t, x, p, method_code, mid_index):
        """``(laws, dep, K)`` for :meth:`adjoint`: as the forward march finds them (with midpoints and the
        dense step), or empty."""
        nx = self.model.n_states
        laws = self._found_laws(method_code, mid_index, p)
        dep, K, _ = self._eliminated(laws, t, x, p)
        if dep.size == 0:
            return np.zeros((0, nx)), np.zeros(0, np.int64), np.zeros((0, nx))
        return np.ascontiguousarray(laws, dtype=np.float64), dep, np.ascontiguousarray(K, dtype=np.float64)

    def _found_laws(self, method_code, mid_index, p):
        """The model's conservation laws (``k x nx``; ``k = 0``: none), looked for on the first march that
        can use them (a method with the midpoint correction, some interval corrected, the dense step
        possible) and kept for the model."""
        nx = self.model.n_states
        if (method_info(method_code).midpoint and np.any(mid_index >= 0) and nx <= DENSE_STEP_MAX_STATES
                and self._laws is None):
            from ..model.conservation import shared_left_null_space
            self._laws = shared_left_null_space(self.model, p)
        return self._laws if self._laws is not None else np.zeros((0, nx))

    def _eliminated(self, laws, t, x, p):
        """``(dep, K, L[:, dep]^-1)`` (:func:`pbsens.model.conservation.eliminated_on_grid`); empty without
        laws or with ``reduce_laws`` off."""
        nx = self.model.n_states
        if not self.reduce_laws:
            return np.zeros(0, np.int64), np.zeros((0, max(nx - laws.shape[0], 0))), np.zeros((0, 0))
        from ..model.conservation import eliminated_on_grid
        return eliminated_on_grid(self.model, laws, t, x, p)


def _reduced_pattern(Bp, Bi, cols, nonzero_start):
    """The columns of ``S`` to march and ``B``'s pattern restricted to them.

    Returns ``(active, Rp, Ri, Rsel)``: positions in ``cols`` of the columns marched (those
    with a structural non-zero of ``B`` or a non-zero initial value), the CSR pattern of
    ``B[:, cols[active]]`` with column indices into ``active``, and per entry its position
    in the values on ``(Bp, Bi)``.
    """
    n_p = int(Bi.max()) + 1 if Bi.size else 0
    n_p = max(n_p, int(cols.max()) + 1 if cols.size else 0)
    has_b = np.zeros(n_p, dtype=bool)
    has_b[Bi] = True
    active = np.flatnonzero(has_b[cols] | nonzero_start).astype(np.int64)
    pos = np.full(n_p, -1, dtype=np.int64)
    pos[cols[active]] = np.arange(active.size)
    new_col = pos[Bi]
    keep = new_col >= 0
    rows = np.repeat(np.arange(Bp.size - 1), np.diff(Bp))
    Rp = np.zeros(Bp.size, dtype=np.int64)
    np.add.at(Rp, rows[keep] + 1, 1)
    Rp = np.cumsum(Rp).astype(np.int64)
    return (active, Rp, np.ascontiguousarray(new_col[keep], dtype=np.int64),
            np.ascontiguousarray(np.flatnonzero(keep), dtype=np.int64))


def runner(model) -> SparseRunner:
    """The model's :class:`SparseRunner`, built once per model and process."""
    cache = model.__dict__.setdefault("_kernels", {})
    if "sparse_runner" not in cache:
        cache["sparse_runner"] = SparseRunner(model)
    return cache["sparse_runner"]


def method_code(method):
    return METHOD_INFO[method].code


def state_jacobian(model, p=None):
    """``jac(t, x) -> scipy.sparse.csr_matrix``: ``A = df/dx`` on the model's sparsity pattern, for
    scipy's BDF/Radau (``solve_states(model, ..., method="BDF", jac=state_jacobian(model))``:
    sparse LU by SuperLU instead of a dense ``O(nx^3)`` factorisation)."""
    import scipy.sparse as sp

    from ..model.sparsity import sparse_jacobians
    sj = sparse_jacobians(model)
    p = model.check_p(p)
    c = model.constants
    nx = model.n_states
    if sj.gather:
        from ..kernels.sparse_march import gather_csr
        fn = model.fns.jac_x_into

        def values(t, x, data):
            A = np.empty((nx, nx))
            fn(t, x, p, c, A)
            gather_csr(A, sj.Ap, sj.Ai, data)     # entries off the probed pattern: see sparsity.extend
    else:
        fn = sj.jxd

        def values(t, x, data):
            fn(t, x, p, c, data)

    def jac(t, x):
        data = np.empty(sj.Ai.size)
        values(float(t), np.ascontiguousarray(x, dtype=np.float64), data)
        return sp.csr_matrix((data, sj.Ai, sj.Ap), shape=(nx, nx))

    return jac
