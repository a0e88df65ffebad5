"""GPT pre-training: the course's GPT and training loop against nanoGPT, side by side.

The configuration is the CPU one from nanoGPT's README: 4 layers, 4 heads, 128 dims,
block 64, batch 12, dropout 0, 2000 iterations, no compile. The data is the course's
corpus (`plmcourse.data.text.python_corpus`, about 0.68 MB of Python's own docs and
docstrings), as characters, first 90% to train and the rest to validate.

nanoGPT comes from a checkout named by NANOGPT_DIR (never part of this repository:
`git clone https://github.com/karpathy/nanoGPT` and point NANOGPT_DIR at it). Without
one, its row shows the figures quoted in the benchmark issue (another 1.1 MB corpus,
not measured side by side).

Two measurements, because this shared 2-core machine changes speed from minute to
minute (the same run took 35 or 60 ms per iteration an hour apart):

1. Quality. Each trains for 2000 iterations: nanoGPT with its own, unchanged `train.py`
   (its `config/train_shakespeare_char.py` plus the README's command-line overrides),
   the course's GPT with `plmcourse.train.train`. Both estimate the validation loss
   every 100 iterations as nanoGPT does, the mean over EVAL_BATCHES random batches
   (the README's 20 left the estimate so noisy, about +-0.03, that "the first
   evaluation below 1.87" was a lottery). The target is the issue's 1.87, or nanoGPT's
   own final validation loss when it ends above that on this corpus. The wall time of
   each run is reported as measured.
2. Speed. One training step of each (forward, backward, clipping, AdamW step; nanoGPT's
   model and optimiser set-up imported from its model.py), timed in turns in one
   process, so that both see the same machine. ms/iteration and MFU come from here, and
   time to target = iterations to target x ms/iteration.

MFU uses nanoGPT's count (6N + 12 L d T per token) against the float32 matmul peak
measured here.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench.common import interleaved_medians, write_result
from plmcourse.data.text import CharTokenizer, python_corpus, split
from plmcourse.nn.models import GPT, GPTConfig
from plmcourse.nn.objectives import cross_entropy
from plmcourse.train import make_optimizer, train

LAYERS, HEADS, WIDTH, BLOCK, BATCH, ITERS = 4, 4, 128, 64, 12, 2000
EVAL_EVERY, EVAL_BATCHES = 100, 50
TARGET = 1.87
SPEED_ROUNDS = 40
# The figures for nanoGPT (its corpus, its machine kind); shown when no checkout is given.
QUOTED = {"ms per iteration": 39.0, "seconds to target": 86.0, "final val loss": 1.865}

# The course's set-up: train()'s defaults (fused AdamW, betas (0.9, 0.95), weight decay
# 0.01 on matrices only, warm-up over 5% of the steps then cosine to 10%, gradient
# clipping at 1) with a peak learning rate suited to a model this small (measured here:
# 1e-3 reached 1.87 after 1800 iterations, 2e-3 and 3e-3 after 1600, 3e-3 ending lowest).
COURSE_LR = 3e-3
COURSE = f"plmcourse GPT + train() (lr {COURSE_LR:g}, fused attention)"
NANOGPT = "nanoGPT (README CPU config)"


def corpus():
    text = python_corpus()
    tokenizer = CharTokenizer(text)
    ids = torch.from_numpy(tokenizer.encode(text))
    return tokenizer, *split(ids, 0.1)


def get_batch(ids, generator=None):
    """BATCH random windows: inputs (B, T) and the same windows shifted by one, (B, T)."""
    starts = torch.randint(len(ids) - BLOCK, (BATCH,), generator=generator)
    x = torch.stack([ids[s:s + BLOCK] for s in starts])
    y = torch.stack([ids[s + 1:s + 1 + BLOCK] for s in starts])
    return x, y


def matmul_peak(n: int = 2048, repeats: int = 10) -> float:
    """Measured float32 matmul throughput in FLOP/s (the best of `repeats`)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def flops_per_iteration(n_params: int) -> float:
    """nanoGPT's estimate_mfu count: 6N per token for the weights, 12 L d T for attention."""
    return (6 * n_params + 12 * LAYERS * WIDTH * BLOCK) * BLOCK * BATCH


