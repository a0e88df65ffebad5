"""plmcourse.judging.bert (notebook 04): right answers pass, every catalogued mistake fails with its
hint, and the checks hold up against delegation, monkey-patching and cached answers.

Tests that take checks of notebooks 05-06 too (plmcourse.grading.gpt, plmcourse.grading.bart)
live here, with the earliest notebook they touch: the catalogue's coverage and the exports of
all three modules, the seeds of the statistical cases, the loss references, CUDA."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import numpy as np
import pytest
import torch

# An alias taken before the checks are imported, as a notebook might: sealing must still see it.
from torch.nn.functional import cross_entropy as early_cross_entropy

from mistake_catalogue import catalogue_tests, failure, find_mistake
from mistake_catalogue.bart_mistakes import infill_window
from mistake_catalogue.bert_mistakes import CATALOGUE, mlm_loss_log_softmax, mlm_vectorised
from mistake_catalogue.gpt_mistakes import CATALOGUE as GPT_CATALOGUE
from mistake_catalogue.gpt_mistakes import causal_slices, top_k_topk, top_p_sort_scatter
from plmcourse import ref
from plmcourse.judging import (
    check_causal_lm_loss,
    check_mlm_loss,
    check_mlm_mask,
    check_text_infilling,
    check_top_k_filter,
    check_top_p_filter,
)
from plmcourse.judging import bart as bart_checks
from plmcourse.judging import bert as checks
from plmcourse.judging import gpt as gpt_checks

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

def mistake(check_name, name):
    return find_mistake(CATALOGUE, check_name, name)


# ----------------------------------------------------------------------------
# The catalogue


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


# ----------------------------------------------------------------------------
# Statistics: a correct answer passes for every seed, not only for the ones the cases use


@pytest.mark.parametrize("offset", range(5))
def test_statistical_cases_pass_for_other_seeds(offset, monkeypatch, capsys):
    """Shift every seed the cases use: correct answers must pass whatever their random draws were."""
    for module, name in ((checks, "_mlm_case"), (bart_checks, "_infilling_case")):
        def shifted(seed, *args, _builder=getattr(module, name), **kwargs):
            return _builder(seed + 7919 * (offset + 1), *args, **kwargs)
        monkeypatch.setattr(module, name, shifted)
    check_mlm_mask(mlm_vectorised, hidden=True)
    check_text_infilling(infill_window, hidden=True)


def test_statistical_tolerances_are_wide_for_a_correct_answer():
    """On the largest visible case the measured shares sit well inside the tolerances."""
    case = checks._mlm_mask_cases(False)[0]
    inputs, labels = mlm_vectorised(*case.args)
    d = case.data
    special = np.isin(d["tokens"], d["specials"])
    predicted = labels != -100
    chosen = predicted[~special].mean()
    masked = (inputs[predicted] == d["mask_id"]).mean()
    assert abs(chosen - 0.15) < 0.004 and abs(masked - 0.8) < 0.01


def test_a_binomial_alarm_is_as_rare_as_stated(monkeypatch):
    """unlikely_count's exact tails: at a cheaper ALARM of 0.01, honest binomial counts raise it at most that
    often (the rules use 1e-6, too rare to see, with the same code)."""
    from plmcourse.judging import core
    monkeypatch.setattr(core, "ALARM", 0.01)
    rng = np.random.default_rng(0)
    for n, p in ((400, 0.15), (23000, 0.0225), (500, 0.5)):
        alarms = sum(core.unlikely_count(k, n, p) is not None for k in rng.binomial(n, p, size=20000))
        assert alarms / 20000 <= 0.01 * 1.25, (n, p, alarms)
    assert core.unlikely_count(0, 500, 0.15) == "low" and core.unlikely_count(150, 500, 0.15) == "high"


def test_the_spread_group_is_powerful_enough_and_honest_answers_rarely_trip_it():
    """An exact count trips the spread rule for sure; an honest one with probability q ** SPREAD < 1e-6."""
    from plmcourse.judging.core import ALARM, binomial_tails
    low, _ = binomial_tails(61, 400, 0.15)
    below, _ = binomial_tails(58, 400, 0.15)
    assert (low - below) ** checks.SPREAD < ALARM
    message = str(failure(check_mlm_mask, find_mistake(CATALOGUE, "check_mlm_mask", "exactly round(p * n) per row")))
    assert "an exact count is chosen" in message


def test_the_set_hint_needs_specials_kept_out_when_they_came_as_a_list():
    # An answer that never excludes specials fails on the first case (a list): no word about sets.
    message = str(failure(check_mlm_mask, mistake("check_mlm_mask", "specials chosen")))
    assert "are never chosen" in message and "set" not in message


# ----------------------------------------------------------------------------
# Sealing


def test_sealing_catches_an_alias_imported_before_the_checks():
    def student(logits, labels):
        V = logits.shape[-1]
        return early_cross_entropy(logits.reshape(-1, V), labels.reshape(-1))

    assert "calls torch.nn.functional.cross_entropy; write it yourself" in str(failure(check_mlm_loss, student))


def test_sealing_catches_the_builtin_under_functional():
    def student(logits, labels):
        V = logits.shape[-1]
        return torch._C._nn.cross_entropy_loss(logits.reshape(-1, V), labels.reshape(-1), None, 1, -100, 0.0)

    assert "write it yourself" in str(failure(check_mlm_loss, student))


def test_a_verbatim_copy_of_the_reference_counts_as_calling_it():
    namespace = {}
    exec(compile(open(ref.bert.__file__).read(), "copied.py", "exec"), namespace)
    assert "calls plmcourse.ref.mlm_mask" in str(failure(check_mlm_mask, namespace["mlm_mask"]))


def test_log_softmax_and_topk_are_allowed_where_not_taught():
    check_mlm_loss(mlm_loss_log_softmax)
    check_top_k_filter(top_k_topk)


# ----------------------------------------------------------------------------
# Answers that try to look right


@pytest.mark.parametrize("hidden", [False, True])
def test_loss_references_agree_with_plmcourse_ref(hidden):
    for case in (checks._mlm_loss_cases(hidden, torch.device("cpu"))
                 + gpt_checks._causal_cases(hidden, torch.device("cpu"))):
        d = case.data
        value, grad = checks._reference_loss(case)
        if d["causal"]:
            expected = ref.causal_lm_loss(d["logits"], d["targets"], ignore_index=d["ignore_index"])
        else:
            expected = ref.mlm_loss(d["logits"], d["targets"])
        assert math.isclose(value, expected, rel_tol=1e-12, abs_tol=1e-12)
        assert np.isfinite(grad).all()


def test_parameter_count_reference_matches_the_published_figures():
    cases = {c.label.split(":")[0]: checks._count_reference(c) for c in checks._count_cases(True)}
    assert cases["BERT-base"] == 109_482_240 and cases["BERT-large"] == 335_141_888


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_torch_checks_on_cuda():
    check_mlm_loss(mlm_loss_log_softmax, hidden=True, device="cuda")
    check_causal_lm_loss(causal_slices, hidden=True, device="cuda")
    check_top_k_filter(top_k_topk, hidden=True, device="cuda")
    check_top_p_filter(top_p_sort_scatter, hidden=True, device="cuda")
    wrong = find_mistake(GPT_CATALOGUE, "check_causal_lm_loss", "no shift")
    assert str(failure(check_causal_lm_loss, wrong, device="cuda")) == str(failure(check_causal_lm_loss, wrong))


def _shares(n, chosen_sd, p=0.5, mask_id=4, specials=(0, 1, 2, 3, 4), vocab_size=12):
    """Arrays for judging.bert._mlm_statistics: n ordinary tokens, of which p * n + chosen_sd standard deviations
    are chosen; of the chosen, 80% show [MASK], 10% a random ordinary id (1 in A of which is the original, so
    0.1 - 0.1 / A show another id) and the rest are left as they were."""
    ordinary_ids = [i for i in range(vocab_size) if i not in specials and i != mask_id]
    tokens = np.array([ordinary_ids[i % len(ordinary_ids)] for i in range(n)])
    k = round(p * n + chosen_sd * math.sqrt(n * p * (1 - p)))
    predicted = np.arange(n) < k
    inputs = tokens.copy()
    inputs[: round(0.8 * k)] = mask_id
    A = len(ordinary_ids)
    swapped = np.arange(round(0.8 * k), round(0.8 * k) + round((0.1 - 0.1 / A) * k))
    inputs[swapped] = [ordinary_ids[(ordinary_ids.index(t) + 1 + j % 5) % len(ordinary_ids)]
                       for j, t in enumerate(tokens[swapped])]
    data = {"p": p, "mask_id": mask_id, "specials": np.array(specials), "vocab_size": vocab_size}
    return data, inputs, tokens, predicted, np.zeros(n, dtype=bool), (inputs != tokens) & (inputs != mask_id)


def test_the_chosen_share_is_judged_by_its_binomial_tail_not_a_fixed_tolerance():
    """Two cases of mlm_mask (one visible, one hidden) have p = 0.5 on about 18,200 ordinary tokens: there the old
    tolerance of 0.01 was 2.7 standard deviations, and an honest answer failed each with probability 0.007 (one
    did in CI). 3.2 standard deviations off is an honest draw (about 1 in 700); 6 is not (1 in 500 million)."""
    assert checks._mlm_statistics(*_shares(20000, 3.2)) is None
    assert checks._mlm_statistics(*_shares(20000, -3.2)) is None
    far = checks._mlm_statistics(*_shares(20000, 6.0))
    assert far and far.startswith("0.521 of the 20000 ordinary tokens were chosen, expected p = 0.5"), far
