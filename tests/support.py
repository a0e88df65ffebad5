"""What the grading tests share: scratch courses, `plmcourse grade` as an instructor runs it, the gradebook,
and one graded class of 03_attention that the catalogue, attack and hostile-kernel tests all read.

A scratch course is a copy of course/'s configuration and the named assignments' sources, with
`nbgrader generate_assignment` run once per assignment and test session (`prepared_course`); each test
gets its own copy of the prepared folder, which it may change as it likes (`scratch_course`).

The graded class (`graded_class`): every submission of tests/test_grading_catalogue.py,
tests/test_grading_attacks.py and bench/attacks.py (tests/test_grading_hostile_kernel.py) in one export,
graded by one `plmcourse grade all` once per test run, whichever pytest-xdist worker asks first (the
others wait on a file lock and read the result). Each test reads its own students' rows.
"""

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
COURSE = ROOT / "course"
CELL_SECONDS = 10  # nbgrader's limit per cell in the graded tests: the answers are small, the attacks stall


def nbgrader_env(**extra) -> dict:
    """The environment nbgrader and `plmcourse grade` run in (this Python's scripts first on PATH), plus `extra`."""
    from plmcourse.release import nbgrader_env as environment

    return {**environment(), **extra}


@contextmanager
def locked(path: Path):
    """An exclusive lock on `path` (a file beside what it guards), held by one process of the run at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_folder(tmp_path_factory) -> Path:
    """A folder every pytest-xdist worker of this run sees (the base of their temp folders), or this one's."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def prepared_course(tmp_path_factory, *assignments: str) -> Path:
    """A course with `assignments` released (generate_assignment), made once per run and never changed."""
    folder = shared_folder(tmp_path_factory) / ("prepared-" + "-".join(assignments))
    with locked(folder.with_suffix(".lock")):
        if not (folder / "course" / ".prepared").exists():
            shutil.rmtree(folder, ignore_errors=True)
            course = folder / "course"
            course.mkdir(parents=True)
            shutil.copy(COURSE / "nbgrader_config.py", course)
            for assignment in assignments:
                shutil.copytree(COURSE / "source" / assignment, course / "source" / assignment)
                subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force"],
                               cwd=course, check=True, capture_output=True, env=nbgrader_env())
            (course / ".prepared").write_text("")
    return folder / "course"


def scratch_course(tmp_path_factory, where: Path, *assignments: str) -> Path:
    """A course of one's own at where/course: a copy of the prepared one (gradebook and release included)."""
    course = Path(where) / "course"
    shutil.copytree(prepared_course(tmp_path_factory, *assignments), course, ignore=shutil.ignore_patterns(".prepared"))
    return course


def run_grade(course: Path, *args, **env) -> subprocess.CompletedProcess:
    """`plmcourse grade ARGS --course COURSE` as an instructor runs it; `env` adds variables."""
    return subprocess.run([sys.executable, "-m", "plmcourse", "grade", *args, "--course", str(course)],
                          capture_output=True, text=True, errors="replace",
                          env=nbgrader_env(PLMCOURSE_CELL_SECONDS=str(CELL_SECONDS), **env))


