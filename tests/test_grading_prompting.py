"""plmcourse.judging.prompting (notebook 10): right answers pass, every catalogued mistake fails with its hint,
bad answers get one sentence, the judges' mistakes are what they say (worked by hand), the cases cover every
clause, and the verdicts are the same through the wire as here."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import dataclasses
import inspect
import itertools
import math

import numpy as np
import pytest
import torch

# Aliases taken before the checks are imported, as a notebook might: sealing must still see them.
from plmcourse.nn.prompting import pet_soft_labels as early_pet_soft_labels
from plmcourse.ref.prompting import select_pseudo_labels as early_select_pseudo_labels
from plmcourse.ref.prompting import verbalizer_log_probs as early_verbalizer_log_probs

import plmcourse.judging as judging
from mistake_catalogue import assert_one_sentence, catalogue_tests, failure, find_mistake
from mistake_catalogue.prompting_mistakes import CATALOGUE, pet_notebook, sel_notebook, verb_notebook
from plmcourse import nn as pnn
from plmcourse import ref
from plmcourse.judging import check_pet_soft_labels, check_select_pseudo_labels, check_verbalizer_log_probs, core
from plmcourse.judging import prompting as checks
from support import fixed_arguments, judged

NAMES = ["check_verbalizer_log_probs", "check_pet_soft_labels", "check_select_pseudo_labels"]
NOTEBOOK = {"check_verbalizer_log_probs": verb_notebook, "check_pet_soft_labels": pet_notebook,
            "check_select_pseudo_labels": sel_notebook}
CPU = torch.device("cpu")

# Wrong answers take logs of 0 on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def verdict(check, answer, case):
    """The judge's problem with `answer` on one case (None: right), as run_check would find it."""
    case.reply = core.call_student(answer, case)
    assert case.reply.error is None, case.reply.error
    return check.judge(case, case.reply.value, check.reference(case))


# ----------------------------------------------------------------------------
# The catalogue


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


def test_the_named_mistakes_are_in_the_catalogue():
    """Each mistake of the exercise's list has its entry."""
    names = {check: {name for name, _, _ in mistakes} for check, (_, mistakes) in CATALOGUE.items()}
    assert {"position 0 instead of the mask", "the last position instead of the mask",
            "log-softmax over the vocabulary",
            "softmax over the vocabulary, then log", "probabilities instead of log-probabilities",
            "max over the label words", "sum over the label words", "logits[:, mask_positions]: a (B, B, V) mix",
            "gather along the vocabulary axis", "T and V axes swapped", "only the first label word",
            "row 0's mask position for every row"} <= names["check_verbalizer_log_probs"]
    assert {"probabilities averaged instead of logits", "temperature ignored", "temperature multiplied",
            "weights not normalised", "weights ignored", "softmax over the examples", "log-probabilities returned",
            "weights=None not handled"} <= names["check_pet_soft_labels"]
    assert {"global top-k", "top of each column over all examples", "duplicates (the running list appended)",
            "least confident instead of most", "per_class as the total (a global top per_class)",
            "small classes padded (masked topk)",
            "topk crashes on a small class"} <= names["check_select_pseudo_labels"]


def test_every_diagnosis_of_the_judges_is_reached_by_a_catalogued_mistake():
    """No named diagnosis is dead code: each VB_, PET_ and SEL_ sentence ends some catalogued mistake's message."""
    messages = " ".join(str(failure(getattr(judging, check), fn)) for check, (_, wrong) in CATALOGUE.items()
                        for _, fn, _ in wrong)
    diagnoses = {name: text for name, text in vars(checks).items()
                 if name.startswith(("VB_", "PET_", "SEL_")) and isinstance(text, str)}
    assert len(diagnoses) >= 25
    unreached = [name for name, text in diagnoses.items() if text not in messages]
    assert not unreached


def test_the_course_versions_pass_with_the_seal_lifted(capsys):
    """The course's own answers are sealed; with the seal lifted, the checks give them full marks."""
    for name, answer in (("check_verbalizer_log_probs", pnn.verbalizer_log_probs),
                         ("check_pet_soft_labels", pnn.pet_soft_labels),
                         ("check_select_pseudo_labels", pnn.select_pseudo_labels)):
        unsealed = dataclasses.replace(getattr(judging, name), seal=())
        for hidden in (False, True, 7000):
            unsealed(answer, hidden=hidden)
    assert capsys.readouterr().out.count("cases passed") == 9


