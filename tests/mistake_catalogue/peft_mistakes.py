"""Right and wrong answers to the three exercises of notebook 09 (count_trainable_parameters,
LoRALinear, attention_with_prefix), as data for tests/test_grading_peft.py.

CORRECT: (name, answer) pairs that must pass, written in different styles; MISTAKES:
(name, answer, fragment): the check must fail with a message containing `fragment`.
LoRALinear's answers are classes: most mistakes override one hook of an honest one.
Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import copy
import math
import types

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse import ref
from mistake_catalogue.fresh_round3 import prefix_keys_as_values


# ============================================================================
# count_trainable_parameters(model) -> (trainable, total)


def count_notebook(model):
    trainable = total = 0
    for p in model.parameters():
        total += p.numel()
        if p.requires_grad:
            trainable += p.numel()
    return trainable, total


def count_sums(model):
    return (sum(p.numel() for p in model.parameters() if p.requires_grad),
            sum(p.numel() for p in model.parameters()))


def count_by_id(model):
    """Every occurrence, de-duplicated by hand; a list and NumPy integers are fine."""
    unique = {id(p): p for _, p in model.named_parameters(remove_duplicate=False)}.values()
    return [np.int64(sum(int(np.prod(p.shape)) for p in unique if p.requires_grad)),
            np.int64(sum(int(np.prod(p.shape)) for p in unique))]


def count_tensors(model):
    """Integer 0-d tensors count as ints."""
    sizes = [(torch.tensor(p.numel()), p.requires_grad) for p in model.parameters()]
    trainable = torch.tensor(0)
    for size, trains in sizes:
        trainable = trainable + size * trains
    return trainable, torch.tensor(sum(int(s) for s, _ in sizes))


COUNT_CORRECT = [
    ("the notebook's loop", count_notebook),
    ("two sums", count_sums),
    ("de-duplicated by id, a list of NumPy ints", count_by_id),
    ("integer tensors", count_tensors),
]


def count_frozen_too(model):
    total = sum(p.numel() for p in model.parameters())
    return total, total


def count_swapped(model):
    trainable, total = count_sums(model)
    return total, trainable


def count_inverted(model):
    return (sum(p.numel() for p in model.parameters() if not p.requires_grad),
            sum(p.numel() for p in model.parameters()))


def count_grad_is_set(model):
    """A parameter counted as trainable when its .grad is set (None before any backward pass)."""
    params = list(model.parameters())
    return sum(p.numel() for p in params if p.grad is not None), sum(p.numel() for p in params)


def count_every_occurrence(model):
    params = [p for _, p in model.named_parameters(remove_duplicate=False)]
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


def count_per_module(model):
    params = [p for m in model.modules() for p in m.parameters(recurse=False)]
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


def count_state_dict(model):
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return trainable, sum(t.numel() for t in model.state_dict().values())


def count_number_of_tensors(model):
    params = list(model.parameters())
    return sum(1 for p in params if p.requires_grad), len(params)


def count_float(model):
    trainable, total = count_sums(model)
    return float(trainable), float(total)


def count_fraction(model):
    trainable, total = count_sums(model)
    return trainable / max(total, 1) * 100, total


def count_dict(model):
    trainable, total = count_sums(model)
    return {"trainable": trainable, "total": total}


def count_no_return(model):
    count_sums(model)


def count_course(model):
    return pnn.count_trainable_parameters(model)


COUNT_MISTAKES = [
    ("frozen counted as trainable", count_frozen_too, "frozen parameters counted as trainable"),
    ("(total, trainable)", count_swapped, "(total, trainable) in the wrong order"),
    ("requires_grad the wrong way round", count_inverted, "not its negation"),
    (".grad set taken for trainable", count_grad_is_set, "not p.grad, which stays None until a backward pass"),
    ("named_parameters(remove_duplicate=False)", count_every_occurrence, "(tied weights) counted twice"),
    ("each module's own parameters", count_per_module, "(tied weights) counted twice"),
    ("state_dict", count_state_dict, "buffers counted as parameters"),
    ("tensors, not entries", count_number_of_tensors, "tensors counted instead of their entries"),
    ("floats", count_float, "trainable (item 1) is the float"),
    ("a percentage", count_fraction, "(item 1) is the float 100.0"),
    ("a dict", count_dict, "expected the pair (trainable, total)"),
    ("no return", count_no_return, "your function returned None"),
    ("calls the course's version", count_course, "calls plmcourse.nn.count_trainable_parameters"),
]


# ============================================================================
# LoRALinear(base, r, alpha, dropout=0.0)


class LoraNotebook(torch.nn.Module):
    """The notebook's answer."""

    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        if r < 1:
            raise ValueError(f"the rank r must be at least 1, got {r}")
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        self.scale = alpha / r
        like = {"dtype": base.weight.dtype, "device": base.weight.device}
        self.A = torch.nn.Parameter(torch.randn(r, base.in_features, **like) / math.sqrt(base.in_features))
        self.B = torch.nn.Parameter(torch.zeros(base.out_features, r, **like))
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, x):
        return self.base(x) + self.scale * (self.dropout(x) @ self.A.T @ self.B.T)

    def merge(self):
        base = self.base
        merged = torch.nn.Linear(base.in_features, base.out_features, bias=base.bias is not None,
                                 dtype=base.weight.dtype, device=base.weight.device)
        with torch.no_grad():
            merged.weight.copy_(base.weight + self.scale * (self.B @ self.A))
            if base.bias is not None:
                merged.bias.copy_(base.bias)
        return merged


