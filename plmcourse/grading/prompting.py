"""The checks of notebook 10 (prompting with little data), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.prompting."""

from plmcourse.grading.core import Check, describe, expect_error_driver

__all__ = ["check_verbalizer_log_probs", "check_pet_soft_labels", "check_select_pseudo_labels"]


def _pet_driver(fn):
    return expect_error_driver(fn, describe)


check_verbalizer_log_probs = Check(
    name="check_verbalizer_log_probs",
    doc="""Check a PyTorch `verbalizer_log_probs(logits, mask_positions, label_word_ids) -> (B, C)`.

    logits (B, T, V) of a masked LM, mask_positions (B,) long, label_word_ids C lists of token ids
    (of different lengths). A class's score is the mean of its words' logits at the row's mask
    position; the result is the log-softmax over the C classes, a tensor of the logits' dtype.
    Compared with plmcourse.ref.verbalizer_log_probs. Cases run on `device` (default: the CPU).""",
    arg_names=("logits", "mask_positions", "label_word_ids"),
    device=True,
)


check_pet_soft_labels = Check(
    name="check_pet_soft_labels",
    doc="""Check a PyTorch `pet_soft_labels(pattern_log_probs, weights=None, temperature=2.0) -> (N, C)`.

    pattern_log_probs (P, N, C): each pattern's class log-probabilities, used as logits. The result
    is softmax(weighted mean over the patterns / temperature) over the classes, the weights
    normalised to sum to 1 (uniform when None), a tensor of pattern_log_probs' dtype. weights may be a
    tensor, a list or a tuple; a negative weight, or weights summing to 0, raise ValueError. Compared
    with plmcourse.ref.pet_soft_labels. Cases run on `device` (default: the CPU).""",
    arg_names=("pattern_log_probs", "weights", "temperature"),
    device=True,
    driver=_pet_driver,
)


check_select_pseudo_labels = Check(
    name="check_select_pseudo_labels",
    doc="""Check a PyTorch `select_pseudo_labels(probs, per_class) -> indices`.

    probs (N, C): class probabilities on unlabelled examples. The result holds, for each class, the
    per_class most confident examples predicted (argmax) as that class, all of them when it has
    fewer. Judged as a set of indices (any order; a torch integer tensor, a NumPy integer array or
    a list of ints), without duplicates; where confidences tie at the cut any of the tied will do.
    Compared with plmcourse.ref.select_pseudo_labels. Cases run on `device` (default: the CPU).""",
    arg_names=("probs", "per_class"),
    device=True,
)
