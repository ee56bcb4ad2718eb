"""``pbsens cache info|clear``: what the compiled-model cache holds, and emptying it."""
from __future__ import annotations


def add_parser(subparsers):
    """The ``cache`` subcommand with its two actions."""
    sp = subparsers.add_parser(
        "cache", help="show or clear the compiled-model cache",
        description="Compiled models live in $PBSENS_CACHE_DIR (default ~/.cache/pbsens), bounded by "
                    "$PBSENS_CACHE_MAX_MB. 'info' lists the directory, its size and the models in it; "
                    "'clear' removes them and the loaded PEtab problems kept beside them (models another process is loading are skipped).")
    sp.add_argument("action", choices=("info", "clear"), help="info: list; clear: remove every model")
    return sp


def run(args):
    """``pbsens cache info`` prints the cache; ``pbsens cache clear`` empties it (compiled
    models and loaded PEtab problems)."""
    from ..model.cache import cache_clear, format_cache_info
    from ..problems import problem_cache
    from .common import plural
    if args.action == "info":
        print(format_cache_info())
        print(f"{plural(problem_cache.count(), 'loaded PEtab problem')} in {problem_cache.entries_dir()}")
        return 0
    done = cache_clear()
    n_problems, freed = problem_cache.clear()
    print(f"removed {plural(done['removed'], 'model')} and {plural(n_problems, 'PEtab problem')}, "
          f"{(done['freed_bytes'] + freed) / 1e6:.1f} MB, from {done['directory']}"
          + (f"; skipped {done['skipped']} in use" if done.get("skipped") else ""))
    return 0
