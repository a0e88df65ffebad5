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

# Pre-training objectives (notebooks 04-06): losses, BERT/BART/T5 corruption, UniLM/XLNet masks.
from plmcourse.ref.objectives import (  # noqa: E402
    causal_lm_loss,
    cross_entropy,
    document_rotation,
    mlm_loss,
    mlm_mask,
    permutation_mask,
    prefix_lm_mask,
    sentence_permutation,
    t5_span_corruption,
    text_infilling,
    token_deletion,
    token_masking,
)
from plmcourse.ref.generate import top_k_filter, top_p_filter  # noqa: E402

__all__ += [
    "cross_entropy", "causal_lm_loss", "mlm_loss", "mlm_mask", "token_masking", "token_deletion",
    "text_infilling", "sentence_permutation", "document_rotation", "t5_span_corruption",
    "prefix_lm_mask", "permutation_mask", "top_k_filter", "top_p_filter",
]
