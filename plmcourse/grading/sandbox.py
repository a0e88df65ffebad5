"""A Jupyter kernel that runs student code inside a bubblewrap sandbox, for autograding.

`plmcourse grade autograde` installs a kernelspec named `python3` (the name every
course notebook uses) in a scratch Jupyter path that nbgrader finds first. Its
command is this module, which starts the ordinary IPython kernel under `bwrap`:

* no network (a new, empty network namespace; the kernel talks to nbgrader over
  Unix sockets, `KernelManager.transport = "ipc"`);
* the course directory is replaced by an empty one, so `source/` (solutions and
  hidden tests), `gradebook.db` and other students' folders are not there to read;
  only the notebook's own folder is mounted, writable;
* home directories, /tmp and the repository that holds the course are hidden in the
  same way; the Python installation and the plmcourse package are mounted read-only;
* a memory ceiling (RLIMIT_DATA): an allocation above it fails inside the cell that
  made it (MemoryError), and the kernel and the rest of the notebook go on;
* its own PID namespace and session, and it dies with nbgrader.

What it does not do is listed in course/INSTRUCTORS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import plmcourse

DEFAULT_MEMORY = 4 * 1024 ** 3  # bytes of data segment; the notebooks peak well under 1 GiB
HIDDEN_ROOTS = ("/home", "/root", "/tmp", "/var/tmp", "/srv", "/mnt", "/media", "/work", "/run/user")


def available() -> str | None:
    """None when bwrap can start a sandbox here, else one sentence saying why not."""
    if sys.platform != "linux":
        return "the grading sandbox needs Linux (bubblewrap)"
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--unshare-net", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"bwrap cannot create a sandbox here: {probe.stderr.decode().strip()}"
    return None


def readonly_paths() -> list[Path]:
    """What the kernel needs to see: the interpreter, its libraries, and the plmcourse package."""
    package = Path(plmcourse.__file__).resolve().parent
    paths = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), package,
             Path(sys.executable).resolve().parent}
    return sorted(paths)


def bwrap_command(kernel_argv: list[str], notebook_dir: Path, course_root: Path,
                  connection_file: Path | None = None, socket_dir: Path | None = None) -> list[str]:
    """bwrap arguments that run `kernel_argv` with only `notebook_dir` (and the kernel's sockets) shared."""
    cmd = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
           "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
           "--die-with-parent", "--new-session"]
    repo = Path(plmcourse.__file__).resolve().parent.parent
    for hidden in (*HIDDEN_ROOTS, str(course_root), str(repo)):
        if os.path.isdir(hidden):
            cmd += ["--tmpfs", hidden]
    for path in readonly_paths():
        cmd += ["--ro-bind", str(path), str(path)]
    cmd += ["--bind", str(notebook_dir), str(notebook_dir)]
    if connection_file is not None:
        cmd += ["--ro-bind", str(connection_file), str(connection_file)]
    if socket_dir is not None:
        cmd += ["--bind", str(socket_dir), str(socket_dir)]
    cmd += ["--chdir", str(notebook_dir),
            "--setenv", "HOME", "/tmp", "--setenv", "MPLCONFIGDIR", "/tmp/matplotlib",
            "--setenv", "OMP_WAIT_POLICY", "PASSIVE", "--setenv", "PYTHONNOUSERSITE", "1",
            "--setenv", "PLMCOURSE_SANDBOX", "1",
            # Inside a PID namespace the kernel's parent is bwrap's init (pid 1); ipykernel would
            # take that for "nbgrader has exited" and quit. --die-with-parent does that job here.
            "--unsetenv", "JPY_PARENT_PID"]
    return cmd + ["--", *kernel_argv]


def limit_memory(memory: int) -> None:
    """Cap this process's (and its children's) data segment: a bigger allocation raises MemoryError."""
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))


def launch(connection_file: str, course_root: str, memory: int, kernel_args: list[str]) -> None:
    """Replace this process by the sandboxed kernel (so signals and exit codes pass straight through)."""
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
    limit_memory(memory)
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", str(connection), *kernel_args]
    cmd = bwrap_command(kernel, notebook_dir, course, connection, socket_dir)
    os.execvp(cmd[0], cmd)


def install_kernelspec(jupyter_path: Path, course_root: Path, memory: int = DEFAULT_MEMORY) -> Path:
    """Write kernels/python3/kernel.json under `jupyter_path`; put that first on JUPYTER_PATH to use it."""
    spec_dir = jupyter_path / "kernels" / "python3"
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-m", "plmcourse.grading.sandbox", "--course", str(course_root),
                 "--memory", str(memory), "{connection_file}"],
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
    parser.add_argument("connection_file")
    args, kernel_args = parser.parse_known_args(argv)  # the rest (e.g. from nbgrader) goes to the kernel
    launch(args.connection_file, args.course, args.memory, kernel_args)


if __name__ == "__main__":
    main()
