"""The checks of notebook 02 (language models and ELMo), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.language_models."""

from plmcourse.grading.core import Check

__all__ = ["check_cross_entropy", "check_bilm_loss", "check_scalar_mix"]


check_cross_entropy = Check(
    name="check_cross_entropy",
    doc="""Check a NumPy `cross_entropy(logits, targets, ignore_index=-100)`: mean -log p(target), stable.""",
    arg_names=("logits", "targets"),
)


check_bilm_loss = Check(
    name="check_bilm_loss",
    doc="""Check a PyTorch `bilm_loss(forward_logits, backward_logits, targets)`: value and gradients.
    
    forward_logits[:, t] predicts targets[:, t + 1], backward_logits[:, t] predicts
    targets[:, t - 1]; each direction's mean cross-entropy over the predictions made
    between real tokens (targets of -100 are padding), summed.""",
    arg_names=("forward_logits", "backward_logits", "targets"),
    device=True,
)


check_scalar_mix = Check(
    name="check_scalar_mix",
    doc="""Check a PyTorch `scalar_mix(layers, weights, gamma)` = gamma * sum_j softmax(weights)_j layers[j].
    
    layers (N, ...), weights (N,), gamma 0-d; output and gradients with respect to
    all three are compared with plmcourse.nn.scalar_mix in float64.""",
    arg_names=("layers", "weights", "gamma"),
    device=True,
)
