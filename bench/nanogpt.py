"""The course's GPT against nanoGPT's, in nanoGPT's own GPU configuration (issue 18).

Configuration: nanoGPT's `config/train_shakespeare_char.py`, 6 layers, 6 heads, 384 dims,
block 256, batch 64, dropout 0.2, AdamW at 1e-3 with betas (0.9, 0.99), weight decay 0.1,
100 warm-up steps then cosine to 1e-4, clipping at 1, bf16 autocast. nanoGPT is built with
biases (bias=True), as the course's GPT has them. The data is the course's corpus as characters
(`plmcourse.data.text.python_corpus`), 90% to train.

Both models take the same training step (autocast forward and loss, backward, clipping,
fused AdamW, zero_grad), so that what differs is the model code: the course's GPT with
its own loss (`plmcourse.nn.objectives.cross_entropy`, written out), nanoGPT's `GPT`
with the loss its forward computes (F.cross_entropy).

Three measurements:

1. Operators (any machine): aten operators dispatched in one training step under bf16
   autocast on the CPU (torch.profiler, every nested operator counted), and the most
   frequent ones. This does not depend on the device.
2. Speed and memory (CUDA only): ms per step, eager and torch.compile'd, the two models
   timed in turns (rounds of STEPS_PER_ROUND steps each, the median round); peak memory
   allocated during training steps (torch.cuda.max_memory_allocated).
3. Quality (CUDA only): each model trained for QUALITY_STEPS steps on the same batches,
   the course's through `plmcourse.train.train(precision="bf16")`, nanoGPT's through a
   loop that does what its train.py does; validation loss on the same EVAL_BATCHES batches.

nanoGPT's model.py comes from NANOGPT_DIR (a checkout, never part of this repository:
`git clone https://github.com/karpathy/nanoGPT`). Without it this benchmark writes nothing
and the results already in bench/results stay.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path

import torch

from bench.common import interleaved_medians, write_result
from plmcourse.data.text import CharTokenizer, python_corpus, split
from plmcourse.nn.models import GPT, GPTConfig
from plmcourse.nn.objectives import cross_entropy
from plmcourse.train import make_optimizer, train

LAYERS, HEADS, WIDTH, BLOCK, BATCH, DROPOUT = 6, 6, 384, 256, 64, 0.2
LR, BETAS, WEIGHT_DECAY, WARMUP = 1e-3, (0.9, 0.99), 0.1, 100
OPS_BATCH = 4  # operators do not depend on the batch size; a small one keeps the CPU step short
ROUNDS, STEPS_PER_ROUND = 15, 10
QUALITY_STEPS, EVAL_BATCHES = 2000, 50
COURSE, NANOGPT = "plmcourse GPT", "nanoGPT"


def nanogpt_module():
    path = os.environ.get("NANOGPT_DIR")
    if not path or not (Path(path) / "model.py").exists():
        return None
    spec = importlib.util.spec_from_file_location("nanogpt_model", Path(path) / "model.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # torch.compile looks modules up by name
    spec.loader.exec_module(module)
    return module


def build(name, module, vocab_size, device):
    """(model, loss_fn(model, (x, y)), optimizer) of one of the two, seeded alike."""
    torch.manual_seed(0)
    if name == COURSE:
        model = GPT(GPTConfig(vocab_size=vocab_size, d_model=WIDTH, n_layers=LAYERS, n_heads=HEADS,
                              max_len=BLOCK, dropout=DROPOUT)).to(device)
        optimizer = make_optimizer(model, LR, WEIGHT_DECAY, betas=BETAS)
        return model, lambda m, batch: cross_entropy(m(batch[0]), batch[1]), optimizer
    config = module.GPTConfig(block_size=BLOCK, vocab_size=vocab_size, n_layer=LAYERS, n_head=HEADS,
                              n_embd=WIDTH, dropout=DROPOUT, bias=True)
    model = module.GPT(config).to(device)
    # device_type "cuda" is what makes nanoGPT ask for fused AdamW, which runs on a CPU too.
    optimizer = model.configure_optimizers(WEIGHT_DECAY, LR, BETAS, "cuda")
    return model, lambda m, batch: m(*batch)[1], optimizer


def training_step(model, loss_fn, optimizer, device_type, compiled=False):
    """What both training loops do per step (bf16 autocast, so no GradScaler). Compiled: the
    forward pass and the loss together, as nanoGPT's forward returns its loss and as train() does."""
    params = [p for p in model.parameters() if p.requires_grad]

    def compute_loss(batch):
        with torch.autocast(device_type, dtype=torch.bfloat16):
            return loss_fn(model, batch)

    if compiled:
        compute_loss = torch.compile(compute_loss)

    def step(batch):
        loss = compute_loss(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step


def data(device):
    text = python_corpus()
    tokenizer = CharTokenizer(text)
    train_ids, val_ids = split(torch.from_numpy(tokenizer.encode(text)), 0.1)
    return len(tokenizer), train_ids.to(device), val_ids.to(device)


def batches(ids, n, batch_size, seed):
    """n batches (x, y) of random windows; the same for both models."""
    g = torch.Generator().manual_seed(seed)
    starts = torch.randint(len(ids) - BLOCK - 1, (n, batch_size), generator=g).to(ids.device)
    offsets = torch.arange(BLOCK, device=ids.device)
    return [(ids[s[:, None] + offsets], ids[s[:, None] + offsets + 1]) for s in starts]


# ----------------------------------------------------------------------------
# 1. Operators per step


def operators(module):
    vocab_size, train_ids, _ = data("cpu")
    batch = batches(train_ids, 1, OPS_BATCH, seed=1)[0]
    rows, top = [], {}
    for name in (COURSE, NANOGPT):
        model, loss_fn, optimizer = build(name, module, vocab_size, "cpu")
        step = training_step(model, loss_fn, optimizer, "cpu")
        step(batch)  # the first step initialises lazily (AdamW's state)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            step(batch)
        names = Counter(e.name for e in profile.events() if e.name.startswith("aten::"))
        rows.append({"model": name, "aten operators per step": sum(names.values())})
        top[name] = names.most_common(12)
    rows[0]["vs nanoGPT"] = round(rows[0]["aten operators per step"] / rows[1]["aten operators per step"], 3)
    for name, common in top.items():
        rows.append({"model": f"{name}: most frequent", "aten operators per step":
                     ", ".join(f"{op.removeprefix('aten::')} {n}" for op, n in common)})
    return write_result("nanogpt_operators", {
        "title": "Operators per training step, course GPT vs nanoGPT (6 layers, 6 heads, 384 dims, bf16 autocast, CPU)",
        "notes": "One training step (forward, loss, backward, clipping, fused AdamW) under torch.profiler; every "
                 "aten operator counted, nested ones included. A GPU runs one or more kernels per operator, so on "
                 "a small model that is launch-bound this count is what sets the time.",
        "rows": rows})


# ----------------------------------------------------------------------------
# 2 and 3. Speed, memory and quality on CUDA


def per_step_seconds(steps, batch_list):
    """name -> median over ROUNDS of (time of STEPS_PER_ROUND steps) / STEPS_PER_ROUND, in turns;
    the first round (compilation, if any) is not counted."""
    rounds = {name: (lambda step=step: [step(batch) for batch in batch_list[:STEPS_PER_ROUND]])
              for name, step in steps.items()}
    seconds = interleaved_medians(rounds, repeats=ROUNDS, warmup=1, device="cuda")
    return {name: s / STEPS_PER_ROUND for name, s in seconds.items()}


def peak_memory(name, module, vocab_size, batch_list, compiled):
    """Bytes allocated at most during three training steps of one model, alone on the GPU."""
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model, loss_fn, optimizer = build(name, module, vocab_size, "cuda")
    step = training_step(model, loss_fn, optimizer, "cuda", compiled)
    for batch in batch_list[:3]:
        step(batch)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del model, optimizer, step
    return peak


def validation_loss(model, loss_fn, val_batches):
    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.stack([loss_fn(model, batch).float() for batch in val_batches]).mean().item()
    model.train()
    return loss


def quality(module, vocab_size, train_batches, val_batches):
    """name -> (validation loss after QUALITY_STEPS, seconds)."""
    result = {}
    model, loss_fn, optimizer = build(COURSE, module, vocab_size, "cuda")
    start = time.perf_counter()
    train(model, lambda s: train_batches[s], loss_fn, steps=QUALITY_STEPS, warmup=WARMUP, optimizer=optimizer,
          precision="bf16", progress=False, log_every=100)
    torch.cuda.synchronize()
    result[COURSE] = (validation_loss(model, loss_fn, val_batches), time.perf_counter() - start)

    model, loss_fn, optimizer = build(NANOGPT, module, vocab_size, "cuda")
    step = training_step(model, loss_fn, optimizer, "cuda")
    start = time.perf_counter()
    for i in range(QUALITY_STEPS):  # nanoGPT's get_lr: linear warm-up, cosine to lr / 10 at the last step
        ratio = (i - WARMUP) / (QUALITY_STEPS - WARMUP)
        lr = LR * (i + 1) / (WARMUP + 1) if i < WARMUP else LR / 10 + 0.5 * (1 + math.cos(math.pi * ratio)) * (LR - LR / 10)
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss = step(train_batches[i])
        if i % 100 == 0:
            loss.item()  # nanoGPT reads its loss every log_interval steps
    torch.cuda.synchronize()
    result[NANOGPT] = (validation_loss(model, loss_fn, val_batches), time.perf_counter() - start)
    return result


def cuda(module):
    vocab_size, train_ids, val_ids = data("cuda")
    train_batches = batches(train_ids, QUALITY_STEPS, BATCH, seed=2)
    val_batches = batches(val_ids, EVAL_BATCHES, BATCH, seed=3)
    rows = []
    for compiled in (False, True):
        steps = {}
        for name in (COURSE, NANOGPT):
            model, loss_fn, optimizer = build(name, module, vocab_size, "cuda")
            steps[name] = training_step(model, loss_fn, optimizer, "cuda", compiled)
        seconds = per_step_seconds(steps, train_batches)
        for name in steps:
            rows.append({"model": name, "mode": "compiled" if compiled else "eager",
                         "ms per step": round(1000 * seconds[name], 2),
                         "peak memory (MiB)": round(peak_memory(name, module, vocab_size, train_batches, compiled) / 2**20)})
        for key in ("ms per step", "peak memory (MiB)"):
            rows[-2][f"{key} vs nanoGPT"] = round(rows[-2][key] / rows[-1][key], 3)
        del steps
    for name, (loss, wall) in quality(module, vocab_size, train_batches, val_batches).items():
        rows.append({"model": name, "mode": f"eager, {QUALITY_STEPS} steps",
                     "val loss": round(loss, 4), "seconds": round(wall, 1)})
    rows[-2]["val loss - nanoGPT"] = round(rows[-2]["val loss"] - rows[-1]["val loss"], 4)
    return write_result("nanogpt_cuda", {
        "title": f"Course GPT vs nanoGPT on {torch.cuda.get_device_name(0)}: nanoGPT's GPU config "
                 f"(6 layers, 6 heads, 384 dims, block 256, batch 64, bf16)",
        "notes": f"ms per step: the median of {ROUNDS} rounds of {STEPS_PER_ROUND} steps, the two models in turns. "
                 f"Peak memory: torch.cuda.max_memory_allocated over three steps of one model alone. Val loss: "
                 f"after {QUALITY_STEPS} steps on the same batches, the mean over the same {EVAL_BATCHES} "
                 f"validation batches.",
        "rows": rows})


def main():
    module = nanogpt_module()
    if module is None:  # keeps the results already in bench/results
        return "nothing: set NANOGPT_DIR to a nanoGPT checkout (git clone https://github.com/karpathy/nanoGPT)"
    path = operators(module)
    if torch.cuda.is_available():
        path = cuda(module)
    return path


if __name__ == "__main__":
    print(main())
