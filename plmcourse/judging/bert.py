"""Checks for notebook 04, BERT: masking, the masked-LM loss and BERT's parameter count.

    check_mlm_mask               mlm_mask(tokens, rng, vocab_size, mask_id, special_ids, p=0.15), NumPy
    check_mlm_loss               mlm_loss(logits, labels), PyTorch
    check_bert_parameter_count   bert_parameter_count(vocab_size, d_model, n_layers, d_ff, max_len, ...)

The loss is compared with torch.nn.functional.cross_entropy itself, gradients
included. A random function cannot be compared value by value, since every correct
answer draws its random numbers in its own order; mlm_mask is judged by invariants
that any correct answer satisfies (specials never chosen, labels -100 exactly where
nothing is predicted), by statistics on large samples, each an exact binomial tail that a
correct answer crosses less than once in a million, and by two calls with the same seed, which must agree.
Every failure names the rule that was broken.

Later notebooks build on this module: the loss machinery below also checks GPT's
causal_lm_loss (`plmcourse.judging.gpt`), and the seed helpers (_Memory,
_seed_problem) BART's text_infilling (`plmcourse.judging.bart`).
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import nn as course_nn
from plmcourse import ref
from plmcourse.grading import bert as declared
from plmcourse.judging.core import (
    judge_by_rules,
    hidden_salt,
    Spec,
    Case,
    close,
    compare,
    describe,
    expect_array,
    expect_integer_pair,
    name_mistake,
    to_numpy,
    log_softmax,
    tolerance_for,
    binomial_tails,
    underdrawn,
    unlikely_count,
    ALARM,
)
from plmcourse.nn import models as course_models
from plmcourse.nn import param_count as course_param_count

__all__ = [
    "check_mlm_mask",
    "check_mlm_loss",
    "check_bert_parameter_count",
]


IGNORE = -100


class _Memory:
    """What earlier cases returned, for the cases that call again with the same or another seed."""

    def __init__(self):
        self.outputs = {}
        self.kept_specials_out = False  # an earlier case with special_ids as a list or tuple chose none
        self.counts = []  # (chosen, ordinary) of each call of the spread group, in order

    def remember(self, key, got):
        self.outputs[key] = tuple(np.array(part, copy=True) for part in got)

    def same(self, key, got):
        before = self.outputs.get(key)
        if before is None:
            return None
        now = tuple(np.asarray(part) for part in got)
        return len(before) == len(now) and all(
            a.shape == b.shape and bool(np.all(a == b)) for a, b in zip(before, now))


SAME_SEED = ("two calls with generators made from the same seed gave different results; draw every "
             "random number from the rng argument (np.random.* functions and the random module ignore it)")
OTHER_SEED = ("a generator with another seed gave exactly the same result; use the rng argument "
              "instead of creating a generator of your own")


def _seed_problem(case, got, memory):
    """Remember `got`; compare with the earlier call that this case repeats or contrasts."""
    data = case.data
    memory.remember(data["seed_key"], got)
    if "same_as" in data and memory.same(data["same_as"], got) is False:
        return SAME_SEED
    if "differs_from" in data and memory.same(data["differs_from"], got) is True:
        return OTHER_SEED
    return None


# ============================================================================
# mlm_mask(tokens, rng, vocab_size, mask_id, special_ids, p=0.15) -> (inputs, labels), NumPy

MLM_MASK_SEAL = [(ref.mlm_mask, "plmcourse.ref.mlm_mask")]


def _bert_batch(rng, shape, vocab_size, specials, absent=()):
    """Ordinary ids in each row between [CLS] ... [SEP], then [PAD]s (a 1-D shape: one sequence).

    The ordinary ids are every id that is neither special nor in `absent`: the random replacements must
    still draw those absent ones."""
    pad, cls, sep = specials[:3]
    ordinary = np.setdiff1d(np.arange(vocab_size), np.concatenate([specials, list(absent)]))
    tokens = ordinary[rng.integers(0, len(ordinary), size=shape)]
    if len(shape) == 1:
        tokens[0], tokens[-1] = cls, sep
        return tokens
    flat = tokens.reshape(-1, shape[-1])
    lengths = rng.integers(shape[-1] // 2, shape[-1] + 1, size=len(flat))
    for row, n in zip(flat, lengths):
        row[0], row[n - 1] = cls, sep
        row[n:] = pad
    return flat.reshape(shape)


def _mlm_case(seed, shape, vocab_size=60, specials=(0, 1, 2, 3), mask_id=3, p=None, statistics=False,
              special_type=list, key=None, same_as=None, differs_from=None, token_seed=None, spread=None,
              absent=()):
    rng = np.random.default_rng(1000 + (seed if token_seed is None else token_seed))
    tokens = _bert_batch(rng, shape, vocab_size, tuple(specials) + (mask_id,), absent)
    special_ids = special_type(specials)
    kwargs = {} if p is None else {"p": p}
    label = (f"seed {seed}: tokens of shape {shape}, vocab_size={vocab_size}, mask_id={mask_id}, "
             f"special_ids={special_ids!r}" + ("" if p is None else f", p={p}"))
    if same_as:
        label += ", the same seed as an earlier case"
    if differs_from:
        label += ", the same tokens as an earlier case, another seed"
    if spread:
        label += f", call {spread[0] + 1} of {spread[1]} on the same tokens (the chosen count across seeds)"
    if absent:
        label += f", ordinary ids {_ids(absent)} absent from the batch"
    if statistics and min(set(range(vocab_size)) - set(specials) - {mask_id}) < max(specials):
        label += ", ordinary ids below a special id"
    data = {"tokens": tokens, "vocab_size": vocab_size, "mask_id": mask_id, "specials": np.array(specials),
            "p": 0.15 if p is None else p, "statistics": statistics, "seed_key": key or f"mlm{seed}"}
    if same_as:
        data["same_as"] = same_as
    if differs_from:
        data["differs_from"] = differs_from
    if spread:
        data["spread"] = spread
    args = (tokens, np.random.default_rng(seed), vocab_size, mask_id, special_ids)
    return Case(label, args, kwargs, tags=frozenset({"statistics"} if statistics else ()), data=data)


def _ids(ids):
    ids = sorted(int(i) for i in ids)
    return f"{ids[0]}..{ids[-1]}" if len(ids) > 2 and ids[-1] - ids[0] == len(ids) - 1 else str(ids)


SPREAD = 8  # calls in the group that measures how the chosen count varies between seeds


def _mlm_mask_cases(hidden):
    cases = [
        _mlm_case(0, (500, 128), statistics=True),
        # Special ids that are not the lowest: ordinary ids lie on both sides of 40.
        _mlm_case(1, (400, 128), p=0.3, statistics=True, special_type=set, specials=(0, 1, 2, 40), mask_id=40),
        _mlm_case(2, (3000,), vocab_size=90, specials=(0, 1, 2, 5), mask_id=5, special_type=tuple),
        # Big enough that two different draws coincide by chance about never (at 2 x 12 tokens,
        # an answer drawing from a generator of its own matched itself about once in 100 runs).
        _mlm_case(3, (4, 24), key="small"),
        _mlm_case(3, (4, 24), key="small again", same_as="small"),
        _mlm_case(4, (4, 24), key="other", differs_from="small", token_seed=3),
        # mask_id is not among special_ids here: it is still never a random replacement.
        # ... and the ordinary id 4 never occurs in the batch: a pool built from the batch never draws it.
        _mlm_case(5, (400, 64), vocab_size=9, specials=(0, 1, 2), mask_id=3, p=0.5, statistics=True, absent=(4,)),
    ]
    salt = hidden_salt(hidden)
    # The same 400 ordinary tokens under SPREAD seeds: the chosen count must vary as a binomial does.
    cases += [_mlm_case(salt + 60 + i, (402,), token_seed=60, spread=(i, SPREAD)) for i in range(SPREAD)]
    if hidden:
        cases += [
            _mlm_case(salt + 100, (300, 200), vocab_size=200, specials=(0, 1, 2, 7), mask_id=7, statistics=True,
                      special_type=set),
            _mlm_case(salt + 101, (400, 64), vocab_size=12, specials=(0, 1, 2, 3, 4), mask_id=4, p=0.5,
                      statistics=True, special_type=tuple),
            _mlm_case(salt + 102, (4, 8, 50)),
            _mlm_case(salt + 103, (20, 30), p=0.0),
            _mlm_case(salt + 104, (20, 30), p=1.0),
        ]
    return cases


def _share(mask, within):
    return float(np.count_nonzero(mask & within)) / max(1, int(np.count_nonzero(within)))


class _Masked:
    """What the rules below read from one answer: the arrays and the positions they pick out."""

    def __init__(self, case, got):
        d = case.data
        self.inputs, self.labels = got
        self.tokens, self.mask_id, self.p = d["tokens"], d["mask_id"], d["p"]
        self.special = np.isin(self.tokens, d["specials"])
        self.predicted = self.labels != IGNORE
        self.changed = self.inputs != self.tokens
        self.replaced = self.predicted & self.changed & (self.inputs != self.mask_id)


def _rule_two_integer_arrays(case, got, memory):
    return expect_integer_pair(got, case.data["tokens"].shape, "tokens")


def _rule_ignore_index(case, got, memory):
    m = _Masked(case, got)
    if not np.any(m.labels == IGNORE) and np.count_nonzero(m.labels == 0) > m.labels.size // 2 and m.p > 0:
        return ("labels are 0 where nothing is predicted; use -100 there (the ignore_index "
                "that the loss skips), since 0 is a real token id")
    return None


def _rule_labels_are_the_originals(case, got, memory):
    m = _Masked(case, got)
    wrong = np.argwhere(m.predicted & (m.labels != m.tokens))
    if not len(wrong):
        return None
    at = tuple(int(i) for i in wrong[0])
    if np.all(m.labels[m.predicted] == m.inputs[m.predicted]):
        return ("labels hold the corrupted inputs; a chosen position's label must be the ORIGINAL "
                "token (what the model has to recover)")
    return (f"labels{list(at)} is {m.labels[at]}, but the token there is {m.tokens[at]}: a label is either "
            f"the original token or -100")


def _rule_specials_never_chosen(case, got, memory):
    m = _Masked(case, got)
    chosen_special = np.argwhere(m.predicted & m.special)
    as_set = isinstance(case.args[4], (set, frozenset))
    if not len(chosen_special):
        memory.kept_specials_out |= not as_set
        return None
    at = tuple(int(i) for i in chosen_special[0])
    hint = ""
    if as_set and memory.kept_specials_out:
        # The same answer kept them out when they came as a list: what differs is the set.
        hint = ("; special_ids is a set in this case and your function kept the specials out when they came as "
                "a list: NumPy does not read a set as ids (np.isin(tokens, {0, 1}) and np.array({0, 1}) see "
                "one object that matches nothing), so convert it with list(special_ids) first")
    return (f"the special token {m.tokens[at]} at {list(at)} was chosen; special_ids "
            f"([CLS], [SEP], [PAD], ...) are never chosen{hint}")


def _rule_only_chosen_positions_change(case, got, memory):
    m = _Masked(case, got)
    silent = np.argwhere(m.changed & ~m.predicted)
    if not len(silent):
        return None
    at = tuple(int(i) for i in silent[0])
    what = "a special token" if m.special[at] else "a token"
    hint = ""
    if m.predicted.any() and np.all(m.inputs[m.predicted] == m.mask_id):
        hint = ("; it looks as if only the [MASK]ed positions were labelled, but the 10% replaced and "
                "the 10% unchanged ones are predicted too")
    return (f"{what} at {list(at)} was changed ({m.tokens[at]} -> {m.inputs[at]}) but its label is -100; "
            f"only chosen positions may change, and every chosen position gets its original token "
            f"as label{hint}")


def _rule_replacements_are_ordinary(case, got, memory):
    m, d = _Masked(case, got), case.data
    bad = np.argwhere(m.replaced & (np.isin(m.inputs, d["specials"]) | (m.inputs < 0) | (m.inputs >= d["vocab_size"])))
    if len(bad):
        at = tuple(int(i) for i in bad[0])
        return (f"a random replacement at {list(at)} is {m.inputs[at]}, a special id or outside "
                f"0..vocab_size-1; draw replacements from the ordinary ids only")
    return None


def _rule_edge_probabilities(case, got, memory):
    m = _Masked(case, got)
    if m.p == 0.0 and m.predicted.any():
        return "with p=0 nothing may be chosen"
    if m.p == 1.0 and np.any(~m.predicted & ~m.special):
        return "with p=1 every ordinary token must be chosen"
    return None


def _rule_statistics(case, got, memory):
    if "statistics" not in case.tags:
        return None
    m = _Masked(case, got)
    return _mlm_statistics(case.data, m.inputs, m.tokens, m.predicted, m.special, m.replaced)


def _rule_replacement_pool(case, got, memory):
    """The random replacements: never mask_id, and the original token as often as any other ordinary id.

    Each statistical test of mlm_mask is an exact binomial tail (core.unlikely_count): an honest answer trips
    one with probability below core.ALARM = 1e-6; a grading runs fewer than 100 of them, so an honest answer
    fails the check less than once in 10,000 gradings (tests/test_grading_bert.py measures it).
    """
    if "statistics" not in case.tags:
        return None
    m, d = _Masked(case, got), case.data
    chosen, n_chosen = m.predicted & ~m.special, int(np.count_nonzero(m.predicted & ~m.special))
    # Given the chosen positions, each is [MASK] with probability 0.8 exactly (a replacement is never mask_id).
    masked = int(np.count_nonzero(chosen & (m.inputs == m.mask_id)))
    if unlikely_count(masked, n_chosen, 0.8) == "high" and m.mask_id not in d["specials"]:
        return (f"{masked / n_chosen:.3f} of the chosen positions show [MASK], more than 80% by far: mask_id "
                f"({m.mask_id}) is not among special_ids in this case, and your random replacements include it; "
                f"the pool is the ids that are neither special NOR mask_id")
    pool_problem = _pool_problem(m, d)
    if pool_problem:
        return pool_problem
    A = d["vocab_size"] - len(set(d["specials"].tolist()) | {m.mask_id})
    unchanged = int(np.count_nonzero(chosen & (m.inputs == m.tokens)))
    if unlikely_count(unchanged, n_chosen, 0.1 + 0.1 / A) == "low" and abs(unchanged / n_chosen - 0.1) < 0.01:
        return (f"{unchanged / n_chosen:.3f} of the chosen positions are unchanged, expected 0.1 + 0.1 / {A} = "
                f"{0.1 + 0.1 / A:.3f}: the random token seems never to be the original one, but it is drawn "
                f"uniformly from ALL {A} ordinary ids, the original included")
    return None


def _pool_problem(m, d):
    """Every ordinary id can be a replacement: those absent from the batch, and those below a special id."""
    excluded = set(d["specials"].tolist()) | {m.mask_id}
    allowed = np.array(sorted(set(range(d["vocab_size"])) - excluded))
    top_special = max(excluded)
    groups = [(f"the ordinary ids that do not occur in the batch ({_ids(np.setdiff1d(allowed, m.tokens))}): the "
               f"pool is every id of 0..vocab_size-1 that is neither special nor mask_id, not the ids seen in the "
               f"tokens", np.setdiff1d(allowed, m.tokens)),
              (f"the ordinary ids below the special id {top_special} ({_ids(allowed[allowed < top_special])}): the "
               f"special ids need not be the lowest; draw from every id that is neither special nor mask_id "
               f"(for instance np.setdiff1d(np.arange(vocab_size), specials) and rng.choice)",
               allowed[allowed < top_special])]
    found = underdrawn(m.inputs[m.replaced], m.tokens[m.replaced], allowed, groups)
    if found:
        description, k, expected = found
        return (f"{k} of the {int(np.count_nonzero(m.replaced))} random replacements are {description.split(':')[0]}, "
                f"expected about {expected:.0f}:{description.split(':', 1)[1]}")
    return None


def _rule_distribution(case, got, memory):
    """Where the chosen positions fall: independently of each other, and at the ends of a row as in the middle."""
    if "statistics" not in case.tags:
        return None
    m = _Masked(case, got)
    chosen = m.predicted & ~m.special
    return _independence_problem(m, chosen) or _ends_problem(m, chosen)


def _ends_problem(m, chosen):
    """The first and the last ordinary token of every row are chosen with probability p, like any other."""
    ordinary = (~m.special).reshape(-1, m.special.shape[-1])
    picked = chosen.reshape(ordinary.shape)
    rows = np.flatnonzero(ordinary.any(axis=1))
    first = ordinary[rows].argmax(axis=1)
    last = ordinary.shape[1] - 1 - ordinary[rows, ::-1].argmax(axis=1)
    for where, columns in (("first", first), ("last", last)):
        k = int(np.count_nonzero(picked[rows, columns]))
        side = unlikely_count(k, len(rows), m.p)
        if side:
            return (f"the {where} ordinary token of a row was chosen in {k} of {len(rows)} rows, "
                    f"{'far fewer' if side == 'low' else 'far more'} than p = {m.p} of them: every ordinary "
                    f"position is chosen with probability p, the ends of a sequence included")
    return None


def _independence_problem(m, chosen):
    """Two ordinary positions (neighbours in a row, or the same column of two rows) are both chosen w.p. p**2."""
    ordinary = ~m.special
    pairs = []
    if ordinary.ndim >= 2:  # first: a pattern shared by the rows shows here most plainly
        pairs.append(("positions in the same column of two rows", ordinary[..., 0:-1:2, :], ordinary[..., 1::2, :],
                      chosen[..., 0:-1:2, :], chosen[..., 1::2, :]))
    pairs.append(("neighbouring positions in a row", ordinary[..., 0:-1:2], ordinary[..., 1::2],
                  chosen[..., 0:-1:2], chosen[..., 1::2]))
    for what, ord_a, ord_b, got_a, got_b in pairs:
        both_ordinary = ord_a & ord_b
        n, k = int(np.count_nonzero(both_ordinary)), int(np.count_nonzero(got_a & got_b & both_ordinary))
        side = unlikely_count(k, n, m.p ** 2)
        if side:
            hint = (" (one draw shared by every row gives each row the same pattern)"
                    if what.startswith("positions in the same") and side == "high" else "")
            return (f"both {what} were chosen in {k} of {n} pairs, expected about p^2 = {m.p ** 2:.4f} of them "
                    f"({m.p ** 2 * n:.0f}): each ordinary token is chosen independently, one rng.random draw "
                    f"per position{hint}")
    return None


def _rule_spread(case, got, memory):
    """Over SPREAD calls on the same tokens, the chosen count varies as a Binomial(n, p) does.

    An answer that chooses exactly round(p n) positions lands within 1 of round(p n) every time; an honest
    one does so with probability q (about 0.17 for n = 400, p = 0.15) each time, q ** SPREAD < ALARM in all.
    """
    spread = case.data.get("spread")
    if spread is None:
        return None
    m = _Masked(case, got)
    ordinary = int(np.count_nonzero(~m.special))
    memory.counts.append(int(np.count_nonzero(m.predicted & ~m.special)))
    if spread[0] + 1 < spread[1] or len(memory.counts) < spread[1]:
        return None
    centre = round(m.p * ordinary)
    low, _ = binomial_tails(centre + 1, ordinary, m.p)
    below, _ = binomial_tails(centre - 2, ordinary, m.p)
    q = low - below  # P(|X - centre| <= 1)
    counts = memory.counts[-spread[1]:]
    if all(abs(c - centre) <= 1 for c in counts) and q ** spread[1] < ALARM:
        return (f"over {spread[1]} seeds the number of chosen tokens was {counts}, always round(p * n) = {centre}: "
                f"an exact count is chosen, but each token is chosen independently with probability p, so the "
                f"count varies from seed to seed (a binomial; this close every time has probability "
                f"{q ** spread[1]:.1e})")
    return None


# Tried in order; the first rule that finds a problem gives the verdict. The seed rule also
# remembers each answer, for the later cases that repeat or contrast a seed.
MLM_MASK_RULES = [
    ("a pair of integer arrays shaped like tokens", _rule_two_integer_arrays),
    ("-100 where nothing is predicted", _rule_ignore_index),
    ("labels are the original tokens", _rule_labels_are_the_originals),
    ("special tokens are never chosen", _rule_specials_never_chosen),
    ("only chosen positions change", _rule_only_chosen_positions_change),
    ("random replacements are ordinary ids", _rule_replacements_are_ordinary),
    ("the same seed gives the same answer, another seed another", _seed_problem),
    ("p=0 chooses nothing, p=1 every ordinary token", _rule_edge_probabilities),
    ("mask_id never a replacement, the original token as likely as any other", _rule_replacement_pool),
    ("80% [MASK], 10% random, 10% unchanged, p of the ordinary tokens", _rule_statistics),
    ("positions chosen independently, the ends of a row like the rest", _rule_distribution),
    ("the chosen count varies between seeds as a binomial", _rule_spread),
]


def _mlm_statistics(d, inputs, tokens, predicted, special, replaced):
    """The shares of a correct answer, each judged by its exact binomial tail (core.unlikely_count, ALARM = 1e-6),
    not by a fixed tolerance: at p = 0.5 on the 18,200 ordinary tokens of two cases, 0.01 was 2.7 standard
    deviations of the chosen share, and an honest answer crossed it at each with probability 0.007. The hints
    still compare shares."""
    p, mask_id = d["p"], d["mask_id"]
    ordinary = ~special
    chosen = _share(predicted, ordinary)
    n_ordinary = int(np.count_nonzero(ordinary))
    if unlikely_count(int(np.count_nonzero(predicted & ordinary)), n_ordinary, p):
        hint = ""
        if abs(chosen - 0.8 * p) < 0.01:
            hint = ("; it looks as if only the [MASK]ed positions were labelled, but the 10% replaced "
                    "and the 10% unchanged ones are predicted too")
        elif abs(chosen - (0.9 + 0.1 / max(2, d["vocab_size"])) * p) < 0.01 or abs(chosen - 0.9 * p) < 0.01:
            hint = ("; it looks as if only the positions whose input changed were labelled, but the 10% of "
                    "chosen tokens left unchanged are predicted too: label every chosen position")
        elif abs(chosen - 0.15) < 0.01 and p != 0.15:
            hint = "; perhaps p is ignored and 0.15 used instead"
        return (f"{chosen:.3f} of the {n_ordinary} ordinary tokens were chosen, expected p = {p}, further off than a "
                f"correct answer comes once in a million gradings (each ordinary token is chosen with probability "
                f"p){hint}")
    # Replacements are drawn from A ordinary ids; 1 in A of them happens to be the original token.
    A = d["vocab_size"] - len(set(d["specials"].tolist()) | {mask_id})
    expected = {"[MASK]": 0.8, "a random token": 0.1 - 0.1 / A, "unchanged": 0.1 + 0.1 / A}
    got = {"[MASK]": _share(inputs == mask_id, predicted), "a random token": _share(replaced, predicted),
           "unchanged": _share(inputs == tokens, predicted)}
    # A second draw of 10% among the 20% not [MASK]ed: 0.2 x 0.1 = 0.02 random, 0.18 unchanged.
    nested = {"[MASK]": 0.8, "a random token": 0.02 - 0.02 / A, "unchanged": 0.18 + 0.02 / A}
    n_chosen = int(np.count_nonzero(predicted))
    for what, share in got.items():
        if unlikely_count(round(share * n_chosen), n_chosen, expected[what]):
            hint = ""
            if abs(got["[MASK]"] - 0.1) < 0.02 and abs(got["a random token"] + got["unchanged"] - 0.9) < 0.02:
                hint = ("; it matches the 80% and a 10% share swapped: [MASK] for 80% of the chosen positions (u < 0.8), "
                        "a random token for 10%, unchanged for 10%")
            if all(abs(got[w] - nested[w]) < 0.01 for w in got):
                hint = ("; it matches a second draw of 10% made among the positions not [MASK]ed (0.2 x 0.1 = "
                        "0.02): draw one number u per chosen position, [MASK] for u < 0.8, a random token for "
                        "0.8 <= u < 0.9, unchanged otherwise")
            return (f"{share:.3f} of the {n_chosen} chosen positions show {what}, expected {expected[what]:.3f} "
                    f"(80% [MASK], 10% a random token, 10% unchanged; measured {got['[MASK]']:.3f} / "
                    f"{got['a random token']:.3f} / {got['unchanged']:.3f}){hint}")
    distinct = len(np.unique(inputs[replaced]))
    if distinct < min(A, np.count_nonzero(replaced)) // 2:
        return (f"the random replacements use only {distinct} different ids out of {A} ordinary ones; draw "
                f"each uniformly from all ordinary ids in 0..vocab_size-1")
    return None


check_mlm_mask = Spec(
    declared.check_mlm_mask,
    cases=_mlm_mask_cases,
    reference=lambda case: None,
    judge=judge_by_rules(MLM_MASK_RULES),
    seal=MLM_MASK_SEAL,
    memory=_Memory,
    clauses=(
        ("tokens of any shape: a batch (B, T)", lambda c: c.data["tokens"].ndim == 2),
        ("... or one sequence (T,)", lambda c: c.data["tokens"].ndim == 1),
        ("special_ids: any collection: a list", lambda c: type(c.args[4]) is list),
        ("... a tuple", lambda c: type(c.args[4]) is tuple),
        ("... or a set", lambda c: type(c.args[4]) is set),
        ("special ids ([CLS], [SEP], padding) are never chosen",
         lambda c: bool(np.isin(c.data["tokens"], c.data["specials"]).any())),
        ("each ordinary token chosen independently with probability p", lambda c: "statistics" in c.tags),
        ("p not passed: 0.15", lambda c: "p" not in c.kwargs and "statistics" in c.tags),
        ("p passed", lambda c: "p" in c.kwargs and "statistics" in c.tags),
        ("of the chosen, 80% mask_id, 10% a random ordinary id (neither special nor mask_id), 10% unchanged",
         lambda c: "statistics" in c.tags),
        ("... any ordinary id, those absent from the batch too", lambda c: "absent from the batch" in c.label),
        ("... and those below a special id", lambda c: "below a special id" in c.label),
        ("labels: the original token at chosen positions, -100 everywhere else", lambda c: True),
        ("every random number from rng: the same seed gives the same masking", lambda c: "same_as" in c.data),
        ("... and not from a generator of its own: another seed gives another", lambda c: "differs_from" in c.data),
    ),
)


# ============================================================================
# Losses (PyTorch): mlm_loss(logits, labels) and causal_lm_loss(logits, tokens, ignore_index=-100)
# (check_causal_lm_loss itself is in plmcourse.judging.gpt; both share what follows)


def _loss_seal(*course_functions):
    seal = [
        (F.cross_entropy, "torch.nn.functional.cross_entropy"),
        (F.nll_loss, "torch.nn.functional.nll_loss"),
        (torch.nn.CrossEntropyLoss, "torch.nn.CrossEntropyLoss"),
        (torch.nn.NLLLoss, "torch.nn.NLLLoss"),
    ]
    for name in ("cross_entropy_loss", "nll_loss", "nll_loss_nd", "nll_loss2d"):
        builtin = getattr(torch._C._nn, name, None)
        if builtin is not None:
            seal.append((builtin, f"torch's cross-entropy (torch._C._nn.{name})"))
    for module, prefix in ((course_nn, "plmcourse.nn"), (ref, "plmcourse.ref")):
        for name in ("cross_entropy", "mlm_loss", "causal_lm_loss", *course_functions):
            seal.append((getattr(module, name), f"{prefix}.{name}"))
    return seal


LOSS_SEAL = _loss_seal()


def _loss_case(seed, shape, device, dtype=torch.float64, ignored=0.6, scale=2.0, none_counted=False,
               causal=False, padded=False, ignore_index=IGNORE):
    """Logits ~ N(0, scale^2) (B, T, V); targets in 0..V-1 with a fraction set to ignore_index
    (-100, the default; another value is passed as the keyword argument ignore_index=...)."""
    rng = np.random.default_rng(seed)
    *lead, V = shape
    logits = rng.standard_normal(shape) * scale
    targets = rng.integers(0, V, size=tuple(lead))
    if ignore_index != IGNORE and 0 <= ignore_index < V:
        targets[targets == ignore_index] = (ignore_index + 1) % V  # the value marks ignored positions only
    if none_counted:
        targets[...] = ignore_index
    elif padded:  # causal: every row ends in padding, marked ignore_index
        for row in targets.reshape(-1, lead[-1]):
            row[rng.integers(lead[-1] // 2, lead[-1]):] = ignore_index
    elif ignored:
        holes = rng.random(tuple(lead)) < ignored
        if not causal:
            holes.reshape(-1)[0] = False  # at least one counted position
        targets[holes] = ignore_index
    what = "tokens" if causal else "labels"
    label = f"seed {seed}: logits of shape {tuple(shape)}, {str(dtype).replace('torch.', '')}"
    mark = str(ignore_index)
    notes = {f"ignore_index={ignore_index}": ignore_index != IGNORE, "large logits": scale >= 100,
             "no labelled position": none_counted, f"padding marked {mark}": padded,
             f"some {what} {mark}": bool(ignored) and not none_counted and not padded}
    label += "".join(f", {note}" for note, on in notes.items() if on)
    logits_t = torch.tensor(logits, dtype=dtype, device=device, requires_grad=True)
    targets_t = torch.tensor(targets, dtype=torch.int64, device=device)
    kwargs = {} if ignore_index == IGNORE else {"ignore_index": ignore_index}
    return Case(label, (logits_t, targets_t), kwargs, tags=frozenset(n for n, on in notes.items() if on),
                data={"logits": logits_t.detach().cpu().double().numpy(), "targets": targets,
                      "dtype": dtype, "causal": causal, "ignore_index": ignore_index},
                grad_leaves=(0,))


def _shift(logits, targets):
    return logits[..., :-1, :], targets[..., 1:]


def _reference_loss(case):
    """Value and gradient of torch.nn.functional.cross_entropy (shifted for the causal loss), float64."""
    d = case.data
    logits = torch.tensor(d["logits"], requires_grad=True)
    targets = torch.tensor(d["targets"])
    x, y = _shift(logits, targets) if d["causal"] else (logits, targets)
    if bool((y != d["ignore_index"]).any()):
        loss = F.cross_entropy(x.reshape(-1, x.shape[-1]), y.reshape(-1), ignore_index=d["ignore_index"])
        (grad,) = torch.autograd.grad(loss, logits)
        return float(loss.detach()), grad.numpy()
    return 0.0, np.zeros_like(d["logits"])


def _nll(logits, targets, axis=-1, ignore_index=IGNORE):
    """-log p(target) per position (0 where ignored) and the counted mask, float64 NumPy."""
    counted = targets != ignore_index
    log_probs = log_softmax(logits, axis)
    picked = np.take_along_axis(log_probs, np.where(counted, targets, 0)[..., None], -1)[..., 0]
    return np.where(counted, -picked, 0.0), counted


def _loss_mistakes(d):
    logits, targets = d["logits"], d["targets"]
    x, y = _shift(logits, targets) if d["causal"] else (logits, targets)
    ignore = d["ignore_index"]
    nll, counted = _nll(x, y, ignore_index=ignore)
    n = max(1, int(counted.sum()))
    ignored_as_zero, _ = _nll(x, np.where(y == ignore, 0, y), ignore_index=ignore)
    if ignore != IGNORE and 0 <= ignore < x.shape[-1]:
        yield (f"the positions marked ignore_index={ignore} counted as ordinary targets: the ignore_index "
               f"argument was not used (is -100 written into the function?); leave out the positions equal "
               f"to ignore_index", lambda: (_masked_mean(*_nll(x, y)),))
    if d["causal"]:
        yield ("no shift: the logits at position t were scored against token t, but they predict token "
               "t + 1 (compare logits[..., :-1, :] with tokens[..., 1:])",
               lambda: (_masked_mean(*_nll(logits, targets, ignore_index=ignore)),))
        yield ("a shift the wrong way round: logits[..., 1:, :] against tokens[..., :-1], but position t "
               "predicts the NEXT token, so use logits[..., :-1, :] and tokens[..., 1:]",
               lambda: (_masked_mean(*_nll(logits[..., 1:, :], targets[..., :-1], ignore_index=ignore)),))
        if logits.ndim == 3:
            yield ("a shift along the batch axis (dim 0) instead of the sequence axis (the one before the "
                   "vocabulary)", lambda: (_masked_mean(*_nll(logits[:-1], targets[1:], ignore_index=ignore)),))
    yield ("an average over every position, the ignored ones included, instead of over the counted "
           "positions only", lambda: (nll.sum() / nll.size,))
    yield "a sum over the positions instead of their mean", lambda: (nll.sum(),)
    if ignore == IGNORE and (counted & (y == 0)).any():
        positive = counted & (y > 0)
        yield ("the positions whose label is token 0 left out (labels > 0?), but 0 is a real token id: count "
               "every position whose label is not -100",
               lambda: ((nll * positive).sum() / max(1, int(positive.sum())),))
    if nll.ndim >= 2 and len({int(c) for c in counted.reshape(-1, counted.shape[-1]).sum(-1)}) > 1:
        def per_row():
            rows_nll, rows_n = nll.reshape(-1, nll.shape[-1]).sum(-1), counted.reshape(-1, counted.shape[-1]).sum(-1)
            return ((rows_nll[rows_n > 0] / rows_n[rows_n > 0]).mean(),)
        yield ("the mean of each sequence's mean, but the loss is one mean over all the counted positions of the "
               "batch (a sequence with more of them weighs more)", per_row)
    if (y == ignore).any():
        yield (f"positions marked {ignore} counted as if their target were token 0; leave them out",
               lambda: (ignored_as_zero.mean(),))
    yield ("-p(target) instead of -log p(target)",
           lambda: (-(np.exp(-nll) * counted).sum() / n,))
    yield "log p(target) without the minus sign", lambda: (-nll.sum() / n,)
    if x.ndim >= 2 and x.shape[-2] > 1:
        yield ("a softmax over the wrong axis; the vocabulary is the LAST axis (dim=-1)",
               lambda: (_masked_mean(*_nll(x, y, axis=-2, ignore_index=ignore)),))


def _masked_mean(nll, counted):
    return nll.sum() / max(1, int(counted.sum()))


def _judge_loss(case, got, expected, name):
    problem = expect_array(got, "the loss", kind="torch")
    if problem:
        if isinstance(got, float):
            return ("the loss is a Python float; return the tensor itself (no .item()) so that "
                    "gradients can flow")
        return problem
    targets = case.args[1]
    if got.dim() != 0:
        if tuple(got.shape) in (tuple(targets.shape), tuple(targets[..., 1:].shape)):
            return (f"the loss has shape {tuple(got.shape)}, one number per position; average them over "
                    f"the counted positions into a single number (a 0-d tensor)")
        return f"the loss has shape {tuple(got.shape)}, expected a single number (a 0-d tensor)"
    value = float(to_numpy(got))
    expected_value, expected_grad = expected
    if not math.isfinite(value):
        if "no labelled position" in case.tags:
            return (f"the loss is {value} for a batch in which no position is counted; return 0 there, "
                    f"not NaN (divide by max(count, 1))")
        if "large logits" in case.tags:
            return (f"the loss is {value} for logits of size about 1e3; use log_softmax or logsumexp instead "
                    f"of log(softmax(...)), which is -inf where a probability underflows to 0 (and exp "
                    f"overflows if no max is subtracted)")
        return f"the loss is {value}"
    tolerance = tolerance_for(case.data["dtype"])
    if not close(np.array(value), np.array(expected_value), **tolerance):
        problem = (f"the loss is {value:.6g}, expected {expected_value:.6g} "
                   f"(torch.nn.functional.cross_entropy{' on shifted targets' if case.data['causal'] else ''})")
        mistakes = ((text, _as_arrays(compute)) for text, compute in _loss_mistakes(case.data))
        return name_mistake(problem, (np.array(value),), mistakes, tolerance)
    return _judge_loss_gradient(case, got, expected_grad, tolerance)


def _as_arrays(compute):
    def wrapped():
        parts = compute()
        return None if parts is None else tuple(np.array(p, dtype=np.float64) for p in parts)
    return wrapped


def _judge_loss_gradient(case, got, expected_grad, tolerance):
    reply = case.reply
    if "no labelled position" in case.tags:  # the 0 must still be a loss that backward() goes through
        if not reply.requires_grad:
            return ("the loss of a batch with no counted position is a 0 that is not connected to the logits, "
                    "so loss.backward() fails in a training loop: compute it from the logits (a sum over the "
                    "counted positions divided by the count clamped to at least 1), not as a fresh torch.tensor(0.0)")
        if reply.grad_error:
            return f"computing the gradient through your function raised {reply.grad_error}"
        if got.dtype != case.args[0].dtype:
            return f"the loss has dtype {got.dtype}, expected {case.args[0].dtype} like the logits"
        (grad,) = reply.grads
        if grad is not None and np.any(to_numpy(grad) != 0):
            return "a batch with no counted position gave a non-zero gradient: nothing is counted, so nothing may move"
        return None
    if not reply.requires_grad:
        return ("gradients do not flow back to the logits: a .detach(), .item(), .numpy() or "
                "torch.tensor(...) on the way cuts the autograd graph, keep every step in torch")
    if reply.grad_error:
        return f"computing the gradient through your function raised {reply.grad_error}"
    (grad,) = reply.grads
    if grad is None:
        return "gradients do not flow back to the logits"
    problem = compare(grad, expected_grad, **tolerance, what="the gradient with respect to the logits")
    return f"{problem} (compared with torch.nn.functional.cross_entropy)" if problem else None


def _explain_loss_error(error):
    text = str(error)
    if "out of bounds" in text or "index -" in text or "Index -" in text:
        return ("a position marked as ignored (-100, or the ignore_index passed) reached the loss as a "
                "target: leave those positions out, or gather with a valid index there and give them weight 0")
    if "view size is not compatible" in text:
        return "a slice is not contiguous: use .reshape instead of .view"
    if "numpy()" in text and "requires grad" in text:
        return "gradients do not flow through .numpy(), keep every step in torch"
    return None


def _mlm_loss_cases(hidden, device):
    cases = [
        _loss_case(10, (2, 6, 11), device),
        _loss_case(11, (3, 5, 7), device, ignored=0.0),
        _loss_case(12, (2, 4, 9), device, dtype=torch.float32),
        _loss_case(13, (2, 5, 8), device, scale=1000.0),
        _loss_case(14, (2, 3, 6), device, none_counted=True),
        _loss_case(15, (2, 3, 4, 7), device),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _loss_case(salt + 110, (4, 7, 13), device, ignored=0.85),
            _loss_case(salt + 111, (3, 9), device),
            _loss_case(salt + 112, (2, 2, 5, 10), device, dtype=torch.float32),
            _loss_case(salt + 113, (3, 6, 6), device, scale=500.0, ignored=0.3),
            _loss_case(salt + 114, (5, 4, 4), device),
        ]
    return cases


def loss_check_parts(name):
    """What the cross-entropy checks share, mlm_loss's here and causal_lm_loss's (judging/gpt.py): the
    reference (F.cross_entropy on the right targets), the judge (told the exercise's `name`), the seal
    and the error hints (both declarations take a device)."""
    return {"reference": _reference_loss, "judge": lambda case, got, expected: _judge_loss(case, got, expected, name),
            "seal": LOSS_SEAL, "explain_error": _explain_loss_error}


check_mlm_loss = Spec(
    declared.check_mlm_loss,
    cases=_mlm_loss_cases,
    **loss_check_parts("mlm_loss"),
    clauses=(
        ("the mean of -log p(label) over the positions whose label is not -100",
         lambda c: "some labels -100" in c.tags),
        ("any leading dimensions (..., V)", lambda c: c.args[0].dim() != 3),
        ("stable for large logits", lambda c: "large logits" in c.tags),
        ("a batch in which no position is labelled gives 0, not NaN", lambda c: "no labelled position" in c.tags),
        ("a 0-d tensor that gradients flow through", lambda c: c.grad_leaves == (0,)),
    ),
)


# ============================================================================
# bert_parameter_count(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2) -> int

BERT_COUNT_SEAL = [
    (course_param_count.bert_parameter_count, "plmcourse.nn.param_count.bert_parameter_count"),
    (course_param_count.parameter_count, "plmcourse.nn.parameter_count"),
    (course_param_count.block_parameter_count, "plmcourse.nn.block_parameter_count"),
    (course_models.Bert.__init__, "plmcourse.nn.Bert (building it to count its parameters)"),
    (course_models.BertForPreTraining.__init__, "plmcourse.nn.BertForPreTraining"),
]


def _bert_count(V, d, L, d_ff, max_len, types, *, biases=True, block_norms=2, embedding_norm=True,
                pooler=True, segments=True, positions=True, projections=4, ffn_width=None, mlm_decoder=False):
    """The BERT count with switches that reproduce known mistakes."""
    b = 1 if biases else 0
    ffn_width = d_ff if ffn_width is None else ffn_width
    embeddings = V * d + (max_len * d if positions else 0) + (types * d if segments else 0)
    embeddings += 2 * d if embedding_norm else 0
    block = projections * (d * d + b * d) + (2 * d * ffn_width + b * (ffn_width + d)) + block_norms * 2 * d
    total = embeddings + L * block + ((d * d + b * d) if pooler else 0)
    return total + (V * d if mlm_decoder else 0)


def _count_case(label, V, d, L, d_ff, max_len, types=None):
    args = (V, d, L, d_ff, max_len) + (() if types is None else (types,))
    types = 2 if types is None else types
    shown = f"{label}: vocab_size={V}, d_model={d}, n_layers={L}, d_ff={d_ff}, max_len={max_len}, " \
            f"type_vocab_size={types}"
    return Case(shown, args, data={"config": (V, d, L, d_ff, max_len, types)})


def _count_cases(hidden):
    cases = [
        _count_case("a tiny BERT", 100, 6, 2, 20, 12, 5),
        _count_case("a tiny BERT with two segments", 100, 8, 1, 24, 16),
        _count_case("BERT-base", 30522, 768, 12, 3072, 512),
        _count_case("BERT-large", 30522, 1024, 24, 4096, 512),
        _count_case("a small BERT", 1000, 32, 3, 128, 64, 2),
    ]
    if hidden:
        cases += [
            _count_case("three segments", 500, 16, 2, 40, 32, 3),
            _count_case("no segment embedding", 800, 24, 4, 72, 128, 0),
            _count_case("one layer", 30000, 128, 1, 512, 512),
            _count_case("BERT-medium", 30522, 512, 8, 2048, 512),
        ]
    return cases


def _count_reference(case):
    V, d, L, d_ff, max_len, types = case.data["config"]
    config = course_models.BertConfig(vocab_size=V, d_model=d, n_layers=L, n_heads=1, d_ff=d_ff,
                                      max_len=max_len, type_vocab_size=types)
    return course_param_count.bert_parameter_count(config)


def _count_mistakes(config):
    count = lambda **kw: (np.array(float(_bert_count(*config, **kw))),)  # noqa: E731
    yield ("the MLM output layer counted; it shares the token embedding matrix and the published "
           "figures leave the pre-training heads out", lambda: count(mlm_decoder=True))
    V, H = config[0], config[1]
    head = H * H + H + 2 * H + V  # the MLM head's transform (dense, LayerNorm) and its output bias
    yield ("the MLM head counted (its dense transform, LayerNorm and output bias): the count is BERT without "
           "the pre-training heads", lambda: (np.array(float(_bert_count(*config)) + head),))
    yield ("the MLM head counted with its own output matrix: the count is BERT without the pre-training heads",
           lambda: (np.array(float(_bert_count(*config)) + head + V * H),))
    yield "no biases: every nn.Linear(d_in, d_out) also has d_out biases", lambda: count(biases=False)
    yield ("no LayerNorm parameters: each LayerNorm has a scale and a shift, 2 * d_model",
           lambda: count(block_norms=0, embedding_norm=False))
    yield "one LayerNorm per layer, but each layer has two", lambda: count(block_norms=1)
    yield "the embedding LayerNorm forgotten", lambda: count(embedding_norm=False)
    yield "the pooler ([CLS] -> dense -> tanh) forgotten", lambda: count(pooler=False)
    yield "the segment embeddings forgotten", lambda: count(segments=False)
    yield "the position embeddings forgotten", lambda: count(positions=False)
    yield ("three attention projections, but there are four: Q, K, V and the output projection",
           lambda: count(projections=3))
    yield "d_ff ignored (4 * d_model used instead)", lambda: count(ffn_width=4 * config[1])
    yield "n_layers + 1 layers counted", lambda: (np.array(float(_bert_count(config[0], config[1], config[2] + 1,
                                                                           *config[3:]))),)
    # One group of biases forgotten: the count is short by exactly that many numbers.
    d, layers, d_ff = config[1:4]
    right = float(_bert_count(*config))
    for short, what in ((4 * d * layers, "the biases of the four attention projections (4 * d_model per layer)"),
                        ((d_ff + d) * layers, "the biases of the feed-forward layers (d_ff + d_model per layer)"),
                        (d, "the bias of the pooler's dense layer (d_model)")):
        yield f"{what} forgotten", lambda short=short: (np.array(right - short),)
    if len(config) > 5 and config[5] != 2:
        yield ("type_vocab_size ignored (2 segment embeddings counted): the segment table has type_vocab_size "
               "rows", lambda: (np.array(float(_bert_count(*config[:5], 2))),))


def _judge_count(case, got, expected):
    if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
        if isinstance(got, float) and math.isfinite(got) and got == int(got):
            return f"the result is the float {got}; return an int (use // rather than /)"
        return f"the result is {describe(got)}, expected an int"
    if int(got) == expected:
        return None
    problem = f"the count is {int(got):,}, expected {expected:,} (difference {int(got) - expected:+,})"
    mistakes = _count_mistakes(case.data["config"])
    return name_mistake(problem, (np.array(float(got)),), mistakes, {"atol": 0.5, "rtol": 0})


check_bert_parameter_count = Spec(
    declared.check_bert_parameter_count,
    cases=_count_cases,
    reference=_count_reference,
    judge=_judge_count,
    seal=BERT_COUNT_SEAL,
    clauses=(
        ("type_vocab_size not passed: 2", lambda c: len(c.args) == 5),
        ("type_vocab_size passed", lambda c: len(c.args) == 6),
        ("n_layers Transformer layers", lambda c: c.args[2] > 1),
        ("exactly 109,482,240 for BERT-base", lambda c: c.label.startswith("BERT-base")),
        ("exactly 335,141,888 for BERT-large", lambda c: c.label.startswith("BERT-large")),
    ),
)
