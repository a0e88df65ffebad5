"""plmcourse.judging.multimodal (notebook 14): right answers pass, every catalogued mistake fails with its
hint, bad answers get one sentence, the mistakes the judges name are what they say (worked by hand), and the
verdicts are the same through the wire as here."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import pytest
import torch

import plmcourse.judging as judging
from mistake_catalogue import assert_one_sentence, catalogue_tests, failure, find_mistake
from mistake_catalogue.multimodal_mistakes import (
    CATALOGUE,
    clip_notebook,
    mask_notebook,
    patchify_notebook,
)
from plmcourse import ref
from plmcourse.judging import check_clip_loss, check_joint_attention_mask, check_patchify, core
from plmcourse.judging import multimodal as checks
from support import judged

NAMES = ["check_patchify", "check_joint_attention_mask", "check_clip_loss"]
ANSWERS = {"check_patchify": patchify_notebook, "check_joint_attention_mask": mask_notebook,
           "check_clip_loss": clip_notebook}

# Wrong answers overflow and divide by zero on purpose.
pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning")]


# ----------------------------------------------------------------------------
# The catalogue


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


def test_the_issue_s_named_mistakes_are_in_the_catalogue():
    names = {check: {name for name, _, _ in mistakes} for check, (_, mistakes) in CATALOGUE.items()}
    assert {"patches column-major", "channels last inside a patch", "image transposed", "plain reshape",
            "each patch transposed", "no size check (cropped)", "F.unfold's layout"} <= names["check_patchify"]
    assert {"only the keys masked (padding attends)", "only the queries masked (padding attended)",
            "no diagonal: empty rows", "[image; text] order", "inverted", "block-diagonal (no cross-modal attention)",
            "(B, 1, L, L)", "image padding ignored", "text padding ignored"} <= names["check_joint_attention_mask"]
    assert {"only image to text", "only text to image", "no normalisation", "temperature multiplied",
            "the same direction twice (softmax over the wrong axis)", "unstable softmax",
            "sum over the batch", "targets of 0"} <= names["check_clip_loss"]


# ----------------------------------------------------------------------------
# The references against cases worked by hand (more in tests/test_ref_multimodal.py)


def test_patchify_by_hand():
    images = np.arange(2 * 4 * 4).reshape(1, 2, 4, 4)  # channel 0: 0..15, channel 1: 16..31
    patches = ref.patchify(images, 2)
    assert patches.shape == (1, 4, 8)
    # patch 1 is the top-right square: rows 0-1, columns 2-3; channel 0 first, then channel 1
    assert patches[0, 1].tolist() == [2, 3, 6, 7, 18, 19, 22, 23]
    assert patches[0, 2].tolist() == [8, 9, 12, 13, 24, 25, 28, 29]  # bottom-left: row-major order


def test_joint_mask_by_hand():
    mask = ref.joint_attention_mask(np.array([[1, 1, 0]]), np.array([[1, 0]]))
    # tokens: t0 t1 <pad> i0 <pad>
    expected = np.array([[1, 1, 0, 1, 0],
                         [1, 1, 0, 1, 0],
                         [0, 0, 1, 0, 0],
                         [1, 1, 0, 1, 0],
                         [0, 0, 0, 0, 1]], dtype=bool)
    assert np.array_equal(mask[0], expected) and mask.dtype == bool


def test_clip_loss_by_hand():
    # Two orthogonal pairs, temperature 1: logits = I, each direction -log(e / (e + 1)).
    loss = ref.clip_loss(np.eye(2) * 3.0, np.eye(2) * 0.5, temperature=1.0)
    assert loss == pytest.approx(np.log1p(np.exp(-1.0)))
    assert ref.clip_loss(np.ones((1, 4)), np.ones((1, 4))) == 0.0


# ----------------------------------------------------------------------------
# The mistakes the judges name are what they say


def _judge_mistakes(check, mistakes_of):
    """For every visible case: each named mistake's computed answer fails the case with its own name (or one
    named before it that gives the same answer), and the reference's answer passes."""
    for case in check.cases(False):
        expected = check.reference(case)
        if expected is None:
            continue
        assert check.judge(case, expected, expected) is None
        for name, compute in mistakes_of(case):
            parts = compute()
            if parts is None:
                continue
            got = parts[0] if not isinstance(parts[0], np.ndarray) or parts[0].shape else float(parts[0])
            verdict = check.judge(case, got, expected)
            same = core.close(np.asarray(parts[0]), np.asarray(expected), 0, 0) if not isinstance(got, float) \
                else abs(got - expected) <= 1e-12 + 1e-9 * abs(expected)
            if same:
                assert verdict is None
            else:
                assert verdict and "it matches" in verdict, (case.label, name, verdict)


