"""Every notebook's claims at its shipped seed and at 5 others: which assertions hold at every seed, and the
range of each number its prose quotes.

Each notebook is run top to bottom, its grading cells left out (bench.common.run_notebook_variant), with its
`SEED = 0` line replaced by `SEED = s` for s = 0 ... 5. SEED seeds everything random in a notebook: its data,
its draws and its weights. Every top-level `assert` is recorded instead of stopping the run (an IPython AST
transformer wraps each one in try/except), so one failed claim does not hide the ones after it. NUMBERS names,
per notebook, the expressions whose values the prose quotes; they are read at the end of each run.

Each assertion of the form `a < b` or `a > b` (or a chain of them) also records its margin, b - a or a - b,
at every seed. The prose quotes what holds over these runs (mean ± standard deviation, or "at k of N seeds"), and
an assertion stays only where its mean margin over the development seeds is at least KEEP_AT (3) standard
deviations of that margin; a weaker claim is printed as a hedged sentence. Anything else (`==`, `all(...)`, an `and`
of comparisons) has no margin: write one comparison per assert where it is a measured quantity. A claim that fails
is rewritten, never re-seeded.

    python -m bench claims                          every notebook in NUMBERS
    BENCH_CLAIMS=08_sentence_embeddings python -m bench claims     only those (comma-separated)

Each notebook's table is written to bench/results/claims_<notebook>.json (one file each, so notebooks can be
rerun one at a time), and RESULTS.md is rebuilt.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from bench.common import run_notebook_variant, write_result

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "course" / "source"
SEEDS = range(6)  # the development seeds: the prose was written from these
# An assertion stays in a notebook where its margin over the development seeds is at least this many standard
# deviations of that margin (a claim that held by less is printed as a hedged sentence instead).
KEEP_AT = 3
# And seeds nobody chose, drawn at random on every run (printed and recorded): where an assertion or a quoted number
# holds at these is the claim's real test. BENCH_FRESH_SEEDS sets how many (at least 4).
FRESH_SEEDS = max(4, int(os.environ.get("BENCH_FRESH_SEEDS", "4")))


def fresh_seeds(count: int = FRESH_SEEDS) -> list[int]:
    """`count` seeds drawn from the operating system's randomness, none of them a development seed."""
    import secrets

    drawn = set()
    while len(drawn) < count:
        seed = 1000 + secrets.randbelow(10 ** 6)
        if seed not in SEEDS:
            drawn.add(seed)
    return sorted(drawn)

