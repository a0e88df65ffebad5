"""Fresh student-style implementations for notebook 01 (word vectors):
log_softmax, noise_distribution, skipgram_negative_sampling_loss."""
import numpy as np


# ---- log_softmax -----------------------------------------------------------
def log_softmax_log_of_softmax(x, axis=-1):
    """WRONG: log of a (max-shifted) softmax; an entry far below the max underflows to log(0) = -inf."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return np.log(e / np.sum(e, axis=axis, keepdims=True))


def log_softmax_no_shift(x, axis=-1):
    """WRONG: x - log(sum(exp(x))) without subtracting the max; overflows for logits of size 1e4."""
    x = np.asarray(x, dtype=np.float64)
    return x - np.log(np.sum(np.exp(x), axis=axis, keepdims=True))


def log_softmax_last_axis_keepdims(x, axis=-1):
    """WRONG: re-adds the reduced axis with [..., None], which is only right when axis is the last one."""
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis)[..., None]
    shifted = x - m
    lse = np.log(np.sum(np.exp(shifted), axis=axis))[..., None]
    return shifted - lse


def log_softmax_global_max(x, axis=-1):
    """WRONG: shifts by the max of the whole array, so a slice far below it underflows to log(0)."""
    x = np.asarray(x, dtype=np.float64)
    shifted = x - np.max(x)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def log_softmax_replace_neg_inf(x, axis=-1):
    """WRONG: replaces -inf by -1e9 'to avoid nan', so a ruled-out word gets a finite value, not -inf."""
    x = np.where(np.isneginf(x), -1e9, np.asarray(x, dtype=np.float64))
    m = np.max(x, axis=axis, keepdims=True)
    return (x - m) - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def log_softmax_in_place(x, axis=-1):
    """WRONG: subtracts the max in place (x -= m), which changes the caller's array."""
    x -= np.max(x, axis=axis, keepdims=True)
    x -= np.log(np.sum(np.exp(x), axis=axis, keepdims=True))
    return x


def log_softmax_logaddexp_reduce(x, axis=-1):
    """CORRECT: the normaliser as a pairwise-stable reduction with np.logaddexp."""
    x = np.asarray(x, dtype=np.float64)
    return x - np.logaddexp.reduce(x, axis=axis, keepdims=True)


def log_softmax_slice_loop(x, axis=-1):
    """CORRECT: moves `axis` to the end and handles one 1-D slice at a time with a max shift."""
    x = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.empty_like(flat)
    for r, row in enumerate(flat):
        m = row.max()
        total = 0.0
        for value in row:
            total += np.exp(value - m)
        out[r] = row - m - np.log(total)
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


# ---- noise_distribution ----------------------------------------------------
def noise_no_zero_guard(counts, power=0.75):
    """WRONG: counts ** power normalised; with power 0 unseen words get 0 ** 0 = 1, not 0."""
    weights = np.asarray(counts, dtype=np.float64) ** power
    return weights / weights.sum()


def noise_hardcoded_power(counts, power=0.75):
    """WRONG: always raises the counts to 0.75, ignoring the power argument."""
    counts = np.asarray(counts, dtype=np.float64)
    weights = np.where(counts > 0, counts ** 0.75, 0.0)
    return weights / weights.sum()


def noise_power_after_normalising(counts, power=0.75):
    """WRONG: normalises the counts first and then raises to the power, never renormalising."""
    counts = np.asarray(counts, dtype=np.float64)
    unigram = counts / counts.sum()
    return np.where(unigram > 0, unigram ** power, 0.0)


def noise_zero_after_normalising(counts, power=0.75):
    """WRONG: zeroes unseen words after normalising, so for power 0 the result no longer sums to 1."""
    counts = np.asarray(counts, dtype=np.float64)
    weights = counts ** power
    probs = weights / weights.sum()
    probs[counts == 0] = 0.0
    return probs


