"""What an assignment's kernel may use of the course package: what its own notebook reaches.

The course package holds every notebook's graded functions. Several exercises are one computation
with other arguments (a causal LM loss is 02's cross-entropy on shifted logits, CLIP's loss is 08's
InfoNCE both ways), so while one assignment is graded, the others' functions are as good as its own
reference. The grading sandbox therefore shows an assignment's kernel only the definitions its own
notebook uses (sandbox.grading_package stubs the rest):

* roots: every name the assignment's notebooks (the instructor's sources, solutions included) bind
  from the package or reach through it in code (`from plmcourse.ref import softmax`,
  `plmcourse.nn.attention.causal_mask(n)`, an import inside a function), every `plmcourse.a.b`
  named in their markdown, and the whole of `grading/` (the kernel's own machinery);
* from a reached function or class, everything its code reaches in turn, read the same way (a class
  brings all its methods and bases); and the code that importing a module runs, for every module the
  kernel's copy holds, since any of them may be imported: its top-level statements, and the decorators,
  default values, annotations and class bodies of its definitions (`@register` keeps `register`).

A module-level value (`WORD = re.compile(...)`, `ANALOGIES = _analogies()`, `loss = partial(ce, ...)`,
`score = Scorer()`) is a definition like a function: whatever it holds, it is usable only where it is
reached, and its right-hand side is read (`_analogies` kept) only then. What is callable is not only
what is a `def`. A value is one name assigned once, at the module's top level, outside any `if` or
`try`; a name bound any other way, or more than once, is top-level code and always read.

A value that is a table (`POOLINGS = {"cls": cls_pool, "mean": mean_pool}`: a dict display with constant keys)
is reached entry by entry where code reads it with a constant key (`POOLINGS["cls"]` keeps `cls_pool` alone);
any other use (a key that is a variable, iterating it, passing it on) reaches the whole table. A table reached
only by some of its keys keeps the others as keys, each holding an object that raises (sandbox.stub_source).

Names are resolved as Python binds them, never matched as words: `torch.softmax` in a notebook does
not reach `plmcourse.ref.softmax`, and a word in a string or a comment reaches nothing. The reading is
generous where it cannot be exact (a name bound anywhere in a notebook counts for every cell, a
local variable that shadows a module's name still reaches it), so it may keep more than a notebook
uses, never less: an honest notebook loses nothing (tests/test_grading_every_assignment.py grades every
solved notebook in the sandbox).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "plmcourse"
KERNEL_FOLDERS = ("grading",)  # what a kernel runs of the grading: read whole, never stubbed
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_DOTTED = re.compile(r"\bplmcourse(?:\.\w+)+")

Target = tuple  # (module, name): a top-level definition; (module, None): the module itself


@dataclass
class Module:
    name: str                                          # plmcourse.nn.attention
    tree: ast.Module
    is_package: bool
    defs: dict = field(default_factory=dict)           # top-level function or class name -> its node
    values: dict = field(default_factory=dict)         # name assigned once at the top level -> the assignment
    tables: dict = field(default_factory=dict)         # a value that is a dict display with constant keys -> {key: node}
    bound: dict = field(default_factory=dict)          # name -> (module, attribute or None), from imports
    stars: list = field(default_factory=list)          # modules imported with *
    imports: set = field(default_factory=set)          # modules its top-level code imports


def index(package_dir: Path) -> dict[str, Module]:
    """Every module of the package at `package_dir` (a folder named plmcourse), read, not imported."""
    package_dir = Path(package_dir)
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        modules[name] = _read_module(name, tree, is_package)
    return modules


def _read_module(name: str, tree: ast.Module, is_package: bool) -> Module:
    module = Module(name, tree, is_package)
    times_bound = {}
    for node in _top_level(tree.body):
        if isinstance(node, _DEFS):
            module.defs[node.name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            _bind(module, node, module.bound, module.stars, module.imports)
        for bound in _binds(node):
            times_bound[bound] = times_bound.get(bound, 0) + 1
    for node in tree.body:
        value_of = value_name(node)
        if value_of and times_bound[value_of] == 1:
            module.values[value_of] = node
            entries = table_entries(node.value)
            if entries is not None:
                module.tables[value_of] = entries
    return module


def table_entries(node) -> dict | None:
    """{key: value node} of a dict display whose keys are all constants (strings, numbers), or None."""
    if not isinstance(node, ast.Dict) or not node.keys:
        return None
    if not all(isinstance(k, ast.Constant) and isinstance(k.value, (str, int, float)) for k in node.keys):
        return None  # a `**other` (key None) or a computed key: read as a whole
    return {k.value: v for k, v in zip(node.keys, node.values)}


def module_values(name: str, tree: ast.Module, is_package: bool = False) -> set[str]:
    """The module-level values of module `name` (its parsed `tree`): the names Module.values holds."""
    return set(_read_module(name, tree, is_package).values)


def _binds(node) -> list[str]:
    """The names a top-level statement binds in its module (not those bound inside a definition)."""
    if isinstance(node, _DEFS):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [alias.asname or alias.name.split(".")[0] for alias in node.names]
    targets = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    return [n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)]


def value_name(node) -> str | None:
    """The name of `NAME = value` (or `NAME: type = value`): one plain name, not a dunder such as __all__."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        target = node.target
    else:
        return None
    if not isinstance(target, ast.Name) or (target.id.startswith("__") and target.id.endswith("__")):
        return None
    return target.id


