"""Register-tiled products of small row-major matrices: ``C = alpha A @ B + beta C``.

The march multiplies thousands of small matrices per call (11 x 11 by 11 x 35
for PKA, three per PBS sub-step). Through BLAS ``dgemm`` each such product pays
for the call, for packing ``A`` and ``B`` into panels and for clearing ``C``:
on this project's machine (AMD EPYC, scipy's OpenBLAS 0.3.30, which runs its
Haswell kernels there) a profile of PBSR on PKA spent 62% of its time in
OpenBLAS, a third of it outside the arithmetic (``dgemm_itcopy``,
``dgemm_oncopy``, ``memset``). :func:`gemm_tiles` does the arithmetic only:

* ``C`` is cut into tiles of ``R <= 4`` rows by ``V * L`` columns (``V = 2``; ``L = 8`` doubles
  per vector with AVX-512, 4 without: :func:`vector_lanes`); a tile's
  ``R * V`` accumulators are vectors of ``L`` doubles held in registers
  while ``l`` runs over the inner dimension: per ``l``, ``V`` vector loads of
  row ``l`` of ``B``, ``R`` broadcasts of ``A[i, l]`` and ``R * V`` fused
  multiply-adds (``llvm.fmuladd``: one instruction where the CPU has FMA);
* the last tile of a row is narrower: its loads and stores are masked
  (``llvm.masked.load``/``store``), so nothing outside ``C``'s view is read or
  written and no row length needs padding;
* ``C`` is read only when ``beta != 0`` (``beta = 0`` ignores NaN in ``C``, as BLAS).

The tile is written in LLVM IR (a numba ``intrinsic``), because numba's loops
do not become such kernels: LLVM vectorised a scalar 4 x 8 tile across the
inner dimension, with gathers, and ran 3x slower than BLAS. The vectors are
generic LLVM vectors; LLVM lowers them to AVX-512, AVX2 or SSE as the CPU allows
(numba compiles for the host, and its cache is keyed on the CPU).

Measured on an AVX-512 machine (``python benchmarks/bench_products.py``, medians,
microseconds per product ``C = A @ B``; 8 lanes), against scipy's OpenBLAS 0.3.30 with
the kernels it picks there (Haswell) and with its AVX-512 kernels forced
(``OPENBLAS_CORETYPE=SkylakeX``, which has a small-matrix path)::

    m x k x n           3x3x2  11x11x11  11x11x35  21x21x21  21x21x59  42x42x42  100x100x100
    tiles               0.008     0.055     0.157     0.315     0.662     1.833       26.8
    dgemm (Haswell)     0.080     0.294     0.583     0.850     2.028     4.525       42.9
    dgemm (SkylakeX)    0.018     0.088     0.137     0.257     0.662     1.502       17.7

So the tiles match a BLAS that has small-matrix kernels up to ``n ~ 50`` and are
3-5x faster than one that does not; at ``n = 100`` a well-tuned BLAS is faster.

On an AVX2 machine without AVX-512 (AMD EPYC znver3, 2026-11-28), the same script, OpenBLAS's
Haswell kernels::

    m x k x n           3x3x2  11x11x11  11x11x35  21x21x21  21x21x59  42x42x42  100x100x100
    tiles, 8 lanes      0.044     0.388     1.160     2.249     4.479    11.489      142.6
    tiles, 4 lanes      0.028     0.248     0.578     0.975     2.446     5.645       67.1
    dgemm (Haswell)     0.147     0.515     0.923     1.560     3.094     6.649       60.9

With 8 lanes there the tiles were slower than dgemm from ``21 x 21`` on; with 4 they are
1.2-2.1x faster up to ``42 x 42`` and 0.9x at ``100 x 100``.

Each entry of ``C`` is accumulated in the order ``l = 0, 1, ..., k-1``, as in a
textbook loop (BLAS's order differs; results agree to rounding).
"""
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["gemm_tiles", "ROWS", "LANES", "VECTORS", "vector_lanes"]

#: Rows of ``C`` per tile (kernels exist for 1..ROWS rows).
ROWS = 4


