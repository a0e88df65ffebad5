"""word2vec: the course's skip-gram trainer against gensim's Word2Vec, side by side on the same corpus.

Corpus: the course's (`plmcourse.data.text.python_corpus`) as `data.words`, words seen
fewer than MIN_COUNT times dropped, as notebook 01 does: about 89,000 tokens of 1,806
words. Both trainers get that same token stream (gensim as sentences of 10,000 words,
its own limit per sentence) and the same settings: skip-gram with negative sampling,
DIM dimensions, dynamic window WINDOW, NEGATIVES negatives from count**0.75,
subsampling threshold SAMPLE, EPOCHS passes. Each keeps its own optimiser and defaults:
the course Adam (lr 0.01, 4096 pairs per step), gensim plain SGD with its learning
rate falling linearly from 0.025 to 0.0001.

Cores: the course with torch.set_num_threads(n) against gensim with workers=n, for
n = 1 and 2. Each pair of variants takes turns (`interleaved_medians`: WARMUP rounds,
then ROUNDS timed), so a disturbance on the machine hits both alike, or nearly: the
course's batched steps slowed down more than gensim's per-pair loop while another
process loaded this 2-core VM, and torch's two threads (with OMP_WAIT_POLICY=PASSIVE,
which `import plmcourse` sets) wake a sleeping thread at every parallel operation, so
the course's 2-thread time swings from run to run far more than gensim's 2 workers'
(see the speed notes in `plmcourse.nn.word_vectors`).

Speed: words/s = corpus tokens (before subsampling) x EPOCHS / wall time of one
training call, the same count for both: `pnn.train_skipgram(...)` and
`gensim.models.Word2Vec(sentences, ...)` (which also builds its vocabulary, about 0.02 s).
gensim's own log counts "effective words", those left after subsampling (about 73% here);
that count is not used. Seconds are medians over the rounds.

Quality, computed alike from the input vectors of every run (each run has its own
seed): RELATED is a fixed list of pairs of related words of this corpus, chosen
beforehand (antonyms, synonyms, abbreviations, words of one family: true/false,
dictionary/dict, stdout/stderr, ...), in the spirit of notebook 01's "expected
partners". For each word of a pair, the partner's rank among all other words by cosine
similarity: hit@10 is the share of partners among the 10 nearest neighbours (the
notebook's test), MRR the mean of 1 / rank. Mean +- standard deviation over the runs;
random normal vectors give the chance level.

Without gensim installed the course rows are still measured; the gensim rows say so.
"""

from __future__ import annotations

import numpy as np
import torch

from bench.common import interleaved_medians, write_result
from plmcourse import data
from plmcourse import nn as pnn

DIM, WINDOW, NEGATIVES, SAMPLE, EPOCHS, MIN_COUNT = 50, 5, 5, 1e-3, 5, 5
CORES = (1, 2)
WARMUP, ROUNDS = 1, 5
SENTENCE = 10_000  # gensim trains on at most 10,000 words of a sentence
GENSIM_MISSING = "gensim not installed: pip install gensim"

RELATED = """
true false, dictionary dict, thread lock, exception raised, key value, keys values, read write,
reading writing, input output, encode decode, get set, first last, open close, opened closed,
request response, upper lower, uppercase lowercase, integer float, int float, list tuple,
lists tuples, add remove, left right, directory file, files directories, path filename,
positive negative, src dst, source destination, class instance, method function,
methods functions, argument parameter, arguments parameters, zip tar, debug info, warning error,
stdout stderr, stdin stdout, async await, decimal fraction, mean median, header body, host port,
args kwargs, start stop, before after, ascii unicode, bytes str, local global, nonlocal global,
break continue, try except, yield return, sort sorted, reverse reversed, len length,
bool boolean, none null, tab space, newline whitespace, quote quotes, prefix suffix,
binary decimal, lambda def, getattr setattr, parse parser, compile eval, exec eval, raise raises,
base derived, user group, owner group, iterator generator, iterable iterator, callable function,
optional required, default defaults, flag flags, logger handler, formatter handler, insert delete
"""


def related_pairs():
    return [tuple(pair.split()) for pair in RELATED.replace("\n", " ").split(",")]


def corpus():
    """Notebook 01's stream: (token ids without the rare words, the tokenizer)."""
    tokens = data.words(data.python_corpus())
    tokenizer = data.WordTokenizer(tokens, min_count=MIN_COUNT)
    ids = tokenizer.encode(tokens)
    return ids[ids > 0], tokenizer  # id 0 is <unk>, the dropped words


# ----------------------------------------------------------------------------
# The trainers: each returns the (V, DIM) input vectors in the tokenizer's order


def train_course(ids, vocab_size, seed):
    vectors, _ = pnn.train_skipgram(ids, vocab_size, dim=DIM, window=WINDOW, negatives=NEGATIVES,
                                    epochs=EPOCHS, subsample_threshold=SAMPLE, seed=seed, device="cpu",
                                    progress=False)
    return vectors


def train_gensim(sentences, tokenizer, workers, seed):
    from gensim.models import Word2Vec

    model = Word2Vec(sentences, vector_size=DIM, window=WINDOW, negative=NEGATIVES, sample=SAMPLE,
                     epochs=EPOCHS, sg=1, hs=0, ns_exponent=0.75, min_count=1, workers=workers, seed=seed)
    vectors = np.zeros((len(tokenizer), DIM), dtype=np.float32)  # row 0, <unk>, is never trained
    for word, row in model.wv.key_to_index.items():
        vectors[tokenizer.stoi[word]] = model.wv.vectors[row]
    return vectors


