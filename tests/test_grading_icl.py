"""plmcourse.judging.icl (notebook 11): right answers pass, every catalogued mistake fails with its hint, bad
answers get one sentence, the references agree with cases worked by hand, and the verdicts are the same
through the wire as here (k_shot_prompt's answer is driven: its out-of-range cases report what it raised)."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import dataclasses
import math

import numpy as np
import pytest
import torch

# Aliases taken before the checks are imported, as a notebook might: sealing must still see them.
from plmcourse.data.icl import k_shot_prompt as early_k_shot_prompt
from plmcourse.ref.icl import induction_score as early_induction_score

import plmcourse.judging as judging
from mistake_catalogue import assert_one_sentence, catalogue_tests, failure, find_mistake
from mistake_catalogue.icl_mistakes import CATALOGUE, induction_notebook, prompt_notebook
from plmcourse import data, ref
from plmcourse.judging import check_induction_score, check_k_shot_prompt, core
import plmcourse.grading
from plmcourse.grading import core as kernel  # the declarations' side, what a grading kernel runs
from plmcourse.judging import icl as checks
from support import judged as judged_by_name


# Wrong answers take means of nothing on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def prompt_mistake(name):
    return find_mistake(CATALOGUE, "check_k_shot_prompt", name)


def induction_mistake(name):
    return find_mistake(CATALOGUE, "check_induction_score", name)


# ----------------------------------------------------------------------------
# The catalogue


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


def test_the_named_mistakes_are_in_the_catalogue():
    names = {check: {name for name, _, _ in mistakes} for check, (_, mistakes) in CATALOGUE.items()}
    assert {"the query leaked (drawn from every index)", "drawn with replacement", "k ignored: every other example",
            "k ignored: always three", "sorted indices", "others after the query first", "others in decreasing order",
            "the query with its answer", "the query with y=\"\"", "a separator after the query",
            "no separator before the query", "a separator before a lone query", "the query first",
            "rng.permutation", "rng.integers", "a fresh generator instead of rng", "the global np.random",
            "examples equal to the query's pair left out", "k clipped into range, no ValueError",
            "IndexError for k out of range", "calls the course's version"} <= names["check_k_shot_prompt"]
    assert {"attention on s (a duplicate-token head)", "averaged over all T positions", "s = -1 kept: column 0 read",
            "query and key axes swapped", "first occurrence instead of the latest",
            "the mean over heads too (a number)", "the mean over heads too (shape (1,))",
            "NaN when no token repeats", "t counts as its own earlier occurrence",
            "the latest equal token anywhere, later ones too", "the sum instead of the mean",
            "calls the course's version", "calls the course's helper"} <= names["check_induction_score"]


def test_the_course_versions_pass_with_the_seal_lifted(capsys):
    """The course's own answers are sealed; with the seal lifted, the checks give them full marks."""
    for check, answer in ((check_k_shot_prompt, data.k_shot_prompt), (check_induction_score, ref.induction_score)):
        unsealed = dataclasses.replace(check, seal=())
        for hidden in (False, True, 7000):
            unsealed(answer, hidden=hidden)
    assert capsys.readouterr().out.count("cases passed") == 6


def test_the_notebook_answers_get_full_marks(capsys):
    for check, answer in ((check_k_shot_prompt, prompt_notebook), (check_induction_score, induction_notebook)):
        for hidden in (False, True, 1000, 123000, 1_000_000_000):
            check(answer, hidden=hidden)
    assert capsys.readouterr().out.count("cases passed") == 10


# ----------------------------------------------------------------------------
# The references, by hand


