"""A Jupyter kernel that runs student code inside a bubblewrap sandbox, for autograding.

`plmcourse grade autograde` installs a kernelspec named `python3` (the name every
course notebook uses) in a scratch Jupyter path that nbgrader finds first. Its
command is this module, which starts the ordinary IPython kernel under `bwrap`:

* no network (a new, empty network namespace; the kernel talks to nbgrader over
  Unix sockets, `KernelManager.transport = "ipc"`);
* an empty root: only /usr (and /bin, /lib... ), a few files of /etc, the Python
  installation, the plmcourse package and the grader's PYTHONPATH are mounted, read-only;
  no course, `source/` (solutions and hidden tests), `gradebook.db`, other students'
  folders, homes, /run or host sockets;
* of the Python installation, the course's environment only: the base interpreter's (and
  the system's) site-packages and dist-packages are empty folders inside, unless the
  grader's own Python imports from them (`hidden_python_dirs`);
* a plmcourse package in which no complete implementation of a graded function is left
  (`grading_package`: without plmcourse/judging/, so the checks are their declarations
  alone, which hand every call to the judge; whatever the package holds that passes a
  graded function's check is stubbed, and so is whatever the assignment's own notebooks do
  not reach: `exposure`);
* the kernel's working folder is a fresh, private, size-capped tmpfs at the notebook's
  path (as are /tmp and /dev/shm): what student code writes is gone with the kernel and
  never reaches autograded/ or feedback/, and the notebook nbgrader is executing (which
  then holds the hidden tests) is not there to read;
* an empty environment but for what grading needs (`bwrap_command`), no capabilities;
* a memory ceiling (RLIMIT_DATA): an allocation above it fails inside the cell that
  made it (MemoryError), and the kernel and the rest of the notebook go on; likewise a
  file-size ceiling (RLIMIT_FSIZE, `limit_resources`): a bigger write fails with OSError;
* its sockets to nbgrader in a private, size-capped tmpfs: the host's socket folder holds
  only links into the sandbox (`/proc/<pid>/root/...`), made by the launcher, which stays
  the sandbox's parent (`run_sandboxed`), so the kernel can write nothing on the host;
* its own PID namespace and session, and it dies with nbgrader.

What it does not do is listed in course/INSTRUCTORS.md.
"""

from __future__ import annotations

import argparse
import ast
import compileall
import contextlib
import functools
import glob
import hashlib
import importlib
import inspect
import io
import json
import os
import re
import resource
import select
import shutil
import signal
import site
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import plmcourse
from plmcourse.autograde import exposure
from plmcourse.grading import policy

DEFAULT_MEMORY = 4 * 1024 ** 3  # bytes of data segment; the notebooks peak well under 1 GiB
# The empty root gets these of the host's, read-only, where they exist (the loader, the C
# library, the interpreter's shared libraries, certificates, time zone, user names).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
ETC_PATHS = ("/etc/ld.so.cache", "/etc/ssl", "/etc/ca-certificates", "/etc/localtime", "/etc/nsswitch.conf",
             "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/alternatives", "/etc/fonts")
# Of the grader's environment only these go in: the course settings plmcourse.grading.verify reads, and
# the grader's thread count (an instructor grading several notebooks at once shares out the cores).
PASSED_ENV = ("PLMCOURSE_CELL_SECONDS", "PLMCOURSE_RUN_DEMOS", "OMP_NUM_THREADS")
MAX_FILE_SIZE = 256 * 1024 ** 2   # RLIMIT_FSIZE: a bigger write fails in the cell (OSError EFBIG)
TMPFS_SIZE = 512 * 1024 ** 2      # each writable folder inside (/tmp, /dev/shm, the working folder)
MAX_CPU_SECONDS = 20 * 60         # RLIMIT_CPU of a grading kernel (limit_resources)
SOCKET_TMPFS_SIZE = 1024 ** 2     # the sockets' folder: sockets take no room, anything else fails soon
MAX_OPEN_FILES = 1024             # RLIMIT_NOFILE, soft and hard: pipes, sockets and other kernel objects held open
MAX_FILES = 10_000                # files, folders and links in each writable folder (the launcher's watch)
WATCH_SECONDS = 0.1               # how often the launcher counts them
WATCH_JOIN_SECONDS = 15           # how long the launcher waits, after the sandbox ends, for the watch to tell why
# The whole kernel's memory where the launcher can make it a cgroup (Linux counts there what no rlimit does:
# shared and tmpfs pages, pipe and socket buffers, the kernel's own objects): the data ceiling plus the three
# private folders. And its tasks (threads) there.
CGROUP_MARGIN = 3 * TMPFS_SIZE + 512 * 1024 ** 2
CGROUP_TASKS = 512
STOPPED = "the grading kernel was stopped"  # how the launcher's own word begins (review's source "sandbox")
# Where installed packages live, besides the base interpreter's own (site.getsitepackages).
SYSTEM_SITE_GLOBS = ("/usr/lib/python3*/*-packages", "/usr/lib64/python3*/*-packages",
                     "/usr/local/lib/python3*/*-packages", "/usr/local/lib64/python3*/*-packages",
                     "/usr/lib/python3/dist-packages")


def available() -> str | None:
    """None when bwrap can start the grading sandbox here, else one sentence saying why not."""
    if sys.platform != "linux":
        return "the grading sandbox needs Linux (bubblewrap)"
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    # The real thing, on a scratch course: every mount and option the kernel will get.
    with tempfile.TemporaryDirectory(prefix="plmcourse-probe-") as scratch:
        course = Path(scratch).resolve() / "course"
        folder = course / "autograded" / "probe" / "probe"
        folder.mkdir(parents=True)
        try:
            probe = subprocess.run(bwrap_command([sys.executable, "-c", "import plmcourse"], folder, course),
                                   capture_output=True, timeout=120, preexec_fn=limit_file_size)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"bwrap cannot create the grading sandbox here: {err}"
    if probe.returncode != 0:
        lines = probe.stderr.decode(errors="replace").strip().splitlines()
        return f"bwrap cannot create the grading sandbox here: {lines[-1] if lines else probe.returncode}"
    return None


@functools.lru_cache(maxsize=None)
def _bwrap_has_size() -> bool:
    """Whether this bwrap can cap a tmpfs (--size, bubblewrap 0.8 and later)."""
    done = subprocess.run(["bwrap", "--help"], capture_output=True, text=True)
    return "--size" in done.stdout + done.stderr


def readonly_paths() -> list[Path]:
    """What the kernel needs to see: the interpreter, its libraries, and the plmcourse package
    (less what hidden_python_dirs() hides inside them)."""
    package = Path(plmcourse.__file__).resolve().parent
    paths = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), package,
             Path(sys.executable).resolve().parent}
    return sorted(paths)