def vector_lanes(features=None, cpu_name=None):
    """Doubles per LLVM vector of a tile for the CPU numba compiles for: 8 with AVX-512, else 4.

    A tile keeps ``ROWS * VECTORS = 8`` accumulator vectors in registers. AVX-512 has 32 registers
    of 8 doubles, so 8-double vectors fit; AVX2 has 16 of 4 doubles, and an 8-double vector takes
    two of them, so the accumulators alone fill the register file and the loads spill. Measured
    on an AVX2 machine (AMD EPYC znver3, ``benchmarks/bench_products.py``): 4 lanes 1.6-2.3x faster
    than 8 lanes there (11 x 11 x 35: 0.58 against 1.16 us; 100 x 100 x 100: 67 against 143 us).

    ``features``: LLVM's feature map of the host (default ``llvmlite``'s); ``cpu_name``: numba's
    target CPU when set (``NUMBA_CPU_NAME``), whose features are then numba's ``NUMBA_CPU_FEATURES``.
    """
    from numba.core import config
    if cpu_name is None:
        cpu_name = config.CPU_NAME
    if cpu_name is not None:           # compiling for another CPU than this one: its features as given
        return 8 if "+avx512f" in (config.CPU_FEATURES or "") else 4
    if features is None:
        import llvmlite.binding as llvm
        features = llvm.get_host_cpu_features()
    return 8 if features.get("avx512f", False) else 4


#: Doubles per LLVM vector (:func:`vector_lanes`: 8 with AVX-512, else 4).
LANES = vector_lanes()
#: Vectors per tile row: a tile spans ``LANES * VECTORS`` columns.
VECTORS = 2
_WIDTH = LANES * VECTORS


def _masked_names(vecty):
    """Names of the masked load/store intrinsics for vectors ``vecty`` in address space 0.

    LLVM mangles the pointer type into the name: ``p0v8f64`` for typed
    pointers (LLVM <= 14), ``p0`` for opaque ones.
    """
    ptr = str(ir.PointerType(vecty)).strip()
    suffix = "p0" if ptr == "ptr" else f"p0v{LANES}f64"
    return f"llvm.masked.load.v{LANES}f64.{suffix}", f"llvm.masked.store.v{LANES}f64.{suffix}"


