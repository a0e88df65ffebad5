"""Right and wrong answers to the three exercises of notebook 10 (verbalizer_log_probs, pet_soft_labels,
select_pseudo_labels, all PyTorch), as data for tests/test_grading_prompting.py.

CORRECT: (name, function) pairs that must pass, written in different styles; MISTAKES:
(name, function, fragment): the check must fail with a message containing `fragment`, the
fragment naming the mistake. Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse import ref
from mistake_catalogue.fresh_round3 import pseudo_positions_in_subset


# ============================================================================
# verbalizer_log_probs(logits, mask_positions, label_word_ids) -> (B, C)


def verb_notebook(logits, mask_positions, label_word_ids):
    """The row at each mask by advanced indexing, a loop over the classes, log_softmax."""
    at_mask = logits[torch.arange(logits.shape[0], device=logits.device), mask_positions]  # (B, V)
    scores = torch.stack([at_mask[:, ids].mean(dim=-1) for ids in label_word_ids], dim=-1)
    return torch.log_softmax(scores, dim=-1)


def verb_gather(logits, mask_positions, label_word_ids):
    """torch.gather along T at the mask, then along V at each class's words."""
    B, T, V = logits.shape
    at_mask = logits.gather(1, mask_positions.view(B, 1, 1).expand(B, 1, V)).squeeze(1)
    columns = []
    for ids in label_word_ids:
        index = torch.tensor(ids, device=logits.device).expand(B, len(ids))
        columns.append(at_mask.gather(1, index).mean(dim=1))
    return F.log_softmax(torch.stack(columns, dim=1), dim=1)


def verb_loops(logits, mask_positions, label_word_ids):
    """One row and one class at a time, the log-softmax written with logsumexp."""
    rows = []
    for b in range(logits.shape[0]):
        position = int(mask_positions[b])
        scores = torch.stack([sum(logits[b, position, w] for w in ids) / len(ids) for ids in label_word_ids])
        rows.append(scores - torch.logsumexp(scores, dim=0))
    return torch.stack(rows)


def verb_numpy(logits, mask_positions, label_word_ids):
    """In NumPy, converted back to a tensor of the logits' dtype and device."""
    x = logits.detach().cpu().numpy()
    at_mask = x[np.arange(len(x)), mask_positions.cpu().numpy()]
    scores = np.stack([at_mask[:, ids].mean(axis=-1) for ids in label_word_ids], axis=-1)
    scores = scores - scores.max(axis=-1, keepdims=True)
    result = scores - np.log(np.exp(scores).sum(axis=-1, keepdims=True))
    return torch.from_numpy(result).to(device=logits.device, dtype=logits.dtype)


def verb_einsum(logits, mask_positions, label_word_ids):
    """A one-hot of the mask positions and a (C, V) averaging matrix, two einsums."""
    B, T, V = logits.shape
    at = F.one_hot(mask_positions, T).to(logits.dtype)
    average = torch.zeros(len(label_word_ids), V, dtype=logits.dtype, device=logits.device)
    for c, ids in enumerate(label_word_ids):
        average[c, ids] = 1.0 / len(ids)
    at_mask = torch.einsum("bt,btv->bv", at, logits)
    return torch.log_softmax(torch.einsum("bv,cv->bc", at_mask, average), dim=-1)


def verb_index_select(logits, mask_positions, label_word_ids):
    """index_select per class on the (B, V) rows, keepdim means concatenated."""
    at_mask = torch.stack([logits[b, p] for b, p in enumerate(mask_positions.tolist())])
    scores = torch.cat([at_mask.index_select(1, torch.tensor(ids, device=logits.device)).mean(1, keepdim=True)
                        for ids in label_word_ids], dim=1)
    return scores - scores.logsumexp(dim=1, keepdim=True)


VERBALIZER_CORRECT = [
    ("advanced indexing, a loop over the classes", verb_notebook),
    ("torch.gather", verb_gather),
    ("loops over rows and classes, logsumexp", verb_loops),
    ("NumPy inside, converted back", verb_numpy),
    ("one-hot positions and an averaging matrix, einsum", verb_einsum),
    ("index_select and keepdim", verb_index_select),
]


def _scores(at_mask, label_word_ids, reduce=lambda x: x.mean(dim=-1)):
    return torch.stack([reduce(at_mask[:, ids]) for ids in label_word_ids], dim=-1)