def _import_time(node) -> tuple[list, list]:
    """(code, annotations): what a definition runs when its module is imported. Code: decorators and default
    values of a function; bases, keywords, decorators and the statements of a class's body. Annotations are
    evaluated too (without `from __future__ import annotations`), but only as names: a stubbed function or
    class in one is harmless, a module-level value may be operated on (`Optional[Array]`)."""
    code, annotations = list(node.decorator_list), []
    if isinstance(node, ast.ClassDef):
        code += [*node.bases, *node.keywords]
        for statement in node.body:
            if isinstance(statement, _DEFS):
                inner_code, inner_annotations = _import_time(statement)
                code += inner_code
                annotations += inner_annotations
            elif isinstance(statement, ast.AnnAssign):
                code += [statement.value] if statement.value is not None else []
                annotations.append(statement.annotation)
            else:
                code.append(statement)
        return code, annotations
    arguments = node.args
    code += [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    annotations += [a.annotation for a in every if a is not None and a.annotation is not None]
    return code, annotations + ([node.returns] if node.returns is not None else [])


def _top_level(body):
    """The statements a module runs when imported, into if/try/with blocks but not into definitions."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)) or type(node).__name__ == "TryStar":
            for block in ("body", "orelse", "finalbody"):
                yield from _top_level(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from _top_level(handler.body)


def _bind(module: Module, node, bound: dict, stars: list, imports: set) -> None:
    """What an import statement binds, in `module`'s namespace."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            imports.add(alias.name)
            if alias.asname:
                bound[alias.asname] = (alias.name, None)
            else:
                top = alias.name.split(".")[0]
                bound[top] = (top, None)
        return
    base = _absolute(module, node)
    if base is None:
        return
    imports.add(base)
    for alias in node.names:
        if alias.name == "*":
            stars.append(base)
        else:
            bound[alias.asname or alias.name] = (base, alias.name)
            imports.add(f"{base}.{alias.name}")  # a submodule, if it is one


def _absolute(module: Module, node: ast.ImportFrom) -> str | None:
    if not node.level:
        return node.module
    parts = module.name.split(".")
    if not module.is_package:
        parts = parts[:-1]
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    if not parts:
        return None
    return ".".join(parts + ([node.module] if node.module else []))


class Reader:
    """Resolves names and follows what reached code reaches, over one package's modules."""

    def __init__(self, modules: dict[str, Module], stubbed=(), present=None):
        self.modules = modules
        self.present = set(modules) if present is None else set(present)  # the modules the kernel's copy holds
        self.stubbed = set(stubbed)          # (module, qualified name) whose body is a stub: nothing to read
        self.kept: set[Target] = set()       # top-level definitions reached (a table: whole or some of its keys)
        self.entries: dict = {}              # a table reached only by constant keys -> those keys
        self.whole: set[Target] = set()      # tables reached as a whole
        self.loaded: set[str] = set()        # modules whose top-level code was read
        self._todo: list = []

    # -- resolution -------------------------------------------------------------------------------

    def attribute(self, module: str, name: str, seen=None) -> Target | None:
        """What `module.name` is: a definition, a submodule, or what an import there bound."""
        seen = set() if seen is None else seen
        if (module, name) in seen:
            return None
        seen.add((module, name))
        found = self.modules.get(module)
        if found is None:
            return None
        if name in found.defs or name in found.values:
            return (module, name)
        if name in found.bound:
            return self.target(*found.bound[name], seen=seen)
        if f"{module}.{name}" in self.modules:
            return (f"{module}.{name}", None)
        for star in found.stars:
            hit = self.attribute(star, name, seen)
            if hit is not None:
                return hit
        return None

    def target(self, module: str, name: str | None, seen=None) -> Target | None:
        if name is None:
            return (module, None) if module in self.modules else None
        return self.attribute(module, name, seen)

    def chain(self, start: Target | None, parts) -> list[Target]:
        """The targets of `start.parts[0].parts[1]...`, as far as each is a module's attribute."""
        found = []
        current = start
        for part in parts:
            if current is None or current[1] is not None:
                break
            current = self.attribute(current[0], part)
            if current is not None:
                found.append(current)
        return found

    # -- reading code -----------------------------------------------------------------------------

    def read(self, node, scope: Module, extra: dict | None = None, values_only: bool = False) -> None:
        """Everything `node`'s code reaches, with `scope`'s names (and `extra`, a namespace of its own);
        values_only: only the module-level values it names (code that names a definition without running it)."""
        bound = dict(scope.bound)
        stars, imports = list(scope.stars), set()
        for inner in ast.walk(node):  # imports inside functions bind there; read as if they bound everywhere
            if isinstance(inner, (ast.Import, ast.ImportFrom)):
                _bind(scope, inner, bound, stars, imports)
        bound.update(extra or {})
        for name in imports:
            self._load(name)
        reach = self._reach_value if values_only else self._reach
        narrowed = set()  # the nodes naming a table that a constant key reads: that entry is reached, not the table
        for inner in ast.walk(node):
            if isinstance(inner, ast.Subscript) and isinstance(inner.ctx, ast.Load) \
                    and isinstance(inner.slice, ast.Constant):
                table = self._table(inner.value, scope, bound, stars)
                if table is not None and inner.slice.value in self.modules[table[0]].tables[table[1]]:
                    narrowed.add(id(inner.value))
                    if isinstance(inner.value, ast.Attribute):  # what leads to it (a module) is reached as usual
                        parts = _dotted(inner.value)
                        for hit in self.chain(self._name(parts[0], scope, bound, stars), parts[1:-1]):
                            reach(hit)
                    self._reach_entry(table, inner.slice.value, reach)
        for inner in ast.walk(node):
            if id(inner) in narrowed:
                continue
            if isinstance(inner, ast.Name):
                reach(self._name(inner.id, scope, bound, stars))
            elif isinstance(inner, ast.Attribute):
                parts = _dotted(inner)
                if parts:
                    start = self._name(parts[0], scope, bound, stars)
                    for hit in self.chain(start, parts[1:]):
                        reach(hit)

    def _name(self, name: str, scope: Module, bound: dict, stars: list) -> Target | None:
        if name in bound:
            return self.target(*bound[name])
        if (name in scope.defs or name in scope.values) and scope.name in self.modules:
            return (scope.name, name)
        for star in stars:
            hit = self.attribute(star, name)
            if hit is not None:
                return hit
        return None

    def _table(self, node, scope: Module, bound: dict, stars: list) -> Target | None:
        """The table (a module-level dict display with constant keys) that `node`, a name or a.b.c, names, or None."""
        if isinstance(node, ast.Name):
            target = self._name(node.id, scope, bound, stars)
        elif isinstance(node, ast.Attribute) and _dotted(node):
            parts = _dotted(node)
            hits = self.chain(self._name(parts[0], scope, bound, stars), parts[1:])
            target = hits[-1] if len(hits) == len(parts) - 1 else None
        else:
            return None
        if target is None or target[1] is None or target[0] not in self.present:
            return None
        return target if target[1] in self.modules[target[0]].tables else None

    def _reach(self, target: Target | None) -> None:
        if target is None or target[0] not in self.present:
            return
        module, name = target
        self._load(module)
        if name is None:
            return
        if name in self.modules[module].tables:
            if target not in self.whole:
                self.whole.add(target)
                self.kept.add(target)
                self._todo.append(target)
        elif target not in self.kept:
            self.kept.add(target)
            self._todo.append(target)

    def _reach_entry(self, table: Target, key, reach) -> None:
        """`table[key]` read with a constant key: that entry alone. In an annotation (`reach` is _reach_value) the
        table is reached whole, as any value an annotation names."""
        if reach != self._reach:
            reach(table)
            return
        self._load(table[0])
        keys = self.entries.setdefault(table, set())
        if table not in self.whole and key not in keys:
            keys.add(key)
            self.kept.add(table)
            self._todo.append((*table, key))

    def _reach_value(self, target: Target | None) -> None:
        if target is not None and target[1] is not None and target[1] in self.modules[target[0]].values:
            self._reach(target)

    def _load(self, module: str) -> None:
        """An import of `module` runs its packages' and its own top-level code: read it."""
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name in self.present and name not in self.loaded:
                self.loaded.add(name)
                self._todo.append((name, None))

    def settle(self) -> set[Target]:
        """Follow everything reached until nothing new is; the definitions kept."""
        while self._todo:
            module, name, *key = self._todo.pop()
            found = self.modules[module]
            if key:  # one entry of a table: its value's code is what is reached
                self.read(found.tables[name][key[0]], found)
                continue
            if name is None:  # what importing the module runs, its definitions' bodies and its values aside
                values = set(map(id, found.values.values()))
                for node in found.tree.body:
                    if isinstance(node, _DEFS):
                        code, annotations = _import_time(node)
                        for part in code:
                            self.read(part, found)
                        for part in annotations:
                            self.read(part, found, values_only=True)
                    elif not (isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in values
                              or _main_guard(node)):
                        self.read(node, found)
                for imported in found.imports:
                    self._load(imported)
            elif name in found.values:
                self.read(found.values[name], found)
            elif (module, name) not in self.stubbed:
                self._definition(found.defs[name], found)
        return self.kept

    def _definition(self, node, module: Module) -> None:
        """Read a top-level function, or a class with each method that is not stubbed."""
        if not isinstance(node, ast.ClassDef):
            self.read(node, module)
            return
        for part in [*node.bases, *node.keywords, *node.decorator_list]:
            self.read(part, module)
        for statement in node.body:
            if not (isinstance(statement, _DEFS) and (module.name, f"{node.name}.{statement.name}") in self.stubbed):
                self.read(statement, module)


def _main_guard(node) -> bool:
    """`if __name__ == "__main__":`, whose block an import does not run."""
    test = getattr(node, "test", None) if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and getattr(test.comparators[0], "value", None) == "__main__")


