"""plmcourse.judging.peft: right answers pass, every catalogued mistake fails with its hint, the
references agree with hand-worked cases and with PyTorch, and the driven checks (a class, a model)
give the same verdicts through the wire as here, a stage's exception named with its stage."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import dataclasses
import math
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mistake_catalogue import assert_one_sentence, catalogue_tests, failure
from mistake_catalogue.peft_mistakes import (
    CATALOGUE,
    LoraHooks,
    LoraNotebook,
    count_every_occurrence,
    prefix_notebook,
)
from plmcourse import nn as pnn
from plmcourse import ref
from plmcourse.judging import check_attention_with_prefix, check_count_trainable_parameters, check_lora_linear
import plmcourse.grading
from plmcourse.grading import core as kernel  # the declarations' side, what a grading kernel runs
from plmcourse.judging import core
from plmcourse.judging import peft as checks
from plmcourse.nn.attention import merge_heads, split_heads
from support import judged as judged_by_name

CPU = torch.device("cpu")


# ----------------------------------------------------------------------------
# The catalogue


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


def test_the_package_references_pass_with_the_seal_lifted(capsys):
    """The course's own answers are sealed; with the seal lifted, the checks accept them."""
    for check, answer in ((check_lora_linear, pnn.LoRALinear), (check_attention_with_prefix, ref.attention_with_prefix),
                          (check_count_trainable_parameters, pnn.count_trainable_parameters)):
        unsealed = dataclasses.replace(check, seal=())
        for hidden in (False, True, 7000):
            unsealed(answer, hidden=hidden)
    assert capsys.readouterr().out.count("cases passed") == 9


# ----------------------------------------------------------------------------
# The references


def test_attention_with_prefix_by_hand():
    one = np.ones((1, 1, 1, 1))
    zero = np.zeros((1, 1, 1, 1))
    # Equal scores for the prefix key and the own key: half the weight each.
    output, weights = ref.attention_with_prefix(one, zero, 3 * one, zero[0], 5 * one[0])
    np.testing.assert_allclose(weights, [[[[0.5, 0.5]]]])
    np.testing.assert_allclose(output, [[[[4.0]]]])
    # The own key masked: the query still sees the prefix, so its row is not zero.
    output, weights = ref.attention_with_prefix(one, zero, 3 * one, zero[0], 5 * one[0], np.zeros((1, 1), bool))
    np.testing.assert_allclose(weights, [[[[1.0, 0.0]]]])
    np.testing.assert_allclose(output, [[[[5.0]]]])
    # Two prefix positions first, scores 0 and 2 against 1 for the own key (d_k = 1).
    q = np.ones((1, 1, 1, 1))
    weights = ref.attention_with_prefix(q, one, one, np.array([[[0.0], [2.0]]]), np.zeros((1, 2, 1)))[1]
    e = np.exp([0.0, 2.0, 1.0])
    np.testing.assert_allclose(weights[0, 0, 0], e / e.sum())


@pytest.mark.parametrize("hidden", [False, True])
def test_attention_with_prefix_reference_agrees_with_torch_fused_attention(hidden):
    for case in checks._prefix_cases(hidden):
        d = case.data
        q, k, v, pk, pv = (torch.tensor(d[n], dtype=torch.float64) for n in ("q", "k", "v", "prefix_k", "prefix_v"))
        B, H, L_q, _ = q.shape
        keys = torch.cat([pk.expand(B, -1, -1, -1), k], dim=2)
        values = torch.cat([pv.expand(B, -1, -1, -1), v], dim=2)
        mask = None
        if d["mask"] is not None:
            own = np.broadcast_to(d["mask"], (B, H, L_q, k.shape[2]))
            mask = torch.tensor(np.concatenate([np.ones((B, H, L_q, pk.shape[1]), bool), own], axis=-1))
        theirs = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        output, weights = ref.attention_with_prefix(*case.args)
        np.testing.assert_allclose(output, theirs.numpy(), atol=1e-10)
        assert weights.shape == (B, H, L_q, pk.shape[1] + k.shape[2])
        np.testing.assert_allclose(weights.sum(-1), 1.0)  # every query sees the prefix: no zero row


