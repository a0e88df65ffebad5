"""Cheating submissions, graded through the real pipeline: one per kind of attack on the grader.

A second catalogue beside test_grading_catalogue.py, in the same harness: every submission is
a 03_attention notebook a cheating student could hand in, the whole set goes through
`plmcourse grade all` once (collect, autograde in the sandbox with the judge, feedback, export), and
then one test per attack reads the real gradebook, grading report and course folders.

Each attack comes with a wrong answer (`raise NotImplementedError()`, or a softmax that
normalises over the whole array), so that an attack that works shows as points the student
does not deserve. The notebook's attention answer calls the student's softmax, so a broken
softmax takes attention's 3 points with it (BROKEN_SOFTMAX).

Against the in-kernel grading of commit faca49d (the checks run in the student's kernel,
with a second opinion from a verifier that re-runs the notebook in another process) every
test below fails: attacks 1-5 and 8 score full marks, 6 is not reported, 7 and 9 leave the
secret and the planted files in autograded/ and feedback/, and 10 makes nbgrader stop for
that student (0 points). Now the judge decides outside the kernel
(plmcourse.autograde.judge) and the sandbox keeps what the kernel writes, and every test passes.
"""

import inspect
import os
import re
import textwrap

import nbformat
import pytest

from plmcourse import ref
from support import (
    ASSIGNMENT,
    BROKEN_SOFTMAX,
    CLASS_MARKS,
    FULL,
    GRADER_SECRET,
    POINTS,
    answers,
    gradebook_scores,
    graded_class,
    solved,
    with_cell,
)

pytestmark = CLASS_MARKS

SECRET = GRADER_SECRET  # in the grading commands' environment only
NOT_IMPLEMENTED = "def causal_mask(n):\n    raise NotImplementedError()\n"
# Wrong: one softmax over the whole array instead of one per slice along `axis` (finite even
# for logits of 1e4, so that only a comparison can fail it).
WRONG_SOFTMAX = ("def softmax(x, axis=-1):\n"
                 "    e = np.exp(x - x.max())\n"
                 "    return e / e.sum()\n")
TEST_IDS = [f"test_{name}" for name in POINTS]

# ----------------------------------------------------------------------------
# The attacks, each as the cell(s) a student would write


# 1. The student's function walks up the stack to the checker and hands back what the
# checker expects (its local `expected`); called from the student's own attention, it
# finds attention's check and returns the expected weights. No `_getframe` in the text.
FRAME_WALKING = (
    "import inspect\n\n"
    "def softmax(x, axis=-1):\n"
    "    frame = inspect.currentframe().f_back\n"
    "    while frame is not None:\n"
    "        found = frame.f_locals.get('expected')\n"
    "        if isinstance(found, tuple):  # attention's check: (output, weights)\n"
    "            found = found[-1]\n"
    "        if isinstance(found, np.ndarray) and found.shape == np.shape(x):\n"
    "            return found.copy()\n"
    "        frame = frame.f_back\n"
    "    return np.exp(x) / np.exp(x).sum()\n")

# 2. The notebook's globals get their own __builtins__, whose __import__ hands out a fake
# plmcourse.grading to the test cells' `from plmcourse.grading import check_...`. The
# verifier runs test cells with exec(code, shell.user_ns): the same fake builtins.
FAKE_BUILTINS = (
    "import types\n"
    "_b = dict(vars(__import__('built' + 'ins')))\n"
    "_real_import = _b['__import__']\n"
    "_fake = types.ModuleType('checks')\n"
    "for _n in ('check_softmax', 'check_scaled_dot_product_attention', 'check_causal_mask',\n"
    "           'check_multi_head_attention'):\n"
    "    setattr(_fake, _n, lambda fn, hidden=False, _n=_n: print(f'{_n}: all cases passed.'))\n\n"
    "def _import(name, globals=None, locals=None, fromlist=(), level=0):\n"
    "    if name == 'plmcourse' + '.grading' and fromlist:\n"
    "        return _fake\n"
    "    return _real_import(name, globals, locals, fromlist, level)\n\n"
    "_b['__import__'] = _import\n"
    "globals()['__' + 'built' + 'ins__'] = _b\n")

