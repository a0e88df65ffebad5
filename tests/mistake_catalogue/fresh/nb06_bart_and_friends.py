"""Fresh student-style implementations for notebook 06 (BART and friends):
text_infilling (NumPy), prefix_lm_mask, permutation_mask."""
from collections import Counter

import numpy as np


# ---- text_infilling: helpers -----------------------------------------------
def _longest_free_run(covered):
    free = np.concatenate([[0], (~np.asarray(covered, dtype=bool)).astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(free))
    return int((edges[1::2] - edges[0::2]).max()) if len(edges) else 0


def _assemble(tokens, covered, span_starts, gaps, mask_id):
    """One mask per span (at its start), inserted masks before token g (g == n: at the end)."""
    n = len(tokens)
    inserted = Counter(gaps)
    out = []
    for i in range(n + 1):
        out.extend([mask_id] * inserted.get(i, 0))
        if i == n:
            break
        if i in span_starts:
            out.append(mask_id)
        elif not covered[i]:
            out.append(tokens[i])
    return np.array(out, dtype=np.asarray(tokens).dtype)


def _draw_spans(n, rng, mask_ratio, poisson_lambda, cut=True, overlap_ok=False, draw=None):
    """The spec's drawing loop, with switches for the mistakes below."""
    draw = draw or rng
    covered = np.zeros(n, dtype=bool)
    span_starts, gaps = set(), []
    remaining = int(round(mask_ratio * n))
    while remaining > 0:
        length = int(draw.poisson(poisson_lambda))
        if cut:
            length = min(length, remaining)
        if length == 0:
            gaps.append(int(draw.integers(0, n + 1)) if hasattr(draw, "integers") else int(draw.randint(0, n + 1)))
            continue
        if overlap_ok:
            length = min(length, n)
            start = int(draw.integers(0, n - length + 1)) if hasattr(draw, "integers") \
                else int(draw.randint(0, n - length + 1))
        else:
            length = min(length, _longest_free_run(covered))
            while True:
                start = int(draw.integers(0, n - length + 1)) if hasattr(draw, "integers") \
                    else int(draw.randint(0, n - length + 1))
                if not covered[start:start + length].any():
                    break
        covered[start:start + length] = True
        span_starts.add(start)
        remaining -= length
    return covered, span_starts, gaps


# ---- text_infilling --------------------------------------------------------
def infilling_mask_per_token(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: replaces every token of a span by its own mask (token masking), not one mask per span."""
    tokens = np.asarray(tokens)
    covered, _, gaps = _draw_spans(len(tokens), rng, mask_ratio, poisson_lambda)
    inserted = Counter(gaps)
    out = []
    for i in range(len(tokens) + 1):
        out.extend([mask_id] * inserted.get(i, 0))
        if i < len(tokens):
            out.append(mask_id if covered[i] else tokens[i])
    return np.array(out, dtype=tokens.dtype)


def infilling_skip_zero_length(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: a zero-length draw is simply skipped, so no mask is ever inserted."""
    tokens = np.asarray(tokens)
    n = len(tokens)
    covered = np.zeros(n, dtype=bool)
    starts = set()
    remaining = int(round(mask_ratio * n))
    while remaining > 0:
        length = min(int(rng.poisson(poisson_lambda)), remaining)
        if length == 0:
            continue
        length = min(length, _longest_free_run(covered))
        while True:
            start = int(rng.integers(0, n - length + 1))
            if not covered[start:start + length].any():
                break
        covered[start:start + length] = True
        starts.add(start)
        remaining -= length
    return _assemble(tokens, covered, starts, [], mask_id)


def infilling_overlapping_spans(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: never checks for overlap; overlapping spans cover fewer tokens than mask_ratio asks."""
    tokens = np.asarray(tokens)
    covered, starts, gaps = _draw_spans(len(tokens), rng, mask_ratio, poisson_lambda, overlap_ok=True)
    return _assemble(tokens, covered, starts, gaps, mask_id)


def infilling_global_random(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: draws from np.random instead of rng, so the same seed does not reproduce the output."""
    tokens = np.asarray(tokens)
    covered, starts, gaps = _draw_spans(len(tokens), rng, mask_ratio, poisson_lambda, draw=np.random)
    return _assemble(tokens, covered, starts, gaps, mask_id)


def infilling_merge_adjacent(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: collapses every run of removed tokens into one mask, so two touching spans share one mask."""
    tokens = np.asarray(tokens)
    n = len(tokens)
    covered, _, gaps = _draw_spans(n, rng, mask_ratio, poisson_lambda)
    run_starts = {i for i in range(n) if covered[i] and (i == 0 or not covered[i - 1])}
    return _assemble(tokens, covered, run_starts, gaps, mask_id)


def infilling_length_not_cut(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: does not cut the drawn length to what is still to cover, so more than mask_ratio is removed."""
    tokens = np.asarray(tokens)
    covered, starts, gaps = _draw_spans(len(tokens), rng, mask_ratio, poisson_lambda, cut=False)
    return _assemble(tokens, covered, starts, gaps, mask_id)


def infilling_spec_loop(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """CORRECT: the spec step by step: Poisson length cut to what is left, insertion for length 0,
    rejection-sampled non-overlapping starts (shortened to the longest free stretch), one mask per span."""
    tokens = np.asarray(tokens)
    n = len(tokens)
    covered = np.zeros(n, dtype=bool)
    starts, gaps = set(), []
    remaining = int(round(mask_ratio * n))
    while remaining > 0:
        length = min(int(rng.poisson(poisson_lambda)), remaining)
        if length == 0:
            gaps.append(int(rng.integers(0, n + 1)))
            continue
        length = min(length, _longest_free_run(covered))
        while True:
            start = int(rng.integers(0, n - length + 1))
            if not covered[start:start + length].any():
                break
        covered[start:start + length] = True
        starts.add(start)
        remaining -= length
    return _assemble(tokens, covered, starts, gaps, mask_id)


def infilling_uniform_free_start(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """CORRECT: picks the start uniformly among the free starts directly (same distribution as
    rejection sampling, a different random stream); builds the output from a sorted list of events."""
    tokens = np.asarray(tokens)
    n = len(tokens)
    free = np.ones(n, dtype=bool)
    spans, gaps = [], []
    remaining = int(round(mask_ratio * n))
    while remaining > 0:
        length = min(int(rng.poisson(poisson_lambda)), remaining)
        if length == 0:
            gaps.append(int(rng.integers(0, n + 1)))
            continue
        used = np.concatenate([[0], np.cumsum(~free)])
        window_free = used[length:] - used[:-length] == 0        # windows [s, s + length) with nothing used
        while not window_free.any():                    # no stretch that long any more: shorten
            length -= 1
            window_free = used[length:] - used[:-length] == 0
        candidates = np.flatnonzero(window_free)
        start = int(candidates[rng.integers(0, len(candidates))])
        free[start:start + length] = False
        spans.append((start, length))
        remaining -= length
    # events: (position, kind) with kind 0 = inserted mask before token `position`, 1 = span, 2 = kept token
    events = [(g, 0, None) for g in gaps] + [(s, 1, None) for s, _ in spans]
    events += [(i, 2, tokens[i]) for i in range(n) if free[i]]
    events.sort(key=lambda e: (e[0], e[1]))
    return np.array([mask_id if kind < 2 else tok for _, kind, tok in events], dtype=tokens.dtype)


# ---- prefix_lm_mask --------------------------------------------------------
def prefix_lm_prefix_sees_all(n, prefix_len):
    """WRONG: gives the prefix rows full rows, so source positions also see the target."""
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    return (j < prefix_len) | (j <= i) | (i < prefix_len)


def prefix_lm_off_by_one(n, prefix_len):
    """WRONG: uses j <= prefix_len, so the first target token is visible to everyone."""
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    return (j <= prefix_len) | (j <= i)


def prefix_lm_target_blind_to_source(n, prefix_len):
    """WRONG: block-diagonal: the target attends causally to itself but not to the source."""
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    source = (i < prefix_len) & (j < prefix_len)
    target = (i >= prefix_len) & (j >= prefix_len) & (j <= i)
    return source | target


def prefix_lm_int_array(n, prefix_len):
    """WRONG: builds the mask in an integer array of 0/1 instead of booleans."""
    mask = np.tril(np.ones((n, n), dtype=int))
    mask[:, :prefix_len] = 1
    return mask


def prefix_lm_upper_triangle(n, prefix_len):
    """WRONG: uses np.triu for the causal part, so the target looks forward instead of back."""
    mask = np.triu(np.ones((n, n), dtype=bool))
    mask[:, :prefix_len] = True
    return mask


def prefix_lm_compare(n, prefix_len):
    """CORRECT: broadcast comparison j < prefix_len or j <= i."""
    rows, cols = np.indices((n, n))
    return (cols < prefix_len) | (cols <= rows)


def prefix_lm_blocks(n, prefix_len):
    """CORRECT: start from np.tri and open the prefix columns for every row."""
    mask = np.tri(n, dtype=bool)
    mask[:, :prefix_len] = True
    return mask


# ---- permutation_mask ------------------------------------------------------
def permutation_order_as_rank(order):
    """WRONG: compares order[j] < order[i], treating the order itself as the ranks."""
    order = np.asarray(order)
    return order[None, :] < order[:, None]


def permutation_includes_self(order):
    """WRONG: rank[j] <= rank[i], so every position also sees itself."""
    order = np.asarray(order)
    rank = np.argsort(order)
    return rank[None, :] <= rank[:, None]


def permutation_transposed(order):
    """WRONG: rank[i] < rank[j]: position i sees the positions predicted after it."""
    order = np.asarray(order)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[:, None] < rank[None, :]


def permutation_rows_by_step(order):
    """WRONG: fills row t (the step) instead of row order[t] (the position predicted at that step)."""
    order = np.asarray(order)
    n = len(order)
    mask = np.zeros((n, n), dtype=bool)
    for t in range(n):
        mask[t, order[:t]] = True
    return mask


def permutation_int_result(order):
    """WRONG: returns (rank_j < rank_i).astype(int), integers instead of booleans."""
    order = np.asarray(order)
    rank = np.argsort(order)
    return (rank[None, :] < rank[:, None]).astype(int)


def permutation_step_loop(order):
    """CORRECT: walks the order and gives each position every position predicted before it."""
    order = np.asarray(order)
    n = len(order)
    mask = np.zeros((n, n), dtype=bool)
    for t in range(1, n):
        mask[order[t], order[:t]] = True
    return mask


def permutation_reindex_causal(order):
    """CORRECT: the strict causal mask in step coordinates, re-indexed to positions."""
    order = np.asarray(order)
    n = len(order)
    strict = np.tril(np.ones((n, n), dtype=bool), k=-1)     # step s sees step t < s
    rank = np.argsort(order)
    return strict[np.ix_(rank, rank)]


FRESH = {
    "check_text_infilling": {
        "wrong": [
            ("one mask per token", infilling_mask_per_token, "Each removed token gets its own mask."),
            ("zero-length spans skipped", infilling_skip_zero_length, "A length-0 draw inserts nothing."),
            ("overlapping spans", infilling_overlapping_spans,
             "Spans may overlap, so fewer than round(mask_ratio * n) tokens are removed."),
            ("np.random instead of rng", infilling_global_random, "The same seed does not give the same output."),
            ("touching spans merged", infilling_merge_adjacent, "Two adjacent spans become one mask."),
            ("length not cut", infilling_length_not_cut, "The last span overshoots the number left to cover."),
        ],
        "correct": [
            ("the spec step by step", infilling_spec_loop),
            ("uniform over free starts", infilling_uniform_free_start),
        ],
    },
    "check_prefix_lm_mask": {
        "wrong": [
            ("prefix sees the target", prefix_lm_prefix_sees_all, "Prefix rows are all True."),
            ("j <= prefix_len", prefix_lm_off_by_one, "Off by one: the first target token joins the prefix."),
            ("target blind to source", prefix_lm_target_blind_to_source, "Target rows cannot see the prefix."),
            ("integer array", prefix_lm_int_array, "Returns 0/1 integers, not booleans."),
            ("triu causal part", prefix_lm_upper_triangle, "The target part looks forward (upper triangle)."),
        ],
        "correct": [
            ("comparison", prefix_lm_compare),
            ("np.tri plus prefix columns", prefix_lm_blocks),
        ],
    },
    "check_permutation_mask": {
        "wrong": [
            ("order used as rank", permutation_order_as_rank, "Compares order values instead of ranks."),
            ("includes self", permutation_includes_self, "The diagonal is True."),
            ("transposed", permutation_transposed, "Positions see those predicted after them."),
            ("rows indexed by step", permutation_rows_by_step, "Row t is the step, not the position order[t]."),
            ("integer result", permutation_int_result, "Returns integers instead of booleans."),
        ],
        "correct": [
            ("loop over steps", permutation_step_loop),
            ("re-indexed strict causal mask", permutation_reindex_causal),
        ],
    },
}
