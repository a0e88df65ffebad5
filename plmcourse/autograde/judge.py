"""The judge: decides every graded check in the grader's process, never in the student's.

`plmcourse grade autograde` starts one `Judge` for the whole class before nbgrader runs.
It listens on a Unix socket in a folder only the grader can reach. For each notebook,
the kernel launcher (plmcourse.autograde.sandbox, which runs outside the sandbox)
connects, says which notebook it is starting a kernel for, and hands the connected
socket to the sandboxed kernel. From then on:

1. a test cell calls, say, `check_softmax(softmax, hidden=True)`; in a kernel with a
   judge connection that only sends {"check": "check_softmax", "hidden": true};
2. the judge runs the same `check_softmax` here, with a `Remote` for the function: for
   each case it sends the inputs, the kernel calls the student's function and sends back
   plain data (plmcourse.grading.wire), and the judge compares it with the reference;
3. the judge writes the verdict to this notebook's record and sends the sentence back,
   for the kernel to show in the cell (that output is what the student's feedback shows).

Hidden cases: the judge runs each check's hidden cases with their seeds shifted by a
number drawn from the course's secret (course/.judge-secret, made on first use and hidden
by the sandbox) and the student's id, so a notebook cannot know them in advance (the
checks' code is public), and a regrade draws the same ones. A check's first hidden run in a
notebook decides (`read_record`), and a failure on a hidden case reaches the kernel without
the case's seed or values (`run_check`'s `for_kernel`): running the check again and again
teaches a notebook nothing it can use. The record keeps the whole sentence, for the comment.

After nbgrader has finished, `apply_verdicts` sets every test cell's score in the
gradebook from the records: a test cell scores its points when each check its source
version calls with hidden=True passed in the judge, and 0 otherwise. What the kernel itself
reported (nbgrader's own score) plays no part: a notebook that replaces the checks, patches
NumPy or walks the checker's frames only changes its own process, and the judge is not in it.

What a kernel could still do, and what catches it:
- call a library implementation under any name: the calls of each graded call are recorded
  in the kernel and reported here, and the submitted source is read by the grader
  (plmcourse.autograde.evidence); both are flags for a person (plmcourse.autograde.review);
- hand back an answer computed by someone else's correct code: that is a correct
  answer as far as any grader can tell (closeness to classmates' answers is a flag).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

from plmcourse.autograde.demos import cells_to_skip, nbgrader_metadata
from plmcourse.autograde.evidence import one_line
from plmcourse.grading import wire

CELL_SECONDS = int(os.environ.get("PLMCOURSE_CELL_SECONDS", "60"))  # as course/nbgrader_config.py
SOCKET_NAME = "judge.sock"

# Some checks seal a library's functions only when the notebook has loaded that library (so
# that a kernel does not pay for importing it). The judge is another process, which never
# imported what the student did: it loads them itself, where installed, before the check runs,
# so that a seal never depends on what the judge happened to import.
SEALED_LIBRARIES = {
    "attention": ("scipy.special",),
    "word_vectors": ("scipy.special",),
    "efficiency": ("torch.ao.quantization.observer", "torch.ao.quantization.fake_quantize",
                   "torch.ao.quantization.fx._decomposed"),
    "transfer": ("scipy.linalg",),
    "sentence_embeddings": ("sklearn.decomposition", "sentence_transformers.models", "sentence_transformers.losses"),
    "wordpiece": ("transformers.models.bert.tokenization_bert_legacy", "transformers.models.bert.tokenization_bert",
                  "transformers.tokenization_utils_base"),
}


def load_sealed_libraries(check: str) -> None:
    """Import the libraries `check`'s seal looks for (SEALED_LIBRARIES), those that are installed."""
    import importlib
    import importlib.util

    from plmcourse.grading import CHECKS

    for module in SEALED_LIBRARIES.get(CHECKS.get(check, ""), ()):
        try:
            if importlib.util.find_spec(module) is not None:
                importlib.import_module(module)
        except Exception:  # not installed, or broken: nothing of it can be sealed, or called
            continue


SECRET_NAME = ".judge-secret"  # in the course directory, which the sandbox hides


