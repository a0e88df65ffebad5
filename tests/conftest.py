"""Shared fixtures. plmcourse is imported first so that OMP_WAIT_POLICY is set before torch loads."""

import plmcourse  # noqa: F401  (must come before numpy/torch)

# setuptools replaces the standard library's distutils, and asserts if a test imported the old one first
# (nbgrader.utils imports setuptools): under pytest-xdist that depended on which tests a worker ran before.
import setuptools  # noqa: F401, E402

import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COURSE = ROOT / "course"


@pytest.fixture(scope="session", autouse=True)
def one_search_cache_for_the_session(tmp_path_factory):
    """The behavioural search (sandbox.find_implementations) is keyed by the package's files, so
    the scratch courses of one test run share its results instead of each paying 2-36 s per
    assignment; a fresh folder per run, so no result outlives the code it was found in. Under
    pytest-xdist the workers share it (a result is written whole, with os.replace)."""
    import os

    from plmcourse.autograde import sandbox

    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "search-cache"
    folder.mkdir(exist_ok=True)
    patch = pytest.MonkeyPatch()
    patch.setenv(sandbox.CACHE_ENV, str(folder))
    yield folder
    patch.undo()


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def generated_course(tmp_path_factory) -> Path:
    """A scratch copy of course/ (config and sources only) after `plmcourse release` ran in it, shared by the
    run's workers (tests/support.py)."""
    from support import generated_course as shared

    return shared(tmp_path_factory)


def source_notebooks() -> list[Path]:
    return sorted((COURSE / "source").glob("*/*.ipynb"))


def release_notebooks() -> list[Path]:
    return sorted((COURSE / "release").glob("*/*.ipynb"))


# The test runner's own threads that threading does not know (pytest-xdist's execnet channel,
# started with _thread): alive before any test, never an answer's. Their bare idents.
RUNNER_THREADS = frozenset(ident for ident in sys._current_frames() if ident not in threading._active)


@pytest.fixture(autouse=True)
def harness_threads_are_the_kernel_s_own(monkeypatch):
    """The tests put the judge and a kernel in one process, one side in a thread of a test module;
    that thread is the harness's, not an answer's, so the recorder must not report it."""
    from plmcourse.grading import core

    own = core._own_thread
    harness = ("kernel", "judge")  # the functions the tests' harness threads run (judged() and the like)
    monkeypatch.setattr(core, "_own_thread", lambda thread: own(thread) or thread in RUNNER_THREADS or getattr(
        getattr(thread, "_target", None), "__name__", None) in harness)



@pytest.fixture(autouse=True)
def abandoned_student_calls_end_with_their_test():
    """A check gives up on a student's call that runs past its limit (a grading.core.STUDENT_THREAD thread)
    and the call goes on in the background: wait for it, so that it cannot draw from torch's global generator,
    or print, under the next test of this worker (a catalogue test that asserts a check leaves the generator
    alone failed that way, now and then, after test_grading_peft's endless merge)."""
    from plmcourse.grading.core import STUDENT_THREAD

    before = set(threading.enumerate())
    yield
    for thread in set(threading.enumerate()) - before:
        if thread.name == STUDENT_THREAD:
            thread.join(timeout=30)


def pytest_collection_modifyitems(config, items):
    """Run the slow tests first: the shared graded class, then the notebooks' runs, longest first (by the
    notebooks benchmark's seconds), then every other test that runs nbgrader or starts a server, a sandbox or an
    install, then the unit tests (stable within each). Under pytest-xdist's worksteal each worker takes half of
    the list in order, and one that runs out steals the back half of the other's queue: with the long tests at
    the front and the short ones at the back, what is stolen last is short, and neither worker waits long for
    the other at the end. The class comes first of all, so that its build (one worker, minutes) is done before
    another worker runs out of tests and waits on its lock. Only the order changes."""
    from support import CLASS_MODULES

    seconds = notebook_seconds()

    def rank(item):
        if getattr(getattr(item, "module", None), "__name__", "") in CLASS_MODULES:
            return (0, 0.0)
        if item.get_closest_marker("notebook"):
            params = getattr(item, "callspec", None)  # a notebook's path or its name, for the parametrized runs
            name = Path(str(next(iter(params.params.values())))).stem if params else ""
            return (1, -seconds.get(name, 0.0))
        if any(item.get_closest_marker(m) for m in ("nbgrader", "integration")):
            return (2, 0.0)
        return (3, 0.0)

    items.sort(key=rank)


def notebook_seconds() -> dict:
    """{notebook: seconds one run took} from bench/results/notebooks.json ({} without it)."""
    import json

    results = Path(__file__).resolve().parents[1] / "bench" / "results" / "notebooks.json"
    try:
        rows = json.loads(results.read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return {}
    return {row["notebook"]: float(row["seconds"]) for row in rows if row.get("threads") == "all threads"}
