"""plmcourse.judging.sentence_embeddings: right answers pass, every catalogued mistake fails with its hint,
and the checks hold up against delegation, monkey-patching and cached answers.

check_mean_pool (notebook 07) first, then notebook 08's check_anisotropy, check_whitening and
check_info_nce_loss."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import functools
import math
import socket
import sys
import threading
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F

# Aliases taken before the checks are imported, as a notebook might: sealing must still see them.
from plmcourse.nn import anisotropy as early_nn_anisotropy
from plmcourse.nn import info_nce_loss as early_nn_info_nce_loss
from plmcourse.nn import mean_pool as early_mean_pool
from plmcourse.ref import anisotropy as early_anisotropy
from plmcourse.ref import info_nce_loss as early_ref_info_nce_loss
from plmcourse.ref import whiten as early_whiten
from plmcourse.ref import whitening as early_whitening

import plmcourse.judging as judging
from mistake_catalogue import assert_one_sentence, catalogue_tests, failure, find_mistake
from mistake_catalogue.sentence_embeddings_mistakes import (
    CATALOGUE,
    aniso_masked_diagonal,
    nce_default_0_1,
    nce_hardcoded_temperature,
    nce_normalize,
    pool_masked_fill,
    pool_rows,
    pool_where,
    white_eigh,
    white_svd,
)
from plmcourse.judging import check_anisotropy, check_info_nce_loss, check_mean_pool, check_whitening
from plmcourse.judging.core import CheckFailed
from plmcourse.grading import wire
from plmcourse.judging import core
from plmcourse.grading.core import serve
from plmcourse.judging import sentence_embeddings as checks
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
    assert all(c.data["grad"] for c in cases)  # float32 ones too: the result is trained through


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


# ============================================================================
# Notebook 08: anisotropy, whitening, info_nce_loss


def cases_of(check, hidden):
    return check.cases(hidden, torch.device("cpu")) if check.device else check.cases(hidden)


def verdicts(check, fn, hidden=True):
    """[(case, problem or None)] for every case, judged one by one (no case stops the others)."""
    found = []
    for case in cases_of(check, hidden):
        expected = check.reference(case)
        case.reply = core.call_student(fn, case)
        assert case.reply.error is None, case.reply.error
        found.append((case, check.judge(case, case.reply.value, expected)))
    return found


def judged(check_name, fn, hidden=True):
    """(passed, sentence) for `fn` checked through the wire: the judge and the kernel on a socketpair,
    as `plmcourse grade autograde` puts them in two processes (see tests/test_grading_core.py)."""
    kernel_end, judge_end = socket.socketpair()

    def kernel():
        try:
            serve(kernel_end, check_name, fn, hidden)
        except core.CheckFailed:  # the kernel shows the judge's verdict; the judge's side is compared below
            pass

    thread = threading.Thread(target=kernel)
    thread.start()
    announced = wire.receive(judge_end)
    remote = core.Remote(judge_end)
    try:
        getattr(judging, check_name)(remote, hidden=announced["hidden"])
        passed, sentence = True, remote.passed
    except core.CheckFailed as failed:
        passed, sentence = False, str(failed)
    wire.send(judge_end, {"verdict": {"passed": passed, "message": sentence}})
    thread.join(timeout=60)
    return passed, sentence


def temperature_matters(data, other):
    """Whether the loss of a case's data differs between its own temperature and `other` (not so for B = 1
    without hard negatives, nor for d = 1, where every cosine is +-1)."""
    loss = checks.ref_sentence_embeddings.info_nce_loss
    return abs(loss(data["z1"], data["z2"], data["tau"], data["hard"])
               - loss(data["z1"], data["z2"], other, data["hard"])) > 1e-6


# ----------------------------------------------------------------------------
# The cases cover every clause of the exercises


def test_the_anisotropy_cases_cover_every_clause():
    cases = checks._anisotropy_cases(False)
    shapes = [c.args[0].shape for c in cases]
    assert {2, 5} <= {n for n, _ in shapes} and any(n >= 200 for n, _ in shapes)
    assert {1, 2, 384} <= {d for _, d in shapes}
    assert {c.args[0].dtype for c in cases} == {np.dtype(np.float64), np.dtype(np.float32)}
    values = {c.label.split(": ", 1)[1]: checks._anisotropy_reference(c) for c in cases}
    cone = [v for label, v in values.items() if "a cone" in label and "zeros" not in label]
    assert cone and min(cone) > 0.85
    assert any(abs(v) < 0.2 for label, v in values.items() if "centred" in label)
    assert [v for label, v in values.items() if "identical" in label] == [pytest.approx(1.0)]
    assert [v for label, v in values.items() if "opposite" in label] == [pytest.approx(-1.0)]
    assert 0 < abs(next(v for label, v in values.items() if "orthogonal" in label)) < 1e-2
    zero_rows = [int((~c.data["X"].any(axis=1)).sum()) for c in cases]
    assert 1 in zero_rows and 2 in zero_rows
    assert {"huge", "tiny"} <= set().union(*(c.tags for c in cases))
    huge = next(c for c in cases if "huge" in c.tags).data["X"]
    tiny = next(c for c in cases if "tiny" in c.tags).data["X"]
    assert np.abs(huge).max() > 1e149 and np.all(np.outer(*(2 * [np.sum(huge ** 2, axis=1)])) == np.inf)
    assert 0 < np.abs(tiny).max() < 1e-157 and not np.any(np.outer(*(2 * [np.sum(tiny ** 2, axis=1)])))


def test_the_whitening_cases_cover_every_clause():
    cases = checks._whitening_cases(False)
    ks = [("k" in c.kwargs, c.kwargs.get("k"), len(c.args)) for c in cases]
    assert (False, None, 1) in ks                               # k omitted
    assert (True, None, 1) in ks                                # k=None passed
    assert any(len(c.args) == 2 for c in cases)                 # k positionally
    dims = [(c.data["X"].shape[1], c.data["k"]) for c in cases]
    assert any(k == d and "k" in c.kwargs for c, (d, k) in zip(cases, dims))
    assert any(k == 1 for _, k in dims) and any(1 < k < d for d, k in dims)
    assert {1, 2} <= {d for d, _ in dims} and max(d for d, _ in dims) >= 64
    assert any(c.args[0].dtype == np.float32 for c in cases)
    for case in checks._whitening_cases(True):
        X = case.data["X"]
        assert X.shape[0] > X.shape[1]
        assert np.abs(X.mean(axis=0)).min() > 1.0               # a forgotten mean shows
        values = np.linalg.eigvalsh(np.atleast_2d(np.cov(X.T)))
        assert np.all(values[1:] / values[:-1] > 1.05)          # no ties: the directions are unique up to sign


def test_the_info_nce_cases_cover_every_clause():
    cases = checks._info_nce_cases(False, torch.device("cpu"))
    temperatures = {c.data["tau"] for c in cases if "default temperature" not in c.tags}
    assert {1.0, 0.1, 0.01, 0.001} <= temperatures
    assert any("default temperature" in c.tags and len(c.args) == 2 and "temperature" not in c.kwargs
               for c in cases)
    assert any(c.kwargs.get("temperature") is not None for c in cases)
    hard = [None if c.data["hard"] is None else len(c.data["hard"]) for c in cases]
    Bs = [len(c.data["z1"]) for c in cases]
    assert None in hard and any("hard_negatives" in c.kwargs and c.kwargs["hard_negatives"] is None for c in cases)
    assert any(m == B for m, B in zip(hard, Bs)) and 1 in hard and any(m == 2 * B for m, B in zip(hard, Bs))
    assert any(B == 1 and m is None for m, B in zip(hard, Bs)) and any(B == 1 and m for m, B in zip(hard, Bs))
    assert any(c.data["hard_leaf"] for c in cases)              # the gradient to hard_negatives is judged
    dims = {c.data["z1"].shape[1] for c in cases}
    assert 1 in dims and max(dims) >= 384
    assert any(c.args[0].dtype == torch.float32 for c in cases)
    zeros = set().union(*(c.data["zero"] for c in cases))
    assert zeros == {"z1", "z2", "hard_negatives"}
    assert any(c.args[0] is c.args[1] for c in cases)


def test_hidden_runs_extend_the_visible_ones_with_other_seeds():
    for check in (check_anisotropy, check_whitening, check_info_nce_loss):
        visible = [c.label for c in cases_of(check, False)]
        hidden, salted = [c.label for c in cases_of(check, True)], [c.label for c in cases_of(check, 7000)]
        assert hidden[:len(visible)] == visible == salted[:len(visible)] and len(hidden) > len(visible)
        assert set(hidden[len(visible):]).isdisjoint(salted[len(visible):])


# ----------------------------------------------------------------------------
# The references


@pytest.mark.parametrize("hidden", [False, True])
def test_anisotropy_reference_is_the_mean_cosine_over_ordered_pairs(hidden):
    for case in checks._anisotropy_cases(hidden):
        X = case.data["X"]
        n = len(X)
        unit = [x / np.max(np.abs(x)) if np.any(x) else x for x in X]  # exact scaling, then the norm
        unit = [u / math.sqrt(sum(v * v for v in u)) if np.any(u) else u for u in unit]
        total = sum(float(np.dot(unit[i], unit[j])) for i in range(n) for j in range(n) if i != j)
        assert checks._anisotropy_reference(case) == pytest.approx(total / (n * (n - 1)), abs=1e-12)


@pytest.mark.parametrize("hidden", [False, True])
def test_whitening_reference_whitens_and_agrees_with_the_course(hidden):
    for case in checks._whitening_cases(hidden):
        X, k = case.data["X"], case.data["k"]
        mu, W = checks._whitening_reference(case)
        assert mu.shape == (X.shape[1],) and W.shape == (X.shape[1], k) and W.dtype == np.float64
        Z = (X - mu) @ W
        np.testing.assert_allclose(Z.mean(axis=0), 0, atol=1e-9)
        np.testing.assert_allclose(np.atleast_2d(np.cov(Z.T)), np.eye(k), atol=1e-9)
        variances = np.var((X - mu) @ (W * np.sqrt(np.sum(W ** 2, axis=0)) ** -1), axis=0)
        assert np.all(np.diff(variances) < 0)                   # largest variance first
        if X.shape[1] > 1:
            ref_mu, ref_W = early_whitening(X, k)
            np.testing.assert_array_equal(mu, ref_mu)
            np.testing.assert_array_equal(W, ref_W)


@pytest.mark.parametrize("hidden", [False, True])
def test_info_nce_reference_agrees_with_cosine_similarity_and_autograd(hidden):
    for case in checks._info_nce_cases(hidden, torch.device("cpu")):
        d = case.data
        value, grads = checks._info_nce_reference(case)
        z1 = torch.tensor(d["z1"], requires_grad=True)
        z2 = z1 if d["copies"] else torch.tensor(d["z2"], requires_grad=True)
        hard = None if d["hard"] is None else torch.tensor(d["hard"], requires_grad=True)
        candidates = z2 if hard is None else torch.cat([z2, hard])
        logits = F.cosine_similarity(z1[:, None], candidates[None], dim=-1) / d["tau"]
        loss = F.cross_entropy(logits, torch.arange(len(z1)))
        assert value == pytest.approx(float(loss.detach()), rel=1e-12, abs=1e-12)
        leaves = [z1, z2] + ([hard] if d["hard_leaf"] else [])
        unique = list({id(t): t for t in leaves}.values())
        theirs = dict(zip(map(id, unique), torch.autograd.grad(loss, unique)))
        for leaf, name, grad in zip(leaves, ["z1", "z2", "hard_negatives"], grads):
            assert np.isfinite(grad).all()
            keep = np.ones(len(grad), dtype=bool)
            if name in d["zero"]:
                keep[d["zero"][name]] = False
            if d["copies"] and "z1" in d["zero"]:
                keep[d["zero"]["z1"]] = False
            np.testing.assert_allclose(grad[keep], theirs[id(leaf)].numpy()[keep], rtol=1e-9, atol=1e-12)


def test_info_nce_reference_gradient_matches_finite_differences():
    case = checks._info_nce_cases(False, torch.device("cpu"))[3]  # three hard negatives, judged
    d = case.data
    _, grads = checks._info_nce_reference(case)
    step = 1e-6
    for which, key in enumerate(["z1", "z2", "hard"]):
        for index in [(0, 0), (1, 2), (2, 4)]:
            plus, minus = dict(d), dict(d)
            plus[key], minus[key] = d[key].copy(), d[key].copy()
            plus[key][index] += step
            minus[key][index] -= step
            numeric = (early_ref_info_nce_loss(plus["z1"], plus["z2"], d["tau"], plus["hard"])
                       - early_ref_info_nce_loss(minus["z1"], minus["z2"], d["tau"], minus["hard"])) / (2 * step)
            assert grads[which][index] == pytest.approx(numeric, rel=1e-5, abs=1e-9)


# ----------------------------------------------------------------------------
# Specific clauses


def test_whitening_columns_of_either_sign_pass():
    def flipped(X, k=None):
        mu, W = white_svd(X, k)
        return mu, W * np.where(np.arange(W.shape[1]) % 2 == 0, -1.0, 1.0)

    def all_negated(X, k=None):
        mu, W = white_svd(X, k)
        return mu, -W

    check_whitening(flipped, hidden=True)
    check_whitening(all_negated, hidden=True)


def test_an_eigh_answer_passes_whatever_signs_eigh_gives():
    def eigh_sorted(X, k=None):
        X = np.asarray(X, dtype=np.float64)
        k = X.shape[1] if k is None else k
        values, vectors = np.linalg.eigh(np.atleast_2d(np.cov(X.T)))
        order = np.argsort(values)[::-1][:k]
        return X.mean(axis=0), vectors[:, order] / np.sqrt(values[order])

    check_whitening(eigh_sorted, hidden=True)
    check_whitening(white_eigh, hidden=7000)
    signs = [np.sign(np.sum(eigh_sorted(c.args[0], c.data["k"])[1] * checks._whitening_reference(c)[1], axis=0))
             for c in checks._whitening_cases(False)]
    assert -1 in np.concatenate(signs) and 1 in np.concatenate(signs)  # the signs really differ somewhere


def test_whitening_says_whether_the_answer_whitens():
    ascending = str(failure(check_whitening, find_mistake(CATALOGUE, "check_whitening",
                                                          "components in ascending order")))
    assert "does have identity covariance" in ascending
    ddof0 = str(failure(check_whitening, find_mistake(CATALOGUE, "check_whitening", "ddof=0")))
    assert "does not have identity covariance" in ddof0


def test_a_hard_coded_temperature_fails_only_where_another_one_is_passed():
    judged_cases = verdicts(check_info_nce_loss, nce_hardcoded_temperature)
    for case, problem in judged_cases:
        other = case.data["tau"] != 0.05  # passed, and not 0.05
        if other and temperature_matters(case.data, 0.05):
            assert "a temperature of 0.05 whatever the argument says" in problem, case.label
        else:
            assert problem is None, case.label
    assert sum(problem is not None for _, problem in judged_cases) >= 8
    assert "failed on case 2 of" in str(failure(check_info_nce_loss, nce_hardcoded_temperature))


def test_a_default_temperature_of_0_1_fails_the_cases_that_omit_it():
    judged_cases = verdicts(check_info_nce_loss, nce_default_0_1)
    for case, problem in judged_cases:
        if "default temperature" in case.tags and temperature_matters(case.data, 0.1):
            assert "a temperature of 0.1 where none was passed" in problem, case.label
        else:
            assert problem is None, case.label
    assert sum(problem is not None for _, problem in judged_cases) >= 3
    message = str(failure(check_info_nce_loss, nce_default_0_1))
    assert "failed on case 1 of" in message and "temperature not passed (default 0.05)" in message


@pytest.mark.parametrize("name, fn", CATALOGUE["check_info_nce_loss"][0])
def test_zero_rows_give_a_finite_loss_and_gradient(name, fn):
    tested = 0
    for case in checks._info_nce_cases(True, torch.device("cpu")):
        if "zero row" not in case.tags:
            continue
        args = [a.detach().clone().requires_grad_(True) if isinstance(a, torch.Tensor) else a for a in case.args]
        kwargs = {k: v.detach().clone().requires_grad_(True) if isinstance(v, torch.Tensor) else v
                  for k, v in case.kwargs.items()}
        loss = fn(*args, **kwargs)
        leaves = [a for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor)]
        grads = torch.autograd.grad(loss, leaves)
        value = float(loss.detach())
        assert math.isfinite(value) and all(bool(torch.isfinite(g).all()) for g in grads)
        assert value == pytest.approx(checks._info_nce_reference(case)[0], rel=1e-7)
        tested += 1
    assert tested >= 4


@pytest.mark.parametrize("name, fn", CATALOGUE["check_anisotropy"][0])
def test_anisotropy_of_zero_rows_is_finite(name, fn):
    for case in checks._anisotropy_cases(True):
        if "zero row" in case.tags:
            assert math.isfinite(float(fn(case.args[0].copy())))


def test_extreme_magnitudes_are_named_overflow_and_underflow():
    overflow = str(failure(check_anisotropy, find_mistake(CATALOGUE, "check_anisotropy",
                                                          "product of squared norms overflows")))
    assert "1e150" in overflow and "an overflow" in overflow and "underflow" not in overflow
    underflow = str(failure(check_anisotropy, find_mistake(CATALOGUE, "check_anisotropy",
                                                           "product of norms underflows")))
    assert "1e-160" in underflow and "an underflow" in underflow and "overflow" not in underflow
    exp = str(failure(check_info_nce_loss, find_mistake(CATALOGUE, "check_info_nce_loss",
                                                        "exp overflows at a tiny temperature")))
    assert "temperature=0.001" in exp and "an overflow" in exp


def test_every_visible_case_can_fail_with_one_sentence():
    """A deliberately broken answer for each check fails case by case with a one-sentence message."""
    broken = {check_anisotropy: lambda X: 0.5, check_whitening: lambda X, k=None: (np.zeros(X.shape[1]), None),
              check_info_nce_loss: lambda z1, z2, temperature=0.05, hard_negatives=None: (z1 * 0).sum() + 0.5}
    for check, fn in broken.items():
        for case, problem in verdicts(check, fn, hidden=False):
            message = core._one_sentence(f"{check.name} failed on case 1 of 1 ({case.label}): {problem}")
            assert_one_sentence(message, check.name)


# ----------------------------------------------------------------------------
# Sealing


def test_sealing_catches_the_course_versions_imported_before_the_checks():
    def whitens_with_the_course(X, k=None):
        mu, W = white_svd(X, k)
        early_whiten(X, mu, W)  # only to look at the result: still a call of the course's version
        return mu, W

    def ref_value_own_gradient(z1, z2, temperature=0.05, hard_negatives=None):
        hard = None if hard_negatives is None else hard_negatives.detach().numpy()
        value = early_ref_info_nce_loss(z1.detach().numpy(), z2.detach().numpy(), temperature, hard)
        live = nce_normalize(z1, z2, temperature, hard_negatives)
        return live - live.detach() + value

    cases = [
        (check_anisotropy, lambda X: early_anisotropy(X), "calls plmcourse.ref.anisotropy"),
        (check_anisotropy, lambda X: early_nn_anisotropy(torch.from_numpy(np.asarray(X, dtype=np.float64))),
         "calls plmcourse.nn.anisotropy"),
        (check_anisotropy, lambda X: checks.nn_probing.self_similarity(torch.from_numpy(X.astype(np.float64))),
         "calls plmcourse.nn.self_similarity"),
        (check_whitening, lambda X, k=None: early_whitening(X, k), "calls plmcourse.ref.whitening"),
        (check_whitening, whitens_with_the_course, "calls plmcourse.ref.whiten"),
        (check_info_nce_loss, lambda z1, z2, temperature=0.05, hard_negatives=None:
         early_nn_info_nce_loss(z1, z2, temperature, hard_negatives), "calls plmcourse.nn.info_nce_loss"),
        (check_info_nce_loss, ref_value_own_gradient, "calls plmcourse.ref.info_nce_loss"),
    ]
    for check, student, said in cases:
        assert f"{said}; write it yourself" in str(failure(check, student))


def test_sealing_covers_sklearn_pca_once_it_is_loaded(monkeypatch):
    library = types.ModuleType("sklearn.decomposition")  # a stand-in: not a dependency

    def fit_context(fit):  # as sklearn's decorator: one wrapper code object shared by every estimator
        @functools.wraps(fit)
        def wrapper(self, *args, **kwargs):
            return fit(self, *args, **kwargs)
        return wrapper

    class PCA:
        def __init__(self, n_components=None, whiten=False):
            self.n_components, self.whiten = n_components, whiten

        def _fit(self, X):
            self.mean_ = X.mean(axis=0)
            _, sigma, Vt = np.linalg.svd(X - self.mean_, full_matrices=False)
            self.components_ = Vt[:self.n_components]
            self.explained_variance_ = (sigma ** 2 / (len(X) - 1))[:self.n_components]
            return self

        @fit_context
        def fit(self, X):
            return self._fit(X)

    library.PCA = PCA
    monkeypatch.setitem(sys.modules, "sklearn.decomposition", library)

    def student(X, k=None):
        pca = library.PCA(n_components=k, whiten=True).fit(np.asarray(X, dtype=np.float64))
        return pca.mean_, pca.components_.T / np.sqrt(pca.explained_variance_)

    assert "calls sklearn.decomposition.PCA" in str(failure(check_whitening, student))


def test_sealing_covers_sentence_transformers_loss_once_it_is_loaded(monkeypatch):
    library = types.ModuleType("sentence_transformers.losses")  # a stand-in: not a dependency

    class MultipleNegativesRankingLoss(torch.nn.Module):
        def __init__(self, scale=20.0):
            super().__init__()
            self.scale = scale

        def forward(self, anchors, candidates):
            return nce_normalize(anchors, candidates[:len(anchors)], 1 / self.scale, candidates[len(anchors):] if
                                 len(candidates) > len(anchors) else None)

    assert not any(label.startswith("sentence_transformers") for _, label in checks._info_nce_seal())
    library.MultipleNegativesRankingLoss = MultipleNegativesRankingLoss
    monkeypatch.setitem(sys.modules, "sentence_transformers.losses", library)

    def student(z1, z2, temperature=0.05, hard_negatives=None):
        candidates = z2 if hard_negatives is None else torch.cat([z2, hard_negatives])
        return library.MultipleNegativesRankingLoss(scale=1 / temperature)(z1, candidates)

    message = str(failure(check_info_nce_loss, student))
    assert "calls sentence_transformers.losses.MultipleNegativesRankingLoss" in message


def test_library_functions_a_student_should_use_are_not_sealed():
    check_whitening(white_eigh, hidden=True)        # np.cov, np.linalg.eigh
    check_info_nce_loss(nce_normalize, hidden=True)  # F.normalize, F.cross_entropy

    def cosine_similarity(z1, z2, temperature=0.05, hard_negatives=None):
        candidates = z2 if hard_negatives is None else torch.cat([z2, hard_negatives])
        logits = F.cosine_similarity(z1[:, None], candidates[None], dim=-1) / temperature
        return F.cross_entropy(logits, torch.arange(len(z1)))

    check_info_nce_loss(cosine_similarity, hidden=True)


def test_a_clamped_norm_is_not_sealed_but_fails_rows_of_1e_minus_160():
    """F.cosine_similarity clamps each norm to at least 1e-8 (F.normalize: 1e-12), so the cosines of rows
    of 1e-159 come out all but 0: the cases of entries of 1e-160 say so, and only they."""
    def cosine_similarity(X):
        t = torch.from_numpy(np.asarray(X, dtype=np.float64))
        cos = F.cosine_similarity(t[:, None], t[None], dim=-1).numpy()
        n = len(X)
        return float((cos.sum() - np.trace(cos)) / (n * (n - 1)))

    for case, problem in verdicts(check_anisotropy, cosine_similarity):
        assert (problem is not None) == ("tiny" in case.tags), case.label
        if problem:
            assert "an underflow" in problem and "F.cosine_similarity" in problem


# ----------------------------------------------------------------------------
# Through the wire, as graded


def test_through_the_wire_z2_arrives_as_z1_itself_and_the_verdicts_agree():
    seen = []

    def watching(z1, z2, temperature=0.05, hard_negatives=None):
        seen.append(z1 is z2)
        return nce_normalize(z1, z2, temperature, hard_negatives)

    assert judged("check_info_nce_loss", watching) == (True, "check_info_nce_loss: 29 cases passed.")
    assert any(seen) and not all(seen)
    for name, fn in [("check_anisotropy", aniso_masked_diagonal), ("check_whitening", white_eigh)]:
        passed, sentence = judged(name, fn)
        assert passed, sentence
    for check_name, mistake_name in [("check_info_nce_loss", "symmetric loss"), ("check_whitening", "ddof=0"),
                                     ("check_anisotropy", "NaN for a zero row"),
                                     ("check_info_nce_loss", "NaN gradient for a zero vector (torch.where)")]:
        wrong = find_mistake(CATALOGUE, check_name, mistake_name)
        local = str(failure(getattr(judging, check_name), wrong, hidden=True))
        assert judged(check_name, wrong) == (False, local)


def test_cached_anisotropy_answers_fail_the_hidden_cases():
    seen = {}

    def recorder(X):
        seen[X.tobytes()] = answer = aniso_masked_diagonal(X)
        return answer

    check_anisotropy(recorder)
    check_anisotropy(lambda X: seen.get(X.tobytes(), 0.0))
    with pytest.raises(CheckFailed):
        check_anisotropy(lambda X: seen.get(X.tobytes(), 0.0), hidden=True)


def test_notebook_08_checks_leave_the_random_generators_alone():
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()
    check_anisotropy(aniso_masked_diagonal, hidden=True)
    check_whitening(white_svd, hidden=True)
    check_info_nce_loss(nce_normalize, hidden=True)
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.random.get_state()[1].tolist() == numpy_state[1].tolist()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_info_nce_check_on_cuda():
    for _, fn in CATALOGUE["check_info_nce_loss"][0]:
        check_info_nce_loss(fn, hidden=True, device="cuda")
    wrong = find_mistake(CATALOGUE, "check_info_nce_loss", "symmetric loss")
    assert str(failure(check_info_nce_loss, wrong, device="cuda")) == str(failure(check_info_nce_loss, wrong))

    def moves_to_cpu(z1, z2, temperature=0.05, hard_negatives=None):
        return nce_normalize(z1.cpu(), z2.cpu(), temperature, None if hard_negatives is None else hard_negatives.cpu())

    assert "expected cuda:0 like z1" in str(failure(check_info_nce_loss, moves_to_cpu, device="cuda"))