@pytest.mark.parametrize("mask_kind", [None, "padding", "causal"])
def test_attention_with_prefix_reference_agrees_with_multi_head_attention(mask_kind):
    """MultiHeadAttention(prefix=...) with identity q and k projections and a random v projection."""
    torch.manual_seed(0)
    B, L, d_model, H, P = 2, 5, 8, 2, 3
    module = pnn.MultiHeadAttention(d_model, H, bias=False, impl="explicit").double()
    with torch.no_grad():
        module.qkv_proj.weight[:2 * d_model].copy_(torch.eye(d_model).repeat(2, 1))  # W_q = W_k = I
        module.out_proj.weight.copy_(torch.eye(d_model))
    x = torch.randn(B, L, d_model, dtype=torch.float64)
    prefix_k, prefix_v = (torch.randn(1, H, P, d_model // H, dtype=torch.float64) for _ in range(2))
    mask = {None: None, "padding": ref.padding_mask([5, 2], L), "causal": ref.causal_mask(L)}[mask_kind]
    output, weights = module(x, mask=None if mask is None else torch.tensor(mask), return_weights=True,
                             prefix=(prefix_k, prefix_v))
    q = split_heads(x, H).numpy()
    v = split_heads(module.project(x)[2], H).detach().numpy()
    ours, our_weights = ref.attention_with_prefix(q, q, v, prefix_k[0].numpy(), prefix_v[0].numpy(), mask)
    np.testing.assert_allclose(merge_heads(torch.tensor(ours)).numpy(), output.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(our_weights, weights.detach().numpy(), atol=1e-12)


@pytest.mark.parametrize("hidden", [False, True])
def test_lora_reference_agrees_with_the_course_module_and_autograd(hidden):
    for case in checks._lora_cases(hidden, CPU):
        d = case.data
        expected = checks._lora_reference(case)
        if d["r"] < 1:  # the course's layer refuses a rank below 1, as the check expects
            assert expected == {"raises": "ValueError"}
            with pytest.raises(ValueError):
                pnn.LoRALinear(torch.nn.Linear(3, 2), d["r"], d["alpha"])
            continue
        base = torch.nn.Linear(d["W"].shape[1], d["W"].shape[0], bias=d["b"] is not None, dtype=torch.float64)
        with torch.no_grad():
            base.weight.copy_(torch.tensor(d["W"]))
            if d["b"] is not None:
                base.bias.copy_(torch.tensor(d["b"]))
        layer = pnn.LoRALinear(base, d["r"], d["alpha"]).eval()
        with torch.no_grad():
            layer.A.copy_(torch.tensor(d["A"]))
            layer.B.copy_(torch.tensor(d["B"]))
        y = layer(torch.tensor(d["x"]))
        (y * torch.tensor(d["upstream"])).sum().backward()
        np.testing.assert_allclose(expected["y"], y.detach().numpy(), atol=1e-12)
        np.testing.assert_allclose(expected["grad_A"], layer.A.grad.numpy(), atol=1e-12)
        np.testing.assert_allclose(expected["grad_B"], layer.B.grad.numpy(), atol=1e-12)
        np.testing.assert_allclose(expected["merged"], layer.merge().weight.detach().numpy(), atol=1e-12)
        np.testing.assert_allclose(expected["y"], ref.lora_forward(d["x"], d["W"], d["b"], d["A"], d["B"], d["alpha"]),
                                   atol=1e-12)
        np.testing.assert_allclose(expected["merged"], ref.lora_merge(d["W"], d["A"], d["B"], d["alpha"]), atol=1e-12)


def test_lora_reference_by_hand():
    """W = 1, b = 0.5, A = 2, B = 3, alpha = 4, r = 1: y = x + 0.5 + 4 * 6 x; merged weight 1 + 24."""
    case = checks._lora_case(0, 1, 1, 1, 4, CPU)
    case.data.update(W=np.ones((1, 1)), b=np.array([0.5]), A=np.array([[2.0]]), B=np.array([[3.0]]),
                     x=np.array([[1.0], [2.0]]), upstream=np.ones((2, 1)))
    expected = checks._lora_reference(case)
    np.testing.assert_allclose(expected["y"], [[25.5], [50.5]])
    np.testing.assert_allclose(expected["merged"], [[25.0]])
    np.testing.assert_allclose(expected["grad_A"], [[4 * 3 * 3.0]])  # scale * B * sum(x)
    np.testing.assert_allclose(expected["grad_B"], [[4 * 2 * 3.0]])  # scale * A * sum(x)


def test_count_reference_by_hand():
    def count(spec):
        return checks._count_reference(core.Case("", (spec, "cpu"), data={"spec": spec}))

    assert count(("linear", 3, 2)) == (8, 8)
    assert count(("tied", 30, 6)) == (30 * 6 + 2 * 6 + 30,) * 2  # the shared matrix once
    assert count(("shared", ("linear", 6, 6), 3)) == (42, 42)
    assert count(("seq", ("batchnorm", 7), ("buffer", 0, 0, 3))) == (14, 14)  # running statistics are buffers
    assert count(("lora", 8, 4, 2)) == (2 * 8 + 4 * 2, 36 + 16 + 8)
    assert count(("bitfit", ("seq", ("linear", 4, 9), ("layernorm", 9)))) == (18, 36 + 9 + 18)
    assert count(("seq", ("relu",))) == (0, 0)


# ----------------------------------------------------------------------------
# The cases


def test_the_lora_cases_cover_every_clause():
    cases = checks._lora_cases(False, CPU)
    data = [c.data for c in cases]
    assert {d["dtype"] for d in data} == {torch.float32, torch.float64}
    assert {d["b"] is None for d in data} == {True, False}
    assert any(d["r"] == 1 for d in data) and any(d["r"] > min(d["W"].shape) for d in data)
    assert any(d["alpha"] % d["r"] for d in data) and all(d["alpha"] != d["r"] for d in data)
    assert {c.kwargs.get("dropout") for c in cases} >= {None, 0.0, 0.5}
    assert any(d["x"].ndim == 3 for d in data) and any(d["W"].shape[0] != d["W"].shape[1] for d in data)


def test_the_prefix_cases_cover_every_clause():
    cases = checks._prefix_cases(False)
    masks = [c.data["mask"] for c in cases]
    assert any(m is None for m in masks) and any(m is not None and m.ndim == 2 for m in masks)
    assert any(m is not None and m.shape[1:3] == (1, 1) for m in masks)
    assert any(c.data["prefix_k"].shape[1] == 1 for c in cases)
    assert any(c.data["q"].shape[2] != c.data["k"].shape[2] for c in cases)
    assert any("no own key" in c.tags for c in cases) and any("float32" in c.tags for c in cases)


def test_the_count_cases_cover_every_clause():
    tags = set().union(*(c.tags for c in checks._count_cases(False, CPU)))
    assert {"frozen", "tied", "shared", "buffers", "nested", "lora", "nothing trains", "no parameters"} <= tags


def test_hidden_count_models_move_with_the_salt():
    labels = {salt: [c.label for c in checks._count_cases(salt, CPU)] for salt in (True, 5000)}
    visible = len(checks._count_cases(False, CPU))
    assert labels[True][:visible] == labels[5000][:visible] and labels[True] != labels[5000]


def test_a_module_used_three_times_is_named():
    case = next(c for c in checks._count_cases(False, CPU) if "shared" in c.tags)
    got = count_every_occurrence(checks._built(case.data["spec"], "cpu"))
    assert "counted once per use" in checks._judge_count(case, got, checks._count_reference(case))


# ----------------------------------------------------------------------------
# Bad answers get one sentence, never a grader crash


class LoraNaN(LoraHooks):
    def forward(self, x):
        return super().forward(x) * math.nan


class LoraReturnsNone(LoraHooks):
    def forward(self, x):
        self.base(x)


class LoraFloat32Output(LoraHooks):
    def forward(self, x):
        return super().forward(x).float()


class LoraNumpyOutput(LoraHooks):
    def forward(self, x):
        return super().forward(x).detach().numpy()


class LoraMergeRaisesAndForwardWrong(LoraHooks):
    def scaling(self, r, alpha):
        return 1.0

    def merge(self):
        raise ValueError("not yet")


class LoraMergeRaises(LoraHooks):
    def merge(self):
        raise ValueError("not yet")


@pytest.mark.parametrize("answer, fragment", [
    (LoraNaN, "contains nan"),
    (LoraReturnsNone, "is None"),
    (LoraFloat32Output, "has dtype torch.float32, expected torch.float64 like the base layer"),
    (LoraNumpyOutput, "is a NumPy array, expected a torch.Tensor"),
    (LoraMergeRaisesAndForwardWrong, "it matches the scale alpha / r left out"),  # forward judged, merge aside
    (LoraMergeRaises, "merge() raised ValueError: not yet"),
    (lambda base, r, alpha, dropout=0.0: None, "calling the class gave None, expected a torch.nn.Module"),
    (42, "the constructor raised TypeError: 'int' object is not callable"),
])
def test_bad_lora_answers_get_one_sentence(answer, fragment):
    message = str(failure(check_lora_linear, answer))
    assert fragment in message, message
    assert_one_sentence(message, "check_lora_linear")


@pytest.mark.parametrize("answer, fragment", [
    (lambda *args, **kwargs: (np.full((2, 2, 4, 4), np.nan), np.full((2, 2, 4, 5), np.nan)), "contains nan"),
    (lambda *args, **kwargs: prefix_notebook(*args, **kwargs)[0], "expected the pair (output, weights)"),
    (lambda *args, **kwargs: tuple(a.astype(np.int64) for a in prefix_notebook(*args, **kwargs)), "dtype int64"),
    (lambda *args, **kwargs: tuple(torch.tensor(a) for a in prefix_notebook(*args, **kwargs)), "expected a NumPy"),
])
def test_bad_prefix_answers_get_one_sentence(answer, fragment):
    message = str(failure(check_attention_with_prefix, answer))
    assert fragment in message, message
    assert_one_sentence(message, "check_attention_with_prefix")


@pytest.mark.parametrize("answer, fragment", [
    (lambda model: (1.5, 2), "is 1.5, not a whole number"),
    (lambda model: (True, 2), "a bool, expected an int"),
    (lambda model: ("212", "212"), "is a str, expected an int"),
    (lambda model: torch.tensor([212, 212]), "expected the pair (trainable, total)"),
    (lambda model: (torch.tensor(212.0), 212), "is the float 212.0"),
    (lambda model: model.nothing, "your function raised AttributeError"),
])
def test_bad_count_answers_get_one_sentence(answer, fragment):
    message = str(failure(check_count_trainable_parameters, answer))
    assert fragment in message, message
    assert_one_sentence(message, "check_count_trainable_parameters")


def test_a_course_merge_borrowed_by_a_class_of_ones_own_is_sealed():
    class Borrowing(LoraHooks):
        merge = pnn.LoRALinear.merge

    assert "calls plmcourse.nn.LoRALinear.merge" in str(failure(check_lora_linear, Borrowing))


# ----------------------------------------------------------------------------
# The driver: through the wire as here


def judged(check, fn, hidden=True):
    """(passed, sentence, what the kernel showed) through the wire (tests/test_grading_core.py's socketpair):
    the kernel serves the driven answer, as Check.__call__ does in a grading kernel (the test below)."""
    passed, sentence, _, shown = judged_by_name(check.name, check.driver(fn), hidden)
    return passed, sentence, shown


def test_a_grading_kernel_serves_the_driven_answer(monkeypatch):
    served = {}
    monkeypatch.setattr(kernel, "_judge_connection", lambda: "the judge")
    monkeypatch.setattr(kernel, "serve", lambda connection, name, fn, hidden: served.update(fn=fn, name=name))
    plmcourse.grading.check_lora_linear(LoraNotebook)
    assert served["name"] == "check_lora_linear" and served["fn"] is not LoraNotebook
    case = checks._lora_cases(False, CPU)[0]
    report = served["fn"](*case.args, **case.kwargs)
    assert report["errors"] == {} and checks._judge_lora(case, report, checks._lora_reference(case)) is None


@pytest.mark.parametrize("check, answer, passes", [
    (check_lora_linear, LoraNotebook, True),
    (check_lora_linear, CATALOGUE["check_lora_linear"][1][0][1], False),
    (check_lora_linear, LoraMergeRaises, False),
    (check_lora_linear, CATALOGUE["check_lora_linear"][1][-1][1], False),  # sealed: the course's class
    (check_count_trainable_parameters, CATALOGUE["check_count_trainable_parameters"][0][0][1], True),
    (check_count_trainable_parameters, count_every_occurrence, False),
], ids=["lora honest", "lora B random", "lora merge raises", "lora sealed", "count honest", "count tied twice"])
def test_driven_checks_give_the_same_verdict_through_the_wire(check, answer, passes, monkeypatch):
    local = None
    try:
        check(answer, hidden=True)
    except core.CheckFailed as failed:
        local = str(failed)
    passed, sentence, shown = judged(check, answer)
    assert passed is passes and (local is None) is passes
    assert shown == ("passed" if passes else sentence)
    if not passes:
        assert sentence == local


def test_an_endless_merge_costs_its_case_only(monkeypatch):
    class SlowMerge(LoraHooks):
        def merge(self):
            time.sleep(3)  # an endless loop, as far as a 0.5 s limit can tell
            return super().merge()

    monkeypatch.setattr(kernel, "CALL_SECONDS", 0.5)
    passed, sentence, _ = judged(check_lora_linear, SlowMerge)
    assert not passed and "TimeoutError" in sentence and "an endless loop?" in sentence


def test_verdicts_do_not_depend_on_the_global_seed():
    """The driver seeds dropout itself: the same mistake gets the same sentence whatever the notebook drew."""
    wrong = CATALOGUE["check_lora_linear"][1]
    dropout_on_update = next(fn for name, fn, _ in wrong if name == "dropout on the update")
    sentences = set()
    for seed in (0, 1):
        torch.manual_seed(seed)
        sentences.add(str(failure(check_lora_linear, dropout_on_update)))
    assert len(sentences) == 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_driven_checks_on_cuda(capsys):
    check_lora_linear(LoraNotebook, hidden=True, device="cuda")
    check_count_trainable_parameters(CATALOGUE["check_count_trainable_parameters"][0][0][1], hidden=True,
                                     device="cuda")
    wrong = next(fn for name, fn, _ in CATALOGUE["check_lora_linear"][1] if name == "dropout on the whole output")
    assert "dropout is applied to the whole output" in str(failure(check_lora_linear, wrong, device="cuda"))


@pytest.mark.integration  # a fresh Python process
def test_the_checks_stay_fast_in_a_fresh_kernel():
    """torch.optim's constructors and modules built on the meta device load torch._dynamo: a second or
    more per kernel. The checks use neither."""
    import subprocess
    import sys

    code = ("import sys, plmcourse.grading as g\n"
            "from mistake_catalogue.peft_mistakes import LoraNotebook, count_notebook, prefix_notebook\n"
            "g.check_lora_linear(LoraNotebook, hidden=True)\n"
            "g.check_count_trainable_parameters(count_notebook, hidden=True)\n"
            "g.check_attention_with_prefix(prefix_notebook, hidden=True)\n"
            "assert 'torch._dynamo' not in sys.modules\n")
    tests = __import__("pathlib").Path(__file__).parent
    subprocess.run([sys.executable, "-c", code], cwd=tests, check=True, capture_output=True, timeout=120)
