"""Right and wrong answers to the two exercises of notebook 11 (k_shot_prompt, induction_score), as data
for tests/test_grading_icl.py.

CORRECT: (name, function) pairs that must pass, written in different styles; MISTAKES:
(name, function, fragment): the check must fail with a message containing `fragment`.
Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import copy

import numpy as np
import torch

from plmcourse import data
from plmcourse import ref


# ============================================================================
# k_shot_prompt(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None) -> str


def prompt_notebook(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """The notebook's answer."""
    n = len(demonstrations)
    if not 0 <= k <= n - 1:
        raise ValueError(f"k={k}: there are {n - 1} demonstrations besides the query.")
    if "{x}" not in template or template.find("{y}") < template.find("{x}"):
        raise ValueError(f"the template {template!r} needs {{x}}, then {{y}}.")
    rng = np.random.default_rng() if rng is None else rng
    others = np.delete(np.arange(n), query)
    chosen = rng.choice(others, size=k, replace=False)
    parts = [template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in chosen]
    parts.append(template[:template.index("{y}")].format(x=demonstrations[query][0]))
    return separator.join(parts)


def prompt_loop(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """Positions among the others drawn, mapped back past the query; a string built with +=."""
    if k < 0 or k >= len(demonstrations):
        raise ValueError("k out of range")
    x_at, y_at = template.find("{x}"), template.find("{y}")
    if x_at < 0 or y_at < x_at:
        raise ValueError("the template must hold {x} and then {y}")
    if rng is None:
        rng = np.random.default_rng()
    picks = rng.choice(len(demonstrations) - 1, size=k, replace=False)
    prompt = ""
    for j in picks:
        i = j + 1 if j >= query else j
        x, y = demonstrations[i]
        prompt += template.replace("{x}", x).replace("{y}", y) + separator
    return prompt + template.split("{y}")[0].replace("{x}", demonstrations[query][0])


def prompt_lists(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """A list of the others, str.partition, and rng=None handled with `or`."""
    rng = rng or np.random.default_rng()
    others = [i for i in range(len(demonstrations)) if i != query]
    if k not in range(len(others) + 1):
        raise ValueError(f"k must be in 0..{len(others)}")
    if "{y}" not in template.partition("{x}")[2]:
        raise ValueError("{y} must come after {x} in the template")
    shown = [template.format(x=demonstrations[int(i)][0], y=demonstrations[int(i)][1])
             for i in rng.choice(others, k, replace=False)]
    head, _, _ = template.partition("{y}")
    return separator.join([*shown, head.format(x=demonstrations[query][0])])


def prompt_remove(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """others by list.remove; relies on rng.choice's own ValueError for k = n (and a check for k < 0)."""
    if k < 0:
        raise ValueError("k must not be negative")
    if not 0 <= template.index("{x}") < template.index("{y}"):  # str.index raises ValueError when one is missing
        raise ValueError("{x} must come before {y}")
    rng = np.random.default_rng() if rng is None else rng
    others = list(range(len(demonstrations)))
    others.remove(query)
    chosen = rng.choice(np.array(others), size=k, replace=False).tolist()
    x_query = demonstrations[query][0]
    query_text = template[:template.find("{y}")].format(x=x_query)
    return separator.join([template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in chosen]
                          + [query_text])


PROMPT_CORRECT = [
    ("the notebook's answer", prompt_notebook),
    ("drawn among n - 1 positions, built with +=", prompt_loop),
    ("a list of others, str.partition, rng or default_rng()", prompt_lists),
    ("list.remove, numpy's own ValueError for k = n", prompt_remove),
]


def _prompt_with(*, pool=None, draw=None, count=None, query_part=None, join=None, check_k=True, generator=None,
                 check_template=True):
    """A variant of the notebook's answer; each switch replaces one step:
    pool(n, query) -> the indices drawn from; draw(rng, pool, k) -> the chosen indices;
    count(k, n) -> how many to draw; query_part(template, x, y) -> the query's text;
    join(parts, query_text, separator) -> the prompt; generator(rng) -> the generator used."""
    def answer(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
        n = len(demonstrations)
        if check_k and not 0 <= k <= n - 1:
            raise ValueError(f"k={k} out of range")
        if check_template and not 0 <= template.find("{x}") < template.find("{y}"):
            raise ValueError("{x} then {y}")
        rng = np.random.default_rng() if rng is None else rng
        if generator is not None:
            rng = generator(rng)
        others = np.delete(np.arange(n), query) if pool is None else pool(n, query, demonstrations)
        size = k if count is None else count(k, n)
        chosen = rng.choice(others, size=size, replace=False) if draw is None else draw(rng, others, size)
        parts = [template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in chosen]
        x, y = demonstrations[query]
        text = template[:template.index("{y}")].format(x=x) if query_part is None else query_part(template, x, y)
        return separator.join(parts + [text]) if join is None else join(parts, text, separator)
    return answer


def prompt_global_random(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """np.random.choice: the global generator, whatever rng says."""
    if not 0 <= k < len(demonstrations):
        raise ValueError("k")
    others = np.delete(np.arange(len(demonstrations)), query)
    chosen = np.random.choice(others, size=k, replace=False)
    parts = [template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in chosen]
    return separator.join(parts + [template[:template.index("{y}")].format(x=demonstrations[query][0])])


def prompt_query_by_format(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """The whole template formatted with x only: KeyError 'y'."""
    rng = np.random.default_rng() if rng is None else rng
    chosen = rng.choice(np.delete(np.arange(len(demonstrations)), query), size=k, replace=False)
    parts = [template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in chosen]
    return separator.join(parts + [template.format(x=demonstrations[query][0])])


def prompt_no_default_rng(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """rng=None not handled."""
    if not 0 <= k < len(demonstrations):
        raise ValueError("k")
    chosen = rng.choice(np.delete(np.arange(len(demonstrations)), query), size=k, replace=False)
    parts = [template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in chosen]
    return separator.join(parts + [template[:template.index("{y}")].format(x=demonstrations[query][0])])


def prompt_index_error(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    if not 0 <= k < len(demonstrations):
        raise IndexError(f"k={k}")
    return prompt_notebook(demonstrations, query, k, template, separator, rng)


def prompt_off_by_one(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """k = len - 1 refused."""
    if not 0 <= k < len(demonstrations) - 1:
        raise ValueError(f"k={k} is too large")
    return prompt_notebook(demonstrations, query, k, template, separator, rng)


def prompt_parts(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """The parts, not joined."""
    return prompt_notebook(demonstrations, query, k, template, separator, rng).split(separator or None)


def prompt_course(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    return data.k_shot_prompt(demonstrations, query, k, template, separator, rng)


def _shuffled(rng, others, k):
    others = list(others)
    rng.shuffle(others)
    return others[:k]


PROMPT_MISTAKES = [
    ("the query leaked (drawn from every index)", _prompt_with(pool=lambda n, q, d: np.arange(n)),
     "the query drawn as a demonstration"),
    ("drawn with replacement", _prompt_with(draw=lambda rng, others, k: rng.choice(others, size=k)),
     "drawn with replacement"),
    ("k ignored: every other example", _prompt_with(count=lambda k, n: n - 1), "k ignored"),
    ("k ignored: always three", _prompt_with(count=lambda k, n: min(3, n - 1)),
     "the prompt holds 3 demonstrations, where k=6 asks for 6"),
    ("k + 1 demonstrations", _prompt_with(count=lambda k, n: min(k + 1, n - 1)),
     "the prompt holds 7 demonstrations, where k=6 asks for 6"),
    ("sorted indices", _prompt_with(draw=lambda rng, others, k: np.sort(rng.choice(others, size=k, replace=False))),
     "sorted by index"),
    ("others after the query first", _prompt_with(pool=lambda n, q, d: [*range(q + 1, n), *range(q)]),
     "the indices drawn from in another order"),
    ("others in decreasing order", _prompt_with(pool=lambda n, q, d: [i for i in range(n - 1, -1, -1) if i != q]),
     "the indices drawn from in decreasing order"),
    ("examples equal to the query's pair left out",
     _prompt_with(pool=lambda n, q, d: [i for i in range(n) if tuple(d[i]) != tuple(d[q])]),
     "only the query's INDEX is excluded"),
    ("examples with the query's x left out",
     _prompt_with(pool=lambda n, q, d: [i for i in range(n) if d[i][0] != d[q][0]]),
     "the examples with the query's x left out too"),
    ("the query with its answer", _prompt_with(query_part=lambda template, x, y: template.format(x=x, y=y)),
     "the query written with its answer"),
    ("the query with y=\"\"", _prompt_with(query_part=lambda template, x, y: template.format(x=x, y="")),
     "the query written with y=\"\""),
    ("the query's part stripped",
     _prompt_with(query_part=lambda template, x, y: template.split("{y}")[0].format(x=x).strip()),
     "stripped of its trailing whitespace"),
    ("a separator after the query", _prompt_with(join=lambda parts, q, sep: "".join(p + sep for p in parts + [q])),
     "a separator after the query too"),
    ("a separator before the first part", _prompt_with(join=lambda parts, q, sep: sep + sep.join(parts + [q])),
     "a separator in front of the first part"),
    ("a separator before a lone query", _prompt_with(join=lambda parts, q, sep: sep.join(parts) + sep + q),
     "a separator in front of the query although no demonstration comes before it"),
    ("no separator before the query", _prompt_with(join=lambda parts, q, sep: sep.join(parts) + q),
     "no separator between the last demonstration and the query"),
    ("the query first", _prompt_with(join=lambda parts, q, sep: sep.join([q] + parts)), "the query first"),
    ("rng.permutation", _prompt_with(draw=lambda rng, others, k: rng.permutation(others)[:k]),
     "the spec's draw is rng.choice(others, size=k, replace=False)"),
    ("rng.shuffle", _prompt_with(draw=_shuffled), "the spec's draw is rng.choice(others, size=k, replace=False)"),
    ("rng.integers", _prompt_with(draw=lambda rng, others, k: np.asarray(others)[rng.integers(len(others), size=k)]),
     "drawn with replacement (rng.choice without replace=False, or rng.integers)"),
    ("rng.choice without shuffling",
     _prompt_with(draw=lambda rng, others, k: rng.choice(others, size=k, replace=False, shuffle=False)),
     "but not the ones rng.choice(others, size=k, replace=False) draws from the rng passed"),
    ("the first k, no draw", _prompt_with(draw=lambda rng, others, k: others[:k]), "not drawn at all"),
    ("a fresh generator instead of rng", _prompt_with(generator=lambda rng: np.random.default_rng()),
     "ignore the rng argument"),
    ("the global np.random", prompt_global_random, "ignore the rng argument"),
    ("k clipped into range, no ValueError", _prompt_with(count=lambda k, n: min(max(k, 0), n - 1), check_k=False),
     "so your function must raise ValueError, but it returned"),
    ("IndexError for k out of range", prompt_index_error, "must raise ValueError, but it raised IndexError"),
    ("k = len - 1 refused", prompt_off_by_one, "raise ValueError only outside that range"),
    ("the whole template formatted for the query", prompt_query_by_format, "your function raised KeyError"),
    ("rng=None not handled", prompt_no_default_rng, "rng = np.random.default_rng() if rng is None else rng"),
    ("the parts not joined", prompt_parts, "expected one str: join the parts"),
    ("bytes", lambda *args, **kwargs: prompt_notebook(*args, **kwargs).encode(), "the result is a bytes"),
    ("calls the course's version", prompt_course, "calls plmcourse.data.k_shot_prompt"),
    ("a template with {y} first accepted", _prompt_with(check_template=False),
     "does not have {x} before {y} (the query's part, cut just before {y}, would not show its x), so your function "
     "must raise ValueError, but it returned"),
    ("a copy of rng drawn from", _prompt_with(generator=copy.deepcopy),
     "the rng passed in is not where one call of rng.choice(others, size=k, replace=False) leaves it"),
]


# ============================================================================
# induction_score(attention, tokens) -> (H,), NumPy


def induction_notebook(attention, tokens):
    """The notebook's answer."""
    attention = np.asarray(attention, dtype=np.float64)
    last_seen, queries, targets = {}, [], []
    for t, token in enumerate(np.asarray(tokens).tolist()):
        if token in last_seen:
            queries.append(t)
            targets.append(last_seen[token] + 1)
        last_seen[token] = t
    if not queries:
        return np.zeros(attention.shape[0])
    return attention[:, queries, targets].mean(axis=-1)


def induction_backwards(attention, tokens):
    """For each t, search backwards for the latest equal token; per head in a loop."""
    tokens = np.asarray(tokens)
    H, T, _ = attention.shape
    scores = np.zeros(H)
    pairs = []
    for t in range(T):
        for s in range(t - 1, -1, -1):
            if tokens[s] == tokens[t]:
                pairs.append((t, s + 1))
                break
    for h in range(H):
        if pairs:
            scores[h] = sum(float(attention[h, t, j]) for t, j in pairs) / len(pairs)
    return scores


def induction_vectorised(attention, tokens):
    """Equal-token matrix, strictly lower part, the last True of each row; kept in the input's dtype."""
    tokens = np.asarray(tokens)
    T = len(tokens)
    same = np.tril(tokens[:, None] == tokens[None, :], k=-1)  # (T, T): s < t with the same token
    has = same.any(axis=1)
    latest = T - 1 - np.argmax(same[:, ::-1], axis=1)
    if not has.any():
        return np.zeros(attention.shape[0], dtype=attention.dtype)
    t = np.flatnonzero(has)
    return np.mean(attention[:, t, latest[t] + 1], axis=1)


def induction_einsum(attention, tokens):
    """A (T, T) selection matrix, one 1 per counted query, and an einsum."""
    tokens = list(np.asarray(tokens).tolist())
    T = len(tokens)
    select = np.zeros((T, T))
    for t in range(1, T):
        earlier = [s for s in range(t) if tokens[s] == tokens[t]]
        if earlier:
            select[t, earlier[-1] + 1] = 1.0
    n = select.sum()
    return np.einsum("htk,tk->h", attention, select) / n if n else np.zeros(len(attention))


INDUCTION_CORRECT = [
    ("the notebook's answer", induction_notebook),
    ("a backwards search, a loop over heads", induction_backwards),
    ("vectorised, in the input's dtype", induction_vectorised),
    ("a selection matrix and einsum", induction_einsum),
]


def _pairs(tokens, which="latest"):
    """(t, s) for each t with an equal earlier token; which: "latest" or "first"."""
    tokens = np.asarray(tokens).tolist()
    found = []
    for t, token in enumerate(tokens):
        earlier = [s for s in range(t) if tokens[s] == token]
        if earlier:
            found.append((t, earlier[-1] if which == "latest" else earlier[0]))
    return found


def _induction_with(*, which="latest", key=lambda t, s: s + 1, swap=False, reduce="mean", empty="zeros",
                    skip_adjacent=False):
    def answer(attention, tokens):
        H = attention.shape[0]
        pairs = [(t, s) for t, s in _pairs(tokens, which) if not (skip_adjacent and s + 1 == t)]
        if not pairs:
            return np.zeros(H) if empty == "zeros" else np.full(H, np.nan)
        t = np.array([p[0] for p in pairs])
        j = np.array([key(p[0], p[1]) for p in pairs])
        values = attention[:, j, t] if swap else attention[:, t, j]  # (H, n)
        if reduce == "sum":
            return values.sum(axis=-1)
        if reduce == "all positions":
            return values.sum(axis=-1) / attention.shape[1]
        if reduce == "heads":
            return values.mean()
        if reduce == "heads keepdims":
            return values.mean(keepdims=True).reshape(1)
        if reduce == "none":
            return values
        return values.mean(axis=-1)
    return answer


def induction_minus_one(attention, tokens):
    """ref.latest_earlier_occurrence's -1 kept: positions without an earlier copy read column 0."""
    tokens = np.asarray(tokens)
    T = len(tokens)
    latest = np.array([max([s for s in range(t) if tokens[s] == tokens[t]], default=-1) for t in range(T)])
    return attention[:, np.arange(T), latest + 1].mean(axis=-1)


def induction_itself(attention, tokens):
    """t counts as its own earlier occurrence: s = t, and t + 1 runs off the end."""
    tokens = np.asarray(tokens)
    scores = []
    for head in attention:
        values = []
        for t in range(len(tokens)):
            s = max(j for j in range(t + 1) if tokens[j] == tokens[t])
            values.append(head[t, s + 1])
        scores.append(np.mean(values))
    return np.array(scores)


def induction_anywhere(attention, tokens):
    """The latest other position with the same token, later ones too."""
    tokens = np.asarray(tokens)
    t_list, j_list = [], []
    for t in range(len(tokens)):
        same = np.flatnonzero(tokens == tokens[t])
        same = same[same != t]
        if len(same):
            t_list.append(t)
            j_list.append(same[-1] + 1)
    if not t_list:
        return np.zeros(attention.shape[0])
    return attention[:, t_list, j_list].mean(axis=-1)


def induction_list_compare(attention, tokens):
    """tokens[:t] == tokens[t] on a list is one False."""
    queries, targets = [], []
    for t in range(len(tokens)):
        hits = np.flatnonzero(tokens[:t] == tokens[t])
        if len(hits):
            queries.append(t)
            targets.append(hits[-1] + 1)
    if not queries:
        return np.zeros(attention.shape[0])
    return attention[:, queries, targets].mean(axis=-1)


def induction_previous(attention, tokens):
    """The previous position of each repeated token."""
    t = np.array([t for t, _ in _pairs(tokens)])
    if not len(t):
        return np.zeros(attention.shape[0])
    return attention[:, t, t - 1].mean(axis=-1)


def induction_course(attention, tokens):
    return ref.induction_score(attention, tokens)


def induction_course_helper(attention, tokens):
    s = ref.latest_earlier_occurrence(tokens)
    t = np.flatnonzero(s >= 0)
    return attention[:, t, s[t] + 1].mean(axis=-1) if len(t) else np.zeros(attention.shape[0])


INDUCTION_MISTAKES = [
    ("attention on s (a duplicate-token head)", _induction_with(key=lambda t, s: s), "on the earlier copy s itself"),
    ("query and key axes swapped", _induction_with(swap=True), "the query and key axes swapped"),
    ("first occurrence instead of the latest", _induction_with(which="first"), "the FIRST earlier occurrence"),
    ("the mean over heads too (a number)", _induction_with(reduce="heads"), "the mean over the heads as well"),
    ("the mean over heads too (shape (1,))", _induction_with(reduce="heads keepdims"),
     "the mean over the heads as well"),
    ("NaN when no token repeats", _induction_with(empty="nan"), "return np.zeros(H) then"),
    ("the sum instead of the mean", _induction_with(reduce="sum"), "the sum over the positions instead of their mean"),
    ("averaged over all T positions", _induction_with(reduce="all positions"),
     "every position averaged, those whose token did not appear before as 0"),
    ("s = -1 kept: column 0 read", induction_minus_one, "with s = -1, reading attention[:, t, 0]"),
    ("t counts as its own earlier occurrence", induction_itself, "never t itself nor a later position"),
    ("the latest equal token anywhere, later ones too", induction_anywhere, "never t itself nor a later position"),
    ("s + 1 == t left out", _induction_with(skip_adjacent=True), "(s + 1 == t) left out"),
    ("the previous position", induction_previous, "the attention on the previous position t - 1"),
    ("not averaged over the positions", _induction_with(reduce="none"),
     "average the values read at the positions (axis=-1)"),
    ("a list compared with ==", induction_list_compare, "np.asarray(tokens) first"),
    ("a list of floats", lambda attention, tokens: induction_notebook(attention, tokens).tolist(),
     "expected a NumPy array"),
    ("a torch tensor", lambda attention, tokens: torch.from_numpy(induction_notebook(attention, tokens)),
     "the result is a torch.Tensor, expected a NumPy array"),
    ("integer scores", lambda attention, tokens: np.round(induction_notebook(attention, tokens)).astype(np.int64),
     "expected a floating-point dtype"),
    ("calls the course's version", induction_course, "calls plmcourse.ref.induction_score"),
    ("calls the course's helper", induction_course_helper, "calls plmcourse.ref.latest_earlier_occurrence"),
]


CATALOGUE = {
    "check_k_shot_prompt": (PROMPT_CORRECT, PROMPT_MISTAKES),
    "check_induction_score": (INDUCTION_CORRECT, INDUCTION_MISTAKES),
}
