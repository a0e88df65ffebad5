"""A canonical form of Python source, for review's similarity: what a copier rewrites for free, undone.

Measured by bench/similarity.py (`fingerprints(canonical(source))` against the tokens review uses) but not
used by review: it finds rewritten copies (23 of 25 against 10 of 28), and it also brings honest short answers
onto the course's own formula. An independently written scaled dot-product attention (bench/attacks.py's
h-lazy-typed) holds 0.68 of the course solution's fingerprints as tokens and 0.91 in canonical form, over
evidence.COURSE_SIMILAR, so the shared graded class flagged it. Before review uses it, it needs a cohort of
independently written obvious answers and thresholds set for it on a dev split.
"""

from __future__ import annotations

import ast

from plmcourse.autograde.evidence import MAX_SOURCE, normalised_tokens

# Builtins that compute without changing anything: an assignment of what only they compute, never read, is dead.
PURE_BUILTINS = frozenset({"abs", "all", "any", "bool", "dict", "divmod", "enumerate", "float", "int", "len",
                           "list", "max", "min", "range", "reversed", "round", "set", "sorted", "str", "sum",
                           "tuple", "zip"})


def canonical(source: str) -> str:
    """The source with a copier's free rewrites undone, block by block: docstrings, `pass` and assignments never read dropped; `x += y` as `x = x + y`; a list built by a loop
    that appends as its comprehension; a temporary read once put back where it is read; independent
    statements in one order (by their renaming-proof text, keeping every dependency). The source as it is
    when it cannot be parsed or rewritten."""
    try:
        tree = ast.parse(source[:MAX_SOURCE])
        _canonical_block(tree.body, function=False)
        return ast.unparse(ast.fix_missing_locations(tree))
    except (SyntaxError, RecursionError, MemoryError, ValueError, TypeError, AttributeError):
        return source


def _canonical_block(body: list, function: bool) -> None:
    """Rewrite one block of statements in place, its nested blocks first. Only a function's own body loses
    dead assignments and temporaries: there every read of its names is in sight (a cell's globals are read
    by other cells, a loop's by what follows the loop)."""
    for statement in body:
        is_function = isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(statement, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                _canonical_block(inner, function=is_function and field == "body")
        for handler in getattr(statement, "handlers", []):
            _canonical_block(handler.body, function=False)
    kept = [_plain_assign(s) for s in body if not _no_op(s)]
    kept = _comprehensions(kept)
    if function:
        kept = _inline_temporaries([s for s in kept if not _dead(s, kept)])
        kept = [s for s in kept if not _dead(s, kept)]
    body[:] = _ordered(kept) or [ast.Pass()]


def _no_op(statement) -> bool:
    return isinstance(statement, ast.Pass) or (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))


def _plain_assign(statement):
    """`x += y` as `x = x + y` (a name's; an element's stays, since its target is read twice)."""
    if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
        name = statement.target.id
        plain = ast.Assign([ast.Name(name, ast.Store())], ast.BinOp(ast.Name(name, ast.Load()), statement.op,
                                                                    statement.value))
        return ast.copy_location(plain, statement)
    return statement


def _comprehensions(body: list) -> list:
    """`v = []` then `for t in it: [if c:] v.append(e)` as `v = [e for t in it if c]`."""
    out, i = [], 0
    while i < len(body):
        statement, following = body[i], body[i + 1] if i + 1 < len(body) else None
        name = _empty_list(statement)
        if name and isinstance(following, ast.For) and not following.orelse and len(following.body) == 1:
            inner, conditions = following.body[0], []
            while isinstance(inner, ast.If) and not inner.orelse and len(inner.body) == 1:
                conditions.append(inner.test)
                inner = inner.body[0]
            element = _appended(inner, name)
            if element is not None:
                comprehension = ast.comprehension(following.target, following.iter, conditions, 0)
                built = ast.Assign([ast.Name(name, ast.Store())], ast.ListComp(element, [comprehension]))
                out.append(ast.copy_location(built, statement))
                i += 2
                continue
        out.append(statement)
        i += 1
    return out