def test_induction_score_by_hand():
    """tokens A B A A B: t = 2 (s = 0, reads column 1), t = 3 (the latest A is s = 2, so it reads column 3,
    itself; the first A would give column 1), t = 4 (s = 1, reads column 2); t = 0 and 1 do not count."""
    tokens = [1, 2, 1, 1, 2]
    attention = np.zeros((2, 5, 5))
    attention[0] = [[1.0, 0.0, 0.0, 0.0, 0.0],
                    [0.5, 0.5, 0.0, 0.0, 0.0],
                    [0.2, 0.7, 0.1, 0.0, 0.0],
                    [0.1, 0.2, 0.3, 0.4, 0.0],
                    [0.1, 0.1, 0.6, 0.1, 0.1]]
    attention[1] = np.tril(np.ones((5, 5))) / np.arange(1, 6)[:, None]  # uniform: 1 / (t + 1)
    expected = [(0.7 + 0.4 + 0.6) / 3, (1 / 3 + 1 / 4 + 1 / 5) / 3]
    np.testing.assert_allclose(ref.induction_score(attention, tokens), expected, rtol=1e-14)
    np.testing.assert_allclose(ref.induction_score(attention, np.array(tokens, dtype=np.int32)), expected)
    np.testing.assert_allclose(ref.induction_score(attention.astype(np.float32), tokens), expected, rtol=1e-6)
    # The judge's mistakes give, on head 0: s itself (0.2 + 0.3 + 0.1) / 3, the first A at t = 3 (0.7 + 0.2 +
    # 0.6) / 3, the sum 1.7, every position 1.7 / 5, column 0 for t = 0 and 1 (1 + 0.5 + 1.7) / 5.
    case = checks._induction_case(0, tokens, 2)
    case.data["attention"] = attention
    mistakes = list(checks._induction_mistakes(case.data))

    def head_0(start):
        return next(f() for text, f in mistakes if text.startswith(start))[0]

    assert head_0("the attention on the earlier copy s itself") == pytest.approx(0.6 / 3)
    assert head_0("the FIRST earlier occurrence") == pytest.approx(1.5 / 3)
    assert head_0("the sum over the positions") == pytest.approx(1.7)
    assert head_0("every position averaged, those whose token did not appear before as 0") == pytest.approx(1.7 / 5)
    assert head_0("every position averaged, those whose token did not appear before with s = -1") == pytest.approx(
        (1 + 0.5 + 1.7) / 5)
    assert head_0("the attention on the previous position") == pytest.approx((0.7 + 0.3 + 0.1) / 3)


def test_induction_score_edge_cases_by_hand():
    two = np.array([[[1.0, 0.0], [0.3, 0.7]]])
    assert ref.induction_score(two, [5, 5]).tolist() == [0.7]  # s = 0, s + 1 = 1 = t: the diagonal
    assert ref.induction_score(two, [5, 6]).tolist() == [0.0]  # nothing repeats: zeros, not NaN
    none = ref.induction_score(np.ones((3, 4, 4)) / 4, [1, 2, 3, 4])
    assert none.shape == (3,) and not none.any()


def test_structured_heads_score_as_named():
    """A perfect induction head scores 1, a duplicate-token head 0; a previous-token head scores the share of
    queries whose earlier copy is two back (s + 1 == t - 1)."""
    case = checks._induction_cases(False)[2]
    assert "a perfect induction head, a previous-token head, a duplicate-token head, uniform attention" in case.label
    tokens = case.data["tokens"]
    s = checks._earlier(tokens)
    q = np.flatnonzero(s >= 0)
    scores = ref.induction_score(*case.args)
    assert scores[0] == 1.0 and scores[2] == 0.0
    assert scores[1] == pytest.approx(np.mean(s[q] + 1 == q - 1))
    assert scores[3] == pytest.approx(np.mean(1 / (q + 1)))


