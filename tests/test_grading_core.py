"""plmcourse.grading (the kernel's side), plmcourse.judging (the judge's) and the wire: one engine, two places;
the judge's side never runs student code.

The judge and the kernel are put on the two ends of a socketpair here, in threads, as
`plmcourse grade autograde` puts them in two processes: what crosses is only what
plmcourse.grading.wire lets through.
"""

import ast
import importlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import plmcourse.grading
import plmcourse.judging as judging
from plmcourse import ref
from plmcourse.grading import wire
from plmcourse.grading.core import Check
from plmcourse.judging import core
from support import judged


def honest_softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isneginf(m), 0, m))
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


# ----------------------------------------------------------------------------
# wire


@pytest.mark.parametrize("value", [
    None, True, 3, -2 ** 63, 2.5, float("inf"), "wörd", [1, "a"], (1, (2.0,)), {"a": 1, 2: [3]}, {1, 2},
    np.arange(6, dtype=np.int32).reshape(2, 3), np.float32(1.5), np.int64(7), np.zeros((0, 4)),
    np.array([True, False]),
])
def test_wire_round_trip(value):
    back = wire.decode(wire.encode(value))
    if isinstance(value, np.ndarray):
        assert type(back) is np.ndarray and back.dtype == value.dtype and np.array_equal(back, value)
    elif isinstance(value, np.generic):
        assert type(back) is type(value) and back == value
    else:
        assert back == value and type(back) is type(value)


def test_wire_tensors_keep_dtype_and_identity_and_leaves_come_back_as_leaves():
    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    args, kwargs = wire.decode(wire.encode(((x, x, torch.tensor([1, 2])), {"m": x > 0})), grad_leaves=True)
    assert args[0] is args[1] and args[0].requires_grad and args[0].dtype == torch.float64
    assert torch.equal(args[0].detach(), x.detach()) and args[2].dtype == torch.int64
    assert kwargs["m"].dtype == torch.bool and not kwargs["m"].requires_grad


def test_wire_generator_state_travels():
    rng = np.random.default_rng(5)
    rng.random(3)
    copy = wire.decode(wire.encode(rng))
    assert np.array_equal(copy.random(4), rng.random(4))


def test_a_subclass_arrives_as_the_plain_numbers_it_holds():
    class Liar(np.ndarray):
        def __array_ufunc__(self, *args, **kwargs):
            return np.True_

        def __eq__(self, other):
            return True

    back = wire.decode(wire.encode(np.zeros(3).view(Liar)))
    assert type(back) is np.ndarray and not np.allclose(back, 1.0)


def test_objects_that_cannot_travel_are_described_not_sent():
    back = wire.decode(wire.encode([object(), np.array(["a"]), lambda: 1]))
    assert all(isinstance(b, wire.Opaque) for b in back)
    assert "dtype <U1" in back[1].description


@pytest.mark.parametrize("doc", [
    {"array": {"dtype": "object", "shape": [1], "bytes": ""}},
    {"array": {"dtype": "float64", "shape": [2], "bytes": "AAAA"}},          # bytes do not fill it
    {"array": {"dtype": "float64", "shape": [-1], "bytes": ""}},
    {"pickle": "gASV"},
    {"same": 3},
    {"rng": {"bit_generator": "MT19937", "state": {}}},
    [1, 2],
])
def test_decode_refuses_what_breaks_the_rules(doc):
    with pytest.raises(wire.WireError):
        wire.decode(doc)


def test_receive_refuses_an_oversized_frame():
    a, b = socket.socketpair()
    a.sendall((wire.MAX_BYTES + 1).to_bytes(4, "big"))
    with pytest.raises(wire.WireError):
        wire.receive(b)


# ----------------------------------------------------------------------------
# The same verdicts in both places


@pytest.mark.parametrize("answer, passes", [(honest_softmax, True),
                                            (lambda x, axis=-1: np.exp(x) / np.exp(x).sum(), False)])
def test_judge_and_kernel_agree(answer, passes, capsys):
    local = None
    try:
        judging.check_softmax(answer, hidden=True)
    except core.CheckFailed as failure:
        local = str(failure)
    passed, sentence, flags, shown = judged("check_softmax", answer)
    assert passed is passes and (local is None) is passes
    assert shown == ("passed" if passes else sentence)
    if not passes:
        assert sentence == local  # the same sentence, word for word
    assert flags == []


