"""Checks that the notebooks' visible and hidden tests call."""

from plmcourse.grading.attention import (
    check_causal_mask,
    check_multi_head_attention,
    check_scaled_dot_product_attention,
    check_softmax,
)
from plmcourse.grading.core import CheckFailed
from plmcourse.grading.welcome import check_normalize

__all__ = [
    "CheckFailed",
    "check_normalize",
    "check_softmax",
    "check_scaled_dot_product_attention",
    "check_causal_mask",
    "check_multi_head_attention",
]

# Word vectors and language models (notebooks 01-02).
from plmcourse.grading.language_models import (  # noqa: E402
    check_bilm_loss,
    check_cross_entropy,
    check_scalar_mix,
)
from plmcourse.grading.word_vectors import (  # noqa: E402
    check_log_softmax,
    check_noise_distribution,
    check_skipgram_negative_sampling_loss,
)

__all__ += [
    "check_log_softmax", "check_noise_distribution", "check_skipgram_negative_sampling_loss",
    "check_cross_entropy", "check_bilm_loss", "check_scalar_mix",
]

# Pre-training objectives, decoding filters, masks and parameter counts (notebooks 04-06).
from plmcourse.grading.bert import check_bert_parameter_count, check_mlm_loss, check_mlm_mask  # noqa: E402
from plmcourse.grading.gpt import check_causal_lm_loss, check_top_k_filter, check_top_p_filter  # noqa: E402
from plmcourse.grading.bart import check_permutation_mask, check_prefix_lm_mask, check_text_infilling  # noqa: E402

__all__ += [
    "check_mlm_mask", "check_mlm_loss", "check_bert_parameter_count", "check_causal_lm_loss",
    "check_top_k_filter", "check_top_p_filter", "check_text_infilling", "check_prefix_lm_mask",
    "check_permutation_mask",
]

# Inside a real BERT: WordPiece and mean pooling (notebook 07).
from plmcourse.grading.sentence_embeddings import check_mean_pool  # noqa: E402
from plmcourse.grading.wordpiece import check_wordpiece  # noqa: E402

__all__ += ["check_wordpiece", "check_mean_pool"]
