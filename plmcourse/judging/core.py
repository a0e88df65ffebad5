"""The engine every check's judge shares: run the cases, compare, name the mistake.

A check runs a student's function on small seeded cases and compares what comes back with the
reference. At the first wrong answer it raises `CheckFailed` with one sentence: which case, what
was expected, what came back and, when the wrong answer matches a known mistake, what that
mistake probably is.

Everything here, and every module beside it, is the judge's: cases, references, tolerances,
catalogues of mistakes. The grading sandbox does not hold this folder; a student's kernel that
runs a check as feedback (no judge connected) imports it from the package like any module.
`run_check` runs in two places:

* in a student's own kernel, where `fn` is the student's function (plmcourse.grading.core.Check
  hands the call to the check's `Spec` here);
* in the judge (plmcourse.autograde.judge), a process that never runs student code, where `fn`
  is a `Remote`: each call goes to the student's kernel over the wire, and what comes back is
  plain data, read strictly.
"""

import builtins
import contextvars
import re
import time
from dataclasses import dataclass

import numpy as np
import torch

from plmcourse.grading import wire
from plmcourse.grading.core import (  # noqa: F401  (the kernel's side, which the checks' judges read too)
    EXPECT_ERROR,
    Case,
    Check,
    CheckFailed,
    Reply,
    _array_inputs,
    _copy,
    call_student,
    describe,
    identity,
    raised_or_returned,
)
from plmcourse.grading.wire import Opaque

__all__ = [
    "CheckFailed",
    "Case",
    "Reply",
    "Spec",
    "run_check",
    "Remote",
    "F64",
    "F32",
    "tolerance_for",
    "error_report_problem",
    "expect_integer_array",
    "expect_integer_pair",
    "dtype_name",
    "log_softmax",
    "to_numpy",
    "describe",
    "expect_array",
    "expect_pair",
    "expect_array_pair",
    "compare",
    "close",
    "first_match",
    "gradient_problem",
    "hidden_salt",
    "judge_by_rules",
]


# float64 answers agree to ~1e-15 however they are computed (loops, einsum, GPU);
# float32 ones to ~1e-6. Every mistake we know of is off by far more than either.
F64 = {"atol": 1e-9, "rtol": 1e-7}
F32 = {"atol": 2e-5, "rtol": 2e-4}


def tolerance_for(dtype):
    """F32 for float32 inputs (torch or NumPy), F64 otherwise."""
    return F32 if dtype in (torch.float32, np.float32) else F64


def dtype_name(dtype):
    """'float32' for torch.float32 as for np.float32: the name a message shows."""
    return str(dtype).replace("torch.", "")


def log_softmax(x, axis=-1):
    """The judges' NumPy log-softmax (shifted by the max, so large logits stay finite)."""
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def logits_case(seed, shape, axis=None, scale=1.0, dtype=np.float64, some_neg_inf=False, empty=False,
                hole_fraction=0.4):
    """A Case for softmax-like functions: x ~ N(0, scale^2) of `shape`, called as f(x[, axis=axis]).

    some_neg_inf: about `hole_fraction` of the entries set to -inf (every slice along
    `axis` keeps a finite one); empty: one whole slice set to -inf. The label and tags
    name what is special ("large logits", "float32", ...), for messages and hints.
    """
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * scale
    along = -1 if axis is None else axis
    if some_neg_inf:
        holes = rng.random(shape) < hole_fraction
        np.moveaxis(holes, along, 0)[0] = False  # every slice keeps a finite entry
        x[holes] = -np.inf
    if empty:
        slices = np.moveaxis(x, along, -1)  # a view: (..., n)
        slices[tuple(min(1, n - 1) for n in slices.shape[:-1])] = -np.inf
    x = x.astype(dtype)
    label = f"seed {seed}: x of shape {shape}" + ("" if axis is None else f", axis={axis}")
    notes = {"large logits": scale >= 100, "float32": dtype == np.float32,
             "some entries -inf": some_neg_inf, "one slice entirely -inf": empty}
    label += "".join(f", {note}" for note, on in notes.items() if on)
    return Case(label, (x,), {} if axis is None else {"axis": axis},
                tags=frozenset(note for note, on in notes.items() if on),
                data={"x": x, "axis": along})


def hidden_salt(hidden):
    """What the hidden cases' seeds are shifted by: 0 for hidden=True (the notebook's own
    hidden run, the same every time); the judge passes instead a number drawn for each
    submission from the course's secret, which the notebook cannot know in advance."""
    return 0 if hidden is True or not hidden else int(hidden)


def _seal_key(call):
    """What a seal matches on: a Python function's digest (not its file), a torch function's name."""
    return ":".join(call.split(":")[:2]) if call.startswith("py:") else call


def library_calls(calls, names):
    """The torch functions among `calls` whose own name starts with one of `names`, e.g. "_softmax"."""
    found = set()
    for call in calls:
        if call.startswith("torch:"):
            name = call.rsplit(".", 1)[-1]
            readable = call.removeprefix("torch:")
        elif call.count(":") < 3 or not call.startswith("py:"):  # evidence ("thread:..."), or not a name
            continue
        elif call.split(":")[2].startswith("torch/"):
            name = call.split(":")[3].rsplit(".", 1)[-1]
        else:
            continue
        if name.startswith(tuple(names)):
            readable = call.removeprefix("torch:") if call.startswith("torch:") else call.split(":", 2)[2]
            found.add(readable.replace("_VariableFunctionsClass.", "").replace("_C.TensorBase.", "Tensor."))
    return sorted(found)


