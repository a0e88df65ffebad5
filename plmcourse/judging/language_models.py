"""Checks for the language-models notebook: cross-entropy from logits (NumPy), ELMo's biLM loss and
the scalar mix of layers (PyTorch, gradients included).

Each check runs the student's function on seeded cases (hidden=True adds more, with
other seeds and shapes), compares with `plmcourse.ref` / `plmcourse.nn` in float64,
and on a wrong answer says which known mistake the answer matches, when it does.
"""


import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import nn as course_nn
from plmcourse import ref
from plmcourse.grading import language_models as declared
from plmcourse.judging.core import (
    hidden_salt,
    Spec,
    gradient_problem,
    F32,
    F64,
    Case,
    as_scalar,
    compare,
    describe,
    expect_array,
    name_mistake,
    noted,
    to_numpy,
)

__all__ = ["check_cross_entropy", "check_bilm_loss", "check_scalar_mix"]


IGNORE = -100

LIBRARY_CROSS_ENTROPY = [
    (F.cross_entropy, "torch.nn.functional.cross_entropy"),
    (F.nll_loss, "torch.nn.functional.nll_loss"),
    (torch.nn.CrossEntropyLoss, "torch.nn.CrossEntropyLoss"),
    (torch.nn.NLLLoss, "torch.nn.NLLLoss"),
]


def _log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


# ----------------------------------------------------------------------------
# cross_entropy(logits, targets, ignore_index=-100), NumPy

CROSS_ENTROPY_SEAL = [
    (ref.cross_entropy, "plmcourse.ref.cross_entropy"),
    (ref.perplexity, "plmcourse.ref.perplexity"),
    (course_nn.cross_entropy, "plmcourse.nn.cross_entropy"),
] + LIBRARY_CROSS_ENTROPY


def _ce_case(seed, shape, V, ignored=0.0, scale=1.0, dtype=np.float64, ignore_index=None):
    """logits ~ N(0, scale^2) (shape + (V,)), targets uniform; a share `ignored` set to ignore_index."""
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((*shape, V)) * scale).astype(dtype)
    targets = rng.integers(0, V, size=shape)
    marker = IGNORE if ignore_index is None else ignore_index
    if ignored:
        holes = rng.random(shape) < ignored
        holes.flat[0] = False  # at least one position counts
        targets[holes] = marker
    label = f"seed {seed}: logits {logits.shape}, targets {targets.shape}"
    label, tags = noted(label, [
        (ignored, f", {int((targets == marker).sum())} positions with target {marker}", "ignored"),
        (ignore_index is not None, f", ignore_index={ignore_index}", "ignore_index given"),
        (scale >= 100, ", logits of about 1e4", "large logits"),
        (dtype == np.float32, ", float32", None),
    ])
    kwargs = {} if ignore_index is None else {"ignore_index": ignore_index}
    return Case(label, (logits, targets), kwargs, tags=tags,
                data={"logits": logits, "targets": targets, "ignore_index": marker})


def _ce_cases(hidden):
    cases = [
        _ce_case(0, (5,), 4),
        _ce_case(1, (2, 6), 7),
        _ce_case(2, (3, 5), 6, ignored=0.3),
        _ce_case(3, (8,), 5, scale=1e4),
        _ce_case(4, (4, 3), 5, ignored=0.4, ignore_index=-1),
        _ce_case(5, (6,), 9, dtype=np.float32),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _ce_case(salt + 100, (2, 3, 4), 11),
            _ce_case(salt + 101, (20,), 3, ignored=0.5),
            _ce_case(salt + 102, (1,), 2),
            _ce_case(salt + 103, (3, 7), 8, scale=1e4, ignored=0.3),
            _ce_case(salt + 104, (5, 5), 4, ignored=0.3, ignore_index=0),
            _ce_case(salt + 105, (4, 6), 12, ignored=0.2, dtype=np.float32),
        ]
    return cases


