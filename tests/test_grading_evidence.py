"""Evidence the kernel cannot edit, the judge's record, and the review table (plmcourse.autograde).

Unit tests of the grader's side: what a submission's source shows (read without running it,
in a child process with limits), fingerprints that survive renaming and reordering, one-line
inert text, the first hidden run deciding, a hidden case's values kept from the kernel, and the
review table. The same pieces graded through the real commands: test_grading_catalogue.py.
"""

import inspect
import json
import socket
import textwrap
import time

import nbformat
import numpy as np
import pytest

import plmcourse  # noqa: F401
from plmcourse import ref
from plmcourse.autograde import evidence, review
from plmcourse.autograde.evidence import Flag, containment, fingerprints, one_line, read_source
from plmcourse.autograde.judge import Judge, read_record
from plmcourse.grading import wire
from plmcourse.judging import core
from plmcourse.grading import core as core_kernel
from plmcourse.grading.core import serve

SOFTMAX_SEALED, SOFTMAX_NAMES, SOFTMAX_PREFIXES = evidence.library_names("check_softmax")

# ----------------------------------------------------------------------------
# One inert line


@pytest.mark.parametrize("text, absent", [
    ("\x1b[2J\x1b[31mbob: full marks", "\x1b"),
    ("first line\nalice: flagged for review, nothing", "\n"),
    ("carriage\rreturn", "\r"),
    ("right-to-left \u202e override", "\u202e"),
    ("line\u2028separator", "\u2028"),
    ("nul \x00 byte", "\x00"),
])
def test_one_line_shows_control_characters_as_escapes(text, absent):
    line = one_line(text)
    assert absent not in line and "\n" not in line
    assert "\\x" in line or "\\u" in line  # shown, not dropped: the instructor sees what was sent


def test_one_line_is_bounded():
    assert len(one_line("x" * 10_000)) == evidence.MAX_EVIDENCE
    assert one_line("a  \t b") == "a b"


# ----------------------------------------------------------------------------
# What a source shows


@pytest.mark.parametrize("source, expected", [
    ("import torch\ndef softmax(x, axis=-1):\n    return torch.softmax(torch.tensor(x), axis).numpy()", "torch.softmax"),
    ("def softmax(x, axis=-1):\n    return x.softmax(axis)", "x.softmax"),
    ("from scipy.special import softmax as sm\n", "imports softmax from scipy.special"),
    ("import torch\nf = torch._softmax\n", "torch._softmax"),
    ("import torch\nf = torch.special.softmax\n", "torch.special.softmax"),
    ("import torch\nf = getattr(torch, 'softmax')\n", "by name (getattr)"),
    ("import torch\nf = getattr(torch, '_soft' + 'max')\n", "getattr with a computed name"),
    ("import importlib\nm = importlib.import_module('torch.nn.' + 'functional')\n", "import_module"),
    ("m = __import__('torch')\n", "__import__"),
    ("exec('x = 1')\n", "exec"),
    ("from plmcourse.ref import attention\n", "course's own implementations"),
    ("import plmcourse.nn.attention\n", "course's own implementations"),
])
def test_read_source_finds_library_implementations_and_built_names(source, expected):
    found = read_source(source, frozenset(SOFTMAX_NAMES), SOFTMAX_PREFIXES)
    assert any(expected in phrase for phrase in found), found


@pytest.mark.parametrize("source", [
    textwrap.dedent(inspect.getsource(ref.softmax)),
    "def softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis=axis, keepdims=True))\n    return e / e.sum(axis=axis, keepdims=True)",
    "class Net:\n    def softmax(self, x):\n        return x\n    def f(self, x):\n        return self.softmax(x)",
    "shape = getattr(x, 'shape')\nn = getattr(x, 'ndim', 0)",
    "y = np.einsum('ij,jk->ik', a, b)\ns = np.lib.stride_tricks.as_strided(a, (2, 2), (8, 8))",
])
def test_read_source_leaves_honest_code_alone(source):
    assert read_source(source, frozenset(SOFTMAX_NAMES), SOFTMAX_PREFIXES) == []


@pytest.mark.parametrize("source", [
    "x = " + "-" * 200_000 + "1",
    "x = " + "1+" * 100_000 + "1",
    "x = 1\n" * 400_000,
])
def test_read_source_survives_sources_built_to_break_it(source):
    start = time.perf_counter()
    found = read_source(source)
    assert found, "a source no solution has must say so"
    assert time.perf_counter() - start < 20


