"""Checks for notebook 15 (from GPT-3 to ChatGPT): the three losses that turn a language model into an
assistant, NumPy.

    check_sft_loss              sft_loss(logits, tokens, answer_mask) -> float
    check_bradley_terry_loss    bradley_terry_loss(r_chosen, r_rejected) -> float
    check_dpo_loss              dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps,
                                         ref_rejected_logps, beta=0.1) -> float

check_sft_loss compares with plmcourse.ref.sft_loss: B (1 and several), T, V, prompts and answers of
different lengths in one batch (a token mean and a mean of row means differ there), right padding, a
row with no answer token, a batch with none at all (0.0, not 0 / 0), an answer that starts at position
0 (its first token is never predicted), float32 and float64, and logits of about ±1000 (a log of a
softmax gives -inf there). Named: no shift, the shift the wrong way, the mask not shifted with the
tokens, the prompt counted, every position counted (padding too), the mean of row means, the sum,
the sign, raw logits or probabilities instead of log-probabilities, a softmax over the time axis.

check_bradley_terry_loss compares with plmcourse.ref.bradley_terry_loss: N (1 and several), rewards
of several scales, equal rewards (log 2), float32 and float64, margins of +1000 only (exp(margin)
overflows: exp(x) / (1 + exp(x)) gives inf / inf), of -1000 only (exp(-margin) overflows:
log(1 / (1 + exp(-x))) gives log 0) and both. Named: the sign (chosen and rejected swapped), the
minus missing, the sum, no log, two separate logistic terms, a hinge, a base-2 log, margins clipped.

check_dpo_loss compares with plmcourse.ref.dpo_loss: N (1 and several), beta not passed (0.1), passed
positionally and by keyword (0.01 to 2), realistic log-probabilities (sums over answers, -60 to -2),
a policy equal to its reference (log 2 whatever beta), float32 and float64, and margins of ±1000
after beta. Named: beta on one side only, beta missing, dividing, outside the log-sigmoid, another
default; the reference terms swapped between the answers (the same as adding them) or left out;
the margin's sign (chosen and rejected swapped, or policy and reference); the minus; the sum.

Sealed: the course's own plmcourse.ref and plmcourse.nn versions, their cross-entropies, and torch's
log-sigmoid, softplus and cross-entropies.
"""

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse.grading import instruct as declared
from plmcourse.judging.core import (
    Case,
    Spec,
    as_scalar,
    compare,
    describe,
    hidden_salt,
    hint_for,
    log_softmax,
    name_mistake,
    noted,
    tolerance_for,
)
from plmcourse.nn import gpt as nn_gpt
from plmcourse.nn import instruct as nn_instruct
from plmcourse.nn import objectives as nn_objectives
from plmcourse.ref import gpt as ref_gpt
from plmcourse.ref import instruct as ref_instruct
from plmcourse.ref import objectives as ref_objectives

__all__ = ["check_sft_loss", "check_bradley_terry_loss", "check_dpo_loss"]

TORCH_LOSSES = [
    (F.logsigmoid, "torch.nn.functional.logsigmoid"),
    (F.softplus, "torch.nn.functional.softplus"),
    (F.binary_cross_entropy_with_logits, "torch.nn.functional.binary_cross_entropy_with_logits"),
    (F.cross_entropy, "torch.nn.functional.cross_entropy"),
    (F.nll_loss, "torch.nn.functional.nll_loss"),
    (torch.nn.LogSigmoid, "torch.nn.LogSigmoid"),
    (torch.nn.CrossEntropyLoss, "torch.nn.CrossEntropyLoss"),
]


def _judge_scalar(got, case, *, what_mean, unstable, empty=None):
    """(value, None) for a finite number, else (None, the problem)."""
    if isinstance(got, torch.Tensor):
        return None, "the result is a torch.Tensor, expected a number: this exercise is NumPy"
    if isinstance(got, np.ndarray) and got.size != 1:
        return None, f"the result has shape {got.shape}, expected a single number ({what_mean})"
    value = as_scalar(got)
    if value is None:
        return None, f"your function returned {describe(got)}, expected a number"
    if not np.isfinite(value):
        if empty is not None and "no answer token" in case.tags:
            return None, empty(value)
        if "large" in case.tags:
            return None, unstable(value)
        return None, f"the result is {value}"
    return value, None


