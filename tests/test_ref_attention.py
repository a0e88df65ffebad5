"""plmcourse.ref against small cases worked out by hand."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

import numpy as np
import pytest

from plmcourse import ref


def rng(seed=0):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------- softmax


def test_softmax_hand_values():
    out = ref.softmax(np.array([0.0, math.log(3.0)]))
    np.testing.assert_allclose(out, [0.25, 0.75], rtol=0, atol=1e-15)


def test_softmax_large_logits_are_stable():
    out = ref.softmax(np.array([1e4, 1e4, 1e4 - math.log(2.0)]))
    np.testing.assert_allclose(out, [0.4, 0.4, 0.2], rtol=0, atol=1e-12)
    assert np.all(np.isfinite(ref.softmax(np.array([[1e4, -1e4], [-1e4, 1e4]]))))


def test_softmax_handles_minus_inf_and_all_minus_inf_rows():
    x = np.array([[1.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])
    out = ref.softmax(x)
    np.testing.assert_array_equal(out, [[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]])


def test_softmax_axis_and_input_not_mutated():
    x = rng().normal(size=(3, 4))
    x_copy = x.copy()
    out = ref.softmax(x, axis=0)
    np.testing.assert_array_equal(x, x_copy)
    np.testing.assert_allclose(out.sum(axis=0), np.ones(4), rtol=0, atol=1e-15)
    np.testing.assert_allclose(out[:, 0], np.exp(x[:, 0]) / np.exp(x[:, 0]).sum(), rtol=0, atol=1e-15)


# ---------------------------------------------------------------- attention


def test_attention_2x2_by_hand():
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    k = np.array([[1.0, 0.0], [0.0, 1.0]])
    v = np.array([[1.0, 2.0], [3.0, 4.0]])
    # scores = q k^T / sqrt(2) = I / sqrt(2): each query prefers its own key with
    # weight a = e^s / (e^s + 1), s = 1/sqrt(2).
    s = 1.0 / math.sqrt(2.0)
    a = math.exp(s) / (math.exp(s) + 1.0)
    out, w = ref.scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(w, [[a, 1 - a], [1 - a, a]], rtol=0, atol=1e-15)
    np.testing.assert_allclose(out[0], [a * 1 + (1 - a) * 3, a * 2 + (1 - a) * 4], rtol=0, atol=1e-15)
    np.testing.assert_allclose(out[1], [(1 - a) * 1 + a * 3, (1 - a) * 2 + a * 4], rtol=0, atol=1e-15)


def test_one_hot_query_picks_a_value_row():
    k = np.eye(3)
    v = rng(1).normal(size=(3, 5))
    q = 100.0 * np.eye(3)[[2, 0]]  # query 0 points at key 2, query 1 at key 0
    out, w = ref.scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(w, np.eye(3)[[2, 0]], rtol=0, atol=1e-20)
    np.testing.assert_allclose(out, v[[2, 0]], rtol=0, atol=1e-12)


def test_attention_rows_sum_to_one_and_shapes():
    r = rng(2)
    q, k, v = r.normal(size=(2, 3, 4, 8)), r.normal(size=(2, 3, 6, 8)), r.normal(size=(2, 3, 6, 5))
    out, w = ref.scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 4, 5) and w.shape == (2, 3, 4, 6)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=0, atol=1e-14)
    # the same as a loop over batch and heads
    b, h = 1, 2
    scores = q[b, h] @ k[b, h].T / math.sqrt(8)
    np.testing.assert_allclose(out[b, h], ref.softmax(scores) @ v[b, h], rtol=0, atol=1e-14)


def test_causal_mask():
    np.testing.assert_array_equal(
        ref.causal_mask(3), [[True, False, False], [True, True, False], [True, True, True]]
    )
    assert ref.causal_mask(3).dtype == bool


def test_causal_mask_broadcasts_over_batch_and_heads():
    r = rng(3)
    q, k, v = (r.normal(size=(2, 3, 4, 8)) for _ in range(3))
    out, w = ref.scaled_dot_product_attention(q, k, v, ref.causal_mask(4))
    assert np.all(np.triu(w, k=1) == 0.0)  # no weight on a future key, any batch/head
    # the first query can only see the first key: its output is v's first row
    np.testing.assert_allclose(out[..., 0, :], v[..., 0, :], rtol=0, atol=1e-15)
    # changing a future value leaves the earlier outputs alone
    v2 = v.copy()
    v2[..., 3, :] += 10.0
    out2, _ = ref.scaled_dot_product_attention(q, k, v2, ref.causal_mask(4))
    np.testing.assert_array_equal(out2[..., :3, :], out[..., :3, :])
    assert not np.allclose(out2[..., 3, :], out[..., 3, :])


def test_padding_mask_shape_and_values():
    m = ref.padding_mask([2, 4, 0], 4)
    assert m.shape == (3, 1, 1, 4) and m.dtype == bool
    np.testing.assert_array_equal(
        m[:, 0, 0], [[True, True, False, False], [True, True, True, True], [False] * 4]
    )
    with pytest.raises(ValueError):
        ref.padding_mask([5], 4)


def test_padding_mask_ignores_padded_keys_in_every_head():
    r = rng(4)
    B, H, L, d = 2, 3, 5, 4
    q, k, v = (r.normal(size=(B, H, L, d)) for _ in range(3))
    lengths = [3, 5]
    out, w = ref.scaled_dot_product_attention(q, k, v, ref.padding_mask(lengths, L))
    assert np.all(w[0, :, :, 3:] == 0.0)
    # sequence 0 behaves as if it had only 3 keys
    out_short, _ = ref.scaled_dot_product_attention(q[0], k[0, :, :3], v[0, :, :3])
    np.testing.assert_allclose(out[0], out_short, rtol=0, atol=1e-14)
    # sequence 1 has no padding: same as no mask at all
    out_full, _ = ref.scaled_dot_product_attention(q[1], k[1], v[1])
    np.testing.assert_allclose(out[1], out_full, rtol=0, atol=1e-14)


def test_fully_masked_row_gives_zeros():
    r = rng(5)
    q, k, v = r.normal(size=(3, 4)), r.normal(size=(3, 4)), r.normal(size=(3, 2))
    mask = np.ones((3, 3), dtype=bool)
    mask[1] = False
    out, w = ref.scaled_dot_product_attention(q, k, v, mask)
    np.testing.assert_array_equal(w[1], 0.0)
    np.testing.assert_array_equal(out[1], 0.0)
    np.testing.assert_allclose(w[[0, 2]].sum(-1), 1.0, rtol=0, atol=1e-15)


def test_attention_shape_errors():
    z = np.zeros
    with pytest.raises(ValueError, match="d_k"):
        ref.scaled_dot_product_attention(z((2, 4)), z((3, 5)), z((3, 5)))
    with pytest.raises(ValueError, match="L_k"):
        ref.scaled_dot_product_attention(z((2, 4)), z((3, 4)), z((2, 4)))
    with pytest.raises(ValueError, match="broadcast"):
        ref.scaled_dot_product_attention(z((2, 4)), z((3, 4)), z((3, 4)), np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="bool"):
        ref.scaled_dot_product_attention(z((2, 4)), z((3, 4)), z((3, 4)), np.ones((2, 3)))


# ---------------------------------------------------------------- heads


def test_split_and_merge_heads():
    x = np.arange(2 * 3 * 6, dtype=float).reshape(2, 3, 6)
    s = ref.split_heads(x, 2)
    assert s.shape == (2, 2, 3, 3)
    np.testing.assert_array_equal(s[1, 0, 2], x[1, 2, 0:3])  # head 0: features 0..2
    np.testing.assert_array_equal(s[1, 1, 2], x[1, 2, 3:6])  # head 1: features 3..5
    np.testing.assert_array_equal(ref.merge_heads(s), x)
    with pytest.raises(ValueError, match="divisible"):
        ref.split_heads(x, 4)


def test_multi_head_attention_equals_heads_computed_one_by_one():
    r = rng(6)
    B, Lq, Lk, d, H = 2, 3, 5, 8, 2
    x_q, x_kv = r.normal(size=(B, Lq, d)), r.normal(size=(B, Lk, d))
    w_q, w_k, w_v, w_o = (r.normal(size=(d, d)) / math.sqrt(d) for _ in range(4))
    mask = ref.padding_mask([5, 2], Lk)
    out, w = ref.multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, H, mask)
    assert out.shape == (B, Lq, d) and w.shape == (B, H, Lq, Lk)
    hs = d // H
    heads = []
    for h in range(H):
        cols = slice(h * hs, (h + 1) * hs)
        o, _ = ref.scaled_dot_product_attention(x_q @ w_q[:, cols], x_kv @ w_k[:, cols], x_kv @ w_v[:, cols], mask[:, 0])
        heads.append(o)
    np.testing.assert_allclose(out, np.concatenate(heads, axis=-1) @ w_o, rtol=0, atol=1e-13)


def test_multi_head_attention_errors():
    x = np.zeros((1, 2, 6))
    w = np.zeros((6, 6))
    with pytest.raises(ValueError, match="divisible"):
        ref.multi_head_attention(x, x, w, w, w, w, 4)
    with pytest.raises(ValueError, match="w_k"):
        ref.multi_head_attention(x, x, w, np.zeros((6, 4)), w, w, 2)


# ---------------------------------------------------------------- block pieces


def test_layer_norm_by_hand():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    # mean 2.5, biased variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25
    norm = (x - 2.5) / math.sqrt(1.25 + 1e-5)
    gamma, beta = np.array([1.0, 1.0, 2.0, 2.0]), np.array([0.0, 1.0, 0.0, -1.0])
    np.testing.assert_allclose(ref.layer_norm(x, gamma, beta), norm * gamma + beta, rtol=0, atol=1e-15)
    # a constant vector: eps keeps it finite (all zeros before the shift)
    np.testing.assert_allclose(ref.layer_norm(np.full(4, 7.0), np.ones(4), beta), beta, rtol=0, atol=1e-12)


def test_gelu_known_values():
    x = np.array([-1.0, 0.0, 1.0, 3.0])
    # x * Phi(x) with Phi(1) = 0.8413447460685429, Phi(3) = 0.9986501019683699
    expected = [-(1 - 0.8413447460685429), 0.0, 0.8413447460685429, 3 * 0.9986501019683699]
    np.testing.assert_allclose(ref.gelu(x), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ref.gelu(np.array([1.0]), approximate="tanh"), [0.8411919906082768], rtol=0, atol=1e-12)
    with pytest.raises(ValueError):
        ref.gelu(x, approximate="fast")


def test_feed_forward_relu_by_hand():
    x = np.array([[1.0, -2.0]])
    w1, b1 = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]), np.array([0.0, 0.0, 0.5])
    w2, b2 = np.ones((3, 2)), np.array([0.1, -0.1])
    # x @ w1 + b1 = [1, -2, -0.5] -> relu [1, 0, 0] -> @ ones + b2 = [1.1, 0.9]
    np.testing.assert_allclose(ref.feed_forward(x, w1, b1, w2, b2, "relu"), [[1.1, 0.9]], rtol=0, atol=1e-15)
    with pytest.raises(ValueError):
        ref.feed_forward(x, w1, b1, w2, b2, "swish")


def test_sinusoidal_positions_known_values():
    pe = ref.sinusoidal_positions(3, 4)
    assert pe.shape == (3, 4) and pe.dtype == np.float64
    np.testing.assert_array_equal(pe[0], [0.0, 1.0, 0.0, 1.0])
    # d = 4: column pair 0 has frequency 1, column pair 1 has 1/10000^(2/4) = 1/100
    np.testing.assert_allclose(pe[1], [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], rtol=0, atol=1e-15)
    np.testing.assert_allclose(pe[2], [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)], rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="even"):
        ref.sinusoidal_positions(3, 5)
