"""The instructor's grading workflow: collect, autograde (sandboxed), feedback, export.

Each step is a thin layer over the nbgrader command of the same purpose; an
instructor can always run plain nbgrader instead (course/INSTRUCTORS.md shows both).
What the layer adds:

* collect: takes a folder of files as a learning platform exports them, checks each
  file is a readable notebook of this assignment, and files it where nbgrader looks
  (submitted/<student>/<assignment>/<notebook>.ipynb); a broken file is reported and
  skipped, and every other student is still collected;
* autograde: sets aside what a submission must not bring (links, packages, files), runs
  nbgrader with the course's kernel launcher (plmcourse.autograde.sandbox: bubblewrap,
  unless told otherwise) and the judge (plmcourse.autograde.judge), whose verdicts then
  replace nbgrader's scores; with the environment's bin directory on PATH (nbgrader
  calls alembic);
* feedback and export: nbgrader's, with the course configuration (feedback without
  hidden tests or tracebacks, see plmcourse.autograde.nbgrader_ext).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from plmcourse.autograde import cleanup, inert, review, sandbox
from plmcourse.autograde.evidence import Flag
from plmcourse.autograde.judge import Judge, apply_verdicts
from plmcourse.autograde.demos import nbgrader_metadata
from plmcourse.hub import COURSE_ID

# "alice/03_attention.ipynb" or "alice_03_attention.ipynb" / "alice_1234_03_attention.ipynb":
# the student id is the folder name, else the file name up to its first underscore.
FILE_PATTERN = re.compile(r"^(?P<student>[A-Za-z0-9][A-Za-z0-9.-]*)_.+\.ipynb$")
# A student id the course files (a folder name): a Unix account may begin with "_", never "." or "-".
STUDENT_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")


@dataclass
class CollectReport:
    collected: dict = field(default_factory=dict)   # student -> path written
    problems: dict = field(default_factory=dict)    # file (or student) -> one sentence
    notes: list = field(default_factory=list)       # one line each: resubmissions, late submissions

    def __str__(self):
        lines = [f"collected {len(self.collected)} submission(s)"]
        lines += [f"skipped {name}: {why}" for name, why in sorted(self.problems.items())]
        return "\n".join(lines + self.notes)


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
    """(student id, file) for every notebook in an export folder, in a stable order.

    Folders that are links are not entered; notebooks that are links are listed (collect
    reports and skips them).
    """
    found = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d != ".ipynb_checkpoints")
        for name in sorted(files):
            if not name.endswith(".ipynb"):
                continue
            path = Path(root) / name
            relative = path.relative_to(folder)
            if len(relative.parts) > 1:
                student = relative.parts[0]
            else:
                match = FILE_PATTERN.match(path.name)
                student = match.group("student") if match else None
            found.append((student, path))
    return sorted(found, key=lambda item: str(item[1]))


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
        if path.is_symlink():
            # A link in an export points anywhere: at course/source/ with the solutions, say.
            report.problems[label] = "it is a link, not a file (links are not followed)"
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


def exchange_env(exchange: Path | str | None) -> dict:
    """nbgrader's environment, with the exchange folder course/nbgrader_config.py reads (PLMCOURSE_EXCHANGE)."""
    return nbgrader_env({"PLMCOURSE_EXCHANGE": str(Path(exchange).resolve())} if exchange else None)


def _inbound(exchange: Path, assignment: str) -> dict:
    """student -> [(time, folder)] of their submissions of `assignment` in the exchange's inbound folder, sorted by
    time; each folder is named <student>+<assignment>+<time>+<random>. The name is the student's word only: any
    account may make a folder there."""
    found = {}
    for path in sorted((Path(exchange) / COURSE_ID / "inbound").glob(f"*+{assignment}+*")):
        parts = path.name.rsplit("+", 3)
        if len(parts) == 4 and parts[1] == assignment:
            found.setdefault(parts[0], []).append((parts[2], path))
    return {student: sorted(entries) for student, entries in found.items()}