def test_the_notebook_answers_get_full_marks(capsys):
    for name, answer in NOTEBOOK.items():
        for hidden in (False, True, 1000, 123000, 1_000_000_000):
            getattr(judging, name)(answer, hidden=hidden)
    assert capsys.readouterr().out.count("cases passed") == 15


# ----------------------------------------------------------------------------
# The references and the judges' mistakes, by hand


def _verbalizer_data(logits, positions, words, dtype=torch.float64):
    return {"logits": np.asarray(logits, dtype=np.float64), "positions": np.asarray(positions), "words": words,
            "dtype": dtype, "large": False}


def test_verbalizer_mistakes_by_hand():
    """Classes {1, 2} and {4}; row 0's mask at 1 reads (9, 1, 3, 9, 0), row 1's at 2 reads (0, 4, 0, 0, 1):
    means (2, 0) and (2, 1), maxes (3, 0) and (4, 1), sums (4, 0) and (4, 1), first words (1, 0) and (4, 1).
    Position 0 holds (5, 5, 5, 5, 5) in both rows (all classes equal), the last position is row 1's mask."""
    logits = np.zeros((2, 3, 5))
    logits[0, 1] = [9.0, 1.0, 3.0, 9.0, 0.0]
    logits[1, 2] = [0.0, 4.0, 0.0, 0.0, 1.0]
    logits[:, 0] = 5.0
    d = _verbalizer_data(logits, [1, 2], [[1, 2], [4]])
    mistakes = {}
    for text, compute in checks._verbalizer_mistakes(d):
        mistakes.setdefault(text, compute()[0])

    def log_softmax(rows):
        rows = np.asarray(rows, dtype=np.float64)
        return rows - np.log(np.exp(rows).sum(-1, keepdims=True))

    np.testing.assert_allclose(ref.verbalizer_log_probs(logits, [1, 2], [[1, 2], [4]]), log_softmax([[2, 0], [2, 1]]))
    np.testing.assert_allclose(mistakes[checks.VB_MAX], log_softmax([[3, 0], [4, 1]]))
    np.testing.assert_allclose(mistakes[checks.VB_SUM], log_softmax([[4, 0], [4, 1]]))
    np.testing.assert_allclose(mistakes[checks.VB_FIRST_WORD], log_softmax([[1, 0], [4, 1]]))
    np.testing.assert_allclose(mistakes[checks.VB_POSITION_0], np.full((2, 2), -math.log(2)))
    np.testing.assert_allclose(mistakes[checks.VB_LAST], log_softmax([[0, 0], [2, 1]]))  # row 0's position 2: zeros
    np.testing.assert_allclose(mistakes[checks.VB_SAME_ROW], log_softmax([[2, 0], [0, 0]]))  # row 1 read at 1
    np.testing.assert_allclose(mistakes[checks.VB_PROBABILITIES], np.exp(log_softmax([[2, 0], [2, 1]])))
    np.testing.assert_allclose(mistakes[checks.VB_NO_LOG_SOFTMAX], [[2, 0], [2, 1]])
    np.testing.assert_allclose(mistakes[checks.VB_BATCH_AXIS], log_softmax([[2, 2], [0, 1]]).T)
    np.testing.assert_allclose(mistakes[checks.VB_UNIFORM], np.full((2, 2), -math.log(2)))
    # over the vocabulary: row 0's log-softmax at words 1 and 2, averaged: (1 + 3) / 2 - logsumexp(9, 1, 3, 9, 0)
    lse = math.log(2 * math.exp(9) + math.exp(1) + math.exp(3) + 1)
    assert mistakes[checks.VB_VOCAB][0, 0] == pytest.approx(2 - lse, rel=1e-12)
    # the T and V axes swapped: logits[b, word, mask position] (every word id below T = 3 here)
    swapped = checks._verbalizer_mistakes(_verbalizer_data(logits, [1, 2], [[1, 2], [0]]))
    computed = next(f()[0] for text, f in swapped if text == checks.VB_SWAPPED)
    np.testing.assert_allclose(computed, log_softmax([[(logits[0, 1, 1] + logits[0, 2, 1]) / 2, logits[0, 0, 1]],
                                                      [(logits[1, 1, 2] + logits[1, 2, 2]) / 2, logits[1, 0, 2]]]))


