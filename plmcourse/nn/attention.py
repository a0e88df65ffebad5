"""Attention in PyTorch: the readable computation, the fused kernel, and multi-head attention.

Same names, argument order and conventions as `plmcourse.ref.attention`:

    q (..., L_q, d_k)   k (..., L_k, d_k)   v (..., L_k, d_v)   usually (B, nh, L, hs)

Masks are bool and True where attention is ALLOWED (as in
torch.nn.functional.scaled_dot_product_attention), broadcastable to (..., L_q, L_k).
A query with no allowed key gets zero weights and a zero output, never NaN, in
the forward pass and in the gradients.

Nothing here assumes CUDA: every tensor is created on the device of the inputs.
"""

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask", "split_heads", "merge_heads",
           "MultiHeadAttention", "ablate_heads"]


# ----------------------------------------------------------------------------
# Softmax and scaled dot-product attention


def softmax(x, dim=-1):
    """Softmax along `dim`, where a slice that is entirely -inf gives zeros, not NaN.

    torch.softmax returns NaN for such a slice (0/0), and NaN then spreads through
    the backward pass too. This is the same stable recipe as `plmcourse.ref.softmax`.
    """
    # Subtracting the max changes nothing mathematically but keeps exp from
    # overflowing. It is a constant shift, so no gradient needs to flow through it.
    x_max = x.amax(dim=dim, keepdim=True).detach()
    # An all -inf slice: subtract 0 instead of -inf, so exp gives exactly 0 there.
    x_max = torch.where(x_max == float("-inf"), 0.0, x_max)
    e = torch.exp(x - x_max)
    total = e.sum(dim=dim, keepdim=True)
    # total is 0 only for an all -inf slice; dividing by 1 keeps its zeros (and
    # a zero gradient) instead of 0/0.
    return e / torch.where(total == 0, 1.0, total)


def _check_inputs(q, k, v, mask):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension d_k, got {q.shape[-1]} and {k.shape[-1]}.")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of positions L_k, got {k.shape[-2]} and {v.shape[-2]}.")
    if mask is None:
        return
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = may attend), got dtype {mask.dtype}.")
    scores_shape = (*q.shape[:-1], k.shape[-2])  # (..., L_q, L_k)
    try:
        torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
            f"{tuple(scores_shape)} (..., L_q, L_k)."
        ) from None


def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0, impl="explicit", is_causal=False):
    """softmax(q k^T / sqrt(d_k)) v, with an optional bool mask and dropout on the weights.

    q: (..., L_q, d_k)   k: (..., L_k, d_k)   v: (..., L_k, d_v)
    mask: bool, broadcastable to (..., L_q, L_k), True where query i may attend to key j.
    is_causal: query i may also attend only to keys 0..i (as torch's `is_causal`). The fused
        kernel then never builds a mask at all; with a mask as well, the two are combined.
    dropout_p: dropout on the attention weights; callers pass
        `dropout_p if self.training else 0.0`, since this function has no train/eval mode.
    impl: "explicit" computes every step below (and can return the weights);
        "fused" calls torch.nn.functional.scaled_dot_product_attention, which
        never materialises the (L_q, L_k) weights on GPU kernels and is much
        faster, but therefore returns None for them.
    Returns output (..., L_q, d_v) and weights (..., L_q, L_k) (None when fused).
    The weights returned are those multiplied with v, i.e. after dropout.
    """
    if impl not in ("explicit", "fused"):
        raise ValueError(f'impl must be "explicit" or "fused", got {impl!r}.')
    _check_inputs(q, k, v, mask)
    if is_causal and (mask is not None or impl == "explicit"):
        mask, is_causal = _and_causal(mask, q.shape[-2], k.shape[-2], q.device), False
    if impl == "fused":
        return _fused_attention(q, k, v, mask, dropout_p, is_causal), None

    d_k = q.shape[-1]
    # Dividing by sqrt(d_k) keeps the scores' variance near 1 whatever d_k is. Scaling q
    # (L_q x d_k numbers) is cheaper than scaling the scores (L_q x L_k numbers).
    scores = (q * (1.0 / math.sqrt(d_k))) @ k.transpose(-2, -1)  # (..., L_q, L_k)
    if mask is not None:
        # The most negative float rather than -inf: exp() of it is exactly 0, and a row
        # with no allowed key becomes a uniform softmax instead of 0/0 = NaN ...
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)  # (..., L_q, L_k)
    if mask is not None:
        # ... which we then set to zero: a query with no key to attend to reads nothing.
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    output = weights @ v  # (..., L_q, d_v)
    return output, weights