# Per notebook: {what the prose quotes: a Python expression evaluated at the end of the run}.
NUMBERS: dict[str, dict[str, str]] = {
    "01_word_vectors": {
        "random vectors: Spearman, mean of 5 draws": 'results["random (5 seeds)"]["similarity"]',
        "random vectors: Spearman, one draw, largest |rho|": 'max(abs(s["similarity"]) for s in random_scores)',
        "PPMI + SVD: Spearman": 'results["PPMI + SVD"]["similarity"]',
        "PPMI + SVD: gender analogies": 'results["PPMI + SVD"]["gender"]',
        "SGNS: Spearman": 'results["skip-gram (SGNS)"]["similarity"]',
        "SGNS: worst analogy group": 'min(results["skip-gram (SGNS)"][g] for g in data.ANALOGIES)',
        "SGNS: offset cosine man -> woman": "mean_offset_cosine(gender_pairs)",
        "SGNS: offset cosine country -> capital": "mean_offset_cosine(capital_pairs)",
        "SGNS: offset cosine random pairs": "mean_offset_cosine(random_pairs)",
        "CBOW: Spearman": 'results["CBOW"]["similarity"]',
        "CBOW: gender analogies": 'results["CBOW"]["gender"]',
        "GloVe: Spearman": 'results["GloVe"]["similarity"]',
        "GloVe: gender analogies": 'results["GloVe"]["gender"]',
        "Python docs: expected partners found (of 5)": "found",
        "bank = a shore + b lender: explained": "explained",
        "bank = a shore + b lender: smaller weight": "min(a, b)",
    },
    "02_language_models_elmo": {
        "4-gram held-out perplexity": 'ngram_perplexity["4-gram"]',
        "5-gram - 4-gram perplexity": 'ngram_perplexity["5-gram"] - ngram_perplexity["4-gram"]',
        "interpolated 5-gram perplexity": 'ngram_perplexity["interpolated 5-gram"]',
        "trigram P(madrid | lived in)": 'trigram_probs[sentence.index("madrid") - 1]',
        "LSTM forward perplexity": 'neural["forward_ppl"]',
        "LSTM backward perplexity": 'neural["backward_ppl"]',
        "best n-gram - LSTM forward perplexity": 'best_ngram - neural["forward_ppl"]',
        "trigram - LSTM forward perplexity": 'ngram_perplexity["3-gram"] - neural["forward_ppl"]',
        "LSTM P(madrid | ...)": "lstm_probs[madrid]",
        "|forward - backward| perplexity": 'abs(neural["forward_ppl"] - neural["backward_ppl"])',
        "right-to-left trigram - backward LSTM perplexity": 'backward_trigram - neural["backward_ppl"]',
        "ELMo NN sense accuracy, worst word and side": 'min(table[w, "ELMo (mix of all layers)", s][2] for w in data.synthetic.SENSES for s in ("left", "right"))',
        "forward half, right side: NN accuracy, best word": 'max(table[w, "forward half, top layer", "right"][2] for w in data.synthetic.SENSES)',
        "backward half, right side: NN accuracy, worst word": 'min(table[w, "backward half, top layer", "right"][2] for w in data.synthetic.SENSES)',
        "ELMo nearest neighbours: contexts right (of 8)": "correct",
        "bank sense classifier: ELMo accuracy": "elmo_accuracy",
        "bank sense classifier: static accuracy": "static_accuracy",
        "bank sense classifier: weight of layer 0": "mix.normalised_weights()[0]",
    },
    "03_attention": {
        "self-weight with random W^Q, W^K": "self_weight_qk",
        "d_k = 1024: mean largest softmax weight, raw": 'rows[-1]["max_raw"]',
        "d_k = 1024: mean largest softmax weight, scaled": 'rows[-1]["max_scaled"]',
        "12 attention-only layers: cosine between positions after 3": 'curves["attention only"][3]',
        "residual: largest cosine between positions": 'max(curves["with residual"])',
        "pre-LN: largest cosine between positions": 'max(curves["with residual and LayerNorm (pre-LN)"])',
    },
    "04_bert": {
        "MLM: word-frequency baseline (nats)": "unigram_entropy",
        "MLM: held-out loss after 400 steps (nats)": 'final["val_mlm_loss"]',
        "MLM: held-out accuracy": 'final["val_mlm_accuracy"]',
        "NSP: held-out accuracy": 'final["val_nsp_accuracy"]',
        "unseen words: pre-trained, mean of 3 runs": "np.mean(pre)",
        "unseen words: from scratch, mean of 3 runs": "np.mean(scratch)",
        "unseen words: worst pre-trained - best scratch": "min(pre) - max(scratch)",
        "seen words: pre-trained, mean of 3 runs": 'np.mean(final_accuracy["pre-trained", "test_seen"])',
        "seen words: from scratch, mean of 3 runs": 'np.mean(final_accuracy["from scratch", "test_seen"])',
        "New York: largest total variation of a marginal": "max(distance.values())",
        "New York: tiny BERT's mass on real cities": "independent[is_real].sum()",
    },
    "05_gpt": {
        "validation loss (nats per character)": "final_val",
        "bigram - tiny GPT (nats)": 'baselines["bigram"] - final_val',
        "perplexity: tiny GPT (characters)": "math.exp(final_val)",
        "perplexity: bigram (characters)": 'math.exp(baselines["bigram"])',
        "top-p 0.9: fewest candidates": "kept_top_p.min()",
        "top-p 0.9: most candidates": "kept_top_p.max()",
        "distinct 8-grams: greedy": 'repetition["greedy"]',
        "distinct 8-grams: tau = 1.5": 'repetition["τ = 1.5"]',
    },
    "06_bart_and_friends": {
        "validation loss after 400 steps": 'history.last("val_loss")',
        "edit distance: copy the input": 'mean_scores["copy the input"]',
        "edit distance: tiny BART": 'mean_scores["tiny BART"]',
        "tiny BART / copy (share of the damage left)": 'mean_scores["tiny BART"] / mean_scores["copy the input"]',
        "exactly restored": "np.mean(exact)",
        "XLNet: left context seen": "left",
        "XLNet: right context seen": "right",
        "T5: target length / input length": "len(t5_targets) / len(tokens)",
    },
    "07_inside_a_real_bert": {
        "part of speech: probe accuracy at layer 0": "pos_accuracy[0]",
        "part of speech: best contextual layer": "pos_accuracy[1:].max()",
        "part of speech: last layer": "pos_accuracy[-1]",
        "bigram shift: accuracy at layer 0 (mean of 3 splits)": "shift_accuracy[0]",
        "bigram shift: best contextual layer (mean of 3 splits)": "shift_accuracy[1:].max()",
        "bigram shift: which layer is best": "shift_accuracy.argmax()",
        "bigram shift: last layer (mean of 3 splits)": "shift_accuracy[-1]",
        "bigram shift: last layer, best of 3 splits": "shift_runs[:, -1].max()",
        "bigram shift: largest std over the 3 splits": "shift_spread.max()",
        "self-similarity at layer 0, one sense": "self_mono[0]",
        "most 'previous' head: its share": 'shares["previous"].max()',
        "control, split by occurrence: lowest control accuracy (both probes, every layer)":
            'min(control_runs["occurrence", n][1].min() for n in probes)',
        "control, split by occurrence: linear probe, task at layer 0": 'control_runs["occurrence", "linear"][0][0]',
        "control, split by occurrence: MLP probe, task at layer 0": 'control_runs["occurrence", "MLP"][0][0]',
        "control, split by occurrence: lowest task accuracy, layers 1-6":
            'min(control_runs["occurrence", n][0][1:].min() for n in probes)',
        "control, split by word: lowest control accuracy": 'min(control_runs["word", n][1].min() for n in probes)',
        "control, split by word: highest control accuracy": 'max(control_runs["word", n][1].max() for n in probes)',
        "control, split by word: lowest task accuracy, layers 1-5":
            'min(control_runs["word", n][0][1:6].min() for n in probes)',
        "control, split by word: lowest selectivity, layers 1-5":
            'min(control_runs["word", n][2][1:6].min() for n in probes)',
        "k directions, k=8: linear task": 'squeezed["linear"][2, 0]',
        "k directions, k=8: linear control": 'squeezed["linear"][2, 1]',
        "k directions, k=8: linear selectivity": 'squeezed["linear"][2, 0] - squeezed["linear"][2, 1]',
        "k directions, k=8: MLP task": 'squeezed["MLP"][2, 0]',
        "k directions, k=8: MLP control": 'squeezed["MLP"][2, 1]',
        "k directions: largest selectivity gap, linear - MLP":
            '((squeezed["linear"][:, 0] - squeezed["linear"][:, 1]) - (squeezed["MLP"][:, 0] - squeezed["MLP"][:, 1])).max()',
        "k directions, k=2: lowest task accuracy of the two probes": 'min(squeezed[n][0, 0] for n in probes)',
        "k directions, k=2: highest task accuracy of the two probes": 'max(squeezed[n][0, 0] for n in probes)',
        "embryology: word class at step 0, lowest layer": 'embryo["word class"][0].min()',
        "embryology: word class at step 0, highest layer": 'embryo["word class"][0].max()',
        "embryology: word class at step 100, lowest layer": 'embryo["word class"][step_index[100]].min()',
        "embryology: word class at step 100, highest layer": 'embryo["word class"][step_index[100]].max()',
        "embryology: word class from step 300 on, lowest": 'embryo["word class"][step_index[300]:].min()',
        "embryology: sentiment up to step 300, lowest": 'embryo["sentiment"][:step_index[300] + 1].min()',
        "embryology: sentiment up to step 300, highest": 'embryo["sentiment"][:step_index[300] + 1].max()',
        "embryology: sentiment at step 1000, lowest layer": 'embryo["sentiment"][step_index[1000]].min()',
        "embryology: sentiment at step 1000, highest layer": 'embryo["sentiment"][step_index[1000]].max()',
        "embryology: sentiment at step 2000, lowest layer": 'embryo["sentiment"][-1].min()',
        "embryology: function words restored at step 100": 'restored["function words"][step_index[100]]',
        "embryology: city names restored at step 100": 'restored["city names"][step_index[100]]',
        "embryology: city names restored at step 2000": 'restored["city names"][-1]',
        "embryology: nouns restored at step 2000": 'restored["nouns"][-1]',
        "embryology: adjectives restored at step 2000": 'restored["adjectives"][-1]',
    },
    "08_sentence_embeddings": {
        "bootstrap: half-width of a 95% interval, made-up model, 240 pairs": "(noisy_high - noisy_low) / 2",
        "tiny BERT last layer: [CLS] minus mean pooling (Spearman)": "tiny_rho['cls'][-1] - tiny_rho['mean'][-1]",
        "tiny BERT anisotropy, embedding layer": "tiny_anisotropy[0]",
        "tiny BERT anisotropy, first layer": "tiny_anisotropy[1]",
        "tiny BERT anisotropy, last layer": "tiny_anisotropy[-1]",
        "MiniLM anisotropy on reviews, last layer": "anisotropy_by_layer['MiniLM'][-1]",
        "tiny BERT effective dimension": "tiny_effective",
        "tiny BERT: variance share of the top 3 directions": "spectra['tiny BERT (MLM), reviews'][:3].sum()",
        "MiniLM / tiny BERT effective dimension (reviews)": "1 / np.sum(spectra['MiniLM, reviews'] ** 2) / tiny_effective",
        "pairs' anisotropy, raw": "raw_anisotropy",
        "pairs' anisotropy, whitened": "white_anisotropy",
        "Spearman, tiny BERT mean pooling": "tiny_mean",
        "Spearman, tiny BERT whitened": "review_spearman(white_a, white_b)",
        "whitening: the k with the best Spearman": "ks[int(np.argmax(whitened_by_k))]",
        "MiniLM: Spearman raw minus whitened": "minilm_raw - minilm_white",
        "InfoNCE at tau = 3.16 minus log 8": "losses[-1] - np.log(8)",
        "unsupervised SimCSE: smallest gain of 3 training seeds": "(unsup_spearman - tiny_mean).min()",
        "unsupervised SimCSE: largest gain of 3 training seeds": "(unsup_spearman - tiny_mean).max()",
        "unsupervised SimCSE: mean gain": "unsup_spearman.mean() - tiny_mean",
        "unsupervised SimCSE: training seeds (of 3) whose gain interval excludes 0": "sum(low > 0 for low, _ in gain_intervals)",
        "supervised minus unsupervised SimCSE (mean Spearman)": "sup_spearman.mean() - unsup_spearman.mean()",
        "table: whitened minus unsupervised SimCSE (Spearman)": "rows['tiny BERT (MLM), mean, whitened'][1] - rows['tiny BERT + unsupervised SimCSE, mean'][1]",
        "table: MiniLM minus supervised SimCSE (Spearman)": "rows['MiniLM, mean'][1] - rows['tiny BERT + supervised SimCSE, mean'][1]",
        "retrieval accuracy, tiny BERT mean": "rows['tiny BERT (MLM), mean'][3]",
        "retrieval accuracy, tiny BERT whitened": "rows['tiny BERT (MLM), mean, whitened'][3]",
        "retrieval accuracy, unsupervised SimCSE": "rows['tiny BERT + unsupervised SimCSE, mean'][3]",
        "retrieval accuracy, supervised SimCSE": "rows['tiny BERT + supervised SimCSE, mean'][3]",
        "retrieval accuracy, MiniLM": "rows['MiniLM, mean'][3]",
        "BERT-flow: Spearman": "flow_spearman",
        "BERT-flow minus whitening (Spearman)": "flow_spearman - review_spearman(white_a, white_b)",
        "BERT-flow minus raw mean pooling (Spearman)": "flow_spearman - tiny_mean",
        "BERT-flow: anisotropy of the pairs' sentences": "flow_anisotropy",
        "ConSERT cutoff minus SimCSE, same training seed": "family_spearman['ConSERT (token cutoff)'] - unsup_spearman[0]",
        "ConSERT shuffle minus SimCSE, same training seed": "family_spearman['ConSERT (token shuffle)'] - unsup_spearman[0]",
        "ConSERT cutoff minus the MLM model": "family_spearman['ConSERT (token cutoff)'] - tiny_mean",
        "ConSERT shuffle minus the MLM model": "family_spearman['ConSERT (token shuffle)'] - tiny_mean",
        "BYOL minus SimCSE, same training seed": "family_spearman['BYOL (predictor + EMA)'] - unsup_spearman[0]",
        "BYOL minus the MLM model": "family_spearman['BYOL (predictor + EMA)'] - tiny_mean",
        "BYOL without predictor and EMA minus the MLM model": "family_spearman['BYOL without both'] - tiny_mean",
        "BYOL: final loss": "byol_geometry['BYOL (predictor + EMA)'][0]",
        "BYOL without both: final loss": "byol_geometry['BYOL without both'][0]",
        "BYOL: anisotropy of projections": "byol_geometry['BYOL (predictor + EMA)'][1]",
        "BYOL without both: anisotropy of projections": "byol_geometry['BYOL without both'][1]",
        "BYOL: anisotropy of sentence vectors": "byol_geometry['BYOL (predictor + EMA)'][2]",
        "BYOL without both: anisotropy of sentence vectors": "byol_geometry['BYOL without both'][2]",
        "PromptBERT untrained minus the MLM model's mean pooling": "family_spearman['PromptBERT (untrained)'] - tiny_mean",
        "PromptBERT: chosen template (index of 3)": "templates.index(best_template[0])",
        "PromptBERT: chosen on dev with denoising (1 = yes)": "float(best_template[1])",
    },
    "09_peft": {
        "full fine-tuning: accuracy (mean of seen and unseen, 3 seeds)": "table['full fine-tuning']['both']",
        "LoRA r=1: accuracy": "table['LoRA (r=1)']['both']",
        "full minus LoRA r=1": "table['full fine-tuning']['both'] - table['LoRA (r=1)']['both']",
        "full minus head only": "table['full fine-tuning']['both'] - table['head only']['both']",
        "full minus BitFit": "table['full fine-tuning']['both'] - table['BitFit']['both']",
        "full minus adapters": "table['full fine-tuning']['both'] - table['adapters (m=8)']['both']",
        "LoRA r=4 minus LoRA r=1": "table['LoRA (r=4)']['both'] - table['LoRA (r=1)']['both']",
        "full minus prefix": "table['full fine-tuning']['both'] - table['prefix (P=8)']['both']",
        "prefix with MLP minus prefix": "table['prefix, MLP (P=8)']['both'] - table['prefix (P=8)']['both']",
        "LoRA r=1 minus prompt tuning": "table['LoRA (r=1)']['both'] - table['prompt tuning (P=8)']['both']",
        "update energy in the top 4 directions": "top4",
        "random matrix energy in the top 4 directions": "random_top4",
        "rank-0 truncation minus full (first seed)": "with_rank_accuracy[0] - full_first",
        "rank-1 truncation minus full": "with_rank_accuracy[1] - full_first",
        "rank-2 truncation minus full": "with_rank_accuracy[2] - full_first",
        "rank-4 truncation minus full": "with_rank_accuracy[4] - full_first",
        "rank-8 truncation minus full": "with_rank_accuracy[8] - full_first",
        "rank-16 truncation minus full": "with_rank_accuracy[16] - full_first",
        "smallest rank kept within 0.02 of full": "min(r for r in ranks if with_rank_accuracy[r] >= full_first - 0.02)",
        "served: sentiment accuracy (unseen)": "served['sentiment']",
        "served: acceptability through the sentiment files": "wrong_adapter",
        "prompt P=4, random start (first seed)": "live_prompts['random']",
        "prompt P=4, vocabulary start (first seed)": "live_prompts['vocabulary']",
        "prompt P=4, class-word start (first seed)": "live_prompts['class words']",
        "prompt P=4: best start minus LoRA r=1 (first seed)": "max(live_prompts.values()) - lora_first_seed",
        "unified view: largest gap, gate form vs prefix layer": "gate_gap",
        "unified view: lambda at the start, layer 0": "start_lams[0].mean()",
        "unified view: lambda at the start, layer 1": "start_lams[1].mean()",
        "unified view: lambda trained, layer 0": "trained_lams[0].mean()",
        "unified view: lambda trained, layer 1": "trained_lams[1].mean()",
        "unified view: largest head mean of lambda, trained": "max(l.mean(0).max() for l in trained_lams)",
        "unified view: mean |lambda change| per token and head, layer 0": "np.abs(trained_lams[0] - start_lams[0]).mean()",
        "unified view: mean |lambda change| per token and head, layer 1": "np.abs(trained_lams[1] - start_lams[1]).mean()",
        "unified view: smallest head mean of lambda, trained": "min(l.mean(0).min() for l in trained_lams)",
        "parallel adapter: accuracy": "table['parallel adapter (FFN, s=4)']['both']",
        "full minus parallel adapter": "full['both'] - table['parallel adapter (FFN, s=4)']['both']",
        "parallel adapter minus adapters": "table['parallel adapter (FFN, s=4)']['both'] - table['adapters (m=8)']['both']",
        "parallel adapter minus LoRA r=1": "table['parallel adapter (FFN, s=4)']['both'] - table['LoRA (r=1)']['both']",
        "int8 base: frozen matrix bytes / float32": "matrix_bytes['int8'] / matrix_bytes['float32']",
        "int8 base: encoder bytes / float32": "encoder_bytes['int8'] / encoder_bytes['float32']",
        "int8 base: worst weight error / matrix absmax": "worst",
        "LoRA r=1 on int8 minus on float32": "lora_int8['both'] - lora_fp32['both']",
        "LoRA r=1 on int8: training time / on float32": "lora_int8['seconds'] / lora_fp32['seconds']",
    },
    "10_prompting": {
        "zero-shot cloze, plain pattern": "zero_shot_accuracy[PATTERN]",
        "zero-shot: best pattern - worst (points)": "100 * (max(zero_shot_accuracy.values()) - min(zero_shot_accuracy.values()))",
        "zero-shot: blank after - blank before (points)": '100 * (zero_shot_accuracy[PATTERN] - zero_shot_accuracy["it was [MASK] . {x}"])',
        "majority-of-sentences reader": "ceiling",
        "reader - zero-shot cloze (points)": "100 * (ceiling - zero_shot_accuracy[PATTERN])",
        "P(positive) at a tie, last sentence positive": "levels[True][0.5]",
        "P(positive) at a tie, last sentence negative": "levels[False][0.5]",
        "prompt-based, K=4": 'mean_std("prompt", 4)[0]',
        "prompt-based, K=8": 'mean_std("prompt", 8)[0]',
        "prompt-based, K=16": 'mean_std("prompt", 16)[0]',
        "prompt-based, K=32": 'mean_std("prompt", 32)[0]',
        "new head, K=4": 'mean_std("head", 4)[0]',
        "new head, K=8": 'mean_std("head", 8)[0]',
        "new head, K=16": 'mean_std("head", 16)[0]',
        "new head, K=32": 'mean_std("head", 32)[0]',
        "prompt - head at K=8 (points)": '100 * (mean_std("prompt", 8)[0] - mean_std("head", 8)[0])',
        "prompt - head at K=32 (points)": '100 * (mean_std("prompt", 32)[0] - mean_std("head", 32)[0])',
        "prompt K=4 - zero-shot (points)": '100 * (mean_std("prompt", 4)[0] - zero_shot_accuracy[PATTERN])',
        "prompt K=8 - zero-shot (points)": '100 * (mean_std("prompt", 8)[0] - zero_shot_accuracy[PATTERN])',
        "prompt K=32 - zero-shot (points)": '100 * (mean_std("prompt", 32)[0] - zero_shot_accuracy[PATTERN])',
        "prompt-based std over draws, K=4 (points)": '100 * mean_std("prompt", 4)[1]',
        "prompt-based std over draws, K=32 (points)": '100 * mean_std("prompt", 32)[1]',
        "found label words, zero-shot": "np.mean(searched)",
        "found - hand-picked label words (points)": "100 * (np.mean(searched) - zero_shot_accuracy[PATTERN])",
        "template search, one draw: dev-chosen - hand-written, zero-shot test (points)":
            "100 * (zero_shot_on(test_texts, test_labels, chosen_template) - zero_shot_accuracy[PATTERN])",
        "ProtoVerb, K=4": 'proto_mean("ProtoVerb", 4)',
        "ProtoVerb, K=8": 'proto_mean("ProtoVerb", 8)',
        "ProtoVerb, K=16": 'proto_mean("ProtoVerb", 16)',
        "ProtoVerb, K=32": 'proto_mean("ProtoVerb", 32)',
        "ProtoVerb - zero-shot, K=8 (points)": '100 * (proto_mean("ProtoVerb", 8) - zero_shot_accuracy[PATTERN])',
        "ProtoVerb - zero-shot, closest up to K=16 (points)":
            '100 * (max(proto_mean("ProtoVerb", K) for K in (4, 8, 16)) - zero_shot_accuracy[PATTERN])',
        "ProtoVerb - zero-shot, K=32 (points)": '100 * (proto_mean("ProtoVerb", 32) - zero_shot_accuracy[PATTERN])',
        "ProtoVerb K=32 - K=4 (points)": '100 * (proto_mean("ProtoVerb", 32) - proto_mean("ProtoVerb", 4))',
        "ProtoVerb + words - ProtoVerb, smallest over K (points)":
            '100 * min(proto_mean("ProtoVerb + hand-picked words", K) - proto_mean("ProtoVerb", K) for K in SHOTS)',
        "ProtoVerb + words - ProtoVerb, largest over K (points)":
            '100 * max(proto_mean("ProtoVerb + hand-picked words", K) - proto_mean("ProtoVerb", K) for K in SHOTS)',
        "ProtoVerb + words - zero-shot, closest up to K=16 (points)":
            '100 * (max(proto_mean("ProtoVerb + hand-picked words", K) for K in (4, 8, 16)) - zero_shot_accuracy[PATTERN])',
        "ProtoVerb + words - zero-shot, K=32 (points)":
            '100 * (proto_mean("ProtoVerb + hand-picked words", 32) - zero_shot_accuracy[PATTERN])',
        "ProtoVerb - found label words, K=8 (points)": '100 * (proto_mean("ProtoVerb", 8) - np.mean(searched))',
        "ProtoVerb - linear probe, K=8 (points)": '100 * (proto_mean("ProtoVerb", 8) - np.mean(probing[8]))',
        "K=8 demonstrations: none": 'np.mean(with_demos["none"])',
        "K=8 demonstrations: random": 'np.mean(with_demos["random"])',
        "K=8 demonstrations: similar": 'np.mean(with_demos["similar"])',
        "PET": 'np.mean(pet["pet"])',
        "PET: patterns' mean": 'np.mean(pet["patterns"])',
        "PET: pattern chosen on dev": 'np.mean(pet["pattern chosen on dev"])',
        "PET - patterns' mean (points)": '100 * (np.mean(pet["pet"]) - np.mean(pet["patterns"]))',
        "PET - pattern chosen on dev (points)": '100 * (np.mean(pet["pet"]) - np.mean(pet["pattern chosen on dev"]))',
        "self-training: round 0": "self_training[:, 0].mean()",
        "self-training: last round": "self_training[:, -1].mean()",
        "self-training: last - round 0 (points)": "100 * (self_training[:, -1].mean() - self_training[:, 0].mean())",
        "self-training: draws of 5 where it went up": "int(np.sum(self_training[:, -1] > self_training[:, 0]))",
        "self-training: largest change in one draw (points)": "100 * np.abs(self_training[:, -1] - self_training[:, 0]).max()",
        "global top-k: largest share of one class": "max(max(imbalance), 1 - min(imbalance))",
        "prompt tuning, random start": 'np.mean(spot["random start"])',
        "prompt tuning, SPoT start": 'np.mean(spot["start from the source task (SPoT)"])',
        "SPoT - random start (points)": '100 * (np.mean(spot["start from the source task (SPoT)"]) - np.mean(spot["random start"]))',
        "SPoT ahead of random start in draws of 5": 'int(np.sum(np.array(spot["start from the source task (SPoT)"]) > np.array(spot["random start"])))',
        "random-start prompt tuning - prompt-based K=8 (points)": '100 * (np.mean(spot["random start"]) - mean_std("prompt", 8)[0])',
        "intermediate task - prompt-based K=8 (points)": '100 * (np.mean(intermediate) - mean_std("prompt", 8)[0])',
        "probe, K=4": "np.mean(probing[4])",
        "probe, K=8": "np.mean(probing[8])",
        "probe, K=16": "np.mean(probing[16])",
        "probe, K=32": "np.mean(probing[32])",
        "probe K=8 - zero-shot (points)": "100 * (np.mean(probing[8]) - zero_shot_accuracy[PATTERN])",
        "probe K=32 - zero-shot (points)": "100 * (np.mean(probing[32]) - zero_shot_accuracy[PATTERN])",
        "probe K=32 - probe K=4 (points)": "100 * (np.mean(probing[32]) - np.mean(probing[4]))",
        "probe K=32 - prompt-based K=32 (points)": '100 * (np.mean(probing[32]) - mean_std("prompt", 32)[0])',
    },
    "11_in_context_learning": {
        "maps shown in training": "len(train_maps)",
        "test episodes drawn again (map shown in training)": "redrawn",
        "training loss, last 50 steps": "np.mean(history.loss[-50:])",
        "k-shot accuracy, k=0": "accuracy[0]",
        "k-shot accuracy, k=1": "accuracy[1]",
        "k-shot accuracy, k=4": "accuracy[4]",
        "k-shot accuracy, k=8": "accuracy[8]",
        "k-shot accuracy, k=15": "accuracy[15]",
        "largest |accuracy - perfect copier| over k": "max(abs(accuracy[k] - ideal[k]) for k in SHOTS)",
        "attention-only: copied loss at the start": "start",
        "attention-only: copied loss at the end": "end",
        "attention-only: phase change (step)": "phase_step",
        "attention-only: share of the fall within 200 steps": "steepest",
        "attention-only: best induction score": 'score("induction", induction_head)',
        "attention-only: best previous-token score": 'score("previous", previous_head)',
        "attention-only: induction head's layer": "induction_head[0]",
        "attention-only: previous-token head's layer": "previous_head[0]",
        "copied loss, intact": "intact",
        "copied loss without the induction head - intact": "ablated[induction_head] - intact",
        "copied loss without the previous-token head - intact": "ablated[previous_head] - intact",
        "copied loss without layer 0": "without_layer[0]",
        "copied loss without layer 1": "without_layer[1]",
        "first-block loss (a guess)": "first",
        "share of the copying lost without the weaker layer": "(min(without_layer) - intact) / (first - intact)",
        "GPT: best induction score (letters only)": "gpt_scores[gpt_head]",
        "GPT: heads scoring above 0.2": "len(induction_heads)",
        "GPT: 8-shot without all its induction heads": "without_all",
        "GPT: 8-shot, largest cost of one head (points)": "100 * (accuracy[8] - min(without.values()))",
        "GPT: 8-shot, smallest cost of one induction head (points)": "100 * min(accuracy[8] - without[h] for h in induction_heads)",
        "8-shot over 10 orderings: max - min (points)": "100 * (orders.max() - orders.min())",
        "random labels: highest accuracy over k": "max(random_labels.values())",
    },
    "12_efficiency": {
        "Transformer-XL: loss lower with memory (nats)": "gain",
        "Transformer-XL: recomputing's arithmetic / the memory's": "work",
        "Transformer-XL: validation loss with memory": 'readings["memory carried"]["loss"]',
        "distillation: labels only, mean accuracy": 'mean["labels only"]',
        "distillation: teacher's hard labels, mean accuracy": 'mean["teacher\'s hard labels"]',
        "distillation: distilled, mean accuracy": 'mean["distilled"]',
        "distillation: teacher, mean accuracy": 'mean["teacher"]',
        "distillation: distilled - labels only": 'mean["distilled"] - mean["labels only"]',
        "distillation: teacher - distilled": 'mean["teacher"] - mean["distilled"]',
        "distillation: student arithmetic / teacher arithmetic": 'arithmetic["student"] / arithmetic["teacher"]',
        "distillation: student time / teacher time": 'times["student"] / times["teacher"]',
        "pruning: global, accuracy at 0% sparsity": 'pruned["global"][0]',
        "pruning: global, accuracy at 20% - at 0%": 'pruned["global"][SPARSITY.index(0.2)] - pruned["global"][0]',
        "pruning: global, accuracy at 60% - at 0%": 'pruned["global"][SPARSITY.index(0.6)] - pruned["global"][0]',
        "pruning: global, accuracy at 80%": 'pruned["global"][SPARSITY.index(0.8)]',
        "pruning: global, accuracy at 95%": 'pruned["global"][-1]',
        "heads: how many of 8 can go before accuracy first falls a point": "can_go",
        "heads: most of 8 removed with accuracy within a point (any crossing)":
            "max(n for n, value in enumerate(remaining) if value >= intact - 0.01)",
        "heads: accuracy with all 8 removed": "remaining[-1]",
        "ALBERT-base: time / BERT-base time": "ratio_time",
        "ALBERT-base: arithmetic / BERT-base arithmetic": "ratio_flops",
        "intermediate: distilled + cosine, mean accuracy": 'mean["distilled + cosine"]',
        "intermediate: TinyBERT, mean accuracy": 'mean["TinyBERT"]',
        "intermediate: cosine - distilled": 'mean["distilled + cosine"] - mean["distilled"]',
        "intermediate: TinyBERT - distilled": 'mean["TinyBERT"] - mean["distilled"]',
        "intermediate: cosine - distilled, lowest training seed": 'min(per_seed["distilled + cosine"])',
        "intermediate: cosine - distilled, highest training seed": 'max(per_seed["distilled + cosine"])',
        "intermediate: TinyBERT - distilled, lowest training seed": 'min(per_seed["TinyBERT"])',
        "intermediate: TinyBERT - distilled, highest training seed": 'max(per_seed["TinyBERT"])',
        "intermediate: agreement with the teacher, distilled": 'np.mean(agreement["distilled"])',
        "intermediate: agreement with the teacher, cosine": 'np.mean(agreement["distilled + cosine"])',
        "intermediate: agreement with the teacher, TinyBERT": 'np.mean(agreement["TinyBERT"])',
        "intermediate: stage 1 end/start, embedding (worst run)": 'copied["embedding"]',
        "intermediate: stage 1 end/start, hidden (worst run)": 'copied["hidden"]',
        "intermediate: stage 1 end/start, attention (worst run)": 'copied["attention"]',
        "Q-BERT: most sensitive block, measured": "by_measure[0]",
        "Q-BERT: most sensitive block, by Hessian": "by_hessian[0]",
        "Q-BERT: same order of all 4 blocks (1 = yes)": "by_measure == by_hessian",
        "Q-BERT: 2 bits, most sensitive block's dev loss increase": "top_measured",
        "Q-BERT: 2 bits, largest increase of the other blocks": "np.sort(sensitivity[2])[-2]",
        "Q-BERT: 3 bits, most sensitive block's dev loss increase": "max(sensitivity[3])",
        "Q-BERT: 3 bits, largest increase of the other blocks": "np.sort(sensitivity[3])[-2]",
        "Q-BERT: 4 bits, largest dev loss increase": "max(sensitivity[4])",
        "Q-BERT: 8 bits, largest |dev loss change|": "max(abs(v) for v in sensitivity[8])",
        "Q-BERT: top block's omega": "top_omega",
        "Q-BERT: other blocks' largest omega": "np.sort(omega)[-2]",
        "Q-BERT: uniform 3 bits, test loss increase": "uniform",
        "Q-BERT: Hessian-guided 4-3-3-2, test loss increase": "guided",
        "Q-BERT: reversed, test loss increase": "reverse",
        "Q-BERT: guided / uniform": "guided / uniform",
    },
    "13_beyond_one_language": {
        "accuracy on A, lower of the two section-1 models": 'min(transfer[k]["A"] for k in ("A and B", "A only"))',
        "A only: zero-shot on B": 'transfer["A only"]["B"]',
        "A and B: zero-shot on B": 'transfer["A and B"]["B"]',
        "A and B: p@1 rotated": 'aligned["A and B"][0]',
        "A and B: p@1 without map": 'aligned["A and B"][1]',
        "A only: p@1 rotated": 'aligned["A only"][0]',
        "A only: p@1 without map": 'aligned["A only"][1]',
        # The two variants the notebook quotes from bench transfer, pre-trained here as bench/transfer.py does
        # (the first label trains each; the later ones read what it stored in `transfer`).
        "no anchors: zero-shot on B":
            'transfer.setdefault("no anchors", zero_shot(pretrain_languages("no anchors"), "no anchors"))["B"]',
        "reversed: zero-shot on B":
            'transfer.setdefault("reversed", zero_shot(pretrain_languages("reversed"), "reversed"))["B"]',
        "no anchors - A and B: zero-shot on B": 'transfer["no anchors"]["B"] - transfer["A and B"]["B"]',
        "reversed - no anchors: zero-shot on B": 'transfer["reversed"]["B"] - transfer["no anchors"]["B"]',
        "reversed - A and B: zero-shot on B": 'transfer["reversed"]["B"] - transfer["A and B"]["B"]',
        "TLM: zero-shot on B": 'transfer["A and B, then TLM"]["B"]',
        "TLM: p@1 rotated": 'aligned["A and B, then TLM"][0]',
        "TLM - A and B: zero-shot on B": 'transfer["A and B, then TLM"]["B"] - transfer["A and B"]["B"]',
        "TLM - A and B: p@1 rotated": 'aligned["A and B, then TLM"][0] - aligned["A and B"][0]',
        "facts never stated: mean of the 3 models": "np.mean([unseen for _, unseen in probe.values()])",
        "facts never stated: highest of the 3 models": "max(unseen for _, unseen in probe.values())",
        "control: true facts known": 'probe["control: shuffled facts"][0]',
        "entity masking: stated facts known": 'probe["entity masking"][0]',
        "token masking: stated facts known": 'probe["token masking"][0]',
        "entity - token masking: stated facts": 'probe["entity masking"][0] - probe["token masking"][0]',
        # The one-[MASK] probe, "<person> was born in [MASK]" (either token of the right city counts), read after
        # the two-[MASK] one from the same three models: it draws no random numbers.
        "one [MASK]: entity masking, stated facts": 'probe1["entity masking"][0]',
        "one [MASK]: token masking, stated facts": 'probe1["token masking"][0]',
        "one [MASK]: entity - token masking, stated facts": 'probe1["entity masking"][0] - probe1["token masking"][0]',
        "two [MASK]s - one [MASK]: entity - token gap":
            '(probe["entity masking"][0] - probe["token masking"][0]) - '
            '(probe1["entity masking"][0] - probe1["token masking"][0])',
        "one [MASK]: control, true facts known": 'probe1["control: shuffled facts"][0]',
        "one [MASK]: facts never stated, mean of the 3 models": "np.mean([unseen for _, unseen in probe1.values()])",
        "one [MASK]: facts never stated, highest of the 3 models": "max(unseen for _, unseen in probe1.values())",
        "one [MASK]: token masking writes the first token": 'halves["token masking"][0]',
        "one [MASK]: entity masking writes the first token": 'halves["entity masking"][0]',
        "clinic: general model": 'domains["general model"]',
        "clinic: general + DAPT": 'domains["general + DAPT"]',
        "clinic: DAPT - general": 'domains["general + DAPT"] - domains["general model"]',
        "clinic: general + general text": 'domains["general + 200 steps of general text"]',
        "clinic: DAPT - general text (the control)":
            'domains["general + DAPT"] - domains["general + 200 steps of general text"]',
        "DNA: pre-trained on A": 'dna["pre-trained on language A"]',
        "DNA: from scratch": 'dna["from scratch"]',
        "DNA: pre-trained - scratch": 'dna["pre-trained on language A"] - dna["from scratch"]',
        "strategy: all at once": 'strategies["all at once"]',
        "strategy: gradual unfreezing": 'strategies["gradual unfreezing"]',
        "strategy: discriminative rates": 'strategies["discriminative rates"]',
        "strategy: both": 'strategies["both"]',
        "strategy: head on layer 1": 'strategies["head on layer 1"]',
        "strategy: multi-task": 'strategies["multi-task"]',
        "strategies: best - worst of the first five": "max(strategies[n] for n in STRATEGIES[:5]) - "
                                                      "min(strategies[n] for n in STRATEGIES[:5])",
        "gradual unfreezing - all at once": 'strategies["gradual unfreezing"] - strategies["all at once"]',
        "multi-task - all at once": 'strategies["multi-task"] - strategies["all at once"]',
        "strategy: frozen encoder": 'strategies["frozen encoder"]',
        "frozen encoder - all at once": 'strategies["frozen encoder"] - strategies["all at once"]',
    },
    "14_text_and_images": {
        "single-stream: fill, seen pairs": 'single_scores["seen"]',
        "single-stream: fill, held-out pairs": 'single_scores["held out"]',
        "single-stream: fill, blank picture": 'single_scores["blank picture"]',
        "single-stream: matching": 'single_scores["matching"]',
        "dual-stream: fill, seen pairs": 'dual_scores["seen"]',
        "dual-stream: fill, held-out pairs": 'dual_scores["held out"]',
        "dual-stream: fill, blank picture": 'dual_scores["blank picture"]',
        "dual-stream: matching": 'dual_scores["matching"]',
        "dual - single: matching": 'dual_scores["matching"] - single_scores["matching"]',
        "dual - single: fill, held-out pairs": 'dual_scores["held out"] - single_scores["held out"]',
        "parameters: |single - dual| / single": 'abs(sizes["single"] - sizes["dual"]) / sizes["single"]',
        "CLIP: zero-shot, seen pairs": 'zero_shot_scores["seen"]',
        "CLIP: zero-shot, held-out pairs": 'zero_shot_scores["held out"]',
        "CLIP: R@1 image to text": 'recall["image→text R@1"]',
        "CLIP: R@1 text to image": 'recall["text→image R@1"]',
        "CLIP: lowest recall (R@1 and R@5, both ways)": "min(recall.values())",
        "masked colour word: attention on the shape, last layer": "shares[len(single.blocks) - 1][0]",
        "shape's share of the picture": "shares[len(single.blocks) - 1][1]",
        "masked colour word: attention on the shape - uniform": "shares[len(single.blocks) - 1][0] - "
                                                                 "shares[len(single.blocks) - 1][1]",
        "learning rate: pre-training (chosen on the dev split)": "PRETRAIN_LR",
        "learning rate: CLIP (chosen on the dev split)": "CLIP_LR",
    },
    "15_from_gpt3_to_chatgpt": {
        "SFT: trained tasks correct": 'sft_accuracy["trained tasks"]',
        "SFT: held-out tasks correct": 'sft_accuracy["held-out tasks"]',
        "SFT: unseen family correct": 'sft_accuracy["unseen family"]',
        "SFT: short and correct": "float(np.mean(start == 2))",
        "reward model: held-out pairs ranked by the rule": "rm_accuracy",
        "reward model: right-vs-wrong pairs ranked right, prompts the SFT model writes wrong":
            "judged_where_written_wrong",
        "reward model: right-vs-wrong pairs ranked right, prompts the SFT model writes right":
            "judged_where_written_right",
        "right-vs-wrong pairs whose prompt the SFT model writes wrong": "int((about_correctness & ~writes_right).sum())",
        "DPO beta=1: win rate against the SFT model": 'dpo_results[1.0]["win rate"]',
        "DPO beta=0.1: log-ratio of the rejected answers": 'dpo_results[0.1]["log-ratio rejected"]',
        "DPO beta=10: log-ratio of the rejected answers": 'dpo_results[10.0]["log-ratio rejected"]',
        "DPO: held-out correct, beta=10 - beta=0.1": 'dpo_results[10.0]["held-out correct"] - '
                                                     'dpo_results[0.1]["held-out correct"]',
        "PPO: win rate against the SFT model": 'ppo_result["win rate"]',
        "PPO - DPO beta=1: win rate": 'ppo_result["win rate"] - dpo_results[1.0]["win rate"]',
        "PPO: reward-model score, last 5 steps - first": 'np.mean([r["score"] for r in ppo_steps[-5:]]) - '
                                                         'ppo_steps[0]["score"]',
        "PPO: answers ending in the chatter": 'chatty["PPO"]',
        "PPO: reward model scores the long form higher": "prefers_long",
        "PPO time / DPO time (beta=1)": 'ppo_steps[-1]["seconds"] / dpo_seconds[1.0]',
    },
}

