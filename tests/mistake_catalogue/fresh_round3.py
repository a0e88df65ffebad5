"""Issue 33's fresh set: wrong and unusual-but-correct answers to the checks of notebooks 03-12, written from
the release notebooks alone (the exercise text and its hints), before the checks were read or changed.

FRESH = {check name: {"wrong": [(label, fn, reason)], "correct": [(label, fn)]}}, the layout of
tests/mistake_catalogue/fresh/. Each wrong answer's docstring names the sentence of the exercise it breaks.
EXPECTED (at the end) records what the checks answer to each wrong one; tests/test_grading_fresh_mistakes.py
holds the checks to it.
"""
import numpy as np
import torch
import torch.nn.functional as F


# ---- 03: softmax and the attention that calls it ---------------------------------------------------------


def softmax_nan_to_num(x, axis=-1):
    """CORRECT: the shift by -inf makes an all -inf slice NaN; nan_to_num turns exactly those into 0."""
    m = np.max(x, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - m)
        out = e / e.sum(axis=axis, keepdims=True)
    return np.nan_to_num(out, nan=0.0)


def softmax(x, axis=-1):
    """WRONG (only the all -inf slice), under the notebook's name: 'return zeros, not nan, for a slice that is entirely -inf'."""
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sdpa_with_own_softmax(q, k, v, mask=None):
    """WRONG through its softmax only: the attention is right, but the softmax it calls (the student's Exercise 1)
    gives NaN for a fully masked row."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return weights @ v, weights


def sdpa_boolean_index_mask(q, k, v, mask=None):
    """WRONG: scores[~mask] = -inf needs the mask to have the scores' shape; 'a boolean array ... that broadcasts'."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.copy()
        scores[~mask] = -np.inf
    weights = softmax_nan_to_num(scores)
    return weights @ v, weights


def sdpa_einsum_where(q, k, v, mask=None):
    """CORRECT: einsum, np.where against -inf, a softmax that maps an empty row to zeros."""
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax_nan_to_num(scores)
    return np.einsum("...qk,...kd->...qd", weights, v), weights


