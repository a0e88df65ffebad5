"""Right and wrong answers to the exercises of notebook 05 (GPT), as data for tests/test_grading_gpt.py.

For each check: CORRECT, a list of (name, function) that must pass, written in
different styles; and MISTAKES, a list of (name, function, fragment): the check must
fail with a message containing `fragment`. Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse import ref

from mistake_catalogue.bert_mistakes import ce_boolean_index, ce_log_softmax, ce_one_hot, mlm_loss_sum
from mistake_catalogue.fresh_round3 import causal_lm_per_sequence_mean


# ============================================================================
# causal_lm_loss(logits, tokens, ignore_index=-100), on the cross-entropy styles of bert_mistakes.py


def causal_slices(logits, tokens, ignore_index=-100):
    return ce_log_softmax(logits[..., :-1, :], tokens[..., 1:], ignore_index)


def causal_boolean(logits, tokens, ignore_index=-100):
    return ce_boolean_index(logits[..., :-1, :], tokens[..., 1:], ignore_index)


def causal_narrow(logits, tokens, ignore_index=-100):
    T = tokens.shape[-1]
    return ce_one_hot(logits.narrow(-2, 0, T - 1), tokens.narrow(-1, 1, T - 1), ignore_index)


def causal_no_shift(logits, tokens, ignore_index=-100):
    return ce_log_softmax(logits, tokens, ignore_index)


def causal_wrong_way(logits, tokens, ignore_index=-100):
    return ce_log_softmax(logits[..., 1:, :], tokens[..., :-1], ignore_index)


def causal_batch_axis(logits, tokens, ignore_index=-100):
    return ce_log_softmax(logits[:-1], tokens[1:], ignore_index)


def causal_no_ignore(logits, tokens, ignore_index=-100):
    picked = torch.log_softmax(logits[..., :-1, :], -1).gather(-1, tokens[..., 1:, None])[..., 0]
    return -picked.mean()


def causal_view(logits, tokens, ignore_index=-100):
    x = logits[..., :-1, :].transpose(0, 1)
    y = tokens[..., 1:].transpose(0, 1)
    return ce_log_softmax(x.view(-1, logits.shape[-1]), y.view(-1), ignore_index)


def causal_hard_coded_ignore(logits, tokens, ignore_index=-100):
    return ce_log_softmax(logits[..., :-1, :], tokens[..., 1:], -100)  # the argument never used


def causal_F(logits, tokens, ignore_index=-100):
    V = logits.shape[-1]
    return F.cross_entropy(logits[..., :-1, :].reshape(-1, V), tokens[..., 1:].reshape(-1))


def causal_ref(logits, tokens, ignore_index=-100):
    return torch.tensor(ref.causal_lm_loss(logits.detach().cpu().numpy(), tokens.cpu().numpy()))


CAUSAL_CORRECT = [
    ("slices + log_softmax", causal_slices),
    ("boolean indexing", causal_boolean),
    ("narrow + one-hot", causal_narrow),
]

CAUSAL_MISTAKES = [
    ("mean of the per-sequence means", causal_lm_per_sequence_mean, "the mean of each sequence's mean"),
    ("no shift", causal_no_shift, "no shift"),
    ("shift the wrong way", causal_wrong_way, "a shift the wrong way round"),
    ("shift along the batch axis", causal_batch_axis, "a shift along the batch axis"),
    ("padding not ignored", causal_no_ignore, "a position marked as ignored (-100, or the ignore_index passed)"),
    ("-100 written in instead of ignore_index", causal_hard_coded_ignore, "the ignore_index argument was not used"),
    ("view after slicing", causal_view, "use .reshape instead of .view"),
    ("F.cross_entropy", causal_F, "calls torch.nn.functional.cross_entropy; write it yourself"),
    ("plmcourse.ref.causal_lm_loss", causal_ref, "calls plmcourse.ref.causal_lm_loss; write it yourself"),
    ("sum", lambda logits, tokens, ignore_index=-100: mlm_loss_sum(logits[..., :-1, :], tokens[..., 1:]),
     "a sum over the positions"),
]


# ============================================================================
# top_k_filter(logits, k), top_p_filter(logits, p)


def top_k_topk(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits
    values, indices = torch.topk(logits, k, dim=-1)
    return torch.full_like(logits, float("-inf")).scatter(-1, indices, values)


def top_k_threshold(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.sort(logits, dim=-1, descending=True).values[..., k - 1:k]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_k_loops(logits, k):
    out = logits.clone()
    if not k or k >= logits.shape[-1]:
        return out
    flat = out.reshape(-1, logits.shape[-1])
    for row in flat:
        order = sorted(range(len(row)), key=lambda i: -float(row[i]))
        for i in order[k:]:
            row[i] = float("-inf")
    return flat.reshape(logits.shape)


def top_k_zero_removes_all(logits, k):
    if k is None or k >= logits.shape[-1]:
        return logits
    if k == 0:
        return torch.full_like(logits, float("-inf"))  # "keep 0": but k = 0 means no filtering
    values, indices = torch.topk(logits, k, dim=-1)
    return torch.full_like(logits, float("-inf")).scatter(-1, indices, values)


def top_k_none_unhandled(logits, k):
    if k == 0 or k >= logits.shape[-1]:  # None >= V raises TypeError
        return logits.clone()
    return top_k_topk(logits, k)


def top_k_smallest(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits
    values, indices = torch.topk(logits, k, dim=-1, largest=False)
    return torch.full_like(logits, float("-inf")).scatter(-1, indices, values)


def top_k_plus_one(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits
    kth = torch.sort(logits, dim=-1, descending=True).values[..., k:k + 1]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_k_zeros(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits
    values, indices = torch.topk(logits, k, dim=-1)
    return torch.zeros_like(logits).scatter(-1, indices, values)


def top_k_large_negative(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits
    values, indices = torch.topk(logits, k, dim=-1)
    return torch.full_like(logits, -1e9).scatter(-1, indices, values)


def top_k_probabilities(logits, k):
    return torch.softmax(top_k_topk(logits, k), dim=-1)


def top_k_in_place(logits, k):
    if k and k < logits.shape[-1]:
        kth = torch.sort(logits, dim=-1, descending=True).values[..., k - 1:k]
        logits[logits < kth] = float("-inf")
    return logits


def top_k_dim0(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits
    kth = torch.sort(logits, dim=0, descending=True).values[k - 1:k] if k <= logits.shape[0] else None
    return logits if kth is None else logits.masked_fill(logits < kth, float("-inf"))


def top_k_mask(logits, k):
    return top_k_topk(logits, k) > float("-inf")


def top_k_course(logits, k):
    return pnn.top_k_filter(logits, k)


TOP_K_CORRECT = [("topk + scatter", top_k_topk), ("k-th value threshold", top_k_threshold),
                 ("loops", top_k_loops)]

TOP_K_MISTAKES = [
    ("smallest k", top_k_smallest, "the k SMALLEST logits kept"),
    ("k = 0 removes everything", top_k_zero_removes_all, "with k=0 nothing is removed"),
    ("k = None not handled", top_k_none_unhandled, "k may be None, which keeps every entry"),
    ("k + 1 kept", top_k_plus_one, "k + 1 logits kept"),
    ("zeros instead of -inf", top_k_zeros, "the removed entries are 0"),
    ("-1e9 instead of -inf", top_k_large_negative, "set them to float('-inf') exactly"),
    ("probabilities", top_k_probabilities, "some kept entries differ from the input logits"),
    ("in place", top_k_in_place, "changed its input logits in place"),
    ("along dim 0", top_k_dim0, "along the first axis"),
    ("a boolean mask", top_k_mask, "the result is a boolean mask"),
    ("plmcourse.nn.top_k_filter", top_k_course, "calls plmcourse.nn.top_k_filter; write it yourself"),
]


def top_p_sort_scatter(logits, p):
    if p >= 1:
        return logits
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    keep_sorted = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def top_p_no_special_case(logits, p):
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    keep_sorted = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < p  # at p = 1 a rounded 1.0 drops the tail
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def top_p_shift_right(logits, p):
    """The Hugging Face way: remove where cumulative > p, shifted right by one so the crossing token stays."""
    if p >= 1:
        return logits
    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
    cumulative = torch.cumsum(torch.softmax(sorted_logits, dim=-1), dim=-1)
    remove_sorted = cumulative > p
    remove_sorted[..., 1:] = remove_sorted[..., :-1].clone()
    remove_sorted[..., 0] = False
    remove = remove_sorted.scatter(-1, order, remove_sorted)
    return logits.masked_fill(remove, float("-inf"))


def top_p_loops(logits, p):
    out = logits.clone()
    if p >= 1:
        return out
    flat = out.reshape(-1, logits.shape[-1])
    for row in flat:
        probs = torch.softmax(row, dim=0).tolist()
        order = sorted(range(len(probs)), key=lambda i: -probs[i])
        mass = 0.0
        for i in order:
            if mass >= p:
                row[i] = float("-inf")
            mass += probs[i]
    return flat.reshape(logits.shape)


def top_p_excludes_crossing(logits, p):
    if p >= 1:
        return logits
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    keep_sorted = torch.cumsum(sorted_probs, dim=-1) <= p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def top_p_no_unsort(logits, p):
    if p >= 1:
        return logits
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, _ = torch.sort(probs, dim=-1, descending=True)
    keep_sorted = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < p
    return logits.masked_fill(~keep_sorted, float("-inf"))


def top_p_unsorted(logits, p):
    if p >= 1:
        return logits
    probs = torch.softmax(logits, dim=-1)
    return logits.masked_fill(torch.cumsum(probs, -1) - probs >= p, float("-inf"))


def top_p_ascending(logits, p):
    if p >= 1:
        return logits
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1)
    keep_sorted = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def top_p_course(logits, p):
    return pnn.top_p_filter(logits, p)


TOP_P_CORRECT = [("sort + scatter", top_p_sort_scatter), ("Hugging Face style", top_p_shift_right),
                 ("loops", top_p_loops)]

TOP_P_MISTAKES = [
    ("crossing token removed", top_p_excludes_crossing, "the token that takes the mass past p removed too"),
    ("p >= 1 not treated on its own", top_p_no_special_case, "p >= 1 keeps every entry"),
    ("not mapped back", top_p_no_unsort, "map it back to the original positions"),
    ("no sort", top_p_unsorted, "sort them in decreasing order first"),
    ("ascending", top_p_ascending, "sorted in increasing order"),
    ("probabilities", lambda logits, p: torch.softmax(top_p_sort_scatter(logits, p), -1),
     "some kept entries differ from the input logits"),
    ("plmcourse.nn.top_p_filter", top_p_course, "calls plmcourse.nn.top_p_filter; write it yourself"),
]


CATALOGUE = {
    "check_causal_lm_loss": (CAUSAL_CORRECT, CAUSAL_MISTAKES),
    "check_top_k_filter": (TOP_K_CORRECT, TOP_K_MISTAKES),
    "check_top_p_filter": (TOP_P_CORRECT, TOP_P_MISTAKES),
}