def _ce_mistakes(d):
    logits, targets, ignore_index = d["logits"].astype(np.float64), d["targets"], d["ignore_index"]
    V = logits.shape[-1]
    counted = targets != ignore_index
    log_p = _log_softmax(logits)
    picked = np.take_along_axis(log_p, np.where(counted, targets, 0)[..., None], -1)[..., 0]
    nll = np.where(counted, -picked, 0.0)
    right = nll.sum() / counted.sum()
    if not counted.all():
        yield ("the ignored positions counted in the mean: divide by the number of positions whose "
               "target is not ignore_index", lambda: (nll.sum() / targets.size,))
        if -V <= ignore_index < V:
            # A target equal to ignore_index used as an index: NumPy reads it as a class.
            as_class = np.take_along_axis(log_p, np.where(counted, targets, ignore_index % V)[..., None],
                                          -1)[..., 0]
            yield (f"the positions with target {ignore_index} scored as class {ignore_index % V}: "
                   f"they must be left out (is the ignore_index argument used?)",
                   lambda: (-as_class.mean(),))
    yield "the sum over positions instead of the mean", lambda: (nll.sum(),)
    yield "the sign flipped: the loss is the mean of -log p(target)", lambda: (-right,)
    yield "the perplexity exp(loss) instead of the loss", lambda: (np.exp(right),)
    yield ("a base-2 logarithm; the course's log is the natural one (np.log)", lambda: (right / np.log(2.0),))
    probs = np.exp(log_p)
    p_target = np.take_along_axis(probs, np.where(counted, targets, 0)[..., None], -1)[..., 0]
    yield ("the mean of -p(target) without the log", lambda: (-(p_target * counted).sum() / counted.sum(),))
    raw = np.take_along_axis(logits, np.where(counted, targets, 0)[..., None], -1)[..., 0]
    yield ("the raw logit of the target used as its log-probability: apply log-softmax first",
           lambda: (-(raw * counted).sum() / counted.sum(),))


def _judge_ce(case, got, expected):
    if isinstance(got, torch.Tensor):
        return "the result is a torch.Tensor, expected a number: this exercise is NumPy"
    if isinstance(got, np.ndarray) and got.size > 1:
        return (f"the result has shape {got.shape}, expected a single number (the mean over the "
                f"counted positions)")
    value = as_scalar(got)
    if value is None:
        return f"your function returned {describe(got)}, expected a number"
    if not np.isfinite(value):
        if "large logits" in case.tags:
            return (f"the result is {value} for logits of about 1e4: either exp overflowed (no max "
                    f"subtracted) or a probability underflowed to 0 and its log is -inf (log(softmax(x)) "
                    f"does that); compute log-probabilities as x - max - log(sum(exp(x - max))) along the "
                    f"vocabulary axis, then pick the targets")
        return f"the result is {value}"
    tolerance = F32 if case.data["logits"].dtype == np.float32 else F64
    problem = compare(np.array(value), np.array(expected), **tolerance, what="the result")
    return problem and name_mistake(problem, (np.array(value),), _ce_mistakes(case.data), tolerance)


def _explain_index_error(error):
    if isinstance(error, IndexError) and "-100" in str(error):
        return ("a target of -100 marks a position without a target (ignore_index): leave those "
                "positions out instead of indexing with them")
    if isinstance(error, IndexError) and "shape mismatch" in str(error):
        return ("logits[np.arange(len(targets)), targets] works for (N, V) logits only; the logits may have "
                "leading dimensions (B, T, V): reshape them to (-1, V) and the targets to (-1,) first, or use "
                "np.take_along_axis")
    return None


check_cross_entropy = Spec(
    declared.check_cross_entropy,
    cases=_ce_cases,
    reference=lambda case: ref.cross_entropy(case.data["logits"], case.data["targets"],
                                                       case.data["ignore_index"]),
    judge=_judge_ce,
    seal=CROSS_ENTROPY_SEAL,
    explain_error=_explain_index_error,
    clauses=(
        ("logits (..., V), targets of the same shape without the last axis: (N, V)",
         lambda c: c.data["logits"].ndim == 2),
        ("... with more leading axes", lambda c: c.data["logits"].ndim >= 3),
        ("the mean over the positions whose target is not ignore_index", lambda c: "ignored" in c.tags),
        ("ignore_index not passed: -100", lambda c: "ignore_index" not in c.kwargs and "ignored" in c.tags),
        ("use the ignore_index argument (it is not always -100)", lambda c: "ignore_index" in c.kwargs),
        ("stable for logits of size 1e4", lambda c: "large logits" in c.tags),
    ),
)


