"""What the tests share: scratch courses, `plmcourse grade` as an instructor runs it, the gradebook, one
graded class of 03_attention that the catalogue, attack and hostile-kernel tests all read, a real Jupyter
server (`jupyter_server`), and what counts as a warning box under a notebook's cell (`unexpected_stderr`).

A scratch course is a copy of course/'s configuration and the named assignments' sources and releases, taken
from one course released once per test session (`generated_course`, `prepared_course`); each test gets its
own copy of the prepared folder, which it may change as it likes (`scratch_course`).

The graded class (`graded_class`): every submission of tests/test_grading_catalogue.py,
tests/test_grading_attacks.py and bench/attacks.py (tests/test_grading_hostile_kernel.py) in one export,
graded by one `plmcourse grade all` once per test run, whichever pytest-xdist worker asks first (the
others wait on a file lock and read the result). Each test reads its own students' rows.
"""

import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

from plmcourse.autograde import sandbox
from plmcourse.release import solution_cells, solved_release

ROOT = Path(__file__).resolve().parents[1]
COURSE = ROOT / "course"
CELL_SECONDS = 10  # nbgrader's limit per cell in the graded tests: the answers are small, the attacks stall


def nbgrader_env(**extra) -> dict:
    """The environment nbgrader and `plmcourse grade` run in (this Python's scripts first on PATH), plus `extra`."""
    from plmcourse.release import nbgrader_env as environment

    return {**environment(), **extra}


@contextmanager
def locked(path: Path):
    """An exclusive lock on `path` (a file beside what it guards), held by one process of the run at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_folder(tmp_path_factory) -> Path:
    """A folder every pytest-xdist worker of this run sees (the base of their temp folders), or this one's."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def generated_course(tmp_path_factory) -> Path:
    """A copy of course/ (configuration and sources) after `plmcourse release` ran in it: every source tidied,
    every assignment generated, in one gradebook. Made once per run, whichever worker asks first; never changed."""
    from plmcourse.release import release_course

    folder = shared_folder(tmp_path_factory) / "generated"
    with locked(folder.with_suffix(".lock")):
        if not (folder / "course" / ".prepared").exists():
            shutil.rmtree(folder, ignore_errors=True)
            course = folder / "course"
            course.mkdir(parents=True)
            shutil.copy(COURSE / "nbgrader_config.py", course)
            shutil.copytree(COURSE / "source", course / "source")
            release_course(course)
            (course / ".prepared").write_text("")
    return folder / "course"


def prepared_course(tmp_path_factory, *assignments: str) -> Path:
    """A course with `assignments` released (generated), taken from the generated course (its gradebook without the
    other assignments); made once per run and never changed."""
    from nbgrader.api import Gradebook

    folder = shared_folder(tmp_path_factory) / ("prepared-" + "-".join(assignments))
    with locked(folder.with_suffix(".lock")):
        if not (folder / "course" / ".prepared").exists():
            generated = generated_course(tmp_path_factory)
            shutil.rmtree(folder, ignore_errors=True)
            course = folder / "course"
            course.mkdir(parents=True)
            shutil.copy(generated / "nbgrader_config.py", course)
            shutil.copy(generated / "gradebook.db", course)
            for assignment in assignments:
                for part in ("source", "release"):
                    shutil.copytree(generated / part / assignment, course / part / assignment)
            with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
                for other in [a.name for a in gradebook.assignments if a.name not in assignments]:
                    gradebook.remove_assignment(other)
            (course / ".prepared").write_text("")
    return folder / "course"


def scratch_course(tmp_path_factory, where: Path, *assignments: str) -> Path:
    """A course of one's own at where/course: a copy of the prepared one (gradebook and release included)."""
    course = Path(where) / "course"
    shutil.copytree(prepared_course(tmp_path_factory, *assignments), course, ignore=shutil.ignore_patterns(".prepared"))
    return course


def run_grade(course: Path, *args, **env) -> subprocess.CompletedProcess:
    """`plmcourse grade ARGS --course COURSE` as an instructor runs it; `env` adds variables."""
    return subprocess.run([sys.executable, "-m", "plmcourse", "grade", *args, "--course", str(course)],
                          capture_output=True, text=True, errors="replace",
                          env=nbgrader_env(PLMCOURSE_CELL_SECONDS=str(CELL_SECONDS), **env))


