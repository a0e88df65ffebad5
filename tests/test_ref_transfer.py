"""plmcourse.ref.transfer and plmcourse.data.transfer against hand-worked cases (notebook 13)."""

import numpy as np
import pytest

from plmcourse import ref
from plmcourse.data import transfer as worlds
from plmcourse.ref import transfer as rt


def test_procrustes_recovers_a_rotation_exactly():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 5))
    q, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    assert np.allclose(rt.procrustes(x, x @ q), q)
    w = rt.procrustes(x, x @ q + 0.1 * rng.standard_normal((20, 5)))
    assert np.allclose(w @ w.T, np.eye(5))  # orthogonal even when the fit is not exact


def test_precision_by_hand_two_dimensions():
    """The target plane turned by 90 degrees, (x, y) -> (-y, x): the map sends (3, 3) to (-3, 3), whose
    nearest target by cosine is (-1, 1) (row 3), and (2, -1) to (1, 2) (row 4)."""
    src = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [2.0, -1.0]])
    tgt = np.array([[0.0, 1.0], [1.0, 1.0], [-4.0, 0.0], [-1.0, 1.0], [2.0, 4.0]])
    assert ref.alignment_precision_at_1(src, tgt, [(0, 0), (1, 2)], [(2, 3), (3, 4)]) == 1.0
    assert ref.alignment_precision_at_1(src, tgt, [(0, 0), (1, 2)], [(2, 3), (3, 1)]) == 0.5
    # without a map the nearest of (3, 3) is (1, 1): row 1
    assert rt.nearest_neighbours(src[[2]], tgt)[0] == 1


def test_nearest_neighbours_ties_go_to_the_lowest_index_and_zero_rows_are_harmless():
    table = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])  # rows 1 and 2 have cosine 1 with (1, 0)
    assert rt.nearest_neighbours(np.array([[5.0, 0.0]]), table)[0] == 1
    assert rt.nearest_neighbours(np.array([[-1.0, 0.0]]), table)[0] == 0  # cosine 0 beats -1


def test_entity_units():
    assert rt.entity_units(6, [(3, 5), (0, 2)]) == [(3, 5), (0, 2), (2, 3), (5, 6)]
    assert rt.entity_units(3, []) == [(0, 1), (1, 2), (2, 3)]


def test_whole_entity_mask_budget_and_treatment_rates():
    rng = np.random.default_rng(0)
    tokens = rng.integers(4, 30, (4000, 8))
    spans = [[(0, 3)]] * 4000
    inputs, labels = rt.whole_entity_mask(tokens, spans, 3, rng, 3, 30)
    chosen = labels != -100
    assert chosen.sum(axis=1).max() <= 3
    entity = chosen[:, 0]
    assert np.array_equal(entity, chosen[:, 1]) and np.array_equal(entity, chosen[:, 2])  # whole
    assert abs(entity.mean() - 1 / 6) < 0.02  # the entity is chosen when it comes first of 6 units
    masked = (inputs[entity, :3] == 3).all(axis=1)
    assert abs(masked.mean() - 0.8) < 0.03
    assert not np.any(inputs[~chosen] != tokens[~chosen])
    assert np.all(labels[chosen] == tokens[chosen])


def test_whole_entity_mask_same_seed_same_answer():
    tokens = np.arange(4, 24).reshape(2, 10)
    a = rt.whole_entity_mask(tokens, [[(1, 4)], []], 4, np.random.default_rng(5), 3, 30)
    b = rt.whole_entity_mask(tokens, [[(1, 4)], []], 4, np.random.default_rng(5), 3, 30)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("step, expected", [
    (0, {"head": 1.0, "layer.1": 0.0, "layer.0": 0.0, "embeddings": 0.0}),
    (4, {"head": 1.0, "layer.1": 0.0, "layer.0": 0.0, "embeddings": 0.0}),
    (5, {"head": 1.0, "layer.1": 0.5, "layer.0": 0.0, "embeddings": 0.0}),
    (10, {"head": 1.0, "layer.1": 0.5, "layer.0": 0.25, "embeddings": 0.0}),
    (15, {"head": 1.0, "layer.1": 0.5, "layer.0": 0.25, "embeddings": 0.125}),
])
def test_unfreezing_schedule_by_hand(step, expected):
    assert ref.unfreezing_groups(2, step, 5, 1.0, 0.5) == expected


