"""A cohort of independently written obvious answers, for review's similarity (bench/similarity.py's
review_cohort): three correct answers to every exercise the course grades (plmcourse.grading.CHECKS).

How it was written: from each exercise's specification alone, the markdown above its answer cell in
course/release and the stub the student is given (its `def` line and docstring, kept as a student keeps
them), never from the course's solution (course/source's answer cells), the package's own versions
(plmcourse.ref / nn / data) or the mistake catalogues' right answers, none of which was opened while
writing. Each exercise gets three styles a careful student might choose: (a) close to the formula of the
text, (b) explicit loops or intermediate names, (c) vectorised another way. They were written in one pass,
before the canonical form or the fingerprints were computed on any of them, and none was changed
after the measurement; those that failed their check when first run were fixed for correctness only, as
the list FIXED below says.

An answer is the source of its answer cell. It runs in the namespace a notebook gives its cells
(`namespace`): NumPy as np, torch, torch.nn.functional as F, math and plmcourse.ref as ref, and the
cohort's own answer to an earlier exercise where an answer calls one (the attention exercise's
`softmax`, as a student calls the softmax of their Exercise 1).
"""

from __future__ import annotations

# exercise (a graded function's name: check_<name> grades it) -> the object its answer defines
DEFINES = {"lora_linear": "LoRALinear"}

# an answer that calls a function of an earlier exercise of its notebook: that exercise's answer of the
# same style is run first, as the student's earlier cell would have been
CALLS = {"scaled_dot_product_attention": ["softmax"]}

COHORT: dict[str, list[str]] = {}

COHORT["normalize"] = [
    r'''def normalize(v):
    """Return v scaled to unit Euclidean length; a zero vector gives zeros."""
    norm = np.linalg.norm(v)
    if norm == 0:
        return np.zeros_like(v, dtype=float)
    return v / norm
''',
    r'''def normalize(v):
    """Return v scaled to unit Euclidean length; a zero vector gives zeros."""
    total = 0.0
    for value in v:
        total += value * value
    length = math.sqrt(total)
    result = np.zeros(len(v))
    if length > 0:
        for i in range(len(v)):
            result[i] = v[i] / length
    return result
''',
    r'''def normalize(v):
    """Return v scaled to unit Euclidean length; a zero vector gives zeros."""
    v = np.asarray(v, dtype=float)
    length = np.sqrt(np.sum(v ** 2))
    return np.divide(v, length, out=np.zeros_like(v), where=length > 0)
''',
]

COHORT["log_softmax"] = [
    r'''def log_softmax(x, axis=-1):
    """log softmax(x) along `axis`, stable for large and very negative logits."""
    m = np.max(x, axis=axis, keepdims=True)
    shifted = x - m
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
''',
    r'''def log_softmax(x, axis=-1):
    """log softmax(x) along `axis`, stable for large and very negative logits."""
    x = np.asarray(x)
    biggest = x.max(axis=axis, keepdims=True)
    exps = np.exp(x - biggest)
    sums = exps.sum(axis=axis, keepdims=True)
    log_normaliser = biggest + np.log(sums)
    result = x - log_normaliser
    return result
''',
    r'''def log_softmax(x, axis=-1):
    """log softmax(x) along `axis`, stable for large and very negative logits."""
    moved = np.moveaxis(np.asarray(x), axis, -1)
    top = moved.max(axis=-1)[..., None]
    logsumexp = top + np.log(np.exp(moved - top).sum(axis=-1))[..., None]
    return np.moveaxis(moved - logsumexp, -1, axis)
''',
]

COHORT["noise_distribution"] = [
    r'''def noise_distribution(counts, power=0.75):
    """P(w) proportional to count(w)**power, normalised; 0 for words never seen."""
    counts = np.asarray(counts, dtype=float)
    weights = np.where(counts > 0, counts ** power, 0.0)
    return weights / weights.sum()
''',
    r'''def noise_distribution(counts, power=0.75):
    """P(w) proportional to count(w)**power, normalised; 0 for words never seen."""
    weights = np.zeros(len(counts))
    for i, c in enumerate(counts):
        if c > 0:
            weights[i] = float(c) ** power
    total = weights.sum()
    return weights / total
''',
    r'''def noise_distribution(counts, power=0.75):
    """P(w) proportional to count(w)**power, normalised; 0 for words never seen."""
    counts = np.asarray(counts)
    seen = counts > 0
    probs = np.zeros(counts.shape, dtype=np.float64)
    probs[seen] = counts[seen].astype(np.float64) ** power
    probs /= probs.sum()
    return probs
''',
]

COHORT["skipgram_negative_sampling_loss"] = [
    r'''def skipgram_negative_sampling_loss(center_vecs, context_vecs, negative_vecs):
    """(loss, grad_center, grad_context, grad_negatives) of the mean SGNS loss over the batch."""
    B = center_vecs.shape[0]
    pos = np.sum(center_vecs * context_vecs, axis=1)
    neg = np.einsum("bkd,bd->bk", negative_vecs, center_vecs)
    loss = (np.logaddexp(0, -pos).sum() + np.logaddexp(0, neg).sum()) / B
    sig_pos = np.exp(-np.logaddexp(0, -pos))
    sig_neg = np.exp(-np.logaddexp(0, -neg))
    d_pos = (sig_pos - 1) / B
    d_neg = sig_neg / B
    grad_center = d_pos[:, None] * context_vecs + np.einsum("bk,bkd->bd", d_neg, negative_vecs)
    grad_context = d_pos[:, None] * center_vecs
    grad_negatives = d_neg[:, :, None] * center_vecs[:, None, :]
    return float(loss), grad_center, grad_context, grad_negatives
''',
    r'''def skipgram_negative_sampling_loss(center_vecs, context_vecs, negative_vecs):
    """(loss, grad_center, grad_context, grad_negatives) of the mean SGNS loss over the batch."""
    def sigmoid(s):
        return np.exp(-np.logaddexp(0.0, -s))

    batch = len(center_vecs)
    loss = 0.0
    grad_center = np.zeros_like(center_vecs, dtype=float)
    grad_context = np.zeros_like(context_vecs, dtype=float)
    grad_negatives = np.zeros_like(negative_vecs, dtype=float)
    for b in range(batch):
        c = center_vecs[b]
        o = context_vecs[b]
        score = c @ o
        loss += np.logaddexp(0.0, -score)
        g = sigmoid(score) - 1.0
        grad_center[b] += g * o
        grad_context[b] += g * c
        for k in range(negative_vecs.shape[1]):
            n = negative_vecs[b, k]
            score_k = c @ n
            loss += np.logaddexp(0.0, score_k)
            g_k = sigmoid(score_k)
            grad_center[b] += g_k * n
            grad_negatives[b, k] += g_k * c
    return loss / batch, grad_center / batch, grad_context / batch, grad_negatives / batch
''',
    r'''def skipgram_negative_sampling_loss(center_vecs, context_vecs, negative_vecs):
    """(loss, grad_center, grad_context, grad_negatives) of the mean SGNS loss over the batch."""
    n = len(center_vecs)
    # one row of scores per pair: the positive first, then the negatives with their sign flipped
    outputs = np.concatenate([context_vecs[:, None, :], -negative_vecs], axis=1)  # (B, 1 + K, d)
    scores = np.matmul(outputs, center_vecs[:, :, None])[..., 0]  # (B, 1 + K)
    loss = np.logaddexp(0, -scores).sum() / n
    # d/ds of -log sigmoid(s) is sigmoid(s) - 1 = -sigmoid(-s)
    coeff = -np.exp(-np.logaddexp(0, scores)) / n
    grad_outputs = coeff[..., None] * center_vecs[:, None, :]
    grad_center = np.matmul(coeff[:, None, :], outputs)[:, 0, :]
    return loss, grad_center, grad_outputs[:, 0], -grad_outputs[:, 1:]
''',
]

COHORT["cross_entropy"] = [
    r'''def cross_entropy(logits, targets, ignore_index=-100):
    """Mean -log p(target) over the positions whose target is not ignore_index."""
    logp = ref.log_softmax(logits, axis=-1)
    keep = targets != ignore_index
    picked = np.take_along_axis(logp[keep], targets[keep][:, None], axis=-1)
    return float(-picked.mean())
''',
    r'''def cross_entropy(logits, targets, ignore_index=-100):
    """Mean -log p(target) over the positions whose target is not ignore_index."""
    vocab = logits.shape[-1]
    flat_logits = logits.reshape(-1, vocab)
    flat_targets = np.asarray(targets).reshape(-1)
    total = 0.0
    count = 0
    for row, target in zip(flat_logits, flat_targets):
        if target == ignore_index:
            continue
        m = row.max()
        log_z = m + np.log(np.sum(np.exp(row - m)))
        total += log_z - row[target]
        count += 1
    return total / count
''',
    r'''def cross_entropy(logits, targets, ignore_index=-100):
    """Mean -log p(target) over the positions whose target is not ignore_index."""
    targets = np.asarray(targets)
    valid = targets != ignore_index
    safe = np.where(valid, targets, 0)
    m = logits.max(axis=-1, keepdims=True)
    lse = (m + np.log(np.exp(logits - m).sum(axis=-1, keepdims=True)))[..., 0]
    target_logit = np.take_along_axis(logits, safe[..., None], axis=-1)[..., 0]
    nll = lse - target_logit
    return nll[valid].sum() / valid.sum()
''',
]

COHORT["bilm_loss"] = [
    r'''import torch.nn.functional as F


def bilm_loss(forward_logits, backward_logits, targets):
    """Forward LM's mean cross-entropy (predict t + 1) plus the backward LM's (predict t - 1)."""
    V = forward_logits.size(-1)
    fwd_targets = targets[:, 1:].clone()
    fwd_targets[targets[:, :-1] == -100] = -100
    bwd_targets = targets[:, :-1].clone()
    bwd_targets[targets[:, 1:] == -100] = -100
    fwd = F.cross_entropy(forward_logits[:, :-1].reshape(-1, V), fwd_targets.reshape(-1), ignore_index=-100)
    bwd = F.cross_entropy(backward_logits[:, 1:].reshape(-1, V), bwd_targets.reshape(-1), ignore_index=-100)
    return fwd + bwd
''',
    r'''import torch.nn.functional as F


def bilm_loss(forward_logits, backward_logits, targets):
    """Forward LM's mean cross-entropy (predict t + 1) plus the backward LM's (predict t - 1)."""
    real = targets != -100
    safe_targets = targets.clamp(min=0)

    # forward: position t predicts t + 1
    f_logp = torch.log_softmax(forward_logits[:, :-1], dim=-1)
    f_nll = -f_logp.gather(-1, safe_targets[:, 1:].unsqueeze(-1)).squeeze(-1)
    f_counted = real[:, :-1] & real[:, 1:]
    forward_loss = f_nll[f_counted].mean()

    # backward: position t predicts t - 1
    b_logp = torch.log_softmax(backward_logits[:, 1:], dim=-1)
    b_nll = -b_logp.gather(-1, safe_targets[:, :-1].unsqueeze(-1)).squeeze(-1)
    b_counted = real[:, 1:] & real[:, :-1]
    backward_loss = b_nll[b_counted].mean()

    return forward_loss + backward_loss
''',
    r'''import torch.nn.functional as F


def bilm_loss(forward_logits, backward_logits, targets):
    """Forward LM's mean cross-entropy (predict t + 1) plus the backward LM's (predict t - 1)."""
    ignore = -100
    padded = targets == ignore
    next_tokens = torch.where(padded[:, :-1], torch.full_like(targets[:, 1:], ignore), targets[:, 1:])
    previous_tokens = torch.where(padded[:, 1:], torch.full_like(targets[:, :-1], ignore), targets[:, :-1])
    forward_loss = F.cross_entropy(forward_logits[:, :-1].transpose(1, 2), next_tokens, ignore_index=ignore)
    backward_loss = F.cross_entropy(backward_logits[:, 1:].transpose(1, 2), previous_tokens, ignore_index=ignore)
    return backward_loss + forward_loss
''',
]

