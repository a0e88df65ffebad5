"""Sentence embeddings in PyTorch: the conventions of `plmcourse.ref.sentence_embeddings`, on any
device, with gradients, and what notebook 08 trains with them.

    mean_pool, max_pool, cls_pool    token vectors (B, T, d) + mask (B, T) -> sentence vectors (B, d)
    info_nce_loss(z1, z2, ...)       SimCSE's contrastive loss, differentiable
    alignment, uniformity            Wang & Isola's two properties, differentiable
    embed(model, ids, mask, ...)     sentence vectors from a course Bert (any layer, any pooling)
    bert_batch(tokenizer, texts)     ids and mask for either of the course's BERT tokenizers
    encode(model, tokenizer, texts)  sentence vectors as a NumPy array, in batches, no gradients
    set_dropout(model, p)            turn dropout on in a model saved without it (SimCSE's augmentation)
    train_simcse(model, ...)         unsupervised (dropout) or supervised (entailment) SimCSE
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["mean_pool", "max_pool", "cls_pool", "POOLINGS", "info_nce_loss", "alignment", "uniformity",
           "embed", "bert_batch", "encode", "set_dropout", "train_simcse"]


def mean_pool(hidden, mask):
    """hidden (B, T, d), mask (B, T) True/1 for real tokens -> (B, d); zeros for a row with none."""
    real = mask.bool().unsqueeze(-1)  # (B, T, 1)
    # masked_fill, not hidden * mask: whatever padding holds (even NaN or inf, and NaN * 0 is
    # NaN) never enters the sum, and its gradient is exactly 0.
    total = hidden.masked_fill(~real, 0.0).sum(dim=1)  # (B, d)
    count = real.sum(dim=1).clamp(min=1).to(hidden.dtype)  # (B, 1); a row without real tokens: 0 / 1 = 0
    return total / count


def max_pool(hidden, mask):
    """Largest value of each feature over the real tokens -> (B, d); zeros for a row with none."""
    real = mask.bool().unsqueeze(-1)  # (B, T, 1)
    best = hidden.masked_fill(~real, float("-inf")).amax(dim=1)  # (B, d)
    return best.masked_fill(~real.any(dim=1), 0.0)


def cls_pool(hidden, mask=None):
    """The vector of the first token, [CLS]: what BERT's pre-training (NSP) put a sentence summary into."""
    return hidden[:, 0]


POOLINGS = {"cls": cls_pool, "mean": mean_pool, "max": max_pool}


def info_nce_loss(z1, z2, temperature=0.05, hard_negatives=None):
    """SimCSE's InfoNCE loss: row i of z1 should be closer to z2[i] than to any other candidate.

    z1, z2: (B, d), two views of the same B examples; hard_negatives: (M, d) or None, extra
    negatives for every row (supervised SimCSE: the contradictions). Cosine similarity divided
    by the temperature gives the logits (B, B + M); the loss is the mean cross-entropy with
    target i for row i (one direction, z1 -> z2, as in SimCSE).
    """
    candidates = z2 if hard_negatives is None else torch.cat([z2, hard_negatives])  # (B + M, d)
    # normalize divides by max(norm, eps): a zero vector stays zero, cosine 0 instead of 0 / 0 = NaN.
    logits = F.normalize(z1, dim=-1) @ F.normalize(candidates, dim=-1).T / temperature  # (B, B + M)
    targets = torch.arange(len(z1), device=z1.device)
    return F.cross_entropy(logits, targets)  # log-softmax inside: no overflow for a small temperature


def alignment(x, y, alpha=2):
    """E ||x_i - y_i||^alpha over positive pairs, on unit vectors (lower: positives closer)."""
    return (F.normalize(x, dim=-1) - F.normalize(y, dim=-1)).norm(dim=-1).pow(alpha).mean()


def uniformity(x, t=2):
    """log E exp(-t ||x_i - x_j||^2) over pairs i < j, on unit vectors (lower: spread more evenly)."""
    return torch.pdist(F.normalize(x, dim=-1)).pow(2).mul(-t).exp().mean().log()


def embed(model, ids, mask, pooling="mean", layer=None, segment_ids=None):
    """Sentence vectors (B, d) from a course `Bert`: `pooling` ("cls", "mean", "max") over the
    output of `layer` (0 = embeddings, None = the last). Runs with whatever grad mode is on."""
    if layer is None:
        hidden, _ = model(ids, segment_ids, mask)
    else:
        hidden = model.all_layers(ids, segment_ids, mask)[layer]
    return POOLINGS[pooling](hidden, mask)


