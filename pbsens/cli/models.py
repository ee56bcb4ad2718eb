"""``pbsens models``: list the built-in models with their sizes."""
from __future__ import annotations


def add_parser(subparsers):
    """The ``models`` subcommand (no options)."""
    return subparsers.add_parser("models", help="list the built-in models with their sizes",
                                 description="List the built-in models with their numbers of states and "
                                             "parameters.")


def run(args):
    """``pbsens models``: the built-in models with their sizes."""
    from ..model.library import builtin_models
    from ..model.spec import read_json_model
    rows = []
    for name, path in builtin_models().items():
        spec = read_json_model(path)
        rows.append((name, len(spec.states), len(spec.parameters), spec.title))
    print(f"{'model':<10} {'states':>6} {'params':>6}  title")
    for name, nx, np_, title in rows:
        print(f"{name:<10} {nx:>6} {np_:>6}  {title}")
    print("random linear: pbsens.random_linear_model(n, seed) (n states, n parameters)")
    return 0
