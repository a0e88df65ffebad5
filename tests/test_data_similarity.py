"""plmcourse.data.similarity: the graded pairs follow their rules, the English set its rubric, and every
generator is deterministic; what notebook 08 trains with (train_simcse) really trains."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import copy
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from plmcourse import data, ref
from plmcourse import nn as pnn
from plmcourse.data import reviews, similarity
from plmcourse.pretrained import load_checkpoint

ADJECTIVES = set(reviews.POSITIVE) | set(reviews.NEGATIVE)
NOUNS = {noun: topic for topic, nouns in reviews.TOPICS.items() for noun in nouns}


def facts(sentence):
    """(noun, adjective) of a review-world sentence about one noun."""
    words = sentence.split()
    (noun,) = [w for w in words if w in NOUNS]
    (adj,) = [w for w in words if w in ADJECTIVES]
    return noun, adj


def positive(adj):
    return adj in reviews.POSITIVE


@pytest.fixture(scope="module")
def pairs():
    return data.review_similarity_pairs()


def test_review_pairs_are_balanced_deterministic_and_distinct(pairs):
    assert Counter(p.kind for p in pairs) == {kind: 40 for kind in similarity.REVIEW_KINDS}
    assert pairs == data.review_similarity_pairs() != data.review_similarity_pairs(seed=1)
    keys = {frozenset((p.a, p.b)) for p in pairs}
    assert len(keys) == len(pairs) and all(p.a != p.b for p in pairs)
    assert all(p.score == similarity.REVIEW_KINDS[p.kind] for p in pairs)


def test_each_kind_of_review_pair_obeys_its_rule(pairs):
    for p in pairs:
        (noun_a, adj_a), (noun_b, adj_b) = facts(p.a), facts(p.b)
        same_noun, same_topic = noun_a == noun_b, NOUNS[noun_a] == NOUNS[noun_b]
        same_sentiment = positive(adj_a) == positive(adj_b)
        rule = {"paraphrase": same_noun and adj_a == adj_b,
                "synonym": same_noun and adj_a != adj_b and same_sentiment,
                "same_topic": same_topic and not same_noun and same_sentiment,
                "opposite": same_noun and not same_sentiment,
                "other_topic": not same_topic and same_sentiment,
                "unrelated": not same_topic and not same_sentiment}[p.kind]
        assert rule, p


def test_the_tiny_bert_knows_every_word_of_the_review_world():
    tokenizer = load_checkpoint("tiny-bert", device="cpu").tokenizer
    retrieval = data.review_retrieval()
    sentences = ([s for p in data.review_similarity_pairs() for s in (p.a, p.b)] + retrieval.queries
                 + retrieval.pool + [s for t in data.review_nli_triples(200) for s in t] + data.review_sentences(500))
    words = {w for s in sentences for w in s.split()}
    assert (tokenizer.encode(sorted(words)) != 0).all()  # nothing maps to <unk>


def test_nli_triples_entail_and_contradict_as_promised():
    triples = data.review_nli_triples(300, seed=5)
    assert triples == data.review_nli_triples(300, seed=5)
    for premise, entailment, contradiction in triples:
        (n0, a0), (n1, a1), (n2, a2) = facts(premise), facts(entailment), facts(contradiction)
        assert n0 == n1 == n2
        assert positive(a0) == positive(a1) != positive(a2)
        assert premise != entailment


def test_review_retrieval_answers_are_paraphrases_and_each_query_brings_two_look_alikes():
    task = data.review_retrieval(n_queries=30, seed=4)
    assert len(task.pool) == 90 and task.answers.tolist() == list(range(30))
    for i, query in enumerate(task.queries):
        answer = task.pool[task.answers[i]]
        assert facts(query) == facts(answer) and query != answer
        same_words_other_sentiment, other_topic = task.pool[30 + 2 * i], task.pool[31 + 2 * i]
        assert facts(same_words_other_sentiment)[0] == facts(query)[0]
        assert positive(facts(same_words_other_sentiment)[1]) != positive(facts(query)[1])
        assert NOUNS[facts(other_topic)[0]] != NOUNS[facts(query)[0]] and facts(other_topic)[1] == facts(query)[1]


def test_english_pairs_follow_their_rubric():
    pairs = data.sts_pairs()
    ranges = {"paraphrase": (4, 5), "related": (1.5, 3.5), "detail": (3, 4), "negation": (0.5, 2),
              "overlap_trap": (0.5, 2.5), "unrelated": (0, 0.5)}
    assert set(ranges) == set(data.STS_KINDS) and len(pairs) >= 150
    counts = Counter(p.kind for p in pairs)
    assert min(counts.values()) >= 15
    for p in pairs:
        low, high = ranges[p.kind]
        assert low <= p.score <= high and (2 * p.score).is_integer(), p
        for sentence in (p.a, p.b):
            assert sentence[0].isupper() and sentence[-1] in ".!?" and 4 <= len(sentence.split()) <= 20, sentence
    assert len({frozenset((p.a, p.b)) for p in pairs}) == len(pairs)
    retrieval = data.sts_retrieval()
    assert len(retrieval.queries) == 40 and len(retrieval.pool) >= 40
    assert not set(retrieval.queries) & set(retrieval.pool)
    source = (Path(similarity.__file__).parent / "sts_pairs.py").read_text(encoding="utf-8")
    block = source[source.index("RETRIEVAL_QUERIES = ("):source.index("RETRIEVAL_POOL = (")]
    marked = [line.strip().endswith("# hard") for line in block.splitlines() if line.strip().startswith('"')]
    assert retrieval.hard.tolist() == marked and sum(marked) == 15  # the tuple agrees with the comments


@pytest.mark.parametrize("supervised", [False, True], ids=["unsupervised", "supervised"])
def test_train_simcse_trains_and_the_same_seed_gives_the_same_model(supervised):
    checkpoint = load_checkpoint("tiny-bert", device="cpu")
    examples = data.review_nli_triples(500) if supervised else data.review_sentences(1000)
    models, histories = [], []
    for _ in range(2):
        model = copy.deepcopy(checkpoint.model.bert)
        histories.append(pnn.train_simcse(model, checkpoint.tokenizer, examples, steps=30, batch_size=32, seed=7,
                                          progress=False))
        models.append(model)
    first, second = histories
    assert first.loss == second.loss  # same seed, same batches and dropout masks
    assert np.mean(first.loss[-5:]) < 0.9 * np.mean(first.loss[:5])  # the InfoNCE loss falls
    assert not models[0].training  # handed back in eval mode
    if supervised:  # the triples' notion of similarity is the pairs' scores: they rise at once
        pairs = data.review_similarity_pairs()
        gold = [p.score for p in pairs]

        def spearman(model):
            a, b = (pnn.encode(model, checkpoint.tokenizer, side) for side in ([p.a for p in pairs], [p.b for p in pairs]))
            return ref.spearman(ref.cosine_similarity(a, b), gold)

        assert spearman(models[0]) > spearman(checkpoint.model.bert) + 0.1
    else:  # contrastive training spreads the vectors
        sentences = data.review_sentences(200)
        before = pnn.encode(checkpoint.model.bert, checkpoint.tokenizer, sentences)
        after = pnn.encode(models[0], checkpoint.tokenizer, sentences)
        assert ref.anisotropy(after) < ref.anisotropy(before)


def test_bert_batch_pads_both_tokenizers_alike():
    tokenizer = load_checkpoint("tiny-bert", device="cpu").tokenizer
    ids, mask = pnn.bert_batch(tokenizer, ["the soup was superb .", "i loved it ."])
    assert ids.shape == (2, 7) and mask.sum(1).tolist() == [7, 6]
    assert ids[0, 0] == tokenizer.stoi["[CLS]"] and ids[1, 5] == tokenizer.stoi["[SEP]"]
    assert ids[1, 1:5].tolist() == tokenizer.encode("i loved it .".split()).tolist()
    assert ids[1, 6] == tokenizer.stoi["[PAD]"] and not mask[1, 6]


def test_encode_pools_every_layer_and_ignores_the_batch_size():
    checkpoint = load_checkpoint("tiny-bert", device="cpu")
    sentences = data.review_sentences(40)
    every = pnn.encode(checkpoint.model.bert, checkpoint.tokenizer, sentences, layer="all", batch_size=7)
    last = pnn.encode(checkpoint.model.bert, checkpoint.tokenizer, sentences, batch_size=64)
    assert every.shape == (3, 40, 64) and every.dtype == np.float32
    np.testing.assert_allclose(every[-1], last, atol=1e-5)  # padding to another length changes nothing
    ids, mask = pnn.bert_batch(checkpoint.tokenizer, sentences[:3])
    with torch.no_grad():
        hidden, _ = checkpoint.model.bert(ids, attention_mask=mask)
    np.testing.assert_allclose(last[:3], pnn.mean_pool(hidden, mask).numpy(), atol=1e-6)
