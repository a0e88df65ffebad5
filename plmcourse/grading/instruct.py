"""The checks of notebook 15 (from GPT-3 to ChatGPT), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.instruct."""

from plmcourse.grading.core import Check

__all__ = ["check_sft_loss", "check_bradley_terry_loss", "check_dpo_loss"]


check_sft_loss = Check(
    name="check_sft_loss",
    doc="""Check a NumPy `sft_loss(logits, tokens, answer_mask)`: the mean next-token loss on the answer's tokens.

    logits (B, T, V), tokens (B, T) ints, answer_mask (B, T) bool. Position t predicts tokens[:, t + 1],
    counted where answer_mask[:, t + 1]; the mean over every counted token of the batch; 0.0 when none;
    stable for large logits. Compared with plmcourse.ref.sft_loss.""",
    arg_names=("logits", "tokens", "answer_mask"),
)


check_bradley_terry_loss = Check(
    name="check_bradley_terry_loss",
    doc="""Check a NumPy `bradley_terry_loss(r_chosen, r_rejected)`: −mean log sigmoid(r_chosen − r_rejected).

    r_chosen, r_rejected: (N,) rewards of the preferred and the other answer of each pair. Finite for
    margins of ±1000. Compared with plmcourse.ref.bradley_terry_loss.""",
    arg_names=("r_chosen", "r_rejected"),
)


check_dpo_loss = Check(
    name="check_dpo_loss",
    doc="""Check a NumPy `dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps,
    beta=0.1)`: −mean log sigmoid(beta · ((pc − rc) − (pr − rr))).

    Each argument (N,): log-probabilities of whole answers (summed over their tokens) under the policy
    or the frozen reference. Finite for margins of ±1000. Compared with plmcourse.ref.dpo_loss.""",
    arg_names=("policy_chosen_logps", "policy_rejected_logps", "ref_chosen_logps", "ref_rejected_logps", "beta"),
)
