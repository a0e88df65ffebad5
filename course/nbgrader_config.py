"""nbgrader configuration of the plmcourse course directory.

Run every nbgrader command from this directory (`cd course`), or pass
`--CourseDirectory.root=course`. The student versions in release/ are generated
from source/ by `python3 tasks.py release`; never edit release/ by hand.
"""

import os

c = get_config()  # noqa: F821  (injected by nbgrader)

here = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.root = here
c.CourseDirectory.course_id = "plmcourse"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(here, "gradebook.db")
# A class on JupyterHub: nbgrader's exchange, where assignments are released, submissions come in and feedback
# goes out (`plmcourse grade collect ASSIGNMENT --exchange FOLDER` sets PLMCOURSE_EXCHANGE; INSTRUCTORS.md).
c.Exchange.root = os.environ.get("PLMCOURSE_EXCHANGE", "/srv/nbgrader/exchange")

# What students see in place of a solution.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Autograding: every notebook names the `python3` kernel; a cell that runs longer than
# PLMCOURSE_CELL_SECONDS (default 60) is interrupted (that exercise scores 0) and the
# cells after it still run.
c.Execute.timeout = int(os.environ.get("PLMCOURSE_CELL_SECONDS", "60"))
c.Execute.interrupt_on_timeout = True
c.Execute.kernel_name = "python3"
# Once the last cell has run, the outputs are in: stop the kernel at once rather than wait
# about a second for it to wind down (a third of a graded notebook's time).
c.Execute.shutdown_kernel = "immediate"

# The executor of grading (plmcourse/autograde/nbgrader_ext.py: ExecuteForGrading). Cells tagged "demo"
# (experiments, plots, widgets) are skipped, unless a cell that runs reads a name one of them defines;
# see plmcourse/autograde/demos.py. Grades are the same, in a fraction of the time.
# PLMCOURSE_RUN_DEMOS=1 runs every cell. And a kernel's outputs are capped as they arrive (4 MB a cell,
# 16 MB a notebook, one line saying what was dropped), so that no notebook can fill the grader's memory.
from nbgrader.converters import Autograde
from nbgrader.preprocessors import Execute

from plmcourse.autograde.nbgrader_ext import ExecuteForGrading

# (No comprehension here: nbgrader runs this file in a way that hides its names from one.)
preprocessors = Autograde.class_traits()["autograde_preprocessors"].default()
preprocessors[preprocessors.index(Execute)] = ExecuteForGrading
c.Autograde.autograde_preprocessors = preprocessors

# A submission that deleted a test cell still gets that test back (and is graded on it)
# instead of being left silently as "needs manual grade".
c.OverwriteCells.add_missing_cells = True

# `plmcourse grade autograde` runs each kernel in a sandbox without network, loopback
# included, so kernel and nbgrader talk over Unix sockets named in a directory it gives. The
# kernel makes them in its own size-capped tmpfs; that directory on the host holds only the
# launcher's links to them (plmcourse.autograde.sandbox.run_sandboxed).
ipc_dir = os.environ.get("PLMCOURSE_IPC_DIR")
if ipc_dir:
    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = os.path.join(ipc_dir, "kernel")

# Feedback shows which test failed and the check's sentence, but neither the hidden
# tests' source nor tracebacks through the grader's files.
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import GetGrades  # noqa: E402

from plmcourse.autograde.nbgrader_ext import SanitizeFeedback, WrapFeedbackOutput  # noqa: E402

# A check's sentence is one long line: WrapFeedbackOutput makes the page wrap it.
c.GenerateFeedback.preprocessors = [GetGrades, SanitizeFeedback, CSSHTMLHeaderPreprocessor, WrapFeedbackOutput]

# A second net under plmcourse.autograde.inert, which has already made every autograded notebook
# inert: nbconvert's own sanitising of outputs (no JavaScript or widget outputs at all; nbgrader's
# feedback and formgrader templates render markdown cells without it), with the course's
# allow-list as its filter, since nbconvert's default one turns honest headings, paragraphs,
# images and table headers into visible tags. The formgrader reads this file too, when Jupyter
# runs in course/.
from nbconvert.exporters import HTMLExporter  # noqa: E402

if "sanitize_html" in HTMLExporter.class_trait_names():
    c.HTMLExporter.sanitize_html = True
    c.HTMLExporter.filters = {"clean_html": "plmcourse.autograde.inert.clean_html"}

# The export adds a `flags` column: what the grader flagged for a person to look at in each
# submission (plmcourse.autograde.review; `plmcourse grade review ASSIGNMENT` lists them).
c.ExportApp.plugin_class = "plmcourse.autograde.nbgrader_ext.CsvExportWithFlags"