def plmcourse_grade(course: Path, *args, **env) -> str:
    """run_grade, which must succeed; its output."""
    done = run_grade(course, *args, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def gradebook_scores(course: Path, assignment: str) -> dict:
    """student -> (total score, max score, {grade_id: score}) of their `assignment`, from the gradebook."""
    from nbgrader.api import Gradebook

    result = {}
    with Gradebook(f"sqlite:///{Path(course) / 'gradebook.db'}") as gradebook:
        for student in gradebook.students:
            try:
                submission = gradebook.find_submission(assignment, student.id)
            except Exception:  # not graded
                continue
            grades = {g.name: g.score for nb in submission.notebooks for g in nb.grades}
            result[student.id] = (submission.score, submission.max_score, grades)
    return result


def write_submissions(folder: Path, assignment: str, notebooks: dict) -> None:
    """An LMS-like export: <student>_<assignment>.ipynb for each {student: notebook}."""
    folder.mkdir(parents=True, exist_ok=True)
    for student, nb in notebooks.items():
        nbformat.write(nb, folder / f"{student}_{assignment}.ipynb")


# ----------------------------------------------------------------------------
# One graded class for the tests that only read what grading gave


class GradedClass:
    """What one `plmcourse grade all` of the whole class left: read, never changed, by the tests."""

    def __init__(self, root: Path, saved: dict):
        self.root = root
        self.course = root / "course"
        self.export = self.course / "downloads" / "03_attention-submissions"
        self.tmp = root / "tmp"
        self.report = saved["report"]
        self.returncode = saved["returncode"]
        self.seconds = saved["seconds"]
        self.students = saved["students"]


# The modules whose submissions make up the class: each has into_class(export) -> the students it wrote.
CLASS_MODULES = ("test_grading_catalogue", "test_grading_attacks", "test_grading_hostile_kernel")


def graded_class(tmp_path_factory) -> GradedClass:
    """The shared graded class, built once per run by whichever worker asks first (see the module's doc)."""
    import importlib

    root = shared_folder(tmp_path_factory) / "graded-class"
    with locked(root.with_suffix(".lock")):
        saved = root / "run.json"
        if not saved.exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            course = scratch_course(tmp_path_factory, root, "03_attention", "00_welcome")
            # The export inside the course, where an instructor may well unpack it: the planted links of
            # tests/test_grading_attacks.py reach the course's files from there.
            export = course / "downloads" / "03_attention-submissions"
            export.mkdir(parents=True)
            students = [name for module in CLASS_MODULES
                        for name in importlib.import_module(module).into_class(export)]
            tmp = root / "tmp"  # the grader's scratch folders, ours to look at afterwards
            tmp.mkdir()
            start = time.perf_counter()
            graded = run_grade(course, "all", "03_attention", str(export), TMPDIR=str(tmp),
                               GRADER_SECRET_TOKEN=GRADER_SECRET)
            done = {"report": graded.stdout + graded.stderr, "returncode": graded.returncode,
                    "seconds": time.perf_counter() - start, "students": students}
            saved.write_text(json.dumps(done))
    return GradedClass(root, json.loads(saved.read_text()))


# An instructor's secret in the grader's environment: tests/test_grading_attacks.py looks for it everywhere.
GRADER_SECRET = "GRADER-SECRET-c0ffee-5e1f-4ab3-9d7e-0c4b1d5a7e21"

# ----------------------------------------------------------------------------
# A check judged through the wire, the kernel and the judge in two threads of this process


def judged(check_name, fn, hidden=True):
    """(passed, sentence, flags, what the kernel showed) for `fn` checked through the wire, the kernel's
    side (serve) and the judge's (the check's Spec with a Remote) on the two ends of a socketpair, as
    `plmcourse grade autograde` puts them in two processes."""
    import socket
    import threading

    import plmcourse.judging as judging
    from plmcourse.grading import wire
    from plmcourse.grading.core import serve
    from plmcourse.judging.core import CheckFailed, Remote

    kernel_end, judge_end = socket.socketpair()
    shown = {}

    def kernel():
        try:
            serve(kernel_end, check_name, fn, hidden)
            shown["kernel"] = "passed"
        except CheckFailed as failure:
            shown["kernel"] = str(failure)

    thread = threading.Thread(target=kernel)
    thread.start()
    announced = wire.receive(judge_end)
    assert announced == {"check": check_name, "hidden": hidden}
    remote = Remote(judge_end)
    try:
        judging.spec(check_name)(remote, hidden=announced["hidden"])
        passed, sentence = True, remote.passed
    except CheckFailed as failure:
        passed, sentence = False, str(failure)
    wire.send(judge_end, {"verdict": {"passed": passed, "message": sentence}})
    thread.join(timeout=60)
    return passed, sentence, remote.flags, shown["kernel"]
