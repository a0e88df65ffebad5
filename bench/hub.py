"""A class on JupyterHub: what each step costs on this machine (root only: it makes Unix accounts).

A hub as `python3 tasks.py hub` starts it (plmcourse.hub), STUDENTS accounts, notebook 03 released to nbgrader's
exchange. Each student's server is started, fetches, saves a solved notebook and submits, one student after
another (the round trip JupyterLab's buttons make); then the instructor's `plmcourse grade all --exchange`
collects, grades in the sandbox and releases feedback, and each student fetches theirs. Every student must get
full marks, or the row says so instead of a time. The accounts are removed afterwards.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from bench.common import write_result
from plmcourse import hub as hubs
from plmcourse.release import release_course, solved_release

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "03_attention"
STUDENTS = 8
INSTRUCTOR = "plmbench-teacher"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _course(where: Path) -> Path:
    course = where / "course"
    course.mkdir()
    shutil.copy(ROOT / "course" / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "course" / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    release_course(course, [ASSIGNMENT])
    return course


def _rss_mib(uid: int) -> float:
    """The resident memory of every process of one account, in MiB (from /proc)."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:  # the process ended
            continue
        if int(fields["Uid"].split()[0]) == uid and "VmRSS" in fields:
            total += int(fields["VmRSS"].split()[0])
    return total / 1024


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def main():
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not (ROOT / ".hub" / "setup.json").exists():
        return write_result("hub", {"title": "A class on JupyterHub", "rows": [
            {"step": "not run", "result": "needs root and .hub/ (python3 tasks.py setup as root)"}]})
    students = [f"plmbench-s{i}" for i in range(STUDENTS)]
    accounts = [INSTRUCTOR, *students]
    hubs.remove_accounts(accounts)
    hubs.create_accounts(accounts)
    where = Path(tempfile.mkdtemp(prefix="plmcourse-hub-bench-", dir="/tmp"))
    os.chmod(where, 0o755)
    rows = []
    try:
        course = hubs.instructor_course(_course(where), Path(pwd.getpwnam(INSTRUCTOR).pw_dir), INSTRUCTOR)
        hub = hubs.Hub(state=where / "state", env=ROOT / ".hub" / "env",
                       proxy=ROOT / ".hub" / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy",
                       exchange=where / "exchange", instructor=INSTRUCTOR, students=students, course=course,
                       port=_free_port())
        process, seconds = _timed(lambda: hubs.start(hub))
        rows.append({"step": "the hub starts (proxy included) and answers", "seconds": round(seconds, 1)})
        try:
            rows += _class(hub, course, students)
        finally:
            hubs.stop(process)
    finally:
        hubs.remove_accounts(accounts)
        shutil.rmtree(where, ignore_errors=True)
    return write_result("hub", {
        "title": f"A class on JupyterHub: {STUDENTS} students, notebook {ASSIGNMENT}, this machine",
        "notes": "Students one after another; grading with `plmcourse grade all --exchange` (collect, sandboxed "
                 "autograde with the judge, feedback released, export, review). Medians over the students.",
        "rows": rows})


def _class(hub, course, students):
    env = {**os.environ, "PLMCOURSE_EXCHANGE": str(hub.exchange),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    subprocess.run([sys.executable, "-m", "nbgrader", "release_assignment", ASSIGNMENT], cwd=course, env=env,
                   check=True, capture_output=True)
    solved = json.loads(nbformat.writes(solved_release(ROOT / "course", ASSIGNMENT)))
    starts, trips, tokens = [], [], {}
    for name in students:
        tokens[name], seconds = _timed(lambda: hubs.start_server(hub, name))
        starts.append(seconds)

        def round_trip():
            hubs.assignment_action(hub, name, tokens[name], "fetch", ASSIGNMENT)
            hubs.save_notebook(hub, name, tokens[name], f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb", solved)
            hubs.assignment_action(hub, name, tokens[name], "submit", ASSIGNMENT)
        trips.append(_timed(round_trip)[1])
    memory = [_rss_mib(pwd.getpwnam(name).pw_uid) for name in students]
    graded, seconds = _timed(lambda: subprocess.run(
        [sys.executable, "-m", "plmcourse", "grade", "all", ASSIGNMENT, "--exchange", str(hub.exchange),
         "--course", str(course)], env=env, capture_output=True, text=True))
    search = re.search(r"\(\d+ runs of a function.*?, ([\d.]+) s, now\)", graded.stdout)
    pages, fetches = {}, []
    for name in students:
        pages[name], took = _timed(lambda: hubs.feedback_pages(hub, name, tokens[name], ASSIGNMENT))
        fetches.append(took)
    full = all(len(p) == 1 and "(Score: 10.0 / 10.0)" in p[0] for p in pages.values())
    rows = [
        {"step": "a student's server starts (median)", "seconds": round(statistics.median(starts), 2)},
        {"step": "fetch, save the notebook, submit (median)", "seconds": round(statistics.median(trips), 2)},
        {"step": "a student's idle server, resident memory (median, MiB; no kernel running)",
         "MiB": round(statistics.median(memory))},
    ]
    grading = {"step": f"plmcourse grade all --exchange, {len(students)} students", "seconds": round(seconds, 1)}
    if graded.returncode or not full:
        grading["result"] = "FAILED: not every student got full marks in the feedback they fetched"
    else:
        search_s = float(search.group(1)) if search else 0.0
        grading["of which the behavioural search (once per assignment)"] = round(search_s, 1)
        grading["students per minute after the search"] = round(len(students) / (seconds - search_s) * 60, 1)
    rows += [grading, {"step": "a student fetches feedback (median)", "seconds": round(statistics.median(fetches), 2)}]
    return rows


if __name__ == "__main__":
    print(main())