def _rows(logits, mask_positions):
    return logits[torch.arange(logits.shape[0]), mask_positions]


def verb_position_0(logits, mask_positions, label_word_ids):
    return torch.log_softmax(_scores(logits[:, 0], label_word_ids), dim=-1)


def verb_last_position(logits, mask_positions, label_word_ids):
    return torch.log_softmax(_scores(logits[:, -1], label_word_ids), dim=-1)


def verb_first_row_position(logits, mask_positions, label_word_ids):
    return torch.log_softmax(_scores(logits[:, mask_positions[0]], label_word_ids), dim=-1)


def verb_vocab_log_softmax(logits, mask_positions, label_word_ids):
    log_probs = torch.log_softmax(_rows(logits, mask_positions), dim=-1)  # over the vocabulary
    return _scores(log_probs, label_word_ids)


def verb_vocab_softmax_then_log(logits, mask_positions, label_word_ids):
    probs = torch.softmax(_rows(logits, mask_positions), dim=-1)
    return torch.log(_scores(probs, label_word_ids))


def verb_mean_of_probabilities(logits, mask_positions, label_word_ids):
    probs = torch.softmax(_rows(logits, mask_positions), dim=-1)
    class_probs = _scores(probs, label_word_ids)
    return torch.log(class_probs / class_probs.sum(dim=-1, keepdim=True))


def verb_probabilities(logits, mask_positions, label_word_ids):
    return torch.softmax(_scores(_rows(logits, mask_positions), label_word_ids), dim=-1)


def verb_no_log_softmax(logits, mask_positions, label_word_ids):
    return _scores(_rows(logits, mask_positions), label_word_ids)


def verb_max(logits, mask_positions, label_word_ids):
    return torch.log_softmax(_scores(_rows(logits, mask_positions), label_word_ids, lambda x: x.max(dim=-1).values),
                             dim=-1)


def verb_sum(logits, mask_positions, label_word_ids):
    return torch.log_softmax(_scores(_rows(logits, mask_positions), label_word_ids, lambda x: x.sum(dim=-1)), dim=-1)


def verb_first_word(logits, mask_positions, label_word_ids):
    at_mask = _rows(logits, mask_positions)
    return torch.log_softmax(torch.stack([at_mask[:, ids[0]] for ids in label_word_ids], dim=-1), dim=-1)


def verb_batch_axis(logits, mask_positions, label_word_ids):
    return torch.log_softmax(_scores(_rows(logits, mask_positions), label_word_ids), dim=0)


def verb_bb_mix(logits, mask_positions, label_word_ids):
    at_mask = logits[:, mask_positions]  # (B, B, V)
    scores = torch.stack([at_mask[..., ids].mean(dim=-1) for ids in label_word_ids], dim=-1)
    return torch.log_softmax(scores, dim=-1)


def verb_gather_along_v(logits, mask_positions, label_word_ids):
    B, T, V = logits.shape
    at_mask = logits.gather(2, mask_positions.view(B, 1, 1).expand(B, 1, V)).squeeze(1)  # the axis of gather wrong
    return torch.log_softmax(_scores(at_mask, label_word_ids), dim=-1)


def verb_axes_swapped(logits, mask_positions, label_word_ids):
    at = logits[torch.arange(logits.shape[0]), :, mask_positions]  # (B, T): position and token axes swapped
    return torch.log_softmax(_scores(at, label_word_ids), dim=-1)


def verb_one_tensor_of_words(logits, mask_positions, label_word_ids):
    words = torch.tensor(label_word_ids)  # (C, k): fails on lists of different lengths
    return torch.log_softmax(_rows(logits, mask_positions)[:, words].mean(dim=-1), dim=-1)


def verb_log_of_softmax(logits, mask_positions, label_word_ids):
    return torch.log(torch.softmax(_scores(_rows(logits, mask_positions), label_word_ids), dim=-1))


def verb_float64(logits, mask_positions, label_word_ids):
    x = logits.numpy().astype(np.float64)
    at_mask = x[np.arange(len(x)), mask_positions.numpy()]
    scores = np.stack([at_mask[:, ids].mean(axis=-1) for ids in label_word_ids], axis=-1)
    return torch.log_softmax(torch.from_numpy(scores), dim=-1)


def verb_returns_numpy(logits, mask_positions, label_word_ids):
    return verb_notebook(logits, mask_positions, label_word_ids).numpy()


