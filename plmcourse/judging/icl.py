"""Checks for notebook 11 (in-context learning): a few-shot prompt, and what an induction head looks at.

    check_k_shot_prompt     k_shot_prompt(demonstrations, query, k, template="{x} -> {y}", separator="\\n",
                            rng=None) -> str
    check_induction_score   induction_score(attention, tokens) -> (H,), NumPy

check_k_shot_prompt calls the answer with a fresh np.random.default_rng(seed) in each case and
compares the prompt, character for character, with plmcourse.data.k_shot_prompt given a generator
made from the same seed: every right answer draws rng.choice(others, size=k, replace=False), so
they all agree. The cases vary k (0, 1, several, len - 1), the query's index (first, middle,
last), the template ("{x} -> {y}" not passed, "Q: {x}\\nA: {y}", "{x}{y}", "{x} = {y}." and
another with text after {y}), the separator ("\\n" not passed, " ", "\\n\\n", ""), the examples
(a list of tuples and a list of lists, multi-word strings, repeated x values, and the query's
exact pair again at another index, which is another example and is drawn); one case passes no
rng (any k other examples, well written, pass), two pass k = len(demonstrations) and k = -1, and
one a template with {y} before {x} (hidden: one without {y}), which must raise ValueError; two
(k = 0 and k > 0) also report the generator's next number after the call, which must be where one
rng.choice leaves it (a copy of rng, or extra draws, leave the caller's generator elsewhere). A wrong prompt is shown where it first differs from the expected
one, and matched against known mistakes (each a variant of the function with one rule broken,
and right on every case passed before it), or else read back into its demonstrations to say
what is wrong with them: how many, one shown twice, the query shown, or another draw than the
spec's. The answer is driven (`Check.driver`), so that the out-of-range cases can report the
exception they expect as plain data; every other case calls it as it is.

check_induction_score compares with plmcourse.ref.induction_score on: H = 1 and several heads;
T = 2 (a repeat, and none); a token seen 3 and 4 times (the latest earlier occurrence differs from
the first); the same token twice in a row (s + 1 == t); sequences where no token repeats (zeros);
random heads (a softmax of random scores under a causal mask) and structured ones (a perfect
induction head, which scores 1, a previous-token head, a duplicate-token head that attends to s
itself, uniform attention); float32 attention; tokens as a list and as int64 and int32 arrays,
negative ids among them (notebook 11 numbers the tokens it leaves out that way).

Sealed: the course's own plmcourse.ref.induction_score and plmcourse.ref.latest_earlier_occurrence
(half of the exercise), and plmcourse.data.k_shot_prompt.
"""

from collections import Counter

import numpy as np

from plmcourse.grading import icl as declared
from plmcourse.grading.icl import REPORT_NEXT
from plmcourse.data import icl as data_icl
from plmcourse.judging.core import (
    EXPECT_ERROR,
    F32,
    F64,
    Case,
    Spec,
    as_scalar,
    compare,
    describe,
    error_report_problem,
    expect_float_array,
    hidden_salt,
    matches,
    name_mistake,

)
from plmcourse.ref import icl as ref_icl

__all__ = ["check_k_shot_prompt", "check_induction_score"]