def hidden_python_dirs(search_path=None, base_prefix=None) -> list[Path]:
    """Folders of installed packages that the sandbox shows empty: the base interpreter's
    site-packages (and dist-packages), the system's, and the user's, except those the grader's
    own Python imports from (`search_path`, default sys.path).

    In a virtual environment that is everything but the environment's own packages: a library
    installed into the base interpreter by hand is not the course's, and must not be importable
    by appending its folder to sys.path. Without a virtual environment (conda, a system Python)
    or with --system-site-packages, those folders are on sys.path: they ARE the course's
    environment, and stay.
    """
    search_path = sys.path if search_path is None else search_path
    base_prefix = sys.base_prefix if base_prefix is None else base_prefix
    used = {Path(entry).resolve() for entry in search_path if entry and os.path.isabs(entry)}
    candidates = list(site.getsitepackages([base_prefix])) + [site.getusersitepackages()]
    for pattern in SYSTEM_SITE_GLOBS:
        candidates += glob.glob(pattern)
    hidden = set()
    for candidate in candidates:
        folder = Path(candidate).resolve()
        if not folder.is_dir() or folder.name not in ("site-packages", "dist-packages"):
            continue
        if any(entry == folder or folder in entry.parents for entry in used):
            continue  # the grader imports from it (or from inside it)
        hidden.add(folder)
    return sorted(hidden)


def shadowed_packages(search_path=None) -> list[Path]:
    """plmcourse folders where the kernel could find one, other than the one the grader imports:
    on the grader's sys.path (an older install beside a checkout on PYTHONPATH, say) or on the
    PYTHONPATH the kernel gets. The sandbox mounts the grading copy over each of them too, so
    that whichever the kernel imports or reads, it is that copy."""
    if search_path is None:
        search_path = [*sys.path, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    imported = Path(plmcourse.__file__).resolve().parent
    found = set()
    for entry in search_path:
        if entry and os.path.isabs(entry) and os.path.isdir(os.path.join(entry, "plmcourse")):
            folder = Path(entry, "plmcourse").resolve()
            if folder != imported:
                found.add(folder)
    return sorted(found)


def pythonpath_dirs(course_root: Path) -> list[Path]:
    """The grader's own PYTHONPATH folders that the kernel may see (read-only).

    An install that lives on PYTHONPATH must keep working in the sandbox; but an entry
    that is relative, a top-level folder (/, /home, /work...), the course, inside it or
    one of its parents, or the source checkout plmcourse is imported from (which holds
    course/source/, the solutions) or one of its parents, is not shown. plmcourse itself
    is shown all the same (readonly_paths).
    """
    course = Path(course_root).resolve()
    package_parent = Path(plmcourse.__file__).resolve().parent.parent
    checkout = package_parent if any((package_parent / name).exists()
                                     for name in ("pyproject.toml", "setup.py", ".git", "course")) else None
    found = []
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if not entry or not os.path.isabs(entry) or not os.path.exists(entry):
            continue
        path = Path(entry).resolve()
        if len(path.parts) < 3 or path == course or path in course.parents or course in path.parents:
            continue
        if checkout is not None and (path == checkout or path in checkout.parents):
            continue
        found.append(path)
    return found


def _inside(path: Path, folders) -> bool:
    return any(path == f or f in path.parents for f in folders)


def bwrap_command(kernel_argv: list[str], notebook_dir: Path, course_root: Path,
                  connection_file: Path | None = None, socket_dir: Path | None = None,
                  env: dict | None = None, package: Path | None = None) -> list[str]:
    """bwrap arguments that run `kernel_argv` in an empty root with only what a kernel needs.

    Read-only: the system's /usr (and /bin, /lib... as links or mounts), a few files of
    /etc, the Python installation, the plmcourse package and the grader's PYTHONPATH.
    Writable, private and capped in size: /tmp, /dev/shm, and a fresh empty folder at
    `notebook_dir` (the kernel's working folder): what student code writes there is gone
    when the kernel ends, and the real folder (which holds the notebook with its hidden
    tests while nbgrader executes it) is never seen. The kernel's `connection_file` (read-only)
    and `socket_dir` are shared. The environment is empty but for what grading needs,
    the grader's PYTHONPATH, and `env`.
    """
    notebook_dir, course_root = Path(notebook_dir).resolve(), Path(course_root).resolve()
    size = ["--size", str(TMPFS_SIZE)] if _bwrap_has_size() else []
    cmd = ["bwrap", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
           "--die-with-parent", "--new-session",
           # Run as root, bwrap would leave the kernel every capability (mount, mknod...).
           "--cap-drop", "ALL"]
    shown = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):  # merged /usr: /bin -> usr/bin
            cmd += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            cmd += ["--ro-bind", path, path]
            shown.append(Path(path))
    for path in ETC_PATHS:
        if os.path.exists(path):  # a link (/etc/localtime) is mounted as what it points to
            cmd += ["--ro-bind", path, path]
    cmd += ["--dev", "/dev", *size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
            "--proc", "/proc", *size, "--tmpfs", "/tmp"]
    python = sorted({*readonly_paths(), *pythonpath_dirs(course_root)})
    for path in python:
        cmd += ["--ro-bind", str(path), str(path)]
    if package is not None:  # the graded functions' own versions absent (grading_package)
        cmd += ["--ro-bind", str(package), str(Path(plmcourse.__file__).resolve().parent)]
    for folder in hidden_python_dirs():
        if _inside(folder, [*shown, *python]):  # an empty, read-only folder in its place
            cmd += [*(["--size", "4096"] if size else []), "--tmpfs", str(folder), "--remount-ro", str(folder)]
    for folder in shadowed_packages():
        if _inside(folder, [*shown, *python]):
            cmd += ["--ro-bind", str(package or Path(plmcourse.__file__).resolve().parent), str(folder)]
    if _inside(course_root, [*shown, *python]):
        # The course lies inside something shown (a venv around it, say): hide it again,
        # and show again only what is inside it and needed.
        cmd += ["--tmpfs", str(course_root)]
        for path in python:
            if course_root in path.parents:
                cmd += ["--ro-bind", str(path), str(path)]
    cmd += [*size, "--tmpfs", str(notebook_dir)]
    if connection_file is not None:
        cmd += ["--ro-bind", str(connection_file), str(connection_file)]
    if socket_dir is not None:
        cmd += [*(["--size", str(SOCKET_TMPFS_SIZE)] if size else []), "--tmpfs", str(socket_dir)]
    variables = {
        "PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin",
        "HOME": "/tmp", "MPLCONFIGDIR": "/tmp/matplotlib", "OMP_WAIT_POLICY": "PASSIVE",
        "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "PLMCOURSE_SANDBOX": "1",
        "LANG": "C.UTF-8",
    }
    pythonpath = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(e)]
    if pythonpath:
        variables["PYTHONPATH"] = os.pathsep.join(pythonpath)
    variables.update({name: os.environ[name] for name in PASSED_ENV if name in os.environ})
    variables.update({str(k): str(v) for k, v in (env or {}).items()})
    cmd += ["--chdir", str(notebook_dir), "--clearenv"]
    for name, value in variables.items():
        cmd += ["--setenv", name, value]
    # Nothing can be created beside what is mounted (the root is bwrap's own tmpfs).
    cmd += ["--remount-ro", "/"]
    return cmd + ["--", *kernel_argv]


