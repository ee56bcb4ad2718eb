"""Run every semantic case of the SBML Test Suite through pbsens and tabulate the outcome (issue #39).

Usage::

    nice -n 10 python benchmarks/sbml_suite.py [--suite DIR | --mirror GITDIR] [--commit SHA]
        [--cases 1-1821] [--timeout 120] [--workers 1] [--results FILE.jsonl] [--rerun STATUS ...]
        [--table docs/COVERAGE.md] [--baseline FILE.jsonl] [--table-only]

The suite (https://github.com/sbmlteam/sbml-test-suite) is read at the pinned commit
``COMMIT`` (the one ``tests/data/sbml_suite/README.md`` names): ``--suite`` is a folder
holding the case folders (``.../cases/semantic``); or ``--mirror`` a git directory of the
suite, from which ``cases/semantic`` of ``--commit`` is extracted once (``git archive``) into
``--work`` (default ``/tmp/pbsens-sbml-suite-<commit>``). Nothing is downloaded, and CI never
runs this.

Each case runs in a worker process (``--workers``, default 1; a worker that exceeds
``--timeout`` seconds on a case is killed and replaced) with
:func:`sbml_suite_case.run_case`: the newest SBML level the case has, the ``tape`` backend,
:func:`pbsens.simulation.segments.simulate` (events applied) at rtol 1e-10, atol 1e-12, one
output per results column (amount or concentration as the settings ask), compared at the
suite's own absolute and relative tolerances. Status of a case:

``pass``      every entry within tolerance;
``wrong``     simulated, but some entry outside the tolerance (or NaN where a number is expected);
``refused``   pbsens raised :class:`~pbsens.errors.UnsupportedModelError`, naming the constructs
              (``kinds`` in the record);
``error``     anything else raised (the exception's type and message in ``detail``), including a
              results variable the model lacks;
``timeout``   the case took longer than ``--timeout``;
``n/a``       not a time course (``testType`` FluxBalanceSteadyState): pbsens simulates ODEs only.

One JSON record per case is appended to ``--results`` (default
``benchmarks/results/sbml_suite.jsonl``); a rerun skips the cases already recorded unless
their status is in ``--rerun`` (the last record of a case counts). ``--table`` rewrites
the generated section of docs/COVERAGE.md (between its markers; the rest of the file is
kept): counts by status, by test tag (``componentTags`` and ``testTags`` of each case's
``-model.m``), and the constructs that refuse cases (alone or with others); with
``--baseline`` (an earlier results file) each count gets its earlier value beside it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing as mp
import os
import re
import subprocess
import sys
import time
import traceback
from collections import Counter, defaultdict
from multiprocessing.connection import wait
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import sbml_suite_case as sc

COMMIT = "7ab011efe471877987b5d6dcba8cc19a6ff71254"
STATUSES = ("pass", "wrong", "refused", "error", "timeout", "n/a")
FIRST_CASE_EXTRA = 900.0
SECTION_START = "<!-- sbml_suite.py: start of the generated section -->"
SECTION_END = "<!-- sbml_suite.py: end of the generated section -->"


# ------------------------------------------------------------------ the suite on disk
def extract(mirror, commit, work):
    """``cases/semantic`` of ``commit`` from the git directory ``mirror`` into ``work`` (once)."""
    target = Path(work) / "cases" / "semantic"
    if (target / "README.md").is_file() or (target / "00001").is_dir():
        return target
    Path(work).mkdir(parents=True, exist_ok=True)
    archive = subprocess.Popen(["git", f"--git-dir={mirror}", "archive", commit, "cases/semantic"],
                               stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(work)], stdin=archive.stdout, check=True)
    archive.wait()
    if not (target / "00001").is_dir():
        raise SystemExit(f"extracting cases/semantic of {commit} from {mirror} failed")
    return target


def case_ids(folder, spec=None):
    """The case folders (``NNNNN``) under ``folder``, optionally limited by ``"a-b,c"``."""
    ids = sorted(d for d in os.listdir(folder) if d.isdigit() and (Path(folder) / d).is_dir())
    if not spec:
        return ids
    keep = set()
    for part in spec.split(","):
        a, _, b = part.partition("-")
        keep.update(range(int(a), int(b or a) + 1))
    return [c for c in ids if int(c) in keep]


# ------------------------------------------------------------------ one case (in a worker)
def classify(folder, case):
    """The record of one case (everything but timing and bookkeeping)."""
    desc = sc.description(folder, case)
    rec = {"case": case, "tags": sorted(set(desc["componentTags"]) | set(desc["testTags"])),
           "test_type": desc["testType"]}
    if desc["testType"] and desc["testType"] != "TimeCourse":
        return {**rec, "status": "n/a", "detail": f"testType {desc['testType']}: not a time course"}
    from pbsens.errors import UnsupportedModelError
    try:
        out = sc.run_case(folder, case)
    except UnsupportedModelError as e:
        kinds = sorted({k for k, _ in getattr(e, "unsupported", None) or []})
        return {**rec, "status": "refused", "kinds": kinds, "detail": str(e)[-400:]}
    except Exception as e:  # noqa: BLE001 - the point is to record it
        tb = traceback.extract_tb(e.__traceback__)
        where = f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
        return {**rec, "status": "error", "detail": f"{type(e).__name__} at {where}: {str(e)[:400]}"}
    status = "pass" if out["n_bad"] == 0 else "wrong"
    return {**rec, "status": status, "level": out["level"], "n_bad": out["n_bad"], "n": out["n"],
            "bad": out["bad"]}


def worker(conn, folder):
    """Read case ids from ``conn`` and send back their records until ``None``."""
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    import warnings
    warnings.simplefilter("ignore")
    while True:
        case = conn.recv()
        if case is None:
            return
        t0 = time.perf_counter()
        rec = classify(folder, case)
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        conn.send(rec)


class Worker:
    def __init__(self, ctx, folder):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker, args=(child, folder), daemon=True)
        self.proc.start()
        child.close()
        self.case, self.started, self.fresh = None, 0.0, True

    def give(self, case):
        self.case, self.started = case, time.monotonic()
        self.conn.send(case)

    def allowed(self, timeout):
        """Seconds the current case may take: a new worker's first case also imports pbsens
        (and may compile its kernels, minutes on a busy machine)."""
        return timeout + (FIRST_CASE_EXTRA if self.fresh else 0.0)

    def stop(self, kill=False):
        if kill:
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def run(folder, cases, n_workers, timeout, on_record):
    """Run ``cases`` on ``n_workers`` workers; ``on_record(rec)`` for each finished case."""
    ctx = mp.get_context("spawn")
    todo = list(cases)
    workers = [Worker(ctx, folder) for _ in range(min(n_workers, len(todo)))]
    try:
        while todo or any(w.case for w in workers):
            for w in workers:
                if w.case is None and todo:
                    w.give(todo.pop(0))
            busy = [w for w in workers if w.case]
            ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=1.0)
            now = time.monotonic()
            for i, w in enumerate(workers):
                if w.case is None:
                    continue
                if w.conn in ready:
                    try:
                        on_record(w.conn.recv())
                        w.case, w.fresh = None, False
                        continue
                    except (EOFError, OSError):
                        pass
                died = w.proc.sentinel in ready and not w.proc.is_alive()
                late = now - w.started > w.allowed(timeout)
                if died or late:
                    seconds = round(now - w.started, 3)
                    desc = sc.description(folder, w.case)
                    on_record({"case": w.case, "tags": sorted(set(desc["componentTags"]) | set(desc["testTags"])),
                               "test_type": desc["testType"], "status": "timeout" if late else "error",
                               "detail": (f"over {timeout} s" if late else
                                          f"worker died (exit code {w.proc.exitcode})"), "seconds": seconds})
                    w.stop(kill=True)
                    workers[i] = Worker(ctx, folder)
    finally:
        for w in workers:
            w.stop(kill=w.case is not None)


# ------------------------------------------------------------------ records and the table
def load_records(path):
    """The last record of each case in the JSONL file ``path`` (``{case: record}``)."""
    out = {}
    if path and Path(path).is_file():
        with open(path) as fh:
            for line in fh:
                line = line.strip()
                if line:
                    rec = json.loads(line)
                    out[rec["case"]] = rec
    return out


def _count(records):
    by_tag = defaultdict(Counter)
    for rec in records.values():
        for tag in rec.get("tags") or ["(none)"]:
            by_tag[tag][rec["status"]] += 1
    return Counter(r["status"] for r in records.values()), by_tag


def _refusals(records):
    alone, any_ = Counter(), Counter()
    for rec in records.values():
        if rec["status"] == "refused":
            kinds = rec.get("kinds") or ["(unnamed)"]
            for k in kinds:
                any_[k] += 1
            if len(kinds) == 1:
                alone[kinds[0]] += 1
    return alone, any_


def _cell(now, before):
    return f"{now}" if before is None or before == now else f"{now} ({before})"


def table_lines(records, command, baseline=None):
    """The generated section of docs/COVERAGE.md (markers included)."""
    total, by_tag = _count(records)
    b_total, b_tag = _count(baseline) if baseline else (None, None)
    alone, any_ = _refusals(records)
    b_alone, b_any = _refusals(baseline) if baseline else (None, None)
    dates = sorted(r.get("date", "") for r in records.values() if r.get("date"))
    commits = sorted({r.get("pbsens", "") for r in records.values() if r.get("pbsens")})
    commands = sorted({r["command"] for r in records.values() if r.get("command")}) or [command]
    lines = [SECTION_START, "## SBML Test Suite (semantic cases)", "",
             (f"{len(records)} cases of `cases/semantic` of github.com/sbmlteam/sbml-test-suite at commit `{COMMIT}`, "
             f"run by `benchmarks/sbml_suite.py` (its docstring defines each status); records dated "
             f"{dates[0] if dates else '?'} to {dates[-1] if dates else '?'} (UTC), pbsens commit(s) "
             f"{', '.join(f'`{c}`' for c in commits) or '?'}, one JSON line per case in "
             f"`benchmarks/results/sbml_suite.jsonl`. Command{'s' if len(commands) > 1 else ''} of the run:"), ""]
    lines += [f"    {c}" for c in commands] + [""]
    if baseline:
        lines += [("A number in parentheses is the count before this work (the baseline records in "
                  "`benchmarks/results/sbml_suite_baseline.jsonl`, same runner); no parentheses: unchanged."), ""]
    lines += ["| status | cases |", "|---|---|"]
    for s in STATUSES:
        lines.append(f"| {s} | {_cell(total.get(s, 0), b_total.get(s, 0) if b_total is not None else None)} |")
    lines += ["", "### By test tag", "",
              "A case counts under each of its `componentTags` and `testTags`.", "",
              "| tag | cases | " + " | ".join(STATUSES) + " |", "|---|---|" + "---|" * len(STATUSES)]
    for tag in sorted(by_tag, key=lambda t: (-sum(by_tag[t].values()), t)):
        c = by_tag[tag]
        b = b_tag.get(tag, Counter()) if b_tag is not None else None
        cells = [_cell(c.get(s, 0), b.get(s, 0) if b is not None else None) for s in STATUSES]
        lines.append(f"| {tag} | {sum(c.values())} | " + " | ".join(cells) + " |")
    lines += ["", "### What pbsens refuses", "",
              ("Constructs named by `UnsupportedModelError`: in how many refused cases each is the only "
              "one named, and in how many it is named at all."), "",
              "| construct | only construct | named in |", "|---|---|---|"]
    for k in sorted(any_, key=lambda k: (-alone.get(k, 0), -any_[k], k)):
        lines.append(f"| {k} | {_cell(alone.get(k, 0), b_alone.get(k, 0) if b_alone is not None else None)} | "
                     f"{_cell(any_[k], b_any.get(k, 0) if b_any is not None else None)} |")
    others = [r for r in records.values() if r["status"] in ("wrong", "error", "timeout")]
    if others:
        lines += ["", "### Cases wrong, in error or over time", "", "| case | status | detail |", "|---|---|---|"]
        for r in sorted(others, key=lambda r: r["case"]):
            detail = r.get("detail") or (f"{r.get('n_bad')} of {r.get('n')} entries off; first "
                                         f"(t, variable, got, expected): {r.get('bad', [])[:1]}")
            detail = re.sub(r"[^\s']*/cases/semantic/\d+/", "", detail.replace("\n", " ").replace("|", "/"))
            lines.append(f"| {r['case']} | {r['status']} | {detail[:300]} |")
    lines += ["", SECTION_END]
    return lines


def write_table(path, lines):
    path = Path(path)
    block = "\n".join(lines) + "\n"
    text = path.read_text() if path.is_file() else ""
    if SECTION_START in text and SECTION_END in text:
        pre, rest = text.split(SECTION_START, 1)
        post = rest.split(SECTION_END, 1)[1].lstrip("\n")
        text = pre + block + ("\n" + post if post else "")
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block
    path.write_text(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", help="folder with the case folders (cases/semantic)")
    ap.add_argument("--mirror", help="git directory of the suite (cases/semantic of --commit is extracted)")
    ap.add_argument("--commit", default=COMMIT)
    ap.add_argument("--work", help="where --mirror's cases are extracted (default /tmp/pbsens-sbml-suite-<commit>)")
    ap.add_argument("--cases", help="case numbers, e.g. 1-100,1809 (default all)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "sbml_suite.jsonl"))
    ap.add_argument("--rerun", nargs="*", default=[], choices=STATUSES + ("all",),
                    help="run again the recorded cases with these statuses")
    ap.add_argument("--table", default=str(ROOT / "docs" / "COVERAGE.md"))
    ap.add_argument("--no-table", action="store_true")
    ap.add_argument("--baseline", help="earlier results (JSONL) shown beside the counts")
    ap.add_argument("--table-only", action="store_true", help="only rewrite the table from --results")
    args = ap.parse_args(argv)
    given = list(argv if argv is not None else sys.argv[1:])
    paths = {"--suite": "CASES_DIR", "--mirror": "SUITE_GIT_DIR", "--work": "WORK_DIR"}
    shown = [paths.get(given[i - 1], a) if i and given[i - 1] in paths else a for i, a in enumerate(given)]
    command = "nice -n 10 python benchmarks/sbml_suite.py " + " ".join(shown)

    if not args.table_only:
        if args.suite:
            folder = Path(args.suite)
        elif args.mirror:
            folder = extract(args.mirror, args.commit, args.work or f"/tmp/pbsens-sbml-suite-{args.commit[:12]}")
        else:
            ap.error("give --suite or --mirror")
        done = load_records(args.results)
        rerun = set(STATUSES) if "all" in args.rerun else set(args.rerun)
        cases = [c for c in case_ids(folder, args.cases) if c not in done or done[c]["status"] in rerun]
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], check=False,
                              capture_output=True,
                              text=True).stdout.strip()
        Path(args.results).parent.mkdir(parents=True, exist_ok=True)
        counts = Counter()
        print(f"{len(cases)} cases to run ({len(done)} recorded in {args.results})", flush=True)
        with open(args.results, "a") as fh:
            def on_record(rec):
                rec["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
                rec["pbsens"] = head
                rec["command"] = command
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                counts[rec["status"]] += 1
                if sum(counts.values()) % 50 == 0 or rec["status"] in ("wrong", "error", "timeout"):
                    print(f"{rec['case']} {rec['status']:8s} {rec.get('detail', '')[:150]}  totals {dict(counts)}",
                          flush=True)
            run(folder, cases, args.workers, args.timeout, on_record)
        print(f"this run: {dict(counts)}")
    records = load_records(args.results)
    total, _ = _count(records)
    print(f"all records: {dict(total)} of {len(records)}")
    if not args.no_table and records:
        baseline = load_records(args.baseline) if args.baseline else None
        write_table(args.table, table_lines(records, command, baseline))
        print(f"table written to {args.table}")


if __name__ == "__main__":
    main()
