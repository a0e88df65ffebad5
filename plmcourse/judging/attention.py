"""Checks for the attention notebook: softmax, scaled dot-product attention,
the causal mask and multi-head attention.

Each check runs the student's function on seeded cases (hidden=True adds more,
with other seeds and shapes), compares with `plmcourse.ref` (or, for multi-head
attention, with torch.nn.MultiheadAttention, gradients included), and on a wrong
answer says which known mistake the answer matches, when it matches one.
"""

import math
import sys

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import nn as course_nn
from plmcourse import ref
from plmcourse.grading import attention as declared
from plmcourse.grading.attention import WEIGHT_NAMES
from plmcourse.judging.core import (
    BOOLEAN_INDEX_HINT,
    calls_own_function,
    hint_for,
    hidden_salt,
    Spec,
    F32,
    F64,
    Case,
    close,
    compare,
    expect_array_pair, expect_float_array, expect_float_pair,
    judge_bool_mask,
    name_mistake,
    noted,
    logits_case,
    to_numpy,
    explain_shape_error,
)
from plmcourse.judging.word_vectors import (
    AXIS_CLAUSES, COURSE_SOFTMAX, TORCH_LOG_SOFTMAX, TORCH_SOFTMAX, axis_cases, axis_check_parts, hidden_axis_cases,
)

__all__ = [
    "check_softmax",
    "check_scaled_dot_product_attention",
    "check_causal_mask",
    "check_multi_head_attention",
]


def _tolerance(*arrays):
    return F32 if any(a.dtype == np.float32 for a in arrays) else F64


def _shape(a):
    return str(tuple(a.shape))


def _rows_without_keys(mask, scores_shape):
    """Bool (..., L_q): True for a query that may attend to no key."""
    if mask is None:
        return np.zeros(scores_shape[:-1], dtype=bool)
    return ~np.broadcast_to(mask, scores_shape).any(axis=-1)


def _nonfinite_only_in(rows, *arrays):
    """True if the arrays hold NaN or inf, all of it in the given (..., L_q) rows."""
    bad = [~np.isfinite(a).all(axis=-1) for a in arrays]  # each (..., L_q)
    return any(b.any() for b in bad) and not any((b & ~rows).any() for b in bad)


# ----------------------------------------------------------------------------
# softmax(x, axis=-1), NumPy

# What a NumPy softmax must not call: the course's versions and library softmaxes.
SOFTMAX_SEAL = COURSE_SOFTMAX + TORCH_SOFTMAX + [
    (torch.special.softmax, "torch.special.softmax"),
    (torch.nn.Softmax, "torch.nn.Softmax"),
] + TORCH_LOG_SOFTMAX


# Library softmax and attention under any torch name (torch._softmax, torch.special.softmax,
# torch._scaled_dot_product_attention_math...): reported for a person to look at when graded.
LIBRARY_SOFTMAX = ("softmax", "_softmax", "log_softmax", "_log_softmax", "special_softmax", "special_log_softmax")
LIBRARY_ATTENTION = ("scaled_dot_product", "_scaled_dot_product", "_native_multi_head_attention", "_fused_sdp",
                     "multi_head_attention_forward")


def _softmax_seal():
    scipy_special = sys.modules.get("scipy.special")  # sealed only if the notebook loaded it
    extra = [(getattr(scipy_special, "softmax", None), "scipy.special.softmax")] if scipy_special else []
    return SOFTMAX_SEAL + extra


def _softmax_cases(hidden):
    cases = axis_cases() + [logits_case(7, (3, 4), some_neg_inf=True), logits_case(8, (3, 4), empty=True)]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [logits_case(salt + 100, (9,))] + hidden_axis_cases(salt) + [
            logits_case(salt + 106, (5, 4), axis=0, empty=True),
            logits_case(salt + 107, (2, 3, 5), scale=1e4, some_neg_inf=True),
        ]
    return cases


def _softmax_mistakes(x, axis):
    x = x.astype(np.float64)
    axis = axis % x.ndim
    for other in range(x.ndim):
        if other != axis:
            yield (f"a softmax along axis {other}, but this case asks for axis {axis}",
                   lambda other=other: (ref.softmax(x, axis=other),))
    for other in range(x.ndim):
        if other != axis:
            yield (f"the max taken along axis {other} but the sum along axis {axis}: subtract the max along "
                   f"the axis you normalise over (np.max(x, axis=axis, keepdims=True))",
                   lambda other=other: (_softmax_shifted_by(x, axis, np.max(x, axis=other, keepdims=True)),))
    empty = np.isneginf(x).all(axis=axis, keepdims=True)
    if empty.any():
        yield ("-inf replaced by a finite number such as -1e9: a slice that is entirely -inf then comes out "
               "uniform (1/n each) instead of zeros; keep -inf (exp(-inf) is 0) and return zeros for a slice "
               "whose entries are all -inf", lambda: (np.where(empty, 1.0 / x.shape[axis], ref.softmax(x, axis=axis)),))
    with np.errstate(all="ignore"):
        shifted = np.exp(x - np.max(x))  # one max for the whole array: far-below slices underflow to 0
        total = shifted.sum(axis=axis, keepdims=True)
    yield ("the max of the whole array subtracted instead of each slice's own max (along the axis, "
           "keepdims=True): a slice far below the overall max underflows to all zeros",
           lambda: (np.where(total > 0, shifted / np.where(total > 0, total, 1), 0.0),))
    yield ("the max of the whole array subtracted instead of each slice's own max (along the axis, "
           "keepdims=True): a slice far below the overall max underflows to 0 / 0",
           lambda: (shifted / total,))
    yield ("a softmax normalised over the whole array instead of along one axis",
           lambda: (ref.softmax(x.reshape(-1)).reshape(x.shape),))
    yield ("exp(x - max) without dividing by the sum",
           lambda: (np.exp(x - x.max(axis=axis, keepdims=True)),))


