"""plmcourse.judging.bart (notebook 06): right answers pass, every catalogued mistake fails with its
hint, and the checks hold up against delegation, monkey-patching and cached answers.

The seeds of the statistical cases are shifted in tests/test_grading_bert.py, with notebook 04's."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)


import numpy as np
import pytest
import torch

from mistake_catalogue import catalogue_tests, failure, find_mistake
from mistake_catalogue.bart_mistakes import CATALOGUE, infill_window, permutation_rank
from plmcourse import ref
from plmcourse.grading import CheckFailed, check_permutation_mask, check_text_infilling

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def mistake(check_name, name):
    return find_mistake(CATALOGUE, check_name, name)


# ----------------------------------------------------------------------------
# The catalogue


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


# ----------------------------------------------------------------------------
# Sealing


def test_the_seal_is_lifted_afterwards():
    with pytest.raises(CheckFailed):
        check_permutation_mask(lambda order: ref.permutation_mask(order))
    assert not torch.overrides._get_current_function_mode_stack()
    ref.permutation_mask([1, 0])


# ----------------------------------------------------------------------------
# Answers that try to look right


def test_answers_that_remember_the_seed_case_cannot_fake_determinism():
    """Returning a stored answer for a repeated call passes determinism, but not the other seed."""
    store = {}

    def student(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
        key = (tokens.tobytes(), mask_id, mask_ratio, poisson_lambda)
        if key not in store:
            store[key] = infill_window(tokens, np.random.default_rng(0), mask_id, mask_ratio, poisson_lambda)
        return store[key]

    assert "another seed gave exactly the same result" in str(failure(check_text_infilling, student))


# ----------------------------------------------------------------------------
# What comes back


def test_an_exception_is_named_and_chained():
    def student(order):
        raise ZeroDivisionError("boom")

    error = failure(check_permutation_mask, student)
    assert "your function raised ZeroDivisionError: boom" in str(error)
    assert isinstance(error.__cause__, ZeroDivisionError)


def test_permutation_check_accepts_the_three_styles():
    check_permutation_mask(permutation_rank, hidden=True)


# ----------------------------------------------------------------------------
# The number of draws: exact Poisson tails


def _draws(answer, n, ratio, lam, seed):
    out = answer(5 + np.arange(n), np.random.default_rng(seed), 1, ratio, lam)
    return int(np.count_nonzero(out == 1)), n - int(np.count_nonzero(out != 1))


def test_the_draw_count_alarm_is_as_rare_as_stated_and_sees_a_length_drawn_again(monkeypatch):
    """_draw_count_side at a cheaper ALARM of 0.01 (the rule uses 1e-6, with the same code): the course's
    text_infilling trips it about that often, at mask ratios up to one half; an answer that draws a new
    length when a span overlaps trips it at 1e-6 on a ratio of one half."""
    from plmcourse.judging import bart as judging_bart
    monkeypatch.setattr(judging_bart, "ALARM", 0.01)
    configs = ((4000, 0.3, 3.0), (4000, 0.5, 3.0), (4000, 0.2, 1.0))
    alarms = sum(judging_bart._draw_count_side(*_draws(ref.text_infilling, n, r, lam, seed), lam) is not None
                 for seed in range(150) for n, r, lam in configs)
    assert alarms <= 0.01 * 450 + 3 * (0.01 * 450) ** 0.5  # the stated rate, plus three standard deviations
    monkeypatch.setattr(judging_bart, "ALARM", 1e-6)
    new_length = mistake("check_text_infilling", "a new length on an overlap")
    assert judging_bart._draw_count_side(*_draws(new_length, 20000, 0.5, 3.0, 0), 3.0) == "high"
