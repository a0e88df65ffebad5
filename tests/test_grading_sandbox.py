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
from pathlib import Path

import nbformat
import pytest

import plmcourse
from plmcourse.autograde import sandbox, workflow

WHY_NOT = sandbox.available()
needs_bwrap = pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))

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


def inside(course, code, env=None, parent_env=None):
    """Run `code` in the sandbox for alice's folder; returns what it printed as JSON (last line)."""
    cmd = sandbox.bwrap_command([sys.executable, "-c", textwrap.dedent(code)], folder_of(course), course,
                                env=env)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=folder_of(course),
                          env=parent_env, preexec_fn=sandbox.limit_resources)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_bwrap
def test_the_grader_environment_does_not_go_in(course, monkeypatch):
    monkeypatch.setenv("GRADER_SECRET_TOKEN", "s3cr3t-token")
    monkeypatch.setenv("PLMCOURSE_CELL_SECONDS", "17")  # a course setting: passed on
    env = inside(course, "import json, os; print(json.dumps(dict(os.environ)))",
                 env={"PLMCOURSE_JUDGE_FD": "3"})
    assert "GRADER_SECRET_TOKEN" not in env
    assert "s3cr3t-token" not in json.dumps(env)
    assert env["HOME"] == "/tmp" and env["PLMCOURSE_SANDBOX"] == "1" and env["PYTHONNOUSERSITE"] == "1"
    assert env["PATH"].split(":") == [os.path.dirname(sys.executable), "/usr/bin", "/bin"]
    assert env["PLMCOURSE_JUDGE_FD"] == "3" and env["PLMCOURSE_CELL_SECONDS"] == "17"
    assert "PYTHONPATH" not in env or os.environ.get("PYTHONPATH")
    expected = {"PATH", "HOME", "MPLCONFIGDIR", "OMP_WAIT_POLICY", "PYTHONNOUSERSITE", "PYTHONDONTWRITEBYTECODE",
                "PLMCOURSE_SANDBOX", "LANG", "PYTHONPATH", "PLMCOURSE_JUDGE_FD", "PLMCOURSE_CELL_SECONDS",
                "PLMCOURSE_RUN_DEMOS", "PWD"}
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
