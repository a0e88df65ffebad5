"""The checks of notebook 05 (GPT), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.gpt."""

from plmcourse.grading.core import Check

__all__ = [
    "check_causal_lm_loss",
    "check_top_k_filter",
    "check_top_p_filter",
]


check_causal_lm_loss = Check(
    name="check_causal_lm_loss",
    doc="""Check a PyTorch `causal_lm_loss(logits, tokens, ignore_index=-100)`: the shift happens inside.""",
    arg_names=("logits", "tokens"),
    device=True,
)


check_top_k_filter = Check(
    name="check_top_k_filter",
    doc="""Check a PyTorch `top_k_filter(logits, k)`: keep the k largest per row (last axis), others -inf.""",
    arg_names=("logits", "k"),
    device=True,
)


check_top_p_filter = Check(
    name="check_top_p_filter",
    doc="""Check a PyTorch `top_p_filter(logits, p)`: keep the smallest most-likely set with mass >= p.""",
    arg_names=("logits", "p"),
    device=True,
)
