"""Transformer blocks and position embeddings in PyTorch.

A block is two (or three) sub-layers, each wrapped in a residual connection and a
LayerNorm:

    pre-LN  (norm_first=True,  GPT-2 and most models since):  x = x + sublayer(ln(x))
    post-LN (norm_first=False, the original Transformer, BERT): x = ln(x + sublayer(x))

The attribute names (self_attn, norm1, norm2, ff.linear1, ff.linear2) follow
torch.nn.TransformerEncoderLayer, so weights can be copied across one to one
(its self_attn.in_proj_weight is our self_attn.qkv_proj.weight: W_q, W_k, W_v stacked).
"""

import torch
from torch import nn

from plmcourse.nn.attention import MultiHeadAttention

__all__ = [
    "FeedForward",
    "TransformerBlock",
    "sinusoidal_positions",
    "SinusoidalPositionEmbedding",
    "LearnedPositionEmbedding",
]


def _make_activation(activation):
    if activation == "gelu":
        return nn.GELU()  # exact, erf-based
    if activation == "gelu_tanh":
        return nn.GELU(approximate="tanh")
    if activation == "relu":
        return nn.ReLU()
    raise ValueError(f'activation must be "gelu", "gelu_tanh" or "relu", got {activation!r}.')


class FeedForward(nn.Module):
    """Position-wise feed-forward network: linear2(act(linear1(x))).

    (B, T, d_model) -> (B, T, d_ff) -> (B, T, d_model); every position separately.
    No dropout inside, as in GPT-2 and BERT: the block drops the output. (torch's
    TransformerEncoderLayer also drops the d_ff-wide hidden layer, which keeps a mask
    four times the width of the residual stream per layer for the backward pass.)
    """

    def __init__(self, d_model, d_ff, activation="gelu", bias=True):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.activation = _make_activation(activation)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        h = self.activation(self.linear1(x))  # (B, T, d_ff)
        return self.linear2(h)  # (B, T, d_model)


class TransformerBlock(nn.Module):
    """Self-attention, optional cross-attention, feed-forward; each with residual + LayerNorm.

    With cross_attention=True the block is a decoder block of an encoder-decoder
    model: between self-attention and the feed-forward network, its queries attend
    to `context` (the encoder's output).
    """

    def __init__(
        self,
        d_model,
        n_heads,
        d_ff=None,
        dropout=0.0,
        norm_first=True,
        activation="gelu",
        bias=True,
        cross_attention=False,
        impl="fused",
        norm_eps=1e-5,
    ):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias, impl=impl)
        # norm_eps: PyTorch's default 1e-5; the real BERT checkpoints were trained with 1e-12.
        self.norm1 = nn.LayerNorm(d_model, eps=norm_eps, bias=bias)
        if cross_attention:
            self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias, impl=impl)
            self.norm_cross = nn.LayerNorm(d_model, eps=norm_eps, bias=bias)
        else:
            self.cross_attn = None
            self.norm_cross = None
        # d_ff=0: no feed-forward sub-layer at all, an attention-only block (notebook 11's
        # induction heads: with nothing but attention, every computation is a head's).
        self.ff = FeedForward(d_model, d_ff, activation=activation, bias=bias) if d_ff else None
        self.norm2 = nn.LayerNorm(d_model, eps=norm_eps, bias=bias) if d_ff else None
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None, context=None, context_mask=None, return_weights=False, is_causal=False):
        """
        x: (B, T, d_model); mask: bool, broadcastable to (B, n_heads, T, T), True = may attend.
        is_causal: each position attends to itself and the positions before it (a decoder).
        context: (B, S, d_model), needed by a cross-attention block;
        context_mask: bool, broadcastable to (B, n_heads, T, S).
        Returns (B, T, d_model); with return_weights=True also the self-attention
        weights (B, n_heads, T, T), computed by the explicit path.
        """
        if self.cross_attn is not None and context is None:
            raise ValueError("this block has cross-attention: pass context=(B, S, d_model).")
        if self.cross_attn is None and context is not None:
            raise ValueError("context was given but the block has no cross-attention (cross_attention=False).")

        def attend(h):  # self-attention, and its weights when asked for
            if return_weights:
                return self.self_attn(h, mask=mask, is_causal=is_causal, return_weights=True)
            return self.self_attn(h, mask=mask, is_causal=is_causal), None

        # Each sub-layer's output goes through dropout before it is added to the residual stream.
        if self.norm_first:  # pre-LN (GPT-2):  x = x + sublayer(ln(x))
            # The residual stream x itself is never normalised: gradients reach early
            # layers unchanged, which is why pre-LN trains without warm-up.
            y, weights = attend(self.norm1(x))
            x = x + self.dropout(y)
            if self.cross_attn is not None:
                x = x + self.dropout(self.cross_attn(self.norm_cross(x), context=context, mask=context_mask))
            if self.ff is not None:
                x = x + self.dropout(self.ff(self.norm2(x)))
        else:  # post-LN (the original Transformer, BERT):  x = ln(x + sublayer(x))
            y, weights = attend(x)
            x = self.norm1(x + self.dropout(y))
            if self.cross_attn is not None:
                x = self.norm_cross(x + self.dropout(self.cross_attn(x, context=context, mask=context_mask)))
            if self.ff is not None:
                x = self.norm2(x + self.dropout(self.ff(x)))
        return (x, weights) if return_weights else x  # (B, T, d_model)