def unwatched(calls):
    """What the recorder reported among `calls` ("thread:..."): threads whose work it could not
    watch, or its own switching off; evidence for a person, never a verdict."""
    return [call.removeprefix("thread:") for call in calls if call.startswith("thread:")][:8]


def seal_table(seal):
    """{identity: label} for (object, label) pairs; a class is sealed through its forward method."""
    table = {}
    for obj, label in seal:
        if obj is None:
            continue
        target = obj.forward if isinstance(obj, type) else obj
        table.setdefault(_seal_key(identity(target)), label)
        if getattr(target, "__code__", None) is not None:
            table.setdefault(f"torch:{target.__module__}.{target.__qualname__}", label)
    return table


# ----------------------------------------------------------------------------
# Running a check


@dataclass(eq=False)
class Spec:
    """What the judge holds one exercise's check to, as a table the engine (`run_check`) reads.

    check: the declaration a kernel holds (plmcourse.grading.core.Check): name, doc, argument
        names, device flag and driver, read through this Spec as spec.name, spec.doc...
    cases(hidden) -> [Case], or cases(hidden, device) when the check takes a device: the visible
        cases, plus the hidden ones when `hidden` (True, or the judge's salt: see hidden_salt).
    reference(case) -> expected, and judge(case, got, expected) -> None or the problem;
        with memory set, judge(case, got, expected, memory(), made fresh for each run):
        what a random function's judge remembers across cases (the same seed twice).
    seal: (object, label) pairs the answer must not call, or a function that makes them
        when the check runs (a library the notebook loads late); explain_error(exception) ->
        a hint or None; flag_library: torch names reported when graded (run_check).
    clauses: (clause, covers(case) -> bool) pairs: each clause of the exercise's text (an argument's
        special value, an edge case, a rule) with what tells a case that exercises it; not read when
        grading (tests/test_grading_clauses.py holds every clause to a visible case). The rules
        checked on every call (inputs unchanged, no sealed function) are not listed.
    signature_args(case) -> (args, kwargs): for a driven check, the plain values that stand
        for the exercise's own arguments (the base layer, r, alpha...), for
        tests/test_grading_clauses.py, which binds them to the exercise's signature.

    Calling it runs the check here: on the student's function (in the student's own kernel,
    through the declaration) or on a `Remote` (in the judge).
    """

    check: Check
    cases: object
    reference: object
    judge: object
    seal: object = ()
    explain_error: object = None
    flag_library: tuple = ()
    memory: object = None
    clauses: tuple = ()
    signature_args: object = None

    def __post_init__(self):
        self.__doc__ = self.check.doc

    name = property(lambda self: self.check.name)
    doc = property(lambda self: self.check.doc)
    arg_names = property(lambda self: self.check.arg_names)
    device = property(lambda self: self.check.device)
    driver = property(lambda self: self.check.driver)

    def __call__(self, fn, hidden=False, device=None):
        if self.driver is not None and not isinstance(fn, Remote):  # a Remote is the kernel's driven object
            fn = self.driver(fn)
        made = (lambda h: self.cases(h, torch.device("cpu" if device is None else device))) if self.device \
            else self.cases
        cases = made(hidden)
        # In the judge, a hidden case's failure is told to the kernel without its values (see run_check).
        # (In the student's own kernel too, so that both places name a cause from the same cases.)
        public = len(made(False)) if hidden else None
        judge = self.judge
        if self.memory is not None:
            memory = self.memory()
            judge = lambda case, got, expected: self.judge(case, got, expected, memory)  # noqa: E731
        run_check(self.name, fn, cases, arg_names=self.arg_names, reference=self.reference, judge=judge,
                  seal=self.seal() if callable(self.seal) else self.seal, explain_error=self.explain_error,
                  flag_library=self.flag_library, public_cases=public)

    def __repr__(self):
        return f"<{self.name}: {self.doc.splitlines()[0]}>"


def judge_by_rules(rules):
    """A judge made of named rules, for functions whose answer is random: there is no expected
    value to compare with, only properties every right answer has.

    rules: (name, rule) pairs, tried in order; rule(case, got, memory) -> None, or the problem.
    The first problem found is the verdict, so put the most fundamental rule first. The
    judge's `rules` attribute lists them (for the tests, and for reading).
    """
    def judge(case, got, expected, memory):
        for _, rule in rules:
            problem = rule(case, got, memory)
            if problem is not None:
                return problem
        return None

    judge.rules = rules
    return judge


