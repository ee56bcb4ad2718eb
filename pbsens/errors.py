"""Exceptions raised by pbsens.

Every error that a user can cause derives from :class:`PbsensError`; its message
names the argument (or model element) that was wrong and what was wrong with it.
"""


class PbsensError(ValueError):
    """Invalid input or a failed computation in pbsens."""


class ModelError(PbsensError):
    """A model file or model specification is invalid."""


class UnsupportedModelError(ModelError):
    """A model uses constructs pbsens cannot represent (e.g. SBML events).

    Attributes
    ----------
    unsupported : list of (str, str)
        ``(kind, id)`` pairs naming every unsupported construct found.
    """

    def __init__(self, message, unsupported=()):
        super().__init__(message)
        self.unsupported = list(unsupported)


class SolverError(PbsensError):
    """An ODE solver failed (state solve, forward sensitivities, perturbed solves)."""


class PbsensWarning(UserWarning):
    """Base class of the warnings pbsens issues."""


class AccuracyWarning(PbsensWarning):
    """A result is probably less accurate than asked or than is safe to use.

    Issued when the estimated error of the state solve exceeds 1e-2, when
    ``sens_rtol`` could not be met within the refinement limit, and when
    :func:`pbsens.relative_error` compares results computed on different
    trajectories. The message names the time range.
    """
