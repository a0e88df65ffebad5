"""Checks for notebooks 07 (inside a real BERT) and 08 (sentence embeddings).

    check_mean_pool       mean_pool(hidden, mask) -> (B, d), PyTorch (notebook 07)
    check_anisotropy      anisotropy(X) -> float, NumPy (notebook 08)
    check_whitening       whitening(X, k=None) -> (mu, W), NumPy (notebook 08)
    check_info_nce_loss   info_nce_loss(z1, z2, temperature=0.05, hard_negatives=None), PyTorch (notebook 08)

check_mean_pool runs the student's PyTorch `mean_pool(hidden, mask) -> (B, d)` on seeded
cases: float64 (values compared with plmcourse.ref.mean_pool) and float32 (the dtype must
be kept), bool, integer and float masks, masks holding values other than 0 and 1 (2, 0.5,
-1: any nonzero value is a real token, never a weight), masks with gaps, a row with no real token (zeros,
not NaN, in the output and in the gradient), no padding at all, padded positions holding
NaN, inf or 1e30 (which must not reach the result), B=1, T=1 and a large d. On every case,
float32 ones included, the gradient of sum(output * upstream) for a fixed random upstream is
compared with the analytic one, upstream[b] * mask[b, t] / max(count_b, 1); a result cut
from the graph is reported before a wrong dtype. hidden=True
adds cases with other seeds, shapes and mask dtypes. A wrong answer is matched against
the known mistakes.

check_anisotropy compares with plmcourse.ref.anisotropy (the mean cosine over the n(n-1)
ordered pairs of different rows; a zero row has cosine 0 with every other row) on
Gaussian rows, a cone (near 1), centred rows, identical rows (1), two opposite vectors (-1),
nearly orthogonal rows (near 0, where float32 arithmetic shows), zero rows, float32 input,
and entries of about 1e150 and 1e-160 (where a product of squared norms overflows or
underflows).

check_whitening compares mu and W with plmcourse.ref.whitening, W column by column up to
each column's sign (singular vectors have no sign of their own), on data whose covariance
has well-separated eigenvalues (so that the directions are unique) and a mean far from 0;
k omitted, None, d, 1 or in between; d from 1 to 64; float32 input. When W is wrong, the
message also says whether (X - mu) @ W has identity covariance.

check_info_nce_loss compares the loss with plmcourse.ref.info_nce_loss (float64) and its
gradients with respect to z1, z2 and hard_negatives with autograd through
plmcourse.nn.info_nce_loss in float64: the default temperature (not passed) and
temperatures from 1 down to 0.001 (logits of 1000), no, None, 1, B and 2B hard negatives,
B = 1, d = 1, float32, zero rows (finite loss and gradient; the gradient of a zero row
itself is only required to be finite, since F.normalize and an eps in the denominator
differ there) and positives that are the very same tensor as z1.
"""

import inspect
import math
import sys

import numpy as np
import torch

from plmcourse.grading import sentence_embeddings as declared
from plmcourse.judging.core import (
    _distinct,
    hidden_salt,
    Spec,
    F32,
    F64,
    Case,
    as_scalar,
    close,
    compare,
    describe,
    expect_array, expect_array_pair, expect_loss,
    first_match, hint_for, matches, name_mistake,
    to_numpy,
    log_softmax,
)
from plmcourse.nn import probing as nn_probing
from plmcourse.nn import sentence_embeddings as nn_sentence_embeddings
from plmcourse.ref import sentence_embeddings as ref_sentence_embeddings

__all__ = ["check_mean_pool", "check_anisotropy", "check_whitening", "check_info_nce_loss"]


# The course's versions; sentence-transformers' pooling layer is sealed too when the notebook loaded it.
MEAN_POOL_SEAL = [
    (ref_sentence_embeddings.mean_pool, "plmcourse.ref.mean_pool"),
    (nn_sentence_embeddings.mean_pool, "plmcourse.nn.mean_pool"),
]


def _loaded_class(module, name):
    """The class `module.name` if the notebook has imported `module`, else None (never imports it)."""
    library = sys.modules.get(module)
    found = getattr(library, name, None) if library is not None else None
    return found if isinstance(found, type) else None


def _mean_pool_seal():
    pooling = _loaded_class("sentence_transformers.models", "Pooling")
    return MEAN_POOL_SEAL + ([(pooling, "sentence_transformers.models.Pooling")] if pooling else [])


# ----------------------------------------------------------------------------
# Cases

_NAMES = {torch.bool: "bool", torch.int64: "int64", torch.int32: "int32", torch.uint8: "uint8",
          torch.float32: "float32", torch.float64: "float64"}


