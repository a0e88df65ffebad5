"""Checks for notebook 06, BART and friends: text infilling and the attention masks of UniLM and XLNet.

    check_text_infilling     text_infilling(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0), NumPy
    check_prefix_lm_mask     prefix_lm_mask(n, prefix_len), NumPy bool
    check_permutation_mask   permutation_mask(order), NumPy bool

The masks are compared with `plmcourse.ref`. text_infilling is random, so it cannot
be compared value by value, since every correct answer draws its random numbers in
its own order; it is judged by invariants that any correct answer satisfies (tokens
never moved, each span one mask), by statistics on large samples and by two calls
with the same seed, which must agree (the seed helpers of `plmcourse.judging.bert`,
which judges mlm_mask the same way). Every failure names the rule that was broken.
"""

import functools
import math

import numpy as np

from plmcourse import ref
from plmcourse.grading import bart as declared
from plmcourse.judging.bert import _Memory, _seed_problem
from plmcourse.judging.core import (ALARM, Case, Spec, expect_integer_array, hidden_salt, judge_bool_mask,
                                   judge_by_rules, unlikely_count)

__all__ = [
    "check_text_infilling",
    "check_prefix_lm_mask",
    "check_permutation_mask",
]


# ============================================================================
# text_infilling(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0), NumPy, one sequence

INFILLING_SEAL = [(ref.text_infilling, "plmcourse.ref.text_infilling")]
FIRST_ID = 5  # tokens are FIRST_ID, FIRST_ID + 1, ...: all different, so the output can be aligned


def _infilling_case(seed, n, mask_id=1, mask_ratio=None, poisson_lambda=None, statistics=False, key=None,
                    same_as=None, differs_from=None, gaps=False, edge=None, pool=None):
    tokens = FIRST_ID + np.arange(n, dtype=np.int64)
    kwargs = {}
    if mask_ratio is not None:
        kwargs["mask_ratio"] = mask_ratio
    if poisson_lambda is not None:
        kwargs["poisson_lambda"] = poisson_lambda
    label = f"seed {seed}: {n} tokens (ids {FIRST_ID}..{FIRST_ID + n - 1}), mask_id={mask_id}" + "".join(
        f", {k}={v}" for k, v in kwargs.items())
    if same_as:
        label += ", the same seed as an earlier case"
    if differs_from:
        label += ", another seed"
    data = {"n": n, "mask_id": mask_id, "ratio": 0.3 if mask_ratio is None else mask_ratio,
            "lam": 3.0 if poisson_lambda is None else poisson_lambda, "seed_key": key or f"infill{seed}"}
    if same_as:
        data["same_as"] = same_as
    if differs_from:
        data["differs_from"] = differs_from
    if gaps:
        label += " (almost every length is 0: thousands of masks inserted at random gaps)"
    if edge:
        label += f", call {edge[0] + 1} of {edge[1]} with other seeds (how often each end is covered)"
        data["edge"] = edge
    if pool:
        label += f", call {pool[1] + 1} of {pool[2]} judged together"
        data["pool"] = pool
    tags = ({"statistics"} if statistics else set()) | ({"gaps"} if gaps else set())
    return Case(label, (tokens, np.random.default_rng(seed), mask_id), kwargs, tags=frozenset(tags), data=data)


# The ends of a short sequence, over many calls: a start never drawn at 0 or at n - L, or starts piled up at one
# end (a start past n - L moved back to it), changes how often an end is covered, and nothing else. On 12 tokens
# with 6 to cover, 300 calls tell starts clipped to the end (the last token covered in 0.48 of the calls, against
# 0.264) from honest ones: 100 of 100 groups at seeds nobody chose (10,000,000 on), and an honest answer flagged in
# 0 of 100; a start range one short leaves an end never covered.
EDGE_CALLS, EDGE_N, EDGE_RATIO = 300, 12, 0.5


# The span statistics of one call grow sharper with its length, but an answer that scans the whole sequence for
# every span (a correct one too) takes time that grows with its square: at 5,000 tokens, half covered, such an answer
# took 12.5 s a call, 27 s recorded. So the statistics at half coverage come from a pool of calls on 1,000 tokens,
# judged together at the pool's last call (_rule_span_statistics): 6,000 tokens for a sixth of that time.
def _pool(name, first_seed, calls, n, **kwargs):
    return [_infilling_case(first_seed + i, n, statistics=True, pool=(name, i, calls), **kwargs) for i in range(calls)]


