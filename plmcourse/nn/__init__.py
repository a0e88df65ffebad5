"""PyTorch implementations (CPU and CUDA) with the same names and conventions as `plmcourse.ref`."""

from plmcourse.nn.attention import (
    MultiHeadAttention,
    causal_mask,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    softmax,
    split_heads,
)
from plmcourse.nn.device import default_device
from plmcourse.nn.transformer import (
    FeedForward,
    LearnedPositionEmbedding,
    SinusoidalPositionEmbedding,
    TransformerBlock,
    sinusoidal_positions,
)

__all__ = [
    "default_device",
    "softmax",
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
    "FeedForward",
    "TransformerBlock",
    "sinusoidal_positions",
    "SinusoidalPositionEmbedding",
    "LearnedPositionEmbedding",
]