def _pool_case(seed, B, T, d, device, lengths=None, gaps=False, mask_dtype=torch.bool, dtype=torch.float64,
               grad=True, padding=None, values=None):
    """hidden ~ N(0, 1) (B, T, d); mask: True for t < lengths[b], or (gaps) about half True anywhere.

    padding: None, "nan" (padded positions hold NaN, inf and -inf) or "huge" (+-1e30 there).
    grad: hidden requires grad, and the gradient is checked.
    values: the mask holds these nonzero numbers (drawn per position) at real tokens instead of 1:
    any nonzero value marks a real token, and the values are not weights.
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
    shown = mask
    if values is not None:
        shown = np.where(mask, rng.choice(np.array(values, dtype=np.float64), size=mask.shape), 0.0)
    mask_t = torch.tensor(shown, device=device).to(mask_dtype)
    empty = ~mask.any(axis=1)
    rows = "/".join("".join("1" if m else "0" for m in row) for row in mask)
    if values is not None:
        rows = "/".join(" ".join(f"{v:g}" for v in row) for row in shown)
    label = (f"seed {seed}: hidden of shape {(B, T, d)} {_NAMES[dtype]}, {_NAMES[mask_dtype]} mask "
             + (f"rows {rows}" if T <= 12 and B <= 6 else f"with {mask.sum(axis=1).tolist()} real tokens per row"))
    notes = {"a row with no real token": bool(empty.any()) and not empty.all(),
             "no row has a real token": bool(empty.all()),
             "no padding": bool(mask.all()),
             "the padding holds NaN and inf": padding == "nan",
             "the padding holds values of 1e30": padding == "huge",
             "mask values other than 0 and 1 (nonzero: a real token)": values is not None}
    label += "".join(f", {note}" for note, on in notes.items() if on)
    tags = {note for note, on in notes.items() if on}
    if dtype == torch.float32:
        tags.add("float32")
    data = {"hidden": to_numpy(hidden_t).astype(np.float64), "mask": mask, "upstream": upstream, "empty": empty,
            "nan_rows": (~mask & ~np.isfinite(hidden).all(axis=-1)).any(axis=1), "grad": grad}
    if values is not None:
        data["weights"] = to_numpy(mask_t).astype(np.float64)
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
        _pool_case(6, 3, 4, 6, device, lengths=[4, 2, 3], dtype=torch.float32),
        _pool_case(7, 2, 5, 4, device, lengths=[1, 3], mask_dtype=torch.float64, dtype=torch.float32),
        _pool_case(8, 2, 3, 4, device, lengths=[3, 3]),
        _pool_case(9, 1, 1, 3, device, lengths=[1]),
        _pool_case(10, 4, 7, 384, device, lengths=[7, 5, 2, 1]),
        _pool_case(11, 3, 5, 4, device, lengths=[5, 3, 2], mask_dtype=torch.float64, values=(0.5, 2.0, -1.0)),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _pool_case(salt + 100, 5, 9, 16, device, gaps=True, mask_dtype=torch.int32),
            _pool_case(salt + 101, 2, 8, 8, device, lengths=[3, 8]),
            _pool_case(salt + 102, 3, 6, 5, device, lengths=[0, 6, 2], mask_dtype=torch.uint8, padding="nan"),
            _pool_case(salt + 103, 2, 5, 3, device, lengths=[2, 5], mask_dtype=torch.float64, dtype=torch.float32),
            _pool_case(salt + 104, 1, 1, 1, device, lengths=[1]),
            _pool_case(salt + 105, 8, 12, 768, device, lengths=[12, 3, 7, 1, 12, 5, 9, 2], dtype=torch.float32,
                       padding="huge"),
            _pool_case(salt + 106, 2, 5, 3, device, gaps=True, mask_dtype=torch.float64, padding="nan"),
            _pool_case(salt + 107, 2, 3, 4, device, lengths=[0, 0]),
            _pool_case(salt + 108, 1, 4, 2, device, lengths=[0], mask_dtype=torch.int64, padding="nan"),
            _pool_case(salt + 109, 3, 6, 5, device, gaps=True, mask_dtype=torch.int64, values=(1, 2, 3)),
            _pool_case(salt + 110, 2, 5, 3, device, lengths=[4, 2], mask_dtype=torch.float32, dtype=torch.float32,
                       values=(-1.0, 0.25, 4.0)),
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


WEIGHTS = ("the mask used as weights (multiplied in, or summed for the count): the mask only says which tokens "
           "are real, any nonzero value counts as one real token (mask.bool(), or mask != 0)")


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
    if "weights" in d:  # a mask holding 2, 0.5 or -1 where the tokens are real
        w = d["weights"][..., None]  # (B, T, 1)
        weighted = np.where(real, hidden * w, 0.0).sum(axis=1)
        total = w.sum(axis=1)  # (B, 1), clamped or guarded against 0 in either way
        for numerator, denominator in [(weighted, np.maximum(total, 1)), (weighted, np.where(total == 0, 1.0, total)),
                                       (weighted, np.maximum(count, 1)), (clean.sum(axis=1), np.maximum(total, 1)),
                                       (clean.sum(axis=1), np.where(total == 0, 1.0, total))]:
            yield (WEIGHTS, lambda n=numerator, m=denominator: (n / m,))
        yield ("only positive mask values counted as real (mask > 0): any nonzero value marks a real token",
               lambda: (np.where(w > 0, hidden, 0.0).sum(axis=1) / np.maximum((w > 0).sum(axis=1), 1),))
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
    if case.data["grad"] and not case.reply.requires_grad and np.any(want_grad):
        return _no_flow(" (the result does not depend on hidden in the autograd graph)")
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
        return name_mistake(problem, (values,), _mean_pool_mistakes(data), tolerance)
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
    tolerance = F32 if "float32" in case.tags else F64
    problem = compare(grad, want_grad, **tolerance, what="the gradient with respect to hidden")
    if problem is None:
        return None
    padded = ~data["mask"]
    if np.isfinite(grad).all() and np.any(grad[padded] != 0):
        return f"{problem}: padded positions get a non-zero gradient, but they must not influence the result"
    return f"{problem} (compared with upstream * mask / count; does a .detach() cut part of the graph?)"


NO_NUMPY_HINT = ((("numpy()", "requires grad"),), "gradients do not flow through .numpy(), keep every step in torch")


def _explain_mean_pool_error(error):
    return hint_for(error, [
        (("leaf Variable that requires grad", "a view of a leaf Variable"),
         "do not modify hidden in place (masked_fill_, hidden[...] = ..., *=); build a new tensor, e.g. "
         "with torch.where or masked_fill"),
        (("must match the size of tensor", "not broadcastable"),
         "the mask (B, T) does not broadcast against hidden (B, T, d): add a feature axis, "
         "mask.unsqueeze(-1) or mask[..., None]"),
        (("condition to be a boolean", "only supports boolean masks", "bitwise_not"),
         "the mask may be bool, 0/1 integers or float: make it boolean first with mask.bool() (or mask != 0)"),
        (("with a bool tensor is not supported",),
         "1 - mask does not work on a bool mask: use ~mask, or convert with mask.to(hidden.dtype) first"),
        (("expected scalar type", "same dtype", ("dtype", "but got")),
         "convert the mask to hidden's dtype, mask.to(hidden.dtype), before combining them"),
        (("same device",), "make new tensors on hidden.device"),
        NO_NUMPY_HINT,
    ])


check_mean_pool = Spec(
    declared.check_mean_pool,
    cases=_mean_pool_cases,
    reference=_mean_pool_reference,
    judge=_judge_mean_pool,
    seal=_mean_pool_seal,
    explain_error=_explain_mean_pool_error,
    clauses=(
        ("hidden (B, T, d), float32", lambda c: c.args[0].dtype == torch.float32),
        ("... or float64", lambda c: c.args[0].dtype == torch.float64),
        ("mask (B, T), True/1 for a real token: as bool", lambda c: c.args[1].dtype == torch.bool),
        ("... as integer", lambda c: not c.args[1].dtype.is_floating_point and c.args[1].dtype != torch.bool),
        ("... or as float", lambda c: c.args[1].dtype.is_floating_point),
        ("any nonzero value marks a real token; the values are not weights (2, 0.5, -1 count as 1)",
         lambda c: "weights" in c.data),
        ("per row, the sum of the real tokens' vectors divided by their number", lambda c: not c.data["mask"].all()),
        ("a row with no real token gives zeros, not NaN (in the gradient too)",
         lambda c: bool(c.data["empty"].any()) and c.data["grad"]),
        ("whatever the padded positions hold, even NaN or inf, must not reach the result",
         lambda c: "the padding holds NaN and inf" in c.tags),
        ("stay in torch, so that gradients flow back to hidden", lambda c: c.grad_leaves == (0,)),
    ),
)


# ============================================================================
# Shared by the checks of notebook 08


FLOAT32_NOTE = (", which is float32 rounding: compute in the inputs' float64 throughout (no .float(), np.float32 "
                "or torch's default float32 inside); float64 answers must agree to atol {atol:g} and rtol {rtol:g}")


def _scalar_problem(value, expected, tolerance, what, mistakes=(), precise=(), note=FLOAT32_NOTE):
    """None if the number `value` is close to `expected`, else 'what is V, expected E', with the first of
    `mistakes` (first_match pairs) that it matches, else the first of `precise` that it matches to 1e-12
    (variants that differ from the right answer by little more than rounding), else `note` if it is
    within float32's tolerance of a float64 answer."""
    if close(np.array(value), np.array(expected), **tolerance):
        return None
    want, have = _distinct(expected, value)
    problem = f"{what} is {have}, expected {want}"
    mistake = (first_match((np.array(value),), mistakes, **tolerance)
               or first_match((np.array(value),), precise, atol=1e-14, rtol=1e-12))
    if mistake:
        return f"{problem}; it matches {mistake}"
    if tolerance is F64 and close(np.array(value), np.array(expected), **F32):
        problem += note.format(**F64)
    return problem


def _rows(indices):
    indices = [int(i) for i in indices]
    if not indices:
        return "no row"
    if len(indices) == 1:
        return f"row {indices[0]}"
    return "rows " + ", ".join(str(i) for i in indices[:-1]) + f" and {indices[-1]}"


# ============================================================================
# anisotropy(X), NumPy -> a number

ANISOTROPY_SEAL = [
    (ref_sentence_embeddings.anisotropy, "plmcourse.ref.anisotropy"),
    (ref_sentence_embeddings.cosine_matrix, "plmcourse.ref.cosine_matrix"),
    (nn_probing.anisotropy, "plmcourse.nn.anisotropy"),
    (nn_probing.self_similarity, "plmcourse.nn.self_similarity"),
    (nn_probing._mean_pairwise_cosine, "plmcourse.nn.anisotropy"),
]

