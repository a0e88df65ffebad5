"""Checks for the word-vectors notebook: a stable log-softmax, word2vec's noise distribution, and
the skip-gram negative-sampling loss with its gradients (all NumPy).

Each check runs the student's function on seeded cases (hidden=True adds more, with
other seeds and shapes), compares with `plmcourse.ref`, and on a wrong answer says
which known mistake the answer matches, when it matches one. The reference's
gradients are themselves held against finite differences and torch autograd in
tests/test_ref_word_vectors.py.
"""

import sys

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import nn as course_nn
from plmcourse import ref
from plmcourse.grading import word_vectors as declared
from plmcourse.judging.core import (
    F32, F64, Case, Spec, as_scalar, close, compare, describe, expect_array, expect_float_array, explain_shape_error,
    first_match, hidden_salt, logits_case, matches, name_mistake, noted,
)

__all__ = ["check_log_softmax", "check_noise_distribution", "check_skipgram_negative_sampling_loss"]


AUTOGRAD = "torch autograd ({})"


def _tolerance(*arrays):
    return F32 if any(np.asarray(a).dtype == np.float32 for a in arrays) else F64


# ----------------------------------------------------------------------------
# log_softmax(x, axis=-1), NumPy

# The softmaxes that neither NumPy exercise, softmax (notebook 03) nor log_softmax, may call.
COURSE_SOFTMAX = [(ref.softmax, "plmcourse.ref.softmax"), (course_nn.softmax, "plmcourse.nn.softmax")]
TORCH_SOFTMAX = [(torch.softmax, "torch.softmax"), (torch.Tensor.softmax, "torch.Tensor.softmax"),
                 (F.softmax, "torch.nn.functional.softmax")]
TORCH_LOG_SOFTMAX = [(torch.log_softmax, "torch.log_softmax"), (torch.Tensor.log_softmax, "torch.Tensor.log_softmax"),
                     (F.log_softmax, "torch.nn.functional.log_softmax")]

LOG_SOFTMAX_SEAL = [(ref.log_softmax, "plmcourse.ref.log_softmax")] + COURSE_SOFTMAX + TORCH_LOG_SOFTMAX + [
    (torch.special.log_softmax, "torch.special.log_softmax"),
    (torch.nn.LogSoftmax, "torch.nn.LogSoftmax"),
    (torch.logsumexp, "torch.logsumexp"),
    (torch.Tensor.logsumexp, "torch.Tensor.logsumexp"),
] + TORCH_SOFTMAX


def _log_softmax_seal():
    scipy_special = sys.modules.get("scipy.special")  # sealed only if the notebook loaded it
    extra = []
    if scipy_special is not None:
        extra = [(getattr(scipy_special, "log_softmax", None), "scipy.special.log_softmax"),
                 (getattr(scipy_special, "logsumexp", None), "scipy.special.logsumexp"),
                 (getattr(scipy_special, "softmax", None), "scipy.special.softmax")]
    return LOG_SOFTMAX_SEAL + extra


# The clauses on x and axis that log_softmax shares with notebook 03's softmax (logits_case's cases).
AXIS_CLAUSES = (
    ("along `axis`, any axis: one that is not the last",
     lambda c: c.data["axis"] % c.data["x"].ndim != c.data["x"].ndim - 1),
    ("`axis` not passed: the last axis (-1)", lambda c: "axis" not in c.kwargs),
    ("any number of dimensions: one", lambda c: c.data["x"].ndim == 1),
    ("any number of dimensions: three or more", lambda c: c.data["x"].ndim >= 3),
)


def axis_cases():
    """The visible cases softmax (notebook 03) and log_softmax share, seeds 0 to 6: any number of
    dimensions, the last axis or another, logits of 1e4, float32 (what AXIS_CLAUSES asks for)."""
    return [
        logits_case(0, (6,)),
        logits_case(1, (3, 5)),
        logits_case(2, (2, 3, 4)),
        logits_case(3, (4, 6), axis=0),
        logits_case(4, (2, 5, 3), axis=1),
        logits_case(5, (3, 4), scale=1e4),
        logits_case(6, (2, 5), dtype=np.float32),
    ]


def hidden_axis_cases(salt):
    """The hidden cases they share, seeds salt + 101 to salt + 105."""
    return [
        logits_case(salt + 101, (5, 7)),
        logits_case(salt + 102, (3, 4, 2), axis=-2),
        logits_case(salt + 103, (2, 3, 4, 5), axis=2),
        logits_case(salt + 104, (4, 7), axis=0, scale=1e4),
        logits_case(salt + 105, (3, 2, 6), dtype=np.float32),
    ]


