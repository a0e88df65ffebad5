"""The instructor's grading workflow: collect, autograde (sandboxed), feedback, export.

Each step is a thin layer over the nbgrader command of the same purpose; an
instructor can always run plain nbgrader instead (course/INSTRUCTORS.md shows both).
What the layer adds:

* collect: takes a folder of files as a learning platform exports them, checks each
  file is a readable notebook of this assignment, and files it where nbgrader looks
  (submitted/<student>/<assignment>/<notebook>.ipynb); a broken file is reported and
  skipped, and every other student is still collected;
* autograde: runs nbgrader with the course's grading kernel (plmcourse.grading.sandbox)
  unless told otherwise, with the environment's bin directory on PATH (nbgrader calls
  alembic);
* feedback and export: nbgrader's, with the course configuration (feedback without
  hidden tests or tracebacks, see plmcourse.grading.nbgrader_ext).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from plmcourse.grading import sandbox
from plmcourse.grading.demos import nbgrader_metadata

# "alice/03_attention.ipynb" or "alice_03_attention.ipynb" / "alice_1234_03_attention.ipynb":
# the student id is the folder name, else the file name up to its first underscore.
FILE_PATTERN = re.compile(r"^(?P<student>[A-Za-z0-9][A-Za-z0-9.-]*)_.+\.ipynb$")
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class CollectReport:
    collected: dict = field(default_factory=dict)   # student -> path written
    problems: dict = field(default_factory=dict)    # file -> one sentence

    def __str__(self):
        lines = [f"collected {len(self.collected)} submission(s)"]
        lines += [f"skipped {name}: {why}" for name, why in sorted(self.problems.items())]
        return "\n".join(lines)


def nbgrader_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update(extra or {})
    return env


def run_nbgrader(course: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "nbgrader", *args]
    # errors="replace": a student's code can write any bytes to the kernel's output, and
    # one undecodable byte must not stop the report for the whole class.
    return subprocess.run(cmd, cwd=course, env=env or nbgrader_env(), capture_output=True, text=True,
                          errors="replace")


def assignment_grade_ids(course: Path, assignment: str) -> set[str]:
    """The grade_ids of the assignment's autograded cells, from its source notebooks."""
    ids = set()
    for path in (course / "source" / assignment).glob("*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            grade_id = nbgrader_metadata(cell).get("grade_id")
            if grade_id:
                ids.add(grade_id)
    return ids


def check_submission(path: Path, expected_ids: set[str]) -> str | None:
    """None if `path` is a notebook of this assignment, else one sentence saying what is wrong."""
    try:
        nb = nbformat.read(path, as_version=4)
    except (json.JSONDecodeError, UnicodeDecodeError, nbformat.reader.NotJSONError) as err:
        return f"it is not valid notebook JSON ({' '.join(str(err).split())[:120]})"
    except Exception as err:  # nbformat raises several kinds for a malformed notebook
        return f"it cannot be read as a notebook ({type(err).__name__}: {err})"
    found = {nbgrader_metadata(c).get("grade_id") for c in nb.cells} - {None}
    if found and not found & expected_ids:
        return ("it holds the exercises of a different assignment "
                f"({', '.join(sorted(found)[:3])}, ...)")
    return None


def submission_files(folder: Path) -> list[tuple[str, Path]]:
    """(student id, file) for every notebook in an export folder, in a stable order."""
    found = []
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        relative = path.relative_to(folder)
        if len(relative.parts) > 1:
            student = relative.parts[0]
        else:
            match = FILE_PATTERN.match(path.name)
            student = match.group("student") if match else None
        found.append((student, path))
    return found


def collect(course: Path, assignment: str, folder: Path) -> CollectReport:
    """File the notebooks of `folder` under course/submitted/ for nbgrader; report what was skipped."""
    course, folder = Path(course).resolve(), Path(folder).resolve()
    expected = assignment_grade_ids(course, assignment)
    if not expected:
        raise ValueError(f"course/source/{assignment}/ has no autograded notebook; check the assignment name")
    notebook_name = next((course / "source" / assignment).glob("*.ipynb")).name
    report = CollectReport()
    for student, path in submission_files(folder):
        label = str(path.relative_to(folder))
        if student is None or not STUDENT_ID.match(student):
            report.problems[label] = "its name does not say which student it belongs to"
            continue
        if student in report.collected:
            report.problems[label] = f"student {student} already has a submission in this folder"
            continue
        problem = check_submission(path, expected)
        if problem:
            report.problems[label] = problem
            continue
        target = course / "submitted" / student / assignment / notebook_name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        report.collected[student] = target
    return report


def submitted_students(course: Path, assignment: str) -> list[str]:
    """The students with a submission of `assignment` in course/submitted/, sorted."""
    return sorted(p.parent.name for p in (Path(course) / "submitted").glob(f"*/{assignment}"))


def prepare_submissions(course: Path, assignment: str, student: str | None = None) -> list[str]:
    """Set aside what would make nbgrader stop for the whole class; one line per thing set aside.

    - a notebook in a student's folder that the assignment does not have (nbgrader finds
      no gradebook entry for it and gives up) moves to submitted/<student>/<assignment>.extra/;
    - nbgrader metadata that is not a dict (a student's own "nbgrader" key) is removed from
      the submitted notebook, which is otherwise left exactly as it was.
    """
    course = Path(course).resolve()
    expected = {p.name for p in (course / "source" / assignment).glob("*.ipynb")}
    lines = []
    for folder in sorted((course / "submitted").glob(f"{student or '*'}/{assignment}")):
        name = folder.parent.name
        for path in sorted(folder.glob("*.ipynb")):
            if path.name not in expected:
                aside = folder.parent / f"{assignment}.extra"
                if aside.is_symlink() or (aside.exists() and not aside.is_dir()):
                    # A link planted by the submission would carry the file anywhere (source/, say).
                    lines.append(f"{name}: could not set {path.name} aside, {aside.name} is not a folder")
                    continue
                aside.mkdir(exist_ok=True)
                path.rename(aside / path.name)
                lines.append(f"{name}: left out {path.name}, which is not a notebook of {assignment} "
                             f"(moved to {aside.relative_to(course)})")
                continue
            try:
                nb = nbformat.read(path, as_version=4)
            except Exception:  # nbgrader reports an unreadable notebook itself, for this student only
                continue
            odd = [i for i, c in enumerate(nb.cells) if "nbgrader" in c.metadata
                   and not isinstance(c.metadata["nbgrader"], dict)]
            for i in odd:
                del nb.cells[i].metadata["nbgrader"]
            if odd:
                # Written beside and moved over: a submitted symlink is replaced, never written through.
                cleaned = path.with_name(path.name + ".cleaned")
                nbformat.write(nb, cleaned)
                os.replace(cleaned, path)
                lines.append(f"{name}: ignored nbgrader metadata that is not nbgrader's in cell(s) "
                             f"{', '.join(str(i + 1) for i in odd)}")
    return lines


def autograde(course: Path, assignment: str, use_sandbox: bool = True,
              memory: int = sandbox.DEFAULT_MEMORY, student: str | None = None,
              jobs: int | None = None) -> subprocess.CompletedProcess:
    """nbgrader autograde, every student (or one), in the grading sandbox unless use_sandbox=False.

    With jobs > 1 the students are dealt out to that many nbgrader processes running at
    once (each told to leave out the others' students); they share the gradebook, which
    SQLite keeps consistent. When a process fails, each of its students is graded again
    on their own, so that one submission cannot cost the others their grades. The
    result's stderr holds, for each student still failing alone, the end of nbgrader's report.
    """
    course = Path(course).resolve()
    students = [student] if student else submitted_students(course, assignment)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(students)))
    groups = [students[i::jobs] for i in range(jobs)]
    with contextlib.ExitStack() as stack:
        envs = stack.enter_context(_sandbox_envs(course, memory, jobs)) if use_sandbox else [nbgrader_env()] * jobs

        def grade(group, env):
            return run_nbgrader(course, "autograde", assignment, "--force", *_only(students, group), env=env)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            done = list(pool.map(grade, groups, envs))
        # Rare, so one at a time: each nbgrader process must have its own sockets' directory.
        alone = [s for group, d in zip(groups, done) if d.returncode and len(group) > 1 for s in group]
        retried = {s: grade([s], envs[0]) for s in alone}
    failed = {s: d for s, d in retried.items() if d.returncode}
    failed.update({group[0]: d for group, d in zip(groups, done) if d.returncode and len(group) == 1})
    stderr = "".join(f"{s}: nbgrader could not grade this submission: {_last_line(d.stderr)}\n"
                     for s, d in sorted(failed.items()))
    return subprocess.CompletedProcess(["nbgrader", "autograde", assignment], 1 if failed else 0,
                                       "".join(d.stdout for d in done), stderr)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no message"