def _account(uid: int) -> str:
    """The name of the account `uid`, or "uid N" where it has none."""
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _owner(path: Path) -> str:
    """The account that owns `path` itself (a link is not followed), or "an unknown account"."""
    try:
        return _account(path.lstat().st_uid)
    except OSError:
        return "an unknown account"


def _copy_plain_files(source: Path, target: Path, owner: int) -> list[str]:
    """Copy the regular files at the top of `source` into `target`, each opened without following a link, with
    one name, at most MAX_GRADED_FILE bytes and made by the account `owner` (a uid); the names of what was left out
    (links, hard links, folders, anything else, files too big, files another account made)."""
    target.mkdir(parents=True)
    left_out = []
    for path in sorted(source.iterdir()):
        try:
            handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        except OSError:  # a link (O_NOFOLLOW), or gone
            left_out.append(_describe(path))
            continue
        with open(handle, "rb") as f:
            found = os.fstat(f.fileno())
            # A second name for one file (a hard link) may be one the student could not have written.
            if not stat.S_ISREG(found.st_mode) or found.st_nlink > 1 or found.st_size > MAX_GRADED_FILE:
                left_out.append(_describe(path))
                continue
            # nbgrader submit leaves the submission's folder writable by all (for the instructor's clean-up): a
            # classmate who learns its name could put a file there, or replace one.
            if found.st_uid != owner:
                left_out.append(f"{path.name} (made by {_account(found.st_uid)})")
                continue
            (target / path.name).write_bytes(f.read())
    return left_out


def collect_exchange(course: Path, assignment: str, exchange: Path) -> CollectReport:
    """Each student's latest submission from the exchange into course/submitted/, then the same checks as a folder's
    collect; one sentence for each student not collected, a line for each resubmission and late one.

    nbgrader collect does the filing, but from a vetted copy of the inbound folder: there, a folder counts as a
    student's only if that student's account owns it (nbgrader only warns when another account made it, so one
    student could replace another's submission), and only its plain files that account made travel (nbgrader's
    copy follows links, and it runs as the instructor: a link in a submission could bring the course's solutions or
    another student's files; and nbgrader leaves a submission's folder writable by all). Earlier submissions stay
    in the exchange."""
    course = Path(course).resolve()
    expected = assignment_grade_ids(course, assignment)
    if not expected:
        raise ValueError(f"course/source/{assignment}/ has no autograded notebook; check the assignment name")
    report = CollectReport()
    notebook_name = next((course / "source" / assignment).glob("*.ipynb")).name
    due = _due_date(course, assignment)
    latest = {}
    with tempfile.TemporaryDirectory(prefix="plmcourse-exchange-") as scratch:
        inbound = Path(scratch) / COURSE_ID / "inbound"
        inbound.mkdir(parents=True)
        for student, entries in sorted(_inbound(exchange, assignment).items()):
            if not STUDENT_ID.match(student):
                report.problems[student] = ("its student id is not one the course files (letters, digits, '.', '_' "
                                            "and '-', not first '.' or '-'); not graded, the submission stays in the "
                                            "exchange")
                continue
            theirs = [(time, path) for time, path in entries if path.is_dir() and not path.is_symlink()
                      and _owner(path) == student]
            forged = sorted({_owner(path) for _, path in entries} - {student})
            if forged:
                report.notes.append(f"{student}: left out {len(entries) - len(theirs)} submission(s) in that name made "
                                    f"by {', '.join(forged)}, not by {student}")
            if not theirs:
                report.problems[student] = "no submission in the exchange was made by this student's own account"
                continue
            latest[student], path = theirs[-1]
            left_out = _copy_plain_files(path, inbound / path.name, path.lstat().st_uid)
            if left_out:
                report.notes.append(f"{student}: left out of the submission what is not a plain file of theirs: "
                                    f"{', '.join(left_out)}")
            if len(theirs) > 1:
                report.notes.append(f"{student}: {len(theirs)} submissions; the latest ({latest[student]}) is graded, "
                                    f"the earlier stay in the exchange")
        done = run_nbgrader(course, "collect", assignment, "--update", env=exchange_env(scratch))
    if done.returncode:
        report.problems["the exchange"] = f"nbgrader collect failed: {_last_line(done.stderr or done.stdout)}"
        return report
    for student, when in sorted(latest.items()):
        folder = course / "submitted" / student / assignment
        problem = (check_submission(folder / notebook_name, expected) if folder.is_dir()
                   else "nbgrader collect filed nothing for this student")
        if problem:
            report.problems[student] = problem
            continue
        report.collected[student] = folder / notebook_name
        if due and when > due:
            report.notes.append(f"{student}: submitted {when}, after the due date {due} (nbgrader's late "
                                f"policy applies)")
    return report