def _log_softmax_cases(hidden):
    cases = axis_cases() + [logits_case(7, (3, 6), some_neg_inf=True, hole_fraction=0.3)]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [logits_case(salt + 100, (11,))] + hidden_axis_cases(salt) + [
            logits_case(salt + 106, (2, 3, 5), scale=1e4, some_neg_inf=True, hole_fraction=0.3),
            logits_case(salt + 107, (1, 1)),
        ]
    return cases


def _log_softmax_mistakes(x, axis):
    x = x.astype(np.float64)
    axis = axis % x.ndim
    m = np.max(x, axis=axis, keepdims=True)
    lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    for other in range(x.ndim):
        if other != axis:
            yield (f"a log-softmax along axis {other}, but this case asks for axis {axis}",
                   lambda other=other: (ref.log_softmax(x, axis=other),))
    yield ("a log-softmax normalised over the whole array instead of along one axis",
           lambda: (ref.log_softmax(x.reshape(-1)).reshape(x.shape),))
    yield "the softmax itself, not its logarithm", lambda: (np.exp(x - lse),)
    yield ("x - max(x) without subtracting log(sum(exp(x - max))): the log of the "
           "normaliser is missing", lambda: (x - m,))
    yield ("x - log(sum(exp(x - max))): the max was subtracted inside the sum but not "
           "from x (log softmax = x - max - log(sum(exp(x - max))))", lambda: (x - (lse - m),))
    yield "the sign flipped: log softmax is x - logsumexp(x), which is never positive", lambda: (lse - x,)
    yield ("a base-2 logarithm; the course's log is the natural one (np.log)",
           lambda: ((x - lse) / np.log(2.0),))
    yield ("a base-10 logarithm; the course's log is the natural one (np.log)",
           lambda: ((x - lse) / np.log(10.0),))


def _judge_log_softmax(case, got, expected):
    problem = expect_float_array(got, "the result")
    if problem:
        return problem
    if got.shape != expected.shape:
        return (f"the result has shape {tuple(got.shape)}, expected {tuple(expected.shape)} (the shape of x; "
                f"keepdims=True keeps the max and the sum broadcastable)")
    x, axis = case.data["x"], case.data["axis"]
    holes = np.isneginf(x)  # log softmax is -inf exactly where x is
    got64 = got.astype(np.float64)
    if np.isnan(got64).any() or np.isposinf(got64).any():
        if "large logits" in case.tags:
            return ("the result contains NaN or inf for logits of about 1e4: exp overflows, or, after one "
                    "max subtracted for the whole array, a whole slice underflows to 0 and its log is -inf; "
                    "subtract each slice's own max, along the axis with keepdims=True, before exponentiating")
        if holes.any():
            return ("the result contains NaN or inf where x has -inf entries; an entry of -inf must "
                    "give -inf (exp(-inf) = 0 adds nothing to the sum)")
        return "the result contains NaN or inf"
    underflow = np.isneginf(got64) & ~holes
    largest = expected >= -np.log(x.shape[axis]) - 1e-9  # the slice's top entries: never below -log(n)
    if (underflow & largest).any():
        return ("the result is -inf even at the largest logits: np.exp overflows for logits of about "
                "1e4; subtract the max along the axis (keepdims=True) before exponentiating")
    if underflow.any():
        return ("the result is -inf where the expected value is finite: log(softmax(x)) underflows, "
                "because softmax gives exactly 0 for an entry far below the max; compute "
                "x - max - log(sum(exp(x - max))) instead")
    if (holes & ~np.isneginf(got64)).any():
        return "an entry of x that is -inf must give -inf, but the result is finite there"
    tolerance = _tolerance(x)
    finite = np.where(holes, 0.0, got64), np.where(holes, 0.0, expected)
    problem = compare(*finite, **tolerance, what="the result")
    if problem is None:
        return None

    def masked(mistakes):
        for description, compute in mistakes:
            yield description, lambda compute=compute: tuple(np.where(holes, 0.0, p) for p in compute())

    return name_mistake(problem, (finite[0],), masked(_log_softmax_mistakes(x, axis)), tolerance)


def axis_check_parts(reference_function):
    """What check_log_softmax and notebook 03's check_softmax share: a NumPy f(x, axis=-1), the course's
    `reference_function` as the reference, and the hints for the shape slips of code that reduces."""
    return {"reference": lambda case: reference_function(case.data["x"], axis=case.data["axis"]),
            "explain_error": explain_shape_error}