def _infilling_cases(hidden):
    # The statistics cases are as short as the catalogue allows: every mistake in it is caught at 10 of 10 seeds
    # shifted by 1000 k but one, a length drawn again on an overlap, which needs the most draws at half coverage
    # (tests/test_grading_bart.py measures its power).
    cases = [
        _infilling_case(50, 3000, statistics=True),
        _infilling_case(51, 3000, mask_ratio=0.2, poisson_lambda=1.0, statistics=True),
        # Long enough that two different draws coincide by chance about never (at 12 tokens,
        # an answer drawing from its own generator matched itself about once in 50 runs).
        _infilling_case(52, 60, key="small"),
        _infilling_case(52, 60, key="small again", same_as="small"),
        _infilling_case(53, 60, key="other", differs_from="small"),
        _infilling_case(54, 40, mask_id=3, mask_ratio=0.5),
        # Half the tokens covered: spans often touch, and each must still get its own mask.
        *_pool("half", 5500, 6, 1000, mask_ratio=0.5),
        # round(0.3 * 15) = round(4.5) = 4 (Python rounds a half to even) and round(0.3 * 12) = round(3.6) = 4:
        # int(), floor and rounding half up each miss one of them.
        _infilling_case(57, 15),
        _infilling_case(58, 12),
        # 3 tokens to cover at lengths that are 0 all but once in 5,000 draws: every gap, the two ends
        # included, receives inserted masks (see _rule_insertion_gaps).
        _infilling_case(56, 40, mask_ratio=0.075, poisson_lambda=0.0002, gaps=True),
    ]
    # Where the spans fall: one call covers an end or not, so many short calls (see _rule_edge_coverage).
    cases += [_infilling_case(1000 + i, EDGE_N, mask_ratio=EDGE_RATIO, edge=(i, EDGE_CALLS)) for i in range(EDGE_CALLS)]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            *_pool("hidden half", salt + 1500, 4, 1000, mask_ratio=0.5),
            _infilling_case(salt + 151, 3000, mask_ratio=0.15, poisson_lambda=2.0, mask_id=0, statistics=True),
            _infilling_case(salt + 152, 20, mask_ratio=0.0),
            _infilling_case(salt + 153, 1),
            _infilling_case(salt + 154, 30, mask_ratio=1.0),
            _infilling_case(salt + 155, 40, mask_ratio=0.075, poisson_lambda=0.0002, gaps=True),
        ]
    return cases


def _align(out, n, mask_id):
    """Runs of masks between kept tokens: [(masks, removed tokens)], or a problem string."""
    kept = out[out != mask_id]
    if kept.size and (np.any(np.diff(kept) <= 0) or kept.min() < FIRST_ID or kept.max() >= FIRST_ID + n):
        if kept.min() < FIRST_ID or kept.max() >= FIRST_ID + n:
            bad = kept[(kept < FIRST_ID) | (kept >= FIRST_ID + n)][0]
            return f"the output contains {bad}, which is neither the mask id nor a token of the input"
        return ("the tokens that are not masked are out of their original order or repeated; text "
                "infilling only replaces spans, it never moves tokens")
    runs, masks, previous = [], 0, -1
    for value in out.tolist() + [None]:
        if value == mask_id:
            masks += 1
            continue
        index = n if value is None else value - FIRST_ID
        if value is not None and not 0 <= index < n:
            return f"the output contains {value}, which is neither the mask id nor a token of the input"
        if index <= previous:
            return ("the tokens that are not masked are out of their original order or repeated; text "
                    "infilling only replaces spans, it never moves tokens")
        removed = index - previous - 1
        if masks or removed:
            runs.append((masks, removed))
        if removed and not masks:
            first = FIRST_ID + previous + 1
            return (f"tokens {first}..{first + removed - 1} were removed without a mask in their place; "
                    f"every span must leave one mask token (removing it silently is token deletion)")
        masks, previous = 0, index
    return runs


def _rule_one_integer_sequence(case, got, memory):
    problem = expect_integer_array(got, "the result")
    if problem:
        return problem
    if got.ndim != 1:
        return f"the result has shape {got.shape}, expected one sequence (1-D)"
    return None


def _runs(case, got):
    """(masks, removed tokens) for each run of masks, or the sentence saying why there is none."""
    d = case.data
    return _align(got, d["n"], d["mask_id"])


