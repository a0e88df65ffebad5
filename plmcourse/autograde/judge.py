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
checks' code is public), and a regrade draws the same ones.

After nbgrader has finished, `apply_verdicts` sets every test cell's score in the
gradebook from the records: a test cell scores its points when each check its source
version calls with hidden=True passed in the judge, and 0 otherwise, with the judge's
sentence as the comment. What the kernel itself reported (nbgrader's own score) plays
no part: a notebook that replaces the checks, patches NumPy or walks the checker's
frames only changes its own process, and the judge is not in it.

What a kernel could still do, and what catches it:
- call a library implementation under any name: the aten operators of each graded call
  are recorded in the kernel and reported here ("flagged for review"), for a person;
- hand back an answer computed by someone else's correct code: that is a correct
  answer as far as any grader can tell.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path

from plmcourse.autograde.demos import cells_to_skip, nbgrader_metadata
from plmcourse.grading import wire

CELL_SECONDS = int(os.environ.get("PLMCOURSE_CELL_SECONDS", "60"))  # as course/nbgrader_config.py
SOCKET_NAME = "judge.sock"

# Things a solution to these exercises never needs; a submission that uses them gets a
# line in the grading report so that a person looks at it.
SUSPICIOUS = {
    "get_ipython": "talks to the IPython shell",
    "set_custom_exc": "replaces IPython's error handling",
    "__code__": "rewrites function code",
    "sys.modules": "edits the module table",
    "plmcourse.grading": "touches the course's checks",
    "builtins": "touches Python's builtins",
    "setprofile": "installs a profiler hook",
    "settrace": "installs a trace hook",
    "ctypes": "uses ctypes",
    "os._exit": "ends the process",
    "_getframe": "inspects interpreter frames",
    "currentframe": "inspects interpreter frames",
    "f_back": "inspects interpreter frames",
    "gc.get_": "walks the garbage collector's objects",
    "allclose =": "replaces a comparison function",
    "isclose =": "replaces a comparison function",
    "gradebook": "mentions the gradebook",
    "source/": "mentions the instructors' source folder",
    "PLMCOURSE_JUDGE": "talks to the grader's connection",
}


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
        import plmcourse.grading.core  # noqa: F401  (load the checks' machinery once, before any thread)

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
            record.write_text("")  # a new kernel for this notebook: its earlier verdicts go
            skipped = self.skipped_demos(record)
            while True:
                try:
                    message = wire.receive(connection)
                except (wire.WireError, OSError):
                    return
                if message is None:
                    return
                verdict = self._judge(connection, message, record)
                if skipped and not verdict["passed"] and "your function raised" in verdict["message"]:
                    verdict["message"] = verdict["message"].rstrip(".") + (
                        f"; note that {skipped} demonstration cell(s) were not run while grading: if your "
                        f"answer relies on something one of them computes, compute it in the answer cell.")
                with self.lock, open(record, "a", encoding="utf-8") as f:
                    f.write(json.dumps(verdict) + "\n")
                try:
                    wire.send(connection, {"verdict": {"passed": verdict["passed"], "message": verdict["message"]}})
                except OSError:
                    return
                if verdict.get("broken"):
                    return

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
        import plmcourse.grading as grading
        from plmcourse.grading.core import CheckFailed, Remote

        name, hidden = message.get("check"), message.get("hidden") is True
        verdict = {"check": str(name)[:100], "hidden": hidden, "passed": False, "flags": []}
        student = record.name.split("__")[0]
        if name not in grading._CHECKS:
            verdict["message"] = f"the kernel asked for a check the course does not have ({str(name)[:100]!r})"
            return verdict
        remote = Remote(connection)
        try:
            getattr(grading, name)(remote, hidden=self.salt(student, name) if hidden else False)
            verdict.update(passed=True, message=remote.passed)
        except CheckFailed as failed:
            verdict["message"] = str(failed)
        except (wire.WireError, ConnectionError, OSError) as error:
            # The kernel died, ran out of time, or sent something the wire refuses.
            verdict.update(message=f"{name} could not finish: {error}", broken=True)
        except Exception as error:  # an answer the check could not read: no credit, and say so
            verdict["message"] = f"{name} could not judge the answer ({type(error).__name__}: {error})"
        verdict["flags"] = remote.flags
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


def read_record(path: Path) -> dict:
    """{check name: its last verdict with hidden=True (or, failing that, its last verdict)}."""
    last = {}
    if not path.exists():
        return last
    for line in path.read_text(encoding="utf-8").splitlines():
        verdict = json.loads(line)
        if verdict["hidden"] or not last.get(verdict["check"], {}).get("hidden"):
            last[verdict["check"]] = verdict
    return last


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


def apply_verdicts(judge: Judge, course: Path, assignment: str, students: list[str]) -> list[str]:
    """Write the judge's score of every test cell into the gradebook; one report line per finding."""
    from nbgrader.api import Gradebook, MissingEntry

    course = Path(course).resolve()
    url = f"sqlite:///{course / 'gradebook.db'}"
    lines = []
    with Gradebook(url) as gradebook:
        for notebook, cells in graded_cells(course, assignment).items():
            for student in students:
                folder = course / "autograded" / student / assignment
                verdicts = read_record(judge.record_path(folder))
                for verdict in verdicts.values():
                    lines += [f"{student}: flagged for review, {flag}" for flag in verdict.get("flags", [])]
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
                    grade.manual_score = cell.points if passed else 0.0
                    if not passed:
                        try:
                            comment = gradebook.find_comment(cell.grade_id, notebook, assignment, student)
                            comment.manual_comment = why
                        except MissingEntry:
                            pass
                        if grade.auto_score:
                            lines.append(f"{student}: {cell.grade_id} passed in the notebook but not in the "
                                         f"judge ({why}); scored 0")
                gradebook.db.commit()
    return lines


def _canonical(function: ast.FunctionDef) -> str:
    """The function's code with its docstring dropped and every name it binds or reads renamed
    v0, v1, ... in order of appearance: the same for a copy retyped with other variable names."""
    function = copy.deepcopy(function)
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        function.body = body[1:] or [ast.Pass()]
    names = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Name):
            node.id = names.setdefault(node.id, f"v{len(names)}")
        elif isinstance(node, ast.arg):
            node.arg = names.setdefault(node.arg, f"v{len(names)}")
    function.name = "f"
    return ast.dump(function, annotate_fields=False)


