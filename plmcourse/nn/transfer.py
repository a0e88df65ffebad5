"""Transfer in PyTorch (notebook 13): the tiny BERT pre-trained on generated text, fine-tuned in several ways.

    tiny_config(vocab_size)                     the notebook's BERT: 2 layers, d = 64
    pad_batch(sentences, ...)                   lists of ids -> (ids, mask) with [CLS] ... [SEP]
    pretrain_mlm(model, ids, mask, steps, ...)  masked-LM pre-training with any masking function
    finetune(classifier, ids, mask, labels, ...) fine-tuning, with learning rates per group at every step
    parameter_groups(classifier)                {"head", "layer.i", "embeddings": parameters}
    word_vectors(bert, ids, mask, words, layer) one vector per word: its average hidden state at a layer
    alignment_precision_at_1(...)               plmcourse.ref.transfer's score, in torch
    unfreezing_groups(...)                      the same schedule as plmcourse.ref.transfer

Every function takes tensors on any device and works there.
"""

from __future__ import annotations

import numpy as np
import torch

from plmcourse.nn.bert import mlm_loss
from plmcourse.nn.models import BertConfig
from plmcourse.nn.objectives import cross_entropy
from plmcourse.ref.transfer import group_names, unfreezing_groups
from plmcourse.train import make_optimizer, train

__all__ = ["tiny_config", "pad_batch", "pretrain_mlm", "token_masking", "entity_masking", "finetune",
           "parameter_groups",
           "accuracy", "word_vectors", "unit_rows", "alignment_precision_at_1", "unfreezing_groups", "group_names"]


def tiny_config(vocab_size, max_len=32, n_layers=2):
    """2 layers, d = 64, 4 heads, no dropout; init_std 0.1 (near 1/sqrt(d): a tiny model learns sooner)."""
    return BertConfig(vocab_size=vocab_size, d_model=64, n_layers=n_layers, n_heads=4, max_len=max_len,
                      dropout=0.0, init_std=0.1)


def pad_batch(sentences, cls, sep, device="cpu", pad=0, length=None):
    """[CLS] ids [SEP], padded: (ids (B, T) int64, mask (B, T) bool, True for real tokens).

    cls, sep: one id for every sentence, or one per sentence (languages with their own specials).
    """
    n = len(sentences)
    cls = np.broadcast_to(np.asarray(cls), (n,))
    sep = np.broadcast_to(np.asarray(sep), (n,))
    T = length or max(len(s) for s in sentences) + 2
    ids = np.full((n, T), pad, dtype=np.int64)
    for i, s in enumerate(sentences):
        row = [int(cls[i]), *s, int(sep[i])][:T]
        ids[i, :len(row)] = row
    ids = torch.as_tensor(ids, device=device)
    return ids, ids != pad


def token_masking(special_ids, mask_id, vocab_size, p=0.15):
    """BERT's masking as a function of (ids (B, T) numpy, rng) -> (inputs, labels), for pretrain_mlm.

    mask_id may be one id, or one per row of the pre-training ids (a language with its own [MASK]).
    special_ids are never chosen, nor used as random replacements."""
    from plmcourse.ref.bert import mlm_mask

    def mask(ids, rng, rows=None):
        inputs, labels = mlm_mask(ids, rng, vocab_size, MASK_PLACEHOLDER, special_ids, p)
        ids_of_mask = np.asarray(mask_id)
        if ids_of_mask.ndim:  # one [MASK] per pre-training row: this batch's
            ids_of_mask = ids_of_mask[rows][:, None]
        return np.where(inputs == MASK_PLACEHOLDER, ids_of_mask, inputs), labels

    MASK_PLACEHOLDER = -1
    return mask


def pretrain_mlm(model, ids, mask, steps, mask_fn, seed=0, batch_size=32, lr=3e-3, segments=None, desc="pre-training",
                 progress=True):
    """Masked-LM training of a BertForPreTraining on rows of `ids` drawn at random (numpy seed `seed`).

    mask_fn(batch (b, T) numpy, rng, rows) -> (inputs, labels) numpy, where rows are the batch's row numbers in
    ids (to look up what belongs to each row, e.g. its entity spans); segments: (B, T) segment ids or None.
    """
    rng = np.random.default_rng(seed)
    device = ids.device
    ids_np = ids.cpu().numpy()

    def get_batch(step):
        rows = rng.integers(0, len(ids_np), batch_size)
        inputs, labels = mask_fn(ids_np[rows], rng, rows)
        seg = None if segments is None else segments[torch.as_tensor(rows, device=device)]
        return (torch.as_tensor(inputs, device=device), torch.as_tensor(labels, device=device),
                mask[torch.as_tensor(rows, device=device)], seg)

    def loss_fn(model, batch):
        inputs, labels, attention, seg = batch
        logits, _ = model(inputs, seg, attention)
        return mlm_loss(logits, labels)

    return train(model, get_batch, loss_fn, steps=steps, lr=lr, progress=progress, desc=desc)


def entity_masking(mask_function, spans, mask_id, vocab_size, share=0.15):
    """Whole-entity masking as a mask_fn for pretrain_mlm: `mask_function` is a whole_entity_mask (the
    exercise's signature), spans[i] the entity spans of row i of the pre-training ids, counted over its words
    ([CLS] not included). Each row's words are masked with a budget of round(share * number of words)."""
    def mask(batch, rng, rows):
        inputs, labels = batch.copy(), np.full(batch.shape, -100, dtype=np.int64)
        for b, row in enumerate(rows):
            n = int(np.count_nonzero(batch[b])) - 2  # the words between [CLS] and [SEP]
            words = batch[b:b + 1, 1:n + 1]
            got_inputs, got_labels = mask_function(words, [spans[row]], max(1, round(share * n)), rng, mask_id,
                                                   vocab_size)
            inputs[b, 1:n + 1], labels[b, 1:n + 1] = got_inputs[0], got_labels[0]
        return inputs, labels
    return mask


