"""Fresh student-style implementations for notebook 03 (attention):
softmax, scaled_dot_product_attention (NumPy), causal_mask, multi_head_attention (PyTorch)."""
import math

import numpy as np
import torch


def _good_softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


# ---- softmax ---------------------------------------------------------------
def softmax_no_shift(x, axis=-1):
    """WRONG: exponentiates without subtracting the max; scores of size 1e4 give inf / inf = nan."""
    e = np.exp(np.asarray(x, dtype=np.float64))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_nan_on_all_masked(x, axis=-1):
    """WRONG: max shift but no special case; a slice that is entirely -inf gives nan instead of zeros."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)


def softmax_fill_minus_1e9(x, axis=-1):
    """WRONG: replaces -inf by -1e9; an all -inf slice then comes out uniform instead of zeros."""
    x = np.where(np.isneginf(x), -1e9, np.asarray(x, dtype=np.float64))
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    """WRONG: subtracts the max of the whole array; a slice far below it underflows to all zeros."""
    x = np.asarray(x, dtype=np.float64)
    finite = x[np.isfinite(x)]
    m = finite.max() if finite.size else 0.0
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def softmax_shift_last_axis(x, axis=-1):
    """WRONG: takes the max over the last axis but normalises over `axis`; wrong when axis is not the last."""
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def softmax_in_place(x, axis=-1):
    """WRONG: shifts and exponentiates x in place, so the caller's array is overwritten."""
    m = np.max(x, axis=axis, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    x -= m
    np.exp(x, out=x)
    s = np.sum(x, axis=axis, keepdims=True)
    np.divide(x, s, out=x, where=s > 0)
    return x


def softmax_slice_loop(x, axis=-1):
    """CORRECT: a loop over the 1-D slices along `axis`, each shifted by its own max."""
    x = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.zeros_like(flat)
    for r, row in enumerate(flat):
        if np.all(np.isneginf(row)):
            continue
        e = np.exp(row - row.max())
        out[r] = e / e.sum()
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


def softmax_via_logsumexp(x, axis=-1):
    """CORRECT: exp(x - logsumexp(x)), with the logsumexp of an all -inf slice replaced so it gives 0."""
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    safe_m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        lse = safe_m + np.log(np.sum(np.exp(x - safe_m), axis=axis, keepdims=True))
    lse = np.where(np.isfinite(lse), lse, np.inf)          # all -inf slice: exp(-inf - inf) = 0
    return np.exp(x - lse)


# ---- scaled_dot_product_attention ------------------------------------------
def sdpa_no_scaling(q, k, v, mask=None):
    """WRONG: forgets to divide the scores by sqrt(d_k)."""
    scores = q @ np.swapaxes(k, -1, -2)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    w = _good_softmax(scores)
    return w @ v, w




def sdpa_multiply_mask(q, k, v, mask=None):
    """WRONG: masks by multiplying the scores by the mask, so masked keys get score 0, not weight 0."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores * mask
    w = _good_softmax(scores)
    return w @ v, w


def sdpa_dot_T(q, k, v, mask=None):
    """WRONG: k.T reverses every axis of a batched k; only 2-D inputs work."""
    scores = q @ k.T / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    w = _good_softmax(scores)
    return w @ v, w


def sdpa_uniform_when_all_masked(q, k, v, mask=None):
    """WRONG: fills masked scores with -1e9, so a query with no allowed key averages all values uniformly."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def sdpa_scale_by_dv(q, k, v, mask=None):
    """WRONG: scales by sqrt of v's last dimension (d_v) instead of d_k."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    w = _good_softmax(scores)
    return w @ v, w


def sdpa_softmax_over_queries(q, k, v, mask=None):
    """WRONG: normalises the weights over the queries (axis -2) instead of the keys."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    w = _good_softmax(scores, axis=-2)
    return w @ v, w


def sdpa_einsum(q, k, v, mask=None):
    """CORRECT: einsum for the scores and output, row maxima over allowed keys, zero rows kept zero."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    allowed = np.ones(scores.shape, dtype=bool) if mask is None else np.broadcast_to(mask, scores.shape)
    row_max = np.max(np.where(allowed, scores, -np.inf), axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.where(allowed, np.exp(np.where(allowed, scores - row_max, 0.0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    w = e / np.where(total > 0, total, 1.0)
    return np.einsum("...qk,...kd->...qd", w, v), w


def sdpa_flat_loop(q, k, v, mask=None):
    """CORRECT: broadcasts everything to full shape and loops over the query rows one by one."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    L_q, d_k = q.shape[-2:]
    L_k, d_v = v.shape[-2:]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is not None:
        lead = np.broadcast_shapes(lead, np.shape(mask)[:-2])
    qf = np.broadcast_to(q, lead + (L_q, d_k)).reshape(-1, L_q, d_k)
    kf = np.broadcast_to(k, lead + (L_k, d_k)).reshape(-1, L_k, d_k)
    vf = np.broadcast_to(v, lead + (L_k, d_v)).reshape(-1, L_k, d_v)
    allowed = np.ones(lead + (L_q, L_k), dtype=bool) if mask is None else np.broadcast_to(mask, lead + (L_q, L_k))
    allowed = allowed.reshape(-1, L_q, L_k)
    weights = np.zeros((qf.shape[0], L_q, L_k))
    for b in range(qf.shape[0]):
        for i in range(L_q):
            keys = np.flatnonzero(allowed[b, i])
            if len(keys) == 0:
                continue
            scores = kf[b, keys] @ qf[b, i] / np.sqrt(d_k)
            e = np.exp(scores - scores.max())
            weights[b, i, keys] = e / e.sum()
    output = weights @ vf
    return output.reshape(lead + (L_q, d_v)), weights.reshape(lead + (L_q, L_k))


# ---- causal_mask -----------------------------------------------------------
def causal_mask_upper(n):
    """WRONG: np.triu: True on and above the diagonal, so each query sees the future."""
    return np.triu(np.ones((n, n), dtype=bool))


def causal_mask_strict(n):
    """WRONG: strictly below the diagonal; a token may not look at itself."""
    return np.tril(np.ones((n, n), dtype=bool), k=-1)


def causal_mask_float(n):
    """WRONG: returns np.tril(np.ones((n, n))), a float array of 0/1, not a boolean array."""
    return np.tril(np.ones((n, n)))


def causal_mask_one_ahead(n):
    """WRONG: off by one: j <= i + 1, so each query also sees the next token."""
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    return j <= i + 1


def causal_mask_loop_skips_first_row(n):
    """WRONG: the loop starts at row 1, so the first token cannot even see itself."""
    mask = np.zeros((n, n), dtype=bool)
    for i in range(1, n):
        mask[i, : i + 1] = True
    return mask


def causal_mask_torch(n):
    """WRONG: returns a torch tensor instead of a NumPy array."""
    return torch.tril(torch.ones(n, n, dtype=torch.bool))


def causal_mask_tri(n):
    """CORRECT: np.tri with a boolean dtype."""
    return np.tri(n, dtype=bool)


def causal_mask_compare(n):
    """CORRECT: compares row and column indices with broadcasting."""
    rows, cols = np.indices((n, n))
    return cols <= rows


# ---- multi_head_attention --------------------------------------------------
def _attend(q, k, v, mask, scale):
    scores = q @ k.transpose(-2, -1) / scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def mha_reshape_straight(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: reshapes (B, L, d_model) straight to (B, h, L, d_k), mixing positions into heads."""
    B, L_q, d_model = x_q.shape
    L_k = x_kv.shape[1]
    d_k = d_model // n_heads
    q = (x_q @ w_q).reshape(B, n_heads, L_q, d_k)
    k = (x_kv @ w_k).reshape(B, n_heads, L_k, d_k)
    v = (x_kv @ w_v).reshape(B, n_heads, L_k, d_k)
    out, w = _attend(q, k, v, mask, math.sqrt(d_k))
    return out.reshape(B, L_q, d_model) @ w_o, w


def mha_scale_d_model(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: divides the scores by sqrt(d_model) instead of sqrt(d_k)."""
    B, L_q, d_model = x_q.shape
    L_k = x_kv.shape[1]
    d_k = d_model // n_heads
    q = (x_q @ w_q).reshape(B, L_q, n_heads, d_k).transpose(1, 2)
    k = (x_kv @ w_k).reshape(B, L_k, n_heads, d_k).transpose(1, 2)
    v = (x_kv @ w_v).reshape(B, L_k, n_heads, d_k).transpose(1, 2)
    out, w = _attend(q, k, v, mask, math.sqrt(d_model))
    return out.transpose(1, 2).reshape(B, L_q, d_model) @ w_o, w


def mha_no_output_projection(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: concatenates the heads but never multiplies by w_o."""
    B, L_q, d_model = x_q.shape
    L_k = x_kv.shape[1]
    d_k = d_model // n_heads
    q = (x_q @ w_q).reshape(B, L_q, n_heads, d_k).transpose(1, 2)
    k = (x_kv @ w_k).reshape(B, L_k, n_heads, d_k).transpose(1, 2)
    v = (x_kv @ w_v).reshape(B, L_k, n_heads, d_k).transpose(1, 2)
    out, w = _attend(q, k, v, mask, math.sqrt(d_k))
    return out.transpose(1, 2).reshape(B, L_q, d_model), w


def mha_inverted_mask(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: fills -inf where the mask is True, i.e. blocks exactly the allowed keys."""
    B, L_q, d_model = x_q.shape
    L_k = x_kv.shape[1]
    d_k = d_model // n_heads
    q = (x_q @ w_q).reshape(B, L_q, n_heads, d_k).transpose(1, 2)
    k = (x_kv @ w_k).reshape(B, L_k, n_heads, d_k).transpose(1, 2)
    v = (x_kv @ w_v).reshape(B, L_k, n_heads, d_k).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return (w @ v).transpose(1, 2).reshape(B, L_q, d_model) @ w_o, w




def mha_merge_without_transpose(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: merges the heads with reshape(B, L_q, d_model) straight from (B, h, L_q, d_k)."""
    B, L_q, d_model = x_q.shape
    L_k = x_kv.shape[1]
    d_k = d_model // n_heads
    q = (x_q @ w_q).reshape(B, L_q, n_heads, d_k).transpose(1, 2)
    k = (x_kv @ w_k).reshape(B, L_k, n_heads, d_k).transpose(1, 2)
    v = (x_kv @ w_v).reshape(B, L_k, n_heads, d_k).transpose(1, 2)
    out, w = _attend(q, k, v, mask, math.sqrt(d_k))
    return out.reshape(B, L_q, d_model) @ w_o, w


def mha_keys_from_queries(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: takes the keys from x_q instead of x_kv (only right for self-attention)."""
    B, L_q, d_model = x_q.shape
    L_k = x_kv.shape[1]
    d_k = d_model // n_heads
    q = (x_q @ w_q).reshape(B, L_q, n_heads, d_k).transpose(1, 2)
    k = (x_q @ w_k).reshape(B, L_q, n_heads, d_k).transpose(1, 2)
    v = (x_kv @ w_v).reshape(B, L_k, n_heads, d_k).transpose(1, 2)
    out, w = _attend(q, k, v, mask, math.sqrt(d_k))
    return out.transpose(1, 2).reshape(B, L_q, d_model) @ w_o, w


def mha_loop_over_heads(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """CORRECT: one head at a time with the column blocks of w_q, w_k, w_v; heads concatenated, then w_o."""
    d_model = x_q.shape[-1]
    d_k = d_model // n_heads
    outputs, weights = [], []
    for h in range(n_heads):
        cols = slice(h * d_k, (h + 1) * d_k)
        q = x_q @ w_q[:, cols]
        k = x_kv @ w_k[:, cols]
        v = x_kv @ w_v[:, cols]
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)          # (B, L_q, L_k)
        if mask is not None:
            m = mask.expand(x_q.shape[0], n_heads, x_q.shape[1], x_kv.shape[1])[:, h]
            scores = scores.masked_fill(~m, float("-inf"))
        w = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a query with no allowed key: zeros
        outputs.append(w @ v)
        weights.append(w)
    return torch.cat(outputs, dim=-1) @ w_o, torch.stack(weights, dim=1)


def mha_einsum(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """CORRECT: splits the weight matrices into heads and uses einsum; no reshape of activations needed."""
    d_model = x_q.shape[-1]
    d_k = d_model // n_heads
    wq = w_q.reshape(d_model, n_heads, d_k)
    wk = w_k.reshape(d_model, n_heads, d_k)
    wv = w_v.reshape(d_model, n_heads, d_k)
    wo = w_o.reshape(n_heads, d_k, d_model)
    q = torch.einsum("bld,dhk->bhlk", x_q, wq)
    k = torch.einsum("bld,dhk->bhlk", x_kv, wk)
    v = torch.einsum("bld,dhk->bhlk", x_kv, wv)
    scores = torch.einsum("bhqk,bhsk->bhqs", q, k) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a query with no allowed key: zeros
    heads = torch.einsum("bhqs,bhsk->bhqk", w, v)
    return torch.einsum("bhqk,hkd->bqd", heads, wo), w


FRESH = {
    "check_softmax": {
        "wrong": [
            ("no max shift", softmax_no_shift, "Overflows for scores of size 1e4 and returns nan."),
            ("nan on all -inf slice", softmax_nan_on_all_masked, "An all -inf slice gives nan, not zeros."),
            ("-inf replaced by -1e9", softmax_fill_minus_1e9, "An all -inf slice gives uniform weights, not zeros."),
            ("global max shift", softmax_global_max,
             "Shifts by the max of the whole array, so a slice far below it underflows to zeros."),
            ("max over the last axis", softmax_shift_last_axis,
             "Subtracts a max that varies along `axis` when axis is not the last one."),
            ("in-place", softmax_in_place, "Overwrites x."),
        ],
        "correct": [
            ("loop over slices", softmax_slice_loop),
            ("exp(x - logsumexp)", softmax_via_logsumexp),
        ],
    },
    "check_scaled_dot_product_attention": {
        "wrong": [
            ("no 1/sqrt(d_k)", sdpa_no_scaling, "Scores are not divided by sqrt(d_k)."),
            ("mask multiplies scores", sdpa_multiply_mask, "Masked keys get score 0 instead of weight 0."),
            ("k.T on batches", sdpa_dot_T, "k.T reverses all axes; batched inputs fail."),
            ("uniform row when all masked", sdpa_uniform_when_all_masked,
             "A query with no allowed key gets uniform weights and the mean value, not zeros."),
            ("scaled by d_v", sdpa_scale_by_dv, "Divides by sqrt(d_v) instead of sqrt(d_k)."),
            ("softmax over queries", sdpa_softmax_over_queries, "Normalises over the query axis instead of the keys."),
        ],
        "correct": [
            ("einsum with explicit masking", sdpa_einsum),
            ("loop over query rows", sdpa_flat_loop),
        ],
    },
    "check_causal_mask": {
        "wrong": [
            ("upper triangle", causal_mask_upper, "True above the diagonal: queries see later keys."),
            ("diagonal excluded", causal_mask_strict, "A token may not attend to itself."),
            ("float array", causal_mask_float, "Returns floats 0/1 instead of booleans."),
            ("one token ahead", causal_mask_one_ahead, "Also allows key j = i + 1."),
            ("loop skips row 0", causal_mask_loop_skips_first_row, "The first token does not see itself."),
            ("torch tensor", causal_mask_torch, "Returns a torch tensor, not a NumPy array."),
        ],
        "correct": [
            ("np.tri", causal_mask_tri),
            ("index comparison", causal_mask_compare),
        ],
    },
    "check_multi_head_attention": {
        "wrong": [
            ("reshape straight to heads", mha_reshape_straight,
             "Reshapes (B, L, d_model) directly to (B, h, L, d_k), mixing positions into heads."),
            ("scaled by sqrt(d_model)", mha_scale_d_model, "Divides scores by sqrt(d_model) instead of sqrt(d_k)."),
            ("no w_o", mha_no_output_projection, "Forgets the output projection."),
            ("mask inverted", mha_inverted_mask, "Blocks the allowed keys instead of the forbidden ones."),
            ("merge without transpose", mha_merge_without_transpose,
             "Merges (B, h, L, d_k) to (B, L, d_model) without moving the head axis back."),
            ("keys from x_q", mha_keys_from_queries, "Keys come from x_q instead of x_kv (breaks cross-attention)."),
        ],
        "correct": [
            ("loop over heads", mha_loop_over_heads),
            ("einsum with per-head weight blocks", mha_einsum),
        ],
    },
}
