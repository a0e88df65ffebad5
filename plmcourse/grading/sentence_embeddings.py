"""The check for notebook 07 (inside a real BERT): mean pooling of token vectors into a sentence vector.

check_mean_pool runs the student's PyTorch `mean_pool(hidden, mask) -> (B, d)` on seeded
cases: float64 (values compared with plmcourse.ref.mean_pool) and float32 (the dtype must
be kept), bool, integer and float masks, masks with gaps, a row with no real token (zeros,
not NaN, in the output and in the gradient), no padding at all, padded positions holding
NaN, inf or 1e30 (which must not reach the result), B=1, T=1 and a large d. Where hidden
requires grad, the gradient of sum(output * upstream) for a fixed random upstream is
compared with the analytic one, upstream[b] * mask[b, t] / max(count_b, 1). hidden=True
adds cases with other seeds, shapes and mask dtypes. A wrong answer is matched against
the known mistakes.
"""

import sys

import numpy as np
import torch

from plmcourse.grading.core import (
    hidden_salt,
    Check,
    F32,
    F64,
    Case,
    compare,
    expect_array,
    first_match,
    to_numpy,
)
from plmcourse.nn import sentence_embeddings as nn_sentence_embeddings
from plmcourse.ref import sentence_embeddings as ref_sentence_embeddings

__all__ = ["check_mean_pool"]


# The course's versions; sentence-transformers' pooling layer is sealed too when the notebook loaded it.
MEAN_POOL_SEAL = [
    (ref_sentence_embeddings.mean_pool, "plmcourse.ref.mean_pool"),
    (nn_sentence_embeddings.mean_pool, "plmcourse.nn.mean_pool"),
]


def _mean_pool_seal():
    library = sys.modules.get("sentence_transformers.models")
    pooling = getattr(library, "Pooling", None) if library is not None else None
    extra = [(pooling, "sentence_transformers.models.Pooling")] if isinstance(pooling, type) else []
    return MEAN_POOL_SEAL + extra


# ----------------------------------------------------------------------------
# Cases

_NAMES = {torch.bool: "bool", torch.int64: "int64", torch.int32: "int32", torch.uint8: "uint8",
          torch.float32: "float32", torch.float64: "float64"}


def _pool_case(seed, B, T, d, device, lengths=None, gaps=False, mask_dtype=torch.bool, dtype=torch.float64,
               grad=True, padding=None):
    """hidden ~ N(0, 1) (B, T, d); mask: True for t < lengths[b], or (gaps) about half True anywhere.

    padding: None, "nan" (padded positions hold NaN, inf and -inf) or "huge" (+-1e30 there).
    grad: hidden requires grad, and the gradient is checked.
    """
    rng = np.random.default_rng(seed)
    hidden = rng.standard_normal((B, T, d))
    if gaps:
        mask = rng.random((B, T)) < 0.5
        mask[np.arange(B), rng.integers(T, size=B)] = True  # every row keeps a real token
    else:
        mask = np.arange(T)[None, :] < np.array(lengths)[:, None]
    if padding == "nan":
        fill = rng.choice(np.array([np.nan, np.inf, -np.inf]), size=hidden.shape)
        hidden = np.where(mask[..., None], hidden, fill)
    elif padding == "huge":
        hidden = np.where(mask[..., None], hidden, rng.choice(np.array([1e30, -1e30]), size=hidden.shape))
    upstream = rng.standard_normal((B, d))
    hidden_t = torch.tensor(hidden, dtype=dtype, device=device, requires_grad=grad)
    mask_t = torch.tensor(mask, device=device).to(mask_dtype)
    empty = ~mask.any(axis=1)
    rows = "/".join("".join("1" if m else "0" for m in row) for row in mask)
    label = (f"seed {seed}: hidden of shape {(B, T, d)} {_NAMES[dtype]}, {_NAMES[mask_dtype]} mask "
             + (f"rows {rows}" if T <= 12 and B <= 6 else f"with {mask.sum(axis=1).tolist()} real tokens per row"))
    notes = {"a row with no real token": bool(empty.any()) and not empty.all(),
             "no row has a real token": bool(empty.all()),
             "no padding": bool(mask.all()),
             "the padding holds NaN and inf": padding == "nan",
             "the padding holds values of 1e30": padding == "huge"}
    label += "".join(f", {note}" for note, on in notes.items() if on)
    tags = {note for note, on in notes.items() if on}
    if dtype == torch.float32:
        tags.add("float32")
    data = {"hidden": to_numpy(hidden_t).astype(np.float64), "mask": mask, "upstream": upstream, "empty": empty,
            "nan_rows": (~mask & ~np.isfinite(hidden).all(axis=-1)).any(axis=1), "grad": grad}
    return Case(label, (hidden_t, mask_t), tags=frozenset(tags), data=data,
                grad_leaves=(0,) if grad else (), upstream=upstream if grad else None)


