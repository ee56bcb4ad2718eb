"""A flat view of a C-contiguous array, for elementwise loops that vectorise.

numba does not vectorise the kernels' elementwise loops over small 2-D arrays
well: with 11 or 21 columns, the per-row loop set-up costs as much as the
arithmetic (measured on this machine: 0.28 us for two 11 x 11 loops, 0.10 us
over flat arrays). ``A.reshape(A.size)`` gives a flat view, but through a
helper call (``numba_attempt_nocopy_reshape``, ~20 ns) on every call.
:func:`flat` builds the 1-D view directly: same data, same owner, no call.
"""
from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

__all__ = ["flat"]


@intrinsic
def flat(typingctx, arr):
    """``arr.reshape(arr.size)`` for a C-contiguous array of any dimension, without a helper call.

    Typing fails (numba raises at compile time) for arrays that are not
    C-contiguous, for which no flat view exists.
    """
    if not (isinstance(arr, types.Array) and arr.layout == "C"):
        return None
    rettype = types.Array(arr.dtype, 1, "C", readonly=not arr.mutable)
    sig = rettype(arr)

    def codegen(context, builder, signature, args):
        src = make_array(signature.args[0])(context, builder, args[0])
        dst = make_array(rettype)(context, builder)
        nitems = cgutils.pack_array(builder, [src.nitems])
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(
            context.get_data_type(arr.dtype)))
        strides = cgutils.pack_array(builder, [itemsize])
        populate_array(dst, data=src.data, shape=nitems, strides=strides,
                       itemsize=src.itemsize, meminfo=src.meminfo, parent=src.parent)
        return impl_ret_borrowed(context, builder, rettype, dst._getvalue())

    return sig, codegen
