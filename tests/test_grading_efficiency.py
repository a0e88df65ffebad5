"""plmcourse.judging.efficiency (notebook 12): right answers pass, every catalogued mistake fails with its
hint, bad answers get one sentence, the references agree with cases worked by hand, with each other
and with PyTorch's own functions, and the verdicts are the same through the wire as here."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import dataclasses
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import plmcourse.judging as judging
from mistake_catalogue import assert_one_sentence, catalogue_tests, failure, find_mistake
from mistake_catalogue.efficiency_mistakes import (
    CATALOGUE,
    dequant_notebook,
    distil_notebook,
    quant_notebook,
)
from plmcourse import nn as pnn
from plmcourse import ref
from plmcourse.judging import check_dequantize, check_distillation_loss, check_quantize_int8
from plmcourse.judging import core
from plmcourse.judging import efficiency as checks
from support import judged

NAMES = ["check_distillation_loss", "check_quantize_int8", "check_dequantize"]
CPU = torch.device("cpu")

# Wrong answers divide by zero on purpose; torch.quantize_per_* warn that they are deprecated.
# F.kl_div's reduction="mean" and float() of a tensor that requires grad warn, as they should.
pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning"),
              pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss:UserWarning"),
              pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True:UserWarning")]


# ----------------------------------------------------------------------------
# The catalogue


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


def test_the_named_mistakes_are_in_the_catalogue():
    names = {check: {name for name, _, _ in mistakes} for check, (_, mistakes) in CATALOGUE.items()}
    assert {"T² missing", "T instead of T²", "KL reversed", "temperature on the student only",
            "temperature on the teacher only", "probabilities as F.kl_div's input", "alpha and 1 - alpha swapped",
            "KL summed over the batch", "KL averaged over the classes (reduction='mean')",
            "cross-entropy at temperature T", "teacher not detached",
            "softmax over the batch axis"} <= names["check_distillation_loss"]
    assert {"max instead of absmax", "255 instead of 127", "128 instead of 127", "floor instead of round",
            "truncation (.to(int8) without rounding)", "per-channel scale along the wrong axis",
            "scale without keepdim", "q left in floating point", "q as int32", "q as int64",
            "scale as a Python float", "scale float32 for float64 input",
            "asymmetric (min/max) quantization"} <= names["check_quantize_int8"]
    assert {"result left in int8", "float32 for a float64 scale", "division instead of multiplication",
            "scale squeezed"} <= names["check_dequantize"]


def test_the_course_versions_pass_with_the_seal_lifted(capsys):
    """The course's own answers are sealed; with the seal lifted, the checks give them full marks."""
    for name, answer in (("check_distillation_loss", pnn.distillation_loss),
                         ("check_quantize_int8", pnn.quantize_int8), ("check_dequantize", pnn.dequantize)):
        unsealed = dataclasses.replace(getattr(judging, name), seal=())
        for hidden in (False, True, 7000):
            unsealed(answer, hidden=hidden)
    assert capsys.readouterr().out.count("cases passed") == 9


def test_the_notebook_answers_get_full_marks(capsys):
    """The solutions as the notebook writes them (tests/mistake_catalogue: the same code) pass every run."""
    for check, answer in ((check_distillation_loss, distil_notebook), (check_quantize_int8, quant_notebook),
                          (check_dequantize, dequant_notebook)):
        for hidden in (False, True, 1000, 123000, 1_000_000_000):
            check(answer, hidden=hidden)
    assert capsys.readouterr().out.count("cases passed") == 15


# ----------------------------------------------------------------------------
# The references: by hand, against each other, against PyTorch