# ----------------------------------------------------------------------------
# The package the kernel sees: no complete implementation of a graded function is in it


STUBBED_FOLDERS = ("ref", "nn", "data")
# What runs on the host only: the judge's folder (cases, references, catalogues, the engine) and the
# grading machinery. The kernel's copy leaves them out, whole.
LEFT_OUT = ("judging", "autograde", "cli.py", "__main__.py", "release.py")
SEARCH_SECONDS = 10.0   # one candidate's run on a check's visible cases; longer, and it is skipped
# ... or its CPU time: the course's implementations take milliseconds on a check's visible cases, while a
# training loop or a plot that accepts the same arguments computes for seconds before it fails. CPU time,
# not wall time, so that a loaded machine never skips a real implementation.
SEARCH_CPU_SECONDS = 1.5
SEARCH_VERSION = "2"    # in the cache key: a change to the search itself makes earlier results stale
CACHE_FOLDER = ".plmcourse-cache"  # in the course directory, which the sandbox hides
# Names another folder for the search's results, shared by several course directories (a test
# suite that grades many scratch courses, a machine that grades several sections). Safe to share:
# a result is keyed by a hash of the package's files and the graded names.
CACHE_ENV = "PLMCOURSE_SEARCH_CACHE"


def search_cache(course: Path) -> Path:
    """Where the behavioural search keeps its results for `course`: $PLMCOURSE_SEARCH_CACHE if
    set, else the course's own CACHE_FOLDER."""
    return Path(os.environ.get(CACHE_ENV) or Path(course) / CACHE_FOLDER)


def graded_functions(notebooks=None) -> set[str]:
    """The names of the functions the course grades (check_softmax grades `softmax`, ...): all of
    them, or those whose checks the given notebooks call (one assignment's exercises)."""
    import nbformat  # here, not at the top: the kernel's launcher imports this module too

    from plmcourse.grading import CHECKS

    names = {name.removeprefix("check_") for name in CHECKS}
    if notebooks is None:
        return names
    called = set()
    for path in notebooks:
        text = "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
        called |= set(re.findall(r"\bcheck_(\w+)", text))
    return names & called


def grading_package(folder: Path, names: set[str] | None = None, cache: Path | None = None,
                    report: list | None = None, notebooks=None) -> Path:
    """A copy of the plmcourse package under `folder` for the sandbox, in which no complete
    implementation of the functions in `names` (default: every graded function) is left:

    * plmcourse/judging/ (cases, references, judges, catalogues of mistakes, the engine) is not in
      it, nor is the grading machinery (LEFT_OUT): grading/ holds each check's declaration, which
      hands its call to the judge;
    * in ref/, nn/ and data/, the functions named in `names` are stubbed; and anywhere in the
      copy, every function, method or class that passes one of their checks on its visible
      cases, whatever its name (find_implementations, a search by behaviour);
    * given the assignment's `notebooks`, every other top-level function, class and module-level
      value that those notebooks do not reach is stubbed too (exposure.reached; a value, such as a
      functools.partial or a lambda, becomes an object that raises): another notebook's graded function
      (02's cross-entropy while 05's causal LM loss is graded) is a stub unless this notebook's
      own code uses it, whatever arguments an answer would call it with. The search then needs to
      try only what the notebooks reach (for 14, about 50 runs in 5 s instead of 363 in 18 s).

    Mounted over the package inside the sandbox: an answer that calls one, under any name,
    or runs a copy of its code read from the package's files, fails like any wrong answer.
    An assignment is graded with its own exercises' names only (graded_functions of its
    notebooks); what earlier notebooks had students write stays usable where this notebook uses it.
    `cache`: a folder for the search's result (keyed by the package's files and `names`);
    `report`: a list that gets one line saying what the search found and how long it took, and
    one saying how much of the package the notebooks reach.
    """
    source = Path(plmcourse.__file__).resolve().parent
    names = graded_functions() if names is None else set(names)
    files = {_module_name(path.relative_to(source.parent).as_posix()): path.relative_to(source.parent).as_posix()
             for path in sorted(source.rglob("*.py"))}
    modules = exposure.index(source) if notebooks is not None else {}
    only = None
    if notebooks is not None:
        # Only what the notebooks reach needs searching: everything else becomes a stub below whatever it computes.
        by_name = {(module, name) for module, relative in files.items()
                   if relative.split("/")[1] in STUBBED_FOLDERS for name in names}
        present = kernel_modules(source)
        only = {(files[module], name)
                for module, name in exposure.reached(source, notebooks, by_name, modules, present)}
    search = find_implementations(source, names, cache, only=only)
    if report is not None:
        report.append(search.summary())
    own = {}  # file -> qualified names stubbed because they are (or behave as) this assignment's exercises
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source.parent).as_posix()  # plmcourse/ref/attention.py
        if "__pycache__" not in relative and not _is_left_out(relative):
            own[relative] = set(search.found.get(relative, ())) | (
                names if relative.split("/")[1] in STUBBED_FOLDERS else set())
    unused = {}
    if notebooks is not None:
        stubbed = {(_module_name(relative), name) for relative, found in own.items() for name in found}
        unused = exposure.unused(source, notebooks, stubbed, modules, present)
        if report is not None:
            copied = [_module_name(relative) for relative in own if _module_name(relative) in unused]
            left = sum(1 for module in copied for name in unused[module] if "[" not in name)  # not table entries
            every = sum(len(modules[module].defs) + len(modules[module].values) for module in copied)
            report.append(f"sandbox: the notebooks reach {every - left} of the package's {every} functions, "
                          f"classes and module-level values outside grading/; the other {left} are stubbed for "
                          "this assignment")
    target = stubbed_copy(source, Path(folder), own, unused)
    # The kernel's policy reads its allow-list of imports here (plmcourse.grading.policy.read_allowed).
    (target / "grading" / policy.ALLOWED_FILE).write_text(allowed_lists(), encoding="utf-8")
    compileall.compile_dir(str(target), quiet=1)  # the sandbox writes no bytecode: ship it
    return target


def stubbed_copy(source: Path, folder: Path, own: dict, unused: dict) -> Path:
    """folder/plmcourse: the package at `source` without LEFT_OUT, with the functions in `own` ({file: names}) stubbed
    as the answer's to compute and what `unused` names ({module: names}) stubbed as not used by the notebook."""
    target = Path(folder) / "plmcourse"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", *LEFT_OUT))
    for path in sorted(target.rglob("*.py")):
        relative = path.relative_to(target.parent).as_posix()
        module = _module_name(relative)
        text = path.read_text(encoding="utf-8")
        stubbed_text = stub_source(text, module, own.get(relative, set()))
        stubbed_text = stub_source(stubbed_text, module, unused.get(module, set()) - own.get(relative, set()),
                                   why=NOT_USED)
        if stubbed_text != text:
            path.write_text(stubbed_text, encoding="utf-8")
    return target


