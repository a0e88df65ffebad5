"""BART and friends in plain NumPy (notebook 06): corruption (noise) functions and attention masks.

    BART  (encoder-decoder)  corrupt the text, regenerate all of it   token_masking, token_deletion,
                                                                      text_infilling, sentence_permutation,
                                                                      document_rotation
    T5    (encoder-decoder)  drop spans, generate only the spans      t5_span_corruption
    UniLM, XLNet             one Transformer, other attention masks   prefix_lm_mask, permutation_mask

Every random function takes an explicit `numpy.random.Generator` and draws only from
it, so the same seed gives the same corruption. Masks are bool and True where attention
is allowed.
"""

import numpy as np

__all__ = [
    "token_masking",
    "token_deletion",
    "text_infilling",
    "sentence_permutation",
    "document_rotation",
    "t5_span_corruption",
    "prefix_lm_mask",
    "permutation_mask",
]


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
