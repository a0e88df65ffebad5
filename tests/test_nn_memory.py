"""Transformer-XL's memory (plmcourse.nn.memory): the cache gives the same numbers as recomputing the
context, no gradient flows into it, it keeps exactly the last memory_len positions, memory_len=0 is an
ordinary causal LM, ALiBi's bias by hand, nothing sees the future, and the stream evaluation's two modes."""

import math

import pytest
import torch

from plmcourse.nn.memory import (
    MemoryGPT,
    RecurrentLoss,
    alibi_bias,
    alibi_slopes,
    relative_attention,
    segment_batches,
    stream_loss,
)
from plmcourse.nn.models import GPTConfig
from plmcourse.nn.objectives import cross_entropy

CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")],
)
DEVICES = ["cpu", CUDA]
V = 23


def tiny(memory_len, n_layers=2, norm_first=True, seed=0, device="cpu", dtype=torch.float64):
    # init_std 0.3: scores far from 0, so attention is far from uniform and a wrong key would show.
    torch.manual_seed(seed)
    config = GPTConfig(vocab_size=V, d_model=16, n_layers=n_layers, n_heads=4, dropout=0.0, init_std=0.3,
                       norm_first=norm_first)
    return MemoryGPT(config, memory_len).to(device, dtype).eval()


def tokens(B, T, seed=1, device="cpu"):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed)).to(device)


def close(a, b):
    return torch.allclose(a, b, rtol=0.0, atol=1e-10)


# ----------------------------------------------------------------------------
# The cache's promise: the same numbers as recomputing, each position computed once


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n_layers", [2, 3])
@pytest.mark.parametrize("norm_first", [True, False])
def test_memory_gives_the_logits_of_the_whole_sequence(device, n_layers, norm_first):
    """A memory that covers everything before a segment: its logits are those of one long sequence.

    With more than one layer this holds only because the memory keeps each layer's *input*:
    layer l's keys for an old position are then what layer l computed for it, and that used
    only positions before it, exactly as in the long sequence.
    """
    L = 5
    model = tiny(memory_len=3 * L, n_layers=n_layers, norm_first=norm_first, device=device)
    ids = tokens(2, 3 * L, device=device)
    whole, _ = model(ids)  # (B, 3L, V), no memory
    memory, pieces = None, []
    for k in range(3):
        logits, memory = model(ids[:, k * L:(k + 1) * L], memory)
        pieces.append(logits)
    assert close(torch.cat(pieces, dim=1), whole)
    assert all(m.shape == (2, 3 * L, 16) for m in memory)


@pytest.mark.parametrize("n_layers", [1, 2])
def test_a_memory_of_one_segment_equals_recomputing_the_previous_segment(n_layers):
    """memory_len = L: segment 2's logits are those of [segment 1; segment 2] scored on its last L."""
    L = 6
    model = tiny(memory_len=L, n_layers=n_layers)
    ids = tokens(3, 2 * L)
    _, memory = model(ids[:, :L])
    with_memory, _ = model(ids[:, L:], memory)
    recomputed, _ = model(ids)
    assert close(with_memory, recomputed[:, L:])


def test_upper_layers_reach_further_back_than_the_memory():
    """memory_len = L, third segment: with one layer the cache equals recomputing [segment 2; segment 3].
    With two, the cached layer-1 inputs of segment 2 were computed seeing segment 1 too, so the top
    layer's context reaches 2L back: Transformer-XL's extended context, and the two differ."""
    L = 4
    ids = tokens(2, 3 * L)
    for n_layers, equal in [(1, True), (2, False)]:
        model = tiny(memory_len=L, n_layers=n_layers)
        memory = None
        for k in range(3):
            cached, memory = model(ids[:, k * L:(k + 1) * L], memory)
        recomputed = model(ids[:, L:])[0][:, L:]
        assert close(cached, recomputed) == equal


# ----------------------------------------------------------------------------
# What the memory holds


