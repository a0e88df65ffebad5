"""Review's similarity, measured (`python -m bench similarity`): does it find rewritten copies, and does it
leave independently written answers apart? Both for the fingerprints review uses (the tokens) and for those of
the canonical form (bench/canonical.py), which review does not use: see there for why.

Two sets, written before the canonical form:

* **recall**: every answer the course's notebooks ask for, as the instructor wrote it (course/source's
  answer cells), rewritten the ways a copier rewrites (REWRITES): every local renamed, independent
  statements reordered, a list built in a loop turned into a comprehension or back, dead statements
  added, expressions split into temporaries, and all of these at once. Each rewrite is applied where the
  code allows it. A copy is found when review's classmates rule would flag the pair: the copy and the
  original share CLASSMATES_SIMILAR of the smaller one's fingerprints, both having MIN_FINGERPRINTS.
* **false pairs**: the mistake catalogues' right answers (tests/mistake_catalogue), written one by one as
  different ways to solve each exercise. Every pair of one exercise's right answers that the rule can
  compare and flags is a false alarm.

The rewrites are made on the syntax tree (ast), so every copy still runs; nothing here reads the
fingerprints' code beyond calling it.
"""

from __future__ import annotations

import ast
import copy
import inspect
import sys
from itertools import combinations

from bench.canonical import canonical
from bench.common import HERE, write_result
from plmcourse.autograde.evidence import CLASSMATES_SIMILAR, MIN_FINGERPRINTS, fingerprints
from plmcourse.release import solution_cells

COURSE = HERE.parent / "course"


# ----------------------------------------------------------------------------
# Rewrites a copier makes; each returns the rewritten source, or None where it does not apply


def _functions(tree):
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _names(node, kind) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, kind)}


def _independent(a, b) -> bool:
    """Neither statement writes a name the other reads or writes, and neither leaves the block."""
    leaves = (ast.Return, ast.Raise, ast.Break, ast.Continue, ast.If, ast.For, ast.While, ast.With, ast.Try)
    if isinstance(a, leaves) or isinstance(b, leaves) or any(isinstance(n, ast.Call) for s in (a, b) for n in ast.walk(s)
                                                              if isinstance(getattr(n, "func", None), ast.Attribute)):
        return False  # a method call may change its object: not reordered
    writes_a, writes_b = _names(a, ast.Store), _names(b, ast.Store)
    reads_a, reads_b = _names(a, ast.Load), _names(b, ast.Load)
    return not (writes_a & (reads_b | writes_b) or writes_b & reads_a)


def rename(tree):
    """Every parameter and local gets another name."""
    changed = False
    for function in _functions(tree):
        local = {a.arg for a in function.args.args + function.args.kwonlyargs} | _names(function, ast.Store)
        for node in ast.walk(function):
            if isinstance(node, ast.Name) and node.id in local:
                node.id, changed = f"my_{node.id}", True
            elif isinstance(node, ast.arg) and node.arg in local:
                node.arg, changed = f"my_{node.arg}", True
    return changed


def reorder(tree):
    """Each pair of adjacent independent statements swapped."""
    changed = False
    for function in _functions(tree):
        body, i = function.body, 0
        while i + 1 < len(body):
            if _independent(body[i], body[i + 1]) and not _is_docstring(body[i]):
                body[i], body[i + 1] = body[i + 1], body[i]
                changed, i = True, i + 2
            else:
                i += 1
    return changed