def kernel_modules(source: Path) -> set[str]:
    """The names of the modules of the package at `source` that the kernel's copy holds (not LEFT_OUT)."""
    return {_module_name(relative) for path in source.rglob("*.py")
            if not _is_left_out(relative := path.relative_to(source.parent).as_posix())}


@functools.lru_cache(maxsize=1)
def allowed_lists() -> str:
    """The kernel's allow-list (plmcourse.grading.policy.allowed) as JSON, once per grading process:
    reading every distribution's metadata takes a second or two."""
    return json.dumps(policy.allowed())


def _module_name(relative: str) -> str:
    parts = relative.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_left_out(relative: str) -> bool:
    parts = relative.split("/")
    return len(parts) > 1 and parts[1] in LEFT_OUT


# ----------------------------------------------------------------------------
# Stubs: source rewritten with the AST, line numbers kept where the code stays


# Why a stub raises: the assignment's own exercise (or something that behaves as one), or a part of the
# package this assignment's notebooks do not use.
COMPUTE_IT = "the answer must compute it itself"
NOT_USED = "this assignment's notebook does not use it, and an answer computes what it needs itself"


def stub_source(source: str, module: str, names: set[str], why: str = COMPUTE_IT) -> str:
    """`source` with the body of each function in `names` replaced by a raise, and each module-level value in
    `names` (`NAME = ...` at the top level) by an object that raises when it is used.

    A name is a qualified name: "softmax" (a top-level function), "LoRALinear.forward" (a
    method), "LoRALinear" (each method of the class), "make.<locals>.inner" (a function
    defined inside another), or one entry of a table, "POOLINGS['mean']" (exposure.entry_name:
    the key stays, its value becomes an object that raises). The docstring stays, and the lines
    keep their numbers (the body is padded with blank lines), so tracebacks through the rest of
    the module read as usual.
    """
    source = _stub_entries(source, module, {name for name in names if "[" in name}, why)
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    targets = [found for name in sorted(names) for found in _definitions(tree, name)]
    for node in tree.body:  # a module-level value (`WORD = re.compile(...)`): the whole statement goes
        name = exposure.value_name(node)
        if name in names:
            message = f"{module}.{name} is not available while grading: {why}"
            lines[node.lineno - 1:node.end_lineno] = (
                [f"{name} = {_unavailable(message)}\n"] + ["\n"] * (node.end_lineno - node.lineno))
    for qualname, node in targets:
        if any(other is not node and other.lineno <= node.lineno and node.end_lineno <= other.end_lineno
               for _, other in targets):
            continue  # inside another stubbed function: its lines are gone with it
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]  # keep the docstring
        if not body:
            continue
        first, last = body[0].lineno - 1, node.end_lineno  # 0-based start, exclusive end
        indent = " " * body[0].col_offset
        message = f"{module}.{qualname} is not available while grading: {why}"
        lines[first:last] = [f"{indent}raise RuntimeError({message!r})\n"] + ["\n"] * (last - first - 1)
    return "".join(lines)


def _stub_entries(source: str, module: str, entries: set[str], why: str) -> str:
    """`source` with the value of each table entry in `entries` ("TABLE['key']") replaced by an object that raises;
    the lines keep their numbers (a value over several lines leaves blank lines inside the braces)."""
    if not entries:
        return source
    lines = source.splitlines(keepends=True)
    edits = []  # (line, column, end line, end column, text), columns in characters
    for node in ast.parse(source).body:
        name = exposure.value_name(node)
        table = exposure.table_entries(node.value) if name is not None else None
        for key, value in (table or {}).items():
            if exposure.entry_name(name, key) in entries:
                message = f"{module}.{exposure.entry_name(name, key)} is not available while grading: {why}"
                start = len(lines[value.lineno - 1].encode()[:value.col_offset].decode())
                end = len(lines[value.end_lineno - 1].encode()[:value.end_col_offset].decode())
                edits.append((value.lineno - 1, start, value.end_lineno - 1, end,
                              _unavailable(message) + "\n" * (value.end_lineno - value.lineno)))
    for first, start, last, end, text in sorted(edits, reverse=True):  # from the end: earlier columns stay right
        lines[first:last + 1] = [lines[first][:start] + text + lines[last][end:]]
    return "".join(lines)


def _unavailable(message: str) -> str:
    """An expression, on one line and with no import, for a value that raises RuntimeError(message) when it is
    called, indexed, iterated, measured or tested, and AttributeError(message) when asked for an attribute (so
    that `getattr(value, name, default)` and `hasattr` still work on it)."""
    def raising(error):
        return f"lambda self, *args, **kwargs: (_ for _ in ()).throw({error}({message!r}))"

    uses = ("__call__", "__getitem__", "__iter__", "__len__", "__contains__", "__bool__")
    return (f"type('NotAvailableWhileGrading', (), {{**dict.fromkeys({uses!r}, {raising('RuntimeError')}), "
            f"'__getattr__': {raising('AttributeError')}}})()")


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _definitions(tree: ast.Module, qualname: str) -> list:
    """(qualified name, function node) for what `qualname` names in `tree`: one function, or each
    method of a class; [] when the module has no such definition."""
    scope, node = tree.body, None
    for part in qualname.split("."):
        if part == "<locals>":
            scope = [inner for inner in ast.walk(node) if inner is not node]  # anywhere inside the function
            continue
        node = next((n for n in scope if isinstance(n, _DEFS) and n.name == part), None)
        if node is None:
            return []
        scope = node.body
    if isinstance(node, ast.ClassDef):
        return [(f"{qualname}.{n.name}", n) for n in node.body if isinstance(n, _DEFS[:2])]
    return [(qualname, node)]


# ----------------------------------------------------------------------------
# The search: every function, method and class of the package, tried on each graded check


@dataclass
class Search:
    """What find_implementations found: {file: [qualified names]} that passed a graded check."""

    names: list
    found: dict = field(default_factory=dict)    # "plmcourse/ref/attention.py" -> ["softmax", ...]
    passed: list = field(default_factory=list)   # "plmcourse/ref/attention.py:softmax passes check_softmax"
    skipped: list = field(default_factory=list)  # the same, for candidates that ran out of time
    tried: int = 0
    seconds: float = 0.0
    cached: bool = False
    problem: str = ""

    def summary(self) -> str:
        """One line for the grading report."""
        if self.problem:
            return (f"sandbox: the search for complete implementations of {', '.join(self.names)} failed "
                    f"({self.problem}); only the functions of those names are stubbed")
        when = "earlier, result cached" if self.cached else "now"
        found = ", ".join(self.passed) or "none"
        line = (f"sandbox: searched the package for complete implementations of {', '.join(self.names)} "
                f"({self.tried} runs of a function, method or class on a check's visible cases, "
                f"{self.seconds:.1f} s, {when}); stubbed in the sandbox: {found}")
        if self.skipped:
            line += (f"; skipped, over {SEARCH_CPU_SECONDS:g} s of CPU or {SEARCH_SECONDS:g} s: "
                     f"{', '.join(self.skipped)}")
        return line


