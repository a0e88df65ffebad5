"""Right and wrong answers to the three exercises of notebook 12 (distillation_loss, quantize_int8,
dequantize, all PyTorch), as data for tests/test_grading_efficiency.py.

CORRECT: (name, function) pairs that must pass, written in different styles; MISTAKES:
(name, function, fragment): the check must fail with a message containing `fragment`, the
fragment naming the mistake. Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse import ref


# ============================================================================
# distillation_loss(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5)


def distil_notebook(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """F.kl_div on two log-probabilities (log_target=True), as the notebook's solution."""
    T = temperature
    log_p_student = F.log_softmax(student_logits / T, dim=-1)
    log_p_teacher = F.log_softmax(teacher_logits.detach() / T, dim=-1)
    soft = F.kl_div(log_p_student, log_p_teacher, reduction="batchmean", log_target=True)
    return alpha * T ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, labels)


def distil_probability_target(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """F.kl_div with the teacher's probabilities as target (its default), computed under no_grad."""
    with torch.no_grad():
        p_teacher = F.softmax(teacher_logits / temperature, dim=1)
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=1), p_teacher, reduction="batchmean")
    hard = F.cross_entropy(student_logits, labels)
    return alpha * temperature * temperature * soft + (1.0 - alpha) * hard


def distil_by_hand(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """The KL and the cross-entropy written out with log_softmax and gather."""
    T = temperature
    log_q = torch.log_softmax(student_logits / T, dim=-1)
    log_p = torch.log_softmax(teacher_logits.detach() / T, dim=-1)
    kl = (log_p.exp() * (log_p - log_q)).sum(dim=-1).mean()
    log_probs = torch.log_softmax(student_logits, dim=-1)
    ce = -log_probs.gather(1, labels[:, None]).squeeze(1).mean()
    return alpha * T ** 2 * kl + (1 - alpha) * ce


def distil_logsumexp(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """logsumexp by hand, the teacher's probabilities through xlogy."""
    teacher = teacher_logits.detach() / temperature
    student = student_logits / temperature
    log_q = student - torch.logsumexp(student, dim=-1, keepdim=True)
    p = torch.softmax(teacher, dim=-1)
    kl = (torch.xlogy(p, p) - p * log_q).sum() / student_logits.shape[0]
    rows = torch.arange(len(labels), device=labels.device)
    ce = (torch.logsumexp(student_logits, dim=-1) - student_logits[rows, labels]).mean()
    return alpha * temperature ** 2 * kl + (1 - alpha) * ce


def distil_rows_loop(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """One example at a time."""
    losses = []
    for s, t, y in zip(student_logits, teacher_logits.detach(), labels):
        log_q = F.log_softmax(s / temperature, dim=0)
        log_p = F.log_softmax(t / temperature, dim=0)
        soft = torch.sum(torch.exp(log_p) * (log_p - log_q))
        hard = -F.log_softmax(s, dim=0)[y]
        losses.append(alpha * temperature ** 2 * soft + (1 - alpha) * hard)
    return torch.stack(losses).mean()


DISTILLATION_CORRECT = [
    ("F.kl_div with log_target=True", distil_notebook),
    ("F.kl_div with probabilities as target, teacher under no_grad", distil_probability_target),
    ("by hand with log_softmax and gather", distil_by_hand),
    ("logsumexp and xlogy", distil_logsumexp),
    ("loop over the rows", distil_rows_loop),
]


def _distil(student_logits, teacher_logits, labels, temperature, alpha, *, power=2, soft_reduction="batchmean",
            hard_reduction="mean", student_T=True, teacher_T=True, ce_T=False, detach_teacher=True, dim=-1):
    """The notebook's solution with the switches that make the mistakes below."""
    T = temperature
    teacher = teacher_logits.detach() if detach_teacher else teacher_logits
    log_q = F.log_softmax(student_logits / T if student_T else student_logits, dim=dim)
    log_p = F.log_softmax(teacher / T if teacher_T else teacher, dim=dim)
    soft = F.kl_div(log_q, log_p, reduction=soft_reduction, log_target=True)
    hard = F.cross_entropy(student_logits / T if ce_T else student_logits, labels, reduction=hard_reduction)
    return alpha * T ** power * soft + (1 - alpha) * hard


def distil_no_t_squared(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return _distil(student_logits, teacher_logits, labels, temperature, alpha, power=0)


def distil_t_not_squared(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return _distil(student_logits, teacher_logits, labels, temperature, alpha, power=1)


def distil_divided_by_t_squared(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return _distil(student_logits, teacher_logits, labels, temperature, alpha, power=-2)


def distil_t_squared_on_everything(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return temperature ** 2 * _distil(student_logits, teacher_logits, labels, temperature, alpha, power=0)


def distil_reversed(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """F.kl_div's arguments the wrong way round: KL(student ‖ teacher)."""
    T = temperature
    log_q = F.log_softmax(student_logits / T, dim=-1)
    log_p = F.log_softmax(teacher_logits.detach() / T, dim=-1)
    soft = F.kl_div(log_p, log_q, reduction="batchmean", log_target=True)
    return alpha * T ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, labels)


def distil_student_only(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return _distil(student_logits, teacher_logits, labels, temperature, alpha, teacher_T=False)


def distil_teacher_only(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return _distil(student_logits, teacher_logits, labels, temperature, alpha, student_T=False)


def distil_probabilities_as_input(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """F.kl_div(softmax(student), softmax(teacher)): probabilities where log-probabilities belong."""
    T = temperature
    p_student = F.softmax(student_logits / T, dim=-1)
    p_teacher = F.softmax(teacher_logits.detach() / T, dim=-1)
    soft = F.kl_div(p_student, p_teacher, reduction="batchmean")
    return alpha * T ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, labels)


def distil_log_target_missing(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """Log-probabilities as target without log_target=True: the log of negative numbers."""
    T = temperature
    log_q = F.log_softmax(student_logits / T, dim=-1)
    log_p = F.log_softmax(teacher_logits.detach() / T, dim=-1)
    soft = F.kl_div(log_q, log_p, reduction="batchmean")
    return alpha * T ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, labels)


def distil_alpha_swapped(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return _distil(student_logits, teacher_logits, labels, temperature, 1 - alpha)


def distil_kl_summed(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return _distil(student_logits, teacher_logits, labels, temperature, alpha, soft_reduction="sum")


def distil_both_summed(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return _distil(student_logits, teacher_logits, labels, temperature, alpha, soft_reduction="sum",
                   hard_reduction="sum")


def distil_kl_mean(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return _distil(student_logits, teacher_logits, labels, temperature, alpha, soft_reduction="mean")


def distil_ce_at_t(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return _distil(student_logits, teacher_logits, labels, temperature, alpha, ce_T=True)


def distil_teacher_not_detached(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return _distil(student_logits, teacher_logits, labels, temperature, alpha, detach_teacher=False)


def distil_student_detached(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """.detach() on the wrong logits: the KL term trains the teacher, not the student."""
    T = temperature
    log_q = F.log_softmax(student_logits.detach() / T, dim=-1)
    log_p = F.log_softmax(teacher_logits / T, dim=-1)
    soft = F.kl_div(log_q, log_p, reduction="batchmean", log_target=True)
    return alpha * T ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, labels)


def distil_batch_axis(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return _distil(student_logits, teacher_logits, labels, temperature, alpha, dim=0)


def distil_log_of_softmax(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """softmax(...).log(): -inf where a probability underflows, and 0 · -inf is NaN."""
    T = temperature
    p = torch.softmax(teacher_logits.detach() / T, dim=-1)
    q = torch.softmax(student_logits / T, dim=-1)
    kl = (p * (p.log() - q.log())).sum(-1).mean()
    return alpha * T ** 2 * kl + (1 - alpha) * F.cross_entropy(student_logits, labels)


def distil_naive_exp(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """exp without subtracting the max first: inf / inf for large logits."""
    T = temperature

    def log_softmax(x):
        e = torch.exp(x)
        return torch.log(e / e.sum(dim=-1, keepdim=True))

    log_q, log_p = log_softmax(student_logits / T), log_softmax(teacher_logits.detach() / T)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1).mean()
    ce = -log_softmax(student_logits)[torch.arange(len(labels)), labels].mean()
    return alpha * T ** 2 * kl + (1 - alpha) * ce


def distil_t_multiplies(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    T = temperature
    log_q = F.log_softmax(student_logits * T, dim=-1)
    log_p = F.log_softmax(teacher_logits.detach() * T, dim=-1)
    soft = F.kl_div(log_q, log_p, reduction="batchmean", log_target=True)
    return alpha * T ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, labels)


def distil_no_weights(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    T = temperature
    soft = _distil(student_logits, teacher_logits, labels, T, 1.0)
    return soft + F.cross_entropy(student_logits, labels)


def distil_hard_unweighted(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    T = temperature
    soft = _distil(student_logits, teacher_logits, labels, T, 1.0)
    return alpha * soft + F.cross_entropy(student_logits, labels)


def distil_teacher_argmax(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return _distil(student_logits, teacher_logits, teacher_logits.argmax(dim=-1), temperature, alpha)


def distil_kl_sign(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    T = temperature
    log_q = F.log_softmax(student_logits / T, dim=-1)
    log_p = F.log_softmax(teacher_logits.detach() / T, dim=-1)
    kl = (log_p.exp() * (log_q - log_p)).sum(-1).mean()
    return alpha * T ** 2 * kl + (1 - alpha) * F.cross_entropy(student_logits, labels)


def distil_default_temperature_1(student_logits, teacher_logits, labels, temperature=1.0, alpha=0.5):
    return distil_notebook(student_logits, teacher_logits, labels, temperature, alpha)


def distil_default_alpha_0_9(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.9):
    return distil_notebook(student_logits, teacher_logits, labels, temperature, alpha)


def distil_hardcoded_temperature(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return distil_notebook(student_logits, teacher_logits, labels, 2.0, alpha)


def distil_hardcoded_alpha(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return distil_notebook(student_logits, teacher_logits, labels, temperature, 0.5)


def distil_item(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return distil_notebook(student_logits, teacher_logits, labels, temperature, alpha).item()


def distil_detached(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return distil_notebook(student_logits, teacher_logits, labels, temperature, alpha).detach()


def distil_float32(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return distil_notebook(student_logits.float(), teacher_logits.float(), labels, temperature, alpha)


def distil_float64(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return distil_notebook(student_logits.double(), teacher_logits.double(), labels, temperature, alpha)


def distil_per_example(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    T = temperature
    log_q = F.log_softmax(student_logits / T, dim=-1)
    log_p = F.log_softmax(teacher_logits.detach() / T, dim=-1)
    soft = (log_p.exp() * (log_p - log_q)).sum(-1)
    return alpha * T ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, labels, reduction="none")


def distil_numpy(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    s, t = student_logits.detach().numpy(), teacher_logits.detach().numpy()
    T = temperature

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    log_q, log_p = log_softmax(s / T), log_softmax(t / T)
    kl = (np.exp(log_p) * (log_p - log_q)).sum(-1).mean()
    ce = -log_softmax(s)[np.arange(len(s)), labels.numpy()].mean()
    return np.array(alpha * T ** 2 * kl + (1 - alpha) * ce)


def distil_in_place(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    student_logits /= temperature  # in place, on a leaf that requires grad
    return distil_notebook(student_logits, teacher_logits, labels, 1.0, alpha)


def distil_course_nn(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    return pnn.distillation_loss(student_logits, teacher_logits, labels, temperature, alpha)


def distil_course_ref(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    value = ref.distillation_loss(student_logits.detach().numpy(), teacher_logits.detach().numpy(),
                                  labels.numpy(), temperature, alpha)
    live = distil_notebook(student_logits, teacher_logits, labels, temperature, alpha)  # only for the gradient
    return live - live.detach() + value


DISTILLATION_MISTAKES = [
    ("T² missing", distil_no_t_squared, "the T² factor missing"),
    ("T instead of T²", distil_t_not_squared, "T instead of T²"),
    ("divided by T²", distil_divided_by_t_squared, "divided by T² instead of multiplied"),
    ("T² on the cross-entropy too", distil_t_squared_on_everything, "T² applied to the whole loss"),
    ("KL reversed", distil_reversed, "the KL reversed, KL(student ‖ teacher)"),
    ("temperature on the student only", distil_student_only, "the temperature on the student's logits only"),
    ("temperature on the teacher only", distil_teacher_only, "the temperature on the teacher's logits only"),
    ("probabilities as F.kl_div's input", distil_probabilities_as_input,
     "probabilities where log-probabilities belong"),
    ("log-probabilities as target without log_target", distil_log_target_missing,
     "F.kl_div's target must be probabilities unless log_target=True"),
    ("alpha and 1 - alpha swapped", distil_alpha_swapped, "alpha and 1 − alpha swapped"),
    ("KL summed over the batch", distil_kl_summed, "the KL summed over the batch instead of averaged"),
    ("both terms summed over the batch", distil_both_summed, "the sum over the batch instead of the mean, in both"),
    ("KL averaged over the classes (reduction='mean')", distil_kl_mean, "the KL averaged over the classes too"),
    ("cross-entropy at temperature T", distil_ce_at_t, "the cross-entropy at temperature T"),
    ("teacher not detached", distil_teacher_not_detached, "the teacher's logits received a gradient"),
    ("student detached instead of the teacher", distil_student_detached,
     "the student's logits are detached there"),
    ("softmax over the batch axis", distil_batch_axis, "the softmax over the batch axis (dim 0)"),
    ("log of a softmax (underflow)", distil_log_of_softmax, "a probability that underflows to 0 has log -inf"),
    ("exp without the max (overflow)", distil_naive_exp, "exp of logits this large overflows"),
    ("logits multiplied by T", distil_t_multiplies, "multiplied by the temperature instead of divided"),
    ("no weights", distil_no_weights, "the two terms added without their weights"),
    ("cross-entropy without (1 - alpha)", distil_hard_unweighted, "the cross-entropy without its weight (1 − alpha)"),
    ("teacher's argmax as labels", distil_teacher_argmax, "against the teacher's argmax instead of the labels"),
    ("KL with the wrong sign", distil_kl_sign, "the KL with the wrong sign"),
    ("default temperature 1", distil_default_temperature_1, "a temperature of 1 where none was passed"),
    ("default alpha 0.9", distil_default_alpha_0_9, "an alpha of 0.9 where none was passed"),
    ("temperature 2 hard-coded", distil_hardcoded_temperature, "a temperature of 2 whatever the argument says"),
    ("alpha 0.5 hard-coded", distil_hardcoded_alpha, "an alpha of 0.5 whatever the argument says"),
    (".item()", distil_item, "the loss is a Python float; return the tensor itself (no .item())"),
    (".detach()", distil_detached, "gradients do not flow"),
    ("float32 result for float64 input", distil_float32, "dtype torch.float32, expected torch.float64 like the logits"),
    ("float64 result for float32 input", distil_float64, "dtype torch.float64, expected torch.float32 like the logits"),
    ("one loss per example", distil_per_example, "one loss per example: average them over the batch"),
    ("computed in NumPy", distil_numpy, "is a NumPy array, expected a torch.Tensor"),
    ("logits divided in place", distil_in_place, "do not divide the logits in place"),
    ("calls the course's torch version", distil_course_nn, "calls plmcourse.nn.distillation_loss; write it yourself"),
    ("calls the course's NumPy version", distil_course_ref, "calls plmcourse.ref.distillation_loss; write it yourself"),
]


# ============================================================================
# quantize_int8(w, dim=None) -> (q, scale)


def quant_notebook(w, dim=None):
    if dim is None:
        absmax = w.abs().amax()
    else:
        others = [a for a in range(w.dim()) if a != dim % w.dim()]
        absmax = w.abs().amax(dim=others, keepdim=True) if others else w.abs()  # 1-D: a scale per entry
    scale = absmax / 127
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.clamp(torch.round(w / safe), -127, 127).to(torch.int8), scale


def quant_movedim(w, dim=None):
    """The slices moved to the front and flattened: (n, rest).abs().max(1), reshaped to keepdim."""
    if dim is None:
        absmax = torch.max(torch.abs(w))
    else:
        d = dim % w.ndim
        rows = torch.movedim(w, d, 0).reshape(w.shape[d], -1)
        shape = [1] * w.ndim
        shape[d] = w.shape[d]
        absmax = rows.abs().max(dim=1).values.reshape(shape)
    scale = absmax / 127.0
    ratio = w / scale.masked_fill(scale == 0, 1.0)
    return ratio.round().clamp(min=-127, max=127).to(dtype=torch.int8), scale


def quant_multiply(w, dim=None):
    """w * (127 / absmax), the zero slices set afterwards."""
    if dim is None:
        absmax = w.abs().max()
    else:
        absmax = w.abs()
        for axis in range(w.dim()):
            if axis != dim % w.dim():
                absmax = absmax.amax(dim=axis, keepdim=True)
    levels = torch.where(absmax > 0, w * 127 / absmax, torch.zeros_like(w))
    return torch.round(levels).clamp(-127, 127).type(torch.int8), absmax / 127


def quant_nan_to_num(w, dim=None):
    """0 / 0 on a zero slice, the NaN replaced before rounding."""
    if dim is None:
        absmax = w.abs().max()
    else:
        others = tuple(a for a in range(w.dim()) if a != dim % w.dim())
        absmax = torch.amax(w.abs(), dim=others, keepdim=True) if len(others) else w.abs()
    scale = absmax / 127
    q = torch.nan_to_num(w / scale, nan=0.0).round().clamp(-127, 127)
    return q.to(torch.int8), scale


def quant_loop(w, dim=None):
    """A loop over the slices along dim."""
    if dim is None:
        scale = w.abs().max() / 127
        safe = scale if scale > 0 else torch.ones_like(scale)
        return torch.round(w / safe).clamp(-127, 127).to(torch.int8), scale
    d = dim if dim >= 0 else dim + w.dim()
    q = torch.empty(w.shape, dtype=torch.int8, device=w.device)
    shape = [1] * w.dim()
    shape[d] = w.shape[d]
    scale = torch.empty(shape, dtype=w.dtype, device=w.device)
    for i in range(w.shape[d]):
        part = w.select(d, i)
        s = part.abs().max() / 127
        q.select(d, i).copy_(torch.round(part / (s if s > 0 else 1)).clamp(-127, 127))
        scale.view(-1)[i] = s
    return q, scale


QUANTIZE_CORRECT = [
    ("amax over the other axes, torch.where", quant_notebook),
    ("movedim and reshape, masked_fill", quant_movedim),
    ("w * 127 / absmax, one axis at a time", quant_multiply),
    ("nan_to_num after 0 / 0", quant_nan_to_num),
    ("loop over the slices", quant_loop),
]


def _absmax(w, dim, keepdim=True):
    if dim is None:
        return w.abs().amax()
    others = [a for a in range(w.dim()) if a != dim % w.dim()]
    return w.abs().amax(dim=others, keepdim=keepdim)


def _levels(w, scale, rounding=torch.round):
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.clamp(rounding(w / safe), -127, 127)


def quant_max_not_absmax(w, dim=None):
    if dim is None:
        top = w.amax()
    else:
        top = w.amax(dim=[a for a in range(w.dim()) if a != dim % w.dim()], keepdim=True)
    scale = top / 127
    return _levels(w, scale).to(torch.int8), scale


def quant_255(w, dim=None):
    scale = _absmax(w, dim) / 255
    return _levels(w, scale).to(torch.int8), scale


def quant_128(w, dim=None):
    scale = _absmax(w, dim) / 128
    return _levels(w, scale).to(torch.int8), scale


def quant_floor(w, dim=None):
    scale = _absmax(w, dim) / 127
    return _levels(w, scale, torch.floor).to(torch.int8), scale


def quant_truncate(w, dim=None):
    scale = _absmax(w, dim) / 127
    return _levels(w, scale, lambda x: x).to(torch.int8), scale  # .to(int8) truncates toward zero


def quant_half_away(w, dim=None):
    scale = _absmax(w, dim) / 127
    return _levels(w, scale, lambda x: torch.sign(x) * torch.floor(x.abs() + 0.5)).to(torch.int8), scale


def quant_half_up(w, dim=None):
    scale = _absmax(w, dim) / 127
    return _levels(w, scale, lambda x: torch.floor(x + 0.5)).to(torch.int8), scale


def quant_wrong_axis(w, dim=None):
    """The absmax along dim instead of over the other axes."""
    absmax = w.abs().amax() if dim is None else w.abs().amax(dim=dim, keepdim=True)
    scale = absmax / 127
    return _levels(w, scale).to(torch.int8), scale


def quant_no_keepdim(w, dim=None):
    scale = _absmax(w, dim, keepdim=False) / 127
    q = _levels(w, scale if dim is None else _absmax(w, dim) / 127)
    return q.to(torch.int8), scale


def quant_float_q(w, dim=None):
    scale = _absmax(w, dim) / 127
    return _levels(w, scale), scale


def quant_int32_q(w, dim=None):
    scale = _absmax(w, dim) / 127
    return _levels(w, scale).to(torch.int32), scale


def quant_int64_q(w, dim=None):
    scale = _absmax(w, dim) / 127
    return _levels(w, scale).long(), scale


def quant_uint8_q(w, dim=None):
    scale = _absmax(w, dim) / 127
    return _levels(w, scale).to(torch.uint8), scale


def quant_python_scale(w, dim=None):
    q, scale = quant_notebook(w, dim)
    return q, (scale.item() if dim is None else scale)


def quant_float32_scale(w, dim=None):
    q, scale = quant_notebook(w, dim)
    return q, scale.float()


def quant_asymmetric(w, dim=None):
    """min/max with a zero point, the zero point dropped from what is returned."""
    if dim is None:
        low, high = w.amin(), w.amax()
    else:
        others = [a for a in range(w.dim()) if a != dim % w.dim()]
        low, high = w.amin(dim=others, keepdim=True), w.amax(dim=others, keepdim=True)
    scale = (high - low) / 255
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    zero_point = torch.round(-128 - low / safe)
    return torch.clamp(torch.round(w / safe) + zero_point, -128, 127).to(torch.int8), scale


def quant_zero_scale_one(w, dim=None):
    scale = _absmax(w, dim) / 127
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)  # the guard kept in the returned scale
    return torch.clamp(torch.round(w / scale), -127, 127).to(torch.int8), scale


def quant_clamped_scale(w, dim=None):
    scale = (_absmax(w, dim) / 127).clamp(min=1e-8)
    return torch.clamp(torch.round(w / scale), -127, 127).to(torch.int8), scale


def quant_eps(w, dim=None):
    scale = _absmax(w, dim) / 127
    return torch.clamp(torch.round(w / (scale + 1e-8)), -127, 127).to(torch.int8), scale


def quant_if_dim(w, dim=None):
    """`if dim:` treats dim=0 as None."""
    if dim:
        others = [a for a in range(w.dim()) if a != dim % w.dim()]
        absmax = w.abs().amax(dim=others, keepdim=True)
    else:
        absmax = w.abs().amax()
    scale = absmax / 127
    return _levels(w, scale).to(torch.int8), scale


def quant_amax_no_dims(w, dim=None):
    """amax over the other axes even when there is none: on a 1-D w, amax(dim=[]) reduces every axis."""
    if dim is None:
        absmax = w.abs().amax()
    else:
        others = [a for a in range(w.dim()) if a != dim % w.dim()]
        absmax = w.abs().amax(dim=others, keepdim=True)
    scale = absmax / 127
    return _levels(w, scale).to(torch.int8), scale


def quant_negative_dim(w, dim=None):
    """The axes compared with dim as given: a negative dim equals none of them."""
    if dim is None:
        absmax = w.abs().amax()
    else:
        others = [a for a in range(w.dim()) if a != dim]
        absmax = w.abs().amax(dim=others, keepdim=True)
    scale = absmax / 127
    return _levels(w, scale).to(torch.int8), scale


def quant_keepdim_per_tensor(w, dim=None):
    """One scale for the whole tensor, but with every axis kept: shape (1, 1) instead of ()."""
    if dim is None:
        absmax = w.abs().amax(dim=list(range(w.dim())), keepdim=True)
    else:
        absmax = _absmax(w, dim)
    scale = absmax / 127
    return _levels(w, scale).to(torch.int8), scale


def quant_dim_ignored(w, dim=None):
    scale = w.abs().max() / 127
    return _levels(w, scale).to(torch.int8), scale


def quant_swapped(w, dim=None):
    q, scale = quant_notebook(w, dim)
    return scale, q


def quant_numpy(w, dim=None):
    a = w.numpy()
    if dim is None:
        absmax = np.abs(a).max()
    else:
        others = tuple(i for i in range(a.ndim) if i != dim % a.ndim)
        absmax = np.abs(a).max(axis=others, keepdims=True)
    scale = absmax / 127
    q = np.clip(np.round(a / np.where(scale == 0, 1, scale)), -127, 127).astype(np.int8)
    return q, np.asarray(scale)


def quant_in_place(w, dim=None):
    scale = _absmax(w, dim) / 127
    w /= torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.clamp(torch.round(w), -127, 127).to(torch.int8), scale


def quant_torch_per_tensor(w, dim=None):
    scale = _absmax(w, dim) / 127
    if dim is None:
        q = torch.quantize_per_tensor(w, max(scale.item(), 1e-30), 0, torch.qint8).int_repr()
    else:
        q = _levels(w, scale).to(torch.int8)
    return q, scale


def quant_torch_per_channel(w, dim=None):
    scale = _absmax(w, dim) / 127
    if dim is None:
        return _levels(w, scale).to(torch.int8), scale
    d = dim % w.dim()
    safe = torch.where(scale == 0, torch.ones_like(scale), scale).reshape(-1)
    q = torch.quantize_per_channel(w, safe, torch.zeros_like(safe, dtype=torch.long), d, torch.qint8)
    return q.int_repr(), scale


def quant_fake_quantize(w, dim=None):
    scale = _absmax(w, dim) / 127
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    if dim is None:
        levels = torch.fake_quantize_per_tensor_affine(w.float(), safe.item(), 0, -127, 127) / safe.item()
    else:
        levels = _levels(w, scale)
    return torch.round(levels).to(torch.int8), scale


def quant_observer(w, dim=None):
    from torch.ao.quantization import MinMaxObserver

    observer = MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric)
    observer(w.float())
    scale = _absmax(w, dim) / 127
    return _levels(w, scale).to(torch.int8), scale


def quant_course_fake_quantize(w, dim=None):
    scale = _absmax(w, dim) / 127
    back = pnn.fake_quantize(w, 8, dim)
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.round(back / safe).to(torch.int8), scale


def quant_course_nn(w, dim=None):
    return pnn.quantize_int8(w, dim)


def quant_course_ref(w, dim=None):
    q, scale = ref.quantize_int8(w.cpu().numpy(), dim)
    return torch.from_numpy(np.asarray(q)).to(w.device), torch.as_tensor(scale, device=w.device)


QUANTIZE_MISTAKES = [
    ("max instead of absmax", quant_max_not_absmax, "the max of w instead of the max of |w|"),
    ("255 instead of 127", quant_255, "absmax / 255"),
    ("128 instead of 127", quant_128, "absmax / 128"),
    ("floor instead of round", quant_floor, "floor instead of rounding"),
    ("truncation (.to(int8) without rounding)", quant_truncate, "truncation toward zero"),
    ("halves rounded away from zero", quant_half_away, "halves rounded away from zero"),
    ("floor(x + 0.5)", quant_half_up, "floor(x + 0.5): halves rounded up"),
    ("per-channel scale along the wrong axis", quant_wrong_axis,
     "the max taken along dim instead of over every other axis"),
    ("scale without keepdim", quant_no_keepdim, "keepdim=True"),
    ("q left in floating point", quant_float_q, "q has dtype torch.float64, expected torch.int8"),
    ("q as int32", quant_int32_q, "q has dtype torch.int32, expected torch.int8"),
    ("q as int64", quant_int64_q, "q has dtype torch.int64, expected torch.int8"),
    ("q as uint8", quant_uint8_q, "unsigned bytes cannot hold the negative levels"),
    ("scale as a Python float", quant_python_scale, "scale (second item) is a Python float"),
    ("scale float32 for float64 input", quant_float32_scale, "scale has dtype torch.float32, expected torch.float64"),
    ("asymmetric (min/max) quantization", quant_asymmetric, "asymmetric (min/max) quantization"),
    ("zero slice's scale returned as 1", quant_zero_scale_one, "a zero slice's scale returned as 1"),
    ("scale clamped to 1e-8", quant_clamped_scale, "the clamp (or eps) that guards the division leaked"),
    ("eps added to the scale", quant_eps, "an eps added to the scale before dividing"),
    ("`if dim:`", quant_if_dim, "dim=0 is False as well as None"),
    ("negative dim not normalised", quant_negative_dim, "a negative dim counts from the end"),
    ("amax(dim=[]) on a 1-D w", quant_amax_no_dims, "a 1-D w has no axis other than dim"),
    ("per-tensor scale with every axis kept", quant_keepdim_per_tensor,
     "one scale for the whole tensor is a 0-d tensor"),
    ("dim ignored", quant_dim_ignored, "but dim=0 asks for one per index along that axis"),
    ("(scale, q) returned", quant_swapped, "return (q, scale), q first"),
    ("computed in NumPy", quant_numpy, "q (first item) is a NumPy array, expected a torch.Tensor: keep the"),
    ("divides w in place", quant_in_place, "changed its input w in place"),
    ("torch.quantize_per_tensor", quant_torch_per_tensor, "calls torch.quantize_per_tensor; write it yourself"),
    ("torch.quantize_per_channel", quant_torch_per_channel, "calls torch.quantize_per_channel; write it yourself"),
    ("torch.fake_quantize_per_tensor_affine", quant_fake_quantize,
     "calls torch.fake_quantize_per_tensor_affine; write it yourself"),
    ("torch.ao.quantization's MinMaxObserver", quant_observer, "calls torch.ao.quantization.MinMaxObserver"),
    ("calls the course's fake_quantize", quant_course_fake_quantize, "calls plmcourse.nn.fake_quantize"),
    ("calls the course's torch version", quant_course_nn, "calls plmcourse.nn.quantize_int8; write it yourself"),
    ("calls the course's NumPy version", quant_course_ref, "calls plmcourse.ref.quantize_int8; write it yourself"),
]


# ============================================================================
# dequantize(q, scale)


def dequant_notebook(q, scale):
    return q.to(scale.dtype) * scale


def dequant_promotion(q, scale):
    """int8 times a float tensor promotes to the float's dtype, 0-d or not."""
    return q * scale


def dequant_type_as(q, scale):
    return torch.mul(q.type_as(scale), scale)


def dequant_expand(q, scale):
    return q.to(scale) * scale.expand_as(q)


DEQUANTIZE_CORRECT = [
    ("q.to(scale.dtype) * scale", dequant_notebook),
    ("q * scale (type promotion)", dequant_promotion),
    ("torch.mul and type_as", dequant_type_as),
    ("scale expanded to q's shape", dequant_expand),
]


def dequant_int8(q, scale):
    return (q.to(scale.dtype) * scale).to(q.dtype)


def dequant_float(q, scale):
    return q.float() * scale


def dequant_double(q, scale):
    return q.double() * scale


def dequant_divide(q, scale):
    return q.to(scale.dtype) / scale


def dequant_squeezed(q, scale):
    return q.to(scale.dtype) * scale.squeeze()


def dequant_flattened(q, scale):
    return q.to(scale.dtype) * scale.flatten()


def dequant_127_again(q, scale):
    return q.to(scale.dtype) / 127 * scale


def dequant_numpy(q, scale):
    return q.numpy().astype(scale.numpy().dtype) * scale.numpy()


def dequant_torch(q, scale):
    if scale.dim() == 0:
        return torch._make_per_tensor_quantized_tensor(q, scale.item(), 0).dequantize().to(scale.dtype)
    return q.to(scale.dtype) * scale


def dequant_course_nn(q, scale):
    return pnn.dequantize(q, scale)


def dequant_course_ref(q, scale):
    return torch.from_numpy(ref.dequantize(q.numpy(), scale.numpy()))


DEQUANTIZE_MISTAKES = [
    ("result left in int8", dequant_int8, "the result has dtype torch.int8, expected torch.float32 like scale"),
    ("float32 for a float64 scale", dequant_float, "q.float() is float32: use q.to(scale.dtype)"),
    ("float64 for a float32 scale", dequant_double, "the result has dtype torch.float64, expected torch.float32"),
    ("division instead of multiplication", dequant_divide, "q / scale instead of q · scale"),
    ("scale squeezed", dequant_squeezed, "broadcasts against the last axis instead of its own"),
    ("scale flattened", dequant_flattened, "broadcasts against the last axis instead of its own"),
    ("divided by 127 again", dequant_127_again, "divided by 127 again"),
    ("computed in NumPy", dequant_numpy, "the result is a NumPy array, expected a torch.Tensor: keep the"),
    ("torch's quantized tensor", dequant_torch, "calls torch._make_per_tensor_quantized_tensor; write it yourself"),
    ("calls the course's torch version", dequant_course_nn, "calls plmcourse.nn.dequantize; write it yourself"),
    ("calls the course's NumPy version", dequant_course_ref, "calls plmcourse.ref.dequantize; write it yourself"),
]


CATALOGUE = {
    "check_distillation_loss": (DISTILLATION_CORRECT, DISTILLATION_MISTAKES),
    "check_quantize_int8": (QUANTIZE_CORRECT, QUANTIZE_MISTAKES),
    "check_dequantize": (DEQUANTIZE_CORRECT, DEQUANTIZE_MISTAKES),
}
