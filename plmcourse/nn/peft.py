"""Parameter-efficient fine-tuning (notebook 09): adapt a pre-trained model by training a few parameters.

Full fine-tuning changes every weight and so stores a whole model per task. Each method
here freezes the pre-trained weights and adds (or frees) a small set of parameters:

    bitfit(model)                        only the biases train (BitFit, Ben Zaken et al. 2022)
    Adapter, add_adapters(model, m)      a bottleneck d -> m -> d after attention and after the
                                         feed-forward of every block (Houlsby et al. 2019)
    LoRALinear, add_lora(model, ...)     W x + b + (alpha / r) B A x beside chosen Linear layers,
                                         A (r, in), B (out, r) (Hu et al. 2021);
                                         (QKVLoRA: on the q, k or v third of a fused qkv_proj);
                                         merge_lora(model) folds B A into W, for free inference
    PrefixAttention, add_prefix(model)   P trainable keys and values in front of every attention
                                         layer's own, through MultiHeadAttention's prefix= hook
                                         (Li and Liang 2021), optionally made by a small MLP
    SoftPrompt(bert, n_prompt)           P trainable input vectors after [CLS] (Lester et al. 2021)

and the bookkeeping that goes with them:

    freeze(module)                       requires_grad False everywhere; returns the module
    count_trainable_parameters(model)    (trainable, total), a shared tensor counted once
    trainable_state_dict(model)          name -> tensor of the parameters that train
    save_trainable / load_trainable      only those, as a safetensors file (kilobytes, not a model)

The add_* functions replace submodules in place, by name, and return what they added;
they freeze nothing themselves, so that what trains is always written out in the
notebook: `freeze(model.bert)`, then the method, then the new head stays trainable.
"""

from __future__ import annotations

import math

import safetensors.torch
import torch
from torch import nn

from plmcourse.nn.attention import MultiHeadAttention, split_heads
from plmcourse.nn.transformer import TransformerBlock

__all__ = [
    "freeze",
    "count_trainable_parameters",
    "bitfit",
    "LoRALinear",
    "QKVLoRA",
    "add_lora",
    "merge_lora",
    "Adapter",
    "WithAdapter",
    "add_adapters",
    "PrefixAttention",
    "add_prefix",
    "SoftPrompt",
    "trainable_state_dict",
    "save_trainable",
    "load_trainable",
]


# ----------------------------------------------------------------------------
# Bookkeeping


def freeze(module):
    """Stop every parameter of `module` from training; returns the module."""
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def count_trainable_parameters(model):
    """(trainable, total) numbers of parameter entries.

    model.parameters() yields each tensor once, even when two modules share it (tied
    input and output embeddings), and yields no buffers (LayerNorm has none, but
    BatchNorm's running statistics are buffers, not parameters).
    """
    trainable = total = 0
    for p in model.parameters():
        total += p.numel()
        if p.requires_grad:
            trainable += p.numel()
    return trainable, total


def bitfit(model):
    """Freeze everything except the biases (BitFit); returns the names of what trains."""
    names = []
    for name, p in model.named_parameters():
        is_bias = name.endswith("bias")
        p.requires_grad_(is_bias)
        if is_bias:
            names.append(name)
    return names


def trainable_state_dict(model):
    """name -> a detached copy of each parameter that trains: what a task adds to the base."""
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


def save_trainable(model, path, metadata=None):
    """Write only the trainable parameters to a safetensors file; returns its size in bytes."""
    tensors = {name: t.contiguous().cpu() for name, t in trainable_state_dict(model).items()}
    safetensors.torch.save_file(tensors, str(path), metadata=metadata)
    return sum(t.numel() * t.element_size() for t in tensors.values())


def load_trainable(model, source):
    """Copy saved trainable parameters (a path or a dict) into the model, in place.

    Every saved name must be a trainable parameter of the model with the same shape, and
    every trainable parameter must be in the file: swapping one task's adapter for
    another's must replace all of it, never half.
    """
    tensors = safetensors.torch.load_file(str(source)) if not isinstance(source, dict) else source
    params = {name: p for name, p in model.named_parameters() if p.requires_grad}
    missing, unexpected = sorted(params.keys() - tensors.keys()), sorted(tensors.keys() - params.keys())
    if missing or unexpected:
        raise KeyError(f"the saved parameters do not match the model's trainable ones: "
                       f"missing {missing[:5]}, unexpected {unexpected[:5]}.")
    with torch.no_grad():
        for name, p in params.items():
            if tensors[name].shape != p.shape:
                raise ValueError(f"{name}: saved shape {tuple(tensors[name].shape)}, model has {tuple(p.shape)}.")
            p.copy_(tensors[name])
    return model