def gensim_installed():
    try:
        import gensim  # noqa: F401
    except ImportError:
        return False
    return True


def recorder(train):
    """A variant for interleaved_medians: every call trains with the next seed and keeps the vectors."""
    runs = []

    def run():
        runs.append(train(seed=len(runs)))

    return run, runs


# ----------------------------------------------------------------------------
# Quality


def partner_ranks(vectors, stoi, pairs):
    """For each pair (a, b), b's rank among a's neighbours by cosine and a's among b's (1 = nearest)."""
    vectors = vectors[1:]  # without <unk>: neither trainer saw it
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)  # a word is not its own neighbour
    ranks = []
    for a, b in pairs:
        i, j = stoi[a] - 1, stoi[b] - 1
        ranks += [1 + np.sum(sims[i] > sims[i, j]), 1 + np.sum(sims[j] > sims[j, i])]
    return np.array(ranks)


def quality(runs, stoi, pairs):
    """{"hit@10": "mean +- sd", "MRR": ...} over the runs' vectors."""
    scores = {"hit@10": [], "MRR": []}
    for vectors in runs:
        ranks = partner_ranks(vectors, stoi, pairs)
        scores["hit@10"].append(np.mean(ranks <= 10))
        scores["MRR"].append(np.mean(1.0 / ranks))
    return {name: f"{np.mean(v):.3f} ± {np.std(v):.3f}" for name, v in scores.items()}


# ----------------------------------------------------------------------------
# The comparison


def compare(cores, ids, tokenizer, sentences, with_gensim):
    """Rows for the course with `cores` torch threads and gensim with `cores` workers, in turns."""
    variants = {"course": recorder(lambda seed: train_course(ids, len(tokenizer), seed))}
    if with_gensim:
        variants["gensim"] = recorder(lambda seed: train_gensim(sentences, tokenizer, cores, seed))
    threads = torch.get_num_threads()
    torch.set_num_threads(cores)
    try:
        seconds = interleaved_medians({name: run for name, (run, _) in variants.items()},
                                      repeats=ROUNDS, warmup=WARMUP)
    finally:
        torch.set_num_threads(threads)
    rows = [row(cores, f"course, torch threads={cores}", seconds["course"], seconds.get("gensim"),
                variants["course"][1], ids, tokenizer)]
    if with_gensim:
        rows.append(row(cores, f"gensim, workers={cores}", seconds["gensim"], seconds["gensim"],
                        variants["gensim"][1], ids, tokenizer))
    else:
        rows.append({"cores": cores, "variant": f"gensim, workers={cores}", "words/s": GENSIM_MISSING,
                     "ratio to gensim": "-", "train s": "-", "hit@10": "-", "MRR": "-", "runs": 0})
    return rows


def row(cores, variant, seconds, gensim_seconds, runs, ids, tokenizer):
    ratio = round(gensim_seconds / seconds, 2) if gensim_seconds else "-"
    return {"cores": cores, "variant": variant, "words/s": round(len(ids) * EPOCHS / seconds),
            "ratio to gensim": ratio, "train s": round(seconds, 2),
            **quality(runs, tokenizer.stoi, related_pairs()), "runs": len(runs)}


def random_row(tokenizer):
    rng = np.random.default_rng(0)
    runs = [rng.standard_normal((len(tokenizer), DIM)) for _ in range(WARMUP + ROUNDS)]
    return {"cores": "-", "variant": "random normal vectors", "words/s": "-", "ratio to gensim": "-",
            "train s": "-", **quality(runs, tokenizer.stoi, related_pairs()), "runs": len(runs)}


def main():
    ids, tokenizer = corpus()
    words = tokenizer.decode(ids)
    sentences = [words[i:i + SENTENCE] for i in range(0, len(words), SENTENCE)]
    with_gensim = gensim_installed()
    rows = [row for cores in CORES for row in compare(cores, ids, tokenizer, sentences, with_gensim)]
    rows.append(random_row(tokenizer))
    notes = (f"Corpus: {len(ids):,} tokens, {len(tokenizer) - 1:,} words (min count {MIN_COUNT}), "
             f"{EPOCHS} epochs; dim {DIM}, window {WINDOW}, {NEGATIVES} negatives, sample {SAMPLE}. "
             f"words/s = {len(ids):,} x {EPOCHS} / median training seconds (tokens before subsampling, "
             f"for both). Quality: {len(related_pairs())} related pairs, both ways; hit@10 and MRR "
             f"of the partner by cosine, mean ± sd over the runs (seeds 0..{WARMUP + ROUNDS - 1}). "
             "The course's vectors do not depend on the number of threads. The two optimisers differ "
             "(Adam against SGD with a decaying rate); on a corpus this small gensim's SGD needs more "
             "epochs to reach the same quality. Timings are sensitive to other processes on the "
             "machine, the course's with 2 threads most (see the docstring of bench/word2vec.py).")
    return write_result("word2vec", {"title": "word2vec skip-gram: course trainer vs gensim (CPU)",
                                     "notes": notes, "rows": rows})


if __name__ == "__main__":
    print(main())