COHORT["scalar_mix"] = [
    r'''def scalar_mix(layers, weights, gamma):
    """gamma * sum_j softmax(weights)_j * layers[j]."""
    s = torch.softmax(weights, dim=0)
    return gamma * (s.view(-1, *([1] * (layers.dim() - 1))) * layers).sum(dim=0)
''',
    r'''def scalar_mix(layers, weights, gamma):
    """gamma * sum_j softmax(weights)_j * layers[j]."""
    probs = torch.softmax(weights, dim=0)
    mixed = torch.zeros_like(layers[0])
    for j in range(layers.shape[0]):
        mixed = mixed + probs[j] * layers[j]
    return gamma * mixed
''',
    r'''def scalar_mix(layers, weights, gamma):
    """gamma * sum_j softmax(weights)_j * layers[j]."""
    w = weights - weights.max()
    w = w.exp() / w.exp().sum()
    return gamma * torch.tensordot(w, layers, dims=1)
''',
]

COHORT["softmax"] = [
    r'''def softmax(x, axis=-1):
    """Softmax of x along `axis`, stable for large inputs; an all -inf slice gives zeros."""
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)
''',
    r'''def softmax(x, axis=-1):
    """Softmax of x along `axis`, stable for large inputs; an all -inf slice gives zeros."""
    moved = np.moveaxis(np.asarray(x), axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.zeros(flat.shape)
    for i, row in enumerate(flat):
        if np.all(np.isneginf(row)):
            continue
        exps = np.exp(row - row.max())
        out[i] = exps / exps.sum()
    return np.moveaxis(out.reshape(moved.shape), -1, axis)
''',
    r'''def softmax(x, axis=-1):
    """Softmax of x along `axis`, stable for large inputs; an all -inf slice gives zeros."""
    shift = np.max(x, axis=axis, keepdims=True)
    shift[~np.isfinite(shift)] = 0
    unnormalised = np.exp(x - shift)
    total = unnormalised.sum(axis=axis, keepdims=True)
    total[total == 0] = 1
    return unnormalised / total
''',
]

COHORT["scaled_dot_product_attention"] = [
    r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q kᵀ / √d_k) v with an optional boolean mask (True = may attend)."""
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return weights @ v, weights
''',
    r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q kᵀ / √d_k) v with an optional boolean mask (True = may attend)."""
    d_k = q.shape[-1]
    k_t = np.swapaxes(k, -2, -1)
    scores = np.matmul(q, k_t) / math.sqrt(d_k)
    if mask is None:
        mask = np.ones(scores.shape, dtype=bool)
    mask = np.broadcast_to(mask, scores.shape)
    masked = np.where(mask, scores, -np.inf)
    row_max = masked.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    exps = np.exp(masked - row_max)
    totals = exps.sum(axis=-1, keepdims=True)
    weights = np.where(totals > 0, exps / np.where(totals > 0, totals, 1.0), 0.0)
    output = np.matmul(weights, v)
    return output, weights
''',
    r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q kᵀ / √d_k) v with an optional boolean mask (True = may attend)."""
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    allowed = np.ones(scores.shape, dtype=bool) if mask is None else np.broadcast_to(mask, scores.shape)
    top = np.max(np.where(allowed, scores, -np.inf), axis=-1, keepdims=True)
    shifted = np.where(allowed, scores - np.where(np.isfinite(top), top, 0), -np.inf)
    e = np.exp(shifted)
    z = e.sum(axis=-1, keepdims=True)
    weights = e / np.maximum(z, np.finfo(e.dtype).tiny)
    return np.einsum("...ij,...jd->...id", weights, v), weights
''',
]

COHORT["causal_mask"] = [
    r'''def causal_mask(n):
    """Boolean (n, n): True on and below the diagonal."""
    return np.tril(np.ones((n, n), dtype=bool))
''',
    r'''def causal_mask(n):
    """Boolean (n, n): True on and below the diagonal."""
    mask = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(i + 1):
            mask[i, j] = True
    return mask
''',
    r'''def causal_mask(n):
    """Boolean (n, n): True on and below the diagonal."""
    idx = np.arange(n)
    return idx[:, None] >= idx[None, :]
''',
]

COHORT["multi_head_attention"] = [
    r'''def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """Multi-head attention with weights applied as x @ w; returns (output, per-head weights)."""
    B, L_q, d_model = x_q.shape
    L_k = x_kv.shape[1]
    d_k = d_model // n_heads
    q = (x_q @ w_q).view(B, L_q, n_heads, d_k).transpose(1, 2)
    k = (x_kv @ w_k).view(B, L_k, n_heads, d_k).transpose(1, 2)
    v = (x_kv @ w_v).view(B, L_k, n_heads, d_k).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        empty = ~mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~mask, float("-inf")).masked_fill(empty, 0.0)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(empty, 0.0)
    out = (weights @ v).transpose(1, 2).reshape(B, L_q, d_model)
    return out @ w_o, weights
''',
    r'''def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """Multi-head attention with weights applied as x @ w; returns (output, per-head weights)."""
    d_model = x_q.shape[-1]
    d_k = d_model // n_heads
    queries = x_q @ w_q
    keys = x_kv @ w_k
    values = x_kv @ w_v
    head_outputs = []
    head_weights = []
    for h in range(n_heads):
        cols = slice(h * d_k, (h + 1) * d_k)
        scores = queries[..., cols] @ keys[..., cols].transpose(1, 2) / d_k ** 0.5
        if mask is not None:
            full_shape = (x_q.shape[0], n_heads, x_q.shape[1], x_kv.shape[1])
            head_mask = torch.broadcast_to(mask, full_shape)[:, h]
            scores = scores.masked_fill(~head_mask, float("-inf"))
            no_key = ~head_mask.any(dim=-1, keepdim=True)
            scores = scores.masked_fill(no_key, 0.0)
            weights = torch.softmax(scores, dim=-1).masked_fill(no_key, 0.0)
        else:
            weights = torch.softmax(scores, dim=-1)
        head_outputs.append(weights @ values[..., cols])
        head_weights.append(weights)
    concat = torch.cat(head_outputs, dim=-1)
    return concat @ w_o, torch.stack(head_weights, dim=1)
''',
    r'''def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """Multi-head attention with weights applied as x @ w; returns (output, per-head weights)."""
    batch, len_q, width = x_q.shape
    len_k = x_kv.shape[1]
    head = width // n_heads

    def split(t, length):
        return t.reshape(batch, length, n_heads, head).permute(0, 2, 1, 3)

    q, k, v = split(x_q @ w_q, len_q), split(x_kv @ w_k, len_k), split(x_kv @ w_v, len_k)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(head)
    allowed = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand_as(scores)
    # a very negative score instead of -inf: a row with no allowed key stays finite, then is zeroed
    weights = torch.softmax(scores.masked_fill(~allowed, torch.finfo(scores.dtype).min), dim=-1) * allowed
    out = torch.einsum("bhqk,bhkd->bqhd", weights, v).reshape(batch, len_q, width)
    return out @ w_o, weights
''',
]

COHORT["mlm_mask"] = [
    r'''def mlm_mask(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """BERT's masking; returns (inputs, labels) shaped like tokens."""
    tokens = np.asarray(tokens)
    inputs = tokens.copy()
    labels = np.full(tokens.shape, -100, dtype=np.int64)
    special = np.isin(tokens, list(special_ids))
    chosen = (rng.random(tokens.shape) < p) & ~special
    labels[chosen] = tokens[chosen]
    u = rng.random(tokens.shape)
    to_mask = chosen & (u < 0.8)
    to_random = chosen & (u >= 0.8) & (u < 0.9)
    inputs[to_mask] = mask_id
    ordinary = np.setdiff1d(np.arange(vocab_size), list(special_ids) + [mask_id])
    inputs[to_random] = ordinary[rng.integers(0, len(ordinary), size=to_random.sum())]
    return inputs, labels
''',
    r'''def mlm_mask(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """BERT's masking; returns (inputs, labels) shaped like tokens."""
    specials = set(int(s) for s in special_ids)
    candidates = [i for i in range(vocab_size) if i not in specials and i != mask_id]
    flat_tokens = np.asarray(tokens).reshape(-1)
    inputs = flat_tokens.copy()
    labels = np.full(flat_tokens.shape, -100, dtype=np.int64)
    for i, token in enumerate(flat_tokens):
        if int(token) in specials:
            continue
        if rng.random() >= p:
            continue
        labels[i] = token
        r = rng.random()
        if r < 0.8:
            inputs[i] = mask_id
        elif r < 0.9:
            inputs[i] = candidates[rng.integers(0, len(candidates))]
    shape = np.shape(tokens)
    return inputs.reshape(shape), labels.reshape(shape)
''',
    r'''def mlm_mask(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """BERT's masking; returns (inputs, labels) shaped like tokens."""
    tokens = np.asarray(tokens)
    specials = np.array(sorted(special_ids), dtype=np.int64)
    u = rng.random(tokens.shape)
    chosen = ~np.isin(tokens, specials) & (u < p)
    # within the chosen ones, u / p is again uniform on [0, 1)
    share = u / p
    masked = chosen & (share < 0.8)
    randomised = chosen & (share >= 0.8) & (share < 0.9)
    allowed = np.ones(vocab_size, dtype=bool)
    allowed[specials] = False
    allowed[mask_id] = False
    pool = np.flatnonzero(allowed)
    inputs = np.where(masked, mask_id, tokens)
    inputs[randomised] = rng.choice(pool, size=int(randomised.sum()))
    labels = np.where(chosen, tokens, -100)
    return inputs, labels
''',
]

