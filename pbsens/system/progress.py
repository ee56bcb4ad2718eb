"""Whether to draw progress bars: only when asked and when stderr is a terminal (quiet in logs,
pipes and CI)."""
from __future__ import annotations

import sys

__all__ = ["progress_enabled"]


def progress_enabled(progress):
    """``progress`` and stderr a terminal."""
    if not progress:
        return False
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False
