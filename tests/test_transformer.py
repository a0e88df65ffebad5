"""plmcourse.nn.transformer: blocks against torch.nn.TransformerEncoderLayer, pieces against plmcourse.ref."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse import ref

CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")],
)
DEVICES = ["cpu", CUDA]


def numpy(t):
    return t.detach().cpu().numpy()


# ---------------------------------------------------------------- pieces vs ref, float64


def test_gelu_and_layer_norm_match_torch():
    x = torch.linspace(-6, 6, 101, dtype=torch.float64)
    np.testing.assert_allclose(ref.gelu(x.numpy()), F.gelu(x).numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        ref.gelu(x.numpy(), approximate="tanh"), F.gelu(x, approximate="tanh").numpy(), rtol=0, atol=1e-12
    )
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 8, generator=g, dtype=torch.float64) * 3 + 1
    gamma, beta = torch.randn(8, generator=g, dtype=torch.float64), torch.randn(8, generator=g, dtype=torch.float64)
    np.testing.assert_allclose(
        ref.layer_norm(x.numpy(), gamma.numpy(), beta.numpy()),
        F.layer_norm(x, (8,), gamma, beta, eps=1e-5).numpy(),
        rtol=0, atol=1e-12,
    )


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "relu"])
def test_feed_forward_matches_ref(activation):
    torch.manual_seed(0)
    ff = pnn.FeedForward(6, 10, activation=activation).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64)
    expected = ref.feed_forward(
        x.numpy(),
        numpy(ff.linear1.weight).T, numpy(ff.linear1.bias),  # nn.Linear: x @ W^T + b
        numpy(ff.linear2.weight).T, numpy(ff.linear2.bias),
        activation,
    )
    np.testing.assert_allclose(numpy(ff(x)), expected, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="activation"):
        pnn.FeedForward(6, 10, activation="swish")


# ---------------------------------------------------------------- blocks vs torch


def copy_into_torch_layer(block, layer):
    """Copy our block's weights into a torch.nn.TransformerEncoderLayer."""
    attn = block.self_attn
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(attn.qkv_proj.weight)  # both: W_q, W_k, W_v stacked
        layer.self_attn.in_proj_bias.copy_(attn.qkv_proj.bias)
        layer.self_attn.out_proj.weight.copy_(attn.out_proj.weight)
        layer.self_attn.out_proj.bias.copy_(attn.out_proj.bias)
        for ours, theirs in [
            (block.ff.linear1, layer.linear1), (block.ff.linear2, layer.linear2),
            (block.norm1, layer.norm1), (block.norm2, layer.norm2),
        ]:
            theirs.weight.copy_(ours.weight)
            theirs.bias.copy_(ours.bias)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
@pytest.mark.parametrize("impl", ["explicit", "fused"])
def test_block_matches_torch_encoder_layer(device, norm_first, impl):
    dtype = torch.float64 if device == "cpu" else torch.float32
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    torch.manual_seed(0)
    d, n_heads, d_ff, T = 16, 4, 24, 5
    block = pnn.TransformerBlock(d, n_heads, d_ff, norm_first=norm_first, impl=impl).to(device, dtype)
    # non-trivial LayerNorm parameters, so that a swapped norm1/norm2 would show
    with torch.no_grad():
        for p in (*block.norm1.parameters(), *block.norm2.parameters()):
            p.uniform_(0.5, 1.5)
    layer = torch.nn.TransformerEncoderLayer(
        d, n_heads, d_ff, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first,
        device=device, dtype=dtype,
    )
    copy_into_torch_layer(block, layer)
    x = torch.randn(2, T, d, device=device, dtype=dtype, requires_grad=True)
    for mask in (None, pnn.causal_mask(T, device=device)):
        out = block(x, mask=mask)
        out_t = layer(x, src_mask=None if mask is None else ~mask)  # torch: True = NOT allowed
        torch.testing.assert_close(out, out_t, rtol=tol, atol=tol)
        (g,) = torch.autograd.grad(out.pow(2).sum(), x)
        (g_t,) = torch.autograd.grad(out_t.pow(2).sum(), x)
        torch.testing.assert_close(g, g_t, rtol=tol, atol=tol)


