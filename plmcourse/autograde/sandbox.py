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
* the kernel's working folder is a fresh, private, size-capped tmpfs at the notebook's
  path (as are /tmp and /dev/shm): what student code writes is gone with the kernel and
  never reaches autograded/ or feedback/, and the notebook nbgrader is executing (which
  then holds the hidden tests) is not there to read;
* an empty environment but for what grading needs (`bwrap_command`), no capabilities;
* a memory ceiling (RLIMIT_DATA): an allocation above it fails inside the cell that
  made it (MemoryError), and the kernel and the rest of the notebook go on; likewise a
  file-size ceiling (RLIMIT_FSIZE, `limit_resources`): a bigger write fails with OSError;
* its own PID namespace and session, and it dies with nbgrader.

What it does not do is listed in course/INSTRUCTORS.md.
"""

from __future__ import annotations

import argparse
import ast
import compileall
import functools
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import plmcourse

DEFAULT_MEMORY = 4 * 1024 ** 3  # bytes of data segment; the notebooks peak well under 1 GiB
# The empty root gets these of the host's, read-only, where they exist (the loader, the C
# library, the interpreter's shared libraries, certificates, time zone, user names).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
ETC_PATHS = ("/etc/ld.so.cache", "/etc/ssl", "/etc/ca-certificates", "/etc/localtime", "/etc/nsswitch.conf",
             "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/alternatives", "/etc/fonts")
# Of the grader's environment only these course settings go in (plmcourse.grading.verify reads them).
PASSED_ENV = ("PLMCOURSE_CELL_SECONDS", "PLMCOURSE_RUN_DEMOS")
MAX_FILE_SIZE = 256 * 1024 ** 2   # RLIMIT_FSIZE: a bigger write fails in the cell (OSError EFBIG)
TMPFS_SIZE = 512 * 1024 ** 2      # each writable folder inside (/tmp, /dev/shm, the working folder)


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
    """What the kernel needs to see: the interpreter, its libraries, and the plmcourse package."""
    package = Path(plmcourse.__file__).resolve().parent
    paths = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), package,
             Path(sys.executable).resolve().parent}
    return sorted(paths)


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
        cmd += ["--bind", str(socket_dir), str(socket_dir)]
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
# The package the kernel sees: the course's own solutions to the exercises are not in it


STUBBED_FOLDERS = ("ref", "nn", "data")


def graded_functions(notebooks=None) -> set[str]:
    """The names of the functions the course grades (check_softmax grades `softmax`, ...): all of
    them, or those whose checks the given notebooks call (one assignment's exercises)."""
    import nbformat  # here, not at the top: the kernel's launcher imports this module too

    from plmcourse.grading import _CHECKS

    names = {name.removeprefix("check_") for name in _CHECKS}
    if notebooks is None:
        return names
    called = set()
    for path in notebooks:
        text = "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
        called |= set(re.findall(r"\bcheck_(\w+)", text))
    return names & called


def stub_source(source: str, module: str, names: set[str]) -> str:
    """`source` with the body of each top-level function in `names` replaced by a raise.

    The docstring stays, and the lines keep their numbers (the body is padded with blank
    lines), so tracebacks through the rest of the module read as usual.
    """
    lines = source.splitlines(keepends=True)
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef) or node.name not in names:
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]  # keep the docstring
        if not body:
            continue
        first, last = body[0].lineno - 1, node.end_lineno  # 0-based start, exclusive end
        indent = " " * body[0].col_offset
        message = (f"{module}.{node.name} is not available while grading: the answer must "
                   f"compute it itself")
        lines[first:last] = [f"{indent}raise RuntimeError({message!r})\n"] + ["\n"] * (last - first - 1)
    return "".join(lines)


def grading_package(folder: Path, names: set[str] | None = None) -> Path:
    """A copy of the plmcourse package under `folder` for the sandbox, in which the course's own
    versions of the functions in `names` (default: every graded function; in ref/, nn/ and
    data/) are absent: each raises instead.

    Mounted over the package inside the sandbox: an answer that calls one, under any name,
    or runs a copy of its code read from the package's files, fails like any wrong answer.
    An assignment is graded with its own exercises' names only (graded_functions of its
    notebooks), so that it may build on what earlier notebooks had students write.
    """
    source = Path(plmcourse.__file__).resolve().parent
    target = Path(folder) / "plmcourse"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    names = graded_functions() if names is None else names
    for sub in STUBBED_FOLDERS:
        for path in sorted((target / sub).glob("*.py")):
            text = path.read_text(encoding="utf-8")
            module = "plmcourse." + sub + ("" if path.stem == "__init__" else f".{path.stem}")
            stubbed = stub_source(text, module, names)
            if stubbed != text:
                path.write_text(stubbed, encoding="utf-8")
    compileall.compile_dir(str(target), quiet=1)  # the sandbox writes no bytecode: ship it
    return target


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
    """The sandbox's limits, for a preexec_fn or before exec: memory (limit_memory) and file size."""
    limit_memory(memory)
    limit_file_size(file_size)


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
    """Replace this process by the kernel (so signals and exit codes pass straight through):
    sandboxed, unless use_sandbox=False, and connected to the judge when there is one."""
    notebook_dir = Path.cwd().resolve()
    course = Path(course_root).resolve()
    if course not in notebook_dir.parents:
        sys.exit(f"sandbox: refusing to grade {notebook_dir}, which is not inside the course {course}")
    connection = Path(connection_file).resolve()
    socket_dir = None
    info = json.loads(connection.read_text())
    if info.get("transport") == "ipc":
        # Sockets are files named "<ip>-<port>": their folder must be shared, and must not be
        # one that holds the course (sharing it would undo the hiding).
        socket_dir = Path(info["ip"]).resolve().parent
        if not Path(info["ip"]).is_absolute() or socket_dir == course or socket_dir in course.parents:
            sys.exit(f"sandbox: the kernel's socket path {info['ip']!r} must be absolute and outside "
                     f"the course; run through `plmcourse grade autograde`")
    judge_fd = connect_judge(notebook_dir)
    env = {} if judge_fd is None else {"PLMCOURSE_JUDGE_FD": str(judge_fd)}
    # -P: the kernel's working folder is not put first on sys.path, so nothing planted
    # there (an ipykernel_launcher.py, a plmcourse/ package) is what `-m` runs.
    kernel = [sys.executable, "-P", "-m", "ipykernel_launcher", "-f", str(connection), *kernel_args]
    if not use_sandbox:
        os.environ.pop("PLMCOURSE_JUDGE_SOCKET", None)
        os.execve(sys.executable, kernel, {**os.environ, **env})
    limit_resources(memory)
    cmd = bwrap_command(kernel, notebook_dir, course, connection, socket_dir, env=env,
                        package=Path(package) if package else None)
    os.execvp(cmd[0], cmd)


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
