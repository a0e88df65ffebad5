"""Right and wrong answers to notebook 15 (from GPT-3 to ChatGPT), as data for tests/test_grading_instruct.py.

For each check: CORRECT, (name, function) pairs that must pass, written in different styles; and
MISTAKES, (name, function, fragment): the check must fail with a message containing `fragment`.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import ref
from plmcourse.judging import instruct as checks
from plmcourse.ref import instruct as ref_instruct


def _log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


# ============================================================================
# sft_loss(logits, tokens, answer_mask)


def sft_notebook(logits, tokens, answer_mask):
    log_p = _log_softmax(logits[:, :-1])
    picked = np.take_along_axis(log_p, tokens[:, 1:, None], axis=-1)[..., 0]
    counted = answer_mask[:, 1:]
    if counted.sum() == 0:
        return 0.0
    return float(-(picked * counted).sum() / counted.sum())


def sft_ignore_index(logits, tokens, answer_mask):
    targets = np.where(answer_mask, tokens, -100)[:, 1:].reshape(-1)  # labels with an ignore index
    log_p = _log_softmax(logits[:, :-1]).reshape(-1, logits.shape[-1])
    keep = targets != -100
    if not keep.any():
        return 0.0
    return -log_p[keep, targets[keep]].mean()


def sft_loops(logits, tokens, answer_mask):
    total, n = 0.0, 0
    B, T, _ = logits.shape
    for b in range(B):
        for t in range(T - 1):
            if answer_mask[b, t + 1]:
                row = [float(v) for v in logits[b, t]]
                top = max(row)
                log_z = top + math.log(sum(math.exp(v - top) for v in row))
                total += log_z - row[int(tokens[b, t + 1])]
                n += 1
    return total / n if n else 0.0


def sft_ref_log_softmax(logits, tokens, answer_mask):
    log_p = ref.log_softmax(logits[:, :-1].astype(np.float64))  # an earlier notebook's function: allowed
    picked = np.take_along_axis(log_p, tokens[:, 1:, None], axis=-1)[..., 0]
    counted = answer_mask[:, 1:].astype(np.float64)
    return np.array(-(picked * counted).sum() / max(counted.sum(), 1.0))


def _sft_switch(**switches):
    def fn(logits, tokens, answer_mask):
        return float(checks._sft_numpy(logits, tokens, answer_mask, **switches))
    return fn


def sft_naive_log(logits, tokens, answer_mask):
    p = np.exp(logits[:, :-1]) / np.exp(logits[:, :-1]).sum(-1, keepdims=True)
    picked = np.log(np.take_along_axis(p, tokens[:, 1:, None], axis=-1)[..., 0])
    counted = answer_mask[:, 1:]
    return float(-(picked * counted).sum() / max(counted.sum(), 1))


def sft_nan_when_empty(logits, tokens, answer_mask):
    log_p = _log_softmax(logits[:, :-1])
    picked = np.take_along_axis(log_p, tokens[:, 1:, None], axis=-1)[..., 0]
    counted = answer_mask[:, 1:]
    return float(-(picked * counted).sum() / counted.sum())  # 0 / 0 with no answer token


def sft_returns_tensor(logits, tokens, answer_mask):
    return torch.tensor(sft_notebook(logits, tokens, answer_mask))


def sft_per_token(logits, tokens, answer_mask):
    log_p = _log_softmax(logits[:, :-1])
    return -np.take_along_axis(log_p, tokens[:, 1:, None], axis=-1)[..., 0] * answer_mask[:, 1:]


def sft_delegates(logits, tokens, answer_mask):
    return ref_instruct.sft_loss(logits, tokens, answer_mask)


def sft_raises(logits, tokens, answer_mask):
    return _log_softmax(logits)[answer_mask[:, 1:]].sum()  # the mask does not fit the logits


SFT_CORRECT = [("notebook", sft_notebook), ("ignore index", sft_ignore_index), ("loops", sft_loops),
               ("ref log_softmax", sft_ref_log_softmax)]
SFT_MISTAKES = [
    ("no shift", _sft_switch(shift="none"), "no shift"),
    ("shift reversed", _sft_switch(shift="reverse"), "the shift the wrong way round"),
    ("mask not shifted", _sft_switch(shift="mask_unshifted"), "the mask not shifted"),
    ("prompt counted", _sft_switch(count="nonpad"), "the prompt's tokens counted"),
    ("every position", _sft_switch(count="all"), "every position counted, padding included"),
    ("divided by every position", _sft_switch(mean="all"), "divided by every position"),
    ("mean of row means", _sft_switch(mean="rows"), "the mean of each row's mean"),
    ("sum", _sft_switch(mean="sum"), "the sum over the answer tokens"),
    ("sign", _sft_switch(sign=-1.0), "the sign flipped"),
    ("raw logits", _sft_switch(score="raw"), "raw logits used as log-probabilities"),
    ("probabilities", _sft_switch(score="probs"), "probabilities where log-probabilities belong"),
    ("softmax over time", _sft_switch(score="time_axis"), "the softmax over the time axis"),
    ("log of softmax", sft_naive_log, "log(softmax(x)) does that"),
    ("0 / 0 when empty", sft_nan_when_empty, "return 0.0 when nothing counts"),
    ("returns a tensor", sft_returns_tensor, "this exercise is NumPy"),
    ("per-token losses", sft_per_token, "expected a single number"),
    ("calls the course's version", sft_delegates, "calls plmcourse.ref.sft_loss"),
    ("raises", sft_raises, "your function raised IndexError"),
]


# ============================================================================
# bradley_terry_loss(r_chosen, r_rejected)


def bt_logaddexp(r_chosen, r_rejected):
    return float(np.mean(np.logaddexp(0.0, -(r_chosen - r_rejected))))


def bt_branches(r_chosen, r_rejected):
    x = (r_chosen - r_rejected).astype(np.float64)
    # log sigmoid(x) = -log(1 + exp(-x)) for x >= 0, x - log(1 + exp(x)) for x < 0: no exp of a large number
    log_sig = np.where(x >= 0, -np.log1p(np.exp(-np.abs(x))), x - np.log1p(np.exp(-np.abs(x))))
    return -log_sig.mean()


def bt_loops(r_chosen, r_rejected):
    total = 0.0
    for c, r in zip(r_chosen.tolist(), r_rejected.tolist()):
        x = c - r
        total += max(-x, 0.0) + math.log1p(math.exp(-abs(x)))
    return total / len(r_chosen)


def bt_ref_log_sigmoid(r_chosen, r_rejected):
    return -ref_instruct.log_sigmoid(r_chosen - r_rejected).mean()


def bt_naive(r_chosen, r_rejected):
    return float(-np.mean(np.log(1.0 / (1.0 + np.exp(-(r_chosen - r_rejected))))))


def bt_naive_exp_ratio(r_chosen, r_rejected):
    e = np.exp(r_chosen - r_rejected)
    return float(-np.mean(np.log(e / (1.0 + e))))


def bt_clipped(r_chosen, r_rejected):
    x = np.clip(r_chosen - r_rejected, -50, 50)
    return float(np.mean(np.log1p(np.exp(-x))))


def bt_swapped(r_chosen, r_rejected):
    return bt_logaddexp(r_rejected, r_chosen)


def bt_no_minus(r_chosen, r_rejected):
    return -bt_logaddexp(r_chosen, r_rejected)


def bt_sum(r_chosen, r_rejected):
    return float(np.sum(np.logaddexp(0.0, -(r_chosen - r_rejected))))


def bt_no_log(r_chosen, r_rejected):
    return float(-np.mean(1.0 / (1.0 + np.exp(-(r_chosen - r_rejected)))))


def bt_separate(r_chosen, r_rejected):
    return float(np.mean(np.logaddexp(0.0, -r_chosen) + np.logaddexp(0.0, r_rejected)))


def bt_hinge(r_chosen, r_rejected):
    return float(np.mean(np.maximum(0.0, 1.0 - (r_chosen - r_rejected))))


def bt_log2(r_chosen, r_rejected):
    return bt_logaddexp(r_chosen, r_rejected) / math.log(2)


def bt_per_pair(r_chosen, r_rejected):
    return np.logaddexp(0.0, -(r_chosen - r_rejected))


def bt_torch(r_chosen, r_rejected):
    return float(-F.logsigmoid(torch.from_numpy(r_chosen - r_rejected)).mean())


BT_CORRECT = [("logaddexp", bt_logaddexp), ("branches", bt_branches), ("loops", bt_loops),
              ("ref log_sigmoid", bt_ref_log_sigmoid)]
BT_MISTAKES = [
    ("wrong sign", bt_swapped, "chosen and rejected swapped"),
    ("minus missing", bt_no_minus, "the minus missing"),
    ("sum", bt_sum, "the sum over the pairs"),
    ("no log", bt_no_log, "sigmoid without its log"),
    ("two logistic terms", bt_separate, "two separate logistic terms"),
    ("hinge", bt_hinge, "a hinge"),
    ("log2", bt_log2, "a base-2 logarithm"),
    ("log(sigmoid) overflows", bt_naive, "margins of about −1000: exp(−margin) overflowed"),
    ("exp ratio overflows", bt_naive_exp_ratio, "exp(margin) overflowed"),
    ("margin clipped", bt_clipped, "the margin clipped"),
    ("per-pair losses", bt_per_pair, "expected a single number"),
    ("torch logsigmoid", bt_torch, "calls torch.nn.functional.logsigmoid"),
]


# ============================================================================
# dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1)


def dpo_notebook(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    chosen = policy_chosen_logps - ref_chosen_logps
    rejected = policy_rejected_logps - ref_rejected_logps
    return float(np.mean(np.logaddexp(0.0, -beta * (chosen - rejected))))


def dpo_rewards(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    reward_chosen = beta * (policy_chosen_logps - ref_chosen_logps)
    reward_rejected = beta * (policy_rejected_logps - ref_rejected_logps)
    return bt_branches(reward_chosen, reward_rejected)


def dpo_loops(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    losses = []
    for pc, pr, rc, rr in zip(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps):
        x = beta * ((float(pc) - float(pr)) - (float(rc) - float(rr)))  # the same margin, grouped otherwise
        losses.append(max(-x, 0.0) + math.log1p(math.exp(-abs(x))))
    return sum(losses) / len(losses)


def dpo_float64(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    pc, pr, rc, rr = (np.asarray(a, dtype=np.float64) for a in (policy_chosen_logps, policy_rejected_logps,
                                                                ref_chosen_logps, ref_rejected_logps))
    return -ref_instruct.log_sigmoid(beta * (pc - rc - pr + rr)).mean()


def _dpo(margin, outside=1.0, reduce=np.mean, default=0.1):
    def fn(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=default):
        x = margin(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta)
        return float(reduce((beta if outside is None else outside) * np.logaddexp(0.0, -x)))
    return fn


def dpo_naive(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    x = beta * ((policy_chosen_logps - ref_chosen_logps) - (policy_rejected_logps - ref_rejected_logps))
    return float(-np.mean(np.log(1.0 / (1.0 + np.exp(-x)))))


def dpo_delegates(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    return ref_instruct.bradley_terry_loss(beta * (policy_chosen_logps - ref_chosen_logps),
                                           beta * (policy_rejected_logps - ref_rejected_logps))


def dpo_with_rewards(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    loss = dpo_notebook(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta)
    return loss, beta * (policy_chosen_logps - ref_chosen_logps)


DPO_CORRECT = [("notebook", dpo_notebook), ("rewards first", dpo_rewards), ("loops", dpo_loops),
               ("float64", dpo_float64)]
def dpo_fixed_beta(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    """beta written as 0.1 in the formula, whatever the argument says."""
    x = 0.1 * ((policy_chosen_logps - ref_chosen_logps) - (policy_rejected_logps - ref_rejected_logps))
    return float(np.mean(np.logaddexp(0.0, -x)))


DPO_MISTAKES = [
    ("beta squared", _dpo(lambda pc, pr, rc, rr, b: b * b * ((pc - rc) - (pr - rr))), "beta applied twice"),
    ("beta on the policy terms only", _dpo(lambda pc, pr, rc, rr, b: b * (pc - pr) - (rc - rr)),
     "beta applied to the policy's log-probabilities only"),
    ("beta fixed at 0.1", dpo_fixed_beta, "beta fixed at 0.1 whatever the argument says"),
    ("beta on chosen only", _dpo(lambda pc, pr, rc, rr, b: b * (pc - rc) - (pr - rr)), "beta applied to the chosen"),
    ("beta on rejected only", _dpo(lambda pc, pr, rc, rr, b: (pc - rc) - b * (pr - rr)),
     "beta applied to the rejected"),
    ("no beta", _dpo(lambda pc, pr, rc, rr, b: (pc - rc) - (pr - rr)), "beta left out"),
    ("beta divides", _dpo(lambda pc, pr, rc, rr, b: ((pc - rc) - (pr - rr)) / b), "divided by beta"),
    ("beta outside", _dpo(lambda pc, pr, rc, rr, b: (pc - rc) - (pr - rr), outside=None), "beta outside"),
    ("default beta 1", _dpo(lambda pc, pr, rc, rr, b: b * ((pc - rc) - (pr - rr)), default=1.0),
     "its default is 1 instead of 0.1"),
    ("default beta 0.5", _dpo(lambda pc, pr, rc, rr, b: b * ((pc - rc) - (pr - rr)), default=0.5),
     "another default for beta"),
    ("reference swapped", _dpo(lambda pc, pr, rc, rr, b: b * ((pc - rr) - (pr - rc))),
     "the reference terms swapped"),
    ("reference added", _dpo(lambda pc, pr, rc, rr, b: b * ((pc + rc) - (pr + rr))), "or added instead of subtracted"),
    ("no reference", _dpo(lambda pc, pr, rc, rr, b: b * (pc - pr)), "the reference left out"),
    ("chosen and rejected swapped", _dpo(lambda pc, pr, rc, rr, b: b * ((pr - rr) - (pc - rc))),
     "the sign of the margin flipped"),
    ("policy and reference swapped", _dpo(lambda pc, pr, rc, rr, b: b * ((rc - pc) - (rr - pr))),
     "the sign of the margin flipped"),
    ("minus missing", _dpo(lambda pc, pr, rc, rr, b: b * ((pc - rc) - (pr - rr)), outside=-1.0) , "the minus missing"),
    ("sum", _dpo(lambda pc, pr, rc, rr, b: b * ((pc - rc) - (pr - rr)), reduce=np.sum), "the sum over the pairs"),
    ("log(sigmoid) overflows", dpo_naive, "exp(−margin after beta) overflowed"),
    ("calls bradley_terry_loss", dpo_delegates, "calls plmcourse.ref.bradley_terry_loss"),
    ("returns rewards too", dpo_with_rewards, "expected a number"),
]

CATALOGUE = {
    "check_sft_loss": (SFT_CORRECT, SFT_MISTAKES),
    "check_bradley_terry_loss": (BT_CORRECT, BT_MISTAKES),
    "check_dpo_loss": (DPO_CORRECT, DPO_MISTAKES),
}
