"""Checks for notebook 05, GPT: the causal LM loss and the decoding filters top-k and top-p.

    check_causal_lm_loss   causal_lm_loss(logits, tokens, ignore_index=-100), PyTorch: the shift is inside
    check_top_k_filter     top_k_filter(logits, k), PyTorch
    check_top_p_filter     top_p_filter(logits, p), PyTorch

The loss is compared with torch.nn.functional.cross_entropy on the shifted targets,
gradients included, by the loss machinery of `plmcourse.judging.bert` (notebook 04's
mlm_loss is checked the same way); the filters with `plmcourse.ref`. Every failure
names the rule that was broken.
"""

import numpy as np
import torch

from plmcourse import nn as course_nn
from plmcourse import ref
from plmcourse.grading import gpt as declared
from plmcourse.judging.bert import _loss_case, loss_check_parts
from plmcourse.judging.core import (
    hidden_salt,
    Spec,
    Case,
    compare,
    expect_array,
    first_match,
    to_numpy,
    explain_shape_error,
)

__all__ = [
    "check_causal_lm_loss",
    "check_top_k_filter",
    "check_top_p_filter",
]


# ============================================================================
# causal_lm_loss(logits, tokens, ignore_index=-100), PyTorch


def _causal_cases(hidden, device):
    cases = [
        _loss_case(20, (2, 6, 11), device, causal=True, ignored=0.0),
        _loss_case(21, (3, 5, 7), device, causal=True, ignored=0.0),
        _loss_case(22, (2, 7, 9), device, causal=True, padded=True),
        _loss_case(23, (2, 5, 8), device, causal=True, ignored=0.0, dtype=torch.float32),
        _loss_case(24, (2, 6, 6), device, causal=True, ignored=0.0, scale=1000.0),
        _loss_case(25, (2, 7, 9), device, causal=True, ignored=0.3, ignore_index=0),
        _loss_case(26, (8, 10), device, causal=True, ignored=0.0),  # one sequence: no batch axis
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _loss_case(salt + 120, (4, 9, 13), device, causal=True, padded=True),
            _loss_case(salt + 121, (8, 10), device, causal=True, ignored=0.0),
            _loss_case(salt + 122, (2, 2, 5, 10), device, causal=True, ignored=0.0, dtype=torch.float32),
            _loss_case(salt + 123, (3, 7, 7), device, causal=True, ignored=0.0),
            _loss_case(salt + 124, (5, 2, 4), device, causal=True, ignored=0.0),
            _loss_case(salt + 125, (3, 6, 7), device, causal=True, padded=True, ignore_index=-1),
        ]
    return cases


check_causal_lm_loss = Spec(
    declared.check_causal_lm_loss,
    cases=_causal_cases,
    **loss_check_parts("causal_lm_loss"),
    clauses=(
        ("logits (..., T, V), tokens (..., T): any leading dimensions", lambda c: c.args[0].dim() != 3),
        ("the logits at position t scored against the token at t + 1", lambda c: True),
        ("the mean over the targets that are not ignore_index, -100 when it is not passed",
         lambda c: "ignore_index" not in c.kwargs and bool((c.args[1][..., 1:] == -100).any())),
        ("ignore_index passed", lambda c: "ignore_index" in c.kwargs),
        ("stable for large logits", lambda c: "large logits" in c.tags),
        ("a 0-d tensor that gradients flow through", lambda c: c.grad_leaves == (0,)),
    ),
)


# ============================================================================
# top_k_filter(logits, k) and top_p_filter(logits, p), PyTorch

TOP_K_SEAL = [(ref.top_k_filter, "plmcourse.ref.top_k_filter"), (course_nn.top_k_filter, "plmcourse.nn.top_k_filter"),
              (course_nn.sample_next, "plmcourse.nn.sample_next")]
TOP_P_SEAL = [(ref.top_p_filter, "plmcourse.ref.top_p_filter"), (course_nn.top_p_filter, "plmcourse.nn.top_p_filter"),
              (course_nn.sample_next, "plmcourse.nn.sample_next")]


