"""JupyterLab really serves the course, and Binder's postBuild leaves students only Validate.

Both start a real Jupyter server on localhost and talk to it over HTTP.
"""

import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT, release_notebooks
from support import free_port, get, jupyter_server, server_args, venv_env

# "menu": nbgrader's menu-bar entry, empty without the others.
NBGRADER_STUDENT_HIDDEN = ["formgrader", "assignment-list", "course-list", "create-assignment", "menu"]
NEWS_PLUGIN = "@jupyterlab/apputils-extension:announcements"  # asks on first start whether to fetch news


def page_config(html: str) -> dict:
    match = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(match.group(1))


def lab_env(tmp_path) -> dict:
    return venv_env(HOME=str(tmp_path), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))


pytestmark = pytest.mark.integration  # each test starts a Jupyter server (and pip, for Binder's postBuild)


def test_readme_lab_command_serves_the_release_notebooks(tmp_path):
    """`python3 tasks.py lab` (the README's first command) serves course/release/ with only Validate."""
    port = free_port()
    cmd = [sys.executable, str(ROOT / "tasks.py"), "lab", *server_args(port)]
    with jupyter_server(cmd, lab_env(tmp_path), port) as base:
        status, html = get(f"{base}/lab")
        assert status == 200
        disabled = page_config(html).get("disabledExtensions", [])
        for ext in NBGRADER_STUDENT_HIDDEN:
            assert f"@jupyter/nbgrader:{ext}" in disabled, f"the student lab shows nbgrader's {ext}"
        assert NEWS_PLUGIN in disabled, "the student lab asks about fetching news"
        assert "@jupyter/nbgrader:validate-assignment" not in disabled
        assert get(f"{base}/formgrader")[0] == 404
        status, body = get(f"{base}/api/contents/")
        assert status == 200
        listed = {item["name"] for item in json.loads(body)["content"]}
        assert {p.parent.name for p in release_notebooks()} <= listed
        from plmcourse.labserver import kernel_language_info

        for nb in release_notebooks():
            status, body = get(f"{base}/api/contents/{nb.parent.name}/{nb.name}")
            assert status == 200 and json.loads(body)["type"] == "notebook"
            # Read with the kernel's full language_info: JupyterLab finds nothing to change on connecting.
            assert json.loads(body)["content"]["metadata"]["language_info"] == kernel_language_info()
    # Hidden without touching the user's own Jupyter configuration. (jupyter_core may leave its
    # own "migrated" marker in ~/.jupyter when it finds ~/.ipython; that is not configuration.)
    written = {p.relative_to(tmp_path).as_posix() for p in (tmp_path / ".jupyter").rglob("*") if p.is_file()}
    assert written <= {".jupyter/migrated"}, written


def test_instructor_lab_keeps_every_nbgrader_tool(tmp_path):
    """`python3 tasks.py lab --instructor` serves course/ with the formgrader and every nbgrader plugin."""
    port = free_port()
    cmd = [sys.executable, str(ROOT / "tasks.py"), "lab", "--instructor", *server_args(port)]
    with jupyter_server(cmd, lab_env(tmp_path), port) as base:
        status, html = get(f"{base}/lab")
        assert status == 200
        config = page_config(html)
        assert "@jupyter/nbgrader" in {ext["name"] for ext in config["federated_extensions"]}
        disabled = [name for name in config.get("disabledExtensions", []) if name.startswith("@jupyter/nbgrader")]
        assert not disabled, f"the instructor lab hides {disabled}"
        assert get(f"{base}/formgrader")[0] == 200
        status, body = get(f"{base}/api/contents/")
        assert {"source", "release"} <= {item["name"] for item in json.loads(body)["content"]}


def test_binder_postbuild_leaves_students_only_validate(tmp_path):
    """Run binder/postBuild in a scratch HOME, then check what a student's JupyterLab offers."""
    home = tmp_path / "home"
    home.mkdir()
    env = venv_env(HOME=str(home), JUPYTER_CONFIG_DIR=str(home / ".jupyter"),
                   JUPYTER_DATA_DIR=str(home / ".local/share/jupyter"),
                   JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    done = subprocess.run(["bash", str(ROOT / "binder" / "postBuild")], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr

    kernel = json.loads((home / ".local/share/jupyter/kernels/python3/kernel.json").read_text())
    assert kernel["env"]["OMP_WAIT_POLICY"] == "PASSIVE"

    port = free_port()
    cmd = [sys.executable, "-m", "jupyterlab", *server_args(port)]
    with jupyter_server(cmd, env, port) as base:
        status, html = get(f"{base}/lab")
        assert status == 200
        config = page_config(html)
        disabled = config.get("disabledExtensions", [])
        for ext in NBGRADER_STUDENT_HIDDEN:
            assert f"@jupyter/nbgrader:{ext}" in disabled
        assert NEWS_PLUGIN in disabled
        assert "@jupyter/nbgrader:validate-assignment" not in disabled
        assert get(f"{base}/formgrader")[0] == 404                  # instructor server side is off
        assert get(f"{base}/assignments/validate")[0] != 404        # the Validate endpoint is on
    py_config = (home / ".jupyter" / "jupyter_server_config.py").read_text()
    assert 'default_url = "/lab/tree/course/release"' in py_config
    assert 'contents_manager_class = "plmcourse.labserver.CourseContentsManager"' in py_config
