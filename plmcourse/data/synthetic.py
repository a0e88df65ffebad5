"""A synthetic English corpus in which word-vector structure shows within seconds of training.

Real text needs hundreds of millions of words before "king - man + woman" lands on
"queen". This corpus is generated from a small grammar built so that a word's
neighbours reveal its properties, one property per kind of neighbour:

* People: twelve words on a grid of gender x kind x age (king/queen, prince/princess,
  man/woman, boy/girl, father/mother, son/daughter). Pronouns (he/his/him,
  she/her) carry gender; places and objects carry the kind (palace/crown for
  royals, village/market for commoners, home/kitchen for family); adjectives and
  objects carry age (old/wise, little/toys). So king - man is "royal minus common"
  and so is queen - woman: the offsets that analogies rely on.
* Countries and capitals: ten nations, each with a country, a capital and an
  adjective (france/paris/french...). The adjective carries the nation; words such
  as border/government or streets/mayor carry "country" or "city".
* Two polysemous words, each used in two senses with equal frequency: "bank" (a
  river's edge, or a place for money) and "apple" (a fruit, or a company; the
  Chinese lecture notes use 苹果 for the same ambiguity). Each sense has
  substitutes that share its contexts (shore; lender; pear, banana; huawei,
  samsung), so each sense has neighbours of its own.

Some sentences also carry dependencies longer than two words ("the queen of spain
lived in madrid with her ..."): the capital depends on the country three words
back, the pronoun on the person seven words back. A trigram model cannot see them;
a recurrent one can.

Polysemous occurrences are annotated with their sense and with the side on which
the disambiguating words stand: "left" ("we sat on the bank ...": the words before
settle the sense) or "right" ("the bank approved the loan": only the words after
do). A left-to-right language model cannot tell the senses of a "right" occurrence
apart at the word itself; a right-to-left one can.

Everything is deterministic for a given seed (numpy.random.Generator).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "PEOPLE",
    "NATIONS",
    "SENSES",
    "SIMILARITY_PAIRS",
    "ANALOGIES",
    "SenseOccurrence",
    "SyntheticCorpus",
    "synthetic_corpus",
    "sense_sentences",
]

# ----------------------------------------------------------------------------
# The grammar's word lists

# word: (gender, kind, age)
PEOPLE = {
    "king": ("male", "royal", "adult"), "queen": ("female", "royal", "adult"),
    "prince": ("male", "royal", "young"), "princess": ("female", "royal", "young"),
    "man": ("male", "common", "adult"), "woman": ("female", "common", "adult"),
    "boy": ("male", "common", "young"), "girl": ("female", "common", "young"),
    "father": ("male", "family", "adult"), "mother": ("female", "family", "adult"),
    "son": ("male", "family", "young"), "daughter": ("female", "family", "young"),
}
_SUBJECT = {"male": "he", "female": "she"}
_POSSESSIVE = {"male": "his", "female": "her"}
_OBJECT = {"male": "him", "female": "her"}
_PLACES = {
    "royal": ["palace", "castle", "throne", "court"],
    "common": ["village", "market", "farm", "street"],
    "family": ["home", "kitchen", "house", "garden"],
}
_KIND_OBJECTS = {
    "royal": ["crown", "jewels", "robe"],
    "common": ["basket", "cart", "goat"],
    "family": ["family", "dinner", "cat"],
}
_AGE_WORDS = {
    "adult": ["old", "wise", "tall"],
    "young": ["little", "young", "small"],
}
_AGE_OBJECTS = {
    "adult": ["work", "letters", "books"],
    "young": ["toys", "games", "kite"],
}
_MOODS = ["smiled", "laughed", "waited", "sang", "slept"]

# (country, capital, adjective)
NATIONS = [
    ("france", "paris", "french"),
    ("germany", "berlin", "german"),
    ("italy", "rome", "italian"),
    ("spain", "madrid", "spanish"),
    ("japan", "tokyo", "japanese"),
    ("china", "beijing", "chinese"),
    ("egypt", "cairo", "egyptian"),
    ("russia", "moscow", "russian"),
    ("greece", "athens", "greek"),
    ("britain", "london", "british"),
]

# word: (sense, sense); each sense has substitutes that share its contexts.
SENSES = {
    "bank": ("river", "money"),
    "apple": ("fruit", "company"),
}
_SUBSTITUTES = {
    ("bank", "river"): ["shore"],
    ("bank", "money"): ["lender"],
    ("apple", "fruit"): ["pear", "banana"],
    ("apple", "company"): ["huawei", "samsung"],
}

# Templates for the senses. "{w}" is the ambiguous word or a substitute; the side says
# where the words that settle the sense stand: "left" (before {w}) or "right" (only after
# it). The other slots are filled from _SLOTS, so the same template gives many sentences.
_SENSE_TEMPLATES = {
    ("bank", "river"): [
        ("left", "{subj} sat on the {w} of the river and watched the {animal} ."),
        ("left", "the boat drifted {slowly} towards the {muddy} {w} {when} ."),
        ("left", "{subj} fished from the {muddy} {w} {when} ."),
        ("right", "the {w} was covered in {mud} after the {rain} ."),
        ("right", "the {w} of the river was {green} with {grass} ."),
        ("right", "the {w} by the water was {wet} and {muddy} ."),
    ],
    ("bank", "money"): [
        ("left", "{subj} took {money} out of the {w} to pay the {debt} ."),
        ("left", "{subj} opened an account at the {w} {when} ."),
        ("left", "{subj} deposited the {money} in the {w} {when} ."),
        ("right", "the {w} approved the {debt} for the {client} ."),
        ("right", "the {w} raised the interest on the {debt} {when} ."),
        ("right", "the {w} lent {money} to the {client} ."),
    ],
    ("apple", "fruit"): [
        ("left", "fruit such as the {fruit} , the {fruit} and the {w} is {sweet} ."),
        ("left", "{subj} ate a {ripe} {w} from the tree in the orchard {when} ."),
        ("left", "{subj} squeezed the juice from a {sweet} {w} ."),
        ("right", "the {w} was {ripe} and full of juice {when} ."),
        ("right", "the {w} fell from the tree in the orchard {when} ."),
        ("right", "the {w} tasted {sweet} and {ripe} ."),
    ],
    ("apple", "company"): [
        ("left", "the new {device} from {w} is {faster} than the old one ."),
        ("left", "shares of {w} rose {when} after the company launched a {device} ."),
        ("left", "engineers at {w} wrote software for the {device} {when} ."),
        ("right", "the {w} {device} is slower than the newest {device} ."),
        ("right", "the {w} company sold {software} and {device} parts ."),
        ("right", "the {w} {device} ran the new software {when} ."),
    ],
}
_SLOTS = {
    "subj": ["we", "they", "the children", "our friends", "the workers"],
    "when": ["today", "on monday", "in the morning", "after lunch", "last week"],
    "animal": ["fish", "ducks", "frogs"],
    "slowly": ["slowly", "quietly", "gently"],
    "muddy": ["muddy", "grassy", "wet", "steep"],
    "mud": ["mud", "sand", "weeds"],
    "rain": ["rain", "flood", "storm"],
    "green": ["green", "thick", "bright"],
    "grass": ["grass", "reeds", "moss"],
    "wet": ["wet", "cold", "soft"],
    "money": ["money", "cash", "savings"],
    "debt": ["loan", "rent", "mortgage"],
    "client": ["shop", "bakery", "factory"],
    "fruit": ["plum", "cherry", "grape", "lemon"],
    "sweet": ["sweet", "fresh", "juicy"],
    "ripe": ["ripe", "red", "soft"],
    "device": ["phone", "computer", "laptop", "tablet"],
    "faster": ["faster", "lighter", "cheaper"],
    "software": ["software", "chips", "screens"],
}


def _fill(template, rng):
    """Fill every {slot} of a template except {w}, each occurrence independently."""
    words = []
    for token in template.split():
        if token.startswith("{") and token != "{w}":
            words.extend(_pick(rng, _SLOTS[token[1:-1]]).split())
        else:
            words.append(token)
    return words


# ----------------------------------------------------------------------------
# The course's own evaluation sets

# (word, word, relatedness 0-10), scored by hand from what the words mean; a model
# trained on the synthetic corpus should rank the pairs in roughly this order.
SIMILARITY_PAIRS = [
    ("king", "queen", 8.0), ("prince", "princess", 8.0), ("man", "woman", 8.0),
    ("boy", "girl", 8.0), ("father", "mother", 8.5), ("son", "daughter", 8.5),
    ("king", "prince", 7.5), ("queen", "princess", 7.5), ("man", "boy", 7.0),
    ("mother", "daughter", 7.0), ("king", "man", 5.5), ("queen", "woman", 5.5),
    ("father", "man", 6.0), ("mother", "woman", 6.0), ("king", "girl", 3.0),
    ("prince", "woman", 3.0), ("queen", "son", 3.5), ("france", "germany", 7.0),
    ("italy", "spain", 7.0), ("japan", "china", 7.0), ("paris", "berlin", 7.0),
    ("rome", "madrid", 7.0), ("tokyo", "beijing", 7.0), ("paris", "france", 7.5),
    ("tokyo", "japan", 7.5), ("moscow", "russia", 7.5), ("paris", "italy", 4.0),
    ("london", "egypt", 3.5), ("french", "france", 7.0), ("german", "berlin", 6.5),
    ("pear", "banana", 9.0), ("shore", "river", 7.0), ("lender", "loan", 7.0),
    ("huawei", "samsung", 9.0), ("money", "cash", 9.0), ("palace", "castle", 8.5),
    ("crown", "throne", 7.5), ("village", "farm", 6.5), ("kitchen", "house", 6.5),
    ("king", "palace", 6.0), ("king", "banana", 0.5), ("paris", "loan", 0.5),
    ("queen", "phone", 0.5), ("shore", "software", 0.5), ("germany", "kitchen", 1.0),
    ("princess", "toys", 4.0), ("boy", "cash", 1.0), ("pear", "huawei", 1.5),
    ("river", "money", 1.0), ("tokyo", "goat", 0.5),
]


def _analogies():
    """(a, b, c, d): a is to b as c is to d, in three groups."""
    people = list(PEOPLE)
    gender_pairs = [(people[i], people[i + 1]) for i in range(0, len(people), 2)]  # (male, female)
    groups = {"gender": [], "capital": [], "nationality": []}
    for a, b in gender_pairs:
        for c, d in gender_pairs:
            if a != c:
                groups["gender"].append((a, b, c, d))
    for country_a, capital_a, adjective_a in NATIONS:
        for country_c, capital_c, adjective_c in NATIONS:
            if country_a != country_c:
                groups["capital"].append((country_a, capital_a, country_c, capital_c))
                groups["nationality"].append((country_a, adjective_a, country_c, adjective_c))
    return groups


# group name -> list of (a, b, c, d): "a is to b as c is to d".
ANALOGIES = _analogies()

# ----------------------------------------------------------------------------
# Generation


@dataclass(frozen=True)
class SenseOccurrence:
    """One use of a polysemous word: sentence index, position in it, word, sense and side."""

    sentence: int
    position: int
    word: str
    sense: str
    side: str  # "left" or "right": where the words that settle the sense stand


@dataclass
class SyntheticCorpus:
    """Sentences (lists of lower-case tokens, each ending with ".") and the sense annotations."""

    sentences: list[list[str]]
    senses: list[SenseOccurrence] = field(default_factory=list)
    seed: int = 0

    def tokens(self) -> list[str]:
        """All sentences, one after the other, as a single token stream."""
        return [token for sentence in self.sentences for token in sentence]

    def text(self, n: int | None = None) -> str:
        """The first `n` sentences (all by default) as text, one sentence per line."""
        return "\n".join(" ".join(s) for s in self.sentences[:n])

    def sentence_starts(self) -> np.ndarray:
        """Index in tokens() where each sentence starts."""
        lengths = np.array([len(s) for s in self.sentences], dtype=np.int64)
        return np.concatenate([[0], np.cumsum(lengths)[:-1]])

    def __len__(self):
        return len(self.sentences)


def _pick(rng, items):
    return items[int(rng.integers(len(items)))]


def _person_sentence(rng):
    word = _pick(rng, list(PEOPLE))
    gender, kind, age = PEOPLE[word]
    he, his, him = _SUBJECT[gender], _POSSESSIVE[gender], _OBJECT[gender]
    place, thing = _pick(rng, _PLACES[kind]), _pick(rng, _KIND_OBJECTS[kind])
    adjective, hobby = _pick(rng, _AGE_WORDS[age]), _pick(rng, _AGE_OBJECTS[age])
    mood = _pick(rng, _MOODS)
    templates = [
        f"the {adjective} {word} lived in the {place} with {his} {thing} .",
        f"the {word} walked to the {place} and {he} {mood} .",
        f"in the {place} the {adjective} {word} lost {his} {hobby} .",
        f"the {word} took {his} {thing} to the {place} .",
        f"everyone in the {place} loved the {adjective} {word} and {his} {hobby} .",
        f"the {word} said that {he} was {adjective} and {mood} .",
        f"we gave the {word} a {thing} and {he} thanked us for {his} {hobby} .",
        f"the {adjective} {word} found {his} {thing} and {he} {mood} .",
        f"people in the {place} asked the {word} about {his} {hobby} and {he} {mood} .",
        f"the {word} kept {his} {hobby} in the {place} near {his} {thing} .",
        f"a {adjective} {word} came to the {place} and we helped {him} .",
    ]
    return _pick(rng, templates).split()


def _person_abroad_sentence(rng):
    """Long-range dependencies: the capital depends on the country, the pronoun on the person."""
    word = _pick(rng, list(PEOPLE))
    gender, kind, age = PEOPLE[word]
    country, capital, adjective = _pick(rng, NATIONS)
    his, thing = _POSSESSIVE[gender], _pick(rng, _KIND_OBJECTS[kind])
    templates = [
        f"the {word} of {country} lived in {capital} with {his} {thing} .",
        f"the {word} from {country} moved to {capital} and spoke {adjective} with {his} {thing} .",
    ]
    return _pick(rng, templates).split()


def _nation_sentence(rng):
    country, capital, adjective = _pick(rng, NATIONS)
    templates = [
        f"{capital} is the capital of {country} .",
        f"we crossed the border into {country} and spoke {adjective} .",
        f"the {adjective} government of {country} guarded the border of the nation .",
        f"the mayor of {capital} spoke {adjective} to the city .",
        f"we walked the streets of {capital} and ate {adjective} food .",
        f"the museum in the city of {capital} shows {adjective} art .",
        f"{country} is a nation whose people speak {adjective} .",
        f"the {adjective} people of {country} elected a new government .",
        f"the streets of {capital} were full of {adjective} music .",
        f"the {adjective} army defended the border of {country} .",
    ]
    return _pick(rng, templates).split()


def _sense_sentence(rng, word, sense, use_word_prob=0.6):
    """(tokens, position of the word or its substitute, the word used, side)."""
    side, template = _pick(rng, _SENSE_TEMPLATES[(word, sense)])
    used = word if rng.random() < use_word_prob else _pick(rng, _SUBSTITUTES[(word, sense)])
    tokens = _fill(template, rng)
    position = tokens.index("{w}")
    tokens[position] = used
    return tokens, position, used, side


_CATEGORY_WEIGHTS = {"person": 0.38, "abroad": 0.10, "nation": 0.24, "bank": 0.14, "apple": 0.14}


def synthetic_corpus(n_sentences: int = 20000, seed: int = 0) -> SyntheticCorpus:
    """Generate `n_sentences` sentences; the same seed always gives the same corpus.

    About 38% are about people, 10% about people abroad (long-range dependencies),
    24% about countries and capitals, 14% each use "bank" or "apple" (or a
    substitute) in one of their two senses, each sense half the time.
    """
    rng = np.random.default_rng(seed)
    categories = list(_CATEGORY_WEIGHTS)
    weights = np.array(list(_CATEGORY_WEIGHTS.values()))
    chosen = rng.choice(len(categories), size=n_sentences, p=weights / weights.sum())
    sentences, senses = [], []
    for index, c in enumerate(chosen):
        category = categories[c]
        if category == "person":
            sentences.append(_person_sentence(rng))
        elif category == "abroad":
            sentences.append(_person_abroad_sentence(rng))
        elif category == "nation":
            sentences.append(_nation_sentence(rng))
        else:
            sense = SENSES[category][int(rng.integers(2))]
            tokens, position, used, side = _sense_sentence(rng, category, sense)
            sentences.append(tokens)
            if used == category:
                senses.append(SenseOccurrence(index, position, used, sense, side))
    return SyntheticCorpus(sentences, senses, seed)


def sense_sentences(word: str, n_per_sense: int = 50, seed: int = 1) -> SyntheticCorpus:
    """Distinct sentences that all use `word` itself (no substitute), `n_per_sense` in each sense.

    Every sentence is annotated in `.senses`; senses alternate, so the two classes
    are balanced; no sentence appears twice. Use a seed other than the training
    corpus's for held-out examples.
    """
    if word not in SENSES:
        raise ValueError(f"{word!r} is not one of the polysemous words {sorted(SENSES)}.")
    rng = np.random.default_rng(seed)
    sentences, senses, seen = [], [], set()
    attempts = 0
    while len(sentences) < 2 * n_per_sense:
        attempts += 1
        if attempts > 100 * n_per_sense:
            raise ValueError(f"could not find {n_per_sense} distinct sentences per sense of {word!r}.")
        index = len(sentences)
        sense = SENSES[word][index % 2]
        tokens, position, used, side = _sense_sentence(rng, word, sense, use_word_prob=1.0)
        if tuple(tokens) in seen:  # every sentence once: a repeat would be its own nearest neighbour
            continue
        seen.add(tuple(tokens))
        sentences.append(tokens)
        senses.append(SenseOccurrence(index, position, used, sense, side))
    return SyntheticCorpus(sentences, senses, seed)