def noise_log_space(counts, power=0.75):
    """WRONG: exp(power * log(count)); for power 0 and count 0 this is exp(0 * -inf) = nan."""
    counts = np.asarray(counts, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.exp(power * np.log(counts))
    return weights / weights.sum()


def noise_sign_trick(counts, power=0.75):
    """CORRECT: multiplies by sign(count) so that unseen words get exactly 0 for every power."""
    counts = np.asarray(counts, dtype=np.float64)
    weights = np.sign(counts) * counts ** power
    return weights / weights.sum()


def noise_loop(counts, power=0.75):
    """CORRECT: a plain loop over the vocabulary that skips unseen words."""
    counts = np.asarray(counts)
    weights = np.zeros(len(counts), dtype=np.float64)
    for i, c in enumerate(counts):
        if c > 0:
            weights[i] = float(c) ** power
    return weights / weights.sum()


# ---- skipgram_negative_sampling_loss ---------------------------------------
def _sigmoid(s):
    return np.exp(-np.logaddexp(0.0, -s))


def sgns_no_batch_scaling_in_grads(center_vecs, context_vecs, negative_vecs):
    """WRONG: the loss is the batch mean but the gradients are not divided by B."""
    c, o, n = center_vecs, context_vecs, negative_vecs
    s_pos = np.sum(c * o, axis=-1)
    s_neg = np.einsum("bkd,bd->bk", n, c)
    loss = np.mean(np.logaddexp(0, -s_pos) + np.logaddexp(0, s_neg).sum(axis=1))
    g_pos = _sigmoid(s_pos) - 1.0
    g_neg = _sigmoid(s_neg)
    grad_c = g_pos[:, None] * o + np.einsum("bk,bkd->bd", g_neg, n)
    grad_o = g_pos[:, None] * c
    grad_n = g_neg[:, :, None] * c[:, None, :]
    return float(loss), grad_c, grad_o, grad_n


def sgns_naive_log_sigmoid(center_vecs, context_vecs, negative_vecs):
    """WRONG: computes -log(sigmoid(s)) as -log(1 / (1 + exp(-s))), which is inf for scores near -1000."""
    c, o, n = center_vecs, context_vecs, negative_vecs
    B = len(c)
    s_pos = np.sum(c * o, axis=-1)
    s_neg = np.einsum("bkd,bd->bk", n, c)
    with np.errstate(over="ignore", divide="ignore"):
        sig_pos = 1.0 / (1.0 + np.exp(-s_pos))
        sig_negneg = 1.0 / (1.0 + np.exp(s_neg))
        loss = np.mean(-np.log(sig_pos) - np.log(sig_negneg).sum(axis=1))
        g_pos = sig_pos - 1.0
        g_neg = 1.0 - sig_negneg
    grad_c = (g_pos[:, None] * o + np.einsum("bk,bkd->bd", g_neg, n)) / B
    grad_o = g_pos[:, None] * c / B
    grad_n = g_neg[:, :, None] * c[:, None, :] / B
    return float(loss), grad_c, grad_o, grad_n


def sgns_mean_over_negatives(center_vecs, context_vecs, negative_vecs):
    """WRONG: averages the negative terms over K instead of summing them (loss and gradients)."""
    c, o, n = center_vecs, context_vecs, negative_vecs
    B, K = n.shape[0], n.shape[1]
    s_pos = np.sum(c * o, axis=-1)
    s_neg = np.einsum("bkd,bd->bk", n, c)
    loss = np.mean(np.logaddexp(0, -s_pos) + np.logaddexp(0, s_neg).mean(axis=1))
    g_pos = _sigmoid(s_pos) - 1.0
    g_neg = _sigmoid(s_neg) / K
    grad_c = (g_pos[:, None] * o + np.einsum("bk,bkd->bd", g_neg, n)) / B
    grad_o = g_pos[:, None] * c / B
    grad_n = g_neg[:, :, None] * c[:, None, :] / B
    return float(loss), grad_c, grad_o, grad_n


def sgns_wrong_negative_derivative(center_vecs, context_vecs, negative_vecs):
    """WRONG: uses sigma(s) - 1 as the derivative of the negative terms as well (should be sigma(s))."""
    c, o, n = center_vecs, context_vecs, negative_vecs
    B = len(c)
    s_pos = np.sum(c * o, axis=-1)
    s_neg = np.einsum("bkd,bd->bk", n, c)
    loss = np.mean(np.logaddexp(0, -s_pos) + np.logaddexp(0, s_neg).sum(axis=1))
    g_pos = _sigmoid(s_pos) - 1.0
    g_neg = _sigmoid(s_neg) - 1.0
    grad_c = (g_pos[:, None] * o + np.einsum("bk,bkd->bd", g_neg, n)) / B
    grad_o = g_pos[:, None] * c / B
    grad_n = g_neg[:, :, None] * c[:, None, :] / B
    return float(loss), grad_c, grad_o, grad_n


def sgns_center_grad_missing_negatives(center_vecs, context_vecs, negative_vecs):
    """WRONG: the gradient for the center vector only has the positive term; the negatives' pull is missing."""
    c, o, n = center_vecs, context_vecs, negative_vecs
    B = len(c)
    s_pos = np.sum(c * o, axis=-1)
    s_neg = np.einsum("bkd,bd->bk", n, c)
    loss = np.mean(np.logaddexp(0, -s_pos) + np.logaddexp(0, s_neg).sum(axis=1))
    g_pos = _sigmoid(s_pos) - 1.0
    g_neg = _sigmoid(s_neg)
    grad_c = g_pos[:, None] * o / B
    grad_o = g_pos[:, None] * c / B
    grad_n = g_neg[:, :, None] * c[:, None, :] / B
    return float(loss), grad_c, grad_o, grad_n


def sgns_context_grad_uses_context(center_vecs, context_vecs, negative_vecs):
    """WRONG: chain-rule slip: the context gradient is multiplied by the context vector instead of the center."""
    c, o, n = center_vecs, context_vecs, negative_vecs
    B = len(c)
    s_pos = np.sum(c * o, axis=-1)
    s_neg = np.einsum("bkd,bd->bk", n, c)
    loss = np.mean(np.logaddexp(0, -s_pos) + np.logaddexp(0, s_neg).sum(axis=1))
    g_pos = _sigmoid(s_pos) - 1.0
    g_neg = _sigmoid(s_neg)
    grad_c = (g_pos[:, None] * o + np.einsum("bk,bkd->bd", g_neg, n)) / B
    grad_o = g_pos[:, None] * o / B
    grad_n = g_neg[:, :, None] * c[:, None, :] / B
    return float(loss), grad_c, grad_o, grad_n


def sgns_loop(center_vecs, context_vecs, negative_vecs):
    """CORRECT: a loop over the pairs and their negatives, with a piecewise-stable sigmoid."""
    c = np.asarray(center_vecs, dtype=np.float64)
    o = np.asarray(context_vecs, dtype=np.float64)
    n = np.asarray(negative_vecs, dtype=np.float64)
    B, K = n.shape[0], n.shape[1]

    def sigmoid(s):
        if s >= 0:
            return 1.0 / (1.0 + np.exp(-s))
        e = np.exp(s)
        return e / (1.0 + e)

    loss = 0.0
    grad_c, grad_o, grad_n = np.zeros_like(c), np.zeros_like(o), np.zeros_like(n)
    for b in range(B):
        s = float(c[b] @ o[b])
        loss += np.logaddexp(0.0, -s)
        grad_c[b] += (sigmoid(s) - 1.0) * o[b]
        grad_o[b] += (sigmoid(s) - 1.0) * c[b]
        for k in range(K):
            t = float(c[b] @ n[b, k])
            loss += np.logaddexp(0.0, t)
            grad_c[b] += sigmoid(t) * n[b, k]
            grad_n[b, k] += sigmoid(t) * c[b]
    return loss / B, grad_c / B, grad_o / B, grad_n / B


def sgns_stacked_scores(center_vecs, context_vecs, negative_vecs):
    """CORRECT: stacks the context with the negated negatives, one (B, K+1) score matrix with signs."""
    c = np.asarray(center_vecs, dtype=np.float64)
    o = np.asarray(context_vecs, dtype=np.float64)
    n = np.asarray(negative_vecs, dtype=np.float64)
    B = c.shape[0]
    outputs = np.concatenate([o[:, None, :], n], axis=1)           # (B, K+1, d)
    signs = np.ones(outputs.shape[1])
    signs[1:] = -1.0
    s = np.einsum("bkd,bd->bk", outputs, c) * signs                # sign * score
    loss = np.logaddexp(0.0, -s).sum() / B
    # d/ds_raw [-log sigma(sign * s_raw)] = -sign * sigma(-sign * s_raw)
    coeff = -signs * np.exp(-np.logaddexp(0.0, s)) / B             # sigma(-s) = exp(-log(1 + e^s))
    grad_c = np.einsum("bk,bkd->bd", coeff, outputs)
    grad_outputs = coeff[:, :, None] * c[:, None, :]
    return float(loss), grad_c, grad_outputs[:, 0], grad_outputs[:, 1:]


FRESH = {
    "check_log_softmax": {
        "wrong": [
            ("log of softmax", log_softmax_log_of_softmax,
             "Takes log(softmax(x)), so entries far below the max underflow to -inf."),
            ("no max shift", log_softmax_no_shift, "Does not subtract the max; overflows for logits of size 1e4."),
            ("keepdims only for last axis", log_softmax_last_axis_keepdims,
             "Restores the reduced axis with [..., None], which is wrong for any axis but the last."),
            ("global max shift", log_softmax_global_max,
             "Shifts by the max of the whole array, so a slice far below it gives -inf/nan."),
            ("-inf replaced by -1e9", log_softmax_replace_neg_inf,
             "A -inf logit comes back finite (about -1e9) instead of -inf."),
            ("in-place shift", log_softmax_in_place, "Modifies x in place."),
        ],
        "correct": [
            ("np.logaddexp.reduce normaliser", log_softmax_logaddexp_reduce),
            ("loop over slices", log_softmax_slice_loop),
        ],
    },
    "check_noise_distribution": {
        "wrong": [
            ("no zero-count guard", noise_no_zero_guard, "With power 0, unseen words get probability > 0 (0**0 == 1)."),
            ("hard-coded 0.75", noise_hardcoded_power, "Ignores the power argument and always uses 0.75."),
            ("power after normalising", noise_power_after_normalising,
             "Raises the normalised unigram to the power and never renormalises; the result does not sum to 1."),
            ("zeroed after normalising", noise_zero_after_normalising,
             "Sets unseen words to 0 after normalising, so for power 0 the probabilities sum to less than 1."),
            ("log-space power", noise_log_space, "exp(power * log(0)) is nan for power 0, so unseen words get nan."),
        ],
        "correct": [
            ("sign(count) factor", noise_sign_trick),
            ("loop skipping unseen words", noise_loop),
        ],
    },
    "check_skipgram_negative_sampling_loss": {
        "wrong": [
            ("gradients not divided by B", sgns_no_batch_scaling_in_grads,
             "The loss is a batch mean but the gradients miss the 1/B factor."),
            ("naive log-sigmoid", sgns_naive_log_sigmoid,
             "Computes -log(1/(1+exp(-s))), which is inf for scores around -1000."),
            ("mean over negatives", sgns_mean_over_negatives,
             "Averages the K negative terms instead of summing them, in the loss and gradients."),
            ("wrong derivative for negatives", sgns_wrong_negative_derivative,
             "Uses sigma(s) - 1 as the derivative of -log sigma(-s); it should be sigma(s)."),
            ("center gradient misses negatives", sgns_center_grad_missing_negatives,
             "The center-vector gradient leaves out the sum over the negatives."),
            ("context gradient times context", sgns_context_grad_uses_context,
             "The context gradient multiplies by the context vector instead of the center vector."),
        ],
        "correct": [
            ("loop over pairs", sgns_loop),
            ("stacked signed scores", sgns_stacked_scores),
        ],
    },
}
