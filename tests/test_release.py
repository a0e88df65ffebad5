"""The student notebooks in course/release/ are exactly what nbgrader generates from course/source/."""

import json

import nbformat
import pytest

from conftest import COURSE, release_notebooks, source_notebooks
from plmcourse.release import COLAB_TAG, colab_setup_source, needs_weights

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