check_log_softmax = Spec(
    declared.check_log_softmax,
    **axis_check_parts(ref.log_softmax),
    cases=_log_softmax_cases,
    judge=_judge_log_softmax,
    seal=_log_softmax_seal,
    clauses=AXIS_CLAUSES + (
        ("stable: finite and exact for logits of size 1e4 and for entries far below the maximum",
         lambda c: "large logits" in c.tags),
        ("-inf for an entry that is -inf, as long as the slice has a finite entry",
         lambda c: "some entries -inf" in c.tags),
    ),
)


# ----------------------------------------------------------------------------
# noise_distribution(counts, power=0.75), NumPy

NOISE_SEAL = [
    (ref.noise_distribution, "plmcourse.ref.noise_distribution"),
    (course_nn.noise_distribution, "plmcourse.nn.noise_distribution"),
]


def _noise_case(seed, V, power=None, zeros=0, high=1000):
    """Integer counts of V words, `zeros` of them 0; power None means the default (not passed)."""
    rng = np.random.default_rng(seed)
    # Zipf-like counts: a few frequent words and a long tail, as in real text.
    counts = np.maximum(1, (high / (1 + rng.permutation(V)) ** 1.1).astype(np.int64))
    if zeros:
        counts[rng.choice(V, size=zeros, replace=False)] = 0
    label = f"seed {seed}: counts of {V} words" + (f", {zeros} of them 0" if zeros else "")
    label += ", power not passed (default 0.75)" if power is None else f", power={power}"
    kwargs = {} if power is None else {"power": power}
    return Case(label, (counts,), kwargs, tags=frozenset({"zeros"} if zeros else ()),
                data={"counts": counts, "power": 0.75 if power is None else power})


def _noise_cases(hidden):
    cases = [
        _noise_case(0, 6),
        _noise_case(1, 20),
        _noise_case(2, 12, zeros=3),
        _noise_case(3, 10, power=0.5),
        _noise_case(4, 8, power=1.0),
        _noise_case(5, 9, power=0.0, zeros=2),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _noise_case(salt + 100, 50),
            _noise_case(salt + 101, 30, power=0.25, zeros=5),
            _noise_case(salt + 102, 1),
            _noise_case(salt + 103, 15, power=2.0),
            _noise_case(salt + 104, 40, power=0.0, zeros=10),
            _noise_case(salt + 105, 7, zeros=6),
        ]
    return cases


def _noise_mistakes(counts, power):
    counts = counts.astype(np.float64)
    seen = counts > 0
    weights = np.where(seen, counts, 0.0) ** power
    unigram = counts / counts.sum()
    if power != 1.0:
        yield ("the raw unigram distribution (counts / total): negatives must be drawn from "
               "count**power, renormalised (word2vec's power is 0.75)", lambda: (unigram,))
    if power != 0.75:
        yield ("count**0.75 whatever `power` says: use the power argument", lambda: (
            np.where(seen, counts, 0.0) ** 0.75 / np.sum(np.where(seen, counts, 0.0) ** 0.75),))
    yield ("count**power without dividing by the sum: the probabilities must add up to 1",
           lambda: (weights,))
    yield ("the unigram probabilities raised to the power but not renormalised: divide by their "
           "sum again after the power", lambda: (unigram ** power,))
    if power == 0 and not seen.all():
        yield ("words with count 0 got probability, because 0**0 is 1 in NumPy; a word never seen "
               "must never be drawn: give it probability 0 explicitly",
               lambda: (np.full(len(counts), 1.0 / len(counts)),))
        yield ("words with count 0 set to 0 after dividing by the sum, which still counted them (0**0 is 1 in "
               "NumPy), so the rest no longer sums to 1: give them weight 0 before normalising",
               lambda: (np.where(seen, 1.0 / len(counts), 0.0),))
    yield ("a uniform distribution over the vocabulary", lambda: (np.full(len(counts), 1.0 / len(counts)),))


def _judge_noise(case, got, expected):
    problem = expect_array(got, "the result")
    if problem:
        return problem
    if got.dtype.kind != "f":
        return (f"the result has dtype {got.dtype}, expected floating point (probabilities; integer "
                f"counts must be converted, e.g. counts.astype(float))")
    problem = compare(got, expected, **F64, what="the result")
    if problem is None:
        return None
    counts, power = case.data["counts"], case.data["power"]
    mistake = first_match((got,), _noise_mistakes(counts, power), **F64)
    if mistake is None and _same_nans_and_values(got, _log_space_noise(counts, power)):
        mistake = ("count**power computed as exp(power * log(count)), which is NaN for a word with count 0 when "
                   "power is 0 (0 * -inf) and the sum spreads it: give words with count 0 weight 0 without "
                   "taking their log")
    return matches(problem, mistake)


