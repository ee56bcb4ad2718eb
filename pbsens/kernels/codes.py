"""Integer codes shared by the kernels and the Python front door (no numba import here)."""

#: Sensitivity methods of the march kernel.
METHOD_EXP, METHOD_PBS, METHOD_PBSR, METHOD_EXP2, METHOD_PBSR2 = 0, 1, 2, 3, 4
METHOD_CODES = {"exp": METHOD_EXP, "pbs": METHOD_PBS, "pbsr": METHOD_PBSR,
                "exp2": METHOD_EXP2, "pbsr2": METHOD_PBSR2}
#: How states at refinement points are obtained.
INTERP_LINEAR, INTERP_HERMITE, INTERP_DENSE = 0, 1, 2
INTERP_CODES = {"linear": INTERP_LINEAR, "hermite": INTERP_HERMITE, "dense": INTERP_DENSE}
#: Branch per grid interval; indices into ``pbsens.sensitivity.result.BRANCH_NAMES``.
BRANCH_PBS, BRANCH_EQUILIBRIUM, BRANCH_STIFF, BRANCH_EXP, BRANCH_EXP2 = 0, 1, 2, 3, 4
#: Matrix norms: 1-norm (max column sum), inf-norm (max row sum), Frobenius; "scaled": the
#: 1-norm of ``D^-1 A D``, ``D = diag(|x_k| + atol)`` (switch only; not a ``linalg`` norm).
NORM_1, NORM_INF, NORM_FRO, NORM_SCALED = 0, 1, 2, 3
NORM_CODES = {"1": NORM_1, "inf": NORM_INF, "fro": NORM_FRO, "scaled": NORM_SCALED}