def find_implementations(package: Path, names, cache: Path | None = None,
                         seconds: float = SEARCH_SECONDS, only=None) -> Search:
    """Search the package in `package` (a plmcourse folder) for complete implementations of the
    graded functions in `names`, by behaviour: each function, method (on an instance made
    without __init__) and class of the modules the kernel's copy keeps, whose signature accepts
    every visible case of a check, runs that check's visible cases (run_check, without its
    seals); whatever passes computes the graded function, whatever it is called.

    It runs in a child process, each candidate in a fork of it given `seconds` (one that hangs
    is skipped, and the report says so). The result is kept in `cache`, if given, under a hash
    of the package's files, `names` and `only`, so that grading pays for it once.
    `only`: the (file, top-level name) pairs to try, a class with its methods (what an assignment's
    notebooks reach: whatever else there is will be a stub anyway); None: every one.
    """
    package = Path(package).resolve()
    names = sorted(set(names) & graded_functions())
    if not names:
        return Search(names)
    only = None if only is None else sorted(f"{file}:{name}" for file, name in only)
    path = Path(cache) / f"implementations-{_search_key(package, names, only)}.json" if cache else None
    if path is not None and path.is_file():
        with contextlib.suppress(ValueError, TypeError, OSError):
            return Search(**{**json.loads(path.read_text(encoding="utf-8")), "cached": True})
    result = _run_search(package, names, seconds, only)
    if path is not None and not result.problem:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(path.name + ".new")
        scratch.write_text(json.dumps(asdict(result)), encoding="utf-8")
        os.replace(scratch, path)
    return result


def _search_key(package: Path, names, only=None) -> str:
    digest = hashlib.sha256(f"{SEARCH_VERSION}\0{sys.version}\0{','.join(names)}\0{json.dumps(only)}".encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:24]


def _run_search(package: Path, names: list, seconds: float, only=None) -> Search:
    from plmcourse.autograde.cleanup import scratch_folder

    result = Search(names)
    started = time.monotonic()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from plmcourse.autograde.sandbox import search_worker; "
            "search_worker(sys.argv[1], sys.argv[2].split(','), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5])")
    read, write = os.pipe()
    with scratch_folder("plmcourse-search-") as scratch:
        # TMPDIR too: whatever a candidate writes (torch's compile cache, say) goes with the scratch folder.
        env = {**os.environ, "HOME": str(scratch), "TMPDIR": str(scratch), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
        for name in ("PLMCOURSE_JUDGE_FD", "PLMCOURSE_JUDGE_SOCKET"):
            env.pop(name, None)
        with open(scratch / "stderr.txt", "wb") as errors:
            worker = subprocess.Popen([sys.executable, "-P", "-c", code, str(package.parent), ",".join(names),
                                       str(seconds), str(write), json.dumps(only)], pass_fds=(write,), cwd=scratch, env=env,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors,
                                      preexec_fn=limit_memory_default)
            os.close(write)
            with os.fdopen(read, encoding="utf-8") as lines:
                messages = [json.loads(line) for line in lines]
            worker.wait()
        last = (scratch / "stderr.txt").read_text(errors="replace").strip().splitlines()
    finished = False
    for message in messages:
        if "pass" in message or "time" in message:
            file, qualname, check = message.get("pass") or message.get("time")
            label = f"{file}:{qualname} ({check})"
            if "pass" in message:
                result.found.setdefault(file, [])
                if qualname not in result.found[file]:
                    result.found[file].append(qualname)
                result.passed.append(label)
            else:
                result.skipped.append(label)
        elif "tried" in message:
            result.tried, finished = message["tried"], True
    if not finished:
        result.problem = f"the search stopped: {last[-1][:200] if last else worker.returncode}"
    result.seconds = round(time.monotonic() - started, 1)
    return result


def limit_memory_default() -> None:
    limit_memory(DEFAULT_MEMORY)


def search_worker(package_parent: str, names: list, seconds: float, fd: int, only: str = "null") -> None:
    """The search's child process (find_implementations): one JSON line per finding on `fd`.
    `only`: JSON, a list of "file:top-level name" to try, or null for every candidate."""
    import dataclasses

    import torch

    import plmcourse.judging as judging
    from plmcourse.grading.policy import preload

    # What a grading kernel starts with, started once here rather than in every fork: a plotting
    # function tried on a check's cases would import pyplot again in each (2-3 s a candidate).
    preload()

    package = Path(package_parent, "plmcourse")
    if Path(plmcourse.__file__).resolve().parent != package.resolve():
        raise RuntimeError(f"the search imported plmcourse from {plmcourse.__file__}, not {package}")
    only = json.loads(only)
    candidates = list(_candidates(package, None if only is None else set(only)))
    tried = 0
    with os.fdopen(fd, "w", buffering=1, encoding="utf-8") as out:
        for name in names:
            check = judging.spec(f"check_{name}")
            # The seals would fail the course's own functions at once: the search asks what computes
            # the function, not what the answer may call.
            unsealed = dataclasses.replace(check, seal=())
            cases = check.cases(False, torch.device("cpu")) if check.device else check.cases(False)
            # A check's first call pays for what it sets up once (torch's autograd and modules the reference
            # uses: 0.35 s for multi_head_attention against 3 ms after); made here, every fork starts warm. On one
            # thread (as _run_search starts this process): a fork of a process whose OpenMP pool has threads hangs
            # at its first parallel operation.
            torch.set_num_threads(1)
            _warm_up(unsealed)
            for file, qualname, candidate in candidates:
                if not _accepts(candidate, check, cases):
                    continue
                tried += 1
                outcome = _run_forked(unsealed, candidate, seconds)
                if outcome != "fail":
                    out.write(json.dumps({outcome: [file, qualname, check.name]}) + "\n")
        out.write(json.dumps({"tried": tried}) + "\n")


def _warm_up(check) -> None:
    """Run `check` once on an answer that returns nothing: it fails at its first case, having built what a check
    builds on its first call."""
    with contextlib.suppress(BaseException), contextlib.redirect_stdout(io.StringIO()):
        check(lambda *args, **kwargs: None)


def _candidates(package: Path, only: set | None = None):
    """(file, qualified name, callable) for each function, class and method defined in the modules
    of `package` that the kernel's copy keeps (not the judge's folder, not the machinery); with
    `only` ("file:top-level name"), those alone (a class with its methods)."""
    seen = set()
    files = None if only is None else {entry.rsplit(":", 1)[0] for entry in only}
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent).as_posix()
        if _is_left_out(relative) or (files is not None and relative not in files):
            continue
        try:
            module = importlib.import_module(_module_name(relative))
        except BaseException:  # a module that cannot load here cannot load in the sandbox either
            continue
        values = _module_values(path, relative)
        for name, value in list(vars(module).items()):
            # A module-level value that can be called (a functools.partial, a lambda, an instance with __call__)
            # is tried under its own name, which is what a stub replaces; a def or class as itself.
            found = ([(name, value)] if callable(value) else []) if name in values else \
                _callables(value, module.__name__, path)
            for qualname, candidate in found:
                if only is not None and f"{relative}:{qualname.split('.')[0]}" not in only:
                    continue
                if (relative, qualname) not in seen:
                    seen.add((relative, qualname))
                    yield relative, qualname, candidate


