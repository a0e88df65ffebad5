"""Right and wrong answers to the language-models notebook, as data for tests/test_grading_language_models.py.

For each check: CORRECT, a list of (name, function) that must pass, written in
different styles; and MISTAKES, a list of (name, function, fragment): the check
must fail with a message containing `fragment`. Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse import ref


# ============================================================================
# cross_entropy(logits, targets, ignore_index=-100), NumPy


def _log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def ce_boolean_index(logits, targets, ignore_index=-100):
    counted = targets != ignore_index
    log_p = _log_softmax(logits)[counted]
    return -np.mean(log_p[np.arange(len(log_p)), targets[counted]])


def ce_take_along_axis(logits, targets, ignore_index=-100):
    counted = targets != ignore_index
    safe = np.where(counted, targets, 0)
    picked = np.take_along_axis(_log_softmax(logits), safe[..., None], axis=-1)[..., 0]
    return float(-(picked * counted).sum() / counted.sum())


def ce_loops(logits, targets, ignore_index=-100):
    flat_logits = logits.reshape(-1, logits.shape[-1])
    total, n = 0.0, 0
    for row, target in zip(flat_logits, targets.reshape(-1)):
        if target == ignore_index:
            continue
        top = max(float(v) for v in row)
        log_z = top + math.log(sum(math.exp(float(v) - top) for v in row))
        total += log_z - float(row[target])
        n += 1
    return total / n


def ce_with_ref_log_softmax(logits, targets, ignore_index=-100):
    counted = targets != ignore_index
    log_p = ref.log_softmax(logits)[counted]  # the previous notebook's function: allowed
    return -log_p[np.arange(len(log_p)), targets[counted]].mean()


def ce_counts_ignored(logits, targets, ignore_index=-100):
    counted = targets != ignore_index
    safe = np.where(counted, targets, 0)
    picked = np.take_along_axis(_log_softmax(logits), safe[..., None], axis=-1)[..., 0]
    return float(-(picked * counted).sum() / targets.size)


def ce_no_ignore(logits, targets, ignore_index=-100):
    log_p = _log_softmax(logits).reshape(-1, logits.shape[-1])
    return -log_p[np.arange(len(log_p)), targets.reshape(-1)].mean()  # -100 used as an index


def ce_default_ignore_only(logits, targets, ignore_index=-100):
    return ce_boolean_index(logits, targets)  # the argument is not used


def ce_sum(logits, targets, ignore_index=-100):
    counted = targets != ignore_index
    log_p = _log_softmax(logits)[counted]
    return -np.sum(log_p[np.arange(len(log_p)), targets[counted]])


def ce_sign(logits, targets, ignore_index=-100):
    return -ce_boolean_index(logits, targets, ignore_index)


def ce_perplexity(logits, targets, ignore_index=-100):
    return np.exp(ce_boolean_index(logits, targets, ignore_index))


def ce_log2(logits, targets, ignore_index=-100):
    return ce_boolean_index(logits, targets, ignore_index) / np.log(2)


def ce_unstable(logits, targets, ignore_index=-100):
    counted = targets != ignore_index
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        p = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
        log_p = np.log(p)[counted]
    return -np.mean(log_p[np.arange(len(log_p)), targets[counted]])


def ce_probability(logits, targets, ignore_index=-100):
    counted = targets != ignore_index
    p = np.exp(_log_softmax(logits))[counted]
    return -np.mean(p[np.arange(len(p)), targets[counted]])


def ce_raw_logits(logits, targets, ignore_index=-100):
    counted = targets != ignore_index
    picked = logits[counted]
    return -np.mean(picked[np.arange(len(picked)), targets[counted]])


def ce_per_position(logits, targets, ignore_index=-100):
    counted = targets != ignore_index
    safe = np.where(counted, targets, 0)
    return -np.take_along_axis(_log_softmax(logits), safe[..., None], axis=-1)[..., 0] * counted


def ce_torch(logits, targets, ignore_index=-100):
    return F.cross_entropy(torch.from_numpy(logits.reshape(-1, logits.shape[-1])).double(),
                           torch.from_numpy(targets.reshape(-1)), ignore_index=ignore_index).item()


def ce_course(logits, targets, ignore_index=-100):
    return ref.cross_entropy(logits, targets, ignore_index)


def ce_returns_tensor(logits, targets, ignore_index=-100):
    return torch.tensor(ce_boolean_index(logits, targets, ignore_index))


CE_CORRECT = [
    ("boolean indexing", ce_boolean_index),
    ("take_along_axis with a mask", ce_take_along_axis),
    ("explicit loops", ce_loops),
    ("the course's log_softmax", ce_with_ref_log_softmax),
]

CE_MISTAKES = [
    ("ignored positions in the denominator", ce_counts_ignored, "the ignored positions counted in the mean"),
    ("-100 used as an index", ce_no_ignore, "a target of -100 marks a position without a target"),
    ("ignore_index argument not used", ce_default_ignore_only, "is the ignore_index argument used?"),
    ("sum instead of mean", ce_sum, "the sum over positions instead of the mean"),
    ("sign flipped", ce_sign, "the sign flipped"),
    ("perplexity instead of cross-entropy", ce_perplexity, "the perplexity exp(loss) instead of the loss"),
    ("base-2 log", ce_log2, "a base-2 logarithm"),
    ("log of an unstable softmax", ce_unstable, "either exp overflowed (no max subtracted) or a probability underflowed"),
    ("probability without the log", ce_probability, "the mean of -p(target) without the log"),
    ("raw logits", ce_raw_logits, "the raw logit of the target used as its log-probability"),
    ("one loss per position", ce_per_position, "expected a single number"),
    ("calls torch's cross_entropy", ce_torch, "calls torch.nn.functional.cross_entropy"),
    ("calls the course's version", ce_course, "calls plmcourse.ref.cross_entropy"),
    ("returns a tensor", ce_returns_tensor, "this exercise is NumPy"),
]


# ============================================================================
# bilm_loss(forward_logits, backward_logits, targets), PyTorch


def bilm_masked_fill(forward_logits, backward_logits, targets):
    V = forward_logits.shape[-1]
    forward_targets = targets[:, 1:].masked_fill(targets[:, :-1] == -100, -100)
    backward_targets = targets[:, :-1].masked_fill(targets[:, 1:] == -100, -100)
    return (F.cross_entropy(forward_logits[:, :-1].reshape(-1, V), forward_targets.reshape(-1))
            + F.cross_entropy(backward_logits[:, 1:].reshape(-1, V), backward_targets.reshape(-1)))


def _direction(logits, source, target):
    """Mean -log p(target) over positions where source and target are real, written out by hand."""
    log_p = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    counted = (source != -100) & (target != -100)
    picked = log_p.gather(-1, torch.where(counted, target, 0).unsqueeze(-1)).squeeze(-1)
    return -(picked * counted).sum() / counted.sum()


def bilm_by_hand(forward_logits, backward_logits, targets):
    return (_direction(forward_logits[:, :-1], targets[:, :-1], targets[:, 1:])
            + _direction(backward_logits[:, 1:], targets[:, 1:], targets[:, :-1]))


def bilm_flip(forward_logits, backward_logits, targets):
    """The backward direction computed by reversing time, then using the forward shift."""
    flipped_logits, flipped_targets = backward_logits.flip(1), targets.flip(1)
    return (_direction(forward_logits[:, :-1], targets[:, :-1], targets[:, 1:])
            + _direction(flipped_logits[:, :-1], flipped_targets[:, :-1], flipped_targets[:, 1:]))


def bilm_loops(forward_logits, backward_logits, targets):
    B, L, V = forward_logits.shape
    terms = {"forward": [], "backward": []}
    for b in range(B):
        for t in range(L):
            if targets[b, t] == -100:
                continue
            if t + 1 < L and targets[b, t + 1] != -100:
                terms["forward"].append(-torch.log_softmax(forward_logits[b, t], 0)[targets[b, t + 1]])
            if t > 0 and targets[b, t - 1] != -100:
                terms["backward"].append(-torch.log_softmax(backward_logits[b, t], 0)[targets[b, t - 1]])
    return torch.stack(terms["forward"]).mean() + torch.stack(terms["backward"]).mean()


def _ce(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def bilm_backward_not_reversed(forward_logits, backward_logits, targets):
    return _ce(forward_logits[:, :-1], targets[:, 1:]) + _ce(backward_logits[:, :-1], targets[:, 1:])


def bilm_no_shift(forward_logits, backward_logits, targets):
    return _ce(forward_logits, targets) + _ce(backward_logits, targets)


def bilm_backward_no_shift(forward_logits, backward_logits, targets):
    return _ce(forward_logits[:, :-1], targets[:, 1:]) + _ce(backward_logits, targets)


def bilm_forward_no_shift(forward_logits, backward_logits, targets):
    backward_targets = targets[:, :-1].masked_fill(targets[:, 1:] == -100, -100)
    return _ce(forward_logits, targets) + _ce(backward_logits[:, 1:], backward_targets)


def bilm_swapped(forward_logits, backward_logits, targets):
    return _ce(forward_logits[:, 1:], targets[:, :-1]) + _ce(backward_logits[:, :-1], targets[:, 1:])


def bilm_forward_only(forward_logits, backward_logits, targets):
    return _ce(forward_logits[:, :-1], targets[:, 1:])


def bilm_backward_only(forward_logits, backward_logits, targets):
    backward_targets = targets[:, :-1].masked_fill(targets[:, 1:] == -100, -100)
    return _ce(backward_logits[:, 1:], backward_targets)


def bilm_average(forward_logits, backward_logits, targets):
    return bilm_masked_fill(forward_logits, backward_logits, targets) / 2


def bilm_padding_predicts(forward_logits, backward_logits, targets):
    return _ce(forward_logits[:, :-1], targets[:, 1:]) + _ce(backward_logits[:, 1:], targets[:, :-1])


def bilm_sum(forward_logits, backward_logits, targets):
    V = forward_logits.shape[-1]
    forward_targets = targets[:, 1:].masked_fill(targets[:, :-1] == -100, -100)
    backward_targets = targets[:, :-1].masked_fill(targets[:, 1:] == -100, -100)
    return (F.cross_entropy(forward_logits[:, :-1].reshape(-1, V), forward_targets.reshape(-1), reduction="sum")
            + F.cross_entropy(backward_logits[:, 1:].reshape(-1, V), backward_targets.reshape(-1),
                              reduction="sum"))


def bilm_divided_by_all(forward_logits, backward_logits, targets):
    V = forward_logits.shape[-1]
    forward_targets = targets[:, 1:].masked_fill(targets[:, :-1] == -100, -100)
    backward_targets = targets[:, :-1].masked_fill(targets[:, 1:] == -100, -100)
    total = (F.cross_entropy(forward_logits[:, :-1].reshape(-1, V), forward_targets.reshape(-1), reduction="sum")
             + F.cross_entropy(backward_logits[:, 1:].reshape(-1, V), backward_targets.reshape(-1),
                               reduction="sum"))
    return total / targets.numel()


def bilm_raw_logits(forward_logits, backward_logits, targets):
    def direction(logits, source, target):
        counted = (source != -100) & (target != -100)
        picked = logits.gather(-1, torch.where(counted, target, 0).unsqueeze(-1)).squeeze(-1)
        return -(picked * counted).sum() / counted.sum()

    return (direction(forward_logits[:, :-1], targets[:, :-1], targets[:, 1:])
            + direction(backward_logits[:, 1:], targets[:, 1:], targets[:, :-1]))


def bilm_view(forward_logits, backward_logits, targets):
    V = forward_logits.shape[-1]
    return F.cross_entropy(forward_logits[:, :-1].view(-1, V), targets[:, 1:].reshape(-1))  # not contiguous


def bilm_detached(forward_logits, backward_logits, targets):
    return bilm_masked_fill(forward_logits, backward_logits, targets).detach()


def bilm_backward_detached(forward_logits, backward_logits, targets):
    return bilm_masked_fill(forward_logits, backward_logits.detach(), targets)


def bilm_numpy(forward_logits, backward_logits, targets):
    arrays = [t.detach().numpy() for t in (forward_logits, backward_logits, targets)]
    return torch.tensor(ref.bilm_loss(*arrays))


def bilm_float32(forward_logits, backward_logits, targets):
    return bilm_masked_fill(forward_logits.float(), backward_logits.float(), targets)


def bilm_returns_float(forward_logits, backward_logits, targets):
    return bilm_masked_fill(forward_logits, backward_logits, targets).item()


def bilm_course(forward_logits, backward_logits, targets):
    return pnn.bilm_loss(forward_logits, backward_logits, targets)


def bilm_per_direction(forward_logits, backward_logits, targets):
    forward = _ce(forward_logits[:, :-1], targets[:, 1:])
    backward = _ce(backward_logits[:, 1:], targets[:, :-1].masked_fill(targets[:, 1:] == -100, -100))
    return torch.stack([forward, backward])


BILM_CORRECT = [
    ("masked_fill and cross_entropy", bilm_masked_fill),
    ("log-softmax and gather by hand", bilm_by_hand),
    ("backward direction by flipping time", bilm_flip),
    ("explicit loops", bilm_loops),
]

BILM_MISTAKES = [
    ("backward LM not reversed", bilm_backward_not_reversed, "the backward LM scored against the next token"),
    ("no shift", bilm_no_shift, "no shift: each position scored against its own token"),
    ("backward LM without a shift", bilm_backward_no_shift,
     "the backward LM scored against the token at its own position"),
    ("forward LM without a shift", bilm_forward_no_shift,
     "the forward LM scored against the token at its own position"),
    ("shifts swapped", bilm_swapped, "the two directions' shifts swapped"),
    ("forward LM only", bilm_forward_only, "only the forward LM's loss"),
    ("backward LM only", bilm_backward_only, "only the backward LM's loss"),
    ("average of the directions", bilm_average, "the average of the two directions' losses"),
    ("padding positions make predictions", bilm_padding_predicts, "predictions made from padding positions"),
    ("sum over positions", bilm_sum, "the sum over positions instead of the mean"),
    ("divided by B*L", bilm_divided_by_all, "each direction divided by B·L"),
    ("raw logits as log-probabilities", bilm_raw_logits, "raw logits used as log-probabilities"),
    ("view on a slice", bilm_view, "use .reshape instead of .view"),
    ("result detached", bilm_detached, "gradients do not flow"),
    ("backward logits detached", bilm_backward_detached, "gradients do not flow to backward_logits"),
    ("computed in NumPy", bilm_numpy, "calls plmcourse.ref.bilm_loss"),
    ("computed in float32", bilm_float32, "dtype torch.float32, expected torch.float64"),
    ("returns a Python float", bilm_returns_float, "expected a torch.Tensor"),
    ("calls the course's version", bilm_course, "calls plmcourse.nn.bilm_loss"),
    ("one loss per direction", bilm_per_direction, "expected a scalar (0-d) tensor"),
]


# ============================================================================
# scalar_mix(layers, weights, gamma), PyTorch


def mix_broadcast(layers, weights, gamma):
    s = torch.softmax(weights, dim=0).reshape(-1, *([1] * (layers.dim() - 1)))
    return gamma * (s * layers).sum(dim=0)


def mix_tensordot(layers, weights, gamma):
    return gamma * torch.tensordot(torch.softmax(weights, 0), layers, dims=1)


def mix_loop_exp(layers, weights, gamma):
    e = torch.exp(weights - weights.max())
    s = e / e.sum()
    out = torch.zeros_like(layers[0])
    for j in range(len(layers)):
        out = out + s[j] * layers[j]
    return gamma * out


def mix_einsum(layers, weights, gamma):
    return gamma * torch.einsum("n,n...->...", torch.softmax(weights, 0), layers)


def mix_unnormalised(layers, weights, gamma):
    return gamma * torch.tensordot(weights, layers, dims=1)


def mix_divided_by_sum(layers, weights, gamma):
    return gamma * torch.tensordot(weights / weights.sum(), layers, dims=1)


def mix_sigmoid(layers, weights, gamma):
    return gamma * torch.tensordot(torch.sigmoid(weights), layers, dims=1)


def mix_no_gamma(layers, weights, gamma):
    return torch.tensordot(torch.softmax(weights, 0), layers, dims=1)


def mix_plain_average(layers, weights, gamma):
    return gamma * layers.mean(dim=0)


def mix_last_layer(layers, weights, gamma):
    return gamma * layers[-1]


def mix_gamma_added(layers, weights, gamma):
    return gamma + torch.tensordot(torch.softmax(weights, 0), layers, dims=1)


def mix_unstable(layers, weights, gamma):
    e = torch.exp(weights)
    return gamma * torch.tensordot(e / e.sum(), layers, dims=1)


def mix_wrong_axis(layers, weights, gamma):
    s = torch.softmax(weights, 0).reshape(-1, *([1] * (layers.dim() - 1)))
    return gamma * (s * layers).sum(dim=1)


def mix_weights_detached(layers, weights, gamma):
    return gamma * torch.tensordot(torch.softmax(weights.detach(), 0), layers, dims=1)


def mix_gamma_item(layers, weights, gamma):
    return gamma.item() * torch.tensordot(torch.softmax(weights, 0), layers, dims=1)


def mix_numpy(layers, weights, gamma):
    arrays = [t.detach().numpy() for t in (layers, weights, gamma)]
    w = np.exp(arrays[1] - arrays[1].max())
    return torch.from_numpy(float(arrays[2]) * np.tensordot(w / w.sum(), arrays[0], axes=1))


def mix_float32(layers, weights, gamma):
    return mix_broadcast(layers.float(), weights.float(), gamma.float())


def mix_course(layers, weights, gamma):
    return pnn.scalar_mix(layers, weights, gamma)


def mix_module(layers, weights, gamma):
    module = pnn.ScalarMix(len(layers)).double()
    with torch.no_grad():
        module.weights.copy_(weights)
        module.gamma.copy_(gamma)
    module(layers)
    return mix_broadcast(layers, weights, gamma)


MIX_CORRECT = [
    ("broadcast and sum", mix_broadcast),
    ("tensordot", mix_tensordot),
    ("loop with a stable exp", mix_loop_exp),
    ("einsum", mix_einsum),
]

MIX_MISTAKES = [
    ("unnormalised layer weights", mix_unnormalised, "the raw layer weights used without normalising them"),
    ("weights divided by their sum", mix_divided_by_sum, "the weights divided by their sum instead of a softmax"),
    ("sigmoid instead of softmax", mix_sigmoid, "a sigmoid of each weight instead of a softmax"),
    ("gamma missing", mix_no_gamma, "the mix without the scale gamma"),
    ("plain average", mix_plain_average, "a plain average of the layers"),
    ("last layer only", mix_last_layer, "only the last layer"),
    ("gamma added", mix_gamma_added, "gamma added instead of multiplied"),
    ("softmax without the max", mix_unstable, "exp overflows"),
    ("summed over the wrong axis", mix_wrong_axis, "the weighted sum runs over the first axis of layers"),
    ("weights detached", mix_weights_detached, "gradients do not flow to weights"),
    ("gamma as a Python float", mix_gamma_item, "gradients do not flow to gamma"),
    ("computed in NumPy", mix_numpy, "gradients do not flow"),
    ("computed in float32", mix_float32, "dtype torch.float32, expected torch.float64"),
    ("calls the course's function", mix_course, "calls plmcourse.nn.scalar_mix"),
    ("calls the course's module", mix_module, "calls plmcourse.nn.ScalarMix"),
]


CATALOGUE = {
    "check_cross_entropy": (CE_CORRECT, CE_MISTAKES),
    "check_bilm_loss": (BILM_CORRECT, BILM_MISTAKES),
    "check_scalar_mix": (MIX_CORRECT, MIX_MISTAKES),
}