# ----------------------------------------------------------------------------
# bilm_loss(forward_logits, backward_logits, targets), PyTorch

BILM_SEAL = [
    (ref.bilm_loss, "plmcourse.ref.bilm_loss"),
    (course_nn.bilm_loss, "plmcourse.nn.bilm_loss"),
]


def _bilm_case(seed, B, L, V, lengths=None, scale=1.0, device="cpu"):
    """Logits ~ N(0, scale^2) (B, L, V) for both directions; targets uniform, -100 past each length."""
    rng = np.random.default_rng(seed)
    forward = rng.standard_normal((B, L, V)) * scale
    backward = rng.standard_normal((B, L, V)) * scale
    targets = rng.integers(0, V, size=(B, L))
    label = f"seed {seed}: logits (B={B}, L={L}, V={V})"
    if lengths is not None:
        for b, n in enumerate(lengths):
            targets[b, n:] = IGNORE
        label += f", right-padded to L with target -100 (lengths {lengths})"
    if scale > 5:
        label += f", logits of about {scale:g}"

    def leaf(a):
        return torch.tensor(a, dtype=torch.float64, device=device, requires_grad=True)

    args = (leaf(forward), leaf(backward), torch.tensor(targets, device=device))
    return Case(label, args, tags=frozenset({"padded"} if lengths is not None else ()),
                data={"forward": forward, "backward": backward, "targets": targets, "device": device,
                      "projection": None},
                grad_leaves=(0, 1))


def _bilm_cases(hidden, device):
    cases = [
        _bilm_case(0, 2, 5, 7, device=device),
        _bilm_case(1, 3, 6, 4, device=device),
        _bilm_case(2, 1, 2, 5, device=device),
        _bilm_case(3, 2, 6, 5, lengths=[6, 3], device=device),
        _bilm_case(4, 2, 4, 6, scale=30.0, device=device),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _bilm_case(salt + 100, 4, 9, 11, device=device),
            _bilm_case(salt + 101, 3, 7, 6, lengths=[5, 7, 2], device=device),
            _bilm_case(salt + 102, 1, 3, 3, device=device),
            _bilm_case(salt + 103, 3, 5, 8, lengths=[1, 5, 4], scale=20.0, device=device),
        ]
    return cases


def _bilm_numpy(d, *, forward_shift=1, backward_shift=-1, use_forward=True, use_backward=True,
                combine="sum", source_mask=True, reduce="mean", log_softmax=True):
    """The biLM loss in NumPy, with the switches that reproduce known mistakes.

    forward_shift/backward_shift: which token each direction is scored against
    (+1 next, -1 previous, 0 its own position); source_mask: ignore predictions made
    from padding positions; reduce: "mean" over counted predictions, "sum", or
    "all" (divided by B*L); combine: "sum" or "mean" of the two directions.
    """
    targets = d["targets"]
    parts = []
    for logits, shift, used in ((d["forward"], forward_shift, use_forward),
                                (d["backward"], backward_shift, use_backward)):
        if not used:
            continue
        if shift == 1:
            scores, source, target = logits[:, :-1], targets[:, :-1], targets[:, 1:]
        elif shift == -1:
            scores, source, target = logits[:, 1:], targets[:, 1:], targets[:, :-1]
        else:
            scores, source, target = logits, targets, targets
        counted = target != IGNORE
        if source_mask:
            counted &= source != IGNORE
        log_p = _log_softmax(scores) if log_softmax else scores
        picked = np.take_along_axis(log_p, np.where(counted, target, 0)[..., None], -1)[..., 0]
        total = -np.sum(np.where(counted, picked, 0.0))
        divisor = {"mean": max(1, counted.sum()), "sum": 1, "all": targets.size}[reduce]
        parts.append(total / divisor)
    value = sum(parts)
    return (value / len(parts) if combine == "mean" else value,)


