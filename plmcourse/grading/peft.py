"""The checks of notebook 09 (parameter-efficient fine-tuning), as a student's kernel holds them.

Each is a declaration (plmcourse.grading.core.Check); its cases, references and catalogue of
mistakes are the judge's, in plmcourse.judging.peft."""

import torch

from plmcourse.grading.core import Check, describe

__all__ = ["check_lora_linear", "check_attention_with_prefix", "check_count_trainable_parameters"]


def _fork_rng(device):
    """A context in which the torch generators may be used and are put back afterwards: the
    student's constructor draws A, and dropout draws masks, but the notebook's own random
    stream must not depend on whether the check ran."""
    device = torch.device(device)
    return torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else [])

def _error_text(error):
    text = " ".join(str(error).split())
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__

class _Stages:
    """Runs the driver's stages in the kernel, keeping each one's exception as text."""

    def __init__(self):
        self.errors = {}

    def run(self, stage, action, default=None):
        try:
            return action()
        except Exception as error:  # the student's bug, named by the judge with its stage
            self.errors[stage] = _error_text(error)
            return default

LR = 0.1  # the SGD step's learning rate

BUILD = "the constructor"

INSPECT = "listing the layer's parameters"

INIT = "forward(x) at initialisation"

INIT_GRAD = "backward through forward(x) at initialisation"

SET = "setting A and B (layer.A.copy_(A), layer.B.copy_(B))"

FORWARD = "forward(x) after A and B were set"

DROPOUT = "forward(x) in training mode"

MERGE = "merge()"

STEP = "an SGD step over layer.parameters() (p -= lr * p.grad)"


def _lora_driver(cls):
    def drive(weight, bias, r, alpha, x, x_one, A, B, upstream, seed, **options):
        with _fork_rng(weight.device):
            torch.manual_seed(seed)
            return _exercise_lora(cls, weight, bias, r, alpha, options, x, x_one, A, B, upstream)
    return drive

def _plain(value):
    """A detached copy of a tensor; anything else as it is (the wire describes what cannot travel)."""
    return value.detach().clone() if isinstance(value, torch.Tensor) else value

def _attribute(layer, name):
    """layer.A as a detached tensor, or text saying what it is."""
    if not hasattr(layer, name):
        return "missing"
    value = getattr(layer, name)
    return _plain(value) if isinstance(value, torch.Tensor) else describe(value)

def _lora_state(layer, base):
    named = list(layer.named_parameters())
    base_params = (("weight", base.weight), ("bias", base.bias))
    return {"trainable": [name for name, p in named if p.requires_grad],
            "base_trains": [name for name, p in base_params if p is not None and p.requires_grad],
            "A": _attribute(layer, "A"), "B": _attribute(layer, "B"),
            "A_parameter": isinstance(getattr(layer, "A", None), torch.nn.Parameter),
            "B_parameter": isinstance(getattr(layer, "B", None), torch.nn.Parameter)}

def _forward_and_grads(layer, x, upstream):
    """Eval mode: the output, and the gradients of sum(output * upstream) that reach A and B."""
    layer.eval()
    layer.zero_grad(set_to_none=True)
    y = layer(x)
    report = {"y": _plain(y)}
    if not isinstance(y, torch.Tensor):
        return report  # the judge names what forward returned
    (y * upstream).sum().backward()
    for name in ("A", "B"):
        grad = getattr(layer, name).grad
        report[f"grad_{name}"] = None if grad is None else grad.detach().clone()
    layer.zero_grad(set_to_none=True)
    return report

def _set_a_b(layer, A, B):
    with torch.no_grad():
        layer.A.copy_(A)
        layer.B.copy_(B)

def _train_and_eval(layer, x_one):
    with torch.no_grad():
        layer.train()
        trained = _plain(layer(x_one))
        layer.eval()
        return {"train": trained, "eval": _plain(layer(x_one))}

def _merge(layer, base, x):
    layer.eval()
    merged = layer.merge()
    report = {"type": describe(merged), "linear": isinstance(merged, torch.nn.Linear), "is_base": merged is base,
              "base_weight": _plain(base.weight), "base_bias": _plain(base.bias)}
    if report["linear"]:
        report["weight"] = _plain(merged.weight)
        report["bias"] = _plain(merged.bias)
        # The merged layer is an ordinary new nn.Linear: its parameters train, and they are its own.
        report["frozen"] = [name for name, p in merged.named_parameters() if not p.requires_grad]
        theirs = {t.data_ptr() for t in (base.weight, base.bias, getattr(layer, "A", None),
                                         getattr(layer, "B", None))
                  if isinstance(t, torch.Tensor) and t.numel()}
        report["shared"] = [name for name, p in merged.named_parameters() if p.numel() and p.data_ptr() in theirs]
    with torch.no_grad():
        report["y"] = _plain(layer(x))  # the layer itself must be unchanged
    return report

def _sgd_step(layer, base, x, upstream):
    """What torch.optim.SGD's step does, written out: its constructor loads torch._dynamo, a second
    or more in every kernel."""
    layer.eval()
    layer.zero_grad(set_to_none=True)
    (layer(x) * upstream).sum().backward()
    with torch.no_grad():
        for p in layer.parameters():
            if p.grad is not None:
                p -= LR * p.grad
    return {"A": _plain(layer.A), "B": _plain(layer.B), "base_weight": _plain(base.weight)}

