"""No compiled kernel takes more than MAX_PARAMS parameters (issue #37): long flat argument lists
are where arguments get swapped unnoticed; kernels group their read-only arrays and work arrays
into tuples instead.

The check reads the sources with ``ast`` (nothing is compiled). A function counts as compiled when
one of its decorators is numba's (``njit``, ``jit``, ``overload``, ... as a name, an attribute
``numba.njit`` or a call ``njit(sig, ...)``) or a helper defined in the same sources that calls
one of them (``signatures.njit_quiet``).
"""
import ast
import pathlib

import pytest

MAX_PARAMS = 40

ROOT = pathlib.Path(__file__).resolve().parent.parent / "pbsens"
SOURCES = sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)   # every compiled kernel of pbsens

NUMBA_DECORATORS = {"njit", "jit", "generated_jit", "overload", "overload_method", "overload_attribute",
                    "intrinsic", "cfunc", "vectorize", "guvectorize", "register_jitable"}


def _name(node):
    """The decorator's name: ``njit`` of ``njit``, ``numba.njit``, ``njit(sig, cache=True)``."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _n_params(fn):
    a = fn.args
    return (len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
            + (a.vararg is not None) + (a.kwarg is not None))


def _helpers(trees):
    """Functions of the sources that compile with numba (``njit_quiet``): a call to a numba
    decorator anywhere in their body."""
    found = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and not node.decorator_list:
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Call) and _name(sub.func) in NUMBA_DECORATORS:
                        found.add(node.name)
                        break
    return found


def compiled_functions(sources=SOURCES):
    """``(file, line, name, parameter count)`` of every numba-compiled function in ``sources``
    (helper decorators are looked for in ``sources`` and in all of :data:`SOURCES`)."""
    trees = {path: ast.parse(path.read_text(), str(path)) for path in dict.fromkeys([*sources, *SOURCES])}
    decorators = NUMBA_DECORATORS | _helpers(trees)
    trees = {path: trees[path] for path in sources}
    out = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(_name(d) in decorators for d in node.decorator_list):
                    out.append((path, node.lineno, node.name, _n_params(node)))
    return out


def test_the_scan_sees_the_kernels():
    """The detection itself: the known kernels, also those compiled through the helper decorator."""
    names = {(str(f.name), n) for f, _, n, _ in compiled_functions()}
    assert ("march.py", "_march_loop") in names           # @njit(sig, ...)
    assert ("march.py", "march") in names                 # @njit_quiet(sig, ...)
    assert ("sparse_march.py", "sparse_march") in names
    assert ("sparse_march.py", "_loop") in names
    assert ("rosenbrock.py", "_loop") in names
    assert ("blas.py", "_gemm_overload") in names         # @overload
    assert len(names) > 50


def test_helper_decorators_are_found(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("from numba import njit\nimport numba\n"
                   "def quiet(sig):\n    def c(fn):\n        return njit(sig)(fn)\n    return c\n"
                   "@quiet(None)\ndef a(" + ", ".join(f"x{i}" for i in range(41)) + "):\n    pass\n"
                   "@numba.njit\ndef b(x, *args, y=1, **kw):\n    pass\n"
                   "def plain(" + ", ".join(f"x{i}" for i in range(50)) + "):\n    pass\n")
    got = {name: n for f, _, name, n in compiled_functions([src]) if f.name == "k.py"}
    assert {name: n for name, n in got.items() if name in ("a", "b", "plain")} == {"a": 41, "b": 4}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_compiled_kernel_over_max_params(path):
    over = [f"{f.relative_to(ROOT.parent)}:{line} {name}: {n} parameters" for f, line, name, n in compiled_functions([path])
            if n > MAX_PARAMS]
    assert not over, f"compiled functions with more than {MAX_PARAMS} parameters:\n" + "\n".join(over)
