"""plmcourse.judging.gpt (notebook 05): right answers pass, every catalogued mistake fails with its
hint, and the checks hold up against delegation, monkey-patching and cached answers.

Tests that also take a notebook 04 check (the loss references, CUDA, the random generators)
are in tests/test_grading_bert.py."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)


import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mistake_catalogue import catalogue_tests, failure, find_mistake
from mistake_catalogue.gpt_mistakes import CATALOGUE, causal_slices, top_p_sort_scatter
from plmcourse.grading import (
    CheckFailed,
    check_causal_lm_loss,
    check_top_p_filter,
)
from plmcourse.judging import gpt as checks

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def mistake(check_name, name):
    return find_mistake(CATALOGUE, check_name, name)


# ----------------------------------------------------------------------------
# The catalogue


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


# ----------------------------------------------------------------------------
# Sealing


def test_sealing_is_not_fooled_by_try_except():
    def student(logits, tokens, ignore_index=-100):
        try:
            return F.cross_entropy(logits[..., :-1, :].reshape(-1, logits.shape[-1]), tokens[..., 1:].reshape(-1))
        except Exception:
            return causal_slices(logits, tokens)

    assert "calls torch.nn.functional.cross_entropy" in str(failure(check_causal_lm_loss, student))


# ----------------------------------------------------------------------------
# Answers that try to look right


def test_cached_answers_fail_the_hidden_cases():
    seen = {}

    def recorder(logits, p):
        answer = top_p_sort_scatter(logits, p)
        seen[(logits.detach().numpy().tobytes(), p)] = answer
        return answer

    check_top_p_filter(recorder)

    def cached(logits, p):
        return seen.get((logits.detach().numpy().tobytes(), p), logits)

    check_top_p_filter(cached)
    with pytest.raises(CheckFailed):
        check_top_p_filter(cached, hidden=True)


# ----------------------------------------------------------------------------
# What comes back, and machine independence


def test_verdicts_do_not_depend_on_the_thread_count():
    wrong = mistake("check_causal_lm_loss", "shift the wrong way")
    threads = torch.get_num_threads()
    try:
        messages = []
        for n in (1, 2):
            torch.set_num_threads(n)
            messages.append(str(failure(check_causal_lm_loss, wrong)))
    finally:
        torch.set_num_threads(threads)
    assert messages[0] == messages[1]


def test_filter_cases_are_unambiguous():
    """No top-p case has a cumulative mass within 1e-3 of p, and every top-k row has distinct values."""
    for case in checks._top_p_cases(True, torch.device("cpu")):
        assert checks._clear_of(case.data["logits"], case.data["p"])
    for case in checks._top_k_cases(True, torch.device("cpu")):
        logits = case.data["logits"]
        finite = np.where(np.isneginf(logits), np.nan, logits)
        for row in finite.reshape(-1, logits.shape[-1]):
            row = row[~np.isnan(row)]
            assert len(np.unique(row)) == len(row)
