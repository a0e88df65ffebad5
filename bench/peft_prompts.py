"""Prompt tuning's length and start (Lester, Al-Rfou and Constant 2021) on notebook 09's tiny BERT.

Every combination of prompt length P in {1, 4, 16} and start in {random, vocabulary, class words}
(plmcourse.nn.peft.soft_prompt_start) on notebook 09's acceptability task, seeds 0-5 (the task's
labelled words, the head's initialisation, the prompt's draw and the batches). The 110-word
vocabulary has no word for "well formed", so the class words are stand-ins, "poor" and "perfect".
(Notebook 09's second task, sentiment, has natural class words, "terrible" and "great", but a trial
at seed 0 gave 1.000 dev and test accuracy at all nine settings: nothing there to tell apart.) Notebook 09's recipe: frozen encoder, 300 steps of 16, AdamW at
3e-2 (the rate bench/peft.py picked for P = 8 on other seeds; the same for every cell of the grid).

Each run is scored on a dev split (200 seen-word and 200 unseen-word sentences drawn after the test
sentences, from the same words) and on the test split (the notebook's 400 + 400). The best setting
is chosen by mean dev accuracy; the test column is read only for the report.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from tqdm.auto import tqdm

from bench.common import write_result
from plmcourse import data
from plmcourse import nn as pnn
from plmcourse.nn import peft
from plmcourse.pretrained import load_checkpoint
from plmcourse.train import train

LENGTHS = (1, 4, 16)
INITS = peft.PROMPT_INITS  # ("random", "vocabulary", "class words")
SEEDS = range(6)
STEPS = 300
LR = 3e-2
N_TEST, N_DEV = 400, 200
TASKS = {  # name -> (task maker, class words for labels 0 and 1)
    "acceptability": (data.review_acceptability_task, ("poor", "perfect")),
}


def task_with_dev(maker, seed):
    """The task as notebook 09 draws it, plus "dev_seen" and "dev_unseen": 200 sentences each, drawn after
    the 400 test sentences from the same words (so the train and test_seen sets are the notebook's own)."""
    task = maker(seed=seed)
    longer = maker(seed=seed, n_test=N_TEST + N_DEV)
    assert longer["train"] == task["train"] and longer["test_seen"][:N_TEST] == task["test_seen"]
    return {**task, "dev_seen": longer["test_seen"][N_TEST:], "dev_unseen": longer["test_unseen"][N_TEST:]}


def encode(tokenizer, examples, device="cpu"):
    ids, mask = pnn.bert_batch(tokenizer, [" ".join(words) for words, _ in examples], device)
    return ids, mask, torch.tensor([label for _, label in examples], device=device)


def accuracy(model, examples):
    ids, mask, labels = examples
    with torch.no_grad():
        return (model(ids, attention_mask=mask).argmax(-1) == labels).float().mean().item()


def prompt_tune(checkpoint, task, n_prompt, init, class_words, seed, steps=STEPS, lr=LR, device="cpu"):
    """Notebook 09's prompt tuning with a prompt of `n_prompt` vectors started by `init`; returns the model."""
    tokenizer = checkpoint.tokenizer
    ids, mask, labels = encode(tokenizer, task["train"], device)
    torch.manual_seed(seed)
    model = pnn.BertForSequenceClassification(copy.deepcopy(checkpoint.model.bert), n_classes=2, dropout=0.0)
    model = model.to(device)
    peft.freeze(model.bert)
    class_ids = [tokenizer.stoi[w] for w in class_words]
    start = peft.soft_prompt_start(model.bert, n_prompt, init, class_ids=class_ids, seed=seed)
    model.bert = peft.soft_prompt(model.bert, start)
    picker = np.random.default_rng(seed)

    def get_batch(step):
        rows = torch.as_tensor(picker.integers(0, len(ids), 16), device=device)
        return ids[rows], mask[rows], labels[rows]

    def loss_fn(model, batch):
        x, m, y = batch
        return pnn.cross_entropy(model(x, attention_mask=m), y)

    with pnn.one_cpu_thread(device):
        train(model, get_batch, loss_fn, steps=steps, lr=lr, progress=False)
    return model


def grid_rows(checkpoint):
    rows = []
    cells = [(t, P, init, s) for t in TASKS for P in LENGTHS for init in INITS for s in SEEDS]
    for task_name, P, init, seed in tqdm(cells, desc="prompt tuning grid"):
        maker, class_words = TASKS[task_name]
        task = task_with_dev(maker, seed)
        model = prompt_tune(checkpoint, task, P, init, class_words, seed)
        scores = {split: accuracy(model, encode(checkpoint.tokenizer, task[split]))
                  for split in ("dev_seen", "dev_unseen", "test_seen", "test_unseen")}
        rows.append({"task": task_name, "P": P, "init": init, "seed": seed,
                     "dev": round((scores["dev_seen"] + scores["dev_unseen"]) / 2, 4),
                     "test": round((scores["test_seen"] + scores["test_unseen"]) / 2, 4),
                     **{k: round(v, 4) for k, v in scores.items()}})
    return rows


def summary_rows(rows):
    """Per task, length and start: mean dev and test over the seeds, the test's standard deviation over them, and
    which is chosen on dev."""
    out = []
    for task_name in TASKS:
        mine = [r for r in rows if r["task"] == task_name]
        table = []
        for P in LENGTHS:
            for init in INITS:
                cell = [r for r in mine if r["P"] == P and r["init"] == init]
                test = [r["test"] for r in cell]
                table.append({"task": task_name, "P": P, "init": init, "seeds": len(cell),
                              "dev (mean)": round(float(np.mean([r["dev"] for r in cell])), 3),
                              "test (mean)": round(float(np.mean(test)), 3),
                              "test (sd)": round(float(np.std(test, ddof=1)), 3), "chosen on dev": ""})
        best = max(table, key=lambda row: row["dev (mean)"])
        best["chosen on dev"] = "yes"
        out += table
    return out


def gap_rows(rows):
    """Per task: a comparison's per-seed test differences (mean and standard deviation over the seeds, and at how
    many seeds it is positive), the seed as the pairing."""
    def test(task, P, init):
        return np.array([r["test"] for r in rows if r["task"] == task and r["P"] == P and r["init"] == init])

    out = []
    for task_name in TASKS:
        comparisons = {}
        for P in LENGTHS:
            comparisons[f"class words - vocabulary, P={P}"] = test(task_name, P, "class words") - test(task_name, P, "vocabulary")
            comparisons[f"vocabulary - random, P={P}"] = test(task_name, P, "vocabulary") - test(task_name, P, "random")
        for init in INITS:
            comparisons[f"P=16 - P=1, {init}"] = test(task_name, 16, init) - test(task_name, 1, init)
            comparisons[f"P=4 - P=1, {init}"] = test(task_name, 4, init) - test(task_name, 1, init)
        for label, diff in comparisons.items():
            out.append({"task": task_name, "comparison": label, "mean": round(float(diff.mean()), 3),
                        "sd": round(float(diff.std(ddof=1)), 3), "positive at": f"{int((diff > 0).sum())} of {len(diff)}"})
    return out


def main():
    checkpoint = load_checkpoint("tiny-bert", device="cpu")
    rows = grid_rows(checkpoint)
    return write_result("peft_prompts", {
        "title": "Prompt tuning: prompt length and where the prompt starts (notebook 09, Lester et al. 2021)",
        "notes": ("Tiny BERT frozen, a new 2-way head on [CLS], P soft prompt vectors after [CLS]; 300 steps of 16, "
                  "AdamW 3e-2 for every setting; seeds 0-5. dev / test: mean of seen-word and unseen-word accuracy "
                  "on 200 + 200 dev and 400 + 400 test sentences. The setting is chosen on dev; test is only "
                  "reported. Acceptability's class words are stand-ins ('poor', 'perfect'): the vocabulary has "
                  "no word for 'well formed'. One thread per run. Per-seed runs and the paired differences "
                  "between settings ('gaps') are in the json; notebook 09 shows them."),
        "rows": summary_rows(rows),
        "gaps": gap_rows(rows),
        "runs": rows,
    })


if __name__ == "__main__":
    print(main())