def _dotted(node: ast.Attribute) -> list[str] | None:
    """["a", "b", "c"] for the expression a.b.c; None when it does not start with a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def notebook_code(notebooks) -> tuple[str, str]:
    """(the code of every code cell, in Python syntax; the text of every markdown cell) of `notebooks`.
    Code given to a magic that runs it (%time, %timeit, %%capture: demos.CODE_MAGICS) is code too."""
    import nbformat

    code, prose = [], []
    for path in notebooks:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                code += _python(cell.source)
            elif cell.cell_type == "markdown":
                prose.append(cell.source)
    return "\n".join(code), "\n".join(prose)


def _python(source: str, depth: int = 0) -> list[str]:
    """A cell in IPython syntax as Python that parses, and the code its magics run; [] when it does not parse."""
    from IPython.core.inputtransformer2 import TransformerManager

    from plmcourse.autograde.demos import CODE_MAGICS

    try:
        python = TransformerManager().transform_cell(source)
        tree = ast.parse(python)
    except (SyntaxError, ValueError, RecursionError):
        return []
    found = [python]
    for node in ast.walk(tree):
        if (depth < 3 and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("run_line_magic", "run_cell_magic") and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in CODE_MAGICS):
            given = [a.value for a in node.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            found += _python("\n".join(given), depth + 1)
    return found


def reached(package_dir: Path, notebooks, stubbed=(), modules=None, present=None) -> set[Target]:
    """The package's top-level definitions that the assignment of `notebooks` may use while graded (a table read
    by some of its keys only is among them: unused() names its other entries).
    `stubbed`: (module, qualified name) of functions stubbed anyway (the assignment's own graded
    functions): what only their code reached is not reached. `present`: the modules the kernel's copy
    holds (default: all); every one of them may be imported, so what their top-level code runs is kept."""
    return reader_of(package_dir, notebooks, stubbed, modules, present).kept


def reader_of(package_dir: Path, notebooks, stubbed=(), modules=None, present=None) -> Reader:
    """The Reader after following everything the assignment of `notebooks` reaches (see reached)."""
    modules = index(package_dir) if modules is None else modules
    reader = Reader(modules, stubbed, present)
    for name in reader.present:  # an import of any module must work: its top level is read as run
        reader._load(name)
    code, prose = notebook_code(notebooks)
    cells = _read_module("__notebook__", ast.parse(code), False)
    reader.read(cells.tree, cells)
    root = (PACKAGE, None)
    for dotted in _DOTTED.findall(prose):
        for hit in reader.chain(root, dotted.split(".")[1:]):
            reader._reach(hit)
    for name, module in modules.items():
        if name == PACKAGE or name.split(".")[1] in KERNEL_FOLDERS:
            for definition in [*module.defs, *module.values]:
                reader._reach((name, definition))
    reader.settle()
    return reader


def unused(package_dir: Path, notebooks, stubbed=(), modules=None, present=None) -> dict[str, set[str]]:
    """{module: top-level definitions and values not reached}, for every module outside the kernel's folders."""
    modules = index(package_dir) if modules is None else modules
    reader = reader_of(package_dir, notebooks, stubbed, modules, present)
    kept = reader.kept
    unused = {name: {d for d in [*module.defs, *module.values] if (name, d) not in kept}
              for name, module in modules.items()
              if name != PACKAGE and name.split(".")[1] not in KERNEL_FOLDERS}
    for (name, table), keys in reader.entries.items():  # a table read by some keys only: the others' entries
        if name in unused and (name, table) not in reader.whole:
            unused[name] |= {entry_name(table, key) for key in modules[name].tables[table] if key not in keys}
    return unused


def entry_name(table: str, key) -> str:
    """How unused() names one entry of a table: `POOLINGS['mean']`."""
    return f"{table}[{key!r}]"
