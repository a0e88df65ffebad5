"""Tiny BERT, GPT and BART, built from the course's own blocks (`plmcourse.nn.TransformerBlock`).

    BERT  encoder-only:     token + segment + position embeddings, bidirectional blocks,
                            a pooler on [CLS], heads for masked LM and next-sentence prediction
    GPT   decoder-only:     token + position embeddings, causally masked blocks, an LM head
    BART  encoder-decoder:  a BERT-like encoder, a GPT-like decoder whose blocks also
                            attend to the encoder's output (cross-attention)

The same classes describe the real models: `BertConfig(vocab_size=30522, d_model=768,
n_layers=12, n_heads=12)` is BERT-base, and `plmcourse.nn.parameter_count` gives its
size without building it. ALBERT is a BertConfig with `embedding_size` (a factorised
embedding) and `share_layers=True` (one block used in every layer).

Weights start as in BERT and GPT-2: normal with std `init_std` (0.02), biases 0, LayerNorms 1 and 0.
Masks follow the course convention (bool, True = may attend); `attention_mask` and
`src_mask`/`tgt_mask` arguments are (B, T) and True for real tokens, False for padding.
Nothing assumes a device: masks are made on the device of the inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from plmcourse.nn.transformer import LearnedPositionEmbedding, SinusoidalPositionEmbedding, TransformerBlock

__all__ = [
    "BertConfig",
    "GPTConfig",
    "BartConfig",
    "BertEmbeddings",
    "Bert",
    "BertForPreTraining",
    "BertForSequenceClassification",
    "GPT",
    "Bart",
]


# ----------------------------------------------------------------------------
# Configurations


@dataclass
class BertConfig:
    """An encoder: BERT (defaults: post-LN, a pooler) or, with the last two switches, ALBERT."""

    vocab_size: int
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int | None = None  # default 4 * d_model
    max_len: int = 128
    type_vocab_size: int = 2  # segments A and B; 0: no segment embedding
    pooler: bool = True
    dropout: float = 0.1
    activation: str = "gelu"
    norm_first: bool = False  # BERT is post-LN; pre-LN adds a final LayerNorm
    embedding_size: int | None = None  # ALBERT: E < d_model, then a projection E -> d_model
    share_layers: bool = False  # ALBERT: one block's weights in every layer
    init_std: float = 0.02  # see _init_weights
    norm_eps: float = 1e-5  # LayerNorm epsilon; the real BERT and MiniLM use 1e-12

    def __post_init__(self):
        self.d_ff = 4 * self.d_model if self.d_ff is None else self.d_ff
        self.embedding_size = self.d_model if self.embedding_size is None else self.embedding_size


@dataclass
class GPTConfig:
    """A decoder-only LM: GPT-2 by default (pre-LN, a final LayerNorm, tied input/output embeddings)."""

    vocab_size: int
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int | None = None
    max_len: int = 128
    dropout: float = 0.1
    activation: str = "gelu"
    norm_first: bool = True  # GPT-1 was post-LN (norm_first=False, final_norm=False)
    final_norm: bool = True
    tie_embeddings: bool = True
    init_std: float = 0.02  # see _init_weights
    positions: str = "learned"  # or "sinusoidal" (fixed: a shift by one is the same map everywhere)

    def __post_init__(self):
        self.d_ff = 4 * self.d_model if self.d_ff is None else self.d_ff  # 0: attention-only blocks
        if self.positions not in ("learned", "sinusoidal"):
            raise ValueError(f'positions must be "learned" or "sinusoidal", got {self.positions!r}.')


@dataclass
class BartConfig:
    """An encoder-decoder with one token embedding shared by encoder, decoder and output layer."""

    vocab_size: int
    d_model: int = 64
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    n_heads: int = 4
    d_ff: int | None = None  # None: 4 * d_model
    max_len: int = 128  # the longest source, and the longest target
    dropout: float = 0.1
    activation: str = "gelu"
    norm_first: bool = True  # real BART is post-LN; pre-LN trains more easily when tiny
    embedding_norm: bool = True  # BART's LayerNorm right after the embeddings (encoder and decoder)
    init_std: float = 0.02  # see _init_weights

    def __post_init__(self):
        self.d_ff = 4 * self.d_model if self.d_ff is None else self.d_ff


def _init_weights(module, std=0.02):
    """BERT/GPT-2 initialisation: N(0, std^2) weights, zero biases; LayerNorms keep (1, 0).

    std = 0.02 is what BERT and GPT-2 use at d_model = 768 (about 0.5 / sqrt(d)). A tiny
    model with d_model = 64 learns much faster from a larger std, near 1 / sqrt(d): with
    0.02 every attention score starts so close to 0 that attention stays uniform for
    hundreds of steps before it learns where to look.
    """
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=std)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def _initialise(model, std):
    model.apply(lambda module: _init_weights(module, std))


def _key_mask(mask):
    """(B, T) bool, True for real tokens -> (B, 1, 1, T), broadcastable to (B, H, T_q, T)."""
    if mask is None:
        return None
    if mask.dtype != torch.bool or mask.dim() != 2:
        raise ValueError(f"a padding mask must be bool (B, T), True for real tokens; got "
                         f"{mask.dtype} {tuple(mask.shape)}.")
    return mask[:, None, None, :]


# ----------------------------------------------------------------------------
# BERT (and ALBERT)


class BertEmbeddings(nn.Module):
    """token + segment + position, then LayerNorm and dropout (and ALBERT's projection E -> d_model)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        E = config.embedding_size
        self.token = nn.Embedding(config.vocab_size, E)
        self.segment = nn.Embedding(config.type_vocab_size, E) if config.type_vocab_size else None
        self.position = LearnedPositionEmbedding(config.max_len, E)
        self.norm = nn.LayerNorm(E, eps=config.norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        # ALBERT: a V x E table plus an E x H map instead of a V x H table.
        self.project = nn.Linear(E, config.d_model) if E != config.d_model else None

    def forward(self, ids, segment_ids=None):
        """ids, segment_ids: (B, T) -> (B, T, d_model). Segments default to 0 (all sentence A)."""
        x = self.token(ids)  # (B, T, E)
        if self.segment is not None:
            x = x + self.segment(torch.zeros_like(ids) if segment_ids is None else segment_ids)
        x = self.dropout(self.norm(self.position(x)))
        return x if self.project is None else self.project(x)


class Bert(nn.Module):
    """The encoder: embeddings, n_layers bidirectional blocks, and a pooler on [CLS] (position 0)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        n_distinct = 1 if config.share_layers else config.n_layers
        self.blocks = nn.ModuleList(
            TransformerBlock(config.d_model, config.n_heads, config.d_ff, config.dropout,
                             norm_first=config.norm_first, activation=config.activation,
                             norm_eps=config.norm_eps)
            for _ in range(n_distinct))
        self.norm = nn.LayerNorm(config.d_model, eps=config.norm_eps) if config.norm_first else None
        self.pooler = nn.Linear(config.d_model, config.d_model) if config.pooler else None
        _initialise(self, config.init_std)

    def forward(self, ids, segment_ids=None, attention_mask=None):
        """ids (B, T) -> hidden states (B, T, d_model) and the pooled [CLS] vector (B, d_model) or None."""
        return self.from_embeddings(self.embeddings(ids, segment_ids), attention_mask)

    def from_embeddings(self, x, attention_mask=None):
        """The blocks, final norm and pooler on given input vectors x (B, T, d_model), e.g. the
        embeddings with soft prompt vectors put among them (plmcourse.nn.peft.SoftPrompt)."""
        mask = _key_mask(attention_mask)  # every query sees every real token: no causal mask
        for layer in range(self.config.n_layers):
            x = self.block(layer)(x, mask=mask)
        if self.norm is not None:
            x = self.norm(x)
        pooled = torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None
        return x, pooled

    def block(self, layer):
        """The block that computes layer `layer` (0-based); ALBERT reuses one block everywhere."""
        return self.blocks[0 if self.config.share_layers else layer]

    def all_layers(self, ids, segment_ids=None, attention_mask=None, return_weights=False):
        """Every layer's output, for looking inside the model (probes, attention maps).

        Returns a list of n_layers + 1 tensors (B, T, d_model): index 0 is the embedding
        output, index l the output of layer l (the last one is what forward returns).
        With return_weights=True also a list of n_layers attention maps (B, n_heads, T, T).
        """
        x = self.embeddings(ids, segment_ids)
        mask = _key_mask(attention_mask)
        hidden, weights = [x], []
        for layer in range(self.config.n_layers):
            if return_weights:
                x, w = self.block(layer)(x, mask=mask, return_weights=True)
                weights.append(w)
            else:
                x = self.block(layer)(x, mask=mask)
            hidden.append(x)
        if self.norm is not None:
            hidden[-1] = self.norm(x)
        return (hidden, weights) if return_weights else hidden


class BertForPreTraining(nn.Module):
    """BERT with its two pre-training heads: masked LM on every position, NSP on [CLS].

    The MLM head is a dense layer, GELU and LayerNorm, then the token embedding
    matrix again (tied weights) plus a bias per word.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = Bert(config)
        E = config.embedding_size
        self.mlm_dense = nn.Linear(config.d_model, E)
        self.mlm_activation = nn.GELU()
        self.mlm_norm = nn.LayerNorm(E)
        self.mlm_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.nsp_head = nn.Linear(config.d_model, 2)
        _init_weights(self.mlm_dense, config.init_std)
        _init_weights(self.nsp_head, config.init_std)

    def mlm_logits(self, hidden):
        """(B, T, d_model) -> (B, T, vocab_size)."""
        h = self.mlm_norm(self.mlm_activation(self.mlm_dense(hidden)))  # (B, T, E)
        return h @ self.bert.embeddings.token.weight.T + self.mlm_bias

    def forward(self, ids, segment_ids=None, attention_mask=None):
        """Returns MLM logits (B, T, V) and NSP logits (B, 2): is segment B the real next sentence?"""
        hidden, pooled = self.bert(ids, segment_ids, attention_mask)
        cls = pooled if pooled is not None else hidden[:, 0]
        return self.mlm_logits(hidden), self.nsp_head(cls)


class BertForSequenceClassification(nn.Module):
    """A (pre-trained or fresh) `Bert` plus one new linear layer on the pooled [CLS] vector."""

    def __init__(self, bert: Bert, n_classes: int, dropout: float = 0.1):
        super().__init__()
        self.bert = bert
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(bert.config.d_model, n_classes)
        _init_weights(self.classifier, bert.config.init_std)

    def forward(self, ids, segment_ids=None, attention_mask=None):
        """(B, T) -> class logits (B, n_classes)."""
        hidden, pooled = self.bert(ids, segment_ids, attention_mask)
        cls = pooled if pooled is not None else hidden[:, 0]
        return self.classifier(self.dropout(cls))


# ----------------------------------------------------------------------------
# GPT


def _add_decoder_layers(model, config: GPTConfig):
    """Give `model` what a GPT has after its embeddings, in this order: dropout, the causally masked
    blocks, the final LayerNorm (None without final_norm) and the output layer (None when tied).
    GPT and MemoryGPT (nn/memory.py) share it, so that their parameters line up."""
    model.dropout = nn.Dropout(config.dropout)
    model.blocks = nn.ModuleList(
        TransformerBlock(config.d_model, config.n_heads, config.d_ff, config.dropout,
                         norm_first=config.norm_first, activation=config.activation)
        for _ in range(config.n_layers))
    model.norm = nn.LayerNorm(config.d_model) if config.final_norm else None
    # Tied: the output layer reuses the token embedding (GPT-2); untied: its own V x d matrix.
    model.lm_head = None if config.tie_embeddings else nn.Linear(config.d_model, config.vocab_size, bias=False)


class GPT(nn.Module):
    """Decoder-only LM: token + position embeddings, causally masked blocks, logits for the next token."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.token = nn.Embedding(config.vocab_size, config.d_model)
        positions = LearnedPositionEmbedding if config.positions == "learned" else SinusoidalPositionEmbedding
        self.position = positions(config.max_len, config.d_model)
        _add_decoder_layers(self, config)
        _initialise(self, config.init_std)

    def hidden_states(self, ids, return_weights=False):
        """ids (B, T) -> (B, T, d_model); position t has seen ids[:, :t + 1] only.

        With return_weights=True also a list of n_layers attention maps (B, n_heads, T, T),
        rows are queries (computed by the explicit attention, as in notebook 03).
        """
        x = self.dropout(self.position(self.token(ids)))  # (B, T, d_model)
        weights = []
        for block in self.blocks:
            # is_causal: query t attends to keys 0..t; the fused kernel needs no (T, T) mask for it.
            if return_weights:
                x, w = block(x, is_causal=True, return_weights=True)  # w: (B, nh, T, T)
                weights.append(w)
            else:
                x = block(x, is_causal=True)  # (B, T, d_model)
        x = self.norm(x) if self.norm is not None else x
        return (x, weights) if return_weights else x

    def attention_maps(self, ids):
        """ids (B, T) -> a list of n_layers attention maps (B, n_heads, T, T)."""
        return self.hidden_states(ids, return_weights=True)[1]

    def forward(self, ids):
        """ids (B, T) -> logits (B, T, V): row t scores the token that comes after ids[:, t]."""
        h = self.hidden_states(ids)
        if self.lm_head is None:
            return h @ self.token.weight.T
        return self.lm_head(h)


# ----------------------------------------------------------------------------
# BART


class Bart(nn.Module):
    """Encoder-decoder: the encoder reads the corrupted text, the decoder writes the original.

    One token embedding serves the encoder input, the decoder input and (tied) the
    output layer. Each decoder block attends causally to the decoder's own ids and,
    through cross-attention, to every encoder output.
    """

    def __init__(self, config: BartConfig):
        super().__init__()
        self.config = config
        d = config.d_model
        self.token = nn.Embedding(config.vocab_size, d)
        self.encoder_position = LearnedPositionEmbedding(config.max_len, d)
        self.decoder_position = LearnedPositionEmbedding(config.max_len, d)
        self.encoder_embedding_norm = nn.LayerNorm(d) if config.embedding_norm else None
        self.decoder_embedding_norm = nn.LayerNorm(d) if config.embedding_norm else None
        self.dropout = nn.Dropout(config.dropout)

        def blocks(n, cross):
            return nn.ModuleList(
                TransformerBlock(d, config.n_heads, config.d_ff, config.dropout, norm_first=config.norm_first,
                                 activation=config.activation, cross_attention=cross)
                for _ in range(n))

        self.encoder_blocks = blocks(config.n_encoder_layers, cross=False)
        self.decoder_blocks = blocks(config.n_decoder_layers, cross=True)
        self.encoder_norm = nn.LayerNorm(d) if config.norm_first else None
        self.decoder_norm = nn.LayerNorm(d) if config.norm_first else None
        _initialise(self, config.init_std)

    def _embed(self, ids, position, norm):
        x = position(self.token(ids))
        return self.dropout(norm(x) if norm is not None else x)

    def encode(self, src, src_mask=None):
        """src (B, S) -> memory (B, S, d_model); src_mask (B, S) True for real tokens."""
        x = self._embed(src, self.encoder_position, self.encoder_embedding_norm)
        mask = _key_mask(src_mask)
        for block in self.encoder_blocks:
            x = block(x, mask=mask)
        return self.encoder_norm(x) if self.encoder_norm is not None else x

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None):
        """tgt (B, T), memory (B, S, d) -> logits (B, T, V) for the token after each tgt position."""
        x = self._embed(tgt, self.decoder_position, self.decoder_embedding_norm)
        self_mask = _key_mask(tgt_mask)  # (B, 1, 1, T) or None; is_causal adds "no key after the query"
        cross_mask = _key_mask(src_mask)  # (B, 1, 1, S): no query attends to source padding
        for block in self.decoder_blocks:
            x = block(x, mask=self_mask, is_causal=True, context=memory, context_mask=cross_mask)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return x @ self.token.weight.T

    def forward(self, src, tgt, src_mask=None, tgt_mask=None):
        """Teacher forcing: logits (B, T, V) for every decoder position at once."""
        return self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)
