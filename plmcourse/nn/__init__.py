"""PyTorch implementations (CPU and CUDA) with the same names and conventions as `plmcourse.ref`."""

from plmcourse.nn.attention import (
    MultiHeadAttention,
    ablate_heads,
    causal_mask,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    softmax,
    split_heads,
)
from plmcourse.nn.device import default_device, one_cpu_thread, use_one_cpu_thread
from plmcourse.nn.transformer import (
    FeedForward,
    LearnedPositionEmbedding,
    SinusoidalPositionEmbedding,
    TransformerBlock,
    sinusoidal_positions,
)

from plmcourse.nn.attention import __all__ as _attention_names
from plmcourse.nn.transformer import __all__ as _transformer_names

# The attention and transformer names are listed once, in their modules' __all__.
__all__ = ["default_device", "one_cpu_thread", "use_one_cpu_thread", *_attention_names, *_transformer_names]

# Pre-training objectives, tiny BERT/GPT/BART, decoding and parameter counts (notebooks 04-06).
from plmcourse.nn.objectives import cross_entropy  # noqa: E402
from plmcourse.nn.bert import mlm_loss  # noqa: E402
from plmcourse.nn.gpt import causal_lm_loss  # noqa: E402
from plmcourse.nn.models import (  # noqa: E402
    Bart,
    BartConfig,
    Bert,
    BertConfig,
    BertEmbeddings,
    BertForPreTraining,
    BertForSequenceClassification,
    GPT,
    GPTConfig,
)
from plmcourse.nn.generate import generate, sample_next, top_k_filter, top_p_filter  # noqa: E402
from plmcourse.nn.param_count import (  # noqa: E402
    albert_savings,
    block_parameter_count,
    parameter_count,
)

__all__ += [
    "cross_entropy", "causal_lm_loss", "mlm_loss",
    "BertConfig", "GPTConfig", "BartConfig", "BertEmbeddings", "Bert", "BertForPreTraining",
    "BertForSequenceClassification", "GPT", "Bart",
    "generate", "sample_next", "top_k_filter", "top_p_filter",
    "parameter_count", "block_parameter_count", "albert_savings",
]

# Word vectors and ELMo (notebooks 01-02).
from plmcourse.nn.word_vectors import (  # noqa: E402
    cbow_negative_sampling_loss,
    glove_loss,
    noise_distribution,
    skipgram_negative_sampling_loss,
    skipgram_pairs,
    subsample,
    train_cbow,
    train_glove,
    train_skipgram,
)
from plmcourse.nn.elmo import BiLM, ScalarMix, bilm_loss, reverse_padded, scalar_mix  # noqa: E402

__all__ += [
    "skipgram_negative_sampling_loss", "cbow_negative_sampling_loss", "glove_loss", "noise_distribution",
    "subsample", "skipgram_pairs", "train_skipgram", "train_cbow", "train_glove",
    "BiLM", "ScalarMix", "scalar_mix", "bilm_loss", "reverse_padded",
]

# Sentence embeddings (notebooks 07-08): pooling, InfoNCE and SimCSE training.
from plmcourse.nn.sentence_embeddings import (  # noqa: E402
    POOLINGS, alignment, bert_batch, cls_pool, embed, encode, info_nce_loss, max_pool, mean_pool, set_dropout,
    train_simcse, uniformity,
)
from plmcourse.nn.sentence_embeddings import (  # noqa: E402  (notebook 08's other families)
    AUGMENTATIONS, AffineCoupling, Flow, apply_flow, byol_loss, ema_update, project_byol, prompt_embed, token_cutoff,
    token_shuffle, train_byol, train_consert, train_flow,
)

__all__ += ["mean_pool", "max_pool", "cls_pool", "POOLINGS", "info_nce_loss", "alignment", "uniformity", "embed",
            "bert_batch", "encode", "set_dropout", "train_simcse"]
__all__ += ["token_cutoff", "token_shuffle", "AUGMENTATIONS", "train_consert", "byol_loss", "ema_update",
            "train_byol", "project_byol", "prompt_embed", "AffineCoupling", "Flow", "train_flow", "apply_flow"]

# Looking inside a trained model: probes, self-similarity, attention shares (notebook 07).
from plmcourse.nn.probing import anisotropy, attention_shares, linear_probe, self_similarity  # noqa: E402
from plmcourse.nn.probing import control_labels, mlp_probe, selectivity_by_layer, top_directions  # noqa: E402
from plmcourse.nn.probing import word_vectors_by_layer  # noqa: E402

__all__ += ["linear_probe", "self_similarity", "anisotropy", "attention_shares", "mlp_probe", "control_labels",
            "selectivity_by_layer", "top_directions", "word_vectors_by_layer"]

# Parameter-efficient fine-tuning (notebook 09): the methods live in plmcourse.nn.peft.
from plmcourse.nn import peft  # noqa: E402
from plmcourse.nn.peft import LoRALinear, count_trainable_parameters  # noqa: E402

__all__ += ["peft", "LoRALinear", "count_trainable_parameters"]

# Smaller and faster (notebook 12): distillation, int8 quantization.
from plmcourse.nn.distillation import distillation_loss, student_from_teacher  # noqa: E402
from plmcourse.nn.quantization import (  # noqa: E402
    QuantizedLinear,
    dequantize,
    fake_quantize,
    model_bytes,
    quantize_int8,
    quantize_linears,
)

__all__ += ["distillation_loss", "student_from_teacher", "quantize_int8", "dequantize", "fake_quantize",
            "QuantizedLinear", "quantize_linears", "model_bytes"]

# Pruning (notebook 12): magnitude masks; heads go with ablate_heads.
from plmcourse.nn.pruning import apply_masks, magnitude_masks, prunable_weights  # noqa: E402

__all__ += ["prunable_weights", "magnitude_masks", "apply_masks"]

# Prompting with little data (notebook 10): verbalizers, PET's soft labels, self-training.
from plmcourse.nn.prompting import pet_soft_labels, select_pseudo_labels, verbalizer_log_probs  # noqa: E402

__all__ += ["verbalizer_log_probs", "pet_soft_labels", "select_pseudo_labels"]

# Text and images (notebook 14): the models and objectives live in plmcourse.nn.multimodal.
from plmcourse.nn import multimodal  # noqa: E402

__all__ += ["multimodal"]

# Beyond one language (notebook 13): pre-training and fine-tuning helpers live in plmcourse.nn.transfer.
from plmcourse.nn import transfer  # noqa: E402

__all__ += ["transfer"]
