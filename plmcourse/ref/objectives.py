"""Pre-training objectives in plain NumPy: losses, corruption (noise) functions and attention masks.

The three families of pre-trained language models differ in what they corrupt and
what they predict:

    BERT  (encoder)          mask 15% of the tokens, predict them     mlm_mask, mlm_loss
    GPT   (decoder)          predict every next token                 causal_lm_loss
    BART  (encoder-decoder)  corrupt the text, regenerate all of it   token_masking, token_deletion,
                                                                      text_infilling, sentence_permutation,
                                                                      document_rotation
    T5    (encoder-decoder)  drop spans, generate only the spans      t5_span_corruption
    UniLM, XLNet             one Transformer, other attention masks   prefix_lm_mask, permutation_mask

Conventions (the course's): losses take logits, not probabilities, skip targets equal
to `ignore_index` (-100) and average over the targets they count. Every random
function takes an explicit `numpy.random.Generator` and draws only from it, so the
same seed gives the same corruption. Masks are bool and True where attention is allowed.
"""

import numpy as np

__all__ = [
    "IGNORE_INDEX",
    "cross_entropy",
    "causal_lm_loss",
    "mlm_loss",
    "mlm_mask",
    "token_masking",
    "token_deletion",
    "text_infilling",
    "sentence_permutation",
    "document_rotation",
    "t5_span_corruption",
    "prefix_lm_mask",
    "permutation_mask",
]

IGNORE_INDEX = -100


# ----------------------------------------------------------------------------
# Losses


def _log_softmax(x, axis=-1):
    """log softmax(x) along `axis`, stable for large logits: x - max - log(sum(exp(x - max)))."""
    x = np.asarray(x, dtype=np.float64)
    x_max = np.max(x, axis=axis, keepdims=True)
    shifted = x - x_max
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    """Mean negative log-likelihood of `targets` under softmax(`logits`), over counted positions.

    logits: (..., V) unnormalised scores; targets: (...) integer class ids, or
    `ignore_index` where a position has no target. Returns a float: the mean of
    -log p(target) over the positions whose target is not `ignore_index`, or 0.0
    when there is none (torch.nn.functional.cross_entropy returns NaN there; a
    batch without a single target should not poison training).
    """
    logits = np.asarray(logits, dtype=np.float64)
    targets = np.asarray(targets)
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets must have shape {logits.shape[:-1]} (logits' shape without the "
                         f"last axis), got {targets.shape}.")
    if targets.dtype.kind not in "iu":
        raise ValueError(f"targets must be integer class ids, got dtype {targets.dtype}.")
    counted = targets != ignore_index
    V = logits.shape[-1]
    if np.any(counted & ((targets < 0) | (targets >= V))):
        raise ValueError(f"every counted target must lie in 0..{V - 1} (or be ignore_index={ignore_index}).")
    if not counted.any():
        return 0.0
    log_probs = _log_softmax(logits, axis=-1)  # (..., V)
    safe = np.where(counted, targets, 0)  # any valid index; ignored positions are dropped below
    picked = np.take_along_axis(log_probs, safe[..., None], axis=-1)[..., 0]  # (...)
    return float(-picked[counted].mean())


def causal_lm_loss(logits, tokens, ignore_index=IGNORE_INDEX):
    """Next-token loss of a left-to-right language model; the shift happens inside.

    logits: (..., T, V), the model's output at each of the T input positions;
    tokens: (..., T), the input ids. Position t predicts token t + 1, so the last
    position has nothing to predict and the first token is never a target:
    cross_entropy(logits[..., :-1, :], tokens[..., 1:]). Tokens equal to
    `ignore_index` (e.g. padding replaced by -100 in a copy) are not counted.
    """
    logits = np.asarray(logits, dtype=np.float64)
    tokens = np.asarray(tokens)
    if tokens.shape != logits.shape[:-1]:
        raise ValueError(f"tokens must have shape {logits.shape[:-1]}, got {tokens.shape}.")
    return cross_entropy(logits[..., :-1, :], tokens[..., 1:], ignore_index)


def mlm_loss(logits, labels):
    """Masked-language-model loss: cross-entropy over the positions whose label is not -100.

    logits: (..., T, V); labels: (..., T) from `mlm_mask`: the original token where
    the model must predict it, -100 elsewhere. Averaging over the predicted
    positions only (not over all T) keeps the loss's scale independent of how many
    tokens happened to be chosen.
    """
    return cross_entropy(logits, labels, IGNORE_INDEX)


# ----------------------------------------------------------------------------
# BERT's masking


def _allowed_replacements(vocab_size, special_ids, mask_id):
    banned = set(int(s) for s in special_ids) | {int(mask_id)}
    allowed = np.array([i for i in range(vocab_size) if i not in banned], dtype=np.int64)
    if allowed.size == 0:
        raise ValueError("every id is special: there is no token to use as a random replacement.")
    return allowed


