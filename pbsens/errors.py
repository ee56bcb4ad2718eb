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