def _only(students: list[str], group: list[str]) -> list[str]:
    """nbgrader arguments that restrict a command to `group` out of `students`."""
    if len(group) == 1:
        return [f"--student={group[0]}"]
    others = sorted(set(students) - set(group))
    return [f"--CourseDirectory.student_id_exclude={','.join(others)}"] if others else []


@contextlib.contextmanager
def _sandbox_envs(course: Path, memory: int, jobs: int):
    """For each of `jobs` nbgrader processes, an environment that starts its kernels in the sandbox.

    Each process gets its own directory for the kernels' sockets, so that two processes
    never pick the same socket names at the same moment.
    """
    why_not = sandbox.available()
    if why_not:
        raise RuntimeError(f"cannot autograde in the sandbox: {why_not}; install it, or pass "
                           f"--no-sandbox to grade without isolation")
    with tempfile.TemporaryDirectory(prefix="plmcourse-grading-") as scratch:
        kernels = Path(scratch) / "jupyter"
        sandbox.install_kernelspec(kernels, course, memory)
        path = os.pathsep.join([str(kernels), os.environ.get("JUPYTER_PATH", "")]).rstrip(os.pathsep)
        envs = []
        for job in range(jobs):
            sockets = Path(scratch) / f"ipc{job}"
            sockets.mkdir()
            envs.append(nbgrader_env({"JUPYTER_PATH": path, "PLMCOURSE_IPC_DIR": str(sockets)}))
        yield envs