def _short(text, limit=40):
    """repr(text), shortened in the middle when long."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit // 2]!r}...{text[-(limit // 2):]!r} ({len(text)} characters)"


# ============================================================================
# k_shot_prompt(demonstrations, query, k, template="{x} -> {y}", separator="\n", rng=None) -> str

PROMPT_SEAL = [(data_icl.k_shot_prompt, "plmcourse.data.k_shot_prompt")]

DEFAULT_TEMPLATE, DEFAULT_SEPARATOR = "{x} -> {y}", "\n"
SPEC_DRAW = "rng.choice(others, size=k, replace=False)"

# The examples, written out (grading depends on no package data). Visible cases:
ENGLISH_FRENCH = [("cheese", "fromage"), ("bread", "pain"), ("sea", "mer"), ("house", "maison"), ("dog", "chien"),
                  ("book", "livre"), ("water", "eau"), ("apple", "pomme"), ("cat", "chat"), ("tree", "arbre"),
                  ("milk", "lait"), ("sun", "soleil")]
QUESTIONS = [("What is the capital of France?", "Paris"), ("How many legs does a spider have?", "Eight"),
             ("Who wrote Hamlet?", "William Shakespeare"), ("What colour is a clear sky?", "Blue"),
             ("What is frozen water called?", "Ice"), ("Which planet is closest to the sun?", "Mercury")]
SUMS = [("2 + 3", "5"), ("7 + 1", "8"), ("4 + 4", "8"), ("6 + 3", "9"), ("1 + 1", "2"), ("5 + 2", "7"), ("3 + 3", "6")]
# The mapping task's examples, some with a random label: x values repeat, and the query's pair (f, 0),
# index 3, comes again at 11 (f comes with another label at 7).
LETTERS = [("a", "3"), ("k", "1"), ("a", "3"), ("f", "0"), ("k", "1"), ("q", "2"), ("a", "3"), ("f", "2"), ("z", "1"),
           ("k", "1"), ("q", "2"), ("f", "0")]
REVIEWS = [("a warm and funny film", "positive"), ("two hours I will never get back", "negative"),
           ("the cast is superb", "positive"), ("dull, slow and far too long", "negative"),
           ("I laughed from start to finish", "positive")]
# Hidden cases only.
CAPITALS = [("France", "Paris"), ("Japan", "Tokyo"), ("Kenya", "Nairobi"), ("Peru", "Lima"), ("Canada", "Ottawa"),
            ("Egypt", "Cairo"), ("Norway", "Oslo"), ("Chile", "Santiago"), ("Italy", "Rome"), ("India", "New Delhi"),
            ("Ghana", "Accra"), ("Spain", "Madrid")]
ANTONYMS = [["hot", "cold"], ["up", "down"], ["early", "late"], ["full", "empty"], ["open", "closed"],
            ["light", "dark"], ["fast", "slow"], ["hot", "cold"]]


def _letters(seed, n):
    """n examples of a fresh map from 5 letters to 3 digits (x values repeat, pairs too)."""
    rng = np.random.default_rng(seed)
    symbols = rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=5, replace=False)
    labels = rng.integers(3, size=5)
    picks = rng.integers(5, size=n)
    return [(str(symbols[i]), str(labels[i])) for i in picks]


def _prompt_case(seed, demonstrations, query, k, template=None, separator=None, kind=tuple, rng=True,
                 error=False, after=False):
    """k_shot_prompt(demonstrations, query, k[, template=...][, separator=...][, rng=default_rng(seed)]);
    error: True (k out of range) or "template" ({y} missing, or before {x}): the answer must raise
    ValueError. after: the generator's next number after the call is judged too (one draw, from rng)."""
    demos = [kind(pair) for pair in demonstrations]
    kwargs = {}
    if template is not None:
        kwargs["template"] = template
    if separator is not None:
        kwargs["separator"] = separator
    if rng:
        kwargs["rng"] = np.random.default_rng(seed)
    n = len(demos)
    label = (f"seed {seed}: {n} demonstrations (a list of {kind.__name__}s such as {demos[0]!r}), "
             f"query={query}, k={k}")
    label += "".join(f", {name}={value!r}" for name, value in kwargs.items() if name != "rng")
    if not rng:
        label += ", rng not passed"
    if error == "template":
        label += " (a template without {x} before {y}: ValueError)"
        kwargs[EXPECT_ERROR] = True
    elif error:
        label += f" (out of range: 0 to {n - 1})"
        kwargs[EXPECT_ERROR] = True
    if after:
        label += ", then the rng's next number"
        kwargs[REPORT_NEXT] = True
    data = {"demos": [tuple(pair) for pair in demonstrations], "query": query, "k": k,
            "template": DEFAULT_TEMPLATE if template is None else template,
            "separator": DEFAULT_SEPARATOR if separator is None else separator, "seed": seed if rng else None,
            "kind": kind, "error": error, "after": after}
    return Case(label, (demos, query, k), kwargs, data=data)


def _prompt_cases(hidden):
    cases = [
        # Defaults, the query in the middle; 11 x 10 x ... x 6 ordered draws, so that an answer drawing from
        # a generator of its own meets the right prompt, or a known mistake's, about never.
        _prompt_case(0, ENGLISH_FRENCH, 4, 6),
        _prompt_case(1, QUESTIONS, 0, 3, "Q: {x}\nA: {y}", "\n\n", kind=list),    # the query first
        _prompt_case(2, SUMS, 6, 6, "{x} = {y}.", " "),                           # the query last, k = len - 1
        _prompt_case(3, LETTERS, 3, 8, "{x}{y}", " "),                            # repeats; (f, 0) drawn again
        _prompt_case(4, ENGLISH_FRENCH, 2, 0, "{x} = {y}."),                      # zero-shot: "sea = "
        _prompt_case(5, REVIEWS, 2, 1, "Review: {x}\nSentiment: {y}\n", "", kind=list),
        _prompt_case(6, SUMS[:2], 1, 1, separator="\n\n"),                        # two examples: one other
        _prompt_case(7, LETTERS, 9, 4, "{x}{y}", " ", rng=False),                 # rng=None: a fresh generator
        _prompt_case(8, ENGLISH_FRENCH, 4, len(ENGLISH_FRENCH), error=True),      # k = len: ValueError
        _prompt_case(9, SUMS, 0, -1, "{x} = {y}.", error=True),                   # k = -1: ValueError
        _prompt_case(10, SUMS, 2, 2, "{y} <- {x}", error="template"),             # {y} first: ValueError
        _prompt_case(11, ENGLISH_FRENCH, 5, 3, "{x}: {y}", " | ", after=True),    # rng: this one draw only
        _prompt_case(12, REVIEWS, 4, 0, "{x} => {y}", after=True, kind=list),     # k = 0: no draw is needed
    ]
    salt = hidden_salt(hidden)
    if hidden:
        r = np.random.default_rng(salt + 300)  # the hidden cases' queries and k move with the salt too
        letters = _letters(salt + 301, 16)
        cases += [
            _prompt_case(salt + 302, CAPITALS, int(r.integers(1, 11)), int(r.integers(2, 10)),
                         "The capital of {x} is {y}."),
            _prompt_case(salt + 303, ANTONYMS, 0, 7, "Word: {x}\nOpposite: {y}", "\n\n", kind=list),
            _prompt_case(salt + 304, letters, int(r.integers(16)), int(r.integers(6, 15)), "{x}{y}", " "),
            _prompt_case(salt + 305, CAPITALS, 11, 0, "{x}: {y}\n", ""),
            _prompt_case(salt + 306, REVIEWS[:3], int(r.integers(3)), 1, "{x} => {y}", " | ", kind=list),
            _prompt_case(salt + 307, ANTONYMS, 7, int(r.integers(2, 7)), "{x} -> {y};", "\n"),
            _prompt_case(salt + 308, letters, int(r.integers(16)), 5, "{x}{y}", " ", rng=False),
            _prompt_case(salt + 309, CAPITALS, 5, 12 + int(r.integers(3)), error=True),
            _prompt_case(salt + 310, ANTONYMS, 2, -1 - int(r.integers(3)), "{x}/{y}", kind=list, error=True),
            _prompt_case(salt + 311, CAPITALS, 3, 2, "{y} is the capital of {x}.", error="template"),
            _prompt_case(salt + 312, ANTONYMS, 1, 1, "{x} means the opposite", kind=list, error="template"),
            _prompt_case(salt + 313, letters, int(r.integers(16)), int(r.integers(3, 10)), "{x}{y}", " ", after=True),
        ]
    return cases


