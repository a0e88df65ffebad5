"""plmcourse.judging.policy: the grading kernel's audit hook refuses processes, ctypes and imports outside
the allow-list, with one sentence each, tells the judge, and leaves what the notebooks need alone; its
seccomp filter refuses processes the audit events do not see.

These run the hook in a child process (an audit hook cannot be removed, so never in the test process);
the graded notebooks of tests/test_grading_every_assignment.py run under it in the real sandbox.
"""

import json
import subprocess
import sys
import textwrap
import tomllib

import pytest

from conftest import ROOT
from plmcourse.grading import policy

HOOKED = """
import json, os, sys, tempfile, threading
import numpy as np
from plmcourse.grading import policy

work = tempfile.mkdtemp()
os.chdir(work)
told = []
lists = policy.allowed()
hook = policy.Policy(lists["modules"], ("/dev/shm", work), told.append, entries=lists["entries"],
                     sites=__import__("site").getsitepackages())
sys.path[:] = [entry for entry in sys.path if entry and not hook.writable_folder(entry)]
results = {"seccomp": policy.install_seccomp()}
sys.addaudithook(hook)

def attempt(name, action):
    try:
        value = action()
        results[name] = "ran" if value is None or value is not False else "false"
    except BaseException as error:
        results[name] = f"{type(error).__name__}: {error}"
"""


