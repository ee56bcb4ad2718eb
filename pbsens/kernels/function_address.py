"""Model functions passed to kernels as plain integer addresses.

A kernel compiled once per machine takes the model's functions as first-class
function values. Passing them as numba dispatchers (or as objects with a
``__wrapper_address__``) makes numba unbox each one on every call through
Python: an import, an attribute lookup and two unpickled signatures per
function, measured 17 us per function argument here, 35 us per call for
``rhs`` and ``jac``, a third of a whole compiled state solve of PKA.

Instead, :func:`addresses` looks the two entry points of a compiled function
up once (per model and process): the C wrapper and the function in numba's
own calling convention (which also propagates exceptions). The kernel takes
them as ``int64`` values (unboxed like any integer) and rebuilds the function
value inside compiled code with :func:`vector_fn_at` / :func:`matrix_fn_at`.
The caller must keep the dispatcher alive as long as the addresses are used.
"""
from numba import types
from numba.core import cgutils
from numba.experimental.function_type import _get_jit_address, _get_wrapper_address
from numba.extending import intrinsic

from .signatures import jacs_fn, matrix_fn, vector_fn

__all__ = ["addresses", "vector_fn_at", "matrix_fn_at", "jacs_fn_at"]


def addresses(dispatcher, sig):
    """``(c_wrapper_address, jit_address)`` of a compiled dispatcher for signature ``sig``."""
    return _get_wrapper_address(dispatcher, sig), _get_jit_address(dispatcher, sig)


def _build(fntype, context, builder, args):
    sfunc = cgutils.create_struct_proxy(fntype)(context, builder)
    voidptr = context.get_value_type(types.voidptr)
    sfunc.c_addr = builder.inttoptr(args[0], voidptr)
    sfunc.py_addr = cgutils.get_null_value(voidptr)   # never boxed back to Python
    sfunc.jit_addr = builder.inttoptr(args[1], voidptr)
    return sfunc._getvalue()


def _fn_at(fntype, type_name, like):
    """The intrinsic ``<type_name>_at(c_addr, jit_addr)`` that rebuilds a ``fntype`` function value."""
    def fn_at(typingctx, c_addr, jit_addr):
        if not (isinstance(c_addr, types.Integer) and isinstance(jit_addr, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            return _build(fntype, context, builder, args)

        return fntype(c_addr, jit_addr), codegen

    fn_at.__name__ = fn_at.__qualname__ = f"{type_name}_at"
    fn_at.__doc__ = f"The ``{type_name}`` (``{like}``-like) function at the given addresses (from :func:`addresses`)."
    return intrinsic(fn_at)


vector_fn_at = _fn_at(vector_fn, "vector_fn", "rhs_into")
matrix_fn_at = _fn_at(matrix_fn, "matrix_fn", "jac_x_into")
jacs_fn_at = _fn_at(jacs_fn, "jacs_fn", "jacs_into")
