"""int8 quantization in PyTorch (notebook 12), with the names of `plmcourse.ref.efficiency`.

    quantize_int8(w, dim=None) -> (q, scale)   symmetric absmax, per tensor or per slice along dim
    dequantize(q, scale)                       q · scale
    fake_quantize(w, bits, dim=None)           round to `bits` bits and read back: the error a format makes
    QuantizedLinear(linear, per_channel=True)  an nn.Linear whose weight is stored as int8
    quantize_linears(model, per_channel=True)  every nn.Linear of a model replaced, in place
    model_bytes(model)                         what the parameters and buffers take in memory

Not every layer takes the same bits (Q-BERT, Shen et al. 2020):

    quantize_blocks(model, bits, dim=0)        a copy whose block i's matrices are rounded to bits[i] bits
    top_hessian_eigenvalue(loss_fn, params)    the Hessian's largest eigenvalue, by power iteration
    assign_bits(sensitivity, bits)             the most sensitive layer gets the most bits

Weight-only quantization: the weights are stored in 8 bits (4x smaller than float32) and
turned back into floating point when used, so the arithmetic is still float; PyTorch's
dynamic quantization (torch.ao.quantization.quantize_dynamic) also quantizes the
activations on the fly and multiplies in int8, which is where its speed comes from.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["quantize_int8", "dequantize", "fake_quantize", "QuantizedLinear", "quantize_linears", "model_bytes",
           "quantize_blocks", "top_hessian_eigenvalue", "assign_bits"]


def quantize_int8(w, dim=None):
    """scale = absmax / 127 (a 0-d tensor, or per index along `dim` with size 1 on the other
    axes), q = clamp(round(w / scale), -127, 127) as int8; a zero slice gets scale 0 and q = 0."""
    if dim is None:
        absmax = w.abs().amax()
    else:
        others = [a for a in range(w.dim()) if a != dim % w.dim()]
        # amax over no axis would reduce them all: a 1-D w has a scale per entry
        absmax = w.abs().amax(dim=others, keepdim=True) if others else w.abs()
    scale = absmax / 127
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)  # a zero slice: never 0 / 0
    q = torch.clamp(torch.round(w / safe), -127, 127).to(torch.int8)
    return q, scale


def dequantize(q, scale):
    """q (int8) · scale, in scale's floating-point dtype."""
    return q.to(scale.dtype) * scale


def fake_quantize(w, bits, dim=None):
    """w rounded to a symmetric `bits`-bit grid (2^(bits-1) - 1 levels each side of zero, the
    absmax scale per tensor or per slice along dim, as quantize_int8) and read back as floats."""
    levels = 2 ** (bits - 1) - 1  # 127 for 8 bits
    if dim is None:
        absmax = w.abs().amax()
    else:
        others = [a for a in range(w.dim()) if a != dim % w.dim()]
        # amax over no axis would reduce them all: a 1-D w has a scale per entry
        absmax = w.abs().amax(dim=others, keepdim=True) if others else w.abs()
    scale = absmax / levels
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.clamp(torch.round(w / safe), -levels, levels) * scale


class QuantizedLinear(nn.Module):
    """y = x Wᵀ + b with W kept as int8 and a float scale per output channel (or one in all)."""

    def __init__(self, linear: nn.Linear, per_channel: bool = True):
        super().__init__()
        q, scale = quantize_int8(linear.weight.detach(), dim=0 if per_channel else None)
        self.register_buffer("q", q)  # (out, in) int8: 1 byte per weight
        self.register_buffer("scale", scale)  # (out, 1) or ()
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x):
        return F.linear(x, dequantize(self.q, self.scale), self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def quantize_linears(model, per_channel=True, skip=()):
    """Replace every nn.Linear of `model` (except those whose name ends with one in `skip`) by a
    QuantizedLinear, in place; returns the model. Embeddings and LayerNorms stay in float."""
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if isinstance(child, nn.Linear) and not full.endswith(tuple(skip)):
                setattr(module, child_name, QuantizedLinear(child, per_channel))
    return model


def model_bytes(model):
    """Bytes of every parameter and buffer, each shared tensor once."""
    seen, total = set(), 0
    for tensor in [*model.parameters(), *model.buffers()]:
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            total += tensor.numel() * tensor.element_size()
    return total


# ----------------------------------------------------------------------------
# Mixed precision (Q-BERT): more bits where the loss is sharp.


def quantize_blocks(model, bits, dim=0):
    """A copy of `model` whose transformer block i has its matrices (2-D weights) rounded to
    bits[i] bits with fake_quantize (per output row with dim=0); bits[i] = None keeps block i in
    float. Embeddings, LayerNorms, biases and heads outside the blocks stay as they are."""
    blocks = getattr(model, "bert", model).blocks  # a GPT's, a BERT's or a classifier's BERT's
    if len(bits) != len(blocks):
        raise ValueError(f"one entry of bits per block: {len(blocks)} blocks, got {len(bits)}.")
    model = copy.deepcopy(model)
    with torch.no_grad():
        for block, b in zip(getattr(model, "bert", model).blocks, bits):
            for weight in (p for p in block.parameters() if p.dim() == 2):
                if b is not None:
                    weight.copy_(fake_quantize(weight, b, dim))
    return model


def _dot(xs, ys):
    return sum((x * y).sum() for x, y in zip(xs, ys))


def top_hessian_eigenvalue(loss_fn, params, iterations=10, generator=None):
    """The eigenvalue of largest magnitude of the Hessian of loss_fn() with respect to `params`
    (the block of the Hessian that belongs to them), by power iteration: v <- Hv / |Hv|.

    Hv is a Hessian-vector product: the gradient of (gradient · v), two backward passes and never
    the Hessian itself. Returns the Rayleigh quotient vᵀHv at the last step (a float). Q-BERT ranks
    layers by it: a large top eigenvalue means a sharp loss, where rounding the weights costs most.
    """
    params = list(params)
    grads = torch.autograd.grad(loss_fn(), params, create_graph=True)  # keeps the graph for Hv
    v = [torch.randn(p.shape, generator=generator, dtype=p.dtype).to(p.device) for p in params]
    eigenvalue = 0.0
    for _ in range(iterations):
        norm = _dot(v, v).sqrt()
        v = [x / norm for x in v]
        hv = torch.autograd.grad(grads, params, grad_outputs=v, retain_graph=True)  # H v
        eigenvalue = _dot(hv, v).item()  # vᵀ H v, with |v| = 1
        v = [x.detach() for x in hv]
    return eigenvalue


def assign_bits(sensitivity, bits):
    """Q-BERT's rule: hand out the bit widths `bits` (one per layer) so that the most sensitive
    layer gets the most bits, the next the next most, and so on. Returns one width per layer, in
    the layers' order; the average is the average of `bits`, whatever the sensitivities."""
    if len(sensitivity) != len(bits):
        raise ValueError(f"one bit width per layer: {len(sensitivity)} layers, {len(bits)} widths.")
    order = sorted(range(len(sensitivity)), key=lambda i: -sensitivity[i])  # most sensitive first
    assigned = [0] * len(bits)
    for layer, b in zip(order, sorted(bits, reverse=True)):
        assigned[layer] = b
    return assigned
