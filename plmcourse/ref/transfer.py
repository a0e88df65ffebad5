"""Transfer beyond one language, one kind of text, one way of fine-tuning, in NumPy (notebook 13).

    alignment_precision_at_1(src_emb, tgt_emb, train_pairs, test_pairs)
        how well two word-vector tables line up under a dictionary: an orthogonal (Procrustes) map fitted
        on the train pairs, then precision@1 of cosine nearest neighbours on the test pairs
    whole_entity_mask(token_ids, entity_spans, budget, rng, mask_id, vocab_size) -> (inputs, labels)
        ERNIE's masking: whole entities (and single tokens outside them) up to a budget, 80/10/10 per unit
    unfreezing_groups(n_layers, step, unfreeze_every, base_lr, decay) -> {group: learning rate}
        ULMFiT's gradual unfreezing (top first) with discriminative learning rates

plmcourse.nn.transfer applies them to the course's BERT.
"""

from __future__ import annotations

import numpy as np

from plmcourse.ref.objectives import IGNORE_INDEX

__all__ = ["unit_rows", "procrustes", "nearest_neighbours", "alignment_precision_at_1", "entity_units",
           "whole_entity_mask", "group_names", "unfreezing_groups"]


# ----------------------------------------------------------------------------
# Cross-lingual alignment


def unit_rows(x):
    """Each row divided by its length; a row of zeros stays zeros (its cosine with anything is 0)."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)  # (n, 1)
    return x / np.where(norms == 0, 1.0, norms)


def procrustes(x, y):
    """The orthogonal W (d, d) that minimises ||x W - y||: W = U V^T, where U S V^T = svd(x^T y)."""
    u, _, vt = np.linalg.svd(x.T @ y)  # x, y: (k, d) paired rows
    return u @ vt


def nearest_neighbours(queries, table):
    """For each query row, the index of the table row with the highest cosine (ties: the lowest index)."""
    return (unit_rows(queries) @ unit_rows(table).T).argmax(axis=1)  # (n_queries,)


def alignment_precision_at_1(src_emb, tgt_emb, train_pairs, test_pairs):
    """Precision@1 of a dictionary's held-out translations after an orthogonal map.

    src_emb (n_src, d), tgt_emb (n_tgt, d): word vectors; train_pairs, test_pairs (k, 2): (source row,
    target row) translations. Rows are first scaled to unit length (zero rows stay zero). W = U V^T from
    the SVD of X^T Y, X and Y the unit rows of the train pairs (source rows, target rows). A test source
    s is mapped to x_s W, and its nearest target is the row of the whole target table with the largest
    cosine (ties: the lowest index). The score is the fraction of distinct test sources whose nearest
    target is one of their test translations (a source with two translations counts once).
    """
    x, y = unit_rows(src_emb), unit_rows(tgt_emb)
    train, test = np.asarray(train_pairs), np.asarray(test_pairs)
    w = procrustes(x[train[:, 0]], y[train[:, 1]])  # (d, d)
    sources = np.unique(test[:, 0])  # each source once
    nearest = nearest_neighbours(x[sources] @ w, y)  # (n_sources,)
    right = [nearest[i] in set(test[test[:, 0] == s, 1].tolist()) for i, s in enumerate(sources)]
    return float(np.mean(right))


# ----------------------------------------------------------------------------
# Whole-entity masking


def entity_units(length, spans):
    """The units of one sentence: each entity span (start, end) and each position outside every span."""
    units = [(int(s), int(e)) for s, e in spans]
    covered = np.zeros(length, dtype=bool)
    for s, e in units:
        covered[s:e] = True
    return units + [(i, i + 1) for i in np.flatnonzero(~covered)]


def whole_entity_mask(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """Choose whole units up to `budget` tokens per row, and corrupt each chosen unit as one.

    token_ids: (B, T) ints; entity_spans: B lists of (start, end) spans (end excluded), non-overlapping,
    in any order. A unit is an entity span or a single position outside every span. For each row: go
    through its units in the order of rng.permutation(number of units); take a unit if its length fits in
    what is left of the budget (skip it otherwise, and go on). Each taken unit draws u = rng.random() once:
    u < 0.8: every token of it -> mask_id; 0.8 <= u < 0.9: each token -> a random id, uniform over
    0..vocab_size-1 without mask_id; otherwise unchanged. Returns (inputs, labels): labels hold the
    original token at the chosen positions and -100 elsewhere.
    """
    tokens = np.asarray(token_ids)
    inputs = tokens.copy()
    labels = np.full(tokens.shape, IGNORE_INDEX, dtype=np.int64)
    replacements = np.array([i for i in range(vocab_size) if i != mask_id])
    for row in range(tokens.shape[0]):
        units = entity_units(tokens.shape[1], entity_spans[row])
        left = budget
        for u in rng.permutation(len(units)):
            start, end = units[u]
            if end - start > left:
                continue  # too long for what is left; a shorter unit later may still fit
            left -= end - start
            labels[row, start:end] = tokens[row, start:end]
            action = rng.random()  # one draw for the whole unit
            if action < 0.8:
                inputs[row, start:end] = mask_id
            elif action < 0.9:
                inputs[row, start:end] = replacements[rng.integers(0, len(replacements), end - start)]
    return inputs, labels


# ----------------------------------------------------------------------------
# Gradual unfreezing and discriminative learning rates


def group_names(n_layers):
    """The groups from the top down: "head", "layer.{n_layers - 1}", ..., "layer.0", "embeddings"."""
    return ["head", *(f"layer.{i}" for i in reversed(range(n_layers))), "embeddings"]


def unfreezing_groups(n_layers, step, unfreeze_every, base_lr, decay):
    """{group: learning rate at this step}, 0.0 for a frozen group.

    Groups as group_names gives them; group k from the top (head 0, top layer 1, ..., embeddings
    n_layers + 1) has the rate base_lr * decay ** k and trains from step k * unfreeze_every on (step
    0-based): the head from the start, then one more group every unfreeze_every steps, top first.
    unfreeze_every=0: every group trains from step 0.
    """
    return {name: float(base_lr * decay ** k) if step >= k * unfreeze_every else 0.0
            for k, name in enumerate(group_names(n_layers))}
