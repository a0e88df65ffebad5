"""plmcourse.nn.transfer held against plmcourse.ref.transfer, and its training helpers (notebook 13)."""

import numpy as np
import pytest
import torch

from plmcourse import ref
from plmcourse.data import transfer as worlds
from plmcourse.nn import transfer as tr
from plmcourse.nn.models import Bert, BertForPreTraining, BertForSequenceClassification


def test_alignment_agrees_with_the_reference():
    rng = np.random.default_rng(1)
    for _ in range(5):
        src, tgt = rng.standard_normal((30, 4)), rng.standard_normal((40, 4))
        tgt[:30] = src @ np.linalg.qr(rng.standard_normal((4, 4)))[0] + 0.5 * rng.standard_normal((30, 4))
        pairs = np.stack([np.arange(30)] * 2, axis=1)
        want = ref.alignment_precision_at_1(src, tgt, pairs[:15], pairs[15:])
        assert tr.alignment_precision_at_1(torch.tensor(src), torch.tensor(tgt), pairs[:15], pairs[15:]) == want


def test_unit_rows_agree():
    x = np.array([[3.0, 4.0], [0.0, 0.0]])
    assert np.allclose(tr.unit_rows(torch.tensor(x)).numpy(), ref.transfer.unit_rows(x))


def test_pad_batch_puts_each_languages_specials():
    ids, mask = tr.pad_batch([[7, 8], [9]], cls=[1, 50], sep=[2, 51])
    assert ids.tolist() == [[1, 7, 8, 2], [50, 9, 51, 0]]
    assert mask.tolist() == [[True] * 4, [True, True, True, False]]


def test_token_masking_uses_each_rows_own_mask_id():
    masking = tr.token_masking([0, 1, 2, 3, 50, 51, 52], np.array([3, 52]), 60, p=1.0)
    batch = np.array([[1, 10, 11, 2], [50, 12, 13, 51]])
    inputs, labels = masking(batch, np.random.default_rng(0), np.array([0, 1]))
    assert set(inputs[0, 1:3]) <= {3} | set(range(4, 60)) - {50, 51, 52}
    assert 3 not in inputs[1] and np.all(labels[:, [0, 3]] == -100)


def test_entity_masking_keeps_specials_and_spans():
    def fake(words, spans, budget, rng, mask_id, vocab_size):  # masks exactly the first span
        inputs, labels = words.copy(), np.full(words.shape, -100)
        s, e = spans[0][0]
        inputs[0, s:e], labels[0, s:e] = mask_id, words[0, s:e]
        return inputs, labels

    masking = tr.entity_masking(fake, [[(1, 3)]], 3, 40)
    batch = np.array([[1, 10, 11, 12, 2, 0]])
    inputs, labels = masking(batch, np.random.default_rng(0), np.array([0]))
    assert inputs.tolist() == [[1, 10, 3, 3, 2, 0]] and labels.tolist() == [[-100, -100, 11, 12, -100, -100]]


def test_a_few_steps_of_pretraining_lower_the_loss():
    torch.manual_seed(0)
    corpus = worlds.two_languages(100, seed=0)
    ids, mask = tr.pad_batch(corpus.ids, worlds.CLS, worlds.SEP, length=20)
    model = BertForPreTraining(tr.tiny_config(worlds.vocab_size(), 20))
    history = tr.pretrain_mlm(model, ids, mask, 40, tr.token_masking([0, 1, 2, 3], 3, worlds.vocab_size()),
                              progress=False)
    assert np.mean(history.loss[-5:]) < np.mean(history.loss[:5]) - 0.5


def test_finetune_follows_the_rates_frozen_groups_do_not_move():
    torch.manual_seed(0)
    classifier = BertForSequenceClassification(Bert(tr.tiny_config(30, 8)), 2, dropout=0.0)
    before = {k: v.clone() for k, v in classifier.state_dict().items()}
    ids = torch.randint(4, 30, (16, 8))
    mask = torch.ones_like(ids, dtype=torch.bool)
    labels = torch.randint(0, 2, (16,))
    tr.finetune(classifier, ids, mask, labels, steps=5,
                rates=lambda step: ref.unfreezing_groups(2, step, 100, 1e-2, 0.5))
    after = classifier.state_dict()
    frozen = [k for k in before if k.startswith(("bert.embeddings.", "bert.blocks.0.", "bert.blocks.1."))]
    assert frozen and all(torch.equal(before[k], after[k]) for k in frozen)  # only the head trains before step 100
    assert not torch.equal(before["classifier.weight"], after["classifier.weight"])
    assert not torch.equal(before["bert.pooler.weight"], after["bert.pooler.weight"])


