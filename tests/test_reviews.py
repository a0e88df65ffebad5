"""plmcourse.data.reviews: the synthetic review world is deterministic and its tasks are split as promised."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np

from plmcourse.data import (
    WordTokenizer,
    nsp_pairs,
    review_documents,
    review_sentiment_task,
    review_vocabulary,
)
from plmcourse.data import reviews


def test_documents_are_deterministic_and_use_the_vocabulary():
    a, b = review_documents(50, seed=3), review_documents(50, seed=3)
    assert a == b and a != review_documents(50, seed=4)
    vocabulary = set(review_vocabulary())
    words = {w for doc in a for sentence in doc for w in sentence}
    assert words <= vocabulary
    tokenizer = WordTokenizer(review_vocabulary(), specials=("[PAD]",))
    assert (tokenizer.encode(sorted(words)) != 0).all()  # nothing maps to <unk>


def test_documents_share_one_sentiment_and_one_topic():
    for doc in review_documents(200, seed=0, mixed=0.0):
        words = {w for sentence in doc for w in sentence}
        assert not (words & set(reviews.POSITIVE) and words & set(reviews.NEGATIVE))
        topics = [t for t, nouns in reviews.TOPICS.items() if words & set(nouns)]
        assert len(topics) == 1
        assert doc[-1] in [c.split() for c in reviews._CLOSINGS[True] + reviews._CLOSINGS[False]]


def test_nsp_pairs_are_half_real_next_sentences():
    docs = review_documents(100, seed=0)
    pairs = nsp_pairs(docs, np.random.default_rng(0), 2000)
    labels = np.array([y for *_, y in pairs])
    assert abs(labels.mean() - 0.5) < 0.05
    follows = {(tuple(d[i]), tuple(d[i + 1])) for d in docs for i in range(len(d) - 1)}
    assert all((tuple(a), tuple(b)) in follows for a, b, y in pairs if y == 1)


def test_acceptability_task_never_shows_the_unseen_words_in_training():
    task = reviews.review_acceptability_task(seed=0)
    seen = set(task["seen"])
    content = set(reviews.POSITIVE + reviews.NEGATIVE) | {n for g in reviews.TOPICS.values() for n in g} | \
        set(reviews._VERBS[True] + reviews._VERBS[False])
    train_words = {w for words, _ in task["train"] for w in words} & content
    unseen_words = {w for words, _ in task["test_unseen"] for w in words} & content
    assert train_words <= seen and not unseen_words & seen
    for split in ("train", "test_seen", "test_unseen"):
        labels = [y for _, y in task[split]]
        assert abs(np.mean(labels) - 0.5) < 0.05
    # An ill-formed sentence has exactly the words of a well-formed one: only order and word kind differ.
    good = [sorted(w) for w, y in task["test_unseen"] if y == 1]
    bad = [sorted(w) for w, y in task["test_unseen"] if y == 0]
    assert sorted(len(w) for w in good) != [] and len(bad) == len(good)
    assert task == reviews.review_acceptability_task(seed=0)


def test_sentiment_task_split():
    task = review_sentiment_task(seed=1)
    seen = set(task["seen"])
    assert all(set(w) & seen for w, _ in task["train"])
    assert not any(set(w) & seen for w, _ in task["test_unseen"])


def test_overall_task_is_balanced_deterministic_and_leaves_out_city_and_closing():
    task = reviews.review_overall_task(seed=3, n_train=20, n_test=40, n_unlabelled=30)
    assert task == reviews.review_overall_task(seed=3, n_train=20, n_test=40, n_unlabelled=30)
    assert task["test"] != reviews.review_overall_task(seed=4, n_train=20, n_test=40, n_unlabelled=30)["test"]
    assert [y for _, y in task["train"]].count(1) == 10 and [y for _, y in task["test"]].count(0) == 20
    assert len(task["unlabelled"]) == 30 and all(isinstance(w, str) for w in task["unlabelled"][0])
    giveaways = {"york", "delhi", "went", "penny", "again", "recommended", "avoid", "waste"}
    for words, _ in task["train"] + task["test"]:
        assert not giveaways & set(words)
        assert 3 <= words.count(".") <= 5  # 3-5 sentences


def test_overall_task_mixes_sentences_at_the_rate_asked():
    """mixed=0: every sentiment word agrees with the label; mixed=0.2: about a fifth of the sentences do not."""
    def disagreeing(mixed):
        task = reviews.review_overall_task(seed=0, n_train=0, n_test=400, n_unlabelled=0, mixed=mixed)
        against, sentences = 0, 0
        for words, label in task["test"]:
            for sentence in " ".join(words).split(" . "):
                ws = set(sentence.split())
                sentences += 1
                against += bool(ws & set(reviews.NEGATIVE if label else reviews.POSITIVE))
        return against / sentences
    assert disagreeing(0.0) == 0.0
    assert 0.15 < disagreeing(0.2) < 0.25