def _bilm_mistakes(d):
    padded = (d["targets"] == IGNORE).any()
    yield ("the backward LM scored against the next token, like the forward LM: its output at t "
           "must predict the previous token (backward_logits[:, 1:] against targets[:, :-1])",
           lambda: _bilm_numpy(d, backward_shift=1))
    yield ("no shift: each position scored against its own token, which its LSTM has already read",
           lambda: _bilm_numpy(d, forward_shift=0, backward_shift=0))
    yield ("the backward LM scored against the token at its own position, not the previous one",
           lambda: _bilm_numpy(d, backward_shift=0))
    yield ("the forward LM scored against the token at its own position, not the next one",
           lambda: _bilm_numpy(d, forward_shift=0))
    yield ("the two directions' shifts swapped: forward_logits[:, t] predicts token t + 1, "
           "backward_logits[:, t] predicts token t - 1", lambda: _bilm_numpy(d, forward_shift=-1,
                                                                             backward_shift=1))
    yield ("the forward LM scored against the previous token: its output at t predicts token t + 1",
           lambda: _bilm_numpy(d, forward_shift=-1))
    yield "only the forward LM's loss; the biLM adds the backward LM's", lambda: _bilm_numpy(
        d, use_backward=False)
    yield "only the backward LM's loss; the biLM adds the forward LM's", lambda: _bilm_numpy(
        d, use_forward=False)
    yield ("the average of the two directions' losses; the biLM loss is their sum",
           lambda: _bilm_numpy(d, combine="mean"))
    if padded:
        yield ("predictions made from padding positions counted: a prediction counts only when the "
               "position it is made from and the token it predicts are both real (not -100)",
               lambda: _bilm_numpy(d, source_mask=False))
    yield "the sum over positions instead of the mean", lambda: _bilm_numpy(d, reduce="sum")
    yield ("each direction divided by B·L; it makes B·(L-1) predictions (fewer with padding), "
           "average over those", lambda: _bilm_numpy(d, reduce="all"))
    yield ("raw logits used as log-probabilities: apply log_softmax (or use cross_entropy)",
           lambda: _bilm_numpy(d, log_softmax=False))


def _bilm_reference(case):
    """Value and gradients of plmcourse.nn.bilm_loss, float64, on the case's device."""
    d = case.data
    forward = torch.tensor(d["forward"], device=d["device"], requires_grad=True)
    backward = torch.tensor(d["backward"], device=d["device"], requires_grad=True)
    targets = torch.tensor(d["targets"], device=d["device"])
    loss = course_nn.bilm_loss(forward, backward, targets)
    grads = torch.autograd.grad(loss, [forward, backward])
    return float(to_numpy(loss)), [to_numpy(g) for g in grads]


def _no_flow(detail=""):
    return (f"gradients do not flow{detail}: a .detach(), .item(), .numpy() or torch.tensor(...) on "
            f"the way cuts the autograd graph, keep every step in torch")


def _judge_bilm(case, got, expected):
    problem = expect_array(got, "the result", kind="torch")
    if problem:
        return problem
    if got.numel() != 1:
        return (f"the result has shape {tuple(got.shape)}, expected a scalar (0-d) tensor: the mean "
                f"cross-entropy of each direction, summed")
    if not case.reply.requires_grad:  # the more fundamental problem: a float32 here often comes from .item()
        return _no_flow(" (the result does not depend on the logits in the autograd graph)")
    if got.dtype != torch.float64:
        return f"the result has dtype {got.dtype}, expected torch.float64 like the logits"
    expected_value, expected_grads = expected
    value = float(to_numpy(got).reshape(()))
    if not np.isfinite(value):
        return (f"the result is {value}; a stable log-softmax (or torch's cross_entropy) avoids "
                f"overflow, and a direction with nothing to predict must not divide by 0")
    problem = compare(np.array(value), np.array(expected_value), **F64, what="the loss")
    if problem:
        return name_mistake(problem, (np.array(value),), _bilm_mistakes(case.data), F64)
    return gradient_problem(case.reply, expected_grads, ("forward_logits", "backward_logits"), _no_flow,
                            " (does a .detach() cut part of the graph?)")


