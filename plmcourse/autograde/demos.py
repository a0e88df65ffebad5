"""Which cells grading may skip: demonstrations that nothing graded depends on.

Most of a notebook's run time goes to its demonstrations (experiments, plots,
widgets), and none of them decides a grade. The instructor tags such cells `demo`
(cell metadata "tags", as JupyterLab's property inspector edits them). When grading,
a demo cell is skipped unless something that does run needs it:

* every other code cell runs: the set-up, the answers, the tests, and any cell the
  student added;
* a demo cell runs if a running cell reads a global name that the demo cell defines
  (a student's answer may call a helper written in a demo cell), and then what that
  demo cell reads can pull in further demo cells, until nothing changes;
* if a running cell looks names up in ways that cannot be read off its code (eval,
  exec, globals(), IPython magics), every demo cell runs.

So skipping changes no grade: a test sees the same names, bound by the same cells,
as in a run from top to bottom. The names come from Python's own symbol tables
(`symtable`), after IPython's syntax (magics, `!cmd`) is translated to Python.
"""

from __future__ import annotations

import ast
import symtable

DEMO_TAG = "demo"
NOT_RUN_NOTE = "(A demonstration: not run when grading, since no graded code depends on it.)\n"

# Calls that reach names without writing them in the code.
DYNAMIC_LOOKUPS = frozenset({"eval", "exec", "globals", "locals", "vars", "get_ipython", "__import__"})
MAX_CELL = 200_000  # characters; a longer cell (no honest one is) is not read, and every demo runs


def nbgrader_metadata(cell) -> dict:
    """A cell's nbgrader metadata, or {} when it has none or something that is not nbgrader's
    (a student may write any metadata; a string there must not stop the grading)."""
    found = cell.get("metadata", {}).get("nbgrader")
    return found if isinstance(found, dict) else {}


def is_demo(cell) -> bool:
    nbgrader = nbgrader_metadata(cell)
    graded = nbgrader.get("grade") or nbgrader.get("solution")
    return cell.get("cell_type") == "code" and DEMO_TAG in cell.get("metadata", {}).get("tags", []) and not graded


def cell_names(source: str) -> tuple[set[str], set[str]]:
    """(global names the cell defines, global names it reads), for a cell in IPython syntax.

    A cell that does not compile defines and reads nothing: running it stops at the
    syntax error before any of its code runs. `from m import *` defines "*". Code
    given to %time, %timeit and %%capture is read like the cell's own; other uses of
    the IPython shell read "get_ipython", which counts as a dynamic lookup.
    """
    from IPython.core.inputtransformer2 import TransformerManager

    if len(source) > MAX_CELL:
        # Reading it would take longer than running every demo: say it may read anything.
        return set(), {"exec"}
    try:
        code = TransformerManager().transform_cell(source)
        tree = ast.parse(code)
        top = symtable.symtable(code, "<cell>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # Nesting too deep for the compiler fails the same way in the kernel: nothing runs.
        return set(), set()
    defines, reads = set(), set()
    if any(isinstance(node, ast.ImportFrom) and node.names[0].name == "*" for node in ast.walk(tree)):
        defines.add("*")
    tables = [top]
    while tables:
        table = tables.pop()
        at_top = table is top
        for symbol in table.get_symbols():
            name = symbol.get_name()
            if at_top and (symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace()):
                defines.add(name)
            if not at_top and symbol.is_declared_global() and symbol.is_assigned():
                defines.add(name)  # `global x; x = ...` inside a function
            if symbol.is_referenced() and (at_top or symbol.is_global()):
                reads.add(name)
        tables.extend(table.get_children())
    defines |= _mutated(tree)
    if "get_ipython" in reads:
        reads.discard("get_ipython")
        shell_defines, shell_reads = _shell_names(tree)
        defines |= shell_defines
        reads |= shell_reads
    return defines, reads


# Methods that change the object they are called on: a cell calling them on a name writes it.
MUTATING_METHODS = frozenset({"append", "extend", "insert", "update", "setdefault", "add", "pop", "popitem",
                              "clear", "remove", "discard", "sort", "reverse", "fill", "fill_", "copy_",
                              "zero_", "add_", "mul_", "resize", "put", "itemset"})


def _root_name(node):
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _mutated(tree: ast.Module) -> set[str]:
    """Names whose object the cell changes in place: d["k"] = v, x.attr = v, x += v, d.update(...).

    A demo cell that fills a dict an answer reads defines nothing, yet the answer needs it.
    """
    names = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in MUTATING_METHODS):
            targets = [node.func.value]
        for target in targets:
            for part in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if isinstance(part, (ast.Subscript, ast.Attribute)) or node.__class__ is ast.Call:
                    name = _root_name(part)
                    if name:
                        names.add(name)
                elif isinstance(node, ast.AugAssign) and isinstance(part, ast.Name):
                    names.add(part.id)
    return names


# Magics that run Python code given as their argument, and magics that never read the namespace.
CODE_MAGICS = frozenset({"time", "timeit", "capture", "prun"})
QUIET_MAGICS = frozenset({"pip", "conda", "matplotlib", "load_ext", "reload_ext", "autoreload", "config"})


def _shell_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """What the cell's calls into the IPython shell (magics, ! commands) define and read."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and isinstance(n.func.value, ast.Call) and getattr(n.func.value.func, "id", "") == "get_ipython"]
    uses = sum(isinstance(n, ast.Name) and n.id == "get_ipython" for n in ast.walk(tree))
    if uses != len(calls):
        return set(), {"get_ipython"}  # the shell itself is used, not just a magic
    defines, reads = set(), set()
    for call in calls:
        args = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if call.func.attr in ("system", "getoutput"):
            continue
        if call.func.attr in ("run_line_magic", "run_cell_magic") and args and args[0] in QUIET_MAGICS:
            continue
        if call.func.attr in ("run_line_magic", "run_cell_magic") and args and args[0] in CODE_MAGICS:
            inner_defines, inner_reads = cell_names("\n".join(args[1:]))
            defines |= inner_defines
            reads |= inner_reads
            continue
        return set(), {"get_ipython"}
    return defines, reads


def cells_to_skip(cells) -> set[int]:
    """Indices of the demo cells that a grading run may leave out (see the module docstring)."""
    names = {i: cell_names(c["source"]) for i, c in enumerate(cells) if c.get("cell_type") == "code"}
    skip = {i for i in names if is_demo(cells[i])}
    reads = set().union(*(names[i][1] for i in names if i not in skip))
    while skip:
        if reads & DYNAMIC_LOOKUPS:
            return set()
        needed = {i for i in skip if names[i][0] & reads or "*" in names[i][0]}
        if not needed:
            break
        skip -= needed
        reads |= set().union(*(names[i][1] for i in needed))
    return skip