def verb_list_of_classes(logits, mask_positions, label_word_ids):
    return list(verb_notebook(logits, mask_positions, label_word_ids).unbind(dim=-1))


def verb_classes_first(logits, mask_positions, label_word_ids):
    scores = torch.stack([_rows(logits, mask_positions)[:, ids].mean(dim=-1) for ids in label_word_ids])  # (C, B)
    return torch.log_softmax(scores, dim=0)


def verb_in_place(logits, mask_positions, label_word_ids):
    logits -= logits.max(dim=-1, keepdim=True).values  # "for stability", in place
    return verb_notebook(logits, mask_positions, label_word_ids)


def verb_course_nn(logits, mask_positions, label_word_ids):
    return pnn.verbalizer_log_probs(logits, mask_positions, label_word_ids)


def verb_course_ref(logits, mask_positions, label_word_ids):
    result = ref.verbalizer_log_probs(logits.numpy(), mask_positions.numpy(), label_word_ids)
    return torch.from_numpy(result).to(logits.dtype)


VERBALIZER_MISTAKES = [
    ("position 0 instead of the mask", verb_position_0, "the logits at position 0 instead of at the mask"),
    ("the last position instead of the mask", verb_last_position, "the logits at the last position instead of at"),
    ("row 0's mask position for every row", verb_first_row_position,
     "row 0's mask position (mask_positions[0]) used for every row"),
    ("log-softmax over the vocabulary", verb_vocab_log_softmax, "a softmax over the whole vocabulary"),
    ("softmax over the vocabulary, then log", verb_vocab_softmax_then_log, "a softmax over the whole vocabulary"),
    ("mean of the words' probabilities", verb_mean_of_probabilities,
     "the mean of the label words' probabilities (a softmax over the vocabulary) instead of"),
    ("probabilities instead of log-probabilities", verb_probabilities, "probabilities instead of log-probabilities"),
    ("no log-softmax", verb_no_log_softmax, "the class scores without the log-softmax"),
    ("max over the label words", verb_max, "the max over a class's label words instead of their mean"),
    ("sum over the label words", verb_sum, "the sum over a class's label words instead of their mean"),
    ("only the first label word", verb_first_word, "only the first label word of each class"),
    ("log-softmax over the batch", verb_batch_axis, "the log-softmax over the batch (dim 0)"),
    ("logits[:, mask_positions]: a (B, B, V) mix", verb_bb_mix,
     "logits[:, mask_positions] takes every row's mask position in every row"),
    ("gather along the vocabulary axis", verb_gather_along_v, "the same score for every class"),
    ("T and V axes swapped", verb_axes_swapped, "the label word ids index the vocabulary"),
    ("label words as one tensor (ragged lists)", verb_one_tensor_of_words,
     "classes may have different numbers of label words"),
    ("log of a softmax (underflow)", verb_log_of_softmax, "torch.log_softmax(scores, dim=-1) subtracts the max"),
    ("float64 result for float32 logits", verb_float64, "dtype torch.float64, expected torch.float32 like logits"),
    ("a NumPy array returned", verb_returns_numpy, "the result is a NumPy array, expected a torch.Tensor"),
    ("a list of class columns returned", verb_list_of_classes, "torch.stack(..., dim=-1) makes one tensor"),
    ("classes on the first axis", verb_classes_first, "the classes are on the first axis"),
    ("logits changed in place", verb_in_place, "changed its input logits in place"),
    ("calls the course's torch version", verb_course_nn, "calls plmcourse.nn.verbalizer_log_probs; write it"),
    ("calls the course's NumPy version", verb_course_ref, "calls plmcourse.ref.verbalizer_log_probs; write it"),
]


# ============================================================================
# pet_soft_labels(pattern_log_probs, weights=None, temperature=2.0) -> (N, C)


def _checked(pattern_log_probs, weights):
    """The weights as a tensor like the scores (a list or a tuple allowed); ValueError for a negative one
    or a zero sum. None stays None."""
    if weights is None:
        return None
    w = torch.as_tensor(weights, dtype=pattern_log_probs.dtype, device=pattern_log_probs.device)
    if bool((w < 0).any()) or float(w.sum()) == 0:
        raise ValueError("weights must be non-negative with a positive sum")
    return w


