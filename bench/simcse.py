"""SimCSE on the course's tiny BERT: how the result depends on the settings notebook 08 fixed once.

Notebook 08 trains unsupervised and supervised SimCSE for 100 steps of 64 at learning rate
3e-3 (the tiny BERT's pre-training peak), chosen before measuring. This benchmark repeats
both at other learning rates and lengths, three seeds each, and records the review-world
Spearman correlation (240 pairs), the anisotropy of the pairs' sentences and the seconds per
run, so the notebook's choice can be read against the alternatives rather than taken on trust.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch

from bench.common import write_result
from plmcourse import data, ref
from plmcourse import nn as pnn
from plmcourse.pretrained import load_checkpoint

SETTINGS = [(lr, steps) for lr in (1e-4, 3e-4, 1e-3, 3e-3) for steps in (100, 200)]
SEEDS = (0, 1, 2)


def review_scores(model, tokenizer, pairs):
    a = pnn.encode(model, tokenizer, [p.a for p in pairs])
    b = pnn.encode(model, tokenizer, [p.b for p in pairs])
    spearman = ref.spearman(ref.cosine_similarity(a, b), [p.score for p in pairs])
    return spearman, ref.anisotropy(np.concatenate([a, b]))


def main():
    torch.set_num_threads(2)  # the course's machine: 2 cores
    checkpoint = load_checkpoint("tiny-bert", device="cpu")
    pairs = data.review_similarity_pairs()
    examples = {"unsupervised": data.review_sentences(5000), "supervised": data.review_nli_triples()}
    base_spearman, base_anisotropy = review_scores(checkpoint.model.bert, checkpoint.tokenizer, pairs)
    rows = [{"training": "none (MLM only)", "lr": "", "steps": "", "Spearman (mean of 3 seeds)": round(base_spearman, 3),
             "seeds' spread": "", "anisotropy": round(base_anisotropy, 3), "seconds per run": ""}]
    for kind, sentences in examples.items():
        for lr, steps in SETTINGS:
            results, seconds = [], []
            for seed in SEEDS:
                model = copy.deepcopy(checkpoint.model.bert)
                start = time.perf_counter()
                pnn.train_simcse(model, checkpoint.tokenizer, sentences, steps=steps, lr=lr, seed=seed, progress=False)
                seconds.append(time.perf_counter() - start)
                results.append(review_scores(model, checkpoint.tokenizer, pairs))
            spearman, anisotropy = np.array(results).T
            rows.append({"training": kind, "lr": lr, "steps": steps,
                         "Spearman (mean of 3 seeds)": round(float(spearman.mean()), 3),
                         "seeds' spread": f"{spearman.min():.3f}-{spearman.max():.3f}",
                         "anisotropy": round(float(anisotropy.mean()), 3),
                         "seconds per run": round(float(np.median(seconds)), 1)})
            print(rows[-1], flush=True)
    return write_result("simcse", {
        "title": "SimCSE on the tiny BERT: learning rate and length (review-world Spearman, 240 pairs)",
        "notes": "Batches of 64, temperature 0.05, dropout 0.1, mean pooling, AdamW with warm-up and cosine decay "
                 "(plmcourse.nn.train_simcse); seeds 0-2. Notebook 08 uses lr 3e-3, 100 steps. A 95% bootstrap "
                 "interval on these 240 pairs is about +-0.1 wide, so rows closer than that are not told apart.",
        "rows": rows})


if __name__ == "__main__":
    print(main())
