"""Right and wrong answers to the mean-pooling exercise of notebook 07 and to the three
exercises of notebook 08 (anisotropy, whitening, info_nce_loss), as data for
tests/test_grading_sentence_embeddings.py.

CORRECT: (name, function) pairs that must pass, written in different styles; MISTAKES:
(name, function, fragment): the check must fail with a message containing `fragment`.
Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse import ref
from mistake_catalogue.fresh_round3 import info_nce_hard_negative_own_row


# ============================================================================
# Correct, in several styles


def pool_masked_fill(hidden, mask):
    real = mask.bool()
    total = hidden.masked_fill(~real.unsqueeze(-1), 0.0).sum(dim=1)
    count = real.sum(dim=1, keepdim=True).clamp(min=1)
    return total / count.to(hidden.dtype)


def pool_where(hidden, mask):
    real = (mask != 0)[..., None]
    zero = torch.zeros((), dtype=hidden.dtype, device=hidden.device)
    return torch.where(real, hidden, zero).sum(1) / torch.clamp(real.sum(1), min=1)


def pool_einsum(hidden, mask):
    real = mask.bool()
    weights = real.to(hidden.dtype)
    clean = torch.where(real[..., None], hidden, torch.zeros_like(hidden))
    return torch.einsum("btd,bt->bd", clean, weights) / weights.sum(-1, keepdim=True).clamp(min=1.0)


def pool_rows(hidden, mask):
    """A loop over the sentences; a sentence with no real token gets a fresh zero vector."""
    rows = []
    for vectors, row_mask in zip(hidden, mask):
        real = vectors[row_mask.bool()]
        rows.append(real.mean(dim=0) if len(real) else hidden.new_zeros(hidden.shape[-1]))
    return torch.stack(rows)


def pool_bmm(hidden, mask):
    real = mask.bool()
    clean = hidden.masked_fill(~real[..., None], 0)
    weights = real.to(hidden.dtype).unsqueeze(1)                 # (B, 1, T)
    count = real.sum(-1, keepdim=True).clamp(min=1)              # (B, 1)
    return torch.bmm(weights, clean).squeeze(1) / count


def pool_nan_to_num(hidden, mask):
    weights = (mask != 0).to(hidden.dtype).unsqueeze(-1)      # nonzero: a real token, whatever its value
    total = (torch.nan_to_num(hidden) * weights).sum(1)          # finite * 0 = 0
    return total / weights.sum(1).clamp(min=1)


MEAN_POOL_CORRECT = [
    ("masked_fill then sum", pool_masked_fill),
    ("torch.where", pool_where),
    ("einsum", pool_einsum),
    ("loop over rows", pool_rows),
    ("bmm", pool_bmm),
    ("nan_to_num then multiply", pool_nan_to_num),
]


# ============================================================================
# Mistakes


def _clean(hidden, mask):
    return torch.where(mask.bool()[..., None], hidden, torch.zeros_like(hidden))


def _count(mask, dtype):
    return mask.bool().sum(1, keepdim=True).clamp(min=1).to(dtype)


def pool_padding_counted(hidden, mask):
    return hidden.sum(1) / _count(mask, hidden.dtype)


def pool_mask_ignored(hidden, mask):
    return hidden.mean(dim=1)


def pool_divides_by_T(hidden, mask):
    return _clean(hidden, mask).sum(1) / hidden.shape[1]


def pool_sum(hidden, mask):
    return _clean(hidden, mask).sum(1)


def pool_nan_for_empty_row(hidden, mask):
    real = mask.bool()
    return _clean(hidden, mask).sum(1) / real.sum(1, keepdim=True)


def pool_nan_gradient_for_empty_row(hidden, mask):
    """Replaces the NaN of 0 / 0 after dividing: the forward pass is right, the backward pass still divides by 0."""
    weights = mask.to(hidden.dtype).unsqueeze(-1)
    return torch.nan_to_num((hidden * weights).sum(1) / weights.sum(1), nan=0.0)


def pool_where_after_dividing(hidden, mask):
    weights = mask.to(hidden.dtype).unsqueeze(-1)
    count = weights.sum(1)
    return torch.where(count > 0, (hidden * weights).sum(1) / count, torch.zeros((), dtype=hidden.dtype))


def pool_wrong_axis(hidden, mask):
    weights = mask.to(hidden.dtype).unsqueeze(-1)
    return (torch.nan_to_num(hidden) * weights).mean(dim=-1)


def pool_keepdim(hidden, mask):
    real = mask.bool().unsqueeze(-1)
    return _clean(hidden, mask).sum(1, keepdim=True) / real.sum(1, keepdim=True).clamp(min=1)


def pool_mask_float(hidden, mask):
    """einsum needs one dtype: everything cast to float32, whatever hidden's dtype."""
    weights = mask.float()
    return torch.einsum("btd,bt->bd", _clean(hidden, mask).float(), weights) / weights.sum(1, keepdim=True).clamp(min=1)


def pool_mask_double(hidden, mask):
    weights = mask.double().unsqueeze(-1)
    return (_clean(hidden, mask) * weights).sum(1) / weights.sum(1).clamp(min=1)


def pool_zeros_without_dtype(hidden, mask):
    out = torch.zeros(hidden.shape[0], hidden.shape[-1])       # float32, on the CPU
    for b in range(hidden.shape[0]):
        real = hidden[b][mask[b].bool()]
        if len(real):
            out[b] = real.mean(0)
    return out