def test_library_names_come_from_the_seal_not_from_a_course_class_methods():
    sealed, names, prefixes = evidence.library_names("check_softmax")
    assert {"softmax", "Softmax", "log_softmax"} <= set(sealed) <= set(names) and "_softmax" in prefixes
    assert "special_softmax" in names and "special_softmax" not in sealed  # flag_library: reported, not sealed
    _, wordpiece, _ = evidence.library_names("check_wordpiece")
    assert "encode" not in wordpiece and "__init__" not in wordpiece  # WordPiece.encode: str.encode's name too


# ----------------------------------------------------------------------------
# Fingerprints


REFERENCE = textwrap.dedent(inspect.getsource(ref.multi_head_attention))


def _renamed(source):
    names = {"x_q": "queries_in", "x_kv": "keys_in", "n_heads": "h", "mask": "m"}
    for old, new in names.items():
        source = source.replace(old, new)
    return source


def _with_dead_code(source):
    lines = source.splitlines()
    body = next(i for i, line in enumerate(lines) if line.strip().startswith(("batch", "q =", "b,", "B,")) or
                ("=" in line and not line.strip().startswith(("def", '"""', "#"))))
    dead = ["    unused = [i * i for i in range(3)]", "    if False:", "        print('never')"]
    return "\n".join(lines[:body] + dead + lines[body:])


@pytest.mark.parametrize("change", [_renamed, _with_dead_code, lambda s: _renamed(_with_dead_code(s))])
def test_fingerprints_survive_renaming_and_dead_code(change):
    changed = change(REFERENCE)
    assert changed != REFERENCE
    assert containment(fingerprints(changed), fingerprints(REFERENCE)) >= evidence.COURSE_SIMILAR


HELPER = "def split(t, h):\n    b, n, d = t.shape\n    return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)\n"
HEADS = ("def mha(x, wq, wk, wv, wo, h, mask=None):\n"
         "    q = split(x @ wq, h)\n    k = split(x @ wk, h)\n    v = split(x @ wv, h)\n")
ATTEND = ("    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])\n    if mask is not None:\n"
          "        s = np.where(mask, s, -np.inf)\n    e = np.exp(s - s.max(-1, keepdims=True))\n"
          "    a = e / e.sum(-1, keepdims=True)\n    out = (a @ v).transpose(0, 2, 1, 3)\n"
          "    b, n, _, d = out.shape\n    return out.reshape(b, n, -1) @ wo, a\n")
INLINED = ("def mha(x, wq, wk, wv, wo, h, mask=None):\n    b, n, d = x.shape\n"
           + "".join(f"    {t} = (x @ w{t}).reshape(b, n, h, d // h).transpose(0, 2, 1, 3)\n" for t in "qkv"))


def test_fingerprints_survive_reordered_functions_and_a_helper_inlined():
    course = fingerprints(HELPER + HEADS + ATTEND)
    assert containment(fingerprints(HEADS + ATTEND + HELPER), course) >= 0.95  # functions reordered
    assert containment(fingerprints(INLINED + ATTEND), course) >= evidence.COURSE_SIMILAR  # the helper inlined


def test_an_independent_answer_is_not_close_to_the_reference():
    independent = textwrap.dedent("""
        def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
            outs, maps = [], []
            d = w_q.shape[1] // n_heads
            for h in range(n_heads):
                cols = slice(h * d, (h + 1) * d)
                scores = np.einsum('bqd,bkd->bqk', x_q @ w_q[:, cols], x_kv @ w_k[:, cols]) / d ** 0.5
                if mask is not None:
                    scores = np.where(mask, scores, -np.inf)
                top = scores.max(-1, keepdims=True)
                p = np.exp(scores - np.where(np.isfinite(top), top, 0))
                p = p / np.maximum(p.sum(-1, keepdims=True), 1e-300)
                maps.append(p)
                outs.append(np.einsum('bqk,bkd->bqd', p, x_kv @ w_v[:, cols]))
            return np.concatenate(outs, -1) @ w_o, np.stack(maps, 1)
    """)
    assert containment(fingerprints(independent), fingerprints(REFERENCE)) < 0.5


