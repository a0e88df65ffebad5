"""Evidence the kernel cannot edit: what a submission's own source says, read in the grader.

The judge decides every check from the kernel's answers, and the kernel's report of what an
answer called is the student's word: it can add evidence, never clear it. This module adds
evidence the student cannot edit after the fact, because it is read off the submitted
notebook's text by the grader, without running any of it:

* **library implementations of the graded thing**: an answer (or a helper cell it reads) that
  reaches `softmax` through any module (`torch.softmax`, `x.softmax`, `scipy.special.softmax`,
  `torch._softmax`, `from torch.nn.functional import softmax`, `getattr(torch, "softmax")`),
  whatever the exercise itself forbids; the names come from each check's seal and its
  `flag_library`, and the graded function's own name;
* **names built at run time**: `getattr(m, "soft" + "max")`, `importlib.import_module(name)`,
  `__import__`, `eval`, `exec`, `compile`: no answer to these exercises needs them, and they
  hide what is called from any reading of the text;
* **things no solution needs** (SUSPICIOUS): IPython's shell, frames, `sys.modules`, the
  checks, the gradebook...;
* **closeness to the course's own code** (the notebook's solution and the `plmcourse.ref` /
  `nn` / `data` version) and **to classmates' answers**, measured on fingerprints of the
  normalised token stream (`fingerprints`: winnowing, as MOSS does), so renaming variables,
  reordering statements, inlining a helper or adding dead code leaves most of them in place.

Every submission is read in a child process (`analyse_submission`) with limits on time,
memory and size: the text is hostile, and a cell nested 100,000 deep or 10 MB long must cost
that student a flag ("could not be analysed"), never the class its grades or its flags.
Everything a submission supplies that reaches a report is cut to one printable line
(`one_line`).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import io
import json
import keyword
import os
import re
import resource
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

# ----------------------------------------------------------------------------
# Flags


MAX_EVIDENCE = 300


@dataclass
class Flag:
    """One thing a person should look at: whose, which exercise, what, and where it was found.

    exercise: the grade_id of the answer cell ("softmax"), or "" for the notebook as a whole.
    source: "kernel" (the kernel's own report: the student's word), "sandbox" (the launcher stopped the
    kernel at a resource cap: the grader's word), "answer" (an answer's
    source), "cell" (another cell), "course" (close to the course's code), "classmates"
    (close to another student's answer), "collect" (what the files themselves showed).
    similarity: for "course" and "classmates", the share of fingerprints in common (0 to 1).
    """

    student: str
    notebook: str
    exercise: str
    evidence: str
    source: str
    similarity: float | None = None

    def __post_init__(self):
        self.evidence = one_line(self.evidence)

    def line(self) -> str:
        """As the grading report prints it."""
        where = f"{self.exercise}: " if self.exercise else ""
        return f"{self.student}: flagged for review, {where}{self.evidence}"


# Control and layout characters, and lone surrogates (a file name's undecodable bytes, os.fsdecode).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ud800-\udfff\ufeff\ufff0-\uffff]")


def one_line(text, limit: int = MAX_EVIDENCE) -> str:
    """`text` as one inert line: control and layout characters shown as \\xNN escapes (so an ANSI
    sequence, a line break or a right-to-left override prints as what it is), runs of spaces
    collapsed, and cut to `limit` characters."""
    text = str(text)[: limit * 4].replace("\t", " ")
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256
                        else f"\\u{ord(m.group()):04x}", text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------
# Fingerprints of a token stream (winnowing)


K_GRAM = 5          # tokens per hashed window of text: shorter than any telling phrase of code
WINDOW = 4          # one fingerprint is kept in every WINDOW consecutive k-grams (the smallest)
MAX_SOURCE = 200_000  # characters of one answer read; beyond this the answer is itself a flag
MAX_TOKENS = 50_000


def normalised_tokens(source: str) -> list[str]:
    """The source's tokens with what a copier changes for free taken out.

    Local names become "V" (renaming changes nothing), strings "S", comments and blank lines
    go; keywords, operators, numbers, builtins and attribute names (`.reshape`, `np.exp`'s
    `exp`) stay, since they are what a computation is made of.
    """
    out, after_dot = [], False
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source[:MAX_SOURCE]).readline):
            if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
                            tokenize.ENCODING, tokenize.ENDMARKER):
                continue
            if tok.type == tokenize.NEWLINE:
                text = ";"
            elif tok.type == tokenize.STRING:
                text = "S"
            elif tok.type == tokenize.NAME:
                keep = after_dot or keyword.iskeyword(tok.string) or tok.string in _BUILTINS
                text = tok.string if keep else "V"
            else:
                text = tok.string
            after_dot = tok.string == "."
            out.append(text)
            if len(out) >= MAX_TOKENS:
                break
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # what was read up to the error still counts
    return out


_BUILTINS = frozenset(dir(builtins))


def fingerprints(source: str) -> set[int]:
    """Winnowing (Schleimer, Wilkerson and Aiken 2003): hash every K_GRAM consecutive tokens and
    keep the smallest hash of each WINDOW consecutive ones. Two texts that share a run of
    K_GRAM + WINDOW - 1 tokens share at least one fingerprint, whatever surrounds it."""
    tokens = normalised_tokens(source)
    hashes = [int.from_bytes(hashlib.blake2b(" ".join(tokens[i:i + K_GRAM]).encode(), digest_size=6).digest(),
                             "big") for i in range(max(0, len(tokens) - K_GRAM + 1))]
    kept = set()
    for start in range(max(1, len(hashes) - WINDOW + 1)):
        window = hashes[start:start + WINDOW]
        if window:
            kept.add(min(window))
    return kept


def containment(part: set, whole: set) -> float:
    """The share of `whole`'s fingerprints that `part` has too (0 when `whole` has none)."""
    return len(part & whole) / len(whole) if whole else 0.0


# Below this many fingerprints a piece of code is too short to say anything: a causal mask is one
# np.tril, and every student writes it the same way.
MIN_FINGERPRINTS = 30
SHORT_FINGERPRINTS = 15  # from here to MIN_FINGERPRINTS, only a copy all but word for word (RETYPED) is flagged
RETYPED = 0.95
COURSE_SIMILAR = 0.8     # this share of the course's code's fingerprints in an answer: flagged
CLASSMATES_SIMILAR = 0.9  # of the smaller answer's fingerprints, between two students


# ----------------------------------------------------------------------------
# Reading an answer's source (in the child process)


DYNAMIC = {"getattr": "getattr with a computed name", "__import__": "__import__",
           "import_module": "importlib.import_module with a computed name", "eval": "eval", "exec": "exec",
           "compile": "compile", "attrgetter": "operator.attrgetter with a computed name",
           "methodcaller": "operator.methodcaller with a computed name"}
MAX_NODES = 200_000

# Things a solution to these exercises never needs (read in every cell a student wrote).
SUSPICIOUS = {
    "get_ipython": "talks to the IPython shell",
    "set_custom_exc": "replaces IPython's error handling",
    "__code__": "rewrites function code",
    "sys.modules": "edits the module table",
    "plmcourse.grading": "touches the course's checks",
    "plmcourse.judging": "touches the course's judge",
    "builtins": "touches Python's builtins",
    "setprofile": "installs a profiler hook",
    "settrace": "installs a trace hook",
    "ctypes": "uses ctypes",
    "os._exit": "ends the process",
    "_getframe": "inspects interpreter frames",
    "currentframe": "inspects interpreter frames",
    "f_back": "inspects interpreter frames",
    "gc.get_": "walks the garbage collector's objects",
    "allclose =": "replaces a comparison function",
    "isclose =": "replaces a comparison function",
    "gradebook": "mentions the gradebook",
    "source/": "mentions the instructors' source folder",
    "PLMCOURSE_JUDGE": "talks to the grader's connection",
    "site-packages": "names an installation's site-packages folder",
    "sys.path": "changes where Python finds modules",
}


def _dotted(node, limit=6) -> str:
    """`torch.nn.functional.softmax` for an attribute chain (`?` for what is not a plain name)."""
    parts = []
    while isinstance(node, ast.Attribute) and len(parts) < limit:
        parts.append(node.attr)
        node = node.value
    parts.append(node.id if isinstance(node, ast.Name) else "?")
    return ".".join(reversed(parts))


def _library_name(name: str, names: frozenset, prefixes: tuple) -> bool:
    bare = name.lstrip("_")
    return bare in names or name in names or (bool(prefixes) and name.startswith(prefixes))


@dataclass(frozen=True)
class Library:
    """The library implementations of one exercise's graded thing, as names an answer may reach.

    sealed: what the exercise forbids (the last part of each name in its check's seal, and the
    graded function's own name): reached in an answer's source, the exercise scores 0, as when
    the kernel reports the call. names and prefixes: those, and the check's `flag_library`
    (private torch names such as "_softmax"): reached, a flag. own: method names the student's
    own classes define (`obj.softmax()` on the student's object is not a library's).
    """

    sealed: frozenset = frozenset()
    names: frozenset = frozenset()
    prefixes: tuple = ()
    own: frozenset = frozenset()

    def reached(self, name: str) -> bool:
        return name not in self.own and _library_name(name, self.names | self.sealed, self.prefixes)

    def forbidden(self, name: str) -> bool:
        return name not in self.own and name in self.sealed  # a private name (_softmax) is a flag


def findings(source: str, library: Library = Library()) -> list[tuple[str, bool]]:
    """What the text of one cell shows: (phrase, whether it is a sealed name), each at most once.

    The tree is walked without recursion and with a budget of nodes, so no text can exhaust
    the stack; a text too long or too deep to read is itself a finding.
    """
    if len(source) > MAX_SOURCE:
        return [(f"a cell of {len(source) // 1000} kB, too long to read (only {MAX_SOURCE // 1000} kB are)", False)]
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # it does not run in the kernel either
    except (RecursionError, MemoryError, ValueError):
        return [("code nested too deeply to read (no solution needs that)", False)]
    found = []
    stack, seen = [tree], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            found.append((f"a cell of more than {MAX_NODES} syntax nodes, read only in part", False))
            break
        stack.extend(ast.iter_child_nodes(node))
        finding = _finding(node, library)
        if finding and finding not in found:
            found.append(finding)
    return found


def read_source(source: str, names: frozenset = frozenset(), prefixes: tuple = ()) -> list[str]:
    """The phrases of `findings`, for the library `names` and `prefixes`."""
    return [phrase for phrase, _ in findings(source, Library(names=frozenset(names), prefixes=tuple(prefixes)))]


def _finding(node, library: Library) -> tuple[str, bool] | None:
    if (isinstance(node, ast.Attribute) and library.reached(node.attr)
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")):
        return (f"reaches a library {node.attr.lstrip('_')} ({one_line(_dotted(node), 80)})",
                library.forbidden(node.attr))
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        for alias in node.names:
            if library.reached(alias.name):
                return f"imports {alias.name} from {one_line(module, 80)}", library.forbidden(alias.name)
        if module.startswith(("plmcourse.ref", "plmcourse.nn", "plmcourse.data")):
            return f"imports from the course's own implementations ({one_line(module, 80)})", False
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.startswith(("plmcourse.ref", "plmcourse.nn", "plmcourse.data")):
                return f"imports the course's own implementations ({one_line(alias.name, 80)})", False
    lookup = _namespace_lookup(node)
    if lookup is not None:  # vars(m)[name], m.__dict__.get(name), globals()[name]: a getattr by another name
        how, key = lookup
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            last = key.value.rsplit(".", 1)[-1]
            return ((f"reaches a library {last.lstrip('_')} by name ({how})", library.forbidden(last))
                    if library.reached(last) else None)
        return f"builds what it calls at run time (a lookup in {how} by a computed name)", False
    if isinstance(node, ast.Call):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if called in ("__getattribute__", "__getattr__"):
            called = "getattr"  # obj.__getattribute__(name) is getattr(obj, name)
            node = ast.Call(func=func, args=[func.value, *node.args], keywords=[])
        if called in DYNAMIC:
            text_args = [a for a in node.args[1:2] if called == "getattr"] or node.args[:1]
            constant = [a.value for a in text_args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if called in ("getattr", "import_module", "attrgetter", "methodcaller") and constant and len(constant) == len(text_args):
                last = constant[0].rsplit(".", 1)[-1]
                if library.reached(last):
                    return f"reaches a library {last.lstrip('_')} by name ({called})", library.forbidden(last)
                return None
            return f"builds what it calls at run time ({DYNAMIC[called]})", False
    return None


NAMESPACES = {"vars": "vars()", "globals": "globals()", "locals": "locals()"}


def _namespace_lookup(node):
    """(how, key) for a lookup by key in a namespace (vars(m)[k], m.__dict__[k], globals().get(k)...), else None."""
    if isinstance(node, ast.Subscript):
        table, key = node.value, node.slice
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "__getitem__")
          and node.args):
        table, key = node.func.value, node.args[0]
    else:
        return None
    if isinstance(table, ast.Attribute) and table.attr == "__dict__":
        return "__dict__", key
    if isinstance(table, ast.Call) and isinstance(table.func, ast.Name) and table.func.id in NAMESPACES:
        return NAMESPACES[table.func.id], key
    return None


def suspicious_text(source: str) -> list[str]:
    """The SUSPICIOUS phrases whose needle is in `source`'s code. Comments and docstrings are prose
    and are not read (a docstring that mentions sys.modules is not a use of it); every other string
    is a value the code can use, a path to open or a module to import, and is read."""
    code = code_only(source)
    return [why for needle, why in SUSPICIOUS.items() if needle in code]


def code_only(source: str) -> str:
    """`source` with its comments and docstrings (a string that is a whole statement) blanked, lines
    and columns kept; the text as it is when it cannot be read (a cell that does not parse does not
    run, and one too deep to parse hides nothing from this plain reading)."""
    source = source.replace("\r\n", "\n").replace("\r", "\n")  # the line ends Python's parser knows
    lines = io.StringIO(source).readlines()  # split at "\n" only: a form feed is no line end to Python
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        tree = ast.parse(source)
    except (tokenize.TokenError, SyntaxError, IndentationError, RecursionError, MemoryError, ValueError):
        return source
    spans = [(t.start, t.end) for t in tokens if t.type == tokenize.COMMENT]
    for node in ast.walk(tree):  # iterative: no recursion on a deep tree
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            start = (node.lineno, _char_column(lines, node.lineno, node.col_offset))
            end = (node.end_lineno, _char_column(lines, node.end_lineno, node.end_col_offset))
            spans.append((start, end))
    for (row, col), (end_row, end_col) in spans:
        for r in range(row, end_row + 1):
            line = lines[r - 1]
            start = col if r == row else 0
            stop = end_col if r == end_row else len(line.rstrip("\n"))
            lines[r - 1] = line[:start] + " " * (stop - start) + line[stop:]
    return "".join(lines)


def _char_column(lines: list[str], row: int, byte_offset: int) -> int:
    """The character column of the AST's byte offset on line `row` (they differ after non-ASCII text)."""
    return len(lines[row - 1].encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


# ----------------------------------------------------------------------------
# One notebook (in the child process)


def _source(cell) -> str:
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _grade_id(cell):
    meta = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
    return nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None


def _bound_and_read(source: str) -> tuple[set, set]:
    """(the names the cell binds at its top level, the names it reads from elsewhere), read without
    recursion; empty if unreadable. A name a function binds for itself (a parameter, a local) is not read
    from elsewhere: an answer's `x` does not make a cell that sets a global `x` one of its helpers."""
    try:
        tree = ast.parse(source[:MAX_SOURCE])
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return set(), set()
    bound, local, loads = set(), set(), set()
    stack, seen = [(node, False) for node in tree.body], 0
    while stack and seen < MAX_NODES:
        node, in_function = stack.pop()
        seen += 1
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            (local if in_function else bound).add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            (local if in_function else bound).update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            local.add(node.arg)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loads.add(node.id)
            else:
                (local if in_function else bound).add(node.id)
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return bound, loads - local - bound


def analyse_notebook(cells: list, spec: dict) -> dict:
    """What the submitted `cells` show, for each exercise of `spec` (see `analysis_spec`).

    Returns {"flags": [[exercise, source, phrase]], "sealed": [[exercise, phrase]],
    "fingerprints": {exercise: [int]}}: "sealed" lists the answers that reach what their
    exercise forbids (Library.sealed), which score 0. An answer is its answer cell with the
    student's own cells it reads (a helper written in an earlier cell counts as part of the
    answer, for the library check and the fingerprints).
    """
    course_cells = set(spec["course_cells"])
    course_text = "\n".join(course_cells)
    exercises = spec["exercises"]
    code = [c for c in cells if isinstance(c, dict) and c.get("cell_type") == "code"]
    answers, own, origin = {}, [], {}
    for cell in code:
        source = _source(cell)
        grade_id = _grade_id(cell)
        if grade_id in exercises:
            answers[grade_id] = source
        elif source.strip() and source.strip() not in course_cells and grade_id not in spec["test_ids"]:
            mine = _student_part(source, course_text)  # a course cell the student added to: the additions
            if mine.strip():
                own.append(mine)
                origin[mine] = source
    for grade_id, exercise in exercises.items():  # an answer cell that lost its metadata: by its def
        if grade_id not in answers:
            defining = [s for s in own if re.search(rf"^def {re.escape(exercise['function'])}\(", s, re.M)]
            if defining:
                answers[grade_id] = defining[-1]
                own.remove(defining[-1])
    flags, sealed, prints = [], [], {}
    aliases = _course_aliases(_source(c) for c in code)
    names_of = {s: _bound_and_read(s) for s in own}
    methods = frozenset().union(*(_own_methods(s) for s in [*own, *answers.values()]))
    helpers_of_any = set()
    for grade_id, answer in answers.items():
        exercise = exercises[grade_id]
        library = Library(frozenset(exercise["sealed"]), frozenset(exercise["names"]), tuple(exercise["prefixes"]),
                          methods)
        helpers = _helpers(answer, own, names_of)
        helpers_of_any.update(helpers)
        for part, where in [(answer, ""), *[(h, "a helper cell ") for h in helpers]]:
            for phrase, forbidden in findings(part, library) + [(p, False) for p in suspicious_text(part)]:
                phrase = _whose(phrase, aliases)
                flags.append([grade_id, "answer", where + phrase])
                if forbidden:
                    sealed.append([grade_id, where + phrase])
        prints[grade_id] = sorted(fingerprints("\n".join([*helpers, answer])))
    # An answer that calls another answer's function inherits a seal that comes from the course's
    # own code, which the sandbox does not let it reach: attention built on a softmax that is
    # plmcourse.ref's is not the student's attention. A library function (torch.softmax) stays
    # the other exercise's business: the one that calls it is judged by its own seal.
    forbidden = {exercises[e]["function"]: (e, phrase) for e, phrase in sealed if _course_code(phrase, aliases)}
    for grade_id, answer in answers.items():
        _, reads = _bound_and_read(answer)
        for function in sorted(reads & set(forbidden)):
            source_exercise, phrase = forbidden[function]
            if source_exercise != grade_id and not any(e == grade_id for e, _ in sealed):
                inherited = f"calls {function}, whose answer {phrase}"
                sealed.append([grade_id, inherited])
                flags.append([grade_id, "answer", inherited])
    first = next(iter(exercises), "")
    for source in own:
        if source in helpers_of_any:
            continue
        phrases = suspicious_text(source) + [p for p, _ in findings(source)
                                             if p.startswith(("builds", "code nested", "a cell of"))]
        for phrase in phrases:
            flags.append([_exercise_before(origin.get(source, source), cells, exercises) or first, "cell",
                          f"a cell {phrase}"])
    unique = []
    for flag in flags:
        if flag not in unique:
            unique.append(flag)
    return {"flags": unique, "sealed": sealed, "fingerprints": prints}


def _course_code(phrase: str, aliases: set) -> bool:
    """Whether a finding names the course's own package: plmcourse, or a name the notebook bound
    to a part of it (`from plmcourse import ref`, `import plmcourse.nn as pnn`)."""
    reached = re.search(r"\(([\w.]+)\)$|from ([\w.]+)$", phrase)
    dotted = next((g for g in reached.groups() if g), "") if reached else ""
    return dotted.split(".")[0] in aliases | {"plmcourse"}


def _whose(phrase: str, aliases: set) -> str:
    """A finding that reaches the course's own package says so: `ref.softmax` is not "a library"."""
    if "reaches a library " in phrase and _course_code(phrase, aliases):
        return phrase.replace("reaches a library ", "reaches the course's own ", 1)
    return phrase


def _course_aliases(sources) -> set:
    """The names a notebook's imports bind to plmcourse or a part of it."""
    found = set()
    for source in sources:
        for line in source[:MAX_SOURCE].splitlines():
            module = re.match(r"\s*from\s+(plmcourse[\w.]*)\s+import\s+(.+)", line)
            if module:
                found |= {part.split(" as ")[-1].strip(" ()") for part in module.group(2).split(",")}
            for name, alias in re.findall(r"\bimport\s+(plmcourse[\w.]*)(?:\s+as\s+(\w+))?", line):
                found.add(alias or name.split(".")[0])
    return {name for name in found if name.isidentifier()}


def _student_part(source: str, course_text: str) -> str:
    """The cell's top-level statements that are not the course's own (a demo cell the student wrote
    a helper into keeps only the helper); the whole cell if it cannot be read."""
    try:
        tree = ast.parse(source[:MAX_SOURCE])
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return source
    parts = [ast.get_source_segment(source, node) or "" for node in tree.body]
    return "\n".join(part for part in parts if part.strip() and part.strip() not in course_text)


def _own_methods(source: str) -> set:
    """Names of the functions the cell defines inside its classes (`obj.softmax()` is then the student's)."""
    try:
        tree = ast.parse(source[:MAX_SOURCE])
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return set()
    return {item.name for node in tree.body if isinstance(node, ast.ClassDef)
            for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _helpers(answer: str, own: list, names_of: dict) -> list[str]:
    """The student's cells that bind a name the answer reads, and those they read in turn."""
    _, reads = _bound_and_read(answer)
    chosen = []
    changed = True
    while changed:
        changed = False
        for source in own:
            bound, more = names_of[source]
            if source not in chosen and bound & reads:
                chosen.append(source)
                reads |= more
                changed = True
    return chosen


def _exercise_before(source: str, cells: list, exercises: dict) -> str | None:
    """The grade_id of the last answer cell above the cell with this source."""
    last = None
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        if _grade_id(cell) in exercises:
            last = _grade_id(cell)
        if _source(cell) == source:
            return last
    return last


# ----------------------------------------------------------------------------
# The grader's side


ANALYSIS_SECONDS = 30
ANALYSIS_MEMORY = 2 * 1024 ** 3


def analysis_spec(course: Path, assignment: str, notebook: str) -> dict:
    """What the child needs to read one notebook of `assignment`: its exercises and the course's cells.

    exercises: {answer grade_id: {"function": the name it defines, "test_id": the test cell that
    checks it, "check": the check's name, "names"/"prefixes": its library implementations}}.
    """
    import nbformat

    from plmcourse.autograde.demos import nbgrader_metadata

    source = nbformat.read(Path(course) / "source" / assignment / f"{notebook}.ipynb", as_version=4)
    release_path = Path(course) / "release" / assignment / f"{notebook}.ipynb"
    cells = list(source.cells)
    if release_path.is_file():
        cells += list(nbformat.read(release_path, as_version=4).cells)
    course_cells = sorted({c.source.strip() for c in cells if c.cell_type == "code"
                           and not nbgrader_metadata(c).get("solution")})
    exercises, test_ids, pending = {}, [], None
    for cell in source.cells:
        meta = nbgrader_metadata(cell)
        if cell.cell_type != "code" or not meta.get("grade_id"):
            continue
        if meta.get("solution"):
            defined = re.findall(r"^(?:def|class) (\w+)", cell.source, re.M)
            pending = meta["grade_id"]
            exercises[pending] = {"function": defined[0] if defined else meta["grade_id"], "test_id": None,
                                  "check": None, "sealed": [], "names": [], "prefixes": []}
        elif meta.get("grade"):
            test_ids.append(meta["grade_id"])
            checks = re.findall(r"\b(check_\w+)\(", cell.source)
            if pending is not None and exercises[pending]["test_id"] is None:
                exercises[pending].update(test_id=meta["grade_id"], check=checks[0] if checks else None)
                sealed, names, prefixes = library_names(checks[0]) if checks else ((), (), ())
                exercises[pending]["sealed"] = sorted({exercises[pending]["function"], *sealed})
                exercises[pending]["names"] = sorted(names)
                exercises[pending]["prefixes"] = list(prefixes)
    return {"course_cells": course_cells, "exercises": exercises, "test_ids": test_ids}


def library_names(check_name: str) -> tuple[tuple, tuple, tuple]:
    """(sealed, names, prefixes): the library implementations a check knows of (see Library).

    sealed: the graded function's own name and the last part of each dotted name in the check's
    seal labels (torch.nn.functional.softmax -> softmax); names: those and the plain names of
    its `flag_library`; prefixes: `flag_library`'s beginnings of private names ("_softmax").
    """
    import plmcourse.judging as judging

    if check_name not in judging.CHECKS:
        return (), (), ()
    check = judging.spec(check_name)
    seal = check.seal() if callable(check.seal) else check.seal
    names = {check_name.removeprefix("check_")}
    for _, label in seal:
        for dotted in re.findall(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", label):
            name = dotted.rsplit(".", 1)[-1]
            # A course class's methods (WordPiece.encode, LoRALinear.merge) share their names with
            # methods every answer may call on its own objects; a library's are the thing itself.
            if not (name.startswith("__") or dotted.startswith("plmcourse.") and name in _generic_methods()):
                names.add(name)
    prefixes = tuple(p for p in check.flag_library if p.startswith("_"))
    flagged = names | {p for p in check.flag_library if not p.startswith("_")}
    return tuple(sorted(names)), tuple(sorted(flagged)), prefixes


def _generic_methods() -> frozenset:
    """Method names of Python's, NumPy's and torch's everyday types (str.encode, Tensor.backward)."""
    import numpy
    import torch

    types = (str, bytes, list, dict, set, tuple, int, float, object, numpy.ndarray, torch.Tensor, torch.nn.Module)
    return frozenset(name for t in types for name in dir(t))


def _limit_child():
    resource.setrlimit(resource.RLIMIT_AS, (ANALYSIS_MEMORY, ANALYSIS_MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (ANALYSIS_SECONDS, ANALYSIS_SECONDS + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def analyse_submission(path: Path, spec: dict) -> dict:
    """Read one submitted notebook in a child process with limits; its findings, or one flag saying
    why it could not be read (the notebook is hostile data: nothing of it runs, in either process)."""
    request = json.dumps({"path": str(path), "spec": spec})
    try:
        done = subprocess.run([sys.executable, "-P", "-m", "plmcourse.autograde.evidence"], input=request,
                              capture_output=True, text=True, timeout=ANALYSIS_SECONDS + 10,
                              preexec_fn=_limit_child if os.name == "posix" else None,
                              env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        result = json.loads(done.stdout) if done.returncode == 0 else None
    except (subprocess.TimeoutExpired, json.JSONDecodeError, OSError, ValueError):
        result = None
    if not isinstance(result, dict) or not isinstance(result.get("flags"), list):
        return {"flags": [["", "cell", "the notebook could not be read for evidence (too large, too deep "
                           "or too slow to analyse)"]], "fingerprints": {}}
    return result


def course_fingerprints(course: Path, assignment: str, notebook: str, spec: dict) -> dict:
    """{answer grade_id: [(label, fingerprints)]}: the notebook's solution and the package's own
    version (plmcourse.ref / nn / data) of each exercise, for `course_similarity`."""
    import importlib
    import inspect

    import nbformat

    from plmcourse.autograde.demos import nbgrader_metadata

    source = nbformat.read(Path(course) / "source" / assignment / f"{notebook}.ipynb", as_version=4)
    solutions = {nbgrader_metadata(c).get("grade_id"): c.source for c in source.cells
                 if nbgrader_metadata(c).get("solution")}
    found = {}
    for grade_id, exercise in spec["exercises"].items():
        versions = []
        if grade_id in solutions:
            versions.append((f"the course's solution to {grade_id}", fingerprints(solutions[grade_id])))
        for module in ("plmcourse.ref", "plmcourse.nn", "plmcourse.data"):
            obj = getattr(importlib.import_module(module), exercise["function"], None)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                try:
                    versions.append((f"{module}.{exercise['function']}", fingerprints(inspect.getsource(obj))))
                except (OSError, TypeError):
                    pass
        found[grade_id] = [(label, prints) for label, prints in versions if len(prints) >= SHORT_FINGERPRINTS]
    return found


def course_similarity(student: str, notebook: str, prints: dict, references: dict) -> list[Flag]:
    """A flag for each answer that holds COURSE_SIMILAR of the course's own code for it (RETYPED, for
    code of fewer than MIN_FINGERPRINTS: a short function is flagged only when copied word for word)."""
    flags = []
    for grade_id, versions in references.items():
        mine = set(prints.get(grade_id, ()))
        if not versions or not mine:
            continue
        share, label, size = max((containment(mine, set(ref)), label, len(ref)) for label, ref in versions)
        if share >= (COURSE_SIMILAR if size >= MIN_FINGERPRINTS else RETYPED):
            kind = "retyped" if share >= RETYPED else "close to"
            flags.append(Flag(student, notebook, grade_id, f"{grade_id} is {label} {kind} (similarity {share:.2f})",
                              "course", round(share, 3)))
    return flags


def classmates(notebook: str, prints_by_student: dict, copied: set) -> list[Flag]:
    """Pairs of students whose answers to one exercise share CLASSMATES_SIMILAR of the smaller's
    fingerprints; one flag per student and exercise, naming the closest classmate. Answers that
    are both the course's own code (`copied`: {(student, exercise)}) are explained by that, not
    by each other, and are left out."""
    flags = []
    exercises = {e for prints in prints_by_student.values() for e in prints}
    for exercise in sorted(exercises):
        answers = {s: set(p.get(exercise, ())) for s, p in prints_by_student.items()}
        answers = {s: a for s, a in answers.items() if len(a) >= MIN_FINGERPRINTS}
        for student, mine in sorted(answers.items()):
            best = None
            for other, theirs in answers.items():
                if other == student or ((student, exercise) in copied and (other, exercise) in copied):
                    continue
                share = len(mine & theirs) / min(len(mine), len(theirs))
                if share >= CLASSMATES_SIMILAR and (best is None or share > best[0]):
                    best = (share, other)
            if best:
                flags.append(Flag(student, notebook, exercise,
                                  f"{exercise} matches {best[1]}'s answer (similarity {best[0]:.2f})",
                                  "classmates", round(best[0], 3)))
    return flags


def closest_pairs(notebook: str, prints_by_student: dict, copied: set, most: int = 10) -> list[tuple]:
    """The `most` most similar pairs of students on one exercise that `classmates` leaves unflagged (under
    CLASSMATES_SIMILAR), closest first: [(share, student, other, exercise)]. Not evidence: a list for a person
    to read the top of, since a copy rewritten enough to pass under the threshold is likely to be near it."""
    pairs = []
    exercises = {e for prints in prints_by_student.values() for e in prints}
    for exercise in sorted(exercises):
        answers = {s: set(p.get(exercise, ())) for s, p in prints_by_student.items()}
        answers = sorted((s, a) for s, a in answers.items() if len(a) >= MIN_FINGERPRINTS)
        for i, (student, mine) in enumerate(answers):
            for other, theirs in answers[i + 1:]:
                if (student, exercise) in copied and (other, exercise) in copied:
                    continue
                share = len(mine & theirs) / min(len(mine), len(theirs))
                if share < CLASSMATES_SIMILAR:
                    pairs.append((round(share, 3), student, other, exercise))
    return sorted(pairs, key=lambda pair: (-pair[0], pair[1:]))[:most]


def main() -> None:
    """The child: read {"path", "spec"} from stdin, write analyse_notebook's result to stdout."""
    request = json.loads(sys.stdin.read())
    with open(request["path"], encoding="utf-8", errors="replace") as f:
        notebook = json.load(f)
    cells = notebook.get("cells", []) if isinstance(notebook, dict) else []
    result = analyse_notebook(cells if isinstance(cells, list) else [], request["spec"])
    result["flags"] = [[str(e)[:100], s, one_line(p)] for e, s, p in result["flags"]][:200]
    result["sealed"] = [[str(e)[:100], one_line(p)] for e, p in result["sealed"]][:50]
    sys.stdout.write(json.dumps(result))


if __name__ == "__main__":
    main()