def test_pet_mistakes_by_hand():
    """Two patterns on one example, (0.8, 0.2) and (0.4, 0.6), weights (3, 1), temperature 2."""
    scores = np.log(np.array([[[0.8, 0.2]], [[0.4, 0.6]]]))
    d = {"scores": scores, "w": np.array([3.0, 1.0]), "T": 2.0, "dtype": torch.float64}
    mistakes = {}
    for text, compute in checks._pet_mistakes(d, frozenset()):
        mistakes.setdefault(text, compute()[0])

    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    right = softmax((0.75 * scores[0] + 0.25 * scores[1]) / 2)
    np.testing.assert_allclose(ref.pet_soft_labels(scores, [3.0, 1.0], 2.0), right)
    # averaging the probabilities: (0.7, 0.3), then softened by T = 2: proportional to their square roots
    roots = np.sqrt([[0.7, 0.3]])
    np.testing.assert_allclose(mistakes[checks.PET_PROBABILITIES], roots / roots.sum())
    np.testing.assert_allclose(mistakes[checks.PET_NOT_NORMALISED], softmax((3 * scores[0] + scores[1]) / 2))
    np.testing.assert_allclose(mistakes[checks.PET_IGNORED], softmax((scores[0] + scores[1]) / 4))
    np.testing.assert_allclose(mistakes[checks.PET_T_IGNORED], softmax(0.75 * scores[0] + 0.25 * scores[1]))
    np.testing.assert_allclose(mistakes[checks.PET_T_MULTIPLIED], softmax(2 * (0.75 * scores[0] + 0.25 * scores[1])))
    np.testing.assert_allclose(mistakes[checks.PET_LOG], np.log(right))
    assert checks.PET_AXIS not in mistakes  # N = 1: a softmax over the examples is all ones, never a right answer
    assert checks.PET_ON_CLASSES in mistakes  # P == C == 2


def test_select_accepts_every_tie_break_and_nothing_else():
    """TIES with per_class 2: class 0 has 0.75 at 0, 2 and 6 (any two), class 1 has 0.625 at 3 and 0.5 at 1
    and 7 (either), class 2 has 5: six right answers."""
    probs = np.array(checks.TIES)
    right = [set(zero) | {3, one} | {5} for zero in itertools.combinations([0, 2, 6], 2) for one in (1, 7)]
    assert all(checks._valid(chosen, probs, 2) for chosen in right) and len({frozenset(s) for s in right}) == 6
    assert set(ref.select_pseudo_labels(probs, 2).tolist()) in right
    wrong = [{0, 2, 3, 1, 7, 5}, {0, 4, 3, 1, 5}, {0, 2, 3, 1}, {0, 2, 6, 3, 1, 5}, {0, 2, 1, 7, 5}, set()]
    assert not any(checks._valid(chosen, probs, 2) for chosen in wrong)
    case = next(c for c in checks._select_cases(False, CPU) if "ties at the cut" in c.tags)
    for chosen in right:
        assert verdict(check_select_pseudo_labels, lambda probs, per_class, chosen=chosen: sorted(chosen), case) is None
    assert "(ties at the cut may go either way" in verdict(check_select_pseudo_labels,
                                                           lambda probs, per_class: [0, 4, 3, 1, 5], case)