def _replace(model, name, new):
    """Put `new` where the submodule called `name` ("bert.blocks.0.self_attn.q_proj") is."""
    parent_name, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent_name) if parent_name else model, child, new)


# ----------------------------------------------------------------------------
# LoRA


class LoRALinear(nn.Module):
    """A frozen nn.Linear plus a trainable low-rank update: y = base(x) + (alpha / r) x Aᵀ Bᵀ.

    A (r, in) starts random and B (out, r) at zero, so at first the layer is exactly the
    base layer, and the update B A (out, in) has rank at most r. alpha / r keeps the size of
    the update the same when r changes, so one learning rate serves every rank. Dropout,
    in training only, acts on the input of the low-rank path.
    """

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0):
        super().__init__()
        if r < 1:
            raise ValueError(f"the rank r must be at least 1, got {r}.")
        self.base = freeze(base)
        self.r, self.alpha, self.scale = r, alpha, alpha / r
        factory = {"dtype": base.weight.dtype, "device": base.weight.device}
        self.A = nn.Parameter(torch.empty(r, base.in_features, **factory))
        self.B = nn.Parameter(torch.zeros(base.out_features, r, **factory))
        # A as nn.Linear initialises its weight (the LoRA paper's code does the same).
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        """x (..., in) -> (..., out)."""
        update = self.dropout(x) @ self.A.T @ self.B.T  # (..., r) then (..., out): never the (out, in) matrix
        return self.base(x) + self.scale * update

    def merge(self) -> nn.Linear:
        """A plain nn.Linear with weight W + (alpha / r) B A and the base's bias: the same
        function (in eval mode) at the cost of the base layer alone. The layer is unchanged."""
        base = self.base
        merged = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None,
                           dtype=base.weight.dtype, device=base.weight.device)
        with torch.no_grad():
            merged.weight.copy_(base.weight + self.scale * (self.B @ self.A))  # (out, in)
            if base.bias is not None:
                merged.bias.copy_(base.bias)
        return merged

    def extra_repr(self):
        return f"r={self.r}, alpha={self.alpha}"


class QKVLoRA(nn.Module):
    """LoRA on some of the three projections inside a fused qkv_proj (W_q, W_k, W_v stacked).

    The course's attention computes queries, keys and values with one (3d, in) matrix.
    The LoRA paper adapts W_q and W_v only; here each chosen part ("q", "k" or "v") gets
    its own A (r, in) and B (d, r), added to its third of the output: exactly LoRALinear on
    a separate q_proj and v_proj. A and B hold the chosen parts in order: A (n, r, in), B (n, d, r).
    """

    def __init__(self, base: nn.Linear, parts=("q", "v"), r: int = 8, alpha: float = 16, dropout: float = 0.0):
        super().__init__()
        if r < 1:
            raise ValueError(f"the rank r must be at least 1, got {r}.")
        if not parts or any(part not in "qkv" for part in parts) or len(set(parts)) != len(parts):
            raise ValueError(f'parts must name some of "q", "k", "v" once each, got {parts!r}.')
        self.base = freeze(base)
        self.parts = tuple(parts)
        self.d = base.out_features // 3
        self.r, self.alpha, self.scale = r, alpha, alpha / r
        factory = {"dtype": base.weight.dtype, "device": base.weight.device}
        self.A = nn.Parameter(torch.empty(len(parts), r, base.in_features, **factory))
        self.B = nn.Parameter(torch.zeros(len(parts), self.d, r, **factory))
        for A in self.A:  # each part's A as LoRALinear's (fan-in = in_features)
            nn.init.kaiming_uniform_(A, a=math.sqrt(5))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        """x (..., in) -> (..., 3d): [q | k | v], the chosen parts with their low-rank updates."""
        q, k, v = self.base(x).split(self.d, dim=-1)  # (..., d) each
        out = {"q": q, "k": k, "v": v}
        h = self.dropout(x)
        for i, part in enumerate(self.parts):
            out[part] = out[part] + self.scale * (h @ self.A[i].T @ self.B[i].T)  # (..., r) then (..., d)
        return torch.cat([out["q"], out["k"], out["v"]], dim=-1)

    def delta_weight(self):
        """(alpha / r) B A for each chosen part, zeros for the others: (3d, in)."""
        blocks = {part: self.base.weight.new_zeros(self.d, self.base.in_features) for part in "qkv"}
        for i, part in enumerate(self.parts):
            blocks[part] = self.scale * (self.B[i] @ self.A[i])  # (d, in)
        return torch.cat([blocks["q"], blocks["k"], blocks["v"]])

    @property
    def weight(self):  # what cross-attention slices (MultiHeadAttention.project)
        return self.base.weight + self.delta_weight()

    @property
    def bias(self):
        return self.base.bias

    def merge(self) -> nn.Linear:
        """A plain nn.Linear computing the same function (in eval mode) at the base's cost."""
        base = self.base
        merged = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None,
                           dtype=base.weight.dtype, device=base.weight.device)
        with torch.no_grad():
            merged.weight.copy_(self.weight)
            if base.bias is not None:
                merged.bias.copy_(base.bias)
        return merged

    def extra_repr(self):
        return f"parts={self.parts}, r={self.r}, alpha={self.alpha}"