COHORT["mlm_loss"] = [
    r'''def mlm_loss(logits, labels):
    """Mean -log p(label) over the positions with label != -100 (0 if there are none)."""
    logp = torch.log_softmax(logits, dim=-1)
    keep = labels != -100
    if keep.sum() == 0:
        return logits.sum() * 0.0
    picked = logp[keep].gather(-1, labels[keep].unsqueeze(-1)).squeeze(-1)
    return -picked.mean()
''',
    r'''def mlm_loss(logits, labels):
    """Mean -log p(label) over the positions with label != -100 (0 if there are none)."""
    V = logits.shape[-1]
    flat_logits = logits.reshape(-1, V)
    flat_labels = labels.reshape(-1)
    counted = flat_labels != -100
    log_z = torch.logsumexp(flat_logits[counted], dim=-1)
    target_logits = flat_logits[counted, flat_labels[counted]]
    losses = log_z - target_logits
    total = losses.sum()
    return total / counted.sum().clamp(min=1)
''',
    r'''def mlm_loss(logits, labels):
    """Mean -log p(label) over the positions with label != -100 (0 if there are none)."""
    mask = labels.ne(-100)
    safe = labels.masked_fill(~mask, 0)
    logp = logits.log_softmax(-1).gather(-1, safe.unsqueeze(-1)).squeeze(-1)
    nll = torch.where(mask, -logp, torch.zeros_like(logp))
    count = mask.sum()
    return nll.sum() / count if count > 0 else nll.sum()
''',
]

COHORT["bert_parameter_count"] = [
    r'''def bert_parameter_count(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """Parameters of BERT with its pooler, without the pre-training heads."""
    H = d_model
    embeddings = (vocab_size + max_len + type_vocab_size) * H + 2 * H
    attention = 4 * (H * H + H)
    feed_forward = H * d_ff + d_ff + d_ff * H + H
    layer_norms = 2 * 2 * H
    pooler = H * H + H
    return int(embeddings + n_layers * (attention + feed_forward + layer_norms) + pooler)
''',
    r'''def bert_parameter_count(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """Parameters of BERT with its pooler, without the pre-training heads."""
    def linear(n_in, n_out):
        return n_in * n_out + n_out

    def layer_norm(width):
        return 2 * width

    total = 0
    for rows in (vocab_size, max_len, type_vocab_size):
        total += rows * d_model
    total += layer_norm(d_model)
    for _ in range(n_layers):
        for _ in range(4):
            total += linear(d_model, d_model)
        total += linear(d_model, d_ff)
        total += linear(d_ff, d_model)
        total += layer_norm(d_model) + layer_norm(d_model)
    total += linear(d_model, d_model)
    return total
''',
    r'''def bert_parameter_count(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2):
    """Parameters of BERT with its pooler, without the pre-training heads."""
    h, f = d_model, d_ff
    per_layer = 4 * h * h + 2 * h * f + 9 * h + f
    return int((vocab_size + max_len + type_vocab_size + 2) * h + n_layers * per_layer + h * h + h)
''',
]

COHORT["causal_lm_loss"] = [
    r'''def causal_lm_loss(logits, tokens, ignore_index=-100):
    """Position t predicts token t + 1: the mean of -log p over the counted targets."""
    shift_logits = logits[..., :-1, :]
    targets = tokens[..., 1:]
    keep = targets != ignore_index
    logp = torch.log_softmax(shift_logits, dim=-1)
    picked = logp[keep].gather(-1, targets[keep].unsqueeze(-1)).squeeze(-1)
    return -picked.mean()
''',
    r'''def causal_lm_loss(logits, tokens, ignore_index=-100):
    """Position t predicts token t + 1: the mean of -log p over the counted targets."""
    vocab = logits.size(-1)
    predictions = logits[..., :-1, :].reshape(-1, vocab)
    next_tokens = tokens[..., 1:].reshape(-1)
    counted = next_tokens != ignore_index
    log_norm = torch.logsumexp(predictions, dim=-1)
    safe_targets = torch.where(counted, next_tokens, torch.zeros_like(next_tokens))
    target_scores = predictions.gather(1, safe_targets[:, None])[:, 0]
    nll = (log_norm - target_scores)[counted]
    return nll.sum() / counted.sum()
''',
    r'''def causal_lm_loss(logits, tokens, ignore_index=-100):
    """Position t predicts token t + 1: the mean of -log p over the counted targets."""
    logp = logits[..., :-1, :].log_softmax(dim=-1)
    target = tokens[..., 1:]
    valid = target.ne(ignore_index)
    token_logp = logp.gather(-1, target.masked_fill(~valid, 0).unsqueeze(-1)).squeeze(-1)
    return -token_logp.masked_select(valid).mean()
''',
]

COHORT["top_k_filter"] = [
    r'''def top_k_filter(logits, k):
    """Keep the k largest logits of each row; the others become -inf."""
    if not k or k >= logits.size(-1):
        return logits.clone()
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))
''',
    r'''def top_k_filter(logits, k):
    """Keep the k largest logits of each row; the others become -inf."""
    vocab = logits.shape[-1]
    if k is None or k == 0 or k >= vocab:
        return logits.clone()
    _, indices = torch.topk(logits, k, dim=-1)
    keep = torch.zeros_like(logits, dtype=torch.bool)
    keep.scatter_(-1, indices, True)
    filtered = torch.full_like(logits, float("-inf"))
    filtered[keep] = logits[keep]
    return filtered
''',
    r'''def top_k_filter(logits, k):
    """Keep the k largest logits of each row; the others become -inf."""
    if k in (None, 0) or k >= logits.shape[-1]:
        return logits.clone()
    sorted_logits, _ = torch.sort(logits, dim=-1, descending=True)
    threshold = sorted_logits[..., k - 1].unsqueeze(-1)
    return torch.where(logits >= threshold, logits, torch.tensor(float("-inf"), dtype=logits.dtype))
''',
]

COHORT["top_p_filter"] = [
    r'''def top_p_filter(logits, p):
    """Keep the smallest set of most likely tokens with probability mass >= p; the others become -inf."""
    if p >= 1:
        return logits.clone()
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    keep_sorted = mass_before < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))
''',
    r'''def top_p_filter(logits, p):
    """Keep the smallest set of most likely tokens with probability mass >= p; the others become -inf."""
    out = logits.clone()
    if p >= 1:
        return out
    flat = out.reshape(-1, out.shape[-1])
    for row in flat:
        probs = torch.softmax(row, dim=0)
        order = torch.argsort(probs, descending=True)
        total = 0.0
        drop = []
        for idx in order.tolist():
            if total >= p:
                drop.append(idx)
            total += probs[idx].item()
        row[drop] = float("-inf")
    return out
''',
    r'''def top_p_filter(logits, p):
    """Keep the smallest set of most likely tokens with probability mass >= p; the others become -inf."""
    if p >= 1:
        return logits.clone()
    sorted_logits, idx = logits.sort(dim=-1, descending=True)
    cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove = torch.zeros_like(cum, dtype=torch.bool)
    remove[..., 1:] = cum[..., :-1] >= p  # the mass before a token already reaches p
    return logits.masked_fill(remove.scatter(-1, idx, remove), float("-inf"))
''',
]

COHORT["text_infilling"] = [
    r'''def text_infilling(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """BART's text infilling: Poisson-length spans, each replaced by a single mask_id."""
    tokens = np.asarray(tokens)
    n = len(tokens)
    target = int(round(mask_ratio * n))
    covered = np.zeros(n, dtype=bool)
    span_starts = set()
    inserts = []
    done = 0
    while done < target:
        length = min(int(rng.poisson(poisson_lambda)), target - done)
        if length == 0:
            inserts.append(int(rng.integers(0, n + 1)))
            continue
        # the longest stretch still free
        d = np.diff(np.concatenate([[1], covered.astype(np.int8), [1]]))
        runs = np.flatnonzero(d == 1) - np.flatnonzero(d == -1)
        length = min(length, int(runs.max()))
        while True:
            start = int(rng.integers(0, n - length + 1))
            if not covered[start:start + length].any():
                break
        covered[start:start + length] = True
        span_starts.add(start)
        done += length
    insert_counts = np.bincount(np.array(inserts, dtype=np.int64), minlength=n + 1)
    pieces = []
    for i in range(n + 1):
        pieces.extend([mask_id] * int(insert_counts[i]))
        if i == n:
            break
        if i in span_starts:
            pieces.append(mask_id)
        elif not covered[i]:
            pieces.append(tokens[i])
    return np.array(pieces, dtype=tokens.dtype)
''',
    r'''def text_infilling(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """BART's text infilling: Poisson-length spans, each replaced by a single mask_id."""
    n = len(tokens)
    goal = round(mask_ratio * n)
    taken = np.zeros(n, dtype=bool)
    is_start = np.zeros(n, dtype=bool)
    gaps = np.zeros(n + 1, dtype=int)
    removed = 0
    while removed < goal:
        span = min(rng.poisson(poisson_lambda), goal - removed)
        if span == 0:
            gaps[rng.integers(0, n + 1)] += 1
            continue
        while True:
            # a start s is free when taken[s:s + span] holds no True: a window sum of zero
            running = np.concatenate([[0], np.cumsum(taken)])
            window = running[span:] - running[:-span]
            free_starts = np.flatnonzero(window == 0)
            if len(free_starts) > 0:
                break
            span -= 1
        start = free_starts[rng.integers(0, len(free_starts))]
        taken[start:start + span] = True
        is_start[start] = True
        removed += span
    out = []
    for i in range(n):
        out.extend([mask_id] * gaps[i])
        if is_start[i]:
            out.append(mask_id)
        elif not taken[i]:
            out.append(tokens[i])
    out.extend([mask_id] * gaps[n])
    return np.array(out, dtype=np.asarray(tokens).dtype)
''',
    r'''def text_infilling(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """BART's text infilling: Poisson-length spans, each replaced by a single mask_id."""
    tokens = np.asarray(tokens)
    n = tokens.shape[0]
    left = int(round(mask_ratio * n))
    removed = np.zeros(n, dtype=bool)
    first = np.zeros(n, dtype=bool)
    gaps = []
    while left > 0:
        length = min(int(rng.poisson(poisson_lambda)), left)
        if length == 0:
            gaps.append(int(rng.integers(0, n + 1)))
            continue
        attempts = 0
        while True:
            start = int(rng.integers(0, n - length + 1))
            if not removed[start:start + length].any():
                break
            attempts += 1
            if attempts >= 100 and length > 1:  # crowded: try a shorter span
                length -= 1
                attempts = 0
        removed[start:start + length] = True
        first[start] = True
        left -= length
    kept = ~removed | first
    values = np.where(first, mask_id, tokens)[kept].astype(tokens.dtype)
    positions = np.flatnonzero(kept)
    return np.insert(values, np.searchsorted(positions, np.array(gaps, dtype=np.int64)), mask_id)
''',
]

