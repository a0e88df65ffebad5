"""The practice check of notebook 00: `normalize(v)` returns v / ||v||, zeros for a zero vector."""

import numpy as np

from plmcourse.grading import welcome as declared
from plmcourse.judging.core import Case, Spec, compare, expect_array, first_match, hidden_salt

ATOL, RTOL = 1e-10, 1e-8


def _expected(v):
    v = np.asarray(v, dtype=np.float64)
    length = np.sqrt(np.sum(v * v))
    return np.zeros_like(v) if length == 0 else v / length


def _cases(hidden):
    """The visible cases; hidden=True (or the judge's salt) adds others after them."""
    rng = np.random.default_rng(0)
    cases = [Case("v = [3, 4]", (np.array([3.0, 4.0]),))]
    # Short but not zero: it still has a direction (an epsilon or a threshold shows here).
    cases.append(Case("v = [3e-9, 4e-9] (short, not zero)", (np.array([3e-9, 4e-9]),), tags=frozenset({"short"})))
    cases += [Case(f"a random vector of length {n}", (rng.standard_normal(n),)) for n in (3, 8)]
    cases.append(Case("v = [-2.5] (one negative entry)", (np.array([-2.5]),)))
    cases.append(Case("the zero vector of length 4", (np.zeros(4),), tags=frozenset({"zero"})))
    cases.append(Case("integer input [6, 8]", (np.array([6, 8]),)))
    if hidden:
        rng = np.random.default_rng(2024 + hidden_salt(hidden))
        cases += [Case(f"another random vector of length {n}", (rng.standard_normal(n),)) for n in (5, 17, 1)]
        cases.append(Case("integer input [5, 12, 0]", (np.array([5, 12, 0]),)))
        cases.append(Case("v = [2e-7, 0, -1e-7] (short, not zero)", (np.array([2e-7, 0.0, -1e-7]),),
                          tags=frozenset({"short"})))
    return cases


def _judge(case, got, expected):
    problem = expect_array(got, "your result")
    if problem:
        return problem
    problem = compare(got, expected, ATOL, RTOL, what="your result")
    if problem is None:
        return None
    if got.dtype.kind in "iub":
        return (f"your result has dtype {got.dtype}, so the fractions of v / length were cut off; build the "
                f"result as a float array (for example np.asarray(v, dtype=float) / length)")
    v = np.asarray(case.args[0], dtype=np.float64)
    length = np.sqrt(np.sum(v * v))
    mistakes = [
        ("you divided by the squared length; take its square root", lambda: (v / np.sum(v * v),)),
        ("you divided by the sum of absolute values (the L1 norm), not the Euclidean length",
         lambda: (v / np.sum(np.abs(v)),)),
        *((f"you added a small number to the length (v / (length + {eps:g})), which shortens the result of "
           f"a short vector; divide by the length itself and treat only the zero vector apart",
           lambda eps=eps: (v / (length + eps),)) for eps in (1e-12, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5)),
    ]
    cause = first_match((got,), mistakes, ATOL, RTOL)
    if "zero" in case.tags:
        cause = "a zero vector has no direction: return zeros of the same shape instead of dividing by 0"
    elif "short" in case.tags and isinstance(got, np.ndarray) and got.shape == v.shape and not np.any(got):
        cause = ("a short vector is not a zero vector: it still has a direction, so normalise it; only a vector "
                 "whose length is exactly 0 gives zeros (compare the length with 0, not with a threshold)")
    return f"{problem}; {cause}" if cause else problem


__all__ = ["check_normalize"]


check_normalize = Spec(
    declared.check_normalize,
    cases=_cases,
    reference=lambda c: _expected(c.args[0]),
    judge=_judge,
    clauses=(
        ("v / ||v||_2: a new array pointing the same way with Euclidean length 1", lambda c: bool(np.any(c.args[0]))),
        ("a zero vector has no direction: an array of zeros of the same shape, never nan",
         lambda c: "zero" in c.tags),
        ("only a zero vector: a short vector still has a direction, so it gets length 1",
         lambda c: "short" in c.tags),
    ),
)
