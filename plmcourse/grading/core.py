"""The machinery that every check of the course shares.

A check runs a student's function on small seeded cases and compares what comes
back with the reference. At the first wrong answer it raises `CheckFailed` with
one sentence: which case, what was expected, what came back and, when the wrong
answer matches a known mistake, what that mistake probably is.

The same check runs in two places (see plmcourse.grading's docstring for the picture):

* In a student's kernel, as it is: `run_check` calls the function on each case and
  judges the answer right there. This is feedback, and the student could change it;
  nothing is decided by it.
* When an instructor grades, the kernel has a connection to the judge
  (`PLMCOURSE_JUDGE_FD`). A `Check` then hands the call to `serve`, which
  tells the judge which check ran and does nothing else but call the student's
  function on the inputs the judge sends, returning plain data (`plmcourse.grading.wire`).
  The judge, a process that never runs student code, runs this very module's
  `run_check` with a `Remote` in place of the function: cases, references, tolerances,
  mistakes and the verdict never enter the student's process.

Either way a call of the student's function gives a `Reply`: the value, the exception
if one was raised, the inputs as they were afterwards, the gradients asked for, and
what the call ran (Python functions and torch functions), from which the
check tells which sealed function (the course's own version, the library shortcut
being taught) the answer used.
"""

import _thread
import builtins
import contextvars
import functools
import hashlib
import os
import re
import socket
import sys
import threading
import textwrap
import traceback
from dataclasses import dataclass, field
from types import CodeType, ModuleType

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from plmcourse.grading import wire
from plmcourse.grading.wire import Opaque, describe