def _softmax_shifted_by(x, axis, m):
    """exp(x - m) normalised along axis, zeros for a slice that sums to 0 (m: any broadcastable shift)."""
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def _judge_softmax(case, got, expected):
    problem = expect_float_array(got, "the result")
    if problem:
        return problem
    if got.shape != expected.shape:
        return (f"the result has shape {_shape(got)}, expected {_shape(expected)} (the shape of x; "
                f"keepdims=True keeps the max and the sum broadcastable)")
    x, axis = case.data["x"], case.data["axis"]
    if not np.isfinite(got).all():
        if "large logits" in case.tags:
            return ("the result contains NaN or inf for logits of about 1e4; subtract the max "
                    "along the axis (keepdims=True) before exponentiating")
        slices = np.moveaxis(x, axis, -1)  # (..., n): one softmax per slice
        empty = np.isneginf(slices).all(axis=-1)
        if "one slice entirely -inf" in case.tags and _nonfinite_only_in(empty, np.moveaxis(got, axis, -1)):
            return ("a slice that is entirely -inf gave NaN, it must give zeros "
                    "(where the max is -inf, subtract 0 instead)")
    tolerance = _tolerance(x)
    problem = compare(got, expected, **tolerance, what="the result")
    return problem and name_mistake(problem, (got,), _softmax_mistakes(x, axis), tolerance)


check_softmax = Spec(
    declared.check_softmax,
    **axis_check_parts(ref.softmax),
    cases=_softmax_cases,
    judge=_judge_softmax,
    seal=_softmax_seal,
    flag_library=LIBRARY_SOFTMAX,
    clauses=AXIS_CLAUSES + (
        ("stable for scores of size 1e4: subtract the maximum along axis first", lambda c: "large logits" in c.tags),
        ("-inf entries get weight 0", lambda c: "some entries -inf" in c.tags),
        ("zeros, not nan, for a slice that is entirely -inf", lambda c: "one slice entirely -inf" in c.tags),
    ),
)


# ----------------------------------------------------------------------------
# scaled_dot_product_attention(q, k, v, mask=None) -> (output, weights), NumPy

FUSED_ATTENTION = "torch's fused attention (torch.nn.functional.scaled_dot_product_attention)"

SDPA_SEAL = [
    (ref.scaled_dot_product_attention, "plmcourse.ref.scaled_dot_product_attention"),
    (ref.multi_head_attention, "plmcourse.ref.multi_head_attention"),
    (course_nn.scaled_dot_product_attention, "plmcourse.nn.scaled_dot_product_attention"),
    (F.scaled_dot_product_attention, FUSED_ATTENTION),
]


def _random_mask(rng, shape, empty_rows=()):
    """Bool `shape`, about 60% True, every query row with at least one True except `empty_rows`."""
    mask = rng.random(shape) < 0.6
    one_per_row = rng.integers(shape[-1], size=shape[:-1])[..., None] == np.arange(shape[-1])
    mask[one_per_row] = True
    for row in empty_rows:
        mask[row] = False
    return mask


def _sdpa_case(seed, q_shape, k_shape, d_v, mask=None, scale=1.0, dtype=np.float64, zero_query=False):
    """q, k, v ~ N(0, 1) (q and k times `scale`); mask: None, "causal", a list of lengths
    (a padding mask), or a function rng -> mask. zero_query: the first query is all zeros, so its scores
    are exactly 0 (and it attends evenly to the keys it may see): a score of 0 is not a masked one."""
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal(q_shape) * scale).astype(dtype)
    if zero_query:
        q[..., 0, :] = 0.0
    k = (rng.standard_normal(k_shape) * scale).astype(dtype)
    v = rng.standard_normal((*k_shape[:-1], d_v)).astype(dtype)
    label = f"seed {seed}: q {q_shape}, k {k_shape}, v {v.shape}"
    if mask == "causal":
        mask = ref.causal_mask(q_shape[-2])
        label += f", causal mask {mask.shape}"
    elif isinstance(mask, list):
        lengths = mask
        mask = ref.padding_mask(lengths, k_shape[-2])
        label += f", padding mask {mask.shape} for lengths {lengths}"
    elif mask is not None:
        mask = mask(rng)
        label += f", mask {mask.shape}"
    scores_shape = np.broadcast_shapes(q_shape[:-2], k_shape[:-2]) + (q_shape[-2], k_shape[-2])
    empty = _rows_without_keys(mask, scores_shape)  # (..., L_q)
    label, tags = noted(label, [(zero_query, ", the first query all zeros (scores of exactly 0)", "zero query"),
                                (empty.any(), " with a query that may attend to no key", "empty row"),
                                (scale >= 100, ", scores of about 1e4", "large logits"),
                                (dtype == np.float32, ", float32", None)])
    args = (q, k, v) if mask is None else (q, k, v, mask)
    return Case(label, args, tags=tags,
                data={"q": q, "k": k, "v": v, "mask": mask, "empty": empty})