def loops(tree):
    """A list comprehension assigned to a name becomes a loop that appends, and such a loop a comprehension."""
    changed = False
    for function in _functions(tree):
        new_body = []
        body = function.body
        i = 0
        while i < len(body):
            statement = body[i]
            if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name) and isinstance(statement.value, ast.ListComp)
                    and len(statement.value.generators) == 1):
                name, comp = statement.targets[0].id, statement.value
                gen = comp.generators[0]
                append = ast.Expr(ast.Call(ast.Attribute(ast.Name(name, ast.Load()), "append", ast.Load()), [comp.elt], []))
                inner = append
                for condition in reversed(gen.ifs):
                    inner = ast.If(condition, [inner], [])
                new_body += [ast.Assign([ast.Name(name, ast.Store())], ast.List([], ast.Load())),
                             ast.For(gen.target, gen.iter, [inner], [])]
                changed, i = True, i + 1
                continue
            following = body[i + 1] if i + 1 < len(body) else None
            if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name) and isinstance(statement.value, ast.List)
                    and not statement.value.elts and isinstance(following, ast.For) and len(following.body) == 1
                    and not following.orelse and _appends_to(following.body[0], statement.targets[0].id)):
                name = statement.targets[0].id
                element = following.body[0].value.args[0]
                comp = ast.ListComp(element, [ast.comprehension(following.target, following.iter, [], 0)])
                new_body.append(ast.Assign([ast.Name(name, ast.Store())], comp))
                changed, i = True, i + 2
                continue
            new_body.append(statement)
            i += 1
        function.body = new_body
    return changed


def _appends_to(statement, name) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
            and isinstance(statement.value.func, ast.Attribute) and statement.value.func.attr == "append"
            and isinstance(statement.value.func.value, ast.Name) and statement.value.func.value.id == name
            and len(statement.value.args) == 1)