# Entries of about 1e-160 are drawn as multiples of 2**-537 (3.6e-162): their squares are exact
# float64 numbers (subnormal ones, multiples of 2**-1074), so a row's own norm,
# np.linalg.norm(X, axis=1), is exact and dividing each row by it is the textbook answer that
# works; a product of two squared norms (1e-640) underflows to 0, and a product of two norms
# (1e-318) keeps only a few digits. Off that grid the squares themselves would lose digits, and
# no plain normalisation (the course's included) would reach float64 precision.
_TINY = 2.0 ** -537
_HUGE = 1e150


def _anisotropy_case(seed, n, d, kind="gaussian", dtype=np.float64, zero_rows=(), magnitude=None):
    """X (n, d) of a `kind` ("gaussian", "cone", "centred", "identical", "opposite", "orthogonal"),
    with `zero_rows` set to 0 and, for magnitude "huge" or "tiny", entries of about 1e150 or 1e-160."""
    rng = np.random.default_rng(seed)
    if kind == "gaussian":
        X = rng.standard_normal((n, d))
    elif kind == "cone":  # a big common vector plus noise: every cosine near 1
        X = 3.0 * rng.standard_normal(d) + rng.standard_normal((n, d))
    elif kind == "centred":
        X = rng.standard_normal((n, d))
        X = X - X.mean(axis=0)
    elif kind == "identical":
        X = np.tile(rng.standard_normal(d), (n, 1))
    elif kind == "opposite":  # n == 2: cosine -1
        v = rng.standard_normal(d)
        X = np.stack([v, -rng.uniform(0.5, 2.0) * v])
    else:  # "orthogonal", n <= d: rows of a rotation, scaled and tilted a little; anisotropy about 1e-3
        Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        X = Q[:n] * rng.uniform(0.5, 2.0, (n, 1)) + 0.003 * rng.standard_normal((n, d))
    if magnitude == "huge":
        X = X * _HUGE
    elif magnitude == "tiny":
        m = np.rint(X * 40.0)
        m[~m.any(axis=1), 0] = 1.0  # no row rounds to zero
        X = m * _TINY
    X[list(zero_rows)] = 0.0
    X = X.astype(dtype)
    notes = {"float32": dtype == np.float32, "a cone (a big common vector plus noise)": kind == "cone",
             "centred rows": kind == "centred", "all rows identical": kind == "identical",
             "two opposite vectors": kind == "opposite", "nearly orthogonal rows": kind == "orthogonal",
             f"{_rows(zero_rows)} all zeros": bool(zero_rows), "entries of about 1e150": magnitude == "huge",
             "entries of about 1e-160": magnitude == "tiny"}
    label = f"seed {seed}: X of shape ({n}, {d})" + "".join(f", {note}" for note, on in notes.items() if on)
    tags = {"float32"} if dtype == np.float32 else set()
    tags |= {"zero row"} if zero_rows else set()
    tags |= {magnitude} if magnitude else set()
    X64 = X.astype(np.float64)
    return Case(label, (X,), tags=frozenset(tags),
                data={"X": X64, "zero": ~X64.any(axis=1), "magnitude": magnitude})


def _anisotropy_cases(hidden):
    cases = [
        _anisotropy_case(0, 5, 3),
        _anisotropy_case(27, 2, 3, kind="orthogonal"),
        _anisotropy_case(2, 2, 2, kind="opposite"),
        _anisotropy_case(3, 4, 5, kind="identical"),
        _anisotropy_case(4, 6, 1),
        _anisotropy_case(5, 8, 4, kind="centred"),
        _anisotropy_case(6, 200, 384, kind="cone"),
        _anisotropy_case(7, 5, 3, kind="cone", zero_rows=(2,)),
        _anisotropy_case(8, 6, 4, zero_rows=(1, 4)),
        _anisotropy_case(9, 10, 16, kind="cone", dtype=np.float32),
        _anisotropy_case(10, 6, 3, kind="cone", magnitude="huge"),
        _anisotropy_case(11, 6, 3, kind="cone", magnitude="tiny"),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _anisotropy_case(salt + 100, 7, 2),
            _anisotropy_case(salt + 101, 300, 768, kind="cone"),
            _anisotropy_case(salt + 102, 3, 64, kind="orthogonal"),
            _anisotropy_case(salt + 103, 5, 3, kind="identical", zero_rows=(0,)),
            _anisotropy_case(salt + 104, 50, 64, kind="centred"),
            _anisotropy_case(salt + 105, 9, 5, magnitude="huge"),
            _anisotropy_case(salt + 106, 9, 5, kind="cone", magnitude="tiny"),
            _anisotropy_case(salt + 107, 4, 1, zero_rows=(3,)),
            _anisotropy_case(salt + 108, 30, 8, kind="cone", dtype=np.float32, zero_rows=(5, 17)),
            _anisotropy_case(salt + 109, 2, 384, kind="opposite"),
        ]
    return cases


def _anisotropy_reference(case):
    return float(ref_sentence_embeddings.anisotropy(case.data["X"]))


def _unit(X):
    """Rows of X scaled to norm 1 (a zero row stays zero), safely for entries of 1e150 or 1e-160."""
    peak = np.abs(X).max(axis=-1, keepdims=True)
    Y = X / np.where(peak > 0, peak, 1.0)
    norms = np.linalg.norm(Y, axis=-1, keepdims=True)
    return Y / np.where(norms > 0, norms, 1.0)


OVERFLOW = ("an overflow: with entries of about 1e150 the squared norms are about 1e300, and a product of two "
            "of them (about 1e600) is inf in float64, so every cosine came out 0; divide each row by its own "
            "norm first (or by norm_i * norm_j, never by the square root of a product of squared norms)")
UNDERFLOW = ("an underflow: with entries of about 1e-160 the squared norms are about 1e-320, a product of two of "
             "them (about 1e-640) is 0 in float64, and a norm of 1e-159 vanishes next to an eps added to it or "
             "clamping it (norm + 1e-8, or max(norm, eps) as in F.normalize and F.cosine_similarity), so every "
             "cosine came out 0; divide each row by its own norm first, replacing only a norm that is exactly 0")
UNDERFLOW_DIGITS = ("an underflow: with entries of about 1e-160 a product of two norms (about 1e-318) lies below "
                    "the smallest normal float64 (2.2e-308), where it keeps only a few digits; divide each row by "
                    "its own norm first, then take the dot products")