# ============================================================================
# sft_loss(logits, tokens, answer_mask), NumPy

SFT_SEAL = [
    (ref_instruct.sft_loss, "plmcourse.ref.sft_loss"),
    (nn_instruct.sft_loss, "plmcourse.nn.sft_loss"),
    (ref_gpt.causal_lm_loss, "plmcourse.ref.causal_lm_loss"),
    (nn_gpt.causal_lm_loss, "plmcourse.nn.causal_lm_loss"),
    (ref_objectives.cross_entropy, "plmcourse.ref.cross_entropy"),
    (nn_objectives.cross_entropy, "plmcourse.nn.cross_entropy"),
] + TORCH_LOSSES


def _sft_case(seed, B, T, V, *, layout=None, dtype=np.float64, scale=2.0, large=None, prompt_at_zero=False,
              empty_row=False, no_answer=False):
    """Random logits (B, T, V) and tokens in 1..V-1, each row a prompt, an answer and padding (id 0).

    layout: [(prompt length, answer length)] per row (None: drawn). empty_row: row 0 has no answer token;
    no_answer: no row has one; prompt_at_zero: row 0's answer starts at position 0 (no prompt). large:
    logits of about ±large, with +1.5 large and -1.5 large in every position (a softmax underflows)."""
    rng = np.random.default_rng(seed)
    if layout is None:
        layout = []
        for _ in range(B):
            p = int(rng.integers(1, T - 1))
            layout.append((p, int(rng.integers(1, T - p + 1))))
    if empty_row:
        layout[0] = (layout[0][0], 0)
    if no_answer:
        layout = [(p, 0) for p, _ in layout]
    if prompt_at_zero:
        layout[0] = (0, max(2, layout[0][1]))
    tokens = rng.integers(1, V, size=(B, T))
    mask = np.zeros((B, T), dtype=bool)
    for i, (p, a) in enumerate(layout):
        mask[i, p: p + a] = True
        tokens[i, p + a:] = 0  # padding
    if large:
        logits = rng.uniform(-1.0, 1.0, (B, T, V)) * large
        columns = np.argsort(rng.random((B, T, V)), axis=-1)[..., :2]
        np.put_along_axis(logits, columns[..., :1], 1.5 * large, axis=-1)
        np.put_along_axis(logits, columns[..., 1:], -1.5 * large, axis=-1)
    else:
        logits = rng.standard_normal((B, T, V)) * scale
    logits = logits.astype(dtype)
    counted = mask[:, 1:]
    lengths = counted.sum(1)
    label = f"seed {seed}: logits of shape ({B}, {T}, {V}), {int(counted.sum())} answer tokens to predict"
    label, tags = noted(label, [
        (len(set(lengths.tolist())) > 1, " (answers of different lengths)", "ragged"),
        (bool((~mask & (tokens != 0)).any()), "", "prompt"),
        (bool((tokens == 0).any()), ", right padding", "padding"),
        (empty_row and not no_answer, ", a row with no answer token", "empty row"),
        (no_answer, ", no answer token in the batch (the loss is 0.0)", "no answer token"),
        (prompt_at_zero, ", row 0's answer starts at position 0", "answer at 0"),
        (bool(large), f", logits of about ±{1.5 * (large or 0):g}", "large"),
        (dtype == np.float32, ", float32", "float32"),
    ])
    return Case(label, (logits, tokens, mask), tags=tags, data={"logits": logits, "tokens": tokens, "mask": mask})


def _sft_cases(hidden):
    cases = [
        _sft_case(0, 3, 8, 5),
        _sft_case(1, 1, 6, 4),
        _sft_case(2, 4, 9, 6, layout=[(2, 6), (5, 1), (3, 3), (1, 2)]),
        _sft_case(3, 3, 7, 5, empty_row=True),
        _sft_case(4, 2, 6, 4, no_answer=True),
        _sft_case(5, 3, 8, 5, prompt_at_zero=True),
        _sft_case(6, 2, 7, 6, large=1000.0),
        _sft_case(7, 4, 10, 7, dtype=np.float32),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _sft_case(salt + 100, 6, 12, 9),
            _sft_case(salt + 101, 2, 5, 3, layout=[(1, 4), (3, 1)]),
            _sft_case(salt + 102, 5, 8, 4, empty_row=True),
            _sft_case(salt + 103, 3, 9, 11, large=800.0),
            _sft_case(salt + 104, 1, 7, 5, no_answer=True),
            _sft_case(salt + 105, 4, 11, 6, prompt_at_zero=True, dtype=np.float32),
            _sft_case(salt + 106, 8, 14, 8, scale=5.0),
        ]
    return cases


