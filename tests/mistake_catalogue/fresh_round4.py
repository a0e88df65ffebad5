"""Round 4's fresh set: wrong and unusual-but-correct answers to the checks of notebooks 13, 14, 15, 03, 04, 06
and 09, written from the release notebooks alone (the exercise text, its hints, the stubs' docstrings and the
visible cells), without reading the checks or running any of them on these answers.

FRESH = {check name: {"wrong": [(label, fn, reason)], "correct": [(label, fn)]}}, the layout of the earlier
rounds. Each function has the student function's signature and defaults, and its docstring says WRONG or
CORRECT and names the sentence of the exercise it breaks or the unusual route it takes. Every function is
deterministic given its inputs: a random one draws only from the `rng` it is given (the answers that stand for
"uses np.random instead of rng" use a generator of their own with a fixed seed, so that they stay
deterministic while ignoring `rng`, which is the mistake). torch is imported inside the functions that use it,
so that importing this file stays fast.

No EXPECTED table: whoever runs the checks adds it.
"""
import numpy as np


# =============================================================================================================
# 13 · alignment_precision_at_1
# =============================================================================================================


def _unit_rows(x):
    x = np.asarray(x, dtype=np.float64)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n == 0, 1.0, n)


def _pair_array(pairs):
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)


def _procrustes(x, y):
    u, _, vt = np.linalg.svd(x.T @ y)
    return u @ vt


def _translations(test):
    answers = {}
    for s, t in test:
        answers.setdefault(int(s), set()).add(int(t))
    return answers


def alignment_loop_dict(src_emb, tgt_emb, train_pairs, test_pairs):
    """CORRECT: a plain loop over the distinct test sources, with a dict {source: set of translations};
    the mapped vector is not re-normalised (a rotation keeps it unit, and dividing by a positive number
    does not move the argmax)."""
    src, tgt = _unit_rows(src_emb), _unit_rows(tgt_emb)
    train, test = _pair_array(train_pairs), _pair_array(test_pairs)
    w = _procrustes(src[train[:, 0]], tgt[train[:, 1]])
    answers = _translations(test)
    hits = 0
    for s, targets in answers.items():
        nearest = int(np.argmax(tgt @ (src[s] @ w)))
        hits += nearest in targets
    return hits / len(answers)


def alignment_unique_einsum(src_emb, tgt_emb, train_pairs, test_pairs):
    """CORRECT: vectorised with np.unique and einsum; the cosine is computed in full (divided by both norms,
    a zero norm treated as 1), and a source is right if any of its test pairs names the nearest target."""
    src_emb, tgt_emb = np.asarray(src_emb, float), np.asarray(tgt_emb, float)
    ns = np.linalg.norm(src_emb, axis=1)
    nt = np.linalg.norm(tgt_emb, axis=1)
    src = src_emb / np.where(ns == 0, 1, ns)[:, None]
    tgt = tgt_emb / np.where(nt == 0, 1, nt)[:, None]
    train = np.array([list(p) for p in train_pairs], dtype=int).reshape(-1, 2)
    test = np.array([list(p) for p in test_pairs], dtype=int).reshape(-1, 2)
    u, _, vt = np.linalg.svd(np.einsum("kd,ke->de", src[train[:, 0]], tgt[train[:, 1]]))
    sources = np.unique(test[:, 0])
    mapped = np.einsum("sd,de->se", src[sources], u @ vt)
    nm = np.linalg.norm(mapped, axis=1, keepdims=True)
    cos = np.einsum("se,te->st", mapped / np.where(nm == 0, 1, nm), tgt)
    nearest = np.argmax(cos, axis=1)
    right = [np.any((test[:, 0] == s) & (test[:, 1] == n)) for s, n in zip(sources, nearest)]
    return float(np.mean(right))


def alignment_no_unit_rows(src_emb, tgt_emb, train_pairs, test_pairs):
    """WRONG: skips 'first scale every row of both tables to length 1': fits W on the raw rows and ranks targets
    by the raw dot product, so long target vectors win."""
    src, tgt = np.asarray(src_emb, float), np.asarray(tgt_emb, float)
    train, test = _pair_array(train_pairs), _pair_array(test_pairs)
    w = _procrustes(src[train[:, 0]], tgt[train[:, 1]])
    answers = _translations(test)
    return float(np.mean([int(np.argmax(tgt @ (src[s] @ w))) in t for s, t in answers.items()]))


def alignment_zero_row_nan(src_emb, tgt_emb, train_pairs, test_pairs):
    """WRONG: divides by the row length without the 'divide by 1 where the length is 0' guard: a zero row becomes
    NaN, and np.argmax then picks the NaN row as every source's nearest target."""
    src = np.asarray(src_emb, float)
    tgt = np.asarray(tgt_emb, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        src = src / np.linalg.norm(src, axis=1, keepdims=True)
        tgt = tgt / np.linalg.norm(tgt, axis=1, keepdims=True)
    train, test = _pair_array(train_pairs), _pair_array(test_pairs)
    x, y = np.nan_to_num(src[train[:, 0]]), np.nan_to_num(tgt[train[:, 1]])  # keeps the SVD from failing
    w = _procrustes(x, y)
    answers = _translations(test)
    return float(np.mean([int(np.argmax(tgt @ (src[s] @ w))) in t for s, t in answers.items()]))


def alignment_svd_swapped(src_emb, tgt_emb, train_pairs, test_pairs):
    """WRONG: takes the SVD of Yᵀ X instead of 'np.linalg.svd(X.T @ Y)', which gives Wᵀ, the map from the target
    space back to the source space."""
    src, tgt = _unit_rows(src_emb), _unit_rows(tgt_emb)
    train, test = _pair_array(train_pairs), _pair_array(test_pairs)
    w = _procrustes(tgt[train[:, 1]], src[train[:, 0]])
    answers = _translations(test)
    return float(np.mean([int(np.argmax(tgt @ (src[s] @ w))) in t for s, t in answers.items()]))


def alignment_test_targets_only(src_emb, tgt_emb, train_pairs, test_pairs):
    """WRONG: looks for the nearest target only among the test pairs' targets, not 'the row of the **whole**
    target table'."""
    src, tgt = _unit_rows(src_emb), _unit_rows(tgt_emb)
    train, test = _pair_array(train_pairs), _pair_array(test_pairs)
    w = _procrustes(src[train[:, 0]], tgt[train[:, 1]])
    candidates = np.unique(test[:, 1])
    answers = _translations(test)
    hits = [int(candidates[np.argmax(tgt[candidates] @ (src[s] @ w))]) in t for s, t in answers.items()]
    return float(np.mean(hits))


def alignment_per_pair(src_emb, tgt_emb, train_pairs, test_pairs):
    """WRONG: averages over the test pairs, not 'the fraction of **distinct** test sources': a source with two
    translations counts twice, and can never be right on both."""
    src, tgt = _unit_rows(src_emb), _unit_rows(tgt_emb)
    train, test = _pair_array(train_pairs), _pair_array(test_pairs)
    w = _procrustes(src[train[:, 0]], tgt[train[:, 1]])
    nearest = np.argmax((src[test[:, 0]] @ w) @ tgt.T, axis=1)
    return float(np.mean(nearest == test[:, 1]))


def alignment_argmax_wrong_axis(src_emb, tgt_emb, train_pairs, test_pairs):
    """WRONG: builds the similarity as targets x sources and takes the argmax over the last axis, so 'nearest'
    is a test source for each target, read as if it were a target for each source."""
    src, tgt = _unit_rows(src_emb), _unit_rows(tgt_emb)
    train, test = _pair_array(train_pairs), _pair_array(test_pairs)
    w = _procrustes(src[train[:, 0]], tgt[train[:, 1]])
    answers = _translations(test)
    sources = sorted(answers)
    sims = tgt @ (src[sources] @ w).T                  # (n_tgt, n_sources)
    nearest = np.argmax(sims, axis=-1)                # should be axis=0 here
    hits = [int(nearest[i % len(nearest)]) in answers[s] for i, s in enumerate(sources)]
    return float(np.mean(hits))


def alignment_needs_arrays(src_emb, tgt_emb, train_pairs, test_pairs):
    """WRONG (crashes): indexes `train_pairs[:, 0]` directly, so the 'lists of (source, target) tuples' the
    exercise allows raise a TypeError."""
    src, tgt = _unit_rows(src_emb), _unit_rows(tgt_emb)
    w = _procrustes(src[train_pairs[:, 0]], tgt[train_pairs[:, 1]])
    answers = _translations(test_pairs)
    return float(np.mean([int(np.argmax(tgt @ (src[s] @ w))) in t for s, t in answers.items()]))


def alignment_last_translation_only(src_emb, tgt_emb, train_pairs, test_pairs):
    """WRONG: dict(zip(sources, targets)) keeps only the last translation of a source, against 'right if either
    is its nearest'."""
    src, tgt = _unit_rows(src_emb), _unit_rows(tgt_emb)
    train, test = _pair_array(train_pairs), _pair_array(test_pairs)
    w = _procrustes(src[train[:, 0]], tgt[train[:, 1]])
    answer = dict(zip(test[:, 0].tolist(), test[:, 1].tolist()))
    return float(np.mean([int(np.argmax(tgt @ (src[s] @ w))) == t for s, t in answer.items()]))


def alignment_exclude_train_targets(src_emb, tgt_emb, train_pairs, test_pairs):
    """WRONG: removes the train pairs' targets from the candidates ('they are already taken'), though the nearest
    target is searched in the whole target table."""
    src, tgt = _unit_rows(src_emb), _unit_rows(tgt_emb)
    train, test = _pair_array(train_pairs), _pair_array(test_pairs)
    w = _procrustes(src[train[:, 0]], tgt[train[:, 1]])
    allowed = np.ones(len(tgt), bool)
    allowed[train[:, 1]] = False
    answers = _translations(test)
    hits = []
    for s, t in answers.items():
        cos = np.where(allowed, tgt @ (src[s] @ w), -np.inf)
        hits.append(int(np.argmax(cos)) in t)
    return float(np.mean(hits))


def alignment_cosine_threshold(src_emb, tgt_emb, train_pairs, test_pairs):
    """WRONG: counts a source as right only when its nearest target is a translation AND the cosine is above 0.5,
    a threshold the exercise never mentions."""
    src, tgt = _unit_rows(src_emb), _unit_rows(tgt_emb)
    train, test = _pair_array(train_pairs), _pair_array(test_pairs)
    w = _procrustes(src[train[:, 0]], tgt[train[:, 1]])
    answers = _translations(test)
    hits = []
    for s, t in answers.items():
        cos = tgt @ (src[s] @ w)
        hits.append(int(np.argmax(cos)) in t and cos.max() > 0.5)
    return float(np.mean(hits))


def alignment_fit_on_raw_rows(src_emb, tgt_emb, train_pairs, test_pairs):
    """WRONG: fits the rotation on the raw rows and only normalises for the cosine search; 'X, Y: the unit rows
    of the train pairs' sources and targets'."""
    raw_s, raw_t = np.asarray(src_emb, float), np.asarray(tgt_emb, float)
    src, tgt = _unit_rows(raw_s), _unit_rows(raw_t)
    train, test = _pair_array(train_pairs), _pair_array(test_pairs)
    w = _procrustes(raw_s[train[:, 0]], raw_t[train[:, 1]])
    answers = _translations(test)
    return float(np.mean([int(np.argmax(tgt @ (src[s] @ w))) in t for s, t in answers.items()]))


# =============================================================================================================
# 13 · whole_entity_mask
# =============================================================================================================


def _wem_units(T, spans, order="given", end_inclusive=False, singles=True):
    spans = [(int(s), int(e) + (1 if end_inclusive else 0)) for s, e in (list(sp) for sp in spans)]
    covered = np.zeros(T, bool)
    for s, e in spans:
        covered[s:e] = True
    units = list(spans)
    if singles:
        units += [(i, i + 1) for i in range(T) if not covered[i]]
    if order == "sorted":
        units.sort()
    return units


def _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, order="given", shuffle=True,
         u_per_token=False, rand_includes_mask=False, rand_once_per_unit=False, stop_at_misfit=False,
         batch_budget=False, singles=True, swap_random_keep=False, labels_changed_only=False, copy=True,
         end_inclusive=False, strict_fit=False, pool_from_batch=False, shares=(0.8, 0.9)):
    """Whole-entity masking with switches for the mistakes below; with the defaults it follows the exercise."""
    token_ids = np.asarray(token_ids)
    original = token_ids.copy()
    inputs = original.copy() if copy else token_ids
    labels = np.full(original.shape, -100, dtype=np.int64)
    B, T = original.shape
    pool = np.unique(original[original != mask_id]) if pool_from_batch else None
    left_batch = budget
    for b in range(B):
        units = _wem_units(T, entity_spans[b], order, end_inclusive, singles)
        units = [(s, min(e, T)) for s, e in units]
        left = left_batch if batch_budget else budget
        for idx in (rng.permutation(len(units)) if shuffle else range(len(units))):
            s, e = units[idx]
            n = e - s
            if n > left or (strict_fit and n >= left):
                if stop_at_misfit:
                    break
                continue
            left -= n
            labels[b, s:e] = original[b, s:e]
            us = rng.random(n) if u_per_token else np.full(n, rng.random())
            to_mask = us < shares[0]
            to_random = (us >= shares[1]) if swap_random_keep else (us >= shares[0]) & (us < shares[1])
            row = inputs[b, s:e].copy()
            row[to_mask] = mask_id
            k = int(to_random.sum())
            if k:
                m = 1 if rand_once_per_unit else k
                if rand_includes_mask:
                    ids = rng.integers(0, vocab_size, size=m)
                elif pool is not None:
                    ids = rng.choice(pool, size=m)
                else:
                    ids = rng.integers(0, vocab_size - 1, size=m)
                    ids = ids + (ids >= mask_id)
                row[to_random] = np.resize(ids, k)
            inputs[b, s:e] = row
            if labels_changed_only:
                labels[b, s:e] = np.where(to_mask | to_random, labels[b, s:e], -100)
        if batch_budget:
            left_batch = left
    return inputs, labels


