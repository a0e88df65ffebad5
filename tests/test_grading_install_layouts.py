"""Honest work gets full marks whatever the install layout: the package on PYTHONPATH, in a
`pip install --target` folder, or installed editable (this repository's own layout).

Two places matter. A student's own kernel runs the checks in-process (feedback): they must
give a verdict however the packages got there (Colab and many JupyterHubs put them on
PYTHONPATH or in a --target folder). And `plmcourse grade autograde` must grade with the
plmcourse the grader itself imports, inside the sandbox, and give the solved notebook full
marks. (A user-site install cannot be tried here: a virtual environment turns the user site off.)
"""

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import plmcourse
from conftest import COURSE
from plmcourse.autograde import sandbox
from plmcourse.release import nbgrader_env, solved_release

ASSIGNMENT = "00_welcome"
REPO = Path(plmcourse.__file__).resolve().parent.parent


pytestmark = pytest.mark.integration  # installs the package three ways


@pytest.fixture(scope="module", params=["pythonpath", "target", "editable"])
def layout(request, tmp_path_factory):
    """(name, PYTHONPATH folder or None): where `import plmcourse` finds the package."""
    if request.param == "editable":
        return request.param, None
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "pythonpath":
        shutil.copytree(REPO / "plmcourse", folder / "plmcourse",
                        ignore=shutil.ignore_patterns("__pycache__"))
    else:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                        "--target", str(folder), str(REPO)], check=True, capture_output=True)
    return request.param, folder


def environment(folder):
    env = dict(nbgrader_env())
    env.pop("PYTHONPATH", None)
    if folder is not None:
        env["PYTHONPATH"] = str(folder)
    return env


def test_a_check_in_the_students_kernel_gives_a_verdict(layout):
    name, folder = layout
    code = ("import plmcourse, numpy as np\n"
            "from plmcourse.grading import check_normalize\n"
            "check_normalize(lambda v: v / np.linalg.norm(v) if np.linalg.norm(v) > 0 else np.zeros_like(v, dtype=float),"
            " hidden=True)\n"
            "print('from', plmcourse.__file__)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment(folder),
                          cwd="/")
    assert done.returncode == 0, done.stderr
    assert "check_normalize: " in done.stdout and "cases passed" in done.stdout
    expected_root = str(folder) if folder is not None else str(REPO)
    assert f"from {expected_root}" in done.stdout


@pytest.mark.nbgrader
@pytest.mark.skipif(sandbox.available() is not None, reason=str(sandbox.available()))
def test_the_solved_notebook_gets_full_marks_when_graded(layout, tmp_path):
    name, folder = layout
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(COURSE / "nbgrader_config.py", course)
    shutil.copytree(COURSE / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    env = environment(folder)
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"],
                   cwd=course, env=env, check=True, capture_output=True)
    export = tmp_path / "export"
    export.mkdir()
    nb = solved_release(COURSE, ASSIGNMENT)
    nb.cells.append(nbformat.v4.new_code_cell("import plmcourse; print('graded with', plmcourse.__file__)"))
    nbformat.write(nb, export / f"honest_{ASSIGNMENT}.ipynb")
    done = subprocess.run([sys.executable, "-m", "plmcourse", "grade", "all", ASSIGNMENT, str(export),
                           "--course", str(course)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(ASSIGNMENT, "honest")
        assert submission.score == submission.max_score > 0, done.stdout
    graded = nbformat.read(course / "autograded" / "honest" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in graded.cells if c.cell_type == "code" for o in c.get("outputs", []))
    expected_root = str(folder) if folder is not None else str(REPO)
    assert f"graded with {expected_root}" in printed
