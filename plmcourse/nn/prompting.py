"""Prompting with little data in PyTorch (notebook 10).

The three exercises, with the same names and conventions as `plmcourse.ref.prompting`:
    verbalizer_log_probs, pet_soft_labels, select_pseudo_labels
and the machinery the notebook runs on:
    encode_pattern(tokenizer, texts, pattern)    "{x} it was [MASK] ." -> ids, mask, mask positions, segments
    cloze_log_probs(mlm, inputs, label_word_ids) class log-probabilities from a masked LM's cloze
    finetune_cloze(mlm, inputs, labels, ...)     prompt-based fine-tuning (LM-BFF, PET): no new parameters
    finetune_head(classifier, inputs, labels)    standard fine-tuning of a new head on [CLS]
    predict_head(classifier, inputs)             that head's class log-probabilities
Everything runs on the device of its inputs.
"""

from __future__ import annotations

import torch

__all__ = ["verbalizer_log_probs", "pet_soft_labels", "select_pseudo_labels", "encode_pattern", "cloze_log_probs",
           "finetune_cloze", "finetune_head", "predict_head"]


def verbalizer_log_probs(logits, mask_positions, label_word_ids):
    """logits (B, T, V), mask_positions (B,), C lists of label-word ids -> (B, C) log-probabilities.

    A class's score is the mean of its words' logits at the mask; log-softmax over the C classes.
    """
    at_mask = logits[torch.arange(logits.shape[0], device=logits.device), mask_positions]  # (B, V)
    scores = torch.stack([at_mask[:, list(ids)].mean(dim=-1) for ids in label_word_ids], dim=-1)  # (B, C)
    return torch.log_softmax(scores, dim=-1)


def pet_soft_labels(pattern_log_probs, weights=None, temperature=2.0):
    """(P, N, C) class log-probabilities of P patterns -> (N, C) soft targets:
    softmax(weighted mean over patterns / temperature), weights normalised (uniform when None)."""
    P = pattern_log_probs.shape[0]
    if weights is None:
        w = pattern_log_probs.new_full((P,), 1.0 / P)
    else:
        w = torch.as_tensor(weights, dtype=pattern_log_probs.dtype, device=pattern_log_probs.device)
        if w.shape != (P,) or bool((w < 0).any()) or float(w.sum()) <= 0:
            raise ValueError(f"weights must be {P} non-negative numbers with a positive sum, got {weights!r}.")
        w = w / w.sum()
    mean = torch.tensordot(w, pattern_log_probs, dims=1)  # (N, C)
    return torch.softmax(mean / temperature, dim=-1)


def select_pseudo_labels(probs, per_class):
    """(N, C) probabilities -> indices of the `per_class` most confident examples predicted as
    each class (class 0's first, most confident first, ties by lower index)."""
    confidence, predicted = probs.max(dim=-1)  # (N,), (N,)
    chosen = []
    for c in range(probs.shape[1]):
        members = torch.nonzero(predicted == c).flatten()
        order = torch.sort(-confidence[members], stable=True).indices  # most confident first
        chosen.append(members[order[:per_class]])
    return torch.cat(chosen)


# ----------------------------------------------------------------------------
# The machinery notebook 10 runs on: patterns made into model inputs, cloze scores,
# and the two ways of fine-tuning on a few examples (through the cloze, or a new head).


def encode_pattern(tokenizer, texts, pattern, max_len=64, device=None, demonstrations=None):
    """Fill a pattern with each text and make model inputs: (ids, attention_mask, mask_positions, segment_ids).

    texts: word lists; pattern: words with "{x}" where the text goes and one "[MASK]",
    e.g. "{x} it was [MASK] ." or "{x} [SEP] it was [MASK] ." (a second segment);
    "{x}" alone is the text as it is, for a classifier head (mask_positions are then 0).
    A pattern may also hold "{demos}", which takes each row's own words from `demonstrations`
    (one word list per text), for LM-BFF's demonstrations.
    Each row is [CLS] pattern-filled [SEP]; rows are padded to the longest. A text too long
    for max_len loses words from its start, so the pattern itself, with the mask, stays whole.
    Returns ids (N, T), attention_mask (N, T) bool, mask_positions (N,), segment_ids (N, T).
    """
    words = pattern.split()
    if words.count("[MASK]") > 1 or words.count("{x}") != 1:
        raise ValueError(f"A pattern needs one {{x}} and at most one [MASK], got {pattern!r}.")
    rows, segments = [], []
    for i, text in enumerate(texts):
        demos = list(demonstrations[i]) if "{demos}" in words else []
        room = max_len - (len(words) - 1 - ("{demos}" in words)) - len(demos) - 2  # all but the text, [CLS], [SEP]
        if room < 1:
            raise ValueError(f"Row {i}: the pattern and its demonstrations take all {max_len} positions, "
                             f"leaving none for the text; shorten the demonstrations.")
        filled = [w for p in words for w in (list(text)[-room:] if p == "{x}" else demos if p == "{demos}" else [p])]
        ids = [tokenizer.stoi["[CLS]"], *tokenizer.encode(filled), tokenizer.stoi["[SEP]"]]
        rows.append(ids)
        second = filled.index("[SEP]") + 2 if "[SEP]" in filled else len(ids)
        segments.append([0] * second + [1] * (len(ids) - second))
    T = max(map(len, rows))
    pad = tokenizer.stoi["[PAD]"]
    ids = torch.full((len(rows), T), pad, dtype=torch.long)
    segment_ids = torch.zeros((len(rows), T), dtype=torch.long)
    for i, (row, seg) in enumerate(zip(rows, segments)):
        ids[i, :len(row)] = torch.tensor(row)
        segment_ids[i, :len(seg)] = torch.tensor(seg)
    mask_positions = (ids == tokenizer.stoi["[MASK]"]).int().argmax(dim=1)
    return tuple(t.to(device) for t in (ids, ids != pad, mask_positions, segment_ids))


