"""Numba types shared by the generated model code and the kernels.

Every compiled model function has the form ``f(t, x, p, c, out)``: time, state
(``nx``), parameters (``np``), model constants ``c`` (a flat float64 array that
generic models such as the random linear system use to carry their matrices;
empty for symbolic models) and a preallocated output that the function fills.
Kernels take these functions as first-class function arguments, so each kernel
is compiled (and cached on disk) once per machine, not once per model.
"""
from numba import njit, types

f8 = types.float64
vec = types.Array(types.float64, 1, "C")
mat = types.Array(types.float64, 2, "C")
tens = types.Array(types.float64, 3, "C")
ivec = types.Array(types.int64, 1, "C")
i8vec = types.Array(types.int8, 1, "C")

#: ``rhs_into(t, x, p, c, f)``; also the output map ``h(t, x, p, c, y)``.
vector_fn_sig = types.void(f8, vec, vec, vec, vec)
#: ``jac_x_into(t, x, p, c, A)``, ``jac_p_into(t, x, p, c, B)``.
matrix_fn_sig = types.void(f8, vec, vec, vec, mat)
#: ``jacs_into(t, x, p, c, A, B)``: both Jacobians with shared subexpressions.
jacs_fn_sig = types.void(f8, vec, vec, vec, mat, mat)
#: ``x0_into(p, c, x0)`` and ``dx0_dp_into(p, c, S0)``.
init_vec_sig = types.void(vec, vec, vec)
init_mat_sig = types.void(vec, vec, mat)

vector_fn = types.FunctionType(vector_fn_sig)
matrix_fn = types.FunctionType(matrix_fn_sig)
jacs_fn = types.FunctionType(jacs_fn_sig)


def njit_quiet(sig, **options):
    """``njit(sig, **options)``, compiling with numba's NumbaExperimentalFeatureWarning about
    first-class function types silenced (nothing else): that feature is how the model's
    functions reach the kernel (module docstring); numba warns when it types a
    kernel's call that passes them on to another kernel (on a cold cache, in the user's first call)."""
    import warnings

    from numba.core.errors import NumbaExperimentalFeatureWarning

    def compile_(fn):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*First-class function type feature is experimental",
                                    category=NumbaExperimentalFeatureWarning)
            return njit(sig, **options)(fn)

    return compile_
