"""plmcourse.labserver: notebooks are read with the kernel's own language_info, so that JupyterLab,
which copies the kernel's language_info into a notebook when the kernel connects, finds nothing to
change and does not mark the notebook modified (tests/test_browser.py checks that in a browser)."""

import asyncio
import json
import sys

import nbformat

from plmcourse.labserver import CourseContentsManager, kernel_language_info, match_kernel


def test_the_language_info_is_the_one_this_python_s_ipykernel_reports():
    from ipykernel.ipkernel import IPythonKernel

    info = kernel_language_info()
    assert info == IPythonKernel.language_info
    assert info["name"] == "python" and info["version"] == sys.version.split()[0]
    info["version"] = "changed"  # a copy: changing it changes nothing
    assert kernel_language_info()["version"] == sys.version.split()[0]


def test_course_notebooks_get_it_whatever_python_they_name():
    for stored in ({"name": "python"}, {"name": "python", "version": "3.99.0"}, None):
        nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
        if stored is not None:
            nb.metadata["language_info"] = stored
        match_kernel(nb)
        assert nb.metadata["language_info"] == kernel_language_info()


def test_other_kernels_and_languages_are_left_alone():
    other_kernel = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "ir", "display_name": "R"},
                                                      "language_info": {"name": "R"}})
    other_language = nbformat.v4.new_notebook(metadata={"language_info": {"name": "julia"}})
    for nb in (other_kernel, other_language):
        before = json.dumps(nb, sort_keys=True)
        match_kernel(nb)
        assert json.dumps(nb, sort_keys=True) == before


def test_the_contents_manager_reads_notebooks_with_it_and_leaves_the_file_alone(tmp_path):
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"},
                                            "language_info": {"name": "python"}})
    path = tmp_path / "a.ipynb"
    nbformat.write(nb, path)
    before = path.read_text()
    manager = CourseContentsManager(root_dir=str(tmp_path))
    model = asyncio.run(manager.get("a.ipynb"))
    assert model["type"] == "notebook"
    assert model["content"]["metadata"]["language_info"] == kernel_language_info()
    assert path.read_text() == before  # reading changes nothing on disk
    assert asyncio.run(manager.get("", content=True))["type"] == "directory"  # other models pass through
