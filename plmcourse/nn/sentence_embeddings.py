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
    token_cutoff, token_shuffle      ConSERT's designed positives: words removed, words reordered
    train_consert(model, ...)        contrastive training whose views are those augmentations
    byol_loss, ema_update            BYOL's loss (no negatives) and its slowly moving target network
    train_byol(model, ...)           BYOL-style bootstrapping with dropout views, with or without predictor/EMA
    project_byol(model, heads, ...)  BYOL's projection of sentences, where a collapse shows
    prompt_embed(model, ...)         PromptBERT: the vector at [MASK] in a template, optionally denoised
    AffineCoupling, Flow             a small RealNVP normalising flow (invertible, exact log-determinant)
    train_flow(vectors, ...)         BERT-flow: the flow trained by maximum likelihood to a standard Gaussian
    apply_flow(flow, vectors)        the vectors' Gaussian coordinates
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["mean_pool", "max_pool", "cls_pool", "POOLINGS", "info_nce_loss", "alignment", "uniformity",
           "embed", "bert_batch", "encode", "set_dropout", "train_simcse", "token_cutoff", "token_shuffle",
           "AUGMENTATIONS", "train_consert", "byol_loss", "ema_update", "train_byol", "project_byol", "prompt_embed",
           "AffineCoupling", "Flow", "train_flow", "apply_flow"]


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


# ----------------------------------------------------------------------------
# Three more families of the tutorial's seven, run beside SimCSE on the same data (notebook 08, section 6):
# designed positives (ConSERT's token cutoff and shuffle), bootstrapping without negatives (BYOL), and
# prompting (PromptBERT's [MASK] vector).

def _word_positions(mask):
    """(B, T) True at the words of each row: real tokens other than [CLS] (first) and [SEP] (last real).
    Rows are laid out as bert_batch makes them: [CLS] words [SEP], then padding."""
    lengths = mask.long().sum(dim=1, keepdim=True)  # (B, 1)
    position = torch.arange(mask.shape[1], device=mask.device)[None]  # (1, T)
    return (position >= 1) & (position < lengths - 1)  # (B, T)


def token_cutoff(ids, mask, rate=0.15, generator=None):
    """ConSERT's token cutoff: each word is removed with probability `rate` -> (ids, new mask).

    A removed word leaves the attention mask, so neither attention nor mean pooling sees it;
    [CLS], [SEP] and padding are never touched, and a row keeps at least its first word.
    """
    mask = mask.bool()
    words = _word_positions(mask)  # (B, T)
    draw = torch.rand(mask.shape, generator=generator, device="cpu").to(mask.device)  # (B, T)
    drop = words & (draw < rate)
    emptied = (words & ~drop).sum(dim=1) == 0  # (B,): every word of the row drawn
    drop[:, 1] &= ~emptied  # keep position 1 (the first word) of such a row
    return ids, mask & ~drop


def token_shuffle(ids, mask, generator=None):
    """ConSERT's token shuffle: the words of each row in a random order -> (new ids, mask).

    [CLS] stays first, [SEP] last and padding where it was; only the order of the words changes,
    so a bag-of-words model would not notice it, and a model that reads order does.
    """
    mask = mask.bool()
    words = _word_positions(mask)  # (B, T)
    lengths = mask.long().sum(dim=1, keepdim=True)  # (B, 1)
    position = torch.arange(mask.shape[1], device=mask.device)[None].expand_as(mask).float()  # (B, T)
    draw = torch.rand(mask.shape, generator=generator, device="cpu").to(mask.device)  # (B, T) in [0, 1)
    # Sort keys: every non-word keeps its own position; the words get random keys in [1, length - 1),
    # strictly between [CLS] (0) and [SEP] (length - 1), so sorting permutes only the words.
    keys = torch.where(words, 1 + draw * (lengths - 2).clamp(min=0), position)
    order = keys.argsort(dim=1)  # (B, T)
    return ids.gather(1, order), mask


AUGMENTATIONS = {"cutoff": token_cutoff, "shuffle": token_shuffle}