def pool_in_place(hidden, mask):
    hidden.masked_fill_(~mask.bool().unsqueeze(-1), 0.0)
    return hidden.sum(1) / _count(mask, hidden.dtype)


def pool_in_place_no_grad(hidden, mask):
    with torch.no_grad():
        hidden[~mask.bool()] = 0.0
    return hidden.sum(1) / _count(mask, hidden.dtype)


def pool_mask_unsqueezed_in_place(hidden, mask):
    mask.unsqueeze_(-1)
    weights = (mask != 0).to(hidden.dtype)
    return (_clean(hidden, mask[..., 0]) * weights).sum(1) / weights.sum(1).clamp(min=1)


def pool_multiplies_nan_by_zero(hidden, mask):
    weights = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)


def pool_mask_as_weights(hidden, mask):
    """Multiplies by the mask and divides by its sum: right for a 0/1 mask only."""
    weights = mask.to(hidden.dtype).unsqueeze(-1)
    return (_clean(hidden, mask) * weights).sum(1) / weights.sum(1).clamp(min=1)


def pool_mask_positive_only(hidden, mask):
    """Real tokens taken as mask > 0: a -1 in the mask is read as padding."""
    return pool_masked_fill(hidden, mask > 0)


def pool_inverted(hidden, mask):
    return pool_masked_fill(hidden, ~mask.bool())


def pool_cls(hidden, mask):
    return hidden[:, 0]


def pool_max(hidden, mask):
    return hidden.masked_fill(~mask.bool()[..., None], float("-inf")).max(dim=1).values


def pool_prefix(hidden, mask):
    """Counts the real tokens and averages the first that many, as if the mask were a prefix."""
    counts = mask.bool().sum(1).clamp(min=1)
    return torch.stack([hidden[b, :int(n)].mean(0) for b, n in enumerate(counts)])


def pool_mask_not_unsqueezed(hidden, mask):
    weights = mask.to(hidden.dtype)
    return (_clean(hidden, mask) * weights).sum(1) / weights.sum(1, keepdim=True).clamp(min=1)


def pool_where_with_raw_mask(hidden, mask):
    return torch.where(mask[..., None], hidden, 0.0).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)


def pool_detached(hidden, mask):
    return pool_masked_fill(hidden.detach(), mask)


def pool_numpy(hidden, mask):
    h = hidden.detach().cpu().numpy()
    m = mask.detach().cpu().numpy().astype(bool)
    clean = np.where(m[..., None], h, 0.0)
    return torch.from_numpy(clean.sum(1) / np.maximum(m.sum(1, keepdims=True), 1)).to(hidden.dtype)


def pool_returns_numpy(hidden, mask):
    return pool_numpy(hidden, mask).numpy()


def pool_course_nn(hidden, mask):
    return pnn.mean_pool(hidden, mask)


def pool_course_ref(hidden, mask):
    h = hidden.detach().numpy()
    return torch.from_numpy(ref.mean_pool(np.where(mask.numpy()[..., None] != 0, h, 0.0), mask.numpy()))


MEAN_POOL_MISTAKES = [
    ("padding counted in the mean", pool_padding_counted, "the padding vectors summed in"),
    ("mask ignored", pool_mask_ignored, "the mask ignored: a plain mean over all T positions"),
    ("dividing by the padded length T", pool_divides_by_T, "divided by T (the padded length)"),
    ("sum instead of mean", pool_sum, "the sum of the real tokens without dividing"),
    ("NaN for a row with no real token", pool_nan_for_empty_row, "a row with no real token gave NaN"),
    ("NaN gradient for a row with no real token (nan_to_num)", pool_nan_gradient_for_empty_row,
     "the gradient with respect to hidden is NaN for a row with no real token"),
    ("NaN gradient for a row with no real token (torch.where)", pool_where_after_dividing,
     "the gradient with respect to hidden is NaN for a row with no real token"),
    ("wrong axis (mean over d)", pool_wrong_axis, "an average over the features, dim=-1"),
    ("keepdim=True", pool_keepdim, "keepdim=True leaves the token axis in"),
    ("mask cast to float32 (float32 result for float64 input)", pool_mask_float,
     "dtype torch.float32, expected torch.float64 like hidden"),
    ("mask cast to float64 (float64 result for float32 input)", pool_mask_double,
     "dtype torch.float64, expected torch.float32 like hidden"),
    ("accumulator made with torch.zeros without a dtype", pool_zeros_without_dtype,
     "dtype torch.float32, expected torch.float64 like hidden"),
    ("in-place modification of the input", pool_in_place, "do not modify hidden in place"),
    ("in-place modification of the input under no_grad", pool_in_place_no_grad, "changed its input hidden in place"),
    ("mask unsqueezed in place", pool_mask_unsqueezed_in_place, "changed its input mask in place"),
    ("NaN leaking from padded positions (NaN * 0)", pool_multiplies_nan_by_zero, "NaN * 0 is NaN"),
    ("mask values used as weights", pool_mask_as_weights, "the mask used as weights"),
    ("only positive mask values real", pool_mask_positive_only, "only positive mask values counted as real"),
    ("mask inverted", pool_inverted, "the mask inverted"),
    ("[CLS] vector", pool_cls, "the first token's vector ([CLS] pooling)"),
    ("max pooling", pool_max, "the max over the real tokens instead of their mean"),
    ("mask treated as a prefix", pool_prefix, "as if the mask were a prefix of real tokens"),
    ("mask not unsqueezed", pool_mask_not_unsqueezed, "add a feature axis"),
    ("torch.where with an integer mask", pool_where_with_raw_mask, "make it boolean first with mask.bool()"),
    ("gradient cut by .detach()", pool_detached, "gradients do not flow to hidden"),
    ("computed in NumPy", pool_numpy, "gradients do not flow to hidden"),
    ("returns a NumPy array", pool_returns_numpy, "expected a torch.Tensor"),
    ("calls the course's torch version", pool_course_nn, "calls plmcourse.nn.mean_pool; write it yourself"),
    ("calls the course's NumPy version", pool_course_ref, "calls plmcourse.ref.mean_pool; write it yourself"),
]


