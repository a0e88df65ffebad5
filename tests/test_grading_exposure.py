"""What an assignment's kernel may use of the course package (plmcourse.autograde.exposure): the
definitions its own notebooks reach, read as Python binds names, on a package built for the test and
on the course's own."""

from pathlib import Path

import nbformat
import pytest

from conftest import COURSE
from plmcourse.autograde import exposure, sandbox

SOURCE = Path(exposure.__file__).resolve().parent.parent

TOY = {
    "__init__.py": "",
    "ref/__init__.py": "from plmcourse.ref.a import used, Model\nfrom .b import *\n",
    "ref/a.py": '''\
def used(x):
    return helper(x)

def helper(x):
    return x

def unused(x):
    return x

def softmax(x):
    return x

class Base:
    def reset(self):
        return None

class Model(Base):
    def forward(self):
        return inner()

    def own(self):
        return only_own_reaches()

def inner():
    return None

def only_own_reaches():
    return None

def exercise():
    return deep()

def deep():
    return None

def tabled():
    return None

TABLE = {"k": tabled}

def registered():
    return None

REGISTRY = []
REGISTRY.append(registered)  # run at import: REGISTRY is bound twice, so it is top-level code

def ce(x, target):
    return x

def partial(f, **bound):
    return f

lm_loss = partial(ce, target=0)  # a callable that is not a def
shortcut = lambda x: ce(x, 0)

def decorate(f):
    return f

@decorate
def decorated(x=tabled):
    return x

class Typed:
    pass

Alias = list

def annotated(x: Typed, y: Alias = None) -> Typed:
    return x

def pool_a(x):
    return x

def pool_b(x):
    return -x

POOLS = {"a": pool_a, "b": pool_b}

def every_pool(name, x):
    return POOLS[name](x)  # a key that is a variable: the whole table
''',
    "ref/b.py": '''\
__all__ = ["starred"]

def starred():
    from plmcourse.ref.c import lazy
    return lazy()

def mentioned():
    return None

def never():
    return None

def timed():
    return None
''',
    "ref/c.py": "def lazy():\n    return None\n\ndef beside_lazy():\n    return None\n",
    "data/__init__.py": "def _table():\n    return {}\n\nTABLE = _table()\n\ndef _build():\n    return 1\n\n"
                        "print(_build())  # run at import\n\ndef unused_data():\n    return 1\n\n"
                        "if __name__ == '__main__':\n    unused_data()\n",
    "grading/__init__.py": "def check():\n    from plmcourse.ref.c import beside_lazy\n    return beside_lazy\n",
}

NOTEBOOK_CELLS = [
    ("code", "import numpy as np\nimport torch\nimport plmcourse.ref as R\nfrom plmcourse.ref import Model"),
    ("code", "R.used(1)\nR.starred()\nModel().forward()\ntorch.softmax(torch.ones(2), 0)"),
    ("code", "s = 'plmcourse.ref.a.unused'  # plmcourse.ref.b.never\ndef mine():\n    \"\"\"unused\"\"\"\n    return 1"),
    ("code", "%timeit R.timed()"),
    ("code", "%%capture\nR.used(3)"),
    ("markdown", "Compare with `plmcourse.ref.b.mentioned` and the word unused."),
    ("code", "from plmcourse.ref.a import exercise\nexercise()"),
    ("code", "import plmcourse.ref.a as A\nA.POOLS['a'](1)"),  # one entry of a table, by a constant key
]


@pytest.fixture
def toy(tmp_path):
    package = tmp_path / "plmcourse"
    for relative, text in TOY.items():
        (package / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / relative).write_text(text)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) if kind == "code" else nbformat.v4.new_markdown_cell(s)
                for kind, s in NOTEBOOK_CELLS]
    nbformat.write(nb, tmp_path / "toy.ipynb")
    return package, [tmp_path / "toy.ipynb"]


def names(kept):
    return {f"{module.removeprefix('plmcourse.')}.{name}" for module, name in kept}