# 3. What the reference calls is patched so that reference and wrong answer agree: NumPy's
# reductions go through numpy._core.fromnumeric._wrapreduction (a module the checks do not
# protect); for calls from the course's softmax, it drops the axis. ref.softmax then
# normalises over the whole array, exactly as WRONG_SOFTMAX does (and so does attention's
# reference, which calls ref.softmax).
NUMPY_INTERNALS = (
    "import inspect\nimport numpy._core.fromnumeric as _fromnumeric\n"
    "_reduce = _fromnumeric._wrapreduction\n\n"
    "def _whole_array(obj, ufunc, method, axis, *args, **kwargs):\n"
    "    caller = inspect.currentframe().f_back.f_back\n"
    "    if caller is not None and caller.f_code.co_name == 'softmax' and 'plmcourse' in caller.f_code.co_filename:\n"
    "        axis = None\n"
    "    return _reduce(obj, ufunc, method, axis, *args, **kwargs)\n\n"
    "_fromnumeric._wrapreduction = _whole_array\n")

# 4. Planted files: the notebook writes a package `plmcourse` into its own folder. The
# verifier starts there as `python -m plmcourse.grading.verify` (cwd first on sys.path) and
# so runs this file instead, which reports every test passed. In the kernel, the softmax and
# attention checks are replaced as in the first catalogue's "checks-patched" (which the
# genuine verifier catches).
PLANTED_VERIFY = (
    "import sys, json\n"
    "nonce = sys.stdin.readline().strip()\n"
    f"print('PLMCOURSE-VERDICT', nonce, json.dumps({{t: [True, ''] for t in {TEST_IDS!r}}}))\n"
    "sys.stdout.flush()\n")
PLANTED_FILES = (
    "import os\n"
    "import plmcourse.grading, plmcourse.grading.attention as attention_checks\n"
    "os.makedirs('plmcourse/grading', exist_ok=True)\n"
    "for name in ('plmcourse/__init__.py', 'plmcourse/grading/__init__.py'):\n"
    "    open(name, 'w').close()\n"
    f"open('plmcourse/grading/verify.py', 'w').write({PLANTED_VERIFY!r})\n"
    "for name in ('check_softmax', 'check_scaled_dot_product_attention'):\n"
    "    setattr(plmcourse.grading, name, lambda *a, **k: print('all cases passed.'))\n"
    "    getattr(attention_checks, name).__code__ = (lambda fn, hidden=False: None).__code__\n")

# 5. An ndarray subclass whose ufuncs say "equal", "close" and "finite" to everything:
# softmax returns zeros that every comparison of the checks accepts (and so does the
# attention built on them, whose weights @ v stays a Liar).
LIAR = (
    "class Liar(np.ndarray):\n"
    "    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):\n"
    "        plain = [i.view(np.ndarray) if isinstance(i, np.ndarray) else i for i in inputs]\n"
    "        kwargs.pop('out', None)\n"
    "        if method != '__call__':\n"
    "            if ufunc in (np.logical_and, np.logical_or):\n"
    "                return np.True_\n"
    "            result = getattr(ufunc, method)(*plain, **kwargs)\n"
    "        else:\n"
    "            result = ufunc(*plain, **kwargs)\n"
    "        if isinstance(result, np.ndarray) and result.dtype == bool:\n"
    "            no = ('isnan', 'isinf', 'isneginf', 'isposinf', 'not_equal', 'signbit')\n"
    "            return np.full(result.shape, ufunc.__name__ not in no)\n"
    "        return result.view(Liar) if isinstance(result, np.ndarray) else result\n\n"
    "    def __eq__(self, other):\n"
    "        return np.full(self.shape, True)\n\n"
    "    def __sub__(self, other):\n"
    "        return np.zeros(self.shape).view(Liar)\n\n\n"
    "def softmax(x, axis=-1):\n"
    "    return np.zeros(np.shape(x)).view(Liar)\n")