def test_select_mistakes_by_hand():
    """IMBALANCED with per_class 2 (see plmcourse.grading.prompting)."""
    probs = np.array(checks.IMBALANCED)
    assert sorted(ref.select_pseudo_labels(probs, 2).tolist()) == [2, 3, 5, 6, 8, 11]
    found = dict((text, sorted(wrong)) for text, wrong in reversed(list(checks._select_mistakes(probs, 2))))
    first_global = next(wrong for text, wrong in checks._select_mistakes(probs, 2) if text == checks.SEL_GLOBAL)
    assert sorted(first_global) == [0, 2, 3, 4, 8, 10]
    assert found[checks.SEL_WRONG_CLASS] == [1, 2, 3, 5, 6, 8]  # example 1 is predicted 0 but has 0.45 for class 1
    assert found[checks.SEL_LEAST] == [1, 4, 5, 6, 7, 9]
    totals = [sorted(w) for t, w in checks._select_mistakes(probs, 2) if t == checks.SEL_TOTAL]
    assert totals == [[2, 8], [], [2, 3, 6]]  # a global top 2; 2 // 3 = 0 per class; ceil(2 / 3) = 1 per class


# ----------------------------------------------------------------------------
# The cases


def test_the_verbalizer_cases_cover_every_clause():
    cases = checks._verbalizer_cases(False, CPU)
    data = [c.data for c in cases]
    assert {len(d["words"]) for d in data} >= {2, 3, 4}
    assert {len(ids) for d in data for ids in d["words"]} == {1, 2, 3}
    assert any(all(len(ids) == 1 for ids in d["words"]) for d in data)
    assert {len(d["positions"]) for d in data} >= {1, 3, 4, 5, 6}
    T = [d["logits"].shape[1] for d in data]
    assert any((d["positions"] == 0).any() for d in data)
    assert any((d["positions"] == t - 1).any() for d, t in zip(data, T))
    assert all(len(set(d["positions"].tolist())) > 1 for d in data[:2])  # the first cases tell rows apart
    assert {c.args[0].dtype for c in cases} == {torch.float32, torch.float64}
    assert all(c.args[1].dtype == torch.int64 and isinstance(c.args[2], list) for c in cases)
    assert len({d["logits"].shape[2] for d in data}) == len(cases)  # V varies
    assert any(max(max(ids) for ids in d["words"]) < t for d, t in zip(data, T))
    large = next(c for c in cases if "large logits" in c.tags)
    expected = check_verbalizer_log_probs.reference(large)
    assert np.isfinite(expected).all() and expected.min() < -800  # a log of a softmax would give -inf


def test_the_pet_cases_cover_every_clause():
    cases = checks._pet_cases(False, CPU)
    data = [c.data for c in cases]
    assert {d["T"] for d in data} >= {0.5, 1.0, 2.0, 3.0}
    tags = set().union(*(c.tags for c in cases))
    assert {"default temperature", "weights not passed", "weights None", "uneven weights", "unnormalised weights",
            "weights sum to 1", "a zero weight", "float32", "float64"} <= tags
    shapes = [d["scores"].shape for d in data]
    assert {s[0] for s in shapes} >= {1, 3, 5} and {s[1] for s in shapes} >= {1, 5}
    assert {s[2] for s in shapes} >= {2, 3, 4, 5}
    assert any("weights" in c.kwargs and c.kwargs["weights"] is None for c in cases)  # None passed, not omitted
    assert any(len(c.args) == 3 for c in cases) and any("temperature" in c.kwargs for c in cases)
    assert all(np.allclose(np.exp(d["scores"]).sum(-1), 1.0) for d in data)  # log-probabilities
    first = cases[0].data
    assert first["scores"].shape[0] == first["scores"].shape[2] and first["T"] not in (1.0, 2.0)


def test_the_select_cases_cover_every_clause():
    cases = checks._select_cases(False, CPU)
    tags = set().union(*(c.tags for c in cases))
    assert {"a class with fewer than per_class", "a class never predicted", "ties at the cut", "float32",
            "float64"} <= tags
    assert {c.data["per_class"] for c in cases} >= {1, 2, 3, 5, 7}
    assert {c.data["probs"].shape[1] for c in cases} >= {2, 3, 4, 5}
    assert any(c.data["per_class"] > len(c.data["probs"]) for c in cases)
    assert any("per_class" in c.kwargs for c in cases) and any(len(c.args) == 2 for c in cases)
    first = cases[0]  # the global top-k and the column's top differ from the answer in the first case
    assert checks._global_differs(first) and checks._column_differs(first)


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "with hidden"])
@pytest.mark.parametrize("name", NAMES)
def test_every_argument_takes_more_than_one_value(name, hidden):
    """tests/test_grading_clauses.py's rule, against the course's own signature (the notebook's is the same)."""
    signature = inspect.signature(getattr(pnn, name.removeprefix("check_")))
    check = getattr(judging, name)
    assert not fixed_arguments(signature, check.cases(hidden, CPU), check.signature_args)