def _explain_torch_error(error):
    text = str(error)
    if "numpy()" in text and "requires grad" in text:
        return "gradients do not flow through .numpy(), keep every step in torch"
    if "out of bounds" in text or "Target -100" in text or "index -100" in text:
        return ("a target of -100 marks padding (ignore_index): leave those predictions out, e.g. "
                "with cross_entropy(..., ignore_index=-100)")
    if "view size is not compatible" in text:
        return "slices such as logits[:, 1:] are not contiguous: use .reshape instead of .view"
    return None


def _explain_mix_error(error):
    if "must match the size of tensor" in str(error):
        return ("the weights (N,) do not line up with the first axis of layers (N, ...): broadcasting matches "
                "the LAST axes, so give the weights one trailing axis of size 1 per remaining axis of layers, "
                "e.g. s.reshape(-1, *[1] * (layers.dim() - 1))")
    return _explain_torch_error(error)


check_bilm_loss = Spec(
    declared.check_bilm_loss,
    cases=_bilm_cases,
    reference=_bilm_reference,
    judge=_judge_bilm,
    seal=BILM_SEAL,
    explain_error=_explain_torch_error,
    clauses=(
        ("forward_logits[:, t] predicts targets[:, t + 1], backward_logits[:, t] targets[:, t - 1]",
         lambda c: c.data["targets"].shape[1] > 2),
        ("padding (-100, at the end) neither predicts nor is predicted", lambda c: "padded" in c.tags),
        ("the backward LM's mean cross-entropy plus the forward LM's, a 0-d tensor", lambda c: True),
        ("gradients flow to both logits tensors", lambda c: c.grad_leaves == (0, 1)),
    ),
)


# ----------------------------------------------------------------------------
# scalar_mix(layers, weights, gamma), PyTorch

MIX_SEAL = [
    (ref.scalar_mix, "plmcourse.ref.scalar_mix"),
    (course_nn.scalar_mix, "plmcourse.nn.scalar_mix"),
    (course_nn.ScalarMix, "plmcourse.nn.ScalarMix"),
]


def _mix_case(seed, N, shape, weight_scale=1.0, device="cpu"):
    """layers ~ N(0, 1) (N, *shape); weights ~ N(0, weight_scale^2) (N,); gamma ~ U(0.5, 2)."""
    rng = np.random.default_rng(seed)
    layers = rng.standard_normal((N, *shape))
    weights = rng.standard_normal(N) * weight_scale
    if weight_scale >= 100:  # all of them near 1000: exp overflows unless the max is subtracted
        weights = weight_scale + rng.uniform(0.0, 5.0, N)
    gamma = rng.uniform(0.5, 2.0)
    projection = rng.standard_normal(shape)  # the gradient checked is that of sum(output * projection)
    label = f"seed {seed}: {N} layers of shape {shape}"
    if weight_scale >= 100:
        label += ", weights of about 1000"

    def leaf(a):
        return torch.tensor(a, dtype=torch.float64, device=device, requires_grad=True)

    args = (leaf(layers), leaf(weights), leaf(gamma))
    return Case(label, args, tags=frozenset({"large weights"} if weight_scale >= 100 else ()),
                data={"layers": layers, "weights": weights, "gamma": gamma, "projection": projection,
                      "device": device},
                grad_leaves=(0, 1, 2), upstream=projection)


def _mix_cases(hidden, device):
    cases = [
        _mix_case(0, 3, (2, 4, 5), device=device),
        _mix_case(1, 2, (3, 6), device=device),
        _mix_case(2, 1, (2, 3, 4), device=device),
        _mix_case(3, 4, (1, 5, 8), weight_scale=3.0, device=device),
        _mix_case(4, 2, (2, 3), weight_scale=1000.0, device=device),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _mix_case(salt + 100, 5, (2, 3, 7), device=device),
            _mix_case(salt + 101, 3, (4, 16), weight_scale=1000.0, device=device),
            _mix_case(salt + 102, 2, (1, 1, 2), device=device),
            _mix_case(salt + 103, 3, (2, 2, 2, 3), device=device),
        ]
    return cases