def _due_date(course: Path, assignment: str) -> str | None:
    """The assignment's due date as nbgrader writes submission times (UTC, "YYYY-MM-DD HH:MM:SS..."), or None."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        try:
            due = gradebook.find_assignment(assignment).duedate
        except MissingEntry:
            return None
    return due.strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC" if due else None


def release_feedback(course: Path, assignment: str, exchange: Path) -> subprocess.CompletedProcess:
    """nbgrader release_feedback: each student's feedback page into the exchange, where only they can fetch it
    (its name is a hash of their own submission's secret)."""
    return run_nbgrader(Path(course).resolve(), "release_feedback", assignment, env=exchange_env(exchange))


def submitted_students(course: Path, assignment: str) -> list[str]:
    """The students with a submission of `assignment` in course/submitted/, sorted."""
    return sorted(p.parent.name for p in (Path(course) / "submitted").glob(f"*/{assignment}"))


TIMESTAMP_FILE = "timestamp.txt"   # nbgrader's record of when a submission came in: kept, if small
# The files nbgrader's own steps write beside a submission and read again, kept (if at most 1 KB) where everything
# else a submission brings is set aside: when it came in, and the exchange's secret under which its feedback is
# released (nbgrader submit writes it; release_feedback names the feedback page by it).
NBGRADER_NOTES = (TIMESTAMP_FILE, "submission_secret.txt")
MAX_GRADED_FILE = 50 * 1024 ** 2   # a file of autograded/ or feedback/ bigger than this is removed


def _describe(path: Path) -> str:
    """A thing's name as a report shows it: a folder ends in /, a link says so."""
    if path.is_symlink():
        return f"{path.name} (a link)"
    return f"{path.name}/" if path.is_dir() else path.name


def _remove(path: Path) -> list[str]:
    """Delete `path` without following links: a link goes, what it points to stays. A tree of any
    depth, odd names and permissions goes too (cleanup.remove_tree); what could not be removed
    is returned, one line each, and nothing is raised."""
    return cleanup.remove_tree(path)


def _aside_folder(folder: Path) -> Path | None:
    """submitted/<student>/<assignment>.extra/, made if need be; None if it is not a real folder."""
    aside = folder.parent / f"{folder.name}.extra"
    if aside.is_symlink() or (aside.exists() and not aside.is_dir()):
        # A link planted by the submission would carry the files anywhere (source/, say).
        return None
    aside.mkdir(exist_ok=True)
    return aside


def _move_aside(path: Path, aside: Path) -> None:
    """Move `path` into `aside` as it is (a link as the link), under a name not taken there yet."""
    target, n = aside / path.name, 1
    while target.exists() or target.is_symlink():
        target, n = aside / f"{path.name}.{n}", n + 1
    os.rename(path, target)


def prepare_submissions(course: Path, assignment: str, student: str | None = None) -> list[str]:
    """Leave in each student's submitted folder only their notebooks; one line per thing set aside.

    nbgrader copies a submitted folder into autograded/ (following links) and the
    feedback step copies it on to feedback/; nothing but the notebooks must travel:

    - anything in the folder that is not a regular-file notebook of the assignment
      (a link, a folder such as `plmcourse/` or `.ipynb_checkpoints/`, a `*.py`, any
      other file) moves, as it is and without following links, to
      submitted/<student>/<assignment>.extra/, reported in one line for the student;
      nbgrader's own timestamp.txt stays;
    - a notebook that is a link is set aside the same way (the notebook then counts as
      not submitted), with a line of its own;
    - a notebook in a student's folder that the assignment does not have (nbgrader finds
      no gradebook entry for it and gives up) moves to submitted/<student>/<assignment>.extra/;
    - nbgrader metadata that is not a dict (a student's own "nbgrader" key), or that names a
      grade_id the assignment does not have (a forged test cell, which is also flagged), is
      removed from the submitted notebook, which is otherwise left exactly as it was;
    - a student's or assignment folder that is a link is removed (the link only: what it
      points to is left alone), and that student is not graded.

    If <assignment>.extra is not a real folder (a link, say), an extra notebook stays where
    it is (nbgrader skips it) and everything else set aside above is deleted instead.
    """
    course = Path(course).resolve()
    expected = {p.name for p in (course / "source" / assignment).glob("*.ipynb")}
    grade_ids = assignment_grade_ids(course, assignment)
    lines, flags, seen = [], [], []
    for folder in sorted((course / "submitted").glob(f"{student or '*'}/{assignment}")):
        name = folder.parent.name
        link = folder.parent if folder.parent.is_symlink() else folder if folder.is_symlink() else None
        if link is not None:
            where = link.relative_to(course)
            link.unlink()
            lines.append(f"{name}: {where} is a link, not a folder; removed the link (not what it "
                         f"points to), nothing of this student is graded")
            continue
        if not folder.is_dir():
            continue
        seen.append(name)
        keep, others = [], []
        for path in sorted(folder.iterdir()):
            regular = path.is_file() and not path.is_symlink()
            if regular and path.name in expected:
                keep.append(path)
            elif regular and path.name in NBGRADER_NOTES and path.stat().st_size <= 1024:
                continue
            elif regular and path.suffix == ".ipynb":
                aside = _aside_folder(folder)
                if aside is None:
                    lines.append(f"{name}: could not set {path.name} aside, {folder.name}.extra is not a folder")
                    continue
                _move_aside(path, aside)
                lines.append(f"{name}: left out {path.name}, which is not a notebook of {assignment} "
                             f"(moved to {aside.relative_to(course)})")
            elif path.is_symlink() and path.suffix == ".ipynb":
                aside = _aside_folder(folder)
                if aside is None:
                    path.unlink()
                    lines.append(f"{name}: {path.name} is a link, not a notebook file; removed the link "
                                 f"(not what it points to), so it counts as not submitted")
                    continue
                _move_aside(path, aside)
                lines.append(f"{name}: {path.name} is a link, not a notebook file; set aside (moved to "
                             f"{aside.relative_to(course)}), so it counts as not submitted")
            else:
                others.append(path)
        if others:
            described = ", ".join(_describe(p) for p in others)
            aside = _aside_folder(folder)
            for path in others:
                if aside is None:
                    _remove(path)
                else:
                    _move_aside(path, aside)
            if aside is None:
                lines.append(f"{name}: removed what is not a notebook of {assignment}: {described} "
                             f"({folder.name}.extra is not a folder to set it aside in)")
            else:
                lines.append(f"{name}: set aside what is not a notebook of {assignment}: {described} "
                             f"(moved to {aside.relative_to(course)})")
        for path in keep:
            try:
                nb = nbformat.read(path, as_version=4)
            except Exception:  # nbgrader reports an unreadable notebook itself, for this student only
                continue
            odd = [i for i, c in enumerate(nb.cells) if "nbgrader" in c.metadata
                   and not isinstance(c.metadata["nbgrader"], dict)]
            for i in odd:
                del nb.cells[i].metadata["nbgrader"]
            restored = restore_metadata(nb, course / "release" / assignment / path.name)
            # A cell that names a grade_id the assignment does not have is not nbgrader's either:
            # a forged test ("test_bonus", 100 points) would make nbgrader give up on the notebook.
            forged = [i for i, c in enumerate(nb.cells) if i not in odd and nbgrader_metadata(c).get("grade_id")
                      and nbgrader_metadata(c)["grade_id"] not in grade_ids]
            for i in forged:
                del nb.cells[i].metadata["nbgrader"]
            if odd or forged or restored:
                # Written beside and moved over: never written through anything.
                cleaned = path.with_name(path.name + ".cleaned")
                nbformat.write(nb, cleaned)
                os.replace(cleaned, path)
            if odd:
                lines.append(f"{name}: ignored nbgrader metadata that is not nbgrader's in cell(s) "
                             f"{', '.join(str(i + 1) for i in odd)}")
            if restored:
                lines.append(f"{name}: restored the nbgrader metadata of {len(restored)} cell(s) "
                             f"({', '.join(restored)}) by matching them to the release")
            if forged:
                where = f"cell(s) {', '.join(str(i + 1) for i in forged)}"
                flags.append(Flag(name, path.stem, "", f"{where} claimed to be graded cells the assignment does not "
                                  f"have (their metadata was removed)", "collect"))
                lines.append(f"{name}: flagged for review, cell(s) {', '.join(str(i + 1) for i in forged)} "
                             f"claim to be graded cells the assignment does not have; graded as ordinary cells")
    review.save_collect_flags(course, assignment, seen, flags)
    return lines


def restore_metadata(nb, release_path: Path) -> list[str]:
    """Give back to `nb`'s cells the nbgrader metadata they lost (a tool that strips unknown
    metadata, a copy-paste into a fresh notebook); the grade_ids restored.

    A cell is matched to the release cell it came from by its source (unchanged locked and
    test cells) or, for an answer, by the function it defines (`def softmax(`). Only cells
    without nbgrader metadata are matched, each at most once; a grade_id the notebook still
    has is left alone. Without this nbgrader cannot grade a stripped notebook at all.
    """
    if not release_path.is_file():
        return []
    release = nbformat.read(release_path, as_version=4)
    present = {nbgrader_metadata(c).get("grade_id") for c in nb.cells} - {None}
    free = [c for c in nb.cells if "nbgrader" not in c.metadata]
    restored = []
    for original in release.cells:
        meta = nbgrader_metadata(original)
        grade_id = meta.get("grade_id")
        if not grade_id or grade_id in present:
            continue
        match = next((c for c in free if c.cell_type == original.cell_type
                      and c.source.strip() == original.source.strip()), None)
        defined = re.findall(r"^def (\w+)\(", original.source, re.M)
        if match is None and meta.get("solution") and defined:
            match = next((c for c in free if c.cell_type == original.cell_type
                          and all(re.search(rf"^def {name}\(", c.source, re.M) for name in defined)), None)
        if match is not None:
            match.metadata["nbgrader"] = dict(meta)
            free.remove(match)
            restored.append(grade_id)
    return restored


def clean_graded_folders(course: Path, assignment: str, student: str | None = None) -> list[str]:
    """Leave only notebooks in autograded/<s>/<assignment>/ and .html files in feedback/<s>/<assignment>/.

    To run after autograde and after generate_feedback: whatever else is there (copied from
    a submission, written by something other than nbgrader) is removed without following
    links, as is any file over MAX_GRADED_FILE bytes; nbgrader's small notes (NBGRADER_NOTES) stay.
    One line per student and folder for what was removed.
    """
    course = Path(course).resolve()
    lines = []
    for kind, suffix, what in (("autograded", ".ipynb", "a notebook"), ("feedback", ".html", "feedback")):
        for folder in sorted((course / kind).glob(f"{student or '*'}/{assignment}")):
            name = folder.parent.name
            link = folder.parent if folder.parent.is_symlink() else folder if folder.is_symlink() else None
            if link is not None or not folder.is_dir():
                link = link or folder
                where = link.relative_to(course)
                _remove(link)
                lines.append(f"{name}: removed {where}, which is not a folder")
                continue
            removed, too_big = [], []
            for path in sorted(folder.iterdir()):
                regular = path.is_file() and not path.is_symlink()
                if regular and (path.suffix == suffix or path.name in NBGRADER_NOTES):
                    size = path.stat().st_size
                    if size > (1024 if path.name in NBGRADER_NOTES else MAX_GRADED_FILE):
                        path.unlink()
                        too_big.append(f"{path.name} ({size / 1024 ** 2:.1f} MB)")
                    continue
                removed.append(_describe(path))
                _remove(path)
            where = folder.relative_to(course)
            if removed:
                lines.append(f"{name}: removed from {where} what is not {what}: {', '.join(removed)}")
            if too_big:
                lines.append(f"{name}: removed from {where} what is over {MAX_GRADED_FILE // 1024 ** 2} MB: "
                             f"{', '.join(too_big)}")
    return lines


def autograde(course: Path, assignment: str, use_sandbox: bool = True,
              memory: int = sandbox.DEFAULT_MEMORY, student: str | None = None,
              jobs: int | None = None) -> subprocess.CompletedProcess:
    """nbgrader autograde, every student (or one), with the judge deciding every check.

    Each kernel runs in the grading sandbox (unless use_sandbox=False) with a connection to
    one judge for the class (plmcourse.autograde.judge); when nbgrader is done, the judge's
    verdicts replace nbgrader's scores of the test cells. The result's stdout ends with the
    judge's report lines (one per finding), its stderr names each student nbgrader could not grade.

    With jobs > 1 the students are dealt out to that many nbgrader processes running at
    once (each told to leave out the others' students); they share the gradebook, which
    SQLite keeps consistent. When a process fails, each of its students is graded again
    on their own, so that one submission cannot cost the others their grades.
    """
    course = Path(course).resolve()
    students = [student] if student else submitted_students(course, assignment)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(students)))
    groups = [students[i::jobs] for i in range(jobs)]
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(cleanup.scratch_folder("plmcourse-grading-"))
        judge = stack.enter_context(Judge(scratch / "judge", course))
        envs = _kernel_envs(scratch, course, assignment, memory, jobs, use_sandbox, judge)

        def grade(group, env):
            return run_nbgrader(course, "autograde", assignment, "--force", *_only(students, group), env=env)

        started = time.time()
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            done = list(pool.map(grade, groups, envs))
        # Rare, so one at a time: each nbgrader process must have its own sockets' directory. Of a process
        # that failed, only the students it did not grade in this run: nbgrader removes a submission it
        # could not grade, and grades every other one in a kernel of its own.
        alone = [s for group, d in zip(groups, done) if d.returncode and len(group) > 1 for s in group
                 if not graded_since(course, assignment, s, started)]
        retried = {s: grade([s], envs[0]) for s in alone}
        sandbox.KernelCgroup.sweep_own()  # what the kernels' launchers, killed by nbgrader, could not remove
        # The grader's own reading of each submission: what it forbids scores 0 like a reported call.
        read = review.read_submissions(course, assignment, students)
        report, kernel_flags, failures = apply_verdicts(judge, course, assignment, students,
                                                        sealed=review.sealed_answers(read))
    report += clean_graded_folders(course, assignment, student)
    report += inert.neutralise_graded(course, assignment, student)
    failed = {s: d for s, d in retried.items() if d.returncode}
    failed.update({group[0]: d for group, d in zip(groups, done) if d.returncode and len(group) == 1})
    stderr = "".join(f"{s}: nbgrader could not grade this submission: {_last_line(d.stderr)}\n"
                     for s, d in sorted(failed.items()))
    report += _review(course, assignment, students, kernel_flags, failures, read)
    stdout = "".join(f"{line}\n" for line in report)
    return subprocess.CompletedProcess(["nbgrader", "autograde", assignment], 1 if failed else 0, stdout, stderr)


