"""plmcourse.nn.generate: decoding filters, sampling and generation; parity with plmcourse.ref."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import pytest
import torch

from plmcourse import nn as pnn
from plmcourse import ref


# ----------------------------------------------------------------------------
# Filters


def distinct_logits(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.argsort(torch.rand(shape, generator=g), dim=-1).double() + 0.3 * torch.rand(shape, generator=g)


@pytest.mark.parametrize("k", [1, 3, 7, 12, 0])
def test_top_k_keeps_exactly_k_and_matches_ref(k):
    logits = distinct_logits((4, 3, 12))
    out = pnn.top_k_filter(logits, k)
    kept = torch.isfinite(out).sum(-1)
    assert (kept == (k if 0 < k < 12 else 12)).all()
    assert torch.equal(out[torch.isfinite(out)], logits[torch.isfinite(out)])
    np.testing.assert_array_equal(out.numpy(), ref.top_k_filter(logits.numpy(), k))
    if 0 < k < 12:  # the kept ones are the k largest
        assert (out.max(-1).values == logits.max(-1).values).all()
        assert (logits.masked_fill(torch.isfinite(out), float("inf")).min(-1).values <=
                logits.masked_fill(~torch.isfinite(out), float("inf")).min(-1).values).all()


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.8, 0.95, 1.0])
def test_top_p_keeps_the_smallest_set_with_mass_at_least_p(p):
    logits = distinct_logits((5, 20), seed=1) * 0.5
    out = pnn.top_p_filter(logits, p)
    np.testing.assert_array_equal(out.numpy(), ref.top_p_filter(logits.numpy(), p))
    probs = torch.softmax(logits, -1)
    for row_probs, row_out in zip(probs, out):
        kept = torch.isfinite(row_out)
        mass = row_probs[kept].sum().item()
        assert mass >= p - 1e-12
        # smallest: without its least likely member the kept set falls below p
        smallest = row_probs[kept].min().item()
        assert mass - smallest < p or p >= 1.0
        # the kept set is the most likely tokens
        assert row_probs[kept].min() >= row_probs[~kept].max() if (~kept).any() else True


# ----------------------------------------------------------------------------
# Sampling and generation


def test_greedy_is_argmax_and_top_k_1_is_greedy():
    logits = torch.randn(6, 30, generator=torch.Generator().manual_seed(0))
    assert torch.equal(pnn.sample_next(logits, temperature=0), logits.argmax(-1))
    g = torch.Generator().manual_seed(1)
    assert torch.equal(pnn.sample_next(logits, top_k=1, generator=g), logits.argmax(-1))


def test_temperature_towards_zero_approaches_greedy():
    logits = distinct_logits((200, 30)) * 0.3  # neighbouring logits at least 0.21 apart
    g = torch.Generator().manual_seed(2)
    agreement = {t: (pnn.sample_next(logits, temperature=t, generator=g) == logits.argmax(-1)).float().mean().item()
                 for t in (2.0, 1.0, 0.3, 0.01)}
    assert agreement[0.01] == 1.0
    assert agreement[2.0] < agreement[1.0] < agreement[0.3] < agreement[0.01]


def test_sampling_follows_the_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).expand(40000, 4)
    draws = pnn.sample_next(logits, generator=torch.Generator().manual_seed(0))
    frequencies = torch.bincount(draws, minlength=4).double() / len(draws)
    torch.testing.assert_close(frequencies, torch.softmax(logits[0].double(), -1), atol=0.01, rtol=0)
    filtered = pnn.sample_next(logits, top_k=2, generator=torch.Generator().manual_seed(0))
    assert set(filtered.tolist()) == {0, 1}


def test_seeded_sampling_is_reproducible():
    torch.manual_seed(0)
    model = pnn.GPT(pnn.GPTConfig(vocab_size=17, d_model=16, n_layers=1, n_heads=2, max_len=12))
    prompt = torch.tensor([[1, 2, 3]])

    def run(seed, **kw):
        return pnn.generate(model, prompt, 20, temperature=1.2, top_k=8, top_p=0.9,
                            generator=torch.Generator().manual_seed(seed), **kw)

    a, b, c = run(0), run(0), run(1)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.shape == (1, 23) and torch.equal(a[:, :3], prompt)


def test_generate_greedy_feeds_back_its_own_argmax_and_crops_the_context():
    torch.manual_seed(0)
    model = pnn.GPT(pnn.GPTConfig(vocab_size=11, d_model=16, n_layers=1, n_heads=2, max_len=5)).eval()
    out = pnn.generate(model, torch.tensor([[4, 2]]), 8, temperature=0)
    ids = torch.tensor([[4, 2]])
    for _ in range(8):  # by hand: argmax of the last position, context cropped to max_len - 1
        nxt = model(ids[:, -4:])[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], 1)
    assert torch.equal(out, ids)


def test_generate_stops_at_eos():
    class Always(torch.nn.Module):
        def forward(self, ids):
            logits = torch.full((*ids.shape, 5), -10.0)
            logits[..., 3] = 10.0
            return logits

    out = pnn.generate(Always(), torch.tensor([[1], [2]]), 10, temperature=0, eos_id=3)
    assert out.tolist() == [[1, 3], [2, 3]]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_generation_on_cuda_with_a_cpu_generator():
    torch.manual_seed(0)
    model = pnn.GPT(pnn.GPTConfig(vocab_size=17, d_model=16, n_layers=1, n_heads=2, max_len=12)).cuda()
    out = pnn.generate(model, torch.tensor([[1, 2]], device="cuda"), 10, top_p=0.9,
                       generator=torch.Generator().manual_seed(0))
    assert out.device.type == "cuda" and out.shape == (1, 12)
