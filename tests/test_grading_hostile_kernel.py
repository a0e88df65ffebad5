"""The held-out round of issue 32: a hostile kernel, graded through the real pipeline.

A third catalogue beside test_grading_catalogue.py and test_grading_attacks.py, in the same
graded class (tests/support.py): every submission is a 03_attention notebook, all three sets go
through one `plmcourse grade all` (collect, autograde in the bubblewrap sandbox with the judge,
feedback, export), and one test per submission reads the real gradebook, export, review table,
feedback pages, grading report and temp folder.

The submissions and what must hold afterwards live in bench/attacks.py, so that the same
catalogue measures any version of the code (`python bench/attacks.py`, with PYTHONPATH
naming it) and the before and after tables come from one script. Six classes of attack, at
least two mechanisms each (the judge believing the kernel's account of its calls, complete
implementations reachable in the sandbox, hidden cases as an oracle, live output, one
submission stopping the class or leaving things on the host, flags that never reach the
instructor), and honest-but-unusual answers that keep full marks and raise no flag.

A working attack shows as points the student does not deserve, unless the exercise is marked
for manual grading with the evidence: then a person decides, which is the design for what
only evidence can tell.
"""

import importlib.util
import sys

import nbformat
import pytest

from conftest import ROOT
from support import CLASS_MARKS, graded_class

pytestmark = CLASS_MARKS

_spec = importlib.util.spec_from_file_location("bench_attacks", ROOT / "bench" / "attacks.py")
attacks = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = attacks  # dataclasses look their module up there
_spec.loader.exec_module(attacks)


def into_class(folder):
    """Its part of the shared graded class (tests/support.py): the catalogue of bench/attacks.py."""
    for submission in attacks.CATALOGUE:
        nbformat.write(submission.make(), folder / f"{submission.name}_{attacks.ASSIGNMENT}.ipynb")
    return [s.name for s in attacks.CATALOGUE]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The shared graded class (its `grade all` had a temp folder of its own), as bench/attacks.py reads a run."""
    shared = graded_class(tmp_path_factory)
    return attacks.Run(shared.course, shared.report, shared.returncode, shared.tmp, shared.seconds,
                       [s.name for s in attacks.CATALOGUE])


def test_grade_all_runs_to_the_end_for_the_whole_class(graded):
    assert attacks.class_finished(graded, None) == [], graded.report[-2000:]


def test_nothing_of_the_grading_run_is_left_on_the_host(graded):
    assert attacks.nothing_left(graded, None) == []


@pytest.mark.parametrize("student", [s.name for s in attacks.CATALOGUE])
def test_each_submission_is_graded_as_it_deserves(graded, student):
    got, problems = attacks.verdict(graded, student)
    submission = attacks.BY_NAME[student]
    assert not problems, (f"{student} ({submission.kind}: {submission.how}) deserves {submission.deserved}, "
                          f"got {got}: " + "; ".join(problems))


def test_the_catalogue_covers_every_class_twice():
    kinds = [s.kind for s in attacks.CATALOGUE]
    for kind in ("account", "means", "oracle", "live", "stops", "flags"):
        assert kinds.count(kind) >= 2, kind
    assert sum(k != "honest" for k in kinds) >= 15
    assert kinds.count("honest") >= 5
