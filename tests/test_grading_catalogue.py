"""Grades that survive bad and hostile submissions: a catalogue run through the real pipeline.

Every submission below is a notebook a student could hand in for 03_attention. They go
through `plmcourse grade` exactly as an instructor runs it: collect (from a folder shaped
like a learning platform's export), autograde (nbgrader, each kernel in the bubblewrap
sandbox, every check decided by the judge outside the kernel), feedback and export. Then the
real gradebook and the real CSV are read and each submission's score is compared with the
score it deserves.

Points: softmax 2, scaled dot-product attention 3, causal mask 1, multi-head attention 4.
The notebook's attention answer calls the student's own softmax, as the exercise allows,
so a softmax that fails takes attention's 3 points with it (BROKEN_SOFTMAX below).
"""

import csv
import shutil
import sqlite3

import nbformat
import pytest

from conftest import COURSE
from plmcourse.autograde import review
from support import (
    ASSIGNMENT, BROKEN_SOFTMAX, CLASS_MARKS, FULL, POINTS, answers, graded_class, plmcourse_grade, scores, solved,
    strip_all, unexpected_stderr, with_cell,
)

pytestmark = CLASS_MARKS


def demo_fills_cache(nb):
    """A plain cell makes a dict, a demo cell fills it, the softmax answer reads it."""
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
    demo = nbformat.v4.new_code_cell("cache['stable_exp'] = np.exp")
    demo.metadata["tags"] = ["demo"]
    nb.cells[index:index] = [nbformat.v4.new_code_cell("cache = {}"), demo]
    return nb


def after_test(nb, grade_id, source):
    """Insert an ordinary code cell right after the test cell `grade_id`."""
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source))
    return nb


def edit_test_cell(nb, grade_id, change):
    for cell in list(nb.cells):
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            change(nb, cell)
    return nb


WRONG_SOFTMAX = "def softmax(x, axis=-1):\n    return np.exp(x) / np.exp(x).sum()\n"
DETACHED_MHA = answers()["multi_head_attention"].replace("return merged @ w_o, weights",
                                                         "return (merged @ w_o).detach(), weights")

