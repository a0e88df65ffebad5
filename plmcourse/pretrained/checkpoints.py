"""The course's own small checkpoints: two tiny BERTs and a tiny GPT, pre-trained once and shipped.

Notebooks 04 and 05 pre-train a tiny BERT and a tiny GPT in about twenty seconds each.
Later notebooks (sentence embeddings, PEFT, efficiency) start from such a model; they load
this one, trained the same way for longer, instead of training it again. Notebook 10
(prompting) loads tiny-bert-reviews: the same size, pre-trained on whole reviews.

    CHECKPOINTS          name -> Spec: model, configuration, data, seed, steps, learning rate
    build_checkpoint()   train one from its seed with plmcourse.train.train (CPU, 2-3 minutes)
                         and write plmcourse/pretrained/weights/<name>.safetensors
    load_checkpoint()    Checkpoint(model, tokenizer, config, metadata), the model in eval mode
    heldout_loss()       recompute the held-out loss exactly as it was computed at build time
    heldout_batch()      the held-out data that loss is computed on

    ckpt = load_checkpoint("tiny-gpt")
    print(ckpt.metadata["heldout_loss"], heldout_loss(ckpt))   # the same number

Each file is self-describing: its safetensors metadata (strings) holds the configuration
as JSON, the tokenizer's vocabulary, the Spec it was built from, the seed and steps, the
versions of Python, NumPy and PyTorch, the held-out loss with a sentence saying exactly
how it was computed, the baselines it is to be compared with, and the training curve.

Rebuild from the command line:

    plmcourse checkpoints build              # all of them
    plmcourse checkpoints build tiny-bert    # one
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import safetensors
import safetensors.torch
import torch

import plmcourse
from plmcourse import data, ref
from plmcourse import nn as pnn
from plmcourse.train import train

__all__ = ["Spec", "CHECKPOINTS", "Checkpoint", "WEIGHTS_DIR", "BUILD_COMMAND", "build_checkpoint",
           "load_checkpoint", "heldout_loss", "heldout_batch", "main"]

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
BUILD_COMMAND = "plmcourse checkpoints build"
FORMAT = "plmcourse-checkpoint-1"  # bump when the metadata's meaning changes
BERT_SPECIALS = ("[PAD]", "[CLS]", "[SEP]", "[MASK]")  # after <unk>, as in notebook 04


@dataclass(frozen=True)
class Spec:
    """How one checkpoint is made. Everything that decides its weights is here.

    model:      "BertForPreTraining" or "GPT" (classes of plmcourse.nn)
    config:     arguments of BertConfig / GPTConfig except vocab_size, which the tokenizer decides
    data:       what it is trained and evaluated on (see _bert_data and _gpt_data)
    seed:       torch.manual_seed(seed) right before the weights are made; the batches'
                generator starts from the same seed
    steps, lr, batch_size: passed to plmcourse.train.train (AdamW, warm-up then cosine, clip 1)
    """

    model: str
    config: dict
    data: dict
    seed: int
    steps: int
    lr: float
    batch_size: int


CHECKPOINTS = {
    # Notebook 04's tiny BERT, same size and the same data recipe, with more reviews and
    # 2000 steps of 128 pairs instead of 400 of 64. Around step 1200 it picks up what 400
    # steps cannot: which adjectives go with "loved" and which with "hated", and that
    # "new" is followed by "york" or "delhi". That is what the sentiment task and cloze
    # prompts need. Wider or deeper models learned it later within the same 2-3 minutes.
    "tiny-bert": Spec(
        model="BertForPreTraining",
        config=dict(d_model=64, n_layers=2, n_heads=4, d_ff=128, max_len=26, dropout=0.0, init_std=0.1),
        data=dict(corpus="review_documents", documents=20_000, documents_seed=1, pairs=100_000,
                  pairs_seed=0, heldout_documents=300, heldout_documents_seed=2, heldout_pairs=1024,
                  heldout_pairs_seed=9, heldout_mask_seed=10, mask_p=0.15),
        seed=0, steps=2000, lr=3e-3, batch_size=128),
    # Notebook 10's masked LM: the tiny BERT's size, pre-trained as RoBERTa was: whole
    # reviews, one segment each, masked LM only (no NSP). It reads a review of several
    # sentences, so a cloze after one ("... it was [MASK] .") makes sense; and its [CLS]
    # has learned nothing of its own (NSP on this corpus would teach it the review's
    # sentiment, which real NSP does not), so a new head on it starts from scratch, as on RoBERTa.
    "tiny-bert-reviews": Spec(
        model="BertForPreTraining",
        config=dict(d_model=64, n_layers=2, n_heads=4, d_ff=128, max_len=64, dropout=0.0, init_std=0.1),
        data=dict(corpus="review_documents", unit="reviews", documents=50_000, documents_seed=1,
                  heldout_documents=1024, heldout_documents_seed=2, heldout_mask_seed=10, mask_p=0.15),
        seed=0, steps=2000, lr=3e-3, batch_size=128),
    # Notebook 05's tiny GPT (characters of Python's docs, the same tokenizer and split),
    # twice as wide and deep and trained three times as long: nanoGPT's CPU configuration
    # (bench/gpt.py) with batches of 16 windows.
    "tiny-gpt": Spec(
        model="GPT",
        config=dict(d_model=128, n_layers=4, n_heads=4, max_len=64, dropout=0.0, init_std=0.02),
        data=dict(corpus="python_corpus", val_fraction=0.1),
        seed=0, steps=1500, lr=3e-3, batch_size=16),
}


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (eval mode), its tokenizer, its config and the file's metadata."""

    model: torch.nn.Module
    tokenizer: data.WordTokenizer | data.CharTokenizer
    config: pnn.BertConfig | pnn.GPTConfig
    metadata: dict  # str -> str, as stored in the safetensors file

    @property
    def name(self) -> str:
        return self.metadata["name"]


