"""Right and wrong answers to the mean-pooling exercise of notebook 07, as data for
tests/test_grading_sentence_embeddings.py.

CORRECT: (name, function) pairs that must pass, written in different styles; MISTAKES:
(name, function, fragment): the check must fail with a message containing `fragment`.
Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import torch

from plmcourse import nn as pnn
from plmcourse import ref


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
    weights = mask.to(hidden.dtype).unsqueeze(-1)
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


CATALOGUE = {
    "check_mean_pool": (MEAN_POOL_CORRECT, MEAN_POOL_MISTAKES),
}