def _anisotropy_mistakes(d):
    X, zero = d["X"], d["zero"]
    n = len(X)
    pairs = n * (n - 1)
    off = ~np.eye(n, dtype=bool)
    unit = _unit(X)
    cos = unit @ unit.T
    total = cos[off].sum()
    if d["magnitude"] == "huge":
        yield OVERFLOW, lambda: (np.array(0.0),)
        yield OVERFLOW, lambda: (np.array(-1.0 / (n - 1)),)  # the diagonal, also 0, removed as n
    if d["magnitude"] == "tiny":
        yield UNDERFLOW, lambda: (np.array(0.0),)
        yield UNDERFLOW, lambda: (np.array(-1.0 / (n - 1)),)
        norms = np.linalg.norm(X, axis=1)
        yield UNDERFLOW_DIGITS, lambda: (np.array((X @ X.T / np.outer(norms, norms))[off].mean()),)
    if zero.any():
        yield ("the diagonal removed by subtracting n, as if every row's cosine with itself were 1, but a zero "
               "row's is 0: subtract the trace of the cosine matrix (or leave the diagonal out with a mask)",
               lambda: (np.array((cos.sum() - n) / pairs),))
        kept = ~zero
        if kept.sum() >= 2:
            yield ("the pairs with a zero row left out, but a zero row has cosine 0 with every other row and "
                   "its pairs still count: divide by n(n-1), all ordered pairs i != j",
                   lambda: (np.array(cos[np.ix_(kept, kept)][off[np.ix_(kept, kept)]].mean()),))
    yield ("the diagonal counted: the mean of all n² entries of the cosine matrix includes each row's cosine "
           "with itself; leave the diagonal out and divide by n(n-1)", lambda: (np.array(cos.mean()),))
    yield ("the sum over the pairs i != j divided by n² instead of by n(n-1), the number of pairs",
           lambda: (np.array(total / n ** 2),))
    yield ("half the value: the pairs i < j summed but divided by n(n-1), the number of ORDERED pairs; sum both "
           "(i, j) and (j, i), or divide the sum over i < j by n(n-1)/2", lambda: (np.array(total / 2 / pairs),))
    yield ("the upper triangle with its diagonal (np.triu_indices(n) includes i == j); use "
           "np.triu_indices(n, k=1)", lambda: (np.array((total / 2 + np.trace(cos)) / (n * (n + 1) / 2)),))
    if (cos[off] < 0).any():
        yield ("the mean of the absolute values of the cosines; keep their signs (anisotropy can be negative)",
               lambda: (np.array(np.abs(cos[off]).mean()),))
    yield ("the mean cosine distance 1 - cos instead of the mean cosine",
           lambda: (np.array((1.0 - cos[off]).mean()),))
    yield ("the mean dot product: the rows were not normalised; divide each row by its norm first",
           lambda: (np.array((X @ X.T)[off].mean()),))
    column_norms = np.linalg.norm(X, axis=0, keepdims=True)
    by_column = X / np.where(column_norms > 0, column_norms, 1.0)
    yield ("the columns normalised (np.linalg.norm(X, axis=0)) instead of the rows: each row must have norm 1, "
           "axis=1 with keepdims=True", lambda: (np.array((by_column @ by_column.T)[off].mean()),))
    if n == X.shape[1]:
        row_norms = np.linalg.norm(X, axis=1)
        wrong = X / np.where(row_norms > 0, row_norms, 1.0)[None, :]
        yield ("column j divided by the norm of row j: the norms (n,) broadcast along the last axis; keep the "
               "axis, np.linalg.norm(X, axis=1, keepdims=True), so that each row is divided by its own norm",
               lambda: (np.array((wrong @ wrong.T)[off].mean()),))


def _anisotropy_eps_variants(d):
    """X / (norm + eps): off by little more than rounding, except for rows of 1e-160 (matched to 1e-12)."""
    X = d["X"]
    off = ~np.eye(len(X), dtype=bool)
    unit = _unit(X)
    norms = np.linalg.norm(X / _HUGE, axis=1, keepdims=True) * _HUGE if d["magnitude"] == "huge" else \
        np.linalg.norm(X, axis=1, keepdims=True)
    for eps in (1e-8, 1e-12, 1e-10, 1e-9, 1e-7, 1e-6, 1e-5):
        yield (f"an eps added to each norm (norm + {eps:g}), which shrinks every cosine a little (the more, the "
               f"shorter the rows); divide by the norm itself, replacing only a norm that is exactly 0 "
               f"(np.where(norms > 0, norms, 1))",
               lambda eps=eps: (np.array(((unit * (norms / (norms + eps))) @ (unit * (norms / (norms + eps))).T)
                                         [off].mean()),))


def _judge_anisotropy(case, got, expected):
    d = case.data
    n = len(d["X"])
    if isinstance(got, torch.Tensor):
        return "the result is a torch.Tensor, expected a number: this exercise is NumPy (return float(...))"
    if isinstance(got, np.ndarray) and got.ndim > 0:
        if got.shape == (n, n):
            return (f"the result has shape {got.shape}, the matrix of cosines; return one number, the mean of its "
                    f"entries off the diagonal (i != j)")
        return f"the result has shape {got.shape}, expected a single number (the mean cosine)"
    value = as_scalar(got)
    if value is None:
        return f"the result is {describe(got)}, expected a number (a float)"
    if not math.isfinite(value):
        if d["zero"].any():
            return (f"the result is {value} for a case with a zero row: dividing it by its norm is 0 / 0; a zero "
                    f"row has cosine 0 with every other row (its pairs still count), so divide only by norms that "
                    f"are not 0, e.g. np.where(norms > 0, norms, 1)")
        if d["magnitude"] == "huge":
            return (f"the result is {value} for entries of about 1e150: an overflow, since a squared norm is about "
                    f"1e300 and a product of two of them (1e600) is inf in float64 (float32 overflows already "
                    f"beyond 3.4e38); divide each row by its own norm, in float64, before taking dot products")
        if d["magnitude"] == "tiny":
            return (f"the result is {value} for entries of about 1e-160: an underflow, since a squared norm is "
                    f"about 1e-320 and a product of two of them (1e-640) is 0 in float64, so a cosine divided "
                    f"by it is x / 0; divide each row by its own norm before taking dot products")
        return f"the result is {value}"
    tolerance = F32 if "float32" in case.tags else F64
    return _scalar_problem(value, expected, tolerance, "the result", _anisotropy_mistakes(d),
                           precise=_anisotropy_eps_variants(d),
                           note=(", which is the size of float32 rounding (or of an eps added to the norms): compute "
                                 "in float64 throughout (no np.float32 or torch float32 inside) and divide each row "
                                 "by its norm itself; float64 answers must agree to atol {atol:g} and rtol {rtol:g}"))


def _explain_anisotropy_error(error):
    text = str(error)
    if "could not be broadcast" in text:
        return ("np.linalg.norm(X, axis=1) has shape (n,); keep the axis (keepdims=True, or norms[:, None]) so "
                "that each row is divided by its own norm")
    if "must be Tensor" in text or "has no attribute 'norm'" in text or "has no attribute 'dim'" in text:
        return "X is a NumPy array: use np.linalg.norm and @ (this exercise is NumPy)"
    return None


check_anisotropy = Spec(
    declared.check_anisotropy,
    cases=_anisotropy_cases,
    reference=_anisotropy_reference,
    judge=_judge_anisotropy,
    seal=ANISOTROPY_SEAL,
    explain_error=_explain_anisotropy_error,
    clauses=(
        ("the mean of cos(X[i], X[j]) over the n (n - 1) ordered pairs with i != j; the diagonal does not count",
         lambda c: True),
        ("X of n >= 2 vectors: two", lambda c: c.data["X"].shape[0] == 2),
        ("X float32", lambda c: "float32" in c.tags),
        ("a row of zeros: cosine 0 with every other row, never NaN, and its pairs still count",
         lambda c: "zero row" in c.tags),
        ("a row of tiny numbers (1e-160) still has a direction: no epsilon on the norms", lambda c: "tiny" in c.tags),
    ),
)


# ============================================================================
# whitening(X, k=None) -> (mu, W), NumPy


def _whitening_seal():
    seal = [
        (ref_sentence_embeddings.whitening, "plmcourse.ref.whitening"),
        (ref_sentence_embeddings.whiten, "plmcourse.ref.whiten"),
    ]
    pca = _loaded_class("sklearn.decomposition", "PCA")
    if pca is not None:
        for name in ("fit", "fit_transform", "_fit"):  # the undecorated methods: fit's wrapper is shared
            method = getattr(pca, name, None)
            if callable(method):
                seal.append((inspect.unwrap(method), "sklearn.decomposition.PCA"))
    return seal


def _rotation(rng, d):
    Q, R = np.linalg.qr(rng.standard_normal((d, d)))
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)