def _make_tile(R):
    """An intrinsic computing one tile of ``R`` rows (see the module docstring).

    ``tile(a, lda, b, ldb, c, ldc, k, ncols, alpha, beta)``: ``a``, ``b``, ``c``
    are the addresses of the tile's first entries of ``A`` (``R x k``), ``B``
    (``k x ncols``) and ``C`` (``R x ncols``); ``lda``, ``ldb``, ``ldc`` their row
    strides in elements; ``1 <= ncols``; columns beyond ``_WIDTH`` are ignored.
    """
    V, L = VECTORS, LANES

    @intrinsic
    def tile(typingctx, a, lda, b, ldb, c, ldc, k, ncols, alpha, beta):
        ip, f8 = types.intp, types.float64
        sig = types.void(ip, ip, ip, ip, ip, ip, ip, ip, f8, f8)

        def codegen(context, builder, signature, args):
            a_, lda_, b_, ldb_, c_, ldc_, k_, ncols_, alpha_, beta_ = args
            dbl = ir.DoubleType()
            i32 = ir.IntType(32)
            iptr = context.get_value_type(types.intp)
            vty = ir.VectorType(dbl, L)
            mty = ir.VectorType(ir.IntType(1), L)
            vptr = ir.PointerType(vty)
            dptr = ir.PointerType(dbl)
            load_name, store_name = _masked_names(vty)
            mod = builder.module
            mload = cgutils.get_or_insert_function(mod, ir.FunctionType(vty, [vptr, i32, mty, vty]), load_name)
            mstore = cgutils.get_or_insert_function(mod, ir.FunctionType(ir.VoidType(), [vty, vptr, i32, mty]),
                                                    store_name)
            fmuladd = cgutils.get_or_insert_function(mod, ir.FunctionType(vty, [vty, vty, vty]),
                                                     f"llvm.fmuladd.v{L}f64")
            align = ir.Constant(i32, 8)
            zero = ir.Constant(vty, [0.0] * L)
            splat_mask = ir.Constant(ir.VectorType(i32, L), [0] * L)

            def splat(x, ty):
                u = builder.insert_element(ir.Constant(ty, ir.Undefined), x, ir.Constant(i32, 0))
                return builder.shuffle_vector(u, u, splat_mask)

            def const(v):
                return ir.Constant(iptr, v)

            def vector_at(base, offset):
                return builder.bitcast(builder.gep(base, [offset], inbounds=True), vptr)

            A = builder.inttoptr(a_, dptr)
            B = builder.inttoptr(b_, dptr)
            C = builder.inttoptr(c_, dptr)
            # lane j of vector v is column v*L + j: valid while < ncols
            ivty = ir.VectorType(iptr, L)
            ncols_v = splat(ncols_, ivty)
            masks = [builder.icmp_signed("<", ir.Constant(ivty, [v * L + j for j in range(L)]), ncols_v)
                     for v in range(V)]

            entry = builder.basic_block
            loop = builder.append_basic_block("tile.loop")
            done = builder.append_basic_block("tile.done")
            builder.cbranch(builder.icmp_signed(">", k_, const(0)), loop, done)

            # for l in range(k): acc[r][v] += A[r, l] * B[l, v*L:(v+1)*L]
            builder.position_at_end(loop)
            l = builder.phi(iptr)
            acc = [[builder.phi(vty) for _ in range(V)] for _ in range(R)]
            b_row = builder.mul(l, ldb_)
            bv = [builder.call(mload, [vector_at(B, builder.add(b_row, const(v * L))), align, masks[v], zero])
                  for v in range(V)]
            new = []
            for r in range(R):
                a_rl = builder.load(builder.gep(A, [builder.add(builder.mul(const(r), lda_), l)], inbounds=True))
                av = splat(a_rl, vty)
                new.append([builder.call(fmuladd, [av, bv[v], acc[r][v]]) for v in range(V)])
            l_next = builder.add(l, const(1))
            l.add_incoming(const(0), entry)
            l.add_incoming(l_next, loop)
            for r in range(R):
                for v in range(V):
                    acc[r][v].add_incoming(zero, entry)
                    acc[r][v].add_incoming(new[r][v], loop)
            builder.cbranch(builder.icmp_signed("<", l_next, k_), loop, done)

            # C = alpha acc (+ beta C): C is read only when beta != 0
            builder.position_at_end(done)
            total = []
            for r in range(R):
                row = []
                for v in range(V):
                    phi = builder.phi(vty)
                    phi.add_incoming(zero, entry)
                    phi.add_incoming(new[r][v], loop)
                    row.append(phi)
                total.append(row)
            alpha_v = splat(alpha_, vty)
            beta_v = splat(beta_, vty)
            c_at = [(r, v, vector_at(C, builder.add(builder.mul(const(r), ldc_), const(v * L))))
                    for r in range(R) for v in range(V)]
            beta_zero = builder.fcmp_ordered("==", beta_, ir.Constant(dbl, 0.0))
            with builder.if_else(beta_zero) as (overwrite, accumulate):
                with overwrite:
                    for r, v, ptr in c_at:
                        builder.call(mstore, [builder.fmul(alpha_v, total[r][v]), ptr, align, masks[v]])
                with accumulate:
                    for r, v, ptr in c_at:
                        old = builder.call(mload, [ptr, align, masks[v], zero])
                        value = builder.call(fmuladd, [beta_v, old, builder.fmul(alpha_v, total[r][v])])
                        builder.call(mstore, [value, ptr, align, masks[v]])
            return context.get_dummy_value()

        return sig, codegen

    return tile


_tile1, _tile2, _tile3, _tile4 = (_make_tile(r) for r in range(1, ROWS + 1))


@njit(inline="always")
def gemm_tiles(A, B, C, alpha, beta):
    """``C = alpha A @ B + beta C`` by register tiles, inlined into the compiled caller.

    No checks: the caller (:func:`pbsens.kernels.blas.gemm`) has checked that
    the shapes agree, that every row of ``A``, ``B`` and ``C`` is contiguous and
    that the row strides are non-negative multiples of 8 bytes. ``C`` must not
    share memory with ``A`` or ``B``.
    """
    m, k = A.shape
    n = B.shape[1]
    lda = A.strides[0] // 8
    ldb = B.strides[0] // 8
    ldc = C.strides[0] // 8
    pa = A.ctypes.data
    pb = B.ctypes.data
    pc = C.ctypes.data
    for i0 in range(0, m, ROWS):
        rows = m - i0
        a = pa + 8 * i0 * lda
        c_row = pc + 8 * i0 * ldc
        for j0 in range(0, n, _WIDTH):
            ncols = n - j0
            b = pb + 8 * j0
            c = c_row + 8 * j0
            if rows >= ROWS:
                _tile4(a, lda, b, ldb, c, ldc, k, ncols, alpha, beta)
            elif rows == 3:
                _tile3(a, lda, b, ldb, c, ldc, k, ncols, alpha, beta)
            elif rows == 2:
                _tile2(a, lda, b, ldb, c, ldc, k, ncols, alpha, beta)
            else:
                _tile1(a, lda, b, ldb, c, ldc, k, ncols, alpha, beta)
