"""NumPy reference implementations: float64, readable, loops allowed where they teach."""

from plmcourse.ref.attention import (
    causal_mask,
    feed_forward,
    gelu,
    layer_norm,
    merge_heads,
    multi_head_attention,
    padding_mask,
    scaled_dot_product_attention,
    sinusoidal_positions,
    softmax,
    split_heads,
)

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
