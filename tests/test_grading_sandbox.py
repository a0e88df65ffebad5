"""Nothing of a student's leaves the grading sandbox, and nothing of theirs runs outside it.

The sandbox tests run a small Python program through the real `bwrap_command` (with the
limits `limit_resources` sets) and look from inside; they are skipped where bubblewrap
cannot run. `prepare_submissions` and `clean_graded_folders` are tested on scratch
course folders, with links, packages and files a student could plant.
"""

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import pytest

import plmcourse
from conftest import COURSE
from plmcourse.autograde import sandbox, workflow

WHY_NOT = sandbox.available()
needs_bwrap = pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))
pytestmark = pytest.mark.integration  # the sandbox, its search and its kernels

ASSIGNMENT = "a1"
HIDDEN = "### BEGIN HIDDEN TESTS\nassert answer == 42\n### END HIDDEN TESTS"


def notebook(*sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    return nb


@pytest.fixture
def course(tmp_path):
    """A course as it is while nbgrader executes alice's notebook (which holds the hidden tests)."""
    root = tmp_path / "course"
    (root / "source" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(notebook("answer = None", HIDDEN), root / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    (root / "gradebook.db").write_text("grades of everyone")
    for student in ("alice", "bob"):
        folder = root / "autograded" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(notebook("answer = 42", HIDDEN), folder / f"{ASSIGNMENT}.ipynb")
    return root


def folder_of(course):
    return course / "autograded" / "alice" / ASSIGNMENT


def inside(course, code, env=None, parent_env=None, package=None, socket_dir=None):
    """Run `code` in the sandbox for alice's folder; returns what it printed as JSON (last line)."""
    cmd = sandbox.bwrap_command([sys.executable, "-c", textwrap.dedent(code)], folder_of(course), course,
                                env=env, package=package, socket_dir=socket_dir)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=folder_of(course),
                          env=parent_env, preexec_fn=sandbox.limit_resources)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_bwrap
def test_the_grader_environment_does_not_go_in(course, monkeypatch):
    monkeypatch.setenv("GRADER_SECRET_TOKEN", "s3cr3t-token")
    monkeypatch.setenv("PLMCOURSE_CELL_SECONDS", "17")  # a course setting: passed on
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the grader's thread count: passed on
    env = inside(course, "import json, os; print(json.dumps(dict(os.environ)))",
                 env={"PLMCOURSE_JUDGE_FD": "3"})
    assert "GRADER_SECRET_TOKEN" not in env
    assert "s3cr3t-token" not in json.dumps(env)
    assert env["HOME"] == "/tmp" and env["PLMCOURSE_SANDBOX"] == "1" and env["PYTHONNOUSERSITE"] == "1"
    assert env["PATH"].split(":") == [os.path.dirname(sys.executable), "/usr/bin", "/bin"]
    assert env["PLMCOURSE_JUDGE_FD"] == "3" and env["PLMCOURSE_CELL_SECONDS"] == "17"
    assert env["OMP_NUM_THREADS"] == "3"
    assert "PYTHONPATH" not in env or os.environ.get("PYTHONPATH")
    expected = {"PATH", "HOME", "MPLCONFIGDIR", "OMP_WAIT_POLICY", "PYTHONNOUSERSITE", "PYTHONDONTWRITEBYTECODE",
                "PLMCOURSE_SANDBOX", "LANG", "PYTHONPATH", "PLMCOURSE_JUDGE_FD", "PLMCOURSE_CELL_SECONDS",
                "PLMCOURSE_RUN_DEMOS", "OMP_NUM_THREADS", "PWD"}
    assert set(env) <= expected


@needs_bwrap
def test_no_run_and_no_host_socket_is_reachable(course):
    scratch = Path(tempfile.mkdtemp(prefix="plmsock-"))  # short: a socket's path has at most 107 bytes
    paths = [scratch / "host.sock"]
    try:
        run_scratch = Path(tempfile.mkdtemp(prefix="plmsock-", dir="/run"))
        paths.append(run_scratch / "host.sock")
    except OSError:
        run_scratch = None
    abstract = f"\0plmcourse-test-{os.getpid()}"
    servers = []
    try:
        for address in [*map(str, paths), abstract]:
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(address)
            server.listen(1)
            servers.append(server)
        host_sockets = [str(p) for p in Path("/run").rglob("*") if p.is_socket()] if os.access("/run", os.R_OK) else []
        assert str(paths[-1]) in host_sockets or run_scratch is None
        seen = inside(course, f"""
            import json, os, socket
            reached = []
            for address in {[*map(str, paths), abstract]!r}:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(address)
                    reached.append(address)
                except OSError:
                    pass
            print(json.dumps({{"run": os.path.exists("/run"), "reached": reached,
                              "present": [p for p in {host_sockets + list(map(str, paths))!r}
                                          if os.path.lexists(p)]}}))
        """)
    finally:
        for server in servers:
            server.close()
        shutil.rmtree(scratch)
        if run_scratch is not None:
            shutil.rmtree(run_scratch)
    assert seen == {"run": False, "reached": [], "present": []}


@needs_bwrap
def test_the_course_homes_and_the_checkout_are_not_there(course):
    checkout = Path(plmcourse.__file__).resolve().parent.parent
    secrets = [course / "gradebook.db", course / "source", course / "autograded" / "bob",
               folder_of(course) / f"{ASSIGNMENT}.ipynb", checkout / "course", checkout / "tests",
               Path("/home"), Path("/run"), Path("/var"), Path("/mnt"), Path.home() / ".bash_history"]
    seen = inside(course, f"""
        import json, os
        print(json.dumps({{"present": [p for p in {list(map(str, secrets))!r} if os.path.lexists(p)],
                          "cwd": os.getcwd(), "here": os.listdir("."), "root": sorted(os.listdir("/"))}}))
    """)
    assert seen["present"] == []
    # The kernel runs in the notebook's folder, but a fresh, empty one: the notebook that
    # nbgrader is executing (hidden tests and all) is not there to read.
    assert seen["cwd"] == str(folder_of(course)) and seen["here"] == []
    shown = {Path(p).parts[1] for p in [*sandbox.readonly_paths(), folder_of(course)]}
    assert set(seen["root"]) <= {"usr", "bin", "sbin", "lib", "lib64", "lib32", "libx32", "etc", "dev", "proc",
                                 "tmp", *shown}


@needs_bwrap
def test_what_student_code_writes_stays_in_the_sandbox(course):
    before = sorted(p.name for p in folder_of(course).iterdir())
    seen = inside(course, """
        import json, os
        for name in ("ipykernel_launcher.py", "notes.txt", "plmcourse/__init__.py"):
            os.makedirs(os.path.dirname(name) or ".", exist_ok=True)
            with open(name, "w") as f:
                f.write("print('planted')")
        open("/tmp/x", "w").write("x")
        print(json.dumps(sorted(os.listdir("."))))
    """)
    assert seen == ["ipykernel_launcher.py", "notes.txt", "plmcourse"]
    assert sorted(p.name for p in folder_of(course).iterdir()) == before == [f"{ASSIGNMENT}.ipynb"]


@needs_bwrap
def test_nothing_outside_the_private_folders_is_writable(course):
    targets = [str(Path(sys.prefix) / "planted.py"), str(Path(plmcourse.__file__).parent / "planted.py"),
               "/planted", "/dev/planted", "/etc/planted", "/usr/planted"]
    seen = inside(course, f"""
        import json
        written = []
        for path in {targets!r}:
            try:
                open(path, "w").close()
                written.append(path)
            except OSError:
                pass
        print(json.dumps(written))
    """)
    assert seen == []
    assert not any(os.path.exists(t) for t in targets)


@needs_bwrap
def test_a_300_mb_file_fails_in_the_cell_and_the_program_goes_on(course):
    seen = inside(course, """
        import json
        result = {}
        for where in ("big.bin", "/tmp/big.bin"):
            chunk = b"x" * (1024 ** 2)
            try:
                with open(where, "wb") as f:
                    for _ in range(300):
                        f.write(chunk)
                result[where] = "written"
            except OSError as err:
                result[where] = [err.errno, str(err)]
        print(json.dumps(result))
    """)
    for where, outcome in seen.items():
        assert outcome[0] == errno.EFBIG, (where, outcome)
        assert "File too large" in outcome[1]


@needs_bwrap
def test_the_kernel_has_no_capabilities(course):
    seen = inside(course, """
        import json
        lines = open("/proc/self/status").read().splitlines()
        caps = dict(line.split(":\\t") for line in lines if line.startswith("Cap"))
        print(json.dumps(caps))
    """)
    assert int(seen["CapEff"], 16) == 0 and int(seen["CapPrm"], 16) == 0


@needs_bwrap
def test_numpy_torch_and_plmcourse_still_work(course):
    seen = inside(course, """
        import json
        import plmcourse, numpy, torch
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        plt.plot([1, 2]); plt.savefig("plot.png")
        print(json.dumps([float(numpy.ones(3).sum()), float(torch.ones(2).sum())]))
    """)
    assert seen == [3.0, 2.0]


@needs_bwrap
def test_an_install_on_pythonpath_is_importable(course, tmp_path_factory, monkeypatch):
    site = tmp_path_factory.mktemp("site-outside-prefix")
    (site / "honestpkg").mkdir()
    (site / "honestpkg" / "__init__.py").write_text("VALUE = 7\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    seen = inside(course, "import json, honestpkg; print(json.dumps(honestpkg.VALUE))")
    assert seen == 7


@needs_bwrap
def test_a_pythonpath_holding_the_course_does_not_show_it(course, monkeypatch):
    # The course's parent (and the repository plmcourse comes from) on PYTHONPATH: plmcourse
    # still imports, the course is still not there.
    checkout = Path(plmcourse.__file__).resolve().parent.parent
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(course.parent), str(checkout), "relative"]))
    seen = inside(course, f"""
        import json, os, plmcourse
        print(json.dumps([os.path.exists(p) for p in {[str(course / "gradebook.db"), str(checkout / "course")]!r}]))
    """)
    assert seen == [False, False]


