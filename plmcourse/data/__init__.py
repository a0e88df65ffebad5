"""Corpora and tokenizers that ship with the course (offline first)."""
