"""nbgrader plug-ins of the course, named in course/nbgrader_config.py."""

import csv
import json
import os
from pathlib import Path

import nbformat
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_core.utils import run_sync
from nbclient.exceptions import DeadKernelError
from nbgrader.plugins import CsvExportPlugin
from nbgrader.preprocessors import ClearHiddenTests, Execute, NbGraderPreprocessor
from traitlets import Bool, Type, default

from plmcourse.autograde.demos import NOT_RUN_NOTE, cells_to_skip, nbgrader_metadata
from plmcourse.autograde.inert import (
    KEPT_ERROR,
    LOST_NOTE,
    MAX_CELL_OUTPUT,
    MAX_MESSAGE,
    MAX_NOTEBOOK_OUTPUT,
    dropped_note,
)


class SanitizeFeedback(NbGraderPreprocessor):
    """Feedback without hidden tests: their source is cut and test tracebacks shrink to one line.

    A failed test keeps its last line, e.g. "CheckFailed: check_softmax failed on case 12 of 17
    (...): ...", so the student still learns which test failed and why, in the check's own
    sentence, without seeing the hidden test's code or the grader's file paths.
    """

    def preprocess(self, nb, resources):
        self.clear_hidden = ClearHiddenTests(parent=self)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not nbgrader_metadata(cell).get("grade"):
            return cell, resources
        self.clear_hidden._remove_hidden_test_region(cell)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources


class WrapFeedbackOutput(NbGraderPreprocessor):
    """Feedback whose outputs wrap: a check's sentence is one long line, and the classic template shows
    output in a <pre> that scrolls sideways, so a student read only its first words. Runs after
    nbconvert's CSSHTMLHeaderPreprocessor, which sets the page's CSS, and adds one rule to it."""

    CSS = ("/* plmcourse: long output lines wrap instead of scrolling */\n"
           "div.output_subarea pre { white-space: pre-wrap; overflow-wrap: anywhere; }\n")

    def preprocess(self, nb, resources):
        inlining = resources.setdefault("inlining", {})
        inlining["css"] = [*inlining.get("css", []), self.CSS]
        return nb, resources


class ExecuteForGrading(Execute):
    """nbgrader's Execute, changed in three ways:

    * it leaves out the demo cells nothing graded depends on (see autograde.demos; PLMCOURSE_RUN_DEMOS=1 runs
      every cell); a skipped cell gets one line saying so, so the feedback does not look as if it failed;
    * it keeps a kernel's outputs within the caps of autograde.inert AS THEY ARRIVE (OutputBudget, CappedClient),
      so that a notebook printing gigabytes never grows this process; a cell that lost output ends with one
      line saying how much (and the report says so);
    * a kernel that dies or stops answering costs the rest of its notebook's cells, never the notebook: the
      cell says so, the later ones say they were not run, and nbgrader saves and grades what there is (its
      own Execute gives up on the whole notebook: no autograded copy, no feedback).
    """

    # A message dropped unread (MAX_MESSAGE) takes the connection with it, and with it maybe the kernel's
    # "idle": the cell then ends after iopub_timeout with a line saying output was lost, rather than failing
    # the whole notebook as nbgrader's default would.
    raise_on_iopub_timeout = Bool(False).tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self.skipped = set() if os.environ.get("PLMCOURSE_RUN_DEMOS") == "1" else cells_to_skip(nb.cells)
        self.budget = OutputBudget()
        self.dead = False
        return super().preprocess(nb, resources, km=km)

    def preprocess_cell(self, cell, resources, index):
        if index in self.skipped:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=NOT_RUN_NOTE)]
            return cell, resources
        if self.dead and cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text=NOT_RUN_DEAD)]
            return cell, resources
        self.budget.start(index)
        try:
            try:
                cell, resources = super().preprocess_cell(cell, resources, index)
            except DeadKernelError:
                # Stopped at a resource cap, crashed, or ended by the notebook: nbgrader would give up on the
                # whole notebook (no autograded copy, no feedback). Say so here; the later cells are not run,
                # and what the judge recorded before stands.
                self.dead = True
                cell.outputs.append(nbformat.v4.new_output("error", ename="DeadKernelError", evalue=DEAD,
                                                           traceback=[f"DeadKernelError: {DEAD}"]))
                return cell, resources
            ran = cell.cell_type == "code" and cell.source.strip()  # what nbclient sends to the kernel
            if ran and index not in self.budget.idle:  # ended by the reply alone: some output never came
                cell.outputs.append(nbformat.v4.new_output("stream", name="stderr", text=LOST_NOTE))
                if not self.reconnect():  # a kernel out of file descriptors takes no new connection
                    self.dead = True
                    cell.outputs.append(nbformat.v4.new_output("error", ename="DeadKernelError", evalue=UNREACHABLE,
                                                               traceback=[f"DeadKernelError: {UNREACHABLE}"]))
            return cell, resources
        finally:  # a cell that raised (nbgrader goes on to the next) is noted as well
            if self.budget.dropped.get(index):
                cell.outputs.append(nbformat.from_dict(dropped_note(self.budget.dropped[index])))

    async def async_start_new_kernel_client(self):
        # One message is received whole before it can be dropped: past MAX_MESSAGE zmq drops it unread (and the
        # connection with it, made again by `reconnect`), so that one giant print never lands in this process.
        self.km.client_factory = CappedClient
        return await super().async_start_new_kernel_client()

    start_new_kernel_client = run_sync(async_start_new_kernel_client)  # the synchronous name nbconvert calls

    def reconnect(self) -> bool:
        """Connect to the kernel again (zmq does not, after it dropped a connection for an oversized message);
        whether the kernel answered within RECONNECT_SECONDS."""
        if self.kc is None or self.km is None:
            return False
        self.kc.stop_channels()
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.allow_stdin = False
        try:
            run_sync(self.kc.wait_for_ready)(timeout=RECONNECT_SECONDS)
        except RuntimeError:  # "Kernel didn't respond": the notebook's own doing, noted in its cell
            return False
        return True

    def process_message(self, msg, cell, cell_index):
        kind = msg.get("msg_type", "")
        if kind == "status" and (msg.get("content") or {}).get("execution_state") == "idle":
            self.budget.idle.add(cell_index)
        elif kind == "clear_output":
            self.budget.clear(cell_index)
        elif kind in OUTPUT_MESSAGES or kind.startswith("comm"):
            if not self.budget.take(cell_index, message_bytes(msg.get("content")), kind == "error"):
                return None  # dropped: never stored, never applied to an earlier output
        return super().process_message(msg, cell, cell_index)


