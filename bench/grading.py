"""Grading throughput: notebook 03 submissions autograded per minute, through real nbgrader.

Variants, on the same scratch course and the same N solved submissions:
- plain nbgrader autograde (ordinary kernel, no sandbox, no verifier);
- `plmcourse grade autograde`: nbgrader in the bubblewrap sandbox, then the verifier.
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
from plmcourse.grading import sandbox

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "03_attention"
STUDENTS = 6


def env():
    return {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}


def solved_submission():
    source = nbformat.read(ROOT / "course/source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    nb = nbformat.read(ROOT / "course/release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in answers:
            cell.source = answers[cell.metadata["nbgrader"]["grade_id"]]
    return nb


def scratch_course(where: Path) -> Path:
    course = where / "course"
    course.mkdir()
    shutil.copy(ROOT / "course/nbgrader_config.py", course)
    shutil.copytree(ROOT / "course/source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"],
                   cwd=course, env=env(), check=True, capture_output=True)
    nb = solved_submission()
    for i in range(STUDENTS):
        folder = course / "submitted" / f"student{i}" / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{ASSIGNMENT}.ipynb")
    return course


def timed(cmd, cwd) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env(), check=True, capture_output=True)
    return time.perf_counter() - start


def main():
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        course = scratch_course(Path(tmp))
        variants = {"plain nbgrader autograde": [sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--force"]}
        if sandbox.available() is None:
            variants["plmcourse grade autograde (sandbox + verifier)"] = [
                sys.executable, "-m", "plmcourse", "grade", "autograde", ASSIGNMENT, "--course", str(course)]
        for name, cmd in variants.items():
            seconds = timed(cmd, course)
            rows.append({"variant": name, "submissions": STUDENTS, "seconds": round(seconds, 1),
                         "per submission (s)": round(seconds / STUDENTS, 2),
                         "submissions per minute": round(STUDENTS / seconds * 60, 1)})
    return write_result("grading", {"title": f"Grading throughput, notebook {ASSIGNMENT}", "rows": rows})


if __name__ == "__main__":
    print(main())