COHORT["prefix_lm_mask"] = [
    r'''def prefix_lm_mask(n, prefix_len):
    """UniLM: bidirectional within the prefix, causal after it."""
    i = np.arange(n)
    return (i[None, :] < prefix_len) | (i[None, :] <= i[:, None])
''',
    r'''def prefix_lm_mask(n, prefix_len):
    """UniLM: bidirectional within the prefix, causal after it."""
    mask = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(n):
            if j < prefix_len or j <= i:
                mask[i, j] = True
    return mask
''',
    r'''def prefix_lm_mask(n, prefix_len):
    """UniLM: bidirectional within the prefix, causal after it."""
    mask = np.tril(np.ones((n, n), dtype=bool))
    mask[:, :prefix_len] = True
    return mask
''',
]

COHORT["permutation_mask"] = [
    r'''def permutation_mask(order):
    """XLNet: position i sees position j when j is predicted before i."""
    order = np.asarray(order)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[None, :] < rank[:, None]
''',
    r'''def permutation_mask(order):
    """XLNet: position i sees position j when j is predicted before i."""
    n = len(order)
    step_of = {}
    for step, position in enumerate(order):
        step_of[int(position)] = step
    mask = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(n):
            mask[i, j] = step_of[j] < step_of[i]
    return mask
''',
    r'''def permutation_mask(order):
    """XLNet: position i sees position j when j is predicted before i."""
    rank = np.argsort(order)
    return np.greater.outer(rank, rank)
''',
]

COHORT["wordpiece"] = [
    r'''def wordpiece(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """Split one word into WordPiece tokens by greedy longest-match-first.

    >>> wordpiece("unaffable", {"un", "##aff", "##able"})
    ['un', '##aff', '##able']
    >>> wordpiece("unaffablex", {"un", "##aff", "##able"}, unk="<unk>")
    ['<unk>']

    A word longer than max_chars characters (after lower-casing), or one with a position where
    no piece fits, gives [unk]: a one-item list holding the unk argument as passed.
    """
    if lowercase:
        word = word.lower()
    if len(word) > max_chars:
        return [unk]
    tokens = []
    start = 0
    while start < len(word):
        end = len(word)
        piece = None
        while end > start:
            candidate = word[start:end]
            if start > 0:
                candidate = "##" + candidate
            if candidate in vocab:
                piece = candidate
                break
            end -= 1
        if piece is None:
            return [unk]
        tokens.append(piece)
        start = end
    return tokens
''',
    r'''def wordpiece(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """Split one word into WordPiece tokens by greedy longest-match-first.

    >>> wordpiece("unaffable", {"un", "##aff", "##able"})
    ['un', '##aff', '##able']
    >>> wordpiece("unaffablex", {"un", "##aff", "##able"}, unk="<unk>")
    ['<unk>']

    A word longer than max_chars characters (after lower-casing), or one with a position where
    no piece fits, gives [unk]: a one-item list holding the unk argument as passed.
    """
    text = word.lower() if lowercase else word
    if len(text) > max_chars:
        return [unk]
    pieces = []
    i = 0
    while i < len(text):
        prefix = "##" if i > 0 else ""
        for j in range(len(text), i, -1):
            if prefix + text[i:j] in vocab:
                pieces.append(prefix + text[i:j])
                i = j
                break
        else:
            return [unk]
    return pieces
''',
    r'''def wordpiece(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """Split one word into WordPiece tokens by greedy longest-match-first.

    >>> wordpiece("unaffable", {"un", "##aff", "##able"})
    ['un', '##aff', '##able']
    >>> wordpiece("unaffablex", {"un", "##aff", "##able"}, unk="<unk>")
    ['<unk>']

    A word longer than max_chars characters (after lower-casing), or one with a position where
    no piece fits, gives [unk]: a one-item list holding the unk argument as passed.
    """
    if lowercase:
        word = word.lower()
    if len(word) > max_chars:
        return [unk]

    def split(rest, first):
        if not rest:
            return []
        marker = "" if first else "##"
        for size in range(len(rest), 0, -1):
            piece = marker + rest[:size]
            if piece in vocab:
                tail = split(rest[size:], False)
                return None if tail is None else [piece] + tail
        return None

    result = split(word, True)
    return [unk] if result is None else result
''',
]

COHORT["mean_pool"] = [
    r'''def mean_pool(hidden, mask):
    """(B, T, d) token vectors, (B, T) mask -> (B, d) mean over the real tokens.

    A nonzero mask value marks a real token and 0 padding; the values are not weights.
    """
    real = (mask != 0).unsqueeze(-1)
    summed = torch.where(real, hidden, torch.zeros_like(hidden)).sum(dim=1)
    count = real.sum(dim=1).clamp(min=1).to(hidden.dtype)
    return summed / count
''',
    r'''def mean_pool(hidden, mask):
    """(B, T, d) token vectors, (B, T) mask -> (B, d) mean over the real tokens.

    A nonzero mask value marks a real token and 0 padding; the values are not weights.
    """
    rows = []
    for b in range(hidden.shape[0]):
        real = mask[b] != 0
        vectors = hidden[b][real]
        if vectors.shape[0] == 0:
            rows.append(torch.zeros(hidden.shape[-1], dtype=hidden.dtype, device=hidden.device))
        else:
            rows.append(vectors.mean(dim=0))
    return torch.stack(rows)
''',
    r'''def mean_pool(hidden, mask):
    """(B, T, d) token vectors, (B, T) mask -> (B, d) mean over the real tokens.

    A nonzero mask value marks a real token and 0 padding; the values are not weights.
    """
    keep = mask.ne(0)
    clean = hidden.masked_fill(~keep[..., None], 0.0)
    n_real = keep.sum(dim=1, keepdim=True)
    return clean.sum(dim=1) / torch.maximum(n_real, torch.ones_like(n_real)).to(hidden.dtype)
''',
]

COHORT["anisotropy"] = [
    r'''def anisotropy(X):
    """Mean cosine similarity over the pairs of different rows of X (n, d) -> float."""
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    unit = np.divide(X, norms, out=np.zeros_like(X), where=norms > 0)
    cos = unit @ unit.T
    n = X.shape[0]
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))
''',
    r'''def anisotropy(X):
    """Mean cosine similarity over the pairs of different rows of X (n, d) -> float."""
    n = len(X)
    total = 0.0
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            a, b = X[i], X[j]
            na, nb = np.sqrt(np.dot(a, a)), np.sqrt(np.dot(b, b))
            if na == 0 or nb == 0:
                continue
            total += np.dot(a / na, b / nb)
    return float(total / (n * (n - 1)))
''',
    r'''def anisotropy(X):
    """Mean cosine similarity over the pairs of different rows of X (n, d) -> float."""
    n = X.shape[0]
    lengths = np.sqrt((X * X).sum(axis=1))
    safe = np.where(lengths == 0, 1.0, lengths)
    U = X / safe[:, None]
    sims = U @ U.T
    np.fill_diagonal(sims, 0.0)
    return float(sims.sum() / (n * (n - 1)))
''',
]

COHORT["whitening"] = [
    r'''def whitening(X, k=None):
    """BERT-whitening: mu (d,) and W (d, k) such that (X - mu) @ W has identity covariance."""
    X = np.asarray(X, dtype=np.float64)
    mu = X.mean(axis=0)
    C = np.atleast_2d(np.cov(X.T))
    U, s, _ = np.linalg.svd(C)
    if k is None:
        k = X.shape[1]
    W = U[:, :k] / np.sqrt(s[:k])
    return mu, W
''',
    r'''def whitening(X, k=None):
    """BERT-whitening: mu (d,) and W (d, k) such that (X - mu) @ W has identity covariance."""
    data = np.array(X, dtype=np.float64)
    n, d = data.shape
    mu = data.mean(axis=0)
    centred = data - mu
    cov = centred.T @ centred / (n - 1)
    eigenvalues, eigenvectors = np.linalg.eigh(cov)
    order = np.argsort(eigenvalues)[::-1]
    eigenvalues = eigenvalues[order]
    eigenvectors = eigenvectors[:, order]
    keep = d if k is None else k
    W = eigenvectors[:, :keep] / np.sqrt(eigenvalues[:keep])
    return mu, W
''',
    r'''def whitening(X, k=None):
    """BERT-whitening: mu (d,) and W (d, k) such that (X - mu) @ W has identity covariance."""
    X = np.asarray(X, dtype=float)
    mu = np.mean(X, axis=0)
    _, sing, Vt = np.linalg.svd(X - mu, full_matrices=False)
    variances = sing ** 2 / (len(X) - 1)
    k = len(variances) if k is None else k
    return mu, Vt[:k].T * (1.0 / np.sqrt(variances[:k]))
''',
]

COHORT["info_nce_loss"] = [
    r'''def info_nce_loss(z1, z2, temperature=0.05, hard_negatives=None):
    """Mean cross-entropy of cos(z1, [z2; hard_negatives]) / temperature with target i for row i."""
    candidates = z2 if hard_negatives is None else torch.cat([z2, hard_negatives], dim=0)
    a = F.normalize(z1, dim=-1)
    b = F.normalize(candidates, dim=-1)
    logits = a @ b.T / temperature
    labels = torch.arange(z1.shape[0], device=z1.device)
    return F.cross_entropy(logits, labels)
''',
    r'''def info_nce_loss(z1, z2, temperature=0.05, hard_negatives=None):
    """Mean cross-entropy of cos(z1, [z2; hard_negatives]) / temperature with target i for row i."""
    if hard_negatives is not None:
        candidates = torch.cat((z2, hard_negatives))
    else:
        candidates = z2
    norms_1 = z1.norm(dim=1, keepdim=True).clamp(min=1e-8)
    norms_c = candidates.norm(dim=1, keepdim=True).clamp(min=1e-8)
    cosines = (z1 / norms_1) @ (candidates / norms_c).t()
    logits = cosines / temperature
    log_probs = torch.log_softmax(logits, dim=1)
    positives = log_probs[torch.arange(len(z1)), torch.arange(len(z1))]
    return -positives.mean()
''',
    r'''def info_nce_loss(z1, z2, temperature=0.05, hard_negatives=None):
    """Mean cross-entropy of cos(z1, [z2; hard_negatives]) / temperature with target i for row i."""
    pool = z2 if hard_negatives is None else torch.vstack([z2, hard_negatives])
    sims = F.cosine_similarity(z1.unsqueeze(1), pool.unsqueeze(0), dim=-1)
    return F.cross_entropy(sims / temperature, torch.arange(len(z1), device=z1.device))
''',
]

