"""plmcourse.grading.sentence_embeddings: right answers pass, every catalogued mistake fails with its hint,
and the check holds up against delegation, monkey-patching and cached answers."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import sys
import types

import numpy as np
import pytest
import torch

# An alias taken before the checks are imported, as a notebook might: sealing must still see it.
from plmcourse.nn import mean_pool as early_mean_pool

import plmcourse.grading as grading
from mistake_catalogue import catalogue_tests, failure, find_mistake
from mistake_catalogue.sentence_embeddings_mistakes import CATALOGUE, pool_masked_fill, pool_rows, pool_where
from plmcourse.grading import CheckFailed, check_mean_pool
from plmcourse.grading import sentence_embeddings as checks
from plmcourse.nn import sentence_embeddings as nn_sentence_embeddings
from plmcourse.ref import sentence_embeddings as ref_sentence_embeddings

# Wrong answers divide by zero on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def mistake(name):
    return find_mistake(CATALOGUE, "check_mean_pool", name)


# ----------------------------------------------------------------------------
# The catalogue


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


def test_catalogue_covers_every_check():
    assert set(CATALOGUE) == {"check_mean_pool"}
    for correct, mistakes in CATALOGUE.values():
        assert len(correct) >= 4 and len(mistakes) >= 15


def test_every_check_is_exported():
    assert "check_mean_pool" in grading.__all__ and checks.__all__ == ["check_mean_pool"]
    assert grading.check_mean_pool is checks.check_mean_pool


def test_the_named_mistakes_are_in_the_catalogue():
    names = {name for _, (_, mistakes) in CATALOGUE.items() for name, _, _ in mistakes}
    for named in ("padding counted in the mean", "dividing by the padded length T", "NaN for a row with no real token",
                  "mask ignored", "wrong axis (mean over d)", "mask cast to float32 (float32 result for float64 input)",
                  "in-place modification of the input", "NaN leaking from padded positions (NaN * 0)",
                  "calls the course's torch version", "calls the course's NumPy version"):
        assert named in names


# ----------------------------------------------------------------------------
# The cases and the reference they are compared with


def test_the_visible_cases_cover_every_clause():
    cases = checks._mean_pool_cases(False, torch.device("cpu"))
    hidden_dtypes = {c.args[0].dtype for c in cases}
    mask_dtypes = {c.args[1].dtype for c in cases}
    assert hidden_dtypes == {torch.float64, torch.float32}
    assert {torch.bool, torch.int64} <= mask_dtypes and any(d.is_floating_point for d in mask_dtypes)
    tags = set().union(*(c.tags for c in cases))
    assert {"a row with no real token", "no padding", "the padding holds NaN and inf",
            "the padding holds values of 1e30"} <= tags
    shapes = [tuple(c.args[0].shape) for c in cases]
    assert any(B == 1 for B, _, _ in shapes) and any(T == 1 for _, T, _ in shapes)
    assert max(d for _, _, d in shapes) >= 384
    assert any(c.data["grad"] for c in cases) and not all(c.data["grad"] for c in cases)


@pytest.mark.parametrize("hidden", [False, True])
def test_reference_agrees_with_the_torch_version_and_autograd(hidden):
    for case in checks._mean_pool_cases(hidden, torch.device("cpu")):
        d = case.data
        output, grad = checks._mean_pool_reference(case)
        clean = torch.tensor(np.where(d["mask"][..., None], d["hidden"], 0.0), requires_grad=True)
        theirs = nn_sentence_embeddings.mean_pool(clean, torch.tensor(d["mask"]))
        np.testing.assert_allclose(output, theirs.detach().numpy(), atol=1e-12)
        (autograd,) = torch.autograd.grad((theirs * torch.tensor(d["upstream"])).sum(), clean)
        np.testing.assert_allclose(grad, autograd.numpy(), atol=1e-12)
        assert np.isfinite(output).all() and np.isfinite(grad).all()
        assert not np.any(grad[~d["mask"]])


# ----------------------------------------------------------------------------
# Sealing


def test_sealing_catches_an_alias_imported_before_the_checks():
    def student(hidden, mask):
        return early_mean_pool(hidden, mask)

    assert "calls plmcourse.nn.mean_pool; write it yourself" in str(failure(check_mean_pool, student))


def test_sealing_is_not_fooled_by_try_except():
    def student(hidden, mask):
        try:
            return ref_sentence_embeddings.mean_pool(hidden, mask)  # raises: hidden requires grad
        except Exception:
            return pool_where(hidden, mask)

    assert "calls plmcourse.ref.mean_pool" in str(failure(check_mean_pool, student))


def test_a_verbatim_copy_of_the_reference_counts_as_calling_it():
    namespace = {}
    exec(compile(open(nn_sentence_embeddings.__file__).read(), "copied.py", "exec"), namespace)
    assert "calls plmcourse.nn.mean_pool" in str(failure(check_mean_pool, namespace["mean_pool"]))


def test_sealing_covers_sentence_transformers_once_it_is_loaded(monkeypatch):
    library = types.ModuleType("sentence_transformers.models")  # a stand-in: not a dependency

    class Pooling(torch.nn.Module):
        def forward(self, features):
            return pool_where(features["token_embeddings"], features["attention_mask"])

    library.Pooling = Pooling
    monkeypatch.setitem(sys.modules, "sentence_transformers.models", library)

    def student(hidden, mask):
        return library.Pooling()({"token_embeddings": hidden, "attention_mask": mask})

    assert "calls sentence_transformers.models.Pooling" in str(failure(check_mean_pool, student))


def test_the_seal_is_lifted_afterwards():
    def sentinel(frame, event, arg):
        return None

    sys.setprofile(sentinel)
    try:
        with pytest.raises(CheckFailed):
            check_mean_pool(early_mean_pool)
        assert sys.getprofile() is sentinel
    finally:
        sys.setprofile(None)
    assert not torch.overrides._get_current_function_mode_stack()
    early_mean_pool(torch.ones(1, 2, 3), torch.ones(1, 2))  # usable again, outside a check


# ----------------------------------------------------------------------------
# Tampering, inputs and cached answers


def test_inputs_are_compared_before_and_after():
    def student(hidden, mask):
        result = pool_masked_fill(hidden, mask)
        with torch.no_grad():
            mask.zero_()
        return result

    assert "changed its input mask in place" in str(failure(check_mean_pool, student))


def test_a_function_returning_none():
    def student(hidden, mask):
        pool_where(hidden, mask)

    assert "returned None" in str(failure(check_mean_pool, student))


def test_cached_answers_fail_the_hidden_cases():
    seen = {}

    def recorder(hidden, mask):
        answer = pool_where(hidden, mask)
        seen[hidden.detach().numpy().tobytes()] = answer.detach()
        return answer

    check_mean_pool(recorder)

    def cached(hidden, mask):
        remembered = seen.get(hidden.detach().numpy().tobytes())
        if remembered is None:
            return hidden[:, 0] * 0
        live = pool_where(hidden, mask)  # only for the gradient
        return live - live.detach() + remembered

    check_mean_pool(cached)
    with pytest.raises(CheckFailed):
        check_mean_pool(cached, hidden=True)


# ----------------------------------------------------------------------------
# Machine independence


def test_verdicts_do_not_depend_on_the_thread_count():
    threads = torch.get_num_threads()
    try:
        messages = []
        for n in (1, 2):
            torch.set_num_threads(n)
            messages.append([str(failure(check_mean_pool, mistake(name), hidden=True))
                             for name in ("padding counted in the mean", "mask inverted",
                                          "NaN gradient for a row with no real token (torch.where)")])
            check_mean_pool(pool_rows, hidden=True)
    finally:
        torch.set_num_threads(threads)
    assert messages[0] == messages[1]


def test_checks_leave_the_random_generators_alone():
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()
    check_mean_pool(pool_masked_fill, hidden=True)
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.random.get_state()[1].tolist() == numpy_state[1].tolist()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_mean_pool_check_on_cuda():
    for _, fn in CATALOGUE["check_mean_pool"][0]:
        check_mean_pool(fn, hidden=True, device="cuda")
    wrong = mistake("padding counted in the mean")
    assert str(failure(check_mean_pool, wrong, device="cuda")) == str(failure(check_mean_pool, wrong))

    def moves_to_cpu(hidden, mask):
        return pool_where(hidden.cpu(), mask.cpu())

    assert "expected cuda:0 like hidden" in str(failure(check_mean_pool, moves_to_cpu, device="cuda"))
