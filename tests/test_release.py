"""The student notebooks in course/release/ are exactly what nbgrader generates from course/source/."""

import json
import re
import shutil
import tomllib

import nbformat
import pytest

from conftest import COURSE, ROOT, release_notebooks, source_notebooks
from plmcourse.release import (COLAB_TAG, KERNELSPEC, colab_setup_source, needs_weights, owner_and_name,
                               rename_repository, repository_links, repository_url, rewrite_links,
                               tidy_sources)

SOURCES = source_notebooks()
RELEASES = release_notebooks()


def ids(paths):
    return [p.parent.name for p in paths]


def test_every_source_has_a_release_and_back():
    assert SOURCES, "no source notebooks found under course/source/"
    assert ids(SOURCES) == ids(RELEASES), (
        "course/source and course/release hold different assignments: run `python3 tasks.py release`")


@pytest.mark.nbgrader
@pytest.mark.parametrize("release", RELEASES, ids=ids(RELEASES))
def test_release_is_what_generation_produces(release, generated_course):
    fresh = generated_course / "release" / release.parent.name / release.name
    committed = json.loads(release.read_text())
    generated = json.loads(fresh.read_text())
    assert committed == generated, (
        f"{release.relative_to(COURSE)} differs from what nbgrader generates from its source "
        f"(edited by hand, or source changed without `python3 tasks.py release`)")


@pytest.mark.nbgrader
@pytest.mark.parametrize("source", SOURCES, ids=ids(SOURCES))
def test_sources_are_tidy(source, generated_course):
    """Tidying (strip outputs, kernel, Colab cell) changes nothing in a committed source."""
    tidied = generated_course / "source" / source.parent.name / source.name
    assert source.read_text() == tidied.read_text(), (
        f"{source.relative_to(COURSE)} is not tidy: run `python3 tasks.py release`")


@pytest.mark.parametrize("source", SOURCES, ids=ids(SOURCES))
def test_sources_carry_no_outputs(source):
    nb = nbformat.read(source, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]
    assert not dirty, f"{source.name}: code cells {dirty} carry outputs or execution counts"


@pytest.mark.parametrize("path", SOURCES + RELEASES, ids=[f"source-{n}" for n in ids(SOURCES)]
                         + [f"release-{n}" for n in ids(RELEASES)])