def _whitening_case(seed, n, d, k="omitted", dtype=np.float64, ratio=0.7, positional=False):
    """X = sqrt(n - 1) Z diag(scales) R + offset, Z (n, d) centred with orthonormal columns, R a rotation:
    np.cov(X.T) = R^T diag(scales^2) R exactly, so its eigenvalues are scales^2, at least a factor `ratio`
    apart (the directions are unique up to sign), and the mean of the rows is offset, far from 0.

    k: "omitted" (not passed), None (passed as k=None) or an int (passed as k=..., or positionally).
    """
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, d))
    Z, _ = np.linalg.qr(Z - Z.mean(axis=0))
    scales = rng.uniform(1.0, 3.0) * ratio ** (np.arange(d) + rng.uniform(-0.25, 0.25, d))
    offset = rng.uniform(2.0, 5.0, d) * rng.choice([-1.0, 1.0], d)
    X = (np.sqrt(n - 1) * (Z * scales) @ _rotation(rng, d) + offset).astype(dtype)
    if k == "omitted":
        args, kwargs, shown = (X,), {}, "k not passed (all d components)"
    elif positional:
        args, kwargs, shown = (X, k), {}, f"k={k} (positional)"
    else:
        args, kwargs, shown = (X,), {"k": k}, f"k={k}"
    label = f"seed {seed}: X of shape ({n}, {d}), {shown}" + (", float32" if dtype == np.float32 else "")
    return Case(label, args, kwargs, tags=frozenset({"float32"} if dtype == np.float32 else ()),
                data={"X": X.astype(np.float64), "k": d if k in ("omitted", None) else k})


def _whitening_cases(hidden):
    cases = [
        _whitening_case(0, 50, 4),
        _whitening_case(1, 40, 3, k=None),
        _whitening_case(2, 60, 5, k=2),
        _whitening_case(3, 30, 6, k=1),
        _whitening_case(4, 25, 4, k=4),
        _whitening_case(5, 20, 1),
        _whitening_case(6, 12, 2, k=1, positional=True),
        _whitening_case(7, 9, 7, k=3),
        _whitening_case(8, 300, 64, k=16, ratio=0.93),
        _whitening_case(9, 80, 8, k=3, dtype=np.float32),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _whitening_case(salt + 100, 45, 5),
            _whitening_case(salt + 101, 200, 48, k=None, ratio=0.92),
            _whitening_case(salt + 102, 15, 3, k=3, positional=True),
            _whitening_case(salt + 103, 70, 10, k=1),
            _whitening_case(salt + 104, 6, 1, k=1),
            _whitening_case(salt + 105, 100, 12, k=7, dtype=np.float32),
            _whitening_case(salt + 106, 35, 2),
            _whitening_case(salt + 107, 64, 6, dtype=np.float32),
        ]
    return cases


def _descending(C):
    """U, s of a symmetric positive semi-definite matrix, largest s first (np.linalg.svd)."""
    U, s, _ = np.linalg.svd(np.atleast_2d(C))
    return U, s


def _whitening_reference(case):
    return ref_sentence_embeddings.whitening(case.data["X"], case.data["k"])


def _align(W, like):
    """W with each column's sign flipped to agree with the same column of `like` (same shape)."""
    signs = np.where(np.sum(W * like, axis=0) < 0, -1.0, 1.0)
    return W * signs


def _whitening_mistakes(X, k):
    n, d = X.shape
    U, s = _descending(np.cov(X.T))
    U, s = U[:, :d], s[:d]

    def scaled(U, s):
        return U[:, :k] / np.sqrt(s[:k])

    raw = "the mean not subtracted: the covariance of the raw X; np.cov(X.T) centres the data first"
    yield raw, lambda: scaled(*_descending(X.T @ X / (n - 1)))
    yield raw, lambda: scaled(*_descending(X.T @ X / n))
    if d > 1:
        yield ("the components in ascending order of variance (np.linalg.eigh returns the smallest eigenvalue "
               "first): sort them, largest first", lambda: scaled(U[:, ::-1], s[::-1]))
        yield ("the eigenvalues and the eigenvectors sorted differently: reorder both with the same order, "
               "largest eigenvalue first", lambda: scaled(U, s[::-1]))
        yield ("the eigenvalues and the eigenvectors sorted differently: reorder both with the same order, "
               "largest eigenvalue first", lambda: scaled(U[:, ::-1], s))
        yield ("U transposed: the principal directions are the COLUMNS of U, U[:, :k] (np.linalg.svd returns "
               "U with the directions as columns, Vt with them as rows)", lambda: U.T[:, :k] / np.sqrt(s[:k]))
    if k == d and d > 1:
        rows = ("the ROWS of U scaled (or W transposed): the principal directions are the columns of U, and "
                "column j is divided by np.sqrt(s[j]), U[:, :k] / np.sqrt(s[:k])")
        yield rows, lambda: U / np.sqrt(s)[:, None]
        yield rows, lambda: (U / np.sqrt(s)).T
    yield ("1 / s instead of 1 / np.sqrt(s): s holds variances, and each direction is scaled by one over its "
           "standard deviation", lambda: U[:, :k] / s[:k])
    yield "U multiplied by np.sqrt(s) instead of divided by it", lambda: U[:, :k] * np.sqrt(s[:k])
    yield ("U[:, :k] without the scaling: the data are rotated but not scaled to variance 1; divide column j "
           "by np.sqrt(s[j])", lambda: U[:, :k])
    yield ("a covariance divided by n (ddof=0, np.cov(X.T, bias=True) or np.var); np.cov divides by n - 1",
           lambda: scaled(U, s * (n - 1) / n))
    yield ("the SVD of the centred data used directly, W = V / sigma: the singular values of X - mu are "
           "sqrt((n - 1) s), so divide by sigma / sqrt(n - 1) instead (or use np.cov)",
           lambda: scaled(U, s * (n - 1)))
    if k == d and d > 1:
        yield ("ZCA whitening, U diag(1 / sqrt(s)) U^T: it whitens too, but BERT-whitening keeps the data in "
               "the rotated coordinates, W = U[:, :k] / np.sqrt(s[:k]), without the rotation back",
               lambda: U / np.sqrt(s) @ U.T)


def _whitening_note(X, mu, W, tolerance):
    """Whether (X - mu) @ W has identity covariance: a phrase for the message."""
    with np.errstate(all="ignore"):
        C = np.atleast_2d(np.cov(((X - mu) @ W).T))
        off = float(np.max(np.abs(C - np.eye(len(C))))) if np.isfinite(C).all() else np.inf
    if off <= (1e-6 if tolerance is F64 else 1e-3):
        return ("(X - mu) @ W with your mu and W does have identity covariance, so it whitens X, but "
                "BERT-whitening's W is the particular one U[:, :k] / np.sqrt(s[:k]), directions of largest "
                "variance first")
    return f"(X - mu) @ W with your mu and W does not have identity covariance (it is off by up to {off:.3g})"


