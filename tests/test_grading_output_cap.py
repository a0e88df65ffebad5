"""The grading executor keeps a kernel's outputs within the caps as they arrive (nbgrader_ext.ExecuteForGrading).

A real kernel (the test environment's own python3) runs small notebooks through the executor nbgrader
uses when grading; what the executor kept is read back. Whatever a kernel prints, the grader never holds
more than a cell's and a notebook's cap of it, and each cell that lost output says so in one line.
"""

import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from plmcourse.autograde import inert, nbgrader_ext
from plmcourse.autograde.nbgrader_ext import LOST_NOTE, NOT_RUN_DEAD, ExecuteForGrading, OutputBudget

pytestmark = pytest.mark.integration  # starts kernels

MB = 1024 ** 2


def executed(*sources, run_demos=None, monkeypatch=None, tags=None):
    """Run code cells (each after a markdown cell, as in the course's notebooks) with the grading executor."""
    nb = new_notebook(cells=[cell for i, s in enumerate(sources) for cell in
                             (new_markdown_cell(f"Cell {i}."), new_code_cell(s, metadata={"tags": (tags or {}).get(i, [])}))])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    if monkeypatch is not None:
        if run_demos:
            monkeypatch.setenv("PLMCOURSE_RUN_DEMOS", "1")
        else:
            monkeypatch.delenv("PLMCOURSE_RUN_DEMOS", raising=False)
    executor = ExecuteForGrading(timeout=120, kernel_name="python3", allow_errors=True)
    nb, _ = executor.preprocess(nb, {"metadata": {"path": "."}})
    assert all("outputs" not in cell for cell in nb.cells if cell.cell_type == "markdown")
    nb.cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    return nb


def kept_bytes(cell) -> int:
    return sum(len(json.dumps(output)) for output in cell.outputs)


def printed(cell) -> str:
    """What a cell printed, as one text: the kernel may send one print in more than one message."""
    return "".join(o.text for o in cell.outputs if o.output_type == "stream")


def notes(cell) -> list[str]:
    return [o.text for o in cell.outputs if o.output_type == "stream" and inert.DROPPED_NOTE.match(o.text)]


def test_a_flood_in_many_writes_is_cut_at_the_cell_cap_with_one_line(monkeypatch):
    nb = executed("import sys\nfor _ in range(12):\n    sys.stdout.write('x' * (1 << 20)); sys.stdout.flush()",
                  "print('after')", monkeypatch=monkeypatch)
    flood, after = nb.cells
    assert kept_bytes(flood) <= inert.MAX_CELL_OUTPUT + 1024
    assert kept_bytes(flood) >= inert.MAX_CELL_OUTPUT - 2 * MB  # what fits is kept, not thrown away whole
    [line] = notes(flood)
    dropped = float(line[1:].split(" MB")[0])
    assert 7.5 <= dropped <= 9.0, line  # 12 MB written, about 4 kept
    assert printed(after) == "after\n"  # the next cell keeps its own output


def test_many_small_outputs_count_and_a_small_error_past_the_cap_is_kept(monkeypatch):
    nb = executed("from IPython.display import HTML, display\nfor i in range(40_000):\n    display(HTML(f'<b>{i}</b>'))\n"
                  "raise ValueError('the check sentence')", monkeypatch=monkeypatch)
    [cell] = nb.cells
    kinds = [o.output_type for o in cell.outputs]
    assert kinds.count("display_data") < 40_000 and kept_bytes(cell) <= inert.MAX_CELL_OUTPUT + 16 * 1024
    assert [o.evalue for o in cell.outputs if o.output_type == "error"] == ["the check sentence"]
    assert len(notes(cell)) == 1


def test_the_notebook_cap_holds_across_cells(monkeypatch):
    write = "import sys\nfor _ in range(5):\n    sys.stdout.write('y' * (1 << 20)); sys.stdout.flush()"
    nb = executed(*[write] * 6, monkeypatch=monkeypatch)
    assert sum(kept_bytes(c) for c in nb.cells) <= inert.MAX_NOTEBOOK_OUTPUT + 6 * 1024
    assert [bool(notes(c)) for c in nb.cells] == [True] * 6  # 5 MB a cell: each over 4; the last ones lose all
    assert kept_bytes(nb.cells[-1]) < 1024