def mlm_mask(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """BERT's masking: choose ~p of the ordinary tokens; of those 80% -> [MASK], 10% -> random, 10% kept.

    tokens: integer array of any shape, e.g. (B, T). rng: numpy.random.Generator.
    special_ids: ids that are never chosen ([CLS], [SEP], [PAD], ...); random
    replacements are drawn uniformly from the ids in 0..vocab_size-1 that are
    neither special nor `mask_id`.
    Each ordinary position is chosen independently with probability p.
    Returns (inputs, labels), both shaped like tokens: inputs is the corrupted copy;
    labels holds the original token at chosen positions and -100 everywhere else.
    """
    tokens = np.asarray(tokens)
    if tokens.dtype.kind not in "iu":
        raise ValueError(f"tokens must be integer ids, got dtype {tokens.dtype}.")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must lie in [0, 1], got {p}.")
    ordinary = ~np.isin(tokens, np.asarray(list(special_ids), dtype=np.int64))
    chosen = (rng.random(tokens.shape) < p) & ordinary  # the positions the model must predict
    action = rng.random(tokens.shape)  # one draw decides what a chosen position shows
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)  # and 0.9 <= action: kept as it is
    allowed = _allowed_replacements(vocab_size, special_ids, mask_id)
    random_ids = allowed[rng.integers(0, allowed.size, size=tokens.shape)]

    inputs = tokens.copy()
    inputs[to_mask] = mask_id
    inputs[to_random] = random_ids[to_random]
    labels = np.where(chosen, tokens, IGNORE_INDEX).astype(np.int64)
    return inputs, labels


# ----------------------------------------------------------------------------
# BART's noise functions, on one 1-D sequence of ids


def _as_sequence(tokens):
    tokens = np.asarray(tokens)
    if tokens.ndim != 1:
        raise ValueError(f"tokens must be one sequence (1-D), got shape {tokens.shape}.")
    return tokens


def token_masking(tokens, rng, mask_id, p=0.15):
    """Replace each token by `mask_id` with probability p (BERT's masking without the 10/10 rule)."""
    tokens = _as_sequence(tokens)
    return np.where(rng.random(tokens.shape) < p, mask_id, tokens).astype(tokens.dtype)


def token_deletion(tokens, rng, p=0.15):
    """Delete each token with probability p. The model must also find *where* tokens are missing."""
    tokens = _as_sequence(tokens)
    return tokens[rng.random(tokens.shape) >= p].copy()