def first_below(curve, target):
    return next((updates for updates, val in curve if val <= target), None)


# ----------------------------------------------------------------------------
# The course's GPT, through plmcourse.train.train


def course_model(vocab_size):
    return GPT(GPTConfig(vocab_size=vocab_size, d_model=WIDTH, n_layers=LAYERS, n_heads=HEADS,
                         max_len=BLOCK, dropout=0.0))


def course_loss(model, batch):
    x, y = batch
    return cross_entropy(model(x), y)


def course_curve(train_ids, val_ids, vocab_size, seed=0):
    """(validation curve [(updates, loss)], training seconds) of one 2000-iteration run."""
    torch.manual_seed(seed)
    model = course_model(vocab_size)

    def eval_fn(model):  # nanoGPT's estimate_loss: the mean over random validation batches
        return {"val_loss": np.mean([course_loss(model, get_batch(val_ids)).item() for _ in range(EVAL_BATCHES)])}

    history = train(model, lambda step: get_batch(train_ids), course_loss, steps=ITERS, lr=COURSE_LR,
                    eval_fn=eval_fn, eval_every=EVAL_EVERY, progress=False)
    curve = [(step + 1, e["val_loss"]) for step, e in zip(history.eval_steps, history.evals)]
    return curve, history.seconds[-1]


def course_step(vocab_size):
    model = course_model(vocab_size)
    optimizer = make_optimizer(model, COURSE_LR)
    n_params = sum(p.numel() for p in model.parameters()) - model.position.embedding.weight.numel()

    def step(batch):
        loss = course_loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.item()

    return step, n_params


# ----------------------------------------------------------------------------
# nanoGPT: its own train.py for the curve, its model.py for the step


def nanogpt_dir() -> Path | None:
    path = os.environ.get("NANOGPT_DIR")
    if path and (Path(path) / "train.py").exists():
        return Path(path)
    return None


def nanogpt_curve(checkout: Path, tokenizer, train_ids, val_ids):
    """(validation curve, training seconds) of nanoGPT's train.py, run unchanged in a scratch directory."""
    with tempfile.TemporaryDirectory(prefix="nanogpt-") as tmp:
        tmp = Path(tmp)
        data = tmp / "data" / "plmcourse_chars"
        data.mkdir(parents=True)
        train_ids.numpy().astype(np.uint16).tofile(data / "train.bin")
        val_ids.numpy().astype(np.uint16).tofile(data / "val.bin")
        meta = {"vocab_size": len(tokenizer), "itos": dict(enumerate(tokenizer.chars)), "stoi": tokenizer.index}
        (data / "meta.pkl").write_bytes(pickle.dumps(meta))
        (tmp / "configurator.py").symlink_to(checkout / "configurator.py")  # train.py reads it from cwd
        cmd = [sys.executable, str(checkout / "train.py"), str(checkout / "config/train_shakespeare_char.py"),
               "--device=cpu", "--compile=False", f"--eval_iters={EVAL_BATCHES}", "--log_interval=1",
               f"--block_size={BLOCK}", f"--batch_size={BATCH}", f"--n_layer={LAYERS}", f"--n_head={HEADS}",
               f"--n_embd={WIDTH}", f"--max_iters={ITERS}", f"--lr_decay_iters={ITERS}", "--dropout=0.0",
               "--dataset=plmcourse_chars", f"--out_dir={tmp / 'out'}", "--dtype=float32",
               f"--eval_interval={EVAL_EVERY}"]
        log = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=True).stdout
    times = {int(i): float(ms) / 1000 for i, ms in re.findall(r"^iter (\d+): loss \S+, time ([\d.]+)ms", log, re.M)}
    curve = [(int(s), float(v)) for s, v in re.findall(r"^step (\d+): train loss \S+, val loss ([\d.]+)", log, re.M)]
    # An iteration that follows an evaluation also timed the evaluation: count it as a typical one.
    typical = float(np.median(list(times.values())))
    seconds = sum(typical if i % EVAL_EVERY == 0 else times[i] for i in range(ITERS))
    return [point for point in curve if point[0] > 0], seconds


