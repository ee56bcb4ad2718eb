"""benchmarks/pypesto_side.py and its bridge (``amici_bridge.run_pypesto``) without AMICI.

The script runs in AMICI's own Python; here: it imports no pbsens and needs only the
standard library to import, its command line, and the bridge plumbing through a fake
"AMICI Python" that writes a fixed ``pypesto-fit`` JSON (``"inf"`` strings back to floats).
A real run needs AMICI: ``$PBSENS_AMICI_PYTHON benchmarks/pypesto_side.py fit ...`` (its docstring).
"""
from __future__ import annotations

import importlib.util
import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCH))
    return mod


bridge = _load("amici_bridge")


def test_side_script_imports_no_pbsens_and_only_the_standard_library_at_import():
    text = (BENCH / "pypesto_side.py").read_text()
    assert "import pbsens" not in text and "from pbsens" not in text
    code = ("import sys; sys.path.insert(0, %r); import pypesto_side; "
            "bad = [m for m in ('amici', 'pypesto', 'fides', 'numpy', 'pbsens') if m in sys.modules]; "
            "print(bad)") % str(BENCH)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_command_line():
    side = _load("pypesto_side")
    with pytest.raises(SystemExit):
        side.main(["fit", "p.yaml", "--out", "x.json"])          # --starts is required
    help_text = subprocess.run([sys.executable, str(BENCH / "pypesto_side.py"), "fit", "--help"],
                               capture_output=True, text=True, check=True).stdout
    for opt in ("--starts", "--optimizer", "--max-iter", "--n-threads", "--hessian", "--out"):
        assert opt in help_text


@pytest.mark.skipif(sys.platform == "win32", reason="the fake interpreter is a POSIX shell script")
def test_run_pypesto_through_a_fake_interpreter(tmp_path):
    payload = {"mode": "pypesto-fit", "x_names": ["a", "b"], "n_failed": 1,
               "starts": [{"index": 0, "status": "ok", "fval": 1.5, "llh": -1.5, "x": [0.1, 0.2]},
                          {"index": 1, "status": "failed", "fval": "inf", "llh": "-inf", "error": "CVODES"}]}
    data = tmp_path / "payload.json"
    data.write_text(json.dumps(payload))
    args_seen = tmp_path / "args.txt"
    fake = tmp_path / "fakepy"
    fake.write_text('#!/bin/sh\necho "$@" > "%s"\nwhile [ "$#" -gt 0 ]; do if [ "$1" = "--out" ]; '
                    'then cp "%s" "$2"; fi; shift; done\n' % (args_seen, data))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    res = bridge.run_pypesto(["fit", "p.yaml", "--starts", "s.npy", "--max-iter", "5"], str(fake))
    assert res["starts"][1]["fval"] == float("inf") and res["starts"][1]["llh"] == float("-inf")
    assert res["starts"][0]["x"] == [0.1, 0.2]
    seen = args_seen.read_text()
    assert seen.startswith(str(bridge.PYPESTO_SCRIPT)) and "--max-iter 5" in seen and "--out" in seen
