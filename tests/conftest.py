"""Shared fixtures. Compiled models go to a private per-user cache directory unless the
caller set PBSENS_CACHE_DIR (CI sets nothing: each run starts cold)."""
import functools
import json
import os
import stat
import tempfile

import numpy as np
import pytest


def _private_test_cache():
    """``<tmp>/pbsens-test-cache-<uid>``, mode 0700 and owned by us; else a fresh mkdtemp.

    A fixed name in the shared temporary directory would let another user create it
    first and plant compiled code that the tests then import.
    """
    uid = os.getuid() if hasattr(os, "getuid") else None
    path = os.path.join(tempfile.gettempdir(), f"pbsens-test-cache-{uid if uid is not None else 'user'}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and not st.st_mode & 0o077 and (uid is None or st.st_uid == uid):
            return path
    except OSError:
        pass
    return tempfile.mkdtemp(prefix="pbsens-test-cache-")


if not os.environ.get("PBSENS_CACHE_DIR"):
    os.environ["PBSENS_CACHE_DIR"] = _private_test_cache()

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


@functools.lru_cache(maxsize=None)
def tight_case(name, t_end):
    """A paper model, 201 output times on ``[0, t_end]`` and its forward sensitivities there by
    scipy's Radau at rtol 1e-10, atol 1e-12 (the accuracy tests' reference), once per session."""
    m = pbsens.load_model(name)
    ts = np.linspace(0.0, t_end, 201)
    ref = pbsens.forward_sensitivities(m, (0.0, t_end), t_eval=ts, method="Radau", rtol=1e-10, atol=1e-12)
    return m, ts, ref