# Put first in the notebook: top-level asserts are recorded in _CLAIMS and the run goes on. Asserts inside a
# function or class are left alone (they guard the function's own use, not a claim about the results).
RECORDER = r'''
import ast as _ast

_CLAIMS = []
_ORDER = {_ast.Lt: "<", _ast.LtE: "<", _ast.Gt: ">", _ast.GtE: ">"}


def _margin_source(test):
    """How far an assertion held, in its own units: for `a < b` it is b - a, for `a > b` a - b, for a chain the
    smaller gap. "None" (no margin) for anything but a chain of <, <=, > and >=."""
    if not isinstance(test, _ast.Compare) or not all(type(op) in _ORDER for op in test.ops):
        return "None"
    sides = [_ast.unparse(side) for side in [test.left, *test.comparators]]
    gaps = [f"float(({b}) - ({a}))" if _ORDER[type(op)] == "<" else f"float(({a}) - ({b}))"
            for op, a, b in zip(test.ops, sides, sides[1:])]
    return gaps[0] if len(gaps) == 1 else f"min({', '.join(gaps)})"


def _margin(gap):
    try:
        return gap()
    except Exception:  # a side that cannot be evaluated again, or is not a number
        return None


class _RecordAsserts(_ast.NodeTransformer):
    """assert test, msg  ->  try: assert test, msg / except AssertionError: record failed / else: record held,
    each with the assertion's margin (its sides evaluated again)."""

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef

    def visit_Assert(self, node):
        text, margin = _ast.unparse(node.test), f"_margin(lambda: {_margin_source(node.test)})"
        handler = _ast.parse(f"_CLAIMS.append(({text!r}, False, str(_error)[:200], {margin}))").body
        held = _ast.parse(f"_CLAIMS.append(({text!r}, True, '', {margin}))").body
        wrapped = _ast.Try(body=[node], handlers=[_ast.ExceptHandler(
            type=_ast.Name("AssertionError", _ast.Load()), name="_error", body=handler)], orelse=held, finalbody=[])
        return _ast.copy_location(wrapped, node)


get_ipython().ast_transformers.append(_RecordAsserts())
'''