def _distinct_logits(rng, shape, scale):
    """Logits whose values in each row are all different (so the top k are unambiguous)."""
    V = shape[-1]
    base = np.argsort(rng.random(shape), axis=-1).astype(np.float64)  # a permutation of 0..V-1 per row
    return (base + 0.5 * rng.random(shape)) * (scale / V) - scale / 2


def _filter_case(seed, shape, device, k=None, p=None, dtype=torch.float64, scale=6.0, neg_inf=False):
    rng = np.random.default_rng(seed)

    def draw():
        logits = _distinct_logits(rng, shape, scale)
        if neg_inf:
            logits[..., 0] = -np.inf
        return logits

    logits = draw()
    if p is not None:  # no prefix mass may lie within 1e-3 of p: the kept set is then unambiguous
        while not _clear_of(logits, p):
            logits = draw()
    label = f"seed {seed}: logits of shape {shape}, {str(dtype).replace('torch.', '')}, " + \
        (f"k={k}" if p is None else f"p={p}") + (", column 0 already -inf" if neg_inf else "")
    logits_t = torch.tensor(logits, dtype=dtype, device=device)
    return Case(label, (logits_t, k if p is None else p),
                data={"logits": to_numpy(logits_t).astype(np.float64), "k": k, "p": p, "dtype": dtype})


def _clear_of(logits, p):
    probs = ref.softmax(logits, axis=-1)
    sorted_probs = -np.sort(-probs, axis=-1)
    before = np.cumsum(sorted_probs, axis=-1) - sorted_probs
    return bool(np.all(np.abs(before - p) > 1e-3)) if p < 1 else True


def _top_k_cases(hidden, device):
    cases = [
        _filter_case(30, (5, 10), device, k=3),
        _filter_case(31, (2, 8), device, k=1),
        _filter_case(32, (2, 6), device, k=6),
        _filter_case(33, (2, 7), device, k=0),
        _filter_case(34, (4, 12), device, k=5, dtype=torch.float32),
        _filter_case(35, (3, 9), device, k=None),
        _filter_case(36, (2, 3, 12), device, k=4),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _filter_case(salt + 130, (2, 3, 12), device, k=4),
            _filter_case(salt + 131, (5, 50), device, k=7, scale=200.0),
            _filter_case(salt + 132, (1, 9), device, k=8),
            _filter_case(salt + 133, (3, 10), device, k=2, neg_inf=True),
            _filter_case(salt + 134, (2, 5), device, k=12),
        ]
    return cases


def _top_p_cases(hidden, device):
    cases = [
        _filter_case(40, (3, 10), device, p=0.5),
        _filter_case(41, (3, 10), device, p=0.9),
        _filter_case(42, (2, 8), device, p=0.05),
        _filter_case(43, (2, 8), device, p=1.0),
        _filter_case(44, (4, 12), device, p=0.7, dtype=torch.float32),
        # p = 1 with a tail so unlikely (e^-100) that the running sum reaches 1.0 exactly before it:
        # "mass before < p" alone would drop the tail, but p >= 1 keeps everything.
        _filter_case(45, (2, 12), device, p=1.0, scale=120.0),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _filter_case(salt + 140, (2, 3, 12), device, p=0.6),
            _filter_case(salt + 141, (5, 40), device, p=0.95, scale=10.0),
            _filter_case(salt + 142, (3, 10), device, p=0.8, neg_inf=True),
            _filter_case(salt + 143, (2, 30), device, p=0.3, scale=30.0),
            _filter_case(salt + 144, (1, 6), device, p=0.999),
        ]
    return cases


