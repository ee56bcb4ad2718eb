"""Layout of a model "tape": the model's expressions as a register-machine program in ``c``.

Large models are not compiled per model (numba's front end costs about a millisecond
per generated statement). Their right-hand side, sparse Jacobians, initial state and
outputs are stored as programs in the model constants ``c`` (the flat float64 array
every compiled model function takes, :mod:`pbsens.kernels.signatures`) and evaluated
by the generic interpreter :mod:`pbsens.kernels.tape`, compiled once per machine.

This module holds only numbers (opcodes, header layout): no sympy, no numba.

``c`` layout (all float64; integers stored exactly)::

    c[0] MAGIC   c[1] FORMAT_VERSION   c[2] nx   c[3] np   c[4] ny   c[5] n_registers
    c[6] n_slots c[7] n_consts   c[8] consts_start   c[9] 0
    c[HEADER + SLOT_WIDTH*s : ...] for each program slot s:
        ops_start, n_ops, outs_start, n_outs, outs2_start, n_outs2
    ops:  OP_WIDTH floats per instruction: opcode, dst, a, b
    consts: the constant pool

Registers: ``r[0] = t``, ``r[1:1+nx] = x``, ``r[1+nx:1+nx+np] = p``, then the constant
pool, then the temporaries; the interpreter fills the fixed part before running a
program, so programs have no load instructions (``CONST``/``LOAD*`` exist only in the
emitter's single-assignment form).
    outs: 2 floats per output entry: flat index into the output array, register

A matrix output's entries are listed row-major (CSR order), structural non-zeros only;
the ``*_data_into`` functions write the registers in that order. Slot ``JXP`` (both
Jacobians, shared intermediates) has two output blocks: ``A`` then ``B``.
"""

MAGIC = 917_234_551.0
FORMAT_VERSION = 2.0
HEADER = 10
SLOT_WIDTH = 6
OP_WIDTH = 4

# program slots
RHS, JX, JP, JXP, X0, DX0, H, HX, HP = range(9)
N_SLOTS = 9
SLOT_NAMES = ("rhs", "jac_x", "jac_p", "jacs", "x0", "dx0_dp", "out", "out_jac_x", "out_jac_p")

# opcodes: r[dst] = ...
CONST = 1       # b (the value)
LOADT = 2       # t
LOADX = 3       # x[a]
LOADP = 4       # p[a]
COPY = 5        # r[a]
ADD = 10        # r[a] + r[b]
SUB = 11
MUL = 12
DIV = 13
NEG = 14        # -r[a]
POW = 15        # r[a] ** r[b]
SQUARE = 16     # r[a] * r[a]
RECIP = 17      # 1 / r[a]
SQRT = 18
POWI = 19       # r[a] ** b, b an integer (stored in the instruction)
EXP = 30
LOG = 31
SIN = 32
COS = 33
TAN = 34
ASIN = 35
ACOS = 36
ATAN = 37
SINH = 38
COSH = 39
TANH = 40
FLOOR = 41
CEIL = 42
ABS = 43
SIGN = 44       # 0 at 0, else copysign(1, r[a])
HEAVISIDE = 45  # 1 if r[a] >= 0 else 0 (H(0) = 1, as the code printer)
MIN = 50        # r[b] if r[b] < r[a] else r[a] (Python's min(a, b))
MAX = 51
LT = 60         # 1.0 / 0.0
LE = 61
GT = 62
GE = 63
EQ = 64
NE = 65
AND = 70
OR = 71
NOT = 72
SELECT = 80     # r[dst] = r[b] if r[a] != 0 else r[dst] (dst holds the other branch, from a COPY)

UNARY = {EXP, LOG, SIN, COS, TAN, ASIN, ACOS, ATAN, SINH, COSH, TANH, FLOOR, CEIL, ABS, SIGN, HEAVISIDE,
         NEG, SQUARE, RECIP, SQRT, POWI, COPY, NOT}
BINARY = {ADD, SUB, MUL, DIV, POW, MIN, MAX, LT, LE, GT, GE, EQ, NE, AND, OR}
