"""What a student's kernel runs of every check: the declaration, the call, the connection.

This module and the check declarations beside it (grading/<topic>.py) are all a kernel holds
of the grading. A `Check` here is an exercise's check as a test cell calls it: its name, doc,
argument names and, for an exercise whose argument is a class or a model, the driver that
exercises it. The cases, references, tolerances, mistake catalogues and the engine that
judges are the judge's, in `plmcourse.judging`: a folder the grading sandbox does not hold.

Calling a Check runs it in one of two places (plmcourse.grading's docstring draws both):

* In a student's own kernel (no judge connected: Binder, Colab, Validate) the check's Spec is
  imported from plmcourse.judging and run right here. This is feedback, and the student could
  change it; nothing is decided by it.
* When an instructor grades, the kernel runs in the sandbox with a connection to the judge
  (`PLMCOURSE_JUDGE_FD`). The Check then hands the call to `serve`, which tells the judge which
  check ran and does nothing else but call the student's function on the inputs the judge
  sends, returning plain data (`plmcourse.grading.wire`). Cases, references and the verdict
  never enter the student's process.

Either way a call of the student's function gives a `Reply` (`call_student`): the value, the
exception if one was raised, the inputs as they were afterwards, the gradients asked for, and
what the call ran (Python functions and torch functions), from which the judge tells which
sealed function (the course's own version, the library shortcut being taught) the answer used.
"""

import _thread
import contextvars
import functools
import hashlib
import os
import re
import socket
import sys
import textwrap
import threading
import warnings
import traceback
from dataclasses import dataclass, field
from types import CodeType, ModuleType

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from plmcourse.grading import wire
from plmcourse.grading.wire import describe

__all__ = [
    "CheckFailed",
    "Case",
    "Reply",
    "Check",
    "call_student",
    "serve",
    "describe",
    "EXPECT_ERROR",
    "raised_or_returned",
    "expect_error_driver",
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


# The checks' own folders: the kernel's (this one) and the judge's beside it.
_CHECK_DIRS = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), folder) + os.sep
                    for folder in ("grading", "judging"))


def _student_frames(tb):
    """The frames of a traceback outside plmcourse/grading and plmcourse/judging: the student's code
    (and what it called)."""
    return [frame for frame in traceback.extract_tb(tb)
            if not os.path.abspath(frame.filename).startswith(_CHECK_DIRS)]


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


class _WatchOperators(TorchDispatchMode):
    """Notes each operator that reaches PyTorch's dispatcher ("torch:aten._softmax"), by the operator's
    name, whatever Python path led there: torch.softmax, Tensor.softmax, torch.ops.aten._softmax called
    directly, a library's own call inside a C++ function. Below autograd, so a backward pass is not in it."""

    def __init__(self, seen):
        super().__init__()
        self.seen = seen
        self.operators = set()  # named already: an answer in a loop runs the same few thousands of times


def _note_operator(self, func, types, args=(), kwargs=None):
    if func not in self.operators:
        self.operators.add(func)
        name = getattr(getattr(func, "overloadpacket", None), "__name__", None)
        if name is not None:
            self.seen.setdefault(f"torch:{getattr(func, 'namespace', 'aten')}.{name}", None)
    return func(*args, **kwargs) if kwargs else func(*args)


