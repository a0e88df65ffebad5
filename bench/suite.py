"""The test suite's own time: the whole run as CI runs it, and its 25 slowest steps (`bench suite`).

`python -m bench suite` runs `python3 tasks.py test --durations=25` (the README's command) and records
what pytest printed; `python -m bench.suite LOG [SETUP_SECONDS]` records a log kept from an earlier run
(a clean-clone `.ci/run`, say), so that the numbers are CI's own.
"""

import re
import subprocess
import sys
import time

from bench.common import HERE, write_result

DURATION = re.compile(r"^(\d+\.\d+)s (setup|call|teardown)\s+(\S+)")
SUMMARY = re.compile(r"=+ (.*?) in ([\d.]+)s")


def parse(log: str) -> dict:
    """The slowest steps, pytest's summary line and its wall time, from a run's output."""
    slowest = [{"seconds": float(m.group(1)), "step": m.group(2), "test": m.group(3)}
               for m in map(DURATION.match, log.splitlines()) if m]
    summary = [m for m in map(SUMMARY.search, log.splitlines()) if m]
    return {"slowest": slowest[:25], "summary": summary[-1].group(1) if summary else "",
            "seconds": float(summary[-1].group(2)) if summary else None}


def record(log: str, setup_seconds: float | None = None, how: str = ""):
    found = parse(log)
    notes = (f"{how}Tests: {found['summary']} in {found['seconds']:.0f} s"
             + (f", after {setup_seconds:.0f} s of setup (a fresh .venv)" if setup_seconds else "")
             + ". The 25 slowest steps follow; a module's shared fixture shows as the setup of its first test.")
    rows = [{"seconds": f"{row['seconds']:.1f}", "step": row["step"], "test": row["test"]} for row in found["slowest"]]
    return write_result("test_suite", {"title": "The test suite: CI's whole run and its 25 slowest steps",
                                       "notes": notes, "rows": rows})


def main():
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(HERE.parent / "tasks.py"), "test", "-p", "no:cacheprovider",
                           "--durations=25"], capture_output=True, text=True)
    print(done.stdout[-3000:])
    return record(done.stdout, how=f"`python3 tasks.py test` here ({time.perf_counter() - start:.0f} s in all). ")


if __name__ == "__main__":
    text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
    print(record(text, float(sys.argv[2]) if len(sys.argv) > 2 else None,
                 how="A clean-clone `.ci/run` on 2 cores. "))
