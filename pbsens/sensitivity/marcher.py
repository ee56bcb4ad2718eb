"""One march of the sensitivity equation over a grid: :class:`Marcher`.

The step-doubling estimate, the ``sens_rtol`` refinement and the state part of the error
march the same call several times, on different grids or states; a :class:`Marcher` holds
what stays the same (model, parameters, initial sensitivity, options, bound kernels) and
runs the dense march kernel (:mod:`pbsens.kernels.march`) or the sparse path
(:mod:`pbsens.sensitivity.sparse`) on the grid it is given.
"""
from __future__ import annotations

import numpy as np

from ..system import memory
from . import sparse as sparse_path
from ..errors import PbsensError, SolverError
from ..kernels import codes

__all__ = ["Marcher"]


class Marcher:
    """The marches of one :func:`pbsens.sensitivities` call.

    ``opts``: the call's :class:`~pbsens.sensitivity.options.SensitivityOptions`; ``setup``:
    its :class:`~pbsens.sensitivity.march_setup.MarchSetup`; ``bound``: the model's bound kernels
    ``(march, plan)``.
    """

    def __init__(self, model, opts, setup, bound):
        self.model, self.opts, self.setup = model, opts, setup
        self.bound_march, self.bound_plan = bound

    def __call__(self, tg, xg, oi, n_out, dense=None, plan_in=None, gap_end=None, mid=None):
        """March over the grid ``tg`` (states ``xg``), storing S where ``oi >= 0``; ``plan_in``:
        the switch's (branch, n_int) per interval, decided beforehand; ``gap_end``: per interval,
        the index of its solver gap's end (exp2 freezing), None: none frozen; ``dense``: the
        states' dense output (default the trajectory's); ``mid``: the midpoint correction's plan.

        Returns ``(S_out, branch, n_int, reused)``, ``S_out`` of shape (n_out, nx, len(params)).
        """
        K = tg.size
        if plan_in is None:
            branch = np.empty(K - 1, dtype=np.int8)
            n_int = np.empty(K - 1, dtype=np.int64)
        else:
            branch, n_int = plan_in
        reused = np.zeros(K - 1, dtype=np.int8)
        if self.opts.use_sparse:
            return self._sparse(tg, xg, oi, n_out, branch, n_int, mid) + (reused,)
        S_out = self._dense(tg, xg, oi, n_out, self.setup.sol if dense is None else dense, plan_in is not None,
                            branch, n_int, reused, gap_end, mid)
        return S_out, branch, n_int, reused

    def _sparse(self, tg, xg, oi, n_out, branch, n_int, mid):
        model, setup = self.model, self.setup
        S_run = np.ascontiguousarray(setup.S.copy())
        S_out = memory.empty((n_out, model.n_states, setup.sel.size))
        status = sparse_path.runner(model)(tg, xg, setup.p, S_run, oi, S_out, branch, n_int, self.opts.method_code,
                                           cols=setup.sel, mid=mid)
        if status >= 0:
            raise PbsensError(f"sensitivities of model {model.name!r} became NaN/inf on the grid interval "
                              f"[{tg[status]:.6g}, {tg[status + 1]:.6g}] (method {self.opts.method!r}, linalg "
                              "'sparse'); the Jacobians may be non-finite there")
        return S_out, branch, n_int

    def _dense(self, tg, xg, oi, n_out, dense, planned, branch, n_int, reused, gap_end, mid):
        model, opts, setup = self.model, self.opts, self.setup
        nx = model.n_states
        X_sub = np.empty((0, nx))
        sub_offset = np.zeros(tg.size - 1, dtype=np.int64)
        if opts.interp_code == codes.INTERP_DENSE:
            X_sub, sub_offset = self._substep_states(tg, xg, dense, branch, n_int)
            planned = True
        S_run = np.ascontiguousarray(setup.S_full.copy())         # the dense march: every parameter
        S_out = memory.empty((n_out, nx, model.n_params))
        status = self.bound_march(tg, xg, setup.p, model.constants, S_run, oi, opts.method_code, opts.n_factor,
                                  opts.n_max, opts.eq_tol, opts.norm_code, opts.interp_code, X_sub, sub_offset,
                                  1 if planned else 0, opts.reuse_tol, S_out, branch, n_int, reused,
                                  setup.scale_atol, max_substeps=opts.max_substeps, gap_end=gap_end,
                                  freeze=opts.freeze, mid=mid)
        if status >= 0:
            raise PbsensError(f"sensitivities of model {model.name!r} became NaN/inf on the grid interval "
                              f"[{tg[status]:.6g}, {tg[status + 1]:.6g}] (method {opts.method!r}); the Jacobians "
                              "may be non-finite there, or the PBS step unstable (try method='pbsr' or a finer grid)")
        if not setup.all_params:
            S_out = np.ascontiguousarray(S_out[:, :, setup.sel])
        return S_out

    def _substep_states(self, tg, xg, dense, branch, n_int):
        """``interpolation="dense"``: the switch planned here, the states at every PBS sub-step
        from the dense output; ``(X_sub, sub_offset)`` for the march kernel."""
        model, opts, setup = self.model, self.opts, self.setup
        K = tg.size
        self.bound_plan(tg, xg, setup.p, model.constants, opts.method_code, opts.n_factor, opts.n_max, opts.eq_tol,
                        opts.norm_code, branch, n_int, setup.scale_atol)
        refined = (branch == codes.BRANCH_PBS) & (n_int > 1)
        counts = np.where(refined, n_int - 1, 0)
        max_substeps = opts.max_substeps
        if counts.sum() > max_substeps or np.any(counts > max_substeps):
            k = int(np.argmax(counts))
            raise SolverError(f"method {opts.method!r} refinement: interval {k} [{tg[k]:.6g}, {tg[k + 1]:.6g}] "
                              f"needs {int(n_int[k])} sub-steps; the march needs {int(counts.sum())}, "
                              f"beyond the budget max_substeps={max_substeps} (raise max_substeps, "
                              "lower n_factor, or use method='pbsr' or 'exp')")
        sub_offset = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
        X_sub = np.empty((0, model.n_states))
        if counts.sum():
            k_of = np.repeat(np.arange(K - 1), counts)
            i_of = np.arange(counts.sum()) - sub_offset[k_of] + 1
            t_sub = tg[k_of] + i_of * (tg[k_of + 1] - tg[k_of]) / n_int[k_of]
            X_sub = np.ascontiguousarray(dense(t_sub).T)
        return X_sub, sub_offset