def train_consert(model, tokenizer, sentences, *, augment="cutoff", rate=0.15, steps=100, lr=3e-3, batch_size=64,
                  temperature=0.05, dropout=0.0, seed=0, progress=True, desc="ConSERT"):
    """ConSERT-style contrastive training (Yan et al. 2021): the positive is a designed augmentation.

    Each sentence of a batch is augmented twice ("cutoff": token_cutoff at `rate`; "shuffle":
    token_shuffle), the two mean-pooled views are the positive pair and the rest of the batch the
    negatives (info_nce_loss), as in unsupervised SimCSE. dropout defaults to 0, so that the
    augmentation alone makes the views differ (SimCSE is this with dropout 0.1 and no augmentation).
    Batches from numpy.random.default_rng(seed), augmentations and dropout from seed too.
    """
    from plmcourse.train import train

    device = next(model.parameters()).device
    set_dropout(model, dropout)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    draws = torch.Generator().manual_seed(seed)  # the augmentations' own stream, on the CPU

    def view(ids, mask):
        if augment == "cutoff":
            return token_cutoff(ids, mask, rate, draws)
        return token_shuffle(ids, mask, draws)

    def get_batch(step):
        return bert_batch(tokenizer, [sentences[i] for i in rng.integers(0, len(sentences), batch_size)], device)

    def loss_fn(model, batch):
        z1 = embed(model, *view(*batch))  # (B, d)
        z2 = embed(model, *view(*batch))  # (B, d): the same sentences, augmented again
        return info_nce_loss(z1, z2, temperature)

    if augment not in AUGMENTATIONS:
        raise ValueError(f"augment must be one of {sorted(AUGMENTATIONS)}, got {augment!r}")
    return train(model, get_batch, loss_fn, steps=steps, lr=lr, progress=progress, desc=desc)


def byol_loss(prediction, target):
    """BYOL's loss: 2 - 2 cos(prediction_i, target_i), averaged over rows; no gradient into target.

    prediction, target: (B, d). The same as the mean squared distance of the two unit vectors.
    There are no negatives: nothing in the loss itself stops every vector becoming the same one.
    """
    cosine = F.cosine_similarity(prediction, target.detach(), dim=-1, eps=1e-12)  # (B,)
    return (2 - 2 * cosine).mean()


def _mlp(width, hidden):
    return torch.nn.Sequential(torch.nn.Linear(width, hidden), torch.nn.BatchNorm1d(hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, width))


@torch.no_grad()
def ema_update(target, online, decay):
    """target <- decay * target + (1 - decay) * online, parameter by parameter (decay 0: a plain copy)."""
    for t, o in zip(target.parameters(), online.parameters()):
        t.mul_(decay).add_(o, alpha=1 - decay)
    for t, o in zip(target.buffers(), online.buffers()):  # BatchNorm's running statistics
        t.copy_(o)


