"""The checks of notebook 04 (BERT), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.bert."""

from plmcourse.grading.core import Check

__all__ = [
    "check_mlm_mask",
    "check_mlm_loss",
    "check_bert_parameter_count",
]


check_mlm_mask = Check(
    name="check_mlm_mask",
    doc="""Check a NumPy `mlm_mask(tokens, rng, vocab_size, mask_id, special_ids, p=0.15) -> (inputs, labels)`.""",
    arg_names=("tokens", "rng", "vocab_size", "mask_id", "special_ids"),
)


check_mlm_loss = Check(
    name="check_mlm_loss",
    doc="""Check a PyTorch `mlm_loss(logits, labels)`: mean -log p(label) over labels != -100, with gradients.""",
    arg_names=("logits", "labels"),
    device=True,
)


check_bert_parameter_count = Check(
    name="check_bert_parameter_count",
    doc="""Check `bert_parameter_count(vocab_size, d_model, n_layers, d_ff, max_len, type_vocab_size=2)`.
    
    The count of BERT with its pooler and without the pre-training heads, the
    convention of the published 110M / 340M (exactly 109,482,240 and 335,141,888).""",
    arg_names=("vocab_size", "d_model", "n_layers", "d_ff", "max_len", "type_vocab_size"),
)
