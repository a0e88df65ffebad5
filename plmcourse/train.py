"""One training loop for every notebook: progress bar, periodic evaluation, loss history, checkpoints.

    history = train(model, get_batch, loss_fn, steps=500, lr=3e-3, eval_fn=..., eval_every=100)
    history.plot()

`get_batch(step)` returns whatever `loss_fn(model, batch)` needs (already on the
right device); `loss_fn` returns a scalar tensor. `eval_fn(model)` returns a dict of
numbers (e.g. {"val_loss": 1.9}); it runs under torch.no_grad() in eval mode.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm


@dataclass
class History:
    """What happened during training, ready to plot or to assert on."""

    steps: list[int] = field(default_factory=list)        # step of each training loss
    loss: list[float] = field(default_factory=list)       # training loss at that step
    seconds: list[float] = field(default_factory=list)    # training time up to that step, evaluation excluded
    eval_steps: list[int] = field(default_factory=list)   # step of each evaluation
    evals: list[dict] = field(default_factory=list)       # what eval_fn returned there

    def metric(self, name: str) -> list[float]:
        return [e[name] for e in self.evals]

    def last(self, name: str) -> float:
        return self.evals[-1][name]

    def plot(self, ax=None, metric: str | None = None, label: str = "", smooth: int = 20):
        """Training loss (smoothed over `smooth` steps) and, if given, an eval metric per evaluation."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(7, 4))
        if self.loss:
            k = max(1, min(smooth, len(self.loss)))
            running = torch.tensor(self.loss).unfold(0, k, 1).mean(1).tolist()
            ax.plot(self.steps[k - 1:], running, label=f"{label} train loss".strip())
        if metric is not None and self.evals:
            ax.plot(self.eval_steps, self.metric(metric), "o-", label=f"{label} {metric}".strip())
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.legend()
        return ax


def warmup_cosine(step: int, steps: int, warmup: int) -> float:
    """Learning-rate multiplier: linear warm-up, then cosine decay to 10% of the peak."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float = 0.01, betas=(0.9, 0.95)):
    """AdamW; as in GPT-2 and BERT, no weight decay on biases, LayerNorm weights and embeddings' 1-D params."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # fused=True updates every parameter in one kernel instead of a Python loop over them;
    # same arithmetic, and on a small model a few percent of each step.
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in decay + no_decay)
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=fused or None)


PRECISIONS = {"float32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def train(
    model: torch.nn.Module,
    get_batch: Callable[[int], object],
    loss_fn: Callable[[torch.nn.Module, object], torch.Tensor],
    *,
    steps: int,
    lr: float = 1e-3,
    weight_decay: float = 0.01,
    warmup: int | None = None,
    grad_clip: float | None = 1.0,
    eval_fn: Callable[[torch.nn.Module], dict] | None = None,
    eval_every: int | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    history: History | None = None,
    progress: bool = True,
    desc: str = "training",
    precision: str = "float32",
    compile: bool = False,
    log_every: int = 20,
) -> History:
    """Train `model` for `steps` optimiser steps; returns the History (pass it back in to continue).

    precision: "float32", or "bf16" / "fp16" for mixed precision: the forward pass and the
        loss run under torch.autocast (matrix products in 16 bits), while the weights, their
        gradients and AdamW's state stay float32. "fp16" also scales the loss (GradScaler) so
        that small gradients do not round to zero; bfloat16 has float32's range and needs no scaler.
    compile: run the forward pass and the loss through torch.compile: the same parameters and
        arithmetic in fewer, fused kernels; the first step is slow while it compiles.
    log_every: the losses stay on the device and are read back every `log_every` steps (and at
        every evaluation), because reading a number makes the CPU wait for the GPU. On a GPU,
        `History.seconds` is exact at those steps; in between it is when each step was queued.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}.")
    optimizer = optimizer or make_optimizer(model, lr, weight_decay)
    warmup = max(1, steps // 20) if warmup is None else warmup
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: warmup_cosine(s, steps, warmup))
    history = history or History()
    start = history.steps[-1] + 1 if history.steps else 0
    eval_every = eval_every or max(1, steps // 10)

    device_type = next(model.parameters()).device.type
    dtype = PRECISIONS[precision]
    scaler = torch.amp.GradScaler(device_type) if precision == "fp16" else None

    def compute_loss(batch):
        with torch.autocast(device_type, dtype=dtype, enabled=dtype is not None):
            return loss_fn(model, batch)

    if compile:  # the forward pass and the loss together, so that the loss fuses into the graph too
        compute_loss = torch.compile(compute_loss)
    pending = []  # this stretch's losses, still on the device

    def read_losses():
        history.loss.extend(torch.stack(pending).float().tolist())  # one wait for all of them
        pending.clear()

    clock = history.seconds[-1] if history.seconds else 0.0
    bar = tqdm(range(steps), desc=desc, disable=not progress, leave=False)
    model.train()  # evaluate() puts the model back into this mode after each evaluation
    for i in bar:
        tick = time.perf_counter()
        loss = compute_loss(get_batch(start + i))
        optimizer.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)  # skipped when a gradient overflowed
            scaler.update()
        schedule.step()
        history.steps.append(start + i)
        pending.append(loss.detach())
        evaluating = eval_fn is not None and ((i + 1) % eval_every == 0 or i + 1 == steps)
        if len(pending) >= log_every or evaluating or i + 1 == steps:
            read_losses()  # waits for the device, so the clock below is honest here
        clock += time.perf_counter() - tick
        history.seconds.append(clock)
        if evaluating:
            history.eval_steps.append(start + i)
            history.evals.append(evaluate(model, eval_fn))
        if not pending:  # just read back
            shown = {"loss": history.loss[-1], **(history.evals[-1] if history.evals else {})}
            bar.set_postfix({k: f"{v:.3f}" for k, v in shown.items()})
    model.eval()
    return history


def evaluate(model: torch.nn.Module, eval_fn: Callable[[torch.nn.Module], dict]) -> dict:
    was_training = model.training
    model.eval()
    with torch.no_grad():
        result = {k: float(v) for k, v in eval_fn(model).items()}
    model.train(was_training)
    return result


def save_checkpoint(path, model: torch.nn.Module, optimizer=None, history: History | None = None, **extra):
    """Save weights (and optionally optimiser state, history and anything else) to `path`."""
    state = {"model": model.state_dict(), "extra": extra}
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    if history is not None:
        state["history"] = history.__dict__
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)


def load_checkpoint(path, model: torch.nn.Module, optimizer=None, map_location="cpu"):
    """Load what save_checkpoint wrote into `model` (and `optimizer`); returns (history, extra)."""
    state = torch.load(path, map_location=map_location, weights_only=True)
    model.load_state_dict(state["model"])
    if optimizer is not None and "optimizer" in state:
        optimizer.load_state_dict(state["optimizer"])
    history = History(**state["history"]) if "history" in state else None
    return history, state["extra"]