# ----------------------------------------------------------------------------
# Tiny BERT: MLM + NSP on the review world (notebook 04)


def _bert_tokenizer(vocabulary=None):
    """Notebook 04's tokenizer: <unk>, the four specials, then the review vocabulary (sorted)."""
    words = data.review_vocabulary() if vocabulary is None else vocabulary[1 + len(BERT_SPECIALS):]
    tokenizer = data.WordTokenizer(words, specials=BERT_SPECIALS)
    if vocabulary is not None and tokenizer.itos != vocabulary:
        raise ValueError("The stored vocabulary is not in the order WordTokenizer gives it: the file is damaged.")
    return tokenizer


def _special_ids(tokenizer):
    return [tokenizer.stoi[t] for t in (data.WordTokenizer.UNK, *BERT_SPECIALS)]


def _pack_pairs(tokenizer, pairs, max_len):
    """(a, b, is_next) triples -> ids and segments (N, max_len), padded, and NSP labels (N,).

    Each row is [CLS] a [SEP] b [SEP]: segment 0 up to the first [SEP], segment 1 after it
    ([CLS] a [SEP] when b is empty).
    A pair too long for max_len loses words from the longer side, as BERT's pre-training
    does: a from its start, b from its end, so the words around the middle [SEP] stay.
    """
    pad, cls, sep = (tokenizer.stoi[t] for t in ("[PAD]", "[CLS]", "[SEP]"))
    ids = np.full((len(pairs), max_len), pad, dtype=np.int64)
    segments = np.zeros((len(pairs), max_len), dtype=np.int64)
    for row, (a, b, _) in enumerate(pairs):
        while len(a) + len(b) + 2 + bool(b) > max_len:
            a, b = (a[1:], b) if len(a) > len(b) else (a, b[:-1])
        row_ids = [cls, *tokenizer.encode(a), sep] + ([*tokenizer.encode(b), sep] if b else [])
        ids[row, :len(row_ids)] = row_ids
        segments[row, len(a) + 2:len(row_ids)] = 1
    return ids, segments, np.array([is_next for *_, is_next in pairs], dtype=np.int64)