def _prompt_signature_args(case):
    return case.args, {name: value for name, value in case.kwargs.items() if name not in (EXPECT_ERROR, REPORT_NEXT)}


def _prompt_reference(case):
    d = case.data
    if d["error"] or d["seed"] is None:
        return None  # judged by what it raised, or by the prompt's structure
    rng = np.random.default_rng(d["seed"])
    prompt = data_icl.k_shot_prompt(d["demos"], d["query"], d["k"], d["template"], d["separator"], rng)
    return {"prompt": prompt, "next": int(rng.integers(2 ** 62))} if d["after"] else prompt


# ----------------------------------------------------------------------------
# Known mistakes: the function with one rule broken


def _render(d, i):
    x, y = d["demos"][i]
    return d["template"].format(x=x, y=y)


def _query_part(d, mode="cut"):
    template, (x, y) = d["template"], d["demos"][d["query"]]
    cut = template[:template.index("{y}")].format(x=x)
    return {"cut": cut, "answer": template.format(x=x, y=y), "empty": template.format(x=x, y=""),
            "stripped": cut.rstrip()}[mode]


def _pool(d, mode):
    n, query = len(d["demos"]), d["query"]
    others = np.delete(np.arange(n), query)
    if mode == "others":
        return others
    if mode == "all":
        return np.arange(n)
    if mode == "rotated":  # the indices after the query first, then those before it
        return np.concatenate([np.arange(query + 1, n), np.arange(query)])
    if mode == "descending":
        return others[::-1]
    if mode == "by value":  # every example equal to the query's pair left out
        return np.array([i for i in others if d["demos"][i] != d["demos"][query]], dtype=np.int64)
    if mode == "by x":  # every example with the query's x left out
        return np.array([i for i in others if d["demos"][i][0] != d["demos"][query][0]], dtype=np.int64)
    raise ValueError(mode)


def _variant(d, *, pool="others", draw="choice", count="k", query="cut", join="parts"):
    """k_shot_prompt with switches that reproduce known mistakes; the defaults give the right prompt."""
    rng = np.random.default_rng(d["seed"])
    indices = _pool(d, pool)
    size = len(indices) if count == "all" else d["k"]
    if draw == "choice":
        chosen = rng.choice(indices, size=size, replace=False)
    elif draw == "replace":
        chosen = rng.choice(indices, size=size, replace=True)
    elif draw == "sorted":
        chosen = np.sort(rng.choice(indices, size=size, replace=False))
    elif draw == "permutation":
        chosen = rng.permutation(indices)[:size]
    elif draw == "first":
        chosen = indices[:size]
    else:
        raise ValueError(draw)
    demos = [_render(d, i) for i in chosen]
    last = _query_part(d, query)
    separator = d["separator"]
    if join == "parts":
        return separator.join(demos + [last])
    if join == "trailing":
        return separator.join(demos + [last]) + separator
    if join == "leading":
        return separator + separator.join(demos + [last])
    if join == "separator before the query":
        return separator.join(demos) + separator + last
    if join == "query glued":
        return separator.join(demos) + last
    if join == "query first":
        return separator.join([last] + demos)
    raise ValueError(join)


