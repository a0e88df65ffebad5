"""Notebook 08's other contrastive families: ConSERT's augmentations, BYOL's loss and target, PromptBERT's
[MASK] vector, by hand and against torch's own functions; the trainers train and repeat with a seed."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plmcourse import data, ref
from plmcourse import nn as pnn
from plmcourse.pretrained import load_checkpoint

PAD, CLS, SEP = 0, 1, 2


def batch():
    # Row 0: [CLS] 10 11 12 13 [SEP]; row 1: [CLS] 20 21 [SEP] pad pad; row 2: [CLS] 30 [SEP] pad pad pad
    ids = torch.tensor([[CLS, 10, 11, 12, 13, SEP], [CLS, 20, 21, SEP, PAD, PAD], [CLS, 30, SEP, PAD, PAD, PAD]])
    return ids, ids != PAD


def test_cutoff_rate_0_keeps_everything_and_rate_1_keeps_only_the_first_word():
    ids, mask = batch()
    same_ids, kept = pnn.token_cutoff(ids, mask, 0.0, torch.Generator().manual_seed(0))
    assert torch.equal(same_ids, ids) and torch.equal(kept, mask)
    _, kept = pnn.token_cutoff(ids, mask, 1.0, torch.Generator().manual_seed(0))
    expected = torch.tensor([[1, 1, 0, 0, 0, 1], [1, 1, 0, 1, 0, 0], [1, 1, 1, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(kept, expected)  # [CLS], [SEP] and the first word stay; padding stays padding


def test_cutoff_removes_about_rate_of_the_words_and_never_a_special_token():
    g = torch.Generator().manual_seed(1)
    ids = torch.full((2000, 12), 5)
    ids[:, 0], ids[:, -1] = CLS, SEP
    mask = torch.ones_like(ids, dtype=torch.bool)
    _, kept = pnn.token_cutoff(ids, mask, 0.25, g)
    assert kept[:, 0].all() and kept[:, -1].all()
    removed = 1 - kept[:, 1:-1].float().mean()
    assert abs(float(removed) - 0.25) < 0.01
    _, again = pnn.token_cutoff(ids, mask, 0.25, torch.Generator().manual_seed(1))
    assert torch.equal(kept, again)  # the same generator state, the same words removed


def test_shuffle_permutes_only_the_words_of_each_row():
    ids, mask = batch()
    g = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(50):
        shuffled, same_mask = pnn.token_shuffle(ids, mask, g)
        assert torch.equal(same_mask, mask)
        assert torch.equal(shuffled[:, 0], ids[:, 0])  # [CLS] first
        assert shuffled[0, 5] == SEP and shuffled[1, 3] == SEP and shuffled[2, 2] == SEP  # [SEP] last
        assert torch.equal(shuffled[1, 4:], ids[1, 4:]) and torch.equal(shuffled[2, 3:], ids[2, 3:])  # padding
        for row, length in zip(range(3), (6, 4, 3)):
            assert sorted(shuffled[row, 1:length - 1].tolist()) == sorted(ids[row, 1:length - 1].tolist())
        seen.add(tuple(shuffled[0].tolist()))
    assert len(seen) > 10  # 24 orders of 4 words: many of them appear in 50 draws


def test_byol_loss_by_hand_and_against_torch():
    a = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    b = torch.tensor([[3.0, 0.0], [0.0, 2.0], [-1.0, 0.0]])  # same direction, orthogonal, opposite
    assert float(pnn.byol_loss(a[:1], b[:1])) == pytest.approx(0.0)
    assert float(pnn.byol_loss(a[1:2], b[1:2])) == pytest.approx(2.0)
    assert float(pnn.byol_loss(a[2:], b[2:])) == pytest.approx(4.0)
    assert float(pnn.byol_loss(a, b)) == pytest.approx(2.0)
    g = torch.Generator().manual_seed(0)
    p = torch.randn(7, 5, generator=g, dtype=torch.float64, requires_grad=True)
    t = torch.randn(7, 5, generator=g, dtype=torch.float64, requires_grad=True)
    loss = pnn.byol_loss(p, t)
    # 2 - 2 cos = the squared distance of the unit vectors
    expected = F.mse_loss(F.normalize(p, dim=-1), F.normalize(t, dim=-1), reduction="none").sum(-1).mean()
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert t.grad is None and p.grad is not None  # the target gets no gradient


def test_ema_update_by_hand():
    target, online = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    with torch.no_grad():
        target.weight.fill_(1.0), target.bias.fill_(0.0), online.weight.fill_(3.0), online.bias.fill_(2.0)
    pnn.ema_update(target, online, 0.75)
    torch.testing.assert_close(target.weight, torch.full((1, 2), 1.5))  # 0.75 * 1 + 0.25 * 3
    torch.testing.assert_close(target.bias, torch.full((1,), 0.5))
    pnn.ema_update(target, online, 0.0)
    torch.testing.assert_close(target.weight, online.weight)


@pytest.fixture(scope="module")
def tiny():
    return load_checkpoint("tiny-bert", device="cpu")


def test_prompt_embed_is_the_hidden_state_at_mask_and_denoising_subtracts_the_template(tiny):
    model, tok = tiny.model.bert, tiny.tokenizer
    texts = ["the soup was superb .", "what a dull plot ."]
    vectors = pnn.prompt_embed(model, tok, texts, "{} , it was [MASK] .")
    for text, vector in zip(texts, vectors):
        words = f"{text} , it was [MASK] .".split()
        ids = torch.tensor([[tok.stoi["[CLS]"], *tok.encode(words), tok.stoi["[SEP]"]]])
        with torch.no_grad():
            hidden, _ = model(ids)
        np.testing.assert_allclose(vector, hidden[0, 1 + words.index("[MASK]")].numpy(), atol=1e-5)
    ids = torch.tensor([[tok.stoi["[CLS]"], *tok.encode(", it was [MASK] .".split()), tok.stoi["[SEP]"]]])
    with torch.no_grad():
        template_only = model(ids)[0][0, 4].numpy()
    denoised = pnn.prompt_embed(model, tok, texts, "{} , it was [MASK] .", denoise=True)
    np.testing.assert_allclose(denoised, vectors - template_only, atol=1e-5)


@pytest.mark.parametrize("augment", ["cutoff", "shuffle"])
def test_train_consert_trains_and_repeats(tiny, augment):
    sentences = data.review_sentences(1000)
    histories = []
    for _ in range(2):
        model = copy.deepcopy(tiny.model.bert)
        histories.append(pnn.train_consert(model, tiny.tokenizer, sentences, augment=augment, steps=30,
                                           batch_size=32, seed=3, progress=False))
    assert histories[0].loss == histories[1].loss
    assert np.mean(histories[0].loss[-5:]) < 0.9 * np.mean(histories[0].loss[:5])
    with pytest.raises(ValueError, match="augment"):
        pnn.train_consert(copy.deepcopy(tiny.model.bert), tiny.tokenizer, sentences, augment="crop", steps=1)


def test_train_byol_repeats_and_without_predictor_and_ema_its_projection_collapses(tiny):
    sentences = data.review_sentences(1000)
    runs = []
    for predictor, decay in ((True, 0.99), (True, 0.99), (False, 0.0)):
        model = copy.deepcopy(tiny.model.bert)
        history, heads = pnn.train_byol(model, tiny.tokenizer, sentences, predictor=predictor, decay=decay,
                                        steps=40, batch_size=32, seed=5, progress=False)
        assert ("predictor" in heads) == predictor and not model.training
        runs.append((model, history, heads))
    assert runs[0][1].loss == runs[1][1].loss  # same seed, same run
    # Without predictor and EMA, nothing stops the trivial solution: the loss goes to 0 and the
    # sentences' projections crowd together; with both, they stay spread (measured: 0.83 against 0.08).
    spread = [ref.anisotropy(pnn.project_byol(model, heads, tiny.tokenizer, sentences[:200]))
              for model, _, heads in runs]
    assert np.mean(runs[2][1].loss[-5:]) < 0.01 < np.mean(runs[0][1].loss[-5:])
    assert spread[2] > 0.7 and spread[0] < 0.3


def test_coupling_and_flow_are_invertible_with_the_exact_log_determinant():
    torch.manual_seed(0)
    flow = pnn.Flow(6, n_layers=3, hidden=8).double()
    for layer in flow.layers:  # away from the identity start, so the test sees a real map
        torch.nn.init.normal_(layer.net[-1].weight, std=0.5)
    with torch.no_grad():
        flow.log_scale.normal_(std=0.3), flow.shift.normal_()
    x = torch.randn(5, 6, dtype=torch.float64)
    z, logdet = flow(x)
    torch.testing.assert_close(flow.inverse(z), x)
    for row in range(5):  # log |det| of the Jacobian, by torch's autograd
        jacobian = torch.autograd.functional.jacobian(lambda v: flow(v[None])[0][0], x[row])
        torch.testing.assert_close(logdet[row], torch.linalg.slogdet(jacobian)[1])
    # The kept half of a coupling passes unchanged
    layer = flow.layers[0]
    y, _ = layer(x)
    torch.testing.assert_close(y[:, ::2], x[:, ::2])


def test_flow_log_likelihood_of_the_identity_is_the_standard_gaussian():
    flow = pnn.Flow(3, n_layers=2).double()  # starts as the identity
    x = torch.randn(4, 3, dtype=torch.float64)
    expected = torch.distributions.Normal(0.0, 1.0).log_prob(x).sum(-1)
    torch.testing.assert_close(flow.log_likelihood(x), expected)


def test_train_flow_gaussianises_correlated_vectors():
    rng = np.random.default_rng(0)
    mixing = rng.normal(size=(4, 4))
    vectors = (rng.normal(size=(2000, 4)) ** 3) @ mixing + 5  # skewed, correlated, off-centre
    flow, losses = pnn.train_flow(vectors, steps=200, seed=0, progress=False)
    assert np.mean(losses[-20:]) < losses[0] - 0.2  # the likelihood rises
    z = pnn.apply_flow(flow, vectors)
    assert np.abs(z.mean(axis=0)).max() < 0.2
    assert np.abs(np.corrcoef(z.T) - np.eye(4)).max() < 0.2  # decorrelated
    again, _ = pnn.train_flow(vectors, steps=200, seed=0, progress=False)
    np.testing.assert_array_equal(pnn.apply_flow(again, vectors), z)  # the same seed, the same flow
