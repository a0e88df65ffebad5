"""Flags the instructor sees: in the gradebook, in the export, and in `plmcourse grade review`.

A flag is evidence for a person, not a verdict: the points stay as the judge decided them.
After autograding, every flag of a submission (plmcourse.autograde.evidence.Flag: the
kernel's own report, the grader's reading of the source, closeness to the course's code or to
a classmate's answer, what collect found) lands in three places:

* the gradebook: the exercise's test cell is marked as needing a manual grade, and the
  answer cell's comment says why (the formgrader shows both; `grade all` needs nobody to
  read a terminal). The judge's full sentence for a failed test goes there too, since the
  kernel, and so the notebook's output, is told less about hidden cases;
* `course/review/<assignment>.csv`, one row per flag (student, notebook, exercise, the points the
  judge gave that exercise, evidence, similarity, source), most suspicious student first, printed by
  `plmcourse grade review`: a flag on an exercise that already scored 0 reads differently from one
  that kept its marks;
* the export: `plmcourse grade export` adds a `flags` column (nbgrader_ext.CsvExportWithFlags).

All of it is text a submission may have shaped: one line each (evidence.one_line), and any
cell a spreadsheet would read as a formula starts with an apostrophe (`spreadsheet_safe`).
"""

from __future__ import annotations

import csv
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from plmcourse.autograde.evidence import (
    CLASSMATES_SIMILAR,
    Flag,
    analyse_submission,
    analysis_spec,
    classmates,
    closest_pairs,
    course_fingerprints,
    course_similarity,
    one_line,
)
from plmcourse.autograde.sandbox import STOPPED

COLUMNS = ("student", "notebook", "exercise", "points", "evidence", "similarity", "source")
OLDER_COLUMNS = ("student", "notebook", "exercise", "evidence", "similarity", "source")  # a file from before "points"
# How much a flag says, for "most suspicious first": what the code does, then what it resembles.
WEIGHT = {"kernel": 3.0, "sandbox": 3.0, "answer": 3.0, "collect": 3.0, "cell": 2.0, "course": 1.5, "classmates": 1.0}
NOTE = "[plmcourse] "  # begins every line the grader writes into a gradebook comment
MAX_NOTEBOOK_BYTES = 50 * 1024 ** 2


def review_folder(course: Path) -> Path:
    return Path(course) / "review"


def read_submissions(course: Path, assignment: str, students: list[str]) -> dict:
    """Each submitted notebook of `students` read for evidence (evidence.analyse_submission, each in
    its own bounded process, as many at once as there are cores): {notebook: {"spec": its
    analysis_spec, "found": {student: what the reading found}}}. A notebook too large to read
    is "found" as one flag saying so."""
    course = Path(course).resolve()
    read = {}
    for path in sorted((course / "source" / assignment).glob("*.ipynb")):
        spec = analysis_spec(course, assignment, path.stem)
        paths = {s: course / "submitted" / s / assignment / path.name for s in students}
        paths = {s: p for s, p in paths.items() if p.is_file() and not p.is_symlink()}

        def one(student):
            size = paths[student].stat().st_size
            if size > MAX_NOTEBOOK_BYTES:
                return {"flags": [["", "cell", f"a notebook of {size // 2 ** 20} MB, too large to read for evidence"]]}
            return analyse_submission(paths[student], spec)

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            read[path.stem] = {"spec": spec, "found": dict(zip(paths, pool.map(one, paths)))}
    return read


def sealed_answers(read: dict) -> dict:
    """{(student, notebook, test cell grade_id): sentence} for every answer whose source reaches what
    its exercise forbids: judge.apply_verdicts scores those test cells 0, as it does when the
    kernel reports such a call (the source is the evidence a kernel cannot withhold)."""
    found = {}
    for notebook, part in read.items():
        exercises = part["spec"]["exercises"]
        for student, result in part["found"].items():
            for exercise, phrase in result.get("sealed", []):
                test_id = exercises.get(exercise, {}).get("test_id")
                if test_id and (student, notebook, test_id) not in found:
                    found[(student, notebook, test_id)] = (
                        f"your answer {phrase}, which the exercise forbids (read in its source); write it yourself")
    return found


