"""pbsens: post-hoc parameter sensitivities of ODE models by the Peano-Baker series.

The public names are re-exported here; see ``docs`` and the README.
"""
from ._version import __version__  # noqa: E402,F401

from .errors import ModelError, PbsensError, SolverError, UnsupportedModelError  # noqa: E402
from .forward import forward_sensitivities  # noqa: E402
from .inference import (GaussianLikelihood, LogPosterior, MCMCResult, NormalPrior,  # noqa: E402
                        fisher_information, output_sensitivities, smmala)
from .metrics import kappa_bar, relative_error  # noqa: E402
from .model.cache import cache_clear, cache_info  # noqa: E402
from .model.library import load_model, random_linear_model  # noqa: E402
from .model.model import Model  # noqa: E402
from .model.sbml import to_sbml  # noqa: E402
from .model.spec import ModelSpec  # noqa: E402
from .result import SensitivityResult  # noqa: E402
from .sensitivities import sensitivities  # noqa: E402
from .solvers import Trajectory, solve_states  # noqa: E402
from .inference.chains import sample  # noqa: E402
from .batches import evaluate_many, sensitivities_many  # noqa: E402

__all__ = ["__version__", "PbsensError", "ModelError", "SolverError", "UnsupportedModelError",
           "Model", "ModelSpec", "load_model", "random_linear_model", "Trajectory", "solve_states",
           "sensitivities", "SensitivityResult", "to_sbml",
           "forward_sensitivities", "relative_error", "kappa_bar", "fisher_information", "output_sensitivities", "GaussianLikelihood", "NormalPrior",
           "LogPosterior", "smmala", "MCMCResult", "cache_info", "cache_clear", "sample",
           "sensitivities_many", "evaluate_many"]
