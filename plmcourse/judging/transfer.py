"""Checks for notebook 13 (PLMs beyond one language), all NumPy:

    check_alignment_precision_at_1   alignment_precision_at_1(src_emb, tgt_emb, train_pairs, test_pairs) -> float
    check_whole_entity_mask          whole_entity_mask(token_ids, entity_spans, budget, rng, mask_id, vocab_size)
                                     -> (inputs, labels)
    check_unfreezing_groups          unfreezing_groups(n_layers, step, unfreeze_every, base_lr, decay) -> dict

check_alignment_precision_at_1 compares the score with plmcourse.ref.alignment_precision_at_1 exactly
(it is a count divided by a count). The tables are a source table and a noisy rotation of it with rows of
different lengths (so that a fit or a search without unit rows gives another score), more target rows than
source rows, float32 and float64, pairs as (k, 2) arrays and as lists of tuples; special cases: d = 2 with
a hand-worked rotation, a perfect alignment (1.0), a source with two translations among the test pairs
(counted once), two identical target rows (a tie: the lower index wins), a target row of zeros (cosine 0,
never NaN). Every case keeps the best and second-best cosine of each test source at least 1e-6 apart
(except the deliberate tie), so any correct way of computing them finds the same neighbours. A wrong
score is named by the first known mistake (plain dot products, no map, W transposed, W = X^T Y itself,
least squares, per-pair counting, a search restricted to the test targets, a fit on the test pairs,
centred rows, a farthest neighbour, ties to the higher index, NaN from a zero row) that gives it.

check_whole_entity_mask is a random function's check, as check_mlm_mask (plmcourse.judging.bert): rules
that every right answer satisfies (the pair of integer arrays, labels -100 or the original token, only
chosen positions changed, entities whole, at most `budget` tokens a row and no unit left out that would
still fit, one treatment per unit, replacements in range and never mask_id), two calls with the same
seed that must agree and one with another seed that must not, and statistics on 1,000 rows judged by
exact binomial tails (core.unlikely_count: an honest answer fails less than once in 10,000 gradings):
80% of the chosen units all [MASK], which units get chosen (a 4-token entity among 4 single tokens with
a budget of 4: 1/5; a 2-token entity among 6 with a budget of 2: 1/7; the first and the last of 10 single
tokens with a budget of 3: 3/10 each).

check_unfreezing_groups compares the dict with plmcourse.ref.unfreezing_groups: its keys (every group,
frozen ones too), and each rate within 1e-12 relative. It varies n_layers (1, 2, 4, 12), the step (0,
each group's first step and the step before it, long after), unfreeze_every (0: all at once, 1, 3, 10),
base_lr and decay (1: one rate, 1/2.6 as in ULMFiT, 0.5, 0.8).
"""

import numpy as np

from plmcourse.grading import transfer as declared
from plmcourse.judging.bert import IGNORE, _Memory, _seed_problem
from plmcourse.judging.core import (
    Case,
    Spec,
    as_scalar,
    describe,
    expect_integer_pair,
    first_match,
    fits,
    hidden_salt,
    hint_for,
    matches,
    noted,
    underdrawn,
    unlikely_count,
)
from plmcourse.nn import transfer as nn_transfer
from plmcourse.ref import transfer as ref_transfer

__all__ = ["check_alignment_precision_at_1", "check_whole_entity_mask", "check_unfreezing_groups"]


# ============================================================================
# alignment_precision_at_1(src_emb, tgt_emb, train_pairs, test_pairs) -> float

ALIGNMENT_SEAL = [
    (ref_transfer.alignment_precision_at_1, "plmcourse.ref.alignment_precision_at_1"),
    (ref_transfer.procrustes, "plmcourse.ref.transfer.procrustes"),
    (ref_transfer.nearest_neighbours, "plmcourse.ref.transfer.nearest_neighbours"),
    (nn_transfer.alignment_precision_at_1, "plmcourse.nn.transfer.alignment_precision_at_1"),
]


def _alignment_seal():
    """The course's versions, and SciPy's orthogonal_procrustes where the notebook has loaded SciPy (the judge
    loads it itself: plmcourse.autograde.judge.SEALED_LIBRARIES)."""
    import sys

    found = []
    linalg = sys.modules.get("scipy.linalg")
    if linalg is not None and hasattr(linalg, "orthogonal_procrustes"):
        found.append((linalg.orthogonal_procrustes, "scipy.linalg.orthogonal_procrustes"))
    return ALIGNMENT_SEAL + found


MARGIN = 1e-6  # the best and second-best cosine of a test source differ by more than this (ties aside)


def _scores(x, y, w):
    return (x @ w) @ y.T


def _margins_ok(src, tgt, train, test, tie_rows=()):
    x, y = ref_transfer.unit_rows(src), ref_transfer.unit_rows(tgt)
    w = ref_transfer.procrustes(x[train[:, 0]], y[train[:, 1]])
    scores = np.sort(_scores(x[np.unique(test[:, 0])], np.delete(y, list(tie_rows), axis=0), w), axis=1)
    return bool(np.all(scores[:, -1] - scores[:, -2] > MARGIN))


def _rotation(rng, d, angle):
    """A random orthogonal (d, d) matrix; with `angle`, a rotation that close to the identity (Cayley transform of
    a small skew-symmetric matrix), where no map at all, or a map the wrong way, still scores between 0 and 1."""
    if angle is None:
        return np.linalg.qr(rng.standard_normal((d, d)))[0]
    a = rng.standard_normal((d, d))
    skew = angle * (a - a.T) / np.linalg.norm(a - a.T, 2)
    return np.linalg.solve(np.eye(d) - skew, np.eye(d) + skew)