def pet_notebook(pattern_log_probs, weights=None, temperature=2.0):
    """Weights normalised (uniform for None), tensordot over the patterns, softmax."""
    P = pattern_log_probs.shape[0]
    if weights is None:
        weights = torch.ones(P, dtype=pattern_log_probs.dtype, device=pattern_log_probs.device)
    else:
        weights = torch.as_tensor(weights, dtype=pattern_log_probs.dtype, device=pattern_log_probs.device)
        if (weights < 0).any() or weights.sum() == 0:
            raise ValueError("weights must be non-negative and not all zero")
    weights = weights / weights.sum()
    mean = torch.tensordot(weights, pattern_log_probs, dims=1)  # (N, C)
    return torch.softmax(mean / temperature, dim=-1)


def pet_einsum(pattern_log_probs, weights=None, temperature=2.0):
    weights = _checked(pattern_log_probs, weights)
    P = pattern_log_probs.shape[0]
    w = torch.full((P,), 1.0 / P, dtype=pattern_log_probs.dtype) if weights is None else weights / weights.sum()
    return F.softmax(torch.einsum("p,pnc->nc", w.to(pattern_log_probs.device), pattern_log_probs) / temperature,
                     dim=1)


def pet_loop(pattern_log_probs, weights=None, temperature=2.0):
    """A weighted sum pattern by pattern, divided by the weights' total."""
    P = len(pattern_log_probs)
    w = [1.0] * P if weights is None else [float(x) for x in weights]
    if min(w) < 0 or sum(w) == 0:
        raise ValueError(f"weights {w}: none may be negative, and they may not all be 0")
    total = sum(w[p] * pattern_log_probs[p] for p in range(P)) / sum(w)
    return torch.exp(torch.log_softmax(total / temperature, dim=-1))


def pet_numpy(pattern_log_probs, weights=None, temperature=2.0):
    """In NumPy, converted back."""
    s = pattern_log_probs.cpu().numpy()
    w = np.ones(len(s)) if weights is None else np.asarray(_checked(pattern_log_probs, weights).cpu())
    mean = np.tensordot(w / w.sum(), s, axes=1) / temperature
    e = np.exp(mean - mean.max(axis=-1, keepdims=True))
    return torch.as_tensor(e / e.sum(axis=-1, keepdims=True), dtype=pattern_log_probs.dtype,
                           device=pattern_log_probs.device)


