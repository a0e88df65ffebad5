"""Grading throughput: notebook 03 submissions autograded per minute, through real nbgrader.

Variants, on the same scratch course and the same N solved submissions:
- plain `nbgrader autograde`, every cell run (PLMCOURSE_RUN_DEMOS=1): nbgrader's default;
- plain `nbgrader autograde` with the course configuration, which leaves out the demo
  cells nothing graded depends on (plmcourse.autograde.demos);
- `plmcourse grade autograde`, as an instructor runs it: two nbgrader processes at once,
  each kernel in the bubblewrap sandbox, every check decided by the judge outside the
  kernel; run twice, and the two gradebooks must agree.
After each variant the gradebook must give every submission full marks; a variant that
does not is reported as failed instead of timed. The last rows say where one sandboxed
notebook's time goes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from bench.common import write_result
from plmcourse.autograde import sandbox
from plmcourse.release import solved_release

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "03_attention"
STUDENTS = 12


def env():
    return {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}


def scratch_course(where: Path) -> Path:
    course = where / "course"
    course.mkdir()
    shutil.copy(ROOT / "course/nbgrader_config.py", course)
    shutil.copytree(ROOT / "course/source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"],
                   cwd=course, env=env(), check=True, capture_output=True)
    nb = solved_release(ROOT / "course", ASSIGNMENT)
    for i in range(STUDENTS):
        folder = course / "submitted" / f"student{i}" / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{ASSIGNMENT}.ipynb")
    return course


def timed(cmd, cwd, extra_env=None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env={**env(), **(extra_env or {})}, check=True, capture_output=True)
    return time.perf_counter() - start


def grades(course: Path) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {(i, g.name): g.score for i in range(STUDENTS)
                for nb in gradebook.find_submission(ASSIGNMENT, f"student{i}").notebooks for g in nb.grades}


def full_marks(course: Path) -> bool:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        scores = [gradebook.find_submission(ASSIGNMENT, f"student{i}") for i in range(STUDENTS)]
        return all(s.score == s.max_score > 0 for s in scores)


def kernel_start(course: Path) -> float:
    """Seconds for the sandboxed interpreter to start and import what notebook 03's kernel does."""
    code = "import plmcourse, numpy, torch, matplotlib.pyplot, ipykernel.kernelapp, plmcourse.grading.attention"
    folder = course / "autograded" / "student0" / ASSIGNMENT
    cmd = sandbox.bwrap_command([sys.executable, "-c", code], folder, course)
    return min(timed(cmd, course) for _ in range(3))


def main():
    rows = []
    nbgrader = [sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--force"]
    variants = {
        "plain nbgrader autograde, every cell": (nbgrader, {"PLMCOURSE_RUN_DEMOS": "1"}),
        "plain nbgrader autograde, demo cells left out": (nbgrader, {}),
    }
    with tempfile.TemporaryDirectory() as tmp:
        course = scratch_course(Path(tmp))
        graded = "plmcourse grade autograde (2 at once, sandboxed, judged)"
        if sandbox.available() is None:
            variants[graded] = ([sys.executable, "-m", "plmcourse", "grade", "autograde", ASSIGNMENT,
                                 "--jobs", "2", "--course", str(course)], {})
            variants[graded + ", again"] = variants[graded]
        first = None
        for name, (cmd, extra_env) in variants.items():
            seconds = timed(cmd, course, extra_env)
            row = {"variant": name, "submissions": STUDENTS, "seconds": round(seconds, 1),
                   "per submission (s)": round(seconds / STUDENTS, 2),
                   "submissions per minute": round(STUDENTS / seconds * 60, 1)}
            if not full_marks(course):
                row = {"variant": name, "submissions": STUDENTS, "result": "FAILED: not every submission got full marks"}
            if name == graded:
                first = grades(course)
            elif name == graded + ", again" and grades(course) != first:
                row = {"variant": name, "submissions": STUDENTS, "result": "FAILED: the grades differ from the first run"}
            rows.append(row)
        if sandbox.available() is None:
            rows.append({"variant": "where the time goes: one sandboxed kernel starting and importing "
                                    "plmcourse, numpy, torch, matplotlib, ipykernel and the checks",
                         "seconds": round(kernel_start(course), 2)})
    return write_result("grading", {"title": f"Grading throughput, notebook {ASSIGNMENT}", "rows": rows})


if __name__ == "__main__":
    print(main())
