"""Notebook 14 over the development seeds 0-5: its learning rates chosen on a development split, then
single-stream against dual-stream at equal parameters, CLIP's zero-shot accuracy and recall, and where a masked
colour word looks.

The notebook itself is run (its source, grading cells left out) with `SEED = 0` replaced by each seed; the seed
draws the pictures, the weights and the batches. A last cell reports the numbers the notebook prints and
asserts; a failed assertion is recorded, not hidden (the run goes on past it, allow_errors).

Learning rates (bench/results/multimodal_rates.json): the notebook run with its two rates, `PRETRAIN_LR` (the
single and the dual stream's pre-training) and `CLIP_LR`, both replaced by each rate of GRID, at seeds 0-5. Each
model is scored on the development split only (plmcourse.data.multimodal.dev_pairs: 400 pairs of the seen
colour-shape pairs from a random stream of their own, which neither training nor any test number uses), and the
rate with the best mean over the seeds of its selection score wins:

    single and dual stream   the mean of colour fill and image-text matching on the development pairs
    CLIP                     the mean of zero-shot accuracy (16 captions) and R@1 both ways (200 development pairs)

The three models share nothing but the data (each is seeded afresh and draws its own batches), so one run can
train all three at the same rate. The table of bench/results/multimodal.json then comes from runs of the notebook
at the rates it ships with, as it is.

    python -m bench multimodal                  both tables (about 30 runs of the notebook)
    python -m bench.multimodal rates | table    one of them
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from bench.common import run_notebook_variant, write_result

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "course" / "source" / "14_text_and_images" / "14_text_and_images.ipynb"
REPORT = """
import json as _json


def _dev_recall(pairs):
    similarity = mm.similarity_matrix(embed_pictures(pairs), embed_captions([e.words for e in pairs])).cpu().numpy()
    relevant = np.array([[mm.caption_holds(picture, caption) for caption in pairs] for picture in pairs])
    return ref.recall_at_k(similarity, 1, relevant), ref.recall_at_k(similarity.T, 1, relevant.T)


_recall = _dev_recall(dev_set[:200])
_dev = {"single": {"fill": fill_colour(single, dev_set), "matching": matching(single, dev_set)},
        "dual": {"fill": fill_colour(dual, dev_set), "matching": matching(dual, dev_set)},
        "CLIP": {"zero-shot": zero_shot(dev_set), "R@1 image→text": _recall[0], "R@1 text→image": _recall[1]}}
print(_json.dumps({"single": single_scores, "dual": dual_scores, "sizes": sizes, "zero-shot": zero_shot_scores,
                   "recall": recall, "attention": {str(k): v for k, v in shares.items()},
                   "clip loss": float(np.mean(clip_history.loss[-20:])), "dev": _dev,
                   "rates": {"pretrain": PRETRAIN_LR, "CLIP": CLIP_LR}}))