def parameter_groups(classifier):
    """{group name: parameters} of a BertForSequenceClassification, named as group_names gives them:
    "head" (the pooler and the classifier), "layer.i" (block i), "embeddings"."""
    bert = classifier.bert
    groups = {"head": [*classifier.classifier.parameters(), *(bert.pooler.parameters() if bert.pooler else [])],
              "embeddings": list(bert.embeddings.parameters())}
    for i, block in enumerate(bert.blocks):
        groups[f"layer.{i}"] = list(block.parameters())
    if bert.norm is not None:
        groups[f"layer.{len(bert.blocks) - 1}"] += list(bert.norm.parameters())
    return {name: groups[name] for name in group_names(len(bert.blocks))}


def finetune(classifier, ids, mask, labels, steps=150, lr=2e-3, seed=0, batch_size=32, rates=None, extra=None,
             layer=None):
    """Fine-tune a classifier on (ids, mask, labels); returns it in eval mode.

    rates(step) -> {group: learning rate} (0: frozen), applied before every step (gradual unfreezing,
    discriminative rates); None: every parameter at lr, with make_optimizer's warm-up and decay.
    extra: (classifier2, ids2, mask2, labels2): a second task trained in the same steps (multi-task),
    sharing the encoder. layer: classify from this layer's [CLS] vector instead of the last (probe-like).
    """
    rng = np.random.default_rng(seed)
    device = ids.device
    tasks = [(classifier, ids, mask, labels)] + ([extra] if extra else [])

    def get_batch(step):
        if rates is not None:
            set_rates(optimizer, rates(step), step)
        return [torch.as_tensor(rng.integers(0, len(t[1]), batch_size), device=device) for t in tasks]

    def loss_fn(model, batch):
        return sum(cross_entropy(_logits(c, i[rows], m[rows], layer), y[rows]) for (c, i, m, y), rows in
                   zip(tasks, batch))

    model = torch.nn.ModuleList([t[0] for t in tasks])
    if rates is None:
        optimizer = make_optimizer(model, lr)
        warmup = None
    else:
        groups = parameter_groups(classifier)
        optimizer = torch.optim.AdamW([{"params": groups[name], "lr": 0.0, "name": name} for name in groups],
                                      lr=lr, weight_decay=0.0)
        if extra:  # the second task's head trains at the first head's rate
            optimizer.add_param_group({"params": list(extra[0].classifier.parameters()), "lr": 0.0, "name": "head"})
        warmup = 0
    # With rates, get_batch sets every group's rate before each step (train's schedule is overridden).
    train(model, get_batch, loss_fn, steps=steps, lr=lr, optimizer=optimizer, progress=False, warmup=warmup)
    return classifier.eval()


def set_rates(optimizer, rates, step):
    """Each parameter group's rate from `rates` ({group name: rate}), by name: the dict's order does not matter.
    A group with no rate is an error that names it."""
    missing = sorted({group["name"] for group in optimizer.param_groups} - set(rates))
    if missing:
        raise ValueError(f"the rates for step {step} name no rate for {', '.join(map(repr, missing))} "
                         f"(they name {', '.join(map(repr, rates))})")
    for group in optimizer.param_groups:
        group["lr"] = float(rates[group["name"]])


def _logits(classifier, ids, mask, layer=None):
    if layer is None:
        return classifier(ids, attention_mask=mask)
    hidden = classifier.bert.all_layers(ids, attention_mask=mask)[layer]  # (B, T, d)
    return classifier.classifier(hidden[:, 0])


@torch.no_grad()
def accuracy(classifier, ids, mask, labels, layer=None):
    classifier.eval()
    return (_logits(classifier, ids, mask, layer).argmax(-1) == labels).float().mean().item()


@torch.no_grad()
def word_vectors(bert, ids, mask, words, layer):
    """(len(words), d): each word's hidden state at `layer` (0: the embedding layer's output) averaged over
    its occurrences in ids (B, T); a word that never occurs gets zeros."""
    bert.eval()
    hidden = bert.all_layers(ids, attention_mask=mask)[layer]  # (B, T, d)
    flat, tokens = hidden.reshape(-1, hidden.shape[-1]), ids.reshape(-1)
    out = torch.zeros(len(words), hidden.shape[-1], device=hidden.device)
    for i, w in enumerate(words):
        found = tokens == int(w)
        if found.any():
            out[i] = flat[found].mean(0)
    return out


def unit_rows(x):
    """Rows scaled to unit length; zero rows stay zero."""
    norms = x.norm(dim=1, keepdim=True)
    return x / torch.where(norms == 0, torch.ones_like(norms), norms)


def alignment_precision_at_1(src_emb, tgt_emb, train_pairs, test_pairs):
    """plmcourse.ref.transfer.alignment_precision_at_1 in torch (float64 inside), on src_emb's device."""
    x, y = unit_rows(src_emb.double()), unit_rows(tgt_emb.double())
    train_pairs, test_pairs = torch.as_tensor(train_pairs), torch.as_tensor(test_pairs)
    u, _, vh = torch.linalg.svd(x[train_pairs[:, 0]].T @ y[train_pairs[:, 1]])
    w = u @ vh  # (d, d) orthogonal
    sources = torch.unique(test_pairs[:, 0])
    nearest = ((x[sources] @ w) @ y.T).argmax(dim=1).cpu()  # torch.argmax: the first maximum
    right = [int(n) in set(test_pairs[test_pairs[:, 0] == s, 1].tolist()) for s, n in zip(sources.tolist(), nearest)]
    return float(np.mean(right))