@pytest.mark.parametrize("impl", ["explicit", "fused"])
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_causal_mask_hides_the_future(impl, norm_first):
    torch.manual_seed(1)
    T = 6
    block = pnn.TransformerBlock(8, 2, norm_first=norm_first, impl=impl).double()
    x = torch.randn(2, T, 8, dtype=torch.float64)
    x_changed = x.clone()
    # change token 4 (not by a constant shift: LayerNorm would remove that)
    x_changed[:, 4] += torch.randn(8, dtype=torch.float64)
    mask = pnn.causal_mask(T)
    out, out_changed = block(x, mask=mask), block(x_changed, mask=mask)
    torch.testing.assert_close(out[:, :4], out_changed[:, :4], rtol=0, atol=1e-12)  # the past cannot see it
    assert not torch.allclose(out[:, 4:], out_changed[:, 4:])
    # without the mask the change reaches every position
    assert not torch.allclose(block(x)[:, 0], block(x_changed)[:, 0])


def test_default_d_ff_and_bias_false():
    block = pnn.TransformerBlock(8, 2, bias=False)
    assert block.ff.linear1.out_features == 32
    assert all("bias" not in name for name, _ in block.named_parameters())


def test_cross_attention_block_is_self_then_cross_then_ffn():
    torch.manual_seed(2)
    d, T, S = 8, 3, 5
    block = pnn.TransformerBlock(d, 2, cross_attention=True).double()
    x = torch.randn(2, T, d, dtype=torch.float64)
    context = torch.randn(2, S, d, dtype=torch.float64)
    mask, context_mask = pnn.causal_mask(T), pnn.padding_mask([3, 5], S)
    out = block(x, mask=mask, context=context, context_mask=context_mask)
    # pre-LN by hand
    h = x + block.self_attn(block.norm1(x), mask=mask)
    h = h + block.cross_attn(block.norm_cross(h), context=context, mask=context_mask)
    h = h + block.ff(block.norm2(h))
    torch.testing.assert_close(out, h, rtol=1e-12, atol=1e-12)
    # sequence 0's padded context positions (3, 4) are ignored; its real ones are not
    changed = context.clone()
    changed[0, 3:] += 5.0
    torch.testing.assert_close(block(x, mask=mask, context=changed, context_mask=context_mask), out, rtol=0, atol=1e-12)
    changed[0, 0] += 5.0
    assert not torch.allclose(block(x, mask=mask, context=changed, context_mask=context_mask), out)
    with pytest.raises(ValueError, match="context"):
        block(x, mask=mask)
    with pytest.raises(ValueError, match="cross-attention"):
        pnn.TransformerBlock(d, 2)(x, context=context)


# ---------------------------------------------------------------- position embeddings


def test_sinusoidal_positions_match_ref():
    np.testing.assert_allclose(
        pnn.sinusoidal_positions(7, 6, dtype=torch.float64).numpy(), ref.sinusoidal_positions(7, 6), rtol=0, atol=1e-15
    )
    with pytest.raises(ValueError, match="even"):
        pnn.sinusoidal_positions(7, 5)


@pytest.mark.parametrize("device", DEVICES)
def test_sinusoidal_position_embedding(device):
    emb = pnn.SinusoidalPositionEmbedding(10, 6).to(device)
    assert list(emb.parameters()) == []  # fixed, nothing to learn
    x = torch.randn(2, 4, 6, device=device)
    expected = x + torch.as_tensor(ref.sinusoidal_positions(4, 6), dtype=torch.float32, device=device)
    torch.testing.assert_close(emb(x), expected, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="max_len"):
        emb(torch.zeros(1, 11, 6, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_learned_position_embedding(device):
    torch.manual_seed(3)
    emb = pnn.LearnedPositionEmbedding(10, 6).to(device)
    x = torch.randn(2, 4, 6, device=device)
    out = emb(x)
    torch.testing.assert_close(out, x + emb.embedding.weight[:4], rtol=0, atol=0)
    out.sum().backward()
    grad = emb.embedding.weight.grad
    assert torch.all(grad[:4] == 2.0) and torch.all(grad[4:] == 0.0)  # batch of 2; unused positions get nothing
    with pytest.raises(ValueError, match="max_len"):
        emb(torch.zeros(1, 11, 6, device=device))