def text_infilling(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """BART's text infilling: spans with Poisson(lambda) lengths, each replaced by ONE mask token.

    Spans are drawn until round(mask_ratio * n) tokens are covered:
      - a length L ~ Poisson(poisson_lambda), cut to the number of tokens still to cover;
      - L = 0: one mask token is *inserted* at a random gap (0..n), removing nothing;
      - L > 0: a start is drawn uniformly among those where all L tokens are still
        uncovered, so spans never overlap (if no free stretch is that long, L shrinks).
    Then every span becomes a single `mask_id`. The model has to work out how many
    tokens each mask stands for (0, 1, 2, ...), which plain token masking never asks.
    """
    tokens = _as_sequence(tokens)
    n = len(tokens)
    if not 0.0 <= mask_ratio <= 1.0:
        raise ValueError(f"mask_ratio must lie in [0, 1], got {mask_ratio}.")
    to_cover = int(round(mask_ratio * n))
    covered = np.zeros(n, dtype=bool)  # tokens removed by some span
    span_start = np.zeros(n, dtype=bool)  # where a span's mask token goes
    inserted = np.zeros(n + 1, dtype=np.int64)  # zero-length spans in gap g (before token g)
    n_covered = 0
    while n_covered < to_cover:
        length = min(int(rng.poisson(poisson_lambda)), to_cover - n_covered)
        if length == 0:
            inserted[rng.integers(0, n + 1)] += 1
            continue
        starts = _free_starts(covered, length)
        while starts.size == 0:  # no free stretch is that long any more: take a shorter span
            length -= 1
            starts = _free_starts(covered, length)
        start = int(starts[rng.integers(0, starts.size)])
        covered[start:start + length] = True
        span_start[start] = True
        n_covered += length

    out = []
    for i in range(n + 1):
        out.extend([mask_id] * int(inserted[i]))
        if i == n:
            break
        if span_start[i]:
            out.append(mask_id)  # the whole span, however long, becomes one mask
        elif not covered[i]:
            out.append(tokens[i])
    return np.array(out, dtype=tokens.dtype)


def _free_starts(covered, length):
    """Positions where `length` uncovered tokens begin (a window sum of the free tokens)."""
    free = np.concatenate([[0], np.cumsum(~covered)])  # free[i]: uncovered tokens before i
    return np.flatnonzero(free[length:] - free[:-length] == length)


def sentence_permutation(tokens, rng, sep_id):
    """Cut the document after every `sep_id` (a full stop) and shuffle the sentences.

    Each sentence keeps its own `sep_id`; a last piece without one counts as a sentence too.
    """
    tokens = _as_sequence(tokens)
    ends = np.flatnonzero(tokens == sep_id) + 1
    sentences = [s for s in np.split(tokens, ends) if len(s)]
    if not sentences:
        return tokens.copy()
    order = rng.permutation(len(sentences))
    return np.concatenate([sentences[i] for i in order]).astype(tokens.dtype)


def document_rotation(tokens, rng):
    """Pick a token uniformly at random and rotate the document so that it starts there."""
    tokens = _as_sequence(tokens)
    if len(tokens) == 0:
        return tokens.copy()
    start = int(rng.integers(0, len(tokens)))
    return np.concatenate([tokens[start:], tokens[:start]])


def _random_segmentation(n_items, n_segments, rng):
    """Split n_items into n_segments non-empty parts at random; returns their lengths."""
    cuts = np.sort(rng.choice(np.arange(1, n_items), size=n_segments - 1, replace=False))
    return np.diff(np.concatenate([[0], cuts, [n_items]]))


def t5_span_corruption(tokens, rng, sentinel_ids, noise_density=0.15, mean_span_length=3.0):
    """T5's objective as text-to-text: drop spans from the input, generate only the spans.

    round(noise_density * n) tokens are dropped, in about noise / mean_span_length
    spans that alternate with kept stretches (the input starts with a kept one).
    inputs: the kept tokens, each dropped span replaced by the next sentinel id;
    targets: each sentinel followed by the tokens it hid, and one final sentinel.
        tokens  Thank you for inviting me to your party last week
        inputs  Thank you <X> me to your party <Y> week
        targets <X> for inviting <Y> last <Z>
    """
    tokens = _as_sequence(tokens)
    n = len(tokens)
    if n < 2:
        raise ValueError(f"span corruption needs at least 2 tokens, got {n}.")
    n_noise = min(max(int(round(noise_density * n)), 1), n - 1)
    n_spans = max(int(round(n_noise / mean_span_length)), 1)
    n_spans = min(n_spans, n_noise, n - n_noise)
    if n_spans + 1 > len(sentinel_ids):
        raise ValueError(f"{n_spans} spans need {n_spans + 1} sentinel ids, got {len(sentinel_ids)}.")
    noise_lengths = _random_segmentation(n_noise, n_spans, rng)
    kept_lengths = _random_segmentation(n - n_noise, n_spans, rng)
    inputs, targets, position = [], [], 0
    for k, (kept, noise) in enumerate(zip(kept_lengths, noise_lengths)):
        inputs.extend(tokens[position:position + kept])
        position += kept
        inputs.append(sentinel_ids[k])
        targets.append(sentinel_ids[k])
        targets.extend(tokens[position:position + noise])
        position += noise
    targets.append(sentinel_ids[n_spans])
    return np.array(inputs, dtype=np.int64), np.array(targets, dtype=np.int64)


# ----------------------------------------------------------------------------
# One Transformer, several objectives: the attention mask decides


def prefix_lm_mask(n, prefix_len):
    """UniLM's prefix LM: bool (n, n), True = may attend.

    The first `prefix_len` positions (the source) see each other in both directions,
    as in BERT; the rest (the target) see the whole prefix and, among themselves,
    only what comes before them, as in GPT. No prefix position sees the target.
    prefix_len = 0 gives the causal mask; prefix_len = n the full (encoder) mask.
    """
    if not 0 <= prefix_len <= n:
        raise ValueError(f"prefix_len must lie in 0..n={n}, got {prefix_len}.")
    i = np.arange(n)[:, None]  # query positions
    j = np.arange(n)[None, :]  # key positions
    return (j <= i) | (j < prefix_len)


def permutation_mask(order, include_self=False):
    """XLNet's permutation LM as a mask: bool (n, n), True where position i may see position j.

    order: a permutation of 0..n-1, the factorisation order: order[0] is predicted
    first, order[1] second, given order[0], and so on. Position i may see position j
    when j comes earlier in that order. The positions themselves are not moved: the
    order only changes who sees whom.
    include_self=False is XLNet's query stream (predicting x_i, it must not see x_i;
    the first position in the order sees nothing); include_self=True is its content
    stream, which also sees itself.
    """
    order = np.asarray(order)
    n = len(order)
    if order.ndim != 1 or sorted(order.tolist()) != list(range(n)):
        raise ValueError(f"order must be a permutation of 0..{n - 1}, got {order.tolist()}.")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)  # rank[p]: the step at which position p is predicted
    if include_self:
        return rank[None, :] <= rank[:, None]
    return rank[None, :] < rank[:, None]
