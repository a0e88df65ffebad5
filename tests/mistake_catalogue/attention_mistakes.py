"""Right and wrong answers to the attention notebook, as data for tests/test_grading_attention.py.

For each check: CORRECT, a list of (name, function) that must pass, written in
different styles (vectorised, einsum, explicit loops); and MISTAKES, a list of
(name, function, fragment): the check must fail with a message containing
`fragment`. Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import ref


# ============================================================================
# softmax(x, axis=-1)


def softmax_vectorised(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)  # an all -inf slice: exp(-inf - 0) = 0, not NaN
    e = np.exp(x - m)
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def softmax_loops(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(x, axis, -1)
    out = np.zeros_like(moved)
    for index in np.ndindex(moved.shape[:-1]):
        row = [float(value) for value in moved[index]]
        top = max(row)
        if top == -math.inf:
            continue  # leave zeros
        exps = [math.exp(value - top) for value in row]
        total = sum(exps)
        out[index] = [e / total for e in exps]
    return np.moveaxis(out, -1, axis)


def softmax_logsumexp(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    with np.errstate(divide="ignore"):
        lse = m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))
    lse = np.where(np.isneginf(lse), np.inf, lse)  # exp(-inf - inf) = 0 for an all -inf slice
    return np.exp(x - lse)


def softmax_not_stable(x, axis=-1):
    e = np.exp(x)
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def softmax_global_max(x, axis=-1):
    e = np.exp(x - np.max(x))  # one max for the whole array: rows far below it underflow to 0
    return e / e.sum(axis=axis, keepdims=True)


def softmax_ignores_axis(x, axis=-1):
    return softmax_vectorised(x, axis=-1)


def softmax_max_along_last_axis(x, axis=-1):
    m = np.max(x, axis=-1, keepdims=True)  # the max along the last axis, whatever `axis` is
    e = np.exp(x - np.where(np.isneginf(m), 0.0, m))
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def softmax_finite_fill(x, axis=-1):
    return softmax_vectorised(np.where(np.isneginf(x), -1e9, x), axis=axis)  # an all -inf slice: uniform


def softmax_whole_array(x, axis=-1):
    e = np.exp(x - np.max(x))
    return e / e.sum()


def softmax_no_division(x, axis=-1):
    return np.exp(x - np.max(x, axis=axis, keepdims=True))


def softmax_nan_on_empty_slice(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_in_place(x, axis=-1):
    x -= np.max(x, axis=axis, keepdims=True)
    x[np.isnan(x)] = -np.inf
    return softmax_vectorised(x, axis)


def softmax_no_keepdims(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis))
    return e / e.sum(axis=axis)


def softmax_list(x, axis=-1):
    return softmax_vectorised(x, axis).tolist()


def softmax_torch_tensor(x, axis=-1):
    return torch.from_numpy(softmax_vectorised(x, axis))


def softmax_forgot_return(x, axis=-1):
    softmax_vectorised(x, axis)


def softmax_not_implemented(x, axis=-1):
    raise NotImplementedError()


def softmax_torch(x, axis=-1):
    return torch.softmax(torch.from_numpy(np.asarray(x, dtype=np.float64)), axis).numpy()


def softmax_ref(x, axis=-1):
    return ref.softmax(x, axis)


SOFTMAX_CORRECT = [
    ("vectorised", softmax_vectorised),
    ("explicit loops", softmax_loops),
    ("log-sum-exp", softmax_logsumexp),
]

SOFTMAX_MISTAKES = [
    ("not stable", softmax_not_stable, "subtract the max along the axis"),
    ("one max for the whole array", softmax_global_max, "subtract the max along the axis"),
    ("ignores the axis argument", softmax_ignores_axis,
     "a softmax along axis 1, but this case asks for axis 0"),
    ("max along the last axis only", softmax_max_along_last_axis,
     "the max taken along axis 1 but the sum along axis 0"),
    ("-inf replaced by -1e9", softmax_finite_fill, "-inf replaced by a finite number such as -1e9"),
    ("normalised over the whole array", softmax_whole_array, "normalised over the whole array"),
    ("no division by the sum", softmax_no_division, "without dividing by the sum"),
    ("NaN for an all -inf slice", softmax_nan_on_empty_slice, "entirely -inf gave NaN"),
    ("changes x in place", softmax_in_place, "changed its input x in place"),
    ("no keepdims", softmax_no_keepdims, "raised ValueError"),
    ("returns a list", softmax_list, "the result is a list"),
    ("returns a torch tensor", softmax_torch_tensor, "the result is a torch.Tensor"),
    ("forgot return", softmax_forgot_return, "returned None"),
    ("not implemented", softmax_not_implemented, "raised NotImplementedError"),
    ("calls torch.softmax", softmax_torch, "calls torch.softmax; write it yourself"),
    ("calls plmcourse.ref.softmax", softmax_ref, "calls plmcourse.ref.softmax; write it yourself"),
]


# ============================================================================
# scaled_dot_product_attention(q, k, v, mask=None) -> (output, weights)


def _masked_softmax(scores, mask):
    """Softmax over the keys; masked keys get 0; a row with no allowed key gets zeros."""
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return softmax_vectorised(scores, axis=-1)


def sdpa_matmul(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = _masked_softmax(scores, mask)
    return weights @ v, weights


def sdpa_einsum(q, k, v, mask=None):
    scores = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    weights = _masked_softmax(scores, mask)
    return np.einsum("...qk,...kv->...qv", weights, v), weights


def sdpa_loops(q, k, v, mask=None):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    L_q, d_k = q.shape[-2:]
    L_k, d_v = v.shape[-2:]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is not None:
        batch = np.broadcast_shapes(batch, np.shape(mask)[:-2])
        mask = np.broadcast_to(mask, batch + (L_q, L_k))
    q = np.broadcast_to(q, batch + (L_q, d_k))
    k = np.broadcast_to(k, batch + (L_k, d_k))
    v = np.broadcast_to(v, batch + (L_k, d_v))
    output = np.zeros(batch + (L_q, d_v))
    weights = np.zeros(batch + (L_q, L_k))
    for b in np.ndindex(batch):
        for i in range(L_q):
            scores = []
            for j in range(L_k):
                if mask is not None and not mask[b + (i, j)]:
                    scores.append(-math.inf)
                else:
                    scores.append(sum(q[b + (i, t)] * k[b + (j, t)] for t in range(d_k)) / math.sqrt(d_k))
            weights[b + (i,)] = softmax_loops(np.array(scores))
            for j in range(L_k):
                output[b + (i,)] += weights[b + (i, j)] * v[b + (j,)]
    return output, weights


def sdpa_no_scaling(q, k, v, mask=None):
    weights = _masked_softmax(q @ np.swapaxes(k, -1, -2), mask)
    return weights @ v, weights


def sdpa_zero_scores_masked(q, k, v, mask=None):
    """The mask multiplied into the scores, then every score of 0 taken as masked."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores * mask
        scores = np.where(scores == 0, -np.inf, scores)
    weights = _masked_softmax(scores, None)
    return weights @ v, weights


