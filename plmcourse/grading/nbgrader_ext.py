"""nbgrader plug-ins of the course, named in course/nbgrader_config.py."""

from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor


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
        if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("grade"):
            return cell, resources
        self.clear_hidden._remove_hidden_test_region(cell)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources
