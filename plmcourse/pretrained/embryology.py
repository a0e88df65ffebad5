"""BERT embryology on the course's own pre-training: the tiny BERT, caught at several steps on its way.

Chiang, Huang and Lee (2020, "Pretrained Language Model Embryology: The Birth of ALBERT")
pre-trained ALBERT from scratch, kept checkpoints along the way and probed each one. We
do the same with the course's tiny BERT (`CHECKPOINTS["tiny-bert"]`: notebook 04's
recipe, 2000 steps of MLM + NSP on the review world). Its recipe is repeated (the same
seed, batches, masks and schedule) and the weights are kept after the steps in
SNAPSHOT_STEPS: 0 (the random initialisation), then roughly log-spaced up to the end,
because most of the change happens early.

    SNAPSHOT_STEPS     (0, 10, 30, 100, 300, 1000, 2000)
    snapshot_state_dicts()  rerun tiny-bert's recipe and keep those steps (`upto` stops early)
    build_snapshots()  the same, written to plmcourse/pretrained/weights/tiny-bert-embryo.safetensors
                       (2-3 minutes of one CPU core: `python -m plmcourse.pretrained.embryology`)
    load_snapshots()   {step: BertForPreTraining in eval mode}, and the tokenizer
    probe_snapshots()  linear probes (word class, sentiment) on every snapshot and layer
    mlm_accuracy_by_group()  how often each snapshot restores a masked noun, adjective, verb...

The file stores the weights as float16 (half the size: 7 models in 1.2 MB); they are
turned back into float32 when loaded. float16 keeps about 3 significant digits, far more
than any probe or loss in notebook 07 can see; the metadata records each snapshot's
held-out MLM loss computed on the rounded weights, i.e. on what load_snapshots returns.
The run uses one CPU thread, so that the same seed and PyTorch version give the same
file on any machine, however loaded (tests/test_probing_control_embryology.py rebuilds the early steps
and compares them bit for bit). tiny-bert itself was built on 2 threads: its weights and
the last snapshot's differ in the last bits, then more as training amplifies that: two
runs of one recipe, equally good (held-out MLM loss 0.790 for tiny-bert, 0.791 for the
last snapshot, as the file's metadata records).
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict
from pathlib import Path

import numpy as np
import safetensors
import safetensors.torch
import torch

from plmcourse import nn as pnn
from plmcourse.pretrained import checkpoints as ck
from plmcourse.train import train

__all__ = ["SNAPSHOT_STEPS", "EMBRYO_FILE", "build_snapshots", "load_snapshots", "snapshot_state_dicts",
           "probe_snapshots", "word_groups", "mlm_accuracy_by_group"]

SNAPSHOT_STEPS = (0, 10, 30, 100, 300, 1000, 2000)
RECIPE = "tiny-bert"  # whose pre-training is repeated
EMBRYO_FILE = "tiny-bert-embryo.safetensors"
FORMAT = "plmcourse-embryo-1"


class _Enough(Exception):
    """Raised inside the training loop once the last snapshot wanted has been taken."""


def snapshot_state_dicts(*, steps=SNAPSHOT_STEPS, upto=None, progress=False):
    """Rerun tiny-bert's pre-training and return ({step: state_dict}, tokenizer, config).

    A snapshot at step s holds the weights after s optimiser updates (0 = before any).
    The run is exactly build_checkpoint("tiny-bert")'s: the same model seed, batches,
    AdamW, warm-up and cosine schedule over the full 2000 steps; taking a snapshot reads
    the weights and changes nothing else. `upto` stops the run after that step (the
    schedule still assumes 2000 steps), so that early snapshots can be rebuilt in seconds.
    """
    spec = ck.CHECKPOINTS[RECIPE]
    wanted = sorted(s for s in steps if upto is None or s <= upto)
    tokenizer, model, get_batch, loss_fn = ck._prepare_bert(spec, {"spec": json.dumps(asdict(spec))})
    kept = {}

    def copy():
        return {k: v.detach().clone() for k, v in model.state_dict().items()}

    if 0 in wanted:
        kept[0] = copy()
    updates = [0]  # how many optimiser steps have been taken; eval_fn runs after each one

    def take_snapshots(_model):
        updates[0] += 1
        if updates[0] in wanted:
            kept[updates[0]] = copy()
        if updates[0] >= wanted[-1]:
            raise _Enough
        return {}

    # One thread: a loaded machine may run a multi-threaded matrix product on fewer threads,
    # which adds in another order; over 2000 steps such last-bit differences grow.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if wanted[-1] > 0:
            train(model, get_batch, loss_fn, steps=spec.steps, lr=spec.lr, eval_fn=take_snapshots, eval_every=1,
                  progress=progress, desc="tiny BERT embryology")
    except _Enough:
        pass
    finally:
        torch.set_num_threads(threads)
    return kept, tokenizer, model.config


def _half(state_dict):
    """Rounded to float16 and back: what the file stores and load_snapshots returns."""
    return {k: v.half().float() if v.is_floating_point() else v for k, v in state_dict.items()}


def build_snapshots(*, out_dir=None, progress=True) -> Path:
    """Rerun tiny-bert's recipe, keep SNAPSHOT_STEPS, write <out_dir>/tiny-bert-embryo.safetensors.

    out_dir defaults to plmcourse/pretrained/weights/. Tensors are named "step0300.bert...."
    and stored as float16; the metadata holds the spec, the steps, versions, thread count
    and each snapshot's held-out MLM loss (tiny-bert's held-out pairs and masks).
    """
    kept, tokenizer, config = snapshot_state_dicts(progress=progress)
    spec = ck.CHECKPOINTS[RECIPE]
    metadata = {"format": FORMAT, "recipe": RECIPE, "spec": json.dumps(asdict(spec)),
                "snapshot_steps": json.dumps(list(SNAPSHOT_STEPS)), "config": json.dumps(asdict(config)),
                "vocabulary": json.dumps(tokenizer.itos), "torch_version": torch.__version__,
                "torch_threads": "1", "python_version": platform.python_version()}
    batch = ck._bert_heldout({"spec": metadata["spec"], "config": metadata["config"]}, tokenizer, "cpu")
    losses, tensors = {}, {}
    model = pnn.BertForPreTraining(config).eval()
    for step, state in kept.items():
        model.load_state_dict(_half(state))
        with torch.no_grad():
            losses[step] = round(ck._bert_heldout_loss(model, batch), 5)
        tensors.update({f"step{step:04d}.{k}": v.half().contiguous() for k, v in state.items()})
    metadata["heldout_mlm_loss"] = json.dumps({str(s): losses[s] for s in SNAPSHOT_STEPS})
    path = Path(ck.WEIGHTS_DIR if out_dir is None else out_dir) / EMBRYO_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    safetensors.torch.save_file(tensors, str(path), metadata=metadata)
    path.chmod(0o644)
    if progress:
        print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB); held-out MLM loss by step: {losses}")
    return path


def load_snapshots(device=None, directory=None):
    """({step: BertForPreTraining in eval mode, float32}, tokenizer, metadata) from the shipped file.

    A missing file raises FileNotFoundError with the command that builds it.
    """
    path = Path(ck.WEIGHTS_DIR if directory is None else directory) / EMBRYO_FILE
    if not path.is_file():
        raise FileNotFoundError(f"The tiny BERT's snapshots are not built ({path} is missing): run "
                                f"`python -m plmcourse.pretrained.embryology` (2-3 minutes on a CPU).")
    with safetensors.safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
    if metadata.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} file: rebuild it with `python -m plmcourse.pretrained.embryology`.")
    tensors = safetensors.torch.load_file(str(path))
    config = pnn.BertConfig(**json.loads(metadata["config"]))
    tokenizer = ck._bert_tokenizer(json.loads(metadata["vocabulary"]))
    device = pnn.default_device() if device is None else torch.device(device)
    models = {}
    for step in json.loads(metadata["snapshot_steps"]):
        prefix = f"step{step:04d}."
        model = pnn.BertForPreTraining(config)
        model.load_state_dict({k[len(prefix):]: v.float() for k, v in tensors.items() if k.startswith(prefix)})
        models[step] = model.to(device).eval()
    return models, tokenizer, metadata


if __name__ == "__main__":
    build_snapshots()


# ----------------------------------------------------------------------------
# What each snapshot knows


def probe_snapshots(models, tokenizer, seed=0, n_folds=3, device=None, progress=True):
    """Linear-probe accuracy of every snapshot and layer on the review world's two probing tasks.

    models: {step: BertForPreTraining} (load_snapshots); tokenizer: their WordTokenizer.
    The tasks are data.review_probe_examples(seed, fold): word class (noun or adjective)
    and sentiment (of an adjective), both split by word type, so that a probe is always
    tested on words it never saw. Each fold holds out another third of the words; the
    accuracy is the mean over the n_folds folds, so every word is tested once.
    Returns {"word class": (n_steps, n_layers + 1), "sentiment": (n_steps, n_layers + 1)}
    numpy arrays, rows in the order of `models`, column 0 the embedding layer.
    progress: a tqdm bar over folds x snapshots.
    """
    from tqdm.auto import tqdm

    from plmcourse import data

    bar = tqdm(total=n_folds * len(models), desc="probing the snapshots", disable=not progress, leave=False)
    results = {"word class": [], "sentiment": []}
    for fold in range(n_folds):
        tasks = data.review_probe_examples(seed=seed, fold=fold, n_folds=n_folds)
        (class_train, class_test), (sent_train, sent_test) = tasks["word class"], tasks["sentiment"]
        # Each sentence gives a noun then an adjective to the word-class task, and that same
        # adjective to the sentiment task: the sentiment rows are every second word-class row.
        found = {"word class": [None] * len(models), "sentiment": [None] * len(models)}
        for row, model in enumerate(models.values()):
            x_train = pnn.word_vectors_by_layer(model, tokenizer, [e.words for e in class_train],
                                                [e.index for e in class_train], device)  # (N, L + 1, d)
            x_test = pnn.word_vectors_by_layer(model, tokenizer, [e.words for e in class_test],
                                               [e.index for e in class_test], device)
            for task, (train_x, test_x, train_set, test_set) in {
                    "word class": (x_train, x_test, class_train, class_test),
                    "sentiment": (x_train[1::2], x_test[1::2], sent_train, sent_test)}.items():
                found[task][row] = [pnn.linear_probe(train_x[:, layer], [e.label for e in train_set], test_x[:, layer],
                                                     [e.label for e in test_set], seed=seed)
                                    for layer in range(train_x.shape[1])]
            bar.update()
        for task in results:
            results[task].append(found[task])
    bar.close()
    return {task: np.mean(np.array(runs), axis=0) for task, runs in results.items()}  # mean over folds


def word_groups():
    """The review world's words by kind: {group: list of words}, for mlm_accuracy_by_group."""
    from plmcourse.data import reviews

    cities = {w for city in reviews.CITIES for w in city.split()}
    return {
        "nouns": sorted({w for nouns in reviews.TOPICS.values() for w in nouns}),
        "adjectives": sorted(reviews.POSITIVE + reviews.NEGATIVE),
        "verbs": sorted(reviews._VERBS[True] + reviews._VERBS[False]),
        "city names": sorted(cities),
        "function words": ["the", "was", "a", "and", "i", "it", "what", ",", "."],
    }


def mlm_accuracy_by_group(models, heldout, tokenizer, groups=None):
    """How often each snapshot's masked LM restores a masked word, by kind of word.

    heldout: (inputs, segments, attention_mask, labels, is_next) as from
    checkpoints.heldout_batch (tiny-bert's held-out pairs, masked once with a fixed seed).
    groups: {name: words} (default word_groups()). For every masked position whose original
    word is in a group, top-1 prediction == original counts as right. Returns
    {group: numpy array (n_steps,)} of accuracies, in the order of `models`.
    """
    groups = word_groups() if groups is None else groups
    inputs, segments, attention_mask, labels, _ = heldout
    counted = labels != -100
    members = {name: torch.isin(labels, torch.as_tensor([tokenizer.stoi[w] for w in words], device=labels.device))
               & counted for name, words in groups.items()}
    found = {name: [] for name in groups}
    for model in models.values():
        with torch.no_grad():
            logits, _ = model(inputs, segments, attention_mask)  # (N, T, V)
        right = logits.argmax(dim=-1) == labels
        for name, where in members.items():
            found[name].append(float(right[where].float().mean()))
    return {name: np.array(accuracies) for name, accuracies in found.items()}