def _sft_numpy(logits, tokens, mask, *, shift="right", count="mask", mean="tokens", sign=1.0, score="log_softmax"):
    """The loss in float64 with the switches that reproduce known mistakes."""
    x = logits.astype(np.float64)
    if score == "log_softmax":
        s = log_softmax(x, -1)
    elif score == "raw":
        s = x
    elif score == "probs":
        s = np.exp(log_softmax(x, -1))
    elif score == "time_axis":
        s = log_softmax(x, 1)
    if count == "mask":
        m = mask
    elif count == "nonpad":
        m = tokens != 0
    else:
        m = np.ones_like(mask)
    if shift == "right":
        s, t, m = s[:, :-1], tokens[:, 1:], m[:, 1:]
    elif shift == "none":
        t = tokens
    elif shift == "reverse":
        s, t, m = s[:, 1:], tokens[:, :-1], m[:, :-1]
    elif shift == "mask_unshifted":
        s, t, m = s[:, :-1], tokens[:, 1:], m[:, :-1]
    picked = np.take_along_axis(s, t[..., None], axis=-1)[..., 0]
    nll = -sign * picked * m
    if mean == "tokens":
        return np.array(nll.sum() / max(m.sum(), 1))
    if mean == "all":
        return np.array(nll.sum() / m.size)
    if mean == "sum":
        return np.array(nll.sum())
    rows = m.sum(1)
    return np.array(np.mean(nll.sum(1)[rows > 0] / rows[rows > 0]))  # "rows": the mean of the rows' means


SFT_NO_SHIFT = ("no shift: position t's logits predict the NEXT token, tokens[:, t + 1]; compare logits[:, :-1] "
                "with tokens[:, 1:] (and the mask answer_mask[:, 1:])")
SFT_REVERSED = ("the shift the wrong way round: logits[:, :-1] predict tokens[:, 1:] (position t scores the token "
                "after it), not logits[:, 1:] against tokens[:, :-1]")
SFT_MASK_UNSHIFTED = ("the mask not shifted with the tokens: a predicted token tokens[:, t + 1] counts when "
                      "answer_mask[:, t + 1] is True, so use answer_mask[:, 1:] beside tokens[:, 1:]")
SFT_PROMPT = ("the prompt's tokens counted: only the answer's tokens (answer_mask True) count; the model is not "
              "trained to write the prompt")
SFT_ALL = ("every position counted, padding included: only the answer's tokens count, and the mean divides by "
           "their number")
SFT_DENOMINATOR = ("the masked sum divided by every position, B · (T − 1), instead of by the number of answer "
                   "tokens: padding and prompt dilute the mean")
SFT_ROWS = ("the mean of each row's mean instead of the mean over all answer tokens of the batch: divide the "
            "masked sum by the total number of answer tokens (a long answer weighs more)")
SFT_SUM = "the sum over the answer tokens instead of their mean"
SFT_SIGN = "the sign flipped: the loss is the mean of −log p(token)"
SFT_RAW = "raw logits used as log-probabilities: apply a log-softmax over the vocabulary (the last axis) first"
SFT_PROBS = "probabilities where log-probabilities belong: the loss is −log p, not −p"
SFT_TIME_AXIS = "the softmax over the time axis: each position's distribution is over the vocabulary, axis=-1"