def entity_mask_literal(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """CORRECT: the units numbered as the exercise lists them (the spans as given, then every single position
    outside them, left to right); u drawn as each unit is taken; random ids from rng.integers(0, V - 1) shifted
    past mask_id."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size)


def entity_mask_sorted_units(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """CORRECT (where the spec is free): the units numbered by their position in the row (spans and single
    positions sorted by start). 'The units of a row are its entity spans and every single position outside all
    spans' does not say how the units are numbered before `rng.permutation(number of units)` orders them, and the
    spans come 'in any order'."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, order="sorted")


def entity_mask_choice_pool_loop(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """CORRECT: a loop written from scratch, a set for the positions inside spans, random ids with rng.choice over
    the explicit pool 0..V-1 without mask_id ('uniform over 0..vocab_size-1 without mask_id' names no call; this
    one happens to consume rng as rng.integers(0, V - 1) would)."""
    token_ids = np.asarray(token_ids)
    inputs = token_ids.copy()
    labels = np.full(token_ids.shape, -100, dtype=int)
    pool = np.delete(np.arange(vocab_size), mask_id) if 0 <= mask_id < vocab_size else np.arange(vocab_size)
    for b in range(token_ids.shape[0]):
        spans = [(int(s), int(e)) for s, e in entity_spans[b]]
        inside = set()
        for s, e in spans:
            inside.update(range(s, e))
        units = spans + [(i, i + 1) for i in range(token_ids.shape[1]) if i not in inside]
        left = budget
        for idx in rng.permutation(len(units)):
            s, e = units[idx]
            if e - s <= left:
                left -= e - s
                labels[b, s:e] = token_ids[b, s:e]
                u = rng.random()
                if u < 0.8:
                    inputs[b, s:e] = mask_id
                elif u < 0.9:
                    inputs[b, s:e] = rng.choice(pool, size=e - s)
    return inputs, labels


def entity_mask_u_per_token(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: draws u for every token of a taken unit; 'each taken unit draws **one** u = rng.random()', so an
    entity is masked, replaced or kept as a whole."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, u_per_token=True)


def entity_mask_random_may_be_mask(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: random ids from rng.integers(0, vocab_size), so a 'random' token can be mask_id; the exercise says
    uniform over 0..vocab_size−1 **without** mask_id."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, rand_includes_mask=True)


def entity_mask_one_random_id_per_unit(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: a unit in the random branch gets one random id repeated on all its tokens; 'each of its tokens
    becomes a random id'."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, rand_once_per_unit=True)


def entity_mask_stop_at_first_misfit(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: stops at the first unit that does not fit; 'if it does not fit, skip it and go on, a shorter unit
    later may still fit'."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, stop_at_misfit=True)


def entity_mask_budget_per_batch(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: one budget shared by the whole batch instead of 'what is left of the row's budget': the first rows
    use it up and the later rows get nothing."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, batch_budget=True)


def entity_mask_spans_only(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: only the entity spans are units; 'the units of a row are its entity spans and every single position
    outside all spans', so with no spans nothing is ever masked."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, singles=False)


def entity_mask_no_shuffle(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: goes through the units left to right without 'the order of rng.permutation(number of units)', so the
    budget is always spent on the start of the row."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, order="sorted", shuffle=False)


def entity_mask_own_seed(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: draws from a generator of its own (np.random with a fixed seed) instead of the `rng` it is given, so
    every seed gives the same masking."""
    return _wem(token_ids, entity_spans, budget, np.random.default_rng(1234), mask_id, vocab_size)


def entity_mask_random_and_keep_swapped(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: 0.8 <= u < 0.9 keeps the unit and u >= 0.9 replaces it; the exercise has it the other way round
    ('0.8 ≤ u < 0.9 → each of its tokens becomes a random id; otherwise the unit stays'). Same shares, other
    units."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, swap_random_keep=True)


def entity_mask_labels_only_changed(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: labels -100 on a taken unit that stayed as it is; 'labels: the original token at every chosen
    position'."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, labels_changed_only=True)


def entity_mask_in_place(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: writes the masks into `token_ids` itself and returns it; 'inputs a new array (do not change
    token_ids)'."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, copy=False)


def entity_mask_end_inclusive(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: reads a span's end as included; spans are '(start, end) spans, end excluded', so each entity takes
    one token too many."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, end_inclusive=True)


def entity_mask_strict_fit(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: takes a unit only if its length is strictly below what is left, so the budget is never filled
    exactly; 'take a unit if its length fits in what is left of the row's budget'."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, strict_fit=True)


def entity_mask_pool_from_batch(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: draws random ids only from the ids that occur in the batch, not 'uniform over 0..vocab_size−1
    without mask_id'."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, pool_from_batch=True)


def entity_mask_shares_swapped(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """WRONG: u < 0.1 masks and 0.1 <= u < 0.9 replaces with random ids: the 80 and the 10 swapped."""
    return _wem(token_ids, entity_spans, budget, rng, mask_id, vocab_size, shares=(0.1, 0.9))


# =============================================================================================================
# 13 · unfreezing_groups
# =============================================================================================================


def _group_names(n_layers):
    return ["head"] + [f"layer.{i}" for i in range(n_layers - 1, -1, -1)] + ["embeddings"]


def unfreezing_loop(n_layers, step, unfreeze_every, base_lr, decay):
    """CORRECT: a loop over k from the top; k * unfreeze_every <= step covers unfreeze_every = 0 without a special
    case."""
    rates = {}
    for k, name in enumerate(_group_names(n_layers)):
        rates[name] = float(base_lr * decay ** k) if step >= k * unfreeze_every else 0.0
    return rates


def unfreezing_count_unfrozen(n_layers, step, unfreeze_every, base_lr, decay):
    """CORRECT: counts how many groups train (step // unfreeze_every + 1, all when unfreeze_every is 0) and
    builds the names bottom-up, then reverses them into the top-first order."""
    names = ["embeddings"] + [f"layer.{i}" for i in range(n_layers)] + ["head"]
    names = names[::-1]
    n_groups = len(names)
    training = n_groups if unfreeze_every == 0 else min(n_groups, step // unfreeze_every + 1)
    return {name: (base_lr * np.power(float(decay), k) if k < training else 0.0) for k, name in enumerate(names)}


def unfreezing_bottom_up(n_layers, step, unfreeze_every, base_lr, decay):
    """WRONG: unfreezes from the embeddings up; 'the head from the start, then one more group every unfreeze_every
    steps, top first, the embeddings last'."""
    names = _group_names(n_layers)
    last = len(names) - 1
    return {name: (base_lr * decay ** k if step >= (last - k) * unfreeze_every else 0.0)
            for k, name in enumerate(names)}


def unfreezing_frozen_left_out(n_layers, step, unfreeze_every, base_lr, decay):
    """WRONG: leaves frozen groups out of the dict; 'a frozen group's rate is 0.0, and every group is in the
    dict'."""
    return {name: base_lr * decay ** k for k, name in enumerate(_group_names(n_layers))
            if step >= k * unfreeze_every}


def unfreezing_decay_reversed(n_layers, step, unfreeze_every, base_lr, decay):
    """WRONG: the decay runs the wrong way (the embeddings get base_lr, the head the smallest rate); 'base_lr *
    decay ** k' with the head k = 0."""
    names = _group_names(n_layers)
    last = len(names) - 1
    return {name: (base_lr * decay ** (last - k) if step >= k * unfreeze_every else 0.0)
            for k, name in enumerate(names)}


def unfreezing_strictly_after(n_layers, step, unfreeze_every, base_lr, decay):
    """WRONG (off by one): group k trains only after step k * unfreeze_every; 'group k trains from step
    k * unfreeze_every on'."""
    return {name: (base_lr * decay ** k if step > k * unfreeze_every or k == 0 else 0.0)
            for k, name in enumerate(_group_names(n_layers))}


def unfreezing_one_based_names(n_layers, step, unfreeze_every, base_lr, decay):
    """WRONG: names the layers layer.{n_layers} ... layer.1; 'layer.{n_layers-1}, ..., layer.0 (layer.0 is the
    block next to the embeddings)'."""
    names = ["head"] + [f"layer.{i}" for i in range(n_layers, 0, -1)] + ["embeddings"]
    return {name: (base_lr * decay ** k if step >= k * unfreeze_every else 0.0) for k, name in enumerate(names)}


def unfreezing_divides_by_every(n_layers, step, unfreeze_every, base_lr, decay):
    """WRONG (crashes): computes the number of unfrozen groups as step // unfreeze_every, which divides by zero for
    'unfreeze_every=0 means every group trains from step 0'."""
    training = step // unfreeze_every + 1
    return {name: (base_lr * decay ** k if k < training else 0.0) for k, name in enumerate(_group_names(n_layers))}


def unfreezing_exponent_off_by_one(n_layers, step, unfreeze_every, base_lr, decay):
    """WRONG: base_lr * decay ** (k + 1), so even the head gets a decayed rate; 'call the head k = 0'."""
    return {name: (base_lr * decay ** (k + 1) if step >= k * unfreeze_every else 0.0)
            for k, name in enumerate(_group_names(n_layers))}


def unfreezing_head_and_top_together(n_layers, step, unfreeze_every, base_lr, decay):
    """WRONG: treats the head as already trained and starts the top layer at step 0 too (group k from step
    (k - 1) * unfreeze_every); 'group k trains from step k * unfreeze_every on'."""
    return {name: (base_lr * decay ** k if step >= max(k - 1, 0) * unfreeze_every else 0.0)
            for k, name in enumerate(_group_names(n_layers))}


def unfreezing_frozen_none(n_layers, step, unfreeze_every, base_lr, decay):
    """WRONG: a frozen group's rate is None; 'a frozen group's rate is 0.0'."""
    return {name: (base_lr * decay ** k if step >= k * unfreeze_every else None)
            for k, name in enumerate(_group_names(n_layers))}


# =============================================================================================================
# 14 · patchify
# =============================================================================================================


def _check_divisible(images, patch):
    _, _, H, W = np.shape(images)
    if H % patch or W % patch:
        raise ValueError(f"{H} x {W} is not a multiple of {patch}")


def patchify_torch_permute(images, patch):
    """CORRECT: the same split/permute/flatten in torch, converted back to NumPy in the images' dtype."""
    import torch
    images = np.asarray(images)
    B, C, H, W = images.shape
    if H % patch or W % patch:
        raise ValueError("H and W must be multiples of patch")
    t = torch.from_numpy(np.ascontiguousarray(images))
    t = t.reshape(B, C, H // patch, patch, W // patch, patch).permute(0, 2, 4, 1, 3, 5)
    return t.reshape(B, -1, C * patch * patch).numpy().astype(images.dtype, copy=False)


def patchify_loops(images, patch):
    """CORRECT: two loops over the grid, each patch sliced and flattened (its C-order flatten is channel, row,
    column), stacked row-major."""
    images = np.asarray(images)
    B, C, H, W = images.shape
    if H % patch != 0 or W % patch != 0:
        raise ValueError("not a multiple of the patch size")
    tokens = []
    for r in range(H // patch):
        for s in range(W // patch):
            tokens.append(images[:, :, r * patch:(r + 1) * patch, s * patch:(s + 1) * patch].reshape(B, -1))
    return np.stack(tokens, axis=1)


def patchify_column_major(images, patch):
    """WRONG: the patches come column by column; 'row-major order: the top row of patches from left to right'."""
    _check_divisible(images, patch)
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // patch, patch, W // patch, patch).transpose(0, 4, 2, 1, 3, 5)
    return x.reshape(B, -1, C * patch * patch)


def patchify_channel_last(images, patch):
    """WRONG: flattens each patch pixel row, pixel column, then channel (an (H, W, C) habit); 'channel first,
    then pixel row, then pixel column'."""
    _check_divisible(images, patch)
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // patch, patch, W // patch, patch).transpose(0, 2, 4, 3, 5, 1)
    return x.reshape(B, -1, C * patch * patch)


def patchify_plain_reshape(images, patch):
    """WRONG: a single reshape, which cuts runs of consecutive pixels, not squares (the hint's warning)."""
    _check_divisible(images, patch)
    B, C, H, W = images.shape
    return images.reshape(B, (H // patch) * (W // patch), C * patch * patch)


def patchify_crops_silently(images, patch):
    """WRONG: crops the image to a multiple of patch instead of raising; 'raise ValueError when H or W is not a
    multiple of patch'."""
    B, C, H, W = images.shape
    images = images[:, :, :H - H % patch, :W - W % patch]
    H, W = images.shape[2:]
    x = images.reshape(B, C, H // patch, patch, W // patch, patch).transpose(0, 2, 4, 1, 3, 5)
    return x.reshape(B, -1, C * patch * patch)


def patchify_float_cast(images, patch):
    """WRONG: returns float64 whatever came in; 'keep the images' dtype (cutting moves pixels and changes
    none)'."""
    _check_divisible(images, patch)
    B, C, H, W = images.shape
    x = images.astype(np.float64).reshape(B, C, H // patch, patch, W // patch, patch).transpose(0, 2, 4, 1, 3, 5)
    return x.reshape(B, -1, C * patch * patch)


def patchify_checks_height_only(images, patch):
    """WRONG: a loop over the grid that checks only H; with a width that is not a multiple of patch its
    range(0, W - patch + 1, patch) silently drops the last columns ('raise ValueError when H or W is not a
    multiple of patch')."""
    images = np.asarray(images)
    B, C, H, W = images.shape
    if H % patch:
        raise ValueError("height is not a multiple of patch")
    tokens = [images[:, :, r:r + patch, s:s + patch].reshape(B, -1)
              for r in range(0, H - patch + 1, patch) for s in range(0, W - patch + 1, patch)]
    return np.stack(tokens, axis=1)


def patchify_pixels_transposed(images, patch):
    """WRONG: flattens each patch channel, pixel column, pixel row (the inner two axes swapped); entry c·p·p + i·p
    + j must be images[b, c, r·p + i, s·p + j] with i the row."""
    _check_divisible(images, patch)
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // patch, patch, W // patch, patch).transpose(0, 2, 4, 1, 5, 3)
    return x.reshape(B, -1, C * patch * patch)


def patchify_assert(images, patch):
    """WRONG: uses assert, so a bad size raises AssertionError, not 'ValueError'."""
    B, C, H, W = images.shape
    assert H % patch == 0 and W % patch == 0, "image size must be a multiple of the patch"
    x = images.reshape(B, C, H // patch, patch, W // patch, patch).transpose(0, 2, 4, 1, 3, 5)
    return x.reshape(B, -1, C * patch * patch)


# =============================================================================================================
# 14 · joint_attention_mask
# =============================================================================================================


def _real(text_mask, image_mask):
    return np.concatenate([np.asarray(text_mask).astype(bool), np.asarray(image_mask).astype(bool)], axis=1)


def joint_mask_einsum(text_mask, image_mask):
    """CORRECT: the outer 'and' with einsum on 0/1 integers, then 'or' with the identity."""
    real = _real(text_mask, image_mask).astype(np.int64)
    both = np.einsum("bi,bj->bij", real, real) > 0
    return both | np.eye(real.shape[1], dtype=bool)[None]


def joint_mask_loops(text_mask, image_mask):
    """CORRECT: three loops writing the one-line rule mask[b, i, j] = (real_i and real_j) or i == j."""
    real = [list(map(bool, t)) + list(map(bool, m)) for t, m in zip(np.asarray(text_mask), np.asarray(image_mask))]
    B = len(real)
    L = np.asarray(text_mask).shape[1] + np.asarray(image_mask).shape[1]
    out = np.zeros((B, L, L), dtype=bool)
    for b in range(B):
        for i in range(L):
            for j in range(L):
                out[b, i, j] = (real[b][i] and real[b][j]) or i == j
    return out


def joint_mask_torch(text_mask, image_mask):
    """CORRECT: built in torch and converted back to a NumPy bool array."""
    import torch
    real = torch.cat([torch.as_tensor(np.asarray(text_mask)).bool(), torch.as_tensor(np.asarray(image_mask)).bool()],
                     dim=1)
    L = real.shape[1]
    out = (real[:, :, None] & real[:, None, :]) | torch.eye(L, dtype=torch.bool)
    return out.numpy()


def joint_mask_no_diagonal(text_mask, image_mask):
    """WRONG: padding rows are all False; 'a padding position attends to itself only: its row is never empty'."""
    real = _real(text_mask, image_mask)
    return real[:, :, None] & real[:, None, :]


def joint_mask_image_first(text_mask, image_mask):
    """WRONG: puts the image positions first; 'the sequence is [text; image]: the T text positions first'."""
    real = np.concatenate([np.asarray(image_mask).astype(bool), np.asarray(text_mask).astype(bool)], axis=1)
    return (real[:, :, None] & real[:, None, :]) | np.eye(real.shape[1], dtype=bool)


def joint_mask_keys_only(text_mask, image_mask):
    """WRONG: masks only the keys, so a padding query attends to every real token; 'a padding position attends to
    itself only'."""
    real = _real(text_mask, image_mask)
    L = real.shape[1]
    return np.broadcast_to(real[:, None, :], (real.shape[0], L, L)) | np.eye(L, dtype=bool)


def joint_mask_int_dtype(text_mask, image_mask):
    """WRONG: returns 0/1 integers from a product of the masks; 'return a boolean array'."""
    real = np.concatenate([np.asarray(text_mask), np.asarray(image_mask)], axis=1).astype(np.int64)
    return np.maximum(real[:, :, None] * real[:, None, :], np.eye(real.shape[1], dtype=np.int64))


def joint_mask_or(text_mask, image_mask):
    """WRONG: (real_i or real_j) instead of (real_i and real_j): real queries attend to padding keys."""
    real = _real(text_mask, image_mask)
    return (real[:, :, None] | real[:, None, :]) | np.eye(real.shape[1], dtype=bool)


def joint_mask_trailing_padding(text_mask, image_mask):
    """WRONG: assumes padding only at the end of each modality and rebuilds the masks from their lengths; 'False
    (or 0) for padding, anywhere in the row'."""
    text_mask, image_mask = np.asarray(text_mask), np.asarray(image_mask)
    T, N = text_mask.shape[1], image_mask.shape[1]
    t_len = text_mask.astype(bool).sum(1)
    i_len = image_mask.astype(bool).sum(1)
    real = np.concatenate([np.arange(T)[None] < t_len[:, None], np.arange(N)[None] < i_len[:, None]], axis=1)
    return (real[:, :, None] & real[:, None, :]) | np.eye(T + N, dtype=bool)


def joint_mask_head_axis(text_mask, image_mask):
    """WRONG: adds the head axis itself, (B, 1, L, L); 'without a head axis (the model adds it)'."""
    real = _real(text_mask, image_mask)
    out = (real[:, :, None] & real[:, None, :]) | np.eye(real.shape[1], dtype=bool)
    return out[:, None]


# =============================================================================================================
# 14 · clip_loss
# =============================================================================================================


def _normalise_rows(x):
    x = np.asarray(x, dtype=np.float64)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n == 0, 1.0, n)


def _log_softmax_rows(z):
    m = z.max(axis=1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=1, keepdims=True))


def clip_logaddexp_reduce(image_emb, text_emb, temperature=0.07):
    """CORRECT: log-sum-exp with np.logaddexp.reduce (stable by construction) along each axis; the diagonal read
    with np.diag."""
    img, txt = _normalise_rows(image_emb), _normalise_rows(text_emb)
    logits = img @ txt.T / temperature
    diag = np.diag(logits)
    row = np.logaddexp.reduce(logits, axis=1) - diag
    col = np.logaddexp.reduce(logits, axis=0) - diag
    return float((row.mean() + col.mean()) / 2)


def clip_torch_cross_entropy(image_emb, text_emb, temperature=0.07):
    """CORRECT: torch in float64: F.normalize (a zero row stays zero), F.cross_entropy on the logits and on their
    transpose, converted back to a float."""
    import torch
    import torch.nn.functional as F
    img = F.normalize(torch.as_tensor(np.asarray(image_emb), dtype=torch.float64), dim=1)
    txt = F.normalize(torch.as_tensor(np.asarray(text_emb), dtype=torch.float64), dim=1)
    logits = img @ txt.T / temperature
    target = torch.arange(logits.shape[0])
    return float((F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2)


def clip_loop(image_emb, text_emb, temperature=0.07):
    """CORRECT: a loop over pairs; each row's and each column's cross-entropy with the max subtracted."""
    img, txt = _normalise_rows(image_emb), _normalise_rows(text_emb)
    logits = img @ txt.T / temperature
    B = logits.shape[0]
    total_rows, total_cols = 0.0, 0.0
    for i in range(B):
        r, c = logits[i], logits[:, i]
        total_rows += r.max() + np.log(np.sum(np.exp(r - r.max()))) - r[i]
        total_cols += c.max() + np.log(np.sum(np.exp(c - c.max()))) - c[i]
    return float(0.5 * (total_rows / B + total_cols / B))


def clip_no_normalisation(image_emb, text_emb, temperature=0.07):
    """WRONG: uses the raw dot product; 'normalise every row to length 1 (cosine similarity)'."""
    logits = np.asarray(image_emb, float) @ np.asarray(text_emb, float).T / temperature
    idx = np.arange(len(logits))
    return float((-_log_softmax_rows(logits)[idx, idx].mean() - _log_softmax_rows(logits.T)[idx, idx].mean()) / 2)


def clip_one_direction(image_emb, text_emb, temperature=0.07):
    """WRONG: only the image-to-text rows; 'return their **mean**' (of the row and the column losses)."""
    logits = _normalise_rows(image_emb) @ _normalise_rows(text_emb).T / temperature
    idx = np.arange(len(logits))
    return float(-_log_softmax_rows(logits)[idx, idx].mean())


def clip_sum_of_directions(image_emb, text_emb, temperature=0.07):
    """WRONG: adds the two directions instead of returning their mean."""
    logits = _normalise_rows(image_emb) @ _normalise_rows(text_emb).T / temperature
    idx = np.arange(len(logits))
    return float(-_log_softmax_rows(logits)[idx, idx].mean() - _log_softmax_rows(logits.T)[idx, idx].mean())


def clip_global_max_shift(image_emb, text_emb, temperature=0.07):
    """WRONG: subtracts the matrix's single largest logit instead of each row's (and column's); at temperature
    0.001 a row far below the global max underflows to exp = 0 and its log is -inf."""
    logits = _normalise_rows(image_emb) @ _normalise_rows(text_emb).T / temperature
    z = logits - logits.max()
    with np.errstate(divide="ignore"):
        row = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        col = z - np.log(np.exp(z).sum(axis=0, keepdims=True))
    idx = np.arange(len(z))
    return float(-(row[idx, idx].mean() + col[idx, idx].mean()) / 2)


def clip_zero_row_nan(image_emb, text_emb, temperature=0.07):
    """WRONG: divides by the row norm without a guard, so a zero row gives NaN; 'a row of zeros stays zero (cosine
    0 with everything, never NaN)'."""
    img, txt = np.asarray(image_emb, float), np.asarray(text_emb, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        img = img / np.linalg.norm(img, axis=1, keepdims=True)
        txt = txt / np.linalg.norm(txt, axis=1, keepdims=True)
    logits = img @ txt.T / temperature
    idx = np.arange(len(logits))
    return float((-_log_softmax_rows(logits)[idx, idx].mean() - _log_softmax_rows(logits.T)[idx, idx].mean()) / 2)


def clip_no_max_shift(image_emb, text_emb, temperature=0.07):
    """WRONG: log of a softmax without the shift; 'compute the log-softmax stably (subtract the max first): at
    temperature 0.001 ... np.exp(1000) is inf'."""
    logits = _normalise_rows(image_emb) @ _normalise_rows(text_emb).T / temperature
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e = np.exp(logits)
        p_row = e / e.sum(axis=1, keepdims=True)
        p_col = e / e.sum(axis=0, keepdims=True)
        return float(-(np.log(np.diag(p_row)).mean() + np.log(np.diag(p_col)).mean()) / 2)


def clip_times_temperature(image_emb, text_emb, temperature=0.07):
    """WRONG: multiplies by the temperature; 'logits = image @ text.T / temperature'."""
    logits = _normalise_rows(image_emb) @ _normalise_rows(text_emb).T * temperature
    idx = np.arange(len(logits))
    return float((-_log_softmax_rows(logits)[idx, idx].mean() - _log_softmax_rows(logits.T)[idx, idx].mean()) / 2)


def clip_per_pair(image_emb, text_emb, temperature=0.07):
    """WRONG: returns the (B,) per-pair losses, not their mean 'as a float'."""
    logits = _normalise_rows(image_emb) @ _normalise_rows(text_emb).T / temperature
    idx = np.arange(len(logits))
    return (-_log_softmax_rows(logits)[idx, idx] - _log_softmax_rows(logits.T)[idx, idx]) / 2


def clip_normalise_columns(image_emb, text_emb, temperature=0.07):
    """WRONG: normalises each feature column over the batch (axis 0) instead of 'every row to length 1'."""
    img, txt = np.asarray(image_emb, float), np.asarray(text_emb, float)
    ni, nt = np.linalg.norm(img, axis=0, keepdims=True), np.linalg.norm(txt, axis=0, keepdims=True)
    img, txt = img / np.where(ni == 0, 1, ni), txt / np.where(nt == 0, 1, nt)
    logits = img @ txt.T / temperature
    idx = np.arange(len(logits))
    return float((-_log_softmax_rows(logits)[idx, idx].mean() - _log_softmax_rows(logits.T)[idx, idx].mean()) / 2)


# =============================================================================================================
# 15 · sft_loss
# =============================================================================================================


def _log_softmax_last(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def sft_take_along(logits, tokens, answer_mask):
    """CORRECT: shift by slicing, np.take_along_axis for the targets' log-probabilities, a sum over the counted
    ones divided by their number, 0.0 when there are none."""
    logp = _log_softmax_last(logits)[:, :-1]
    target = np.asarray(tokens)[:, 1:]
    counted = np.asarray(answer_mask, dtype=bool)[:, 1:]
    picked = np.take_along_axis(logp, target[..., None], axis=-1)[..., 0]
    n = counted.sum()
    return float(-picked[counted].sum() / n) if n else 0.0


def sft_torch_float64(logits, tokens, answer_mask):
    """CORRECT: torch in float64, F.cross_entropy with reduction='sum' over the counted positions only, divided by
    their count, converted back to a float."""
    import torch
    import torch.nn.functional as F
    lg = torch.as_tensor(np.asarray(logits), dtype=torch.float64)
    tk = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    am = torch.as_tensor(np.asarray(answer_mask)).bool()
    keep = am[:, 1:]
    n = int(keep.sum())
    if n == 0:
        return 0.0
    return float(F.cross_entropy(lg[:, :-1][keep], tk[:, 1:][keep], reduction="sum") / n)


def sft_loop(logits, tokens, answer_mask):
    """CORRECT: a double loop over rows and positions, each counted token's −log p computed stably with
    np.logaddexp.reduce."""
    logits = np.asarray(logits, dtype=np.float64)
    total, count = 0.0, 0
    B, T = np.shape(tokens)
    for b in range(B):
        for t in range(T - 1):
            if answer_mask[b][t + 1]:
                row = logits[b, t]
                total += np.logaddexp.reduce(row) - row[int(tokens[b][t + 1])]
                count += 1
    return total / count if count else 0.0


def sft_no_shift(logits, tokens, answer_mask):
    """WRONG: scores tokens[:, t] with logits[:, t], no shift; 'position t predicts tokens[:, t + 1]'."""
    logp = _log_softmax_last(logits)
    picked = np.take_along_axis(logp, np.asarray(tokens)[..., None], axis=-1)[..., 0]
    counted = np.asarray(answer_mask, bool)
    n = counted.sum()
    return float(-picked[counted].sum() / n) if n else 0.0


def sft_mask_not_shifted(logits, tokens, answer_mask):
    """WRONG: shifts the targets but takes the mask at t; 'that prediction counts when answer_mask[:, t + 1] is
    True'."""
    logp = _log_softmax_last(logits)[:, :-1]
    picked = np.take_along_axis(logp, np.asarray(tokens)[:, 1:, None], axis=-1)[..., 0]
    counted = np.asarray(answer_mask, bool)[:, :-1]
    n = counted.sum()
    return float(-picked[counted].sum() / n) if n else 0.0


def sft_mean_of_row_means(logits, tokens, answer_mask):
    """WRONG: averages each row first, then the rows; 'not a mean of each row's mean: a long answer weighs more'."""
    logp = _log_softmax_last(logits)[:, :-1]
    picked = np.take_along_axis(logp, np.asarray(tokens)[:, 1:, None], axis=-1)[..., 0]
    counted = np.asarray(answer_mask, bool)[:, 1:]
    per_row = [-(p[c]).mean() for p, c in zip(picked, counted) if c.any()]
    return float(np.mean(per_row)) if per_row else 0.0


def sft_zero_division(logits, tokens, answer_mask):
    """WRONG: divides by the count even when it is 0 and returns NaN; 'a batch with no counted token returns
    0.0'."""
    logp = _log_softmax_last(logits)[:, :-1]
    picked = np.take_along_axis(logp, np.asarray(tokens)[:, 1:, None], axis=-1)[..., 0]
    counted = np.asarray(answer_mask, bool)[:, 1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(-(picked * counted).sum() / counted.sum())


def sft_log_of_softmax(logits, tokens, answer_mask):
    """WRONG: takes the log of a softmax; 'compute log-probabilities as x − max − log Σ exp(x − max), never as the
    log of a softmax' (a probability that underflows to 0 gives inf at logits of ±1000)."""
    x = np.asarray(logits, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        logp = np.log(p)[:, :-1]
    picked = np.take_along_axis(logp, np.asarray(tokens)[:, 1:, None], axis=-1)[..., 0]
    counted = np.asarray(answer_mask, bool)[:, 1:]
    n = counted.sum()
    return float(-picked[counted].sum() / n) if n else 0.0


def sft_mean_over_all_positions(logits, tokens, answer_mask):
    """WRONG: zeroes the uncounted positions but divides by every position; 'the mean of −log p(token) over every
    counted token'."""
    logp = _log_softmax_last(logits)[:, :-1]
    picked = np.take_along_axis(logp, np.asarray(tokens)[:, 1:, None], axis=-1)[..., 0]
    counted = np.asarray(answer_mask, bool)[:, 1:]
    if not counted.any():
        return 0.0
    return float(-(picked * counted).mean())


def sft_float32(logits, tokens, answer_mask):
    """WRONG: keeps float32 logits in float32 throughout; 'as a float, computed in float64'."""
    x = np.asarray(logits).astype(np.float32)
    m = x.max(axis=-1, keepdims=True)
    logp = (x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))[:, :-1]
    picked = np.take_along_axis(logp, np.asarray(tokens)[:, 1:, None], axis=-1)[..., 0]
    counted = np.asarray(answer_mask, bool)[:, 1:]
    n = counted.sum()
    return float(-picked[counted].sum(dtype=np.float32) / np.float32(n)) if n else 0.0


def sft_shift_reversed(logits, tokens, answer_mask):
    """WRONG: shifts the wrong way (logits[:, 1:] against tokens[:, :-1]), so each position predicts the token
    before it."""
    logp = _log_softmax_last(logits)[:, 1:]
    picked = np.take_along_axis(logp, np.asarray(tokens)[:, :-1, None], axis=-1)[..., 0]
    counted = np.asarray(answer_mask, bool)[:, :-1]
    n = counted.sum()
    return float(-picked[counted].sum() / n) if n else 0.0


# =============================================================================================================
# 15 · bradley_terry_loss
# =============================================================================================================


def bt_logaddexp(r_chosen, r_rejected):
    """CORRECT: the hint's route, np.logaddexp(0, -margin)."""
    x = np.asarray(r_chosen, np.float64) - np.asarray(r_rejected, np.float64)
    return float(np.mean(np.logaddexp(0.0, -x)))


def bt_torch_logsigmoid(r_chosen, r_rejected):
    """CORRECT: torch's F.logsigmoid in float64, converted back."""
    import torch
    import torch.nn.functional as F
    x = torch.as_tensor(np.asarray(r_chosen), dtype=torch.float64) - torch.as_tensor(np.asarray(r_rejected),
                                                                                      dtype=torch.float64)
    return float(-F.logsigmoid(x).mean())


def bt_piecewise_log1p(r_chosen, r_rejected):
    """CORRECT: the two-branch softplus: log1p(exp(-x)) for x >= 0 and -x + log1p(exp(x)) for x < 0, each exp of a
    non-positive number."""
    x = np.asarray(r_chosen, np.float64) - np.asarray(r_rejected, np.float64)
    loss = np.where(x >= 0, np.log1p(np.exp(-np.abs(x))), -x + np.log1p(np.exp(-np.abs(x))))
    return float(loss.mean())


def bt_naive_log_sigmoid(r_chosen, r_rejected):
    """WRONG: log(1 / (1 + exp(-x))), which the exercise warns overflows at x = −1000 (its log is −inf)."""
    x = np.asarray(r_chosen, float) - np.asarray(r_rejected, float)
    with np.errstate(over="ignore", divide="ignore"):
        return float(-np.mean(np.log(1 / (1 + np.exp(-x)))))


def bt_exp_ratio(r_chosen, r_rejected):
    """WRONG: sigmoid as exp(x) / (1 + exp(x)), inf / inf = NaN at x = +1000, as the exercise warns."""
    x = np.asarray(r_chosen, float) - np.asarray(r_rejected, float)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return float(-np.mean(np.log(np.exp(x) / (1 + np.exp(x)))))


def bt_swapped(r_chosen, r_rejected):
    """WRONG: σ(r_rejected − r_chosen): the preferred and the other answer swapped."""
    x = np.asarray(r_rejected, float) - np.asarray(r_chosen, float)
    return float(np.mean(np.logaddexp(0.0, -x)))


def bt_sum(r_chosen, r_rejected):
    """WRONG: sums over the pairs; 'return −mean log σ(...) over the pairs'."""
    x = np.asarray(r_chosen, float) - np.asarray(r_rejected, float)
    return float(np.sum(np.logaddexp(0.0, -x)))


def bt_log1p_exp(r_chosen, r_rejected):
    """WRONG: log1p(exp(-x)) without a stable branch: exp(1000) is inf at a margin of −1000; 'it must be finite
    for margins of +1000 and of −1000'."""
    x = np.asarray(r_chosen, float) - np.asarray(r_rejected, float)
    with np.errstate(over="ignore"):
        return float(np.mean(np.log1p(np.exp(-x))))


def bt_sign(r_chosen, r_rejected):
    """WRONG: returns mean log σ (the log-likelihood) rather than its negative."""
    x = np.asarray(r_chosen, float) - np.asarray(r_rejected, float)
    return float(np.mean(-np.logaddexp(0.0, -x)))


def bt_clipped_margin(r_chosen, r_rejected):
    """WRONG: clips the margin to [−50, 50] to avoid overflow, which changes the loss at large margins (at −1000 it
    gives 50, not 1000)."""
    x = np.clip(np.asarray(r_chosen, float) - np.asarray(r_rejected, float), -50, 50)
    return float(np.mean(np.log1p(np.exp(-x))))


# =============================================================================================================
# 15 · dpo_loss
# =============================================================================================================


def dpo_regrouped(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    """CORRECT: the margin regrouped as (pc − pr) − (rc − rr), the policy's preference minus the reference's (the
    same number), through np.logaddexp."""
    pc, pr = np.asarray(policy_chosen_logps, float), np.asarray(policy_rejected_logps, float)
    rc, rr = np.asarray(ref_chosen_logps, float), np.asarray(ref_rejected_logps, float)
    margin = beta * ((pc - pr) - (rc - rr))
    return float(np.mean(np.logaddexp(0.0, -margin)))


def dpo_torch(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    """CORRECT: torch float64 F.logsigmoid on the difference of the implicit rewards, converted back."""
    import torch
    import torch.nn.functional as F
    t = [torch.as_tensor(np.asarray(a), dtype=torch.float64) for a in
         (policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps)]
    reward_chosen = beta * (t[0] - t[2])
    reward_rejected = beta * (t[1] - t[3])
    return float(-F.logsigmoid(reward_chosen - reward_rejected).mean())


def dpo_via_softplus_where(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps,
                           beta=0.1):
    """CORRECT: softplus(−z) written as max(−z, 0) + log1p(exp(−|z|))."""
    z = beta * ((np.asarray(policy_chosen_logps, float) - np.asarray(ref_chosen_logps, float))
                - (np.asarray(policy_rejected_logps, float) - np.asarray(ref_rejected_logps, float)))
    return float(np.mean(np.maximum(-z, 0.0) + np.log1p(np.exp(-np.abs(z)))))


def dpo_beta_hard_coded(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps,
                        beta=0.1):
    """WRONG: uses 0.1 whatever beta is passed; 'beta defaults to 0.1 and may be passed by position or by name'."""
    z = 0.1 * ((np.asarray(policy_chosen_logps, float) - np.asarray(ref_chosen_logps, float))
               - (np.asarray(policy_rejected_logps, float) - np.asarray(ref_rejected_logps, float)))
    return float(np.mean(np.logaddexp(0.0, -z)))


def dpo_beta_on_policy_only(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps,
                            beta=0.1):
    """WRONG: multiplies only the policy's terms by beta: β(pc − pr) − (rc − rr); 'the implicit reward of an answer
    is β · (log π(answer) − log π_ref(answer))'."""
    z = beta * (np.asarray(policy_chosen_logps, float) - np.asarray(policy_rejected_logps, float)) \
        - (np.asarray(ref_chosen_logps, float) - np.asarray(ref_rejected_logps, float))
    return float(np.mean(np.logaddexp(0.0, -z)))


def dpo_swapped(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    """WRONG: chosen and rejected swapped in the margin."""
    z = beta * ((np.asarray(policy_rejected_logps, float) - np.asarray(ref_rejected_logps, float))
                - (np.asarray(policy_chosen_logps, float) - np.asarray(ref_chosen_logps, float)))
    return float(np.mean(np.logaddexp(0.0, -z)))


def dpo_naive_sigmoid(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    """WRONG: −log(1 / (1 + exp(−z))): inf at a margin of −1000; 'stable for margins of ±1000 (after β)'."""
    z = beta * ((np.asarray(policy_chosen_logps, float) - np.asarray(ref_chosen_logps, float))
                - (np.asarray(policy_rejected_logps, float) - np.asarray(ref_rejected_logps, float)))
    with np.errstate(over="ignore", divide="ignore"):
        return float(-np.mean(np.log(1.0 / (1.0 + np.exp(-z)))))


def dpo_divides_by_beta(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps,
                        beta=0.1):
    """WRONG: divides the log-ratio difference by beta (a temperature habit) instead of multiplying by it."""
    z = ((np.asarray(policy_chosen_logps, float) - np.asarray(ref_chosen_logps, float))
         - (np.asarray(policy_rejected_logps, float) - np.asarray(ref_rejected_logps, float))) / beta
    return float(np.mean(np.logaddexp(0.0, -z)))


def dpo_returns_rewards(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps,
                        beta=0.1):
    """WRONG: returns (loss, chosen rewards, rejected rewards) as many libraries do; 'as a float (the loss only,
    not the rewards)'."""
    rc = beta * (np.asarray(policy_chosen_logps, float) - np.asarray(ref_chosen_logps, float))
    rr = beta * (np.asarray(policy_rejected_logps, float) - np.asarray(ref_rejected_logps, float))
    return float(np.mean(np.logaddexp(0.0, -(rc - rr)))), rc, rr


def dpo_wrong_pairing(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps,
                      beta=0.1):
    """WRONG: pairs each policy term with the other answer's reference: (pc − rr) − (pr − rc)."""
    z = beta * ((np.asarray(policy_chosen_logps, float) - np.asarray(ref_rejected_logps, float))
                - (np.asarray(policy_rejected_logps, float) - np.asarray(ref_chosen_logps, float)))
    return float(np.mean(np.logaddexp(0.0, -z)))


def dpo_beta_squared(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    """WRONG: applies beta to each implicit reward and again to their difference (β² overall)."""
    rc = beta * (np.asarray(policy_chosen_logps, float) - np.asarray(ref_chosen_logps, float))
    rr = beta * (np.asarray(policy_rejected_logps, float) - np.asarray(ref_rejected_logps, float))
    return float(np.mean(np.logaddexp(0.0, -beta * (rc - rr))))


# =============================================================================================================
# 03 · softmax
# =============================================================================================================


def softmax_masked_max(x, axis=-1):
    """CORRECT: shifts by the slice's max where that max is finite and by 0 where the slice is all −inf; the all
    −inf slice then has a zero denominator, replaced by 1 (so its exp-zeros stay zeros)."""
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(x - m)
    s = e.sum(axis=axis, keepdims=True)
    return e / np.where(s == 0, 1, s)


def softmax_via_logsumexp(x, axis=-1):
    """CORRECT: exp(x − logsumexp(x)), the log-sum-exp from np.logaddexp.reduce, an all −inf slice set to 0 by
    np.where (the float64 of the reduction cast back to x's dtype)."""
    x = np.asarray(x)
    with np.errstate(invalid="ignore"):
        lse = np.logaddexp.reduce(x, axis=axis, keepdims=True)
        out = np.where(np.isneginf(lse), 0.0, np.exp(x - lse))
    return out.astype(x.dtype) if np.issubdtype(x.dtype, np.floating) else out


def softmax_torch(x, axis=-1):
    """CORRECT: torch.softmax on a copy, NaN rows (all −inf) zeroed, back to a NumPy array of x's dtype."""
    import torch
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    t = torch.from_numpy(np.array(x, copy=True))
    out = torch.softmax(t, dim=axis)
    return torch.nan_to_num(out, nan=0.0).numpy()


def softmax_float64(x, axis=-1):
    """CORRECT as the exercise is written (it asks for 'an array of the same shape', nothing about the dtype): the
    whole computation and the result in float64, whatever x's dtype."""
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    s[s == 0] = 1.0
    return e / s


def softmax_no_shift(x, axis=-1):
    """WRONG: exp without subtracting the max; 'np.exp(1000.0) overflows to inf ... subtract the maximum along
    axis first'."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)


def softmax_nan_all_masked(x, axis=-1):
    """WRONG: the standard shifted softmax; an all −inf slice gives −inf − (−inf) = NaN; 'return zeros, not nan'."""
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    """WRONG: subtracts the array's single largest entry, not each slice's; a slice far below it underflows to
    all zeros and 0/0 = NaN ('subtract the maximum along axis')."""
    x = np.asarray(x)
    finite = x[np.isfinite(x)]
    m = finite.max() if finite.size else 0.0
    e = np.exp(x - m)
    s = e.sum(axis=axis, keepdims=True)
    with np.errstate(invalid="ignore"):
        out = e / s
    return np.where(np.isneginf(x), 0.0, out).astype(np.result_type(x, np.float32))


def softmax_last_axis_only(x, axis=-1):
    """WRONG: ignores `axis` and always normalises the last axis; 'normalise along axis (any axis, any number of
    dimensions)'."""
    x = np.asarray(x)
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(x - m)
    s = e.sum(axis=-1, keepdims=True)
    return e / np.where(s == 0, 1, s)


def softmax_in_place(x, axis=-1):
    """WRONG: subtracts the max in place, so the caller's x changes; 'not modify x'."""
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    x -= m.astype(x.dtype)
    np.exp(x, out=x)
    s = x.sum(axis=axis, keepdims=True)
    x /= np.where(s == 0, 1, s)
    return x


def softmax_large_negative(x, axis=-1):
    """WRONG: replaces −inf by −1e9 first, so an all −inf slice comes out uniform instead of 'zeros, not nan'."""
    x = np.where(np.isneginf(x), -1e9, x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.result_type(x.dtype, np.float32))


def softmax_min_shift(x, axis=-1):
    """WRONG: subtracts the minimum instead of the maximum (a slip of np.min for np.max): for a slice whose
    entries span more than about 709 the largest exp overflows to inf and the weights become NaN; 'subtract the
    maximum along axis first'."""
    x = np.asarray(x)
    finite = np.where(np.isfinite(x), x, np.inf)
    with np.errstate(over="ignore", invalid="ignore"):
        m = np.min(finite, axis=axis, keepdims=True)
        m = np.where(np.isinf(m), 0, m)
        e = np.exp(x - m)
        s = e.sum(axis=axis, keepdims=True)
        return e / np.where(s == 0, 1, s)


# =============================================================================================================
# 03 · scaled_dot_product_attention
# =============================================================================================================


def _safe_softmax(scores):
    m = np.max(scores, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(scores - m)
    s = e.sum(axis=-1, keepdims=True)
    return e / np.where(s == 0, 1.0, s)


def sdpa_einsum(q, k, v, mask=None):
    """CORRECT: einsum for both products, np.where against −inf, a softmax whose empty rows stay zero."""
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    w = _safe_softmax(scores)
    return np.einsum("...qk,...kv->...qv", w, v), w


def sdpa_torch(q, k, v, mask=None):
    """CORRECT: torch in float64 with masked_fill, torch.softmax, NaN rows (no allowed key) zeroed, converted back
    to NumPy in the inputs' floating dtype."""
    import torch
    tq, tk, tv = (torch.as_tensor(np.asarray(a), dtype=torch.float64) for a in (q, k, v))
    scores = tq @ tk.transpose(-1, -2) / tq.shape[-1] ** 0.5
    if mask is not None:
        allowed = torch.as_tensor(np.asarray(mask, dtype=bool))
        scores = scores.masked_fill(~allowed, float("-inf"))
    w = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    dtype = np.result_type(np.asarray(q), np.asarray(k), np.asarray(v), np.float32)
    return (w @ tv).numpy().astype(dtype), w.numpy().astype(dtype)


def sdpa_any_allowed(q, k, v, mask=None):
    """CORRECT: computed in float64 and cast back; a finite fill (−1e30, far below any score) for the softmax, the
    masked entries zeroed after the exp, and the rows with no allowed key set to zero explicitly with np.any over
    the broadcast mask."""
    dtype = np.result_type(np.asarray(q), np.asarray(k), np.asarray(v), np.float32)
    q, k, v = np.asarray(q, float), np.asarray(k, float), np.asarray(v, float)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is None:
        w = _safe_softmax(scores)
        return (w @ v).astype(dtype), w.astype(dtype)
    allowed = np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)
    filled = np.where(allowed, scores, -1e30)
    w = np.exp(filled - filled.max(axis=-1, keepdims=True))
    w = np.where(allowed, w, 0.0)
    w = w / np.maximum(w.sum(axis=-1, keepdims=True), np.finfo(float).tiny)
    w = np.where(allowed.any(axis=-1, keepdims=True), w, 0.0)
    return (w @ v).astype(dtype), w.astype(dtype)


def sdpa_nan_rows(q, k, v, mask=None):
    """WRONG: a fully masked query row becomes NaN; 'a query row with no allowed key gets zero weights and a zero
    output'."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def sdpa_mask_after_softmax(q, k, v, mask=None):
    """WRONG: multiplies the softmax by the mask afterwards without renormalising; masked scores must be −inf
    before the softmax, so the allowed weights sum to 1."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    w = _safe_softmax(scores)
    if mask is not None:
        w = w * mask
    return w @ v, w


def sdpa_renormalise_after_softmax(q, k, v, mask=None):
    """WRONG: masks after the softmax and renormalises; equal in ordinary cases, but when a masked key's score is
    far above the allowed ones, the allowed weights underflow to 0 and the row comes out zero."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    w = _safe_softmax(scores)
    if mask is not None:
        w = w * mask
        s = w.sum(axis=-1, keepdims=True)
        w = w / np.where(s == 0, 1.0, s)
    return w @ v, w


def sdpa_boolean_index(q, k, v, mask=None):
    """WRONG (crashes on broadcast masks): scores[~mask] = −inf needs the mask in the scores' full shape; 'a boolean
    array ... that broadcasts to the scores' shape'."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.copy()
        scores[~np.asarray(mask, dtype=bool)] = -np.inf
    w = _safe_softmax(scores)
    return w @ v, w


def sdpa_divide_by_dk(q, k, v, mask=None):
    """WRONG: divides the scores by d_k instead of √d_k."""
    scores = q @ np.swapaxes(k, -1, -2) / q.shape[-1]
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    w = _safe_softmax(scores)
    return w @ v, w


def sdpa_minus_1e9(q, k, v, mask=None):
    """WRONG: fills masked scores with −1e9, so a query with no allowed key gets uniform weights over the masked
    keys instead of zero weights and a zero output."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    w = _safe_softmax(scores)
    return w @ v, w


def sdpa_zero_means_masked(q, k, v, mask=None):
    """WRONG: multiplies the scores by the mask and then treats every score of exactly 0 as masked; a genuine score
    of 0 (a zero query, orthogonal vectors) is masked too, so such a row gets zero weights instead of its
    softmax."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores * np.asarray(mask, dtype=float)
        scores = np.where(scores == 0, -np.inf, scores)
    w = _safe_softmax(scores)
    return w @ v, w


def sdpa_softmax_over_queries(q, k, v, mask=None):
    """WRONG: the softmax runs over the queries (axis −2); 'weights are the softmax of the scores over the keys
    (the last axis)'."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    w = np.swapaxes(_safe_softmax(np.swapaxes(scores, -1, -2)), -1, -2)
    return w @ v, w


def sdpa_additive_bool(q, k, v, mask=None):
    """WRONG: adds the boolean mask to the scores as if it were an additive bias (True = +1, False = 0), so nothing
    is masked."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + np.asarray(mask, dtype=float)
    w = _safe_softmax(scores)
    return w @ v, w


def sdpa_mask_inverted(q, k, v, mask=None):
    """WRONG: reads True as 'blocked' (the old nn.Transformer key_padding_mask convention); the course's masks are
    'True where attention is allowed'."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    w = _safe_softmax(scores)
    return w @ v, w


# =============================================================================================================
# 03 · multi_head_attention (PyTorch)
# =============================================================================================================


def _split_heads(x, n_heads):
    B, L, d = x.shape
    return x.reshape(B, L, n_heads, d // n_heads).transpose(1, 2)


def _merge_heads(x):
    B, h, L, dk = x.shape
    return x.transpose(1, 2).reshape(B, L, h * dk)


def _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None, fill="-inf", zero_empty=True, scale="dk",
         average_heads=False, direct_reshape=False, unsqueeze_mask=False, use_w_o=True, kv_from_q=False):
    import torch
    B, L_q, d = x_q.shape
    dk = d // n_heads
    src = x_q if kv_from_q else x_kv
    if direct_reshape:
        q = (x_q @ w_q).reshape(B, n_heads, L_q, dk)
        k = (src @ w_k).reshape(B, n_heads, src.shape[1], dk)
        v = (src @ w_v).reshape(B, n_heads, src.shape[1], dk)
    else:
        q, k, v = _split_heads(x_q @ w_q, n_heads), _split_heads(src @ w_k, n_heads), _split_heads(src @ w_v, n_heads)
    scores = q @ k.transpose(-1, -2) / (dk ** 0.5 if scale == "dk" else d ** 0.5)
    if mask is not None:
        m = torch.as_tensor(mask, device=scores.device).bool()
        if unsqueeze_mask and m.dim() == 2:
            m = m[:, None, None, :]
        scores = scores.masked_fill(~m, float("-inf") if fill == "-inf" else -1e9)
        weights = torch.softmax(scores, dim=-1)
        if zero_empty:
            weights = torch.where(m.expand_as(scores).any(-1, keepdim=True), weights, torch.zeros_like(weights))
    else:
        weights = torch.softmax(scores, dim=-1)
    out = _merge_heads(weights @ v)
    if use_w_o:
        out = out @ w_o
    if average_heads:
        return out, weights.mean(dim=1)
    return out, weights


def mha_where_zero(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """CORRECT: masked_fill with −inf, torch.softmax, then torch.where zeroes the rows with no allowed key (their
    NaN is replaced, not multiplied, so no NaN reaches the gradients)."""
    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask)


def mha_einsum_manual_softmax(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """CORRECT: einsum with the head split written into the weight matrices' columns, and a hand-written softmax
    (finite max, exp, sum clamped away from zero) that gives an all-masked row zero weights without any NaN."""
    import torch
    B, L_q, d = x_q.shape
    L_k = x_kv.shape[1]
    dk = d // n_heads
    q = torch.einsum("bld,dhk->bhlk", x_q, w_q.reshape(d, n_heads, dk))
    k = torch.einsum("bld,dhk->bhlk", x_kv, w_k.reshape(d, n_heads, dk))
    v = torch.einsum("bld,dhk->bhlk", x_kv, w_v.reshape(d, n_heads, dk))
    scores = torch.einsum("bhqk,bhlk->bhql", q, k) / dk ** 0.5
    if mask is None:
        allowed = torch.ones(B, n_heads, L_q, L_k, dtype=torch.bool, device=scores.device)
    else:
        allowed = torch.as_tensor(mask, device=scores.device).bool().expand(B, n_heads, L_q, L_k)
    filled = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    shift = filled.max(dim=-1, keepdim=True).values.detach()
    e = torch.exp(filled - shift) * allowed
    weights = e / e.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)
    out = torch.einsum("bhql,bhlk->bqhk", weights, v).reshape(B, L_q, d)
    return torch.einsum("bqd,de->bqe", out, w_o), weights


def mha_nan_to_num(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """CORRECT (unusual): torch.nan_to_num after the softmax turns an all-masked row's NaN into zeros; its backward
    passes no gradient through the NaN entries, and masked_fill's backward drops the masked positions, so the
    gradients stay finite."""
    import torch
    B, L_q, d = x_q.shape
    dk = d // n_heads
    q, k, v = _split_heads(x_q @ w_q, n_heads), _split_heads(x_kv @ w_k, n_heads), _split_heads(x_kv @ w_v, n_heads)
    scores = q @ k.transpose(-1, -2) / dk ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~torch.as_tensor(mask, device=scores.device).bool(), float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return _merge_heads(weights @ v) @ w_o, weights


def mha_softmax_nan(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: torch.softmax on a row of −inf gives NaN; 'a query whose keys are all masked gets zero weights and a
    zero output'."""
    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask, zero_empty=False)


def mha_heads_averaged(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: returns the weights averaged over the heads (nn.MultiheadAttention's default); 'the per-head weights
    (B, n_heads, L_q, L_k)'."""
    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask, average_heads=True)


def mha_scale_d_model(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: scales by √d_model; 'each head has d_k = d_model // n_heads' and the scores are divided by √d_k."""
    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask, scale="d_model")


def mha_direct_reshape(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: reshapes (B, L, d_model) straight to (B, h, L, d_k), which 'runs without an error but mixes positions
    into heads'."""
    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask, direct_reshape=True)


def mha_minus_1e9(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: fills with −1e9 and skips the empty-row rule, so an all-masked query gets uniform weights (and the
    average of the values) instead of zero weights and a zero output."""
    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask, fill="-1e9", zero_empty=False)


def mha_mask_unsqueezed(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: reads a 2-D mask as a (B, L_k) key-padding mask and expands it to (B, 1, 1, L_k); the course's 2-D
    mask is (L_q, L_k) (a causal mask), 'broadcastable to (B, n_heads, L_q, L_k)' as it is, so it lands on the
    batch axis (an error, or a silent mix-up when B == L_q)."""
    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask, unsqueeze_mask=True)


def mha_numpy_softmax(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: computes the weights in NumPy (detached) and wraps them back into a tensor, so no gradient flows
    through the attention weights; 'gradients must flow to every input (no .detach(), .numpy() ...)'."""
    import torch
    B, L_q, d = x_q.shape
    dk = d // n_heads
    q, k, v = _split_heads(x_q @ w_q, n_heads), _split_heads(x_kv @ w_k, n_heads), _split_heads(x_kv @ w_v, n_heads)
    scores = (q @ k.transpose(-1, -2) / dk ** 0.5).detach().cpu().numpy()
    if mask is not None:
        scores = np.where(torch.as_tensor(mask).bool().cpu().numpy(), scores, -np.inf)
    w = torch.as_tensor(_safe_softmax(scores), dtype=x_q.dtype, device=x_q.device)
    return _merge_heads(w @ v) @ w_o, w


def mha_no_output_projection(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: forgets the final @ w_o; '[head_1; ...; head_h] W^O'."""
    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask, use_w_o=False)


def mha_keys_from_queries(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """WRONG: computes keys and values from x_q (self-attention only); 'x_kv: keys and values come from here'."""
    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask, kv_from_q=True)


# =============================================================================================================
# 04 · mlm_mask
# =============================================================================================================


def _ordinary_pool(vocab_size, mask_id, special_ids):
    special = {int(s) for s in special_ids}
    return np.array([i for i in range(vocab_size) if i not in special and i != mask_id], dtype=np.int64)


def _is_special(tokens, special_ids):
    return np.isin(tokens, np.fromiter((int(s) for s in special_ids), dtype=np.int64))


def _mlm(tokens, rng, vocab_size, mask_id, special_ids, p=0.15, pool="ordinary", mask_specials=False,
         labels_changed_only=False, labels_from_inputs=False, copy=True, exact_count=False, exclude_original=False,
         isin_raw=False, shares=(0.8, 0.9)):
    tokens = np.asarray(tokens)
    original = tokens.copy()
    inputs = original.copy() if copy else tokens
    special = np.isin(original, special_ids) if isin_raw else _is_special(original, special_ids)
    ordinary = np.ones(original.shape, bool) if mask_specials else ~special
    if exact_count:
        flat = np.flatnonzero(ordinary)
        pick = rng.choice(flat, size=int(round(p * flat.size)), replace=False)
        chosen = np.zeros(original.size, bool)
        chosen[pick] = True
        chosen = chosen.reshape(original.shape)
    else:
        chosen = (rng.random(original.shape) < p) & ordinary
    u = rng.random(original.shape)
    to_mask = chosen & (u < shares[0])
    to_random = chosen & (u >= shares[0]) & (u < shares[1])
    if pool == "ordinary":
        ids = _ordinary_pool(vocab_size, mask_id, special_ids)
    elif pool == "batch":
        ids = np.unique(original[~special & (original != mask_id)])
    elif pool == "above_specials":
        ids = np.arange(len(list(special_ids)), vocab_size)
    elif pool == "everything":
        ids = np.arange(vocab_size)
    else:  # "not_mask_only"
        ids = np.array([i for i in range(vocab_size) if i not in {int(s) for s in special_ids}])
    n = int(to_random.sum())
    drawn = ids[rng.integers(0, len(ids), size=n)] if n else np.zeros(0, dtype=np.int64)
    if exclude_original and len(ids) > 1:
        orig = original[to_random]
        for i in range(n):
            while drawn[i] == orig[i]:
                drawn[i] = ids[rng.integers(0, len(ids))]
    inputs[to_mask] = mask_id
    inputs[to_random] = drawn
    labels = np.full(original.shape, -100, dtype=np.int64)
    where = (to_mask | to_random) if labels_changed_only else chosen
    labels[where] = (inputs if labels_from_inputs else original)[where]
    return inputs, labels


def mlm_straight(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """CORRECT: one rng.random draw for the choice, one for the 80/10/10 split, rng.integers into the pool of
    ordinary ids."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, p)


def mlm_ids_drawn_first(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """CORRECT (the order of draws is free): draws a candidate random id for every position first, then the
    choice, then the split, and uses the candidates where needed; rng.choice over the pool."""
    tokens = np.asarray(tokens)
    special = set(int(s) for s in special_ids)
    pool = np.array([i for i in range(vocab_size) if i not in special and i != mask_id])
    candidates = rng.choice(pool, size=tokens.shape)
    ordinary = ~np.isin(tokens, list(special))
    chosen = ordinary & (rng.random(tokens.shape) < p)
    u = rng.random(tokens.shape)
    inputs = tokens.copy()
    inputs = np.where(chosen & (u < 0.8), mask_id, inputs)
    inputs = np.where(chosen & (u >= 0.8) & (u < 0.9), candidates, inputs)
    labels = np.where(chosen, tokens, -100)
    return inputs.astype(tokens.dtype), labels


def mlm_loop_per_token(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """CORRECT: a loop over the flattened positions, each ordinary one drawing its own numbers from rng in turn."""
    tokens = np.asarray(tokens)
    special = set(int(s) for s in special_ids)
    pool = [i for i in range(vocab_size) if i not in special and i != mask_id]
    flat = tokens.reshape(-1)
    inputs = flat.copy()
    labels = np.full(flat.shape, -100, dtype=np.int64)
    for i, t in enumerate(flat):
        if int(t) in special:
            continue
        if rng.random() < p:
            labels[i] = t
            u = rng.random()
            if u < 0.8:
                inputs[i] = mask_id
            elif u < 0.9:
                inputs[i] = pool[int(rng.integers(len(pool)))]
    return inputs.reshape(tokens.shape), labels.reshape(tokens.shape)


def mlm_pool_from_batch(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: random replacements drawn from the ordinary ids that occur in this batch; 'a random token drawn
    uniformly from the ordinary ids (all ids in 0..vocab_size-1 that are neither special nor mask_id)'."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, p, pool="batch")


def mlm_specials_lowest(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: assumes the special ids are 0 .. len(special_ids)-1 and draws from len(special_ids) .. vocab_size-1;
    where the specials sit elsewhere, specials can be drawn and the lowest ordinary ids never are."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, p, pool="above_specials")


def mlm_random_any_id(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: random replacements from all of 0..vocab_size-1, specials and mask_id included."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, p, pool="everything")


def mlm_own_seed(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: draws from a generator of its own with a fixed seed (np.random) instead of `rng`; 'draw every random
    number from rng, so that the same seed gives the same masking' (here every seed gives the same one)."""
    return _mlm(tokens, np.random.default_rng(0), vocab_size, mask_id, special_ids, p)


def mlm_exact_count(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: chooses exactly round(p * n) ordinary positions; 'choose each ordinary token independently with
    probability p' (the count should vary from draw to draw)."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, p, exact_count=True)


def mlm_masks_specials(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: chooses among all positions, specials included; 'special_ids: ... ids that are never chosen'."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, p, mask_specials=True)


def mlm_labels_only_changed(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: labels only where the input changed, -100 on the 10% kept as they are; 'labels has the original
    token at chosen positions'."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, p, labels_changed_only=True)


def mlm_labels_from_inputs(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: labels read from the corrupted inputs (mask_id, or the random id); 'the original token'."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, p, labels_from_inputs=True)


def mlm_in_place(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: corrupts `tokens` itself (np.asarray makes no copy) and returns it as the inputs, the labels taken
    from a copy made first; 'inputs is a corrupted copy (do not change tokens)'."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, p, copy=False)


def mlm_random_never_original(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: redraws a random replacement that equals the original token; 'a random token drawn uniformly from the
    ordinary ids' may be the token itself, which shifts the shares."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, p, exclude_original=True)


def mlm_p_hard_coded(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: uses 0.15 whatever p is passed."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, 0.15)


def mlm_isin_set(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: np.isin(tokens, special_ids) straight on the collection; with a set (which the exercise allows:
    'any collection (list, tuple or set)') np.isin sees one object and finds no special at all."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, p, isin_raw=True)


def mlm_mask_id_in_pool(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: removes the special ids from the pool but not mask_id, so when mask_id is not among special_ids a
    'random' token can be [MASK]."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, p, pool="not_mask_only")


def mlm_shares_swapped(tokens, rng, vocab_size, mask_id, special_ids, p=0.15):
    """WRONG: 10% [MASK], 80% random, 10% unchanged: the 80 and the first 10 swapped."""
    return _mlm(tokens, rng, vocab_size, mask_id, special_ids, p, shares=(0.1, 0.9))


# =============================================================================================================
# 06 · text_infilling
# =============================================================================================================


def _free_starts(covered, L):
    n = len(covered)
    if L > n:
        return np.array([], dtype=int)
    run = np.convolve(covered.astype(int), np.ones(L, int), mode="valid")  # covered count in each window
    return np.flatnonzero(run == 0)


def _longest_free(covered):
    best = cur = 0
    for c in covered:
        cur = 0 if c else cur + 1
        best = max(best, cur)
    return best


def _assemble(tokens, spans, inserts, mask_id, one_mask_per_span=True, inserts_at_end=False, merge=False):
    n = len(tokens)
    start_of = {s: e for s, e in spans}
    covered = np.zeros(n, bool)
    for s, e in spans:
        covered[s:e] = True
    gaps = {}
    for g in inserts:
        gaps[g] = gaps.get(g, 0) + 1
    out = []
    for i in range(n + 1):
        if not inserts_at_end:
            out.extend([mask_id] * gaps.get(i, 0))
        if i == n:
            break
        if i in start_of:
            if one_mask_per_span:
                if not (merge and out and out[-1] == mask_id and i > 0 and covered[i - 1]):
                    out.append(mask_id)
            else:
                out.extend([mask_id] * (start_of[i] - i))
        elif not covered[i]:
            out.append(tokens[i])
    if inserts_at_end:
        out.extend([mask_id] * len(inserts))
    return np.array(out, dtype=np.asarray(tokens).dtype if len(tokens) else np.int64)


def _infill(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0, budget_fn=round, no_zero=False,
            allow_overlap=False, start_mode="reject", cut=True, zero_replaces=False, fixed_length=False,
            one_mask_per_span=True, inserts_at_end=False, merge=False, lam=None):
    tokens = np.asarray(tokens)
    n = len(tokens)
    target = int(budget_fn(mask_ratio * n))
    covered = np.zeros(n, bool)
    spans, inserts = [], []
    done = 0
    lam = poisson_lambda if lam is None else lam
    while done < target:
        L = max(1, int(round(lam))) if fixed_length else int(rng.poisson(lam))
        if no_zero:
            L = max(L, 1)
        if cut:
            L = min(L, target - done)
        if L == 0:
            g = int(rng.integers(0, n + 1))
            if zero_replaces and g < n and not covered[g]:
                spans.append((g, g + 1))  # the token at the gap disappears under the mask, outside the budget
                covered[g] = True
            else:
                inserts.append(g)
            continue
        if allow_overlap:
            L = min(L, n)
            s = int(rng.integers(0, n - L + 1))
            covered[s:s + L] = True
            spans.append((s, s + L))
            done += L
            continue
        longest = _longest_free(covered)
        if longest == 0:
            break
        L = min(L, longest)
        if start_mode == "reject":
            while True:
                s = int(rng.integers(0, n - L + 1))
                if not covered[s:s + L].any():
                    break
        elif start_mode == "uniform_free":
            starts = _free_starts(covered, L)
            s = int(starts[rng.integers(0, len(starts))])
        elif start_mode == "clip":
            while True:
                s = min(int(rng.integers(0, n)), n - L)
                if not covered[s:s + L].any():
                    break
        elif start_mode == "short_range":
            starts = _free_starts(covered, L)
            inner = starts[starts < n - L] if (starts < n - L).any() else starts
            s = int(inner[rng.integers(0, len(inner))])
        covered[s:s + L] = True
        spans.append((s, s + L))
        done += L
    if allow_overlap:
        # overlapping spans collapse into the runs they cover
        runs, i = [], 0
        while i < n:
            if covered[i]:
                j = i
                while j < n and covered[j]:
                    j += 1
                runs.append((i, j))
                i = j
            else:
                i += 1
        spans = runs
    return _assemble(tokens, sorted(spans), inserts, mask_id, one_mask_per_span, inserts_at_end, merge)


def infilling_rejection(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """CORRECT: the exercise's steps literally: Poisson length cut to what is left, a gap for L = 0, a start
    redrawn until the span is free (shortened to the longest free stretch when none is long enough), one mask per
    span, inserted masks at their gaps."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda)


def infilling_uniform_over_free_starts(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """CORRECT (a different but equivalent draw): the start drawn uniformly among the free starts in one call, the
    distribution that 'draw again if it does' produces, with fewer draws."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, start_mode="uniform_free")


def infilling_marks_then_builds(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """CORRECT: written from scratch with a per-position marker array (0 kept, 1 first token of a span, 2 inside a
    span) and a count of masks per gap; free starts found by scanning; the output built in one pass."""
    tokens = np.asarray(tokens)
    n = len(tokens)
    to_cover = int(round(mask_ratio * n))
    mark = np.zeros(n, dtype=np.int8)
    gap_masks = np.zeros(n + 1, dtype=int)
    while to_cover > 0:
        L = min(int(rng.poisson(poisson_lambda)), to_cover)
        if L == 0:
            gap_masks[int(rng.integers(0, n + 1))] += 1
            continue
        free = mark == 0
        starts = [s for s in range(n - L + 1) if free[s:s + L].all()]
        while not starts:
            L -= 1
            starts = [s for s in range(n - L + 1) if free[s:s + L].all()]
        s = starts[int(rng.integers(0, len(starts)))]
        mark[s] = 1
        mark[s + 1:s + L] = 2
        to_cover -= L
    out = []
    for i in range(n):
        out += [mask_id] * int(gap_masks[i])
        if mark[i] == 0:
            out.append(tokens[i])
        elif mark[i] == 1:
            out.append(mask_id)
    out += [mask_id] * int(gap_masks[n])
    return np.array(out, dtype=tokens.dtype)


def infilling_mask_per_token(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: replaces each token of a span by its own mask (BERT-style); 'replace every span by **one**
    mask_id'."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, one_mask_per_span=False)


def infilling_no_zero_length(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: bumps a zero length to 1 ('a span has at least one token') instead of inserting a mask; 'if L == 0,
    insert one mask token at a random gap'."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, no_zero=True)


def infilling_overlapping_spans(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: draws starts anywhere without checking earlier spans; overlapping spans merge into one mask, and each
    counts its full length towards the budget, so fewer tokens than round(mask_ratio * n) disappear; 'does not
    overlap an earlier span (draw again if it does)'."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, allow_overlap=True)


def infilling_floor_budget(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: int(mask_ratio * n) instead of round(mask_ratio * n): one token short whenever the fraction part is
    above .5 (e.g. n = 12 at 0.3: 3.6 -> 3 instead of 4)."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, budget_fn=int)


def infilling_round_half_up(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: rounds the budget half up with int(x + 0.5); the exercise says round(mask_ratio * n), and Python's
    round sends halves to the even neighbour (n = 15 at 0.3: 4.5 -> 4, not 5)."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, budget_fn=lambda x: int(x + 0.5))


def infilling_own_seed(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: draws from its own fixed-seed generator (np.random) instead of `rng`; 'draw every random number from
    rng' (every seed gives the same corruption)."""
    return _infill(tokens, np.random.default_rng(7), mask_id, mask_ratio, poisson_lambda)


def infilling_clipped_starts(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: start = min(rng.integers(0, n), n − L): starts not uniform, the last possible start is drawn L times
    as often, so spans pile up at the end of the sequence."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, start_mode="clip")


def infilling_end_never_reached(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG (off by one): starts from range(n − L) instead of range(n − L + 1), so a span never ends at the last
    token (unless nothing else is free)."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, start_mode="short_range")


def infilling_length_not_cut(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: the last span keeps its full Poisson length; 'cut to the number of tokens still to cover', so more
    than round(mask_ratio * n) tokens disappear."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, cut=False)


def infilling_zero_length_replaces(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: a zero-length span replaces the token at its gap by a mask (a span of one); 'insert one mask token
    ... removing nothing'."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, zero_replaces=True)


def infilling_fixed_length(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: every span has length round(poisson_lambda) instead of 'L = rng.poisson(poisson_lambda)': no
    zero-length spans and no spread of lengths."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, fixed_length=True)


def infilling_inserts_at_end(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: puts every inserted mask at the end of the output; 'put the inserted masks at their gaps'."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, inserts_at_end=True)


def infilling_lambda_hard_coded(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: draws lengths from Poisson(3) whatever poisson_lambda is passed."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, lam=3.0)


def infilling_adjacent_spans_merged(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0):
    """WRONG: two spans that touch share one mask; 'replace every span by **one** mask_id' gives one mask per span,
    adjacent or not."""
    return _infill(tokens, rng, mask_id, mask_ratio, poisson_lambda, merge=True)


# =============================================================================================================
# 09 · attention_with_prefix
# =============================================================================================================


def _prefix_parts(q, k, v, prefix_k, prefix_v):
    B = q.shape[0]
    pk = np.broadcast_to(prefix_k[None], (B,) + prefix_k.shape)
    pv = np.broadcast_to(prefix_v[None], (B,) + prefix_v.shape)
    return np.concatenate([pk, k], axis=2), np.concatenate([pv, v], axis=2)


def _prefix_mask(mask, q, k, P, value=True):
    B, H, L_q, _ = q.shape
    L_k = k.shape[2]
    full = np.broadcast_to(np.asarray(mask, dtype=bool), (B, H, L_q, L_k))
    return np.concatenate([np.full((B, H, L_q, P), value), full], axis=-1)


def prefix_broadcast_ref(q, k, v, prefix_k, prefix_v, mask=None):
    """CORRECT: the hint's route, np.broadcast_to for the batch, the mask broadcast to its full shape and given P
    True columns in front, ref.scaled_dot_product_attention for the attention."""
    from plmcourse import ref
    keys, values = _prefix_parts(q, k, v, prefix_k, prefix_v)
    m = None if mask is None else _prefix_mask(mask, q, k, prefix_k.shape[1])
    return ref.scaled_dot_product_attention(q, keys, values, m)


def prefix_own_attention(q, k, v, prefix_k, prefix_v, mask=None):
    """CORRECT: its own attention (einsum, −inf fill, a softmax with empty rows zero), the prefix scores computed
    separately with einsum and concatenated in front of the sentence's scores."""
    d_k = q.shape[-1]
    s_prefix = np.einsum("bhqd,hpd->bhqp", q, prefix_k) / np.sqrt(d_k)
    s_sent = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(d_k)
    if mask is not None:
        s_sent = np.where(mask, s_sent, -np.inf)
    w = _safe_softmax(np.concatenate([s_prefix, s_sent], axis=-1))
    P = prefix_k.shape[1]
    out = np.einsum("bhqp,hpd->bhqd", w[..., :P], prefix_v) + np.einsum("bhqk,bhkd->bhqd", w[..., P:], v)
    return out, w


def prefix_appended_after(q, k, v, prefix_k, prefix_v, mask=None):
    """WRONG: puts the prefix after the sentence's keys; 'weights (B, H, L_q, P + L_k), **prefix columns first**'."""
    from plmcourse import ref
    B = q.shape[0]
    keys = np.concatenate([k, np.broadcast_to(prefix_k[None], (B,) + prefix_k.shape)], axis=2)
    values = np.concatenate([v, np.broadcast_to(prefix_v[None], (B,) + prefix_v.shape)], axis=2)
    m = None
    if mask is not None:
        full = np.broadcast_to(np.asarray(mask, bool), q.shape[:3] + (k.shape[2],))
        m = np.concatenate([full, np.ones(q.shape[:3] + (prefix_k.shape[1],), bool)], axis=-1)
    return ref.scaled_dot_product_attention(q, keys, values, m)


def prefix_masked_out(q, k, v, prefix_k, prefix_v, mask=None):
    """WRONG: pads the mask with False for the prefix columns, so with a mask no query sees the prefix; 'every query
    may attend to all P prefix positions'."""
    from plmcourse import ref
    keys, values = _prefix_parts(q, k, v, prefix_k, prefix_v)
    m = None if mask is None else _prefix_mask(mask, q, k, prefix_k.shape[1], value=False)
    return ref.scaled_dot_product_attention(q, keys, values, m)


def prefix_mask_not_broadcast(q, k, v, prefix_k, prefix_v, mask=None):
    """WRONG (crashes on smaller masks): concatenates P True columns onto the mask as given, which only works when
    the mask already has the full (B, H, L_q, L_k) shape; the mask is 'bool broadcastable to (B, H, L_q, L_k)'."""
    from plmcourse import ref
    keys, values = _prefix_parts(q, k, v, prefix_k, prefix_v)
    m = None
    if mask is not None:
        m = np.concatenate([np.ones(q.shape[:3] + (prefix_k.shape[1],), bool), np.asarray(mask, bool)], axis=-1)
    return ref.scaled_dot_product_attention(q, keys, values, m)


def prefix_two_softmaxes(q, k, v, prefix_k, prefix_v, mask=None):
    """WRONG: a softmax over the prefix and another over the sentence, averaged; the formula is one softmax over the
    P + L positions ('the softmax now runs over P + L positions')."""
    from plmcourse import ref
    B = q.shape[0]
    pk = np.broadcast_to(prefix_k[None], (B,) + prefix_k.shape)
    pv = np.broadcast_to(prefix_v[None], (B,) + prefix_v.shape)
    out_p, w_p = ref.scaled_dot_product_attention(q, pk, pv)
    out_s, w_s = ref.scaled_dot_product_attention(q, k, v, mask)
    return (out_p + out_s) / 2, np.concatenate([w_p, w_s], axis=-1) / 2


def prefix_values_keys_swapped(q, k, v, prefix_k, prefix_v, mask=None):
    """WRONG: prefix_v put in front of the keys and prefix_k in front of the values (works when d_k = d_v)."""
    return prefix_broadcast_ref(q, k, v, prefix_v, prefix_k, mask)


# =============================================================================================================
# The catalogue
# =============================================================================================================

FRESH = {
    "check_alignment_precision_at_1": {
        "wrong": [
            ("no unit rows", alignment_no_unit_rows,
             "It never scales the rows to length 1, so the fit and the search use raw dot products."),
            ("zero row becomes NaN", alignment_zero_row_nan,
             "A zero row is divided by its zero length and becomes NaN, which np.argmax then picks as the nearest "
             "target."),
            ("svd of Y.T @ X", alignment_svd_swapped,
             "It takes the SVD of Yᵀ X, which gives the transposed map, from the target space to the source space."),
            ("search only the test targets", alignment_test_targets_only,
             "It searches only the test pairs' targets instead of the whole target table."),
            ("mean over pairs", alignment_per_pair,
             "It averages over test pairs instead of distinct test sources, so a source with two translations counts "
             "twice."),
            ("argmax on the wrong axis", alignment_argmax_wrong_axis,
             "It takes the argmax over the sources instead of over the targets."),
            ("lists of tuples crash", alignment_needs_arrays,
             "It indexes the pairs as arrays and crashes on the lists of (source, target) tuples the exercise allows."),
            ("last translation only", alignment_last_translation_only,
             "It keeps only one translation per source, so a source whose nearest target is its other translation "
             "counts as wrong."),
            ("train targets excluded", alignment_exclude_train_targets,
             "It removes the train pairs' targets from the candidates, though the nearest target is searched in the "
             "whole table."),
            ("invented cosine threshold", alignment_cosine_threshold,
             "It also requires the best cosine to be above 0.5, a threshold the exercise does not have."),
            ("rotation fitted on raw rows", alignment_fit_on_raw_rows,
             "It fits the rotation on the raw rows instead of the unit rows."),
        ],
        "correct": [
            ("loop with a dict of translations", alignment_loop_dict),
            ("np.unique and einsum", alignment_unique_einsum),
        ],
    },
    "check_whole_entity_mask": {
        "wrong": [
            ("u per token", entity_mask_u_per_token,
             "It draws u for every token of a unit, so an entity is no longer masked, replaced or kept as a whole."),
            ("random id may be mask_id", entity_mask_random_may_be_mask,
             "Its random ids are drawn from the whole vocabulary, so mask_id can be drawn."),
            ("one random id per unit", entity_mask_one_random_id_per_unit,
             "It gives every token of a replaced unit the same random id instead of one each."),
            ("stops at the first misfit", entity_mask_stop_at_first_misfit,
             "It stops at the first unit that does not fit instead of skipping it and trying shorter units later."),
            ("budget shared by the batch", entity_mask_budget_per_batch,
             "It spends one budget over the whole batch instead of one per row."),
            ("single tokens are not units", entity_mask_spans_only,
             "It only ever masks entity spans; single positions outside the spans are units too."),
            ("units not shuffled", entity_mask_no_shuffle,
             "It takes the units left to right instead of in the order of rng.permutation."),
            ("own fixed-seed generator", entity_mask_own_seed,
             "It draws from a fixed-seed generator of its own instead of the rng it is given."),
            ("random and keep branches swapped", entity_mask_random_and_keep_swapped,
             "It keeps the unit for 0.8 ≤ u < 0.9 and replaces it for u ≥ 0.9, the two branches swapped."),
            ("labels only where changed", entity_mask_labels_only_changed,
             "It leaves the labels at -100 on a taken unit that stayed unchanged."),
            ("changes token_ids in place", entity_mask_in_place,
             "It writes the masks into token_ids instead of a new array."),
            ("span end included", entity_mask_end_inclusive,
             "It treats a span's end as included, so every entity takes one token too many."),
            ("strict fit", entity_mask_strict_fit,
             "It takes a unit only if it is strictly shorter than what is left, so the budget is never filled "
             "exactly."),
            ("pool from the batch", entity_mask_pool_from_batch,
             "It draws random ids only from the ids seen in the batch instead of the whole vocabulary without "
             "mask_id."),
            ("80/10 shares swapped", entity_mask_shares_swapped,
             "It masks 10% of the units and replaces 80% with random ids, the shares swapped."),
        ],
        "correct": [
            ("spans then singles, as listed", entity_mask_literal),
            ("units sorted by position", entity_mask_sorted_units),
            ("rng.choice over the pool, own loop", entity_mask_choice_pool_loop),
        ],
    },
    "check_unfreezing_groups": {
        "wrong": [
            ("bottom-up", unfreezing_bottom_up, "It unfreezes from the embeddings up instead of from the head down."),
            ("frozen groups left out", unfreezing_frozen_left_out,
             "It leaves frozen groups out of the dict instead of giving them 0.0."),
            ("decay the wrong way", unfreezing_decay_reversed,
             "It gives the embeddings the full rate and the head the most decayed one."),
            ("unfreezes one step late", unfreezing_strictly_after,
             "Group k starts one step after k * unfreeze_every instead of at it."),
            ("layers named from 1", unfreezing_one_based_names,
             "It names the layers layer.n_layers ... layer.1 instead of layer.n_layers-1 ... layer.0."),
            ("divides by unfreeze_every", unfreezing_divides_by_every,
             "It divides by unfreeze_every and crashes when it is 0."),
            ("exponent k + 1", unfreezing_exponent_off_by_one,
             "Its exponent is off by one, so even the head gets a decayed rate."),
            ("top layer with the head", unfreezing_head_and_top_together,
             "It starts the top layer at step 0 with the head, one group ahead of the schedule."),
            ("frozen rate None", unfreezing_frozen_none, "It gives a frozen group None instead of 0.0."),
        ],
        "correct": [
            ("loop over k", unfreezing_loop),
            ("count of unfrozen groups, names reversed", unfreezing_count_unfrozen),
        ],
    },
    "check_patchify": {
        "wrong": [
            ("column-major patches", patchify_column_major,
             "It orders the patches column by column instead of row by row."),
            ("channel-last flattening", patchify_channel_last,
             "It flattens each patch row, column, channel instead of channel, row, column."),
            ("one plain reshape", patchify_plain_reshape,
             "It cuts the image with a single reshape, which takes runs of pixels, not squares."),
            ("crops instead of raising", patchify_crops_silently,
             "It crops an image whose size is not a multiple of the patch instead of raising ValueError."),
            ("cast to float64", patchify_float_cast, "It returns float64 instead of keeping the images' dtype."),
            ("checks the height only", patchify_checks_height_only,
             "It checks only the height and silently drops the last columns when the width is not a multiple of the "
             "patch."),
            ("pixel row and column swapped", patchify_pixels_transposed,
             "It flattens each patch column before row, a transposed patch."),
            ("assert instead of ValueError", patchify_assert,
             "It raises AssertionError instead of ValueError for a bad size."),
        ],
        "correct": [
            ("torch permute, dtype back", patchify_torch_permute),
            ("loops over the grid", patchify_loops),
        ],
    },
    "check_joint_attention_mask": {
        "wrong": [
            ("no diagonal for padding", joint_mask_no_diagonal,
             "Padding rows are left empty; a padding position must attend to itself."),
            ("image before text", joint_mask_image_first, "It puts the image positions before the text positions."),
            ("keys only", joint_mask_keys_only,
             "It masks only padding keys, so a padding query attends to every real token instead of itself only."),
            ("integer mask", joint_mask_int_dtype, "It returns 0/1 integers instead of a boolean array."),
            ("or instead of and", joint_mask_or, "It allows a pair when either token is real instead of both."),
            ("padding assumed at the end", joint_mask_trailing_padding,
             "It assumes padding sits at the end of each row and rebuilds the masks from their lengths."),
            ("head axis added", joint_mask_head_axis, "It returns (B, 1, L, L) with a head axis instead of (B, L, L)."),
        ],
        "correct": [
            ("einsum and the identity", joint_mask_einsum),
            ("three loops", joint_mask_loops),
            ("torch, converted back", joint_mask_torch),
        ],
    },
    "check_clip_loss": {
        "wrong": [
            ("no normalisation", clip_no_normalisation, "It uses raw dot products instead of cosine similarities."),
            ("image-to-text only", clip_one_direction,
             "It returns only the image-to-text loss instead of the mean of both directions."),
            ("sum of the directions", clip_sum_of_directions,
             "It adds the two directions' losses instead of averaging them."),
            ("global max shift", clip_global_max_shift,
             "It subtracts the single largest logit of the matrix instead of each row's and column's, which "
             "underflows at small temperatures."),
            ("zero row NaN", clip_zero_row_nan,
             "A zero embedding is divided by its zero norm and the loss becomes NaN."),
            ("no max shift", clip_no_max_shift,
             "It exponentiates the logits without subtracting the max and overflows at small temperatures."),
            ("times the temperature", clip_times_temperature,
             "It multiplies the cosines by the temperature instead of dividing by it."),
            ("per-pair losses", clip_per_pair, "It returns the per-pair losses instead of one float."),
            ("columns normalised", clip_normalise_columns,
             "It normalises each feature over the batch instead of each embedding to length 1."),
        ],
        "correct": [
            ("np.logaddexp.reduce", clip_logaddexp_reduce),
            ("torch cross_entropy", clip_torch_cross_entropy),
            ("loop over pairs", clip_loop),
        ],
    },
    "check_sft_loss": {
        "wrong": [
            ("no shift", sft_no_shift,
             "It scores each token with its own position's logits instead of the previous position's."),
            ("mask not shifted", sft_mask_not_shifted,
             "It shifts the targets but reads answer_mask at t instead of t + 1."),
            ("mean of row means", sft_mean_of_row_means,
             "It averages each row first, so short answers weigh as much as long ones."),
            ("0 / 0 with no answer", sft_zero_division,
             "It divides by a zero count and returns NaN when no token is counted instead of 0.0."),
            ("log of a softmax", sft_log_of_softmax,
             "It takes the log of a softmax, which is -inf for probabilities that underflow at large logits."),
            ("mean over all positions", sft_mean_over_all_positions,
             "It divides by every position instead of by the number of counted tokens."),
            ("float32 arithmetic", sft_float32, "It computes in float32 instead of float64."),
            ("shift the wrong way", sft_shift_reversed,
             "It shifts the other way, so each position predicts the token before it."),
        ],
        "correct": [
            ("take_along_axis", sft_take_along),
            ("torch cross_entropy sum / count", sft_torch_float64),
            ("loop with logaddexp", sft_loop),
        ],
    },
    "check_bradley_terry_loss": {
        "wrong": [
            ("log of 1 / (1 + exp(-x))", bt_naive_log_sigmoid,
             "It computes log σ as the log of 1 / (1 + exp(-x)), which is -inf at a margin of -1000."),
            ("exp(x) / (1 + exp(x))", bt_exp_ratio,
             "It computes σ as exp(x) / (1 + exp(x)), which is NaN at a margin of +1000."),
            ("chosen and rejected swapped", bt_swapped, "It swaps the chosen and the rejected rewards."),
            ("sum instead of mean", bt_sum, "It sums the pairs' losses instead of averaging them."),
            ("log1p(exp(-x))", bt_log1p_exp,
             "It uses log1p(exp(-x)) without a stable branch, which is inf at a margin of -1000."),
            ("sign flipped", bt_sign, "It returns the log-likelihood instead of its negative."),
            ("margin clipped", bt_clipped_margin,
             "It clips the margin to ±50, which changes the loss at large margins."),
        ],
        "correct": [
            ("np.logaddexp", bt_logaddexp),
            ("torch logsigmoid", bt_torch_logsigmoid),
            ("two-branch log1p", bt_piecewise_log1p),
        ],
    },
    "check_dpo_loss": {
        "wrong": [
            ("beta hard-coded", dpo_beta_hard_coded, "It always uses beta = 0.1 and ignores the beta passed in."),
            ("beta on the policy only", dpo_beta_on_policy_only,
             "It multiplies only the policy's log-probabilities by beta, not the reference's."),
            ("chosen and rejected swapped", dpo_swapped, "It swaps the chosen and the rejected answers in the margin."),
            ("naive log sigmoid", dpo_naive_sigmoid,
             "It takes the log of 1 / (1 + exp(-z)), which is -inf at a margin of -1000."),
            ("divides by beta", dpo_divides_by_beta,
             "It divides the log-ratio difference by beta instead of multiplying by it."),
            ("returns the rewards too", dpo_returns_rewards,
             "It returns a tuple with the rewards instead of the loss as a float."),
            ("references paired wrongly", dpo_wrong_pairing,
             "It subtracts each answer's log-probability under the reference from the other answer's policy term."),
            ("beta applied twice", dpo_beta_squared, "It applies beta to each reward and again to their difference."),
        ],
        "correct": [
            ("regrouped margin", dpo_regrouped),
            ("torch logsigmoid", dpo_torch),
            ("max + log1p softplus", dpo_via_softplus_where),
        ],
    },
    "check_softmax": {
        "wrong": [
            ("no max shift", softmax_no_shift,
             "It exponentiates without subtracting the max, so large scores overflow."),
            ("NaN for an all -inf slice", softmax_nan_all_masked,
             "It returns NaN for a slice that is entirely -inf instead of zeros."),
            ("global max", softmax_global_max,
             "It subtracts the array's overall max instead of each slice's, so slices far below it underflow to NaN."),
            ("last axis only", softmax_last_axis_only,
             "It always normalises the last axis and ignores the axis argument."),
            ("modifies x", softmax_in_place, "It changes the input array in place."),
            ("-inf replaced by -1e9", softmax_large_negative,
             "It replaces -inf with -1e9, so an all -inf slice comes out uniform instead of zero."),
            ("min instead of max", softmax_min_shift,
             "It subtracts the minimum instead of the maximum, so slices with a wide range overflow."),
        ],
        "correct": [
            ("finite max, zero sum guarded", softmax_masked_max),
            ("logsumexp route", softmax_via_logsumexp),
            ("torch softmax, NaN zeroed", softmax_torch),
            ("float64 result", softmax_float64),
        ],
    },
    "check_scaled_dot_product_attention": {
        "wrong": [
            ("NaN for a fully masked query", sdpa_nan_rows,
             "A query with no allowed key gets NaN instead of zero weights and a zero output."),
            ("mask applied after softmax", sdpa_mask_after_softmax,
             "It masks the weights after the softmax without renormalising, so rows no longer sum to 1."),
            ("mask after softmax, renormalised", sdpa_renormalise_after_softmax,
             "It masks after the softmax and renormalises, which fails when a masked score dominates and the allowed "
             "weights underflow."),
            ("boolean indexing", sdpa_boolean_index,
             "It indexes the scores with the mask, which fails for masks that only broadcast to the scores' shape."),
            ("divides by d_k", sdpa_divide_by_dk, "It divides the scores by d_k instead of by its square root."),
            ("-1e9 fill", sdpa_minus_1e9,
             "It fills masked scores with -1e9, so a fully masked query gets uniform weights instead of zeros."),
            ("score 0 read as masked", sdpa_zero_means_masked,
             "It multiplies the scores by the mask and treats any score of exactly 0 as masked, so genuine zero "
             "scores are masked too."),
            ("softmax over queries", sdpa_softmax_over_queries,
             "It takes the softmax over the queries instead of over the keys."),
            ("boolean mask added", sdpa_additive_bool,
             "It adds the boolean mask to the scores instead of setting disallowed scores to -inf."),
            ("mask inverted", sdpa_mask_inverted, "It treats True as blocked instead of allowed."),
        ],
        "correct": [
            ("einsum with where", sdpa_einsum),
            ("torch, NaN rows zeroed", sdpa_torch),
            ("finite fill, empty rows zeroed", sdpa_any_allowed),
        ],
    },
    "check_multi_head_attention": {
        "wrong": [
            ("NaN for a fully masked query", mha_softmax_nan,
             "A query whose keys are all masked gets NaN weights and output instead of zeros."),
            ("heads averaged", mha_heads_averaged,
             "It returns weights averaged over the heads instead of one set per head."),
            ("scaled by d_model", mha_scale_d_model,
             "It divides the scores by the square root of d_model instead of the head dimension."),
            ("reshape without transpose", mha_direct_reshape,
             "It reshapes straight to (B, h, L, d_k), which mixes positions into heads."),
            ("-1e9 fill", mha_minus_1e9,
             "It fills masked scores with -1e9, so a fully masked query gets uniform weights and the values' average "
             "instead of zeros."),
            ("2-D mask read as padding", mha_mask_unsqueezed,
             "It treats a 2-D (L_q, L_k) mask as a (B, L_k) padding mask, so the mask lands on the batch axis."),
            ("softmax in NumPy", mha_numpy_softmax,
             "It computes the attention weights in NumPy, which cuts the gradients through them."),
            ("no output projection", mha_no_output_projection, "It forgets the final multiplication by w_o."),
            ("keys from the queries", mha_keys_from_queries, "It computes keys and values from x_q instead of x_kv."),
        ],
        "correct": [
            ("torch.where on empty rows", mha_where_zero),
            ("einsum, hand-written softmax", mha_einsum_manual_softmax),
            ("nan_to_num after softmax", mha_nan_to_num),
        ],
    },
    "check_mlm_mask": {
        "wrong": [
            ("pool from the batch", mlm_pool_from_batch,
             "It draws random replacements only from ids that occur in the batch instead of all ordinary ids."),
            ("specials assumed lowest", mlm_specials_lowest,
             "It assumes the special ids are the lowest ids, so where they are not, it draws special ids and never "
             "the lowest ordinary ones."),
            ("random from the whole vocabulary", mlm_random_any_id,
             "Its random replacements can be special ids or mask_id."),
            ("own fixed-seed generator", mlm_own_seed,
             "It draws from a fixed-seed generator of its own instead of the rng it is given."),
            ("exact count", mlm_exact_count,
             "It chooses exactly 15% of the ordinary tokens instead of each one independently with probability p."),
            ("specials masked", mlm_masks_specials, "It can choose special tokens such as [CLS], [SEP] and padding."),
            ("labels only where changed", mlm_labels_only_changed,
             "It leaves the labels at -100 on chosen tokens that stayed unchanged."),
            ("labels from the inputs", mlm_labels_from_inputs,
             "Its labels hold the corrupted input token instead of the original."),
            ("corrupts tokens in place", mlm_in_place, "It changes the tokens array it was given instead of a copy."),
            ("random never the original", mlm_random_never_original,
             "It redraws a random replacement that equals the original token, which the uniform draw allows."),
            ("p hard-coded", mlm_p_hard_coded, "It always uses 0.15 and ignores the p passed in."),
            ("np.isin on a set", mlm_isin_set,
             "It passes special_ids straight to np.isin, which finds nothing when they come as a set."),
            ("mask_id in the pool", mlm_mask_id_in_pool,
             "It leaves mask_id in the pool of random replacements when mask_id is not among the special ids."),
            ("80/10 shares swapped", mlm_shares_swapped,
             "It masks 10% of the chosen tokens and replaces 80% with random ones, the shares swapped."),
        ],
        "correct": [
            ("vectorised, two draws", mlm_straight),
            ("candidate ids drawn first", mlm_ids_drawn_first),
            ("loop per token", mlm_loop_per_token),
        ],
    },
    "check_text_infilling": {
        "wrong": [
            ("one mask per token", infilling_mask_per_token,
             "It puts one mask per removed token instead of one mask per span."),
            ("no zero-length spans", infilling_no_zero_length,
             "It turns a zero length into a span of one instead of inserting a mask."),
            ("overlapping spans", infilling_overlapping_spans,
             "It lets spans overlap, so they merge and fewer tokens than the budget are removed."),
            ("floor of the budget", infilling_floor_budget,
             "It covers int(mask_ratio * n) tokens instead of round(mask_ratio * n)."),
            ("budget rounded half up", infilling_round_half_up,
             "It rounds the number of tokens to cover half up instead of with round(), so halves round the other way."),
            ("own fixed-seed generator", infilling_own_seed,
             "It draws from a fixed-seed generator of its own instead of the rng it is given."),
            ("starts clipped to the end", infilling_clipped_starts,
             "Its starts are not uniform: clipping them piles spans up at the end of the sequence."),
            ("last start never drawn", infilling_end_never_reached,
             "An off-by-one in the start range means no span ends at the last token."),
            ("length not cut", infilling_length_not_cut,
             "It does not cut the last span to the tokens still to cover, so too many tokens are removed."),
            ("zero length replaces a token", infilling_zero_length_replaces,
             "A zero-length span replaces a token with a mask instead of inserting a mask."),
            ("fixed span length", infilling_fixed_length,
             "Every span has the fixed length round(poisson_lambda) instead of a Poisson draw."),
            ("inserted masks at the end", infilling_inserts_at_end,
             "It puts the inserted masks at the end of the output instead of at their gaps."),
            ("lambda hard-coded", infilling_lambda_hard_coded,
             "It always draws lengths with mean 3 and ignores the poisson_lambda passed in."),
            ("adjacent spans share a mask", infilling_adjacent_spans_merged,
             "Two spans that touch get one mask between them instead of one each."),
        ],
        "correct": [
            ("rejection sampling of starts", infilling_rejection),
            ("uniform over free starts", infilling_uniform_over_free_starts),
            ("marker array, from scratch", infilling_marks_then_builds),
        ],
    },
    "check_attention_with_prefix": {
        "wrong": [
            ("prefix after the sentence", prefix_appended_after,
             "It puts the prefix columns after the sentence's instead of first."),
            ("prefix masked out", prefix_masked_out,
             "It pads the mask with False, so with a mask no query can see the prefix."),
            ("mask not broadcast", prefix_mask_not_broadcast,
             "It concatenates onto the mask as given and crashes unless the mask has the full shape."),
            ("two softmaxes averaged", prefix_two_softmaxes,
             "It runs one softmax over the prefix and another over the sentence instead of one over both."),
            ("prefix keys and values swapped", prefix_values_keys_swapped,
             "It puts the prefix values in front of the keys and the prefix keys in front of the values."),
        ],
        "correct": [
            ("broadcast_to and ref attention", prefix_broadcast_ref),
            ("own attention, prefix scores separate", prefix_own_attention),
        ],
    },
}


# ---- What the checks answer (issue 45), recorded after the checks were changed ------------------------------
# (check, label, now, fragment): now is "named" (the message names the answer's cause; fragment is part of
# it), "generic" (it says what differs, not why) or "misleading" (it names another cause). Measured before
# and after in tests/mistake_catalogue/fresh/RESULTS.md. text_infilling's answers are left out here: they
# take about 40 s a call (a Python loop over 20,000 tokens per span), too slow for the suite; they were
# measured by hand (same file).
#
# "random and keep branches swapped" (whole_entity_mask) is right since the exercise stopped fixing which
# values of u give which treatment (a seeded reference cannot tell, the units' numbering being free).
CORRECT_BY_THE_SPEC_NOW = [("check_whole_entity_mask", "random and keep branches swapped")]
# Written as correct, but each exercise says NumPy only, and the library function is switched off (sealed) while
# it is checked: the check says so in one sentence ("your function calls ...; write it yourself").
NUMPY_ONLY = [("check_softmax", "torch softmax, NaN zeroed"), ("check_sft_loss", "torch cross_entropy sum / count"),
              ("check_bradley_terry_loss", "torch logsigmoid"), ("check_dpo_loss", "torch logsigmoid")]

EXPECTED = [
    ('check_alignment_precision_at_1', 'no unit rows', 'named', 'rows never scaled to length 1 (the fit and the s'),
    ('check_alignment_precision_at_1', 'zero row becomes NaN', 'named', 'a zero row divided by its length 0 gives NaN, an'),
    ('check_alignment_precision_at_1', 'svd of Y.T @ X', 'named', 'W transposed (V U^T): with U S V^T = svd(X^T Y),'),
    ('check_alignment_precision_at_1', 'search only the test targets', 'named', "the search restricted to the test pairs' targets"),
    ('check_alignment_precision_at_1', 'mean over pairs', 'named', 'each test pair counted instead of each distinct '),
    ('check_alignment_precision_at_1', 'argmax on the wrong axis', 'generic', ''),
    ('check_alignment_precision_at_1', 'lists of tuples crash', 'named', 'uples: np.asarray(pairs) makes the (k, 2) array)'),
    ('check_alignment_precision_at_1', 'last translation only', 'named', 'one translation kept per source (the last listed'),
    ('check_alignment_precision_at_1', 'train targets excluded', 'named', "the train pairs' targets left out of the search:"),
    ('check_alignment_precision_at_1', 'invented cosine threshold', 'named', 'a cosine threshold (a match counted only above a'),
    ('check_alignment_precision_at_1', 'rotation fitted on raw rows', 'named', 'the map fitted on rows not scaled to length 1: s'),
    ('check_whole_entity_mask', 'u per token', 'named', 'the 80/10/10 choice drawn for each token instead'),
    ('check_whole_entity_mask', 'random id may be mask_id', 'named', 'a random replacement drew mask_id: the random id'),
    ('check_whole_entity_mask', 'one random id per unit', 'named', 'ly the choice of treatment is made once per unit'),
    ('check_whole_entity_mask', 'stops at the first misfit', 'named', ' through the others, a shorter one may still fit'),
    ('check_whole_entity_mask', 'budget shared by the batch', 'named', 'udget is per row, each row gets its own 4 tokens'),
    ('check_whole_entity_mask', 'single tokens are not units', 'named', "single positions not treated as units: a row's u"),
    ('check_whole_entity_mask', 'units not shuffled', 'named', ' every unit as likely to come first as any other'),
    ('check_whole_entity_mask', 'own fixed-seed generator', 'named', 'ment instead of creating a generator of your own'),
    ('check_whole_entity_mask', 'labels only where changed', 'named', 'every chosen unit is labelled, whatever it shows'),
    ('check_whole_entity_mask', 'changes token_ids in place', 'named', 'method ending in _ writes into the input itself)'),
    ('check_whole_entity_mask', 'span end included', 'named', '..end - 1, and position end is a unit of its own'),
    ('check_whole_entity_mask', 'strict fit', 'named', 'n its length is at most what is left (<=, not <)'),
    ('check_whole_entity_mask', 'pool from the batch', 'named', '1 except mask_id, not the ids seen in the tokens'),
    ('check_whole_entity_mask', '80/10 shares swapped', 'named', 'the 80% and a 10% share swapped: every token of '),
    ('check_unfreezing_groups', 'bottom-up', 'named', 'unfrozen from the bottom: gradual unfreezing sta'),
    ('check_unfreezing_groups', 'frozen groups left out', 'named', "s'] (every group, frozen ones too with rate 0.0)"),
    ('check_unfreezing_groups', 'decay the wrong way', 'named', 'the decay counted from the bottom (the embedding'),
    ('check_unfreezing_groups', 'unfreezes one step late', 'named', 'one step late: group k trains from step k · unfr'),
    ('check_unfreezing_groups', 'layers named from 1', 'named', "s'] (every group, frozen ones too with rate 0.0)"),
    ('check_unfreezing_groups', 'divides by unfreeze_every', 'named', 'compare step >= k * unfreeze_every, no division)'),
    ('check_unfreezing_groups', 'exponent k + 1', 'named', "the head's rate decayed too: the head gets base_"),
    ('check_unfreezing_groups', 'top layer with the head', 'named', 'every group one unfreeze_every early (the top la'),
    ('check_unfreezing_groups', 'frozen rate None', 'named', 'None, expected a number (0.0 for a frozen group)'),
    ('check_patchify', 'column-major patches', 'named', 'the patches in column-major order (down each col'),
    ('check_patchify', 'channel-last flattening', 'named', 'each patch flattened channels last (row, column,'),
    ('check_patchify', 'one plain reshape', 'named', 'a plain reshape without a transpose, which cuts '),
    ('check_patchify', 'crops instead of raising', 'named', 'ped silently; test H % patch and W % patch first'),
    ('check_patchify', 'cast to float64', 'named', ' dtype (no astype, no np.zeros of another dtype)'),
    ('check_patchify', 'checks the height only', 'named', 'ped silently; test H % patch and W % patch first'),
    ('check_patchify', 'pixel row and column swapped', 'named', 'each patch transposed inside (pixel column befor'),
    ('check_patchify', 'assert instead of ValueError', 'named', 'and python -O removes it): raise ValueError(...)'),
    ('check_joint_attention_mask', 'no diagonal for padding', 'named', "a padding position's row is empty (all False): a"),
    ('check_joint_attention_mask', 'image before text', 'named', 'the image tokens first: the sequence is [text; i'),
    ('check_joint_attention_mask', 'keys only', 'named', 'a padding position attends to the real tokens (o'),
    ('check_joint_attention_mask', 'integer mask', 'named', 'the pattern is right; create it with dtype=bool)'),
    ('check_joint_attention_mask', 'or instead of and', 'named', 'a pair allowed when EITHER token is real (or ins'),
    ('check_joint_attention_mask', 'padding assumed at the end', 'named', 'a mask from the counts of real tokens (a padding'),
    ('check_joint_attention_mask', 'head axis added', 'named', 'dcasts; this function returns (B, T + N, T + N))'),
    ('check_clip_loss', 'no normalisation', 'named', 'dot products instead of cosines: normalise each '),
    ('check_clip_loss', 'image-to-text only', 'named', 'only one direction, image to text (each image ag'),
    ('check_clip_loss', 'sum of the directions', 'named', 'the two directions added, not averaged: (image-t'),
    ('check_clip_loss', 'global max shift', 'named', ' other direction) by its own max (keepdims=True)'),
    ('check_clip_loss', 'zero row NaN', 'named', 'where it is not 0 (np.where(norm == 0, 1, norm))'),
    ('check_clip_loss', 'no max shift', 'named', 'ax before the exponential (a stable log-softmax)'),
    ('check_clip_loss', 'times the temperature', 'named', 'the cosines multiplied by the temperature instea'),
    ('check_clip_loss', 'per-pair losses', 'named', ', expected one number: the mean over the B pairs'),
    ('check_clip_loss', 'columns normalised', 'named', 'the rows normalised along axis 0 (each feature o'),
    ('check_sft_loss', 'no shift', 'named', "no shift: position t's logits predict the NEXT t"),
    ('check_sft_loss', 'mask not shifted', 'named', 'the mask not shifted with the tokens: a predicte'),
    ('check_sft_loss', 'mean of row means', 'named', "the mean of each row's mean instead of the mean "),
    ('check_sft_loss', '0 / 0 with no answer', 'named', ' nothing counts (there is nothing to learn from)'),
    ('check_sft_loss', 'log of a softmax', 'named', 'log(sum(exp(x − max))) along the vocabulary axis'),
    ('check_sft_loss', 'mean over all positions', 'named', 'the masked sum divided by every position, B · (T'),
    ('check_sft_loss', 'float32 arithmetic', 'named', 'which is float32 rounding'),
    ('check_sft_loss', 'shift the wrong way', 'named', 'the shift the wrong way round: logits[:, :-1] pr'),
    ('check_bradley_terry_loss', 'log of 1 / (1 + exp(-x))', 'named', 'np.logaddexp(0, −x), which stays finite at any x'),
    ('check_bradley_terry_loss', 'exp(x) / (1 + exp(x))', 'named', '; compute −log sigmoid(x) as np.logaddexp(0, −x)'),
    ('check_bradley_terry_loss', 'chosen and rejected swapped', 'named', 'the sign of the margin flipped (chosen and rejec'),
    ('check_bradley_terry_loss', 'sum instead of mean', 'named', 'the sum over the pairs instead of their mean.'),
    ('check_bradley_terry_loss', 'log1p(exp(-x))', 'named', 'np.logaddexp(0, −x), which stays finite at any x'),
    ('check_bradley_terry_loss', 'sign flipped', 'named', 'the minus missing: the loss is −mean log sigmoid'),
    ('check_bradley_terry_loss', 'margin clipped', 'named', 'the margin clipped to stop exp overflowing: that'),
    ('check_dpo_loss', 'beta hard-coded', 'named', 'beta fixed at 0.1 whatever the argument says: us'),
    ('check_dpo_loss', 'beta on the policy only', 'named', "beta applied to the policy's log-probabilities o"),
    ('check_dpo_loss', 'chosen and rejected swapped', 'named', 'the sign of the margin flipped (chosen and rejec'),
    ('check_dpo_loss', 'naive log sigmoid', 'named', 'np.logaddexp(0, −x), which stays finite at any x'),
    ('check_dpo_loss', 'divides by beta', 'named', 'the margin divided by beta instead of multiplied'),
    ('check_dpo_loss', 'returns the rewards too', 'named', 'n returned a tuple of 3 items, expected a number'),
    ('check_dpo_loss', 'references paired wrongly', 'named', 'the reference terms swapped between the answers,'),
    ('check_dpo_loss', 'beta applied twice', 'named', 'beta applied twice (to each log-ratio and again '),
    ('check_softmax', 'no max shift', 'named', 'g the axis (keepdims=True) before exponentiating'),
    ('check_softmax', 'NaN for an all -inf slice', 'named', 'eros (where the max is -inf, subtract 0 instead)'),
    ('check_softmax', 'global max', 'named', 'g the axis (keepdims=True) before exponentiating'),
    ('check_softmax', 'last axis only', 'named', 'a softmax along axis 1, but this case asks for a'),
    ('check_softmax', 'modifies x', 'named', 'method ending in _ writes into the input itself)'),
    ('check_softmax', '-inf replaced by -1e9', 'named', '-inf replaced by a finite number such as -1e9: a'),
    ('check_softmax', 'min instead of max', 'generic', ''),
    ('check_scaled_dot_product_attention', 'NaN for a fully masked query', 'named', 'ch a row must get zero weights and a zero output'),
    ('check_scaled_dot_product_attention', 'mask applied after softmax', 'named', 'the mask applied to the weights after the softma'),
    ('check_scaled_dot_product_attention', 'mask after softmax, renormalised', 'named', 'the mask applied to the weights after the softma'),
    ('check_scaled_dot_product_attention', 'boolean indexing', 'named', "mask, float('-inf')) in torch), which broadcast)"),
    ('check_scaled_dot_product_attention', 'divides by d_k', 'named', 'scores divided by d_k instead of sqrt(d_k).'),
    ('check_scaled_dot_product_attention', '-1e9 fill', 'named', 'a query with no allowed key getting uniform weig'),
    ('check_scaled_dot_product_attention', 'score 0 read as masked', 'named', 'a score of exactly 0 taken as masked (the scores'),
    ('check_scaled_dot_product_attention', 'softmax over queries', 'named', 'the softmax taken over the queries (axis -2) ins'),
    ('check_scaled_dot_product_attention', 'boolean mask added', 'named', 'the boolean mask added to the scores (True count'),
    ('check_scaled_dot_product_attention', 'mask inverted', 'named', 'attention with the mask inverted (True means the'),
    ('check_multi_head_attention', 'NaN for a fully masked query', 'named', 'aN: replace the NaN, e.g. with .nan_to_num(0.0))'),
    ('check_multi_head_attention', 'heads averaged', 'named', ', L_k) matrix per head, not averaged over heads)'),
    ('check_multi_head_attention', 'scaled by d_model', 'named', 'scores divided by sqrt(d_model) instead of sqrt('),
    ('check_multi_head_attention', 'reshape without transpose', 'named', 'heads split in the wrong order: reshape (B, L, d'),
    ('check_multi_head_attention', '-1e9 fill', 'named', 'a query with no allowed key getting uniform weig'),
    ('check_multi_head_attention', '2-D mask read as padding', 'generic', ''),
    ('check_multi_head_attention', 'softmax in NumPy', 'named', 'uts the autograd graph, keep every step in torch'),
    ('check_multi_head_attention', 'no output projection', 'named', 'multi-head attention without the output projecti'),
    ('check_multi_head_attention', 'keys from the queries', 'named', 'keys and values computed from x_q instead of x_k'),
    ('check_mlm_mask', 'pool from the batch', 'named', 'cial nor mask_id, not the ids seen in the tokens'),
    ('check_mlm_mask', 'specials assumed lowest', 'named', ' is the ids that are neither special NOR mask_id'),
    ('check_mlm_mask', 'random from the whole vocabulary', 'named', '-1; draw replacements from the ordinary ids only'),
    ('check_mlm_mask', 'own fixed-seed generator', 'named', 'ment instead of creating a generator of your own'),
    ('check_mlm_mask', 'exact count', 'named', '; this close every time has probability 5.8e-07)'),
    ('check_mlm_mask', 'specials masked', 'named', '_ids ([CLS], [SEP], [PAD], ...) are never chosen'),
    ('check_mlm_mask', 'labels only where changed', 'named', 'd are predicted too: label every chosen position'),
    ('check_mlm_mask', 'labels from the inputs', 'named', 'e ORIGINAL token (what the model has to recover)'),
    ('check_mlm_mask', 'corrupts tokens in place', 'named', 'method ending in _ writes into the input itself)'),
    ('check_mlm_mask', 'random never the original', 'named', 'y from ALL 5 ordinary ids, the original included'),
    ('check_mlm_mask', 'p hard-coded', 'named', 'y p); perhaps p is ignored and 0.15 used instead'),
    ('check_mlm_mask', 'np.isin on a set', 'named', 'ing), so convert it with list(special_ids) first'),
    ('check_mlm_mask', 'mask_id in the pool', 'named', ' is the ids that are neither special NOR mask_id'),
    ('check_mlm_mask', '80/10 shares swapped', 'named', 'the 80% and a 10% share swapped: [MASK] for 80% '),
    ('check_attention_with_prefix', 'prefix after the sentence', 'named', 'the prefix put after the keys: the prefix goes i'),
    ('check_attention_with_prefix', 'prefix masked out', 'named', 'the prefix columns masked out: every query may a'),
    ('check_attention_with_prefix', 'mask not broadcast', 'named', 'k) before putting P True columns in front of it)'),
    ('check_attention_with_prefix', 'two softmaxes averaged', 'generic', ''),
    ('check_attention_with_prefix', 'prefix keys and values swapped', 'named', 'prefix_k and prefix_v swapped.'),
]