def _prompt_mistakes():
    cut = 'the template cut just before "{y}" (template[:template.index("{y}")]) with its x filled in'
    return [
        (f"the query written with its answer: the query is {cut}; its y is what the model must write",
         {"query": "answer"}),
        (f"the query written with y=\"\", which keeps the template's text after {{y}}: the query is {cut}, "
         f"and the text after {{y}} is dropped", {"query": "empty"}),
        (f"the query's part stripped of its trailing whitespace: the query is {cut}, spaces and newlines "
         f"included", {"query": "stripped"}),
        ("a separator after the query too: the separator goes only BETWEEN the parts (separator.join(parts))",
         {"join": "trailing"}),
        ("a separator in front of the first part: the separator goes only BETWEEN the parts "
         "(separator.join(parts))", {"join": "leading"}),
        ("a separator in front of the query although no demonstration comes before it (k = 0): join all the "
         "parts, the query's included, with separator.join(parts)", {"join": "separator before the query"}),
        ("no separator between the last demonstration and the query: the query is one more part, joined like "
         "the others (separator.join(parts))", {"join": "query glued"}),
        ("the query first: the demonstrations come first, in the order drawn, and the query's part last",
         {"join": "query first"}),
        ("the query drawn as a demonstration: draw from every index but the query's "
         "(np.delete(np.arange(n), query)), never from all n", {"pool": "all"}),
        ("the examples equal to the query's pair left out too: only the query's INDEX is excluded; another "
         "example with the same x and y is a different example and may be drawn", {"pool": "by value"}),
        ("the examples with the query's x left out too: only the query's INDEX is excluded from the indices "
         "drawn from", {"pool": "by x"}),
        ("the indices drawn from in another order (those after the query first): draw from every index but the "
         "query's in increasing order, np.delete(np.arange(n), query)", {"pool": "rotated"}),
        ("the indices drawn from in decreasing order: draw from every index but the query's in increasing "
         "order, np.delete(np.arange(n), query)", {"pool": "descending"}),
        (f"demonstrations drawn with replacement (rng.choice without replace=False, or rng.integers), so one may "
         f"come twice: the draw is {SPEC_DRAW}", {"draw": "replace"}),
        (f"the demonstrations sorted by index: keep the order {SPEC_DRAW} returns", {"draw": "sorted"}),
        (f"rng.permutation(others)[:k] (or rng.shuffle): the spec's draw is {SPEC_DRAW}, which draws other "
         f"numbers", {"draw": "permutation"}),
        (f"the first k of the other examples, not drawn at all: the demonstrations are {SPEC_DRAW}",
         {"draw": "first"}),
        (f"k ignored: every other example is shown; draw k of them, {SPEC_DRAW}", {"count": "all"}),
    ]


PROMPT_MISTAKES = _prompt_mistakes()


def _matching_mistake(got, d, passed):
    """The first known mistake that gives `got` here and the right prompt on every case passed before."""
    for description, switches in PROMPT_MISTAKES:
        try:
            if _variant(d, **switches) == got and all(
                    _variant(before, **switches) == _variant(before) for before in passed):
                return description
        except Exception:  # a variant that does not apply to this case (too few indices to draw from)
            continue
    return None


def _parse(text, d, reuse):
    """The indices whose renderings, each followed by the separator, then the query's part, make up `text`:
    a list, or None when it is not made that way. reuse=False: each other example at most once (the query
    never); reuse=True: any example, any number of times (the ones left first, the query's index last)."""
    n, query, separator, last = len(d["demos"]), d["query"], d["separator"], _query_part(d)
    rendered = [_render(d, i) for i in range(n)]
    order = [i for i in range(n) if i != query] + ([query] if reuse else [])
    failed = set()

    def walk(position, used):
        key = (position, used if not reuse else ())
        if key in failed:
            return None
        if text[position:] == last:
            return []
        seen = set()
        for i in order:
            if (not reuse and i in used) or rendered[i] in seen:
                continue
            seen.add(rendered[i])  # equal renderings lead to the same place: try one
            piece = rendered[i] + separator
            if text.startswith(piece, position) and len(piece):
                rest = walk(position + len(piece), used if reuse else used | frozenset([i]))
                if rest is not None:
                    return [i] + rest
        failed.add(key)
        return None

    return walk(0, frozenset())


def _read_back(got, d):
    """What is wrong with a prompt that reads back as demonstrations and the query's part, or None."""
    shown = _parse(got, d, reuse=True)
    if shown is None:
        return None
    k, n = d["k"], len(d["demos"])
    if len(shown) != k:
        every = " (every other example)" if len(shown) == n - 1 else ""
        return (f"the prompt holds {len(shown)} demonstrations{every}, where k={k} asks for {k}: draw k, "
                f"{SPEC_DRAW}")
    available = Counter(_render(d, i) for i in range(n) if i != d["query"])
    counts = Counter(_render(d, i) for i in shown)
    query = _render(d, d["query"])
    if counts[query] > available[query] and available[query] == 0:
        return ("the query itself shown as a demonstration: draw from the other examples only (every index but "
                "the query's)")
    if any(counts[r] > available[r] for r in counts):
        return f"a demonstration shown more than once: draw without replacement, {SPEC_DRAW}"
    return (f"k of the other examples, well written, but not the ones {SPEC_DRAW} draws from the rng passed, in "
            f"that order: another call (rng.permutation, rng.integers, rng.shuffle...) draws other numbers, and "
            f"np.random.default_rng() or np.random.* ignore the rng argument")


def _where_they_differ(got, expected):
    """Where the prompt first differs from the expected one, both shown around that place, shortened."""
    at = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    start = max(0, at - 24)

    def around(text):
        end = at + 24
        return ("..." if start else "") + repr(text[start:end]) + ("..." if end < len(text) else "")

    if at == len(got):
        where = f"your prompt stops after {len(got)} characters, where the expected one goes on"
    elif at == len(expected):
        where = f"your prompt goes on after the {len(expected)} characters of the expected one"
    else:
        where = f"the prompt differs from the expected from character {at} on"
    return f"{where}: expected {around(expected)}, got {around(got)}"


