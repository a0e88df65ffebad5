"""Attention: the course's explicit and fused PyTorch paths and the NumPy reference,
against calling torch.nn.functional.scaled_dot_product_attention directly.

Shapes: batch 8, 4 heads, head dim 64, sequence 128/256/512, float32, causal mask
(boolean, True = may attend). Forward, and forward+backward for the PyTorch paths.
All variants are timed side by side in one run; ratios are against PyTorch's own call.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bench.common import interleaved_medians, write_result
from plmcourse import nn as pnn
from plmcourse import ref

BATCH, HEADS, HEAD_DIM = 8, 4, 64
SEQS = (128, 256, 512)


def inputs(seq, device, dtype, grad):
    g = torch.Generator().manual_seed(seq)
    shape = (BATCH, HEADS, seq, HEAD_DIM)
    q, k, v = (torch.randn(shape, generator=g).to(device=device, dtype=dtype).requires_grad_(grad)
               for _ in range(3))
    mask = torch.ones(seq, seq, dtype=torch.bool, device=device).tril()
    return q, k, v, mask


def variants():
    return {
        "torch sdpa (direct)": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        "plmcourse fused": lambda q, k, v, m: pnn.scaled_dot_product_attention(q, k, v, m, impl="fused")[0],
        "plmcourse explicit": lambda q, k, v, m: pnn.scaled_dot_product_attention(q, k, v, m, impl="explicit")[0],
    }


def torch_step(fn, q, k, v, mask, backward):
    grad_out = torch.randn_like(q)

    def step():
        if not backward:
            with torch.no_grad():
                return fn(q, k, v, mask)
        fn(q, k, v, mask).backward(grad_out)
        q.grad = k.grad = v.grad = None

    return step


def run(device="cpu", dtypes=(torch.float32,)):
    rows = []
    for dtype in dtypes:
        for seq in SEQS:
            for backward in (False, True):
                q, k, v, mask = inputs(seq, device, dtype, grad=backward)
                steps = {name: torch_step(fn, q, k, v, mask, backward) for name, fn in variants().items()}
                times = interleaved_medians(steps, device=device)
                if device == "cpu" and not backward and dtype == torch.float32:
                    # Timed on its own: OpenBLAS threads spin after each NumPy call (OMP_WAIT_POLICY
                    # does not reach them) and would slow whichever torch call came next.
                    arrays = [t.detach().numpy() for t in (q, k, v, mask)]
                    numpy_step = {"NumPy reference (float32 in)": lambda: ref.scaled_dot_product_attention(*arrays)}
                    times.update(interleaved_medians(numpy_step, repeats=7))
                base = times["torch sdpa (direct)"]
                for name, seconds in times.items():
                    rows.append({"device": str(device), "dtype": str(dtype).removeprefix("torch."),
                                 "seq": seq, "pass": "forward+backward" if backward else "forward",
                                 "variant": name, "ms": round(seconds * 1e3, 3),
                                 "ratio to torch sdpa": round(seconds / base, 2)})
    return rows


def main():
    rows = run("cpu")
    if torch.cuda.is_available():
        rows += run("cuda", dtypes=(torch.float32, torch.bfloat16))
    return write_result("attention", {"title": "Attention (B=8, H=4, d=64, causal)", "rows": rows})


if __name__ == "__main__":
    print(main())
