"""Right and wrong answers to the three exercises of notebook 13 (alignment_precision_at_1, whole_entity_mask,
unfreezing_groups, all NumPy), as data for tests/test_grading_transfer.py.

CORRECT: (name, function) pairs that must pass, written in different styles; MISTAKES:
(name, function, fragment): the check must fail with a message containing `fragment`, the
fragment naming the mistake. Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import torch

from plmcourse import ref
from plmcourse.nn import transfer as nn_transfer
from plmcourse.ref import transfer as ref_transfer


# ============================================================================
# alignment_precision_at_1(src_emb, tgt_emb, train_pairs, test_pairs)


def align_notebook(src_emb, tgt_emb, train_pairs, test_pairs):
    """As the notebook's solution."""
    def unit(x):
        x = np.asarray(x, dtype=np.float64)
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return x / np.where(norms == 0, 1.0, norms)

    x, y = unit(src_emb), unit(tgt_emb)
    train, test = np.asarray(train_pairs), np.asarray(test_pairs)
    u, _, vt = np.linalg.svd(x[train[:, 0]].T @ y[train[:, 1]])
    w = u @ vt  # (d, d)
    sources = np.unique(test[:, 0])
    nearest = np.argmax((x[sources] @ w) @ y.T, axis=1)  # the first maximum: the lowest index
    right = [nearest[i] in test[test[:, 0] == s, 1] for i, s in enumerate(sources)]
    return float(np.mean(right))


def align_loops(src_emb, tgt_emb, train_pairs, test_pairs):
    """Plain loops for the search, a dict of translations."""
    def unit(row):
        n = np.sqrt((row ** 2).sum())
        return row / n if n > 0 else row * 0.0

    x = np.array([unit(r) for r in np.asarray(src_emb, dtype=np.float64)])
    y = np.array([unit(r) for r in np.asarray(tgt_emb, dtype=np.float64)])
    xs = np.array([x[s] for s, _ in train_pairs])
    ys = np.array([y[t] for _, t in train_pairs])
    u, _, vt = np.linalg.svd(xs.T @ ys)
    w = u @ vt
    translations = {}
    for s, t in test_pairs:
        translations.setdefault(int(s), set()).add(int(t))
    right = 0
    for s, targets in translations.items():
        mapped = x[s] @ w
        best, best_score = None, -np.inf
        for j in range(len(y)):
            score = mapped @ y[j]
            if score > best_score:  # strictly greater: the first of equal scores stays
                best, best_score = j, score
        right += best in targets
    return right / len(translations)


def align_einsum(src_emb, tgt_emb, train_pairs, test_pairs):
    """einsum and the transposed SVD of Y^T X (W = (V' U'^T)^T... written as its own transpose)."""
    x = np.asarray(src_emb, dtype=np.float64)
    y = np.asarray(tgt_emb, dtype=np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-300)
    y = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-300)
    train = np.array(train_pairs).reshape(-1, 2)
    test = np.array(test_pairs).reshape(-1, 2)
    u, _, vt = np.linalg.svd(np.einsum("kd,ke->de", y[train[:, 1]], x[train[:, 0]]))  # svd(Y^T X) = V S U^T
    w = (u @ vt).T
    scores = np.einsum("sd,de,te->st", x, w, y)
    good = {(int(s), int(t)) for s, t in test}
    sources = sorted({s for s, _ in good})
    return float(np.mean([(s, int(np.argmax(scores[s]))) in good for s in sources]))


def align_torch(src_emb, tgt_emb, train_pairs, test_pairs):
    """In torch, through torch.linalg.svd."""
    x, y = torch.as_tensor(np.asarray(src_emb), dtype=torch.float64), torch.as_tensor(np.asarray(tgt_emb),
                                                                                      dtype=torch.float64)
    x = torch.nn.functional.normalize(x, dim=1)  # zero rows stay zero (eps)
    y = torch.nn.functional.normalize(y, dim=1)
    train, test = torch.as_tensor(np.asarray(train_pairs)), torch.as_tensor(np.asarray(test_pairs))
    u, _, vh = torch.linalg.svd(x[train[:, 0]].T @ y[train[:, 1]])
    nearest = ((x @ (u @ vh)) @ y.T).argmax(dim=1)
    sources = torch.unique(test[:, 0])
    right = [bool((test[(test[:, 0] == s), 1] == nearest[s]).any()) for s in sources]
    return sum(right) / len(right)