def _matches(name, targets):
    return any(name == t or name.endswith("." + t) for t in targets)


QKV_TARGETS = {"q_proj": "q", "k_proj": "k", "v_proj": "v"}


def add_lora(model, targets=("q_proj", "v_proj"), r=8, alpha=16, dropout=0.0):
    """Put LoRA beside every nn.Linear named by `targets`; returns the names of the wrapped layers.

    The LoRA paper adapts the query and value projections; ("q_proj", "k_proj", "v_proj",
    "out_proj", "linear1", "linear2") adapts every matrix of every block. "q_proj",
    "k_proj" and "v_proj" are thirds of an attention's fused qkv_proj, which gets a
    QKVLoRA on just those thirds; any other Linear named in `targets` gets a LoRALinear.
    """
    parts = tuple(part for name, part in QKV_TARGETS.items() if name in targets)
    others = [t for t in targets if t not in QKV_TARGETS]
    wrapped = []
    for name, module in list(model.named_modules()):
        if not isinstance(module, nn.Linear):
            continue
        if parts and _matches(name, ["qkv_proj"]):
            _replace(model, name, QKVLoRA(module, parts, r, alpha, dropout))
            wrapped.append(name)
        elif _matches(name, others):
            _replace(model, name, LoRALinear(module, r, alpha, dropout))
            wrapped.append(name)
    if not wrapped:
        raise ValueError(f"no nn.Linear in the model has a name ending in {targets}.")
    return wrapped


def merge_lora(model):
    """Replace every LoRALinear and QKVLoRA in the model by its merged nn.Linear; returns the model."""
    names = [name for name, m in model.named_modules() if isinstance(m, (LoRALinear, QKVLoRA))]
    for name in names:
        _replace(model, name, model.get_submodule(name).merge())
    return model


# ----------------------------------------------------------------------------
# Adapters


class Adapter(nn.Module):
    """x + up(gelu(down(x))): a bottleneck d -> m -> d with a skip connection.

    `up` starts at zero, so a new adapter is the identity and the model starts as the
    pre-trained one; `down` starts as nn.Linear does, so `up` gets a gradient at once.
    """

    def __init__(self, d_model: int, bottleneck: int):
        super().__init__()
        self.down = nn.Linear(d_model, bottleneck)
        self.up = nn.Linear(bottleneck, d_model)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x):
        """x (..., d_model) -> (..., d_model)."""
        return x + self.up(nn.functional.gelu(self.down(x)))  # (..., m) inside


class WithAdapter(nn.Module):
    """A sub-layer followed by an adapter on its output (the first item, if it returns a tuple)."""

    def __init__(self, layer: nn.Module, adapter: Adapter):
        super().__init__()
        self.layer = layer
        self.adapter = adapter

    def forward(self, *args, **kwargs):
        out = self.layer(*args, **kwargs)
        if isinstance(out, tuple):  # attention with return_weights=True: (output, weights)
            return (self.adapter(out[0]), *out[1:])
        return self.adapter(out)


def _blocks(model):
    blocks = [(name, m) for name, m in model.named_modules() if isinstance(m, TransformerBlock)]
    if not blocks:
        raise ValueError("the model has no plmcourse.nn.TransformerBlock to adapt.")
    return blocks


def add_adapters(model, bottleneck=8):
    """Houlsby adapters: in every block, one after self-attention and one after the feed-forward,
    each before the residual sum and its LayerNorm. Returns the adapters' names."""
    names = []
    for name, block in _blocks(model):
        d_model = block.norm1.normalized_shape[0]
        like = block.norm1.weight
        for sub in ("self_attn", "ff"):
            adapter = Adapter(d_model, bottleneck).to(dtype=like.dtype, device=like.device)
            setattr(block, sub, WithAdapter(getattr(block, sub), adapter))
            names.append(f"{name}.{sub}.adapter")
    return names


# ----------------------------------------------------------------------------
# Prefix tuning