def _sdpa_cases(hidden):
    cases = [
        _sdpa_case(10, (4, 8), (4, 8), 8),
        _sdpa_case(11, (2, 5, 8), (2, 5, 8), 8),
        _sdpa_case(12, (2, 3, 4), (2, 6, 4), 5),
        _sdpa_case(13, (2, 3, 4, 8), (2, 3, 4, 8), 8, mask="causal"),
        _sdpa_case(14, (2, 2, 5, 4), (2, 2, 6, 4), 3, mask=[6, 3]),
        _sdpa_case(15, (2, 2, 4, 4), (2, 2, 5, 4), 6,
                   mask=lambda rng: _random_mask(rng, (2, 2, 4, 5), empty_rows=[(1, 0, 2)])),
        _sdpa_case(16, (2, 3, 4), (2, 5, 4), 4, scale=100.0),
        _sdpa_case(17, (2, 4, 8), (2, 6, 8), 8, dtype=np.float32),
        _sdpa_case(18, (2, 2, 3, 4), (2, 2, 5, 4), 4, mask=[5, 3], zero_query=True),
        # A mask with scores of about 1e4: a masked score can swamp the allowed ones if masked after the softmax.
        _sdpa_case(19, (2, 5, 4), (2, 5, 4), 4, mask="causal", scale=100.0),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _sdpa_case(salt + 110, (7, 16), (9, 16), 3),
            _sdpa_case(salt + 111, (2, 4, 6, 8), (2, 4, 6, 8), 8, mask="causal"),
            _sdpa_case(salt + 112, (3, 2, 4, 8), (3, 2, 7, 8), 5, mask=[1, 7, 4]),
            _sdpa_case(salt + 113, (3, 1, 5, 4), (3, 1, 6, 4), 2,
                       mask=lambda rng: _random_mask(rng, (3, 1, 5, 6), empty_rows=[(0, 0, 4), (2, 0, 0)])),
            _sdpa_case(salt + 114, (2, 6, 4), (2, 6, 4), 4, mask="causal", scale=100.0),
            _sdpa_case(salt + 115, (2, 3, 5, 8), (2, 3, 5, 8), 8, mask=[5, 2], dtype=np.float32),
            _sdpa_case(salt + 116, (2, 2, 2, 3, 4), (2, 2, 2, 5, 4), 4, mask=lambda rng: _random_mask(rng, (3, 5))),
        ]
    return cases


def _attention_over_queries(q, k, v, mask):
    """The softmax taken over axis -2 (the queries) instead of -1 (the keys)."""
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = ref.softmax(scores, axis=-2)
    return weights @ v, weights


def _after_softmax_attention(q, k, v, mask, renormalise):
    """The softmax over all keys, then the mask multiplied into the weights (and the rows renormalised)."""
    weights = ref.softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]), axis=-1) * mask
    if renormalise:
        total = weights.sum(axis=-1, keepdims=True)
        weights = np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)
    return weights @ v, weights


def _added_mask_attention(q, k, v, mask):
    """The boolean mask added to the scores as 0 / 1."""
    weights = ref.softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + mask, axis=-1)
    return weights @ v, weights


def _zero_scores_masked_attention(q, k, v, mask):
    """Every score of exactly 0 masked: the mask multiplied in, then the zeros read as masked positions."""
    scores = (q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])) * mask
    return ref.scaled_dot_product_attention(q, k, v, np.broadcast_to(scores != 0, scores.shape))


