"""plmcourse.ref.instruct (notebook 15) against cases worked by hand, and plmcourse.data.instruct's tasks."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import numpy as np
import pytest

from plmcourse import ref
from plmcourse.data import instruct as data
from plmcourse.ref import instruct as ref_instruct


def test_sft_loss_by_hand():
    # One row: tokens [3, 1, 2], answer = the last two tokens. Position 0 predicts token 1, position 1 token 2.
    logits = np.zeros((1, 3, 4))
    logits[0, 0] = [0.0, math.log(3.0), 0.0, 0.0]  # p(1) = 3 / 6
    logits[0, 1] = [0.0, 0.0, math.log(5.0), 0.0]  # p(2) = 5 / 8
    tokens = np.array([[3, 1, 2]])
    mask = np.array([[False, True, True]])
    assert math.isclose(ref_instruct.sft_loss(logits, tokens, mask), -(math.log(0.5) + math.log(5 / 8)) / 2)
    # Only the last token in the answer: position 0's prediction no longer counts.
    assert math.isclose(ref_instruct.sft_loss(logits, tokens, np.array([[False, False, True]])), -math.log(5 / 8))
    # A mask on the first token changes nothing: no position predicts it.
    assert math.isclose(ref_instruct.sft_loss(logits, tokens, np.array([[True, False, True]])), -math.log(5 / 8))


def test_sft_loss_is_a_token_mean_and_zero_without_answer():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 5, 6))
    tokens = rng.integers(0, 6, (2, 5))
    mask = np.array([[0, 0, 1, 1, 1], [0, 0, 0, 0, 1]], dtype=bool)
    log_p = ref.log_softmax(logits[:, :-1])
    picked = [-log_p[0, 1, tokens[0, 2]], -log_p[0, 2, tokens[0, 3]], -log_p[0, 3, tokens[0, 4]],
              -log_p[1, 3, tokens[1, 4]]]
    assert math.isclose(ref_instruct.sft_loss(logits, tokens, mask), sum(picked) / 4)
    assert ref_instruct.sft_loss(logits, tokens, np.zeros((2, 5), dtype=bool)) == 0.0


def test_sft_loss_matches_causal_lm_loss_with_an_ignore_index():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((3, 7, 5)) * 3
    tokens = rng.integers(1, 5, (3, 7))
    mask = rng.random((3, 7)) < 0.5
    labels = np.where(mask, tokens, -100)
    assert math.isclose(ref_instruct.sft_loss(logits, tokens, mask), ref.causal_lm_loss(logits, labels), rel_tol=1e-12)


def test_sft_loss_is_stable_for_large_logits():
    logits = np.array([[[1000.0, -1000.0], [-1000.0, 1000.0]]])
    tokens, mask = np.array([[0, 1]]), np.array([[False, True]])
    assert math.isclose(ref_instruct.sft_loss(logits, tokens, mask), 2000.0)


@pytest.mark.parametrize("margin", [-1000.0, -3.0, 0.0, 2.0, 1000.0])
def test_bradley_terry_loss_by_hand(margin):
    expected = math.log1p(math.exp(-margin)) if margin > -50 else -margin
    assert math.isclose(ref_instruct.bradley_terry_loss(np.array([margin + 1.0]), np.array([1.0])), expected,
                        rel_tol=1e-12)


def test_bradley_terry_loss_means_over_pairs_and_has_the_right_sign():
    r_c, r_r = np.array([2.0, 0.0]), np.array([0.0, 1.0])
    expected = (math.log1p(math.exp(-2.0)) + math.log1p(math.exp(1.0))) / 2
    assert math.isclose(ref_instruct.bradley_terry_loss(r_c, r_r), expected)
    assert ref_instruct.bradley_terry_loss(r_c, r_r) < ref_instruct.bradley_terry_loss(r_r, r_c)


def test_dpo_loss_by_hand():
    # pc - rc = 2, pr - rr = -1: margin = beta * 3.
    pc, pr, rc, rr = np.array([-5.0]), np.array([-9.0]), np.array([-7.0]), np.array([-8.0])
    for beta in (0.1, 0.5, 2.0):
        assert math.isclose(ref_instruct.dpo_loss(pc, pr, rc, rr, beta), math.log1p(math.exp(-3 * beta)))
    assert math.isclose(ref_instruct.dpo_loss(pc, pr, rc, rr), math.log1p(math.exp(-0.3)))  # beta = 0.1
    assert math.isclose(ref_instruct.dpo_loss(rc, rr, rc, rr, 0.7), math.log(2.0))  # the policy is its reference


def test_dpo_is_bradley_terry_on_implicit_rewards():
    rng = np.random.default_rng(2)
    pc, pr, rc, rr = (rng.uniform(-40, -2, 8) for _ in range(4))
    beta = 0.3
    assert math.isclose(ref_instruct.dpo_loss(pc, pr, rc, rr, beta),
                        ref_instruct.bradley_terry_loss(beta * (pc - rc), beta * (pr - rr)), rel_tol=1e-12)


def test_tasks_solve_their_examples():
    assert data.Task("replace", "ab").solve("abca") == "bbcb"
    assert data.Task("drop", "c").solve("acbc") == "ab"
    assert data.Task("count", "a").solve("abca") == "2"
    assert data.Task("item", "3").solve("abcd") == "c"
    assert data.Task("reverse").solve("abcd") == "dcba"
    assert data.Task("sort").solve("dbca") == "abcd"
    assert data.Task("replace", "ab").instruction(1) == "turn a into b"


def test_split_holds_out_tasks_and_a_family():
    train, held, unseen = data.task_split(0)
    assert not set(train) & set(held) and all(t.family == "sort" for t in unseen)
    assert all(t.family != "sort" for t in train + held)
    assert len(train) + len(held) + len(unseen) == len(data.TASKS)
    assert data.task_split(0)[0] == train and data.task_split(1)[1] != held


def test_spread_over_families_takes_every_family_before_a_second_of_any():
    A, B, C = (data.Task("drop", p) for p in "abc")
    r1, r2, r3 = (data.Task("replace", p) for p in ("ab", "ba", "ca"))
    tasks = [r1, r2, A, r3, B, C, data.Task("reverse")]
    assert data.spread_over_families(tasks, 3) == [r1, A, data.Task("reverse")]  # one of each, in tasks' order
    assert data.spread_over_families(tasks, 5) == [r1, r2, A, B, data.Task("reverse")]
    assert data.spread_over_families(tasks, 6) == [r1, r2, A, r3, B, data.Task("reverse")]  # reverse has no 2nd
    assert data.spread_over_families(tasks, 7) == tasks and data.spread_over_families(tasks, 0) == []
    for n in (-1, 8):
        with pytest.raises(ValueError, match="between 0 and 7"):
            data.spread_over_families(tasks, n)
    train, _, _ = data.task_split(0)
    five = data.spread_over_families(train, 5)
    assert sorted(t.family for t in five) == ["count", "drop", "item", "replace", "reverse"]


def test_examples_encode_with_their_answer_marked():
    pairs = data.instruction_examples(data.TASKS, 20, np.random.default_rng(0), p_verbose=0.5)
    tokens, mask = data.encode_pairs(*zip(*pairs))
    for (prompt, answer), row, m in zip(pairs, tokens, mask):
        assert data.decode(row) == prompt + answer and data.decode(row[m]) == answer
        assert answer.endswith(".") and prompt.endswith("=")


def test_answer_score_is_the_rule():
    assert data.answer_score("bbcb.", "bbcb.") == 2
    assert data.answer_score("bbcb ok ok.", "bbcb.") == 1
    assert data.answer_score("bbca.", "bbcb.") == 0
    assert data.answer_score("bbcb", "bbcb.") == 0  # never ended
    assert data.answer_score("bbcb.xx", "bbcb.") == 2  # what follows the end is not read
    rng = np.random.default_rng(0)
    by_instruction = {t.instruction(0): t for t in data.TASKS}
    for prompt, chosen, rejected in data.preference_pairs(data.TASKS, 60, rng):
        instruction, x = prompt[:-1].split(": ")
        target = by_instruction[instruction].solve(x) + "."
        assert data.answer_score(chosen, target) > data.answer_score(rejected, target)  # the rule orders every pair
