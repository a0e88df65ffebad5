"""A failed check shows as its sentence in the notebook, not as a traceback through the checker.

IPython displays an exception's `_render_traceback_()` lines. The check's own frames
(plmcourse/grading) never show; when the student's function raised, its frames do.
"""

import re

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

import plmcourse.grading.core as core
from plmcourse.grading import CheckFailed, check_causal_mask, check_softmax
from plmcourse.kernels import private_kernel_config

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def rendered(check, fn):
    with pytest.raises(CheckFailed) as info:
        check(fn)
    return [ANSI.sub("", line) for line in info.value._render_traceback_()], info.value


def test_a_wrong_answer_shows_only_the_sentence_wrapped_for_validate():
    lines, failure = rendered(check_causal_mask, lambda n: np.ones((n, n), dtype=bool))
    assert " ".join(lines) == f"CheckFailed: {failure}"  # the whole sentence, nothing else
    assert all(len(line) <= 80 for line in lines)  # nbgrader's Validate cuts lines longer than 87


def test_a_crash_shows_the_students_frames_and_never_the_checkers():
    def softmax(x, axis=-1):
        return helper(x) / 0

    def helper(x):
        return x.no_such_method()

    lines, _ = rendered(check_softmax, softmax)
    text = "\n".join(lines)
    assert "Your function raised it here:" in text
    assert "in softmax" in text and "in helper" in text and "x.no_such_method()" in text
    assert lines[-1].startswith("AttributeError")
    assert not any(folder in text for folder in core._CHECK_DIRS) and "run_check" not in text


@pytest.mark.notebook
def test_in_a_real_kernel_the_error_output_is_the_sentence(tmp_path):
    # nbgrader counts a test cell as failed by its error output: that must stay, only shorter.
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import plmcourse\nimport numpy as np\n"
                                  "def causal_mask(n):\n    raise ValueError('oops')"),
        nbformat.v4.new_code_cell("from plmcourse.grading import check_causal_mask\ncheck_causal_mask(causal_mask)"),
    ])
    with private_kernel_config() as config:
        NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=120, config=config,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    error = next(o for o in nb.cells[1].outputs if o.output_type == "error")
    text = ANSI.sub("", "\n".join(error.traceback))
    assert error.ename == "CheckFailed" and "check_causal_mask failed on case 1" in error.evalue
    assert text.startswith("CheckFailed: check_causal_mask failed") and "raise ValueError('oops')" in text
    assert "plmcourse/grading" not in text and "Traceback (most recent call last)" not in text


def test_a_float32_answer_is_named_as_a_precision_problem_with_digits_that_differ():
    from plmcourse.judging.core import F64, compare

    # What a multi-head attention computed in float32 inside gave: right to about 2e-7.
    expected = np.array([[-0.431312345678, 1.0]])
    got = expected + np.array([[2.27e-7, -1e-7]])
    message = compare(got, expected, **F64)
    assert "float32 rounding" in message and "atol 1e-09" in message and "rtol 1e-07" in message
    assert "expected -0.4313123, got -0.4313121" in message  # not "-0.4313, got -0.4313"
    assert "float32" not in compare(got + 1e-3, expected, **F64)  # a real error is not called rounding


def test_attention_computed_in_float32_inside_is_told_so():
    from mistake_catalogue.attention_mistakes import sdpa_matmul
    from plmcourse.grading import CheckFailed, check_scaled_dot_product_attention

    def in_float32(q, k, v, mask=None):
        output, weights = sdpa_matmul(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), mask)
        return output.astype(q.dtype), weights.astype(q.dtype)

    try:
        check_scaled_dot_product_attention(in_float32)
    except CheckFailed as failure:
        assert "which is float32 rounding" in str(failure)
    else:
        raise AssertionError("an answer computed in float32 passed the float64 cases")
