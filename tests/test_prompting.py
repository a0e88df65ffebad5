"""plmcourse.ref.prompting and plmcourse.nn.prompting (notebook 10): hand-worked cases, NumPy
against PyTorch, and each clause of the specs (mask position, mean over label words, weights,
temperature, class balance)."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import pytest
import torch

from plmcourse import nn as pnn
from plmcourse import ref

CUDA = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                         reason="needs a CUDA device")])
DEVICES = ["cpu", CUDA]


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    return x - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)) - x.max(-1, keepdims=True)


# ---------------------------------------------------------------- verbalizer_log_probs


def test_verbalizer_by_hand():
    """Two inputs, vocabulary of 5, classes {1, 2} and {4}: read at the mask, mean over words."""
    logits = np.zeros((2, 3, 5))
    logits[0, 1] = [9.0, 1.0, 3.0, 9.0, 0.0]  # mask at 1: class 0 = mean(1, 3) = 2, class 1 = 0
    logits[1, 2] = [0.0, 4.0, 0.0, 0.0, 1.0]  # mask at 2: class 0 = 2, class 1 = 1
    logits[:, 0] = 50.0  # position 0 is not the mask: it must not matter
    out = ref.verbalizer_log_probs(logits, [1, 2], [[1, 2], [4]])
    np.testing.assert_allclose(out, log_softmax([[2.0, 0.0], [2.0, 1.0]]), atol=1e-12)
    np.testing.assert_allclose(np.exp(out).sum(-1), 1.0)  # a distribution over the classes, not the vocabulary


@pytest.mark.parametrize("device", DEVICES)
def test_verbalizer_torch_equals_numpy(device):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((4, 7, 30))
    positions = np.array([0, 6, 3, 3])
    words = [[3], [5, 9, 11], [29, 0]]
    expected = ref.verbalizer_log_probs(logits, positions, words)
    ours = pnn.verbalizer_log_probs(torch.tensor(logits, device=device), torch.tensor(positions, device=device), words)
    assert ours.shape == (4, 3) and ours.device.type == device
    np.testing.assert_allclose(ours.cpu().numpy(), expected, atol=1e-12)


def test_verbalizer_gradient_reaches_only_the_label_words_at_the_mask():
    logits = torch.randn(2, 4, 10, dtype=torch.float64, requires_grad=True)
    pnn.verbalizer_log_probs(logits, torch.tensor([2, 1]), [[1, 2], [7]])[:, 0].sum().backward()
    touched = logits.grad.abs() > 0
    assert touched.sum() == 6  # 3 words x 2 inputs
    assert touched[0, 2, [1, 2, 7]].all() and touched[1, 1, [1, 2, 7]].all()


# ---------------------------------------------------------------- pet_soft_labels


def test_pet_soft_labels_by_hand():
    scores = np.log(np.array([[[0.8, 0.2]], [[0.4, 0.6]]]))  # 2 patterns, 1 example
    mean = (scores[0] + scores[1]) / 2  # logits averaged, not probabilities
    expected = np.exp(log_softmax(mean / 2.0))
    np.testing.assert_allclose(ref.pet_soft_labels(scores), expected, atol=1e-12)
    # averaging the probabilities instead would give (0.6, 0.4) before the temperature: different
    assert not np.allclose(expected, np.exp(log_softmax(np.log([[0.6, 0.4]]) / 2.0)))
    # weights are normalised: (3, 1) is (0.75, 0.25)
    weighted = ref.pet_soft_labels(scores, weights=[3.0, 1.0], temperature=1.0)
    np.testing.assert_allclose(weighted, np.exp(log_softmax(0.75 * scores[0] + 0.25 * scores[1])), atol=1e-12)
    # uniform weights = None; any positive multiple gives the same
    np.testing.assert_allclose(ref.pet_soft_labels(scores, weights=[5.0, 5.0]), expected, atol=1e-12)


def test_pet_temperature_softens_and_sharpens():
    scores = np.log(np.array([[[0.9, 0.1], [0.3, 0.7]]]))  # 1 pattern, 2 examples
    hot, plain, cold = (ref.pet_soft_labels(scores, temperature=t) for t in (4.0, 1.0, 0.5))
    np.testing.assert_allclose(plain, [[0.9, 0.1], [0.3, 0.7]], atol=1e-12)  # T = 1 gives the pattern back
    assert (hot.max(-1) < plain.max(-1)).all() and (cold.max(-1) > plain.max(-1)).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("weights", [None, [0.5, 2.0, 1.0]])
def test_pet_torch_equals_numpy(device, weights):
    rng = np.random.default_rng(1)
    scores = log_softmax(rng.standard_normal((3, 5, 4)) * 2)
    expected = ref.pet_soft_labels(scores, weights, temperature=2.0)
    ours = pnn.pet_soft_labels(torch.tensor(scores, device=device), weights, temperature=2.0)
    np.testing.assert_allclose(ours.cpu().numpy(), expected, atol=1e-12)


@pytest.mark.parametrize("weights", [[1.0], [1.0, -1.0], [0.0, 0.0]])
def test_pet_refuses_bad_weights(weights):
    scores = np.zeros((2, 3, 2))
    with pytest.raises(ValueError, match="weights"):
        ref.pet_soft_labels(scores, weights)
    with pytest.raises(ValueError, match="weights"):
        pnn.pet_soft_labels(torch.zeros(2, 3, 2, dtype=torch.float64), weights)


# ---------------------------------------------------------------- select_pseudo_labels


def test_select_pseudo_labels_is_class_balanced():
    probs = np.array([
        [0.99, 0.01],  # 0: class 0, very sure
        [0.97, 0.03],  # 1: class 0
        [0.95, 0.05],  # 2: class 0
        [0.40, 0.60],  # 3: class 1
        [0.30, 0.70],  # 4: class 1, the surest class-1 example
        [0.55, 0.45],  # 5: class 0, unsure
    ])
    np.testing.assert_array_equal(ref.select_pseudo_labels(probs, 2), [0, 1, 4, 3])
    # a global top-4 would take 0, 1, 2 and 4: three of class 0
    np.testing.assert_array_equal(ref.select_pseudo_labels(probs, 10), [0, 1, 2, 5, 4, 3])  # all there is
    assert len(ref.select_pseudo_labels(probs, 0)) == 0


def test_select_pseudo_labels_confidence_is_the_predicted_class_and_ties_go_to_the_lower_index():
    probs = np.array([[0.2, 0.8, 0.0], [0.1, 0.1, 0.8], [0.6, 0.1, 0.3], [0.2, 0.8, 0.0], [0.0, 0.9, 0.1]])
    np.testing.assert_array_equal(ref.select_pseudo_labels(probs, 2), [2, 4, 0, 1])


@pytest.mark.parametrize("device", DEVICES)
def test_select_torch_equals_numpy(device):
    rng = np.random.default_rng(2)
    probs = np.exp(log_softmax(rng.standard_normal((40, 3)) * 2))
    for per_class in (0, 1, 5, 40):
        expected = ref.select_pseudo_labels(probs, per_class)
        ours = pnn.select_pseudo_labels(torch.tensor(probs, device=device), per_class)
        np.testing.assert_array_equal(ours.cpu().numpy(), expected)
        assert len(set(expected.tolist())) == len(expected)  # no duplicates


# ---------------------------------------------------------------- the notebook's machinery


@pytest.fixture(scope="module")
def reviews_mlm():
    from plmcourse.pretrained import load_checkpoint
    return load_checkpoint("tiny-bert-reviews", "cpu")


def test_encode_pattern_puts_the_text_and_finds_the_mask(reviews_mlm):
    tok = reviews_mlm.tokenizer
    texts = [["the", "soup", "was", "dull", "."], ["i", "loved", "it", "."]]
    ids, attention, where, segments = pnn.prompting.encode_pattern(tok, texts, "{x} it was [MASK] .")
    assert tok.decode(ids[0].tolist())[:9] == ["[CLS]", "the", "soup", "was", "dull", ".", "it", "was", "[MASK]"]
    assert where.tolist() == [8, 7] and (ids[torch.arange(2), where] == tok.stoi["[MASK]"]).all()
    assert attention.sum(1).tolist() == [11, 10] and not segments.any()
    ids, _, where, segments = pnn.prompting.encode_pattern(tok, texts, "it was [MASK] . {x} [SEP] {demos}",
                                                          demonstrations=[["great"], ["i", "hated", "it"]])
    assert where.tolist() == [3, 3]
    assert tok.decode(ids[1].tolist())[-5:] == ["[SEP]", "i", "hated", "it", "[SEP]"]
    assert segments[1].tolist() == [0] * 10 + [1] * 4  # after the pattern's [SEP]: the second segment


def test_encode_pattern_cuts_the_text_from_its_start_and_keeps_the_mask(reviews_mlm):
    tok = reviews_mlm.tokenizer
    text = ["the", "soup", "was", "dull", "."] * 20  # 100 words
    ids, attention, where, _ = pnn.prompting.encode_pattern(tok, [text], "{x} it was [MASK] .", max_len=64)
    assert ids.shape == (1, 64) and attention.all()
    assert tok.decode(ids[0, 58:].tolist()) == [".", "it", "was", "[MASK]", ".", "[SEP]"]
    assert int(where[0]) == 61
    with pytest.raises(ValueError, match="one {x}"):
        pnn.prompting.encode_pattern(tok, [text], "it was [MASK] [MASK] . {x}")
    with pytest.raises(ValueError, match="leaving none for the text"):  # never text[-0:], the whole text
        pnn.prompting.encode_pattern(tok, [text], "{x} it was [MASK] . {demos}", max_len=64, demonstrations=[text[:59]])


def test_cloze_log_probs_is_the_verbalizer_of_one_forward_pass_in_any_batch_size(reviews_mlm):
    from plmcourse.data import review_overall_task
    model, tok = reviews_mlm.model, reviews_mlm.tokenizer
    texts = [w for w, _ in review_overall_task(seed=1, n_test=20)["test"]]
    inputs = pnn.prompting.encode_pattern(tok, texts, "{x} it was [MASK] .")
    words = [[tok.stoi["terrible"], tok.stoi["awful"]], [tok.stoi["great"]]]
    with torch.no_grad():
        logits, _ = model(inputs[0], inputs[3], inputs[1])
        whole = pnn.verbalizer_log_probs(logits, inputs[2], words)
        torch.testing.assert_close(pnn.prompting.cloze_log_probs(model, inputs, words, batch_size=7), whole)


def test_the_plain_cloze_reads_whole_reviews(reviews_mlm):
    """The checkpoint's reason to exist: a cloze after a 3-5 sentence review gets its sentiment."""
    from plmcourse.data import review_overall_task
    tok = reviews_mlm.tokenizer
    test = review_overall_task(seed=5, n_test=200)["test"]
    inputs = pnn.prompting.encode_pattern(tok, [w for w, _ in test], "{x} it was [MASK] .")
    with torch.no_grad():
        log_p = pnn.prompting.cloze_log_probs(reviews_mlm.model, inputs, [[tok.stoi["terrible"]], [tok.stoi["great"]]])
    assert (log_p.argmax(-1) == torch.tensor([y for _, y in test])).float().mean() > 0.75


