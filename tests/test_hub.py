"""A class on JupyterHub, end to end, with real Unix accounts (plmcourse/hub.py).

A hub on a loopback port (PAM accounts, configurable-http-proxy, each server started as its account from
.hub/env), one instructor and three students. The instructor releases 03_attention to nbgrader's exchange;
each student's own server fetches it, the notebook is filled in through that server's contents API and
submitted through nbgrader's assignment list, as JupyterLab's buttons do; `plmcourse grade all --exchange`
collects, grades in the sandbox and releases feedback; each student fetches their own. Students: one honest
(who first handed in a wrong version: the latest counts), one wrong, one who hands the work to the course's
reference, with dots and a dash in the account name.

Grading runs as root in the course's .venv, as the rest of the suite does: in a real class the instructor runs
the same command in their own server's terminal (course/INSTRUCTORS.md).
"""

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.error
from pathlib import Path

import nbformat
import pytest

from plmcourse import hub as hubs
from plmcourse.autograde import sandbox
from support import (ASSIGNMENT, BROKEN_SOFTMAX, FULL, ROOT, gradebook_scores, once_per_run, plmcourse_grade,
                     scratch_course, solved)

HUB_DIR = ROOT / ".hub"
pytestmark = [
    pytest.mark.nbgrader, pytest.mark.integration,
    pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("useradd") is None,
                       reason="the hub test makes Unix accounts: root and useradd"),
    pytest.mark.skipif(not (HUB_DIR / "setup.json").exists(),
                       reason="no hub environment: `python3 tasks.py setup` builds .hub/ as root"),
    pytest.mark.skipif(sandbox.available() is not None, reason=str(sandbox.available())),
]

INSTRUCTOR = "plmhub-teacher"
HONEST, WRONG, CHEAT = "plmhub-ada", "plmhub-bo", "plmhub-cy.o-d"
STUDENTS = [HONEST, WRONG, CHEAT]


def without_scaling():
    nb = solved()
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "scaled_dot_product_attention")
    cell.source = cell.source.replace(" / np.sqrt(d_k)", "")
    return nb


def delegated():
    return solved(softmax="from plmcourse.ref import softmax as course_softmax\n\n"
                          "def softmax(x, axis=-1):\n    return course_softmax(x, axis=axis)\n")