def run_check(name, fn, cases, *, arg_names, reference, judge, seal=(), explain_error=None,
              flag_library=(), public_cases=None):
    """Run `fn` on every case; raise CheckFailed for the first wrong answer, else print one line.

    The sentence is about the first failing case. When a known mistake explains it, the remaining cases
    run as well (for at most as long again as the check took to find the failure, 5 s at least), and
    the cause named is the one that explains the most failing cases (see _named_by_most_failures below).

    fn: the student's function, or a `Remote` (in the judge) that calls it in the student's kernel.
    arg_names: the names of the positional parameters, for messages ("q", "k", "v").
    reference(case) -> expected: computed before `fn` runs.
    judge(case, got, expected) -> None if `got` is right, else a phrase saying what is wrong;
        it is not called when `fn` raised, called a sealed function, changed its inputs or
        returned None (each of these fails the case with its own message).
    seal: (object, label) pairs `fn` must not call, e.g. (ref.softmax, "plmcourse.ref.softmax").
    explain_error(exception) -> an extra hint for an exception raised by `fn`, or None.
    flag_library: beginnings of torch function names (e.g. "_softmax") that an answer should
        not call under any name; when one does, the judge reports it, with the function,
        for a person to look at (`Remote.flags`).
    public_cases: in the judge, how many of `cases` are visible ones (they come first); a failure on
        a later, hidden case carries `for_kernel`, the sentence without the case's values or seed,
        which is all the kernel is told: a notebook cannot learn the hidden cases by failing them.
    """
    sealed = seal_table(seal)
    first = None  # the first failure: (number, case, problem, reply); later failures only test its causes
    causes, fit, missed = [], [], []  # the first failure's possible causes; the failing cases each explains
    started, deadline = time.monotonic(), None
    for number, case in enumerate(cases, 1):
        hidden_beyond = public_cases is not None and number > public_cases
        if deadline is not None and (time.monotonic() > deadline or hidden_beyond):
            # Naming the cause may cost at most as long again as finding the failure did (5 s at least), and never
            # sends a hidden case that the kernel would not have seen: it sees the next one only by passing this.
            break
        expected = reference(case)
        before = [_copy(value) for _, value in _array_inputs(case)]
        try:
            reply = fn.answer(case) if isinstance(fn, Remote) else call_student(fn, case, bool(flag_library))
        except (wire.WireError, ConnectionError, OSError):
            if first is None:
                raise
            break  # only to name the first failure's cause: a kernel that stops now changes nothing
        case.reply = reply
        if isinstance(fn, Remote):
            fn.note_library(name, case, library_calls(reply.calls, flag_library))
            fn.note_unwatched(name, case, unwatched(reply.calls))
        problem = (_delegation(reply.calls, sealed, seal) or _crash(reply.error, explain_error)
                   or _mutation(case, before, reply, arg_names) or _returned_none(reply.value))
        seen = _Seen()
        if problem is None:
            token = _MATCHES_SEEN.set(seen)
            try:
                problem = judge(case, reply.value, expected)
            except Exception as exc:  # an answer too odd for the judge to read
                problem = f"the check could not read what your function returned, {describe(reply.value)}"
                reply.error = exc
            finally:
                _MATCHES_SEEN.reset(token)
        if problem is None:
            continue
        keys = {_cause_key(c) for c in _causes(problem, seen)}
        if first is None:
            first, causes = (number, case, problem, reply), _causes(problem, seen)
            fit = [[number] for _ in causes]
            missed = [[] for _ in causes]  # later failing cases where a cause could show, and did not
            deadline = time.monotonic() + max(5.0, time.monotonic() - started)
            if not causes:
                break
        elif seen.consulted:  # a later failure held against the whole list of known mistakes
            could = {_cause_key(c) for c in seen.applicable}
            for i, cause in enumerate(causes):
                if _cause_key(cause) in keys:
                    fit[i].append(number)
                elif _cause_key(cause) in could:
                    missed[i].append(number)
    if first is not None:
        number, case, problem, reply = first
        problem = _named_by_most_failures(problem, causes, fit, missed)
        where = f"{name} failed on case {number} of {len(cases)} ({case.label})"
        failed = CheckFailed(_one_sentence(f"{where}: {problem}"))
        if public_cases is not None and number > public_cases:
            failed.for_kernel = _one_sentence(
                f"{name} failed on hidden case {number} of {len(cases)}: {_without_values(problem)} (a hidden "
                f"case's values are not shown while grading)")
        raise failed from reply.error
    passed = f"{name}: {len(cases)} cases passed."
    if isinstance(fn, Remote):
        fn.passed = passed  # the judge sends it to the kernel, which prints it
    else:
        print(passed)


# A message names a known mistake as the cause when that mistake reproduces the failing cases the
# check saw. After a failure that a known mistake explains, the check runs the remaining cases too, and
# counts which failing cases each candidate explains: first_match() records here every mistake that fits
# the case being judged, not only the first in its list, so that two mistakes which give the same number
# on one case are told apart by the next. A later failing case counts against a cause only where that
# cause could show (first_match computed it there). A cause that explains more failing cases than it
# misses is named, with the first case it leaves unexplained (the answer has a second mistake); one that
# misses as many or more is not named: one case against one other cannot tell a second mistake from a
# coincidence of one case's numbers (a score of 0 that several mistakes give).
_MATCHES_SEEN = contextvars.ContextVar("plmcourse_matches_seen", default=None)
_MATCHED = "it matches "


class _Seen(list):
    """The known mistakes first_match() found to fit one case; `applicable`: those it could compute there;
    `consulted`: whether it was asked at all (a later failing case that the judge explained some other way,
    or a crash, neither counts for nor against a cause)."""
    consulted = False

    def __init__(self):
        super().__init__()
        self.applicable = []