def test_what_the_notebook_binds_and_what_that_code_reaches_is_kept(toy):
    package, notebooks = toy
    kept = names(exposure.reached(package, notebooks))
    # through an alias of a package, a re-export, a star import, a class's methods and bases,
    # an import inside a function, the kernel's grading/, the markdown and %timeit
    assert {"ref.a.used", "ref.a.helper", "ref.a.Model", "ref.a.Base", "ref.a.inner", "ref.a.only_own_reaches",
            "ref.b.starred", "ref.c.lazy", "ref.c.beside_lazy", "ref.b.mentioned",
            "ref.a.exercise", "ref.a.deep", "grading.check", "ref.b.timed"} <= kept
    # a module nobody imports may still be imported: what its top level runs is kept (not its __main__ block),
    # and so is what a definition runs at import: its decorator and its default values
    assert {"data._build", "ref.a.registered", "ref.a.decorate", "ref.a.tabled"} <= kept
    assert "data.unused_data" not in kept
    # an annotation is evaluated at import, but naming a stubbed class there is harmless: only a value it names
    # (which typing may operate on) is kept
    assert "ref.a.Alias" in kept and not {"ref.a.Typed", "ref.a.annotated"} & kept
    # a module-level value is kept where it is reached, and what it holds only then: a table nobody reads, a
    # partial and a lambda (callables that are not defs) keep nothing
    assert not {"data.TABLE", "data._table", "ref.a.TABLE", "ref.a.lm_loss", "ref.a.shortcut", "ref.a.ce",
                "ref.a.partial"} & kept
    # a word in a string, a comment or a docstring, and a library's function of the same name, reach nothing
    assert not {"ref.a.unused", "ref.b.never", "ref.a.softmax"} & kept


def test_a_value_the_notebook_reaches_keeps_what_it_holds(toy):
    package, notebooks = toy
    extra = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from plmcourse.ref.a import lm_loss\nimport plmcourse.data\nlm_loss(plmcourse.data.TABLE)")])
    nbformat.write(extra, notebooks[0].parent / "extra.ipynb")
    kept = names(exposure.reached(package, [*notebooks, notebooks[0].parent / "extra.ipynb"]))
    assert {"ref.a.lm_loss", "ref.a.ce", "ref.a.partial", "data.TABLE", "data._table"} <= kept
    assert "ref.a.shortcut" not in kept


def test_a_table_read_by_a_constant_key_keeps_that_entry_alone(toy, tmp_path):
    """`A.POOLS['a']` reaches pool_a, not the table's other entries: pool_b is stubbed, and so is POOLS['b']
    (the key stays); a key that is a variable (every_pool) reaches the whole table."""
    package, notebooks = toy
    kept = names(exposure.reached(package, notebooks))
    assert {"ref.a.POOLS", "ref.a.pool_a"} <= kept and not {"ref.a.pool_b", "ref.a.every_pool"} & kept
    target = sandbox.stubbed_copy(package, tmp_path / "copy", {}, exposure.unused(package, notebooks))
    namespace = {}
    exec((target / "ref" / "a.py").read_text(), namespace)
    assert namespace["POOLS"]["a"](1) == 1 and sorted(namespace["POOLS"]) == ["a", "b"]
    with pytest.raises(RuntimeError, match=r"plmcourse.ref.a.POOLS\['b'\] is not available while grading"):
        namespace["POOLS"]["b"](1)
    with pytest.raises(RuntimeError, match="plmcourse.ref.a.pool_b is not available while grading"):
        namespace["pool_b"](1)
    extra = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from plmcourse.ref.a import every_pool, POOLS\nevery_pool('a', 1)\nPOOLS['a'](1)")])
    nbformat.write(extra, tmp_path / "extra.ipynb")
    kept = names(exposure.reached(package, [*notebooks, tmp_path / "extra.ipynb"]))
    assert {"ref.a.POOLS", "ref.a.pool_a", "ref.a.pool_b", "ref.a.every_pool"} <= kept
    assert "POOLS['b']" not in exposure.unused(package, [*notebooks, tmp_path / "extra.ipynb"])["plmcourse.ref.a"]


