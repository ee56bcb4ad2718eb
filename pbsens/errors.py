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


class ConvergenceWarning(PbsensWarning):
    """MCMC draws that are probably not a sample of the posterior.

    Issued by :func:`pbsens.sample` (R-hat above 1.01, bulk ESS below 100 per chain,
    a parameter pinned to a bound, a chain that hardly moves) and by
    :func:`pbsens.smmala` (a start on a bound, a chain that hardly moves or sits on a
    bound). The message names the parameters and chains and says what to try.

    Attributes
    ----------
    kind : str or None
        ``"rhat"``, ``"ess"``, ``"bound"``, ``"stuck"`` or ``"start"``.
    parameters : list of str
        The parameters concerned (empty when the whole chain is).
    chains : list of int
        The chains concerned.
    """

    def __init__(self, message, kind=None, parameters=(), chains=()):
        super().__init__(message)
        self.kind = kind
        self.parameters = list(parameters)
        self.chains = [int(c) for c in chains]

    def __reduce__(self):
        return type(self), (str(self), self.kind, self.parameters, self.chains)


class CrossCheckWarning(PbsensWarning):
    """A cross-check found two independent computations of a PEtab condition's llh or gradient
    further apart than their error estimates allow (:func:`pbsens.problems.cross_check.cross_check`).

    The message names the condition (``simulationConditionId``, and the preequilibration's if
    any), each quantity and the numbers.

    Attributes
    ----------
    condition : str or None
        ``"<preeq>:<sim>"`` or ``"<sim>"`` (as :attr:`Problem.conditions`).
    simulation_condition_id : str or None
    preequilibration_id : str or None
    quantities : list of str
        ``"llh"`` and/or ``"gradient[<parameterId>]"``.
    """

    def __init__(self, message, condition=None, simulation_condition_id=None, preequilibration_id=None,
                 quantities=()):
        super().__init__(message)
        self.condition = condition
        self.simulation_condition_id = simulation_condition_id
        self.preequilibration_id = preequilibration_id
        self.quantities = list(quantities)

    def __reduce__(self):
        return type(self), (str(self), self.condition, self.simulation_condition_id, self.preequilibration_id,
                            self.quantities)