def test_patchify_mistakes_are_named():
    _judge_mistakes(check_patchify, lambda c: checks._patchify_mistakes(c.data["images"], c.data["patch"]))


def test_mask_mistakes_are_named():
    _judge_mistakes(check_joint_attention_mask, lambda c: checks._mask_mistakes(c.data["text"], c.data["image"]))


def test_clip_mistakes_are_named():
    _judge_mistakes(check_clip_loss, lambda c: checks._clip_mistakes(c.data, c.tags))


def test_the_one_direction_mistakes_are_the_two_directions():
    case = checks._clip_case(0, 5, 4, temperature=0.2)
    d = case.data
    a, b = checks._clip_numpy(d["image"], d["text"], 0.2, directions="image"), \
        checks._clip_numpy(d["image"], d["text"], 0.2, directions="text")
    assert (a + b) / 2 == pytest.approx(ref.clip_loss(d["image"], d["text"], 0.2))
    assert a != pytest.approx(b)


# ----------------------------------------------------------------------------
# Bad answers: one sentence, never a crash


def _bad_answers():
    yield "returns None", lambda *a, **k: None
    yield "returns a string", lambda *a, **k: "done"
    yield "raises KeyError", lambda *a, **k: {}["x"]
    yield "returns NaN", lambda *a, **k: float("nan")
    yield "returns a list", lambda *a, **k: [1, 2, 3]
    yield "returns a torch tensor", lambda *a, **k: torch.zeros(3)
    yield "returns a generator", lambda *a, **k: (i for i in range(3))
    yield "returns NaN arrays", lambda *a, **k: np.full((2, 3, 4), np.nan)
    yield "modifies its input", lambda x, *a, **k: x.__setitem__(..., 0) or x


@pytest.mark.parametrize("check_name", NAMES)
@pytest.mark.parametrize("name, answer", list(_bad_answers()), ids=[n for n, _ in _bad_answers()])
def test_bad_answers_get_one_sentence(check_name, name, answer):
    message = str(failure(getattr(judging, check_name), answer))
    assert_one_sentence(message, check_name)


def test_the_course_versions_are_sealed():
    for check_name, fn in (("check_patchify", ref.patchify), ("check_joint_attention_mask", ref.joint_attention_mask),
                           ("check_clip_loss", ref.clip_loss)):
        message = str(failure(getattr(judging, check_name), lambda *a, fn=fn, **k: fn(*a, **k)))
        assert "write it yourself" in message


def test_torch_unfold_is_sealed():
    import torch.nn.functional as F

    def with_f_unfold(images, patch):
        B, C, H, W = images.shape
        if H % patch or W % patch:
            raise ValueError("size")
        out = F.unfold(torch.from_numpy(np.ascontiguousarray(images)).double(), patch, stride=patch)
        return out.transpose(1, 2).numpy().astype(images.dtype)

    assert "torch.nn.functional.unfold" in str(failure(check_patchify, with_f_unfold))


# ----------------------------------------------------------------------------
# Through the wire, as when graded


@pytest.mark.parametrize("check_name, mistake", [
    ("check_patchify", None), ("check_patchify", "channels last inside a patch"),
    ("check_patchify", "assert instead of ValueError"), ("check_patchify", "no size check (cropped)"),
    ("check_joint_attention_mask", None), ("check_joint_attention_mask", "no diagonal: empty rows"),
    ("check_clip_loss", None), ("check_clip_loss", "only image to text"),
])
def test_the_verdict_is_the_same_through_the_wire(check_name, mistake):
    answer = ANSWERS[check_name] if mistake is None else find_mistake(CATALOGUE, check_name, mistake)
    check = getattr(judging, check_name)
    local = None
    try:
        check(answer, hidden=True)
    except core.CheckFailed as failed:
        local = str(failed)
    driven = check.driver(answer) if check.driver else answer
    passed, sentence, flags, shown = judged(check_name, driven)
    assert passed is (mistake is None) and (local is None) is (mistake is None)
    assert shown == ("passed" if passed else sentence)
    if not passed:
        assert sentence == local
    assert flags == []