# ----------------------------------------------------------------------------
# Position embeddings: attention itself ignores order, so we add position information.


def sinusoidal_positions(n, d, dtype=torch.float32, device=None):
    """(n, d) sinusoidal encodings, the formula of `plmcourse.ref.sinusoidal_positions`.

    PE[pos, 2i] = sin(pos / 10000^(2i/d)),  PE[pos, 2i+1] = cos(pos / 10000^(2i/d)).
    Computed in float64 and then cast, so float64 results equal the reference.
    """
    if d % 2 != 0:
        raise ValueError(f"d must be even (sin and cos come in pairs), got d={d}.")
    pos = torch.arange(n, dtype=torch.float64, device=device)[:, None]  # (n, 1)
    two_i = torch.arange(0, d, 2, dtype=torch.float64, device=device)  # (d/2,)
    angles = pos / 10000.0 ** (two_i / d)  # (n, d/2)
    pe = torch.zeros(n, d, dtype=torch.float64, device=device)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.to(dtype)


def _check_length(T, max_len):
    if T > max_len:
        raise ValueError(f"sequence length {T} exceeds max_len={max_len} of the position embedding.")


class SinusoidalPositionEmbedding(nn.Module):
    """x + PE[:T] with fixed sinusoidal encodings (nothing to learn)."""

    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        # A buffer moves with .to(device) but is not a parameter; not persistent,
        # because the formula rebuilds it: checkpoints need not store it.
        self.register_buffer("pe", sinusoidal_positions(max_len, d_model), persistent=False)

    def forward(self, x):
        """x: (B, T, d_model) -> (B, T, d_model)."""
        T = x.shape[1]
        _check_length(T, self.max_len)
        return x + self.pe[:T].to(x.dtype)  # (B, T, d) + (T, d) broadcasts over the batch


class LearnedPositionEmbedding(nn.Module):
    """x + E[:T] with a learned vector E[pos] per position (as in BERT and GPT-2)."""

    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        # GPT-2 and BERT start position embeddings at std 0.02 (nn.Embedding's
        # default is std 1): small, so the model first sees mostly the tokens.
        nn.init.normal_(self.embedding.weight, mean=0.0, std=0.02)

    def forward(self, x):
        """x: (B, T, d_model) -> (B, T, d_model)."""
        T = x.shape[1]
        _check_length(T, self.max_len)
        positions = torch.arange(T, device=x.device)  # (T,)
        return x + self.embedding(positions)  # (B, T, d) + (T, d)