def run_hooked(body):
    done = subprocess.run([sys.executable, "-c", HOOKED + textwrap.dedent(body) +
                           "\nprint(json.dumps({'results': results, 'told': told}))"],
                          capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_runtime_packages_are_pyprojects_dependencies():
    with open(ROOT / "pyproject.toml", "rb") as f:
        dependencies = tomllib.load(f)["project"]["dependencies"]
    assert sorted(d.split(">")[0].split("=")[0].strip() for d in dependencies) == sorted(policy.RUNTIME)


def test_the_allow_list_holds_the_runtime_and_the_kernel_but_no_extra():
    lists = policy.allowed()
    allowed = set(lists["modules"])
    assert {"numpy", "torch", "matplotlib", "ipywidgets", "tqdm", "safetensors", "plmcourse", "ipykernel",
            "IPython", "zmq", "json", "ctypes", "sympy"} <= allowed
    # the test, bench and course extras, and what only they bring
    assert not {"transformers", "tokenizers", "pytest", "xdist", "nbval", "selenium", "nbgrader", "jupyterlab",
                "nbformat", "nbclient", "nh3", "gensim", "scipy", "sklearn", "cffi", "huggingface_hub"} & allowed


def test_processes_and_native_code_are_refused_with_one_sentence_and_told_once():
    seen = run_hooked("""
        import ctypes, multiprocessing, multiprocessing.util, subprocess
        attempt("subprocess", lambda: subprocess.run(["true"]))
        attempt("subprocess again", lambda: subprocess.run(["true"]))
        attempt("popen", lambda: os.popen("true").read())
        attempt("system", lambda: os.system("true"))
        attempt("fork", lambda: os.fork())
        attempt("spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}))
        attempt("execv", lambda: os.execv("/bin/true", ["true"]))
        attempt("ctypes", lambda: ctypes.CDLL(None).getpid())
        attempt("ctypes memory", lambda: ctypes.string_at(id(results), 8))
        # No audit event on this route (multiprocessing's spawn calls _posixsubprocess.fork_exec): the
        # seccomp filter refuses the process below Python.
        attempt("pool", lambda: multiprocessing.get_context("spawn").Pool(1))
        attempt("fork_exec", lambda: multiprocessing.util.spawnv_passfds(b"/bin/true", [b"true"], []))
        attempt("thread", lambda: threading.Thread(target=lambda: None).start())
        # Memory the sandbox's caps would not count: a memory file, SysV shared memory.
        attempt("memfd", lambda: os.memfd_create("held"))
    """)
    results, told = seen["results"], seen["told"]
    assert results.pop("seccomp") == "" and results.pop("thread") == "ran"
    for name in ("pool", "fork_exec", "memfd"):
        assert results.pop(name) == "PermissionError: [Errno 1] Operation not permitted"
    for name in results:
        assert results[name].startswith("PermissionError: refused while grading: "), (name, results[name])
        assert "\n" not in results[name]
    assert "starting a process (subprocess.Popen 'true')" in results["subprocess"]
    assert "native code through ctypes (ctypes.dlopen)" in results["ctypes"]
    kinds = sorted({sentence.split("(")[1].split(".")[0] for sentence in told})
    assert kinds == ["ctypes", "os", "subprocess"] and len(told) == 3, told  # once per kind of refusal


def test_imports_outside_the_allow_list_are_refused_and_only_the_notebooks_own_are_told():
    seen = run_hooked("""
        import importlib
        attempt("extra", lambda: __import__("pytest"))
        # importlib.import_module raises no import event: the package's files are what is refused
        attempt("by importlib", lambda: importlib.import_module("pytest"))
        attempt("read by hand", lambda: open(os.path.join(os.path.dirname(np.__file__), "..", "_pytest",
                                                          "python_api.py")).read())
        attempt("absent", lambda: __import__("no_such_module_anywhere"))
        # a library's optional import: refused as if not installed, and not told
        library = os.path.join(sys.prefix, "lib", "a_library.py")
        attempt("library", lambda: exec(compile("import nbformat", library, "exec"), {}))
        attempt("library read", lambda: exec(compile("open(path).read()", library, "exec"),
                                             {"path": os.path.join(os.path.dirname(np.__file__), "..", "_pytest",
                                                                   "__init__.py")}))
        import importlib.metadata
        attempt("metadata", lambda: importlib.metadata.version("pytest") and None)  # dist-info stays readable
        # native or Python code planted in a writable folder, under a name the allow-list has
        with open(os.path.join(work, "fractions.py"), "w") as f:
            f.write("PLANTED = True")
        sys.path.insert(0, work)
        attempt("planted", lambda: __import__("fractions"))
        sys.path.remove(work)
        attempt("stdlib", lambda: __import__("fractions").Fraction(1, 3))
        attempt("numpy", lambda: float(np.linalg.norm(np.ones(4))) == 2.0)
        attempt("thread", lambda: threading.Thread(target=lambda: None).start())
    """)
    results, told = seen["results"], seen["told"]
    assert results["extra"].startswith("ModuleNotFoundError: refused while grading: import pytest: not a package")
    for name in ("by importlib", "read by hand"):
        assert results[name].startswith("PermissionError: refused while grading: reading _pytest") or \
            results[name].startswith("PermissionError: refused while grading: reading pytest"), results[name]
    assert results["absent"].startswith("ModuleNotFoundError: refused while grading: import no_such_module")
    assert results["library"].startswith("ModuleNotFoundError: refused while grading: import nbformat")
    assert results["library read"].startswith("PermissionError: refused while grading: reading _pytest")
    assert results["metadata"] == "ran"
    assert results["planted"].startswith("ModuleNotFoundError: refused while grading: import fractions with a "
                                         "writable folder"), results["planted"]
    assert results["stdlib"] == results["numpy"] == results["thread"] == "ran" and results["seccomp"] == "", results
    # told: pytest (installed), its files (once), the planted fractions; not the module installed nowhere
    assert [s.split(":")[0] for s in told] == ["refused while grading"] * 3, told
    assert not any("no_such_module_anywhere" in sentence for sentence in told), told
    assert not any("nbformat" in sentence or "_pytest/__init__" in sentence for sentence in told), told  # a library's


@pytest.mark.parametrize("event, args", [("subprocess.Popen", ("ls", ["ls"], None, None)),
                                         ("ctypes.dlopen", ("libc.so.6",)), ("import", ("pytest", None, [], [], []))])
def test_a_judge_that_is_gone_does_not_lift_a_refusal(event, args):
    def gone(sentence):
        raise ConnectionError("the judge closed the connection")

    hook = policy.Policy({"numpy"}, ("/nowhere-writable",), gone)  # the checkout itself may lie under /tmp
    with pytest.raises((PermissionError, ModuleNotFoundError), match="refused while grading"):
        hook(event, args)
    assert hook("open", ("x", "r", 0)) is None and hook("import", ("numpy", None, [], [], [])) is None


def test_the_seccomp_filter_refuses_below_python_what_the_hook_cannot_see():
    """Without the hook, so that ctypes can make the raw calls: SysV shared memory (not counted by the
    memory cap), a fork, and threads still made (clone with CLONE_THREAD)."""
    code = textwrap.dedent("""
        import ctypes, errno, json, os, platform, threading
        from plmcourse.grading import policy
        done = {"install": policy.install_seccomp()}
        libc = ctypes.CDLL(None, use_errno=True)
        shmget = policy.SYSCALLS[platform.machine()][1]["shmget"]
        done["shmget"] = (libc.syscall(shmget, 0, 4096, 0o1600), ctypes.get_errno() == errno.EPERM)
        try:
            os.fork()
            done["fork"] = "ran"
        except PermissionError:
            done["fork"] = "refused"
        box = []
        thread = threading.Thread(target=box.append, args=(1,))
        thread.start(); thread.join()
        done["thread"] = box == [1]
        print(json.dumps(done))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"install": "", "shmget": [-1, True], "fork": "refused", "thread": True}, seen


def test_a_cell_ipython_cannot_compile_is_an_error_in_that_cell_and_the_kernel_answers_the_next():
    """3,000 chained additions make IPython's "does this cell need an event loop?" raise RecursionError
    outside any `try`: in ipykernel the request dies unanswered and the next cell (a check) times out."""
    body = textwrap.dedent("""
        import json, sys
        from IPython.core.interactiveshell import InteractiveShell
        from plmcourse.grading import policy
        shell = InteractiveShell.instance()
        cell = "def unused(x):\\n    return x" + " + x" * 3000 + "\\n"
        try:
            shell.should_run_async(cell, transformed_cell=shell.transform_cell(cell), preprocessing_exc_tuple=None)
            unpatched = "answered"
        except RecursionError:
            unpatched = "RecursionError"
        policy.answer_every_cell(shell)
        first = shell.run_cell(cell, silent=True)
        second = shell.run_cell("answer = 6 * 7", silent=True)
        print(json.dumps([unpatched, type(first.error_in_exec).__name__, second.success, shell.user_ns["answer"]]))
    """)
    done = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["RecursionError", "RecursionError", True, 42]


def test_anonymous_memory_through_mmap_is_refused_and_a_map_of_a_file_is_not():
    seen = run_hooked("""
        import mmap
        attempt("anonymous", lambda: mmap.mmap(-1, 1 << 20))
        attempt("anonymous private", lambda: mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE))
        with open("data.bin", "wb") as f:
            f.write(b"x" * 8192)
        with open("data.bin", "r+b") as f:
            attempt("a file", lambda: mmap.mmap(f.fileno(), 0)[:2] == b"xx")
        attempt("numpy memmap", lambda: float(np.memmap("data.bin", dtype=np.uint8, mode="r")[0]) == 120.0)
    """)
    results, told = seen["results"], seen["told"]
    for name in ("anonymous", "anonymous private"):
        assert results[name] == ("PermissionError: refused while grading: anonymous memory through mmap (a map of "
                                 "no file): it is shared memory, which the kernel's memory ceiling does not count")
    assert results["a file"] == "ran" and results["numpy memmap"] == "ran"
    assert len([s for s in told if "mmap" in s]) == 1  # told once
