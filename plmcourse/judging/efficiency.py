"""Checks for notebook 12 (smaller and faster models): distillation's loss and int8 quantization, PyTorch.

    check_distillation_loss   distillation_loss(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5)
    check_quantize_int8       quantize_int8(w, dim=None) -> (q, scale)
    check_dequantize          dequantize(q, scale)

check_distillation_loss compares the loss with plmcourse.ref.distillation_loss (float64) and
its gradient with respect to the student's logits with autograd through
plmcourse.nn.distillation_loss in float64. The teacher's logits are sent as leaves that require
grad, and they must get none (detached): a gradient that reaches them is named. It varies
B (1 and several), C (2 and more), the temperature (not passed, 1, 2, 4, non-integer ones,
positional and keyword), alpha (not passed, 0: pure cross-entropy, 1: pure distillation with the
labels unused, 0.5, 0.3 and others), float32 (the loss stays float32) and float64, a teacher equal
to the student (KL = 0), and large logits (up to ±1500 in float64, ±100 in float32), where a
softmax that underflows to 0 must not make the loss NaN or inf. F.kl_div, F.log_softmax and
F.cross_entropy may be used; the course's own versions may not.

check_quantize_int8 compares q and scale with plmcourse.ref.quantize_int8 on 1-D, 2-D and 3-D
tensors, float32 and float64, dim not passed, None, 0, 1 and -1 (and -2, 2 in the hidden cases),
a square weight (where reducing over the wrong axis gives the right shape), the largest magnitude
on the negative side, all-zero slices and an all-zero tensor (scale 0, q = 0), a single large
outlier, integers in [-127, 127] with absmax 127 (scale 1, q = w), and values that are exact
halves of a step (k + 0.5 times a power-of-two scale: every way of writing w / scale gives them
exactly, and they must round half to even, as torch.round does). scale must be a tensor of w's
dtype, 0-d for dim=None, keepdim-shaped for a dim; q torch.int8 of w's shape. Elsewhere, where
w / scale lies so close to a half that algebraically equal formulas (w / scale, w * 127 / absmax,
w / absmax * 127, ...) round it differently, each of their roundings is accepted. A 1-D w with a
dim (0 or -1) has no other axis: each entry is its own slice, scale = |w| / 127 of shape (n,), as
the notebook's text says (torch's amax(dim=[]) reduces every axis instead, a named mistake).
Two mistakes of the exercise's list cannot be seen, and are not in the catalogue:
  * no clamp: with scale = absmax / 127, |w / scale| is at most 127 up to one rounding, so
    round() never leaves [-127, 127] and the clamp never changes anything (it documents the
    range, and guards other scales);
  * 0 / 0 on an all-zero slice: torch converts NaN to int8 as 0 (on the CPU; PTX's float-to-int
    conversion, on CUDA, also gives 0 for NaN), so round(0 / 0).to(torch.int8) is the right q.
    The NaN is named where it shows: in a q left in floating point, or in dequantize's result;
    a guard that leaks into the returned scale (1, or a clamp's eps, instead of 0) is named too.
A teacher not detached gets a gradient of 0 where it equals the student (the KL is at its
minimum there), so that case lets it pass; every other case names it.
torch's quantizers (torch.quantize_per_tensor / _per_channel, torch.fake_quantize_*,
torch.ao.quantization's observers) and the course's own versions are sealed.

check_dequantize compares q.to(scale.dtype) * scale with plmcourse.ref.dequantize: 0-d scales
and keepdim ones (one per row of a square q, where a scale squeezed and broadcast against the
last axis gives wrong values without an error; one per column; one per index of a 3-D q's middle
axis), float32 and float64 scales, an all-zero scale (zeros, not NaN) and a zero entry in a
keepdim scale. The result must have scale's dtype (not int8, not float32 for a float64 scale).
"""

import math

import numpy as np
import torch

from plmcourse.grading import efficiency as declared
from plmcourse.judging.core import (
    Case,
    Spec,
    compare,
    expect_array, expect_loss, expect_pair,
    name_mistake,
    hidden_salt,
    hint_for,
    to_numpy,
    log_softmax,
    tolerance_for,
    dtype_name,
)
from plmcourse.judging.sentence_embeddings import _scalar_problem
from plmcourse.nn import distillation as nn_distillation
from plmcourse.nn import quantization as nn_quantization
from plmcourse.ref import efficiency as ref_efficiency

__all__ = ["check_distillation_loss", "check_quantize_int8", "check_dequantize"]


def _torch_functions(*names):
    """(function, "torch.name") for the torch functions of these names that this torch has."""
    return [(getattr(torch, name), f"torch.{name}") for name in names if hasattr(torch, name)]


# ============================================================================
# distillation_loss(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5), PyTorch

DEFAULT_TEMPERATURE = 2.0
DEFAULT_ALPHA = 0.5

DISTILLATION_SEAL = [
    (ref_efficiency.distillation_loss, "plmcourse.ref.distillation_loss"),
    (nn_distillation.distillation_loss, "plmcourse.nn.distillation_loss"),
]


def _distillation_case(seed, B, C, device, *, temperature=None, alpha=None, keyword=False, dtype=torch.float64,
                       scale=3.0, equal=False, large=None):
    """Student and teacher logits ~ N(0, scale^2) (B, C), labels in 0..C-1; temperature and alpha None: not
    passed (the defaults). keyword: both passed by name (alone, alpha is passed by name anyway).
    equal: the teacher's logits equal the student's (a separate tensor). large: entries of about ±large,
    with +1.5 large and -1.5 large in every row (softmaxes underflow to 0, exp overflows)."""
    rng = np.random.default_rng(seed)
    if large:
        s = rng.uniform(-1.0, 1.0, (B, C)) * large
        t = rng.uniform(-1.0, 1.0, (B, C)) * large
        for x in (s, t):
            columns = np.argsort(rng.random((B, C)), axis=1)[:, :2]
            np.put_along_axis(x, columns[:, :1], 1.5 * large, axis=1)
            np.put_along_axis(x, columns[:, 1:], -1.5 * large, axis=1)
    else:
        s = rng.standard_normal((B, C)) * scale
        t = rng.standard_normal((B, C)) * scale
    if equal:
        t = s.copy()
    labels = rng.integers(0, C, B)
    T = DEFAULT_TEMPERATURE if temperature is None else temperature
    a = DEFAULT_ALPHA if alpha is None else alpha

    def leaf(x):
        return torch.tensor(x, dtype=dtype, device=device, requires_grad=True)

    s_t, t_t = leaf(s), leaf(t)
    args, kwargs = [s_t, t_t, torch.tensor(labels, dtype=torch.int64, device=device)], {}
    if temperature is not None and not keyword:
        args.append(temperature)
        if alpha is not None:
            args.append(alpha)
    else:
        if temperature is not None:
            kwargs["temperature"] = temperature
        if alpha is not None:
            kwargs["alpha"] = alpha
    label = f"seed {seed}: logits of shape ({B}, {C}) {dtype_name(dtype)}"
    label += (", temperature not passed (2.0)" if temperature is None else
              f", temperature={temperature:g}" + (" (keyword)" if "temperature" in kwargs else ""))
    label += (", alpha not passed (0.5)" if alpha is None else
              f", alpha={alpha:g}" + (" (keyword)" if "alpha" in kwargs else ""))
    notes = {"the teacher's logits equal the student's": equal,
             f"large logits (up to ±{1.5 * large:g})" if large else "large logits": bool(large)}
    label += "".join(f", {note}" for note, on in notes.items() if on)
    tags = {"float32"} if dtype == torch.float32 else set()
    tags |= {"default temperature"} if temperature is None else set()
    tags |= {"default alpha"} if alpha is None else set()
    tags |= {"teacher equals student"} if equal else set()
    tags |= {"large logits"} if large else set()
    data = {"s": to_numpy(s_t).astype(np.float64), "t": to_numpy(t_t).astype(np.float64), "labels": labels,
            "T": float(T), "alpha": float(a), "dtype": dtype, "device": s_t.device, "large": large}
    return Case(label, tuple(args), kwargs, tags=frozenset(tags), data=data, grad_leaves=(0, 1))


