"""Checks for notebook 10 (prompting with little data): a cloze verbalizer, PET's soft labels and
class-balanced pseudo-labels, PyTorch.

    check_verbalizer_log_probs   verbalizer_log_probs(logits, mask_positions, label_word_ids) -> (B, C)
    check_pet_soft_labels        pet_soft_labels(pattern_log_probs, weights=None, temperature=2.0) -> (N, C)
    check_select_pseudo_labels   select_pseudo_labels(probs, per_class) -> indices

check_verbalizer_log_probs compares with plmcourse.ref.verbalizer_log_probs: B (1 and several), T, V,
C = 2, 3 and 4, label words per class (one each; 1, 2 and 3 in one call, as ragged lists; ids below T,
where reading the axes the wrong way round gives numbers instead of an IndexError), the mask at
position 0, at the last position and in the middle, different positions in one batch and the same
for every row, float32 (the result stays float32) and float64, and large logits (class scores
hundreds apart: a log of a softmax gives -inf there). A wrong answer is matched against the known
mistakes: another position than the mask (0, the last, row 0's for every row), a softmax over the
vocabulary, probabilities, max or sum or the first word instead of the mean, the batch axis, the T
and V axes swapped; a (B, B, C) result is named as logits[:, mask_positions]'s mix.

check_pet_soft_labels compares with plmcourse.ref.pet_soft_labels: P (1 and several), N (1 and
several), C = 2 to 5, weights not passed, None passed, uneven and unnormalised ones (a zero weight
among them), ones that sum to 1, P == C (where weights broadcast against the classes give numbers,
not an error), weights as a list of ints (hidden: a tuple), a negative weight and weights summing to 0
(ValueError, reported through a driver as plain data); the temperature not passed (2.0), 1, 2
passed, 0.5, 1.5 and 3, positional and keyword;
float32 and float64. Named: probabilities averaged instead of logits, the temperature ignored,
multiplied, hard-coded or with another default, weights not normalised, ignored or on the wrong axis,
a softmax over the wrong axis, log-probabilities or tempered logits returned.

check_select_pseudo_labels judges the returned indices as a set (any order; a torch integer tensor, a
NumPy integer array or a list of ints), against the spec rather than one tie-break: each class gives
its min(per_class, count) most confident predicted examples, and where confidences tie at the cut
any of the tied examples will do. The cases vary per_class (1, 2, 3, 5, more than a class has, more
than N, keyword), C = 2 to 5, classes with no predicted example, class imbalance (a global top-k
differs), examples confident in a class they are not predicted as, exact ties at the cut, float32 and
float64. Duplicates, indices out of range, masks, floats and nested lists are named; so are a global
top-k, confidence read from the wrong column, the least confident, per_class as a total, and a class
padded with other examples.

Sealed: the course's own plmcourse.ref and plmcourse.nn versions. Gradients are not judged: the
soft labels and the pseudo-labels are targets, and a verbalizer computed in NumPy and converted back
to a tensor of the logits' dtype and device is accepted.
"""

from collections import Counter

import numpy as np
import torch

from plmcourse.grading import prompting as declared
from plmcourse.judging.core import (
    EXPECT_ERROR,
    Case,
    Spec,
    compare,
    describe,
    dtype_name,
    error_report_problem,
    expect_array,
    first_match, hint_for, matches, name_mistake,
    hidden_salt,
    log_softmax,

    to_numpy,
    tolerance_for,
)
from plmcourse.nn import prompting as nn_prompting
from plmcourse.ref import prompting as ref_prompting

__all__ = ["check_verbalizer_log_probs", "check_pet_soft_labels", "check_select_pseudo_labels"]


def _softmax(x, axis=-1):
    return np.exp(log_softmax(x, axis))


def _expect_float_tensor(got, like, name):
    """None if `got` is a floating-point tensor of `like`'s dtype and device, else the problem."""
    if isinstance(got, np.ndarray):
        return (f"the result is a NumPy array, expected a torch.Tensor like {name} (after a NumPy detour, convert "
                f"back: torch.from_numpy(result).to({name}.device))")
    if isinstance(got, (list, tuple)) and got and all(isinstance(x, torch.Tensor) for x in got):
        return (f"the result is {describe(got)}, expected one torch.Tensor: torch.stack(..., dim=-1) makes one "
                f"tensor of them")
    problem = expect_array(got, "the result", kind="torch")
    if problem:
        return problem
    if not got.is_floating_point():
        return (f"the result has dtype {got.dtype}, expected {like.dtype} like {name}: (log-)probabilities are "
                f"floating-point numbers")
    if got.dtype != like.dtype:
        return (f"the result has dtype {got.dtype}, expected {like.dtype} like {name} (no .float() or .double(); "
                f"after a NumPy detour convert back with .to({name}.dtype))")
    if got.device != like.device:
        return f"the result is on {got.device}, expected {like.device} like {name} (make new tensors on its device)"
    return None


# ============================================================================
# verbalizer_log_probs(logits, mask_positions, label_word_ids) -> (B, C), PyTorch

VERBALIZER_SEAL = [
    (ref_prompting.verbalizer_log_probs, "plmcourse.ref.verbalizer_log_probs"),
    (nn_prompting.verbalizer_log_probs, "plmcourse.nn.verbalizer_log_probs"),
]


def _verbalizer_case(seed, words, positions, T, V, device, *, dtype=torch.float64, large=False):
    """logits ~ N(0, 2^2) of shape (B, T, V), B = len(positions); large: each row's class scores pushed
    ±900 apart at its mask (a softmax of them underflows to 0 for all but one class)."""
    rng = np.random.default_rng(seed)
    B = len(positions)
    positions = np.asarray(positions, dtype=np.int64)
    logits = rng.standard_normal((B, T, V)) * 2.0
    if large:
        for b in range(B):
            offsets = rng.permutation(np.linspace(-900.0, 900.0, len(words)))
            for ids, offset in zip(words, offsets):
                logits[b, positions[b], ids] += offset
    logits_t = torch.tensor(logits, dtype=dtype, device=device)
    words = [[int(w) for w in ids] for ids in words]
    label = (f"seed {seed}: logits of shape ({B}, {T}, {V}) {dtype_name(dtype)}, mask_positions "
             f"{positions.tolist()}, label_word_ids {words}")
    notes = {"large logits (class scores up to ±900 apart)": large}
    label += "".join(f", {note}" for note, on in notes.items() if on)
    tags = {dtype_name(dtype)} | ({"large logits"} if large else set())
    data = {"logits": to_numpy(logits_t).astype(np.float64), "positions": positions, "words": words,
            "dtype": dtype, "large": large}
    return Case(label, (logits_t, torch.tensor(positions, device=device), words), tags=frozenset(tags), data=data)


