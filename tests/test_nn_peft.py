"""Parameter-efficient fine-tuning: the NumPy reference by hand, PyTorch against it and against torch's
own attention, each method's promise (starts as the base, trains only its own parameters), merging,
and saving only what trains."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse import ref
from plmcourse.nn import peft

CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")],
)
DEVICES = ["cpu", CUDA]


def tiny_classifier(seed=0, device="cpu", dtype=torch.float32):
    torch.manual_seed(seed)
    config = pnn.BertConfig(vocab_size=30, d_model=16, n_layers=2, n_heads=4, d_ff=32, max_len=12, dropout=0.0)
    return pnn.BertForSequenceClassification(pnn.Bert(config), n_classes=3, dropout=0.0).to(device, dtype)


def batch(device="cpu"):
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(4, 30, (3, 7), generator=gen)
    mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3, [True] * 2 + [False] * 5])
    return ids.to(device), mask.to(device)


# ----------------------------------------------------------------------------
# The NumPy reference


def test_attention_with_prefix_by_hand():
    # q = 0: every score is 0, so each query spreads its weight evenly over P + L_k = 3 positions.
    q = np.zeros((1, 1, 2, 2))
    k = np.ones((1, 1, 2, 2))
    v = np.array([[[[3.0, 0.0], [6.0, 0.0]]]])
    prefix_v = np.array([[[0.0, 9.0]]])  # (H=1, P=1, d_v=2)
    out, weights = ref.attention_with_prefix(q, k, v, np.zeros((1, 1, 2)), prefix_v)
    np.testing.assert_allclose(weights, np.full((1, 1, 2, 3), 1 / 3))
    np.testing.assert_allclose(out, np.broadcast_to([3.0, 3.0], (1, 1, 2, 2)))
    # Query 1 may see no key of its own: it still sees the prefix, and only the prefix.
    mask = np.array([[True, False], [False, False]])
    out, weights = ref.attention_with_prefix(q, k, v, np.zeros((1, 1, 2)), prefix_v, mask)
    np.testing.assert_allclose(weights[0, 0], [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(out[0, 0], [[1.5, 4.5], [0.0, 9.0]])


def test_attention_with_prefix_matches_torch_with_the_prefix_concatenated():
    rng = np.random.default_rng(0)
    B, H, L_q, L_k, P, d = 2, 3, 4, 5, 2, 6
    q, k, v = (rng.standard_normal(s) for s in ((B, H, L_q, d), (B, H, L_k, d), (B, H, L_k, d)))
    pk, pv = rng.standard_normal((H, P, d)), rng.standard_normal((H, P, d))
    mask = rng.random((B, 1, L_q, L_k)) < 0.6
    out, weights = ref.attention_with_prefix(q, k, v, pk, pv, mask)
    full_k = torch.tensor(np.concatenate([np.broadcast_to(pk, (B, H, P, d)), k], axis=2))
    full_v = torch.tensor(np.concatenate([np.broadcast_to(pv, (B, H, P, d)), v], axis=2))
    full_mask = torch.tensor(np.concatenate([np.ones((B, 1, L_q, P), bool), mask], axis=-1))
    expected = F.scaled_dot_product_attention(torch.tensor(q), full_k, full_v, attn_mask=full_mask)
    np.testing.assert_allclose(out, expected.numpy(), atol=1e-12)
    assert weights.shape == (B, H, L_q, P + L_k)
    np.testing.assert_allclose(weights.sum(-1), 1.0)


@pytest.mark.parametrize("device", DEVICES)
def test_multi_head_attention_prefix_hook_matches_the_reference(device):
    """With identity projections, MultiHeadAttention(x, prefix=...) is attention_with_prefix on the split heads."""
    d, H, P = 8, 2, 3
    mha = pnn.MultiHeadAttention(d, H).to(device, torch.float64)
    with torch.no_grad():
        mha.qkv_proj.weight.copy_(torch.eye(d).repeat(3, 1))  # W_q = W_k = W_v = I
        mha.out_proj.weight.copy_(torch.eye(d))
        mha.qkv_proj.bias.zero_()
        mha.out_proj.bias.zero_()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, d))
    pk, pv = rng.standard_normal((H, P, d // H)), rng.standard_normal((H, P, d // H))
    lengths = [5, 2]
    key_mask = np.arange(5)[None, :] < np.array(lengths)[:, None]  # (B, L)
    mask = key_mask[:, None, None, :]
    got = mha(torch.tensor(x, device=device), mask=torch.tensor(mask, device=device),
              prefix=(torch.tensor(pk, device=device)[None], torch.tensor(pv, device=device)[None]))
    heads = ref.split_heads(x, H)
    out, _ = ref.attention_with_prefix(heads, heads, heads, pk, pv, mask)
    np.testing.assert_allclose(got.detach().cpu().numpy(), ref.merge_heads(out), atol=1e-12)


def test_lora_reference_merge_is_the_same_map():
    rng = np.random.default_rng(2)
    x, W, b = rng.standard_normal((4, 5)), rng.standard_normal((3, 5)), rng.standard_normal(3)
    A, B = rng.standard_normal((2, 5)), rng.standard_normal((3, 2))
    np.testing.assert_allclose(ref.lora_forward(x, W, b, A, B, alpha=6.0),
                               x @ ref.lora_merge(W, A, B, alpha=6.0).T + b, atol=1e-12)
    # By hand: r = 1, alpha = 2 (scale 2), W = 0, b = 0: y = 2 (a . x) B.
    y = ref.lora_forward(np.array([[1.0, 2.0]]), np.zeros((1, 2)), None, np.array([[1.0, 1.0]]),
                         np.array([[0.5]]), alpha=2.0)
    np.testing.assert_array_equal(y, [[3.0]])


# ----------------------------------------------------------------------------
# LoRA


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bias", [True, False])
def test_lora_linear_starts_as_the_base_trains_only_a_and_b_and_matches_the_reference(device, bias):
    torch.manual_seed(0)
    base = torch.nn.Linear(5, 3, bias=bias).to(device, torch.float64)
    x = torch.randn(2, 4, 5, dtype=torch.float64, device=device)
    layer = pnn.LoRALinear(base, r=2, alpha=6.0)
    assert torch.equal(layer(x), base(x))  # B = 0
    assert [name for name, p in layer.named_parameters() if p.requires_grad] == ["A", "B"]
    assert layer.A.shape == (2, 5) and layer.B.shape == (3, 2)
    with torch.no_grad():
        layer.B.normal_()
    A, B = layer.A.detach().cpu().numpy(), layer.B.detach().cpu().numpy()
    W, b = base.weight.detach().cpu().numpy(), None if not bias else base.bias.detach().cpu().numpy()
    np.testing.assert_allclose(layer(x).detach().cpu().numpy(), ref.lora_forward(x.cpu().numpy(), W, b, A, B, 6.0),
                               atol=1e-12)
    merged = layer.merge()
    assert type(merged) is torch.nn.Linear and (merged.bias is None) == (not bias)
    np.testing.assert_allclose(merged.weight.detach().cpu().numpy(), ref.lora_merge(W, A, B, 6.0), atol=1e-12)
    torch.testing.assert_close(merged(x), layer(x), atol=1e-12, rtol=0)
    np.testing.assert_array_equal(base.weight.detach().cpu().numpy(), W)  # merging left the base alone


def test_lora_gradients_b_first_then_both():
    base = torch.nn.Linear(4, 3)
    layer = pnn.LoRALinear(base, r=2, alpha=2.0)
    layer(torch.randn(5, 4)).sum().backward()
    assert base.weight.grad is None and base.bias.grad is None
    assert torch.count_nonzero(layer.A.grad) == 0  # B = 0 blocks A's gradient at the start
    assert torch.count_nonzero(layer.B.grad) > 0  # ... but not B's: training can begin


def test_lora_dropout_acts_on_the_low_rank_input_and_only_in_training():
    torch.manual_seed(0)
    base = torch.nn.Linear(6, 4).double()
    layer = pnn.LoRALinear(base, r=2, alpha=4.0, dropout=0.5)
    with torch.no_grad():
        layer.B.normal_()
    x = torch.zeros(200, 6, dtype=torch.float64)
    x[torch.arange(200), torch.arange(200) % 6] = 1.0  # one nonzero entry per row
    update = (layer.eval()(x) - base(x)).detach()
    train_update = (layer.train()(x) - base(x)).detach()
    # Each row's input is kept (scaled by 1 / (1 - p)) or dropped whole: the update is 2x or 0.
    doubled = torch.isclose(train_update, 2 * update, atol=1e-12).all(1)
    dropped = (train_update.abs() < 1e-12).all(1)
    assert (doubled | dropped).all() and doubled.any() and dropped.any()


def test_a_rank_one_lora_learns_a_rank_one_change():
    torch.manual_seed(0)
    base = torch.nn.Linear(8, 8, bias=False)
    u, v = torch.randn(8, 1), torch.randn(1, 8)
    target = base.weight.detach() + u @ v / 4  # a rank-1 change of the weight
    layer = pnn.LoRALinear(base, r=1, alpha=1.0)
    optimizer = torch.optim.Adam([layer.A, layer.B], lr=0.05)
    x = torch.randn(256, 8)
    for _ in range(400):
        loss = F.mse_loss(layer(x), x @ target.T)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 1e-4
    torch.testing.assert_close(layer.merge().weight, target, atol=1e-2, rtol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_add_lora_wraps_only_the_targets_and_merge_lora_restores_a_plain_model(device):
    model = tiny_classifier(device=device, dtype=torch.float64)
    ids, mask = batch(device)
    before = model(ids, attention_mask=mask)
    base_total = peft.count_trainable_parameters(model)[1]
    peft.freeze(model.bert)
    names = peft.add_lora(model.bert, targets=("q_proj", "v_proj"), r=2, alpha=4)
    assert names == [f"blocks.{i}.self_attn.qkv_proj" for i in range(2)]
    assert all(model.bert.blocks[i].self_attn.qkv_proj.parts == ("q", "v") for i in range(2))
    torch.testing.assert_close(model(ids, attention_mask=mask), before, atol=0, rtol=0)
    # q and v of 2 layers, each 16 x 16, r = 2: 4 * 2 * (16 + 16); plus the head (16 * 3 + 3).
    assert peft.count_trainable_parameters(model) == (4 * 2 * 32 + 51, base_total + 4 * 2 * 32)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (pnn.LoRALinear, peft.QKVLoRA)):
                m.B.normal_()
    adapted = model(ids, attention_mask=mask)
    assert not torch.allclose(adapted, before)
    peft.merge_lora(model)
    assert not any(isinstance(m, pnn.LoRALinear) for m in model.modules())
    assert peft.count_trainable_parameters(model)[1] == base_total
    torch.testing.assert_close(model(ids, attention_mask=mask), adapted, atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="no nn.Linear"):
        peft.add_lora(model, targets=("nothing_by_this_name",))


# ----------------------------------------------------------------------------
# Counting, BitFit, saving


def test_count_trainable_parameters_counts_a_tied_tensor_once_and_no_buffers():
    model = torch.nn.Module()
    model.embed = torch.nn.Embedding(10, 4)
    model.out = torch.nn.Linear(4, 10, bias=False)
    model.out.weight = model.embed.weight  # tied, as GPT-2's output layer
    model.norm = torch.nn.BatchNorm1d(4)  # 8 parameters, 9 buffer entries
    model.norm.weight.requires_grad_(False)
    assert pnn.count_trainable_parameters(model) == (40 + 4, 40 + 8)


def test_bitfit_trains_exactly_the_biases():
    model = tiny_classifier()
    names = peft.bitfit(model.bert)
    biases = sum(p.numel() for name, p in model.bert.named_parameters() if name.endswith("bias"))
    assert names and all(name.endswith("bias") for name in names)
    assert peft.count_trainable_parameters(model.bert)[0] == biases
    assert all(p.requires_grad for p in model.classifier.parameters())  # bitfit(model.bert) left the head alone


def test_save_and_load_trainable_round_trip_and_refuse_a_mismatch(tmp_path):
    model = tiny_classifier()
    peft.freeze(model.bert)
    peft.add_lora(model.bert, r=2, alpha=4)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.normal_()
    size = peft.save_trainable(model, tmp_path / "task.safetensors")
    assert size == 4 * peft.count_trainable_parameters(model)[0]
    saved = peft.trainable_state_dict(model)
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.parameters():
            if p.requires_grad:
                p.zero_()
    peft.load_trainable(other, tmp_path / "task.safetensors")
    assert all(torch.equal(saved[name], p) for name, p in other.named_parameters() if p.requires_grad)
    with pytest.raises(KeyError, match="missing"):
        peft.load_trainable(other, {k: v for k, v in saved.items() if "classifier" not in k})
    with pytest.raises(ValueError, match="saved shape"):
        peft.load_trainable(other, {k: v[:1] if k == "classifier.bias" else v for k, v in saved.items()})


# ----------------------------------------------------------------------------
# Adapters, prefixes, soft prompts


@pytest.mark.parametrize("device", DEVICES)
def test_adapters_start_as_the_identity_and_sit_after_attention_and_the_feed_forward(device):
    model = tiny_classifier(device=device)
    ids, mask = batch(device)
    before = model(ids, attention_mask=mask)
    peft.freeze(model.bert)
    names = peft.add_adapters(model.bert, bottleneck=4)
    assert names == [f"blocks.{i}.{s}.adapter" for i in range(2) for s in ("self_attn", "ff")]
    torch.testing.assert_close(model(ids, attention_mask=mask), before, atol=0, rtol=0)
    hidden, weights = model.bert.all_layers(ids, attention_mask=mask, return_weights=True)  # tuple outputs pass
    assert weights[0].shape == (3, 4, 7, 7)
    per_adapter = 16 * 4 + 4 + 4 * 16 + 16
    assert peft.count_trainable_parameters(model.bert)[0] == 4 * per_adapter
    with torch.no_grad():
        model.bert.blocks[0].ff.adapter.up.weight.normal_()
    assert not torch.allclose(model(ids, attention_mask=mask), before)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("hidden", [None, 8])
def test_prefix_changes_every_query_but_not_what_padding_hides(device, hidden):
    model = tiny_classifier(device=device)
    ids, mask = batch(device)
    before = model.bert(ids, attention_mask=mask)[0]
    peft.freeze(model.bert)
    peft.add_prefix(model.bert, n_prefix=3, hidden=hidden)
    after = model.bert(ids, attention_mask=mask)[0]
    assert not torch.isclose(after, before).all(-1).any()  # every position sees the prefix
    # Padded keys stay hidden: changing the padded ids changes no real position.
    other = ids.clone()
    other[~mask] = 5
    real = model.bert(other, attention_mask=mask)[0]
    torch.testing.assert_close(real[mask], after[mask])
    attention = model.bert.blocks[0].self_attn
    trainable = peft.count_trainable_parameters(attention)[0]
    assert trainable == (2 * 3 * 16 if hidden is None else 3 * 16 + (16 * 8 + 8) + (8 * 32 + 32))
    attention.fold()
    torch.testing.assert_close(model.bert(ids, attention_mask=mask)[0], after)
    assert peft.count_trainable_parameters(attention)[0] == 2 * 3 * 16


@pytest.mark.parametrize("device", DEVICES)
def test_soft_prompt_sits_after_cls_and_only_it_trains(device):
    model = tiny_classifier(device=device)
    ids, mask = batch(device)
    bert = peft.freeze(model.bert)
    model.bert = peft.SoftPrompt(bert, n_prompt=4)
    hidden, pooled = model.bert(ids, attention_mask=mask)
    assert hidden.shape == (3, 1 + 4 + 6, 16)
    assert peft.count_trainable_parameters(model.bert)[0] == 4 * 16
    # [CLS], the prompt, then the rest; the mask grows by 4 True columns to match.
    x = torch.cat([bert.embeddings(ids)[:, :1], model.bert.prompt.expand(3, -1, -1), bert.embeddings(ids)[:, 1:]], 1)
    long_mask = torch.cat([mask[:, :1], torch.ones(3, 4, dtype=torch.bool, device=device), mask[:, 1:]], 1)
    torch.testing.assert_close(hidden, bert.from_embeddings(x, long_mask)[0])
    other = ids.clone()
    other[~mask] = 5  # padding stays masked after the prompt is inserted
    torch.testing.assert_close(model.bert(other, attention_mask=mask)[1], pooled)
    model(ids, attention_mask=mask).sum().backward()
    assert model.bert.prompt.grad is not None and bert.embeddings.token.weight.grad is None


def test_one_cpu_thread_restores_the_setting_even_after_an_error():
    threads = torch.get_num_threads()
    with pytest.raises(RuntimeError):
        with pnn.one_cpu_thread("cpu"):
            assert torch.get_num_threads() == 1
            raise RuntimeError
    assert torch.get_num_threads() == threads


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("parts", [("q", "v"), ("k",), ("q", "k", "v")])
def test_qkv_lora_is_lora_on_separate_projections(device, parts):
    """QKVLoRA on a fused qkv_proj = a LoRALinear on each chosen third, the others untouched."""
    torch.manual_seed(0)
    d, d_in, r, alpha = 6, 5, 2, 3.0
    base = torch.nn.Linear(d_in, 3 * d).to(device, torch.float64)
    layer = peft.QKVLoRA(base, parts, r=r, alpha=alpha)
    assert layer.A.shape == (len(parts), r, d_in) and layer.B.shape == (len(parts), d, r)
    x = torch.randn(4, d_in, dtype=torch.float64, device=device)
    torch.testing.assert_close(layer(x), base(x), atol=0, rtol=0)  # B = 0: the base layer at first
    with torch.no_grad():
        layer.B.normal_()
    out = layer(x).split(d, dim=-1)
    for third, (name, w, b) in enumerate(zip("qkv", base.weight.split(d), base.bias.split(d))):
        separate = torch.nn.Linear(d_in, d).to(device, torch.float64)
        with torch.no_grad():
            separate.weight.copy_(w)
            separate.bias.copy_(b)
        expected = separate(x)
        if name in parts:
            lora = pnn.LoRALinear(separate, r=r, alpha=alpha)
            i = parts.index(name)
            with torch.no_grad():
                lora.A.copy_(layer.A[i])
                lora.B.copy_(layer.B[i])
            expected = lora(x)
        torch.testing.assert_close(out[third], expected, atol=1e-12, rtol=0)
    merged = layer.merge()
    torch.testing.assert_close(merged(x), layer(x), atol=1e-12, rtol=0)
    assert not any(p.requires_grad for p in layer.base.parameters())
    with pytest.raises(ValueError, match="parts"):
        peft.QKVLoRA(base, ("q", "q"))


def test_lora_reaches_cross_attention_through_the_fused_weight():
    """A Bart's cross-attention slices qkv_proj.weight: under LoRA that is the adapted weight."""
    torch.manual_seed(1)
    model = pnn.Bart(pnn.BartConfig(vocab_size=20, d_model=16, n_heads=2, dropout=0.0)).double().eval()
    src, tgt = torch.randint(0, 20, (2, 5)), torch.randint(0, 20, (2, 4))
    peft.add_lora(model, targets=("q_proj", "v_proj"), r=2, alpha=4)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, peft.QKVLoRA):
                m.B.normal_()
        adapted = model(src, tgt)
        merged = peft.merge_lora(model)(src, tgt)
    torch.testing.assert_close(adapted, merged, atol=1e-10, rtol=0)