def _rule_tokens_kept_in_order(case, got, memory):
    runs = _runs(case, got)
    return runs if isinstance(runs, str) else None


def _rule_same_seed(case, got, memory):
    return _seed_problem(case, (got,), memory)


def _rule_edge_ratios(case, got, memory):
    runs, (n, ratio) = _runs(case, got), (case.data["n"], case.data["ratio"])
    removed, masks = sum(r for _, r in runs), sum(m for m, _ in runs)
    if ratio == 0.0 and (removed or masks):
        return "with mask_ratio=0 nothing may be removed and no mask inserted"
    if ratio == 1.0 and removed != n:
        return f"with mask_ratio=1 every token must be covered, but {n - removed} remain"
    target = round(ratio * n)
    if removed != target:
        problem = f"{removed} of the {n} tokens were removed, expected exactly round(mask_ratio * n) = {target}"
        if ratio != 0.3 and removed == round(0.3 * n):
            return f"{problem}: that is round(0.3 * n), as if mask_ratio were ignored (use the argument)"
        if removed == math.floor(ratio * n):
            return (f"{problem}: that is int(mask_ratio * n) = {removed}, rounded down; use round(), which gives "
                    f"{target} for {ratio * n:g}")
        if removed == math.floor(ratio * n + 0.5):
            return (f"{problem}: that is {ratio * n:g} rounded half up; Python's round() (and np.round) take a half "
                    f"to the even neighbour, round({ratio * n:g}) = {target}")
        if removed > target:
            if "statistics" in case.tags and _inserted_share(runs) < _fewest_insertions(case.data["lam"], ratio):
                return (f"{problem}, and hardly a mask was inserted without removing a token: it looks as if a "
                        f"zero-length span replaced a token, but it inserts one mask and removes nothing")
            return f"{problem}: draw spans until that many are covered, cutting the last length to what is still to cover"
        return (f"{problem}: draw spans until that many are covered; spans never overlap (a span over tokens "
                f"already covered covers nothing new), so draw the start again when one would")
    return None


def _rule_span_statistics(case, got, memory):
    if "statistics" not in case.tags:
        return None
    runs, d = _runs(case, got), case.data
    pool = d.get("pool")
    if pool is None:
        return _span_statistics_problem([runs], d["lam"], d["ratio"])
    name, _, size = pool
    calls = memory.pools.setdefault(name, [])
    calls.append(runs)
    if len(calls) < size:
        return None
    problem = _span_statistics_problem(calls, d["lam"], d["ratio"])
    return problem and f"over the {size} calls on {d['n']} tokens judged together, {problem}"


def _span_statistics_problem(calls, lam, ratio):
    """What is wrong with the spans of these calls (each a list of runs, from _runs), all at the same
    poisson_lambda and mask_ratio, or None."""
    runs = [run for call in calls for run in call]
    removed, masks = sum(r for _, r in runs), sum(m for m, _ in runs)
    # How many are removed is _rule_edge_ratios's business (exactly round(mask_ratio * n)), tried before.
    mean_length = removed / max(1, masks)
    if lam >= 2 and mean_length < 1.3:
        return (f"each mask stands for {mean_length:.2f} tokens on average: it looks as if every removed "
                f"token got its own mask, but a whole span, however long, becomes ONE mask token")
    if not 0.8 * lam <= mean_length <= 1.17 * lam:
        longer = (" (or two spans that touch were given one mask between them: each span gets its own mask, "
                  "even next to another)") if mean_length > lam else ""
        return (f"spans are {mean_length:.2f} tokens long on average (zero-length spans included), expected "
                f"about poisson_lambda = {lam}: draw each length with rng.poisson(poisson_lambda){longer}")
    # Spans alone between kept tokens show their lengths; Poisson lengths vary (P(L = 1 | L >= 1) is 0.58 at
    # lambda = 1, its highest here: 50 equal ones by chance about 1e-12).
    alone = {r for m, r in runs if m == 1 and r}
    if len(alone) == 1 and sum(1 for m, r in runs if m == 1 and r) >= 50:
        return (f"every span is {alone.pop()} tokens long: draw each length with rng.poisson(poisson_lambda), "
                f"so that lengths vary (0 included)")
    side = _draw_count_side([(sum(m for m, _ in call), sum(r for _, r in call)) for call in calls], lam)
    if side == "high":
        return (f"{masks} masks for {removed} covered tokens, spans of {mean_length:.3f} tokens on average: more "
                f"spans than Poisson({lam}) lengths give (below one chance in a million); it matches a length drawn "
                f"again when a span would overlap an earlier one, which favours short spans: keep the length and "
                f"draw only the start again")
    if side == "low":
        return (f"{masks} masks for {removed} covered tokens, spans of {mean_length:.3f} tokens on average: fewer "
                f"spans than Poisson({lam}) lengths give (below one chance in a million): draw each length with "
                f"rng.poisson(poisson_lambda) (or two spans that touch were given one mask between them: each span "
                f"gets its own mask, even next to another)")
    zero = _inserted_share(runs)
    if zero < _fewest_insertions(lam, ratio):
        return (f"only {zero:.3f} of the masks were inserted where nothing was removed, expected about "
                f"{math.exp(-lam):.3f} (the probability of a Poisson({lam}) length of 0): a span of length 0 "
                f"must still insert one mask token")
    if zero > min(0.6, 2.5 * math.exp(-lam)):
        return (f"{zero:.3f} of the masks were inserted where nothing was removed, expected about "
                f"{math.exp(-lam):.3f} (the probability of a Poisson({lam}) length of 0)")
    return None