def fits(*descriptions):
    """For a judge that names a cause without first_match: every known mistake that explains this case (the
    one its message names among them), so that run_check can tell them apart by the other failing cases."""
    seen = _MATCHES_SEEN.get()
    if seen is not None:
        seen.consulted = True
        seen.extend(d for d in descriptions if d not in seen)
        seen.applicable.extend(descriptions)


def _causes(problem, seen):
    """The known mistakes that explain one failure: those first_match saw fit, and the one the message names."""
    named = problem[problem.rindex(_MATCHED) + len(_MATCHED):] if _MATCHED in problem else None
    found = ([named] if named else []) + [s for s in seen if s != named]
    return found if named else []  # a message that names nothing: no known mistake explains it


def _cause_key(cause):
    """A cause, told apart from others by what it names (before its remedy), whatever numbers it quotes."""
    return _without_values(cause.split(":")[0].split(" (")[0]).strip()


def _named_by_most_failures(problem, causes, fit, missed):
    """`problem`, naming the cause that explains the most failing cases (the first listed among equals), and
    the first failing case it leaves unexplained, if any.

    causes: the known mistakes that explain the first failing case; fit[i]: the failing cases that causes[i]
    explains; missed[i]: the later failing cases where causes[i] could show and does not explain them (a
    case where it cannot show, a k it does not apply to, counts neither way)."""
    if not causes:
        return problem
    best = max(range(len(causes)), key=lambda i: (len(fit[i]) - len(missed[i]), len(fit[i]), -i))
    bare = problem[:problem.rindex(_MATCHED)]
    if not missed[best]:
        return f"{bare}{_MATCHED}{causes[best]}"
    other = missed[best][0]
    if len(fit[best]) <= len(missed[best]):  # maybe a coincidence of this case's numbers: name nothing
        return (f"{bare.rstrip('; ,:')} (case {other} fails too, and no known mistake explains most of the failing "
                f"cases: look at what differs rather than for one cause)")
    return f"{bare}{_MATCHED}{causes[best]}, and case {other} fails in another way as well"


_VALUE = re.compile(r"(?<![\w.])[-+]?(?:\d[\d_]*\.?\d*(?:e[-+]?\d+)?|\.\d+(?:e[-+]?\d+)?|inf|nan|true|false)(?![\w])",
                    re.IGNORECASE)


def _without_values(text):
    """`text` with every number and truth value in it shown as "…" (float64 keeps its digits)."""
    return _VALUE.sub("…", text)


def _returned_none(got):
    # No function in the course returns None on purpose: this is a forgotten `return`.
    return "your function returned None (is a `return` missing?)" if got is None else None


def _one_sentence(text):
    text = " ".join(text.split())  # no newlines, single spaces
    return text.rstrip(".") + "."


def _delegation(calls, sealed, seal):
    for call in calls:  # in the order they were first called
        label = sealed.get(_seal_key(call))
        if label is not None:
            return f"your function calls {label}; write it yourself"
    return None


class StudentError(Exception):
    """An exception the student's function raised in its kernel, as the judge hears of it."""

    def __init__(self, name, message):
        super().__init__(message)
        self.name = name


def _crash(error, explain_error):
    if error is None:
        return None
    name = error.name if isinstance(error, StudentError) else type(error).__name__
    if name == "NotImplementedError":
        return ("your function raised NotImplementedError; replace the "
                "`raise NotImplementedError()` line with your code")
    text = " ".join(str(error).split())
    if len(text) > 160:
        text = text[:157] + "..."
    problem = f"your function raised {name}: {text}" if text else f"your function raised {name}"
    hint = explain_error(error) if explain_error else None
    return f"{problem} ({hint})" if hint else problem


def _mutation(case, before, reply, arg_names):
    for (key, _), original, after in zip(_array_inputs(case), before, reply.inputs_after):
        if not _same(original, after):
            name = arg_names[key] if isinstance(key, int) and key < len(arg_names) else key
            return (f"your function changed its input {name} in place; work on a new array (an augmented "
                    f"assignment such as x -= m, an out= argument, a [...] = assignment or a method ending in "
                    f"_ writes into the input itself)")
    return None


def _same(a, b):
    a, b = to_numpy(a), to_numpy(b)
    if not isinstance(b, np.ndarray) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    both_nan = np.isnan(a) & np.isnan(b) if a.dtype.kind in "fc" else False
    return bool(np.all(np.equal(a, b) | both_nan))


def error_report_problem(got, wanted):
    """Judge raised_or_returned's report on a case that expects ValueError, up to what the caller words itself.

    `wanted` says why ValueError is due. Returns the sentence when the report cannot be read or the answer raised
    another exception; None when it raised ValueError or returned (got["returned"], which the caller judges)."""
    if not isinstance(got, dict) or not ({"raised"} <= set(got) or {"returned"} <= set(got)):
        return f"{wanted}; the check could not read what it did ({describe(got)})"
    if "raised" in got and got["raised"] != "ValueError":
        text = str(got.get("message", ""))[:160]
        return (f"{wanted}, but it raised {str(got['raised'])[:80]}" + (f": {text}" if text else "")
                + ("; an assert is not the error asked for (and python -O removes it): raise ValueError(...)"
                   if got["raised"] == "AssertionError" else ""))
    return None


# ----------------------------------------------------------------------------
# The judge's side: the student's function, called in the student's kernel


