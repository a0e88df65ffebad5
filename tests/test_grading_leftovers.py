"""Nothing of a grading run is left behind, and no submission's writing stops the class.

Two students hand in 00_welcome, solved; one of them also runs a cell that writes 600 MB
into the kernel's socket folder and plants, wherever it can write, a tree 5,000 folders deep,
links out, names with a newline and a byte that is not UTF-8, a fifo and folders without
permissions. Graded with `plmcourse grade all` as an instructor does, with bubblewrap, both get
full marks, the writes fail at the socket folder's cap, and afterwards the grader's temporary
directory is empty and the course holds only what nbgrader and the grader keep. Graded again
with --no-sandbox (where the planting lands on the host, in the student's autograded folder
and the socket folder), the clean-up removes all of it just the same.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from conftest import COURSE
from plmcourse.autograde import sandbox
from plmcourse.release import nbgrader_env, solved_release
from support import scratch_course

pytestmark = [pytest.mark.nbgrader, pytest.mark.integration]
needs_bwrap = pytest.mark.skipif(sandbox.available() is not None, reason=str(sandbox.available()))

ASSIGNMENT = "00_welcome"

PLANT = r'''
import errno, json, os, socket
from ipykernel.connect import get_connection_file

def plant(folder):
    """A deep tree, links, odd names, a fifo, a socket and locked folders in `folder`."""
    try:
        fd = os.open(folder, os.O_RDONLY)
        for _ in range(5000):
            os.mkdir("deep", dir_fd=fd)
            child = os.open("deep", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(fd)
        base = os.fsencode(folder)
        os.symlink("/etc/passwd", base + b"/planted-link")
        os.symlink("..", base + b"/planted-up")
        os.mkdir(base + b"/planted\nline\xff")
        os.mkfifo(base + b"/planted-fifo")
        os.makedirs(base + b"/planted-locked/inner")
        os.chmod(base + b"/planted-locked/inner", 0)
        os.chmod(base + b"/planted-locked", 0o500)
        try:
            socket.socket(socket.AF_UNIX).bind(os.path.join(folder, "ps"))
        except OSError:
            pass  # a path too long for a socket
        return "planted"
    except OSError as error:
        return f"{error.strerror}"

sockets = os.path.dirname(json.load(open(get_connection_file()))["ip"])
places = [os.getcwd(), sockets] + (["/tmp", "/dev/shm"] if FILL else [])
planted = {place: plant(place) for place in places}
filled, written = None, 0
if FILL:
    try:
        for i in range(3):
            with open(os.path.join(sockets, f"planted-fill{i}"), "wb") as f:
                for _ in range(200):
                    f.write(b"x" * 2 ** 20)
                    written += 2 ** 20
    except OSError as error:
        filled = error.errno
print("PLANTED", json.dumps({"filled": filled, "written": written, "places": planted}))
'''


def course_with_submissions(tmp_path_factory, tmp_path, fill: bool):
    course = scratch_course(tmp_path_factory, tmp_path, ASSIGNMENT)
    export = tmp_path / "export"
    export.mkdir()
    nbformat.write(solved_release(COURSE, ASSIGNMENT), export / f"honest_{ASSIGNMENT}.ipynb")
    planter = solved_release(COURSE, ASSIGNMENT)
    planter.cells.append(nbformat.v4.new_code_cell(f"FILL = {fill}\n" + PLANT))
    nbformat.write(planter, export / f"planter_{ASSIGNMENT}.ipynb")
    return course, export


@pytest.fixture
def scratch():
    """The grader's temporary directory, its own (short: socket paths have at most 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="plmtmp-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def grade_all(tmp_path, scratch, course, export, *options):
    """`plmcourse grade all` with a temporary directory of its own, which must be empty afterwards."""
    env = {**nbgrader_env(), "TMPDIR": str(scratch)}
    # errors="replace": the report quotes names the student made, bytes that are not UTF-8 among them.
    done = subprocess.run([sys.executable, "-m", "plmcourse", "grade", "all", ASSIGNMENT, str(export),
                           "--course", str(course), *options], capture_output=True, text=True, errors="replace",
                          env=env, cwd=tmp_path)
    return done


def scores(course):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {s: (gradebook.find_submission(ASSIGNMENT, s).score, gradebook.find_submission(ASSIGNMENT, s).max_score)
                for s in ("honest", "planter")}


def planted_report(course) -> dict:
    nb = nbformat.read(course / "autograded" / "planter" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    text = "".join(o.get("text", "") for o in nb.cells[-1].get("outputs", []))
    line = next(line for line in text.splitlines() if line.startswith("PLANTED "))
    return json.loads(line.removeprefix("PLANTED "))


def strays(course) -> list[str]:
    """Whatever in the course is neither the instructor's nor what nbgrader and the grader keep."""
    found = []
    for folder, dirs, files in os.walk(course, followlinks=False):
        for name in dirs + files:
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, course)
            if os.path.islink(path) or "planted" in name or name in ("deep", "ps"):
                found.append(relative)
            parts = relative.split(os.sep)
            if parts[0] in ("autograded", "feedback") and len(parts) == 4 and \
                    name not in (f"{ASSIGNMENT}.ipynb", f"{ASSIGNMENT}.html", "timestamp.txt"):
                found.append(relative)
    return found


@needs_bwrap
def test_a_submission_that_fills_and_plants_everywhere_leaves_nothing(tmp_path_factory, tmp_path, scratch):
    course, export = course_with_submissions(tmp_path_factory, tmp_path, fill=True)
    done = grade_all(tmp_path, scratch, course, export)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "autograde: sandbox: searched the package for complete implementations of normalize" in done.stdout

    graded = scores(course)
    assert graded["honest"][0] == graded["honest"][1] > 0 and graded["planter"] == graded["honest"], graded
    report = planted_report(course)
    assert report["filled"] == 28 and report["written"] <= sandbox.SOCKET_TMPFS_SIZE, report  # ENOSPC at the cap
    assert set(report["places"].values()) == {"planted"}, report  # it did plant, in the sandbox's tmpfs
    assert list(scratch.iterdir()) == []  # no plmcourse-grading-*, no search folder, no socket links
    assert strays(course) == []


def test_without_the_sandbox_the_clean_up_removes_what_was_planted_on_the_host(tmp_path_factory, tmp_path,
                                                                              scratch):
    course, export = course_with_submissions(tmp_path_factory, tmp_path, fill=False)
    done = grade_all(tmp_path, scratch, course, export, "--no-sandbox")
    assert done.returncode == 0, done.stdout + done.stderr

    graded = scores(course)
    assert graded["honest"][0] == graded["honest"][1] > 0 and graded["planter"] == graded["honest"], graded
    report = planted_report(course)
    assert set(report["places"].values()) == {"planted"}, report  # on the host: the autograded folder, the sockets'
    assert "planter: removed from autograded/planter/00_welcome what is not a notebook" in done.stdout
    assert list(scratch.iterdir()) == []
    assert strays(course) == []