def _distillation_cases(hidden, device):
    cases = [
        _distillation_case(0, 4, 5, device),
        _distillation_case(1, 3, 2, device, temperature=1.0, alpha=0.5),
        _distillation_case(2, 5, 6, device, temperature=4.0, alpha=0.3),
        _distillation_case(3, 1, 4, device, temperature=2.5, alpha=1.0),
        _distillation_case(4, 4, 3, device, temperature=2.0, alpha=0.0),
        _distillation_case(5, 3, 5, device, temperature=1.5, alpha=0.7, keyword=True),
        _distillation_case(6, 4, 6, device, temperature=3.0, alpha=0.5, dtype=torch.float32),
        _distillation_case(7, 3, 4, device, temperature=2.0, alpha=0.6, equal=True),
        _distillation_case(8, 3, 5, device, temperature=2.0, alpha=0.5, large=1000.0),
        _distillation_case(9, 4, 4, device, temperature=1.0, alpha=0.4, dtype=torch.float32, large=100.0),
        _distillation_case(10, 6, 10, device, alpha=0.25),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _distillation_case(salt + 100, 8, 7, device, temperature=3.0, alpha=0.9),
            _distillation_case(salt + 101, 1, 2, device, temperature=4.0, alpha=0.5),
            _distillation_case(salt + 102, 5, 3, device, temperature=0.5, alpha=0.2, keyword=True),
            _distillation_case(salt + 103, 16, 10, device, temperature=6.0, alpha=1.0, dtype=torch.float32),
            _distillation_case(salt + 104, 2, 5, device, temperature=1.25, alpha=0.0),
            _distillation_case(salt + 105, 6, 4, device, temperature=2.0, alpha=0.5, equal=True, dtype=torch.float32),
            _distillation_case(salt + 106, 4, 8, device, temperature=4.0, alpha=0.3, large=800.0),
            _distillation_case(salt + 107, 7, 3, device, temperature=3.5),
            _distillation_case(salt + 108, 3, 12, device, alpha=0.8, scale=6.0),
        ]
    return cases


def _distillation_reference(case):
    """The value of plmcourse.ref.distillation_loss (float64) and the gradient with respect to the student's
    logits of plmcourse.nn.distillation_loss in float64 (autograd)."""
    d = case.data
    value = ref_efficiency.distillation_loss(d["s"], d["t"], d["labels"], d["T"], d["alpha"])
    s = torch.tensor(d["s"], requires_grad=True)
    loss = nn_distillation.distillation_loss(s, torch.tensor(d["t"]), torch.tensor(d["labels"]), d["T"], d["alpha"])
    (grad,) = torch.autograd.grad(loss, s)
    return float(value), grad.numpy()


def _distillation_numpy(s, t, y, T, alpha, *, power=2, reverse=False, student_T=True, teacher_T=True,
                        multiply=False, kl="batchmean", ce="mean", ce_T=False, axis=-1, ce_axis=-1,
                        probabilities=False, swap=False, weights=None, sign=1.0, whole=False):
    """The loss in float64 NumPy, with the switches that reproduce known mistakes."""
    B, C = s.shape

    def soften(x, on):
        if not on:
            return x
        return x * T if multiply else x / T

    log_p_s = log_softmax(soften(s, student_T), axis)
    log_p_t = log_softmax(soften(t, teacher_T), axis)
    if probabilities:  # F.kl_div(softmax(student / T), ...): sum p_t (log p_t - p_s)
        per = (np.exp(log_p_t) * (log_p_t - np.exp(log_p_s))).sum(-1)
    elif reverse:
        per = (np.exp(log_p_s) * (log_p_s - log_p_t)).sum(-1)
    else:
        per = (np.exp(log_p_t) * (log_p_t - log_p_s)).sum(-1)
    per = sign * per
    soft = {"batchmean": per.mean(), "sum": per.sum(), "mean": per.sum() / (B * C)}[kl]
    nll = -log_softmax(s / T if ce_T else s, ce_axis)[np.arange(B), y]
    hard = nll.sum() if ce == "sum" else nll.mean()
    a_soft, a_hard = (1 - alpha, alpha) if swap else (alpha, 1 - alpha)
    if weights is not None:
        a_soft, a_hard = weights
    if whole:
        return np.array(T ** 2 * (a_soft * soft + a_hard * hard))
    return np.array(a_soft * T ** power * soft + a_hard * hard)


T2_MISSING = ("the T² factor missing: multiply the KL term by temperature ** 2 (the soft term's gradient shrinks as "
              "1/T², T² restores it)")
T_NOT_SQUARED = "T instead of T²: the KL term is multiplied by temperature ** 2"
T2_DIVIDED = "the KL term divided by T² instead of multiplied by it"
T2_WHOLE = ("T² applied to the whole loss: only the KL term is multiplied by temperature ** 2, the cross-entropy "
            "is not")
KL_REVERSED = ("the KL reversed, KL(student ‖ teacher): the teacher's distribution comes first, "
               "sum p_teacher · (log p_teacher − log p_student); F.kl_div(input, target) computes "
               "KL(target ‖ input), so input = the student's log-probabilities, target = the teacher's")
STUDENT_ONLY = "the temperature on the student's logits only: divide the teacher's logits by T too"
TEACHER_ONLY = "the temperature on the teacher's logits only: divide the student's logits by T too"
NO_SOFTENING = ("no temperature inside the softmaxes (T only in the T² factor): soften both distributions, "
                "softmax(logits / T)")
T_MULTIPLIED = "the logits multiplied by the temperature instead of divided by it"
PROBABILITIES = ("probabilities where log-probabilities belong: F.kl_div(input, target) takes the student's "
                 "LOG-probabilities as input, F.log_softmax(student_logits / T, dim=-1), not a softmax")
ALPHA_SWAPPED = ("alpha and 1 − alpha swapped: alpha weighs the distillation (KL) term, 1 − alpha the "
                 "cross-entropy with the labels")
KL_SUMMED = ("the KL summed over the batch instead of averaged (F.kl_div's reduction='sum'; "
             "reduction='batchmean' sums over the classes and averages over the batch)")
BOTH_SUMMED = "the sum over the batch instead of the mean, in both terms"
KL_MEAN = ("the KL averaged over the classes too: F.kl_div's reduction='mean' divides by B · C; "
           "reduction='batchmean' sums over the classes and averages over the batch")
CE_AT_T = ("the cross-entropy at temperature T: the hard term uses the student's logits as they are "
           "(temperature 1)")
