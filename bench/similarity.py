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

`python -m bench review_cohort` (`review_cohort`) adds a third set, bench/cohort.py: three independently written
obvious answers to every graded exercise, split into dev and test exercises; the canonical form's thresholds are
chosen on dev (no false flag, then most copies found) and its false flags and recall reported on test, beside the
tokens' at review's thresholds, for the course rule (evidence.course_similarity) and the classmates rule.
"""

from __future__ import annotations

import ast
import copy
import inspect
import sys
from itertools import combinations

from bench.canonical import canonical
from bench.common import HERE, write_result
from plmcourse.autograde.evidence import (CLASSMATES_SIMILAR, COURSE_SIMILAR, MIN_FINGERPRINTS, RETYPED,
                                          SHORT_FINGERPRINTS, containment, fingerprints)
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


# ----------------------------------------------------------------------------
# A cohort of independently written obvious answers (bench/cohort.py): the canonical form's thresholds set on a
# dev split of the exercises, then tried on the test split (`python -m bench review_cohort`)

THRESHOLDS = [round(0.5 + 0.01 * i, 2) for i in range(51)]  # the grid searched on dev: 0.50 to 1.00
TOKENS = {"course": COURSE_SIMILAR, "course, short": RETYPED, "classmates": CLASSMATES_SIMILAR}  # review's own


def cohort_split(exercises) -> tuple[list, list]:
    """(dev, test), fixed before anything was measured: the exercises by name, alternately."""
    ordered = sorted(exercises)
    return ordered[0::2], ordered[1::2]


def defined_name(source: str, grade_id: str) -> str:
    """The function or class an answer cell defines (its first), or its grade_id when it defines none."""
    import re

    defined = re.findall(r"^(?:def|class) (\w+)", source, re.M)
    return defined[0] if defined else grade_id


def course_texts() -> dict:
    """{exercise: [(label, source)]}: the code review compares an answer with (evidence.course_fingerprints): the
    notebook's solution and the package's own version (plmcourse.ref / nn / data) of the function it defines."""
    import importlib

    found = {}
    for folder in sorted((COURSE / "source").iterdir()):
        if not folder.is_dir():
            continue
        for grade_id, source in solution_cells(COURSE, folder.name).items():
            function = defined_name(source, grade_id)
            versions = [(f"the course's solution to {grade_id}", source)]
            for module in ("plmcourse.ref", "plmcourse.nn", "plmcourse.data"):
                obj = getattr(importlib.import_module(module), function, None)
                if inspect.isfunction(obj) or inspect.isclass(obj):
                    try:
                        versions.append((f"{module}.{function}", inspect.getsource(obj)))
                    except (OSError, TypeError):
                        pass
            found[grade_id] = versions
    return found


def references(texts: dict, canonical_form: bool) -> dict:
    """{exercise: [(label, fingerprints)]} in one form, those of at least SHORT_FINGERPRINTS (as review keeps)."""
    found = {}
    for exercise, versions in texts.items():
        measured = [(label, prints(source, canonical_form)) for label, source in versions]
        found[exercise] = [(label, len(p), p) for label, p in measured if len(p) >= SHORT_FINGERPRINTS]
    return found


def course_share(mine: set, versions: list) -> tuple[float, int] | None:
    """(share, size of that version): evidence.course_similarity's measure, the largest share of a version of the
    course's code that the answer holds; None where review does not compare (no version, or an empty answer)."""
    if not versions or not mine:
        return None
    share, _, size = max((containment(mine, p), label, size) for label, size, p in versions)
    return share, size


def course_flag(measured, long: float | None, short: float | None) -> bool:
    """evidence.course_similarity's rule, with its thresholds as arguments (None: no threshold, never flags)."""
    threshold = long if measured is not None and measured[1] >= MIN_FINGERPRINTS else short
    return measured is not None and threshold is not None and measured[0] >= threshold


def classmates_flag(measured, threshold: float | None) -> bool:
    return measured is not None and threshold is not None and measured >= threshold


