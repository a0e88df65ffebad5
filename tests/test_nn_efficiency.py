"""Notebook 12's package pieces: distillation, int8 quantization and pruning, in PyTorch, against
the NumPy reference, against PyTorch's own functions, and against cases worked by hand."""

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


def tiny_bert(seed=0, n_layers=4):
    torch.manual_seed(seed)
    config = pnn.BertConfig(vocab_size=30, d_model=16, n_layers=n_layers, n_heads=4, d_ff=32, max_len=12, dropout=0.0)
    return pnn.BertForSequenceClassification(pnn.Bert(config), n_classes=3, dropout=0.0).eval()


# ----------------------------------------------------------------------------
# Distillation


def test_distillation_loss_by_hand():
    # Two classes, T = 2: teacher logits (2, 0) -> soft (e^1, e^0)/(e + 1); student (0, 0) -> (1/2, 1/2).
    p = np.array([np.e, 1.0]) / (np.e + 1)
    kl = float(np.sum(p * np.log(p / 0.5)))
    ce = np.log(2)  # the student is uniform at T = 1 too
    for alpha in (0.0, 0.3, 1.0):
        expected = alpha * 4 * kl + (1 - alpha) * ce
        got = ref.distillation_loss([[0.0, 0.0]], [[2.0, 0.0]], [1], temperature=2.0, alpha=alpha)
        assert got == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_distillation_loss_matches_the_reference_and_torch(device):
    gen = torch.Generator().manual_seed(0)
    s = (3 * torch.randn(5, 4, generator=gen, dtype=torch.float64)).to(device).requires_grad_()
    t = (3 * torch.randn(5, 4, generator=gen, dtype=torch.float64)).to(device).requires_grad_()
    y = torch.tensor([0, 3, 1, 1, 2], device=device)
    for T, alpha in ((1.0, 0.5), (2.0, 0.3), (3.5, 1.0), (4.0, 0.0)):
        loss = pnn.distillation_loss(s, t, y, T, alpha)
        expected = ref.distillation_loss(s.detach().cpu().numpy(), t.detach().cpu().numpy(), y.cpu().numpy(), T, alpha)
        assert loss.item() == pytest.approx(expected, rel=1e-10)
        p_t = F.softmax(t.detach() / T, -1)
        by_torch = alpha * T ** 2 * (p_t * (p_t.log() - F.log_softmax(s / T, -1))).sum(-1).mean() \
            + (1 - alpha) * F.cross_entropy(s, y)
        torch.testing.assert_close(loss, by_torch)
    loss.backward()
    assert t.grad is None and s.grad is not None  # the teacher is not trained


def test_t_squared_keeps_the_soft_gradient_the_same_size():
    """Hinton's argument: without T², the soft term's gradient shrinks as 1/T²; with it, it settles."""
    gen = torch.Generator().manual_seed(1)
    s = torch.randn(64, 10, generator=gen, dtype=torch.float64) * 0.5
    t = torch.randn(64, 10, generator=gen, dtype=torch.float64) * 0.5
    y = torch.zeros(64, dtype=torch.long)
    norms = []
    for T in (4.0, 8.0, 16.0):
        x = s.clone().requires_grad_()
        pnn.distillation_loss(x, t, y, T, alpha=1.0).backward()
        norms.append(x.grad.norm().item())
    assert max(norms) / min(norms) < 1.2  # the same size at every T
    x = s.clone().requires_grad_()
    (pnn.distillation_loss(x, t, y, 16.0, alpha=1.0) / 16.0 ** 2).backward()
    assert x.grad.norm().item() < norms[-1] / 200  # without T², 256 times smaller


def test_student_from_teacher_keeps_the_chosen_blocks():
    teacher = tiny_bert(n_layers=4)
    student = pnn.student_from_teacher(teacher, [0, 2])
    assert student.bert.config.n_layers == 2 and teacher.bert.config.n_layers == 4
    for s_block, t_block in zip(student.bert.blocks, [teacher.bert.blocks[0], teacher.bert.blocks[2]]):
        for a, b in zip(s_block.parameters(), t_block.parameters()):
            assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()  # a copy, not the same tensor
    ids = torch.randint(0, 30, (2, 6))
    assert student(ids).shape == (2, 3)
    albert = pnn.BertForSequenceClassification(pnn.Bert(pnn.BertConfig(vocab_size=30, d_model=16, n_layers=4,
                                                                       n_heads=4, share_layers=True)), 3)
    with pytest.raises(ValueError, match="ALBERT"):
        pnn.student_from_teacher(albert, [0, 2])


# ----------------------------------------------------------------------------
# Quantization


def test_quantize_int8_by_hand():
    q, scale = ref.quantize_int8(np.array([0.5, -1.27, 0.0, 0.635]))
    assert scale == pytest.approx(0.01) and q.dtype == np.int8
    assert q.tolist() == [50, -127, 0, 64]  # 0.635 / 0.01 = 63.5 -> 64 (half to even)
    q, scale = ref.quantize_int8(np.array([[1.0, -2.0], [0.0, 0.0]]), dim=0)
    assert scale.shape == (2, 1) and scale[1, 0] == 0.0
    assert q.tolist() == [[64, -127], [0, 0]]  # 1 / (2/127) = 63.5 -> 64


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_quantize_int8_matches_the_reference(device, dim):
    gen = torch.Generator().manual_seed(2)
    w = torch.randn(6, 9, generator=gen, dtype=torch.float64)
    w[3] = 0.0
    q, scale = pnn.quantize_int8(w.to(device), dim)
    q_ref, scale_ref = ref.quantize_int8(w.numpy(), dim)
    assert q.dtype == torch.int8 and scale.dtype == torch.float64 and scale.shape == scale_ref.shape
    np.testing.assert_array_equal(q.cpu().numpy(), q_ref)
    np.testing.assert_allclose(scale.cpu().numpy(), scale_ref, rtol=1e-15)
    back = pnn.dequantize(q, scale)
    assert not torch.isnan(back).any()
    assert (back.cpu() - w).abs().max() <= scale.max().cpu() / 2 + 1e-12  # at most half a step off