def course_secret(course: Path) -> bytes:
    """The course's secret for drawing hidden seeds, made on first use (keep it: regrades use it)."""
    path = Path(course) / SECRET_NAME
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    return path.read_text().strip().encode()


class Judge:
    """The grader's end of every kernel's check calls; records verdicts under `folder`."""

    def __init__(self, folder: Path, course: Path):
        self.folder = Path(folder)
        self.course = Path(course).resolve()
        self.socket_path = self.folder / SOCKET_NAME
        self.listener = None
        self.lock = threading.Lock()
        self.secret = course_secret(self.course)

    def __enter__(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        import plmcourse.judging.core  # noqa: F401  (load the checks' machinery once, before any thread)

        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.socket_path))
        self.listener.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc_info):
        self.listener.close()

    def _accept(self):
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed: grading is over
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def record_path(self, notebook_dir: Path) -> Path | None:
        """Where the verdicts of the notebook in autograded/<student>/<assignment>/ are kept."""
        notebook_dir = Path(notebook_dir).resolve()
        if notebook_dir.parent.parent != self.course / "autograded":
            return None
        return self.folder / f"{notebook_dir.parent.name}__{notebook_dir.name}.jsonl"

    def _serve(self, connection):
        with connection:
            # The launcher, outside the sandbox, speaks first and only once: the kernel is not
            # started before this header is written.
            connection.settimeout(CELL_SECONDS + 30)
            try:
                header = wire.receive(connection)
            except (wire.WireError, OSError):
                return
            record = self.record_path(Path(str((header or {}).get("notebook_dir", ""))))
            if record is None:
                return
            if "stopped" in header:  # the launcher stopped this notebook's kernel (a resource cap): a flag
                self._record(record, {"check": POLICY, "hidden": False, "passed": True, "message": "",
                                      "flags": [one_line(str(header["stopped"]), 300)]})
                return
            record.write_text("")  # a new kernel for this notebook: its earlier verdicts go
            refusals = 0
            skipped = self.skipped_demos(record)
            while True:
                try:
                    message = wire.receive(connection)
                except (wire.WireError, OSError):
                    return
                if message is None:
                    return
                if "refused" in message:  # the kernel's policy refused something: a flag, never a verdict
                    refusals += 1
                    if refusals <= MAX_REFUSALS:  # the kernel's word: bounded like everything it sends
                        self._record(record, refusal(message))
                    continue
                verdict = self._judge(connection, message, record)
                if skipped and not verdict["passed"] and "your function raised" in verdict["message"] \
                        and not any(why in verdict["message"] for why in NOT_A_DEMO):
                    note = (f"; note that {skipped} demonstration cell(s) were not run while grading: if your "
                            f"answer relies on something one of them computes, compute it in the answer cell.")
                    verdict["message"] = verdict["message"].rstrip(".") + note
                    verdict["shown"] = verdict["shown"].rstrip(".") + note
                self._record(record, verdict)
                try:
                    wire.send(connection, {"verdict": {"passed": verdict["passed"], "message": verdict["shown"]}})
                except OSError:
                    return
                if verdict.get("broken"):
                    return

    def _record(self, record: Path, verdict: dict) -> None:
        with self.lock, open(record, "a", encoding="utf-8") as f:
            f.write(json.dumps(verdict) + "\n")

    def skipped_demos(self, record: Path) -> int:
        """How many demo cells grading leaves out of this submission (read as JSON, never run)."""
        if os.environ.get("PLMCOURSE_RUN_DEMOS") == "1":
            return 0
        student, assignment = record.stem.split("__", 1)
        try:
            notebook = next((self.course / "submitted" / student / assignment).glob("*.ipynb"))
            with open(notebook, encoding="utf-8") as f:
                cells = json.load(f)["cells"]
            for cell in cells:
                if isinstance(cell.get("source"), list):
                    cell["source"] = "".join(cell["source"])
            return len(cells_to_skip(cells))
        except Exception:  # an unreadable notebook: nbgrader says so; no note here
            return 0

    def salt(self, student: str, check: str) -> int:
        """The shift of this student's hidden seeds for `check`: from the course's secret, so the
        same on every regrade and unknown to the notebook; a multiple of 1000, so never a visible case."""
        digest = hmac.new(self.secret, f"{student}/{check}".encode(), hashlib.sha256).digest()
        return 1000 * (1 + int.from_bytes(digest[:4], "big") % 1_000_000)

    def _judge(self, connection, message, record) -> dict:
        """Run the check the kernel announced against the kernel's answers; the verdict as a dict."""
        import plmcourse.judging as judging
        from plmcourse.judging.core import CheckFailed, Remote

        name, hidden = message.get("check"), message.get("hidden") is True
        verdict = {"check": one_line(name, 100), "hidden": hidden, "passed": False, "flags": []}
        student = record.name.split("__")[0]
        if not isinstance(name, str) or name not in judging.CHECKS:
            verdict["message"] = verdict["shown"] = one_line(
                f"the kernel asked for a check the course does not have ({str(name)[:100]!r})", 600)
            return verdict
        remote = Remote(connection)
        with self.lock:
            load_sealed_libraries(name)
        shown = None
        try:
            judging.spec(name)(remote, hidden=self.salt(student, name) if hidden else False)
            verdict.update(passed=True, message=remote.passed)
        except CheckFailed as failed:
            verdict["message"] = str(failed)
            shown = getattr(failed, "for_kernel", None)  # a hidden case: the kernel is told less
        except (wire.WireError, ConnectionError, OSError) as error:
            # The kernel died, ran out of time, or sent something the wire refuses.
            verdict.update(message=f"{name} could not finish: {error}", broken=True)
        except Exception as error:  # an answer the check could not read: no credit, and say so
            verdict["message"] = f"{name} could not judge the answer ({type(error).__name__}: {error})"
        # Sentences quote what the kernel sent (an exception's text): one inert line each.
        verdict["message"] = one_line(verdict["message"], 600)
        verdict["shown"] = one_line(shown or verdict["message"], 600)
        verdict["flags"] = [one_line(flag) for flag in remote.flags]
        return verdict


