"""BERT's pre-training loss in PyTorch (notebook 04), with the names and conventions of `plmcourse.ref.bert`."""

from plmcourse.nn.objectives import IGNORE_INDEX, cross_entropy

__all__ = ["mlm_loss"]


def mlm_loss(logits, labels):
    """Masked-LM loss: cross-entropy over the positions whose label is not -100 (see ref.mlm_loss)."""
    return cross_entropy(logits, labels, IGNORE_INDEX)
