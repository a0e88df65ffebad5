"""Parameter-efficient fine-tuning in NumPy (notebook 09): the arithmetic of LoRA and prefix tuning.

    attention_with_prefix(q, k, v, prefix_k, prefix_v, mask=None)
        attention over P trainable keys and values put in front of the sequence's own
    lora_forward(x, W, b, A, B, alpha)    x Wᵀ + b + (alpha / r) x Aᵀ Bᵀ
    lora_merge(W, A, B, alpha)            W + (alpha / r) B A: the same map as one matrix

plmcourse.nn.peft has the modules (LoRALinear, PrefixAttention, ...) that train them.
"""

from __future__ import annotations

import numpy as np

from plmcourse.ref.attention import scaled_dot_product_attention

__all__ = ["attention_with_prefix", "lora_forward", "lora_merge"]


def attention_with_prefix(q, k, v, prefix_k, prefix_v, mask=None):
    """Scaled dot-product attention in which every query also sees P prefix keys and values.

    q: (B, H, L_q, d_k)   k: (B, H, L_k, d_k)   v: (B, H, L_k, d_v)
    prefix_k: (H, P, d_k)   prefix_v: (H, P, d_v): one prefix per head, shared by the batch.
    mask: None, or bool broadcastable to (B, H, L_q, L_k), True where query i may see key j.
        It says nothing about the prefix: every query may attend to all P prefix positions,
        padding queries included (their outputs are ignored downstream anyway).
    Returns output (B, H, L_q, d_v) and weights (B, H, L_q, P + L_k), prefix columns first.
    """
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    prefix_k, prefix_v = (np.asarray(a, dtype=np.float64) for a in (prefix_k, prefix_v))
    B, H, L_q, _ = q.shape
    P, L_k = prefix_k.shape[-2], k.shape[-2]
    # broadcast_to shares one prefix across the batch without copying it.
    k = np.concatenate([np.broadcast_to(prefix_k, (B, *prefix_k.shape)), k], axis=-2)  # (B, H, P + L_k, d_k)
    v = np.concatenate([np.broadcast_to(prefix_v, (B, *prefix_v.shape)), v], axis=-2)  # (B, H, P + L_k, d_v)
    if mask is not None:
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), (B, H, L_q, L_k))
        mask = np.concatenate([np.ones((B, H, L_q, P), dtype=bool), mask], axis=-1)  # (B, H, L_q, P + L_k)
    return scaled_dot_product_attention(q, k, v, mask)


def lora_forward(x, W, b, A, B, alpha):
    """x (..., in) -> (..., out): the frozen layer x Wᵀ + b plus the low-rank update (alpha / r) x Aᵀ Bᵀ.

    W (out, in), b (out,) or None, A (r, in), B (out, r), as nn.Linear and LoRALinear store them.
    """
    r = A.shape[0]
    y = x @ W.T + (0.0 if b is None else b)
    return y + (alpha / r) * (x @ A.T @ B.T)


def lora_merge(W, A, B, alpha):
    """W + (alpha / r) B A (out, in): lora_forward with this W and no A, B gives the same output."""
    return W + (alpha / A.shape[0]) * (B @ A)
