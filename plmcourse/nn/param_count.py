"""How many parameters a model has, from its configuration alone (no weights are built).

The counts follow `plmcourse.nn.models` exactly (a test builds tiny models and
compares with `sum(p.numel() for p in model.parameters())`), and for the real
configurations they give the published figures:

    BERT-base (with pooler)    109,482,240      GPT-2 small   124,439,808
    BERT-large (with pooler)   335,141,888

Where the parameters of a Transformer block of width d (d_ff = 4d) are:

    attention   4 (d^2 + d)          Q, K, V and output projections, with biases
    FFN         2 d d_ff + d_ff + d  two linear layers
    LayerNorms  2 x 2d               a scale and a shift each
                --------------
                12 d^2 + 13 d        (+ 4 d^2 + 6 d more for a decoder's cross-attention)
"""

from __future__ import annotations

from plmcourse.nn.models import BartConfig, BertConfig, GPTConfig

__all__ = [
    "attention_parameter_count",
    "block_parameter_count",
    "bert_parameter_count",
    "gpt_parameter_count",
    "bart_parameter_count",
    "parameter_count",
    "albert_savings",
    "PUBLISHED",
]


def attention_parameter_count(d_model: int) -> int:
    """Q, K, V and output projections, each d x d with a bias of d."""
    return 4 * (d_model * d_model + d_model)


def block_parameter_count(d_model: int, d_ff: int, cross_attention: bool = False) -> int:
    """One TransformerBlock: self-attention, FFN, two LayerNorms (+ cross-attention and its LayerNorm)."""
    attention = attention_parameter_count(d_model)
    ffn = d_model * d_ff + d_ff + d_ff * d_model + d_model if d_ff else 0  # d_ff=0: attention only
    norms = (2 if d_ff else 1) * (2 * d_model)
    extra = attention + 2 * d_model if cross_attention else 0
    return attention + ffn + norms + extra


def bert_parameter_count(config: BertConfig, heads: bool = False) -> int:
    """BertConfig -> count of `Bert` (heads=False) or `BertForPreTraining` (heads=True).

    Published BERT sizes count the encoder with its pooler and without the
    pre-training heads (the MLM output layer reuses the token embedding anyway).
    """
    V, H, E = config.vocab_size, config.d_model, config.embedding_size
    embeddings = (V + config.max_len + config.type_vocab_size) * E + 2 * E  # three tables + LayerNorm
    if E != H:
        embeddings += E * H + H  # ALBERT's projection from E up to H
    n_distinct = 1 if config.share_layers else config.n_layers
    total = embeddings + n_distinct * block_parameter_count(H, config.d_ff)
    if config.norm_first:
        total += 2 * H  # the final LayerNorm of a pre-LN stack
    if config.pooler:
        total += H * H + H
    if heads:
        total += H * E + E + 2 * E + V  # MLM: dense, LayerNorm, output bias (the matrix is tied)
        total += 2 * H + 2  # NSP: a linear layer to two classes
    return total


def gpt_parameter_count(config: GPTConfig) -> int:
    """GPTConfig -> count of `GPT`: embeddings, blocks, final LayerNorm, untied output layer if any."""
    V, H = config.vocab_size, config.d_model
    positions = config.max_len * H if config.positions == "learned" else 0  # sinusoidal: nothing learned
    total = V * H + positions + config.n_layers * block_parameter_count(H, config.d_ff)
    if config.final_norm:
        total += 2 * H
    if not config.tie_embeddings:
        total += V * H
    return total


def bart_parameter_count(config: BartConfig) -> int:
    """BartConfig -> count of `Bart`: one shared token embedding, two position tables, two stacks."""
    V, H = config.vocab_size, config.d_model
    total = V * H + 2 * config.max_len * H
    if config.embedding_norm:
        total += 2 * (2 * H)
    total += config.n_encoder_layers * block_parameter_count(H, config.d_ff)
    total += config.n_decoder_layers * block_parameter_count(H, config.d_ff, cross_attention=True)
    if config.norm_first:
        total += 2 * (2 * H)
    return total


def parameter_count(config, heads: bool = False) -> int:
    """The parameter count of the model a BertConfig, GPTConfig or BartConfig describes."""
    if isinstance(config, BertConfig):
        return bert_parameter_count(config, heads=heads)
    if isinstance(config, GPTConfig):
        return gpt_parameter_count(config)
    if isinstance(config, BartConfig):
        return bart_parameter_count(config)
    raise TypeError(f"expected a BertConfig, GPTConfig or BartConfig, got {type(config).__name__}.")


def albert_savings(config: BertConfig) -> dict:
    """What ALBERT's two tricks save against the same BERT without them.

    factorised_embedding: V*H  ->  V*E + E*H (+ H bias), fewer when E << H;
    shared_layers: n_layers blocks -> 1 block.
    Returns the counts with neither, with each and with both, and the two savings.
    """
    from dataclasses import replace

    plain = replace(config, embedding_size=config.d_model, share_layers=False)
    factorised = replace(config, share_layers=False)
    shared = replace(config, embedding_size=config.d_model, share_layers=True)
    counts = {name: bert_parameter_count(c) for name, c in
              (("bert", plain), ("factorised", factorised), ("shared", shared), ("albert", config))}
    counts["factorised_embedding_saves"] = counts["bert"] - counts["factorised"]
    counts["shared_layers_saves"] = counts["bert"] - counts["shared"]
    return counts


def _bert(V, H, L, A, d_ff, **kw):
    return BertConfig(vocab_size=V, d_model=H, n_layers=L, n_heads=A, d_ff=d_ff, max_len=512, **kw)


def _gpt(H, L, A, max_len, V=50257, **kw):
    return GPTConfig(vocab_size=V, d_model=H, n_layers=L, n_heads=A, max_len=max_len, **kw)


# Real configurations and the sizes their authors (or the reference implementations) report.
# "exact": the count of the released checkpoint; otherwise the rounded figure of the paper.
PUBLISHED = {
    "BERT-base": (_bert(30522, 768, 12, 12, 3072), 109_482_240, "exact"),
    "BERT-large": (_bert(30522, 1024, 24, 16, 4096), 335_141_888, "exact"),
    "ALBERT-base": (_bert(30000, 768, 12, 12, 3072, embedding_size=128, share_layers=True), 12e6, "paper"),
    "ALBERT-large": (_bert(30000, 1024, 24, 16, 4096, embedding_size=128, share_layers=True), 18e6, "paper"),
    "ALBERT-xlarge": (_bert(30000, 2048, 24, 16, 8192, embedding_size=128, share_layers=True), 60e6, "paper"),
    "ALBERT-xxlarge": (_bert(30000, 4096, 12, 64, 16384, embedding_size=128, share_layers=True), 235e6, "paper"),
    "GPT-1": (_gpt(768, 12, 12, 512, V=40478, norm_first=False, final_norm=False), 117e6, "paper"),
    "GPT-2 small": (_gpt(768, 12, 12, 1024), 124_439_808, "exact"),
    "GPT-2 medium": (_gpt(1024, 24, 16, 1024), 354_823_168, "exact"),
    "GPT-2 large": (_gpt(1280, 36, 20, 1024), 774_030_080, "exact"),
    "GPT-2 XL": (_gpt(1600, 48, 25, 1024), 1_557_611_200, "exact"),
    "GPT-3": (_gpt(12288, 96, 96, 2048), 175e9, "paper"),
}