def _bert_data(spec_data, tokenizer, max_len, heldout):
    """The training pairs (heldout=False) or the held-out pairs (True), packed; fixed by their seeds."""
    prefix = "heldout_" if heldout else ""
    documents = data.review_documents(spec_data[prefix + "documents"], seed=spec_data[prefix + "documents_seed"])
    if spec_data.get("unit") == "reviews":  # whole reviews, one segment, no NSP label (0 everywhere)
        pairs = [([w for sentence in doc for w in sentence], [], 0) for doc in documents]
    else:
        pairs = data.nsp_pairs(documents, np.random.default_rng(spec_data[prefix + "pairs_seed"]),
                               spec_data[prefix + "pairs"])
    return _pack_pairs(tokenizer, pairs, max_len)


def _bert_heldout(metadata, tokenizer, device):
    """The held-out pairs, masked once with a fixed seed: (inputs, segments, attention, labels, is_next)."""
    spec_data = json.loads(metadata["spec"])["data"]
    max_len = json.loads(metadata["config"])["max_len"]
    ids, segments, is_next = _bert_data(spec_data, tokenizer, max_len, heldout=True)
    mask_id = tokenizer.stoi["[MASK]"]
    inputs, labels = ref.mlm_mask(ids, np.random.default_rng(spec_data["heldout_mask_seed"]), len(tokenizer),
                                  mask_id, _special_ids(tokenizer), p=spec_data["mask_p"])
    arrays = (inputs, segments, ids != tokenizer.stoi["[PAD]"], labels, is_next)
    return tuple(torch.as_tensor(a, device=device) for a in arrays)


def _bert_heldout_loss(model, batch):
    inputs, segments, attention_mask, labels, _ = batch
    mlm_logits, _ = model(inputs, segments, attention_mask)
    return float(pnn.mlm_loss(mlm_logits, labels))


def _bert_mlm_only_loss(model, batch):
    """RoBERTa's objective: the masked LM loss alone."""
    inputs, segments, attention_mask, labels, _ = batch
    mlm_logits, _ = model(inputs, segments, attention_mask)
    return pnn.mlm_loss(mlm_logits, labels)


def _bert_pretraining_loss(model, batch):
    """Notebook 04's objective: MLM loss + NSP loss."""
    inputs, segments, attention_mask, labels, is_next = batch
    mlm_logits, nsp_logits = model(inputs, segments, attention_mask)
    return pnn.mlm_loss(mlm_logits, labels) + pnn.cross_entropy(nsp_logits, is_next)


def _bert_describe(spec):
    d = spec.data
    if d.get("unit") == "reviews":
        return (f"MLM loss in nats: the mean of -log p(original word) over the masked positions of "
                f"{d['heldout_documents']:,} held-out reviews, plmcourse.data.review_documents("
                f"{d['heldout_documents']}, seed={d['heldout_documents_seed']}), each packed whole as "
                f"[CLS] review [SEP] (its first words cut if longer than {spec.config['max_len']}) and padded, "
                f"masked once by plmcourse.ref.mlm_mask(ids, numpy.random.default_rng({d['heldout_mask_seed']}), "
                f"p={d['mask_p']}) (80% [MASK], 10% a random word, 10% unchanged); one float32 forward pass "
                f"in eval mode. Training used review_documents({d['documents']}, seed={d['documents_seed']}), "
                f"masked afresh in every batch, with the masked LM loss only.")
    return (f"MLM loss in nats: the mean of -log p(original word) over the masked positions of "
            f"{d['heldout_pairs']:,} held-out sentence pairs, plmcourse.data.nsp_pairs(review_documents("
            f"{d['heldout_documents']}, seed={d['heldout_documents_seed']}), numpy.random.default_rng("
            f"{d['heldout_pairs_seed']}), {d['heldout_pairs']}), each packed as [CLS] A [SEP] B [SEP] and "
            f"padded to {spec.config['max_len']}, masked once by plmcourse.ref.mlm_mask(ids, "
            f"numpy.random.default_rng({d['heldout_mask_seed']}), p={d['mask_p']}) (80% [MASK], 10% a "
            f"random word, 10% unchanged); NSP not included; one float32 forward pass in eval mode. "
            f"Training used review_documents({d['documents']}, seed={d['documents_seed']}): other reviews "
            f"of the same grammar, which shares many whole sentences with them, as in notebook 04.")


