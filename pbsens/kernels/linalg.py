"""Small dense linear algebra kernels: norms, products, ``expm`` and phi functions.

All kernels are numba ``nopython`` functions compiled eagerly for C-contiguous
float64 arrays and cached on disk. Functions whose name ends in ``_into`` never
allocate: they write into output arrays and use a preallocated workspace from
:func:`workspace`. Outputs must not alias inputs or each other unless a
docstring says otherwise.

Matrix functions
----------------
``expm_into``
    ``exp(A)`` by scaling and squaring with Pade approximants of degree 3, 5, 7,
    9 or 13 (Higham 2005, with the refinements of Al-Mohy and Higham 2009 that
    ``scipy.linalg.expm`` also uses: degree selection by
    ``||A^k||^(1/k)`` instead of ``||A||`` and the extra-scaling term
    ``ell``).
``exp_phi1_into``
    ``[E | F]`` with ``E = exp(hA)``, ``F = integral_0^h exp(sA) ds = h phi1(hA)``.
``exp_phi12_into``
    ``[E | F1 | F2]``, additionally ``F2 = integral_0^h exp((h - s)A) s ds = h^2 phi2(hA)``.

The phi functions ``phi1(Z) = sum_k Z^k/(k+1)!``, ``phi2(Z) = sum_k Z^k/(k+2)!``
are entire, so they need no inverse of ``A`` and are exact (to rounding) for
singular ``A``. They are evaluated by a truncated Taylor series (Paterson-Stockmeyer)
of ``Z = hA / 2^s`` and the scaling is undone with exact doubling identities
(see :func:`exp_phi1_into`). This costs about as much as ``expm`` of an
``n x n`` matrix instead of ``expm`` of the ``2n x 2n`` block matrix
``[[hA, hI], [0, 0]]`` (one ``2n`` product costs eight ``n`` products).
The outputs are side by side, as the steps use them, so that a doubling is one
product ``E [E | F]`` (:func:`pbsens.kernels.blas.gemm_into` on row-major views).

Elementwise loops over column blocks index with unsigned integers: a signed
index that does not start at 0 keeps numba's negative-index wraparound test in
the loop and LLVM does not vectorise it (4x slower for 21 x 21 blocks).

References
----------
N. J. Higham, "The scaling and squaring method for the matrix exponential
revisited", SIAM J. Matrix Anal. Appl. 26(4):1179-1193, 2005.
A. H. Al-Mohy and N. J. Higham, "A new scaling and squaring algorithm for the
matrix exponential", SIAM J. Matrix Anal. Appl. 31(3):970-989, 2009.
M. S. Paterson and L. J. Stockmeyer, "On the number of nonscalar
multiplications necessary to evaluate polynomials", SIAM J. Comput. 2(1), 1973.

The kernels live in :mod:`.dense` (norms, products, elementwise helpers, the
workspace), :mod:`.expm`, :mod:`.phi` and :mod:`.lu` (the one LU of the package:
factor-and-keep for the Rosenbrock solver, one-pass solve for the Pade
denominators); this module is their public face, so callers import one name.
"""
from .dense import (NORM_1, NORM_CODES, NORM_FRO, NORM_INF, NWS, _add_cols_into, copy_into,  # noqa: F401
                    matmul_into, matrix_norm, norm1_rowwise, workspace)
from .expm import expm, expm_into  # noqa: F401
from .lu import solve_inplace as _lu_solve_inplace  # noqa: F401
from .phi import _PHI_COST, _PHI_M, _PHI_Q, _PHI_THETA, exp_phi1_into, exp_phi12_into  # noqa: F401

__all__ = ["NORM_1", "NORM_INF", "NORM_FRO", "NORM_CODES", "NWS", "matrix_norm", "matmul_into", "copy_into",
           "norm1_rowwise", "workspace", "expm", "expm_into", "exp_phi1_into", "exp_phi12_into"]