ALIGNMENT_CORRECT = [
    ("as in the notebook", align_notebook),
    ("plain loops", align_loops),
    ("einsum, svd of Y^T X transposed", align_einsum),
    ("torch", align_torch),
]


def _variant(**switches):
    from plmcourse.judging.transfer import _precision

    def answer(src_emb, tgt_emb, train_pairs, test_pairs):
        return _precision(src_emb, tgt_emb, np.asarray(train_pairs), np.asarray(test_pairs), **switches)
    return answer


def align_count(src_emb, tgt_emb, train_pairs, test_pairs):
    test = np.asarray(test_pairs)
    return align_notebook(src_emb, tgt_emb, train_pairs, test_pairs) * len(np.unique(test[:, 0]))


def align_per_source_list(src_emb, tgt_emb, train_pairs, test_pairs):
    test = np.asarray(test_pairs)
    value = align_notebook(src_emb, tgt_emb, train_pairs, test_pairs)
    return np.full(len(test), value)


def align_no_asarray(src_emb, tgt_emb, train_pairs, test_pairs):
    x, y = ref_transfer.unit_rows(src_emb), ref_transfer.unit_rows(tgt_emb)
    u, _, vt = np.linalg.svd(x[train_pairs[:, 0]].T @ y[train_pairs[:, 1]])
    nearest = np.argmax((x @ (u @ vt)) @ y.T, axis=1)
    sources = np.unique(test_pairs[:, 0])
    return float(np.mean([nearest[s] in test_pairs[test_pairs[:, 0] == s, 1] for s in sources]))


def align_course_ref(src_emb, tgt_emb, train_pairs, test_pairs):
    return ref.alignment_precision_at_1(src_emb, tgt_emb, train_pairs, test_pairs)


def align_course_nn(src_emb, tgt_emb, train_pairs, test_pairs):
    return nn_transfer.alignment_precision_at_1(torch.as_tensor(np.asarray(src_emb)),
                                                torch.as_tensor(np.asarray(tgt_emb)), np.asarray(train_pairs),
                                                np.asarray(test_pairs))


ALIGNMENT_MISTAKES = [
    ("one translation kept per source", _variant(last_only=True), "one translation kept per source"),
    ("train targets left out of the search", _variant(without_train=True), "the train pairs' targets left out"),
    ("a cosine threshold of 0.5", _variant(threshold=0.5), "a cosine threshold"),
    ("no unit rows", _variant(normalise=False), "rows never scaled to length 1"),
    ("the fit on raw rows", _variant(normalise_fit=False), "the map fitted on rows not scaled to length 1"),
    ("the search by dot product", _variant(normalise_search=False), "the nearest neighbour by dot product"),
    ("no map", _variant(no_map=True), "no map: the sources are searched as they are"),
    ("W transposed", _variant(transpose=True), "W transposed (V U^T)"),
    ("W = X^T Y", _variant(raw_product=True), "W = X^T Y itself"),
    ("least squares", _variant(lstsq=True), "an unconstrained least-squares map"),
    ("each pair counted", _variant(per_pair=True), "each test pair counted instead of each distinct source"),
    ("search among the test targets", _variant(restrict=True), "the search restricted to the test pairs' targets"),
    ("fitted on the test pairs", _variant(fit_on_test=True), "the map fitted on the test pairs"),
    ("rows centred", _variant(centre=True), "the rows centred"),
    ("farthest neighbour", _variant(farthest=True), "the farthest target instead of the nearest"),
    ("ties to the higher index", _variant(ties_last=True), "a tie broken towards the higher index"),
    ("NaN from a zero row", _variant(nan_rows=True), "a zero row divided by its length 0 gives NaN"),
    ("the count, not the fraction", align_count, "return the fraction right, not the count"),
    ("one score per pair", align_per_source_list, "expected one number"),
    ("pairs indexed as arrays", align_no_asarray, "np.asarray(pairs) makes the (k, 2) array"),
    ("calls the course's NumPy version", align_course_ref, "calls plmcourse.ref.alignment_precision_at_1"),
    ("calls the course's torch version", align_course_nn, "calls plmcourse.nn.transfer.alignment_precision_at_1"),
]


# ============================================================================
# whole_entity_mask(token_ids, entity_spans, budget, rng, mask_id, vocab_size)


