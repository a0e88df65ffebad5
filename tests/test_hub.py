"""A class on JupyterHub, end to end, with real Unix accounts (plmcourse/hub.py).

A hub on a loopback port (PAM accounts, configurable-http-proxy, each server started as its account from
.hub/env), one instructor and three students. The instructor releases 03_attention to nbgrader's exchange;
each student's own server fetches it, the notebook is filled in through that server's contents API and
submitted through nbgrader's assignment list, as JupyterLab's buttons do; `plmcourse grade all --exchange`
collects, grades in the sandbox and releases feedback; each student fetches their own. Students: one honest
(who first handed in a wrong version: the latest counts), one wrong, one who hands the work to the course's
reference, with dots and a dash in the account name, and one who does it all in a real browser (headless
Chromium, where it is installed): signs in with their password, opens Nbgrader > Assignment List, fetches,
validates (nbgrader runs the notebook in their own kernel) and submits with its buttons, and after grading
fetches feedback there.

Grading runs as root in the course's .venv, as the rest of the suite does: in a real class the instructor runs
the same command in their own server's terminal (course/INSTRUCTORS.md).
"""

import contextlib
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
from support import (ASSIGNMENT, BROKEN_SOFTMAX, FULL, NO_BROWSER, ROOT, chromium, gradebook_scores, once_per_run,
                     plmcourse_grade, scratch_course, solved, wait)

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
IN_BROWSER = "plmhub-dee"  # signs in with a password and uses JupyterLab's buttons
STUDENTS = [HONEST, WRONG, CHEAT] + ([] if NO_BROWSER else [IN_BROWSER])
DESERVED = {HONEST: FULL, WRONG: FULL - 3, CHEAT: BROKEN_SOFTMAX, IN_BROWSER: FULL}
VALIDATE_SECONDS = 300  # nbgrader runs the whole notebook in the student's kernel, on 2 busy cores


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
    passwords = hubs.create_accounts([INSTRUCTOR, *STUDENTS])
    prepared = scratch_course(tmp_path_factory, tmp_path_factory.mktemp("hub-instructor"), ASSIGNMENT)
    course = hubs.instructor_course(prepared, Path(pwd.getpwnam(INSTRUCTOR).pw_dir), INSTRUCTOR)
    hub = hubs.Hub(state=where / "state", env=HUB_DIR / "env",
                   proxy=HUB_DIR / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy",
                   exchange=where / "exchange", instructor=INSTRUCTOR, students=STUDENTS, course=course,
                   port=free_ports(3))
    seen = {}
    process = hubs.start(hub)
    try:
        with contextlib.ExitStack() as browser:
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
            if IN_BROWSER in STUDENTS:
                driver = browser.enter_context(chromium(tmp_path_factory.mktemp("hub-browser")))
                tokens[IN_BROWSER], seen["in the browser"] = hand_in_with_the_browser(
                    driver, hub, IN_BROWSER, passwords[IN_BROWSER])
            fetched = Path(pwd.getpwnam(HONEST).pw_dir) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
            seen["fetched is the student's"] = (fetched.exists() and
                                                fetched.stat().st_uid == pwd.getpwnam(HONEST).pw_uid)
            seen["report"] = plmcourse_grade(course, "all", ASSIGNMENT, "--exchange", str(hub.exchange))
            seen["scores"] = {name: total for name, (total, _, _) in gradebook_scores(course, ASSIGNMENT).items()}
            if IN_BROWSER in STUDENTS:
                seen["in the browser"]["after grading"] = fetch_feedback_with_the_browser(driver)
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


# ---------------------------------------------------------------- the student in a real browser


def no_error_dialog(driver):
    """Fail at once with nbgrader's words when it shows its error dialog (a fetch or submit that failed)."""
    from selenium.webdriver.common.by import By

    for dialog in driver.find_elements(By.CSS_SELECTOR, ".nbgrader-ErrorDialog"):
        raise AssertionError(f"nbgrader showed an error: {dialog.text[:500]!r}")


def list_button(driver, section: str, label: str, seconds: float = 60):
    """The enabled `label` button of ASSIGNMENT's row in the assignment list's `section` (released, fetched,
    submitted), once it is there."""
    from selenium.webdriver.common.by import By

    def found(d):
        no_error_dialog(d)
        for row in d.find_elements(By.CSS_SELECTOR, f"#{section}_assignments_list .list_item"):
            if ASSIGNMENT in row.text:
                for button in row.find_elements(By.CSS_SELECTOR, ".item_status button"):
                    if button.text.strip() == label and button.is_enabled():
                        return button
        return None

    return wait(driver, seconds, f"a {label!r} button on {ASSIGNMENT} in the {section} assignments", found)


def section_text(driver, section: str) -> str:
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, f"#{section}_assignments_list .list_item")
    return " ".join(row.text for row in rows)