def graded_since(course: Path, assignment: str, student: str, since: float) -> bool:
    """Whether nbgrader wrote `student`'s autograded notebooks of `assignment` after `since` (a time.time())."""
    folder = Path(course) / "autograded" / student / assignment
    notebooks = [path for path in folder.glob("*.ipynb") if not path.is_symlink()] if folder.is_dir() else []
    return bool(notebooks) and all(path.stat().st_mtime >= since for path in notebooks)


def _review(course: Path, assignment: str, students: list[str], kernel_flags: list, failures: list,
            read: dict) -> list[str]:
    """Every flag into the gradebook and course/review/<assignment>.csv (plmcourse.autograde.review);
    one report line per flag. The scores are in the gradebook already: whatever goes wrong here
    is said in one line and costs no grade."""
    try:
        flags = review.gather(course, assignment, students, kernel_flags, read)
        specs = {notebook: part["spec"] for notebook, part in read.items()}
        problems = review.write_gradebook(course, assignment, students, flags, failures, specs)
        points = review.exercise_points(course, assignment, flags, specs)
        review.write_review(course, assignment, students, flags, points)
    except Exception as error:  # a bug of ours, not a student's doing: the grades stand, say so
        return [f"the review flags could not be written ({type(error).__name__}: {' '.join(str(error).split())[:200]})"]
    return problems + [flag.line() for flag in flags]