BATCH_AXIS = ("the softmax over the batch axis (dim 0): each row is one example's distribution over the classes, "
              "softmax along dim=-1")
NO_WEIGHTS = "the two terms added without their weights: alpha · T² · KL + (1 − alpha) · CE"
HARD_UNWEIGHTED = "the cross-entropy without its weight (1 − alpha)"
TEACHER_ARGMAX = "the cross-entropy against the teacher's argmax instead of the labels"
KL_SIGN = "the KL with the wrong sign: KL(p ‖ q) = sum p · (log p − log q), which is never negative"


def _distillation_mistakes(d, tags):
    s, t, y, T, alpha = d["s"], d["t"], d["labels"], d["T"], d["alpha"]
    B = len(s)

    def loss(**switches):
        return lambda: (_distillation_numpy(s, t, y, T, alpha, **switches),)

    def at(T_=T, alpha_=alpha):
        return lambda: (_distillation_numpy(s, t, y, T_, alpha_),)

    if "default temperature" in tags:
        for other in (1.0, 3.0, 4.0, 0.5, 5.0, 10.0, 20.0):
            yield (f"a temperature of {other:g} where none was passed: the default must be temperature=2.0",
                   at(T_=other))
    elif T != DEFAULT_TEMPERATURE:
        yield ("a temperature of 2 whatever the argument says: use the temperature argument, not a constant",
               at(T_=DEFAULT_TEMPERATURE))
    if "default alpha" in tags:
        for other in (0.1, 0.2, 0.3, 0.7, 0.8, 0.9, 1.0, 0.0):
            yield f"an alpha of {other:g} where none was passed: the default must be alpha=0.5", at(alpha_=other)
    elif alpha != DEFAULT_ALPHA:
        yield ("an alpha of 0.5 whatever the argument says: use the alpha argument, not a constant",
               at(alpha_=DEFAULT_ALPHA))
    if alpha != 0:
        if T != 1:
            yield T2_MISSING, loss(power=0)
            yield T_NOT_SQUARED, loss(power=1)
            yield T2_DIVIDED, loss(power=-2)
            yield STUDENT_ONLY, loss(teacher_T=False)
            yield TEACHER_ONLY, loss(student_T=False)
            yield NO_SOFTENING, loss(student_T=False, teacher_T=False)
            yield T_MULTIPLIED, loss(multiply=True)
        yield KL_REVERSED, loss(reverse=True)
        yield PROBABILITIES, loss(probabilities=True)
        yield KL_SIGN, loss(sign=-1.0)
        if B > 1:
            yield KL_SUMMED, loss(kl="sum")
        yield KL_MEAN, loss(kl="mean")
        if B > 1:
            yield BATCH_AXIS, loss(axis=0)
            yield BATCH_AXIS, loss(axis=0, ce_axis=0)
    if alpha != 1:
        if T != 1:
            yield T2_WHOLE, loss(whole=True)
            yield CE_AT_T, loss(ce_T=True)
        if B > 1:
            yield BOTH_SUMMED, loss(kl="sum", ce="sum")
            yield BATCH_AXIS, loss(ce_axis=0)
        yield HARD_UNWEIGHTED, loss(weights=(alpha, 1.0))
        argmax = t.argmax(axis=-1)
        if np.any(argmax != y):
            yield TEACHER_ARGMAX, lambda: (_distillation_numpy(s, t, argmax, T, alpha),)
    if alpha != 0.5:
        yield ALPHA_SWAPPED, loss(swap=True)
    yield NO_WEIGHTS, loss(weights=(1.0, 1.0))


def _distillation_no_flow(detail=""):
    return (f"gradients do not flow{detail}: a .detach(), .item(), .numpy() or torch.tensor(...) on the way cuts the "
            f"autograd graph, keep every step of the student's side in torch")


def _judge_distillation(case, got, expected):
    d = case.data
    s = case.args[0]
    if isinstance(got, (float, np.floating)):
        return "the loss is a Python float; return the tensor itself (no .item()) so that gradients can flow"
    problem = expect_loss(
        got, case.reply, s, inputs="student_logits", like_name="the logits", no_flow=_distillation_no_flow,
        keep_dtype="keep their dtype (no .float() or .double(); make new tensors with dtype=student_logits.dtype)",
        keep_device="make new tensors on their device",
        shape_hint=lambda shape: (" (one loss per example: average them over the batch)" if shape == (len(s),) else
                                  " (a sum over the classes and a mean over the batch give one number)"
                                  if math.prod(shape) > 1 else ""))
    if problem:
        return problem
    value = float(to_numpy(got))
    expected_value, expected_grad = expected
    if not math.isfinite(value):
        if d["large"]:
            return (f"the loss is {value} for logits of up to ±{1.5 * d['large']:g} (temperature {d['T']:g}): a "
                    f"probability that underflows to 0 has log -inf (0 · log 0 is NaN), and exp of logits this "
                    f"large overflows; use F.log_softmax for both distributions (with "
                    f"F.kl_div(..., log_target=True)) and F.cross_entropy, which subtract the max first")
        return (f"the loss is {value}: F.kl_div's target must be probabilities unless log_target=True "
                f"(log-probabilities as target without it take the log of negative numbers)")
    tolerance = tolerance_for(d["dtype"])
    problem = _scalar_problem(value, expected_value, tolerance, "the loss", _distillation_mistakes(d, case.tags))
    if problem:
        return problem
    return _judge_distillation_gradients(case, expected_grad, tolerance)


def _judge_distillation_gradients(case, expected_grad, tolerance):
    d = case.data
    reply = case.reply
    if reply.grad_error:
        return f"computing the gradients through your function raised {reply.grad_error}"
    grad_s, grad_t = (list(reply.grads) + [None, None])[:2]
    if grad_s is None:
        return _distillation_no_flow(" to student_logits")
    problem = compare(grad_s, expected_grad, **tolerance, what="the gradient with respect to student_logits")
    if problem:
        s, y, B = d["s"], d["labels"], len(d["s"])
        hard_only = np.exp(log_softmax(s))
        hard_only[np.arange(B), y] -= 1.0
        hard_only *= (1 - d["alpha"]) / B
        if d["alpha"] != 0 and compare(grad_s, hard_only, **tolerance) is None:
            return (f"{problem}, although the loss is right: the KL term sends the student no gradient, so the "
                    f"student's logits are detached there; detach the teacher's logits only")
        return (f"{problem}, although the loss is right: a .detach() (or torch.no_grad) probably cuts part of the "
                f"student's side of the graph")
    if grad_t is not None and compare(grad_t, np.zeros(tuple(grad_t.shape)), **tolerance) is not None:
        # (a teacher equal to the student gets a gradient of 0, up to rounding, even when not detached)
        return ("the teacher's logits received a gradient: the teacher is not trained, so detach them "
                "(teacher_logits.detach(), or compute the teacher's probabilities under torch.no_grad())")
    return None