def _fused_attention(q, k, v, mask, dropout_p, is_causal):
    """F.scaled_dot_product_attention, made safe for queries that may attend to nothing.

    torch 2.13's CPU kernels and its math kernel already return zeros for a fully
    masked row, but not every kernel has (CUDA's memory-efficient kernel returned
    NaN for such rows in earlier releases). So we do not rely on it: such a row
    is opened to every key, which gives any kernel an ordinary softmax, and its
    output is set to zero afterwards. A few cheap passes over the mask, and no
    `if` on its values: that would make the CPU wait for the GPU in every layer.
    """
    if mask is None:  # no mask, or only the causal one: the kernel knows that shape itself
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=is_causal)
    has_key = mask.any(dim=-1, keepdim=True)  # (..., L_q, 1): may this query attend anywhere?
    output = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~has_key, dropout_p=dropout_p)
    # torch.where, not a product: its gradient to the discarded rows is exactly 0.
    return torch.where(has_key, output, 0.0)  # (..., L_q, d_v)


# ----------------------------------------------------------------------------
# Masks


def causal_mask(n, n_keys=None, device=None):
    """Bool (n, n_keys), True on and below the diagonal: position i may attend to 0..i.

    n_keys defaults to n (self-attention); otherwise query i still sees keys 0..i,
    the alignment torch's `is_causal` uses.
    """
    n_keys = n if n_keys is None else n_keys
    return torch.ones(n, n_keys, dtype=torch.bool, device=device).tril()


def _and_causal(mask, n_queries, n_keys, device):
    """`mask` (or nothing) combined with the causal mask, as one bool tensor (..., L_q, L_k)."""
    causal = causal_mask(n_queries, n_keys, device=device)
    return causal if mask is None else mask & causal


def padding_mask(lengths, max_len):
    """Bool (B, 1, 1, max_len), True for real tokens, False for padding.

    lengths: (B,) number of real tokens per sequence (a tensor, on the device the
    mask should live on, or a list). Broadcasts to (B, H, L_q, max_len).
    """
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be one-dimensional (B,), got shape {tuple(lengths.shape)}.")
    if (lengths > max_len).any() or (lengths < 0).any():
        raise ValueError(f"every length must lie in 0..max_len={max_len}, got {lengths.tolist()}.")
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    mask = positions[None, :] < lengths[:, None]  # (B, max_len)
    return mask[:, None, None, :]  # (B, 1, 1, max_len)


# ----------------------------------------------------------------------------
# Multi-head attention


