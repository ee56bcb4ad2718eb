"""Run one benchmark's measurement in two source trees, alternating fresh processes, and tabulate.

A change of our own code is measured against the commit before it: ``--before`` is a checkout of
that commit (``git worktree add /tmp/before REV``; its kernels compile on its first run), the other
tree this repository. Each round starts one process per tree (``script --child ...``, ``PYTHONPATH``
set to the tree) whose last line of output is a JSON object of figures, with ``"pbsens"`` the file
its ``pbsens`` was imported from (checked to be the tree's: a script that puts another tree first on
``sys.path`` would compare a tree with itself); the table holds the median over rounds of each
figure and after / before. Not a benchmark itself: ``tile_lanes.py`` and
``adjoint_laws.py`` use it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parser(doc, calls):
    """The options every before/after script takes: ``--before``, ``--rounds``, ``--calls`` (default
    ``calls``), ``--collection`` and the hidden ``--child``; the script adds its own."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", help="the checkout before the change")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=calls)
    ap.add_argument("--collection", default=os.environ.get("PBSENS_PETAB_COLLECTION"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return ap


def alternate(script, before, extra, rounds):
    """``{"before": [figures per round], "after": [...]}`` from ``rounds`` rounds of child processes."""
    trees = {"before": Path(before).resolve(), "after": ROOT}
    rows = {k: [] for k in trees}
    for r in range(rounds):
        for label, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=str(tree))
            out = subprocess.run([sys.executable, str(Path(script).resolve()), "--child", *extra], env=env,
                                 capture_output=True, text=True, check=True, cwd=str(tree))
            rows[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
            where = rows[label][-1].get("pbsens")
            if where is None or not Path(where).resolve().is_relative_to(tree):
                raise RuntimeError(f"the {label!r} process imported pbsens from {where}, not from {tree}")
            print(f"round {r + 1} {label}: {rows[label][-1]}", flush=True)
    return rows


def table(rows, skip=()):
    """Print the medians over rounds, before and after, as a Markdown table (numeric figures only)."""
    print(f"\nmedians over {len(rows['after'])} rounds (load {os.getloadavg()[0]:.1f})")
    print("| figure | before | after | after / before |")
    print("|---|---|---|---|")
    for key in rows["after"][0]:
        if key in skip or not isinstance(rows["after"][0][key], (int, float)):
            continue
        b = statistics.median(x[key] for x in rows["before"])
        a = statistics.median(x[key] for x in rows["after"])
        print(f"| {key} | {b:.3g} | {a:.3g} | {a / b:.2f} |")