def _top_k_mistakes(logits, k):
    """(description, compute) with compute() -> (bool array: True where the answer has -inf,)."""
    V = logits.shape[-1]
    order = np.argsort(-logits, axis=-1, kind="stable")

    def removed(indices):
        kept = np.zeros(logits.shape, dtype=bool)
        np.put_along_axis(kept, indices, True, axis=-1)
        return (~kept | np.isneginf(logits),)

    if 0 < k < V:
        yield "the k SMALLEST logits kept instead of the k largest", lambda: removed(order[..., V - k:])
        yield "k + 1 logits kept (> vs >= at the k-th value?)", lambda: removed(order[..., :k + 1])
        if k > 1:
            yield "k - 1 logits kept", lambda: removed(order[..., :k - 1])
    if logits.ndim >= 2 and 0 < k < logits.shape[0]:
        yield ("the top k taken along the first axis (dim=0); the vocabulary is the LAST axis",
               lambda: (np.argsort(np.argsort(-logits, axis=0, kind="stable"), axis=0) >= k,))


def _top_p_mistakes(logits, p):
    """(description, compute) with compute() -> (bool array: True where the answer has -inf,)."""
    probs = ref.softmax(logits, axis=-1)
    order = np.argsort(-probs, axis=-1, kind="stable")
    sorted_probs = np.take_along_axis(probs, order, axis=-1)
    cumulative = np.cumsum(sorted_probs, axis=-1)

    def removed(keep_sorted, unsort=True):
        if not unsort:  # the mask made in sorted order and applied to the unsorted logits
            return (~keep_sorted,)
        kept = np.zeros(logits.shape, dtype=bool)
        np.put_along_axis(kept, order, keep_sorted, axis=-1)
        return (~kept,)

    yield ("the token that takes the mass past p removed too (cumulative <= p); keep a token while the "
           "mass BEFORE it is below p, so that the kept mass reaches p", lambda: removed(cumulative <= p))
    yield ("the mask computed in sorted order but applied to the logits in their original order; map it "
           "back to the original positions (e.g. with scatter)",
           lambda: removed(cumulative - sorted_probs < p, unsort=False))
    ascending = np.argsort(probs, axis=-1, kind="stable")
    asc_sorted = np.take_along_axis(probs, ascending, axis=-1)

    def ascending_removed():
        kept = np.zeros(logits.shape, dtype=bool)
        np.put_along_axis(kept, ascending, np.cumsum(asc_sorted, axis=-1) - asc_sorted < p, axis=-1)
        return (~kept,)

    yield "probabilities sorted in increasing order; the nucleus starts from the MOST likely token", ascending_removed
    yield ("the cumulative sum taken over the unsorted probabilities; sort them in decreasing order first",
           lambda: (np.cumsum(probs, axis=-1) - probs >= p,))