def _inserted_share(runs):
    """The share of masks seen to be inserted: a mask run with fewer removed tokens than masks holds at least
    (masks - removed) zero-length spans. The count misses insertions next to a span, more the more is covered."""
    return sum(max(0, m - r) for m, r in runs) / max(1, sum(m for m, _ in runs))


def _fewest_insertions(lam, ratio):
    """Below this share of inserted masks, zero-length spans are missing (expected about exp(-lam), fewer seen
    the more is covered)."""
    return 0.2 * math.exp(-lam) * (1 - ratio) ** 2


def _poisson_cdf(k, means):
    """P(X <= k) for X ~ Poisson(mean), for each of `means` (an array), summed exactly from log-probabilities."""
    means = np.asarray(means, dtype=float)
    j = np.arange(k + 1)
    log_factorial = np.array([math.lgamma(x + 1) for x in j])
    with np.errstate(divide="ignore", invalid="ignore"):  # a mean of 0: log 0 = -inf, and 0 * -inf is NaN
        log_pmf = j[None, :] * np.log(means)[:, None] - means[:, None] - log_factorial[None, :]
    log_pmf[:, 0] = -means  # j = 0: the term is exp(-mean), whatever the mean
    return np.exp(log_pmf).sum(axis=1)


def _draw_count_pmf(covered, lam):
    """The distribution of M, the number of draws text_infilling makes to cover `covered` tokens: [P(M = m)] for
    m = 0, 1, ... Every draw of a length leaves one mask (a span's, or an inserted one), and the lengths are
    i.i.d. Poisson(lam) until `covered` is reached (the last one cut to what is left). The sum of m draws is
    Poisson(m * lam), so M >= m exactly when the first m - 1 draws sum to less than `covered`:
    P(M >= m) = P(Poisson((m - 1) lam) <= covered - 1)."""
    if covered == 0:
        return np.array([1.0])
    most = int((covered + 10 * math.sqrt(covered) + 50) / lam) + 2  # P(M >= most) below 1e-20
    at_least = np.concatenate([[1.0], _poisson_cdf(covered - 1, lam * np.arange(0, most + 1))])  # P(M >= m)
    return np.clip(at_least[:-1] - at_least[1:], 0.0, None)


def _draw_count_side(calls, lam):
    """"high" or "low" if the number of draws over `calls`, (masks, covered tokens) of each, is that far out for
    Poisson(lam) lengths, else None. Each call's count of draws is its number of masks, distributed exactly as
    _draw_count_pmf says, the calls independent: their total is the convolution. Each side alarms below
    core.ALARM / 2. (A stretch too short for its length, which shortens a span, is rare below half the tokens
    covered: measured in tests/test_grading_bart.py.)"""
    calls = [(masks, covered) for masks, covered in calls if covered]
    if not calls or lam <= 0:
        return None
    total = np.array([1.0])
    for _, covered in calls:
        total = np.convolve(total, _draw_count_pmf(covered, lam))
    masks = sum(m for m, _ in calls)
    high = total[masks:].sum() if masks < len(total) else 0.0  # P(as many draws or more)
    low = total[:masks + 1].sum()
    if high < ALARM / 2:
        return "high"
    if low < ALARM / 2:
        return "low"
    return None