def test_distillation_loss_by_hand_two_classes():
    """Student (0, 0), teacher (2, 0), label 1, T = 2: the teacher's soft targets are (e, 1) / (e + 1),
    the student's (1/2, 1/2) at any temperature, so KL = sum p log(2p) and CE = log 2."""
    p = np.array([math.e, 1.0]) / (math.e + 1)
    kl = float(np.sum(p * np.log(2 * p)))
    for alpha in (0.0, 0.3, 0.5, 1.0):
        expected = alpha * 4 * kl + (1 - alpha) * math.log(2)
        by_ref = ref.distillation_loss([[0.0, 0.0]], [[2.0, 0.0]], [1], 2.0, alpha)
        assert by_ref == pytest.approx(expected, rel=1e-14)
        student = torch.zeros(1, 2, dtype=torch.float64, requires_grad=True)
        loss = pnn.distillation_loss(student, torch.tensor([[2.0, 0.0]], dtype=torch.float64), torch.tensor([1]),
                                     2.0, alpha)
        assert loss.item() == pytest.approx(expected, rel=1e-14)
        # d/ds: alpha · T · (q − p) + (1 − alpha) · (softmax(s) − onehot), with q = softmax(s / T) = (1/2, 1/2)
        (grad,) = torch.autograd.grad(loss, student)
        want = alpha * 2 * (0.5 - p) + (1 - alpha) * (np.array([0.5, 0.5]) - [0.0, 1.0])
        np.testing.assert_allclose(grad.numpy()[0], want, rtol=1e-12)
    # The teacher equal to the student: KL = 0, the loss is the cross-entropy's share alone.
    assert ref.distillation_loss([[1.0, -1.0]], [[1.0, -1.0]], [0], 3.0, 0.4) == pytest.approx(
        0.6 * math.log(1 + math.exp(-2.0)), rel=1e-14)


def test_quantize_int8_by_hand():
    """absmax 2.54 -> scale 0.02; w / scale = 50, -127, 0, 31.5 (-> 32, even), 62.5 (-> 62, even), -0.5 (-> 0)."""
    w = np.array([1.0, -2.54, 0.0, 0.63, 1.25, -0.01])
    q, scale = ref.quantize_int8(w)
    assert scale.shape == () and float(scale) == pytest.approx(0.02, rel=1e-15) and q.dtype == np.int8
    assert q.tolist() == [50, -127, 0, 32, 62, 0]
    # Exact halves: a power-of-two step, so w / scale is exactly k + 0.5 (even k stays, odd k goes up).
    w = np.array([127.0, 62.5, 63.5, -62.5, -63.5, 0.5, -0.5, 1.5]) / 64
    q, scale = ref.quantize_int8(w)
    assert float(scale) == 1 / 64 and q.tolist() == [127, 62, 64, -62, -64, 0, 0, 2]
    torch_q, torch_scale = pnn.quantize_int8(torch.tensor(w))
    assert torch_q.tolist() == q.tolist() and torch_scale.item() == 1 / 64
    # Per output channel: a row of zeros gets scale 0 and q = 0; the other row's absmax is negative.
    q, scale = ref.quantize_int8(np.array([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0]]), dim=0)
    assert scale.shape == (2, 1) and scale[1, 0] == 0.0 and scale[0, 0] == pytest.approx(2 / 127)
    assert q.tolist() == [[64, -127, 32], [0, 0, 0]]  # 63.5 -> 64, 31.75 -> 32
    np.testing.assert_array_equal(ref.dequantize(q, scale), [[64 * 2 / 127, -2.0, 32 * 2 / 127], [0, 0, 0]])
    # Integers with absmax 127: scale 1, q = w.
    w = np.array([[-127.0, 3.0], [5.0, 0.0]])
    q, scale = ref.quantize_int8(w)
    assert float(scale) == 1.0 and q.tolist() == w.tolist()


