"""A second opinion on every autograded test cell, outside the kernel nbgrader graded in.

nbgrader decides pass or fail from what the notebook's kernel reports, and the
student's code runs in that same kernel first. A submission can therefore replace
the checks (`plmcourse.grading.check_softmax = lambda f: None`), rewrite their code
objects, or stop the kernel from reporting errors at all (IPython's custom exception
handlers), and nbgrader would give full marks.

The verifier re-runs each autograded notebook in a fresh sandboxed process:

1. before any student code runs, it imports the checks and records the plmcourse
   modules, their contents and the code of every function in them;
2. it runs the student's cells in order, each with a time limit, in an in-process
   IPython shell (so magics work); it leaves out the same demo cells as autograding
   (plmcourse.grading.demos);
3. for each test cell (the instructor's version, which nbgrader has restored into the
   autograded notebook), it first puts every recorded module, name and code object
   back, then runs the cell with plain `exec` under the checks' pristine builtins and
   libraries, and records pass or fail with the error's message.

`reconcile` then takes the lower of the two verdicts: a test cell that nbgrader passed
but the verifier failed scores 0, with the verifier's sentence as the grader's comment.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CELL_SECONDS = int(os.environ.get("PLMCOURSE_CELL_SECONDS", "60"))  # as course/nbgrader_config.py
MARK = "PLMCOURSE-VERDICT"

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
    "gc.get_": "walks the garbage collector's objects",
    "allclose =": "replaces a comparison function",
    "isclose =": "replaces a comparison function",
    "gradebook": "mentions the gradebook",
    "source/": "mentions the instructors' source folder",
}


# ----------------------------------------------------------------------------
# Worker side: runs inside the sandbox, one notebook per process.


class _CellTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise _CellTimeout(f"the cell ran longer than {CELL_SECONDS} s")


class _Snapshot:
    """The plmcourse modules as imported by the verifier, before any student code ran."""

    def __init__(self):
        self.modules = {name: mod for name, mod in sys.modules.items()
                        if mod is not None and (name == "plmcourse" or name.startswith("plmcourse."))}
        self.contents = {name: dict(mod.__dict__) for name, mod in self.modules.items()}
        self.functions = []
        for contents in self.contents.values():
            for value in contents.values():
                members = vars(value).values() if isinstance(value, type) else (value,)
                for member in members:
                    code = getattr(member, "__code__", None)
                    if code is not None:
                        self.functions.append((member, code, member.__defaults__, member.__kwdefaults__))

    def restore(self):
        sys.modules.update(self.modules)
        for name, module in self.modules.items():
            namespace = module.__dict__
            for key in [k for k in namespace if k not in self.contents[name]]:
                del namespace[key]
            namespace.update(self.contents[name])
        for function, code, defaults, kwdefaults in self.functions:
            function.__code__, function.__defaults__, function.__kwdefaults__ = code, defaults, kwdefaults


def _worker(notebook: str) -> None:
    nonce = sys.stdin.readline().strip()
    report = os.fdopen(os.dup(1), "w")  # our own handle on stdout, taken before student code runs
    import matplotlib

    matplotlib.use("Agg")
    from IPython.core.inputtransformer2 import TransformerManager
    from IPython.core.interactiveshell import InteractiveShell

    import plmcourse.grading  # noqa: F401  (imports every check)
    from plmcourse.grading.core import pristine
    from plmcourse.grading.demos import cells_to_skip, nbgrader_metadata

    snapshot = _Snapshot()
    to_python = TransformerManager().transform_cell
    shell = InteractiveShell.instance()
    signal.signal(signal.SIGALRM, _alarm)
    verdicts = {}
    cells = _read_cells(notebook)
    skipped = set() if os.environ.get("PLMCOURSE_RUN_DEMOS") == "1" else cells_to_skip(cells)
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code" or index in skipped:
            continue
        meta = nbgrader_metadata(cell)
        signal.alarm(CELL_SECONDS)
        try:
            if meta.get("grade"):
                verdicts[meta["grade_id"]] = _run_test_cell(cell["source"], shell, snapshot, to_python, pristine)
            else:
                shell.run_cell(cell["source"], store_history=False, silent=True)
        except _CellTimeout as timeout:
            if meta.get("grade"):
                verdicts[meta["grade_id"]] = [False, str(timeout)]
        finally:
            signal.alarm(0)
    report.write(f"{MARK} {nonce} {json.dumps(verdicts)}\n")
    report.flush()
    os._exit(0)  # skip interpreter teardown, which student objects could hook


def _read_cells(notebook: str) -> list[dict]:
    """The notebook's cells, each source one string, read as plain JSON.

    nbformat would do the same, but importing it costs about a second (its schema
    validator), a third of the verifier's time per notebook.
    """
    with open(notebook, encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    for cell in cells:
        if isinstance(cell.get("source"), list):
            cell["source"] = "".join(cell["source"])
    return cells


def _run_test_cell(source, shell, snapshot, to_python, pristine):
    snapshot.restore()
    code = compile(to_python(source), "<test cell>", "exec")
    with pristine():
        try:
            exec(code, shell.user_ns)
        except _CellTimeout:
            raise
        except BaseException as err:  # any failure of the test is the verdict
            message = " ".join(str(err).split()) or type(err).__name__
            return [False, f"{type(err).__name__}: {message}"]
    return [True, ""]


# ----------------------------------------------------------------------------
# Grader side


@dataclass
class Verdicts:
    by_test: dict          # grade_id -> (passed, message)
    problem: str | None    # why some or all tests could not be verified, if so


def verify_notebook(notebook: Path, course_root: Path, use_sandbox: bool = True,
                    timeout: float = 600) -> Verdicts:
    """Run the worker on one autograded notebook; returns its verdict per test cell."""
    from plmcourse.grading import sandbox

    notebook = notebook.resolve()
    worker = [sys.executable, "-m", "plmcourse.grading.verify", str(notebook)]
    cmd = worker
    if use_sandbox:
        cmd = sandbox.bwrap_command(worker, notebook.parent, course_root.resolve())
    nonce = secrets.token_hex(16)
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_WAIT_POLICY": "PASSIVE"}
    try:
        # errors="replace": student code may print any bytes; they must not stop the report.
        done = subprocess.run(cmd, input=nonce + "\n", capture_output=True, text=True, errors="replace",
                              timeout=timeout, cwd=notebook.parent, env=env,
                              preexec_fn=lambda: sandbox.limit_memory(sandbox.DEFAULT_MEMORY))
    except subprocess.TimeoutExpired:
        return Verdicts({}, f"the verifier did not finish within {timeout:.0f} s")
    prefix = f"{MARK} {nonce} "
    for line in done.stdout.splitlines():
        if line.startswith(prefix):
            return Verdicts({k: tuple(v) for k, v in json.loads(line[len(prefix):]).items()}, None)
    return Verdicts({}, f"the verifier stopped before reporting (exit code {done.returncode})")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    _worker(argv[0])


if __name__ == "__main__":
    main()



def suspicious(notebook: Path, course_cells: frozenset = frozenset()) -> list[str]:
    """Why a person should read this submission: one phrase per suspicious thing in a student cell.

    Cells whose text is one of `course_cells` (the source notebook's own cells, e.g. the
    Colab set-up cell, which looks at sys.modules) are the course's, not the student's.
    """
    from plmcourse.grading.demos import nbgrader_metadata

    found = []
    for cell in _read_cells(notebook):
        source = cell["source"]
        if cell["cell_type"] != "code" or nbgrader_metadata(cell).get("grade"):
            continue
        if source in course_cells:
            continue
        found += [why for needle, why in SUSPICIOUS.items() if needle in source and why not in found]
    return found


def reconcile(gradebook_url: str, assignment: str, notebook: str, student: str, verdicts: Verdicts) -> list[str]:
    """Lower nbgrader's score to 0 where the verifier failed a test; returns one line per change.

    The verifier's sentence becomes the grader's comment on that cell, which the student
    sees in the feedback. Re-running is harmless: the same verdicts give the same scores.
    """
    from nbgrader.api import Gradebook, MissingEntry

    changes = []
    with Gradebook(gradebook_url) as gradebook:
        for grade_id, (passed, message) in sorted(verdicts.by_test.items()):
            grade = gradebook.find_grade(grade_id, notebook, assignment, student)
            if passed or not grade.auto_score:
                continue
            grade.manual_score = 0.0
            note = f"Verification failed: {message}"
            try:
                gradebook.find_comment(grade_id, notebook, assignment, student).manual_comment = note
            except MissingEntry:
                pass
            gradebook.db.commit()
            changes.append(f"{student}: {grade_id} passed in the notebook but failed verification "
                           f"({message}); scored 0")
    return changes