def gather(course: Path, assignment: str, students: list[str], kernel_flags: list, read: dict) -> list[Flag]:
    """Every flag of `students`' submissions: the kernel's (as apply_verdicts returns them), what
    prepare_submissions found (save_collect_flags), and the grader's reading of each submitted
    notebook (`read`, from read_submissions), with closeness to the course's code.

    Classmates are compared over the whole class, from the fingerprints kept in
    course/review/<assignment>.prints.json, so grading one student again compares them with
    everyone graded before.
    """
    course = Path(course).resolve()
    specs = {notebook: part["spec"] for notebook, part in read.items()}
    # The kernel's reports begin otherwise ("the kernel's policy ...", a check's flag): only the launcher, outside
    # the sandbox, says that it stopped a kernel.
    flags = [Flag(s, n, _answer_of(specs.get(n), test_id), evidence,
                  "sandbox" if evidence.startswith(STOPPED) else "kernel")
             for s, n, test_id, evidence in kernel_flags]
    flags += [flag for flag in load_collect_flags(course, assignment) if flag.student in students]
    prints_path = review_folder(course) / f"{assignment}.prints.json"
    prints = _read_json(prints_path)
    for notebook, part in read.items():
        spec = part["spec"]
        references = course_fingerprints(course, assignment, notebook, spec)
        first = next(iter(spec["exercises"]), "")
        for student, found in part["found"].items():
            flags += [Flag(student, notebook, exercise if exercise in spec["exercises"] else first, phrase,
                           source if source in ("answer", "cell") else "cell")
                      for exercise, source, phrase in found["flags"]]
            mine = {e: p for e, p in found.get("fingerprints", {}).items() if e in spec["exercises"]}
            prints.setdefault(notebook, {})[student] = mine
            flags += course_similarity(student, notebook, mine, references)
    graded = set(students)
    closest = []
    for notebook, by_student in prints.items():
        copied = {(f.student, f.exercise) for f in flags if f.source == "course"}
        copied |= _copied_before(course, assignment, graded)
        flags += [f for f in classmates(notebook, by_student, copied) if f.student in graded]
        closest += [(share, a, b, notebook, exercise) for share, a, b, exercise in closest_pairs(notebook, by_student, copied)]
    review_folder(course).mkdir(exist_ok=True)
    prints_path.write_text(json.dumps(prints))
    write_closest(course, assignment, sorted(closest, key=lambda pair: (-pair[0], pair[1:]))[:CLOSEST])
    return flags


CLOSEST = 10  # pairs under the classmates threshold listed for a person (review/<assignment>.closest.csv)
CLOSEST_COLUMNS = ["similarity", "student", "other", "notebook", "exercise"]


def write_closest(course: Path, assignment: str, pairs: list[tuple]) -> Path:
    """course/review/<assignment>.closest.csv: the class's most similar unflagged pairs, closest first."""
    path = review_folder(course) / f"{assignment}.closest.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    written = path.with_name(path.name + ".new")
    with open(written, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CLOSEST_COLUMNS)
        writer.writerows([f"{share:.2f}", *(spreadsheet_safe(x) for x in rest)] for share, *rest in pairs)
    os.replace(written, path)
    return path


def closest_table(course: Path, assignment: str) -> list[str]:
    """The closest unflagged pairs as aligned text lines (none when there are none)."""
    path = review_folder(course) / f"{assignment}.closest.csv"
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        rows = [row for row in csv.DictReader(f) if set(CLOSEST_COLUMNS) <= set(row)]
    if not rows:
        return []
    cells = [{k: one_line(row[k], 40) or "-" for k in CLOSEST_COLUMNS} for row in rows]
    widths = {k: max(len(k), *(len(c[k]) for c in cells)) for k in CLOSEST_COLUMNS}
    return ([f"closest pairs under the classmates threshold ({CLASSMATES_SIMILAR:.2f}), not flagged: a rewritten "
             f"copy is likely near the top"]
            + ["  ".join(k.ljust(widths[k]) for k in CLOSEST_COLUMNS).rstrip()]
            + ["  ".join(c[k].ljust(widths[k]) for k in CLOSEST_COLUMNS).rstrip() for c in cells])


def _answer_of(spec, test_id: str) -> str:
    """The answer cell whose test cell is `test_id` (a kernel flag names the test)."""
    for answer, exercise in (spec or {}).get("exercises", {}).items():
        if exercise["test_id"] == test_id:
            return answer
    return ""


def _copied_before(course: Path, assignment: str, graded: set) -> set:
    """(student, exercise) already flagged as the course's code in the review file, for students not regraded now."""
    return {(row["student"], row["exercise"]) for row in read_review(course, assignment)
            if row["source"] == "course" and row["student"] not in graded}


def _read_json(path: Path) -> dict:
    try:
        found = json.loads(path.read_text())
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError):
        return {}


