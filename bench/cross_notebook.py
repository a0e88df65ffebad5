"""Issue 43's allow-listed package, measured: answers that hand their work to another notebook's graded function.

The course package holds, besides each exercise's reference, the graded functions of every other notebook:
02's cross-entropy, 04's MLM loss, 08's InfoNCE, 15's SFT loss. Several exercises are the same computation
with other arguments (a causal LM loss is a cross-entropy on shifted logits; CLIP's loss is InfoNCE both
ways), so an answer can hand its work to another notebook's function, which the grading sandbox stubs only
for the assignment that grades it. Each row below is an answer of that kind, written before the sandbox
was changed (`CROSS_ROUND`), graded as an instructor grades (`plmcourse grade all`, bubblewrap, the
judge) in a copy of the course beside the solved notebook and an honest answer written another way;
the gradebook's score of the exercise's test cell is read back.

    cd /tmp && PYTHONPATH=/work/before /work/main/.venv/bin/python /work/main/bench/cross_notebook.py --record before

prints a markdown table (student, assignment, deserved, got, flag) and, with --record, keeps the rows under
the label in bench/cross_notebook_runs.json; once 'before' and 'after' are both there, the table setting them
side by side is written to bench/results/grading_cross_notebook.json (RESULTS.md).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

import plmcourse
from plmcourse.release import nbgrader_env, release_course, solved_release

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "bench" / "cross_notebook_runs.json"  # each labelled run's rows; the table is built from them
TITLE = "Another notebook's graded function: answers that hand their work to it, before and after (issue 43)"
NOTES = ("Issue 43's allow-listed package: answers written before the change (bench/cross_notebook.py, CROSS_ROUND) "
         "that call another notebook's graded function of the course package with other arguments, and honest "
         "answers written another way, each graded by `plmcourse grade all` (bubblewrap, the judge) in a course "
         "of its assignment beside the solved notebook ('solved'). 'got' is the gradebook's score of the "
         "exercise's test cell ('solved': every test cell). Before: commit {before}, where the sandbox stubbed "
         "only the graded assignment's own functions (and whatever behaves as them). After: commit {after}, "
         "where an assignment's kernel sees only what its own notebooks reach (plmcourse/autograde/exposure.py). "
         "A flag is evidence for a person, never a grade.")


@dataclass
class Answer:
    name: str
    assignment: str
    exercise: str      # the solution cell's grade_id; its test cell is "test_" + exercise
    source: str
    honest: bool       # deserves the exercise's points


CROSS_ROUND = [
    Answer("x-clip-by-infonce", "14_text_and_images", "clip_loss", '''\
def clip_loss(image_emb, text_emb, temperature=0.07):
    # 08's SimCSE loss, one direction each way: CLIP's loss is InfoNCE made symmetric
    from plmcourse.ref.sentence_embeddings import info_nce_loss
    return 0.5 * (info_nce_loss(image_emb, text_emb, temperature) + info_nce_loss(text_emb, image_emb, temperature))
''', False),
    Answer("x-causal-by-cross-entropy", "05_gpt", "causal_lm_loss", '''\
def causal_lm_loss(logits, tokens, ignore_index=-100):
    from plmcourse.nn.objectives import cross_entropy   # 02's graded loss, on shifted logits
    return cross_entropy(logits[..., :-1, :], tokens[..., 1:], ignore_index=ignore_index)
''', False),
    Answer("x-causal-by-sft", "05_gpt", "causal_lm_loss", '''\
def causal_lm_loss(logits, tokens, ignore_index=-100):
    import numpy as np
    import torch
    from plmcourse.ref import instruct                  # 15's SFT loss: every counted token is "the answer"
    x = logits.detach().double().cpu().numpy()
    t = tokens.cpu().numpy()
    x, t = x.reshape(-1, *x.shape[-2:]), t.reshape(-1, t.shape[-1])
    counted = t != ignore_index
    value = instruct.sft_loss(x, np.where(counted, t, 0), counted)
    return torch.tensor(value, dtype=logits.dtype, device=logits.device)
''', False),
    Answer("x-mlm-by-cross-entropy", "04_bert", "mlm_loss", '''\
def mlm_loss(logits, labels):
    import plmcourse.nn                                  # 02's graded loss under its package name
    return plmcourse.nn.cross_entropy(logits, labels)
''', False),
    Answer("x-sft-by-cross-entropy", "15_from_gpt3_to_chatgpt", "sft_loss", '''\
def sft_loss(logits, tokens, answer_mask):
    from plmcourse import ref                            # 02's graded loss, the prompt's targets ignored
    counted = np.asarray(answer_mask)[:, 1:]
    if not counted.any():
        return 0.0
    targets = np.where(counted, tokens[:, 1:], -100)
    return float(ref.cross_entropy(logits[:, :-1], targets))
''', False),
    Answer("x-cross-entropy-by-mlm", "02_language_models_elmo", "cross_entropy", '''\
def cross_entropy(logits, targets, ignore_index=-100):
    import torch
    from plmcourse.nn.bert import mlm_loss               # a later notebook's loss, called with other arguments
    t = np.where(targets == ignore_index, -100, targets)
    return float(mlm_loss(torch.as_tensor(np.asarray(logits, dtype=np.float64)), torch.as_tensor(t)))
''', False),
    Answer("x-prefix-by-causal", "06_bart_and_friends", "prefix_lm_mask", '''\
def prefix_lm_mask(n, prefix_len):
    from plmcourse.ref.attention import causal_mask     # 03's graded mask, then the prefix opened
    mask = np.array(causal_mask(n), dtype=bool)
    mask[:, :prefix_len] = True
    return mask
''', False),
    # Honest answers written another way than the course's, beside the course's own (the solved notebook).
    Answer("h-causal-by-logsumexp", "05_gpt", "causal_lm_loss", '''\
def causal_lm_loss(logits, tokens, ignore_index=-100):
    scores, targets = logits[..., :-1, :], tokens[..., 1:]        # position t scores token t + 1
    keep = targets != ignore_index
    safe = torch.where(keep, targets, torch.zeros_like(targets))
    picked = torch.take_along_dim(scores, safe[..., None], dim=-1)[..., 0]
    nll = (torch.logsumexp(scores, dim=-1) - picked)[keep]
    return nll.mean() if nll.numel() else scores.sum() * 0.0
''', True),
    Answer("h-mlm-by-logsumexp", "04_bert", "mlm_loss", '''\
def mlm_loss(logits, labels):
    keep = labels != -100
    safe = torch.where(keep, labels, torch.zeros_like(labels))
    picked = torch.take_along_dim(logits, safe[..., None], dim=-1)[..., 0]
    nll = (torch.logsumexp(logits, dim=-1) - picked)[keep]
    return nll.mean() if nll.numel() else logits.sum() * 0.0
''', True),
]


def grade(answers: list[Answer], work: Path) -> list[dict]:
    """Grade each assignment's answers (and the solved notebook, "solved") in a copy of the course."""
    course_src = Path(plmcourse.__file__).resolve().parent.parent / "course"
    rows = []
    for assignment in sorted({a.assignment for a in answers}):
        mine = [a for a in answers if a.assignment == assignment]
        course, export = work / assignment / "course", work / assignment / "export"
        course.mkdir(parents=True)
        shutil.copy(course_src / "nbgrader_config.py", course)
        shutil.copytree(course_src / "source" / assignment, course / "source" / assignment)
        release_course(course, [assignment])  # a gradebook of its own, generated from the sources
        export.mkdir(parents=True)
        nbformat.write(solved_release(course, assignment), export / f"solved_{assignment}.ipynb")
        for a in mine:
            nb = solved_release(course, assignment, **{a.exercise: a.source})
            nbformat.write(nb, export / f"{a.name.replace('-', '')}_{assignment}.ipynb")
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "plmcourse", "grade", "all", assignment, str(export),
                               "--course", str(course)], capture_output=True, text=True, errors="replace",
                              env=nbgrader_env(), cwd=work)
        seconds = time.perf_counter() - started
        if done.returncode != 0 or os.environ.get("CROSS_VERBOSE"):
            print(done.stdout[-8000:], done.stderr[-8000:], file=sys.stderr)
        scores = _scores(course, assignment)
        flags = _flags(course, assignment)
        for a in [Answer("solved", assignment, "", "", True)] + mine:
            student = a.name.replace("-", "")
            got = scores.get(student, {})
            tests = [f"test_{a.exercise}"] if a.exercise else sorted(got)
            points = {t: got.get(t) for t in tests}
            rows.append({"student": a.name, "assignment": assignment, "exercise": a.exercise or "all",
                         "deserved": "full" if a.honest else 0,
                         "got": "; ".join(f"{t}: {s[0]} of {s[1]}" if s else f"{t}: not graded"
                                          for t, s in points.items()),
                         "flag": flags.get((student, a.exercise), ""),
                         "as deserved": all(s is not None and (s[0] == s[1] if a.honest else s[0] == 0)
                                            for s in points.values()),
                         "seconds": round(seconds, 1)})
    return rows