def _mean_pool_cases(hidden, device):
    cases = [
        _pool_case(0, 3, 5, 4, device, lengths=[5, 3, 1]),
        _pool_case(1, 2, 6, 3, device, lengths=[2, 6], mask_dtype=torch.int64),
        _pool_case(2, 3, 5, 4, device, gaps=True, mask_dtype=torch.float32),
        _pool_case(3, 3, 4, 5, device, lengths=[4, 0, 2]),
        _pool_case(4, 3, 6, 4, device, lengths=[3, 5, 1], padding="nan"),
        _pool_case(5, 2, 5, 3, device, lengths=[2, 4], mask_dtype=torch.int64, padding="huge"),
        _pool_case(6, 3, 4, 6, device, lengths=[4, 2, 3], dtype=torch.float32, grad=False),
        _pool_case(7, 2, 5, 4, device, lengths=[1, 3], mask_dtype=torch.int64, dtype=torch.float32, grad=False),
        _pool_case(8, 2, 3, 4, device, lengths=[3, 3]),
        _pool_case(9, 1, 1, 3, device, lengths=[1]),
        _pool_case(10, 4, 7, 384, device, lengths=[7, 5, 2, 1]),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _pool_case(salt + 100, 5, 9, 16, device, gaps=True, mask_dtype=torch.int32),
            _pool_case(salt + 101, 2, 8, 8, device, lengths=[3, 8]),
            _pool_case(salt + 102, 3, 6, 5, device, lengths=[0, 6, 2], mask_dtype=torch.uint8, padding="nan"),
            _pool_case(salt + 103, 2, 5, 3, device, lengths=[2, 5], mask_dtype=torch.float64, dtype=torch.float32,
                       grad=False),
            _pool_case(salt + 104, 1, 1, 1, device, lengths=[1]),
            _pool_case(salt + 105, 8, 12, 768, device, lengths=[12, 3, 7, 1, 12, 5, 9, 2], dtype=torch.float32,
                       grad=False, padding="huge"),
            _pool_case(salt + 106, 2, 5, 3, device, gaps=True, mask_dtype=torch.float64, padding="nan"),
            _pool_case(salt + 107, 2, 3, 4, device, lengths=[0, 0]),
            _pool_case(salt + 108, 1, 4, 2, device, lengths=[0], mask_dtype=torch.int64, padding="nan"),
        ]
    return cases


def _mean_pool_reference(case):
    """The NumPy reference (padding never counts, NaN there included), and the analytic
    gradient of sum(output * upstream) with respect to hidden."""
    d = case.data
    mask = d["mask"]
    output = ref_sentence_embeddings.mean_pool(d["hidden"], mask)
    count = np.maximum(mask.sum(axis=1), 1)
    grad = d["upstream"][:, None, :] * mask[..., None] / count[:, None, None]
    return output, grad


# ----------------------------------------------------------------------------
# Known mistakes, in float64 NumPy on the case's values (padding included)


