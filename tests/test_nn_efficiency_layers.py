"""Notebook 12's intermediate-layer distillation (TinyBERT, DistilBERT's cosine) and Q-BERT's pieces
(per-block quantization, the Hessian's top eigenvalue, bits by sensitivity): against PyTorch's own
functions, against the model's own attention, and against cases worked by hand."""

import pytest
import torch
import torch.nn.functional as F

from plmcourse import nn as pnn
from plmcourse.nn.distillation import (TinyBertLoss, attention_mse, attention_scores, bert_internals, cosine_loss,
                                       hidden_mse, layer_map)
from plmcourse.nn.quantization import assign_bits, fake_quantize, quantize_blocks, top_hessian_eigenvalue


CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")],
)
DEVICES = ["cpu", CUDA]


def tiny_bert(seed=0, n_layers=2, norm_first=False):
    torch.manual_seed(seed)
    config = pnn.BertConfig(vocab_size=30, d_model=16, n_layers=n_layers, n_heads=4, d_ff=32, max_len=12,
                            dropout=0.0, norm_first=norm_first)
    return pnn.BertForSequenceClassification(pnn.Bert(config), n_classes=3, dropout=0.0).eval()


def batch(seed=0):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 30, (3, 7), generator=gen)
    mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3, [True] * 2 + [False] * 5])
    return ids, mask


# ----------------------------------------------------------------------------
# TinyBERT and DistilBERT


def test_layer_map_is_uniform_and_ends_on_the_last_layer():
    assert layer_map(1, 2) == {0: 0, 1: 2}
    assert layer_map(4, 12) == {0: 0, 1: 3, 2: 6, 3: 9, 4: 12}  # TinyBERT-4 from BERT-base
    assert layer_map(3, 3) == {0: 0, 1: 1, 2: 2, 3: 3}
    with pytest.raises(ValueError):
        layer_map(3, 4)


@pytest.mark.parametrize("norm_first", [False, True])
def test_attention_scores_are_what_the_model_puts_through_its_softmax(norm_first):
    model = tiny_bert(norm_first=norm_first)
    ids, mask = batch()
    hidden, scores = bert_internals(model, ids, mask)
    _, weights = model.bert.all_layers(ids, attention_mask=mask, return_weights=True)
    assert len(hidden) == 3 and len(scores) == 2 and scores[0].shape == (3, 4, 7, 7)
    for s, w in zip(scores, weights):
        masked = s.masked_fill(~mask[:, None, None, :], float("-inf"))  # padded keys get no weight
        torch.testing.assert_close(torch.softmax(masked, -1), w)
    torch.testing.assert_close(hidden[-1], model.bert(ids, attention_mask=mask)[0])


def test_hidden_mse_counts_only_real_tokens_and_agrees_with_torch():
    gen = torch.Generator().manual_seed(1)
    s, t = torch.randn(3, 7, 5, generator=gen), torch.randn(3, 7, 5, generator=gen)
    _, mask = batch()
    torch.testing.assert_close(hidden_mse(s, t, mask), F.mse_loss(s[mask], t[mask]))
    torch.testing.assert_close(hidden_mse(s, t), F.mse_loss(s, t))
    # by hand: one token, two features, errors 1 and 3 -> (1 + 9) / 2
    assert hidden_mse(torch.tensor([[[1.0, 3.0]]]), torch.zeros(1, 1, 2)).item() == pytest.approx(5.0)
    # what is beyond the mask never matters
    s2 = s.clone()
    s2[~mask] = 1e6
    torch.testing.assert_close(hidden_mse(s2, t, mask), hidden_mse(s, t, mask))


def test_hidden_mse_projects_the_student_to_the_teachers_width():
    gen = torch.Generator().manual_seed(2)
    s, t = torch.randn(2, 4, 3, generator=gen), torch.randn(2, 4, 6, generator=gen)
    projection = torch.nn.Linear(3, 6, bias=False)
    torch.testing.assert_close(hidden_mse(s, t, projection=projection), F.mse_loss(projection(s), t))


def test_attention_mse_compares_real_query_key_pairs_only():
    gen = torch.Generator().manual_seed(3)
    s, t = torch.randn(3, 4, 7, 7, generator=gen), torch.randn(3, 4, 7, 7, generator=gen)
    _, mask = batch()
    pairs = (mask[:, :, None] & mask[:, None, :])[:, None].expand(-1, 4, -1, -1)
    torch.testing.assert_close(attention_mse(s, t, mask), F.mse_loss(s[pairs], t[pairs]))
    # by hand: one sentence of 2 real tokens and 1 pad, 1 head, every real score off by 2 -> 4
    t1 = torch.zeros(1, 1, 3, 3)
    s1 = torch.full((1, 1, 3, 3), 2.0)
    s1[..., 2, :] = s1[..., :, 2] = 100.0  # the pad's row and column are not compared
    assert attention_mse(s1, t1, torch.tensor([[True, True, False]])).item() == pytest.approx(4.0)