def cloze_log_probs(mlm, inputs, label_word_ids, batch_size=256):
    """log P(class | text) for every row of `inputs` (from encode_pattern): (N, C).

    mlm: a BertForPreTraining; its MLM logits at the mask go through verbalizer_log_probs.
    Batched, so that a thousand unlabelled reviews do not make one (N, T, V) tensor.
    """
    ids, attention_mask, mask_positions, segment_ids = inputs
    out = []
    for s in range(0, len(ids), batch_size):
        part = slice(s, s + batch_size)
        logits, _ = mlm(ids[part], segment_ids[part], attention_mask[part])  # (b, T, V)
        out.append(verbalizer_log_probs(logits, mask_positions[part], label_word_ids))
    return torch.cat(out)


def _classification_loss(log_p, target, soft_labels):
    """Cross-entropy of (b, C) log-probabilities against class ids, or against (b, C) probabilities."""
    return -(target * log_p).sum(-1).mean() if soft_labels else torch.nn.functional.nll_loss(log_p, target)


def _finetune(model, loss_on, n, steps, lr, batch_size, seed):
    """AdamW on `loss_on(rows)` for `steps` steps of `batch_size` rows drawn from n examples."""
    from plmcourse.train import train  # here: plmcourse.train imports plmcourse.nn
    picker = torch.Generator().manual_seed(seed)

    def get_batch(step):
        return torch.randperm(n, generator=picker)[:batch_size]

    train(model, get_batch, lambda m, rows: loss_on(rows), steps=steps, lr=lr, warmup=0, progress=False)
    return model.eval()


def finetune_cloze(mlm, inputs, labels, label_word_ids, steps=30, lr=1e-3, batch_size=16, seed=0, soft_labels=False):
    """Prompt-based fine-tuning (LM-BFF, PET): train the whole MLM so the cloze gives the label.

    The loss is the cross-entropy of verbalizer_log_probs at the mask: no new parameters, the
    label words' embeddings are the classifier. labels: (N,) class ids, or (N, C) probabilities
    with soft_labels=True (PET's targets).
    """
    ids, attention_mask, mask_positions, segment_ids = inputs

    def loss_on(rows):
        logits, _ = mlm(ids[rows], segment_ids[rows], attention_mask[rows])
        log_p = verbalizer_log_probs(logits, mask_positions[rows], label_word_ids)  # (b, C)
        return _classification_loss(log_p, labels[rows], soft_labels)

    return _finetune(mlm, loss_on, len(ids), steps, lr, batch_size, seed)


def finetune_head(classifier, inputs, labels, steps=30, lr=1e-3, batch_size=16, seed=0, soft_labels=False):
    """Standard fine-tuning: a BertForSequenceClassification (new linear head on [CLS]), all of it trained.

    inputs: (ids, attention_mask, ...) as encode_pattern gives them (pattern "{x}" for no prompt).
    """
    ids, attention_mask = inputs[0], inputs[1]

    def loss_on(rows):
        log_p = torch.log_softmax(classifier(ids[rows], None, attention_mask[rows]), dim=-1)
        return _classification_loss(log_p, labels[rows], soft_labels)

    return _finetune(classifier, loss_on, len(ids), steps, lr, batch_size, seed)


def predict_head(classifier, inputs, batch_size=256):
    """Class log-probabilities (N, C) of a BertForSequenceClassification on encode_pattern's inputs."""
    ids, attention_mask = inputs[0], inputs[1]
    return torch.cat([torch.log_softmax(classifier(ids[s:s + batch_size], None, attention_mask[s:s + batch_size]), -1)
                      for s in range(0, len(ids), batch_size)])
