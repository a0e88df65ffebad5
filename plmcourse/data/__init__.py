"""Corpora and tokenizers that ship with the course (offline first)."""

from plmcourse.data.text import (
    CharTokenizer,
    WordTokenizer,
    python_corpus,
    python_docs,
    split,
    stdlib_docstrings,
    words,
)

__all__ = ["python_docs", "stdlib_docstrings", "python_corpus", "words", "CharTokenizer",
           "WordTokenizer", "split"]