# ----------------------------------------------------------------------------
# From the records to the gradebook


@dataclass
class GradedCell:
    grade_id: str
    points: float
    checks: tuple  # the check functions whose hidden run decides it


def graded_cells(course: Path, assignment: str) -> dict:
    """{notebook name: [GradedCell]} from the assignment's source notebooks (the instructor's version)."""
    import nbformat

    found = {}
    for path in sorted((Path(course) / "source" / assignment).glob("*.ipynb")):
        cells = []
        for cell in nbformat.read(path, as_version=4).cells:
            meta = nbgrader_metadata(cell)
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                continue
            hidden = [m.group(1) for line in cell.source.splitlines() if "hidden=True" in line
                      for m in re.finditer(r"\b(check_\w+)\(", line)]
            anywhere = re.findall(r"\b(check_\w+)\(", cell.source)
            cells.append(GradedCell(meta["grade_id"], float(meta.get("points", 0)),
                                  tuple(dict.fromkeys(hidden or anywhere))))
        found[path.stem] = cells
    return found


POLICY = "policy"  # a record's name for what the kernel's policy refused outside any check
# An exception whose cause is known, which the note about skipped demonstration cells would only blur: the
# course's own code stubbed in the sandbox, and the kernel's policy.
NOT_A_DEMO = ("is not available while grading", "refused while grading")
MAX_REFUSALS = 16  # refusals recorded per kernel (the policy tells at most 8; more is a kernel writing them)


def refusal(message: dict) -> dict:
    """A record line for a refusal the kernel reported between checks ({"refused": sentence}): a flag
    only. The kernel's word can add evidence, never a grade."""
    return {"check": POLICY, "hidden": False, "passed": True, "message": "",
            "flags": [refusal_flag(message.get("refused"))]}


def refusal_flag(sentence) -> str:
    return one_line(f"the kernel's policy {str(sentence)[:300]} (the kernel's own report)")