def train_byol(model, tokenizer, sentences, *, predictor=True, decay=0.99, steps=100, lr=3e-3, batch_size=64,
               dropout=0.1, seed=0, progress=True, desc="BYOL"):
    """BYOL-style training (Grill et al. 2020) without negatives; returns the History.

    The online network (model -> mean pool -> projector -> predictor) reads a sentence with one
    dropout mask and must predict the target network's projection of the same sentence under
    another mask (SimCSE's views, without SimCSE's negatives). The target (a copy of model and
    projector) gets no gradient: before every step it moves toward the online weights,
    target <- decay * target + (1 - decay) * online. predictor=False uses the projection itself as
    the prediction; decay=0 makes the target a plain copy of the online network (stop-gradient only).
    The loss is byol_loss, both directions. `model` is trained in place; returns (History, heads),
    heads the online projector (and predictor), to look at what they output (project_byol).
    """
    from plmcourse.train import train

    device = next(model.parameters()).device
    set_dropout(model, dropout)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    width = model.config.d_model
    online = torch.nn.ModuleDict({"encoder": model, "projector": _mlp(width, 2 * width)}).to(device)
    if predictor:
        online["predictor"] = _mlp(width, 2 * width).to(device)
    target = copy.deepcopy(torch.nn.ModuleDict({"encoder": model, "projector": online["projector"]}))
    target.requires_grad_(False)

    def get_batch(step):
        # The EMA step sits here, before each optimiser step: train() has no hook after one.
        ema_update(target, torch.nn.ModuleDict({"encoder": online["encoder"], "projector": online["projector"]}),
                   decay if step > 0 else 0.0)
        return bert_batch(tokenizer, [sentences[i] for i in rng.integers(0, len(sentences), batch_size)], device)

    def predict(net, ids, mask):
        z = net["projector"](embed(net["encoder"], ids, mask))  # (B, d)
        return net["predictor"](z) if "predictor" in net else z

    def loss_fn(net, batch):
        target.train()  # dropout on in the target too: its view is another mask
        with torch.no_grad():
            t1, t2 = (target["projector"](embed(target["encoder"], *batch)) for _ in range(2))  # (B, d) each
        p1, p2 = predict(net, *batch), predict(net, *batch)  # (B, d) each, other masks again
        return (byol_loss(p1, t2) + byol_loss(p2, t1)) / 2

    history = train(online, get_batch, loss_fn, steps=steps, lr=lr, progress=progress, desc=desc)
    online.eval()
    heads = torch.nn.ModuleDict({name: module for name, module in online.items() if name != "encoder"})
    return history, heads


@torch.no_grad()
def project_byol(model, heads, tokenizer, texts):
    """The online projector's output for `texts` (n, d) NumPy: where BYOL's loss is computed, and where a
    collapse shows first (every sentence mapped to the same vector)."""
    device = next(model.parameters()).device
    model.eval()
    heads.eval()
    ids, mask = bert_batch(tokenizer, texts, device)
    return heads["projector"](embed(model, ids, mask)).float().cpu().numpy()


@torch.no_grad()
def prompt_embed(model, tokenizer, texts, template="{} , it was [MASK] .", denoise=False, batch_size=128):
    """PromptBERT's sentence vector (Jiang et al. 2022): the last layer's vector at [MASK] -> (n, d) NumPy.

    Each text is put into `template` ("{}" marks where); the model reads it whole and the output at
    the [MASK] token is the sentence's vector, as if the model were asked to fill in a word about
    the sentence. denoise=True subtracts the vector the template gets with no sentence in it
    (template denoising: what the template alone contributes, the same for every sentence).
    """
    mask_id = tokenizer.stoi["[MASK]"] if hasattr(tokenizer, "stoi") else tokenizer.vocab["[MASK]"]
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()

    def at_mask(filled):
        out = []
        for start in range(0, len(filled), batch_size):
            ids, mask = bert_batch(tokenizer, filled[start:start + batch_size], device)
            hidden, _ = model(ids, None, mask)  # (b, T, d)
            where = (ids == mask_id).float().argmax(dim=1)  # (b,): the first [MASK] of each row
            out.append(hidden[torch.arange(len(ids), device=device), where])  # (b, d)
        return torch.cat(out).float().cpu().numpy()

    vectors = at_mask([template.format(text) for text in texts])  # (n, d)
    if denoise:
        vectors = vectors - at_mask([" ".join(template.format("").split())])  # (1, d) broadcast
    model.train(was_training)
    return vectors


# ----------------------------------------------------------------------------
# BERT-flow's idea at the course's scale: an invertible map trained by maximum likelihood to a standard Gaussian.

