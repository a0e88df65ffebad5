"""`plmcourse doctor` and the environment report, run as real subprocesses."""

import os
import subprocess
import sys

import pytest

import plmcourse
from plmcourse.report import environment_report, format_report


def doctor(**env):
    return subprocess.run([sys.executable, "-m", "plmcourse", "doctor"], capture_output=True, text=True,
                          env={**os.environ, **env})


@pytest.mark.integration  # a real `plmcourse doctor` process (torch, Jupyter, the kernels)
def test_doctor_passes_here(tmp_path):
    done = doctor(PLMCOURSE_CACHE=str(tmp_path / "cache"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"plmcourse        {plmcourse.__version__}" in done.stdout or plmcourse.__version__ in done.stdout
    assert "everything the course needs is here" in done.stdout
    assert (tmp_path / "cache").is_dir()


@pytest.mark.integration  # a real `plmcourse doctor` process (torch, Jupyter, the kernels)
def test_doctor_fails_with_one_sentence_when_the_cache_is_not_writable(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = doctor(PLMCOURSE_CACHE=str(blocker / "cache"))
    assert done.returncode == 1
    problems = [line for line in done.stdout.splitlines() if line.startswith("doctor: ")]
    assert len(problems) == 1 and "cache directory" in problems[0] and "PLMCOURSE_CACHE" in problems[0]


@pytest.mark.integration  # a real `plmcourse doctor` process (torch, Jupyter, the kernels)
def test_doctor_fails_when_the_python3_kernel_is_missing(tmp_path):
    # An empty Jupyter path with the environment's own kernels hidden: no `python3` kernel anywhere.
    done = subprocess.run(
        [sys.executable, "-c",
         "import jupyter_client.kernelspec as ks, sys\n"
         "ks.KernelSpecManager.find_kernel_specs = lambda self: {}\n"
         "from plmcourse.cli import main\n"
         "sys.exit(main(['doctor']))"],
        capture_output=True, text=True, env={**os.environ, "PLMCOURSE_CACHE": str(tmp_path)})
    assert done.returncode == 1
    assert "No Jupyter kernel named `python3`" in done.stdout


def test_report_is_the_same_dict_notebook_00_prints():
    report = environment_report()
    for key in ("python", "numpy", "torch", "device", "cpu cores", "torch threads", "OMP_WAIT_POLICY"):
        assert key in report
    assert report["OMP_WAIT_POLICY"] == "PASSIVE"
    assert format_report(report).count("\n") == len(report) - 1


def test_importing_plmcourse_sets_omp_wait_policy_before_torch():
    code = ("import os; os.environ.pop('OMP_WAIT_POLICY', None)\n"
            "import plmcourse, torch\n"
            "print(os.environ['OMP_WAIT_POLICY'], plmcourse.TORCH_LOADED_BEFORE_PLMCOURSE)")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.split() == ["PASSIVE", "False"]


def test_checkpoints_command_refuses_an_unknown_name_in_one_sentence():
    done = subprocess.run([sys.executable, "-m", "plmcourse", "checkpoints", "build", "tiny-t5"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "no checkpoint named 'tiny-t5'" in done.stderr and "Traceback" not in done.stderr


def test_release_repo_refuses_a_malformed_name_in_one_sentence(tmp_path):
    # Refused before anything is written: the scratch pyproject.toml stays as it was.
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "plmcourse"\n')
    done = subprocess.run([sys.executable, "-m", "plmcourse", "release", "--repo", "not-a-repo",
                           "--course", str(tmp_path / "course")], capture_output=True, text=True)
    assert done.returncode == 2
    assert "'not-a-repo' is not a GitHub OWNER/NAME" in done.stderr and "Traceback" not in done.stderr
    assert (tmp_path / "pyproject.toml").read_text() == '[project]\nname = "plmcourse"\n'


def _tasks_module():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("plmcourse_tasks_cli", Path(__file__).parents[1] / "tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tasks_test_shares_the_cores_among_its_workers(monkeypatch):
    tasks = _tasks_module()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(tasks.os, "sysconf", lambda name: {"SC_PAGE_SIZE": 4096}.get(name, 16 * 1024 ** 3 // 4096))
    for cores, workers, threads in [(1, None, None), (2, "2", "1"), (4, "4", "1"), (8, "4", "2"), (16, "4", "4")]:
        monkeypatch.setattr(tasks.os, "sched_getaffinity", lambda pid, n=cores: set(range(n)), raising=False)
        options = tasks.test_workers([])
        assert (options[1] if options else None) == workers, (cores, options)
        assert tasks.test_threads([]).get("OMP_NUM_THREADS") == threads, (cores, tasks.test_threads([]))
    # Your own -n (or -n 0) is kept, and so is a thread count already set.
    assert tasks.test_workers(["-n", "0"]) == [] and tasks.test_threads(["-n", "0"]) == {}
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert tasks.test_threads([]) == {}


def test_setup_gives_uv_pip_s_own_sources_or_leaves_the_work_to_pip():
    """uv does not read pip's configuration: setup translates `pip config list` (files and PIP_* variables), so
    that uv installs from the same indexes, wheel folders and constraints, and uses pip where it cannot."""
    tasks = _tasks_module()
    options, env = tasks.uv_options(
        "global.extra-index-url='file:///opt/pypi/simple file:///opt/more'\n"
        "global.find-links='/opt/wheels'\n:env:.find-links='/opt/wheels'\n"  # a file and PIP_FIND_LINKS agree
        "global.constraint='/etc/c.txt'\nglobal.index-url='https://mirror/simple'\n"
        "global.cert='/etc/ca.crt'\n:env:.default-timeout='180'\n:env:.disable-pip-version-check='1'\n")
    pairs = list(zip(options[::2], options[1::2]))
    assert pairs[0] == ("--index-strategy", "unsafe-best-match")  # any index's best version, as pip takes it
    assert set(pairs[1:]) == {("--extra-index-url", "file:///opt/pypi/simple"), ("--extra-index-url", "file:///opt/more"),
                              ("--find-links", "/opt/wheels"), ("--constraint", "/etc/c.txt"),
                              ("--index-url", "https://mirror/simple")}
    assert len(pairs) == 6  # /opt/wheels once
    assert env == {"SSL_CERT_FILE": "/etc/ca.crt", "UV_HTTP_TIMEOUT": "180"}
    assert tasks.uv_options("") == (["--index-strategy", "unsafe-best-match"], {})
    # A setting uv would not honour the same way: pip does the installing
    assert tasks.uv_options("global.require-hashes='true'\n") is None