def test_k_shot_prompt_by_hand():
    examples = [("cheese", "fromage"), ("bread", "pain"), ("sea", "mer")]
    # others = [0, 1]: seed 2 draws them as [1, 0], seed 0 as [0, 1].
    assert data.k_shot_prompt(examples, 2, 2, "{x} => {y}", "\n", np.random.default_rng(2)) == (
        "bread => pain\ncheese => fromage\nsea => ")
    assert data.k_shot_prompt(examples, 2, 2, "{x} => {y}", "\n", np.random.default_rng(0)) == (
        "cheese => fromage\nbread => pain\nsea => ")
    # k = 1: seed 1 draws [0], seed 0 [1]; the defaults "{x} -> {y}" and "\n".
    assert data.k_shot_prompt(examples, 2, 1, rng=np.random.default_rng(1)) == "cheese -> fromage\nsea -> "
    assert data.k_shot_prompt(examples, 2, 1, rng=np.random.default_rng(0)) == "bread -> pain\nsea -> "
    # Zero-shot; text after {y} dropped from the query; a template with a newline, and another separator.
    assert data.k_shot_prompt(examples, 0, 0, "{x} = {y}.", rng=np.random.default_rng(0)) == "cheese = "
    assert data.k_shot_prompt(examples, 0, 2, "Q: {x}\nA: {y}", "\n\n", np.random.default_rng(2)) == (
        "Q: sea\nA: mer\n\nQ: bread\nA: pain\n\nQ: cheese\nA: ")  # others = [1, 2], drawn [2, 1]
    assert data.k_shot_prompt([["a", "1"], ["b", "2"]], 1, 1, "{x}{y}", "", np.random.default_rng(9)) == "a1b"
    # The query's pair again at index 1 is another example: with k = 2 both others are shown.
    assert data.k_shot_prompt([("a", "1"), ("a", "1"), ("b", "2")], 0, 2, "{x}{y}", " ",
                              np.random.default_rng(0)) == "a1 b2 a"
    for k in (3, -1):
        with pytest.raises(ValueError):
            data.k_shot_prompt(examples, 0, k, rng=np.random.default_rng(0))


def test_the_prompt_mistakes_are_what_they_say_by_hand():
    examples = [("cheese", "fromage"), ("bread", "pain"), ("sea", "mer")]
    d = {"demos": examples, "query": 2, "k": 2, "template": "{x} = {y}.", "separator": "\n", "seed": 2}
    assert checks._variant(d) == "bread = pain.\ncheese = fromage.\nsea = "
    assert checks._variant(d, query="answer").endswith("sea = mer.")
    assert checks._variant(d, query="empty").endswith("sea = .")
    assert checks._variant(d, query="stripped").endswith("sea =")
    assert checks._variant(d, join="trailing").endswith("sea = \n")
    assert checks._variant(d, join="query glued").endswith("cheese = fromage.sea = ")
    assert checks._variant(d, join="query first") == "sea = \nbread = pain.\ncheese = fromage."
    assert checks._variant(d, draw="sorted") == "cheese = fromage.\nbread = pain.\nsea = "
    assert checks._variant({**d, "k": 0}, join="separator before the query") == "\nsea = "


# ----------------------------------------------------------------------------
# The cases


def test_the_prompt_cases_cover_every_clause():
    cases = checks._prompt_cases(False)
    valid = [c for c in cases if not c.data["error"]]
    ks = {(c.data["k"], len(c.data["demos"])) for c in valid}
    assert any(k == 0 for k, _ in ks) and any(k == 1 for k, _ in ks) and any(k == n - 1 > 1 for k, n in ks)
    assert any(1 < k < n - 1 for k, n in ks)
    queries = {("first" if c.data["query"] == 0 else "last" if c.data["query"] == len(c.data["demos"]) - 1
                else "middle") for c in valid}
    assert queries == {"first", "middle", "last"}
    assert {"{x} -> {y}", "Q: {x}\nA: {y}", "{x}{y}", "{x} = {y}."} <= {c.data["template"] for c in valid}
    assert {"\n", " ", "\n\n", ""} <= {c.data["separator"] for c in valid}
    assert {c.data["kind"] for c in valid} == {tuple, list}
    assert any(checks._shows_duplicate_of_query(c) for c in valid)
    assert sorted(c.data["k"] - len(c.data["demos"]) for c in cases if c.data["error"] is True) == [-8, 0]  # -1, len
    assert [c.data["template"] for c in cases if c.data["error"] == "template"] == ["{y} <- {x}"]
    assert all("rng" in c.kwargs for c in cases if c.data["seed"] is not None)
    assert [c.data["seed"] for c in cases].count(None) == 1


