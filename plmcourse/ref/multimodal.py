"""Text and images (notebook 14), NumPy: images as patch tokens, the single-stream attention mask, CLIP's loss.

    patchify(images, patch)                       (B, C, H, W) -> (B, N, C * patch * patch)
    joint_attention_mask(text_mask, image_mask)   (B, T), (B, N) -> (B, T + N, T + N) bool
    clip_loss(image_emb, text_emb, temperature)   the symmetric contrastive loss, a float
    recall_at_k(similarity, k, relevant=None)     retrieval's recall@k
"""

from __future__ import annotations

import numpy as np

from plmcourse.ref.objectives import _log_softmax  # one stable log-softmax for the references

__all__ = ["patchify", "unpatchify", "joint_attention_mask", "clip_loss", "recall_at_k"]


def patchify(images, patch):
    """Cut (B, C, H, W) images into non-overlapping patch x patch squares: (B, N, C * patch * patch).

    N = (H / patch) * (W / patch). The patches come in row-major order: the top row of patches left to
    right, then the next row. Each patch is flattened channel first, then pixel row, then pixel column:
    entry c * patch * patch + i * patch + j of patch (r, s) is images[b, c, r * patch + i, s * patch + j]
    (the order of torch's F.unfold and of a ViT's Conv2d patch embedding). Keeps the images' dtype.
    Raises ValueError when H or W is not a multiple of patch.
    """
    images = np.asarray(images)
    B, C, H, W = images.shape
    if H % patch or W % patch:
        raise ValueError(f"the image size {H} x {W} is not a multiple of patch={patch}")
    gh, gw = H // patch, W // patch
    x = images.reshape(B, C, gh, patch, gw, patch)   # (B, C, gh, p, gw, p)
    x = x.transpose(0, 2, 4, 1, 3, 5)                 # (B, gh, gw, C, p, p)
    return x.reshape(B, gh * gw, C * patch * patch)   # (B, N, C p p)


def unpatchify(patches, patch, height, width):
    """The inverse of patchify: (B, N, C * patch * patch) -> (B, C, height, width)."""
    B, N, D = patches.shape
    C, gh, gw = D // (patch * patch), height // patch, width // patch
    x = patches.reshape(B, gh, gw, C, patch, patch).transpose(0, 3, 1, 4, 2, 5)  # (B, C, gh, p, gw, p)
    return x.reshape(B, C, height, width)


def joint_attention_mask(text_mask, image_mask):
    """The attention mask of a single-stream model over the sequence [text; image].

    text_mask (B, T), image_mask (B, N): True (or 1) for a real token, False (0) for padding.
    Returns (B, T + N, T + N) bool, True = query i may attend to key j: every real token, text or image,
    attends to every real token of both; a padding position is never attended to, and attends to itself
    only (so that its row is not empty: a softmax over no key is NaN; its output is ignored anyway).
    mask[b, i, j] = (real[b, i] and real[b, j]) or i == j.
    """
    real = np.concatenate([np.asarray(text_mask).astype(bool), np.asarray(image_mask).astype(bool)], axis=1)
    L = real.shape[1]
    both = real[:, :, None] & real[:, None, :]       # (B, L, L): query i real and key j real
    return both | np.eye(L, dtype=bool)[None]        # each position attends to itself


def _unit_rows(x):
    """Each row divided by its length; a zero row stays zero (cosine 0 with everything)."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def clip_loss(image_emb, text_emb, temperature=0.07):
    """CLIP's symmetric contrastive loss for B matching pairs (row i of each is pair i).

    Both embeddings are L2-normalised row by row (a zero row stays zero); logits = image @ text.T /
    temperature, (B, B), with the matching pairs on the diagonal. The loss is the mean of two
    cross-entropies with targets 0..B-1: each image against all the texts (the rows of the logits) and
    each text against all the images (the columns), each averaged over the batch. A float.
    """
    img = _unit_rows(np.asarray(image_emb, dtype=np.float64))
    txt = _unit_rows(np.asarray(text_emb, dtype=np.float64))
    logits = img @ txt.T / temperature                      # (B, B)
    rows = np.arange(len(logits))
    image_to_text = -_log_softmax(logits, axis=1)[rows, rows].mean()
    text_to_image = -_log_softmax(logits, axis=0)[rows, rows].mean()
    return float((image_to_text + text_to_image) / 2)


def recall_at_k(similarity, k, relevant=None):
    """The fraction of queries (rows) with a relevant item (column) among their k most similar.

    similarity (Q, M); relevant (Q, M) bool, default the diagonal (query i's item is column i).
    Ties are broken by column order (a stable sort), so the answer is reproducible."""
    similarity = np.asarray(similarity, dtype=np.float64)
    if relevant is None:
        relevant = np.eye(*similarity.shape, dtype=bool)
    top = np.argsort(-similarity, axis=1, kind="stable")[:, :k]   # (Q, k)
    return float(np.take_along_axis(relevant, top, axis=1).any(axis=1).mean())