def _sft_mistakes(d):
    lg, tk, m = d["logits"], d["tokens"], d["mask"]

    def loss(**switches):
        return lambda: (_sft_numpy(lg, tk, m, **switches),)

    yield SFT_NO_SHIFT, loss(shift="none")
    yield SFT_REVERSED, loss(shift="reverse")
    yield SFT_MASK_UNSHIFTED, loss(shift="mask_unshifted")
    yield SFT_PROMPT, loss(count="nonpad")
    yield SFT_ALL, loss(count="all")
    yield SFT_DENOMINATOR, loss(mean="all")
    yield SFT_ROWS, loss(mean="rows")
    yield SFT_SUM, loss(mean="sum")
    yield SFT_SIGN, loss(sign=-1.0)
    yield SFT_RAW, loss(score="raw")
    yield SFT_PROBS, loss(score="probs")
    yield SFT_TIME_AXIS, loss(score="time_axis")
    yield SFT_NO_SHIFT + " (and the prompt counted)", loss(shift="none", count="nonpad")
    yield SFT_PROMPT + " (and the mask is not shifted)", loss(shift="mask_unshifted", count="nonpad")


def _judge_sft(case, got, expected):
    value, problem = _judge_scalar(
        got, case, what_mean="the mean over the batch's answer tokens",
        empty=lambda v: (f"the result is {v} for a batch with no answer token: 0 / 0; return 0.0 when nothing "
                         f"counts (there is nothing to learn from)"),
        unstable=lambda v: (f"the result is {v} for logits of about ±1000: a probability underflowed to 0 and "
                            f"its log is -inf (log(softmax(x)) does that), or exp overflowed; compute "
                            f"log-probabilities as x − max − log(sum(exp(x − max))) along the vocabulary axis"))
    if problem:
        return problem
    tolerance = tolerance_for(case.data["logits"].dtype)
    problem = compare(np.array(value), np.array(expected), **tolerance, what="the loss")
    return name_mistake(problem, (np.array(value),), _sft_mistakes(case.data), tolerance)


def _explain_sft_error(error):
    return hint_for(error, [
        (("boolean index did not match", "could not be broadcast", "operands could not"),
         "after the shift, logits[:, :-1] (B, T − 1, V), tokens[:, 1:] and answer_mask[:, 1:] (B, T − 1) line up"),
        (("index", "out of bounds"), "pick each position's log-probability of its next token, "
                                     "np.take_along_axis(log_p, tokens[:, 1:, None], axis=-1)"),
    ])


check_sft_loss = Spec(
    declared.check_sft_loss,
    cases=_sft_cases,
    reference=lambda case: ref_instruct.sft_loss(*(case.data[k] for k in ("logits", "tokens", "mask"))),
    judge=_judge_sft,
    seal=SFT_SEAL,
    explain_error=_explain_sft_error,
    clauses=(
        ("shift by one: position t predicts tokens[:, t + 1]", lambda c: True),
        ("the prompt masked out (answer_mask False on it)", lambda c: "prompt" in c.tags),
        ("padding masked out", lambda c: "padding" in c.tags),
        ("the mean over every answer token of the batch (answers of different lengths)",
         lambda c: "ragged" in c.tags),
        ("B = 1", lambda c: c.data["logits"].shape[0] == 1),
        ("a row with no answer token", lambda c: "empty row" in c.tags),
        ("no answer token in the batch: 0.0", lambda c: "no answer token" in c.tags),
        ("an answer at position 0: its first token is never predicted", lambda c: "answer at 0" in c.tags),
        ("stable for logits of ±1000", lambda c: "large" in c.tags),
        ("float32 inputs", lambda c: "float32" in c.tags),
    ),
)


# ============================================================================
# bradley_terry_loss(r_chosen, r_rejected), NumPy

BT_SEAL = [
    (ref_instruct.bradley_terry_loss, "plmcourse.ref.bradley_terry_loss"),
    (nn_instruct.bradley_terry_loss, "plmcourse.nn.bradley_terry_loss"),
    (ref_instruct.dpo_loss, "plmcourse.ref.dpo_loss"),
    (nn_instruct.dpo_loss, "plmcourse.nn.dpo_loss"),
] + TORCH_LOSSES