def test_hidden_runs_extend_the_visible_ones_with_other_seeds():
    for name in NAMES:
        check = getattr(judging, name)
        visible = [c.label for c in check.cases(False, CPU)]
        salted = {salt: [c.label for c in check.cases(salt, CPU)] for salt in (True, 5000)}
        assert salted[True][:len(visible)] == visible == salted[5000][:len(visible)]
        assert salted[True][len(visible):] != salted[5000][len(visible):]


@pytest.mark.parametrize("hidden", [False, True, 5000])
def test_the_references_agree_with_the_torch_versions(hidden):
    for case in checks._verbalizer_cases(hidden, CPU):
        ours = pnn.verbalizer_log_probs(*case.args)
        np.testing.assert_allclose(ours.numpy(), check_verbalizer_log_probs.reference(case),
                                   **({"rtol": 1e-5, "atol": 1e-5} if ours.dtype == torch.float32 else {}))
    for case in checks._pet_cases(hidden, CPU):
        args, kwargs = check_pet_soft_labels.signature_args(case)
        if case.data["error"]:  # a negative weight, or a zero sum: both versions refuse them
            assert check_pet_soft_labels.reference(case) is None
            with pytest.raises(ValueError):
                pnn.pet_soft_labels(*args, **kwargs)
            with pytest.raises(ValueError):
                ref.pet_soft_labels(case.data["scores"], case.data["w"], case.data["T"])
            continue
        ours = pnn.pet_soft_labels(*args, **kwargs)
        expected = check_pet_soft_labels.reference(case)
        np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-5)
        np.testing.assert_allclose(expected.sum(-1), 1.0)
    for case in checks._select_cases(hidden, CPU):
        expected = check_select_pseudo_labels.reference(case)
        assert checks._valid(set(expected.tolist()), case.data["probs"], case.data["per_class"])
        assert checks._valid(set(pnn.select_pseudo_labels(*case.args, **case.kwargs).tolist()), case.data["probs"],
                             case.data["per_class"])


# ----------------------------------------------------------------------------
# Bad answers get one sentence, never a grader crash


def _raises(*args, **kwargs):
    raise ValueError("not today")


@pytest.mark.parametrize("answer, fragment", [
    (lambda logits, m, w: verb_notebook(logits, m, w) * math.nan, "the result contains nan"),
    (lambda logits, m, w: None, "your function returned None"),
    (_raises, "your function raised ValueError: not today"),
    (lambda logits, m, w: verb_notebook(logits, m, w)[:1], "the result has shape (1, 3), expected (4, 3)"),
    (lambda logits, m, w: verb_notebook(logits, m, w).numpy(), "is a NumPy array, expected a torch.Tensor"),
    (lambda logits, m, w: verb_notebook(logits, m, w).long(), "dtype torch.int64, expected torch.float64 like logits"),
    (lambda logits, m, w: verb_notebook(logits, m, w).float(), "dtype torch.float32, expected torch.float64 like"),
    (lambda logits, m, w: verb_notebook(logits, m, w)[:, None], "an axis of size 1 is left"),
    (lambda logits, m, w: "log-probabilities", "the result is a str, expected a torch.Tensor"),
    (lambda logits, m, w: (verb_notebook(logits, m, w), 0), "the result is a tuple of 2 items"),
])
def test_bad_verbalizer_answers_get_one_sentence(answer, fragment):
    message = str(failure(check_verbalizer_log_probs, answer))
    assert fragment in message, message
    assert_one_sentence(message, "check_verbalizer_log_probs")