def pet_broadcast(pattern_log_probs, weights=None, temperature=2.0):
    """The weights shaped (P, 1, 1) and broadcast; the softmax by hand."""
    weights = _checked(pattern_log_probs, weights)
    if weights is None:
        mean = pattern_log_probs.mean(dim=0)
    else:
        w = weights[:, None, None]
        mean = (w * pattern_log_probs).sum(dim=0) / w.sum()
    z = mean / temperature
    e = torch.exp(z - z.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


def pet_as_tensor(pattern_log_probs, weights=None, temperature=2.0):
    """torch.as_tensor for the weights, normalised with torch.nn.functional.normalize(p=1)."""
    P = pattern_log_probs.shape[0]
    w = torch.ones(P) if weights is None else torch.as_tensor(weights)
    if not (w >= 0).all() or not w.sum() > 0:
        raise ValueError("negative weights, or all zero")
    w = F.normalize(w.to(pattern_log_probs), p=1, dim=0)
    return (w.view(-1, 1, 1) * pattern_log_probs).sum(0).div(temperature).softmax(-1)


PET_CORRECT = [
    ("tensordot, as the notebook", pet_notebook),
    ("einsum", pet_einsum),
    ("a loop over the patterns", pet_loop),
    ("NumPy inside, converted back", pet_numpy),
    ("broadcast weights, softmax by hand", pet_broadcast),
    ("F.normalize(p=1) and a view", pet_as_tensor),
]


def _weights(pattern_log_probs, weights):
    P = pattern_log_probs.shape[0]
    if weights is None:
        return torch.full((P,), 1.0 / P, dtype=pattern_log_probs.dtype)
    return weights / weights.sum()


def pet_probabilities_averaged(pattern_log_probs, weights=None, temperature=2.0):
    probs = torch.tensordot(_weights(pattern_log_probs, weights), pattern_log_probs.exp(), dims=1)
    return torch.softmax(torch.log(probs) / temperature, dim=-1)


def pet_softened_probabilities_averaged(pattern_log_probs, weights=None, temperature=2.0):
    return torch.tensordot(_weights(pattern_log_probs, weights), torch.softmax(pattern_log_probs / temperature, -1),
                           dims=1)


def pet_temperature_ignored(pattern_log_probs, weights=None, temperature=2.0):
    return torch.softmax(torch.tensordot(_weights(pattern_log_probs, weights), pattern_log_probs, dims=1), dim=-1)


def pet_temperature_multiplied(pattern_log_probs, weights=None, temperature=2.0):
    mean = torch.tensordot(_weights(pattern_log_probs, weights), pattern_log_probs, dims=1)
    return torch.softmax(mean * temperature, dim=-1)


def pet_temperature_hardcoded(pattern_log_probs, weights=None, temperature=2.0):
    return pet_notebook(pattern_log_probs, weights, 2.0)


def pet_default_temperature_1(pattern_log_probs, weights=None, temperature=1.0):
    return pet_notebook(pattern_log_probs, weights, temperature)


def pet_not_normalised(pattern_log_probs, weights=None, temperature=2.0):
    if weights is None:
        return pet_notebook(pattern_log_probs, None, temperature)
    return torch.softmax(torch.tensordot(weights, pattern_log_probs, dims=1) / temperature, dim=-1)


def pet_weights_ignored(pattern_log_probs, weights=None, temperature=2.0):
    return torch.softmax(pattern_log_probs.mean(dim=0) / temperature, dim=-1)


def pet_weighted_mean_over_p(pattern_log_probs, weights=None, temperature=2.0):
    w = torch.ones(pattern_log_probs.shape[0], dtype=pattern_log_probs.dtype) if weights is None else weights
    return torch.softmax((w[:, None, None] * pattern_log_probs).mean(dim=0) / temperature, dim=-1)


def pet_weights_on_classes(pattern_log_probs, weights=None, temperature=2.0):
    if weights is None:
        return pet_notebook(pattern_log_probs, None, temperature)
    return torch.softmax((weights * pattern_log_probs).sum(dim=0) / weights.sum() / temperature, dim=-1)


def pet_softmax_over_examples(pattern_log_probs, weights=None, temperature=2.0):
    mean = torch.tensordot(_weights(pattern_log_probs, weights), pattern_log_probs, dims=1)
    return torch.softmax(mean / temperature, dim=0)


def pet_log_probabilities(pattern_log_probs, weights=None, temperature=2.0):
    mean = torch.tensordot(_weights(pattern_log_probs, weights), pattern_log_probs, dims=1)
    return torch.log_softmax(mean / temperature, dim=-1)


def pet_no_softmax(pattern_log_probs, weights=None, temperature=2.0):
    return torch.tensordot(_weights(pattern_log_probs, weights), pattern_log_probs, dims=1) / temperature


def pet_none_not_handled(pattern_log_probs, weights=None, temperature=2.0):
    weights = weights / weights.sum()
    return torch.softmax(torch.tensordot(weights, pattern_log_probs, dims=1) / temperature, dim=-1)


def pet_normalised_in_place(pattern_log_probs, weights=None, temperature=2.0):
    if weights is not None:
        weights /= weights.sum()
    return pet_notebook(pattern_log_probs, weights, temperature)


def pet_float64(pattern_log_probs, weights=None, temperature=2.0):
    return pet_notebook(pattern_log_probs.double(), None if weights is None else weights.double(), temperature)


def pet_one_per_pattern(pattern_log_probs, weights=None, temperature=2.0):
    return torch.softmax(pattern_log_probs / temperature, dim=-1)


def pet_mean_over_examples(pattern_log_probs, weights=None, temperature=2.0):
    return torch.softmax(pattern_log_probs.mean(dim=1) / temperature, dim=-1)


def pet_no_weight_check(pattern_log_probs, weights=None, temperature=2.0):
    """Accepts a list, but a negative weight or a zero sum goes through (a zero sum gives NaN)."""
    P = pattern_log_probs.shape[0]
    w = torch.ones(P) if weights is None else torch.as_tensor(weights)
    w = (w / w.sum()).to(pattern_log_probs)
    return torch.softmax(torch.tensordot(w, pattern_log_probs, dims=1) / temperature, dim=-1)


def pet_tensor_weights_only(pattern_log_probs, weights=None, temperature=2.0):
    """weights.sum() on a list fails."""
    if weights is not None and not isinstance(weights, torch.Tensor) and len(weights) and sum(weights) > 0 \
            and min(weights) >= 0:
        weights.sum()  # AttributeError: 'list' object has no attribute 'sum'
    return pet_notebook(pattern_log_probs, weights, temperature)


def pet_zero_sum_only(pattern_log_probs, weights=None, temperature=2.0):
    """Refuses a zero sum but lets a negative weight through."""
    if weights is not None and float(sum(float(x) for x in weights)) == 0:
        raise ValueError("the weights sum to zero")
    if weights is not None:
        weights = torch.as_tensor(weights, dtype=pattern_log_probs.dtype).abs()  # passes the notebook's test
    return pet_notebook(pattern_log_probs, weights, temperature)


def pet_assert_instead(pattern_log_probs, weights=None, temperature=2.0):
    """An assert where the spec asks for ValueError."""
    if weights is not None:
        w = torch.as_tensor(weights, dtype=pattern_log_probs.dtype)
        assert (w >= 0).all() and w.sum() > 0, "bad weights"
    return pet_notebook(pattern_log_probs, weights, temperature)


def pet_course_nn(pattern_log_probs, weights=None, temperature=2.0):
    return pnn.pet_soft_labels(pattern_log_probs, weights, temperature)


def pet_course_ref(pattern_log_probs, weights=None, temperature=2.0):
    w = None if weights is None else np.asarray(weights)
    return torch.from_numpy(ref.pet_soft_labels(pattern_log_probs.numpy(), w, temperature)).to(pattern_log_probs)


PET_MISTAKES = [
    ("probabilities averaged instead of logits", pet_probabilities_averaged,
     "the patterns' probabilities averaged instead of their logits"),
    ("softened probabilities averaged", pet_softened_probabilities_averaged,
     "the patterns' probabilities averaged instead of their logits"),
    ("temperature ignored", pet_temperature_ignored, "the temperature ignored"),
    ("temperature multiplied", pet_temperature_multiplied, "multiplied by the temperature instead of divided"),
    ("temperature 2 hard-coded", pet_temperature_hardcoded, "a temperature of 2 whatever the argument says"),
    ("default temperature 1", pet_default_temperature_1, "a temperature of 1 where none was passed"),
    ("weights not normalised", pet_not_normalised, "the weights not normalised"),
    ("weights ignored", pet_weights_ignored, "the weights ignored"),
    ("weighted scores averaged over P", pet_weighted_mean_over_p, "the weighted scores divided by P"),
    ("weights broadcast against the classes", pet_weights_on_classes, "the weights broadcast against the classes"),
    ("softmax over the examples", pet_softmax_over_examples, "the softmax over the examples (dim 0)"),
    ("log-probabilities returned", pet_log_probabilities, "log-probabilities returned"),
    ("no softmax", pet_no_softmax, "the tempered scores without the softmax"),
    ("weights=None not handled", pet_none_not_handled, "weights may be None (the default)"),
    ("weights normalised in place", pet_normalised_in_place, "changed its input weights in place"),
    ("float64 result for float32 input", pet_float64,
     "dtype torch.float64, expected torch.float32 like pattern_log_probs"),
    ("one distribution per pattern", pet_one_per_pattern, "one per pattern; combine the patterns"),
    ("mean over the examples", pet_mean_over_examples, "averaged over the examples (axis 1) instead of the patterns"),
    ("negative weights and a zero sum let through", pet_no_weight_check,
     "hold a negative weight, so your function must raise ValueError, but it returned"),
    ("weights.sum() on a list", pet_tensor_weights_only, "weights may be a list or a tuple of numbers"),
    ("a negative weight let through", pet_zero_sum_only,
     "hold a negative weight, so your function must raise ValueError, but it returned"),
    ("AssertionError instead of ValueError", pet_assert_instead, "must raise ValueError, but it raised AssertionError"),
    ("calls the course's torch version", pet_course_nn, "calls plmcourse.nn.pet_soft_labels; write it yourself"),
    ("calls the course's NumPy version", pet_course_ref, "calls plmcourse.ref.pet_soft_labels; write it yourself"),
]


# ============================================================================
# select_pseudo_labels(probs, per_class) -> indices


def sel_notebook(probs, per_class):
    """Per class: its members, sorted by confidence (stable), the first per_class."""
    confidence, predicted = probs.max(dim=-1)
    chosen = []
    for c in range(probs.shape[1]):
        members = torch.nonzero(predicted == c).flatten()
        order = torch.sort(confidence[members], descending=True, stable=True).indices
        chosen.append(members[order[:per_class]])
    return torch.cat(chosen)


def sel_topk(probs, per_class):
    """torch.topk with k = min(per_class, count), an int32 result."""
    predicted = probs.argmax(dim=1)
    confidence = probs.gather(1, predicted[:, None]).squeeze(1)
    picks = []
    for c in range(probs.shape[1]):
        members = (predicted == c).nonzero().squeeze(1)
        k = min(per_class, len(members))
        picks.append(members[confidence[members].topk(k).indices])
    return torch.cat(picks).to(torch.int32)


def sel_numpy(probs, per_class):
    """In NumPy: a NumPy int array."""
    p = probs.cpu().numpy()
    predicted, confidence = p.argmax(-1), p.max(-1)
    out = []
    for c in range(p.shape[1]):
        members = np.where(predicted == c)[0]
        out.extend(members[np.argsort(-confidence[members])][:per_class])
    return np.array(out, dtype=np.int64)


def sel_python(probs, per_class):
    """Plain Python: a list of ints."""
    rows = probs.tolist()
    by_class = {}
    for i, row in enumerate(rows):
        c = max(range(len(row)), key=row.__getitem__)
        by_class.setdefault(c, []).append((row[c], i))
    chosen = []
    for c in sorted(by_class):
        chosen += [i for _, i in sorted(by_class[c], key=lambda pair: -pair[0])[:per_class]]
    return chosen


def sel_greedy(probs, per_class):
    """One pass over every example, most confident first, until each class is full: a Python set."""
    confidence, predicted = probs.max(dim=-1)
    taken, chosen = [0] * probs.shape[1], set()
    for i in torch.argsort(confidence, descending=True).tolist():
        c = int(predicted[i])
        if taken[c] < per_class:
            taken[c] += 1
            chosen.add(i)
    return chosen


def sel_masked_sort(probs, per_class):
    """Confidences of other classes set to -1 (a new tensor), sort, the first min(per_class, count)."""
    confidence, predicted = probs.max(dim=-1)
    out = []
    for c in range(probs.shape[1]):
        scores = torch.where(predicted == c, confidence, torch.full_like(confidence, -1.0))
        count = int((predicted == c).sum())
        out.append(torch.argsort(scores, descending=True)[:min(per_class, count)])
    return torch.cat(out)


SELECT_CORRECT = [
    ("nonzero and a stable sort, as the notebook", sel_notebook),
    ("topk with min(per_class, count), int32", sel_topk),
    ("NumPy inside, a NumPy array", sel_numpy),
    ("plain Python, a list of ints", sel_python),
    ("greedy over the global order, a set", sel_greedy),
    ("other classes masked with -1", sel_masked_sort),
]


def sel_global_topk(probs, per_class):
    return torch.argsort(probs.max(dim=-1).values, descending=True)[:per_class * probs.shape[1]]


def sel_wrong_column(probs, per_class):
    return torch.cat([torch.argsort(probs[:, c], descending=True)[:per_class] for c in range(probs.shape[1])])


def sel_least_confident(probs, per_class):
    confidence, predicted = probs.max(dim=-1)
    out = []
    for c in range(probs.shape[1]):
        members = torch.nonzero(predicted == c).flatten()
        out.append(members[torch.argsort(confidence[members])[:per_class]])
    return torch.cat(out)


def sel_total_global(probs, per_class):
    return torch.argsort(probs.max(dim=-1).values, descending=True)[:per_class]


def sel_total_split(probs, per_class):
    return sel_notebook(probs, per_class // probs.shape[1])


def sel_padded(probs, per_class):
    confidence, predicted = probs.max(dim=-1)
    out = []
    for c in range(probs.shape[1]):
        masked = confidence * (predicted == c)  # others 0: topk takes them when the class runs out
        out.append(torch.topk(masked, min(per_class, len(probs))).indices)
    return torch.cat(out)


def sel_topk_crash(probs, per_class):
    confidence, predicted = probs.max(dim=-1)
    out = []
    for c in range(probs.shape[1]):
        members = torch.nonzero(predicted == c).flatten()
        out.append(members[torch.topk(confidence[members], per_class).indices])
    return torch.cat(out)


def sel_empty_class_crash(probs, per_class):
    confidence, predicted = probs.max(dim=-1)
    out = []
    for c in range(probs.shape[1]):
        members = torch.nonzero(predicted == c).flatten()
        best = confidence[members].max()  # the class's best confidence, to report it
        order = torch.argsort(confidence[members] / best, descending=True)
        out.append(members[order[:per_class]])
    return torch.cat(out)


def sel_running_list(probs, per_class):
    confidence, predicted = probs.max(dim=-1)
    picked, out = [], []
    for c in range(probs.shape[1]):
        members = torch.nonzero(predicted == c).flatten()
        picked += members[torch.argsort(confidence[members], descending=True)[:per_class]].tolist()
        out += picked  # the running list again, not this class's picks
    return torch.tensor(out)


def sel_mask(probs, per_class):
    mask = torch.zeros(len(probs), dtype=torch.bool)
    mask[sel_notebook(probs, per_class)] = True
    return mask


def sel_float_indices(probs, per_class):
    return sel_notebook(probs, per_class).to(probs.dtype)


def sel_nonzero_not_flattened(probs, per_class):
    mask = sel_mask(probs, per_class)
    return torch.nonzero(mask)


def sel_list_per_class(probs, per_class):
    confidence, predicted = probs.max(dim=-1)
    out = []
    for c in range(probs.shape[1]):
        members = torch.nonzero(predicted == c).flatten()
        out.append(members[torch.argsort(confidence[members], descending=True)[:per_class]])
    return out


def sel_with_labels(probs, per_class):
    indices = sel_notebook(probs, per_class)
    return indices, probs[indices].argmax(dim=-1)


def sel_one_based(probs, per_class):
    return sel_notebook(probs, per_class) + 1


def sel_probs_changed(probs, per_class):
    chosen = sel_notebook(probs, per_class)
    probs[chosen] = 0.0  # "so that they are not picked again"
    return chosen


def sel_course_nn(probs, per_class):
    return pnn.select_pseudo_labels(probs, per_class)


def sel_course_ref(probs, per_class):
    return torch.from_numpy(ref.select_pseudo_labels(probs.numpy(), per_class))


SELECT_MISTAKES = [
    ("positions within each class not mapped back", pseudo_positions_in_subset, "map them back to rows of probs"),
    ("global top-k", sel_global_topk, "a global top-k over every example's confidence"),
    ("top of each column over all examples", sel_wrong_column,
     "the top of each class's column probs[:, c] over ALL the examples"),
    ("least confident instead of most", sel_least_confident, "the least confident examples of each class"),
    ("per_class as the total (a global top per_class)", sel_total_global,
     "per_class taken as the size of the whole selection"),
    ("per_class split between the classes", sel_total_split, "per_class taken as the size of the whole selection"),
    ("small classes padded (masked topk)", sel_padded, "padded with other examples"),
    ("topk crashes on a small class", sel_topk_crash,
     "a class may have fewer predicted examples than per_class: it then gives all it has"),
    ("crash on a class with no example", sel_empty_class_crash, "a class may have no predicted example at all"),
    ("duplicates (the running list appended)", sel_running_list, "times in the selection: each example is chosen"),
    ("a boolean mask", sel_mask, "a boolean mask over the examples, expected the indices"),
    ("float indices", sel_float_indices, "expected integers (torch.long)"),
    ("torch.nonzero not flattened", sel_nonzero_not_flattened, "torch.nonzero gives (n, 1): flatten it"),
    ("a list of per-class tensors", sel_list_per_class, "(one per class?): concatenate them"),
    ("indices and labels", sel_with_labels, "return the indices alone"),
    ("indices counted from 1", sel_one_based, "is out of range: the examples are numbered 0 to"),
    ("probs changed in place", sel_probs_changed, "changed its input probs in place"),
    ("calls the course's torch version", sel_course_nn, "calls plmcourse.nn.select_pseudo_labels; write it"),
    ("calls the course's NumPy version", sel_course_ref, "calls plmcourse.ref.select_pseudo_labels; write it"),
]


CATALOGUE = {
    "check_verbalizer_log_probs": (VERBALIZER_CORRECT, VERBALIZER_MISTAKES),
    "check_pet_soft_labels": (PET_CORRECT, PET_MISTAKES),
    "check_select_pseudo_labels": (SELECT_CORRECT, SELECT_MISTAKES),
}