def _bt_case(seed, N, *, scale=2.0, dtype=np.float64, large=None, equal=False):
    """Rewards ~ N(0, scale^2) for N pairs. large: "+" (every margin about +1000), "-" (about -1000), "±"."""
    rng = np.random.default_rng(seed)
    r_c = rng.standard_normal(N) * scale
    r_r = rng.standard_normal(N) * scale
    if equal:
        r_r = r_c.copy()
    if large:
        signs = {"+": np.ones(N), "-": -np.ones(N), "±": np.where(np.arange(N) % 2 == 0, 1.0, -1.0)}[large]
        r_r = r_c - signs * rng.uniform(900.0, 1100.0, N)
    r_c, r_r = r_c.astype(dtype), r_r.astype(dtype)
    label = f"seed {seed}: {N} pairs"
    label, tags = noted(label, [
        (scale != 2.0 and not large, f", rewards of scale {scale:g}", None),
        (equal, ", equal rewards (the loss is log 2)", "equal"),
        (large == "+", ", margins of about +1000", "large"),
        (large == "-", ", margins of about -1000", "large"),
        (large == "±", ", margins of about ±1000", "large"),
        (dtype == np.float32, ", float32", "float32"),
    ])
    return Case(label, (r_c, r_r), tags=tags, data={"r_c": r_c, "r_r": r_r, "large": large})


def _bt_cases(hidden):
    cases = [
        _bt_case(0, 6),
        _bt_case(1, 1),
        _bt_case(2, 5, equal=True),
        _bt_case(3, 4, large="+"),
        _bt_case(4, 4, large="-"),
        _bt_case(5, 6, large="±"),
        _bt_case(6, 8, scale=0.3, dtype=np.float32),
        _bt_case(7, 12, scale=6.0),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _bt_case(salt + 100, 32, scale=3.0),
            _bt_case(salt + 101, 1, large="-"),
            _bt_case(salt + 102, 7, large="±", dtype=np.float32),
            _bt_case(salt + 103, 3, scale=0.05),
            _bt_case(salt + 104, 9, large="+"),
            _bt_case(salt + 105, 2, equal=True, dtype=np.float32),
        ]
    return cases


def _softplus(x):
    return np.logaddexp(0.0, x)


BT_SIGN = ("the sign of the margin flipped (chosen and rejected swapped): the loss is −log sigmoid(r_chosen − "
           "r_rejected), small when the chosen answer has the higher reward")
BT_MINUS = "the minus missing: the loss is −mean log sigmoid(margin), which is never negative"
BT_SUM = "the sum over the pairs instead of their mean"
BT_NO_LOG = "sigmoid without its log: the loss is −log sigmoid(margin)"
BT_SEPARATE = ("two separate logistic terms, −log sigmoid(r_chosen) − log sigmoid(−r_rejected): Bradley-Terry "
               "scores the difference of the rewards, sigmoid(r_chosen − r_rejected)")
BT_HINGE = "a hinge, max(0, 1 − margin): the Bradley-Terry loss is −log sigmoid(margin)"
BT_LOG2 = "a base-2 logarithm: the course's log is the natural one"
BT_CLIPPED = ("the margin clipped to stop exp overflowing: that changes the loss of large margins; compute "
              "−log sigmoid(x) = log(1 + exp(−x)) stably instead, np.logaddexp(0, −x)")
BT_MEAN_MARGIN = "the log-sigmoid of the mean margin instead of the mean of the log-sigmoids"


def _logistic_mistakes(margin, what=""):
    """Mistakes of −mean log sigmoid(margin) that any Bradley-Terry-shaped loss can make."""
    yield BT_SIGN + what, lambda: (np.array(_softplus(margin).mean()),)
    yield BT_MINUS, lambda: (np.array(-_softplus(-margin).mean()),)
    yield BT_SUM, lambda: (np.array(_softplus(-margin).sum()),)
    yield BT_NO_LOG, lambda: (np.array(-(1.0 / (1.0 + np.exp(-margin))).mean()),)
    yield BT_NO_LOG, lambda: (np.array((1.0 - 1.0 / (1.0 + np.exp(-margin))).mean()),)
    yield BT_HINGE, lambda: (np.array(np.maximum(0.0, 1.0 - margin).mean()),)
    yield BT_LOG2, lambda: (np.array(_softplus(-margin).mean() / np.log(2.0)),)
    yield BT_MEAN_MARGIN, lambda: (np.array(_softplus(-margin.mean())),)
    if np.abs(margin).max() > 30:
        for c in (10, 15, 20, 30, 35, 40, 50, 60, 80, 88, 100, 500, 700, 709):
            yield BT_CLIPPED, (lambda c=c: (np.array(_softplus(-np.clip(margin, -c, c)).mean()),))


