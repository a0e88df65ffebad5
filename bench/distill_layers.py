"""Intermediate-layer distillation where soft targets leave room (notebook 12).

In the notebook, a one-block student started from the pre-trained tiny BERT's first block and taught with
soft targets already matches its two-block teacher, so TinyBERT's layer losses and DistilBERT's cosine have
nothing left to add there. This benchmark asks whether they help where the student has more to learn: the
same student shape started from random weights (TinyBERT's own students start that way before their general
distillation). Same task, teacher, transfer set, 300 steps and losses as the notebook:

    labels only          the 16 labels, cross-entropy
    distilled            + soft targets on the transfer set (T = 2)
    distilled + cosine   + DistilBERT's cosine between the last hidden states
    TinyBERT             150 steps of embedding, hidden-state and attention-score MSE, then 150 distilled

Data seeds 0-5 (the notebook's SEED: labelled sentences, test sets, transfer set), 2 training seeds each
(5 * SEED and 5 * SEED + 1, the notebook's first two), so 12 runs per student.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from bench.common import write_result
from plmcourse import data
from plmcourse import nn as pnn
from plmcourse.nn.distillation import TinyBertLoss, bert_internals, cosine_loss, distillation_loss
from plmcourse.pretrained import load_checkpoint
from plmcourse.train import make_optimizer, train

DATA_SEEDS = range(6)
STUDENTS = ("labels only", "distilled", "distilled + cosine", "TinyBERT")


def task_for(seed, tokenizer):
    def encode(examples):
        ids, mask = pnn.bert_batch(tokenizer, [" ".join(words) for words, _ in examples], "cpu")
        return ids, mask, torch.tensor([label for _, label in examples])

    task = data.review_acceptability_task(seed=seed, n_train=16)
    held_out = {" ".join(words) for words, _ in task["test_seen"] + task["test_unseen"]}
    transfer = {}
    for other_seed in (seed + 101, seed + 102, seed + 103):  # as the notebook: other draws, labels thrown away
        other = data.review_acceptability_task(seed=other_seed, n_test=1000)
        for words, _ in other["test_seen"] + other["test_unseen"]:
            if " ".join(words) not in held_out:
                transfer[" ".join(words)] = (words, -1)
    return (encode(task["train"]), encode(task["test_seen"]), encode(task["test_unseen"]),
            encode(list(transfer.values())))


def fit(model, seed, labelled, transfer, teacher=None, cosine=False, steps=300, lr=3e-3, T=2.0):
    rng = np.random.default_rng(seed)
    ids, mask, labels = labelled
    if teacher is not None:
        with torch.no_grad():
            soft_l, soft_t = teacher(ids, attention_mask=mask), teacher(transfer[0], attention_mask=transfer[1])
            hidden_l = teacher.bert(ids, attention_mask=mask)[0]
            hidden_t = teacher.bert(transfer[0], attention_mask=transfer[1])[0]

    def forward(model, i, m):
        hidden, pooled = model.bert(i, attention_mask=m)
        return model.classifier(pooled), hidden

    def get_batch(step):
        return torch.as_tensor(rng.integers(0, len(ids), 16)), torch.as_tensor(rng.integers(0, len(transfer[0]), 16))

    def loss_fn(model, batch):
        rows, extra = batch
        logits, hidden = forward(model, ids[rows], mask[rows])
        if teacher is None:
            return pnn.cross_entropy(logits, labels[rows])
        logits_x, hidden_x = forward(model, transfer[0][extra], transfer[1][extra])
        loss = (distillation_loss(logits, soft_l[rows], labels[rows], T, alpha=0.5)
                + distillation_loss(logits_x, soft_t[extra], torch.zeros(len(extra), dtype=torch.long), T, alpha=1.0))
        if cosine:
            loss = loss + cosine_loss(hidden, hidden_l[rows], mask[rows]) + cosine_loss(
                hidden_x, hidden_t[extra], transfer[1][extra])
        return loss

    train(model, get_batch, loss_fn, steps=steps, lr=lr, optimizer=make_optimizer(model, lr), progress=False)
    return model.eval()


def fit_tinybert(model, seed, labelled, transfer, teacher, steps=150, lr=3e-3):
    rng = np.random.default_rng(seed)
    width = model.bert.config.d_model
    pair = torch.nn.ModuleDict({"student": model, "layers": TinyBertLoss(width, width, 1, 2)})

    def loss_fn(pair, rows):
        i, m = transfer[0][rows], transfer[1][rows]
        with torch.no_grad():
            target = bert_internals(teacher, i, m)
        return sum(pair["layers"](bert_internals(pair["student"], i, m), target, m).values())

    train(pair, lambda step: torch.as_tensor(rng.integers(0, len(transfer[0]), 32)), loss_fn, steps=steps, lr=lr,
          optimizer=make_optimizer(pair, lr), progress=False)
    return fit(model, seed, labelled, transfer, teacher=teacher, steps=steps)


def accuracy(model, examples):
    ids, mask, labels = examples
    with torch.no_grad():
        return (model(ids, attention_mask=mask).argmax(-1) == labels).float().mean().item()


def table(runs):
    """One row per student: its accuracy over the runs, and its difference from the distilled student's."""
    rows = []
    for name in (*STUDENTS, "teacher"):
        values = np.array([r[name] for r in runs])
        gaps = values - np.array([r["distilled"] for r in runs])
        rows.append({"student (random start)": name, "accuracy, mean": round(float(values.mean()), 3),
                     "min-max": f"{values.min():.3f}-{values.max():.3f}",
                     "minus distilled, mean": round(float(gaps.mean()), 3),
                     "minus distilled, min-max": f"{gaps.min():+.3f} to {gaps.max():+.3f}",
                     "above distilled in": f"{int((gaps > 0).sum())} of {len(runs)}"})
    return rows