def _judge_prompt_error(d, got):
    n, k = len(d["demos"]), d["k"]
    wanted = (f"k={k} is out of range for {n} demonstrations (0 to {n - 1}), so your function must raise "
              f"ValueError")
    if d["error"] == "template":
        wanted = (f"the template {d['template']!r} does not have {{x}} before {{y}} (the query's part, cut just "
                  f"before {{y}}, would not show its x), so your function must raise ValueError")
    problem = error_report_problem(got, wanted)
    if problem or "raised" in got:
        return problem
    value = got["returned"]
    shown = _short(value) if isinstance(value, str) else describe(value)
    if d["error"] == "template":
        return (f"{wanted}, but it returned {shown}: test first that the template holds \"{{x}}\", then "
                f"\"{{y}}\" after it")
    return f"{wanted}, but it returned {shown}: test 0 <= k <= len(demonstrations) - 1 first"


def _judge_prompt(case, got, expected, passed):
    """None if `got` is the expected prompt; else the problem. `passed`: the data of the cases passed so far."""
    d = case.data
    if d["error"]:
        return _judge_prompt_error(d, got)
    if d["after"]:
        if not isinstance(got, dict) or "prompt" not in got:
            return f"the check could not read what your function did ({describe(got)})"
        problem = _judge_prompt_text(d, got["prompt"], expected["prompt"], passed)
        if problem is None and got["next"] != expected["next"]:
            return (f"the prompt is right, but the rng passed in is not where one call of {SPEC_DRAW} leaves it "
                    f"(its next number differs): draw from rng itself, once, and nothing else (a copy of rng "
                    f"leaves the caller's generator unmoved, so the next prompt repeats these demonstrations)")
        return problem
    return _judge_prompt_text(d, got, expected, passed)


def _judge_prompt_text(d, got, expected, passed):
    if type(got) is not str:
        if isinstance(got, str):
            return f"the result is a {type(got).__name__}, a subclass of str; return a plain str"
        if isinstance(got, (list, tuple)) and all(type(part) is str for part in got):
            return (f"the result is {describe(got)} of str, expected one str: join the parts with the separator "
                    f"(separator.join(parts))")
        return f"the result is {describe(got)}, expected a str (the prompt)"
    if expected is None:  # rng not passed: any k other examples, well written
        shown = _parse(got, d, reuse=False)
        if shown is not None and len(shown) == d["k"]:
            passed.append(d)
            return None
        problem = (f"with rng not passed, the prompt must still be k={d['k']} of the other examples, each "
                   f"template.format(x=x, y=y), then the query's part, joined by separator; got {_short(got, 80)}")
        reading = _read_back(got, d)
        return f"{problem}; it reads as {reading}" if reading and not reading.startswith("k of") else problem
    if got == expected:
        passed.append(d)
        return None
    problem = _where_they_differ(got, expected)
    return matches(problem, _matching_mistake(got, d, passed) or _read_back(got, d))


def _explain_prompt_error(error):
    text = str(error)
    if isinstance(error, AttributeError) and "NoneType" in text:
        return "rng=None means a fresh generator: rng = np.random.default_rng() if rng is None else rng"
    if isinstance(error, KeyError) or (isinstance(error, (ValueError, IndexError)) and (
            "format" in text or "Replacement index" in text)):
        return ('fill the template with template.format(x=x, y=y); the query\'s part is the template cut just '
                'before "{y}", template[:template.index("{y}")].format(x=x)')
    if isinstance(error, ValueError) and ("larger sample" in text or "negative" in text):
        return "k runs from 0 to len(demonstrations) - 1, and the k demonstrations are drawn from the n - 1 others"
    if isinstance(error, ValueError):
        return ("k runs from 0 to len(demonstrations) - 1, both included (k = len - 1 shows every other example): "
                "raise ValueError only outside that range")
    if isinstance(error, TypeError) and ("unpack" in text or "subscriptable" in text):
        return "each demonstration is a pair (x, y), a tuple or a list: x, y = demonstrations[i]"
    return None


def _k_of(c):
    return c.data["k"]


def _n_of(c):
    return len(c.data["demos"])


def _valid(c):
    return not c.data["error"]


def _shows_duplicate_of_query(c):
    """The expected prompt draws an example equal to the query's pair (at another index)."""
    d = c.data
    if not _valid(c) or d["seed"] is None:
        return False
    chosen = np.random.default_rng(d["seed"]).choice(_pool(d, "others"), size=d["k"], replace=False)
    return any(d["demos"][i] == d["demos"][d["query"]] for i in chosen)


