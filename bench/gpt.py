"""GPT pre-training: the course's GPT and training loop against nanoGPT, side by side.

The configuration is the CPU one from nanoGPT's README: 4 layers, 4 heads, 128 dims,
block 64, batch 12, dropout 0, 2000 iterations, no compile. The data is the course's
corpus (`plmcourse.data.text.python_corpus`, about 0.68 MB of Python's own docs and
docstrings), as characters, first 90% to train and the rest to validate.

nanoGPT runs unchanged: its own `train.py` with its `config/train_shakespeare_char.py`
and the README's command-line overrides, from a checkout named by NANOGPT_DIR (it is
never part of this repository: `git clone https://github.com/karpathy/nanoGPT` and
point NANOGPT_DIR at it). Without a checkout, its row shows the figures quoted in the
benchmark issue instead (another 1.1 MB corpus, not measured side by side).

Both sides are measured the same way:
- validation loss every 100 iterations, as nanoGPT estimates it (20 random batches);
- time excludes those evaluations; ms/iteration is the median of the iterations;
- time to quality is the training time until the first evaluation at or below TARGET;
- model FLOPs utilisation uses nanoGPT's count (6N + 12 L d T per token) against the
  float32 matmul peak measured here.
"""

from __future__ import annotations

import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench.common import write_result
from plmcourse.data.text import CharTokenizer, python_corpus, split
from plmcourse.nn.models import GPT, GPTConfig
from plmcourse.nn.objectives import cross_entropy
from plmcourse.train import train

LAYERS, HEADS, WIDTH, BLOCK, BATCH, ITERS = 4, 4, 128, 64, 12, 2000
EVAL_EVERY, EVAL_BATCHES = 100, 20
TARGET = 1.87
# The figures for nanoGPT (its corpus, its machine kind); shown when no checkout is given.
QUOTED = {"ms per iteration": 39.0, "seconds to target": 86.0, "final val loss": 1.865}

# The course's set-up: train()'s defaults (AdamW, betas (0.9, 0.95), weight decay 0.01
# on matrices only, warm-up then cosine to 10%, gradient clipping at 1) with a peak
# learning rate suited to a model this small.
COURSE_LR = 2e-3


def corpus():
    text = python_corpus()
    tokenizer = CharTokenizer(text)
    ids = torch.from_numpy(tokenizer.encode(text))
    return tokenizer, *split(ids, 0.1)


def matmul_peak(n: int = 2048, repeats: int = 10) -> float:
    """Measured float32 matmul throughput in FLOP/s (the best of `repeats`)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def flops_per_iteration(n_params: int) -> float:
    """nanoGPT's estimate_mfu count: 6N per token for the weights, 12 L d T for attention."""
    per_token = 6 * n_params + 12 * LAYERS * WIDTH * BLOCK
    return per_token * BLOCK * BATCH


def summary(name, iteration_seconds, evals, n_params, peak):
    """One result row from per-iteration times and [(updates, val_loss), ...]."""
    ms = 1000 * statistics.median(iteration_seconds)
    elapsed = np.cumsum(iteration_seconds)
    reached = next((updates for updates, val in evals if val <= TARGET), None)
    return {
        "variant": name,
        "ms per iteration": round(ms, 1),
        "tokens per second": round(BATCH * BLOCK / ms * 1000),
        "MFU (% of matmul peak)": round(100 * flops_per_iteration(n_params) / (ms / 1000) / peak, 1),
        "iterations to target": reached,
        "seconds to target": round(float(elapsed[reached - 1]), 1) if reached else None,
        "final val loss": round(evals[-1][1], 3),
        "val curve": [[u, round(v, 4)] for u, v in evals],
    }


# ----------------------------------------------------------------------------
# The course's GPT, through plmcourse.train.train