CATALOGUE = {
    # name: (notebook, expected total, what the grading report or feedback must say)
    "correct": (lambda: solved(), FULL, None),
    "partial-visible-only": (lambda: solved(causal_mask=(
        "def causal_mask(n):\n"
        "    if n > 8:  # only the sizes the visible test uses\n"
        "        return np.ones((n, n), dtype=bool)\n"
        "    return np.tril(np.ones((n, n), dtype=bool))\n")), FULL - 1, "check_causal_mask failed"),
    "raises": (lambda: solved(softmax="def softmax(x, axis=-1):\n    raise ValueError('not today')\n"),
               BROKEN_SOFTMAX, "your function raised ValueError: not today"),
    "wrong-dtype-and-nan": (lambda: solved(
        causal_mask="def causal_mask(n):\n    return np.tril(np.ones((n, n), dtype=int))\n",
        scaled_dot_product_attention=answers()["scaled_dot_product_attention"].replace(
            "-np.inf)", "np.nan)")), FULL - 4, "expected bool"),
    "gradient-cut": (lambda: solved(multi_head_attention=DETACHED_MHA), FULL - 4, "gradient"),
    "infinite-loop": (lambda: solved(multi_head_attention=(
        "def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):\n"
        "    while True:\n        pass\n")), FULL - 4, None),
    "huge-memory": (lambda: solved(softmax=(
        "def softmax(x, axis=-1):\n    big = np.ones((60_000, 60_000))  # 28 GB\n    return big\n")),
        BROKEN_SOFTMAX, "MemoryError"),
    "test-cell-edited-to-pass": (lambda: edit_test_cell(solved(softmax=WRONG_SOFTMAX), "test_softmax",
                                                        lambda nb, c: setattr(c, "source", "pass")),
                                 BROKEN_SOFTMAX, "check_softmax failed"),
    "test-cell-deleted": (lambda: edit_test_cell(solved(softmax=WRONG_SOFTMAX), "test_softmax",
                                                 lambda nb, c: nb.cells.remove(c)), BROKEN_SOFTMAX,
                          "check_softmax failed"),
    "test-metadata-stripped": (lambda: edit_test_cell(solved(softmax=WRONG_SOFTMAX), "test_softmax",
                                                      lambda nb, c: c.metadata.pop("nbgrader")),
                               BROKEN_SOFTMAX, "check_softmax failed"),
    "comparisons-patched": (lambda: with_cell(solved(softmax=WRONG_SOFTMAX),
        "import builtins, math, torch\n"
        "np.allclose = lambda *a, **k: True\nnp.isclose = lambda *a, **k: np.True_\n"
        "np.testing.assert_allclose = lambda *a, **k: None\ntorch.allclose = lambda *a, **k: True\n"
        "math.isclose = lambda *a, **k: True\nbuiltins.all = lambda *a, **k: True\n"), BROKEN_SOFTMAX,
        "check_softmax failed"),  # the judge's comparisons are in another process
    "checks-patched": (lambda: with_cell(solved(softmax=WRONG_SOFTMAX), (
        "import plmcourse.grading, plmcourse.grading.attention as attention_checks\n"
        "plmcourse.grading.check_softmax = lambda *a, **k: print('check_softmax: 9 cases passed.')\n"
        "attention_checks.check_softmax.__code__ = (lambda fn, hidden=False: None).__code__\n"
        "get_ipython().set_custom_exc((Exception,), lambda *a, **k: print('all good'))\n")),
        BROKEN_SOFTMAX, "never reached the grader"),
    # In the sandbox the course's softmax is absent: the attention answer built on it fails too.
    "delegates-to-reference": (lambda: solved(softmax=(
        "from plmcourse.ref import softmax as course_softmax\n\n"
        "def softmax(x, axis=-1):\n    return course_softmax(x, axis=axis)\n")), BROKEN_SOFTMAX,
        "plmcourse.ref.attention.softmax is not available while grading"),
    "reads-source-writes-gradebook": (lambda: with_cell(solved(softmax=""), (
        "import json, sqlite3\n"
        "try:\n"
        "    stolen = json.load(open('../../../source/03_attention/03_attention.ipynb'))\n"
        "    exec(next(c['source'] for c in stolen['cells'] if 'def softmax' in ''.join(c['source'])))\n"
        "except OSError as err:\n    print('no source:', err)\n"
        "try:\n"
        "    db = sqlite3.connect('../../../gradebook.db')\n"
        "    db.execute('update grade set manual_score = 100')\n    db.commit()\n"
        "except Exception as err:\n    print('no gradebook:', err)\n")), BROKEN_SOFTMAX, "flagged for review"),
    "empty-notebook": (lambda: nbformat.v4.new_notebook(), 0, None),
    "all-metadata-stripped": (lambda: strip_all(solved()), FULL, None),
    # Grading skips demo cells, except those the graded code needs: this one fills a dict.
    "answer-reads-what-a-demo-fills": (lambda: demo_fills_cache(solved(softmax=answers()["softmax"].replace(
        "np.exp(", "cache['stable_exp']("))), FULL, None),
    "kernel-dies-after-softmax": (lambda: after_test(solved(), "test_softmax", "import os\nos._exit(1)\n"),
                                  2, "never reached the grader"),
    "swallows-the-timeout": (lambda: solved(causal_mask=(
        "def causal_mask(n):\n"
        "    while True:\n"
        "        try:\n"
        "            import time; time.sleep(100)\n"
        "        except BaseException:\n"
        "            pass\n")), FULL - 1, None),
}
REPORTED_NOT_GRADED = {
    # name: (file contents, sentence the collect report must contain)
    "invalid-json": ('{"cells": [', "not valid notebook JSON"),
    "other-assignment": (None, "different assignment"),
}


def into_class(folder):
    """Its part of the shared graded class (tests/support.py): <student>_<anything>.ipynb, one per student,
    as a learning platform exports them, and two files collect must skip."""
    for student, (make, _, _) in CATALOGUE.items():
        nbformat.write(make(), folder / f"{student}_{ASSIGNMENT}.ipynb")
    (folder / f"invalid-json_{ASSIGNMENT}.ipynb").write_text(REPORTED_NOT_GRADED["invalid-json"][0])
    welcome = COURSE / "source" / "00_welcome" / "00_welcome.ipynb"
    shutil.copy(welcome, folder / f"other-assignment_{ASSIGNMENT}.ipynb")
    return list(CATALOGUE)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    run = graded_class(tmp_path_factory)
    print(f"\nthe shared class of {len(run.students)} graded in {run.seconds:.0f} s "
          f"({len(run.students) / run.seconds * 60:.1f} submissions per minute, sandbox + judge)")
    return run.course, run.report, scores(run.course)


@pytest.mark.parametrize("student", CATALOGUE)
def test_each_submission_gets_the_score_it_deserves(graded, student):
    _, _, got = graded
    assert student in got, f"{student} was not graded"
    assert sum(got[student].values()) == CATALOGUE[student][1], got[student]


