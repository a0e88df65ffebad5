"""The checks of notebook 03 (attention), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.attention."""

from plmcourse.grading.core import Check

__all__ = [
    "check_softmax",
    "check_scaled_dot_product_attention",
    "check_causal_mask",
    "check_multi_head_attention",
]


WEIGHT_NAMES = ("w_q", "w_k", "w_v", "w_o")


check_softmax = Check(
    arg_names=("x",),
    name="check_softmax",
    doc="""Check a NumPy `softmax(x, axis=-1)`: stable, any axis, -inf entries, float32.""",
    operators=True,
)


check_scaled_dot_product_attention = Check(
    name="check_scaled_dot_product_attention",
    doc="""Check a NumPy `scaled_dot_product_attention(q, k, v, mask=None) -> (output, weights)`.""",
    arg_names=("q", "k", "v", "mask"),
    operators=True,
)


check_causal_mask = Check(
    name="check_causal_mask",
    doc="""Check a NumPy `causal_mask(n)`: bool (n, n), True on and below the diagonal.""",
    arg_names=("n",),
)


check_multi_head_attention = Check(
    name="check_multi_head_attention",
    doc="""Check a PyTorch `multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None)`.
    
    Output, per-head weights and gradients (with respect to x_q, x_kv and the four
    weight matrices) are compared with torch.nn.MultiheadAttention in float64 on
    `device` (default: the CPU).""",
    arg_names=("x_q", "x_kv", *WEIGHT_NAMES, "n_heads", "mask"),
    device=True,
    operators=True,
)
