"""AMICI's reference llh for ``benchmarks/collection.py`` (a subprocess in AMICI's own environment).

:func:`amici_llh` runs ``amici_side.py petab --modes llh`` at AMICI's Solver defaults and at
``AMICI_TIGHT``; the collection's status uses the tight one.
"""
import subprocess
import time

#: AMICI's (rtol, atol) for the reference llh: those of AMICI's own benchmark tests; its defaults
#: (1e-8, 1e-16) are run too (``amici_default_tolerances``)
AMICI_TIGHT = (1e-12, 1e-16)


def amici_llh(yaml_path, amici_python_path, timeout, max_steps=None):
    """AMICI 1.1's llh at the nominal parameters (``amici_side.py petab --modes llh``), as a dict
    (``llh``, ``status``, ``import_seconds``, ``compiled_now``, ``seconds``), or ``None`` without AMICI.
    ``max_steps``: CVODES's step limit (``--max-steps``; default AMICI's 10000, which Lang's long
    time span exceeds)."""
    try:
        from amici_bridge import amici_python, run_amici
    except ImportError:
        from benchmarks.amici_bridge import amici_python, run_amici
    if amici_python(amici_python_path) is None:
        return None
    out = {}
    for key, tol in (("default", []), ("tight", ["--rtol", str(AMICI_TIGHT[0]), "--atol", str(AMICI_TIGHT[1])])):
        t0 = time.perf_counter()
        try:
            steps = ["--max-steps", str(max_steps)] if max_steps else []
            # --settings defaults: the "default" llh is AMICI's at its Solver defaults (rtol 1e-8, atol 1e-16)
            res = run_amici(["petab", str(yaml_path), "--modes", "llh", "--repeats", "1", "--petab-repeats", "0",
                             "--settings", "defaults", *tol, *steps],
                            amici_python_path, timeout=timeout, quiet=True)
        except subprocess.TimeoutExpired:
            out[key] = {"status": f"timeout after {timeout:g} s", "llh": None, "seconds": time.perf_counter() - t0}
            break
        except Exception as exc:
            out[key] = {"status": f"error: {str(exc)[-600:]}", "llh": None, "seconds": time.perf_counter() - t0}
            continue
        run = res["runs"].get("llh", {})
        out[key] = {"status": run.get("status", "missing") if not run.get("error") else run["error"][:300],
                    "llh": run.get("llh") if run.get("status") == "ok" else None,
                    "solver": {k: (run.get("solver") or {}).get(k) for k in ("rtol", "atol", "max_steps")},
                    "failures": run.get("failures", [])[:3], "import_seconds": res.get("import_seconds"),
                    "compiled_now": res.get("model_compiled_now"), "seconds": time.perf_counter() - t0,
                    "version": (res.get("environment") or {}).get("amici_version")}
    tight, default = out.get("tight") or {}, out.get("default") or {}
    out["llh"] = tight.get("llh") if tight.get("llh") is not None else default.get("llh")
    out["llh_default"] = default.get("llh")
    out["status"] = tight.get("status") or default.get("status")
    return out
