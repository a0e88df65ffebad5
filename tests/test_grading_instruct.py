"""plmcourse.judging.instruct (notebook 15): right answers pass, every catalogued mistake fails with its hint,
bad answers get one sentence, and the verdicts are the same through the wire as here."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import numpy as np
import pytest

import plmcourse.judging as judging
from mistake_catalogue import assert_one_sentence, catalogue_tests, failure, find_mistake
from mistake_catalogue.instruct_mistakes import CATALOGUE, bt_logaddexp, dpo_notebook, sft_notebook
from plmcourse.judging import instruct as checks
from support import judged

NAMES = ["check_sft_loss", "check_bradley_terry_loss", "check_dpo_loss"]

# Wrong answers overflow and divide by zero on purpose.
pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning")]


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


def test_the_visible_cases_are_a_prefix_of_the_hidden_ones():
    for check in (checks.check_sft_loss, checks.check_bradley_terry_loss, checks.check_dpo_loss):
        visible, hidden = check.cases(False), check.cases(True)
        assert len(hidden) > len(visible) + 4
        assert [c.label for c in hidden[:len(visible)]] == [c.label for c in visible]
        salted = check.cases(7000)
        assert [c.label for c in salted[len(visible):]] != [c.label for c in hidden[len(visible):]]


def test_every_mistake_message_names_its_case():
    for name, (_, mistakes) in CATALOGUE.items():
        for entry, fn, _ in mistakes:
            message = str(failure(getattr(judging, name), fn))
            assert_one_sentence(message, name)
            assert "(seed " in message, (entry, message)


@pytest.mark.parametrize("bad, said", [
    (lambda *a: float("nan"), "the result is nan"),
    (lambda *a: "0.5", "expected a number"),
    (lambda *a: np.zeros(3), "expected a single number"),
    (lambda *a: None, "returned None"),
    (lambda *a: 1 / 0, "ZeroDivisionError"),
])
def test_bad_answers_get_one_sentence(bad, said):
    for name in NAMES:
        message = str(failure(getattr(judging, name), bad))
        assert said in message, message
        assert_one_sentence(message, name)


def test_in_place_edits_are_named():
    def sft_in_place(logits, tokens, answer_mask):
        logits -= logits.max(-1, keepdims=True)
        return sft_notebook(logits, tokens, answer_mask)

    assert "changed its input logits in place" in str(failure(judging.check_sft_loss, sft_in_place))


def test_a_mean_of_row_means_is_caught_only_where_answers_differ_in_length():
    """The visible case with ragged answers is what tells the two means apart."""
    ragged = [c for c in checks._sft_cases(False) if "ragged" in c.tags]
    fn = find_mistake(CATALOGUE, "check_sft_loss", "mean of row means")
    assert any(abs(fn(*c.args) - sft_notebook(*c.args)) > 1e-3 for c in ragged)


def test_the_judge_gives_the_same_verdicts_through_the_wire():
    for name, right, wrong in (("check_sft_loss", sft_notebook, "mean of row means"),
                               ("check_bradley_terry_loss", bt_logaddexp, "two logistic terms"),
                               ("check_dpo_loss", dpo_notebook, "reference swapped")):
        passed, _, _, shown = judged(name, right)
        assert passed and shown == "passed"
        mistake = find_mistake(CATALOGUE, name, wrong)
        here = str(failure(getattr(judging, name), mistake, hidden=True))
        passed, sentence, _, _ = judged(name, mistake)
        assert not passed and sentence == here


def test_special_values_are_the_ones_the_notebook_states():
    empty = next(c for c in checks._sft_cases(False) if "no answer token" in c.tags)
    assert sft_notebook(*empty.args) == 0.0
    equal = next(c for c in checks._bt_cases(False) if "equal" in c.tags)
    assert math.isclose(bt_logaddexp(*equal.args), math.log(2.0))
    equal = next(c for c in checks._dpo_cases(False) if "equal" in c.tags)
    assert math.isclose(dpo_notebook(*equal.args, **equal.kwargs), math.log(2.0))