# ----------------------------------------------------------------------------
# Naming a cause: the known mistake that explains every failing case, not the first that fits one


TOY_MISTAKES = [("doubled: return x", lambda x: 2 * x), ("squared: return x", lambda x: x ** 2)]


def _toy_run(answer):
    """run_check on the identity, with three cases: on the first, doubling and squaring give the same numbers."""
    cases = [core.Case(f"x = {x}", (np.array(x),)) for x in ([2.0, 0.0], [3.0, 1.0], [4.0, -1.0])]

    def judge(case, got, expected):
        x = case.args[0]
        problem = core.compare(got, expected, **core.F64)
        return core.name_mistake(problem, (got,), [(d, lambda f=f: (f(x),)) for d, f in TOY_MISTAKES], core.F64)

    with pytest.raises(core.CheckFailed) as failed:
        core.run_check("check_toy", answer, cases, arg_names=("x",), reference=lambda case: case.args[0],
                       judge=judge)
    return str(failed.value)


def test_the_cause_named_is_the_one_that_explains_every_failing_case():
    # Case 1 alone fits both mistakes; the first listed is doubling, but cases 2 and 3 show squaring.
    assert _toy_run(lambda x: x ** 2).endswith("(x = [2.0, 0.0]): the output differs from the expected by up to "
                                               "2 (at [0]: expected 2, got 4); it matches squared: return x.")


def test_a_cause_that_leaves_a_failing_case_unexplained_says_so():
    def squares_then_negates(x):
        return -x if x[0] == 4.0 else x ** 2  # a second mistake, shown by case 3 alone
    message = _toy_run(squares_then_negates)
    assert message.endswith("it matches squared: return x, and case 3 fails in another way as well.")


def test_a_cause_that_explains_fewer_than_half_the_failing_cases_is_not_named():
    def doubles_once(x):
        return 2 * x if x[0] == 2.0 else -x  # case 1 fits both mistakes; cases 2 and 3 fit neither
    message = _toy_run(doubles_once)
    assert "it matches" not in message and "no known mistake explains most of the failing cases" in message


def test_a_cause_that_explains_one_failing_case_against_one_other_is_not_named():
    def doubles_once_then_right(x):
        if x[0] == 2.0:
            return 2 * x  # fits both mistakes
        return -x if x[0] == 3.0 else x  # case 2 fits neither; case 3 is right
    message = _toy_run(doubles_once_then_right)
    assert "it matches" not in message and "case 2 fails too" in message


def test_answers_to_the_later_cases_steer_the_hint_never_the_verdict():
    """A kernel that answers the cases run only to name a cause in a way of its choosing (an attack on the
    message) moves the hint among the known mistakes; the failure, its case and its numbers stay."""
    messages = {}
    for name, later in (("doubled", lambda x: 2 * x), ("squared", lambda x: x ** 2), ("right", lambda x: x)):
        calls = []

        def answer(x, later=later):
            calls.append(x)
            return 2 * x if len(calls) == 1 else later(x)  # case 1: the same wrong numbers every time
        messages[name] = _toy_run(answer)
    verdict = ("check_toy failed on case 1 of 3 (x = [2.0, 0.0]): the output differs from the expected by up to 2 "
               "(at [0]: expected 2, got 4); it matches ")
    assert all(message.startswith(verdict) for message in messages.values()), messages
    assert messages["doubled"].endswith("doubled: return x.") and messages["squared"].endswith("squared: return x.")
    assert messages["right"].endswith("doubled: return x.")  # nothing tells them apart: the first listed


def test_a_later_crash_neither_confirms_nor_refutes_a_cause():
    def doubles_then_crashes(x):
        if x[0] == 2.0:
            return 2 * x
        raise ValueError("later cases crash")
    assert _toy_run(doubles_then_crashes).endswith("it matches doubled: return x.")


def test_gradients_are_taken_in_the_kernel_for_the_upstream_the_judge_chose():
    detached = lambda layers, weights, gamma: mix(layers, weights, gamma).detach()  # noqa: E731
    passed, sentence, _, _ = judged("check_scalar_mix", detached)
    assert not passed and "gradients do not flow" in sentence
    no_gamma_grad = lambda layers, weights, gamma: mix(layers, weights, gamma.detach())  # noqa: E731
    passed, sentence, _, _ = judged("check_scalar_mix", no_gamma_grad)
    assert not passed and "gradients do not flow to gamma" in sentence
    assert judged("check_scalar_mix", mix)[0]


