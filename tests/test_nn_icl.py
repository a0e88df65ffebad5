"""In-context learning's pieces (notebook 11): the head scores by hand, the task generators'
promises, an attention-only GPT, its attention maps, and head ablation through a hook."""

import copy

import numpy as np
import pytest
import torch

from plmcourse import nn as pnn
from plmcourse import ref
from plmcourse.data import icl
from plmcourse.nn.param_count import parameter_count

CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")],
)
DEVICES = ["cpu", CUDA]


def attention_only(seed=0, device="cpu", positions="sinusoidal"):
    torch.manual_seed(seed)
    config = pnn.GPTConfig(vocab_size=12, d_model=16, n_layers=2, n_heads=4, d_ff=0, max_len=10, dropout=0.0,
                           positions=positions)
    return pnn.GPT(config).to(device).eval()


# ----------------------------------------------------------------------------
# The scores, by hand


def test_latest_earlier_occurrence_by_hand():
    assert ref.latest_earlier_occurrence([5, 7, 5, 5, 9, 7]).tolist() == [-1, -1, 0, 2, -1, 1]


def test_induction_score_by_hand():
    # tokens A B A B C A: queries with an earlier copy are t=2 (A, s=0), t=3 (B, s=1), t=5 (A, s=2)
    tokens = [0, 1, 0, 1, 2, 0]
    attention = np.zeros((2, 6, 6))
    attention[0, np.arange(6), np.arange(6)] = 1.0  # head 0 looks at itself
    attention[0, 2] = [0, 0.5, 0.5, 0, 0, 0]  # t=2 gives 0.5 to s+1 = 1
    attention[0, 3] = [0, 0, 0.25, 0.75, 0, 0]  # t=3 gives 0.25 to s+1 = 2
    attention[0, 5] = [0, 0, 0, 0.6, 0, 0.4]  # t=5: latest A before it is s=2, so s+1 = 3: 0.6
    attention[1] = np.tril(np.ones((6, 6))) / np.arange(1, 7)[:, None]  # head 1: uniform
    expected = [(0.5 + 0.25 + 0.6) / 3, (1 / 3 + 1 / 4 + 1 / 6) / 3]
    np.testing.assert_allclose(ref.induction_score(attention, tokens), expected)
    np.testing.assert_array_equal(ref.induction_score(attention, [0, 1, 2, 3, 4, 5]), [0.0, 0.0])


def test_previous_token_score_by_hand():
    attention = np.zeros((1, 4, 4))
    attention[0, 0, 0] = 1.0
    attention[0, 1] = [0.9, 0.1, 0, 0]
    attention[0, 2] = [0.0, 0.5, 0.5, 0]
    attention[0, 3] = [0.1, 0.1, 0.1, 0.7]
    np.testing.assert_allclose(ref.previous_token_score(attention), [(0.9 + 0.5 + 0.1) / 3])


def test_a_perfect_induction_head_scores_one_and_a_previous_token_head_does_not():
    tokens, periods = icl.repeated_sequences(np.random.default_rng(0), 1, vocab_size=1000, length=20)
    tokens = tokens[0]
    s = ref.latest_earlier_occurrence(tokens)
    T = len(tokens)
    induction, previous = np.zeros((1, T, T)), np.zeros((1, T, T))
    for t in range(T):
        induction[0, t, s[t] + 1 if s[t] >= 0 else t] = 1.0
        previous[0, t, max(t - 1, 0)] = 1.0
    assert ref.induction_score(induction, tokens)[0] == 1.0
    assert ref.previous_token_score(previous)[0] == 1.0
    assert ref.induction_score(previous, tokens)[0] == 0.0  # the period is at least 4


# ----------------------------------------------------------------------------
# The data


