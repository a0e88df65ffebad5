"""Every assignment, really graded: the instructor's solutions, handed in as a student would,
get full marks through `plmcourse grade all` (nbgrader, the sandbox, the judge), and the graded
notebook that comes back shows no error and no warning box in any cell grading ran.

The unit tests of each check hold the solution against the check in one process; only this
shows that the sandbox's package (which lacks the course's own versions of the assignment's
graded functions) leaves everything an honest notebook uses, in every assignment.
"""

import subprocess
import sys

import nbformat
import pytest

from bench.cross_notebook import CROSS_ROUND
from conftest import COURSE
from plmcourse.autograde import sandbox
from plmcourse.release import nbgrader_env, solved_release
from support import ASSIGNMENT as CLASS_ASSIGNMENT
from support import scratch_course, unexpected_stderr

# 03_attention's solved notebook is graded in the shared class (its student "correct"), and checked there the
# same way (test_grading_catalogue.py): one grading of it per run.
# An answer that hands its work to another notebook's graded function (CLIP's loss as 08's InfoNCE both
# ways), graded beside the solved notebook: the sandbox shows 14 only what its notebook uses, so 08's
# function is a stub there. bench/cross_notebook.py grades the whole round.
CROSS = {a.assignment: a for a in CROSS_ROUND if a.name == "x-clip-by-infonce"}
ASSIGNMENTS = sorted(p.name for p in (COURSE / "source").iterdir()
                     if sandbox.graded_functions(sorted(p.glob("*.ipynb"))) and p.name != CLASS_ASSIGNMENT)


@pytest.mark.nbgrader
@pytest.mark.skipif(sandbox.available() is not None, reason=str(sandbox.available()))
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_solved_notebook_gets_full_marks(assignment, tmp_path, tmp_path_factory):
    course = scratch_course(tmp_path_factory, tmp_path, assignment)
    export = tmp_path / "export"
    export.mkdir()
    nbformat.write(solved_release(COURSE, assignment), export / f"honest_{assignment}.ipynb")
    cross = CROSS.get(assignment)
    if cross:
        nbformat.write(solved_release(COURSE, assignment, **{cross.exercise: cross.source}),
                       export / f"cross_{assignment}.ipynb")
    done = subprocess.run([sys.executable, "-m", "plmcourse", "grade", "all", assignment, str(export),
                           "--course", str(course)], capture_output=True, text=True, env=nbgrader_env(),
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(assignment, "honest")
        assert submission.score == submission.max_score > 0, done.stdout
        if cross:
            cheat = gradebook.find_submission(assignment, "cross")  # every other exercise solved: only this one lost
            assert cheat.score == submission.score - grades_max(submission, f"test_{cross.exercise}"), done.stdout
    if cross:
        graded = nbformat.read(next((course / "autograded" / "cross" / assignment).glob("*.ipynb")), as_version=4)
        said = "".join(o.get("text", "") + o.get("evalue", "") for c in graded.cells if c.cell_type == "code"
                       for o in c.outputs)
        assert "is not available while grading: this assignment's notebook does not use it" in said, said[-2000:]
    executed = nbformat.read(next((course / "autograded" / "honest" / assignment).glob("*.ipynb")), as_version=4)
    errors = [f"{o.ename}: {o.evalue}" for c in executed.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors, f"{assignment} raised in its own cells: {errors}"
    warnings = unexpected_stderr(executed, assignment)
    assert not warnings, f"{assignment} writes to stderr (a warning box under the cell): {warnings}"


def grades_max(submission, name: str) -> float:
    """The most points the test cell `name` of `submission` gives."""
    return next(g.max_score for nb in submission.notebooks for g in nb.grades if g.name == name)
