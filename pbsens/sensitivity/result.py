"""The result object shared by every sensitivity method (PBSR, Exp, FS, ...)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SensitivityResult", "BRANCH_NAMES"]

#: Codes stored per grid interval by the kernels, and their names.
BRANCH_NAMES = ("pbs", "exp-equilibrium", "exp-stiff", "exp", "exp2")


@dataclass
class SensitivityResult:
    """Sensitivities ``S[k, i, j] = dx_i(t_k) / dp_j``.

    Attributes
    ----------
    t : ndarray (K,)
        Output times (``t_eval`` if given, else the whole grid).
    x : ndarray (K, nx)
        States at ``t``.
    S : ndarray (K, nx, np)
    method : str
        ``"pbsr"``, ``"exp"``, ``"pbs"``, ``"exp2"``, ``"pbsr2"`` or ``"fs"``.
    p, x0, S0 : ndarray
        Parameters, initial state and initial sensitivity used.
    grid : ndarray (G,) or None
        The grid the method marched over (for post-hoc methods).
    branch : ndarray of str (G-1,) or None
        Per grid interval: ``"pbs"``, ``"exp-equilibrium"``, ``"exp-stiff"`` (PBSR),
        ``"exp"``/``"exp2"`` (the exponential methods).
    n_int : ndarray of int (G-1,) or None
        Sub-intervals used per grid interval (1 for exponential steps).
    model_name : str
    param_names, state_names : list of str
    options : dict
        Everything needed to recompute: solver method and tolerances, thresholds,
        norm, interpolation. ``kappa_bar`` perturbs around ``p`` with these.
    timings : dict
        Seconds spent in the state solve (``"states"``) and the sensitivities (``"sensitivities"``).
    reused : ndarray of bool (G-1,) or None
        Per grid interval: True where an exponential step reused the previous
        interval's matrix exponential (see ``reuse_tol`` of
        :func:`~pbsens.sensitivities`), or PBS sub-steps reused their step matrices
        because the Jacobians were equal on consecutive sub-steps.
    error_estimate : ndarray (K,) or None
        Estimate of the relative error ``E_k = ||S_k - S_exact_k||_F / ||S_exact_k||_F``
        per output time (post-hoc methods; METHOD.md section 11), including the state
        solve's error when ``state_error_estimate`` is set. None for forward results.
    error_estimate_params : ndarray (K, np) or None
        The same per parameter (column ``S[:, :, j]``).
    state_error_estimate : ndarray (K,) or None
        Estimated relative error ``||x_k - x_exact_k|| / ||x_exact_k||`` of the states
        (``sensitivities(..., state_error="resolve")``).
    error_matrix : ndarray (K, nx, np) or None
        The signed estimate of ``S_k - S_exact_k`` behind ``error_estimate``: the
        step-doubling difference times its factor plus the state part's
        ``(10/9) (S - S_tight)``. ``error_estimate`` adds the two parts' norms (a
        bound); propagating an error through a jump or a later segment needs the
        matrix (:func:`pbsens.simulation.segments.simulate` with ``estimate_error=True``).
    subdivisions : int
        Number of grid intervals split by the ``sens_rtol`` refinement (0 without it).
    """

    t: np.ndarray
    x: np.ndarray
    S: np.ndarray
    method: str
    p: np.ndarray
    x0: np.ndarray
    S0: np.ndarray | None = None
    grid: np.ndarray | None = None
    branch: np.ndarray | None = None
    n_int: np.ndarray | None = None
    model_name: str = ""
    state_names: list = field(default_factory=list)
    param_names: list = field(default_factory=list)
    options: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    reused: np.ndarray | None = None
    error_estimate: np.ndarray | None = None
    error_estimate_params: np.ndarray | None = None
    state_error_estimate: np.ndarray | None = None
    subdivisions: int = 0
    error_matrix: np.ndarray | None = None

    def branch_counts(self) -> dict:
        """Number of grid intervals per branch, e.g. ``{"pbs": 120, "exp-stiff": 30}``."""
        if self.branch is None:
            return {}
        names, counts = np.unique(self.branch, return_counts=True)
        return {str(n): int(c) for n, c in zip(names, counts)}

    def __repr__(self):
        K, nx, np_ = self.S.shape
        return (f"<SensitivityResult {self.method!r} of {self.model_name!r}: {K} times, "
                f"{nx} states x {np_} parameters>")
