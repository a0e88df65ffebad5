"""Right and wrong answers to the exercises of notebooks 04-06, as data for tests/test_grading_objectives.py.

For each check: CORRECT, a list of (name, function) that must pass, written in
different styles; and MISTAKES, a list of (name, function, fragment): the check must
fail with a message containing `fragment`. Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import random

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse import ref


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
    """BERT's original recipe: exactly round(p * n) of each row's ordinary tokens, then 80/10/10."""
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
    ("exactly round(p * n) per row", mlm_exact_count_per_row),
]

MLM_MASK_MISTAKES = [
    ("only the [MASK]ed positions labelled", mlm_only_masked_labelled, "only the [MASK]ed positions were labelled"),
    ("labels 0 instead of -100", mlm_labels_zero, "use -100 there"),
    ("labels hold the inputs", mlm_labels_are_inputs, "labels hold the corrupted inputs"),
    ("specials chosen", mlm_specials_chosen, "special_ids ([CLS], [SEP], [PAD], ...) are never chosen"),
    ("random replacement may be special", mlm_random_may_be_special, "draw replacements from the ordinary ids"),
    ("always [MASK]", mlm_always_mask, "show [MASK], expected 0.800"),
    ("80/2/18 split", mlm_wrong_split, "show a random token, expected"),
    ("ignores p", mlm_ignores_p, "expected p = 0.3"),
    ("the global random state", mlm_global_random, "same seed gave different results"),
    ("a generator of its own", mlm_own_generator, "another seed gave exactly the same result"),
    ("changes tokens in place", mlm_changes_tokens, "changed its input tokens in place"),
    ("one replacement id", mlm_one_replacement_id, "different ids"),
    ("returns only the labels", mlm_returns_labels_only, "expected the pair (inputs, labels)"),
    ("float labels", mlm_float_labels, "labels (the second item) has dtype float64"),
    ("calls plmcourse.ref.mlm_mask", mlm_calls_ref, "calls plmcourse.ref.mlm_mask; write it yourself"),
    ("not implemented", mlm_not_implemented, "raised NotImplementedError"),
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
    ("mean over all positions", mlm_loss_all_positions, "an average over every position"),
    ("sum", mlm_loss_sum, "a sum over the positions instead of their mean"),
    ("-100 counted as token 0", mlm_loss_ignored_as_zero, "counted as if their target were token 0"),
    ("-100 used as an index", mlm_loss_no_ignore, "positions marked -100 carry no target"),
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


def causal_slices(logits, tokens, ignore_index=-100):
    return ce_log_softmax(logits[..., :-1, :], tokens[..., 1:], ignore_index)


def causal_boolean(logits, tokens, ignore_index=-100):
    return ce_boolean_index(logits[..., :-1, :], tokens[..., 1:], ignore_index)


def causal_narrow(logits, tokens, ignore_index=-100):
    T = tokens.shape[-1]
    return ce_one_hot(logits.narrow(-2, 0, T - 1), tokens.narrow(-1, 1, T - 1), ignore_index)


def causal_no_shift(logits, tokens, ignore_index=-100):
    return ce_log_softmax(logits, tokens, ignore_index)


def causal_wrong_way(logits, tokens, ignore_index=-100):
    return ce_log_softmax(logits[..., 1:, :], tokens[..., :-1], ignore_index)


def causal_batch_axis(logits, tokens, ignore_index=-100):
    return ce_log_softmax(logits[:-1], tokens[1:], ignore_index)


def causal_no_ignore(logits, tokens, ignore_index=-100):
    picked = torch.log_softmax(logits[..., :-1, :], -1).gather(-1, tokens[..., 1:, None])[..., 0]
    return -picked.mean()


def causal_view(logits, tokens, ignore_index=-100):
    x = logits[..., :-1, :].transpose(0, 1)
    y = tokens[..., 1:].transpose(0, 1)
    return ce_log_softmax(x.view(-1, logits.shape[-1]), y.view(-1), ignore_index)


def causal_F(logits, tokens, ignore_index=-100):
    V = logits.shape[-1]
    return F.cross_entropy(logits[..., :-1, :].reshape(-1, V), tokens[..., 1:].reshape(-1))


def causal_ref(logits, tokens, ignore_index=-100):
    return torch.tensor(ref.causal_lm_loss(logits.detach().cpu().numpy(), tokens.cpu().numpy()))


CAUSAL_CORRECT = [
    ("slices + log_softmax", causal_slices),
    ("boolean indexing", causal_boolean),
    ("narrow + one-hot", causal_narrow),
]

CAUSAL_MISTAKES = [
    ("no shift", causal_no_shift, "no shift"),
    ("shift the wrong way", causal_wrong_way, "a shift the wrong way round"),
    ("shift along the batch axis", causal_batch_axis, "a shift along the batch axis"),
    ("padding not ignored", causal_no_ignore, "positions marked -100 carry no target"),
    ("view after slicing", causal_view, "use .reshape instead of .view"),
    ("F.cross_entropy", causal_F, "calls torch.nn.functional.cross_entropy; write it yourself"),
    ("plmcourse.ref.causal_lm_loss", causal_ref, "calls plmcourse.ref.causal_lm_loss; write it yourself"),
    ("sum", lambda logits, tokens, ignore_index=-100: mlm_loss_sum(logits[..., :-1, :], tokens[..., 1:]),
     "a sum over the positions"),
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


# ============================================================================
# top_k_filter(logits, k), top_p_filter(logits, p)


def top_k_topk(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits
    values, indices = torch.topk(logits, k, dim=-1)
    return torch.full_like(logits, float("-inf")).scatter(-1, indices, values)


def top_k_threshold(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.sort(logits, dim=-1, descending=True).values[..., k - 1:k]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_k_loops(logits, k):
    out = logits.clone()
    if not k or k >= logits.shape[-1]:
        return out
    flat = out.reshape(-1, logits.shape[-1])
    for row in flat:
        order = sorted(range(len(row)), key=lambda i: -float(row[i]))
        for i in order[k:]:
            row[i] = float("-inf")
    return flat.reshape(logits.shape)


def top_k_smallest(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits
    values, indices = torch.topk(logits, k, dim=-1, largest=False)
    return torch.full_like(logits, float("-inf")).scatter(-1, indices, values)


def top_k_plus_one(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits
    kth = torch.sort(logits, dim=-1, descending=True).values[..., k:k + 1]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_k_zeros(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits
    values, indices = torch.topk(logits, k, dim=-1)
    return torch.zeros_like(logits).scatter(-1, indices, values)


def top_k_large_negative(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits
    values, indices = torch.topk(logits, k, dim=-1)
    return torch.full_like(logits, -1e9).scatter(-1, indices, values)


def top_k_probabilities(logits, k):
    return torch.softmax(top_k_topk(logits, k), dim=-1)


def top_k_in_place(logits, k):
    if k and k < logits.shape[-1]:
        kth = torch.sort(logits, dim=-1, descending=True).values[..., k - 1:k]
        logits[logits < kth] = float("-inf")
    return logits


def top_k_dim0(logits, k):
    if not k or k >= logits.shape[-1]:
        return logits
    kth = torch.sort(logits, dim=0, descending=True).values[k - 1:k] if k <= logits.shape[0] else None
    return logits if kth is None else logits.masked_fill(logits < kth, float("-inf"))


def top_k_mask(logits, k):
    return top_k_topk(logits, k) > float("-inf")


def top_k_course(logits, k):
    return pnn.top_k_filter(logits, k)


TOP_K_CORRECT = [("topk + scatter", top_k_topk), ("k-th value threshold", top_k_threshold),
                 ("loops", top_k_loops)]

TOP_K_MISTAKES = [
    ("smallest k", top_k_smallest, "the k SMALLEST logits kept"),
    ("k + 1 kept", top_k_plus_one, "k + 1 logits kept"),
    ("zeros instead of -inf", top_k_zeros, "the removed entries are 0"),
    ("-1e9 instead of -inf", top_k_large_negative, "set them to float('-inf') exactly"),
    ("probabilities", top_k_probabilities, "some kept entries differ from the input logits"),
    ("in place", top_k_in_place, "changed its input logits in place"),
    ("along dim 0", top_k_dim0, "along the first axis"),
    ("a boolean mask", top_k_mask, "the result is a boolean mask"),
    ("plmcourse.nn.top_k_filter", top_k_course, "calls plmcourse.nn.top_k_filter; write it yourself"),
]


def top_p_sort_scatter(logits, p):
    if p >= 1:
        return logits
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    keep_sorted = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def top_p_shift_right(logits, p):
    """The Hugging Face way: remove where cumulative > p, shifted right by one so the crossing token stays."""
    if p >= 1:
        return logits
    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
    cumulative = torch.cumsum(torch.softmax(sorted_logits, dim=-1), dim=-1)
    remove_sorted = cumulative > p
    remove_sorted[..., 1:] = remove_sorted[..., :-1].clone()
    remove_sorted[..., 0] = False
    remove = remove_sorted.scatter(-1, order, remove_sorted)
    return logits.masked_fill(remove, float("-inf"))


def top_p_loops(logits, p):
    out = logits.clone()
    if p >= 1:
        return out
    flat = out.reshape(-1, logits.shape[-1])
    for row in flat:
        probs = torch.softmax(row, dim=0).tolist()
        order = sorted(range(len(probs)), key=lambda i: -probs[i])
        mass = 0.0
        for i in order:
            if mass >= p:
                row[i] = float("-inf")
            mass += probs[i]
    return flat.reshape(logits.shape)


def top_p_excludes_crossing(logits, p):
    if p >= 1:
        return logits
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    keep_sorted = torch.cumsum(sorted_probs, dim=-1) <= p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def top_p_no_unsort(logits, p):
    if p >= 1:
        return logits
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, _ = torch.sort(probs, dim=-1, descending=True)
    keep_sorted = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < p
    return logits.masked_fill(~keep_sorted, float("-inf"))


def top_p_unsorted(logits, p):
    if p >= 1:
        return logits
    probs = torch.softmax(logits, dim=-1)
    return logits.masked_fill(torch.cumsum(probs, -1) - probs >= p, float("-inf"))


def top_p_ascending(logits, p):
    if p >= 1:
        return logits
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1)
    keep_sorted = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def top_p_course(logits, p):
    return pnn.top_p_filter(logits, p)


TOP_P_CORRECT = [("sort + scatter", top_p_sort_scatter), ("Hugging Face style", top_p_shift_right),
                 ("loops", top_p_loops)]

TOP_P_MISTAKES = [
    ("crossing token removed", top_p_excludes_crossing, "the token that takes the mass past p removed too"),
    ("not mapped back", top_p_no_unsort, "map it back to the original positions"),
    ("no sort", top_p_unsorted, "sort them in decreasing order first"),
    ("ascending", top_p_ascending, "sorted in increasing order"),
    ("probabilities", lambda logits, p: torch.softmax(top_p_sort_scatter(logits, p), -1),
     "some kept entries differ from the input logits"),
    ("plmcourse.nn.top_p_filter", top_p_course, "calls plmcourse.nn.top_p_filter; write it yourself"),
]


# ============================================================================
# text_infilling(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0)


def infill_window(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """Draw among the starts where the whole span is still free (a running sum of the free tokens)."""
    n = len(tokens)
    budget = int(round(mask_ratio * n))
    covered = np.zeros(n, dtype=bool)
    starts = np.zeros(n, dtype=bool)
    inserts = np.zeros(n + 1, dtype=int)
    while covered.sum() < budget:
        length = min(rng.poisson(poisson_lambda), budget - covered.sum())
        if length == 0:
            inserts[rng.integers(n + 1)] += 1
            continue
        free = np.concatenate([[0], np.cumsum(~covered)])
        ok = np.flatnonzero(free[length:] - free[:-length] == length)
        while len(ok) == 0:
            length -= 1
            ok = np.flatnonzero(free[length:] - free[:-length] == length)
        s = rng.choice(ok)
        covered[s:s + length] = True
        starts[s] = True
    out = []
    for i in range(n + 1):
        out += [mask_id] * inserts[i]
        if i < n and (starts[i] or not covered[i]):
            out.append(mask_id if starts[i] else tokens[i])
    return np.array(out, dtype=tokens.dtype)


def infill_retry(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """Draw any start and try again on an overlap; single tokens once retries keep failing."""
    tokens = list(tokens)
    n = len(tokens)
    budget = round(mask_ratio * n)
    spans, inserts, covered = {}, [], set()
    misses = 0
    while len(covered) < budget:
        length = min(int(rng.poisson(poisson_lambda)), budget - len(covered))
        if length == 0:
            inserts.append(int(rng.integers(0, n + 1)))
            continue
        if misses > 50:
            length = 1
        start = int(rng.integers(0, n - length + 1))
        positions = set(range(start, start + length))
        if positions & covered:
            misses += 1
            continue
        misses = 0
        spans[start] = length
        covered |= positions
    out = []
    for i in range(n + 1):
        out += [mask_id] * inserts.count(i)
        if i < n:
            if i in spans:
                out.append(mask_id)
            elif i not in covered:
                out.append(tokens[i])
    return np.array(out, dtype=np.int64)


def infill_token_masking(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """Every removed token gets its own mask."""
    out = tokens.copy()
    n = len(tokens)
    covered = np.zeros(n, dtype=bool)
    while covered.sum() < round(mask_ratio * n):
        length = max(1, min(rng.poisson(poisson_lambda), round(mask_ratio * n) - covered.sum()))
        s = rng.integers(0, n - length + 1)
        if not covered[s:s + length].any():
            covered[s:s + length] = True
    out[covered] = mask_id
    return out


def infill_deletion(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    out = infill_window(tokens, rng, mask_id, mask_ratio, poisson_lambda)
    return out[out != mask_id]


def infill_no_zero_length(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    n = len(tokens)
    budget = round(mask_ratio * n)
    covered = np.zeros(n, dtype=bool)
    starts = np.zeros(n, dtype=bool)
    while covered.sum() < budget:
        length = min(rng.poisson(poisson_lambda), budget - covered.sum())
        if length == 0:
            continue  # the mistake: a zero-length span inserts nothing
        s = rng.integers(0, n - length + 1)
        if covered[s:s + length].any():
            continue
        covered[s:s + length] = True
        starts[s] = True
    keep = starts | ~covered
    return np.where(starts, mask_id, tokens)[keep]


def infill_ignores_lambda(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    return infill_window(tokens, rng, mask_id, mask_ratio, 3.0)


def infill_ignores_ratio(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    return infill_window(tokens, rng, mask_id, 0.3, poisson_lambda)


def infill_global_random(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    return infill_window(tokens, np.random.default_rng(random.randrange(2**32)), mask_id, mask_ratio,
                         poisson_lambda)


def infill_own_generator(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    return infill_window(tokens, np.random.default_rng(7), mask_id, mask_ratio, poisson_lambda)


def infill_overlapping_merge(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """Lengths first, starts anywhere: overlapping spans merge and cover too little."""
    n = len(tokens)
    budget = round(mask_ratio * n)
    lengths = []
    while sum(lengths) < budget:
        lengths.append(int(rng.poisson(poisson_lambda)))
    covered = np.zeros(n, dtype=bool)
    for length in lengths:
        if length:
            s = rng.integers(0, max(1, n - length + 1))
            covered[s:s + length] = True
    first = covered & ~np.concatenate([[False], covered[:-1]])
    return np.where(first, mask_id, tokens)[first | ~covered]


def infill_shuffled(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    out = infill_window(tokens, rng, mask_id, mask_ratio, poisson_lambda)
    return out[::-1].copy()


def infill_list(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    return infill_window(tokens, rng, mask_id, mask_ratio, poisson_lambda).tolist()


def infill_ref(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    return ref.text_infilling(tokens, rng, mask_id, mask_ratio, poisson_lambda)


INFILLING_CORRECT = [("free windows", infill_window), ("retry on overlap", infill_retry)]

INFILLING_MISTAKES = [
    ("a mask per token", infill_token_masking, "every removed token got its own mask"),
    ("token deletion", infill_deletion, "without a mask in their place"),
    ("no zero-length spans", infill_no_zero_length, "a span of length 0 must still insert one mask"),
    ("ignores poisson_lambda", infill_ignores_lambda, "expected about poisson_lambda = 1.0"),
    ("ignores mask_ratio", infill_ignores_ratio, "expected mask_ratio = 0.2"),
    ("overlapping spans merge", infill_overlapping_merge, "they never overlap"),
    ("the global random state", infill_global_random, "same seed gave different results"),
    ("a generator of its own", infill_own_generator, "another seed gave exactly the same result"),
    ("order changed", infill_shuffled, "out of their original order"),
    ("returns a list", infill_list, "the result is a list"),
    ("calls plmcourse.ref.text_infilling", infill_ref, "calls plmcourse.ref.text_infilling; write it yourself"),
]


# ============================================================================
# prefix_lm_mask(n, prefix_len), permutation_mask(order)


def prefix_broadcast(n, prefix_len):
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    return (j <= i) | (j < prefix_len)


def prefix_tril(n, prefix_len):
    mask = np.tril(np.ones((n, n), dtype=bool))
    mask[:, :prefix_len] = True
    return mask


def prefix_loops(n, prefix_len):
    mask = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(n):
            mask[i, j] = j < prefix_len or j <= i
    return mask


PREFIX_CORRECT = [("broadcast", prefix_broadcast), ("tril + columns", prefix_tril), ("loops", prefix_loops)]

PREFIX_MISTAKES = [
    ("prefix sees the target", lambda n, p: prefix_broadcast(n, p) | (np.arange(n)[:, None] < p),
     "a prefix position sees the target"),
    ("plain causal", lambda n, p: np.tril(np.ones((n, n), dtype=bool)), "prefix_len is ignored"),
    ("transposed", lambda n, p: prefix_broadcast(n, p).T, "transposed"),
    ("prefix one too short", lambda n, p: prefix_broadcast(n, max(p - 1, 0)), "prefix_len - 1 positions"),
    ("inverted", lambda n, p: ~prefix_broadcast(n, p), "an inverted mask"),
    ("floats", lambda n, p: prefix_broadcast(n, p).astype(np.float64), "create it with dtype=bool"),
    ("additive", lambda n, p: np.where(prefix_broadcast(n, p), 0.0, -np.inf), "additive float mask"),
    ("calls plmcourse.ref.prefix_lm_mask", lambda n, p: ref.prefix_lm_mask(n, p),
     "calls plmcourse.ref.prefix_lm_mask; write it yourself"),
]


def permutation_rank(order):
    order = np.asarray(order)
    rank = np.empty(len(order), dtype=int)
    rank[order] = np.arange(len(order))
    return rank[None, :] < rank[:, None]


def permutation_argsort(order):
    rank = np.argsort(order)
    return rank[:, None] > rank[None, :]


def permutation_loops(order):
    n = len(order)
    mask = np.zeros((n, n), dtype=bool)
    for t, position in enumerate(order):
        for earlier in order[:t]:
            mask[position, earlier] = True
    return mask


PERMUTATION_CORRECT = [("ranks", permutation_rank), ("argsort", permutation_argsort), ("loops", permutation_loops)]

PERMUTATION_MISTAKES = [
    ("sees itself", lambda order: permutation_rank(order) | np.eye(len(order), dtype=bool),
     "position i also sees itself"),
    ("order used as rank", lambda order: np.asarray(order)[None, :] < np.asarray(order)[:, None],
     "invert the permutation"),
    ("indexed by step", lambda order: np.tril(np.ones((len(order), len(order)), dtype=bool), -1),
     "indexed by step in the order"),
    ("transposed", lambda order: permutation_rank(order).T, "transposed"),
    ("inverted", lambda order: ~permutation_rank(order), "an inverted mask"),
    ("integers", lambda order: permutation_rank(order).astype(int), "create it with dtype=bool"),
    ("calls plmcourse.ref.permutation_mask", lambda order: ref.permutation_mask(order),
     "calls plmcourse.ref.permutation_mask; write it yourself"),
]


CATALOGUE = {
    "check_mlm_mask": (MLM_MASK_CORRECT, MLM_MASK_MISTAKES),
    "check_mlm_loss": (MLM_LOSS_CORRECT, MLM_LOSS_MISTAKES),
    "check_bert_parameter_count": (COUNT_CORRECT, COUNT_MISTAKES),
    "check_causal_lm_loss": (CAUSAL_CORRECT, CAUSAL_MISTAKES),
    "check_top_k_filter": (TOP_K_CORRECT, TOP_K_MISTAKES),
    "check_top_p_filter": (TOP_P_CORRECT, TOP_P_MISTAKES),
    "check_text_infilling": (INFILLING_CORRECT, INFILLING_MISTAKES),
    "check_prefix_lm_mask": (PREFIX_CORRECT, PREFIX_MISTAKES),
    "check_permutation_mask": (PERMUTATION_CORRECT, PERMUTATION_MISTAKES),
}