@pytest.mark.parametrize("hidden", [False, True])
def test_distillation_references_agree_with_each_other_and_with_torch(hidden):
    for case in checks._distillation_cases(hidden, CPU):
        d = case.data
        value, grad = checks._distillation_reference(case)
        s = torch.tensor(d["s"], requires_grad=True)
        t = torch.tensor(d["t"], requires_grad=True)
        y = torch.tensor(d["labels"])
        T, alpha = d["T"], d["alpha"]
        kl = F.kl_div(F.log_softmax(s / T, -1), F.softmax(t.detach() / T, -1), reduction="batchmean")
        by_torch = alpha * T ** 2 * kl + (1 - alpha) * F.cross_entropy(s, y)
        assert value == pytest.approx(by_torch.item(), rel=1e-10, abs=1e-12)
        assert math.isfinite(value) and np.isfinite(grad).all()
        (torch_grad,) = torch.autograd.grad(by_torch, s)
        np.testing.assert_allclose(grad, torch_grad.numpy(), rtol=1e-9, atol=1e-12)
        # The analytic gradient:
        # alpha · T · (softmax(s / T) − softmax(t / T)) / B + (1 − alpha) · (softmax(s) − onehot) / B
        B = len(d["s"])
        onehot = np.eye(d["s"].shape[1])[d["labels"]]
        soft = np.exp(core.log_softmax(d["s"] / T)) - np.exp(core.log_softmax(d["t"] / T))
        analytic = (alpha * T * soft + (1 - alpha) * (np.exp(core.log_softmax(d["s"])) - onehot)) / B
        np.testing.assert_allclose(grad, analytic, rtol=1e-9, atol=1e-12)
        if "teacher equals student" in case.tags:
            assert value == pytest.approx((1 - alpha) * F.cross_entropy(s, y).item(), rel=1e-12)