REPORT = r'''
import json as _json


def _number(expression):
    try:
        return float(eval(expression))
    except Exception as error:  # a number the run did not reach
        return repr(error)[:120]


print(_json.dumps({"claims": _CLAIMS, "numbers": {label: _number(e) for label, e in NUMBERS.items()}}))
'''


def notebook_path(name: str) -> Path:
    return SOURCE / name / f"{name}.ipynb"


def run_seed(name: str, seed: int) -> dict:
    """One run: {"claims": [(assert text, held, message)], "numbers": {label: value}, "errors", "seconds"}."""
    report = f"NUMBERS = {NUMBERS[name]!r}\n{REPORT}"
    got, errors, seconds = run_notebook_variant(notebook_path(name), seed, report, prelude=RECORDER)
    return {"seed": seed, **got, "errors": errors, "seconds": round(seconds, 1)}


def margins(run: dict) -> dict[str, float | None]:
    """Each assertion's margin in one run (the smallest, where it ran more than once; None where it has none)."""
    out: dict[str, float | None] = {}
    for text, _, _, *margin in run.get("claims", []):
        if not margin:  # a run recorded before margins were: three fields
            continue
        if text not in out or (margin[0] is not None and (out[text] is None or margin[0] < out[text])):
            out[text] = margin[0]
    return out