def run_course(train_ids, val_ids, vocab_size, peak, seed=0):
    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=vocab_size, d_model=WIDTH, n_layers=LAYERS, n_heads=HEADS,
                          max_len=BLOCK, dropout=0.0))

    def get_batch(ids):
        starts = torch.randint(len(ids) - BLOCK, (BATCH,))
        x = torch.stack([ids[s:s + BLOCK] for s in starts])  # (B, T)
        y = torch.stack([ids[s + 1:s + 1 + BLOCK] for s in starts])  # (B, T), shifted by one
        return x, y

    def loss_fn(model, batch):
        x, y = batch
        return cross_entropy(model(x), y)

    def eval_fn(model):  # nanoGPT's estimate_loss: the mean over random validation batches
        return {"val_loss": np.mean([loss_fn(model, get_batch(val_ids)).item() for _ in range(EVAL_BATCHES)])}

    history = train(model, lambda step: get_batch(train_ids), loss_fn, steps=ITERS, lr=COURSE_LR,
                    eval_fn=eval_fn, eval_every=EVAL_EVERY, progress=False)
    iteration_seconds = np.diff([0.0, *history.seconds])
    evals = [(step + 1, e["val_loss"]) for step, e in zip(history.eval_steps, history.evals)]
    n_params = sum(p.numel() for p in model.parameters()) - model.position.embedding.weight.numel()
    return summary(f"plmcourse GPT + train() (lr {COURSE_LR:g}, fused attention)",
                   iteration_seconds, evals, n_params, peak)


# ----------------------------------------------------------------------------
# nanoGPT, its own train.py


def nanogpt_dir() -> Path | None:
    path = os.environ.get("NANOGPT_DIR")
    if path and (Path(path) / "train.py").exists():
        return Path(path)
    return None


def run_nanogpt(checkout: Path, tokenizer, train_ids, val_ids, peak):
    with tempfile.TemporaryDirectory(prefix="nanogpt-") as tmp:
        tmp = Path(tmp)
        data = tmp / "data" / "plmcourse_chars"
        data.mkdir(parents=True)
        train_ids.numpy().astype(np.uint16).tofile(data / "train.bin")
        val_ids.numpy().astype(np.uint16).tofile(data / "val.bin")
        chars = tokenizer.chars
        meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": tokenizer.index}
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
    evals = [(int(s), float(v)) for s, v in re.findall(r"^step (\d+): train loss \S+, val loss ([\d.]+)", log, re.M)]
    # An iteration that follows an evaluation also timed the evaluation: count it as a typical one.
    typical = statistics.median(times.values())
    iteration_seconds = [typical if i % EVAL_EVERY == 0 else times[i] for i in range(ITERS)]
    return summary("nanoGPT train.py (README CPU config)", iteration_seconds, [e for e in evals if e[0] > 0],
                   _nanogpt_params(tokenizer), peak)


def _nanogpt_params(tokenizer) -> int:
    """nanoGPT's get_num_params(): everything but the position embedding (no biases, tied head)."""
    d, L = WIDTH, LAYERS
    per_layer = 12 * d * d + 2 * d  # attention 4d^2 + MLP 8d^2, two LayerNorm weights
    return len(tokenizer) * d + L * per_layer + d


def main():
    tokenizer, train_ids, val_ids = corpus()
    peak = matmul_peak()
    rows = [run_course(train_ids, val_ids, len(tokenizer), peak)]
    checkout = nanogpt_dir()
    if checkout is not None:
        rows.append(run_nanogpt(checkout, tokenizer, train_ids, val_ids, peak))
    else:
        rows.append({"variant": "nanoGPT, figures quoted in the issue (other corpus, not run here)", **QUOTED})
    reference = rows[1]
    for row in rows:
        if row.get("seconds to target") and reference.get("seconds to target"):
            row["time to target vs nanoGPT"] = round(row["seconds to target"] / reference["seconds to target"], 2)
        row["ms per iteration vs nanoGPT"] = round(row["ms per iteration"] / reference["ms per iteration"], 2)
    return write_result("gpt", {
        "title": f"GPT pre-training, nanoGPT's CPU configuration, time to validation loss {TARGET}",
        "matmul peak (GFLOP/s)": round(peak / 1e9), "corpus characters": len(train_ids) + len(val_ids),
        "rows": rows})


if __name__ == "__main__":
    print(main())
