"""The course's own checkpoints (plmcourse.pretrained.checkpoints), rebuilt from their seeds.

Each checkpoint in CHECKPOINTS is built again into a temporary folder, exactly as
`plmcourse checkpoints build` builds the shipped file, and compared
with the shipped one: build time (the budget is 3 minutes on 2 CPU cores), held-out loss
of the rebuild against the shipped file's, and whether every tensor comes out bit for bit
the same. The same seed, PyTorch version and thread count on the CPU should give equal
weights; a different Python changes the tiny GPT's corpus (Python's own docs) and so its
weights, which the "same corpus" column shows.
"""

from __future__ import annotations

import json
import tempfile
import time

import safetensors.torch
import torch

from bench.common import write_result
from plmcourse.pretrained.checkpoints import (
    CHECKPOINTS,
    WEIGHTS_DIR,
    build_checkpoint,
    heldout_loss,
    load_checkpoint,
)

BUDGET_SECONDS = 180


def compare_tensors(shipped_path, rebuilt_path):
    """(all tensors bitwise equal?, largest absolute difference of any weight)."""
    shipped, rebuilt = safetensors.torch.load_file(shipped_path), safetensors.torch.load_file(rebuilt_path)
    if shipped.keys() != rebuilt.keys():
        return False, float("nan")
    equal = all(torch.equal(shipped[k], rebuilt[k]) for k in shipped)
    largest = max(float((shipped[k] - rebuilt[k]).abs().max()) for k in shipped)
    return equal, largest


def rebuild(name, folder):
    start, start_cpu = time.perf_counter(), time.process_time()
    path = build_checkpoint(name, out_dir=folder, progress=False)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
    rebuilt = load_checkpoint(name, device="cpu", directory=folder)
    meta = rebuilt.metadata
    row = {"checkpoint": name,
           "parameters": sum(p.numel() for p in rebuilt.model.parameters()),
           "steps": CHECKPOINTS[name].steps,
           "build seconds": round(seconds, 1),
           f"within {BUDGET_SECONDS} s": "yes" if seconds <= BUDGET_SECONDS else "no",
           # CPU time of all threads: a load-independent check (2 cores x 180 s = 360 CPU seconds).
           "build CPU seconds": round(cpu_seconds, 1),
           "file MB": round(path.stat().st_size / 1e6, 2),
           "held-out loss (rebuilt)": round(float(meta["heldout_loss"]), 4),
           "unigram baseline": round(float(meta["baseline_unigram_loss"]), 4),
           "bigram baseline": round(float(meta["baseline_bigram_loss"]), 4) if "baseline_bigram_loss" in meta
           else None}

    shipped_path = WEIGHTS_DIR / f"{name}.safetensors"
    if not shipped_path.is_file():
        row["shipped"] = "missing"
        return row
    shipped = load_checkpoint(name, device="cpu")
    equal, largest = compare_tensors(shipped_path, path)
    row.update({
        "held-out loss (shipped file)": round(float(shipped.metadata["heldout_loss"]), 4),
        "shipped, recomputed now": round(heldout_loss(shipped), 4),
        "shipped build seconds": shipped.metadata.get("build_seconds"),
        "tensors bitwise equal": "yes" if equal else "no",
        "largest weight difference": f"{largest:.2g}",
        "same spec": "yes" if shipped.metadata["spec"] == meta["spec"] else "no",
        "same corpus": "yes" if shipped.metadata.get("corpus_sha256") == meta.get("corpus_sha256") else "no",
        "same torch, threads": "yes" if all(shipped.metadata[k] == meta[k]
                                            for k in ("torch_version", "torch_threads")) else "no",
    })
    return row


def main():
    with tempfile.TemporaryDirectory() as folder:
        rows = [rebuild(name, folder) for name in CHECKPOINTS]
    notes = ("Each checkpoint is rebuilt from its seed on the CPU into a temporary folder and compared "
             "with the shipped file in plmcourse/pretrained/weights/. Held-out losses in nats (per masked "
             "word for tiny-bert, per character for tiny-gpt), each computed as its file's "
             "heldout_loss_description says; baselines counted on the training data with add-one "
             "smoothing and scored on the same held-out targets. Specs: "
             + json.dumps({name: {"steps": s.steps, "batch": s.batch_size, "lr": s.lr, **s.config}
                           for name, s in CHECKPOINTS.items()}))
    return write_result("checkpoints", {"title": "The course's checkpoints, rebuilt from their seeds",
                                        "notes": notes, "rows": rows})


if __name__ == "__main__":
    print(main())