class LoraHooks(torch.nn.Module):
    """An honest LoRALinear written in pieces that the mistakes below override one at a time."""

    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        self.check_rank(r)
        self.base = base
        self.freeze()
        self.scale = self.scaling(r, alpha)
        like = {"dtype": base.weight.dtype, "device": base.weight.device}
        self.A = torch.nn.Parameter(self.init_a(r, base.in_features, like))
        self.B = torch.nn.Parameter(self.init_b(base.out_features, r, like))
        self.p = dropout
        self.dropout = torch.nn.Dropout(dropout)

    def check_rank(self, r):
        if not r >= 1:
            raise ValueError("LoRA's rank r must be a positive integer")

    def freeze(self):
        self.base.requires_grad_(False)

    def scaling(self, r, alpha):
        return alpha / r

    def init_a(self, r, n_in, like):
        return torch.randn(r, n_in, **like) / math.sqrt(n_in)

    def init_b(self, n_out, r, like):
        return torch.zeros(n_out, r, **like)

    def update(self, x):
        return self.scale * F.linear(F.linear(self.dropout(x), self.A), self.B)

    def forward(self, x):
        return self.base(x) + self.update(x)

    def merged_weight(self):
        return self.base.weight + self.scale * (self.B @ self.A)

    def merge(self):
        merged = copy.deepcopy(self.base)  # a new layer of the same dtype, device and bias
        with torch.no_grad():
            merged.weight.copy_(self.merged_weight())
        return merged.requires_grad_(True)  # the copy of the frozen base would not train


class LoraEinsum(torch.nn.Module):
    """einsum, kaiming-initialised A as nn.Linear does, and a merge built from nn.Linear's parts."""

    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        if r <= 0:
            raise ValueError("r must be positive")
        base.weight.requires_grad = False
        if base.bias is not None:
            base.bias.requires_grad = False
        self.base, self.r, self.alpha = base, r, alpha
        self.A = torch.nn.Parameter(torch.empty(r, base.in_features, dtype=base.weight.dtype,
                                                device=base.weight.device))
        torch.nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.B = torch.nn.Parameter(base.weight.new_zeros(base.out_features, r))
        self.drop = torch.nn.Dropout(p=dropout)

    def forward(self, x):
        low = torch.einsum("...i,ri,or->...o", self.drop(x), self.A, self.B)
        return self.base(x) + (self.alpha / self.r) * low

    def merge(self):
        new = torch.nn.Linear(self.base.in_features, self.base.out_features, bias=self.base.bias is not None)
        new = new.to(self.base.weight)
        new.weight = torch.nn.Parameter(self.base.weight.detach() + (self.alpha / self.r) * (self.B @ self.A).detach())
        if self.base.bias is not None:
            new.bias = torch.nn.Parameter(self.base.bias.detach().clone())
        return new


