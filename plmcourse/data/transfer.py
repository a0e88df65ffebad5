"""Generated worlds for notebook 13 (PLMs beyond one language): every corpus is built here, offline.

    two_languages(n, seed, variant)   language A and a "Fake-English" B whose word ids are A's shifted
                                      (K et al. 2020; Dufter and Schütze 2020): the true dictionary is known
    parallel_sentences(n, seed, ...)  a few sentences given in A and B side by side (for XLM's TLM)
    fact_world(seed)                  people and cities with two-token names, and one birth city each
    fact_corpus(world, n, seed, ...)  sentences stating the facts, for whole-entity against token masking
    domain_corpus / domain_task       a "clinic" domain the general corpus barely mentions (DAPT)
    dna_task(n, seed)                 sequences over four letters: does a motif occur? (cross-discipline)

A sentence is a list of word ids; ids 0-3 are [PAD], [CLS], [SEP], [MASK]. Language A's words
take ids FIRST_WORD .. FIRST_WORD + len(WORDS) - 1 and B's the same words shifted by len(WORDS).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PAD", "CLS", "SEP", "MASK", "SPECIALS", "FIRST_WORD", "WORDS", "CATEGORIES", "Sentences",
           "two_languages", "parallel_sentences", "dictionary", "FactWorld", "fact_world", "fact_corpus",
           "fact_queries", "domain_corpus", "domain_task", "dna_task", "TOPIC_TASK"]

PAD, CLS, SEP, MASK = 0, 1, 2, 3
SPECIALS = ("[PAD]", "[CLS]", "[SEP]", "[MASK]")
FIRST_WORD = 4

# The words of language A, by category. The topic task asks whether the SUBJECT (the first noun)
# is an animal: the object noun is drawn independently, so a bag of words cannot solve it.
_SYL = ["ba", "ko", "mi", "tu", "re", "sa", "lo", "ne", "pi", "du", "ga", "fe"]


def _made_up(n, start):
    """n made-up words from pairs of syllables (the same list every time)."""
    pairs = [a + b for a in _SYL for b in _SYL]
    return pairs[start:start + n]


CATEGORIES = {
    "animal": ["cat", "dog", "horse", "bird", "fox", "cow", "wolf", "goat", "duck", "bear"] + _made_up(0, 0),
    "thing": ["stone", "chair", "box", "lamp", "cup", "rope", "coin", "book", "door", "bell"] + _made_up(0, 22),
    "verb": ["sees", "likes", "finds", "moves", "holds", "pushes", "hears", "wants"] + _made_up(0, 44),
    "adjective": ["big", "small", "old", "young", "red", "green", "quiet", "heavy"] + _made_up(0, 60),
    "determiner": ["the", "a", "this", "that"],
    "other": ["and", "near", "very", "here"],
    "clinic": ["nurse", "fever", "dose", "ward", "scan", "pulse", "wound", "tablet", "doctor", "rash"],
}
ANCHORS = ("determiner", "other")  # the function words: the same in both languages unless variant says otherwise
WORDS = [w for words in CATEGORIES.values() for w in words]
_ID = {w: FIRST_WORD + i for i, w in enumerate(WORDS)}
TOPIC_TASK = "is the subject (the first noun) an animal?"


def _preferences():
    """The world's fixed habits, the same for both languages: how often each noun occurs (Zipf-like), which
    adjectives each noun takes and which verbs each subject does (animals mostly from the first half of
    each list, things from the second), which objects each verb takes (sparse Dirichlet draws). They give
    every word a context of its own, so that two languages can be lined up from their statistics alone."""
    rng = np.random.default_rng(12345)
    n_animals = len(CATEGORIES["animal"])
    zipf = 1.0 / np.arange(1, n_animals + 1) ** 0.7

    def habits(n_choices, nouns_in):
        half = n_choices // 2
        rows = []
        for i in range(nouns_in):
            own = np.zeros(n_choices)
            side = slice(0, half) if i < n_animals else slice(half, n_choices)
            own[side] = rng.dirichlet(np.full(half, 0.3))
            rows.append(0.9 * own + 0.1 / n_choices)
        return np.array(rows)

    n_nouns = 2 * n_animals
    return {
        "animal": rng.permutation(zipf / zipf.sum()), "thing": rng.permutation(zipf / zipf.sum()),
        "adjective": habits(len(CATEGORIES["adjective"]), n_nouns),
        "verb": habits(len(CATEGORIES["verb"]), n_nouns),
        "object": rng.dirichlet(np.full(n_nouns, 0.1), len(CATEGORIES["verb"])),
    }


_PREFS = _preferences()
_NOUNS = CATEGORIES["animal"] + CATEGORIES["thing"]


def _pick(rng, category, p=None):
    words = CATEGORIES[category]
    return _ID[words[rng.choice(len(words), p=p)]]


def _noun_phrase(rng, noun):
    phrase = [_pick(rng, "determiner")]
    if rng.random() < 0.6:
        word = WORDS[noun - FIRST_WORD]
        habits = _PREFS["adjective"][_NOUNS.index(word)] if word in _NOUNS else None
        phrase.append(_pick(rng, "adjective", habits))
        if rng.random() < 0.2:
            phrase.insert(1, _ID["very"])
    return phrase + [noun]


def _general_sentence(rng, subject_animal):
    """determiner (adjective) subject verb determiner (adjective) object (near ...): ids of language A."""
    kind = "animal" if subject_animal else "thing"
    subject = _pick(rng, kind, _PREFS[kind])
    verb = _pick(rng, "verb", _PREFS["verb"][_NOUNS.index(WORDS[subject - FIRST_WORD])])
    obj = _ID[_NOUNS[rng.choice(len(_NOUNS), p=_PREFS["object"][CATEGORIES["verb"].index(WORDS[verb - FIRST_WORD])])]]
    words = _noun_phrase(rng, subject) + [verb] + _noun_phrase(rng, obj)
    if rng.random() < 0.2:
        words += [_ID["near"]] + _noun_phrase(rng, _pick(rng, "thing", _PREFS["thing"]))
    if rng.random() < 0.2:
        words += [_ID["here"]]
    return words, int(WORDS[obj - FIRST_WORD] in CATEGORIES["animal"])


@dataclass
class Sentences:
    """Sentences (lists of ids, without [CLS]/[SEP]), their topic labels and their language (0 = A, 1 = B);
    second: a second task's labels (is the object an animal?), for multi-task fine-tuning."""

    ids: list
    labels: np.ndarray
    language: np.ndarray
    second: np.ndarray = None

    def __len__(self):
        return len(self.ids)


