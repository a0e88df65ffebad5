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

# The review world: a synthetic corpus for notebooks 04-06 (see plmcourse/data/reviews.py).
from plmcourse.data.reviews import (  # noqa: E402
    nsp_pairs,
    review_overall_task,
    review_documents,
    review_sentiment_task,
    review_vocabulary,
)
from plmcourse.data.reviews import review_acceptability_task  # noqa: E402

__all__ += ["review_vocabulary", "review_documents", "review_sentiment_task", "nsp_pairs",
            "review_overall_task"]
__all__ += ["review_acceptability_task"]

# The word-sense world: a synthetic corpus for notebooks 01-02 (see plmcourse/data/synthetic.py).
from plmcourse.data.synthetic import (  # noqa: E402
    ANALOGIES,
    SIMILARITY_PAIRS,
    sense_sentences,
    synthetic_corpus,
)

__all__ += ["synthetic_corpus", "sense_sentences", "SIMILARITY_PAIRS", "ANALOGIES"]

# BERT's WordPiece tokenizer (notebook 07, see plmcourse/data/wordpiece.py).
from plmcourse.data.wordpiece import WordPieceTokenizer, wordpiece  # noqa: E402

__all__ += ["wordpiece", "WordPieceTokenizer"]

# Probing datasets: part of speech in context, bigram shift, self-similarity (notebook 07,
# see plmcourse/data/probing.py).
from plmcourse.data.probing import (  # noqa: E402
    MONOSEMOUS,
    POLYSEMOUS,
    POS_TEST_WORDS,
    POS_WORDS,
    bigram_shift_examples,
    context_sentences,
    pos_probe_examples,
    probe_sentences,
    review_probe_examples,
    swap_bigram,
)

__all__ += ["pos_probe_examples", "bigram_shift_examples", "probe_sentences", "swap_bigram",
            "context_sentences", "POS_WORDS", "POS_TEST_WORDS", "POLYSEMOUS", "MONOSEMOUS",
            "review_probe_examples"]

# Sentence similarity: graded pairs in English and in the review world, entailment triples,
# retrieval (notebook 08, see plmcourse/data/similarity.py).
from plmcourse.data.similarity import (  # noqa: E402
    REVIEW_KINDS,
    STS_KINDS,
    Retrieval,
    SimilarityPair,
    review_nli_triples,
    review_retrieval,
    review_sentences,
    review_similarity_pairs,
    sts_pairs,
    sts_retrieval,
)

__all__ += ["sts_pairs", "sts_retrieval", "review_similarity_pairs", "review_nli_triples", "review_retrieval",
            "review_sentences", "SimilarityPair", "Retrieval", "REVIEW_KINDS", "STS_KINDS"]

# In-context learning: few-shot prompts, maps only the context can solve, repeated tokens
# (notebook 11, see plmcourse/data/icl.py).
from plmcourse.data.icl import (  # noqa: E402
    ICL_VOCAB,
    LABELS,
    SYMBOLS,
    k_shot_prompt,
    mapping_episode,
    mapping_sequences,
    repeated_sequences,
)

__all__ += ["k_shot_prompt", "mapping_episode", "mapping_sequences", "repeated_sequences", "ICL_VOCAB", "LABELS",
            "SYMBOLS"]

# Pictures and captions a CPU can learn (notebook 14, see plmcourse/data/multimodal.py).
from plmcourse.data.multimodal import HELD_OUT, MultimodalVocab, blank_image, caption_world  # noqa: E402

__all__ += ["caption_world", "MultimodalVocab", "blank_image", "HELD_OUT"]

# Generated worlds for notebook 13: two languages, facts about entities, a domain, DNA-like sequences
# (see plmcourse/data/transfer.py).
from plmcourse.data import transfer  # noqa: E402

__all__ += ["transfer"]
