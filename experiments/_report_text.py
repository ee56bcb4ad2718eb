"""The report's building blocks: number formats, markdown tables, and the report being written."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path


def g(x, digits=2):
    """A number in short form: ``1.3e-03``, ``0.034``, ``12``; ``n/a`` for None/NaN."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    x = float(x)
    if x == 0:
        return "0"
    if 1e-2 <= abs(x) < 1e4:
        return f"{x:.{digits}g}"
    return f"{x:.{digits - 1}e}"


def s(x):
    """Seconds."""
    if x is None:
        return "n/a"
    return f"{x:.3f} s" if x >= 0.01 else f"{x * 1000:.2f} ms"


def times(x):
    """A ratio as ``12x``."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if x < 0.1:
        return f"{x:.2g}x"
    return f"{x:.1f}x" if x < 100 else f"{x:.0f}x"


def orders(x):
    """log10 of a ratio, in words."""
    if x is None or x <= 0 or not math.isfinite(x):
        return "n/a"
    return f"{math.log10(x):.1f} orders of magnitude"


def verdict(ok):
    """True / False / None as holds / does not hold / partly holds, in bold."""
    return {True: "**holds**", False: "**does not hold**", None: "**partly holds**"}[ok]


def table(header, rows):
    """A markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


class Report:
    """The report being written: the experiments' JSON (``data``), its lines and the summary table's rows."""

    def __init__(self, results_dir, report_path, names):
        self.dir = Path(results_dir)
        self.path = Path(report_path)
        self.lines = []
        self.summary = []   # rows of the summary table
        self.data = {}
        for name in names:
            f = self.dir / f"{name}.json"
            if f.is_file():
                with open(f, encoding="utf-8") as fh:
                    self.data[name] = json.load(fh)

    def add(self, *text):
        self.lines.extend(text)

    def heading(self, title, d, *ours):
        """A section's title, the paper's claim (from the experiment's JSON), then ``ours``."""
        self.add(f"## {title}", "", f"**Paper.** {(d.get('paper') or {}).get('claim', '')}.", "", *ours)

    def png(self, name, caption):
        f = self.dir / name
        if f.is_file():
            rel = os.path.relpath(f, self.path.parent).replace(os.sep, "/")
            self.add(f"![{caption}]({rel})", "")

    def figure_and_summary(self, name, title, claim, ours, verdict_text):
        """End a section: a blank line, its figure ``name.png`` and its row of the
        summary table (title, the paper's claim, our numbers, the verdict)."""
        self.add("", "")
        self.png(f"{name}.png", title)
        self.summary.append([title, claim, ours, verdict_text])

    def missing(self, name, title):
        self.add(f"## {title}", "", f"Not run: no `{name}.json` in `{self.dir}`.", "")
        self.summary.append([title, "-", "not run", "-"])

    def section(self, name, title, write, *args):
        """``write(self, name, data, title, *args)`` with the experiment's JSON, or say that it did not run."""
        d = self.data.get(name)
        if d is None:
            return self.missing(name, title)
        return write(self, name, d, title, *args)