class AffineCoupling(torch.nn.Module):
    """One RealNVP coupling layer (Dinh et al. 2017): invertible, with a log-determinant that is a sum.

    The features where `keep` is True pass unchanged and decide a scale and a shift for the others:
    y = keep * x + (1 - keep) * (x * exp(s) + t), with (s, t) = net(keep * x), s squashed by tanh.
    The Jacobian is triangular, so log |det| is the sum of s over the changed features.
    The net's last layer starts at zero: the layer starts as the identity.
    """

    def __init__(self, d, keep, hidden=128):
        super().__init__()
        self.register_buffer("keep", keep.float())  # (d,) 1 = passes unchanged
        self.net = torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 2 * d))
        torch.nn.init.zeros_(self.net[-1].weight)
        torch.nn.init.zeros_(self.net[-1].bias)

    def _scale_shift(self, x):
        s, t = self.net(x * self.keep).chunk(2, dim=-1)  # (B, d) each
        change = 1 - self.keep
        return torch.tanh(s) * change, t * change  # nothing for the kept features

    def forward(self, x):
        s, t = self._scale_shift(x)
        return x * s.exp() + t, s.sum(dim=-1)  # (B, d), (B,) log |det|

    def inverse(self, y):
        s, t = self._scale_shift(y)  # the kept features of y are those of x
        return (y - t) * (-s).exp()


class Flow(torch.nn.Module):
    """A small normalising flow for sentence vectors: a per-feature affine map, then coupling layers whose
    kept halves alternate (even features, odd features, ...). forward(x) -> (z, log |det dz/dx|)."""

    def __init__(self, d, n_layers=4, hidden=128):
        super().__init__()
        self.shift = torch.nn.Parameter(torch.zeros(d))
        self.log_scale = torch.nn.Parameter(torch.zeros(d))
        even = torch.arange(d) % 2 == 0
        self.layers = torch.nn.ModuleList(AffineCoupling(d, even if i % 2 == 0 else ~even, hidden)
                                          for i in range(n_layers))

    def forward(self, x):
        z = (x - self.shift) * self.log_scale.exp()  # (B, d)
        logdet = self.log_scale.sum().expand(len(x))  # (B,)
        for layer in self.layers:
            z, step = layer(z)
            logdet = logdet + step
        return z, logdet

    def inverse(self, z):
        for layer in reversed(self.layers):
            z = layer.inverse(z)
        return z * (-self.log_scale).exp() + self.shift

    def log_likelihood(self, x):
        """log p(x) per row (B,): the standard Gaussian's log density at z, plus log |det dz/dx|."""
        z, logdet = self(x)
        return -0.5 * (z ** 2).sum(dim=-1) - 0.5 * z.shape[-1] * np.log(2 * np.pi) + logdet


def train_flow(vectors, *, n_layers=4, hidden=64, steps=300, batch_size=256, lr=3e-3, seed=0, device=None,
               progress=True):
    """BERT-flow's training (Li et al. 2020), small: maximise the mean log-likelihood of `vectors` (n, d)
    under a Flow mapped to a standard Gaussian (Adam, random batches of `batch_size` rows); the BERT that
    made the vectors is not touched. The per-feature affine starts at the data's mean and standard
    deviation. Returns (flow, losses), the losses in nats per dimension."""
    from tqdm.auto import tqdm

    torch.manual_seed(seed)
    x = torch.as_tensor(np.asarray(vectors), dtype=torch.float32, device=device)  # (n, d)
    flow = Flow(x.shape[1], n_layers, hidden).to(x.device)
    with torch.no_grad():  # start from standardised features (Glow's data-dependent ActNorm start)
        flow.shift.copy_(x.mean(dim=0))
        flow.log_scale.copy_(-x.std(dim=0).clamp(min=1e-6).log())
    optimizer = torch.optim.Adam(flow.parameters(), lr=lr)
    rows = torch.Generator().manual_seed(seed)
    losses = []
    for _ in tqdm(range(steps), desc="BERT-flow", disable=not progress, leave=False):
        batch = x[torch.randint(0, len(x), (batch_size,), generator=rows).to(x.device)]  # (b, d)
        loss = -flow.log_likelihood(batch).mean() / x.shape[1]  # negative log-likelihood per dimension
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    flow.eval()
    return flow, losses


@torch.no_grad()
def apply_flow(flow, vectors):
    """The flow's Gaussian coordinates z of `vectors` (n, d), as a NumPy array."""
    x = torch.as_tensor(np.asarray(vectors), dtype=torch.float32, device=next(flow.parameters()).device)
    return flow(x)[0].cpu().numpy()