class Remote:
    """Stands for the student's function in the judge: each call goes over the connection.

    What comes back is read strictly (plmcourse.grading.wire): a reply that breaks the
    rules fails the case. `flags` collects, per check, the library functions from
    `flag_library` that the answer called: evidence for a person, since a kernel could hide them.
    """

    def __init__(self, connection):
        self.connection = connection
        self.flags = []
        self.passed = ""

    def answer(self, case):
        message = {"args": wire.encode((case.args, case.kwargs)), "grad_leaves": list(case.grad_leaves),
                   "upstream": None if case.upstream is None else wire.encode(np.asarray(case.upstream)),
                   "grad_of": case.grad_of}
        wire.send(self.connection, message)
        doc = wire.receive(self.connection)
        while isinstance(doc, dict) and "refused" in doc and len(self.flags) < 64:
            # The kernel's policy refused something the answer did (plmcourse.grading.policy): a flag, once.
            said = f"the kernel's policy {str(doc['refused'])[:300]}"
            if not any(flag.startswith(said) for flag in self.flags):
                self.flags.append(f"{said} ({case.label}; the kernel's own report)")
            doc = wire.receive(self.connection)
        if doc is None:
            raise ConnectionError("the kernel stopped while the function ran (it was stopped for time, "
                                  "memory, or the kernel died)")
        return _read_reply(doc)

    def note_unwatched(self, name, case, threads):
        """A flag, once per check, when the recorder says it could not watch part of the call."""
        names = [re.sub(r"[^\w.<>:=, -]", "?", str(t))[:80] for t in threads[:4]]
        if names and not any(flag.startswith(f"{name} could not") for flag in self.flags):
            self.flags.append(f"{name} could not watch all of the answer's work: {'; '.join(names)} "
                              f"({case.label}; the kernel's own report)")

    def note_library(self, name, case, functions):
        # The names come from the kernel: only the characters of a dotted name pass, and few of them.
        names = [re.sub(r"[^\w.<>]", "?", str(f))[:80] for f in functions[:8]]
        if names and not any(flag.startswith(f"{name} ") for flag in self.flags):  # once per check
            self.flags.append(f"{name} found the answer calling {', '.join(names)} ({case.label}; the kernel's "
                              f"own report)")


def _read_reply(doc):
    def strings(x, limit):
        if type(x) is not list or len(x) > limit or any(type(s) is not str or len(s) > 500 for s in x):
            raise wire.WireError("a list of names that is not one")
        return x

    reply = Reply(value=wire.decode(doc.get("value")), calls=tuple(strings(doc.get("calls", []), 5000)),
                  requires_grad=doc.get("requires_grad") is True)
    after = wire.decode(doc.get("after"))
    reply.inputs_after = after if type(after) is list else []
    grads = wire.decode(doc.get("grads"))
    reply.grads = grads if type(grads) is list else []
    if type(doc.get("grad_error")) is str:
        reply.grad_error = doc["grad_error"][:300]
    error = doc.get("error")
    if type(error) is dict:
        name, message = str(error.get("name", "Exception"))[:80], str(error.get("message", ""))[:500]
        known = getattr(builtins, name, None)
        if isinstance(known, type) and issubclass(known, Exception):
            reply.error = known(message)  # so that a hint can ask isinstance(error, IndexError)
        else:
            reply.error = StudentError(name, message)
    return reply


# ----------------------------------------------------------------------------
# Judging: small pieces the checks' judges are made of


def to_numpy(x):
    """A NumPy copy of an array or tensor (any device), through methods captured at import."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy().copy()
    return x


def expect_array(got, what, kind="numpy"):
    """None if `got` is a NumPy array (kind="numpy") or a torch tensor (kind="torch"), else the problem."""
    wanted = np.ndarray if kind == "numpy" else torch.Tensor
    if isinstance(got, wanted):
        return None
    if isinstance(got, Opaque):
        return f"{what} is {got.description}, which cannot be graded; return a plain {'NumPy array' if kind == 'numpy' else 'torch.Tensor'}"
    if got is None:
        return f"{what} is None"
    if kind == "numpy":
        return f"{what} is {describe(got)}, expected a NumPy array (np.ndarray)"
    if isinstance(got, np.ndarray):
        return (f"{what} is a NumPy array, expected a torch.Tensor; gradients do not flow "
                f"through NumPy, so keep the computation in torch")
    return f"{what} is {describe(got)}, expected a torch.Tensor"


def expect_pair(got, names="(output, weights)"):
    """None if `got` is a tuple or list of two items, else the problem."""
    if isinstance(got, (tuple, list)) and len(got) == 2:
        return None
    return f"your function returned {describe(got)}, expected the pair {names}"


def expect_integer_array(got, what):
    """None if `got` is a NumPy array of integers (token ids), else the problem."""
    problem = expect_array(got, what)
    if problem:
        return problem
    if got.dtype.kind not in "iu":
        return f"{what} has dtype {got.dtype}, expected integer token ids"
    return None


def expect_integer_pair(got, shape, shape_of, names=("inputs", "labels")):
    """None if `got` is a pair of integer NumPy arrays, each of `shape` (the shape of the argument `shape_of`), else
    the problem: the masking functions' (inputs, labels)."""
    problem = expect_pair(got, f"({names[0]}, {names[1]})")
    if problem:
        return problem
    for item, what in zip(got, (f"{names[0]} (the first item)", f"{names[1]} (the second item)")):
        problem = expect_integer_array(item, what)
        if problem:
            return problem
    for item, what in zip(got, names):
        if item.shape != shape:
            return f"{what} have shape {item.shape}, expected {shape} (the shape of {shape_of})"
    return None