def _prepare_bert(spec, metadata):
    """Tokenizer, model, get_batch and loss_fn for the tiny BERT; adds tokenizer, config, baseline to metadata."""
    tokenizer = _bert_tokenizer()
    metadata.update(tokenizer="WordTokenizer", vocabulary=json.dumps(tokenizer.itos),
                    specials=json.dumps(BERT_SPECIALS), heldout_loss_description=_bert_describe(spec))
    config = pnn.BertConfig(vocab_size=len(tokenizer), **spec.config)
    metadata["config"] = json.dumps(asdict(config))
    torch.manual_seed(spec.seed)
    model = pnn.BertForPreTraining(config)

    ids, segments, is_next = _bert_data(spec.data, tokenizer, config.max_len, heldout=False)
    pad, mask_id, special_ids = tokenizer.stoi["[PAD]"], tokenizer.stoi["[MASK]"], _special_ids(tokenizer)
    batch_rng = np.random.default_rng(spec.seed)

    def get_batch(step):
        # Fresh masks every time a pair comes back: the model never sees the same blanks twice.
        rows = batch_rng.integers(0, len(ids), spec.batch_size)
        inputs, labels = ref.mlm_mask(ids[rows], batch_rng, len(tokenizer), mask_id, special_ids,
                                      p=spec.data["mask_p"])
        arrays = (inputs, segments[rows], ids[rows] != pad, labels, is_next[rows])
        return tuple(torch.as_tensor(a) for a in arrays)

    # Baseline: a model that knows only word frequencies (counted on the training pairs'
    # ordinary words, add-one smoothing), scored on the same held-out masked words.
    ordinary = ~np.isin(ids, special_ids)
    counts = np.bincount(ids[ordinary], minlength=len(tokenizer)) + 1.0
    labels = _bert_heldout(metadata, tokenizer, "cpu")[3].numpy()
    targets = labels[labels != -100]
    metadata.update(
        baseline_unigram_loss=repr(float(-np.log(counts[targets] / counts.sum()).mean())),
        baselines_description="unigram: word frequencies of the training pairs' ordinary words with "
                              "add-one smoothing, -log p averaged over the same held-out masked words.")
    loss_fn = _bert_mlm_only_loss if spec.data.get("unit") == "reviews" else _bert_pretraining_loss
    return tokenizer, model, get_batch, loss_fn


def _bert_extras(model, batch, nsp=True):
    """Accuracy of the MLM (and NSP, if it was trained) predictions on the held-out data, for the record."""
    inputs, segments, attention_mask, labels, is_next = batch
    mlm_logits, nsp_logits = model(inputs, segments, attention_mask)
    counted = labels != -100
    extras = {"heldout_mlm_accuracy": float((mlm_logits.argmax(-1)[counted] == labels[counted]).float().mean())}
    if nsp:
        extras["heldout_nsp_accuracy"] = float((nsp_logits.argmax(-1) == is_next).float().mean())
    return extras


# ----------------------------------------------------------------------------
# Tiny GPT: next character of Python's docs (notebook 05)


def _gpt_heldout(metadata, tokenizer, device):
    """Windows (N, T) of the stored held-out text; window k starts at k (T - 1).

    Consecutive windows share one character, so every character but the first is a
    target exactly once, seen with 0 to T - 2 characters of context before it.
    """
    T = json.loads(metadata["config"])["max_len"]
    ids = torch.from_numpy(tokenizer.encode(metadata["heldout_text"]))
    n = (len(ids) - 1) // (T - 1)
    return torch.stack([ids[k * (T - 1):k * (T - 1) + T] for k in range(n)]).to(device)