check_k_shot_prompt = Spec(
    declared.check_k_shot_prompt,
    cases=_prompt_cases,
    reference=_prompt_reference,
    judge=lambda case, got, expected, passed: _judge_prompt(case, got, expected, passed),
    seal=PROMPT_SEAL,
    explain_error=_explain_prompt_error,
    memory=list,
    signature_args=_prompt_signature_args,
    clauses=(
        ("k = 0 (zero-shot): the query's part only", lambda c: _valid(c) and _k_of(c) == 0),
        ("k = 1", lambda c: _valid(c) and _k_of(c) == 1),
        ("several demonstrations", lambda c: _valid(c) and 1 < _k_of(c) < _n_of(c) - 1),
        ("k = len(demonstrations) - 1: every other example", lambda c: _valid(c) and _k_of(c) == _n_of(c) - 1 > 1),
        ("the query's index first", lambda c: _valid(c) and c.data["query"] == 0),
        ("... in the middle", lambda c: _valid(c) and 0 < c.data["query"] < _n_of(c) - 1),
        ("... last", lambda c: _valid(c) and c.data["query"] == _n_of(c) - 1),
        (f"the demonstrations are {SPEC_DRAW}, in that order, others increasing",
         lambda c: _valid(c) and c.data["seed"] is not None and _k_of(c) >= 2),
        ("rng not passed: a fresh np.random.default_rng()", lambda c: _valid(c) and "rng" not in c.kwargs),
        ("template not passed: \"{x} -> {y}\"", lambda c: _valid(c) and "template" not in c.kwargs),
        ("a template with a newline inside (\"Q: {x}\\nA: {y}\")",
         lambda c: _valid(c) and "\n" in c.data["template"].split("{y}")[0]),
        ("a template with nothing between x and y (\"{x}{y}\")",
         lambda c: _valid(c) and c.data["template"] == "{x}{y}"),
        ("text after {y} dropped from the query's part (\"{x} = {y}.\")",
         lambda c: _valid(c) and not c.data["template"].endswith("{y}")),
        ("separator not passed: \"\\n\"", lambda c: _valid(c) and "separator" not in c.kwargs),
        ("separator \" \"", lambda c: _valid(c) and c.data["separator"] == " "),
        ("separator \"\\n\\n\"", lambda c: _valid(c) and c.data["separator"] == "\n\n"),
        ("separator \"\" (nothing between the parts)", lambda c: _valid(c) and c.data["separator"] == ""),
        ("repeated x values", lambda c: len({x for x, _ in c.data["demos"]}) < _n_of(c)),
        ("the query's exact pair at another index is another example, and may be drawn", _shows_duplicate_of_query),
        ("multi-word strings", lambda c: any(" " in x for x, _ in c.data["demos"])),
        ("demonstrations a list of tuples", lambda c: c.data["kind"] is tuple),
        ("... or a list of lists", lambda c: c.data["kind"] is list),
        ("k = len(demonstrations) raises ValueError", lambda c: c.data["error"] is True and _k_of(c) >= _n_of(c)),
        ("k = -1 raises ValueError", lambda c: c.data["error"] is True and _k_of(c) < 0),
        ("a template with {y} before {x} raises ValueError",
         lambda c: c.data["error"] == "template" and c.data["template"].find("{y}") < c.data["template"].find("{x}")),
        ("rng: one draw, rng.choice, and nothing else (the caller's generator moves by exactly that)",
         lambda c: c.data["after"] and _k_of(c) > 0),
        ("... and k = 0 (zero-shot) with rng passed", lambda c: c.data["after"] and _k_of(c) == 0),
    ),
)


# ============================================================================
# induction_score(attention, tokens) -> (H,), NumPy

INDUCTION_SEAL = [
    (ref_icl.induction_score, "plmcourse.ref.induction_score"),
    (ref_icl.latest_earlier_occurrence, "plmcourse.ref.latest_earlier_occurrence"),
]


def _earlier(tokens, which="latest"):
    """(T,) for each position t the position s of an equal token, or -1 where there is none:
    "latest" s < t (the spec), "first" s < t, "self" s <= t (t itself counts), "anywhere" the latest
    other position, later ones included."""
    tokens = np.asarray(tokens).tolist()
    found = np.full(len(tokens), -1)
    for t, token in enumerate(tokens):
        if which == "self":
            candidates = range(t + 1)
        elif which == "anywhere":
            candidates = [s for s in range(len(tokens)) if s != t]
        else:
            candidates = range(t)
        same = [s for s in candidates if tokens[s] == token]
        if same:
            found[t] = same[0] if which == "first" else same[-1]
    return found


def _head(kind, tokens, rng):
    """One (T, T) head: each row sums to 1, zero above the diagonal."""
    T = len(tokens)
    t = np.arange(T)
    if kind == "random":  # a softmax of random scores under a causal mask
        scores = np.where(np.tril(np.ones((T, T), dtype=bool)), rng.standard_normal((T, T)) * 2.0, -np.inf)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return weights / weights.sum(axis=-1, keepdims=True)
    if kind == "uniform":
        return np.tril(np.ones((T, T))) / (t + 1)[:, None]
    s = _earlier(tokens)
    target = {"induction": np.where(s >= 0, s + 1, t),  # the position after the earlier copy (itself if none)
              "previous": np.maximum(t - 1, 0),
              "duplicate": np.where(s >= 0, s, t)}[kind]  # the earlier copy itself
    head = np.zeros((T, T))
    head[t, target] = 1.0
    return head


HEAD_NAMES = {"random": "a random head", "induction": "a perfect induction head", "previous": "a previous-token head",
              "duplicate": "a duplicate-token head", "uniform": "uniform attention"}


def _show_tokens(tokens):
    tokens = [int(t) for t in tokens]
    return str(tokens) if len(tokens) <= 14 else str(tokens[:10])[:-1] + f", ...] ({len(tokens)} tokens)"