def test_a_vector_quantized_along_its_only_axis_has_a_scale_per_entry():
    w = torch.tensor([0.5, -2.0, 0.0], dtype=torch.float64)
    q, scale = pnn.quantize_int8(w, dim=0)
    q_ref, scale_ref = ref.quantize_int8(w.numpy(), dim=0)
    assert scale.shape == (3,) and q.tolist() == [127, -127, 0] == q_ref.tolist()
    np.testing.assert_allclose(scale.numpy(), scale_ref)


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")  # deprecated in torch 2.13, still there
def test_quantize_int8_agrees_with_torchs_own_quantizer():
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(8, 5, generator=gen)
    q, scale = pnn.quantize_int8(w)
    theirs = torch.quantize_per_tensor(w, scale.item(), 0, torch.qint8)
    # torch's qint8 goes down to -128; with an absmax scale no value needs it, so they agree.
    torch.testing.assert_close(q, theirs.int_repr())
    q, scale = pnn.quantize_int8(w, dim=0)
    theirs = torch.quantize_per_channel(w, scale.flatten(), torch.zeros(8, dtype=torch.long), 0, torch.qint8)
    torch.testing.assert_close(q, theirs.int_repr())


@pytest.mark.parametrize("dim", [None, 0])
def test_fake_quantize_at_8_bits_is_quantize_then_dequantize(dim):
    w = torch.randn(7, 5, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    torch.testing.assert_close(pnn.fake_quantize(w, 8, dim), pnn.dequantize(*pnn.quantize_int8(w, dim)))
    two = pnn.fake_quantize(w, 2, dim)  # 2 bits: only -s, 0, s with s = absmax
    scale = w.abs().amax() if dim is None else w.abs().amax(dim=1, keepdim=True)
    assert torch.all((two == 0) | torch.isclose(two.abs(), scale.expand_as(two)))


def test_one_outlier_ruins_the_per_tensor_scale_not_the_per_channel_one():
    gen = torch.Generator().manual_seed(4)
    w = torch.randn(16, 16, generator=gen) * 0.02
    w[5, 7] = 5.0  # one large weight
    errors = {}
    for dim in (None, 0):
        q, scale = pnn.quantize_int8(w, dim)
        errors[dim] = (pnn.dequantize(q, scale) - w)[torch.arange(16) != 5].abs().mean().item()  # other rows
    assert errors[None] > 20 * errors[0]


@pytest.mark.parametrize("device", DEVICES)
def test_quantized_linear_is_close_and_four_times_smaller(device):
    torch.manual_seed(0)
    model = tiny_bert().to(device)
    ids = torch.randint(0, 30, (3, 8), device=device)
    before = model(ids)
    size_before = pnn.model_bytes(model)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    weights, rows = sum(m.weight.numel() for m in linears), sum(m.out_features for m in linears)
    pnn.quantize_linears(model)
    assert not any(type(m) is torch.nn.Linear for m in model.modules())
    assert size_before - pnn.model_bytes(model) == 3 * weights - 4 * rows  # 4 bytes -> 1, plus a scale per row
    torch.testing.assert_close(model(ids), before, atol=0.05, rtol=0.05)


# ----------------------------------------------------------------------------
# Pruning


def test_magnitude_masks_drop_exactly_the_smallest():
    weights = {"a": torch.tensor([[0.1, -5.0], [0.3, 0.0]]), "b": torch.tensor([[-0.2, 4.0, 0.05]])}
    masks = pnn.magnitude_masks(weights, 0.5, scope="global")  # drop 3 of 7... round(3.5) = 4
    kept = sorted(w.item() for name in weights for w, m in zip(weights[name].flatten(), masks[name].flatten()) if m)
    assert kept == pytest.approx([-5.0, 0.3, 4.0])
    layer = pnn.magnitude_masks(weights, 0.5, scope="layer")
    assert layer["a"].tolist() == [[False, True], [True, False]]  # 2 of 4 dropped
    assert layer["b"].tolist() == [[False, True, False]]  # round(1.5) = 2 of 3 dropped
    with pytest.raises(ValueError):
        pnn.magnitude_masks(weights, 1.5)


def test_pruning_a_model_zeroes_that_fraction_of_its_block_weights():
    model = tiny_bert()
    weights = pnn.prunable_weights(model)
    assert weights and all(".blocks." in f".{name}" and w.dim() == 2 for name, w in weights.items())
    n = sum(w.numel() for w in weights.values())
    pnn.apply_masks(model, pnn.magnitude_masks(weights, 0.3))
    zeros = sum((w == 0).sum().item() for w in pnn.prunable_weights(model).values())
    assert zeros == round(0.3 * n)
    assert (model.bert.embeddings.token.weight != 0).all()  # embeddings are not pruned
