"""Attention and the pieces of a Transformer block, in plain NumPy (float64).

This is the reference the course holds everything else against: no speed tricks,
one idea per function. Shapes follow the course convention:

    B   batch size           L_q  number of queries     d_k  query/key size
    H   number of heads      L_k  number of keys/values d_v  value size

Attention functions accept any leading dimensions `(..., L, d)`, so the same
code serves one sequence `(L, d)`, a batch `(B, L, d)` and many heads `(B, H, L, d)`.

Masks are boolean and True where attention is ALLOWED (the convention of
`torch.nn.functional.scaled_dot_product_attention`). A query that may look at no
key at all gets zero weights and a zero output, never NaN.
"""

import math

import numpy as np

__all__ = [
    "softmax",
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "split_heads",
    "merge_heads",
    "multi_head_attention",
    "layer_norm",
    "gelu",
    "feed_forward",
    "sinusoidal_positions",
]


# ----------------------------------------------------------------------------
# Softmax and scaled dot-product attention


def softmax(x, axis=-1):
    """Softmax along `axis`, numerically stable; the input is not modified.

    exp(x_i) / sum_j exp(x_j) overflows for logits like 1e4, so we first subtract
    the largest entry (the result is the same: the factor exp(-max) cancels).
    Entries of -inf get weight 0. A slice that is entirely -inf has nothing to
    normalise; it returns zeros instead of 0/0 = NaN.
    """
    x = np.asarray(x, dtype=np.float64)
    x_max = np.max(x, axis=axis, keepdims=True)
    # An all -inf slice has max -inf and x - max would be -inf - (-inf) = NaN:
    # subtract 0 there instead, so exp gives exactly 0 everywhere in it.
    x_max = np.where(x_max == -np.inf, 0.0, x_max)
    e = np.exp(x - x_max)  # a new array: x itself is left untouched
    total = np.sum(e, axis=axis, keepdims=True)
    # total is 0 only for an all -inf slice; divide by 1 there to keep the zeros.
    return e / np.where(total == 0.0, 1.0, total)


def _check_mask(mask, scores_shape):
    """Return `mask` as a bool array after checking it broadcasts to `scores_shape`."""
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}.")
    try:
        np.broadcast_shapes(mask.shape, scores_shape)
    except ValueError:
        raise ValueError(
            f"mask of shape {mask.shape} does not broadcast to the scores' shape "
            f"{scores_shape} (..., L_q, L_k)."
        ) from None
    return mask


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., L_q, d_k)   k: (..., L_k, d_k)   v: (..., L_k, d_v)
    mask: bool, broadcastable to (..., L_q, L_k), True where query i may attend to key j.
    Returns output (..., L_q, d_v) and weights (..., L_q, L_k); each row of weights
    sums to 1, or is all zeros for a query with no allowed key.
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension d_k, got {q.shape[-1]} and {k.shape[-1]}.")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of positions L_k, got {k.shape[-2]} and {v.shape[-2]}.")

    d_k = q.shape[-1]
    # Dividing by sqrt(d_k) keeps the scores' variance near 1 whatever d_k is;
    # without it, large d_k pushes the softmax into a near one-hot, flat-gradient regime.
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k)  # (..., L_q, L_k)
    if mask is not None:
        mask = _check_mask(mask, scores.shape)
        scores = np.where(mask, scores, -np.inf)  # a forbidden key gets exp(-inf) = 0
    weights = softmax(scores, axis=-1)  # (..., L_q, L_k)
    output = weights @ v  # (..., L_q, d_v)
    return output, weights


# ----------------------------------------------------------------------------
# Masks


def causal_mask(n):
    """Bool (n, n), True on and below the diagonal: position i may attend to 0..i.

    Broadcasts against scores (B, H, n, n), so one mask serves every batch and head.
    """
    return np.tril(np.ones((n, n), dtype=bool))


def padding_mask(lengths, max_len):
    """Bool (B, 1, 1, max_len), True for real tokens, False for padding.

    lengths: (B,) number of real tokens in each padded sequence. The two singleton
    axes stand for heads and queries: every head and every query of sequence b
    must ignore the same padding keys, so the mask broadcasts to (B, H, L_q, max_len).
    """
    lengths = np.asarray(lengths)
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be one-dimensional (B,), got shape {lengths.shape}.")
    if np.any(lengths > max_len) or np.any(lengths < 0):
        raise ValueError(f"every length must lie in 0..max_len={max_len}, got {lengths.tolist()}.")
    positions = np.arange(max_len)  # (max_len,)
    mask = positions[None, :] < lengths[:, None]  # (B, max_len)
    return mask[:, None, None, :]  # (B, 1, 1, max_len)


# ----------------------------------------------------------------------------
# Multi-head attention


def split_heads(x, n_heads):
    """(B, L, d_model) -> (B, n_heads, L, d_model // n_heads).

    Head h gets the features h*hs .. (h+1)*hs - 1 of every position (hs = head size).
    Any leading dims work: (..., L, d_model) -> (..., n_heads, L, hs).
    """
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}.")
    head_size = d_model // n_heads
    x = x.reshape(*x.shape[:-1], n_heads, head_size)  # (B, L, nh, hs)
    return np.swapaxes(x, -3, -2)  # (B, nh, L, hs)


