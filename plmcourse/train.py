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


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float = 0.01):
    """AdamW; as in GPT-2 and BERT, no weight decay on biases, LayerNorm weights and embeddings' 1-D params."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # fused=True updates every parameter in one kernel instead of a Python loop over them;
    # same arithmetic, and on a small model a few percent of each step.
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in decay + no_decay)
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), fused=fused or None)


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
) -> History:
    """Train `model` for `steps` optimiser steps; returns the History (pass it back in to continue)."""
    optimizer = optimizer or make_optimizer(model, lr, weight_decay)
    warmup = max(1, steps // 20) if warmup is None else warmup
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: warmup_cosine(s, steps, warmup))
    history = history or History()
    start = history.steps[-1] + 1 if history.steps else 0
    eval_every = eval_every or max(1, steps // 10)

    clock = history.seconds[-1] if history.seconds else 0.0
    bar = tqdm(range(steps), desc=desc, disable=not progress, leave=False)
    for i in bar:
        tick = time.perf_counter()
        model.train()
        loss = loss_fn(model, get_batch(start + i))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        schedule.step()
        history.steps.append(start + i)
        history.loss.append(loss.item())  # .item() waits for the GPU, so the clock below is honest
        clock += time.perf_counter() - tick
        history.seconds.append(clock)
        if eval_fn is not None and ((i + 1) % eval_every == 0 or i + 1 == steps):
            history.eval_steps.append(start + i)
            history.evals.append(evaluate(model, eval_fn))
            bar.set_postfix({k: f"{v:.3f}" for k, v in history.evals[-1].items()})
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