LORA_CORRECT = [
    ("the notebook's answer", LoraNotebook),
    ("F.linear and a deep copy in merge()", LoraHooks),
    ("einsum and kaiming init", LoraEinsum),
]


class LoraBRandom(LoraHooks):
    def init_b(self, n_out, r, like):
        return torch.randn(n_out, r, **like)


class LoraBothZero(LoraHooks):
    def init_a(self, r, n_in, like):
        return torch.zeros(r, n_in, **like)


class LoraRolesSwapped(LoraHooks):
    def init_a(self, r, n_in, like):
        return torch.zeros(r, n_in, **like)

    def init_b(self, n_out, r, like):
        return torch.randn(n_out, r, **like)


class LoraConstantA(LoraHooks):
    def init_a(self, r, n_in, like):
        return torch.full((r, n_in), 0.1, **like)


class LoraNoScale(LoraHooks):
    def scaling(self, r, alpha):
        return 1.0


class LoraScaleInverted(LoraHooks):
    def scaling(self, r, alpha):
        return r / alpha


class LoraScaleAlpha(LoraHooks):
    def scaling(self, r, alpha):
        return alpha


class LoraScaleFloor(LoraHooks):
    def scaling(self, r, alpha):
        return alpha // r


class LoraNotFrozen(LoraHooks):
    def freeze(self):
        pass


class LoraBiasNotFrozen(LoraHooks):
    def freeze(self):
        self.base.weight.requires_grad_(False)


class LoraFrozenCopy(LoraHooks):
    def freeze(self):
        self.base = copy.deepcopy(self.base).requires_grad_(False)


class LoraExtraParameter(LoraHooks):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        self.gate = torch.nn.Parameter(torch.ones((), dtype=base.weight.dtype, device=base.weight.device))


class LoraTransposed(LoraHooks):
    def init_a(self, r, n_in, like):
        return torch.randn(n_in, r, **like)

    def init_b(self, n_out, r, like):
        return torch.zeros(r, n_out, **like)

    def update(self, x):
        return self.scale * (self.dropout(x) @ self.A @ self.B)


class LoraPlainTensors(LoraHooks):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        A, B = self.A.detach().clone().requires_grad_(), self.B.detach().clone().requires_grad_()
        del self.A, self.B
        self.A, self.B = A, B


class LoraOtherNames(LoraHooks):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        self.lora_A, self.lora_B = self.A, self.B
        del self.A, self.B

    def update(self, x):
        return self.scale * (self.dropout(x) @ self.lora_A.T @ self.lora_B.T)


class LoraDefaultDtype(LoraHooks):
    def init_a(self, r, n_in, like):
        return torch.randn(r, n_in) / math.sqrt(n_in)

    def init_b(self, n_out, r, like):
        return torch.zeros(n_out, r)


class LoraDetachedA(LoraHooks):
    def update(self, x):
        return self.scale * (self.dropout(x) @ self.A.detach().T @ self.B.T)


class LoraUpdateOnly(LoraHooks):
    def forward(self, x):
        return self.update(x)


class LoraUpdateOnlyOnceTrained(LoraHooks):
    """The base's output left out once B is not zero: reaches the check's matcher after initialisation."""

    def forward(self, x):
        return self.update(x) if self.B.any() else self.base(x) + self.update(x)


class LoraNoDropoutArgument(LoraHooks):
    def __init__(self, base, r, alpha):
        super().__init__(base, r, alpha)


class LoraTemplate(torch.nn.Module):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        raise NotImplementedError()


class LoraForwardFails(LoraHooks):
    def forward(self, x):
        return self.base(x) + self.scale * (self.B @ self.A @ self.dropout(x))


class LoraFlattens(LoraHooks):
    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        return self.base(flat) + self.update(flat)


class LoraDropoutInEval(LoraHooks):
    def update(self, x):
        return self.scale * (F.dropout(x, self.p) @ self.A.T @ self.B.T)


class LoraDropoutOnOutput(LoraHooks):
    def forward(self, x):
        return self.dropout(self.base(x) + self.scale * (x @ self.A.T @ self.B.T))