@pytest.mark.parametrize("answer, fragment", [
    (lambda s, weights=None, temperature=2.0: pet_notebook(s, weights, temperature) * math.nan,
     "the result contains nan"),
    (lambda s, weights=None, temperature=2.0: None, "your function returned None"),
    (_raises, "your function raised ValueError: not today"),
    (lambda s, weights=None, temperature=2.0: pet_notebook(s, weights, temperature).T, "transposed"),
    (lambda s, weights=None, temperature=2.0: pet_notebook(s, weights, temperature).numpy(),
     "is a NumPy array, expected a torch.Tensor like pattern_log_probs"),
    (lambda s, weights=None, temperature=2.0: pet_notebook(s, weights, temperature).argmax(-1),
     "has dtype torch.int64"),
    (lambda s, weights=None, temperature=2.0: pet_notebook(s, weights, temperature).float(),
     "dtype torch.float32, expected torch.float64"),
    (lambda s, weights=None, temperature=2.0: pet_notebook(s, weights, temperature)[None], "an axis of size 1 is left"),
    (lambda s, weights=None, temperature=2.0: pet_notebook(s, weights, temperature).tolist(),
     "the result is a list of 5 items, expected a torch.Tensor"),
    (lambda s, weights=None, temperature=2.0: pet_notebook(s, weights, temperature) + 0.01,
     "the result differs from the expected by up to 0.01"),
])
def test_bad_pet_answers_get_one_sentence(answer, fragment):
    message = str(failure(check_pet_soft_labels, answer))
    assert fragment in message, message
    assert_one_sentence(message, "check_pet_soft_labels")


@pytest.mark.parametrize("answer, fragment", [
    (lambda probs, per_class: None, "your function returned None"),
    (_raises, "your function raised ValueError: not today"),
    (lambda probs, per_class: sel_notebook(probs, per_class).double() * math.nan, "expected integers (torch.long)"),
    (lambda probs, per_class: sel_notebook(probs, per_class).numpy().astype(float), "expected integers (np.int64)"),
    (lambda probs, per_class: sel_notebook(probs, per_class)[None], "have shape (1, 6), expected a flat 1-D"),
    (lambda probs, per_class: sel_notebook(probs, per_class).reshape(2, 3), "have shape (2, 3), expected a flat 1-D"),
    (lambda probs, per_class: sel_notebook(probs, per_class)[0], "the result is a single index"),
    (lambda probs, per_class: sel_notebook(probs, per_class).tolist() + [2.5], "the result holds a float"),
    (lambda probs, per_class: sel_notebook(probs, per_class).tolist() + [True], "the result holds a bool"),
    (lambda probs, per_class: [-1] + sel_notebook(probs, per_class).tolist(), "index -1 is out of range"),
    (lambda probs, per_class: "2, 3", "the result is a str, expected the indices"),
    (lambda probs, per_class: sel_notebook(probs, per_class)[:-1], "{5} missing (expected {2, 3, 5, 6, 8, 11}"),
    (lambda probs, per_class: torch.cat([sel_notebook(probs, per_class), sel_notebook(probs, per_class)[:1]]),
     "index 2 appears 2 times"),
])
def test_bad_select_answers_get_one_sentence(answer, fragment):
    message = str(failure(check_select_pseudo_labels, answer))
    assert fragment in message, message
    assert_one_sentence(message, "check_select_pseudo_labels")


@pytest.mark.parametrize("convert", [
    lambda t: t, lambda t: t.flip(0), lambda t: t.to(torch.int32), lambda t: t.to(torch.int16), lambda t: t.numpy(),
    lambda t: t.numpy().astype(np.uint8), lambda t: t.tolist(), lambda t: tuple(t.tolist()), lambda t: set(t.tolist()),
    lambda t: [np.int64(i) for i in t.tolist()], lambda t: list(t.unbind()) if len(t) else [],
    lambda t: t[torch.randperm(len(t), generator=torch.Generator().manual_seed(0))],
], ids=["long", "reversed", "int32", "int16", "numpy", "uint8", "list", "tuple", "set", "numpy ints", "0-d tensors",
        "shuffled"])
def test_indices_pass_in_any_order_and_any_integer_container(convert, capsys):
    check_select_pseudo_labels(lambda probs, per_class: convert(sel_notebook(probs, per_class)), hidden=True)
    assert "14 cases passed" in capsys.readouterr().out