# ----------------------------------------------------------------------------
# A whole submission, read in a child process


SPEC = {"course_cells": [], "test_ids": ["test_softmax"],
        "exercises": {"softmax": {"function": "softmax", "test_id": "test_softmax", "check": "check_softmax",
                                  "sealed": list(SOFTMAX_SEALED), "names": list(SOFTMAX_NAMES),
                                  "prefixes": list(SOFTMAX_PREFIXES)}}}


def _notebook(tmp_path, *sources, answer=None):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    if answer is not None:
        cell = nbformat.v4.new_code_cell(answer)
        cell.metadata["nbgrader"] = {"grade_id": "softmax", "solution": True, "grade": False}
        nb.cells.append(cell)
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    return path


def test_a_helper_cell_the_answer_reads_is_part_of_the_answer(tmp_path):
    path = _notebook(tmp_path, "import torch\ndef helper(x):\n    return torch.softmax(torch.tensor(x), -1).numpy()\n",
                     "print('an unrelated cell')", answer="def softmax(x, axis=-1):\n    return helper(x)\n")
    found = evidence.analyse_submission(path, SPEC)
    assert any(e == "softmax" and "a helper cell reaches a library softmax" in p for e, _, p in found["flags"])


@pytest.mark.parametrize("answer, sealed", [
    ("import torch\ndef softmax(x, axis=-1):\n    return torch.softmax(torch.tensor(x), axis).numpy()\n", True),
    ("def softmax(x, axis=-1):\n    import torch.special as s\n    return s.log_softmax(torch.tensor(x), axis).exp().numpy()\n",
     True),  # torch.log_softmax is sealed: under any module
    ("import torch\ndef softmax(x, axis=-1):\n    return torch._softmax(torch.tensor(x), axis, False).numpy()\n",
     False),  # a private name: flag_library, reported for a person
])
def test_an_answer_that_reaches_a_sealed_name_is_told_apart_from_a_flag(tmp_path, answer, sealed):
    found = evidence.analyse_submission(_notebook(tmp_path, answer=answer), SPEC)
    assert found["flags"] and bool(found["sealed"]) == sealed, found


def test_the_course_s_own_code_is_called_the_course_s_not_a_library(tmp_path):
    """An answer that calls plmcourse's softmax through the notebook's `ref` is told it reached the course's own
    code (and is sealed as before); one that calls torch's is told it reached a library."""
    course = evidence.analyse_submission(_notebook(tmp_path, "from plmcourse import data, ref\n",
                                                   answer="def softmax(x, axis=-1):\n    return ref.softmax(x, axis)\n"),
                                         SPEC)
    assert [p for _, _, p in course["flags"]] == ["reaches the course's own softmax (ref.softmax)"], course
    assert course["sealed"] == [["softmax", "reaches the course's own softmax (ref.softmax)"]]
    library = evidence.analyse_submission(_notebook(tmp_path, "import torch\n", answer=(
        "def softmax(x, axis=-1):\n    return torch.softmax(torch.tensor(x), axis).numpy()\n")), SPEC)
    assert any(p.startswith("reaches a library softmax (torch.softmax)") for _, _, p in library["flags"]), library


def test_a_method_of_the_student_s_own_class_is_not_a_library(tmp_path):
    answer = ("class Normaliser:\n    def softmax(self, x, axis):\n        e = np.exp(x - x.max(axis, keepdims=True))\n"
              "        return e / e.sum(axis, keepdims=True)\n\n"
              "tool = Normaliser()\n\ndef softmax(x, axis=-1):\n    return tool.softmax(x, axis)\n")
    found = evidence.analyse_submission(_notebook(tmp_path, answer=answer), SPEC)
    assert found["flags"] == [] and found["sealed"] == []


def test_a_cell_that_compares_with_torch_on_its_own_is_not_an_answer(tmp_path):
    path = _notebook(tmp_path, "import torch\nprint(torch.softmax(torch.zeros(3), 0))\n",
                     answer="def softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis, keepdims=True))\n"
                            "    return e / e.sum(axis, keepdims=True)\n")
    assert evidence.analyse_submission(path, SPEC)["flags"] == []


