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

from plmcourse.ref.attention import __all__ as _attention_names

# Every name below is listed once, in the module that defines it (its __all__) or in an += further down.
__all__ = list(_attention_names)

# Pre-training objectives (notebooks 04-06): losses, BERT/BART/T5 corruption, UniLM/XLNet masks.
from plmcourse.ref.objectives import cross_entropy  # noqa: E402
from plmcourse.ref.bert import mlm_loss, mlm_mask  # noqa: E402
from plmcourse.ref.gpt import causal_lm_loss  # noqa: E402
from plmcourse.ref.bart import (  # noqa: E402
    document_rotation,
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

# Word vectors and language models (notebooks 01-02).
from plmcourse.ref.word_vectors import (  # noqa: E402
    WordVectors,
    analogy,
    cbow_forward,
    cooccurrence_counts,
    cosine_similarity,
    evaluate_analogies,
    evaluate_similarity,
    glove_loss,
    glove_weight,
    log_sigmoid,
    log_softmax,
    nearest_neighbours,
    noise_distribution,
    numerical_gradient,
    one_hot,
    pca,
    ppmi,
    sample_negatives,
    sigmoid,
    skipgram_negative_sampling_loss,
    skipgram_softmax_loss,
    spearman,
    svd_vectors,
)
from plmcourse.ref.language_models import NGramLM, bilm_loss, perplexity, scalar_mix  # noqa: E402

__all__ += [
    "log_softmax", "log_sigmoid", "sigmoid", "one_hot", "cooccurrence_counts", "ppmi", "svd_vectors",
    "skipgram_negative_sampling_loss", "skipgram_softmax_loss", "cbow_forward", "glove_weight",
    "glove_loss", "noise_distribution", "sample_negatives", "numerical_gradient", "cosine_similarity", "pca",
    "nearest_neighbours", "analogy", "spearman", "evaluate_similarity", "evaluate_analogies",
    "WordVectors", "perplexity", "NGramLM", "bilm_loss", "scalar_mix",
]

# Sentence embeddings (notebooks 07-08).
from plmcourse.ref.sentence_embeddings import (  # noqa: E402
    alignment,
    anisotropy,
    bootstrap_interval,
    cosine_matrix,
    info_nce_loss,
    max_pool,
    mean_pool,
    retrieval_accuracy,
    uniformity,
    whiten,
    whitening,
)

__all__ += ["mean_pool", "max_pool", "cosine_matrix", "anisotropy", "whitening", "whiten", "info_nce_loss",
            "alignment", "uniformity", "retrieval_accuracy", "bootstrap_interval"]  # spearman: above

# Parameter-efficient fine-tuning (notebook 09).
from plmcourse.ref.peft import attention_with_prefix, lora_forward, lora_merge  # noqa: E402

__all__ += ["attention_with_prefix", "lora_forward", "lora_merge"]

# In-context learning: what a head looks at (notebook 11).
from plmcourse.ref.icl import induction_score, latest_earlier_occurrence, previous_token_score  # noqa: E402

__all__ += ["induction_score", "previous_token_score", "latest_earlier_occurrence"]

# Smaller and faster: distillation's loss and int8 quantization (notebook 12).
from plmcourse.ref.efficiency import dequantize, distillation_loss, quantize_int8  # noqa: E402

__all__ += ["distillation_loss", "quantize_int8", "dequantize"]

# Prompting with little data (notebook 10): verbalizers, PET's soft labels, self-training.
from plmcourse.ref.prompting import pet_soft_labels, select_pseudo_labels, verbalizer_log_probs  # noqa: E402

__all__ += ["verbalizer_log_probs", "pet_soft_labels", "select_pseudo_labels"]

# Text and images (notebook 14): patch tokens, the single-stream mask, CLIP's loss, recall@k.
from plmcourse.ref.multimodal import clip_loss, joint_attention_mask, patchify, recall_at_k, unpatchify  # noqa: E402

__all__ += ["patchify", "unpatchify", "joint_attention_mask", "clip_loss", "recall_at_k"]

# Beyond one language (notebook 13): cross-lingual alignment, whole-entity masking, gradual unfreezing.
from plmcourse.ref.transfer import alignment_precision_at_1, unfreezing_groups, whole_entity_mask  # noqa: E402

__all__ += ["alignment_precision_at_1", "whole_entity_mask", "unfreezing_groups"]

# From GPT-3 to ChatGPT (notebook 15): the SFT, Bradley-Terry and DPO losses.
from plmcourse.ref.instruct import bradley_terry_loss, dpo_loss, sft_loss  # noqa: E402

__all__ += ["sft_loss", "bradley_terry_loss", "dpo_loss"]
