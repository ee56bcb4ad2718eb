"""The package's layout rules (docs/ARCHITECTURE.md): one floor per concern, imports only
downward, no import circle, no module over 700 lines, no function over 150 lines.

Imports are read with ``ast`` from every file, function-local imports included (most of
the circles this replaced ran through local imports). Each rule is checked by a function
that is itself tested on a deliberately wrong import, so the rules test can fail.
"""
import ast
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "pbsens")

#: room -> floor. A module may import its own room and rooms on lower floors only.
FLOORS = {
    "base": 0,          # errors.py, _version.py
    "system": 0,        # threads, memory, notices: stdlib, numpy, threadpoolctl
    "parallel": 1,      # the generic executor and dask backend: knows no pbsens type
    "kernels": 2,       # numba kernels
    "model": 3,         # model specs, SBML/SBtab readers, code generation, the cache
    "solvers": 4,       # state solvers and trajectories
    "sensitivity": 5,   # the sensitivities of one trajectory (post-hoc, forward, error, metrics)
    "simulation": 6,    # segments, events, steady states (no PEtab)
    "problems": 7,      # PEtab / SBtab estimation problems
    "batches": 8,       # pbsens.batches and the pbsens.petab face
    "inference": 9,     # likelihoods, priors, SMMALA, chains
    "calibration": 9,   # multi-start fits, profiles
    "report": 10,       # plots and analysis
    "face": 11,         # pbsens/__init__.py
    "top": 12,          # the command line, reproduce, __main__
}

#: (room, room) pairs forbidden even though the floors would allow them
FORBIDDEN = {("top", "kernels")}   # the command line goes through the public faces


def room_of(relpath):
    """The room of a file given by its path relative to the package folder."""
    parts = relpath.replace(os.sep, "/").split("/")
    if len(parts) > 1:
        folder = parts[0]
        if folder == "cli":
            return "top"
        if folder in FLOORS:
            return folder
        raise AssertionError(f"pbsens/{relpath}: folder {folder!r} has no floor in tests/test_layout.py")
    name = parts[0][:-3]
    return {"errors": "base", "_version": "base", "__init__": "face", "__main__": "top",
            "reproduce": "top", "batches": "batches", "petab": "batches"}.get(name, f"loose:{name}")


def _module_name(relpath):
    mod = "pbsens." + relpath[:-3].replace(os.sep, ".").replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def package_modules(pkg_dir=PKG):
    """``{module name: (relative path, source)}`` of every .py file under ``pkg_dir``."""
    out = {}
    for d, dirs, files in os.walk(pkg_dir):
        dirs[:] = [x for x in dirs if x != "__pycache__" and not x.startswith("_")]
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(d, f), pkg_dir)
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    out[_module_name(rel)] = (rel, fh.read())
    return out


def imports_of(module, relpath, source, known):
    """The pbsens modules ``module`` imports (anywhere in the file), resolved against ``known``."""
    is_pkg = relpath.endswith("__init__.py")
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_pkg:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                while name and name not in known:
                    name = name.rpartition(".")[0]
                if name:
                    found.add(name)
    return {m for m in found if m in known and m != module}


def import_graph(modules):
    return {m: imports_of(m, rel, src, modules) for m, (rel, src) in modules.items()}


def rule_violations(modules):
    """Imports that run upward, sideways or into a forbidden room; loose top-level modules."""
    graph = import_graph(modules)
    bad = []
    for m, targets in graph.items():
        a = room_of(modules[m][0])
        if a.startswith("loose:"):
            bad.append(f"{modules[m][0]}: a loose top-level module (put it in the folder of its concern)")
            continue
        for t in sorted(targets):
            b = room_of(modules[t][0])
            if b.startswith("loose:") or a == b:
                continue
            if FLOORS[b] >= FLOORS[a] or (a, b) in FORBIDDEN:
                bad.append(f"{m} ({a}, floor {FLOORS[a]}) imports {t} ({b}, floor {FLOORS[b]})")
    return bad


def circles(graph):
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def _compiled(node):
    """A numba kernel (``@njit``/``@njit_quiet``/``@jit``/``@overload`` ...): held to the kernels' own rule (at
    most 40 parameters, tests/test_kernel_signatures.py), not to the Python functions' length."""
    for d in node.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in ("njit", "njit_quiet", "jit", "generated_jit", "overload", "intrinsic", "vectorize", "cfunc"):
            return True
    return False


