"""Tools for looking inside a trained model (notebook 07): probes, self-similarity, attention shares.

    linear_probe       how much of a property can a *linear* classifier read off some vectors?
                       (Tenney et al. 2019, Hewitt & Liang 2019: keep the probe simple, so that
                       the accuracy measures the vectors, not the probe)
    mlp_probe          the same with one hidden layer: a more expressive probe
    control_labels     Hewitt & Liang's control task: one fixed random label per word type;
                       selectivity = accuracy on the task - accuracy on its control
    selectivity_by_layer  both accuracies and their difference, for every layer
    top_directions     vectors cut to their k main directions (less room for a probe)
    word_vectors_by_layer  every layer's vector of one word per sentence, for a word-level
                       tokenizer (the course's tiny BERT; notebook 07's embryology)
    self_similarity    how alike are one word's vectors in different sentences? (Ethayarajh 2019)
    anisotropy         how alike are the vectors of *different* words? The baseline to subtract:
                       in a narrow cone every pair of vectors looks similar
    attention_shares   where does each head look: [CLS], [SEP], the previous, the next token,
                       itself? (Clark et al. 2019, "What does BERT look at?")

Everything takes tensors on any device (or numpy arrays, or lists) and returns plain
Python floats or numpy arrays, ready to print or plot.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse.nn.device import one_cpu_thread

__all__ = ["linear_probe", "mlp_probe", "control_labels", "selectivity_by_layer", "top_directions",
           "word_vectors_by_layer", "self_similarity",
           "anisotropy", "attention_shares"]


def _as_tensor(x):
    """A float32 tensor: tensors keep their device (and are detached), anything else lands on CPU."""
    if isinstance(x, torch.Tensor):
        return x.detach().float()
    return torch.as_tensor(np.asarray(x, dtype=np.float32))


# ----------------------------------------------------------------------------
# Linear probe


def _encode_labels(train_y, test_y):
    """Labels of any kind ("NOUN", 0, True...) -> class indices; a test label unseen in train is -1."""
    train_y, test_y = (y.cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
                       for y in (train_y, test_y))
    classes = np.unique(train_y)
    index = {label: i for i, label in enumerate(classes.tolist())}
    train = torch.tensor([index[y] for y in train_y.tolist()])
    test = torch.tensor([index.get(y, -1) for y in test_y.tolist()])
    return train, test, len(classes)


def linear_probe(train_x, train_y, test_x, test_y, weight_decay=1e-2, steps=100, seed=0):
    """Train a logistic-regression probe on (train_x, train_y); return its accuracy on the test set.

    train_x (N, d), test_x (M, d): features (tensor on any device, numpy array or list).
    train_y (N,), test_y (M,): labels of any hashable kind (ints, strings, bools); a test
    label that never occurs in train counts as a mistake.
    weight_decay: strength of the L2 penalty on the weights (not the biases); the loss is
        mean cross-entropy + weight_decay * sum(W ** 2). With more features than examples
        the classes are usually separable, and without it the weights would grow forever.
    steps: at most this many L-BFGS iterations, full batch.
    seed: the initial weights (small, random); the loss is convex with a unique minimum
        when weight_decay > 0, so the seed only matters if L-BFGS stops early.

    Features are standardised with the mean and standard deviation of train_x (then
    applied to test_x as well), so weight_decay means the same for every layer, however
    large that layer's vectors are. Returns a float in [0, 1]. Deterministic for a seed.
    """
    train_x, test_x = _as_tensor(train_x), _as_tensor(test_x)
    device = train_x.device
    test_x = test_x.to(device)
    train_t, test_t, n_classes = _encode_labels(train_y, test_y)
    train_t, test_t = train_t.to(device), test_t.to(device)

    # Standardise with train statistics only: the test set must not leak into the probe.
    mean = train_x.mean(dim=0)
    std = train_x.std(dim=0).clamp(min=1e-6)  # a constant feature stays 0 rather than dividing by 0
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std

    generator = torch.Generator().manual_seed(seed)
    W = (0.01 * torch.randn(train_x.shape[1], n_classes, generator=generator)).to(device)
    W.requires_grad_(True)
    b = torch.zeros(n_classes, device=device, requires_grad=True)
    optimizer = torch.optim.LBFGS([W, b], max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = F.cross_entropy(train_x @ W + b, train_t) + weight_decay * (W ** 2).sum()
        loss.backward()
        return loss

    with one_cpu_thread(device):
        optimizer.step(closure)  # one call runs up to `steps` iterations on the full batch
    with torch.no_grad():
        predictions = (test_x @ W + b).argmax(dim=-1)
    return (predictions == test_t).float().mean().item()


def mlp_probe(train_x, train_y, test_x, test_y, hidden=128, weight_decay=1e-3, steps=150, lr=1e-2, seed=0):
    """Like linear_probe, with one hidden layer of `hidden` ReLU units: a more expressive probe.

    The probe is x -> relu(x W1 + b1) W2 + b2 on standardised features (train statistics),
    trained full batch with Adam (rate lr) for exactly `steps` steps on mean cross-entropy +
    weight_decay * (sum(W1 ** 2) + sum(W2 ** 2)). The loss is not convex: `seed` decides
    the initial weights (nn.Linear's uniform scale) and so, slightly, the result. A fixed
    number of steps keeps its cost known (about 10 times a linear probe's).
    Returns the test accuracy, a float in [0, 1]; deterministic for a seed on the CPU.
    """
    train_x, test_x = _as_tensor(train_x), _as_tensor(test_x)
    device = train_x.device
    test_x = test_x.to(device)
    train_t, test_t, n_classes = _encode_labels(train_y, test_y)
    train_t, test_t = train_t.to(device), test_t.to(device)
    mean, std = train_x.mean(dim=0), train_x.std(dim=0).clamp(min=1e-6)
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std

    generator = torch.Generator().manual_seed(seed)
    d = train_x.shape[1]

    def uniform(*shape, fan_in):  # nn.Linear's initialisation, drawn from our generator
        return ((torch.rand(*shape, generator=generator) * 2 - 1) / fan_in ** 0.5).to(device).requires_grad_(True)

    W1, b1 = uniform(d, hidden, fan_in=d), uniform(hidden, fan_in=d)
    W2, b2 = uniform(hidden, n_classes, fan_in=hidden), uniform(n_classes, fan_in=hidden)
    optimizer = torch.optim.Adam([W1, b1, W2, b2], lr=lr)

    def logits(x):
        return torch.relu(x @ W1 + b1) @ W2 + b2  # (N, d) -> (N, hidden) -> (N, n_classes)

    with one_cpu_thread(device):
        for _ in range(steps):
            loss = F.cross_entropy(logits(train_x), train_t) + weight_decay * ((W1 ** 2).sum() + (W2 ** 2).sum())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        predictions = logits(test_x).argmax(dim=-1)
    return (predictions == test_t).float().mean().item()


def control_labels(words, labels, seed=0):
    """Hewitt & Liang's (2019) control task: the same examples, each word type with one random label.

    words (N,): the word of each example (its type); labels (N,): the real task's labels.
    Every distinct word gets one label, drawn independently from the real labels' empirical
    distribution (their frequencies in `labels`) with numpy.random.default_rng(seed); every
    example of that word then carries it. Types are visited in sorted order, so the result
    depends on the set of words and the seed, not on the order of the examples.
    A probe can only solve this task by remembering words: its accuracy on a test set
    measures what the probe memorises. Returns a list of N labels.
    """
    words, labels = list(words), list(labels)
    if len(words) != len(labels):
        raise ValueError(f"{len(words)} words for {len(labels)} labels")
    classes, counts = np.unique(np.asarray(labels), return_counts=True)
    rng = np.random.default_rng(seed)
    types = sorted(set(words))
    drawn = rng.choice(len(classes), size=len(types), p=counts / counts.sum())
    label_of = {w: classes[i].item() for w, i in zip(types, drawn)}
    return [label_of[w] for w in words]


def selectivity_by_layer(train_x, train_y, train_words, test_x, test_y, test_words, probe=None, seed=0):
    """A probe's accuracy on the task and on its control task, layer by layer (Hewitt & Liang 2019).

    train_x (N, L, d), test_x (M, L, d): vectors of every layer; *_y: the task's labels;
    *_words: each example's word type. The control labels come from
    control_labels(train_words + test_words, train_y + test_y, seed): one random label per
    word, drawn from the task's label frequencies, shared by train and test. probe is
    linear_probe (default) or mlp_probe, called with seed=seed.
    Returns (task accuracy, control accuracy, selectivity = task - control), each (L,).
    """
    probe = linear_probe if probe is None else probe
    train_y, test_y = list(train_y), list(test_y)
    control = control_labels(list(train_words) + list(test_words), train_y + test_y, seed=seed)
    control_train, control_test = control[:len(train_y)], control[len(train_y):]
    task = np.array([probe(train_x[:, l], train_y, test_x[:, l], test_y, seed=seed) for l in range(train_x.shape[1])])
    memory = np.array([probe(train_x[:, l], control_train, test_x[:, l], control_test, seed=seed)
                       for l in range(train_x.shape[1])])
    return task, memory, task - memory


def top_directions(train_x, test_x, k):
    """Both sets of vectors projected onto the k directions in which train_x varies most.

    train_x (N, d), test_x (M, d) -> (N, k), (M, k): centred with train_x's mean, then
    multiplied by the top k right singular vectors of the centred train_x (its first k
    principal components). Fewer directions leave a probe less room: a way to set how much
    it can memorise. Only train_x decides the directions, so the test set does not leak in.
    """
    train_x, test_x = _as_tensor(train_x), _as_tensor(test_x).to(_as_tensor(train_x).device)
    if not 1 <= k <= min(train_x.shape):
        raise ValueError(f"k must be between 1 and {min(train_x.shape)}, got {k}")
    mean = train_x.mean(dim=0)
    _, _, Vt = torch.linalg.svd(train_x - mean, full_matrices=False)  # Vt: (min(N, d), d)
    directions = Vt[:k].T  # (d, k)
    return (train_x - mean) @ directions, (test_x - mean) @ directions


def word_vectors_by_layer(bert, tokenizer, sentences, positions, device=None, batch_size=256):
    """Every layer's vector of one word per sentence, for a word-level tokenizer (one id per word).

    bert: a plmcourse.nn.Bert (or BertForPreTraining, whose .bert is used); tokenizer: a
    data.WordTokenizer with "[CLS]", "[SEP]" and "[PAD]". sentences: lists of words;
    positions[i]: the index of the word wanted in sentences[i]. Each sentence is packed as
    [CLS] words [SEP] (segment 0), so word j sits at position j + 1.
    Returns a float32 CPU tensor (N, n_layers + 1, d): index 0 the embedding layer's output.
    """
    bert = getattr(bert, "bert", bert)
    device = next(bert.parameters()).device if device is None else torch.device(device)
    cls, sep, pad = (tokenizer.stoi[t] for t in ("[CLS]", "[SEP]", "[PAD]"))
    out = []
    for start in range(0, len(sentences), batch_size):
        chunk = sentences[start:start + batch_size]
        T = max(len(s) for s in chunk) + 2
        ids = torch.full((len(chunk), T), pad, dtype=torch.long)
        for row, words in enumerate(chunk):
            ids[row, :len(words) + 2] = torch.as_tensor([cls, *tokenizer.encode(words).tolist(), sep])
        ids = ids.to(device)
        with torch.no_grad():
            layers = bert.all_layers(ids, torch.zeros_like(ids), ids != pad)  # n_layers + 1 of (B, T, d)
        rows = torch.arange(len(chunk), device=device)
        cols = torch.as_tensor([p + 1 for p in positions[start:start + batch_size]], device=device)
        out.append(torch.stack([h[rows, cols] for h in layers], dim=1).float().cpu())  # (B, L + 1, d)
    return torch.cat(out)


# ----------------------------------------------------------------------------
# Self-similarity and anisotropy


def _mean_pairwise_cosine(vectors, same=None):
    """Mean cosine similarity over pairs i < j, only pairs with same[i, j] False if given."""
    unit = F.normalize(_as_tensor(vectors), dim=-1)
    n = unit.shape[0]
    if n < 2:
        raise ValueError(f"need at least two vectors, got {n}")
    cosines = unit @ unit.T  # (n, n)
    pairs = torch.ones(n, n, dtype=torch.bool, device=unit.device).triu(diagonal=1)  # i < j
    if same is not None:
        pairs &= ~same
    if not pairs.any():
        raise ValueError("no pair of vectors to compare")
    return cosines[pairs].mean().item()


def self_similarity(vectors_by_context):
    """Mean cosine similarity between one word's vectors in different contexts (Ethayarajh 2019).

    vectors_by_context (n, d): row i is the vector of the same word in sentence i, n >= 2.
    Returns the average of cos(v_i, v_j) over the n (n - 1) / 2 pairs i < j, a float in
    [-1, 1]: 1 if the vectors all point the same way (a static embedding, or a layer that
    ignores the context), lower the more the context changes the vector.
    """
    return _mean_pairwise_cosine(vectors_by_context)


def anisotropy(vectors, words=None):
    """Mean cosine similarity between vectors of *different* words: the baseline for self_similarity.

    vectors (n, d): vectors of many tokens from many sentences (one layer).
    words: optional length-n labels (the token of each row); pairs of the same word are
        then left out. Without it every pair i < j counts.
    Ethayarajh (2019) averages over random pairs; with a few thousand vectors we can
    afford all pairs, which is that average without the sampling noise.
    If every vector points in a narrow cone (anisotropy near 1), a high self-similarity
    means little; the notebook plots self_similarity - anisotropy, layer by layer.
    """
    same = None
    if words is not None:
        words = list(words)
        if len(words) != len(vectors):
            raise ValueError(f"{len(words)} words for {len(vectors)} vectors")
        codes = torch.as_tensor(np.unique(np.asarray(words), return_inverse=True)[1].reshape(-1))
        device = vectors.device if isinstance(vectors, torch.Tensor) else "cpu"
        codes = codes.to(device)
        same = codes[:, None] == codes[None, :]
    return _mean_pairwise_cosine(vectors, same)


# ----------------------------------------------------------------------------
# Where do heads look?


def attention_shares(weights, input_ids, attention_mask, cls_id, sep_id):
    """Per head, the average share of attention on [CLS], [SEP], the previous, the next token and itself.

    weights (B, H, T, T): one layer's attention probabilities, weights[b, h, q, k] = how much
        query q attends to key k (each row sums to 1 over the real keys).
    input_ids (B, T), attention_mask (B, T): True/1 for real tokens, False/0 for padding.
    cls_id, sep_id: the ids of [CLS] and [SEP].

    Returns a dict of numpy arrays of shape (H,):
        "cls"       sum of the weights on [CLS] keys, averaged over real queries
        "sep"       sum of the weights on [SEP] keys, averaged over real queries
        "previous"  the weight on key q - 1, averaged over real queries that have one
        "next"      the weight on key q + 1, averaged over real queries that have one
        "self"      the weight on key q, averaged over real queries
    Padding queries are left out of every average, padding keys are never counted. The
    shares overlap: the token after [CLS] has [CLS] as its previous token, so an exact
    previous-token head also puts some weight on [CLS].
    """
    weights = weights.detach().float()
    real = attention_mask.to(weights.device).bool()  # (B, T)
    ids = input_ids.to(weights.device)

    def average_over_queries(share, queries):
        """share (B, H, T) per query -> (H,) mean over the queries marked True in (B, T)."""
        q = queries[:, None, :].to(share.dtype)  # (B, 1, T), broadcast over heads
        total = (share * q).sum(dim=(0, 2))
        return (total / q.sum(dim=(0, 2)).clamp(min=1)).cpu().numpy()

    def share_on(keys):
        """Weight that each query puts on the keys marked True in keys (B, T) -> (B, H, T)."""
        return (weights * keys[:, None, None, :].to(weights.dtype)).sum(dim=-1)

    # The diagonals: weights[b, h, q, q + offset]; a (B, H, T - |offset|) tensor.
    self_share = weights.diagonal(offset=0, dim1=-2, dim2=-1)
    previous = weights.diagonal(offset=-1, dim1=-2, dim2=-1)  # query q = 1.., key q - 1
    following = weights.diagonal(offset=1, dim1=-2, dim2=-1)  # query q = 0..T-2, key q + 1
    both_real = real[:, 1:] & real[:, :-1]  # a real query and a real neighbour, (B, T - 1)
    return {
        "cls": average_over_queries(share_on(real & (ids == cls_id)), real),
        "sep": average_over_queries(share_on(real & (ids == sep_id)), real),
        "previous": average_over_queries(previous, both_real),
        "next": average_over_queries(following, both_real),
        "self": average_over_queries(self_share, real),
    }