def test_no_gradient_flows_into_the_memory():
    """Segment 2's gradients are those of a memory given as constants: nothing reaches segment 1's graph."""
    L = 5
    model = tiny(memory_len=L).train()
    ids = tokens(2, 2 * L)
    _, memory = model(ids[:, :L])  # built with gradients enabled
    assert all(not m.requires_grad and m.grad_fn is None for m in memory)

    def gradients(memory):
        model.zero_grad()
        logits, _ = model(ids[:, L:], memory)
        cross_entropy(logits[:, :-1], ids[:, L + 1:]).backward()
        return [p.grad.clone() for p in model.parameters()]

    with torch.no_grad():
        _, constant = model(ids[:, :L])
    for a, b in zip(gradients(memory), gradients(constant)):
        assert close(a, b)


def test_memory_keeps_exactly_the_last_memory_len_positions():
    """memory_len=5, segments of 3: 3 positions after one segment, then the last 5 of each layer's
    inputs: after two segments, those of the 6 positions so far cut to the last 5."""
    model, long = tiny(memory_len=5), tiny(memory_len=100)  # same seed, same weights
    ids = tokens(2, 9)
    _, memory = model(ids[:, :3])
    assert [m.shape for m in memory] == [(2, 3, 16)] * 2
    _, memory = model(ids[:, 3:6], memory)
    _, everything = long(ids[:, :6])
    assert [m.shape for m in memory] == [(2, 5, 16)] * 2
    assert all(close(m, e[:, -5:]) for m, e in zip(memory, everything))
    _, memory = model(ids[:, 6:9], memory)
    assert [m.shape for m in memory] == [(2, 5, 16)] * 2
    assert close(memory[0], model.token(ids[:, 4:9]))  # layer 0's inputs are the token embeddings


def test_memory_len_zero_is_the_same_model_without_memory():
    L = 4
    with_cache, without = tiny(memory_len=2 * L), tiny(memory_len=0)
    ids = tokens(2, 2 * L)
    first, memory = without(ids[:, :L])
    assert [m.shape[1] for m in memory] == [0, 0]
    assert close(without(ids[:, L:], memory)[0], without(ids[:, L:])[0])
    assert close(with_cache(ids[:, :L])[0], first)  # the same weights; no memory yet, the same numbers
    # and a memory changes the second segment's logits (else the comparison would be empty)
    _, memory = with_cache(ids[:, :L])
    assert not close(with_cache(ids[:, L:], memory)[0], without(ids[:, L:])[0])


def test_memory_must_have_one_tensor_per_layer():
    model = tiny(memory_len=4)
    _, memory = model(tokens(1, 4))
    with pytest.raises(ValueError, match="one tensor per layer"):
        model(tokens(1, 4), memory[:1])
    with pytest.raises(ValueError, match="memory_len"):
        tiny(memory_len=-1)


# ----------------------------------------------------------------------------
# Positions: ALiBi


def test_alibi_slopes():
    assert alibi_slopes(4) == [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8]
    assert alibi_slopes(8) == [2.0 ** -k for k in range(1, 9)]
    # not a power of 2: the 4-head slopes, then every other one of the 8-head slopes
    assert alibi_slopes(6) == [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]


def test_alibi_bias_by_hand():
    """2 heads, one memory position, a segment of 2: the keys are [m, s0, s1]."""
    slopes = torch.tensor([0.25, 0.0625], dtype=torch.float64)
    inf = float("inf")
    expected = torch.tensor([
        [[-1 * 0.25, 0.0, -inf],  # query s0: m is 1 back, s0 is itself, s1 is the future
         [-2 * 0.25, -1 * 0.25, 0.0]],  # query s1
        [[-1 * 0.0625, 0.0, -inf],
         [-2 * 0.0625, -1 * 0.0625, 0.0]],
    ], dtype=torch.float64)
    assert torch.equal(alibi_bias(slopes, n_queries=2, n_memory=1), expected)
    assert torch.equal(alibi_bias(slopes, 2), expected[:, :, 1:])  # no memory: an ordinary causal bias


