"""The checks of notebook 13 (beyond one language), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.transfer."""

from plmcourse.grading.core import Check

__all__ = ["check_alignment_precision_at_1", "check_whole_entity_mask", "check_unfreezing_groups"]


check_alignment_precision_at_1 = Check(
    name="check_alignment_precision_at_1",
    doc="""Check a NumPy `alignment_precision_at_1(src_emb, tgt_emb, train_pairs, test_pairs) -> float`.""",
    arg_names=("src_emb", "tgt_emb", "train_pairs", "test_pairs"),
)


check_whole_entity_mask = Check(
    name="check_whole_entity_mask",
    doc="""Check a NumPy `whole_entity_mask(token_ids, entity_spans, budget, rng, mask_id, vocab_size)`.""",
    arg_names=("token_ids", "entity_spans", "budget", "rng", "mask_id", "vocab_size"),
)


check_unfreezing_groups = Check(
    name="check_unfreezing_groups",
    doc="""Check `unfreezing_groups(n_layers, step, unfreeze_every, base_lr, decay) -> {group: learning rate}`.""",
    arg_names=("n_layers", "step", "unfreeze_every", "base_lr", "decay"),
)