def test_kernel_is_python3_and_first_cell_is_colab_setup(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    first = nb.cells[0]
    assert COLAB_TAG in first.metadata.get("tags", [])
    assert first.source == colab_setup_source(weights=needs_weights(nb))
    assert sum(COLAB_TAG in c.metadata.get("tags", []) for c in nb.cells) == 1
    # The display name the installed kernel shows, or JupyterLab rewrites the notebook on opening.
    assert nb.metadata["kernelspec"]["display_name"] == KERNELSPEC["display_name"]


@pytest.mark.parametrize("path, pattern", [
    ("tasks.py", r'KERNEL_DISPLAY_NAME = "([^"]+)"'),
    ("binder/postBuild", r'--display-name "([^"]+)"'),
])
def test_install_scripts_give_the_kernel_the_notebooks_display_name(path, pattern):
    names = set(re.findall(pattern, (ROOT / path).read_text()))
    assert names == {KERNELSPEC["display_name"]}, f"{path} installs the kernel as {names}"


FORK = "a-fork/plm-course"


@pytest.fixture
def scratch_repository(tmp_path):
    """The files `release --repo` rewrites, copied: the real ones are never touched."""
    for name in ("README.md", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path)
    shutil.copytree(COURSE / "source", tmp_path / "course" / "source")
    return tmp_path


def test_release_repo_points_pyproject_and_readme_at_the_fork(scratch_repository):
    old = owner_and_name(repository_url())
    readme = (scratch_repository / "README.md").read_text()
    links = len(repository_links(old).findall(readme))
    assert links == len(RELEASES) + 1  # a Colab link per notebook and the Binder badge

    assert rename_repository(scratch_repository, FORK) == old

    pyproject = tomllib.loads((scratch_repository / "pyproject.toml").read_text())
    assert pyproject["project"]["urls"]["Repository"] == f"https://github.com/{FORK}"
    assert repository_url(scratch_repository) == f"https://github.com/{FORK}"  # the file, not the metadata
    renamed = (scratch_repository / "README.md").read_text()
    assert not repository_links(old).findall(renamed)
    assert len(repository_links(FORK).findall(renamed)) == links
    assert f"mybinder.org/v2/gh/{FORK}/HEAD" in renamed
    assert rewrite_links(renamed, FORK, old) == readme  # nothing else changed (nanoGPT's link stays)


def test_release_repo_renders_the_forks_colab_cell(scratch_repository):
    rename_repository(scratch_repository, FORK)
    course = scratch_repository / "course"
    tidy_sources(course, url=repository_url(scratch_repository))  # what release_course does first
    for path in sorted((course / "source").glob("*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        assert nb.cells[0].source == colab_setup_source(f"https://github.com/{FORK}", needs_weights(nb))
        assert f"git+https://github.com/{FORK}" in nb.cells[0].source


@pytest.mark.parametrize("text, expected", [
    ("https://github.com/plmcourse/plmcourse", f"https://github.com/{FORK}"),
    ("https://github.com/plmcourse/plmcourse.git", f"https://github.com/{FORK}.git"),
    ("(https://colab.research.google.com/github/plmcourse/plmcourse/blob/main/x.ipynb)",
     f"(https://colab.research.google.com/github/{FORK}/blob/main/x.ipynb)"),
    ("https://github.com/plmcourse/plmcourse-extras", "https://github.com/plmcourse/plmcourse-extras"),
    ("https://github.com/karpathy/nanoGPT", "https://github.com/karpathy/nanoGPT"),
])
def test_rewrite_links_changes_only_the_repository_itself(text, expected):
    assert rewrite_links(text, "plmcourse/plmcourse", FORK) == expected


def test_release_repo_refuses_what_is_not_owner_and_name(scratch_repository):
    before = (scratch_repository / "pyproject.toml").read_text()
    for bad in ("plm-course", "a/b/c", "https://github.com/a/b", "a b/c"):
        with pytest.raises(ValueError):
            rename_repository(scratch_repository, bad)
    assert (scratch_repository / "pyproject.toml").read_text() == before


@pytest.mark.parametrize("release", RELEASES, ids=ids(RELEASES))
def test_release_has_no_solutions_or_hidden_tests(release):
    text = release.read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text, f"{release.name} contains '{marker}'"
    source = nbformat.read(COURSE / "source" / release.parent.name / release.name, as_version=4)
    student = nbformat.read(release, as_version=4)
    by_id = {c.metadata["nbgrader"]["grade_id"]: c for c in student.cells if "nbgrader" in c.metadata}
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            solution = solution_lines(cell.source)
            shown = by_id[meta["grade_id"]].source
            leaked = [line for line in solution if line.strip() and line in shown.splitlines()]
            assert not leaked, f"{release.name}, {meta['grade_id']}: solution lines leaked: {leaked}"
            assert "raise NotImplementedError()" in shown
        if meta.get("grade"):
            hidden = hidden_lines(cell.source)
            assert hidden, f"{meta['grade_id']} in {release.name} has no hidden tests"
            assert not [line for line in hidden if line in by_id[meta["grade_id"]].source.splitlines()]


def between(source, begin, end):
    lines, inside = [], False
    for line in source.splitlines():
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif inside:
            lines.append(line)
    return lines


def solution_lines(source):
    # The docstring and signature stay visible; only what is between the markers is the answer.
    return [line for line in between(source, "BEGIN SOLUTION", "END SOLUTION")
            if line.strip() not in {"", "return", "else:"}]


def hidden_lines(source):
    return between(source, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