"""
SEEDS = range(6)  # the development seeds of bench claims
GRID = (1e-3, 3e-3, 1e-2, 3e-2)
# Each model's development scores and how they make its selection score.
SCORES = {"single": ("fill", "matching"), "dual": ("fill", "matching"),
          "CLIP": ("zero-shot", "R@1 image→text", "R@1 text→image")}
NAMES = {"single": "single-stream", "dual": "dual-stream", "CLIP": "CLIP"}
RATE_LINES = {"pretrain": "PRETRAIN_LR", "CLIP": "CLIP_LR"}
NOTES = ("The notebook run top to bottom (grading cells left out) with SEED = 0..5 (pictures, weights and "
         "batches), at the learning rates it ships with (chosen on the development split: multimodal_rates). "
         "Fill: accuracy at the masked colour word among the 4 colours (chance 0.25), on 400 test pairs of the "
         "seen colour-shape pairs, 400 of the held-out ones, and the seen ones with the picture blanked; matching: "
         "image-text matching on the 400 seen test pairs, about half of them shown with another pair's caption "
         "and labelled by whether that caption is true of the picture (chance about 0.5). Single-stream (2 layers, "
         "d_ff 4d) and dual-stream (1 co-attention layer, d_ff 2d) have the same number of parameters within 1%, "
         "the same batches and 300 steps. CLIP: zero-shot naming among 16 classes (chance 0.06) on the seen and "
         "the held-out test pairs; recall@1 over 200 test pairs, 100 of them held-out. Attention: the share of the "
         "last layer's patch attention of a masked colour word that falls on the shape's patches, and (in "
         "brackets) those patches' share of the picture.")
RATE_NOTES = ("Notebook 14's learning rates (AdamW, warm-up and cosine decay, 300 steps of 64 pairs), chosen on a "
              "development split: 400 pairs of the 12 seen colour-shape pairs drawn from a random stream of their "
              "own (plmcourse.data.multimodal.dev_pairs), which no training batch and no test number uses; no "
              "held-out pair, so the test of composition plays no part in the choice. The notebook run at SEED = "
              "0..5 with PRETRAIN_LR (single and dual stream) and CLIP_LR both set to each rate; only development "
              "scores are read. Each cell: mean ± standard deviation over the 6 seeds. Selection score: the mean of "
              "fill and matching (single, dual), of zero-shot accuracy and R@1 both ways over 200 development pairs "
              "(CLIP); 'chosen': the best mean selection score per model.")


def _rate_texts() -> dict[str, str]:
    """The rates as the notebook's source writes them: {"pretrain": "1e-2", "CLIP": "3e-3"}."""
    import nbformat

    source = "\n".join(c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code")
    out = {}
    for key, name in RATE_LINES.items():
        found = re.findall(rf"(?m)^{name} = ([0-9.e-]+)(?![0-9.e-])", source)
        if len(found) != 1:
            raise RuntimeError(f"the notebook should set {name} once on a line of its own; found {found}")
        out[key] = found[0]
    return out


def shipped_rates() -> dict[str, float]:
    """The rates the notebook's source sets: {"pretrain": PRETRAIN_LR, "CLIP": CLIP_LR}."""
    return {key: float(text) for key, text in _rate_texts().items()}


def _run(seed: int, rates: dict[str, float]):
    """The notebook at `seed` with its two rates replaced by `rates`; checks that the run used them."""
    replacements = {f"{RATE_LINES[key]} = {shipped_text}": f"{RATE_LINES[key]} = {rates[key]!r}"
                    for key, shipped_text in _rate_texts().items()}
    got, failed, seconds = run_notebook_variant(NOTEBOOK, seed, REPORT, replacements=replacements)
    if got and got.get("rates") != rates:
        raise RuntimeError(f"the run at seed {seed} used the rates {got.get('rates')}, not {rates}")
    return got, failed, seconds


def _mean_sd(values) -> str:
    values = np.asarray(values, dtype=float)
    return f"{values.mean():.3f} ± {values.std(ddof=1):.3f}"


def sweep() -> dict:
    """{model: {rate: {score: [one per seed], "selection": [one per seed]}}}, development scores only."""
    raw = {model: {f"{rate:g}": {key: [] for key in (*keys, "selection")} for rate in GRID}
           for model, keys in SCORES.items()}
    for seed in SEEDS:
        for rate in GRID:
            got, failed, seconds = _run(seed, {"pretrain": rate, "CLIP": rate})
            print(f"[multimodal] seed {seed} rate {rate:g}: {got.get('dev')} ({seconds:.0f} s)", flush=True)
            for model, keys in SCORES.items():
                scores = raw[model][f"{rate:g}"]
                for key in keys:
                    scores[key].append(got["dev"][model][key])
                scores["selection"].append(float(np.mean([got["dev"][model][key] for key in keys])))
    return raw


def rate_rows(raw: dict) -> tuple[list[dict], dict[str, float]]:
    """One row per model and rate (mean ± sd over the seeds), and the chosen rate per model: the best mean
    selection score."""
    rows, chosen = [], {}
    for model, keys in SCORES.items():
        best = max(GRID, key=lambda rate: np.mean(raw[model][f"{rate:g}"]["selection"]))
        chosen[model] = best
        for rate in GRID:
            scores = raw[model][f"{rate:g}"]
            rows.append({"model": NAMES[model], "learning rate": f"{rate:g}",
                         "development scores": ", ".join(f"{key} {_mean_sd(scores[key])}" for key in keys),
                         "selection score": _mean_sd(scores["selection"]),
                         "per seed (0-5)": " ".join(f"{v:.3f}" for v in scores["selection"]),
                         "chosen": "chosen" if rate == best else ""})
    return rows, chosen


def write_rates(raw: dict):
    rows, chosen = rate_rows(raw)
    shipped = shipped_rates()
    print(f"[multimodal] chosen {chosen}; the notebook ships {shipped}", flush=True)
    if {chosen["single"], chosen["dual"]} != {shipped["pretrain"]} or chosen["CLIP"] != shipped["CLIP"]:
        print("[multimodal] the notebook's rates are not the chosen ones: set them, then `python -m "
              "bench.multimodal table`", flush=True)
    return write_result("multimodal_rates", {
        "title": "Notebook 14's learning rates, chosen on a development split (seeds 0-5)",
        "notes": RATE_NOTES, "grid": list(GRID), "chosen": chosen, "per seed": raw, "rows": rows})


def _row(seed, got, failed, seconds):
    single, dual = got.get("single", {}), got.get("dual", {})
    nan = float("nan")

    def pair(key):
        return f"{single.get(key, nan):.3f} / {dual.get(key, nan):.3f}"

    attention = got.get("attention", {}).get("1", [nan, nan])
    return {
        "seed": seed,
        "fill, seen (single / dual)": pair("seen"),
        "fill, held out": pair("held out"),
        "fill, blank picture": pair("blank picture"),
        "matching": pair("matching"),
        "CLIP zero-shot (seen / held out)": " / ".join(f"{got.get('zero-shot', {}).get(k, nan):.3f}"
                                                       for k in ("seen", "held out")),
        "CLIP R@1 (i→t / t→i)": " / ".join(f"{got.get('recall', {}).get(k, nan):.3f}"
                                           for k in ("image→text R@1", "text→image R@1")),
        "masked colour word on the shape (uniform)": f"{attention[0]:.2f} ({attention[1]:.2f})",
        "failed cells": "; ".join(failed) or "none",
        "seconds": round(seconds, 1),
    }


def table():
    """The notebook at the rates it ships with, at seeds 0-5: what it prints and asserts."""
    shipped = shipped_rates()
    rows = []
    for seed in SEEDS:
        rows.append(_row(seed, *_run(seed, shipped)))
        print(rows[-1], flush=True)
    return write_result("multimodal", {
        "title": "Notebook 14 over the development seeds 0-5: single- against dual-stream, CLIP, attention",
        "notes": NOTES,
        "rows": rows})


def main(parts=("rates", "table")):
    if "rates" in parts:
        path = write_rates(sweep())
    if "table" in parts:
        path = table()
    return path


if __name__ == "__main__":
    import sys

    print(main(sys.argv[1:] or ("rates", "table")))
