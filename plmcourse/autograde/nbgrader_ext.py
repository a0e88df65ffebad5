"""nbgrader plug-ins of the course, named in course/nbgrader_config.py."""

import nbformat
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
