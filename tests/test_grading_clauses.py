"""Every argument of every graded function is exercised: across its check's cases, each parameter of
the exercise's own signature (read from the source notebook's solution cell) takes at least two
values, in the visible cases alone and with the hidden ones. An argument that keeps one value
everywhere lets an answer that ignores it, or hard-codes its default, pass. And every clause of every
exercise (Check.clauses: special values, edge cases, rules, from the notebook's text) has a visible
case that exercises it."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import ast
import inspect
import json
import re

import pytest
import torch

import plmcourse.judging as judging
from plmcourse.grading.core import Case
from conftest import source_notebooks
from support import fixed_arguments


def exercise_signatures():
    """graded function name -> inspect.Signature of the `def` in its notebook's solution cell; a graded
    class (LoRALinear) by its name in snake case (lora_linear), the signature of its __init__ without self."""
    found = {}
    for path in source_notebooks():
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code" or not cell["metadata"].get("nbgrader", {}).get("solution"):
                continue
            for node in ast.parse("".join(cell["source"])).body:
                name = node.name if isinstance(node, ast.FunctionDef) else None
                if isinstance(node, ast.ClassDef):
                    name = re.sub(r"(?<=[a-zA-Z])(?=[A-Z][a-z])", "_", node.name).lower()
                    node = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
                    if node is not None:
                        node.args.args = node.args.args[1:]  # self
                if name and node is not None:
                    namespace = {}
                    exec(f"def {name}({ast.unparse(node.args)}): pass", namespace)  # the signature only
                    found[name] = inspect.signature(namespace[name])
    return found


SIGNATURES = exercise_signatures()


def test_every_check_grades_a_function_of_a_notebook():
    assert {name.removeprefix("check_") for name in judging.CHECKS} <= set(SIGNATURES)


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "with hidden"])
@pytest.mark.parametrize("check_name", list(judging.CHECKS))
def test_every_argument_takes_more_than_one_value(check_name, hidden):
    check = getattr(judging, check_name)
    cases = check.cases(hidden, torch.device("cpu")) if check.device else check.cases(hidden)
    fixed = fixed_arguments(SIGNATURES[check_name.removeprefix("check_")], cases, check.signature_args)
    assert not fixed, f"{check_name}: {fixed} keep one value in every {'' if hidden else 'visible '}case"


def test_an_argument_left_at_its_default_is_found():
    # causal_lm_loss's visible cases as they were before one passed ignore_index=0: never varied.
    cases = [c for c in judging.check_causal_lm_loss.cases(False, torch.device("cpu")) if not c.kwargs]
    assert fixed_arguments(SIGNATURES["causal_lm_loss"], cases) == ["ignore_index"]
    # Passing the default explicitly is still one value; passing another is a second.
    explicit = [Case("", c.args, {"ignore_index": -100}) for c in cases]
    assert fixed_arguments(SIGNATURES["causal_lm_loss"], cases + explicit) == ["ignore_index"]
    other = [Case("", c.args, {"ignore_index": 0}) for c in cases[:1]]
    assert fixed_arguments(SIGNATURES["causal_lm_loss"], cases + other) == []


# Each check lists its exercise's clauses (Check.clauses), and a visible case exercises each one, so that
# a student meets every clause in the notebook's own run (issue 23).
WITHOUT_CLAUSES = set()


def cases_of(check, hidden):
    return check.cases(hidden, torch.device("cpu")) if check.device else check.cases(hidden)


def test_every_check_lists_its_clauses():
    missing = [name for name in judging.CHECKS if name not in WITHOUT_CLAUSES and not getattr(judging, name).clauses]
    assert not missing


@pytest.mark.parametrize("check_name", [name for name in judging.CHECKS if name not in WITHOUT_CLAUSES])
def test_every_clause_has_a_visible_case(check_name):
    check = getattr(judging, check_name)
    texts = [text for text, _ in check.clauses]
    assert len(set(texts)) == len(texts)
    visible = cases_of(check, False)
    uncovered = [text for text, covers in check.clauses if not any(covers(case) for case in visible)]
    assert not uncovered, f"{check_name}: no visible case for {uncovered}"
    for case in cases_of(check, 7000):  # the predicates read the hidden cases too, without failing
        for _, covers in check.clauses:
            assert isinstance(covers(case), bool), case.label