ANCHOR_IDS = frozenset(_ID[w] for c in ANCHORS for w in CATEGORIES[c])


def _to_language_b(words, variant):
    """A's sentence in B: every content word's id shifted by len(WORDS); the function words (ANCHORS) keep
    their ids, except in the 'no anchors' variant; 'reversed' also reverses the word order."""
    keep = ANCHOR_IDS if variant != "no anchors" else frozenset()
    shifted = [w if w in keep else w + len(WORDS) for w in words]
    return shifted[::-1] if variant == "reversed" else shifted


def vocab_size(variant="shared"):
    """Ids used by two_languages: specials, A's words, B's words (and B's own specials for 'no anchors')."""
    return FIRST_WORD + 2 * len(WORDS) + (3 if variant == "no anchors" else 0)


def b_specials(variant):
    """(CLS, SEP, MASK) of language B: A's own, or B's private copies for the 'no anchors' variant."""
    if variant == "no anchors":
        first = FIRST_WORD + 2 * len(WORDS)
        return first, first + 1, first + 2
    return CLS, SEP, MASK


def two_languages(n: int = 2000, seed: int = 0, variant: str = "shared", languages: str = "AB") -> Sentences:
    """n sentences in each of the `languages` ("AB", "A" or "B"), drawn independently: no parallel text.

    variant: "shared" (B's content words are A's shifted; specials and function words shared), "no anchors"
    (nothing shared: B has its own function words and its own [CLS], [SEP], [MASK], see b_specials),
    "reversed" (as "shared", with B's word order reversed).
    """
    if variant not in ("shared", "no anchors", "reversed"):
        raise ValueError(f"variant must be 'shared', 'no anchors' or 'reversed', got {variant!r}.")
    rng = np.random.default_rng(seed)
    ids, labels, language, second = [], [], [], []
    for lang in languages:
        for _ in range(n):
            label = int(rng.random() < 0.5)
            words, object_animal = _general_sentence(rng, label)
            ids.append(words if lang == "A" else _to_language_b(words, variant))
            labels.append(label)
            language.append(0 if lang == "A" else 1)
            second.append(object_animal)
    return Sentences(ids, np.array(labels), np.array(language), np.array(second))