COHORT["count_trainable_parameters"] = [
    r'''def count_trainable_parameters(model):
    """(trainable, total): numbers of parameter entries, each shared tensor counted once."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return trainable, total
''',
    r'''def count_trainable_parameters(model):
    """(trainable, total): numbers of parameter entries, each shared tensor counted once."""
    trainable = 0
    total = 0
    for param in model.parameters():
        n = param.numel()
        total += n
        if param.requires_grad:
            trainable += n
    return int(trainable), int(total)
''',
    r'''def count_trainable_parameters(model):
    """(trainable, total): numbers of parameter entries, each shared tensor counted once."""
    seen = {}
    for module in model.modules():
        for p in module.parameters(recurse=False):
            seen[id(p)] = p
    sizes = [(p.numel(), p.requires_grad) for p in seen.values()]
    return sum(n for n, g in sizes if g), sum(n for n, _ in sizes)
''',
]

COHORT["lora_linear"] = [
    r'''class LoRALinear(torch.nn.Module):
    """A frozen nn.Linear plus a trainable low-rank update: base(x) + (alpha / r) x Aᵀ Bᵀ.

    r must be at least 1 (ValueError otherwise).
    """

    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        if r < 1:
            raise ValueError("r must be at least 1")
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.r = r
        self.alpha = alpha
        self.scaling = alpha / r
        w = base.weight
        self.A = torch.nn.Parameter(
            torch.randn(r, base.in_features, dtype=w.dtype, device=w.device) / math.sqrt(base.in_features))
        self.B = torch.nn.Parameter(torch.zeros(base.out_features, r, dtype=w.dtype, device=w.device))
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, x):
        """x (..., in) -> (..., out)."""
        return self.base(x) + self.scaling * (self.dropout(x) @ self.A.T @ self.B.T)

    def merge(self):
        """A new nn.Linear with weight W + (alpha / r) B A and the base's bias; its parameters train."""
        merged = torch.nn.Linear(self.base.in_features, self.base.out_features, bias=self.base.bias is not None,
                                 dtype=self.base.weight.dtype, device=self.base.weight.device)
        with torch.no_grad():
            merged.weight.copy_(self.base.weight + self.scaling * self.B @ self.A)
            if self.base.bias is not None:
                merged.bias.copy_(self.base.bias)
        return merged
''',
    r'''class LoRALinear(torch.nn.Module):
    """A frozen nn.Linear plus a trainable low-rank update: base(x) + (alpha / r) x Aᵀ Bᵀ.

    r must be at least 1 (ValueError otherwise).
    """

    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        if not r >= 1:
            raise ValueError(f"rank r must be >= 1, got {r}")
        base.weight.requires_grad = False
        if base.bias is not None:
            base.bias.requires_grad = False
        self.base = base
        in_features, out_features = base.in_features, base.out_features
        factory = {"dtype": base.weight.dtype, "device": base.weight.device}
        self.A = torch.nn.Parameter(torch.empty(r, in_features, **factory))
        torch.nn.init.normal_(self.A, std=1 / in_features ** 0.5)
        self.B = torch.nn.Parameter(torch.zeros(out_features, r, **factory))
        self.scale = alpha / r
        self.drop = torch.nn.Dropout(p=dropout)

    def forward(self, x):
        """x (..., in) -> (..., out)."""
        frozen = self.base(x)
        low_rank = self.drop(x) @ self.A.T
        update = low_rank @ self.B.T
        return frozen + self.scale * update

    def merge(self):
        """A new nn.Linear with weight W + (alpha / r) B A and the base's bias; its parameters train."""
        weight = self.base.weight.detach() + self.scale * (self.B.detach() @ self.A.detach())
        has_bias = self.base.bias is not None
        layer = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=has_bias)
        layer = layer.to(dtype=weight.dtype, device=weight.device)
        layer.weight = torch.nn.Parameter(weight.clone())
        if has_bias:
            layer.bias = torch.nn.Parameter(self.base.bias.detach().clone())
        return layer
''',
    r'''class LoRALinear(torch.nn.Module):
    """A frozen nn.Linear plus a trainable low-rank update: base(x) + (alpha / r) x Aᵀ Bᵀ.

    r must be at least 1 (ValueError otherwise).
    """

    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        if r < 1:
            raise ValueError("LoRA needs a rank of at least 1")
        self.base = base.requires_grad_(False)
        weight = base.weight
        n_out, n_in = weight.shape
        self.A = torch.nn.Parameter(torch.randn(r, n_in, dtype=weight.dtype, device=weight.device) * n_in ** -0.5)
        self.B = torch.nn.Parameter(weight.new_zeros(n_out, r))
        self.alpha, self.r = alpha, r
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, x):
        """x (..., in) -> (..., out)."""
        update = torch.nn.functional.linear(torch.nn.functional.linear(self.dropout(x), self.A), self.B)
        return self.base(x) + update * (self.alpha / self.r)

    def merge(self):
        """A new nn.Linear with weight W + (alpha / r) B A and the base's bias; its parameters train."""
        out_features, in_features = self.base.weight.shape
        merged = torch.nn.Linear(in_features, out_features, bias=self.base.bias is not None).to(self.base.weight)
        with torch.no_grad():
            merged.weight.copy_(torch.addmm(self.base.weight, self.B, self.A, alpha=self.alpha / self.r))
            if merged.bias is not None:
                merged.bias.copy_(self.base.bias)
        return merged
''',
]

COHORT["attention_with_prefix"] = [
    r'''def attention_with_prefix(q, k, v, prefix_k, prefix_v, mask=None):
    """Attention in which every query also sees the P prefix keys and values, in front of its own."""
    B, H, L_q, _ = q.shape
    L_k = k.shape[2]
    P = prefix_k.shape[1]
    pk = np.broadcast_to(prefix_k, (B,) + prefix_k.shape)
    pv = np.broadcast_to(prefix_v, (B,) + prefix_v.shape)
    keys = np.concatenate([pk, k], axis=2)
    values = np.concatenate([pv, v], axis=2)
    if mask is not None:
        mask = np.broadcast_to(mask, (B, H, L_q, L_k))
        mask = np.concatenate([np.ones((B, H, L_q, P), dtype=bool), mask], axis=-1)
    return ref.scaled_dot_product_attention(q, keys, values, mask)
''',
    r'''def attention_with_prefix(q, k, v, prefix_k, prefix_v, mask=None):
    """Attention in which every query also sees the P prefix keys and values, in front of its own."""
    batch = q.shape[0]
    prefix_len = prefix_k.shape[1]
    # the same prefix for every sentence of the batch
    batch_prefix_k = np.repeat(prefix_k[np.newaxis], batch, axis=0)
    batch_prefix_v = np.repeat(prefix_v[np.newaxis], batch, axis=0)
    all_keys = np.concatenate((batch_prefix_k, k), axis=2)
    all_values = np.concatenate((batch_prefix_v, v), axis=2)
    full_mask = None
    if mask is not None:
        sentence_mask = np.broadcast_to(mask, q.shape[:3] + (k.shape[2],))
        prefix_mask = np.ones(q.shape[:3] + (prefix_len,), dtype=bool)
        full_mask = np.concatenate((prefix_mask, sentence_mask), axis=-1)
    output, weights = ref.scaled_dot_product_attention(q, all_keys, all_values, full_mask)
    return output, weights
''',
    r'''def attention_with_prefix(q, k, v, prefix_k, prefix_v, mask=None):
    """Attention in which every query also sees the P prefix keys and values, in front of its own."""
    d_k = q.shape[-1]
    prefix_scores = np.einsum("bhqd,hpd->bhqp", q, prefix_k)
    own_scores = np.einsum("bhqd,bhkd->bhqk", q, k)
    if mask is not None:
        own_scores = np.where(mask, own_scores, -np.inf)
    scores = np.concatenate([prefix_scores, own_scores], axis=-1) / np.sqrt(d_k)
    scores = scores - scores.max(axis=-1, keepdims=True)  # the prefix columns are finite: every row has a max
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    P = prefix_k.shape[1]
    output = np.einsum("bhqp,hpd->bhqd", weights[..., :P], prefix_v) + weights[..., P:] @ v
    return output, weights
''',
]

COHORT["verbalizer_log_probs"] = [
    r'''def verbalizer_log_probs(logits, mask_positions, label_word_ids):
    """(B, T, V) MLM logits, (B,) mask positions, C lists of label-word ids -> (B, C) class log-probabilities."""
    at_mask = logits[torch.arange(logits.shape[0], device=logits.device), mask_positions]  # (B, V)
    scores = torch.stack([at_mask[:, ids].mean(dim=-1) for ids in label_word_ids], dim=-1)
    return torch.log_softmax(scores, dim=-1)
''',
    r'''def verbalizer_log_probs(logits, mask_positions, label_word_ids):
    """(B, T, V) MLM logits, (B,) mask positions, C lists of label-word ids -> (B, C) class log-probabilities."""
    batch = logits.size(0)
    rows = []
    for b in range(batch):
        vector = logits[b, mask_positions[b]]
        class_scores = []
        for words in label_word_ids:
            total = 0
            for w in words:
                total = total + vector[w]
            class_scores.append(total / len(words))
        rows.append(torch.stack(class_scores))
    scores = torch.stack(rows)
    return scores - torch.logsumexp(scores, dim=1, keepdim=True)
''',
    r'''def verbalizer_log_probs(logits, mask_positions, label_word_ids):
    """(B, T, V) MLM logits, (B,) mask positions, C lists of label-word ids -> (B, C) class log-probabilities."""
    index = mask_positions.view(-1, 1, 1).expand(-1, 1, logits.size(-1))
    at_mask = logits.gather(1, index).squeeze(1)
    average = torch.zeros(len(label_word_ids), logits.size(-1), dtype=logits.dtype, device=logits.device)
    for c, ids in enumerate(label_word_ids):
        for i in ids:
            average[c, i] += 1.0 / len(ids)
    return torch.log_softmax(at_mask @ average.T, dim=-1)
''',
]