def long_functions(modules, limit=150):
    """Python functions (not compiled kernels) longer than ``limit`` lines."""
    out = []
    for m, (rel, src) in modules.items():
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _compiled(node):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append(f"pbsens/{rel}::{node.name} ({n} lines)")
    return out


# ------------------------------------------------------------------ the rules, on the package
def test_imports_run_only_downward():
    bad = rule_violations(package_modules())
    assert not bad, "\n".join(bad)


def test_no_import_circle_in_the_package():
    found = circles(import_graph(package_modules()))
    assert not found, found


def test_no_import_circle_among_benchmarks():
    bench = os.path.join(ROOT, "benchmarks")
    modules = {}
    for f in os.listdir(bench):
        if f.endswith(".py"):
            with open(os.path.join(bench, f), encoding="utf-8") as fh:
                modules["benchmarks." + f[:-3]] = (f, fh.read())
    graph = {}
    for m, (f, src) in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(src)):
            names = []
            if isinstance(node, ast.ImportFrom):
                if node.level == 1 or (node.module or "").startswith("benchmarks"):
                    mod = (node.module or "").split(".")[-1] if node.module else ""
                    names = [mod] if mod else [a.name for a in node.names]
                elif node.module and f"benchmarks.{node.module}" in modules:
                    names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name.split(".")[-1] for a in node.names
                         if a.name.startswith("benchmarks.") or f"benchmarks.{a.name}" in modules]
            targets |= {f"benchmarks.{n}" for n in names if f"benchmarks.{n}" in modules}
        graph[m] = targets - {m}
    assert not circles(graph), circles(graph)


def test_no_module_over_700_lines():
    long = [f"pbsens/{rel}: {src.count(chr(10)) + 1} lines" for rel, src in package_modules().values()
            if src.count("\n") + 1 > 700]
    assert not long, long


def test_no_function_over_150_lines():
    found = long_functions(package_modules())
    assert not found, found


# ------------------------------------------------------------------ the checks can fail
def _fake(files):
    return {_module_name(rel): (rel, src) for rel, src in files.items()}


def test_rules_catch_an_upward_import():
    ok = _fake({"kernels/a.py": "import numpy\n", "sensitivity/b.py": "from ..kernels import a\n"})
    assert rule_violations(ok) == []
    bad = _fake({"kernels/a.py": "def f():\n    from ..sensitivity import b\n",   # function-local
                 "sensitivity/b.py": "x = 1\n"})
    assert rule_violations(bad) == ["pbsens.kernels.a (kernels, floor 2) imports pbsens.sensitivity.b "
                                    "(sensitivity, floor 5)"]
    cli = _fake({"cli/run.py": "from ..kernels import march\n", "kernels/march.py": ""})
    assert len(rule_violations(cli)) == 1
    loose = _fake({"stray.py": "x = 1\n"})
    assert "loose top-level module" in rule_violations(loose)[0]


def test_circle_check_finds_a_circle_through_local_imports():
    mods = _fake({"problems/a.py": "from . import b\n", "problems/b.py": "def f():\n    from . import a\n",
                  "problems/c.py": "from . import a\n"})
    assert circles(import_graph(mods)) == [["pbsens.problems.a", "pbsens.problems.b"]]


def test_long_function_check_counts_lines():
    body = "def f():\n" + "    x = 1\n" * 150
    assert long_functions(_fake({"model/x.py": body})) == ["pbsens/model/x.py::f (151 lines)"]
    assert long_functions(_fake({"model/x.py": body}), limit=151) == []
    assert long_functions(_fake({"kernels/x.py": "@njit(cache=True)\n" + body})) == []


def test_import_pbsens_loads_no_heavy_library():
    """`import pbsens` stays light: pandas, petab, dask, sympy and matplotlib load only when a
    feature needs them (a fresh interpreter, so nothing imported by other tests counts)."""
    import subprocess
    code = ("import sys, pbsens; heavy = {'pandas', 'petab', 'dask', 'distributed', 'sympy', 'matplotlib'}; "
            "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PBSENS_QUIET": "1"}, cwd=ROOT).stdout.strip()
    assert out == "[]", out


@pytest.mark.parametrize("name", ["petab", "problems", "inference"])
def test_public_subpackages_are_attributes_after_import_pbsens(name):
    import subprocess
    code = f"import pbsens; m = pbsens.{name}; print(m.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PBSENS_QUIET": "1"}, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == f"pbsens.{name}", out.stderr[-2000:]