def dead(tree):
    """Three statements that do nothing, spread through each function."""
    changed = False
    for function in _functions(tree):
        body = function.body
        start = 1 if _is_docstring(body[0]) else 0
        extra = [ast.parse("unused_total = 0").body[0], ast.Pass(), ast.parse("unused_shape = len([])").body[0]]
        for k, statement in enumerate(extra):
            body.insert(min(len(body) - 1, start + k * max(1, (len(body) - start) // 3)), statement)
        changed = True
    return changed


def temporaries(tree):
    """`return expr` becomes `result = expr; return result`, and `x = a op b` becomes `left = a; x = left op b`."""
    changed = False
    for function in _functions(tree):
        new_body = []
        for statement in function.body:
            if isinstance(statement, ast.Return) and statement.value is not None and not isinstance(statement.value, ast.Name):
                new_body += [ast.Assign([ast.Name("result", ast.Store())], statement.value),
                             ast.Return(ast.Name("result", ast.Load()))]
                changed = True
            elif (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                  and isinstance(statement.value, ast.BinOp)):
                new_body += [ast.Assign([ast.Name("left_part", ast.Store())], statement.value.left),
                             ast.Assign(statement.targets, ast.BinOp(ast.Name("left_part", ast.Load()),
                                                                     statement.value.op, statement.value.right))]
                changed = True
            else:
                new_body.append(statement)
        function.body = new_body
    return changed


def _is_docstring(statement) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)


def reformat(tree):
    """Nothing but the layout ast.unparse gives (the other rewrites' copies are printed the same way)."""
    return True


REWRITES = {"none: only reprinted (ast.unparse)": [reformat], "every local renamed": [rename], "independent statements reordered": [reorder],
            "loop <-> comprehension": [loops], "dead statements added": [dead],
            "expressions split into temporaries": [temporaries],
            "all of these": [rename, reorder, loops, dead, temporaries]}


def rewritten(source: str, steps) -> str | None:
    tree = ast.parse(source)
    changed = [step(tree) for step in steps]
    if not any(changed):
        return None
    return ast.unparse(ast.fix_missing_locations(tree))


# ----------------------------------------------------------------------------
# The two measures


def prints(source: str, canonical_form: bool) -> set:
    return fingerprints(canonical(source) if canonical_form else source)


def share(a: set, b: set) -> float | None:
    """Review's classmates measure (evidence.classmates); None when either is too short to compare."""
    if len(a) < MIN_FINGERPRINTS or len(b) < MIN_FINGERPRINTS:
        return None
    return len(a & b) / min(len(a), len(b))


def course_answers() -> dict:
    """{assignment/grade_id: the instructor's answer} for every answer cell that defines something."""
    found = {}
    for folder in sorted((COURSE / "source").iterdir()):
        if folder.is_dir():
            for grade_id, source in solution_cells(COURSE, folder.name).items():
                if _functions(ast.parse(source)):
                    found[f"{folder.name}/{grade_id}"] = source
    return found


def recall_rows(answers: dict, canonical_form: bool) -> list[dict]:
    rows = []
    for label, steps in REWRITES.items():
        applied, compared, found, shares = 0, 0, 0, []
        for source in answers.values():
            copy_source = rewritten(copy.deepcopy(source), steps)
            if copy_source is None:
                continue
            applied += 1
            similarity = share(prints(source, canonical_form), prints(copy_source, canonical_form))
            if similarity is None:
                continue
            compared += 1
            shares.append(similarity)
            found += similarity >= CLASSMATES_SIMILAR
        rows.append({"rewrite": label, "answers it applies to": applied, "long enough to compare": compared,
                     "found (flagged)": f"{found} of {compared}" if compared else "-",
                     "median similarity": f"{sorted(shares)[len(shares) // 2]:.2f}" if shares else "-"})
    return rows


def catalogue_answers() -> dict:
    """{check: [source of each right answer]} from tests/mistake_catalogue."""
    import importlib

    sys.path.insert(0, str(HERE.parent / "tests"))
    found = {}
    for path in sorted((HERE.parent / "tests" / "mistake_catalogue").glob("*_mistakes.py")):
        module = importlib.import_module(f"mistake_catalogue.{path.stem}")
        for check, (right, _) in module.CATALOGUE.items():
            sources = []
            for _, fn in right:
                try:
                    sources.append(inspect.getsource(fn))
                except (OSError, TypeError):
                    continue
            found[check] = sources
    return found


def false_pair_row(by_check: dict, canonical_form: bool) -> dict:
    pairs, compared, flagged, highest = 0, 0, [], 0.0
    for check, sources in by_check.items():
        found = [prints(s, canonical_form) for s in sources]
        for i, j in combinations(range(len(found)), 2):
            pairs += 1
            similarity = share(found[i], found[j])
            if similarity is None:
                continue
            compared += 1
            highest = max(highest, similarity)
            if similarity >= CLASSMATES_SIMILAR:
                flagged.append(f"{check} {i}-{j} ({similarity:.2f})")
    return {"pairs of right answers": pairs, "long enough to compare": compared,
            "flagged (false alarms)": f"{len(flagged)} of {compared}", "highest similarity": f"{highest:.2f}",
            "which": ", ".join(flagged) or "-"}


def measure(canonical_form: bool) -> tuple[list, dict]:
    return recall_rows(course_answers(), canonical_form), false_pair_row(catalogue_answers(), canonical_form)


def main():
    before, false_before = measure(canonical_form=False)
    now, false_now = measure(canonical_form=True)
    rows = [{"rewrite": b["rewrite"], "answers it applies to": b["answers it applies to"],
             "found, tokens (in use)": b["found (flagged)"], "median, tokens": b["median similarity"],
             "found, canonical form (not in use)": n["found (flagged)"], "median, canonical form": n["median similarity"]}
            for b, n in zip(before, now)]
    for row in rows:
        print(row)
    print("false pairs, tokens only:", false_before)
    print("false pairs, canonical form:", false_now)
    notes = (f"Recall: the {len(course_answers())} answers of course/source, each rewritten as a copier would; "
             f"found = review's classmates rule (share of the smaller answer's fingerprints >= {CLASSMATES_SIMILAR}, "
             f"both >= {MIN_FINGERPRINTS} fingerprints) flags the copy against its original. Tokens: the "
             "fingerprints review uses; canonical form: those of bench/canonical.py, not in use (an honest scaled "
             "dot-product attention written apart from the course's reaches 0.91 of its solution's fingerprints in "
             "canonical form, 0.68 as tokens: the course rule would flag it). False pairs (the "
             "mistake catalogues' right answers, each pair of one exercise's): tokens "
             f"{false_before['flagged (false alarms)']} flagged (highest similarity {false_before['highest similarity']}), "
             f"canonical form {false_now['flagged (false alarms)']} flagged (highest "
             f"{false_now['highest similarity']}). The canonical form is shorter (no docstring, no temporaries), so "
             "fewer answers reach the fingerprints needed to be compared at all.")
    return write_result("review_similarity", {
        "title": "Review's similarity: rewritten copies found, independent right answers left apart",
        "notes": notes, "rows": rows})


if __name__ == "__main__":
    print(main())
