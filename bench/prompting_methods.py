"""Three methods of the lecture that notebook 10 cannot afford to run in full, at SEED = 0-5.

For each SEED, the notebook's own data (review_overall_task(seed=SEED, n_train=256)), its draws SEED..SEED+4
of K = 8 labelled reviews per class (and 8 more per class as a dev split), its pattern, label words, steps
and learning rate, so that the rows stand beside the notebook's numbers:

- LM-BFF's template search (Gao, Fisch and Chen 2021): the masked LM fills the template words of four
  shapes around the label word (plmcourse.nn.prompting.generate_templates, 48 candidates); the 4 that label
  the 16 training reviews best zero-shot are each fine-tuned as the notebook fine-tunes its pattern, and the
  dev split picks one. Test accuracy against the notebook's manual "{x} it was [MASK] .".
- STraTA (Vu et al. 2021): 1,500 NLI pairs (entailment, contradiction) generated from sentences of the
  unlabelled reviews (task_augmentation_pairs, a rule-based stand-in for their T5 generator), the MLM's encoder
  trained on them with a 2-way head (300 steps at 1e-3: chosen on 300 held-out generated pairs), then the
  notebook's class-balanced self-training (self_train) from that model, against
  the same self-training from the pre-trained MLM.
- The prototypical verbalizer (Cui et al. 2022) on the frozen MLM at K = 4-32: the notebook runs it live;
  here the same numbers at every SEED, beside the manual verbalizer zero-shot.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from tqdm.auto import tqdm

from bench.common import write_result

PATTERN, SHAPES = "{x} it was [MASK] .", ("{x} [T] [MASK] .", "{x} [T] [T] [MASK] .", "{x} [T] [T] [T] [MASK] .",
                                         "[T] [T] [MASK] . {x}")
STEPS, LR, K, KEEP = 30, 3e-4, 8, 4  # the notebook's steps and rate; K = 8; fine-tune the 4 best candidates
AUX_PAIRS, AUX_HELD_OUT, AUX_STEPS, AUX_LR = 1500, 300, 300, 1e-3  # chosen on held-out generated pairs


def accuracy(log_p, labels):
    return (log_p.argmax(-1) == labels).float().mean().item()


def one_seed(SEED, device="cpu"):
    from plmcourse import data
    from plmcourse import nn as pnn
    from plmcourse.nn import prompting as pr
    from plmcourse.pretrained import load_checkpoint

    torch.manual_seed(SEED)
    checkpoint = load_checkpoint("tiny-bert-reviews", device)
    mlm, tok = checkpoint.model, checkpoint.tokenizer
    task = data.review_overall_task(seed=SEED, n_train=256)
    words = [[tok.stoi["terrible"]], [tok.stoi["great"]]]
    test_texts = [w for w, _ in task["test"]]
    test_labels = torch.tensor([y for _, y in task["test"]], device=device)
    test = pr.encode_pattern(tok, test_texts, PATTERN, device=device)
    draws = range(SEED, SEED + 5)

    def finetuned(texts, labels, seed, pattern, start=mlm):
        torch.manual_seed(seed)
        inputs = pr.encode_pattern(tok, texts, pattern, device=device)
        return pr.finetune_cloze(copy.deepcopy(start), inputs, labels, words, steps=STEPS, lr=LR, seed=seed)

    def score(model, texts, labels, pattern):
        with torch.no_grad():
            inputs = pr.encode_pattern(tok, texts, pattern, device=device)
            return accuracy(pr.cloze_log_probs(model, inputs, words), labels)

    row = {"SEED": SEED}
    with pnn.one_cpu_thread(device):
        # LM-BFF's template search
        manual, searched, manual_zero, searched_zero, chosen = [], [], [], [], []
        for seed in draws:
            texts, labels = pr.few_shot_draw(task, K, seed, device=device)
            dev_texts, dev_labels = pr.few_shot_draw(task, K, seed, "dev", device=device)
            candidates = [c for shape in SHAPES for c in pr.generate_templates(mlm, tok, texts, labels, words, shape)]
            ranked = sorted(candidates, key=lambda c: (-score(mlm, texts, labels, c[0]), -c[1]))  # zero-shot on train
            tuned = {c: finetuned(texts, labels, seed, c) for c, _ in ranked[:KEEP]}
            best = max(tuned, key=lambda c: score(tuned[c], dev_texts, dev_labels, c))  # the dev split chooses
            searched.append(score(tuned[best], test_texts, test_labels, best))
            manual.append(score(finetuned(texts, labels, seed, PATTERN), test_texts, test_labels, PATTERN))
            searched_zero.append(score(mlm, test_texts, test_labels, best))
            manual_zero.append(score(mlm, test_texts, test_labels, PATTERN))
            chosen.append(best)
        row["templates: manual, fine-tuned"] = float(np.mean(manual))
        row["templates: searched, fine-tuned"] = float(np.mean(searched))
        row["templates: searched - manual (points)"] = 100 * float(np.mean(searched) - np.mean(manual))
        row["templates: draws where searched > manual"] = int(np.sum(np.array(searched) > np.array(manual)))
        row["templates: manual, zero-shot"] = float(np.mean(manual_zero))
        row["templates: searched, zero-shot"] = float(np.mean(searched_zero))
        row["templates: chosen"] = chosen

        # STraTA: task augmentation, then self-training
        pairs = pr.task_augmentation_pairs(task["unlabelled"], data.reviews.POSITIVE, data.reviews.NEGATIVE,
                                           data.reviews.TOPICS, AUX_PAIRS + AUX_HELD_OUT, seed=SEED)
        premises, hypotheses, nli_labels = zip(*pairs)
        nli = pr.encode_pattern(tok, list(premises), "{x} [SEP] {demos}", device=device, demonstrations=hypotheses)
        nli_labels = torch.tensor(nli_labels, device=device)
        augmented = copy.deepcopy(mlm)
        torch.manual_seed(SEED)
        classifier = pnn.BertForSequenceClassification(augmented.bert, 2).to(device)  # shares the MLM's encoder
        train_part = tuple(t[:AUX_PAIRS] for t in nli)
        pr.finetune_head(classifier, train_part, nli_labels[:AUX_PAIRS], steps=AUX_STEPS, lr=AUX_LR, batch_size=32,
                        seed=SEED)
        with torch.no_grad():
            held_out = tuple(t[AUX_PAIRS:] for t in nli)
            row["STraTA: NLI accuracy on held-out generated pairs"] = accuracy(pr.predict_head(classifier, held_out),
                                                                             nli_labels[AUX_PAIRS:])
            after = pr.cloze_log_probs(augmented.eval(), test, words)
            row["STraTA: zero-shot cloze after the NLI task"] = accuracy(after, test_labels)
            row["zero-shot cloze, pre-trained"] = accuracy(pr.cloze_log_probs(mlm, test, words), test_labels)
        unlabelled = pr.encode_pattern(tok, task["unlabelled"], PATTERN, device=device)
        runs = {"self-training": [], "STraTA": []}
        for seed in draws:
            texts, labels = pr.few_shot_draw(task, K, seed, device=device)
            for name, start in (("self-training", mlm), ("STraTA", augmented)):
                runs[name].append(pr.self_train(start, tok, texts, labels, task["unlabelled"], unlabelled, test,
                                                test_labels, PATTERN, words, steps=STEPS, lr=LR, seed=seed))
        for name, acc in runs.items():
            acc = np.array(acc)  # (draws, rounds)
            row[f"{name}: round 0"] = float(acc[:, 0].mean())
            row[f"{name}: last round"] = float(acc[:, -1].mean())
        st, strata = np.array(runs["self-training"]), np.array(runs["STraTA"])
        row["STraTA - self-training, last round (points)"] = 100 * float(strata[:, -1].mean() - st[:, -1].mean())
        row["STraTA - self-training, round 0 (points)"] = 100 * float(strata[:, 0].mean() - st[:, 0].mean())
        row["STraTA: draws ahead of self-training (last round)"] = int(np.sum(strata[:, -1] > st[:, -1]))

        # the prototypical verbalizer on the frozen MLM
        with torch.no_grad():
            test_h = pr.mask_hidden(mlm, test)
            manual_log_p = pr.cloze_log_probs(mlm, test, words)
        for shots in (4, 8, 16, 32):
            proto, both = [], []
            for seed in draws:
                texts, labels = pr.few_shot_draw(task, shots, seed, device=device)
                with torch.no_grad():
                    h = pr.mask_hidden(mlm, pr.encode_pattern(tok, texts, PATTERN, device=device))
                verb = pr.train_protoverb(h, labels, seed=seed)
                with torch.no_grad():
                    log_p = verb(test_h)
                proto.append(accuracy(log_p, test_labels))
                both.append(accuracy(log_p + manual_log_p, test_labels))
            row[f"ProtoVerb, K={shots}"] = float(np.mean(proto))
            row[f"ProtoVerb + manual, K={shots}"] = float(np.mean(both))
    return row


def main():
    rows = []
    for SEED in tqdm(range(6), desc="SEED"):
        rows.append(one_seed(SEED))
        print(rows[-1], flush=True)
    summary = {}
    for key in rows[0]:
        values = [r[key] for r in rows]
        if all(isinstance(v, (int, float)) for v in values) and key != "SEED":
            summary[key] = {"min": float(np.min(values)), "max": float(np.max(values)), "mean": float(np.mean(values))}
    return write_result("prompting_methods", {
        "title": "Notebook 10: template search, STraTA and ProtoVerb at SEED = 0-5",
        "notes": "Each row: the notebook's task at that SEED, its draws SEED..SEED+4 at K = 8 (ProtoVerb: K = 4-32), "
                 "means over the 5 draws. Template search: 48 candidates from the MLM, 4 fine-tuned, the dev split "
                 "(8 more per class) chooses. STraTA: 1,500 generated NLI pairs, 300 steps with a 2-way head, then "
                 "3 rounds of class-balanced self-training. Run on one CPU thread.",
        "rows": rows, "summary": summary})


# ----------------------------------------------------------------------------
# STraTA's control: does NLI on generated pairs give self-training a better start than any sentence-level
# sentiment task would? The notebook's section 7 intermediate task (512 labelled lone sentences, the cloze,
# 100 steps) is that control: it teaches the target's own skill sentence by sentence, with labels.

SOURCE_TRAIN, SOURCE_STEPS = 512, 100  # section 7's intermediate task, as the notebook runs it


def strata_control_seed(SEED, device="cpu"):
    """At one SEED, the notebook's draws SEED..SEED+4 at K = 8: 3 rounds of self-training from the pre-trained
    MLM, from STraTA's NLI-trained one, and from the MLM after section 7's intermediate task. Test accuracy
    after round 0 and after the last round, means over the draws, and each draw's last round."""
    from plmcourse import data
    from plmcourse import nn as pnn
    from plmcourse.nn import prompting as pr
    from plmcourse.pretrained import load_checkpoint

    torch.manual_seed(SEED)
    checkpoint = load_checkpoint("tiny-bert-reviews", device)
    mlm, tok = checkpoint.model, checkpoint.tokenizer
    task = data.review_overall_task(seed=SEED, n_train=256)
    words = [[tok.stoi["terrible"]], [tok.stoi["great"]]]
    test = pr.encode_pattern(tok, [w for w, _ in task["test"]], PATTERN, device=device)
    test_labels = torch.tensor([y for _, y in task["test"]], device=device)
    with pnn.one_cpu_thread(device):
        # STraTA's start: the encoder trained on the generated NLI pairs (as one_seed does)
        pairs = pr.task_augmentation_pairs(task["unlabelled"], data.reviews.POSITIVE, data.reviews.NEGATIVE,
                                           data.reviews.TOPICS, AUX_PAIRS + AUX_HELD_OUT, seed=SEED)
        premises, hypotheses, nli_labels = zip(*pairs)
        nli = pr.encode_pattern(tok, list(premises), "{x} [SEP] {demos}", device=device, demonstrations=hypotheses)
        augmented = copy.deepcopy(mlm)
        torch.manual_seed(SEED)
        classifier = pnn.BertForSequenceClassification(augmented.bert, 2).to(device)  # shares the MLM's encoder
        pr.finetune_head(classifier, tuple(t[:AUX_PAIRS] for t in nli),
                         torch.tensor(nli_labels[:AUX_PAIRS], device=device), steps=AUX_STEPS, lr=AUX_LR,
                         batch_size=32, seed=SEED)
        # The control's start: section 7's intermediate task, exactly as the notebook trains it
        source = data.review_sentiment_task(seed=SEED, n_train=SOURCE_TRAIN)
        source_inputs = pr.encode_pattern(tok, [w for w, _ in source["train"]], PATTERN, device=device)
        source_labels = torch.tensor([y for _, y in source["train"]], device=device)
        torch.manual_seed(SEED)
        intermediate = pr.finetune_cloze(copy.deepcopy(mlm), source_inputs, source_labels, words,
                                         steps=SOURCE_STEPS, lr=LR, seed=SEED)
        unlabelled = pr.encode_pattern(tok, task["unlabelled"], PATTERN, device=device)
        starts = {"self-training": mlm, "STraTA": augmented.eval(), "intermediate task": intermediate.eval()}
        runs = {name: [] for name in starts}
        for seed in range(SEED, SEED + 5):
            texts, labels = pr.few_shot_draw(task, K, seed, device=device)
            for name, start in starts.items():
                runs[name].append(pr.self_train(start, tok, texts, labels, task["unlabelled"], unlabelled, test,
                                                test_labels, PATTERN, words, steps=STEPS, lr=LR, seed=seed))
    row = {"SEED": SEED}
    for name, acc in runs.items():
        acc = np.array(acc)  # (draws, rounds)
        row[f"{name}: round 0"] = float(acc[:, 0].mean())
        row[f"{name}: last round"] = float(acc[:, -1].mean())
        row[f"{name}: last round, each draw"] = acc[:, -1].tolist()
    return row