def plmcourse_grade(course: Path, *args, **env) -> str:
    """run_grade, which must succeed; its output."""
    done = run_grade(course, *args, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def gradebook_scores(course: Path, assignment: str) -> dict:
    """student -> (total score, max score, {grade_id: score}) of their `assignment`, from the gradebook."""
    from nbgrader.api import Gradebook

    result = {}
    with Gradebook(f"sqlite:///{Path(course) / 'gradebook.db'}") as gradebook:
        for student in gradebook.students:
            try:
                submission = gradebook.find_submission(assignment, student.id)
            except Exception:  # not graded
                continue
            grades = {g.name: g.score for nb in submission.notebooks for g in nb.grades}
            result[student.id] = (submission.score, submission.max_score, grades)
    return result


def write_submissions(folder: Path, assignment: str, notebooks: dict) -> None:
    """An LMS-like export: <student>_<assignment>.ipynb for each {student: notebook}."""
    folder.mkdir(parents=True, exist_ok=True)
    for student, nb in notebooks.items():
        nbformat.write(nb, folder / f"{student}_{assignment}.ipynb")


# ----------------------------------------------------------------------------
# One graded class for the tests that only read what grading gave


class GradedClass:
    """What one `plmcourse grade all` of the whole class left: read, never changed, by the tests."""

    def __init__(self, root: Path, saved: dict):
        self.root = root
        self.course = root / "course"
        self.export = self.course / "downloads" / "03_attention-submissions"
        self.tmp = root / "tmp"
        self.report = saved["report"]
        self.returncode = saved["returncode"]
        self.seconds = saved["seconds"]
        self.students = saved["students"]


# The modules whose submissions make up the class: each has into_class(export) -> the students it wrote.
CLASS_MODULES = ("test_grading_catalogue", "test_grading_attacks", "test_grading_hostile_kernel")


def once_per_run(tmp_path_factory, name: str, build) -> tuple[Path, dict]:
    """`build(folder)`, which returns what it saw as a JSON-able dict, run once per test run by whichever
    pytest-xdist worker asks first (the others wait on its lock); (the folder, what it saw) for every caller."""
    root = shared_folder(tmp_path_factory) / name
    with locked(root.with_suffix(".lock")):
        saved = root / "run.json"
        if not saved.exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            saved.write_text(json.dumps(build(root)))
    return root, json.loads(saved.read_text())


def graded_class(tmp_path_factory) -> GradedClass:
    """The shared graded class, built once per run by whichever worker asks first (see the module's doc)."""
    import importlib

    def build(root):
        course = scratch_course(tmp_path_factory, root, "03_attention", "00_welcome")
        # The export inside the course, where an instructor may well unpack it: the planted links of
        # tests/test_grading_attacks.py reach the course's files from there.
        export = course / "downloads" / "03_attention-submissions"
        export.mkdir(parents=True)
        students = [name for module in CLASS_MODULES for name in importlib.import_module(module).into_class(export)]
        tmp = root / "tmp"  # the grader's scratch folders, ours to look at afterwards
        tmp.mkdir()
        start = time.perf_counter()
        graded = run_grade(course, "all", "03_attention", str(export), TMPDIR=str(tmp),
                           GRADER_SECRET_TOKEN=GRADER_SECRET)
        return {"report": graded.stdout + graded.stderr, "returncode": graded.returncode,
                "seconds": time.perf_counter() - start, "students": students}

    return GradedClass(*once_per_run(tmp_path_factory, "graded-class", build))


# An instructor's secret in the grader's environment: tests/test_grading_attacks.py looks for it everywhere.
GRADER_SECRET = "GRADER-SECRET-c0ffee-5e1f-4ab3-9d7e-0c4b1d5a7e21"

# ----------------------------------------------------------------------------
# A check judged through the wire, the kernel and the judge in two threads of this process


def judged(check_name, fn, hidden=True):
    """(passed, sentence, flags, what the kernel showed) for `fn` checked through the wire, the kernel's
    side (serve) and the judge's (the check's Spec with a Remote) on the two ends of a socketpair, as
    `plmcourse grade autograde` puts them in two processes."""
    import socket
    import threading

    import plmcourse.judging as judging
    from plmcourse.grading import wire
    from plmcourse.grading.core import serve
    from plmcourse.judging.core import CheckFailed, Remote

    kernel_end, judge_end = socket.socketpair()
    shown = {}

    def kernel():
        try:
            serve(kernel_end, check_name, fn, hidden)
            shown["kernel"] = "passed"
        except CheckFailed as failure:
            shown["kernel"] = str(failure)

    thread = threading.Thread(target=kernel)
    thread.start()
    announced = wire.receive(judge_end)
    assert announced == {"check": check_name, "hidden": hidden}
    remote = Remote(judge_end)
    try:
        judging.spec(check_name)(remote, hidden=announced["hidden"])
        passed, sentence = True, remote.passed
    except CheckFailed as failure:
        passed, sentence = False, str(failure)
    wire.send(judge_end, {"verdict": {"passed": passed, "message": sentence}})
    thread.join(timeout=60)
    return passed, sentence, remote.flags, shown["kernel"]


# ----------------------------------------------------------------------------
# A real Jupyter server on localhost

TOKEN = "plmcourse-test-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str):
    request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""


@contextmanager
def jupyter_server(cmd: list, env: dict, port: int):
    log = open(Path(env.get("HOME", ROOT)) / f"jupyter-{port}.log", "w")
    # A session of its own: `tasks.py lab` starts JupyterLab as a child, and stopping only
    # tasks.py would leave that server running after the test.
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            if proc.poll() is not None:
                pytest.fail(f"jupyter exited with {proc.returncode}; see {log.name}")
            try:
                if get(f"{base}/api/status")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("jupyter did not answer within 60 s")
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the whole group: tasks.py and the server it started
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def server_args(port: int) -> list:
    return ["--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={TOKEN}", "--ServerApp.open_browser=False"] + (
        ["--allow-root"] if os.geteuid() == 0 else [])


def venv_env(**extra) -> dict:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    env.update(extra)
    return env


# ----------------------------------------------------------------------------
# A real browser: headless Chromium driven by selenium

CHROMIUM = next(filter(None, map(shutil.which, ["chromium", "chromium-browser", "google-chrome"])), None)
CHROMEDRIVER = shutil.which("chromedriver")
_BROWSER_MISSING = {name: how for name, how, found in [
    ("selenium", "pip install selenium", importlib.util.find_spec("selenium")),
    ("chromium", "apt-get install chromium", CHROMIUM),
    ("chromedriver", "apt-get install chromium-driver", CHROMEDRIVER)] if not found}
# Why a browser test cannot run here, in one sentence; "" where it can.
NO_BROWSER = (f"the browser test needs {' and '.join(_BROWSER_MISSING)}, which are missing "
              f"({'; '.join(_BROWSER_MISSING.values())})" if _BROWSER_MISSING else "")


@contextmanager
def chromium(folder: Path, size: str = "1400,1100", prompts: str = "accept", offline: bool = False):
    """Headless Chromium with its profile in `folder`; failure screenshots go to `folder`/shots (see `wait`).
    `prompts`: what an alert or a "leave site?" question gets ("accept", or "ignore" to leave it open for the
    test to see). `offline`: no host name resolves but 127.0.0.1, so a page's CDN scripts fail at once."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ["--headless=new", f"--window-size={size}", "--disable-dev-shm-usage", "--disable-gpu",
                "--no-first-run", "--disable-extensions", "--disable-background-networking",
                f"--user-data-dir={folder / 'profile'}"]:
        options.add_argument(arg)
    if offline:
        options.add_argument("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    options.unhandled_prompt_behavior = prompts
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)  # named: Selenium Manager stays offline
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(60)
    driver.failure_shots = folder / "shots"
    driver.failure_shots.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver, seconds: float, expected: str, condition):
    """Wait until `condition(driver)` is truthy and return it; on timeout, fail saying what was expected and
    where the screenshot of the page is."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:  # an element the page redrew while the condition read it: read again at the next poll
        return WebDriverWait(driver, seconds, poll_frequency=0.25,
                             ignored_exceptions=(StaleElementReferenceException,)).until(condition)
    except TimeoutException:
        shot = driver.failure_shots / f"timeout-{len(list(driver.failure_shots.iterdir())) + 1}.png"
        driver.save_screenshot(str(shot))
        raise AssertionError(f"expected {expected} within {seconds:.0f} s; it did not happen "
                             f"(the page then: {shot})") from None


# ----------------------------------------------------------------------------
# What a student sees as a warning under a cell

# Text on stderr is the pink warning box JupyterLab draws under a cell; a student reads it as
# "something went wrong". Allowed only where the warning is the lesson: notebook folder ->
# a piece of text each allowed stderr output contains. None is a lesson today.
ALLOWED_STDERR: dict[str, list[str]] = {}

# A progress bar is not a warning. In JupyterLab tqdm.auto draws widgets; where it falls back
# to text it redraws one line on stderr with carriage returns: "\rCBOW:  40%|####  | 2/5 [00:01<...".
# Output made only of such lines is allowed; anything else on stderr is not.
PROGRESS_LINE = re.compile(r"\d+%\|.*\| *\d+/\d+ \[")


def is_progress_bar(text: str) -> bool:
    lines = [line for line in re.split(r"[\r\n]", text) if line.strip()]
    return bool(lines) and all(PROGRESS_LINE.search(line) for line in lines)


def unexpected_stderr(nb, notebook: str) -> list[str]:
    """The stderr texts of an executed notebook that are neither progress bars nor allowed lessons."""
    allowed = ALLOWED_STDERR.get(notebook, [])
    texts = [o.text for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if o.output_type == "stream" and o.name == "stderr"]
    return [t for t in texts if not is_progress_bar(t) and not any(a in t for a in allowed)]


# ----------------------------------------------------------------------------
# The class's assignment (03_attention): its points, its solved notebook and ways to change it

# The class's tests' marks: real nbgrader runs, skipped where the sandbox cannot run (no bubblewrap).
CLASS_MARKS = [pytest.mark.nbgrader, pytest.mark.skipif(sandbox.available() is not None, reason=str(sandbox.available()))]

ASSIGNMENT = "03_attention"
POINTS = {"softmax": 2, "scaled_dot_product_attention": 3, "causal_mask": 1, "multi_head_attention": 4}
FULL = sum(POINTS.values())
BROKEN_SOFTMAX = FULL - 2 - 3


def answers():
    return solution_cells(COURSE, ASSIGNMENT)


def solved(**replace):
    """The release notebook with every answer filled in; `replace` swaps in other answer cells."""
    return solved_release(COURSE, ASSIGNMENT, **replace)


def with_cell(nb, source, after="softmax"):
    """Insert an ordinary code cell right after the answer cell `after`."""
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == after)
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source))
    return nb


