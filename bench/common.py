"""What every benchmark shares: timing with medians, machine facts, and the results files."""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import statistics
import time
from pathlib import Path

import plmcourse  # noqa: F401  (sets OMP_WAIT_POLICY before torch loads)

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
RESULTS_DIR = HERE / "results"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    cuda = torch.cuda.is_available()
    return {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(0) if cuda else "none",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "not set"),
    }


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def interleaved_medians(fns: dict, repeats: int = 15, warmup: int = 2, device="cpu") -> dict:
    """Median wall time of each fn() in seconds, after `warmup` uncounted rounds.

    The variants take turns (a round runs each once), so a disturbance on the machine
    hits all of them alike instead of spoiling one variant's ratio.
    """
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    sync(device)
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            sync(device)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def write_result(name: str, payload: dict) -> Path:
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2) + "\n")
    return path


def read_results() -> dict:
    return {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS_DIR.glob("*.json"))}


def run_notebook_variant(notebook: Path, seed: int, report: str, replacements: dict | None = None,
                         prelude: str | None = None):
    """Run a source notebook top to bottom with `SEED = 0` replaced by `seed` (and any other
    text replacements), its grading cells left out, then `report`, a cell that prints one JSON
    line. Failed assertions are recorded, not hidden (allow_errors). `prelude`: a cell run first.

    Returns (the report's JSON, the messages of the errors raised, seconds).
    """
    import nbformat
    from nbclient import NotebookClient

    from plmcourse.kernels import private_kernel_config

    nb = nbformat.read(notebook, as_version=4)
    nb.cells = [c for c in nb.cells if not c.metadata.get("nbgrader", {}).get("grade")]
    for cell in nb.cells:
        cell.source = re.sub(r"(?m)^SEED = 0\b", f"SEED = {seed}", cell.source)
        for old, new in (replacements or {}).items():
            cell.source = cell.source.replace(old, new)
    nb.cells.append(nbformat.v4.new_code_cell(report))
    if prelude:
        nb.cells.insert(0, nbformat.v4.new_code_cell(prelude))
    start = time.perf_counter()
    with private_kernel_config() as config:  # Unix sockets: no port race with kernels started beside it
        NotebookClient(nb, kernel_name="python3", timeout=600, allow_errors=True, config=config,
                       resources={"metadata": {"path": str(notebook.parent)}}).execute()
    seconds = time.perf_counter() - start
    failed = [o.evalue[:80] or o.ename for c in nb.cells if c.cell_type == "code"
              for o in c.get("outputs", []) if o.output_type == "error"]
    # The report is the last line the report cell printed to stdout (a warning on stderr, or a stream
    # split in two, must not hide it).
    printed = "".join(o["text"] for o in nb.cells[-1].outputs if o.output_type == "stream" and o.name == "stdout")
    lines = [line for line in printed.splitlines() if line.strip()]
    return (json.loads(lines[-1]) if lines else {}), failed, seconds
