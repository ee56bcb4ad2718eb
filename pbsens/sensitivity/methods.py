"""The post-hoc sensitivity methods and their properties: one record per method.

Every property the front door, the error estimate and the sparse path need of a method
(order, PBSR switch, sparse march, midpoint correction, ...) is read from
:data:`METHOD_INFO` instead of being re-derived from the method's name. A new method
adds its kernel code (``kernels/codes.py``) and one :class:`MethodInfo` here.
No numba import here.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..kernels import codes

__all__ = ["MethodInfo", "METHOD_INFO", "METHODS", "FORWARD", "method_info", "methods_with"]


@dataclass(frozen=True)
class MethodInfo:
    """What one post-hoc method does (METHOD.md sections 3-5, 11-14).

    Attributes
    ----------
    name : str
        As passed to ``sensitivities(method=...)``.
    code : int
        The march kernel's code (``kernels.codes.METHOD_*``).
    order : int
        Global order in the step length of the march where no interval falls back to a
        lower-order step (the step-doubling estimate's ``p``).
    switches : bool
        PBSR's switch (Algorithm 2): PBS with refinement, the exponential step on stiff
        ("exp-stiff") and equilibrium ("exp-equilibrium") intervals. The switch can be
        decided on the solver's grid before ``substeps`` refines it.
    exp_order : int or None
        Order of its exponential step (1: the exponential step (3.10), 2: the
        exponential-midpoint step exp2); None: it never takes one.
    exponential : bool
        The exponential step on every interval (no PBS sub-steps).
    sparse : bool
        Has a sparse march (``linalg="sparse"``, :mod:`pbsens.sensitivity.sparse`).
    midpoint : bool
        The midpoint correction of long solver intervals applies (``midpoint=``,
        METHOD.md section 14).
    freeze : bool
        One exponentiated matrix per split solver gap applies (``freeze=``, METHOD.md
        section 13).
    branch : int or None
        The kernels' branch code (``kernels.codes.BRANCH_*``) of every interval of an
        exponential method; None for the others (their branch is decided per interval).
    """

    name: str
    code: int
    order: int
    switches: bool
    exp_order: int | None
    exponential: bool
    sparse: bool
    midpoint: bool
    freeze: bool
    branch: int | None

    @property
    def stiff_order(self) -> int:
        """Order of the march if any interval took the switch's "exp-stiff" branch."""
        return self.exp_order if self.switches else self.order


#: One record per post-hoc method, in the kernels' code order.
METHOD_INFO = {info.name: info for info in (
    MethodInfo("exp", codes.METHOD_EXP, order=1, switches=False, exp_order=1, exponential=True, sparse=True,
               midpoint=False, freeze=False, branch=codes.BRANCH_EXP),
    MethodInfo("pbs", codes.METHOD_PBS, order=2, switches=False, exp_order=None, exponential=False, sparse=False,
               midpoint=False, freeze=False, branch=None),
    MethodInfo("pbsr", codes.METHOD_PBSR, order=2, switches=True, exp_order=1, exponential=False, sparse=False,
               midpoint=False, freeze=False, branch=None),
    MethodInfo("exp2", codes.METHOD_EXP2, order=2, switches=False, exp_order=2, exponential=True, sparse=True,
               midpoint=True, freeze=True, branch=codes.BRANCH_EXP2),
    MethodInfo("pbsr2", codes.METHOD_PBSR2, order=2, switches=True, exp_order=2, exponential=False, sparse=False,
               midpoint=False, freeze=False, branch=None),
)}

#: Post-hoc methods accepted by :func:`pbsens.sensitivities`.
METHODS = tuple(METHOD_INFO)

#: The forward-sensitivity reference's name where a post-hoc method or it is accepted
#: (:func:`pbsens.forward_sensitivities`; PEtab problems, likelihoods, the command line).
FORWARD = "fs"

_BY_CODE = {info.code: info for info in METHOD_INFO.values()}


def method_info(method) -> MethodInfo:
    """The record of a method, given by name or by kernel code (``KeyError`` if unknown)."""
    if isinstance(method, str):
        return METHOD_INFO[method]
    return _BY_CODE[int(method)]


def methods_with(**properties) -> tuple:
    """Names of the methods whose records have all the given values, e.g. ``methods_with(sparse=True)``."""
    return tuple(name for name, info in METHOD_INFO.items()
                 if all(getattr(info, k) == v for k, v in properties.items()))
