"""What the ``collection_lang_*`` scripts share: where Lang_PLOSComputBiol2024 is, and how far a
step-limited solve got.

``LANG_YAML``: the problem in ``$PBSENS_PETAB_COLLECTION`` (the collection's ``Benchmark-Models``
folder; default ``/work/collection/Benchmark-Models``).
"""
import os
import time

from pbsens.errors import SolverError

LANG_YAML = os.path.join(os.environ.get("PBSENS_PETAB_COLLECTION", "/work/collection/Benchmark-Models"),
                         "Lang_PLOSComputBiol2024", "Lang_PLOSComputBiol2024.yaml")


def reached(run, t_end):
    """How far ``run()`` (a solve with a step limit, to ``t_end``) got, and its wall time: ``"reached t = ..."``
    or the ``failed at ...`` part of its :class:`~pbsens.errors.SolverError`."""
    t0 = time.perf_counter()
    try:
        run()
        got = f"reached t = {t_end:g}"
    except SolverError as exc:
        msg = str(exc)
        got = msg[msg.find("failed at"):msg.find("before the end")].strip()
    return f"{got} ({time.perf_counter() - t0:.1f} s)"
