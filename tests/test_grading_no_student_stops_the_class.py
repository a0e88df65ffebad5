"""One student's submission never stops or changes the grading of the others.

Each submission below once crashed `plmcourse grade all` for the whole class: output that
is not UTF-8, an extra notebook in the student's folder, a cell whose nbgrader metadata is
not a dict. Graded through the real instructor commands (sandbox on where bubblewrap is),
every student must be graded, with the points their answers deserve, and the report must
say what was set aside.
"""

import subprocess
import sys

import nbformat
import pytest
from nbgrader.api import Gradebook

from conftest import COURSE
from plmcourse.autograde import sandbox
from plmcourse.release import nbgrader_env, solved_release
from support import scratch_course

pytestmark = pytest.mark.nbgrader

ASSIGNMENT = "00_welcome"


def honest():
    return solved_release(COURSE, ASSIGNMENT)


def noisy():
    # Right answer, and raw bytes that are not UTF-8 written straight to file descriptor 1.
    nb = honest()
    nb.cells.append(nbformat.v4.new_code_cell("import os\nos.write(1, b'\\xff\\xfe\\x80 not utf-8\\n')"))
    return nb


def with_notes():
    nb = honest()
    nb.cells.append(nbformat.v4.new_markdown_cell("my own notes"))
    nb.cells[-1].metadata["nbgrader"] = "my notes"  # not a dict
    return nb


SUBMISSIONS = {"honest": honest, "noisy": noisy, "extra": honest, "notes": with_notes}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    course = scratch_course(tmp_path_factory, root, ASSIGNMENT)
    export = root / "export"
    for student, make in SUBMISSIONS.items():
        (export / student).mkdir(parents=True)
        nbformat.write(make(), export / student / f"{ASSIGNMENT}.ipynb")
    no_sandbox = ["--no-sandbox"] if sandbox.available() else []  # available() says why not, or None
    report = [grade(course, "collect", ASSIGNMENT, str(export))]
    # The plain-copy layout of INSTRUCTORS.md: whatever else was in a student's folder comes too.
    extra = course / "submitted" / "extra" / ASSIGNMENT / "scratch.ipynb"
    extra.write_text(nbformat.writes(nbformat.v4.new_notebook()))
    # A cheat's version: the folder the extra notebook is set aside in is a link into source/.
    planter = course / "submitted" / "planter" / ASSIGNMENT
    planter.mkdir(parents=True)
    nbformat.write(honest(), planter / f"{ASSIGNMENT}.ipynb")
    (planter / "planted.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    (planter.parent / f"{ASSIGNMENT}.extra").symlink_to(course / "source" / ASSIGNMENT)
    report.append(grade(course, "autograde", ASSIGNMENT, *no_sandbox))
    report.append(grade(course, "feedback", ASSIGNMENT))
    report.append(grade(course, "export"))
    return course, report


def grade(course, *args):
    done = subprocess.run([sys.executable, "-m", "plmcourse", "grade", *args, "--course", str(course)],
                          capture_output=True, env=nbgrader_env())
    return done.returncode, (done.stdout + done.stderr).decode(errors="replace")


def scores(course):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {s.id: gradebook.find_submission(ASSIGNMENT, s.id).score for s in gradebook.students
                if any(sub.assignment.name == ASSIGNMENT for sub in s.submissions)}


def test_every_command_finishes(graded):
    _, report = graded
    for returncode, text in report:
        assert returncode == 0 and "Traceback" not in text, text


def test_nothing_is_set_aside_through_a_planted_link(graded):
    course, report = graded
    assert not (course / "source" / ASSIGNMENT / "planted.ipynb").exists()
    assert "planter: could not set planted.ipynb aside" in "\n".join(text for _, text in report)
    assert "honest" in scores(course)  # and the rest of the class was graded


def test_the_report_says_what_was_set_aside(graded):
    text = "\n".join(text for _, text in graded[1])
    assert "extra: left out scratch.ipynb" in text
    assert "notes: ignored nbgrader metadata that is not nbgrader's" in text


@pytest.mark.parametrize("student", SUBMISSIONS)
def test_every_student_gets_the_points_their_answers_deserve(graded, student):
    course, _ = graded
    assert scores(course).get(student) == 1.0