def test_a_stubbed_table_entry_keeps_the_lines_and_the_other_entries():
    source = ('def f(x):\n    return x\n\ndef g(x):\n    return -x\n\n'
              'T = {"f": f, "g": (\n    g),\n    "h": lambda x: 2 * x}\nafter = T["f"](3) + T["h"](1)\n')
    stubbed = sandbox.stub_source(source, "plmcourse.ref.m", {"T['g']"}, why=sandbox.NOT_USED)
    assert len(stubbed.splitlines()) == len(source.splitlines())
    namespace = {}
    exec(stubbed, namespace)
    assert namespace["after"] == 5 and list(namespace["T"]) == ["f", "g", "h"]
    with pytest.raises(RuntimeError, match=r"plmcourse.ref.m.T\['g'\] is not available while grading"):
        namespace["T"]["g"](1)


def test_what_only_a_stubbed_function_reached_is_not_kept(toy):
    package, notebooks = toy
    kept = names(exposure.reached(package, notebooks, stubbed={("plmcourse.ref.a", "exercise"),
                                                                ("plmcourse.ref.a", "Model.own")}))
    assert "ref.a.exercise" in kept  # still there, as a stub
    assert "ref.a.deep" not in kept and "ref.a.only_own_reaches" not in kept
    assert "ref.a.inner" in kept     # the class's other method still reaches it


def test_unused_lists_every_module_outside_the_kernel_s_folder(toy):
    package, notebooks = toy
    unused = exposure.unused(package, notebooks)
    assert unused["plmcourse.ref.a"] == {"unused", "softmax", "TABLE", "ce", "partial", "lm_loss", "shortcut", "decorated",
                                          "Typed", "annotated", "pool_b", "every_pool", "POOLS['b']"}
    assert unused["plmcourse.ref.b"] == {"never"}
    assert "plmcourse.grading" not in unused


def test_the_stub_says_why_it_is_there():
    source = "def f(x):\n    \"\"\"Doc.\"\"\"\n    return x\n"
    stubbed = sandbox.stub_source(source, "plmcourse.ref.m", {"f"}, why=sandbox.NOT_USED)
    namespace = {}
    exec(stubbed, namespace)
    with pytest.raises(RuntimeError, match="plmcourse.ref.m.f is not available while grading: this assignment's "
                                           "notebook does not use it"):
        namespace["f"](1)


def test_a_stubbed_value_says_why_and_its_module_still_imports():
    source = ("import functools\n\ndef ce(x, target):\n    return x\n\n"
              "lm_loss = functools.partial(\n    ce,\n    target=0)\nafter = 1\n")
    stubbed = sandbox.stub_source(source, "plmcourse.ref.m", {"lm_loss", "ce"}, why=sandbox.NOT_USED)
    assert len(stubbed.splitlines()) == len(source.splitlines())  # the lines keep their numbers
    namespace = {}
    exec(stubbed, namespace)
    assert namespace["after"] == 1
    said = "plmcourse.ref.m.lm_loss is not available while grading: this assignment's notebook does not use it"
    for use in (lambda f: f(1), lambda f: f[0], lambda f: list(f), lambda f: len(f), lambda f: bool(f)):
        with pytest.raises(RuntimeError, match=said):
            use(namespace["lm_loss"])
    with pytest.raises(AttributeError, match=said):
        namespace["lm_loss"].func  # functools.partial's own attribute is gone with it
    assert getattr(namespace["lm_loss"], "__wrapped__", None) is None  # introspection with a default still works


@pytest.fixture(scope="module")
def course_modules():
    return exposure.index(SOURCE)


def reached_in(assignment, modules):
    notebooks = sorted((COURSE / "source" / assignment).glob("*.ipynb"))
    own = sandbox.graded_functions(notebooks)
    stubbed = {(module, name) for module in modules if module.split(".")[1:2] in (["ref"], ["nn"], ["data"])
               for name in own}
    return names(exposure.reached(SOURCE, notebooks, stubbed, modules, sandbox.kernel_modules(SOURCE)))


