"""Build bench/RESULTS.md from the JSON results: one table per benchmark, with its machine."""

from bench.common import HERE, read_results

HEADER = """# Benchmark results

Written by `python3 tasks.py bench` (`python -m bench`) from the JSON files in `bench/results/`;
do not edit by hand. Times are medians of several runs after warm-up; ratios compare variants
measured side by side in the same run. These are measurements, never assertions in tests.
"""


def table(rows):
    columns = list(dict.fromkeys(c for row in rows for c in row))  # every row's keys, first seen first
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join("" if row.get(c) is None else str(row[c]) for c in columns) + " |")
    return "\n".join(lines)


def write():
    parts = [HEADER]
    for name, result in read_results().items():
        machine = ", ".join(f"{k} {v}" for k, v in result["machine"].items())
        parts.append(f"## {result.get('title', name)}\n\nMachine: {machine}.\n")
        if result.get("notes"):
            parts.append(result["notes"] + "\n")
        parts.append(table(result["rows"]) + "\n")
    path = HERE / "RESULTS.md"
    path.write_text("\n".join(parts))
    return path
