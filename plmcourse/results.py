"""The full runs a notebook shows beside its small live one: bench/results/<name>.json.

A notebook has two minutes, so an experiment over many seeds or a sweep runs in `bench/` (`python -m bench
<name>`) and the notebook shows its table. In a checkout of the repository (local, Binder) the file is next
to the package. Colab installs the package without `bench/`, so there the file is downloaded once from the
repository into the course's cache; offline, the notebook says where the table comes from and goes on.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from plmcourse.report import cache_dir

CHECKOUT_RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results"
DOWNLOAD_SECONDS = 10


def bench_results(name: str, download: bool = True) -> dict | None:
    """The json `python -m bench <name>` wrote, or None (after printing why) when it cannot be found."""
    for folder in (CHECKOUT_RESULTS, cache_dir() / "bench"):
        path = folder / f"{name}.json"
        if path.is_file():
            return json.loads(path.read_text())
    if download:
        from plmcourse.release import repository_url

        try:
            url = f"{raw_url(repository_url())}/main/bench/results/{name}.json"
            with urllib.request.urlopen(url, timeout=DOWNLOAD_SECONDS) as response:
                text = response.read().decode()
            table = json.loads(text)
        except (OSError, ValueError, ImportError, RuntimeError) as error:  # offline, no such file, no metadata
            print(f"bench/results/{name}.json is not here and could not be downloaded ({error}): "
                  f"`python -m bench {name}` in the repository makes it.")
            return None
        (cache_dir() / "bench").mkdir(parents=True, exist_ok=True)
        (cache_dir() / "bench" / f"{name}.json").write_text(text)
        return table
    print(f"bench/results/{name}.json is not here: `python -m bench {name}` in the repository makes it.")
    return None


def raw_url(repository: str) -> str:
    """https://github.com/OWNER/NAME -> https://raw.githubusercontent.com/OWNER/NAME (files as they are)."""
    return repository.rstrip("/").replace("https://github.com/", "https://raw.githubusercontent.com/", 1)


def format_table(rows: list[dict], columns: list[str] | None = None) -> str:
    """Rows of a bench table as aligned plain text, one line each under a header of column names."""
    columns = columns or list(rows[0])
    widths = {c: max(len(c), *(len(str(row.get(c, ""))) for row in rows)) for c in columns}
    lines = [[c for c in columns]] + [[str(row.get(c, "")) for c in columns] for row in rows]
    return "\n".join(" | ".join(f"{cell:<{widths[c]}}" for c, cell in zip(columns, line)).rstrip() for line in lines)