def mix(layers, weights, gamma):
    return gamma * torch.tensordot(torch.softmax(weights, 0), layers, dims=1)


def test_frame_walking_finds_nothing_to_copy():
    """The expected values live in the judge; the kernel's frames hold only the inputs."""
    import inspect

    def copycat(x, axis=-1):
        frame = inspect.currentframe().f_back
        while frame is not None:
            if "expected" in frame.f_locals and isinstance(frame.f_locals["expected"], np.ndarray):
                return frame.f_locals["expected"]
            frame = frame.f_back
        return np.zeros_like(x)

    assert not judged("check_softmax", copycat)[0]


def test_the_reference_called_under_another_name_is_named():
    passed, sentence, _, _ = judged("check_softmax", lambda x, axis=-1: ref.softmax(x, axis=axis))
    assert not passed and "your function calls plmcourse.ref.softmax" in sentence


def test_a_private_library_softmax_is_flagged_with_the_function():
    def private(x, axis=-1):
        return torch._softmax(torch.from_numpy(x), axis % x.ndim, False).numpy()

    _, _, flags, _ = judged("check_softmax", private)
    assert flags and "torch._softmax" in flags[0]


def test_an_exception_in_the_kernel_is_named_and_its_frames_stay_in_the_kernel():
    def broken(x, axis=-1):
        return x[..., 99]

    passed, sentence, _, _ = judged("check_softmax", broken)
    assert not passed and "your function raised IndexError" in sentence


def test_a_hostile_reply_fails_the_case_and_the_judge_survives():
    kernel_end, judge_end = socket.socketpair()

    def kernel():
        wire.receive(kernel_end)  # the first case's inputs
        wire.send(kernel_end, {"value": {"array": {"dtype": "float64", "shape": [10 ** 9], "bytes": ""}}})

    thread = threading.Thread(target=kernel)
    thread.start()
    with pytest.raises(wire.WireError):
        judging.check_softmax(core.Remote(judge_end))
    thread.join()


def test_a_local_check_gives_a_verdict_whatever_the_notebook_replaced(monkeypatch, capsys):
    monkeypatch.setattr(np, "allclose", lambda *a, **k: True)
    judging.check_causal_mask(lambda n: np.tril(np.ones((n, n), dtype=bool)))
    assert "check_causal_mask: 4 cases passed." in capsys.readouterr().out


# ----------------------------------------------------------------------------
# Hidden seeds the notebook cannot know: every honest answer passes whatever the judge draws


def solved_namespace():
    from conftest import COURSE
    from plmcourse.release import solution_cells

    namespace = {}
    exec("import math\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n"
         "from plmcourse import ref, nn", namespace)
    for assignment in sorted(p.name for p in (COURSE / "source").iterdir()):
        for source in solution_cells(COURSE, assignment).values():
            exec(source, namespace)
    return namespace


def solved_answer(check_name):
    """The notebook's answer that `check_name` grades: a function, or a class by its name in snake case."""
    namespace = solved_namespace()
    by_snake_case = {re.sub(r"(?<=[a-zA-Z])(?=[A-Z][a-z])", "_", key).lower(): value
                     for key, value in namespace.items() if isinstance(value, type)}
    name = check_name.removeprefix("check_")
    return namespace[name] if name in namespace else by_snake_case[name]


@pytest.mark.parametrize("name", sorted(judging.CHECKS))
def test_honest_answers_pass_the_hidden_cases_for_any_salt(name, capsys):
    answer = solved_answer(name)
    for salt in (1000, 7000, 123000, 999000, 1_000_000_000):
        getattr(judging, name)(answer, hidden=salt)
    assert capsys.readouterr().out.count("cases passed") == 5


def test_the_salt_moves_the_hidden_cases_and_only_them():
    from plmcourse.judging.attention import _softmax_cases

    visible = [c.label for c in _softmax_cases(False)]
    assert [c.label for c in _softmax_cases(True)][:len(visible)] == visible
    assert [c.label for c in _softmax_cases(5000)][:len(visible)] == visible
    assert {c.label for c in _softmax_cases(5000)[len(visible):]}.isdisjoint(
        c.label for c in _softmax_cases(True)[len(visible):])


# ----------------------------------------------------------------------------
# Checks as tables