def _alignment_case(seed, n_src, n_tgt, d, k_train, k_test, *, noise=0.3, dtype=np.float64, as_list=False,
                    two_translations=False, tie=False, zero_row=False, lengths=True, perfect=False, angle=None,
                    spread=(0.2, 5.0), wrong_entry=False):
    """A source table, and a target table that holds a rotated, noisy, rescaled copy of it in shuffled rows
    (plus n_tgt - n_src rows of other words); train and test pairs drawn from the true translations.

    wrong_entry: the last test pair's target is a row pointing away from its source's translation (a wrong
    entry, as real dictionaries hold): only the farthest target finds it, so that mistake does not score 0,
    the score of many unrelated mistakes."""
    for attempt in range(200):
        rng = np.random.default_rng(seed * 1000 + attempt)
        src = rng.standard_normal((n_src, d))
        rotation = _rotation(rng, d, angle)
        rows = rng.permutation(n_tgt)[:n_src]  # the target row of each source word
        tgt = rng.standard_normal((n_tgt, d))
        tgt[rows] = src @ rotation + (0.0 if perfect else noise) * rng.standard_normal((n_src, d))
        if lengths:
            src *= np.exp(rng.uniform(*np.log(spread), (n_src, 1)))
            tgt *= np.exp(rng.uniform(*np.log(spread), (n_tgt, 1)))
        words = rng.permutation(n_src)
        pairs = np.stack([words, rows[words]], axis=1)
        train, test = pairs[:k_train], pairs[k_train:k_train + k_test]
        tie_rows = []
        if two_translations:  # the first test source gets a second translation: another target row
            s = test[0, 0]
            spare = np.setdiff1d(np.arange(n_tgt), rows)[0]
            tgt[spare] = tgt[rows[s]] * 1.01 + 0.05 * rng.standard_normal(d)
            test = np.concatenate([test, [[s, spare]]])
        if wrong_entry:
            s = test[-1, 0]
            spare = np.setdiff1d(np.arange(n_tgt), rows)[-1]
            tgt[spare] = -tgt[rows[s]]
            test[-1, 1] = spare
        if tie:  # a copy of the first test source's nearest target, at a lower index than the pair's target
            s, t = test[0]
            x, y = ref_transfer.unit_rows(src), ref_transfer.unit_rows(tgt)
            w = ref_transfer.procrustes(x[train[:, 0]], y[train[:, 1]])
            nearest = int(np.argmax(_scores(x[[s]], y, w)))
            if nearest != t:
                continue
            spare = [i for i in np.setdiff1d(np.arange(n_tgt), rows) if i < t]
            if not spare:
                continue
            tgt[spare[0]] = tgt[t]
            tie_rows = [spare[0]]
        if zero_row:
            spare = np.setdiff1d(np.arange(n_tgt), rows)
            tgt[spare[-1]] = 0.0
            tie_rows = tie_rows + [int(spare[-1])]
        if _margins_ok(src, tgt, train, test, tie_rows):
            break
    else:
        raise RuntimeError(f"no case with clear margins for seed {seed}")
    src, tgt = src.astype(dtype), tgt.astype(dtype)
    args = [src, tgt, train, test]
    if as_list:
        args[2:] = [[tuple(int(i) for i in p) for p in train], [tuple(int(i) for i in p) for p in test]]
    label = (f"seed {seed}: src_emb ({n_src}, {d}), tgt_emb ({n_tgt}, {d}) {np.dtype(dtype).name}, "
             f"{k_train} train pairs, {len(test)} test pairs")
    x, y = ref_transfer.unit_rows(src), ref_transfer.unit_rows(tgt)
    w = ref_transfer.procrustes(x[train[:, 0]], y[train[:, 1]])
    low = np.mean((x[np.unique(test[:, 0])] @ w @ y.T).max(axis=1) < 0.5) > 0.3
    label, tags = noted(label, [
        (low, ", most nearest cosines below 0.5", "low cosines"),
        (as_list, ", pairs as lists of tuples", "lists"),
        (perfect, ", an exact rotation (precision 1)", "perfect"),
        (two_translations, ", a test source with two translations", "two translations"),
        (tie, ", two identical target rows (a tie)", "tie"),
        (zero_row, ", a target row of zeros", "zero row"),
        (wrong_entry, ", a wrong entry among the test pairs", None),
        (not lengths, ", rows of length 1", None),
        (dtype == np.float32, "", "float32"),
    ])
    data = {"src": src.astype(np.float64), "tgt": tgt.astype(np.float64), "train": train, "test": test,
            **{tag: True for tag in tags}}
    return Case(label, tuple(args), tags=tags, data=data)


def _hand_case():
    """d = 2: the target plane is the source plane turned by 90 degrees, (x, y) -> (-y, x); two train pairs fix
    the map, and both test words land exactly on their targets (without the map, both would miss)."""
    src = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [2.0, -1.0]])
    tgt = np.array([[0.0, 1.0], [1.0, 1.0], [-4.0, 0.0], [-1.0, 1.0], [2.0, 4.0]])
    train, test = np.array([[0, 0], [1, 2]]), np.array([[2, 3], [3, 4]])
    return Case("a hand-worked case: d = 2, the target plane turned by 90 degrees, 2 train pairs, 2 test pairs",
                (src, tgt, train, test), tags=frozenset({"hand"}),
                data={"src": src, "tgt": tgt, "train": train, "test": test})


def _alignment_cases(hidden):
    cases = [
        # First: a rotation near the identity, rows of very different lengths: every known mistake scores
        # differently here, so the first failure names its cause.
        _alignment_case(20, 60, 80, 8, 30, 30, noise=0.5, angle=0.3, spread=(0.05, 20.0), wrong_entry=True),
        _alignment_case(0, 60, 80, 8, 30, 20),
        _alignment_case(1, 50, 50, 6, 25, 20, dtype=np.float32, noise=0.4),
        _alignment_case(2, 40, 60, 5, 20, 15, as_list=True),
        _alignment_case(3, 30, 40, 4, 15, 10, perfect=True),
        _alignment_case(4, 60, 90, 8, 30, 20, two_translations=True),
        _alignment_case(5, 40, 70, 5, 20, 15, tie=True, noise=0.2),
        _alignment_case(6, 40, 60, 5, 20, 15, zero_row=True),
        _alignment_case(7, 80, 100, 10, 40, 30, noise=0.5),
        _alignment_case(8, 40, 50, 6, 20, 15, lengths=False, noise=0.35),
        # 48 dimensions and noise: most nearest cosines lie below 0.5, and most of them are still right.
        _alignment_case(10, 120, 150, 48, 90, 30, noise=1.2),
        _hand_case(),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _alignment_case(salt + 100, 70, 90, 9, 35, 25, angle=0.4, spread=(0.05, 20.0)),
            _alignment_case(salt + 101, 50, 80, 6, 25, 20, dtype=np.float32, two_translations=True),
            _alignment_case(salt + 102, 40, 70, 5, 20, 15, tie=True, noise=0.2, as_list=True),
            _alignment_case(salt + 103, 50, 60, 6, 25, 20, zero_row=True, noise=0.45),
            _alignment_case(salt + 104, 100, 120, 12, 50, 40, noise=0.6),
        ]
    return cases