@pytest.mark.parametrize("hidden", [False, True])
def test_every_known_prompt_mistake_is_told_apart_from_the_right_prompt_somewhere(hidden):
    cases = [c.data for c in checks._prompt_cases(hidden) if not c.data["error"] and c.data["seed"] is not None]
    for description, switches in checks.PROMPT_MISTAKES:
        def differs(d):
            try:
                return checks._variant(d, **switches) != checks._variant(d)
            except ValueError:
                return True
        assert any(differs(d) for d in cases), description


@pytest.mark.parametrize("hidden", [False, True])
def test_every_known_induction_mistake_is_told_apart_on_the_first_case(hidden):
    case = checks._induction_cases(hidden)[0]
    expected = ref.induction_score(*case.args)
    mistakes = list(checks._induction_mistakes(case.data))
    assert len(mistakes) >= 9
    values = [f() for _, f in mistakes]
    for (description, _), value in zip(mistakes, values):
        assert not np.allclose(value, expected, atol=1e-3), description
    for i in range(len(values)):  # and from one another, so the first to match is the one
        for j in range(i):
            assert not np.allclose(values[i], values[j], atol=1e-3), (mistakes[i][0], mistakes[j][0])


def test_the_induction_cases_cover_every_clause():
    cases = checks._induction_cases(False)
    tags = set().union(*(c.tags for c in cases))
    assert {"random", "induction", "previous", "duplicate", "float32", "list", "array", "no repeat",
            "twice in a row", "latest is not first", "negative ids"} <= tags
    assert {c.data["attention"].shape[0] for c in cases} >= {1, 3}
    assert any(len(c.data["tokens"]) == 2 and "no repeat" not in c.tags for c in cases)
    assert any(len(c.data["tokens"]) == 2 and "no repeat" in c.tags for c in cases)
    assert any(np.bincount(c.data["tokens"] - c.data["tokens"].min()).max() >= 4 for c in cases)
    assert any(isinstance(c.args[1], np.ndarray) and c.args[1].dtype == np.int32 for c in cases)
    for case in checks._induction_cases(7000):  # every head's rows sum to 1, nothing above the diagonal
        attention = case.data["attention"].astype(np.float64)
        np.testing.assert_allclose(attention.sum(-1), 1.0, rtol=1e-6)
        assert not np.triu(attention, k=1).any()


def test_hidden_runs_extend_the_visible_ones_with_other_seeds():
    for check in (check_k_shot_prompt, check_induction_score):
        visible = [c.label for c in check.cases(False)]
        salted = {salt: [c.label for c in check.cases(salt)] for salt in (True, 5000)}
        assert salted[True][:len(visible)] == visible == salted[5000][:len(visible)]
        assert salted[True][len(visible):] != salted[5000][len(visible):]


# ----------------------------------------------------------------------------
# Bad answers get one sentence, never a grader crash


def _raises(*args, **kwargs):
    raise ValueError("not today")


@pytest.mark.parametrize("answer, fragment", [
    (lambda attention, tokens: induction_notebook(attention, tokens) * math.nan, "the result contains nan"),
    (lambda attention, tokens: None, "your function returned None"),
    (_raises, "your function raised ValueError: not today"),
    (lambda attention, tokens: induction_notebook(attention, tokens)[:1], "the result has shape (1,), expected (3,)"),
    (lambda attention, tokens: induction_notebook(attention, tokens)[None],
     "the scores are right, return them as a flat"),
    (lambda attention, tokens: induction_notebook(attention, tokens).astype(bool), "has dtype bool, expected a float"),
    (lambda attention, tokens: "0.5", "the result is a str, expected a NumPy array"),
    (lambda attention, tokens: (induction_notebook(attention, tokens), 0), "the result is a tuple of 2 items"),
    (lambda attention, tokens: induction_notebook(attention, tokens) + 0.01, "the result differs from the expected"),
    (lambda attention, tokens: {"scores": 1}, "the result is a dict, expected a NumPy array"),
])
def test_bad_induction_answers_get_one_sentence(answer, fragment):
    message = str(failure(check_induction_score, answer))
    assert fragment in message, message
    assert_one_sentence(message, "check_induction_score")