def _explain_distillation_error(error):
    text = str(error)
    if "numpy()" in text and "requires grad" in text:
        return "gradients do not flow through .numpy(), keep every step in torch"
    if "leaf Variable that requires grad" in text or "a view of a leaf Variable" in text:
        return "do not divide the logits in place (/=, div_): student_logits / T makes a new tensor"
    if "expected scalar type Long" in text or "Expected floating point type for target" in text:
        return ("F.cross_entropy(student_logits, labels) takes the integer labels as they are, and F.kl_div takes "
                "two float tensors of log-probabilities (or probabilities as target)")
    if "out of bounds" in text:
        return "labels index the classes (the last axis of the logits): F.cross_entropy(student_logits, labels)"
    if "dtype" in text or "expected scalar type" in text:
        return "keep the logits' dtype: make new tensors with dtype=student_logits.dtype"
    if "same device" in text:
        return "make new tensors on student_logits.device"
    if "must match the size" in text or "size mismatch" in text:
        return ("both distributions are (B, C): a softmax along dim=-1 keeps that shape, and the KL is summed over "
                "the classes before the mean over the batch")
    return None


check_distillation_loss = Spec(
    declared.check_distillation_loss,
    cases=_distillation_cases,
    reference=_distillation_reference,
    judge=_judge_distillation,
    seal=DISTILLATION_SEAL,
    explain_error=_explain_distillation_error,
    clauses=(
        ("alpha · T² · KL(softmax(teacher / T) ‖ softmax(student / T)) "
         "+ (1 − alpha) · cross_entropy(student, labels)", lambda c: c.data["T"] != 1 and 0 < c.data["alpha"] < 1),
        ("the KL summed over the classes and averaged over the batch",
         lambda c: len(c.data["s"]) > 1 and c.data["s"].shape[1] > 2 and c.data["alpha"] > 0),
        ("the cross-entropy at temperature 1, averaged over the batch",
         lambda c: len(c.data["s"]) > 1 and c.data["T"] != 1 and c.data["alpha"] < 1),
        ("temperature not passed: 2.0", lambda c: "default temperature" in c.tags),
        ("temperature passed", lambda c: "default temperature" not in c.tags),
        ("T = 1", lambda c: c.data["T"] == 1),
        ("T = 4", lambda c: c.data["T"] == 4),
        ("a non-integer temperature", lambda c: c.data["T"] != int(c.data["T"])),
        ("alpha not passed: 0.5", lambda c: "default alpha" in c.tags),
        ("alpha = 1: pure distillation, the labels unused", lambda c: c.data["alpha"] == 1),
        ("alpha = 0: pure cross-entropy with the labels", lambda c: c.data["alpha"] == 0),
        ("alpha = 0.5 passed", lambda c: c.data["alpha"] == 0.5 and "default alpha" not in c.tags),
        ("another alpha (0.3)", lambda c: c.data["alpha"] == 0.3),
        ("B = 1", lambda c: len(c.data["s"]) == 1),
        ("two classes", lambda c: c.data["s"].shape[1] == 2),
        ("stable for large logits: no NaN, no inf", lambda c: "large logits" in c.tags),
        ("a 0-d tensor of the logits' dtype (float32 in, float32 out)", lambda c: "float32" in c.tags),
        ("the teacher equal to the student: the KL is 0", lambda c: "teacher equals student" in c.tags),
        ("the teacher gets no gradient (detached)", lambda c: c.args[1].requires_grad and 1 in c.grad_leaves),
        ("the gradient with respect to student_logits", lambda c: 0 in c.grad_leaves),
    ),
)


# ============================================================================
# quantize_int8(w, dim=None) -> (q, scale), PyTorch

LEVELS = 127


def _observer_seal():
    """torch.ao.quantization's observers and fake-quantize modules (imported with torch), and its
    decomposed quantize ops once something has loaded them."""
    import sys

    seal = []
    observer = sys.modules.get("torch.ao.quantization.observer")
    for name in ("MinMaxObserver", "PerChannelMinMaxObserver", "MovingAverageMinMaxObserver",
                 "MovingAveragePerChannelMinMaxObserver", "HistogramObserver"):
        cls = getattr(observer, name, None)
        if cls is not None:
            seal += [(cls, f"torch.ao.quantization.{name}"), (cls.calculate_qparams, f"torch.ao.quantization.{name}")]
    fake = sys.modules.get("torch.ao.quantization.fake_quantize")
    cls = getattr(fake, "FakeQuantize", None)
    if cls is not None:
        seal.append((cls, "torch.ao.quantization.FakeQuantize"))
    decomposed = sys.modules.get("torch.ao.quantization.fx._decomposed")
    for name in ("quantize_per_tensor", "quantize_per_channel", "choose_qparams_symmetric_tensor"):
        fn = getattr(decomposed, name, None)
        if callable(fn):
            seal.append((fn, f"torch.ao.quantization.fx._decomposed.{name}"))
    return seal


QUANTIZE_SEAL = [
    (ref_efficiency.quantize_int8, "plmcourse.ref.quantize_int8"),
    (nn_quantization.quantize_int8, "plmcourse.nn.quantize_int8"),
    (nn_quantization.fake_quantize, "plmcourse.nn.fake_quantize"),
    (nn_quantization.QuantizedLinear, "plmcourse.nn.QuantizedLinear"),
    (nn_quantization.QuantizedLinear.__init__, "plmcourse.nn.QuantizedLinear"),
    *_torch_functions("quantize_per_tensor", "quantize_per_channel", "quantize_per_tensor_dynamic",
                      "fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine",
                      "_fake_quantize_learnable_per_tensor_affine", "_fake_quantize_learnable_per_channel_affine",
                      "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams", "fused_moving_avg_obs_fake_quant",
                      "fbgemm_linear_quantize_weight"),
]


def _quantize_seal():
    return QUANTIZE_SEAL + _observer_seal()


def _others(ndim, axis):
    return tuple(a for a in range(ndim) if a != axis)


def _slices(w, axis):
    """Views of each slice of w along axis (the whole of w for axis None)."""
    if axis is None:
        return [w[...]]
    return list(np.moveaxis(w, axis, 0))


def _set_absmax(rng, w, axis, magnitude):
    """One entry of each slice set to ±magnitude (the slice's absmax when the others are smaller)."""
    for part in _slices(w, axis):
        part[tuple(int(rng.integers(n)) for n in part.shape)] = magnitude * rng.choice([-1.0, 1.0])


