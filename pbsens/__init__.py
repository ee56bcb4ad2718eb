"""pbsens: post-hoc parameter sensitivities of ODE models by the Peano-Baker series.

The public names are re-exported here; see ``docs`` and the README.
"""
from ._version import __version__  # noqa: E402,F401

from .errors import CrossCheckWarning, ModelError, PbsensError, SolverError, UnsupportedModelError  # noqa: E402
from .sensitivity.forward import forward_sensitivities  # noqa: E402
from .inference import (GaussianLikelihood, LogPosterior, MCMCResult, NormalPrior,  # noqa: E402
                        fisher_information, output_sensitivities, smmala)
from .sensitivity.metrics import kappa_bar, relative_error  # noqa: E402
from .model.cache import cache_clear, cache_info  # noqa: E402
from .model.library import load_model, random_linear_model  # noqa: E402
from .model.model import Model  # noqa: E402
from .model.sbml import to_sbml  # noqa: E402
from .model.spec import ModelSpec  # noqa: E402
from .sensitivity.result import SensitivityResult  # noqa: E402
from .sensitivity.posthoc import sensitivities  # noqa: E402
from .solvers import Trajectory, solve_states  # noqa: E402
from .inference.chains import sample  # noqa: E402
from .batches import evaluate_many, sensitivities_many  # noqa: E402
from .calibration import FitResult, fit, profile  # noqa: E402

__all__ = ["__version__", "PbsensError", "ModelError", "SolverError", "UnsupportedModelError", "CrossCheckWarning",
           "Model", "ModelSpec", "load_model", "random_linear_model", "Trajectory", "solve_states",
           "sensitivities", "SensitivityResult", "to_sbml",
           "forward_sensitivities", "relative_error", "kappa_bar", "fisher_information", "output_sensitivities", "GaussianLikelihood", "NormalPrior",
           "LogPosterior", "smmala", "MCMCResult", "cache_info", "cache_clear", "sample",
           "sensitivities_many", "evaluate_many", "fit", "profile", "FitResult"]

#: Subpackages and modules reachable as attributes after ``import pbsens`` (imported on first
#: use, so that ``import pbsens`` itself loads no pandas, petab, dask, sympy or matplotlib).
_LAZY = {"petab": "pbsens.petab", "problems": "pbsens.problems", "inference": "pbsens.inference",
         "parallel": "pbsens.parallel", "batches": "pbsens.batches", "solvers": "pbsens.solvers",
         "model": "pbsens.model", "kernels": "pbsens.kernels", "errors": "pbsens.errors",
         "report": "pbsens.report", "plot": "pbsens.report.plot", "analysis": "pbsens.report.analysis",
         "sensitivity": "pbsens.sensitivity", "simulation": "pbsens.simulation", "system": "pbsens.system",
         "calibration": "pbsens.calibration"}


def __getattr__(name):
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'pbsens' has no attribute {name!r}")
    import importlib
    module = importlib.import_module(target)
    globals()[name] = module
    return module


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