def nanogpt_step(checkout: Path, vocab_size):
    """One training step as nanoGPT's train.py takes it on a CPU (no GradScaler, no autocast)."""
    spec = importlib.util.spec_from_file_location("nanogpt_model", checkout / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.GPTConfig(block_size=BLOCK, vocab_size=vocab_size, n_layer=LAYERS, n_head=HEADS,
                              n_embd=WIDTH, dropout=0.0, bias=False)
    model = module.GPT(config)
    optimizer = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")

    def step(batch):
        _, loss = model(*batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    return step, model.get_num_params()


# ----------------------------------------------------------------------------


def main():
    tokenizer, train_ids, val_ids = corpus()
    peak = matmul_peak()
    checkout = nanogpt_dir()
    V = len(tokenizer)

    steps = {COURSE: course_step(V)}
    if checkout is not None:
        steps[NANOGPT] = nanogpt_step(checkout, V)
    generator = torch.Generator().manual_seed(0)
    batches = [get_batch(train_ids, generator) for _ in range(SPEED_ROUNDS + 3)]
    turns = {name: (lambda step=step, it=iter(batches * 2): step(next(it))) for name, (step, _) in steps.items()}
    seconds = interleaved_medians(turns, repeats=SPEED_ROUNDS, warmup=3)

    curves = {}
    if checkout is not None:
        curves[NANOGPT] = nanogpt_curve(checkout, tokenizer, train_ids, val_ids)
    curves[COURSE] = course_curve(train_ids, val_ids, V)
    target = max(TARGET, curves[NANOGPT][0][-1][1]) if checkout is not None else TARGET

    rows = []
    for name, (curve, wall) in curves.items():
        ms = 1000 * seconds[name]
        reached = first_below(curve, target)
        rows.append({
            "variant": name,
            "ms per iteration": round(ms, 1),
            "tokens per second": round(BATCH * BLOCK / ms * 1000),
            "MFU (% of matmul peak)": round(100 * flops_per_iteration(steps[name][1]) / (ms / 1000) / peak, 1),
            "iterations to target": reached,
            "seconds to target": round(reached * ms / 1000, 1) if reached else None,
            "final val loss": round(curve[-1][1], 3),
            f"{ITERS} iterations, as run (s)": round(wall, 1),
        })
    if checkout is None:
        rows.append({"variant": "nanoGPT, figures quoted in the issue (other corpus, not run here)", **QUOTED})
    reference = rows[0] if checkout is not None else rows[-1]
    for row in rows:
        if row.get("seconds to target") and reference.get("seconds to target"):
            row["time to target vs nanoGPT"] = round(row["seconds to target"] / reference["seconds to target"], 2)
        row["ms per iteration vs nanoGPT"] = round(row["ms per iteration"] / reference["ms per iteration"], 2)
    return write_result("gpt", {
        "title": "GPT pre-training in nanoGPT's CPU configuration: speed and time to quality",
        "notes": f"Target validation loss: {target:.3f}. Matmul peak measured: {peak / 1e9:.0f} GFLOP/s. "
                 f"Corpus: {len(train_ids) + len(val_ids):,} characters. ms per iteration: the two steps "
                 f"timed in turns ({SPEED_ROUNDS} rounds, median); seconds to target = iterations x ms.",
        "rows": rows, "val curves": {name: [[u, round(v, 4)] for u, v in curve] for name, (curve, _) in curves.items()}})


if __name__ == "__main__":
    print(main())
