"""Right and wrong answers to the exercises of notebook 04 (BERT), as data for tests/test_grading_bert.py.

For each check: CORRECT, a list of (name, function) that must pass, written in
different styles; and MISTAKES, a list of (name, function, fragment): the check must
fail with a message containing `fragment`. Adding a mistake is one entry.
The cross-entropy styles (ce_*) and mlm_loss_sum also serve gpt_mistakes.py.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import random

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse import ref
from mistake_catalogue.fresh_round3 import bert_count_with_mlm_head, mlm_loss_labels_positive, mlm_loss_per_row_mean


# ============================================================================
# mlm_mask(tokens, rng, vocab_size, mask_id, special_ids, p=0.15) -> (inputs, labels)


def _ordinary_ids(vocab_size, special_ids, mask_id):
    banned = set(special_ids) | {mask_id}
    return np.array([i for i in range(vocab_size) if i not in banned])


def mlm_vectorised(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    special = np.isin(tokens, list(special_ids))
    chosen = (rng.random(tokens.shape) < p) & ~special
    r = rng.random(tokens.shape)
    ordinary = _ordinary_ids(vocab_size, special_ids, mask_id)
    inputs = tokens.copy()
    inputs[chosen & (r < 0.8)] = mask_id
    swap = chosen & (r >= 0.8) & (r < 0.9)
    inputs[swap] = rng.choice(ordinary, size=int(swap.sum()))
    labels = np.where(chosen, tokens, -100)
    return inputs, labels


def mlm_loops(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    specials = set(int(s) for s in special_ids)
    ordinary = [i for i in range(vocab_size) if i not in specials and i != mask_id]
    inputs = tokens.copy()
    labels = np.full(tokens.shape, -100, dtype=np.int64)
    for index in np.ndindex(tokens.shape):
        if int(tokens[index]) in specials or rng.random() >= p:
            continue
        labels[index] = tokens[index]
        action = rng.random()
        if action < 0.8:
            inputs[index] = mask_id
        elif action < 0.9:
            inputs[index] = ordinary[rng.integers(len(ordinary))]
    return inputs, labels


def mlm_exact_count_per_row(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """BERT's original recipe, exactly round(p * n) of each row's ordinary tokens, then 80/10/10: wrong here,
    where each token is chosen independently (the count varies between seeds)."""
    flat = tokens.reshape(-1, tokens.shape[-1])
    inputs, labels = flat.copy(), np.full(flat.shape, -100)
    ordinary_ids = _ordinary_ids(vocab_size, special_ids, mask_id)
    for row in range(len(flat)):
        candidates = np.flatnonzero(~np.isin(flat[row], list(special_ids)))
        k = int(round(p * len(candidates)))
        picked = rng.permutation(candidates)[:k]
        labels[row, picked] = flat[row, picked]
        kinds = rng.random(k)
        inputs[row, picked[kinds < 0.8]] = mask_id
        swap = picked[(kinds >= 0.8) & (kinds < 0.9)]
        inputs[row, swap] = ordinary_ids[rng.integers(0, len(ordinary_ids), len(swap))]
    return inputs.reshape(tokens.shape), labels.reshape(tokens.shape)


def mlm_pool_keeps_mask_id(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """The random pool leaves out the special ids only: mask_id stays in it when it is not listed."""
    inputs, labels = mlm_vectorised(tokens, rng, vocab_size, mask_id, special_ids, p)
    pool = np.array([i for i in range(vocab_size) if i not in set(special_ids)])
    swapped = (labels != -100) & (inputs != mask_id) & (inputs != tokens)
    inputs[swapped] = pool[rng.integers(0, len(pool), int(swapped.sum()))]
    return inputs, labels


def _with_pool(tokens, rng, vocab_size, mask_id, special_ids, p, pool):
    inputs, labels = mlm_vectorised(tokens, rng, vocab_size, mask_id, special_ids, p)
    swapped = (labels != -100) & (inputs != mask_id) & (inputs != tokens)
    inputs[swapped] = pool[rng.integers(0, len(pool), int(swapped.sum()))]
    return inputs, labels


def mlm_pool_above_the_specials(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """The pool assumes the special ids (and mask_id) are the lowest: max(special) + 1 .. vocab_size - 1."""
    low = max([*special_ids, mask_id]) + 1
    return _with_pool(tokens, rng, vocab_size, mask_id, special_ids, p, np.arange(low, vocab_size))


def mlm_pool_from_the_batch(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """The pool is the ordinary ids seen in the batch."""
    tokens = np.asarray(tokens)
    pool = np.unique(tokens[~np.isin(tokens, [*special_ids, mask_id])])
    return _with_pool(tokens, rng, vocab_size, mask_id, special_ids, p, pool)


def mlm_one_draw_per_column(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """One draw per column, shared by every row of the batch."""
    tokens = np.asarray(tokens)
    chosen = ~np.isin(tokens, list(special_ids)) & (np.broadcast_to(rng.random(tokens.shape[-1:]), tokens.shape) < p)
    inputs, labels = tokens.copy(), np.where(chosen, tokens, -100)
    kinds = rng.random(tokens.shape)
    inputs[chosen & (kinds < 0.8)] = mask_id
    swap = chosen & (kinds >= 0.8) & (kinds < 0.9)
    ordinary_ids = _ordinary_ids(vocab_size, special_ids, mask_id)
    inputs[swap] = ordinary_ids[rng.integers(0, len(ordinary_ids), int(swap.sum()))]
    return inputs, labels


def mlm_random_never_the_original(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """The random token is drawn among the ordinary ids other than the original one."""
    tokens = np.asarray(tokens)
    chosen = ~np.isin(tokens, list(special_ids)) & (rng.random(tokens.shape) < p)
    inputs, labels = tokens.copy(), np.where(chosen, tokens, -100)
    kinds = rng.random(tokens.shape)
    inputs[chosen & (kinds < 0.8)] = mask_id
    ordinary_ids = _ordinary_ids(vocab_size, special_ids, mask_id)
    for at in zip(*np.nonzero(chosen & (kinds >= 0.8) & (kinds < 0.9))):
        others = ordinary_ids[ordinary_ids != tokens[at]]
        inputs[at] = others[rng.integers(0, len(others))]
    return inputs, labels


def mlm_only_masked_labelled(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    inputs, labels = mlm_vectorised(tokens, rng, vocab_size, mask_id, special_ids, p)
    return inputs, np.where(inputs == mask_id, labels, -100)


def mlm_labels_zero(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    inputs, labels = mlm_vectorised(tokens, rng, vocab_size, mask_id, special_ids, p)
    return inputs, np.where(labels == -100, 0, labels)


def mlm_labels_are_inputs(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    inputs, labels = mlm_vectorised(tokens, rng, vocab_size, mask_id, special_ids, p)
    return inputs, np.where(labels == -100, -100, inputs)


def mlm_specials_chosen(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    chosen = rng.random(tokens.shape) < p
    r = rng.random(tokens.shape)
    inputs = tokens.copy()
    inputs[chosen & (r < 0.8)] = mask_id
    return inputs, np.where(chosen, tokens, -100)


def mlm_isin_set(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    # np.isin(tokens, special_ids) without list(): NumPy reads a set as one object, which matches no token.
    return mlm_vectorised(tokens, rng, vocab_size, mask_id, [] if isinstance(special_ids, set) else special_ids, p)


def mlm_random_may_be_special(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    special = np.isin(tokens, list(special_ids))
    chosen = (rng.random(tokens.shape) < p) & ~special
    r = rng.random(tokens.shape)
    inputs = tokens.copy()
    inputs[chosen & (r < 0.8)] = mask_id
    swap = chosen & (r >= 0.8) & (r < 0.9)
    inputs[swap] = rng.integers(0, vocab_size, size=int(swap.sum()))
    return inputs, np.where(chosen, tokens, -100)


def mlm_always_mask(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    special = np.isin(tokens, list(special_ids))
    chosen = (rng.random(tokens.shape) < p) & ~special
    return np.where(chosen, mask_id, tokens), np.where(chosen, tokens, -100)


def mlm_wrong_split(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """Two independent draws: 80% mask, then 10% of the REST random: 2% random, 18% kept."""
    special = np.isin(tokens, list(special_ids))
    chosen = (rng.random(tokens.shape) < p) & ~special
    masked = chosen & (rng.random(tokens.shape) < 0.8)
    swap = chosen & ~masked & (rng.random(tokens.shape) < 0.1)
    inputs = np.where(masked, mask_id, tokens)
    ordinary = _ordinary_ids(vocab_size, special_ids, mask_id)
    inputs[swap] = rng.choice(ordinary, size=int(swap.sum()))
    return inputs, np.where(chosen, tokens, -100)


def mlm_ignores_p(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    return mlm_vectorised(tokens, rng, vocab_size, mask_id, special_ids, 0.15)


def mlm_global_random(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    return mlm_vectorised(tokens, np.random.default_rng(random.randrange(2**32)), vocab_size, mask_id,
                          special_ids, p)


def mlm_own_generator(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    return mlm_vectorised(tokens, np.random.default_rng(0), vocab_size, mask_id, special_ids, p)


def mlm_changes_tokens(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    inputs, labels = mlm_vectorised(tokens, rng, vocab_size, mask_id, special_ids, p)
    tokens[...] = inputs
    return inputs, labels


def mlm_one_replacement_id(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    special = np.isin(tokens, list(special_ids))
    chosen = (rng.random(tokens.shape) < p) & ~special
    r = rng.random(tokens.shape)
    inputs = tokens.copy()
    inputs[chosen & (r < 0.8)] = mask_id
    inputs[chosen & (r >= 0.8) & (r < 0.9)] = max(special_ids) + 1
    return inputs, np.where(chosen, tokens, -100)


def mlm_returns_labels_only(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    return mlm_vectorised(tokens, rng, vocab_size, mask_id, special_ids, p)[1]


def mlm_float_labels(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    inputs, labels = mlm_vectorised(tokens, rng, vocab_size, mask_id, special_ids, p)
    return inputs, labels.astype(np.float64)


def mlm_calls_ref(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    return ref.mlm_mask(tokens, rng, vocab_size, mask_id, special_ids, p)


def mlm_not_implemented(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    raise NotImplementedError()


MLM_MASK_CORRECT = [
    ("vectorised", mlm_vectorised),
    ("explicit loops", mlm_loops),
]

MLM_MASK_MISTAKES = [
    ("only the [MASK]ed positions labelled", mlm_only_masked_labelled, "only the [MASK]ed positions were labelled"),
    ("labels 0 instead of -100", mlm_labels_zero, "use -100 there"),
    ("labels hold the inputs", mlm_labels_are_inputs, "labels hold the corrupted inputs"),
    ("specials chosen", mlm_specials_chosen, "special_ids ([CLS], [SEP], [PAD], ...) are never chosen"),
    ("special_ids as a set to np.isin", mlm_isin_set, "convert it with list(special_ids) first"),
    ("random replacement may be special", mlm_random_may_be_special, "draw replacements from the ordinary ids"),
    ("always [MASK]", mlm_always_mask, "show [MASK], expected 0.800"),
    ("80/2/18 split", mlm_wrong_split, "a second draw of 10% made among the positions not [MASK]ed"),
    ("ignores p", mlm_ignores_p, "expected p = 0.3"),
    ("the global random state", mlm_global_random, "same seed gave different results"),
    ("a generator of its own", mlm_own_generator, "another seed gave exactly the same result"),
    ("changes tokens in place", mlm_changes_tokens, "changed its input tokens in place"),
    ("one replacement id", mlm_one_replacement_id, "different ids"),
    ("returns only the labels", mlm_returns_labels_only, "expected the pair (inputs, labels)"),
    ("float labels", mlm_float_labels, "labels (the second item) has dtype float64"),
    ("calls plmcourse.ref.mlm_mask", mlm_calls_ref, "calls plmcourse.ref.mlm_mask; write it yourself"),
    ("not implemented", mlm_not_implemented, "raised NotImplementedError"),
    ("exactly round(p * n) per row", mlm_exact_count_per_row, "an exact count is chosen"),
    ("random pool keeps mask_id", mlm_pool_keeps_mask_id, "your random replacements include it"),
    ("random pool above the largest special id", mlm_pool_above_the_specials, "the special ids need not be the lowest"),
    ("random pool from the batch", mlm_pool_from_the_batch, "not the ids seen in the tokens"),
    ("one draw per column for every row", mlm_one_draw_per_column, "one draw shared by every row"),
    ("random token never the original", mlm_random_never_the_original, "the random token seems never to be the original"),
]


# ============================================================================
# Losses: mlm_loss(logits, labels), causal_lm_loss(logits, tokens, ignore_index=-100)


def ce_log_softmax(logits, targets, ignore_index=-100):
    log_probs = torch.log_softmax(logits, dim=-1)
    counted = targets != ignore_index
    picked = log_probs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -(picked * counted).sum() / counted.sum().clamp(min=1)


def ce_boolean_index(logits, targets, ignore_index=-100):
    counted = targets != ignore_index
    if not counted.any():
        return logits.sum() * 0.0
    rows = logits[counted]  # (N, V)
    log_z = torch.logsumexp(rows, dim=-1)
    return (log_z - rows[torch.arange(len(rows)), targets[counted]]).mean()


def ce_one_hot(logits, targets, ignore_index=-100):
    counted = (targets != ignore_index).to(logits.dtype)
    shifted = logits - logits.amax(dim=-1, keepdim=True).detach()
    log_probs = shifted - shifted.exp().sum(-1, keepdim=True).log()
    one_hot = F.one_hot(targets.clamp(min=0), logits.shape[-1]).to(logits.dtype)
    nll = -(one_hot * log_probs).sum(-1) * counted
    return nll.sum() / torch.clamp(counted.sum(), min=1.0)


def mlm_loss_log_softmax(logits, labels):
    return ce_log_softmax(logits, labels)


def mlm_loss_boolean_index(logits, labels):
    return ce_boolean_index(logits, labels)


def mlm_loss_one_hot(logits, labels):
    return ce_one_hot(logits, labels)


def mlm_loss_all_positions(logits, labels):
    counted = labels != -100
    picked = torch.log_softmax(logits, -1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return -(picked * counted).mean()


def mlm_loss_sum(logits, labels):
    counted = labels != -100
    picked = torch.log_softmax(logits, -1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return -(picked * counted).sum()


def mlm_loss_ignored_as_zero(logits, labels):
    picked = torch.log_softmax(logits, -1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return -picked.mean()


def mlm_loss_no_ignore(logits, labels):
    picked = torch.log_softmax(logits, -1).gather(-1, labels[..., None])[..., 0]
    return -picked.mean()


def mlm_loss_probability(logits, labels):
    counted = labels != -100
    p = torch.softmax(logits, -1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return -(p * counted).sum() / counted.sum()


def mlm_loss_no_minus(logits, labels):
    counted = labels != -100
    picked = torch.log_softmax(logits, -1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return (picked * counted).sum() / counted.sum().clamp(min=1)


def mlm_loss_unstable(logits, labels):
    counted = labels != -100
    probs = torch.exp(logits) / torch.exp(logits).sum(-1, keepdim=True)
    picked = torch.log(probs).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return -(picked * counted).sum() / counted.sum().clamp(min=1)


def mlm_loss_nan_when_empty(logits, labels):
    counted = labels != -100
    picked = torch.log_softmax(logits, -1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return -(picked * counted).sum() / counted.sum()


def mlm_loss_fresh_zero_when_empty(logits, labels):
    if not bool((labels != -100).any()):
        return torch.tensor(0.0, dtype=logits.dtype, device=logits.device)  # right value, no graph
    return ce_log_softmax(logits, labels)


def mlm_loss_per_position(logits, labels):
    counted = labels != -100
    picked = torch.log_softmax(logits, -1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return -(picked * counted)


def mlm_loss_item(logits, labels):
    return ce_log_softmax(logits, labels).item()


def mlm_loss_detached(logits, labels):
    return ce_log_softmax(logits.detach(), labels)


def mlm_loss_wrong_axis(logits, labels):
    counted = labels != -100
    picked = torch.log_softmax(logits, dim=-2).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return -(picked * counted).sum() / counted.sum().clamp(min=1)


def mlm_loss_F(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def mlm_loss_nll(logits, labels):
    return F.nll_loss(torch.log_softmax(logits, -1).reshape(-1, logits.shape[-1]), labels.reshape(-1))


def mlm_loss_module(logits, labels):
    return torch.nn.CrossEntropyLoss()(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def mlm_loss_course(logits, labels):
    return pnn.mlm_loss(logits, labels)


MLM_LOSS_CORRECT = [
    ("log_softmax + gather", mlm_loss_log_softmax),
    ("boolean indexing + logsumexp", mlm_loss_boolean_index),
    ("one-hot, written out", mlm_loss_one_hot),
]

MLM_LOSS_MISTAKES = [
    ("labels > 0 instead of != -100", mlm_loss_labels_positive, "the positions whose label is token 0 left out"),
    ("mean of the per-row means", mlm_loss_per_row_mean, "the mean of each sequence's mean"),
    ("a fresh tensor(0.) for an empty batch", mlm_loss_fresh_zero_when_empty, "not connected to the logits"),
    ("mean over all positions", mlm_loss_all_positions, "an average over every position"),
    ("sum", mlm_loss_sum, "a sum over the positions instead of their mean"),
    ("-100 counted as token 0", mlm_loss_ignored_as_zero, "counted as if their target were token 0"),
    ("-100 used as an index", mlm_loss_no_ignore, "a position marked as ignored (-100, or the ignore_index passed)"),
    ("-p instead of -log p", mlm_loss_probability, "-p(target) instead of -log p(target)"),
    ("no minus sign", mlm_loss_no_minus, "without the minus sign"),
    ("not stable", mlm_loss_unstable, "use log_softmax or logsumexp"),
    ("NaN when nothing is labelled", mlm_loss_nan_when_empty, "return 0 there, not NaN"),
    ("one loss per position", mlm_loss_per_position, "one number per position"),
    (".item()", mlm_loss_item, "the loss is a Python float"),
    ("detached", mlm_loss_detached, "gradients do not flow"),
    ("softmax over the wrong axis", mlm_loss_wrong_axis, "a softmax over the wrong axis"),
    ("F.cross_entropy", mlm_loss_F, "calls torch.nn.functional.cross_entropy; write it yourself"),
    ("F.nll_loss", mlm_loss_nll, "calls torch.nn.functional.nll_loss; write it yourself"),
    ("nn.CrossEntropyLoss", mlm_loss_module, "calls torch.nn.CrossEntropyLoss; write it yourself"),
    ("plmcourse.nn.mlm_loss", mlm_loss_course, "calls plmcourse.nn.mlm_loss; write it yourself"),
]


# ============================================================================
# bert_parameter_count(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2)


def count_by_parts(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    d = d_model
    embeddings = (vocab_size + max_len + type_vocab_size) * d + 2 * d
    attention = 4 * (d * d + d)
    ffn = d * d_ff + d_ff + d_ff * d + d
    layer = attention + ffn + 2 * (2 * d)
    pooler = d * d + d
    return embeddings + n_layers * layer + pooler


def linear(d_in, d_out):
    return d_in * d_out + d_out


def count_with_helpers(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    layer_norm = 2 * d_model
    tables = sum(n * d_model for n in (vocab_size, max_len, type_vocab_size))
    block = 4 * linear(d_model, d_model) + linear(d_model, d_ff) + linear(d_ff, d_model) + 2 * layer_norm
    return tables + layer_norm + n_layers * block + linear(d_model, d_model)


def count_by_building(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """Count a torch model built from scratch, layer by layer (on the meta device: no memory)."""
    with torch.device("meta"):
        modules = [torch.nn.Embedding(n, d_model) for n in (vocab_size, max_len, type_vocab_size) if n]
        modules.append(torch.nn.LayerNorm(d_model))
        for _ in range(n_layers):
            modules += [torch.nn.Linear(d_model, d_model) for _ in range(4)]
            modules += [torch.nn.Linear(d_model, d_ff), torch.nn.Linear(d_ff, d_model)]
            modules += [torch.nn.LayerNorm(d_model), torch.nn.LayerNorm(d_model)]
        modules.append(torch.nn.Linear(d_model, d_model))
    return sum(p.numel() for m in modules for p in m.parameters())


def _count_variant(**switches):
    def count(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
        s = {"bias": 1, "norms": 2, "emb_norm": 1, "pooler": 1, "segments": 1, "positions": 1, "proj": 4,
             "width": None, "decoder": 0, "extra_layer": 0, **switches}
        d, b = d_model, s["bias"]
        width = d_ff if s["width"] is None else s["width"] * d
        total = vocab_size * d + s["positions"] * max_len * d + s["segments"] * type_vocab_size * d
        total += s["emb_norm"] * 2 * d
        block = s["proj"] * (d * d + b * d) + 2 * d * width + b * (width + d) + s["norms"] * 2 * d
        total += (n_layers + s["extra_layer"]) * block + s["pooler"] * (d * d + b * d)
        return total + s["decoder"] * vocab_size * d
    return count


COUNT_CORRECT = [
    ("by parts", count_by_parts),
    ("with a linear() helper", count_with_helpers),
    ("by building the layers", count_by_building),
]

COUNT_MISTAKES = [
    ("the MLM head counted", bert_count_with_mlm_head, "the MLM head counted (its dense transform"),
    ("no biases", _count_variant(bias=0), "no biases"),
    ("no LayerNorms", _count_variant(norms=0, emb_norm=0), "no LayerNorm parameters"),
    ("one LayerNorm per layer", _count_variant(norms=1), "one LayerNorm per layer"),
    ("no embedding LayerNorm", _count_variant(emb_norm=0), "the embedding LayerNorm forgotten"),
    ("no pooler", _count_variant(pooler=0), "the pooler"),
    ("no segments", _count_variant(segments=0), "the segment embeddings forgotten"),
    ("no positions", _count_variant(positions=0), "the position embeddings forgotten"),
    ("three projections", _count_variant(proj=3), "three attention projections"),
    ("d_ff ignored", _count_variant(width=4), "d_ff ignored"),
    ("MLM decoder counted", _count_variant(decoder=1), "the MLM output layer counted"),
    ("one layer too many", _count_variant(extra_layer=1), "n_layers + 1 layers"),
    ("float", lambda *a, **k: float(count_by_parts(*a, **k)), "return an int"),
    ("builds plmcourse.nn.Bert",
     lambda V, d, L, d_ff, max_len, type_vocab_size=2: sum(p.numel() for p in pnn.Bert(
         pnn.BertConfig(V, d, L, 1, d_ff, max_len, type_vocab_size)).parameters()),
     "calls plmcourse.nn.Bert"),
]


CATALOGUE = {
    "check_mlm_mask": (MLM_MASK_CORRECT, MLM_MASK_MISTAKES),
    "check_mlm_loss": (MLM_LOSS_CORRECT, MLM_LOSS_MISTAKES),
    "check_bert_parameter_count": (COUNT_CORRECT, COUNT_MISTAKES),
}