COHORT["pet_soft_labels"] = [
    r'''def pet_soft_labels(pattern_log_probs, weights=None, temperature=2.0):
    """(P, N, C) class log-probabilities of P patterns -> (N, C) soft labels.

    weights: None (equal), or P numbers (tensor, list or tuple), none negative, with a positive sum
    (ValueError otherwise).
    """
    P = pattern_log_probs.shape[0]
    if weights is None:
        w = torch.full((P,), 1.0 / P, dtype=pattern_log_probs.dtype, device=pattern_log_probs.device)
    else:
        w = torch.as_tensor(weights, dtype=pattern_log_probs.dtype, device=pattern_log_probs.device)
        if (w < 0).any() or w.sum() <= 0:
            raise ValueError("weights must be non-negative with a positive sum")
        w = w / w.sum()
    mixed = (w[:, None, None] * pattern_log_probs).sum(dim=0)
    return torch.softmax(mixed / temperature, dim=-1)
''',
    r'''def pet_soft_labels(pattern_log_probs, weights=None, temperature=2.0):
    """(P, N, C) class log-probabilities of P patterns -> (N, C) soft labels.

    weights: None (equal), or P numbers (tensor, list or tuple), none negative, with a positive sum
    (ValueError otherwise).
    """
    n_patterns = pattern_log_probs.shape[0]
    if weights is None:
        weights = [1.0] * n_patterns
    weights = torch.as_tensor(weights, dtype=pattern_log_probs.dtype, device=pattern_log_probs.device)
    if torch.any(weights < 0):
        raise ValueError("a negative weight")
    total = weights.sum()
    if total <= 0:
        raise ValueError("the weights sum to zero")
    combined = torch.zeros_like(pattern_log_probs[0])
    for p in range(n_patterns):
        if weights[p] > 0:
            combined = combined + (weights[p] / total) * pattern_log_probs[p]
    return torch.softmax(combined / temperature, dim=-1)
''',
    r'''def pet_soft_labels(pattern_log_probs, weights=None, temperature=2.0):
    """(P, N, C) class log-probabilities of P patterns -> (N, C) soft labels.

    weights: None (equal), or P numbers (tensor, list or tuple), none negative, with a positive sum
    (ValueError otherwise).
    """
    lp = pattern_log_probs
    w = torch.ones(lp.shape[0]) if weights is None else torch.as_tensor(weights)
    w = w.to(dtype=lp.dtype, device=lp.device)
    if w.min() < 0 or w.sum() == 0:
        raise ValueError("weights: non-negative, positive sum")
    avg = torch.tensordot(w / w.sum(), lp, dims=1)
    return (avg / temperature).softmax(dim=-1)
''',
]

COHORT["select_pseudo_labels"] = [
    r'''def select_pseudo_labels(probs, per_class):
    """(N, C) probabilities -> indices of the per_class most confident examples predicted as each class.

    Ties at the cut: any of the tied examples will do (here the lower index, by a stable sort).
    """
    confidence, predicted = probs.max(dim=1)
    chosen = []
    for c in range(probs.shape[1]):
        idx = torch.nonzero(predicted == c).flatten()
        if len(idx) == 0:
            continue
        top = torch.topk(confidence[idx], min(per_class, len(idx))).indices
        chosen.append(idx[top])
    if not chosen:
        return torch.zeros(0, dtype=torch.long, device=probs.device)
    return torch.cat(chosen)
''',
    r'''def select_pseudo_labels(probs, per_class):
    """(N, C) probabilities -> indices of the per_class most confident examples predicted as each class.

    Ties at the cut: any of the tied examples will do (here the lower index, by a stable sort).
    """
    predicted = probs.argmax(dim=1)
    confidence = probs.gather(1, predicted[:, None]).squeeze(1)
    order = torch.argsort(confidence, descending=True, stable=True)
    taken = {}
    selected = []
    for i in order.tolist():
        c = int(predicted[i])
        if taken.get(c, 0) < per_class:
            selected.append(i)
            taken[c] = taken.get(c, 0) + 1
    return torch.tensor(selected, dtype=torch.long, device=probs.device)
''',
    r'''def select_pseudo_labels(probs, per_class):
    """(N, C) probabilities -> indices of the per_class most confident examples predicted as each class.

    Ties at the cut: any of the tied examples will do (here the lower index, by a stable sort).
    """
    conf, cls = probs.max(dim=-1)
    # sort by confidence, then (stably) by class: each class's examples, most confident first
    by_conf = torch.sort(conf, descending=True, stable=True).indices
    by_class = by_conf[torch.sort(cls[by_conf], stable=True).indices]
    sorted_cls = cls[by_class]
    first = torch.searchsorted(sorted_cls, sorted_cls)  # where each class's run begins
    rank = torch.arange(len(by_class), device=probs.device) - first
    return by_class[rank < per_class]
''',
]

COHORT["k_shot_prompt"] = [
    r'''def k_shot_prompt(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """k demonstrations drawn by rng (never the query), then the query's x, in the template's format.

    ValueError for k outside 0..len(demonstrations) - 1, or a template without {x} before {y}.
    """
    n = len(demonstrations)
    if not 0 <= k <= n - 1:
        raise ValueError(f"k must be between 0 and {n - 1}")
    x_at, y_at = template.find("{x}"), template.find("{y}")
    if x_at < 0 or y_at < 0 or y_at < x_at:
        raise ValueError("the template needs {x} before {y}")
    if rng is None:
        rng = np.random.default_rng()
    others = np.delete(np.arange(n), query)
    picked = rng.choice(others, size=k, replace=False)
    parts = [template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in picked]
    query_x = demonstrations[query][0]
    parts.append(template[:y_at].format(x=query_x))
    return separator.join(parts)
''',
    r'''def k_shot_prompt(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """k demonstrations drawn by rng (never the query), then the query's x, in the template's format.

    ValueError for k outside 0..len(demonstrations) - 1, or a template without {x} before {y}.
    """
    if "{x}" not in template or "{y}" not in template or template.index("{x}") > template.index("{y}"):
        raise ValueError("template must contain {x} and then {y}")
    if k < 0 or k > len(demonstrations) - 1:
        raise ValueError("k out of range")
    if rng is None:
        rng = np.random.default_rng()
    others = [i for i in range(len(demonstrations)) if i != query]
    chosen = rng.choice(others, size=k, replace=False)
    lines = []
    for i in chosen:
        x, y = demonstrations[i]
        lines.append(template.replace("{x}", x).replace("{y}", y))
    head = template[:template.index("{y}")]
    lines.append(head.replace("{x}", demonstrations[query][0]))
    return separator.join(lines)
''',
    r'''def k_shot_prompt(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """k demonstrations drawn by rng (never the query), then the query's x, in the template's format.

    ValueError for k outside 0..len(demonstrations) - 1, or a template without {x} before {y}.
    """
    before_y, found, _ = template.partition("{y}")
    if not found or "{x}" not in before_y:
        raise ValueError("the template must hold {x} and, after it, {y}")
    n = len(demonstrations)
    if k not in range(n):
        raise ValueError("k must be in 0..len(demonstrations) - 1")
    rng = np.random.default_rng() if rng is None else rng
    picks = rng.choice(np.delete(np.arange(n), query), size=k, replace=False)
    shots = [template.format(x=demonstrations[j][0], y=demonstrations[j][1]) for j in picks]
    return separator.join(shots + [before_y.format(x=demonstrations[query][0])])
''',
]

COHORT["induction_score"] = [
    r'''def induction_score(attention, tokens):
    """(H,) mean attention from each repeated token to the position after its latest earlier copy."""
    H, T, _ = attention.shape
    last_seen = {}
    total = np.zeros(H)
    count = 0
    for t in range(T):
        token = tokens[t]
        if token in last_seen:
            s = last_seen[token]
            total += attention[:, t, s + 1]
            count += 1
        last_seen[token] = t
    if count == 0:
        return np.zeros(H)
    return total / count
''',
    r'''def induction_score(attention, tokens):
    """(H,) mean attention from each repeated token to the position after its latest earlier copy."""
    n_heads, length = attention.shape[0], attention.shape[1]
    values = []
    for t in range(length):
        latest = None
        for s in range(t - 1, -1, -1):
            if tokens[s] == tokens[t]:
                latest = s
                break
        if latest is not None:
            values.append(attention[:, t, latest + 1])
    if not values:
        return np.zeros(n_heads)
    return np.mean(values, axis=0)
''',
    r'''def induction_score(attention, tokens):
    """(H,) mean attention from each repeated token to the position after its latest earlier copy."""
    tokens = np.asarray(tokens)
    T = len(tokens)
    same = (tokens[:, None] == tokens[None, :]) & np.tri(T, k=-1, dtype=bool)  # same[t, s]: s < t, same token
    has_earlier = same.any(axis=1)
    latest = T - 1 - np.argmax(same[:, ::-1], axis=1)
    t_idx = np.flatnonzero(has_earlier)
    if t_idx.size == 0:
        return np.zeros(attention.shape[0])
    return attention[:, t_idx, latest[t_idx] + 1].mean(axis=1)
''',
]

COHORT["distillation_loss"] = [
    r'''import torch.nn.functional as F


def distillation_loss(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """alpha * T^2 * KL(teacher || student) at temperature T + (1 - alpha) * cross-entropy with the labels."""
    T = temperature
    log_p_teacher = F.log_softmax(teacher_logits.detach() / T, dim=-1)
    log_p_student = F.log_softmax(student_logits / T, dim=-1)
    kl = F.kl_div(log_p_student, log_p_teacher, reduction="batchmean", log_target=True)
    ce = F.cross_entropy(student_logits, labels)
    return alpha * T ** 2 * kl + (1 - alpha) * ce
''',
    r'''import torch.nn.functional as F


def distillation_loss(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """alpha * T^2 * KL(teacher || student) at temperature T + (1 - alpha) * cross-entropy with the labels."""
    teacher = teacher_logits.detach()
    log_q = torch.log_softmax(student_logits / temperature, dim=1)
    log_p = torch.log_softmax(teacher / temperature, dim=1)
    p = log_p.exp()
    kl_per_example = (p * (log_p - log_q)).sum(dim=1)
    soft = kl_per_example.mean()
    log_probs = torch.log_softmax(student_logits, dim=1)
    hard = -log_probs[torch.arange(len(labels)), labels].mean()
    return alpha * temperature ** 2 * soft + (1 - alpha) * hard
''',
    r'''import torch.nn.functional as F


def distillation_loss(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """alpha * T^2 * KL(teacher || student) at temperature T + (1 - alpha) * cross-entropy with the labels."""
    t = temperature
    s_soft = F.log_softmax(student_logits / t, dim=-1)
    t_soft = F.log_softmax(teacher_logits / t, dim=-1).detach()
    soft_loss = torch.sum(t_soft.exp() * (t_soft - s_soft)) / student_logits.shape[0]
    hard_loss = F.nll_loss(F.log_softmax(student_logits, dim=-1), labels)
    return alpha * t * t * soft_loss + (1 - alpha) * hard_loss
''',
]