def cohort_measures(exercises: list, canonical_form: bool, texts: dict, cohort: dict, copies: dict) -> dict:
    """Every number the rules need, in one form: the cohort's answers against the course's code and against each
    other (the false flags), and the copies against their originals and the course's code (the recall)."""
    refs = references(texts, canonical_form)
    answers, pairs, copied_course, copied_pairs = [], [], [], []
    for exercise in exercises:
        found = [prints(source, canonical_form) for source in cohort[exercise]]
        for i, mine in enumerate(found):
            answers.append((f"{exercise} {i}", course_share(mine, refs.get(exercise, []))))
        for i, j in combinations(range(len(found)), 2):
            pairs.append((f"{exercise} {i}-{j}", share(found[i], found[j])))
        for rewrite, original, copy_source in copies.get(exercise, []):
            copy_prints = prints(copy_source, canonical_form)
            copied_course.append((exercise, rewrite, course_share(copy_prints, refs.get(exercise, []))))
            copied_pairs.append((exercise, rewrite, share(prints(original, canonical_form), copy_prints)))
    return {"answers": answers, "pairs": pairs, "copied course": copied_course, "copied pairs": copied_pairs}


def rule_outcome(measures: list) -> dict:
    """What review's two rules say with these thresholds, for one form or for either of two (flagged when one
    of them flags, each at its own thresholds): `measures` is a list of (cohort_measures, thresholds) per form."""
    def course(i, key):
        return any(course_flag(m[key][i][-1], t["course"], t["course, short"]) for m, t in measures)

    def classmates(i, key):
        return any(classmates_flag(m[key][i][-1], t["classmates"]) for m, t in measures)

    def compared(i, key):
        return any(m[key][i][-1] is not None for m, _ in measures)

    first = measures[0][0]
    out = {}
    for rule, flag, key, copies in (("course", course, "answers", "copied course"),
                                    ("classmates", classmates, "pairs", "copied pairs")):
        items = range(len(first[key]))
        out[f"{rule}: compared"] = sum(compared(i, key) for i in items)
        out[f"{rule}: false flags"] = [first[key][i][0] for i in items if flag(i, key)]
        rows = range(len(first[copies]))
        comparable = [i for i in rows if compared(i, copies)]
        hard = [i for i in comparable if first[copies][i][1] == "all of these"]
        out[f"{rule}: copies found"] = (sum(flag(i, copies) for i in comparable), len(comparable))
        out[f"{rule}: 'all of these' copies found"] = (sum(flag(i, copies) for i in hard), len(hard))
    return out


def highest(measures: dict, key: str) -> float:
    values = [m[-1] if key == "pairs" else m[-1][0] for m in measures[key] if m[-1] is not None]
    return max(values, default=0.0)


def choose_thresholds(dev: dict) -> dict:
    """The canonical form's thresholds, on dev only: of those on the grid that flag none of the cohort's answers
    (course rule) or pairs (classmates rule), the ones that find the most copies (every rewrite of every dev
    exercise's solution); of equals, the highest. The short-code course threshold is kept at or above the other,
    as review's is. None for a rule where no threshold on the grid leaves the cohort unflagged."""
    best_course = None
    for long in THRESHOLDS:
        for short in [t for t in THRESHOLDS if t >= long]:
            if any(course_flag(m, long, short) for _, m in dev["answers"]):
                continue
            found = sum(course_flag(m, long, short) for _, _, m in dev["copied course"])
            key = (found, long, short)
            if best_course is None or key > best_course:
                best_course = key
    best_classmates = None
    for t in THRESHOLDS:
        if any(classmates_flag(m, t) for _, m in dev["pairs"]):
            continue
        found = sum(classmates_flag(m, t) for _, _, m in dev["copied pairs"])
        if best_classmates is None or (found, t) > best_classmates:
            best_classmates = (found, t)
    return {"course": best_course and best_course[1], "course, short": best_course and best_course[2],
            "classmates": best_classmates and best_classmates[1]}


def cohort_copies(exercises: list) -> dict:
    """{exercise: [(rewrite, original, copy)]}: the course's solution rewritten as a copier would (REWRITES)."""
    found = {}
    for key, source in course_answers().items():
        exercise = key.split("/", 1)[1]
        if exercise not in exercises:
            continue
        for label, steps in REWRITES.items():
            copy_source = rewritten(copy.deepcopy(source), steps)
            if copy_source is not None:
                found.setdefault(exercise, []).append((label, source, copy_source))
    return found


