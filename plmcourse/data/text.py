"""English text that ships with Python itself, and the simplest tokenizers for it.

Offline first: the Python standard library carries real English prose, the
documentation of the language (`pydoc_data.topics`, about 0.46 MB) and the
docstrings of its modules. Its exact text changes a little between Python versions,
so results quoted in notebooks are bounds, not exact numbers.
"""

from __future__ import annotations

import importlib
import re
import types
from collections import Counter

import numpy as np

# Modules whose docstrings are mostly prose; a fixed list keeps the corpus deterministic.
DOCSTRING_MODULES = (
    "argparse", "asyncio", "collections", "contextlib", "csv", "dataclasses", "datetime",
    "decimal", "difflib", "email", "enum", "fractions", "functools", "heapq", "http.client",
    "inspect", "io", "itertools", "json", "logging", "os", "pathlib", "pickle", "random",
    "re", "shutil", "socket", "statistics", "string", "subprocess", "tarfile", "textwrap",
    "threading", "unittest", "urllib.parse", "uuid", "zipfile",
)


def python_docs() -> str:
    """The language reference topics of `help()` (pydoc_data.topics), in a fixed order."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))


def stdlib_docstrings() -> str:
    """Docstrings of DOCSTRING_MODULES and of their public classes and functions, in a fixed order."""
    pieces = []
    for name in DOCSTRING_MODULES:
        module = importlib.import_module(name)
        if module.__doc__:
            pieces.append(module.__doc__)
        for attr, obj in sorted(vars(module).items()):  # vars(), not getattr(): no lazy-import side effects
            if attr.startswith("_") or isinstance(obj, types.ModuleType):
                continue
            if getattr(obj, "__module__", None) != module.__name__:
                continue
            if (callable(obj) or isinstance(obj, type)) and obj.__doc__:
                pieces.append(obj.__doc__)
    return "\n\n".join(pieces)


def python_corpus() -> str:
    """Both together: about 1 MB of English about programming, the course's default corpus."""
    return python_docs() + "\n\n" + stdlib_docstrings()


WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def words(text: str) -> list[str]:
    """Lower-cased alphabetic words (apostrophes kept inside words); punctuation and digits dropped."""
    return WORD.findall(text.lower())


class CharTokenizer:
    """One id per distinct character of the training text."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self):
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        unknown = set(text) - self.index.keys()
        if unknown:
            raise ValueError(f"characters not in the vocabulary: {sorted(unknown)[:10]}")
        return np.fromiter((self.index[c] for c in text), dtype=np.int64, count=len(text))

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


class WordTokenizer:
    """Words seen at least `min_count` times get an id; the rest map to <unk> (id 0)."""

    UNK = "<unk>"

    def __init__(self, tokens: list[str], min_count: int = 1, specials: tuple[str, ...] = ()):
        counts = Counter(tokens)
        kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        self.itos = [self.UNK, *specials, *kept]
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.counts = np.array([0] * (1 + len(specials)) + [counts[w] for w in kept], dtype=np.int64)

    def __len__(self):
        return len(self.itos)

    def encode(self, tokens: list[str]) -> np.ndarray:
        return np.array([self.stoi.get(t, 0) for t in tokens], dtype=np.int64)

    def decode(self, ids) -> list[str]:
        return [self.itos[int(i)] for i in ids]


def split(sequence, val_fraction: float = 0.1):
    """Deterministic split: the first part trains, the last `val_fraction` validates."""
    cut = int(round(len(sequence) * (1.0 - val_fraction)))
    return sequence[:cut], sequence[cut:]
