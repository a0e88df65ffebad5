"""check_normalize, the practice check of notebook 00: right answers pass, each mistake gets its hint."""

import plmcourse  # noqa: F401

import numpy as np
import pytest

from plmcourse.grading import CheckFailed, check_normalize

# Wrong answers divide by zero on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def by_norm(v):
    v = np.asarray(v, dtype=np.float64)
    n = np.linalg.norm(v)
    return np.zeros_like(v) if n == 0 else v / n


def by_loop(v):
    total = sum(float(x) ** 2 for x in v)
    return np.array([float(x) / total ** 0.5 if total else 0.0 for x in v])


MISTAKES = [
    ("no square root", lambda v: np.asarray(v, float) / np.sum(np.asarray(v, float) ** 2), "take its square root"),
    ("L1 norm", lambda v: np.asarray(v, float) / np.abs(v).sum(), "L1 norm"),
    ("NaN on zero", lambda v: np.asarray(v, float) / np.linalg.norm(v), "a zero vector has no direction"),
    ("returns a list", lambda v: list(by_norm(v)), "expected a NumPy array"),
    ("forgot return", lambda v: None, "is a `return` missing"),
    ("in place", lambda v: np.divide(v, np.linalg.norm(v) or 1.0, out=v), "changed its input v in place"),
    ("an epsilon in the denominator", lambda v: np.asarray(v, float) / (np.linalg.norm(v) + 1e-8),
     "you added a small number to the length"),
    ("a threshold instead of zero", lambda v: (np.zeros(len(v)) if np.linalg.norm(v) < 1e-6
                                               else np.asarray(v, float) / np.linalg.norm(v)),
     "a short vector is not a zero vector"),
]


@pytest.mark.parametrize("fn", [by_norm, by_loop])
@pytest.mark.parametrize("hidden", [False, True])
def test_correct_versions_pass(fn, hidden, capsys):
    check_normalize(fn, hidden=hidden)
    assert "cases passed" in capsys.readouterr().out


@pytest.mark.parametrize("name, fn, fragment", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_mistakes_fail_with_their_hint(name, fn, fragment):
    with pytest.raises(CheckFailed) as failure:
        check_normalize(fn)
    message = str(failure.value)
    assert fragment in message and "\n" not in message and message.startswith("check_normalize failed")