def test_duplicates_are_named_even_when_the_set_is_right():
    case = checks._select_cases(False, CPU)[0]
    problem = verdict(check_select_pseudo_labels, lambda probs, per_class: sel_notebook(probs, per_class).repeat(2),
                      case)
    assert problem.startswith("index 2 appears 2 times in the selection")


def test_a_small_class_padded_without_duplicates_is_named():
    """Padded with examples no other class chose: no duplicate, the padding is still named."""
    def padded_with_the_least_confident(probs, per_class):
        chosen = sel_notebook(probs, per_class).tolist()
        short = sum(max(0, per_class - int((probs.argmax(-1) == c).sum())) for c in range(probs.shape[1]))
        rest = [i for i in torch.argsort(probs.max(-1).values).tolist() if i not in chosen]
        return chosen + rest[:short]

    case = checks._select_case(20, checks.IMBALANCED, 3, CPU)  # class 2 has two examples: one short
    assert padded_with_the_least_confident(*case.args) == [2, 8, 0, 3, 11, 7, 6, 5, 9]
    problem = verdict(check_select_pseudo_labels, padded_with_the_least_confident, case)
    assert problem.startswith("the selection differs from the expected, {9} not expected")
    assert problem.endswith(f"it matches {checks.SEL_PADDED}") and "appears" not in problem


def test_the_hints_for_crashes():
    assert "the label word ids index the vocabulary" in checks._explain_verbalizer_error(
        IndexError("index 11 is out of bounds for dimension 1 with size 7"))
    assert "different numbers of label words" in checks._explain_verbalizer_error(
        RuntimeError("stack expects each tensor to be equal size, but got [4, 2] at entry 0 and [4, 1] at entry 1"))
    assert checks._explain_verbalizer_error(ValueError("something else")) is None
    assert "weights may be None" in checks._explain_pet_error(RuntimeError("Could not infer dtype of NoneType"))
    assert "weights[:, None, None]" in checks._explain_pet_error(
        RuntimeError("The size of tensor a (4) must match the size of tensor b (3) at non-singleton dimension 2"))
    assert "fewer predicted examples than per_class" in checks._explain_select_error(
        RuntimeError("selected index k out of range"))
    assert "fewer predicted examples than per_class" in checks._explain_select_error(
        ValueError("kth(=5) out of bounds (3)"))
    assert "no predicted example at all" in checks._explain_select_error(
        IndexError("index -1 is out of bounds for dimension 0 with size 0"))


def test_a_b_b_v_mix_that_crashes_gets_the_axis_hint():
    """logits[:, mask_positions] then [:, ids] indexes the batch axis with word ids: an IndexError, hinted."""
    def mix(logits, mask_positions, label_word_ids):
        at = logits[:, mask_positions]
        return torch.log_softmax(torch.stack([at[:, ids].mean(-1) for ids in label_word_ids], -1), -1)

    message = str(failure(check_verbalizer_log_probs, mix))
    assert "IndexError" in message and "the label word ids index the vocabulary" in message


# ----------------------------------------------------------------------------
# Sealing


def test_sealing_catches_the_course_versions_under_other_names():
    assert "calls plmcourse.ref.verbalizer_log_probs" in str(failure(
        check_verbalizer_log_probs, lambda logits, m, w: torch.from_numpy(
            early_verbalizer_log_probs(logits.numpy(), m.numpy(), w)).to(logits.dtype)))
    assert "calls plmcourse.nn.pet_soft_labels" in str(failure(
        check_pet_soft_labels, lambda s, weights=None, temperature=2.0: early_pet_soft_labels(s, weights, temperature)))
    assert "calls plmcourse.ref.select_pseudo_labels" in str(failure(
        check_select_pseudo_labels, lambda probs, k: early_select_pseudo_labels(probs.numpy(), k)))
    namespace = {}  # a verbatim copy of the course's module counts as calling it
    exec(compile(open(pnn.prompting.__file__).read(), "copied.py", "exec"), namespace)
    for name in NAMES:
        function = namespace[name.removeprefix("check_")]
        assert f"calls plmcourse.nn.{function.__name__}" in str(failure(getattr(judging, name), function))