def _random_words(r, C, V):
    """C disjoint lists of 1 to 3 token ids below V (V >= C)."""
    counts = r.integers(1, min(3, V // C) + 1, size=C)
    ids = r.permutation(V)[:int(counts.sum())]
    return [ids[int(counts[:c].sum()):int(counts[:c + 1].sum())].tolist() for c in range(C)]


def _verbalizer_cases(hidden, device):
    f32 = torch.float32
    cases = [
        # Every class differs in its number of words; the masks in the middle, none at 0 or the last position;
        # every id below T, so that the T and V axes swapped give numbers to name, not an IndexError.
        _verbalizer_case(0, [[3, 11], [7], [15, 2, 9]], [3, 1, 12, 7], 16, 20, device),
        _verbalizer_case(1, [[4], [9]], [0, 4, 2], 5, 12, device),                  # first, last, middle; C = 2
        _verbalizer_case(2, [[1, 5], [12, 0], [8]], [5], 6, 15, device),            # B = 1, the mask last
        _verbalizer_case(3, [[3], [5, 9, 11], [29, 0], [17, 18]], [0, 0, 0, 0, 0], 8, 30, device, dtype=f32),
        _verbalizer_case(4, [[2, 6], [4, 1]], [6, 2, 8, 4], 9, 25, device),          # every id below T
        _verbalizer_case(5, [[1], [2, 3], [7]], [1, 3, 0], 4, 10, device, large=True),
        _verbalizer_case(6, [[10, 20, 30], [5]], [4, 9, 0, 7, 7, 2], 10, 40, device, dtype=f32),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        r = np.random.default_rng(salt + 500)  # the hidden cases' shapes move with the salt too

        def case(seed, B, T, V, C, **kwargs):
            return _verbalizer_case(seed, _random_words(r, C, V), r.integers(T, size=B).tolist(), T, V, device,
                                    **kwargs)

        cases += [
            case(salt + 501, int(r.integers(4, 9)), int(r.integers(5, 12)), int(r.integers(20, 60)), 3),
            case(salt + 502, 1, int(r.integers(2, 6)), int(r.integers(10, 30)), 2),
            case(salt + 503, int(r.integers(3, 7)), 12, 50, int(r.integers(4, 7)), dtype=f32),
            case(salt + 504, 6, int(r.integers(3, 8)), int(r.integers(15, 40)), 2, large=True),
            _verbalizer_case(salt + 505, [[int(i)] for i in r.permutation(16)[:3]], r.integers(10, size=5).tolist(),
                             10, 16, device),
            _verbalizer_case(salt + 506, _random_words(r, 3, 9), [int(r.integers(10))] * 4, 10, 9, device, dtype=f32),
            case(salt + 507, int(r.integers(8, 17)), int(r.integers(16, 33)), int(r.integers(60, 121)),
                 int(r.integers(2, 5))),
        ]
    return cases


VB_POSITION_0 = ("the logits at position 0 instead of at the mask: read each row at its own mask position, "
                 "logits[torch.arange(B), mask_positions]")
VB_LAST = ("the logits at the last position instead of at the mask: read each row at its own mask position, "
           "logits[torch.arange(B), mask_positions]")
VB_SAME_ROW = ("row 0's mask position (mask_positions[0]) used for every row: each row has its own, "
               "logits[torch.arange(B), mask_positions]")
VB_VOCAB = ("a softmax over the whole vocabulary with the label words picked from it: the class scores are the "
            "mean LOGITS of each class's words, and the log-softmax is over the C class scores (dim=-1 of (B, C))")
VB_VOCAB_MEAN_P = ("the mean of the label words' probabilities (a softmax over the vocabulary) instead of the mean "
                   "of their logits: average the logits, then take the log-softmax over the C classes")
VB_PROBABILITIES = ("probabilities instead of log-probabilities: torch.log_softmax(scores, dim=-1), "
                    "not torch.softmax")
VB_NO_LOG_SOFTMAX = ("the class scores without the log-softmax: return torch.log_softmax(scores, dim=-1), a "
                     "distribution over the C classes")
VB_MAX = "the max over a class's label words instead of their mean"
VB_SUM = ("the sum over a class's label words instead of their mean: a class with more words would score "
          "higher for that alone")
VB_FIRST_WORD = "only the first label word of each class: a class's score is the mean over ALL its words"
VB_BATCH_AXIS = "the log-softmax over the batch (dim 0) instead of over the classes (dim=-1)"
VB_UNIFORM = ("the same score for every class (every log-probability is −log C): the label words' logits were not "
              "read apart, as a gather along the vocabulary axis at the mask position gives; read the row at the "
              "mask, then index the label words on the LAST axis")
VB_SWAPPED = ("the T and V axes swapped, logits[b, word, mask_position]: the label word ids index the vocabulary "
              "(the last axis) and the mask positions the sequence (axis 1)")


def _verbalizer_mistakes(d):
    """(description, compute) for the known mistakes, most specific first."""
    L, pos, words = d["logits"], d["positions"], d["words"]
    B, T, V = L.shape
    C = len(words)
    rows = np.arange(B)
    at = L[rows, pos]  # (B, V)

    def scores(x, reduce=np.mean, first=False):
        return np.stack([reduce(x[:, ids[:1] if first else ids], axis=-1) for ids in words], axis=-1)

    def log_softmax_of(x, **kwargs):
        return lambda: (log_softmax(scores(x, **kwargs)),)

    right = scores(at)
    if np.any(pos != 0):
        yield VB_POSITION_0, log_softmax_of(L[:, 0])
    if np.any(pos != T - 1):
        yield VB_LAST, log_softmax_of(L[:, T - 1])
    if np.any(pos != pos[0]):
        yield VB_SAME_ROW, log_softmax_of(L[:, pos[0]])
    yield VB_VOCAB, lambda: (scores(log_softmax(at)),)
    yield VB_VOCAB, lambda: (np.log(scores(_softmax(at))),)
    yield VB_VOCAB, lambda: (scores(_softmax(at)),)
    if any(len(ids) > 1 for ids in words):
        yield VB_VOCAB_MEAN_P, lambda: (log_softmax(np.log(scores(_softmax(at)))),)
        yield VB_VOCAB_MEAN_P, lambda: (_softmax(np.log(scores(_softmax(at)))),)
        yield VB_MAX, log_softmax_of(at, reduce=np.max)
        yield VB_SUM, log_softmax_of(at, reduce=np.sum)
        yield VB_FIRST_WORD, log_softmax_of(at, first=True)
    yield VB_PROBABILITIES, lambda: (_softmax(right),)
    yield VB_NO_LOG_SOFTMAX, lambda: (right,)
    if B > 1:
        yield VB_BATCH_AXIS, lambda: (log_softmax(right, axis=0),)
    yield VB_UNIFORM, lambda: (np.full((B, C), -np.log(C)),)
    if max(max(ids) for ids in words) < T:
        yield VB_SWAPPED, log_softmax_of(L[rows, :, pos])  # (B, T): position t stands for token t


def _tensor_problem(case, got, expected, name, shape_problem):
    """(problem, values) for a judge of a float tensor: the first problem of `got`, its type, dtype and device
    (like the first argument, `name`), then its shape (shape_problem(shape, data) explains it), then its
    values against `expected`; and those values as float64 NumPy when they differ, else None (nothing
    more for the judge to explain: no problem, or one found before the values)."""
    problem = _expect_float_tensor(got, case.args[0], name)
    if problem:
        return problem, None
    if tuple(got.shape) != expected.shape:
        return shape_problem(tuple(got.shape), case.data), None
    values = to_numpy(got).astype(np.float64)
    problem = compare(values, expected, **tolerance_for(case.data["dtype"]), what="the result")
    return problem, values if problem else None


def _verbalizer_shape_problem(shape, d):
    B, T, V = d["logits"].shape
    C = len(d["words"])
    problem = f"the result has shape {shape}, expected ({B}, {C}): one row per input, one log-probability per class"
    if len(shape) == 3 and shape[:2] == (B, B) and B > 1:
        return (f"{problem}; logits[:, mask_positions] takes every row's mask position in every row (a (B, B, V) "
                f"mix): pick one position per row, logits[torch.arange(B), mask_positions]")
    if shape == (B, T, C):
        return f"{problem}: these are class scores at every position; read the logits at the mask position only"
    if shape == (B, V):
        return (f"{problem}: a distribution over the whole vocabulary; average each class's label words into one "
                f"score per class, then take the log-softmax over the C scores")
    if shape == (C, B) and B != C:
        return f"{problem}: the classes are on the first axis; stack the class scores along dim=-1"
    if len(shape) == 3 and 1 in shape[:2] and sorted(s for s in shape if s != 1) == sorted((B, C)):
        return f"{problem}: an axis of size 1 is left (an index kept as [p], or keepdim=True); squeeze it"
    return problem


def _judge_verbalizer(case, got, expected):
    d = case.data
    problem, values = _tensor_problem(case, got, expected, "logits", _verbalizer_shape_problem)
    if values is None:
        return problem
    tolerance = tolerance_for(d["dtype"])
    if d["large"] and not np.isfinite(values).all():
        return (f"{problem}: with class scores hundreds apart a probability underflows to 0 and its log is −inf; "
                f"torch.log_softmax(scores, dim=-1) subtracts the max first and stays finite")
    return matches(problem, first_match((values,), _verbalizer_mistakes(d), **tolerance))


def _explain_verbalizer_error(error):
    text = str(error)
    if "expected sequence of length" in text or "inhomogeneous" in text or "equal size" in text:
        return ("classes may have different numbers of label words, e.g. [[5, 9], [7]]: score each class on its "
                "own (a loop over label_word_ids), then torch.stack(scores, dim=-1)")
    if isinstance(error, IndexError) and ("out of bounds" in text or "out of range" in text):
        return ("the label word ids index the vocabulary (the last axis of logits) and mask_positions the sequence "
                "(axis 1): logits[torch.arange(B), mask_positions] is the (B, V) row at each input's mask")
    if "must be long" in text or "tensors used as indices" in text:
        return "index with integer tensors: mask_positions is a long tensor, torch.arange(B) too"
    if "same device" in text:
        return "make new tensors (torch.arange(B), the word ids) on logits.device"
    return None


def _positions(c):
    return c.data["positions"]


def _T(c):
    return c.data["logits"].shape[1]


check_verbalizer_log_probs = Spec(
    declared.check_verbalizer_log_probs,
    cases=_verbalizer_cases,
    reference=lambda case: ref_prompting.verbalizer_log_probs(case.data["logits"], case.data["positions"],
                                                                case.data["words"]),
    judge=_judge_verbalizer,
    seal=VERBALIZER_SEAL,
    explain_error=_explain_verbalizer_error,
    clauses=(
        ("a class's score is the mean of its words' logits at the mask position",
         lambda c: any(len(ids) > 1 for ids in c.data["words"])),
        ("the log-softmax over the C classes, not the vocabulary", lambda c: True),
        ("classes with different numbers of label words (ragged lists)",
         lambda c: len({len(ids) for ids in c.data["words"]}) > 1),
        ("one label word per class", lambda c: all(len(ids) == 1 for ids in c.data["words"])),
        ("the mask at position 0", lambda c: bool(np.any(_positions(c) == 0))),
        ("the mask at the last position", lambda c: bool(np.any(_positions(c) == _T(c) - 1))),
        ("the mask in the middle", lambda c: bool(np.any((_positions(c) > 0) & (_positions(c) < _T(c) - 1)))),
        ("different mask positions in one batch", lambda c: len(set(_positions(c).tolist())) > 1),
        ("the same mask position in every row", lambda c: len(_positions(c)) > 1
         and len(set(_positions(c).tolist())) == 1),
        ("B = 1", lambda c: len(_positions(c)) == 1),
        ("C = 2", lambda c: len(c.data["words"]) == 2),
        ("C = 3 or more", lambda c: len(c.data["words"]) >= 3),
        ("label word ids below T (axes swapped give numbers, not an IndexError)",
         lambda c: max(max(ids) for ids in c.data["words"]) < _T(c)),
        ("float32 logits: a float32 result", lambda c: "float32" in c.tags),
        ("float64 logits: a float64 result", lambda c: "float64" in c.tags),
        ("large logits: no −inf, no NaN", lambda c: "large logits" in c.tags),
    ),
)


# ============================================================================
# pet_soft_labels(pattern_log_probs, weights=None, temperature=2.0) -> (N, C), PyTorch

DEFAULT_TEMPERATURE = 2.0

PET_SEAL = [
    (ref_prompting.pet_soft_labels, "plmcourse.ref.pet_soft_labels"),
    (nn_prompting.pet_soft_labels, "plmcourse.nn.pet_soft_labels"),
]


def _pet_case(seed, P, N, C, device, *, weights=None, pass_none=False, temperature=None, keyword=False,
              dtype=torch.float64, scale=1.5, weights_as=torch.Tensor):
    """pattern_log_probs: P patterns' log-softmax of logits ~ N(0, scale^2) over C classes, (P, N, C).
    weights None: not passed (pass_none: passed as None); temperature None: not passed. Positional where
    the signature allows it, unless keyword. weights_as: torch.Tensor (of the scores' dtype), list or
    tuple (the numbers as written). Weights with a negative entry, or summing to zero, must raise
    ValueError."""
    rng = np.random.default_rng(seed)
    scores = log_softmax(rng.standard_normal((P, N, C)) * scale)
    scores_t = torch.tensor(scores, dtype=dtype, device=device)
    if weights is None or weights_as is torch.Tensor:
        weights_t = None if weights is None else torch.tensor(weights, dtype=dtype, device=device)
    else:
        weights_t = weights_as(weights)
    error = weights is not None and (min(weights) < 0 or sum(weights) == 0)
    args, kwargs = [scores_t], {}
    if keyword or (weights is None and not pass_none):
        if weights is not None or pass_none:
            kwargs["weights"] = weights_t
        if temperature is not None:
            kwargs["temperature"] = temperature
    else:
        args.append(weights_t)
        if temperature is not None:
            args.append(temperature)
    T = DEFAULT_TEMPERATURE if temperature is None else temperature
    label = f"seed {seed}: pattern_log_probs of shape ({P}, {N}, {C}) {dtype_name(dtype)}"
    if weights is None and pass_none:
        label += ", weights=None" + (" (keyword)" if "weights" in kwargs else "")
    elif weights is None:
        label += ", weights not passed"
    else:
        shown = weights_t if weights_as is not torch.Tensor else [float(w) for w in weights]
        label += (f", weights={shown!r}" + ("" if weights_as is torch.Tensor else f" (a {weights_as.__name__})")
                  + f" (sum {sum(weights):g}" + (", keyword)" if "weights" in kwargs else ")"))
    label += (", temperature not passed (2.0)" if temperature is None else
              f", temperature={temperature:g}" + (" (keyword)" if "temperature" in kwargs else ""))
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    tags = {dtype_name(dtype)}
    tags |= {"default temperature"} if temperature is None else set()
    tags |= {"weights not passed"} if weights is None and not pass_none else set()
    tags |= {"weights None"} if pass_none else set()
    if w is not None:
        tags |= {"uneven weights"} if np.ptp(w) > 0 else {"even weights"}
        tags |= {"weights sum to 1"} if abs(w.sum() - 1) < 1e-12 else {"unnormalised weights"}
        tags |= {"a zero weight"} if np.any(w == 0) else set()
        tags |= {"a negative weight"} if np.any(w < 0) else set()
        tags |= {"weights sum to 0"} if w.sum() == 0 else set()
        tags |= {f"weights a {weights_as.__name__}"} if weights_as is not torch.Tensor else set()
    if error:
        label += " (a negative weight or a zero sum: ValueError)"
        kwargs[EXPECT_ERROR] = True
    data = {"scores": to_numpy(scores_t).astype(np.float64), "w": w, "T": float(T), "dtype": dtype, "error": error}
    return Case(label, tuple(args), kwargs, tags=frozenset(tags), data=data)


def _pet_cases(hidden, device):
    f32 = torch.float32
    cases = [
        _pet_case(10, 3, 5, 3, device, weights=[0.9, 0.6, 0.75], temperature=3.0),  # P == C, uneven, sum 2.25
        _pet_case(11, 2, 4, 2, device),                                               # every default
        _pet_case(12, 4, 3, 5, device, pass_none=True, temperature=1.0, keyword=True),
        _pet_case(13, 3, 6, 4, device, weights=[0.2, 0.5, 0.3], temperature=0.5, keyword=True, dtype=f32),
        _pet_case(14, 1, 4, 3, device, temperature=2.0),                              # P = 1
        _pet_case(15, 5, 1, 2, device, weights=[2.0, 1.0, 0.0, 1.0, 4.0], temperature=1.5),  # N = 1, a zero weight
        _pet_case(16, 3, 7, 3, device, weights=[1.0, 1.0, 1.0], temperature=2.0, dtype=f32),
        _pet_case(17, 4, 3, 2, device, weights=[3, 1, 0, 2], weights_as=list),       # a list of ints
        _pet_case(18, 3, 4, 3, device, weights=[0.5, -0.2, 1.0], temperature=1.0),   # negative: ValueError
        _pet_case(19, 2, 3, 2, device, weights=[0.0, 0.0], weights_as=list),         # sum 0: ValueError
    ]
    salt = hidden_salt(hidden)
    if hidden:
        r = np.random.default_rng(salt + 600)

        def weights(P, total=None):
            w = r.uniform(0.1, 2.0, size=P)
            return [round(float(x), 3) for x in (w if total is None else w / w.sum() * total)]

        cases += [
            _pet_case(salt + 601, 4, int(r.integers(5, 20)), 3, device, weights=weights(4), temperature=2.0),
            _pet_case(salt + 602, 2, int(r.integers(2, 9)), 2, device, temperature=float(r.choice([0.5, 4.0]))),
            _pet_case(salt + 603, 5, 8, 4, device, weights=weights(5), temperature=0.5, keyword=True, dtype=f32),
            _pet_case(salt + 604, 3, int(r.integers(1, 6)), 6, device, pass_none=True, temperature=3.0),
            _pet_case(salt + 605, 4, 6, 4, device, weights=weights(4), dtype=f32, scale=3.0),       # P == C
            _pet_case(salt + 606, 6, int(r.integers(3, 12)), 3, device, weights=weights(6, total=1.0),
                      temperature=1.0),
            _pet_case(salt + 607, int(r.integers(2, 5)), 10, 5, device),
            _pet_case(salt + 608, 3, int(r.integers(2, 8)), 3, device, weights=tuple(weights(3)), weights_as=tuple,
                      dtype=f32),
            _pet_case(salt + 609, 4, 5, 2, device, weights=[1.0, -1.0, 0.5, -0.5], keyword=True),  # sum 0, negative
            _pet_case(salt + 610, 3, 2, 4, device, weights=[0.0, 0.0, 0.0], dtype=f32),           # a zero tensor
            _pet_case(salt + 611, 2, 6, 3, device, weights=[2.0, -0.001], weights_as=list),
        ]
    return cases


PET_PROBABILITIES = ("the patterns' probabilities averaged instead of their logits (the log-probabilities): "
                     "PET's ensemble is softmax(weighted mean of the log-probabilities / temperature)")
PET_T_IGNORED = "the temperature ignored: divide the weighted mean by the temperature before the softmax"
PET_T_MULTIPLIED = "the weighted mean multiplied by the temperature instead of divided by it"
PET_T_HARDCODED = "a temperature of 2 whatever the argument says: use the temperature argument, not a constant"
PET_NOT_NORMALISED = ("the weights not normalised: divide them by their sum first, weights / weights.sum(), so "
                      "that the weighted mean is a mean")
PET_ALSO_BY_P = ("the weighted scores divided by P (a mean over the patterns of w · scores): the weights are "
                 "normalised by their sum, weights / weights.sum(), and the weighted sum then is the mean")
PET_IGNORED = ("the weights ignored (a plain mean over the patterns): each pattern's scores count with its weight, "
               "weights / weights.sum()")
PET_ON_CLASSES = ("the weights broadcast against the classes (the last axis) instead of the patterns: shape them "
                  "(P, 1, 1), weights[:, None, None], so that they weigh axis 0")
PET_AXIS = "the softmax over the examples (dim 0) instead of over the classes (dim=-1)"
PET_LOG = ("log-probabilities returned: the soft labels are probabilities, torch.softmax(mean / temperature, "
           "dim=-1)")
PET_NO_SOFTMAX = "the tempered scores without the softmax: return torch.softmax(mean / temperature, dim=-1)"


def _pet_mistakes(d, tags):
    s, w, T = d["scores"], d["w"], d["T"]
    P = len(s)
    normalised = np.full(P, 1.0 / P) if w is None else w / w.sum()
    mean = np.tensordot(normalised, s, axes=1)  # (N, C)

    if "default temperature" in tags:
        for other in (1.0, 0.5, 3.0, 4.0, 5.0, 10.0):
            yield (f"a temperature of {other:g} where none was passed: the default must be temperature=2.0",
                   lambda other=other: (_softmax(mean / other),))
    elif T != DEFAULT_TEMPERATURE:
        yield PET_T_HARDCODED, lambda: (_softmax(mean / DEFAULT_TEMPERATURE),)
    if T != 1:
        yield PET_T_IGNORED, lambda: (_softmax(mean),)
        yield PET_T_MULTIPLIED, lambda: (_softmax(mean * T),)
    p_mean = np.tensordot(normalised, np.exp(s), axes=1)
    yield PET_PROBABILITIES, lambda: (_softmax(np.log(p_mean) / T),)
    yield PET_PROBABILITIES, lambda: (np.tensordot(normalised, _softmax(s / T), axes=1),)
    yield PET_PROBABILITIES, lambda: (_softmax(p_mean / T),)
    yield PET_PROBABILITIES, lambda: (p_mean,)
    if w is not None and abs(w.sum() - 1) > 1e-9:
        yield PET_NOT_NORMALISED, lambda: (_softmax(np.tensordot(w, s, axes=1) / T),)
    if P > 1 and (w is None or abs(w.sum() - P) > 1e-9):
        yield PET_ALSO_BY_P, lambda: (_softmax(np.tensordot(normalised if w is None else w, s, axes=1) / P / T),)
    if P > 1 and w is not None:
        yield PET_ALSO_BY_P, lambda: (_softmax(mean / P / T),)
    if w is not None and np.ptp(w) > 0:
        yield PET_IGNORED, lambda: (_softmax(s.mean(axis=0) / T),)
        if P == s.shape[2]:
            yield PET_ON_CLASSES, lambda: (_softmax((s * normalised).sum(axis=0) / T),)
            yield PET_ON_CLASSES, lambda: (_softmax((s * w).sum(axis=0) / T),)
    if s.shape[1] > 1:
        yield PET_AXIS, lambda: (_softmax(mean / T, axis=0),)
    yield PET_LOG, lambda: (log_softmax(mean / T),)
    yield PET_NO_SOFTMAX, lambda: (mean / T,)


def _pet_shape_problem(shape, d):
    P, N, C = d["scores"].shape
    problem = f"the result has shape {shape}, expected ({N}, {C}): one distribution over the classes per example"
    if shape == (P, N, C) and P > 1:
        return (f"{problem}: one per pattern; combine the patterns, a weighted mean over axis 0, into one "
                f"(N, C) before the softmax")
    if shape == (P, C) and P != N:
        return f"{problem}: averaged over the examples (axis 1) instead of the patterns (axis 0)"
    if shape == (C, N) and C != N:
        return f"{problem}: transposed; keep the classes on the last axis"
    if shape in ((1, N, C), (N, 1, C)):
        return f"{problem}: an axis of size 1 is left (keepdim=True); drop it"
    return problem


def _pet_signature_args(case):
    return case.args, {name: value for name, value in case.kwargs.items() if name != EXPECT_ERROR}


def _judge_pet_error(case, got):
    w = case.data["w"]
    why = "a negative weight" if np.any(w < 0) else "weights that sum to 0"
    wanted = f"the weights {[float(x) for x in w]} hold {why}, so your function must raise ValueError"
    problem = error_report_problem(got, wanted)
    if problem or "raised" in got:
        return problem
    return (f"{wanted}, but it returned {str(got['returned'])[:80]}: test the weights first (a weight below 0, "
            f"or a sum of 0, raise ValueError)")


def _judge_pet(case, got, expected):
    if case.data["error"]:
        return _judge_pet_error(case, got)
    problem, values = _tensor_problem(case, got, expected, "pattern_log_probs", _pet_shape_problem)
    if values is None:
        return problem
    return name_mistake(problem, (values,), _pet_mistakes(case.data, case.tags), tolerance_for(case.data["dtype"]))


def _explain_pet_error(error):
    return hint_for(error, [
        (("NoneType", ("None", "weight")), "weights may be None (the default): every pattern then weighs 1 / P"),
        (("'list'", "'tuple'"),
         "weights may be a list or a tuple of numbers: make a tensor of them first, torch.as_tensor(weights, "
         "dtype=pattern_log_probs.dtype, device=pattern_log_probs.device)"),
        (("must match the size", "could not be broadcast"),
         "weights holds one number per pattern, (P,): shape it (P, 1, 1), weights[:, None, None], so that it "
         "weighs axis 0 of pattern_log_probs (or use torch.tensordot(weights, pattern_log_probs, dims=1))"),
        (("dtype", "expected scalar type", "same dtype"),
         "keep pattern_log_probs' dtype: make new tensors with dtype=pattern_log_probs.dtype"),
        (("same device",), "make new tensors on pattern_log_probs.device"),
    ])


check_pet_soft_labels = Spec(
    declared.check_pet_soft_labels,
    cases=_pet_cases,
    reference=lambda case: None if case.data["error"] else ref_prompting.pet_soft_labels(
        case.data["scores"], case.data["w"], case.data["T"]),
    judge=_judge_pet,
    seal=PET_SEAL,
    explain_error=_explain_pet_error,
    signature_args=_pet_signature_args,
    clauses=(
        ("softmax(weighted mean of the log-probabilities / temperature) over the classes",
         lambda c: c.data["scores"].shape[0] > 1 and "uneven weights" in c.tags and c.data["T"] not in (1.0, 2.0)),
        ("weights not passed: uniform", lambda c: "weights not passed" in c.tags),
        ("weights=None passed", lambda c: "weights None" in c.tags),
        ("uneven weights", lambda c: "uneven weights" in c.tags),
        ("weights normalised to sum to 1 (they do not)", lambda c: "unnormalised weights" in c.tags),
        ("weights that already sum to 1", lambda c: "weights sum to 1" in c.tags),
        ("a zero weight", lambda c: "a zero weight" in c.tags and not c.data["error"]),
        ("weights as a list of numbers", lambda c: "weights a list" in c.tags and not c.data["error"]),
        ("a negative weight raises ValueError", lambda c: "a negative weight" in c.tags),
        ("weights summing to 0 raise ValueError", lambda c: "weights sum to 0" in c.tags),
        ("P == C: weights on the wrong axis raise no error", lambda c: c.data["w"] is not None
         and c.data["scores"].shape[0] == c.data["scores"].shape[2] and "uneven weights" in c.tags),
        ("temperature not passed: 2.0", lambda c: "default temperature" in c.tags),
        ("temperature = 1", lambda c: c.data["T"] == 1),
        ("temperature = 2 passed", lambda c: c.data["T"] == 2 and "default temperature" not in c.tags),
        ("temperature = 0.5 (sharpens)", lambda c: c.data["T"] == 0.5),
        ("one pattern (P = 1)", lambda c: c.data["scores"].shape[0] == 1),
        ("one example (N = 1)", lambda c: c.data["scores"].shape[1] == 1),
        ("C = 2", lambda c: c.data["scores"].shape[2] == 2),
        ("C = 3 or more", lambda c: c.data["scores"].shape[2] >= 3),
        ("float32 in, float32 out", lambda c: "float32" in c.tags),
    ),
)


# ============================================================================
# select_pseudo_labels(probs, per_class) -> indices, PyTorch

SELECT_SEAL = [
    (ref_prompting.select_pseudo_labels, "plmcourse.ref.select_pseudo_labels"),
    (nn_prompting.select_pseudo_labels, "plmcourse.nn.select_pseudo_labels"),
]

# Probabilities written out, each row's largest entry unique. IMBALANCED: class 0 is predicted 6 times and
# very confidently, class 1 4 times, class 2 twice; example 1 is predicted as 0 but has 0.45 for class 1, more
# than any class-1 example but 3 (a column's top would take it). Per class 2: {2, 8}, {3, 11}, {6, 5}.
IMBALANCED = [[0.90, 0.06, 0.04], [0.50, 0.45, 0.05], [0.97, 0.02, 0.01], [0.10, 0.60, 0.30],
              [0.85, 0.10, 0.05], [0.20, 0.35, 0.45], [0.05, 0.40, 0.55], [0.30, 0.42, 0.28],
              [0.93, 0.04, 0.03], [0.25, 0.38, 0.37], [0.88, 0.07, 0.05], [0.15, 0.44, 0.41]]
# SPARSE: C = 4, class 0 predicted 4 times, class 1 once, class 2 five times, class 3 never.
SPARSE = [[0.70, 0.10, 0.10, 0.10], [0.05, 0.80, 0.10, 0.05], [0.10, 0.10, 0.60, 0.20], [0.40, 0.20, 0.30, 0.10],
          [0.20, 0.10, 0.65, 0.05], [0.55, 0.05, 0.15, 0.25], [0.10, 0.30, 0.35, 0.25], [0.90, 0.02, 0.03, 0.05],
          [0.25, 0.05, 0.40, 0.30], [0.05, 0.15, 0.75, 0.05]]
# TWO: C = 2, class 0 four times, class 1 twice (per class 1: {0}, {4}).
TWO = [[0.99, 0.01], [0.97, 0.03], [0.95, 0.05], [0.40, 0.60], [0.30, 0.70], [0.55, 0.45]]
# TIES (exact binary fractions): class 0 has 0.75 three times and 0.5 once, so with per_class 2 any two of the
# three 0.75s will do; class 1 has 0.625, then 0.5 twice: either 0.5; class 2 has one example.
TIES = [[0.75, 0.125, 0.125], [0.25, 0.5, 0.25], [0.75, 0.25, 0.0], [0.125, 0.625, 0.25], [0.5, 0.25, 0.25],
        [0.0, 0.125, 0.875], [0.75, 0.0, 0.25], [0.25, 0.5, 0.25]]
SMALL = [[0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.3, 0.3, 0.4], [0.8, 0.1, 0.1], [0.1, 0.5, 0.4]]


def _select_case(seed, probs, per_class, device, *, dtype=torch.float64, keyword=False):
    """probs: rows written out, or (N, C, bias) for a softmax of random logits, the classes' biases
    making some classes frequent and others rare."""
    rng = np.random.default_rng(seed)
    if isinstance(probs, tuple):
        N, C, bias = probs
        logits = rng.standard_normal((N, C)) * 2.0 + np.asarray(bias, dtype=np.float64)
        while True:  # a row whose largest probability is tied (in the case's dtype) is drawn again
            probs_t = torch.tensor(_softmax(logits), dtype=dtype, device=device)
            top = np.sort(to_numpy(probs_t), axis=-1)
            tied = top[:, -1] == top[:, -2]
            if not tied.any():
                break
            logits[tied] = rng.standard_normal((int(tied.sum()), C)) * 2.0 + np.asarray(bias, dtype=np.float64)
    else:
        probs_t = torch.tensor(np.asarray(probs, dtype=np.float64), dtype=dtype, device=device)
        top = np.sort(to_numpy(probs_t), axis=-1)
        assert np.all(top[:, -1] > top[:, -2]), "a row whose largest probability is tied"  # the argmax is unique
    values = to_numpy(probs_t)
    N, C = values.shape
    args, kwargs = ((probs_t,), {"per_class": per_class}) if keyword else ((probs_t, per_class), {})
    counts = np.bincount(values.argmax(-1), minlength=C)
    tags = {dtype_name(dtype)}
    tags |= {"a class with fewer than per_class"} if counts.min() < per_class else set()
    tags |= {"a class never predicted"} if counts.min() == 0 else set()
    tags |= {"ties at the cut"} if any(len(optional) > need - len(required)
                                       for _, required, optional, need in _per_class(values, per_class)) else set()
    label = (f"seed {seed}: probs of shape ({N}, {C}) {dtype_name(dtype)}, per_class={per_class}"
             + (" (keyword)" if keyword else "") + f", predicted per class {counts.tolist()}"
             + (", confidences tied at the cut" if "ties at the cut" in tags else ""))
    return Case(label, args, kwargs, tags=frozenset(tags), data={"probs": values, "per_class": per_class})


def _select_cases(hidden, device):
    f32 = torch.float32
    cases = [
        _select_case(20, IMBALANCED, 2, device),
        _select_case(21, SPARSE, 3, device),
        _select_case(22, TWO, 1, device, dtype=f32),
        _select_case(23, TIES, 2, device),
        _select_case(24, SMALL, 7, device),  # more than N
        _select_case(25, (40, 3, [1.5, 0.0, -1.0]), 5, device),
        _select_case(26, (20, 5, [0.0, 0.5, -0.5, 1.0, -2.0]), 1, device, dtype=f32, keyword=True),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        r = np.random.default_rng(salt + 700)

        def random(N, C):
            return (N, C, r.normal(0.0, 1.5, size=C).round(2).tolist())

        cases += [
            _select_case(salt + 701, random(int(r.integers(30, 61)), 3), int(r.integers(2, 9)), device),
            _select_case(salt + 702, random(int(r.integers(10, 21)), 2), 1, device, dtype=f32),
            _select_case(salt + 703, random(50, int(r.integers(4, 7))), int(r.integers(3, 7)), device, keyword=True),
            _select_case(salt + 704, (int(r.integers(12, 25)), 4, [2.5, 0.0, -3.0, -3.0]), 4, device),
            _select_case(salt + 705, random(int(r.integers(5, 9)), 3), 10, device, dtype=f32),
            _select_case(salt + 706, [TIES[i] for i in r.permutation(len(TIES))], 2, device),
            _select_case(salt + 707, random(80, 5), int(r.integers(5, 12)), device),
        ]
    return cases


def _per_class(probs, per_class):
    """For each class: (its members, the members that must be chosen, those of which any may fill the
    remaining places (tied at the cut), how many it gives)."""
    predicted, confidence = probs.argmax(-1), probs.max(-1)
    found = []
    for c in range(probs.shape[1]):
        members = np.flatnonzero(predicted == c)
        if len(members) <= per_class:
            found.append((members, set(members.tolist()), set(), len(members)))
            continue
        order = members[np.argsort(-confidence[members], kind="stable")]
        cut = confidence[order[per_class - 1]]
        found.append((members, {int(i) for i in members if confidence[i] > cut},
                      {int(i) for i in members if confidence[i] == cut}, per_class))
    return found


def _valid(chosen, probs, per_class):
    """True if the set `chosen` is a right answer: per class, its `need` most confident, any of the tied."""
    for members, required, optional, need in _per_class(probs, per_class):
        mine = chosen & set(members.tolist())
        if len(mine) != need or not required <= mine or not mine <= required | optional:
            return False
    return True


def _show(indices, limit=12):
    indices = sorted(indices)
    if not indices:
        return "nothing"
    shown = ", ".join(str(i) for i in indices[:limit])
    return "{" + shown + (f", ... ({len(indices)} in all)" if len(indices) > limit else "") + "}"


def _as_indices(got, N):
    """(the indices as a list of ints, None), or (None, the problem)."""
    if isinstance(got, (torch.Tensor, np.ndarray)):
        values = to_numpy(got)
        kind = "torch.long" if isinstance(got, torch.Tensor) else "np.int64"
        if values.dtype == np.bool_:
            if values.shape == (N,):
                return None, ("the result is a boolean mask over the examples, expected the indices of the chosen "
                              "ones (torch.nonzero(mask).flatten())")
            return None, f"the result has dtype {got.dtype}, expected integer indices ({kind})"
        if values.dtype.kind not in "iu":
            return None, (f"the indices have dtype {got.dtype}, expected integers ({kind}): an index is a whole "
                          f"number, and float tensors cannot index")
        if values.ndim == 0:
            return None, "the result is a single index, expected a 1-D sequence of indices, one per chosen example"
        if values.ndim == 2 and 1 in values.shape:
            return None, (f"the indices have shape {tuple(values.shape)}, expected a flat 1-D sequence "
                          f"(torch.nonzero gives (n, 1): flatten it)")
        if values.ndim != 1:
            return None, f"the indices have shape {tuple(values.shape)}, expected a flat 1-D sequence"
        return [int(i) for i in values.tolist()], None
    if isinstance(got, (list, tuple, set, frozenset)):
        items = list(got)
        nested = [x for x in items if isinstance(x, (list, tuple, set)) or (
            isinstance(x, (torch.Tensor, np.ndarray)) and x.ndim > 0)]
        if nested:
            if isinstance(got, tuple) and len(got) == 2:
                return None, ("the result is a pair holding sequences (the indices and their labels?): return the "
                              "indices alone (the pseudo-labels are probs[indices].argmax(-1))")
            return None, (f"the result is {describe(got)} holding sequences (one per class?): concatenate them "
                          f"into one flat sequence of indices (torch.cat)")
        indices = []
        for x in items:
            if isinstance(x, (torch.Tensor, np.ndarray)):
                x = to_numpy(x)
                x = x.reshape(())[()] if x.dtype.kind in "iu" else x
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
                return None, f"the result holds {describe(x)}, expected integer indices only"
            indices.append(int(x))
        return indices, None
    if got is None:
        return None, "the result is None"
    return None, f"the result is {describe(got)}, expected the indices: a torch.Tensor of int64 (or a list of ints)"


SEL_GLOBAL = ("a global top-k over every example's confidence: the class the model is surest of fills the "
              "selection; take the per_class most confident of EACH predicted class")
SEL_TOTAL = ("per_class taken as the size of the whole selection: it is the number of examples taken from EACH "
             "class")
SEL_WRONG_CLASS = ("the top of each class's column probs[:, c] over ALL the examples, those predicted as another "
                   "class too: an example counts only for its predicted class (its argmax), with that probability "
                   "as its confidence")
SEL_LEAST = "the least confident examples of each class instead of the most confident"
SEL_PADDED = ("a class with fewer than per_class predicted examples padded with other examples: such a class "
              "gives all it has, min(per_class, its count), and nothing else")


def _select_mistakes(probs, per_class):
    """(description, indices as the mistake makes them) for the known mistakes."""
    N, C = probs.shape
    predicted, confidence = probs.argmax(-1), probs.max(-1)
    by_confidence = np.argsort(-confidence, kind="stable")

    def per_class_top(count, ascending=False):
        chosen = []
        for c in range(C):
            members = np.flatnonzero(predicted == c)
            key = confidence[members] if ascending else -confidence[members]
            chosen += members[np.argsort(key, kind="stable")][:count].tolist()
        return chosen

    yield SEL_GLOBAL, by_confidence[:per_class * C].tolist()
    yield SEL_GLOBAL, by_confidence[:len(per_class_top(per_class))].tolist()
    yield SEL_TOTAL, by_confidence[:per_class].tolist()
    yield SEL_TOTAL, per_class_top(per_class // C)
    yield SEL_TOTAL, per_class_top(-(-per_class // C))
    yield SEL_WRONG_CLASS, [int(i) for c in range(C) for i in np.argsort(-probs[:, c], kind="stable")[:per_class]]
    yield SEL_LEAST, per_class_top(per_class, ascending=True)


def _positions_in_subsets(probs, per_class):
    """The answer that returns, for each class, its top positions within the examples predicted as it, unmapped."""
    predicted, confidence = probs.argmax(-1), probs.max(-1)
    out = []
    for c in range(probs.shape[1]):
        mine = confidence[predicted == c]
        out += np.argsort(-mine, kind="stable")[:per_class].tolist()
    return sorted(out)


def _select_mistake(d, indices):
    probs, per_class = d["probs"], d["per_class"]
    chosen = set(indices)
    deficit = sum(max(0, per_class - len(members)) for members, *_ in _per_class(probs, per_class))
    needed = set().union(*(required for _, required, _, _ in _per_class(probs, per_class)))
    expected_size = sum(need for *_, need in _per_class(probs, per_class))
    if deficit and needed <= chosen and len(indices) == expected_size + deficit:
        return SEL_PADDED
    for description, wrong in _select_mistakes(probs, per_class):
        if sorted(indices) == sorted(wrong) or chosen == set(wrong):
            return description
    return None


def _judge_select(case, got, expected):
    d = case.data
    probs, per_class = d["probs"], d["per_class"]
    N = len(probs)
    indices, problem = _as_indices(got, N)
    if problem:
        return problem
    outside = [i for i in indices if not 0 <= i < N]
    if outside:
        return f"index {outside[0]} is out of range: the examples are numbered 0 to {N - 1}"
    repeated = [(i, n) for i, n in Counter(indices).items() if n > 1]
    chosen = set(indices)
    if not repeated and _valid(chosen, probs, per_class):
        return None
    if repeated:
        i, n = repeated[0]
        problem = (f"index {i} appears {n} times in the selection: each example is chosen at most once, for the "
                   f"class it is predicted as")
        if _positions_in_subsets(probs, per_class) == sorted(indices):
            problem = (f"{problem}; it matches each class's top positions WITHIN that class's examples (topk on "
                       f"probs[predicted == c]) returned as they are: map them back to rows of probs, "
                       f"torch.nonzero(predicted == c)[top]")
    else:
        want = {int(i) for i in expected}
        ties = " (ties at the cut may go either way)" if "ties at the cut" in case.tags else ""
        differences = [f"{_show(want - chosen)} missing" if want - chosen else "",
                       f"{_show(chosen - want)} not expected" if chosen - want else ""]
        problem = (f"the selection differs from the expected, {' and '.join(x for x in differences if x)} "
                   f"(expected {_show(want)} in any order{ties}, got {_show(chosen)})")
        predicted = probs.argmax(-1)
        mine = np.bincount(predicted[sorted(chosen)], minlength=probs.shape[1]) if chosen else np.zeros(0, int)
        need = [n for *_, n in _per_class(probs, per_class)]
        if len(mine) and mine.tolist() != need:
            problem += f"; per predicted class it takes {mine.tolist()}, expected {need}"
    return matches(problem, _select_mistake(d, indices))


def _explain_select_error(error):
    return hint_for(error, [
        (("with size 0", "numel() == 0", "zero-size"),
         "a class may have no predicted example at all: it then adds nothing to the selection"),
        (("selected index k out of range", ("kth", "out of bounds")),
         "a class may have fewer predicted examples than per_class: it then gives all it has, "
         "min(per_class, its count)"),
        (("must be long", "tensors used as indices"), "indices are integers: keep them as a long tensor"),
    ])


def _counts(c):
    return np.bincount(c.data["probs"].argmax(-1), minlength=c.data["probs"].shape[1])


def _global_differs(c):
    d = c.data
    global_top = set(np.argsort(-d["probs"].max(-1), kind="stable")[:d["per_class"] * d["probs"].shape[1]].tolist())
    return not _valid(global_top, d["probs"], d["per_class"])


def _column_differs(c):
    d = c.data
    wrong = {int(i) for col in d["probs"].T for i in np.argsort(-col, kind="stable")[:d["per_class"]]}
    return not _valid(wrong, d["probs"], d["per_class"])


check_select_pseudo_labels = Spec(
    declared.check_select_pseudo_labels,
    cases=_select_cases,
    reference=lambda case: ref_prompting.select_pseudo_labels(case.data["probs"], case.data["per_class"]),
    judge=_judge_select,
    seal=SELECT_SEAL,
    explain_error=_explain_select_error,
    clauses=(
        ("the per_class most confident of EACH predicted class (a global top-k differs)", _global_differs),
        ("confidence is the probability of the predicted class (a column's top differs)", _column_differs),
        ("per_class = 1", lambda c: c.data["per_class"] == 1),
        ("per_class larger than a class's count: all it has",
         lambda c: bool(np.any((_counts(c) > 0) & (_counts(c) < c.data["per_class"])))),
        ("a class no example is predicted as", lambda c: "a class never predicted" in c.tags),
        ("per_class larger than N", lambda c: c.data["per_class"] > len(c.data["probs"])),
        ("C = 2", lambda c: c.data["probs"].shape[1] == 2),
        ("C = 3 or more", lambda c: c.data["probs"].shape[1] >= 3),
        ("confidences tied at the cut: any of the tied", lambda c: "ties at the cut" in c.tags),
        ("float32 probs", lambda c: "float32" in c.tags),
        ("per_class passed by keyword", lambda c: "per_class" in c.kwargs),
    ),
)
