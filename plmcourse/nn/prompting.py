"""Prompting with little data in PyTorch (notebook 10).

The three exercises, with the same names and conventions as `plmcourse.ref.prompting`:
    verbalizer_log_probs, pet_soft_labels, select_pseudo_labels
and the machinery the notebook runs on:
    encode_pattern(tokenizer, texts, pattern)    "{x} it was [MASK] ." -> ids, mask, mask positions, segments
    cloze_log_probs(mlm, inputs, label_word_ids) class log-probabilities from a masked LM's cloze
    finetune_cloze(mlm, inputs, labels, ...)     prompt-based fine-tuning (LM-BFF, PET): no new parameters
    finetune_head(classifier, inputs, labels)    standard fine-tuning of a new head on [CLS]
    predict_head(classifier, inputs)             that head's class log-probabilities
and three more methods of the lecture:
    ProtoVerb, protoverb_loss, train_protoverb   the prototypical verbalizer (Cui et al., 2022)
    generate_templates(mlm, tokenizer, ...)      LM-BFF's template search, the MLM filling template words
    task_augmentation_pairs, self_train          STraTA: in-domain NLI pairs from unlabelled text, self-training
Everything runs on the device of its inputs.
"""

from __future__ import annotations

import torch

__all__ = ["verbalizer_log_probs", "pet_soft_labels", "select_pseudo_labels", "encode_pattern", "cloze_log_probs",
           "finetune_cloze", "finetune_head", "predict_head", "few_shot_draw", "mask_hidden", "protoverb_loss",
           "ProtoVerb", "train_protoverb", "generate_templates", "task_augmentation_pairs", "self_train"]


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


# ----------------------------------------------------------------------------
# Three more methods of the lecture (notebook 10): the draws they share with the notebook, the
# prototypical verbalizer, LM-BFF's template search, and STraTA (task augmentation + self-training).


def few_shot_draw(task, K, seed, split="train", device=None):
    """K labelled examples per class from task["train"], drawn by `seed`: (texts, labels (2K,)).

    The rule of notebook 10's `draw`: permute each class's members with default_rng(seed) and take
    the first K; split="dev" takes the next K of the same permutation (never in that draw's training set).
    """
    import numpy as np
    rng = np.random.default_rng(seed)
    rows = []
    for c in (0, 1):
        members = rng.permutation([i for i, (_, y) in enumerate(task["train"]) if y == c])
        rows.append(members[:K] if split == "train" else members[K:2 * K])
    rows = np.concatenate(rows)  # (2K,)
    return [task["train"][i][0] for i in rows], torch.tensor([task["train"][i][1] for i in rows], device=device)


def mask_hidden(mlm, inputs, batch_size=256):
    """The last layer's vector at each row's [MASK] (N, d): what the MLM head reads, and what
    ProtoVerb's prototypes live beside."""
    ids, attention_mask, mask_positions, segment_ids = inputs
    out = []
    for s in range(0, len(ids), batch_size):
        hidden, _ = mlm.bert(ids[s:s + batch_size], segment_ids[s:s + batch_size], attention_mask[s:s + batch_size])
        out.append(hidden[torch.arange(len(hidden), device=hidden.device), mask_positions[s:s + batch_size]])  # (b, d)
    return torch.cat(out)


def protoverb_loss(z, labels, prototypes, temperature=0.1):
    """ProtoVerb's training loss (Cui et al., 2022): instance-instance + instance-prototype InfoNCE.

    z (N, e) and prototypes (C, e) are unit vectors; similarity = cosine / temperature.
    instance-instance: each example's log-softmax over all other examples, averaged over the other
        examples of its own class (a supervised contrastive loss: same class close, others far);
        an example alone in its class adds nothing.
    instance-prototype: cross-entropy of the similarities to the C prototypes against the label.
    """
    sims = z @ z.T / temperature  # (N, N)
    self_pair = torch.eye(len(z), dtype=torch.bool, device=z.device)
    log_p = torch.log_softmax(sims.masked_fill(self_pair, float("-inf")), dim=-1)  # (N, N), row i: over j != i
    positive = (labels[:, None] == labels[None, :]) & ~self_pair  # (N, N)
    instance = -(log_p.masked_fill(~positive, 0.0).sum(-1) / positive.sum(-1).clamp(min=1)).mean()
    prototype = torch.nn.functional.cross_entropy(z @ prototypes.T / temperature, labels)  # (N, C) against (N,)
    return instance + prototype


