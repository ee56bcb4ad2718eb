"""The options of :func:`pbsens.sensitivities`, validated once: :class:`SensitivityOptions`.

:func:`check_options` checks every option (and, first, the model and the shapes of ``t_eval``
and ``S0``) in a fixed order, so that a call with several bad arguments always names the same
one, and returns the options as a frozen record; the march setup and the marches read them
from there. No numba import here (``max_substeps`` is checked by the march kernel's own rule).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import sparse as sparse_path
from ..errors import PbsensError
from ..kernels import codes
from .methods import METHOD_INFO, METHODS, MethodInfo
from ..model.model import check_model

__all__ = ["SensitivityOptions", "check_options", "DEFAULT_SUBSTEPS", "DEFAULT_MIDPOINT"]

#: Sub-intervals per accepted step of the post-hoc grid when the states come from Rodas5P
#: (``substeps=None``); chosen from benchmarks/work_precision.py (docs/PERFORMANCE.md).
DEFAULT_SUBSTEPS = {"rodas5p": 4}

#: ``method="exp2"``: the midpoint correction on the intervals ``substeps`` defines as long,
#: instead of sub-steps (``midpoint=None``); chosen from benchmarks/work_precision.py.
DEFAULT_MIDPOINT = True


@dataclass(frozen=True)
class SensitivityOptions:
    """The options of one :func:`pbsens.sensitivities` call, validated (:func:`check_options`).

    Numbers are converted (``n_factor``, ``eq_tol``, ``reuse_tol``, ``freeze``,
    ``max_grid_factor``, ``sens_rtol``, ``sens_atol`` to float; ``n_max``, ``substeps``,
    ``max_refine``, ``max_split`` to int); ``sens_atol`` is 0.0 when ``sens_rtol`` is given
    without it. ``substeps=None`` and ``state_error="auto"`` are resolved later, where the
    trajectory is known (:mod:`pbsens.sensitivity.march_setup`, :mod:`pbsens.sensitivity.state_error`).
    ``use_sparse``: the ``linalg`` choice made for this model and method
    (:func:`pbsens.sensitivity.sparse.choose`).

    Attributes
    ----------
    method : {"pbsr", "exp", "pbs", "exp2", "pbsr2"}
        The post-hoc method; its properties in :attr:`info` (:mod:`pbsens.sensitivity.methods`).
    solver, rtol, atol :
        State solver settings when solving states here (:func:`solve_states`).
    n_factor, n_max, eq_tol : float, int, float
        PBSR switch (Algorithm 2): ``n_int = ceil(n_factor h ||A_k||)`` sub-intervals
        (so that ``h ||A|| <= 1/n_factor`` per sub-step); the exponential step when
        ``n_int > n_max`` ("exp-stiff") or when ``||A_k+1 - A_k|| <= eq_tol ||A_k||``
        and ``||B_k+1 - B_k|| <= eq_tol ||B_k||`` ("exp-equilibrium"). Paper: 10, 100, 1e-4.
    norm : {"1", "inf", "fro", "scaled"}
        Matrix norm of the switch; default the 1-norm (max column sum). ``"scaled"``:
        ``n_int`` from the 1-norm of ``D^-1 A_k D``, ``D = diag(|x_k| + atol)`` (``atol``
        the state solver's; invariant under unit changes of a state), the equilibrium
        test in the 1-norm.
    interpolation : {"linear", "hermite", "dense"}
        States at refinement points: linear between grid states (the paper), cubic
        Hermite using ``f`` at both ends, or the solver's dense output (needs a
        Trajectory from :func:`solve_states`).
    reuse_tol : float
        An exponential step reuses the previous interval's ``exp(hA)`` and phi
        functions when ``h`` and the matrix (``A_k``; ``(A_k + A_k+1)/2`` for the
        second-order step) differ from theirs by at most ``reuse_tol`` relative
        (1-norm). The default, 1e-12, only catches changes near rounding level, as
        at an equilibrium where the state moves in its last digits; ``A_k`` is
        known only to the state solver's ``rtol`` anyway. Measured at rtol 1e-5
        against 1e-13 (the default before): CaMKII reuses 169 instead of 123 of
        LSODA's 423 intervals (180 instead of 133 of Rodas5P's) with the median
        and largest error of ``S`` unchanged to 3 digits (Rodas5P exp2 median
        5.4e-12 -> 5.8e-12); PKA and Chua unchanged. 0: reuse on equality
        only. An exp2 step that reuses them also reuses its forcing term
        ``G1 B_k + G2 B_k+1`` while ``B_k``, ``B_k+1`` stay within ``reuse_tol`` of
        the cached ones (relative to their largest entry): one product instead of three.
        (PBS sub-steps reuse their step matrices only when the Jacobians are
        exactly equal, which leaves the result unchanged.)
    substeps : int, optional
        Refine the grid so that no interval is longer than ``1/substeps`` of the
        state solver's accepted step it lies in (longer intervals are split into
        equal parts), states at the new points from the solver's dense output
        (:func:`pbsens.solvers.refine.refine_grid`; never a second state solve).
        A high-order solver such as ``"rodas5p"`` takes few long steps, on which
        the first/second-order post-hoc steps lose accuracy. With ``"pbsr"`` /
        ``"pbsr2"`` (and linear or Hermite interpolation) the switch is decided on
        the solver's grid and only the exponential intervals are refined; PBS
        intervals take their own ``n_int`` sub-steps. Default (None):
        ``DEFAULT_SUBSTEPS["rodas5p"]`` (4) for a Rodas5P trajectory, 1 (the
        solver's grid as is) for every other solver. Values above 1 need a
        Trajectory with dense output.
    estimate_error : bool
        Fill ``error_estimate`` (and ``error_estimate_params``): an estimate of
        ``E_k`` (METHOD.md sections 7 and 11) by step doubling on the same trajectory,
        one more march on the grid with every interval bisected (states there from
        the dense output, or cubic Hermite interpolation). Default False: the
        estimate costs two to three more marches (and, with ``state_error="auto"``,
        a second state solve), 3-20x the cost of the sensitivities themselves on the
        paper's models (METHOD.md section 11), too much to pay on every call inside
        an optimiser or sampler; ask for it where the answer matters.
    sens_rtol, sens_atol : float, optional
        Tolerance on ``S``: grid intervals whose estimated local error exceeds their
        share of ``sens_rtol ||S_k||_F + sens_atol`` (``sens_atol`` default 0) are
        subdivided, states from the trajectory's dense output (or Hermite
        interpolation; never a second state solve), until the estimate meets the
        tolerance at every grid point, or ``max_refine`` rounds, or a grid of
        ``max_grid_factor`` times the solver's points (then an ``AccuracyWarning``
        names the time range). ``r.subdivisions`` counts the intervals split.
        First-order marches (``exp``; ``pbsr`` with ``exp-stiff`` intervals) return the
        extrapolation of the marches on the grid bisected once and twice, and stop on
        that result's own estimate (METHOD.md section 11).
    state_error : {"auto", "resolve", None}
        ``"resolve"``: estimate the error of ``S`` caused by the state solve's own error:
        one more state solve at ``rtol/10``, ``atol/10`` (needs a Trajectory) and one
        more march on the same grid with those states; ``(10/9) ||S - S_tight|| /
        ||S_tight||`` is stored in ``state_error_estimate`` and added, as the signed
        matrix, to the discretization part in ``error_matrix`` (``error_estimate`` is
        its norm); an ``AccuracyWarning`` names the time range where it
        exceeds 1e-2. Post-hoc sensitivities cannot be more accurate than the states
        they are computed on. ``"auto"`` (default): ``"resolve"`` when ``trajectory``
        is a Trajectory (or states are solved here) and ``estimate_error`` is on or
        ``sens_rtol`` is given, else None.
    tighten_states : bool
        With ``sens_rtol`` and the state part estimated (``state_error`` resolving):
        where the state part exceeds ``sens_rtol``, return ``x`` and ``S`` on states
        solved tighter instead, at ``rtol/f`` and ``atol/f`` (``f = 10``: the solve
        the estimate made; else ``2 max E_state / sens_rtol`` rounded up to a power of
        ten, at most 1e4: one more state solve), the grid kept; the state part is
        then ``E_state / f`` (taken proportional to the tolerance) and
        ``options["state_tighten"] = f``. ``False``: keep the trajectory's states
        (the state part then bounds the accuracy).
    max_refine, max_split, max_grid_factor : int, int, float
        Limits of the ``sens_rtol`` refinement: rounds (12), parts per interval and
        round (64), grid size relative to the state solver's (200).
    max_substeps : int
        Bound on the work of one march: the total number of PBS sub-steps
        (``n_int`` summed over the refined intervals). Checked before an interval is
        refined; beyond it a :class:`SolverError` names the interval and the budget
        (``method="pbs"`` never switches to the exponential step, so on a stiff
        problem ``n_int`` grows without bound). Default 10^7.
    linalg : {"auto", "dense", "sparse"}
        Linear algebra of the march. ``"dense"``: dense ``n x n`` Jacobians and matrix
        functions (every method). ``"sparse"`` (``exp`` and ``exp2`` only): CSR Jacobians
        and the action of the exponential (Al-Mohy and Higham 2011) on ``S``, no dense
        ``n x n`` matrix (METHOD.md section 12); for large models with sparse Jacobians.
        ``"auto"`` (default): sparse for ``exp``/``exp2`` when the model has at least
        ``pbsens.sensitivity.sparse.SPARSE_MIN_STATES`` states and ``A``'s density is at most
        ``SPARSE_MAX_DENSITY`` (docs/PERFORMANCE.md), else dense.
    freeze : float
        ``method="exp2"`` on a grid refined with ``substeps`` (dense linear algebra, no
        ``sens_rtol``): over a gap ``[t_a, t_e]`` of the state solver's grid that the
        refinement split, exponentiate ``(A(t_a) + A(t_e))/2`` on every part (one matrix
        function per gap when the parts are equal; ``B`` still at every refined point) where
        ``||A(t_e) - A(t_a)||_F ||S(t_a)||_F <= freeze ||B(t_e) - B(t_a)||_F``: the change of
        the forcing ``A S + B`` over the gap is mostly ``B``'s, which the refinement resolves
        (METHOD.md section 13). Default 1 (measured on PKA, CaMKII, Chua: docs/PERFORMANCE.md);
        0 or False: every interval its own matrix; ``inf``: freeze every refined gap.
    midpoint : bool, optional
        ``method="exp2"`` on a Trajectory with dense output: the intervals that
        ``substeps`` would split are marched in one exp2 step with the midpoint
        correction instead (one more Jacobian evaluation, at the midpoint's state from the
        dense output; METHOD.md section 14), not in sub-steps. On the sparse path
        (``linalg``) the intervals that take the action of the exponential (short or mildly
        stiff ones) are two exp2 half steps through that midpoint, extrapolated with the
        whole step, instead. Default (None):
        True when ``DEFAULT_MIDPOINT`` (measured: docs/PERFORMANCE.md) and ``sens_rtol`` is not
        used (it keeps the sub-steps); with ``estimate_error`` the estimate's marches are
        corrected too (METHOD.md section 11); False: sub-steps.

    use_sparse : bool
        The march takes the sparse path (``linalg``).
    """

    method: str
    solver: str
    rtol: object
    atol: object
    n_factor: float
    n_max: int
    eq_tol: float
    norm: str
    interpolation: str
    reuse_tol: float
    substeps: int | None
    estimate_error: bool
    sens_rtol: float | None
    sens_atol: float | None
    state_error: str | None
    max_refine: int
    max_split: int
    max_grid_factor: float
    max_substeps: int
    tighten_states: bool
    linalg: str
    freeze: float
    midpoint: bool | None
    use_sparse: bool

    @property
    def info(self) -> MethodInfo:
        """The method's record (:data:`pbsens.sensitivity.methods.METHOD_INFO`)."""
        return METHOD_INFO[self.method]

    @property
    def method_code(self) -> int:
        return METHOD_INFO[self.method].code

    @property
    def norm_code(self) -> int:
        return codes.NORM_CODES[self.norm]

    @property
    def interp_code(self) -> int:
        return codes.INTERP_CODES[self.interpolation]


