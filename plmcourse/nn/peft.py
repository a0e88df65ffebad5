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
    soft_prompt_start(bert, P, init)     where they start: random, drawn words, or the class words
    prefix_attention_as_gate(...)        He et al.'s unified view: attention over [prefix; sentence]
                                         = (1 - λ) attention(sentence) + λ attention(prefix only)
    ParallelAdapter, add_parallel_adapters  layer(x) + s · relu(x W_down) W_up beside the FFN
    quantize_frozen(model)               every frozen nn.Linear stored in int8 (LoRA on it: QLoRA's idea)

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
    "PROMPT_INITS",
    "soft_prompt_start",
    "soft_prompt",
    "prefix_attention_as_gate",
    "UNIFIED_VIEW",
    "ParallelAdapter",
    "add_parallel_adapters",
    "quantize_frozen",
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


# ----------------------------------------------------------------------------
# Prompt tuning: where the prompt starts (Lester et al. 2021, section 3.2)

PROMPT_INITS = ("random", "vocabulary", "class words")


def soft_prompt_start(bert, n_prompt, init="vocabulary", class_ids=(), seed=0, n_special=5):
    """(P, d_model) start vectors for a SoftPrompt, in the space the embeddings' output lives in.

    "random":      uniform noise, scaled to the root-mean-square size of the drawn words' vectors, so
                   only the direction differs from the other two;
    "vocabulary":  the vectors of P different words drawn from the vocabulary (special tokens
                   such as [CLS] and [PAD] excluded);
    "class words": the vectors of the class words `class_ids` first, in order, then drawn words
                   for the rest (with P smaller than the number of classes, the first P classes).
    The draws come from a torch.Generator seeded with `seed`, among the ids from `n_special` on
    (the course's word tokenizers put <unk> [PAD] [CLS] [SEP] [MASK] first).
    """
    if init not in PROMPT_INITS:
        raise ValueError(f"init must be one of {PROMPT_INITS}, got {init!r}.")
    if init == "class words" and not len(class_ids):
        raise ValueError('init="class words" needs the ids of the class words (class_ids).')
    generator = torch.Generator().manual_seed(seed)
    token = bert.embeddings.token.weight
    words = n_special + torch.randperm(token.shape[0] - n_special, generator=generator)  # every real word once
    class_ids = [int(i) for i in class_ids][:n_prompt] if init == "class words" else []
    drawn = [int(i) for i in words if int(i) not in class_ids][: n_prompt - len(class_ids)]
    if len(class_ids) + len(drawn) < n_prompt:
        raise ValueError(f"{n_prompt} prompt vectors, but the vocabulary has only {len(words)} words to start from.")
    ids = torch.tensor(class_ids + drawn, device=token.device)  # (P,)
    with torch.no_grad():
        start = bert.embeddings(ids[None])[0]  # (P, d) as SoftPrompt's init_ids make it
    if init == "random":
        rms = start.pow(2).mean().sqrt()
        noise = torch.rand(start.shape, generator=generator).to(start) * 2 - 1  # uniform in [-1, 1)
        start = noise * (rms / noise.pow(2).mean().sqrt())  # exactly the words' RMS
    return start.clone()


def soft_prompt(bert, start):
    """A SoftPrompt whose P vectors start at `start` (P, d_model), e.g. from soft_prompt_start."""
    prompted = SoftPrompt(bert, start.shape[0])
    with torch.no_grad():
        prompted.prompt.copy_(start)
    return prompted


# ----------------------------------------------------------------------------
# The unified view (He, Zhou, Ma, Berg-Kirkpatrick and Neubig 2022)


def prefix_attention_as_gate(q, k, v, prefix_k, prefix_v, mask=None):
    """Attention over [prefix; sentence] written as a gate between two attentions (He et al., eq. 6):

        out = (1 - lam) * attention(q, k, v) + lam * attention(q, prefix_k, prefix_v)
        lam = sum_i exp(q·pk_i / √d) / (sum_i exp(q·pk_i / √d) + sum_j allowed exp(q·k_j / √d))

    lam(x) is the share of the query's attention that falls on the prefix. The second term does
    not depend on the sentence's keys: prefix tuning adds a change Δh = attention(q, P_k, P_v) to
    the head's output, mixed in by lam, like an adapter parallel to the head.
    q (B, H, L_q, d), k (B, H, L_k, d), v (B, H, L_k, d_v), prefix_k (B or 1, H, P, d),
    prefix_v (B or 1, H, P, d_v), mask (bool, broadcastable to (B, H, L_q, L_k), True = allowed).
    Returns (out (B, H, L_q, d_v), lam (B, H, L_q, 1)).
    """
    from plmcourse.nn.attention import scaled_dot_product_attention

    scale = 1 / math.sqrt(q.shape[-1])
    text_scores = q @ k.transpose(-2, -1) * scale  # (B, H, L_q, L_k)
    prefix_scores = q @ prefix_k.transpose(-2, -1) * scale  # (B, H, L_q, P)
    if mask is not None:
        text_scores = text_scores.masked_fill(~mask, float("-inf"))
    # log of each softmax denominator; lam = e^a / (e^a + e^b) = sigmoid(a - b), stable for any size
    text_mass = torch.logsumexp(text_scores, dim=-1, keepdim=True)  # (B, H, L_q, 1); -inf: no key allowed
    prefix_mass = torch.logsumexp(prefix_scores, dim=-1, keepdim=True)  # (B, H, L_q, 1)
    lam = torch.sigmoid(prefix_mass - text_mass)  # 1 when the query may see no word
    B = q.shape[0]
    original, _ = scaled_dot_product_attention(q, k, v, mask, impl="explicit")  # zeros where no key is allowed
    prefix_only, _ = scaled_dot_product_attention(q, prefix_k.expand(B, -1, -1, -1),
                                                  prefix_v.expand(B, -1, -1, -1), impl="explicit")
    return (1 - lam) * original + lam * prefix_only, lam


# The four design axes of He et al.'s Table 1 (and prompt tuning, which their table leaves out):
# Δh = f(x W_down) W_up, added to a hidden state h with a scale s.
UNIFIED_VIEW = {
    "prefix tuning": {"Δh": "softmax(x W_q P_kᵀ) P_v", "f": "softmax", "inserted at": "attention heads",
                      "form": "parallel", "composition": "gated: (1 - λ) h + λ Δh"},
    "adapter": {"Δh": "gelu(h W_down) W_up", "f": "gelu (ReLU in He et al.)", "inserted at": "attention and FFN outputs",
                "form": "sequential", "composition": "h + Δh"},
    "LoRA": {"Δh": "x W_down W_up", "f": "identity", "inserted at": "W_q, W_v (attention inputs)",
             "form": "parallel", "composition": "h + s Δh, s = α / r"},
    "parallel adapter, scaled": {"Δh": "relu(x W_down) W_up", "f": "ReLU", "inserted at": "FFN",
                                 "form": "parallel", "composition": "h + s Δh"},
    "prompt tuning": {"Δh": "(P new input vectors)", "f": "-", "inserted at": "the input only",
                      "form": "-", "composition": "concatenated, not added"},
}


class ParallelAdapter(nn.Module):
    """A sub-layer with an adapter beside it, reading the same input: layer(x) + s · relu(x W_down) W_up.

    He et al.'s "scaled parallel adapter": the adapter's form (a bottleneck with a non-linearity),
    LoRA's position (parallel, not after the layer) and LoRA's scale s. `up` starts at zero, so the
    wrapped layer starts as it was.
    """

    def __init__(self, layer: nn.Module, d_model: int, bottleneck: int, scale: float = 4.0):
        super().__init__()
        self.layer = layer
        self.scale = scale
        self.down = nn.Linear(d_model, bottleneck)
        self.up = nn.Linear(bottleneck, d_model)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x):
        """x (..., d_model) -> (..., d_model)."""
        return self.layer(x) + self.scale * self.up(torch.relu(self.down(x)))  # (..., m) inside


