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

from .errors import PbsensError
from .kernels import codes

__all__ = ["LINALG", "SPARSE_MIN_STATES", "SPARSE_MAX_DENSITY", "SPARSE_METHODS", "choose", "SparseRunner"]

#: Values of ``sensitivities(..., linalg=...)``.
LINALG = ("auto", "dense", "sparse")
#: Methods with a sparse march.
SPARSE_METHODS = ("exp", "exp2")
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
        if method not in SPARSE_METHODS:
            raise PbsensError(f"'linalg': 'sparse' is available for method 'exp' and 'exp2', not {method!r} "
                              "(use linalg='dense' or 'auto')")
        return True
    if method not in SPARSE_METHODS or model.n_states < SPARSE_MIN_STATES:
        return False
    from .model.sparsity import density
    return density(model) <= SPARSE_MAX_DENSITY


class SparseRunner:
    """The sparse march bound to one model (its compiled functions passed by address)."""

    def __init__(self, model):
        from .kernels.march import _Compiled
        from .kernels.signatures import jacs_fn_sig, vector_fn_sig
        from .model.sparsity import sparse_jacobians
        self.model = model
        self.sj = sparse_jacobians(model)
        self._jacs = _Compiled(model.fns.jacs_into, jacs_fn_sig)
        if self.sj.gather:
            dummy = _Compiled(model.fns.rhs_into, vector_fn_sig)     # never called when gathering
            self._jxd = self._jpd = dummy
        else:
            self._jxd = _Compiled(self.sj.jxd, vector_fn_sig)
            self._jpd = _Compiled(self.sj.jpd, vector_fn_sig)
        self.stats = np.zeros(3, dtype=np.int64)

    def __call__(self, t, x, p, S, out_index, S_out, branch, n_int, method_code):
        """March; returns the kernel's status (``-1``, or ``k >= 0``: not finite after interval k)."""
        from .kernels.sparse_march import sparse_march
        from .model.sparsity import extend
        c = self.model.constants
        S_in = S.copy()
        for _ in range(_MAX_EXTEND + 1):
            sj = self.sj
            S[...] = S_in
            status = sparse_march(self._jacs, self._jxd, self._jpd, 1 if sj.gather else 0, t, x, p, c, S,
                                  out_index, method_code, sj.Ap, sj.Ai, sj.Bp, sj.Bi, S_out, branch, n_int,
                                  self.stats, DENSE_STEP_MAX_STATES)
            if status > -2:
                return status
            k = -2 - status              # the adapter's pattern missed an entry at grid point k
            self.sj = extend(self.model, sj, t[k], x[k], p)
        raise PbsensError(f"model {self.model.name!r}: the Jacobians' sparsity pattern kept changing along the "
                          "trajectory; use linalg='dense'")


def runner(model) -> SparseRunner:
    """The model's :class:`SparseRunner`, built once per model and process."""
    cache = model.__dict__.setdefault("_kernels", {})
    if "sparse_runner" not in cache:
        cache["sparse_runner"] = SparseRunner(model)
    return cache["sparse_runner"]


def method_code(method):
    return codes.METHOD_CODES[method]


def state_jacobian(model, p=None):
    """``jac(t, x) -> scipy.sparse.csr_matrix``: ``A = df/dx`` on the model's sparsity pattern, for
    scipy's BDF/Radau (``solve_states(model, ..., method="BDF", jac=state_jacobian(model))``:
    sparse LU by SuperLU instead of a dense ``O(nx^3)`` factorisation)."""
    import scipy.sparse as sp

    from .model.sparsity import sparse_jacobians
    sj = sparse_jacobians(model)
    p = model.check_p(p)
    c = model.constants
    nx = model.n_states
    if sj.gather:
        from .kernels.sparse_march import gather_csr
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