def _log_space_noise(counts, power):
    with np.errstate(all="ignore"):
        weights = np.exp(power * np.log(counts.astype(np.float64)))
        return weights / weights.sum()


def _same_nans_and_values(got, mistake):
    # first_match skips a result that is mostly NaN; this mistake's result is NaN everywhere.
    nan = np.isnan(mistake)
    return (got.shape == mistake.shape and nan.any() and np.array_equal(np.isnan(got), nan)
            and close(np.where(nan, 0.0, got), np.where(nan, 0.0, mistake), **F64))


check_noise_distribution = Spec(
    declared.check_noise_distribution,
    cases=_noise_cases,
    reference=lambda case: ref.noise_distribution(case.data["counts"], case.data["power"]),
    judge=_judge_noise,
    seal=NOISE_SEAL,
    clauses=(
        ("counts: the integer count of every word, (V,); the result a float array",
         lambda c: c.args[0].dtype.kind in "iu"),
        ("power not passed: 0.75", lambda c: "power" not in c.kwargs),
        ("P(w) proportional to count(w)**power, for the power passed", lambda c: c.data["power"] not in (0.75, 0.0)),
        ("a word with count 0 gets probability 0", lambda c: "zeros" in c.tags),
        ("... for every power, including 0 (NumPy says 0.0 ** 0 == 1.0)",
         lambda c: "zeros" in c.tags and c.data["power"] == 0),
    ),
)


# ----------------------------------------------------------------------------
# skipgram_negative_sampling_loss(center_vecs, context_vecs, negative_vecs), NumPy
#   -> (loss, grad_center, grad_context, grad_negatives)

SGNS_SEAL = [
    (ref.skipgram_negative_sampling_loss, "plmcourse.ref.skipgram_negative_sampling_loss"),
    (course_nn.skipgram_negative_sampling_loss, "plmcourse.nn.skipgram_negative_sampling_loss"),
    (course_nn.cbow_negative_sampling_loss, "plmcourse.nn.cbow_negative_sampling_loss"),
    (ref.numerical_gradient, "plmcourse.ref.numerical_gradient"),
    (torch.autograd.grad, AUTOGRAD.format("torch.autograd.grad")),
    (torch.autograd.backward, AUTOGRAD.format("torch.autograd.backward")),
    (torch.Tensor.backward, AUTOGRAD.format("torch.Tensor.backward")),
]

GRAD_NAMES = ("grad_center", "grad_context", "grad_negatives")


def _sgns_case(seed, B, K, d, scale=None, dtype=np.float64):
    """Vectors ~ N(0, scale^2) with scale 1/sqrt(d) (scores of order 1) unless given."""
    rng = np.random.default_rng(seed)
    s = 1.0 / np.sqrt(d) if scale is None else scale
    center = (rng.standard_normal((B, d)) * s).astype(dtype)
    context = (rng.standard_normal((B, d)) * s).astype(dtype)
    negatives = (rng.standard_normal((B, K, d)) * s).astype(dtype)
    label = f"seed {seed}: B={B} pairs, K={K} negatives, d={d}"
    label, tags = noted(label, [(scale is not None and scale >= 5, ", scores of about ±1000", "large scores"),
                                (dtype == np.float32, ", float32", None)])
    return Case(label, (center, context, negatives), tags=tags,
                data={"c": center, "o": context, "n": negatives})


def _sgns_cases(hidden):
    cases = [
        _sgns_case(0, 4, 3, 5),
        _sgns_case(1, 1, 1, 3),
        _sgns_case(2, 6, 5, 8),
        _sgns_case(3, 3, 1, 4),
        _sgns_case(4, 5, 2, 6, scale=1.0),
        _sgns_case(5, 3, 2, 40, scale=12.0),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _sgns_case(salt + 100, 7, 2, 4),
            _sgns_case(salt + 101, 3, 10, 6),
            _sgns_case(salt + 102, 16, 5, 10),
            _sgns_case(salt + 103, 2, 4, 3, scale=2.0),
            _sgns_case(salt + 104, 4, 3, 50, scale=12.0),
            _sgns_case(salt + 105, 5, 4, 8, dtype=np.float32),
        ]
    return cases