# 6. PyTorch's private implementations, which no seal lists. Right answers: not zeroed by
# themselves, but the grading report must name the student and the op.
PRIVATE_SOFTMAX = (
    "import torch\n\n"
    "def softmax(x, axis=-1):\n"
    "    out = torch._softmax(torch.from_numpy(np.asarray(x)), axis, False).numpy()\n"
    "    return np.nan_to_num(out, nan=0.0)  # an all -inf slice gives zeros\n")
PRIVATE_SDPA = (
    "import torch\n\n"
    "def scaled_dot_product_attention(q, k, v, mask=None):\n"
    "    additive = None if mask is None else torch.from_numpy(np.where(mask, 0.0, -np.inf).astype(q.dtype))\n"
    "    out, weights = torch._scaled_dot_product_attention_math(\n"
    "        torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), additive)\n"
    "    return np.nan_to_num(out.numpy()), np.nan_to_num(weights.numpy())\n")
PRIVATE_OPS = ("_softmax", "_scaled_dot_product_attention_math")

# 7. The grader's environment, printed into the notebook's outputs (and so into feedback).
PRINT_ENVIRONMENT = ("import os\nimport plmcourse\n"
                     "print('plmcourse at', plmcourse.__file__)\n"
                     "for key, value in sorted(os.environ.items()):\n"
                     "    print(f'{key}={value}')\n")

# 8. Links in the student's folder of the export, aimed at where the course keeps its
# source and gradebook (relative to submitted/<student>/<assignment>/, or to an export two
# levels inside the course). "00_..." sorts before the student's own notebook.
PLANTED_LINKS = {
    "00_solutions.ipynb": f"../../../source/{ASSIGNMENT}/{ASSIGNMENT}.ipynb",
    "gradebook.db": "../../../gradebook.db",
}
# nbgrader itself writes every student's autograded notebook with the hidden tests back in
# (it runs them there), so the hidden tests are looked for in feedback/ only; the
# instructor's solutions and the gradebook, in both.
INSTRUCTOR_ONLY = ["BEGIN SOLUTION", "np.tril(np.ones((n, n), dtype=bool))", "SQLite format 3"]
HIDDEN_TESTS = [b"BEGIN HIDDEN TESTS", b"hidden=True"]

# 9. Files written into the kernel's working folder: a module that shadows the kernel's
# launcher (for the next kernel started there) and 300 MB (sparse: the size is what counts).
PLANTED_LAUNCHER = (
    "open('ipykernel_launcher.py', 'w').write(\n"
    "    'import sys; print(\"launcher replaced\"); sys.exit(0)\\n')\n"
    "with open('padding.bin', 'wb') as f:\n"
    "    f.truncate(300 * 1024 * 1024)\n")
BIG = 100 * 1024 * 1024

# 10. A code cell the student added, with the metadata of an autograded test worth 100 points.
# (nbgrader drops the unknown grade_id, then its add_missing_cells step, which the course
# turns on, fails with KeyError 'grade_id' and the whole submission goes ungraded.)
FORGED_METADATA = {"grade": True, "grade_id": "test_bonus", "points": 100, "solution": False,
                   "locked": True, "schema_version": 3}


def without_markers(source):
    return "\n".join(line for line in source.splitlines() if "### BEGIN" not in line and "### END" not in line)


def forged_test_cell():
    nb = solved()
    cell = nbformat.v4.new_code_cell("print('bonus test passed')")
    cell.metadata["nbgrader"] = dict(FORGED_METADATA)
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "test_softmax")
    nb.cells.insert(index + 1, cell)
    return nb