def expect_array_pair(got, names="(output, weights)", whats=("the output (first item)", "the weights (second item)"),
                      kind="numpy"):
    """None if `got` is a pair of NumPy arrays (kind="numpy") or torch tensors (kind="torch"), else the problem."""
    problem = expect_pair(got, names)
    for item, what in zip(got, whats) if problem is None else ():
        problem = expect_array(item, what, kind)
        if problem:
            break
    return problem


def noted(label, notes):
    """(label, tags) for a Case: `label` with the text of each note that applies after it, and the tags of
    those notes. notes: (applies, text, tag) triples; tag None for a note that only describes the case."""
    tags = set()
    for applies, text, tag in notes:
        if applies:
            label += text
            tags.update([tag] if tag else [])
    return label, frozenset(tags)


def expect_float_array(got, what, why=""):
    """None if `got` is a NumPy array of a floating-point dtype, else the problem (`why`: a hint after it)."""
    problem = expect_array(got, what)
    if problem is None and got.dtype.kind != "f":
        problem = f"{what} has dtype {got.dtype}, expected a floating-point dtype{why}"
    return problem


def expect_float_pair(got, whats=("the output (first item)", "the weights (second item)")):
    """None if `got` is the pair (output, weights) of floating-point NumPy arrays, else the problem
    (`whats`: how a dtype problem names each item)."""
    problem = expect_array_pair(got)
    for item, what in zip(got, whats) if problem is None else ():
        if item.dtype.kind != "f":
            return f"{what} has dtype {item.dtype}, expected a floating-point dtype"
    return problem


def expect_loss(got, reply, like, *, inputs, like_name, keep_dtype, keep_device, no_flow, shape_hint=None):
    """None if `got` is a loss that training can use, else the problem, the most fundamental first:
    a torch tensor, in the autograd graph, of the dtype and device of `like` (the input it is computed
    from), with no axis left (0-d).

    inputs: what the loss must depend on ("z1 and z2"); like_name: how messages name `like`
    ("the logits"); keep_dtype, keep_device: the advice for a wrong dtype, a wrong device;
    no_flow(detail) -> the sentence for a graph that does not reach the inputs;
    shape_hint(shape) -> what a loss of that shape probably did, "" when nothing fits.
    """
    problem = expect_array(got, "the loss", kind="torch")
    if problem:
        return problem
    if not reply.requires_grad:
        return no_flow(f" (the loss does not depend on {inputs} in the autograd graph)")
    if got.dtype != like.dtype:
        return f"the loss has dtype {got.dtype}, expected {like.dtype} like {like_name}: {keep_dtype}"
    if got.device != like.device:
        return f"the loss is on {got.device}, expected {like.device} like {like_name} ({keep_device})"
    if got.dim() != 0:
        hint = shape_hint(tuple(got.shape)) if shape_hint else ""
        return f"the loss has shape {tuple(got.shape)}, expected a single number (a 0-d tensor){hint}"
    return None


def close(got, expected, atol, rtol):
    """True if the arrays have the same shape and |got - expected| <= atol + rtol * |expected| everywhere."""
    got = to_numpy(got)
    expected = to_numpy(expected)
    if got.shape != expected.shape:
        return False
    if got.dtype == np.bool_ or expected.dtype == np.bool_:
        return got.dtype == expected.dtype and bool(np.logical_and.reduce(np.equal(got, expected), axis=None))
    got = got.astype(np.float64)
    expected = expected.astype(np.float64)
    # NaN compares False, so a NaN anywhere fails the test below; equal infinities
    # (e.g. -inf from a log-softmax of a masked entry) match, although inf - inf is NaN.
    with np.errstate(invalid="ignore"):
        within = np.equal(got, expected) | (np.absolute(np.subtract(got, expected)) <= atol + rtol * np.absolute(expected))
    return bool(np.logical_and.reduce(within, axis=None))


def hint_for(error, hints):
    """The hint of the first of `hints` whose clue is in the error's text, or None: what an explain_error gives.

    hints: (clue, hint) pairs, tried in order. A clue is a tuple of alternatives, any of which may
    occur in str(error); an alternative is a string, or a tuple of strings that must all occur.
    """
    text = str(error)
    for clue, hint in hints:
        if any(all(part in text for part in ((alt,) if isinstance(alt, str) else alt)) for alt in clue):
            return hint
    return None


def explain_shape_error(error):
    """One sentence for the shape slips of NumPy and torch code that transposes or reduces."""
    return hint_for(error, [
        (("mismatch in its core dimension", ("shapes", "not aligned")),
         "a matrix product got operands whose inner sizes differ: .T reverses ALL the axes of a batched "
         "array; transpose the last two only, np.swapaxes(k, -1, -2) (k.transpose(-2, -1) in torch)"),
        (("could not be broadcast", "must match the size of tensor"),
         "two arrays do not broadcast: a reduction without keepdims=True (keepdim=True in torch) drops "
         "the axis it reduces, so the result no longer lines up with the input; keep that axis"),
        BOOLEAN_INDEX_HINT,
    ])