def test_scores_returned_in_float32_pass_and_rounded_ones_do_not(capsys):
    """A mean of weights rounded to float32 is within float64's rtol (1e-7); to 3 digits it is not."""
    check_induction_score(lambda attention, tokens: induction_notebook(attention, tokens).astype(np.float32))
    assert "cases passed" in capsys.readouterr().out
    message = str(failure(check_induction_score, lambda attention, tokens: induction_notebook(attention, tokens)
                          .round(3)))
    assert "the result differs from the expected by up to" in message and "failed on case 1 " in message


def test_zeros_of_the_wrong_length_when_nothing_repeats_are_named():
    def zeros_per_position(attention, tokens):
        score = induction_notebook(attention, tokens)
        return score if score.any() else np.zeros(len(tokens))

    assert "when no token repeats, return np.zeros(H)" in str(failure(check_induction_score, zeros_per_position))

    def number_zero(attention, tokens):
        score = induction_notebook(attention, tokens)
        return score if score.any() else 0.0

    assert "when no token repeats, return np.zeros(H)" in str(failure(check_induction_score, number_zero))


def test_inputs_are_compared_before_and_after():
    def sneaky(attention, tokens):
        score = induction_notebook(attention, tokens)
        attention[:] = 0
        return score

    assert "changed its input attention in place" in str(failure(check_induction_score, sneaky))


def test_a_crash_on_a_list_of_tokens_gets_a_hint():
    def list_crash(attention, tokens):
        assert isinstance(tokens, np.ndarray) or tokens.shape
        return induction_notebook(attention, tokens)

    message = str(failure(check_induction_score, list_crash))
    assert "AttributeError" in message and "tokens may be a list: np.asarray(tokens) first" in message


@pytest.mark.parametrize("answer, fragment", [
    (lambda d, q, k, template="{x} -> {y}", separator="\n", rng=None: None, "your function returned None"),
    (_raises, "your function raised ValueError: not today"),
    (lambda d, q, k, template="{x} -> {y}", separator="\n", rng=None: 3, "the result is a int, expected a str"),
    (lambda d, q, k, template="{x} -> {y}", separator="\n", rng=None: torch.zeros(2),
     "the result is a torch.Tensor, expected a str"),
    (lambda *args, **kwargs: prompt_notebook(*args, **kwargs) + "!", "your prompt goes on after the"),
    (lambda *args, **kwargs: prompt_notebook(*args, **kwargs)[:-2], "your prompt stops after"),
    (lambda *args, **kwargs: prompt_notebook(*args, **kwargs).upper(), "from character 0 on"),
    (lambda d, q, k, template="{x} -> {y}", separator="\n", rng=None: [prompt_notebook(d, q, k, template,
                                                                                        separator, rng), 1],
     "the result is a list of 2 items, expected a str"),
])
def test_bad_prompt_answers_get_one_sentence(answer, fragment):
    message = str(failure(check_k_shot_prompt, answer))
    assert fragment in message, message
    assert_one_sentence(message, "check_k_shot_prompt")