# What a grading kernel holds is plmcourse.grading alone: the sandbox leaves plmcourse/judging/ and the
# machinery out. Here the same holds without bubblewrap: a finder that refuses both stands in for it.
KERNEL_ONLY = """
import importlib.abc, json, sys

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[:2] in (["plmcourse", "judging"], ["plmcourse", "autograde"]):
            raise ImportError(f"{name} is not in the sandbox")
        return None

sys.meta_path.insert(0, Absent())
import plmcourse.grading as grading

told, drivers = {}, 0
for name in grading.CHECKS:
    check = getattr(grading, name)
    if check.driver is not None:
        drivers += callable(check.driver(lambda *args, **kwargs: None))
    try:
        check(lambda *args, **kwargs: None)
    except grading.CheckFailed as failed:
        told[name] = str(failed)
loaded = sorted(m for m in sys.modules if m.startswith(("plmcourse.judging", "plmcourse.autograde")))
print(json.dumps({"told": told, "drivers": drivers, "loaded": loaded}))
"""


def test_every_declaration_and_driver_loads_without_the_judges_folder():
    done = subprocess.run([sys.executable, "-c", KERNEL_ONLY], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PLMCOURSE_JUDGE_FD": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(seen["told"]) == sorted(judging.CHECKS) and seen["loaded"] == []
    assert all(text == f"{name} runs in the judge while grading, and this kernel has no connection to it"
               for name, text in seen["told"].items()), seen["told"]
    assert seen["drivers"] == len(DRIVEN)


def test_the_judges_folder_is_never_imported_by_the_kernels():
    """Statically too: of every import in plmcourse/grading/, one names plmcourse.judging: Check.__call__'s,
    which runs only where no judge is connected (a student's own kernel) and says so where it is missing."""
    found = []
    for path in sorted(Path(plmcourse.grading.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]:
            for node in ast.iter_child_nodes(function) if function is tree else ast.walk(function):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) else [])
                if any(name.startswith(("plmcourse.judging", "plmcourse.autograde")) for name in names):
                    found.append(f"{path.name}:{getattr(function, 'name', 'module')}")
    assert found == ["core.py:__call__"], found


DRIVEN = {"check_k_shot_prompt", "check_lora_linear", "check_count_trainable_parameters", "check_pet_soft_labels",
          "check_patchify"}  # an argument that cannot travel (a class, a model), or a ValueError to report


@pytest.mark.parametrize("topic", sorted(set(judging.CHECKS.values())))
def test_each_topic_s_two_modules_export_exactly_its_registered_checks(topic):
    """Written once for every topic: the registry, grading/<topic>.py and judging/<topic>.py agree; a check
    takes a device exactly when its cases hold tensors (or it builds a model there); the driven ones are
    those that must be."""
    names = sorted(name for name, stem in judging.CHECKS.items() if stem == topic)
    for side in ("grading", "judging"):
        assert sorted(importlib.import_module(f"plmcourse.{side}.{topic}").__all__) == names, side
    for name in names:
        spec = judging.spec(name)
        assert (spec.driver is not None) == (name in DRIVEN), name
        cases = spec.cases(False, torch.device("cpu")) if spec.device else spec.cases(False)
        tensors = any(isinstance(a, torch.Tensor) for c in cases for a in (*c.args, *c.kwargs.values()))
        assert spec.device == (tensors or name == "check_count_trainable_parameters"), name


# Every topic's right and wrong answers (tests/mistake_catalogue/<topic>_mistakes.py), and the fewest of each
# that a check's catalogue holds: (right, wrong) per topic, and the checks that hold more.
CATALOGUES = {path.stem.removesuffix("_mistakes"): importlib.import_module(f"mistake_catalogue.{path.stem}").CATALOGUE
              for path in sorted((Path(__file__).parent / "mistake_catalogue").glob("*_mistakes.py"))}
FEWEST = {"attention": (3, 10), "bart": (2, 6), "bert": (2, 6), "efficiency": (4, 30), "gpt": (2, 6),
          "icl": (4, 18), "instruct": (4, 12), "language_models": (4, 10), "multimodal": (4, 15), "peft": (3, 10),
          "prompting": (6, 18), "sentence_embeddings": (4, 12), "transfer": (4, 8), "word_vectors": (3, 8),
          "wordpiece": (5, 15)}
FEWEST_FOR = {"check_dequantize": (4, 10), "check_k_shot_prompt": (4, 30), "check_lora_linear": (3, 30),
              "check_mean_pool": (4, 15)}
WITHOUT_CATALOGUE = {"welcome"}  # check_normalize, notebook 00's warm-up: tests/test_grading_welcome.py