def read_record(path: Path) -> dict:
    """{check name: the verdict that decides it}.

    A check's FIRST run with hidden=True decides (failing that, its last visible run): later
    runs are in the record but cannot improve the grade, so a notebook cannot fail the hidden
    cases on purpose, learn from it, and pass them on a second try. The flags of every run are
    kept (evidence only adds), and hidden runs that disagree with the first are a flag themselves.
    """
    decided, hidden_runs, flags = {}, {}, {}
    if not path.exists():
        return decided
    for line in path.read_text(encoding="utf-8").splitlines():
        verdict = json.loads(line)
        name = verdict["check"]
        kept = flags.setdefault(name, [])
        kept += [flag for flag in verdict.get("flags", []) if flag not in kept]
        if verdict["hidden"]:
            hidden_runs.setdefault(name, []).append(verdict)
            if len(hidden_runs[name]) == 1:
                decided[name] = verdict
        elif not decided.get(name, {}).get("hidden"):
            decided[name] = verdict
    for name, verdict in decided.items():
        runs = hidden_runs.get(name, [])
        extra = []
        if any(run["passed"] != runs[0]["passed"] for run in runs[1:]):
            extra = [f"{name}'s hidden cases ran {len(runs)} times with different verdicts (the first counts)"]
        decided[name] = {**verdict, "flags": flags.get(name, []) + extra}
    return decided


def score(cell: GradedCell, verdicts: dict) -> tuple[bool, str]:
    """(passed, the sentence for the comment) for one test cell."""
    for name in cell.checks:
        verdict = verdicts.get(name)
        if verdict is None:
            return False, (f"{name} never reached the grader: the test cell did not run the course's "
                           f"{name} (was it edited, or did an earlier cell fail or run out of time?)")
        if not verdict["passed"]:
            return False, verdict["message"]
        if not verdict["hidden"]:
            return False, f"{name} ran only on the visible cases: the test cell's hidden run did not report"
    return True, ""


def apply_verdicts(judge: Judge, course: Path, assignment: str, students: list[str],
                   sealed: dict | None = None) -> tuple[list, list, list]:
    """Write the judge's score of every test cell into the gradebook.

    sealed: {(student, notebook, test cell grade_id): sentence} for answers whose source reaches a
    function their exercise forbids (plmcourse.autograde.review.sealed_answers): scored 0 as if
    the kernel had reported the call, which it may have kept quiet about.

    Returns (one report line per finding, the kernel's flags and the failed test cells, both as
    (student, notebook, test cell grade_id, sentence)); plmcourse.autograde.review writes those
    two into the gradebook's comments.
    """
    from nbgrader.api import Gradebook, MissingEntry

    course = Path(course).resolve()
    url = f"sqlite:///{course / 'gradebook.db'}"
    lines, flags, failures = [], [], []
    with Gradebook(url) as gradebook:
        for notebook, cells in graded_cells(course, assignment).items():
            for student in students:
                folder = course / "autograded" / student / assignment
                verdicts = read_record(judge.record_path(folder))
                for name, verdict in verdicts.items():
                    test_id = next((c.grade_id for c in cells if name in c.checks), "")
                    flags += [(student, notebook, test_id, flag) for flag in verdict.get("flags", [])]
                for cell in cells:
                    if not cell.checks:  # a test without the course's checks: nbgrader's score stands
                        continue
                    try:
                        grade = gradebook.find_grade(cell.grade_id, notebook, assignment, student)
                    except MissingEntry:
                        lines.append(f"{student}: {notebook} has no grade for {cell.grade_id} "
                                     f"(nbgrader did not grade this submission)")
                        break
                    passed, why = score(cell, verdicts)
                    if passed and (student, notebook, cell.grade_id) in (sealed or {}):
                        passed, why = False, sealed[(student, notebook, cell.grade_id)]
                    grade.manual_score = cell.points if passed else 0.0
                    # Decided by the judge (nbgrader marks every cell of a regraded submission for a
                    # manual grade); review.write_gradebook marks the flagged ones again.
                    grade.needs_manual_grade = False
                    if not passed:
                        failures.append((student, notebook, cell.grade_id, why))
                        if grade.auto_score:
                            lines.append(f"{student}: {cell.grade_id} passed in the notebook but not in the "
                                         f"judge ({why}); scored 0")
                gradebook.db.commit()
    return lines, flags, failures
