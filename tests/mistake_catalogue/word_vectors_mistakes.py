"""Right and wrong answers to the word-vectors notebook, as data for tests/test_grading_word_vectors.py.

For each check: CORRECT, a list of (name, function) that must pass, written in
different styles; and MISTAKES, a list of (name, function, fragment): the check
must fail with a message containing `fragment`. Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import ref


# ============================================================================
# log_softmax(x, axis=-1)


def log_softmax_shifted(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    shifted = x - m
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def log_softmax_logaddexp(x, axis=-1):
    lse = np.logaddexp.reduce(x, axis=axis, keepdims=True)  # NumPy's own stable log-sum-exp
    return x - lse


def log_softmax_loops(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(x, axis, -1)
    out = np.empty_like(moved)
    for index in np.ndindex(moved.shape[:-1]):
        row = [float(v) for v in moved[index]]
        top = max(row)
        total = sum(math.exp(v - top) for v in row)
        out[index] = [v - top - math.log(total) for v in row]
    return np.moveaxis(out, -1, axis)


def log_softmax_of_softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return np.log(e / e.sum(axis=axis, keepdims=True))  # underflows to -inf far below the max


def log_softmax_unshifted(x, axis=-1):
    return x - np.log(np.sum(np.exp(x), axis=axis, keepdims=True))  # overflows for large logits


def log_softmax_ignores_axis(x, axis=-1):
    return log_softmax_shifted(x, axis=-1)


def log_softmax_whole_array(x, axis=-1):
    m = np.max(x)
    return x - m - np.log(np.sum(np.exp(x - m)))


def log_softmax_softmax_only(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return np.exp(shifted) / np.sum(np.exp(shifted), axis=axis, keepdims=True)


def log_softmax_no_normaliser(x, axis=-1):
    return x - np.max(x, axis=axis, keepdims=True)


def log_softmax_forgets_max(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    return x - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def log_softmax_sign_flipped(x, axis=-1):
    return -log_softmax_shifted(x, axis)


def log_softmax_log2(x, axis=-1):
    return log_softmax_shifted(x, axis) / np.log(2.0)


def log_softmax_log10(x, axis=-1):
    return log_softmax_shifted(x, axis) / np.log(10.0)


def log_softmax_in_place(x, axis=-1):
    x -= np.max(x, axis=axis, keepdims=True)
    return x - np.log(np.sum(np.exp(x), axis=axis, keepdims=True))


def log_softmax_flattened(x, axis=-1):
    return log_softmax_shifted(x, axis).reshape(-1)


def log_softmax_keepdims_missing(x, axis=-1):
    m = np.max(x, axis=axis)  # without keepdims=True: (3,) does not broadcast against (3, 5)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis))


def log_softmax_torch(x, axis=-1):
    return torch.log_softmax(torch.from_numpy(np.asarray(x, dtype=np.float64)), dim=axis).numpy()


def log_softmax_course(x, axis=-1):
    return ref.log_softmax(x, axis)


def log_softmax_logsumexp(x, axis=-1):
    t = torch.from_numpy(np.asarray(x, dtype=np.float64))
    return (t - torch.logsumexp(t, dim=axis, keepdim=True)).numpy()


def log_softmax_returns_list(x, axis=-1):
    return log_softmax_shifted(x, axis).tolist()


def log_softmax_returns_none(x, axis=-1):
    log_softmax_shifted(x, axis)


LOG_SOFTMAX_CORRECT = [
    ("subtract the max", log_softmax_shifted),
    ("np.logaddexp.reduce", log_softmax_logaddexp),
    ("explicit loops", log_softmax_loops),
]

LOG_SOFTMAX_MISTAKES = [
    ("log of the softmax", log_softmax_of_softmax, "log(softmax(x)) underflows"),
    ("no max subtracted", log_softmax_unshifted, "subtract the max along the axis"),
    ("ignores the axis argument", log_softmax_ignores_axis, "along axis 1, but this case asks for axis 0"),
    ("normalised over the whole array", log_softmax_whole_array, "over the whole array"),
    ("returns the softmax", log_softmax_softmax_only, "the softmax itself, not its logarithm"),
    ("no log-sum-exp term", log_softmax_no_normaliser, "the log of the normaliser is missing"),
    ("max not subtracted from x", log_softmax_forgets_max, "the max was subtracted inside the sum but not from x"),
    ("sign flipped", log_softmax_sign_flipped, "the sign flipped"),
    ("base-2 log", log_softmax_log2, "a base-2 logarithm"),
    ("base-10 log", log_softmax_log10, "a base-10 logarithm"),
    ("changes x in place", log_softmax_in_place, "changed its input x in place"),
    ("flattened result", log_softmax_flattened, "has shape (15,), expected (3, 5)"),
    ("keepdims missing", log_softmax_keepdims_missing, "operands could not be broadcast"),
    ("calls torch.log_softmax", log_softmax_torch, "calls torch.log_softmax"),
    ("calls the course's version", log_softmax_course, "calls plmcourse.ref.log_softmax"),
    ("calls torch.logsumexp", log_softmax_logsumexp, "calls torch.logsumexp"),
    ("returns a list", log_softmax_returns_list, "expected a NumPy array"),
    ("returns None", log_softmax_returns_none, "returned None"),
]


# ============================================================================
# noise_distribution(counts, power=0.75)


def noise_where(counts, power=0.75):
    counts = np.asarray(counts, dtype=np.float64)
    weights = np.where(counts > 0, counts ** power, 0.0)
    return weights / weights.sum()


def noise_masked(counts, power=0.75):
    counts = np.asarray(counts, dtype=np.float64)
    weights = np.zeros_like(counts)
    seen = counts > 0
    weights[seen] = counts[seen] ** power
    return weights / np.sum(weights)


def noise_loop(counts, power=0.75):
    weights = [float(c) ** power if c > 0 else 0.0 for c in counts]
    total = sum(weights)
    return np.array([w / total for w in weights])


def noise_raw_unigram(counts, power=0.75):
    counts = np.asarray(counts, dtype=np.float64)
    return counts / counts.sum()


def noise_not_normalised(counts, power=0.75):
    return np.where(counts > 0, np.asarray(counts, dtype=np.float64) ** power, 0.0)


def noise_power_of_probabilities(counts, power=0.75):
    counts = np.asarray(counts, dtype=np.float64)
    return (counts / counts.sum()) ** power


def noise_zero_power_trap(counts, power=0.75):
    weights = np.asarray(counts, dtype=np.float64) ** power  # 0**0 = 1: unseen words get mass at power 0
    return weights / weights.sum()


def noise_zeroed_after_normalising(counts, power=0.75):
    counts = np.asarray(counts, dtype=np.float64)
    weights = counts ** power
    return np.where(counts > 0, weights / weights.sum(), 0.0)  # the sum still held 0**0 = 1


def noise_log_space(counts, power=0.75):
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.exp(power * np.log(np.asarray(counts, dtype=np.float64)))  # 0 * -inf = NaN at power 0
    return weights / weights.sum()


def noise_fixed_power(counts, power=0.75):
    return noise_where(counts, 0.75)


def noise_uniform(counts, power=0.75):
    return np.full(len(counts), 1.0 / len(counts))


def noise_integer(counts, power=0.75):
    return np.asarray(counts) // 1


def noise_course(counts, power=0.75):
    return ref.noise_distribution(counts, power)


NOISE_CORRECT = [
    ("np.where", noise_where),
    ("boolean mask", noise_masked),
    ("Python loop", noise_loop),
]

NOISE_MISTAKES = [
    ("raw unigram distribution", noise_raw_unigram, "the raw unigram distribution"),
    ("not normalised", noise_not_normalised, "without dividing by the sum"),
    ("power of the probabilities", noise_power_of_probabilities, "raised to the power but not renormalised"),
    ("0**0 = 1 for unseen words", noise_zero_power_trap, "0**0 is 1 in NumPy"),
    ("power argument ignored", noise_fixed_power, "use the power argument"),
    ("zeroed after normalising", noise_zeroed_after_normalising, "give them weight 0 before normalising"),
    ("power in log space", noise_log_space, "computed as exp(power * log(count))"),
    ("uniform", noise_uniform, "a uniform distribution over the vocabulary"),
    ("integer result", noise_integer, "expected floating point"),
    ("calls the course's version", noise_course, "calls plmcourse.ref.noise_distribution"),
]


# ============================================================================
# skipgram_negative_sampling_loss(center_vecs, context_vecs, negative_vecs)


def _parts(c, o, n):
    return np.sum(c * o, axis=-1), np.einsum("bkd,bd->bk", n, c)


def _sig(x):
    return np.exp(-np.logaddexp(0.0, -x))


def sgns_einsum(c, o, n):
    B = c.shape[0]
    pos, neg = _parts(c, o, n)
    loss = (np.logaddexp(0.0, -pos).sum() + np.logaddexp(0.0, neg).sum()) / B
    g_pos, g_neg = (_sig(pos) - 1) / B, _sig(neg) / B
    return (loss, g_pos[:, None] * o + np.einsum("bk,bkd->bd", g_neg, n), g_pos[:, None] * c,
            g_neg[:, :, None] * c[:, None, :])


def sgns_matmul(c, o, n):
    B = c.shape[0]
    pos = (c * o).sum(axis=1)
    neg = (n @ c[:, :, None])[:, :, 0]  # (B, K)
    loss = np.mean(np.logaddexp(0.0, -pos) + np.logaddexp(0.0, neg).sum(axis=1))
    sig_pos = np.where(pos >= 0, 1 / (1 + np.exp(-np.abs(pos))), np.exp(-np.abs(pos)) / (1 + np.exp(-np.abs(pos))))
    sig_neg = np.where(neg >= 0, 1 / (1 + np.exp(-np.abs(neg))), np.exp(-np.abs(neg)) / (1 + np.exp(-np.abs(neg))))
    grad_center = ((sig_pos - 1)[:, None] * o + (sig_neg[:, None, :] @ n)[:, 0, :]) / B
    return float(loss), grad_center, (sig_pos - 1)[:, None] * c / B, sig_neg[:, :, None] * c[:, None, :] / B


def sgns_loops(c, o, n):
    B, K, d = n.shape
    loss = 0.0
    gc, go, gn = np.zeros_like(c), np.zeros_like(o), np.zeros_like(n)
    for b in range(B):
        s = float(c[b] @ o[b])
        loss += np.logaddexp(0.0, -s)
        go[b] = (_sig(s) - 1) * c[b]
        gc[b] += (_sig(s) - 1) * o[b]
        for k in range(K):
            s_k = float(c[b] @ n[b, k])
            loss += np.logaddexp(0.0, s_k)
            gn[b, k] = _sig(s_k) * c[b]
            gc[b] += _sig(s_k) * n[b, k]
    return loss / B, gc / B, go / B, gn / B


def _replace(result, index, value):
    result = list(result)
    result[index] = value
    return tuple(result)


def sgns_negative_sign(c, o, n):
    B = c.shape[0]
    pos, neg = _parts(c, o, n)
    loss = (np.logaddexp(0.0, -pos).sum() + np.logaddexp(0.0, -neg).sum()) / B  # -log sigma(+c.n)
    return _replace(sgns_einsum(c, o, n), 0, loss)


def sgns_no_sigmoid(c, o, n):
    pos, neg = _parts(c, o, n)
    return _replace(sgns_einsum(c, o, n), 0, (-pos.sum() + neg.sum()) / c.shape[0])


def sgns_sigmoid_no_log(c, o, n):
    pos, neg = _parts(c, o, n)
    return _replace(sgns_einsum(c, o, n), 0, (-_sig(pos).sum() - _sig(-neg).sum()) / c.shape[0])


def sgns_sum_over_batch(c, o, n):
    result = sgns_einsum(c, o, n)
    return _replace(result, 0, result[0] * c.shape[0])


def sgns_mean_over_negatives(c, o, n):
    B, K = n.shape[:2]
    pos, neg = _parts(c, o, n)
    loss = (np.logaddexp(0.0, -pos).sum() + np.logaddexp(0.0, neg).sum() / K) / B
    return _replace(sgns_einsum(c, o, n), 0, loss)


def sgns_positive_only(c, o, n):
    pos, _ = _parts(c, o, n)
    return _replace(sgns_einsum(c, o, n), 0, np.logaddexp(0.0, -pos).sum() / c.shape[0])


def sgns_log_likelihood(c, o, n):
    result = sgns_einsum(c, o, n)
    return _replace(result, 0, -result[0])


def sgns_negatives_against_context(c, o, n):
    B = c.shape[0]
    pos = np.sum(c * o, axis=-1)
    neg = np.einsum("bkd,bd->bk", n, o)
    return _replace(sgns_einsum(c, o, n), 0, (np.logaddexp(0.0, -pos).sum() + np.logaddexp(0.0, neg).sum()) / B)


def sgns_mean_of_all_terms(c, o, n):
    B, K = n.shape[:2]
    result = sgns_einsum(c, o, n)
    return _replace(result, 0, result[0] * B / (B * (K + 1)))


def sgns_loss_per_pair(c, o, n):
    pos, neg = _parts(c, o, n)
    return _replace(sgns_einsum(c, o, n), 0, np.logaddexp(0.0, -pos) + np.logaddexp(0.0, neg).sum(axis=1))


def sgns_naive_log_sigmoid(c, o, n):
    B = c.shape[0]
    pos, neg = _parts(c, o, n)
    with np.errstate(over="ignore", divide="ignore"):
        loss = -(np.log(1 / (1 + np.exp(-pos))).sum() + np.log(1 / (1 + np.exp(neg))).sum()) / B
    return _replace(sgns_einsum(c, o, n), 0, loss)


def sgns_grads_of_sum(c, o, n):
    B = c.shape[0]
    loss, gc, go, gn = sgns_einsum(c, o, n)
    return loss, gc * B, go * B, gn * B


def sgns_center_missing_negatives(c, o, n):
    B = c.shape[0]
    pos, _ = _parts(c, o, n)
    return _replace(sgns_einsum(c, o, n), 1, ((_sig(pos) - 1) / B)[:, None] * o)


def sgns_center_missing_positive(c, o, n):
    B = c.shape[0]
    _, neg = _parts(c, o, n)
    return _replace(sgns_einsum(c, o, n), 1, np.einsum("bk,bkd->bd", _sig(neg) / B, n))


def sgns_positive_derivative_sign(c, o, n):
    B = c.shape[0]
    pos, _ = _parts(c, o, n)
    return _replace(sgns_einsum(c, o, n), 2, (_sig(pos) / B)[:, None] * c)  # sigma(s) instead of sigma(s) - 1


def sgns_negative_derivative(c, o, n):
    B = c.shape[0]
    _, neg = _parts(c, o, n)
    return _replace(sgns_einsum(c, o, n), 3, ((1 - _sig(neg)) / B)[:, :, None] * c[:, None, :])


def _score_grads(c, o, n):
    """dL/d(c·o) and dL/d(c·n_k), the factors of every gradient."""
    pos, neg = _parts(c, o, n)
    return (_sig(pos) - 1) / c.shape[0], _sig(neg) / c.shape[0]


def sgns_negative_derivative_as_positive(c, o, n):
    g_pos, g_neg = _score_grads(c, o, n)
    g_neg = g_neg - 1 / c.shape[0]  # sigma(s) - 1 for the negatives too
    result = _replace(sgns_einsum(c, o, n), 1, g_pos[:, None] * o + np.einsum("bk,bkd->bd", g_neg, n))
    return _replace(result, 3, g_neg[:, :, None] * c[:, None, :])


def sgns_context_times_context(c, o, n):
    return _replace(sgns_einsum(c, o, n), 2, _score_grads(c, o, n)[0][:, None] * o)  # times o, not c


def sgns_negatives_times_negatives(c, o, n):
    return _replace(sgns_einsum(c, o, n), 3, _score_grads(c, o, n)[1][:, :, None] * n)  # times n_k, not c


def sgns_gradients_ascent(c, o, n):
    loss, gc, go, gn = sgns_einsum(c, o, n)
    return loss, gc, -go, gn


def sgns_swapped_gradients(c, o, n):
    loss, gc, go, gn = sgns_einsum(c, o, n)
    return loss, go, gc, gn


def sgns_negatives_summed(c, o, n):
    loss, gc, go, gn = sgns_einsum(c, o, n)
    return loss, gc, go, gn.sum(axis=1)


def sgns_three_items(c, o, n):
    loss, gc, go, gn = sgns_einsum(c, o, n)
    return loss, (gc, go, gn)


def sgns_torch_loss(c, o, n):
    loss, gc, go, gn = sgns_einsum(c, o, n)
    return torch.tensor(loss), gc, go, gn


def sgns_autograd(c, o, n):
    tensors = [torch.tensor(a, requires_grad=True) for a in (c, o, n)]
    ct, ot, nt = tensors
    loss = -(F.logsigmoid((ct * ot).sum(-1)).sum()
             + F.logsigmoid(-torch.einsum("bkd,bd->bk", nt, ct)).sum()) / c.shape[0]
    loss.backward()
    return loss.item(), *(t.grad.numpy() for t in tensors)


def sgns_autograd_grad(c, o, n):
    tensors = [torch.tensor(a, requires_grad=True) for a in (c, o, n)]
    ct, ot, nt = tensors
    loss = -(F.logsigmoid((ct * ot).sum(-1)).sum()
             + F.logsigmoid(-torch.einsum("bkd,bd->bk", nt, ct)).sum()) / c.shape[0]
    return loss.item(), *(g.numpy() for g in torch.autograd.grad(loss, tensors))


def sgns_course(c, o, n):
    return ref.skipgram_negative_sampling_loss(c, o, n)


def sgns_finite_differences(c, o, n):
    loss = sgns_einsum(c, o, n)[0]
    grads = [ref.numerical_gradient(lambda x: sgns_einsum(x, o, n)[0], c),
             ref.numerical_gradient(lambda x: sgns_einsum(c, x, n)[0], o),
             ref.numerical_gradient(lambda x: sgns_einsum(c, o, x)[0], n)]
    return loss, *grads


SGNS_CORRECT = [
    ("einsum", sgns_einsum),
    ("matmul with a piecewise sigmoid", sgns_matmul),
    ("explicit loops", sgns_loops),
]

SGNS_MISTAKES = [
    ("sign of the negative term", sgns_negative_sign, "the negative term with the wrong sign"),
    ("missing sigmoid", sgns_no_sigmoid, "no sigmoid"),
    ("sigmoid without the log", sgns_sigmoid_no_log, "σ without the log"),
    ("sum over the batch", sgns_sum_over_batch, "the sum over the batch instead of the mean"),
    ("mean over the negatives", sgns_mean_over_negatives, "averaged over K instead of summed"),
    ("positive term only", sgns_positive_only, "the positive term only"),
    ("log-likelihood, not loss", sgns_log_likelihood, "the minus sign is missing"),
    ("negatives scored against the context", sgns_negatives_against_context,
     "scored against the context vector o instead of the center vector c"),
    ("mean over all terms", sgns_mean_of_all_terms, "the mean over all B·(K+1) terms"),
    ("loss per pair", sgns_loss_per_pair, "(one per pair: take the mean over the batch)"),
    ("naive log sigmoid", sgns_naive_log_sigmoid, "compute it as -np.logaddexp(0, -x)"),
    ("gradients of the sum", sgns_grads_of_sum, "the gradient of the sum over the batch, not of the mean"),
    ("grad_center without the negatives", sgns_center_missing_negatives, "only the observed pair's part"),
    ("grad_center without the pair", sgns_center_missing_positive, "only the negatives' part"),
    ("derivative of -log sigma(s) as sigma(s)", sgns_positive_derivative_sign,
     "σ(c·o) c instead of (σ(c·o) - 1) c"),
    ("derivative of -log sigma(-s) as 1 - sigma(s)", sgns_negative_derivative,
     "(1 - σ(c·n_k)) c instead of σ(c·n_k) c"),
    ("derivative of -log sigma(-s) as sigma(s) - 1", sgns_negative_derivative_as_positive,
     "(σ(c·n_k) - 1) n_k instead of σ(c·n_k) n_k"),
    ("grad_context times o", sgns_context_times_context, "(σ(c·o) - 1) o instead of (σ(c·o) - 1) c"),
    ("grad_negatives times n_k", sgns_negatives_times_negatives, "σ(c·n_k) n_k instead of σ(c·n_k) c"),
    ("grad_context with the wrong sign", sgns_gradients_ascent, "the gradient with the wrong sign"),
    ("gradients swapped", sgns_swapped_gradients, "grad_center and grad_context are swapped"),
    ("negatives' gradients summed over K", sgns_negatives_summed, "each of the K negative vectors"),
    ("three items returned", sgns_three_items, "expected the four items"),
    ("loss as a torch tensor", sgns_torch_loss, "this exercise is NumPy"),
    ("autograd backward", sgns_autograd, "calls torch autograd (torch.Tensor.backward)"),
    ("autograd grad", sgns_autograd_grad, "calls torch autograd (torch.autograd.grad)"),
    ("calls the course's version", sgns_course, "calls plmcourse.ref.skipgram_negative_sampling_loss"),
    ("finite differences as gradients", sgns_finite_differences, "calls plmcourse.ref.numerical_gradient"),
]


CATALOGUE = {
    "check_log_softmax": (LOG_SOFTMAX_CORRECT, LOG_SOFTMAX_MISTAKES),
    "check_noise_distribution": (NOISE_CORRECT, NOISE_MISTAKES),
    "check_skipgram_negative_sampling_loss": (SGNS_CORRECT, SGNS_MISTAKES),
}
