"""Which cells grading leaves out: names read off the code, the dependency rule, the course's tags and config."""

import nbformat
import pytest
from nbformat.v4 import new_code_cell
from traitlets.config.loader import PyFileConfigLoader

from conftest import COURSE, source_notebooks
from plmcourse.autograde.demos import DEMO_TAG, cell_names, cells_to_skip, is_demo
from plmcourse.autograde.nbgrader_ext import ExecuteForGrading


@pytest.mark.parametrize("source, defines, reads", [
    ("x = f(y)", {"x"}, {"f", "y"}),
    ("import numpy as np\nfrom math import pi", {"np", "pi"}, set()),
    ("def g(a):\n    b = a + c\n    return b", {"g"}, {"c"}),                  # a, b are local
    ("def g():\n    global G\n    G = 1", {"g", "G"}, set()),
    ("class K:\n    w = v", {"K"}, {"v"}),
    ("out = [q * s for q in items]", {"out"}, {"s", "items"}),                  # q is the comprehension's
    ("for i in range(3):\n    total = i", {"i", "total"}, {"i", "range"}),
    ("from m import *", {"*"}, set()),
    ("%timeit f(x)", set(), {"f", "x"}),                                         # code given to a magic
    ("%%time\ny = g(z)", {"y"}, {"g", "z"}),
    ("import sys\nif 'google.colab' in sys.modules:\n    %pip install x", {"sys"}, {"sys"}),
    ("!ls -l", set(), set()),
    ("ip = get_ipython()", {"ip"}, {"get_ipython"}),                              # the shell itself: dynamic
    ("def broken(:\n    pass", set(), set()),                                    # never runs past the error
    ("x = " + "-" * 100_000 + "1", set(), set()),                                # too deep to compile: nothing runs
    ("x = 1\n" * 40_000, set(), {"exec"}),                                        # too long to read: may read anything
])
def test_cell_names(source, defines, reads):
    assert cell_names(source) == (defines, reads)


def cell(source, demo=False, grade_id=None):
    c = new_code_cell(source)
    if demo:
        c.metadata["tags"] = [DEMO_TAG]
    if grade_id:
        c.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": grade_id, "locked": False}
    return c


def test_unneeded_demos_are_skipped_and_others_run():
    cells = [cell("import numpy as np"),
             cell("plot(np.arange(3))", demo=True),
             cell("def answer(x):\n    return np.exp(x)", grade_id="answer"),
             cell("table = np.ones(3)", demo=True)]
    assert cells_to_skip(cells) == {1, 3}


def test_a_demo_an_answer_uses_runs_with_what_it_needs():
    cells = [cell("import numpy as np"),
             cell("scale = 2.0", demo=True),
             cell("def helper(x):\n    return x * scale", demo=True),            # needs demo 1
             cell("unrelated = 1", demo=True),
             cell("def answer(x):\n    return helper(x)", grade_id="answer")]  # needs demo 2
    assert cells_to_skip(cells) == {3}


def test_a_demo_that_fills_what_an_answer_reads_runs():
    """The answer reads a dict that only a demo cell fills: the demo defines no name, yet it is needed."""
    cells = [cell("import numpy as np\ncache = {}"),
             cell("cache['stable_exp'] = np.exp", demo=True),
             cell("history = []", demo=False),
             cell("history.append(1.0)\nplot(history)", demo=True),
             cell("shown = []\nshown.append(2)", demo=True),
             cell("def answer(x):\n    return cache['stable_exp'](x) * len(history)", grade_id="answer")]
    assert cells_to_skip(cells) == {4}


def test_dynamic_lookups_run_every_demo():
    cells = [cell("hidden = 1", demo=True), cell("def answer():\n    return globals()['hidden']")]
    assert cells_to_skip(cells) == set()


def test_star_imports_in_a_demo_always_run_it():
    cells = [cell("from math import *", demo=True), cell("def answer(x):\n    return sqrt(x)")]
    assert cells_to_skip(cells) == set()


def test_graded_cells_are_never_skipped_even_if_tagged():
    c = cell("def answer():\n    pass", demo=True, grade_id="answer")
    assert not is_demo(c)
    assert cells_to_skip([c]) == set()


@pytest.mark.parametrize("path", source_notebooks(), ids=lambda p: p.stem)
def test_instructor_solutions_need_no_demo_cell(path):
    """Every cell tagged demo in the sources can be skipped: no set-up, answer or test reads its names."""
    nb = nbformat.read(path, as_version=4)
    tagged = {i for i, c in enumerate(nb.cells) if is_demo(c)}
    assert tagged, f"{path.name} has no cell tagged {DEMO_TAG!r}"
    needed = tagged - cells_to_skip(nb.cells)
    assert not needed, f"{path.name}: cells {sorted(needed)} are tagged demo but graded code uses their names"


def test_course_config_loads_and_installs_the_grading_executor():
    # nbgrader logs an error in a config file and goes on without the file: load it strictly here.
    config = PyFileConfigLoader("nbgrader_config.py", path=str(COURSE)).load_config()
    preprocessors = config.Autograde.autograde_preprocessors
    assert ExecuteForGrading in preprocessors
    assert config.Execute.timeout == 60
    assert config.OverwriteCells.add_missing_cells is True


def test_every_cell_runs_when_asked_and_outputs_are_still_capped(monkeypatch):
    monkeypatch.setenv("PLMCOURSE_RUN_DEMOS", "1")
    config = PyFileConfigLoader("nbgrader_config.py", path=str(COURSE)).load_config()
    assert ExecuteForGrading in config.Autograde.autograde_preprocessors  # the same executor: its cap stays