def feedback(course: Path, assignment: str) -> subprocess.CompletedProcess:
    return run_nbgrader(Path(course).resolve(), "generate_feedback", assignment, "--force")


def export(course: Path, to: str = "grades.csv") -> subprocess.CompletedProcess:
    return run_nbgrader(Path(course).resolve(), "export", "--to", to)


def verify(course: Path, assignment: str, use_sandbox: bool = True, student: str | None = None) -> list[str]:
    """Second opinion on every autograded notebook (plmcourse.grading.verify); one line per finding."""
    from plmcourse.grading.verify import reconcile, suspicious, verify_notebook

    course = Path(course).resolve()
    url = f"sqlite:///{course / 'gradebook.db'}"
    notebooks = sorted((course / "autograded").glob(f"{student or '*'}/{assignment}/*.ipynb"))
    course_cells = frozenset(c.source for path in (course / "source" / assignment).glob("*.ipynb")
                             for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    # The re-runs are independent processes; the gradebook is written afterwards, one at a time.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        all_verdicts = list(pool.map(lambda nb: verify_notebook(nb, course, use_sandbox), notebooks))
    lines = []
    for notebook, verdicts in zip(notebooks, all_verdicts):
        student = notebook.parent.parent.name
        if verdicts.problem:
            lines.append(f"{student}: not verified, {verdicts.problem}; nbgrader's scores kept, review by hand")
        lines += reconcile(url, assignment, notebook.stem, student, verdicts)
        flags = suspicious(notebook, course_cells)
        if flags:
            lines.append(f"{student}: flagged for review, the submission {', '.join(flags)}")
    return lines
