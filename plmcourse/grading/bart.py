"""The checks of notebook 06 (BART and friends), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.bart."""

from plmcourse.grading.core import Check

__all__ = [
    "check_text_infilling",
    "check_prefix_lm_mask",
    "check_permutation_mask",
]


check_text_infilling = Check(
    name="check_text_infilling",
    doc="""Check a NumPy `text_infilling(tokens, rng, mask_id, mask_ratio=0.3, poisson_lambda=3.0)`.""",
    arg_names=("tokens", "rng", "mask_id"),
)


check_prefix_lm_mask = Check(
    name="check_prefix_lm_mask",
    doc="""Check a NumPy `prefix_lm_mask(n, prefix_len)`: bidirectional prefix, causal rest (UniLM).""",
    arg_names=("n", "prefix_len"),
)


check_permutation_mask = Check(
    name="check_permutation_mask",
    doc="""Check a NumPy `permutation_mask(order)`: i sees j when j comes earlier in the order (XLNet).""",
    arg_names=("order",),
)
