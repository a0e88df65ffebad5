"""The machinery that every check of the course shares.

A check runs a student's function on small seeded cases and compares what comes
back with the reference. At the first wrong answer it raises `CheckFailed` with
one sentence: which case, what was expected, what came back and, when the wrong
answer matches a known mistake, what that mistake probably is.

Three guards keep a verdict honest:

* Sealing. While the student's function runs, the course's reference for it and
  the library shortcut being taught are watched: calling any of them, under any
  name (`from plmcourse.ref import softmax as sm` included), fails the check.
  Python functions are recognised by their code object (`sys.setprofile`), torch
  functions at dispatch (`TorchFunctionMode`); neither depends on a name.
* Pristine modules. A notebook can reassign `np.allclose`, `builtins.abs` or
  `plmcourse.ref.softmax`. Everything a check does besides calling the student's
  function runs under `pristine()`, which puts back, for that moment, what those
  modules held when the checks were imported; the notebook's own assignments
  return when the check ends.
* Comparisons use NumPy ufuncs captured below and ndarray operators, which are
  written in C and cannot be replaced from Python.
"""

import builtins
import functools
import math
import os
import sys
import textwrap
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import numpy.linalg
import numpy.random
import torch
import torch.autograd
import torch.linalg
import torch.nn
import torch.nn.functional
from torch.overrides import TorchFunctionMode