def strata_control(dev_seeds=range(6), fresh=None):
    """strata_control_seed at the development seeds and at fresh seeds drawn now (bench.claims.fresh_seeds)."""
    from bench.claims import fresh_seeds

    fresh = fresh_seeds() if fresh is None else list(fresh)
    print(f"[strata control] fresh seeds this run: {fresh}", flush=True)
    runs = []
    for SEED in tqdm([*dev_seeds, *fresh], desc="SEED"):
        runs.append({**strata_control_seed(SEED), "fresh": SEED in fresh})
        print(runs[-1], flush=True)
    return write_result("prompting_strata_control", {
        "title": "Notebook 10: STraTA against its control, an intermediate task on labelled sentences",
        "notes": "At each SEED (development 0-5, then fresh seeds drawn at random for this run), the notebook's task and "
                 "its draws SEED..SEED+4 at K = 8: the same 3 rounds of class-balanced self-training from three starts: "
                 "the pre-trained MLM; STraTA's (1,500 generated NLI pairs, 300 steps with a 2-way head); and section "
                 "7's intermediate task (512 labelled lone sentences through the cloze, 100 steps). Means over the 5 "
                 f"draws. Fresh seeds: {fresh}. Run on one CPU thread.",
        "fresh seeds": fresh, "rows": strata_rows(runs), "summary": strata_summary(runs), "runs": runs})