def _induction_case(seed, tokens, heads, dtype=np.float64, as_list=False, token_dtype=np.int64):
    """attention (H, T, T) made of `heads` (a kind per head, or H random heads), tokens as a list or an array."""
    rng = np.random.default_rng(seed)
    tokens = np.asarray(tokens, dtype=np.int64)
    heads = ("random",) * heads if isinstance(heads, int) else tuple(heads)
    attention = np.stack([_head(kind, tokens, rng) for kind in heads]).astype(dtype)
    H, T = len(heads), len(tokens)
    argument = tokens.tolist() if as_list else tokens.astype(token_dtype)
    kinds = "random heads" if set(heads) == {"random"} else ", ".join(HEAD_NAMES[kind] for kind in heads)
    label = (f"seed {seed}: attention ({H}, {T}, {T}) of {kinds}" + (", float32" if dtype == np.float32 else "")
             + f", tokens {_show_tokens(tokens)} as " + ("a list" if as_list else f"an {np.dtype(token_dtype)} array"))
    latest, first = _earlier(tokens), _earlier(tokens, "first")
    queries = np.flatnonzero(latest >= 0)
    tags = {kind for kind in heads}
    tags |= {"float32"} if dtype == np.float32 else set()
    tags |= {"list" if as_list else "array"}
    if not len(queries):
        tags.add("no repeat")
    if np.any(latest[queries] + 1 == queries):
        tags.add("twice in a row")
    if np.any(first[queries] != latest[queries]):
        tags.add("latest is not first")
    if np.any(tokens < 0):
        tags.add("negative ids")
    return Case(label, (attention, argument), tags=frozenset(tags),
                data={"attention": attention, "tokens": tokens, "argument": argument})


# A token seen four times (3), three times (7, 9), twice in a row (3 at 3 and 4), and five positions
# whose token did not appear before; the last token (9) appeared before too.
TOKENS_RICH = [7, 3, 9, 3, 3, 5, 7, 2, 9, 7, 3, 9]