def margin_summary(values: list) -> tuple[str, float | None]:
    """The margin over the development seeds: ("0.042 ± 0.011, 3.8 sd", 3.8). An assertion stays in a notebook
    only where the mean margin is at least KEEP_AT standard deviations."""
    numeric = np.array([v for v in values if v is not None], dtype=float)
    if not values:
        return "margin not recorded", None
    if len(numeric) < 2 or len(numeric) < len(values):
        return "no margin (not a comparison of numbers at every seed)", None
    mean, sd = numeric.mean(), numeric.std(ddof=1)
    if sd <= 1e-9 * max(abs(mean), 1.0):  # the same at every seed (up to rounding)
        return f"margin {mean:.3g} at every seed", (np.inf if mean > 0 else -np.inf)
    return f"margin {mean:.3g} ± {sd:.3g}, {mean / sd:.1f} sd", round(float(mean / sd), 2)


def rows(runs: list[dict]) -> list[dict]:
    """One row per assertion (where it held: at the development seeds and at the fresh ones; its margin over the
    development seeds in standard deviations; the seeds where it failed) and per quoted number (mean and standard
    deviation over the development seeds, its range, and the values at the fresh seeds)."""
    out = []
    dev = [r for r in runs if r["seed"] in SEEDS]
    fresh = [r for r in runs if r["seed"] not in SEEDS]
    failed_at: dict[str, set] = {}
    made_at: dict[str, set] = {}  # an assertion inside an `if` is not made at every seed: that is no pass
    for run in runs:
        for text, held, *_ in run.get("claims", []):
            failed_at.setdefault(text, set())
            made_at.setdefault(text, set()).add(run["seed"])
            if not held:
                failed_at[text].add(run["seed"])
    dev_margins = [margins(r) for r in dev]
    for text, seeds in failed_at.items():
        held = [(len(group) - len(seeds & {r["seed"] for r in group}) - len({r["seed"] for r in group} - made_at[text]),
                 len(group)) for group in (dev, fresh)]
        summary = f"{held[0][0]} of {held[0][1]} development seeds" + (f", {held[1][0]} of {held[1][1]} fresh" if fresh else "")
        unmade = sorted(r["seed"] for r in runs if r["seed"] not in made_at[text])
        if unmade:
            summary += f" (not made at seeds {', '.join(map(str, unmade))}: a condition before it was false)"
        margin, in_sd = margin_summary([m[text] for m in dev_margins if text in m])
        out.append({"claim": f"`assert {text}`", "holds at": f"{summary}; {margin}", "margin (sd)": in_sd,
                    "fails at seeds": ", ".join(map(str, sorted(seeds))) or "none"})
    for label in runs[0].get("numbers", {}) if runs else []:
        values = [r["numbers"].get(label) for r in dev]
        numeric = np.array([v for v in values if isinstance(v, float)])
        summary = (f"{numeric.mean():.3f} ± {numeric.std(ddof=1) if len(numeric) > 1 else 0:.3f} "
                   f"(N={len(numeric)}; {numeric.min():.3f} to {numeric.max():.3f})" if len(numeric) else "not reached")
        at_fresh = [r["numbers"].get(label) for r in fresh]
        if fresh:
            summary += "; fresh: " + ", ".join(f"{v:.3f}" if isinstance(v, float) else "not reached" for v in at_fresh)
        out.append({"claim": label, "holds at": summary,
                    "fails at seeds": ", ".join(str(r["seed"]) for r in runs
                                                if not isinstance(r["numbers"].get(label), float)) or "none"})
    errors = {r["seed"]: r["errors"] for r in runs if r["errors"]}
    for seed, messages in errors.items():
        out.append({"claim": "a cell raised (not an assert)", "holds at": "; ".join(messages)[:200],
                    "fails at seeds": str(seed)})
    return out