class LoraDropoutOnBaseInput(LoraHooks):
    def forward(self, x):
        x = self.dropout(x)
        return self.base(x) + self.scale * (x @ self.A.T @ self.B.T)


class LoraDropoutOnUpdate(LoraHooks):
    def update(self, x):
        return self.scale * self.dropout(x @ self.A.T @ self.B.T)


class LoraDropoutIgnored(LoraHooks):
    def update(self, x):
        return self.scale * (x @ self.A.T @ self.B.T)


class LoraDropoutNotRescaled(LoraHooks):
    def update(self, x):
        if self.training and self.p > 0:
            x = x * (torch.rand_like(x) >= self.p)
        return self.scale * (x @ self.A.T @ self.B.T)


class LoraMergeNoScale(LoraHooks):
    def merged_weight(self):
        return self.base.weight + self.B @ self.A


class LoraMergeAB(LoraHooks):
    def merged_weight(self):
        return self.base.weight + self.scale * (self.A @ self.B)


class LoraMergeNoBias(LoraHooks):
    def merge(self):
        merged = torch.nn.Linear(self.base.in_features, self.base.out_features, bias=False,
                                 dtype=self.base.weight.dtype, device=self.base.weight.device)
        with torch.no_grad():
            merged.weight.copy_(self.merged_weight())
        return merged


class LoraMergeFreshBias(LoraHooks):
    def merge(self):
        merged = torch.nn.Linear(self.base.in_features, self.base.out_features,
                                 dtype=self.base.weight.dtype, device=self.base.weight.device)
        with torch.no_grad():
            merged.weight.copy_(self.merged_weight())
        return merged


class LoraMergeInPlace(LoraHooks):
    def merge(self):
        with torch.no_grad():
            self.base.weight += self.scale * (self.B @ self.A)
        return self.base


class LoraMergeInPlaceCopy(LoraHooks):
    def merge(self):
        with torch.no_grad():
            self.base.weight.add_(self.scale * (self.B @ self.A))
        return copy.deepcopy(self.base)


class LoraMergeTensor(LoraHooks):
    def merge(self):
        return self.merged_weight().detach()


class LoraMergeSelf(LoraHooks):
    def merge(self):
        return self


class LoraMergeFloat32(LoraHooks):
    def merge(self):
        merged = torch.nn.Linear(self.base.in_features, self.base.out_features, bias=self.base.bias is not None)
        with torch.no_grad():
            merged.weight.copy_(self.merged_weight())
            if self.base.bias is not None:
                merged.bias.copy_(self.base.bias)
        return merged


class LoraWithoutMerge(torch.nn.Module):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        self.inner = LoraHooks(base, r, alpha, dropout)
        self.A, self.B = self.inner.A, self.inner.B

    def forward(self, x):
        return self.inner(x)


class LoraNoRankCheck(LoraHooks):
    """alpha / 0 raises ZeroDivisionError at r = 0, not the ValueError the spec asks for."""

    def check_rank(self, r):
        pass


class LoraRankZeroBuilds(LoraHooks):
    """Guards the division and builds a layer with r = 0."""

    def check_rank(self, r):
        pass

    def scaling(self, r, alpha):
        return alpha / r if r else 0.0


class LoraMergeFrozenCopy(LoraHooks):
    """merge() deep-copies the frozen base: the merged layer does not train."""

    def merge(self):
        merged = copy.deepcopy(self.base)
        with torch.no_grad():
            merged.weight.copy_(self.merged_weight())
        return merged


class LoraMergeSharedBias(LoraHooks):
    """merge() puts the base's own bias Parameter into the new layer."""

    def merge(self):
        merged = torch.nn.Linear(self.base.in_features, self.base.out_features, bias=False,
                                 dtype=self.base.weight.dtype, device=self.base.weight.device)
        with torch.no_grad():
            merged.weight.copy_(self.merged_weight())
        merged.bias = self.base.bias
        return merged


class LoraCourse(pnn.LoRALinear):
    pass


class LoraInfiniteLoop(LoraHooks):
    """Never returns from merge(); run only through the wire, where the call has a time limit."""

    def merge(self):
        while True:
            pass