def split_heads(x, n_heads):
    """(B, L, d_model) -> (B, n_heads, L, d_model // n_heads); any leading dims work."""
    d_model = x.shape[-1]
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}.")
    # reshape, not view: it still makes no copy for a contiguous x, and also accepts others.
    x = x.reshape(*x.shape[:-1], n_heads, d_model // n_heads)  # (B, L, nh, hs)
    return x.transpose(-3, -2)  # (B, nh, L, hs)


def merge_heads(x):
    """(B, n_heads, L, hs) -> (B, L, n_heads * hs), the inverse of `split_heads`."""
    n_heads, head_size = x.shape[-3], x.shape[-1]
    x = x.transpose(-3, -2)  # (B, L, nh, hs)
    # transpose only changes strides; reshape copies into the (B, L, d_model) layout.
    return x.reshape(*x.shape[:-2], n_heads * head_size)  # (B, L, d_model)


class MultiHeadAttention(nn.Module):
    """Multi-head attention: project, split into heads, attend, merge, project back.

    Self-attention when `context` is None (queries, keys and values all come from x);
    cross-attention otherwise (queries from x, keys and values from `context`).
    `dropout` is applied to the attention weights, in training mode only.

    The query, key and value projections are one nn.Linear, `qkv_proj` (d_model -> 3 d_model,
    the rows of W_q, then W_k, then W_v): one matrix product instead of three, as in GPT-2
    and nanoGPT. Checkpoints with three separate q_proj, k_proj and v_proj (the course's
    older ones, Hugging Face's BERT after renaming) load too: they are stacked on loading.
    """

    def __init__(self, d_model, n_heads, dropout=0.0, bias=True, impl="fused"):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}.")
        if impl not in ("explicit", "fused"):
            raise ValueError(f'impl must be "explicit" or "fused", got {impl!r}.')
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.dropout = dropout
        self.impl = impl
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, context=None, mask=None, is_causal=False, return_weights=False, prefix=None):
        """
        x: (B, L_q, d_model); context: (B, L_k, d_model) or None (then L_k = L_q).
        mask: bool, broadcastable to (B, n_heads, L_q, L_k), True = may attend.
        is_causal: query i attends to keys 0..i only (a decoder), without a mask tensor.
        prefix: optional (prefix_k, prefix_v), each (B or 1, n_heads, P, head_dim),
            extra keys and values put in front of the projected ones (prefix tuning).
            Every query may attend to them: the mask gets P True columns in front.
        Returns output (B, L_q, d_model), or (output, weights) with weights
        (B, n_heads, L_q, P + L_k) when return_weights=True.
        """
        q, k, v = self.project(x, context)  # (B, L_q, d), (B, L_k, d), (B, L_k, d)
        q = split_heads(q, self.n_heads)  # (B, nh, L_q, hs)
        k = split_heads(k, self.n_heads)  # (B, nh, L_k, hs)
        v = split_heads(v, self.n_heads)  # (B, nh, L_k, hs)

        if prefix is not None:
            if is_causal:  # "key j <= query i" must count from the first real key: spell the mask out
                mask, is_causal = _and_causal(mask, q.shape[2], k.shape[2], q.device), False
            k, v, mask = self._add_prefix(k, v, mask, prefix, x.shape[0])  # (B, nh, P + L_k, hs)

        # Only the explicit path can give the weights back.
        impl = "explicit" if return_weights else self.impl
        dropout_p = self.dropout if self.training else 0.0
        y, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=dropout_p, impl=impl,
                                                  is_causal=is_causal)
        y = self.out_proj(merge_heads(y))  # (B, L_q, d_model)
        if return_weights:
            return y, weights
        return y

    def project(self, x, context=None):
        """Queries from x, keys and values from context (x itself when None): each (B, L, d_model)."""
        d = self.d_model
        if context is None:  # self-attention: one matrix product gives all three
            return self.qkv_proj(x).split(d, dim=-1)
        # Cross-attention: the queries' third of the weights on x, the rest on the context.
        weight, bias = self.qkv_proj.weight, self.qkv_proj.bias  # (3d, d), (3d,)
        q = F.linear(x, weight[:d], None if bias is None else bias[:d])  # (B, L_q, d)
        kv = F.linear(context, weight[d:], None if bias is None else bias[d:])  # (B, L_k, 2d)
        return (q, *kv.split(d, dim=-1))

    def _add_prefix(self, k, v, mask, prefix, B):
        """Put the prefix keys/values in front of k and v; extend the mask to match."""
        prefix_k, prefix_v = prefix
        expected = (self.n_heads, self.head_dim)
        for name, p in (("prefix_k", prefix_k), ("prefix_v", prefix_v)):
            if p.dim() != 4 or (p.shape[1], p.shape[3]) != expected or p.shape[0] not in (1, B):
                raise ValueError(
                    f"{name} must have shape (B or 1, {self.n_heads}, P, {self.head_dim}), got {tuple(p.shape)}."
                )
        # expand shares one prefix across the batch without copying it.
        k = torch.cat([prefix_k.expand(B, -1, -1, -1), k], dim=2)  # (B, nh, P + L_k, hs)
        v = torch.cat([prefix_v.expand(B, -1, -1, -1), v], dim=2)  # (B, nh, P + L_k, hs)
        if mask is not None:
            n_prefix = prefix_k.shape[2]
            L_k = k.shape[2] - n_prefix
            # A mask may broadcast over keys (last dim 1): make that dim explicit first.
            mask = mask.expand(*mask.shape[:-1], L_k)  # (..., L_q, L_k)
            allowed = mask.new_ones(*mask.shape[:-1], n_prefix)  # (..., L_q, P)
            mask = torch.cat([allowed, mask], dim=-1)  # (..., L_q, P + L_k)
        return k, v, mask

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # A checkpoint with separate q_proj, k_proj and v_proj: stack them into qkv_proj.
        for kind in ("weight", "bias"):
            parts = [f"{prefix}{name}_proj.{kind}" for name in "qkv"]
            if all(part in state_dict for part in parts):
                state_dict[f"{prefix}qkv_proj.{kind}"] = torch.cat([state_dict.pop(part) for part in parts])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


# ----------------------------------------------------------------------------
# Ablating heads: what does the model do without them?


@contextlib.contextmanager
def ablate_heads(model, heads):
    """Inside the `with`, the outputs of the given heads are zero; the model is unchanged after.

    model: any module whose blocks' self-attention is a MultiHeadAttention named `self_attn`
        (GPT, Bert, the transformer blocks); layer i is the i-th such module.
    heads: pairs (layer, head), e.g. [(1, 3)].

    A hook on each output projection zeroes the head's slice of the merged heads
    (B, T, n_heads * head_dim) before it is projected: the head reads and attends as
    before, but what it writes into the residual stream is gone. No copy of the model is
    made, and the fused and explicit attention paths are ablated alike.
    """
    layers = [m for name, m in model.named_modules() if name.split(".")[-1] == "self_attn"]
    by_layer = {}
    for layer, head in heads:
        if not 0 <= layer < len(layers) or not 0 <= head < layers[layer].n_heads:
            raise ValueError(f"no head {head} in layer {layer}: the model has {len(layers)} layers "
                             f"of {layers[0].n_heads if layers else 0} heads.")
        by_layer.setdefault(layer, []).append(head)

    def hook_for(attention, dropped):
        def zero_heads(module, args):
            merged = args[0].unflatten(-1, (attention.n_heads, attention.head_dim))  # (B, T, nh, hs)
            keep = torch.ones(attention.n_heads, 1, dtype=merged.dtype, device=merged.device)
            keep[dropped] = 0.0
            return ((merged * keep).flatten(-2),)  # (B, T, nh * hs)
        return zero_heads

    handles = [layers[layer].out_proj.register_forward_pre_hook(hook_for(layers[layer], dropped))
               for layer, dropped in by_layer.items()]
    try:
        yield model
    finally:
        for handle in handles:
            handle.remove()