def test_cleared_output_gives_its_room_back_and_honest_output_is_untouched(monkeypatch):
    nb = executed("from IPython.display import clear_output\nimport sys\nfor _ in range(8):\n"
                  "    clear_output(wait=False)\n    sys.stdout.write('z' * (1 << 20)); sys.stdout.flush()\nprint('done')",
                  "print('plain')", monkeypatch=monkeypatch)
    progress, plain = nb.cells
    assert not notes(progress) and printed(progress).endswith("done\n")
    assert printed(plain) == "plain\n" and not notes(plain)


def test_demo_cells_are_skipped_unless_every_cell_is_asked_for(monkeypatch):
    sources = ("x = 1", "print('demo ran')", "print(x)")
    tags = {1: ["demo"]}
    skipped = executed(*sources, monkeypatch=monkeypatch, tags=tags)
    assert "demo ran" not in printed(skipped.cells[1])
    every = executed(*sources, run_demos=True, monkeypatch=monkeypatch, tags=tags)
    assert printed(every.cells[1]) == "demo ran\n"


def test_the_budget_rule():
    budget = OutputBudget()
    budget.start(0)
    assert budget.take(0, inert.MAX_CELL_OUTPUT) and not budget.take(0, 1)
    assert budget.take(0, inert.KEPT_ERROR, is_error=True) and not budget.take(0, inert.KEPT_ERROR + 1, is_error=True)
    budget.clear(0)
    assert budget.take(0, 100) and budget.dropped[0] == 1 + inert.KEPT_ERROR + 1
    budget.start(0)  # the cell run again starts from zero
    assert budget.dropped[0] == 0 and budget.take(0, inert.MAX_CELL_OUTPUT)
    for index in range(1, 4):
        budget.start(index)
        assert budget.take(index, inert.MAX_CELL_OUTPUT)
    budget.start(4)
    assert not budget.take(4, 1)  # the notebook's 16 MB are spent


def test_one_giant_message_is_dropped_unread_and_the_next_cells_still_report(monkeypatch):
    nb = executed("print('x' * (80 << 20))", "print('after')", monkeypatch=monkeypatch)
    giant, after = nb.cells
    assert printed(giant) == LOST_NOTE  # never received: not counted, not kept
    assert printed(after) == "after\n"   # connected again


def test_a_message_that_does_not_verify_is_dropped_and_the_notebook_still_graded(monkeypatch):
    forged = ("kernel = get_ipython().kernel\n"
              "kernel.iopub_socket.send_multipart([b'stream', b'<IDS|MSG>', b'0' * 64, b'{}', b'{}', b'{}', b'{}'])\n"
              "kernel.iopub_socket.send_multipart([b'stream', b'<IDS|MSG>', b'not even json'])\n"
              "print('before')")
    nb = executed(forged, "print('after')", monkeypatch=monkeypatch)
    assert printed(nb.cells[0]) == "before\n" and printed(nb.cells[1]) == "after\n"


def test_a_kernel_that_dies_leaves_a_notebook_saying_so_not_an_error_of_the_grader(monkeypatch):
    nb = executed("print('first')", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "print('never')",
                  monkeypatch=monkeypatch)
    first, killed, after = nb.cells
    assert printed(first) == "first\n"
    assert [(o.output_type, o.ename) for o in killed.outputs] == [("error", "DeadKernelError")]
    assert "the cells after it were not run" in killed.outputs[0].evalue
    assert printed(after) == NOT_RUN_DEAD


def test_a_kernel_that_cannot_be_reached_again_leaves_a_notebook_saying_so(monkeypatch):
    # Out of file descriptors, the kernel takes no new connection; then one giant message drops the old one.
    # It never answers again, so a wait shorter than grading's own 15 s (kept for a loaded machine) tells the same.
    monkeypatch.setattr(nbgrader_ext, "RECONNECT_SECONDS", 3)
    starve = ("import os, resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))\nheld = []\n"
              "try:\n    while True:\n        held.append(os.open(os.devnull, os.O_RDONLY))\nexcept OSError:\n    pass\n"
              "print('x' * (20 << 20))")
    nb = executed("print('first')", starve, "print('never')", monkeypatch=monkeypatch)
    first, starved, after = nb.cells
    assert printed(first) == "first\n"
    assert [o.get("evalue") for o in starved.outputs if o.output_type == "error"] == [
        "the grading kernel no longer answered after this cell; the cells after it were not run"]
    assert printed(after) == NOT_RUN_DEAD
