"""The instructors' workflow from the README, run for real with nbgrader on a scratch copy of the course.

generate_assignment -> db student add -> submissions -> autograde -> generate_feedback -> export,
then the scores are read back from the real gradebook and the real CSV.
"""

import csv
import shutil
import subprocess
import sys

import nbformat
import pytest

from conftest import COURSE
from plmcourse.autograde.demos import NOT_RUN_NOTE, cells_to_skip, is_demo
from plmcourse.release import nbgrader_env, solved_release
from support import once_per_run, scratch_course

pytestmark = pytest.mark.nbgrader

ASSIGNMENT = "03_attention"
POINTS = {"test_softmax": 2, "test_scaled_dot_product_attention": 3, "test_causal_mask": 1,
          "test_multi_head_attention": 4}


def nbgrader(course, *args):
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=nbgrader_env(),
                          capture_output=True, text=True)
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def solved():
    """What a student who solved everything hands in."""
    return solved_release(COURSE, ASSIGNMENT)


def unsolved():
    return nbformat.read(COURSE / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)


def without_scaling():
    """Softmax, causal mask and MHA right; attention forgets to divide by sqrt(d_k)."""
    nb = solved()
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "scaled_dot_product_attention":
            assert " / np.sqrt(d_k)" in cell.source
            cell.source = cell.source.replace(" / np.sqrt(d_k)", "")
    return nb


def softmax_test_deleted():
    """Everything solved, but the softmax test cell deleted: it must come back and be graded."""
    nb = solved()
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_softmax"]
    return nb


def helper_in_demo_cell():
    """Everything solved, but softmax calls a helper the student wrote into a demo cell.

    Grading leaves demo cells out only when nothing that runs needs them, so this one
    must run and the softmax must still score.
    """
    nb = solved()
    answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
    demo = next(c for c in nb.cells if is_demo(c))
    demo.source += "\n\n" + answer.source.replace("def softmax(", "def my_softmax(")
    answer.source = "def softmax(x, axis=-1):\n    return my_softmax(x, axis)"
    return nb


SUBMISSIONS = {  # student -> (notebook, expected points per test cell)
    "solved": (solved, POINTS),
    "unsolved": (unsolved, dict.fromkeys(POINTS, 0)),
    "noscale": (without_scaling, {**POINTS, "test_scaled_dot_product_attention": 0}),
    "deleter": (softmax_test_deleted, POINTS),
    "helper": (helper_in_demo_cell, POINTS),
}


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    """The class graded once per run, by whichever pytest-xdist worker asks first; the tests only read it."""
    def build(root):
        course = scratch_course(tmp_path_factory, root, ASSIGNMENT)
        for student, (make, _) in SUBMISSIONS.items():
            nbgrader(course, "db", "student", "add", student, f"--first-name={student.title()}", "--last-name=Test")
            folder = course / "submitted" / student / ASSIGNMENT
            folder.mkdir(parents=True)
            nbformat.write(make(), folder / f"{ASSIGNMENT}.ipynb")
        nbgrader(course, "autograde", ASSIGNMENT)
        nbgrader(course, "generate_feedback", ASSIGNMENT)
        nbgrader(course, "export", "--to", "grades.csv")
        return {}

    return once_per_run(tmp_path_factory, "nbgrader-pipeline", build)[0] / "course"


@pytest.mark.parametrize("student", SUBMISSIONS)
def test_gradebook_scores_each_test_cell(graded_course, student):
    from nbgrader.api import Gradebook

    expected = SUBMISSIONS[student][1]
    with Gradebook(f"sqlite:///{graded_course / 'gradebook.db'}") as gradebook:
        got = {grade_id: gradebook.find_grade(grade_id, ASSIGNMENT, ASSIGNMENT, student).score
               for grade_id in POINTS}
        submission = gradebook.find_submission(ASSIGNMENT, student)
        assert not submission.needs_manual_grade
    assert got == expected


def test_exported_csv_has_every_student_total(graded_course):
    with open(graded_course / "grades.csv") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    for student, (_, expected) in SUBMISSIONS.items():
        assert float(rows[student]["score"]) == sum(expected.values())
        assert float(rows[student]["max_score"]) == sum(POINTS.values())


def test_feedback_names_the_mistake(graded_course):
    html = (graded_course / "feedback" / "noscale" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "check_scaled_dot_product_attention failed" in html
    assert "sqrt(d_k)" in html


@pytest.mark.parametrize("student", ["solved", "helper"])
def test_only_demo_cells_nothing_needs_were_left_out(graded_course, student):
    nb = nbformat.read(graded_course / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    noted = {i for i, c in enumerate(nb.cells) if c.cell_type == "code"
             and any(o.get("text") == NOT_RUN_NOTE for o in c.get("outputs", []))}
    demos = {i for i, c in enumerate(nb.cells) if is_demo(c)}
    assert noted == cells_to_skip(nb.cells)
    if student == "solved":
        assert noted == demos
    else:  # the demo cell holding the helper ran
        assert len(noted) == len(demos) - 1


def test_grading_again_two_at_once_gives_the_same_scores(graded_course, tmp_path):
    """plmcourse's autograde deals the students out to two nbgrader processes sharing the gradebook (in a copy of
    the graded class: the other tests read the original)."""
    from nbgrader.api import Gradebook

    from plmcourse.autograde import workflow

    course = shutil.copytree(graded_course, tmp_path / "course")
    assert workflow.submitted_students(course, ASSIGNMENT) == sorted(SUBMISSIONS)
    done = workflow.autograde(course, ASSIGNMENT, use_sandbox=False, jobs=2)
    assert done.returncode == 0, done.stderr
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student, (_, expected) in SUBMISSIONS.items():
            got = {grade_id: gradebook.find_grade(grade_id, ASSIGNMENT, ASSIGNMENT, student).score
                   for grade_id in POINTS}
            assert got == expected, student


def test_students_are_dealt_out_without_overlap():
    from plmcourse.autograde.workflow import _only

    students = ["ann", "bob", "cy", "dee", "eve"]
    groups = [students[i::2] for i in range(2)]
    assert [_only(students, g) for g in groups] == [
        ["--CourseDirectory.student_id_exclude=bob,dee"], ["--CourseDirectory.student_id_exclude=ann,cy,eve"]]
    assert _only(students, ["cy"]) == ["--student=cy"]
    assert _only(["ann"], ["ann"]) == ["--student=ann"]


def test_a_submission_nbgrader_could_not_grade_is_reported_with_its_cause():
    """nbgrader's last line is "Please see the above traceback"; the report line names the exception above it."""
    from plmcourse.autograde.workflow import _last_line

    log = ("[AutogradeApp | INFO] Autograding honest\nTraceback (most recent call last):\n  File \"x.py\", line 3\n"
           "nbclient.exceptions.DeadKernelError: Kernel died\n"
           "[AutogradeApp | ERROR] Please see the the above traceback for details on the specific errors.\n")
    assert _last_line(log).startswith("nbclient.exceptions.DeadKernelError: Kernel died (")
    assert _last_line("RuntimeError: Kernel didn't respond in 60 seconds") == "RuntimeError: Kernel didn't respond in 60 seconds"
    assert _last_line("one plain line\n") == "one plain line" and _last_line("") == "no message"
