"""Smaller and faster models in NumPy (notebook 12): distillation's loss and int8 quantization.

    distillation_loss(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5)
        alpha · T² · KL(softmax(teacher / T) ‖ softmax(student / T)) + (1 − alpha) · CE(student, labels)
    quantize_int8(w, dim=None) -> (q, scale)    symmetric absmax: q = round(w / scale), |q| <= 127
    dequantize(q, scale)                        q · scale, back to floating point

plmcourse.nn.distillation and plmcourse.nn.quantization have the PyTorch versions, with the
same names and conventions.
"""

from __future__ import annotations

import numpy as np

from plmcourse.ref.objectives import _log_softmax  # one stable log-softmax for the references

__all__ = ["distillation_loss", "quantize_int8", "dequantize"]


def distillation_loss(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """Hinton et al.'s loss: soft targets at temperature T, scaled by T², mixed with the labels' loss.

    student_logits, teacher_logits: (B, C); labels: (B,) ints. Both terms are means over the batch.
    The T² keeps the soft term's gradient the same size whatever T (its gradient shrinks as 1/T²).
    """
    s = np.asarray(student_logits, dtype=np.float64)
    t = np.asarray(teacher_logits, dtype=np.float64)
    T = temperature
    log_p_teacher, log_p_student = _log_softmax(t / T), _log_softmax(s / T)
    kl = (np.exp(log_p_teacher) * (log_p_teacher - log_p_student)).sum(axis=-1).mean()  # KL(teacher ‖ student)
    ce = -_log_softmax(s)[np.arange(len(labels)), np.asarray(labels)].mean()
    return alpha * T ** 2 * kl + (1 - alpha) * ce


def quantize_int8(w, dim=None):
    """Symmetric int8 quantization: scale = absmax / 127, q = clip(round(w / scale), -127, 127).

    dim=None: one scale for the whole tensor (a 0-d array). dim=d: one scale per index along
    axis d (the absmax over every other axis), shaped to broadcast against w (size 1 on the
    other axes); dim=0 of a Linear weight (out, in) is one scale per output channel.
    A slice of zeros gets scale 0 and q = 0. Rounding is half to even (np.round).
    """
    w = np.asarray(w)
    if dim is None:
        absmax = np.abs(w).max()
    else:
        others = tuple(a for a in range(w.ndim) if a != dim % w.ndim)
        absmax = np.abs(w).max(axis=others, keepdims=True)
    scale = (absmax / 127).astype(w.dtype)
    safe = np.where(scale == 0, 1, scale)  # a zero slice: w / 1 = 0, never 0 / 0
    q = np.clip(np.round(w / safe), -127, 127).astype(np.int8)
    return q, scale


def dequantize(q, scale):
    """int8 values back to floating point: q · scale (scale broadcasts, as quantize_int8 shapes it)."""
    return np.asarray(q).astype(np.asarray(scale).dtype) * scale