def _quantize_case(seed, shape, device, *, dim="omitted", dtype=torch.float64, kind="gaussian", zero_slices=0,
                   negative=False, keyword=False):
    """w of `shape` (kind: "gaussian", its spread differing from slice to slice; "halves": k + 0.5 (and a few
    integers k) times a power-of-two step, each slice's absmax ±127 steps; "outlier": N(0, 0.02²) and one ±5;
    "integers" in [-127, 127], each slice's absmax 127; "zeros"). dim "omitted": not passed; None: passed as
    None. zero_slices: that many slices along dim (rows for dim None) set to 0; negative: the largest
    magnitude of each slice (of w for dim None) on the negative side."""
    rng = np.random.default_rng(seed)
    ndim = len(shape)
    axis = None if dim in ("omitted", None) else dim % ndim
    slice_shape = [1] * ndim
    if axis is not None:
        slice_shape[axis] = shape[axis]
    if kind == "gaussian":
        w = rng.standard_normal(shape) * rng.uniform(0.05, 3.0, slice_shape)
    elif kind == "outlier":
        w = rng.standard_normal(shape) * 0.02
        w[tuple(int(rng.integers(n)) for n in shape)] = 5.0 * rng.choice([-1.0, 1.0])
    elif kind == "halves":
        w = rng.integers(-126, 126, shape) + 0.5
        w[rng.random(shape) < 0.2] -= 0.5  # a few integers
        _set_absmax(rng, w, axis, LEVELS)
        w *= 2.0 ** -rng.integers(3, 9, slice_shape)  # a power-of-two step per slice: w / step is exact
    elif kind == "integers":
        w = rng.integers(-LEVELS, LEVELS + 1, shape).astype(np.float64)
        _set_absmax(rng, w, axis, LEVELS)
    else:
        w = np.zeros(shape)
    if negative:
        for part in _slices(w, axis):
            flat = part.reshape(-1)
            i = int(np.abs(flat).argmax())
            part[np.unravel_index(i, part.shape)] = -abs(flat[i])
    if zero_slices:
        along = 0 if axis is None else axis
        for i in rng.choice(shape[along], zero_slices, replace=False):
            np.moveaxis(w, along, 0)[i] = 0.0
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    w = w.astype(np_dtype)
    w_t = torch.tensor(w, dtype=dtype, device=device)
    args, kwargs = (w_t,), {}
    if dim != "omitted":
        if keyword or dim is None:
            kwargs["dim"] = dim
        else:
            args = (w_t, dim)
    label = f"seed {seed}: w of shape {tuple(shape)} {dtype_name(dtype)}, "
    label += "dim not passed (None)" if dim == "omitted" else f"dim={dim}" + (" (keyword)" if "dim" in kwargs else "")
    notes = {"exact halves of a step": kind == "halves", "one large outlier": kind == "outlier",
             "integers in [-127, 127], absmax 127": kind == "integers", "all zeros": kind == "zeros",
             "the largest magnitude negative": negative,
             f"{zero_slices} all-zero {'row' if axis is None else 'slice'}{'s' if zero_slices > 1 else ''}":
                 zero_slices > 0}
    label += "".join(f", {note}" for note, on in notes.items() if on)
    tags = {kind, dtype_name(dtype)}
    tags |= {"negative absmax"} if kind != "zeros" and _negative_absmax(w, axis) else set()
    tags |= {"zero slice"} if zero_slices or kind == "zeros" else set()
    data = {"w": w, "dim": None if dim == "omitted" else dim, "axis": axis, "dtype": dtype, "np_dtype": np_dtype,
            "device": w_t.device, "kind": kind}
    return Case(label, args, kwargs, tags=frozenset(tags), data=data)


def _negative_absmax(w, axis):
    """Whether the largest magnitude (of w, or of some slice along axis) is negative only."""
    others = None if axis is None else _others(w.ndim, axis)
    return bool(np.any(np.abs(w.min(axis=others)) > np.abs(w.max(axis=others))))


def _quantize_cases(hidden, device):
    cases = [
        _quantize_case(0, (10,), device, negative=True),
        _quantize_case(1, (6, 8), device, dim=0, dtype=torch.float32),
        _quantize_case(2, (5, 7), device, dim=1, zero_slices=1),
        _quantize_case(3, (2, 3, 4), device, dim=-1),
        _quantize_case(4, (4, 4), device, dim=0, zero_slices=1, negative=True),
        _quantize_case(5, (12,), device, kind="halves", dtype=torch.float32),
        _quantize_case(6, (3, 10), device, dim=0, kind="halves"),
        _quantize_case(7, (8, 8), device, dim=None, kind="outlier", dtype=torch.float32),
        _quantize_case(8, (3, 4), device, kind="zeros"),
        _quantize_case(9, (4, 6), device, kind="integers"),
        _quantize_case(10, (3, 2, 5), device, dim=0, dtype=torch.float32, zero_slices=1, keyword=True),
        _quantize_case(11, (5, 6), device, dim=-1, kind="halves", dtype=torch.float32),
        _quantize_case(12, (4, 3, 5), device, dim=1, zero_slices=1, negative=True),
        _quantize_case(13, (6,), device, dim=0),  # 1-D with a dim: a scale per entry
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _quantize_case(salt + 100, (16, 12), device, dim=0, dtype=torch.float32),
            _quantize_case(salt + 101, (7, 1), device, dim=0),
            _quantize_case(salt + 102, (3, 4, 5), device, dim=-2, negative=True),
            _quantize_case(salt + 103, (2, 3, 6), device, dim=2, kind="halves"),
            _quantize_case(salt + 104, (9, 9), device, dim=1, zero_slices=2, dtype=torch.float32),
            _quantize_case(salt + 105, (32,), device, kind="halves", dtype=torch.float32),
            _quantize_case(salt + 106, (6, 5), device, dim=0, kind="outlier"),
            _quantize_case(salt + 107, (5, 5), device, dim=None, kind="zeros", dtype=torch.float32),
            _quantize_case(salt + 108, (3, 8), device, dim=-1, kind="integers"),
            _quantize_case(salt + 109, (4, 7), device, negative=True, zero_slices=1),
            _quantize_case(salt + 110, (9,), device, dim=-1, zero_slices=2, dtype=torch.float32),
        ]
    return cases


def _quantize_reference(case):
    """plmcourse.ref.quantize_int8 in w's dtype, and for each entry the lowest and highest q that the
    algebraically equal ways of writing w / scale round to (the same q except right at a half)."""
    d = case.data
    q, scale = ref_efficiency.quantize_int8(d["w"], d["dim"])
    lo, hi = _q_range(d["w"], d["axis"], d["np_dtype"])
    return {"q": np.asarray(q), "scale": np.asarray(scale), "lo": lo, "hi": hi}


def _absmax(w, axis):
    if axis is None:
        return np.asarray(np.abs(w).max())
    return np.abs(w).max(axis=_others(w.ndim, axis), keepdims=True)


def _q_range(w, axis, dtype):
    absmax = _absmax(w, axis).astype(dtype)
    zero = absmax == 0
    safe_max = np.where(zero, dtype(1), absmax).astype(dtype)
    scale = (absmax / dtype(LEVELS)).astype(dtype)
    safe = np.where(zero, dtype(1), scale).astype(dtype)
    with np.errstate(all="ignore"):
        by_reciprocal = np.where(zero, dtype(1), safe_max * (dtype(1) / dtype(LEVELS)))  # scale = absmax * (1 / 127)
        quotients = [w / safe, w * (dtype(1) / safe), w * dtype(LEVELS) / safe_max, w / safe_max * dtype(LEVELS),
                     w * (dtype(LEVELS) / safe_max), w / by_reciprocal]
    rounded = [np.where(zero, 0, np.clip(np.round(x), -LEVELS, LEVELS)) for x in quotients]
    return np.minimum.reduce(rounded).astype(np.int64), np.maximum.reduce(rounded).astype(np.int64)


# Scale mistakes
SCALE_MAX = ("the max of w instead of the max of |w|: the largest magnitude here is negative, and "
             "scale = w.abs().max() / 127")
SCALE_255 = "absmax / 255: symmetric int8 uses the levels -127..127, so scale = absmax / 127"
SCALE_128 = "absmax / 128: symmetric int8 uses the levels -127..127 (not -128), so scale = absmax / 127"
SCALE_127_5 = "absmax / 127.5 (torch's symmetric observers): the exercise's scale is absmax / 127"
SCALE_ASYMMETRIC = ("asymmetric (min/max) quantization, scale = (max − min) / 255: the exercise is symmetric, "
                    "scale = max|w| / 127 and no zero point")