def test_the_seal_is_lifted_afterwards():
    with pytest.raises(core.CheckFailed):
        check_select_pseudo_labels(pnn.select_pseudo_labels)
    assert pnn.select_pseudo_labels(torch.tensor([[0.9, 0.1], [0.2, 0.8]]), 1).tolist() == [0, 1]
    assert not torch.overrides._get_current_function_mode_stack()


# ----------------------------------------------------------------------------
# Through the wire as here; the random generators left alone


@pytest.mark.parametrize("check_name, mistake", [
    ("check_verbalizer_log_probs", None), ("check_verbalizer_log_probs", "row 0's mask position for every row"),
    ("check_verbalizer_log_probs", "T and V axes swapped"), ("check_verbalizer_log_probs", "a NumPy array returned"),
    ("check_verbalizer_log_probs", "calls the course's torch version"),
    ("check_pet_soft_labels", None), ("check_pet_soft_labels", "weights=None not handled"),
    ("check_pet_soft_labels", "weights normalised in place"), ("check_pet_soft_labels", "temperature ignored"),
    ("check_select_pseudo_labels", None), ("check_select_pseudo_labels", "small classes padded (masked topk)"),
    ("check_select_pseudo_labels", "a list of per-class tensors"), ("check_select_pseudo_labels", "a boolean mask"),
])
def test_the_same_verdict_through_the_wire_as_here(check_name, mistake):
    answer = CATALOGUE[check_name][0][0][1] if mistake is None else find_mistake(CATALOGUE, check_name, mistake)
    local = None
    try:
        getattr(judging, check_name)(answer, hidden=True)
    except core.CheckFailed as failed:
        local = str(failed)
    check = getattr(judging, check_name)
    passed, sentence, flags, shown = judged(check_name, check.driver(answer) if check.driver else answer)
    assert passed is (mistake is None) and (local is None) is (mistake is None)
    assert shown == ("passed" if passed else sentence)
    if not passed:
        assert sentence == local
    assert flags == []


@pytest.mark.parametrize("name", [name for name, _ in CATALOGUE["check_select_pseudo_labels"][0]])
def test_every_kind_of_index_container_passes_through_the_wire(name):
    answer = dict(CATALOGUE["check_select_pseudo_labels"][0])[name]
    passed, sentence, _, _ = judged("check_select_pseudo_labels", answer)
    assert passed, sentence


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_checks_on_cuda(capsys):
    for name in NAMES:
        check = getattr(judging, name)
        for _, fn in CATALOGUE[name][0]:
            check(fn, hidden=True, device="cuda")
    for name, mistake in (("check_verbalizer_log_probs", "position 0 instead of the mask"),
                          ("check_pet_soft_labels", "weights ignored"), ("check_select_pseudo_labels", "global top-k")):
        wrong = find_mistake(CATALOGUE, name, mistake)
        check = getattr(judging, name)
        assert str(failure(check, wrong, device="cuda")) == str(failure(check, wrong))

    def moves_to_cpu(logits, mask_positions, label_word_ids):
        return verb_notebook(logits, mask_positions, label_word_ids).cpu()

    assert "expected cuda:0 like logits" in str(failure(check_verbalizer_log_probs, moves_to_cpu, device="cuda"))


@pytest.mark.integration  # a fresh Python process
def test_the_checks_stay_fast_in_a_fresh_kernel():
    """Nothing the checks run loads torch._dynamo (a second or more per kernel)."""
    import pathlib
    import subprocess
    import sys

    code = ("import sys, plmcourse.grading as g\n"
            "from mistake_catalogue.prompting_mistakes import verb_notebook, pet_notebook, sel_notebook\n"
            "g.check_verbalizer_log_probs(verb_notebook, hidden=True)\n"
            "g.check_pet_soft_labels(pet_notebook, hidden=True)\n"
            "g.check_select_pseudo_labels(sel_notebook, hidden=True)\n"
            "assert 'torch._dynamo' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], cwd=pathlib.Path(__file__).parent, check=True, capture_output=True,
                   timeout=120)
