"""One-line notices on stderr for waits a user would otherwise sit through in silence
(the one-time compilation of the kernels and of a new model).

Each notice is printed at most once per process. ``PBSENS_QUIET=1`` (set by the command
line's ``--quiet``) silences them. They are notices, not warnings: nothing is wrong.
"""
import os
import sys

_said = set()


def notice(key, text):
    """Print ``pbsens: <text>`` on stderr once per process for ``key``; returns whether printed."""
    if key in _said or os.environ.get("PBSENS_QUIET", "") not in ("", "0"):
        return False
    _said.add(key)
    try:
        sys.stderr.write(f"pbsens: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):   # a closed or broken stderr must not break a computation
        pass
    return True
