"""From a language model to an assistant, in NumPy (notebook 15): the three losses.

    sft_loss(logits, tokens, answer_mask)
        supervised fine-tuning: the next-token loss on the answer's tokens only
    bradley_terry_loss(r_chosen, r_rejected)
        the reward model's loss on preference pairs: -mean log sigmoid(r_chosen - r_rejected)
    dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1)
        direct preference optimisation: Bradley-Terry on beta times the policy's log-ratios to the reference

Each is computed in float64 and returns a Python float. plmcourse.nn.instruct has the PyTorch
versions, with the same names and conventions.
"""

from __future__ import annotations

import numpy as np

from plmcourse.ref.objectives import _log_softmax  # one stable log-softmax for the references

__all__ = ["sft_loss", "bradley_terry_loss", "dpo_loss", "log_sigmoid"]


def log_sigmoid(x):
    """log sigmoid(x) = -log(1 + exp(-x)) = -logaddexp(0, -x): finite for any finite x (no exp overflows)."""
    return -np.logaddexp(0.0, -np.asarray(x, dtype=np.float64))


def sft_loss(logits, tokens, answer_mask):
    """The mean next-token loss over the answer's tokens.

    logits: (B, T, V), row t scores the token after tokens[:, t]; tokens: (B, T) ints; answer_mask:
    (B, T) bool, True on the answer's tokens (False on the prompt and on padding). Position t predicts
    tokens[:, t + 1], which counts when answer_mask[:, t + 1] is True (answer_mask[:, 0] never counts:
    no position predicts the first token). The mean is over every counted token of the batch (a long
    answer weighs more than a short one); with no counted token at all the loss is 0.0.
    """
    logits = np.asarray(logits, dtype=np.float64)
    tokens, answer_mask = np.asarray(tokens), np.asarray(answer_mask, dtype=bool)
    log_p = _log_softmax(logits[:, :-1])  # (B, T-1, V): the predictions of tokens 1..T-1
    picked = np.take_along_axis(log_p, tokens[:, 1:, None], axis=-1)[..., 0]  # (B, T-1)
    counted = answer_mask[:, 1:]  # (B, T-1)
    if not counted.any():
        return 0.0
    return float(-picked[counted].sum() / counted.sum())


def bradley_terry_loss(r_chosen, r_rejected):
    """-mean log sigmoid(r_chosen - r_rejected) over the pairs; r_chosen, r_rejected: (N,) rewards.

    Under the Bradley-Terry model P(chosen preferred) = sigmoid(r_chosen - r_rejected); the loss is that
    probability's negative log-likelihood, averaged over the N pairs.
    """
    margin = np.asarray(r_chosen, dtype=np.float64) - np.asarray(r_rejected, dtype=np.float64)  # (N,)
    return float(-log_sigmoid(margin).mean())


def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    """Rafailov et al.'s DPO loss, averaged over the N pairs.

    Each argument: (N,) log-probabilities of whole answers (summed over the answer's tokens) under the
    policy being trained or the frozen reference. The implicit reward of an answer is
    beta * (log pi(answer) - log pi_ref(answer)); the loss is Bradley-Terry on those rewards:
    -mean log sigmoid(beta * ((pc - rc) - (pr - rr))).
    """
    pc, pr, rc, rr = (np.asarray(a, dtype=np.float64) for a in (policy_chosen_logps, policy_rejected_logps,
                                                                ref_chosen_logps, ref_rejected_logps))
    margin = beta * ((pc - rc) - (pr - rr))  # (N,) reward of the chosen minus reward of the rejected
    return float(-log_sigmoid(margin).mean())
