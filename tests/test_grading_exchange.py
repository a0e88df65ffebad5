"""`plmcourse grade collect ASSIGNMENT --exchange FOLDER`: nbgrader's exchange as a class on JupyterHub fills it.

The inbound folder is laid out as `nbgrader submit` leaves it (<student>+<assignment>+<time>+<random>/, the
notebook, timestamp.txt, submission_secret.txt) and collected by the real `nbgrader collect`; what the course adds
is checked: each case in one sentence. tests/test_hub.py runs the whole path with a hub and real accounts."""

import datetime

import nbformat
import pytest
from nbgrader.api import Gradebook

from plmcourse.autograde import workflow
from support import ASSIGNMENT, scratch_course, solved

pytestmark = pytest.mark.nbgrader

DUE = datetime.datetime(2026, 3, 1, 12, 0, 0)


def hand_in(exchange, student, when, nb):
    stamp = when.strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"
    folder = exchange / "plmcourse" / "inbound" / f"{student}+{ASSIGNMENT}+{stamp}+a1b2c3"
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{ASSIGNMENT}.ipynb")
    (folder / "timestamp.txt").write_text(stamp)
    (folder / "submission_secret.txt").write_text("ab" * 64)


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    where = tmp_path_factory.mktemp("exchange-collect")
    course = scratch_course(tmp_path_factory, where, ASSIGNMENT)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        gradebook.update_or_create_assignment(ASSIGNMENT, duedate=DUE)
    exchange = where / "exchange"
    hour = datetime.timedelta(hours=1)
    hand_in(exchange, "ada", DUE - 3 * hour, nbformat.v4.new_notebook())
    hand_in(exchange, "ada", DUE - hour, solved())  # the latest counts
    hand_in(exchange, "bo", DUE + hour, solved())
    hand_in(exchange, "cy", DUE - hour, nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "x = 1", metadata={"nbgrader": {"grade_id": "test_other", "grade": True, "points": 1}})]))
    hand_in(exchange, ".hidden", DUE - hour, solved())
    report = workflow.collect_exchange(course, ASSIGNMENT, exchange)
    return course, report, str(report)


def test_each_student_s_latest_submission_is_filed_for_grading(collected):
    course, report, _ = collected
    assert sorted(report.collected) == ["ada", "bo"]
    filed = nbformat.read(course / "submitted" / "ada" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    assert len(filed.cells) == len(solved().cells)  # not the empty notebook handed in first
    # What release_feedback needs later stays beside the notebook.
    assert (course / "submitted" / "ada" / ASSIGNMENT / "submission_secret.txt").read_text() == "ab" * 64


def test_a_resubmission_and_a_late_one_get_a_line_each(collected):
    text = collected[2]
    assert "ada: 2 submissions; the latest (2026-03-01 11:00:00.000000 UTC) is graded, the earlier stay" in text
    assert "bo: submitted 2026-03-01 13:00:00.000000 UTC, after the due date 2026-03-01 12:00:00.000000 UTC" in text
    assert "ada: submitted" not in text  # before the due date


def test_another_assignment_s_notebook_and_an_unfiled_id_are_named_and_left_out(collected):
    course, report, _ = collected
    assert report.problems["cy"].startswith("it holds the exercises of a different assignment")
    assert "not one the course files" in report.problems[".hidden"]
    assert not (course / "submitted" / ".hidden").exists()


def test_the_preparation_keeps_the_exchange_s_notes_and_sets_the_rest_aside(collected):
    course = collected[0]
    folder = course / "submitted" / "bo" / ASSIGNMENT
    (folder / "extra.py").write_text("print('hi')")
    (folder / "submission_secret.txt").write_text("cd" * 64)
    workflow.prepare_submissions(course, ASSIGNMENT, "bo")
    assert sorted(p.name for p in folder.iterdir()) == [f"{ASSIGNMENT}.ipynb", "submission_secret.txt",
                                                        "timestamp.txt"]