def add_parallel_adapters(model, bottleneck=8, scale=4.0):
    """A scaled parallel adapter beside the feed-forward of every block; returns the wrapped names."""
    names = []
    for name, block in _blocks(model):
        like = block.norm1.weight
        block.ff = ParallelAdapter(block.ff, block.norm1.normalized_shape[0], bottleneck, scale).to(
            dtype=like.dtype, device=like.device)
        names.append(f"{name}.ff")
    return names


# ----------------------------------------------------------------------------
# LoRA on a quantized base (the idea of QLoRA, Dettmers et al. 2023, with notebook 12's int8)


def quantize_frozen(model, per_channel=True):
    """Store every frozen nn.Linear of `model` in int8 (plmcourse.nn.quantization.QuantizedLinear,
    dequantized on the fly in each forward); layers with anything trainable stay float.

    Call it after the PEFT method is in place: the base layers inside LoRALinear and QKVLoRA are
    frozen and become int8, while A, B and the new head train in float32. Gradients still flow
    through the int8 layers to the activations below them; only their weights get none.
    Returns the names of the quantized layers. (QKVLoRA.merge needs the float weight back.)
    """
    from plmcourse.nn.quantization import QuantizedLinear

    names = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and not any(p.requires_grad for p in child.parameters()):
                setattr(module, child_name, QuantizedLinear(child, per_channel))
                names.append(f"{name}.{child_name}" if name else child_name)
    return names