def test_cosine_loss_agrees_with_torchs_cosine_embedding_loss():
    gen = torch.Generator().manual_seed(4)
    s, t = torch.randn(3, 7, 5, generator=gen), torch.randn(3, 7, 5, generator=gen)
    _, mask = batch()
    expected = F.cosine_embedding_loss(s[mask], t[mask], torch.ones(int(mask.sum())))
    torch.testing.assert_close(cosine_loss(s, t, mask), expected)
    # only the direction counts: a longer student in the teacher's direction costs nothing
    assert cosine_loss(3 * t, t).item() == pytest.approx(0.0, abs=1e-6)
    assert cosine_loss(-t, t).item() == pytest.approx(2.0, abs=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_tinybert_loss_is_zero_for_the_teacher_itself_and_trains_the_student_and_projections(device):
    teacher = tiny_bert(seed=0).to(device)
    ids, mask = (t.to(device) for t in batch())
    loss = TinyBertLoss(16, 16, n_student=2, n_teacher=2).to(device)
    with torch.no_grad():
        target = bert_internals(teacher, ids, mask)
    same = loss(bert_internals(teacher, ids, mask), target, mask)
    assert all(v.item() == pytest.approx(0.0, abs=1e-10) for v in same.values())

    student = pnn.student_from_teacher(tiny_bert(seed=1), [1]).to(device)  # another model's second block
    loss = TinyBertLoss(16, 16, n_student=1, n_teacher=2).to(device)
    parts = loss(bert_internals(student, ids, mask), target, mask)
    assert all(v.item() > 0 for v in parts.values())
    # the student's only layer is held against the teacher's last, through W_h (the identity at the start)
    hidden_s, scores_s = bert_internals(student, ids, mask)
    torch.testing.assert_close(parts["hidden"], hidden_mse(hidden_s[1], target[0][2], mask))
    torch.testing.assert_close(parts["attention"], attention_mse(scores_s[0], target[1][1], mask))
    sum(parts.values()).backward()
    assert all(p.grad is not None for p in loss.parameters())
    assert student.bert.blocks[0].self_attn.qkv_proj.weight.grad is not None
    assert all(p.grad is None for p in teacher.parameters())


# ----------------------------------------------------------------------------
# Q-BERT


@pytest.mark.parametrize("device", DEVICES)
def test_top_hessian_eigenvalue_of_a_quadratic_is_its_matrixs_largest(device):
    gen = torch.Generator().manual_seed(5)
    m = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    a = (m @ m.T).to(device)  # symmetric, positive semi-definite
    x = torch.randn(6, generator=gen, dtype=torch.float64).to(device).requires_grad_()
    top = top_hessian_eigenvalue(lambda: 0.5 * x @ a @ x, [x], iterations=200, generator=gen)
    assert top == pytest.approx(torch.linalg.eigvalsh(a).max().item(), rel=1e-6)


def test_top_hessian_eigenvalue_of_a_network_matches_the_full_hessian():
    gen = torch.Generator().manual_seed(6)
    x, y = torch.randn(20, 3, generator=gen, dtype=torch.float64), torch.randint(0, 2, (20,), generator=gen)
    w1 = torch.randn(4, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    w2 = torch.randn(2, 4, generator=gen, dtype=torch.float64, requires_grad=True)

    def loss_of(a, b):
        return F.cross_entropy(torch.tanh(x @ a.T) @ b.T, y)

    top = top_hessian_eigenvalue(lambda: loss_of(w1, w2), [w1], iterations=300, generator=gen)
    block = torch.autograd.functional.hessian(lambda a: loss_of(a, w2.detach()), w1.detach()).reshape(12, 12)
    eigenvalues = torch.linalg.eigvalsh(block)
    largest = eigenvalues[eigenvalues.abs().argmax()].item()  # power iteration finds the largest in size
    assert top == pytest.approx(largest, rel=1e-4)


def tiny_gpt(seed=0):
    torch.manual_seed(seed)
    config = pnn.GPTConfig(vocab_size=20, d_model=16, n_layers=3, n_heads=4, max_len=8, dropout=0.0)
    return pnn.GPT(config).eval()


def test_quantize_blocks_rounds_only_the_chosen_blocks_matrices():
    model = tiny_gpt()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    q = quantize_blocks(model, [None, 3, 8])
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # the original is untouched
    for name, value in q.state_dict().items():
        original = before[name]
        if name.startswith(("blocks.1.", "blocks.2.")) and value.dim() == 2:
            bits = 3 if name.startswith("blocks.1.") else 8
            torch.testing.assert_close(value, fake_quantize(original, bits, dim=0))
            scale = original.abs().amax(1, keepdim=True) / (2 ** (bits - 1) - 1)  # (out, 1): per output row
            levels = set(torch.round(value / scale).flatten().tolist())
            assert len(levels) <= 2 ** bits - 1  # 3 bits: the 7 levels -3 ... 3
        else:
            assert torch.equal(value, original), name  # block 0, biases, norms, embeddings
    with pytest.raises(ValueError):
        quantize_blocks(model, [8, 8])
    bert = tiny_bert()  # a classifier's BERT works the same way
    assert not torch.equal(quantize_blocks(bert, [2, None]).bert.blocks[0].ff.linear1.weight,
                           bert.bert.blocks[0].ff.linear1.weight)


def test_assign_bits_gives_the_most_bits_to_the_most_sensitive():
    assert assign_bits([0.1, 5.0, 0.3, 0.2], [4, 3, 3, 2]) == [2, 4, 3, 3]
    assert assign_bits([-0.1, -5.0, -0.3, -0.2], [4, 3, 3, 2]) == [4, 2, 3, 3]  # the reverse
    assert assign_bits([1.0, 2.0], [8, 2]) == [2, 8]
    with pytest.raises(ValueError):
        assign_bits([1.0, 2.0], [8, 4, 2])
