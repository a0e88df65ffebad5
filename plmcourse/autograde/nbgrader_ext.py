"""nbgrader plug-ins of the course, named in course/nbgrader_config.py."""

import csv
from pathlib import Path

import nbformat
from nbgrader.plugins import CsvExportPlugin
from nbgrader.preprocessors import ClearHiddenTests, Execute, NbGraderPreprocessor

from plmcourse.autograde.demos import NOT_RUN_NOTE, cells_to_skip, nbgrader_metadata


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


class ExecuteSkippingDemos(Execute):
    """nbgrader's Execute, leaving out the demo cells nothing graded depends on (see autograde.demos).

    A skipped cell gets one line of output saying so, so the feedback does not look as if
    the cell failed to run.
    """

    def preprocess(self, nb, resources=None, km=None):
        self.skipped = cells_to_skip(nb.cells)
        return super().preprocess(nb, resources, km=km)

    def preprocess_cell(self, cell, resources, index):
        if index in self.skipped:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=NOT_RUN_NOTE)]
            return cell, resources
        return super().preprocess_cell(cell, resources, index)


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