def merge_heads(x):
    """(B, n_heads, L, hs) -> (B, L, n_heads * hs), the inverse of `split_heads`."""
    x = np.asarray(x)
    n_heads, head_size = x.shape[-3], x.shape[-1]
    x = np.swapaxes(x, -3, -2)  # (B, L, nh, hs)
    return x.reshape(*x.shape[:-2], n_heads * head_size)  # (B, L, d_model)


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """Multi-head attention without biases.

    x_q: (B, L_q, d_model) the sequence that asks (queries).
    x_kv: (B, L_k, d_model) the sequence that answers (keys and values); pass
        x_kv = x_q for self-attention.
    w_q, w_k, w_v, w_o: (d_model, d_model), applied as x @ w.
    mask: bool, broadcastable to (B, n_heads, L_q, L_k).
    Returns output (B, L_q, d_model) and weights (B, n_heads, L_q, L_k).
    """
    x_q = np.asarray(x_q, dtype=np.float64)
    x_kv = np.asarray(x_kv, dtype=np.float64)
    d_model = x_q.shape[-1]
    if x_kv.shape[-1] != d_model:
        raise ValueError(f"x_q and x_kv must have the same d_model, got {d_model} and {x_kv.shape[-1]}.")
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        if np.shape(w) != (d_model, d_model):
            raise ValueError(f"{name} must have shape ({d_model}, {d_model}), got {np.shape(w)}.")
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}.")

    # One big projection, then a reshape: the same as n_heads separate small
    # projections of size hs, but a single matrix product.
    q = split_heads(x_q @ w_q, n_heads)  # (B, nh, L_q, hs)
    k = split_heads(x_kv @ w_k, n_heads)  # (B, nh, L_k, hs)
    v = split_heads(x_kv @ w_v, n_heads)  # (B, nh, L_k, hs)
    heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, nh, L_q, hs), (B, nh, L_q, L_k)
    output = merge_heads(heads) @ w_o  # (B, L_q, d_model): w_o mixes what the heads found
    return output, weights


# ----------------------------------------------------------------------------
# The rest of a Transformer block


def layer_norm(x, gamma, beta, eps=1e-5):
    """Normalise each vector over the last axis, then scale by gamma and shift by beta.

    x: (..., d); gamma, beta: (d,). Uses the biased variance (divide by d, not d - 1),
    as torch.nn.LayerNorm does; eps keeps the division finite for a constant vector.
    """
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # (..., 1)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


# math.erf works on one number; np.vectorize applies it elementwise (a Python
# loop in disguise: slow, but exact and this is the reference, not the fast path).
_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x, approximate="none"):
    """GELU(x) = x * Phi(x), Phi the standard normal CDF.

    approximate="none": exact, Phi(x) = (1 + erf(x / sqrt(2))) / 2 (torch's default).
    approximate="tanh": the tanh approximation used by GPT-2 and BERT's original code.
    """
    x = np.asarray(x, dtype=np.float64)
    if approximate == "none":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    raise ValueError(f'approximate must be "none" or "tanh", got {approximate!r}.')


def _activation(h, activation):
    if activation == "gelu":
        return gelu(h)
    if activation == "gelu_tanh":
        return gelu(h, approximate="tanh")
    if activation == "relu":
        return np.maximum(h, 0.0)
    raise ValueError(f'activation must be "gelu", "gelu_tanh" or "relu", got {activation!r}.')


def feed_forward(x, w1, b1, w2, b2, activation="gelu"):
    """The position-wise feed-forward network: act(x @ w1 + b1) @ w2 + b2.

    x: (..., d_model); w1: (d_model, d_ff); b1: (d_ff,); w2: (d_ff, d_model); b2: (d_model,).
    Each position is transformed on its own; positions only mix in attention.
    """
    x = np.asarray(x, dtype=np.float64)
    h = _activation(x @ w1 + b1, activation)  # (..., d_ff)
    return h @ w2 + b2  # (..., d_model)


def sinusoidal_positions(n, d):
    """Sinusoidal position encodings of "Attention Is All You Need", (n, d) float64.

    PE[pos, 2i]   = sin(pos / 10000^(2i/d))
    PE[pos, 2i+1] = cos(pos / 10000^(2i/d))
    Each pair of columns is a clock of its own frequency, from one turn every 2*pi
    positions (i = 0) down to one every 2*pi*10000 positions.
    """
    if d % 2 != 0:
        raise ValueError(f"d must be even (sin and cos come in pairs), got d={d}.")
    pos = np.arange(n, dtype=np.float64)[:, None]  # (n, 1)
    two_i = np.arange(0, d, 2, dtype=np.float64)  # (d/2,): 0, 2, 4, ...
    angles = pos / 10000.0 ** (two_i / d)  # (n, d/2)
    pe = np.zeros((n, d), dtype=np.float64)
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe
