"""plmcourse.kernels: notebooks run on kernels that talk over Unix sockets in a folder of their own."""

import threading
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from plmcourse.kernels import private_kernel_config

pytestmark = pytest.mark.notebook


def _run(nb, config, seen):
    client = NotebookClient(nb, kernel_name="python3", timeout=120, config=config)
    with client.setup_kernel():
        seen.append((client.km.transport, client.km.ip, dict(client.km.get_connection_info())))
        client.execute_cell(nb.cells[0], 0)


def test_two_notebooks_started_at_once_each_get_their_own_sockets():
    notebooks = [nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"print({i} * 7)")]) for i in (1, 2)]
    seen, folders = [], []
    with private_kernel_config() as first, private_kernel_config() as second:
        folders = [c.KernelManager.ip for c in (first, second)]
        threads = [threading.Thread(target=_run, args=(nb, c, seen)) for nb, c in zip(notebooks, (first, second))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    assert [nb.cells[0].outputs[0]["text"] for nb in notebooks] == ["7\n", "14\n"]
    assert sorted(ip for _, ip, _ in seen) == sorted(folders) and folders[0] != folders[1]
    assert all(transport == "ipc" and info["transport"] == "ipc" for transport, _, info in seen)
    assert all(len(f"{ip}-{port}") < 100 for _, ip, info in seen for port in (info["shell_port"],))
    assert not any(Path(f).parent.exists() for f in folders)  # each folder removed after its run
