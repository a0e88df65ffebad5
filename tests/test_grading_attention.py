"""plmcourse.judging.attention: right answers pass, every catalogued mistake fails with its hint,
and the checks hold up against delegation, monkey-patching and cached answers."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import sys
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F

# Aliases taken before the checks are imported, as a notebook might: sealing must still see them.
from plmcourse.ref import softmax as early_softmax
from torch.nn.functional import scaled_dot_product_attention as early_fused

from mistake_catalogue import catalogue_tests, failure, find_mistake
from mistake_catalogue.attention_mistakes import (
    CATALOGUE,
    causal_tril,
    mha_reshape,
    sdpa_matmul,
    softmax_vectorised,
)
from plmcourse import ref
from plmcourse.grading import (
    CheckFailed,
    check_causal_mask,
    check_multi_head_attention,
    check_scaled_dot_product_attention,
    check_softmax,
)
from plmcourse.judging import attention as checks

# Wrong answers overflow and divide by zero on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def mistake(check_name, name):
    """The catalogued wrong function called `name`."""
    return find_mistake(CATALOGUE, check_name, name)


# ----------------------------------------------------------------------------
# The catalogue


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


# ----------------------------------------------------------------------------
# Sealing


def test_sealing_catches_an_alias_imported_before_the_checks():
    def student(x, axis=-1):
        return early_softmax(x, axis)

    assert "calls plmcourse.ref.softmax; write it yourself" in str(failure(check_softmax, student))


def test_sealing_catches_a_wrapper_put_in_place_of_the_reference():
    original = ref.softmax
    try:
        ref.softmax = lambda x, axis=-1: original(x, axis)  # the notebook rebinds the name

        def student(x, axis=-1):
            return ref.softmax(x, axis)

        assert "calls plmcourse.ref.softmax" in str(failure(check_softmax, student))
    finally:
        ref.softmax = original


def test_sealing_is_not_fooled_by_try_except():
    def student(q, k, v, mask=None):
        try:
            return ref.scaled_dot_product_attention(q, k, v, mask)
        except Exception:
            return sdpa_matmul(q, k, v, mask)

    assert "calls plmcourse.ref.scaled_dot_product_attention" in str(
        failure(check_scaled_dot_product_attention, student))


@pytest.mark.parametrize("fused", [early_fused, F.scaled_dot_product_attention], ids=["alias", "F"])
def test_sealing_catches_torch_fused_attention_under_any_name(fused):
    def student(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
        output, weights = mha_reshape(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask)
        fused(x_q[:, None], x_kv[:, None], x_kv[:, None])  # result unused: calling it is enough
        return output, weights

    message = str(failure(check_multi_head_attention, student))
    assert ("calls torch's fused attention (torch.nn.functional.scaled_dot_product_attention); "
            "write it yourself") in message


def test_sealing_catches_a_tensor_method():
    def student(x, axis=-1):
        return torch.from_numpy(np.asarray(x, dtype=np.float64)).softmax(axis).numpy()

    assert "calls torch.Tensor.softmax" in str(failure(check_softmax, student))


def test_sealing_catches_the_course_torch_module():
    def student(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
        module = plmcourse.nn.MultiHeadAttention(x_q.shape[-1], n_heads, bias=False, impl="explicit")
        module(x_q.float(), x_kv.float())
        return mha_reshape(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask)

    assert "calls plmcourse.nn.MultiHeadAttention" in str(failure(check_multi_head_attention, student))


def test_sealing_covers_scipy_softmax_once_scipy_is_loaded(monkeypatch):
    scipy_special = types.ModuleType("scipy.special")  # a stand-in: scipy is not a dependency

    def softmax(x, axis=None):
        return softmax_vectorised(x, -1 if axis is None else axis)

    scipy_special.softmax = softmax
    monkeypatch.setitem(sys.modules, "scipy.special", scipy_special)

    def student(x, axis=-1):
        return scipy_special.softmax(x, axis=axis)

    assert "calls scipy.special.softmax" in str(failure(check_softmax, student))


def test_the_seal_is_lifted_afterwards():
    def sentinel(frame, event, arg):
        return None

    sys.setprofile(sentinel)
    try:
        with pytest.raises(CheckFailed):
            check_softmax(early_softmax)
        assert sys.getprofile() is sentinel
    finally:
        sys.setprofile(None)
    assert not torch.overrides._get_current_function_mode_stack()
    ref.softmax(np.zeros(3))  # usable again, outside a check


def test_softmax_and_fused_attention_are_allowed_where_not_taught():
    # The MHA check does not seal torch.softmax: the correct catalogue entries use it.
    check_multi_head_attention(mha_reshape)


# ----------------------------------------------------------------------------
# Answers that try to look right


def returns_none(*args, **kwargs):
    return None


def test_cached_answers_fail_the_hidden_cases():
    seen = {}

    def recorder(x, axis=-1):
        answer = softmax_vectorised(x, axis)
        seen[(x.tobytes(), x.shape, axis)] = answer
        return answer

    check_softmax(recorder)

    def cached(x, axis=-1):
        return seen.get((x.tobytes(), x.shape, axis), np.full(x.shape, 1.0 / x.shape[axis]))

    check_softmax(cached)  # the visible cases are all remembered
    with pytest.raises(CheckFailed):
        check_softmax(cached, hidden=True)


# ----------------------------------------------------------------------------
# What comes back from the student's function


def test_an_exception_is_named_and_chained():
    def student(q, k, v, mask=None):
        raise ZeroDivisionError("boom")

    error = failure(check_scaled_dot_product_attention, student)
    assert "your function raised ZeroDivisionError: boom" in str(error)
    assert isinstance(error.__cause__, ZeroDivisionError)
    assert isinstance(error, AssertionError)


def test_a_function_returning_none():
    def student(n):
        causal_tril(n)

    assert "returned None" in str(failure(check_causal_mask, student))


def test_a_function_that_mutates_the_mask():
    def student(q, k, v, mask=None):
        if mask is not None:
            result = sdpa_matmul(q, k, v, mask)
            mask[...] = True
            return result
        return sdpa_matmul(q, k, v)

    assert "changed its input mask in place" in str(failure(check_scaled_dot_product_attention, student))


# ----------------------------------------------------------------------------
# Machine independence and the reference the checks compare with


def test_verdicts_do_not_depend_on_the_thread_count():
    wrong = mistake("check_multi_head_attention", "heads merged by a plain reshape")
    threads = torch.get_num_threads()
    try:
        messages = []
        for n in (1, 2):
            torch.set_num_threads(n)
            messages.append(str(failure(check_multi_head_attention, wrong)))
    finally:
        torch.set_num_threads(threads)
    assert messages[0] == messages[1]


@pytest.mark.parametrize("hidden", [False, True])
def test_torch_reference_agrees_with_plmcourse_ref(hidden):
    for case in checks._mha_cases(hidden, torch.device("cpu")):
        d = case.data
        output, weights, _ = checks._mha_reference(case)
        ref_output, ref_weights = ref.multi_head_attention(
            d["x_q"], d["x_kv"], *d["weights"], d["n_heads"], d["mask"])
        np.testing.assert_allclose(output, ref_output, atol=1e-12)
        np.testing.assert_allclose(weights, ref_weights, atol=1e-12)
        np.testing.assert_allclose(checks._mha_numpy(d)[0], ref_output, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_multi_head_attention_check_on_cuda():
    check_multi_head_attention(mha_reshape, hidden=True, device="cuda")
    wrong = mistake("check_multi_head_attention", "heads split by a plain reshape")
    on_gpu = str(failure(check_multi_head_attention, wrong, device="cuda"))
    assert on_gpu == str(failure(check_multi_head_attention, wrong))