LORA_MISTAKES = [
    ("B random at init", LoraBRandom, "B does not start at zero"),
    ("A and B both zero", LoraBothZero, "no gradient ever reaches A or B"),
    ("A zero, B random", LoraRolesSwapped, "the other way round"),
    ("A constant", LoraConstantA, "every entry of A starts equal"),
    ("no scale", LoraNoScale, "the scale alpha / r left out"),
    ("scale r / alpha", LoraScaleInverted, "the scale r / alpha instead of alpha / r"),
    ("scale alpha", LoraScaleAlpha, "the scale alpha instead of alpha / r"),
    ("scale alpha // r", LoraScaleFloor, "integer division"),
    ("base not frozen", LoraNotFrozen, "the base layer's weight and bias still train"),
    ("base bias not frozen", LoraBiasNotFrozen, "the base layer's bias still trains"),
    ("a frozen copy of the base", LoraFrozenCopy, "still train (requires_grad=True)"),
    ("an extra trainable parameter", LoraExtraParameter, "expected A and B only"),
    ("A and B transposed", LoraTransposed, "A and B are transposed"),
    ("plain tensors", LoraPlainTensors, "not an nn.Parameter"),
    ("lora_A and lora_B", LoraOtherNames, "the layer has no attribute A"),
    ("default dtype", LoraDefaultDtype, "the base's dtype and device"),
    ("A detached in forward", LoraDetachedA, "no gradient reaches A"),
    ("the update alone", LoraUpdateOnly, "with B = 0 at initialisation the layer must give exactly base(x)"),
    ("the update alone once B is set", LoraUpdateOnlyOnceTrained, "the base's output left out"),
    ("no dropout argument", LoraNoDropoutArgument, "the constructor raised TypeError"),
    ("the template", LoraTemplate, "replace the `raise NotImplementedError()` line"),
    ("B @ A @ x", LoraForwardFails, "forward(x) at initialisation raised RuntimeError"),
    ("x flattened", LoraFlattens, "has shape (8, 7), expected (2, 4, 7)"),
    ("dropout in eval", LoraDropoutInEval, "dropout active in eval mode"),
    ("dropout on the whole output", LoraDropoutOnOutput, "dropout is applied to the whole output"),
    ("dropout on the base's input", LoraDropoutOnBaseInput, "never on the base's input or output"),
    ("dropout on the update", LoraDropoutOnUpdate, "is not, row by row, either 0"),
    ("no dropout", LoraDropoutIgnored, "dropout is not applied in training mode"),
    ("dropout not rescaled", LoraDropoutNotRescaled, "not rescaled by 1 / (1 - p)"),
    ("merge without the scale", LoraMergeNoScale, "left out (the update is not multiplied by it) in merge()"),
    ("merge A @ B", LoraMergeAB, "never A @ B"),
    ("merge drops the bias", LoraMergeNoBias, "the base's bias was dropped"),
    ("merge with a fresh bias", LoraMergeFreshBias, "copy the base's into it"),
    ("merge in place", LoraMergeInPlace, "merge() changed the base layer in place"),
    ("merge in place, then a copy", LoraMergeInPlaceCopy, "merge() changed the base layer in place"),
    ("merge returns the weight", LoraMergeTensor, "merge() returned a torch.Tensor, expected a new torch.nn.Linear"),
    ("merge returns self", LoraMergeSelf, "merge() returned a LoraMergeSelf, expected a new torch.nn.Linear"),
    ("merge in float32", LoraMergeFloat32, "the merged layer's weight is torch.float32"),
    ("no merge", LoraWithoutMerge, "merge() raised AttributeError"),
    ("r = 0 divides by zero", LoraNoRankCheck, "raised ZeroDivisionError: division by zero; raise ValueError"),
    ("r = 0 builds a layer", LoraRankZeroBuilds, "built a layer; the rank must be at least 1"),
    ("merge() returns a frozen copy", LoraMergeFrozenCopy, "not train (requires_grad=False)"),
    ("merge() shares the base's bias", LoraMergeSharedBias, "bias shares its memory with the LoRA layer"),
    ("the course's class", LoraCourse, "calls plmcourse.nn.LoRALinear"),
]


