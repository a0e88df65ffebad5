"""Plots and widgets the notebooks share, so that each notebook cell stays about one idea."""

from __future__ import annotations

import zlib
from typing import Callable

import numpy as np

from plmcourse import ref


def plot_attention(weights, query_tokens, key_tokens=None, ax=None, title=None, cmap="viridis"):
    """Heatmap of one attention matrix: rows are queries, columns are keys, each row sums to 1."""
    import matplotlib.pyplot as plt

    weights = np.asarray(weights)
    key_tokens = query_tokens if key_tokens is None else key_tokens
    if ax is None:
        _, ax = plt.subplots(figsize=(0.5 * len(key_tokens) + 2, 0.5 * len(query_tokens) + 1.5))
    image = ax.imshow(weights, cmap=cmap, vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(key_tokens)), key_tokens, rotation=60, ha="right")
    ax.set_yticks(range(len(query_tokens)), query_tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    return ax


def plot_mask(mask, ax=None, title=None):
    """Boolean mask as a picture: filled where attention is allowed."""
    import matplotlib.pyplot as plt

    mask = np.asarray(mask, dtype=bool)
    if ax is None:
        _, ax = plt.subplots(figsize=(3, 3))
    ax.imshow(mask, cmap="Greys", vmin=0, vmax=1)
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    if title:
        ax.set_title(title)
    return ax


def word_vector(word: str, dim: int) -> np.ndarray:
    """A fixed random unit vector per word: the same word always gets the same vector."""
    rng = np.random.default_rng(zlib.crc32(word.encode("utf-8")))
    v = rng.standard_normal(dim)
    return v / np.linalg.norm(v)


def explore_weights(tokens, head, embed: Callable, scale=True, mask="none", n_pad=2):
    """The attention weights the explorer draws, as a plain function a test can call.

    head is a pair (w_q, w_k); mask is "none", "causal" or "padding" (then n_pad
    padding tokens are appended and no query may attend to them).
    Returns (weights (L, L), tokens shown).
    """
    tokens = list(tokens) + (["<pad>"] * n_pad if mask == "padding" else [])
    x = embed(tokens)                                        # (L, d)
    w_q, w_k = head
    q, k = x @ w_q, x @ w_k                                  # (L, d_k) each
    if not scale:  # undo the 1/sqrt(d_k) that scaled_dot_product_attention applies
        q = q * np.sqrt(q.shape[-1])
    n = len(tokens)
    allowed = None
    if mask == "causal":
        allowed = ref.causal_mask(n)
    elif mask == "padding":
        allowed = ref.padding_mask([n - n_pad], n)[0, 0]    # (1, L): the same for every query
    _, weights = ref.scaled_dot_product_attention(q, k, k, allowed)
    return weights, tokens


def attention_explorer(heads: dict, embed: Callable, sentence="the cat sat on the mat because the mat was warm"):
    """An ipywidgets explorer: type a sentence, pick a head, toggle scaling and a mask."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    text = widgets.Text(value=sentence, description="sentence", layout=widgets.Layout(width="60%"))
    head = widgets.Dropdown(options=list(heads), description="head")
    scale = widgets.Checkbox(value=True, description="divide by sqrt(d_k)")
    mask = widgets.Dropdown(options=["none", "causal", "padding"], description="mask")

    def draw(sentence, head_name, scaled, mask_kind):
        tokens = sentence.split() or ["(empty)"]
        weights, shown = explore_weights(tokens, heads[head_name], embed, scaled, mask_kind)
        plot_attention(weights, shown, title=f"head: {head_name}, mask: {mask_kind}")
        plt.show()

    return widgets.interactive(draw, sentence=text, head_name=head, scaled=scale, mask_kind=mask)
