"""The checks of notebooks 07 (mean pooling) and 08 (sentence embeddings), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.sentence_embeddings."""

from plmcourse.grading.core import Check

__all__ = ["check_mean_pool", "check_anisotropy", "check_whitening", "check_info_nce_loss"]


check_mean_pool = Check(
    name="check_mean_pool",
    doc="""Check a PyTorch `mean_pool(hidden, mask) -> (B, d)`: the mean of the real tokens' vectors.
    
    hidden (B, T, d); mask (B, T), bool, integer or float: any nonzero value marks a real
    token, 0 padding (the values are not weights).
    The result keeps hidden's dtype and device; a row with no real token gives zeros,
    in the gradient too; values at padded positions (NaN included) never reach the result.
    Cases run on `device` (default: the CPU).""",
    arg_names=("hidden", "mask"),
    device=True,
)


check_anisotropy = Check(
    name="check_anisotropy",
    doc="""Check a NumPy `anisotropy(X) -> float`: the mean cosine over the n(n-1) ordered pairs i != j.
    
    X (n, d), n >= 2, float64 or float32, must not be modified. The diagonal (each
    row with itself) is left out; a zero row has cosine 0 with every other row and its
    pairs still count (never NaN). A Python float, a NumPy float or a 0-d array.""",
    arg_names=("X",),
)


check_whitening = Check(
    name="check_whitening",
    doc="""Check a NumPy `whitening(X, k=None) -> (mu, W)` (BERT-whitening).
    
    X (n, d), n > d, must not be modified. mu (d,) is the mean of the rows; with
    C = np.cov(X.T) = U diag(s) U^T (largest s first), W = U[:, :k] / np.sqrt(s[:k]),
    (d, k), k = d when k is None; both float64. Each column of W may have either sign
    (an eigh answer sorted by decreasing variance is as good as an SVD one).""",
    arg_names=("X", "k"),
)


check_info_nce_loss = Check(
    name="check_info_nce_loss",
    doc="""Check a PyTorch `info_nce_loss(z1, z2, temperature=0.05, hard_negatives=None)` (SimCSE).
    
    z1, z2 (B, d): row i of each is a view of example i; hard_negatives None or (M, d).
    logits = cos(z1, [z2; hard_negatives]) / temperature, (B, B + M), a zero vector
    having cosine 0 with everything; the loss is the mean over i of the cross-entropy of
    row i with target i. A 0-d tensor in z1's dtype and on its device, differentiable
    with respect to z1, z2 and hard_negatives, finite (value and gradient) for zero rows.
    Cases run on `device` (default: the CPU).""",
    arg_names=("z1", "z2", "temperature", "hard_negatives"),
    device=True,
)
