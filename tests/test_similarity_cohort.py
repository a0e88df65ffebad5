"""bench/cohort.py, the cohort of independently written answers bench/similarity.py's review_cohort measures
review's similarity on: three answers to every exercise the course grades, each of which passes its check."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import pytest

import plmcourse.judging as judging
from bench.cohort import COHORT, load
from plmcourse.autograde import sandbox
from plmcourse.grading import CHECKS

# Some answers divide by zero where np.where then throws the result away.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def test_the_cohort_has_three_answers_to_every_graded_exercise():
    assert set(COHORT) == sandbox.graded_functions() == {name.removeprefix("check_") for name in CHECKS}
    assert {exercise: len(answers) for exercise, answers in COHORT.items() if len(answers) != 3} == {}
    assert all(len(set(answers)) == 3 for answers in COHORT.values())


@pytest.mark.parametrize("exercise, style", [(e, i) for e, answers in COHORT.items() for i in range(len(answers))],
                         ids=[f"{e}-{i}" for e, answers in COHORT.items() for i in range(len(answers))])
def test_every_cohort_answer_passes_its_check(exercise, style, capsys):
    check = f"check_{exercise}"
    getattr(judging, check)(load(exercise, style))
    printed = capsys.readouterr().out
    assert printed.startswith(f"{check}: ") and printed.endswith(" cases passed.\n")