# ============================================================================
# attention_with_prefix(q, k, v, prefix_k, prefix_v, mask=None)


def prefix_notebook(q, k, v, prefix_k, prefix_v, mask=None):
    B, H, L_q, _ = q.shape
    P, L_k = prefix_k.shape[1], k.shape[2]
    k = np.concatenate([np.broadcast_to(prefix_k, (B, *prefix_k.shape)), k], axis=2)
    v = np.concatenate([np.broadcast_to(prefix_v, (B, *prefix_v.shape)), v], axis=2)
    if mask is not None:
        mask = np.broadcast_to(mask, (B, H, L_q, L_k))
        mask = np.concatenate([np.ones((B, H, L_q, P), dtype=bool), mask], axis=-1)
    return ref.scaled_dot_product_attention(q, k, v, mask)


def prefix_tile_pad(q, k, v, prefix_k, prefix_v, mask=None):
    B, H, L_q, L_k = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    P = prefix_k.shape[1]
    keys = np.concatenate([np.tile(prefix_k[None], (B, 1, 1, 1)), k], axis=-2)
    values = np.concatenate([np.tile(prefix_v[None], (B, 1, 1, 1)), v], axis=-2)
    if mask is not None:
        full = np.broadcast_to(mask, (B, H, L_q, L_k))
        mask = np.pad(full, ((0, 0), (0, 0), (0, 0), (P, 0)), constant_values=True)
    return ref.scaled_dot_product_attention(q, keys, values, mask)


def prefix_by_hand(q, k, v, prefix_k, prefix_v, mask=None):
    """The attention written out, prefix scores and own scores computed apart."""
    d_k = q.shape[-1]
    own = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k)                      # (B, H, L_q, L_k)
    pre = np.einsum("bhqd,hpd->bhqp", q, prefix_k) / math.sqrt(d_k)        # (B, H, L_q, P)
    if mask is not None:
        own = np.where(mask, own, -np.inf)
    scores = np.concatenate([pre, own], axis=-1)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    P = prefix_k.shape[1]
    output = np.einsum("bhqp,hpd->bhqd", weights[..., :P], prefix_v) + weights[..., P:] @ v
    return output, weights


def prefix_repeat(q, k, v, prefix_k, prefix_v, mask=None):
    B, L_q, L_k = q.shape[0], q.shape[2], k.shape[2]
    keys = np.concatenate([np.repeat(prefix_k[None], B, axis=0), k], axis=2)
    values = np.concatenate([np.repeat(prefix_v[None], B, axis=0), v], axis=2)
    if mask is not None:
        mask = np.broadcast_to(mask, q.shape[:2] + (L_q, L_k))
        mask = np.concatenate([np.full(mask.shape[:-1] + (prefix_k.shape[1],), True), mask], axis=-1)
    return ref.scaled_dot_product_attention(q, keys, values, mask)


PREFIX_CORRECT = [
    ("the notebook's answer", prefix_notebook),
    ("np.tile and np.pad", prefix_tile_pad),
    ("written out with einsum", prefix_by_hand),
    ("np.repeat over a new batch axis", prefix_repeat),
]


def _with(mask_part=None, after=False, batch=None, swap=False, broadcast_mask=True):
    """A variant of the notebook's answer: mask_part(own mask (B, H, L_q, L_k), P) gives the prefix columns."""
    def answer(q, k, v, prefix_k, prefix_v, mask=None):
        if swap:
            prefix_k, prefix_v = prefix_v, prefix_k
        B, H, L_q, _ = q.shape
        P, L_k = prefix_k.shape[1], k.shape[2]
        grow = batch or (lambda p: np.broadcast_to(p, (B, *p.shape)))

        def put(prefix, own, axis):
            return np.concatenate([own, prefix] if after else [prefix, own], axis=axis)

        k, v = put(grow(prefix_k), k, 2), put(grow(prefix_v), v, 2)
        if mask is not None:
            own = np.broadcast_to(mask, (B, H, L_q, L_k)) if broadcast_mask else mask
            part = np.ones((B, H, L_q, P), dtype=bool) if mask_part is None else mask_part(own, P)
            mask = put(part, own, -1)
        return ref.scaled_dot_product_attention(q, k, v, mask)
    return answer