def bert_batch(tokenizer, texts, device=None, max_length=None):
    """[CLS] text [SEP] for each text, padded to the longest: ids (B, T) and mask (B, T), True = real.

    tokenizer: MiniLM's `plmcourse.data.WordPieceTokenizer` (called like Hugging Face's), or
    the tiny BERT's `plmcourse.data.WordTokenizer` (its words are the text split on spaces).
    max_length: cut longer rows to this many tokens, [SEP] kept at the end.
    """
    texts = list(texts)
    if callable(tokenizer):
        batch = tokenizer(texts, max_length=max_length, return_tensors="pt")
        ids, mask = batch["input_ids"], batch["attention_mask"].bool()
    else:
        pad, cls, sep = (tokenizer.stoi[t] for t in ("[PAD]", "[CLS]", "[SEP]"))
        words = [tokenizer.encode(text.split())[:None if max_length is None else max_length - 2] for text in texts]
        rows = [[cls, *row, sep] for row in words]
        width = max(len(row) for row in rows)
        ids = torch.tensor([row + [pad] * (width - len(row)) for row in rows])
        mask = ids != pad
    return ids.to(device), mask.to(device)


@torch.no_grad()
def encode(model, tokenizer, texts, pooling="mean", layer=None, batch_size=128, max_length=None):
    """Sentence vectors of `texts`, a float32 NumPy array (n, d), computed in eval mode.

    pooling: "cls", "mean" or "max"; layer: None for the last, an int (0 = embeddings), or
    "all" for every layer at once, (n_layers + 1, n, d). max_length: see bert_batch.
    """
    texts = list(texts)
    device = next(model.parameters()).device
    # Sorting by length puts texts of similar length in one batch: less padding to compute.
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    was_training = model.training
    model.eval()
    chunks = []
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        ids, mask = bert_batch(tokenizer, [texts[i] for i in rows], device, max_length)
        if layer == "all":
            hidden = model.all_layers(ids, attention_mask=mask)
            chunks.append(torch.stack([POOLINGS[pooling](h, mask) for h in hidden]))  # (L + 1, b, d)
        else:
            chunks.append(embed(model, ids, mask, pooling, layer)[None])  # (1, b, d)
    model.train(was_training)
    vectors = np.empty((len(chunks[0]), len(texts), chunks[0].shape[-1]), dtype=np.float32)
    vectors[:, order] = torch.cat(chunks, dim=1).float().cpu().numpy()  # back in the order of `texts`
    return vectors if layer == "all" else vectors[0]


def set_dropout(model, p):
    """Set the dropout probability of every dropout in `model` (nn.Dropout and attention weights).

    The course's checkpoints are saved with dropout 0; SimCSE needs it on: the same sentence
    passed twice gets two different dropout masks, and that difference is the only augmentation.
    """
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = p
        elif hasattr(module, "dropout") and isinstance(module.dropout, float):  # MultiHeadAttention
            module.dropout = p
    return model


def train_simcse(model, tokenizer, examples, *, steps=100, lr=3e-3, batch_size=64, temperature=0.05,
                 dropout=0.1, seed=0, progress=True, desc="SimCSE"):
    """Train a course `Bert` in place with SimCSE (Gao et al. 2021), mean pooling; returns the History.

    examples: sentences (unsupervised SimCSE: each sentence is encoded twice, with different
        dropout masks, and the two vectors are the positive pair), or (premise, entailment,
        contradiction) triples (supervised: the entailment is the positive, every
        contradiction of the batch an extra, hard, negative).
    The batches are drawn with numpy.random.default_rng(seed); the dropout masks with
    torch.manual_seed(seed): the same seed trains the same model.
    """
    from plmcourse.train import train  # plmcourse.train imports tqdm; only training needs it

    device = next(model.parameters()).device
    supervised = not isinstance(examples[0], str)
    set_dropout(model, dropout)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)

    def get_batch(step):
        rows = rng.integers(0, len(examples), batch_size)
        if not supervised:
            return bert_batch(tokenizer, [examples[i] for i in rows], device)
        return [bert_batch(tokenizer, [examples[i][part] for i in rows], device) for part in range(3)]

    def loss_fn(model, batch):
        if not supervised:
            ids, mask = batch
            z1 = embed(model, ids, mask)  # (B, d)
            z2 = embed(model, ids, mask)  # (B, d): the same sentences, other dropout masks
            return info_nce_loss(z1, z2, temperature)
        (premise, entailment, contradiction) = (embed(model, ids, mask) for ids, mask in batch)
        return info_nce_loss(premise, entailment, temperature, hard_negatives=contradiction)

    return train(model, get_batch, loss_fn, steps=steps, lr=lr, progress=progress, desc=desc)