class VerifiedChannel(AsyncZMQSocketChannel):
    """An iopub channel that drops a message whose signature or format does not verify, where jupyter_client
    raises: a kernel's message is hostile data, and one bad message would make nbgrader give up on the whole
    notebook ("could not grade this submission"). A kernel out of file descriptors sends such messages."""

    async def _recv(self, **kwargs):
        while True:
            frames = await self.socket.recv_multipart(**kwargs)
            try:
                _, message = self.session.feed_identities(frames)
                return self.session.deserialize(message)
            except (ValueError, TypeError, KeyError):
                continue  # if it was the cell's "idle", the cell says its output was lost


class CappedClient(AsyncKernelClient):
    """jupyter_client's kernel client whose sockets refuse a message over MAX_MESSAGE bytes unread and queue at
    most MAX_QUEUED, and whose iopub channel drops what does not verify (VerifiedChannel)."""

    iopub_channel_class = Type(VerifiedChannel)

    @default("context")
    def _context_default(self):
        import zmq

        context = super()._context_default()
        context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        # What waits unread in this process while a kernel floods faster than it is read: at most MAX_QUEUED
        # messages (zmq drops the rest at the kernel's end), so MAX_QUEUED * MAX_MESSAGE bytes at worst.
        context.setsockopt(zmq.RCVHWM, MAX_QUEUED)
        return context


# Kept for course configurations written before the output cap (the name they import).
ExecuteSkippingDemos = ExecuteForGrading

OUTPUT_MESSAGES = ("stream", "display_data", "execute_result", "update_display_data", "error")
MAX_QUEUED = 64               # messages from a kernel waiting to be read (zmq's default is 1,000)
DEAD = ("the grading kernel stopped while this cell ran (a resource cap, a crash, or the notebook ending it); "
        "the cells after it were not run")
UNREACHABLE = "the grading kernel no longer answered after this cell; the cells after it were not run"
RECONNECT_SECONDS = 15
NOT_RUN_DEAD = "(Not run when grading: the kernel had stopped in an earlier cell.)\n"
MESSAGE_OVERHEAD = 256  # bytes counted for each message besides its content: an output's own keys


def message_bytes(content) -> int:
    """What one iopub message adds to a cell's outputs, as JSON (an estimate from above)."""
    try:
        return len(json.dumps(content, default=str)) + MESSAGE_OVERHEAD
    except (TypeError, ValueError):  # what the wire decoded is always JSON; anything else counts as a cap
        return MAX_CELL_OUTPUT


class OutputBudget:
    """How many output bytes each cell keeps, against inert's caps: MAX_CELL_OUTPUT a cell and
    MAX_NOTEBOOK_OUTPUT the notebook (a small error output past a cap is kept: it holds a check's
    sentence). A clear_output gives the cell its budget back; a cell run again starts from zero."""

    def __init__(self):
        self.kept, self.dropped, self.idle = {}, {}, set()  # idle: cells whose kernel said it was done

    def start(self, index):
        self.kept[index], self.dropped[index] = 0, 0
        self.idle.discard(index)

    def clear(self, index):
        self.kept[index] = 0

    def take(self, index, n, is_error=False) -> bool:
        """Whether a message of n bytes may be kept in cell `index` (and count it)."""
        kept = self.kept.get(index, 0)
        room = min(MAX_CELL_OUTPUT - kept, MAX_NOTEBOOK_OUTPUT - sum(self.kept.values()))
        if n <= room or (is_error and n <= KEPT_ERROR):
            self.kept[index] = kept + n
            return True
        self.dropped[index] = self.dropped.get(index, 0) + n
        return False


class CsvExportWithFlags(CsvExportPlugin):
    """nbgrader's CSV export, written with proper quoting, plus a `flags` column: the evidence a
    person should look at for that submission (plmcourse.autograde.review), empty when none.

    nbgrader writes its rows by joining with commas, so a name with a comma breaks the file;
    here its rows are read back and written again through the csv module, and every cell a
    spreadsheet would run as a formula is neutralised.
    """

    def export(self, gradebook):
        super().export(gradebook)
        from nbgrader.coursedir import CourseDirectory

        from plmcourse.autograde.review import flags_by_submission, spreadsheet_safe

        dest = self.to or "grades.csv"
        flags = flags_by_submission(Path(CourseDirectory(config=self.config).root))
        with open(dest, newline="", encoding="utf-8") as f:
            header, *rows = list(csv.reader(f))
        with open(dest, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(header + ["flags"])
            for row in rows:
                record = dict(zip(header, row))
                found = flags.get((record.get("student_id"), record.get("assignment")), "")
                writer.writerow([spreadsheet_safe(cell) for cell in row + [found]])