def _judge_whitening(case, got, expected):
    X, k = case.data["X"], case.data["k"]
    n, d = X.shape
    mu_want, W_want = expected
    tolerance = F32 if "float32" in case.tags else F64
    if isinstance(got, np.ndarray):
        if got.shape == (n, k):
            return (f"your function returned one array of shape {got.shape}, the whitened data (X - mu) @ W; "
                    f"return the pair (mu, W), which whitens any other X the same way")
        return f"your function returned a NumPy array of shape {got.shape}, expected the pair (mu, W)"
    problem = expect_array_pair(got, "(mu, W)", ("mu (the first item)", "W (the second item)"))
    if problem:
        return problem
    mu, W = got
    if mu.ndim == 2 and W.shape == (d,):
        return "(W, mu) came back in the wrong order: return mu first, then W (return mu, W)"
    if mu.shape != (d,):
        hint = {(n,): " (the mean of each row, axis=1; mu is the mean of the rows, X.mean(axis=0))",
                (1, d): " (keepdims=True; return a vector of shape (d,))",
                (): " (the mean of all entries; mu is the mean of the rows, X.mean(axis=0))"}.get(mu.shape, "")
        return f"mu has shape {mu.shape}, expected ({d},){hint}"
    if W.shape != (d, k):
        whitened = (X - mu_want) @ W_want
        if W.shape == (n, k) and close(_align(W, whitened), whitened, **tolerance):
            hint = ", the whitened data (X - mu) @ W; return W itself"
        elif W.shape == (d, d):
            hint = ": k was ignored; keep the first k columns, U[:, :k] / np.sqrt(s[:k])"
        elif W.shape == (k, d):
            hint = (": rows of U instead of its columns; the principal directions are the columns of U, "
                    "U[:, :k]")
        elif W.ndim == 2 and W.shape[0] == n:
            hint = (": np.cov(X) treats each ROW as a variable, giving an (n, n) matrix; the covariance of the "
                    "d features is np.cov(X.T), (d, d)")
        else:
            hint = ""
        return f"W has shape {W.shape}, expected ({d}, {k}){hint}"
    for item, name in ((mu, "mu"), (W, "W")):
        if item.dtype != np.float64:
            return (f"{name} has dtype {item.dtype}, expected float64: convert X first, "
                    f"np.asarray(X, dtype=np.float64)")
    problem = compare(mu, mu_want, **tolerance, what="mu")
    if problem:
        if not np.any(mu):
            return ("mu is all zeros, expected the mean of the rows, X.mean(axis=0) (these data have a mean far "
                    "from 0, and whitening subtracts it)")
        return f"{problem} (mu is the mean of the rows, X.mean(axis=0))"
    if not np.isfinite(W).all():
        return (f"W contains {W[~np.isfinite(W)][0]}: every variance divided into, s[:k], must be positive "
                f"(the covariance of the d columns of X, np.cov(X.T), has no zero variance here)")
    problem = compare(_align(W, W_want), W_want, **tolerance, what="W (each column compared up to its sign)")
    if problem is None:
        return None
    mistakes = ((text, lambda compute=compute: (_align(compute(), W),)) for text, compute in _whitening_mistakes(X, k))
    mistake = first_match((W,), mistakes, **tolerance)
    return f"{matches(problem, mistake)}; {_whitening_note(X, mu, W, tolerance)}"


def _explain_whitening_error(error):
    return hint_for(error, [
        (("0-dimensional array",),
         "with a single column (d = 1), np.cov(X.T) is a 0-d array, one variance; make it a (1, 1) "
         "matrix with np.atleast_2d before the decomposition"),
        (("NoneType", "slice indices must be integers"),
         "k may be None (the default): keep all d components then, k = X.shape[1]"),
        (("mismatch in its core dimension", "not aligned"),
         "X - mu is (n, d) and W must be (d, k); check which axis np.cov and the decomposition work on"),
        (("could not be broadcast",),
         "U[:, :k] (d, k) divided by np.sqrt(s[:k]) (k,) scales each column; check the shapes of U and s "
         "(and that mu has shape (d,))"),
        (("did not converge", "infs or NaNs"), "the matrix decomposed contains NaN or inf"),
    ])


check_whitening = Spec(
    declared.check_whitening,
    cases=_whitening_cases,
    reference=_whitening_reference,
    judge=_judge_whitening,
    seal=_whitening_seal,
    explain_error=_explain_whitening_error,
    clauses=(
        ("mu (d,): the mean of the rows; W = U[:, :k] / sqrt(s[:k]) of C = np.cov(X.T)", lambda c: True),
        ("k not passed: all d columns", lambda c: len(c.args) == 1 and "k" not in c.kwargs),
        ("k=None: all d columns", lambda c: "k" in c.kwargs and c.kwargs["k"] is None),
        ("k < d: the first k columns, largest variance first", lambda c: c.data["k"] < c.data["X"].shape[1]),
        ("d = 1: np.cov returns a single number (np.atleast_2d)", lambda c: c.data["X"].shape[1] == 1),
        ("X float32; both results float64", lambda c: "float32" in c.tags),
    ),
)


# ============================================================================
# info_nce_loss(z1, z2, temperature=0.05, hard_negatives=None), PyTorch

DEFAULT_TEMPERATURE = 0.05


def _info_nce_seal():
    seal = [
        (ref_sentence_embeddings.info_nce_loss, "plmcourse.ref.info_nce_loss"),
        (nn_sentence_embeddings.info_nce_loss, "plmcourse.nn.info_nce_loss"),
    ]
    loss = _loaded_class("sentence_transformers.losses", "MultipleNegativesRankingLoss")
    if loss is not None:
        seal.append((loss, "sentence_transformers.losses.MultipleNegativesRankingLoss"))
    return seal


def _vectors(rng, m, d):
    """m random directions with norms between 50 and 200: never short, so that an eps added to a norm
    (x / (norm + 1e-8)), as good as F.normalize, changes the loss by far less than the tolerance."""
    x = rng.standard_normal((m, d))
    if d == 1:
        x = np.where(x < 0, -1.0, 1.0)
    return x / np.linalg.norm(x, axis=1, keepdims=True) * rng.uniform(50.0, 200.0, (m, 1))


def _near(rng, rows, spread):
    """Each row plus a random vector of `spread` times its norm (d = 1: the row rescaled, same sign)."""
    m, d = rows.shape
    if d == 1:
        return rows * rng.uniform(0.5, 2.0, (m, 1))
    noise = rng.standard_normal((m, d))
    noise *= np.linalg.norm(rows, axis=1, keepdims=True) / np.linalg.norm(noise, axis=1, keepdims=True)
    return rows + spread * noise


def _nce_case(seed, B, d, device, temperature=None, keyword_temperature=False, hard=None, hard_keyword=False,
              none_passed=False, dtype=torch.float64, zero=(), copies=False, spread=2.0):
    """z1 (B, d); z2 = z1 + noise of `spread` times its norm (positives with cosines of about 0.45 for the
    default spread, a batch that is not too easy); hard negatives (hard, d) near random rows of z1 (cosines
    of about 0.7). temperature None: not passed (the default, 0.05).

    Passing: temperature positionally (or as a keyword), hard_negatives positionally after it (its gradient is
    then judged), as a keyword (hard_keyword, or when temperature is not passed), or hard_negatives=None
    (none_passed). zero: which of "z1", "z2", "hard_negatives" get a zero row; copies: z2 is z1 itself.
    """
    rng = np.random.default_rng(seed)
    z1 = _vectors(rng, B, d)
    z2 = _near(rng, z1, spread)
    negatives = _near(rng, z1[rng.integers(0, B, hard)], 1.0) if hard else None
    zero_rows = {}
    for name, array in (("z1", z1), ("z2", z2), ("hard_negatives", negatives)):
        if name in zero:
            zero_rows[name] = int(rng.integers(0, len(array)))
            array[zero_rows[name]] = 0.0

    def leaf(a):
        return torch.tensor(a, dtype=dtype, device=device, requires_grad=True)

    z1_t = leaf(z1)
    z2_t = z1_t if copies else leaf(z2)
    hard_t = None if negatives is None else leaf(negatives)
    args, kwargs, leaves = [z1_t, z2_t], {}, [0, 1]
    tau = DEFAULT_TEMPERATURE if temperature is None else temperature
    if temperature is not None:
        if keyword_temperature:
            kwargs["temperature"] = temperature
        else:
            args.append(temperature)
    if hard_t is not None:
        if temperature is None or keyword_temperature or hard_keyword:
            kwargs["hard_negatives"] = hard_t
        else:
            args.append(hard_t)
            leaves.append(len(args) - 1)
    elif none_passed:
        kwargs["hard_negatives"] = None
    name = str(dtype).replace("torch.", "")
    label = f"seed {seed}: z1, z2 of shape ({B}, {d}) {name}"
    label += ", z2 is z1 itself" if copies else ""
    label += (", temperature not passed (default 0.05)" if temperature is None else
              f", temperature={temperature:g}" + (" (keyword)" if keyword_temperature else ""))
    if hard_t is not None:
        label += f", {hard} hard negative{'s' if hard > 1 else ''}"
        label += " (keyword)" if "hard_negatives" in kwargs else ""
    else:
        label += ", hard_negatives=None" if none_passed else ", no hard negatives"
    label += "".join(f", {_rows([row])} of {which} all zeros" for which, row in zero_rows.items())
    tags = {"float32"} if dtype == torch.float32 else set()
    tags |= {"default temperature"} if temperature is None else set()
    tags |= {"zero row"} if zero_rows else set()
    z1, z2 = to_numpy(z1_t).astype(np.float64), to_numpy(z2_t).astype(np.float64)  # as sent (float32 rounded)
    negatives = None if hard_t is None else to_numpy(hard_t).astype(np.float64)
    data = {"z1": z1, "z2": z2, "hard": negatives, "tau": tau, "copies": copies,
            "zero": zero_rows, "dtype": dtype, "hard_leaf": hard_t is not None and "hard_negatives" not in kwargs,
            "device": device}
    return Case(label, tuple(args), kwargs, tags=frozenset(tags), data=data, grad_leaves=tuple(leaves))