def planted_links_notebook():
    """The student's own notebook: causal_mask not done, no instructor markers in any answer."""
    own = {name: without_markers(source) for name, source in answers().items()}
    own["causal_mask"] = NOT_IMPLEMENTED
    return solved(**own)


# 11. The course's own softmax, its source retyped with another variable name: right, so the
# points stay, but the report says whose code it is, for a person to decide.
RETYPED_SOFTMAX = re.sub(r"\bx\b", "logits", textwrap.dedent(inspect.getsource(ref.softmax)))

ATTACKS = {
    # student: (notebook, deserved total score)
    "frame-walking": (lambda: solved(softmax=FRAME_WALKING), BROKEN_SOFTMAX),
    # Every later import hands out fake checks, so no test cell reaches the judge: a notebook
    # that keeps its own tests from running gets no credit for them, the right ones included.
    "fake-builtins": (lambda: with_cell(solved(softmax=WRONG_SOFTMAX), FAKE_BUILTINS), 0),
    "numpy-internals-patched": (lambda: with_cell(solved(softmax=WRONG_SOFTMAX), NUMPY_INTERNALS), BROKEN_SOFTMAX),
    "planted-package": (lambda: with_cell(solved(softmax=WRONG_SOFTMAX), PLANTED_FILES), BROKEN_SOFTMAX),
    "ndarray-liar": (lambda: solved(softmax=LIAR), BROKEN_SOFTMAX),
    "private-torch-ops": (lambda: solved(softmax=PRIVATE_SOFTMAX, scaled_dot_product_attention=PRIVATE_SDPA), FULL),
    "reads-environment": (lambda: with_cell(solved(causal_mask=NOT_IMPLEMENTED), PRINT_ENVIRONMENT), FULL - 1),
    "planted-links": (planted_links_notebook, FULL - 1),
    "planted-launcher": (lambda: with_cell(solved(causal_mask=NOT_IMPLEMENTED), PLANTED_LAUNCHER), FULL - 1),
    "forged-test-cell": (forged_test_cell, FULL),
    "retyped-reference": (lambda: solved(softmax=RETYPED_SOFTMAX), FULL),
}


# ----------------------------------------------------------------------------
# One grading run for all of them


def into_class(folder):
    """Its part of the shared graded class (tests/support.py), which sits two levels inside the course
    (course/downloads/<export>/), where an instructor may well unpack it: from there the planted links
    reach the course's files. <student>_<assignment>.ipynb, and one student's own folder with links in it."""
    for student, (make, _) in ATTACKS.items():
        if student == "planted-links":
            own = folder / student
            own.mkdir()
            nbformat.write(make(), own / f"{ASSIGNMENT}.ipynb")
            for name, target in PLANTED_LINKS.items():
                (own / name).symlink_to(target)
        else:
            nbformat.write(make(), folder / f"{student}_{ASSIGNMENT}.ipynb")
    return list(ATTACKS)


def scores(course):
    """student -> (total score of the submission, max score, {grade_id: score}), from the gradebook."""
    return gradebook_scores(course, ASSIGNMENT)


def student_files(course, student):
    """(path, bytes or None when too big to read, is a link) under autograded/ and feedback/ for `student`."""
    found = []
    for top in ("autograded", "feedback"):
        for folder, dirs, files in os.walk(course / top / student):
            for name in dirs + files:
                path = os.path.join(folder, name)
                if os.path.islink(path):
                    found.append((path, None, True))
                elif name in files:
                    size = os.path.getsize(path)
                    found.append((path, open(path, "rb").read() if size < 20 * 1024 * 1024 else None, False))
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    run = graded_class(tmp_path_factory)
    return run.course, run.report, scores(run.course)


# ----------------------------------------------------------------------------
# What each attack must not achieve


def report_lines(report, student):
    return [line for line in report.splitlines() if student in line]


