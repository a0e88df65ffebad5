"""Fresh student-style implementations for notebook 02 (language models and ELMo):
cross_entropy (NumPy), bilm_loss (PyTorch), scalar_mix (PyTorch)."""
import numpy as np
import torch
import torch.nn.functional as F


def _log_softmax_np(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    return (x - m) - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


# ---- cross_entropy ---------------------------------------------------------
def cross_entropy_hardcoded_ignore(logits, targets, ignore_index=-100):
    """WRONG: always skips targets equal to -100, whatever ignore_index says."""
    logits = np.asarray(logits, dtype=np.float64)
    targets = np.asarray(targets)
    keep = targets != -100
    logp = _log_softmax_np(logits[keep])
    return float(-np.mean(logp[np.arange(len(logp)), targets[keep]]))


def cross_entropy_log_of_softmax(logits, targets, ignore_index=-100):
    """WRONG: log of a softmax; a target far below the max underflows to log(0) and the loss is inf."""
    logits = np.asarray(logits, dtype=np.float64)
    targets = np.asarray(targets)
    keep = targets != ignore_index
    z = logits[keep]
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        return float(-np.mean(np.log(p[np.arange(len(z)), targets[keep]])))


def cross_entropy_mean_over_all(logits, targets, ignore_index=-100):
    """WRONG: zeroes the ignored positions but still divides by the number of all positions."""
    logits = np.asarray(logits, dtype=np.float64)
    targets = np.asarray(targets)
    keep = targets != ignore_index
    safe = np.where(keep, targets, 0)
    logp = _log_softmax_np(logits)
    picked = np.take_along_axis(logp, safe[..., None], axis=-1)[..., 0]
    return float(-np.sum(np.where(keep, picked, 0.0)) / targets.size)


def cross_entropy_2d_only(logits, targets, ignore_index=-100):
    """WRONG: indexes with logits[np.arange(len(targets)), targets], which only works for (N, V) logits."""
    logits = np.asarray(logits, dtype=np.float64)
    targets = np.asarray(targets)
    keep = targets != ignore_index
    logp = _log_softmax_np(logits)
    picked = logp[np.arange(len(targets)), np.where(keep, targets, 0)]
    return float(-picked[keep].mean())


def cross_entropy_sum(logits, targets, ignore_index=-100):
    """WRONG: returns the sum of -log p over the counted positions instead of their mean."""
    logits = np.asarray(logits, dtype=np.float64)
    targets = np.asarray(targets)
    keep = targets != ignore_index
    logp = _log_softmax_np(logits[keep])
    return float(-np.sum(logp[np.arange(len(logp)), targets[keep]]))


def cross_entropy_flat_loop(logits, targets, ignore_index=-100):
    """CORRECT: flattens to (N, V) and loops over the positions with a per-row logsumexp."""
    logits = np.asarray(logits, dtype=np.float64)
    V = logits.shape[-1]
    flat_logits = logits.reshape(-1, V)
    flat_targets = np.asarray(targets).reshape(-1)
    total, count = 0.0, 0
    for row, t in zip(flat_logits, flat_targets):
        if t == ignore_index:
            continue
        m = row.max()
        total += m + np.log(np.exp(row - m).sum()) - row[t]
        count += 1
    return total / count


def cross_entropy_logaddexp(logits, targets, ignore_index=-100):
    """CORRECT: logsumexp by np.logaddexp.reduce and the target logit by take_along_axis."""
    logits = np.asarray(logits, dtype=np.float64)
    targets = np.asarray(targets)
    keep = targets != ignore_index
    safe = np.where(keep, targets, 0)
    lse = np.logaddexp.reduce(logits, axis=-1)
    target_logit = np.take_along_axis(logits, safe[..., None], axis=-1)[..., 0]
    return float(np.sum((lse - target_logit)[keep]) / np.sum(keep))


# ---- bilm_loss -------------------------------------------------------------
def _ce(logits, targets):
    """Mean cross-entropy, ignore_index -100, over (B, L', V) / (B, L')."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)


def bilm_forward_shift_both(forward_logits, backward_logits, targets):
    """WRONG: gives the backward LM the forward shift as well (it is asked to predict t + 1)."""
    return _ce(forward_logits[:, :-1], targets[:, 1:]) + _ce(backward_logits[:, :-1], targets[:, 1:])


def bilm_backward_no_shift(forward_logits, backward_logits, targets):
    """WRONG: scores backward_logits[:, t] against targets[:, t] (no shift): it predicts a word it has read."""
    return _ce(forward_logits[:, :-1], targets[:, 1:]) + _ce(backward_logits, targets)


def bilm_padding_predicts(forward_logits, backward_logits, targets):
    """WRONG: only masks the predicted token; a padding position still predicts the last real token backwards."""
    backward_targets = targets[:, :-1]
    return _ce(forward_logits[:, :-1], targets[:, 1:]) + _ce(backward_logits[:, 1:], backward_targets)


def bilm_average_of_directions(forward_logits, backward_logits, targets):
    """WRONG: returns the average of the two directions' losses instead of their sum."""
    backward_targets = targets[:, :-1].masked_fill(targets[:, 1:] == -100, -100)
    forward = _ce(forward_logits[:, :-1], targets[:, 1:])
    backward = _ce(backward_logits[:, 1:], backward_targets)
    return (forward + backward) / 2


def bilm_shifts_swapped(forward_logits, backward_logits, targets):
    """WRONG: swaps the shifts: forward_logits[:, t] predicts t - 1 and backward_logits[:, t] predicts t + 1."""
    forward_targets = targets[:, :-1].masked_fill(targets[:, 1:] == -100, -100)
    return _ce(forward_logits[:, 1:], forward_targets) + _ce(backward_logits[:, :-1], targets[:, 1:])


def bilm_item_then_tensor(forward_logits, backward_logits, targets):
    """WRONG: builds the result with torch.tensor(loss.item()), so no gradient reaches the logits."""
    backward_targets = targets[:, :-1].masked_fill(targets[:, 1:] == -100, -100)
    forward = _ce(forward_logits[:, :-1], targets[:, 1:]).item()
    backward = _ce(backward_logits[:, 1:], backward_targets).item()
    return torch.tensor(forward + backward)


def bilm_manual_masks(forward_logits, backward_logits, targets):
    """CORRECT: own log-softmax and gather, with an explicit 'from and to both real' mask per direction."""
    real = targets != -100
    safe = targets.clamp(min=0)

    def direction(logits, from_slice, to_slice):
        logp = torch.log_softmax(logits[:, from_slice], dim=-1)
        picked = logp.gather(-1, safe[:, to_slice].unsqueeze(-1)).squeeze(-1)
        counted = real[:, from_slice] & real[:, to_slice]
        return -(picked * counted).sum() / counted.sum()

    n = targets.shape[1]
    forward = direction(forward_logits, slice(0, n - 1), slice(1, n))
    backward = direction(backward_logits, slice(1, n), slice(0, n - 1))
    return forward + backward


def bilm_flip_backward(forward_logits, backward_logits, targets):
    """CORRECT: flips the backward direction along time so that it becomes a forward problem."""
    def shifted_ce(logits, toks):
        pred = logits[:, :-1]
        tgt = toks[:, 1:].masked_fill(toks[:, :-1] == -100, -100)   # from-position must be real too
        losses = F.cross_entropy(pred.reshape(-1, pred.shape[-1]), tgt.reshape(-1),
                                 ignore_index=-100, reduction="sum")
        return losses / (tgt != -100).sum()

    return shifted_ce(forward_logits, targets) + shifted_ce(backward_logits.flip(1), targets.flip(1))


# ---- scalar_mix ------------------------------------------------------------
def scalar_mix_no_softmax(layers, weights, gamma):
    """WRONG: uses the raw weights w_j instead of softmax(w)_j."""
    return gamma * torch.tensordot(weights, layers, dims=1)


def scalar_mix_naive_softmax(layers, weights, gamma):
    """WRONG: softmax as exp(w) / sum(exp(w)) without a max shift; weights of size 1000 give nan."""
    e = torch.exp(weights)
    s = e / e.sum()
    return gamma * torch.tensordot(s, layers, dims=1)


def scalar_mix_gamma_item(layers, weights, gamma):
    """WRONG: multiplies by gamma.item(), so no gradient flows to gamma."""
    s = torch.softmax(weights, dim=0)
    return gamma.item() * torch.tensordot(s, layers, dims=1)


def scalar_mix_plain_mean(layers, weights, gamma):
    """WRONG: averages the layers with equal weights, ignoring the learned weights."""
    return gamma * layers.mean(dim=0)


def scalar_mix_broadcast_2d(layers, weights, gamma):
    """WRONG: s[:, None] * layers only lines up with the layer axis when layers is (N, d)."""
    s = torch.softmax(weights, dim=0)
    return gamma * (s[:, None] * layers).sum(dim=0)


def scalar_mix_sum_normalised(layers, weights, gamma):
    """WRONG: normalises by w / w.sum() instead of a softmax (negative weights, division by ~0)."""
    s = weights / weights.sum()
    return gamma * torch.tensordot(s, layers, dims=1)


def scalar_mix_einsum(layers, weights, gamma):
    """CORRECT: a log-space softmax and einsum over the layer axis."""
    s = torch.exp(weights - torch.logsumexp(weights, dim=0))
    return gamma * torch.einsum("n,n...->...", s.to(layers.dtype), layers)


def scalar_mix_loop(layers, weights, gamma):
    """CORRECT: a Python loop over the layers with a max-shifted softmax."""
    shifted = weights - weights.max()
    e = torch.exp(shifted)
    s = e / e.sum()
    out = s[0] * layers[0]
    for j in range(1, layers.shape[0]):
        out = out + s[j] * layers[j]
    return gamma * out


FRESH = {
    "check_cross_entropy": {
        "wrong": [
            ("hard-coded -100", cross_entropy_hardcoded_ignore, "Ignores the ignore_index argument and skips -100."),
            ("log of softmax", cross_entropy_log_of_softmax,
             "Takes log(softmax), which is -inf for a target far below the max (logits of size 1e4)."),
            ("divides by all positions", cross_entropy_mean_over_all,
             "Divides by the number of all positions, counting the ignored ones."),
            ("2-D indexing only", cross_entropy_2d_only,
             "Indexes with arange(len(targets)), which breaks for logits with more than one leading axis."),
            ("sum instead of mean", cross_entropy_sum, "Returns the sum over counted positions, not the mean."),
        ],
        "correct": [
            ("flattened loop", cross_entropy_flat_loop),
            ("logaddexp reduce + take_along_axis", cross_entropy_logaddexp),
        ],
    },
    "check_bilm_loss": {
        "wrong": [
            ("forward shift in both", bilm_forward_shift_both, "The backward LM is scored against t + 1, not t - 1."),
            ("backward not shifted", bilm_backward_no_shift,
             "backward_logits[:, t] is scored against targets[:, t], a word it has already read."),
            ("padding still predicts", bilm_padding_predicts,
             "A padding position's backward prediction of the last real token is counted."),
            ("average of directions", bilm_average_of_directions, "Returns (forward + backward) / 2 instead of the sum."),
            ("shifts swapped", bilm_shifts_swapped, "Forward predicts t - 1 and backward predicts t + 1."),
            ("item() breaks gradient", bilm_item_then_tensor,
             "Returns torch.tensor(float), so gradients do not reach the logits."),
        ],
        "correct": [
            ("manual log-softmax with masks", bilm_manual_masks),
            ("flip the backward direction", bilm_flip_backward),
        ],
    },
    "check_scalar_mix": {
        "wrong": [
            ("no softmax", scalar_mix_no_softmax, "Uses the raw weights instead of softmax(weights)."),
            ("softmax without max shift", scalar_mix_naive_softmax, "exp(1000) overflows and the mix is nan."),
            ("gamma.item()", scalar_mix_gamma_item, "No gradient flows to gamma."),
            ("plain mean", scalar_mix_plain_mean, "Ignores the weights: an unweighted mean of the layers."),
            ("s[:, None] broadcasting", scalar_mix_broadcast_2d,
             "The weight vector is broadcast against the wrong axes when layers has more than 2 dimensions."),
            ("normalised by the sum", scalar_mix_sum_normalised,
             "Uses w / sum(w) instead of softmax(w): wrong values, and negative or infinite weights."),
        ],
        "correct": [
            ("logsumexp softmax + einsum", scalar_mix_einsum),
            ("loop over layers", scalar_mix_loop),
        ],
    },
}
