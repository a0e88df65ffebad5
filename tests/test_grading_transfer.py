"""The checks of notebook 13: alignment_precision_at_1, whole_entity_mask and unfreezing_groups (NumPy)."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import dataclasses

import numpy as np
import pytest

import plmcourse.judging as judging
from mistake_catalogue import assert_one_sentence, catalogue_tests, failure
from mistake_catalogue.transfer_mistakes import (
    CATALOGUE,
    align_notebook,
    entity_notebook,
    unfreeze_notebook,
)
from plmcourse import ref
from plmcourse.judging import check_alignment_precision_at_1, check_unfreezing_groups, check_whole_entity_mask
from plmcourse.judging import transfer as checks

NAMES = ["check_alignment_precision_at_1", "check_whole_entity_mask", "check_unfreezing_groups"]

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning")]


# ----------------------------------------------------------------------------
# The catalogue

(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


def test_the_course_versions_pass_with_the_seal_lifted(capsys):
    for name, answer in (("check_alignment_precision_at_1", ref.alignment_precision_at_1),
                         ("check_whole_entity_mask", ref.whole_entity_mask),
                         ("check_unfreezing_groups", ref.unfreezing_groups)):
        unsealed = dataclasses.replace(getattr(judging, name), seal=())
        for hidden in (False, True, 7000):
            unsealed(answer, hidden=hidden)
    assert capsys.readouterr().out.count("cases passed") == 9


def test_the_notebook_answers_get_full_marks(capsys):
    for check, answer in ((check_alignment_precision_at_1, align_notebook), (check_whole_entity_mask, entity_notebook),
                          (check_unfreezing_groups, unfreeze_notebook)):
        for hidden in (False, True, 123000):
            check(answer, hidden=hidden)
    assert capsys.readouterr().out.count("cases passed") == 9


# ----------------------------------------------------------------------------
# The references: by hand, and against each other


def test_alignment_by_hand():
    """d = 2, the target plane turned by 90 degrees: both test words land on their targets; without the map
    neither does (tests/.. the check's hand case, worked out in its docstring)."""
    case = checks._hand_case()
    src, tgt, train, test = case.args
    assert ref.alignment_precision_at_1(src, tgt, train, test) == 1.0
    w = ref.transfer.procrustes(ref.transfer.unit_rows(src)[train[:, 0]], ref.transfer.unit_rows(tgt)[train[:, 1]])
    assert np.allclose(w, [[0.0, 1.0], [-1.0, 0.0]])  # (x, y) -> (-y, x)
    assert checks._precision(src, tgt, train, test, no_map=True) == 0.0


def test_alignment_counts_sources_once_and_breaks_ties_low():
    src = np.eye(3)
    tgt = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 1.0, 0], [0, 0, 1.0]])  # rows 1 and 2 tie
    train = np.array([[0, 0], [1, 1], [2, 3]])
    assert ref.alignment_precision_at_1(src, tgt, train, np.array([[1, 2]])) == 0.0  # the tie goes to row 1
    assert ref.alignment_precision_at_1(src, tgt, train, np.array([[1, 1]])) == 1.0
    # source 1 with two translations counts once (right), source 2 is right: 2 of 2
    assert ref.alignment_precision_at_1(src, tgt, train, np.array([[1, 1], [1, 2], [2, 3]])) == 1.0


def test_alignment_zero_rows_stay_zero():
    x = ref.transfer.unit_rows(np.array([[0.0, 0.0], [3.0, 4.0]]))
    assert np.array_equal(x, [[0.0, 0.0], [0.6, 0.8]])


def test_alignment_torch_version_agrees_with_the_reference():
    import torch

    from plmcourse.nn import transfer as nn_transfer

    for case in checks._alignment_cases(True):
        d = case.data
        assert nn_transfer.alignment_precision_at_1(torch.tensor(d["src"]), torch.tensor(d["tgt"]), d["train"],
                                                    d["test"]) == ref.alignment_precision_at_1(
            d["src"], d["tgt"], d["train"], d["test"])


def test_whole_entity_mask_by_hand():
    """Budget 3 on [a b c d e] with the entity (1, 4): the entity fits only when it comes first."""
    tokens = np.array([[10, 11, 12, 13, 14]])
    seen = set()
    for seed in range(40):
        inputs, labels = ref.whole_entity_mask(tokens, [[(1, 4)]], 3, np.random.default_rng(seed), 3, 20)
        chosen = tuple(np.flatnonzero(labels[0] != -100))
        seen.add(chosen)
        assert chosen in {(1, 2, 3), (0, 4)}  # the entity alone, or both single tokens
        assert np.all(labels[0][list(chosen)] == tokens[0][list(chosen)])
        shown = inputs[0, 1:4]
        assert np.all(shown == 3) or not np.any(shown == 3)  # one treatment for the whole entity
    assert seen == {(1, 2, 3), (0, 4)}