def strip_all(nb):
    """The notebook as a tool that drops unknown metadata would leave it: no nbgrader metadata at all."""
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
    return nb


def scores(course):
    """student -> {exercise: score}, straight from the gradebook's SQLite file."""
    from nbgrader.api import Gradebook

    result = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in gradebook.students:
            try:
                result[student.id] = {name: gradebook.find_grade(f"test_{name}", ASSIGNMENT, ASSIGNMENT,
                                                                  student.id).score for name in POINTS}
            except Exception:  # a student with no graded submission
                continue
    return result


# ----------------------------------------------------------------------------
# Which of an exercise's arguments a check's cases never vary


def value_key(value):
    """Equal arguments give equal keys: arrays and tensors by dtype, shape and bytes."""
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, hashlib.sha1(np.ascontiguousarray(value).tobytes()).digest())
    if isinstance(value, np.random.Generator):
        return ("generator", repr(value.bit_generator.state))
    try:
        hash(value)
        return ("value", type(value).__name__, value)
    except TypeError:
        return ("repr", type(value).__name__, repr(value))


def fixed_arguments(signature, cases, signature_args=None):
    """The parameters of `signature` that keep one value (an omitted one counts as its default) in all `cases`;
    a driven check's cases by what stands for the exercise's arguments (Check.signature_args)."""
    seen = {name: set() for name in signature.parameters}
    for case in cases:
        args, kwargs = signature_args(case) if signature_args else (case.args, case.kwargs)
        bound = signature.bind(*args, **kwargs)  # a case that does not fit the signature fails here
        bound.apply_defaults()
        for name, value in bound.arguments.items():
            seen[name].add(value_key(value))
    return [name for name, values in seen.items() if len(values) < 2]