@needs_bwrap
def test_limit_resources_caps_file_size_and_memory():
    code = ("import resource, json; from plmcourse.autograde import sandbox; sandbox.limit_resources(2**30);"
            "print(json.dumps([resource.getrlimit(getattr(resource, name))[0]"
            " for name in ('RLIMIT_FSIZE', 'RLIMIT_DATA', 'RLIMIT_CORE')]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [sandbox.MAX_FILE_SIZE, 2 ** 30, 0]


# ----------------------------------------------------------------------------
# What nbgrader copies from submitted/ to autograded/ and on to feedback/


@pytest.fixture
def submitted(tmp_path):
    root = tmp_path / "course"
    (root / "source" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(notebook("answer = None"), root / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    (root / "gradebook.db").write_text("grades of everyone")
    for student in ("alice", "bob", "carol"):
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(notebook("answer = 42"), folder / f"{ASSIGNMENT}.ipynb")
    return root


def test_everything_but_the_notebook_is_set_aside_without_following_links(submitted):
    alice = submitted / "submitted" / "alice" / ASSIGNMENT
    (alice / "grades.db").symlink_to("../../../gradebook.db")
    (alice / "plmcourse").mkdir()
    (alice / "plmcourse" / "__init__.py").write_text("raise SystemExit('planted')")
    (alice / "plmcourse" / "inner_link").symlink_to("../../../../gradebook.db")
    (alice / "ipykernel_launcher.py").write_text("print('planted')")
    (alice / ".ipynb_checkpoints").mkdir()
    (alice / "data.csv").write_text("1,2")
    (alice / "timestamp.txt").write_text("2024-01-01 10:00:00")
    lines = workflow.prepare_submissions(submitted, ASSIGNMENT)

    assert sorted(p.name for p in alice.iterdir()) == [f"{ASSIGNMENT}.ipynb", "timestamp.txt"]
    aside = submitted / "submitted" / "alice" / f"{ASSIGNMENT}.extra"
    assert sorted(p.name for p in aside.iterdir()) == [".ipynb_checkpoints", "data.csv", "grades.db",
                                                       "ipykernel_launcher.py", "plmcourse"]
    assert (aside / "grades.db").is_symlink() and os.readlink(aside / "grades.db") == "../../../gradebook.db"
    assert (aside / "plmcourse" / "inner_link").is_symlink()
    assert (submitted / "gradebook.db").read_text() == "grades of everyone"
    alice_lines = [line for line in lines if line.startswith("alice:")]
    assert len(alice_lines) == 1, lines
    for name in ("grades.db (a link)", "plmcourse/", "ipykernel_launcher.py", ".ipynb_checkpoints/", "data.csv"):
        assert name in alice_lines[0]
    assert f"moved to submitted/alice/{ASSIGNMENT}.extra" in alice_lines[0]
    assert not any(line.startswith(("bob:", "carol:")) for line in lines)


def test_a_notebook_that_is_a_link_is_set_aside(submitted):
    bob = submitted / "submitted" / "bob" / ASSIGNMENT
    (bob / f"{ASSIGNMENT}.ipynb").unlink()
    (bob / f"{ASSIGNMENT}.ipynb").symlink_to(f"../../alice/{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
    carol = submitted / "submitted" / "carol" / ASSIGNMENT
    (carol / "other.ipynb").symlink_to(submitted / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    lines = workflow.prepare_submissions(submitted, ASSIGNMENT)

    assert list(bob.iterdir()) == []
    moved = submitted / "submitted" / "bob" / f"{ASSIGNMENT}.extra" / f"{ASSIGNMENT}.ipynb"
    assert moved.is_symlink() and os.readlink(moved) == f"../../alice/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    assert (submitted / "submitted" / "alice" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()
    assert f"bob: {ASSIGNMENT}.ipynb is a link, not a notebook file" in "\n".join(lines)
    assert "carol: other.ipynb is a link, not a notebook file" in "\n".join(lines)
    assert sorted(p.name for p in carol.iterdir()) == [f"{ASSIGNMENT}.ipynb"]


def test_a_planted_extra_link_gets_nothing_and_the_files_are_removed(submitted):
    dave = submitted / "submitted" / "dave" / ASSIGNMENT
    dave.mkdir(parents=True)
    nbformat.write(notebook("answer = 42"), dave / f"{ASSIGNMENT}.ipynb")
    (dave / "evil.py").write_text("print('planted')")
    (dave / "planted.ipynb").write_text(nbformat.writes(notebook()))
    (dave.parent / f"{ASSIGNMENT}.extra").symlink_to(submitted / "source" / ASSIGNMENT)
    lines = workflow.prepare_submissions(submitted, ASSIGNMENT, "dave")

    assert sorted(p.name for p in (submitted / "source" / ASSIGNMENT).iterdir()) == [f"{ASSIGNMENT}.ipynb"]
    assert not (dave / "evil.py").exists()
    assert f"dave: could not set planted.ipynb aside, {ASSIGNMENT}.extra is not a folder" in lines
    assert any(line.startswith("dave: removed what is not a notebook") and "evil.py" in line for line in lines)


def test_a_submitted_folder_that_is_a_link_is_not_followed(submitted):
    (submitted / "submitted" / "eve").symlink_to(submitted / "submitted" / "alice")
    (submitted / "submitted" / "frank").mkdir()
    (submitted / "submitted" / "frank" / ASSIGNMENT).symlink_to(submitted / "source" / ASSIGNMENT)
    lines = workflow.prepare_submissions(submitted, ASSIGNMENT)

    assert not os.path.lexists(submitted / "submitted" / "eve")
    assert not os.path.lexists(submitted / "submitted" / "frank" / ASSIGNMENT)
    assert (submitted / "submitted" / "alice" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()
    assert (submitted / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()
    assert any(line.startswith("eve: submitted/eve is a link") for line in lines)
    assert any(line.startswith(f"frank: submitted/frank/{ASSIGNMENT} is a link") for line in lines)


def test_extra_notebooks_and_odd_metadata_as_before(submitted):
    alice = submitted / "submitted" / "alice" / ASSIGNMENT
    (alice / "scratch.ipynb").write_text(nbformat.writes(notebook()))
    nb = nbformat.read(alice / f"{ASSIGNMENT}.ipynb", as_version=4)
    nb.cells[0].metadata["nbgrader"] = "mine"
    nbformat.write(nb, alice / f"{ASSIGNMENT}.ipynb")
    lines = workflow.prepare_submissions(submitted, ASSIGNMENT)
    assert lines == [f"alice: left out scratch.ipynb, which is not a notebook of {ASSIGNMENT} "
                     f"(moved to submitted/alice/{ASSIGNMENT}.extra)",
                     "alice: ignored nbgrader metadata that is not nbgrader's in cell(s) 1"]
    assert "nbgrader" not in nbformat.read(alice / f"{ASSIGNMENT}.ipynb", as_version=4).cells[0].metadata


def test_graded_folders_keep_only_notebooks_and_feedback(submitted):
    graded = submitted / "autograded" / "alice" / ASSIGNMENT
    feedback = submitted / "feedback" / "alice" / ASSIGNMENT
    for folder in (graded, feedback):
        folder.mkdir(parents=True)
        (folder / "timestamp.txt").write_text("2024-01-01 10:00:00")
        (folder / "planted.py").write_text("print('planted')")
        (folder / "plmcourse").mkdir()
        (folder / "plmcourse" / "secret").symlink_to(submitted / "gradebook.db")
        (folder / "grades.db").symlink_to("../../../gradebook.db")
    nbformat.write(notebook("answer = 42"), graded / f"{ASSIGNMENT}.ipynb")
    with open(graded / "huge.ipynb", "wb") as f:  # sparse: big to stat, nothing on disk
        f.truncate(workflow.MAX_GRADED_FILE + 1)
    (feedback / f"{ASSIGNMENT}.html").write_text("<html></html>")
    (feedback / f"{ASSIGNMENT}.ipynb").write_text("{}")
    with open(feedback / "huge.html", "wb") as f:
        f.truncate(workflow.MAX_GRADED_FILE + 1)
    bob = submitted / "autograded" / "bob" / ASSIGNMENT
    bob.mkdir(parents=True)
    nbformat.write(notebook("answer = 42"), bob / f"{ASSIGNMENT}.ipynb")

    lines = workflow.clean_graded_folders(submitted, ASSIGNMENT)

    assert sorted(p.name for p in graded.iterdir()) == [f"{ASSIGNMENT}.ipynb", "timestamp.txt"]
    assert sorted(p.name for p in feedback.iterdir()) == [f"{ASSIGNMENT}.html", "timestamp.txt"]
    assert (submitted / "gradebook.db").read_text() == "grades of everyone"
    assert sorted(p.name for p in bob.iterdir()) == [f"{ASSIGNMENT}.ipynb"]
    text = "\n".join(lines)
    assert f"alice: removed from autograded/alice/{ASSIGNMENT} what is not a notebook: grades.db (a link), " \
           "planted.py, plmcourse/" in text
    assert f"alice: removed from feedback/alice/{ASSIGNMENT} what is not feedback: {ASSIGNMENT}.ipynb" in text
    assert "huge.ipynb (50.0 MB)" in text and "huge.html (50.0 MB)" in text
    assert not any(line.startswith("bob:") for line in lines)
    assert workflow.clean_graded_folders(submitted, ASSIGNMENT) == []  # nothing left to remove


def test_the_kernel_launcher_loads_nothing_from_the_folder_it_starts_in(tmp_path):
    """nbgrader starts the launcher (outside the sandbox) in the student's autograded folder."""
    planted = tmp_path / "plmcourse"
    planted.mkdir()
    (planted / "__init__.py").write_text("raise SystemExit('the planted package ran')\n")
    (tmp_path / "ipykernel_launcher.py").write_text("raise SystemExit('the planted launcher ran')\n")
    spec = json.loads((sandbox.install_kernelspec(tmp_path / "jupyter", tmp_path) / "kernel.json").read_text())
    argv = spec["argv"][:4] + ["--help"]  # python -P -m plmcourse.autograde.sandbox --help
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and "planted" not in done.stdout + done.stderr, done.stderr


def test_stubbed_source_keeps_the_docstring_and_the_line_numbers():
    source = ('def softmax(x, axis=-1):\n    """Softmax."""\n    e = np.exp(x)\n    return e / e.sum()\n\n\n'
              'def other(x):\n    return x\n')
    stubbed = sandbox.stub_source(source, "plmcourse.ref.attention", {"softmax"})
    assert stubbed.count("\n") == source.count("\n")
    assert '"""Softmax."""' in stubbed and "np.exp" not in stubbed and "def other(x):\n    return x" in stubbed
    namespace = {}
    exec(stubbed, namespace)
    with pytest.raises(RuntimeError, match="plmcourse.ref.attention.softmax is not available while grading"):
        namespace["softmax"](1.0)


def test_each_assignment_stubs_its_own_exercises_only():
    """Notebook 03 grades softmax, attention, the causal mask and multi-head attention; notebook
    09 builds on notebook 03's attention, which its students may call."""
    source = Path(plmcourse.__file__).resolve().parent.parent / "course" / "source"
    assert sandbox.graded_functions(sorted((source / "03_attention").glob("*.ipynb"))) == {
        "softmax", "scaled_dot_product_attention", "causal_mask", "multi_head_attention"}
    assert sandbox.graded_functions(sorted((source / "09_peft").glob("*.ipynb"))) == {
        "count_trainable_parameters", "lora_linear", "attention_with_prefix"}
    assert {"softmax", "mlm_mask", "wordpiece", "attention_with_prefix"} <= sandbox.graded_functions()


def test_in_the_sandbox_the_course_solutions_are_absent(course, tmp_path):
    """Neither callable nor readable: the mounted package holds stubs where this assignment's
    graded functions were; another assignment's (mlm_mask, wordpiece) still run."""
    package = sandbox.grading_package(tmp_path / "package", {"softmax", "scaled_dot_product_attention"})
    code = textwrap.dedent("""
        import inspect, numpy as np
        from plmcourse import ref, nn
        from plmcourse.data import wordpiece
        for f in (ref.softmax, nn.scaled_dot_product_attention, ref.mlm_mask, wordpiece):
            try:
                f(*[np.zeros(3)] * (f.__code__.co_argcount - len(f.__defaults__ or ())))
                print("ran", f.__name__)
            except RuntimeError as error:
                print("absent", f.__name__, "not available while grading" in str(error))
            except Exception:  # it ran, on arguments it does not take
                print("ran", f.__name__)
        print("exp in source", "np.exp" in inspect.getsource(ref.softmax))
        print("split_heads", ref.split_heads(np.zeros((1, 2, 4)), 2).shape)  # not graded: still there
        import plmcourse.grading.attention, plmcourse.grading.bert, plmcourse.grading.wordpiece
    """)
    folder = course / "autograded" / "alice" / "03_attention"
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(sandbox.bwrap_command([sys.executable, "-c", code], folder, course, package=package),
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("absent") == 2 and done.stdout.count("True") == 2, done.stdout
    assert "ran mlm_mask" in done.stdout and "ran wordpiece" in done.stdout, done.stdout
    assert "exp in source False" in done.stdout and "split_heads (1, 2, 2, 2)" in done.stdout


# ----------------------------------------------------------------------------
# Only the course's environment; no complete implementation of a graded function anywhere


PACKAGE = Path(plmcourse.__file__).resolve().parent
# Lines found only in the course's own solutions and in the checks' judges.
SOLUTION_LINES = [b"x_max = np.where(x_max == -np.inf, 0.0, x_max)",          # ref.softmax
                  b"shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))",  # grading.core.log_softmax
                  b"def _softmax_mistakes("]                                   # grading.attention's catalogue


def base_only_packages(folder: Path) -> list[str]:
    """Top-level packages in `folder` that the grader's own Python cannot import: not the course's."""
    import importlib.util

    names = []
    for entry in sorted(os.listdir(folder)):
        name = entry.removesuffix(".py")
        is_package = (folder / entry / "__init__.py").is_file() or entry.endswith(".py")
        if is_package and name.isidentifier() and importlib.util.find_spec(name) is None:
            names.append(name)
    return names[:6]


def test_which_package_folders_the_sandbox_hides(tmp_path):
    base = tmp_path / "base"
    base_site = base / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    base_site.mkdir(parents=True)
    venv_site = tmp_path / "venv" / "site-packages"
    venv_site.mkdir(parents=True)
    in_a_venv = sandbox.hidden_python_dirs([str(venv_site)], str(base))
    assert base_site.resolve() in in_a_venv and venv_site.resolve() not in in_a_venv
    # No virtual environment (conda, a system Python): the base's packages are the course's.
    assert base_site.resolve() not in sandbox.hidden_python_dirs([str(base_site)], str(base))


@needs_bwrap
def test_the_base_interpreters_packages_can_be_neither_imported_nor_listed(course):
    probes = {str(d): base_only_packages(d) for d in sandbox.hidden_python_dirs() if base_only_packages(d)}
    if not probes:
        pytest.skip("no package outside the course's environment on this machine to try")
    seen = inside(course, f"""
        import importlib, json, os, sys
        import numpy, torch  # the course's environment is all there
        result = {{}}
        for folder, names in {probes!r}.items():
            sys.path.append(folder)
            imported = []
            for name in names:
                try:
                    importlib.import_module(name)
                    imported.append(name)
                except Exception:
                    pass
            result[folder] = [imported, os.listdir(folder) if os.path.isdir(folder) else []]
        print(json.dumps(result))
    """)
    for folder, (imported, listed) in seen.items():
        assert imported == [] and listed == [], (folder, probes[folder], imported, listed[:5])


# Inside the sandbox: every function, method (on an instance made without __init__) and class of
# every module of the plmcourse the kernel sees, called on logits; which compute softmax or
# log_softmax as a NumPy array? (A small search of its own, independent of the grader's.)
PROBE = """
    import importlib, inspect, json, pkgutil, signal
    import numpy as np
    import plmcourse

    def softmax(x, axis):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    def log_softmax(x, axis):
        return np.log(softmax(x, axis))

    rng = np.random.default_rng(0)
    cases = [(rng.standard_normal((3, 5)), None), (rng.standard_normal((4, 2, 3)), 1)]
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError()))

    def computes(f, reference):
        for x, axis in cases:
            signal.alarm(2)
            try:
                got = f(x.copy()) if axis is None else f(x.copy(), axis)
            except BaseException:
                return False
            finally:
                signal.alarm(0)
            want = reference(x, -1 if axis is None else axis)
            if not isinstance(got, np.ndarray) or got.shape != want.shape or not np.allclose(got, want):
                return False
        return True

    def callables(module):
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == module.__name__:
                yield value.__qualname__, value
                try:
                    bare = value.__new__(value)
                except BaseException:
                    bare = None
                for name, member in list(vars(value).items()):
                    if isinstance(member, (staticmethod, classmethod)):
                        yield f"{value.__qualname__}.{name}", getattr(value, name)
                    elif inspect.isfunction(member) and bare is not None:
                        yield f"{value.__qualname__}.{name}", member.__get__(bare)
            elif inspect.isfunction(value) and value.__module__ == module.__name__:
                yield value.__qualname__, value

    found, tried, modules = [], 0, []
    for info in pkgutil.walk_packages(plmcourse.__path__, "plmcourse."):
        if info.name.startswith(("plmcourse.autograde", "plmcourse.cli", "plmcourse.__main__")):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:
            continue
        modules.append(info.name)
        for qualname, f in callables(module):
            for name, reference in (("softmax", softmax), ("log_softmax", log_softmax)):
                tried += 1
                if computes(f, reference):
                    found.append(f"{module.__name__}.{qualname} computes {name}")
    print(json.dumps({"found": sorted(found), "tried": tried, "modules": len(modules)}))
"""


@pytest.fixture(scope="module")
def package_03_01(tmp_path_factory):
    """The sandbox's package for an assignment grading softmax and log_softmax (03's and 01's), made as
    grading makes it: what 03's notebook reaches searched, the rest stubbed."""
    report = []
    notebooks = sorted((COURSE / "source" / "03_attention").glob("*.ipynb"))
    package = sandbox.grading_package(tmp_path_factory.mktemp("package"), {"softmax", "log_softmax"},
                                      report=report, notebooks=notebooks)
    return package, report


@needs_bwrap
def test_nothing_in_the_sandbox_computes_softmax_or_log_softmax(course, package_03_01):
    package, report = package_03_01
    assert "searched the package for complete implementations of log_softmax, softmax" in report[0]
    unguarded = inside(course, PROBE)  # the package as installed: the probe does find them
    assert {"plmcourse.ref.attention.softmax computes softmax",
            "plmcourse.judging.core.log_softmax computes log_softmax"} <= set(unguarded["found"]), unguarded
    guarded = inside(course, PROBE, package=package)
    assert guarded["found"] == [] and guarded["tried"] > 500 and guarded["modules"] > 30, guarded


@needs_bwrap
def test_in_the_sandbox_the_checks_are_declarations_and_the_judge_is_absent(course, package_03_01):
    package, _ = package_03_01
    seen = inside(course, """
        import importlib, json, os
        import plmcourse, plmcourse.grading as grading
        from plmcourse.grading import attention, core, peft
        result = {"top": sorted(os.listdir(os.path.dirname(plmcourse.__file__))), "absent": []}
        try:
            grading.check_softmax(lambda x, axis=-1: x)
        except Exception as error:
            result["check"] = str(error)
        result["attention"] = sorted(name for name in vars(attention) if not name.startswith("__"))
        result["core"] = sorted(name for name in ("run_check", "Remote", "log_softmax", "compare") if hasattr(core, name))
        result["driver"] = callable(peft.check_lora_linear.driver)
        result["fields"] = [grading.check_softmax.name, list(grading.check_softmax.arg_names),
                            grading.check_softmax.doc == grading.check_softmax.__doc__]
        for module in ("plmcourse.judging", "plmcourse.judging.core", "plmcourse.judging.attention",
                       "plmcourse.autograde.judge"):
            try:
                importlib.import_module(module)
            except ImportError:
                result["absent"].append(module)
        print(json.dumps(result))
    """, package=package)
    assert "runs in the judge while grading, and this kernel has no connection to it" in seen["check"]
    assert seen["attention"] == ["Check", "WEIGHT_NAMES", "check_causal_mask", "check_multi_head_attention",
                                 "check_scaled_dot_product_attention", "check_softmax"], seen["attention"]
    assert seen["core"] == [], seen["core"]  # the engine and the judges' helpers are the judge's
    assert seen["driver"] and seen["fields"] == ["check_softmax", ["x"], True]
    assert len(seen["absent"]) == 4, seen["absent"]
    assert not {"judging", "autograde", "cli.py", "release.py", "__main__.py"} & set(seen["top"])


@needs_bwrap
def test_no_copy_of_the_solutions_is_readable_anywhere_python_looks(course, package_03_01, tmp_path,
                                                                   monkeypatch):
    """Not the installed package, its bytecode, an install's record, nor another plmcourse on the path."""
    package, _ = package_03_01
    older = tmp_path / "older-install"
    shutil.copytree(PACKAGE, older / "plmcourse", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("PYTHONPATH", str(older))
    seen = inside(course, f"""
        import json, os, sys
        import plmcourse
        markers = {SOLUTION_LINES!r}
        roots = {{p for p in [*sys.path, sys.prefix, sys.base_prefix] if p and os.path.isdir(p)}}
        found, files = [], 0
        for root in sorted(roots):
            for folder, dirs, names in os.walk(root):
                for name in names:
                    path = os.path.join(folder, name)
                    if os.path.islink(path) or not name.endswith((".py", ".pyc", ".pth", ".txt", ".json", "RECORD")):
                        continue
                    try:
                        data = open(path, "rb").read(4 * 1024 ** 2)
                    except OSError:
                        continue
                    files += 1
                    found += [path for marker in markers if marker in data]
        print(json.dumps({{"found": found, "files": files, "imported": plmcourse.__file__}}))
    """, package=package)
    assert seen["found"] == [] and seen["files"] > 1000, seen
    assert not any(marker in (PACKAGE / "ref" / "attention.py").read_bytes() for marker in SOLUTION_LINES[2:])
    assert SOLUTION_LINES[0] in (PACKAGE / "ref" / "attention.py").read_bytes()  # the markers are real


PLANTED = '''

import numpy as _planted_np


def tidy_scores(x, axis=-1):
    """The judges' log_softmax under another name, in another module."""
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - _planted_np.log(_planted_np.exp(shifted).sum(axis=axis, keepdims=True))


class Helper:
    def spread(self, x, axis=-1):
        """ref.softmax as a method."""
        x = _planted_np.asarray(x, dtype=_planted_np.float64)
        x_max = _planted_np.max(x, axis=axis, keepdims=True)
        x_max = _planted_np.where(x_max == -_planted_np.inf, 0.0, x_max)
        e = _planted_np.exp(x - x_max)
        total = _planted_np.sum(e, axis=axis, keepdims=True)
        return e / _planted_np.where(total == 0.0, 1.0, total)


def _normalise(x, axis=-1, base=2.0):
    """base ** x normalised along `axis`: softmax only when base is e, so not an implementation by itself."""
    x = _planted_np.asarray(x, dtype=_planted_np.float64)
    x_max = _planted_np.max(x, axis=axis, keepdims=True)
    x_max = _planted_np.where(x_max == -_planted_np.inf, 0.0, x_max)
    e = _planted_np.power(base, x - x_max)
    total = _planted_np.sum(e, axis=axis, keepdims=True)
    return e / _planted_np.where(total == 0.0, 1.0, total)


class _Normaliser:
    def __init__(self, base):
        self.base = base

    def __call__(self, x, axis=-1):
        return _normalise(x, axis, self.base)


# Module-level values that compute softmax, though no def or class does by itself.
natural = __import__("functools").partial(_normalise, base=_planted_np.e)
squash = lambda x, axis=-1: _normalise(x, axis, _planted_np.e)  # noqa: E731
by_e = _Normaliser(_planted_np.e)


def stall(x, axis=-1):
    while True:
        pass


def nap(x, axis=-1):
    import time

    while True:
        time.sleep(0.1)
'''


def planted_copy(where: Path) -> Path:
    copy = where / "plmcourse"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "data" / "text.py", "a", encoding="utf-8") as f:
        f.write(PLANTED)
    return copy


def test_the_search_finds_implementations_by_behaviour_whatever_their_name(tmp_path):
    search = sandbox.find_implementations(planted_copy(tmp_path), {"log_softmax", "softmax"}, seconds=3)
    assert not search.problem, search.problem
    assert {"tidy_scores", "Helper.spread"} <= set(search.found["plmcourse/data/text.py"]), search.found
    # A callable that is a module-level value is tried under its name (what a stub replaces); the general
    # function and the class it is made from compute something else.
    assert {"natural", "squash", "by_e"} <= set(search.found["plmcourse/data/text.py"]), search.found
    assert not {"_normalise", "_Normaliser", "_Normaliser.__call__", "<lambda>"} & set(
        search.found["plmcourse/data/text.py"])
    namespace = {}
    exec(sandbox.stub_source(PLANTED, "plmcourse.data.text", set(search.found["plmcourse/data/text.py"])), namespace)
    for name in ("natural", "squash", "by_e", "tidy_scores"):
        with pytest.raises(RuntimeError, match=f"plmcourse.data.text.{name} is not available while grading"):
            namespace[name]([1.0, 2.0])
    assert namespace["_normalise"]([0.0, 1.0])[1] == pytest.approx(2 / 3)  # what it computes stays
    assert not any(file.startswith("plmcourse/judging/") for file in search.found)  # never in the sandbox
    assert "softmax" in search.found["plmcourse/ref/attention.py"]
    # Both hang and are skipped: one computing (1.5 s of CPU), one asleep (the 3 s given)
    assert {"stall", "nap"} <= {s.split(":")[1].split(" ")[0] for s in search.skipped if "data/text.py" in s}
    assert not {"stall", "nap"} & set(search.found["plmcourse/data/text.py"])
    summary = search.summary()
    assert "plmcourse/data/text.py:tidy_scores (check_log_softmax)" in summary and f"{search.seconds:.1f} s" in summary


def test_the_search_runs_once_per_package_and_assignment(tmp_path):
    copy = tmp_path / "plmcourse"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "cache"
    only = {("plmcourse/ref/attention.py", "softmax"), ("plmcourse/ref/word_vectors.py", "log_softmax")}
    first = sandbox.find_implementations(copy, {"softmax"}, cache=cache, only=only)
    again = sandbox.find_implementations(copy, {"softmax"}, cache=cache, only=only)
    assert not first.cached and again.cached and again.found == first.found and again.seconds == first.seconds
    assert "result cached" in again.summary()
    # another assignment's reach is another search
    assert not sandbox.find_implementations(copy, {"softmax"}, cache=cache, only={("plmcourse/ref/attention.py", "softmax")}).cached
    with open(copy / "viz.py", "a", encoding="utf-8") as f:
        f.write("\n# changed\n")
    assert not sandbox.find_implementations(copy, {"softmax"}, cache=cache, only=only).cached
    assert len(list(cache.iterdir())) == 3


def test_the_search_cache_is_the_course_s_own_unless_a_folder_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv(sandbox.CACHE_ENV, raising=False)
    assert sandbox.search_cache(tmp_path / "course") == tmp_path / "course" / sandbox.CACHE_FOLDER
    monkeypatch.setenv(sandbox.CACHE_ENV, str(tmp_path / "shared"))
    assert sandbox.search_cache(tmp_path / "course") == tmp_path / "shared"


def test_stubs_reach_methods_classes_and_inner_functions():
    source = textwrap.dedent('''
        class Layer:
            def forward(self, x):
                """Forward."""
                return x * 2

            def other(self):
                return 1


        def outer():
            def inner(x):
                return x + 1
            return inner
    ''')
    stubbed = sandbox.stub_source(source, "m", {"Layer.forward", "outer.<locals>.inner"})
    assert stubbed.count("\\n") == source.count("\\n") and "return x * 2" not in stubbed
    assert "return 1" in stubbed and "return x + 1" not in stubbed and "return inner" in stubbed
    whole = sandbox.stub_source(source, "m", {"Layer", "Layer.forward"})
    assert "return 1" not in whole and "return x * 2" not in whole
    namespace = {}
    exec(whole, namespace)
    with pytest.raises(RuntimeError, match="m.Layer.other is not available while grading"):
        namespace["Layer"]().other()


# ----------------------------------------------------------------------------
# The kernel's sockets: a capped tmpfs inside, links on the host


def execute(client, code: str) -> str:
    """Run `code` in the kernel; what it printed (and the error's name and value, if it raised)."""
    msg_id = client.execute(code)
    out = []
    while True:
        msg = client.get_iopub_msg(timeout=120)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return "".join(out)


@needs_bwrap
def test_a_kernel_cannot_fill_the_hosts_disk_through_its_socket_folder(course, tmp_path, monkeypatch):
    """A real kernel, started through the course's launcher as nbgrader starts it, writes 600 MB
    into the folder its sockets are in: the writes fail at the cap, the host's folder holds only
    the launcher's links, and the kernel goes on answering."""
    from jupyter_client import KernelManager

    sockets = Path(tempfile.mkdtemp(prefix="plmsock-"))  # short: a socket's path has at most 107 bytes
    monkeypatch.setenv("JUPYTER_PATH", str(sandbox.install_kernelspec(tmp_path / "jupyter", course).parent.parent))
    manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(sockets / "kernel"))
    try:
        manager.start_kernel(cwd=str(folder_of(course)))
        client = manager.client()
        client.start_channels()
        client.wait_for_ready(timeout=120)
        printed = execute(client, textwrap.dedent("""
            import json, os
            from ipykernel.connect import get_connection_file
            folder = os.path.dirname(json.load(open(get_connection_file()))["ip"])
            written, error = 0, None
            try:
                for i in range(3):
                    with open(os.path.join(folder, f"fill{i}"), "wb") as f:
                        for _ in range(200):
                            f.write(b"x" * 2 ** 20)
                            written += 2 ** 20
            except OSError as err:
                error = err.errno
            print(json.dumps([written, error]))
        """))
        written, error = json.loads(printed.strip().splitlines()[-1])
        assert error == errno.ENOSPC and written <= sandbox.SOCKET_TMPFS_SIZE, printed
        entries = list(sockets.iterdir())
        assert entries and all(p.is_symlink() for p in entries), entries
        assert all(os.readlink(p).startswith("/proc/") for p in entries)
        assert execute(client, "print(6 * 7)").strip() == "42"  # the kernel goes on
        client.stop_channels()
    finally:
        manager.shutdown_kernel(now=True)
        shutil.rmtree(sockets, ignore_errors=True)


def test_a_candidate_is_stopped_by_its_cpu_time_and_one_that_waits_is_not():
    """The search's CPU cap: a loop that computes is stopped long before the wall-clock limit; a candidate
    that waits (as a real implementation does on a loaded machine) runs on and passes."""
    import time

    def busy():
        while True:
            pass

    started = time.monotonic()
    assert sandbox._run_forked(lambda candidate: candidate(), busy, seconds=60, cpu_seconds=0.5) == "time"
    assert time.monotonic() - started < 10
    assert sandbox._run_forked(lambda candidate: candidate(), lambda: time.sleep(1.5), seconds=60,
                               cpu_seconds=0.5) == "pass"
    assert sandbox._run_forked(lambda candidate: candidate(), lambda: 1 / 0, seconds=60) == "fail"


def launched(course, code, box=None, socket_dir=None):
    """Run `code` in the sandbox through the launcher's own run_sandboxed (its watch and cgroup);
    returns (exit status, what it printed, the sentences the launcher would tell the judge)."""
    cmd = sandbox.bwrap_command([sys.executable, "-c", textwrap.dedent(code)], folder_of(course), course,
                                socket_dir=socket_dir)
    said, read, write = [], *os.pipe()
    saved = os.dup(1)
    os.dup2(write, 1)  # the child's stdout: run_sandboxed starts it with ours
    try:
        watched = sandbox.writable_folders(folder_of(course), socket_dir)
        # Telling the judge takes a moment (a socket to another process): the launcher must wait for it.
        status = sandbox.run_sandboxed(cmd, [], [], box=box, watched=watched,
                                       on_stop=lambda sentence: (time.sleep(0.3), said.append(sentence)))
    finally:
        os.dup2(saved, 1)
        os.close(write)
        os.close(saved)
    with os.fdopen(read) as f:
        return status, f.read(), said


@needs_bwrap
@pytest.mark.parametrize("make", [
    "open(f'/tmp/f{i}', 'w').close()",                        # empty files
    "os.mkdir(f'd{i}')",                                       # folders in the working folder
    "os.symlink('/nowhere', f'/dev/shm/l{i}')",                # links, no bytes at all
])
def test_a_kernel_that_makes_too_many_files_is_stopped_and_the_judge_told(course, make):
    status, printed, said = launched(course, f"""
        import os
        for i in range(3 * {sandbox.MAX_FILES}):
            {make}
        print("made them all")
    """)
    assert status == 128 + 9 and "made them all" not in printed
    [sentence] = said
    assert sentence.startswith("the grading kernel was stopped: it made more than 10,000 files in ")
    assert "files, folders and links in each writable folder" in sentence


def test_the_host_s_own_folders_are_never_counted(tmp_path):
    """Before bubblewrap moves the sandbox into its root, /proc/<pid>/root/tmp is the host's /tmp, whose file
    system may hold millions of files: counted then, an honest kernel would be stopped (or, as a baseline,
    the cap lifted). A folder counts only once it is a file system of its own."""
    for folder in ("/tmp", str(tmp_path), "/dev/shm"):
        assert sandbox.files_in(f"/proc/{os.getpid()}/root{folder}", folder) is None
    assert sandbox.files_in(str(tmp_path / "absent"), str(tmp_path / "absent")) is None


@needs_bwrap
def test_a_sandbox_being_built_is_never_counted_as_the_host_s_disk(course):
    """While bubblewrap mounts the sandbox's folders, /proc/<pid>/root/tmp changes under the watch: read by
    path twice (a stat, then a statvfs), it once showed a new tmpfs's device with the host disk's million
    files, and the watch stopped an honest kernel at its start. Counted from the moment bwrap names the
    sandbox's first process, as fast as we can, over 150 sandboxes (the old reading: 2 of 60 went over)."""
    notebook_dir = folder_of(course)
    cmd = sandbox.bwrap_command([sys.executable, "-c", "pass"], notebook_dir, course)
    most = 0
    for _ in range(150):
        read, write = os.pipe()
        child = subprocess.Popen([cmd[0], "--info-fd", str(write), *cmd[1:]], pass_fds=(write,))
        os.close(write)
        pid = sandbox._sandbox_pid(read)
        while child.poll() is None:
            for folder in sandbox.writable_folders(notebook_dir):
                most = max(most, sandbox.files_in(f"/proc/{pid}/root{folder}", folder) or 0)
    assert most < 100  # a fresh sandbox's own few files


@needs_bwrap
def test_empty_files_in_the_sockets_folder_count_too(course, tmp_path):
    """The sockets' folder is writable and size-capped, but empty files take no room: it is watched as well."""
    sockets = tmp_path / "sockets"
    sockets.mkdir()
    status, printed, said = launched(course, f"""
        for i in range(3 * {sandbox.MAX_FILES}):
            open(f"{sockets}/f{{i}}", "w").close()
        print("made them all")
    """, socket_dir=sockets)
    assert status == 128 + 9 and "made them all" not in printed
    assert said and f"files in {sockets}" in said[0]


@needs_bwrap
def test_a_kernel_under_the_file_cap_is_left_alone(course):
    status, printed, said = launched(course, """
        import os
        for i in range(2000):
            open(f'/tmp/f{i}', 'w').close()
        print("made", sum(name.startswith("f") for name in os.listdir('/tmp')))
    """)
    assert (status, said) == (0, []) and "made 2000" in printed


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs pidfds (Linux 5.3 and later)")
def test_a_held_process_is_watched_whatever_the_number_of_its_pidfd():
    """A launcher that holds many files gets a pidfd numbered 1024 or more, which select() refuses: the watch
    thread died on it and the kernel it watched was never stopped (seen in a loaded run of the suite)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1100:
        pytest.skip(f"this process may open only {hard} files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1030)]
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        held = sandbox.HeldProcess(sleeper.pid)
        assert held.fd >= 1024
        assert held.alive()
        held.kill()
        sleeper.wait(10)
        assert not held.alive()
        held.close()
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        sleeper.kill()
        sleeper.wait()


def _process_at(pid: int, argv: list) -> subprocess.Popen | None:
    """`argv` started as process `pid` (the kernel hands out the pid after ns_last_pid), or None when another
    process of the machine took that pid first."""
    with open("/proc/sys/kernel/ns_last_pid", "w") as last:
        last.write(str(pid - 1))
    started = subprocess.Popen(argv)
    if started.pid == pid:
        return started
    started.kill()
    started.wait()
    return None


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
@pytest.mark.parametrize("pidfds", [True, False], ids=["pidfd", "start time (Linux before 5.3)"])
def test_the_watch_never_counts_or_stops_a_process_that_took_a_dead_sandbox_s_pid(pidfds, monkeypatch):
    """Pids are reused (on this machine after 32,768). Once a sandbox's first process has exited, its number can
    name another submission's kernel, whose /tmp may be full: the watch must not count that /tmp against this
    kernel, nor kill the other. (In one run of the suite an honest notebook was stopped for "more than 10,000
    files in /tmp" that it never made.)"""
    if not pidfds:
        monkeypatch.delattr(os, "pidfd_open")
    bwrap = subprocess.Popen(["sleep", "30"])        # stands for bwrap, alive while the watch runs
    first = subprocess.Popen(["sleep", "30"])         # the sandbox's first process, which ends
    pid, said = first.pid, []
    held = sandbox.HeldProcess(pid)  # as the launcher does, while the sandbox's first process lives
    watch = threading.Thread(target=sandbox.watch_files, args=(bwrap, held, ["/tmp"], said.append),
                             kwargs={"most": 5, "every": 0.05})
    watch.start()
    # A sandbox lives for seconds; the start time (the fallback) counts in clock ticks of 10 ms, so a process
    # that took the pid within the same tick would look the same.
    time.sleep(0.05)
    first.kill()
    first.wait()
    # Another kernel, in a mount namespace of its own whose /tmp holds 20 files, takes the same pid.
    other = None
    for _ in range(20):
        other = _process_at(pid, ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                  "mount -t tmpfs none /tmp && touch /tmp/f$(seq -s ' /tmp/f' 20) && exec sleep 30"])
        if other is not None:
            break
    if other is None:
        pytest.skip("another process took the pid each time")
    try:
        deadline = time.time() + 10  # its tmpfs is mounted, then its 20 files are made: wait for both
        while (sandbox.files_in(f"/proc/{pid}/root/tmp", "/tmp") or 0) <= 5 and time.time() < deadline:
            time.sleep(0.05)
        assert sandbox.files_in(f"/proc/{pid}/root/tmp", "/tmp") > 5  # the trap is real: by number, it is over
        time.sleep(0.5)
        assert other.poll() is None and said == []
    finally:
        bwrap.kill()
        watch.join(5)
        other.kill()
        other.wait()
        bwrap.wait()


@needs_bwrap
def test_open_files_are_capped_and_cannot_be_raised(course):
    seen = inside(course, """
        import json, os, resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard + 1, hard + 1))
            raised = True
        except (ValueError, OSError):
            raised = False
        fds = []
        try:
            while True:
                fds.append(os.eventfd(0))
        except OSError as error:
            stopped = error.errno
        print(json.dumps({"soft": soft, "hard": hard, "raised": raised, "opened": len(fds), "errno": stopped}))
    """)
    assert seen["soft"] == seen["hard"] == sandbox.MAX_OPEN_FILES and not seen["raised"]
    assert sandbox.MAX_OPEN_FILES - 16 <= seen["opened"] < sandbox.MAX_OPEN_FILES and seen["errno"] == errno.EMFILE


CGROUP = sandbox.KernelCgroup.make(1 << 30, 64)
if CGROUP is not None:
    CGROUP.remove()
needs_cgroup = pytest.mark.skipif(CGROUP is None, reason="this grader cannot make a cgroup (not root, or no "
                                                        "writable cgroup v1 memory and pids hierarchies)")


@needs_bwrap
@needs_cgroup
def test_the_cgroup_counts_shared_memory_and_stops_the_kernel_past_it(course):
    box = sandbox.KernelCgroup.make(512 * 1024 ** 2, 64)
    status, printed, said = launched(course, """
        import mmap
        maps = []
        for i in range(8):                                   # 2 GiB of shared memory, which RLIMIT_DATA ignores
            m = mmap.mmap(-1, 256 << 20)
            for page in range(0, len(m), 4096):
                m[page] = 1
            maps.append(m)
            print("held", (i + 1) * 256, flush=True)
    """, box=box)
    assert status == 128 + 9 and "held 512" not in printed
    assert said == ["the grading kernel was stopped: it held more than 0.5 GiB of memory in all (shared memory, "
                    "files in its folders and kernel buffers included)"]
    assert not any(folder.exists() for folder in box.folders)  # removed once the kernel is gone


@needs_cgroup
def test_cgroups_left_by_killed_launchers_are_swept_and_a_busy_one_is_kept():
    """nbgrader SIGKILLs a kernel's launcher, whose own clean-up then never runs: the next kernel's sweeps it."""
    busy = sandbox.KernelCgroup.make(1 << 30, 64)   # a kernel still running
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], preexec_fn=busy.enter)
    mine = sandbox.KernelCgroup.make(1 << 30, 64)   # this process's: a launcher alive, setting up (empty)
    left = []                                       # a launcher killed before it could remove its own
    for parent in {f.parent for f in mine.folders}:
        left.append(parent / f"{sandbox.KernelCgroup.PREFIX}{2 ** 22 + 12345}-dead")  # no such process
        left[-1].mkdir()
    fresh = None
    try:
        fresh = sandbox.KernelCgroup.make(1 << 30, 64)
        assert not any(f.exists() for f in left)                  # its launcher gone, empty: swept
        assert all(f.exists() for f in busy.folders + mine.folders)  # launcher alive: kept, even empty
    finally:
        sleeper.kill()
        sleeper.wait()
        busy.remove()
        mine.remove()
        if fresh is not None:
            fresh.remove()
    assert fresh is not None and not any(f.exists() for f in busy.folders + mine.folders + fresh.folders)


@needs_bwrap
@needs_cgroup
def test_the_cgroup_caps_threads(course):
    box = sandbox.KernelCgroup.make(1024 ** 3, 64)
    status, printed, said = launched(course, """
        import threading
        gate, started = threading.Event(), 0
        try:
            for _ in range(500):
                threading.Thread(target=gate.wait, daemon=True).start()
                started += 1
        except RuntimeError as error:
            print("refused:", error)
        print("started", started)
        gate.set()
    """, box=box)
    assert status == 0 and said == [] and "refused: can't start new thread" in printed
    assert 50 <= int(printed.split("started ")[1]) < 64