def _rule_insertion_gaps(case, got, memory):
    """Inserted masks fall on each of the n + 1 gaps alike, before the first token and after the last included.

    The masks before a kept first token (after a kept last one) are all insertions at that end. Given M
    insertions, their number there is Binomial(M, 1 / (n + 1)); M is at least the masks minus the removed
    tokens, and a smaller M only makes a low count likelier, so that bound keeps the exact tail
    (core.unlikely_count) below core.ALARM = 1e-6 for an honest answer.
    """
    if "gaps" not in case.tags:
        return None
    n, mask_id = case.data["n"], case.data["mask_id"]
    kept = np.flatnonzero(got != mask_id)
    runs = _runs(case, got)
    inserted = sum(m for m, _ in runs) - sum(r for _, r in runs)
    if not len(kept) or inserted <= 0:
        return None
    ends = (("before the first token", "rng.integers(0, n + 1) gives 0", got[kept[0]] == FIRST_ID, kept[0]),
            ("after the last token", "rng.integers(0, n + 1) gives n, the end", got[kept[-1]] == FIRST_ID + n - 1,
             len(got) - 1 - kept[-1]))
    for where, how, applies, count in ends:
        if applies and unlikely_count(count, inserted, 1 / (n + 1)) == "low":
            return (f"{count} of at least {inserted} inserted masks landed {where}, where about 1 in {n + 1} "
                    f"should: a zero-length span's gap is drawn from all n + 1 gaps ({how})")
    return None


@functools.lru_cache(maxsize=None)
def edge_coverage(n, ratio, lam):
    """(P(the first token is covered), P(the last one is)) for text_infilling as specified, exactly.

    The covered tokens are a Markov chain over sets (bit masks, fine for a dozen tokens): a zero length changes
    nothing, so each step is a length L >= 1 (Poisson conditioned on L >= 1, cut to what is left to cover),
    shrunk until a free stretch fits it, and a start drawn alike among the free ones."""
    to_cover = int(round(ratio * n))
    pmf = [math.exp(-lam + k * math.log(lam) - math.lgamma(k + 1)) for k in range(to_cover + 1)]
    chances, finished = {0: 1.0}, {}
    for covered in range(to_cover):  # each step covers at least one more token
        following = {}
        for mask, chance in chances.items():
            if bin(mask).count("1") != covered:
                following[mask] = following.get(mask, 0.0) + chance
                continue
            left = to_cover - covered
            for length in range(1, left + 1):
                drawn = (pmf[length] if length < left else 1.0 - sum(pmf[:left])) / (1.0 - pmf[0])
                fits = length
                while not (starts := [s for s in range(n - fits + 1) if not mask >> s & (1 << fits) - 1]):
                    fits -= 1
                for start in starts:
                    after = mask | (1 << fits) - 1 << start
                    target = finished if bin(after).count("1") >= to_cover else following
                    target[after] = target.get(after, 0.0) + chance * drawn / len(starts)
        chances = following
    return (sum(c for mask, c in finished.items() if mask & 1),
            sum(c for mask, c in finished.items() if mask >> (n - 1) & 1))


class _InfillingMemory(_Memory):
    def __init__(self):
        super().__init__()
        self.edges = []  # (first token covered, last token covered) of each call of the edge group, in order
        self.pools = {}  # a pool's name -> the runs of each of its calls so far (_rule_span_statistics)


EDGE_CAUSES = {
    ("last", "low"): "a span ends at the last token too rarely: n - L is a start too (rng.integers(0, n - L + 1))",
    ("last", "high"): ("spans pile up at the end, as when a start past n - L is moved back to n - L: draw the start "
                       "again, or alike among the free starts"),
    ("first", "low"): "a span starts at the first token too rarely: 0 is a start too",
    ("first", "high"): ("spans pile up at the start, as when a start before 0 is moved up to 0: draw the start "
                        "alike among the free starts"),
}