# Short functions (causal_mask is one np.tril) are written the same way by many honest
# students; only a copy of something longer says anything.
RETYPED_MIN_NODES = 80


def reference_copies() -> dict:
    """{canonical code: "plmcourse.ref.softmax"} for the course's own version of every graded function."""
    import importlib
    import inspect

    from plmcourse.autograde.sandbox import graded_functions

    found = {}
    names = graded_functions()
    for module_name in ("plmcourse.ref", "plmcourse.nn", "plmcourse.data"):
        package = importlib.import_module(module_name)
        for name in sorted(names):
            function = getattr(package, name, None)
            if not inspect.isfunction(function):
                continue
            tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
            if sum(1 for _ in ast.walk(tree)) >= RETYPED_MIN_NODES:
                found[_canonical(tree.body[0])] = f"{module_name}.{name}"
    return found


def retyped(notebook: Path, copies: dict) -> list[str]:
    """One phrase per function in the notebook's code cells that is a course reference retyped."""
    with open(notebook, encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    found = []
    for cell in cells:
        source = "".join(cell["source"]) if isinstance(cell.get("source"), list) else str(cell.get("source", ""))
        if cell.get("cell_type") != "code":
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and _canonical(node) in copies:
                found.append(f"{node.name} is {copies[_canonical(node)]} retyped (the same code up to "
                             f"variable names)")
    return found


def suspicious(notebook: Path, course_cells: frozenset = frozenset()) -> list[str]:
    """Why a person should read this submission: one phrase per suspicious thing in a student cell.

    Cells whose text is one of `course_cells` (the source notebook's own cells, e.g. the
    Colab set-up cell, which looks at sys.modules) are the course's, not the student's.
    """
    with open(notebook, encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    found = []
    for cell in cells:
        source = "".join(cell["source"]) if isinstance(cell.get("source"), list) else str(cell.get("source", ""))
        if cell.get("cell_type") != "code" or nbgrader_metadata(cell).get("grade") or source in course_cells:
            continue
        found += [why for needle, why in SUSPICIOUS.items() if needle in source and why not in found]
    return found
