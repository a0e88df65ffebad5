"""The checks of notebook 01 (word vectors), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.word_vectors."""

from plmcourse.grading.core import Check

__all__ = ["check_log_softmax", "check_noise_distribution", "check_skipgram_negative_sampling_loss"]


check_log_softmax = Check(
    arg_names=("x",),
    name="check_log_softmax",
    doc="""Check a NumPy `log_softmax(x, axis=-1)`: stable for logits of 1e4, any axis, -inf entries, float32.""",
)


check_noise_distribution = Check(
    name="check_noise_distribution",
    doc="""Check a NumPy `noise_distribution(counts, power=0.75)`: count**power, normalised, 0 for unseen words.""",
    arg_names=("counts",),
)


check_skipgram_negative_sampling_loss = Check(
    name="check_skipgram_negative_sampling_loss",
    doc="""Check a NumPy `skipgram_negative_sampling_loss(center, context, negatives)`.
    
    It must return (loss, grad_center, grad_context, grad_negatives): the mean over
    the batch of -log σ(c·o) - Σ_k log σ(-c·n_k), and the gradients of that mean.""",
    arg_names=("center_vecs", "context_vecs", "negative_vecs"),
)