# ----------------------------------------------------------------------------
# The gradebook


def write_gradebook(course: Path, assignment: str, students: list[str], flags: list[Flag], failures: list,
                    specs: dict) -> list[str]:
    """Mark each flagged exercise's test cell for a manual grade, and write the evidence and the
    judge's sentences into the answer cell's comment (replacing what the grader wrote there
    before, keeping what a person wrote). One report line per submission it could not reach.
    specs: {notebook: its evidence.analysis_spec}, as read_submissions made them."""
    from nbgrader.api import Gradebook, MissingEntry

    course = Path(course).resolve()
    problems = []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for notebook, spec in specs.items():
            first = next(iter(spec["exercises"]), "")
            for student in students:
                for answer, exercise in spec["exercises"].items():
                    mine = [f for f in flags if f.student == student and f.notebook == notebook
                            and (f.exercise or first) == answer]
                    why = [w for s, n, t, w in failures if (s, n, t) == (student, notebook, exercise["test_id"])]
                    notes = [f"The grader: {one_line(w, 600)}" for w in why]
                    notes += [f"Flagged for review ({f.source}): {_for_the_student(f)}" for f in mine]
                    notes = [comment_safe(note) for note in notes]
                    try:
                        comment = gradebook.find_comment(answer, notebook, assignment, student)
                    except MissingEntry:
                        continue  # not graded: nbgrader's own report says so
                    kept = [line for line in (comment.manual_comment or "").splitlines() if not line.startswith(NOTE)]
                    comment.manual_comment = "\n".join(kept + [NOTE + note for note in notes]) or None
                    if mine and exercise["test_id"]:
                        try:
                            grade = gradebook.find_grade(exercise["test_id"], notebook, assignment, student)
                            grade.needs_manual_grade = True
                        except MissingEntry:
                            problems.append(f"{student}: {notebook} has no grade for {exercise['test_id']}, "
                                            f"so its flag is in the review table only")
                gradebook.db.commit()
    return problems


def exercise_points(course: Path, assignment: str, flags: list[Flag], specs: dict) -> dict:
    """{(student, notebook, exercise): "0 of 2"}: what the judge gave each flagged exercise's test cell,
    read back from the gradebook ("" where it has no such grade)."""
    from nbgrader.api import Gradebook, MissingEntry

    points = {}
    with Gradebook(f"sqlite:///{Path(course).resolve() / 'gradebook.db'}") as gradebook:
        for flag in flags:
            spec = specs.get(flag.notebook) or {}
            exercise = spec.get("exercises", {}).get(flag.exercise or next(iter(spec.get("exercises", {})), ""))
            if not exercise or not exercise["test_id"]:
                continue
            try:
                grade = gradebook.find_grade(exercise["test_id"], flag.notebook, assignment, flag.student)
            except MissingEntry:
                continue
            if grade.auto_score is not None:
                points[(flag.student, flag.notebook, flag.exercise)] = f"{grade.auto_score:g} of {grade.max_score:g}"
    return points


def comment_safe(text: str) -> str:
    """A gradebook comment line that renders as the text it is: the feedback page turns comments into
    HTML through Markdown, and a judge's sentence may quote a student's exception or code. Escaped is
    only what Markdown would act on, since the formgrader shows the comment as plain text: a tag's or
    an entity's opening (< before a letter, / ! or ?; & before a name or #), and brackets where a
    [link](...), [link][ref] or [ref]: could form (no space between); "[0, 2, 24]" stays as it is."""
    text = re.sub(r"&(?=#?\w+;)", "&amp;", text)
    text = re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text)
    if re.search(r"\][(\[:]", text):
        text = text.replace("[", "\\[").replace("]", "\\]")
    return text


def _for_the_student(flag: Flag) -> str:
    """The evidence as a comment shows it: the student reads it in the feedback, so a classmate
    is not named there (the review table names them, for the instructor)."""
    if flag.source == "classmates":
        return (f"{flag.exercise} is very close to another student's answer (similarity {flag.similarity:.2f}); "
                f"the instructor will compare them")
    return flag.evidence


# ----------------------------------------------------------------------------
# The review table


