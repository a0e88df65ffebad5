"""Fresh student-style implementations for notebook 04 (BERT):
mlm_mask (NumPy), mlm_loss (PyTorch), bert_parameter_count (arithmetic)."""
import numpy as np
import torch


def _ordinary_ids(vocab_size, mask_id, special_ids):
    banned = set(int(s) for s in special_ids) | {int(mask_id)}
    return np.array([i for i in range(vocab_size) if i not in banned])


# ---- mlm_mask --------------------------------------------------------------


def mlm_mask_random_from_whole_vocab(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: the random replacement is drawn from all of 0..vocab_size-1, specials and mask_id included."""
    tokens = np.asarray(tokens)
    inputs, labels = tokens.copy(), np.full(tokens.shape, -100)
    ordinary = ~np.isin(tokens, list(special_ids))
    chosen = ordinary & (rng.random(tokens.shape) < p)
    action = rng.random(tokens.shape)
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[swap] = rng.integers(0, vocab_size, int(swap.sum()))
    labels[chosen] = tokens[chosen]
    return inputs, labels


def mlm_mask_in_place(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: writes the corruption into `tokens` itself (inputs = tokens, no copy)."""
    labels = np.full(tokens.shape, -100)
    ordinary = ~np.isin(tokens, list(special_ids))
    chosen = ordinary & (rng.random(tokens.shape) < p)
    labels[chosen] = tokens[chosen]
    action = rng.random(tokens.shape)
    ordinary_ids = _ordinary_ids(vocab_size, mask_id, special_ids)
    random_ids = ordinary_ids[rng.integers(0, len(ordinary_ids), tokens.shape)]
    inputs = tokens
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_ids[swap]
    inputs[chosen & (action < 0.8)] = mask_id
    return inputs, labels


def mlm_mask_nested_draws(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: two independent draws (mask with 0.8, then random with 0.1 of the rest) give 80/2/18, not 80/10/10."""
    tokens = np.asarray(tokens)
    inputs, labels = tokens.copy(), np.full(tokens.shape, -100)
    ordinary = ~np.isin(tokens, list(special_ids))
    chosen = ordinary & (rng.random(tokens.shape) < p)
    labels[chosen] = tokens[chosen]
    to_mask = chosen & (rng.random(tokens.shape) < 0.8)
    to_random = chosen & ~to_mask & (rng.random(tokens.shape) < 0.1)
    inputs[to_mask] = mask_id
    ordinary_ids = _ordinary_ids(vocab_size, mask_id, special_ids)
    inputs[to_random] = ordinary_ids[rng.integers(0, len(ordinary_ids), int(to_random.sum()))]
    return inputs, labels


def mlm_mask_labels_only_where_changed(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: labels only the positions whose input changed, so the 'unchanged' 10% get -100."""
    tokens = np.asarray(tokens)
    inputs = tokens.copy()
    ordinary = ~np.isin(tokens, list(special_ids))
    chosen = ordinary & (rng.random(tokens.shape) < p)
    action = rng.random(tokens.shape)
    ordinary_ids = _ordinary_ids(vocab_size, mask_id, special_ids)
    random_ids = ordinary_ids[rng.integers(0, len(ordinary_ids), tokens.shape)]
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_ids[swap]
    labels = np.where(inputs != tokens, tokens, -100)
    return inputs, labels


def mlm_mask_isin_set(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: np.isin(tokens, special_ids) with a Python set matches nothing, so specials can be chosen."""
    tokens = np.asarray(tokens)
    inputs, labels = tokens.copy(), np.full(tokens.shape, -100)
    ordinary = ~np.isin(tokens, special_ids)
    chosen = ordinary & (rng.random(tokens.shape) < p)
    labels[chosen] = tokens[chosen]
    action = rng.random(tokens.shape)
    pool = np.setdiff1d(np.arange(vocab_size), np.array(sorted(special_ids) + [mask_id]))
    random_ids = pool[rng.integers(0, len(pool), tokens.shape)]
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, labels


def mlm_mask_global_random(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: draws from np.random instead of rng, so the same seed does not give the same masking."""
    tokens = np.asarray(tokens)
    inputs, labels = tokens.copy(), np.full(tokens.shape, -100)
    ordinary = ~np.isin(tokens, list(special_ids))
    chosen = ordinary & (np.random.random(tokens.shape) < p)
    labels[chosen] = tokens[chosen]
    action = np.random.random(tokens.shape)
    ordinary_ids = _ordinary_ids(vocab_size, mask_id, special_ids)
    random_ids = ordinary_ids[np.random.randint(0, len(ordinary_ids), tokens.shape)]
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, labels


def mlm_mask_one_uniform(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """CORRECT: one uniform number u per token decides everything: u < 0.8p mask, < 0.9p random, < p keep."""
    tokens = np.asarray(tokens)
    specials = np.array(sorted(int(s) for s in special_ids), dtype=np.int64)
    ordinary = ~np.isin(tokens, specials)
    u = rng.random(tokens.shape)
    chosen = ordinary & (u < p)
    to_mask = chosen & (u < 0.8 * p)
    to_random = chosen & (u >= 0.8 * p) & (u < 0.9 * p)
    pool = np.setdiff1d(np.arange(vocab_size), np.append(specials, mask_id))
    inputs = tokens.copy()
    inputs[to_mask] = mask_id
    inputs[to_random] = pool[rng.integers(0, len(pool), int(to_random.sum()))]
    labels = np.where(chosen, tokens, -100)
    return inputs, labels


def mlm_mask_token_loop(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """CORRECT: a loop over the tokens, drawing from rng one token at a time."""
    tokens = np.asarray(tokens)
    specials = set(int(s) for s in special_ids)
    pool = [i for i in range(vocab_size) if i not in specials and i != mask_id]
    flat = tokens.reshape(-1)
    inputs = flat.copy()
    labels = np.full(flat.shape, -100, dtype=np.int64)
    for i, t in enumerate(flat):
        if int(t) in specials or rng.random() >= p:
            continue
        labels[i] = t
        r = rng.random()
        if r < 0.8:
            inputs[i] = mask_id
        elif r < 0.9:
            inputs[i] = pool[int(rng.integers(0, len(pool)))]
    return inputs.reshape(tokens.shape), labels.reshape(tokens.shape)


# ---- mlm_loss --------------------------------------------------------------
def mlm_loss_nan_when_empty(logits, labels):
    """WRONG: sum / count with no clamp: a batch without labelled positions gives 0 / 0 = nan."""
    keep = labels != -100
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -(picked * keep).sum() / keep.sum()


def mlm_loss_log_of_softmax(logits, labels):
    """WRONG: torch.log(torch.softmax(...)); a label far below the max gives log(0) = -inf and an inf loss."""
    keep = labels != -100
    probs = torch.softmax(logits[keep], dim=-1)
    picked = torch.log(probs.gather(-1, labels[keep].unsqueeze(-1)).squeeze(-1))
    if picked.numel() == 0:
        return logits.sum() * 0.0
    return -picked.mean()


def mlm_loss_clamp_counts_all(logits, labels):
    """WRONG: clamps -100 to class 0 and averages over every position, so unlabelled ones count as -log p(0)."""
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -picked.mean()


def mlm_loss_divide_by_all(logits, labels):
    """WRONG: zeroes the unlabelled positions but divides by the number of all positions."""
    keep = labels != -100
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -(picked * keep).sum() / labels.numel()


def mlm_loss_detached(logits, labels):
    """WRONG: computes the right number but returns torch.tensor(loss.item()), which has no gradient."""
    keep = labels != -100
    if keep.sum() == 0:
        return torch.tensor(0.0)
    logp = torch.log_softmax(logits[keep], dim=-1)
    loss = -logp.gather(-1, labels[keep].unsqueeze(-1)).mean()
    return torch.tensor(loss.item())


def mlm_loss_fresh_zero_when_empty(logits, labels):
    """WRONG: returns torch.tensor(0.0) for an empty batch: no graph to backpropagate, CPU float32 regardless of input."""
    keep = labels != -100
    if not keep.any():
        return torch.tensor(0.0)
    logp = torch.log_softmax(logits[keep], dim=-1)
    return -logp.gather(-1, labels[keep].unsqueeze(-1)).mean()


def mlm_loss_logsumexp(logits, labels):
    """CORRECT: logsumexp minus the label's logit, summed over kept positions, divided by max(count, 1)."""
    keep = labels != -100
    target_logit = logits.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    nll = torch.logsumexp(logits, dim=-1) - target_logit
    nll = torch.where(keep, nll, torch.zeros_like(nll))
    return nll.sum() / keep.sum().clamp(min=1)


def mlm_loss_boolean_index(logits, labels):
    """CORRECT: boolean indexing of the labelled rows, then log_softmax; an empty selection sums to 0."""
    V = logits.shape[-1]
    flat_logits = logits.reshape(-1, V)
    flat_labels = labels.reshape(-1)
    keep = flat_labels != -100
    rows = flat_logits[keep]
    logp = torch.log_softmax(rows, dim=-1)
    nll = -logp[torch.arange(rows.shape[0], device=rows.device), flat_labels[keep]]
    return nll.sum() / max(int(keep.sum()), 1)


# ---- bert_parameter_count --------------------------------------------------
def bert_count_no_pooler(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """WRONG: leaves out the pooler (H*H + H)."""
    H = d_model
    embeddings = (vocab_size + max_len + type_vocab_size) * H + 2 * H
    layer = 4 * (H * H + H) + (H * d_ff + d_ff) + (d_ff * H + H) + 2 * (2 * H)
    return embeddings + n_layers * layer


def bert_count_no_attention_biases(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """WRONG: counts the four attention projections as H*H each, without their biases."""
    H = d_model
    embeddings = (vocab_size + max_len + type_vocab_size) * H + 2 * H
    layer = 4 * H * H + (H * d_ff + d_ff) + (d_ff * H + H) + 2 * (2 * H)
    return embeddings + n_layers * layer + H * H + H


def bert_count_one_layernorm(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """WRONG: counts one LayerNorm per layer instead of two."""
    H = d_model
    embeddings = (vocab_size + max_len + type_vocab_size) * H + 2 * H
    layer = 4 * (H * H + H) + (H * d_ff + d_ff) + (d_ff * H + H) + 2 * H
    return embeddings + n_layers * layer + H * H + H


def bert_count_two_segments(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """WRONG: hard-codes 2 segment embeddings instead of using type_vocab_size."""
    H = d_model
    embeddings = (vocab_size + max_len + 2) * H + 2 * H
    layer = 4 * (H * H + H) + (H * d_ff + d_ff) + (d_ff * H + H) + 4 * H
    return embeddings + n_layers * layer + H * H + H


def bert_count_4h_ffn(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """WRONG: uses 4 * d_model for the feed-forward width instead of the d_ff argument."""
    H = d_model
    F = 4 * H
    embeddings = (vocab_size + max_len + type_vocab_size) * H + 2 * H
    layer = 4 * (H * H + H) + (H * F + F) + (F * H + H) + 4 * H
    return embeddings + n_layers * layer + H * H + H


def bert_count_float(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """WRONG: float arithmetic (a LayerNorm is 2.0 * H): the right value, but a float, not an int."""
    H = d_model
    layer_norm = 2.0 * H
    embeddings = (vocab_size + max_len + type_vocab_size) * H + layer_norm
    layer = 4 * (H * H + H) + (H * d_ff + d_ff) + (d_ff * H + H) + 2 * layer_norm
    return embeddings + n_layers * layer + H * H + H


def bert_count_by_module(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """CORRECT: adds up (weight, bias) shapes module by module."""
    def linear(n_in, n_out):
        return n_in * n_out + n_out

    def layer_norm(n):
        return 2 * n

    embeddings = (vocab_size + max_len + type_vocab_size) * d_model + layer_norm(d_model)
    attention = 4 * linear(d_model, d_model) + layer_norm(d_model)
    ffn = linear(d_model, d_ff) + linear(d_ff, d_model) + layer_norm(d_model)
    pooler = linear(d_model, d_model)
    return int(embeddings + n_layers * (attention + ffn) + pooler)


def bert_count_closed_form(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """CORRECT: the same count as one polynomial: per layer 4H^2 + 2H*d_ff + d_ff + 9H."""
    H, L = d_model, n_layers
    per_layer = 4 * H * H + 2 * H * d_ff + d_ff + 9 * H
    return (vocab_size + max_len + type_vocab_size + 2) * H + L * per_layer + H * H + H


FRESH = {
    "check_mlm_mask": {
        "wrong": [
            ("random from whole vocab", mlm_mask_random_from_whole_vocab,
             "Random replacements can be special ids or mask_id, not only ordinary ids."),
            ("tokens modified in place", mlm_mask_in_place, "inputs is tokens itself, so the caller's array changes."),
            ("nested 0.8 / 0.1 draws", mlm_mask_nested_draws, "Gives 80% mask, 2% random, 18% unchanged."),
            ("labels only where changed", mlm_mask_labels_only_where_changed,
             "Chosen-but-unchanged tokens get label -100."),
            ("np.isin with a set", mlm_mask_isin_set,
             "np.isin with a Python set matches nothing, so specials are chosen when special_ids is a set."),
            ("global np.random", mlm_mask_global_random, "Ignores rng, so the same seed gives different masks."),
        ],
        "correct": [
            ("one uniform per token", mlm_mask_one_uniform),
            ("loop over tokens", mlm_mask_token_loop),
        ],
    },
    "check_mlm_loss": {
        "wrong": [
            ("nan when nothing labelled", mlm_loss_nan_when_empty, "An empty batch gives 0/0 = nan."),
            ("log of softmax", mlm_loss_log_of_softmax, "log(softmax) is -inf for large logit gaps."),
            ("clamp and mean over all", mlm_loss_clamp_counts_all,
             "Unlabelled positions are scored against class 0 and counted."),
            ("divides by all positions", mlm_loss_divide_by_all, "Divides by the number of all positions."),
            ("tensor(loss.item())", mlm_loss_detached, "No gradient flows through the result."),
            ("fresh tensor(0.) when empty", mlm_loss_fresh_zero_when_empty,
             "For an empty batch returns a new CPU float32 tensor with no gradient path."),
        ],
        "correct": [
            ("logsumexp minus target logit", mlm_loss_logsumexp),
            ("boolean indexing", mlm_loss_boolean_index),
        ],
    },
    "check_bert_parameter_count": {
        "wrong": [
            ("no pooler", bert_count_no_pooler, "Leaves out the pooler."),
            ("no attention biases", bert_count_no_attention_biases, "Q, K, V, O counted without biases."),
            ("one LayerNorm per layer", bert_count_one_layernorm, "Each layer has two LayerNorms, not one."),
            ("two segments hard-coded", bert_count_two_segments, "Ignores type_vocab_size."),
            ("d_ff = 4H hard-coded", bert_count_4h_ffn, "Ignores the d_ff argument."),
            ("float result", bert_count_float, "Returns a float, not an int."),
        ],
        "correct": [
            ("module by module", bert_count_by_module),
            ("closed form", bert_count_closed_form),
        ],
    },
}