def _log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def _sigmoid(x):
    return np.exp(_log_sigmoid(x))


def _sgns_parts(c, o, n):
    c, o, n = (a.astype(np.float64) for a in (c, o, n))
    return c, o, n, np.sum(c * o, axis=-1), np.einsum("bkd,bd->bk", n, c)


def _loss_mistakes(d):
    c, o, n, pos, neg = _sgns_parts(d["c"], d["o"], d["n"])
    B, K = neg.shape
    right_pos, right_neg = -np.sum(_log_sigmoid(pos)), -np.sum(_log_sigmoid(-neg))
    yield ("the negative term with the wrong sign: it is -log σ(-c·n_k), not -log σ(c·n_k)",
           lambda: ((right_pos - np.sum(_log_sigmoid(neg))) / B,))
    yield ("no sigmoid: the loss uses the raw scores c·o and c·n_k instead of log σ of them",
           lambda: ((-np.sum(pos) + np.sum(neg)) / B,))
    yield ("σ without the log: the loss is -log σ(c·o) - Σ log σ(-c·n_k)",
           lambda: ((-np.sum(_sigmoid(pos)) - np.sum(_sigmoid(-neg))) / B,))
    yield ("the sum over the batch instead of the mean", lambda: (right_pos + right_neg,))
    if K > 1:
        yield ("the negatives' terms averaged over K instead of summed",
               lambda: ((right_pos + right_neg / K) / B,))
    yield "the positive term only (the negatives are missing)", lambda: (right_pos / B,)
    yield "the negative terms only (the observed pair is missing)", lambda: (right_neg / B,)
    yield ("the log-likelihood instead of the loss: the minus sign is missing",
           lambda: (-(right_pos + right_neg) / B,))
    yield ("the negatives scored against the context vector o instead of the center vector c",
           lambda: ((right_pos - np.sum(_log_sigmoid(-np.einsum("bkd,bd->bk", n, o)))) / B,))
    if B > 1 or K > 1:
        yield ("the mean over all B·(K+1) terms; the loss averages over the B pairs and sums the "
               "K negatives", lambda: ((right_pos + right_neg) / (B * (K + 1)),))


# The observed pair's derivative, σ(s) - 1, used for the negatives' terms as well.
NEGATIVE_AS_POSITIVE = ("(σ(c·n_k) - 1) {0} instead of σ(c·n_k) {0}: σ(s) - 1 is the derivative of the observed "
                        "pair's -log σ(s); a negative's -log σ(-s) has derivative σ(s)")


def _gradient_mistakes(d, which):
    """Known wrong versions of one gradient (which: 0 center, 1 context, 2 negatives)."""
    c, o, n, pos, neg = _sgns_parts(d["c"], d["o"], d["n"])
    B = c.shape[0]
    g_pos, g_neg = (_sigmoid(pos) - 1.0) / B, _sigmoid(neg) / B
    right = [g_pos[:, None] * o + np.einsum("bk,bkd->bd", g_neg, n), g_pos[:, None] * c,
             g_neg[:, :, None] * c[:, None, :]]
    if B > 1:
        yield ("the gradient of the sum over the batch, not of the mean: divide by B",
               lambda: (right[which] * B,))
    yield "the gradient with the wrong sign (the gradient of -loss)", lambda: (-right[which],)
    if which == 0:
        yield ("only the observed pair's part (σ(c·o) - 1) o / B; the negatives add Σ_k σ(c·n_k) n_k / B",
               lambda: (g_pos[:, None] * o,))
        yield ("only the negatives' part Σ_k σ(c·n_k) n_k / B; the observed pair adds (σ(c·o) - 1) o / B",
               lambda: (np.einsum("bk,bkd->bd", g_neg, n),))
        yield ("σ(c·o) o instead of (σ(c·o) - 1) o: the derivative of -log σ(s) is σ(s) - 1",
               lambda: ((_sigmoid(pos) / B)[:, None] * o + np.einsum("bk,bkd->bd", g_neg, n),))
        yield ("(1 - σ(c·n_k)) n_k instead of σ(c·n_k) n_k: the derivative of -log σ(-s) is σ(s)",
               lambda: (g_pos[:, None] * o + np.einsum("bk,bkd->bd", (1 - _sigmoid(neg)) / B, n),))
        yield (NEGATIVE_AS_POSITIVE.format("n_k"),
               lambda: (g_pos[:, None] * o + np.einsum("bk,bkd->bd", g_neg - 1 / B, n),))
    elif which == 1:
        yield ("σ(c·o) c instead of (σ(c·o) - 1) c: the derivative of -log σ(s) is σ(s) - 1",
               lambda: ((_sigmoid(pos) / B)[:, None] * c,))
        yield ("(σ(c·o) - 1) o instead of (σ(c·o) - 1) c: by the chain rule the derivative of c·o with "
               "respect to o is c, the other vector of the dot product", lambda: (g_pos[:, None] * o,))
    else:
        yield ("(1 - σ(c·n_k)) c instead of σ(c·n_k) c: the derivative of -log σ(-s) is σ(s)",
               lambda: (((1 - _sigmoid(neg)) / B)[:, :, None] * c[:, None, :],))
        yield NEGATIVE_AS_POSITIVE.format("c"), lambda: ((g_neg - 1 / B)[:, :, None] * c[:, None, :],)
        yield ("σ(c·n_k) n_k instead of σ(c·n_k) c: by the chain rule the derivative of c·n_k with "
               "respect to n_k is c, the other vector of the dot product", lambda: (g_neg[:, :, None] * n,))


