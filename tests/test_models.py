"""plmcourse.nn models and parameter counts: published sizes, counts equal to the built models,
and the behaviour each architecture promises (bidirectional, causal, cross-attention, padding)."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import pytest
import torch

from plmcourse import nn as pnn
from plmcourse.nn.param_count import PUBLISHED, albert_savings, bert_parameter_count

CUDA = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                         reason="needs a CUDA device")])
DEVICES = ["cpu", CUDA]


def n_params(module):
    return sum(p.numel() for p in module.parameters())


# ----------------------------------------------------------------------------
# Published sizes


@pytest.mark.parametrize("name, expected", [
    ("BERT-base", 109_482_240),
    ("BERT-large", 335_141_888),
    ("GPT-2 small", 124_439_808),
    ("GPT-2 medium", 354_823_168),
    ("GPT-2 large", 774_030_080),
    ("GPT-2 XL", 1_557_611_200),
])
def test_published_parameter_counts(name, expected):
    config, published, kind = PUBLISHED[name]
    assert kind == "exact" and published == expected
    assert pnn.parameter_count(config) == expected


@pytest.mark.parametrize("name", [n for n, (_, _, kind) in PUBLISHED.items() if kind == "paper"])
def test_rounded_paper_figures_are_close(name):
    config, published, _ = PUBLISHED[name]
    # ALBERT-xxlarge: the paper's 235M is 5.3% above the released checkpoint's 223M.
    assert abs(pnn.parameter_count(config) / published - 1) < 0.06


def test_gpt3_is_175_billion():
    assert round(pnn.parameter_count(PUBLISHED["GPT-3"][0]) / 1e9) == 175


def test_bart_base():
    config = pnn.BartConfig(vocab_size=50265, d_model=768, n_encoder_layers=6, n_decoder_layers=6, n_heads=12,
                            d_ff=3072, max_len=1026, norm_first=False)
    assert pnn.parameter_count(config) == 139_420_416  # facebook/bart-base


def test_albert_savings_are_the_formulas():
    config = PUBLISHED["ALBERT-base"][0]
    V, H, E, L = config.vocab_size, config.d_model, config.embedding_size, config.n_layers
    savings = albert_savings(config)
    # Every table (tokens, 512 positions, 2 segments) and the LayerNorm shrink from H to E wide;
    # the projection E -> H (with its bias) is the price.
    assert savings["factorised_embedding_saves"] == (V + 512 + 2) * (H - E) + 2 * (H - E) - (E * H + H)
    block = pnn.block_parameter_count(H, config.d_ff)
    assert savings["shared_layers_saves"] == (L - 1) * block
    assert savings["bert"] > 8 * savings["albert"]
    assert savings["albert"] == bert_parameter_count(config)


# ----------------------------------------------------------------------------
# Every tiny model has exactly the parameters the counter says


BERT_CONFIGS = [
    pnn.BertConfig(vocab_size=50, d_model=16, n_layers=2, n_heads=2, max_len=12),
    pnn.BertConfig(vocab_size=50, d_model=16, n_layers=3, n_heads=4, d_ff=40, max_len=12, type_vocab_size=0,
                   pooler=False),
    pnn.BertConfig(vocab_size=50, d_model=16, n_layers=3, n_heads=2, max_len=12, embedding_size=6,
                   share_layers=True),
    pnn.BertConfig(vocab_size=50, d_model=16, n_layers=2, n_heads=2, max_len=12, norm_first=True, type_vocab_size=3),
]


@pytest.mark.parametrize("config", BERT_CONFIGS, ids=["bert", "no-segments-no-pooler", "albert", "pre-ln"])
def test_bert_models_have_the_counted_parameters(config):
    assert n_params(pnn.Bert(config)) == pnn.parameter_count(config)
    assert n_params(pnn.BertForPreTraining(config)) == pnn.parameter_count(config, heads=True)
    classifier = pnn.BertForSequenceClassification(pnn.Bert(config), n_classes=3)
    assert n_params(classifier) == pnn.parameter_count(config) + config.d_model * 3 + 3


@pytest.mark.parametrize("config", [
    pnn.GPTConfig(vocab_size=40, d_model=16, n_layers=2, n_heads=2, max_len=10),
    pnn.GPTConfig(vocab_size=40, d_model=16, n_layers=1, n_heads=4, max_len=10, tie_embeddings=False,
                  final_norm=False, norm_first=False),
], ids=["gpt2-style", "gpt1-style-untied"])
def test_gpt_models_have_the_counted_parameters(config):
    assert n_params(pnn.GPT(config)) == pnn.parameter_count(config)


@pytest.mark.parametrize("config", [
    pnn.BartConfig(vocab_size=40, d_model=16, n_encoder_layers=2, n_decoder_layers=1, n_heads=2, max_len=10),
    pnn.BartConfig(vocab_size=40, d_model=16, n_heads=2, max_len=10, norm_first=False, embedding_norm=False),
], ids=["pre-ln", "post-ln"])
def test_bart_models_have_the_counted_parameters(config):
    assert n_params(pnn.Bart(config)) == pnn.parameter_count(config)


def test_albert_shares_one_block_and_ties_the_output_layer():
    config = BERT_CONFIGS[2]
    model = pnn.BertForPreTraining(config)
    assert len(model.bert.blocks) == 1
    ids = torch.randint(4, 50, (2, 7))
    logits, nsp = model(ids)
    assert logits.shape == (2, 7, 50) and nsp.shape == (2, 2)
    logits.sum().backward()
    assert model.bert.embeddings.token.weight.grad is not None  # reached through the tied output layer


# ----------------------------------------------------------------------------
# What each architecture promises


def test_bert_sees_both_directions_and_ignores_padding():
    torch.manual_seed(0)
    model = pnn.Bert(BERT_CONFIGS[0]).eval()
    ids = torch.randint(4, 50, (1, 8))
    later = ids.clone()
    later[0, -1] = (ids[0, -1] + 1 - 4) % 46 + 4
    with torch.no_grad():
        first = model(ids)[0][0, 0]
        assert not torch.allclose(first, model(later)[0][0, 0])  # a later token changes an earlier output
        padded = torch.cat([ids, torch.ones(1, 3, dtype=torch.long)], 1)
        mask = torch.tensor([[True] * 8 + [False] * 3])
        torch.testing.assert_close(model(padded, attention_mask=mask)[0][:, :8], model(ids)[0])


def test_segments_change_the_output():
    torch.manual_seed(0)
    model = pnn.Bert(BERT_CONFIGS[0]).eval()
    ids = torch.randint(4, 50, (1, 6))
    with torch.no_grad():
        a = model(ids, torch.zeros_like(ids))[0]
        b = model(ids, torch.tensor([[0, 0, 0, 1, 1, 1]]))[0]
    assert not torch.allclose(a, b)


def test_gpt_is_causal():
    torch.manual_seed(0)
    model = pnn.GPT(pnn.GPTConfig(vocab_size=40, d_model=16, n_layers=2, n_heads=2, max_len=10)).eval()
    ids = torch.randint(0, 40, (2, 9))
    changed = ids.clone()
    changed[:, 5:] = (changed[:, 5:] + 7) % 40
    with torch.no_grad():
        torch.testing.assert_close(model(ids)[:, :5], model(changed)[:, :5])
        assert not torch.allclose(model(ids)[:, 5:], model(changed)[:, 5:])


def test_bart_decoder_is_causal_reads_the_encoder_and_ignores_source_padding():
    torch.manual_seed(0)
    model = pnn.Bart(pnn.BartConfig(vocab_size=40, d_model=16, n_heads=2, max_len=12)).eval()
    src = torch.randint(3, 40, (1, 6))
    tgt = torch.randint(3, 40, (1, 7))
    with torch.no_grad():
        out = model(src, tgt)
        later = tgt.clone()
        later[0, 4:] = 5
        torch.testing.assert_close(model(src, later)[:, :4], out[:, :4])
        other_src = src.clone()
        other_src[0, 0] = (src[0, 0] + 1) % 40
        assert not torch.allclose(model(other_src, tgt)[:, 0], out[:, 0])  # cross-attention at work
        padded = torch.cat([src, torch.zeros(1, 4, dtype=torch.long)], 1)
        mask = torch.tensor([[True] * 6 + [False] * 4])
        torch.testing.assert_close(model(padded, tgt, src_mask=mask), out)


def test_position_limit_is_enforced():
    model = pnn.GPT(pnn.GPTConfig(vocab_size=10, d_model=8, n_layers=1, n_heads=2, max_len=4))
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 5, dtype=torch.long))


def test_init_std_sets_the_weight_scale():
    small = pnn.GPT(pnn.GPTConfig(vocab_size=500, d_model=64, n_layers=1, n_heads=4))
    large = pnn.GPT(pnn.GPTConfig(vocab_size=500, d_model=64, n_layers=1, n_heads=4, init_std=0.1))
    assert abs(small.token.weight.std().item() - 0.02) < 0.002
    assert abs(large.token.weight.std().item() - 0.1) < 0.01


@pytest.mark.parametrize("device", DEVICES)
def test_models_train_on_any_device(device):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    for model, run in [
        (pnn.BertForPreTraining(BERT_CONFIGS[0]), lambda m, x: pnn.mlm_loss(m(x)[0], x)),
        (pnn.GPT(pnn.GPTConfig(vocab_size=50, d_model=16, n_layers=1, n_heads=2, max_len=12)),
         lambda m, x: pnn.causal_lm_loss(m(x), x)),
        (pnn.Bart(pnn.BartConfig(vocab_size=50, d_model=16, n_heads=2, max_len=12)),
         lambda m, x: pnn.causal_lm_loss(m(x, x), x)),
    ]:
        model.to(device)
        ids = torch.randint(4, 50, (4, 10), generator=g).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        losses = []
        for _ in range(30):
            loss = run(model, ids)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert losses[-1] < 0.5 * losses[0], type(model).__name__