__all__ = [
    "CheckFailed",
    "Case",
    "run_check",
    "pristine",
    "protect",
    "protect_course_references",
    "F64",
    "F32",
    "to_numpy",
    "describe",
    "expect_array",
    "expect_pair",
    "compare",
    "close",
    "first_match",
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


# ----------------------------------------------------------------------------
# Captured at import: the pieces a verdict rests on.

_absolute = np.absolute
_subtract = np.subtract
_isnan = np.isnan
_isfinite = np.isfinite
_equal = np.equal
_where = np.where
_all_of = np.logical_and.reduce  # _all_of(a, axis=None): is every entry True?
_largest = np.maximum.reduce
_unravel_index = np.unravel_index
_ndarray = np.ndarray
_Tensor = torch.Tensor
# torch.Tensor is a Python class whose methods a notebook could replace; these are
# the C implementations, taken before any notebook code ran.
_detach = torch.Tensor.detach
_cpu = torch.Tensor.cpu
_clone = torch.Tensor.clone
_tensor_numpy = torch.Tensor.numpy
_getprofile = sys.getprofile
_setprofile = sys.setprofile


# ----------------------------------------------------------------------------
# Pristine modules

_MISSING = object()
_ORIGINALS = []  # (a module's __dict__, a copy of it taken when it was protected)


_PROTECTED = set()  # ids of the module dicts already remembered


def protect(*modules):
    """Remember what `modules` hold now, so that `pristine()` can put it back (once per module)."""
    for module in modules:
        if id(module.__dict__) not in _PROTECTED:
            _PROTECTED.add(id(module.__dict__))
            _ORIGINALS.append((module.__dict__, dict(module.__dict__)))


def protect_course_references():
    """Protect every loaded plmcourse.ref and plmcourse.nn module, as NumPy and torch are:
    a notebook that reassigns, say, `plmcourse.ref.softmax` changes nothing in what a check expects.
    Each check module calls this after importing the references it compares with."""
    protect(*[module for name, module in list(sys.modules.items())
              if name.startswith(("plmcourse.ref", "plmcourse.nn")) and module is not None])


# float64 answers agree to ~1e-15 however they are computed (loops, einsum, GPU);
# float32 ones to ~1e-6. Every mistake we know of is off by far more than either.
F64 = {"atol": 1e-9, "rtol": 1e-7}
F32 = {"atol": 2e-5, "rtol": 2e-4}


_LIBRARIES = (builtins, math, np, numpy.linalg, numpy.random,
              torch, torch.nn, torch.nn.functional, torch.linalg, torch.autograd)
protect(*_LIBRARIES)


# ----------------------------------------------------------------------------
# Was anything replaced before the checks were imported?
#
# pristine() can only put back what it saw at import. If a notebook replaced, say,
# np.allclose before its first test cell imported the checks, the "original" is the fake;
# the checks then refuse to give a verdict (the verifier, which imports the checks before
# any student code, still gives one).

_LIBRARY_ROOTS = tuple(sorted({os.path.realpath(p) for p in (
    sys.prefix, sys.base_prefix, os.path.dirname(os.__file__),
    os.path.dirname(os.path.dirname(np.__file__)), os.path.dirname(os.path.dirname(torch.__file__)))}))


def _planted(obj):
    """True for a callable that a notebook put into a library: defined in a cell, not a library file."""
    if isinstance(obj, functools.partial):
        return True
    code = getattr(obj, "__code__", None)
    if code is not None:
        # Notebook cells compile to "<ipython-input-...>" or an absolute temporary file;
        # library code lives under the roots (Cython functions carry relative .pyx paths).
        filename = code.co_filename
        if filename.startswith("<ipython-input"):
            return True
        return os.path.isabs(filename) and not os.path.realpath(filename).startswith(_LIBRARY_ROOTS)
    kind = obj if isinstance(obj, type) else type(obj)
    return getattr(kind, "__module__", None) == "__main__"


def _tampered():
    found = [f"{module.__name__}.{name}" for module in _LIBRARIES
             for name, obj in list(vars(module).items()) if callable(obj) and _planted(obj)]
    # The C functions the comparisons rest on must be the ones their names say.
    for name, ufunc in (("absolute", _absolute), ("subtract", _subtract), ("isnan", _isnan),
                        ("isfinite", _isfinite), ("equal", _equal)):
        if not isinstance(ufunc, np.ufunc) or ufunc.__name__ != name:
            found.append(f"numpy.{name}")
    return found


TAMPERED = _tampered()

# torch imports these (and sympy with them) lazily, the first time a TorchFunctionMode sees
# certain calls; sympy's import-time code breaks under a replaced builtins.all. Import them
# now, while the builtins are (if TAMPERED is empty) the genuine ones.
try:
    import torch.fx.experimental.symbolic_shapes  # noqa: E402,F401
except Exception:  # only when builtins were already replaced; TAMPERED says so
    pass


def _undo_reassignments():
    """Put every protected name back; return what was there, for `_redo`."""
    changed = []
    for namespace, original in _ORIGINALS:
        for name, value in original.items():
            now = namespace.get(name, _MISSING)
            if now is not value:
                changed.append((namespace, name, now))
                namespace[name] = value
    return changed


def _redo(changed):
    for namespace, name, value in reversed(changed):
        if value is _MISSING:
            del namespace[name]
        else:
            namespace[name] = value


class _Pristine:
    """Context: the protected modules as they were at import; `.student()` lends them back."""

    def __enter__(self):
        self.changed = _undo_reassignments()
        return self

    def __exit__(self, *exc_info):
        _redo(self.changed)

    @contextmanager
    def student(self):
        """The notebook's own versions, while the student's function runs."""
        _redo(self.changed)
        try:
            yield
        finally:
            self.changed = _undo_reassignments()


def pristine():
    return _Pristine()


# ----------------------------------------------------------------------------
# Sealing


class _WatchTorch(TorchFunctionMode):
    """Notes every call of a sealed torch function, whatever name it was called by."""

    def __init__(self, sealed, calls):
        super().__init__()
        self.sealed = sealed  # torch function -> label
        self.calls = calls

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            label = self.sealed.get(func)
        except TypeError:  # an unhashable callable cannot be a sealed one
            label = None
        if label is not None:
            self.calls.append(label)
        return func(*args, **(kwargs or {}))


def _seal_tables(seal):
    """Split (object, label) pairs into code objects to watch and torch functions to watch.

    A class is sealed through its forward method (an nn.Module is used by calling it).
    """
    codes, torch_functions = {}, {}
    for obj, label in seal:
        if obj is None:
            continue
        target = obj.forward if isinstance(obj, type) else obj
        code = getattr(target, "__code__", None)
        if code is not None:
            codes[code] = label
        torch_functions[target] = label
    return codes, torch_functions


@contextmanager
def _sealed(seal, calls):
    """Record in `calls` the label of every sealed function called inside the block.

    Recording instead of raising: a try/except in the student's code cannot hide it.
    """
    codes, torch_functions = _seal_tables(seal)

    def profile(frame, event, arg):
        if event == "call":
            label = codes.get(frame.f_code)
            if label is not None:
                calls.append(label)

    previous = _getprofile()
    _setprofile(profile)
    try:
        with _WatchTorch(torch_functions, calls):
            yield
    finally:
        _setprofile(previous)


# ----------------------------------------------------------------------------
# Running a check


@dataclass
class Case:
    """One input for the student's function.

    label: how messages name it, e.g. "seed 3: x of shape (4, 6), axis=0".
    args, kwargs: what the student's function is called with.
    tags: what is special about it, e.g. {"large logits"}, for the judge's hints.
    data: anything else the check needs (NumPy copies of torch inputs, a seed).
    """

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    tags: frozenset = frozenset()
    data: dict = field(default_factory=dict)


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


def run_check(name, fn, cases, *, arg_names, reference, judge, seal=(), explain_error=None):
    """Run `fn` on every case; raise CheckFailed at the first wrong answer, else print one line.

    arg_names: the names of the positional parameters, for messages ("q", "k", "v").
    reference(case) -> expected: computed before `fn` runs, never while it is sealed.
    judge(case, got, expected) -> None if `got` is right, else a phrase saying what is wrong;
        it is not called when `fn` raised, called a sealed function, changed its inputs or
        returned None (each of these fails the case with its own message).
    seal: (object, label) pairs `fn` must not call, e.g. (ref.softmax, "plmcourse.ref.softmax").
    explain_error(exception) -> an extra hint for an exception raised by `fn`, or None.
    """
    if TAMPERED:
        more = f" and {len(TAMPERED) - 1} more" if len(TAMPERED) > 1 else ""
        raise CheckFailed(_one_sentence(
            f"{name} cannot give a verdict in this kernel: the notebook replaced {TAMPERED[0]}{more} "
            f"before the checks were loaded; remove that code, restart the kernel and run all cells"))
    with pristine() as env:
        for number, case in enumerate(cases, 1):
            expected = reference(case)
            inputs = _named_inputs(case, arg_names)
            before = [(arg, _copy(value)) for arg, value in inputs]
            calls, error, got = [], None, None
            with _sealed(seal, calls), env.student():
                try:
                    got = fn(*case.args, **case.kwargs)
                except Exception as exc:  # the student's bug, reported below
                    error = exc
            problem = (_delegation(calls) or _crash(error, explain_error)
                       or _mutation(inputs, before) or _returned_none(got))
            if problem is None:
                try:
                    problem = judge(case, got, expected)
                except Exception as exc:  # an answer too odd for the judge to read
                    problem = f"the check could not read what your function returned, {describe(got)}"
                    error = exc
            if problem is not None:
                where = f"{name} failed on case {number} of {len(cases)} ({case.label})"
                raise CheckFailed(_one_sentence(f"{where}: {problem}")) from error
        print(f"{name}: {len(cases)} cases passed.")


def _returned_none(got):
    # No function in the course returns None on purpose: this is a forgotten `return`.
    return "your function returned None (is a `return` missing?)" if got is None else None


def _one_sentence(text):
    text = " ".join(text.split())  # no newlines, single spaces
    return text.rstrip(".") + "."


def _delegation(calls):
    if calls:
        return f"your function calls {calls[0]}; write it yourself"
    return None


def _crash(error, explain_error):
    if error is None:
        return None
    if isinstance(error, NotImplementedError):
        return ("your function raised NotImplementedError; replace the "
                "`raise NotImplementedError()` line with your code")
    text = " ".join(str(error).split())
    if len(text) > 160:
        text = text[:157] + "..."
    problem = f"your function raised {type(error).__name__}: {text}" if text else \
        f"your function raised {type(error).__name__}"
    hint = explain_error(error) if explain_error else None
    return f"{problem} ({hint})" if hint else problem


def _named_inputs(case, arg_names):
    """(name, value) for every array or tensor the student's function receives."""
    named = list(zip(arg_names, case.args)) + list(case.kwargs.items())
    return [(name, value) for name, value in named if isinstance(value, (_ndarray, _Tensor))]


def _copy(value):
    return _clone(_detach(value)) if isinstance(value, _Tensor) else value.copy()


def _mutation(inputs, before):
    for (name, value), (_, copy) in zip(inputs, before):
        if not _same(value, copy):
            return (f"your function changed its input {name} in place; work on a new array "
                    f"(write x = x - m, not x -= m)")
    return None


def _same(a, b):
    a, b = to_numpy(a), to_numpy(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    both_nan = _isnan(a) & _isnan(b) if a.dtype.kind in "fc" else False
    return bool(_all_of(_equal(a, b) | both_nan, axis=None))


# ----------------------------------------------------------------------------
# Judging: small pieces the checks' judges are made of


def to_numpy(x):
    """A NumPy copy of an array or tensor (any device), through methods captured at import."""
    if isinstance(x, _Tensor):
        return _tensor_numpy(_cpu(_detach(x))).copy()
    return x


def describe(x):
    """'None', 'a list', 'a tuple of 3 items', 'a torch.Tensor', 'a NumPy array', 'a float'..."""
    if x is None:
        return "None"
    if isinstance(x, _Tensor):
        return "a torch.Tensor"
    if isinstance(x, _ndarray):
        return "a NumPy array"
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of {len(x)} item" + ("" if len(x) == 1 else "s")
    return f"a {type(x).__name__}"


def expect_array(got, what, kind="numpy"):
    """None if `got` is a NumPy array (kind="numpy") or a torch tensor (kind="torch"), else the problem."""
    wanted = _ndarray if kind == "numpy" else _Tensor
    if isinstance(got, wanted):
        return None
    if got is None:
        return f"{what} is None"
    if kind == "numpy":
        return f"{what} is {describe(got)}, expected a NumPy array (np.ndarray)"
    if isinstance(got, _ndarray):
        return (f"{what} is a NumPy array, expected a torch.Tensor; gradients do not flow "
                f"through NumPy, so keep the computation in torch")
    return f"{what} is {describe(got)}, expected a torch.Tensor"


def expect_pair(got, names="(output, weights)"):
    """None if `got` is a tuple or list of two items, else the problem."""
    if isinstance(got, (tuple, list)) and len(got) == 2:
        return None
    return f"your function returned {describe(got)}, expected the pair {names}"


def close(got, expected, atol, rtol):
    """True if the arrays have the same shape and |got - expected| <= atol + rtol * |expected| everywhere."""
    got = to_numpy(got)
    expected = to_numpy(expected)
    if got.shape != expected.shape:
        return False
    if got.dtype == np.bool_ or expected.dtype == np.bool_:
        return got.dtype == expected.dtype and bool(_all_of(_equal(got, expected), axis=None))
    got = got.astype(np.float64)
    expected = expected.astype(np.float64)
    # NaN compares False, so a NaN anywhere fails the test below; equal infinities
    # (e.g. -inf from a log-softmax of a masked entry) match, although inf - inf is NaN.
    with np.errstate(invalid="ignore"):
        within = _equal(got, expected) | (_absolute(_subtract(got, expected)) <= atol + rtol * _absolute(expected))
    return bool(_all_of(within, axis=None))


def _index(flat, shape):
    return "[" + ", ".join(str(int(i)) for i in _unravel_index(flat, shape)) + "]"


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
    if problem is None:
        return None
    mistake = first_match((got,), mistakes, atol=0, rtol=0)
    return f"{problem}; it matches {mistake}" if mistake else problem


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
    if not bool(_all_of(_isfinite(got), axis=None)):
        bad = (~_isfinite(got)).argmax()
        return f"{what} contains {got.flat[bad]} (first at {_index(bad, got.shape)})"
    diff = _absolute(_subtract(got, expected))
    worst = diff.argmax()
    want, have = _distinct(expected.flat[worst], got.flat[worst])
    problem = (f"{what} differs from the expected by up to {float(_largest(diff, axis=None)):.3g} "
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


def _close_but_nan(got, expected, atol, rtol):
    """close(), skipping the entries where `got` is NaN, as long as they are under half.

    A student's version of a mistake often gives NaN where our version of it gives
    a number: a query left with no allowed key (an inverted mask) is NaN in theirs.
    """
    got, expected = to_numpy(got), to_numpy(expected)
    if got.shape != expected.shape or got.dtype.kind != "f":
        return close(got, expected, atol, rtol)
    nan = _isnan(got)
    if 2 * np.count_nonzero(nan) > got.size:
        return False
    return close(_where(nan, expected, got), expected, atol, rtol)