@pytest.mark.parametrize("student", [s for s, (_, _, said) in CATALOGUE.items() if said])
def test_each_failure_is_explained(graded, student):
    course, report, _ = graded
    said = CATALOGUE[student][2]
    feedback = course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html"
    text = report + (feedback.read_text() if feedback.exists() else "")
    assert said in text, f"{student}: neither the grading report nor the feedback says {said!r}"


@pytest.mark.parametrize("name", REPORTED_NOT_GRADED)
def test_unreadable_or_foreign_notebooks_are_reported_and_skipped(graded, name):
    _, report, got = graded
    assert name not in got
    line = next(line for line in report.splitlines() if line.startswith(f"skipped {name}"))
    assert REPORTED_NOT_GRADED[name][1] in line


def test_exported_csv_matches_the_gradebook(graded):
    course, _, got = graded
    with open(course / "grades.csv") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f) if row["assignment"] == ASSIGNMENT}
    for student, expected in ((s, e) for s, (_, e, _) in CATALOGUE.items()):
        assert float(rows[student]["score"]) == expected
        assert float(rows[student]["max_score"]) == FULL


def test_the_solved_notebook_shows_no_error_and_no_warning_box_where_grading_ran(graded):
    """03_attention's part of tests/test_grading_every_assignment.py: "correct" is the instructor's solved
    notebook handed in as a student would (full marks: test_each_submission_gets_the_score_it_deserves)."""
    course, _, _ = graded
    executed = nbformat.read(course / "autograded" / "correct" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    errors = [f"{o.ename}: {o.evalue}" for c in executed.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors, f"{ASSIGNMENT} raised in its own cells: {errors}"
    assert not unexpected_stderr(executed, ASSIGNMENT)


def test_feedback_hides_hidden_tests_and_tracebacks(graded):
    course, _, _ = graded
    html = (course / "feedback" / "partial-visible-only" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "check_causal_mask failed" in html           # the check's sentence is there...
    assert "hidden=True" not in html                      # ...the hidden test's code is not
    assert "most recent call last" not in html and "site-packages" not in html
    assert "div.output_subarea pre { white-space: pre-wrap;" in html  # the sentence wraps: one long line


def test_sandbox_kept_source_and_gradebook_out_of_reach(graded):
    course, _, got = graded
    graded_nb = nbformat.read(course / "autograded" / "reads-source-writes-gradebook" / ASSIGNMENT /
                              f"{ASSIGNMENT}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in graded_nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "no source:" in printed and "no gradebook:" in printed
    with sqlite3.connect(course / "gradebook.db") as db:
        assert db.execute("select count(*) from grade where manual_score = 100").fetchone()[0] == 0


def test_grading_again_gives_the_same_grades(graded, tmp_path):
    shared, _, before = graded
    course = tmp_path / "course"  # a copy: the shared class is read by other tests meanwhile
    shutil.copytree(shared, course, symlinks=True)
    said = [plmcourse_grade(course, "autograde", ASSIGNMENT, "--student", student)
            for student in ("correct", "checks-patched", "partial-visible-only")]
    assert scores(course) == before, "\n".join(said)  # what the grader said, should one come out otherwise


def test_an_honest_submission_is_flagged_only_for_being_the_course_s_own_code(graded):
    """The course's own cells (e.g. the Colab cell reads sys.modules) never flag a student; "correct"
    hands in the course's solution itself, which is what its only flags say."""
    course, report, _ = graded
    lines = [line for line in report.splitlines() if line.startswith("judge: correct:")]
    assert lines and all("the course's solution" in line for line in lines), lines
    rows = [row for row in review.read_review(course, ASSIGNMENT) if row["student"] == "correct"]
    assert rows and {row["source"] for row in rows} == {"course"}
    assert all(float(row["similarity"]) >= 0.95 for row in rows)


def test_every_flag_reaches_the_gradebook_the_review_table_and_the_export(graded):
    """An instructor who runs `grade all` and never reads the terminal still sees each flag."""
    from nbgrader.api import Gradebook

    course, report, _ = graded
    student = "reads-source-writes-gradebook"  # its cell mentions source/ and the gradebook
    rows = [row for row in review.read_review(course, ASSIGNMENT) if row["student"] == student]
    assert any("gradebook" in row["evidence"] for row in rows), rows
    assert "review: student" in report and any(line.startswith(f"review: {student}") for line in report.splitlines())
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        flagged = {row["exercise"] for row in rows}
        for exercise in flagged:
            grade = gradebook.find_grade(f"test_{exercise}", ASSIGNMENT, ASSIGNMENT, student)
            comment = gradebook.find_comment(exercise, ASSIGNMENT, ASSIGNMENT, student)
            assert grade.needs_manual_grade, exercise
            assert "Flagged for review" in comment.comment
            # The review table says what the judge gave the exercise (its softmax is broken: 0).
            assert {row["points"] for row in rows if row["exercise"] == exercise} == {
                f"{grade.auto_score:g} of {grade.max_score:g}"}, exercise
        assert {row["points"] for row in rows if row["exercise"] == "softmax"} == {"0 of 2"}, rows
        honest = gradebook.find_grade("test_causal_mask", ASSIGNMENT, ASSIGNMENT, "correct")
        assert not honest.needs_manual_grade  # causal_mask is one np.tril: too short to say anything
    with open(course / "grades.csv", newline="") as f:
        exported = {row["student_id"]: row for row in csv.DictReader(f) if row["assignment"] == ASSIGNMENT}
    assert "gradebook" in exported[student]["flags"]
    assert exported["empty-notebook"]["flags"] == ""


def test_a_failed_hidden_case_shows_its_values_in_the_comment_not_in_the_kernel(graded):
    """partial-visible-only fails hidden cases only: its notebook's output (what the kernel was told)
    has no expected values; the gradebook comment, written by the grader, has the whole sentence."""
    from nbgrader.api import Gradebook

    course, _, _ = graded
    student = "partial-visible-only"
    graded_nb = nbformat.read(course / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    told = [o for c in graded_nb.cells for o in c.get("outputs", []) if "check_causal_mask failed" in str(o)]
    assert told and "hidden case" in str(told[0])
    assert not any(f"expected {value}" in str(told[0]) for value in ("True", "False", "1", "0"))
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        comment = gradebook.find_comment("causal_mask", ASSIGNMENT, ASSIGNMENT, student).comment
    assert "check_causal_mask failed on case" in comment and "expected" in comment


# ----------------------------------------------------------------------------
# The class report (`plmcourse grade report`, part of `grade all`): what it counts is what the gradebook holds


def test_the_class_report_counts_what_the_gradebook_holds(graded):
    course, _, got = graded
    with open(course / "reports" / f"{ASSIGNMENT}.csv", newline="", encoding="utf-8") as f:
        table = {row["exercise"]: row for row in csv.DictReader(f)}
    assert set(table) == set(POINTS)
    for name, points in POINTS.items():
        row, scored = table[name], [by_exercise[name] for by_exercise in got.values()]
        assert (int(row["graded"]), int(row["full marks"]), int(row["zero"])) == (
            len(scored), sum(s == points for s in scored), sum(s == 0 for s in scored)), row
        # Every score below full has the judge's sentence, counted once, unless the answer was never touched.
        counted = sum(int(part.split(" x ", 1)[0]) for part in row["most common mistakes"].split(" | ") if part)
        below = sum(s < points for s in scored) - int(row["left as handed out"])
        assert counted <= below and (counted == below or len(row["most common mistakes"].split(" | ")) == 5), row


def test_the_class_report_page_is_inert(graded):
    """Students' sentences and names are in it (the hostile kernels' among them): only the page's own tags."""
    from html.parser import HTMLParser

    tags = set()

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.add(tag)
            assert all(not name.startswith("on") for name, _ in attrs), attrs
            assert all(name != "src" or value.startswith("data:image/png;base64,") for name, value in attrs)

    page = (graded[0] / "reports" / f"{ASSIGNMENT}.html").read_text(encoding="utf-8")
    Tags().feed(page)
    assert tags <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "b", "code", "section",
                    "img", "table", "tr", "th", "td"}, tags
    assert page.count("<img ") == len(POINTS)


def test_a_mistake_is_the_same_whatever_the_case_and_numbers():
    from plmcourse.autograde.class_report import mistake_of

    one = "check_softmax failed on case 3 of 12 (x of shape (2, 3), axis=-1 (the last)): rows sum to 1.37, not 1"
    two = "check_softmax failed on case 7 of 12 (x of shape (5,)): rows sum to 0.5, not 1"
    assert mistake_of(one) == mistake_of(two) == "check_softmax: rows sum to #, not #"
    assert mistake_of("softmax never reached the grader") == "softmax never reached the grader"
    # As the gradebook's comment holds it (review.comment_safe): the plain sentence again.
    assert mistake_of(r"check_x failed on case 1 of 2 (n=3): at \[0, 1\] got &lt;NA&gt;") == "check_x: at [#, #] got <NA&gt;"
