"""`plmcourse grade report ASSIGNMENT`: the class at a glance, after grading.

For each exercise: how the scores are spread, how many students left it as handed out, and the mistakes the
checks named most often, each with how many students made it; then the flags for review by kind. Written as
course/reports/<assignment>.html (a table and one small bar chart per exercise) and <assignment>.csv.

Everything here comes from the gradebook (scores, and the judge's sentences and the flags the grading wrote into
the answer cells' comments, each line beginning with review.NOTE) and from the autograded notebooks' answer
cells, so a student's text is in it: every cell of the page is escaped, the charts are images, the page has no
script, and a CSV cell that a spreadsheet would run starts with an apostrophe.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from plmcourse.autograde.evidence import analysis_spec, one_line
from plmcourse.autograde.review import NOTE, spreadsheet_safe

STUB = "raise NotImplementedError"  # what a released answer cell holds (course/nbgrader_config.py)
GRADER, FLAGGED = "The grader: ", "Flagged for review ("
TOP = 5  # mistakes listed per exercise


@dataclass
class Exercise:
    name: str                  # the answer cell's grade_id
    test_id: str
    points: float
    scores: list = field(default_factory=list)      # one per graded student
    untouched: int = 0                              # answer cells still as handed out
    mistakes: Counter = field(default_factory=Counter)
    flags: Counter = field(default_factory=Counter)  # by source

    def row(self) -> dict:
        graded = len(self.scores)
        full = sum(s >= self.points for s in self.scores)
        return {"exercise": self.name, "points": f"{self.points:g}", "graded": graded,
                "mean score": f"{sum(self.scores) / graded:.2f}" if graded else "",
                "full marks": full, "zero": sum(s == 0 for s in self.scores), "left as handed out": self.untouched,
                "most common mistakes": " | ".join(f"{n} x {m}" for m, n in self.mistakes.most_common(TOP)),
                "flags": " | ".join(f"{n} x {source}" for source, n in sorted(self.flags.items()))}


def mistake_of(sentence: str) -> str:
    """The mistake a check's sentence names, with what differs from student to student taken out: the case
    ("check_x failed on case 3 of 12 (n=4, ...): ") and the numbers (each becomes #)."""
    text = one_line(sentence, 600)
    # As review.comment_safe wrote it into the comment: back to the plain sentence (the page escapes it again).
    for escaped, plain in (("\\[", "["), ("\\]", "]"), ("&lt;", "<"), ("&amp;", "&")):
        text = text.replace(escaped, plain)
    at = text.find(" failed on case ")
    if at >= 0 and (start := text.find("(", at)) >= 0:
        depth = 0
        for i in range(start, len(text)):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if depth == 0:
                text = text[:at] + ":" + text[i + 1:].removeprefix(":")
                break
    return re.sub(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", "#", text).strip()


def gather(course: Path, assignment: str) -> list[Exercise]:
    """Every exercise of `assignment` with what the gradebook and the autograded notebooks say of it."""
    from nbgrader.api import Gradebook, MissingEntry

    course = Path(course).resolve()
    exercises = []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        students = [s.id for s in gradebook.students]
        for path in sorted((course / "source" / assignment).glob("*.ipynb")):
            notebook = path.stem
            spec = analysis_spec(course, assignment, notebook)
            found = {name: Exercise(name, e["test_id"] or "", 0.0) for name, e in spec["exercises"].items()}
            for student in students:
                try:
                    gradebook.find_submission_notebook(notebook, assignment, student)
                except MissingEntry:
                    continue
                cells = _answer_cells(course / "autograded" / student / assignment / path.name)
                for name, exercise in found.items():
                    try:
                        grade = gradebook.find_grade(exercise.test_id, notebook, assignment, student)
                    except MissingEntry:
                        continue
                    exercise.points = float(grade.max_score or 0)
                    exercise.scores.append(float(grade.score or 0))
                    exercise.untouched += STUB in cells.get(name, STUB)
                    try:
                        comment = gradebook.find_comment(name, notebook, assignment, student).manual_comment
                    except MissingEntry:
                        comment = None
                    for line in (comment or "").splitlines():
                        note = line.removeprefix(NOTE) if line.startswith(NOTE) else None
                        if note and note.startswith(GRADER) and STUB not in cells.get(name, STUB):
                            exercise.mistakes[mistake_of(note.removeprefix(GRADER))] += 1
                        elif note and note.startswith(FLAGGED):
                            exercise.flags[note[len(FLAGGED):].split(")", 1)[0]] += 1
            exercises += found.values()
    return exercises


def _answer_cells(path: Path) -> dict:
    """{answer grade_id: its source} of an autograded notebook ({} if it cannot be read)."""
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # nbgrader reported it already; the report counts no answer for it
        return {}
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if isinstance(c.metadata.get("nbgrader"), dict) and c.metadata["nbgrader"].get("solution")
            and isinstance(c.metadata["nbgrader"].get("grade_id"), str)}


def _chart(exercise: Exercise) -> str:
    """A small bar chart of the exercise's scores, as a data: URL of a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = Counter(exercise.scores)
    values = sorted(set(counts) | {0.0, exercise.points})
    fig, ax = plt.subplots(figsize=(3.2, 1.8), dpi=100)
    ax.bar([f"{v:g}" for v in values], [counts.get(v, 0) for v in values], color="#4878a8")
    ax.set_xlabel(f"score (of {exercise.points:g})")
    ax.set_ylabel("students")
    ax.set_title(exercise.name, fontsize=9)
    ax.yaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def write(course: Path, assignment: str, out: Path | None = None) -> tuple[Path, Path]:
    """course/reports/<assignment>.html and .csv (or in `out`); returns both paths."""
    exercises = gather(course, assignment)
    out = Path(out or Path(course) / "reports")
    out.mkdir(parents=True, exist_ok=True)
    rows = [e.row() for e in exercises]
    csv_path = out / f"{assignment}.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["exercise"])
        writer.writeheader()
        writer.writerows([{k: spreadsheet_safe(v) for k, v in row.items()} for row in rows])
    html_path = out / f"{assignment}.html"
    html_path.write_text(_page(assignment, exercises), encoding="utf-8")
    return html_path, csv_path


def _page(assignment: str, exercises: list[Exercise]) -> str:
    e = html.escape
    graded = max((len(x.scores) for x in exercises), default=0)
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(assignment)}: the class</title>",
             "<style>body{font-family:sans-serif;max-width:980px;margin:1em auto}td,th{border:1px solid #ccc;"
             "padding:4px;vertical-align:top;text-align:left}table{border-collapse:collapse}"
             "section{margin:1.5em 0}</style></head><body>",
             f"<h1>{e(assignment)}: the class at a glance</h1><p>{graded} graded submissions.</p>"]
    nobody = [x.name for x in exercises if x.scores and x.untouched == len(x.scores)]
    if nobody:
        parts.append(f"<p><b>Nobody attempted:</b> {e(', '.join(nobody))}</p>")
    flags = Counter()
    for x in exercises:
        flags.update(x.flags)
    parts.append("<p><b>Flags for review:</b> " + (e(", ".join(f"{n} {s}" for s, n in sorted(flags.items())))
                                                    if flags else "none") + " (the list: <code>plmcourse grade review "
                 f"{e(assignment)}</code>)</p>")
    for x in exercises:
        row = x.row()
        parts.append(f"<section><h2>{e(x.name)}</h2><img alt='scores of {e(x.name)}' src='{_chart(x)}'>"
                     f"<p>{row['graded']} graded, mean {e(row['mean score'])} of {e(row['points'])}; "
                     f"{row['full marks']} full marks, {row['zero']} zero, {row['left as handed out']} left as "
                     f"handed out.</p>")
        if x.mistakes:
            parts.append("<table><tr><th>students</th><th>what the check said (numbers as #)</th></tr>")
            parts += [f"<tr><td>{n}</td><td>{e(m)}</td></tr>" for m, n in x.mistakes.most_common(TOP)]
            parts.append("</table>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)