def _row(split: str, form: str, thresholds: dict | str, outcome: dict, measures: list) -> dict:
    def found(pair):
        return f"{pair[0]} of {pair[1]}"

    def shown(t):
        return "none" if t is None else str(t)

    course_false, pair_false = outcome["course: false flags"], outcome["classmates: false flags"]
    return {
        "split": split, "fingerprints of": form,
        "thresholds (course / short / classmates)": thresholds if isinstance(thresholds, str) else
            " / ".join(shown(thresholds[k]) for k in ("course", "course, short", "classmates")),
        "course rule: false flags": f"{len(course_false)} of {outcome['course: compared']}",
        "highest course share": " / ".join(f"{highest(m, 'answers'):.2f}" for m in measures),
        "course rule: copies found": found(outcome["course: copies found"]),
        "course rule: 'all of these' found": found(outcome["course: 'all of these' copies found"]),
        "classmates: false pairs": f"{len(pair_false)} of {outcome['classmates: compared']}",
        "highest classmates share": " / ".join(f"{highest(m, 'pairs'):.2f}" for m in measures),
        "classmates: copies found": found(outcome["classmates: copies found"]),
        "classmates: 'all of these' found": found(outcome["classmates: 'all of these' copies found"]),
        "which flagged": ", ".join(course_false + [f"pair {p}" for p in pair_false]) or "-",
    }