@pytest.mark.integration  # the reader's child process, up to its limits
@pytest.mark.parametrize("answer", [
    "x = " + "(" * 150 + "1" + ")" * 150 + "\n" + "y = " + "-" * 300_000 + "1\n",
    "x = 1\n" * 2_000_000,
])
def test_a_submission_built_to_break_the_analysis_costs_only_a_flag(tmp_path, answer):
    path = _notebook(tmp_path, answer=answer)
    start = time.perf_counter()
    found = evidence.analyse_submission(path, SPEC)
    assert time.perf_counter() - start < evidence.ANALYSIS_SECONDS + 15
    assert found["flags"], "the analysis must say it could not read the answer"


def test_a_notebook_that_is_not_json_costs_only_a_flag(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text("[" * 100_000)
    found = evidence.analyse_submission(path, SPEC)
    assert "could not be read" in found["flags"][0][2]


def test_classmates_are_paired_but_copies_of_the_course_explain_themselves():
    shared = set(range(100))
    prints = {"ann": {"softmax": sorted(shared)}, "bob": {"softmax": sorted(shared | {500})},
              "cy": {"softmax": list(range(1000, 1100))}}
    flags = evidence.classmates("nb", prints, copied=set())
    assert {(f.student, f.evidence.split(" matches ")[1].split("'")[0]) for f in flags} == {("ann", "bob"), ("bob", "ann")}
    assert evidence.classmates("nb", prints, copied={("ann", "softmax"), ("bob", "softmax")}) == []


def test_the_launcher_s_stop_is_the_sandbox_s_word_and_the_kernel_s_reports_stay_the_kernel_s(tmp_path):
    from plmcourse.autograde.judge import refusal_flag

    kernel_flags = [("ann", "nb", "", "the grading kernel was stopped: it made more than 10,000 files in /tmp"),
                    ("bob", "nb", "", refusal_flag("the grading kernel was stopped: a kernel's forgery"))]
    flags = review.gather(tmp_path, "03_attention", ["ann", "bob"], kernel_flags, {})
    assert [(f.student, f.source) for f in flags] == [("ann", "sandbox"), ("bob", "kernel")]


def test_the_closest_unflagged_pairs_are_listed_closest_first_for_a_person(tmp_path):
    base = set(range(100))
    prints = {"ann": {"softmax": sorted(base)},
              "bob": {"softmax": sorted(set(range(15, 115)))},     # 0.85 of ann's: under the threshold
              "cy": {"softmax": sorted(base | {900})},             # 1.00: flagged, so not listed
              "dee": {"softmax": sorted(set(range(50, 150)))},     # 0.50 of ann's
              "eve": {"softmax": list(range(20))}}                 # too short to compare
    pairs = evidence.closest_pairs("nb", prints, copied=set())
    assert [pair[1:3] for pair in pairs[:2]] == [("ann", "bob"), ("bob", "cy")] and pairs[0][0] == 0.85
    assert all(share < evidence.CLASSMATES_SIMILAR for share, *_ in pairs) and not any("eve" in p for p in pairs)
    assert [share for share, *_ in pairs] == sorted((share for share, *_ in pairs), reverse=True)
    assert evidence.closest_pairs("nb", prints, copied=set(), most=1) == pairs[:1]
    review.write_closest(tmp_path, "03_attention", [(s, a, b, "nb", e) for s, a, b, e in pairs])
    lines = review.review_table(tmp_path, "03_attention")  # no flags: the closest pairs still show
    assert lines[0].startswith("no flags for 03_attention") and "not flagged" in lines[1]
    assert lines[3].split() == ["0.85", "ann", "bob", "nb", "softmax"]


# ----------------------------------------------------------------------------
# The judge: the first hidden run decides, and the kernel is told no hidden values


def test_the_first_hidden_run_decides_and_flags_only_add(tmp_path):
    record = tmp_path / "r.jsonl"
    runs = [{"check": "check_softmax", "hidden": False, "passed": False, "message": "v", "flags": []},
            {"check": "check_softmax", "hidden": True, "passed": False, "message": "first", "flags": ["a"]},
            {"check": "check_softmax", "hidden": True, "passed": True, "message": "second", "flags": []},
            {"check": "check_causal_mask", "hidden": False, "passed": True, "message": "only visible", "flags": []}]
    record.write_text("".join(json.dumps(r) + "\n" for r in runs))
    decided = read_record(record)
    assert decided["check_softmax"]["message"] == "first" and not decided["check_softmax"]["passed"]
    assert "a" in decided["check_softmax"]["flags"]
    assert any("ran 2 times with different verdicts" in f for f in decided["check_softmax"]["flags"])
    assert decided["check_causal_mask"]["message"] == "only visible"


def _judge_in_a_course(tmp_path):
    course = tmp_path / "course"
    folder = course / "autograded" / "alice" / "03_attention"
    folder.mkdir(parents=True)
    return Judge(tmp_path / "judge", course), folder


def _kernel_runs(judge, folder, runs):
    """Connect to the judge as the launcher and kernel do; run each (check, fn, hidden); what the kernel saw."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(str(judge.socket_path))
    wire.send(connection, {"notebook_dir": str(folder)})
    seen = []
    for check, fn, hidden in runs:
        try:
            serve(connection, check, fn, hidden)
            seen.append("passed")
        except core.CheckFailed as failure:
            seen.append(str(failure))
    connection.close()
    time.sleep(0.2)  # the judge's thread writes the record after the verdict goes out
    return seen


def honest_softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isneginf(m), 0, m))
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def wrong_on_large_inputs(x, axis=-1):
    """Right on the visible cases' small arrays, wrong on some hidden ones: a hidden failure."""
    out = honest_softmax(x, axis)
    return out * 1.5 if x.size > 30 else out


def test_a_hidden_failure_reaches_the_kernel_without_its_values(tmp_path):
    judge, folder = _judge_in_a_course(tmp_path)
    with judge:
        seen = _kernel_runs(judge, folder, [("check_softmax", wrong_on_large_inputs, False),
                                            ("check_softmax", wrong_on_large_inputs, True)])
    record = read_record(judge.record_path(folder))["check_softmax"]
    assert not record["passed"] and "hidden case" in seen[1]
    assert "expected" in record["message"] and any(c.isdigit() for c in record["message"].split("expected")[1])
    told = seen[1].split(":", 1)[1]
    assert "seed" not in told and not any(c.isdigit() for c in told.replace("float64", "").replace("float32", ""))
    assert record["shown"] == seen[1]


def test_a_probe_first_then_the_right_answer_keeps_the_probe_s_verdict(tmp_path):
    judge, folder = _judge_in_a_course(tmp_path)
    probe = lambda x, axis=-1: np.zeros_like(x)  # noqa: E731
    with judge:
        seen = _kernel_runs(judge, folder, [("check_softmax", probe, True), ("check_softmax", honest_softmax, True)])
    assert seen[1] == "passed"  # the later run is judged, and recorded...
    decided = read_record(judge.record_path(folder))["check_softmax"]
    assert not decided["passed"]  # ...but cannot improve the grade
    assert any("different verdicts" in f for f in decided["flags"])


def test_the_kernel_s_report_of_its_calls_reaches_a_flag_as_one_plain_line():
    remote = core.Remote(None)
    case = core.Case("seed 0", ())
    remote.note_library("check_softmax", case, ["torch._softmax\n\x1b[31mbob: flagged for review" + "x" * 500])
    (flag,) = remote.flags
    assert "\n" not in flag and "\x1b" not in flag and len(flag) < 400


# ----------------------------------------------------------------------------
# The review table


def test_review_rows_most_suspicious_first_and_spreadsheet_safe(tmp_path):
    flags = [Flag("ann", "nb", "softmax", "softmax is close to x (similarity 0.85)", "course", 0.85),
             Flag("bob", "nb", "softmax", "=HYPERLINK(\"http://evil\")", "answer"),
             Flag("bob", "nb", "causal_mask", "builds what it calls at run time (eval)", "answer")]
    points = {("bob", "nb", "softmax"): "0 of 2", ("ann", "nb", "softmax"): "2 of 2"}
    path = review.write_review(tmp_path, "03_attention", ["ann", "bob"], flags, points)
    rows = review.read_review(tmp_path, "03_attention")
    assert [r["student"] for r in rows] == ["bob", "bob", "ann"]
    assert "'=HYPERLINK" in path.read_text()
    lines = review.review_table(tmp_path, "03_attention")
    assert lines[0].split()[:3] == ["student", "exercise", "points"] and len(lines) == 4
    # The points the judge gave the flagged exercise: a flag on an answer that already scored 0 says so.
    column = lines[0].index("points")
    assert [line[column:column + 6].strip() for line in lines[1:]] == ["-", "0 of 2", "2 of 2"], lines
    # The columns line up, an empty similarity included ("-"), and nothing in a cell breaks the line.
    column = lines[0].index("source")
    assert [line[column:].split()[0] for line in lines[1:]] == ["answer", "answer", "course"], lines
    assert [line[lines[0].index("similarity"):].split()[0] for line in lines[1:]] == ["-", "-", "0.85"], lines
    # Grading ann again replaces her rows only.
    review.write_review(tmp_path, "03_attention", ["ann"], [])
    assert [r["student"] for r in review.read_review(tmp_path, "03_attention")] == ["bob", "bob"]
    # A table written before the points column is still read (its rows without points).
    older = "student,notebook,exercise,evidence,similarity,source\ncy,nb,softmax,reaches a library softmax,,answer\n"
    (tmp_path / "review" / "03_attention.csv").write_text(older)
    assert review.read_review(tmp_path, "03_attention")[0]["points"] == ""
    review.write_review(tmp_path, "03_attention", ["ann"], flags[:1], {("ann", "nb", "softmax"): "2 of 2"})
    assert [(r["student"], r["points"]) for r in review.read_review(tmp_path, "03_attention")] == [("cy", ""), ("ann", "2 of 2")]


def test_the_judge_loads_the_libraries_a_seal_looks_for():
    """A seal that names a library only when it is loaded must not depend on what the judge's
    process happened to import: in a fresh process, the judge loads it before the check runs."""
    import subprocess
    import sys

    pytest.importorskip("transformers")
    script = ("import sys\n"
              "from plmcourse.judging.wordpiece import _wordpiece_seal\n"
              "before = {label for _, label in _wordpiece_seal()}\n"
              "from plmcourse.autograde.judge import load_sealed_libraries\n"
              "load_sealed_libraries('check_wordpiece')\n"
              "after = {label for _, label in _wordpiece_seal()}\n"
              "print(sorted(after - before))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "Hugging Face" in done.stdout, done.stdout + done.stderr


def test_a_comment_quoting_a_student_renders_as_text():
    """Feedback renders gradebook comments through Markdown: a judge's sentence quoting a student's
    exception must not become HTML or a link there."""
    from nbconvert.filters.markdown import markdown2html

    said = "your function raised ValueError: <img src=x onerror=alert(1)> [here](javascript:alert(1))"
    shown = markdown2html(review.comment_safe(said))
    assert "<img" not in shown and "<a " not in shown and "href" not in shown
    assert "&lt;img src=x onerror=alert(1)&gt;" in shown  # the text itself, readable
    # The formgrader shows a comment as plain text: what Markdown would not act on stays unescaped there.
    plain = "check_causal_mask failed on case 2: expected [0, 2, 24], got [0, 2] (a < b)"
    assert review.comment_safe(plain) == plain and "[0, 2, 24]" in markdown2html(plain)


def test_a_kernel_that_asks_for_a_check_the_course_lacks_gets_a_sentence_and_the_judge_goes_on(tmp_path):
    """A kernel out of step with the judge (a forged announcement, an interrupt between two messages)
    costs its own check, and the same connection still judges the next one."""
    judge, folder = _judge_in_a_course(tmp_path)
    with judge:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(str(judge.socket_path))
        wire.send(connection, {"notebook_dir": str(folder)})
        wire.send(connection, {"check": "check_everything\x1b[2J", "hidden": True})
        reply = wire.receive(connection)
        serve(connection, "check_softmax", honest_softmax, True)  # raises if the judge thread died
        connection.close()
        time.sleep(0.2)
    assert not reply["verdict"]["passed"] and "\x1b" not in reply["verdict"]["message"]
    assert read_record(judge.record_path(folder))["check_softmax"]["passed"]


def test_refusals_the_kernel_reports_are_bounded_inert_flags_between_and_inside_checks(tmp_path):
    """The kernel's policy tells the judge of each refusal ({"refused": sentence}): between checks it lands as
    a flag of the notebook, inside a check as a flag of that check; never a verdict, bounded, one plain line."""
    from plmcourse.autograde.judge import MAX_REFUSALS, POLICY

    def refusing_softmax(x, axis=-1):
        with core_kernel.SEND_LOCK:  # what plmcourse.grading.policy.tell_judge does from inside the call
            wire.send(core_kernel._judge_connection(), {"refused": "refused while grading: starting a process"})
        return honest_softmax(x, axis)

    judge, folder = _judge_in_a_course(tmp_path)
    with judge:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(str(judge.socket_path))
        wire.send(connection, {"notebook_dir": str(folder)})
        for _ in range(MAX_REFUSALS + 10):  # a kernel that writes them itself, many, with a terminal escape
            wire.send(connection, {"refused": "refused while grading: import scipy\x1b[2J\n" + "x" * 1000})
        core_kernel._CONNECTION[:] = [connection]
        try:
            serve(connection, "check_softmax", refusing_softmax, True)
        finally:
            core_kernel._CONNECTION[:] = []
        connection.close()
        time.sleep(0.2)
    record = read_record(judge.record_path(folder))
    assert record["check_softmax"]["passed"] and record[POLICY]["passed"]  # evidence, never a verdict
    notebook_flags, check_flags = record[POLICY]["flags"], record["check_softmax"]["flags"]
    assert len(notebook_flags) == 1 and len(check_flags) == 1  # the same sentence, kept once
    lines = (judge.record_path(folder)).read_text().splitlines()
    assert sum('"check": "policy"' in line for line in lines) == MAX_REFUSALS
    assert check_flags[0].endswith("starting a process (seed 0: x of shape (6,); the kernel's own report)")
    for flag in notebook_flags + check_flags:
        assert flag.startswith("the kernel's policy refused while grading")
        assert "\n" not in flag and "\x1b" not in flag and len(flag) <= 400


def test_the_launcher_s_word_that_it_stopped_a_kernel_is_a_flag_and_keeps_the_verdicts(tmp_path, monkeypatch):
    """The launcher stops a kernel past a resource cap and says why on a connection of its own: a flag of the
    notebook, one plain line; the verdicts the kernel already earned stay (its connection is not a new kernel)."""
    from plmcourse.autograde import sandbox
    from plmcourse.autograde.judge import POLICY

    judge, folder = _judge_in_a_course(tmp_path)
    with judge:
        _kernel_runs(judge, folder, [("check_softmax", honest_softmax, True)])
        monkeypatch.setenv("PLMCOURSE_JUDGE_SOCKET", str(judge.socket_path))
        sandbox.tell_judge_stopped(folder, "the grading kernel was stopped: it made more than 10,000 files\x1b[2J\nin /tmp")
        time.sleep(0.2)
    record = read_record(judge.record_path(folder))
    assert record["check_softmax"]["passed"] and record["check_softmax"]["hidden"]
    [flag] = record[POLICY]["flags"]
    assert flag.startswith("the grading kernel was stopped: it made more than 10,000 files") and flag.endswith("in /tmp")
    assert "\n" not in flag and "\x1b" not in flag


@pytest.mark.parametrize("softmax, inherited", [
    ("from plmcourse.ref import word_vectors\ndef softmax(x, axis=-1):\n"
     "    return np.exp(word_vectors.log_softmax(x, axis))\n", True),  # the course's code: not reachable
    ("import torch\ndef softmax(x, axis=-1):\n    return torch.softmax(torch.from_numpy(x), axis).numpy()\n",
     False),  # a library the attention exercise itself allows: softmax's seal only
])
def test_an_answer_built_on_a_sealed_answer_inherits_a_seal_on_the_course_s_code(tmp_path, softmax, inherited):
    spec = json.loads(json.dumps(SPEC))
    spec["exercises"]["attention"] = {"function": "attention", "test_id": "test_attention", "check": None,
                                      "sealed": ["attention"], "names": [], "prefixes": []}
    nb = nbformat.v4.new_notebook()
    for grade_id, source in [("softmax", softmax),
                             ("attention", "def attention(q, k, v):\n    return softmax(q @ k.T) @ v\n")]:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "solution": True, "grade": False}
        nb.cells.append(cell)
    nbformat.write(nb, tmp_path / "nb.ipynb")
    sealed = dict(evidence.analyse_submission(tmp_path / "nb.ipynb", spec)["sealed"])
    assert "softmax" in sealed and ("attention" in sealed) == inherited
    assert not inherited or "calls softmax, whose answer" in sealed["attention"]


def test_a_helper_written_into_a_course_cell_is_read_without_the_course_s_code(tmp_path):
    """A student may write a helper into a demonstration cell; the course's own code around it
    (which may well call torch.softmax to show something) is not the student's answer."""
    demo = "import torch\nshown = torch.softmax(torch.zeros(3), 0)\nprint(shown)"
    spec = {**json.loads(json.dumps(SPEC)), "course_cells": [demo]}
    helper = "\n\ndef my_softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis, keepdims=True))\n    return e / e.sum(axis, keepdims=True)\n"
    path = _notebook(tmp_path, demo + helper, answer="def softmax(x, axis=-1):\n    return my_softmax(x, axis)\n")
    found = evidence.analyse_submission(path, spec)
    assert found["flags"] == [] and found["sealed"] == []


@pytest.mark.parametrize("code, phrase", [
    ('f = vars(_tc)["soft" + "max"]', "a lookup in vars() by a computed name"),
    ('f = _tc.__dict__.get(name)', "a lookup in __dict__ by a computed name"),
    ('f = globals()[name]', "a lookup in globals() by a computed name"),
    ('f = torch.nn.functional.__dict__["softmax"]', "reaches a library softmax by name (__dict__)"),
    ('f = vars(torch)["softmax"]', "reaches a library softmax by name (vars())"),
    ('f = torch.__getattribute__("softmax")', "reaches a library softmax by name (getattr)"),
    ('f = type(t).__getattr__(t, "soft" + "max")', "builds what it calls at run time (getattr with a computed name)"),
])
def test_lookups_through_namespaces_are_read_as_names(code, phrase):
    """A library's function reached through a mapping or a dunder call is what getattr would reach."""
    found = read_source(f"import torch\n{code}\n", frozenset({"softmax"}))
    assert any(phrase in said for said in found), found


def test_docstrings_and_comments_are_not_read_as_code_but_string_values_are():
    """Prose that names sys.modules or builtins is not a use of them; the same words in code are, and so is
    a string the code uses (a path it opens, a module it imports by name)."""
    prose = ('def softmax(x, axis=-1):\n'
             '    """Not like sys.modules tricks or builtins hacks: plain NumPy (é)."""\n'
             '    "a second statement string: get_ipython is not used"  # nor __code__\n'
             '    return x  # sys.settrace\n')
    assert evidence.suspicious_text(prose) == []
    code = "import sys, builtins\nmods = sys.modules\nbuiltins.print = print\n"
    assert set(evidence.suspicious_text(code)) >= {"edits the module table", "touches Python's builtins"}
    values = ("db = open('../../../gradebook.db')\n"
              "m = __import__('importlib').import_module('plmcourse.grading')\n"
              "f = open(f'../source/{name}')  # a comment\n")
    assert set(evidence.suspicious_text(values)) == {"mentions the gradebook", "touches the course's checks",
                                                     "mentions the instructors' source folder"}
    # A cell that cannot be tokenized does not run: read as it is, the words count
    assert evidence.suspicious_text("x = '''sys.modules") == ["edits the module table"]


def test_a_self_test_cell_is_no_helper_of_the_answer_for_sharing_a_parameter_s_name(tmp_path):
    """A student's own check (after the answer, comparing with torch.softmax) sets a global `x`; the answer's
    parameter `x` is its own, so that cell is not part of the answer. A cell whose function the answer calls is."""
    self_test = ("import torch\nx = np.random.randn(3, 4)\n"
                 "print(np.abs(softmax(x) - torch.softmax(torch.tensor(x), -1).numpy()).max())\n")
    answer = "def softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis, keepdims=True))\n    return e / e.sum(axis, keepdims=True)\n"
    found = evidence.analyse_submission(_notebook(tmp_path, self_test, answer=answer), SPEC)
    assert found["flags"] == [] and found["sealed"] == []
    helper = "import torch\ndef shifted(x):\n    return torch.softmax(torch.tensor(x), -1).numpy()\n"
    reached = evidence.analyse_submission(_notebook(tmp_path, helper, self_test,
                                                    answer="def softmax(x, axis=-1):\n    return shifted(x)\n"), SPEC)
    assert any("a helper cell reaches a library softmax" in phrase for _, _, phrase in reached["flags"])
