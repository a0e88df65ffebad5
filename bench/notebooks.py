"""The course's own budget: every source notebook run top to bottom, wall time and peak memory.

Each notebook runs in a fresh `python3` kernel, once with the machine's threads and once
with one thread (as on Binder: OMP_NUM_THREADS=1 and MKL_NUM_THREADS=1 in the kernel's
environment). Budget per notebook: 120 s and 2 GB; the whole course: 15 minutes.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from bench.common import write_result
from plmcourse.kernels import private_kernel_config

ROOT = Path(__file__).resolve().parent.parent
# VmHWM: the kernel's own peak resident memory (ru_maxrss would include the forking parent's).
PEAK = ("import json as _j\n"
        "_hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "print(_j.dumps({'peak': int(_hwm) * 1024}))")


def run(path: Path, threads: int | None) -> tuple[float, int]:
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PEAK))
    saved = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    if threads:
        os.environ.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    try:
        start = time.perf_counter()
        with private_kernel_config() as config:  # Unix sockets: no port race with kernels started beside it
            NotebookClient(nb, kernel_name="python3", timeout=600, config=config,
                           resources={"metadata": {"path": str(path.parent)}}).execute()
        seconds = time.perf_counter() - start
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return seconds, json.loads(nb.cells[-1].outputs[0]["text"])["peak"]


def main():
    """Every notebook; with BENCH_NOTEBOOKS=08_sentence_embeddings,... only those, the others' rows kept
    from the last results (so one changed notebook does not cost a rerun of the whole course)."""
    only = [n for n in os.environ.get("BENCH_NOTEBOOKS", "").split(",") if n]
    kept = {}
    results = ROOT / "bench" / "results" / "notebooks.json"
    if only and results.exists():
        kept = {(r["notebook"], r["threads"]): r for r in json.loads(results.read_text())["rows"]
                if r["notebook"] != "whole course"}
    rows = []
    totals = {"all threads": 0.0, "1 thread": 0.0}
    for path in sorted((ROOT / "course" / "source").glob("*/*.ipynb")):
        for label, threads in (("all threads", None), ("1 thread", 1)):
            if only and path.stem not in only and (path.stem, label) in kept:
                rows.append(kept[(path.stem, label)])
                totals[label] += rows[-1]["seconds"]
                continue
            seconds, peak = run(path, threads)
            totals[label] += seconds
            rows.append({"notebook": path.stem, "threads": label, "seconds": round(seconds, 1),
                         "peak memory (MiB)": round(peak / 2 ** 20),
                         "within budget (120 s, 2 GiB)": "yes" if seconds < 120 and peak < 2 * 2 ** 30 else "NO"})
    for label, seconds in totals.items():
        rows.append({"notebook": "whole course", "threads": label, "seconds": round(seconds, 1),
                     "peak memory (MiB)": "", "within budget (120 s, 2 GiB)":
                     "yes" if seconds < 900 else "NO (budget 15 min)"})
    return write_result("notebooks", {"title": "The course's own budget: every notebook, top to bottom",
                                      "rows": rows})


if __name__ == "__main__":
    print(main())