def _sdpa_mistakes(q, k, v, mask, empty):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    d_k, d_v = q.shape[-1], v.shape[-1]
    sdpa = ref.scaled_dot_product_attention
    yield "attention without the 1/sqrt(d_k) scaling", lambda: sdpa(q * math.sqrt(d_k), k, v, mask)
    yield "scores divided by d_k instead of sqrt(d_k)", lambda: sdpa(q / math.sqrt(d_k), k, v, mask)
    if d_v != d_k:
        yield ("scores divided by sqrt(d_v) instead of sqrt(d_k)",
               lambda: sdpa(q * math.sqrt(d_k / d_v), k, v, mask))
    yield ("the softmax taken over the queries (axis -2) instead of the keys (axis -1)",
           lambda: _attention_over_queries(q, k, v, mask))
    if mask is not None:
        yield ("attention with the mask inverted (True means the key may be attended to)",
               lambda: sdpa(q, k, v, ~mask))
        yield ("attention with the mask inverted (True means the key may be attended to), the masked "
               "scores filled with a large negative number", lambda: _finite_fill_attention(q, k, v, ~mask))
        yield ("attention with the mask inverted (True means the key may be attended to), a large "
               "negative number added to the masked scores",
               lambda: _finite_fill_attention(q, k, v, ~mask, additive=True))
        yield "attention with the mask ignored", lambda: sdpa(q, k, v)
        yield ("the mask applied to the weights after the softmax (weights · mask): the masked keys must be left out "
               "before it, scores set to -inf, so that the allowed weights still sum to 1",
               lambda: _after_softmax_attention(q, k, v, mask, renormalise=False))
        yield ("the mask applied after the softmax and the weights renormalised: exp of the masked scores can "
               "swamp the allowed ones (they underflow to 0 beside a large masked score); set the masked scores "
               "to -inf before the softmax", lambda: _after_softmax_attention(q, k, v, mask, renormalise=True))
        yield ("the boolean mask added to the scores (True counts as +1, False as 0): masked scores must become "
               "-inf, np.where(mask, scores, -np.inf)", lambda: _added_mask_attention(q, k, v, mask))
        yield ("a score of exactly 0 taken as masked (the scores multiplied by the mask, then every 0 set to -inf): "
               "an allowed key can score 0 (a query of zeros scores 0 against every key); mask by the mask itself, "
               "np.where(mask, scores, -np.inf)", lambda: _zero_scores_masked_attention(q, k, v, mask))
        yield ("the scores multiplied by the mask: a masked score of 0 is not 'no attention' (exp(0) = 1 still "
               "gets weight); set the masked scores to -inf (np.where(mask, scores, -np.inf))",
               lambda: _multiplied_mask_attention(q, k, v, mask))
    if empty.any():
        yield ("a query with no allowed key getting uniform weights, as a finite fill such as -1e9 "
               "gives; such a row must get zero weights and a zero output",
               lambda: _uniform_empty_rows(sdpa(q, k, v, mask), v, empty))
        yield ("a query with no allowed key attending as if unmasked, as adding a finite -1e9 does; "
               "such a row must get zero weights and a zero output",
               lambda: sdpa(q, k, v, mask | empty[..., None]))
    yield "the weights multiplied with k instead of v", lambda: _times_k(sdpa(q, k, v, mask), k)


def _finite_fill_attention(q, k, v, mask, additive=False):
    """Attention that masks with a finite number: a row with nothing allowed comes out
    uniform (scores replaced by -1e9, say), or attending as if unmasked (-1e4 added to the
    masked scores: softmax does not see a shift of the whole row), not NaN. Any such number
    far below the scores gives the same weights."""
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    mask = np.broadcast_to(mask, scores.shape)
    if additive:
        mask = mask | ~mask.any(axis=-1, keepdims=True)
        scores = np.where(mask, scores, -np.inf)
    else:
        scores = np.where(mask, scores, -1e9)
    weights = ref.softmax(scores, axis=-1)
    return weights @ v, weights


def _multiplied_mask_attention(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) * mask
    weights = ref.softmax(scores, axis=-1)
    return weights @ v, weights


def _uniform_empty_rows(result, v, empty):
    output, weights = result
    uniform = np.full(weights.shape[-1], 1.0 / weights.shape[-1])
    weights = np.where(empty[..., None], uniform, weights)
    return weights @ v, weights


def _times_k(result, k):
    weights = result[1]
    return weights @ k, weights


def _scores_shape(case):
    q, k = case.data["q"], case.data["k"]
    return np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2])


def _judge_sdpa(case, got, expected):
    problem = expect_float_pair(got, whats=("the output", "the weights"))
    if problem:
        return problem
    output, weights = got
    expected_output, expected_weights = expected
    d = case.data
    tolerance = _tolerance(d["q"], d["k"], d["v"])
    if close(output, expected_weights, **tolerance) and close(weights, expected_output, **tolerance):
        return "the pair is in the wrong order, return (output, weights)"
    pairs = ((output, expected_output, "the output"), (weights, expected_weights, "the weights"))
    for item, want, what in pairs:
        if item.shape != want.shape:
            return f"{what} has shape {_shape(item)}, expected {_shape(want)}"
    if not (np.isfinite(output).all() and np.isfinite(weights).all()):
        if "large logits" in case.tags:
            return ("the result contains NaN or inf for scores of about 1e4; use a stable softmax "
                    "(subtract the max over the keys before exponentiating)")
        if "empty row" in case.tags and _nonfinite_only_in(d["empty"], output, weights):
            if calls_own_function(getattr(case, "reply", None), "softmax"):
                # A follow-on failure: the row of scores is all -inf, and the student's softmax made it NaN.
                return ("a query that may attend to no key gave NaN, and your function calls your softmax from "
                        "Exercise 1 on that row of all -inf scores: the failure comes from softmax, which must "
                        "give zeros for a slice that is entirely -inf (check_softmax fails on that case too); "
                        "fix softmax and this case passes")
            return ("a query that may attend to no key gave NaN, such a row must get zero weights "
                    "and a zero output")
    problem = (compare(output, expected_output, **tolerance, what="the output")
               or compare(weights, expected_weights, **tolerance, what="the weights"))
    return problem and name_mistake(problem, (output, weights),
                                    _sdpa_mistakes(d["q"], d["k"], d["v"], d["mask"], d["empty"]), tolerance)


