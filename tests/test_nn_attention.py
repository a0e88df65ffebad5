"""plmcourse.nn attention: parity with plmcourse.ref, with torch's fused kernel and torch.nn.MultiheadAttention."""

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
# float32 on a GPU: kernels sum in other orders than the CPU; 1e-5 is still far below any real bug.
TOL = {torch.float32: 1e-5, torch.float64: 1e-10}

B, H, LQ, LK, D = 2, 3, 4, 5, 8


def make_qkv(dtype=torch.float64, device="cpu", seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, LQ, D, generator=g, dtype=dtype)
    k = torch.randn(B, H, LK, D, generator=g, dtype=dtype)
    v = torch.randn(B, H, LK, 6, generator=g, dtype=dtype)
    return [t.to(device).requires_grad_(requires_grad) for t in (q, k, v)]


def make_masks(device="cpu", seed=0):
    """Masks of the three broadcast shapes; none has a fully masked row."""
    g = torch.Generator().manual_seed(seed)
    full = torch.rand(B, H, LQ, LK, generator=g) < 0.6
    full[..., 0] = True  # every query keeps at least one key
    return {
        "none": None,
        "(Lq,Lk)": torch.ones(LQ, LK, dtype=torch.bool).tril(diagonal=1),
        "(B,1,1,Lk)": pnn.padding_mask(torch.tensor([3, 5]), LK),
        "(B,H,Lq,Lk)": full,
    }


def to(mask, device):
    return None if mask is None else mask.to(device)


# ---------------------------------------------------------------- ref vs nn (explicit), float64


