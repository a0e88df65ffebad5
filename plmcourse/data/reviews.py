"""The review world: a small synthetic corpus, designed so that a lesson's effect shows in seconds on a CPU.

Short reviews of restaurants, films, hotels and phones, written from a small
grammar with about 100 words. Every review has one topic (its nouns) and one
sentiment, which its adjectives, verbs and closing line share:

    we went to san francisco . the soup was superb , i loved it . what a stale menu .
    the waiter was pleasant and lovely . highly recommended .

Three labelled tasks go with it; the first two label only a few words, as real
tasks never cover the vocabulary:

- `review_acceptability_task` (in the style of CoLA): is a sentence well formed
  ("the soup was superb .") or not ("the superb was soup .")? What decides is the
  kind of each word (noun, adjective, verb), which a masked language model learns
  from the unlabelled reviews within a few hundred steps. Notebook 04 uses it.
- `review_sentiment_task`: is a lone sentence positive or negative? The reviews
  carry that signal too ("superb" comes with "loved", "stale" with "hated"), but a
  tiny model needs far more pre-training to pick it up than a notebook can spend;
  it is kept for experiments (notebook 10 uses it as a source task).
- `review_overall_task`: is a whole review of 3-5 sentences, some of them speaking
  against it, positive overall? Notebook 10's few-shot task.

City names of two words ("new york", "new delhi", "san diego", ...) serve notebook
04's example of what predicting masked words independently gets wrong.

Everything is generated from an explicit seed: the same seed gives the same
documents, pairs and splits.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "POSITIVE",
    "NEGATIVE",
    "TOPICS",
    "CITIES",
    "review_vocabulary",
    "review_documents",
    "review_sentiment_task",
    "review_acceptability_task",
    "nsp_pairs",
    "review_overall_task",
]

POSITIVE = ("brilliant", "charming", "delightful", "excellent", "fantastic", "great", "lovely", "perfect",
            "pleasant", "splendid", "superb", "wonderful")
NEGATIVE = ("awful", "bland", "boring", "dreadful", "dull", "horrible", "lousy", "mediocre", "nasty", "poor",
            "stale", "terrible")
TOPICS = {
    "restaurant": ("food", "service", "waiter", "menu", "soup", "dessert", "wine", "kitchen"),
    "film": ("plot", "acting", "ending", "music", "script", "scenery", "director", "costume"),
    "hotel": ("room", "bed", "staff", "pool", "breakfast", "view", "lobby", "shower"),
    "phone": ("screen", "battery", "charger", "speaker", "keyboard", "case", "app", "sound"),
}
CITIES = ("new york", "new delhi", "los angeles", "san francisco", "san diego", "hong kong", "las vegas")
_VERBS = {True: ("loved", "enjoyed", "adored"), False: ("hated", "disliked", "regretted")}
_CLOSINGS = {True: ("highly recommended .", "i would come back .", "worth every penny ."),
             False: ("never again .", "a waste of money .", "avoid it .")}
_ADVERBS = ("very", "really", "quite", "truly")
_PLACES = ("we went to {city} .", "it was in {city} .")


def review_vocabulary() -> list[str]:
    """Every word the review world uses, sorted (a fixed vocabulary for WordTokenizer)."""
    words = set(POSITIVE) | set(NEGATIVE) | set(_ADVERBS)
    for nouns in TOPICS.values():
        words |= set(nouns)
    for text in (*CITIES, *_PLACES, *_CLOSINGS[True], *_CLOSINGS[False],
                 "the was and what a i , it", *_VERBS[True], *_VERBS[False]):
        words |= set(text.replace("{city}", "").split())
    return sorted(words)


def _pick(rng, items):
    return items[int(rng.integers(len(items)))]


def _sentence(rng, nouns, positive):
    """One sentence about one of the topic's nouns, in the given sentiment.

    Most templates put a second sentiment word near the adjective ("..., i loved it",
    "... and fresh"): a model that must fill in one of them from the other learns
    which words are good news and which bad.
    """
    adjectives = POSITIVE if positive else NEGATIVE
    noun, adj, other_adj = _pick(rng, nouns), _pick(rng, adjectives), _pick(rng, adjectives)
    verb = _pick(rng, _VERBS[positive])
    kind = int(rng.integers(6))
    if kind == 0:
        return f"the {noun} was {adj} ."
    if kind == 1:
        return f"the {noun} was {_pick(rng, _ADVERBS)} {adj} ."
    if kind == 2:
        return f"the {noun} was {adj} , i {verb} it ."
    if kind == 3:
        return f"i {verb} the {noun} , it was {adj} ."
    if kind == 4:
        return f"the {noun} was {adj} and {other_adj} ."
    return f"what a {adj} {noun} ."


def review_documents(n_docs: int, seed: int = 0, mixed: float = 0.1) -> list[list[list[str]]]:
    """n_docs reviews; a review is a list of sentences, a sentence a list of words ("." included).

    Each review: a sentence naming a city, 3-5 sentences about its topic, a closing
    line. A fraction `mixed` of the middle sentences has the opposite sentiment
    (reviews are rarely all of one piece), which keeps the task from being trivial.
    """
    rng = np.random.default_rng(seed)
    topic_names = list(TOPICS)
    documents = []
    for _ in range(n_docs):
        nouns = TOPICS[_pick(rng, topic_names)]
        positive = bool(rng.integers(2))
        sentences = [_pick(rng, _PLACES).format(city=_pick(rng, CITIES))]
        for _ in range(int(rng.integers(3, 6))):
            flip = rng.random() < mixed
            sentences.append(_sentence(rng, nouns, positive != flip))
        sentences.append(_pick(rng, _CLOSINGS[positive]))
        documents.append([s.split() for s in sentences])
    return documents


def nsp_pairs(documents, rng, n_pairs: int):
    """(sentence A, sentence B, is_next) triples for next-sentence prediction, half of each kind.

    is_next = 1: B is the sentence that follows A in the same document;
    is_next = 0: B is a sentence of another, randomly drawn document.
    """
    pairs = []
    for _ in range(n_pairs):
        d = int(rng.integers(len(documents)))
        doc = documents[d]
        i = int(rng.integers(len(doc) - 1))
        if rng.random() < 0.5:
            pairs.append((doc[i], doc[i + 1], 1))
        else:
            other = int(rng.integers(len(documents) - 1))
            other += other >= d  # any document but this one
            pairs.append((doc[i], _pick(rng, documents[other]), 0))
    return pairs


def review_overall_task(seed: int = 0, n_train: int = 64, n_test: int = 400, n_unlabelled: int = 1000,
                        mixed: float = 0.2):
    """Is a whole review positive (1) or negative (0) overall? A harder task than one sentence.

    A review here is the 3-5 middle sentences of review_documents (no city, no closing line,
    which would give the answer away), of which a fraction `mixed` speaks with the opposite
    sentiment. The label is the sentiment the review was written with: the majority of its
    sentences usually, not always (a 2-2 tie or a 3-2 the wrong way happens), so even a
    perfect reader of sentences errs now and then. Returns a dict with
        train       n_train (words, label) pairs, half of each label (draw K per class from it)
        test        n_test pairs
        unlabelled  n_unlabelled reviews, words only (for PET and self-training)
    Fixed by `seed`. The reviews are drawn afresh from the same grammar, so whole sentences repeat
    ones the checkpoints were trained on (as in notebook 04); the reviews as sequences do not.
    """
    rng = np.random.default_rng(seed)

    def review(positive):
        nouns = TOPICS[_pick(rng, list(TOPICS))]
        sentences = [_sentence(rng, nouns, positive != (rng.random() < mixed))
                     for _ in range(int(rng.integers(3, 6)))]
        return " ".join(sentences).split(), int(positive)

    def labelled(n):
        return [review(i % 2 == 0) for i in range(n)]

    return {"train": labelled(n_train), "test": labelled(n_test),
            "unlabelled": [review(bool(rng.integers(2)))[0] for _ in range(n_unlabelled)]}


def review_sentiment_task(seed: int = 0, n_seen: int = 6, n_train: int = 48, n_test: int = 400):
    """A small labelled task: is a one-sentence review positive (1) or negative (0)?

    Sentences are "the NOUN was ADJ .", "the NOUN was ADV ADJ ." or "what a ADJ NOUN .",
    labelled by the adjective's sentiment. Only `n_seen` adjectives per class occur in
    the labelled training set, as in real tasks where a few thousand labelled
    examples never cover the vocabulary. Returns a dict with
        train        n_train (words, label) pairs, seen adjectives only
        test_seen    n_test pairs with the seen adjectives (new sentences)
        test_unseen  n_test pairs with the other adjectives, never labelled
        seen         the seen adjectives
    The split is fixed by `seed`.
    """
    rng = np.random.default_rng(seed)
    seen = ([str(a) for a in rng.choice(POSITIVE, n_seen, replace=False)]
            + [str(a) for a in rng.choice(NEGATIVE, n_seen, replace=False)])
    unseen = [a for a in POSITIVE + NEGATIVE if a not in seen]
    all_nouns = [n for nouns in TOPICS.values() for n in nouns]
    positive = set(POSITIVE)

    def example(adjectives):
        adj, noun = _pick(rng, adjectives), _pick(rng, all_nouns)
        kind = int(rng.integers(3))
        text = (f"the {noun} was {adj} ." if kind == 0 else
                f"the {noun} was {_pick(rng, _ADVERBS)} {adj} ." if kind == 1 else f"what a {adj} {noun} .")
        return text.split(), int(adj in positive)

    train = [example(seen) for _ in range(n_train)]
    test_seen = [example(seen) for _ in range(n_test)]
    test_unseen = [example(unseen) for _ in range(n_test)]
    return {"train": train, "test_seen": test_seen, "test_unseen": test_unseen, "seen": seen}


def review_acceptability_task(seed: int = 0, n_seen: int = 4, n_train: int = 64, n_test: int = 400):
    """A small labelled task in the style of CoLA: is a sentence well formed (1) or not (0)?

    Well-formed sentences come from the review grammar ("the soup was superb .",
    "what a dull plot .", "i loved the menu ."); ill-formed ones are the same
    sentences with a noun swapped with the adjective or verb ("the superb was soup .").
    Both kinds contain exactly the same words, so only word order together with the
    *kind* of each word (noun, adjective, verb) decides the label. The labelled
    training set uses `n_seen` nouns, adjectives and verbs of each kind;
    the unlabelled reviews use them all. Returns a dict with
        train        n_train (words, label) pairs, seen words only, half of each label
        test_seen    n_test pairs, new sentences with the seen words
        test_unseen  n_test pairs with words that never occur in `train`
        seen         the seen words
    """
    rng = np.random.default_rng(seed)
    nouns = [n for group in TOPICS.values() for n in group]
    adjectives = list(POSITIVE + NEGATIVE)
    verbs = list(_VERBS[True] + _VERBS[False])

    def split_words(words, k):
        chosen = [str(w) for w in rng.choice(words, k, replace=False)]
        return chosen, [w for w in words if w not in chosen]

    seen_nouns, other_nouns = split_words(nouns, 2 * n_seen)
    seen_adjectives, other_adjectives = split_words(adjectives, 2 * n_seen)
    seen_verbs, other_verbs = split_words(verbs, n_seen // 2 or 1)

    def example(nouns, adjectives, verbs, good):
        noun, adj, verb = _pick(rng, nouns), _pick(rng, adjectives), _pick(rng, verbs)
        kind = int(rng.integers(4))
        if kind == 0:
            words = ["the", noun, "was", adj, "."] if good else ["the", adj, "was", noun, "."]
        elif kind == 1:
            adv = _pick(rng, _ADVERBS)
            words = ["the", noun, "was", adv, adj, "."] if good else ["the", adj, "was", adv, noun, "."]
        elif kind == 2:
            words = ["what", "a", adj, noun, "."] if good else ["what", "a", noun, adj, "."]
        else:
            words = ["i", verb, "the", noun, "."] if good else ["i", noun, "the", verb, "."]
        return words, int(good)

    def examples(n, *words):
        return [example(*words, good=i % 2 == 0) for i in range(n)]

    seen = (seen_nouns, seen_adjectives, seen_verbs)
    return {"train": examples(n_train, *seen), "test_seen": examples(n_test, *seen),
            "test_unseen": examples(n_test, other_nouns, other_adjectives, other_verbs),
            "seen": seen_nouns + seen_adjectives + seen_verbs}