def parallel_sentences(n: int = 50, seed: int = 0, variant: str = "shared") -> list:
    """n translation pairs (A's sentence, the same sentence in B): the parallel text XLM's TLM reads."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        words, _ = _general_sentence(rng, rng.random() < 0.5)
        pairs.append((words, _to_language_b(words, variant)))
    return pairs


def dictionary(categories=("animal", "thing", "verb", "adjective")) -> np.ndarray:
    """(k, 2) pairs (A's id, B's id) of the known translations: B's id is A's plus len(WORDS)."""
    a = np.array([_ID[w] for c in categories for w in CATEGORIES[c]])
    return np.stack([a, a + len(WORDS)], axis=1)


# ----------------------------------------------------------------------------
# Facts about entities (ERNIE's masking and LAMA's probes)


@dataclass
class FactWorld:
    """People and cities, each named by two tokens, and each person's birth city.

    tokens: the word list (ids 4..); people, cities: (n, 2) arrays of ids; born: (n_people,) the index of
    each person's city; seen: a bool per person, whether the corpus states the fact (unseen: a held-out set).
    """

    tokens: list
    people: np.ndarray
    cities: np.ndarray
    born: np.ndarray
    seen: np.ndarray

    @property
    def vocab_size(self):
        return FIRST_WORD + len(self.tokens)

    def word(self, i):
        return SPECIALS[i] if i < FIRST_WORD else self.tokens[i - FIRST_WORD]

    def text(self, ids):
        return " ".join(self.word(int(i)) for i in ids)


_SYLLABLES = ["ka", "lo", "mi", "ru", "te", "vo", "sa", "ne", "pi", "du", "ga", "fe", "zo", "bi", "ta", "me"]
_FACT_WORDS = ["was", "born", "in", "grew", "up", "comes", "from", "lives", "the", "city", "of", "is", "large",
               "old", "near", "river", "and", "met", "likes", "music", "writes", "books", "home", "town"]


def fact_world(n_people: int = 60, n_cities: int = 12, seed: int = 0, unseen: int = 12) -> FactWorld:
    """Two-token names (a first part and a second part that always goes with it), one birth city each.

    The second part of a name is fixed by the first, so a model can fill in half of a name from the other
    half without knowing anything about the world: the shortcut that token masking rewards.
    """
    rng = np.random.default_rng(seed)
    names = sorted({a + b for a in _SYLLABLES for b in _SYLLABLES})
    order = rng.permutation(len(names))
    needed = 2 * (n_people + n_cities)
    chosen = [names[i] for i in order[:needed]]
    tokens = list(_FACT_WORDS) + chosen
    first = FIRST_WORD + len(_FACT_WORDS)
    pieces = np.arange(first, first + needed).reshape(-1, 2)
    people, cities = pieces[:n_people], pieces[n_people:]
    born = rng.integers(0, n_cities, n_people)
    seen = np.ones(n_people, dtype=bool)
    seen[rng.permutation(n_people)[:unseen]] = False
    return FactWorld(tokens, people, cities, born, seen)


def _w(world, word):
    return FIRST_WORD + world.tokens.index(word)


def fact_corpus(world: FactWorld, n: int = 3000, seed: int = 0, shuffled: bool = False):
    """n sentences: (ids, entity spans). Each states a seen person's birth city in one of four templates, or
    says something with no fact in it (about people, unseen ones too, and cities).

    shuffled: the control world, where every fact sentence names a random city (no fact holds).
    Spans are (start, end), end excluded, over the sentence's ids (no [CLS]).
    """
    rng = np.random.default_rng(seed)
    w = lambda word: _w(world, word)  # noqa: E731
    templates = [["was", "born", "in", "@"], ["grew", "up", "in", "@"], ["comes", "from", "@"],
                 ["lives", "in", "@"]]
    fillers = [["likes", "music"], ["writes", "books"], ["met", "#"], ["likes", "#"]]
    city_fillers = [["is", "large"], ["is", "old"], ["is", "near", "the", "river"]]
    seen_people = np.flatnonzero(world.seen)
    out = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.6:
            p = seen_people[rng.integers(len(seen_people))]
            city = rng.integers(len(world.cities)) if shuffled else world.born[p]
            rest = templates[rng.integers(len(templates))]
        elif kind < 0.85:
            p = rng.integers(len(world.people))
            city, rest = None, fillers[rng.integers(len(fillers))]
        else:
            p, city = None, rng.integers(len(world.cities))
            rest = ["the", "city", "of", "@"] + city_fillers[rng.integers(len(city_fillers))]
        ids, spans = [], []
        if p is not None:
            spans.append((0, 2))
            ids += list(world.people[p])
        for word in rest:
            if word == "@":
                spans.append((len(ids), len(ids) + 2))
                ids += list(world.cities[city])
            elif word == "#":
                spans.append((len(ids), len(ids) + 2))
                ids += list(world.people[rng.integers(len(world.people))])
            else:
                ids.append(w(word))
        out.append((ids, spans))
    return out


def fact_queries(world: FactWorld, seen: bool = True, masks: int = 2):
    """LAMA-style cloze queries "<person> was born in [MASK] [MASK]": (ids, answer (2,)) for each person whose
    fact the corpus states (seen=True) or never states (seen=False).

    masks=1: "<person> was born in [MASK]", one [MASK] for the whole city and the sentence ended there; the
    answer is still the city's two tokens, either of which names it (no token belongs to two cities). Neither
    token is shown, since one would give the other away.
    """
    if masks not in (1, 2):
        raise ValueError(f"masks must be 1 or 2, not {masks!r}")
    people = np.flatnonzero(world.seen == seen)
    tail = [_w(world, "was"), _w(world, "born"), _w(world, "in")] + [MASK] * masks
    return [(list(world.people[p]) + tail, world.cities[world.born[p]]) for p in people]


# ----------------------------------------------------------------------------
# A domain (DAPT) and a sequence task that is not language (cross-discipline transfer)


def _clinic_sentence(rng):
    """A sentence of the clinic domain: the same grammar, with clinic words in the noun slots; label: does the
    subject come first among the people words (nurse, doctor) rather than the things (fever, dose, ...)?"""
    people = [_ID["nurse"], _ID["doctor"]]
    things = [_ID[w] for w in CATEGORIES["clinic"] if w not in ("nurse", "doctor")]
    label = int(rng.random() < 0.5)
    subject = people[rng.integers(2)] if label else things[rng.integers(len(things))]
    obj = (people + things)[rng.integers(len(people) + len(things))]
    words = _noun_phrase(rng, subject) + [_pick(rng, "verb")] + _noun_phrase(rng, obj)
    return words, label


def domain_corpus(n: int = 1000, seed: int = 0) -> Sentences:
    """Unlabelled in-domain text for continued pre-training (labels kept for reference only)."""
    rng = np.random.default_rng(seed)
    pairs = [_clinic_sentence(rng) for _ in range(n)]
    return Sentences([p[0] for p in pairs], np.array([p[1] for p in pairs]), np.zeros(n, dtype=int))


def domain_task(n: int = 64, seed: int = 0) -> Sentences:
    """A small labelled in-domain task: is the subject a person (nurse, doctor)?"""
    return domain_corpus(n, seed + 10_000)


DNA = ("A", "C", "G", "T")
MOTIF = (2, 0, 3, 3)  # G A T T


def dna_task(n: int = 400, seed: int = 0, length: int = 24):
    """Random sequences over A, C, G, T (as 0-3); label 1 when the motif GATT occurs in it. Half of each.

    Returns (sequences (n, length) ints 0-3, labels (n,)).
    """
    rng = np.random.default_rng(seed)
    seqs, labels = [], []
    while len(seqs) < n:
        s = rng.integers(0, 4, length)
        has = any(tuple(s[i:i + 4]) == MOTIF for i in range(length - 3))
        want = len(seqs) % 2
        if not has and want:
            i = rng.integers(0, length - 3)
            s[i:i + 4] = MOTIF
            has = True
        if has == bool(want):
            seqs.append(s)
            labels.append(want)
    order = rng.permutation(n)
    return np.array(seqs)[order], np.array(labels)[order]