def _mean_pool_mistakes(d):
    hidden, mask = d["hidden"], d["mask"]
    B, T, _ = hidden.shape
    real = mask[..., None]
    clean = np.where(real, hidden, 0.0)
    count = mask.sum(axis=1)[:, None]
    yield ("the padding vectors summed in (the mask only used for the count): zero the padded positions "
           "before summing", lambda: (hidden.sum(axis=1) / np.maximum(count, 1),))
    yield "the mask ignored: a plain mean over all T positions, padding included", lambda: (hidden.mean(axis=1),)
    yield ("the sum of the real tokens divided by T (the padded length) instead of by the number of real tokens",
           lambda: (clean.sum(axis=1) / T,))
    yield "the sum of the real tokens without dividing by their number", lambda: (clean.sum(axis=1),)
    yield ("the mask inverted: the padding averaged instead of the real tokens (True or 1 marks a real token)",
           lambda: (np.where(real, 0.0, hidden).sum(axis=1) / np.maximum(T - count, 1),))
    yield ("the first token's vector ([CLS] pooling) instead of the mean of the real tokens",
           lambda: (hidden[:, 0],))
    yield ("the max over the real tokens instead of their mean",
           lambda: (np.where(real, hidden, -np.inf).max(axis=1),) if not d["empty"].any() else None)
    if not np.array_equal(mask, np.arange(T)[None, :] < count):  # a mask with gaps
        yield ("the first count tokens averaged, as if the mask were a prefix of real tokens: real tokens sit "
               "wherever the mask is True, use the mask itself",
               lambda: (np.stack([hidden[b, :max(int(count[b, 0]), 1)].mean(axis=0) for b in range(B)]),))
    yield ("an average over the features (dim=-1) instead of over the tokens (dim=1)",
           lambda: (clean.sum(axis=-1) / hidden.shape[-1],))
    yield ("an average over the features (dim=-1) instead of over the tokens (dim=1)",
           lambda: (hidden.mean(axis=-1),))


# ----------------------------------------------------------------------------
# Judging


def _no_flow(detail=""):
    return (f"gradients do not flow to hidden{detail}: a .detach(), .numpy() or torch.tensor(...) on the way "
            f"cuts the autograd graph, keep every step in torch")


def _shape_hint(shape, B, T, d):
    if shape == (B, 1, d):
        return " (keepdim=True leaves the token axis in; drop it)"
    if shape == (B, T) and T != d:
        return " (an average over the features, dim=-1; average over the tokens, dim=1)"
    if shape == (B, T, d):
        return " (the mask applied, but the tokens not averaged: sum over dim=1 and divide by the count)"
    if shape == (d,) or shape == (B,):
        return " (one vector per sentence: reduce over the tokens only, dim=1)"
    return ""


def _judge_mean_pool(case, got, expected):
    problem = expect_array(got, "the result", kind="torch")
    if problem:
        return problem
    hidden = case.args[0]
    want, want_grad = expected
    B, T, d = hidden.shape
    shape = tuple(got.shape)
    if shape != want.shape:
        return (f"the result has shape {shape}, expected {want.shape}, one vector per sentence"
                f"{_shape_hint(shape, B, T, d)}")
    if got.dtype != hidden.dtype:
        return (f"the result has dtype {got.dtype}, expected {hidden.dtype} like hidden: keep hidden's dtype, "
                f"e.g. cast the mask with mask.to(hidden.dtype) rather than .float() or .double()")
    if got.device != hidden.device:
        return (f"the result is on {got.device}, expected {hidden.device} like hidden (make new tensors on "
                f"hidden.device)")
    data = case.data
    tolerance = F32 if "float32" in case.tags else F64
    values = to_numpy(got).astype(np.float64)
    bad_rows = ~np.isfinite(values).all(axis=-1)
    if bad_rows.any():
        if (bad_rows & data["nan_rows"] & ~data["empty"]).any():
            return ("the result contains NaN where the padding holds NaN or inf: NaN * 0 is NaN (and so is inf * 0), "
                    "so multiplying by the mask does not remove padded values; select the real tokens instead "
                    "(torch.where(mask, hidden, 0) or masked_fill)")
        if not (bad_rows & ~data["empty"]).any():
            if (bad_rows & data["nan_rows"]).any():  # 0 / 0, or the NaN of its padding: either must not show
                return ("a row with no real token, whose padding holds NaN or inf, gave NaN; it must give zeros: "
                        "leave the padded positions out (torch.where or masked_fill, not a multiplication) and "
                        "divide by the number of real tokens clamped to at least 1")
            return ("a row with no real token gave NaN (0 / 0); it must give zeros: divide by the number of real "
                    "tokens clamped to at least 1 (count.clamp(min=1))")
    problem = compare(values, want, **tolerance, what="the result")
    if problem:
        mistake = first_match((values,), _mean_pool_mistakes(data), **tolerance)
        return f"{problem}; it matches {mistake}" if mistake else problem
    return _judge_mean_pool_gradient(case, got, want_grad) if data["grad"] else None