def _scores(course: Path, assignment: str) -> dict:
    """student -> {test cell: (score, max)} from the real gradebook."""
    from nbgrader.api import Gradebook

    result = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in gradebook.students:
            try:
                submission = gradebook.find_submission(assignment, student.id)
            except Exception:
                continue
            result[student.id] = {g.name: (g.score, g.max_score) for nb in submission.notebooks
                                  for g in nb.grades if g.name.startswith("test_")}
    return result


def _flags(course: Path, assignment: str) -> dict:
    """(student, exercise) -> the review table's evidence (flags for a person, not grades)."""
    path = course / "review" / f"{assignment}.csv"
    if not path.exists():
        return {}
    with path.open(newline="", encoding="utf-8") as f:
        return {(row["student"], row["exercise"]): row["evidence"] for row in csv.DictReader(f)}


def table(rows: list[dict]) -> str:
    lines = ["| student | assignment | deserved | got | as deserved | flag for a person |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['student']} | {r['assignment']} | {r['deserved']} | {r['got']} | "
              f"{'yes' if r['as deserved'] else '**no**'} | {r['flag'][:90]} |" for r in rows]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", metavar="LABEL", help="keep the rows in bench/results under LABEL")
    parser.add_argument("--only", help="comma-separated answers to grade")
    args = parser.parse_args(argv)
    answers = [a for a in CROSS_ROUND if not args.only or a.name in args.only.split(",")]
    with tempfile.TemporaryDirectory(prefix="cross-") as work:
        rows = grade(answers, Path(work))
    print(table(rows))
    if args.record:
        record(args.record, rows)