def _info_nce_cases(hidden, device):
    cases = [
        _nce_case(0, 4, 8, device),
        _nce_case(1, 5, 6, device, temperature=0.1),
        _nce_case(2, 4, 8, device, temperature=1.0, none_passed=True),
        _nce_case(3, 3, 5, device, temperature=0.05, hard=3),
        _nce_case(4, 4, 4, device, temperature=0.1, hard=1),
        _nce_case(5, 3, 6, device, temperature=0.01, hard=6),
        _nce_case(6, 4, 6, device, hard=4),
        _nce_case(7, 1, 5, device),
        _nce_case(8, 1, 5, device, temperature=0.1, hard=2),
        _nce_case(9, 4, 1, device, temperature=0.1),
        _nce_case(10, 8, 384, device, temperature=0.05, keyword_temperature=True, spread=6.0),
        _nce_case(11, 4, 16, device, hard=4, dtype=torch.float32),
        _nce_case(12, 4, 16, device, temperature=0.1, dtype=torch.float32),
        _nce_case(13, 4, 6, device, temperature=0.1, zero=("z1",)),
        _nce_case(14, 4, 6, device, temperature=0.05, hard=3, zero=("z2", "hard_negatives")),
        _nce_case(15, 5, 3, device, temperature=0.1, copies=True),
        _nce_case(16, 6, 4, device, temperature=0.001, spread=3.0),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _nce_case(salt + 100, 6, 12, device),
            _nce_case(salt + 101, 16, 32, device, temperature=0.07, hard=16),
            _nce_case(salt + 102, 3, 3, device, temperature=0.5, hard=9, hard_keyword=True),
            _nce_case(salt + 103, 5, 10, device, temperature=0.02, hard=1),
            _nce_case(salt + 104, 2, 1, device, hard=2),
            _nce_case(salt + 105, 4, 768, device, temperature=0.05, none_passed=True, spread=8.0),
            _nce_case(salt + 106, 6, 8, device, temperature=0.01, hard=5, dtype=torch.float32),
            _nce_case(salt + 107, 5, 8, device, temperature=0.2, hard=4, zero=("hard_negatives",)),
            _nce_case(salt + 108, 3, 4, device, zero=("z1", "z2")),
            _nce_case(salt + 109, 5, 6, device, temperature=0.1, hard=3, copies=True),
            _nce_case(salt + 110, 1, 3, device, temperature=0.001, hard=1, spread=3.0),
            _nce_case(salt + 111, 6, 4, device, temperature=0.001, hard=6, spread=3.0),
        ]
    return cases


def _info_nce_reference(case):
    """The value of plmcourse.ref.info_nce_loss (float64) and the gradients of plmcourse.nn.info_nce_loss in
    float64 with respect to z1, z2 and (when judged) hard_negatives; for z2 = z1, the sum of both."""
    d = case.data
    value = ref_sentence_embeddings.info_nce_loss(d["z1"], d["z2"], d["tau"], d["hard"])
    z1 = torch.tensor(d["z1"], requires_grad=True)
    z2 = z1 if d["copies"] else torch.tensor(d["z2"], requires_grad=True)
    hard = None if d["hard"] is None else torch.tensor(d["hard"], requires_grad=True)
    loss = nn_sentence_embeddings.info_nce_loss(z1, z2, d["tau"], hard)
    leaves = [z1, z2] + ([hard] if d["hard_leaf"] else [])
    unique = list({id(t): t for t in leaves}.values())
    grads = dict(zip(map(id, unique), torch.autograd.grad(loss, unique)))
    return value, [grads[id(t)].numpy() for t in leaves]


def _nce_numpy(z1, candidates, tau, *, cosine=True, scale=None, axis=1, targets=None, reduce="mean",
               with_positive=True, normalise_axis=-1):
    """The InfoNCE loss in float64 NumPy, with the switches that reproduce known mistakes."""
    B = len(z1)
    if cosine:
        a, b = (_unit(x) if normalise_axis == -1 else x / np.linalg.norm(x, axis=0, keepdims=True)
                for x in (z1, candidates))
    else:
        a, b = z1, candidates
    logits = a @ b.T * (1.0 / tau if scale is None else scale)  # (B, B + M)
    rows = np.arange(B)
    columns = rows if targets is None else targets
    if not with_positive:
        positive = logits[rows, columns]
        others = np.where(np.eye(*logits.shape, dtype=bool), -np.inf, logits)
        top = others.max(axis=1)
        per_row = -positive + top + np.log(np.exp(others - top[:, None]).sum(axis=1))
    else:
        per_row = -log_softmax(logits, axis=axis)[rows, columns]
    return np.array(per_row.sum() if reduce == "sum" else per_row.mean())


def _info_nce_mistakes(d, tags):
    z1, z2, hard, tau = d["z1"], d["z2"], d["hard"], d["tau"]
    candidates = z2 if hard is None else np.concatenate([z2, hard])
    B = len(z1)

    def loss(**switches):
        return lambda: (_nce_numpy(z1, candidates, tau, **switches),)

    yield ("dot products instead of cosines: normalise the rows first (F.normalize(x, dim=-1))",
           loss(cosine=False))
    if "default temperature" in tags:
        for other in (0.1, 0.07, 0.5, 0.2, 0.01, 0.02):
            yield (f"a temperature of {other:g} where none was passed: the default must be "
                   f"temperature=0.05", loss(scale=1.0 / other))
    if tau != DEFAULT_TEMPERATURE:
        yield ("a temperature of 0.05 whatever the argument says: divide by the temperature argument, not by a "
               "constant", loss(scale=1.0 / DEFAULT_TEMPERATURE))
    if tau != 1.0:
        yield ("the cosines not divided by the temperature (logits = cos, as if it were 1): "
               "logits = cos / temperature", loss(scale=1.0))
        yield "the cosines multiplied by the temperature instead of divided by it", loss(scale=tau)
    yield ("the rows normalised along dim 0 (each feature over the batch) instead of each vector along its "
           "last dim (dim=-1)", loss(normalise_axis=0))
    if B > 1:
        yield ("the softmax over the wrong axis (dim 0, or the logits transposed): row i of the logits scores "
               "z1[i] against every candidate, so the softmax runs along dim 1", loss(axis=0))
        yield "the sum over the batch instead of the mean", loss(reduce="sum")
        yield ("the positive left out of the denominator: the softmax runs over all B + M candidates, the "
               "positive z2[i] included", loss(with_positive=False))
        yield ("targets of 0 for every row instead of torch.arange(B): row i's positive is column i",
               loss(targets=np.zeros(B, dtype=int)))
        backward = _nce_numpy(z2, z1, tau)
        yield ("a symmetric loss (the two directions averaged), but SimCSE's loss, as specified, goes one way "
               "only: z1 against the candidates [z2; hard_negatives]",
               lambda: (np.array((_nce_numpy(z1, candidates, tau) + backward) / 2),))
    if hard is not None:
        yield ("the hard negatives ignored: every row of z1 is compared with [z2; hard_negatives], "
               "torch.cat([z2, hard_negatives], dim=0)", lambda: (_nce_numpy(z1, z2, tau),))
    if hard is not None and len(hard) >= B:
        def own_row():  # one extra column: cos(z1[i], hard[i]) only
            unit = lambda x: x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-300)  # noqa: E731
            a, b, h = unit(z1), unit(z2), unit(hard[:B])
            logits = np.concatenate([a @ b.T, (a * h).sum(-1, keepdims=True)], axis=1) / tau
            top = logits.max(axis=1, keepdims=True)
            log_z = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
            return (np.array((log_z - np.diag(logits[:, :B])).mean()),)
        yield ("each hard negative scored against its own row only (one extra column, cos(z1[i], h[i])), but every "
               "hard negative joins the candidates of EVERY row: logits = cos(z1, [z2; hard_negatives]), "
               "shape (B, B + M)", own_row)
    yield ("the log-likelihood instead of the loss: the minus sign is missing",
           lambda: (-_nce_numpy(z1, candidates, tau),))


