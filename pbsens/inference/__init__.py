"""Bayesian inference with sensitivities: Fisher information (1.3), Gaussian
likelihoods of observables, priors, and the SMMALA sampler (METHOD.md section 8).

``arviz`` (the ``mcmc`` extra) is needed only by :meth:`MCMCResult.ess`.
"""
from .fisher import fisher_information
from .likelihood import LIKELIHOOD_METHODS, GaussianLikelihood
from .observables import observable_names, output_sensitivities
from .posterior import LogPosterior
from .priors import NormalPrior
from .smmala import MCMCResult, smmala

__all__ = ["fisher_information", "output_sensitivities", "observable_names", "GaussianLikelihood",
           "LIKELIHOOD_METHODS", "NormalPrior", "LogPosterior", "smmala", "MCMCResult"]
from .chains import sample  # noqa: E402