SCALE_ABSMAX = "absmax itself: scale = absmax / 127"
SCALE_WRONG_AXIS = ("the max taken along dim instead of over every other axis: dim={dim} keeps one scale per index "
                    "along axis {dim}, the absmax over all the other axes")
SCALE_ZERO_AS_ONE = ("a zero slice's scale returned as 1: the 1 only guards the division (divide by 1 where the "
                     "scale is 0); the scale returned stays 0")
SCALE_GUARD = ("a zero slice's scale returned as {value:g}: the clamp (or eps) that guards the division leaked into "
               "the returned scale, which stays 0 for a slice of zeros")

# q mistakes
Q_FLOOR = "floor instead of rounding: q = round(w / scale), to the nearest level (torch.round)"
Q_TRUNC = ("truncation toward zero: .to(torch.int8) without torch.round drops the fraction; round first, "
           "q = torch.round(w / scale)")
Q_CEIL = "ceil instead of rounding: q = round(w / scale), to the nearest level (torch.round)"
Q_HALF_AWAY = ("halves rounded away from zero: torch.round rounds half to even (62.5 → 62, 63.5 → 64), as the "
               "exercise asks")
Q_HALF_UP = "floor(x + 0.5): halves rounded up; torch.round rounds half to even (62.5 → 62, -62.5 → -62)"
Q_EPS = ("an eps added to the scale before dividing (w / (scale + eps)) moves exact halves off their rounding: "
         "guard only the zero scales, torch.where(scale == 0, 1, scale)")


def _expect_tensor(x, what):
    """expect_array(kind="torch"), without its words on gradients: quantizing is not differentiated."""
    if isinstance(x, np.ndarray):
        return f"{what} is a NumPy array, expected a torch.Tensor: keep the computation in torch"
    return expect_array(x, what, kind="torch")


def _scale_mistakes(w, axis, dim, dtype):
    """(description, compute) with compute() -> (scale as the mistake makes it, float64,)."""
    others = None if axis is None else _others(w.ndim, axis)
    keep = axis is not None
    w64 = w.astype(np.float64)
    absmax = np.abs(w64).max(axis=others, keepdims=keep)
    top, bottom = w64.max(axis=others, keepdims=keep), w64.min(axis=others, keepdims=keep)
    yield SCALE_MAX, lambda: (top / LEVELS,)
    yield SCALE_255, lambda: (absmax / 255,)
    yield SCALE_128, lambda: (absmax / 128,)
    yield SCALE_127_5, lambda: (absmax / 127.5,)
    yield SCALE_ASYMMETRIC, lambda: ((top - bottom) / 255,)
    yield SCALE_ASYMMETRIC, lambda: ((np.maximum(top, 0) - np.minimum(bottom, 0)) / 255,)
    yield SCALE_ABSMAX, lambda: (absmax,)
    if axis is not None and w.ndim > 1:
        wrong = np.abs(w64).max(axis=axis, keepdims=True)
        yield SCALE_WRONG_AXIS.format(dim=dim), lambda: (wrong / LEVELS,)


def _q_mistakes(w, scale, dtype):
    """(description, compute) with compute() -> (q as the mistake makes it,)."""
    scale = np.asarray(scale, dtype=dtype)
    zero = scale == 0
    safe = np.where(zero, dtype(1), scale).astype(dtype)
    x = (w / safe).astype(np.float64)

    def q(values):
        return lambda: (np.where(zero, 0, np.clip(values, -LEVELS, LEVELS)),)

    # The ones that differ from rounding at exact halves only come first: on a case of halves and
    # integers, floor(x + 0.5) is ceil(x), and an eps in the divisor truncates.
    yield Q_HALF_AWAY, q(np.sign(x) * np.floor(np.abs(x) + 0.5))
    yield Q_HALF_UP, q(np.floor(x + 0.5))
    for eps in (1e-12, 1e-10, 1e-8, 1e-7, 1e-6, 1e-5):
        with np.errstate(all="ignore"):
            nudged = np.round((w / (scale + dtype(eps))).astype(np.float64))
        yield Q_EPS, q(nudged)
    yield Q_FLOOR, q(np.floor(x))
    yield Q_TRUNC, q(np.trunc(x))
    yield Q_CEIL, q(np.ceil(x))


def _scale_shape_problem(got_shape, expected_shape, w_shape, dim, axis):
    if got_shape == expected_shape:
        return None
    problem = f"scale has shape {got_shape}, expected {expected_shape}"
    n = len(w_shape)
    if dim is None:
        if all(size == 1 for size in got_shape):
            return f"{problem}: one scale for the whole tensor is a 0-d tensor (w.abs().max() / 127, no keepdim)"
        return f"{problem}: dim=None means one scale for the whole tensor (a 0-d tensor)"
    if got_shape == ():
        hint = (" (is dim tested with `if dim:`? dim=0 is False as well as None: test `if dim is None:`)"
                if dim == 0 else "")
        return (f"{problem}: one scale for the whole tensor, but dim={dim} asks for one per index along that axis"
                f"{hint}")
    if got_shape == (w_shape[axis],) and n > 1:
        return (f"{problem}: the reduced axes must be kept with size 1 (keepdim=True) so that scale broadcasts "
                f"against w")
    if n == 1 and all(size == 1 for size in got_shape):
        return (f"{problem}: a 1-D w has no axis other than dim, so every entry is its own slice and scale is "
                f"w.abs() / 127, shape {expected_shape} (amax over an empty list of dims reduces every axis, "
                f"it does not reduce none)")
    reduced_along_dim = tuple(1 if a == axis else size for a, size in enumerate(w_shape))
    if got_shape in (reduced_along_dim, tuple(s for a, s in enumerate(w_shape) if a != axis)):
        return f"{problem}; it matches {SCALE_WRONG_AXIS.format(dim=dim)}"
    if got_shape == (1,) * n and dim < 0:
        return (f"{problem}: every axis was reduced, as if dim={dim} were none of the axes; a negative dim counts "
                f"from the end, so compare the axes with dim % w.dim()")
    return f"{problem}: size {w_shape[axis]} along dim={dim} and 1 on every other axis (keepdim=True)"


def _judge_quantize(case, got, expected):
    w_t = case.args[0]
    if isinstance(got, (tuple, list)) and len(got) == 2 and all(isinstance(x, torch.Tensor) for x in got):
        first, second = got
        if first.is_floating_point() and not second.is_floating_point() and tuple(second.shape) == tuple(w_t.shape):
            return "the pair is (scale, q); return (q, scale), q first"
    problem = expect_pair(got, "(q, scale)")
    if problem:
        return problem
    q, scale = got
    if isinstance(scale, (float, int, np.floating)) and not isinstance(scale, bool):
        return (f"scale (second item) is a Python {type(scale).__name__}; return a tensor of w's dtype "
                f"(a 0-d tensor for dim=None: no .item(), no float())")
    problem = _expect_tensor(q, "q (first item)") or _expect_tensor(scale, "scale (second item)")
    if problem:
        return problem
    problem = _judge_scale(case, scale, expected)
    if problem:
        return problem
    return _judge_q(case, q, expected)


