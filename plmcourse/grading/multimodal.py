"""The checks of notebook 14 (text and images), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.multimodal."""

from plmcourse.grading.core import Check, expect_error_driver

__all__ = ["check_patchify", "check_joint_attention_mask", "check_clip_loss"]


check_patchify = Check(
    name="check_patchify",
    doc="""Check a NumPy `patchify(images, patch)`: (B, C, H, W) -> (B, N, C * patch * patch).

    N = (H / patch) * (W / patch) patches in row-major order (the top row of patches left to right,
    then the next row); each flattened channel first, then pixel row, then pixel column: entry
    c·p·p + i·p + j of patch (r, s) is images[b, c, r·p + i, s·p + j]. The images' dtype is kept.
    ValueError when H or W is not a multiple of patch.""",
    arg_names=("images", "patch"),
    driver=expect_error_driver,
)


check_joint_attention_mask = Check(
    name="check_joint_attention_mask",
    doc="""Check a NumPy `joint_attention_mask(text_mask, image_mask)` -> (B, T + N, T + N) bool.

    text_mask (B, T), image_mask (B, N): True (or 1) for a real token. The sequence is [text; image];
    mask[b, i, j] = (real[b, i] and real[b, j]) or i == j: every real token attends to every real token
    of both modalities; a padding position is never attended to and attends to itself only.""",
    arg_names=("text_mask", "image_mask"),
)


check_clip_loss = Check(
    name="check_clip_loss",
    doc="""Check a NumPy `clip_loss(image_emb, text_emb, temperature=0.07)` -> a float.

    Rows L2-normalised (a zero row stays zero); logits = image @ text.T / temperature, (B, B), pair i
    on the diagonal; the loss is the mean of the image-to-text cross-entropy (a softmax over each row)
    and the text-to-image one (over each column), each averaged over the batch, computed stably.""",
    arg_names=("image_emb", "text_emb", "temperature"),
)