def _nce_no_flow(detail=""):
    return (f"gradients do not flow{detail}: a .detach(), .item(), .numpy() or torch.tensor(...) on the way "
            f"cuts the autograd graph, keep every step in torch")


def _judge_info_nce(case, got, expected):
    d = case.data
    z1 = case.args[0]
    if type(got) is float:
        return "the loss is a Python float; return the tensor itself (no .item()) so that gradients can flow"
    problem = expect_loss(
        got, case.reply, z1, inputs="z1 and z2", like_name="z1", no_flow=_nce_no_flow,
        keep_dtype="keep z1's dtype (no .float() or .double(); make new tensors with dtype=z1.dtype)",
        keep_device="make new tensors on z1.device",
        shape_hint=lambda shape: (" (one loss per row: take their mean)" if shape == (len(z1),) else
                                  " (use .mean(), or F.cross_entropy's default reduction)"
                                  if math.prod(shape) == 1 else ""))
    if problem:
        return problem
    value = float(to_numpy(got))
    expected_value, expected_grads = expected
    if not math.isfinite(value):
        if d["zero"]:
            return (f"the loss is {value} for a case with a zero vector: x / x.norm() is 0 / 0 for it; a zero "
                    f"vector has cosine 0 with everything, so clamp the norm, F.normalize(x, dim=-1) or "
                    f"x / x.norm(dim=-1, keepdim=True).clamp(min=1e-12)")
        if abs(1.0 / d["tau"]) > math.log(torch.finfo(got.dtype).max):
            return (f"the loss is {value} for logits of up to {1.0 / d['tau']:g} (temperature {d['tau']:g}): an "
                    f"overflow, exp of logits this large is inf (and a softmax that rounds to 0 has log -inf); "
                    f"use F.cross_entropy, torch.log_softmax or torch.logsumexp, which subtract the max first")
        return f"the loss is {value}"
    tolerance = F32 if "float32" in case.tags else F64
    problem = _scalar_problem(value, expected_value, tolerance, "the loss", _info_nce_mistakes(d, case.tags))
    if problem:
        return problem
    return _judge_info_nce_gradients(case, expected_grads, tolerance)


def _judge_info_nce_gradients(case, expected_grads, tolerance):
    d = case.data
    reply = case.reply
    names = ["z1", "z2", "hard_negatives"][:len(expected_grads)]
    if reply.grad_error:
        return f"computing the gradients through your function raised {reply.grad_error}"
    for grad, want, name in zip(reply.grads, expected_grads, names):
        if grad is None:
            if not np.any(want):
                continue  # nothing flows there (B = 1 without hard negatives: the loss is 0 whatever z is)
            return _nce_no_flow(f" to {name}")
        grad = to_numpy(grad).astype(np.float64)
        if grad.shape != want.shape:
            return f"the gradient with respect to {name} has shape {grad.shape}, expected {want.shape}"
        zero = d["zero"].get(name if name != "z2" or not d["copies"] else "z1")
        finite = np.isfinite(grad)
        if not finite.all():
            at = zero if zero is not None and not finite[zero].all() else int(np.argwhere(~finite)[0][0])
            if at == zero:
                return (f"the gradient with respect to {name} is {grad[at][~finite[at]][0]} at its zero row: "
                        f"replacing the NaN of 0 / 0 afterwards (torch.where, nan_to_num) leaves it in the backward "
                        f"pass; clamp the norm before dividing (F.normalize(x, dim=-1))")
            return f"the gradient with respect to {name} contains {grad[at][~finite[at]][0]} (row {at})"
        keep = np.ones(len(want), dtype=bool)
        if zero is not None:
            keep[zero] = False  # only finiteness is asked of a zero row's own gradient
        what = f"the gradient with respect to {name}" + ("" if zero is None else " (its zero row left out)")
        problem = compare(grad[keep], want[keep], **tolerance, what=what)
        if problem:
            return (f"{problem}, although the loss is right: a .detach() (or torch.no_grad) probably cuts part of "
                    f"the graph, e.g. at the norms")
    return None


def _explain_info_nce_error(error):
    return hint_for(error, [
        (("Sizes of tensors must match",),
         "hard_negatives (M, d) go below z2 (B, d), along dim 0: torch.cat([z2, hard_negatives], dim=0); "
         "M need not equal B"),
        (("cannot be multiplied", "size mismatch", "must match the size"),
         "the logits are (B, B + M): z1 (B, d) times the candidates transposed, (d, B + M); the hard "
         "negatives join z2 along dim 0"),
        (("batch_size", "out of bounds"),
         "F.cross_entropy needs logits (B, B + M), one row per row of z1, and targets torch.arange(B); "
         "concatenate the hard negatives to z2 (not to z1), and do not transpose the logits"),
        (("NoneType", "got None"),
         "hard_negatives may be None (the default): concatenate them only when they are given"),
        (("leaf Variable that requires grad", "a view of a leaf Variable"),
         "do not normalise z1 or z2 in place (div_, /=): z1 = z1 / norm makes a new tensor"),
        NO_NUMPY_HINT,
        (("dtype", "expected scalar type"),
         "keep z1's dtype: make new tensors with dtype=z1.dtype (or use the tensors you are given)"),
        (("same device",), "make new tensors on z1.device"),
    ])


check_info_nce_loss = Spec(
    declared.check_info_nce_loss,
    cases=_info_nce_cases,
    reference=_info_nce_reference,
    judge=_judge_info_nce,
    seal=_info_nce_seal,
    explain_error=_explain_info_nce_error,
    clauses=(
        ("temperature not passed: 0.05", lambda c: "default temperature" in c.tags),
        ("temperature passed", lambda c: "default temperature" not in c.tags),
        ("hard_negatives None (or not passed): the B rows of z2 are the candidates", lambda c: c.data["hard"] is None),
        ("hard_negatives (M, d): the rows of z2 followed by them, B + M candidates",
         lambda c: c.data["hard"] is not None and len(c.data["hard"]) > 1),
        ("... any M >= 1", lambda c: c.data["hard"] is not None and len(c.data["hard"]) == 1),
        ("logits: the cosine similarity divided by temperature", lambda c: True),
        ("the mean over the B rows of the cross-entropy of row i with target i", lambda c: len(c.data["z1"]) > 1),
        ("a zero vector has cosine 0 with everything: never NaN, in the loss or in its gradient",
         lambda c: "zero row" in c.tags),
        ("a 0-d tensor of z1's dtype", lambda c: "float32" in c.tags),
        ("differentiable with respect to z1, z2 and hard_negatives", lambda c: c.data["hard_leaf"]),
    ),
)