def _module_values(path: Path, relative: str) -> set[str]:
    """The module-level values of the module at `path` (one name assigned once at its top level, as exposure
    reads them), or none if it cannot be read."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return set()
    return exposure.module_values(_module_name(relative), tree, path.name == "__init__.py")


def _callables(value, module_name: str, path: Path):
    """The function `value` (if defined in `path`), or the class (if defined in the module) and
    its methods: static and class methods as they are, the others bound to an instance made
    without __init__ (a method that computes without its object's state still runs)."""
    if isinstance(value, type):
        if value.__module__ != module_name:
            return
        yield value.__qualname__, value
        instance = None
        for name, member in list(vars(value).items()):
            if isinstance(member, (staticmethod, classmethod)):
                yield f"{value.__qualname__}.{name}", getattr(value, name)
            elif inspect.isfunction(member) and _defined_in(member, path):
                if instance is None:
                    try:
                        instance = value.__new__(value)
                    except BaseException:
                        instance = False
                if instance is not False:
                    yield member.__qualname__, member.__get__(instance)
        return
    if callable(value) and _defined_in(value, path):
        yield inspect.unwrap(value).__code__.co_qualname, value


def _defined_in(value, path: Path) -> bool:
    try:
        code = getattr(inspect.unwrap(value), "__code__", None)
    except ValueError:  # a __wrapped__ chain that loops
        return False
    return code is not None and os.path.realpath(code.co_filename) == os.path.realpath(path)


def _accepts(candidate, check, cases) -> bool:
    """Whether `candidate`'s signature takes every case's arguments (a driven check's: what stands for them)."""
    try:
        signature = inspect.signature(candidate)
    except (TypeError, ValueError):
        return False
    for case in cases:
        args, kwargs = check.signature_args(case) if check.signature_args else (case.args, case.kwargs)
        try:
            signature.bind(*args, **kwargs)
        except TypeError:
            return False
    return True


def _run_forked(check, candidate, seconds: float, cpu_seconds: float = SEARCH_CPU_SECONDS) -> str:
    """"pass" if `candidate` passes `check` on its visible cases, "fail", or "time" if it is still
    running after `seconds` or `cpu_seconds` of CPU; in a fork, so that what one candidate changes
    (a default dtype, a seed, a memory limit) is gone for the next."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                check(candidate)
            status = 0
        except BaseException:
            pass
        os._exit(status)
    started = time.monotonic()
    deadline, next_look = started + seconds, started + cpu_seconds  # CPU time never runs ahead of the wall clock
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "pass" if os.waitstatus_to_exitcode(status) == 0 else "fail"
        now = time.monotonic()
        over = now > deadline
        if not over and now > next_look:
            over, next_look = _cpu_seconds(pid) > cpu_seconds, now + 0.05
        if over:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "time"
        time.sleep(0.002)


def _cpu_seconds(pid: int) -> float:
    """The CPU time a running process has used, its threads' included (0 where /proc cannot tell)."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0  # utime + stime


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command's name (the state is [0]), or None: no such process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields if len(fields) > 19 and all(f.lstrip("-").isdigit() for f in fields[11:20]) else None


def limit_memory(memory: int) -> None:
    """Cap this process's (and its children's) data segment: a bigger allocation raises MemoryError."""
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))


def limit_file_size(size: int = MAX_FILE_SIZE) -> None:
    """Cap the size of any file this process (and its children) writes; no core files.

    Python ignores SIGXFSZ, so a bigger write fails in the cell with OSError (EFBIG,
    "File too large") and the kernel goes on.
    """
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def limit_resources(memory: int = DEFAULT_MEMORY, file_size: int = MAX_FILE_SIZE) -> None:
    """The sandbox's limits, for a preexec_fn or before exec: memory (limit_memory), file size, CPU time."""
    limit_memory(memory)
    limit_file_size(file_size)
    # A kernel's CPU time in all, its threads' included: past it the kernel is stopped (SIGXCPU), which
    # costs that notebook's remaining cells only. A notebook graded whole takes well under 4 minutes of it.
    resource.setrlimit(resource.RLIMIT_CPU, (MAX_CPU_SECONDS, MAX_CPU_SECONDS))
    # Open files: each pipe, socket or eventfd holds kernel memory that no other limit counts.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    most = MAX_OPEN_FILES if hard == resource.RLIM_INFINITY else min(MAX_OPEN_FILES, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (most, most))


def connect_judge(notebook_dir: Path) -> int | None:
    """Connect to the judge named by PLMCOURSE_JUDGE_SOCKET, say which notebook this kernel is
    for, and return the socket's file descriptor (inheritable, for the kernel); None without a judge.

    This runs before the kernel exists, so the header is the launcher's word, not the student's.
    """
    path = os.environ.get("PLMCOURSE_JUDGE_SOCKET")
    if not path:
        return None
    from plmcourse.grading import wire  # framing only: no NumPy or torch is loaded here

    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    wire.send(connection, {"notebook_dir": str(notebook_dir)})
    fd = connection.detach()
    os.set_inheritable(fd, True)
    return fd


def launch(connection_file: str, course_root: str, memory: int, kernel_args: list[str],
           use_sandbox: bool = True, package: str | None = None) -> None:
    """Start the kernel, sandboxed (unless use_sandbox=False) and connected to the judge when
    there is one, and end with its exit status.

    Unsandboxed, this process becomes the kernel. Sandboxed, it stays bwrap's parent
    (run_sandboxed): it links the host's socket names to the sockets inside the sandbox, passes
    signals on, and exits as bwrap does."""
    notebook_dir = Path.cwd().resolve()
    course = Path(course_root).resolve()
    if course not in notebook_dir.parents:
        sys.exit(f"sandbox: refusing to grade {notebook_dir}, which is not inside the course {course}")
    connection = Path(connection_file).resolve()
    socket_dir = None
    info = json.loads(connection.read_text())
    if info.get("transport") == "ipc":
        # Sockets are files named "<ip>-<port>": their folder must not be one that holds the
        # course (the links made there would undo the hiding).
        socket_dir = Path(info["ip"]).resolve().parent
        if not Path(info["ip"]).is_absolute() or socket_dir == course or socket_dir in course.parents:
            sys.exit(f"sandbox: the kernel's socket path {info['ip']!r} must be absolute and outside "
                     f"the course; run through `plmcourse grade autograde`")
    judge_fd = connect_judge(notebook_dir)
    env = {} if judge_fd is None else {"PLMCOURSE_JUDGE_FD": str(judge_fd)}
    # -P: the kernel's working folder is not put first on sys.path, so nothing planted there (a
    # plmcourse/ package) is what `-m` runs. The module is ipykernel's launcher with the grading
    # policy installed before the first cell (plmcourse.grading.policy).
    kernel = [sys.executable, "-P", "-m", "plmcourse.grading.policy", "-f", str(connection), *kernel_args]
    if not use_sandbox:
        os.environ.pop("PLMCOURSE_JUDGE_SOCKET", None)
        os.execve(sys.executable, kernel, {**os.environ, **env})
    limit_resources(memory)
    cmd = bwrap_command(kernel, notebook_dir, course, connection, socket_dir, env=env,
                        package=Path(package) if package else None)
    sockets = socket_paths(info) if socket_dir is not None else []
    box = KernelCgroup.make(memory + CGROUP_MARGIN, CGROUP_TASKS)
    watched = writable_folders(notebook_dir, socket_dir)
    sys.exit(run_sandboxed(cmd, sockets, [] if judge_fd is None else [judge_fd], box=box, watched=watched,
                           on_stop=lambda sentence: tell_judge_stopped(notebook_dir, sentence)))