class ProtoVerb(torch.nn.Module):
    """A prototypical verbalizer: a linear map of the [MASK] vector and one learnt prototype per class.

    A class's score is the cosine between the mapped vector and its prototype, over the temperature;
    no label word is needed. forward(h (N, d)) -> (N, C) class log-probabilities.
    """

    def __init__(self, d, n_classes, dim=32, temperature=0.1, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.project = torch.nn.Linear(d, dim)
        with torch.no_grad():
            self.project.weight.copy_(torch.randn(dim, d, generator=g) / d ** 0.5)
            self.project.bias.zero_()
        self.prototypes = torch.nn.Parameter(torch.randn(n_classes, dim, generator=g))
        self.temperature = temperature

    def embed(self, h):
        return torch.nn.functional.normalize(self.project(h), dim=-1)  # (N, e), unit

    def forward(self, h):
        c = torch.nn.functional.normalize(self.prototypes, dim=-1)  # (C, e)
        return torch.log_softmax(self.embed(h) @ c.T / self.temperature, dim=-1)  # (N, C)


def train_protoverb(h, labels, n_classes=2, dim=32, temperature=0.1, steps=100, lr=1e-2, seed=0):
    """Fit a ProtoVerb on frozen [MASK] vectors h (N, d) with protoverb_loss, full batch, Adam."""
    verb = ProtoVerb(h.shape[1], n_classes, dim, temperature, seed).to(h.device)
    optimizer = torch.optim.Adam(verb.parameters(), lr=lr)
    for _ in range(steps):
        prototypes = torch.nn.functional.normalize(verb.prototypes, dim=-1)  # (C, e)
        loss = protoverb_loss(verb.embed(h), labels, prototypes, temperature)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return verb.eval()


def generate_templates(mlm, tokenizer, texts, labels, label_word_ids, shape, top_n=3):
    """LM-BFF's template generation, with the masked LM itself in place of T5.

    shape: a pattern in which "[T]" marks a template word to find and "[MASK]" the label word's
    place, e.g. "{x} [T] [T] [MASK] .". Each training text is written in the shape with its own
    class's (first) label word filled in and every [T] masked; a word's score at a slot is the sum,
    over the texts, of its log-probability there (all slots read in one pass, not decoded in turn).
    Returns [(template, score)], best first: every combination of each slot's top_n words (special
    tokens never), written back with [MASK] where the label word goes.
    """
    import itertools
    parts = shape.split()
    slots = [i for i, p in enumerate(parts) if p == "[T]"]
    rows = []
    for label in labels.tolist():
        word = tokenizer.itos[label_word_ids[label][0]]
        rows.append(" ".join("<unk>" if p == "[T]" else word if p == "[MASK]" else p for p in parts))  # <unk>: a slot
    special = [tokenizer.stoi[t] for t in ("<unk>", "[PAD]", "[CLS]", "[SEP]", "[MASK]")]
    scores = []  # per slot: (V,) summed log-probabilities
    device = next(mlm.parameters()).device
    for i, (text, row) in enumerate(zip(texts, rows)):
        ids, attention_mask, _, segment_ids = encode_pattern(tokenizer, [text], row, device=device)
        where = torch.nonzero(ids[0] == tokenizer.stoi["<unk>"]).flatten()  # the slots, left to right
        ids[0, where] = tokenizer.stoi["[MASK]"]  # (encode_pattern allows one [MASK]; the slots are several)
        with torch.no_grad():
            logits, _ = mlm(ids, segment_ids, attention_mask)  # (1, T, V)
        log_p = torch.log_softmax(logits[0, where], dim=-1)  # (n_slots, V)
        scores = log_p if i == 0 else scores + log_p
    scores[:, special] = float("-inf")
    top = scores.topk(top_n, dim=-1)  # (n_slots, top_n)
    out = []
    for choice in itertools.product(range(top_n), repeat=len(slots)):
        words = dict(zip(slots, (tokenizer.itos[top.indices[s, k]] for s, k in enumerate(choice))))
        score = sum(top.values[s, k].item() for s, k in enumerate(choice))
        out.append((" ".join(words.get(i, p) for i, p in enumerate(parts)), score))
    return sorted(out, key=lambda pair: -pair[1])


def task_augmentation_pairs(reviews, positive, negative, nouns, n_pairs, seed=0):
    """STraTA's in-domain NLI data, made from unlabelled reviews by a rule-based generator.

    STraTA trains T5 on a labelled NLI corpus to write a hypothesis for a given premise and
    label. Our stand-in knows what such a generator would have learnt about this domain's
    sentences: which adjectives agree and which contradict (the `positive` and `negative` word
    lists) and which words are the nouns (`nouns`: topic -> nouns). It never sees a review's label.
    Each pair: premise = one sentence of an unlabelled review that speaks about a noun; hypothesis
        entailment (0):    "the NOUN was ADJ ." with an adjective of the premise's sentiment
        contradiction (1): "the NOUN was ADJ ." with an adjective of the opposite sentiment
    (STraTA's third label, neutral, is left out: our 2-layer model did not learn it from 1,500 pairs.)
    Returns [(premise words, hypothesis words, label)], labels alternating 0, 1, 0, ...
    """
    import numpy as np
    rng = np.random.default_rng(seed)
    polarity = {**{w: 1 for w in positive}, **{w: 0 for w in negative}}
    all_nouns = {n for members in nouns.values() for n in members}
    pairs = []
    while len(pairs) < n_pairs:
        review = reviews[int(rng.integers(len(reviews)))]
        sentences = [s.split() + ["."] for s in " ".join(review).rstrip(" .").split(" . ")]
        sentence = sentences[int(rng.integers(len(sentences)))]
        said = [polarity[w] for w in sentence if w in polarity]
        noun = next((w for w in sentence if w in all_nouns), None)
        if noun is None or not said:
            continue
        label = len(pairs) % 2
        words = positive if said[0] != label else negative  # label 0: the same sentiment; 1: the opposite
        pairs.append((sentence, ["the", noun, "was", words[int(rng.integers(len(words)))], "."], label))
    return pairs


def self_train(mlm, tokenizer, texts, labels, unlabelled_texts, unlabelled_inputs, test_inputs, test_labels, pattern,
               label_word_ids, rounds=(0, 100, 200, 400), steps=30, lr=3e-4, seed=0):
    """Class-balanced self-training through the cloze, from `mlm` (notebook 10, section 6).

    Round 0 fine-tunes a copy of `mlm` on the labelled texts for `steps`; each later round labels the
    unlabelled reviews with the last model, keeps the `per_class` most confident of each predicted
    class (select_pseudo_labels), and fine-tunes a fresh copy of `mlm` on labelled + pseudo-labelled
    for 2 * steps. STraTA's point: `mlm` may be a model first trained on an auxiliary task.
    Returns the test accuracy after each round (a list as long as `rounds`).
    """
    import copy
    device = labels.device
    accuracies, model = [], None
    for per_class in rounds:
        if per_class:
            with torch.no_grad():
                probs = cloze_log_probs(model, unlabelled_inputs, label_word_ids).exp()  # (N_unlabelled, C)
            chosen = select_pseudo_labels(probs, per_class)
            round_texts = texts + [unlabelled_texts[i] for i in chosen.tolist()]
            round_labels = torch.cat([labels, probs[chosen].argmax(-1)])
        else:
            round_texts, round_labels = texts, labels
        torch.manual_seed(seed)
        inputs = encode_pattern(tokenizer, round_texts, pattern, device=device)
        model = finetune_cloze(copy.deepcopy(mlm), inputs, round_labels, label_word_ids,
                               steps=2 * steps if per_class else steps, lr=lr, seed=seed)
        with torch.no_grad():
            log_p = cloze_log_probs(model, test_inputs, label_word_ids)
        accuracies.append((log_p.argmax(-1) == test_labels).float().mean().item())
    return accuracies