def _rule_edge_coverage(case, got, memory):
    """Over EDGE_CALLS calls (other seeds), the first and the last token are each covered Binomial(calls, p) times,
    p exact (edge_coverage); each end and side alarms below core.ALARM / 2 for an honest answer."""
    edge = case.data.get("edge")
    if edge is None:
        return None
    n, mask_id = case.data["n"], case.data["mask_id"]
    kept = set(np.asarray(got)[np.asarray(got) != mask_id].tolist())
    memory.edges.append((FIRST_ID not in kept, FIRST_ID + n - 1 not in kept))
    if edge[0] + 1 < edge[1] or len(memory.edges) < edge[1]:
        return None
    calls = memory.edges[-edge[1]:]
    for index, (end, p) in enumerate(zip(("first", "last"), edge_coverage(n, case.data["ratio"], case.data["lam"]))):
        seen = sum(call[index] for call in calls)
        side = unlikely_count(seen, len(calls), p)
        if side:
            return (f"over {len(calls)} calls on {n} tokens with mask_ratio={case.data['ratio']}, the {end} token was "
                    f"covered {seen} times, expected about {p * len(calls):.0f} (starts drawn alike among the free "
                    f"ones cover it in {p:.3f} of the calls): {EDGE_CAUSES[end, side]}")
    return None


# Tried in order; the first rule that finds a problem gives the verdict.
INFILLING_RULES = [
    ("one integer sequence", _rule_one_integer_sequence),
    ("the tokens that stay keep their order, each span is one mask", _rule_tokens_kept_in_order),
    ("the same seed gives the same answer, another seed another", _rule_same_seed),
    ("mask_ratio 0 and 1, and exactly round(mask_ratio * n) tokens covered", _rule_edge_ratios),
    ("span lengths drawn from Poisson(poisson_lambda), zero-length spans included", _rule_span_statistics),
    ("inserted masks at every gap, both ends included", _rule_insertion_gaps),
    ("spans start alike at every free start, both ends included", _rule_edge_coverage),
]


check_text_infilling = Spec(
    declared.check_text_infilling,
    cases=_infilling_cases,
    reference=lambda case: None,
    judge=judge_by_rules(INFILLING_RULES),
    seal=INFILLING_SEAL,
    memory=_InfillingMemory,
    clauses=(
        ("mask_ratio not passed: 0.3", lambda c: "mask_ratio" not in c.kwargs),
        ("mask_ratio passed", lambda c: "mask_ratio" in c.kwargs),
        ("poisson_lambda not passed: 3.0", lambda c: "poisson_lambda" not in c.kwargs),
        ("poisson_lambda passed", lambda c: "poisson_lambda" in c.kwargs),
        ("spans of length Poisson(poisson_lambda) until round(mask_ratio * n) tokens are covered",
         lambda c: "statistics" in c.tags),
        ("... round(): a half to even", lambda c: (c.data["ratio"] * c.data["n"]) % 1 == 0.5),
        ("... round(), not int()", lambda c: 0.5 < (c.data["ratio"] * c.data["n"]) % 1 < 1),
        ("... the length drawn once: an overlap draws only the start again", lambda c: "statistics" in c.tags),
        ("a span of length 0 inserts one mask at a random gap", lambda c: "statistics" in c.tags),
        ("... any of the n + 1 gaps: before token g, or at the end", lambda c: "gaps" in c.tags),
        ("a start drawn alike among the free ones, 0 and n - L included", lambda c: "edge" in c.data),
        ("spans do not overlap, and each is replaced by its own mask_id", lambda c: c.data["ratio"] >= 0.5),
        ("every random number from rng: the same seed gives the same output", lambda c: "same_as" in c.data),
        ("... and not from a generator of its own: another seed gives another", lambda c: "differs_from" in c.data),
    ),
)


# ============================================================================
# prefix_lm_mask(n, prefix_len) and permutation_mask(order), NumPy bool

PREFIX_SEAL = [(ref.prefix_lm_mask, "plmcourse.ref.prefix_lm_mask")]
PERMUTATION_SEAL = [(ref.permutation_mask, "plmcourse.ref.permutation_mask")]


def _prefix_cases(hidden):
    sizes = [(6, 3), (4, 0), (4, 4), (1, 0), (1, 1), (5, 2)]
    if hidden:
        sizes += [(13, 5), (32, 10), (6, 6), (6, 1), (9, 8)]
    return [Case(f"n={n}, prefix_len={p}", (n, p), data={"n": n, "p": p}) for n, p in sizes]