def _judge_filter(case, got, expected, mistakes):
    problem = expect_array(got, "the result", kind="torch")
    if problem:
        return problem
    logits_t = case.args[0]
    if tuple(got.shape) != tuple(logits_t.shape):
        return (f"the result has shape {tuple(got.shape)}, expected {tuple(logits_t.shape)} (the shape of "
                f"the logits: removed entries are set to -inf, not dropped)")
    if got.dtype == torch.bool:
        return ("the result is a boolean mask; return the logits with the removed entries set to "
                "float('-inf')")
    if not got.is_floating_point():
        return f"the result has dtype {got.dtype}, expected the logits' floating-point dtype"
    got_np = to_numpy(got).astype(np.float64)
    logits = case.data["logits"]
    if np.any(np.isnan(got_np)):
        return "the result contains NaN"
    removed = ~np.isneginf(logits) & np.isneginf(expected)
    with np.errstate(invalid="ignore"):
        kept_ok = np.isneginf(got_np) | (got_np == logits) | (np.abs(got_np - logits) <= 1e-6 * (1 + np.abs(logits)))
    if not np.isneginf(got_np).any() and removed.any():
        finite_low = got_np[removed]
        rows_sum_to_one = np.all(np.abs(got_np.sum(axis=-1) - 1.0) < 1e-5)
        if rows_sum_to_one and np.all((got_np >= 0) & (got_np <= 1)):
            return ("the result looks like probabilities; return the filtered logits, not their softmax "
                    "(some kept entries differ from the input logits)")
        if np.all(finite_low == 0):
            return ("the removed entries are 0, but a logit of 0 is still a likely token; set them to "
                    "float('-inf') so that the softmax gives them probability exactly 0")
        if np.all(finite_low < -1e8):
            return ("the removed entries are very negative numbers; set them to float('-inf') exactly "
                    "(the course's convention)")
    if not np.all(kept_ok):
        return ("some kept entries differ from the input logits; keep the surviving logits unchanged (no "
                "softmax, no renormalisation, no division by a temperature)")
    problem = compare(np.isneginf(got_np), np.isneginf(expected), atol=0, rtol=0,
                      what="the set of removed entries (True = -inf)")
    if problem is None:
        return None
    if not removed.any():  # this case removes nothing: k of None, 0 or >= V, or p >= 1
        d = case.data
        if d["p"] is None:
            return (f"{problem}, but with k={d['k']} nothing is removed: k of None or 0, or at least the "
                    f"vocabulary size, keeps every entry")
        return (f"{problem}, but with p={d['p']} nothing is removed: p >= 1 keeps every entry (the running sum "
                f"of probabilities can reach 1.0 by rounding before the last tokens, so treat p >= 1 on its own)")
    if np.all(np.isneginf(got_np)):
        return "every entry is -inf; the most likely token must always be kept"
    mistake = first_match((np.isneginf(got_np),), mistakes, atol=0, rtol=0)
    if mistake is None:
        kept, want = (~np.isneginf(got_np)).sum(-1), (~np.isneginf(expected)).sum(-1)
        detail = f" (kept per row: {kept.reshape(-1).tolist()}, expected {want.reshape(-1).tolist()})"
        return problem + detail
    return f"{problem}; it matches {mistake}"


def _filter_check_parts(reference_filter, param, mistakes):
    """The reference and the judge of check_top_k_filter (param "k") and check_top_p_filter ("p"):
    reference_filter(logits, k or p) is the course's filter, mistakes(logits, k or p) the known wrong ones."""
    def judge(case, got, expected):
        return _judge_filter(case, got, expected, mistakes(case.data["logits"], case.data[param]))
    return {"reference": lambda case: reference_filter(case.data["logits"], case.data[param]), "judge": judge}


def _explain_top_k_error(error):
    if "NoneType" in str(error):  # logits is a tensor: only k can be None
        return "k may be None, which keeps every entry as k=0 does; test for it before using k as a number"
    return explain_shape_error(error)


check_top_k_filter = Spec(
    declared.check_top_k_filter,
    cases=_top_k_cases,
    **_filter_check_parts(ref.top_k_filter, "k", _top_k_mistakes),
    seal=TOP_K_SEAL,
    explain_error=_explain_top_k_error,
    clauses=(
        ("keep the k largest logits along the last axis, the others -inf",
         lambda c: bool(c.data["k"]) and c.data["k"] < c.data["logits"].shape[-1]),
        ("one distribution per row, any leading dimensions", lambda c: c.data["logits"].ndim >= 3),
        ("k None keeps everything", lambda c: c.data["k"] is None),
        ("k 0 keeps everything", lambda c: c.data["k"] == 0),
        ("k at least the vocabulary size keeps everything",
         lambda c: bool(c.data["k"]) and c.data["k"] >= c.data["logits"].shape[-1]),
        ("the kept logits are unchanged", lambda c: True),
    ),
)


check_top_p_filter = Spec(
    declared.check_top_p_filter,
    cases=_top_p_cases,
    **_filter_check_parts(ref.top_p_filter, "p", _top_p_mistakes),
    seal=TOP_P_SEAL,
    clauses=(
        ("keep the smallest set of most likely tokens whose probability is at least p", lambda c: c.data["p"] < 1),
        ("the most likely token is always kept, even when its probability alone is above p",
         lambda c: bool((ref.softmax(c.data["logits"], axis=-1).max(axis=-1) > c.data["p"]).any())),
        ("p >= 1 keeps everything", lambda c: c.data["p"] >= 1),
        ("the kept logits are unchanged", lambda c: True),
    ),
)
