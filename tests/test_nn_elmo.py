"""plmcourse.nn.elmo: each direction of the biLM sees only its own side, the loss matches the NumPy
reference, the scalar mix is normalised, and a small biLM learns."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import pytest
import torch

from plmcourse import data, ref
from plmcourse import nn as pnn
from plmcourse.train import train

CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")],
)
DEVICES = ["cpu", CUDA]


def small_bilm(device="cpu", seed=0, **kwargs):
    torch.manual_seed(seed)
    return pnn.BiLM(11, dim=8, **kwargs).to(device).eval()


def test_reverse_padded_reverses_within_each_length():
    x = torch.tensor([[1, 2, 3, 4], [5, 6, 0, 0]])
    torch.testing.assert_close(pnn.reverse_padded(x, torch.tensor([4, 2])),
                               torch.tensor([[4, 3, 2, 1], [6, 5, 0, 0]]))
    torch.testing.assert_close(pnn.reverse_padded(x), x.flip(1))
    features = torch.arange(16.0).view(2, 4, 2)
    back = pnn.reverse_padded(pnn.reverse_padded(features, [3, 1]), [3, 1])
    torch.testing.assert_close(back, features)  # its own inverse


@pytest.mark.parametrize("device", DEVICES)
def test_shapes_and_the_context_independent_layer(device):
    model = small_bilm(device)
    tokens = torch.randint(0, 11, (3, 6), device=device)
    forward_logits, backward_logits = model(tokens)
    assert forward_logits.shape == backward_logits.shape == (3, 6, 11)
    layers = model.layers(tokens)
    assert layers.shape == (3, 3, 6, 16)  # (num_layers + 1, B, L, 2 * dim)
    torch.testing.assert_close(layers[0, ..., :8], layers[0, ..., 8:])
    torch.testing.assert_close(layers[0, ..., :8], model.embedding(tokens))


def test_forward_states_see_only_the_past_and_backward_states_only_the_future():
    model = small_bilm()
    tokens = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])
    changed = tokens.clone()
    changed[0, 3] = 9
    with torch.no_grad():
        a, b = model.layers(tokens), model.layers(changed)
    forward_a, forward_b, backward_a, backward_b = a[1:, ..., :8], b[1:, ..., :8], a[1:, ..., 8:], b[1:, ..., 8:]
    torch.testing.assert_close(forward_a[:, :, :3], forward_b[:, :, :3])  # before position 3: unchanged
    assert not torch.allclose(forward_a[:, :, 3:], forward_b[:, :, 3:])
    torch.testing.assert_close(backward_a[:, :, 4:], backward_b[:, :, 4:])  # after position 3: unchanged
    assert not torch.allclose(backward_a[:, :, :4], backward_b[:, :, :4])


def test_padding_does_not_reach_the_real_positions():
    model = small_bilm()
    tokens = torch.tensor([[1, 2, 3, 0, 0], [1, 2, 3, 8, 9]])
    with torch.no_grad():
        layers = model.layers(tokens, lengths=torch.tensor([3, 3]))
        alone = model.layers(tokens[:1, :3])
    torch.testing.assert_close(layers[:, 0, :3], alone[:, 0])
    torch.testing.assert_close(layers[:, 1, :3], alone[:, 0])  # what the padding holds does not matter


def test_forward_only_model():
    model = small_bilm(bidirectional=False)
    forward_logits, backward_logits = model(torch.randint(0, 11, (2, 5)))
    assert forward_logits.shape == (2, 5, 11) and backward_logits is None
    with pytest.raises(ValueError, match="both directions"):
        model.layers(torch.zeros(1, 3, dtype=torch.long))


@pytest.mark.parametrize("device", DEVICES)
def test_bilm_loss_matches_ref_with_padding(device):
    rng = np.random.default_rng(0)
    f, b = rng.standard_normal((3, 6, 7)), rng.standard_normal((3, 6, 7))
    targets = rng.integers(0, 7, (3, 6))
    targets[1, 4:] = -100
    targets[2, 1:] = -100  # a one-token sentence: predicts nothing
    got = pnn.bilm_loss(*(torch.tensor(a, device=device) for a in (f, b, targets)))
    assert got.item() == pytest.approx(ref.bilm_loss(f, b, targets), abs=1e-10)


def test_bilm_loss_gradients_pass_gradcheck():
    rng = np.random.default_rng(1)
    f, b = (torch.tensor(rng.standard_normal((2, 4, 5)), requires_grad=True) for _ in range(2))
    targets = torch.tensor([[1, 2, 3, 4], [0, 1, -100, -100]])
    assert torch.autograd.gradcheck(lambda f_, b_: pnn.bilm_loss(f_, b_, targets), (f, b))


@pytest.mark.parametrize("device", DEVICES)
def test_scalar_mix_matches_ref_and_is_normalised(device):
    rng = np.random.default_rng(2)
    layers, weights = rng.standard_normal((3, 2, 4, 5)), rng.standard_normal(3)
    got = pnn.scalar_mix(torch.tensor(layers, device=device), torch.tensor(weights, device=device),
                         torch.tensor(1.7, dtype=torch.float64, device=device))
    np.testing.assert_allclose(got.cpu().numpy(), ref.scalar_mix(layers, weights, 1.7), atol=1e-12)
    listed = pnn.scalar_mix([torch.tensor(x) for x in layers], torch.tensor(weights), torch.tensor(1.7))
    np.testing.assert_allclose(listed.numpy(), got.cpu().numpy(), atol=1e-12)
    mix = pnn.ScalarMix(3).to(device)
    torch.testing.assert_close(mix(torch.tensor(layers, dtype=torch.float32, device=device)),
                               torch.tensor(layers.mean(axis=0), dtype=torch.float32, device=device))
    assert mix.normalised_weights().sum().item() == pytest.approx(1.0)


def test_scalar_mix_gradients_pass_gradcheck():
    rng = np.random.default_rng(3)
    inputs = tuple(torch.tensor(a, requires_grad=True)
                   for a in (rng.standard_normal((3, 2, 4)), rng.standard_normal(3), np.array(0.8)))
    assert torch.autograd.gradcheck(pnn.scalar_mix, inputs)


def test_a_small_bilm_learns_the_synthetic_corpus():
    corpus = data.synthetic_corpus(2000, seed=0)
    tokenizer = data.WordTokenizer(corpus.tokens())
    stream = torch.from_numpy(tokenizer.encode(corpus.tokens()))
    model = pnn.BiLM(len(tokenizer), dim=32, dropout=0.0)
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)

    def get_batch(step):
        starts = torch.randint(0, len(stream) - 16, (16,), generator=generator)
        return stream[starts[:, None] + torch.arange(16)]

    def loss_fn(m, batch):
        return pnn.bilm_loss(*m(batch), batch)

    history = train(model, get_batch, loss_fn, steps=250, lr=1e-2, progress=False)
    start, end = np.mean(history.loss[:10]), np.mean(history.loss[-10:])
    # each direction starts near log V (uniform guess) and must fall far below it
    assert start > 1.8 * np.log(len(tokenizer)) and end < 0.5 * start
