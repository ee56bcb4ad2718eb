"""Every code block of README.md runs verbatim, as a new user would paste it.

Python blocks run each in a fresh interpreter, shell blocks each in ``bash -euo pipefail``,
in a scratch folder that holds what a fresh clone has (``tests/`` and ``data/`` reached
through links to this checkout, so the README's paths such as
``tests/data/petab/...`` work and what the commands write lands in the scratch folder, not
in the checkout). The only blocks not run here are the set-up commands, each marked in the
README by ``<!-- not run by tests/test_readme.py: reason -->`` on the line before it: the
test command is what ``.ci/run`` itself executes, and the main job takes half an hour
(``pbsens reproduce all --quick``, its short form, is part of that test command).
"""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
SKIP_MARK = "<!-- not run by tests/test_readme.py:"
#: the set-up blocks, the only ones allowed to carry the mark (a new mark fails this test)
SET_UP = ("pip install \".[test]\"",
          "pip install \".[sbml,mcmc,petab]\" && pbsens reproduce all")


def readme_blocks(text):
    """``[(line number, language, code, skipped)]`` of the fenced blocks of ``text``."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m:
            lang, start = m.group(1), i
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            before = [ln for ln in lines[max(0, start - 3):start] if ln.strip()]
            skipped = bool(before) and before[-1].startswith(SKIP_MARK) or \
                (len(before) > 1 and before[-2].startswith(SKIP_MARK) and before[-1].startswith("<!--"))
            out.append((start + 1, lang, "\n".join(lines[start + 1:j]), skipped))
            i = j + 1
        else:
            i += 1
    return out


BLOCKS = readme_blocks(open(README, encoding="utf-8").read())
#: blocks that show data, not commands (a model file, a folder tree): not run
DATA_LANGS = ("json", "text", "yaml", "tsv")
RUN = [b for b in BLOCKS if not b[3] and b[1] not in DATA_LANGS]


def test_readme_has_blocks_and_only_set_up_blocks_are_skipped():
    assert len(RUN) >= 5, "README.md lost its examples"
    skipped = [b for b in BLOCKS if b[3]]
    assert len(skipped) == len(SET_UP)
    for (line, _, code, _), marker in zip(skipped, SET_UP):
        assert marker in code, f"README.md line {line}: only the set-up commands may be skipped"
    for line, lang, _, _ in RUN:
        assert lang in ("python", "bash"), \
            f"README.md line {line}: block language {lang!r} (python or bash; {', '.join(DATA_LANGS)} for data)"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    d = tmp_path_factory.mktemp("readme")
    for name in ("tests", "data", "docs"):
        os.symlink(os.path.join(ROOT, name), d / name)
    return d


@pytest.mark.parametrize("block", RUN, ids=[f"line{b[0]}" for b in RUN])
def test_readme_block_runs(block, scratch):
    line, lang, code, _ = block
    env = dict(os.environ, MPLBACKEND="Agg", PBSENS_QUIET="1")
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    if lang == "python":
        cmd = [sys.executable, "-c", code]
    else:
        cmd = ["bash", "-euo", "pipefail", "-c", code]
    r = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, (f"README.md block at line {line} failed ({r.returncode}):\n{code}\n"
                               f"--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-5000:]}")


def test_block_reader_sees_marks():
    text = ("a\n<!-- not run by tests/test_readme.py: set-up -->\n```bash\npip install x\n```\n"
            "```python\nprint(1)\n```\n")
    assert readme_blocks(text) == [(3, "bash", "pip install x", True), (6, "python", "print(1)", False)]