def _judge_scale(case, scale, expected):
    d = case.data
    w_t = case.args[0]
    if not scale.is_floating_point():
        return f"scale has dtype {scale.dtype}, expected {w_t.dtype} like w: a scale is a floating-point number"
    if scale.dtype != w_t.dtype:
        return (f"scale has dtype {scale.dtype}, expected {w_t.dtype} like w (no .float() or .double(), no "
                f"torch.tensor(...) of a Python number: compute it from w)")
    if scale.device != w_t.device:
        return f"scale is on {scale.device}, expected {w_t.device} like w"
    problem = _scale_shape_problem(tuple(scale.shape), tuple(expected["scale"].shape), tuple(w_t.shape), d["dim"],
                                   d["axis"])
    if problem:
        return problem
    got = to_numpy(scale).astype(np.float64)
    want = expected["scale"].astype(np.float64)
    tolerance = tolerance_for(d["dtype"])
    problem = compare(got, want, **tolerance, what="scale")
    if problem is None:
        return None
    zero = want == 0
    if zero.any() and compare(got[~zero], want[~zero], **tolerance) is None:  # wrong at the zero slices only
        value = got[zero][got[zero] != 0]
        problem = f"scale is {value[0]:g} for a slice of zeros, expected 0" if len(value) else problem
        if np.all(got[zero] == 1):
            return f"{problem}; it matches {SCALE_ZERO_AS_ONE}"
        if np.all(np.isfinite(got[zero])) and np.all(got[zero] > 0):
            return f"{problem}; it matches {SCALE_GUARD.format(value=float(value[0]))}"
        return problem
    return name_mistake(problem, (got,), _scale_mistakes(d["w"], d["axis"], d["dim"], d["np_dtype"]), tolerance)


def _judge_q(case, q, expected):
    d = case.data
    w_t = case.args[0]
    zero = np.broadcast_to(expected["scale"] == 0, d["w"].shape)
    if q.dtype != torch.int8:
        if q.is_floating_point():
            values = to_numpy(q)
            nan = (f" (and it holds {values[zero & ~np.isfinite(values)].flat[0]} where a slice of w is all zeros: "
                   f"0 / 0; divide by 1 where the scale is 0)") if np.any(zero & ~np.isfinite(values)) else ""
            return (f"q has dtype {q.dtype}, expected torch.int8: round, clamp to [-127, 127], then "
                    f".to(torch.int8){nan}")
        if q.dtype == torch.uint8:
            return "q has dtype torch.uint8, expected torch.int8: unsigned bytes cannot hold the negative levels"
        return (f"q has dtype {q.dtype}, expected torch.int8: one byte per weight is the point of int8, "
                f"convert with .to(torch.int8)")
    if q.device != w_t.device:
        return f"q is on {q.device}, expected {w_t.device} like w"
    if tuple(q.shape) != tuple(w_t.shape):
        return f"q has shape {tuple(q.shape)}, expected {tuple(w_t.shape)}, the shape of w"
    got = to_numpy(q).astype(np.int64)
    lo, hi = expected["lo"], expected["hi"]
    wrong = (got < lo) | (got > hi)
    if not wrong.any():
        return None
    index = tuple(int(i) for i in np.argwhere(wrong)[0])
    at = "[" + ", ".join(map(str, index)) + "]"
    want = int(expected["q"][index])
    scale = np.broadcast_to(expected["scale"], d["w"].shape)[index]
    ratio = "" if scale == 0 else f", w / scale = {float(d['w'][index]) / float(scale):.6g}"
    problem = (f"q differs from the expected in {int(wrong.sum())} of {got.size} entries (at {at}: w = "
               f"{float(d['w'][index]):.6g}{ratio}, expected {want}, got {int(got[index])})")
    if zero[index]:
        return f"{problem}: a slice of zeros has scale 0 and q = 0 (divide by 1 where the scale is 0)"
    for description, compute in _q_mistakes(d["w"], expected["scale"], d["np_dtype"]):
        (candidate,) = compute()
        if np.all((candidate == got) | ((lo != hi) & ~wrong)):  # got is the mistake, up to right answers' ties
            return f"{problem}; it matches {description}"
    return problem


def _explain_quantize_error(error):
    return hint_for(error, [
        (("NoneType", ("None", "dim")), "dim may be None (the default): one scale for the whole tensor, "
                                        "w.abs().max() / 127"),
        (("Dimension out of range", ("out of range", "dim")),
         "dim may be any axis, negative too, of a tensor of any number of dimensions: take the absmax over "
         "every other axis, [a for a in range(w.dim()) if a != dim % w.dim()], with keepdim=True"),
        (("must match the size", "could not be broadcast"),
         "keep the reduced axes (keepdim=True) so that scale broadcasts against w"),
        (("not implemented for",),
         "round and clamp in floating point, then convert: torch.round(w / scale).clamp(-127, 127).to(torch.int8)"),
    ])


check_quantize_int8 = Spec(
    declared.check_quantize_int8,
    cases=_quantize_cases,
    reference=_quantize_reference,
    judge=_judge_quantize,
    seal=_quantize_seal,
    explain_error=_explain_quantize_error,
    clauses=(
        ("dim not passed (None): one scale for the whole tensor, a 0-d tensor", lambda c: "dim" not in c.kwargs
         and len(c.args) == 1),
        ("dim=None passed", lambda c: "dim" in c.kwargs and c.kwargs["dim"] is None),
        ("dim=0 on a Linear weight (out, in): scale (out, 1), one per output channel",
         lambda c: c.data["dim"] == 0 and c.data["w"].ndim == 2),
        ("dim=1", lambda c: c.data["dim"] == 1),
        ("a negative dim", lambda c: c.data["dim"] is not None and c.data["dim"] < 0),
        ("a 1-D w", lambda c: c.data["w"].ndim == 1),
        ("a 1-D w with dim: no other axis, a scale per entry, shape (n,)",
         lambda c: c.data["w"].ndim == 1 and c.data["dim"] is not None),
        ("a 3-D w", lambda c: c.data["w"].ndim == 3),
        ("float32: q int8, scale float32", lambda c: "float32" in c.tags),
        ("float64: scale float64", lambda c: "float64" in c.tags),
        ("round half to even at exact halves of a step", lambda c: "halves" in c.tags),
        ("a single large outlier", lambda c: "outlier" in c.tags),
        ("the largest magnitude negative (absmax, not max)", lambda c: "negative absmax" in c.tags),
        ("an all-zero slice: scale 0, q = 0, no NaN", lambda c: "zero slice" in c.tags and c.data["dim"] is not None),
        ("an all-zero tensor", lambda c: "zeros" in c.tags),
        ("integers in [-127, 127] with absmax 127: scale 1, q = w", lambda c: "integers" in c.tags),
        ("a square weight: one scale per row, not per column", lambda c: c.data["dim"] == 0
         and c.data["w"].ndim == 2 and c.data["w"].shape[0] == c.data["w"].shape[1]),
    ),
)


# ============================================================================
# dequantize(q, scale), PyTorch

DEQUANTIZE_SEAL = [
    (ref_efficiency.dequantize, "plmcourse.ref.dequantize"),
    (nn_quantization.dequantize, "plmcourse.nn.dequantize"),
    (nn_quantization.QuantizedLinear.forward, "plmcourse.nn.QuantizedLinear"),
    (torch.Tensor.dequantize, "torch.Tensor.dequantize"),
    *_torch_functions("dequantize", "_make_per_tensor_quantized_tensor", "_make_per_channel_quantized_tensor"),
]


