"""Calibration of PEtab problems: multi-start fits (:func:`fit`), likelihood profiles
(:func:`profile`) and their results."""
from .multistart import DEFAULT_FIT_METHOD, DEFAULT_REFINE, METHOD_POLICIES, fit
from .profiles import ParameterProfile, ProfileResult, profile
from .objective import FitError, Objective
from .optimizers import DEFAULT_OPTIMIZER, OPTIMIZERS
from .result import CONVERGED_LLH_TOL, FitResult, StartResult
from .starts import draw_starts

__all__ = [
           "CONVERGED_LLH_TOL",
           "DEFAULT_FIT_METHOD",
           "DEFAULT_REFINE",
           "DEFAULT_OPTIMIZER",
           "METHOD_POLICIES",
           "OPTIMIZERS",
           "FitError",
           "FitResult",
           "Objective",
           "StartResult",
           "draw_starts",
           "fit",
           "profile",
           "ProfileResult",
           "ParameterProfile",
]