# A line of nbgrader's log that names what went wrong: an exception ("nbclient.exceptions.DeadKernelError: ...").
_EXCEPTION_LINE = re.compile(r"^[\w.]*(Error|Exception|Exit|Interrupt|Timeout)\b[\w.]*: .+")


def _last_line(text: str) -> str:
    """What nbgrader's log says went wrong: its last exception line, with its own last line (often "Please
    see the above traceback ..."), else the last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "no message"
    cause = next((line for line in reversed(lines) if _EXCEPTION_LINE.match(line)), None)
    return (f"{cause[:300]} ({lines[-1][:120]})" if cause and cause != lines[-1] else lines[-1][:300])


def _only(students: list[str], group: list[str]) -> list[str]:
    """nbgrader arguments that restrict a command to `group` out of `students`."""
    if len(group) == 1:
        return [f"--student={group[0]}"]
    others = sorted(set(students) - set(group))
    return [f"--CourseDirectory.student_id_exclude={','.join(others)}"] if others else []


def _kernel_envs(scratch: Path, course: Path, assignment: str, memory: int, jobs: int, use_sandbox: bool,
                 judge: Judge):
    """For each of `jobs` nbgrader processes, an environment whose kernels start through the
    course's launcher (sandboxed unless use_sandbox=False) and connect to the judge.

    The sandbox's package holds no complete implementation of this assignment's graded
    functions (sandbox.grading_package: found by name and by a search of the package's
    behaviour, whose result is kept in sandbox.search_cache(course) and whose line, with its
    duration, is printed); of the rest of the package, only what this assignment's notebooks use
    (exposure.reached): another assignment's graded function is a stub unless this one's code uses it.

    Each process gets its own directory for the kernels' sockets, so that two processes
    never pick the same socket names at the same moment. In the sandbox, a kernel makes its
    sockets in a capped tmpfs of its own; that directory holds only links to them.
    """
    if use_sandbox:
        why_not = sandbox.available()
        if why_not:
            raise RuntimeError(f"cannot autograde in the sandbox: {why_not}; install it, or pass "
                               f"--no-sandbox to grade without isolation")
    kernels = scratch / "jupyter"
    notebooks = sorted((course / "source" / assignment).glob("*.ipynb"))
    graded = sandbox.graded_functions(notebooks)
    package = None
    if use_sandbox:
        searched = []
        package = sandbox.grading_package(scratch / "package", graded, cache=sandbox.search_cache(course),
                                          report=searched, notebooks=notebooks)
        print("\n".join(f"autograde: {line}" for line in searched), flush=True)
    sandbox.install_kernelspec(kernels, course, memory, use_sandbox=use_sandbox, package=package)
    path = os.pathsep.join([str(kernels), os.environ.get("JUPYTER_PATH", "")]).rstrip(os.pathsep)
    envs = []
    for job in range(jobs):
        sockets = scratch / f"ipc{job}"
        sockets.mkdir()
        envs.append(nbgrader_env({"JUPYTER_PATH": path, "PLMCOURSE_IPC_DIR": str(sockets),
                                  "PLMCOURSE_JUDGE_SOCKET": str(judge.socket_path)}))
    return envs


def feedback(course: Path, assignment: str) -> subprocess.CompletedProcess:
    """nbgrader generate_feedback, from autograded notebooks made inert first (a notebook graded with
    plain `nbgrader autograde` has not been; for one that has, this changes nothing)."""
    inert.neutralise_graded(Path(course).resolve(), assignment)
    return run_nbgrader(Path(course).resolve(), "generate_feedback", assignment, "--force")


def export(course: Path, to: str = "grades.csv") -> subprocess.CompletedProcess:
    return run_nbgrader(Path(course).resolve(), "export", "--to", to)