# Indexing the scores with a mask (scores[~mask] = -inf) needs the mask to have the scores' exact shape; the
# course's masks only broadcast to it.
BOOLEAN_INDEX_HINT = (
    ("boolean index did not match", ("shape of the mask", "does not match the shape of the indexed tensor")),
    "indexing with the mask (scores[~mask] = ...) needs a mask of the scores' exact shape, and a mask may be "
    "any shape that broadcasts to them, such as (B, 1, 1, L_k); use np.where(mask, scores, -np.inf) "
    "(scores.masked_fill(~mask, float('-inf')) in torch), which broadcast")


def gradient_problem(reply, expected_grads, names, no_flow, hint=""):
    """None if the reply's gradients match `expected_grads`, else the phrase for the first problem.

    no_flow(detail) -> the sentence for a gradient that does not reach an input. The most
    fundamental problem comes first: no graph at all, then backward failing, then a
    missing gradient, then a wrong one (with `hint` after it).
    """
    if not reply.requires_grad:
        return no_flow(" (the result does not depend on the inputs in the autograd graph)")
    if reply.grad_error:
        return f"computing gradients through your function raised {reply.grad_error}"
    for grad, want, name in zip(reply.grads, expected_grads, names):
        if grad is None:
            return no_flow(f" to {name}")
        problem = compare(grad, want, **F64, what=f"the gradient with respect to {name}")
        if problem:
            return f"{problem}{hint}"
    return None


def _index(flat, shape):
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(flat, shape)) + "]"


def as_scalar(x):
    """A float for a Python number, a NumPy scalar or a one-element array; None otherwise."""
    if isinstance(x, (bool, np.bool_)):
        return None
    if isinstance(x, (int, float, np.integer, np.floating)):
        return float(x)
    if isinstance(x, np.ndarray) and x.size == 1 and x.dtype.kind in "fi":
        return float(x.reshape(()))
    return None


def judge_bool_mask(got, expected, mistakes):
    """None if `got` is exactly the boolean mask `expected`, else one sentence (with the matching mistake)."""
    problem = expect_array(got, "the result")
    if problem:
        return problem
    if got.dtype != np.bool_:
        if got.dtype.kind == "f" and np.isneginf(got).any():
            return ("the result is an additive float mask of 0 and -inf; return a boolean mask instead "
                    "(True where attention is allowed)")
        hint = " (the pattern is right; create it with dtype=bool)" if (
            got.shape == expected.shape and ((got != 0) == expected).all()) else ""
        return f"the result has dtype {got.dtype}, expected bool{hint}"
    problem = compare(got, expected, atol=0, rtol=0, what="the result")
    return name_mistake(problem, (got,), mistakes, {"atol": 0, "rtol": 0})


def compare(got, expected, atol, rtol, what="the output"):
    """None if `got` is close to `expected`, else a phrase: shape, NaN, or the largest difference."""
    got = to_numpy(got)
    expected = to_numpy(expected)
    if got.shape != expected.shape:
        return f"{what} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    if close(got, expected, atol, rtol):
        return None
    if expected.dtype == np.bool_:
        wrong = (got != expected).argmax()
        return (f"{what} differs from the expected at {_index(wrong, got.shape)} "
                f"(expected {expected.flat[wrong]}, got {got.flat[wrong]})")
    got = got.astype(np.float64)
    expected = expected.astype(np.float64)
    if not bool(np.logical_and.reduce(np.isfinite(got), axis=None)):
        bad = (~np.isfinite(got)).argmax()
        return f"{what} contains {got.flat[bad]} (first at {_index(bad, got.shape)})"
    diff = np.absolute(np.subtract(got, expected))
    worst = diff.argmax()
    want, have = _distinct(expected.flat[worst], got.flat[worst])
    problem = (f"{what} differs from the expected by up to {float(np.maximum.reduce(diff, axis=None)):.3g} "
               f"(at {_index(worst, got.shape)}: expected {want}, got {have})")
    if atol < F32["atol"] and close(got, expected, **F32):
        # Right to float32 precision but not to float64's: the answer computed in float32 somewhere.
        problem += (f", which is float32 rounding: compute in the inputs' float64 throughout (no "
                    f".float() or np.float32 inside); float64 answers must agree to atol {atol:g} "
                    f"and rtol {rtol:g}")
    return problem


def _distinct(expected, got):
    """The two numbers with just enough significant digits to tell them apart (4 at least)."""
    for digits in range(4, 18):
        want, have = f"{expected:.{digits}g}", f"{got:.{digits}g}"
        if want != have:
            return want, have
    return want, have


def first_match(got_parts, mistakes, atol, rtol):
    """The description of the first known mistake whose result `got_parts` matches, or None.

    mistakes: (description, compute) pairs; compute() returns a tuple of arrays
    shaped like got_parts, or None where the mistake cannot show in this case.
    They are computed lazily, in order: put the more specific ones first.
    """
    seen = _MATCHES_SEEN.get()  # run_check's list: record every mistake that fits, return the first
    if seen is not None:
        seen.consulted = True
    found = None
    for description, compute in mistakes:
        with np.errstate(all="ignore"):
            try:
                parts = compute()
            except Exception:  # a variant that does not apply to this case's shapes
                continue
        if parts is None:
            continue
        if seen is not None:
            seen.applicable.append(description)
        if all(_close_but_nan(g, p, atol, rtol) for g, p in zip(got_parts, parts)):
            if seen is None:
                return description
            seen.append(description)
            found = found or description
    return found


