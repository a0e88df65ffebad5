"""The checks of notebook 12 (efficiency and scale), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.efficiency."""

from plmcourse.grading.core import Check

__all__ = ["check_distillation_loss", "check_quantize_int8", "check_dequantize"]


check_distillation_loss = Check(
    name="check_distillation_loss",
    doc="""Check a PyTorch `distillation_loss(student_logits, teacher_logits, labels, temperature=2.0, alpha=0.5)`.

    alpha · T² · KL(softmax(teacher / T) ‖ softmax(student / T))
    + (1 − alpha) · cross_entropy(student, labels), the KL summed over the classes and averaged
    over the batch, the cross-entropy (at temperature 1) averaged over the batch. A 0-d tensor of
    the logits' dtype, finite for large logits; its gradient with respect to student_logits is
    compared, and the teacher's logits (sent requiring grad) must get none. Compared with
    plmcourse.ref.distillation_loss. Cases run on `device` (default: the CPU).""",
    arg_names=("student_logits", "teacher_logits", "labels", "temperature", "alpha"),
    device=True,
)


check_quantize_int8 = Check(
    name="check_quantize_int8",
    doc="""Check a PyTorch `quantize_int8(w, dim=None) -> (q, scale)`: symmetric absmax int8.

    dim=None: scale = max|w| / 127, a 0-d tensor of w's dtype; dim=d: one scale per index along
    axis d (the absmax over every other axis), keepdim-shaped. q = clamp(round(w / scale), -127, 127)
    as torch.int8, rounding half to even; a slice of zeros gets scale 0 and q = 0. Compared with
    plmcourse.ref.quantize_int8. Cases run on `device` (default: the CPU).""",
    arg_names=("w", "dim"),
    device=True,
)


check_dequantize = Check(
    name="check_dequantize",
    doc="""Check a PyTorch `dequantize(q, scale)`: q.to(scale.dtype) * scale, broadcast as quantize_int8 shapes scale.

    q: int8 as quantize_int8 returns it; scale a 0-d or keepdim-shaped float32 or float64 tensor
    (zeros included). The result has q's shape and scale's dtype. Compared with
    plmcourse.ref.dequantize. Cases run on `device` (default: the CPU).""",
    arg_names=("q", "scale"),
    device=True,
)