def test_two_languages_are_a_known_relabelling():
    a = worlds.two_languages(50, seed=3, languages="A")
    b = worlds.two_languages(50, seed=3, languages="B")
    anchors = worlds.ANCHOR_IDS
    for sa, sb in zip(a.ids, b.ids):  # the same draws: B is A translated word by word
        assert sb == [w if w in anchors else w + len(worlds.WORDS) for w in sa]
    r = worlds.two_languages(50, seed=3, variant="reversed", languages="B")
    assert all(x == y[::-1] for x, y in zip(r.ids, b.ids))
    n = worlds.two_languages(50, seed=3, variant="no anchors", languages="B")
    assert not set(w for s in n.ids for w in s) & set(w for s in a.ids for w in s)  # nothing shared
    assert np.array_equal(a.labels, b.labels)


def test_the_topic_label_is_the_subject():
    s = worlds.two_languages(200, seed=0, languages="A")
    animals = {worlds.FIRST_WORD + worlds.WORDS.index(w) for w in worlds.CATEGORIES["animal"]}
    nouns = animals | {worlds.FIRST_WORD + worlds.WORDS.index(w) for w in worlds.CATEGORIES["thing"]}
    for ids, label in zip(s.ids, s.labels):
        first_noun = next(w for w in ids if w in nouns)
        assert (first_noun in animals) == bool(label)


def test_fact_world_and_queries():
    world = worlds.fact_world(seed=0)
    assert len(set(world.people.ravel()) | set(world.cities.ravel())) == world.people.size + world.cities.size
    corpus = worlds.fact_corpus(world, 500, seed=1)
    for ids, spans in corpus:
        for s, e in spans:
            assert e - s == 2
    unseen = set(map(tuple, world.people[~world.seen]))
    for ids, spans in corpus:  # an unseen person's city is never stated
        if tuple(ids[:2]) in unseen:
            assert world.word(ids[2]) in ("likes", "writes", "met")
    queries = worlds.fact_queries(world, seen=True)
    assert len(queries) == world.seen.sum() and all(q[-2:] == [worlds.MASK] * 2 for q, _ in queries)


def test_fact_queries_with_one_mask():
    """One [MASK] for the whole city, the sentence ended after it, neither city token shown; the answer is the
    city's two tokens (either names it), the same people in the same order as the two-[MASK] probe."""
    world = worlds.fact_world(seed=0)
    two = worlds.fact_queries(world, seen=False)
    one = worlds.fact_queries(world, seen=False, masks=1)
    assert len(one) == len(two) == (~world.seen).sum()
    city_tokens = set(world.cities.ravel())
    for (q1, a1), (q2, a2), p in zip(one, two, np.flatnonzero(~world.seen)):
        assert q1 == q2[:-1] and q1[-1] == worlds.MASK and q1.count(worlds.MASK) == 1
        assert world.text(q1) == f"{world.text(world.people[p])} was born in [MASK]"
        assert np.array_equal(a1, a2) and np.array_equal(a1, world.cities[world.born[p]])
        assert not city_tokens & set(q1)  # no token of any city in the query
    # each city token names one city: whichever half a model writes identifies it
    assert len(city_tokens) == world.cities.size
    with pytest.raises(ValueError):
        worlds.fact_queries(world, masks=3)


def test_dna_task_is_balanced_and_labelled_by_the_motif():
    x, y = worlds.dna_task(100, seed=0)
    assert y.mean() == 0.5
    has = [any(tuple(row[i:i + 4]) == worlds.MOTIF for i in range(len(row) - 3)) for row in x]
    assert np.array_equal(np.array(has), y.astype(bool))