class PrefixAttention(nn.Module):
    """A MultiHeadAttention that always attends to P trainable keys and values of its own.

    Directly: prefix_k and prefix_v (1, n_heads, P, head_dim). With `hidden`, the paper's
    re-parametrisation: a trainable (P, d_model) table passed through an MLP
    d -> hidden -> 2d gives the keys and values. Li and Liang found the direct version
    unstable to train; the MLP shares what the P vectors learn. After training only the
    prefixes it produces need keeping (`fold`).
    """

    def __init__(self, attention: MultiHeadAttention, n_prefix: int, hidden: int | None = None,
                 init_std: float = 1.0):
        super().__init__()
        self.attention = attention
        nh, hs, d = attention.n_heads, attention.head_dim, attention.d_model
        factory = {"dtype": attention.out_proj.weight.dtype, "device": attention.out_proj.weight.device}
        if hidden is None:
            self.prefix_k = nn.Parameter(torch.randn(1, nh, n_prefix, hs, **factory) * init_std)
            self.prefix_v = nn.Parameter(torch.randn(1, nh, n_prefix, hs, **factory) * init_std)
            self.table, self.mlp = None, None
        else:
            self.table = nn.Parameter(torch.randn(n_prefix, d, **factory) * init_std)
            self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.Tanh(), nn.Linear(hidden, 2 * d)).to(**factory)

    def prefixes(self):
        """(prefix_k, prefix_v), each (1, n_heads, P, head_dim)."""
        if self.mlp is None:
            return self.prefix_k, self.prefix_v
        k, v = self.mlp(self.table).chunk(2, dim=-1)  # (P, d) each
        nh = self.attention.n_heads
        return split_heads(k[None], nh), split_heads(v[None], nh)  # (1, nh, P, hs)

    def fold(self):
        """Replace the MLP by the prefixes it makes now: the same outputs, fewer parameters."""
        if self.mlp is not None:
            k, v = (t.detach().clone() for t in self.prefixes())
            self.prefix_k, self.prefix_v = nn.Parameter(k), nn.Parameter(v)
            self.table, self.mlp = None, None
        return self

    def forward(self, x, context=None, mask=None, is_causal=False, return_weights=False):
        return self.attention(x, context=context, mask=mask, is_causal=is_causal,
                              return_weights=return_weights, prefix=self.prefixes())


def add_prefix(model, n_prefix=8, hidden=None, init_std=1.0):
    """Give every block's self-attention P trainable keys and values; returns the wrapped names."""
    names = []
    for name, block in _blocks(model):
        block.self_attn = PrefixAttention(block.self_attn, n_prefix, hidden=hidden, init_std=init_std)
        names.append(f"{name}.self_attn")
    return names


# ----------------------------------------------------------------------------
# Prompt tuning


class SoftPrompt(nn.Module):
    """A Bert that reads P trainable vectors right after [CLS]: [CLS] p_1 ... p_P w_1 ... w_T.

    The vectors live where the embeddings' output does (after their LayerNorm) and start as
    the embeddings of P real words (`init_ids`), which Lester et al. found trains better
    than random vectors. Used in place of the Bert it wraps:
    BertForSequenceClassification(SoftPrompt(bert, 20), 2). Hidden states come back
    (B, 1 + P + T - 1, d_model); the pooled vector is still [CLS]'s.
    """

    def __init__(self, bert, n_prompt: int, init_ids=None, seed: int = 0):
        super().__init__()
        self.bert = bert
        self.config = bert.config
        if init_ids is None:
            picker = torch.Generator().manual_seed(seed)
            init_ids = torch.randint(0, bert.config.vocab_size, (n_prompt,), generator=picker)
        init_ids = torch.as_tensor(init_ids, device=bert.embeddings.token.weight.device)
        with torch.no_grad():
            start = bert.embeddings(init_ids[None])[0]  # (P, d_model)
        self.prompt = nn.Parameter(start.clone())

    def forward(self, ids, segment_ids=None, attention_mask=None):
        x = self.bert.embeddings(ids, segment_ids)  # (B, T, d)
        B = x.shape[0]
        prompt = self.prompt.expand(B, -1, -1)  # (B, P, d), one prompt for every example
        x = torch.cat([x[:, :1], prompt, x[:, 1:]], dim=1)  # (B, 1 + P + T - 1, d)
        if attention_mask is not None:
            seen = attention_mask.new_ones(B, prompt.shape[1])  # every token sees the prompt
            attention_mask = torch.cat([attention_mask[:, :1], seen, attention_mask[:, 1:]], dim=1)
        return self.bert.from_embeddings(x, attention_mask)