def matches(problem, mistake):
    """`problem`, with "; it matches <mistake>" after it when a known mistake (a description) explains it."""
    return f"{problem}; it matches {mistake}" if mistake else problem


def name_mistake(problem, got_parts, mistakes, tolerance):
    """None for no problem; else `problem`, naming the first of `mistakes` that `got_parts` matches.

    The judges' last step: compare() found a difference, first_match() looks for its cause.
    Call it only when there is a problem if building `mistakes` costs anything (first_match
    computes each mistake lazily, but the call that makes the list or generator does run).
    """
    if problem is None:
        return None
    return matches(problem, first_match(got_parts, mistakes, **tolerance))


def _close_but_nan(got, expected, atol, rtol):
    """close(), skipping the entries where `got` is NaN, as long as they are under half.

    A student's version of a mistake often gives NaN where our version of it gives
    a number: a query left with no allowed key (an inverted mask) is NaN in theirs.
    """
    got, expected = to_numpy(got), to_numpy(expected)
    if got.shape != expected.shape or got.dtype.kind != "f":
        return close(got, expected, atol, rtol)
    nan = np.isnan(got)
    if 2 * np.count_nonzero(nan) > got.size:
        return False
    return close(np.where(nan, expected, got), expected, atol, rtol)


# Statistics for the random functions (mlm_mask, text_infilling). An honest answer must fail less
# than once in 10,000 gradings. Every statistical rule raises its alarm only where an exact binomial
# tail (computed below, no normal approximation) is below ALARM = 1e-6 for an honest answer; one
# grading of a random function runs fewer than 100 such tests, so by the union bound an honest
# answer fails with probability below 100 x 1e-6 = 1e-4. tests/test_grading_bert.py measures it.
ALARM = 1e-6


def binomial_tails(k, n, p):
    """(P(X <= k), P(X >= k)) for X ~ Binomial(n, p), summed exactly from log-probabilities."""
    if n == 0 or p <= 0.0 or p >= 1.0:  # X is certain: 0, or n
        x = n if p >= 1.0 else 0
        return float(x <= k), float(x >= k)
    # log P(X = i + 1) - log P(X = i) = log((n - i) / (i + 1)) + log(p / (1 - p)): a cumulative sum.
    i = np.arange(n)
    steps = np.log(n - i) - np.log(i + 1) + (np.log(p) - np.log1p(-p))
    log_pmf = np.concatenate([[0.0], np.cumsum(steps)])
    pmf = np.exp(log_pmf - log_pmf.max())
    pmf /= pmf.sum()
    return float(pmf[:k + 1].sum()), float(pmf[max(k, 0):].sum())


def unlikely_count(k, n, p):
    """"low" or "high" if an honest count k of n events of probability p is that far out with
    probability below ALARM (each side at ALARM / 2), else None."""
    low, high = binomial_tails(int(k), int(n), float(p))
    if low < ALARM / 2:
        return "low"
    if high < ALARM / 2:
        return "high"
    return None


def underdrawn(new, old, allowed, groups):
    """The first of `groups` whose ids the random replacements drew far less often than uniform draws would.

    new, old: the ids the answer put in (every position whose id changed, not to the mask) and the ids they
    replaced; allowed: the ids a replacement is drawn from (uniformly), the originals among them; groups:
    (description, ids) pairs, for instance the allowed ids that never occur in the batch, or those below a
    special id. A visible replacement differs from its original, so it is uniform over the other
    len(allowed) - 1 ids: in group G with probability (|G| - [old in G]) / (len(allowed) - 1). The count in
    G is a sum of such draws; the binomial with the same mean has the heavier low tail, so judging by it
    errs on the honest side, and each group alarms below ALARM / 2 / len(groups).
    Returns (description, count, expected count) or None."""
    new, old = np.asarray(new).ravel(), np.asarray(old).ravel()
    allowed = np.asarray(sorted(set(np.asarray(allowed).tolist())))
    if len(new) == 0 or len(allowed) < 2:
        return None
    for description, ids in groups:
        ids = np.intersect1d(np.asarray(list(ids), dtype=np.int64), allowed)
        if len(ids) == 0:
            continue
        p = float(np.mean((len(ids) - np.isin(old, ids)) / (len(allowed) - 1)))
        k = int(np.count_nonzero(np.isin(new, ids)))
        low, _ = binomial_tails(k, len(new), p)
        if low < ALARM / 2 / len(groups):
            return description, k, p * len(new)
    return None


def calls_own_function(reply, name):
    """True if the call recorded in `reply` ran a Python function called `name` that is not the course's own
    (the student's answer to an earlier exercise, say), as `identity` names it: "py:digest:dir/file:name"."""
    for call in reply.calls if reply is not None else ():
        parts = call.split(":") if call.startswith("py:") else ()
        if len(parts) >= 4 and parts[-1] == name and parts[-2].split("/")[0] not in ("ref", "nn", "grading"):
            return True
    return False