# Set after the class is made: TorchDispatchMode wraps a __torch_dispatch__ defined in the class body so that
# torch._dynamo leaves it alone, and that wrapper imports torch._dynamo and sympy at the first operator (1.5 s
# a kernel); this one is never compiled.
_WatchOperators.__torch_dispatch__ = _note_operator


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
    thread, torch functions that a builtin calls (map(torch._softmax, ...)). With `operators`, a
    TorchDispatchMode notes, in this thread, every operator that reaches the dispatcher by its name
    ("torch:aten._softmax"), however it was reached (torch.ops.aten._softmax called directly, a library
    call inside TorchScript): a check's `flag_library` names (judging.core.library_calls) match those
    too, as evidence.

    What cannot be watched is reported, as calls named "thread:...": on Python 3.11 a thread that
    was already running (one the answer could hand its work to), unless it is the kernel's own
    (OWN_THREADS); a thread started during the call other than through threading.Thread; and the
    profile function switched off by the call. A person reads them: the kernel could lie anyway.
    """

    def __init__(self, operators=False):
        self.watch_operators = operators

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
        self.operators = _WatchOperators(self.functions) if self.watch_operators else None
        if self.operators is not None:
            self.operators.__enter__()
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
        if self.operators is not None:
            self.operators.__exit__(None, None, None)
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


def call_student(fn, case, operators=False):
    """Call `fn` on the case, here, and return the Reply (the student's own exception included).
    operators: also name each operator that reaches PyTorch's dispatcher (about 10 µs an operator, so
    only for the checks whose judge reads them: Check.operators)."""
    reply = Reply()
    # NumPy's warnings (an overflow in exp, a division by zero) are recorded, not printed: the check's one
    # sentence says what went wrong, and lines above it would bury it. The cell's np.errstate still decides
    # whether NumPy warns or raises.
    with _Record(operators) as record, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
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
# The check a test cell calls


@dataclass(eq=False)
class Check:
    """One exercise's check as a notebook's test cell calls it; what the kernel needs of it, no more.

    name: "check_softmax", what the notebook calls and the judge is told.
    doc: what the check holds the function to (shown by help()).
    arg_names: the function's positional parameters, for messages ("q", "k", "v").
    device: True when the check takes a device (check_x(fn, device="cuda")): its cases are made there.
    driver: for an exercise whose argument cannot travel as plain data (a class, a model):
        driver(obj) -> a function of the cases' plain arguments that builds what the exercise
        needs (an nn.Linear, a model), exercises `obj` on it and returns plain data (what it
        computed, and each stage's exception as text, so that one crash still lets the other
        stages be judged). It runs in the student's kernel: the recorded calls (seals), the time
        limit and the inputs' mutation check cover everything `obj` runs, and the judge sees only
        the report.

    What the check compares with and how it names mistakes is its Spec, in plmcourse.judging
    (one module per topic, under the same stem as the declaration's module).
    """

    name: str
    doc: str
    arg_names: tuple
    device: bool = False
    driver: object = None
    operators: bool = False  # the kernel names the operators each call dispatches (its judge's flag_library reads them)

    def __post_init__(self):
        self.__doc__ = self.doc

    def __call__(self, fn, hidden=False, device=None):
        connection = _judge_connection()
        if connection is not None:
            return serve(connection, self.name, self.driver(fn) if self.driver is not None else fn, hidden)
        try:
            from plmcourse import judging
        except ImportError:  # the grading sandbox, which holds no judge, and no connection to one
            raise CheckFailed(f"{self.name} runs in the judge while grading, and this kernel has no "
                              f"connection to it") from None
        return judging.spec(self.name)(fn, hidden=hidden, device=device)

    def __repr__(self):
        return f"<{self.name}: {self.doc.splitlines()[0]}>"


# ----------------------------------------------------------------------------
# The kernel's side of grading: answer the judge's calls


_CONNECTION = []  # the judge's socket, once opened
# One message at a time on it: the policy (plmcourse.grading.policy) tells the judge of a refusal from
# whatever thread the student's code ran it in.
SEND_LOCK = threading.Lock()


def _judge_connection():
    """The socket to the judge in a grading kernel, else None."""
    if not _CONNECTION:
        fd = os.environ.get("PLMCOURSE_JUDGE_FD")
        _CONNECTION.append(socket.socket(fileno=int(fd)) if fd and fd.isdigit() else None)
    return _CONNECTION[0]


def serve(connection, name, fn, hidden):
    """Tell the judge that `name` runs, answer its calls with `fn`, and show its verdict."""
    with SEND_LOCK:
        wire.send(connection, {"check": name, "hidden": bool(hidden)})
    operators = _declaration(name).operators
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
        reply = _call_with_limit(fn, case, CALL_SECONDS, operators)
        if reply.error is not None:
            errors.append(reply.error)
        with SEND_LOCK:
            wire.send(connection, _reply_document(reply))


# A driver's keyword for a case about a ValueError the spec asks for; never passed on to the answer.
EXPECT_ERROR = "expect_value_error"


def raised_or_returned(fn, args, kwargs, describe_value=lambda value: value):
    """In the kernel: call the answer on a case that expects ValueError and report, as plain data,
    what it raised ({"raised": "ValueError", "message": ...}; a subclass counts as ValueError) or
    what it returned ({"returned": describe_value(value)}). A driver's helper."""
    try:
        value = fn(*args, **kwargs)
    except Exception as error:  # the answer's own exception: what the case is about
        name = "ValueError" if isinstance(error, ValueError) else type(error).__name__
        return {"raised": name, "message": " ".join(str(error).split())[:160]}
    return {"returned": describe_value(value)}


def expect_error_driver(fn, describe_value=lambda value: value):
    """A driver (Check.driver) for an exercise whose spec asks for ValueError on some inputs: a case
    that expects it reports what the answer raised or returned, as plain data (raised_or_returned);
    every other case calls the answer as it is (its exceptions are the check's to name)."""
    def drive(*args, **kwargs):
        if not kwargs.pop(EXPECT_ERROR, False):
            return fn(*args, **kwargs)
        return raised_or_returned(fn, args, kwargs, describe_value)
    return drive


# When graded, one call of the student's function may take this long (half of nbgrader's
# limit for a whole cell, PLMCOURSE_CELL_SECONDS): the cases are small, and an endless loop
# must cost its own exercise only, not the cells after it.
CALL_SECONDS = max(1.0, int(os.environ.get("PLMCOURSE_CELL_SECONDS", "60")) / 2)


# The name of the thread a student's call runs in (a check gives up on it past its time limit; it may run on).
STUDENT_THREAD = "student function"


def _declaration(name):
    """The Check a test cell calls as `name`."""
    from plmcourse import grading

    return getattr(grading, name)


def _call_with_limit(fn, case, seconds, operators=False):
    """call_student in a thread, given up after `seconds`: a loop that swallows interrupts
    (`except BaseException: pass`) cannot hold the test cell, and with it the notebook.

    The thread runs in a copy of the caller's context, so a cell's `with np.errstate(...)` around
    the check holds for the student's function too, as it does where the check runs in-process."""
    box = {}
    context = contextvars.copy_context()

    def call():
        try:
            box["reply"] = call_student(fn, case, operators)
        except BaseException as error:  # SystemExit, KeyboardInterrupt raised by the student's code
            box["reply"] = Reply(error=error)

    def target():  # the thread's own function stays the course's, so the recorder knows it
        context.run(call)

    thread = threading.Thread(target=target, daemon=True, name=STUDENT_THREAD)
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