check_scaled_dot_product_attention = Spec(
    declared.check_scaled_dot_product_attention,
    cases=_sdpa_cases,
    reference=lambda case: ref.scaled_dot_product_attention(*case.args),
    judge=_judge_sdpa,
    seal=SDPA_SEAL,
    explain_error=explain_shape_error,
    flag_library=LIBRARY_SOFTMAX + LIBRARY_ATTENTION,
    clauses=(
        ("q (..., L_q, d_k), k (..., L_k, d_k), v (..., L_k, d_v): no leading dimension",
         lambda c: c.data["q"].ndim == 2),
        ("... or leading dimensions (batch, heads), shared", lambda c: c.data["q"].ndim >= 4),
        ("L_k may differ from L_q", lambda c: c.data["q"].shape[-2] != c.data["k"].shape[-2]),
        ("d_v may differ from d_k", lambda c: c.data["v"].shape[-1] != c.data["q"].shape[-1]),
        ("mask None (not passed)", lambda c: c.data["mask"] is None),
        ("a boolean mask, True where attention is allowed, of the scores' shape",
         lambda c: c.data["mask"] is not None and c.data["mask"].shape == _scores_shape(c)),
        ("... or one that broadcasts to it",
         lambda c: c.data["mask"] is not None and c.data["mask"].shape != _scores_shape(c)),
        ("a query row with no allowed key gets zero weights and a zero output", lambda c: "empty row" in c.tags),
    ),
)


# ----------------------------------------------------------------------------
# causal_mask(n), NumPy bool

CAUSAL_SEAL = [(ref.causal_mask, "plmcourse.ref.causal_mask")]


def _causal_cases(hidden):
    # n=4 first: there every known mistake gives a different mask, so the hint is unambiguous.
    sizes = [4, 1, 2, 7] + ([3, 13, 32] if hidden else [])
    return [Case(f"n={n}", (n,), data={"n": n}) for n in sizes]


def _causal_mistakes(n):
    ones = np.ones((n, n), dtype=bool)
    yield ("True above the diagonal: the mask is transposed (np.triu instead of np.tril)",
           lambda: (np.triu(ones),))
    yield ("a mask whose diagonal is False, but a position may attend to itself (np.tril with k=0)",
           lambda: (np.tril(ones, k=-1),))
    yield ("an inverted mask: True marks the blocked (future) positions, but in this course "
           "True means allowed", lambda: (np.triu(ones, k=1),))
    yield "a mask that blocks nothing (all True)", lambda: (ones,)
    yield ("each position also sees the next one (j <= i + 1, np.tril with k=1): position i may see positions "
           "0..i only", lambda: (np.tril(ones, k=1),))
    first_row_empty = np.tril(ones)
    first_row_empty[0] = False
    yield ("row 0 all False: position 0 must see itself (does a loop start at 1?)", lambda: (first_row_empty,))


check_causal_mask = Spec(
    declared.check_causal_mask,
    cases=_causal_cases,
    reference=lambda case: ref.causal_mask(case.data["n"]),
    judge=lambda case, got, expected: judge_bool_mask(got, expected, _causal_mistakes(case.data["n"])),
    seal=CAUSAL_SEAL,
    clauses=(
        ("True where query i may attend to key j, for j <= i", lambda c: c.data["n"] > 2),
        ("the diagonal included: a token may look at itself", lambda c: c.data["n"] >= 1),
    ),
)


# ----------------------------------------------------------------------------
# multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None), PyTorch

MHA_SEAL = [
    (ref.multi_head_attention, "plmcourse.ref.multi_head_attention"),
    (course_nn.MultiHeadAttention, "plmcourse.nn.MultiHeadAttention"),
    (torch.nn.MultiheadAttention, "torch.nn.MultiheadAttention"),
    (F.multi_head_attention_forward,
     "torch's multi-head attention (torch.nn.functional.multi_head_attention_forward)"),
    (torch._native_multi_head_attention, "torch's multi-head attention (torch._native_multi_head_attention)"),
    (F.scaled_dot_product_attention, FUSED_ATTENTION),
]


