"""Sentence similarity data for notebook 08: graded pairs, entailment triples, a retrieval task.

Two worlds, because the course has two kinds of model:

- **English** (`sts_pairs`, `sts_retrieval`): pairs written for the course in the style of
  STS-B, for all-MiniLM-L6-v2, which reads any English (see plmcourse/data/sts_pairs.py
  for the rubric and the kinds: paraphrase, related, detail, negation, overlap_trap, unrelated).
- **The review world** (`review_similarity_pairs`, `review_nli_triples`, `review_retrieval`,
  `review_sentences`): the tiny BERT of notebook 04 knows only its ~100 words, so its
  sentences are built from them. MiniLM reads them too, so all models meet on this set.

The review pairs are graded by rule, each rule a kind of pair:

    kind         what the two sentences share                         score
    paraphrase   the same noun and adjective, said another way        5.0  the soup was superb . / what a superb soup .
    synonym      the same noun, another adjective of the same kind    4.0  the soup was superb . / i loved the soup , it was great .
    same_topic   the topic and the sentiment, another noun            2.5  the soup was superb . / the wine was lovely .
    opposite     the same noun, the opposite sentiment                1.5  the soup was superb . / the soup was awful .
    other_topic  only the sentiment                                   0.5  the soup was superb . / the screen was great .
    unrelated    nothing                                              0.0  the soup was superb . / the screen was awful .

"opposite" is a word-overlap trap: the two sentences can differ in one word and mean the
opposite. Everything is generated from an explicit seed.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from plmcourse.data.reviews import _ADVERBS, _VERBS, NEGATIVE, POSITIVE, TOPICS, review_documents
from plmcourse.data.sts_pairs import KINDS as STS_KINDS
from plmcourse.data.sts_pairs import RETRIEVAL_HARD, RETRIEVAL_POOL, RETRIEVAL_QUERIES, STS_PAIRS, SimilarityPair

__all__ = ["SimilarityPair", "Retrieval", "REVIEW_KINDS", "STS_KINDS", "sts_pairs", "sts_retrieval", "review_similarity_pairs",
           "review_nli_triples", "review_retrieval", "review_sentences"]

REVIEW_KINDS = {"paraphrase": 5.0, "synonym": 4.0, "same_topic": 2.5, "opposite": 1.5, "other_topic": 0.5,
                "unrelated": 0.0}
# Ways to say "the NOUN was ADJ" (a verb of the adjective's sentiment fills {verb}).
_TEMPLATES = ("the {noun} was {adj} .", "the {noun} was {adv} {adj} .", "the {noun} was {adj} , i {verb} it .",
              "i {verb} the {noun} , it was {adj} .", "what a {adj} {noun} .")
_TOPIC_OF = {noun: topic for topic, nouns in TOPICS.items() for noun in nouns}


class Retrieval(NamedTuple):
    """queries[i] is answered by pool[answers[i]]; the rest of the pool are distractors.
    hard[i]: the pool holds a look-alike of query i (most of its words, another meaning)."""

    queries: list[str]
    pool: list[str]
    answers: np.ndarray
    hard: np.ndarray


def sts_pairs() -> list[SimilarityPair]:
    """The English pairs (a, b, score 0-5, kind), written for the course; see plmcourse/data/sts_pairs.py."""
    return list(STS_PAIRS)


def sts_retrieval() -> Retrieval:
    """English queries, each answered by one paraphrase in a pool that also holds look-alike distractors."""
    hard = np.isin(np.arange(len(RETRIEVAL_QUERIES)), RETRIEVAL_HARD)
    return Retrieval(list(RETRIEVAL_QUERIES), list(RETRIEVAL_POOL), np.arange(len(RETRIEVAL_QUERIES)), hard)


def _pick(rng, items):
    return items[int(rng.integers(len(items)))]


def _say(rng, noun, adj, template=None):
    """One sentence saying that `noun` was `adj`, in template number `template` (random if None)."""
    template = int(rng.integers(len(_TEMPLATES))) if template is None else template
    verb = _pick(rng, _VERBS[adj in POSITIVE])
    return _TEMPLATES[template].format(noun=noun, adj=adj, adv=_pick(rng, _ADVERBS), verb=verb)


def _other(rng, items, than):
    return _pick(rng, [item for item in items if item != than])


def _polar(adj, same=True):
    positive = adj in POSITIVE
    return POSITIVE if positive == same else NEGATIVE


def _pair(rng, kind):
    """Two sentences of the given kind; the first is about a random noun and adjective."""
    topic = _pick(rng, list(TOPICS))
    noun, adj = _pick(rng, TOPICS[topic]), _pick(rng, POSITIVE + NEGATIVE)
    first = int(rng.integers(len(_TEMPLATES)))
    a = _say(rng, noun, adj, first)
    other_topic = _other(rng, list(TOPICS), topic)
    if kind == "paraphrase":
        b = _say(rng, noun, adj, _other(rng, range(len(_TEMPLATES)), first))
    elif kind == "synonym":
        b = _say(rng, noun, _other(rng, _polar(adj), adj))
    elif kind == "same_topic":
        b = _say(rng, _other(rng, TOPICS[topic], noun), _pick(rng, _polar(adj)))
    elif kind == "opposite":
        b = _say(rng, noun, _pick(rng, _polar(adj, same=False)))
    elif kind == "other_topic":
        b = _say(rng, _pick(rng, TOPICS[other_topic]), _pick(rng, _polar(adj)))
    else:  # unrelated
        b = _say(rng, _pick(rng, TOPICS[other_topic]), _pick(rng, _polar(adj, same=False)))
    return a, b


def review_similarity_pairs(n_per_kind: int = 40, seed: int = 0) -> list[SimilarityPair]:
    """n_per_kind pairs of each kind of REVIEW_KINDS (240 by default), scored by the kind, shuffled."""
    rng = np.random.default_rng(seed)
    pairs, seen = [], set()
    for kind, score in REVIEW_KINDS.items():
        made = 0
        while made < n_per_kind:
            a, b = _pair(rng, kind)
            if (a, b) in seen or (b, a) in seen:
                continue  # no pair twice
            seen.add((a, b))
            pairs.append(SimilarityPair(a, b, score, kind))
            made += 1
    order = rng.permutation(len(pairs))
    return [pairs[i] for i in order]


def review_nli_triples(n: int = 2000, seed: int = 1) -> list[tuple[str, str, str]]:
    """(premise, entailment, contradiction) triples for supervised SimCSE.

    The entailment says the same of the same noun in other words (another template, an
    adjective of the same sentiment); the contradiction says the opposite of the same noun.
    """
    rng = np.random.default_rng(seed)
    triples = []
    for _ in range(n):
        noun = _pick(rng, list(_TOPIC_OF))
        adj = _pick(rng, POSITIVE + NEGATIVE)
        first = int(rng.integers(len(_TEMPLATES)))
        triples.append((_say(rng, noun, adj, first),
                        _say(rng, noun, _pick(rng, _polar(adj)), _other(rng, range(len(_TEMPLATES)), first)),
                        _say(rng, noun, _pick(rng, _polar(adj, same=False)))))
    return triples


def review_retrieval(n_queries: int = 60, seed: int = 2) -> Retrieval:
    """Each query's answer says the same in other words (same noun and adjective, another template).

    Each query also brings two look-alikes into the pool: the same noun with an adjective
    of the opposite sentiment in the query's own template (one word differs), and the same
    adjective about a noun of another topic. A model that matches words picks those.
    """
    rng = np.random.default_rng(seed)
    queries, answers, traps = [], [], []
    nouns = list(_TOPIC_OF)
    for _ in range(n_queries):
        noun, adj = _pick(rng, nouns), _pick(rng, POSITIVE + NEGATIVE)
        template = int(rng.integers(len(_TEMPLATES)))
        queries.append(_say(rng, noun, adj, template))
        answers.append(_say(rng, noun, adj, _other(rng, range(len(_TEMPLATES)), template)))
        traps.append(_say(rng, noun, _pick(rng, _polar(adj, same=False)), template))
        elsewhere = _pick(rng, [n for n in nouns if _TOPIC_OF[n] != _TOPIC_OF[noun]])
        traps.append(_say(rng, elsewhere, adj, template))
    return Retrieval(queries, answers + traps, np.arange(n_queries), np.ones(n_queries, dtype=bool))


def review_sentences(n: int = 5000, seed: int = 3) -> list[str]:
    """n sentences of unlabelled reviews (places, opinions, closing lines), for unsupervised SimCSE."""
    sentences = []
    for document in review_documents(n // 4 + 1, seed=seed):
        sentences.extend(" ".join(words) for words in document)
    return sentences[:n]
