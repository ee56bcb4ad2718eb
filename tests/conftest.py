"""Shared fixtures. Compiled models go to a per-session cache directory unless the
caller set PBSENS_CACHE_DIR (CI sets nothing: each run starts cold)."""
import json
import os
import tempfile

import pytest

os.environ.setdefault("PBSENS_CACHE_DIR", os.path.join(tempfile.gettempdir(), "pbsens-test-cache"))

import pbsens  # noqa: E402


@pytest.fixture(scope="session")
def pka():
    return pbsens.load_model("PKA")


@pytest.fixture(scope="session")
def camkii():
    return pbsens.load_model("CaMKII")


@pytest.fixture(scope="session")
def chua():
    return pbsens.load_model("Chua")


def make_model(tmp_path, name, states, params, odes, definitions=(), outputs=(), time="t"):
    """Write a small JSON model and load it: states/params are dicts name -> value."""
    d = {
        "name": name, "time": time,
        "states": [{"name": k, "initial": v} for k, v in states.items()],
        "parameters": [{"name": k, "value": v} for k, v in params.items()],
        "definitions": [{"name": k, "expression": v} for k, v in definitions],
        "odes": [{"state": k, "rhs": v} for k, v in odes.items()],
    }
    if outputs:
        d["outputs"] = [{"name": k, "expression": v} for k, v in outputs]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(d))
    return pbsens.load_model(path)