def test_a_str_subclass_is_named_and_never_compared():
    class Everything(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    def student(*args, **kwargs):
        return Everything(prompt_notebook(*args, **kwargs))

    assert "the result is a Everything, a subclass of str; return a plain str" in str(
        failure(check_k_shot_prompt, student))


def test_messages_show_where_a_long_prompt_first_differs_shortened():
    expected = "x -> y\n" * 200 + "query -> "
    got = "x -> y\n" * 150 + "x -> z\n" + "x -> y\n" * 49 + "query -> "
    problem = checks._where_they_differ(got, expected)
    assert problem.startswith(f"the prompt differs from the expected from character {150 * 7 + 5} on")
    assert "expected ...'" in problem and "'..., got ...'" in problem and len(problem) < 250
    assert "x -> z" in problem and "\n" not in problem
    message = str(failure(check_k_shot_prompt, prompt_mistake("the query with its answer")))
    assert len(message) < 700 and "\n" not in message


def test_the_out_of_range_cases_name_what_came_instead_of_a_value_error():
    def type_error(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
        if k < 0 or k >= len(demonstrations):
            raise TypeError("bad k")
        return prompt_notebook(demonstrations, query, k, template, separator, rng)

    message = str(failure(check_k_shot_prompt, type_error))
    assert "so your function must raise ValueError, but it raised TypeError: bad k" in message
    assert "failed on case 9 of 13" in message


def test_without_an_rng_any_k_other_examples_in_any_order_pass(capsys):
    def reversed_when_unseeded(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
        if rng is not None:
            return prompt_notebook(demonstrations, query, k, template, separator, rng)
        others = [i for i in range(len(demonstrations)) if i != query][::-1][:k]
        parts = [template.format(x=demonstrations[i][0], y=demonstrations[i][1]) for i in others]
        return separator.join(parts + [template[:template.index("{y}")].format(x=demonstrations[query][0])])

    check_k_shot_prompt(reversed_when_unseeded, hidden=True)

    def one_less_when_unseeded(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
        if rng is not None:
            return prompt_notebook(demonstrations, query, k, template, separator, rng)
        return prompt_notebook(demonstrations, query, k - 1, template, separator)

    message = str(failure(check_k_shot_prompt, one_less_when_unseeded))
    assert "with rng not passed, the prompt must still be k=4 of the other examples" in message
    assert "it reads as the prompt holds 3 demonstrations" in message


# ----------------------------------------------------------------------------
# Sealing


def test_sealing_catches_the_course_versions_under_other_names():
    assert "calls plmcourse.ref.induction_score" in str(
        failure(check_induction_score, lambda attention, tokens: early_induction_score(attention, tokens)))
    assert "calls plmcourse.data.k_shot_prompt" in str(
        failure(check_k_shot_prompt, lambda *args, **kwargs: early_k_shot_prompt(*args, **kwargs)))
    assert "calls plmcourse.ref.induction_score" in str(failure(check_induction_score, ref.icl.induction_score))
    for module, check, name, label in (
            (ref.icl, check_induction_score, "induction_score", "plmcourse.ref.induction_score"),
            (data.icl, check_k_shot_prompt, "k_shot_prompt", "plmcourse.data.k_shot_prompt")):
        namespace = {}  # a verbatim copy of the course's module counts as calling it
        exec(compile(open(module.__file__).read(), "copied.py", "exec"), namespace)
        assert f"calls {label}" in str(failure(check, namespace[name]))


def test_the_seal_is_lifted_afterwards():
    with pytest.raises(core.CheckFailed):
        check_induction_score(early_induction_score)
    with pytest.raises(core.CheckFailed):
        check_k_shot_prompt(early_k_shot_prompt)
    assert early_induction_score(np.array([[[1.0, 0.0], [0.5, 0.5]]]), [3, 3]).tolist() == [0.5]
    assert early_k_shot_prompt([("a", "1"), ("b", "2")], 0, 0) == "a -> "
    assert not torch.overrides._get_current_function_mode_stack()


# ----------------------------------------------------------------------------
# Through the wire as here; the random generators left alone


def judged(check, fn, hidden=True):
    """(passed, sentence, flags, what the kernel showed) through the wire, the answer driven as a grading
    kernel's Check.__call__ drives it."""
    served = check.driver(fn) if check.driver else fn
    return judged_by_name(check.name, served, hidden)


@pytest.mark.parametrize("check_name, mistake", [
    ("check_k_shot_prompt", None), ("check_k_shot_prompt", "rng.permutation"),
    ("check_k_shot_prompt", "the query with y=\"\""), ("check_k_shot_prompt", "IndexError for k out of range"),
    ("check_k_shot_prompt", "k clipped into range, no ValueError"), ("check_k_shot_prompt", "rng=None not handled"),
    ("check_k_shot_prompt", "k = len - 1 refused"),
    ("check_k_shot_prompt", "calls the course's version"),
    ("check_induction_score", None), ("check_induction_score", "first occurrence instead of the latest"),
    ("check_induction_score", "NaN when no token repeats"),
    ("check_induction_score", "the mean over heads too (a number)"),
    ("check_induction_score", "t counts as its own earlier occurrence"),
    ("check_induction_score", "a list compared with =="), ("check_induction_score", "calls the course's helper"),
])
def test_the_same_verdict_through_the_wire_as_here(check_name, mistake):
    check = getattr(judging, check_name)
    answer = CATALOGUE[check_name][0][0][1] if mistake is None else find_mistake(CATALOGUE, check_name, mistake)
    local = None
    try:
        check(answer, hidden=True)
    except core.CheckFailed as failed:
        local = str(failed)
    passed, sentence, flags, shown = judged(check, answer)
    assert passed is (mistake is None) and (local is None) is (mistake is None)
    assert shown == ("passed" if passed else sentence)
    if not passed:
        assert sentence == local
    assert flags == []


def test_the_generator_arrives_through_the_wire_in_its_state():
    """The kernel's rng is the judge's, state for state: the draw there is the draw here."""
    seen = []

    def recorder(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None):
        if rng is not None:
            seen.append(rng.bit_generator.state["state"]["state"])
        return prompt_notebook(demonstrations, query, k, template, separator, rng)

    passed, _, _, _ = judged(check_k_shot_prompt, recorder)
    states = [c.kwargs["rng"].bit_generator.state["state"]["state"] for c in checks._prompt_cases(True)
              if "rng" in c.kwargs]
    assert passed and seen == states


def test_a_grading_kernel_serves_the_driven_answer(monkeypatch):
    served = {}
    monkeypatch.setattr(kernel, "_judge_connection", lambda: "the judge")
    monkeypatch.setattr(kernel, "serve", lambda connection, name, fn, hidden: served.update(fn=fn, name=name))
    plmcourse.grading.check_k_shot_prompt(prompt_notebook)
    assert served["name"] == "check_k_shot_prompt" and served["fn"] is not prompt_notebook
    cases = checks._prompt_cases(False)
    assert served["fn"](*cases[0].args, **cases[0].kwargs) == checks._prompt_reference(cases[0])
    error_case = next(c for c in cases if c.data["error"])
    assert served["fn"](*error_case.args, **error_case.kwargs)["raised"] == "ValueError"


def test_verdicts_do_not_depend_on_the_global_seed():
    sentences = set()
    for seed in (0, 1):
        np.random.seed(seed)
        sentences.add(str(failure(check_k_shot_prompt, prompt_mistake("rng.permutation"))))
        sentences.add(str(failure(check_induction_score, induction_mistake("query and key axes swapped"))))
    assert len(sentences) == 2


@pytest.mark.integration  # a fresh Python process
def test_the_checks_stay_fast_in_a_fresh_kernel():
    """Nothing the checks run loads torch._dynamo (a second or more per kernel)."""
    import pathlib
    import subprocess
    import sys

    code = ("import sys, plmcourse.grading as g\n"
            "from mistake_catalogue.icl_mistakes import prompt_notebook, induction_notebook\n"
            "g.check_k_shot_prompt(prompt_notebook, hidden=True)\n"
            "g.check_induction_score(induction_notebook, hidden=True)\n"
            "assert 'torch._dynamo' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], cwd=pathlib.Path(__file__).parent, check=True, capture_output=True,
                   timeout=120)
