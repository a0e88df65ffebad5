"""Knowledge distillation in PyTorch (notebook 12), with the names of `plmcourse.ref.efficiency`.

    distillation_loss(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5)
    student_from_teacher(teacher, layers)     DistilBERT's start: a shallower copy of the teacher
"""

from __future__ import annotations

import copy

import torch.nn.functional as F
from torch import nn

__all__ = ["distillation_loss", "student_from_teacher"]


def distillation_loss(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5):
    """alpha · T² · KL(softmax(teacher / T) ‖ softmax(student / T)) + (1 − alpha) · CE(student, labels).

    student_logits, teacher_logits: (B, C); labels: (B,) int64. Both terms are batch means.
    The teacher gets no gradient. Why T²: the soft term's gradient with respect to the
    student's logits is (p_student − p_teacher) / T, and at high T those probabilities
    differ by about (logit difference) / T, so the gradient shrinks as 1/T²; T² restores it.
    """
    T = temperature
    log_p_student = F.log_softmax(student_logits / T, dim=-1)  # (B, C)
    log_p_teacher = F.log_softmax(teacher_logits.detach() / T, dim=-1)  # (B, C)
    # F.kl_div(input=log q, target=log p, log_target=True) is sum p (log p - log q): KL(p ‖ q).
    soft = F.kl_div(log_p_student, log_p_teacher, reduction="batchmean", log_target=True)
    hard = F.cross_entropy(student_logits, labels)
    return alpha * T ** 2 * soft + (1 - alpha) * hard


def student_from_teacher(teacher, layers):
    """A copy of `teacher` (anything with a `.bert` or a `Bert`) keeping only the given blocks,
    e.g. layers=[0, 2, 4] for every other block of six: DistilBERT's initialisation.

    Embeddings, pooler and heads are copied as they are; the config's n_layers follows.
    """
    if getattr(getattr(teacher, "bert", teacher).config, "share_layers", False):
        raise ValueError("an ALBERT teacher has one block used in every layer: there are no layers to pick.")
    student = copy.deepcopy(teacher)
    bert = getattr(student, "bert", student)
    bert.blocks = nn.ModuleList(bert.blocks[i] for i in layers)
    bert.config = copy.copy(bert.config)
    bert.config.n_layers = len(layers)
    return student