def record(label: str, rows: list[dict]) -> None:
    """Keep this run's rows under `label` ("before", "after") and rebuild the table that sets them side by
    side (bench/results/grading_cross_notebook.json, in RESULTS.md)."""
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))  # run as a script from elsewhere: after PYTHONPATH's plmcourse
    from bench.common import machine, write_result

    runs = json.loads(RUNS.read_text()) if RUNS.exists() else {}
    commit = subprocess.run(["git", "-C", str(Path(plmcourse.__file__).parent), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    if label in runs:  # a part of the round graded again: its rows replace theirs
        graded = {(r["student"], r["assignment"]) for r in rows}
        rows = [r for r in runs[label]["rows"] if (r["student"], r["assignment"]) not in graded] + rows
    runs[label] = {"commit": commit, "rows": rows}
    RUNS.write_text(json.dumps(runs, indent=1) + "\n")
    if {"before", "after"} <= set(runs):
        after = {(r["student"], r["assignment"]): r for r in runs["after"]["rows"]}
        side = [{"student": r["student"], "assignment": r["assignment"], "deserved": r["deserved"],
                 "before": r["got"], "as deserved, before": "yes" if r["as deserved"] else "no",
                 "after": after[key]["got"], "as deserved, after": "yes" if after[key]["as deserved"] else "no",
                 "flag for a person, after": after[key]["flag"]}
                for r in runs["before"]["rows"] if (key := (r["student"], r["assignment"])) in after]
        write_result("grading_cross_notebook", {
            "machine": machine(), "title": TITLE,
            "notes": NOTES.format(before=runs["before"]["commit"], after=runs["after"]["commit"]), "rows": side})


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