def hand_in_with_the_browser(driver, hub, name: str, password: str) -> tuple[str, dict]:
    """Sign in on the hub's page, open Nbgrader > Assignment List, Fetch, then (the answers typed: saved through
    the server, as JupyterLab saves) Validate and Submit with the list's buttons. A token for `name` and what
    the page showed."""
    from selenium.webdriver.common.by import By

    seen = {}
    driver.get(f"{hub.url}/hub/login")
    wait(driver, 60, "the hub's sign-in form", lambda d: d.find_elements(By.ID, "username_input"))
    driver.find_element(By.ID, "username_input").send_keys(name)
    driver.find_element(By.ID, "password_input").send_keys(password)
    driver.find_element(By.ID, "login_submit").click()
    wait(driver, 180, f"{name}'s JupyterLab after signing in (the hub starts their server)",
         lambda d: d.find_elements(By.CSS_SELECTOR, "#jp-main-dock-panel .lm-TabBar-tab"))
    seen["url"] = driver.current_url
    menu = wait(driver, 60, "an 'Nbgrader' menu in JupyterLab's menu bar", lambda d: [
        item for item in d.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item") if item.text.strip() == "Nbgrader"])
    menu[0].click()
    items = wait(driver, 10, "the Nbgrader menu to open", lambda d: d.find_elements(
        By.CSS_SELECTOR, ".lm-Menu:not(.lm-MenuBar) .lm-Menu-item .lm-Menu-itemLabel"))
    seen["nbgrader menu"] = [item.text.strip() for item in items if item.text.strip()]
    next(item for item in items if item.text.strip() == "Assignment List").click()

    list_button(driver, "released", "Fetch").click()
    list_button(driver, "fetched", "Submit")  # fetched: the row has moved
    token = hubs.start_server(hub, name)  # their server runs already: a token to save the answers with
    hubs.save_notebook(hub, name, token, f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb", json.loads(nbformat.writes(solved())))

    expand = wait(driver, 30, f"{ASSIGNMENT}'s link in the fetched assignments", lambda d: [
        a for a in d.find_elements(By.CSS_SELECTOR, "#fetched_assignments_list a") if a.text.strip() == ASSIGNMENT])
    expand[0].click()  # shows its notebooks, each with a Validate button
    list_button(driver, "fetched", "Validate").click()
    message = wait(driver, VALIDATE_SECONDS, "nbgrader's validation dialog",
                   lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-Dialog #validation-message"))[0]
    seen["validate"] = (message.get_attribute("class"), driver.find_element(By.CSS_SELECTOR, ".jp-Dialog-content").text)
    driver.find_element(By.CSS_SELECTOR, ".jp-Dialog .jp-Dialog-button").click()
    wait(driver, 10, "the validation dialog to close", lambda d: not d.find_elements(By.CSS_SELECTOR, ".jp-Dialog"))

    list_button(driver, "fetched", "Submit").click()
    wait(driver, 60, f"{ASSIGNMENT} in the submitted assignments", lambda d: no_error_dialog(d) or (
        ASSIGNMENT in section_text(d, "submitted")))
    seen["submitted"] = section_text(driver, "submitted")
    return token, seen


def fetch_feedback_with_the_browser(driver) -> str:
    """After grading: refresh the list, press Fetch Feedback; the submitted section's text then."""
    from selenium.webdriver.common.by import By

    driver.find_element(By.ID, "refresh_assignments_list").click()
    list_button(driver, "submitted", "Fetch Feedback").click()
    wait(driver, 60, "'(view feedback)' in the submitted assignments after Fetch Feedback",
         lambda d: no_error_dialog(d) or "view feedback" in section_text(d, "submitted"))
    return section_text(driver, "submitted")


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
    assert graded["scores"] == {name: DESERVED[name] for name in STUDENTS}, graded["report"]


def test_collect_reports_the_resubmission_and_grades_the_latest(graded):
    report = graded["report"]
    assert f"collected {len(STUDENTS)} submission(s)" in report, report
    assert f"{HONEST}: 2 submissions; the latest" in report, report
    assert "feedback: released through the exchange" in report, report


def test_each_student_fetches_only_their_own_feedback(graded):
    assert set(graded["feedback"]) == set(STUDENTS)
    for name, pages in graded["feedback"].items():
        assert len(pages) == 1, f"{name} fetched {len(pages)} feedback pages"
        assert f"{ASSIGNMENT} (Score: {DESERVED[name]:.1f} / {FULL:.1f})" in pages[0], \
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


@pytest.mark.skipif(bool(NO_BROWSER), reason=NO_BROWSER)
def test_a_student_signs_in_fetches_validates_and_submits_in_the_browser(graded):
    seen = graded["in the browser"]
    assert seen["url"].startswith("http://127.0.0.1:") and f"/user/{IN_BROWSER}/lab" in seen["url"], seen["url"]
    # A student's Nbgrader menu: the assignment list only, none of the instructor's tools.
    assert seen["nbgrader menu"] == ["Assignment List"], seen["nbgrader menu"]
    kind, text = seen["validate"]
    assert "validation-success" in kind and "Success" in text, f"Validate said: {text[:300]!r}"
    assert ASSIGNMENT in seen["submitted"], seen["submitted"]
    # Graded with the others (the gradebook test), and the feedback came back through the same list.
    assert "view feedback" in seen["after grading"], seen["after grading"]