def _induction_cases(hidden):
    cases = [
        _induction_case(10, TOKENS_RICH, 3),
        _induction_case(11, [4, 1, 4, 4, 1, 6, 1, 0, 6], 1, as_list=True),
        _induction_case(12, [2, 5, 8, 2, 5, 8, 8, 1, 2, 5, 9],
                        ("induction", "previous", "duplicate", "uniform"), as_list=True),
        _induction_case(13, [5, 5], 2, token_dtype=np.int32),
        _induction_case(14, [3, 4], 1),
        _induction_case(15, [0, 1, 2, 3, -4, -5], 4),
        _induction_case(16, [-1, 4, -3, 4, -5, 2, 4, -8, 2, 2], 2, dtype=np.float32),
        _induction_case(17, [1, 2, 1, 1, 2, 3, 1], ("duplicate", "induction"), token_dtype=np.int32),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        r = np.random.default_rng(salt + 200)

        def tokens(T, vocab):
            return r.integers(vocab, size=T)

        cases += [
            _induction_case(salt + 201, tokens(int(r.integers(20, 41)), 8), int(r.integers(2, 7))),
            _induction_case(salt + 202, tokens(int(r.integers(5, 16)), 4), 1, as_list=True),
            _induction_case(salt + 203, tokens(24, 6), ("previous", "induction", "random", "duplicate", "uniform")),
            _induction_case(salt + 204, tokens(30, 10), 3, dtype=np.float32, token_dtype=np.int32),
            _induction_case(salt + 205, r.permutation(50)[:int(r.integers(3, 12))] - 25, 3, as_list=True),
            _induction_case(salt + 206, [int(r.integers(9))] * 2, 3),
            _induction_case(salt + 207, np.tile(tokens(int(r.integers(3, 7)), 100), 4)[:18], ("induction", "random"),
                            as_list=True),
        ]
    return cases


def _induction_mistakes(d):
    """(description, compute) for the known mistakes that can show on this case, most specific first."""
    A, tokens = d["attention"].astype(np.float64), d["tokens"]
    T = len(tokens)
    s = _earlier(tokens)
    q = np.flatnonzero(s >= 0)
    if not len(q):
        return
    after = q[s[q] + 1 < q]  # the queries whose earlier copy is not right before them
    first, anywhere, t = _earlier(tokens, "first"), _earlier(tokens, "anywhere"), np.arange(T)
    q_any = np.flatnonzero(anywhere >= 0)
    right = A[:, q, s[q] + 1]  # (H, n)
    yield ("the attention on the earlier copy s itself (a duplicate-token head's score): read attention[:, t, "
           "s + 1], the position right AFTER it", lambda: A[:, q, s[q]].mean(axis=-1))
    yield ("the query and key axes swapped, attention[:, s + 1, t]: rows are queries, so read attention[:, t, "
           "s + 1]", lambda: A[:, s[q] + 1, q].mean(axis=-1))
    yield ("the FIRST earlier occurrence of the token: s is the LATEST position before t holding it",
           lambda: A[:, q, first[q] + 1].mean(axis=-1))
    yield "the sum over the positions instead of their mean", lambda: right.sum(axis=-1)
    yield ("every position averaged, those whose token did not appear before as 0: only the positions whose "
           "token appeared earlier count (divide by their number)", lambda: right.sum(axis=-1) / T)
    yield ("every position after the first averaged, those whose token did not appear before as 0: only the "
           "positions whose token appeared earlier count", lambda: right.sum(axis=-1) / (T - 1))
    yield ("every position averaged, those whose token did not appear before with s = -1, reading attention[:, t, "
           "0]: leave those positions out", lambda: A[:, t, s + 1].mean(axis=-1))
    yield ("the attention on the previous position t - 1 (a previous-token head's score): read the position "
           "after the earlier copy, s + 1", lambda: A[:, q, q - 1].mean(axis=-1))
    if len(after) < len(q):
        yield ("the positions whose earlier copy is right before them (s + 1 == t) left out: they count, and "
               "the attention read there is attention[:, t, t]",
               lambda: A[:, after, s[after] + 1].mean(axis=-1) if len(after) else np.zeros(A.shape[0]))
    if len(q_any) and np.all(anywhere[q_any] + 1 < T):
        yield ("s taken among all the positions with the same token, later ones too: s is the latest position "
               "BEFORE t (s < t)", lambda: A[:, q_any, anywhere[q_any] + 1].mean(axis=-1))
    if isinstance(d["argument"], list):
        yield ("no repeated token found although some repeat, which is what comparing a list with == gives (one "
               "False, not one bool per position): np.asarray(tokens) first", lambda: np.zeros(A.shape[0]))


def _single_number(got, expected, d):
    H = expected.shape[0]
    problem = f"the result is a single number ({describe(got)}), expected an array of shape ({H},), one score per head"
    value = as_scalar(got)
    if value is None:
        return problem
    if not len(np.flatnonzero(_earlier(d["tokens"]) >= 0)) and value == 0:
        return f"{problem}: when no token repeats, return np.zeros(H), H = attention.shape[0]"
    if H > 1 and abs(value - float(expected.mean())) <= F32["atol"] + F32["rtol"] * abs(float(expected.mean())):
        return (f"{problem}; it matches the mean over the heads as well: average over the positions only "
                f"(axis=-1), one score per head")
    return problem


def _judge_induction(case, got, expected):
    d = case.data
    tolerance = F32 if d["attention"].dtype == np.float32 else F64
    if not isinstance(got, np.ndarray) and as_scalar(got) is not None or (
            isinstance(got, np.ndarray) and got.ndim == 0):
        return _single_number(got, expected, d)
    problem = expect_float_array(got, "the result", why=" (each score is a mean of weights)")
    if problem:
        return problem
    H = expected.shape[0]
    if got.shape != expected.shape:
        problem = f"the result has shape {got.shape}, expected ({H},), one score per head"
        if got.size == H and compare(got.reshape(-1), expected, **tolerance) is None:
            return f"{problem}: the scores are right, return them as a flat (H,) array"
        if got.shape == (1,) and H > 1 and compare(got, expected.mean(keepdims=True), **F32) is None:
            return (f"{problem}; it matches the mean over the heads as well: average over the positions only "
                    f"(axis=-1), one score per head")
        if got.ndim == 2 and got.shape[0] == H:
            return f"{problem}: average the values read at the positions (axis=-1) into one score per head"
        if not np.any(_earlier(d["tokens"]) >= 0):
            return f"{problem}: when no token repeats, return np.zeros(H), H = attention.shape[0]"
        return problem
    problem = compare(got, expected, **tolerance, what="the result")
    if problem is None:
        return None
    if not np.any(_earlier(d["tokens"]) >= 0) and np.all(np.isnan(got)):
        return (f"{problem}; no token repeats here, so there is nothing to average (a mean of nothing is NaN): "
                f"return np.zeros(H) then")
    mistakes = ((text, lambda f=f: (f(),)) for text, f in _induction_mistakes(d))
    return name_mistake(problem, (got,), mistakes, tolerance)


def _explain_induction_error(error):
    text = str(error)
    if isinstance(error, IndexError) and ("out of bounds" in text or "out of range" in text):
        return ("an index went past the last position: s must be the latest position BEFORE t holding the same "
                "token (s < t, never t itself nor a later position), so s + 1 <= t")
    if isinstance(error, (TypeError, AttributeError)) and "list" in text:
        return "tokens may be a list: np.asarray(tokens) first"
    if isinstance(error, ValueError) and ("zero-size" in text or "empty" in text):
        return "when no token repeats there is nothing to average: return np.zeros(H), H = attention.shape[0]"
    return None


def _repeats(c):
    return "no repeat" not in c.tags


check_induction_score = Spec(
    declared.check_induction_score,
    cases=_induction_cases,
    reference=lambda case: ref_icl.induction_score(*case.args),
    judge=_judge_induction,
    seal=INDUCTION_SEAL,
    explain_error=_explain_induction_error,
    clauses=(
        ("one head (H = 1)", lambda c: c.data["attention"].shape[0] == 1),
        ("several heads, one score each", lambda c: c.data["attention"].shape[0] > 1),
        ("T = 2", lambda c: len(c.data["tokens"]) == 2),
        ("a token seen 3 or more times: s is the LATEST earlier occurrence, not the first",
         lambda c: "latest is not first" in c.tags),
        ("the same token twice in a row: s + 1 == t", lambda c: "twice in a row" in c.tags),
        ("positions whose token did not appear before do not count", lambda c: _repeats(c)),
        ("no token repeats: np.zeros(H)", lambda c: not _repeats(c)),
        ("random heads (a softmax of random scores under a causal mask)", lambda c: "random" in c.tags),
        ("a perfect induction head scores 1", lambda c: "induction" in c.tags),
        ("a previous-token head", lambda c: "previous" in c.tags),
        ("a duplicate-token head, attending to s itself", lambda c: "duplicate" in c.tags),
        ("float32 attention", lambda c: "float32" in c.tags),
        ("tokens as a list", lambda c: "list" in c.tags),
        ("tokens as an int array", lambda c: "array" in c.tags),
    ),
)