def _precision(x, y, train, test, *, normalise=True, normalise_fit=None, normalise_search=None, transpose=False,
               no_map=False, raw_product=False, lstsq=False, per_pair=False, restrict=False, fit_on_test=False,
               centre=False, farthest=False, ties_last=False, nan_rows=False, threshold=None, last_only=False,
               without_train=False):
    """The score with the switches that reproduce known mistakes (float64)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    train, test = np.asarray(train), np.asarray(test)
    if centre:
        x, y = x - x.mean(0), y - y.mean(0)
    fit_units = normalise if normalise_fit is None else normalise_fit
    search_units = normalise if normalise_search is None else normalise_search

    def units(a, on):
        if not on:
            return a
        if nan_rows:
            return a / np.linalg.norm(a, axis=1, keepdims=True)
        return ref_transfer.unit_rows(a)

    fx, fy = units(x, fit_units), units(y, fit_units)
    pairs = test if fit_on_test else train
    X, Y = fx[pairs[:, 0]], fy[pairs[:, 1]]
    if no_map:
        w = np.eye(x.shape[1])
    elif raw_product:
        w = X.T @ Y
    elif lstsq:
        w = np.linalg.lstsq(X, Y, rcond=None)[0]
    else:
        u, _, vt = np.linalg.svd(X.T @ Y)
        w = (u @ vt).T if transpose else u @ vt
    sx, sy = units(x, search_units), units(y, search_units)
    sources = test[:, 0] if per_pair else np.unique(test[:, 0])
    candidates = np.unique(test[:, 1]) if restrict else np.arange(len(y))
    if without_train:
        candidates = np.setdiff1d(candidates, train[:, 1])
    scores = (sx[sources] @ w) @ sy[candidates].T
    if farthest:
        scores = -scores
    if ties_last:
        nearest = candidates[scores.shape[1] - 1 - np.argmax(scores[:, ::-1], axis=1)]
    else:
        nearest = candidates[np.argmax(scores, axis=1)]
    if threshold is not None:  # no match below the threshold: an index no target has
        nearest = np.where(scores.max(axis=1) > threshold, nearest, -1)
    if per_pair:
        return float(np.mean(nearest == test[:, 1]))
    if last_only:  # one translation a source: the last listed
        last = dict(zip(test[:, 0].tolist(), test[:, 1].tolist()))
        return float(np.mean([nearest[i] == last[s] for i, s in enumerate(sources)]))
    right = [nearest[i] in set(test[test[:, 0] == s, 1].tolist()) for i, s in enumerate(sources)]
    return float(np.mean(right))


FIT_RAW = "the map fitted on rows not scaled to length 1: scale the rows first, then fit W on them"
SEARCH_RAW = ("the nearest neighbour by dot product with rows not scaled to length 1: the search is by cosine, over "
              "unit rows (scale every row of both tables to length 1, before the fit and before the search)")
NO_MAP = "no map: the sources are searched as they are; map them first with W = U V^T"
TRANSPOSED = ("W transposed (V U^T): with U S V^T = svd(X^T Y), x W = x U V^T maps a source row onto the "
              "target space; svd(Y^T X) or (U V^T).T maps the other way")
RAW_PRODUCT = "W = X^T Y itself: the orthogonal map is U V^T from its SVD, without the singular values"
LSTSQ = ("an unconstrained least-squares map: Procrustes keeps W orthogonal, W = U V^T from the SVD of X^T Y "
         "(it keeps distances and angles)")
PER_PAIR = ("each test pair counted instead of each distinct source: a source with two translations counts "
            "once, right if its nearest target is either of them")
RESTRICTED = ("the search restricted to the test pairs' targets: the nearest target is searched among ALL rows "
              "of tgt_emb")
FIT_ON_TEST = "the map fitted on the test pairs: fit W on train_pairs only, and score on test_pairs"
CENTRED = "the rows centred (the mean subtracted): the rows are only scaled to unit length"
FARTHEST = "the farthest target instead of the nearest: take the largest cosine (argmax)"
NO_UNITS = ("rows never scaled to length 1 (the fit and the search both on raw rows): scale every row of both "
            "tables to length 1 first, so that the search is by cosine")
LAST_ONLY = ("one translation kept per source (the last listed, as a dict built from the pairs keeps): a source "
             "with two translations is right if its nearest target is either of them")
WITHOUT_TRAIN = ("the train pairs' targets left out of the search: the nearest target is searched among ALL rows of "
                 "tgt_emb, those seen in training too")
THRESHOLD = ("a cosine threshold (a match counted only above a cosine of {t:g}): the nearest target counts whatever "
             "its cosine, and the exercise sets no threshold")
TIES_LAST = ("a tie broken towards the higher index: among equal cosines the lowest target index is the nearest "
             "(np.argmax gives the first maximum)")
NAN_ROW = ("a zero row divided by its length 0 gives NaN, and np.argmax picks the NaN: leave a zero row at zero "
           "(divide by 1 where the length is 0)")


def _alignment_mistakes(d):
    x, y, train, test = d["src"], d["tgt"], d["train"], d["test"]

    def at(**switches):
        return lambda: _precision(x, y, train, test, **switches)

    if d.get("zero row"):
        yield NAN_ROW, at(nan_rows=True)
    if d.get("tie"):
        yield TIES_LAST, at(ties_last=True)
    if d.get("two translations"):
        yield PER_PAIR, at(per_pair=True)
        yield LAST_ONLY, at(last_only=True)
    yield NO_UNITS, at(normalise=False)
    yield SEARCH_RAW, at(normalise_search=False)
    yield FIT_RAW, at(normalise_fit=False)
    yield NO_MAP, at(no_map=True)
    yield TRANSPOSED, at(transpose=True)
    yield RAW_PRODUCT, at(raw_product=True)
    yield LSTSQ, at(lstsq=True)
    yield RESTRICTED, at(restrict=True)
    yield FIT_ON_TEST, at(fit_on_test=True)
    yield WITHOUT_TRAIN, at(without_train=True)
    yield CENTRED, at(centre=True)
    yield FARTHEST, at(farthest=True)
    if d.get("low cosines"):
        for t in (0.5, 0.3, 0.6, 0.4):
            yield THRESHOLD.format(t=t), at(threshold=t)


def _judge_alignment(case, got, expected):
    value = as_scalar(got)
    if value is None:
        if isinstance(got, np.ndarray):
            return f"the score is an array of shape {got.shape}, expected one number (the fraction right)"
        return f"the score is {describe(got)}, expected one number (a float between 0 and 1)"
    if value != value:
        return "the score is nan" + ("; it matches " + NAN_ROW if "zero row" in case.tags else "")
    if abs(value - expected) <= 1e-12:
        return None
    n = len(np.unique(case.data["test"][:, 0]))
    problem = f"the score is {value:.6g}, expected {expected:.6g} ({round(expected * n)} of {n} distinct test sources)"
    if abs(value - round(expected * n)) < 1e-9 and value >= 1:
        return f"{problem}: return the fraction right, not the count"
    if value == 0:  # the score of many unrelated mistakes: say what it means
        problem += ", so no test source found its translation"
    mistakes = [(description, lambda compute=compute: (np.array(compute()),))
                for description, compute in _alignment_mistakes(case.data)]
    return matches(problem, first_match((np.array(value),), mistakes, atol=1e-12, rtol=0))


def _explain_alignment_error(error):
    return hint_for(error, [
        (("list indices must be integers", "tuple indices must be"),
         "the pairs may come as a list of (source, target) tuples: np.asarray(pairs) makes the (k, 2) array"),
        (("not aligned", "mismatch in its core dimension"),
         "X and Y are the (k, d) rows of the train pairs; W = U V^T is (d, d) and a source row maps as x @ W"),
        (("SVD did not converge",),
         "a NaN reached the SVD: a zero row divided by its length 0 gives NaN; divide by 1 where the length is 0"),
    ])


check_alignment_precision_at_1 = Spec(
    declared.check_alignment_precision_at_1,
    cases=_alignment_cases,
    reference=lambda case: ref_transfer.alignment_precision_at_1(case.data["src"], case.data["tgt"],
                                                                 case.data["train"], case.data["test"]),
    judge=_judge_alignment,
    seal=_alignment_seal,
    explain_error=_explain_alignment_error,
    clauses=(
        ("rows scaled to unit length before the fit and the search (rows of different lengths)",
         lambda c: float(np.ptp(np.linalg.norm(c.data["tgt"], axis=1))) > 1.0),
        ("W = U V^T from the SVD of X^T Y over the train pairs", lambda c: True),
        ("the nearest target by cosine among all rows of tgt_emb (more target rows than pairs)",
         lambda c: len(c.data["tgt"]) > len(c.data["test"])),
        ("ties: the lowest index", lambda c: "tie" in c.tags),
        ("a zero row stays zero (cosine 0, no NaN)", lambda c: "zero row" in c.tags),
        ("a source with two translations counts once", lambda c: "two translations" in c.tags),
        ("pairs as (k, 2) arrays", lambda c: isinstance(c.args[2], np.ndarray)),
        ("pairs as lists of tuples", lambda c: "lists" in c.tags),
        ("float32 tables", lambda c: "float32" in c.tags),
        ("an exact rotation scores 1", lambda c: "perfect" in c.tags),
        ("the nearest target, whatever its cosine (most below 0.5)", lambda c: "low cosines" in c.tags),
        ("returns the fraction, between 0 and 1", lambda c: True),
    ),
)


# ============================================================================
# whole_entity_mask(token_ids, entity_spans, budget, rng, mask_id, vocab_size) -> (inputs, labels)

ENTITY_MASK_SEAL = [
    (ref_transfer.whole_entity_mask, "plmcourse.ref.whole_entity_mask"),
    (ref_transfer.entity_units, "plmcourse.ref.transfer.entity_units"),
]
STAT_ROWS = 1000


def _structure(rng, kind, T):
    """One row's entity spans for a statistics case: 'singles' (none), 'long' (one 4-token entity), 'pair'
    (one 2-token entity), at a random place."""
    if kind == "singles":
        return []
    n = 4 if kind == "long" else 2
    start = int(rng.integers(0, T - n + 1))
    return [(start, start + n)]


def _mixed_spans(rng, T, n_entities, style):
    """Non-overlapping spans of lengths 1-4 at random places, in a random order, as tuples, lists or an array."""
    spans, taken = [], np.zeros(T, dtype=bool)
    for _ in range(50):
        if len(spans) == n_entities:
            break
        n = int(rng.integers(2, 5)) if rng.random() < 0.8 else 1
        start = int(rng.integers(0, T - n + 1))
        if not taken[start:start + n].any():
            taken[start:start + n] = True
            spans.append((start, start + n))
    order = rng.permutation(len(spans))
    spans = [spans[i] for i in order]
    if style == "list":
        return [list(s) for s in spans]
    if style == "array":
        return np.array(spans, dtype=np.int64).reshape(-1, 2)
    return spans


def _entity_case(seed, *, B=8, T=16, budget=4, mask_id=3, vocab_size=40, n_entities=2, style="tuple",
                 stats=None, key=None, same_as=None, differs_from=None, token_seed=None, absent=()):
    rng = np.random.default_rng(5000 + (seed if token_seed is None else token_seed))
    if stats:
        B, T, budget = STAT_ROWS, (10 if stats == "singles" else 8), {"singles": 3, "long": 4, "pair": 2}[stats]
        spans = [_structure(rng, stats, T) for _ in range(B)]
    else:
        spans = [_mixed_spans(rng, T, n_entities if b % 3 else 0, style) for b in range(B)]
    pool = np.array([i for i in range(vocab_size) if i != mask_id and i not in absent])
    tokens = pool[rng.integers(0, len(pool), (B, T))]  # never mask_id, nor an `absent` id
    label = (f"seed {seed}: token_ids ({B}, {T}), budget={budget}, mask_id={mask_id}, vocab_size={vocab_size}")
    label, tags = noted(label, [
        (stats == "singles", ", no entities (the first and last of 10 tokens chosen 3 times in 10)", "stats"),
        (stats == "long", ", a 4-token entity among 4 single tokens in each row", "stats"),
        (stats == "pair", ", a 2-token entity among 6 single tokens in each row", "stats"),
        (bool(absent), f", id{'s' if len(absent) > 1 else ''} {', '.join(map(str, absent))} absent from the batch",
         "absent"),
        (0 < mask_id < vocab_size - 1 and stats == "singles", ", ids on both sides of mask_id", "mask inside"),
        (budget == 0, ", nothing may be chosen", "budget 0"),
        (budget >= T, ", a budget for every token", "budget all"),
        (not stats and style == "list", ", spans as lists", "lists"),
        (not stats and style == "array", ", spans as (k, 2) arrays", "arrays"),
        (same_as is not None, ", the same seed as an earlier case", None),
        (differs_from is not None, ", the same tokens as an earlier case, another seed", None),
    ])
    norm_spans = [[(int(s), int(e)) for s, e in row] for row in spans]
    data = {"tokens": tokens, "spans": norm_spans, "budget": budget, "mask_id": mask_id, "vocab_size": vocab_size,
            "stats": stats, "seed_key": key or f"entity{seed}",
            "units": [ref_transfer.entity_units(T, row) for row in norm_spans]}
    if same_as:
        data["same_as"] = same_as
    if differs_from:
        data["differs_from"] = differs_from
    args = (tokens, spans, budget, np.random.default_rng(seed), mask_id, vocab_size)
    return Case(label, args, tags=tags, data=data)


def _entity_mask_cases(hidden):
    cases = [
        _entity_case(0, stats="long"),
        _entity_case(1, stats="pair", mask_id=0, vocab_size=12),
        _entity_case(2, stats="singles", vocab_size=9, mask_id=4, absent=(7,)),
        _entity_case(3, B=6, T=20, budget=5, key="small"),
        _entity_case(3, B=6, T=20, budget=5, key="small again", same_as="small"),
        _entity_case(4, B=6, T=20, budget=5, key="other", differs_from="small", token_seed=3),
        _entity_case(5, B=10, T=12, budget=3, style="list", mask_id=1, vocab_size=25),
        _entity_case(6, B=5, T=14, budget=6, style="array", n_entities=3),
        _entity_case(7, B=4, T=10, budget=0),
        _entity_case(8, B=4, T=10, budget=10, n_entities=3),
        _entity_case(9, B=1, T=30, budget=9, n_entities=4, mask_id=7, vocab_size=100),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _entity_case(salt + 100, stats="long", mask_id=5, vocab_size=30),
            _entity_case(salt + 101, stats="pair", vocab_size=60),
            _entity_case(salt + 102, stats="singles", mask_id=11, vocab_size=20, absent=(3, 16)),
            _entity_case(salt + 103, B=12, T=25, budget=7, n_entities=4, style="list"),
            _entity_case(salt + 104, B=3, T=8, budget=20, style="array"),
            _entity_case(salt + 105, B=7, T=18, budget=1, n_entities=3),
        ]
    return cases


class _Chosen:
    """What the rules read from one answer."""

    def __init__(self, case, got):
        d = case.data
        self.inputs, self.labels = np.asarray(got[0]), np.asarray(got[1])
        self.tokens, self.mask_id = d["tokens"], d["mask_id"]
        self.chosen = self.labels != IGNORE
        self.changed = self.inputs != self.tokens
        self.units = d["units"]


def _rule_pair(case, got, memory):
    return expect_integer_pair(got, case.data["tokens"].shape, "token_ids")


def _rule_labels(case, got, memory):
    m = _Chosen(case, got)
    if not np.any(m.labels == IGNORE) and np.count_nonzero(m.labels == 0) > m.labels.size // 2 \
            and case.data["budget"] < m.tokens.shape[1]:
        return ("labels are 0 where nothing is predicted; use -100 there (the ignore_index the loss skips), since 0 "
                "is a real token id")
    wrong = np.argwhere(m.chosen & (m.labels != m.tokens))
    if len(wrong):
        at = tuple(int(i) for i in wrong[0])
        if np.all(m.labels[m.chosen] == m.inputs[m.chosen]):
            return ("labels hold the corrupted inputs; a chosen position's label is the ORIGINAL token (what the "
                    "model must recover)")
        return (f"labels{list(at)} is {m.labels[at]}, but the token there is {m.tokens[at]}: a label is either the "
                f"original token or -100")
    return None


def _rule_only_chosen_change(case, got, memory):
    m = _Chosen(case, got)
    silent = np.argwhere(m.changed & ~m.chosen)
    if len(silent):
        at = tuple(int(i) for i in silent[0])
        return (f"the token at {list(at)} was changed ({m.tokens[at]} -> {m.inputs[at]}) but its label is -100; "
                f"only chosen positions change, and every chosen position gets its original token as label")
    return None


def _rule_whole_entities(case, got, memory):
    m = _Chosen(case, got)
    for row, units in enumerate(m.units):
        for start, end in units:
            picked = m.chosen[row, start:end]
            if picked.any() and not picked.all():
                return (f"the entity at row {row}, positions {start}..{end - 1} was chosen in part "
                        f"({int(picked.sum())} of {end - start} tokens): an entity is chosen whole or not at all")
    return None


def _rule_budget(case, got, memory):
    m, budget = _Chosen(case, got), case.data["budget"]
    counts = m.chosen.sum(axis=1)
    over = np.flatnonzero(counts > budget)
    if len(over):
        row = int(over[0])
        return (f"row {row} has {int(counts[row])} chosen tokens, more than the budget of {budget}: take a unit only "
                f"if its length fits in what is left of the budget")
    if len(counts) > 1 and 0 < int(counts.sum()) <= budget and np.any(counts == 0):
        return (f"{int(counts.sum())} tokens were chosen in the whole batch, and rows such as {int(np.argmin(counts))} "
                f"got none: the budget is per row, each row gets its own {budget} tokens")
    singles_chosen = any(m.chosen[row, start] for row, units in enumerate(m.units) for start, end in units
                         if end - start == 1)
    for row, units in enumerate(m.units):
        left = budget - int(counts[row])
        for start, end in units:
            if not m.chosen[row, start:end].any() and end - start <= left:
                what = "a single token" if end - start == 1 else f"an entity of {end - start} tokens"
                if end - start == 1 and not singles_chosen:
                    fits(SINGLES_NOT_UNITS)
                    return (f"row {row} leaves out a single token (position {start}) although {left} tokens of the "
                            f"budget are left, and no single token was chosen in any row; it matches {SINGLES_NOT_UNITS}")
                problem = f"row {row} leaves out {what} (positions {start}..{end - 1}) although {left} tokens of the " \
                          f"budget are left"
                views = _unit_views(m)
                if len(views) >= 200 and sum(v[3] for v in views) < 0.03 * len(views):
                    return (f"{problem}, and no chosen unit is left unchanged: it looks as if the units left as they "
                            f"are (10%) were not labelled; every chosen unit is labelled, whatever it shows")
                exact = [(r, u) for r, units_r in enumerate(m.units) for u in units_r
                         if not m.chosen[r, u[0]:u[1]].any() and u[1] - u[0] <= budget - int(counts[r])]
                ends = {(r, e) for r, units_r in enumerate(m.units) for s_, e in units_r if e - s_ > 1}
                if all(e - s == 1 and (r, s) in ends for r, (s, e) in exact):
                    return (f"{problem}: every unit left out that way sits right after an entity span, as if the "
                            f"span's end were included; a span (start, end) covers start..end - 1, and position end "
                            f"is a unit of its own")
                if all(e - s == budget - int(counts[r]) for r, (s, e) in exact):
                    return (f"{problem}: every unit left out that way is exactly as long as what is left of the "
                            f"budget, and it fits: take a unit when its length is at most what is left (<=, not <)")
                return (f"{problem}: when a unit does not fit, skip it and go on through the others, a shorter one "
                        f"may still fit")
    return None


def _in_entities(m):
    """Bool like the tokens: True inside an entity span."""
    inside = np.zeros(m.tokens.shape, dtype=bool)
    for row, units in enumerate(m.units):
        for start, end in units:
            if end - start > 1:
                inside[row, start:end] = True
    return inside


def _unit_views(m):
    """(is an entity, shows mask at every position, shows mask somewhere, unchanged) of each chosen unit."""
    out = []
    for row, units in enumerate(m.units):
        for start, end in units:
            if m.chosen[row, start].all():
                shown = m.inputs[row, start:end]
                out.append((end - start > 1, bool(np.all(shown == m.mask_id)), bool(np.any(shown == m.mask_id)),
                            bool(np.all(shown == m.tokens[row, start:end]))))
    return out


SINGLES_NOT_UNITS = ("single positions not treated as units: a row's units are its entity spans AND every "
                     "single position outside all spans, shuffled together")
ENTITIES_FIRST = "the entities taken before the single tokens: one shuffled order for all units"
PER_TOKEN = ("the 80/10/10 choice drawn for each token instead of once per unit: draw u = rng.random() once for a "
             "chosen unit, and give every token of it the same treatment")
MASK_IN_POOL = ("a random replacement drew mask_id: the random ids are uniform over 0..vocab_size-1 WITHOUT "
                "mask_id")


def _rule_one_treatment(case, got, memory):
    m = _Chosen(case, got)
    views = _unit_views(m)
    entities = [v for v in views if v[0]]
    mixed = [v for v in entities if v[2] and not v[1]]
    if not mixed:
        return None
    share = len(mixed) / len(entities)
    if len(entities) >= 30:
        return (f"{len(mixed)} of {len(entities)} chosen entities show [MASK] at some of their tokens only; "
                f"it matches {PER_TOKEN if share > 0.1 else MASK_IN_POOL}")
    return (f"a chosen entity shows [MASK] at some of its tokens only: either {PER_TOKEN}, or {MASK_IN_POOL}")


def _rule_replacements(case, got, memory):
    m, d = _Chosen(case, got), case.data
    replaced = m.changed & (m.inputs != m.mask_id)
    bad = np.argwhere(replaced & ((m.inputs < 0) | (m.inputs >= d["vocab_size"])))
    if len(bad):
        at = tuple(int(i) for i in bad[0])
        return (f"a random replacement at {list(at)} is {m.inputs[at]}, outside 0..vocab_size-1 "
                f"(vocab_size={d['vocab_size']})")
    if d["stats"] == "singles" and np.count_nonzero(replaced):
        allowed = np.array([i for i in range(d["vocab_size"]) if i != d["mask_id"]])
        groups = [(f"ids that do not occur in the batch ({', '.join(map(str, np.setdiff1d(allowed, m.tokens)))}): "
                   f"the pool is every id of 0..vocab_size-1 except mask_id, not the ids seen in the tokens",
                   np.setdiff1d(allowed, m.tokens)),
                  (f"ids below mask_id ({d['mask_id']}): mask_id need not be the lowest id; draw from every id of "
                   f"0..vocab_size-1 except mask_id", allowed[allowed < d["mask_id"]]),
                  (f"ids above mask_id ({d['mask_id']}): draw from every id of 0..vocab_size-1 except mask_id",
                   allowed[allowed > d["mask_id"]])]
        found = underdrawn(m.inputs[replaced], m.tokens[replaced], allowed, groups)
        if found:
            description, k, expected = found
            return (f"{k} of the {int(np.count_nonzero(replaced))} random replacements are "
                    f"{description.split(':')[0]}, expected about {expected:.0f}:{description.split(':', 1)[1]}")
        distinct = len(np.unique(m.inputs[replaced]))
        if distinct < (d["vocab_size"] - 1) // 2:
            return (f"the random replacements use only {distinct} different ids of {d['vocab_size'] - 1}: draw each "
                    f"uniformly from 0..vocab_size-1 without mask_id")
    return None


def _rule_replaced_tokens_independent(case, got, memory):
    """Each token of a unit replaced by random ids draws its own: all of an entity's n tokens show the same id
    with probability (1 / (vocab_size - 1)) ** (n - 1)."""
    d = case.data
    if d["stats"] not in ("long", "pair"):
        return None
    m = _Chosen(case, got)
    same, replaced = 0, 0
    for row, units in enumerate(m.units):
        for start, end in units:
            shown = m.inputs[row, start:end]
            if end - start > 1 and m.chosen[row, start] and not np.any(shown == m.mask_id) \
                    and not np.array_equal(shown, m.tokens[row, start:end]):
                replaced += 1
                same += bool(np.all(shown == shown[0]))
    length = 4 if d["stats"] == "long" else 2
    if replaced and unlikely_count(same, replaced, (1 / (d["vocab_size"] - 1)) ** (length - 1)) == "high":
        return (f"{same} of the {replaced} entities replaced by random ids show one id at every token: each token "
                f"of a unit draws its own random id (one draw per token, size=the unit's length), only the choice "
                f"of treatment is made once per unit")
    return None


def _rule_statistics(case, got, memory):
    d = case.data
    if not d["stats"]:
        return None
    m = _Chosen(case, got)
    views = _unit_views(m)
    n = len(views)
    masked = sum(v[1] for v in views)
    side = unlikely_count(masked, n, 0.8)
    if side:
        hint = ""
        if side == "high" and d["stats"] == "singles":
            hint = f"; it matches {MASK_IN_POOL}"
        if abs(masked / n - 0.1) < 0.03:
            hint = ("; it matches the 80% and a 10% share swapped: every token of a unit becomes mask_id for 80% of "
                    "the chosen units, random ids for 10%, unchanged for 10%")
        return (f"{masked} of {n} chosen units show [MASK] ({masked / n:.3f}), expected 80% of them (80% [MASK], "
                f"10% random ids, 10% unchanged, drawn once per unit){hint}")
    singles = [v for v in views if not v[0] and not v[1]]
    unchanged = sum(v[3] for v in singles)
    q = 0.5 + 0.5 / (d["vocab_size"] - 1)  # of the singles not [MASK]ed: unchanged, or a random id equal to it
    side = unlikely_count(unchanged, len(singles), q)
    if side:
        return (f"of the {len(singles)} chosen single tokens not [MASK]ed, {unchanged} are unchanged, expected about "
                f"half (10% random ids, 10% unchanged): u < 0.8 -> [MASK], 0.8 <= u < 0.9 -> a random id, "
                f"otherwise unchanged")
    if d["stats"] == "singles":
        for where, column in (("first", 0), ("last", -1)):
            k = int(np.count_nonzero(m.chosen[:, column]))
            side = unlikely_count(k, len(m.chosen), 0.3)
            if side:
                return (f"the {where} of 10 single tokens was chosen in {k} of {len(m.chosen)} rows, expected 3 in "
                        f"10 with a budget of 3: go through the units in the order of rng.permutation, every unit "
                        f"as likely to come first as any other")
        return None
    p = {"long": 1 / 5, "pair": 1 / 7}[d["stats"]]
    entity_chosen = sum(1 for row, units in enumerate(m.units) if m.chosen[row, units[0][0]])
    side = unlikely_count(entity_chosen, len(m.units), p)
    if side:
        n_units = len(m.units[0])
        weighted = (m.units[0][0][1] - m.units[0][0][0]) / m.tokens.shape[1]
        hint = ""
        if abs(entity_chosen / len(m.units) - weighted) < 0.05:
            hint = (f"; it matches units drawn in proportion to their length (a token drawn, then its unit): "
                    f"shuffle the {n_units} units with rng.permutation, each equally likely to come first")
        elif entity_chosen / len(m.units) > 0.9:
            hint = f"; it matches {ENTITIES_FIRST}"
            if not np.any(m.chosen & ~_in_entities(m)):  # as if the single positions were no units at all
                fits(ENTITIES_FIRST, SINGLES_NOT_UNITS)
        share = entity_chosen / len(m.units)
        return (f"the entity was chosen in {entity_chosen} of {len(m.units)} rows ({share:.3f}), "
                f"expected {p:.3f}: going through the units in a random order, it is chosen only when it comes "
                f"first{hint}")
    return None


ENTITY_MASK_RULES = [
    ("a pair of integer arrays shaped like token_ids", _rule_pair),
    ("labels: the original token or -100", _rule_labels),
    ("only chosen positions change", _rule_only_chosen_change),
    ("entities chosen whole", _rule_whole_entities),
    ("at most budget tokens a row, and no unit left out that still fits", _rule_budget),
    ("one treatment per unit", _rule_one_treatment),
    ("replacements in range, from every id but mask_id", _rule_replacements),
    ("each token of a replaced unit its own random id", _rule_replaced_tokens_independent),
    ("the same seed gives the same answer, another seed another", _seed_problem),
    ("80/10/10 per unit, units in a uniformly random order", _rule_statistics),
]


def _judge_entity_mask(case, got, expected, memory):
    for _, rule in ENTITY_MASK_RULES:
        problem = rule(case, got, memory)
        if problem is not None:
            return problem
    return None


def _explain_entity_error(error):
    return hint_for(error, [
        (("cannot unpack", "not enough values to unpack"),
         "entity_spans holds one sequence of (start, end) pairs per row (possibly empty): for start, end in "
         "entity_spans[row]"),
        (("high <= 0", "low >= high", "a cannot be empty"),
         "a unit that does not fit is skipped, and a budget of 0 chooses nothing: draw nothing from an empty range"),
    ])


_judge_entity_mask.rules = ENTITY_MASK_RULES

check_whole_entity_mask = Spec(
    declared.check_whole_entity_mask,
    cases=_entity_mask_cases,
    reference=lambda case: None,
    judge=_judge_entity_mask,
    seal=ENTITY_MASK_SEAL,
    memory=_Memory,
    explain_error=_explain_entity_error,
    clauses=(
        ("units: each entity span, and each position outside every span",
         lambda c: any(len(s) for s in c.data["spans"])),
        ("rows with no entity", lambda c: any(len(s) == 0 for s in c.data["spans"])),
        ("spans as tuples", lambda c: not c.data["stats"] and not ({"lists", "arrays"} & c.tags)),
        ("spans as lists", lambda c: "lists" in c.tags),
        ("spans as (k, 2) arrays", lambda c: "arrays" in c.tags),
        ("units in the order of rng.permutation: which get chosen", lambda c: c.data["stats"] in ("long", "pair")),
        ("... every position as likely as any other", lambda c: c.data["stats"] == "singles"),
        ("a unit that does not fit is skipped, and the others still tried", lambda c: c.data["stats"] == "long"),
        ("budget 0: nothing chosen", lambda c: "budget 0" in c.tags),
        ("a budget for every token: everything chosen", lambda c: "budget all" in c.tags),
        ("80% mask_id, 10% random ids, 10% unchanged, once per unit", lambda c: bool(c.data["stats"])),
        ("random ids uniform over 0..vocab_size-1 without mask_id", lambda c: c.data["stats"] == "singles"),
        ("... ids absent from the batch too", lambda c: "absent" in c.tags),
        ("... on both sides of mask_id", lambda c: "mask inside" in c.tags),
        ("... one per token of a unit", lambda c: c.data["stats"] in ("long", "pair")),
        ("labels: the original token where chosen, -100 elsewhere", lambda c: True),
        ("every random number from rng: the same seed gives the same masking", lambda c: "same_as" in c.data),
        ("... and not from a generator of its own", lambda c: "differs_from" in c.data),
    ),
)


# ============================================================================
# unfreezing_groups(n_layers, step, unfreeze_every, base_lr, decay) -> {group: learning rate}

UNFREEZING_SEAL = [
    (ref_transfer.unfreezing_groups, "plmcourse.ref.unfreezing_groups"),
    (ref_transfer.group_names, "plmcourse.ref.transfer.group_names"),
]


def _unfreezing_case(n_layers, step, every, base_lr, decay, note=""):
    label = f"n_layers={n_layers}, step={step}, unfreeze_every={every}, base_lr={base_lr:g}, decay={decay:g}{note}"
    tags = {"all at once"} if every == 0 else set()
    tags |= {"one rate"} if decay == 1 else set()
    return Case(label, (n_layers, step, every, base_lr, decay), tags=frozenset(tags),
                data={"n_layers": n_layers, "step": step, "every": every, "base_lr": base_lr, "decay": decay})


def _unfreezing_cases(hidden):
    cases = [
        _unfreezing_case(2, 0, 10, 1e-3, 0.5, " (only the head trains)"),
        _unfreezing_case(2, 9, 10, 1e-3, 0.5, " (the last step before the top layer)"),
        _unfreezing_case(2, 10, 10, 1e-3, 0.5, " (the top layer's first step)"),
        _unfreezing_case(2, 29, 10, 1e-3, 0.5),
        _unfreezing_case(2, 30, 10, 1e-3, 0.5, " (the embeddings' first step)"),
        _unfreezing_case(4, 7, 3, 2e-5, 1 / 2.6),
        _unfreezing_case(4, 100, 3, 2e-5, 1 / 2.6, " (long after: every group trains)"),
        _unfreezing_case(12, 20, 1, 5e-5, 0.8),
        _unfreezing_case(1, 1, 1, 0.01, 0.5),
        _unfreezing_case(3, 0, 0, 3e-4, 0.5, " (all at once)"),
        _unfreezing_case(2, 5, 4, 1e-3, 1.0, " (one rate for all)"),
        _unfreezing_case(6, 0, 0, 1e-4, 1.0, " (all at once, one rate: plain fine-tuning)"),
    ]
    if hidden:
        salt = hidden_salt(hidden)
        rng = np.random.default_rng(salt + 77)
        for _ in range(8):
            n = int(rng.integers(1, 13))
            every = int(rng.choice([0, 1, 2, 5, 50]))
            step = int(rng.integers(0, (n + 3) * max(every, 1)))
            cases.append(_unfreezing_case(n, step, every, float(rng.choice([1e-3, 3e-5, 0.1])),
                                          float(rng.choice([1.0, 0.5, 1 / 2.6, 0.9]))))
    return cases


def _schedule(n, step, every, lr, decay, *, bottom_first=False, strict=False, top_with_head=False,
              exponent_shift=0, inverted=False, reversed_layers=False, embeddings_with_layer0=False,
              frozen_rate=False, head_decayed=False, reversed_decay=False, early=False):
    names = ["head", *(f"layer.{i}" for i in reversed(range(n))), "embeddings"]  # not the sealed group_names
    out = {}
    for k, name in enumerate(names):
        kk = k
        if reversed_layers and name.startswith("layer."):
            kk = int(name.split(".")[1]) + 1  # layer.0 treated as the top
        if embeddings_with_layer0 and name == "embeddings":
            kk = n
        when = (len(names) - 1 - kk) if bottom_first else kk
        if top_with_head and kk == 1:
            when = 0
        if early:
            when = max(when - 1, 0)
        rate_k = max(kk + exponent_shift, 0) if kk > 0 else 0
        if head_decayed:
            rate_k = kk + 1
        if reversed_decay:
            rate_k = len(names) - 1 - kk
        rate = lr / decay ** rate_k if inverted else lr * decay ** rate_k
        trains = (step > when * every) if strict and when > 0 else (step >= when * every)
        out[name] = float(rate) if (trains or frozen_rate) else 0.0
    return out


BOTTOM_FIRST = ("unfrozen from the bottom: gradual unfreezing starts at the top (the head, then the last layer) "
                "and goes down, the embeddings last")
STRICT = "one step late: group k trains from step k · unfreeze_every on (step >= k · unfreeze_every)"
TOP_WITH_HEAD = ("the top layer unfrozen with the head: at step 0 only the head trains; the top layer joins at "
                 "step unfreeze_every")
EXPONENT_SHIFT = ("the decay counted from the top layer: the head is k = 0 (base_lr), the top layer k = 1 "
                  "(base_lr · decay), each group below one more factor of decay")
INVERTED = "the rates divided by decay ** k instead of multiplied: lower groups learn more slowly, not faster"
REVERSED = ("the layers numbered from the top: layer.0 is the BOTTOM block (next to the embeddings), "
            "layer.(n_layers - 1) the top one")
EMBEDDINGS_WITH_LAYER0 = ("the embeddings grouped with layer.0: they are a group of their own, one step of decay "
                          "and one unfreeze_every below the bottom layer")
FROZEN_RATE = "frozen groups given their rate: a group that does not train yet has rate 0.0"
HEAD_DECAYED = "the head's rate decayed too: the head gets base_lr itself (k = 0), the top layer base_lr · decay"
REVERSED_DECAY = ("the decay counted from the bottom (the embeddings at base_lr, the head the smallest rate): k counts "
                  "down from the head, which gets base_lr, to the embeddings, base_lr · decay ** (n_layers + 1)")
EARLY = ("every group one unfreeze_every early (the top layer trains with the head from step 0): group k joins at "
         "step k · unfreeze_every, the head k = 0 alone at first")


def _unfreezing_mistakes(d):
    args = (d["n_layers"], d["step"], d["every"], d["base_lr"], d["decay"])
    for description, switch in ((BOTTOM_FIRST, "bottom_first"), (TOP_WITH_HEAD, "top_with_head"),
                                (STRICT, "strict"), (REVERSED, "reversed_layers"),
                                (EMBEDDINGS_WITH_LAYER0, "embeddings_with_layer0"), (FROZEN_RATE, "frozen_rate"),
                                (INVERTED, "inverted"), (HEAD_DECAYED, "head_decayed"),
                                (REVERSED_DECAY, "reversed_decay"), (EARLY, "early")):
        yield description, (lambda s=switch: _schedule(*args, **{s: True}))
    yield EXPONENT_SHIFT, lambda: _schedule(*args, exponent_shift=-1)


def _same_rates(a, b):
    return set(a) == set(b) and all(abs(a[k] - b[k]) <= 1e-12 * max(abs(b[k]), 1e-300) for k in b)


def _judge_unfreezing(case, got, expected):
    if not isinstance(got, dict):
        return f"the result is {describe(got)}, expected a dict {{group name: learning rate}}"
    missing = [k for k in expected if k not in got]
    extra = [k for k in got if k not in expected]
    if missing or extra:
        problem = "the dict's keys are wrong"
        if missing:
            problem += f": {missing[:3]} missing"
        if extra:
            problem += f"{',' if missing else ':'} {[str(k) for k in extra[:3]]} not a group"
        return (f"{problem}; the groups are {list(expected)} (every group, frozen ones too with rate 0.0)")
    values = {}
    for k, v in got.items():
        value = as_scalar(v)
        if value is None:
            return f"the rate of {k!r} is {describe(v)}, expected a number (0.0 for a frozen group)"
        values[k] = value
    if _same_rates(values, expected):
        return None
    wrong = next(k for k in expected if abs(values[k] - expected[k]) > 1e-12 * max(abs(expected[k]), 1e-300))
    problem = f"the rate of {wrong!r} is {values[wrong]:.6g}, expected {expected[wrong]:.6g}"
    mistakes = [(description, lambda compute=compute: compute()) for description, compute in _unfreezing_mistakes(
        case.data)]
    mistake = first_match_rates(values, expected, mistakes)
    if mistake is None and _same_values(values, expected):
        # Every rate is right, but on the wrong group: the names and the rates were paired in different orders.
        holder = next(k for k in expected if abs(expected[k] - values[wrong]) <= 1e-12 * max(abs(values[wrong]),
                                                                                              1e-300))
        return (f"{problem}: the dict holds the right rates on the wrong groups ({values[wrong]:.6g} is the rate of "
                f"{holder!r}); pair each rate with its group by name: 'head' k = 0, 'layer.{case.data['n_layers'] - 1}' "
                f"k = 1 down to 'embeddings' k = n_layers + 1")
    return matches(problem, mistake)


def first_match_rates(values, expected, mistakes):
    """The first of `mistakes` (description, compute() -> dict) whose rates `values` matches (first_match's rule,
    for dicts: every one that fits is recorded for run_check)."""
    keys = list(expected)
    as_parts = [(description, lambda compute=compute: (np.array([compute()[k] for k in keys]),))
                for description, compute in mistakes]
    return first_match((np.array([values[k] for k in keys]),), as_parts, atol=0.0, rtol=1e-12)


def _same_values(a, b):
    """The same rates, whichever group holds each."""
    return np.allclose(sorted(a.values()), sorted(b.values()), rtol=1e-12, atol=0.0)


def _explain_unfreezing_error(error):
    return hint_for(error, [
        (("division by zero", "modulo by zero"),
         "unfreeze_every=0 means every group trains from step 0: compare step >= k * unfreeze_every, no division"),
    ])


check_unfreezing_groups = Spec(
    declared.check_unfreezing_groups,
    cases=_unfreezing_cases,
    reference=lambda case: ref_transfer.unfreezing_groups(*case.args),
    judge=_judge_unfreezing,
    seal=UNFREEZING_SEAL,
    explain_error=_explain_unfreezing_error,
    clauses=(
        ("the groups: head, layer.{n_layers-1} .. layer.0, embeddings", lambda c: True),
        ("step 0: only the head trains", lambda c: c.data["step"] == 0 and c.data["every"] > 0),
        ("group k from step k * unfreeze_every on: the step before", lambda c: c.data["every"] > 0
         and (c.data["step"] + 1) % c.data["every"] == 0 and c.data["step"] > 0),
        ("... and the step itself", lambda c: c.data["every"] > 1 and c.data["step"] % c.data["every"] == 0
         and c.data["step"] > 0),
        ("the embeddings last", lambda c: c.data["every"] > 0
         and c.data["step"] == (c.data["n_layers"] + 1) * c.data["every"]),
        ("rate base_lr * decay ** k", lambda c: c.data["decay"] != 1),
        ("decay=1: one rate", lambda c: "one rate" in c.tags),
        ("unfreeze_every=0: all at once", lambda c: "all at once" in c.tags),
        ("a frozen group: rate 0.0", lambda c: c.data["every"] > 0
         and c.data["step"] < c.data["every"] * (c.data["n_layers"] + 1)),
        ("one layer", lambda c: c.data["n_layers"] == 1),
        ("many layers", lambda c: c.data["n_layers"] >= 4),
    ),
)