# ============================================================================
# anisotropy(X), NumPy


def _unit_rows(X):
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms > 0, norms, 1.0)


def aniso_masked_diagonal(X):
    X = np.asarray(X, dtype=np.float64)
    unit = _unit_rows(X)
    cos = unit @ unit.T
    return float(cos[~np.eye(len(X), dtype=bool)].mean())


def aniso_loop(X):
    """A loop over the rows: each row's cosines with the others."""
    X = np.asarray(X, dtype=np.float64)
    n = len(X)
    unit = _unit_rows(X)
    total = 0.0
    for i in range(n):
        cosines = unit @ unit[i]
        total += cosines.sum() - cosines[i]
    return total / (n * (n - 1))


def aniso_einsum(X):
    X = X.astype(np.float64)
    norms = np.sqrt(np.einsum("id,id->i", X, X))
    safe = np.where(norms == 0, 1.0, norms)
    cos = np.einsum("id,jd->ij", X / safe[:, None], X / safe[:, None])
    n = X.shape[0]
    return (np.sum(cos) - np.trace(cos)) / (n * (n - 1))


def aniso_sum_vector(X):
    """O(n d): the sum of all cosines is |sum of the unit rows|^2; the diagonal holds 1 per non-zero row."""
    X = np.asarray(X, dtype=np.float64)
    n = len(X)
    norms = np.linalg.norm(X, axis=1)
    unit = X[norms > 0] / norms[norms > 0, None]
    s = unit.sum(axis=0)
    return float((s @ s - np.sum(unit * unit)) / (n * (n - 1)))


def aniso_upper_triangle(X):
    """The mean over i < j: the same as over all ordered pairs, the cosine being symmetric."""
    X = np.asarray(X, dtype=np.float64)
    unit = _unit_rows(X)
    i, j = np.triu_indices(len(X), k=1)
    return np.mean(np.sum(unit[i] * unit[j], axis=1))


def aniso_input_dtype(X):
    """Computes in X's own dtype: float32 for float32 input, which its tolerance allows."""
    norms = np.linalg.norm(X, axis=-1, keepdims=True)
    unit = np.divide(X, norms, out=np.zeros_like(X), where=norms > 0)
    n = len(X)
    cos = unit @ unit.T
    np.fill_diagonal(cos, 0)
    return cos.sum() / (n * (n - 1))


ANISOTROPY_CORRECT = [
    ("cosine matrix, diagonal masked", aniso_masked_diagonal),
    ("loop over rows", aniso_loop),
    ("einsum", aniso_einsum),
    ("sum of the unit vectors", aniso_sum_vector),
    ("upper triangle i < j", aniso_upper_triangle),
    ("in the input's dtype", aniso_input_dtype),
]


def _cos(X):
    unit = _unit_rows(np.asarray(X, dtype=np.float64))
    return unit @ unit.T


def aniso_diagonal_counted(X):
    return float(_cos(X).mean())


def aniso_no_normalisation(X):
    G = X @ X.T
    n = len(X)
    return float((G.sum() - np.trace(G)) / (n * (n - 1)))


def aniso_absolute(X):
    cos = np.abs(_cos(X))
    n = len(X)
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))


def aniso_over_n_squared(X):
    cos = _cos(X)
    return float((cos.sum() - np.trace(cos)) / len(X) ** 2)


def aniso_half(X):
    cos = _cos(X)
    n = len(X)
    i, j = np.triu_indices(n, k=1)
    return float(cos[i, j].sum() / (n * (n - 1)))


def aniso_triu_with_diagonal(X):
    cos = _cos(X)
    return float(cos[np.triu_indices(len(X))].mean())


def aniso_nan_for_zero_row(X):
    X = np.asarray(X, dtype=np.float64)
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    cos = unit @ unit.T
    n = len(X)
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))


def aniso_subtracts_n(X):
    cos = _cos(X)
    n = len(X)
    return float((cos.sum() - n) / (n * (n - 1)))


def aniso_drops_zero_rows(X):
    X = np.asarray(X, dtype=np.float64)
    return aniso_masked_diagonal(X[np.linalg.norm(X, axis=1) > 0])


def aniso_columns_normalised(X):
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(X, axis=0, keepdims=True)
    unit = X / np.where(norms > 0, norms, 1.0)
    cos = unit @ unit.T
    n = len(X)
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))


def aniso_no_keepdims(X):
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(X, axis=1)
    cos = (X / np.where(norms > 0, norms, 1.0)) @ (X / np.where(norms > 0, norms, 1.0)).T
    n = len(X)
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))


def aniso_matrix(X):
    return _cos(X)


def aniso_float32(X):
    X = np.asarray(X, dtype=np.float32)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    unit = X / np.where(norms > 0, norms, np.float32(1))
    cos = unit @ unit.T
    n = len(X)
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))


