"""`pip install .` gives a working package: the built wheel holds every subpackage and imports alone."""

import importlib.metadata
import os
import subprocess
import sys
import tomllib
import zipfile

import pytest

from conftest import ROOT


pytestmark = pytest.mark.integration  # builds a wheel and installs it


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                    "--quiet", "-w", str(out), str(ROOT)], check=True)
    (built,) = out.glob("plmcourse-*.whl")
    return built


def test_wheel_contains_every_subpackage(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    packages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "plmcourse").rglob("__init__.py"))
    for init in packages:
        assert init in names, f"{init} is missing from the wheel"
    assert not [n for n in names if n.startswith(("tests/", "course/", "bench/"))]


def test_wheel_ships_the_course_checkpoints(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "plmcourse/pretrained/weights").glob("*.safetensors"))
    assert shipped and all(name in names for name in shipped), shipped


def test_wheel_metadata_lists_runtime_dependencies_and_the_cli(wheel):
    archive = zipfile.ZipFile(wheel)
    metadata = archive.read(next(n for n in archive.namelist() if n.endswith("METADATA"))).decode()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for spec in pyproject["project"]["dependencies"]:
        assert f"Requires-Dist: {spec}" in metadata
    assert "Requires-Python: >=3.11" in metadata
    entry_points = archive.read(next(n for n in archive.namelist() if n.endswith("entry_points.txt"))).decode()
    assert "plmcourse = plmcourse.cli:main" in entry_points


def test_installed_wheel_imports_without_the_source_tree(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target",
                    str(target), str(wheel)], check=True)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import plmcourse, plmcourse.nn, plmcourse.ref, "
            "plmcourse.grading; from plmcourse.pretrained import load_checkpoint; "
            "assert not load_checkpoint('tiny-bert', device='cpu').model.training; "
            "print(plmcourse.__version__, plmcourse.__file__)")
    done = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "PYTHONSAFEPATH": "1"})
    assert done.returncode == 0, done.stderr
    version, location = done.stdout.split()
    assert version == importlib.metadata.version("plmcourse")
    assert location.startswith(str(target))