def free_ports(count):
    """A port p with p .. p + count - 1 free (the hub's proxy, the hub itself, the proxy's API)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = s.getsockname()[1]
        if first + count > 65535:
            continue
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
    raise RuntimeError("no free ports")


def run_as(name, *cmd):
    return subprocess.run(["runuser", "-u", name, "--", *cmd], capture_output=True, text=True)


def run_the_class(tmp_path_factory, where: Path) -> dict:
    """The whole class, start to end, on a hub that is stopped (and its accounts removed) before this returns:
    what every test reads."""
    hubs.remove_accounts([INSTRUCTOR, *STUDENTS])  # left by an earlier run that was killed
    hubs.create_accounts([INSTRUCTOR, *STUDENTS])
    prepared = scratch_course(tmp_path_factory, tmp_path_factory.mktemp("hub-instructor"), ASSIGNMENT)
    course = hubs.instructor_course(prepared, Path(pwd.getpwnam(INSTRUCTOR).pw_dir), INSTRUCTOR)
    hub = hubs.Hub(state=where / "state", env=HUB_DIR / "env",
                   proxy=HUB_DIR / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy",
                   exchange=where / "exchange", instructor=INSTRUCTOR, students=STUDENTS, course=course,
                   port=free_ports(3))
    seen = {}
    process = hubs.start(hub)
    try:
        release = subprocess.run([sys.executable, "-m", "nbgrader", "release_assignment", ASSIGNMENT],
                                 cwd=course, capture_output=True, text=True,
                                 env={**os.environ, "PLMCOURSE_EXCHANGE": str(hub.exchange)})
        assert release.returncode == 0, release.stderr
        tokens, seen["listed"] = {}, {}
        handed_in = {HONEST: [without_scaling(), solved()], WRONG: [without_scaling()], CHEAT: [delegated()]}
        for name, notebooks in handed_in.items():
            tokens[name] = token = hubs.start_server(hub, name)
            seen["listed"][name] = hubs.api(hub, "GET", f"/user/{name}/assignments?course_id={hubs.COURSE_ID}",
                                            token=token)
            hubs.assignment_action(hub, name, token, "fetch", ASSIGNMENT)
            for nb in notebooks:
                path = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
                hubs.save_notebook(hub, name, token, path, json.loads(nbformat.writes(nb)))
                hubs.assignment_action(hub, name, token, "submit", ASSIGNMENT)
        fetched = Path(pwd.getpwnam(HONEST).pw_dir) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        seen["fetched is the student's"] = fetched.exists() and fetched.stat().st_uid == pwd.getpwnam(HONEST).pw_uid
        seen["report"] = plmcourse_grade(course, "all", ASSIGNMENT, "--exchange", str(hub.exchange))
        seen["scores"] = {name: total for name, (total, _, _) in gradebook_scores(course, ASSIGNMENT).items()}
        seen["feedback"] = {name: hubs.feedback_pages(hub, name, token, ASSIGNMENT) for name, token in tokens.items()}
        folder = hub.exchange / hubs.COURSE_ID
        seen["another lists"] = {part: run_as(WRONG, "ls", str(folder / part)).returncode == 0
                                 for part in ("inbound", "feedback")}
        try:
            hubs.api(hub, "GET", f"/user/{WRONG}/formgrader/api/assignments", token=tokens[WRONG])
            seen["student's formgrader"] = 200
        except urllib.error.HTTPError as error:
            seen["student's formgrader"] = error.code
        token = hubs.start_server(hub, INSTRUCTOR)
        assignments = hubs.api(hub, "GET", f"/user/{INSTRUCTOR}/formgrader/api/assignments", token=token)
        seen["instructor's formgrader"] = [a["name"] for a in assignments]
        seen["course is the instructor's"] = course.stat().st_uid == pwd.getpwnam(INSTRUCTOR).pw_uid
    finally:
        hubs.stop(process)
        hubs.remove_accounts([INSTRUCTOR, *STUDENTS])
    return seen


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class, run once per test run (the accounts are the machine's, one set at a time); every test reads
    what it saw."""
    def build(_):
        # Every account's server must reach the exchange: the folders above it are open to all (pytest's are not).
        where = Path(tempfile.mkdtemp(prefix="plmcourse-hub-", dir="/tmp"))
        os.chmod(where, 0o755)
        try:
            return run_the_class(tmp_path_factory, where)
        finally:
            shutil.rmtree(where, ignore_errors=True)

    return once_per_run(tmp_path_factory, "hub-class", build)[1]


def test_each_student_fetched_the_released_notebook(graded):
    for name, reply in graded["listed"].items():
        released = [a for a in reply["value"] if a["assignment_id"] == ASSIGNMENT and a["status"] == "released"]
        assert released, f"{name} did not see {ASSIGNMENT} released: {reply}"
    assert graded["fetched is the student's"]


def test_the_gradebook_has_each_student_s_deserved_score(graded):
    assert graded["scores"] == {HONEST: FULL, WRONG: FULL - 3, CHEAT: BROKEN_SOFTMAX}, graded["report"]


def test_collect_reports_the_resubmission_and_grades_the_latest(graded):
    report = graded["report"]
    assert "collected 3 submission(s)" in report, report
    assert f"{HONEST}: 2 submissions; the latest" in report, report
    assert "feedback: released through the exchange" in report, report


def test_each_student_fetches_only_their_own_feedback(graded):
    scores = {HONEST: FULL, WRONG: FULL - 3, CHEAT: BROKEN_SOFTMAX}
    for name, pages in graded["feedback"].items():
        assert len(pages) == 1, f"{name} fetched {len(pages)} feedback pages"
        assert f"{ASSIGNMENT} (Score: {scores[name]:.1f} / {FULL:.1f})" in pages[0], \
            f"{name}'s feedback does not show their score"
        others = [other for other in STUDENTS if other != name]
        assert not any(other in pages[0] for other in others), f"{name}'s feedback names another student"
    # The check's sentence reached the student: the course's reference is not there while grading.
    assert "plmcourse.ref.attention.softmax is not available while grading" in graded["feedback"][CHEAT][0]


def test_a_student_cannot_list_what_others_handed_in_or_got_back(graded):
    assert graded["another lists"] == {"inbound": False, "feedback": False}


def test_only_the_instructor_s_server_has_the_formgrader(graded):
    assert graded["student's formgrader"] == 404
    assert graded["instructor's formgrader"] == [ASSIGNMENT]
    assert graded["course is the instructor's"]