CHANNELS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def socket_paths(info: dict) -> list[str]:
    """The Unix sockets an ipc connection file names: "<ip>-<port>" for each channel."""
    return [f"{info['ip']}-{info[channel]}" for channel in CHANNELS if channel in info]


def run_sandboxed(cmd: list[str], sockets: list[str], pass_fds: list[int], box=None, watched=(),
                  on_stop=None) -> int:
    """Run the bwrap command `cmd` as a child and return its exit status (128 + the signal that
    ended it), with a link on the host from each of `sockets` to the same path in the sandbox.

    The kernel makes its sockets in its own capped tmpfs; the host reaches them through
    /proc/<pid>/root of the sandbox's first process, whose pid bwrap tells on --info-fd. So the
    host's socket folder holds only these links, made here, outside the sandbox: nothing the
    kernel writes reaches the host's disk. `pass_fds` (the judge's socket) go to the kernel
    and are closed here. SIGTERM, SIGINT, SIGHUP and SIGQUIT are passed on to bwrap.

    `box` (a KernelCgroup) takes the child before it runs bwrap. The folders `watched` (paths inside the
    sandbox) are counted every WATCH_SECONDS: past MAX_FILES in one of them the sandbox is stopped and
    `on_stop` gets one sentence saying why (bubblewrap's folders have a size, but no cap on their number
    of files, each of which holds host kernel memory).
    """
    info_read, info_write = os.pipe()
    child = subprocess.Popen([cmd[0], "--info-fd", str(info_write), *cmd[1:]],
                             pass_fds=(info_write, *pass_fds), preexec_fn=None if box is None else box.enter)
    os.close(info_write)
    for fd in pass_fds:
        os.close(fd)  # the kernel holds the judge's socket now; the judge must see it close with it
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, lambda number, frame: child.send_signal(number))
    made = []
    try:
        pid = _sandbox_pid(info_read)
        for path in sockets if pid is not None else []:
            if os.path.islink(path):
                os.unlink(path)  # a link left by an earlier kernel that was killed
            os.symlink(f"/proc/{pid}/root{path}", path)
            made.append(path)
        watch = None
        if pid is not None and watched:
            # Held here, while the sandbox surely lives, not when the thread gets to run.
            watch = threading.Thread(target=watch_files, args=(child, HeldProcess(pid), watched, on_stop), daemon=True)
            watch.start()
        status = child.wait()
        if watch is not None:
            watch.join(WATCH_JOIN_SECONDS)  # a watch that stopped the sandbox says why before the launcher exits
    finally:
        for path in made:
            with contextlib.suppress(OSError):
                os.unlink(path)
        if box is not None:
            if box.out_of_memory() and on_stop is not None:
                with contextlib.suppress(Exception):
                    on_stop(f"{STOPPED}: it held more than {box.memory / 1024 ** 3:.1f} GiB "
                            f"of memory in all (shared memory, files in its folders and kernel buffers included)")
            box.remove()
    return 128 - status if status < 0 else status


def writable_folders(notebook_dir: Path, socket_dir: Path | None = None) -> list[str]:
    """Every folder bwrap_command mounts writable inside the sandbox (each a tmpfs of its own): the launcher
    watches all of them, the sockets' folder included (sockets take no room, but empty files would)."""
    return ["/tmp", "/dev/shm", str(notebook_dir), *([str(socket_dir)] if socket_dir is not None else [])]