@pytest.mark.parametrize("soft", [False, True])
def test_finetune_cloze_and_head_learn_their_training_set_and_leave_the_original_alone(reviews_mlm, soft):
    import copy
    from plmcourse.data import review_overall_task
    model, tok = reviews_mlm.model, reviews_mlm.tokenizer
    train = review_overall_task(seed=2, n_train=16)["train"]
    labels = torch.tensor([y for _, y in train])
    targets = torch.nn.functional.one_hot(labels, 2).float() if soft else labels
    words = [[tok.stoi["terrible"]], [tok.stoi["great"]]]
    inputs = pnn.prompting.encode_pattern(tok, [w for w, _ in train], "{x} it was [MASK] .")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(0)
    tuned = pnn.prompting.finetune_cloze(copy.deepcopy(model), inputs, targets, words, steps=40, soft_labels=soft)
    with torch.no_grad():
        assert (pnn.prompting.cloze_log_probs(tuned, inputs, words).argmax(-1) == labels).all()
    head = pnn.BertForSequenceClassification(copy.deepcopy(model.bert), 2)
    plain = pnn.prompting.encode_pattern(tok, [w for w, _ in train], "{x}")
    head = pnn.prompting.finetune_head(head, plain, targets, steps=60, lr=3e-3, soft_labels=soft)
    with torch.no_grad():
        assert (pnn.prompting.predict_head(head, plain).argmax(-1) == labels).float().mean() >= 0.9
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not tuned.training and not head.training
