"""Knowledge distillation in PyTorch (notebook 12), with the names of `plmcourse.ref.efficiency`.

    distillation_loss(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5)
    student_from_teacher(teacher, layers)     DistilBERT's start: a shallower copy of the teacher

Intermediate layers (TinyBERT, Jiao et al. 2020; DistilBERT's cosine, Sanh et al. 2019):

    layer_map(n_student, n_teacher)           TinyBERT's uniform map: student layer m <- teacher layer m·N/M
    bert_internals(bert, ids, attention_mask) every layer's hidden states and attention scores
    hidden_mse(student, teacher, mask, projection=None)     MSE(H_s W_h, H_t) over real tokens
    attention_mse(student_scores, teacher_scores, mask)     MSE between attention scores, real pairs only
    cosine_loss(student, teacher, mask)       1 - cos(h_s, h_t) per real token, averaged
    TinyBertLoss(d_student, d_teacher, n_student, n_teacher)   the three losses with learned W_e, W_h
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

from plmcourse.nn.attention import split_heads

__all__ = ["distillation_loss", "student_from_teacher", "layer_map", "bert_internals", "hidden_mse",
           "attention_mse", "cosine_loss", "TinyBertLoss"]


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


# ----------------------------------------------------------------------------
# Intermediate layers: the student copies what the teacher computes inside, not only its answer.


def layer_map(n_student, n_teacher):
    """TinyBERT's uniform mapping {m: g(m)} with g(m) = m · N / M, for m = 0 ... M.

    Layer 0 is the embedding output on both sides (0 -> 0), and the student's last layer
    learns from the teacher's last (M -> N), because that is what the classifier reads;
    the layers in between are spread evenly (a 4-layer student of a 12-layer teacher: 3, 6, 9, 12).
    """
    if n_student < 1 or n_teacher % n_student:
        raise ValueError(f"a uniform map needs n_teacher to be a multiple of n_student, got {n_student}, {n_teacher}.")
    return {m: m * n_teacher // n_student for m in range(n_student + 1)}


def _attention_input(block, x):
    return block.norm1(x) if block.norm_first else x  # a pre-LN block attends to the normalised stream


def attention_scores(attention, x):
    """The scores a MultiHeadAttention makes before its softmax: q kᵀ / √d_head, (B, H, T, T)."""
    q, k, _ = attention.project(x)  # (B, T, d) each
    q, k = split_heads(q, attention.n_heads), split_heads(k, attention.n_heads)  # (B, H, T, hs)
    return q @ k.transpose(-2, -1) / math.sqrt(attention.head_dim)  # (B, H, T, T)


def bert_internals(bert, ids, attention_mask=None):
    """What TinyBERT compares: (hidden, scores) of a `Bert` (or a model with a `.bert`).

    hidden: n_layers + 1 tensors (B, T, d): the embedding output, then each layer's output;
    scores: n_layers tensors (B, H, T, T): each layer's attention scores before the softmax
    (TinyBERT fits those rather than the probabilities: it reports that they train faster).
    """
    bert = getattr(bert, "bert", bert)
    hidden = bert.all_layers(ids, attention_mask=attention_mask)
    scores = [attention_scores(bert.block(layer).self_attn, _attention_input(bert.block(layer), hidden[layer]))
              for layer in range(bert.config.n_layers)]
    return hidden, scores


def _real(mask, like):
    """(B, T) bool, True for real tokens; None means every token is real."""
    return torch.ones(like.shape[:2], dtype=torch.bool, device=like.device) if mask is None else mask


def hidden_mse(student, teacher, mask=None, projection=None):
    """TinyBERT's hidden-state (and embedding) loss: MSE(H_s W_h, H_t), the mean over real tokens
    and the teacher's features. student (B, T, d_s), teacher (B, T, d_t); projection maps d_s -> d_t
    (TinyBERT's W_h, learned with the student: its student is narrower than its teacher)."""
    if projection is not None:
        student = projection(student)  # (B, T, d_t)
    keep = _real(mask, teacher)[..., None].to(teacher.dtype)  # (B, T, 1)
    return ((student - teacher.detach()) ** 2 * keep).sum() / (keep.sum() * teacher.shape[-1])


def attention_mse(student_scores, teacher_scores, mask=None):
    """TinyBERT's attention loss: MSE between (B, H, T, T) scores, the mean over heads and over the
    (query, key) pairs of real tokens (a padded key's score is never used, so it is not compared)."""
    real = _real(mask, student_scores[:, 0])
    pairs = (real[:, None, :, None] & real[:, None, None, :]).to(student_scores.dtype)  # (B, 1, T, T)
    squared = (student_scores - teacher_scores.detach()) ** 2 * pairs  # (B, H, T, T)
    return squared.sum() / (pairs.sum() * student_scores.shape[1])


def cosine_loss(student, teacher, mask=None):
    """DistilBERT's cosine loss: 1 − cos(h_s, h_t) for each real token, averaged. It aligns the
    directions of the hidden states and ignores their lengths. student, teacher: (B, T, d)."""
    keep = _real(mask, teacher).to(teacher.dtype)  # (B, T)
    cosine = F.cosine_similarity(student, teacher.detach(), dim=-1)  # (B, T)
    return ((1 - cosine) * keep).sum() / keep.sum()


class TinyBertLoss(nn.Module):
    """TinyBERT's intermediate-layer distillation (Jiao et al. 2020): for the embeddings,
    MSE(E_s W_e, E_t); for each student layer m and its teacher layer g(m) = layer_map(M, N)[m],
    MSE(H_s W_h, H_t) of the outputs and MSE of the attention scores.

    It holds the learned projections (W_e, then one W_h per student layer), so train it together
    with the student. When the widths are equal the projections start as the identity.
    """

    def __init__(self, d_student, d_teacher, n_student, n_teacher):
        super().__init__()
        self.map = layer_map(n_student, n_teacher)
        self.projections = nn.ModuleList(nn.Linear(d_student, d_teacher, bias=False) for _ in self.map)
        if d_student == d_teacher:
            for projection in self.projections:
                nn.init.eye_(projection.weight)

    def forward(self, student, teacher, mask=None):
        """student, teacher: what bert_internals returns. Returns {"embedding", "hidden", "attention"}."""
        (hidden_s, scores_s), (hidden_t, scores_t) = student, teacher
        layers = [m for m in self.map if m > 0]
        return {
            "embedding": hidden_mse(hidden_s[0], hidden_t[0], mask, self.projections[0]),
            "hidden": sum(hidden_mse(hidden_s[m], hidden_t[self.map[m]], mask, self.projections[m]) for m in layers),
            # scores[l - 1] belongs to layer l: the scores inside it
            "attention": sum(attention_mse(scores_s[m - 1], scores_t[self.map[m] - 1], mask) for m in layers),
        }