def test_whole_entity_mask_edges():
    tokens = np.arange(10, 18).reshape(1, 8)
    _, labels = ref.whole_entity_mask(tokens, [[(2, 5)]], 0, np.random.default_rng(0), 3, 30)
    assert np.all(labels == -100)
    _, labels = ref.whole_entity_mask(tokens, [[(2, 5)]], 8, np.random.default_rng(0), 3, 30)
    assert np.array_equal(labels, tokens)


def test_unfreezing_by_hand():
    rates = ref.unfreezing_groups(2, 10, 10, 1e-3, 0.5)
    assert rates == {"head": 1e-3, "layer.1": 5e-4, "layer.0": 0.0, "embeddings": 0.0}
    assert ref.unfreezing_groups(2, 30, 10, 1.0, 0.5) == {"head": 1.0, "layer.1": 0.5, "layer.0": 0.25,
                                                          "embeddings": 0.125}
    assert set(ref.unfreezing_groups(3, 0, 0, 1.0, 1.0).values()) == {1.0}


def test_the_torch_groups_follow_the_names():
    from plmcourse.nn import transfer as nn_transfer
    from plmcourse.nn.models import Bert, BertForSequenceClassification

    model = BertForSequenceClassification(Bert(nn_transfer.tiny_config(20)), 2)
    groups = nn_transfer.parameter_groups(model)
    assert list(groups) == ref.transfer.group_names(2)
    assert sum(p.numel() for ps in groups.values() for p in ps) == sum(p.numel() for p in model.parameters())


# ----------------------------------------------------------------------------
# The cases


def test_the_alignment_cases_cover_every_clause():
    cases = checks._alignment_cases(False)
    tags = set().union(*(c.tags for c in cases))
    assert {"lists", "perfect", "two translations", "tie", "zero row", "float32", "hand"} <= tags
    values = [checks._alignment_reference(c) if hasattr(checks, "_alignment_reference") else
              ref.alignment_precision_at_1(c.data["src"], c.data["tgt"], c.data["train"], c.data["test"])
              for c in cases]
    assert 1.0 in values and any(0.2 < v < 0.95 for v in values)


def test_each_alignment_mistake_shows_in_some_visible_case():
    cases = checks._alignment_cases(False)
    for description, _ in checks._alignment_mistakes(cases[0].data):
        assert any(abs(dict(checks._alignment_mistakes(c.data))[description]()
                       - ref.alignment_precision_at_1(c.data["src"], c.data["tgt"], c.data["train"], c.data["test"]))
                   > 1e-12 for c in cases), description


def test_the_entity_cases_cover_every_clause():
    cases = checks._entity_mask_cases(False)
    assert {c.data["stats"] for c in cases} >= {"long", "pair", "singles", None}
    tags = set().union(*(c.tags for c in cases))
    assert {"budget 0", "budget all", "lists", "arrays"} <= tags
    for c in cases:
        assert not np.any(c.data["tokens"] == c.data["mask_id"])  # a [MASK] shown is always the answer's


def test_hidden_runs_extend_the_visible_ones_with_other_seeds():
    for name in NAMES:
        check = getattr(judging, name)
        visible = [c.label for c in check.cases(False)]
        salted = {salt: [c.label for c in check.cases(salt)] for salt in (True, 5000)}
        assert salted[True][:len(visible)] == visible == salted[5000][:len(visible)]
        assert salted[True][len(visible):] != salted[5000][len(visible):]


def test_an_honest_random_answer_rarely_fails():
    """The statistical rules on 3 fresh salts: the course's masking passes all of them."""
    unsealed = dataclasses.replace(check_whole_entity_mask, seal=())
    for salt in (1000, 1003, 1006):
        unsealed(ref.whole_entity_mask, hidden=salt)


# ----------------------------------------------------------------------------
# Bad answers get one sentence, never a grader crash


def _raises(*args, **kwargs):
    raise ValueError("not today")


@pytest.mark.parametrize("check, answer, fragment", [
    (check_alignment_precision_at_1, lambda *a: None, "your function returned None"),
    (check_alignment_precision_at_1, _raises, "your function raised ValueError: not today"),
    (check_alignment_precision_at_1, lambda *a: "0.5", "expected one number"),
    (check_alignment_precision_at_1, lambda *a: float("nan"), "the score is nan"),
    (check_whole_entity_mask, lambda *a: None, "your function returned None"),
    (check_whole_entity_mask, lambda t, *a: t, "expected the pair (inputs, labels)"),
    (check_whole_entity_mask, lambda t, *a: (t, t[:, :2]), "labels have shape"),
    (check_whole_entity_mask, _raises, "your function raised ValueError"),
    (check_unfreezing_groups, lambda *a: None, "your function returned None"),
    (check_unfreezing_groups, lambda *a: {"head": float("nan")}, "missing"),
    (check_unfreezing_groups, _raises, "your function raised ValueError"),
])
def test_bad_answers_get_one_sentence(check, answer, fragment):
    message = str(failure(check, answer))
    assert fragment in message, message
    assert_one_sentence(message, check.name)