def _judge_mean_pool_gradient(case, got, want_grad):
    data = case.data
    # An output that needs no graph is right only where the gradient is zero (every row empty).
    all_zero = not bool(np.any(want_grad))
    reply = case.reply
    if not reply.requires_grad:
        return None if all_zero else _no_flow(" (the result does not depend on hidden in the autograd graph)")
    if reply.grad_error:
        return f"computing the gradient through your function raised {reply.grad_error}"
    (grad,) = reply.grads
    if grad is None:
        return None if all_zero else _no_flow()
    grad = to_numpy(grad)
    bad_rows = ~np.isfinite(grad).all(axis=(1, 2))
    if bad_rows.any() and not (bad_rows & ~data["empty"]).any():
        return ("the gradient with respect to hidden is NaN for a row with no real token: replacing the NaN of "
                "0 / 0 afterwards (torch.where, nan_to_num) leaves it in the backward pass; clamp the count "
                "to at least 1 before dividing")
    problem = compare(grad, want_grad, **F64, what="the gradient with respect to hidden")
    if problem is None:
        return None
    padded = ~data["mask"]
    if np.isfinite(grad).all() and np.any(grad[padded] != 0):
        return f"{problem}: padded positions get a non-zero gradient, but they must not influence the result"
    return f"{problem} (compared with upstream * mask / count; does a .detach() cut part of the graph?)"


def _explain_mean_pool_error(error):
    text = str(error)
    if "leaf Variable that requires grad" in text or "a view of a leaf Variable" in text:
        return ("do not modify hidden in place (masked_fill_, hidden[...] = ..., *=); build a new tensor, e.g. "
                "with torch.where or masked_fill")
    if "must match the size of tensor" in text or "not broadcastable" in text:
        return ("the mask (B, T) does not broadcast against hidden (B, T, d): add a feature axis, "
                "mask.unsqueeze(-1) or mask[..., None]")
    if "condition to be a boolean" in text or "only supports boolean masks" in text or "bitwise_not" in text:
        return "the mask may be bool, 0/1 integers or float: make it boolean first with mask.bool() (or mask != 0)"
    if "with a bool tensor is not supported" in text:
        return "1 - mask does not work on a bool mask: use ~mask, or convert with mask.to(hidden.dtype) first"
    if ("expected scalar type" in text or "same dtype" in text or "dtype" in text and "but got" in text):
        return "convert the mask to hidden's dtype, mask.to(hidden.dtype), before combining them"
    if "same device" in text:
        return "make new tensors on hidden.device"
    if "numpy()" in text and "requires grad" in text:
        return "gradients do not flow through .numpy(), keep every step in torch"
    return None


check_mean_pool = Check(
    name="check_mean_pool",
    doc="""Check a PyTorch `mean_pool(hidden, mask) -> (B, d)`: the mean of the real tokens' vectors.
    
    hidden (B, T, d); mask (B, T), bool or 0/1 integers or float, True/1 for real tokens.
    The result keeps hidden's dtype and device; a row with no real token gives zeros,
    in the gradient too; values at padded positions (NaN included) never reach the result.
    Cases run on `device` (default: the CPU).""",
    arg_names=("hidden", "mask"),
    cases=_mean_pool_cases,
    reference=_mean_pool_reference,
    judge=_judge_mean_pool,
    seal=_mean_pool_seal,
    explain_error=_explain_mean_pool_error,
    device=True,
)
