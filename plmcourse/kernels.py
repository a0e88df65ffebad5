"""Kernels that run notebooks side by side without colliding: each on Unix sockets in a folder of its own.

jupyter_client gives a kernel five TCP ports by binding free ones and releasing them before the kernel starts,
so two kernels started at the same moment (two pytest-xdist workers, a benchmark beside a test) can be handed
the same port, and one of them dies before it replies (jupyter/jupyter_client#487: "Kernel died before
replying to kernel_info", or a run that waits for a reply that never comes). Unix sockets in a fresh folder
cannot collide, and they are not reachable from the network either. The grading sandbox does the same
(plmcourse.autograde.sandbox).

    with private_kernel_config() as config:
        NotebookClient(nb, kernel_name="python3", config=config).execute()
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

__all__ = ["private_kernel_config"]


@contextlib.contextmanager
def private_kernel_config():
    """A traitlets Config whose KernelManager talks to its kernel over Unix sockets in a new folder (removed after)."""
    from traitlets.config import Config

    folder = Path(tempfile.mkdtemp(prefix="plmk-"))  # short: a socket's path has at most 107 bytes
    try:
        yield Config({"KernelManager": {"transport": "ipc", "ip": str(folder / "kernel")}})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