def sdpa_mask_after_softmax(q, k, v, mask=None):
    """The weights multiplied by the mask after the softmax over every key."""
    weights = _masked_softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), None)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


def sdpa_mask_added(q, k, v, mask=None):
    """The boolean mask added to the scores."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = _masked_softmax(scores if mask is None else scores + mask, None)
    return weights @ v, weights


def sdpa_scaled_by_d_k(q, k, v, mask=None):
    weights = _masked_softmax(q @ np.swapaxes(k, -1, -2) / q.shape[-1], mask)
    return weights @ v, weights


def sdpa_scaled_by_d_v(q, k, v, mask=None):
    weights = _masked_softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1]), mask)
    return weights @ v, weights


def sdpa_softmax_over_queries(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax_vectorised(scores, axis=-2)
    return weights @ v, weights


def sdpa_mask_inverted(q, k, v, mask=None):
    return sdpa_matmul(q, k, v, None if mask is None else ~mask)


def sdpa_mask_inverted_finite_fill(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, -1e9, scores)  # True read as "blocked"
    weights = softmax_vectorised(scores, axis=-1)
    return weights @ v, weights


def sdpa_mask_inverted_fill_minus_10000(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + np.where(mask, -1e4, 0.0)
    weights = softmax_vectorised(scores, axis=-1)
    return weights @ v, weights


def sdpa_mask_ignored(q, k, v, mask=None):
    return sdpa_matmul(q, k, v)


def sdpa_nan_on_empty_row(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax_nan_on_empty_slice(scores)
    return weights @ v, weights


def sdpa_fill_minus_1e9(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax_vectorised(scores)
    return weights @ v, weights


def sdpa_add_minus_1e9(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + np.where(mask, 0.0, -1e9)
    weights = softmax_vectorised(scores)
    return weights @ v, weights


def sdpa_not_stable(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax_not_stable(scores)
    return weights @ v, weights


def sdpa_swapped_pair(q, k, v, mask=None):
    output, weights = sdpa_matmul(q, k, v, mask)
    return weights, output


def sdpa_weights_times_k(q, k, v, mask=None):
    weights = sdpa_matmul(q, k, v, mask)[1]
    return weights @ k, weights


def sdpa_k_dot_T(q, k, v, mask=None):
    weights = _masked_softmax(q @ k.T / np.sqrt(q.shape[-1]), mask)  # .T reverses every axis
    return weights @ v, weights


def sdpa_output_only(q, k, v, mask=None):
    return sdpa_matmul(q, k, v, mask)[0]


def sdpa_three_items(q, k, v, mask=None):
    output, weights = sdpa_matmul(q, k, v, mask)
    return output, weights, mask


def sdpa_forgot_return(q, k, v, mask=None):
    sdpa_matmul(q, k, v, mask)


def sdpa_weights_list(q, k, v, mask=None):
    output, weights = sdpa_matmul(q, k, v, mask)
    return output, weights.tolist()


def sdpa_torch_tensors(q, k, v, mask=None):
    output, weights = sdpa_matmul(q, k, v, mask)
    return torch.from_numpy(output), torch.from_numpy(weights)


def sdpa_scales_q_in_place(q, k, v, mask=None):
    q /= np.sqrt(q.shape[-1])
    weights = _masked_softmax(q @ np.swapaxes(k, -1, -2), mask)
    return weights @ v, weights


def sdpa_ref(q, k, v, mask=None):
    return ref.scaled_dot_product_attention(q, k, v, mask)


def sdpa_torch_fused(q, k, v, mask=None):
    t = [torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v)]
    m = None if mask is None else torch.from_numpy(np.asarray(mask))
    output = F.scaled_dot_product_attention(*t, attn_mask=m).numpy()
    return output, sdpa_matmul(q, k, v, mask)[1]


SDPA_CORRECT = [
    ("batched matmul", sdpa_matmul),
    ("einsum", sdpa_einsum),
    ("explicit loops", sdpa_loops),
]

def softmax(x, axis=-1):
    """A student's Exercise 1, under its name, wrong only for an all -inf slice (NaN instead of zeros)."""
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sdpa_calls_own_softmax(q, k, v, mask=None):
    """Right attention through that softmax: the empty row's NaN is a follow-on failure of softmax."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return weights @ v, weights


SDPA_MISTAKES = [
    ("the mask applied after the softmax", sdpa_mask_after_softmax, "the mask applied to the weights after the softmax"),
    ("the boolean mask added to the scores", sdpa_mask_added, "the boolean mask added to the scores"),
    ("every score of 0 taken as masked", sdpa_zero_scores_masked, "a score of exactly 0 taken as masked"),
    ("calls a softmax that gives NaN for an all -inf slice", sdpa_calls_own_softmax,
     "the failure comes from softmax, which must give zeros"),
    ("no 1/sqrt(d_k)", sdpa_no_scaling, "without the 1/sqrt(d_k) scaling"),
    ("divides by d_k", sdpa_scaled_by_d_k, "divided by d_k instead of sqrt(d_k)"),
    ("divides by sqrt(d_v)", sdpa_scaled_by_d_v, "divided by sqrt(d_v) instead of sqrt(d_k)"),
    ("softmax over the queries", sdpa_softmax_over_queries, "over the queries (axis -2)"),
    ("mask inverted", sdpa_mask_inverted, "the mask inverted"),
    ("mask inverted, filled with -1e9", sdpa_mask_inverted_finite_fill, "the mask inverted"),
    ("mask inverted, -1e4 added", sdpa_mask_inverted_fill_minus_10000, "the mask inverted"),
    ("mask ignored", sdpa_mask_ignored, "the mask ignored"),
    ("NaN for a query with no allowed key", sdpa_nan_on_empty_row, "may attend to no key gave NaN"),
    ("masked scores filled with -1e9", sdpa_fill_minus_1e9, "getting uniform weights"),
    ("-1e9 added to masked scores", sdpa_add_minus_1e9, "attending as if unmasked"),
    ("not stable", sdpa_not_stable, "use a stable softmax"),
    ("(weights, output)", sdpa_swapped_pair, "the pair is in the wrong order"),
    ("weights @ k", sdpa_weights_times_k, "multiplied with k instead of v"),
    ("k.T on batched k", sdpa_k_dot_T, "raised ValueError"),
    ("returns the output only", sdpa_output_only,
     "returned a NumPy array, expected the pair (output, weights)"),
    ("returns three items", sdpa_three_items, "returned a tuple of 3 items"),
    ("forgot return", sdpa_forgot_return, "returned None"),
    ("weights as a list", sdpa_weights_list, "the weights (second item) is a list"),
    ("torch tensors", sdpa_torch_tensors, "the output (first item) is a torch.Tensor"),
    ("scales q in place", sdpa_scales_q_in_place, "changed its input q in place"),
    ("calls the reference", sdpa_ref, "calls plmcourse.ref.scaled_dot_product_attention; write it yourself"),
    ("calls torch's fused attention", sdpa_torch_fused, "calls torch's fused attention"),
]


# ============================================================================
# causal_mask(n)


def causal_tril(n):
    return np.tril(np.ones((n, n), dtype=bool))


def causal_loops(n):
    mask = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(i + 1):
            mask[i, j] = True
    return mask


def causal_arange(n):
    positions = np.arange(n)
    return positions[:, None] >= positions[None, :]


def causal_tri(n):
    return np.tri(n, dtype=bool)


def causal_transposed(n):
    return np.triu(np.ones((n, n), dtype=bool))


def causal_no_diagonal(n):
    return np.tril(np.ones((n, n), dtype=bool), k=-1)


def causal_inverted(n):
    return np.triu(np.ones((n, n), dtype=bool), k=1)


def causal_additive(n):
    return np.where(np.tri(n, dtype=bool), 0.0, -np.inf)


def causal_int(n):
    return np.tril(np.ones((n, n), dtype=np.int64))


def causal_float(n):
    return np.tril(np.ones((n, n)))


def causal_all_true(n):
    return np.ones((n, n), dtype=bool)


def causal_extra_axis(n):
    return np.tri(n, dtype=bool)[None]


def causal_torch(n):
    return torch.ones(n, n, dtype=torch.bool).tril()


def causal_list(n):
    return np.tri(n, dtype=bool).tolist()


def causal_forgot_return(n):
    np.tri(n, dtype=bool)


def causal_ref(n):
    return ref.causal_mask(n)


CAUSAL_CORRECT = [
    ("np.tril", causal_tril),
    ("explicit loops", causal_loops),
    ("arange comparison", causal_arange),
    ("np.tri", causal_tri),
]

CAUSAL_MISTAKES = [
    ("upper triangle", causal_transposed, "the mask is transposed"),
    ("diagonal excluded", causal_no_diagonal, "diagonal is False"),
    ("inverted", causal_inverted, "True marks the blocked (future) positions"),
    ("additive 0/-inf", causal_additive, "additive float mask of 0 and -inf"),
    ("int 0/1", causal_int, "dtype int64, expected bool"),
    ("float 0/1", causal_float, "dtype float64, expected bool"),
    ("all True", causal_all_true, "blocks nothing"),
    ("extra axis", causal_extra_axis, "has shape (1, 4, 4), expected (4, 4)"),
    ("torch tensor", causal_torch, "the result is a torch.Tensor"),
    ("list", causal_list, "the result is a list"),
    ("forgot return", causal_forgot_return, "returned None"),
    ("calls the reference", causal_ref, "calls plmcourse.ref.causal_mask; write it yourself"),
]


# ============================================================================
# multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None), PyTorch


def _attend(q, k, v, mask, scale, nan_rows=False):
    """Attention over (B, H, L, d) tensors; mask True = allowed. A query with no allowed key gets
    zeros (nan_rows=True: the NaN torch.softmax gives there, the mistake)."""
    scores = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = weights if nan_rows else weights.nan_to_num(0.0)
    return weights @ v, weights


def _split(x, n_heads):
    B, L, d_model = x.shape
    return x.reshape(B, L, n_heads, d_model // n_heads).transpose(1, 2)  # (B, H, L, d_head)


def _merge(x):
    B, H, L, d_head = x.shape
    return x.transpose(1, 2).reshape(B, L, H * d_head)


def mha_reshape(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    d_head = x_q.shape[-1] // n_heads
    q, k, v = _split(x_q @ w_q, n_heads), _split(x_kv @ w_k, n_heads), _split(x_kv @ w_v, n_heads)
    heads, weights = _attend(q, k, v, mask, 1 / math.sqrt(d_head))
    return _merge(heads) @ w_o, weights


def mha_nan_rows(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    d_head = x_q.shape[-1] // n_heads
    q, k, v = _split(x_q @ w_q, n_heads), _split(x_kv @ w_k, n_heads), _split(x_kv @ w_v, n_heads)
    heads, weights = _attend(q, k, v, mask, 1 / math.sqrt(d_head), nan_rows=True)
    return _merge(heads) @ w_o, weights


def mha_boolean_index(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """The scores indexed with the mask (scores[~mask] = -inf): right only for a mask of the scores' full shape."""
    d_head = x_q.shape[-1] // n_heads
    q, k, v = _split(x_q @ w_q, n_heads), _split(x_kv @ w_k, n_heads), _split(x_kv @ w_v, n_heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if mask is not None:
        scores = scores.clone()
        scores[~mask] = float("-inf")
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return _merge(weights @ v) @ w_o, weights


def mha_head_loop(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    B, L_q, d_model = x_q.shape
    L_k = x_kv.shape[1]
    d_head = d_model // n_heads
    if mask is not None:
        mask = mask.expand(B, n_heads, L_q, L_k)
    heads, all_weights = [], []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)  # head h owns these columns of every w
        q, k, v = x_q @ w_q[:, cols], x_kv @ w_k[:, cols], x_kv @ w_v[:, cols]
        out, weights = _attend(q, k, v, None if mask is None else mask[:, h], 1 / math.sqrt(d_head))
        heads.append(out)
        all_weights.append(weights)
    return torch.cat(heads, dim=-1) @ w_o, torch.stack(all_weights, dim=1)


def mha_einsum(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    B, L_q, d_model = x_q.shape
    d_head = d_model // n_heads
    q = torch.einsum("bld,dhe->bhle", x_q, w_q.reshape(d_model, n_heads, d_head))
    k = torch.einsum("bld,dhe->bhle", x_kv, w_k.reshape(d_model, n_heads, d_head))
    v = torch.einsum("bld,dhe->bhle", x_kv, w_v.reshape(d_model, n_heads, d_head))
    scores = torch.einsum("bhqe,bhke->bhqk", q, k) / math.sqrt(d_head)
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    weights = scores.softmax(dim=-1).nan_to_num(0.0)
    heads = torch.einsum("bhqk,bhke->bhqe", weights, v)
    return torch.einsum("bhqe,hef->bqf", heads, w_o.reshape(n_heads, d_head, d_model)), weights


def mha_split_wrong(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    def split(x):
        B, L, d_model = x.shape
        return x.reshape(B, n_heads, L, d_model // n_heads)

    heads, weights = _attend(split(x_q @ w_q), split(x_kv @ w_k), split(x_kv @ w_v), mask,
                             1 / math.sqrt(x_q.shape[-1] // n_heads))
    return _merge(heads) @ w_o, weights


def mha_merge_wrong(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = _split(x_q @ w_q, n_heads), _split(x_kv @ w_k, n_heads), _split(x_kv @ w_v, n_heads)
    heads, weights = _attend(q, k, v, mask, 1 / math.sqrt(q.shape[-1]))
    B, H, L, d_head = heads.shape
    return heads.reshape(B, L, H * d_head) @ w_o, weights


def mha_split_and_merge_wrong(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    def split(x):
        B, L, d_model = x.shape
        return x.reshape(B, n_heads, L, d_model // n_heads)

    heads, weights = _attend(split(x_q @ w_q), split(x_kv @ w_k), split(x_kv @ w_v), mask,
                             1 / math.sqrt(x_q.shape[-1] // n_heads))
    B, H, L, d_head = heads.shape
    return heads.reshape(B, L, H * d_head) @ w_o, weights


def mha_no_output_projection(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = _split(x_q @ w_q, n_heads), _split(x_kv @ w_k, n_heads), _split(x_kv @ w_v, n_heads)
    heads, weights = _attend(q, k, v, mask, 1 / math.sqrt(q.shape[-1]))
    return _merge(heads), weights


def mha_weights_transposed(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    return mha_reshape(x_q, x_kv, w_q.T, w_k.T, w_v.T, w_o.T, n_heads, mask)


def mha_kv_from_x_q(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    return mha_reshape(x_q, x_q, w_q, w_k, w_v, w_o, n_heads, mask)


def mha_one_from_x_q(which):
    """Multi-head attention with the keys (which="k") or the values ("v") computed from x_q, not x_kv."""
    def mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
        x_k, x_v = (x_q, x_kv) if which == "k" else (x_kv, x_q)
        q, k, v = _split(x_q @ w_q, n_heads), _split(x_k @ w_k, n_heads), _split(x_v @ w_v, n_heads)
        heads, weights = _attend(q, k, v, mask, 1 / math.sqrt(q.shape[-1]))
        return _merge(heads) @ w_o, weights
    return mha


def mha_no_scaling(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = _split(x_q @ w_q, n_heads), _split(x_kv @ w_k, n_heads), _split(x_kv @ w_v, n_heads)
    heads, weights = _attend(q, k, v, mask, 1.0)
    return _merge(heads) @ w_o, weights


def mha_scaled_by_d_model(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = _split(x_q @ w_q, n_heads), _split(x_kv @ w_k, n_heads), _split(x_kv @ w_v, n_heads)
    heads, weights = _attend(q, k, v, mask, 1 / math.sqrt(x_q.shape[-1]))
    return _merge(heads) @ w_o, weights


def mha_mask_inverted(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    return mha_reshape(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, None if mask is None else ~mask)


def mha_mask_inverted_finite_fill(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    B, L_q, d_model = x_q.shape
    head = d_model // n_heads

    def split(x):
        return x.reshape(B, x.shape[1], n_heads, head).transpose(1, 2)

    q, k, v = split(x_q @ w_q), split(x_kv @ w_k), split(x_kv @ w_v)
    scores = q @ k.transpose(-1, -2) / math.sqrt(head)
    if mask is not None:
        scores = scores.masked_fill(mask, -1e9)  # True read as "blocked"
    weights = torch.softmax(scores, dim=-1)
    heads = (weights @ v).transpose(1, 2).reshape(B, L_q, d_model)
    return heads @ w_o, weights


def mha_weights_averaged(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    output, weights = mha_reshape(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask)
    return output, weights.mean(dim=1)


def mha_detached(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    output, weights = mha_reshape(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask)
    return output.detach(), weights.detach()


def mha_through_numpy(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    arrays = [t.detach().cpu().numpy() for t in (x_q, x_kv, w_q, w_k, w_v, w_o)]
    m = None if mask is None else mask.cpu().numpy()
    output, weights = _numpy_mha(*arrays, n_heads, m)
    return torch.from_numpy(output), torch.from_numpy(weights)


def _numpy_mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask):
    def split(x):
        B, L, d_model = x.shape
        return x.reshape(B, L, n_heads, d_model // n_heads).transpose(0, 2, 1, 3)

    heads, weights = sdpa_matmul(split(x_q @ w_q), split(x_kv @ w_k), split(x_kv @ w_v), mask)
    B, H, L, d_head = heads.shape
    return heads.transpose(0, 2, 1, 3).reshape(B, L, H * d_head) @ w_o, weights


def mha_calls_numpy(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    x_q.numpy()  # raises: a tensor that requires grad cannot become a NumPy array
    return mha_reshape(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask)


def mha_returns_numpy(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    output, weights = mha_reshape(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask)
    return output.detach().numpy(), weights.detach().numpy()


def mha_detached_weights(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = _split(x_q @ w_q, n_heads), _split(x_kv @ w_k, n_heads), _split(x_kv @ w_v, n_heads)
    heads, weights = _attend(q, k, v, mask, 1 / math.sqrt(q.shape[-1]))
    heads = weights.detach() @ v  # no gradient reaches x_q, w_q and w_k any more
    return _merge(heads) @ w_o, weights


def mha_detached_keys(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, v = _split(x_q @ w_q, n_heads), _split(x_kv @ w_v, n_heads)
    k = _split(x_kv.detach() @ w_k, n_heads)  # x_kv still gets a gradient, through v only
    heads, weights = _attend(q, k, v, mask, 1 / math.sqrt(q.shape[-1]))
    return _merge(heads) @ w_o, weights


def mha_float32(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    return mha_reshape(*(t.float() for t in (x_q, x_kv, w_q, w_k, w_v, w_o)), n_heads, mask)


def mha_in_place_input(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    x_q *= 1.0
    return mha_reshape(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask)


def mha_torch_fused(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = _split(x_q @ w_q, n_heads), _split(x_kv @ w_k, n_heads), _split(x_kv @ w_v, n_heads)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    weights = _attend(q, k, v, mask, 1 / math.sqrt(q.shape[-1]))[1]
    return _merge(heads) @ w_o, weights


def mha_torch_module(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    d_model = x_q.shape[-1]
    module = torch.nn.MultiheadAttention(d_model, n_heads, bias=False, batch_first=True,
                                         dtype=x_q.dtype, device=x_q.device)
    module.in_proj_weight = torch.nn.Parameter(torch.cat([w_q.T, w_k.T, w_v.T]))
    module.out_proj.weight = torch.nn.Parameter(w_o.T)
    attn_mask = None
    if mask is not None:
        B, L_q, L_k = x_q.shape[0], x_q.shape[1], x_kv.shape[1]
        attn_mask = ~mask.expand(B, n_heads, L_q, L_k).reshape(B * n_heads, L_q, L_k)
    return module(x_q, x_kv, x_kv, attn_mask=attn_mask, average_attn_weights=False)


MHA_CORRECT = [
    ("reshape and transpose", mha_reshape),
    ("loop over heads", mha_head_loop),
    ("einsum", mha_einsum),
]

MHA_MISTAKES = [
    ("the scores indexed with a broadcastable mask", mha_boolean_index, "use np.where(mask, scores, -np.inf)"),
    ("heads split by a plain reshape", mha_split_wrong, "heads split in the wrong order"),
    ("heads merged by a plain reshape", mha_merge_wrong, "heads merged in the wrong order"),
    ("heads split and merged by plain reshapes", mha_split_and_merge_wrong,
     "heads split and merged in the wrong order"),
    ("no output projection", mha_no_output_projection, "without the output projection w_o"),
    ("weights transposed", mha_weights_transposed, "the weight matrices used transposed"),
    ("keys and values from x_q", mha_kv_from_x_q, "from x_q instead of x_kv"),
    ("keys from x_q", mha_one_from_x_q("k"), "the keys computed from x_q instead of x_kv"),
    ("values from x_q", mha_one_from_x_q("v"), "the values computed from x_q instead of x_kv"),
    ("no 1/sqrt(d_head)", mha_no_scaling, "without the 1/sqrt(d_head) scaling"),
    ("divides by sqrt(d_model)", mha_scaled_by_d_model, "divided by sqrt(d_model) instead of sqrt(d_head)"),
    ("mask inverted", mha_mask_inverted, "the mask inverted"),
    ("mask inverted, filled with -1e9", mha_mask_inverted_finite_fill, "the mask inverted"),
    ("weights averaged over heads", mha_weights_averaged, "not averaged over heads"),
    ("NaN for a query with no allowed key", mha_nan_rows, "a query that may attend to no key (all its keys masked) gave NaN"),
    ("output detached", mha_detached, "gradients do not flow"),
    ("computed in NumPy", mha_through_numpy, "gradients do not flow"),
    ("calls .numpy() on an input", mha_calls_numpy, "gradients do not flow through .numpy()"),
    ("returns NumPy arrays", mha_returns_numpy, "gradients do not flow through NumPy"),
    ("attention weights detached", mha_detached_weights, "gradients do not flow to x_q"),
    ("keys from a detached x_kv", mha_detached_keys, "the gradient with respect to x_kv differs"),
    ("computed in float32", mha_float32, "dtype torch.float32, expected torch.float64"),
    ("changes x_q in place", mha_in_place_input, "do not modify the inputs in place"),
    ("calls torch's fused attention", mha_torch_fused, "calls torch's fused attention"),
    ("calls torch.nn.MultiheadAttention", mha_torch_module, "calls torch.nn.MultiheadAttention"),
]


CATALOGUE = {
    "check_softmax": (SOFTMAX_CORRECT, SOFTMAX_MISTAKES),
    "check_scaled_dot_product_attention": (SDPA_CORRECT, SDPA_MISTAKES),
    "check_causal_mask": (CAUSAL_CORRECT, CAUSAL_MISTAKES),
    "check_multi_head_attention": (MHA_CORRECT, MHA_MISTAKES),
}