def _dequantize_case(seed, shape, device, *, dim=None, dtype=torch.float64, zero=False, zero_slice=False):
    """q and scale as quantize_int8 makes them from w ~ N(0, 1) of `shape` (dim None: a 0-d scale;
    zero: w all zeros, scale 0; zero_slice: one slice along dim all zeros, so one scale entry is 0)."""
    rng = np.random.default_rng(seed)
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    w = rng.standard_normal(shape) * rng.uniform(0.01, 2.0)
    if dim is not None:
        w *= rng.uniform(0.1, 3.0, [n if a == dim % len(shape) else 1 for a, n in enumerate(shape)])
    if zero:
        w[...] = 0.0
    if zero_slice:
        np.moveaxis(w, dim, 0)[int(rng.integers(shape[dim]))] = 0.0
    q, scale = ref_efficiency.quantize_int8(w.astype(np_dtype), dim)
    q_t = torch.tensor(np.asarray(q), dtype=torch.int8, device=device)
    scale_t = torch.tensor(np.asarray(scale), dtype=dtype, device=device)
    label = (f"seed {seed}: q of shape {tuple(shape)}, scale of shape {tuple(scale_t.shape)} {dtype_name(dtype)}"
             + (" (one per index along dim " + str(dim) + ")" if dim is not None else ""))
    label += ", the scale 0 (w all zeros)" if zero else ", one scale entry 0" if zero_slice else ""
    tags = {dtype_name(dtype)} | ({"zero scale"} if zero or zero_slice else set())
    data = {"q": np.asarray(q), "scale": np.asarray(scale), "dtype": dtype, "dim": dim, "device": q_t.device}
    return Case(label, (q_t, scale_t), tags=frozenset(tags), data=data)


def _dequantize_cases(hidden, device):
    cases = [
        _dequantize_case(0, (5, 6), device, dtype=torch.float32),
        _dequantize_case(1, (4, 4), device, dim=0),
        _dequantize_case(2, (3, 5), device, dim=1, dtype=torch.float32),
        _dequantize_case(3, (2, 3, 4), device, dim=1),
        _dequantize_case(4, (6,), device, zero=True),
        _dequantize_case(5, (3, 4), device, dim=0, zero_slice=True),
        _dequantize_case(6, (7, 3), device, dim=0, dtype=torch.float32),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _dequantize_case(salt + 100, (8, 8), device, dim=0, dtype=torch.float32),
            _dequantize_case(salt + 101, (5,), device, dim=0),
            _dequantize_case(salt + 102, (2, 4, 3), device, dim=-1, dtype=torch.float32, zero_slice=True),
            _dequantize_case(salt + 103, (6, 2), device),
            _dequantize_case(salt + 104, (3, 3), device, zero=True, dtype=torch.float32),
            _dequantize_case(salt + 105, (6, 6), device, dim=1),
        ]
    return cases


DQ_DIVIDED = "q / scale instead of q · scale: the scale is one step, so each level is worth scale"
DQ_SQUEEZED = ("the scale squeezed (or flattened), so that it broadcasts against the last axis instead of its own: "
               "use scale as quantize_int8 shapes it, q.to(scale.dtype) * scale")
DQ_127_AGAIN = "divided by 127 again: scale already is absmax / 127, so the value is q · scale"
DQ_TIMES_127 = "multiplied by 127 again: scale already is absmax / 127, so the value is q · scale"


def _dequantize_mistakes(q, scale):
    q64, s64 = q.astype(np.float64), scale.astype(np.float64)
    with np.errstate(all="ignore"):
        yield DQ_DIVIDED, lambda: (q64 / s64,)
    if s64.ndim > 0:
        yield DQ_SQUEEZED, lambda: (q64 * s64.reshape(-1),)
    yield DQ_127_AGAIN, lambda: (q64 * s64 / LEVELS,)
    yield DQ_TIMES_127, lambda: (q64 * s64 * LEVELS,)


def _judge_dequantize(case, got, expected):
    d = case.data
    q_t, scale_t = case.args
    problem = _expect_tensor(got, "the result")
    if problem:
        return problem
    if not got.is_floating_point():
        return (f"the result has dtype {got.dtype}, expected {scale_t.dtype} like scale: convert q to scale's dtype "
                f"before multiplying, q.to(scale.dtype) * scale")
    if got.dtype != scale_t.dtype:
        hint = (" (q.float() is float32: use q.to(scale.dtype))" if got.dtype == torch.float32 else
                " (use q.to(scale.dtype))")
        return f"the result has dtype {got.dtype}, expected {scale_t.dtype} like scale{hint}"
    if got.device != q_t.device:
        return f"the result is on {got.device}, expected {q_t.device} like q"
    if tuple(got.shape) != tuple(q_t.shape):
        problem = f"the result has shape {tuple(got.shape)}, expected {tuple(q_t.shape)}, the shape of q"
        if got.dim() > q_t.dim() or got.numel() > q_t.numel():
            return f"{problem}; it matches {DQ_SQUEEZED}"
        return problem
    values = to_numpy(got).astype(np.float64)
    zero = np.broadcast_to(d["scale"] == 0, d["q"].shape)
    if np.any(zero & ~np.isfinite(values)):
        return (f"the result is {values[zero & ~np.isfinite(values)].flat[0]} where the scale is 0: dequantizing "
                f"multiplies, q · scale, which is 0 there (a division by the scale gives 0 / 0)")
    tolerance = tolerance_for(d["dtype"])
    problem = compare(values, expected, **tolerance, what="the result")
    return problem and name_mistake(problem, (values,), _dequantize_mistakes(d["q"], d["scale"]), tolerance)


def _explain_dequantize_error(error):
    return hint_for(error, [
        (("must match the size", "could not be broadcast"),
         "scale is shaped to broadcast against q as it is (size 1 on the other axes): use it as it is, do "
         "not squeeze, flatten or transpose it"),
        ((("result type", "can't be cast"),),
         "an in-place product cannot turn int8 into floats: make a new tensor, q.to(scale.dtype) * scale"),
    ])


check_dequantize = Spec(
    declared.check_dequantize,
    cases=_dequantize_cases,
    reference=lambda case: np.asarray(ref_efficiency.dequantize(case.data["q"], case.data["scale"])),
    judge=_judge_dequantize,
    seal=DEQUANTIZE_SEAL,
    explain_error=_explain_dequantize_error,
    clauses=(
        ("q.to(scale.dtype) * scale", lambda c: True),
        ("a 0-d scale (dim=None)", lambda c: c.data["scale"].ndim == 0),
        ("a keepdim scale, one per row (out, 1)", lambda c: c.data["dim"] == 0 and c.data["q"].ndim == 2),
        ("a keepdim scale along another axis", lambda c: c.data["dim"] not in (None, 0)),
        ("a float32 scale: a float32 result", lambda c: "float32" in c.tags),
        ("a float64 scale: a float64 result", lambda c: "float64" in c.tags),
        ("an all-zero scale: zeros, not NaN", lambda c: c.data["scale"].ndim == 0 and "zero scale" in c.tags),
        ("a zero entry in a keepdim scale", lambda c: c.data["scale"].ndim > 0 and "zero scale" in c.tags),
    ),
)