def _bt_mistakes(d):
    r_c, r_r = d["r_c"].astype(np.float64), d["r_r"].astype(np.float64)
    yield from _logistic_mistakes(r_c - r_r)
    yield BT_SEPARATE, lambda: (np.array((_softplus(-r_c) + _softplus(r_r)).mean()),)


def _unstable(value, case, margin_name="margin"):
    large = case.data["large"]
    if large == "+":
        return (f"the result is {value} for {margin_name}s of about +1000: exp({margin_name}) overflowed "
                f"(exp(x) / (1 + exp(x)) is inf / inf there); compute −log sigmoid(x) as np.logaddexp(0, −x)")
    if large == "-":
        return (f"the result is {value} for {margin_name}s of about −1000: exp(−{margin_name}) overflowed, "
                f"sigmoid became 0 and its log −inf (log(1 / (1 + exp(−x))) does that); compute −log sigmoid(x) "
                f"as np.logaddexp(0, −x), which stays finite at any x")
    return (f"the result is {value} for {margin_name}s of about ±1000: an exp overflowed; compute −log sigmoid(x) "
            f"as np.logaddexp(0, −x), finite for any x")


def _judge_bt(case, got, expected):
    value, problem = _judge_scalar(got, case, what_mean="the mean over the pairs",
                                   unstable=lambda v: _unstable(v, case))
    if problem:
        return problem
    tolerance = tolerance_for(case.data["r_c"].dtype)
    problem = compare(np.array(value), np.array(expected), **tolerance, what="the loss")
    return name_mistake(problem, (np.array(value),), _bt_mistakes(case.data), tolerance)


def _explain_bt_error(error):
    return hint_for(error, [
        (("could not be broadcast",), "r_chosen and r_rejected have the same shape (N,): one reward each per pair"),
        (("overflow",), "exp overflowed: compute −log sigmoid(x) as np.logaddexp(0, −x)"),
    ])


check_bradley_terry_loss = Spec(
    declared.check_bradley_terry_loss,
    cases=_bt_cases,
    reference=lambda case: ref_instruct.bradley_terry_loss(case.data["r_c"], case.data["r_r"]),
    judge=_judge_bt,
    seal=BT_SEAL,
    explain_error=_explain_bt_error,
    clauses=(
        ("the right sign: small when the chosen reward is higher", lambda c: True),
        ("the mean over the pairs (N > 1)", lambda c: len(c.data["r_c"]) > 1),
        ("N = 1", lambda c: len(c.data["r_c"]) == 1),
        ("equal rewards: log 2", lambda c: "equal" in c.tags),
        ("stable for margins of +1000", lambda c: c.data["large"] == "+"),
        ("stable for margins of -1000", lambda c: c.data["large"] == "-"),
        ("float32 inputs", lambda c: "float32" in c.tags),
    ),
)


# ============================================================================
# dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1), NumPy

DEFAULT_BETA = 0.1

DPO_SEAL = [
    (ref_instruct.dpo_loss, "plmcourse.ref.dpo_loss"),
    (nn_instruct.dpo_loss, "plmcourse.nn.dpo_loss"),
    (ref_instruct.bradley_terry_loss, "plmcourse.ref.bradley_terry_loss"),
    (nn_instruct.bradley_terry_loss, "plmcourse.nn.bradley_terry_loss"),
] + TORCH_LOSSES