COHORT["quantize_int8"] = [
    r'''def quantize_int8(w, dim=None):
    """Symmetric absmax int8: (q, scale) with q = clamp(round(w / scale), -127, 127).

    dim counts from the end when negative; a 1-D w with a dim gets one scale per entry.
    """
    if dim is None:
        scale = w.abs().max() / 127
    elif w.dim() == 1:
        scale = w.abs() / 127
    else:
        d = dim % w.dim()
        others = [i for i in range(w.dim()) if i != d]
        scale = w.abs().amax(dim=others, keepdim=True) / 127
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    q = torch.clamp(torch.round(w / safe), -127, 127).to(torch.int8)
    return q, scale
''',
    r'''def quantize_int8(w, dim=None):
    """Symmetric absmax int8: (q, scale) with q = clamp(round(w / scale), -127, 127).

    dim counts from the end when negative; a 1-D w with a dim gets one scale per entry.
    """
    if dim is None:
        scale = w.abs().max() / 127.0
    else:
        axis = dim % w.dim()
        shape = [1] * w.dim()
        shape[axis] = w.shape[axis]
        scale = torch.zeros(shape, dtype=w.dtype, device=w.device)
        for i in range(w.shape[axis]):
            slice_max = w.select(axis, i).abs().max()
            scale.view(-1)[i] = slice_max / 127.0
        if w.dim() == 1:
            scale = scale.reshape(-1)
    divisor = scale.clone()
    divisor[divisor == 0] = 1.0
    q = (w / divisor).round().clamp(-127, 127).to(torch.int8)
    return q, scale
''',
    r'''def quantize_int8(w, dim=None):
    """Symmetric absmax int8: (q, scale) with q = clamp(round(w / scale), -127, 127).

    dim counts from the end when negative; a 1-D w with a dim gets one scale per entry.
    """
    absw = w.abs()
    if dim is None:
        scale = absw.max() / 127
    else:
        dim = dim % w.ndim
        per_slice = absw.movedim(dim, 0).reshape(w.shape[dim], -1).max(dim=1).values / 127
        shape = [1] * w.ndim
        shape[dim] = -1
        scale = per_slice.reshape(shape)
    q = torch.round(w / scale.masked_fill(scale == 0, 1)).clamp(-127, 127).to(torch.int8)
    return q, scale
''',
]

COHORT["dequantize"] = [
    r'''def dequantize(q, scale):
    """int8 values back to floating point."""
    return q.to(scale.dtype) * scale
''',
    r'''def dequantize(q, scale):
    """int8 values back to floating point."""
    as_float = q.type(scale.dtype)
    result = as_float * scale
    return result
''',
    r'''def dequantize(q, scale):
    """int8 values back to floating point."""
    return torch.mul(q.to(scale), scale)
''',
]

COHORT["alignment_precision_at_1"] = [
    r'''def alignment_precision_at_1(src_emb, tgt_emb, train_pairs, test_pairs):
    """Precision@1 of the test translations after the orthogonal map fitted on the train pairs."""
    def unit(M):
        norms = np.linalg.norm(M, axis=1, keepdims=True)
        return M / np.where(norms == 0, 1, norms)

    S, T = unit(np.asarray(src_emb, dtype=float)), unit(np.asarray(tgt_emb, dtype=float))
    train = np.asarray(train_pairs).reshape(-1, 2)
    test = np.asarray(test_pairs).reshape(-1, 2)
    X, Y = S[train[:, 0]], T[train[:, 1]]
    U, _, Vt = np.linalg.svd(X.T @ Y)
    W = U @ Vt
    translations = {}
    for s, t in test:
        translations.setdefault(int(s), set()).add(int(t))
    sources = sorted(translations)
    mapped = unit(S[sources] @ W)
    nearest = np.argmax(mapped @ T.T, axis=1)
    hits = sum(int(n) in translations[s] for s, n in zip(sources, nearest))
    return hits / len(sources)
''',
    r'''def alignment_precision_at_1(src_emb, tgt_emb, train_pairs, test_pairs):
    """Precision@1 of the test translations after the orthogonal map fitted on the train pairs."""
    src = np.array(src_emb, dtype=np.float64)
    tgt = np.array(tgt_emb, dtype=np.float64)
    for table in (src, tgt):
        lengths = np.sqrt((table ** 2).sum(axis=1))
        lengths[lengths == 0] = 1.0
        table /= lengths[:, None]
    X = np.array([src[s] for s, _ in train_pairs])
    Y = np.array([tgt[t] for _, t in train_pairs])
    u, _, vt = np.linalg.svd(X.T @ Y)
    rotation = u @ vt
    answers = {}
    for s, t in test_pairs:
        answers.setdefault(int(s), []).append(int(t))
    correct = 0
    for s, targets in answers.items():
        mapped = src[s] @ rotation
        cosines = tgt @ mapped
        if int(np.argmax(cosines)) in targets:
            correct += 1
    return correct / len(answers)
''',
    r'''def alignment_precision_at_1(src_emb, tgt_emb, train_pairs, test_pairs):
    """Precision@1 of the test translations after the orthogonal map fitted on the train pairs."""
    def normalise(a):
        a = np.asarray(a, dtype=float)
        n = np.linalg.norm(a, axis=-1, keepdims=True)
        return np.divide(a, n, out=np.zeros_like(a), where=n > 0)

    src, tgt = normalise(src_emb), normalise(tgt_emb)
    train = np.array(train_pairs, dtype=int).reshape(-1, 2)
    test = np.array(test_pairs, dtype=int).reshape(-1, 2)
    u, _, vt = np.linalg.svd(src[train[:, 0]].T @ tgt[train[:, 1]])
    mapped = normalise(src @ (u @ vt))
    best = np.argmax(mapped @ tgt.T, axis=1)  # the nearest target of every source word
    hit = best[test[:, 0]] == test[:, 1]
    sources = np.unique(test[:, 0])
    return float(np.mean([hit[test[:, 0] == s].any() for s in sources]))
''',
]

COHORT["whole_entity_mask"] = [
    r'''def whole_entity_mask(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """Mask whole units (entities and single tokens) up to `budget` tokens per row, 80/10/10 per unit."""
    token_ids = np.asarray(token_ids)
    inputs = token_ids.copy()
    labels = np.full(token_ids.shape, -100, dtype=np.int64)
    B, T = token_ids.shape
    for b in range(B):
        spans = [(int(s), int(e)) for s, e in entity_spans[b]]
        inside = np.zeros(T, dtype=bool)
        for s, e in spans:
            inside[s:e] = True
        units = spans + [(i, i + 1) for i in range(T) if not inside[i]]
        left = budget
        for u_index in rng.permutation(len(units)):
            s, e = units[u_index]
            length = e - s
            if length > left:
                continue
            left -= length
            labels[b, s:e] = token_ids[b, s:e]
            u = rng.random()
            if u < 0.8:
                inputs[b, s:e] = mask_id
            elif u < 0.9:
                r = rng.integers(0, vocab_size - 1, size=length)
                r[r >= mask_id] += 1
                inputs[b, s:e] = r
    return inputs, labels
''',
    r'''def whole_entity_mask(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """Mask whole units (entities and single tokens) up to `budget` tokens per row, 80/10/10 per unit."""
    ids = np.array(token_ids)
    inputs = ids.copy()
    labels = np.full_like(ids, -100)
    for row in range(ids.shape[0]):
        covered = set()
        units = []
        for start, end in entity_spans[row]:
            positions = list(range(int(start), int(end)))
            units.append(positions)
            covered.update(positions)
        for position in range(ids.shape[1]):
            if position not in covered:
                units.append([position])
        remaining = budget
        for i in rng.permutation(len(units)):
            positions = units[i]
            if len(positions) > remaining:
                continue
            remaining -= len(positions)
            labels[row, positions] = ids[row, positions]
            draw = rng.random()
            if draw < 0.8:
                inputs[row, positions] = mask_id
            elif draw < 0.9:
                for p in positions:
                    new = rng.integers(0, vocab_size - 1)
                    inputs[row, p] = new if new < mask_id else new + 1
    return inputs, labels
''',
    r'''def whole_entity_mask(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """Mask whole units (entities and single tokens) up to `budget` tokens per row, 80/10/10 per unit."""
    tokens = np.asarray(token_ids)
    n_rows, length = tokens.shape
    inputs, labels = tokens.copy(), np.full(tokens.shape, -100)
    pool = np.delete(np.arange(vocab_size), mask_id)
    for b in range(n_rows):
        spans = np.asarray(entity_spans[b], dtype=int).reshape(-1, 2)
        free = np.ones(length, dtype=bool)
        for start, end in spans:
            free[start:end] = False
        units = [np.arange(s, e) for s, e in spans] + [np.array([i]) for i in np.flatnonzero(free)]
        left = budget
        for k in rng.permutation(len(units)):
            unit = units[k]
            if unit.size > left:
                continue
            left -= unit.size
            labels[b, unit] = tokens[b, unit]
            u = rng.random()
            if u >= 0.2:
                inputs[b, unit] = mask_id
            elif u < 0.1:
                inputs[b, unit] = rng.choice(pool, size=unit.size)
    return inputs, labels
''',
]

COHORT["unfreezing_groups"] = [
    r'''def unfreezing_groups(n_layers, step, unfreeze_every, base_lr, decay):
    """{group: learning rate at this step}: top groups first, base_lr * decay**k, 0.0 while frozen."""
    names = ["head"] + [f"layer.{i}" for i in range(n_layers - 1, -1, -1)] + ["embeddings"]
    rates = {}
    for k, name in enumerate(names):
        if step >= k * unfreeze_every:
            rates[name] = base_lr * decay ** k
        else:
            rates[name] = 0.0
    return rates
''',
    r'''def unfreezing_groups(n_layers, step, unfreeze_every, base_lr, decay):
    """{group: learning rate at this step}: top groups first, base_lr * decay**k, 0.0 while frozen."""
    groups = {}

    def rate(k):
        trains = unfreeze_every == 0 or step >= k * unfreeze_every
        return base_lr * decay ** k if trains else 0.0

    groups["head"] = rate(0)
    for layer in reversed(range(n_layers)):
        k = n_layers - layer
        groups[f"layer.{layer}"] = rate(k)
    groups["embeddings"] = rate(n_layers + 1)
    return groups
''',
    r'''def unfreezing_groups(n_layers, step, unfreeze_every, base_lr, decay):
    """{group: learning rate at this step}: top groups first, base_lr * decay**k, 0.0 while frozen."""
    order = ["head", *(f"layer.{n_layers - k}" for k in range(1, n_layers + 1)), "embeddings"]
    unfrozen = len(order) if unfreeze_every == 0 else step // unfreeze_every + 1
    return {name: (base_lr * decay ** k if k < unfrozen else 0.0) for k, name in enumerate(order)}
''',
]

