"""bench/canonical.py, the canonical form bench/similarity.py measures review's similarity with: a copier's free
rewrites leave it as it was, and what changes the computation changes it."""

import pytest

from bench.canonical import canonical
from plmcourse.autograde.evidence import fingerprints


@pytest.mark.parametrize("original, rewritten", [
    # independent statements in another order (the temporaries are then read once: put back where read)
    ("def f(x, w1, w2):\n    q = x @ w1\n    k = x @ w2\n    return q + k\n",
     "def f(x, w1, w2):\n    k = x @ w2\n    q = x @ w1\n    return q + k\n"),
    # a docstring, pass and assignments never read
    ("def f(x):\n    e = np.exp(x - x.max())\n    return e / e.sum()\n",
     "def f(x):\n    '''Softmax.'''\n    unused = 0\n    e = np.exp(x - x.max())\n    pass\n    n = len([])\n    return e / e.sum()\n"),
    # a loop that appends, as its comprehension
    ("def f(xs):\n    out = [g(x) for x in xs if x > 0]\n    return out\n",
     "def f(xs):\n    out = []\n    for x in xs:\n        if x > 0:\n            out.append(g(x))\n    return out\n"),
    # an augmented assignment, and an expression split into temporaries
    ("def f(x, y):\n    total = x\n    total += y * 2\n    return total\n",
     "def f(x, y):\n    total = x\n    double = y * 2\n    total = total + double\n"
     "    result = total\n    return result\n"),
])
def test_a_copier_s_free_rewrites_leave_the_canonical_form_as_it_was(original, rewritten):
    assert canonical(original) == canonical(rewritten)
    assert fingerprints(canonical(original)) == fingerprints(canonical(rewritten))


@pytest.mark.parametrize("one, other", [
    # a statement that depends on another does not move past it
    ("def f(x):\n    y = x + 1\n    x = 2\n    return y * x\n", "def f(x):\n    x = 2\n    y = x + 1\n    return y * x\n"),
    # a temporary is not put back past a change to what it reads
    ("def f(a):\n    t = a + 1\n    a = 5\n    return t * a\n", "def f(a):\n    a = 5\n    return (a + 1) * a\n"),
    # an operation's operands in another order are another computation
    ("def f(x, y):\n    return x - y\n", "def f(x, y):\n    return y - x\n"),
])
def test_the_canonical_form_keeps_what_changes_the_computation(one, other):
    assert canonical(one) != canonical(other)


def test_the_canonical_form_of_what_cannot_be_read_is_the_text_itself():
    assert canonical("def f(:\n") == "def f(:\n"
    deep = "x = " + "(" * 150 + "1" + ")" * 150 + "\n"
    assert canonical(deep) in (deep, "x = 1")