STARTS = ("self-training", "STraTA", "intermediate task")


def strata_rows(runs):
    """One row per SEED: each start's test accuracy after round 0 and after the last round, and the two gaps."""
    rows = []
    for run in runs:
        row = {"SEED": run["SEED"], "seeds": "fresh" if run["fresh"] else "development"}
        for start in STARTS:
            row[f"{start}: round 0 / last"] = f"{run[f'{start}: round 0']:.3f} / {run[f'{start}: last round']:.3f}"
        row["STraTA - intermediate task, last round (points)"] = round(
            100 * (run["STraTA: last round"] - run["intermediate task: last round"]), 1)
        row["intermediate task - self-training, last round (points)"] = round(
            100 * (run["intermediate task: last round"] - run["self-training: last round"]), 1)
        rows.append(row)
    return rows


def strata_summary(runs):
    """Each gap in points, mean ± sd over the development seeds, its values at the fresh seeds, and at how many
    seeds (and draws) it is positive."""
    gaps = {"STraTA - self-training": ("STraTA", "self-training"),
            "intermediate task - self-training": ("intermediate task", "self-training"),
            "STraTA - intermediate task": ("STraTA", "intermediate task")}
    out = []
    for label, (a, b) in gaps.items():
        for when in ("round 0", "last round"):
            gap = {f: [100 * (r[f"{a}: {when}"] - r[f"{b}: {when}"]) for r in runs if r["fresh"] == f] for f in (0, 1)}
            draws = [x - y for r in runs for x, y in zip(r[f"{a}: last round, each draw"], r[f"{b}: last round, each draw"])]
            out.append({"gap (points)": f"{label}, {when}",
                        "development seeds": f"{np.mean(gap[0]):+.1f} ± {np.std(gap[0], ddof=1):.1f} (N={len(gap[0])})",
                        "fresh seeds": ", ".join(f"{v:+.1f}" for v in gap[1]),
                        "positive at": f"{sum(v > 0 for v in gap[0] + gap[1])} of {len(runs)} seeds" + (
                            f", {sum(d > 0 for d in draws)} of {len(draws)} draws" if when == "last round" else "")})
    return out


if __name__ == "__main__":
    print(main())
