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
    text_infilling trips it about that often, at mask ratios up to one half, on one call or on a pool of six as
    the check judges them; an answer that draws a new length when a span overlaps trips it at 1e-6 on a ratio of
    one half, on one long call and on the visible pool."""
    from plmcourse.judging import bart as judging_bart
    monkeypatch.setattr(judging_bart, "ALARM", 0.01)
    configs = ((4000, 0.3, 3.0, 1), (1000, 0.5, 3.0, 6), (4000, 0.2, 1.0, 1))
    alarms = sum(judging_bart._draw_count_side([_draws(ref.text_infilling, n, r, lam, 10 * seed + i)
                                                for i in range(calls)], lam) is not None
                 for seed in range(150) for n, r, lam, calls in configs)
    assert alarms <= 0.01 * 450 + 3 * (0.01 * 450) ** 0.5  # the stated rate, plus three standard deviations
    monkeypatch.setattr(judging_bart, "ALARM", 1e-6)
    new_length = mistake("check_text_infilling", "a new length on an overlap")
    assert judging_bart._draw_count_side([_draws(new_length, 20000, 0.5, 3.0, 0)], 3.0) == "high"
    pool = [_draws(new_length, 1000, 0.5, 3.0, 5500 + i) for i in range(6)]
    assert judging_bart._draw_count_side(pool, 3.0) == "high"


@pytest.mark.parametrize("lam", [0.5, 3.0])
def test_the_draw_count_distribution_is_exact_on_hand_worked_cases(lam):
    """One token to cover: draws until the first length above 0, a geometric count. Two: the first m - 1 draws
    sum to 0 and the m-th is 2 or more, or they hold one 1 and zeros and the m-th is above 0."""
    from plmcourse.judging.bart import _draw_count_pmf
    zero = np.exp(-lam)
    one_token = _draw_count_pmf(1, lam)
    m = np.arange(1, len(one_token))
    assert one_token[0] == 0 and np.allclose(one_token[1:], zero ** (m - 1) * (1 - zero), rtol=1e-12, atol=0)
    assert np.isclose(one_token.sum(), 1.0, rtol=1e-12)
    two = _draw_count_pmf(2, lam)
    p_one = lam * zero  # P(L = 1)
    assert np.isclose(two[1], 1 - zero - p_one, rtol=1e-12)
    expected = [zero ** (k - 1) * (1 - zero - p_one) + (k - 1) * p_one * zero ** (k - 2) * (1 - zero)
                for k in range(2, len(two))]
    assert np.allclose(two[2:], expected, rtol=1e-10, atol=1e-300)
    assert np.isclose(two.sum(), 1.0, rtol=1e-12)


def test_the_draw_count_distribution_is_what_the_course_s_text_infilling_does():
    """The exact distribution of the draws for 500 tokens covered against 4,000 calls of the course's version on
    1,000 tokens: its mean and spread."""
    from plmcourse.judging.bart import _draw_count_pmf
    pmf = _draw_count_pmf(500, 3.0)
    mean = (np.arange(len(pmf)) * pmf).sum()
    sd = np.sqrt(((np.arange(len(pmf)) - mean) ** 2 * pmf).sum())
    draws = np.array([_draws(ref.text_infilling, 1000, 0.5, 3.0, 900_000 + seed)[0] for seed in range(4000)])
    assert abs(draws.mean() - mean) < 3 * sd / np.sqrt(len(draws))
    assert abs(draws.std() / sd - 1) < 3 * np.sqrt(1 / (2 * len(draws)))


def test_edge_coverage_is_exact_on_hand_worked_cases():
    """edge_coverage against sums done by hand. 2 tokens, 1 to cover: the one start is 0 or 1 alike. 3 tokens,
    2 to cover: a first length of 2 (q2 = P(L >= 2 | L >= 1)) starts at 0 or 1 alike, covering the first token
    half the time; a length of 1 covers it with 1/3, and else the second single token does with 1/2."""
    import math

    from plmcourse.judging.bart import edge_coverage

    assert edge_coverage(2, 0.5, 3.0) == pytest.approx((0.5, 0.5))
    lam = 1.7
    q1 = lam * math.exp(-lam) / (1 - math.exp(-lam))
    first = q1 * (1 / 3 + 2 / 3 * 1 / 2) + (1 - q1) * 1 / 2
    assert edge_coverage(3, 2 / 3, lam) == pytest.approx((first, first))


def test_edge_coverage_is_what_the_course_s_text_infilling_does():
    """The exact chance that an end is covered, against 20,000 calls of plmcourse.ref.text_infilling (within 4
    standard deviations), at the edge group's size and at another."""
    from plmcourse.judging.bart import EDGE_N, EDGE_RATIO, FIRST_ID, edge_coverage

    for n, ratio, lam in ((EDGE_N, EDGE_RATIO, 3.0), (7, 0.3, 1.5)):
        calls, first, last = 20000, 0, 0
        for seed in range(calls):
            out = ref.text_infilling(FIRST_ID + np.arange(n), np.random.default_rng(seed), 1, ratio, lam)
            first, last = first + (FIRST_ID not in out), last + (FIRST_ID + n - 1 not in out)
        for seen, p in zip((first, last), edge_coverage(n, ratio, lam)):
            assert abs(seen / calls - p) < 4 * (p * (1 - p) / calls) ** 0.5, (n, ratio, lam, seen / calls, p)
