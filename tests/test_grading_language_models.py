"""plmcourse.judging.language_models: right answers pass, every catalogued mistake fails with its hint,
and the checks hold up against delegation, monkey-patching and cached answers."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)


import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plmcourse.nn import scalar_mix as early_scalar_mix  # an alias taken before the checks load

from mistake_catalogue import catalogue_tests, failure, find_mistake
from mistake_catalogue.language_models_mistakes import (
    CATALOGUE,
    bilm_masked_fill,
    ce_boolean_index,
    mix_broadcast,
)
from plmcourse import nn as pnn
from plmcourse import ref
from plmcourse.grading import CheckFailed, check_bilm_loss, check_cross_entropy, check_scalar_mix
from plmcourse.judging import language_models as checks

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def mistake(check_name, name):
    return find_mistake(CATALOGUE, check_name, name)


# ----------------------------------------------------------------------------
# The catalogue


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


def test_the_issue_s_named_mistakes_are_in_the_catalogue():
    names = {name for _, (_, mistakes) in CATALOGUE.items() for name, _, _ in mistakes}
    for named in ("backward LM not reversed", "unnormalised layer weights"):
        assert named in names


# ----------------------------------------------------------------------------
# Sealing


def test_sealing_catches_an_alias_imported_before_the_checks():
    def student(layers, weights, gamma):
        return early_scalar_mix(layers, weights, gamma)

    assert "calls plmcourse.nn.scalar_mix; write it yourself" in str(failure(check_scalar_mix, student))


@pytest.mark.parametrize("library", [F.cross_entropy, F.nll_loss], ids=["cross_entropy", "nll_loss"])
def test_sealing_catches_torch_losses_in_the_numpy_exercise(library):
    def student(logits, targets, ignore_index=-100):
        flat = torch.from_numpy(np.asarray(logits, dtype=np.float64).reshape(-1, logits.shape[-1]))
        target = torch.from_numpy(targets.reshape(-1))
        if library is F.nll_loss:
            flat = torch.log_softmax(flat, -1)
        library(flat, target, ignore_index=ignore_index)
        return ce_boolean_index(logits, targets, ignore_index)

    assert f"calls torch.nn.functional.{library.__name__}" in str(failure(check_cross_entropy, student))


def test_the_bilm_check_allows_torch_cross_entropy():
    check_bilm_loss(bilm_masked_fill)  # uses F.cross_entropy: the exercise is about the shifts


def test_sealing_is_not_fooled_by_try_except():
    def student(forward_logits, backward_logits, targets):
        try:
            return pnn.bilm_loss(forward_logits, backward_logits, targets)
        except Exception:
            return bilm_masked_fill(forward_logits, backward_logits, targets)

    assert "calls plmcourse.nn.bilm_loss" in str(failure(check_bilm_loss, student))


# ----------------------------------------------------------------------------
# Answers that try to look right


def test_cached_answers_fail_the_hidden_cases():
    seen = {}

    def recorder(layers, weights, gamma):
        answer = mix_broadcast(layers, weights, gamma)
        seen[layers.detach().numpy().tobytes()] = answer.detach()
        return answer

    check_scalar_mix(recorder)

    def cached(layers, weights, gamma):
        return seen.get(layers.detach().numpy().tobytes(), layers[0]) * gamma / gamma

    with pytest.raises(CheckFailed):
        check_scalar_mix(cached, hidden=True)


# ----------------------------------------------------------------------------
# The references the checks compare with


@pytest.mark.parametrize("hidden", [False, True])
def test_torch_reference_agrees_with_plmcourse_ref(hidden):
    for case in checks._bilm_cases(hidden, torch.device("cpu")):
        d = case.data
        value, _ = checks._bilm_reference(case)
        assert value == pytest.approx(ref.bilm_loss(d["forward"], d["backward"], d["targets"]), abs=1e-12)
        assert value == pytest.approx(checks._bilm_numpy(d)[0], abs=1e-12)
    for case in checks._mix_cases(hidden, torch.device("cpu")):
        d = case.data
        output, _ = checks._mix_reference(case)
        np.testing.assert_allclose(output, ref.scalar_mix(d["layers"], d["weights"], d["gamma"]), atol=1e-12)


def test_every_bilm_case_has_a_prediction_in_each_direction():
    for case in checks._bilm_cases(True, torch.device("cpu")):
        targets = case.data["targets"]
        real = targets != -100
        assert (real[:, 1:] & real[:, :-1]).any()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_torch_checks_on_cuda():
    check_bilm_loss(bilm_masked_fill, hidden=True, device="cuda")
    check_scalar_mix(mix_broadcast, hidden=True, device="cuda")
    wrong = mistake("check_bilm_loss", "backward LM not reversed")
    assert str(failure(check_bilm_loss, wrong, device="cuda")) == str(failure(check_bilm_loss, wrong))
