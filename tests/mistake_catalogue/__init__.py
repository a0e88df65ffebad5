"""Right and wrong answers to the course notebooks, as data for the grading tests.

Each `<topic>_mistakes.py` defines CATALOGUE = {check name: (correct, mistakes)}, with
correct = [(name, fn)] and mistakes = [(name, fn, fragment of the expected message)].
`catalogue_tests(CATALOGUE)` makes the tests every check must pass on its catalogue (each right
answer passes, visible, hidden and salted, and leaves the global random generators alone; each
mistake fails with its hint), so that adding a mistake is adding one entry.
"""

import numpy as np
import pytest
import torch

import plmcourse.judging as judging
from plmcourse.grading import CheckFailed


def failure(check, fn, **kwargs):
    """The CheckFailed that check(fn) must raise."""
    with pytest.raises(CheckFailed) as info:
        check(fn, **kwargs)
    return info.value


def assert_one_sentence(message, check_name):
    assert "\n" not in message
    assert message.startswith(f"{check_name} failed on case ")
    assert message.endswith(".") and not message.endswith("?.")


def find_mistake(catalogue, check_name, name):
    return next(fn for entry, fn, _ in catalogue[check_name][1] if entry == name)


def catalogue_tests(catalogue):
    """The three catalogue tests, parametrised over `catalogue`; assign them to test_* names."""
    correct = [(check, name, fn) for check, (right, _) in catalogue.items() for name, fn in right]
    mistakes = [(check, name, fn, fragment) for check, (_, wrong) in catalogue.items()
                for name, fn, fragment in wrong]
    mistake_ids = [f"{c}-{n}" for c, n, _, _ in mistakes]

    # 7000: hidden cases with their seeds shifted, as the judge draws them for a submission.
    @pytest.mark.parametrize("hidden", [False, True, 7000], ids=["visible", "hidden", "salted"])
    @pytest.mark.parametrize("check_name, name, fn", correct, ids=[f"{c}-{n}" for c, n, _ in correct])
    def test_correct_implementation_passes(check_name, name, fn, hidden, capsys):
        torch.manual_seed(3)
        np.random.seed(3)
        torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()[1].copy()
        getattr(judging, check_name)(fn, hidden=hidden)
        printed = capsys.readouterr().out
        assert printed.startswith(f"{check_name}: ") and printed.endswith(" cases passed.\n")
        # The check draws from its own seeded generators: the notebook's global ones are as they were.
        assert torch.equal(torch.get_rng_state(), torch_state), "the check moved torch's global generator"
        assert np.array_equal(np.random.get_state()[1], numpy_state), "the check moved NumPy's global generator"

    @pytest.mark.parametrize("check_name, name, fn, fragment", mistakes, ids=mistake_ids)
    def test_mistake_fails_with_its_hint(check_name, name, fn, fragment):
        message = str(failure(getattr(judging, check_name), fn))
        assert fragment in message
        assert_one_sentence(message, check_name)

    @pytest.mark.parametrize("hidden", [True, 7000], ids=["hidden", "salted"])
    @pytest.mark.parametrize("check_name, name, fn, fragment", mistakes, ids=mistake_ids)
    def test_mistake_also_fails_the_hidden_cases(check_name, name, fn, fragment, hidden):
        failure(getattr(judging, check_name), fn, hidden=hidden)

    return test_correct_implementation_passes, test_mistake_fails_with_its_hint, test_mistake_also_fails_the_hidden_cases