def main():
    only = [n for n in os.environ.get("BENCH_CLAIMS", "").split(",") if n]
    unknown = [n for n in only if n not in NUMBERS]
    if unknown:
        raise SystemExit(f"BENCH_CLAIMS names {unknown}; choose from {list(NUMBERS)}")
    written = []
    fresh = fresh_seeds()
    print(f"[claims] fresh seeds this run: {fresh}", flush=True)
    for name in only or NUMBERS:
        runs = []
        for seed in [*SEEDS, *fresh]:
            runs.append(run_seed(name, seed))
            print({k: runs[-1][k] for k in ("seed", "errors", "seconds")}, flush=True)
        written.append(write_result(f"claims_{name}", {
            "title": (f"Notebook {name[:2]}'s claims over development seeds {SEEDS[0]}-{SEEDS[-1]} and "
                      f"{len(fresh)} fresh seeds (bench claims)"),
            "notes": ("The notebook run top to bottom (grading cells left out) with SEED = 0 replaced by each seed; "
                      "every top-level assert recorded without stopping the run, and the numbers its prose quotes "
                      "read at the end. Seed 0 is the one the notebook ships with; the fresh seeds "
                      f"({', '.join(map(str, fresh))}) were drawn at random for this run. A number: mean ± standard "
                      "deviation over the development seeds (N), their range, then its value at each fresh seed. An "
                      "assertion's margin (how far it held: b - a for a < b) over the development seeds, and that "
                      f"mean in standard deviations: under {KEEP_AT}, the notebook prints the claim instead of "
                      "asserting it."),
            "fresh seeds": fresh,
            "rows": rows(runs),
            "runs": runs,
        }))
    return written


if __name__ == "__main__":
    print(json.dumps([str(p) for p in main()]))