def _exercise_lora(cls, weight, bias, r, alpha, options, x, x_one, A, B, upstream):
    """Every stage of the exercise on the student's class; each stage's exception is kept as text."""
    base = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, dtype=weight.dtype,
                           device=weight.device)
    with torch.no_grad():
        base.weight.copy_(weight)
        if bias is not None:
            base.bias.copy_(bias)
    stages = _Stages()
    report = {"errors": stages.errors}
    layer = stages.run(BUILD, lambda: cls(base, r, alpha, **options), "raised")
    if not isinstance(layer, torch.nn.Module):
        if BUILD not in stages.errors:
            report["built"] = describe(layer)
        return report
    report.update(stages.run(INSPECT, lambda: _lora_state(layer, base), {}))
    with torch.no_grad():
        layer.train()
        report["y_init_train"] = stages.run(INIT, lambda: _plain(layer(x)))
    report["init"] = stages.run(INIT_GRAD, lambda: _forward_and_grads(layer, x, upstream))
    if stages.run(SET, lambda: _set_a_b(layer, A, B), "failed") is None:
        report["set"] = stages.run(FORWARD, lambda: _forward_and_grads(layer, x, upstream))
        report["dropout"] = stages.run(DROPOUT, lambda: _train_and_eval(layer, x_one))
        report["merge"] = stages.run(MERGE, lambda: _merge(layer, base, x))
        report["step"] = stages.run(STEP, lambda: _sgd_step(layer, base, x, upstream))
    return report

class _WithBuffer(torch.nn.Module):
    """A Linear (or nothing) plus a registered buffer: saved in the state_dict, never trained."""

    def __init__(self, n_in, n_out, buffer_size):
        super().__init__()
        self.linear = torch.nn.Linear(n_in, n_out) if n_in else None
        self.register_buffer("statistics", torch.zeros(buffer_size))

class _Tied(torch.nn.Module):
    """Token embeddings whose matrix is also the output layer's weight (GPT-2, BERT's MLM head)."""

    def __init__(self, vocab, d):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, d)
        self.norm = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab)
        self.head.weight = self.embedding.weight

class _LoRAParameters(torch.nn.Module):
    """What a LoRA layer holds, and nothing it computes: a frozen Linear `base`, trainable A (r, in)
    and B (out, r), named as in plmcourse.nn.LoRALinear. Counting needs the parameters only, and
    the grading sandbox, which keeps no implementation of the LoRA exercise, has no LoRALinear."""

    def __init__(self, n_in, n_out, r):
        super().__init__()
        self.base = torch.nn.Linear(n_in, n_out).requires_grad_(False)
        self.A = torch.nn.Parameter(torch.zeros(r, n_in))
        self.B = torch.nn.Parameter(torch.zeros(n_out, r))

def _build(spec):
    """The model a plain description stands for: (kind, *arguments), nested."""
    kind, *rest = spec
    if kind == "seq":
        return torch.nn.Sequential(*(_build(s) for s in rest))
    if kind in ("frozen", "bitfit"):
        module = _build(rest[0])
        for name, p in module.named_parameters():
            p.requires_grad_(kind == "bitfit" and name.endswith("bias"))
        return module
    if kind == "shared":  # one module used rest[1] times
        return torch.nn.Sequential(*[_build(rest[0])] * rest[1])
    if kind == "lora":
        return _LoRAParameters(*rest)
    layers = {"linear": lambda n_in, n_out, bias=True: torch.nn.Linear(n_in, n_out, bias=bias),
              "embedding": torch.nn.Embedding, "layernorm": torch.nn.LayerNorm, "batchnorm": torch.nn.BatchNorm1d,
              "relu": torch.nn.ReLU, "buffer": _WithBuffer, "tied": _Tied}
    return layers[kind](*rest)

def _built(spec, device):
    """_build on `device`, the torch generators left as they were (building draws initial weights).
    Not on the meta device, which spares the drawing but loads torch._dynamo (a second) for an Embedding."""
    with _fork_rng(device), torch.device(device):
        return _build(spec)

def _count_driver(fn):
    def drive(model, device):
        return fn(_built(model, device))
    return drive


check_lora_linear = Check(
    name="check_lora_linear",
    doc="""Check a `LoRALinear(base, r, alpha, dropout=0.0)` torch.nn.Module.

    The check wraps its own nn.Linear layers and looks at what trains, the output at
    initialisation and after it sets A and B, the gradients, dropout in training and eval
    mode, merge() and one SGD step, on `device` (default: the CPU).""",
    arg_names=("weight", "bias", "r", "alpha", "x", "x_one", "A", "B", "upstream", "seed"),
    device=True,
    driver=_lora_driver,
)


check_attention_with_prefix = Check(
    name="check_attention_with_prefix",
    doc="""Check a NumPy `attention_with_prefix(q, k, v, prefix_k, prefix_v, mask=None) -> (output, weights)`.

    Compared with plmcourse.ref.attention_with_prefix: weights (B, H, L_q, P + L_k), the
    prefix columns first; every query may see the whole prefix, whatever the mask says.""",
    arg_names=("q", "k", "v", "prefix_k", "prefix_v", "mask"),
)


check_count_trainable_parameters = Check(
    name="check_count_trainable_parameters",
    doc="""Check `count_trainable_parameters(model) -> (trainable, total)`, ints.

    The check builds its own models (frozen parts, tied weights, a shared module, buffers,
    LoRA layers, nothing trainable, no parameters) on `device` (default: the CPU) and
    compares with plmcourse.nn.count_trainable_parameters.""",
    arg_names=("model", "device"),
    device=True,
    driver=_count_driver,
)
