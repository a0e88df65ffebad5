"""Notebook 09's later sections: where a soft prompt starts, He et al.'s unified view of prefix tuning
(checked by hand, against torch's attention and against MultiHeadAttention's prefix hook), the scaled
parallel adapter, and LoRA on an int8 base."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse.nn import peft, quantization
from plmcourse.nn.attention import merge_heads, split_heads

CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")],
)
DEVICES = ["cpu", CUDA]


def tiny_classifier(seed=0, device="cpu"):
    torch.manual_seed(seed)
    config = pnn.BertConfig(vocab_size=30, d_model=16, n_layers=2, n_heads=4, d_ff=32, max_len=24, dropout=0.0)
    return pnn.BertForSequenceClassification(pnn.Bert(config), n_classes=2, dropout=0.0).to(device)


def batch(device="cpu"):
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 30, (3, 7), generator=gen)
    mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3, [True] * 2 + [False] * 5])
    return ids.to(device), mask.to(device)


# ----------------------------------------------------------------------------
# The unified view: attention over [prefix; sentence] = a gate between two attentions


def test_gate_by_hand_equal_scores_give_lambda_p_over_p_plus_l():
    # q = 0: every score is 0, so lam = P / (P + L_k) and each attention is a plain average.
    q = torch.zeros(1, 1, 1, 2)
    k = torch.randn(1, 1, 3, 2)
    v = torch.tensor([[[[3.0], [6.0], [9.0]]]])
    prefix_k = torch.randn(1, 1, 1, 2)
    prefix_v = torch.tensor([[[[-2.0]]]])
    out, lam = peft.prefix_attention_as_gate(q, k, v, prefix_k, prefix_v)
    assert lam.item() == pytest.approx(1 / 4)
    assert out.item() == pytest.approx(3 / 4 * 6.0 + 1 / 4 * -2.0)


def test_gate_is_one_and_output_the_prefix_when_no_word_may_be_seen():
    q, k, v = torch.randn(1, 2, 2, 4), torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 5)
    prefix_k, prefix_v = torch.randn(1, 2, 2, 4), torch.randn(1, 2, 2, 5)
    mask = torch.tensor([[True, True, False], [False, False, False]])  # query 1 sees no word
    out, lam = peft.prefix_attention_as_gate(q, k, v, prefix_k, prefix_v, mask)
    assert torch.all(lam[:, :, 1] == 1)
    only = torch.softmax(q[:, :, 1:] @ prefix_k.transpose(-2, -1) / 2, -1) @ prefix_v
    torch.testing.assert_close(out[:, :, 1:], only)
    assert torch.all((lam[:, :, 0] > 0) & (lam[:, :, 0] < 1))


@pytest.mark.parametrize("device", DEVICES)
def test_gate_equals_torch_attention_over_the_concatenated_keys(device):
    gen = torch.Generator().manual_seed(0)
    B, H, L, P, d = 3, 2, 5, 4, 8
    q, k = torch.randn(B, H, L, d, generator=gen) * 3, torch.randn(B, H, L, d, generator=gen)  # large scores
    v = torch.randn(B, H, L, 6, generator=gen)
    prefix_k, prefix_v = torch.randn(1, H, P, d, generator=gen), torch.randn(1, H, P, 6, generator=gen)
    mask = torch.rand(B, 1, L, L, generator=gen) > 0.3
    mask[..., 0] = True
    q, k, v, prefix_k, prefix_v, mask = (t.to(device) for t in (q, k, v, prefix_k, prefix_v, mask))
    out, lam = peft.prefix_attention_as_gate(q, k, v, prefix_k, prefix_v, mask)
    keys = torch.cat([prefix_k.expand(B, -1, -1, -1), k], dim=2)
    values = torch.cat([prefix_v.expand(B, -1, -1, -1), v], dim=2)
    full_mask = torch.cat([torch.ones(B, 1, L, P, dtype=torch.bool, device=device), mask], dim=-1)
    expected = F.scaled_dot_product_attention(q, keys, values, attn_mask=full_mask)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    # lam is the attention weight that torch's softmax puts on the prefix columns
    weights = torch.softmax((q @ keys.transpose(-2, -1) / math.sqrt(d)).masked_fill(~full_mask, -math.inf), -1)
    torch.testing.assert_close(lam[..., 0], weights[..., :P].sum(-1), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_gate_rebuilds_a_prefix_tuned_attention_layer(device):
    """The decomposition, fed the layer's own q, k, v and trainable prefix, gives the layer's output."""
    model = tiny_classifier(device=device)
    peft.add_prefix(model.bert, n_prefix=3, hidden=8)
    layer = model.bert.blocks[0].self_attn  # a PrefixAttention
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    x = torch.randn(3, 7, 16, device=device)
    _, mask = batch(device)
    key_mask = mask[:, None, None, :]  # (B, 1, 1, L_k)
    attention = layer.attention
    with torch.no_grad():
        q, k, v = (split_heads(t, attention.n_heads) for t in attention.project(x))
        heads, lam = peft.prefix_attention_as_gate(q, k, v, *layer.prefixes(), key_mask)
        rebuilt = attention.out_proj(merge_heads(heads))
        torch.testing.assert_close(rebuilt, layer(x, mask=key_mask), atol=1e-5, rtol=1e-5)
    assert lam.shape == (3, attention.n_heads, 7, 1)


def test_unified_view_table_names_the_four_axes_for_every_method():
    for method in ("prefix tuning", "adapter", "LoRA", "parallel adapter, scaled"):
        assert {"Δh", "f", "inserted at", "form", "composition"} <= peft.UNIFIED_VIEW[method].keys()
    assert peft.UNIFIED_VIEW["adapter"]["form"] == "sequential"
    assert peft.UNIFIED_VIEW["LoRA"]["form"] == peft.UNIFIED_VIEW["prefix tuning"]["form"] == "parallel"


# ----------------------------------------------------------------------------
# The scaled parallel adapter


def test_parallel_adapter_starts_as_the_layer_and_adds_s_relu_down_up():
    model = tiny_classifier()
    before = copy.deepcopy(model)
    names = peft.add_parallel_adapters(model.bert, bottleneck=3, scale=4.0)
    assert names == ["blocks.0.ff", "blocks.1.ff"]
    ids, mask = batch()
    with torch.no_grad():
        torch.testing.assert_close(model(ids, attention_mask=mask), before(ids, attention_mask=mask), atol=0, rtol=0)
    wrapped = model.bert.blocks[0].ff
    with torch.no_grad():
        wrapped.up.weight.normal_()
        x = torch.randn(2, 5, 16)
        by_hand = wrapped.layer(x) + 4.0 * (torch.relu(x @ wrapped.down.weight.T + wrapped.down.bias)
                                            @ wrapped.up.weight.T + wrapped.up.bias)
        torch.testing.assert_close(wrapped(x), by_hand)
        wrapped.scale = 0.0  # s = 0: the layer alone, whatever the adapter holds
        torch.testing.assert_close(wrapped(x), wrapped.layer(x))


# ----------------------------------------------------------------------------
# Prompt tuning's start


def test_soft_prompt_start_draws_words_puts_class_words_first_and_scales_random():
    model = tiny_classifier()
    bert = model.bert
    vocabulary = peft.soft_prompt_start(bert, 4, "vocabulary", seed=3)
    assert vocabulary.shape == (4, 16)
    again = peft.soft_prompt_start(bert, 4, "vocabulary", seed=3)
    torch.testing.assert_close(vocabulary, again, atol=0, rtol=0)
    assert not torch.equal(vocabulary, peft.soft_prompt_start(bert, 4, "vocabulary", seed=4))
    # every row is the embedding (at its position) of one real word, no word twice
    with torch.no_grad():
        table = torch.stack([bert.embeddings(torch.full((1, 4), i))[0] for i in range(30)])  # (V, P, d)
    found = [int(((table[:, p] - vocabulary[p]).abs().amax(-1) < 1e-6).nonzero()[0]) for p in range(4)]
    assert len(set(found)) == 4 and min(found) >= 5
    classes = peft.soft_prompt_start(bert, 4, "class words", class_ids=[7, 9], seed=3)
    torch.testing.assert_close(classes[0], table[7, 0])
    torch.testing.assert_close(classes[1], table[9, 1])
    rest = [int(((table[:, p] - classes[p]).abs().amax(-1) < 1e-6).nonzero()[0]) for p in (2, 3)]
    assert not {7, 9} & set(rest)
    assert peft.soft_prompt_start(bert, 1, "class words", class_ids=[7, 9]).shape == (1, 16)
    random = peft.soft_prompt_start(bert, 16, "random", seed=3)
    words = peft.soft_prompt_start(bert, 16, "vocabulary", seed=3)
    assert random.pow(2).mean().sqrt().item() == pytest.approx(words.pow(2).mean().sqrt().item(), rel=1e-5)
    assert (table.flatten(0, 1)[:, None] - random).abs().amax(-1).min() > 0.1  # no row is a word's vector
    with pytest.raises(ValueError, match="class_ids"):
        peft.soft_prompt_start(bert, 2, "class words")
    with pytest.raises(ValueError, match="init"):
        peft.soft_prompt_start(bert, 2, "zeros")
    with pytest.raises(ValueError, match="only 25 words"):  # 30 ids, 5 of them special
        peft.soft_prompt_start(bert, 26, "vocabulary")


def test_soft_prompt_starts_where_told_and_only_the_prompt_trains():
    model = tiny_classifier()
    peft.freeze(model.bert)
    start = peft.soft_prompt_start(model.bert, 3, "random", seed=1)
    model.bert = peft.soft_prompt(model.bert, start)
    torch.testing.assert_close(model.bert.prompt.detach(), start, atol=0, rtol=0)
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable == ["bert.prompt", "classifier.weight", "classifier.bias"]
    ids, mask = batch()
    assert model.bert(ids, attention_mask=mask)[0].shape == (3, 10, 16)


# ----------------------------------------------------------------------------
# LoRA on an int8 base


def test_quantize_frozen_keeps_what_trains_in_float_and_the_function_close():
    model = tiny_classifier()
    peft.freeze(model.bert)
    peft.add_lora(model.bert, targets=("q_proj", "v_proj"), r=2, alpha=4)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, peft.QKVLoRA):
                m.B.normal_(0, 0.1)
    ids, mask = batch()
    with torch.no_grad():
        before = model(ids, attention_mask=mask)
    trainable_before = peft.trainable_state_dict(model)
    names = peft.quantize_frozen(model)
    assert "bert.blocks.0.self_attn.qkv_proj.base" in names and "bert.blocks.1.ff.linear2" in names
    assert "classifier" not in names  # the new head trains: it stays float
    assert isinstance(model.classifier, torch.nn.Linear)
    assert not any(isinstance(m, torch.nn.Linear) and not m.weight.requires_grad for m in model.modules())
    assert peft.trainable_state_dict(model).keys() == trainable_before.keys()
    base = model.bert.blocks[0].self_attn.qkv_proj.base
    assert base.q.dtype == torch.int8 and base.q.shape == (48, 16)
    with torch.no_grad():
        after = model(ids, attention_mask=mask)
    gap = (after - before).abs().max().item()
    assert 0 < gap < 0.05, gap  # int8 rounding: changed, but little
    # gradients reach LoRA's A and B in the first layer through the int8 layers above them
    F.cross_entropy(model(ids, attention_mask=mask), torch.tensor([0, 1, 0])).backward()
    first = model.bert.blocks[0].self_attn.qkv_proj
    assert first.A.grad is not None and first.A.grad.abs().sum() > 0
    # four bytes per weight become one (plus a float scale per output row)
    fp32 = 4 * 48 * 16
    assert quantization.model_bytes(base) == 48 * 16 + 4 * 48 + 4 * 48  # q, scale, bias
    assert quantization.model_bytes(base) < fp32 / 2
