"""In-context learning data (notebook 11): few-shot prompts, and tasks only the context can solve.

    k_shot_prompt(demonstrations, query, k, template, separator, rng)
        GPT-3's format: k solved examples, then the query's input, for the model to continue
    SYMBOLS, LABELS, ICL_VOCAB          the characters of the mapping task
    mapping_episode(rng, ...)           one task: a fresh map from symbols to labels, and examples
    mapping_sequences(rng, n, ...)      (n, 3 * n_pairs) token ids "a3 k1 a3 ...", a map each
    repeated_sequences(rng, n, ...)     (n, T) random tokens in which a random block repeats

A mapping is drawn afresh for every sequence, so no fixed answer can be memorised: the
label of a symbol is known only from an earlier example in the same sequence.
"""

from __future__ import annotations

import numpy as np

__all__ = ["k_shot_prompt", "SYMBOLS", "LABELS", "ICL_VOCAB", "mapping_episode", "mapping_sequences",
           "repeated_sequences"]

SYMBOLS = "abcdefghijklmnopqrstuvwxyz"  # the inputs x
LABELS = "0123456789"  # the outputs y
ICL_VOCAB = " " + SYMBOLS + LABELS  # token id = index; " " (id 0) separates examples


def k_shot_prompt(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
    """A few-shot prompt: k demonstrations, then the query's input, for a model to complete.

    demonstrations: a sequence of (x, y) string pairs, the labelled examples.
    query: the index in `demonstrations` of the example to answer. Its y is never shown, and it
        is never one of the k demonstrations (that would give the answer away).
    k: how many demonstrations, 0 (zero-shot) to len(demonstrations) - 1.
    template: a str.format pattern with the field {x}, then {y} after it (ValueError otherwise);
        a demonstration is template.format(x=x, y=y), the query is the template cut just before
        "{y}" with its x.
    separator: put between the rendered parts.
    rng: a np.random.Generator (None: a fresh one). The demonstrations are
        rng.choice(others, size=k, replace=False), in that order, where `others` are the
        indices other than `query` in increasing order.
    """
    n = len(demonstrations)
    if not 0 <= query < n:
        raise IndexError(f"query={query} is not an index into {n} demonstrations.")
    if not 0 <= k <= n - 1:
        raise ValueError(f"k={k}: there are {n - 1} demonstrations besides the query.")
    if "{x}" not in template or template.find("{y}") < template.find("{x}"):
        raise ValueError(f"template {template!r} needs the field {{x}}, then {{y}} after it.")
    rng = np.random.default_rng() if rng is None else rng
    others = np.delete(np.arange(n), query)  # never the query itself
    chosen = rng.choice(others, size=k, replace=False)
    parts = [template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in chosen]
    query_x = demonstrations[query][0]
    parts.append(template[:template.index("{y}")].format(x=query_x))  # the answer is the model's to write
    return separator.join(parts)


def mapping_episode(rng, n_symbols=6, n_labels=4, n_examples=16):
    """One in-context task: `n_symbols` distinct symbols, each given a label at random (a fresh
    map), and `n_examples` (x, y) examples drawn from it with replacement.

    Returns (examples, mapping): a list of (x, y) pairs of one character each, and {x: y}.
    """
    symbols = rng.choice(len(SYMBOLS), size=n_symbols, replace=False)
    labels = rng.integers(n_labels, size=n_symbols)
    mapping = {SYMBOLS[s]: LABELS[y] for s, y in zip(symbols, labels)}
    picks = rng.integers(n_symbols, size=n_examples)
    return [(SYMBOLS[symbols[i]], LABELS[labels[i]]) for i in picks], mapping


def mapping_sequences(rng, n, n_symbols=6, n_labels=4, n_pairs=16):
    """(n, 3 * n_pairs) int64 token ids of ICL_VOCAB: each row is one episode written
    "x y " n_pairs times ("a3 k1 a3 f0 ..."), with its own map. Position 3i holds the i-th
    input; the model's prediction there is its guess of the i-th label, after i examples."""
    symbols = np.argsort(rng.random((n, len(SYMBOLS))), axis=1)[:, :n_symbols]  # (n, S) distinct per row
    labels = rng.integers(n_labels, size=(n, n_symbols))  # (n, S): the maps
    picks = rng.integers(n_symbols, size=(n, n_pairs))  # (n, P)
    rows = np.arange(n)[:, None]
    out = np.zeros((n, 3 * n_pairs), dtype=np.int64)  # 0 is " "
    out[:, 0::3] = 1 + symbols[rows, picks]
    out[:, 1::3] = 1 + len(SYMBOLS) + labels[rows, picks]
    return out


def repeated_sequences(rng, n, vocab_size, length, min_period=4, copies=None):
    """(n, length) int64 random tokens in [0, vocab_size) made of a repeated random block.

    Row i is a random block of `periods[i]` tokens (drawn per row from [min_period,
    length // 2]) written `copies` times in a row, then random tokens to the end; with
    copies=None the block repeats to the end. Also returns the (n,) periods: the target at
    position t is a copy when periods[i] < t < copies * periods[i] (or t > periods[i]).

    The period differs between rows, so a head cannot find the earlier copy by counting back
    a fixed number of positions: it has to look for the same token (an induction head).
    """
    periods = rng.integers(min_period, length // 2 + 1, size=n)
    tokens = rng.integers(vocab_size, size=(n, length))
    position = np.arange(length)[None, :]
    repeated = position < (length if copies is None else copies * periods[:, None])  # (n, length)
    source = np.where(repeated, position % periods[:, None], position)  # where each token is copied from
    return np.take_along_axis(tokens, source, axis=1), periods