def _judge_sgns(case, got, expected):
    names = "(loss, grad_center, grad_context, grad_negatives)"
    if not (isinstance(got, (tuple, list)) and len(got) == 4):
        return f"your function returned {describe(got)}, expected the four items {names}"
    loss, *grads = got
    d = case.data
    B, K, dim = d["n"].shape
    if isinstance(loss, np.ndarray) and loss.size > 1:
        hint = " (one per pair: take the mean over the batch)" if loss.shape == (B,) else ""
        return f"the loss (first item) has shape {loss.shape}, expected a single number{hint}"
    value = as_scalar(loss)
    if value is None:
        if isinstance(loss, torch.Tensor):
            return "the loss (first item) is a torch.Tensor, expected a number: this exercise is NumPy"
        return f"the loss (first item) is {describe(loss)}, expected a number"
    expected_loss, *expected_grads = expected
    if not np.isfinite(value):
        if "large scores" in case.tags:
            return (f"the loss is {value} for scores of about ±1000: np.exp overflows in log σ(x) = "
                    f"-log(1 + exp(-x)); compute it as -np.logaddexp(0, -x), which is stable")
        return f"the loss is {value}"
    tolerance = _tolerance(d["c"])
    problem = compare(np.array(value), np.array(expected_loss), **tolerance, what="the loss")
    if problem:
        return name_mistake(problem, (np.array(value),), _loss_mistakes(d), tolerance)
    shapes = [(B, dim), (B, dim), (B, K, dim)]
    for grad, name, shape in zip(grads, GRAD_NAMES, shapes):
        problem = expect_array(grad, name)
        if problem:
            return problem
        if grad.shape != shape:
            hint = ""
            if name == "grad_negatives" and grad.shape == (B, dim):
                hint = (" (summed over the negatives? each of the K negative vectors of a pair gets "
                        "its own gradient)")
            return f"{name} has shape {grad.shape}, expected {shape}, the shape of the matching input{hint}"
    if (compare(grads[0], expected_grads[1], **tolerance) is None
            and compare(grads[1], expected_grads[0], **tolerance) is None):
        return ("grad_center and grad_context are swapped: return (loss, grad_center, grad_context, "
                "grad_negatives)")
    for which, (grad, name) in enumerate(zip(grads, GRAD_NAMES)):
        problem = compare(grad, expected_grads[which], **tolerance, what=name)
        if problem:
            mistake = first_match((grad,), _gradient_mistakes(d, which), **tolerance)
            if mistake:
                return f"{problem}; it matches {mistake}"
            return (f"{problem}; the loss is right, so compare your formula with a finite-difference "
                    f"estimate (ref.numerical_gradient)")
    return None


check_skipgram_negative_sampling_loss = Spec(
    declared.check_skipgram_negative_sampling_loss,
    cases=_sgns_cases,
    reference=lambda case: ref.skipgram_negative_sampling_loss(*case.args),
    judge=_judge_sgns,
    seal=SGNS_SEAL,
    clauses=(
        ("the loss is the mean over the batch of B pairs (the gradients too: 1/B)", lambda c: c.data["c"].shape[0] > 1),
        ("... and the sum over the K negatives of each pair", lambda c: c.data["n"].shape[1] > 1),
        ("(loss, grad_center, grad_context, grad_negatives), each gradient of the input's shape", lambda c: True),
        ("stable for scores around ±1000", lambda c: "large scores" in c.tags),
    ),
)