def check_options(model, *, t_eval, S0, method, solver, rtol, atol, n_factor, n_max, eq_tol, norm, interpolation,
                  reuse_tol, substeps, estimate_error, sens_rtol, sens_atol, state_error, max_refine, max_split,
                  max_grid_factor, max_substeps, tighten_states, linalg, freeze, midpoint) -> SensitivityOptions:
    """Validate the arguments of :func:`pbsens.sensitivities` that need no trajectory.

    The model, then the shapes of ``t_eval`` and ``S0`` (their values are checked against
    the grid and the model later), then every option; the first bad one raises a
    :class:`PbsensError` naming it. ``rtol``, ``atol`` go to the state solver, which checks
    them; ``tighten_states`` is read as a truth value.
    """
    check_model(model)
    if t_eval is not None and (np.ndim(t_eval) > 1 or np.iscomplexobj(t_eval)):
        raise PbsensError(f"'t_eval' must be a one-dimensional array of real times, got shape {np.shape(t_eval)}")
    if S0 is not None and np.iscomplexobj(S0):
        raise PbsensError("'S0' must be real, got complex values")
    from ..solvers import SOLVERS
    if not isinstance(solver, str) or solver not in SOLVERS:
        raise PbsensError(f"'solver' must be one of {sorted(SOLVERS)}, got {solver!r}")
    if not isinstance(method, str) or method not in METHOD_INFO:
        raise PbsensError(f"'method' must be one of {', '.join(METHODS)} (or use forward_sensitivities "
                          f"for the forward reference), got {method!r}")
    if norm not in codes.NORM_CODES:
        raise PbsensError(f"'norm' must be one of {sorted(codes.NORM_CODES)}, got {norm!r}")
    if interpolation not in codes.INTERP_CODES:
        raise PbsensError(f"'interpolation' must be one of {sorted(codes.INTERP_CODES)}, got {interpolation!r}")
    n_factor = _positive(n_factor, "n_factor")
    n_max = _positive(n_max, "n_max", integer=True)
    eq_tol = _positive(eq_tol, "eq_tol")
    if isinstance(reuse_tol, bool) or not isinstance(reuse_tol, (int, float, np.integer, np.floating)) \
            or not 0 <= reuse_tol < 1:
        raise PbsensError(f"'reuse_tol' must be a number in [0, 1), got {reuse_tol!r}")
    if substeps is not None:
        substeps = _positive(substeps, "substeps", integer=True)
    if midpoint is not None and not isinstance(midpoint, (bool, np.bool_)):
        raise PbsensError(f"'midpoint' must be True, False or None, got {midpoint!r}")
    if not isinstance(estimate_error, (bool, np.bool_)):
        raise PbsensError(f"'estimate_error' must be True or False, got {estimate_error!r}")
    if not isinstance(freeze, (bool, np.bool_, int, float, np.integer, np.floating)) or not freeze >= 0:
        raise PbsensError(f"'freeze' must be a non-negative number (or inf), got {freeze!r}")
    if sens_rtol is not None:
        sens_rtol = _positive(sens_rtol, "sens_rtol")
        sens_atol = 0.0 if sens_atol is None else float(_nonnegative(sens_atol, "sens_atol"))
    elif sens_atol is not None:
        raise PbsensError("'sens_atol' needs 'sens_rtol' (give sens_rtol=... as well)")
    if state_error not in (None, "resolve", "auto"):
        raise PbsensError(f"'state_error' must be 'auto', 'resolve' or None, got {state_error!r}")
    max_refine = _positive(max_refine, "max_refine", integer=True)
    from ..kernels.march import check_max_substeps   # numba kernels load on first use, not at import
    check_max_substeps(max_substeps)
    max_split = _positive(max_split, "max_split", integer=True)
    max_grid_factor = _positive(max_grid_factor, "max_grid_factor")
    use_sparse = sparse_path.choose(model, method, linalg)
    return SensitivityOptions(
        method=method, solver=solver, rtol=rtol, atol=atol, n_factor=n_factor, n_max=n_max, eq_tol=eq_tol,
        norm=norm, interpolation=interpolation, reuse_tol=float(reuse_tol), substeps=substeps,
        estimate_error=estimate_error, sens_rtol=sens_rtol, sens_atol=sens_atol, state_error=state_error,
        max_refine=max_refine, max_split=max_split, max_grid_factor=max_grid_factor, max_substeps=max_substeps,
        tighten_states=tighten_states, linalg=linalg, freeze=float(freeze), midpoint=midpoint,
        use_sparse=use_sparse)


def _positive(v, name, integer=False):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not np.isfinite(v) \
            or v <= 0 or (integer and int(v) != v):
        raise PbsensError(f"{name!r} must be a positive {'integer' if integer else 'number'}, got {v!r}")
    return int(v) if integer else float(v)


def _nonnegative(v, name):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not np.isfinite(v) \
            or v < 0:
        raise PbsensError(f"{name!r} must be a non-negative number, got {v!r}")
    return float(v)