__all__ = [
    "CheckFailed",
    "Case",
    "Reply",
    "Check",
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


class CheckFailed(AssertionError):
    """A check found a wrong answer; the message says which case and why in one sentence.

    In a notebook it shows as that sentence, not as a traceback through the checker:
    IPython (and so JupyterLab, nbgrader's Validate and the feedback) displays an
    exception's `_render_traceback_()` lines when it has that method. When the student's
    own function raised, its own frames follow: that is their bug, and where it is.
    """

    def _render_traceback_(self):
        # Wrapped at 80 characters: nbgrader's Validate dialog cuts longer lines with "...".
        name = type(self).__name__
        lines = textwrap.wrap(f"{name}: {self}", width=80)
        lines[0] = lines[0].replace(name, f"\x1b[0;31m{name}\x1b[0m", 1)  # red, as IPython's own
        cause = self.__cause__
        frames = _student_frames(cause.__traceback__) if cause is not None else []
        if frames:
            lines.append("\nYour function raised it here:")
            lines += [line.rstrip("\n") for line in traceback.format_list(frames)]
            lines += [line.rstrip("\n") for line in traceback.format_exception_only(type(cause), cause)]
        return lines


_GRADING_DIR = os.path.dirname(os.path.abspath(__file__))


def _student_frames(tb):
    """The frames of a traceback outside plmcourse/grading: the student's code (and what it called)."""
    return [frame for frame in traceback.extract_tb(tb)
            if not os.path.abspath(frame.filename).startswith(_GRADING_DIR + os.sep)]


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


# ----------------------------------------------------------------------------
# Cases and replies


@dataclass
class Case:
    """One input for the student's function.

    label: how messages name it, e.g. "seed 3: x of shape (4, 6), axis=0".
    args, kwargs: what the student's function is called with.
    tags: what is special about it, e.g. {"large logits"}, for the judge's hints.
    data: anything else the check needs (NumPy copies of torch inputs, a seed).
    grad_leaves: for a differentiable function, the positions of the arguments whose
        gradient is judged; the gradient taken is that of sum(result * upstream)
        (of the result itself when upstream is None: a scalar loss), where the result
        is the returned value, or its item `grad_of` when the function returns a tuple.
    reply: set by run_check before the judge sees the answer (gradients are there).
    """

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    tags: frozenset = frozenset()
    data: dict = field(default_factory=dict)
    grad_leaves: tuple = ()
    upstream: object = None
    grad_of: int = None
    reply: object = None


@dataclass
class Reply:
    """What one call of the student's function gave."""

    value: object = None
    error: BaseException = None        # the exception it raised, if any
    calls: tuple = ()                  # what it ran, first call first: identities of Python and torch functions
    inputs_after: list = field(default_factory=list)  # its array/tensor inputs afterwards
    requires_grad: bool = False        # whether the differentiated result is in the autograd graph
    grads: list = field(default_factory=list)  # one per grad leaf: its gradient, or None (unused)
    grad_error: str = None             # what backward() raised, if it did


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


def _array_inputs(case):
    """(position or keyword, value) for every array or tensor the function receives."""
    found = [(i, a) for i, a in enumerate(case.args) if isinstance(a, (np.ndarray, torch.Tensor))]
    return found + [(k, v) for k, v in case.kwargs.items() if isinstance(v, (np.ndarray, torch.Tensor))]


def _copy(value):
    return value.detach().clone() if isinstance(value, torch.Tensor) else value.copy()


# ----------------------------------------------------------------------------
# Recording what a call runs


def identity(obj):
    """A name for a function or code object that is the same in every process on this install.

    A Python function is known by a digest of its code (bytecode, names, constants, first
    line; not its file), so a copy made with types.FunctionType(f.__code__, ...) or a
    verbatim copy of f's source is still f; a torch function by its module and name, as
    TorchFunctionMode sees it.
    """
    code = obj if isinstance(obj, CodeType) else getattr(obj, "__code__", None)
    if code is not None:
        where = "/".join(code.co_filename.replace(os.sep, "/").split("/")[-2:])
        return f"py:{_digest(code)}:{where}:{getattr(code, 'co_qualname', code.co_name)}"
    if isinstance(obj, str):  # evidence the recorder wrote itself ("thread:...")
        return obj
    module = getattr(obj, "__module__", None) or getattr(getattr(obj, "__objclass__", None), "__module__", "")
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__
    return f"torch:{module}.{name}"


@functools.lru_cache(maxsize=65536)
def _digest(code):
    parts = [code.co_code, repr(code.co_names).encode(), repr(code.co_varnames).encode(),
             code.co_name.encode(), str(code.co_firstlineno).encode()]
    parts += [_digest(c).encode() if isinstance(c, CodeType) else repr(c).encode() for c in code.co_consts]
    return hashlib.sha1(b"\0".join(parts)).hexdigest()[:16]


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


class _WatchTorch(TorchFunctionMode):
    def __init__(self, seen):
        super().__init__()
        self.seen = seen

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            self.seen.setdefault(func, None)
        except TypeError:  # unhashable: no sealed function is
            pass
        return func(*args, **(kwargs or {}))


# Threads that the kernel and its libraries run for themselves (ipykernel's channels, heartbeat and
# output watchers, IPython's history writer, tqdm's monitor), by the module of their class or of
# the function they run. Any other thread alive during a graded call is reported.
OWN_THREADS = ("ipykernel.", "IPython.", "jupyter_client.", "zmq.", "tqdm.",
               "plmcourse.autograde.")  # the judge's threads, where it shares a process with a kernel (tests)
_START_THREAD = {getattr(_thread, name) for name in ("start_new_thread", "start_joinable_thread")
                 if hasattr(_thread, name)}


def _own_thread(thread):
    """True for the main thread and the threads the kernel and its libraries run (OWN_THREADS).
    `thread` is a threading.Thread, or the bare ident of a thread threading does not know."""
    if thread is None or isinstance(thread, int):
        return False
    if isinstance(thread, threading._MainThread):
        return True
    target = getattr(thread, "_target", None)
    module = type(thread).__module__ if type(thread) is not threading.Thread else getattr(target, "__module__", "")
    return str(module).startswith(OWN_THREADS)


def _c_function(function):
    """What a builtin call is recorded as: the function itself, or for a method bound to an object
    (x.softmax, a new object at every call) the method of its type (Tensor.softmax), so that a
    call in a loop is one entry and keeps no object alive."""
    owner = getattr(function, "__self__", None)
    if owner is None or isinstance(owner, ModuleType):
        return function
    name = getattr(function, "__name__", "?")
    method = getattr(type(owner), name, None)
    return method if method is not None else f"torch:{type(owner).__module__}.{type(owner).__qualname__}.{name}"


class _Record:
    """Context: notes every Python function, builtin and torch function called inside, in every thread.

    A profile function (sys.setprofile) sees each Python function called ("call" events) and
    each builtin ("c_call" events), torch's included, under any name: torch._softmax,
    torch._C._nn.scaled_dot_product_attention, Tensor.softmax. It watches this thread, and every
    thread started during the call (threading.setprofile), or on Python 3.12 and later every
    thread there is (threading.setprofile_all_threads). A TorchFunctionMode also sees, in this
    thread, torch functions that a builtin calls (map(torch._softmax, ...)). (Recording aten
    operators, with a TorchDispatchMode, would also see torch.ops.aten.* called directly, but its
    first use loads sympy and torch._dynamo: 1.7 s per kernel.)

    What cannot be watched is reported, as calls named "thread:...": on Python 3.11 a thread that
    was already running (one the answer could hand its work to), unless it is the kernel's own
    (OWN_THREADS); a thread started during the call other than through threading.Thread; and the
    profile function switched off by the call. A person reads them: the kernel could lie anyway.
    """

    def __enter__(self):
        self.codes, self.functions = {}, {}  # dicts as ordered sets: the first call first
        self.evidence = {}
        self.watched = []  # the threads started during the call through threading.Thread.start
        self.active = True
        self.all_threads = hasattr(threading, "setprofile_all_threads")

        def profile(frame, event, arg):
            if not self.active:  # a thread started during the call outlived it: stop watching it
                sys.setprofile(None)
            elif event == "call":
                self.codes.setdefault(frame.f_code, None)
            elif event == "c_call":
                try:
                    self.functions.setdefault(_c_function(arg), None)
                except TypeError:  # unhashable: no sealed function is
                    pass
                if arg in _START_THREAD:
                    self._started_thread(frame)

        self.profile = profile
        self.previous, self.previous_threads = sys.getprofile(), threading.getprofile()
        self._note_threads()
        self.mode = _WatchTorch(self.functions)
        self.mode.__enter__()
        # The profile function last: the recorder's own setting up is not among the calls.
        if self.all_threads:
            threading.setprofile_all_threads(profile)
        else:
            threading.setprofile(profile)
            sys.setprofile(profile)
        return self

    def __exit__(self, *exc_info):
        switched_off = sys.getprofile() is not self.profile
        self.active = False
        if self.all_threads:
            threading.setprofile_all_threads(None)
        else:
            sys.setprofile(self.previous)
            threading.setprofile(self.previous_threads)
        self.mode.__exit__(None, None, None)
        if switched_off:
            self.evidence.setdefault("thread:the recorder was switched off during the call", None)
        self._note_threads()

    def _note_threads(self):
        """Report each thread alive now that is not watched: not this one, not the kernel's own."""
        if self.all_threads:
            return
        me = threading.get_ident()
        for ident in list(sys._current_frames()):
            thread = threading._active.get(ident, ident)  # the ident alone: started outside threading
            if ident != me and not _own_thread(thread) and not any(thread is t for t in self.watched):
                name = thread.name if not isinstance(thread, int) else f"one started outside threading ({ident})"
                self.evidence.setdefault("thread:" + re.sub(r"[^\w .:()<>-]", "?", str(name))[:80], None)

    def _started_thread(self, frame):
        """A thread is being started from `frame`: fine through threading.Thread.start (the new thread
        runs the profile function), evidence otherwise."""
        thread = frame.f_locals.get("self") if frame.f_code is threading.Thread.start.__code__ else None
        plain = thread is not None and type(thread)._bootstrap_inner is threading.Thread._bootstrap_inner
        if plain and (self.all_threads or threading.getprofile() is self.profile):
            self.watched.append(thread)
        else:
            where = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
            self.evidence.setdefault(f"thread:started unwatched from {str(where)[:80]}", None)

    def calls(self):
        recorded = (identity(x) for x in [*self.evidence, *self.codes, *self.functions])
        return tuple(dict.fromkeys(recorded))


def call_student(fn, case):
    """Call `fn` on the case, here, and return the Reply (the student's own exception included)."""
    reply = Reply()
    with _Record() as record:
        try:
            reply.value = fn(*case.args, **case.kwargs)
        except Exception as error:  # the student's bug, reported by the check
            reply.error = error
    reply.calls = record.calls()
    reply.inputs_after = [_copy(value) for _, value in _array_inputs(case)]
    if case.grad_leaves and reply.error is None:
        _gradients(case, reply)
    return reply


def _gradients(case, reply):
    """Fill reply.requires_grad, .grads and .grad_error for the case's grad leaves."""
    result = reply.value
    if case.grad_of is not None:
        result = result[case.grad_of] if isinstance(result, (tuple, list)) and len(result) > case.grad_of else None
    if not isinstance(result, torch.Tensor) or not result.requires_grad:
        return
    reply.requires_grad = True
    leaves = [case.args[i] for i in case.grad_leaves]
    unique = list({id(t): t for t in leaves}.values())  # x_kv may be x_q itself
    try:
        if case.upstream is None:
            total = result.reshape(())
        else:
            total = torch.sum(result * torch.as_tensor(case.upstream, dtype=result.dtype, device=result.device))
        grads = torch.autograd.grad(total, unique, allow_unused=True)
    except Exception as error:  # e.g. an in-place edit autograd needed, or a result that is no scalar
        reply.grad_error = f"{type(error).__name__}: {' '.join(str(error).split())[:160]}"
        return
    by_id = {id(t): g for t, g in zip(unique, grads)}
    reply.grads = [None if by_id[id(t)] is None else by_id[id(t)].detach() for t in leaves]


# ----------------------------------------------------------------------------
# Running a check


@dataclass(eq=False)
class Check:
    """One exercise's check, as a table the engine (`run_check`) reads, in both places.

    name: "check_softmax", what the notebook calls and the judge is told.
    doc: what the check holds the function to (shown by help()).
    arg_names: the function's positional parameters, for messages ("q", "k", "v").
    cases(hidden) -> [Case], or cases(hidden, device) when device=True: the visible cases,
        plus the hidden ones when `hidden` (True, or the judge's salt: see hidden_salt).
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
    driver: for an exercise whose argument cannot travel as plain data (a class, a model):
        driver(obj) -> a function of the cases' plain arguments that builds what the exercise
        needs (an nn.Linear, a model), exercises `obj` on it and returns plain data (what it
        computed, and each stage's exception as text, so that one crash still lets the other
        stages be judged). It is applied to the student's object before `serve` or
        `run_check`, in the student's kernel: the recorded calls (seals), the time limit and
        the inputs' mutation check cover everything `obj` runs, and the judge sees only the report.
    signature_args(case) -> (args, kwargs): for a driven check, the plain values that stand
        for the exercise's own arguments (the base layer, r, alpha...), for
        tests/test_grading_clauses.py, which binds them to the exercise's signature.

    Calling it runs the check: here, or, in a grading kernel connected to the judge, there
    (the kernel then only answers the judge's calls, `serve`).
    """

    name: str
    doc: str
    arg_names: tuple
    cases: object
    reference: object
    judge: object
    seal: object = ()
    explain_error: object = None
    flag_library: tuple = ()
    device: bool = False
    memory: object = None
    clauses: tuple = ()
    driver: object = None
    signature_args: object = None

    def __post_init__(self):
        self.__doc__ = self.doc

    def __call__(self, fn, hidden=False, device=None):
        if self.driver is not None and not isinstance(fn, Remote):  # a Remote is the kernel's driven object
            fn = self.driver(fn)
        connection = _judge_connection()
        if connection is not None:
            return serve(connection, self.name, fn, hidden)
        made = (lambda h: self.cases(h, torch.device("cpu" if device is None else device))) if self.device \
            else self.cases
        cases = made(hidden)
        # In the judge, a hidden case's failure is told to the kernel without its values (see run_check).
        public = len(made(False)) if isinstance(fn, Remote) and hidden else None
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
    """Run `fn` on every case; raise CheckFailed at the first wrong answer, else print one line.

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
    for number, case in enumerate(cases, 1):
        expected = reference(case)
        before = [_copy(value) for _, value in _array_inputs(case)]
        reply = fn.answer(case) if isinstance(fn, Remote) else call_student(fn, case)
        case.reply = reply
        if isinstance(fn, Remote):
            fn.note_library(name, case, library_calls(reply.calls, flag_library))
            fn.note_unwatched(name, case, unwatched(reply.calls))
        problem = (_delegation(reply.calls, sealed, seal) or _crash(reply.error, explain_error)
                   or _mutation(case, before, reply, arg_names) or _returned_none(reply.value))
        if problem is None:
            try:
                problem = judge(case, reply.value, expected)
            except Exception as exc:  # an answer too odd for the judge to read
                problem = f"the check could not read what your function returned, {describe(reply.value)}"
                reply.error = exc
        if problem is not None:
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


# ----------------------------------------------------------------------------
# The kernel's side of grading: answer the judge's calls


_CONNECTION = []  # the judge's socket, once opened


def _judge_connection():
    """The socket to the judge in a grading kernel, else None."""
    if not _CONNECTION:
        fd = os.environ.get("PLMCOURSE_JUDGE_FD")
        _CONNECTION.append(socket.socket(fileno=int(fd)) if fd and fd.isdigit() else None)
    return _CONNECTION[0]


def serve(connection, name, fn, hidden):
    """Tell the judge that `name` runs, answer its calls with `fn`, and show its verdict."""
    wire.send(connection, {"check": name, "hidden": bool(hidden)})
    errors = []
    while True:
        message = wire.receive(connection)
        if message is None:
            raise CheckFailed(f"{name} could not finish: the grader closed the connection.")
        if "verdict" in message:
            verdict = message["verdict"]
            if verdict.get("passed"):
                print(verdict.get("message", ""))
                return
            cause = errors[-1] if errors else None
            raise CheckFailed(str(verdict.get("message", ""))) from cause
        args, kwargs = wire.decode(message["args"], grad_leaves=True)
        upstream = wire.decode(message["upstream"]) if message.get("upstream") is not None else None
        case = Case("", tuple(args), kwargs, grad_leaves=tuple(message.get("grad_leaves", ())),
                    upstream=upstream, grad_of=message.get("grad_of"))
        reply = _call_with_limit(fn, case, CALL_SECONDS)
        if reply.error is not None:
            errors.append(reply.error)
        wire.send(connection, _reply_document(reply))


# A driver's keyword for a case about a ValueError the spec asks for; never passed on to the answer.
EXPECT_ERROR = "expect_value_error"


def raised_or_returned(fn, args, kwargs, describe_value=lambda value: value):
    """In the kernel: call the answer on a case that expects ValueError and report, as plain data,
    what it raised ({"raised": "ValueError", "message": ...}; a subclass counts as ValueError) or
    what it returned ({"returned": describe_value(value)}). A driver's helper (icl, prompting, multimodal)."""
    try:
        value = fn(*args, **kwargs)
    except Exception as error:  # the answer's own exception: what the case is about
        name = "ValueError" if isinstance(error, ValueError) else type(error).__name__
        return {"raised": name, "message": " ".join(str(error).split())[:160]}
    return {"returned": describe_value(value)}


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


# When graded, one call of the student's function may take this long (half of nbgrader's
# limit for a whole cell, PLMCOURSE_CELL_SECONDS): the cases are small, and an endless loop
# must cost its own exercise only, not the cells after it.
CALL_SECONDS = max(1.0, int(os.environ.get("PLMCOURSE_CELL_SECONDS", "60")) / 2)


def _call_with_limit(fn, case, seconds):
    """call_student in a thread, given up after `seconds`: a loop that swallows interrupts
    (`except BaseException: pass`) cannot hold the test cell, and with it the notebook.

    The thread runs in a copy of the caller's context, so a cell's `with np.errstate(...)` around
    the check holds for the student's function too, as it does where the check runs in-process."""
    box = {}
    context = contextvars.copy_context()

    def call():
        try:
            box["reply"] = call_student(fn, case)
        except BaseException as error:  # SystemExit, KeyboardInterrupt raised by the student's code
            box["reply"] = Reply(error=error)

    def target():  # the thread's own function stays the course's, so the recorder knows it
        context.run(call)

    thread = threading.Thread(target=target, daemon=True, name="student function")
    thread.start()
    try:
        thread.join(seconds)
    except KeyboardInterrupt:  # nbgrader's cell timeout arrived first
        pass
    if thread.is_alive():
        return Reply(error=TimeoutError(f"it did not return within {seconds:g} s (an endless loop?)"))
    return box["reply"]


def _reply_document(reply):
    error = None
    if reply.error is not None:
        error = {"name": type(reply.error).__name__, "message": " ".join(str(reply.error).split())[:500]}
    return {"value": wire.encode(reply.value), "error": error, "calls": list(reply.calls)[:5000],
            "after": wire.encode(reply.inputs_after),
            "requires_grad": reply.requires_grad, "grads": wire.encode(reply.grads),
            "grad_error": reply.grad_error}


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
    ])


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
    for description, compute in mistakes:
        with np.errstate(all="ignore"):
            try:
                parts = compute()
            except Exception:  # a variant that does not apply to this case's shapes
                continue
        if parts is None:
            continue
        if all(_close_but_nan(g, p, atol, rtol) for g, p in zip(got_parts, parts)):
            return description
    return None


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


def calls_own_function(reply, name):
    """True if the call recorded in `reply` ran a Python function called `name` that is not the course's own
    (the student's answer to an earlier exercise, say), as `identity` names it: "py:digest:dir/file:name"."""
    for call in reply.calls if reply is not None else ():
        parts = call.split(":") if call.startswith("py:") else ()
        if len(parts) >= 4 and parts[-1] == name and parts[-2].split("/")[0] not in ("ref", "nn", "grading"):
            return True
    return False