def _prefix_mistakes(n, p):
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    causal = j <= i
    yield ("a prefix position sees the target, but only the target looks at the prefix, not the other way round",
           lambda: (causal | (j < p) | (i < p),))
    yield "a plain causal mask: prefix_len is ignored", lambda: (causal,)
    yield "True above the diagonal: the mask is transposed", lambda: ((j >= i) | (i < p),)
    yield ("a prefix of prefix_len - 1 positions: positions 0..prefix_len-1 are the prefix",
           lambda: (causal | (j < p - 1),))
    yield "a prefix of prefix_len + 1 positions", lambda: (causal | (j < p + 1),)
    yield ("the diagonal is False, but a position may attend to itself",
           lambda: ((j < i) | ((j < p) & (i < p)) | ((j < p) & (i >= p)),))
    yield ("an inverted mask: True marks the blocked positions, but in this course True means allowed",
           lambda: (~(causal | (j < p)),))
    yield "a mask that blocks nothing (all True)", lambda: (np.ones((n, n), dtype=bool),)
    yield ("the target positions do not see the prefix: every position after it sees the whole prefix (the "
           "source) and the target up to itself", lambda: (((i < p) & (j < p)) | ((i >= p) & (j >= p) & causal),))
    yield ("True above the diagonal in the causal part (np.triu instead of np.tril): a target position sees the "
           "prefix and the target positions up to itself, never later ones", lambda: ((j >= i) | (j < p),))


check_prefix_lm_mask = Spec(
    declared.check_prefix_lm_mask,
    cases=_prefix_cases,
    reference=lambda case: ref.prefix_lm_mask(case.data["n"], case.data["p"]),
    judge=lambda case, got, expected: judge_bool_mask(got, expected,
                                                            _prefix_mistakes(case.data["n"], case.data["p"])),
    seal=PREFIX_SEAL,
    clauses=(
        ("i attends to j when j < prefix_len or j <= i; no prefix position sees the target",
         lambda c: 0 < c.data["p"] < c.data["n"]),
        ("prefix_len = 0 gives the causal mask", lambda c: c.data["p"] == 0),
        ("prefix_len = n gives the full mask", lambda c: c.data["p"] == c.data["n"]),
    ),
)


def _permutation_cases(hidden):
    orders = [[3, 0, 4, 1, 2], [0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [1, 3, 0, 5, 2, 4], [0]]
    if hidden:
        rng = np.random.default_rng(160 + hidden_salt(hidden))
        orders += [rng.permutation(10).tolist(), rng.permutation(16).tolist(), [1, 0], [3, 1, 4, 0, 2]]
    return [Case(f"order={order}", (np.array(order),), data={"order": np.array(order)}) for order in orders]


def _permutation_mistakes(order):
    n = len(order)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    step = np.arange(n)
    yield ("position i also sees itself; predicting x_i, the query stream must not see x_i (seeing itself is "
           "the content stream)", lambda: (rank[None, :] <= rank[:, None],))
    yield ("order used as if order[i] were the step of position i; order[t] is the position predicted at "
           "step t, so the step of position i is its place in order (invert the permutation)",
           lambda: (order[None, :] < order[:, None],))
    yield ("rows and columns indexed by step in the order instead of by position; mask[i, j] is about "
           "positions i and j", lambda: (step[None, :] < step[:, None],))
    yield ("row t filled with what the t-th step sees instead of row order[t]: row i belongs to position i, so "
           "the t-th step's row is order[t] (the columns are right)", lambda: (rank[None, :] < step[:, None],))
    yield ("column t filled for the t-th step instead of column order[t]: column j belongs to position j, so a "
           "row sees the columns order[s] of the earlier steps s (the rows are right)",
           lambda: (step[None, :] < rank[:, None],))
    yield "the mask is transposed: row i must list what position i may see", lambda: (rank[None, :] > rank[:, None],)
    yield ("an inverted mask: True marks the blocked positions, but in this course True means allowed",
           lambda: (~(rank[None, :] < rank[:, None]),))


check_permutation_mask = Spec(
    declared.check_permutation_mask,
    cases=_permutation_cases,
    reference=lambda case: ref.permutation_mask(case.data["order"]),
    judge=lambda case, got, expected: judge_bool_mask(got, expected,
                                                            _permutation_mistakes(case.data["order"])),
    seal=PERMUTATION_SEAL,
    clauses=(
        ("order[t] is the position predicted at step t: i sees j when j comes strictly earlier in the order",
         lambda c: not np.array_equal(c.data["order"], np.arange(len(c.data["order"])))),
        ("a position never sees itself, and the first in the order sees nothing", lambda c: True),
    ),
)