@pytest.mark.parametrize("topic", sorted(set(judging.CHECKS.values()) - WITHOUT_CATALOGUE))
def test_each_topic_s_catalogue_covers_exactly_its_checks_with_enough_answers(topic):
    """Written once for every topic: its catalogue has an entry for each of its checks and no other, with at
    least the topic's number of right and of wrong answers."""
    assert set(CATALOGUES) == set(FEWEST) == set(judging.CHECKS.values()) - WITHOUT_CATALOGUE
    names = {name for name, stem in judging.CHECKS.items() if stem == topic}
    assert set(CATALOGUES[topic]) == names
    for name, (correct, mistakes) in CATALOGUES[topic].items():
        fewest_correct, fewest_mistakes = FEWEST_FOR.get(name, FEWEST[topic])
        assert len(correct) >= fewest_correct and len(mistakes) >= fewest_mistakes, name


@pytest.mark.parametrize("name", sorted(judging.CHECKS))
def test_every_check_is_a_table_whose_hidden_run_extends_the_visible_one(name):
    table = getattr(judging, name)
    declared = getattr(plmcourse.grading, name)  # what a kernel holds: the same name, doc and arguments
    assert isinstance(table, core.Spec) and isinstance(declared, Check) and table.check is declared
    assert table.name == name and table.doc.strip()
    assert vars(importlib.import_module(f"plmcourse.grading.{judging.CHECKS[name]}"))[name] is declared
    assert vars(importlib.import_module(f"plmcourse.judging.{judging.CHECKS[name]}"))[name] is table
    assert all(isinstance(arg, str) for arg in table.arg_names)

    def cases(hidden):
        return table.cases(hidden, torch.device("cpu")) if table.device else table.cases(hidden)

    visible, hidden = [c.label for c in cases(False)], [c.label for c in cases(True)]
    assert hidden[:len(visible)] == visible and len(hidden) > len(visible)
    assert all(len(case.args) <= len(table.arg_names) for case in cases(True))


@pytest.mark.parametrize("name", ["check_mlm_mask", "check_text_infilling"])
def test_random_functions_are_judged_by_named_rules_with_the_same_seed_twice(name):
    rules = getattr(judging, name).judge.rules
    names = [rule_name for rule_name, _ in rules]
    assert len(set(names)) == len(names) >= 4 and all(names)
    assert any("same seed" in rule_name for rule_name in names)
    table = getattr(judging, name)
    labels = " ".join(c.label for c in table.cases(False))
    assert "the same seed as an earlier case" in labels and "another seed" in labels


# ----------------------------------------------------------------------------
# The most fundamental problem first: a cut graph before a wrong dtype (issue 23, item 2)


