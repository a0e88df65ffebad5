"""`plmcourse grade collect ASSIGNMENT --exchange FOLDER`: nbgrader's exchange as a class on JupyterHub fills it.

The inbound folder is laid out as `nbgrader submit` leaves it (<student>+<assignment>+<time>+<random>/, the
notebook, timestamp.txt, submission_secret.txt), each folder owned by the account that made it (this machine's
own accounts stand in for students: daemon, bin, sys, games), and collected by the real `nbgrader collect`.
What the course adds is checked, each case in one sentence, and so is what any account can do to the inbound
folder, which it may write into: a folder in another student's name, a link in a submission, a name that is a
path. tests/test_hub.py runs the whole path with a hub and real accounts."""

import datetime
import os
import pwd

import nbformat
import pytest
from nbgrader.api import Gradebook

from plmcourse.autograde import workflow
from support import ASSIGNMENT, COURSE, scratch_course, solved

pytestmark = [pytest.mark.nbgrader,
              pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                 reason="the inbound's folders are given to other accounts (chown): root only")]

DUE = datetime.datetime(2026, 3, 1, 12, 0, 0)
HOUR = datetime.timedelta(hours=1)


def hand_in(exchange, student, when, nb, owner=None, link_to=None, notebook_by=None):
    """A folder in the inbound as `owner`'s nbgrader submit leaves it (the student's own account by default);
    `notebook_by`: the account that put the notebook there instead (nbgrader leaves the folder writable by all)."""
    stamp = when.strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"
    folder = exchange / "plmcourse" / "inbound" / f"{student}+{ASSIGNMENT}+{stamp}+a1b2c3"
    folder.mkdir(parents=True)
    if link_to:
        (folder / f"{ASSIGNMENT}.ipynb").symlink_to(link_to)
    else:
        nbformat.write(nb, folder / f"{ASSIGNMENT}.ipynb")
    (folder / "timestamp.txt").write_text(stamp)
    (folder / "submission_secret.txt").write_text("ab" * 64)
    account = pwd.getpwnam(owner or student)
    for path in [folder, *folder.iterdir()]:
        os.lchown(path, account.pw_uid, account.pw_gid)
    if notebook_by:
        other = pwd.getpwnam(notebook_by)
        os.lchown(folder / f"{ASSIGNMENT}.ipynb", other.pw_uid, other.pw_gid)


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    where = tmp_path_factory.mktemp("exchange-collect")
    course = scratch_course(tmp_path_factory, where, ASSIGNMENT)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        gradebook.update_or_create_assignment(ASSIGNMENT, duedate=DUE)
    exchange = where / "exchange"
    hand_in(exchange, "daemon", DUE - 3 * HOUR, nbformat.v4.new_notebook())
    hand_in(exchange, "daemon", DUE - HOUR, solved())  # the latest of daemon's own counts
    hand_in(exchange, "daemon", DUE - HOUR / 2, nbformat.v4.new_notebook(), owner="nobody")  # a later one, forged
    hand_in(exchange, "bin", DUE + HOUR, solved())
    hand_in(exchange, "sys", DUE - HOUR, nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "x = 1", metadata={"nbgrader": {"grade_id": "test_other", "grade": True, "points": 1}})]))
    hand_in(exchange, "games", DUE - HOUR, None, link_to=COURSE / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    hand_in(exchange, "sync", DUE - HOUR, solved(), notebook_by="nobody")  # a classmate replaced the notebook
    hand_in(exchange, ".hidden", DUE - HOUR, solved(), owner="root")
    hand_in(exchange, "..", DUE - HOUR, solved(), owner="root")  # "the student .." would be the course itself
    report = workflow.collect_exchange(course, ASSIGNMENT, exchange)
    return course, report, str(report)


def test_each_student_s_latest_own_submission_is_filed_for_grading(collected):
    course, report, text = collected
    assert sorted(report.collected) == ["bin", "daemon"], text
    filed = nbformat.read(course / "submitted" / "daemon" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    assert len(filed.cells) == len(solved().cells)  # neither the empty first one nor the forged later one
    # What release_feedback needs later stays beside the notebook.
    assert (course / "submitted" / "daemon" / ASSIGNMENT / "submission_secret.txt").read_text() == "ab" * 64


def test_a_resubmission_a_late_one_and_a_forged_one_get_a_line_each(collected):
    text = collected[2]
    assert "daemon: 2 submissions; the latest (2026-03-01 11:00:00.000000 UTC) is graded, the earlier stay" in text
    assert "daemon: left out 1 submission(s) in that name made by nobody, not by daemon" in text
    assert "bin: submitted 2026-03-01 13:00:00.000000 UTC, after the due date 2026-03-01 12:00:00.000000 UTC" in text
    assert "daemon: submitted" not in text  # before the due date


def test_a_link_in_a_submission_is_not_followed(collected):
    course, report, text = collected
    assert "games: left out of the submission what is not a plain file of theirs: 03_attention.ipynb (a link)" in text
    assert "games" not in report.collected
    assert not (course / "submitted" / "games" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").exists()


def test_another_assignment_s_notebook_and_an_unfiled_id_are_named_and_left_out(collected):
    course, report, _ = collected
    assert report.problems["sys"].startswith("it holds the exercises of a different assignment")
    for name in (".hidden", ".."):
        assert "not one the course files" in report.problems[name]
    assert (course / "gradebook.db").exists() and (course / "source" / ASSIGNMENT).is_dir()


def test_the_preparation_keeps_the_exchange_s_notes_and_sets_the_rest_aside(collected):
    course = collected[0]
    folder = course / "submitted" / "bin" / ASSIGNMENT
    (folder / "extra.py").write_text("print('hi')")
    (folder / "submission_secret.txt").write_text("cd" * 64)
    workflow.prepare_submissions(course, ASSIGNMENT, "bin")
    assert sorted(p.name for p in folder.iterdir()) == [f"{ASSIGNMENT}.ipynb", "submission_secret.txt",
                                                        "timestamp.txt"]


def test_a_file_another_account_put_in_a_student_s_folder_is_left_out(collected):
    course, report, text = collected
    assert "sync: left out of the submission what is not a plain file of theirs: 03_attention.ipynb (made by nobody)" \
        in text, text
    assert "sync" not in report.collected and "sync" in report.problems
    assert not (course / "submitted" / "sync" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").exists()