def entity_notebook(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """As the notebook's solution."""
    inputs = token_ids.copy()
    labels = np.full(token_ids.shape, -100, dtype=np.int64)
    others = np.array([i for i in range(vocab_size) if i != mask_id])
    B, T = token_ids.shape
    for row in range(B):
        spans = [(int(s), int(e)) for s, e in entity_spans[row]]
        inside = np.zeros(T, dtype=bool)
        for s, e in spans:
            inside[s:e] = True
        units = spans + [(i, i + 1) for i in range(T) if not inside[i]]
        left = budget
        for u in rng.permutation(len(units)):
            s, e = units[u]
            if e - s > left:
                continue
            left -= e - s
            labels[row, s:e] = token_ids[row, s:e]
            action = rng.random()
            if action < 0.8:
                inputs[row, s:e] = mask_id
            elif action < 0.9:
                inputs[row, s:e] = others[rng.integers(0, len(others), e - s)]
    return inputs, labels


def entity_shuffle_list(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """rng.shuffle of a list of units, a replacement drawn as (mask_id + 1 + k) % vocab_size."""
    inputs, labels = np.array(token_ids), np.full(np.shape(token_ids), -100)
    for row, spans in enumerate(entity_spans):
        starts = {int(s): int(e) for s, e in spans}
        units, i = [], 0
        while i < inputs.shape[1]:
            end = starts.get(i, i + 1)
            units.append((i, end))
            i = end
        order = list(range(len(units)))
        rng.shuffle(order)
        left = budget
        for k in order:
            s, e = units[k]
            if e - s <= left:
                left -= e - s
                labels[row, s:e] = token_ids[row, s:e]
                u = rng.random()
                if u < 0.8:
                    inputs[row, s:e] = mask_id
                elif u < 0.9:
                    inputs[row, s:e] = (mask_id + 1 + rng.integers(0, vocab_size - 1, e - s)) % vocab_size
    return inputs, labels


def entity_choose_then_corrupt(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """All units chosen first (a permutation and a running sum), then one treatment draw per chosen unit."""
    token_ids = np.asarray(token_ids)
    inputs, labels = token_ids.copy(), np.full(token_ids.shape, -100, dtype=np.int64)
    for row in range(len(token_ids)):
        covered = np.zeros(token_ids.shape[1], dtype=bool)
        units = []
        for s, e in entity_spans[row]:
            covered[s:e] = True
            units.append((int(s), int(e)))
        units += [(int(i), int(i) + 1) for i in np.flatnonzero(~covered)]
        taken, left = [], budget
        for k in rng.permutation(len(units)):
            length = units[k][1] - units[k][0]
            if length <= left:
                taken.append(units[k])
                left -= length
        for s, e in taken:
            labels[row, s:e] = token_ids[row, s:e]
        for s, e in taken:
            u = rng.random()
            if u < 0.8:
                inputs[row, s:e] = mask_id
            elif u < 0.9:
                draw = rng.integers(0, vocab_size - 1, e - s)
                inputs[row, s:e] = draw + (draw >= mask_id)  # skip mask_id
    return inputs, labels


def entity_choice(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """rng.choice without replacement for the order, masks built as boolean arrays."""
    token_ids = np.asarray(token_ids)
    B, T = token_ids.shape
    chosen = np.zeros((B, T), dtype=bool)
    inputs = token_ids.copy()
    for row in range(B):
        spans = [tuple(map(int, sp)) for sp in entity_spans[row]]
        free = np.ones(T, dtype=bool)
        for s, e in spans:
            free[s:e] = False
        units = spans + [(int(i), int(i) + 1) for i in np.nonzero(free)[0]]
        left = budget
        for k in rng.choice(len(units), size=len(units), replace=False):
            s, e = units[k]
            if e - s <= left:
                left -= e - s
                chosen[row, s:e] = True
                u = rng.random()
                if u < 0.8:
                    inputs[row, s:e] = mask_id
                elif u < 0.9:
                    allowed = np.delete(np.arange(vocab_size), mask_id)
                    inputs[row, s:e] = rng.choice(allowed, size=e - s)
    return inputs, np.where(chosen, token_ids, -100)


ENTITY_CORRECT = [
    ("as in the notebook", entity_notebook),
    ("rng.shuffle, spans read as starts", entity_shuffle_list),
    ("choose, then corrupt", entity_choose_then_corrupt),
    ("rng.choice and boolean masks", entity_choice),
]


def _entity(budget_rule="skip", per_token=False, mask_in_pool=False, no_shuffle=False, length_weighted=False,
            entities_first=False, partial=False, labels_inputs=False, ignore_zero=False, own_rng=False,
            unchanged_labels_only=False, nested=False, pool_from_batch=False, pool_above_mask=False, one_id=False,
            shared_budget=False, singles_not_units=False, end_included=False):
    """The notebook's answer with switches that make each known mistake."""

    def answer(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
        r = np.random.default_rng(0) if own_rng else rng
        inputs = token_ids.copy()
        labels = np.full(token_ids.shape, 0 if ignore_zero else -100, dtype=np.int64)
        pool = np.arange(vocab_size) if mask_in_pool else np.array([i for i in range(vocab_size) if i != mask_id])
        if pool_from_batch:
            pool = np.unique(token_ids)
        if pool_above_mask:
            pool = np.arange(mask_id + 1, vocab_size) if mask_id + 1 < vocab_size else np.arange(mask_id)
        B, T = token_ids.shape
        shared = [budget]  # shared_budget: one budget for the whole batch
        for row in range(B):
            spans = [(int(s), min(int(e) + 1, T) if end_included else int(e)) for s, e in entity_spans[row]]
            inside = np.zeros(T, dtype=bool)
            for s, e in spans:
                inside[s:e] = True
            singles = [] if singles_not_units else [(i, i + 1) for i in range(T) if not inside[i]]
            units = spans + singles
            if no_shuffle:
                order = sorted(range(len(units)), key=lambda k: units[k][0])
            elif length_weighted:
                lengths = np.array([e - s for s, e in units], dtype=float)
                order = list(r.choice(len(units), len(units), replace=False, p=lengths / lengths.sum()))
            elif entities_first:
                order = list(r.permutation(len(spans))) + [len(spans) + k for k in r.permutation(len(singles))]
            else:
                order = r.permutation(len(units))
            left = shared[0] if shared_budget else budget
            for k in order:
                s, e = units[k]
                if partial and e - s > left and left > 0:
                    e = s + left  # a piece of the entity
                if e - s > left or (budget_rule == "strict" and e - s == left):
                    if budget_rule == "stop":
                        break
                    continue
                left -= e - s
                shared[0] = left
                labels[row, s:e] = token_ids[row, s:e]
                if per_token:
                    for i in range(s, e):
                        a = r.random()
                        if a < 0.8:
                            inputs[row, i] = mask_id
                        elif a < 0.9:
                            inputs[row, i] = pool[r.integers(0, len(pool))]
                    continue
                a = r.random()
                if a < 0.8:
                    inputs[row, s:e] = mask_id
                elif a < 0.9 or (nested and r.random() < 0.5):
                    inputs[row, s:e] = pool[r.integers(0, len(pool), 1 if one_id else e - s)]
                if unchanged_labels_only and a >= 0.9:
                    labels[row, s:e] = -100
        if labels_inputs:
            labels = np.where(labels != -100, inputs, labels)
        return inputs, labels
    return answer


def entity_over_budget(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """Takes units until the budget is reached or passed (the last one may overshoot)."""
    inputs, labels = token_ids.copy(), np.full(token_ids.shape, -100, dtype=np.int64)
    for row in range(len(token_ids)):
        covered = np.zeros(token_ids.shape[1], dtype=bool)
        units = [(int(s), int(e)) for s, e in entity_spans[row]]
        for s, e in units:
            covered[s:e] = True
        units += [(i, i + 1) for i in np.flatnonzero(~covered)]
        used = 0
        for k in rng.permutation(len(units)):
            if used >= budget:
                break
            s, e = units[k]
            used += e - s
            labels[row, s:e] = token_ids[row, s:e]
            if rng.random() < 0.8:
                inputs[row, s:e] = mask_id
    return inputs, labels


def entity_token_level(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    """Ignores the entities: budget single tokens, as token-level masking."""
    return _entity()(token_ids, [[] for _ in range(len(token_ids))], budget, rng, mask_id, vocab_size)


def entity_float_labels(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    inputs, labels = entity_notebook(token_ids, entity_spans, budget, rng, mask_id, vocab_size)
    return inputs, labels.astype(np.float64)


def entity_in_place(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    inputs, labels = entity_notebook(token_ids, entity_spans, budget, rng, mask_id, vocab_size)
    token_ids[...] = inputs
    return inputs, labels


def entity_course_ref(token_ids, entity_spans, budget, rng, mask_id, vocab_size):
    return ref.whole_entity_mask(token_ids, entity_spans, budget, rng, mask_id, vocab_size)


ENTITY_MISTAKES = [
    ("one budget for the whole batch", _entity(shared_budget=True), "the budget is per row"),
    ("single positions not units", _entity(singles_not_units=True), "single positions not treated as units"),
    ("a span's end included", _entity(end_included=True), "as if the span's end were included"),
    ("a unit that fits exactly left out (< instead of <=)", _entity(budget_rule="strict"), "(<=, not <)"),
    ("random pool from the batch", _entity(pool_from_batch=True), "not the ids seen in the tokens"),
    ("random pool above mask_id", _entity(pool_above_mask=True), "mask_id need not be the lowest id"),
    ("one random id for a whole unit", _entity(one_id=True), "each token of a unit draws its own random id"),
    ("80/10/10 per token", _entity(per_token=True), "drawn for each token instead of once per unit"),
    ("mask_id among the random ids", _entity(mask_in_pool=True), "a random replacement drew mask_id"),
    ("stops at the first unit that does not fit", _entity(budget_rule="stop"),
     "skip it and go on through the others"),
    ("units by length", _entity(length_weighted=True), "units drawn in proportion to their length"),
    ("entities before single tokens", _entity(entities_first=True), "the entities taken before the single tokens"),
    ("units left to right", _entity(no_shuffle=True), "go through the units in the order of rng.permutation"),
    ("a piece of an entity to fill the budget", _entity(partial=True), "was chosen in part"),
    ("entities ignored", entity_token_level, "was chosen in part"),
    ("labels are the corrupted inputs", _entity(labels_inputs=True), "labels hold the corrupted inputs"),
    ("0 instead of -100", _entity(ignore_zero=True), "use -100 there"),
    ("a generator of its own", _entity(own_rng=True), "another seed gave exactly the same result"),
    ("unchanged units not labelled", _entity(unchanged_labels_only=True),
     "the units left as they are (10%) were not labelled"),
    ("a second draw for random or unchanged", _entity(nested=True), "expected about half"),
    ("over the budget", entity_over_budget, "more than the budget"),
    ("float labels", entity_float_labels, "labels (the second item) has dtype float64, expected integer token ids"),
    ("changes token_ids in place", entity_in_place, "changed its input token_ids in place"),
    ("calls the course's version", entity_course_ref, "calls plmcourse.ref.whole_entity_mask"),
]


# ============================================================================
# unfreezing_groups(n_layers, step, unfreeze_every, base_lr, decay)


def unfreeze_notebook(n_layers, step, unfreeze_every, base_lr, decay):
    """As the notebook's solution."""
    names = ["head"] + [f"layer.{i}" for i in reversed(range(n_layers))] + ["embeddings"]
    rates = {}
    for k, name in enumerate(names):
        trains = step >= k * unfreeze_every
        rates[name] = base_lr * decay ** k if trains else 0.0
    return rates


def unfreeze_counting(n_layers, step, unfreeze_every, base_lr, decay):
    """How many groups are unfrozen, counted first."""
    groups = n_layers + 2
    unfrozen = groups if unfreeze_every == 0 else min(groups, step // unfreeze_every + 1)
    out = {"embeddings": 0.0}
    out.update({f"layer.{i}": 0.0 for i in range(n_layers)})
    out["head"] = 0.0
    order = ["head"] + [f"layer.{i}" for i in range(n_layers - 1, -1, -1)] + ["embeddings"]
    for k in range(unfrozen):
        out[order[k]] = base_lr * decay ** k
    return out


def unfreeze_numpy(n_layers, step, unfreeze_every, base_lr, decay):
    """NumPy arrays of distances, then a dict of NumPy floats."""
    names = ["embeddings"] + [f"layer.{i}" for i in range(n_layers)] + ["head"]
    k = np.arange(len(names))[::-1]  # embeddings: n_layers + 1, head: 0
    rates = np.where(step >= k * unfreeze_every, base_lr * np.power(float(decay), k), 0.0)
    return dict(zip(names, rates))


def unfreeze_recursive(n_layers, step, unfreeze_every, base_lr, decay):
    """Each group's rate from the one above it."""
    out, rate, k = {}, base_lr, 0
    for name in ["head", *[f"layer.{i}" for i in range(n_layers)][::-1], "embeddings"]:
        out[name] = rate if k * unfreeze_every <= step else 0.0
        rate, k = rate * decay, k + 1
    return out


UNFREEZING_CORRECT = [
    ("as in the notebook", unfreeze_notebook),
    ("counting the unfrozen groups", unfreeze_counting),
    ("NumPy", unfreeze_numpy),
    ("rate from the group above", unfreeze_recursive),
]


def _unfreeze(**switches):
    from plmcourse.judging.transfer import _schedule

    def answer(n_layers, step, unfreeze_every, base_lr, decay):
        return _schedule(n_layers, step, unfreeze_every, base_lr, decay, **switches)
    return answer


def unfreeze_divide(n_layers, step, unfreeze_every, base_lr, decay):
    unfrozen = step // unfreeze_every + 1
    return {name: (base_lr * decay ** k if k < unfrozen else 0.0)
            for k, name in enumerate(["head", *[f"layer.{i}" for i in reversed(range(n_layers))], "embeddings"])}


def unfreeze_frozen_missing(n_layers, step, unfreeze_every, base_lr, decay):
    return {k: v for k, v in unfreeze_notebook(n_layers, step, unfreeze_every, base_lr, decay).items() if v > 0}


def unfreeze_none(n_layers, step, unfreeze_every, base_lr, decay):
    return {k: (v if v > 0 else None) for k, v in unfreeze_notebook(n_layers, step, unfreeze_every, base_lr,
                                                                    decay).items()}


def unfreeze_other_names(n_layers, step, unfreeze_every, base_lr, decay):
    return {k.replace("layer.", "layers."): v for k, v in unfreeze_notebook(n_layers, step, unfreeze_every, base_lr,
                                                                           decay).items()}


def unfreeze_list(n_layers, step, unfreeze_every, base_lr, decay):
    return list(unfreeze_notebook(n_layers, step, unfreeze_every, base_lr, decay).items())


def unfreeze_course(n_layers, step, unfreeze_every, base_lr, decay):
    return ref.unfreezing_groups(n_layers, step, unfreeze_every, base_lr, decay)


def unfreeze_names_bottom_up(n_layers, step, unfreeze_every, base_lr, decay):
    """The rates computed top-down (head first) but zipped with the group names listed bottom-up."""
    names = ["embeddings", *(f"layer.{i}" for i in range(n_layers)), "head"]
    rates = [base_lr * decay ** k if step >= k * unfreeze_every else 0.0 for k in range(n_layers + 2)]
    return dict(zip(names, rates))


UNFREEZING_MISTAKES = [
    ("decay counted from the bottom", _unfreeze(reversed_decay=True), "the decay counted from the bottom"),
    ("every group one step of the schedule early", _unfreeze(early=True), "every group one unfreeze_every early"),
    ("names listed bottom-up", unfreeze_names_bottom_up, "the right rates on the wrong groups"),
    ("from the bottom", _unfreeze(bottom_first=True), "unfrozen from the bottom"),
    ("one step late", _unfreeze(strict=True), "one step late"),
    ("the top layer with the head", _unfreeze(top_with_head=True), "the top layer unfrozen with the head"),
    ("decay counted from the top layer", _unfreeze(exponent_shift=-1), "the decay counted from the top layer"),
    ("rates divided by the decay", _unfreeze(inverted=True), "divided by decay ** k instead of multiplied"),
    ("layers numbered from the top", _unfreeze(reversed_layers=True), "layer.0 is the BOTTOM block"),
    ("embeddings with layer.0", _unfreeze(embeddings_with_layer0=True), "the embeddings grouped with layer.0"),
    ("frozen groups keep their rate", _unfreeze(frozen_rate=True), "a group that does not train yet has rate 0.0"),
    ("the head decayed", _unfreeze(head_decayed=True), "the head's rate decayed too"),
    ("division by unfreeze_every", unfreeze_divide, "unfreeze_every=0 means every group trains from step 0"),
    ("frozen groups left out", unfreeze_frozen_missing, "every group, frozen ones too with rate 0.0"),
    ("None for a frozen group", unfreeze_none, "expected a number (0.0 for a frozen group)"),
    ("other group names", unfreeze_other_names, "not a group"),
    ("a list of pairs", unfreeze_list, "expected a dict {group name: learning rate}"),
    ("calls the course's version", unfreeze_course, "calls plmcourse.ref.unfreezing_groups"),
]


CATALOGUE = {
    "check_alignment_precision_at_1": (ALIGNMENT_CORRECT, ALIGNMENT_MISTAKES),
    "check_whole_entity_mask": (ENTITY_CORRECT, ENTITY_MISTAKES),
    "check_unfreezing_groups": (UNFREEZING_CORRECT, UNFREEZING_MISTAKES),
}