def prefix_mask_not_extended(q, k, v, prefix_k, prefix_v, mask=None):
    B = q.shape[0]
    k = np.concatenate([np.broadcast_to(prefix_k, (B, *prefix_k.shape)), k], axis=2)
    v = np.concatenate([np.broadcast_to(prefix_v, (B, *prefix_v.shape)), v], axis=2)
    return ref.scaled_dot_product_attention(q, k, v, mask)


def prefix_added(q, k, v, prefix_k, prefix_v, mask=None):
    return ref.scaled_dot_product_attention(q, k + prefix_k, v + prefix_v, mask)


def prefix_interleaved(q, k, v, prefix_k, prefix_v, mask=None):
    B = q.shape[0]
    return _with(batch=lambda p: np.repeat(p, B, axis=0).reshape(B, *p.shape))(q, k, v, prefix_k, prefix_v, mask)


def prefix_empty_rows_zero(q, k, v, prefix_k, prefix_v, mask=None):
    output, weights = prefix_notebook(q, k, v, prefix_k, prefix_v, mask)
    if mask is not None:
        empty = ~np.broadcast_to(mask, q.shape[:3] + (k.shape[2],)).any(axis=-1, keepdims=True)
        output, weights = np.where(empty, 0.0, output), np.where(empty, 0.0, weights)
    return output, weights


def prefix_course(q, k, v, prefix_k, prefix_v, mask=None):
    return ref.attention_with_prefix(q, k, v, prefix_k, prefix_v, mask)


def prefix_course_torch(q, k, v, prefix_k, prefix_v, mask=None):
    """The prefix added by plmcourse.nn.MultiHeadAttention's own prefix path."""
    holder = types.SimpleNamespace(n_heads=q.shape[1], head_dim=q.shape[-1])
    t = torch.from_numpy
    keys, values, mask = pnn.MultiHeadAttention._add_prefix(
        holder, t(k), t(v), None if mask is None else t(np.asarray(mask)), (t(prefix_k)[None], t(prefix_v)[None]),
        q.shape[0])
    return ref.scaled_dot_product_attention(q, keys.numpy(), values.numpy(), None if mask is None else mask.numpy())


PREFIX_MISTAKES = [
    ("prefix keys used as the values", prefix_keys_as_values, "prefix_k used as the prefix values too"),
    ("prefix after the keys", _with(after=True), "the prefix put after the keys"),
    ("mask not extended", prefix_mask_not_extended, "the mask covers the L_k keys only"),
    ("prefix columns masked", _with(mask_part=lambda own, P: np.zeros(own.shape[:-1] + (P,), bool)),
     "the prefix columns masked out"),
    ("prefix where the first key is", _with(mask_part=lambda own, P: np.repeat(own[..., :1], P, axis=-1)),
     "copied from the mask's first key column"),
    ("prefix visible to padding only", _with(mask_part=lambda own, P: np.repeat(~own[..., :1], P, axis=-1)),
     "the prefix visible to padding only"),
    ("batch repeated in the wrong order", prefix_interleaved, "mixes heads and batch"),
    ("prefix_k and prefix_v swapped", _with(swap=True), "prefix_k and prefix_v swapped"),
    ("prefix added to the keys", prefix_added, "the prefix keys are missing"),
    ("mask not broadcast", _with(broadcast_mask=False), "broadcast the mask to (B, H, L_q, L_k)"),
    ("zeros for a query without keys of its own", prefix_empty_rows_zero,
     "zeros for a query that may see none of its own keys"),
    ("calls the course's NumPy version", prefix_course, "calls plmcourse.ref.attention_with_prefix"),
    ("calls MultiHeadAttention's prefix path", prefix_course_torch, "MultiHeadAttention's prefix path"),
]


CATALOGUE = {
    "check_count_trainable_parameters": (COUNT_CORRECT, COUNT_MISTAKES),
    "check_lora_linear": (LORA_CORRECT, LORA_MISTAKES),
    "check_attention_with_prefix": (PREFIX_CORRECT, PREFIX_MISTAKES),
}