def _mix_numpy(d, normalise="softmax", use_gamma=True, only_last=False):
    layers, w, gamma = d["layers"], d["weights"], d["gamma"]
    if normalise == "softmax":
        s = np.exp(w - w.max())
        s = s / s.sum()
    elif normalise == "none":
        s = w
    elif normalise == "sum":
        s = w / w.sum()
    elif normalise == "sigmoid":
        s = 1 / (1 + np.exp(-w))
    else:  # "uniform"
        s = np.full(len(w), 1.0 / len(w))
    mixed = layers[-1] if only_last else np.tensordot(s, layers, axes=([0], [0]))
    return mixed * gamma if use_gamma else mixed


def _mix_mistakes(d):
    N = len(d["weights"])
    yield ("the raw layer weights used without normalising them: take a softmax over the weights",
           lambda: (_mix_numpy(d, normalise="none"),))
    yield ("the weights divided by their sum instead of a softmax (they can be negative)",
           lambda: (_mix_numpy(d, normalise="sum"),))
    yield ("a sigmoid of each weight instead of a softmax over the layers",
           lambda: (_mix_numpy(d, normalise="sigmoid"),))
    yield "the mix without the scale gamma", lambda: (_mix_numpy(d, use_gamma=False),)
    if N > 1:
        yield ("a plain average of the layers: the weights are not used",
               lambda: (_mix_numpy(d, normalise="uniform"),))
        yield "only the last layer", lambda: (_mix_numpy(d, only_last=True),)
    yield "gamma added instead of multiplied", lambda: (_mix_numpy(d, use_gamma=False) + d["gamma"],)


def _mix_reference(case):
    d = case.data
    device = d["device"]
    layers, weights, gamma = (torch.tensor(d[k], device=device, requires_grad=True)
                              for k in ("layers", "weights", "gamma"))
    output = course_nn.scalar_mix(layers, weights, gamma)
    projection = torch.tensor(d["projection"], device=device)
    grads = torch.autograd.grad(torch.sum(output * projection), [layers, weights, gamma])
    return to_numpy(output), [to_numpy(g) for g in grads]


def _judge_mix(case, got, expected):
    problem = expect_array(got, "the result", kind="torch")
    if problem:
        return problem
    expected_output, expected_grads = expected
    if tuple(got.shape) != expected_output.shape:
        return (f"the result has shape {tuple(got.shape)}, expected {expected_output.shape} (one layer's "
                f"shape: the weighted sum runs over the first axis of layers)")
    if got.dtype != torch.float64:
        return f"the result has dtype {got.dtype}, expected torch.float64 like the inputs"
    if not bool(torch.isfinite(got).all()) and "large weights" in case.tags:
        return ("the result contains NaN or inf for weights of about 1000: exp overflows; subtract "
                "the largest weight before exponentiating (or use torch.softmax)")
    problem = compare(got, expected_output, **F64, what="the result")
    if problem:
        return name_mistake(problem, (got,), _mix_mistakes(case.data), F64)
    return gradient_problem(case.reply, expected_grads, ("layers", "weights", "gamma"), _no_flow,
                            " (does a .detach() or .item() cut part of the graph?)")


check_scalar_mix = Spec(
    declared.check_scalar_mix,
    cases=_mix_cases,
    reference=_mix_reference,
    judge=_judge_mix,
    seal=MIX_SEAL,
    explain_error=_explain_mix_error,
    clauses=(
        ("layers (N, ...): the N layers stacked along the first axis, e.g. (N, B, T, d)",
         lambda c: c.data["layers"].ndim >= 4),
        ("gamma * sum_j softmax(w)_j * layers[j], of the shape of one layer", lambda c: c.data["layers"].shape[0] > 1),
        ("finite for weights of size 1000", lambda c: "large weights" in c.tags),
        ("gradients flow to all three inputs", lambda c: c.grad_leaves == (0, 1, 2)),
    ),
)
