"""The three methods notebook 10 adds from the lecture's list (plmcourse.nn.prompting): the prototypical
verbalizer's loss by hand and against a loop, LM-BFF's template generation against a direct recomputation,
STraTA's generated NLI pairs against the word lists, the shared draws and self-training."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import copy
import math

import numpy as np
import pytest
import torch

from plmcourse.nn import prompting as pr


@pytest.fixture(scope="module")
def reviews_mlm():
    from plmcourse.pretrained import load_checkpoint
    return load_checkpoint("tiny-bert-reviews", "cpu")


# ---------------------------------------------------------------- ProtoVerb


def test_protoverb_loss_by_hand():
    """Three unit vectors, two classes, temperature 1: every term is log(1 + e^-1) or 0."""
    z = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    labels = torch.tensor([0, 0, 1])
    prototypes = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    t = math.log(1 + math.exp(-1))
    # instance-instance: anchors 0 and 1 have each other (cosine 1) against the third (cosine 0); anchor 2 has
    # no positive and adds 0 to the mean over 3 anchors. instance-prototype: every row t.
    expected = 2 * t / 3 + t
    assert pr.protoverb_loss(z, labels, prototypes, temperature=1.0).item() == pytest.approx(expected, abs=1e-6)


def test_protoverb_loss_equals_a_loop_and_torch_cross_entropy():
    g = torch.Generator().manual_seed(0)
    z = torch.nn.functional.normalize(torch.randn(9, 5, generator=g, dtype=torch.float64), dim=-1)
    c = torch.nn.functional.normalize(torch.randn(3, 5, generator=g, dtype=torch.float64), dim=-1)
    labels = torch.tensor([0, 0, 1, 1, 1, 2, 0, 2, 1])
    tau = 0.3
    s = (z @ z.T / tau).numpy()
    anchors = []
    for i in range(9):
        others = [k for k in range(9) if k != i]
        log_norm = np.log(np.sum(np.exp(s[i, others])))
        positives = [j for j in others if labels[j] == labels[i]]
        anchors.append(np.mean([-(s[i, j] - log_norm) for j in positives]) if positives else 0.0)
    expected = np.mean(anchors) + torch.nn.functional.cross_entropy(z @ c.T / tau, labels).item()
    assert pr.protoverb_loss(z, labels, c, tau).item() == pytest.approx(expected, rel=1e-10)


def test_protoverb_loss_prefers_classes_together_and_near_their_prototypes():
    labels = torch.tensor([0, 0, 1, 1])
    c = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    right = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    assert pr.protoverb_loss(right, labels, c) < pr.protoverb_loss(right.flip(0), labels, c)


def test_protoverb_scores_are_cosines_to_the_prototypes_over_the_temperature():
    verb = pr.ProtoVerb(d=2, n_classes=2, dim=2, temperature=0.5)
    with torch.no_grad():
        verb.project.weight.copy_(torch.eye(2))
        verb.project.bias.zero_()
        verb.prototypes.copy_(torch.tensor([[3.0, 0.0], [1.0, 1.0]]))  # unit length does not matter: normalised
    h = torch.tensor([[2.0, 0.0], [0.0, -1.0]])
    cosines = torch.tensor([[1.0, 2 ** -0.5], [0.0, -(2 ** -0.5)]])
    torch.testing.assert_close(verb(h), torch.log_softmax(cosines / 0.5, dim=-1))


def test_train_protoverb_separates_two_clusters_it_was_not_shown():
    g = torch.Generator().manual_seed(1)
    centres = 3 * torch.randn(2, 16, generator=g)
    labels = torch.tensor([0] * 8 + [1] * 8)
    h = centres[labels] + torch.randn(16, 16, generator=g)
    new_labels = torch.tensor([0, 1] * 50)
    new_h = centres[new_labels] + torch.randn(100, 16, generator=g)
    verb = pr.train_protoverb(h, labels, seed=0)
    log_p = verb(new_h)
    assert log_p.shape == (100, 2)
    torch.testing.assert_close(log_p.exp().sum(-1), torch.ones(100))
    assert (log_p.argmax(-1) == new_labels).float().mean() > 0.95
    # the same labels swapped give the opposite classifier: it learnt from the labels, not the layout
    swapped = pr.train_protoverb(h, 1 - labels, seed=0)
    assert (swapped(new_h).argmax(-1) == 1 - new_labels).float().mean() > 0.95


# ---------------------------------------------------------------- LM-BFF's template search


def test_generate_templates_scores_are_the_sum_of_slot_log_probs(reviews_mlm):
    from plmcourse.data import review_overall_task
    model, tok = reviews_mlm.model, reviews_mlm.tokenizer
    train = review_overall_task(seed=3, n_train=6)["train"]
    texts, labels = [w for w, _ in train], torch.tensor([y for _, y in train])
    words = [[tok.stoi["terrible"]], [tok.stoi["great"]]]
    out = pr.generate_templates(model, tok, texts, labels, words, "{x} [T] [T] [MASK] .", top_n=3)
    assert len(out) == 9 and [s for _, s in out] == sorted((s for _, s in out), reverse=True)
    for template, _ in out:
        parts = template.split()
        assert parts[0] == "{x}" and parts.count("[MASK]") == 1 and parts[-2:] == ["[MASK]", "."]
        assert not {"<unk>", "[PAD]", "[CLS]", "[SEP]"} & set(parts)
    # recompute the best template's score directly: each text with its label word, both slots masked
    template, score = out[0]
    slot_words = template.split()[1:3]
    total = 0.0
    for text, y in zip(texts, labels.tolist()):
        ids = [tok.stoi["[CLS]"], *tok.encode(list(text)), tok.stoi["[MASK]"], tok.stoi["[MASK]"],
               words[y][0], tok.stoi["."], tok.stoi["[SEP]"]]
        ids = torch.tensor([ids])
        with torch.no_grad():
            logits, _ = model(ids, torch.zeros_like(ids), torch.ones_like(ids, dtype=torch.bool))
        log_p = torch.log_softmax(logits[0], dim=-1)
        n = ids.shape[1]
        total += (log_p[n - 5, tok.stoi[slot_words[0]]] + log_p[n - 4, tok.stoi[slot_words[1]]]).item()
    assert score == pytest.approx(total, abs=1e-3)


# ---------------------------------------------------------------- STraTA


def test_task_augmentation_pairs_follow_the_word_lists_and_never_a_label():
    from plmcourse.data import reviews, review_overall_task
    unlabelled = review_overall_task(seed=1)["unlabelled"]

    def generate(seed):
        return pr.task_augmentation_pairs(unlabelled, reviews.POSITIVE, reviews.NEGATIVE, reviews.TOPICS, 300, seed=seed)

    pairs = generate(4)
    assert len(pairs) == 300 and [p[2] for p in pairs] == [0, 1] * 150
    assert pairs == generate(4) and pairs != generate(5)
    polarity = {**{w: 1 for w in reviews.POSITIVE}, **{w: 0 for w in reviews.NEGATIVE}}
    sentences = {tuple(s.split()) + (".",) for review in unlabelled for s in " ".join(review).rstrip(" .").split(" . ")}
    for premise, hypothesis, label in pairs:
        assert tuple(premise) in sentences  # a whole sentence of an unlabelled review, "." included
        the, noun, was, adjective, stop = hypothesis
        assert (the, was, stop) == ("the", "was", ".") and noun in premise
        said = {polarity[w] for w in premise if w in polarity}
        assert said == {polarity[adjective]} if label == 0 else said == {1 - polarity[adjective]}


def test_few_shot_draw_is_the_notebooks_draw(reviews_mlm):
    from plmcourse.data import review_overall_task
    task = review_overall_task(seed=0, n_train=64)
    texts, labels = pr.few_shot_draw(task, 4, seed=7)
    dev_texts, dev_labels = pr.few_shot_draw(task, 4, seed=7, split="dev")
    assert labels.tolist() == [0] * 4 + [1] * 4 == dev_labels.tolist()
    assert not {tuple(t) for t in texts} & {tuple(t) for t in dev_texts}
    rng = np.random.default_rng(7)  # notebook 10's rule, written out
    members = rng.permutation([i for i, (_, y) in enumerate(task["train"]) if y == 0])
    assert texts[:4] == [task["train"][i][0] for i in members[:4]]
    assert pr.few_shot_draw(task, 4, seed=8)[0] != texts


def test_mask_hidden_is_the_last_layer_at_the_mask_in_any_batch(reviews_mlm):
    from plmcourse.data import review_overall_task
    model, tok = reviews_mlm.model, reviews_mlm.tokenizer
    texts = review_overall_task(seed=2)["unlabelled"][:5]
    inputs = pr.encode_pattern(tok, texts, "{x} it was [MASK] .")
    with torch.no_grad():
        hidden, _ = model.bert(inputs[0], inputs[3], inputs[1])
        torch.testing.assert_close(pr.mask_hidden(model, inputs, batch_size=2), hidden[torch.arange(5), inputs[2]])


def test_self_train_round_zero_is_prompt_based_fine_tuning_and_the_start_is_left_alone(reviews_mlm):
    from plmcourse.data import review_overall_task
    model, tok = reviews_mlm.model, reviews_mlm.tokenizer
    task = review_overall_task(seed=1, n_train=32, n_test=40, n_unlabelled=60)
    words = [[tok.stoi["terrible"]], [tok.stoi["great"]]]
    texts, labels = pr.few_shot_draw(task, 4, seed=0)
    test = pr.encode_pattern(tok, [w for w, _ in task["test"]], "{x} it was [MASK] .")
    test_labels = torch.tensor([y for _, y in task["test"]])
    unlabelled = pr.encode_pattern(tok, task["unlabelled"], "{x} it was [MASK] .")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    got = pr.self_train(model, tok, texts, labels, task["unlabelled"], unlabelled, test, test_labels,
                        "{x} it was [MASK] .", words, rounds=(0, 10), steps=3, seed=5)
    assert len(got) == 2 and all(0 <= a <= 1 for a in got)
    torch.manual_seed(5)
    direct = pr.finetune_cloze(copy.deepcopy(model), pr.encode_pattern(tok, texts, "{x} it was [MASK] ."), labels,
                               words, steps=3, lr=3e-4, seed=5)
    with torch.no_grad():
        expected = (pr.cloze_log_probs(direct, test, words).argmax(-1) == test_labels).float().mean().item()
    assert got[0] == expected
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the start is never changed