@pytest.mark.parametrize("assignment, reaches, does_not", [
    # 02's solution builds its cross-entropy on 01's log_softmax: the course means it to
    ("02_language_models_elmo", {"ref.word_vectors.log_softmax"}, {"ref.sentence_embeddings.info_nce_loss"}),
    # 09's prefix attention on 03's attention; 09 never uses 15's SFT loss
    ("09_peft", {"ref.attention.scaled_dot_product_attention"}, {"ref.instruct.sft_loss", "nn.instruct.sft_loss"}),
    # CLIP's loss is InfoNCE both ways: 08's InfoNCE is not 14's to call
    ("14_text_and_images", set(), {"ref.sentence_embeddings.info_nce_loss", "nn.sentence_embeddings.info_nce_loss",
                                   "ref.objectives.cross_entropy", "nn.objectives.cross_entropy"}),
    # 05's cells name its own causal LM loss only; 02's cross-entropy was reached through that stub alone
    ("05_gpt", {"nn.models.GPT"}, {"nn.objectives.cross_entropy", "ref.objectives.cross_entropy",
                                   "ref.instruct.sft_loss"}),
])
def test_the_course_s_assignments_reach_what_they_use_only(assignment, reaches, does_not, course_modules):
    kept = reached_in(assignment, course_modules)
    assert reaches <= kept
    assert not does_not & kept, sorted(does_not & kept)


@pytest.mark.integration
def test_the_search_tries_only_what_the_notebooks_reach():
    """grading_package searches only what an assignment reaches (the rest is stubbed whatever it computes):
    a softmax outside `only` is not tried, and so not found."""
    attention, log_softmax = "plmcourse/ref/attention.py", ("plmcourse/ref/word_vectors.py", "log_softmax")
    search = sandbox.find_implementations(SOURCE, {"softmax"}, only={(attention, "softmax"), log_softmax})
    assert search.found == {attention: ["softmax"]} and search.tried == 2, search  # log_softmax tried, failed
    elsewhere = sandbox.find_implementations(SOURCE, {"softmax"}, only={log_softmax})
    assert elsewhere.found == {} and elsewhere.tried == 1, elsewhere


IMPORT_EVERY_MODULE = r'''
import importlib, json, sys
copies, failed = json.loads(sys.argv[1]), {}
for folder, modules in copies.items():
    sys.path.insert(0, folder)
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as error:
            failed.setdefault(folder, []).append(f"{module}: {type(error).__name__}: {error}")
    sys.path.pop(0)
    for name in [n for n in sys.modules if n == "plmcourse" or n.startswith("plmcourse.")]:
        del sys.modules[name]
print(json.dumps(failed))
'''


def test_every_module_of_every_assignment_s_kernel_copy_imports(tmp_path, course_modules):
    """Stubbing what a notebook does not reach (functions, classes and module-level values) must leave every
    module importable in every assignment's kernel: an import runs its module's top level, the defaults and
    decorators of its definitions, and whatever other modules it imports. The copies are made as grading makes
    them (sandbox.stubbed_copy), the assignment's own exercises stubbed too; only the behavioural search is left out."""
    import json
    import subprocess
    import sys

    present = sandbox.kernel_modules(SOURCE)
    files = {sandbox._module_name(p.relative_to(SOURCE.parent).as_posix()): p.relative_to(SOURCE.parent).as_posix()
             for p in SOURCE.rglob("*.py") if "__pycache__" not in p.parts}
    copies = {}
    for folder in sorted((COURSE / "source").iterdir()):
        notebooks = sorted(folder.glob("*.ipynb"))
        names = sandbox.graded_functions(notebooks)
        own = {relative: set(names) for module, relative in files.items()
               if module in present and relative.split("/")[1] in sandbox.STUBBED_FOLDERS}
        stubbed = {(module, name) for module, relative in files.items() if relative in own for name in names}
        unused = exposure.unused(SOURCE, notebooks, stubbed, course_modules, present)
        assert sum(map(len, unused.values())) > 100, folder.name  # most of the package is stubbed
        target = sandbox.stubbed_copy(SOURCE, tmp_path / folder.name, own, unused)
        copies[str(target.parent)] = sorted(present)
    run = subprocess.run([sys.executable, "-c", IMPORT_EVERY_MODULE, json.dumps(copies)], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout) == {}
    assert len(copies) == 16
