"""Notebook 08's other contrastive families and SimCSE's dropout rate, over the notebook's six seeds.

For each SEED 0-5 (the notebook's data: review pairs seed=SEED, unlabelled sentences seed=SEED + 3)
and two training seeds (3 SEED and 3 SEED + 1; the notebook's live runs use the first), the tiny BERT
is trained for 100 steps of 64 at lr 3e-3 (the notebook's SimCSE setting) with:

- unsupervised SimCSE at dropout p in {0, 0.05, 0.1, 0.2, 0.3} (Gao et al. 2021's ablation; 0.1 is the notebook's);
- ConSERT-style views: token cutoff (15% of the words) or token shuffle, dropout 0 (Yan et al. 2021);
- BYOL-style bootstrapping on SimCSE's dropout views, no negatives (Grill et al. 2020): with predictor
  and EMA target (decay 0.99), without the predictor, without the EMA (decay 0), without both;

and PromptBERT's untrained [MASK] vector (Jiang et al. 2022) with three templates, raw and denoised,
the template chosen on a dev draw of pairs (seed SEED + 4, test pairs removed).
Each run records the review-world Spearman (240 pairs), the anisotropy of 2,000 review sentences
and, for BYOL, the anisotropy of its projector's output (near 1: collapsed).
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
from tqdm.auto import tqdm

from bench.common import write_result
from plmcourse import data, ref
from plmcourse import nn as pnn
from plmcourse.pretrained import load_checkpoint

SEEDS = range(6)
TRAINING = (0, 1)  # training seed 3 * SEED + i
DROPOUTS = (0.0, 0.05, 0.1, 0.2, 0.3)
BYOL_VARIANTS = {"BYOL (predictor, EMA 0.99)": (True, 0.99), "BYOL, no predictor": (False, 0.99),
                 "BYOL, no EMA (decay 0)": (True, 0.0), "BYOL, neither": (False, 0.0)}
TEMPLATES = ("{} , it was [MASK] .", "{} i [MASK] it .", "{} [MASK] .")


def spearman(a, b, pairs):
    return ref.spearman(ref.cosine_similarity(a, b), [p.score for p in pairs])


def model_spearman(model, tok, pairs):
    return spearman(pnn.encode(model, tok, [p.a for p in pairs]), pnn.encode(model, tok, [p.b for p in pairs]), pairs)


def prompt_spearman(model, tok, pairs, template, denoise):
    sides = ([p.a for p in pairs], [p.b for p in pairs])
    return spearman(*(pnn.prompt_embed(model, tok, side, template, denoise) for side in sides), pairs)


def dev_pairs(seed, test):
    seen = {(p.a, p.b) for p in test} | {(p.b, p.a) for p in test}
    return [p for p in data.review_similarity_pairs(seed=seed + 4) if (p.a, p.b) not in seen]


def one_seed(seed, checkpoint, bar):
    base, tok = checkpoint.model.bert, checkpoint.tokenizer
    pairs = data.review_similarity_pairs(seed=seed)
    unlabelled = data.review_sentences(5000, seed=seed + 3)
    sentences = data.review_sentences(2000, seed=seed + 3)
    runs = [{"seed": seed, "method": "none (MLM only)", "spearman": model_spearman(base, tok, pairs),
             "anisotropy": ref.anisotropy(pnn.encode(base, tok, sentences))}]
    dev = dev_pairs(seed, pairs)
    for template in TEMPLATES:
        for denoise in (False, True):
            runs.append({"seed": seed, "method": "PromptBERT, untrained", "template": template, "denoise": denoise,
                         "dev spearman": prompt_spearman(base, tok, dev, template, denoise),
                         "spearman": prompt_spearman(base, tok, pairs, template, denoise)})
    trainers = {f"SimCSE, dropout {p}": lambda m, s, p=p: pnn.train_simcse(m, tok, unlabelled, dropout=p, seed=s,
                                                                          progress=False) for p in DROPOUTS}
    trainers.update({f"ConSERT, token {a}": lambda m, s, a=a: pnn.train_consert(m, tok, unlabelled, augment=a, seed=s,
                                                                               progress=False)
                     for a in ("cutoff", "shuffle")})
    trainers.update({name: lambda m, s, v=v: pnn.train_byol(m, tok, unlabelled, predictor=v[0], decay=v[1], seed=s,
                                                           progress=False) for name, v in BYOL_VARIANTS.items()})
    for i in TRAINING:
        training_seed = 3 * seed + i
        for method, trainer in trainers.items():
            model = copy.deepcopy(base)
            start = time.perf_counter()
            out = trainer(model, training_seed)
            run = {"seed": seed, "training seed": training_seed, "method": method,
                   "seconds": time.perf_counter() - start, "spearman": model_spearman(model, tok, pairs),
                   "anisotropy": ref.anisotropy(pnn.encode(model, tok, sentences))}
            if method.startswith("BYOL"):
                history, heads = out
                run["projection anisotropy"] = ref.anisotropy(pnn.project_byol(model, heads, tok, sentences[:500]))
                run["final loss"] = float(np.mean(history.loss[-10:]))
            runs.append(run)
            bar.update()
    return runs


def summary(runs):
    """One row per method: Spearman over all runs, its gap to SimCSE (dropout 0.1) run by run, anisotropy."""
    simcse = {(r["seed"], r["training seed"]): r["spearman"] for r in runs if r["method"] == "SimCSE, dropout 0.1"}
    base = {r["seed"]: r["spearman"] for r in runs if r["method"] == "none (MLM only)"}
    rows = []
    for method in dict.fromkeys(r["method"] for r in runs if "template" not in r):
        chosen = [r for r in runs if r["method"] == method]
        rho = np.array([r["spearman"] for r in chosen])
        row = {"method": method, "runs": len(chosen), "Spearman (mean)": round(float(rho.mean()), 3),
               "Spearman (range)": f"{rho.min():.3f} to {rho.max():.3f}"}
        if "training seed" in chosen[0]:
            gap = np.array([r["spearman"] - simcse[r["seed"], r["training seed"]] for r in chosen])
            gain = np.array([r["spearman"] - base[r["seed"]] for r in chosen])
            row.update({"minus SimCSE p=0.1 (range)": f"{gap.min():+.3f} to {gap.max():+.3f}",
                        "above SimCSE p=0.1": f"{int((gap > 0).sum())} of {len(gap)}",
                        "above the MLM model": f"{int((gain > 0).sum())} of {len(gain)}"})
        row["anisotropy (mean)"] = round(float(np.mean([r["anisotropy"] for r in chosen])), 3)
        if "projection anisotropy" in chosen[0]:
            row["projection anisotropy (range)"] = (f"{min(r['projection anisotropy'] for r in chosen):.3f} to "
                                                    f"{max(r['projection anisotropy'] for r in chosen):.3f}")
            row["final loss (mean)"] = round(float(np.mean([r["final loss"] for r in chosen])), 4)
        rows.append(row)
    for template in TEMPLATES:
        for denoise in (False, True):
            chosen = [r for r in runs if r.get("template") == template and r["denoise"] == denoise]
            rho = np.array([r["spearman"] for r in chosen])
            rows.append({"method": f"PromptBERT, untrained: {template!r}" + (", denoised" if denoise else ""),
                         "runs": len(chosen), "Spearman (mean)": round(float(rho.mean()), 3),
                         "Spearman (range)": f"{rho.min():.3f} to {rho.max():.3f}",
                         "dev Spearman (mean)": round(float(np.mean([r["dev spearman"] for r in chosen])), 3)})
    return rows


def main():
    torch.set_num_threads(1)  # the course machine has 2 cores, shared here with the notebook runs
    checkpoint = load_checkpoint("tiny-bert", device="cpu")
    n_trained = len(DROPOUTS) + 2 + len(BYOL_VARIANTS)
    runs = []
    with tqdm(total=len(SEEDS) * len(TRAINING) * n_trained, desc="sentence families") as bar:
        for seed in SEEDS:
            runs.extend(one_seed(seed, checkpoint, bar))
    return write_result("sentence_families", {
        "title": "Notebook 08: SimCSE's dropout rate and three other contrastive families on the tiny BERT "
                 "(review-world Spearman, 240 pairs)",
        "notes": "SEED 0-5 (the notebook's data) x training seeds 3 SEED and 3 SEED + 1; 100 steps of 64, lr 3e-3, "
                 "temperature 0.05, mean pooling (plmcourse.nn.train_simcse, train_consert, train_byol). "
                 "'minus SimCSE p=0.1' compares runs with the same data and training seed. A 95% bootstrap "
                 "interval on 240 pairs is about +-0.08 wide. One thread per run.",
        "rows": summary(runs),
        "runs": runs})


if __name__ == "__main__":
    print(main())