def _gpt_heldout_loss(model, windows, chunk=256):
    total, count = 0.0, 0
    for x in windows.split(chunk):
        n = x[:, 1:].numel()
        total += float(pnn.causal_lm_loss(model(x), x)) * n  # the mean over this chunk, times its targets
        count += n
    return total / count


def _gpt_describe(spec, n_characters, T):
    return (f"Causal LM loss in nats per character: the mean of -log p(next character) over every "
            f"character but the first of the metadata's heldout_text ({n_characters:,} characters: the start "
            f"of the last {spec.data['val_fraction']:.0%} of plmcourse.data.python_corpus() at build time, "
            f"cut to 1 + a multiple of {T - 1}), each predicted exactly once: windows of {T} characters "
            f"starting every {T - 1}, scored by plmcourse.nn.causal_lm_loss in chunks of 256 windows, "
            f"float32, eval mode. The training text is the first {1 - spec.data['val_fraction']:.0%}.")


def _prepare_gpt(spec, metadata):
    """Tokenizer, model, get_batch and loss_fn for the tiny GPT; adds tokenizer, config, held-out text,
    baselines to metadata."""
    corpus = data.python_corpus()
    tokenizer = data.CharTokenizer(corpus)  # notebook 05's: every character of the whole corpus
    train_text, heldout_text = data.split(corpus, spec.data["val_fraction"])
    T = spec.config["max_len"]
    heldout_text = heldout_text[:1 + (len(heldout_text) - 1) // (T - 1) * (T - 1)]
    # Python's docs change a little between Python versions: the held-out text goes into
    # the file, so the held-out loss can be recomputed on any Python.
    metadata.update(tokenizer="CharTokenizer", vocabulary=json.dumps(tokenizer.chars),
                    heldout_text=heldout_text,
                    corpus_sha256=hashlib.sha256(corpus.encode()).hexdigest(),
                    heldout_loss_description=_gpt_describe(spec, len(heldout_text), T))
    config = pnn.GPTConfig(vocab_size=len(tokenizer), **spec.config)
    metadata["config"] = json.dumps(asdict(config))
    torch.manual_seed(spec.seed)
    model = pnn.GPT(config)

    train_ids = torch.from_numpy(tokenizer.encode(train_text))
    generator = torch.Generator().manual_seed(spec.seed)

    def get_batch(step):
        starts = torch.randint(0, len(train_ids) - T, (spec.batch_size,), generator=generator)
        return torch.stack([train_ids[s:s + T] for s in starts.tolist()])

    def loss_fn(model, x):
        return pnn.causal_lm_loss(model(x), x)

    # Baselines as in notebook 05: character frequencies, and the previous character
    # (a bigram model), both counted on the training text with add-one smoothing.
    V, train_np, targets = len(tokenizer), train_ids.numpy(), tokenizer.encode(heldout_text)
    unigram = np.bincount(train_np, minlength=V) + 1.0
    bigram = np.ones((V, V))
    np.add.at(bigram, (train_np[:-1], train_np[1:]), 1.0)
    bigram /= bigram.sum(axis=1, keepdims=True)
    metadata.update(
        baseline_uniform_loss=repr(math.log(V)),
        baseline_unigram_loss=repr(float(-np.log(unigram[targets[1:]] / unigram.sum()).mean())),
        baseline_bigram_loss=repr(float(-np.log(bigram[targets[:-1], targets[1:]]).mean())),
        baselines_description="counted on the training text with add-one smoothing, -log p averaged over "
                              "the same held-out characters (all but the first): uniform = log V, unigram "
                              "= character frequencies, bigram = p(character | previous character).")
    return tokenizer, model, get_batch, loss_fn


# ----------------------------------------------------------------------------
# Building, loading, evaluating


def _spec(name) -> Spec:
    if name not in CHECKPOINTS:
        raise ValueError(f"There is no checkpoint named {name!r}: the course has {', '.join(CHECKPOINTS)}, "
                         f"built with `{BUILD_COMMAND} NAME`.")
    return CHECKPOINTS[name]


def _heldout(metadata, tokenizer, device):
    """The held-out batch and the function that scores a model on it: score(model, batch) -> float."""
    if metadata["model"] == "BertForPreTraining":
        return _bert_heldout(metadata, tokenizer, device), _bert_heldout_loss
    return _gpt_heldout(metadata, tokenizer, device), _gpt_heldout_loss


def _sha256(batch) -> str:
    tensors = batch if isinstance(batch, tuple) else (batch,)
    digest = hashlib.sha256()
    for t in tensors:
        digest.update(t.detach().cpu().to(torch.int64).contiguous().numpy().tobytes())
    return digest.hexdigest()


def heldout_batch(checkpoint: Checkpoint):
    """The held-out data of `checkpoint`, on its model's device, exactly as at build time.

    tiny-bert: (inputs, segments, attention_mask, labels, is_next), each (1024, 26) or (1024,);
    tiny-bert-reviews: the same five, each (1024, 64) or (1024,) (is_next is 0: no NSP);
    tiny-gpt:  windows (1080, 64) of the stored held-out text.
    Raises ValueError if that data no longer matches the file (e.g. the review corpus changed).
    """
    return _checked_heldout(checkpoint)[0]


def _checked_heldout(checkpoint):
    device = next(checkpoint.model.parameters()).device
    batch, score = _heldout(checkpoint.metadata, checkpoint.tokenizer, device)
    if _sha256(batch) != checkpoint.metadata["heldout_sha256"]:
        raise ValueError(f"The held-out data of {checkpoint.name} made today differs from the data it was "
                         f"built with (has plmcourse.data changed?): rebuild it with "
                         f"`{BUILD_COMMAND} {checkpoint.name}`.")
    return batch, score


def heldout_loss(checkpoint: Checkpoint) -> float:
    """The held-out loss of checkpoint.model, computed as metadata["heldout_loss_description"] says.

    For the shipped model it equals float(metadata["heldout_loss"]) up to float32 rounding.
    """
    batch, score = _checked_heldout(checkpoint)
    was_training = checkpoint.model.training
    checkpoint.model.eval()
    with torch.no_grad():
        loss = score(checkpoint.model, batch)
    checkpoint.model.train(was_training)
    return loss


def _curve(history):
    """The training curve, small enough for the metadata: loss every step, held-out loss per evaluation."""
    return json.dumps({"step": history.steps, "train_loss": [round(x, 4) for x in history.loss],
                       "eval_step": history.eval_steps,
                       "heldout_loss": [round(e["heldout_loss"], 4) for e in history.evals]})


def build_checkpoint(name: str, out_dir=None, progress: bool = True) -> Path:
    """Train checkpoint `name` from its seed on the CPU and write <out_dir>/<name>.safetensors.

    out_dir defaults to plmcourse/pretrained/weights/. The model trains with
    plmcourse.train.train for CHECKPOINTS[name].steps steps, evaluated on the held-out
    data 5 times on the way; the file holds its state_dict and, as metadata, everything
    load_checkpoint needs. The CPU keeps it reproducible: the same seed, PyTorch and
    thread count give the same weights. Returns the path written.
    """
    spec = _spec(name)
    start, start_cpu = time.perf_counter(), time.process_time()
    metadata = {"format": FORMAT, "name": name, "model": spec.model, "spec": json.dumps(asdict(spec)),
                "seed": str(spec.seed), "steps": str(spec.steps), "lr": repr(spec.lr),
                "batch_size": str(spec.batch_size)}
    prepare = _prepare_bert if spec.model == "BertForPreTraining" else _prepare_gpt
    tokenizer, model, get_batch, loss_fn = prepare(spec, metadata)

    batch, score = _heldout(metadata, tokenizer, "cpu")
    metadata["heldout_sha256"] = _sha256(batch)
    if progress:
        print(f"{name}: {sum(p.numel() for p in model.parameters()):,} parameters, {spec.steps} steps "
              f"on {torch.get_num_threads()} CPU threads", flush=True)
    history = train(model, get_batch, loss_fn, steps=spec.steps, lr=spec.lr,
                    eval_fn=lambda m: {"heldout_loss": score(m, batch)}, eval_every=max(1, spec.steps // 5),
                    progress=progress, desc=f"building {name}")

    checkpoint = Checkpoint(model.eval(), tokenizer, model.config, metadata)
    metadata["heldout_loss"] = repr(heldout_loss(checkpoint))
    if spec.model == "BertForPreTraining":
        with torch.no_grad():
            metadata.update({k: repr(v) for k, v in _bert_extras(model, batch, spec.data.get("unit") != "reviews").items()})
    metadata.update(history=_curve(history), torch_version=torch.__version__, numpy_version=np.__version__,
                    python_version=platform.python_version(), plmcourse_version=plmcourse.__version__,
                    torch_threads=str(torch.get_num_threads()),
                    build_seconds=f"{time.perf_counter() - start:.1f}",
                    # CPU time of all threads: unlike the wall clock, it hardly changes when
                    # other programs share the cores.
                    build_cpu_seconds=f"{time.process_time() - start_cpu:.1f}")

    path = Path(WEIGHTS_DIR if out_dir is None else out_dir) / f"{name}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    safetensors.torch.save_file(model.state_dict(), str(path), metadata=metadata)
    path.chmod(0o644)  # safetensors writes 0600; a file the package ships is for everyone to read
    if progress:
        print(f"{name}: held-out loss {float(metadata['heldout_loss']):.4f} (unigram baseline "
              f"{float(metadata['baseline_unigram_loss']):.4f}); wrote {path} "
              f"({path.stat().st_size / 1e6:.2f} MB) in {metadata['build_seconds']} s", flush=True)
    return path


def load_checkpoint(name: str, device=None, directory=None) -> Checkpoint:
    """Checkpoint `name` from <directory>/<name>.safetensors (default plmcourse/pretrained/weights/).

    The model is in eval mode on `device` (default plmcourse.nn.default_device()); the
    tokenizer is rebuilt from the stored vocabulary. An unknown name raises ValueError,
    a missing file FileNotFoundError, each with the command that builds it.
    """
    _spec(name)
    path = Path(WEIGHTS_DIR if directory is None else directory) / f"{name}.safetensors"
    if not path.is_file():
        raise FileNotFoundError(f"The checkpoint {name!r} is not built ({path} is missing): run "
                                f"`{BUILD_COMMAND} {name}` (2-3 minutes on a CPU).")
    with safetensors.safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
    if metadata.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} file: rebuild it with `{BUILD_COMMAND} {name}`.")

    vocabulary = json.loads(metadata["vocabulary"])
    config_args = json.loads(metadata["config"])
    if metadata["model"] == "BertForPreTraining":
        tokenizer = _bert_tokenizer(vocabulary)
        config = pnn.BertConfig(**config_args)
        model = pnn.BertForPreTraining(config)
    else:
        tokenizer = data.CharTokenizer("".join(vocabulary))
        config = pnn.GPTConfig(**config_args)
        model = pnn.GPT(config)
    model.load_state_dict(safetensors.torch.load_file(str(path)))  # strict: every tensor, no extra
    device = pnn.default_device() if device is None else torch.device(device)
    return Checkpoint(model.to(device).eval(), tokenizer, config, metadata)


def main(argv=None) -> int:
    """Command line: `build [NAME ...]` builds the named checkpoints, all of them when none is named."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] != "build":
        print(f"usage: {BUILD_COMMAND} [NAME ...]   (names: {', '.join(CHECKPOINTS)})", file=sys.stderr)
        return 2
    names = argv[1:] or list(CHECKPOINTS)
    for name in names:
        _spec(name)  # fail on a misspelt name before spending minutes on the others
    for name in names:
        build_checkpoint(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