def _empty_list(statement) -> str | None:
    if (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.List) and not statement.value.elts):
        return statement.targets[0].id
    return None


def _appended(statement, name: str):
    call = statement.value if isinstance(statement, ast.Expr) else None
    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "append"
            and isinstance(call.func.value, ast.Name) and call.func.value.id == name and len(call.args) == 1
            and not call.keywords):
        return call.args[0]
    return None


def _names_in(node, kind) -> list:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, kind)]


def _assigned_name(statement) -> str | None:
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id
    return None


def _dead(statement, body: list) -> bool:
    """An assignment to a name that no statement of the block reads, of a value that changes nothing."""
    name = _assigned_name(statement)
    if name is None or any(name in _names_in(s, ast.Load) for s in body):
        return False
    calls = [n for n in ast.walk(statement.value) if isinstance(n, ast.Call)]
    return all(isinstance(c.func, ast.Name) and c.func.id in PURE_BUILTINS for c in calls)


def _inline_temporaries(body: list) -> list:
    """`t = value` read exactly once, later in the block and nowhere else, and assigned nowhere else: the value
    put where it is read (a copier's "split into temporaries", undone)."""
    changed = True
    while changed:
        changed = False
        for i, statement in enumerate(body):
            name = _assigned_name(statement)
            if name is None:
                continue
            reads = [(j, n) for j, s in enumerate(body) for n in ast.walk(s)
                     if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
            writes = sum(_names_in(s, ast.Store).count(name) for s in body)
            if len(reads) != 1 or writes != 1 or reads[0][0] <= i or name in _names_in(statement.value, ast.Load):
                continue
            j, use = reads[0]
            if any(set(_names_in(body[k], ast.Store)) & set(_names_in(statement.value, ast.Load))
                   for k in range(i + 1, j)):
                continue  # what the value reads changes before the use: not the same value there
            body[j] = _Replace(use, statement.value).visit(body[j])
            del body[i]
            changed = True
            break
    return body


class _Replace(ast.NodeTransformer):
    def __init__(self, target, value):
        self.target, self.value = target, value

    def visit_Name(self, node):
        return self.value if node is self.target else node


# A statement after which nothing moves up, and before which nothing moves down.
_BARRIERS = (ast.Return, ast.Raise, ast.Break, ast.Continue, ast.If, ast.For, ast.While, ast.With, ast.Try,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Global, ast.Nonlocal, ast.Delete,
             ast.Import, ast.ImportFrom)


def _effects(statement) -> tuple[set, set]:
    """(names it reads, names it writes); a method called on a name writes that name (list.append)."""
    reads, writes = set(_names_in(statement, ast.Load)), set(_names_in(statement, ast.Store))
    for node in ast.walk(statement):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            writes.add(node.func.value.id)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            writes.update(_names_in(node, ast.Load))
    return reads, writes


def _ordered(body: list) -> list:
    """The block's statements in one order for every order a copier may choose: a statement waits for those
    it depends on (one writes what the other reads or writes, or either is a barrier); of those ready, the one
    whose renaming-proof text sorts first goes next."""
    effects = [_effects(s) for s in body]
    keys = [" ".join(normalised_tokens(ast.unparse(ast.fix_missing_locations(s)))) for s in body]

    def depends(j, i):  # statement j (later) on statement i (earlier)
        if isinstance(body[i], _BARRIERS) or isinstance(body[j], _BARRIERS):
            return True
        (reads_i, writes_i), (reads_j, writes_j) = effects[i], effects[j]
        return bool(writes_i & (reads_j | writes_j) or writes_j & reads_i)

    waiting = {j: {i for i in range(j) if depends(j, i)} for j in range(len(body))}
    order, done = [], set()
    while len(order) < len(body):
        ready = [j for j in range(len(body)) if j not in done and waiting[j] <= done]
        chosen = min(ready, key=lambda j: (keys[j], j))
        order.append(chosen)
        done.add(chosen)
    return [body[j] for j in order]
