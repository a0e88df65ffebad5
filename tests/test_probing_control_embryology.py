"""Notebook 07's control tasks (Hewitt & Liang 2019) and BERT embryology (Chiang et al. 2020):
control labels are one random label per word, the MLP probe solves what a linear one cannot,
selectivity reads memorisation, the seeded splits are what they claim, the tiny BERT's
snapshots are the course's own pre-training (the early ones rebuilt bit for bit here), and
the embryology measurements give exact answers on hand-made cases."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import json
from collections import Counter

import numpy as np
import pytest
import torch

from plmcourse import data
from plmcourse import nn as pnn
from plmcourse.data.reviews import NEGATIVE, POSITIVE, TOPICS
from plmcourse.pretrained import embryology
from plmcourse.pretrained.checkpoints import heldout_batch, load_checkpoint

# ----------------------------------------------------------------------------
# Control labels


def test_control_labels_give_every_word_one_label_from_the_task():
    words = ["a", "b", "a", "c", "b", "a"] * 3
    labels = ["N", "V", "V", "N", "N", "V"] * 3
    control = pnn.control_labels(words, labels, seed=1)
    assert len(control) == len(words)
    by_word = {}
    for w, c in zip(words, control):
        by_word.setdefault(w, set()).add(c)
    assert all(len(s) == 1 for s in by_word.values())  # one label per word type
    assert set(control) <= {"N", "V"}


def test_control_labels_follow_the_label_frequencies_and_not_the_example_order():
    words = [f"w{i}" for i in range(4000)]
    labels = ["A"] * 3000 + ["B"] * 1000  # 75% / 25%
    control = pnn.control_labels(words, labels, seed=0)
    share = Counter(control)["A"] / len(control)
    assert 0.72 < share < 0.78
    order = np.random.default_rng(5).permutation(len(words))
    shuffled = pnn.control_labels([words[i] for i in order], [labels[i] for i in order], seed=0)
    assert shuffled == [control[i] for i in order]  # the same word gets the same label
    assert pnn.control_labels(words, labels, seed=1) != control
    assert pnn.control_labels(words, labels, seed=0) == control


def test_control_labels_a_label_that_never_occurs_is_never_drawn_and_lengths_must_match():
    control = pnn.control_labels(["x", "y", "z"] * 50, [0] * 150, seed=3)
    assert set(control) == {0}
    with pytest.raises(ValueError, match="3 words for 2 labels"):
        pnn.control_labels(["a", "b", "c"], [0, 1])


# ----------------------------------------------------------------------------
# The MLP probe and selectivity


def xor_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 2, (n, 2), generator=g).float()
    y = (x[:, 0] != x[:, 1]).long()
    return x + 0.1 * torch.randn(n, 2, generator=g), y


def test_mlp_probe_solves_xor_where_a_linear_probe_cannot():
    train_x, train_y = xor_data(200, 0)
    test_x, test_y = xor_data(200, 1)
    assert pnn.mlp_probe(train_x, train_y, test_x, test_y, seed=0) > 0.95
    assert pnn.linear_probe(train_x, train_y, test_x, test_y) < 0.75


def test_mlp_probe_is_deterministic_and_handles_any_labels():
    train_x, train_y = xor_data(100, 2)
    test_x, test_y = xor_data(50, 3)
    names = np.array(["odd", "even"])
    a = pnn.mlp_probe(train_x, names[train_y.numpy()], test_x, names[test_y.numpy()], seed=4)
    b = pnn.mlp_probe(train_x.numpy(), names[train_y.numpy()], test_x.numpy(), names[test_y.numpy()], seed=4)
    assert a == b and 0.0 <= a <= 1.0
    # A test label never seen in training counts as a mistake.
    assert pnn.mlp_probe(train_x, train_y, test_x, torch.full((50,), 7), seed=0) == 0.0


def test_selectivity_separates_reading_the_task_from_remembering_words():
    rng = np.random.default_rng(0)
    n_words, per_word, d = 20, 10, 30
    word_vectors = rng.normal(size=(n_words, d))
    words = np.repeat(np.arange(n_words), per_word)
    labels = rng.integers(0, 2, size=len(words))  # the task: independent of the word
    # Layer 0 holds only the word (a probe can remember it); layer 1 holds only the label.
    layer0 = word_vectors[words] + 0.01 * rng.normal(size=(len(words), d))
    layer1 = np.eye(d)[labels] * 3 + 0.3 * rng.normal(size=(len(words), d))
    x = torch.as_tensor(np.stack([layer0, layer1], axis=1), dtype=torch.float32)  # (N, 2, d)
    test = np.arange(len(words)) % per_word < 3  # every word in train and test
    word_names = [f"w{w}" for w in words]
    task, control, selectivity = pnn.selectivity_by_layer(
        x[~test], labels[~test], [word_names[i] for i in np.flatnonzero(~test)],
        x[test], labels[test], [word_names[i] for i in np.flatnonzero(test)], seed=0)
    assert task[1] > 0.95 and abs(task[0] - 0.5) < 0.2  # the label is in layer 1 only
    assert control[0] > 0.95  # layer 0 is the word: its random labels are remembered
    assert selectivity[1] > 0.3 and selectivity[0] < -0.3
    np.testing.assert_allclose(selectivity, task - control)


def test_top_directions_are_the_principal_components_of_the_training_vectors():
    rng = np.random.default_rng(0)
    train = rng.normal(size=(500, 3)) * np.array([5.0, 2.0, 0.1]) + np.array([1.0, -2.0, 3.0])  # widest along x
    test = rng.normal(size=(7, 3))
    a, b = pnn.top_directions(train, test, 1)
    assert a.shape == (500, 1) and b.shape == (7, 1)
    centred = train - train.mean(axis=0)
    assert abs(np.corrcoef(a[:, 0].numpy(), centred[:, 0])[0, 1]) > 0.99  # the first direction is x
    # The test vectors use the training mean and directions: k = d rotates them without loss.
    a3, b3 = pnn.top_directions(train, test, 3)
    np.testing.assert_allclose(np.linalg.norm(b3.numpy(), axis=1), np.linalg.norm(test - train.mean(axis=0), axis=1),
                               rtol=1e-4)
    # Against NumPy's SVD (signs may differ).
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    np.testing.assert_allclose(np.abs(a3.numpy()), np.abs(centred @ vt.T), rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match="k must be between 1 and 3"):
        pnn.top_directions(train, test, 4)


# ----------------------------------------------------------------------------
# Seeded splits


def test_pos_by_word_with_a_seed_draws_eight_unseen_words():
    fixed = data.pos_probe_examples()
    assert {e.word for e in fixed.test} == set(data.POS_TEST_WORDS)  # the default is unchanged
    drawn = [data.pos_probe_examples(seed=s) for s in range(4)]
    for train, test in drawn:
        assert (len(train), len(test)) == (288, 96)
        assert not {e.word for e in train} & {e.word for e in test}
        assert Counter(e.label for e in test) == {"NOUN": 48, "VERB": 48}
    assert len({frozenset(e.word for e in split.test) for split in drawn}) == 4
    assert data.pos_probe_examples(seed=2) == drawn[2]


def test_pos_by_occurrence_keeps_every_word_on_both_sides():
    train, test = data.pos_probe_examples(seed=1, by="occurrence")
    assert (len(train), len(test)) == (256, 128)
    assert Counter((e.word, e.label) for e in test) == {(w, l): 2 for w in data.POS_WORDS for l in ("NOUN", "VERB")}
    assert Counter((e.word, e.label) for e in train) == {(w, l): 4 for w in data.POS_WORDS for l in ("NOUN", "VERB")}
    sentences = lambda split: {" ".join(e.words) for e in split}  # noqa: E731
    assert not sentences(train) & sentences(test)
    assert data.pos_probe_examples(seed=2, by="occurrence") != (train, test)
    with pytest.raises(ValueError, match="by must be"):
        data.pos_probe_examples(by="sentence")


def test_review_probes_split_by_word_and_every_word_is_tested_once_over_the_folds():
    tested = Counter()
    for fold in range(3):
        tasks = data.review_probe_examples(seed=4, fold=fold)
        for name, (train, test) in tasks.items():
            assert not {e.word for e in train} & {e.word for e in test}, name
            for e in train + test:
                assert e.words[e.index] == e.word
        train, test = tasks["sentiment"]
        assert (len(train), len(test)) == (400, 200)
        for e in train + test:
            assert e.label == ("POSITIVE" if e.word in POSITIVE else "NEGATIVE")
            assert not set(e.words) & (set(POSITIVE + NEGATIVE) - {e.word})  # the only sentiment word
        train, test = tasks["word class"]
        assert (len(train), len(test)) == (800, 400)
        nouns = {w for ws in TOPICS.values() for w in ws}
        assert all(e.label == ("NOUN" if e.word in nouns else "ADJ") for e in train + test)
        assert [e.index for e in tasks["sentiment"].train] == [e.index for e in train[1::2]]
        tested.update({e.word for e in test})
    assert set(tested.values()) == {1} and len(tested) == len(nouns) + len(POSITIVE) + len(NEGATIVE)
    with pytest.raises(ValueError, match="fold must be"):
        data.review_probe_examples(fold=3)


# ----------------------------------------------------------------------------
# Embryology: the snapshots and what they know


@pytest.fixture(scope="module")
def snapshots():
    return embryology.load_snapshots("cpu")


def test_the_early_snapshots_rebuild_to_the_last_stored_bit(snapshots):
    """Step 0 rebuilds bit for bit anywhere. Trained steps rebuild bit for bit on the kind of CPU that built
    them; another CPU's float32 kernels round differently and training carries it on (an AMD EPYC here: 126
    and 137 of 84,592 stored values differ at steps 10 and 30, by at most 1e-4, near-zero biases most), so
    elsewhere a rebuild must agree to 2e-4 everywhere and to the bit in all but 0.5% of the values."""
    models, _, metadata = snapshots
    assert json.loads(metadata["snapshot_steps"]) == list(embryology.SNAPSHOT_STEPS) == list(models)
    kept, _, _ = embryology.snapshot_state_dicts(upto=30)
    assert sorted(kept) == [0, 10, 30]
    for step, state in kept.items():
        stored = models[step].state_dict()
        rebuilt = {k: v.half().float() for k, v in state.items()}
        if step == 0:
            assert all(torch.equal(rebuilt[k], stored[k]) for k in rebuilt)
            continue
        assert all(((rebuilt[k] - stored[k]).abs() <= 2e-4).all() for k in rebuilt), step
        off = sum(int((rebuilt[k] != stored[k]).sum()) for k in rebuilt)
        assert off <= 0.005 * sum(v.numel() for v in rebuilt.values()), (step, off)
    assert not torch.equal(kept[10]["bert.embeddings.token.weight"], kept[30]["bert.embeddings.token.weight"])


def test_the_last_snapshot_is_the_recipe_run_to_its_end(snapshots):
    models, tokenizer, metadata = snapshots
    shipped = load_checkpoint("tiny-bert", device="cpu")
    assert tokenizer.itos == shipped.tokenizer.itos
    assert json.loads(metadata["spec"])["steps"] == 2000 == max(models)
    batch = heldout_batch(shipped)
    losses = {}
    for step, model in models.items():
        with torch.no_grad():
            losses[step] = float(pnn.mlm_loss(model(*batch[:3])[0], batch[3]))
    stored = {int(k): v for k, v in json.loads(metadata["heldout_mlm_loss"]).items()}
    assert losses == pytest.approx(stored, abs=1e-4)
    steps = sorted(losses)
    assert all(losses[a] > losses[b] for a, b in zip(steps, steps[1:]))  # every snapshot better than the last
    assert losses[2000] == pytest.approx(float(shipped.metadata["heldout_loss"]), abs=0.02)


def test_word_vectors_by_layer_are_the_models_own_and_ignore_padding(snapshots):
    models, tokenizer, _ = snapshots
    model = models[2000]
    sentences = [["the", "soup", "was", "superb", "."], ["what", "a", "dull", "film", "ending", "and", "plot", "."]]
    vectors = pnn.word_vectors_by_layer(model, tokenizer, sentences, [1, 2])
    assert vectors.shape == (2, 3, 64)
    ids = torch.tensor([[tokenizer.stoi["[CLS]"], *tokenizer.encode(sentences[0]).tolist(), tokenizer.stoi["[SEP]"]]])
    with torch.no_grad():
        alone = model.bert.all_layers(ids, torch.zeros_like(ids), torch.ones_like(ids, dtype=torch.bool))
    expected = torch.stack([h[0, 2] for h in alone])  # "soup" is word 1, position 2
    torch.testing.assert_close(vectors[0], expected, atol=1e-5, rtol=1e-5)


def test_mlm_accuracy_by_group_on_a_hand_made_case(snapshots):
    models, tokenizer, _ = snapshots
    stoi = tokenizer.stoi

    class Always(torch.nn.Module):
        """Predicts the word `word` at every position."""

        def __init__(self, word):
            super().__init__()
            self.word = word

        def forward(self, inputs, segments, attention_mask):
            logits = torch.zeros(*inputs.shape, len(stoi))
            logits[..., stoi[self.word]] = 1.0
            return logits, torch.zeros(len(inputs), 2)

    labels = torch.full((1, 6), -100)
    labels[0, 1], labels[0, 2], labels[0, 3] = stoi["soup"], stoi["soup"], stoi["superb"]
    batch = (torch.zeros(1, 6, dtype=torch.long), torch.zeros(1, 6, dtype=torch.long),
             torch.ones(1, 6, dtype=torch.bool), labels, torch.zeros(1, dtype=torch.long))
    groups = {"nouns": ["soup", "plot"], "adjectives": ["superb"]}
    found = embryology.mlm_accuracy_by_group({0: Always("soup"), 1: Always("superb")}, batch, tokenizer, groups)
    np.testing.assert_array_equal(found["nouns"], [1.0, 0.0])
    np.testing.assert_array_equal(found["adjectives"], [0.0, 1.0])


def test_probe_snapshots_untrained_against_trained(snapshots):
    models, tokenizer, _ = snapshots
    found = embryology.probe_snapshots({0: models[0], 2000: models[2000]}, tokenizer, seed=0, n_folds=3)
    assert set(found) == {"word class", "sentiment"}
    assert found["sentiment"].shape == (2, 3)
    assert found["sentiment"][1].min() > 0.9  # the trained model knows which words are good news
    assert abs(found["sentiment"][0, 0] - 0.5) < 0.2  # the untrained embeddings do not
    assert found["word class"][1].min() > 0.95