def aniso_product_of_squared_norms(X):
    """cos = G / sqrt(|x_i|^2 |x_j|^2), guarded against zero rows: the product overflows or underflows."""
    X = np.asarray(X, dtype=np.float64)
    G = X @ X.T
    squared = np.sum(X * X, axis=1)
    with np.errstate(over="ignore", under="ignore"):
        denominator = np.sqrt(np.outer(squared, squared))
    cos = np.divide(G, denominator, out=np.zeros_like(G), where=denominator > 0)
    n = len(X)
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))


def aniso_product_of_norms(X):
    """cos = G / (|x_i| |x_j|): right down to 1e-150, but the product of two norms of 1e-159 is subnormal."""
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(X, axis=1)
    denominator = np.outer(norms, norms)
    cos = np.divide(X @ X.T, denominator, out=np.zeros((len(X), len(X))), where=denominator > 0)
    n = len(X)
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))


def aniso_eps(X):
    X = np.asarray(X, dtype=np.float64)
    unit = X / (np.linalg.norm(X, axis=1, keepdims=True) + 1e-8)
    cos = unit @ unit.T
    n = len(X)
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))


def aniso_in_place(X):
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    X /= np.where(norms > 0, norms, 1.0)
    cos = X @ X.T
    n = len(X)
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))


def aniso_cosine_distance(X):
    cos = 1.0 - _cos(X)
    n = len(X)
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))


def aniso_torch(X):
    t = F.normalize(torch.from_numpy(np.asarray(X, dtype=np.float64)), dim=-1)
    cos = t @ t.T
    n = len(X)
    return (cos.sum() - cos.trace()) / (n * (n - 1))


def aniso_course_ref(X):
    return ref.anisotropy(X)


def aniso_course_nn(X):
    return pnn.anisotropy(torch.from_numpy(np.asarray(X, dtype=np.float64)))


def aniso_course_cosine_matrix(X):
    cos = ref.cosine_matrix(X)
    n = len(X)
    return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))


ANISOTROPY_MISTAKES = [
    ("diagonal counted", aniso_diagonal_counted, "the diagonal counted"),
    ("no normalisation (mean dot product)", aniso_no_normalisation, "the mean dot product"),
    ("absolute cosines", aniso_absolute, "the mean of the absolute values of the cosines"),
    ("off-diagonal sum divided by n^2", aniso_over_n_squared, "divided by n² instead of by n(n-1)"),
    ("pairs i < j divided by n(n-1)", aniso_half, "half the value"),
    ("upper triangle with the diagonal", aniso_triu_with_diagonal, "np.triu_indices(n, k=1)"),
    ("NaN for a zero row", aniso_nan_for_zero_row, "dividing it by its norm is 0 / 0"),
    ("diagonal removed as n", aniso_subtracts_n, "subtract the trace"),
    ("zero rows dropped", aniso_drops_zero_rows, "the pairs with a zero row left out"),
    ("rows normalised along the wrong axis", aniso_columns_normalised, "the columns normalised"),
    ("norms without keepdims", aniso_no_keepdims, "keep the axis (keepdims=True"),
    ("returns the cosine matrix", aniso_matrix, "the matrix of cosines; return one number"),
    ("float32 arithmetic for float64 input", aniso_float32, "which is the size of float32 rounding"),
    ("product of squared norms overflows", aniso_product_of_squared_norms, "an overflow"),
    ("product of norms underflows", aniso_product_of_norms, "a product of two norms (about 1e-318)"),
    ("eps added to the norm", aniso_eps, "an eps added to each norm (norm + 1e-08)"),
    ("normalises X in place", aniso_in_place, "changed its input X in place"),
    ("cosine distance", aniso_cosine_distance, "the mean cosine distance"),
    ("returns a torch tensor", aniso_torch, "expected a number: this exercise is NumPy"),
    ("calls the course's NumPy version", aniso_course_ref, "calls plmcourse.ref.anisotropy; write it yourself"),
    ("calls the course's torch version", aniso_course_nn, "calls plmcourse.nn.anisotropy; write it yourself"),
    ("calls the course's cosine matrix", aniso_course_cosine_matrix, "calls plmcourse.ref.cosine_matrix"),
]


# ============================================================================
# whitening(X, k=None) -> (mu, W), NumPy


def white_svd(X, k=None):
    X = np.asarray(X, dtype=np.float64)
    k = X.shape[1] if k is None else k
    mu = X.mean(axis=0)
    U, s, _ = np.linalg.svd(np.atleast_2d(np.cov(X.T)))
    return mu, U[:, :k] / np.sqrt(s[:k])


def white_eigh(X, k=None):
    """np.linalg.eigh (ascending) re-sorted, largest first; each column's sign fixed (largest entry positive)."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    k = d if k is None else k
    mu = X.mean(axis=0)
    centred = X - mu
    values, vectors = np.linalg.eigh(centred.T @ centred / (n - 1))
    order = np.argsort(values)[::-1][:k]
    vectors = vectors[:, order]
    peaks = vectors[np.argmax(np.abs(vectors), axis=0), np.arange(k)]
    vectors = vectors * np.sign(peaks)
    return mu, vectors / np.sqrt(values[order])


def white_data_svd(X, k=None):
    """The SVD of the centred data: X - mu = A diag(sigma) Vt, and C = V diag(sigma^2 / (n - 1)) Vt."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    k = k or d
    mu = X.mean(0)
    _, sigma, Vt = np.linalg.svd(X - mu, full_matrices=False)
    return mu, Vt[:k].T * (np.sqrt(n - 1) / sigma[:k])