def test_finetune_applies_each_rate_to_the_group_it_names_whatever_the_dict_s_order():
    """A schedule built bottom-up ({"embeddings": ..., ..., "head": ...}) is as right as one built top-down: the
    head alone trains either way (applied by position, the head was frozen and the embeddings trained)."""
    def bottom_up(step):
        return dict(reversed(list(ref.unfreezing_groups(2, step, 100, 1e-2, 0.5).items())))

    for order in (bottom_up, lambda step: ref.unfreezing_groups(2, step, 100, 1e-2, 0.5)):
        torch.manual_seed(0)
        classifier = BertForSequenceClassification(Bert(tr.tiny_config(30, 8)), 2, dropout=0.0)
        before = {k: v.clone() for k, v in classifier.state_dict().items()}
        ids, labels = torch.randint(4, 30, (16, 8)), torch.randint(0, 2, (16,))
        tr.finetune(classifier, ids, torch.ones_like(ids, dtype=torch.bool), labels, steps=3, rates=order)
        after = classifier.state_dict()
        assert torch.equal(before["bert.embeddings.token.weight"], after["bert.embeddings.token.weight"])
        assert not torch.equal(before["classifier.weight"], after["classifier.weight"])


def test_finetune_names_a_group_the_rates_leave_out():
    classifier = BertForSequenceClassification(Bert(tr.tiny_config(30, 8)), 2, dropout=0.0)
    ids = torch.randint(4, 30, (4, 8))
    with pytest.raises(ValueError, match=r"the rates for step 0 name no rate for 'embeddings'"):
        tr.finetune(classifier, ids, torch.ones_like(ids, dtype=torch.bool), torch.zeros(4, dtype=torch.long),
                    steps=1, rates=lambda step: {"head": 1e-2, "layer.1": 0.0, "layer.0": 0.0})


def test_word_vectors_average_each_words_hidden_states():
    torch.manual_seed(0)
    bert = Bert(tr.tiny_config(20, 6))
    ids = torch.tensor([[1, 5, 6, 2], [1, 6, 5, 2]])
    mask = torch.ones_like(ids, dtype=torch.bool)
    vectors = tr.word_vectors(bert, ids, mask, [5, 7], layer=2)
    hidden = bert.all_layers(ids, attention_mask=mask)[2]
    assert torch.allclose(vectors[0], (hidden[0, 1] + hidden[1, 2]) / 2, atol=1e-6)
    assert torch.equal(vectors[1], torch.zeros(64))


def test_padding_to_the_longest_sentence_or_to_max_len_gives_the_same_outputs():
    """Notebook 13 pads each set of sentences to its longest (not to the model's 40 positions): padding is
    masked out, so the [CLS] logits and word vectors do not depend on how far a batch is padded."""
    torch.manual_seed(0)
    corpus = worlds.two_languages(20, seed=3)
    classifier = BertForSequenceClassification(Bert(tr.tiny_config(worlds.vocab_size(), 40)), 2).eval()
    short = tr.pad_batch(corpus.ids, worlds.CLS, worlds.SEP)
    full = tr.pad_batch(corpus.ids, worlds.CLS, worlds.SEP, length=40)
    assert short[0].shape[1] < 40
    with torch.no_grad():
        assert torch.allclose(classifier(short[0], attention_mask=short[1]),
                              classifier(full[0], attention_mask=full[1]), atol=1e-5)
    words = [worlds.FIRST_WORD, worlds.FIRST_WORD + 1]
    assert torch.allclose(tr.word_vectors(classifier.bert, *short, words, 2),
                          tr.word_vectors(classifier.bert, *full, words, 2), atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_training_helpers_run_on_cuda_and_agree_with_the_cpu():
    cuda = torch.device("cuda")
    torch.manual_seed(0)
    corpus = worlds.two_languages(100, seed=0)
    ids, mask = tr.pad_batch(corpus.ids, worlds.CLS, worlds.SEP, cuda)
    assert ids.is_cuda and mask.is_cuda
    model = BertForPreTraining(tr.tiny_config(worlds.vocab_size(), 20)).to(cuda)
    history = tr.pretrain_mlm(model, ids, mask, 40, tr.token_masking([0, 1, 2, 3], 3, worlds.vocab_size()),
                              progress=False)
    assert np.mean(history.loss[-5:]) < np.mean(history.loss[:5]) - 0.5
    classifier = BertForSequenceClassification(model.bert, 2, dropout=0.0).to(cuda)
    labels = torch.as_tensor(corpus.labels, device=cuda)
    tr.finetune(classifier, ids, mask, labels, steps=5, rates=lambda step: ref.unfreezing_groups(2, step, 3, 1e-2, 0.5))
    on_cuda = tr.accuracy(classifier, ids, mask, labels)
    on_cpu = tr.accuracy(classifier.cpu(), ids.cpu(), mask.cpu(), labels.cpu())
    assert abs(on_cuda - on_cpu) <= 0.02  # at most two sentences on the boundary flip
    words = list(range(worlds.FIRST_WORD, worlds.FIRST_WORD + 6))
    vectors = tr.word_vectors(classifier.bert.to(cuda), ids, mask, words, 2)
    assert vectors.is_cuda
    assert torch.allclose(vectors.cpu(), tr.word_vectors(classifier.bert.cpu(), ids.cpu(), mask.cpu(), words, 2),
                          atol=1e-4)
    rng = np.random.default_rng(1)
    src, tgt = rng.standard_normal((30, 4)), rng.standard_normal((40, 4))
    pairs = np.stack([np.arange(30)] * 2, axis=1)
    assert (tr.alignment_precision_at_1(torch.tensor(src, device=cuda), torch.tensor(tgt, device=cuda), pairs[:15],
                                        pairs[15:]) == ref.alignment_precision_at_1(src, tgt, pairs[:15], pairs[15:]))