def spreadsheet_safe(text: str) -> str:
    """A CSV cell that no spreadsheet runs: one beginning with = + - @ or a tab gets an apostrophe."""
    text = str(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def read_review(course: Path, assignment: str) -> list[dict]:
    path = review_folder(course) / f"{assignment}.csv"
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return [{"points": "", **row} for row in csv.DictReader(f) if set(OLDER_COLUMNS) <= set(row)]


def write_review(course: Path, assignment: str, students: list[str], flags: list[Flag],
                 points: dict | None = None) -> Path:
    """course/review/<assignment>.csv: these students' flags replace their earlier rows (and every
    classmates row, which is recomputed over the class each time); most suspicious first.
    points: {(student, notebook, exercise): "0 of 2"}, as exercise_points reads them."""
    graded, points = set(students), points or {}
    rows = [row for row in read_review(course, assignment)
            if row["student"] not in graded and row["source"] != "classmates"]
    rows += [{"student": f.student, "notebook": f.notebook, "exercise": f.exercise,
              "points": points.get((f.student, f.notebook, f.exercise), ""), "evidence": f.evidence,
              "similarity": "" if f.similarity is None else f"{f.similarity:.2f}", "source": f.source}
             for f in flags]
    return write_rows(sort_rows(rows), review_folder(course) / f"{assignment}.csv")


def write_rows(rows: list[dict], path: Path) -> Path:
    """The rows as a CSV file at `path` (written beside it and moved over)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    written = path.with_name(path.name + ".new")
    with open(written, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows({k: spreadsheet_safe(row[k]) for k in COLUMNS} for row in rows)
    os.replace(written, path)
    return path


def _weight(row: dict) -> float:
    similarity = float(row["similarity"].lstrip("'")) if row["similarity"] else 0.0
    return WEIGHT.get(row["source"], 1.0) + similarity


def sort_rows(rows: list[dict]) -> list[dict]:
    """Students by the sum of their rows' weights (most first), each student's rows heaviest first."""
    totals = {}
    for row in rows:
        totals[row["student"]] = totals.get(row["student"], 0.0) + _weight(row)
    return sorted(rows, key=lambda r: (-totals[r["student"]], r["student"], -_weight(r), r["exercise"], r["evidence"]))


def review_table(course: Path, assignment: str) -> list[str]:
    """The review file as aligned text lines, for a terminal."""
    rows = read_review(course, assignment)
    if not rows:
        return [f"no flags for {assignment} (or it was not autograded with plmcourse grade)"] + closest_table(
            course, assignment)
    head = ["student", "exercise", "points", "similarity", "source", "evidence"]
    # Each cell one inert line of its own (escaped, at most 40 characters but the evidence), "-" when empty:
    # the columns then line up, and a terminal prints the lines as they are (cli: not collapsed again).
    table = [{k: one_line(row[k], 40 if k != "evidence" else 600) or "-" for k in head} for row in rows]
    widths = {k: max(len(k), *(len(cells[k]) for cells in table)) for k in head[:-1]}
    lines = ["  ".join(k.ljust(widths.get(k, 0)) for k in head).rstrip()]
    for cells in table:
        lines.append("  ".join([cells[k].ljust(widths[k]) for k in head[:-1]] + [cells["evidence"]]))
    closest = closest_table(course, assignment)
    return lines + ([""] + closest if closest else [])


def flags_by_submission(course: Path) -> dict:
    """{(student, assignment): "evidence | evidence"} over every review file, for the export."""
    found = {}
    for path in sorted(review_folder(course).glob("*.csv")):
        for row in read_review(course, path.stem):
            where = f"{row['exercise']}: " if row["exercise"] else ""
            found.setdefault((row["student"], path.stem), []).append(where + row["evidence"])
    return {key: " | ".join(lines) for key, lines in found.items()}


# ----------------------------------------------------------------------------
# What collect and prepare_submissions found, kept until autograde gathers it


def save_collect_flags(course: Path, assignment: str, students: list[str], flags: list[Flag]) -> None:
    """Keep prepare_submissions' flags of `students` (replacing their earlier ones) for `gather`."""
    path = review_folder(course) / f"{assignment}.collect.json"
    kept = [row for row in _read_json(path).get("flags", []) if isinstance(row, dict) and row.get("student") not in students]
    kept += [{"student": f.student, "notebook": f.notebook, "exercise": f.exercise, "evidence": f.evidence} for f in flags]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"flags": kept}))


def load_collect_flags(course: Path, assignment: str) -> list[Flag]:
    rows = _read_json(review_folder(course) / f"{assignment}.collect.json").get("flags", [])
    return [Flag(str(r["student"]), str(r["notebook"]), str(r["exercise"]), str(r["evidence"]), "collect")
            for r in rows if isinstance(r, dict) and {"student", "notebook", "exercise", "evidence"} <= set(r)]