def test_mapping_sequences_keep_one_map_per_row_and_the_layout():
    rng = np.random.default_rng(0)
    seqs = icl.mapping_sequences(rng, 200, n_symbols=5, n_labels=3, n_pairs=12)
    assert seqs.shape == (200, 36) and seqs.dtype == np.int64
    text = ["".join(icl.ICL_VOCAB[i] for i in row) for row in seqs]
    maps = []
    for row in text:
        pairs = row.split(" ")[:-1]
        assert len(pairs) == 12 and all(len(p) == 2 and p[0] in icl.SYMBOLS and p[1] in "012" for p in pairs)
        mapping = {}
        for x, y in pairs:
            assert mapping.setdefault(x, y) == y  # one label per symbol within a sequence
        assert len(mapping) <= 5
        maps.append(tuple(sorted(mapping.items())))
    assert len(set(maps)) > 190  # and a fresh map for (nearly) every sequence


def test_mapping_episode_draws_from_its_map():
    examples, mapping = icl.mapping_episode(np.random.default_rng(3), n_symbols=4, n_labels=2, n_examples=30)
    assert len(mapping) == 4 and set(mapping.values()) <= {"0", "1"}
    assert all(mapping[x] == y for x, y in examples) and len(examples) == 30


def test_repeated_sequences_repeat_with_their_period():
    seqs, periods = icl.repeated_sequences(np.random.default_rng(1), 300, vocab_size=50, length=32, min_period=4)
    assert seqs.shape == (300, 32) and periods.min() >= 4 and periods.max() <= 16
    assert len(set(periods.tolist())) == 13  # every period from 4 to 16 is used
    for row, p in zip(seqs, periods):
        np.testing.assert_array_equal(row[p:], row[:-p])


def test_repeated_sequences_with_two_copies_go_on_at_random():
    seqs, periods = icl.repeated_sequences(np.random.default_rng(2), 300, vocab_size=1000, length=32, copies=2)
    for row, p in zip(seqs, periods):
        np.testing.assert_array_equal(row[p:2 * p], row[:p])
    # after the second copy the tokens are fresh: with 1000 symbols, almost none repeats the block
    tails = [set(row[2 * p:].tolist()) & set(row[:p].tolist()) for row, p in zip(seqs, periods) if 2 * p < 32]
    assert sum(map(len, tails)) < 0.05 * sum(32 - 2 * p for p in periods if 2 * p < 32)
    seqs1, _ = icl.repeated_sequences(np.random.default_rng(2), 300, vocab_size=1000, length=32, copies=1)
    assert not any(np.array_equal(row[p:2 * p], row[:p]) for row, p in zip(seqs1, periods) if p < 16)


def test_k_shot_prompt_by_hand():
    pool = [("sea otter", "loutre de mer"), ("cheese", "fromage"), ("mint", "menthe"), ("cat", "chat")]
    # default_rng(0).choice([0, 1, 3], size=2, replace=False) is [1, 3]: cheese, then cat
    expected = "cheese => fromage\ncat => chat\nmint => "
    prompt = icl.k_shot_prompt(pool, 2, 2, template="{x} => {y}", separator="\n", rng=np.random.default_rng(0))
    assert prompt == expected
    assert icl.k_shot_prompt(pool, 0, 0, template="Q: {x}\nA: {y}.") == "Q: sea otter\nA: "
    with pytest.raises(ValueError):
        icl.k_shot_prompt(pool, 0, 4)


# ----------------------------------------------------------------------------
# The model


def test_attention_only_gpt_has_no_feed_forward_and_is_counted():
    for positions in ("learned", "sinusoidal"):
        model = attention_only(positions=positions)
        assert all(block.ff is None and block.norm2 is None for block in model.blocks)
        assert sum(p.numel() for p in model.parameters()) == parameter_count(model.config)
    full = pnn.GPT(pnn.GPTConfig(vocab_size=12, d_model=16, n_layers=2, n_heads=4, max_len=10))
    assert sum(p.numel() for p in full.parameters()) == parameter_count(full.config)
    with pytest.raises(ValueError, match="positions"):
        pnn.GPTConfig(vocab_size=12, positions="rotary")