def test_distillation_reference_gradient_matches_finite_differences():
    case = checks._distillation_cases(False, CPU)[2]  # B = 5, C = 6, T = 4, alpha = 0.3
    d = case.data
    _, grad = checks._distillation_reference(case)
    step = 1e-6
    for index in [(0, 0), (2, 3), (4, 5)]:
        plus, minus = d["s"].copy(), d["s"].copy()
        plus[index] += step
        minus[index] -= step
        numeric = (ref.distillation_loss(plus, d["t"], d["labels"], d["T"], d["alpha"])
                   - ref.distillation_loss(minus, d["t"], d["labels"], d["T"], d["alpha"])) / (2 * step)
        assert grad[index] == pytest.approx(numeric, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("hidden", [False, True])
def test_quantize_references_agree_with_each_other(hidden):
    for case in checks._quantize_cases(hidden, CPU):
        d = case.data
        expected = checks._quantize_reference(case)
        q, scale = pnn.quantize_int8(torch.tensor(d["w"]), d["dim"])
        assert q.dtype == torch.int8 and scale.dtype == case.args[0].dtype
        np.testing.assert_array_equal(q.numpy(), expected["q"])
        np.testing.assert_array_equal(scale.numpy(), expected["scale"])
        assert (expected["lo"] <= expected["q"]).all() and (expected["q"] <= expected["hi"]).all()
        if d["kind"] == "halves":  # every way of writing w / scale gives the exact half: nothing is let through
            np.testing.assert_array_equal(expected["lo"], expected["hi"])
        back = ref.dequantize(expected["q"], expected["scale"])
        assert back.dtype == d["w"].dtype and np.isfinite(back).all()
        np.testing.assert_array_equal(pnn.dequantize(q, scale).numpy(), back)
        assert (np.abs(back - d["w"]) <= np.broadcast_to(expected["scale"], d["w"].shape) / 2 * (1 + 1e-6)).all()


@pytest.mark.parametrize("hidden", [False, True])
def test_quantize_references_agree_with_torchs_quantizers(hidden):
    """torch.quantize_per_tensor / _per_channel with qint8, the same scale and zero point 0 give the same
    integers (on w in float32, which they require), exactly at the exact halves and elsewhere within the
    roundings the check accepts. Their range is -128..127, but with scale = absmax / 127 no value rounds
    below -127, so the ±127 clamp never makes a difference. A zero scale, which torch refuses, is left out."""
    compared = 0
    for case in checks._quantize_cases(hidden, CPU):
        d = case.data
        w = d["w"].astype(np.float32)
        q, scale = ref.quantize_int8(w, d["dim"])
        lo, hi = checks._q_range(w, d["axis"], np.float32)
        if (np.asarray(scale) == 0).any():
            continue
        if d["dim"] is None:
            theirs = torch.quantize_per_tensor(torch.tensor(w), float(scale), 0, torch.qint8)
        else:
            theirs = torch.quantize_per_channel(torch.tensor(w), torch.tensor(scale, dtype=torch.float64).reshape(-1),
                                                torch.zeros(np.size(scale), dtype=torch.long), d["axis"], torch.qint8)
        theirs = theirs.int_repr().numpy().astype(np.int64)
        assert theirs.min() >= -127 and ((lo <= theirs) & (theirs <= hi)).all(), case.label
        if d["kind"] in ("halves", "integers"):
            np.testing.assert_array_equal(theirs, q)
        compared += 1
    assert compared >= 8


def test_the_qint8_range_differs_only_outside_the_absmax_scale():
    """Where clamping to ±127 would matter (a scale below absmax / 127), torch's qint8 gives -128."""
    w = torch.tensor([-1.0, 0.5])
    theirs = torch.quantize_per_tensor(w, 1 / 128, 0, torch.qint8).int_repr()
    assert theirs.tolist() == [-128, 64]
    ours = torch.clamp(torch.round(w / (1 / 128)), -127, 127).to(torch.int8)
    assert ours.tolist() == [-127, 64]


@pytest.mark.parametrize("hidden", [False, True])
def test_dequantize_references_agree(hidden):
    for case in checks._dequantize_cases(hidden, CPU):
        expected = check_dequantize.reference(case)
        q, scale = case.args
        np.testing.assert_array_equal(pnn.dequantize(q, scale).numpy(), expected)
        assert expected.dtype == case.data["scale"].dtype and np.isfinite(expected).all()
        if scale.dim() == 0 and float(scale) != 0:  # torch's own dequantizer of a per-tensor qint8 tensor
            theirs = torch._make_per_tensor_quantized_tensor(q, float(scale), 0).dequantize()
            np.testing.assert_allclose(theirs.numpy(), expected, rtol=1e-6)


def test_one_large_outlier_takes_the_resolution_of_every_other_weight():
    case = next(c for c in checks._quantize_cases(False, CPU) if "outlier" in c.tags)
    q = checks._quantize_reference(case)["q"]
    assert np.count_nonzero(np.abs(q) > 1) == 1  # the outlier; every other weight became -1, 0 or 1


# ----------------------------------------------------------------------------
# The cases


def test_the_distillation_cases_cover_every_clause():
    cases = checks._distillation_cases(False, CPU)
    data = [c.data for c in cases]
    assert {d["T"] for d in data} >= {1.0, 2.0, 4.0, 2.5}
    assert {d["alpha"] for d in data} >= {0.0, 1.0, 0.5, 0.3}
    assert {len(d["s"]) for d in data} >= {1, 3} and {d["s"].shape[1] for d in data} >= {2, 5}
    assert {d["dtype"] for d in data} == {torch.float32, torch.float64}
    tags = set().union(*(c.tags for c in cases))
    assert {"default temperature", "default alpha", "large logits", "teacher equals student", "float32"} <= tags
    assert all(c.grad_leaves == (0, 1) and c.args[1].requires_grad for c in cases)
    assert max(np.abs(d["s"]).max() for d in data) >= 1500


def test_the_quantize_cases_cover_every_clause():
    cases = checks._quantize_cases(False, CPU)
    assert {c.data["w"].ndim for c in cases} == {1, 2, 3}
    assert {c.data["dim"] for c in cases} >= {None, 0, 1, -1}
    assert {c.args[0].dtype for c in cases} == {torch.float32, torch.float64}
    tags = set().union(*(c.tags for c in cases))
    assert {"halves", "outlier", "zeros", "integers", "negative absmax", "zero slice"} <= tags
    assert any(len(c.args) == 1 and not c.kwargs for c in cases) and any(c.kwargs == {"dim": None} for c in cases)
    # the halves cases hold halves with even k (where half to even and half away differ), of both signs
    halves = np.concatenate([(c.data["w"] / np.broadcast_to(checks._quantize_reference(c)["scale"],
                                                            c.data["w"].shape)).ravel()
                             for c in cases if "halves" in c.tags])
    even = halves[(halves % 1 == 0.5) & (np.floor(halves) % 2 == 0)]
    assert (even > 0).any() and (even < 0).any()


def test_the_dequantize_cases_cover_every_clause():
    cases = checks._dequantize_cases(False, CPU)
    shapes = {tuple(c.args[1].shape) for c in cases}
    assert () in shapes and (4, 1) in shapes and (1, 5) in shapes and (1, 3, 1) in shapes
    assert {c.args[1].dtype for c in cases} == {torch.float32, torch.float64}
    assert all(c.args[0].dtype == torch.int8 for c in cases)
    assert any("zero scale" in c.tags and c.args[1].dim() == 0 for c in cases)


def test_hidden_runs_extend_the_visible_ones_with_other_seeds():
    for name in NAMES:
        check = getattr(judging, name)
        visible = [c.label for c in check.cases(False, CPU)]
        salted = {salt: [c.label for c in check.cases(salt, CPU)] for salt in (True, 5000)}
        assert salted[True][:len(visible)] == visible == salted[5000][:len(visible)]
        assert salted[True][len(visible):] != salted[5000][len(visible):]


# ----------------------------------------------------------------------------
# Bad answers get one sentence, never a grader crash


def _raises(*args, **kwargs):
    raise ValueError("not today")


@pytest.mark.parametrize("answer, fragment", [
    (lambda s, t, y, temperature=2.0, alpha=0.5: distil_notebook(s, t, y, temperature, alpha) * math.nan,
     "the loss is nan"),
    (lambda s, t, y, temperature=2.0, alpha=0.5: None, "your function returned None"),
    (_raises, "your function raised ValueError: not today"),
    (lambda s, t, y, temperature=2.0, alpha=0.5: distil_notebook(s, t, y, temperature, alpha).reshape(1, 1),
     "has shape (1, 1), expected a single number (a 0-d tensor)"),
    (lambda s, t, y, temperature=2.0, alpha=0.5: distil_notebook(s, t, y, temperature, alpha).detach().numpy(),
     "is a NumPy array, expected a torch.Tensor"),
    (lambda s, t, y, temperature=2.0, alpha=0.5: float(distil_notebook(s, t, y, temperature, alpha)),
     "the loss is a Python float"),
    (lambda s, t, y, temperature=2.0, alpha=0.5: distil_notebook(s, t, y, temperature, alpha).float(),
     "dtype torch.float32, expected torch.float64"),
    (lambda s, t, y, temperature=2.0, alpha=0.5: (distil_notebook(s, t, y, temperature, alpha), 0.0),
     "the loss is a tuple of 2 items, expected a torch.Tensor"),
    (lambda s, t, y, temperature=2.0, alpha=0.5: "a loss", "the loss is a str"),
])
def test_bad_distillation_answers_get_one_sentence(answer, fragment):
    message = str(failure(check_distillation_loss, answer))
    assert fragment in message, message
    assert_one_sentence(message, "check_distillation_loss")


@pytest.mark.parametrize("answer, fragment", [
    (lambda w, dim=None: (quant_notebook(w, dim)[0], quant_notebook(w, dim)[1] * math.nan), "scale contains nan"),
    (lambda w, dim=None: None, "your function returned None"),
    (_raises, "your function raised ValueError: not today"),
    (lambda w, dim=None: quant_notebook(w, dim)[0], "expected the pair (q, scale)"),
    (lambda w, dim=None: (quant_notebook(w, dim)[0][:1], quant_notebook(w, dim)[1]), "q has shape (1,)"),
    (lambda w, dim=None: (quant_notebook(w, dim)[0].numpy(), quant_notebook(w, dim)[1]),
     "q (first item) is a NumPy array, expected a torch.Tensor"),
    (lambda w, dim=None: (quant_notebook(w, dim)[0], quant_notebook(w, dim)[1].numpy()),
     "scale (second item) is a NumPy array, expected a torch.Tensor"),
    (lambda w, dim=None: (quant_notebook(w, dim)[0], quant_notebook(w, dim)[1].to(torch.int64)),
     "scale has dtype torch.int64, expected torch.float64 like w: a scale is a floating-point number"),
    (lambda w, dim=None: (-quant_notebook(w, dim)[0], quant_notebook(w, dim)[1]), "q differs from the expected"),
])
def test_bad_quantize_answers_get_one_sentence(answer, fragment):
    message = str(failure(check_quantize_int8, answer))
    assert fragment in message, message
    assert_one_sentence(message, "check_quantize_int8")


@pytest.mark.parametrize("answer, fragment", [
    (lambda q, scale: q.to(scale.dtype) * scale * math.nan, "the result contains nan"),
    (lambda q, scale: None, "your function returned None"),
    (_raises, "your function raised ValueError: not today"),
    (lambda q, scale: (q.to(scale.dtype) * scale)[:1], "the result has shape (1, 6), expected (5, 6)"),
    (lambda q, scale: 2.5, "the result is a float, expected a torch.Tensor"),
    (lambda q, scale: q.to(scale.dtype) * scale + 1, "the result differs from the expected by up to 1"),
])
def test_bad_dequantize_answers_get_one_sentence(answer, fragment):
    message = str(failure(check_dequantize, answer))
    assert fragment in message, message
    assert_one_sentence(message, "check_dequantize")


def test_a_squeezed_scale_on_a_non_square_q_gets_a_hint_about_broadcasting():
    def squeezed(q, scale):
        return q.to(scale.dtype) * scale.squeeze()

    case = checks._dequantize_cases(False, CPU)[3]  # q (2, 3, 4), scale (1, 3, 1): no broadcast at all
    reply = core.call_student(squeezed, case)
    assert reply.error is not None
    assert "do not squeeze" in checks._explain_dequantize_error(reply.error)


def test_a_division_by_a_zero_scale_is_named_where_it_shows():
    def nan_where_zero(q, scale):
        out = q.to(scale.dtype) * scale
        return torch.where(scale == 0, out / scale, out)

    assert "where the scale is 0" in str(failure(check_dequantize, nan_where_zero))

    def float_q_nan(w, dim=None):
        absmax = w.abs().amax() if dim is None else w.abs().amax(
            dim=[a for a in range(w.dim()) if a != dim % w.dim()], keepdim=True)
        scale = absmax / 127
        return torch.round(w / scale).clamp(-127, 127), scale

    case = next(c for c in checks._quantize_cases(False, CPU) if "zero slice" in c.tags)
    case.reply = core.call_student(float_q_nan, case)
    verdict = checks._judge_quantize(case, case.reply.value, checks._quantize_reference(case))
    assert "expected torch.int8" in verdict and "where a slice of w is all zeros: 0 / 0" in verdict


def test_a_cut_graph_is_reported_before_a_wrong_dtype():
    """tests/test_grading_core.py's rule for the losses, on the float32 cases."""
    def answer(*args, **kwargs):
        return distil_notebook(*args, **kwargs).detach().double()

    for case in checks._distillation_cases(True, CPU):
        if case.args[0].dtype == torch.float32:
            case.reply = core.call_student(answer, case)
            verdict = check_distillation_loss.judge(case, case.reply.value, check_distillation_loss.reference(case))
            assert verdict and "gradient" in verdict


def test_a_teacher_equal_to_the_student_passes_even_when_not_detached():
    """There the KL's gradient with respect to the teacher is 0: nothing to name; other cases name it."""
    undetached = find_mistake(CATALOGUE, "check_distillation_loss", "teacher not detached")
    case = next(c for c in checks._distillation_cases(False, CPU) if "teacher equals student" in c.tags)
    case.reply = core.call_student(undetached, case)
    assert check_distillation_loss.judge(case, case.reply.value, check_distillation_loss.reference(case)) is None
    assert "failed on case 1 of" in str(failure(check_distillation_loss, undetached))


def test_library_functions_a_student_may_use_are_not_sealed(capsys):
    check_distillation_loss(distil_notebook, hidden=True)  # F.kl_div, F.log_softmax, F.cross_entropy
    check_distillation_loss(CATALOGUE["check_distillation_loss"][0][1][1], hidden=True)  # F.softmax, torch.no_grad
    assert capsys.readouterr().out.count("cases passed") == 2


def test_sealing_catches_the_course_versions_under_other_names():
    from plmcourse.nn import dequantize as early_dequantize
    from plmcourse.nn.quantization import quantize_int8 as early_quantize

    aliased = str(failure(check_quantize_int8, lambda w, dim=None: early_quantize(w, dim)))
    assert "calls plmcourse.nn.quantize_int8" in aliased
    assert "calls plmcourse.nn.dequantize" in str(failure(check_dequantize, lambda q, s: early_dequantize(q, s)))
    namespace = {}  # a verbatim copy of the course's module counts as calling it
    exec(compile(open(checks.nn_quantization.__file__).read(), "copied.py", "exec"), namespace)
    assert "calls plmcourse.nn.quantize_int8" in str(failure(check_quantize_int8, namespace["quantize_int8"]))


def test_the_seal_is_lifted_afterwards():
    with pytest.raises(core.CheckFailed):
        check_quantize_int8(lambda w, dim=None: pnn.quantize_int8(w, dim))
    q, scale = pnn.quantize_int8(torch.ones(3))
    assert q.tolist() == [127] * 3 and scale.item() == pytest.approx(1 / 127)


def test_inputs_are_compared_before_and_after():
    def sneaky(q, scale):
        result = q.to(scale.dtype) * scale
        q.zero_()
        return result

    assert "changed its input q in place" in str(failure(check_dequantize, sneaky))


# ----------------------------------------------------------------------------
# Through the wire as here; the random generators left alone


@pytest.mark.parametrize("check_name, mistake", [
    ("check_distillation_loss", None), ("check_distillation_loss", "teacher not detached"),
    ("check_distillation_loss", "KL reversed"),
    ("check_quantize_int8", None), ("check_quantize_int8", "halves rounded away from zero"),
    ("check_quantize_int8", "scale as a Python float"),
    ("check_dequantize", None), ("check_dequantize", "scale squeezed"),
])
def test_the_same_verdict_through_the_wire_as_here(check_name, mistake):
    answer = CATALOGUE[check_name][0][0][1] if mistake is None else find_mistake(CATALOGUE, check_name, mistake)
    local = None
    try:
        getattr(judging, check_name)(answer, hidden=True)
    except core.CheckFailed as failed:
        local = str(failed)
    passed, sentence, flags, shown = judged(check_name, answer)
    assert passed is (mistake is None) and (local is None) is (mistake is None)
    assert shown == ("passed" if passed else sentence)
    if not passed:
        assert sentence == local
    assert flags == []


def test_the_teacher_arrives_as_a_leaf_through_the_wire():
    undetached = find_mistake(CATALOGUE, "check_distillation_loss", "teacher not detached")
    passed, sentence, _, _ = judged("check_distillation_loss", undetached)
    assert not passed and "the teacher's logits received a gradient" in sentence


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_checks_on_cuda(capsys):
    for name in NAMES:
        check = getattr(judging, name)
        for _, fn in CATALOGUE[name][0]:
            check(fn, hidden=True, device="cuda")
    for name, mistake in (("check_distillation_loss", "KL reversed"),
                          ("check_quantize_int8", "floor instead of round"), ("check_dequantize", "scale squeezed")):
        wrong = find_mistake(CATALOGUE, name, mistake)
        check = getattr(judging, name)
        assert str(failure(check, wrong, device="cuda")) == str(failure(check, wrong))

    def moves_to_cpu(q, scale):
        return (q.to(scale.dtype) * scale).cpu()

    assert "expected cuda:0 like q" in str(failure(check_dequantize, moves_to_cpu, device="cuda"))


@pytest.mark.integration  # a fresh Python process
def test_the_checks_stay_fast_in_a_fresh_kernel():
    """Nothing the checks run loads torch._dynamo (a second or more per kernel)."""
    import pathlib
    import subprocess
    import sys

    code = ("import sys, plmcourse.grading as g\n"
            "from mistake_catalogue.efficiency_mistakes import distil_notebook, quant_notebook, dequant_notebook\n"
            "g.check_distillation_loss(distil_notebook, hidden=True)\n"
            "g.check_quantize_int8(quant_notebook, hidden=True)\n"
            "g.check_dequantize(dequant_notebook, hidden=True)\n"
            "assert 'torch._dynamo' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], cwd=pathlib.Path(__file__).parent, check=True, capture_output=True,
                   timeout=120)