def test_relative_attention_by_hand():
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 3, 8, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(2, 4, 5, 8, generator=gen, dtype=torch.float64) for _ in range(2))
    bias = alibi_bias(torch.tensor(alibi_slopes(4), dtype=torch.float64), n_queries=3, n_memory=2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(8) + bias  # (2, 4, 3, 5)
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    weights = weights / weights.sum(-1, keepdim=True)
    assert close(relative_attention(q, k, v, bias), weights @ v)
    assert (weights[:, :, 0, 3:] == 0).all()  # query 0 (key position 2) gives the future no weight


@pytest.mark.parametrize("device", DEVICES)
def test_no_query_sees_a_later_position_but_every_query_sees_the_memory(device):
    L = 6
    model = tiny(memory_len=L, device=device)
    ids = tokens(2, 2 * L, device=device)
    _, memory = model(ids[:, :L])
    logits, _ = model(ids[:, L:], memory)
    for i in range(L - 1):
        changed = ids[:, L:].clone()
        changed[:, i + 1:] = (changed[:, i + 1:] + 1) % V
        assert close(model(changed, memory)[0][:, :i + 1], logits[:, :i + 1])
    # the first query sees the memory: a different memory changes it
    _, other = model(tokens(2, L, seed=2, device=device))
    assert not close(model(ids[:, L:], other)[0][:, 0], logits[:, 0])


# ----------------------------------------------------------------------------
# Training and evaluating along a stream


def test_segment_batches_walk_the_stream_in_order():
    ids = torch.arange(2 * 11)  # rows [0..10] and [11..21]
    get_batch = segment_batches(ids, batch_size=2, segment_len=3)
    segment, first = get_batch(0)
    assert first and segment.tolist() == [[0, 1, 2, 3], [11, 12, 13, 14]]
    segment, first = get_batch(1)
    assert not first and segment.tolist() == [[3, 4, 5, 6], [14, 15, 16, 17]]  # the next text
    assert get_batch(3)[1] and torch.equal(get_batch(3)[0], get_batch(0)[0])  # 3 segments, then again


def test_recurrent_loss_carries_the_memory_and_forgets_it_on_a_new_pass():
    model = tiny(memory_len=3)
    get_batch = segment_batches(tokens(1, 40)[0], batch_size=2, segment_len=3)  # rows of 20: 6 segments
    loss_fn, memory = RecurrentLoss(), None
    for step in range(8):
        segment, first = get_batch(step)
        if step == 6:
            assert first  # a new pass over the rows: the memory of segment 5 is not segment 0's past
            memory = None
        logits, memory = model(segment[:, :-1], memory)
        assert close(loss_fn(model, (segment, first)), cross_entropy(logits, segment[:, 1:]))
    without = cross_entropy(model(segment[:, :-1])[0], segment[:, 1:])
    assert not close(loss_fn(model, (segment, False)), without)  # the memory does change the loss


@pytest.mark.parametrize("device", DEVICES)
def test_stream_loss_without_memory_by_hand(device):
    model = tiny(memory_len=0, device=device)
    ids = tokens(1, 2 * 13 + 1, device=device)[0]
    rows = ids[:26].view(2, 13)  # 2 rows of 13: segments of 5 cover targets 1-5, 6-10, 11-12
    losses, counts = [], []
    for start in (0, 5, 10):
        segment = rows[:, start:start + 6]
        with torch.no_grad():
            losses.append(float(cross_entropy(model(segment[:, :-1])[0], segment[:, 1:])) * segment[:, 1:].numel())
        counts.append(segment[:, 1:].numel())
    expected = sum(losses) / sum(counts)
    assert math.isclose(stream_loss(model, ids, segment_len=5, n_rows=2), expected, rel_tol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_stream_loss_carrying_equals_recomputing_with_one_layer(device):
    """One layer: the carried memory is the embeddings of the last memory_len tokens, so both modes
    give the same numbers. Two layers: close, not equal (the cache reaches further back)."""
    ids = tokens(1, 203, device=device)[0]
    one = tiny(memory_len=7, n_layers=1, device=device)
    carry, again = (stream_loss(one, ids, 5, n_rows=3, recompute=r) for r in (False, True))
    assert math.isclose(carry, again, rel_tol=1e-12)
    two = tiny(memory_len=7, n_layers=2, device=device).train()
    carry, again = (stream_loss(two, ids, 5, n_rows=3, recompute=r) for r in (False, True))
    assert carry != again and math.isclose(carry, again, rel_tol=0.05)
    assert two.training  # evaluated in eval mode, then left in the mode it was found in