@pytest.mark.parametrize("device", DEVICES)
def test_attention_maps_are_causal_distributions_and_leave_the_output_alone(device):
    model = attention_only(device=device)
    ids = torch.randint(0, 12, (3, 10), generator=torch.Generator().manual_seed(0)).to(device)
    hidden, maps = model.hidden_states(ids, return_weights=True)
    assert len(maps) == 2 and all(m.shape == (3, 4, 10, 10) for m in maps)
    for m in maps:
        torch.testing.assert_close(m.sum(-1), torch.ones(3, 4, 10, device=device))
        assert torch.all(m.triu(1) == 0)
    torch.testing.assert_close(hidden, model.hidden_states(ids), atol=1e-5, rtol=1e-5)


def test_attention_only_model_with_every_head_ablated_sees_only_its_own_token():
    """With no head left, position t's logits depend on the token at t (and t) alone."""
    model = attention_only()
    a = torch.tensor([[1, 2, 3, 4, 5, 6]])
    b = torch.tensor([[7, 8, 9, 10, 11, 6]])
    everything = [(layer, head) for layer in range(2) for head in range(4)]
    with pnn.ablate_heads(model, everything):
        torch.testing.assert_close(model(a)[0, -1], model(b)[0, -1])
    assert not torch.allclose(model(a)[0, -1], model(b)[0, -1])


@pytest.mark.parametrize("device", DEVICES)
def test_ablating_a_head_is_zeroing_its_values_and_is_undone_after(device):
    model = attention_only(device=device)
    ids = torch.randint(0, 12, (2, 9), generator=torch.Generator().manual_seed(1)).to(device)
    before = model(ids)
    # The same ablation by surgery on a copy: head 2 of layer 1 gets zero values (so it writes zero).
    surgery = copy.deepcopy(model)
    qkv = surgery.blocks[1].self_attn.qkv_proj
    d, hs = surgery.blocks[1].self_attn.d_model, surgery.blocks[1].self_attn.head_dim
    with torch.no_grad():  # the value rows of head 2: in the last third, W_v
        qkv.weight[2 * d + 2 * hs:2 * d + 3 * hs] = 0.0
        qkv.bias[2 * d + 2 * hs:2 * d + 3 * hs] = 0.0
    with pnn.ablate_heads(model, [(1, 2)]):
        torch.testing.assert_close(model(ids), surgery(ids))
        model.blocks[1].self_attn.impl = "explicit"  # both attention paths are ablated
        torch.testing.assert_close(model(ids), surgery(ids))
        model.blocks[1].self_attn.impl = "fused"
    torch.testing.assert_close(model(ids), before)  # the hook is gone
    assert not torch.allclose(surgery(ids), before)
    with pnn.ablate_heads(model, []):
        torch.testing.assert_close(model(ids), before)


def test_ablate_heads_names_a_head_that_is_not_there():
    model = attention_only()
    with pytest.raises(ValueError, match="no head 4 in layer 0: the model has 2 layers of 4 heads"):
        with pnn.ablate_heads(model, [(0, 4)]):
            pass
    with pytest.raises(ValueError, match="no head 0 in layer 2"):
        with pnn.ablate_heads(model, [(2, 0)]):
            pass
    ids = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(model(ids), attention_only()(ids))  # nothing left hooked


def test_ablate_heads_works_on_bert_too():
    torch.manual_seed(0)
    bert = pnn.Bert(pnn.BertConfig(vocab_size=20, d_model=16, n_layers=2, n_heads=4, d_ff=32, max_len=8,
                                   dropout=0.0)).eval()
    ids = torch.randint(0, 20, (2, 8))
    before = bert(ids)[0]
    with pnn.ablate_heads(bert, [(0, 1), (1, 3)]):
        assert not torch.allclose(bert(ids)[0], before)
    torch.testing.assert_close(bert(ids)[0], before)