def review_cohort():
    """Issue: before review uses the canonical form, thresholds for it set on a dev split of an independently
    written cohort, and false flags and recall on the test split."""
    from bench.attacks import TYPED_SDPA
    from bench.cohort import COHORT, FIXED
    from plmcourse.autograde.evidence import course_fingerprints

    texts = course_texts()
    assert set(COHORT) == set(texts), "the cohort answers every exercise the course grades"
    dev_exercises, test_exercises = cohort_split(COHORT)
    # the references are review's own: the same fingerprints as evidence.course_fingerprints gives
    for folder in sorted(p.name for p in (COURSE / "source").iterdir() if p.is_dir()):
        spec = {"exercises": {g: {"function": defined_name(s, g)} for g, s in solution_cells(COURSE, folder).items()}}
        theirs = course_fingerprints(COURSE, folder, folder, spec)
        ours = references({g: texts[g] for g in theirs}, canonical_form=False)
        assert {g: sorted(map(sorted, [p for _, _, p in v])) for g, v in ours.items()} == \
            {g: sorted(map(sorted, [p for _, p in v])) for g, v in theirs.items()}, folder

    measured = {}
    for split, exercises in (("dev", dev_exercises), ("test", test_exercises)):
        copies = cohort_copies(exercises)
        for form, canonical_form in (("tokens", False), ("canonical", True)):
            measured[split, form] = cohort_measures(exercises, canonical_form, texts, COHORT, copies)
    chosen = choose_thresholds(measured["dev", "canonical"])
    rows = []
    for split in ("dev", "test"):
        tokens, canon = measured[split, "tokens"], measured[split, "canonical"]
        rows.append(_row(split, "tokens (in use)", TOKENS, rule_outcome([(tokens, TOKENS)]), [tokens]))
        rows.append(_row(split, "canonical form, dev thresholds", chosen, rule_outcome([(canon, chosen)]), [canon]))
        rows.append(_row(split, "either: tokens at review's, canonical at dev's",
                         " / ".join(f"{TOKENS[k]} or {'none' if chosen[k] is None else chosen[k]}" for k in TOKENS),
                         rule_outcome([(tokens, TOKENS), (canon, chosen)]), [tokens, canon]))
        rows.append(_row(split, "canonical form, review's thresholds", TOKENS, rule_outcome([(canon, TOKENS)]),
                         [canon]))
        rows.append(_row(split, "either: both at review's thresholds", TOKENS,
                         rule_outcome([(tokens, TOKENS), (canon, TOKENS)]), [tokens, canon]))
    for row in rows:
        print(row)

    # Two checks outside the cohort, at the chosen thresholds: the mistake catalogues' right answers of the test
    # exercises (pairs), and bench/attacks.py's honest typed attention (h-lazy-typed) against the course.
    catalogue = {c.removeprefix("check_"): s for c, s in catalogue_answers().items()
                 if c.removeprefix("check_") in test_exercises}
    catalogue_pairs = {form: [(f"{e} {i}-{j}", share(prints(s[i], f), prints(s[j], f)))
                              for e, s in catalogue.items() for i, j in combinations(range(len(s)), 2)]
                       for form, f in (("tokens", False), ("canonical", True))}
    typed = {form: course_share(prints(TYPED_SDPA, f), references(texts, f)["scaled_dot_product_attention"])
             for form, f in (("tokens", False), ("canonical", True))}

    # The cohort's three answers to an exercise are in three different styles; two students who both write the
    # text's formula are closer. The course's own solution, written apart from the cohort, stands in for such a
    # fourth classmate: its pairs with the cohort's answers under the classmates rule.
    fourth = {}
    for split, exercises in (("dev", dev_exercises), ("test", test_exercises)):
        for form, f, t in (("tokens", False, CLASSMATES_SIMILAR), ("canonical", True, chosen["classmates"])):
            pairs = [(f"{e} {i}", share(prints(texts[e][0][1], f), prints(a, f)))
                     for e in exercises for i, a in enumerate(COHORT[e])]
            hits = [f"{label} ({m:.2f})" for label, m in pairs if classmates_flag(m, t)]
            fourth[split, form] = f"{len(hits)} of {sum(m is not None for _, m in pairs)}" + (
                f" ({', '.join(hits)})" if hits else "")

    def flagged_pairs(form, t):
        return [label for label, m in catalogue_pairs[form] if m is not None and m >= t]

    split_of = "dev" if "scaled_dot_product_attention" in dev_exercises else "test"
    dev_canon = measured["dev", "canonical"]
    blocking = sorted((m[0], label) for label, m in dev_canon["answers"] if m is not None and m[0] >= 0.95)
    flagged_styles = sorted({label.rsplit(" ", 1)[1] for split in ("dev", "test")
                             for label in rule_outcome([(measured[split, "tokens"], TOKENS)])["course: false flags"]})
    why = ("" if chosen["course"] is not None else
           f"No course threshold: in canonical form dev's cohort answers {', '.join(l for _, l in blocking)} hold "
           f"{', '.join(f'{v:.2f}' for v, _ in blocking)} of the course's code, so every threshold on the grid "
           "flags one; the course rule in canonical form is left off (never flags) in the rows below. ")
    notes = (
        f"The cohort: bench/cohort.py, {sum(map(len, COHORT.values()))} answers, 3 to each of the "
        f"{len(COHORT)} graded exercises, written from the exercises' text before any was measured; every one "
        f"passes its check (tests/test_similarity_cohort.py; {len(FIXED)} fixed for correctness after its first "
        f"run: {'; '.join(FIXED)}). Split fixed before measuring, the exercises by name alternately: dev "
        f"{len(dev_exercises)} ({', '.join(dev_exercises)}), test {len(test_exercises)} "
        f"({', '.join(test_exercises)}). False flags: a cohort answer holding the course's code's share "
        "(evidence.course_similarity: the notebook's solution and plmcourse's own version, the short-code "
        "threshold below MIN_FINGERPRINTS) and a pair of one exercise's cohort answers over the classmates "
        f"threshold. Copies found: bench/similarity.py's rewritten copies of the split's solutions (every rewrite; "
        f"'all of these' alone), the course rule against the course's code, the classmates rule against the "
        f"original. Thresholds chosen on dev for the canonical form (the grid 0.50 to 1.00, none flagging dev's "
        f"cohort, then most copies found, then the highest): course {chosen['course'] or 'none'}, short code "
        f"{chosen['course, short'] or 'none'}, classmates {chosen['classmates'] or 'none'} (review's, for tokens: "
        f"{COURSE_SIMILAR}, {RETYPED}, {CLASSMATES_SIMILAR}). {why}The cohort answers review's course rule flags today (tokens) are "
        f"all of style {', '.join(flagged_styles)} (0: written close to the text's formula, 1: loops and names, 2: "
        "vectorised another way). Outside the cohort, test exercises' catalogue right answers: "
        f"{len(flagged_pairs('tokens', CLASSMATES_SIMILAR))} of "
        f"{sum(m is not None for _, m in catalogue_pairs['tokens'])} pairs flagged as tokens, "
        + (f"{len(flagged_pairs('canonical', chosen['classmates']))} of "
           f"{sum(m is not None for _, m in catalogue_pairs['canonical'])} in canonical form at the dev "
           f"threshold ({', '.join(flagged_pairs('canonical', chosen['classmates'])) or 'none'})"
           if chosen["classmates"] is not None else "no canonical threshold chosen")
        + "; the course's solution as a fourth classmate of the cohort (pairs flagged, tokens at "
        f"{CLASSMATES_SIMILAR} / canonical at {chosen['classmates']}): dev {fourth['dev', 'tokens']} / "
        f"{fourth['dev', 'canonical']}, test {fourth['test', 'tokens']} / {fourth['test', 'canonical']}"
        f"; bench/attacks.py's h-lazy-typed attention (a {split_of} exercise) holds "
        f"{typed['tokens'][0]:.2f} of the course's code as tokens, {typed['canonical'][0]:.2f} in canonical form.")
    print(notes)
    return write_result("review_cohort", {
        "title": "Review's similarity on a cohort of independent answers: the canonical form's thresholds, set on "
                 "dev, tried on test",
        "notes": notes, "rows": rows,
        "chosen": chosen, "dev": dev_exercises, "test": test_exercises})


if __name__ == "__main__":
    print(main())
