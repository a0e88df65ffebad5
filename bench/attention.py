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


def profile(seq=512, steps=10, top=8):
    """Where forward+backward spends its time, by PyTorch operator (self CPU time per step).

    The explicit path materialises the (B, H, L, L) scores and weights: at L = 512 each is
    8 * 4 * 512 * 512 float32 = 32 MiB, far beyond the caches, and masked_fill, softmax and
    their backward each stream such tensors through memory. The fused kernel works on tiles
    that stay in cache and never stores the L x L matrix.
    """
    from torch.profiler import ProfilerActivity, profile as torch_profile

    rows = []
    q, k, v, mask = inputs(seq, "cpu", torch.float32, grad=True)
    for name in ("torch sdpa (direct)", "plmcourse explicit"):
        step = torch_step(variants()[name], q, k, v, mask, backward=True)
        for _ in range(2):
            step()
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(steps):
                step()
        events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
        total = sum(e.self_cpu_time_total for e in events)
        for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:top]:
            rows.append({"variant": name, "operator": e.key, "calls per step": e.count // steps,
                         "ms per step": round(e.self_cpu_time_total / steps / 1e3, 2),
                         "share of the step": f"{100 * e.self_cpu_time_total / total:.0f}%"})
        rows.append({"variant": name, "operator": "(all operators)", "calls per step": "",
                     "ms per step": round(total / steps / 1e3, 2), "share of the step": "100%"})
    return rows


def main():
    rows = run("cpu")
    if torch.cuda.is_available():
        rows += run("cuda", dtypes=(torch.float32, torch.bfloat16))
    write_result("attention_profile", {
        "title": "Where attention's time goes (CPU, float32, seq 512, forward+backward, torch.profiler)",
        "notes": " ".join(profile.__doc__.split("\n\n")[1].split()),
        "rows": profile()})
    return write_result("attention", {"title": "Attention (B=8, H=4, d=64, causal)", "rows": rows})


if __name__ == "__main__":
    print(main())