def _split(x, w, n_heads):
    B, L, d = x.shape
    return (x @ w).reshape(B, L, n_heads, d // n_heads).transpose(1, 2)


def mha_torch_softmax_nan(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG (edge): masked_fill with -inf then torch.softmax gives NaN for a query whose keys are all masked
    (the course's rule, notebook 03: such a row gets zero weights and a zero output)."""
    B, L_q, d = x_q.shape
    q, k, v = _split(x_q, w_q, n_heads), _split(x_kv, w_k, n_heads), _split(x_kv, w_v, n_heads)
    scores = q @ k.transpose(-1, -2) / (d // n_heads) ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(B, L_q, d)
    return out @ w_o, weights


def mha_head_averaged_weights(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: returns the weights averaged over the heads (nn.MultiheadAttention's default);
    'the per-head weights (B, n_heads, L_q, L_k)'."""
    B, L_q, d = x_q.shape
    q, k, v = _split(x_q, w_q, n_heads), _split(x_kv, w_k, n_heads), _split(x_kv, w_v, n_heads)
    scores = q @ k.transpose(-1, -2) / (d // n_heads) ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))
    out = (weights @ v).transpose(1, 2).reshape(B, L_q, d)
    return out @ w_o, weights.mean(dim=1)


def mha_mask_unsqueezed_once(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: always inserts a head axis at 1 (mask[:, None]); a mask of shape (L_q, L_k) is then mis-broadcast
    ('broadcastable to (B, n_heads, L_q, L_k)' already)."""
    B, L_q, d = x_q.shape
    q, k, v = _split(x_q, w_q, n_heads), _split(x_kv, w_k, n_heads), _split(x_kv, w_v, n_heads)
    scores = q @ k.transpose(-1, -2) / (d // n_heads) ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))
    out = (weights @ v).transpose(1, 2).reshape(B, L_q, d)
    return out @ w_o, weights


# ---- 04: mlm_mask, mlm_loss, bert_parameter_count ----------------------------------------------------------


def _ordinary(vocab_size, mask_id, special_ids):
    banned = {int(s) for s in special_ids} | {int(mask_id)}
    return np.array([i for i in range(vocab_size) if i not in banned])


def _corrupt(tokens, chosen, rng, vocab_size, mask_id, special_ids, pool=None):
    inputs, labels = tokens.copy(), np.full(tokens.shape, -100, dtype=tokens.dtype)
    labels[chosen] = tokens[chosen]
    action = rng.random(tokens.shape)
    pool = _ordinary(vocab_size, mask_id, special_ids) if pool is None else pool
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[chosen & (action < 0.8)] = mask_id
    inputs[swap] = pool[rng.integers(0, len(pool), int(swap.sum()))]
    return inputs, labels


def mlm_mask_exact_count(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: chooses exactly round(p * n) ordinary positions; 'choose each ordinary token independently with
    probability p' (the count varies from seed to seed as a binomial)."""
    tokens = np.asarray(tokens)
    ordinary = ~np.isin(tokens, list(special_ids))
    where = np.flatnonzero(ordinary)
    picked = rng.choice(where, size=int(round(p * len(where))), replace=False)
    chosen = np.zeros(tokens.size, bool)
    chosen[picked] = True
    return _corrupt(tokens, chosen.reshape(tokens.shape), rng, vocab_size, mask_id, special_ids)


def mlm_mask_pool_keeps_mask_id(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: the random pool leaves out the special ids only, so it keeps mask_id when the caller did not list it;
    'ordinary ids (... neither special nor mask_id)'."""
    tokens = np.asarray(tokens)
    chosen = ~np.isin(tokens, list(special_ids)) & (rng.random(tokens.shape) < p)
    pool = np.array([i for i in range(vocab_size) if i not in set(special_ids)])
    return _corrupt(tokens, chosen, rng, vocab_size, mask_id, special_ids, pool=pool)


def mlm_mask_same_row_pattern(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: one draw per column, shared by every row of the batch; 'choose each ordinary token independently'."""
    tokens = np.asarray(tokens)
    draw = rng.random(tokens.shape[-1:])
    chosen = ~np.isin(tokens, list(special_ids)) & (np.broadcast_to(draw, tokens.shape) < p)
    return _corrupt(tokens, chosen, rng, vocab_size, mask_id, special_ids)


def mlm_mask_random_not_original(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG (subtle): the random token is drawn among the ordinary ids other than the original one;
    'a random token drawn uniformly from the ordinary ids'."""
    tokens = np.asarray(tokens)
    chosen = ~np.isin(tokens, list(special_ids)) & (rng.random(tokens.shape) < p)
    inputs, labels = tokens.copy(), np.full(tokens.shape, -100, dtype=tokens.dtype)
    labels[chosen] = tokens[chosen]
    pool = _ordinary(vocab_size, mask_id, special_ids)
    action = rng.random(tokens.shape)
    inputs[chosen & (action < 0.8)] = mask_id
    for index in zip(*np.nonzero(chosen & (action >= 0.8) & (action < 0.9))):
        others = pool[pool != tokens[index]]
        inputs[index] = others[rng.integers(0, len(others))]
    return inputs, labels


def mlm_mask_decile(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """CORRECT: the 80/10/10 decided by rng.integers(0, 10) per chosen position (a different random stream)."""
    tokens = np.asarray(tokens)
    inputs, labels = tokens.copy(), np.full(tokens.shape, -100, dtype=tokens.dtype)
    chosen = ~np.isin(tokens, list(special_ids)) & (rng.random(tokens.shape) < p)
    labels[chosen] = tokens[chosen]
    decile = rng.integers(0, 10, size=tokens.shape)
    pool = _ordinary(vocab_size, mask_id, special_ids)
    inputs[chosen & (decile < 8)] = mask_id
    swap = chosen & (decile == 8)
    inputs[swap] = rng.choice(pool, size=int(swap.sum()))
    return inputs, labels


def mlm_loss_labels_positive(logits, labels):
    """WRONG: counts the positions with labels > 0, so a chosen token of id 0 is left out;
    'the positions whose label is not -100'."""
    keep = labels > 0
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp[keep].gather(-1, labels[keep][:, None]).squeeze(-1)
    return -picked.sum() / keep.sum().clamp(min=1)


def mlm_loss_labels_nonnegative(logits, labels):
    """CORRECT: labels >= 0 is the same set as labels != -100 for token ids."""
    keep = labels >= 0
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp[keep].gather(-1, labels[keep][:, None]).squeeze(-1)
    return -picked.sum() / keep.sum().clamp(min=1)


def mlm_loss_per_row_mean(logits, labels):
    """WRONG: the mean of each row's mean, not the mean over all labelled positions."""
    keep = labels != -100
    logp = torch.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, labels.clamp(min=0)[..., None]).squeeze(-1) * keep
    per_row = nll.sum(-1) / keep.sum(-1).clamp(min=1)
    rows = (keep.sum(-1) > 0)
    return per_row[rows].mean() if rows.any() else logits.sum() * 0


def bert_count_with_mlm_head(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """WRONG: adds the MLM head (transform, its LayerNorm, the output bias); 'without the pre-training heads'."""
    H = d_model
    emb = (vocab_size + max_len + type_vocab_size) * H + 2 * H
    layer = 4 * (H * H + H) + (H * d_ff + d_ff) + (d_ff * H + H) + 2 * 2 * H
    pooler = H * H + H
    head = H * H + H + 2 * H + vocab_size
    return emb + n_layers * layer + pooler + head


def bert_count_pooler_no_bias(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """WRONG: the pooler without its bias; 'one dense H x H layer with biases'."""
    H = d_model
    emb = (vocab_size + max_len + type_vocab_size) * H + 2 * H
    layer = 4 * (H * H + H) + (H * d_ff + d_ff) + (d_ff * H + H) + 2 * 2 * H
    return emb + n_layers * layer + H * H


# ---- 05 ------------------------------------------------------------------------------------------------------


def causal_lm_per_sequence_mean(logits, tokens, ignore_index=-100):
    """WRONG: averages each sequence's mean; 'the mean of -log p over the targets that are not ignore_index'."""
    logp = torch.log_softmax(logits[..., :-1, :], dim=-1)
    targets = tokens[..., 1:]
    keep = targets != ignore_index
    nll = -logp.gather(-1, targets.clamp(min=0)[..., None]).squeeze(-1) * keep
    return (nll.sum(-1) / keep.sum(-1).clamp(min=1)).mean()


def top_p_softmax_first_axis(logits, p):
    """WRONG: the probabilities are a softmax over dim 0, not the last axis ('along the last axis, for each row')."""
    if p >= 1:
        return logits.clone()
    probs = torch.softmax(logits, dim=0)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    before = sorted_probs.cumsum(-1) - sorted_probs
    keep_sorted = before < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def top_k_sort_threshold(logits, k):
    """CORRECT: the k-th largest value from a descending sort, kept with keepdim."""
    if not k or k >= logits.shape[-1]:
        return logits.clone()
    kth = logits.sort(dim=-1, descending=True).values[..., k - 1:k]
    return logits.masked_fill(logits < kth, float("-inf"))


# ---- 06: text_infilling --------------------------------------------------------------------------------------


def _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, gap_low=0, gap_high_extra=1, start_extra=1):
    tokens = np.asarray(tokens)
    n = len(tokens)
    to_cover = int(round(mask_ratio * n))
    covered = np.zeros(n, bool)
    span_start = {}
    inserts = []
    while to_cover > 0:
        L = min(int(rng.poisson(poisson_lambda)), to_cover)
        if L == 0:
            inserts.append(int(rng.integers(gap_low, n + gap_high_extra)))
            continue
        tries = 0
        while True:
            start = int(rng.integers(0, max(n - L + start_extra, 1)))
            if start + L <= n and not covered[start:start + L].any():
                break
            tries += 1
            if tries % 500 == 0:  # perhaps no free stretch is long enough any more: use a shorter span
                L = max(1, min(L, max((b - a for a, b in _free_runs(covered)), default=1)) - (tries > 2000))
            if tries > 20000:  # (an off-by-one start can loop for ever; the measurement needs an end)
                raise RuntimeError("no free start found")
        covered[start:start + L] = True
        span_start[start] = L
        to_cover -= L
    out, at_gap = [], np.bincount(np.array(inserts, dtype=np.int64), minlength=n + 1)
    for i in range(n + 1):
        out.extend([mask_id] * int(at_gap[i]))
        if i == n:
            break
        if i in span_start:
            out.append(mask_id)
        elif not covered[i]:
            out.append(tokens[i])
    return np.array(out, dtype=tokens.dtype)


def _free_runs(covered):
    runs, start = [], None
    for i, c in enumerate(list(covered) + [True]):
        if not c and start is None:
            start = i
        if c and start is not None:
            runs.append((start, i))
            start = None
    return runs


def infilling_by_the_steps(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """CORRECT: the exercise's steps one by one (rejection of overlapping starts, shorter span when none fits)."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda)


def infilling_gap_never_at_end(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: the gap is rng.integers(0, n), never after the last token; 'rng.integers(0, n + 1): ... or at the end'."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, gap_high_extra=0)


def infilling_gap_never_at_start(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: the gap is rng.integers(1, n + 1), never before the first token; 'rng.integers(0, n + 1)'."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, gap_low=1)


def infilling_start_off_by_one(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: the start is rng.integers(0, n - L), so no span ever ends at the last token;
    'draw a start so that the span lies inside the sequence'."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, start_extra=0)


# ---- 07 ------------------------------------------------------------------------------------------------------


def wordpiece_always_lowercase(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """WRONG: lower-cases even with lowercase=False; 'with False, leave it as it is'."""
    word = word.lower()
    if len(word) > max_chars:
        return [unk]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return [unk]
        pieces.append(piece)
        start = end
    return pieces


def mean_pool_tiny_clamp(hidden, mask):
    """CORRECT: torch.where against 0 and a count clamped to 1e-9 (an empty row gives 0 / 1e-9 = 0)."""
    m = mask.bool()
    summed = torch.where(m[..., None], hidden, torch.zeros((), dtype=hidden.dtype, device=hidden.device)).sum(1)
    count = m.sum(1, keepdim=True).to(hidden.dtype).clamp(min=1e-9)
    return summed / count


# ---- 08 ------------------------------------------------------------------------------------------------------


def _unit_rows(X):
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return np.divide(X, norms, out=np.zeros_like(X), where=norms > 0)


def anisotropy_with_diagonal(X):
    """WRONG: the mean over all n * n pairs, diagonal included; 'the diagonal does not count'."""
    U = _unit_rows(X)
    return float((U @ U.T).mean())


def anisotropy_epsilon(X):
    """WRONG: norms clamped with an epsilon; 'a row of tiny numbers still has a direction, so do not clamp'."""
    X = np.asarray(X, dtype=np.float64)
    U = X / (np.linalg.norm(X, axis=1, keepdims=True) + 1e-12)
    n = len(X)
    C = U @ U.T
    return float((C.sum() - np.trace(C)) / (n * (n - 1)))


def anisotropy_drops_zero_rows(X):
    """WRONG: zero rows are removed before averaging; 'its pairs still count in the mean'."""
    X = np.asarray(X, dtype=np.float64)
    X = X[np.linalg.norm(X, axis=1) > 0]
    U = _unit_rows(X)
    n = len(X)
    if n < 2:
        return 0.0
    C = U @ U.T
    return float((C.sum() - np.trace(C)) / (n * (n - 1)))


def anisotropy_upper_triangle(X):
    """CORRECT: the cosine is symmetric, so the mean over i < j equals the mean over ordered pairs."""
    U = _unit_rows(X)
    i, j = np.triu_indices(len(U), k=1)
    return float(np.mean(np.sum(U[i] * U[j], axis=1)))


def whitening_multiply_sqrt(X, k=None):
    """WRONG: W = U * sqrt(s) instead of U / sqrt(s); 'W = U[:, :k] / np.sqrt(s[:k])'."""
    X = np.asarray(X, dtype=np.float64)
    C = np.atleast_2d(np.cov(X.T))
    U, s, _ = np.linalg.svd(C)
    k = X.shape[1] if k is None else k
    return X.mean(0), U[:, :k] * np.sqrt(s[:k])


def whitening_no_sqrt(X, k=None):
    """WRONG: divides by the variances, not their square roots."""
    X = np.asarray(X, dtype=np.float64)
    C = np.atleast_2d(np.cov(X.T))
    U, s, _ = np.linalg.svd(C)
    k = X.shape[1] if k is None else k
    return X.mean(0), U[:, :k] / s[:k]


def whitening_eigh_ascending(X, k=None):
    """WRONG: np.linalg.eigh's columns in its own (increasing) order; 'put its columns in order of decreasing
    variance'."""
    X = np.asarray(X, dtype=np.float64)
    C = np.atleast_2d(np.cov(X.T))
    s, U = np.linalg.eigh(C)
    k = X.shape[1] if k is None else k
    return X.mean(0), U[:, :k] / np.sqrt(s[:k])


def whitening_population_cov(X, k=None):
    """WRONG: the covariance divided by n (np.cov(X.T, bias=True)); 'it divides by n - 1'."""
    X = np.asarray(X, dtype=np.float64)
    C = np.atleast_2d(np.cov(X.T, bias=True))
    U, s, _ = np.linalg.svd(C)
    k = X.shape[1] if k is None else k
    return X.mean(0), U[:, :k] / np.sqrt(s[:k])


def info_nce_hard_negative_own_row(z1, z2, temperature=0.05, hard_negatives=None):
    """WRONG: each hard negative scored only against its own row (one extra column); 'they join the candidates of
    every row, as extra columns'."""
    a, b = F.normalize(z1, dim=-1), F.normalize(z2, dim=-1)
    logits = a @ b.T / temperature
    if hard_negatives is not None:
        h = F.normalize(hard_negatives, dim=-1)
        own = (a * h[: len(a)]).sum(-1, keepdim=True) / temperature
        logits = torch.cat([logits, own], dim=1)
    return F.cross_entropy(logits, torch.arange(len(z1), device=z1.device))


def info_nce_dot_product(z1, z2, temperature=0.05, hard_negatives=None):
    """WRONG: dot products, not cosines; 'the cosine similarity of each row of z1 with each candidate'."""
    cands = z2 if hard_negatives is None else torch.cat([z2, hard_negatives])
    logits = z1 @ cands.T / temperature
    return F.cross_entropy(logits, torch.arange(len(z1), device=z1.device))


def info_nce_symmetric(z1, z2, temperature=0.05, hard_negatives=None):
    """WRONG: the mean of both directions (CLIP); 'one direction, z1 to the candidates, as in SimCSE'."""
    a = F.normalize(z1, dim=-1)
    cands = F.normalize(z2 if hard_negatives is None else torch.cat([z2, hard_negatives]), dim=-1)
    logits = a @ cands.T / temperature
    target = torch.arange(len(z1), device=z1.device)
    back = F.normalize(z2, dim=-1) @ a.T / temperature
    return (F.cross_entropy(logits, target) + F.cross_entropy(back, target)) / 2


def info_nce_times_temperature(z1, z2, temperature=0.05, hard_negatives=None):
    """WRONG: multiplies by the temperature; 'divided by temperature'."""
    a = F.normalize(z1, dim=-1)
    cands = F.normalize(z2 if hard_negatives is None else torch.cat([z2, hard_negatives]), dim=-1)
    return F.cross_entropy(a @ cands.T * temperature, torch.arange(len(z1), device=z1.device))


# ---- 09 ------------------------------------------------------------------------------------------------------


def count_grad_is_set(model):
    """WRONG: a parameter counts as trainable when its .grad is set; 'that have requires_grad=True'."""
    params = list(model.parameters())
    return (sum(p.numel() for p in params if p.grad is not None), sum(p.numel() for p in params))


def count_state_dict(model):
    """WRONG: counts state_dict() entries (buffers included, tied tensors twice); the exercise's two traps."""
    total = sum(t.numel() for t in model.state_dict().values())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return trainable, total


def count_tensors_not_entries(model):
    """WRONG: counts parameter tensors, not entries ('a 64 x 64 matrix counts 4096')."""
    params = list(model.parameters())
    return sum(1 for p in params if p.requires_grad), len(params)


def count_named_parameters_dedup(model):
    """CORRECT: named_parameters() with a seen-set by id (it already yields each shared tensor once)."""
    seen, trainable, total = set(), 0, 0
    for _, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        trainable += p.numel() if p.requires_grad else 0
    return trainable, total


class _LoRABase(torch.nn.Module):
    swap_init = False
    scale_alpha_only = False
    freeze_bias = True
    merge_in_place = False

    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        if r < 1:  # added with issue 34's exact spec (r < 1 raises ValueError)
            raise ValueError("r must be at least 1")
        self.base, self.r, self.alpha = base, r, alpha
        base.weight.requires_grad_(False)
        if base.bias is not None and self.freeze_bias:
            base.bias.requires_grad_(False)
        w = base.weight
        a = torch.randn(r, base.in_features, dtype=w.dtype, device=w.device) / base.in_features ** 0.5
        b = torch.zeros(base.out_features, r, dtype=w.dtype, device=w.device)
        if self.swap_init:
            a, b = torch.zeros_like(a), torch.randn_like(b) / r ** 0.5
        self.A, self.B = torch.nn.Parameter(a), torch.nn.Parameter(b)
        self.dropout = torch.nn.Dropout(dropout)

    def scale(self):
        return self.alpha if self.scale_alpha_only else self.alpha / self.r

    def forward(self, x):
        return self.base(x) + self.scale() * (self.dropout(x) @ self.A.T @ self.B.T)

    def merge(self):
        delta = self.scale() * (self.B @ self.A)
        if self.merge_in_place:
            with torch.no_grad():
                self.base.weight += delta
            return self.base
        w = self.base.weight
        merged = torch.nn.Linear(self.base.in_features, self.base.out_features, bias=self.base.bias is not None,
                                 dtype=w.dtype, device=w.device)
        with torch.no_grad():
            merged.weight.copy_(w + delta)
            if self.base.bias is not None:
                merged.bias.copy_(self.base.bias)
        return merged


class LoRAInitSwapped(_LoRABase):
    """WRONG: A zero and B random; 'A ... random ... and B ... zero'."""
    swap_init = True


class LoRAScaleAlpha(_LoRABase):
    """WRONG: scales by alpha instead of alpha / r."""
    scale_alpha_only = True


class LoRABiasTrains(_LoRABase):
    """WRONG: freezes the base weight but not its bias; 'freeze base (its weight and its bias, if it has one)'."""
    freeze_bias = False


class LoRAMergeInPlace(_LoRABase):
    """WRONG: merge() adds BA into the base's weight and returns the base; 'a new nn.Linear ... leaves the layer
    itself unchanged'."""
    merge_in_place = True


class LoRAByTheSpec(_LoRABase):
    """CORRECT."""


def _prefix_parts(q, prefix_k, prefix_v):
    B = q.shape[0]
    pk = np.broadcast_to(prefix_k, (B,) + prefix_k.shape)
    pv = np.broadcast_to(prefix_v, (B,) + prefix_v.shape)
    return pk, pv


def _attention(q, k, v, mask):
    return sdpa_einsum_where(q, k, v, mask)


def _extended_mask(mask, q, P, L_k, in_front=True):
    if mask is None:
        return None
    B, H, L_q = q.shape[:3]
    m = np.broadcast_to(mask, (B, H, L_q, L_k))
    ones = np.ones((B, H, L_q, P), bool)
    return np.concatenate([ones, m] if in_front else [m, ones], axis=-1)


def prefix_keys_as_values(q, k, v, prefix_k, prefix_v, mask=None):
    """WRONG: the prefix keys are also used as the prefix values."""
    pk, _ = _prefix_parts(q, prefix_k, prefix_v)
    P, L_k = prefix_k.shape[1], k.shape[2]
    return _attention(q, np.concatenate([pk, k], 2), np.concatenate([pk, v], 2), _extended_mask(mask, q, P, L_k))


def prefix_keys_after(q, k, v, prefix_k, prefix_v, mask=None):
    """WRONG: the prefix is put after the sentence's keys, while the mask is extended in front (and the weights'
    prefix columns come last); 'prefix columns first'."""
    pk, pv = _prefix_parts(q, prefix_k, prefix_v)
    P, L_k = prefix_k.shape[1], k.shape[2]
    return _attention(q, np.concatenate([k, pk], 2), np.concatenate([v, pv], 2), _extended_mask(mask, q, P, L_k))


def prefix_mask_not_extended(q, k, v, prefix_k, prefix_v, mask=None):
    """WRONG: the mask's prefix columns are False (padded with zeros); 'every query may attend to all P prefix
    positions'."""
    pk, pv = _prefix_parts(q, prefix_k, prefix_v)
    P, L_k = prefix_k.shape[1], k.shape[2]
    full = None
    if mask is not None:
        B, H, L_q = q.shape[:3]
        m = np.broadcast_to(mask, (B, H, L_q, L_k))
        full = np.concatenate([np.zeros((B, H, L_q, P), bool), m], axis=-1)
    return _attention(q, np.concatenate([pk, k], 2), np.concatenate([pv, v], 2), full)


def prefix_by_the_spec(q, k, v, prefix_k, prefix_v, mask=None):
    """CORRECT."""
    pk, pv = _prefix_parts(q, prefix_k, prefix_v)
    P, L_k = prefix_k.shape[1], k.shape[2]
    return _attention(q, np.concatenate([pk, k], 2), np.concatenate([pv, v], 2), _extended_mask(mask, q, P, L_k))


# ---- 10 ------------------------------------------------------------------------------------------------------


def _class_scores(logits, mask_positions, label_word_ids, reduce):
    at_mask = logits[torch.arange(logits.shape[0], device=logits.device), mask_positions]
    return torch.stack([reduce(at_mask[:, ids]) for ids in label_word_ids], dim=-1)


def verbalizer_sum_of_words(logits, mask_positions, label_word_ids):
    """WRONG: a class's score is the sum of its words' logits; 'the mean of its label words' logits'."""
    return torch.log_softmax(_class_scores(logits, mask_positions, label_word_ids, lambda t: t.sum(-1)), dim=-1)


def verbalizer_vocab_softmax(logits, mask_positions, label_word_ids):
    """WRONG: the log-softmax over the whole vocabulary, never renormalised over the classes;
    'compare them among the classes only'."""
    logp = torch.log_softmax(logits, dim=-1)
    return _class_scores(logp, mask_positions, label_word_ids, lambda t: t.mean(-1))


def verbalizer_first_row_position(logits, mask_positions, label_word_ids):
    """WRONG: every row read at the first row's mask position; 'it differs from row to row'."""
    at_mask = logits[:, mask_positions[0]]
    scores = torch.stack([at_mask[:, ids].mean(-1) for ids in label_word_ids], dim=-1)
    return torch.log_softmax(scores, dim=-1)


def verbalizer_gather_loop(logits, mask_positions, label_word_ids):
    """CORRECT: a loop over the rows and classes, stacked."""
    rows = []
    for b in range(logits.shape[0]):
        z = logits[b, mask_positions[b]]
        rows.append(torch.stack([z[torch.as_tensor(ids, device=z.device)].mean() for ids in label_word_ids]))
    return torch.log_softmax(torch.stack(rows), dim=-1)


def pet_weights_not_normalised(pattern_log_probs, weights=None, temperature=2.0):
    """WRONG: the weighted sum with the raw weights; 'normalise them to sum to 1'."""
    P = pattern_log_probs.shape[0]
    w = torch.full((P,), 1.0 / P, dtype=pattern_log_probs.dtype) if weights is None else weights.to(
        pattern_log_probs.dtype)
    mixed = (w[:, None, None] * pattern_log_probs).sum(0)
    return torch.softmax(mixed / temperature, dim=-1)


def pet_mean_of_probabilities(pattern_log_probs, weights=None, temperature=2.0):
    """WRONG: averages the softened probabilities; 'averaging logits is an ensemble in log space; averaging
    probabilities is another, different ensemble'."""
    P = pattern_log_probs.shape[0]
    w = torch.ones(P, dtype=pattern_log_probs.dtype) if weights is None else weights.to(pattern_log_probs.dtype)
    w = w / w.sum()
    probs = torch.softmax(pattern_log_probs / temperature, dim=-1)
    return (w[:, None, None] * probs).sum(0)


def pet_temperature_multiplies(pattern_log_probs, weights=None, temperature=2.0):
    """WRONG: multiplies by the temperature; '/ temperature'."""
    P = pattern_log_probs.shape[0]
    w = torch.ones(P, dtype=pattern_log_probs.dtype) if weights is None else weights.to(pattern_log_probs.dtype)
    w = w / w.sum()
    return torch.softmax((w[:, None, None] * pattern_log_probs).sum(0) * temperature, dim=-1)


def pseudo_global_top(probs, per_class):
    """WRONG: the per_class * C most confident overall; 'take the most confident examples of each predicted class'."""
    confidence, _ = probs.max(dim=-1)
    n = min(per_class * probs.shape[1], len(probs))
    return confidence.topk(n).indices


def pseudo_positions_in_subset(probs, per_class):
    """WRONG: the top positions within each class's subset are returned, not mapped back to rows of probs."""
    confidence, predicted = probs.max(dim=-1)
    out = []
    for c in range(probs.shape[1]):
        mine = confidence[predicted == c]
        out.append(mine.topk(min(per_class, len(mine))).indices)
    return torch.cat(out)


def pseudo_column_top(probs, per_class):
    """WRONG: the top per_class of each column, whatever the example is predicted as (duplicates possible)."""
    return torch.cat([probs[:, c].topk(min(per_class, len(probs))).indices for c in range(probs.shape[1])])


def pseudo_sort_loop(probs, per_class):
    """CORRECT: one stable sort by confidence, then a loop that takes up to per_class per predicted class."""
    confidence, predicted = probs.max(dim=-1)
    taken = [0] * probs.shape[1]
    out = []
    for i in torch.argsort(confidence, descending=True).tolist():
        c = int(predicted[i])
        if taken[c] < per_class:
            taken[c] += 1
            out.append(i)
    return torch.tensor(out, dtype=torch.long)


# ---- 11 ------------------------------------------------------------------------------------------------------


def _others(n, query):
    return np.delete(np.arange(n), query)


def k_shot_format_empty_y(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """WRONG: the query is template.format(x=x, y=""), which keeps the text after {y}; 'cut just before {y}'."""
    n = len(demonstrations)
    if not 0 <= k <= n - 1:
        raise ValueError("k out of range")
    rng = np.random.default_rng() if rng is None else rng
    picked = rng.choice(_others(n, query), size=k, replace=False)
    parts = [template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in picked]
    return separator.join(parts + [template.format(x=demonstrations[query][0], y="")])


def k_shot_no_range_check(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """WRONG: k outside 0..n-1 is clamped into the range instead of raising; 'raise ValueError otherwise'."""
    n = len(demonstrations)
    rng = np.random.default_rng() if rng is None else rng
    k = min(max(k, 0), n - 1)
    picked = rng.choice(_others(n, query), size=k, replace=False)
    parts = [template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in picked]
    return separator.join(parts + [template.split("{y}")[0].format(x=demonstrations[query][0])])


def k_shot_draw_then_drop(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """WRONG: draws k + 1 of all indices and drops the query (or the last); 'rng.choice(others, size=k, ...)'."""
    n = len(demonstrations)
    if not 0 <= k <= n - 1:
        raise ValueError("k out of range")
    rng = np.random.default_rng() if rng is None else rng
    picked = [i for i in rng.choice(n, size=min(k + 1, n), replace=False) if i != query][:k]
    parts = [template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in picked]
    return separator.join(parts + [template.split("{y}")[0].format(x=demonstrations[query][0])])


def k_shot_sorted_demonstrations(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """WRONG: the drawn demonstrations put back in index order; 'in that order'."""
    n = len(demonstrations)
    if not 0 <= k <= n - 1:
        raise ValueError("k out of range")
    rng = np.random.default_rng() if rng is None else rng
    picked = sorted(rng.choice(_others(n, query), size=k, replace=False))
    parts = [template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in picked]
    return separator.join(parts + [template.split("{y}")[0].format(x=demonstrations[query][0])])


def k_shot_partition(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """CORRECT: str.partition cuts the template before {y}."""
    n = len(demonstrations)
    if k < 0 or k > n - 1:
        raise ValueError(f"k must be between 0 and {n - 1}")
    before, found, _ = template.partition("{y}")
    if not found or "{x}" not in before:  # added with issue 34's exact spec: {x}, then {y}
        raise ValueError("the template needs {x} before {y}")
    rng = np.random.default_rng() if rng is None else rng
    picked = rng.choice(np.delete(np.arange(n), query), size=k, replace=False)
    head = template.partition("{y}")[0]
    parts = [template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in picked]
    parts.append(head.format(x=demonstrations[query][0]))
    return separator.join(parts)


def induction_first_occurrence(attention, tokens):
    """WRONG: the first earlier occurrence, not the latest; 'the latest position s < t'."""
    H, T = attention.shape[0], len(tokens)
    values = []
    for t in range(T):
        earlier = [s for s in range(t) if tokens[s] == tokens[t]]
        if earlier:
            values.append(attention[:, t, earlier[0] + 1])
    return np.mean(values, axis=0) if values else np.zeros(H)


def induction_transposed(attention, tokens):
    """WRONG: reads attention[:, s + 1, t] (rows taken as keys); 'rows are queries'."""
    H, T = attention.shape[0], len(tokens)
    values = []
    for t in range(T):
        earlier = [s for s in range(t) if tokens[s] == tokens[t]]
        if earlier:
            values.append(attention[:, earlier[-1] + 1, t])
    return np.mean(values, axis=0) if values else np.zeros(H)


def induction_nan_when_none(attention, tokens):
    """WRONG: np.mean of nothing is NaN; 'If no token repeats, return np.zeros(H)'."""
    T = len(tokens)
    values = [attention[:, t, max(s for s in range(t) if tokens[s] == tokens[t]) + 1]
              for t in range(T) if any(tokens[s] == tokens[t] for s in range(t))]
    return np.array(values).reshape(-1, attention.shape[0]).mean(axis=0)


def induction_dictionary(attention, tokens):
    """CORRECT: one pass with a dict of each token's latest position."""
    last, values = {}, []
    for t, token in enumerate(np.asarray(tokens).tolist()):
        if token in last:
            values.append(attention[:, t, last[token] + 1])
        last[token] = t
    return np.mean(values, axis=0) if values else np.zeros(attention.shape[0])


# ---- 12 ------------------------------------------------------------------------------------------------------


def distillation_no_t_squared(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """WRONG: no T^2 on the soft term."""
    T = temperature
    log_q = F.log_softmax(student_logits / T, dim=-1)
    log_p = F.log_softmax(teacher_logits.detach() / T, dim=-1)
    kl = F.kl_div(log_q, log_p, reduction="batchmean", log_target=True)
    return alpha * kl + (1 - alpha) * F.cross_entropy(student_logits, labels)


def distillation_kl_swapped(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """WRONG: KL(student || teacher); 'KL(p || q) ... with p the teacher's distribution'."""
    T = temperature
    log_q = F.log_softmax(student_logits / T, dim=-1)
    log_p = F.log_softmax(teacher_logits.detach() / T, dim=-1)
    kl = F.kl_div(log_p, log_q, reduction="batchmean", log_target=True)
    return alpha * T * T * kl + (1 - alpha) * F.cross_entropy(student_logits, labels)


def distillation_mean_reduction(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """WRONG: kl_div's reduction='mean' divides by B * C; 'averaged over the batch'."""
    T = temperature
    log_q = F.log_softmax(student_logits / T, dim=-1)
    log_p = F.log_softmax(teacher_logits.detach() / T, dim=-1)
    kl = F.kl_div(log_q, log_p, reduction="mean", log_target=True)
    return alpha * T * T * kl + (1 - alpha) * F.cross_entropy(student_logits, labels)


def distillation_teacher_not_detached(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """WRONG: the teacher keeps its gradient; 'the teacher gets no gradient: detach its logits'."""
    T = temperature
    log_q = F.log_softmax(student_logits / T, dim=-1)
    log_p = F.log_softmax(teacher_logits / T, dim=-1)
    kl = F.kl_div(log_q, log_p, reduction="batchmean", log_target=True)
    return alpha * T * T * kl + (1 - alpha) * F.cross_entropy(student_logits, labels)


def quantize_reduce_over_dim(w, dim=None):
    """WRONG: for dim=d, the max over axis d itself instead of over every other axis."""
    if dim is None:
        scale = w.abs().max() / 127
    else:
        scale = w.abs().amax(dim=dim, keepdim=True) / 127
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.clamp(torch.round(w / safe), -127, 127).to(torch.int8), scale


def quantize_no_zero_guard(w, dim=None):
    """WRONG: divides by a zero scale; 'a slice of zeros has scale 0: its q must be 0, with no NaN'."""
    if dim is None:
        scale = w.abs().max() / 127
    else:
        other = [a for a in range(w.dim()) if a != dim % w.dim()]
        scale = w.abs().amax(dim=other, keepdim=True) / 127
    return torch.clamp(torch.round(w / scale), -127, 127).to(torch.int8), scale


def quantize_truncates(w, dim=None):
    """WRONG: .to(torch.int8) truncates toward zero instead of rounding."""
    if dim is None:
        scale = w.abs().max() / 127
    else:
        other = [a for a in range(w.dim()) if a != dim % w.dim()]
        scale = w.abs().amax(dim=other, keepdim=True) / 127
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.clamp(w / safe, -127, 127).to(torch.int8), scale


def quantize_float32_scale(w, dim=None):
    """WRONG: the scale is always float32; 'scale has w's dtype'."""
    if dim is None:
        scale = (w.abs().max() / 127).float()
    else:
        other = [a for a in range(w.dim()) if a != dim % w.dim()]
        scale = (w.abs().amax(dim=other, keepdim=True) / 127).float()
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.clamp(torch.round(w / safe), -127, 127).to(torch.int8), scale


def dequantize_float32(q, scale):
    """WRONG: always float32 ('q back in scale's floating-point dtype')."""
    return q.float() * scale.float()


def dequantize_divides(q, scale):
    """WRONG: divides by the scale."""
    return q.to(scale.dtype) / scale


def dequantize_item(q, scale):
    """WRONG: scale.item() works for one scale only; per-channel scales fail."""
    return q.to(scale.dtype) * scale.item()


def dequantize_int_result(q, scale):
    """WRONG: the product cast back to q's dtype."""
    return (q * scale).to(q.dtype)


def dequantize_by_the_spec(q, scale):
    """CORRECT."""
    return q.to(scale.dtype) * scale


FRESH = {
    "check_softmax": {"wrong": [], "correct": [("nan_to_num after the shift", softmax_nan_to_num)]},
    "check_scaled_dot_product_attention": {
        "wrong": [("the student's softmax gives NaN", sdpa_with_own_softmax, "follow-on from softmax"),
                  ("mask by boolean indexing", sdpa_boolean_index_mask, "mask must broadcast")],
        "correct": [("einsum and where", sdpa_einsum_where)]},
    "check_multi_head_attention": {
        "wrong": [("torch.softmax NaN on a fully masked row", mha_torch_softmax_nan, "all-masked row"),
                  ("weights averaged over heads", mha_head_averaged_weights, "per-head weights"),
                  ("mask[:, None] always", mha_mask_unsqueezed_once, "mask broadcast")],
        "correct": []},
    "check_mlm_mask": {
        "wrong": [("exactly round(p n) chosen", mlm_mask_exact_count, "count not binomial"),
                  ("pool keeps mask_id", mlm_mask_pool_keeps_mask_id, "random pool includes mask_id"),
                  ("one draw per column for every row", mlm_mask_same_row_pattern, "positions not independent"),
                  ("random token never the original", mlm_mask_random_not_original, "random not uniform")],
        "correct": [("decile per position", mlm_mask_decile)]},
    "check_mlm_loss": {
        "wrong": [("labels > 0", mlm_loss_labels_positive, "ignores token id 0"),
                  ("mean of per-row means", mlm_loss_per_row_mean, "mean over rows")],
        "correct": [("labels >= 0", mlm_loss_labels_nonnegative)]},
    "check_bert_parameter_count": {
        "wrong": [("MLM head included", bert_count_with_mlm_head, "pre-training head counted"),
                  ("pooler without bias", bert_count_pooler_no_bias, "pooler bias")],
        "correct": []},
    "check_causal_lm_loss": {
        "wrong": [("mean of per-sequence means", causal_lm_per_sequence_mean, "mean over sequences")],
        "correct": []},
    "check_top_k_filter": {"wrong": [], "correct": [("sort threshold", top_k_sort_threshold)]},
    "check_top_p_filter": {
        "wrong": [("softmax over dim 0", top_p_softmax_first_axis, "softmax axis")], "correct": []},
    "check_text_infilling": {
        "wrong": [("gap never at the end", infilling_gap_never_at_end, "insertion never after last token"),
                  ("gap never at the start", infilling_gap_never_at_start, "insertion never before first token"),
                  ("start off by one", infilling_start_off_by_one, "last token never covered")],
        "correct": [("the steps one by one", infilling_by_the_steps)]},
    "check_wordpiece": {
        "wrong": [("lower-cases always", wordpiece_always_lowercase, "lowercase=False ignored")], "correct": []},
    "check_mean_pool": {"wrong": [], "correct": [("count clamped to 1e-9", mean_pool_tiny_clamp)]},
    "check_anisotropy": {
        "wrong": [("diagonal included", anisotropy_with_diagonal, "diagonal"),
                  ("epsilon on the norms", anisotropy_epsilon, "epsilon"),
                  ("zero rows dropped", anisotropy_drops_zero_rows, "zero rows' pairs")],
        "correct": [("upper triangle", anisotropy_upper_triangle)]},
    "check_whitening": {
        "wrong": [("times sqrt(s)", whitening_multiply_sqrt, "multiplied"),
                  ("divided by s", whitening_no_sqrt, "no square root"),
                  ("eigh ascending", whitening_eigh_ascending, "order"),
                  ("covariance over n", whitening_population_cov, "n instead of n - 1")],
        "correct": []},
    "check_info_nce_loss": {
        "wrong": [("hard negative only for its own row", info_nce_hard_negative_own_row, "own row"),
                  ("dot products", info_nce_dot_product, "not cosine"),
                  ("both directions", info_nce_symmetric, "symmetric"),
                  ("times temperature", info_nce_times_temperature, "temperature")],
        "correct": []},
    "check_count_trainable_parameters": {
        "wrong": [(".grad is set", count_grad_is_set, "grad instead of requires_grad"),
                  ("state_dict", count_state_dict, "buffers and tied"),
                  ("tensors not entries", count_tensors_not_entries, "tensors")],
        "correct": [("named_parameters with ids", count_named_parameters_dedup)]},
    "check_lora_linear": {
        "wrong": [("A zero, B random", LoRAInitSwapped, "init swapped"),
                  ("scale alpha", LoRAScaleAlpha, "alpha not alpha / r"),
                  ("bias trains", LoRABiasTrains, "bias not frozen"),
                  ("merge in place", LoRAMergeInPlace, "merge changes the layer")],
        "correct": [("by the spec", LoRAByTheSpec)]},
    "check_attention_with_prefix": {
        "wrong": [("prefix keys as values", prefix_keys_as_values, "keys as values"),
                  ("prefix after the keys, mask in front", prefix_keys_after, "order"),
                  ("prefix columns masked", prefix_mask_not_extended, "mask not extended")],
        "correct": [("by the spec", prefix_by_the_spec)]},
    "check_verbalizer_log_probs": {
        "wrong": [("sum of words", verbalizer_sum_of_words, "sum not mean"),
                  ("softmax over the vocabulary", verbalizer_vocab_softmax, "vocabulary softmax"),
                  ("first row's position", verbalizer_first_row_position, "one mask position")],
        "correct": [("loop", verbalizer_gather_loop)]},
    "check_pet_soft_labels": {
        "wrong": [("weights not normalised", pet_weights_not_normalised, "normalise"),
                  ("mean of probabilities", pet_mean_of_probabilities, "probabilities"),
                  ("times temperature", pet_temperature_multiplies, "temperature")],
        "correct": []},
    "check_select_pseudo_labels": {
        "wrong": [("global top", pseudo_global_top, "global"),
                  ("positions in the subset", pseudo_positions_in_subset, "not mapped back"),
                  ("top of each column", pseudo_column_top, "column")],
        "correct": [("sort loop", pseudo_sort_loop)]},
    "check_k_shot_prompt": {
        "wrong": [("query formatted with y=''", k_shot_format_empty_y, "text after {y} kept"),
                  ("k clamped, no ValueError", k_shot_no_range_check, "no ValueError"),
                  ("k + 1 drawn, query dropped", k_shot_draw_then_drop, "draw"),
                  ("demonstrations sorted", k_shot_sorted_demonstrations, "order")],
        "correct": [("partition", k_shot_partition)]},
    "check_induction_score": {
        "wrong": [("first occurrence", induction_first_occurrence, "latest"),
                  ("transposed", induction_transposed, "rows are queries"),
                  ("NaN when no repeat", induction_nan_when_none, "zeros")],
        "correct": [("dictionary", induction_dictionary)]},
    "check_distillation_loss": {
        "wrong": [("no T^2", distillation_no_t_squared, "T^2"),
                  ("KL swapped", distillation_kl_swapped, "direction"),
                  ("reduction='mean'", distillation_mean_reduction, "batchmean"),
                  ("teacher not detached", distillation_teacher_not_detached, "detach")],
        "correct": []},
    "check_quantize_int8": {
        "wrong": [("max over dim", quantize_reduce_over_dim, "axes"),
                  ("no zero guard", quantize_no_zero_guard, "zero scale"),
                  ("truncates", quantize_truncates, "round"),
                  ("float32 scale", quantize_float32_scale, "dtype")],
        "correct": []},
    "check_dequantize": {
        "wrong": [("float32 always", dequantize_float32, "dtype"),
                  ("divides", dequantize_divides, "divides"),
                  ("scale.item()", dequantize_item, "per-channel"),
                  ("int result", dequantize_int_result, "int")],
        "correct": [("by the spec", dequantize_by_the_spec)]},
}


# What the checks answer to each wrong answer after issue 33's changes: (check, name, class, fragment of the
# message). Classes: named, generic, misleading (top_p's softmax over dim 0 is told 'cumulative <= p'), passing.
EXPECTED = [
    ('check_scaled_dot_product_attention', "the student's softmax gives NaN", 'named', ' on that row of all -inf scores: the failure com'),
    ('check_scaled_dot_product_attention', 'mask by boolean indexing', 'generic', ''),
    ('check_multi_head_attention', 'torch.softmax NaN on a fully masked row', 'passing', ''),
    ('check_multi_head_attention', 'weights averaged over heads', 'named', ') (one (L_q, L_k) matrix per head, not averaged '),
    ('check_multi_head_attention', 'mask[:, None] always', 'generic', ''),
    ('check_mlm_mask', 'exactly round(p n) chosen', 'named', ': an exact count is chosen, but each token is ch'),
    ('check_mlm_mask', 'pool keeps mask_id', 'named', ') is not among special_ids in this case, and you'),
    ('check_mlm_mask', 'one draw per column for every row', 'named', '): each ordinary token is chosen independently, '),
    ('check_mlm_mask', 'random token never the original', 'named', ': the random token seems never to be the origina'),
    ('check_mlm_loss', 'labels > 0', 'named', 'the positions whose label is token 0 left out (l'),
    ('check_mlm_loss', 'mean of per-row means', 'named', "the mean of each sequence's mean, but the loss i"),
    ('check_bert_parameter_count', 'MLM head included', 'named', 'the MLM head counted (its dense transform, Layer'),
    ('check_bert_parameter_count', 'pooler without bias', 'named', "the bias of the pooler's dense layer (d_model) f"),
    ('check_causal_lm_loss', 'mean of per-sequence means', 'named', "the mean of each sequence's mean, but the loss i"),
    ('check_top_p_filter', 'softmax over dim 0', 'misleading', ''),
    ('check_text_infilling', 'gap never at the end', 'named', ' inserted masks landed after the last token, whe'),
    ('check_text_infilling', 'gap never at the start', 'named', ' inserted masks landed before the first token, w'),
    ('check_text_infilling', 'start off by one', 'passing', ''),
    ('check_wordpiece', 'lower-cases always', 'named', 'the word lower-cased although lowercase=False: f'),
    ('check_anisotropy', 'diagonal included', 'named', 'the diagonal counted: the mean of all n² entries'),
    ('check_anisotropy', 'epsilon on the norms', 'named', 'an underflow: with entries of about 1e-160 the s'),
    ('check_anisotropy', 'zero rows dropped', 'named', 'the pairs with a zero row left out, but a zero r'),
    ('check_whitening', 'times sqrt(s)', 'named', 'U multiplied by np.sqrt(s) instead of divided by'),
    ('check_whitening', 'divided by s', 'named', '1 / s instead of 1 / np.sqrt(s): s holds varianc'),
    ('check_whitening', 'eigh ascending', 'named', 'the components in ascending order of variance (n'),
    ('check_whitening', 'covariance over n', 'named', 'a covariance divided by n (ddof=0, np.cov(X.T, b'),
    ('check_info_nce_loss', 'hard negative only for its own row', 'named', 'each hard negative scored against its own row on'),
    ('check_info_nce_loss', 'dot products', 'named', 'dot products instead of cosines: normalise the r'),
    ('check_info_nce_loss', 'both directions', 'named', 'a symmetric loss (the two directions averaged), '),
    ('check_info_nce_loss', 'times temperature', 'named', 'the cosines multiplied by the temperature instea'),
    ('check_count_trainable_parameters', '.grad is set', 'named', 'no parameter counted as trainable, though every '),
    ('check_count_trainable_parameters', 'state_dict', 'named', 'buffers counted as parameters: state_dict() also'),
    ('check_count_trainable_parameters', 'tensors not entries', 'named', 'tensors counted instead of their entries: count '),
    ('check_lora_linear', 'A zero, B random', 'named', 'A starts at zero and B random, the other way rou'),
    ('check_lora_linear', 'scale alpha', 'named', 'the scale alpha instead of alpha / r.'),
    ('check_lora_linear', 'bias trains', 'named', "the base layer's bias still trains (requires_gra"),
    ('check_lora_linear', 'merge in place', 'named', 'merge() changed the base layer in place; it must'),
    ('check_attention_with_prefix', 'prefix keys as values', 'named', 'prefix_k used as the prefix values too: the valu'),
    ('check_attention_with_prefix', 'prefix after the keys, mask in front', 'named', "the mask's prefix columns are in front"),
    ('check_attention_with_prefix', 'prefix columns masked', 'named', 'the prefix columns masked out: every query may a'),
    ('check_verbalizer_log_probs', 'sum of words', 'named', "the sum over a class's label words instead of th"),
    ('check_verbalizer_log_probs', 'softmax over the vocabulary', 'named', 'a softmax over the whole vocabulary with the lab'),
    ('check_verbalizer_log_probs', "first row's position", 'named', "row 0's mask position (mask_positions[0]) used f"),
    ('check_pet_soft_labels', 'weights not normalised', 'named', 'the weights not normalised: divide them by their'),
    ('check_pet_soft_labels', 'mean of probabilities', 'named', "the patterns' probabilities averaged instead of "),
    ('check_pet_soft_labels', 'times temperature', 'named', 'the weighted mean multiplied by the temperature '),
    ('check_select_pseudo_labels', 'global top', 'named', "a global top-k over every example's confidence: "),
    ('check_select_pseudo_labels', 'positions in the subset', 'named', "each class's top positions WITHIN that class's e"),
    ('check_select_pseudo_labels', 'top of each column', 'named', "the top of each class's column probs[:, c] over "),
    ('check_k_shot_prompt', "query formatted with y=''", 'named', 'the query written with y="", which keeps the tem'),
    ('check_k_shot_prompt', 'k clamped, no ValueError', 'named', '), so your function must raise ValueError, but i'),
    ('check_k_shot_prompt', 'k + 1 drawn, query dropped', 'named', 'k of the other examples, well written, but not t'),
    ('check_k_shot_prompt', 'demonstrations sorted', 'named', 'the demonstrations sorted by index: keep the ord'),
    ('check_induction_score', 'first occurrence', 'named', 'the FIRST earlier occurrence of the token: s is '),
    ('check_induction_score', 'transposed', 'named', 'the query and key axes swapped, attention[:, s +'),
    ('check_induction_score', 'NaN when no repeat', 'named', ']); no token repeats here, so there is nothing t'),
    ('check_distillation_loss', 'no T^2', 'named', 'the T² factor missing: multiply the KL term by t'),
    ('check_distillation_loss', 'KL swapped', 'named', 'the KL reversed, KL(student ‖ teacher): the teac'),
    ('check_distillation_loss', "reduction='mean'", 'named', "the KL averaged over the classes too: F.kl_div's"),
    ('check_distillation_loss', 'teacher not detached', 'named', "the teacher's logits received a gradient: the te"),
    ('check_quantize_int8', 'max over dim', 'named', 'the max taken along dim instead of over every ot'),
    ('check_quantize_int8', 'no zero guard', 'passing', ''),
    ('check_quantize_int8', 'truncates', 'named', 'truncation toward zero: .to(torch.int8) without '),
    ('check_quantize_int8', 'float32 scale', 'named', ' like w (no .float() or .double(), no torch.tens'),
    ('check_dequantize', 'float32 always', 'named', 'the result has dtype torch.float'),
    ('check_dequantize', 'divides', 'named', 'q / scale instead of q · scale: the scale is one'),
    ('check_dequantize', 'scale.item()', 'generic', ''),
    ('check_dequantize', 'int result', 'named', " like scale: convert q to scale's dtype before m"),
]