def _dpo_case(seed, N, *, beta=None, keyword=False, dtype=np.float64, equal=False, large=None):
    """Log-probabilities of whole answers, -60 to -2, the policy's a little off its reference's.
    beta None: not passed (0.1). equal: the policy is its reference. large: "+", "-" or "±": margins of
    about ±1000 after beta."""
    rng = np.random.default_rng(seed)
    rc, rr = rng.uniform(-60.0, -2.0, N), rng.uniform(-60.0, -2.0, N)
    pc, pr = rc + rng.normal(0.0, 4.0, N), rr + rng.normal(0.0, 4.0, N)
    if equal:
        pc, pr = rc.copy(), rr.copy()
    b = DEFAULT_BETA if beta is None else beta
    if large:
        signs = {"+": np.ones(N), "-": -np.ones(N), "±": np.where(np.arange(N) % 2 == 0, 1.0, -1.0)}[large]
        pc = rc + signs * rng.uniform(900.0, 1100.0, N) / b  # the policy far above (or below) its reference
        pr = rr + rng.normal(0.0, 4.0, N)
    args = [a.astype(dtype) for a in (pc, pr, rc, rr)]
    kwargs = {}
    if beta is not None:
        if keyword:
            kwargs["beta"] = beta
        else:
            args.append(beta)
    label = f"seed {seed}: {N} pairs" + (", beta not passed (0.1)" if beta is None else
                                         f", beta={beta:g}" + (" (keyword)" if keyword else ""))
    label, tags = noted(label, [
        (beta is None, "", "default beta"),
        (equal, ", the policy equal to its reference (the loss is log 2)", "equal"),
        (large == "+", ", margins of about +1000 after beta", "large"),
        (large == "-", ", margins of about -1000 after beta", "large"),
        (large == "±", ", margins of about ±1000 after beta", "large"),
        (dtype == np.float32, ", float32", "float32"),
    ])
    data = {"pc": args[0], "pr": args[1], "rc": args[2], "rr": args[3], "beta": float(b), "large": large,
            "dtype": dtype}
    return Case(label, tuple(args), kwargs, tags=tags, data=data)


def _dpo_cases(hidden):
    cases = [
        _dpo_case(0, 6),
        _dpo_case(1, 4, beta=0.5),
        _dpo_case(2, 1, beta=1.0),
        _dpo_case(3, 5, beta=0.05, keyword=True),
        _dpo_case(4, 6, beta=0.3, equal=True),
        _dpo_case(5, 4, beta=1.0, large="+"),
        _dpo_case(6, 4, beta=0.5, large="-"),
        _dpo_case(7, 6, beta=2.0, large="±"),
        _dpo_case(8, 8, beta=0.2, dtype=np.float32),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _dpo_case(salt + 100, 16, beta=0.7),
            _dpo_case(salt + 101, 3),
            _dpo_case(salt + 102, 5, beta=0.01, keyword=True),
            _dpo_case(salt + 103, 1, beta=0.25, large="-"),
            _dpo_case(salt + 104, 7, beta=1.5, large="±", dtype=np.float32),
            _dpo_case(salt + 105, 4, beta=0.4, equal=True, dtype=np.float32),
            _dpo_case(salt + 106, 9, beta=3.0),
        ]
    return cases


DPO_BETA_CHOSEN = ("beta applied to the chosen answer's log-ratio only: it scales the whole margin, "
                   "beta · ((pc − rc) − (pr − rr))")
DPO_BETA_REJECTED = ("beta applied to the rejected answer's log-ratio only: it scales the whole margin, "
                     "beta · ((pc − rc) − (pr − rr))")
DPO_NO_BETA = "beta left out: the margin is beta · ((pc − rc) − (pr − rr))"
DPO_BETA_DIVIDES = "the margin divided by beta instead of multiplied by it"
DPO_BETA_OUTSIDE = ("beta outside the log-sigmoid: it scales the margin inside, −log sigmoid(beta · margin), "
                    "not the loss")
DPO_DEFAULT = "another default for beta: beta=0.1 when it is not passed"
DPO_FIXED = "beta fixed at {other:g} whatever the argument says: use the beta passed (0.1 only when none is)"
DPO_BETA_SQUARED = ("beta applied twice (to each log-ratio and again to their difference, beta² in all): it scales "
                    "the margin once, beta · ((pc − rc) − (pr − rr))")
DPO_BETA_POLICY = ("beta applied to the policy's log-probabilities only, beta · (pc − pr) − (rc − rr): it scales "
                   "the whole margin, the reference's terms too")
DPO_REF_SWAPPED = ("the reference terms swapped between the answers, or added instead of subtracted (the two "
                   "give the same number): each answer's policy log-probability is compared with the reference's "
                   "log-probability of the SAME answer, (pc − rc) − (pr − rr)")
DPO_NO_REF = ("the reference left out: DPO's reward is the policy's log-RATIO to the reference, "
              "beta · ((pc − rc) − (pr − rr)); without it nothing holds the policy near where it started")