def white_columns_loop(X, k=None):
    X = np.array(X, dtype=np.float64)
    n, d = X.shape
    if k is None:
        k = d
    mu = np.mean(X, axis=0)
    C = np.einsum("ni,nj->ij", X - mu, X - mu) / (n - 1)
    U, s, _ = np.linalg.svd(C)
    W = np.empty((d, k))
    for j in range(k):
        W[:, j] = -U[:, j] / np.sqrt(s[j])  # the opposite sign of each column: just as good
    return mu, W


def white_eig(X, k=None):
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    k = d if k is None else k
    C = np.cov(X, rowvar=False).reshape(d, d)
    values, vectors = np.linalg.eig(C)
    values, vectors = values.real, vectors.real
    order = np.argsort(-values)[:k]
    return X.mean(axis=0), vectors[:, order] @ np.diag(1 / np.sqrt(values[order]))


WHITENING_CORRECT = [
    ("SVD of np.cov", white_svd),
    ("eigh, sorted descending, signs fixed", white_eigh),
    ("SVD of the centred data", white_data_svd),
    ("einsum covariance, columns in a loop, signs flipped", white_columns_loop),
    ("np.linalg.eig, sorted", white_eig),
]


def _white(X, k, covariance=None, transform=None):
    """whitening with the covariance or the final step swapped out, for the mistakes below."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    k = d if k is None else k
    mu = X.mean(axis=0)
    C = np.atleast_2d(np.cov(X.T) if covariance is None else covariance(X, mu))
    U, s, _ = np.linalg.svd(C)
    return mu, (U[:, :k] / np.sqrt(s[:k]) if transform is None else transform(U, s, k))


def white_mean_not_subtracted(X, k=None):
    return _white(X, k, covariance=lambda X, mu: X.T @ X / (len(X) - 1))


def white_mu_zeros(X, k=None):
    mu, W = white_mean_not_subtracted(X, k)
    return np.zeros_like(mu), W


def white_inverse_s(X, k=None):
    return _white(X, k, transform=lambda U, s, k: U[:, :k] / s[:k])


def white_times_sqrt_s(X, k=None):
    return _white(X, k, transform=lambda U, s, k: U[:, :k] * np.sqrt(s[:k]))


def white_not_scaled(X, k=None):
    return _white(X, k, transform=lambda U, s, k: U[:, :k])


def white_U_transposed(X, k=None):
    return _white(X, k, transform=lambda U, s, k: U.T[:, :k] / np.sqrt(s[:k]))


def white_rows_of_U(X, k=None):
    return _white(X, k, transform=lambda U, s, k: U[:k] / np.sqrt(s[:k, None]))


def white_k_ignored(X, k=None):
    return _white(X, None)


def white_ascending(X, k=None):
    X = np.asarray(X, dtype=np.float64)
    k = X.shape[1] if k is None else k
    mu = X.mean(axis=0)
    values, vectors = np.linalg.eigh(np.atleast_2d(np.cov(X.T)))
    return mu, vectors[:, :k] / np.sqrt(values[:k])


def white_ddof0(X, k=None):
    return _white(X, k, covariance=lambda X, mu: np.cov(X.T, bias=True))


def white_data_svd_no_sqrt(X, k=None):
    X = np.asarray(X, dtype=np.float64)
    k = X.shape[1] if k is None else k
    mu = X.mean(axis=0)
    _, sigma, Vt = np.linalg.svd(X - mu, full_matrices=False)
    return mu, Vt[:k].T / sigma[:k]


def white_zca(X, k=None):
    return _white(X, k, transform=lambda U, s, k: (U / np.sqrt(s) @ U.T)[:, :k])


def white_swapped(X, k=None):
    mu, W = white_svd(X, k)
    return W, mu


def white_returns_whitened(X, k=None):
    mu, W = white_svd(X, k)
    return (X - mu) @ W


def white_mu_and_whitened(X, k=None):
    mu, W = white_svd(X, k)
    return mu, (X - mu) @ W


def white_mu_of_rows(X, k=None):
    _, W = white_svd(X, k)
    return X.mean(axis=1), W


def white_cov_of_rows(X, k=None):
    return _white(X, k, covariance=lambda X, mu: np.cov(X))


def white_in_place(X, k=None):
    k = X.shape[1] if k is None else k
    mu = X.mean(axis=0)
    X -= mu
    U, s, _ = np.linalg.svd(np.atleast_2d(X.T @ X / (len(X) - 1)))
    return mu, U[:, :k] / np.sqrt(s[:k])


def white_float32(X, k=None):
    mu, W = white_svd(np.asarray(X, dtype=np.float32), k)
    return mu.astype(np.float32), W.astype(np.float32)


def white_no_atleast_2d(X, k=None):
    X = np.asarray(X, dtype=np.float64)
    k = X.shape[1] if k is None else k
    U, s, _ = np.linalg.svd(np.cov(X.T))
    return X.mean(axis=0), U[:, :k] / np.sqrt(s[:k])


def white_k_none_crash(X, k=None):
    k = min(k, X.shape[1])
    return white_svd(X, k)


def white_course_ref(X, k=None):
    return ref.whitening(X, k) if X.shape[1] > 1 else white_svd(X, k)


WHITENING_MISTAKES = [
    ("mean not subtracted in the covariance", white_mean_not_subtracted, "the mean not subtracted"),
    ("mu returned as zeros", white_mu_zeros, "mu is all zeros"),
    ("1/s instead of 1/sqrt(s)", white_inverse_s, "1 / s instead of 1 / np.sqrt(s)"),
    ("times sqrt(s)", white_times_sqrt_s, "multiplied by np.sqrt(s) instead of divided"),
    ("not scaled", white_not_scaled, "without the scaling"),
    ("U transposed", white_U_transposed, "U transposed: the principal directions are the COLUMNS"),
    ("rows of U", white_rows_of_U, "the ROWS of U scaled"),
    ("k ignored", white_k_ignored, "k was ignored"),
    ("components in ascending order", white_ascending, "ascending order of variance"),
    ("ddof=0", white_ddof0, "a covariance divided by n (ddof=0"),
    ("SVD of the centred data without sqrt(n-1)", white_data_svd_no_sqrt, "the SVD of the centred data used directly"),
    ("ZCA whitening", white_zca, "ZCA whitening"),
    ("(W, mu) in the wrong order", white_swapped, "(W, mu) came back in the wrong order"),
    ("returns the whitened data", white_returns_whitened, "the whitened data (X - mu) @ W"),
    ("returns mu and the whitened data", white_mu_and_whitened, "the whitened data (X - mu) @ W; return W itself"),
    ("mu over the wrong axis", white_mu_of_rows, "mu has shape (50,), expected (4,) (the mean of each row"),
    ("np.cov(X) without transposing", white_cov_of_rows, "np.cov(X) treats each ROW as a variable"),
    ("subtracts the mean in place", white_in_place, "changed its input X in place"),
    ("float32 results", white_float32, "mu has dtype float32, expected float64"),
    ("d = 1 without np.atleast_2d", white_no_atleast_2d, "make it a (1, 1) matrix with np.atleast_2d"),
    ("k=None not handled", white_k_none_crash, "k may be None"),
    ("calls the course's version", white_course_ref, "calls plmcourse.ref.whitening; write it yourself"),
]


# ============================================================================
# info_nce_loss(z1, z2, temperature=0.05, hard_negatives=None), PyTorch


def _candidates(z2, hard_negatives):
    return z2 if hard_negatives is None else torch.cat([z2, hard_negatives], dim=0)


def nce_normalize(z1, z2, temperature=0.05, hard_negatives=None):
    a = F.normalize(z1, dim=1)
    b = F.normalize(_candidates(z2, hard_negatives), dim=1)
    return F.cross_entropy(a @ b.T / temperature, torch.arange(z1.shape[0], device=z1.device))


def nce_cosine_similarity(z1, z2, temperature=0.05, hard_negatives=None):
    candidates = _candidates(z2, hard_negatives)
    logits = F.cosine_similarity(z1[:, None, :], candidates[None, :, :], dim=-1) / temperature
    return F.cross_entropy(logits, torch.arange(len(z1), device=z1.device))


def nce_logsumexp(z1, z2, temperature=0.05, hard_negatives=None):
    """By hand: -l_ii + logsumexp_j l_ij, with norms clamped away from 0."""
    candidates = _candidates(z2, hard_negatives)
    a = z1 / z1.norm(dim=-1, keepdim=True).clamp(min=1e-12)
    b = candidates / candidates.norm(dim=-1, keepdim=True).clamp(min=1e-12)
    logits = torch.einsum("id,jd->ij", a, b) / temperature
    rows = torch.arange(len(z1), device=z1.device)
    return (torch.logsumexp(logits, dim=1) - logits[rows, rows]).mean()


def nce_eps(z1, z2, temperature=0.05, hard_negatives=None):
    """An eps in the denominator: another gradient at an exact zero row, the same elsewhere."""
    candidates = _candidates(z2, hard_negatives)
    a = z1 / (z1.norm(dim=-1, keepdim=True) + 1e-8)
    b = candidates / (candidates.norm(dim=-1, keepdim=True) + 1e-8)
    log_p = torch.log_softmax(a @ b.T / temperature, dim=-1)
    return -log_p.diagonal().mean()


def nce_rows_loop(z1, z2, temperature=0.05, hard_negatives=None):
    candidates = _candidates(z2, hard_negatives)
    b = F.normalize(candidates, dim=-1)
    losses = []
    for i in range(z1.shape[0]):
        logits = F.normalize(z1[i], dim=0) @ b.T / temperature
        losses.append(torch.logsumexp(logits, dim=0) - logits[i])
    return torch.stack(losses).mean()


INFO_NCE_CORRECT = [
    ("F.normalize and cross_entropy", nce_normalize),
    ("F.cosine_similarity, broadcast", nce_cosine_similarity),
    ("logsumexp by hand, einsum", nce_logsumexp),
    ("eps in the denominator, log_softmax", nce_eps),
    ("loop over the rows", nce_rows_loop),
]


def _logits(z1, z2, temperature, hard_negatives):
    return F.normalize(z1, dim=-1) @ F.normalize(_candidates(z2, hard_negatives), dim=-1).T / temperature


def _targets(z1):
    return torch.arange(len(z1), device=z1.device)


def nce_dot_product(z1, z2, temperature=0.05, hard_negatives=None):
    return F.cross_entropy(z1 @ _candidates(z2, hard_negatives).T / temperature, _targets(z1))


def nce_temperature_multiplied(z1, z2, temperature=0.05, hard_negatives=None):
    return F.cross_entropy(_logits(z1, z2, 1.0, hard_negatives) * temperature, _targets(z1))


def nce_temperature_left_out(z1, z2, temperature=0.05, hard_negatives=None):
    return F.cross_entropy(_logits(z1, z2, 1.0, hard_negatives), _targets(z1))


def nce_transposed(z1, z2, temperature=0.05, hard_negatives=None):
    return F.cross_entropy(_logits(z1, z2, temperature, hard_negatives).T, _targets(z1))


def nce_log_softmax_dim0(z1, z2, temperature=0.05, hard_negatives=None):
    return -torch.log_softmax(_logits(z1, z2, temperature, hard_negatives), dim=0).diagonal().mean()


def nce_sum(z1, z2, temperature=0.05, hard_negatives=None):
    return F.cross_entropy(_logits(z1, z2, temperature, hard_negatives), _targets(z1), reduction="sum")


def nce_hard_ignored(z1, z2, temperature=0.05, hard_negatives=None):
    return F.cross_entropy(_logits(z1, z2, temperature, None), _targets(z1))


def nce_hard_with_z1(z1, z2, temperature=0.05, hard_negatives=None):
    queries = z1 if hard_negatives is None else torch.cat([z1, hard_negatives])
    logits = F.normalize(queries, dim=-1) @ F.normalize(z2, dim=-1).T / temperature
    return F.cross_entropy(logits, torch.arange(len(queries), device=z1.device))


def nce_hard_wrong_dim(z1, z2, temperature=0.05, hard_negatives=None):
    candidates = z2 if hard_negatives is None else torch.cat([z2, hard_negatives], dim=1)
    logits = F.normalize(z1, dim=-1) @ F.normalize(candidates, dim=-1).T / temperature
    return F.cross_entropy(logits, _targets(z1))


def nce_nan_for_zero(z1, z2, temperature=0.05, hard_negatives=None):
    candidates = _candidates(z2, hard_negatives)
    logits = (z1 / z1.norm(dim=-1, keepdim=True)) @ (candidates / candidates.norm(dim=-1, keepdim=True)).T
    return F.cross_entropy(logits / temperature, _targets(z1))


def _where_unit(x):
    norms = x.norm(dim=-1, keepdim=True)
    return torch.where(norms > 0, x / norms, torch.zeros_like(x))


def nce_nan_gradient_for_zero(z1, z2, temperature=0.05, hard_negatives=None):
    """torch.where after dividing: the value is right, the backward pass still divides 0 by 0."""
    logits = _where_unit(z1) @ _where_unit(_candidates(z2, hard_negatives)).T / temperature
    return F.cross_entropy(logits, _targets(z1))


def nce_symmetric(z1, z2, temperature=0.05, hard_negatives=None):
    forward = F.cross_entropy(_logits(z1, z2, temperature, hard_negatives), _targets(z1))
    backward = F.cross_entropy(_logits(z2, z1, temperature, None), _targets(z1))
    return (forward + backward) / 2


def nce_zero_targets(z1, z2, temperature=0.05, hard_negatives=None):
    logits = _logits(z1, z2, temperature, hard_negatives)
    return F.cross_entropy(logits, torch.zeros(len(z1), dtype=torch.long, device=z1.device))


def nce_positive_excluded(z1, z2, temperature=0.05, hard_negatives=None):
    logits = _logits(z1, z2, temperature, hard_negatives)
    rows = _targets(z1)
    positive = logits[rows, rows]
    others = logits.masked_fill(torch.eye(*logits.shape, dtype=torch.bool, device=z1.device), float("-inf"))
    return (torch.logsumexp(others, dim=1) - positive).mean()


def nce_naive_exp(z1, z2, temperature=0.05, hard_negatives=None):
    e = torch.exp(_logits(z1, z2, temperature, hard_negatives))
    return -torch.log(e.diagonal() / e.sum(dim=1)).mean()


def nce_log_of_softmax(z1, z2, temperature=0.05, hard_negatives=None):
    p = torch.softmax(_logits(z1, z2, temperature, hard_negatives), dim=1)
    return -torch.log(p.diagonal()).mean()


def nce_normalised_dim0(z1, z2, temperature=0.05, hard_negatives=None):
    candidates = _candidates(z2, hard_negatives)
    logits = F.normalize(z1, dim=0) @ F.normalize(candidates, dim=0).T / temperature
    return F.cross_entropy(logits, _targets(z1))


def nce_hardcoded_temperature(z1, z2, temperature=0.05, hard_negatives=None):
    return nce_normalize(z1, z2, 0.05, hard_negatives)


def nce_default_0_1(z1, z2, temperature=0.1, hard_negatives=None):
    return nce_normalize(z1, z2, temperature, hard_negatives)


def nce_item(z1, z2, temperature=0.05, hard_negatives=None):
    return nce_normalize(z1, z2, temperature, hard_negatives).item()


def nce_detached(z1, z2, temperature=0.05, hard_negatives=None):
    return nce_normalize(z1, z2, temperature, hard_negatives).detach()


def nce_float32_result(z1, z2, temperature=0.05, hard_negatives=None):
    return F.cross_entropy(_logits(z1, z2, temperature, hard_negatives).float(), _targets(z1))


def nce_float64_result(z1, z2, temperature=0.05, hard_negatives=None):
    return F.cross_entropy(_logits(z1, z2, temperature, hard_negatives).double(), _targets(z1))


def nce_norms_detached(z1, z2, temperature=0.05, hard_negatives=None):
    candidates = _candidates(z2, hard_negatives)
    a = z1 / z1.norm(dim=-1, keepdim=True).clamp(min=1e-12).detach()
    b = candidates / candidates.norm(dim=-1, keepdim=True).clamp(min=1e-12).detach()
    return F.cross_entropy(a @ b.T / temperature, _targets(z1))


def nce_hard_detached(z1, z2, temperature=0.05, hard_negatives=None):
    return nce_normalize(z1, z2, temperature, None if hard_negatives is None else hard_negatives.detach())


def nce_cat_none(z1, z2, temperature=0.05, hard_negatives=None):
    candidates = torch.cat([z2, hard_negatives], dim=0)  # fails when hard_negatives is None
    logits = F.normalize(z1, dim=-1) @ F.normalize(candidates, dim=-1).T / temperature
    return F.cross_entropy(logits, _targets(z1))


def nce_in_place(z1, z2, temperature=0.05, hard_negatives=None):
    z1 /= z1.norm(dim=-1, keepdim=True).clamp(min=1e-12)
    return nce_normalize(z1, z2, temperature, hard_negatives)


def nce_per_row(z1, z2, temperature=0.05, hard_negatives=None):
    return F.cross_entropy(_logits(z1, z2, temperature, hard_negatives), _targets(z1), reduction="none")


def nce_numpy(z1, z2, temperature=0.05, hard_negatives=None):
    a = z1.detach().numpy()
    b = z2.detach().numpy()
    if hard_negatives is not None:
        b = np.concatenate([b, hard_negatives.detach().numpy()])
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    logits = a @ b.T / temperature
    top = logits.max(axis=1, keepdims=True)
    log_p = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
    return np.array(-np.mean(np.diagonal(log_p)))


def nce_course_nn(z1, z2, temperature=0.05, hard_negatives=None):
    return pnn.info_nce_loss(z1, z2, temperature, hard_negatives)


def nce_course_ref(z1, z2, temperature=0.05, hard_negatives=None):
    hard = None if hard_negatives is None else hard_negatives.detach().numpy()
    value = ref.info_nce_loss(z1.detach().numpy(), z2.detach().numpy(), temperature, hard)
    live = nce_normalize(z1, z2, temperature, hard_negatives)  # only for the gradient
    return live - live.detach() + value


INFO_NCE_MISTAKES = [
    ("each hard negative for its own row only", info_nce_hard_negative_own_row, "each hard negative scored against its own row only"),
    ("dot product instead of cosine", nce_dot_product, "dot products instead of cosines"),
    ("temperature multiplied", nce_temperature_multiplied, "multiplied by the temperature instead of divided"),
    ("temperature left out", nce_temperature_left_out, "the cosines not divided by the temperature"),
    ("cross-entropy of the transposed logits", nce_transposed, "the softmax over the wrong axis"),
    ("log_softmax over dim 0", nce_log_softmax_dim0, "the softmax over the wrong axis"),
    ("sum instead of mean", nce_sum, "the sum over the batch instead of the mean"),
    ("hard negatives ignored", nce_hard_ignored, "the hard negatives ignored"),
    ("hard negatives concatenated to z1", nce_hard_with_z1, "concatenate the hard negatives to z2 (not to z1)"),
    ("hard negatives concatenated along dim 1", nce_hard_wrong_dim, "along dim 0"),
    ("NaN for a zero vector", nce_nan_for_zero, "x / x.norm() is 0 / 0"),
    ("NaN gradient for a zero vector (torch.where)", nce_nan_gradient_for_zero, "at its zero row: replacing the NaN"),
    ("symmetric loss", nce_symmetric, "a symmetric loss (the two directions averaged)"),
    ("targets of zeros", nce_zero_targets, "targets of 0 for every row"),
    ("positive excluded from the denominator", nce_positive_excluded, "the positive left out of the denominator"),
    ("exp overflows at a tiny temperature", nce_naive_exp, "an overflow, exp of logits this large is inf"),
    ("log of a softmax at a tiny temperature", nce_log_of_softmax, "an overflow, exp of logits this large is inf"),
    ("normalised along dim 0", nce_normalised_dim0, "the rows normalised along dim 0"),
    ("temperature 0.05 hard-coded", nce_hardcoded_temperature, "a temperature of 0.05 whatever the argument says"),
    ("default temperature 0.1", nce_default_0_1, "a temperature of 0.1 where none was passed"),
    (".item()", nce_item, "the loss is a Python float; return the tensor itself (no .item())"),
    (".detach()", nce_detached, "gradients do not flow"),
    ("float32 result for float64 input", nce_float32_result, "dtype torch.float32, expected torch.float64 like z1"),
    ("float64 result for float32 input", nce_float64_result, "dtype torch.float64, expected torch.float32 like z1"),
    ("norms detached", nce_norms_detached, "although the loss is right: a .detach() (or torch.no_grad) probably cuts"),
    ("hard negatives detached", nce_hard_detached, "gradients do not flow to hard_negatives"),
    ("torch.cat with hard_negatives=None", nce_cat_none, "hard_negatives may be None"),
    ("normalises z1 in place", nce_in_place, "do not normalise z1 or z2 in place"),
    ("one loss per row", nce_per_row, "one loss per row: take their mean"),
    ("computed in NumPy", nce_numpy, "expected a torch.Tensor"),
    ("calls the course's torch version", nce_course_nn, "calls plmcourse.nn.info_nce_loss; write it yourself"),
    ("calls the course's NumPy version", nce_course_ref, "calls plmcourse.ref.info_nce_loss; write it yourself"),
]


CATALOGUE = {
    "check_mean_pool": (MEAN_POOL_CORRECT, MEAN_POOL_MISTAKES),
    "check_anisotropy": (ANISOTROPY_CORRECT, ANISOTROPY_MISTAKES),
    "check_whitening": (WHITENING_CORRECT, WHITENING_MISTAKES),
    "check_info_nce_loss": (INFO_NCE_CORRECT, INFO_NCE_MISTAKES),
}