def files_in(folder: str, outside: str) -> int | None:
    """How many files, folders and links the file system at `folder` holds (its used inodes), or None while
    it is not yet a file system of its own: the same device as `outside` (the host's own folder of that name,
    as /proc/<pid>/root shows before bubblewrap has moved the sandbox into its new root), or unreadable.

    One opened folder answers both questions: while bubblewrap builds the sandbox, the path can name one
    file system at a stat and another at the statvfs after it (a new tmpfs's device with the host disk's
    million files: it once stopped an honest kernel at its start)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        device, found = os.fstat(fd).st_dev, os.fstatvfs(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        if os.stat(outside).st_dev == device:
            return None
    return max(0, found.f_files - found.f_ffree)


def watch_files(child, held, watched, on_stop=None, most: int = MAX_FILES, every: float = WATCH_SECONDS):
    """Stop the sandbox (its first process, then bwrap) when one of the `watched` folders holds more than
    `most` files; tell `on_stop` why. Each watched folder is a tmpfs of its own, so its used inodes are
    what is in it (the kernel's own few files included).

    The sandbox's first process, `held`, is a HeldProcess, not a number: once it has
    exited, its pid can be another process's (pids wrap at 32,768 on many machines), perhaps a kernel of
    another submission whose /tmp is full. A count is believed only if the process was still alive after
    it was read, and the kill goes to that process alone."""
    folders = [(f"/proc/{held.pid}/root{folder}", folder) for folder in watched]
    try:
        while child.poll() is None:
            counts = [(files_in(inside, folder) or 0, folder) for inside, folder in folders]
            if not held.alive():
                return
            over = [folder for count, folder in counts if count > most]
            if over:
                held.kill()  # the sandbox's init: the whole PID namespace goes
                child.kill()
                if on_stop is not None:
                    with contextlib.suppress(Exception):
                        on_stop(f"{STOPPED}: it made more than {most:,} files in {over[0]} "
                                f"(a grading kernel keeps at most {most:,} files, folders and links in each "
                                f"writable folder)")
                return
            time.sleep(every)
    finally:
        held.close()


class HeldProcess:
    """One running process, known by more than its pid: a pidfd where Linux has them (5.3 and later), else
    its pid and start time (a later process with the same pid starts at a later clock tick, of 10 ms)."""

    def __init__(self, pid: int):
        self.pid, self.started = pid, _start_time(pid)
        try:
            self.fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.fd = None

    def alive(self) -> bool:
        if self.fd is not None:  # a pidfd reads as ready once its process exits; poll, as select cannot take an fd
            ready = select.poll()  # numbered 1024 or more (a long-lived process holds many)
            ready.register(self.fd, select.POLLIN)
            return not ready.poll(0)
        return self.started is not None and _start_time(self.pid) == self.started

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, signal.SIGKILL)
            elif self.alive():
                os.kill(self.pid, signal.SIGKILL)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot), or None where there is no such process."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def tell_judge_stopped(notebook_dir: Path, sentence: str) -> None:
    """Tell the judge, on a connection of the launcher's own (the kernel has no way to the judge's socket),
    that this notebook's kernel was stopped and why: a flag for a person, in the launcher's words."""
    path = os.environ.get("PLMCOURSE_JUDGE_SOCKET")
    if not path:
        return
    from plmcourse.grading import wire

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(10)
        connection.connect(path)
        wire.send(connection, {"notebook_dir": str(notebook_dir), "stopped": sentence})


class KernelCgroup:
    """A memory and tasks cgroup for one grading kernel, where this process may make one (cgroup v1's
    memory and pids hierarchies, writable: a grader run as root, as on CI). Linux counts in it what no
    rlimit does: shared memory and tmpfs pages, pipe and socket buffers, inodes and other kernel objects;
    past its memory limit the kernel is stopped by the OOM killer, which touches nothing outside it.

    `make` returns None where no such cgroup can be made (a grader that is not root, cgroup v2 without a
    delegated subtree): then the rlimits, the folders' caps and the policy hold, as course/INSTRUCTORS.md says.
    """

    ROOT = Path("/sys/fs/cgroup")

    def __init__(self, folders, memory: int = 0):
        self.folders, self.memory = folders, memory

    PREFIX = "plmcourse-kernel-"

    @classmethod
    def make(cls, memory: int, tasks: int):
        made = []
        try:
            for controller, limits in (("memory", {"memory.limit_in_bytes": memory,
                                                   "memory.memsw.limit_in_bytes": memory}),
                                       ("pids", {"pids.max": tasks})):
                folder = cls._own(controller)
                if folder is None:
                    raise OSError(f"no writable cgroup v1 {controller} hierarchy")
                cls.sweep(folder)
                folder = folder / f"{cls.PREFIX}{os.getpid()}-{os.urandom(4).hex()}"
                folder.mkdir()
                made.append(folder)
                for name, value in limits.items():
                    if (folder / name).exists():  # memsw exists only where swap is accounted
                        (folder / name).write_text(str(value))
        except OSError:
            cls(made).remove()
            return None
        return cls(made, memory)

    @classmethod
    def sweep(cls, folder: Path) -> None:
        """Remove the kernel cgroups left in `folder` by launchers that are gone. nbgrader ends a kernel's
        launcher with SIGKILL ("immediate" shutdown), so its own `remove` often never runs. A launcher still
        alive keeps its cgroup (another one may be setting up, still empty); and a cgroup that still has tasks
        refuses rmdir anyway."""
        for left in folder.glob(f"{cls.PREFIX}*"):
            try:
                os.kill(int(left.name[len(cls.PREFIX):].split("-")[0]), 0)
                continue  # its launcher is alive
            except (ValueError, ProcessLookupError):
                pass
            except PermissionError:  # alive, another user's
                continue
            with contextlib.suppress(OSError):
                left.rmdir()

    @classmethod
    def sweep_own(cls) -> None:
        """Sweep this process's own cgroups (the grader's, where its kernels' launchers made theirs)."""
        for controller in ("memory", "pids"):
            folder = cls._own(controller)
            if folder is not None:
                cls.sweep(folder)

    @classmethod
    def _own(cls, controller: str) -> Path | None:
        """This process's cgroup folder in the v1 `controller` hierarchy, if it is there and writable."""
        mount = cls.ROOT / controller
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                folder = mount / path.lstrip("/")
                return folder if folder.is_dir() and os.access(folder, os.W_OK) else None
        return None

    def enter(self) -> None:
        """Move the calling process into the cgroup (a preexec_fn: bwrap and the kernel are born inside)."""
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    def out_of_memory(self) -> bool:
        """Whether the OOM killer stopped a task of this cgroup."""
        for folder in self.folders:
            with contextlib.suppress(OSError, ValueError):
                for line in (folder / "memory.oom_control").read_text().splitlines():
                    if line.startswith("oom_kill ") and int(line.split()[1]) > 0:
                        return True
        return False

    def remove(self) -> None:
        """Remove the cgroup once its tasks are gone (the last ones may take a moment to be reaped)."""
        for folder in reversed(self.folders):
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


def _sandbox_pid(fd: int) -> int | None:
    """The host pid of the sandbox's first process, from bwrap's --info-fd JSON (None if bwrap
    failed before writing it)."""
    data = b""
    with os.fdopen(fd, "rb") as info:
        while chunk := info.read(4096):
            data += chunk
            if len(data) > 65536:
                break
    try:
        pid = json.loads(data)["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def install_kernelspec(jupyter_path: Path, course_root: Path, memory: int = DEFAULT_MEMORY,
                       use_sandbox: bool = True, package: Path | None = None) -> Path:
    """Write kernels/python3/kernel.json under `jupyter_path`; put that first on JUPYTER_PATH to use it."""
    spec_dir = jupyter_path / "kernels" / "python3"
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        # -P: the launcher starts in the student's autograded folder and runs outside the
        # sandbox; Python must not look for modules there.
        "argv": [sys.executable, "-P", "-m", "plmcourse.autograde.sandbox", "--course", str(course_root),
                 "--memory", str(memory), *([] if use_sandbox else ["--no-sandbox"]),
                 *(["--package", str(package)] if package else []), "{connection_file}"],
        "display_name": "Python 3 (plmcourse grading sandbox)",
        "language": "python",
        # Interrupts travel as a message: a signal to bwrap would not reach the kernel inside.
        "interrupt_mode": "message",
        "env": {"OMP_WAIT_POLICY": "PASSIVE"},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
    return spec_dir


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="start an IPython kernel in the grading sandbox")
    parser.add_argument("--course", required=True, help="the nbgrader course root to hide")
    parser.add_argument("--memory", type=int, default=DEFAULT_MEMORY, help="data-segment limit in bytes")
    parser.add_argument("--no-sandbox", action="store_true", help="no bubblewrap (the judge still decides)")
    parser.add_argument("--package", help="a grading_package() copy to mount over plmcourse")
    parser.add_argument("connection_file")
    args, kernel_args = parser.parse_known_args(argv)  # the rest (e.g. from nbgrader) goes to the kernel
    launch(args.connection_file, args.course, args.memory, kernel_args, use_sandbox=not args.no_sandbox,
           package=args.package)


if __name__ == "__main__":
    main()