DPO_SIGN = ("the sign of the margin flipped (chosen and rejected swapped, or the policy and the reference): "
            "the loss is −log sigmoid(beta · ((pc − rc) − (pr − rr)))")


def _dpo_mistakes(d):
    pc, pr, rc, rr = (d[k].astype(np.float64) for k in ("pc", "pr", "rc", "rr"))
    b = d["beta"]

    def loss(margin):
        return lambda: (np.array(_softplus(-margin).mean()),)

    right = b * ((pc - rc) - (pr - rr))
    yield DPO_BETA_SQUARED, loss(b * b * ((pc - rc) - (pr - rr)))
    yield DPO_BETA_POLICY, loss(b * (pc - pr) - (rc - rr))
    if d.get("default"):
        for other in (0.5, 0.2, 0.05, 0.01, 0.3, 2.0):
            yield DPO_DEFAULT + f" (the answer matches beta={other:g})", loss(other * ((pc - rc) - (pr - rr)))
    else:
        for other in (DEFAULT_BETA, 0.5):  # beta = 1 is DPO_NO_BETA below
            if other != b:
                yield DPO_FIXED.format(other=other), loss(other * ((pc - rc) - (pr - rr)))
    yield DPO_BETA_CHOSEN, loss(b * (pc - rc) - (pr - rr))
    yield DPO_BETA_REJECTED, loss((pc - rc) - b * (pr - rr))
    yield DPO_NO_BETA + (" (or its default is 1 instead of 0.1)" if d.get("default") else ""), \
        loss((pc - rc) - (pr - rr))
    yield DPO_BETA_DIVIDES, loss(((pc - rc) - (pr - rr)) / b)
    yield DPO_BETA_OUTSIDE, lambda: (np.array(b * _softplus(-((pc - rc) - (pr - rr))).mean()),)
    yield DPO_BETA_OUTSIDE, lambda: (np.array(b * _softplus(-right).mean()),)
    yield DPO_REF_SWAPPED, loss(b * ((pc - rr) - (pr - rc)))
    yield DPO_NO_REF, loss(b * (pc - pr))
    yield DPO_SIGN, loss(-right)
    yield from _logistic_mistakes(right, " ")


def _judge_dpo(case, got, expected):
    value, problem = _judge_scalar(got, case, what_mean="the mean over the pairs",
                                   unstable=lambda v: _unstable(v, case, "margin after beta"))
    if problem:
        return problem
    tolerance = tolerance_for(case.data["dtype"])
    problem = compare(np.array(value), np.array(expected), **tolerance, what="the loss")
    data = {**case.data, "default": "default beta" in case.tags}
    return name_mistake(problem, (np.array(value),), _dpo_mistakes(data), tolerance)


def _explain_dpo_error(error):
    return hint_for(error, [
        (("could not be broadcast",), "the four arguments have the same shape (N,): one log-probability per pair"),
        (("overflow",), "exp overflowed: compute −log sigmoid(x) as np.logaddexp(0, −x)"),
        (("positional argument",), "beta has a default, 0.1: dpo_loss(pc, pr, rc, rr, beta=0.1)"),
    ])


check_dpo_loss = Spec(
    declared.check_dpo_loss,
    cases=_dpo_cases,
    reference=lambda case: ref_instruct.dpo_loss(*(case.data[k] for k in ("pc", "pr", "rc", "rr", "beta"))),
    judge=_judge_dpo,
    seal=DPO_SEAL,
    explain_error=_explain_dpo_error,
    clauses=(
        ("beta not passed: 0.1", lambda c: "default beta" in c.tags),
        ("beta passed positionally", lambda c: len(c.args) == 5),
        ("beta passed by keyword", lambda c: "beta" in c.kwargs),
        ("beta varied", lambda c: c.data["beta"] not in (DEFAULT_BETA, 1.0)),
        ("beta = 1", lambda c: c.data["beta"] == 1.0),
        ("N = 1", lambda c: len(c.data["pc"]) == 1),
        ("the policy equal to its reference: log 2", lambda c: "equal" in c.tags),
        ("stable for margins of +1000", lambda c: c.data["large"] == "+"),
        ("stable for margins of -1000", lambda c: c.data["large"] == "-"),
        ("float32 inputs", lambda c: "float32" in c.tags),
    ),
)
