"""plmcourse.data.synthetic: deterministic, annotated correctly, balanced, and the evaluation sets fit it."""

import plmcourse  # noqa: F401

from collections import Counter

import numpy as np
import pytest

from plmcourse import data
from plmcourse.data import synthetic


@pytest.fixture(scope="module")
def corpus():
    return data.synthetic_corpus(20000, seed=0)


def test_same_seed_same_corpus_other_seed_other_corpus():
    a, b, c = (data.synthetic_corpus(500, seed=s) for s in (3, 3, 4))
    assert a.sentences == b.sentences and a.senses == b.senses
    assert a.sentences != c.sentences


def test_sentences_are_lowercase_words_ending_with_a_full_stop(corpus):
    assert len(corpus) == 20000
    for sentence in corpus.sentences[:2000]:
        assert sentence[-1] == "." and all(t == t.lower() and " " not in t for t in sentence)
    assert corpus.text(2).count("\n") == 1
    starts = corpus.sentence_starts()
    tokens = corpus.tokens()
    assert len(starts) == len(corpus) and tokens[starts[1]] == corpus.sentences[1][0]


def test_sense_annotations_point_at_the_word(corpus):
    assert corpus.senses
    for occurrence in corpus.senses:
        sentence = corpus.sentences[occurrence.sentence]
        assert sentence[occurrence.position] == occurrence.word
        assert occurrence.sense in synthetic.SENSES[occurrence.word]
        assert occurrence.side in ("left", "right")
    counts = Counter((o.word, o.sense) for o in corpus.senses)
    for word, (first, second) in synthetic.SENSES.items():
        assert abs(counts[word, first] - counts[word, second]) < 0.15 * counts[word, first]


def test_right_sided_occurrences_start_the_same_way_in_both_senses(corpus):
    starts = {(o.word, o.sense): set() for o in corpus.senses}
    for o in corpus.senses:
        if o.side == "right":
            starts[o.word, o.sense].add(tuple(corpus.sentences[o.sentence][:o.position + 1]))
    for word, (first, second) in synthetic.SENSES.items():
        assert starts[word, first] == starts[word, second] == {("the", word)}


def test_sense_sentences_are_balanced_and_distinct():
    corpus = data.sense_sentences("bank", 40, seed=1)
    assert len(corpus) == 80 and len({tuple(s) for s in corpus.sentences}) == 80
    assert Counter(o.sense for o in corpus.senses) == {"river": 40, "money": 40}
    assert all(s[o.position] == "bank" for s, o in zip(corpus.sentences, corpus.senses))
    with pytest.raises(ValueError, match="polysemous"):
        data.sense_sentences("king")
    with pytest.raises(ValueError, match="distinct sentences"):
        data.sense_sentences("apple", 1000)


def test_evaluation_sets_use_only_corpus_words(corpus):
    vocabulary = set(corpus.tokens())
    for a, b, score in data.SIMILARITY_PAIRS:
        assert a in vocabulary and b in vocabulary and 0 <= score <= 10
    assert len(data.SIMILARITY_PAIRS) == 50 and len({(a, b) for a, b, _ in data.SIMILARITY_PAIRS}) == 50
    for group, questions in data.ANALOGIES.items():
        assert questions and all(w in vocabulary for q in questions for w in q)
    assert len(data.ANALOGIES["gender"]) == 30 and len(data.ANALOGIES["capital"]) == 90


def test_people_fill_the_grid_and_pronouns_agree(corpus):
    grid = Counter(synthetic.PEOPLE.values())
    assert len(grid) == 12 and set(grid.values()) == {1}
    pronoun = {"male": {"he", "his", "him"}, "female": {"she", "her"}}
    for sentence in corpus.sentences[:3000]:
        people = [w for w in sentence if w in synthetic.PEOPLE]
        if len(people) == 1 and sentence[0] not in ("they", "we"):
            gender = synthetic.PEOPLE[people[0]][0]
            other = "female" if gender == "male" else "male"
            assert not pronoun[other] & set(sentence), " ".join(sentence)


def test_capitals_follow_their_country_in_the_long_range_sentences(corpus):
    capital_of = {country: capital for country, capital, _ in synthetic.NATIONS}
    found = 0
    for sentence in corpus.sentences:
        if len(sentence) > 4 and sentence[2] in ("of", "from") and sentence[1] in synthetic.PEOPLE:
            country = sentence[3]
            assert capital_of[country] in sentence
            found += 1
    assert found > 1000


def test_corpus_size_is_stable():
    tokens = data.synthetic_corpus(20000, seed=0).tokens()
    assert 200_000 < len(tokens) < 240_000 and len(set(tokens)) < 300
    assert np.mean([len(s) for s in data.synthetic_corpus(1000, seed=1).sentences]) > 8