COHORT["patchify"] = [
    r'''def patchify(images, patch):
    """(B, C, H, W) -> (B, N, C * patch * patch): row-major patches, each flattened channel, row, column."""
    B, C, H, W = images.shape
    if H % patch or W % patch:
        raise ValueError("H and W must be multiples of patch")
    x = images.reshape(B, C, H // patch, patch, W // patch, patch)
    x = x.transpose(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // patch) * (W // patch), C * patch * patch)
''',
    r'''def patchify(images, patch):
    """(B, C, H, W) -> (B, N, C * patch * patch): row-major patches, each flattened channel, row, column."""
    batch, channels, height, width = images.shape
    if height % patch != 0 or width % patch != 0:
        raise ValueError(f"image size {height}x{width} is not a multiple of the patch size {patch}")
    rows, cols = height // patch, width // patch
    out = np.empty((batch, rows * cols, channels * patch * patch), dtype=images.dtype)
    for r in range(rows):
        for s in range(cols):
            block = images[:, :, r * patch:(r + 1) * patch, s * patch:(s + 1) * patch]
            out[:, r * cols + s] = block.reshape(batch, -1)
    return out
''',
    r'''def patchify(images, patch):
    """(B, C, H, W) -> (B, N, C * patch * patch): row-major patches, each flattened channel, row, column."""
    b, c, h, w = images.shape
    if h % patch != 0 or w % patch != 0:
        raise ValueError("patch must divide H and W")
    grid = images.reshape(b, c, h // patch, patch, w // patch, patch)
    tiles = np.moveaxis(grid, [2, 4], [1, 2])  # (b, rows, cols, c, patch, patch)
    return np.ascontiguousarray(tiles).reshape(b, (h // patch) * (w // patch), c * patch * patch)
''',
]

COHORT["joint_attention_mask"] = [
    r'''def joint_attention_mask(text_mask, image_mask):
    """(B, T), (B, N) real-token masks -> (B, T + N, T + N) bool: (real_i and real_j) or i == j."""
    real = np.concatenate([np.asarray(text_mask, dtype=bool), np.asarray(image_mask, dtype=bool)], axis=1)
    n = real.shape[1]
    return (real[:, :, None] & real[:, None, :]) | np.eye(n, dtype=bool)
''',
    r'''def joint_attention_mask(text_mask, image_mask):
    """(B, T), (B, N) real-token masks -> (B, T + N, T + N) bool: (real_i and real_j) or i == j."""
    real = np.hstack([text_mask, image_mask]).astype(bool)
    batch, length = real.shape
    mask = np.zeros((batch, length, length), dtype=bool)
    for b in range(batch):
        for i in range(length):
            for j in range(length):
                mask[b, i, j] = (real[b, i] and real[b, j]) or i == j
    return mask
''',
    r'''def joint_attention_mask(text_mask, image_mask):
    """(B, T), (B, N) real-token masks -> (B, T + N, T + N) bool: (real_i and real_j) or i == j."""
    real = np.concatenate((text_mask, image_mask), axis=-1) != 0
    allowed = np.einsum("bi,bj->bij", real.astype(np.int64), real.astype(np.int64)) > 0
    diagonal = np.arange(real.shape[1])
    allowed[:, diagonal, diagonal] = True
    return allowed
''',
]

COHORT["clip_loss"] = [
    r'''def clip_loss(image_emb, text_emb, temperature=0.07):
    """The mean of CLIP's image-to-text and text-to-image cross-entropies over cosine logits / temperature."""
    def normalise(x):
        n = np.linalg.norm(x, axis=1, keepdims=True)
        return x / np.where(n == 0, 1.0, n)

    def log_softmax_rows(z):
        z = z - z.max(axis=1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=1, keepdims=True))

    logits = normalise(image_emb) @ normalise(text_emb).T / temperature
    idx = np.arange(len(logits))
    loss_i2t = -log_softmax_rows(logits)[idx, idx].mean()
    loss_t2i = -log_softmax_rows(logits.T)[idx, idx].mean()
    return float((loss_i2t + loss_t2i) / 2)
''',
    r'''def clip_loss(image_emb, text_emb, temperature=0.07):
    """The mean of CLIP's image-to-text and text-to-image cross-entropies over cosine logits / temperature."""
    img = np.array(image_emb, dtype=np.float64)
    txt = np.array(text_emb, dtype=np.float64)
    for m in (img, txt):
        lengths = np.sqrt(np.sum(m * m, axis=1))
        nonzero = lengths > 0
        m[nonzero] = m[nonzero] / lengths[nonzero, None]
    logits = img @ txt.T / temperature
    B = logits.shape[0]
    row_loss = 0.0
    col_loss = 0.0
    for i in range(B):
        row = logits[i]
        row_loss += -(row[i] - row.max() - np.log(np.sum(np.exp(row - row.max()))))
        col = logits[:, i]
        col_loss += -(col[i] - col.max() - np.log(np.sum(np.exp(col - col.max()))))
    return (row_loss / B + col_loss / B) / 2
''',
    r'''def clip_loss(image_emb, text_emb, temperature=0.07):
    """The mean of CLIP's image-to-text and text-to-image cross-entropies over cosine logits / temperature."""
    def unit(rows):
        rows = np.asarray(rows, dtype=float)
        size = np.sqrt((rows ** 2).sum(-1, keepdims=True))
        return np.divide(rows, size, out=np.zeros_like(rows), where=size > 0)

    def lse(z, axis):
        top = z.max(axis=axis, keepdims=True)
        return (top + np.log(np.exp(z - top).sum(axis=axis, keepdims=True))).squeeze(axis)

    logits = unit(image_emb) @ unit(text_emb).T / temperature
    correct = np.diag(logits)
    image_to_text = np.mean(lse(logits, 1) - correct)
    text_to_image = np.mean(lse(logits, 0) - correct)
    return float(0.5 * (image_to_text + text_to_image))
''',
]

COHORT["sft_loss"] = [
    r'''def sft_loss(logits, tokens, answer_mask):
    """The mean next-token loss over the answer's tokens: position t predicts tokens[:, t + 1],
    counted where answer_mask[:, t + 1]; 0.0 when no token counts."""
    logits = np.asarray(logits, dtype=np.float64)[:, :-1]
    targets = np.asarray(tokens)[:, 1:]
    counted = np.asarray(answer_mask, dtype=bool)[:, 1:]
    if not counted.any():
        return 0.0
    m = logits.max(axis=-1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return float(-picked[counted].mean())
''',
    r'''def sft_loss(logits, tokens, answer_mask):
    """The mean next-token loss over the answer's tokens: position t predicts tokens[:, t + 1],
    counted where answer_mask[:, t + 1]; 0.0 when no token counts."""
    batch, length, _ = logits.shape
    total = 0.0
    count = 0
    for b in range(batch):
        for t in range(length - 1):
            if not answer_mask[b, t + 1]:
                continue
            row = logits[b, t].astype(np.float64)
            top = row.max()
            log_z = top + np.log(np.sum(np.exp(row - top)))
            total += log_z - row[tokens[b, t + 1]]
            count += 1
    if count == 0:
        return 0.0
    return float(total / count)
''',
    r'''def sft_loss(logits, tokens, answer_mask):
    """The mean next-token loss over the answer's tokens: position t predicts tokens[:, t + 1],
    counted where answer_mask[:, t + 1]; 0.0 when no token counts."""
    logp = ref.log_softmax(np.asarray(logits, dtype=np.float64)[:, :-1], axis=-1)
    nxt = np.asarray(tokens)[:, 1:]
    keep = np.asarray(answer_mask)[:, 1:].astype(bool)
    b, t = np.nonzero(keep)
    if b.size == 0:
        return 0.0
    return float(-logp[b, t, nxt[b, t]].mean())
''',
]

COHORT["bradley_terry_loss"] = [
    r'''def bradley_terry_loss(r_chosen, r_rejected):
    """-mean log sigmoid(r_chosen - r_rejected): small when the preferred answers score higher."""
    margin = np.asarray(r_chosen, dtype=np.float64) - np.asarray(r_rejected, dtype=np.float64)
    return float(np.mean(np.logaddexp(0.0, -margin)))
''',
    r'''def bradley_terry_loss(r_chosen, r_rejected):
    """-mean log sigmoid(r_chosen - r_rejected): small when the preferred answers score higher."""
    total = 0.0
    for good, bad in zip(r_chosen, r_rejected):
        x = float(good) - float(bad)
        # -log sigmoid(x) = log(1 + exp(-x)), written so that exp never overflows
        if x >= 0:
            total += math.log1p(math.exp(-x))
        else:
            total += -x + math.log1p(math.exp(x))
    return total / len(r_chosen)
''',
    r'''def bradley_terry_loss(r_chosen, r_rejected):
    """-mean log sigmoid(r_chosen - r_rejected): small when the preferred answers score higher."""
    x = np.subtract(r_chosen, r_rejected, dtype=np.float64)
    softplus = np.maximum(-x, 0.0) + np.log1p(np.exp(-np.abs(x)))
    return float(softplus.mean())
''',
]

COHORT["dpo_loss"] = [
    r'''def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    """-mean log sigmoid(beta * ((pc - rc) - (pr - rr))): Bradley-Terry on the implicit rewards."""
    chosen_reward = beta * (np.asarray(policy_chosen_logps) - np.asarray(ref_chosen_logps))
    rejected_reward = beta * (np.asarray(policy_rejected_logps) - np.asarray(ref_rejected_logps))
    return float(np.mean(np.logaddexp(0, -(chosen_reward - rejected_reward))))
''',
    r'''def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    """-mean log sigmoid(beta * ((pc - rc) - (pr - rr))): Bradley-Terry on the implicit rewards."""
    losses = []
    for pc, pr, rc, rr in zip(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps):
        margin = beta * ((pc - rc) - (pr - rr))
        losses.append(np.logaddexp(0.0, -margin))
    return float(np.mean(losses))
''',
    r'''def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    """-mean log sigmoid(beta * ((pc - rc) - (pr - rr))): Bradley-Terry on the implicit rewards."""
    pi_logratios = np.asarray(policy_chosen_logps, float) - np.asarray(policy_rejected_logps, float)
    ref_logratios = np.asarray(ref_chosen_logps, float) - np.asarray(ref_rejected_logps, float)
    z = beta * (pi_logratios - ref_logratios)
    return float(np.mean(np.maximum(-z, 0) + np.log1p(np.exp(-np.abs(z)))))
''',
]


# Answers that failed their check when first run, and what was changed (for correctness only).
FIXED: dict[str, str] = {
    "anisotropy 1": "divided each row by its own norm (np.dot(a / na, b / nb)) instead of the dot product by the "
                    "product of the two norms, which underflows for entries of about 1e-160 (check_anisotropy's "
                    "case 12 failed with the underflow hint)",
}


def namespace(exercise: str, style: int) -> dict:
    """What a notebook's cells see when this answer runs: the notebook's imports, and the cohort's answer of the
    same style to the earlier exercise it calls."""
    import math

    import numpy as np
    import torch
    import torch.nn.functional as F

    from plmcourse import ref

    names = {"np": np, "torch": torch, "F": F, "math": math, "ref": ref, "__name__": "__cohort__"}
    for earlier in CALLS.get(exercise, []):
        names[earlier] = load(earlier, style)
    return names


def load(exercise: str, style: int):
    """The function (or class) that the cohort's answer number `style` to `exercise` defines."""
    names = namespace(exercise, style)
    exec(compile(COHORT[exercise][style], f"<cohort {exercise} {style}>", "exec"), names)
    return names[DEFINES.get(exercise, exercise)]