@pytest.mark.parametrize("mask_name", ["none", "(Lq,Lk)", "(B,1,1,Lk)", "(B,H,Lq,Lk)"])
def test_explicit_matches_ref_float64(mask_name):
    q, k, v = make_qkv()
    mask = make_masks()[mask_name]
    out, w = pnn.scaled_dot_product_attention(q, k, v, mask)
    mask_np = None if mask is None else mask.numpy()
    out_ref, w_ref = ref.scaled_dot_product_attention(q.numpy(), k.numpy(), v.numpy(), mask_np)
    np.testing.assert_allclose(out.numpy(), out_ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(w.numpy(), w_ref, rtol=0, atol=1e-10)


def test_softmax_matches_ref_and_torch():
    x = torch.tensor([[1e4, 1e4 - 1.0, float("-inf")], [float("-inf")] * 3, [0.5, -1.0, 2.0]], dtype=torch.float64)
    out = pnn.softmax(x)
    np.testing.assert_allclose(out.numpy(), ref.softmax(x.numpy()), rtol=0, atol=1e-15)
    torch.testing.assert_close(out[[0, 2]], torch.softmax(x[[0, 2]], dim=-1), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(out[1].numpy(), 0.0)


def test_masks_and_heads_match_ref():
    np.testing.assert_array_equal(pnn.causal_mask(4).numpy(), ref.causal_mask(4))
    np.testing.assert_array_equal(pnn.padding_mask([1, 3], 4).numpy(), ref.padding_mask([1, 3], 4))
    x = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    split = pnn.split_heads(x, 3)
    np.testing.assert_array_equal(split.numpy(), ref.split_heads(x.numpy(), 3))
    np.testing.assert_array_equal(pnn.merge_heads(split).numpy(), x.numpy())
    with pytest.raises(ValueError, match="divisible"):
        pnn.split_heads(x, 4)


# ---------------------------------------------------------------- explicit vs fused vs torch


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mask_name", ["none", "(Lq,Lk)", "(B,1,1,Lk)", "(B,H,Lq,Lk)"])
def test_explicit_fused_and_torch_agree(device, dtype, mask_name):
    q, k, v = make_qkv(dtype, device)
    mask = to(make_masks()[mask_name], device)
    out_explicit, w = pnn.scaled_dot_product_attention(q, k, v, mask, impl="explicit")
    out_fused, w_fused = pnn.scaled_dot_product_attention(q, k, v, mask, impl="fused")
    out_torch = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert w_fused is None and w.shape == (B, H, LQ, LK)
    tol = TOL[dtype]
    torch.testing.assert_close(out_explicit, out_torch, rtol=tol, atol=tol)
    torch.testing.assert_close(out_fused, out_torch, rtol=tol, atol=tol)
    if mask is not None:
        assert torch.all(w[~mask.expand_as(w)] == 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("impl", ["explicit", "fused"])
def test_gradients_agree_with_torch(device, impl):
    q, k, v = make_qkv(torch.float64, device, requires_grad=True)
    mask = to(make_masks()["(B,1,1,Lk)"], device)
    cot = torch.randn(B, H, LQ, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64).to(device)
    out, _ = pnn.scaled_dot_product_attention(q, k, v, mask, impl=impl)
    grads = torch.autograd.grad((out * cot).sum(), (q, k, v))
    out_t = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    grads_t = torch.autograd.grad((out_t * cot).sum(), (q, k, v))
    for g, g_t in zip(grads, grads_t):
        torch.testing.assert_close(g, g_t, rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------- fully masked rows


def mask_with_empty_rows(device):
    mask = torch.ones(B, H, LQ, LK, dtype=torch.bool, device=device)
    mask[0, 1, 2] = False  # one query of one head of one sequence sees nothing
    mask[1, :, 0] = False  # a query row empty in every head
    return mask


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("impl", ["explicit", "fused"])
def test_fully_masked_rows_give_zeros_and_finite_gradients(device, impl):
    q, k, v = make_qkv(torch.float32, device, requires_grad=True)
    mask = mask_with_empty_rows(device)
    empty = ~mask.any(-1)  # (B, H, LQ)
    out, w = pnn.scaled_dot_product_attention(q, k, v, mask, impl=impl)
    assert torch.all(out[empty] == 0)
    assert torch.all(torch.isfinite(out))
    if impl == "explicit":
        assert torch.all(w[empty] == 0)
        torch.testing.assert_close(w[~empty].sum(-1), torch.ones_like(w[~empty].sum(-1)))
    # the other rows are untouched by the fix-up
    out_ok, _ = pnn.scaled_dot_product_attention(q, k, v, mask | empty[..., None], impl="explicit")
    torch.testing.assert_close(out[~empty], out_ok[~empty], rtol=1e-5, atol=1e-5)
    out.pow(2).sum().backward()
    for t in (q, k, v):
        assert torch.all(torch.isfinite(t.grad))
    assert torch.all(q.grad[empty] == 0)  # an empty row's output is constant 0


def test_fused_fixup_does_not_rely_on_torch_zeroing_empty_rows(monkeypatch):
    """Some kernels (older CUDA memory-efficient ones) return NaN for an empty row."""
    original = F.scaled_dot_product_attention

    def nan_for_empty_rows(q, k, v, attn_mask=None, dropout_p=0.0):
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v  # NaN where a row is all -inf

    q, k, v = make_qkv(torch.float64, requires_grad=True)
    mask = mask_with_empty_rows("cpu")
    monkeypatch.setattr(F, "scaled_dot_product_attention", nan_for_empty_rows)
    assert torch.isnan(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)).any()  # the stub is faithful
    out, _ = pnn.scaled_dot_product_attention(q, k, v, mask, impl="fused")
    out.sum().backward()
    monkeypatch.setattr(F, "scaled_dot_product_attention", original)
    expected, _ = pnn.scaled_dot_product_attention(q, k, v, mask, impl="explicit")
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    assert all(torch.all(torch.isfinite(t.grad)) for t in (q, k, v))


# ---------------------------------------------------------------- errors and dropout


def test_errors():
    q, k, v = make_qkv()
    with pytest.raises(ValueError, match="impl"):
        pnn.scaled_dot_product_attention(q, k, v, impl="flash")
    with pytest.raises(ValueError, match="d_k"):
        pnn.scaled_dot_product_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match="L_k"):
        pnn.scaled_dot_product_attention(q, k, v[..., :3, :])
    with pytest.raises(ValueError, match="bool"):
        pnn.scaled_dot_product_attention(q, k, v, torch.zeros(LQ, LK))
    with pytest.raises(ValueError, match="broadcast"):
        pnn.scaled_dot_product_attention(q, k, v, torch.ones(LQ, LQ, dtype=torch.bool))
    with pytest.raises(ValueError, match="divisible"):
        pnn.MultiHeadAttention(10, 3)


def test_dropout_on_weights():
    torch.manual_seed(0)
    q, k, v = make_qkv()
    _, w_plain = pnn.scaled_dot_product_attention(q, k, v)
    out, w = pnn.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    kept = w != 0
    assert 0 < kept.float().mean() < 1
    # kept weights are scaled by 1 / (1 - p) = 2, and the output uses exactly these weights
    torch.testing.assert_close(w[kept], 2 * w_plain[kept], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, w @ v, rtol=1e-12, atol=1e-12)
    out_fused, _ = pnn.scaled_dot_product_attention(q, k, v, dropout_p=0.5, impl="fused")
    out_fused_plain, _ = pnn.scaled_dot_product_attention(q, k, v, impl="fused")
    assert not torch.allclose(out_fused, out_fused_plain)


# ---------------------------------------------------------------- MultiHeadAttention vs torch


def torch_mha_like(mha):
    """A torch.nn.MultiheadAttention holding the same weights as our module."""
    bias = mha.qkv_proj.bias is not None
    dtype, device = mha.qkv_proj.weight.dtype, mha.qkv_proj.weight.device
    t = torch.nn.MultiheadAttention(mha.d_model, mha.n_heads, bias=bias, batch_first=True, dtype=dtype, device=device)
    with torch.no_grad():
        # torch packs the q, k and v projections into one (3 d_model, d_model) matrix, as we do
        t.in_proj_weight.copy_(mha.qkv_proj.weight)
        t.out_proj.weight.copy_(mha.out_proj.weight)
        if bias:
            t.in_proj_bias.copy_(mha.qkv_proj.bias)
            t.out_proj.bias.copy_(mha.out_proj.bias)
    return t


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("kind", ["self", "causal", "cross"])
@pytest.mark.parametrize("impl", ["explicit", "fused"])
def test_multi_head_attention_matches_torch(device, bias, kind, impl):
    """self: a causal mask tensor; causal: is_causal=True and no tensor; cross: padded context."""
    dtype = torch.float64 if device == "cpu" else torch.float32
    tol = TOL[dtype] if dtype == torch.float64 else 1e-4
    torch.manual_seed(0)
    d, n_heads, L, S = 12, 3, 4, 6
    mha = pnn.MultiHeadAttention(d, n_heads, bias=bias, impl=impl).to(device, dtype)
    t = torch_mha_like(mha)
    x = torch.randn(2, L, d, dtype=dtype, device=device, requires_grad=True)
    is_causal = kind == "causal"
    if kind == "cross":
        context = torch.randn(2, S, d, dtype=dtype, device=device, requires_grad=True)
        mask = pnn.padding_mask(torch.tensor([4, 6], device=device), S)  # (B, 1, 1, S)
        kw = dict(key_padding_mask=~mask[:, 0, 0])  # torch: True = ignore
        inputs = (x, context)
    else:
        context = None
        mask = pnn.causal_mask(L, device=device)  # (L, L)
        kw = dict(attn_mask=~mask)  # torch: True = NOT allowed
        inputs = (x,)
    kv = x if context is None else context
    if is_causal:
        mask = None  # the module builds (or, fused, never builds) the causal mask itself

    out = mha(x, context=context, mask=mask, is_causal=is_causal)
    out_w, weights = mha(x, context=context, mask=mask, is_causal=is_causal, return_weights=True)
    out_t, weights_t = t(x, kv, kv, need_weights=True, average_attn_weights=False, **kw)
    torch.testing.assert_close(out, out_t, rtol=tol, atol=tol)
    torch.testing.assert_close(out_w, out_t, rtol=tol, atol=tol)
    torch.testing.assert_close(weights, weights_t, rtol=tol, atol=tol)

    cot = torch.randn_like(out)
    ours = dict(mha.named_parameters())
    grads = torch.autograd.grad((out * cot).sum(), (*inputs, *ours.values()))
    grads_t = torch.autograd.grad((out_t * cot).sum(), (*inputs, *t.parameters()))
    for g, g_t in zip(grads[: len(inputs)], grads_t[: len(inputs)]):
        torch.testing.assert_close(g, g_t, rtol=tol, atol=tol)
    grad = dict(zip(ours, grads[len(inputs):]))
    grad_t = dict(zip(dict(t.named_parameters()), grads_t[len(inputs):]))
    torch.testing.assert_close(grad["qkv_proj.weight"], grad_t["in_proj_weight"], rtol=tol, atol=tol)
    torch.testing.assert_close(grad["out_proj.weight"], grad_t["out_proj.weight"], rtol=tol, atol=tol)
    if bias:
        torch.testing.assert_close(grad["qkv_proj.bias"], grad_t["in_proj_bias"], rtol=tol, atol=tol)
        torch.testing.assert_close(grad["out_proj.bias"], grad_t["out_proj.bias"], rtol=tol, atol=tol)


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_multi_head_attention_matches_ref_float64(cross):
    torch.manual_seed(1)
    d, n_heads = 8, 2
    mha = pnn.MultiHeadAttention(d, n_heads, bias=False).double()
    x = torch.randn(2, 3, d, dtype=torch.float64)
    context = torch.randn(2, 5, d, dtype=torch.float64) if cross else None
    kv = x if context is None else context
    mask = pnn.padding_mask([2, 5], 5) if cross else pnn.causal_mask(3)
    with torch.no_grad():
        out, w = mha(x, context=context, mask=mask, return_weights=True)
    # nn.Linear computes x @ W^T, the reference x @ w: so w = W^T
    w_q, w_k, w_v = mha.qkv_proj.weight.detach().split(d)  # the three (d, d) thirds
    ws = [w.T.numpy() for w in (w_q, w_k, w_v, mha.out_proj.weight.detach())]
    out_ref, w_ref = ref.multi_head_attention(x.numpy(), kv.numpy(), *ws, n_heads, mask.numpy())
    np.testing.assert_allclose(out.numpy(), out_ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(w.numpy(), w_ref, rtol=0, atol=1e-10)


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("prefix_batch", [1, 2])
@pytest.mark.parametrize("impl", ["explicit", "fused"])
def test_prefix_equals_concatenated_keys_and_values(prefix_batch, impl, is_causal):
    torch.manual_seed(2)
    d, n_heads, L, P = 8, 2, 4, 3
    hs = d // n_heads
    mha = pnn.MultiHeadAttention(d, n_heads, impl=impl).double()
    x = torch.randn(2, L, d, dtype=torch.float64)
    prefix_k = torch.randn(prefix_batch, n_heads, P, hs, dtype=torch.float64)
    prefix_v = torch.randn(prefix_batch, n_heads, P, hs, dtype=torch.float64)
    mask = pnn.causal_mask(L)
    given = dict(mask=None, is_causal=True) if is_causal else dict(mask=mask)  # the same causal rule
    out = mha(x, prefix=(prefix_k, prefix_v), **given)
    out_w, w = mha(x, prefix=(prefix_k, prefix_v), return_weights=True, **given)

    # by hand: project, put the prefix in front, let every query see it
    q_x, k_x, v_x = mha.qkv_proj(x).split(d, dim=-1)
    q = pnn.split_heads(q_x, n_heads)
    k = torch.cat([prefix_k.expand(2, -1, -1, -1), pnn.split_heads(k_x, n_heads)], dim=2)
    v = torch.cat([prefix_v.expand(2, -1, -1, -1), pnn.split_heads(v_x, n_heads)], dim=2)
    full_mask = torch.cat([torch.ones(L, P, dtype=torch.bool), mask], dim=-1)  # (L, P + L)
    y, w_hand = pnn.scaled_dot_product_attention(q, k, v, full_mask)
    expected = mha.out_proj(pnn.merge_heads(y))

    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(out_w, expected, rtol=1e-10, atol=1e-10)
    assert w.shape == (2, n_heads, L, P + L)
    torch.testing.assert_close(w, w_hand, rtol=1e-10, atol=1e-10)
    assert torch.all(w[..., 0, :P] > 0)  # even the first query attends to the prefix
    assert not torch.allclose(out, mha(x, mask=mask))  # and it matters


def test_checkpoint_with_separate_q_k_v_loads_into_the_fused_projection():
    """Older checkpoints (and BERT's own, renamed) hold q_proj, k_proj, v_proj: they are stacked."""
    torch.manual_seed(3)
    d = 8
    mha = pnn.MultiHeadAttention(d, 2).double()
    w_q, w_k, w_v = (torch.randn(d, d, dtype=torch.float64) for _ in range(3))
    b_q, b_k, b_v = (torch.randn(d, dtype=torch.float64) for _ in range(3))
    old = {"q_proj.weight": w_q, "k_proj.weight": w_k, "v_proj.weight": w_v,
           "q_proj.bias": b_q, "k_proj.bias": b_k, "v_proj.bias": b_v,
           "out_proj.weight": mha.out_proj.weight.detach().clone(), "out_proj.bias": mha.out_proj.bias.detach().clone()}
    mha.load_state_dict(old)  # strict: nothing missing, nothing left over
    assert set(mha.state_dict()) == {"qkv_proj.weight", "qkv_proj.bias", "out_proj.weight", "out_proj.bias"}
    x = torch.randn(2, 3, d, dtype=torch.float64)
    q, k, v = mha.project(x)
    torch.testing.assert_close(q, x @ w_q.T + b_q)  # W_q is the first third, then W_k, then W_v
    torch.testing.assert_close(k, x @ w_k.T + b_k)
    torch.testing.assert_close(v, x @ w_v.T + b_v)


@pytest.mark.parametrize("impl", ["explicit", "fused"])
def test_is_causal_equals_the_causal_mask_also_for_more_keys_than_queries(impl):
    """torch's rule for L_q != L_k: query i sees keys 0..i (top-left), in both paths."""
    torch.manual_seed(4)
    q, k, v = torch.randn(2, 3, 4, dtype=torch.float64), torch.randn(2, 5, 4, dtype=torch.float64), torch.randn(2, 5, 4, dtype=torch.float64)
    out, _ = pnn.scaled_dot_product_attention(q, k, v, is_causal=True, impl=impl)
    mask = torch.ones(3, 5, dtype=torch.bool).tril()
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    padding = torch.tensor([[True] * 5, [True, True, False, False, False]])[:, None, :]  # (B, 1, L_k)
    out, _ = pnn.scaled_dot_product_attention(q, k, v, mask=padding, is_causal=True, impl=impl)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask & padding)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


def test_prefix_extends_a_mask_that_broadcasts_over_keys_and_checks_shapes():
    torch.manual_seed(3)
    mha = pnn.MultiHeadAttention(8, 2).double()
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    prefix = (torch.randn(1, 2, 3, 4, dtype=torch.float64), torch.randn(1, 2, 3, 4, dtype=torch.float64))
    all_keys = torch.ones(2, 1, 4, 1, dtype=torch.bool)  # (B, 1, L_q, 1): every key allowed
    torch.testing.assert_close(mha(x, mask=all_keys, prefix=prefix), mha(x, prefix=prefix), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="prefix_k"):
        mha(x, prefix=(torch.randn(1, 2, 3, 5, dtype=torch.float64), prefix[1]))