def _mha_case(seed, B, L_q, L_k, d_model, n_heads, device, mask=None, self_attention=False):
    """Inputs ~ N(0, 1), weights ~ N(0, 1/d_model); mask: None, "causal", lengths, or rng -> mask."""
    rng = np.random.default_rng(seed)
    x_q = rng.standard_normal((B, L_q, d_model))
    x_kv = x_q if self_attention else rng.standard_normal((B, L_k, d_model))
    weights = [rng.standard_normal((d_model, d_model)) / math.sqrt(d_model) for _ in WEIGHT_NAMES]
    label = (f"seed {seed}: " + ("self-attention, x_q is x_kv" if self_attention else "x_q and x_kv differ")
             + f", B={B}, L_q={L_q}, L_k={L_k}, d_model={d_model}, n_heads={n_heads}")
    if mask == "causal":
        mask = ref.causal_mask(L_q)
        label += f", causal mask {mask.shape}"
    elif isinstance(mask, list):
        lengths = mask
        mask = ref.padding_mask(lengths, L_k)
        label += f", padding mask {mask.shape} for lengths {lengths}"
    elif mask is not None:
        mask = mask(rng)
        label += f", mask {mask.shape}"
    # The gradient checked is that of sum(output * projection), a fixed random direction.
    projection = rng.standard_normal((B, L_q, d_model))

    def leaf(a):
        return torch.tensor(a, dtype=torch.float64, device=device, requires_grad=True)

    x_q_t = leaf(x_q)
    x_kv_t = x_q_t if self_attention else leaf(x_kv)
    args = (x_q_t, x_kv_t, *(leaf(w) for w in weights), n_heads)
    if mask is not None:
        args += (torch.tensor(mask, device=device),)
    data = {"x_q": x_q, "x_kv": x_kv, "weights": weights, "n_heads": n_heads, "mask": mask,
            "projection": projection, "device": device, "self_attention": self_attention}
    return Case(label, args, data=data, grad_leaves=(0, 1, 2, 3, 4, 5), upstream=projection, grad_of=0)


def _mha_cases(hidden, device):
    cases = [
        _mha_case(20, 2, 5, 5, 8, 2, device),
        _mha_case(21, 2, 3, 6, 12, 3, device),
        _mha_case(22, 2, 5, 5, 8, 4, device, mask="causal", self_attention=True),
        _mha_case(23, 2, 4, 6, 6, 2, device, mask=[6, 2]),
        _mha_case(24, 2, 3, 4, 6, 2, device, mask=lambda rng: _random_mask(rng, (2, 2, 3, 4))),
        # Query 2 of the first sequence may attend to no key, in every head.
        _mha_case(25, 2, 4, 5, 8, 2, device, mask=lambda rng: _random_mask(rng, (2, 1, 4, 5), empty_rows=[(0, 0, 2)])),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _mha_case(salt + 30, 3, 7, 4, 16, 4, device, mask=lambda rng: _random_mask(rng, (3, 4, 7, 4))),
            _mha_case(salt + 31, 3, 6, 6, 10, 5, device, mask=[6, 3, 1], self_attention=True),
            _mha_case(salt + 32, 1, 3, 3, 5, 1, device),
            _mha_case(salt + 33, 2, 4, 4, 8, 8, device, mask="causal"),
            _mha_case(salt + 34, 3, 5, 6, 12, 3, device,
                      mask=lambda rng: _random_mask(rng, (3, 1, 5, 6), empty_rows=[(1, 0, 0), (2, 0, 4)])),
        ]
    return cases


def _differentiated(case):
    """(name, tensor) for each distinct leaf the gradient is taken with respect to."""
    x_q, x_kv, *weights = case.args[:6]
    names = [("x_q (which is also x_kv)", x_q)] if x_kv is x_q else [("x_q", x_q), ("x_kv", x_kv)]
    return names + list(zip(WEIGHT_NAMES, weights))


def _mha_reference(case):
    """Output, per-head weights and gradients of torch.nn.MultiheadAttention with the same weights."""
    d = case.data
    B, L_q, d_model = d["x_q"].shape
    L_k, n_heads, device = d["x_kv"].shape[1], d["n_heads"], d["device"]
    w_q, w_k, w_v, w_o = (torch.tensor(w, device=device) for w in d["weights"])
    # skip_init: no random initialisation, so the notebook's torch RNG is left untouched.
    module = torch.nn.utils.skip_init(torch.nn.MultiheadAttention, d_model, n_heads, bias=False,
                                      batch_first=True, dtype=torch.float64, device=device)
    with torch.no_grad():
        # torch computes x @ W.T; the course computes x @ w, so W = w.T.
        module.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))
        module.out_proj.weight.copy_(w_o.T)
    x_q = torch.tensor(d["x_q"], device=device, requires_grad=True)
    x_kv = x_q if d["self_attention"] else torch.tensor(d["x_kv"], device=device, requires_grad=True)
    attn_mask, empty = None, np.zeros((B, L_q), dtype=bool)
    if d["mask"] is not None:
        full = np.broadcast_to(d["mask"], (B, n_heads, L_q, L_k)).copy()
        # A query that may attend to no key (in every head: the cases make it so) gets zero weights
        # and a zero output, which contribute nothing to any gradient. torch gives NaN there, so it
        # is shown one key instead and that row is left out of the loss, then set to zero.
        empty = ~full.any(axis=-1).any(axis=1)                       # (B, L_q)
        full[..., 0] |= empty[:, None, :]
        # torch's bool attn_mask is True where attention is NOT allowed, one (L_q, L_k) per (batch, head).
        attn_mask = torch.tensor(~full.reshape(B * n_heads, L_q, L_k), device=device)
    output, weights = module(x_q, x_kv, x_kv, attn_mask=attn_mask, need_weights=True,
                             average_attn_weights=False)
    kept = torch.tensor(~empty[..., None], device=device)
    loss = torch.sum(torch.where(kept, torch.mul(output, torch.tensor(d["projection"], device=device)), 0.0))
    leaves = [x_q] if d["self_attention"] else [x_q, x_kv]
    *grads, grad_in_proj, grad_out_proj = torch.autograd.grad(
        loss, leaves + [module.in_proj_weight, module.out_proj.weight])
    # in_proj_weight stacks w_q.T, w_k.T and w_v.T: cut it in three and transpose back.
    grads += [g.T for g in torch.split(grad_in_proj, d_model)] + [grad_out_proj.T]
    output, weights = to_numpy(output), to_numpy(weights)
    output[empty], weights.transpose(0, 2, 1, 3)[empty] = 0.0, 0.0
    return output, weights, [to_numpy(g) for g in grads]