def _detached_float64(honest):
    """The honest answer, cut from the graph and cast to float64: two problems, one fundamental."""
    def answer(*args, **kwargs):
        out = honest(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(o.detach().double() if isinstance(o, torch.Tensor) else o for o in out)
        return out.detach().double()
    return answer


TRAINED_ON = sorted(name for name in judging.CHECKS
                    if getattr(judging, name).device
                    and any(c.grad_leaves for c in getattr(judging, name).cases(True, torch.device("cpu"))))


def test_every_result_trained_on_has_its_gradient_judged_on_every_case():
    # Results that training backpropagates through: losses, pooling, attention, layer mixing.
    assert {"check_mean_pool", "check_info_nce_loss", "check_mlm_loss", "check_causal_lm_loss",
            "check_bilm_loss", "check_scalar_mix", "check_multi_head_attention"} <= set(TRAINED_ON)
    for name in TRAINED_ON:
        cases = getattr(judging, name).cases(True, torch.device("cpu"))
        assert all(c.grad_leaves for c in cases), [c.label for c in cases if not c.grad_leaves]


def _float32_cases(check):
    return [c for c in check.cases(True, torch.device("cpu"))
            if any(isinstance(a, torch.Tensor) and a.dtype == torch.float32 for a in c.args)]


@pytest.mark.parametrize("name", [name for name in TRAINED_ON if _float32_cases(getattr(judging, name))])
def test_a_cut_graph_is_reported_before_a_wrong_dtype(name):
    check = getattr(judging, name)
    answer = _detached_float64(solved_namespace()[name.removeprefix("check_")])
    float32 = _float32_cases(check)
    memory = check.memory() if check.memory is not None else None
    for case in float32:
        expected = check.reference(case)
        case.reply = core.call_student(answer, case)
        args = (case, case.reply.value, expected) + ((memory,) if memory is not None else ())
        verdict = check.judge(*args)
        assert verdict and "gradient" in verdict, (case.label, verdict)


def test_a_graded_call_keeps_the_cell_s_numpy_error_state():
    # Graded, the student's function runs in a thread of its own (_call_with_limit); a cell's
    # `with np.errstate(...)` around the check must reach it, as it does in-process.
    from plmcourse.grading.core import Case, _call_with_limit

    def divide(v):
        return v / np.sum(v)

    case = Case("a zero vector", args=(np.zeros(3),))
    with np.errstate(invalid="raise"):
        raised = _call_with_limit(divide, case, 5.0)
    with np.errstate(invalid="ignore"):
        quiet = _call_with_limit(divide, case, 5.0)
    assert isinstance(raised.error, FloatingPointError)
    assert quiet.error is None and np.isnan(quiet.value).all()


def test_error_report_problem_judges_each_kind_of_report():
    wanted = "n = 0, so your function must raise ValueError"
    assert core.error_report_problem({"raised": "ValueError", "message": "n must be positive"}, wanted) is None
    assert core.error_report_problem({"returned": "array(shape=(0,))"}, wanted) is None  # the caller words this
    other = core.error_report_problem({"raised": "TypeError", "message": "bad operand"}, wanted)
    assert other == f"{wanted}, but it raised TypeError: bad operand"
    asserted = core.error_report_problem({"raised": "AssertionError", "message": ""}, wanted)
    assert asserted.startswith(f"{wanted}, but it raised AssertionError;") and "raise ValueError(...)" in asserted
    for unreadable in (None, "ValueError", {"neither": 1}, [("raised", "ValueError")]):
        assert "could not read what it did" in core.error_report_problem(unreadable, wanted)
    long = core.error_report_problem({"raised": "E" * 500, "message": "m" * 500}, wanted)
    assert len(long) < len(wanted) + 300  # a long name or message is cut, not passed on whole


def test_an_underdrawn_group_alarms_no_more_often_than_stated_for_honest_draws(monkeypatch):
    """core.underdrawn at a cheaper ALARM of 0.01 (the rules use 1e-6, with the same code): replacements
    drawn uniformly from the allowed ids other than their original trip it at most that often over its two
    groups, and a pool that leaves a group out trips it at once."""
    monkeypatch.setattr(core, "ALARM", 0.01)
    rng = np.random.default_rng(0)
    allowed = np.arange(1, 10)
    groups = [("low ids", [1, 2, 3]), ("one id", [9])]
    alarms = 0
    for _ in range(4000):
        old = rng.choice(allowed, 60)
        new = np.array([rng.choice(allowed[allowed != o]) for o in old])
        alarms += core.underdrawn(new, old, allowed, groups) is not None
    assert alarms / 4000 <= 0.01 * 1.25
    old = rng.choice(allowed, 60)
    assert core.underdrawn(rng.choice(np.arange(4, 9), 60), old, allowed, groups)[0] == "low ids"


def test_numpy_warnings_of_an_answer_do_not_print_above_the_check_s_sentence():
    import warnings

    def naive(x, axis=-1):  # overflows at large logits: NumPy warns
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(core.CheckFailed):
            judging.check_softmax(naive)
    assert [w for w in caught if issubclass(w.category, RuntimeWarning)] == []


def test_naming_a_cause_never_runs_a_hidden_case_the_answer_would_not_have_reached():
    """A notebook that fails a visible case on purpose must not be shown the hidden cases' arguments."""
    seen = []

    def squares(x):
        seen.append(tuple(x))
        return x ** 2
    cases = [core.Case(f"x = {x}", (np.array(x),)) for x in ([2.0, 0.0], [3.0, 1.0], [4.0, -1.0])]

    def judge(case, got, expected):
        x = case.args[0]
        problem = core.compare(got, expected, **core.F64)
        return core.name_mistake(problem, (got,), [(d, lambda f=f: (f(x),)) for d, f in TOY_MISTAKES], core.F64)

    with pytest.raises(core.CheckFailed):
        core.run_check("check_toy", squares, cases, arg_names=("x",), reference=lambda case: case.args[0],
                       judge=judge, public_cases=2)
    assert seen == [(2.0, 0.0), (3.0, 1.0)]  # the third, hidden case was never sent