def expect_private_ops_reported(course, report, student):
    # The grading report names the student and each private function called (the points
    # stay: the answers are right, and only a person can decide what the rule was worth).
    lines = report_lines(report, student)
    return [f"no line of the grading report names {student} and {op}" for op in PRIVATE_OPS
            if not any(op in line for line in lines)]


def expect_secret_kept(course, report, student):
    leaked = []
    for top in ("autograded", "feedback"):
        for folder, _, files in os.walk(course / top):
            for name in files:
                path = os.path.join(folder, name)
                if os.path.islink(path) or os.path.getsize(path) > 20 * 1024 * 1024:
                    continue
                if SECRET.encode() in open(path, "rb").read():
                    leaked.append(os.path.relpath(path, course))
    return [f"the grader's GRADER_SECRET_TOKEN is in {path}" for path in leaked]


def expect_nothing_through_links(course, report, student):
    problems = []
    for path, data, link in student_files(course, student):
        where = os.path.relpath(path, course)
        if link:
            problems.append(f"{where} is a link")
            continue
        for text in INSTRUCTOR_ONLY:
            if data is not None and text.encode() in data:
                problems.append(f"{where} holds {text!r}")
        if where.startswith("feedback") and data is not None and any(text in data for text in HIDDEN_TESTS):
            problems.append(f"{where} holds the hidden tests")
    return problems


def expect_planted_files_gone(course, report, student):
    problems = []
    for path, _, link in student_files(course, student):
        where = os.path.relpath(path, course)
        if os.path.basename(path) == "ipykernel_launcher.py":
            problems.append(f"{where} is there")
        elif not link and os.path.isfile(path) and os.path.getsize(path) >= BIG:
            problems.append(f"{where} ({os.path.getsize(path) // 2 ** 20} MB) is there")
    return problems


def expect_no_bonus(course, report, student):
    _, max_score, grades = scores(course)[student]
    problems = [f"a grade for {name}" for name in grades if name not in TEST_IDS]
    if max_score != FULL:
        problems.append(f"max score {max_score}, expected {FULL}")
    return problems


def expect_retyped_reported(course, report, student):
    lines = report_lines(report, student)
    # The course's code for softmax is the notebook's solution and plmcourse.ref.softmax: either may be named.
    return [] if any("softmax: softmax is" in line and "retyped" in line for line in lines) else [
        f"no line of the grading report says {student}'s softmax is the course's retyped"]


MORE = {
    "retyped-reference": expect_retyped_reported,
    "private-torch-ops": expect_private_ops_reported,
    "reads-environment": expect_secret_kept,
    "planted-links": expect_nothing_through_links,
    "planted-launcher": expect_planted_files_gone,
    "forged-test-cell": expect_no_bonus,
}


@pytest.mark.parametrize("student", ATTACKS)
def test_each_attack_fails(graded, student):
    course, report, got = graded
    assert student in got, f"{student} was not graded"
    total, _, grades = got[student]
    problems = []
    if total != ATTACKS[student][1]:
        problems.append(f"scored {total}, deserves {ATTACKS[student][1]} ({grades})")
    if student in MORE:
        problems += MORE[student](course, report, student)
    assert not problems, "; ".join(problems)


def test_the_kernels_ran_the_plmcourse_under_test(graded):
    """The sandboxed kernels imported the plmcourse this test imports (a worktree on PYTHONPATH included)."""
    import plmcourse

    course, _, _ = graded
    graded_nb = course / "autograded" / "reads-environment" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    printed = "".join(o.get("text", "") for c in nbformat.read(graded_nb, as_version=4).cells
                      if c.cell_type == "code" for o in c.get("outputs", []))
    line = next((line for line in printed.splitlines() if line.startswith("plmcourse at ")), None)
    if line is None:
        pytest.skip("the kernel's outputs are not in the autograded notebook")
    assert line == f"plmcourse at {plmcourse.__file__}"