def _split_wrong(x, n_heads):
    """(B, L, d) -> (B, H, L, d/H) by a plain reshape: mixes positions and features."""
    B, L, d_model = x.shape
    return x.reshape(B, n_heads, L, d_model // n_heads)


def _merge_wrong(x):
    """(B, H, L, hs) -> (B, L, H*hs) by a plain reshape, without the transpose."""
    B, n_heads, L, head_size = x.shape
    return x.reshape(B, L, n_heads * head_size)


def _mha_numpy(d, *, q_factor=1.0, transposed=False, split=ref.split_heads, merge=ref.merge_heads,
               project_out=True, k_from_q=False, v_from_q=False, invert_mask=False,
               attention=ref.scaled_dot_product_attention):
    """Multi-head attention in NumPy, with the switches that reproduce known mistakes."""
    x_q, x_kv, n_heads, mask = d["x_q"], d["x_kv"], d["n_heads"], d["mask"]
    w_q, w_k, w_v, w_o = (w.T for w in d["weights"]) if transposed else d["weights"]
    if invert_mask:
        mask = ~mask
    q = split(x_q @ w_q * q_factor, n_heads)
    k = split((x_q if k_from_q else x_kv) @ w_k, n_heads)
    v = split((x_q if v_from_q else x_kv) @ w_v, n_heads)
    heads, weights = attention(q, k, v, mask)
    output = merge(heads)
    return (output @ w_o if project_out else output), weights


def _mha_mistakes(d):
    d_model = d["x_q"].shape[-1]
    head_size = d_model // d["n_heads"]
    yield ("heads split in the wrong order: reshape (B, L, d_model) to (B, L, H, d_head) and then "
           "transpose, not straight to (B, H, L, d_head)", lambda: _mha_numpy(d, split=_split_wrong))
    yield ("heads merged in the wrong order: transpose (B, H, L, d_head) to (B, L, H, d_head) before "
           "reshaping to (B, L, d_model)", lambda: _mha_numpy(d, merge=_merge_wrong))
    yield ("heads split and merged in the wrong order: reshape to (B, L, H, d_head) and transpose, "
           "and transpose back before merging", lambda: _mha_numpy(d, split=_split_wrong, merge=_merge_wrong))
    yield ("multi-head attention without the output projection w_o",
           lambda: _mha_numpy(d, project_out=False))
    yield ("the weight matrices used transposed (x @ w.T), but this course applies them as x @ w",
           lambda: _mha_numpy(d, transposed=True))
    yield "keys and values computed from x_q instead of x_kv", lambda: _mha_numpy(d, k_from_q=True, v_from_q=True)
    for which in ("keys", "values"):
        yield (f"the {which} computed from x_q instead of x_kv: only the queries come from x_q, the keys and "
               f"the values both from x_kv", lambda which=which: _mha_numpy(d, **{f"{which[0]}_from_q": True}))
    yield ("attention without the 1/sqrt(d_head) scaling",
           lambda: _mha_numpy(d, q_factor=math.sqrt(head_size)))
    yield ("scores divided by sqrt(d_model) instead of sqrt(d_head), d_head = d_model / n_heads",
           lambda: _mha_numpy(d, q_factor=math.sqrt(head_size / d_model)))
    if d["mask"] is not None:
        yield ("a query with no allowed key getting uniform weights, as a finite fill such as -1e9 gives; such a row "
               "must get zero weights and a zero output", lambda: _mha_numpy(d, attention=_finite_fill_attention))
        yield ("attention with the mask inverted (True means the key may be attended to)",
               lambda: _mha_numpy(d, invert_mask=True))
        yield ("attention with the mask inverted (True means the key may be attended to), the masked "
               "scores filled with a large negative number",
               lambda: _mha_numpy(d, invert_mask=True, attention=_finite_fill_attention))
        yield ("attention with the mask inverted (True means the key may be attended to), a large "
               "negative number added to the masked scores",
               lambda: _mha_numpy(d, invert_mask=True, attention=lambda *a: _finite_fill_attention(*a, additive=True)))


def _mha_weights_shape(case):
    d = case.data
    return (d["x_q"].shape[0], d["n_heads"], d["x_q"].shape[1], d["x_kv"].shape[1])


def _mha_empty_queries(case):
    """Bool (B, L_q): the queries that may attend to no key (in every head)."""
    d = case.data
    if d["mask"] is None:
        return np.zeros(d["x_q"].shape[:2], dtype=bool)
    full = np.broadcast_to(d["mask"], _mha_weights_shape(case))
    return ~full.any(axis=-1).any(axis=1)


def _judge_mha(case, got, expected):
    problem = expect_array_pair(got, kind="torch")
    if problem:
        return problem
    output, weights = got
    x_q = case.args[0]
    for item, what in ((output, "the output"), (weights, "the weights")):
        if item.dtype != torch.float64:
            return f"{what} has dtype {item.dtype}, expected torch.float64 like the inputs"
        if item.device != x_q.device:
            return f"{what} is on {item.device}, expected {x_q.device} like the inputs"
    expected_output, expected_weights, expected_grads = expected
    B, n_heads, L_q, L_k = expected_weights.shape
    if tuple(weights.shape) == (B, L_q, L_k) and n_heads > 1:
        return (f"the weights have shape {tuple(weights.shape)}, expected {expected_weights.shape} "
                f"(one (L_q, L_k) matrix per head, not averaged over heads)")
    problem = (compare(output, expected_output, **F64, what="the output")
               or compare(weights, expected_weights, **F64, what="the weights"))
    empty = _mha_empty_queries(case)
    if problem and empty.any() and torch.isnan(weights.detach().cpu().transpose(1, 2)[torch.from_numpy(empty)]).any():
        return ("a query that may attend to no key (all its keys masked) gave NaN; such a row must get zero "
                "weights and a zero output, as in Exercise 2 (torch.softmax of a row of -inf is NaN: replace "
                "the NaN, e.g. with .nan_to_num(0.0))")
    if problem:
        return name_mistake(problem, (output, weights), _mha_mistakes(case.data), F64)
    return _judge_gradients(case, output, expected_grads)


def _judge_gradients(case, output, expected_grads):
    no_flow = ("gradients do not flow{}: a .detach(), .data, .numpy() or torch.tensor(...) on the way "
               "cuts the autograd graph, keep every step in torch")
    reply = case.reply
    if not reply.requires_grad:
        return no_flow.format(" (the output does not depend on the inputs in the autograd graph)")
    if reply.grad_error:
        return (f"computing gradients through your function raised {reply.grad_error} "
                f"(an in-place operation such as x += y on a tensor autograd needs?)")
    grads = list(reply.grads)
    if case.args[1] is case.args[0]:
        del grads[1]  # x_kv is x_q: one leaf, one gradient
    for (name, _), grad, want in zip(_differentiated(case), grads, expected_grads):
        if grad is None:
            return no_flow.format(f" to {name}")
        problem = compare(grad, want, **F64, what=f"the gradient with respect to {name}")
        if problem:
            grad, want = to_numpy(grad), to_numpy(want)
            cut = grad.shape == want.shape and bool(np.any((grad == 0) & (np.abs(want) > 1e-12)))
            hint = ("some of it is exactly 0 where it should not be: a .detach(), .data or a NumPy step cuts part "
                    "of the graph" if cut else "the output is right and its gradient is not: a step that sets "
                    "values outside autograd (through .data, an in-place fill of a tensor autograd needs) changes "
                    "the gradient only")
            return f"{problem}, compared with torch.nn.MultiheadAttention; {hint}"
    return None


def _explain_mha_error(error):
    text = str(error)
    if "numpy()" in text and "requires grad" in text:
        return "gradients do not flow through .numpy(), keep every step in torch"
    if "leaf Variable that requires grad" in text:
        return "do not modify the inputs in place"
    return hint_for(error, [BOOLEAN_INDEX_HINT])


check_multi_head_attention = Spec(
    declared.check_multi_head_attention,
    cases=_mha_cases,
    reference=_mha_reference,
    judge=_judge_mha,
    seal=MHA_SEAL,
    explain_error=_explain_mha_error,
    flag_library=LIBRARY_ATTENTION,
    clauses=(
        ("the queries come from x_q, the keys and values from x_kv", lambda c: not c.data["self_attention"]),
        ("self-attention passes the same tensor twice", lambda c: c.data["self_attention"]),
        ("L_k may differ from L_q", lambda c: c.data["x_q"].shape[1] != c.data["x_kv"].shape[1]),
        ("n_heads divides d_model; each head has d_k = d_model // n_heads", lambda c: c.data["n_heads"] > 1),
        ("mask None (not passed)", lambda c: c.data["mask"] is None),
        ("a boolean mask, True = allowed, of shape (B, n_heads, L_q, L_k)",
         lambda c: c.data["mask"] is not None and c.data["mask"].shape == _mha_weights_shape(c)),
        ("... or one that broadcasts to it",
         lambda c: c.data["mask"] is not None and c.data["mask"].shape != _mha_weights_shape(c)),
        ("a query whose keys are all masked gets zero weights and a zero output, not NaN",
         lambda c: bool(_mha_empty_queries(c).any())),
        ("gradients flow to every input", lambda c: len(c.grad_leaves) == 6),
    ),
)
