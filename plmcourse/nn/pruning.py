"""Pruning in PyTorch (notebook 12): remove the weights, or the heads, that matter least.

    prunable_weights(model)                   the block matrices: {name: weight (out, in)}
    magnitude_masks(weights, sparsity, scope)  keep the largest |w|: globally or per matrix
    apply_masks(model, masks)                 zero what a mask drops, in place

Magnitude pruning (Han et al., 2015) assumes a small weight matters little. Zeroed weights
save memory and time only with sparse storage and kernels (or structured pruning: whole
heads, whole rows); here we measure what the model can lose, not the speed. Heads are
pruned with `plmcourse.nn.ablate_heads`, which zeroes a head's output.
"""

from __future__ import annotations

import torch

__all__ = ["prunable_weights", "magnitude_masks", "apply_masks"]


def prunable_weights(model):
    """{name: parameter} for every 2-D weight inside the transformer blocks (attention and
    feed-forward matrices); embeddings, LayerNorms, biases and heads outside the blocks stay."""
    return {name: p for name, p in model.named_parameters() if p.dim() == 2 and ".blocks." in f".{name}"}


def magnitude_masks(weights, sparsity, scope="global"):
    """{name: bool mask}, True = keep, dropping the fraction `sparsity` of smallest |w|.

    scope="global": one threshold over all the matrices together (a matrix whose weights are
    small loses more of them); scope="layer": the same fraction dropped from each matrix.
    Ties at the threshold are broken by position, so exactly round(sparsity * n) are dropped.
    """
    if not 0.0 <= sparsity <= 1.0:
        raise ValueError(f"sparsity must be in [0, 1], got {sparsity}.")
    if scope == "layer":
        return {name: magnitude_masks({name: w}, sparsity)[name] for name, w in weights.items()}
    if scope != "global":
        raise ValueError(f'scope must be "global" or "layer", got {scope!r}.')
    flat = torch.cat([w.detach().abs().flatten() for w in weights.values()])  # (n,)
    drop = round(sparsity * flat.numel())
    keep = torch.ones_like(flat, dtype=torch.bool)
    keep[torch.argsort(flat, stable=True)[:drop]] = False  # the `drop` smallest magnitudes
    masks, start = {}, 0
    for name, w in weights.items():
        masks[name] = keep[start:start + w.numel()].view_as(w)
        start += w.numel()
    return masks


@torch.no_grad()
def apply_masks(model, masks):
    """Multiply each named parameter by its mask, in place; returns the model."""
    parameters = dict(model.named_parameters())
    for name, mask in masks.items():
        parameters[name].mul_(mask.to(parameters[name].dtype))
    return model
