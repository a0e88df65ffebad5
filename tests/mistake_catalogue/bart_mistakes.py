"""Right and wrong answers to the exercises of notebook 06 (BART and friends), as data for tests/test_grading_bart.py.

For each check: CORRECT, a list of (name, function) that must pass, written in
different styles; and MISTAKES, a list of (name, function, fragment): the check must
fail with a message containing `fragment`. Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import random

import numpy as np

from plmcourse import ref


# ============================================================================
# text_infilling(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0)


def infill_window(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0, _gaps=(0, 1), _start=None):
    """Draw among the starts where the whole span is still free (a running sum of the free tokens).

    (_gaps: the range of an inserted mask's gap, (first, past the last - n); _start(rng, free starts, n, length):
    how a start is drawn. Only the mistakes below change them.)
    """
    n = len(tokens)
    budget = int(round(mask_ratio * n))
    covered = np.zeros(n, dtype=bool)
    starts = np.zeros(n, dtype=bool)
    inserts = np.zeros(n + 1, dtype=int)
    while covered.sum() < budget:
        length = min(rng.poisson(poisson_lambda), budget - covered.sum())
        if length == 0:
            inserts[rng.integers(_gaps[0], n + _gaps[1])] += 1
            continue
        free = np.concatenate([[0], np.cumsum(~covered)])
        ok = np.flatnonzero(free[length:] - free[:-length] == length)
        while len(ok) == 0:
            length -= 1
            ok = np.flatnonzero(free[length:] - free[:-length] == length)
        s = rng.choice(ok) if _start is None else _start(rng, ok, n, length)
        covered[s:s + length] = True
        starts[s] = True
    out = []
    for i in range(n + 1):
        out += [mask_id] * inserts[i]
        if i < n and (starts[i] or not covered[i]):
            out.append(mask_id if starts[i] else tokens[i])
    return np.array(out, dtype=tokens.dtype)


def _clipped_to_the_end(rng, ok, n, length):
    while True:  # any position, moved back to n - length when the span would run past the end; again on an overlap
        s = min(int(rng.integers(0, n)), n - length)
        if s in ok:
            return s


def _but(excluded):
    def draw(rng, ok, n, length):
        others = [s for s in ok if s != excluded(n, length)]
        return rng.choice(others) if others else ok[0]
    return draw


def infill_clipped_to_the_end(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """A start drawn from all n positions and moved back to n - L when the span would run past the end: that
    start gets L chances, the last token is covered about twice as often as it should."""
    return infill_window(tokens, rng, mask_id, mask_ratio, poisson_lambda, _start=_clipped_to_the_end)


def infill_last_start_never(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """Starts from range(n - L), one short: no span ends at the last token unless nothing else is free."""
    return infill_window(tokens, rng, mask_id, mask_ratio, poisson_lambda, _start=_but(lambda n, length: n - length))


def infill_first_start_never(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """Starts from 1: no span starts at the first token unless nothing else is free."""
    return infill_window(tokens, rng, mask_id, mask_ratio, poisson_lambda, _start=_but(lambda n, length: 0))


def infill_retry(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """Draw any start and draw the start again on an overlap (the length stays); single tokens once retries
    keep failing."""
    return _infill_by_retries(tokens, rng, mask_id, mask_ratio, poisson_lambda, new_length_on_overlap=False)


def infill_new_length_on_overlap(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """On an overlap, a new length AND a new start: long spans overlap more often, so they are drawn again
    more often, and the spans come out shorter than Poisson(lambda)."""
    return _infill_by_retries(tokens, rng, mask_id, mask_ratio, poisson_lambda, new_length_on_overlap=True)


def infill_zero_length_replaces(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """A zero-length span puts its mask over the token at its gap (a span of one, outside the budget) instead of
    inserting it and removing nothing."""
    return _infill_by_retries(tokens, rng, mask_id, mask_ratio, poisson_lambda, False, zero_replaces=True)


def infill_fixed_length(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """Every span round(poisson_lambda) long: no length is drawn."""
    return _infill_by_retries(tokens, rng, mask_id, mask_ratio, poisson_lambda, False, fixed_length=True)


def _infill_by_retries(tokens, rng, mask_id, mask_ratio, poisson_lambda, new_length_on_overlap, zero_replaces=False,
                       fixed_length=False):
    tokens = list(tokens)
    n = len(tokens)
    budget = round(mask_ratio * n)
    spans, inserts, covered = {}, [], set()
    misses, length = 0, None
    while len(covered) < budget:
        if length is None or new_length_on_overlap:
            drawn = max(1, round(poisson_lambda)) if fixed_length else int(rng.poisson(poisson_lambda))
            length = min(drawn, budget - len(covered))
        if length == 0:
            gap = int(rng.integers(0, n + 1))
            if zero_replaces and gap < n and gap not in covered:
                spans[gap] = 1
                covered.add(gap)
                budget += 1  # the replaced token does not count: the budget is still to be covered by spans
            else:
                inserts.append(gap)
            length = None
            continue
        if misses > 50:
            length = 1
        start = int(rng.integers(0, n - length + 1))
        positions = set(range(start, start + length))
        if positions & covered:
            misses += 1
            continue
        misses, length = 0, None
        spans[start] = len(positions)
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


def infill_gap_never_at_the_end(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """rng.integers(0, n): an inserted mask never lands after the last token."""
    return infill_window(tokens, rng, mask_id, mask_ratio, poisson_lambda, _gaps=(0, 0))


def infill_gap_never_at_the_start(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """rng.integers(1, n + 1): an inserted mask never lands before the first token."""
    return infill_window(tokens, rng, mask_id, mask_ratio, poisson_lambda, _gaps=(1, 1))


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
    ("an inserted mask never after the last token", infill_gap_never_at_the_end, "landed after the last token"),
    ("an inserted mask never before the first token", infill_gap_never_at_the_start, "landed before the first token"),
    ("a mask per token", infill_token_masking, "every removed token got its own mask"),
    ("a start clipped to the end", infill_clipped_to_the_end, "spans pile up at the end"),
    ("the last start never drawn", infill_last_start_never, "n - L is a start too"),
    ("the first start never drawn", infill_first_start_never, "0 is a start too"),
    ("a new length on an overlap", infill_new_length_on_overlap, "keep the length and draw only the start again"),
    ("a zero-length span replaces a token", infill_zero_length_replaces, "a zero-length span replaced a token"),
    ("every span the same length", infill_fixed_length, "so that lengths vary"),
    ("token deletion", infill_deletion, "without a mask in their place"),
    ("no zero-length spans", infill_no_zero_length, "a span of length 0 must still insert one mask"),
    ("ignores poisson_lambda", infill_ignores_lambda, "expected about poisson_lambda = 1.0"),
    ("ignores mask_ratio", infill_ignores_ratio, "as if mask_ratio were ignored"),
    ("overlapping spans merge", infill_overlapping_merge, "spans never overlap"),
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

def permutation_rows_by_step(order):
    mask = np.zeros((len(order), len(order)), dtype=bool)
    for t in range(len(order)):
        mask[t, order[:t]] = True  # row t, not row order[t]
    return mask


def permutation_columns_by_step(order):
    mask = np.zeros((len(order), len(order)), dtype=bool)
    for t, position in enumerate(order):
        mask[position, :t] = True  # columns 0..t-1, not order[:t]
    return mask


PERMUTATION_MISTAKES = [
    ("sees itself", lambda order: permutation_rank(order) | np.eye(len(order), dtype=bool),
     "position i also sees itself"),
    ("order used as rank", lambda order: np.asarray(order)[None, :] < np.asarray(order)[:, None],
     "invert the permutation"),
    ("indexed by step", lambda order: np.tril(np.ones((len(order), len(order)), dtype=bool), -1),
     "indexed by step in the order"),
    ("rows indexed by step", permutation_rows_by_step, "row t filled with what the t-th step sees"),
    ("columns indexed by step", permutation_columns_by_step, "column t filled for the t-th step"),
    ("transposed", lambda order: permutation_rank(order).T, "transposed"),
    ("inverted", lambda order: ~permutation_rank(order), "an inverted mask"),
    ("integers", lambda order: permutation_rank(order).astype(int), "create it with dtype=bool"),
    ("calls plmcourse.ref.permutation_mask", lambda order: ref.permutation_mask(order),
     "calls plmcourse.ref.permutation_mask; write it yourself"),
]


CATALOGUE = {
    "check_text_infilling": (INFILLING_CORRECT, INFILLING_MISTAKES),
    "check_prefix_lm_mask": (PREFIX_CORRECT, PREFIX_MISTAKES),
    "check_permutation_mask": (PERMUTATION_CORRECT, PERMUTATION_MISTAKES),
}
