"""The course's JupyterLab server: notebooks open unmodified, whatever Python runs them.

The notebooks store `language_info: {"name": "python"}` (the release tool writes no Python
version into them). When a kernel connects, JupyterLab copies the kernel's full
`language_info` (its Python version, mimetype, lexer...) into the notebook's metadata; a
value that differs from the stored one marks the notebook modified before the student has
typed anything, and asks "save your changes?" on closing it.

`CourseContentsManager` fills in the kernel's `language_info` as a notebook is read, so the
two agree from the start. The server's own Python is the kernel's: the course's "python3"
kernel runs the interpreter the server runs (`tasks.py lab` and Binder both start it from
the same environment), so the value is the one ipykernel will report, for any Python 3.11+.
A notebook that names another kernel, or another language, is left as it is.

Used by `python3 tasks.py lab` (`--ServerApp.contents_manager_class`) and by
binder/postBuild (`c.ServerApp.contents_manager_class` in jupyter_server_config.py).
"""

import copy
import functools

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

# The kernel whose language_info is filled in: the one every course notebook names.
KERNEL_NAME = "python3"


@functools.cache
def _language_info() -> dict:
    from ipykernel.ipkernel import IPythonKernel  # imported once, when the first notebook is read

    return copy.deepcopy(dict(IPythonKernel.language_info))


def kernel_language_info() -> dict:
    """The `language_info` an ipykernel started by this interpreter sends in its kernel_info reply (a copy)."""
    return copy.deepcopy(_language_info())


def match_kernel(notebook) -> None:
    """Give a notebook that runs on the course's kernel that kernel's full language_info (in place)."""
    metadata = notebook.get("metadata")
    if not isinstance(metadata, dict):
        return
    kernelspec = metadata.get("kernelspec") or {}
    language = (metadata.get("language_info") or {}).get("name", "python")
    if kernelspec.get("name", KERNEL_NAME) == KERNEL_NAME and language == "python":
        metadata["language_info"] = kernel_language_info()


class CourseContentsManager(AsyncLargeFileManager):
    """Jupyter's default contents manager, but notebooks are read with the kernel's language_info."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
            match_kernel(model["content"])
        return model