def main():
    torch.set_num_threads(1)
    tiny = load_checkpoint("tiny-bert", "cpu")
    tokenizer, pretrained = tiny.tokenizer, tiny.model.bert
    runs = []
    for data_seed in DATA_SEEDS:
        labelled, seen, unseen, transfer = task_for(data_seed, tokenizer)
        for seed in (5 * data_seed, 5 * data_seed + 1):
            torch.manual_seed(seed)
            teacher = fit(pnn.BertForSequenceClassification(copy.deepcopy(pretrained), 2, dropout=0.0), seed,
                          labelled, transfer)

            def student():  # the notebook's shape (one block), every weight drawn afresh
                torch.manual_seed(seed)
                config = copy.copy(pretrained.config)
                config.n_layers = 1
                return pnn.BertForSequenceClassification(pnn.Bert(config), 2, dropout=0.0)

            models = {"labels only": fit(student(), seed, labelled, transfer),
                      "distilled": fit(student(), seed, labelled, transfer, teacher=teacher),
                      "distilled + cosine": fit(student(), seed, labelled, transfer, teacher=teacher, cosine=True),
                      "TinyBERT": fit_tinybert(student(), seed, labelled, transfer, teacher),
                      "teacher": teacher}
            row = {"data seed": data_seed, "training seed": seed}
            row.update({name: round((accuracy(m, seen) + accuracy(m, unseen)) / 2, 4) for name, m in models.items()})
            runs.append(row)
            print(row, flush=True)
    return write_result("distill_layers", {
        "title": "Intermediate-layer distillation into a one-block student started from random weights (notebook 12)",
        "notes": "Accuracy: the mean of seen and unseen test accuracy. 6 data seeds x 2 training seeds; the same "
                 "teacher, transfer set, 300 steps and losses as notebook 12, whose own student starts from the "
                 "pre-trained first block instead. 1 thread, CPU.",
        "rows": table(runs), "runs": runs})


if __name__ == "__main__":
    print(main())
