"""plmcourse.judging.word_vectors: right answers pass, every catalogued mistake fails with its hint,
and the checks hold up against delegation, monkey-patching and cached answers."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)


import numpy as np
import pytest
import torch

# An alias taken before the checks are imported, as a notebook might: sealing must still see it.
from plmcourse.ref import log_softmax as early_log_softmax

from mistake_catalogue import catalogue_tests, failure, find_mistake
from mistake_catalogue.word_vectors_mistakes import (
    CATALOGUE,
    noise_where,
    sgns_einsum,
)
from plmcourse import ref
from plmcourse.grading import (
    CheckFailed,
    check_log_softmax,
    check_noise_distribution,
    check_skipgram_negative_sampling_loss,
)
from plmcourse.judging import word_vectors as checks

# Wrong answers overflow and divide by zero on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def mistake(check_name, name):
    return find_mistake(CATALOGUE, check_name, name)


# ----------------------------------------------------------------------------
# The catalogue


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


def test_the_issue_s_named_mistakes_are_in_the_catalogue():
    names = {name for _, (_, mistakes) in CATALOGUE.items() for name, _, _ in mistakes}
    for named in ("sign of the negative term", "missing sigmoid", "raw unigram distribution"):
        assert named in names


# ----------------------------------------------------------------------------
# Sealing


def test_sealing_catches_an_alias_imported_before_the_checks():
    def student(x, axis=-1):
        return early_log_softmax(x, axis)

    assert "calls plmcourse.ref.log_softmax; write it yourself" in str(failure(check_log_softmax, student))


def test_sealing_catches_the_softmax_inside_a_log():
    def student(x, axis=-1):
        return np.log(ref.softmax(x, axis))

    assert "calls plmcourse.ref.softmax" in str(failure(check_log_softmax, student))


def test_sealing_catches_a_wrapper_put_in_place_of_the_reference():
    original = ref.skipgram_negative_sampling_loss
    try:
        ref.skipgram_negative_sampling_loss = lambda c, o, n: original(c, o, n)

        def student(c, o, n):
            return ref.skipgram_negative_sampling_loss(c, o, n)

        assert "calls plmcourse.ref.skipgram_negative_sampling_loss" in str(
            failure(check_skipgram_negative_sampling_loss, student))
    finally:
        ref.skipgram_negative_sampling_loss = original


def test_sealing_is_not_fooled_by_try_except():
    def student(counts, power=0.75):
        try:
            return ref.noise_distribution(counts, power)
        except Exception:
            return noise_where(counts, power)

    assert "calls plmcourse.ref.noise_distribution" in str(failure(check_noise_distribution, student))


def test_the_seal_is_lifted_afterwards():
    with pytest.raises(CheckFailed):
        check_log_softmax(early_log_softmax)
    assert not torch.overrides._get_current_function_mode_stack()
    ref.log_softmax(np.zeros(3))
    x = torch.zeros(2, requires_grad=True)
    x.sum().backward()  # autograd works again outside the check
    assert x.grad is not None


# ----------------------------------------------------------------------------
# Answers that try to look right


def test_cached_answers_fail_the_hidden_cases():
    seen = {}

    def recorder(c, o, n):
        answer = sgns_einsum(c, o, n)
        seen[(c.tobytes(), o.tobytes(), n.tobytes())] = answer
        return answer

    check_skipgram_negative_sampling_loss(recorder)

    def cached(c, o, n):
        return seen.get((c.tobytes(), o.tobytes(), n.tobytes()),
                        (0.0, np.zeros_like(c), np.zeros_like(o), np.zeros_like(n)))

    check_skipgram_negative_sampling_loss(cached)
    with pytest.raises(CheckFailed):
        check_skipgram_negative_sampling_loss(cached, hidden=True)


# ----------------------------------------------------------------------------
# What comes back from the student's function, and the cases themselves


def test_an_exception_is_named_and_chained():
    def student(x, axis=-1):
        raise ZeroDivisionError("boom")

    error = failure(check_log_softmax, student)
    assert "your function raised ZeroDivisionError: boom" in str(error)
    assert isinstance(error.__cause__, ZeroDivisionError)


def test_a_wrong_gradient_with_no_known_cause_points_to_finite_differences():
    def student(c, o, n):
        loss, gc, go, gn = sgns_einsum(c, o, n)
        return loss, gc, go, gn + 0.01

    assert "compare your formula with a finite-difference estimate" in str(
        failure(check_skipgram_negative_sampling_loss, student))


def test_the_large_score_cases_really_overflow_a_naive_log_sigmoid():
    naive = mistake("check_skipgram_negative_sampling_loss", "naive log sigmoid")
    for case in checks._sgns_cases(hidden=True):
        if "large scores" in case.tags:
            with np.errstate(all="ignore"):
                assert not np.isfinite(naive(*case.args)[0])


def test_the_large_logit_cases_really_break_a_naive_log_softmax():
    naive = mistake("check_log_softmax", "log of the softmax")
    for case in checks._log_softmax_cases(hidden=True):
        if "large logits" in case.tags:
            with np.errstate(all="ignore"):
                assert np.isneginf(naive(*case.args, **case.kwargs)).any()


@pytest.mark.parametrize("hidden", [False, True])
def test_every_reference_gradient_matches_finite_differences(hidden):
    for case in checks._sgns_cases(hidden):
        c, o, n = (a.astype(np.float64) for a in case.args)
        if "large scores" in case.tags or c.size > 200:
            continue  # finite differences of a loss of size 1e3 lose the precision to compare
        _, *grads = ref.skipgram_negative_sampling_loss(c, o, n)
        numeric = [ref.numerical_gradient(lambda x: ref.skipgram_negative_sampling_loss(x, o, n)[0], c),
                   ref.numerical_gradient(lambda x: ref.skipgram_negative_sampling_loss(c, x, n)[0], o),
                   ref.numerical_gradient(lambda x: ref.skipgram_negative_sampling_loss(c, o, x)[0], n)]
        for analytic, estimate in zip(grads, numeric):
            np.testing.assert_allclose(analytic, estimate, atol=1e-7)


def test_verdicts_do_not_depend_on_the_thread_count():
    wrong = mistake("check_skipgram_negative_sampling_loss", "gradients of the sum")
    threads = torch.get_num_threads()
    try:
        messages = []
        for n in (1, 2):
            torch.set_num_threads(n)
            messages.append(str(failure(check_skipgram_negative_sampling_loss, wrong)))
    finally:
        torch.set_num_threads(threads)
    assert messages[0] == messages[1]
